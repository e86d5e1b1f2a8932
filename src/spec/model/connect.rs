//! `kafka.connectors` and the target's `connectUrl`: the Kafka Connect sink connectors that
//! feed a channel's main topic, whose error-handling keys dlqctl owns (docs/kafka.md, "Kafka
//! Connect"). The connector itself (its class, topics, converters) is the operator's: dlqctl
//! never creates, deletes or otherwise changes one.
//!
//! Depends on nothing else in the crate (`kafka` holds the field that lists these).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The connector config keys dlqctl owns, in the order plans and docs list them. Every other
/// key of a connector's config is kept as the worker has it.
pub const CONNECTOR_OWNED_KEYS: [&str; 7] = [
    "errors.tolerance",
    "errors.deadletterqueue.topic.name",
    "errors.deadletterqueue.topic.replication.factor",
    "errors.deadletterqueue.context.headers.enable",
    "errors.retry.timeout",
    "errors.retry.delay.max.ms",
    "errors.log.enable",
];

/// One Kafka Connect connector that reads the channel's main topic. dlqctl sets its
/// error-handling keys (`errors.*`, derived from the channel: the dead letters go to the
/// channel's dead-letter topic, with `__connect.errors.*` headers) through the worker of the
/// target's `connectUrl`, keeping every other key of its config as read. A connector that
/// does not exist is an error: dlqctl never creates or deletes one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KafkaConnector {
    /// The connector's name on the Connect worker.
    #[schemars(length(min = 1, max = 249), regex(pattern = r"^[^/\s]+$"))]
    pub name: String,
    /// `sink` (the default) or `source`. Connect writes dead letters for sink connectors only:
    /// a source connector here is a lint error. `plan` also reads the live connector's type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ConnectorKind>,
    /// Overrides of the derived error-handling keys, by Connect's own names (only the keys
    /// dlqctl owns), e.g. `errors.tolerance: none` to stop the task at the first bad record.
    /// Lint refuses what loses records or misroutes them: `errors.tolerance: all` without a
    /// dead-letter topic (a silent discard), a dead-letter topic other than the channel's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("propertyNames" = {"enum": CONNECTOR_OWNED_KEYS}))]
    pub config: Option<BTreeMap<String, ConnectorValue>>,
}

/// What a connector does: a sink reads topics into another system, a source writes topics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConnectorKind {
    #[default]
    Sink,
    Source,
}

impl ConnectorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectorKind::Sink => "sink",
            ConnectorKind::Source => "source",
        }
    }
}

/// A connector config value; numbers and booleans are sent as their text (Connect's configs
/// are strings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConnectorValue {
    Text(String),
    Int(i64),
    Bool(bool),
}

impl JsonSchema for ConnectorValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ConnectorValue".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": ["string", "integer", "boolean"]})
    }
}

impl std::fmt::Display for ConnectorValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectorValue::Text(s) => f.write_str(s),
            ConnectorValue::Int(i) => write!(f, "{i}"),
            ConnectorValue::Bool(b) => write!(f, "{b}"),
        }
    }
}
