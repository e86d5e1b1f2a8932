//! Shared dead-letter destinations (`deadLetter.of`): one channel owns a DLQ, dead-letter
//! exchange or dead-letter topic, and other channels of the same target dead-letter into it.
//!
//! Resolution is per channel, so a channel that names an owner resolves with a placeholder
//! destination; [`link`] then gives it the owner's (name, retention, discard, archive, and the
//! backend's dead-letter settings) and tells the owner which main queues send to it, for the
//! permission lists (SQS RedriveAllowPolicy) and the per-source views. Lint reports a
//! reference that names no owner (`deadletter/shared-owner`); here it is left unlinked.

use std::collections::BTreeMap;

use super::channel::{AlarmsResolved, Resolved};

/// Links every channel with `dead_letter_of` to its owner among `channels` (same target;
/// an owner that itself names another owner is no owner). Idempotent.
pub fn link(channels: &mut [Resolved]) {
    let owners: BTreeMap<(String, String), usize> = channels
        .iter()
        .enumerate()
        .filter(|(_, r)| r.dead_letter_of.is_none())
        .map(|(i, r)| ((r.target.clone(), r.channel.clone()), i))
        .collect();
    let mut sources: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for i in 0..channels.len() {
        let Some(of) = channels[i].dead_letter_of.clone() else {
            continue;
        };
        let Some(&o) = owners.get(&(channels[i].target.clone(), of)) else {
            continue;
        };
        let owner = channels[o].clone();
        let r = &mut channels[i];
        r.dead_letter.clone_from(&owner.dead_letter);
        r.dead_letter_retention = owner.dead_letter_retention;
        r.discard.clone_from(&owner.discard);
        r.archive.clone_from(&owner.archive);
        r.dead_letter_group.clone_from(&owner.dead_letter_group);
        // The owner watches the destination; its alarms are not raised twice.
        r.alarms = AlarmsResolved::default();
        if let (Some(mine), Some(theirs)) = (r.sqs.as_mut(), owner.sqs.as_ref()) {
            mine.dead_letter_encryption
                .clone_from(&theirs.dead_letter_encryption);
            mine.dead_letter_policy
                .clone_from(&theirs.dead_letter_policy);
        }
        if let (Some(mine), Some(theirs)) = (r.rabbitmq.as_mut(), owner.rabbitmq.as_ref()) {
            super::rabbitmq::share_from(mine, theirs);
        }
        if let (Some(mine), Some(theirs)) = (r.pubsub.as_mut(), owner.pubsub.as_ref()) {
            mine.dead_letter_subscription
                .clone_from(&theirs.dead_letter_subscription);
        }
        sources.entry(o).or_default().push(r.main.clone());
    }
    // Every member of a group learns the other members' main queues.
    for (o, mut mains) in sources {
        mains.push(channels[o].main.clone());
        mains.sort();
        mains.dedup();
        let (target, owner) = (channels[o].target.clone(), channels[o].channel.clone());
        for r in channels.iter_mut().filter(|r| {
            r.target == target
                && (r.channel == owner || r.dead_letter_of.as_deref() == Some(owner.as_str()))
        }) {
            r.dead_letter_sources = mains.iter().filter(|m| **m != r.main).cloned().collect();
        }
    }
}

impl Resolved {
    /// Whether the channel's dead-letter destination is shared: it names an owner, or other
    /// channels name it as theirs.
    pub fn shares_dead_letter(&self) -> bool {
        self.dead_letter_of.is_some() || !self.dead_letter_sources.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::load::load_str;
    use crate::spec::rules;

    const TARGETS: &str =
        "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  s: {backend: sqs, region: us-east-1}\n";

    fn channel(name: &str, dead_letter: &str) -> String {
        format!(
            "---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {name}}}\nspec:\n  target: s\n  retry: {{maxAttempts: 3}}\n  deadLetter: {dead_letter}\n"
        )
    }

    /// A sharer takes its owner's DLQ (name, retention) and none of its alarms; every member
    /// of the group knows the others' main queues; the SQS owner lists them all as sources.
    #[test]
    fn sharers_get_the_owners_destination_and_the_owner_its_sources() {
        let text = format!(
            "{TARGETS}{}{}{}",
            channel(
                "a",
                "{name: shared, retention: 10d}\n  alarms: {depth: {above: 0}}"
            ),
            channel("b", "{of: a}"),
            channel("c", "{of: a}"),
        );
        let ws = load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let (diags, checked) = rules::check(&ws);
        assert!(
            diags
                .iter()
                .all(|d| d.severity != crate::diag::Severity::Error),
            "{diags:?}"
        );
        let r: Vec<_> = checked.into_iter().map(|c| c.resolved).collect();
        assert_eq!(r[1].dead_letter, "shared");
        assert_eq!(r[1].dead_letter_retention, r[0].dead_letter_retention);
        assert!(r[1].alarms.depth.is_none(), "the owner watches it");
        assert_eq!(r[0].dead_letter_sources, ["b", "c"]);
        assert_eq!(r[1].dead_letter_sources, ["a", "c"]);
        assert!(r.iter().all(|x| x.shares_dead_letter()));
        let owner = crate::backend::desired(&r[0]);
        let dlq = owner
            .iter()
            .find(|d| d.role == crate::resource::Role::DeadLetter)
            .expect("the owner declares the DLQ");
        assert_eq!(
            dlq.props.get("RedriveAllowPolicy.sourceQueues"),
            Some(&serde_json::json!(["a", "b", "c"]))
        );
        let sharer = crate::backend::desired(&r[1]);
        assert!(
            sharer.iter().all(|d| d.role == crate::resource::Role::Main),
            "a sharer provisions its main queue only: {sharer:?}"
        );
    }

    /// `of` naming no channel, or a sharer, is refused; so is a sharer describing the DLQ.
    #[test]
    fn a_reference_without_an_owner_or_with_the_owners_fields_is_refused() {
        let rules_of = |text: String| {
            let ws = load_str("c.yaml", &text);
            rules::check(&ws)
                .0
                .iter()
                .filter(|d| d.severity == crate::diag::Severity::Error)
                .map(|d| d.rule)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            rules_of(format!("{TARGETS}{}", channel("b", "{of: a}"))),
            ["deadletter/shared-owner"]
        );
        assert_eq!(
            rules_of(format!(
                "{TARGETS}{}{}{}",
                channel("a", "{name: shared}"),
                channel("b", "{of: a}"),
                channel("c", "{of: b}")
            )),
            ["deadletter/shared-owner"]
        );
        assert_eq!(
            rules_of(format!(
                "{TARGETS}{}{}",
                channel("a", "{name: shared}"),
                channel("b", "{of: a, name: other}")
            )),
            ["deadletter/shared-field"]
        );
    }
}
