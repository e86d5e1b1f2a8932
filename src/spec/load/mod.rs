//! Reading spec files into validated, typed documents.
//!
//! Paths → files (directories recursively, `*.yaml`/`*.yml`) → YAML documents with positions
//! → schema validation → typed values, with `Defaults` merged into each channel. Every problem
//! becomes a [`Diagnostic`] and loading goes on, so one run reports all of them. Only a path
//! that cannot be read at all is an error of the run (exit code 2).
//!
//! YAML documents that are not dlqctl documents (no dlqctl `apiVersion` and no dlqctl `kind`)
//! are skipped and counted, so a pre-commit hook over `*.yaml` does not trip on CI configs; so
//! are files that cannot be parsed (CloudFormation tags, Helm templates, duplicate keys, other
//! encodings) unless their text declares a dlqctl document.
//!
//! One file per stage: `discover` (which files), `parse` (files to raw documents, then typed
//! ones after the schema), `expand` (`${VAR}` in Targets, with `spec::vars`'s grammar) and
//! `merge` (Defaults under each channel), `paths` (a relative `deadLetter.archive.to` against
//! its file's folder); `workspace` holds the types they pass along. This
//! module runs them in order ([`load`], [`load_str`]) and re-exports the public types; no
//! stage imports it.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::Value;

mod discover;
mod expand;
mod merge;
mod parse;
mod paths;
mod workspace;

pub use discover::{TARGETS_FILE_NAMES, discover_defaults, discover_targets};
pub use parse::MAX_FILE_BYTES;
pub use workspace::{Doc, LoadError, Workspace};

use crate::diag::Diagnostic;
use crate::spec::model::{Channel, Defaults, Targets};
use crate::spec::schema::DocKind;
use discover::{collect_files, dedup_paths};
use parse::{FileRead, add_read, parse_text, read, read_file, typed};
use workspace::RawDoc;

/// Loads `paths`; `targets_file` overrides the discovery of `dlqctl.yaml`.
pub fn load(paths: &[PathBuf], targets_file: Option<&Path>) -> Result<Workspace, LoadError> {
    let mut ws = Workspace::default();
    let mut raw = Vec::new();
    let mut files = Vec::new();
    for p in paths {
        collect_files(p, &mut files)?;
    }
    if let Some(t) = targets_file {
        if !t.is_file() {
            return Err(LoadError::NotFound(t.to_path_buf()));
        }
        files.push(t.to_path_buf());
    }
    dedup_paths(&mut files);
    // Reading and parsing are independent per file: done in parallel, then added in the
    // files' order, so file ids, findings and their order do not depend on timing.
    let read: Vec<Result<FileRead, LoadError>> = files.par_iter().map(|f| read(f)).collect();
    for (f, r) in files.iter().zip(read) {
        add_read(f, r?, &mut ws, &mut raw);
    }
    if targets_file.is_none()
        && !raw.iter().any(|d| d.kind == DocKind::Targets)
        && let Some(found) = discover_targets(paths, &files)
    {
        read_file(&found, &mut ws, &mut raw)?;
        files.push(found);
    }
    // No Defaults among what was read: the one beside or above the inputs, up to the folder of
    // `dlqctl.yaml` (found beside or above them, or among them), as `dlqctl.yaml` is found: a
    // hook given only the changed files then reads what a run over every file reads. Not with
    // `--targets`, which names what to read, nor with a Targets document under another name
    // (a folder of independent documents, such as lint's fixtures).
    let targets_dir = raw
        .iter()
        .filter(|d| d.kind == DocKind::Targets)
        .map(|d| ws.sources.path(d.loc.file))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| TARGETS_FILE_NAMES.contains(&n))
        })
        .and_then(|p| p.parent().map(Path::to_path_buf));
    if targets_file.is_none()
        && !raw.iter().any(|d| d.kind == DocKind::Defaults)
        && let Some(top) = targets_dir
    {
        for found in discover_defaults(paths, &files, &top) {
            let mut docs = Vec::new();
            read_file(&found, &mut ws, &mut docs)?;
            raw.extend(docs.into_iter().filter(|d| d.kind == DocKind::Defaults));
        }
    }
    finish(&mut ws, raw);
    Ok(ws)
}

/// Loads documents from text (tests and fuzzing use this; `load` wraps it with files).
pub fn load_str(path: &str, text: &str) -> Workspace {
    let mut ws = Workspace::default();
    let mut raw = Vec::new();
    parse_text(PathBuf::from(path), text.to_owned(), &mut ws, &mut raw);
    finish(&mut ws, raw);
    ws
}

fn finish(ws: &mut Workspace, raw: Vec<RawDoc>) {
    let (mut defaults_raw, rest): (Vec<_>, Vec<_>) =
        raw.into_iter().partition(|d| d.kind == DocKind::Defaults);
    if defaults_raw.len() > 1 {
        let first = defaults_raw[0].loc;
        for extra in &defaults_raw[1..] {
            ws.diagnostics.push(
                Diagnostic::error(
                    "spec/defaults-duplicate",
                    "more than one Defaults document; dlqctl reads one per run",
                )
                .at(extra.loc)
                .related(first, "the first Defaults document")
                .hint("merge them into one document"),
            );
        }
        defaults_raw.truncate(1);
    }
    let merge_from = defaults_raw
        .first()
        .map(|d| (d.json.clone(), d.locs.clone()));
    if let Some(d) = defaults_raw.pop() {
        ws.defaults = typed::<Defaults>(d, ws);
    }
    // Even invalid defaults are merged: a channel then reports the bad value at its place in
    // the defaults file (repeats collapse), instead of a misleading "missing field".
    let backends = merge::target_backends(&rest);
    // A channel document reads only itself and the defaults: merged, schema-checked and typed
    // side by side (plan at 5,000 channels waited on this before its first read, BENCHMARKS.md
    // §13), then taken in the documents' order with the rest, so findings keep their order.
    let steps: Vec<Step> = rest
        .into_par_iter()
        .map(|mut d| match d.kind {
            DocKind::Channel => {
                if let Some(defaults) = &merge_from {
                    merge::defaults_into(&mut d, defaults, &backends);
                }
                Step::Channel(Box::new(parse::checked::<Channel>(d)))
            }
            _ => Step::Other(d),
        })
        .collect();
    // Exactly as many as there are: a channel document is ~2 KB inline, and a vector grown by
    // doubling held 8,192 places for 5,000 channels (BENCHMARKS.md §13).
    ws.channels.reserve_exact(
        steps
            .iter()
            .filter(|s| matches!(s, Step::Channel(c) if c.is_ok()))
            .count(),
    );
    for step in steps {
        let mut d = match step {
            Step::Channel(checked) => {
                match *checked {
                    Ok(mut c) => {
                        paths::anchor(&mut c, &ws.sources);
                        ws.channels.push(c);
                    }
                    Err(problems) => ws.diagnostics.extend(problems),
                }
                continue;
            }
            Step::Other(d) => d,
        };
        match d.kind {
            DocKind::Targets => {
                expand::expand_variables(&mut d, ws);
                let names: Vec<String> = d
                    .json
                    .get("targets")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                let file = ws.sources.path(d.loc.file).to_path_buf();
                match typed::<Targets>(d, ws) {
                    Some(t) => ws.targets.push(t),
                    None => {
                        for n in names {
                            ws.unread_targets.entry(n).or_insert_with(|| file.clone());
                        }
                    }
                }
            }
            DocKind::Channel | DocKind::Defaults => {}
        }
    }
}

/// A document of [`finish`] after its side-by-side stage: a channel checked, or another kind
/// still to be read in order. The channel is boxed: ~2 KB inline beside a raw document's
/// 160 bytes.
enum Step {
    Channel(Box<Result<Doc<Channel>, Vec<Diagnostic>>>),
    Other(RawDoc),
}

#[cfg(test)]
mod tests {
    //! What the tests of every stage share: a channel, a Targets document, files written to
    //! a temporary folder, and the rules of the findings.

    use super::*;

    pub(super) const CHANNEL: &str = "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: orders}\nspec: {target: sqs, retry: {maxAttempts: 3}}\n";

    pub(super) const TARGETS: &str = "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  sqs: {backend: sqs, region: eu-west-1}\n";

    pub(super) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create the folder");
        }
        std::fs::write(&path, text).expect("write the file");
        path
    }

    pub(super) fn rules(ws: &Workspace) -> Vec<&'static str> {
        ws.diagnostics.iter().map(|d| d.rule).collect()
    }

    /// Each finding as `rule | message | hint | line:col`.
    pub(super) fn found(ws: &Workspace) -> Vec<String> {
        ws.diagnostics
            .iter()
            .map(|d| {
                let at = d.loc.map(|l| (l.span.line, l.span.col)).unwrap_or_default();
                format!(
                    "{} | {} | {} | {}:{}",
                    d.rule,
                    d.message,
                    d.hint.as_deref().unwrap_or("-"),
                    at.0,
                    at.1
                )
            })
            .collect()
    }
}
