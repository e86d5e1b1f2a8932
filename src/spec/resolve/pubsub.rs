//! A channel's Pub/Sub settings: the target's project, the two subscriptions (the consumer's
//! on the main topic, the one that holds the dead letters), the ack deadline and the retry
//! policy's backoff.

use super::common::{ResolveError, expand, template_error};
use super::defaults::{PUBSUB_DEFAULT_ACK_DEADLINE, PUBSUB_DEFAULT_MAX_BACKOFF};
use crate::spec::duration::Duration;
use crate::spec::model::{ChannelSpec, Target};

/// A Pub/Sub channel's subscriptions and their settings (`main` and `dead_letter` are the
/// topics).
#[derive(Debug, Clone, PartialEq)]
pub struct PubsubResolved {
    /// The target's project.
    pub project: String,
    /// The consumer's subscription on the main topic, with the dead-letter policy.
    pub subscription: String,
    /// The dead-letter topic's subscription, which holds the dead letters.
    pub dead_letter_subscription: String,
    pub ack_deadline: Duration,
    /// retryPolicy (minimum, maximum backoff); `None`: no retry policy (redelivery at once).
    pub backoff: Option<(Duration, Duration)>,
    /// Both subscriptions' `expirationPolicy.ttl`; `None`: they never expire.
    pub expire_after: Option<Duration>,
}

/// `spec.pubsub` and `deadLetter.subscription` with defaults filled in, the subscription
/// names expanded.
pub(super) fn resolve(
    spec: &ChannelSpec,
    name: &str,
    target: &Target,
) -> Result<PubsubResolved, ResolveError> {
    let o = spec.pubsub.clone().unwrap_or_default();
    let subscription = expand(
        o.subscription.as_deref().unwrap_or("{channel}-sub"),
        name,
        None,
        None,
    )
    .map_err(|m| template_error("/spec/pubsub/subscription", m))?;
    let dead_letter_subscription = expand(
        spec.dead_letter
            .as_ref()
            .and_then(|d| d.subscription.as_deref())
            .unwrap_or("{channel}-dlq-sub"),
        name,
        None,
        None,
    )
    .map_err(|m| template_error("/spec/deadLetter/subscription", m))?;
    let backoff = spec
        .retry
        .as_ref()
        .and_then(|r| r.backoff.as_ref())
        .map(|b| {
            (
                b.initial,
                b.max.unwrap_or(PUBSUB_DEFAULT_MAX_BACKOFF.max(b.initial)),
            )
        });
    Ok(PubsubResolved {
        project: target.project.clone().unwrap_or_default(),
        subscription,
        dead_letter_subscription,
        ack_deadline: o.ack_deadline.unwrap_or(PUBSUB_DEFAULT_ACK_DEADLINE),
        backoff,
        expire_after: o.expire_after,
    })
}
