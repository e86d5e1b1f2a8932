//! Where each value of a document came from.
//!
//! Schema validation and typed decoding work on JSON, which has no positions; this map from
//! JSON pointer to file and span is how a finding about `/spec/retry/maxAttempts` points back
//! at line 12, column 18. Values merged in from a `Defaults` document keep the defaults file's
//! position, so the finding points where the value was written.

use std::collections::HashMap;

use super::yaml::{Node, Span};
use crate::diag::{FileId, Loc};

#[derive(Debug, Clone, Copy)]
struct Entry {
    file: FileId,
    key: Option<Span>,
    value: Span,
}

#[derive(Debug, Clone, Default)]
pub struct Locations {
    entries: HashMap<String, Entry>,
    /// Where the document starts: the answer of last resort.
    root: Option<Loc>,
}

impl Locations {
    pub fn of(file: FileId, root: &Node) -> Self {
        let mut entries = HashMap::new();
        root.walk(&mut |pointer, key, node| {
            entries.insert(
                pointer.to_owned(),
                Entry {
                    file,
                    key,
                    value: node.span,
                },
            );
        });
        Locations {
            entries,
            root: Some(Loc {
                file,
                span: root.span,
            }),
        }
    }

    /// The value at `pointer`, or its nearest ancestor that exists.
    pub fn value(&self, pointer: &str) -> Loc {
        self.find(pointer, false)
    }

    /// The key of the entry at `pointer` (falls back to the value, then to ancestors):
    /// where "unknown field" and "missing field" findings point.
    pub fn key(&self, pointer: &str) -> Loc {
        self.find(pointer, true)
    }

    /// Whether the document itself wrote this pointer (not only an ancestor of it).
    pub fn has(&self, pointer: &str) -> bool {
        self.entries.contains_key(pointer)
    }

    fn find(&self, pointer: &str, prefer_key: bool) -> Loc {
        let mut p = pointer;
        loop {
            if let Some(e) = self.entries.get(p) {
                let span = if prefer_key {
                    e.key.unwrap_or(e.value)
                } else {
                    e.value
                };
                // The document itself: point at its first line, not the whole of it.
                let span = if p.is_empty() { first_line(span) } else { span };
                return Loc { file: e.file, span };
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => break,
            }
        }
        self.root.unwrap_or(Loc {
            file: 0,
            span: Span::default(),
        })
    }

    /// Adds `other`'s entries under `prefix` where this document has none (defaults merging).
    pub fn fill_from(&mut self, other: &Locations, from_prefix: &str, to_prefix: &str) {
        for (p, e) in &other.entries {
            if let Some(rest) = p.strip_prefix(from_prefix)
                && (rest.is_empty() || rest.starts_with('/'))
            {
                let target = format!("{to_prefix}{rest}");
                self.entries.entry(target).or_insert(*e);
            }
        }
    }
}

fn first_line(span: Span) -> Span {
    Span {
        end: span.start + 1,
        ..span
    }
}

/// `/spec/alarms/actions/0` → `spec.alarms.actions[0]`: how fields are named to users.
pub fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_read_like_yaml() {
        assert_eq!(
            field_path("/spec/alarms/actions/0"),
            "spec.alarms.actions[0]"
        );
        assert_eq!(field_path(""), "");
        assert_eq!(field_path("/a~1b"), "a/b");
    }
}
