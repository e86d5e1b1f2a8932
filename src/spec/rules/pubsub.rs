//! Rules for channels on a Google Cloud Pub/Sub target: Pub/Sub's limits on a subscription
//! (maxDeliveryAttempts 5–100, backoff 0–600 s, ack deadline 10–600 s in whole seconds,
//! retention 10 min–7 d) and what its native backoff means for `retry.backoff`.
//!
//! A dead-letter topic with no subscription drops every dead letter; dlqctl always creates
//! one (`deadLetter.subscription`), so that trap has no rule: it cannot be written.
//!
//! Depends on `alarms`, the shared helpers in `rules` and the resolved channel.

use super::range_error;
use crate::diag::Diagnostic;
use crate::spec::duration::Duration;
use crate::spec::load::Doc;
use crate::spec::model::Channel;
use crate::spec::resolve::Resolved;

pub const PUBSUB_MIN_ATTEMPTS: u32 = 5;
pub const PUBSUB_MAX_ATTEMPTS: u32 = 100;
pub const PUBSUB_MAX_BACKOFF: Duration = Duration::from_secs(600);
pub const PUBSUB_MIN_ACK_DEADLINE: Duration = Duration::from_secs(10);
pub const PUBSUB_MAX_ACK_DEADLINE: Duration = Duration::from_secs(600);
pub const PUBSUB_MIN_RETENTION: Duration = Duration::from_secs(600);
pub const PUBSUB_MAX_RETENTION: Duration = Duration::from_secs(7 * 86_400);

pub(super) fn check_pubsub(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let at = |p: &str| doc.locs.value(p);
    // `pubsub/max-attempts`: maxDeliveryAttempts is 5 to 100.
    if !(PUBSUB_MIN_ATTEMPTS..=PUBSUB_MAX_ATTEMPTS).contains(&r.max_attempts) {
        out.push(
            Diagnostic::error(
                "pubsub/max-attempts",
                format!(
                    "`spec.retry.maxAttempts` is {}, but Pub/Sub's maxDeliveryAttempts is {PUBSUB_MIN_ATTEMPTS} to {PUBSUB_MAX_ATTEMPTS}",
                    r.max_attempts
                ),
            )
            .at(at("/spec/retry/maxAttempts"))
            .hint("Pub/Sub refuses a dead-letter policy outside 5–100 delivery attempts"),
        );
    }
    let Some(p) = &r.pubsub else { return };
    // `pubsub/backoff-range`: retryPolicy's backoffs are 0 to 600 s.
    if let Some((min, max)) = p.backoff {
        for (field, pointer, v) in [
            (
                "spec.retry.backoff.initial",
                "/spec/retry/backoff/initial",
                min,
            ),
            ("spec.retry.backoff.max", "/spec/retry/backoff/max", max),
        ] {
            if v > PUBSUB_MAX_BACKOFF {
                out.push(
                    range_error(
                        "pubsub/backoff-range",
                        field,
                        v,
                        Duration::from_secs(0),
                        PUBSUB_MAX_BACKOFF,
                        "Pub/Sub",
                    )
                    .at(at(if doc.locs.has(pointer) {
                        pointer
                    } else {
                        "/spec/retry/backoff"
                    }))
                    .hint("Pub/Sub's retryPolicy backs off between 0s and 600s"),
                );
            }
        }
    }
    // `pubsub/ack-deadline`: 10 to 600 whole seconds.
    let ack = p.ack_deadline;
    if !(PUBSUB_MIN_ACK_DEADLINE..=PUBSUB_MAX_ACK_DEADLINE).contains(&ack)
        || !ack.as_millis().is_multiple_of(1000)
    {
        out.push(
            Diagnostic::error(
                "pubsub/ack-deadline",
                format!(
                    "`spec.pubsub.ackDeadline` is {ack}; Pub/Sub's ackDeadlineSeconds is a whole number of seconds from {PUBSUB_MIN_ACK_DEADLINE} to {PUBSUB_MAX_ACK_DEADLINE}"
                ),
            )
            .at(at("/spec/pubsub/ackDeadline")),
        );
    }
    // `pubsub/retention-range`: a subscription keeps messages 10 min to 7 d.
    super::check_retention_ranges(
        doc,
        "pubsub/retention-range",
        (PUBSUB_MIN_RETENTION, PUBSUB_MAX_RETENTION),
        "Pub/Sub",
        "a Pub/Sub subscription keeps messages between 10m and 7d (messageRetentionDuration)",
        out,
    );
    super::channel::jitter_info(doc, r.backend, out);
}
