//! Ownership by tag or label: what SQS (tags) and Pub/Sub (labels) write on everything they
//! create, and the rules that read it back. A live object is provably a channel's only when
//! it carries `managed-by: dlqctl` and `dlqctl-channel: <channel>`; `--adopt` may take over
//! only what no tool claims yet. The problems are said with the word "tag"; a backend whose
//! word is another says it with its own (Pub/Sub: "label").

use std::collections::BTreeMap;

/// The key naming the tool that manages an object.
pub const MANAGED_BY: &str = "managed-by";
/// dlqctl's value of [`MANAGED_BY`].
pub const MANAGED_BY_VALUE: &str = "dlqctl";
/// The key naming the channel an object belongs to.
pub const CHANNEL: &str = "dlqctl-channel";

/// Why a live object is not provably this channel's, from its tags (`None`: it is).
pub fn ownership_problem(tags: &BTreeMap<String, String>, channel: &str) -> Option<String> {
    match tags.get(MANAGED_BY).map(String::as_str) {
        Some(MANAGED_BY_VALUE) => {}
        None => {
            return Some(format!(
                "exists but is not tagged `{MANAGED_BY}: {MANAGED_BY_VALUE}`, so dlqctl did not create it and will not change it; adopt it with `dlqctl plan --adopt` / `dlqctl apply --adopt` (only the two tags are added; `dlqctl import` writes a spec from it), or delete or rename it"
            ));
        }
        Some(other) => {
            return Some(format!(
                "is tagged `{MANAGED_BY}: {other}`: another tool manages it, and dlqctl will not change or adopt it"
            ));
        }
    }
    match tags.get(CHANNEL) {
        Some(c) if c == channel => None,
        Some(other) => Some(format!(
            "belongs to dlqctl channel `{other}` (tag `{CHANNEL}`), not `{channel}`; two channels cannot share it"
        )),
        None => Some(format!(
            "has no `{CHANNEL}` tag, so it cannot be tied to channel `{channel}`"
        )),
    }
}

/// Whether `--adopt` may take over a live object with these tags: nothing claims it yet
/// (no `managed-by` tag). Objects another tool manages are never adopted.
pub fn adoptable(tags: &BTreeMap<String, String>) -> bool {
    !tags.contains_key(MANAGED_BY)
}

/// Whether a name is inside the target's ownership prefixes (no prefixes: every name).
pub fn in_prefixes(prefixes: &[String], name: &str) -> bool {
    prefixes.is_empty() || prefixes.iter().any(|p| name.starts_with(p.as_str()))
}
