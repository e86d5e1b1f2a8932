//! Parsing: a file's bytes into YAML documents with positions, then into raw dlqctl documents
//! (kind and `apiVersion` checked, other YAML skipped and counted), then, after the JSON
//! schema, into typed values. Every problem becomes a finding at its position and the run goes
//! on; files over [`MAX_FILE_BYTES`] are refused unread.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::workspace::{Doc, LoadError, RawDoc, Workspace};
use crate::diag::{Diagnostic, Loc};
use crate::spec::locate::Locations;
use crate::spec::model::API_VERSION;
use crate::spec::pointer::escape;
use crate::spec::schema::{self, DocKind, did_you_mean};
use crate::spec::yaml::{self, Document, Limits, NodeValue, Span, YamlError};

/// Larger files are refused unread: a spec is a few kilobytes.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// One file, read and parsed (the part of loading that needs no shared state).
pub(super) enum FileRead {
    /// Over the cap: its size when the file system said it, `None` when only reading told.
    TooLarge(Option<u64>),
    NotUtf8(std::string::FromUtf8Error),
    Parsed(String, Result<Vec<Document>, YamlError>),
}

pub(super) fn read(path: &Path) -> Result<FileRead, LoadError> {
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

pub(super) fn read_file(
    path: &Path,
    ws: &mut Workspace,
    raw: &mut Vec<RawDoc>,
) -> Result<(), LoadError> {
    add_read(path, read(path)?, ws, raw);
    Ok(())
}

pub(super) fn add_read(path: &Path, read: FileRead, ws: &mut Workspace, raw: &mut Vec<RawDoc>) {
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

pub(super) fn parse_text(path: PathBuf, text: String, ws: &mut Workspace, raw: &mut Vec<RawDoc>) {
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
            locs: Locations::of(file, &doc.root),
            loc,
        });
    }
}

pub(super) fn typed<T: DeserializeOwned>(raw: RawDoc, ws: &mut Workspace) -> Option<Doc<T>> {
    match checked(raw) {
        Ok(doc) => Some(doc),
        Err(problems) => {
            ws.diagnostics.extend(problems);
            None
        }
    }
}

/// [`typed`] without the workspace: the document, or every problem found with it. Reads
/// nothing but the document, so documents can be checked side by side.
pub(super) fn checked<T: DeserializeOwned>(raw: RawDoc) -> Result<Doc<T>, Vec<Diagnostic>> {
    let problems = schema::validate(raw.kind, &raw.json, &raw.locs);
    if !problems.is_empty() {
        return Err(problems);
    }
    match serde_path_to_error::deserialize::<_, T>(raw.json) {
        Ok(value) => Ok(Doc {
            value,
            locs: raw.locs,
            loc: raw.loc,
        }),
        Err(e) => {
            // The schema accepted it, so this is a value the types check more strictly
            // (a duration that overflows, say). Point at the field.
            let pointer = pointer_of(e.path());
            let field = crate::spec::locate::field_path(&pointer);
            Err(vec![
                Diagnostic::error("schema/invalid", format!("`{field}`: {}", e.inner()))
                    .at(raw.locs.value(&pointer)),
            ])
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

#[cfg(test)]
mod tests {
    use super::super::tests::{CHANNEL, found, rules, write};
    use super::super::{load, load_str};
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
}
