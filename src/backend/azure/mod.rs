//! Azure Service Bus: a channel's queue (or topic and subscription) with its retry budget
//! (`maxDeliveryCount`), lock, time-to-live and dead-lettering on expiry, and, when
//! `deadLetter.name` names one, the queue its dead letters are forwarded to
//! (`forwardDeadLetteredMessagesTo`); otherwise the dead letters wait in the entity's built-in
//! `$DeadLetterQueue` subqueue, which needs no resource of its own.
//!
//! Management is Azure Resource Manager's REST API (`Microsoft.ServiceBus/namespaces/queues`,
//! `/topics`, `/topics/{t}/subscriptions`, api-version [`API_VERSION`]); operations would use
//! the namespace's data-plane REST API. This version has the pure doors only ([`desired`],
//! [`plan`], [`draw`], [`alerts`]): lint, `plan --offline`-like rendering through the graph,
//! and `dlqctl graph` handle Service Bus channels, while reading and writing a namespace is
//! refused by the dispatcher with a message that says so (docs/azure.md).
//!
//! Properties are flat and normalised as the other backends': durations as seconds (ARM
//! writes ISO 8601 durations, `PT1M`), `null` where the spec wants Service Bus's default.
//! Ownership is declared by name prefix (`ownership.prefixes`): ARM's queue, topic and
//! subscription resources are proxy resources that carry no tags (Queue.json, 2021-11-01).

pub mod alerts;
pub mod desired;
pub mod draw;
pub mod plan;

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

/// A spec duration as the seconds the properties hold (integer when whole).
pub fn secs(d: crate::spec::duration::Duration) -> serde_json::Value {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        serde_json::json!(ms / 1000)
    } else {
        serde_json::json!(ms as f64 / 1000.0)
    }
}

/// This backend's pure doors: the dispatcher's handle on them.
#[derive(Debug, Clone, Copy)]
pub struct Azure;

#[cfg(test)]
mod tests;
