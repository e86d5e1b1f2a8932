//! The `Channel` and `Defaults` documents: a channel's identity, its main queue or topic, its
//! retries, its dead-letter queue and its lint settings.
//!
//! `ChannelSpec` is shared by both documents (every field optional, so Defaults can fill the
//! gaps). It holds the backend blocks and alarms by type only; their fields live in the
//! sibling modules. Depends on nothing outside `spec::model` and `spec::duration`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::alarms::Alarms;
use super::api::ApiVersion;
use super::azure::AzureServicebusOptions;
use super::envelope::{ClassRule, Envelope};
use super::kafka::KafkaOptions;
use super::pubsub::PubsubOptions;
use super::rabbitmq::RabbitMqOptions;
use super::sqs::{DeadLetterSqs, SqsOptions};
use crate::spec::duration::Duration;

/// A dead-letter channel: a main queue or topic, its retries and its dead-letter queue.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "dlqctl Channel (dlqctl/v1)")]
pub struct Channel {
    pub api_version: ApiVersion,
    pub kind: ChannelKind,
    pub metadata: Metadata,
    pub spec: ChannelSpec,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ChannelKind {
    Channel,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    /// The channel id, unique per target. `{channel}` in name templates is replaced by it.
    #[schemars(
        regex(pattern = r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$"),
        length(min = 1, max = 200)
    )]
    pub name: String,
    /// Free-form labels (team, tier, ...); carried into plans, never sent to a backend.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// What the channel should look like. Unset fields come from the `Defaults` document, then
/// from the backend's defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChannelSpec {
    /// The name of a connection in the `Targets` document (e.g. `dlqctl.yaml`). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub target: Option<String>,
    /// Name of the main queue or topic, as a template: `{channel}` is the channel id.
    /// Default: `{channel}` (SQS FIFO: `{channel}.fifo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
    /// How long the main queue or topic keeps a message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetter>,
    /// An invalid-message channel beside the dead-letter queue: where a consumer puts a
    /// poison message (one that can never succeed) at once, with its error class, instead of
    /// spending the retry budget on it (docs/envelope.md). `invalid: {}` provisions it with
    /// the backend's default name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<Invalid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alarms: Option<Alarms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sqs: Option<SqsOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rabbitmq: Option<RabbitMqOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<KafkaOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pubsub: Option<PubsubOptions>,
    /// Only for channels on an Azure Service Bus target (the block is named as the backend).
    #[serde(
        default,
        rename = "azure-servicebus",
        skip_serializing_if = "Option::is_none"
    )]
    pub azure_servicebus: Option<AzureServicebusOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lint: Option<LintOptions>,
}

/// How often and how far apart a failed message is delivered again.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Retry {
    /// Deliveries before a message is dead-lettered, the first one included
    /// (`1` means no retry at all). SQS: maxReceiveCount; Pub/Sub: maxDeliveryAttempts (5–100);
    /// Azure Service Bus: maxDeliveryCount (1–2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub max_attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
    /// Name template of retry queues or topics: `{channel}`, `{delay}` (e.g. `5000`, in ms)
    /// and `{index}` (1-based) are replaced. Default per backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
}

/// Delay before retry n: the previous delay times `multiplier` (whole milliseconds, rounded
/// down, as Spring's `ExponentialBackOff` does), starting at `initial`, capped at `max`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Backoff {
    /// Pub/Sub: the subscription's retryPolicy.minimumBackoff (Pub/Sub grows the delay itself).
    pub initial: Duration,
    /// Growth factor between retries; 1 (the default) keeps the delay fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub multiplier: Option<f64>,
    /// Longest delay between two retries. Pub/Sub: retryPolicy.maximumBackoff (default 600s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Duration>,
    /// Random spread a consumer adds to each delay (not provisioned by brokers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Duration>,
}

/// The fields of `deadLetter` that describe the destination itself: a channel that shares
/// another's (`deadLetter.of`) leaves them to that channel, its owner.
pub const DEAD_LETTER_OWNER_FIELDS: [&str; 7] = [
    "name",
    "retention",
    "discard",
    "archive",
    "subscription",
    "consumerGroup",
    "sqs",
];

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeadLetter {
    /// Name template of the dead-letter queue or topic (`{channel}` is replaced).
    /// Default: SQS `{channel}-dlq`, RabbitMQ `{channel}.dlq`, Kafka: the main topic + `-dlt`,
    /// Pub/Sub `{channel}-dlq` (the dead-letter topic); Azure Service Bus: none, the entity's
    /// built-in `$DeadLetterQueue` subqueue; a name makes it a queue of its own, which the
    /// entity forwards its dead letters to (`forwardDeadLetteredMessagesTo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
    /// A dead-letter destination shared with another channel: the id of the channel (on the
    /// same target) that declares and owns it. This channel's dead letters go there (SQS:
    /// its RedrivePolicy names that channel's DLQ, which lists this queue in its
    /// RedriveAllowPolicy; RabbitMQ: its queue dead-letters to that channel's exchange; Pub/Sub:
    /// its subscription to that channel's dead-letter topic). The owner alone creates,
    /// changes and watches the destination (`name`, `retention`, `discard`, `archive`,
    /// `subscription`, `sqs` and the alarms are the owner's), and lint refuses to let it go
    /// while a channel still names it here. `status` counts its dead letters per source, and
    /// `redrive --to source` sends each back to the queue it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub of: Option<String>,
    /// How long dead letters are kept. On SQS it must exceed the main queue's retention.
    /// A retention that drops dead letters (RabbitMQ: any; Kafka: any; SQS: below 14d) is a
    /// decision: write it as `discard` instead, with its reason. Not with `discard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Duration>,
    /// Dead letters are discarded on purpose after `after`, for the written `reason`: the
    /// dead-letter queue's retention (SQS MessageRetentionPeriod, RabbitMQ `message-ttl`,
    /// Kafka `retention.ms`), shown by `plan` and `status` with its reason. Not with
    /// `retention`; a channel's own `discard` replaces a `retention` from Defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discard: Option<Discard>,
    /// Dead letters are archived before they expire: `dlqctl archive CHANNEL --due` (run on
    /// a schedule) writes every dead letter that would expire within `before` to `to`
    /// (docs/archive.md). The other answer to a retention that drops dead letters, beside
    /// `discard`. Merged from Defaults key by key, like the rest of `deadLetter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<Archive>,
    /// Where a dead letter says why it died (docs/envelope.md): a profile (`dlqctl`, the
    /// default: `dlq-error-class`, `dlq-error-message`, `dlq-source`, `dlq-attempts`,
    /// `dlq-dead-lettered-at`; `spring`; `connect`; `none`), or a mapping of each field to a
    /// header, a message property or a JSON pointer into the body, starting `from` a profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<Envelope>,
    /// The channel's error classes, from what the envelope read: rules tried in order, the
    /// first whose globs match the error class and/or message names the class; `unknown`
    /// when none does. Used by `status`, the exporter's class label (only these names and
    /// `other`), and `redrive --class`. Without rules, the class is what the envelope read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<ClassRule>>,
    /// Pub/Sub only: name template of the dead-letter topic's subscription, which holds the
    /// dead letters (a dead-letter topic without one drops them, so dlqctl always creates
    /// it; its retention is `retention` or `discard.after`). Default `{channel}-dlq-sub`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub subscription: Option<String>,
    /// Kafka only: the consumer group that works through the dead-letter topic. With it,
    /// `status` reports what waits (end offsets minus the group's committed offsets); without
    /// it, what the topic retains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub consumer_group: Option<String>,
    /// How many times `dlqctl redrive` may bring one message back (counted in its
    /// `dlq-redrive-count` header). A message at the limit is skipped and reported: one that
    /// keeps coming back is a bug, not bad luck. Default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_redrives: Option<u32>,
    /// What a copy brought back by `dlqctl redrive` (or `redrive --from-archive`) carries of
    /// the dead letter's headers (docs/redrive.md, "Headers on the copy"). Merged from
    /// Defaults key by key, like the rest of `deadLetter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redrive: Option<RedriveHeaders>,
    /// SQS only: the dead-letter queue's own encryption and access policy, where they
    /// differ from the main queue's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sqs: Option<DeadLetterSqs>,
}

/// `deadLetter.redrive`: which headers (RabbitMQ headers, Kafka record headers, SQS message
/// attributes, Pub/Sub attributes) a redriven copy leaves behind. Names are globs (`*` any
/// run of characters, `?` one, `[abc]`, `{a,b}`; `\` escapes), matched without regard to
/// case on every backend. Applied after the backend's own drops (the attempt history) and
/// dlqctl's default list of replication and tracing headers; `dlq-redrive-count` is always
/// rewritten.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RedriveHeaders {
    /// Headers the copy does not carry, besides the default list (e.g. `x-internal-*`). A
    /// channel's list replaces the one from Defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_headers: Option<Vec<String>>,
    /// Headers the copy keeps although `dropHeaders` or the default list would drop them
    /// (e.g. `traceparent`, to join the redriven work to the original trace). It cannot keep
    /// the backend's attempt history nor a stale `dlq-redrive-count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_headers: Option<Vec<String>>,
}

/// `spec.invalid`: the invalid-message queue or topic. Poison messages go there at once,
/// transient failures go to the dead-letter queue after their retries.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Invalid {
    /// Name template of the invalid-message queue or topic (`{channel}` is replaced).
    /// Default: SQS `{channel}-invalid` (FIFO: `{channel}-invalid.fifo`), RabbitMQ
    /// `{channel}.invalid`, Kafka: the main topic + `-invalid-dlt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
    /// How long invalid messages are kept (the rules of `deadLetter.retention`). Not with
    /// `discard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Duration>,
    /// Invalid messages are discarded on purpose after `after`, for the written `reason`
    /// (as `deadLetter.discard`). Not with `retention`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discard: Option<Discard>,
    /// Alarms on the invalid-message queue, usually for the producing team rather than
    /// on-call (its own `actions`). SQS: CloudWatch alarms `{invalid}-depth` and
    /// `{invalid}-oldest-age`. Not yet on RabbitMQ and Kafka (lint says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alarms: Option<Alarms>,
}

/// `deadLetter.discard`: a written decision to drop dead letters after a while.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Discard {
    /// How long a dead letter is kept before it is discarded: the dead-letter queue's
    /// retention. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Duration>,
    /// Why discarding is fine, for the people who will wonder where a message went (e.g.
    /// `quotes expire after 24h; a late one is worthless`). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub reason: Option<String>,
    /// Who decided (a team or person), for whoever wants to question the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub owner: Option<String>,
}

/// `deadLetter.archive`: dead letters archived before the retention drops them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Archive {
    /// Where `dlqctl archive --due` writes: a directory or `s3://bucket/prefix` (what
    /// `--to` takes; `--to` on the command line wins). A relative directory is relative to
    /// the folder of the file that wrote it (the channel's, or the Defaults document's).
    /// Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub to: Option<String>,
    /// How long before its expiry a dead letter is due: `--due` archives every dead letter
    /// older than the dead-letter queue's retention minus `before`, its age counted from
    /// where the backend's retention counts (SQS standard queues: the original enqueue).
    /// Longer than the time between two scheduled runs, or a message can expire between
    /// them: `2d` for a daily run. Less than the retention. Default `2d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Duration>,
}

/// Per-channel lint settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LintOptions {
    /// Warning rule ids to silence for this channel (e.g. `alarms/missing`). Errors cannot be
    /// silenced.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// Settings shared by every channel (channel values win).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "dlqctl Defaults (dlqctl/v1)")]
pub struct Defaults {
    pub api_version: ApiVersion,
    pub kind: DefaultsKind,
    pub spec: ChannelSpec,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DefaultsKind {
    Defaults,
}
