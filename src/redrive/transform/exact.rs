//! A transform changes only what its program changed (issue 52, H2). jq reads a body into
//! values that forget how it was written: numbers become 64-bit floats
//! (`12345678901234567890123` comes back as `1.2345678901234568e+22`, `1e2` as `100.0`, `-0`
//! as `-0.0`), and of a key given twice only the last is kept. So the copy's body is not
//! written from the program's value alone: the original body is read again as tokens that
//! keep their bytes ([`Raw`]), and every part of the program's value that equals the
//! original's part at the same place is written as the original's bytes. Only what the
//! program changed is written anew (compact JSON), and an object the program changed that
//! had a key twice fails the message (its copy could not keep both): it stays.
//!
//! The dry run's diff shows both sides through [`pretty`], which indents but writes every
//! number, string and key as its bytes, so the diff shows what the copy really says.

use jaq_json::Val;

/// A JSON value as written: each part keeps its bytes.
#[derive(Debug)]
enum Raw<'a> {
    /// A number, string, `true`, `false` or `null`, as written.
    Scalar(&'a [u8]),
    Arr {
        span: &'a [u8],
        items: Vec<Raw<'a>>,
    },
    Obj {
        span: &'a [u8],
        /// Each key as written (quotes and escapes), as text, and its value.
        entries: Vec<(&'a [u8], String, Raw<'a>)>,
        /// Whether a key is given twice.
        repeats: bool,
    },
}

impl<'a> Raw<'a> {
    fn span(&self) -> &'a [u8] {
        match *self {
            Raw::Scalar(s) | Raw::Arr { span: s, .. } | Raw::Obj { span: s, .. } => s,
        }
    }
}

/// Deeper than serde_json reads (128), so never reached for a body it read.
const MAX_DEPTH: usize = 256;

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn string(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        if self.peek() != Some(b'"') {
            return None;
        }
        self.i += 1;
        loop {
            match self.peek()? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return Some(&self.b[start..self.i]);
                }
                _ => self.i += 1,
            }
        }
    }

    fn value(&mut self, depth: usize) -> Option<Raw<'a>> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        let start = self.i;
        match self.peek()? {
            b'"' => self.string().map(Raw::Scalar),
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                } else {
                    loop {
                        items.push(self.value(depth + 1)?);
                        self.ws();
                        match self.peek()? {
                            b',' => self.i += 1,
                            b']' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                Some(Raw::Arr {
                    span: &self.b[start..self.i],
                    items,
                })
            }
            b'{' => {
                self.i += 1;
                let mut entries: Vec<(&'a [u8], String, Raw<'a>)> = Vec::new();
                let mut names = std::collections::HashSet::new();
                let mut repeats = false;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        let key = self.string()?;
                        let name: String = serde_json::from_slice(key).ok()?;
                        self.ws();
                        if self.peek()? != b':' {
                            return None;
                        }
                        self.i += 1;
                        let v = self.value(depth + 1)?;
                        repeats |= !names.insert(name.clone());
                        entries.push((key, name, v));
                        self.ws();
                        match self.peek()? {
                            b',' => self.i += 1,
                            b'}' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                Some(Raw::Obj {
                    span: &self.b[start..self.i],
                    entries,
                    repeats,
                })
            }
            _ => {
                while self.i < self.b.len()
                    && !matches!(
                        self.b[self.i],
                        b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r'
                    )
                {
                    self.i += 1;
                }
                (self.i > start).then(|| Raw::Scalar(&self.b[start..self.i]))
            }
        }
    }
}

/// `bytes` read as JSON tokens, when it is JSON (as serde_json reads it) and nothing
/// follows.
fn scan(bytes: &[u8]) -> Option<Raw<'_>> {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).ok()?;
    let mut s = Scanner { b: bytes, i: 0 };
    let v = s.value(0)?;
    s.ws();
    (s.i == s.b.len()).then_some(v)
}

/// The copy's body when a program turned the body `was` (read from `original`, JSON) into
/// `now`: every part of `now` equal to `was`'s part at the same place is `original`'s bytes
/// for it, the rest compact JSON. `None` when `original` is not JSON (the caller writes
/// `now` anew).
pub fn rewrite(original: &[u8], was: &Val, now: &Val) -> Option<Result<Vec<u8>, String>> {
    let raw = scan(original)?;
    let mut out = Vec::with_capacity(original.len() + 16);
    Some(merge(&raw, was, now, &mut out).map(|()| out))
}

/// `now` anew as compact JSON.
pub fn fresh(now: &Val) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    write(now, &mut out)?;
    Ok(out)
}

/// Whether `now` is `was` exactly: jq's equality reads every number as a 64-bit float, so
/// `12345678901234567890124` (a big integer jaq keeps whole) equals the body's
/// `12345678901234567890123` (read as the nearest float) there; here numbers of different
/// kinds (integer, big integer, float, decimal text) are the same only when written the same.
fn same(was: &Val, now: &Val) -> bool {
    use jaq_json::Num;
    match (was, now) {
        (Val::Num(a), Val::Num(b)) => match (a, b) {
            (Num::Float(x), Num::Float(y)) => x.to_bits() == y.to_bits() || (x == y && *x != 0.0),
            (Num::Int(x), Num::Int(y)) => x == y,
            _ => a.to_string() == b.to_string(),
        },
        (Val::Arr(a), Val::Arr(b)) => {
            a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| same(x, y))
        }
        (Val::Obj(a), Val::Obj(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b.iter())
                    .all(|((ka, va), (kb, vb))| ka == kb && same(va, vb))
        }
        _ => was == now,
    }
}

fn merge(raw: &Raw<'_>, was: &Val, now: &Val, out: &mut Vec<u8>) -> Result<(), String> {
    if same(was, now) {
        out.extend_from_slice(raw.span());
        return Ok(());
    }
    match (raw, was, now) {
        (
            Raw::Obj {
                entries, repeats, ..
            },
            Val::Obj(w),
            Val::Obj(n),
        ) => {
            if *repeats {
                return Err("changes an object of the body that gives a key twice, whose copy could not keep both (the body's bytes would change where the program did not change them)".into());
            }
            let at: std::collections::HashMap<&str, usize> = entries
                .iter()
                .enumerate()
                .map(|(i, (_, name, _))| (name.as_str(), i))
                .collect();
            out.push(b'{');
            for (i, (k, v)) in n.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let name = key(k)?;
                match at.get(name.as_str()).map(|i| &entries[*i]) {
                    Some((written, _, raw_v)) => {
                        out.extend_from_slice(written);
                        out.push(b':');
                        match w.get(k) {
                            Some(was_v) => merge(raw_v, was_v, v, out)?,
                            None => write(v, out)?,
                        }
                    }
                    None => {
                        write_str(&name, out);
                        out.push(b':');
                        write(v, out)?;
                    }
                }
            }
            out.push(b'}');
            Ok(())
        }
        (Raw::Arr { items, .. }, Val::Arr(w), Val::Arr(n)) => {
            out.push(b'[');
            for (i, v) in n.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match (items.get(i), w.get(i)) {
                    (Some(raw_v), Some(was_v)) => merge(raw_v, was_v, v, out)?,
                    _ => write(v, out)?,
                }
            }
            out.push(b']');
            Ok(())
        }
        _ => write(now, out),
    }
}

/// An object key as text.
fn key(k: &Val) -> Result<String, String> {
    match k {
        Val::TStr(b) | Val::BStr(b) => std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| "yields a key in the body that is not UTF-8 text".to_owned()),
        _ => Err("yields a key in the body that is not a string".into()),
    }
}

fn write_str(s: &str, out: &mut Vec<u8>) {
    // Serialising a str to JSON cannot fail.
    out.extend_from_slice(serde_json::to_string(s).unwrap_or_default().as_bytes());
}

/// `v` as compact JSON; a value JSON cannot hold is an error.
fn write(v: &Val, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Val::Null => out.extend_from_slice(b"null"),
        Val::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Val::Num(n) => {
            let text = n.to_string();
            // jaq writes NaN and the infinities as such; JSON has no word for them.
            if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
                return Err(
                    "yields a number in the body that JSON cannot hold (NaN or infinite)".into(),
                );
            }
            out.extend_from_slice(text.as_bytes());
        }
        Val::TStr(b) | Val::BStr(b) => {
            let s = std::str::from_utf8(b)
                .map_err(|_| "yields a string in the body that is not UTF-8 text".to_owned())?;
            write_str(s, out);
        }
        Val::Arr(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(x, out)?;
            }
            out.push(b']');
        }
        Val::Obj(o) => {
            out.push(b'{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(&key(k)?, out);
                out.push(b':');
                write(x, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// `text` indented (two spaces a level, as serde_json's pretty printer) with every key and
/// scalar as written, when it is JSON.
pub fn pretty(text: &str) -> Option<String> {
    let raw = scan(text.as_bytes())?;
    let mut out = Vec::with_capacity(text.len() * 2);
    indent(&raw, 0, &mut out);
    String::from_utf8(out).ok()
}

fn indent(raw: &Raw<'_>, level: usize, out: &mut Vec<u8>) {
    let pad = |out: &mut Vec<u8>, level: usize| {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', level * 2));
    };
    match raw {
        Raw::Scalar(s) => out.extend_from_slice(s),
        Raw::Arr { items, .. } if items.is_empty() => out.extend_from_slice(b"[]"),
        Raw::Obj { entries, .. } if entries.is_empty() => out.extend_from_slice(b"{}"),
        Raw::Arr { items, .. } => {
            out.push(b'[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                pad(out, level + 1);
                indent(x, level + 1, out);
            }
            pad(out, level);
            out.push(b']');
        }
        Raw::Obj { entries, .. } => {
            out.push(b'{');
            for (i, (k, _, x)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                pad(out, level + 1);
                out.extend_from_slice(k);
                out.extend_from_slice(b": ");
                indent(x, level + 1, out);
            }
            pad(out, level);
            out.push(b'}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn val(s: &str) -> Val {
        serde_json::from_str(s).expect("JSON")
    }

    #[test]
    fn untouched_parts_keep_their_bytes() {
        let body =
            r#"{ "a": 1.50, "b": [1e2, -0, "x\u0041"], "c": {"d": 12345678901234567890123} }"#;
        let was = val(body);
        let now = val(
            r#"{"a": 2, "b": [1e2, -0, "xA"], "c": {"d": 1.2345678901234568e+22}, "e": "new"}"#,
        );
        let out = rewrite(body.as_bytes(), &was, &now)
            .expect("JSON")
            .expect("rewritten");
        assert_eq!(
            String::from_utf8(out).expect("text"),
            r#"{"a":2,"b":[1e2, -0, "x\u0041"],"c":{"d": 12345678901234567890123},"e":"new"}"#
        );
        // Nothing changed: the bytes as they were, spaces and all.
        let out = rewrite(body.as_bytes(), &was, &was)
            .expect("JSON")
            .expect("same");
        assert_eq!(out, body.as_bytes());
        assert!(rewrite(b"not json", &val("1"), &val("2")).is_none());
    }

    #[test]
    fn a_big_number_the_program_set_is_written_though_it_equals_as_a_float() {
        // Issue 52 (fixjq 1): jaq keeps the program's 12345678901234567890124 as a big
        // integer; the body's …123 is read as the nearest float, equal to it as floats.
        let body = r#"{"big": 12345678901234567890123, "n": 1}"#;
        let was = val(body);
        let big =
            Val::Num(jaq_json::Num::from_str_radix("12345678901234567890124", 10).expect("big"));
        let Val::Obj(o) = &was else {
            panic!("an object")
        };
        let now = Val::obj(
            o.iter()
                .map(|(k, v)| {
                    let v = if *k == val(r#""big""#) {
                        big.clone()
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect(),
        );
        let out = rewrite(body.as_bytes(), &was, &now)
            .expect("JSON")
            .expect("rewritten");
        assert_eq!(
            String::from_utf8(out).expect("text"),
            r#"{"big":12345678901234567890124,"n":1}"#
        );
    }

    #[test]
    fn a_changed_object_with_a_repeated_key_fails() {
        let body = r#"{"a": {"k": 1, "k": 2}, "b": 1}"#;
        let was = val(body);
        // The object with the repeated key untouched: kept, both keys.
        let now = val(r#"{"a": {"k": 2}, "b": 2}"#);
        let out = rewrite(body.as_bytes(), &was, &now)
            .expect("JSON")
            .expect("kept");
        assert_eq!(out, br#"{"a":{"k": 1, "k": 2},"b":2}"#);
        // Changed: refused.
        let body = r#"{"k": 1, "k": 2, "b": 1}"#;
        let err = rewrite(body.as_bytes(), &val(body), &val(r#"{"k": 2, "b": 2}"#))
            .expect("JSON")
            .expect_err("refused");
        assert!(err.contains("key twice"), "{err}");
    }

    #[test]
    fn pretty_keeps_every_token() {
        assert_eq!(
            pretty(r#"{"a":1e2,"b":[],"c":[-0,{"d":"\u0041"}]}"#).expect("JSON"),
            "{\n  \"a\": 1e2,\n  \"b\": [],\n  \"c\": [\n    -0,\n    {\n      \"d\": \"\\u0041\"\n    }\n  ]\n}"
        );
        assert_eq!(pretty("nope"), None);
    }
}
