//! Azure Service Bus import (pure over what `read` listed): every queue inside the ownership
//! prefixes that is no other entity's forward target becomes a channel, named after it, and
//! so does every subscription of an owned topic (the topic's name, or `topic-subscription`
//! when the topic has several; `azure-servicebus.subscription` names it); its
//! maxDeliveryCount is the retry budget, its time-to-live the retention; a queue it forwards
//! its dead letters to becomes `deadLetter.name`, with that queue's time-to-live as the
//! dead-letter retention (a decision to discard, which only a person can give a reason for).
//! Settings at Service Bus's or dlqctl's defaults are left out of the spec.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::*;
use crate::backend::kit::import::{
    self as import_kit, Candidate, channel, sanitise_channel_id, template, valid_channel_id,
};
use crate::resource::Live;
use crate::spec::duration::Duration;
use crate::spec::model::{AzureServicebusOptions, ChannelSpec, DeadLetter, Retry};
use crate::spec::resolve::AZURE_DEFAULT_LOCK_DURATION;

/// A duration property (seconds) as a spec duration.
fn duration(l: &Live, key: &str) -> Option<Duration> {
    let s = l.props.get(key).and_then(Value::as_f64)?;
    Some(Duration::from_millis((s * 1000.0).round() as u64))
}

/// Groups queues into channels; returns them and what fits no channel.
pub fn group(
    live: &BTreeMap<ResourceId, Live>,
    target_name: &str,
) -> (Vec<Candidate>, Vec<String>) {
    let forward_of = |l: &Live| {
        l.props
            .get(FORWARD_DEAD_LETTERS)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let targets: BTreeSet<String> = live.values().filter_map(forward_of).collect();
    let mut out = Vec::new();
    let mut unmatched = Vec::new();
    let subscriptions_of = |topic: &str| {
        live.keys()
            .filter(|k| k.kind == Kind::Subscription && split_subscription(&k.name).0 == topic)
            .count()
    };
    for (qid, ql) in live {
        // The entity that carries the settings: a queue (the channel's name), or a topic's
        // subscription (the topic's name when it is the topic's only one, else
        // `topic-subscription`).
        let (main, subscription) = match qid.kind {
            Kind::Queue if !targets.contains(&qid.name) => (qid.name.clone(), None),
            Kind::Subscription => {
                let (t, s) = split_subscription(&qid.name);
                (t.to_owned(), Some(s.to_owned()))
            }
            _ => continue,
        };
        let wanted = match &subscription {
            Some(s) if subscriptions_of(&main) > 1 => format!("{main}-{s}"),
            _ => main.clone(),
        };
        let id = if valid_channel_id(&wanted) {
            wanted
        } else {
            sanitise_channel_id(&wanted)
        };
        let mut findings = Vec::new();
        let mut members = BTreeMap::from([(qid.clone(), ql.clone())]);
        if subscription.is_some() {
            let tid = topic_id(target_name, &main);
            if let Some(l) = live.get(&tid) {
                members.insert(tid, l.clone());
            }
        }
        let forward = forward_of(ql);
        let forward_live = forward.as_ref().and_then(|f| {
            let fid = queue_id(target_name, f);
            let l = live.get(&fid).cloned();
            match &l {
                Some(l) => {
                    members.insert(fid, l.clone());
                }
                None => findings.push(format!(
                    "{qid}: it forwards dead letters to `{f}`, which was not found (outside the ownership prefixes or the --prefix filter?): the plan would create it"
                )),
            }
            l
        });
        let keep = import_kit::dead_letter_keep(
            crate::spec::model::Backend::AzureServicebus,
            forward_live
                .as_ref()
                .and_then(|l| duration(l, TIME_TO_LIVE)),
        );
        let lock = duration(ql, LOCK_DURATION).filter(|d| *d != AZURE_DEFAULT_LOCK_DURATION);
        let expiry = ql
            .props
            .get(DEAD_LETTERING_ON_EXPIRATION)
            .and_then(Value::as_bool)
            .filter(|on| !on);
        let block = (lock.is_some() || expiry.is_some() || subscription.is_some()).then_some(
            AzureServicebusOptions {
                lock_duration: lock,
                dead_lettering_on_message_expiration: expiry,
                subscription: subscription
                    .as_deref()
                    .map(|s| template(s, &id).unwrap_or_else(|| s.to_owned())),
            },
        );
        let spec = ChannelSpec {
            target: Some(target_name.to_owned()),
            name: (id != main).then(|| main.clone()),
            retention: duration(ql, TIME_TO_LIVE),
            retry: Some(Retry {
                max_attempts: ql
                    .props
                    .get(MAX_DELIVERY_COUNT)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .or(Some(10)),
                backoff: None,
                name: None,
            }),
            dead_letter: forward.as_ref().map(|f| DeadLetter {
                name: template(f, &id),
                retention: keep.0,
                discard: keep.1,
                ..DeadLetter::default()
            }),
            azure_servicebus: block,
            ..ChannelSpec::default()
        };
        out.push(Candidate {
            channel: channel(&id, spec),
            live: members,
            findings,
            to_adopt: Vec::new(),
            unreadable: Vec::new(),
        });
    }
    for id in live.keys() {
        if id.kind == Kind::Topic && subscriptions_of(&id.name) == 0 {
            unmatched.push(format!(
                "{id}: fits no channel: a topic without a subscription holds no dead letters"
            ));
        }
    }
    (out, unmatched)
}
