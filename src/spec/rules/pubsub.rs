//! Rules for channels on a Google Cloud Pub/Sub target: Pub/Sub's limits on a subscription
//! (maxDeliveryAttempts 5–100, backoff 0–600 s, ack deadline 10–600 s in whole seconds,
//! retention 10 min–7 d) and what its native backoff means for `retry.backoff`.
//!
//! A dead-letter topic with no subscription drops every dead letter; dlqctl always creates
//! one (`deadLetter.subscription`), so that trap has no rule: it cannot be written.
//!
//! Depends on `alarms`, the shared helpers in `rules` and the resolved channel.

use super::common::{check_retention_ranges, jitter_info, range_error};
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
    // The alarms become Cloud Monitoring alert policies (`dlqctl alerts --format
    // cloud-monitoring`): the shared rules, and Cloud Monitoring's limits.
    super::alarms::check_alarms(doc, r, out);
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
    // `pubsub/subscription-expires`: the dead-letter subscription goes, with its dead letters,
    // after that long without a pull.
    if let Some(after) = p.expire_after {
        out.push(
            Diagnostic::warning(
                "pubsub/subscription-expires",
                format!(
                    "`pubsub.expireAfter` is {after}: Pub/Sub deletes the dead-letter subscription `{}`, and the dead letters it holds, when nobody pulls from it that long (and the consumer's subscription when its consumer stops)",
                    p.dead_letter_subscription
                ),
            )
            .at(at("/spec/pubsub/expireAfter"))
            .hint("remove `pubsub.expireAfter`: dlqctl then sets the subscriptions to never expire (an in-place update)"),
        );
    }
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
    check_retention_ranges(
        doc,
        "pubsub/retention-range",
        (PUBSUB_MIN_RETENTION, PUBSUB_MAX_RETENTION),
        "Pub/Sub",
        "a Pub/Sub subscription keeps messages between 10m and 7d (messageRetentionDuration)",
        out,
    );
    jitter_info(doc, r.backend, out);
}

#[cfg(test)]
mod tests {
    //! Pub/Sub's limits at their edges: the largest value Pub/Sub takes passes, the next one is
    //! refused.

    use super::super::tests::findings_of;

    /// The rule ids of a Pub/Sub channel with these `spec` lines (`alarms/missing` silenced).
    fn pubsub_rules(spec: &str) -> Vec<&'static str> {
        findings_of(
            "pubsub",
            &format!("{spec}  lint: {{allow: [alarms/missing]}}\n"),
            "",
        )
        .iter()
        .map(|d| d.rule)
        .collect()
    }

    #[test]
    fn a_backoff_may_be_six_hundred_seconds_but_not_more() {
        let spec = |initial: &str, max: &str| {
            format!("  retry: {{maxAttempts: 5, backoff: {{initial: {initial}, max: {max}}}}}\n")
        };
        assert_eq!(pubsub_rules(&spec("600s", "600s")), Vec::<&str>::new());
        assert_eq!(
            pubsub_rules(&spec("601s", "601s")),
            ["pubsub/backoff-range", "pubsub/backoff-range"]
        );
    }

    #[test]
    fn the_ack_deadline_is_whole_seconds_from_ten_to_six_hundred() {
        let spec =
            |ack: &str| format!("  retry: {{maxAttempts: 5}}\n  pubsub: {{ackDeadline: {ack}}}\n");
        assert_eq!(pubsub_rules(&spec("10s")), Vec::<&str>::new());
        assert_eq!(pubsub_rules(&spec("600s")), Vec::<&str>::new());
        for bad in ["9s", "601s", "10500ms"] {
            assert_eq!(pubsub_rules(&spec(bad)), ["pubsub/ack-deadline"], "{bad}");
        }
    }

    #[test]
    fn max_attempts_is_five_to_a_hundred() {
        let spec = |n: u32| format!("  retry: {{maxAttempts: {n}}}\n");
        assert_eq!(pubsub_rules(&spec(5)), Vec::<&str>::new());
        assert_eq!(pubsub_rules(&spec(100)), ["retry/excessive"]);
        assert_eq!(pubsub_rules(&spec(4)), ["pubsub/max-attempts"]);
        assert_eq!(
            pubsub_rules(&spec(101)),
            ["retry/excessive", "pubsub/max-attempts"]
        );
    }
}
