//! `redrive --transform` (issue 37): repair a dead letter on its way back. A jq program runs
//! over the same document `--where` reads ([`selector::document`]: `{id, body, headers,
//! properties, class, message, attempts, source, ageSeconds, group}`) and yields the copy's
//! `body` and `headers`; what else the document says (the id, the routing, the envelope) is
//! not the copy's to change, and dlqctl's own counter (`dlq-redrive-count`) is kept as read.
//!
//! The natural jq idiom works as it reads: `.body.amount |= tonumber` yields the whole
//! document with one field fixed; `{body: .body.order}` yields a new body and keeps the
//! headers. A message the program fails on (an error, a value that is not an object, a change
//! to a field that cannot change) is not moved: it stays in the dead-letter queue, counted
//! and named in the report, while the others move.
//!
//! What a mover does with an [`Edit`]: the body replaced when it changed (an unchanged body
//! keeps its exact bytes), and the header names that changed set as text, those removed
//! removed, every other header kept as the broker typed it; then the built-in drops and
//! `deadLetter.redrive`'s header rules apply as to any copy, and the counter goes up by one.
//! The audit record keeps, for each moved message, the sha256 of the message as read and of
//! the copy as the program made it ([`print`]).

use std::sync::{Arc, Mutex};

use jaq_json::Val;
use serde::Serialize;

use crate::status::jq_worker::{self, Pool};
use crate::status::selector::{self, Filter};
use crate::status::{self, Message, envelope};

mod exact;

/// Where the language and the document are described, for a program that does not compile.
const HELP: &str = "a jq program: docs/redrive.md, \"Repairing messages\"";

/// At most this many failed messages are named in the report (the count is always whole).
pub const MAX_FAILED_IDS: usize = 100;

/// The fields of the document a transform may change.
const EDITABLE: [&str; 2] = ["body", "headers"];

/// A compiled `--transform` program, shared by every thread of a run; cloning shares it and
/// its failures.
#[derive(Clone)]
pub struct Transform {
    code: Arc<str>,
    filter: Arc<Filter>,
    /// The workers that run it ([`jq_worker`]), when the binary runs programs in workers;
    /// else it runs in the asking thread.
    pool: Option<Arc<Pool>>,
    failures: Arc<Failures>,
}

/// The messages a program failed on, each counted once however often it was read again (a
/// batched run reads what stayed once per batch).
#[derive(Default)]
struct Failures {
    /// Every failed message's id.
    ids: Mutex<std::collections::HashSet<String>>,
    /// The first [`MAX_FAILED_IDS`] messages it failed on, and the first error.
    seen: Mutex<(Vec<String>, Option<String>)>,
}

impl std::fmt::Debug for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Transform").field(&self.code).finish()
    }
}

/// What a transform made of one message: nothing changed ([`Edit::default`]), or the new
/// body and the header changes, and the prints of the message before and after.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edit {
    /// The copy's body, when it differs from the message's.
    pub body: Option<Vec<u8>>,
    /// Headers to set to these text values (new names, or names whose value changed).
    pub set: Vec<(String, String)>,
    /// Header names to leave out of the copy.
    pub removed: Vec<String>,
    /// [`print`] of the message as read and of the copy as the program made it; `None`
    /// without a transform.
    pub prints: Option<(String, String)>,
}

impl Edit {
    /// Whether the copy's headers differ from the message's.
    pub fn changes_headers(&self) -> bool {
        !self.set.is_empty() || !self.removed.is_empty()
    }

    /// `headers` (a message's, as text) with this edit applied: removed names gone, set names
    /// replaced (every occurrence of a repeated name by one) or added at the end.
    pub fn headers(&self, headers: &[(String, String)]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = headers
            .iter()
            .filter(|(k, _)| !self.removed.contains(k) && !self.set.iter().any(|(s, _)| s == k))
            .cloned()
            .collect();
        out.extend(self.set.iter().cloned());
        out
    }

    /// The copy's body: the edited one, or `original`.
    pub fn body<'a>(&'a self, original: &'a [u8]) -> &'a [u8] {
        self.body.as_deref().unwrap_or(original)
    }
}

/// Failed messages, as the report says them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransformFailures {
    pub count: u64,
    /// The first [`MAX_FAILED_IDS`] of them (masked as status masks ids).
    pub ids: Vec<String>,
    /// The first error, its values normalised away (it never quotes the message).
    pub first_error: String,
}

/// A message moved with a transform, for the audit record: its id and the two prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transformed {
    pub id: String,
    /// [`print`] of the message as read.
    pub before: String,
    /// [`print`] of the copy as the program made it (before the built-in header drops and the
    /// counter).
    pub after: String,
}

impl Transform {
    /// Parses and compiles `code`; the error is one line naming the column.
    pub fn compile(code: &str) -> Result<Transform, String> {
        let filter = selector::compile(code, "--transform", HELP)?;
        Ok(Transform {
            code: code.into(),
            filter: Arc::new(filter),
            pool: jq_worker::enabled().then(|| Arc::new(Pool::new("--transform", code))),
            failures: Arc::default(),
        })
    }

    /// What a jq worker does with the requests of a `--transform` program: each line is a
    /// message ([`Wire`]), each answer `{"ok": <the edit>}` or `{"err": "…"}`.
    fn worker(code: &str) -> Result<jq_worker::Handler, String> {
        let filter = Arc::new(selector::compile(code, "--transform", HELP)?);
        Ok(Box::new(move |request: &str| {
            let answer = serde_json::from_str::<Wire>(request)
                .map_err(|e| format!("the worker could not read the message ({e})"))
                .and_then(|w| {
                    let (m, e, age) = w.into_parts()?;
                    edit_with(&filter, &m, &e, age)
                });
            match answer {
                Ok(edit) => serde_json::json!({ "ok": WireEdit::from(&edit) }),
                Err(e) => serde_json::json!({ "err": e }),
            }
            .to_string()
        }))
    }

    /// The program as given.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// Runs the program on `m` (its envelope read as `e`, `age_seconds` old); a failure is
    /// counted (and `m` named) and said, and the message must then stay where it is.
    pub fn apply(
        &self,
        m: &Message,
        e: &envelope::Read,
        age_seconds: Option<f64>,
    ) -> Result<Edit, String> {
        let result = self.edit(m, e, age_seconds);
        if let Err(why) = &result {
            let new = self
                .failures
                .ids
                .lock()
                .is_ok_and(|mut ids| ids.insert(m.id.clone()));
            if new && let Ok(mut seen) = self.failures.seen.lock() {
                if seen.0.len() < MAX_FAILED_IDS {
                    seen.0.push(status::safe(&crate::secrets::text(&m.id)));
                }
                if seen.1.is_none() {
                    seen.1 = Some(status::safe(why));
                }
            }
        }
        result
    }

    fn edit(
        &self,
        m: &Message,
        e: &envelope::Read,
        age_seconds: Option<f64>,
    ) -> Result<Edit, String> {
        let Some(pool) = &self.pool else {
            return edit_with(&self.filter, m, e, age_seconds);
        };
        let request = serde_json::to_string(&Wire::of(m, e, age_seconds))
            .map_err(|e| format!("cannot send the message to --transform's worker ({e})"))?;
        let answer: serde_json::Value = serde_json::from_str(&pool.call(&request)?)
            .map_err(|e| format!("--transform's worker answered what is not JSON ({e})"))?;
        match (&answer["ok"], &answer["err"]) {
            (serde_json::Value::Object(_), _) => {
                serde_json::from_value::<WireEdit>(answer["ok"].clone())
                    .map_err(|e| {
                        format!("--transform's worker answered an edit that cannot be read ({e})")
                    })?
                    .into_edit()
            }
            (_, serde_json::Value::String(e)) => Err(e.clone()),
            _ => Err("--transform's worker answered neither ok nor err".into()),
        }
    }

    /// The messages it failed on so far, if any.
    pub fn failures(&self) -> Option<TransformFailures> {
        let count = self.failures.ids.lock().map_or(0, |ids| ids.len() as u64);
        let seen = self.failures.seen.lock().ok()?.clone();
        (count > 0).then(|| TransformFailures {
            count,
            ids: seen.0,
            first_error: seen.1.unwrap_or_default(),
        })
    }
}

/// [`Transform::edit`] in this thread: runs `filter` on `m` (its envelope read as `e`,
/// `age_seconds` old).
fn edit_with(
    filter: &Filter,
    m: &Message,
    e: &envelope::Read,
    age_seconds: Option<f64>,
) -> Result<Edit, String> {
    if m.body_len != m.body.len() as u64 {
        return Err(format!(
            "the body was read in part ({} of {} bytes), and a transform needs it whole",
            m.body.len(),
            m.body_len
        ));
    }
    let input = selector::document(m, e, age_seconds);
    let mut outs = selector::outputs(filter, input.clone(), 2).into_iter();
    let out = match (outs.next(), outs.next()) {
        (None, _) => return Err("yields nothing (use `.` to keep a message as it is)".into()),
        (Some(Err(e)), _) | (_, Some(Err(e))) => return Err(e),
        (Some(Ok(_)), Some(Ok(_))) => {
            return Err("yields more than one value; a copy is made of one".into());
        }
        (Some(Ok(v)), None) => v,
    };
    let (Val::Obj(out), Val::Obj(input)) = (&out, &input) else {
        return Err(format!(
            "yields {}, not an object with `body` and `headers`",
            selector::kind(&out)
        ));
    };
    for (k, v) in out.iter() {
        let name = key(k)?;
        if !EDITABLE.contains(&name.as_str()) && input.get(k) != Some(v) {
            return Err(format!(
                "changes `.{name}`, which a transform cannot change (only .body and .headers; ids, routing and the envelope stay as read)"
            ));
        }
    }
    let field = |name: &str| out.get(&Val::from(name.to_owned()));
    let was = |name: &str| input.get(&Val::from(name.to_owned()));
    let body = match (field("body"), was("body")) {
        (Some(b), was) if Some(b) != was => Some(body_bytes(&m.body, was, b)?),
        _ => None,
    };
    let (set, removed) = match field("headers") {
        Some(h) if Some(h) != was("headers") => header_changes(&m.headers, h)?,
        _ => (Vec::new(), Vec::new()),
    };
    let mut edit = Edit {
        body,
        set,
        removed,
        prints: None,
    };
    let after = edit.headers(&m.headers);
    edit.prints = Some((
        print(&m.headers, &m.body),
        print(&after, edit.body(&m.body)),
    ));
    Ok(edit)
}

/// A message as a worker is sent it: what [`selector::document`] and [`edit_with`] read.
#[derive(Serialize, serde::Deserialize)]
struct Wire {
    id: String,
    headers: Vec<(String, String)>,
    properties: Vec<(String, String)>,
    /// base64.
    body: String,
    body_len: u64,
    class: String,
    message: Option<String>,
    source: Option<String>,
    attempts: Option<u64>,
    age: Option<f64>,
}

impl Wire {
    fn of(m: &Message, e: &envelope::Read, age: Option<f64>) -> Wire {
        use base64::Engine as _;
        Wire {
            id: m.id.clone(),
            headers: m.headers.clone(),
            properties: m.properties.clone(),
            body: base64::engine::general_purpose::STANDARD.encode(&m.body),
            body_len: m.body_len,
            class: e.class.clone(),
            message: e.message.clone(),
            source: e.source.clone(),
            attempts: e.attempts,
            age,
        }
    }

    fn into_parts(self) -> Result<(Message, envelope::Read, Option<f64>), String> {
        use base64::Engine as _;
        let body = base64::engine::general_purpose::STANDARD
            .decode(&self.body)
            .map_err(|e| format!("the worker could not read the body ({e})"))?;
        let m = Message {
            id: self.id,
            headers: self.headers,
            properties: self.properties,
            body,
            body_len: self.body_len,
            ..Message::default()
        };
        let e = envelope::Read {
            class: self.class,
            raw_class: None,
            message: self.message,
            source: self.source,
            attempts: self.attempts,
            dead_lettered_ms: None,
            first_failure_ms: None,
        };
        Ok((m, e, self.age))
    }
}

/// An [`Edit`] as a worker answers it (the body in base64).
#[derive(Serialize, serde::Deserialize)]
struct WireEdit {
    body: Option<String>,
    set: Vec<(String, String)>,
    removed: Vec<String>,
    prints: Option<(String, String)>,
}

impl From<&Edit> for WireEdit {
    fn from(e: &Edit) -> WireEdit {
        use base64::Engine as _;
        WireEdit {
            body: e
                .body
                .as_ref()
                .map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
            set: e.set.clone(),
            removed: e.removed.clone(),
            prints: e.prints.clone(),
        }
    }
}

impl WireEdit {
    fn into_edit(self) -> Result<Edit, String> {
        use base64::Engine as _;
        let body = match self.body {
            Some(b) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|e| {
                        format!("--transform's worker answered a body that cannot be read ({e})")
                    })?,
            ),
            None => None,
        };
        Ok(Edit {
            body,
            set: self.set,
            removed: self.removed,
            prints: self.prints,
        })
    }
}

/// The program of a jq worker: `--where` or `--transform` (`flag`) compiled from `code`
/// ([`jq_worker::serve`]).
pub fn worker(flag: &str, code: &str) -> Result<jq_worker::Handler, String> {
    match flag {
        "--transform" => Transform::worker(code),
        _ => selector::Where::worker(code),
    }
}

/// An object key as text (jq objects have string keys).
fn key(k: &Val) -> Result<String, String> {
    match k {
        Val::TStr(_) | Val::BStr(_) => Ok(text_of(k)),
        other => Err(format!("yields a key that is {}", selector::kind(other))),
    }
}

/// A string value's text (bytes that are not UTF-8 replaced), or the compact JSON of any
/// other value.
fn text_of(v: &Val) -> String {
    match v {
        Val::TStr(b) | Val::BStr(b) => String::from_utf8_lossy(b).into_owned(),
        other => compact(other),
    }
}

/// `v` as compact JSON (jaq writes it; serde_json makes it compact).
fn compact(v: &Val) -> String {
    let written = v.to_string();
    serde_json::from_str::<serde_json::Value>(&written)
        .map(|j| j.to_string())
        .unwrap_or(written)
}

/// The copy's body from the program's `.body` (`now`; the message's body `original`, read
/// as `was`): a string as its bytes; anything else as JSON that keeps `original`'s bytes for
/// every part the program did not change ([`exact::rewrite`]). A body that is not UTF-8 was
/// read as text with its bad bytes replaced: a program that changes it would write those
/// replacements, so it fails instead (the message stays as it is).
fn body_bytes(original: &[u8], was: Option<&Val>, now: &Val) -> Result<Vec<u8>, String> {
    if std::str::from_utf8(original).is_err() {
        return Err(
            "changes a body that is not UTF-8 text: jq reads it with its bytes replaced, and the copy would not keep them (the message stays as it is)".into(),
        );
    }
    match (now, was) {
        (Val::TStr(b) | Val::BStr(b), _) => Ok(b.to_vec()),
        (now, Some(was)) => match exact::rewrite(original, was, now) {
            Some(written) => written,
            None => exact::fresh(now),
        },
        (now, None) => exact::fresh(now),
    }
}

/// Headers to set (name, text) and names to remove.
type HeaderChanges = (Vec<(String, String)>, Vec<String>);

/// The header changes from `headers` (a message's) to the program's `.headers`: an object
/// whose values are text (numbers and booleans become their JSON text; `null` removes the
/// name). `dlq-redrive-count` is dlqctl's: a program may leave it out (it is kept) but not
/// change it.
fn header_changes(headers: &[(String, String)], v: &Val) -> Result<HeaderChanges, String> {
    let Val::Obj(map) = v else {
        return Err(format!(
            "yields `.headers` that is {}, not an object",
            selector::kind(v)
        ));
    };
    let was = |k: &str| {
        headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let reserved = |k: &str| k.eq_ignore_ascii_case(envelope::REDRIVE_COUNT);
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for (k, v) in map.iter() {
        let name = key(k)?;
        let value = match v {
            Val::Null => None,
            Val::Arr(_) | Val::Obj(_) => {
                return Err(format!(
                    "yields header `{}` that is {}; header values are text",
                    status::safe(&name),
                    selector::kind(v)
                ));
            }
            v => Some(text_of(v)),
        };
        if reserved(&name) && value.as_deref() != was(&name) {
            return Err(format!(
                "changes header `{}`, which is dlqctl's own count of redrives",
                envelope::REDRIVE_COUNT
            ));
        }
        out.push((name, value));
    }
    let mut set = Vec::new();
    let mut removed = Vec::new();
    for (name, value) in &out {
        match value {
            Some(v) if was(name) != Some(v.as_str()) => set.push((name.clone(), v.clone())),
            Some(_) => {}
            None if was(name).is_some() && !reserved(name) => removed.push(name.clone()),
            None => {}
        }
    }
    for (name, _) in headers {
        if !reserved(name) && !out.iter().any(|(n, _)| n == name) && !removed.contains(name) {
            removed.push(name.clone());
        }
    }
    Ok((set, removed))
}

/// A message's print for the audit record: `sha256:` and the hex sha256 of its headers,
/// sorted by name then value, each as `name: value` and a newline, then an empty line, then
/// the body's bytes. Anyone holding the message can compute it again.
pub fn print(headers: &[(String, String)], body: &[u8]) -> String {
    use sha2::Digest;
    let mut sorted: Vec<&(String, String)> = headers.iter().collect();
    sorted.sort();
    let mut h = sha2::Sha256::new();
    for (k, v) in sorted {
        h.update(k.as_bytes());
        h.update(b": ");
        h.update(v.as_bytes());
        h.update(b"\n");
    }
    h.update(b"\n");
    h.update(body);
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The dry run's picture of one edit: a unified diff of the message and its copy, headers
/// (`name: value`, sorted) then the body (indented when it is JSON, every number, string and
/// key as its bytes: [`exact::pretty`], so the diff shows what the copy says), each masked as
/// `status` masks samples (secret headers, card numbers, the target's `redact`).
pub fn diff(m: &Message, edit: &Edit, redact: &crate::spec::model::Redact) -> String {
    let shown = |headers: &[(String, String)], body: &[u8]| {
        let mut lines: Vec<String> = headers
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}: {}",
                    status::safe(k),
                    status::safe(&crate::secrets::header_value(k, v, &redact.headers))
                )
            })
            .collect();
        lines.sort();
        let text =
            match status::shown_body(body, body.len() as u64, usize::MAX, &redact.body_pointers) {
                status::Body::Text { text, .. } => exact::pretty(&text).unwrap_or(text),
                status::Body::Redacted { length } => crate::secrets::redacted(length as usize),
                status::Body::Binary { length, .. } => format!("«binary, {length} bytes»"),
                status::Body::Hidden { length } => format!("«{length} bytes»"),
            };
        format!("{}\n\n{text}\n", lines.join("\n"))
    };
    let before = shown(&m.headers, &m.body);
    let after = shown(&edit.headers(&m.headers), edit.body(&m.body));
    similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header("dead letter", "copy")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read() -> envelope::Read {
        envelope::Read {
            class: "poison".into(),
            raw_class: None,
            message: Some("amount is not a number".into()),
            source: Some("orders".into()),
            attempts: Some(3),
            dead_lettered_ms: None,
            first_failure_ms: None,
        }
    }

    fn msg(body: &str, headers: &[(&str, &str)]) -> Message {
        Message {
            id: "m-1".into(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            body: body.as_bytes().to_vec(),
            body_len: body.len() as u64,
            ..Message::default()
        }
    }

    fn edit(code: &str, m: &Message) -> Result<Edit, String> {
        Transform::compile(code)
            .expect("compiles")
            .apply(m, &read(), Some(1.0))
    }

    #[test]
    fn the_jq_idiom_fixes_a_field_and_keeps_the_rest() {
        let m = msg(
            r#"{ "order": 7, "amount": "12.50" }"#,
            &[("tenant", "acme"), ("dlq-redrive-count", "1")],
        );
        let e = edit(".body.amount |= tonumber", &m).expect("edits");
        assert_eq!(
            String::from_utf8(e.body.clone().expect("a new body")).expect("text"),
            // jaq's `tonumber` keeps the text's digits, and the copy writes them.
            r#"{"order":7,"amount":12.50}"#
        );
        assert!(!e.changes_headers(), "{e:?}");
        let (before, after) = e.prints.clone().expect("prints");
        assert_eq!(before, print(&m.headers, &m.body));
        assert_ne!(before, after);
        // `.` changes nothing, and keeps the body's bytes.
        let same = edit(".", &m).expect("edits");
        assert_eq!((same.body.is_none(), same.changes_headers()), (true, false));
        let (b, a) = same.prints.expect("prints");
        assert_eq!(b, a);
    }

    #[test]
    fn headers_are_set_removed_and_the_counter_is_kept() {
        let m = msg(
            "plain text",
            &[
                ("tenant", "acme"),
                ("trace", "t-1"),
                ("dlq-redrive-count", "2"),
            ],
        );
        let e = edit(
            r#".headers |= (del(.trace) | .tenant = "acme-eu" | .retry = 1)"#,
            &m,
        )
        .expect("edits");
        assert_eq!(
            e.set,
            vec![
                ("tenant".to_owned(), "acme-eu".to_owned()),
                ("retry".to_owned(), "1".to_owned())
            ]
        );
        assert_eq!(e.removed, vec!["trace".to_owned()]);
        assert_eq!(e.body, None);
        let after = e.headers(&m.headers);
        assert!(after.contains(&("dlq-redrive-count".to_owned(), "2".to_owned())));
        // `{headers: {}}` drops every header but the counter, which is dlqctl's.
        let e = edit("{headers: {}}", &m).expect("edits");
        assert_eq!(e.removed, vec!["tenant".to_owned(), "trace".to_owned()]);
        // A text body stays text; a string becomes the body as it is.
        let e = edit(r#".body = "fixed""#, &m).expect("edits");
        assert_eq!(e.body.as_deref(), Some(&b"fixed"[..]));
    }

    #[test]
    fn failures_are_counted_named_and_never_quote_the_message() {
        let t = Transform::compile(".body.amount |= tonumber").expect("compiles");
        let bad = msg(r#"{"amount":"card 4111 1111 1111 1111"}"#, &[]);
        let err = t.apply(&bad, &read(), None).expect_err("fails");
        assert!(!err.contains("4111"), "{err}");
        for (code, want) in [
            (".id = \"other\"", "changes `.id`"),
            ("1", "yields a number, not an object"),
            (
                ".headers.\"dlq-redrive-count\" = \"0\"",
                "dlqctl's own count",
            ),
            (".headers.x = [1]", "header values are text"),
            ("empty", "yields nothing"),
            (".,.", "more than one value"),
        ] {
            let m = msg("{}", &[("dlq-redrive-count", "1")]);
            let err = edit(code, &m).expect_err(code);
            assert!(err.contains(want), "{code}: {err}");
        }
        let mut cut = msg(r#"{"amount":"1"}"#, &[]);
        cut.id = "m-2".into();
        cut.body_len = 100;
        assert!(t.apply(&cut, &read(), None).is_err());
        let f = t.failures().expect("failures");
        assert_eq!((f.count, f.ids.len()), (2, 2));
        assert!(!f.first_error.contains("4111"), "{}", f.first_error);
    }

    /// Issue 52, H2: `.body.note = "fixed"` changes the note and nothing else: every number
    /// keeps its text, both `dupkey`s stay, the keys keep their order.
    #[test]
    fn a_transform_keeps_every_byte_it_did_not_change() {
        let body = r#"{"amount": 12345678901234567890123, "cents": 0.1000000000000000055511151231257827, "u64": 18446744073709551616, "exp": 1e2, "neg0": -0, "dupkey": 1, "dupkey": 2}"#;
        // The object with the repeated key is the one the program changes: it fails, stays.
        let m = msg(body, &[]);
        let err = edit(r#".body.note = "fixed""#, &m).expect_err("refused");
        assert!(err.contains("key twice"), "{err}");
        // Nested, the untouched object keeps its bytes, repeated key and all.
        let body = r#"{"order": {"amount": 12345678901234567890123, "cents": 0.1000000000000000055511151231257827, "u64": 18446744073709551616, "exp": 1e2, "neg0": -0, "dupkey": 1, "dupkey": 2}, "note": "broken"}"#;
        let m = msg(body, &[]);
        let e = edit(r#".body.note = "fixed""#, &m).expect("edits");
        assert_eq!(
            String::from_utf8(e.body.clone().expect("a new body")).expect("text"),
            r#"{"order":{"amount": 12345678901234567890123, "cents": 0.1000000000000000055511151231257827, "u64": 18446744073709551616, "exp": 1e2, "neg0": -0, "dupkey": 1, "dupkey": 2},"note":"fixed"}"#
        );
        // Without the repeated key, beside the change: every field byte for byte.
        let body = r#"{"amount": 12345678901234567890123, "cents": 0.1000000000000000055511151231257827, "u64": 18446744073709551616, "exp": 1e2, "neg0": -0, "zeta": [1.0, 2e-3]}"#;
        let m = msg(body, &[]);
        let e = edit(r#".body.note = "fixed""#, &m).expect("edits");
        assert_eq!(
            String::from_utf8(e.body.clone().expect("a new body")).expect("text"),
            r#"{"amount":12345678901234567890123,"cents":0.1000000000000000055511151231257827,"u64":18446744073709551616,"exp":1e2,"neg0":-0,"zeta":[1.0, 2e-3],"note":"fixed"}"#
        );
        // The diff shows the copy as it is: the numbers as written on both sides.
        let d = diff(&m, &e, &crate::spec::model::Redact::default());
        assert!(d.contains("+  \"note\": \"fixed\""), "{d}");
        assert!(!d.contains("-  \"amount\""), "{d}");
        assert!(!d.contains("e+22"), "{d}");
    }

    /// Before issue 52 the dry-run diff showed both sides normalised: a rewrite of a number
    /// the program did not touch was hidden. Now a changed number shows as written.
    #[test]
    fn the_diff_shows_numbers_as_written() {
        let m = msg(r#"{"a": 1e2, "b": 1}"#, &[]);
        let e = edit(".body.b = 2", &m).expect("edits");
        assert_eq!(e.body.as_deref(), Some(&br#"{"a":1e2,"b":2}"#[..]));
        let d = diff(&m, &e, &crate::spec::model::Redact::default());
        assert!(d.contains("   \"a\": 1e2,"), "{d}");
        assert!(d.contains("-  \"b\": 1"), "{d}");
        assert!(d.contains("+  \"b\": 2"), "{d}");
    }

    /// Issue 52, M7: a body that is not UTF-8 is read as text with its bad bytes replaced;
    /// a program that changes it fails (the message stays), one that leaves it keeps it.
    #[test]
    fn a_body_that_is_not_utf8_is_never_rewritten_lossily() {
        let mut m = msg("", &[("tenant", "acme")]);
        m.body = b"caf\xe9 ORDER".to_vec();
        m.body_len = m.body.len() as u64;
        let err = edit(".body |= ascii_downcase", &m).expect_err("refused");
        assert!(err.contains("not UTF-8"), "{err}");
        let err = edit(r#".body = {"fixed": true}"#, &m).expect_err("refused");
        assert!(err.contains("not UTF-8"), "{err}");
        // A header change leaves the body's bytes as they were.
        let e = edit(r#".headers.tenant = "acme-eu""#, &m).expect("edits");
        assert_eq!(e.body, None);
        assert_eq!(e.body(&m.body), b"caf\xe9 ORDER");
    }

    #[test]
    fn the_dry_run_diff_shows_the_change_masked() {
        let m = msg(
            r#"{"amount":"12.50","card":"4111 1111 1111 1111"}"#,
            &[("authorization", "Bearer abc")],
        );
        let e = edit(".body.amount |= tonumber", &m).expect("edits");
        let d = diff(&m, &e, &crate::spec::model::Redact::default());
        assert!(d.contains("-  \"amount\": \"12.50\","), "{d}");
        assert!(d.contains("+  \"amount\": 12.50,"), "{d}");
        assert!(!d.contains("4111 1111"), "{d}");
        assert!(!d.contains("Bearer abc"), "{d}");
    }
}
