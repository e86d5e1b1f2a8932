//! The one module that knows YAML.
//!
//! Everything else in dlqctl works on [`Node`], a small YAML tree in which every value keeps
//! the span it came from, so that a diagnostic can point at a line and column. Keeping the
//! parser behind this module means the YAML crate can be swapped without touching the spec
//! model or the rules.
//!
//! The loader is built for hostile input: it bounds nesting depth and the number of nodes an
//! alias may expand to (the "billion laughs" bomb), rejects duplicate keys and non-core tags,
//! and never panics on malformed text.

use saphyr_parser::{Event, Parser, ScalarStyle, Span as YamlSpan};
use serde_json::{Map, Number, Value};

/// Bounds that keep a hostile file from costing more than a normal one.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Deepest nesting of mappings and sequences.
    pub max_depth: usize,
    /// Most nodes one file may expand to, aliases included. A 1 MiB spec file holds far
    /// fewer; an alias bomb asks for billions.
    pub max_nodes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 64,
            max_nodes: 100_000,
        }
    }
}

/// Defined in `diag` (which must not import `spec`); re-exported here, where it has always
/// been found.
pub use crate::diag::Span;

/// A YAML value with its position.
#[derive(Debug, Clone)]
pub struct Node {
    pub value: NodeValue,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub enum NodeValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Keys are strings (spec files have no other kind); each key keeps its own span.
    Map(Vec<(String, Span, Node)>),
}

/// One `---` document of a file.
#[derive(Debug, Clone)]
pub struct Document {
    pub root: Node,
    /// Where the document starts (for findings about the document as a whole).
    pub span: Span,
}

/// Why a file could not be read as YAML; always with a position.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct YamlError {
    pub kind: YamlErrorKind,
    pub message: String,
    pub span: Span,
    /// A second place the error refers to (the first occurrence of a duplicate key).
    pub related: Option<Span>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YamlErrorKind {
    Syntax,
    DuplicateKey,
    TooDeep,
    TooManyNodes,
    UnsupportedTag,
    NonStringKey,
}

impl YamlErrorKind {
    /// The rule id findings of this kind carry.
    pub fn rule(self) -> &'static str {
        match self {
            YamlErrorKind::Syntax => "yaml/syntax",
            YamlErrorKind::DuplicateKey => "yaml/duplicate-key",
            YamlErrorKind::TooDeep => "yaml/too-deep",
            YamlErrorKind::TooManyNodes => "yaml/alias-bomb",
            YamlErrorKind::UnsupportedTag => "yaml/unsupported-tag",
            YamlErrorKind::NonStringKey => "yaml/non-string-key",
        }
    }
}

/// Converts the parser's character positions into byte offsets.
struct LineIndex {
    /// Byte offset at which each line starts (line 1 is index 0).
    line_starts: Vec<usize>,
}

impl LineIndex {
    fn new(src: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(src.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { line_starts }
    }

    fn byte_offset(&self, src: &str, line: usize, col_chars: usize) -> usize {
        let Some(&start) = self.line_starts.get(line.saturating_sub(1)) else {
            return src.len();
        };
        let rest = &src[start..];
        rest.char_indices()
            .nth(col_chars)
            .map_or(src.len(), |(i, _)| start + i)
    }

    fn span(&self, src: &str, s: YamlSpan) -> Span {
        let start = self.byte_offset(src, s.start.line(), s.start.col());
        let end = self.byte_offset(src, s.end.line(), s.end.col()).max(start);
        Span {
            start,
            end,
            line: s.start.line().max(1),
            col: s.start.col() + 1,
        }
    }
}

/// Parses every document of `src`.
pub fn parse(src: &str, limits: Limits) -> Result<Vec<Document>, YamlError> {
    Loader::new(src, limits).run()
}

struct Loader<'a> {
    src: &'a str,
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    index: LineIndex,
    limits: Limits,
    anchors: Vec<(usize, Node, usize)>,
    nodes: usize,
}

impl<'a> Loader<'a> {
    fn new(src: &'a str, limits: Limits) -> Self {
        Loader {
            src,
            parser: Parser::new_from_str(src),
            index: LineIndex::new(src),
            limits,
            anchors: Vec::new(),
            nodes: 0,
        }
    }

    fn next(&mut self) -> Result<(Event<'a>, Span), YamlError> {
        match self.parser.next_event() {
            Some(Ok((ev, span))) => Ok((ev, self.index.span(self.src, span))),
            Some(Err(e)) => {
                let m = e.marker();
                let at = self.index.span(self.src, YamlSpan::new(*m, *m));
                Err(YamlError {
                    kind: YamlErrorKind::Syntax,
                    message: format!("invalid YAML: {}", e.info()),
                    span: at,
                    related: None,
                })
            }
            None => Err(self.error(
                YamlErrorKind::Syntax,
                "invalid YAML: unexpected end of input".into(),
                self.end_span(),
            )),
        }
    }

    fn end_span(&self) -> Span {
        let line = self.index.line_starts.len();
        let start = self.index.line_starts.last().copied().unwrap_or(0);
        Span {
            start,
            end: self.src.len(),
            line,
            col: 1,
        }
    }

    fn error(&self, kind: YamlErrorKind, message: String, span: Span) -> YamlError {
        YamlError {
            kind,
            message,
            span,
            related: None,
        }
    }

    fn run(mut self) -> Result<Vec<Document>, YamlError> {
        let mut docs = Vec::new();
        loop {
            let (ev, span) = self.next()?;
            match ev {
                Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
                Event::StreamEnd => break,
                Event::DocumentStart(_) => {
                    // Anchors are scoped to their document.
                    self.anchors.clear();
                    let (ev, first) = self.next()?;
                    let root = self.node(ev, first, 0)?;
                    docs.push(Document { root, span });
                }
                _ => {
                    return Err(self.error(
                        YamlErrorKind::Syntax,
                        "invalid YAML: unexpected event outside a document".into(),
                        span,
                    ));
                }
            }
        }
        Ok(docs)
    }

    fn count(&mut self, n: usize, span: Span) -> Result<(), YamlError> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > self.limits.max_nodes {
            return Err(self.error(
                YamlErrorKind::TooManyNodes,
                format!(
                    "the file expands to more than {} values; aliases that multiply content \
                     (an alias bomb) are refused",
                    self.limits.max_nodes
                ),
                span,
            ));
        }
        Ok(())
    }

    fn node(&mut self, ev: Event<'a>, span: Span, depth: usize) -> Result<Node, YamlError> {
        if depth > self.limits.max_depth {
            return Err(self.error(
                YamlErrorKind::TooDeep,
                format!(
                    "nesting deeper than {} levels; a spec is never that deep",
                    self.limits.max_depth
                ),
                span,
            ));
        }
        match ev {
            Event::Alias(id) => self.alias(id, span),
            Event::Scalar(text, style, anchor, tag) => {
                // Shown as written: `!!python/object`, not the expanded `tag:yaml.org,2002:` form.
                let tag = tag.map(|t| {
                    format!("{}{}", t.handle, t.suffix).replacen("tag:yaml.org,2002:", "!!", 1)
                });
                self.scalar_node(&text, style, anchor, tag, span)
            }
            Event::SequenceStart(anchor, tag) => {
                self.check_collection_tag(
                    tag.as_deref().map(|t| (&*t.handle, &*t.suffix)),
                    "seq",
                    span,
                )?;
                self.count(1, span)?;
                self.sequence(anchor, span, depth)
            }
            Event::MappingStart(anchor, tag) => {
                self.check_collection_tag(
                    tag.as_deref().map(|t| (&*t.handle, &*t.suffix)),
                    "map",
                    span,
                )?;
                self.count(1, span)?;
                self.mapping(anchor, span, depth)
            }
            Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd
            | Event::SequenceEnd
            | Event::MappingEnd
            | Event::Nothing => Err(self.error(
                YamlErrorKind::Syntax,
                "invalid YAML: unexpected structure".into(),
                span,
            )),
        }
    }

    /// A copy of the anchored node, counted against the limits first.
    fn alias(&mut self, id: usize, span: Span) -> Result<Node, YamlError> {
        // Count before copying: a bomb is refused without building what it asks for.
        let found = self.anchors.iter().rposition(|(a, _, _)| *a == id);
        match found {
            Some(i) => {
                self.count(self.anchors[i].2, span)?;
                let mut node = self.anchors[i].1.clone();
                node.span = span;
                Ok(node)
            }
            None => Err(self.error(
                YamlErrorKind::Syntax,
                "invalid YAML: alias to an unknown anchor".into(),
                span,
            )),
        }
    }

    /// A plain value; `tag` is as written (`!!str`), and only core tags are accepted.
    fn scalar_node(
        &mut self,
        text: &str,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<String>,
        span: Span,
    ) -> Result<Node, YamlError> {
        self.count(1, span)?;
        let value = scalar(text, style, tag.as_deref()).ok_or_else(|| {
            self.error(
                YamlErrorKind::UnsupportedTag,
                format!(
                    "unsupported YAML tag `{}`; specs use plain values",
                    tag.as_deref().unwrap_or_default()
                ),
                span,
            )
        })?;
        let node = Node { value, span };
        self.remember(anchor, &node, 1);
        Ok(node)
    }

    /// The items of a sequence whose start event was just read, up to its end event.
    fn sequence(&mut self, anchor: usize, span: Span, depth: usize) -> Result<Node, YamlError> {
        let before = self.nodes;
        let mut items = Vec::new();
        let end = loop {
            let (ev, s) = self.next()?;
            if matches!(ev, Event::SequenceEnd) {
                break s;
            }
            items.push(self.node(ev, s, depth + 1)?);
        };
        let last = items.last().map(|n| n.span);
        let node = Node {
            value: NodeValue::Seq(items),
            span: join(span, last.unwrap_or(end)),
        };
        self.remember(anchor, &node, self.nodes - before + 1);
        Ok(node)
    }

    /// The entries of a mapping whose start event was just read, up to its end event; keys
    /// are unique strings.
    fn mapping(&mut self, anchor: usize, span: Span, depth: usize) -> Result<Node, YamlError> {
        let before = self.nodes;
        let mut entries: Vec<(String, Span, Node)> = Vec::new();
        let end = loop {
            let (ev, key_span) = self.next()?;
            if matches!(ev, Event::MappingEnd) {
                break key_span;
            }
            let key_node = self.node(ev, key_span, depth + 1)?;
            let key = self.map_key(key_node.value, key_node.span)?;
            if let Some((_, first, _)) = entries.iter().find(|(k, _, _)| *k == key) {
                return Err(YamlError {
                    kind: YamlErrorKind::DuplicateKey,
                    message: format!(
                        "duplicate key `{key}` (first defined on line {})",
                        first.line
                    ),
                    span: key_node.span,
                    related: Some(*first),
                });
            }
            let (ev, s) = self.next()?;
            let value = self.node(ev, s, depth + 1)?;
            entries.push((key, key_node.span, value));
        };
        let last = entries.last().map(|(_, _, n)| n.span);
        let node = Node {
            value: NodeValue::Map(entries),
            span: join(span, last.unwrap_or(end)),
        };
        self.remember(anchor, &node, self.nodes - before + 1);
        Ok(node)
    }

    /// A mapping key as the string it reads as; collections are refused.
    fn map_key(&self, value: NodeValue, span: Span) -> Result<String, YamlError> {
        match value {
            NodeValue::Str(s) => Ok(s),
            NodeValue::Int(i) => Ok(i.to_string()),
            NodeValue::Bool(b) => Ok(b.to_string()),
            NodeValue::Float(f) => Ok(f.to_string()),
            NodeValue::Null => Ok("null".into()),
            NodeValue::Seq(_) | NodeValue::Map(_) => Err(self.error(
                YamlErrorKind::NonStringKey,
                "mapping keys must be plain strings, not collections".into(),
                span,
            )),
        }
    }

    fn check_collection_tag(
        &self,
        tag: Option<(&str, &str)>,
        expected: &str,
        span: Span,
    ) -> Result<(), YamlError> {
        match tag {
            None => Ok(()),
            Some((handle, suffix)) if core_tag(handle, suffix) == Some(expected) => Ok(()),
            Some((handle, suffix)) => Err(self.error(
                YamlErrorKind::UnsupportedTag,
                format!(
                    "unsupported YAML tag `{}`; specs use plain values",
                    format!("{handle}{suffix}").replacen("tag:yaml.org,2002:", "!!", 1)
                ),
                span,
            )),
        }
    }

    fn remember(&mut self, anchor: usize, node: &Node, size: usize) {
        if anchor != 0 {
            self.anchors.push((anchor, node.clone(), size));
        }
    }
}

fn join(start: Span, end: Span) -> Span {
    Span {
        end: end.end.max(start.end),
        ..start
    }
}

/// Maps `!!str`-style tags (as the parser resolves them) to a short name.
fn core_tag(handle: &str, suffix: &str) -> Option<&'static str> {
    let full = format!("{handle}{suffix}");
    let name = full
        .strip_prefix("tag:yaml.org,2002:")
        .or_else(|| full.strip_prefix("!!"))?;
    Some(match name {
        "str" => "str",
        "int" => "int",
        "float" => "float",
        "bool" => "bool",
        "null" => "null",
        "seq" => "seq",
        "map" => "map",
        _ => return None,
    })
}

/// Resolves a scalar by the YAML 1.2 core schema. `None` for an unsupported tag.
fn scalar(text: &str, style: ScalarStyle, tag: Option<&str>) -> Option<NodeValue> {
    if let Some(tag) = tag {
        return match core_tag(tag, "")? {
            "str" => Some(NodeValue::Str(text.to_owned())),
            "int" => parse_int(text).map(NodeValue::Int),
            "float" => parse_float(text).map(NodeValue::Float),
            "bool" => parse_bool(text).map(NodeValue::Bool),
            "null" => Some(NodeValue::Null),
            _ => None,
        };
    }
    if style != ScalarStyle::Plain {
        return Some(NodeValue::Str(text.to_owned()));
    }
    Some(match text {
        "" | "~" | "null" | "Null" | "NULL" => NodeValue::Null,
        _ => {
            if let Some(b) = parse_bool(text) {
                NodeValue::Bool(b)
            } else if let Some(i) = parse_int(text) {
                NodeValue::Int(i)
            } else if let Some(f) = parse_float(text) {
                NodeValue::Float(f)
            } else {
                NodeValue::Str(text.to_owned())
            }
        }
    })
}

fn parse_bool(t: &str) -> Option<bool> {
    match t {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

fn parse_int(t: &str) -> Option<i64> {
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let magnitude = if let Some(h) = digits.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if let Some(o) = digits.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()?
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse().ok()?
    } else {
        return None;
    };
    Some(if neg { -magnitude } else { magnitude })
}

fn parse_float(t: &str) -> Option<f64> {
    match t {
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Some(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Some(f64::NAN),
        _ => {}
    }
    let body = t.strip_prefix(['-', '+']).unwrap_or(t);
    let looks_numeric = body.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'));
    if looks_numeric { t.parse().ok() } else { None }
}

impl Node {
    /// The JSON form of this node, used for schema validation and typed decoding.
    /// Non-finite floats become strings, which the schema then rejects by type.
    pub fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(i) => Value::Number((*i).into()),
            NodeValue::Float(f) => Number::from_f64(*f)
                .map(Value::Number)
                .unwrap_or_else(|| Value::String(f.to_string())),
            NodeValue::Str(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, _, v)| (k.clone(), v.to_json()))
                    .collect::<Map<_, _>>(),
            ),
        }
    }

    /// Calls `f` with the JSON pointer, key span (if any) and node of every value in the tree.
    pub fn walk(&self, f: &mut impl FnMut(&str, Option<Span>, &Node)) {
        fn go(
            node: &Node,
            path: &mut String,
            key: Option<Span>,
            f: &mut impl FnMut(&str, Option<Span>, &Node),
        ) {
            f(path, key, node);
            match &node.value {
                NodeValue::Seq(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let len = path.len();
                        path.push('/');
                        path.push_str(&i.to_string());
                        go(item, path, None, f);
                        path.truncate(len);
                    }
                }
                NodeValue::Map(entries) => {
                    for (k, key_span, v) in entries {
                        let len = path.len();
                        path.push('/');
                        path.push_str(&super::pointer::escape(k));
                        go(v, path, Some(*key_span), f);
                        path.truncate(len);
                    }
                }
                _ => {}
            }
        }
        go(self, &mut String::new(), None, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(src: &str) -> Node {
        let mut docs = parse(src, Limits::default()).expect("valid yaml");
        assert_eq!(docs.len(), 1);
        docs.remove(0).root
    }

    #[test]
    fn scalars_follow_the_core_schema() {
        let n = one("a: 1\nb: '1'\nc: true\nd: ~\ne: 1.5\nf: 5s\ng: 0x10\n");
        assert_eq!(
            n.to_json(),
            serde_json::json!({"a": 1, "b": "1", "c": true, "d": null, "e": 1.5, "f": "5s", "g": 16})
        );
    }

    #[test]
    fn positions_are_one_based_lines_and_columns() {
        let n = one("a:\n  b: x\n");
        let mut seen = Vec::new();
        n.walk(&mut |p, _, node| seen.push((p.to_owned(), node.span.line, node.span.col)));
        assert!(seen.contains(&("/a/b".to_owned(), 2, 6)), "{seen:?}");
    }

    #[test]
    fn duplicate_keys_are_refused_with_both_places() {
        let e = parse("a: 1\nb: 2\na: 3\n", Limits::default()).unwrap_err();
        assert_eq!(e.kind, YamlErrorKind::DuplicateKey);
        assert_eq!(e.span.line, 3);
        assert_eq!(e.related.map(|s| s.line), Some(1));
    }

    #[test]
    fn input_that_ends_early_is_refused_at_its_end() {
        // The parser ends its events with StreamEnd; asking past it is what a truncated
        // stream would look like, reported on the last line, not at the start of the file.
        let src = "a: 1\nb: 2\n";
        let mut loader = Loader::new(src, Limits::default());
        let mut events = 0;
        while !matches!(loader.next(), Ok((Event::StreamEnd, _))) {
            events += 1;
            assert!(events < 20, "no StreamEnd");
        }
        let e = loader.next().unwrap_err();
        assert_eq!(e.kind, YamlErrorKind::Syntax);
        assert_eq!(e.message, "invalid YAML: unexpected end of input");
        assert_eq!(
            (e.span.start, e.span.end, e.span.line, e.span.col),
            (src.len(), src.len(), 3, 1)
        );
    }

    #[test]
    fn alias_bomb_is_refused() {
        // 10^4 values under a limit of 1,000: small enough that a counting bug fails this test
        // quickly instead of hanging it (the billion-laughs fixture goes through `lint`).
        let mut src = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..4 {
            let p = i - 1;
            src.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let e = parse(&src, limits(64, 1_000)).unwrap_err();
        assert_eq!(e.kind, YamlErrorKind::TooManyNodes);
    }

    #[test]
    fn deep_nesting_is_refused() {
        let src = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let e = parse(&src, Limits::default()).unwrap_err();
        assert_eq!(e.kind, YamlErrorKind::TooDeep);
    }

    #[test]
    fn syntax_errors_have_a_position() {
        let e = parse("a: [1, 2\nb: 3\n", Limits::default()).unwrap_err();
        assert_eq!(e.kind, YamlErrorKind::Syntax);
        assert!(e.span.line >= 1);
    }

    #[test]
    fn multiple_documents() {
        let docs = parse("a: 1\n---\nb: 2\n", Limits::default()).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].root.span.line, 3);
    }

    fn json(src: &str) -> Value {
        one(src).to_json()
    }

    fn err(src: &str, limits: Limits) -> (YamlErrorKind, String, usize, usize) {
        let e = parse(src, limits).expect_err("refused");
        (e.kind, e.message, e.span.line, e.span.col)
    }

    fn limits(max_depth: usize, max_nodes: usize) -> Limits {
        Limits {
            max_depth,
            max_nodes,
        }
    }

    #[test]
    fn default_limits_are_64_levels_and_100000_values() {
        let l = Limits::default();
        assert_eq!((l.max_depth, l.max_nodes), (64, 100_000));
        let at_limit = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert!(parse(&at_limit, l).is_ok(), "depth 64 is allowed");
        let over = format!("{}{}", "[".repeat(66), "]".repeat(66));
        assert_eq!(
            parse(&over, l).expect_err("too deep").kind,
            YamlErrorKind::TooDeep
        );
    }

    #[test]
    fn rules_name_each_error_kind() {
        assert_eq!(
            [
                YamlErrorKind::Syntax,
                YamlErrorKind::DuplicateKey,
                YamlErrorKind::TooDeep,
                YamlErrorKind::TooManyNodes,
                YamlErrorKind::UnsupportedTag,
                YamlErrorKind::NonStringKey,
            ]
            .map(YamlErrorKind::rule),
            [
                "yaml/syntax",
                "yaml/duplicate-key",
                "yaml/too-deep",
                "yaml/alias-bomb",
                "yaml/unsupported-tag",
                "yaml/non-string-key",
            ]
        );
    }

    #[test]
    fn nesting_is_refused_one_level_past_the_limit_at_the_deep_node() {
        assert!(parse("[[[x]]]", limits(3, 100)).is_ok());
        assert_eq!(
            err("a:\n  - [[x]]\n", limits(3, 100)),
            (
                YamlErrorKind::TooDeep,
                "nesting deeper than 3 levels; a spec is never that deep".to_owned(),
                2,
                7
            )
        );
    }

    #[test]
    fn a_key_is_one_level_below_its_mapping() {
        assert_eq!(
            err("{a: {b: 1}}", limits(1, 100)),
            (
                YamlErrorKind::TooDeep,
                "nesting deeper than 1 levels; a spec is never that deep".to_owned(),
                1,
                6
            )
        );
    }

    #[test]
    fn a_sign_is_read_once() {
        assert_eq!(
            json("[+-5, ++5, -+5, --5]"),
            serde_json::json!(["+-5", "++5", "-+5", "--5"])
        );
    }

    #[test]
    fn values_are_counted_up_to_the_limit_aliases_by_their_size() {
        // A sequence and its two items.
        assert!(parse("[x, y]", limits(64, 3)).is_ok());
        assert_eq!(
            err("[x, y]", limits(64, 2)),
            (
                YamlErrorKind::TooManyNodes,
                "the file expands to more than 2 values; aliases that multiply content (an alias bomb) are refused".to_owned(),
                1,
                5
            )
        );
        // Root, key, anchored collection (1 + 2), key, alias (3 again): 9.
        for src in ["a: &a [x, y]\nb: *a\n", "a: &a {x: 1}\nb: *a\n"] {
            assert!(parse(src, limits(64, 9)).is_ok(), "{src}");
            assert_eq!(
                err(src, limits(64, 8)),
                (
                    YamlErrorKind::TooManyNodes,
                    "the file expands to more than 8 values; aliases that multiply content (an alias bomb) are refused".to_owned(),
                    2,
                    4
                ),
                "{src}"
            );
        }
        // Deeper in the file, four items: 1 + 1 + (1 + 4) + 1 + 5 = 13, after a first entry (2).
        let src = "z: 0\na: &a [x, y, z, w]\nb: *a\n";
        assert!(parse(src, limits(64, 15)).is_ok());
        assert_eq!(err(src, limits(64, 14)).0, YamlErrorKind::TooManyNodes);
        // Root, key, scalar, key, alias (1): 5.
        assert!(parse("a: &a x\nb: *a\n", limits(64, 5)).is_ok());
        assert!(parse("a: &a x\nb: *a\n", limits(64, 4)).is_err());
    }

    #[test]
    fn an_alias_copies_its_own_anchor_at_the_alias_position() {
        let n = one("[&a x, &b y, *a, *b]");
        assert_eq!(n.to_json(), serde_json::json!(["x", "y", "x", "y"]));
        let NodeValue::Seq(items) = &n.value else {
            panic!("a sequence")
        };
        assert_eq!((items[2].span.line, items[2].span.col), (1, 14));
        assert_eq!(
            json("a: &a {k: v}\nb: *a\n"),
            serde_json::json!({"a": {"k": "v"}, "b": {"k": "v"}})
        );
    }

    #[test]
    fn anchors_do_not_reach_into_the_next_document() {
        assert_eq!(
            err("a: &a 1\n---\nb: *a\n", Limits::default()),
            (
                YamlErrorKind::Syntax,
                "invalid YAML: alias to an unknown anchor".to_owned(),
                3,
                4
            )
        );
    }

    #[test]
    fn scalars_are_resolved_by_the_core_schema() {
        assert_eq!(
            json(
                "n: [~, null, Null, NULL, '']\nb: [true, True, TRUE, false, False, FALSE, 'true', yes]\n\
                 i: [-5, +5, 0o17, -0x10, 0x, 12a, '7']\n\
                 f: [1e3, 1E3, 1e-3, 1e+3, -1.5, +1.5, .5, 1.2.3, e5, 1_000]\n"
            ),
            serde_json::json!({
                "n": [null, null, null, null, ""],
                "b": [true, true, true, false, false, false, "true", "yes"],
                "i": [-5, 5, 15, -16, "0x", "12a", "7"],
                "f": [1000.0, 1000.0, 0.001, 1000.0, -1.5, 1.5, 0.5, "1.2.3", "e5", "1_000"]
            })
        );
        let empty = one("a:\n");
        assert_eq!(empty.to_json(), serde_json::json!({"a": null}));
    }

    #[test]
    fn infinities_and_nan_become_strings_the_schema_rejects() {
        assert_eq!(
            json("[.inf, .Inf, .INF, +.inf, +.Inf, +.INF, -.inf, -.Inf, -.INF, .nan, .NaN, .NAN]"),
            serde_json::json!([
                "inf", "inf", "inf", "inf", "inf", "inf", "-inf", "-inf", "-inf", "NaN", "NaN",
                "NaN"
            ])
        );
    }

    #[test]
    fn core_tags_are_applied_and_others_refused() {
        assert_eq!(
            json(
                "[!!str 1, !!int '0x10', !!float 1, !!bool true, !!null x, !!seq [a], !!map {a: 1}]"
            ),
            serde_json::json!(["1", 16, 1.0, true, null, ["a"], {"a": 1}])
        );
        let refused = |src: &str| {
            let (kind, message, ..) = err(src, Limits::default());
            assert_eq!(kind, YamlErrorKind::UnsupportedTag, "{src}");
            message
        };
        assert_eq!(
            refused("a: !!int abc\n"),
            "unsupported YAML tag `!!int`; specs use plain values"
        );
        assert_eq!(
            refused("a: !!seq x\n"),
            "unsupported YAML tag `!!seq`; specs use plain values"
        );
        assert_eq!(
            refused("a: !custom x\n"),
            "unsupported YAML tag `!custom`; specs use plain values"
        );
        assert_eq!(
            refused("a: !!map [x]\n"),
            "unsupported YAML tag `!!map`; specs use plain values"
        );
        assert_eq!(
            refused("a: !!seq {x: 1}\n"),
            "unsupported YAML tag `!!seq`; specs use plain values"
        );
        assert_eq!(
            refused("a: !!python/object {x: 1}\n"),
            "unsupported YAML tag `!!python/object`; specs use plain values"
        );
        assert_eq!(core_tag("!!", "str"), Some("str"));
        assert_eq!(core_tag("tag:yaml.org,2002:", "map"), Some("map"));
        assert_eq!(core_tag("!", "str"), None);
    }

    #[test]
    fn keys_read_as_strings_and_collections_are_refused() {
        assert_eq!(
            json("1: a\ntrue: b\n1.5: c\n~: d\n"),
            serde_json::json!({"1": "a", "true": "b", "1.5": "c", "null": "d"})
        );
        assert_eq!(
            err("? [a]\n: b\n", Limits::default()),
            (
                YamlErrorKind::NonStringKey,
                "mapping keys must be plain strings, not collections".to_owned(),
                1,
                3
            )
        );
        let e = parse("a: 1\nb: 2\na: 3\n", Limits::default()).expect_err("duplicate");
        assert_eq!(e.message, "duplicate key `a` (first defined on line 1)");
        assert_eq!((e.span.col, e.related.map(|s| s.col)), (1, Some(1)));
    }

    #[test]
    fn spans_are_byte_offsets_even_after_multibyte_characters() {
        let src = "x: 1\ny: éé b\nz: [1, 2]\nw: []\n";
        let n = one(src);
        let mut seen = Vec::new();
        n.walk(&mut |p, key, node| {
            seen.push((
                p.to_owned(),
                key.map(|k| (k.start, k.end)),
                &src[node.span.start..node.span.end],
                node.span.line,
                node.span.col,
            ))
        });
        assert_eq!(
            seen,
            [
                ("".to_owned(), None, src.trim_end(), 1, 1),
                ("/x".to_owned(), Some((0, 1)), "1", 1, 4),
                ("/y".to_owned(), Some((5, 6)), "éé b", 2, 4),
                ("/z".to_owned(), Some((15, 16)), "[1, 2", 3, 4),
                ("/z/0".to_owned(), None, "1", 3, 5),
                ("/z/1".to_owned(), None, "2", 3, 8),
                ("/w".to_owned(), Some((25, 26)), "[]", 4, 4),
            ]
        );
    }

    #[test]
    fn walk_escapes_keys_and_numbers_items() {
        let n = one("a/b: [x, {c~d: y}]\ne: z\n");
        let mut seen = Vec::new();
        n.walk(&mut |p, key, _| seen.push((p.to_owned(), key.is_some())));
        assert_eq!(
            seen,
            [
                ("".to_owned(), false),
                ("/a~1b".to_owned(), true),
                ("/a~1b/0".to_owned(), false),
                ("/a~1b/1".to_owned(), false),
                ("/a~1b/1/c~0d".to_owned(), true),
                ("/e".to_owned(), true),
            ]
        );
    }

    #[test]
    fn syntax_errors_say_invalid_yaml_at_the_place() {
        let (kind, message, line, col) = err("a: [1, 2\nb: 3\n", Limits::default());
        assert_eq!((kind, line, col), (YamlErrorKind::Syntax, 2, 2));
        assert_eq!(message, "invalid YAML: illegal placement of ':' indicator");
    }

    #[test]
    fn documents_start_where_they_are_written() {
        let docs = parse("a: 1\n---\nb: 2\n", Limits::default()).expect("two documents");
        assert_eq!(
            docs.iter()
                .map(|d| (d.span.line, d.span.col, d.span.start))
                .collect::<Vec<_>>(),
            [(1, 1, 0), (2, 1, 5)]
        );
        assert!(parse("", Limits::default()).expect("empty").is_empty());
        assert_eq!(json("---\n"), Value::Null);
    }
}
