//! The spec as Rust types: the single source of the JSON schemas in `schemas/` and of the
//! typed values the rules and the planner read.
//!
//! Doc comments here become schema descriptions, which editors show as hover help, so they
//! are written for the person editing a spec. Every field of a channel's `spec` is optional at
//! this layer so that a `Defaults` document can share the same shape; what must be present
//! after defaults are applied is checked by the rules (`spec::rules`), with a position.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::Duration;

/// The only `apiVersion` this release reads.
pub const API_VERSION: &str = "dlqctl/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ApiVersion {
    #[serde(rename = "dlqctl/v1")]
    V1,
}

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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alarms: Option<Alarms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sqs: Option<SqsOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rabbitmq: Option<RabbitMqOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<KafkaOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lint: Option<LintOptions>,
}

/// How often and how far apart a failed message is delivered again.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Retry {
    /// Deliveries before a message is dead-lettered, the first one included
    /// (`1` means no retry at all). SQS: maxReceiveCount.
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
    pub initial: Duration,
    /// Growth factor between retries; 1 (the default) keeps the delay fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub multiplier: Option<f64>,
    /// Longest delay between two retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Duration>,
    /// Random spread a consumer adds to each delay (not provisioned by brokers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Duration>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeadLetter {
    /// Name template of the dead-letter queue or topic (`{channel}` is replaced).
    /// Default: SQS `{channel}-dlq`, RabbitMQ `{channel}.dlq`, Kafka: the main topic + `-dlt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
    /// How long dead letters are kept. On SQS it must exceed the main queue's retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Duration>,
}

/// Alarms on the dead-letter queue (provisioned as CloudWatch alarms on SQS targets).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Alarms {
    /// Fires when more than `above` messages wait in the dead-letter queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<DepthAlarm>,
    /// Fires when the oldest dead letter is older than `above`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_message_age: Option<AgeAlarm>,
    /// Where alarms notify (e.g. SNS topic ARNs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DepthAlarm {
    #[schemars(range(min = 0))]
    pub above: u64,
    /// Length of one evaluation period. Default 60s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<Duration>,
    /// Periods over threshold before the alarm fires. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub evaluation_periods: Option<u32>,
    /// The alarm's description (AlarmDescription). Default: `dlqctl channel <channel>: …`
    /// saying what fired; `""` for none (as `dlqctl import` writes for an alarm without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgeAlarm {
    pub above: Duration,
    /// Length of one evaluation period. Default 60s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<Duration>,
    /// Periods over threshold before the alarm fires. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub evaluation_periods: Option<u32>,
    /// The alarm's description (AlarmDescription). Default: `dlqctl channel <channel>: …`
    /// saying what fired; `""` for none (as `dlqctl import` writes for an alarm without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
}

/// SQS settings; only for channels whose target is an SQS target.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SqsOptions {
    /// How long a received message stays hidden; with no native backoff on SQS this is what
    /// spaces retries. Default 30s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility_timeout: Option<Duration>,
    /// FIFO queues (names end in `.fifo`). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifo: Option<bool>,
}

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
    /// `ttl` (default): retry queues whose TTL dead-letters back to the main queue.
    /// `deliveryLimit` (quorum queues): the broker requeues and dead-letters after the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_model: Option<RetryModel>,
    /// An exchange that routes into the main queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<ExchangeBinding>,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ExchangeKind {
    Direct,
    Topic,
    Fanout,
    Headers,
}

/// Kafka settings; only for channels whose target is a Kafka target.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KafkaOptions {
    /// Partitions of the main topic (and retry topics). Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub partitions: Option<u32>,
    /// Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 32767))]
    pub replication_factor: Option<u16>,
    /// Partitions of the dead-letter topic; at least the main topic's. Default: the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub dead_letter_partitions: Option<u32>,
    /// Retry topic naming profile, as Spring Kafka 3.2+ names them by default: `spring`
    /// (`<main>-retry-<delay ms>`, or `<main>-retry` for a single retry topic; the default),
    /// `index` (Spring's index suffixing: `<main>-retry-0`, `-retry-1`, ...) or `custom`
    /// (`retry.name`). The dead-letter topic is `<main>-dlt` unless `deadLetter.name` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naming: Option<KafkaNaming>,
    /// Spring's `SameIntervalTopicReuseStrategy`: `singleTopic` (the default of
    /// `@RetryableTopic` since Spring Kafka 3.2) lets the trailing attempts with the same delay
    /// share one retry topic; `multipleTopics` (the default of `RetryTopicConfigurationBuilder`,
    /// and of `@RetryableTopic` before 3.2) gives every attempt its own topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_interval_topic_reuse: Option<TopicReuse>,
    /// Topic configs dlqctl owns on every topic of the channel (e.g. `cleanup.policy`,
    /// `min.insync.replicas`). `retention.ms` comes from `retention` fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<BTreeMap<String, ConfigValue>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum KafkaNaming {
    Spring,
    Index,
    Custom,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TopicReuse {
    SingleTopic,
    MultipleTopics,
}

/// A topic config value; numbers and booleans are sent as their text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConfigValue {
    Text(String),
    Int(i64),
    Bool(bool),
}

impl JsonSchema for ConfigValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ConfigValue".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // One type union, so an error reads "must be a string, an integer or a boolean".
        schemars::json_schema!({"type": ["string", "integer", "boolean"]})
    }
}

impl std::fmt::Display for ConfigValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigValue::Text(s) => f.write_str(s),
            ConfigValue::Int(i) => write!(f, "{i}"),
            ConfigValue::Bool(b) => write!(f, "{b}"),
        }
    }
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

/// Named connections to the live systems, and what dlqctl may change there.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "dlqctl Targets (dlqctl/v1)")]
pub struct Targets {
    pub api_version: ApiVersion,
    pub kind: TargetsKind,
    /// Connections by name; channels refer to them with `spec.target`.
    #[schemars(extend("propertyNames" = {"pattern": "^[a-z0-9][a-z0-9_-]*$"}))]
    pub targets: BTreeMap<String, Target>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TargetsKind {
    Targets,
}

/// One connection. Which fields apply depends on `backend`; credentials are never written
/// here, only the names of the environment variables that hold them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Target {
    pub backend: Backend,
    /// SQS: AWS region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// SQS: endpoint override (a local emulator); default: the AWS endpoint of the region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// SQS: named AWS profile; default: the standard credential chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// RabbitMQ: management API URL, e.g. `https://rabbit.internal:15671`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// RabbitMQ: default virtual host. Default `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vhost: Option<String>,
    /// RabbitMQ: name of the environment variable holding the user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub username_env: Option<String>,
    /// RabbitMQ: name of the environment variable holding the password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub password_env: Option<String>,
    /// Kafka: bootstrap servers, `host:port[,host:port]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_servers: Option<String>,
    /// Kafka: librdkafka properties (no secrets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<BTreeMap<String, String>>,
    /// Kafka: librdkafka properties whose values are read from the named environment variables
    /// (e.g. `sasl.password: KAFKA_PASSWORD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_properties: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<Ownership>,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Sqs,
    Rabbitmq,
    Kafka,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqs => "sqs",
            Backend::Rabbitmq => "rabbitmq",
            Backend::Kafka => "kafka",
        }
    }
}

impl Backend {
    /// The product name, for prose: `SQS`, `RabbitMQ`, `Kafka`.
    pub fn display_name(self) -> &'static str {
        match self {
            Backend::Sqs => "SQS",
            Backend::Rabbitmq => "RabbitMQ",
            Backend::Kafka => "Kafka",
        }
    }

    /// `an SQS`, `a RabbitMQ`, `a Kafka`.
    pub fn with_article(self) -> &'static str {
        match self {
            Backend::Sqs => "an SQS",
            Backend::Rabbitmq => "a RabbitMQ",
            Backend::Kafka => "a Kafka",
        }
    }

    /// What its message stores are called: `queue` or `topic`.
    pub fn resource_noun(self) -> &'static str {
        match self {
            Backend::Sqs | Backend::Rabbitmq => "queue",
            Backend::Kafka => "topic",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What dlqctl may change or delete on this target. RabbitMQ and Kafka have nowhere to record
/// ownership, so it is declared here; SQS queues and alarms are also tagged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Ownership {
    /// Queue, exchange, policy and topic names starting with one of these are dlqctl's.
    #[schemars(length(min = 1))]
    pub prefixes: Vec<String>,
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
