//! Kafka's alerts door: its dead-letter alerts are Prometheus rules, and with
//! `alerts.source: native` the depth comes from kafka_exporter (a consumer group's lag, or
//! what the topic retains).

use crate::backend::kit::alerts::{AlertHome, Alerts, promql_string};
use crate::spec::resolve::Resolved;

/// `source: native` on Kafka (kafka_exporter): a consumer group's lag per partition.
pub const KAFKA_NATIVE_LAG: &str = "kafka_consumergroup_lag";
/// kafka_exporter's newest and oldest offsets per partition (what a topic retains).
pub const KAFKA_NATIVE_NEWEST: &str = "kafka_topic_partition_current_offset";
pub const KAFKA_NATIVE_OLDEST: &str = "kafka_topic_partition_oldest_offset";

impl Alerts for super::Kafka {
    fn home() -> AlertHome {
        AlertHome::Prometheus
    }

    fn native_depth(r: &Resolved, m: &str, n: u64) -> Option<String> {
        let topic = promql_string(&r.dead_letter);
        Some(match &r.dead_letter_group {
            Some(group) => format!(
                "sum({KAFKA_NATIVE_LAG}{{consumergroup={},topic={topic}{m}}}) > {n}",
                promql_string(group)
            ),
            None => format!(
                "(sum({KAFKA_NATIVE_NEWEST}{{topic={topic}{m}}}) - sum({KAFKA_NATIVE_OLDEST}{{topic={topic}{m}}})) > {n}"
            ),
        })
    }
}
