//! Azure Service Bus: a channel's queue (or topic and subscription) with its retry budget
//! (`maxDeliveryCount`), lock, time-to-live and dead-lettering on expiry, and, when
//! `deadLetter.name` names one, the queue its dead letters are forwarded to
//! (`forwardDeadLetteredMessagesTo`); otherwise the dead letters wait in the entity's built-in
//! `$DeadLetterQueue` subqueue, which needs no resource of its own.
//!
//! Management is Azure Resource Manager's REST API (`Microsoft.ServiceBus/namespaces/queues`,
//! api-version [`API_VERSION`]). The doors, each in its own file: [`desired`], [`plan`],
//! [`draw`], [`alerts`], [`import`] (pure), [`read`] (read-only: queues, the listings
//! `--prune` and import need; its review door), [`status`] (depth from ARM's counts), [`apply`] (the only
//! writer) and [`redrive`] (redrive, archive and replay through the data plane, [`data`]).
//! A channel is a queue, or a topic and one subscription of it (`azure-servicebus.subscription`),
//! which carries the settings; both are read, written, counted and redriven (docs/azure.md).
//!
//! Properties are flat and normalised as the other backends': durations as seconds (ARM
//! writes ISO 8601 durations, `PT1M`), `null` where the spec wants Service Bus's default.
//! Ownership is declared by name prefix (`ownership.prefixes`): ARM's queue, topic and
//! subscription resources are proxy resources that carry no tags (Queue.json, 2021-11-01).

pub mod alerts;
pub mod apply;
pub mod data;
pub mod desired;
pub mod draw;
pub mod import;
pub mod plan;
pub mod read;
pub mod redrive;
pub mod status;

use crate::resource::{Kind, ResourceId};
use crate::spec::model::Backend;

/// The GA api-version whose shapes this backend follows (azure-rest-api-specs,
/// `specification/servicebus/resource-manager/Microsoft.ServiceBus/stable/2021-11-01`).
pub const API_VERSION: &str = "2021-11-01";

pub const MAX_DELIVERY_COUNT: &str = "maxDeliveryCount";
pub const LOCK_DURATION: &str = "lockDuration";
pub const TIME_TO_LIVE: &str = "defaultMessageTimeToLive";
pub const DEAD_LETTERING_ON_EXPIRATION: &str = "deadLetteringOnMessageExpiration";
pub const FORWARD_DEAD_LETTERS: &str = "forwardDeadLetteredMessagesTo";

pub fn queue_id(target: &str, name: &str) -> ResourceId {
    ResourceId {
        target: target.to_owned(),
        backend: Backend::AzureServicebus,
        kind: Kind::Queue,
        scope: String::new(),
        name: name.to_owned(),
    }
}

pub fn topic_id(target: &str, name: &str) -> ResourceId {
    ResourceId {
        kind: Kind::Topic,
        ..queue_id(target, name)
    }
}

/// A subscription, named by its path (`topic/subscriptions/sub`): subscription names are
/// unique only within their topic.
pub fn subscription_id(target: &str, topic: &str, subscription: &str) -> ResourceId {
    ResourceId {
        kind: Kind::Subscription,
        ..queue_id(target, &format!("{topic}/subscriptions/{subscription}"))
    }
}

/// A subscription id's name (`topic/subscriptions/sub`) as its topic and subscription.
pub fn split_subscription(name: &str) -> (&str, &str) {
    name.split_once("/subscriptions/").unwrap_or((name, ""))
}

/// A spec duration as the seconds the properties hold (integer when whole).
pub fn secs(d: crate::spec::duration::Duration) -> serde_json::Value {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        serde_json::json!(ms / 1000)
    } else {
        serde_json::json!(ms as f64 / 1000.0)
    }
}

/// An ISO 8601 duration of days, hours, minutes and seconds (`P14D`, `PT1M30S`) as seconds
/// (integer when whole); `None` for anything else, and for TimeSpan.MaxValue
/// (`P10675199DT2H48M5.4775807S`), Service Bus's "never", which the caller reads as unset.
pub fn iso_seconds(text: &str) -> Option<f64> {
    let rest = text.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut secs = 0.0;
    if !date.is_empty() {
        secs += date.strip_suffix('D')?.parse::<u64>().ok()? as f64 * 86_400.0;
    }
    let mut number = String::new();
    for c in time.unwrap_or_default().chars() {
        match c {
            '0'..='9' | '.' => number.push(c),
            'H' | 'M' | 'S' => {
                let unit = match c {
                    'H' => 3600.0,
                    'M' => 60.0,
                    _ => 1.0,
                };
                secs += number.parse::<f64>().ok()? * unit;
                number.clear();
            }
            _ => return None,
        }
    }
    (number.is_empty() && text.len() > 1).then_some(secs)
}

/// What Service Bus writes for "no time-to-live": TimeSpan.MaxValue.
pub const NEVER: &str = "P10675199DT2H48M5.4775807S";

/// Seconds as an ISO 8601 duration (`PT90S`; Service Bus answers it normalised).
pub fn iso_text(secs: &serde_json::Value) -> Option<String> {
    let s = secs.as_f64().filter(|s| s.is_finite() && *s >= 0.0)?;
    Some(if s.fract() == 0.0 {
        format!("PT{}S", s as u64)
    } else {
        format!("PT{s}S")
    })
}

/// A queue's ARM JSON (SBQueue) as live properties: the settings dlqctl owns, durations as
/// seconds, TimeSpan.MaxValue and an empty forward as `null`; the messages it holds from
/// `countDetails` (active and dead-lettered, what a delete would drop).
pub fn live_queue(v: &serde_json::Value) -> crate::resource::Live {
    use serde_json::{Value, json};
    let p = &v["properties"];
    let mut props = crate::resource::Props::new();
    let dur = |k: &str| -> Value {
        match p.get(k).and_then(Value::as_str) {
            Some(NEVER) | None => Value::Null,
            Some(t) => iso_seconds(t).map_or_else(
                || json!(t),
                |s| {
                    if s.fract() == 0.0 {
                        json!(s as u64)
                    } else {
                        json!(s)
                    }
                },
            ),
        }
    };
    props.insert(
        MAX_DELIVERY_COUNT.to_owned(),
        p.get(MAX_DELIVERY_COUNT).cloned().unwrap_or(Value::Null),
    );
    props.insert(LOCK_DURATION.to_owned(), dur(LOCK_DURATION));
    props.insert(TIME_TO_LIVE.to_owned(), dur(TIME_TO_LIVE));
    props.insert(
        DEAD_LETTERING_ON_EXPIRATION.to_owned(),
        p.get(DEAD_LETTERING_ON_EXPIRATION)
            .cloned()
            .unwrap_or(json!(false)),
    );
    props.insert(
        FORWARD_DEAD_LETTERS.to_owned(),
        p.get(FORWARD_DEAD_LETTERS)
            .filter(|f| f.as_str().is_some_and(|s| !s.is_empty()))
            .cloned()
            .unwrap_or(Value::Null),
    );
    let count = |k: &str| p["countDetails"][k].as_u64();
    let messages = match (count("activeMessageCount"), count("deadLetterMessageCount")) {
        (Some(a), Some(d)) => Some(a + d),
        _ => None,
    };
    crate::resource::Live { props, messages }
}

/// One path segment, percent-encoded (names, the subscription id, the group).
pub use crate::backend::wire::http::seg_unreserved as seg;

/// This backend's pure doors: the dispatcher's handle on them.
#[derive(Debug, Clone, Copy)]
pub struct Azure;

#[cfg(test)]
mod tests;
