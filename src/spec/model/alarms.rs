//! `spec.alarms`: alarms on the dead-letter queue (CloudWatch alarms on SQS targets).
//!
//! Kept apart because only one backend provisions them today, and the rules for them
//! (`spec::rules::alarms`) follow CloudWatch's limits. Depends only on `spec::duration`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::duration::Duration;

/// Alarms on the dead-letter queue (provisioned as CloudWatch alarms on SQS targets).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Alarms {
    /// Fires when more than `above` messages wait in the dead-letter queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<DepthAlarm>,
    /// Fires when the oldest dead letter is older than `above`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_message_age: Option<AgeAlarm>,
    /// Where alarms notify (e.g. SNS topic ARNs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DepthAlarm {
    #[schemars(range(min = 0))]
    pub above: u64,
    /// Length of one evaluation period. Default 60s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<Duration>,
    /// Periods over threshold before the alarm fires. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub evaluation_periods: Option<u32>,
    /// The alarm's description (AlarmDescription). Default: `dlqctl channel <channel>: …`
    /// saying what fired; `""` for none (as `dlqctl import` writes for an alarm without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgeAlarm {
    pub above: Duration,
    /// Length of one evaluation period. Default 60s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<Duration>,
    /// Periods over threshold before the alarm fires. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub evaluation_periods: Option<u32>,
    /// The alarm's description (AlarmDescription). Default: `dlqctl channel <channel>: …`
    /// saying what fired; `""` for none (as `dlqctl import` writes for an alarm without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
}
