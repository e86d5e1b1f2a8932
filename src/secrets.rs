//! What dlqctl never shows of a message: secrets in its headers and card numbers anywhere.
//!
//! Dead letters carry what the failed request carried: `Authorization` and `Cookie` headers,
//! API keys, and card numbers in bodies. `status` (human, markdown for incident channels and
//! PRs, JSON) and `redrive --dry-run` show samples of them, so by default (issue 31):
//! - a header whose name looks secret ([`secret_name`]), or that the target names in
//!   `redact.headers`, is shown as `«redacted, N bytes»`;
//! - a value at one of the target's `redact.bodyPointers` (JSON pointers) in a JSON body is
//!   shown the same way; a body that cannot be checked against them (not JSON, or cut by
//!   `--max-body`) is not shown at all;
//! - in any text shown (bodies, header values, error messages, ids; issue 52, M8): a JSON
//!   field whose name looks secret (`"password": "…"`, also inside JSON carried as a string,
//!   `{\"cvv\":\"…\"}`), a `name=value` pair whose name does (`password=…&`, a query
//!   string or form body), the credentials after `Bearer` or `Basic`, and any JSON Web Token
//!   (`eyJ….eyJ….…`) are shown as `«redacted, N bytes»` ([`hide_secrets`]);
//! - a run of 13–19 digits (single spaces or dashes allowed between them) that passes the
//!   Luhn check is masked except its last four digits (PCI DSS 3.4), in bodies and header
//!   values alike; a run of 7 or more digits where a body was cut is masked whole, as it may
//!   be the start of one.
//!
//! Only an explicit `--show-secrets` turns this off ([`show_all`], which the command pairs with
//! a warning). This is display only: what `redrive` moves is the message as it is.
//!
//! Also the registry of the credentials dlqctl itself was handed ([`never_show`]): the
//! printer cuts them out of every `-v` line ([`scrub`]).
//!
//! The ground floor: no other module of dlqctl is used here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, RwLock};

use regex_lite::{Captures, Regex};

/// Every secret value dlqctl was handed (passwords, secret properties), cut out of log lines.
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Registers a secret: no `-v` line will show it, whatever a call site passes to the logger.
pub fn never_show(secret: &str) {
    if secret.is_empty() {
        return;
    }
    if let Ok(mut s) = SECRETS.write()
        && !s.iter().any(|k| k == secret)
    {
        s.push(secret.to_owned());
        // Longest first, so that a secret containing another is cut whole.
        s.sort_by_key(|k| std::cmp::Reverse(k.len()));
    }
}

/// `text` with every registered secret replaced by `***`.
pub(crate) fn scrub(text: &str) -> String {
    let mut out = text.to_owned();
    if let Ok(secrets) = SECRETS.read() {
        for secret in secrets.iter() {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "***");
            }
        }
    }
    out
}

/// `--show-secrets` was given: nothing is redacted.
static SHOW_ALL: AtomicBool = AtomicBool::new(false);

/// Turns redaction off for the rest of the process (`--show-secrets`).
pub fn show_all() {
    SHOW_ALL.store(true, Ordering::SeqCst);
}

/// Whether redaction is on (the default).
pub fn redacting() -> bool {
    !SHOW_ALL.load(Ordering::SeqCst)
}

/// What a hidden value is shown as.
pub fn redacted(bytes: usize) -> String {
    format!("«redacted, {bytes} bytes»")
}

/// Names whose value is a secret when the name, in lower case and with everything but
/// letters and digits dropped (`Authorization ` with a trailing space, `X-Api-Key`, `api_key`,
/// `client.secret` alike), is one of these...
const SECRET_NAMES: [&str; 12] = [
    "auth", "pass", "pwd", "pin", "cvv", "cvv2", "cvc", "cvc2", "cvn", "ssn", "otp", "sig",
];
/// ...or contains one of these.
const SECRET_PARTS: [&str; 20] = [
    "cvv",
    "cvc",
    "pincode",
    "passcode",
    "cardpin",
    "authorization",
    "cookie",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "signature",
    "privatekey",
    "credential",
    "securitycode",
    "sessionid",
    "accesskey",
    "cardverification",
];

/// Whether a name (a header's, a JSON field's, a query or form parameter's) says its value is
/// a secret: `authorization`, `proxy-authorization`, `x-forwarded-authorization`, `cookie`,
/// `set-cookie`; `password`, `passwd`, `pwd`, `pass`, `passcode`; anything with `cvv` or
/// `cvc` in it; `pin`, `pin_code`, `ssn`, `otp`; anything with token, secret, api key,
/// signature, private key, credential, session id or access key in it. Case, spaces, dashes, dots and underscores do not matter.
pub fn secret_name(name: &str) -> bool {
    let n: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    !n.is_empty()
        && (SECRET_NAMES.contains(&n.as_str())
            || SECRET_PARTS.iter().any(|p| n.contains(p))
            || secret_words(name))
}

/// Word parts (split at anything but letters and digits, and where a lower-case letter is
/// followed by an upper-case one) that make a name secret wherever they are...
const SECRET_WORDS: [&str; 5] = ["auth", "authentication", "session", "cookie", "cookies"];
/// ...and the words before `key` that make it a secret's (`X-Auth-Key`,
/// `Ocp-Apim-Subscription-Key`, `x-functions-key`, `api-key`), where `idempotency-key` or
/// `routing_key` are not.
const KEY_WORDS: [&str; 14] = [
    "api",
    "auth",
    "access",
    "secret",
    "private",
    "subscription",
    "function",
    "functions",
    "master",
    "signing",
    "encryption",
    "client",
    "app",
    "shared",
];

/// Whether `name`'s word parts say secret ([`SECRET_WORDS`], or `key` after one of
/// [`KEY_WORDS`]).
fn secret_words(name: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            words.push(std::mem::take(&mut current));
            previous_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c.to_ascii_lowercase());
    }
    words.push(current);
    words.retain(|w| !w.is_empty());
    words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
        || words
            .windows(2)
            .any(|w| w[1] == "key" && KEY_WORDS.contains(&w[0].as_str()))
}

/// Whether a header of this name holds a secret by its name alone ([`secret_name`]).
pub fn secret_header(name: &str) -> bool {
    secret_name(name)
}

/// A header value as it may be shown: redacted when its name is secret (or among `extra`,
/// case-insensitive, spaces around ignored), else with its secrets ([`hide_secrets`]) and
/// card numbers masked.
pub fn header_value(name: &str, value: &str, extra: &[String]) -> String {
    if !redacting() {
        return value.to_owned();
    }
    if secret_header(name)
        || extra
            .iter()
            .any(|e| e.trim().eq_ignore_ascii_case(name.trim()))
    {
        return redacted(value.len());
    }
    mask_cards(&hidden(value), false)
}

/// Any other text from a message (an error message, a class, an id) as it may be shown:
/// secrets ([`hide_secrets`]) and card numbers masked.
pub fn text(value: &str) -> String {
    if !redacting() {
        return value.to_owned();
    }
    mask_cards(&hidden(value), false)
}

/// `text` with its secrets hidden, card numbers left (for a text that is normalised before
/// it is shown: `status --group-by fingerprint`); as it is with `--show-secrets`.
pub fn hide_secrets(text: &str) -> String {
    if !redacting() {
        return text.to_owned();
    }
    hidden(text)
}

/// A JSON Web Token: three base64url parts, the first a JSON object's (`eyJ` is `{"`).
static JWT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*").expect("a valid pattern")
});
/// `Bearer <credentials>` (RFC 6750), whatever the case.
static BEARER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(bearer)(\s+)([A-Za-z0-9._~+/=-]{4,})").expect("a valid pattern")
});
/// `Basic <base64>` (RFC 7617): hidden when it decodes to `user:password`, so that "basic
/// information" stays.
static BASIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(basic)(\s+)([A-Za-z0-9+/]{4,}={0,2})").expect("a valid pattern")
});
/// A JSON member, its name (group 1) and value (group 2): a string (perhaps cut short) or a
/// number.
static MEMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#""((?:[^"\\\n]|\\[^\n]){1,64})"(\s*:\s*)("(?:[^"\\]|\\.)*(?:"|$)|-?[0-9][0-9.eE+-]*)"#,
    )
    .expect("a valid pattern")
});
/// The same in JSON carried as a JSON string (`{\"cvv\":\"737\"}`).
static ESCAPED_MEMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"\\"([^"\\\n]{1,64})\\"(\s*:\s*)(\\"(?:[^"\\]|\\[^"])*(?:\\"|$)|-?[0-9][0-9.eE+-]*)"#,
    )
    .expect("a valid pattern")
});
/// A member of a Python dict's repr (`{'password': 'x'}`, as an error message quotes it):
/// its name (group 1) and value (group 3).
static PY_MEMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"'([^'\\\n]{1,64})'(\s*:\s*)((?:[bBrRuU]{1,2})?'(?:[^'\\]|\\.)*(?:'|$)|-?[0-9][0-9.eE+-]*)"#)
        .expect("a valid pattern")
});
/// An `Authorization:` (or `Proxy-Authorization:`) header written in a text, with its scheme
/// (group 3, `Token`, `Bearer`, …) and credentials (group 5).
static AUTH_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b((?:proxy-)?authorization)(\s*:\s*)(?:([A-Za-z][A-Za-z0-9-]*)(\s+))?([^\s,;)]+)",
    )
    .expect("a valid pattern")
});
/// An XML element with text only: its name (group 1), attributes (group 2), text (group 3)
/// and closing name (group 4).
static XML_ELEMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"<([A-Za-z_][A-Za-z0-9_.:-]{0,63})((?:\s[^<>]*)?)>([^<]{1,4096})</([A-Za-z_][A-Za-z0-9_.:-]{0,63})>")
        .expect("a valid pattern")
});
/// `name=value` in a query string, a form body or a log line: the character before (group
/// 1), the name (group 2), the value (group 3).
static PAIR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(^|[^A-Za-z0-9_.\-])([A-Za-z][A-Za-z0-9_.\-]{0,63})=([^\s&;,"'<>(){}\[\]]+)"#)
        .expect("a valid pattern")
});

/// What a person wrote or a message carries as a word of the report (a `--reason`, a
/// message id): credentials and card numbers hidden (hx4 G: `--reason "card 4111…"` and an id
/// `token=…` reached the journal in clear).
pub fn said(text: &str) -> String {
    mask_cards(&hide_secrets(text), false)
}

/// `Digest <params>` (RFC 7616): every parameter hidden (`response`, `nonce`, `cnonce` are
/// the credentials; the `username` alone says who).
static DIGEST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)\b(digest)(\s+)((?:[A-Za-z][A-Za-z0-9_-]*\s*=\s*(?:\\?"(?:[^"\\\n]|\\[^"\n])*\\?"|[^\s,"\\]+)\s*,?\s*)+)"#)
        .expect("a valid pattern")
});
/// An XML element whose text is a CDATA section: name (group 1), attributes (group 2), text
/// (group 3), closing name (group 4).
static XML_CDATA: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"<([A-Za-z_][A-Za-z0-9_.:-]{0,63})((?:\s[^<>]*)?)><!\[CDATA\[((?s:.){0,4096}?)\]\]></([A-Za-z_][A-Za-z0-9_.:-]{0,63})>")
        .expect("a valid pattern")
});

/// [`hide_secrets`], whether redacting or not.
fn hidden(text: &str) -> String {
    if !text.contains("eyJ")
        && !text.contains('=')
        && !text.contains(':')
        && !text.contains('<')
        && !text.to_ascii_lowercase().contains("bearer")
        && !text.to_ascii_lowercase().contains("basic")
    {
        return text.to_owned();
    }
    let s = JWT.replace_all(text, |c: &Captures<'_>| redacted(c[0].len()));
    let s = BEARER.replace_all(&s, |c: &Captures<'_>| {
        format!("{}{}{}", &c[1], &c[2], redacted(c[3].len()))
    });
    let s = BASIC.replace_all(&s, |c: &Captures<'_>| {
        use base64::Engine as _;
        let cred = &c[3];
        // RFC 7617: user-id ":" password, in base64.
        let credentials = base64::engine::general_purpose::STANDARD
            .decode(cred)
            .is_ok_and(|b| b.contains(&b':'));
        if credentials {
            format!("{}{}{}", &c[1], &c[2], redacted(cred.len()))
        } else {
            c[0].to_owned()
        }
    });
    let s = ESCAPED_MEMBER.replace_all(&s, |c: &Captures<'_>| {
        if !secret_name(&c[1]) {
            return c[0].to_owned();
        }
        let v = &c[3];
        let inner = v
            .strip_prefix("\\\"")
            .map(|v| v.strip_suffix("\\\"").unwrap_or(v));
        let shown = match inner {
            Some(inner) => format!("\\\"{}\\\"", redacted(inner.len())),
            None => format!("\\\"{}\\\"", redacted(v.len())),
        };
        format!("\\\"{}\\\"{}{shown}", &c[1], &c[2])
    });
    let s = DIGEST.replace_all(&s, |c: &Captures<'_>| {
        format!("{}{}{}", &c[1], &c[2], redacted(c[3].len()))
    });
    let s = AUTH_LINE.replace_all(&s, |c: &Captures<'_>| {
        let cred = &c[5];
        if cred.starts_with('«') {
            return c[0].to_owned();
        }
        let scheme = c.get(3).map_or(String::new(), |m| m.as_str().to_owned());
        let space = c.get(4).map_or("", |m| m.as_str());
        format!("{}{}{scheme}{space}{}", &c[1], &c[2], redacted(cred.len()))
    });
    let s = MEMBER.replace_all(&s, |c: &Captures<'_>| {
        // A name written with escapes (`pass\u0077ord`) is matched as it reads.
        let name = serde_json::from_str::<String>(&format!("\"{}\"", &c[1]))
            .unwrap_or_else(|_| c[1].to_owned());
        if !secret_name(&name) {
            return c[0].to_owned();
        }
        let v = &c[3];
        let len = match v.strip_prefix('"') {
            Some(inner) => inner.strip_suffix('"').unwrap_or(inner).len(),
            None => v.len(),
        };
        format!("\"{}\"{}\"{}\"", &c[1], &c[2], redacted(len))
    });
    let s = PY_MEMBER.replace_all(&s, |c: &Captures<'_>| {
        if !secret_name(&c[1]) {
            return c[0].to_owned();
        }
        let v = c[3].trim_start_matches(['b', 'B', 'r', 'R', 'u', 'U']);
        let len = match v.strip_prefix('\'') {
            Some(inner) => inner.strip_suffix('\'').unwrap_or(inner).len(),
            None => v.len(),
        };
        format!("'{}'{}'{}'", &c[1], &c[2], redacted(len))
    });
    let s = XML_CDATA.replace_all(&s, |c: &Captures<'_>| {
        if c[1] != c[4] || !secret_name(&c[1]) {
            return c[0].to_owned();
        }
        format!("<{}{}>{}</{}>", &c[1], &c[2], redacted(c[3].len()), &c[4])
    });
    let s = XML_ELEMENT.replace_all(&s, |c: &Captures<'_>| {
        if c[1] != c[4] || !secret_name(&c[1]) || c[3].starts_with('«') {
            return c[0].to_owned();
        }
        format!("<{}{}>{}</{}>", &c[1], &c[2], redacted(c[3].len()), &c[4])
    });
    let s = PAIR.replace_all(&s, |c: &Captures<'_>| {
        if !secret_name(&c[2]) || c[3].starts_with('«') {
            return c[0].to_owned();
        }
        format!("{}{}={}", &c[1], &c[2], redacted(c[3].len()))
    });
    s.into_owned()
}

/// A body as it may be shown, or `None` when it must not be shown at all (pointers to redact,
/// and a body that is not whole JSON). `cut`: the body was cut before its end.
pub fn body_text(text: &str, cut: bool, pointers: &[String]) -> Option<String> {
    if !redacting() {
        return Some(text.to_owned());
    }
    if pointers.is_empty() {
        return Some(mask_cards(&hidden(text), cut));
    }
    if cut {
        return None;
    }
    let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut any = false;
    for p in pointers {
        if let Some(at) = v.pointer_mut(p) {
            let len = match &*at {
                serde_json::Value::String(s) => s.len(),
                other => other.to_string().len(),
            };
            *at = serde_json::Value::String(redacted(len));
            any = true;
        }
    }
    let text = if any { v.to_string() } else { text.to_owned() };
    Some(mask_cards(&hidden(&text), false))
}

/// `text` with every card number masked but its last four digits (`•••• •••• •••• 1111`).
/// `cut`: the text was cut before its end, so a run of 7 or more digits at its end (perhaps
/// the start of a card number) is masked whole.
pub fn mask_cards(text: &str, cut: bool) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut mask = vec![false; chars.len()];
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        // A maximal run: digits, with single spaces or dashes between two digits.
        let start = i;
        let mut end = i + 1;
        while end < chars.len() {
            if chars[end].is_ascii_digit() {
                end += 1;
            } else if matches!(chars[end], ' ' | '-')
                && chars.get(end + 1).is_some_and(char::is_ascii_digit)
            {
                end += 2;
            } else {
                break;
            }
        }
        mark_cards(&chars[start..end], &mut mask[start..end]);
        if cut && end == chars.len() {
            let run = &chars[start..end];
            let digits = run.iter().filter(|c| c.is_ascii_digit()).count();
            if digits >= 7 && card_shaped(run, true) {
                mask[start..end].iter_mut().for_each(|m| *m = true);
            }
        }
        i = end;
    }
    chars
        .iter()
        .zip(&mask)
        .map(|(c, m)| if *m && c.is_ascii_digit() { '•' } else { *c })
        .collect()
}

/// Whether a run of digits and separators is written the way card numbers are: a major
/// network's first digit (2–6: Mastercard, Amex/Diners/JCB, Visa, Mastercard, Discover/
/// UnionPay), and either no separators, or one kind of separator between groups of 4 (the last
/// 1–4), or Amex's 4-6-5 (Diners' 4-6-4). Names such as `payments-t32388-414086208-1` are
/// not (their digits pass the Luhn check one time in ten). `prefix`: the run may stop early
/// (a cut body), so its last group may be short of its length.
fn card_shaped(run: &[char], prefix: bool) -> bool {
    if !run.first().is_some_and(|c| ('2'..='6').contains(c)) {
        return false;
    }
    let seps: Vec<char> = run
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_digit())
        .collect();
    if seps.windows(2).any(|w| w[0] != w[1]) {
        return false;
    }
    let groups: Vec<usize> = run
        .split(|c| !c.is_ascii_digit())
        .map(<[char]>::len)
        .collect();
    let Some((last, init)) = groups.split_last() else {
        return false;
    };
    if init.is_empty() {
        return true;
    }
    let fours = init.iter().all(|g| *g == 4) && (1..=4).contains(last);
    let amex = match groups.as_slice() {
        [4, 6, n] => (4..=5).contains(n) || (prefix && *n < 5),
        [4, n] if prefix => *n <= 6,
        _ => false,
    };
    fours || amex
}

/// Marks, in one run of digits and separators, the card numbers it holds: the whole run, or
/// else whole groups of it (a card followed by an expiry year), all but the last 4 digits.
fn mark_cards(run: &[char], mask: &mut [bool]) {
    let mark = |from: usize, to: usize, mask: &mut [bool]| -> bool {
        let digits: Vec<u32> = run[from..to]
            .iter()
            .filter_map(|c| c.to_digit(10))
            .collect();
        if !(13..=19).contains(&digits.len())
            || !card_shaped(&run[from..to], false)
            || !luhn(&digits)
        {
            return false;
        }
        let mut keep = 4;
        for k in (from..to).rev() {
            if run[k].is_ascii_digit() {
                if keep > 0 {
                    keep -= 1;
                } else {
                    mask[k] = true;
                }
            }
        }
        true
    };
    if mark(0, run.len(), mask) {
        return;
    }
    // Group boundaries: the starts of groups, and the end.
    let mut starts = vec![0];
    for (k, c) in run.iter().enumerate() {
        if !c.is_ascii_digit() {
            starts.push(k + 1);
        }
    }
    if starts.len() < 2 {
        return;
    }
    let mut bounds: Vec<usize> = starts.clone();
    bounds.push(run.len() + 1);
    let mut a = 0;
    while a + 1 < bounds.len() {
        let mut found = false;
        // Longest first, from group `a`.
        for b in (a + 1..bounds.len()).rev() {
            let to = bounds[b] - 1;
            if to > bounds[a] && mark(bounds[a], to, mask) {
                a = b;
                found = true;
                break;
            }
        }
        if !found {
            a += 1;
        }
    }
}

/// The Luhn check over digits, most significant first.
fn luhn(digits: &[u32]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                *d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_secret_never_reaches_a_log_line() {
        never_show("hunter2-longer");
        never_show("hunter2");
        never_show("");
        assert_eq!(
            scrub("login with hunter2-longer, then hunter2"),
            "login with ***, then ***"
        );
        assert_eq!(scrub("nothing here"), "nothing here");
    }

    #[test]
    fn card_numbers_keep_only_their_last_four_digits() {
        assert_eq!(
            mask_cards("card 4111 1111 1111 1111 ok", false),
            "card •••• •••• •••• 1111 ok"
        );
        assert_eq!(
            mask_cards("4111-1111-1111-1111", false),
            "••••-••••-••••-1111"
        );
        assert_eq!(
            mask_cards("{\"pan\":\"4111111111111111\"}", false),
            "{\"pan\":\"••••••••••••1111\"}"
        );
        // Amex, 15 digits.
        assert_eq!(mask_cards("378282246310005", false), "•••••••••••0005");
        // Followed by an expiry year in the same run of groups.
        assert_eq!(
            mask_cards("4111 1111 1111 1111 2029", false),
            "•••• •••• •••• 1111 2029"
        );
    }

    #[test]
    fn numbers_that_are_not_cards_are_left_alone() {
        // Fails the Luhn check.
        assert_eq!(
            mask_cards("4111 1111 1111 1112", false),
            "4111 1111 1111 1112"
        );
        // Too short, too long.
        assert_eq!(
            mask_cards("order 123456789012", false),
            "order 123456789012"
        );
        assert_eq!(
            mask_cards("id 41111111111111110000", false),
            "id 41111111111111110000"
        );
        assert_eq!(mask_cards("2026-12-01 10:00", false), "2026-12-01 10:00");
        // Digits of a resource name that pass the Luhn check by chance (15 digits, 5-9-1).
        assert_eq!(
            mask_cards("payments-t32388-414086208-1-processor-sub", false),
            "payments-t32388-414086208-1-processor-sub"
        );
        // Mixed separators, and a first digit no major network uses.
        assert_eq!(
            mask_cards("4111 1111-1111 1111", false),
            "4111 1111-1111 1111"
        );
        assert_eq!(mask_cards("9111111111111111", false), "9111111111111111");
        // Amex written 4-6-5.
        assert_eq!(mask_cards("3782 822463 10005", false), "•••• •••••• •0005");
    }

    #[test]
    fn digits_where_a_body_was_cut_are_masked_whole() {
        assert_eq!(mask_cards("pan 4111 1111 11", true), "pan •••• •••• ••");
        assert_eq!(mask_cards("pan 4111 1111 11", false), "pan 4111 1111 11");
        assert_eq!(mask_cards("n 123456", true), "n 123456");
        assert_eq!(
            mask_cards("id t32388-414086208", true),
            "id t32388-414086208"
        );
    }

    #[test]
    fn secret_headers_are_known_by_name_case_insensitively() {
        for n in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "Set-Cookie",
            "x-auth-token",
            "X-Client-Secret",
            "db_password",
            "X-API-Key",
            "apikey",
            "x-hub-signature-256",
            // Issue 52, M8.
            "x-forwarded-authorization",
            "authorization ",
            " AUTHORIZATION\t",
            "PROXY-Authorization",
            "X-Amz-Security-Token",
            "x-session-id",
            "card_cvv",
            "cardCvc2",
            "pin_code",
        ] {
            assert!(secret_header(n), "{n}");
            assert_eq!(header_value(n, "Bearer abc", &[]), "«redacted, 10 bytes»");
        }
        for n in [
            "content-type",
            "dlq-error-class",
            "dlq-error-message",
            "x-death",
            "keyboard",
            "traceparent",
            "x-request-form",
            "shipping",
            "classname",
        ] {
            assert!(!secret_header(n), "{n}");
        }
        assert_eq!(
            header_value("X-Customer-Email", "a@b.c", &["x-customer-email".into()]),
            "«redacted, 5 bytes»"
        );
        assert_eq!(
            header_value("note", "paid with 4111111111111111", &[]),
            "paid with ••••••••••••1111"
        );
    }

    #[test]
    fn body_pointers_redact_json_values_and_withhold_what_cannot_be_checked() {
        let p = vec!["/customer/email".to_owned(), "/missing".to_owned()];
        assert_eq!(
            body_text(r#"{"customer":{"email":"a@b.c","id":7}}"#, false, &p).as_deref(),
            Some(r#"{"customer":{"email":"«redacted, 5 bytes»","id":7}}"#)
        );
        assert_eq!(body_text("not json", false, &p), None);
        assert_eq!(body_text(r#"{"customer":"#, true, &p), None);
        assert_eq!(body_text("plain", false, &[]).as_deref(), Some("plain"));
    }

    /// Issue 52, M8: a bearer JWT in an error message, a bare one, `Basic` credentials, JSON
    /// fields whose names are secret (also in JSON carried as a string, and where a body was
    /// cut), form and query parameters; what is not secret is left as it was.
    #[test]
    fn tokens_and_secret_fields_are_hidden_wherever_they_are() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvIn0.SflKxwRJSMeKKF2QT4fw";
        assert_eq!(
            text(&format!(
                "401 for Authorization: Bearer {jwt} (refresh {jwt})"
            )),
            "401 for Authorization: Bearer «redacted, 57 bytes» (refresh «redacted, 57 bytes»)"
        );
        assert_eq!(
            text("upstream: bearer s3cr3t-t0ken"),
            "upstream: bearer «redacted, 12 bytes»"
        );
        assert_eq!(
            text("Basic dXNlcjpwYXNz and basic information"),
            "Basic «redacted, 12 bytes» and basic information"
        );
        assert_eq!(
            body_text(
                r#"{"card":"4111111111111111","password":"hunter2","cvv":"737","pin":4321,"client":{"client_secret":"x\"y"},"note":"ok","amount":12}"#,
                false,
                &[]
            )
            .as_deref(),
            Some(
                r#"{"card":"••••••••••••1111","password":"«redacted, 7 bytes»","cvv":"«redacted, 3 bytes»","pin":"«redacted, 4 bytes»","client":{"client_secret":"«redacted, 4 bytes»"},"note":"ok","amount":12}"#
            )
        );
        // Cut in the middle of the value.
        assert_eq!(
            body_text(r#"{"order":1,"password":"hunter"#, true, &[]).as_deref(),
            Some(r#"{"order":1,"password":"«redacted, 6 bytes»""#)
        );
        // JSON carried in a JSON string, and pretty-printed.
        assert_eq!(
            text(r#"{"payload":"{\"cvv\":\"737\",\"ok\":1}"}"#),
            r#"{"payload":"{\"cvv\":\"«redacted, 3 bytes»\",\"ok\":1}"}"#
        );
        assert_eq!(
            text("{\n  \"Password\" : \"p\"\n}"),
            "{\n  \"Password\" : \"«redacted, 1 bytes»\"\n}"
        );
        assert_eq!(
            text("GET /pay?access_token=abc123&check=deep&api_key=k&sig=zz user=alice&password=pw"),
            "GET /pay?access_token=«redacted, 6 bytes»&check=deep&api_key=«redacted, 1 bytes»&sig=«redacted, 2 bytes» user=alice&password=«redacted, 2 bytes»"
        );
        for plain in [
            "order 42 failed: amount 12.5, status=declined",
            r#"{"status":"declined","code":"51","author":"x"}"#,
            "2026-12-07T10:00:00Z token expired",
        ] {
            assert_eq!(text(plain), plain);
        }
        assert_eq!(
            header_value("x-request-form", "user=a&password=pw", &[]),
            "user=a&password=«redacted, 2 bytes»"
        );
    }

    /// Issue 52 (fixjq 7): what status and dry runs still showed in clear.
    #[test]
    fn keys_sessions_escaped_names_python_reprs_token_schemes_and_xml_are_hidden() {
        for n in [
            "X-Auth-Key",
            "Ocp-Apim-Subscription-Key",
            "x-functions-key",
            "X-Authentication",
            "x-auth",
            "session",
            "api-key",
            "subscription-key",
            "auth",
            "x-session",
            "cookie",
            "accessKey",
        ] {
            assert!(secret_header(n), "{n}");
        }
        for n in [
            "idempotency-key",
            "routing_key",
            "partition-key",
            "keyboard",
            "key",
            "author",
        ] {
            assert!(!secret_header(n), "{n}");
        }
        assert_eq!(
            text(r#"{"pass\u0077ord":"hunter2","ok":1}"#),
            r#"{"pass\u0077ord":"«redacted, 7 bytes»","ok":1}"#
        );
        assert_eq!(
            text("login failed for {'user': 'al', 'password': 'hunter2', 'api_key': 'k-1'}"),
            "login failed for {'user': 'al', 'password': '«redacted, 7 bytes»', 'api_key': '«redacted, 3 bytes»'}"
        );
        assert_eq!(
            text("401 from upstream (Authorization: Token 9f8e7d6c5b)"),
            "401 from upstream (Authorization: Token «redacted, 10 bytes»)"
        );
        assert_eq!(
            body_text(
                "<pay><cvv>4821</cvv><password a=\"1\">pw</password><note>ok</note></pay>",
                false,
                &[]
            )
            .as_deref(),
            Some(
                "<pay><cvv>«redacted, 4 bytes»</cvv><password a=\"1\">«redacted, 2 bytes»</password><note>ok</note></pay>"
            )
        );
        for plain in [
            "2026-12-07T10:00:00Z token expired",
            "<status>declined</status>",
            "{'status': 'declined', 'code': '51'}",
        ] {
            assert_eq!(text(plain), plain);
        }
    }

    #[test]
    fn digest_credentials_cdata_passwords_python_bytes_and_said_words_are_hidden() {
        let digest = r#"Authorization: Digest username="a", realm="r", nonce="n0nce", response="DIGESTSECRET000029""#;
        let out = hidden(digest);
        assert!(
            !out.contains("DIGESTSECRET000029") && !out.contains("n0nce"),
            "{out}"
        );
        let cdata = "<user><password><![CDATA[s3cr3t-in-cdata]]></password></user>";
        let out = hidden(cdata);
        assert!(!out.contains("s3cr3t-in-cdata"), "{out}");
        let py = "{'password': b'pybytes-secret', 'user': 'bob'}";
        let out = hidden(py);
        assert!(
            !out.contains("pybytes-secret") && out.contains("bob"),
            "{out}"
        );
        let out = said("card 4111111111111111 token=IDSECRET0001");
        assert!(
            !out.contains("4111111111111111") && !out.contains("IDSECRET0001"),
            "{out}"
        );
        assert_eq!(said("order 42 retried"), "order 42 retried");
    }
}
