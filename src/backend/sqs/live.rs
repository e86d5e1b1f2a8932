//! The shapes an SQS read returns, pure: a queue's attributes in the flat shape of the
//! desired door ([`live_queue`]), and the [`Inventory`] `import` groups. Below `read.rs`, so
//! the pure doors (`plan.rs`, `import.rs`) can name them without naming the reader.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::backend::wire::aws::{arn_name, arn_prefix};
use crate::resource::{Live, Props};

/// A queue's attributes (as GetQueueAttributes returns them) in the flat shape of
/// [`desired`], with the messages it holds.
pub fn live_queue(attrs: &BTreeMap<String, String>) -> Live {
    let mut props = Props::new();
    let number = |k: &str| attrs.get(k).and_then(|v| v.trim().parse::<u64>().ok());
    for k in [RETENTION, VISIBILITY] {
        if let Some(v) = attrs.get(k) {
            props.insert(
                k.to_owned(),
                number(k).map_or_else(|| json!(v), |n| json!(n)),
            );
        }
    }
    props.insert(
        FIFO.to_owned(),
        json!(
            attrs
                .get(FIFO)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        ),
    );
    let own_prefix = attrs
        .get("QueueArn")
        .map(|a| arn_prefix(a).to_owned())
        .unwrap_or_default();
    // An ARN in this queue's account and region is shown by name; any other in full.
    let short = |arn: &str| {
        if !own_prefix.is_empty() && arn_prefix(arn) == own_prefix {
            arn_name(arn).to_owned()
        } else {
            arn.to_owned()
        }
    };
    if let Some(raw) = attrs.get("RedrivePolicy").filter(|r| !r.trim().is_empty()) {
        match serde_json::from_str::<Value>(raw) {
            Ok(p) => {
                if let Some(arn) = p.get("deadLetterTargetArn").and_then(Value::as_str) {
                    props.insert(DLQ_TARGET.to_owned(), json!(short(arn)));
                }
                if let Some(n) = p.get("maxReceiveCount").and_then(as_count) {
                    props.insert(MAX_RECEIVE.to_owned(), n);
                }
            }
            Err(_) => {
                props.insert("RedrivePolicy".to_owned(), json!(raw));
            }
        }
    }
    if let Some(raw) = attrs
        .get("RedriveAllowPolicy")
        .filter(|r| !r.trim().is_empty())
    {
        match serde_json::from_str::<Value>(raw) {
            Ok(p) => {
                if let Some(perm) = p.get("redrivePermission").and_then(Value::as_str) {
                    props.insert(ALLOW_PERMISSION.to_owned(), json!(perm));
                }
                if let Some(arns) = p.get("sourceQueueArns").and_then(Value::as_array) {
                    let mut names: Vec<String> =
                        arns.iter().filter_map(Value::as_str).map(short).collect();
                    names.sort();
                    props.insert(ALLOW_SOURCES.to_owned(), json!(names));
                }
            }
            Err(_) => {
                props.insert("RedriveAllowPolicy".to_owned(), json!(raw));
            }
        }
    }
    let mut defaults = Vec::new();
    for (key, default_values) in UNOWNED_ATTRIBUTES {
        let Some(v) = attrs.get(key) else { continue };
        // An empty key id or policy is how SQS says "none".
        if matches!(key, KMS_KEY | POLICY) && v.trim().is_empty() {
            continue;
        }
        if default_values.contains(&v.as_str()) {
            defaults.push(json!(key));
        }
        let value = match key {
            MANAGED_SSE => json!(v.trim().eq_ignore_ascii_case("true")),
            // Compared as parsed JSON, statement order ignored; unparsable text stays text.
            POLICY => serde_json::from_str::<Value>(v)
                .map_or_else(|_| json!(v), crate::spec::access::normalise_policy),
            _ => v
                .trim()
                .parse::<u64>()
                .map_or_else(|_| json!(v), |n| json!(n)),
        };
        props.insert(key.to_owned(), value);
    }
    if !defaults.is_empty() {
        props.insert(DEFAULTS_KEY.to_owned(), Value::Array(defaults));
    }
    let messages = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    .iter()
    .map(|k| number(k))
    .try_fold(0u64, |acc, n| n.map(|n| acc.saturating_add(n)));
    Live { props, messages }
}

/// `maxReceiveCount` as a number, whether it was stored as `3` or `"3"`.
pub(super) fn as_count(v: &Value) -> Option<Value> {
    match v {
        Value::Number(_) => Some(v.clone()),
        Value::String(s) => s.trim().parse::<u64>().ok().map(|n| json!(n)),
        _ => None,
    }
}

/// The longest prefix shared by all names (ListQueues filters by prefix).
pub(super) fn common_prefix<'a>(names: &[&'a str]) -> &'a str {
    let Some(first) = names.first() else {
        return "";
    };
    let mut len = first.len();
    for n in &names[1..] {
        len = first
            .char_indices()
            .zip(n.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map_or(0, |((i, a), _)| i + a.len_utf8())
            .min(len);
    }
    &first[..len]
}

/// The longest queue name SQS allows (80 characters; `.fifo` included).
pub const MAX_QUEUE_NAME: usize = 80;

/// What `import` needs of one SQS target: queues with their tags, and the alarms that may
/// watch them.
#[derive(Debug, Default)]
pub struct Inventory {
    pub queues: BTreeMap<String, SeenQueue>,
    pub alarms: BTreeMap<String, SeenAlarm>,
    /// Whether this endpoint returns RedriveAllowPolicy at all (moto does not).
    pub allow_policy_readable: bool,
}

#[derive(Debug, Clone)]
pub struct SeenQueue {
    pub live: Live,
    pub tags: BTreeMap<String, String>,
    /// The raw attributes (RedrivePolicy's target ARN, QueueArn).
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct SeenAlarm {
    pub props: Props,
    pub tags: BTreeMap<String, String>,
}
