//! Discovery: which files a run reads. Directories are walked recursively for `*.yaml` and
//! `*.yml` (symlinked files count, symlinked folders are not followed), a file named twice is
//! read once, and `dlqctl.yaml` is looked for beside and above the inputs when no Targets
//! document was given or read.

use std::path::{Path, PathBuf};

use super::workspace::LoadError;

/// Names of the targets file looked for beside and above the inputs.
pub const TARGETS_FILE_NAMES: [&str; 2] = ["dlqctl.yaml", "dlqctl.yml"];

pub(super) fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let meta = match fs_err::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LoadError::NotFound(path.to_path_buf()));
        }
        Err(e) => return Err(LoadError::Io(path.to_path_buf(), e)),
    };
    if !meta.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(path).follow_links(false) {
        let entry = entry.map_err(|e| {
            let p = e.path().unwrap_or(path).to_path_buf();
            LoadError::Io(
                p,
                e.into_io_error()
                    .unwrap_or_else(|| std::io::Error::other("loop")),
            )
        })?;
        let is_yaml = entry
            .path()
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml");
        // Symlinked files count (specs shared between folders); symlinked folders are not
        // followed, so a link loop cannot make the walk endless.
        let is_file =
            entry.file_type().is_file() || (entry.path_is_symlink() && entry.path().is_file());
        if is_file && is_yaml {
            found.push(entry.into_path());
        }
    }
    found.sort();
    out.extend(found);
    Ok(())
}

pub(super) fn dedup_paths(files: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(std::fs::canonicalize(f).unwrap_or_else(|_| f.clone())));
}

/// `dlqctl.yaml` in the inputs' folders or the nearest folder above them.
pub fn discover_targets(paths: &[PathBuf], already: &[PathBuf]) -> Option<PathBuf> {
    for p in paths {
        let start = if p.is_dir() {
            Some(p.as_path())
        } else {
            p.parent()
        };
        let abs = start.and_then(|s| {
            std::path::absolute(if s.as_os_str().is_empty() {
                Path::new(".")
            } else {
                s
            })
            .ok()
        })?;
        for dir in abs.ancestors() {
            for name in TARGETS_FILE_NAMES {
                let candidate = dir.join(name);
                if candidate.is_file() && !already.iter().any(|a| same_file(a, &candidate)) {
                    return Some(candidate);
                }
            }
        }
    }
    None
}

/// The files holding a `Defaults` document beside and above the inputs, up to the folder of
/// the Targets document (`top`), the way `dlqctl.yaml` is found: each input's folder, then
/// each folder above it, the YAML files of each folder in name order, nearest folder first.
/// Files in `already` (read as inputs) are left out. Inputs outside `top` look only in their
/// own folder and above, until `top` or the file system's root; only files that say
/// `kind: Defaults` in a dlqctl document are returned (read, never parsed here).
///
/// So a pre-commit hook given only the changed files reads the same Defaults a run over every
/// file does, as long as the Defaults file sits on the way from the specs to the Targets file.
pub fn discover_defaults(paths: &[PathBuf], already: &[PathBuf], top: &Path) -> Vec<PathBuf> {
    let top = if top.as_os_str().is_empty() {
        Path::new(".")
    } else {
        top
    };
    let top = std::path::absolute(top).unwrap_or_else(|_| top.to_path_buf());
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        let start = if p.is_dir() {
            Some(p.as_path())
        } else {
            p.parent()
        };
        let Some(abs) = start.and_then(|s| {
            std::path::absolute(if s.as_os_str().is_empty() {
                Path::new(".")
            } else {
                s
            })
            .ok()
        }) else {
            continue;
        };
        if !abs.starts_with(&top) {
            continue;
        }
        for dir in abs.ancestors() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|d| {
                    d.filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|f| {
                            f.extension().is_some_and(|e| e == "yaml" || e == "yml") && f.is_file()
                        })
                        .collect()
                })
                .unwrap_or_default();
            files.sort();
            for f in files {
                if already.iter().chain(&out).any(|a| same_file(a, &f)) {
                    continue;
                }
                if holds_defaults(&f) {
                    out.push(f);
                }
            }
            if dir == top {
                break;
            }
        }
    }
    out
}

/// Whether a file (at most [`super::parse::MAX_FILE_BYTES`]) has a line `kind: Defaults` and says
/// it is a dlqctl document (`apiVersion: dlqctl/...`).
fn holds_defaults(f: &Path) -> bool {
    if std::fs::metadata(f).map_or(true, |m| m.len() > super::parse::MAX_FILE_BYTES) {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(f) else {
        return false;
    };
    let kind = text.lines().any(|l| {
        let l = l.trim();
        l.strip_prefix("kind:").map(|v| {
            v.split('#')
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches(['"', '\''])
        }) == Some("Defaults")
    });
    kind && text.contains("dlqctl/")
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::load;
    use super::super::tests::{CHANNEL, TARGETS, rules, write};
    use super::*;
    use crate::spec::load::Workspace;

    /// The paths of the files a workspace read, relative to `dir`.
    fn read_files(ws: &Workspace, dir: &Path) -> Vec<String> {
        (0..ws.sources.len())
            .map(|i| {
                let p = ws.sources.path(i);
                p.strip_prefix(dir)
                    .unwrap_or(p)
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    #[test]
    fn a_folder_is_read_recursively_yaml_and_yml_files_only_in_path_order() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        write(dir, "dlqctl.yaml", TARGETS);
        write(dir, "specs/b.yml", &CHANNEL.replace("orders", "b"));
        write(dir, "specs/a/a.yaml", &CHANNEL.replace("orders", "a"));
        write(dir, "specs/notes.txt", CHANNEL);
        write(dir, "specs/yaml", CHANNEL);
        let ws = load(&[dir.join("specs")], None).expect("loads");
        assert_eq!(rules(&ws), Vec::<&str>::new());
        assert_eq!(
            read_files(&ws, dir),
            ["specs/a/a.yaml", "specs/b.yml", "dlqctl.yaml"]
        );
        assert_eq!(ws.channels.len(), 2);
        assert_eq!(ws.targets.len(), 1, "dlqctl.yaml found above the folder");
    }

    #[test]
    fn a_missing_path_or_targets_file_is_an_error_of_the_run() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        let missing = dir.join("nope.yaml");
        assert!(matches!(
            load(std::slice::from_ref(&missing), None),
            Err(LoadError::NotFound(p)) if p == missing
        ));
        let spec = write(dir, "c.yaml", CHANNEL);
        assert!(matches!(
            load(std::slice::from_ref(&spec), Some(&missing)),
            Err(LoadError::NotFound(p)) if p == missing
        ));
        // A folder is not a targets file.
        assert!(matches!(
            load(std::slice::from_ref(&spec), Some(dir)),
            Err(LoadError::NotFound(p)) if p == dir
        ));
        let targets = write(dir, "t.yaml", TARGETS);
        let ws = load(&[spec], Some(&targets)).expect("loads");
        assert_eq!(read_files(&ws, dir), ["c.yaml", "t.yaml"]);
        assert_eq!(ws.targets.len(), 1);
    }

    #[test]
    fn a_file_named_twice_is_read_once() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        let spec = write(dir, "c.yaml", CHANNEL);
        let targets = write(dir, "dlqctl.yaml", TARGETS);
        let ws = load(
            &[spec.clone(), dir.join(".").join("c.yaml"), targets.clone()],
            Some(&targets),
        )
        .expect("loads");
        assert_eq!(read_files(&ws, dir), ["c.yaml", "dlqctl.yaml"]);
        assert_eq!(rules(&ws), Vec::<&str>::new());
    }

    #[test]
    fn the_targets_file_is_discovered_only_when_none_was_given_or_read() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        let spec = write(dir, "team/c.yaml", CHANNEL);
        write(dir, "dlqctl.yaml", TARGETS);
        // Beside or above the inputs: the nearest one.
        let ws = load(std::slice::from_ref(&spec), None).expect("loads");
        assert_eq!(read_files(&ws, dir), ["team/c.yaml", "dlqctl.yaml"]);
        let near = write(dir, "team/dlqctl.yml", TARGETS);
        let ws = load(std::slice::from_ref(&spec), None).expect("loads");
        assert_eq!(read_files(&ws, dir), ["team/c.yaml", "team/dlqctl.yml"]);
        assert_eq!(
            discover_targets(std::slice::from_ref(&spec), &[]),
            Some(near.clone())
        );
        // One already read is not read again: the next one up is.
        assert_eq!(
            discover_targets(std::slice::from_ref(&spec), std::slice::from_ref(&near)),
            Some(dir.join("dlqctl.yaml"))
        );
        // A Targets document among the inputs: nothing is looked for.
        let own = write(
            dir,
            "team/own.yaml",
            &TARGETS.replace("eu-west-1", "us-east-1"),
        );
        let ws = load(&[spec.clone(), own], None).expect("loads");
        assert_eq!(read_files(&ws, dir), ["team/c.yaml", "team/own.yaml"]);
        assert!(same_file(&near, &dir.join("team/../team/dlqctl.yml")));
        assert!(!same_file(&near, &spec));
        assert!(!same_file(&near, &dir.join("missing.yaml")));
    }

    #[test]
    fn symlinked_files_are_read_and_symlinked_folders_are_not_followed() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        let shared = write(dir, "shared/c.yaml", CHANNEL);
        write(dir, "specs/dlqctl.yaml", TARGETS);
        std::os::unix::fs::symlink(&shared, dir.join("specs/linked.yaml")).expect("file link");
        // A folder whose name looks like a spec, and a link to it: neither is a file.
        std::fs::create_dir_all(dir.join("elsewhere.yaml")).expect("folder");
        std::os::unix::fs::symlink(dir.join("elsewhere.yaml"), dir.join("specs/folder.yaml"))
            .expect("folder link");
        let ws = load(&[dir.join("specs")], None).expect("loads");
        assert_eq!(
            read_files(&ws, dir),
            ["specs/dlqctl.yaml", "specs/linked.yaml"]
        );
        assert_eq!(ws.channels.len(), 1);
    }
}
