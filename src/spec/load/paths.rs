//! The one path a spec holds (`deadLetter.archive.to`), made relative to the folder of the
//! file that wrote it, so a spec means the same whatever the working directory: the channel's
//! file, or the Defaults document's when the value came from there (merged values keep their
//! file's positions). An `s3://` location and an absolute path are left as written.

use std::path::Path;

use super::workspace::Doc;
use crate::diag::Sources;
use crate::spec::model::Channel;

/// Where `deadLetter.archive.to` is written in a channel (after the Defaults merge).
const ARCHIVE_TO: &str = "/spec/deadLetter/archive/to";

/// Rewrites a relative `deadLetter.archive.to` of `doc` against its file's folder.
pub(super) fn anchor(doc: &mut Doc<Channel>, sources: &Sources) {
    let Some(to) = doc
        .value
        .spec
        .dead_letter
        .as_mut()
        .and_then(|d| d.archive.as_mut())
        .and_then(|a| a.to.as_mut())
    else {
        return;
    };
    if !doc.locs.has(ARCHIVE_TO) {
        return;
    }
    let file = sources.path(doc.locs.value(ARCHIVE_TO).file);
    if let Some(joined) = anchored(to, file) {
        *to = joined;
    }
}

/// `to` joined to `file`'s folder, when `to` is a relative directory and the folder is not
/// the working directory itself.
fn anchored(to: &str, file: &Path) -> Option<String> {
    let t = to.trim();
    if t.is_empty() || t.contains("://") || Path::new(t).is_absolute() {
        return None;
    }
    let folder = file.parent().filter(|p| !p.as_os_str().is_empty())?;
    Some(folder.join(t).display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_archive_is_under_the_folder_of_the_file_that_wrote_it() {
        let f = Path::new("specs/payments/channel.yaml");
        assert_eq!(
            anchored("archive", f).as_deref(),
            Some("specs/payments/archive")
        );
        assert_eq!(
            anchored("../shared", f).as_deref(),
            Some("specs/payments/../shared")
        );
        // The working directory's own file: as written.
        assert_eq!(anchored("archive", Path::new("channel.yaml")), None);
        // Absolute paths and S3 are places of their own.
        assert_eq!(anchored("/var/dlq", f), None);
        assert_eq!(anchored("s3://b/p", f), None);
    }

    #[test]
    fn a_path_from_defaults_is_anchored_at_the_defaults_file() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let root = tmp.path();
        std::fs::create_dir_all(root.join("shared")).expect("mkdir");
        std::fs::create_dir_all(root.join("team")).expect("mkdir");
        std::fs::write(
            root.join("shared/defaults.yaml"),
            "apiVersion: dlqctl/v1\nkind: Defaults\nspec:\n  deadLetter: {archive: {to: archive}}\n",
        )
        .expect("write");
        let channel = |name: &str, own: &str| {
            format!(
                "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {name}}}\nspec:\n  target: t\n  retry: {{maxAttempts: 2}}\n{own}"
            )
        };
        std::fs::write(root.join("team/a.yaml"), channel("a", "")).expect("write");
        std::fs::write(
            root.join("team/b.yaml"),
            channel("b", "  deadLetter: {archive: {to: mine}}\n"),
        )
        .expect("write");
        let ws = super::super::load(&[root.to_path_buf()], None).expect("load");
        let to = |name: &str| {
            ws.channels
                .iter()
                .find(|c| c.value.metadata.name == name)
                .and_then(|c| {
                    c.value
                        .spec
                        .dead_letter
                        .as_ref()?
                        .archive
                        .as_ref()?
                        .to
                        .clone()
                })
                .expect("archive.to")
        };
        assert_eq!(to("a"), root.join("shared/archive").display().to_string());
        assert_eq!(to("b"), root.join("team/mine").display().to_string());
    }
}
