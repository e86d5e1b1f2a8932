//! `lint --format sarif`: the findings as a SARIF 2.1.0 log, for code scanning (GitHub's
//! `upload-sarif`, and any SARIF viewer).
//!
//! One run; `tool.driver.rules` holds every rule dlqctl can report ([`super::rules`]), so a
//! viewer can show a rule's help beside each finding; each result points at its rule by id and
//! index, with a level from the finding's severity and a region in the file. Paths under the
//! current folder are written relative to it (`%SRCROOT%`, what code scanning expects); others
//! as `file://` URIs. Columns count Unicode code points, as the other formats do, and the run
//! says so (`columnKind`). `tests/lint.rs` validates the output against the official schema.

use std::path::{Component, Path};

use serde_json::{Value, json};

use super::rules::{RULES, Rule};
use super::{Diagnostic, Loc, Severity, Sources};

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

fn rule_json(r: &Rule) -> Value {
    json!({
        "id": r.id,
        "shortDescription": {"text": r.summary},
        "help": {"text": r.help},
        "defaultConfiguration": {"level": level(r.severity)},
    })
}

/// The artifact location of a source file: relative to `cwd` when under it.
fn artifact(path: &Path, cwd: Option<&Path>) -> Value {
    let relative = if path.is_absolute() {
        cwd.and_then(|c| path.strip_prefix(c).ok())
    } else {
        Some(path)
    };
    match relative {
        Some(rel) => {
            let parts: Vec<String> = rel
                .components()
                .filter_map(|c| match c {
                    Component::Normal(p) => Some(encode(&p.to_string_lossy())),
                    Component::ParentDir => Some("..".to_owned()),
                    _ => None,
                })
                .collect();
            json!({"uri": parts.join("/"), "uriBaseId": "%SRCROOT%"})
        }
        None => {
            let parts: Vec<String> = path
                .components()
                .filter_map(|c| match c {
                    Component::Normal(p) => Some(encode(&p.to_string_lossy())),
                    _ => None,
                })
                .collect();
            json!({"uri": format!("file:///{}", parts.join("/"))})
        }
    }
}

/// Percent-encodes what a URI path segment may not hold as is.
fn encode(segment: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(segment, KEEP).to_string()
}

fn region(loc: Loc, sources: &Sources) -> Value {
    let (end_line, end_col) = sources.end_line_col(loc);
    let mut r = json!({"startLine": loc.span.line, "startColumn": loc.span.col});
    // A span that ends before it starts (never expected) gets no end rather than a bad one.
    if (end_line, end_col) >= (loc.span.line, loc.span.col) {
        r["endLine"] = json!(end_line);
        r["endColumn"] = json!(end_col);
    }
    r
}

fn location(loc: Loc, sources: &Sources, cwd: Option<&Path>) -> Value {
    json!({
        "physicalLocation": {
            "artifactLocation": artifact(sources.path(loc.file), cwd),
            "region": region(loc, sources),
        }
    })
}

/// The SARIF log of `diags`. `cwd` is the folder paths are made relative to.
pub fn render(diags: &[Diagnostic], sources: &Sources, cwd: Option<&Path>) -> String {
    let results: Vec<Value> = diags
        .iter()
        .map(|d| {
            let mut text = d.message.clone();
            if let Some(h) = &d.hint {
                text.push_str("\nhint: ");
                text.push_str(h);
            }
            let mut result = json!({
                "ruleId": d.rule,
                "level": level(d.severity),
                "message": {"text": text},
            });
            if let Some(i) = RULES.iter().position(|r| r.id == d.rule) {
                result["ruleIndex"] = json!(i);
            }
            if let Some(loc) = d.loc {
                result["locations"] = json!([location(loc, sources, cwd)]);
            }
            if !d.related.is_empty() {
                result["relatedLocations"] = d
                    .related
                    .iter()
                    .enumerate()
                    .map(|(i, (loc, note))| {
                        let mut l = location(*loc, sources, cwd);
                        l["id"] = json!(i);
                        l["message"] = json!({"text": note});
                        l
                    })
                    .collect();
            }
            result
        })
        .collect();
    let mut driver = json!({
        "name": "dlqctl",
        "semanticVersion": env!("CARGO_PKG_VERSION"),
        "version": crate::version::VERSION,
        "rules": RULES.iter().map(rule_json).collect::<Vec<_>>(),
    });
    // Cargo.toml's `repository` (else `homepage`), when the package declares one.
    let home = [env!("CARGO_PKG_REPOSITORY"), env!("CARGO_PKG_HOMEPAGE")]
        .into_iter()
        .find(|u| !u.is_empty());
    if let Some(uri) = home {
        driver["informationUri"] = json!(uri);
    }
    let log = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    let mut s = serde_json::to_string_pretty(&log).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_relative_uris_under_the_current_folder() {
        let cwd = Path::new("/repo");
        assert_eq!(
            artifact(Path::new("/repo/dlq/a b.yaml"), Some(cwd)),
            json!({"uri": "dlq/a%20b.yaml", "uriBaseId": "%SRCROOT%"})
        );
        assert_eq!(
            artifact(Path::new("./dlq/x.yaml"), Some(cwd)),
            json!({"uri": "dlq/x.yaml", "uriBaseId": "%SRCROOT%"})
        );
        assert_eq!(
            artifact(Path::new("/elsewhere/x.yaml"), Some(cwd)),
            json!({"uri": "file:///elsewhere/x.yaml"})
        );
    }
}
