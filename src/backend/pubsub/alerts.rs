//! Pub/Sub's alerts door: its depth, age and dead-letter rate are Cloud Monitoring metrics,
//! which Prometheus does not scrape, so no Prometheus rule is written for it; `dlqctl alerts
//! --format cloud-monitoring` writes Cloud Monitoring alert policies instead (the Monitoring
//! API v3 `AlertPolicy` resource, as `gcloud alpha monitoring policies create
//! --policy-from-file` reads it).
//!
//! One policy per channel and tier, not one per channel: a policy has one `severity` and one
//! list of notification channels, so a warning and a critical in one policy would page alike.
//! Each policy has one metric-threshold condition per alarm of its tier (at most three: depth,
//! oldest age, rate; the API allows six), combined with OR:
//! - depth: `subscription/num_undelivered_messages` of the dead-letter subscription (the DLT's
//!   subscription, which holds the dead letters), the maximum per period;
//! - oldest age: `subscription/oldest_unacked_message_age` of the same subscription (seconds);
//! - the dead-letter rate: `subscription/dead_letter_message_count` of the source subscription
//!   over `topic/send_message_operation_count` of the source topic (a ratio condition:
//!   `filter` the numerator, `denominatorFilter` the denominator, both summed per period).
//!
//! The condition's `duration` is the alarm's period × evaluation periods (the rate's `for`);
//! data that stops arriving (an idle subscription) evaluates as not failing. Pure.

use serde_json::{Value, json};

use crate::backend::kit::alerts::{AlertHome, Alerts};
use crate::spec::duration::Duration;
use crate::spec::model::Tier;
use crate::spec::resolve::{AlarmResolved, Resolved};

pub const DEPTH_METRIC: &str = "pubsub.googleapis.com/subscription/num_undelivered_messages";
pub const AGE_METRIC: &str = "pubsub.googleapis.com/subscription/oldest_unacked_message_age";
pub const DEAD_LETTERED_METRIC: &str =
    "pubsub.googleapis.com/subscription/dead_letter_message_count";
pub const SENT_METRIC: &str = "pubsub.googleapis.com/topic/send_message_operation_count";

impl Alerts for super::Pubsub {
    fn home() -> AlertHome {
        AlertHome::CloudMonitoring
    }

    fn native_depth(_r: &Resolved, _matchers: &str, _n: u64) -> Option<String> {
        None
    }

    fn policies(r: &Resolved) -> Vec<(Tier, Value)> {
        policies(r)
    }
}

/// A Cloud Monitoring duration: whole seconds and `s` (`300s`).
fn seconds(d: Duration) -> String {
    format!("{}s", d.as_millis() / 1000)
}

/// A user label as Cloud Monitoring takes one: lowercase letters, digits, `_` and `-`, at most
/// 63 characters (a key starts with a letter).
pub fn label(text: &str, key: bool) -> String {
    let mut out: String = text
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if key && !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.insert(0, 'l');
    }
    out.chars().take(63).collect()
}

/// `resource.type = "pubsub_subscription" AND resource.labels.subscription_id = "…" AND
/// metric.type = "…"` (or the topic's).
fn filter(resource: &str, id_label: &str, id: &str, metric: &str) -> String {
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""));
    format!(
        "resource.type = {} AND resource.labels.{id_label} = {} AND metric.type = {}",
        quoted(resource),
        quoted(id),
        quoted(metric)
    )
}

fn threshold_condition(
    name: String,
    filter: String,
    aligner: &str,
    period: Duration,
    duration: Duration,
    value: Value,
) -> Value {
    json!({
        "displayName": name,
        "conditionThreshold": {
            "filter": filter,
            "aggregations": [{"alignmentPeriod": seconds(period), "perSeriesAligner": aligner}],
            "comparison": "COMPARISON_GT",
            "thresholdValue": value,
            "duration": seconds(duration),
            "trigger": {"count": 1},
            "evaluationMissingData": "EVALUATION_MISSING_DATA_INACTIVE",
        }
    })
}

/// How long a depth or age alarm's condition must hold: period × evaluation periods.
fn held(a: &AlarmResolved) -> Duration {
    Duration::from_millis(
        a.period
            .as_millis()
            .saturating_mul(u64::from(a.evaluation_periods)),
    )
}

/// The channel's policies, lowest tier first: one per tier any of its alarms has (a single
/// threshold counts as critical).
pub fn policies(r: &Resolved) -> Vec<(Tier, Value)> {
    let Some(ps) = &r.pubsub else {
        return Vec::new();
    };
    let sub = &ps.dead_letter_subscription;
    let a = &r.alarms;
    let mut out = Vec::new();
    for tier in Tier::ALL {
        let mut conditions = Vec::new();
        let mut said = Vec::new();
        if let Some(d) = &a.depth
            && let Some(t) = d.tiers.iter().find(|t| t.severity() == tier)
        {
            conditions.push(threshold_condition(
                format!(
                    "{sub}: more than {} dead letters waiting ({tier})",
                    t.threshold
                ),
                filter("pubsub_subscription", "subscription_id", sub, DEPTH_METRIC),
                "ALIGN_MAX",
                d.period,
                held(d),
                json!(t.threshold),
            ));
            said.push(format!(
                "more than {} dead letters wait in `{sub}`",
                t.threshold
            ));
        }
        if let Some(o) = &a.oldest_message_age
            && let Some(t) = o.tiers.iter().find(|t| t.severity() == tier)
        {
            let age = Duration::from_secs(t.threshold);
            conditions.push(threshold_condition(
                format!("{sub}: oldest dead letter older than {age} ({tier})"),
                filter("pubsub_subscription", "subscription_id", sub, AGE_METRIC),
                "ALIGN_MAX",
                o.period,
                held(o),
                json!(t.threshold),
            ));
            said.push(format!(
                "the oldest dead letter in `{sub}` is older than {age}"
            ));
        }
        if let Some(rate) = &a.dead_letter_rate
            && let Some(t) = rate.tiers.iter().find(|t| t.severity() == tier)
        {
            let aggregate = json!([{
                "alignmentPeriod": seconds(rate.period),
                "perSeriesAligner": "ALIGN_SUM",
                "crossSeriesReducer": "REDUCE_SUM",
                "groupByFields": ["resource.label.project_id"],
            }]);
            conditions.push(json!({
                "displayName": format!("{}: more than {} dead-lettered ({tier})", r.channel, t.threshold),
                "conditionThreshold": {
                    "filter": filter("pubsub_subscription", "subscription_id", &ps.subscription, DEAD_LETTERED_METRIC),
                    "aggregations": aggregate,
                    "denominatorFilter": filter("pubsub_topic", "topic_id", &r.main, SENT_METRIC),
                    "denominatorAggregations": aggregate,
                    "comparison": "COMPARISON_GT",
                    "thresholdValue": t.fraction(),
                    "duration": seconds(rate.for_),
                    "trigger": {"count": 1},
                    "evaluationMissingData": "EVALUATION_MISSING_DATA_INACTIVE",
                }
            }));
            said.push(format!(
                "more than {} of the messages published to `{}` were dead-lettered over {}",
                t.threshold, r.main, rate.period
            ));
        }
        if conditions.is_empty() {
            continue;
        }
        out.push((tier, policy(r, tier, conditions, &said)));
    }
    out
}

fn policy(r: &Resolved, tier: Tier, conditions: Vec<Value>, said: &[String]) -> Value {
    let mut labels: serde_json::Map<String, Value> = r
        .labels
        .iter()
        .map(|(k, v)| (label(k, true), json!(label(v, false))))
        .collect();
    for (k, v) in [
        ("severity", tier.as_str()),
        ("channel", r.channel.as_str()),
        ("target", r.target.as_str()),
        ("backend", "pubsub"),
        ("managed_by", "dlqctl"),
    ] {
        labels.insert(k.to_owned(), json!(label(v, false)));
    }
    let mut content = format!(
        "dlqctl channel {} ({tier}): {}.\n\nLook: `dlqctl status --channel {}`. Once the cause is fixed, bring the messages back: `dlqctl redrive {} --dry-run`, then without --dry-run.",
        r.channel,
        said.join("; or "),
        r.channel,
        r.channel
    );
    if let Some(url) = &r.alarms.runbook {
        content.push_str(&format!("\n\nRunbook: {url}"));
    }
    json!({
        "displayName": format!("dlqctl {} ({tier})", r.channel),
        "combiner": "OR",
        "conditions": conditions,
        "documentation": {"content": content, "mimeType": "text/markdown"},
        "userLabels": labels,
        "severity": tier.as_str().to_ascii_uppercase(),
        "enabled": true,
    })
}
