//! Failure groups (issue 37): dead letters that failed the same way, told apart from those
//! that failed another way, as Sentry groups its issues. A message's fingerprint is its error
//! class and its error message with the parts that vary from one message to the next
//! (timestamps, UUIDs, quoted values, hex ids, numbers) replaced by placeholders, so that
//! `order 123 failed: amount 45.10` and `order 9 failed: amount 3` are one group.
//!
//! Pure text in, text out: no backend, no I/O, no secrets (the caller masks what it shows).
//! The id is a hash of what was normalised, so it is the same in every run, on every machine,
//! whatever the masking (`--show-secrets` or not): a group can be named in a ticket.

use std::sync::LazyLock;

use regex_lite::Regex;
use sha2::Digest as _;

/// Hex characters of the id: 48 bits, no collision to fear among the ≤ 1,000 messages
/// `status` reads.
pub const ID_LEN: usize = 12;

/// RFC 3339 / ISO 8601 instants and dates: `2026-12-03T07:17:51.123Z`, `2026-12-03 07:17:51+01:00`,
/// `2026-12-03`.
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?",
    )
    .expect("a valid pattern")
});

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        .expect("a valid pattern")
});

/// A quoted value: `"…"`, or `'…'` whose opening quote does not follow a letter or digit (so
/// the apostrophe of `can't` opens nothing). The character before is kept (group 1).
static QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(^|[^0-9A-Za-z])(?:'[^'\n]*'|"[^"\n]*")"#).expect("a valid pattern")
});

/// A run of letters and digits: a hex id is one of them, whole.
static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[0-9A-Za-z]+").expect("a valid pattern"));

/// `message` with its variable parts replaced, in this order: timestamps → `<ts>`, UUIDs →
/// `<uuid>`, quoted values → `<str>`, hex ids (`0x…`, or a run of ≥ 8 hex characters with a
/// digit and a letter) → `<hex>`, numbers (integers, decimals, negative) → `<n>`; white space
/// collapsed to single spaces, trimmed. A run of digits alone is a number, not a hex id, so
/// `order 12345678` and `order 7` are one group.
pub fn normalise(message: &str) -> String {
    let s = TIMESTAMP.replace_all(message, "<ts>");
    let s = UUID.replace_all(&s, "<uuid>");
    let s = QUOTED.replace_all(&s, "${1}<str>");
    let s = TOKEN.replace_all(&s, |caps: &regex_lite::Captures<'_>| {
        let t = &caps[0];
        if is_hex_id(t) {
            "<hex>".to_owned()
        } else {
            t.to_owned()
        }
    });
    let s = numbers(&s);
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_hex_id(t: &str) -> bool {
    if let Some(rest) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit());
    }
    t.len() >= 8
        && t.chars().all(|c| c.is_ascii_hexdigit())
        && t.chars().any(|c| c.is_ascii_digit())
        && t.chars().any(|c| c.is_ascii_alphabetic())
}

/// Every number becomes `<n>`: a run of digits with at most one decimal part (`45.10`), and
/// its minus sign when the sign stands apart (`-3`, `(-3`, `=-3`; not the dash of `node-3`).
fn numbers(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !c.is_ascii_digit() {
            out.push(c);
            i += 1;
            continue;
        }
        // A minus sign just pushed, with nothing word-like before it: part of the number.
        if i > 0 && chars[i - 1] == '-' {
            let before = if i >= 2 { Some(chars[i - 2]) } else { None };
            if before.is_none_or(|b| b.is_whitespace() || "([{=:,;".contains(b)) {
                out.pop();
            }
        }
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        if i + 1 < chars.len() && chars[i] == '.' && chars[i + 1].is_ascii_digit() {
            i += 1;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
        }
        out.push_str("<n>");
    }
    out
}

/// A group's id: the first [`ID_LEN`] hex characters of sha256 of `class`, a newline and
/// `normalised`.
pub fn fingerprint(class: &str, normalised: &str) -> String {
    let digest = sha2::Sha256::digest(format!("{class}\n{normalised}").as_bytes());
    let mut hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(ID_LEN);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_parts_become_placeholders_in_order() {
        assert_eq!(
            normalise("order 123 failed: amount 45.10 exceeds limit"),
            "order <n> failed: amount <n> exceeds limit"
        );
        assert_eq!(
            normalise("at 2026-12-03T07:17:51.123Z and 2026-12-03 07:17:51+01:00, on 2026-12-03"),
            "at <ts> and <ts>, on <ts>"
        );
        assert_eq!(
            normalise("order 0b4f3c1e-9a2d-4e6f-8b7a-1c2d3e4f5a6b not found"),
            "order <uuid> not found"
        );
        assert_eq!(
            normalise(r#"invalid field "sku" (value 'AB-12'); can't parse it"#),
            "invalid field <str> (value <str>); can't parse it"
        );
        assert_eq!(
            normalise("timeout after 3000 ms calling inventory-7f3a9c2e at 0x1F"),
            "timeout after <n> ms calling inventory-<hex> at <hex>"
        );
        assert_eq!(
            normalise("delta -3 on node-3 (=-2.5)\n\t  retry"),
            "delta <n> on node-<n> (=<n>) retry"
        );
        // A run of digits is a number; a word of hex letters alone is a word.
        assert_eq!(normalise("id 12345678 deadbeef"), "id <n> deadbeef");
        assert_eq!(normalise(""), "");
    }

    /// Sentry-like: messages that differ only in ids, amounts and times are one group;
    /// another class or other words are another.
    #[test]
    fn messages_that_differ_only_in_their_values_group_together() {
        let group = |class: &str, m: &str| fingerprint(class, &normalise(m));
        let a = group(
            "poison",
            "order 123 failed: amount 45.10 exceeds limit at 2026-12-01T10:00:00Z",
        );
        assert_eq!(
            a,
            group(
                "poison",
                "order 98765 failed: amount 3 exceeds limit at 2026-12-03T23:59:59.999+02:00"
            )
        );
        assert_ne!(
            a,
            group(
                "transient",
                "order 123 failed: amount 45.10 exceeds limit at 2026-12-01T10:00:00Z"
            )
        );
        assert_ne!(
            a,
            group(
                "poison",
                "order 123 refused: amount 45.10 exceeds limit at 2026-12-01T10:00:00Z"
            )
        );
        assert_eq!(
            group(
                "timeout",
                "timeout after 3000 ms calling inventory-7f3a9c2e"
            ),
            group(
                "timeout",
                "timeout after 12 ms calling inventory-00ab11cd99"
            )
        );
        assert_eq!(
            group("poison", r#"invalid field "sku""#),
            group("poison", r#"invalid field "price""#)
        );
    }

    /// The id is a function of the class and the normalised text alone: the same in every
    /// run and on every machine (sha256, not the process's hasher).
    #[test]
    fn ids_are_stable_across_runs() {
        assert_eq!(
            fingerprint("poison", "order <n> failed: amount <n> exceeds limit"),
            "641a4d89f69d"
        );
        assert_eq!(fingerprint("poison", "").len(), ID_LEN);
    }
}
