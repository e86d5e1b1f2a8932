//! The alerts door: what `crate::engine::alerts` needs to know of a backend to write its
//! Prometheus rules, its Cloud Monitoring alert policies or its Azure Monitor metric alerts, so
//! the alert driver names no backend. Pure.

use crate::spec::model::{Target, Tier};
use crate::spec::resolve::Resolved;

/// Where a backend's dead-letter alerts live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertHome {
    /// Prometheus rules over `dlqctl exporter` (or the broker's own exporter).
    Prometheus,
    /// CloudWatch alarms, which `apply` provisions (SQS).
    CloudWatch,
    /// Cloud Monitoring metrics, which Prometheus does not scrape (Pub/Sub).
    CloudMonitoring,
}

/// A PromQL string literal (Go's double-quoted syntax, which JSON's escaping satisfies).
pub fn promql_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.escape_default()))
}

/// The alerts door. Pure.
pub trait Alerts {
    /// Where this backend's alerts live.
    fn home() -> AlertHome;

    /// The PromQL of a depth alert above `n` messages read from the broker's own exporter
    /// (`alerts.source: native`); `matchers` are the target's extra matchers, each written
    /// `,key="value"`. `None`: this backend has no native source.
    fn native_depth(r: &Resolved, matchers: &str, n: u64) -> Option<String>;

    /// The channel's Cloud Monitoring alert policies (the Monitoring API's `AlertPolicy` as
    /// JSON), one per tier, lowest first; none where alerts live elsewhere.
    fn policies(_r: &Resolved) -> Vec<(Tier, serde_json::Value)> {
        Vec::new()
    }

    /// The channel's Azure Monitor metric alerts (ARM deployment templates as JSON), one per
    /// tier, lowest first, scoped to what `target` names; none where alerts live elsewhere.
    fn metric_alerts(_r: &Resolved, _target: &Target) -> Vec<(Tier, serde_json::Value)> {
        Vec::new()
    }
}
