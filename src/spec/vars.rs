//! `${VAR}` and `${VAR:-default}` in a target's addresses, so one targets file serves a
//! laptop, CI and a second local stack (issue 20).
//!
//! Only the fields that say where a server is are expanded: `url`, `amqpUrl`, `endpoint`,
//! `bootstrapServers`, `emulatorHost` and `connectUrl` ([`EXPANDED`]). Secrets never come this way: they have their own
//! `usernameEnv`/`passwordEnv`/`secretProperties` fields, which name a variable and are read
//! only when connecting, so a secret cannot end up in a plan file or a message. A `${` in any
//! other field of a Targets document is an error, not a literal, so a mistaken attempt is seen.
//!
//! Expansion happens when the document is loaded, before schema validation, so every later
//! check (URL shape, credentials in a URL) sees the value that will be used; an unset variable
//! without a default is reported at the field's position.

/// The Targets fields whose values may hold `${VAR}` references (camelCase, as written).
pub const EXPANDED: [&str; 6] = [
    "url",
    "amqpUrl",
    "endpoint",
    "bootstrapServers",
    "emulatorHost",
    "connectUrl",
];

/// Why a value could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VarError {
    /// `${NAME}` with `NAME` unset or empty, and no `:-default`.
    Unset(String),
    /// A `${` that does not open a well-formed reference; the text from the `${` on.
    Malformed(String),
}

impl std::fmt::Display for VarError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VarError::Unset(name) => write!(
                f,
                "environment variable `{name}` is not set (or is empty), and `${{{name}}}` has no default"
            ),
            VarError::Malformed(at) => write!(
                f,
                "`{at}` is not a variable reference: write `${{NAME}}` or `${{NAME:-default}}` (NAME: letters, digits, `_`)"
            ),
        }
    }
}

/// Whether `text` holds a reference (or something meant as one).
pub fn has_reference(text: &str) -> bool {
    text.contains("${")
}

/// Expands every `${NAME}` and `${NAME:-default}` in `text` with `lookup`. A variable that is
/// set but empty counts as unset, as with the shell's `:-`: an empty address is never meant.
/// Defaults are taken literally (no nested references). A `$` not followed by `{` is kept.
pub fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, VarError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let malformed = || VarError::Malformed(rest[start..].chars().take(40).collect());
        let end = after.find('}').ok_or_else(malformed)?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if !is_name(name) {
            return Err(malformed());
        }
        match lookup(name).filter(|v| !v.is_empty()) {
            Some(v) => out.push_str(&v),
            None => match default {
                Some(d) => out.push_str(d),
                None => return Err(VarError::Unset(name.to_owned())),
            },
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("rabbit.internal".into()),
            "PORT" => Some("15671".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn references_are_replaced_and_defaults_used_when_unset_or_empty() {
        assert_eq!(
            expand("https://${HOST}:${PORT}", env).as_deref(),
            Ok("https://rabbit.internal:15671")
        );
        assert_eq!(
            expand("${MISSING:-http://127.0.0.1:5000}", env).as_deref(),
            Ok("http://127.0.0.1:5000")
        );
        assert_eq!(expand("${EMPTY:-x}", env).as_deref(), Ok("x"));
        assert_eq!(
            expand("${HOST:-other}", env).as_deref(),
            Ok("rabbit.internal")
        );
        assert_eq!(expand("${MISSING:-}", env).as_deref(), Ok(""));
        assert_eq!(
            expand("no refs, $5 kept", env).as_deref(),
            Ok("no refs, $5 kept")
        );
        // A default is literal text, a `}` ends it.
        assert_eq!(expand("${MISSING:-a:-b}c", env).as_deref(), Ok("a:-bc"));
    }

    #[test]
    fn unset_and_malformed_references_are_errors_naming_what_is_wrong() {
        assert_eq!(
            expand("http://${MISSING}:1", env),
            Err(VarError::Unset("MISSING".into()))
        );
        assert_eq!(
            expand("${EMPTY}", env),
            Err(VarError::Unset("EMPTY".into()))
        );
        for bad in [
            "${HOST",
            "${}",
            "${1X}",
            "${A-B}",
            "${HOST:default}",
            "x${ HOST}",
        ] {
            assert!(
                matches!(expand(bad, env), Err(VarError::Malformed(_))),
                "{bad}"
            );
        }
        let msg = VarError::Unset("RABBITMQ_URL".into()).to_string();
        assert!(
            msg.contains("RABBITMQ_URL") && msg.contains("default"),
            "{msg}"
        );
    }

    #[test]
    fn names_are_letters_digits_and_underscores_not_starting_with_a_digit() {
        let any = |_: &str| Some("v".to_owned());
        for ok in ["${_}", "${_X1}", "${lower}", "${A_9}"] {
            assert_eq!(expand(ok, any).as_deref(), Ok("v"), "{ok}");
        }
        for bad in ["${9}", "${A.B}", "${-}"] {
            assert_eq!(
                expand(bad, any),
                Err(VarError::Malformed(bad.to_owned())),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_malformed_reference_is_quoted_from_its_dollar_for_forty_characters() {
        assert_eq!(
            expand("http://${HOST}/${ HOST}", env),
            Err(VarError::Malformed("${ HOST}".into()))
        );
        let long = format!("${{{}", "A".repeat(60));
        assert_eq!(
            expand(&format!("x{long}"), env),
            Err(VarError::Malformed(long.chars().take(40).collect()))
        );
        assert!(has_reference("a${B}") && has_reference("${"));
        assert!(!has_reference("$B {C}"));
    }

    #[test]
    fn errors_read_as_sentences_naming_the_variable_or_the_text() {
        assert_eq!(
            VarError::Unset("RABBITMQ_URL".into()).to_string(),
            "environment variable `RABBITMQ_URL` is not set (or is empty), and `${RABBITMQ_URL}` has no default"
        );
        assert_eq!(
            VarError::Malformed("${ HOST}".into()).to_string(),
            "`${ HOST}` is not a variable reference: write `${NAME}` or `${NAME:-default}` (NAME: letters, digits, `_`)"
        );
        assert_eq!(
            EXPANDED,
            [
                "url",
                "amqpUrl",
                "endpoint",
                "bootstrapServers",
                "emulatorHost",
                "connectUrl"
            ]
        );
    }
}
