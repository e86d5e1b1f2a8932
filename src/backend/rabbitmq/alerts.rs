//! RabbitMQ's alerts door: its dead-letter alerts are Prometheus rules, and with
//! `alerts.source: native` the depth comes from the `rabbitmq_prometheus` plugin.

use crate::backend::kit::alerts::{AlertHome, Alerts, promql_string};
use crate::spec::resolve::Resolved;

/// `source: native` on RabbitMQ: messages in a queue, from the `rabbitmq_prometheus` plugin's
/// per-object endpoint (`/metrics/detailed?family=queue_coarse_metrics`).
pub const RABBIT_NATIVE_DEPTH: &str = "rabbitmq_detailed_queue_messages";

impl Alerts for super::Rabbitmq {
    fn home() -> AlertHome {
        AlertHome::Prometheus
    }

    fn native_depth(r: &Resolved, m: &str, n: u64) -> Option<String> {
        let topic = promql_string(&r.dead_letter);
        let vhost = r.rabbitmq.as_ref().map_or("/", |x| x.vhost.as_str());
        Some(format!(
            "sum({RABBIT_NATIVE_DEPTH}{{vhost={},queue={topic}{m}}}) > {n}",
            promql_string(vhost)
        ))
    }
}
