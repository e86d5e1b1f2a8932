//! `spec.kafka`: the settings that apply only to channels on a Kafka target (partitions,
//! replication, Spring Kafka's retry topic naming and suffixes, topic configs).
//!
//! Depends on nothing else in the crate.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// `retryTopicSuffix` and `dltSuffix` replace Spring's `-retry` and `-dlt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naming: Option<KafkaNaming>,
    /// Spring's retry topic suffix (`retryTopicSuffix` on `@RetryableTopic` and
    /// `RetryTopicConfigurationBuilder`), put between the main topic and the delay or index:
    /// `.retry` gives `<main>.retry-1000` (`spring`) or `<main>.retry-0` (`index`). Default
    /// `-retry`. Only with the `spring` and `index` profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_topic_suffix: Option<String>,
    /// Spring's dead-letter topic suffix (`dltTopicSuffix` on `@RetryableTopic`, `dltSuffix`
    /// on `RetryTopicConfigurationBuilder`): the DLT is `<main><dltSuffix>`. Default `-dlt`.
    /// Not together with `deadLetter.name`, which names the DLT outright.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlt_suffix: Option<String>,
    /// Spring's exception-based DLTs (since Spring Kafka 3.2): the `suffix` of each
    /// `@ExceptionBasedDltDestination` in `@RetryableTopic(exceptionBasedDltRouting)`, or each
    /// key of `RetryTopicConfigurationBuilder.dltRoutingRules`. Each is one more dead-letter
    /// topic, `<main><suffix><dltSuffix>` (`-deserialization` gives
    /// `<main>-deserialization-dlt`), with the DLT's partitions and retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub exception_based_dlts: Option<Vec<String>>,
    /// Spring's `SameIntervalTopicReuseStrategy`: `singleTopic` (the default of
    /// `@RetryableTopic` since Spring Kafka 3.2) lets the trailing attempts with the same delay
    /// share one retry topic; `multipleTopics` (the default of `RetryTopicConfigurationBuilder`
    /// before Spring Kafka 4.1, and of `@RetryableTopic` before 3.2) gives every attempt its own
    /// topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_interval_topic_reuse: Option<TopicReuse>,
    /// ACL bindings dlqctl owns on the channel's topics (CreateAcls / DeleteAcls): who may
    /// produce, consume, and read the dead letters. Each list, once written, owns the literal
    /// ALLOW bindings (any host) of its operations on its topics: one it does not name is
    /// deleted. Without it, no binding of this channel is created or deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acls: Option<KafkaAcls>,
    /// Kafka Connect sink connectors that read the main topic (on the worker of the target's
    /// `connectUrl`): dlqctl owns their error-handling keys only (docs/kafka.md, "Kafka
    /// Connect").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub connectors: Option<Vec<super::connect::KafkaConnector>>,
    /// Topic configs dlqctl owns on every topic of the channel (e.g. `cleanup.policy`,
    /// `min.insync.replicas`). `retention.ms` comes from `retention` fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<BTreeMap<String, ConfigValue>>,
    /// Share groups (KIP-1191, Kafka 4.4+) that consume the main topic and dead-letter to the
    /// channel's DLT: dlqctl owns each group's `errors.deadletterqueue.topic.name` (the DLT),
    /// `errors.deadletterqueue.copy.record.enable` and, when `retry.maxAttempts` is written,
    /// `share.delivery.count.limit`; and sets `errors.deadletterqueue.group.enable` on the DLT,
    /// without which the broker archives the record and writes nothing. A group is never
    /// created or deleted (its configs outlive its members). docs/kafka.md "Share groups".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub share_groups: Option<Vec<ShareGroup>>,
}

/// Kafka 4.4's default `errors.deadletterqueue.topic.name.prefix` (a cluster setting): the
/// broker writes share groups' dead letters only to topics whose name starts with it.
pub const SHARE_DLQ_PREFIX: &str = "dlq.";

/// `group.share.min.delivery.count.limit` and `group.share.max.delivery.count.limit` at Kafka
/// 4.4's defaults: the range the broker takes for a group's `share.delivery.count.limit`.
pub const SHARE_DELIVERY_LIMITS: (u32, u32) = (2, 10);

/// One share group of `kafka.shareGroups`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShareGroup {
    /// The group id (the share consumers' `group.id`).
    #[schemars(length(min = 1, max = 249))]
    pub name: String,
    /// `errors.deadletterqueue.copy.record.enable`: the dead letter carries the record's key,
    /// value and headers (`true`, the default: `redrive` needs them), or only the broker's
    /// `__dlq.errors.*` context headers (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_record: Option<bool>,
}

/// `kafka.acls`: principals (`User:alice`) by what they do with the channel. Each binding is
/// literal, for any host, ALLOW; READ and WRITE imply DESCRIBE. Consumer-group ACLs are not
/// managed (the spec does not know the group).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct KafkaAcls {
    /// WRITE on the main topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub produce: Option<Vec<Principal>>,
    /// The consuming service: READ on the main and retry topics, and WRITE on the retry,
    /// dead-letter and invalid-message topics (Spring's retry and dead-letter publishing
    /// runs in the consumer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub consume: Option<Vec<Principal>>,
    /// Operators: READ on the dead-letter topics (the DLT, Spring's exception-based DLTs and
    /// the invalid-message topic), and nothing on the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub read_dead_letters: Option<Vec<Principal>>,
}

/// A Kafka principal: `<type>:<name>`, e.g. `User:orders-api` (`User:*` is everyone).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Principal(#[schemars(regex(pattern = PRINCIPAL_PATTERN), length(max = 512))] pub String);

/// What a principal looks like: a type, a colon, a name (lint names it in its finding).
pub const PRINCIPAL_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9]*:\S.*$";

impl KafkaAcls {
    /// The principals of one list (none when the list is absent).
    pub fn of(list: &Option<Vec<Principal>>) -> impl Iterator<Item = &str> {
        list.iter().flatten().map(|p| p.0.as_str())
    }
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

/// Whether a librdkafka property holds a secret: the well-known ones, and any key ending in
/// `.password` or `.secret` (or a JAAS config, which embeds one). Only `secretProperties` (an
/// environment variable's name) may set these; a value in a targets file is a lint error.
pub fn is_secret_property(key: &str) -> bool {
    const KNOWN: [&str; 5] = [
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "sasl.jaas.config",
        "ssl.key.pem",
        "ssl.keystore.password",
    ];
    let k = key.to_ascii_lowercase();
    KNOWN.contains(&k.as_str()) || k.ends_with(".password") || k.ends_with(".secret")
}

#[cfg(test)]
mod tests {
    //! Principals, config values and which properties are secrets.

    use super::*;

    #[test]
    fn principals_of_a_list_or_none() {
        let list = Some(vec![Principal("User:a".into()), Principal("User:*".into())]);
        assert_eq!(
            KafkaAcls::of(&list).collect::<Vec<_>>(),
            ["User:a", "User:*"]
        );
        assert_eq!(KafkaAcls::of(&None).count(), 0);
    }

    #[test]
    fn config_values_are_sent_as_their_text() {
        assert_eq!(ConfigValue::Text("lz4".into()).to_string(), "lz4");
        assert_eq!(ConfigValue::Int(-3).to_string(), "-3");
        assert_eq!(ConfigValue::Bool(false).to_string(), "false");
        let mut generator = schemars::SchemaGenerator::default();
        assert_eq!(ConfigValue::schema_name(), "ConfigValue");
        assert_eq!(
            ConfigValue::json_schema(&mut generator).to_value(),
            serde_json::json!({"type": ["string", "integer", "boolean"]})
        );
    }

    #[test]
    fn secret_properties_are_the_known_ones_and_password_or_secret_keys() {
        for key in [
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.config",
            "SASL.JAAS.CONFIG",
            "ssl.key.pem",
            "ssl.keystore.password",
            "ssl.truststore.password",
            "my.Secret",
        ] {
            assert!(is_secret_property(key), "{key}");
        }
        for key in [
            "sasl.mechanism",
            "password",
            "ssl.key.location",
            "secretive",
        ] {
            assert!(!is_secret_property(key), "{key}");
        }
    }
}
