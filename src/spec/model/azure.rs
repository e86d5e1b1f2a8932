//! `spec.azure-servicebus`: the settings that apply only to channels on an Azure Service Bus
//! target (the peek-lock duration, dead-lettering on expiry, and a topic subscription in place
//! of a queue).
//!
//! Depends only on `spec::duration`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::duration::Duration;

/// Azure Service Bus settings; only for channels whose target is an Azure Service Bus target.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AzureServicebusOptions {
    /// How long a peek-locked message stays hidden from other receivers (`lockDuration`,
    /// 5s to 5m). Default 1m, Service Bus's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_duration: Option<Duration>,
    /// Whether a message that outlives `retention` (defaultMessageTimeToLive) is
    /// dead-lettered rather than dropped (`deadLetteringOnMessageExpiration`). Default true:
    /// an expired message is a dead letter too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_lettering_on_message_expiration: Option<bool>,
    /// Name template of a subscription (`{channel}` is replaced): with it, the channel's main
    /// entity is a topic (`spec.name`) and this subscription carries the retry budget and the
    /// dead-letter settings; without it, the main entity is a queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub subscription: Option<String>,
}
