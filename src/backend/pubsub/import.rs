//! Pub/Sub import (pure over what `read` listed): every subscription with a dead-letter policy
//! becomes a channel: its topic is the main topic, the policy's topic the dead-letter topic,
//! and a subscription of that topic the dead-letter subscription. The channel id is the main
//! topic's name; the names that are not the defaults become templates.
//!
//! A subscription reading another project's topic, or dead-lettering into one, fits no
//! channel (a channel lives in its target's project).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::*;
use crate::backend::kit::import::{
    self as import_kit, Candidate, channel, non_default, sanitise_channel_id, template,
    valid_channel_id,
};
use crate::resource::Role;
use crate::spec::duration::Duration;
use crate::spec::model::{Backoff, ChannelSpec, DeadLetter, PubsubOptions, Retry, Target};
use crate::spec::resolve::{
    PUBSUB_DEFAULT_ACK_DEADLINE, PUBSUB_DEFAULT_MAX_BACKOFF, PUBSUB_DEFAULT_RETENTION,
};

/// The channel and role each live object would have if it were imported (`plan --prune`).
pub fn labels_of(
    live: &BTreeMap<ResourceId, Live>,
    target_name: &str,
    target: &Target,
) -> BTreeMap<ResourceId, (String, Role)> {
    import_kit::labels(
        group(live, target_name, target).0,
        target_name,
        target,
        super::desired::desired,
    )
}

/// A duration property (seconds) as a spec duration.
fn duration(l: &Live, key: &str) -> Option<Duration> {
    let s = l.props.get(key).and_then(Value::as_f64)?;
    Some(Duration::from_millis((s * 1000.0).round() as u64))
}

/// Groups topics and subscriptions into channels; returns them and what fits no channel.
pub fn group(
    live: &BTreeMap<ResourceId, Live>,
    target_name: &str,
    _target: &Target,
) -> (Vec<Candidate>, Vec<String>) {
    let subs: Vec<(&ResourceId, &Live)> = live
        .iter()
        .filter(|(i, _)| i.kind == Kind::Subscription)
        .collect();
    let topic_of = |l: &Live| {
        l.props
            .get(TOPIC)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let mut claimed: BTreeSet<ResourceId> = BTreeSet::new();
    let mut ids: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    let mut unmatched = Vec::new();
    for (sid, sl) in &subs {
        let Some(dlt) = sl.props.get(DEAD_LETTER_TOPIC).and_then(Value::as_str) else {
            continue;
        };
        let Some(main) = topic_of(sl) else { continue };
        if main.contains('/') || dlt.contains('/') {
            unmatched.push(format!(
                "{sid}: fits no channel: its topic {main} or dead-letter topic {dlt} is in another project"
            ));
            claimed.insert((*sid).clone());
            continue;
        }
        // The dead-letter subscription: the default name if it exists, else the first by name.
        let dlt_subs: Vec<&ResourceId> = subs
            .iter()
            .filter(|(_, l)| topic_of(l).as_deref() == Some(dlt))
            .map(|(i, _)| *i)
            .collect();
        let mut id = if valid_channel_id(&main) {
            main.clone()
        } else {
            sanitise_channel_id(&main)
        };
        if !ids.insert(id.clone()) {
            // A second consumer of the same topic: its own channel, named after it.
            id = sanitise_channel_id(&sid.name);
            ids.insert(id.clone());
        }
        let dlt_sub = dlt_subs
            .iter()
            .find(|i| i.name == format!("{id}-dlq-sub"))
            .or_else(|| dlt_subs.first())
            .copied();
        let mut findings = Vec::new();
        let main_id = topic_id(target_name, &main);
        let dlt_id = topic_id(target_name, dlt);
        for t in [&main_id, &dlt_id] {
            if !live.contains_key(t) {
                findings.push(format!("{t}: not found (outside the ownership prefixes or the --prefix filter?): the plan would create it"));
            }
        }
        if dlt_sub.is_none() {
            findings.push(format!(
                "{dlt_id}: no subscription reads it, so every dead letter is dropped; the plan creates `{id}-dlq-sub`"
            ));
        }
        let tpl =
            |name: &str, default: &str| template(name, &id).and_then(|t| non_default(t, default));
        let dl_live = dlt_sub.and_then(|i| live.get(i));
        let keep = import_kit::dead_letter_keep(
            crate::spec::model::Backend::Pubsub,
            dl_live
                .and_then(|l| duration(l, RETENTION))
                .filter(|d| *d != PUBSUB_DEFAULT_RETENTION),
        );
        let backoff = duration(sl, MIN_BACKOFF).map(|initial| Backoff {
            initial,
            multiplier: None,
            max: duration(sl, MAX_BACKOFF).filter(|m| *m != PUBSUB_DEFAULT_MAX_BACKOFF),
            jitter: None,
        });
        let ack = duration(sl, ACK_DEADLINE).map(|d| Duration::from_millis(d.as_millis()));
        // The subscriptions' expiration policy, kept as found (`pubsub.expireAfter`; lint
        // warns): the consumer's sets it, and a dead-letter subscription that differs is said.
        let expire_after = duration(sl, EXPIRY);
        if let Some((i, l)) = dlt_sub.and_then(|i| Some((i, live.get(i)?)))
            && duration(l, EXPIRY) != expire_after
        {
            findings.push(format!(
                "{i}: its expiration policy ({}) differs from the consumer's subscription's ({}); a spec gives both one `pubsub.expireAfter`: a plan shows the difference",
                l.props.get(EXPIRY).map_or_else(String::new, Value::to_string),
                sl.props.get(EXPIRY).map_or_else(String::new, Value::to_string)
            ));
        }
        if let Some(l) = dl_live
            && duration(l, ACK_DEADLINE).is_some_and(|d| d != PUBSUB_DEFAULT_ACK_DEADLINE)
        {
            findings.push(format!(
                "{}: its ack deadline becomes Pub/Sub's default 10s (dlqctl owns it)",
                dlt_sub.map_or_else(String::new, ToString::to_string)
            ));
        }
        let spec = ChannelSpec {
            target: Some(target_name.to_owned()),
            name: (id != main).then(|| main.clone()),
            retention: duration(sl, RETENTION).filter(|d| *d != PUBSUB_DEFAULT_RETENTION),
            retry: Some(Retry {
                max_attempts: sl
                    .props
                    .get(MAX_ATTEMPTS)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .or(Some(5)),
                backoff,
                name: None,
            }),
            dead_letter: Some(DeadLetter {
                of: None,
                name: tpl(dlt, "{channel}-dlq"),
                subscription: dlt_sub.and_then(|i| tpl(&i.name, "{channel}-dlq-sub")),
                retention: keep.0,
                discard: keep.1,
                ..DeadLetter::default()
            }),
            pubsub: Some(PubsubOptions {
                subscription: tpl(&sid.name, "{channel}-sub"),
                ack_deadline: ack.filter(|d| *d != PUBSUB_DEFAULT_ACK_DEADLINE),
                expire_after,
            }),
            ..ChannelSpec::default()
        };
        let members: BTreeMap<ResourceId, Live> =
            [Some(&main_id), Some(&dlt_id), Some(*sid), dlt_sub]
                .into_iter()
                .flatten()
                .filter_map(|i| Some((i.clone(), live.get(i)?.clone())))
                .collect();
        let to_adopt: Vec<ResourceId> = members
            .iter()
            .filter(|(_, l)| {
                let lb = labels(l);
                ownership_problem(&lb, &id).is_some()
                    && crate::backend::kit::ownership::adoptable(&lb)
            })
            .map(|(i, _)| i.clone())
            .collect();
        claimed.extend(members.keys().cloned());
        out.push(Candidate {
            channel: channel(&id, spec),
            live: members,
            findings,
            to_adopt,
            unreadable: Vec::new(),
        });
    }
    for id in live.keys() {
        if !claimed.contains(id) {
            let why = match id.kind {
                Kind::Subscription => {
                    "it has no dead-letter policy and is no channel's dead-letter subscription"
                }
                _ => "no subscription with a dead-letter policy reads it or dead-letters into it",
            };
            unmatched.push(format!("{id}: fits no channel: {why}"));
        }
    }
    (out, unmatched)
}
