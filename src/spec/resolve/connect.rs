//! A channel's Kafka Connect connectors (`kafka.connectors`) with their error-handling keys
//! derived from the channel (pure): what lint checks and what `plan` compares and `apply` sets.
//!
//! How the channel maps (docs/kafka.md, "Kafka Connect"):
//! - `errors.tolerance`: `all` — a record that fails conversion, a transform or the sink goes
//!   to the dead-letter topic instead of stopping the task.
//! - `errors.deadletterqueue.topic.name`: the channel's dead-letter topic.
//! - `errors.deadletterqueue.topic.replication.factor`: `kafka.replicationFactor`, the
//!   replication of every topic of the channel (Connect uses it only if it creates the DLT).
//! - `errors.deadletterqueue.context.headers.enable`: `true`, so each dead letter carries
//!   `__connect.errors.*` headers and `status` classes it (envelope `connect`).
//! - `errors.retry.timeout`: the channel's retry schedule, whole: the sum of the delays
//!   between its `retry.maxAttempts` deliveries (0 when `maxAttempts` is 1: no retry).
//! - `errors.retry.delay.max.ms`: the longest of those delays (Connect's default, 60000, with
//!   no retry).
//! - `errors.log.enable`: `true`: every failure is also logged by the worker (without the
//!   record's contents).
//!
//! `kafka.connectors[].config` replaces any of them.

use std::collections::BTreeMap;

use crate::spec::duration::Duration;
use crate::spec::model::{CONNECTOR_OWNED_KEYS, ChannelSpec, ConnectorKind};

/// Connect's default `errors.retry.delay.max.ms`.
pub const CONNECT_DEFAULT_RETRY_DELAY_MAX_MS: u64 = 60_000;

#[derive(Debug, Clone, PartialEq)]
pub struct ConnectorResolved {
    pub name: String,
    pub kind: ConnectorKind,
    /// Every owned key (all of [`CONNECTOR_OWNED_KEYS`]) with its value as Connect takes it.
    pub config: BTreeMap<String, String>,
    /// The keys `config` in the spec overrides (lint says where they came from).
    pub overridden: Vec<String>,
}

impl ConnectorResolved {
    /// The value of one owned key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.config.get(key).map(String::as_str)
    }

    /// Whether failed records are dropped without a dead-letter topic: tolerance `all` and
    /// an empty `errors.deadletterqueue.topic.name`.
    pub fn discards_silently(&self) -> bool {
        self.get("errors.tolerance") == Some("all")
            && self
                .get("errors.deadletterqueue.topic.name")
                .is_none_or(|t| t.trim().is_empty())
    }

    /// Whether the connector is asked to write dead letters (a DLT named).
    pub fn has_dead_letter_topic(&self) -> bool {
        self.get("errors.deadletterqueue.topic.name")
            .is_some_and(|t| !t.trim().is_empty())
    }
}

/// The channel's connectors, each with every owned key (pure).
pub(super) fn resolve(
    spec: &ChannelSpec,
    dead_letter: &str,
    delays: &[Duration],
    replication_factor: u16,
) -> Vec<ConnectorResolved> {
    let listed = spec.kafka.as_ref().and_then(|k| k.connectors.as_ref());
    let total: u64 = delays.iter().map(|d| d.as_millis()).sum();
    let longest = delays
        .iter()
        .map(|d| d.as_millis())
        .max()
        .unwrap_or(CONNECT_DEFAULT_RETRY_DELAY_MAX_MS);
    listed
        .into_iter()
        .flatten()
        .map(|c| {
            let derived: [(&str, String); 7] = [
                ("errors.tolerance", "all".into()),
                ("errors.deadletterqueue.topic.name", dead_letter.to_owned()),
                (
                    "errors.deadletterqueue.topic.replication.factor",
                    replication_factor.to_string(),
                ),
                (
                    "errors.deadletterqueue.context.headers.enable",
                    "true".into(),
                ),
                ("errors.retry.timeout", total.to_string()),
                ("errors.retry.delay.max.ms", longest.to_string()),
                ("errors.log.enable", "true".into()),
            ];
            debug_assert!(derived.iter().map(|d| d.0).eq(CONNECTOR_OWNED_KEYS));
            let mut config: BTreeMap<String, String> = derived
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            let mut overridden = Vec::new();
            for (k, v) in c.config.iter().flatten() {
                if CONNECTOR_OWNED_KEYS.contains(&k.as_str()) {
                    config.insert(k.clone(), v.to_string());
                    overridden.push(k.clone());
                }
            }
            ConnectorResolved {
                name: c.name.clone(),
                kind: c.kind.unwrap_or_default(),
                config,
                overridden,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::kafka;

    #[test]
    fn the_error_keys_follow_the_channels_dead_letter_topic_and_retry_schedule() {
        let r = kafka(
            "  retry: {maxAttempts: 4, backoff: {initial: 1s, multiplier: 2}}\n  kafka:\n    replicationFactor: 3\n    connectors: [{name: orders-sink}]\n",
        );
        let c = &r.kafka.as_ref().expect("kafka").connectors[0];
        assert_eq!(c.name, "orders-sink");
        let got: Vec<(&str, &str)> = c
            .config
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("errors.deadletterqueue.context.headers.enable", "true"),
                ("errors.deadletterqueue.topic.name", "app.orders-dlt"),
                ("errors.deadletterqueue.topic.replication.factor", "3"),
                ("errors.log.enable", "true"),
                // 1 s + 2 s + 4 s between the four deliveries; the longest wait 4 s.
                ("errors.retry.delay.max.ms", "4000"),
                ("errors.retry.timeout", "7000"),
                ("errors.tolerance", "all"),
            ]
        );
        assert!(!c.discards_silently() && c.has_dead_letter_topic());
        assert!(c.overridden.is_empty());
    }

    #[test]
    fn one_delivery_means_no_retry_and_overrides_replace_the_derived_keys() {
        let r = kafka(
            "  kafka:\n    connectors:\n      - name: s\n        config: {errors.deadletterqueue.topic.name: \"\", errors.retry.timeout: 5}\n",
        );
        let c = &r.kafka.as_ref().expect("kafka").connectors[0];
        assert_eq!(c.get("errors.retry.timeout"), Some("5"));
        assert_eq!(c.get("errors.retry.delay.max.ms"), Some("60000"));
        assert!(c.discards_silently());
        assert_eq!(
            c.overridden,
            ["errors.deadletterqueue.topic.name", "errors.retry.timeout"]
        );
        let r = kafka("  kafka: {connectors: [{name: s}]}\n");
        let c = &r.kafka.as_ref().expect("kafka").connectors[0];
        assert_eq!(c.get("errors.retry.timeout"), Some("0"));
    }
}
