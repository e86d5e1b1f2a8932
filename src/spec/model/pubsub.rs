//! `spec.pubsub`: the settings that apply only to channels on a Google Cloud Pub/Sub target
//! (the consumer's subscription and its ack deadline).
//!
//! Depends only on `spec::duration`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::duration::Duration;

/// Pub/Sub settings; only for channels whose target is a Pub/Sub target.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PubsubOptions {
    /// Name template of the consumer's subscription on the main topic, the one that carries
    /// the dead-letter policy (`{channel}` is replaced). Default `{channel}-sub`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub subscription: Option<String>,
    /// How long Pub/Sub waits for an ack before it delivers again (`ackDeadlineSeconds`,
    /// 10s–600s, whole seconds). Default 10s, Pub/Sub's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_deadline: Option<Duration>,
    /// How long the channel's subscriptions (the consumer's and the dead-letter topic's) may go
    /// without a pull before Pub/Sub deletes them (`expirationPolicy.ttl`). Default: never
    /// (what dlqctl creates). Subscriptions made without an expiration policy (gcloud,
    /// Terraform) expire after 31 days, which import writes as `expireAfter: 31d`; lint warns
    /// (`pubsub/subscription-expires`): an expired dead-letter subscription takes its dead
    /// letters with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<Duration>,
}
