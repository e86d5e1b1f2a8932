//! Where each value of a document came from.
//!
//! Schema validation and typed decoding work on JSON, which has no positions; this map from
//! JSON pointer to file and span is how a finding about `/spec/retry/maxAttempts` points back
//! at line 12, column 18. Values merged in from a `Defaults` document keep the defaults file's
//! position, so the finding points where the value was written.
//!
//! A document's YAML tree is flattened into a compact index once it is parsed (each pointer's
//! hash and its key and value spans, 48 bytes an entry) and the tree is dropped: the trees
//! of every document, kept for the findings that might need them, were most of a large lint's
//! peak memory (issue 39).

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::yaml::{Node, NodeValue, Span};
use crate::diag::{FileId, Loc};

/// A document's positions, looked up by JSON pointer when a finding needs one.
#[derive(Debug, Clone, Default)]
pub struct Locations {
    file: FileId,
    index: Option<Arc<Index>>,
    /// Documents that fill in what this one does not write (defaults merging).
    fills: Vec<Fill>,
}

#[derive(Debug, Clone)]
struct Fill {
    from: Locations,
    from_prefix: String,
    to_prefix: String,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    file: FileId,
    key: Option<Span>,
    value: Span,
}

/// Every value of a tree by the hash of its canonical JSON pointer, sorted by hash: the key
/// span (none for the root and sequence items) and the value span. Where a map repeats a
/// key, the first one's entries are kept (as a search of the tree found the first).
#[derive(Debug, Default)]
struct Index {
    entries: Vec<(u64, Option<Pos>, Pos)>,
}

/// A [`Span`] in 16 bytes (spec files are far below 4 GiB: the loader's limits).
#[derive(Debug, Clone, Copy)]
struct Pos {
    start: u32,
    end: u32,
    line: u32,
    col: u32,
}

impl Pos {
    fn of(s: Span) -> Self {
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Pos {
            start: n(s.start),
            end: n(s.end),
            line: n(s.line),
            col: n(s.col),
        }
    }

    fn span(self) -> Span {
        Span {
            start: self.start as usize,
            end: self.end as usize,
            line: self.line as usize,
            col: self.col as usize,
        }
    }
}

fn hash(pointer: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    pointer.hash(&mut h);
    h.finish()
}

impl Index {
    fn of(root: &Node) -> Self {
        let mut entries = Vec::new();
        let mut pointer = String::new();
        walk(root, None, &mut pointer, &mut entries);
        // Stable: of equal pointers (a repeated key) the first written stays first.
        entries.sort_by_key(|e| e.0);
        entries.dedup_by_key(|e| e.0);
        entries.shrink_to_fit();
        Index { entries }
    }

    fn get(&self, pointer: &str) -> Option<(Option<Span>, Span)> {
        let h = hash(pointer);
        let i = self.entries.binary_search_by_key(&h, |e| e.0).ok()?;
        let (_, key, value) = self.entries[i];
        Some((key.map(Pos::span), value.span()))
    }
}

/// Adds `node` at `pointer` and everything under it, in document order.
fn walk(
    node: &Node,
    key: Option<Span>,
    pointer: &mut String,
    out: &mut Vec<(u64, Option<Pos>, Pos)>,
) {
    out.push((hash(pointer), key.map(Pos::of), Pos::of(node.span)));
    let len = pointer.len();
    match &node.value {
        NodeValue::Map(entries) => {
            for (k, k_span, v) in entries {
                pointer.push('/');
                for c in k.chars() {
                    match c {
                        '~' => pointer.push_str("~0"),
                        '/' => pointer.push_str("~1"),
                        c => pointer.push(c),
                    }
                }
                walk(v, Some(*k_span), pointer, out);
                pointer.truncate(len);
            }
        }
        NodeValue::Seq(items) => {
            for (i, v) in items.iter().enumerate() {
                pointer.push('/');
                pointer.push_str(&i.to_string());
                walk(v, None, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

impl Locations {
    /// The positions of a document's tree (indexed; the tree is not kept).
    pub fn of(file: FileId, root: &Node) -> Self {
        Locations {
            file,
            index: Some(Arc::new(Index::of(root))),
            fills: Vec::new(),
        }
    }

    /// Where the value at `pointer` (or its nearest ancestor) is in a tree that is not kept
    /// (documents refused before they are indexed).
    pub fn at(file: FileId, root: &Node, pointer: &str) -> Loc {
        Locations::of(file, root).value(pointer)
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
        self.entry(pointer).is_some()
    }

    fn entry(&self, pointer: &str) -> Option<Entry> {
        if let Some((key, value)) = self.index.as_deref().and_then(|i| i.get(pointer)) {
            return Some(Entry {
                file: self.file,
                key,
                value,
            });
        }
        self.fills.iter().find_map(|f| {
            let rest = pointer.strip_prefix(f.to_prefix.as_str())?;
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None;
            }
            f.from.entry(&format!("{}{rest}", f.from_prefix))
        })
    }

    fn find(&self, pointer: &str, prefer_key: bool) -> Loc {
        let mut p = pointer;
        loop {
            if let Some(e) = self.entry(p) {
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
        Loc {
            file: self.file,
            span: Span::default(),
        }
    }

    /// Takes `other`'s values under `from_prefix`, placed under `to_prefix`, where this
    /// document has none (defaults merging).
    pub fn fill_from(&mut self, other: &Locations, from_prefix: &str, to_prefix: &str) {
        self.fills.push(Fill {
            from: other.clone(),
            from_prefix: from_prefix.to_owned(),
            to_prefix: to_prefix.to_owned(),
        });
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

    fn doc(src: &str) -> Node {
        let mut docs =
            crate::spec::yaml::parse(src, crate::spec::yaml::Limits::default()).expect("yaml");
        docs.remove(0).root
    }

    #[test]
    fn pointers_find_keys_values_and_nearest_ancestors() {
        let locs = Locations::of(3, &doc("a:\n  b: [x, y]\n  'c/d~e': 1\n"));
        let at = |p: &str, key: bool| {
            let l = if key { locs.key(p) } else { locs.value(p) };
            (l.file, l.span.line, l.span.col)
        };
        assert_eq!(at("/a/b/1", false), (3, 2, 10));
        assert_eq!(at("/a/b/1", true), (3, 2, 10));
        assert_eq!(at("/a/b", true), (3, 2, 3));
        assert_eq!(at("/a/c~1d~0e", false), (3, 3, 12));
        // Missing: the nearest ancestor that exists.
        assert_eq!(at("/a/b/7", false), at("/a/b", false));
        assert_eq!(at("/a/b/01", false), at("/a/b", false));
        assert_eq!(at("/zzz/q", false).1, 1);
        assert!(locs.has("/a/b/0") && !locs.has("/a/q"));
    }

    #[test]
    fn filled_values_point_into_the_document_that_wrote_them() {
        let mut chan = Locations::of(1, &doc("spec:\n  target: t\n"));
        let defaults = Locations::of(2, &doc("spec:\n  retention: 4d\n  target: u\n"));
        chan.fill_from(&defaults, "/spec", "/spec");
        assert_eq!(chan.value("/spec/retention").file, 2);
        assert_eq!(chan.value("/spec/retention").span.line, 2);
        // The channel's own value wins.
        assert_eq!(chan.value("/spec/target").file, 1);
        assert!(chan.has("/spec/retention"));
    }

    #[test]
    fn the_document_itself_is_its_first_character_and_nothing_is_nowhere() {
        let locs = Locations::of(4, &doc("\n\na: 1\nb: 2\n"));
        let root = locs.value("");
        assert_eq!(
            (
                root.file,
                root.span.start,
                root.span.end,
                root.span.line,
                root.span.col
            ),
            (4, 2, 3, 3, 1)
        );
        assert_eq!(locs.key(""), root);
        // An unknown top-level field falls back to the document's first character too.
        assert_eq!(locs.value("/zzz"), root);
        let none = Locations::default();
        assert_eq!(
            none.value("/a"),
            Loc {
                file: 0,
                span: Span::default()
            }
        );
        assert!(!none.has(""));
    }

    #[test]
    fn a_fill_covers_its_prefix_and_what_is_under_it_only() {
        let mut chan = Locations::of(1, &doc("spec:\n  target: t\n"));
        let defaults = Locations::of(
            2,
            &doc("spec:\n  retention: 4d\nspecx: 1\nother:\n  q: 1\n"),
        );
        chan.fill_from(&defaults, "/spec", "/spec");
        assert!(!chan.has("/specx"), "`/specx` is not under `/spec`");
        assert!(!chan.has("/other"));
        let mut moved = Locations::of(1, &doc("spec: {}\n"));
        moved.fill_from(&defaults, "/other", "/spec/moved");
        assert!(moved.has("/spec/moved"), "the prefix itself is filled");
        assert_eq!(moved.value("/spec/moved/q").file, 2);
        assert_eq!(moved.value("/spec/moved/q").span.line, 5);
        assert!(!moved.has("/spec/moved/r"));
    }
}
