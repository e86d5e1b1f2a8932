//! The alerts door of Azure Service Bus. A channel's depth alarm becomes an Azure Monitor
//! metric alert on the namespace's `DeadletteredMessages` metric (`dlqctl alerts --format
//! azure-monitor`), so a dead letter pages someone without any exporter running; the same
//! channel also keeps its Prometheus rules over `dlqctl exporter` (the home stays
//! Prometheus), because Azure Monitor has no metric for what the other alarms watch: no
//! oldest-message age, and a metric alert's criteria are ANDed single metrics, so no ratio for
//! the dead-letter rate.
//!
//! What a file is: an ARM deployment template (`az deployment group create --resource-group RG
//! --template-file FILE`, in the namespace's resource group) holding one
//! `Microsoft.Insights/metricAlerts` resource, api-version [`METRIC_ALERTS_API_VERSION`], one
//! per channel and tier: the shapes of azure-rest-api-specs
//! `specification/monitor/resource-manager/Microsoft.Insights/stable/2018-03-01/metricAlert_API.json`
//! (MetricAlertResource; `location` is `global` for metric alerts). The criterion:
//! - the metric: `DeadletteredMessages` ("Count of dead-lettered messages in a Queue/Topic",
//!   aggregations Average, Minimum, Maximum, dimension `EntityName`, one sample a minute:
//!   Azure Monitor's supported-metrics reference for Microsoft.ServiceBus/Namespaces), with
//!   `EntityName` the queue or the topic: the metric is per queue or topic, so a topic
//!   channel's alert counts the dead letters of every subscription of the topic. A channel that
//!   forwards its dead letters (`deadLetter.name`) is alerted on the forward queue's
//!   `ActiveMessages` instead, where they wait;
//! - held, not touched: `timeAggregation: Minimum` over a window of the alarm's period ×
//!   evaluation periods, so it fires when the depth stayed above the threshold for the whole
//!   window, as the CloudWatch and Prometheus forms do. Azure takes only some windows (PT1M,
//!   PT5M, PT15M, PT30M, PT1H, PT6H, PT12H, PT24H) and frequencies (PT1M to PT1H: "Create a
//!   metric alert with a Resource Manager template", learn.microsoft.com): the window is the
//!   shortest of those at least as long as the alarm's, and the description says so when they
//!   differ;
//! - severity 0 (Critical) for `critical` and the single-threshold form, 2 (Warning) for
//!   `warning`; the tier's `actions` are action group resource ids (lint checks their shape).
//!
//! The resource's tags carry `managed_by: dlqctl` (the mark `--out` looks for before it
//! replaces a file), the target, channel and tier. Pure.

use serde_json::{Map, Value, json};

use crate::backend::kit::alerts::{AlertHome, Alerts};
use crate::spec::duration::Duration;
use crate::spec::model::{Target, Tier};
use crate::spec::resolve::{AlarmResolved, Resolved};

/// The api-version of `Microsoft.Insights/metricAlerts` the templates use (GA).
pub const METRIC_ALERTS_API_VERSION: &str = "2018-03-01";
/// The ARM template schema the files declare.
pub const TEMPLATE_SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";
/// Dead letters waiting in a queue's or a topic's built-in subqueues.
pub const DEAD_LETTERED_METRIC: &str = "DeadletteredMessages";
/// Messages waiting in a queue (where a forward queue's dead letters wait).
pub const ACTIVE_METRIC: &str = "ActiveMessages";
pub const METRIC_NAMESPACE: &str = "Microsoft.ServiceBus/namespaces";

/// The window sizes Azure Monitor takes for a metric alert, in seconds.
const WINDOWS: [(u64, &str); 8] = [
    (60, "PT1M"),
    (300, "PT5M"),
    (900, "PT15M"),
    (1800, "PT30M"),
    (3600, "PT1H"),
    (21_600, "PT6H"),
    (43_200, "PT12H"),
    (86_400, "PT24H"),
];

impl Alerts for super::Azure {
    fn home() -> AlertHome {
        AlertHome::Prometheus
    }

    fn native_depth(_r: &Resolved, _matchers: &str, _n: u64) -> Option<String> {
        None
    }

    fn metric_alerts(r: &Resolved, target: &Target) -> Vec<(Tier, Value)> {
        metric_alerts(r, target)
    }
}

/// The namespace's ARM resource id, when the target names all three parts.
fn namespace_id(target: &Target) -> Option<String> {
    Some(format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.ServiceBus/namespaces/{}",
        target.subscription_id.as_deref()?,
        target.resource_group.as_deref()?,
        target.namespace.as_deref()?
    ))
}

/// The window, its frequency and its seconds for an alarm held `held`: the shortest window
/// Azure takes that is at least as long, capped at a day.
fn window(held: Duration) -> (&'static str, &'static str, u64) {
    let secs = held.as_millis().div_ceil(1000);
    let (w, text) = WINDOWS
        .iter()
        .copied()
        .find(|(w, _)| *w >= secs)
        .unwrap_or(WINDOWS[WINDOWS.len() - 1]);
    let frequency = if w <= 900 {
        "PT1M"
    } else if w <= 21_600 {
        "PT5M"
    } else {
        "PT15M"
    };
    (text, frequency, w)
}

/// A metric alert rule's name: Azure refuses `*#&+:<>?@%{}\/` and control characters in it.
fn rule_name(parts: &[&str]) -> String {
    parts
        .join("-")
        .chars()
        .map(|c| {
            if c.is_control() || "*#&+:<>?@%{}\\/".contains(c) {
                '-'
            } else {
                c
            }
        })
        .take(260)
        .collect()
}

/// The channel's metric alerts, lowest tier first: one per tier of its depth alarm; none
/// without a depth alarm or when the target does not name its namespace.
pub fn metric_alerts(r: &Resolved, target: &Target) -> Vec<(Tier, Value)> {
    let (Some(a), Some(depth), Some(scope)) = (&r.azure, &r.alarms.depth, namespace_id(target))
    else {
        return Vec::new();
    };
    let (metric, entity, place) = match &a.forward_to {
        Some(f) => (ACTIVE_METRIC, f.clone(), format!("the forward queue `{f}`")),
        None => (
            DEAD_LETTERED_METRIC,
            r.main.clone(),
            match &a.subscription {
                Some(s) => format!(
                    "the dead-letter subqueues of topic `{}` (subscription `{s}` among them: the metric is per topic)",
                    r.main
                ),
                None => format!("`{}`", r.dead_letter),
            },
        ),
    };
    let mut out = Vec::new();
    for tier in Tier::ALL {
        let Some(t) = depth.tiers.iter().find(|t| t.severity() == tier) else {
            continue;
        };
        out.push((
            tier,
            template(r, tier, &scope, depth, t, metric, &entity, &place),
        ));
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn template(
    r: &Resolved,
    tier: Tier,
    scope: &str,
    depth: &AlarmResolved,
    t: &crate::spec::resolve::TierResolved,
    metric: &str,
    entity: &str,
    place: &str,
) -> Value {
    let held = Duration::from_millis(
        depth
            .period
            .as_millis()
            .saturating_mul(u64::from(depth.evaluation_periods)),
    );
    let (window, frequency, secs) = window(held);
    let shown = Duration::from_secs(secs);
    let mut description = format!(
        "dlqctl channel {} ({tier}): more than {} dead letters have waited in {place} for {shown}.",
        r.channel, t.threshold
    );
    if secs.saturating_mul(1000) != held.as_millis() {
        description.push_str(&format!(
            " The alarm holds for {held}; Azure Monitor takes no such window, so this one is {shown}."
        ));
    }
    description.push_str(&format!(
        " Look: `dlqctl status --channel {}`. Once the cause is fixed: `dlqctl redrive {} --dry-run`, then without --dry-run.",
        r.channel, r.channel
    ));
    if let Some(url) = &r.alarms.runbook {
        description.push_str(&format!(" Runbook: {url}"));
    }
    let mut tags = Map::new();
    for (k, v) in [
        ("managed_by", "dlqctl"),
        ("dlqctl_target", r.target.as_str()),
        ("dlqctl_channel", r.channel.as_str()),
        ("severity", tier.as_str()),
    ] {
        tags.insert(k.to_owned(), json!(v));
    }
    let actions: Vec<Value> = t
        .actions
        .iter()
        .map(|id| json!({"actionGroupId": id}))
        .collect();
    let severity = match t.tier {
        Some(Tier::Warning) => 2,
        _ => 0,
    };
    json!({
        "$schema": TEMPLATE_SCHEMA,
        "contentVersion": "1.0.0.0",
        "resources": [{
            "type": "Microsoft.Insights/metricAlerts",
            "apiVersion": METRIC_ALERTS_API_VERSION,
            "name": rule_name(&["dlqctl", &r.target, &r.channel, tier.as_str()]),
            "location": "global",
            "tags": tags,
            "properties": {
                "description": description,
                "severity": severity,
                "enabled": true,
                "scopes": [scope],
                "evaluationFrequency": frequency,
                "windowSize": window,
                "criteria": {
                    "odata.type": "Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria",
                    "allOf": [{
                        "criterionType": "StaticThresholdCriterion",
                        "name": format!("{}-depth", tier.as_str()),
                        "metricName": metric,
                        "metricNamespace": METRIC_NAMESPACE,
                        "dimensions": [{"name": "EntityName", "operator": "Include", "values": [entity]}],
                        "operator": "GreaterThan",
                        "threshold": t.threshold,
                        "timeAggregation": "Minimum",
                    }],
                },
                "autoMitigate": true,
                "actions": actions,
            },
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_the_shortest_azure_takes_at_least_as_long_as_the_alarm() {
        let w = |s| window(Duration::from_secs(s));
        assert_eq!(w(60), ("PT1M", "PT1M", 60));
        assert_eq!(w(300), ("PT5M", "PT1M", 300));
        assert_eq!(w(120), ("PT5M", "PT1M", 300));
        assert_eq!(w(3600), ("PT1H", "PT5M", 3600));
        assert_eq!(w(7200), ("PT6H", "PT5M", 21_600));
        assert_eq!(w(86_400), ("PT24H", "PT15M", 86_400));
        assert_eq!(w(200_000), ("PT24H", "PT15M", 86_400));
    }

    #[test]
    fn rule_names_lose_the_characters_azure_refuses() {
        assert_eq!(
            rule_name(&["dlqctl", "a/b", "c:d", "warning"]),
            "dlqctl-a-b-c-d-warning"
        );
    }
}
