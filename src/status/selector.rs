//! `--where` (issue 37): dead letters chosen by what they say, not only by their class or age.
//! A jq expression runs over one document per message — `{id, body, headers, properties,
//! class, message, attempts, source, ageSeconds, group}` — and selects the message when it
//! yields `true`. `status`, `redrive` and `archive` share it, so a dry run, a move and a look
//! choose the same messages.
//!
//! jq because it is what on-call engineers already write against JSON (`jq`, kafkacat,
//! `aws … | jq`); jaq (jaq-core, jaq-std, jaq-json) because it is the maintained Rust
//! implementation of the language with its standard library, pure Rust with no system
//! library, whose values can be shared between threads (`sync`), and whose parser and
//! compiler report errors as data, so a bad expression is one line before anything is read.
//!
//! Errors never carry message content: the text of a jq error names the values it failed on,
//! and those are a payload's (a card number, a token), so what is reported is the error
//! normalised as failure groups are ([`super::fingerprint::normalise`]: quoted values,
//! numbers and ids replaced).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data};
use jaq_json::Val;

use super::envelope::Read;
use super::jq_worker::{self, Pool};
use super::{Message, Selected, WhereFailures, fingerprint};

pub(crate) type Filter = jaq_core::Filter<data::JustLut<Val>>;

/// Bytes of each body read where `--where` looks at messages through a status read (`status`,
/// a dry run): 1 MiB, SQS's largest message, so the expression sees the body a mover would
/// (a longer one is cut, and then is text to the expression). What is shown is still cut at
/// `--max-body`.
pub const MAX_BODY: usize = 1 << 20;

/// At most this many outputs of an expression are looked at for a `true`: a generator
/// (`range(1e9)`) ends the look there, and the message is a failure of `--where` (not
/// selected, reported, the run not complete).
const MAX_OUTPUTS: usize = 1000;
/// How the error of a program cut at [`MAX_OUTPUTS`] begins.
const CUT: &str = "yields 1000 outputs without a true";

/// A compiled `--where` expression, shared by every thread of a run; cloning shares it and
/// its failure count.
#[derive(Clone)]
pub struct Where {
    code: Arc<str>,
    filter: Arc<Filter>,
    /// The workers that run it, when the binary runs programs in workers
    /// ([`jq_worker::enabled`]); else it runs in the asking thread.
    pool: Option<Arc<Pool>>,
    failures: Arc<Failures>,
}

#[derive(Default)]
struct Failures {
    count: AtomicU64,
    /// Of them, those cut at [`MAX_OUTPUTS`] without a `true`: undecided, not a no.
    undecided: AtomicU64,
    /// The first failure: the message's id, and the error normalised.
    first: Mutex<Option<(String, String)>>,
}

impl std::fmt::Debug for Where {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Where").field(&self.code).finish()
    }
}

impl Where {
    /// Parses and compiles `code`; the error is one line naming the column.
    pub fn compile(code: &str) -> Result<Where, String> {
        let filter = compile(
            code,
            "--where",
            "a jq expression: docs/redrive.md, \"Choosing messages\"",
        )?;
        Ok(Where {
            code: code.into(),
            filter: Arc::new(filter),
            pool: jq_worker::enabled().then(|| Arc::new(Pool::new("--where", code))),
            failures: Arc::default(),
        })
    }

    /// What a jq worker does with the requests of a `--where` program: each line is a
    /// document (JSON), each answer `{"ok": true|false}` or `{"err": "…"}`.
    pub fn worker(code: &str) -> Result<jq_worker::Handler, String> {
        let filter = compile(
            code,
            "--where",
            "a jq expression: docs/redrive.md, \"Choosing messages\"",
        )?;
        Ok(Box::new(move |request: &str| {
            let answer = match serde_json::from_str::<Val>(request) {
                Ok(doc) => eval(&filter, doc),
                Err(e) => Err(format!("the worker could not read the document ({e})")),
            };
            match answer {
                Ok(b) => serde_json::json!({ "ok": b }),
                Err(e) => serde_json::json!({ "err": e }),
            }
            .to_string()
        }))
    }

    /// The expression as given.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// Whether the expression yields `true` for `doc`: `false` and `null` do not select; an
    /// error, or any other value, is a failure (counted, and the message not selected).
    pub fn selects(&self, id: &str, doc: Val) -> bool {
        match self.eval(doc) {
            Ok(b) => b,
            Err(e) => {
                self.failures.count.fetch_add(1, Ordering::Relaxed);
                if e.starts_with(CUT) {
                    self.failures.undecided.fetch_add(1, Ordering::Relaxed);
                }
                if let Ok(mut first) = self.failures.first.lock()
                    && first.is_none()
                {
                    *first = Some((id.to_owned(), e));
                }
                false
            }
        }
    }

    fn eval(&self, doc: Val) -> Result<bool, String> {
        let Some(pool) = &self.pool else {
            return eval(&self.filter, doc);
        };
        let answer: serde_json::Value = serde_json::from_str(&pool.call(&doc.to_string())?)
            .map_err(|e| format!("--where's worker answered what is not JSON ({e})"))?;
        match (&answer["ok"], &answer["err"]) {
            (serde_json::Value::Bool(b), _) => Ok(*b),
            (_, serde_json::Value::String(e)) => Err(e.clone()),
            _ => Err("--where's worker answered neither ok nor err".into()),
        }
    }

    /// On how many messages it ran past a budget of its worker ([`jq_worker`]): not
    /// selected, and the run is not complete.
    pub fn over_budget(&self) -> u64 {
        self.pool.as_ref().map_or(0, |p| p.over_budget())
    }

    /// On how many messages it yielded [`MAX_OUTPUTS`] outputs without a `true`: not
    /// selected, though one not looked at might have been `true`, so the run is not complete
    /// (hx4 H: "Redrive complete", exit 0).
    pub fn undecided(&self) -> u64 {
        self.failures.undecided.load(Ordering::Relaxed)
    }

    /// The messages it failed on so far, if any.
    pub fn failures(&self) -> Option<WhereFailures> {
        let count = self.failures.count.load(Ordering::Relaxed);
        let first = self.failures.first.lock().ok()?.clone()?;
        (count > 0).then(|| WhereFailures {
            count,
            first_id: super::safe(&crate::secrets::text(&first.0)),
            first_error: super::safe(&first.1),
        })
    }
}

/// Whether `filter` yields `true` for `doc` among its first [`MAX_OUTPUTS`] outputs; as many
/// outputs without a `true` is a failure (issue 52): the ones not looked at might have held
/// it, so the message is neither selected silently nor known not to be.
fn eval(filter: &Filter, doc: Val) -> Result<bool, String> {
    let outs = outputs(filter, doc, MAX_OUTPUTS);
    let cut = outs.len() >= MAX_OUTPUTS;
    for out in outs {
        match out {
            Ok(Val::Bool(true)) => return Ok(true),
            Ok(Val::Bool(false) | Val::Null) => {}
            Ok(other) => {
                return Err(format!("yields {}, not true or false", kind(&other)));
            }
            Err(e) => return Err(e),
        }
    }
    if cut {
        return Err(format!(
            "{CUT} and is not looked at further: write any(generator; condition), e.g. any(.body.items[]; . == 1), which is one true or false"
        ));
    }
    Ok(false)
}

/// jq's filters that reach outside the message, refused whatever their arity: `halt` and
/// `halt_error` end the process (a run that stops with nothing settled, reported or
/// journaled), `env` (and `$ENV`) reads the environment, where credentials are, `input` and
/// `inputs` read other input, `debug` and `stderr` print a message's values where dlqctl's
/// printer does not mask them; `get_search_list`, `input_filename` and `$__loc__` say where
/// the program runs. jaq-core, jaq-std and jaq-json define the first six (natively:
/// `halt/1`, `env`, `debug_empty`, `stderr_empty`; the rest in jq on top of them); they are
/// left out of what the compiler knows, so a program that names one is refused before
/// anything is read, as an undefined name.
pub(crate) const REFUSED: [&str; 12] = [
    "halt",
    "halt_error",
    "env",
    "$ENV",
    "input",
    "inputs",
    "debug",
    "debug_empty",
    "stderr",
    "stderr_empty",
    "get_search_list",
    "input_filename",
];

/// Whether `name` (a filter or a `$variable`) is one of [`REFUSED`] or another that says
/// where the program runs (`$__loc__`, `$__prog_args`, …).
fn refused(name: &str) -> bool {
    REFUSED.contains(&name) || name.starts_with("$__")
}

/// Parses and compiles the jq program `code` given as `flag` (`--where`, `--transform`); the
/// error is one line naming the flag, the column or the undefined names, and `help` (where
/// the language is documented). The filters of [`REFUSED`] are not defined.
pub(crate) fn compile(code: &str, flag: &str, help: &str) -> Result<Filter, String> {
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .filter(|d| !refused(d.name));
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(|(name, _, _)| !refused(name));
    vet(code, flag, help)?;
    let arena = Arena::default();
    let modules = Loader::new(defs)
        .load(&arena, File { code, path: () })
        .map_err(|e| load_error(code, flag, help, e))?;
    Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errs| {
            let mut any_refused = false;
            let names: Vec<String> = errs
                .into_iter()
                .flat_map(|(_, undefined)| undefined)
                .map(|(name, what)| {
                    any_refused |= refused(name);
                    match what {
                        jaq_core::compile::Undefined::Filter(arity) => {
                            format!("filter `{name}/{arity}`")
                        }
                        other => format!("{} `{name}`", other.as_str()),
                    }
                })
                .collect();
            let why = if any_refused {
                format!(
                    "{flag} never ends the run, prints, or reads the environment, files or other input: `halt`, `halt_error`, `env`, `$ENV`, `input`, `inputs`, `debug`, `stderr` and the like are not defined; {help}"
                )
            } else {
                "the document's fields are .id, .body, .headers, .properties, .class, .message, .attempts, .source, .ageSeconds, .group".to_owned()
            };
            format!("{flag} `{code}`: undefined {} ({why})", names.join(", "))
        })
}

/// Refuses what compiles but must not run (issue 52): `import`/`include` (a data import
/// compiles, then panics in jaq when run, and the program reads no file anyway), and a
/// number written so that a 64-bit float cannot hold it (`12345678901234567890124`,
/// `0.1000000000000000055511151231257827`): jq compares numbers as floats, so it would
/// equal another (`…123`), and a transform could leave the body's as it was. A program that
/// does not lex is left to the loader, whose error names the column.
fn vet(code: &str, flag: &str, help: &str) -> Result<(), String> {
    use jaq_core::load::lex::{StrPart, Tok, Token};
    fn walk<'a>(tokens: &[Token<&'a str>], top: bool, found: &mut Vec<Result<&'a str, &'a str>>) {
        let mut previous: Option<&Token<&str>> = None;
        for t in tokens {
            match &t.1 {
                Tok::Word
                    if top
                        && matches!(t.0, "import" | "include")
                        && previous.is_none_or(|p| matches!(p.1, Tok::Sym) && p.0 == ";") =>
                {
                    found.push(Err(t.0));
                }
                Tok::Num if !float_holds(t.0) => found.push(Ok(t.0)),
                Tok::Block(inner) => walk(inner, false, found),
                Tok::Str(parts) => {
                    for part in parts {
                        if let StrPart::Term(term) = part {
                            walk(std::slice::from_ref(term), false, found);
                        }
                    }
                }
                _ => {}
            }
            previous = Some(t);
        }
    }
    let Ok(tokens) = jaq_core::load::Lexer::new(code).lex() else {
        return Ok(());
    };
    let mut found = Vec::new();
    walk(&tokens, true, &mut found);
    match found.first() {
        None => Ok(()),
        Some(Err(word)) => Err(format!(
            "{flag} `{code}`: `{word}` is not allowed ({flag} reads no file or module: `import` and `include` are refused, the program is the whole expression; {help})"
        )),
        Some(Ok(number)) => Err(format!(
            "{flag} `{code}`: the number {number} cannot be held exactly by a 64-bit float, as jq compares numbers (it would equal {}): write one that can ({help})",
            number.parse::<f64>().unwrap_or(f64::NAN)
        )),
    }
}

/// Whether the number literal `text` (digits, a fraction, an exponent) means the 64-bit float
/// it is read as: an integer exactly (beyond 2^53 not every one is there), a decimal as its
/// shortest form (`0.1` is, `0.1000000000000000055511151231257827` is not).
fn float_holds(text: &str) -> bool {
    let Ok(x) = text.parse::<f64>() else {
        return false;
    };
    if !x.is_finite() {
        return false;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        // An integer: exactly the float's value.
        return match text.parse::<u128>() {
            Ok(n) => x < 3.4e38 && x as u128 == n,
            Err(_) => false,
        };
    }
    digits(text) == digits(&format!("{x:e}"))
}

/// A decimal number's significant digits and exponent: `1.50e2` and `150` are `("15", 1)`.
fn digits(text: &str) -> (String, i64) {
    let (mantissa, exp) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], text[i + 1..].parse::<i64>().unwrap_or(0)),
        None => (text, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = format!("{int}{frac}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let d = all.trim_start_matches('0').trim_end_matches('0').to_owned();
    if d.is_empty() {
        return (d, 0);
    }
    // The value is 0.<all> × 10^(len(int) + exp); as 0.<d> the exponent drops by `lead`.
    (d, int.len() as i64 + exp - lead as i64)
}

/// The first `max` outputs of `filter` run on `doc`; an error is normalised as failure
/// groups are, so it keeps no value of the message.
pub(crate) fn outputs(filter: &Filter, doc: Val, max: usize) -> Vec<Result<Val, String>> {
    let ctx = Ctx::<data::JustLut<Val>>::new(&filter.lut, Vars::new([]));
    filter
        .id
        .run((ctx, doc))
        .map(jaq_core::unwrap_valr)
        .take(max)
        .map(|out| out.map_err(|e| scrub(&e.to_string())))
        .collect()
}

/// A jq error as it may be shown: every JSON string in it (jaq quotes the values it failed
/// on, escapes and nested quotes included) replaced by `<str>` whole, then the rest
/// normalised as failure groups are (numbers, ids, timestamps), so no part of a payload is
/// left.
pub(crate) fn scrub(error: &str) -> String {
    let mut out = String::with_capacity(error.len());
    let mut chars = error.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            out.push(c);
            continue;
        }
        // To the closing quote that is not escaped, or the end.
        let mut escaped = false;
        for c in chars.by_ref() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => break,
                _ => {}
            }
        }
        out.push_str("<str>");
    }
    fingerprint::normalise(&out)
}

/// What kind of value `v` is, as errors name it.
pub(crate) fn kind(v: &Val) -> &'static str {
    match v {
        Val::Null => "null",
        Val::Bool(_) => "a boolean",
        Val::Num(_) => "a number",
        Val::Arr(_) => "an array",
        Val::Obj(_) => "an object",
        _ => "a string",
    }
}

/// A parse error as one line: what was expected, and at which column (1-based, in
/// characters) of the expression.
fn load_error(code: &str, flag: &str, help: &str, e: jaq_core::load::Errors<&str, ()>) -> String {
    use jaq_core::load::Error;
    let column = |at: &str| {
        let offset = (at.as_ptr() as usize)
            .checked_sub(code.as_ptr() as usize)
            .filter(|o| *o <= code.len())
            .unwrap_or(code.len());
        code[..offset].chars().count() + 1
    };
    let first = e.into_iter().next().map(|(_, err)| match err {
        Error::Io(v) => v
            .into_iter()
            .next()
            .map(|(path, why)| format!("cannot load `{path}`: {why} (modules are not read)"))
            .unwrap_or_default(),
        Error::Lex(v) => v
            .into_iter()
            .next()
            .map(|(expect, at)| format!("expected {} at column {}", expect.as_str(), column(at)))
            .unwrap_or_default(),
        Error::Parse(v) => v
            .into_iter()
            .next()
            .map(|(expect, at)| {
                let at_end = column(at) > code.chars().count();
                format!(
                    "expected {} at column {}{}",
                    expect.as_str(),
                    column(at),
                    if at_end { " (the end)" } else { "" }
                )
            })
            .unwrap_or_default(),
    });
    format!(
        "{flag} `{code}`: {} ({help})",
        first.unwrap_or_else(|| "cannot parse it".into())
    )
}

/// Whether `m` (its envelope read as `e`, `age_seconds` old) is in one of `groups` (none:
/// every group) and `where_` (if given) selects it: the part of a selection that reads what a
/// message says, shared by `status`, `redrive` and replays from an archive.
pub fn chosen(
    groups: &[String],
    where_: Option<&Where>,
    m: &Message,
    e: &Read,
    age_seconds: Option<f64>,
) -> bool {
    if !groups.is_empty() && !groups.contains(&group(e)) {
        return false;
    }
    where_.is_none_or(|w| w.selects(&m.id, document(m, e, age_seconds)))
}

/// `--group` and `--where` together, as `status` takes them (a redrive's
/// [`crate::redrive::Selection`] holds the same two beside its others).
#[derive(Debug, Clone, Default)]
pub struct Choice {
    pub groups: Vec<String>,
    pub where_: Option<Where>,
}

impl Choice {
    /// Whether it chooses anything out: without groups or an expression, every message.
    pub fn is_everything(&self) -> bool {
        self.groups.is_empty() && self.where_.is_none()
    }

    /// Keeps of `messages` (their envelope read by `envelope`) those chosen; what was kept of
    /// how many, and where the expression failed.
    pub fn keep(
        &self,
        envelope: &crate::spec::resolve::EnvelopeResolved,
        messages: &mut Vec<Message>,
        now_ms: i64,
    ) -> Selected {
        let read = messages.len() as u64;
        messages.retain(|m| {
            let e = super::envelope::read(envelope, m);
            let since = e.dead_lettered_ms.or(e.first_failure_ms).or(m.published_ms);
            let age = since.map(|t| (now_ms - t).max(0) as f64 / 1000.0);
            chosen(&self.groups, self.where_.as_ref(), m, &e, age)
        });
        Selected {
            matched: messages.len() as u64,
            read,
            failures: self.where_.as_ref().and_then(Where::failures),
        }
    }
}

/// The failure group of a message whose envelope reads `e` (what `status --group-by
/// fingerprint` shows as its id).
pub fn group(e: &Read) -> String {
    fingerprint::fingerprint(
        &e.class,
        &fingerprint::normalise(e.message.as_deref().unwrap_or("")),
    )
}

/// The document `--where` reads for message `m`, its envelope read as `e`, `age_seconds` old.
/// `body` is the body parsed as JSON when it parses (and was read whole), else the body as
/// text (bytes that are not UTF-8 replaced); `headers` and `properties` are objects of text
/// values (the first of a repeated name).
pub fn document(m: &Message, e: &Read, age_seconds: Option<f64>) -> Val {
    let text = |s: &str| Val::from(s.to_owned());
    let opt = |s: Option<&str>| s.map_or(Val::Null, text);
    let pairs = |kv: &[(String, String)]| {
        let mut map = jaq_json::Map::default();
        for (k, v) in kv {
            map.entry(text(k)).or_insert_with(|| text(v));
        }
        Val::obj(map)
    };
    let whole = m.body_len == m.body.len() as u64;
    let body = whole
        .then(|| serde_json::from_slice::<Val>(&m.body).ok())
        .flatten()
        .unwrap_or_else(|| text(&String::from_utf8_lossy(&m.body)));
    let mut doc = jaq_json::Map::default();
    doc.insert(text("id"), text(&m.id));
    doc.insert(text("body"), body);
    doc.insert(text("headers"), pairs(&m.headers));
    doc.insert(text("properties"), pairs(&m.properties));
    doc.insert(text("class"), text(&e.class));
    doc.insert(text("message"), opt(e.message.as_deref()));
    doc.insert(
        text("attempts"),
        e.attempts.map_or(Val::Null, |n| {
            Val::from(usize::try_from(n).unwrap_or(usize::MAX))
        }),
    );
    doc.insert(text("source"), opt(e.source.as_deref()));
    doc.insert(text("ageSeconds"), age_seconds.map_or(Val::Null, Val::from));
    doc.insert(text("group"), text(&group(e)));
    Val::obj(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(class: &str, message: Option<&str>, attempts: Option<u64>) -> Read {
        Read {
            class: class.into(),
            raw_class: None,
            message: message.map(str::to_owned),
            source: Some("orders".into()),
            attempts,
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

    fn selects(code: &str, m: &Message, e: &Read) -> bool {
        Where::compile(code)
            .expect("compiles")
            .selects(&m.id, document(m, e, Some(61.5)))
    }

    #[test]
    fn selects_by_body_header_envelope_and_age() {
        let e = read("poison", Some("order 7 failed"), Some(3));
        let m = msg(r#"{"region":"eu","amount":12}"#, &[("tenant", "acme")]);
        assert!(selects(r#".body.region == "eu""#, &m, &e));
        assert!(!selects(r#".body.region == "us""#, &m, &e));
        assert!(selects(r#".headers.tenant == "acme""#, &m, &e));
        assert!(selects(".attempts >= 3 and .ageSeconds > 60", &m, &e));
        assert!(selects(
            r#".class == "poison" and .source == "orders""#,
            &m,
            &e
        ));
        assert!(selects(r#".message | test("^order \\d+ failed$")"#, &m, &e));
        assert!(selects(&format!(".group == \"{}\"", group(&e)), &m, &e));
        // A missing field is null: not selected, not a failure.
        assert!(!selects(".headers.missing", &m, &e));
    }

    /// A body that is not JSON (or was cut) is a string; indexing it fails, counted, and the
    /// error keeps no value of the message.
    #[test]
    fn failures_are_counted_without_message_content() {
        let w = Where::compile(r#".body.region == "eu""#).expect("compiles");
        let e = read("poison", None, None);
        let m = msg("card 4111 1111 1111 1111", &[]);
        assert!(!w.selects(&m.id, document(&m, &e, None)));
        let mut cut = msg(r#"{"region":"eu"}"#, &[]);
        cut.body_len = 1000;
        assert!(!w.selects("m-2", document(&cut, &e, None)));
        let f = w.failures().expect("failures");
        assert_eq!(f.count, 2);
        assert_eq!(f.first_id, "m-1");
        assert!(!f.first_error.contains("4111"), "{}", f.first_error);
        assert!(f.first_error.contains("cannot index"), "{}", f.first_error);
        // Cloning shares the count.
        let w2 = w.clone();
        assert!(!w2.selects("m-3", document(&m, &e, None)));
        assert_eq!(w.failures().map(|f| f.count), Some(3));
        // A value that is not a boolean is a failure too.
        let w = Where::compile(".body").expect("compiles");
        assert!(!w.selects("m-4", document(&m, &e, None)));
        assert_eq!(
            w.failures().map(|f| f.first_error),
            Some("yields a string, not true or false".into())
        );
    }

    /// jaq quotes the value it failed on as JSON, a string's own quotes escaped inside: none
    /// of it may be shown (CI of a transform test showed `<str>n/a\\<str>`, 2026-12-03).
    #[test]
    fn errors_lose_every_quoted_value_escapes_and_all() {
        assert_eq!(
            scrub(r#"cannot parse "\"n/a card 4111\"" as number"#),
            "cannot parse <str> as number"
        );
        assert_eq!(scrub(r#"x "a\\" y "b" z"#), "x <str> y <str> z");
        assert_eq!(scrub(r#"open "never closed"#), "open <str>");
        let w = Where::compile(".body | tonumber").expect("compiles");
        let e = read("poison", None, None);
        let m = msg(r#""n/a secret""#, &[]);
        assert!(!w.selects(&m.id, document(&m, &e, None)));
        let f = w.failures().expect("a failure");
        assert!(!f.first_error.contains("n/a"), "{}", f.first_error);
        assert!(!f.first_error.contains("secret"), "{}", f.first_error);
    }

    /// Issue 52 (H3, M6): what ends the process, reads the environment or other input, or
    /// prints is not defined, in any arity; the error says why, before anything is read.
    #[test]
    fn halt_env_input_and_printing_are_refused_at_compile_time() {
        for (code, name) in [
            ("halt", "filter `halt/0`"),
            ("halt(3)", "filter `halt/1`"),
            ("halt_error", "filter `halt_error/0`"),
            ("halt_error(1)", "filter `halt_error/1`"),
            ("env.AWS_SECRET_ACCESS_KEY", "filter `env/0`"),
            ("$ENV.AWS_SECRET_ACCESS_KEY", "variable `$ENV`"),
            ("input", "filter `input/0`"),
            ("[inputs]", "filter `inputs/0`"),
            ("debug", "filter `debug/0`"),
            ("debug(.body)", "filter `debug/1`"),
            ("stderr", "filter `stderr/0`"),
            ("stderr_empty", "filter `stderr_empty/0`"),
            ("get_search_list", "filter `get_search_list/0`"),
            ("input_filename", "filter `input_filename/0`"),
            ("$__loc__", "variable `$__loc__`"),
            (".body | env | length > 0", "filter `env/0`"),
        ] {
            let err = Where::compile(code).expect_err(code);
            assert!(
                err.starts_with(&format!("--where `{code}`: undefined {name}")),
                "{code}: {err}"
            );
            assert!(err.contains("never ends the run"), "{code}: {err}");
            assert!(!err.contains('\n'), "{code}: {err}");
            let err = crate::redrive::transform::Transform::compile(code).expect_err(code);
            assert!(err.starts_with("--transform `"), "{code}: {err}");
            assert!(err.contains(name), "{code}: {err}");
        }
        // The rest of the standard library is there, and a name of one's own is one's own.
        for code in [
            "def debug: true; debug",
            ".body | tojson | test(\"x\") | not",
            "[.headers | to_entries[] | .key | ascii_downcase] | any(. == \"x\")",
            "now > 0",
            "(.body | type) == \"object\"",
        ] {
            Where::compile(code).unwrap_or_else(|e| panic!("{code}: {e}"));
        }
    }

    /// Issue 52 (fixjq 1): a number f64 cannot hold as written would be compared and
    /// written as another (`12345678901234567890124` equals `…123` as floats).
    #[test]
    fn a_number_a_float_cannot_hold_is_refused_at_compile_time() {
        for code in [
            ".body.big = 12345678901234567890124",
            ".body.n == 9007199254740993",
            ".body.x == 0.1000000000000000055511151231257827",
            "[.body[] | select(. == -12345678901234567890124)]",
            r#".body.s == "\(12345678901234567890124)""#,
        ] {
            let err = Where::compile(code).expect_err(code);
            assert!(err.starts_with("--where `"), "{code}: {err}");
            assert!(err.contains("64-bit float"), "{code}: {err}");
            assert!(!err.contains('\n'), "{code}: {err}");
            let err = crate::redrive::transform::Transform::compile(code).expect_err(code);
            assert!(err.contains("64-bit float"), "{code}: {err}");
        }
        for code in [
            ".body.n == 9007199254740992",
            ".body.n == 9007199254740994",
            ".body.x == 0.1",
            ".body.x == 1e2",
            ".body.x == 1.5e-3",
            ".body.x == 10000000000000000000000",
            ".body.s == \"12345678901234567890124\"",
        ] {
            Where::compile(code).unwrap_or_else(|e| panic!("{code}: {e}"));
        }
    }

    /// Issue 52 (fixjq 2): only the first outputs are looked at; a message whose expression
    /// gave that many without a `true` is a failure (reported), not silently unselected.
    #[test]
    fn an_expression_cut_at_its_output_limit_is_a_failure_not_a_no() {
        let w = Where::compile(".body.items[] == 1999").expect("compiles");
        let items: Vec<u32> = (0..2000).collect();
        let doc: Val =
            serde_json::from_value(serde_json::json!({ "body": { "items": items } })).expect("doc");
        assert!(!w.selects("m-1", doc));
        let failures = w.failures().expect("a failure");
        assert_eq!(failures.count, 1);
        assert!(
            failures.first_error.contains("any("),
            "{}",
            failures.first_error
        );
        // The `any(...)` form looks at every element and selects it.
        let w = Where::compile("any(.body.items[]; . == 1999)").expect("compiles");
        let doc: Val =
            serde_json::from_value(serde_json::json!({ "body": { "items": items } })).expect("doc");
        assert!(w.selects("m-1", doc));
        assert!(w.failures().is_none());
    }

    /// Issue 52 (fixjq 4): `import`/`include` compiled, then every worker panicked in jaq.
    #[test]
    fn import_and_include_are_refused_at_compile_time() {
        for code in [
            r#"import "/etc/passwd" as $p; .body == $p"#,
            r#"include "/etc/passwd"; ."#,
            r#"import "m" as m; ."#,
            r#"module {}; import "/etc/passwd" as $p; true"#,
        ] {
            let err = Where::compile(code).expect_err(code);
            assert!(err.contains("import"), "{code}: {err}");
            assert!(err.contains("reads no file"), "{code}: {err}");
            let err = crate::redrive::transform::Transform::compile(code).expect_err(code);
            assert!(err.contains("reads no file"), "{code}: {err}");
        }
        for code in [".import == 1", "{import: 1} | .import == 1", ".a.include"] {
            Where::compile(code).unwrap_or_else(|e| panic!("{code}: {e}"));
        }
    }

    #[test]
    fn an_expression_that_does_not_compile_is_one_line_naming_the_column() {
        let err = Where::compile(".body.region ==").expect_err("refused");
        assert_eq!(
            err,
            "--where `.body.region ==`: expected term at column 16 (the end) (a jq expression: docs/redrive.md, \"Choosing messages\")"
        );
        let err = Where::compile("nosuch(1)").expect_err("refused");
        assert!(err.contains("undefined filter `nosuch/1`"), "{err}");
        let err = Where::compile("$x").expect_err("refused");
        assert!(err.contains("undefined variable `$x`"), "{err}");
        let err = Where::compile(r#".a == "x"#).expect_err("refused");
        assert!(err.contains("expected closing quote"), "{err}");
        assert!(!err.contains('\n'));
    }
}
