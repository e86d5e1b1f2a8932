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

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::locate::Locations;
use super::model::{API_VERSION, Backend, Channel, Defaults, Targets};
use super::pointer::escape;
use super::schema::{self, DocKind, did_you_mean};
use super::vars;
use super::yaml::{self, Document, Limits, NodeValue, Span, YamlError};
use crate::diag::{Diagnostic, Loc, Sources};

/// Larger files are refused unread: a spec is a few kilobytes.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Names of the targets file looked for beside and above the inputs.
pub const TARGETS_FILE_NAMES: [&str; 2] = ["dlqctl.yaml", "dlqctl.yml"];

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: no such file or directory", .0.display())]
    NotFound(PathBuf),
    #[error("{}: {}", .0.display(), .1)]
    Io(PathBuf, #[source] std::io::Error),
}

/// A typed document and where it came from.
#[derive(Debug, Clone)]
pub struct Doc<T> {
    pub value: T,
    pub locs: Locations,
    /// The document's start (for findings about it as a whole).
    pub loc: Loc,
}

/// Everything read in one run.
#[derive(Debug, Default)]
pub struct Workspace {
    pub sources: Sources,
    pub channels: Vec<Doc<Channel>>,
    pub targets: Vec<Doc<Targets>>,
    pub defaults: Option<Doc<Defaults>>,
    pub diagnostics: Vec<Diagnostic>,
    /// YAML documents that were not dlqctl documents.
    pub skipped: usize,
    /// Target fields whose `${VAR}` could not be expanded (file, JSON pointer): reported where
    /// they were loaded, and left out of the checks of their value (nothing else is).
    pub unexpanded: std::collections::BTreeSet<(crate::diag::FileId, String)>,
    /// Targets named in Targets documents that failed validation, with that document's file:
    /// a channel naming one is not checked against it, and is not told that no Targets
    /// document exists (the document's own errors say what is wrong).
    pub unread_targets: std::collections::BTreeMap<String, PathBuf>,
}

/// A document that passed the YAML layer, before schema validation.
struct RawDoc {
    kind: DocKind,
    json: Value,
    locs: Locations,
    loc: Loc,
}

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

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
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

fn dedup_paths(files: &mut Vec<PathBuf>) {
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

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// One file, read and parsed (the part of loading that needs no shared state).
enum FileRead {
    /// Over the cap: its size when the file system said it, `None` when only reading told.
    TooLarge(Option<u64>),
    NotUtf8(std::string::FromUtf8Error),
    Parsed(String, Result<Vec<Document>, YamlError>),
}

fn read(path: &Path) -> Result<FileRead, LoadError> {
    let io = |e: std::io::Error| LoadError::Io(path.to_path_buf(), e);
    let size = fs_err::metadata(path).map_err(io)?.len();
    if size > MAX_FILE_BYTES {
        return Ok(FileRead::TooLarge(Some(size)));
    }
    // The size on disk can lie (`/dev/zero`, a pipe, a file growing while it is read): the
    // read itself stops one byte past the cap.
    let mut bytes = Vec::new();
    {
        use std::io::Read;
        fs_err::File::open(path)
            .map_err(io)?
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
    }
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Ok(FileRead::TooLarge(None));
    }
    Ok(match String::from_utf8(bytes) {
        Ok(text) => {
            let text = strip_bom(text);
            let parsed = yaml::parse(&text, Limits::default());
            FileRead::Parsed(text, parsed)
        }
        Err(e) => FileRead::NotUtf8(e),
    })
}

fn read_file(path: &Path, ws: &mut Workspace, raw: &mut Vec<RawDoc>) -> Result<(), LoadError> {
    add_read(path, read(path)?, ws, raw);
    Ok(())
}

fn add_read(path: &Path, read: FileRead, ws: &mut Workspace, raw: &mut Vec<RawDoc>) {
    match read {
        FileRead::Parsed(text, parsed) => add_parsed(path.to_path_buf(), text, parsed, ws, raw),
        FileRead::TooLarge(size) => {
            let file = ws.sources.add(path.to_path_buf(), String::new());
            ws.diagnostics.push(
                Diagnostic::error(
                    "file/too-large",
                    format!(
                        "file is {} bytes; spec files may be at most {MAX_FILE_BYTES} bytes",
                        size.map_or_else(
                            || format!("more than {MAX_FILE_BYTES}"),
                            |n| n.to_string()
                        )
                    ),
                )
                .at(Loc {
                    file,
                    span: Span {
                        line: 1,
                        col: 1,
                        ..Span::default()
                    },
                })
                .hint("split it into one file per channel"),
            );
        }
        FileRead::NotUtf8(e) => {
            let valid = e.utf8_error().valid_up_to();
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let before = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            let start = before.len();
            if !declares_dlqctl(&lossy) {
                ws.skipped += 1;
                return;
            }
            let file = ws.sources.add(path.to_path_buf(), lossy);
            ws.diagnostics.push(
                Diagnostic::error(
                    "file/not-utf8",
                    format!("file is not UTF-8 text: invalid byte at offset {valid}"),
                )
                .at(Loc {
                    file,
                    span: Span {
                        start,
                        end: start + 1,
                        line,
                        col,
                    },
                })
                .hint("spec files must be UTF-8; is this a binary file or another encoding?"),
            );
        }
    }
}

/// Whether a file's text says it holds a dlqctl document, for files that cannot be parsed:
/// a line that names dlqctl in its `apiVersion`, or a dlqctl `kind` (keys quoted or not,
/// values quoted or not, comments after them ignored). Generous on purpose: a broken dlqctl
/// file must be reported, never skipped.
fn declares_dlqctl(text: &str) -> bool {
    let value = |line: &str, key: &str| {
        let line = line.trim_start_matches(['{', ',', ' ', '\t']);
        let rest = line
            .strip_prefix(key)
            .or_else(|| line.strip_prefix(&format!("\"{key}\"")))
            .or_else(|| line.strip_prefix(&format!("'{key}'")))?;
        let rest = rest.trim_start().strip_prefix(':')?;
        let v = rest.split('#').next().unwrap_or("");
        Some(
            v.trim()
                .trim_end_matches([',', '}'])
                .trim()
                .trim_matches(|c| c == '"' || c == '\'')
                .to_owned(),
        )
    };
    text.lines().map(str::trim_start).any(|line| {
        value(line, "apiVersion").is_some_and(|v| v.contains("dlqctl"))
            || value(line, "kind").is_some_and(|v| DocKind::from_kind(&v).is_some())
    })
}

fn strip_bom(text: String) -> String {
    match text.strip_prefix('\u{feff}') {
        Some(t) => t.to_owned(),
        None => text,
    }
}

fn parse_text(path: PathBuf, text: String, ws: &mut Workspace, raw: &mut Vec<RawDoc>) {
    let text = strip_bom(text);
    let parsed = yaml::parse(&text, Limits::default());
    add_parsed(path, text, parsed, ws, raw);
}

fn add_parsed(
    path: PathBuf,
    text: String,
    parsed: Result<Vec<Document>, YamlError>,
    ws: &mut Workspace,
    raw: &mut Vec<RawDoc>,
) {
    let docs = match parsed {
        Ok(d) => d,
        // A file that is not YAML dlqctl can read (a CloudFormation `!Sub`, a Helm template,
        // duplicate keys) is only dlqctl's problem when it says it is a dlqctl document.
        Err(_) if !declares_dlqctl(&text) => {
            ws.skipped += 1;
            return;
        }
        Err(e) => {
            let file = ws.sources.add(path, text);
            let mut d =
                Diagnostic::error(e.kind.rule(), e.message.clone()).at(Loc { file, span: e.span });
            if let Some(r) = e.related {
                d = d.related(Loc { file, span: r }, "first defined here");
            }
            ws.diagnostics.push(d);
            return;
        }
    };
    let file = ws.sources.add(path, text);
    for doc in docs {
        let loc = Loc {
            file,
            span: doc.span,
        };
        let entries = match &doc.root.value {
            NodeValue::Map(entries) => entries,
            NodeValue::Null => continue,
            _ => {
                ws.skipped += 1;
                continue;
            }
        };
        let get = |k: &str| {
            entries
                .iter()
                .find(|(key, _, _)| key == k)
                .map(|(_, ks, v)| (*ks, v))
        };
        let api = get("apiVersion");
        let kind = get("kind");
        let api_text = api.and_then(|(_, v)| match &v.value {
            NodeValue::Str(s) => Some(s.as_str()),
            _ => None,
        });
        let kind_text = kind.and_then(|(_, v)| match &v.value {
            NodeValue::Str(s) => Some(s.as_str()),
            _ => None,
        });
        let ours_api = api_text.is_some_and(|a| a.starts_with("dlqctl/"));
        // A dlqctl `kind` makes the document ours whatever its apiVersion says: a mistyped
        // apiVersion (`v1`, `dlqctl.io/v1`) must be reported, never skipped, or a broken spec
        // would pass the hook unread.
        let ours_kind = kind_text.and_then(DocKind::from_kind);
        if !ours_api && ours_kind.is_none() {
            ws.skipped += 1;
            continue;
        }
        let at = |pointer: &str| Locations::at(file, &doc.root, pointer);
        if let Some(a) = api_text.filter(|a| a.starts_with("dlqctl/") && *a != API_VERSION) {
            ws.diagnostics.push(
                Diagnostic::error(
                    "spec/api-version",
                    format!("unsupported apiVersion `{a}`; this dlqctl reads `{API_VERSION}`"),
                )
                .at(at("/apiVersion"))
                .hint("upgrade dlqctl, or write the spec for dlqctl/v1"),
            );
            continue;
        }
        let Some(kind) = ours_kind else {
            let names = DocKind::ALL.map(DocKind::name);
            let mut d = match (kind_text, kind) {
                (None, Some((_, node))) if !matches!(node.value, NodeValue::Null) => {
                    Diagnostic::error(
                        "spec/kind",
                        "`kind` must be a string: Channel, Targets or Defaults",
                    )
                    .at(at("/kind"))
                }
                (Some(k), _) => Diagnostic::error(
                    "spec/kind",
                    format!(
                        "unknown kind `{k}`; dlqctl/v1 documents are Channel, Targets or Defaults"
                    ),
                )
                .at(at("/kind")),
                (None, _) => Diagnostic::error(
                    "spec/kind",
                    "missing `kind`; dlqctl/v1 documents are Channel, Targets or Defaults",
                )
                .at(loc),
            };
            if let Some(m) = kind_text.and_then(|k| did_you_mean(k, names.into_iter())) {
                d = d.hint(format!("did you mean `{m}`?"));
            }
            ws.diagnostics.push(d);
            continue;
        };
        raw.push(RawDoc {
            kind,
            json: doc.root.to_json(),
            locs: Locations::of(file, doc.root),
            loc,
        });
    }
}

fn typed<T: DeserializeOwned>(raw: RawDoc, ws: &mut Workspace) -> Option<Doc<T>> {
    let problems = schema::validate(raw.kind, &raw.json, &raw.locs);
    if !problems.is_empty() {
        ws.diagnostics.extend(problems);
        return None;
    }
    match serde_path_to_error::deserialize::<_, T>(raw.json) {
        Ok(value) => Some(Doc {
            value,
            locs: raw.locs,
            loc: raw.loc,
        }),
        Err(e) => {
            // The schema accepted it, so this is a value the types check more strictly
            // (a duration that overflows, say). Point at the field.
            let pointer = pointer_of(e.path());
            let field = super::locate::field_path(&pointer);
            ws.diagnostics.push(
                Diagnostic::error("schema/invalid", format!("`{field}`: {}", e.inner()))
                    .at(raw.locs.value(&pointer)),
            );
            None
        }
    }
}

/// The JSON pointer of the place serde refused, for locating it in the YAML.
fn pointer_of(path: &serde_path_to_error::Path) -> String {
    path.iter()
        .map(|seg| match seg {
            serde_path_to_error::Segment::Seq { index } => format!("/{index}"),
            serde_path_to_error::Segment::Map { key } => format!("/{}", escape(key)),
            _ => String::new(),
        })
        .collect()
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
    let backends = target_backends(&rest);
    for mut d in rest {
        match d.kind {
            DocKind::Targets => {
                expand_variables(&mut d, ws);
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
            DocKind::Channel => {
                if let Some((dj, dl)) = &merge_from
                    && let (Some(Value::Object(dspec)), Some(obj)) =
                        (dj.get("spec"), d.json.as_object_mut())
                {
                    let spec = obj
                        .entry("spec")
                        .or_insert_with(|| Value::Object(Default::default()));
                    if spec.is_object() {
                        // A defaults backend block applies only to channels of that backend.
                        let target = spec
                            .get("target")
                            .or_else(|| dspec.get("target"))
                            .and_then(Value::as_str);
                        let backend = target.and_then(|t| backends.get(t)).map(String::as_str);
                        let mut shared = dspec.clone();
                        shared.retain(|k, _| !is_backend_block(k) || Some(k.as_str()) == backend);
                        // So is the dead-letter queue's own block (`deadLetter.sqs`).
                        if let Some(Value::Object(dl)) = shared.get_mut("deadLetter") {
                            dl.retain(|k, _| !is_backend_block(k) || Some(k.as_str()) == backend);
                        }
                        drop_answered_retention(spec, &mut shared);
                        drop_whole_values(spec, &mut shared);
                        merge_under(spec, &Value::Object(shared));
                        d.locs.fill_from(dl, "/spec", "/spec");
                    }
                }
                if let Some(c) = typed::<Channel>(d, ws) {
                    ws.channels.push(c);
                }
            }
            DocKind::Defaults => {}
        }
    }
}

/// `${VAR}` in a target's addresses ([`vars`]), expanded in place before validation with the
/// process environment. `target/variable`: an unset variable without a default, or a malformed
/// reference; `target/variable-not-allowed`: a reference in any other field (secrets have their
/// own `*Env` fields). The value is left as written then, and reported once, at its position.
fn expand_variables(d: &mut RawDoc, ws: &mut Workspace) {
    let Some(targets) = d.json.get_mut("targets").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, target) in targets.iter_mut() {
        let Some(fields) = target.as_object_mut() else {
            continue;
        };
        for (field, value) in fields.iter_mut() {
            let pointer = format!("/targets/{}/{}", escape(name), escape(field));
            match value {
                Value::String(text) if vars::EXPANDED.contains(&field.as_str()) => {
                    if !vars::has_reference(text) {
                        continue;
                    }
                    match vars::expand(text, |n| std::env::var(n).ok()) {
                        Ok(expanded) => *text = expanded,
                        Err(e) => {
                            ws.unexpanded.insert((d.loc.file, pointer.clone()));
                            let mut diag = Diagnostic::error(
                                "target/variable",
                                format!("`targets.{name}.{field}`: {e}"),
                            )
                            .at(d.locs.value(&pointer));
                            if let vars::VarError::Unset(var) = &e {
                                diag = diag.hint(format!(
                                    "set it, or give a default where it may be unset (a pre-commit hook): `${{{var}:-{}}}`",
                                    example_default(field)
                                ));
                            }
                            ws.diagnostics.push(diag);
                        }
                    }
                }
                _ => report_references(value, &pointer, name, &d.locs, ws),
            }
        }
    }
}

/// `target/variable-not-allowed` for every `${` in a value outside [`vars::EXPANDED`].
fn report_references(
    value: &Value,
    pointer: &str,
    target: &str,
    locs: &Locations,
    ws: &mut Workspace,
) {
    match value {
        Value::String(text) if vars::has_reference(text) => ws.diagnostics.push(
            Diagnostic::error(
                "target/variable-not-allowed",
                format!(
                    "`targets.{target}.{}` holds `${{...}}`: variables are expanded only in {}",
                    &pointer[format!("/targets/{}/", escape(target)).len()..].replace('/', "."),
                    vars::EXPANDED.map(|f| format!("`{f}`")).join(", ")
                ),
            )
            .at(locs.value(pointer))
            .hint("secrets are named, not written: `usernameEnv`, `passwordEnv`, `secretProperties: {sasl.password: ENV_VAR}`"),
        ),
        Value::Object(map) => {
            for (k, v) in map {
                report_references(v, &format!("{pointer}/{}", escape(k)), target, locs, ws);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                report_references(v, &format!("{pointer}/{i}"), target, locs, ws);
            }
        }
        _ => {}
    }
}

fn example_default(field: &str) -> &'static str {
    match field {
        "bootstrapServers" => "127.0.0.1:9092",
        "amqpUrl" => "amqp://127.0.0.1:5672",
        "endpoint" => "http://127.0.0.1:5000",
        _ => "http://127.0.0.1:15672",
    }
}

/// Whether `key` is a backend's own block (`sqs:`, ..., `pubsub:`): [`Backend::ALL`], so no
/// backend is left out of the Defaults filter.
fn is_backend_block(key: &str) -> bool {
    Backend::from_key(key).is_some()
}

/// Target name → backend, from the (not yet validated) Targets documents.
fn target_backends(raw: &[RawDoc]) -> std::collections::HashMap<String, String> {
    raw.iter()
        .filter(|d| d.kind == DocKind::Targets)
        .filter_map(|d| d.json.get("targets").and_then(Value::as_object))
        .flat_map(|m| m.iter())
        .filter_map(|(name, t)| Some((name.clone(), t.get("backend")?.as_str()?.to_owned())))
        .collect()
}

/// Deep-merges `base` under `top`: `top`'s values win, mappings merge key by key.
/// `deadLetter.retention` and `deadLetter.discard` answer one question (how long dead letters
/// are kept), as do `invalid.retention` and `invalid.discard`: a channel that gives one answer
/// does not inherit the other from Defaults.
fn drop_answered_retention(spec: &Value, shared: &mut serde_json::Map<String, Value>) {
    for block in ["deadLetter", "invalid"] {
        let Some(own) = spec.get(block).and_then(Value::as_object) else {
            continue;
        };
        let Some(Value::Object(from_defaults)) = shared.get_mut(block) else {
            continue;
        };
        for (answer, other) in [("discard", "retention"), ("retention", "discard")] {
            if own.contains_key(answer) {
                from_defaults.remove(other);
            }
        }
    }
}

/// Values that are replaced whole, never merged key by key: an encryption block (a KMS key
/// from Defaults and a channel's `managed: true` would make both) and a policy document.
const WHOLE_VALUES: [&str; 4] = [
    "/sqs/encryption",
    "/sqs/policy",
    "/deadLetter/sqs/encryption",
    "/deadLetter/sqs/policy",
];

fn drop_whole_values(spec: &Value, shared: &mut serde_json::Map<String, Value>) {
    for pointer in WHOLE_VALUES {
        if spec.pointer(pointer).is_none() {
            continue;
        }
        let Some((parent, key)) = pointer.rsplit_once('/') else {
            continue;
        };
        let mut from_defaults = Value::Object(std::mem::take(shared));
        if let Some(Value::Object(m)) = from_defaults.pointer_mut(parent) {
            m.remove(key);
        }
        if let Value::Object(m) = from_defaults {
            *shared = m;
        }
    }
}

fn merge_under(top: &mut Value, base: &Value) {
    if let (Value::Object(t), Value::Object(b)) = (top, base) {
        for (k, bv) in b {
            match t.get_mut(k) {
                Some(tv) => merge_under(tv, bv),
                None => {
                    t.insert(k.clone(), bv.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Loading from disk: which files are read, which are refused, which documents are
    //! skipped, and where the Targets document comes from.

    use super::*;

    #[test]
    fn a_refused_value_inside_a_list_is_pointed_at_by_its_index() {
        // No list in today's model holds a value the schema passes and serde refuses, so the
        // pointer is checked on its own: a key with a `/`, then the second item of a list.
        let json = serde_json::json!({"a/b": ["1s", "99999999999999999999d"]});
        let e = serde_path_to_error::deserialize::<
            _,
            std::collections::BTreeMap<String, Vec<crate::spec::duration::Duration>>,
        >(json)
        .expect_err("the second duration overflows");
        assert_eq!(pointer_of(e.path()), "/a~1b/1");
    }

    const CHANNEL: &str = "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: orders}\nspec: {target: sqs, retry: {maxAttempts: 3}}\n";
    const TARGETS: &str = "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  sqs: {backend: sqs, region: eu-west-1}\n";

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create the folder");
        }
        std::fs::write(&path, text).expect("write the file");
        path
    }

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

    fn rules(ws: &Workspace) -> Vec<&'static str> {
        ws.diagnostics.iter().map(|d| d.rule).collect()
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
    fn a_file_of_a_mebibyte_is_read_and_one_byte_more_is_refused_unread() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        let cap = usize::try_from(MAX_FILE_BYTES).expect("fits");
        assert_eq!(cap, 1_048_576);
        let comment = |n: usize| format!("#{}\n", "x".repeat(n - 2));
        let full = write(dir, "full.yaml", &comment(cap));
        let ws = load(&[full], None).expect("loads");
        assert_eq!(rules(&ws), Vec::<&str>::new());
        let over = write(dir, "over.yaml", &comment(cap + 1));
        let ws = load(&[over], None).expect("loads");
        assert_eq!(rules(&ws), ["file/too-large"]);
        assert_eq!(
            ws.diagnostics[0].message,
            "file is 1048577 bytes; spec files may be at most 1048576 bytes"
        );
        let loc = ws.diagnostics[0].loc.expect("located");
        assert_eq!((loc.span.line, loc.span.col), (1, 1), "the file's start");
    }

    #[test]
    fn a_path_that_cannot_be_read_for_another_reason_is_an_io_error() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let file = write(tmp.path(), "c.yaml", CHANNEL);
        // A file is no folder: not "no such file".
        let below = file.join("x.yaml");
        assert!(matches!(
            load(std::slice::from_ref(&below), None),
            Err(LoadError::Io(p, _)) if p == below
        ));
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

    #[test]
    fn a_file_whose_size_lies_is_cut_one_byte_past_the_cap() {
        // `/dev/zero` says it is empty and never ends.
        match read(Path::new("/dev/zero")).expect("reads") {
            FileRead::TooLarge(None) => {}
            FileRead::TooLarge(Some(n)) => panic!("the size on disk was believed: {n}"),
            _ => panic!("read past the cap"),
        }
    }

    #[test]
    fn a_file_that_is_not_utf8_is_reported_at_its_first_bad_byte_if_it_is_ours() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        let path = dir.join("latin1.yaml");
        let mut bytes = b"apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: caf".to_vec();
        bytes.extend([0xe9, b'}', b'\n']);
        std::fs::write(&path, &bytes).expect("write");
        let ws = load(std::slice::from_ref(&path), None).expect("loads");
        assert_eq!(rules(&ws), ["file/not-utf8"]);
        let d = &ws.diagnostics[0];
        assert_eq!(
            d.message,
            "file is not UTF-8 text: invalid byte at offset 56"
        );
        let loc = d.loc.expect("located");
        assert_eq!(
            (loc.span.line, loc.span.col, loc.span.start, loc.span.end),
            (3, 21, 56, 57)
        );
        assert_eq!(ws.skipped, 0);
        // Not a dlqctl file: skipped and counted.
        std::fs::write(&path, [b'a', b':', b' ', 0xe9, b'\n']).expect("write");
        let ws = load(&[path], None).expect("loads");
        assert_eq!(rules(&ws), Vec::<&str>::new());
        assert_eq!(ws.skipped, 1);
        assert_eq!(ws.sources.len(), 0);
    }

    #[test]
    fn documents_that_are_not_dlqctl_s_are_skipped_and_counted() {
        // A CI config, a scalar document and an empty one (not counted: nothing is there).
        let ws = load_str(
            "mixed.yaml",
            &format!("name: CI\non: push\n---\njust text\n---\n---\n{CHANNEL}"),
        );
        assert_eq!(ws.skipped, 2);
        assert_eq!(ws.channels.len(), 1);
        assert_eq!(ws.channels[0].value.metadata.name, "orders");
        // A file YAML cannot read is skipped unless it says it is dlqctl's.
        let ws = load_str("cfn.yaml", "Resources:\n  Q: {a: 1, a: 2}\n");
        assert_eq!((rules(&ws), ws.skipped), (Vec::<&str>::new(), 1));
        let ws = load_str("broken.yaml", "kind: Channel\nspec: {a: 1, a: 2}\n");
        assert_eq!((rules(&ws), ws.skipped), (vec!["yaml/duplicate-key"], 0));
        // A dlqctl kind with a foreign apiVersion is ours: reported, never skipped.
        let ws = load_str(
            "v.yaml",
            "apiVersion: dlqctl/v2\nkind: Channel\nmetadata: {name: a}\n",
        );
        assert_eq!((rules(&ws), ws.skipped), (vec!["spec/api-version"], 0));
        // So is one with a dlqctl kind and someone else's apiVersion (validated, not skipped).
        let ws = load_str(
            "v.yaml",
            "apiVersion: v1\nkind: Channel\nmetadata: {name: a}\n",
        );
        assert_eq!(
            (rules(&ws), ws.skipped),
            (vec!["schema/required", "schema/enum"], 0)
        );
    }

    #[test]
    fn a_file_declares_a_dlqctl_document_by_its_api_version_or_its_kind() {
        for text in [
            "apiVersion: dlqctl/v1",
            "  apiVersion:   dlqctl/v9  # a comment",
            "kind: Channel",
            "kind: Targets",
            "kind: \"Defaults\"",
            "kind: 'Channel'",
            "\"kind\": \"Channel\",",
            "'apiVersion': 'dlqctl/v1'",
            "{apiVersion: dlqctl/v1, kind: x}",
            "{\"kind\": \"Channel\"}",
            "metadata: {name: x}\nkind: Channel",
            "apiVersion: v1\nkind: Channel",
        ] {
            assert!(declares_dlqctl(text), "{text}");
        }
        for text in [
            "",
            "apiVersion: v1\nkind: ConfigMap",
            "kind: Deployment  # not a Channel",
            "name: apiVersion dlqctl",
            "apiVersionx: dlqctl/v1",
            "kinds: Channel",
            "kind Channel",
            "# kind: Channel",
        ] {
            assert!(!declares_dlqctl(text), "{text}");
        }
    }

    /// Each finding as `rule | message | hint | line:col`.
    fn found(ws: &Workspace) -> Vec<String> {
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

    #[test]
    fn a_bad_kind_or_api_version_is_worded_and_placed() {
        let ws = load_str("k.yaml", "apiVersion: dlqctl/v1\nkind: Chanel\n");
        assert_eq!(
            found(&ws),
            [
                "spec/kind | unknown kind `Chanel`; dlqctl/v1 documents are Channel, Targets or Defaults | did you mean `Channel`? | 2:7"
            ]
        );
        let ws = load_str("k.yaml", "apiVersion: dlqctl/v1\nkind: 5\n");
        assert_eq!(
            found(&ws),
            ["spec/kind | `kind` must be a string: Channel, Targets or Defaults | - | 2:7"]
        );
        let ws = load_str("k.yaml", "a: 1\n---\napiVersion: dlqctl/v1\nkind:\n");
        assert_eq!(
            found(&ws),
            [
                "spec/kind | missing `kind`; dlqctl/v1 documents are Channel, Targets or Defaults | - | 2:1"
            ]
        );
        let ws = load_str("k.yaml", "apiVersion: dlqctl/v1\n");
        assert_eq!(
            found(&ws),
            [
                "spec/kind | missing `kind`; dlqctl/v1 documents are Channel, Targets or Defaults | - | 1:1"
            ]
        );
        let ws = load_str("k.yaml", "kind: Channel\napiVersion: dlqctl/v2\n");
        assert_eq!(
            found(&ws),
            [
                "spec/api-version | unsupported apiVersion `dlqctl/v2`; this dlqctl reads `dlqctl/v1` | upgrade dlqctl, or write the spec for dlqctl/v1 | 2:13"
            ]
        );
        assert_eq!(ws.skipped, 0);
        // Someone else's document with a string kind is skipped, not reported.
        let ws = load_str("k.yaml", "apiVersion: v1\nkind: Chanel\n");
        assert_eq!((found(&ws).len(), ws.skipped), (0, 1));
    }

    #[test]
    fn a_yaml_error_in_our_file_points_at_both_places_and_a_bom_is_ignored() {
        let ws = load_str("d.yaml", "kind: Channel\nspec: {a: 1, a: 2}\n");
        let d = &ws.diagnostics[0];
        assert_eq!(d.message, "duplicate key `a` (first defined on line 2)");
        assert_eq!(
            d.related
                .iter()
                .map(|(l, n)| (l.span.line, l.span.col, n.as_str()))
                .collect::<Vec<_>>(),
            [(2, 8, "first defined here")]
        );
        let ws = load_str("bom.yaml", &format!("\u{feff}{CHANNEL}"));
        assert_eq!(rules(&ws), Vec::<&str>::new());
        assert_eq!(ws.channels.len(), 1);
        assert_eq!(ws.sources.text(0), CHANNEL);
    }

    #[test]
    fn a_value_the_types_refuse_after_the_schema_is_reported_at_its_field() {
        let ws = load_str(
            "o.yaml",
            &CHANNEL.replace(
                "retry: {maxAttempts: 3}",
                "retention: 99999999999999999999d",
            ),
        );
        assert_eq!(
            found(&ws),
            ["schema/invalid | `spec.retention`: `99999999999999999999d` is too large | - | 4:32"]
        );
        assert!(ws.channels.is_empty());
    }

    #[test]
    fn a_second_defaults_document_is_refused_and_the_first_one_used() {
        let defaults =
            |r: &str| format!("apiVersion: dlqctl/v1\nkind: Defaults\nspec: {{retention: {r}}}\n");
        let ws = load_str(
            "d.yaml",
            &format!(
                "{}---\n{}---\n{}---\n{CHANNEL}",
                defaults("4d"),
                defaults("5d"),
                defaults("6d")
            ),
        );
        assert_eq!(
            found(&ws),
            [
                "spec/defaults-duplicate | more than one Defaults document; dlqctl reads one per run | merge them into one document | 4:1",
                "spec/defaults-duplicate | more than one Defaults document; dlqctl reads one per run | merge them into one document | 8:1"
            ]
        );
        assert_eq!(
            ws.diagnostics[0]
                .related
                .iter()
                .map(|(l, n)| (l.span.line, n.as_str()))
                .collect::<Vec<_>>(),
            [(1, "the first Defaults document")]
        );
        assert_eq!(
            ws.channels[0].value.spec.retention.map(|d| d.to_string()),
            Some("4d".to_owned())
        );
        assert!(ws.defaults.is_some());
    }

    fn merged_spec(defaults: &str, spec: &str) -> Value {
        let text = format!(
            "{TARGETS}  rmq: {{backend: rabbitmq, url: 'http://r'}}\n  ps: {{backend: pubsub, project: my-project}}\n---\napiVersion: dlqctl/v1\nkind: Defaults\nspec:\n{defaults}---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: c}}\nspec:\n{spec}"
        );
        let ws = load_str("m.yaml", &text);
        assert_eq!(found(&ws), Vec::<String>::new());
        serde_json::to_value(&ws.channels[0].value.spec).expect("serialises")
    }

    #[test]
    fn defaults_merge_under_a_channel_by_key_with_backend_blocks_for_that_backend_only() {
        let defaults = "  retention: 4d\n  retry: {maxAttempts: 5, name: r}\n  sqs: {fifo: false}\n  rabbitmq: {queueType: quorum}\n  pubsub: {ackDeadline: 30s}\n  deadLetter:\n    retention: 9d\n    sqs: {encryption: {managed: true}}\n";
        let sqs = merged_spec(defaults, "  target: sqs\n  retry: {maxAttempts: 3}\n");
        assert_eq!(sqs["retention"], "4d");
        assert_eq!(
            sqs["retry"],
            serde_json::json!({"maxAttempts": 3, "name": "r"})
        );
        assert_eq!(sqs["sqs"], serde_json::json!({"fifo": false}));
        assert_eq!(sqs.get("rabbitmq"), None);
        // Regression (issue 32): `pubsub` was missing from the hand-written list of blocks.
        assert_eq!(sqs.get("pubsub"), None);
        assert_eq!(
            sqs["deadLetter"]["sqs"],
            serde_json::json!({"encryption": {"managed": true}})
        );
        let rmq = merged_spec(defaults, "  target: rmq\n");
        assert_eq!(rmq.get("sqs"), None);
        assert_eq!(rmq["rabbitmq"], serde_json::json!({"queueType": "quorum"}));
        assert_eq!(rmq["deadLetter"], serde_json::json!({"retention": "9d"}));
        let ps = merged_spec(defaults, "  target: ps\n");
        assert_eq!(ps["pubsub"], serde_json::json!({"ackDeadline": "30s"}));
        assert_eq!((ps.get("sqs"), ps.get("rabbitmq")), (None, None));
        // The target may come from the defaults too.
        let from_defaults = merged_spec(&format!("  target: rmq\n{defaults}"), "  name: q\n");
        assert_eq!(
            from_defaults["rabbitmq"],
            serde_json::json!({"queueType": "quorum"})
        );
        assert_eq!(from_defaults.get("sqs"), None);
    }

    #[test]
    fn one_answer_to_how_long_dead_letters_stay_and_whole_values_are_not_merged() {
        let defaults = "  deadLetter:\n    retention: 9d\n    discard: {after: 1d}\n  invalid:\n    retention: 8d\n    discard: {after: 2d}\n  sqs:\n    encryption: {kms: alias/k}\n    policy: {Statement: [], Id: d}\n";
        let spec = merged_spec(
            defaults,
            "  target: sqs\n  deadLetter: {discard: {after: 3d}}\n  invalid: {retention: 7d}\n  sqs: {encryption: {managed: true}}\n",
        );
        assert_eq!(
            spec["deadLetter"],
            serde_json::json!({"discard": {"after": "3d"}})
        );
        assert_eq!(spec["invalid"], serde_json::json!({"retention": "7d"}));
        assert_eq!(
            spec["sqs"],
            serde_json::json!({"encryption": {"managed": true}, "policy": {"Statement": [], "Id": "d"}})
        );
        let spec = merged_spec(
            defaults,
            "  target: sqs\n  deadLetter: {retention: 5d}\n  invalid: {discard: {after: 1h}}\n  sqs: {policy: {Statement: [], Version: '2012-10-17'}}\n",
        );
        assert_eq!(spec["deadLetter"], serde_json::json!({"retention": "5d"}));
        assert_eq!(
            spec["invalid"],
            serde_json::json!({"discard": {"after": "1h"}})
        );
        assert_eq!(
            spec["sqs"],
            serde_json::json!({"encryption": {"kms": "alias/k"}, "policy": {"Statement": [], "Version": "2012-10-17"}})
        );
    }

    #[test]
    fn target_variables_are_expanded_only_in_addresses_and_reported_where_written() {
        let ws = load_str(
            "t.yaml",
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  rmq:\n    backend: rabbitmq\n    url: 'http://${DLQCTL_TEST_UNSET_Q7}'\n    amqpUrl: 'amqp://${DLQCTL_TEST_UNSET_Q7:-h}:5672'\n    vhost: '${X}'\n  k:\n    backend: kafka\n    bootstrapServers: '${DLQCTL_TEST_UNSET_Q7}'\n    properties: {a: '${Y}'}\n    ownership: {prefixes: ['${Z}']}\n",
        );
        assert_eq!(
            found(&ws),
            [
                "target/variable | `targets.rmq.url`: environment variable `DLQCTL_TEST_UNSET_Q7` is not set (or is empty), and `${DLQCTL_TEST_UNSET_Q7}` has no default | set it, or give a default where it may be unset (a pre-commit hook): `${DLQCTL_TEST_UNSET_Q7:-http://127.0.0.1:15672}` | 6:10",
                "target/variable-not-allowed | `targets.rmq.vhost` holds `${...}`: variables are expanded only in `url`, `amqpUrl`, `endpoint`, `bootstrapServers`, `emulatorHost` | secrets are named, not written: `usernameEnv`, `passwordEnv`, `secretProperties: {sasl.password: ENV_VAR}` | 8:12",
                "target/variable | `targets.k.bootstrapServers`: environment variable `DLQCTL_TEST_UNSET_Q7` is not set (or is empty), and `${DLQCTL_TEST_UNSET_Q7}` has no default | set it, or give a default where it may be unset (a pre-commit hook): `${DLQCTL_TEST_UNSET_Q7:-127.0.0.1:9092}` | 11:23",
                "target/variable-not-allowed | `targets.k.properties.a` holds `${...}`: variables are expanded only in `url`, `amqpUrl`, `endpoint`, `bootstrapServers`, `emulatorHost` | secrets are named, not written: `usernameEnv`, `passwordEnv`, `secretProperties: {sasl.password: ENV_VAR}` | 12:21",
                "target/variable-not-allowed | `targets.k.ownership.prefixes.0` holds `${...}`: variables are expanded only in `url`, `amqpUrl`, `endpoint`, `bootstrapServers`, `emulatorHost` | secrets are named, not written: `usernameEnv`, `passwordEnv`, `secretProperties: {sasl.password: ENV_VAR}` | 13:28",
            ]
        );
        assert_eq!(
            ws.unexpanded
                .iter()
                .map(|(f, p)| (*f, p.as_str()))
                .collect::<Vec<_>>(),
            [(0, "/targets/k/bootstrapServers"), (0, "/targets/rmq/url")]
        );
        let targets = serde_json::to_value(&ws.targets[0].value).expect("serialises");
        assert_eq!(targets["targets"]["rmq"]["amqpUrl"], "amqp://h:5672");
        assert_eq!(example_default("amqpUrl"), "amqp://127.0.0.1:5672");
        assert_eq!(example_default("endpoint"), "http://127.0.0.1:5000");
        assert_eq!(example_default("emulatorHost"), "http://127.0.0.1:15672");
    }
}
