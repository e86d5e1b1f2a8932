//! What every file of `resolve` shares: why a channel could not be resolved, the retry stage
//! a name resolves to, and the `{channel}`/`{delay}`/`{index}` name templates.
//!
//! Below the per-backend files and the generic `channel`, so that none of them imports the
//! other for these.

use crate::spec::duration::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct RetryStage {
    pub name: String,
    pub delay: Duration,
}

/// Why a channel could not be resolved; each names the JSON pointer of the field at fault.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolveError {
    pub pointer: &'static str,
    pub rule: &'static str,
    pub message: String,
    pub hint: Option<String>,
}

/// Expands `{channel}`, `{delay}` and `{index}` in a name template.
pub fn expand(
    template: &str,
    channel: &str,
    delay: Option<Duration>,
    index: Option<usize>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + channel.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(format!("`{template}` has an unclosed `{{`"));
        };
        match &after[..close] {
            "channel" => out.push_str(channel),
            "delay" => match delay {
                Some(d) => out.push_str(&d.as_millis().to_string()),
                None => {
                    return Err(format!(
                        "`{template}`: `{{delay}}` is only valid in retry names"
                    ));
                }
            },
            "index" => match index {
                Some(i) => out.push_str(&i.to_string()),
                None => {
                    return Err(format!(
                        "`{template}`: `{{index}}` is only valid in retry names"
                    ));
                }
            },
            other => {
                return Err(format!(
                    "`{template}` uses `{{{other}}}`; templates know `{{channel}}`, `{{delay}}` and `{{index}}`"
                ));
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A name template that does not expand (`name/template`), at `pointer`.
pub(super) fn template_error(pointer: &'static str, message: String) -> ResolveError {
    ResolveError {
        pointer,
        rule: "name/template",
        message,
        hint: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand_known_placeholders_only() {
        assert_eq!(
            expand("{channel}.dlq", "orders", None, None).unwrap(),
            "orders.dlq"
        );
        assert_eq!(
            expand(
                "{channel}-retry-{delay}",
                "o",
                Some(Duration::from_secs(2)),
                None
            )
            .unwrap(),
            "o-retry-2000"
        );
        assert!(expand("{chanel}.dlq", "o", None, None).is_err());
        assert!(expand("{channel", "o", None, None).is_err());
        assert!(expand("{delay}", "o", None, None).is_err());
    }
}

/// What a destination of a channel's dead letters is: the dead-letter queue the broker (or the
/// retry loop) moves exhausted messages to, the invalid-message queue the consumer sends
/// poison to at once (`spec.invalid`), or one of Spring's exception-based dead-letter topics
/// (`kafka.exceptionBasedDlts`). `status`, the exporter, `alerts` and `redrive` label each
/// destination with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeadLetterRole {
    #[default]
    DeadLetter,
    Invalid,
    Exception,
}

impl DeadLetterRole {
    /// The label: `dead-letter`, `invalid`, `exception` (status JSON `role`, the exporter's
    /// `role` label, `redrive --from`).
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterRole::DeadLetter => "dead-letter",
            DeadLetterRole::Invalid => "invalid",
            DeadLetterRole::Exception => "exception",
        }
    }

    /// For people: `DLQ`, `invalid queue`, `exception DLT`.
    pub fn shown(self) -> &'static str {
        match self {
            DeadLetterRole::DeadLetter => "DLQ",
            DeadLetterRole::Invalid => "invalid",
            DeadLetterRole::Exception => "exception DLT",
        }
    }
}

impl std::fmt::Display for DeadLetterRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
