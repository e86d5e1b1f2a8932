//! `spec.rabbitmq`: the settings that apply only to channels on a RabbitMQ target (queue
//! type, how dead-lettering is configured, the retry model, an exchange binding).
//!
//! Depends on nothing else in the crate.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// RabbitMQ settings; only for channels whose target is a RabbitMQ target.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RabbitMqOptions {
    /// Virtual host. Default: the target's vhost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub vhost: Option<String>,
    /// Default `classic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_type: Option<QueueType>,
    /// How dead-lettering and TTLs are set: `policy` (mutable, updated in place; the default)
    /// or `arguments` (queue x-arguments, immutable: a change replaces the queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlx: Option<DlxMode>,
    /// Arguments mode only: `true` makes the main queue dead-letter into its first retry
    /// queue (`x-dead-letter-exchange: ""`, `x-dead-letter-routing-key: <first retry queue>`),
    /// as policy mode always does, so the broker drives the TTL loop: a reject goes round it,
    /// and the consumer publishes to the DLQ after the last attempt. Default `false`: the main
    /// queue stays plain and the consumer publishes to the retry queues itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reject_to_retry: Option<bool>,
    /// `ttl` (default): retry queues whose TTL dead-letters back to the main queue.
    /// `deliveryLimit` (quorum queues): the broker requeues and dead-letters after the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_model: Option<RetryModel>,
    /// `deliveryLimit` only: how the quorum main queue dead-letters. `atLeastOnce` (default):
    /// `dead-letter-strategy: at-least-once` with `overflow: reject-publish`, so the broker
    /// keeps a dead letter until the DLQ has confirmed it. `atMostOnce`: neither is set
    /// (RabbitMQ's default, what hand-declared quorum queues usually have): a dead letter the
    /// DLQ cannot take is lost (lint `rabbitmq/at-most-once`, a warning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_strategy: Option<DeadLetterStrategy>,
    /// An exchange that routes into the main queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<ExchangeBinding>,
    /// A named exchange the main queue dead-letters through into the DLQ, instead of the
    /// default exchange: the exchange, the DLQ's binding to it with `routingKey`, and the main
    /// queue's `dead-letter-exchange` / `dead-letter-routing-key` (whenever its dead letters
    /// go to the DLQ: a delivery limit, no retry queue, or arguments mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_exchange: Option<DeadLetterExchange>,
    /// Priority of the policies dlqctl writes (policy mode). Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub policy_priority: Option<i32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum QueueType {
    Classic,
    Quorum,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DlxMode {
    Policy,
    Arguments,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DeadLetterStrategy {
    AtLeastOnce,
    AtMostOnce,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RetryModel {
    Ttl,
    DeliveryLimit,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExchangeBinding {
    /// Exchange name (template: `{channel}` is replaced).
    #[schemars(length(min = 1))]
    pub name: String,
    /// Default `direct`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<ExchangeKind>,
    /// Binding keys from the exchange to the main queue. Default: the main queue's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_keys: Option<Vec<String>>,
}

/// `rabbitmq.deadLetterExchange`: the exchange dead letters go through, and the key they carry.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeadLetterExchange {
    /// Exchange name (template: `{channel}` is replaced). `""` is RabbitMQ's default
    /// exchange, which routes a dead letter to the queue named by its routing key (the DLQ):
    /// nothing is declared or bound for it.
    pub name: String,
    /// Default `direct`. `headers` ignores routing keys and is refused by lint.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<ExchangeKind>,
    /// The dead-letter routing key, and the key the DLQ is bound with (template: `{channel}`
    /// is replaced). Default: the DLQ's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    /// `true`: the main queue sets no dead-letter routing key, so a dead letter keeps the
    /// routing key it was published with (a fanout exchange ignores it; a direct or topic one
    /// routes by it). Not with `routingKey`, nor with the default exchange.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_routing_key: Option<bool>,
    /// The key the DLQ is bound to the exchange with (template: `{channel}` is replaced).
    /// Default: the dead-letter routing key; with `keepRoutingKey`, the main queue's name
    /// (the key a message published through the default exchange carries; `""` for fanout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding_key: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ExchangeKind {
    Direct,
    Topic,
    Fanout,
    Headers,
}
