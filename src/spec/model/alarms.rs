//! `spec.alarms`: alarms on the dead-letter queue, with optional warning and critical tiers.
//!
//! One model for every backend: on SQS targets `apply` provisions the alarms as CloudWatch
//! alarms (one per tier); on RabbitMQ and Kafka targets `dlqctl alerts` writes them as
//! Prometheus alerting rules. A single threshold (`above`) is the older form and stays valid;
//! `warning`/`critical` are the tiered form. Which combinations make sense is checked by
//! `spec::rules::alarms`. `deadLetterRate` watches the flow rather than the backlog: the share
//! of the source's messages that is dead-lettered (a Prometheus rule over the exporter's flow
//! counters on RabbitMQ and Kafka, a CloudWatch metric-math alarm on SQS, a Cloud Monitoring
//! alert policy on Pub/Sub). Depends only on `spec::duration` and `spec::ratio`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::duration::Duration;
use crate::spec::ratio::Ratio;

/// Alarms on the dead-letter queue: CloudWatch alarms on SQS targets (`dlqctl apply`),
/// Prometheus alerting rules on RabbitMQ and Kafka targets (`dlqctl alerts`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Alarms {
    /// Messages waiting in the dead-letter queue: `above: N` (one alarm), or tiers
    /// `warning: N` / `critical: N` (one alarm per tier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<DepthAlarm>,
    /// Age of the oldest dead letter: `above: 30m` (one alarm), or tiers `warning: 30m` /
    /// `critical: 2h` (one alarm per tier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_message_age: Option<AgeAlarm>,
    /// The share of the source's messages that is dead-lettered, measured over `period`:
    /// `above: 0.1%` (one alarm), or tiers `warning: 0.1%` / `critical: 1%`. Only in
    /// `spec.alarms`: the rate counts every dead-letter destination of the channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_rate: Option<RateAlarm>,
    /// Where CloudWatch alarms notify (SNS topic ARNs, ...), or on Azure Service Bus the
    /// action groups of its Azure Monitor metric alerts (their resource ids): a list for every
    /// alarm, or `{warning: [...], critical: [...]}` per tier (a single-threshold alarm uses
    /// `critical`). Prometheus rules carry no actions: Alertmanager routes them by their labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<AlarmActions>,
    /// The runbook people follow when an alarm of this channel fires (an http(s) URL): the
    /// `runbook_url` annotation of Prometheus rules, and part of CloudWatch's default
    /// AlarmDescription. Usually set once in `Defaults`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub runbook: Option<String>,
}

/// The two severities an alarm can have. `warning` tells someone early; `critical` pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    Warning,
    Critical,
}

impl Tier {
    pub const ALL: [Tier; 2] = [Tier::Warning, Tier::Critical];

    /// `warning` / `critical`: the spec key, the `{tier}` of alarm names, the `severity` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Warning => "warning",
            Tier::Critical => "critical",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DepthAlarm {
    /// One alarm: fires when more than `above` messages wait. Not with `warning`/`critical`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub above: Option<u64>,
    /// Warning tier: fires when more than this many messages wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub warning: Option<u64>,
    /// Critical tier: fires when more than this many messages wait (above `warning`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub critical: Option<u64>,
    /// Length of one evaluation period. Default 60s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<Duration>,
    /// Periods over threshold before the alarm fires. Default 1. (Prometheus: the rule's
    /// `for` is period × evaluationPeriods.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub evaluation_periods: Option<u32>,
    /// The alarm's description (CloudWatch AlarmDescription; Prometheus `description`
    /// annotation). Default: `dlqctl channel <channel>: …` saying what fired; `""` for none
    /// (as `dlqctl import` writes for an alarm without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgeAlarm {
    /// One alarm: fires when the oldest dead letter is older than this. Not with
    /// `warning`/`critical`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<Duration>,
    /// Warning tier: fires when the oldest dead letter is older than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<Duration>,
    /// Critical tier: fires when the oldest dead letter is older than this (above `warning`,
    /// below the dead-letter retention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical: Option<Duration>,
    /// Length of one evaluation period. Default 60s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<Duration>,
    /// Periods over threshold before the alarm fires. Default 1. (Prometheus: the rule's
    /// `for` is period × evaluationPeriods.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub evaluation_periods: Option<u32>,
    /// The alarm's description (CloudWatch AlarmDescription; Prometheus `description`
    /// annotation). Default: `dlqctl channel <channel>: …` saying what fired; `""` for none
    /// (as `dlqctl import` writes for an alarm without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
}

/// `alarms.deadLetterRate`: dead-lettered messages over source messages, per `period`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RateAlarm {
    /// One alarm: fires when more than this share of the source's messages is dead-lettered
    /// (`0.1%`). Not with `warning`/`critical`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<Ratio>,
    /// Warning tier: fires above this share (`0.1%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<Ratio>,
    /// Critical tier: fires above this share (above `warning`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical: Option<Ratio>,
    /// The window the rate is measured over (Prometheus `rate(...[period])`, CloudWatch
    /// Period, Cloud Monitoring alignment period). Default 5m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<Duration>,
    /// How long the rate stays above the threshold before the alarm fires (Prometheus `for`;
    /// on SQS a whole number of periods, CloudWatch's EvaluationPeriods = for / period).
    /// Default 10m.
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<Duration>,
    /// The alarm's description (CloudWatch AlarmDescription; Prometheus `description`
    /// annotation; the alert policy's documentation). Default: `dlqctl channel <channel>: …`
    /// saying what fired; `""` for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
}

/// `alarms.actions`: one list for every alarm, or one list per tier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AlarmActions {
    All(Vec<String>),
    PerTier(TierActions),
}

/// `alarms.actions: {warning: [...], critical: [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TierActions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical: Option<Vec<String>>,
}

impl AlarmActions {
    /// The actions of one tier (`None`: the single-threshold form, which uses `critical`'s).
    pub fn for_tier(&self, tier: Option<Tier>) -> &[String] {
        match self {
            AlarmActions::All(v) => v,
            AlarmActions::PerTier(t) => match tier.unwrap_or(Tier::Critical) {
                Tier::Warning => t.warning.as_deref().unwrap_or(&[]),
                Tier::Critical => t.critical.as_deref().unwrap_or(&[]),
            },
        }
    }

    /// Every action with the JSON pointer suffix it sits at (`0`, `warning/0`, ...).
    pub fn entries(&self) -> Vec<(String, &str)> {
        match self {
            AlarmActions::All(v) => v
                .iter()
                .enumerate()
                .map(|(i, a)| (i.to_string(), a.as_str()))
                .collect(),
            AlarmActions::PerTier(t) => {
                [(Tier::Warning, &t.warning), (Tier::Critical, &t.critical)]
                    .into_iter()
                    .flat_map(|(tier, list)| {
                        list.iter()
                            .flatten()
                            .enumerate()
                            .map(move |(i, a)| (format!("{tier}/{i}"), a.as_str()))
                    })
                    .collect()
            }
        }
    }

    /// Whether no alarm would notify anyone.
    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }
}

impl JsonSchema for AlarmActions {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AlarmActions".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // One schema with a type union (not `anyOf`), so an error reads "must be an array or
        // an object" and an unknown tier gets a did-you-mean.
        let list = schemars::json_schema!({"type": "array", "items": {"type": "string"}});
        schemars::json_schema!({
            "description": "A list of ARNs for every alarm, or `{warning: [...], critical: [...]}`.",
            "type": ["array", "object"],
            "items": {"type": "string"},
            "properties": {"warning": list, "critical": list},
            "additionalProperties": false
        })
    }
}

#[cfg(test)]
mod tests {
    //! Tiers and where alarm actions sit.

    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn tiers_are_named_as_in_the_spec() {
        assert_eq!(Tier::ALL.map(Tier::as_str), ["warning", "critical"]);
        assert_eq!(
            Tier::ALL.map(|t| t.to_string()),
            ["warning".to_owned(), "critical".to_owned()]
        );
        assert!(Tier::Warning < Tier::Critical);
    }

    #[test]
    fn one_list_serves_every_tier() {
        let all = AlarmActions::All(list(&["arn:a", "arn:b"]));
        for tier in [None, Some(Tier::Warning), Some(Tier::Critical)] {
            assert_eq!(all.for_tier(tier), ["arn:a", "arn:b"]);
        }
        assert_eq!(
            all.entries(),
            [("0".to_owned(), "arn:a"), ("1".to_owned(), "arn:b")]
        );
        assert!(!all.is_empty());
        assert!(AlarmActions::All(Vec::new()).is_empty());
    }

    #[test]
    fn per_tier_lists_and_the_single_threshold_uses_critical() {
        let per = AlarmActions::PerTier(TierActions {
            warning: Some(list(&["arn:w"])),
            critical: Some(list(&["arn:c0", "arn:c1"])),
        });
        assert_eq!(per.for_tier(Some(Tier::Warning)), ["arn:w"]);
        assert_eq!(per.for_tier(Some(Tier::Critical)), ["arn:c0", "arn:c1"]);
        assert_eq!(per.for_tier(None), ["arn:c0", "arn:c1"]);
        assert_eq!(
            per.entries(),
            [
                ("warning/0".to_owned(), "arn:w"),
                ("critical/0".to_owned(), "arn:c0"),
                ("critical/1".to_owned(), "arn:c1")
            ]
        );
        let warn_only = AlarmActions::PerTier(TierActions {
            warning: Some(list(&["arn:w"])),
            critical: None,
        });
        assert_eq!(warn_only.for_tier(None), Vec::<String>::new());
        assert!(!warn_only.is_empty());
        assert!(AlarmActions::PerTier(TierActions::default()).is_empty());
        assert_eq!(
            AlarmActions::PerTier(TierActions::default()).for_tier(Some(Tier::Warning)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_actions_schema_is_one_type_union() {
        let mut generator = schemars::SchemaGenerator::default();
        let schema = AlarmActions::json_schema(&mut generator).to_value();
        assert_eq!(AlarmActions::schema_name(), "AlarmActions");
        assert_eq!(schema["type"], serde_json::json!(["array", "object"]));
        assert_eq!(schema["additionalProperties"], serde_json::json!(false));
        assert_eq!(
            schema["properties"]["warning"],
            serde_json::json!({"type": "array", "items": {"type": "string"}})
        );
    }
}
