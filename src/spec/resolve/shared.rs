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
