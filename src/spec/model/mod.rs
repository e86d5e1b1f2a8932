//! The spec as Rust types: the single source of the JSON schemas in `schemas/` and of the
//! typed values the rules and the planner read.
//!
//! Doc comments here become schema descriptions, which editors show as hover help, so they
//! are written for the person editing a spec. Every field of a channel's `spec` is optional at
//! this layer so that a `Defaults` document can share the same shape; what must be present
//! after defaults are applied is checked by the rules (`spec::rules`), with a position.
//!
//! One submodule per concern: `channel` (the Channel and Defaults documents), `targets` (the
//! Targets document and `Backend`), `api` (the `apiVersion`), `alarms`, `envelope` (`deadLetter.envelope` and `classes`), `connect` (`kafka.connectors`), and one per backend
//! block (`sqs`, `rabbitmq`, `kafka`, `pubsub`, `azure`). Everything is re-exported here, so `spec::model::X` is the path to use.

mod alarms;
mod api;
mod azure;
mod channel;
mod connect;
mod envelope;
mod kafka;
mod pubsub;
mod rabbitmq;
mod sqs;
mod targets;

pub use alarms::{AgeAlarm, AlarmActions, Alarms, DepthAlarm, RateAlarm, Tier, TierActions};
pub use api::{API_VERSION, ApiVersion};
pub use azure::AzureServicebusOptions;
pub use channel::{
    Archive, Backoff, Channel, ChannelKind, ChannelSpec, DEAD_LETTER_OWNER_FIELDS, DeadLetter,
    Defaults, DefaultsKind, Discard, Invalid, LintOptions, Metadata, RedriveHeaders, Retry,
};
pub use connect::{CONNECTOR_OWNED_KEYS, ConnectorKind, ConnectorValue, KafkaConnector};
pub use envelope::{ClassRule, Envelope, EnvelopeMapping, Field, Format, Patterns, Profile};
pub use kafka::{
    ConfigValue, KafkaAcls, KafkaNaming, KafkaOptions, PRINCIPAL_PATTERN, Principal,
    SHARE_DELIVERY_LIMITS, SHARE_DLQ_PREFIX, ShareGroup, TopicReuse, is_secret_property,
};
pub use pubsub::PubsubOptions;
pub use rabbitmq::{
    DeadLetterExchange, DeadLetterStrategy, DlxMode, ExchangeBinding, ExchangeKind, QueueType,
    RabbitMqOptions, RetryModel,
};
pub use sqs::{DeadLetterSqs, QueuePolicy, SqsEncryption, SqsOptions};
pub use targets::{
    Backend, MetricSource, Ownership, PubsubMonitoring, Redact, Target, TargetAlerts, Targets,
    TargetsKind,
};
