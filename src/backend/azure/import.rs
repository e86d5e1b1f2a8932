//! Azure Service Bus import (pure over what `read` listed): every queue inside the ownership
//! prefixes that is no other queue's forward target becomes a channel, named after it; its
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
    for (qid, ql) in live {
        if qid.kind != Kind::Queue || targets.contains(&qid.name) {
            continue;
        }
        let id = if valid_channel_id(&qid.name) {
            qid.name.clone()
        } else {
            sanitise_channel_id(&qid.name)
        };
        let mut findings = Vec::new();
        let mut members = BTreeMap::from([(qid.clone(), ql.clone())]);
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
        let block = (lock.is_some() || expiry.is_some()).then_some(AzureServicebusOptions {
            lock_duration: lock,
            dead_lettering_on_message_expiration: expiry,
            subscription: None,
        });
        let spec = ChannelSpec {
            target: Some(target_name.to_owned()),
            name: (id != qid.name).then(|| qid.name.clone()),
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
        if id.kind != Kind::Queue {
            unmatched.push(format!("{id}: fits no channel: only queues are imported"));
        }
    }
    (out, unmatched)
}
