//! Writes an imported channel as the YAML a person would write: block mappings, two-space
//! indents, scalars plain where YAML reads them back as the same string, quoted otherwise.
//!
//! dlqctl has a YAML *reader* with positions (`spec::yaml`) but no writer, and the spec types
//! serialise to JSON values; this turns such a value into YAML with comments on top. The
//! output is read back by the real loader in tests, so a quoting mistake cannot go unnoticed.

use std::fmt::Write as _;

use serde_json::Value;

/// The whole file: the schema line, comment lines, then the document.
pub fn document(schema_ref: &str, comments: &[String], value: &Value) -> String {
    let mut out = format!("# yaml-language-server: $schema={schema_ref}\n");
    for c in comments {
        for line in c.lines() {
            let _ = writeln!(out, "# {line}");
        }
    }
    mapping(value, 0, &mut out);
    out
}

fn mapping(value: &Value, indent: usize, out: &mut String) {
    let Value::Object(map) = value else { return };
    let pad = " ".repeat(indent);
    for (k, v) in map {
        if v.is_null() {
            continue;
        }
        match v {
            Value::Object(inner) if inner.is_empty() => {
                let _ = writeln!(out, "{pad}{}: {{}}", scalar_text(k));
            }
            Value::Object(_) => {
                let _ = writeln!(out, "{pad}{}:", scalar_text(k));
                mapping(v, indent + 2, out);
            }
            Value::Array(items) if items.iter().all(is_scalar) => {
                let items: Vec<String> = items.iter().map(flow_scalar).collect();
                let _ = writeln!(out, "{pad}{}: [{}]", scalar_text(k), items.join(", "));
            }
            Value::Array(items) => {
                let _ = writeln!(out, "{pad}{}:", scalar_text(k));
                for item in items {
                    let _ = writeln!(out, "{pad}  -");
                    mapping(item, indent + 4, out);
                }
            }
            other => {
                let _ = writeln!(out, "{pad}{}: {}", scalar_text(k), value_text(other));
            }
        }
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => scalar_text(s),
        Value::Number(n) => number_text(n),
        other => other.to_string(),
    }
}

/// `2` rather than `2.0`: the loader reads either as the same number.
fn number_text(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => n.to_string(),
    }
}

/// Inside `[...]` a plain scalar may not hold `,` or brackets; quote every string there.
fn flow_scalar(v: &Value) -> String {
    match v {
        Value::String(s) if plain_ok(s) && !s.contains(':') => s.clone(),
        Value::String(s) => quoted(s),
        other => other.to_string(),
    }
}

fn scalar_text(s: &str) -> String {
    if plain_ok(s) { s.to_owned() } else { quoted(s) }
}

/// JSON's double-quoted strings are valid YAML double-quoted scalars.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.escape_default()))
}

/// Whether YAML reads `s` back, unquoted, as this very string: names, durations, ARNs.
fn plain_ok(s: &str) -> bool {
    let reserved = [
        "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~",
    ];
    if s.is_empty() || reserved.contains(&s.to_ascii_lowercase().as_str()) {
        return false;
    }
    if crate::spec::duration::Duration::parse(s).is_ok()
        && s.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return true;
    }
    let mut chars = s.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':'))
        && !s.ends_with(':')
        && !s.contains("::")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_are_plain_only_when_they_read_back_the_same() {
        for plain in [
            "orders.dlq",
            "7d",
            "1h30m",
            "arn:aws:sns:us-east-1:1:ops",
            "local-sqs",
        ] {
            assert_eq!(scalar_text(plain), plain);
        }
        for quoted_text in [
            "{channel}.dlq",
            "true",
            "No",
            "",
            "007",
            "1e3",
            "a b",
            "x: y",
            "-x",
        ] {
            assert!(scalar_text(quoted_text).starts_with('"'), "{quoted_text}");
        }
        assert_eq!(flow_scalar(&json!("arn:aws:sns:x")), "\"arn:aws:sns:x\"");
    }

    #[test]
    fn a_document_round_trips_through_the_loader() {
        let value = json!({
            "apiVersion": "dlqctl/v1",
            "kind": "Channel",
            "metadata": {"name": "orders", "labels": {"team": "a b"}},
            "spec": {
                "target": "t",
                "name": "{channel}.process",
                "retry": {"maxAttempts": 4, "backoff": {"initial": "5s"}},
                "alarms": {"actions": ["arn:aws:sns:us-east-1:123456789012:ops"], "depth": {"above": 0, "description": ""}},
                "kafka": {"config": {"cleanup.policy": "delete", "min.insync.replicas": 2}},
                "lint": {"allow": ["alarms/missing"]}
            }
        });
        let text = document("../schemas/channel.v1.json", &["imported".into()], &value);
        assert!(text.starts_with("# yaml-language-server: $schema=../schemas/channel.v1.json\n# imported\napiVersion: dlqctl/v1\n"), "{text}");
        let docs =
            crate::spec::yaml::parse(&text, crate::spec::yaml::Limits::default()).expect("parses");
        assert_eq!(docs[0].root.to_json(), value, "{text}");
    }
}
