//! Rules on how long a dead-letter queue keeps its messages, for every backend: dropping dead
//! letters is fine when their business context has expired, but only as a decision written
//! down (`deadLetter.discard` with its `reason`), never as a default nobody chose.
//!
//! `deadletter/retention-implicit`: the retention is whatever the broker does by default (a
//! Kafka dead-letter topic without a retention keeps the broker's `log.retention.ms`; SQS and
//! RabbitMQ never get here: dlqctl writes SQS's 14-day maximum, and a RabbitMQ queue without a
//! TTL keeps messages until they are consumed). `deadletter/discard-undeclared`: the queue drops
//! messages and nobody wrote why (a warning in dlqctl/v1, an error from v2).
//! `deadletter/discard-before-alarm`: a discard that comes before the age alarm can fire.
//!
//! Depends on the resolved channel (the effective retention and alarms) and the SQS limits.

use super::pubsub::PUBSUB_MAX_RETENTION;
use super::sqs::SQS_MAX_RETENTION;
use crate::diag::Diagnostic;
use crate::spec::duration::Duration;
use crate::spec::load::Doc;
use crate::spec::model::{Backend, Channel, Tier};
use crate::spec::resolve::Resolved;

/// Where the dead-letter retention is written: `discard.after`, or `retention`.
pub(super) fn retention_pointer(doc: &Doc<Channel>) -> &'static str {
    let discard = doc
        .value
        .spec
        .dead_letter
        .as_ref()
        .is_some_and(|d| d.discard.is_some());
    if discard {
        "/spec/deadLetter/discard/after"
    } else {
        "/spec/deadLetter/retention"
    }
}

/// The field name for messages: `deadLetter.discard.after` or `deadLetter.retention`.
pub(super) fn retention_field(doc: &Doc<Channel>) -> &'static str {
    if retention_pointer(doc).ends_with("after") {
        "spec.deadLetter.discard.after"
    } else {
        "spec.deadLetter.retention"
    }
}

pub(super) fn check_dead_letter(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    retention_implicit(doc, r, out);
    discard_undeclared(doc, r, out);
    discard_before_alarm(doc, r, out);
}

/// Whether the dead-letter queue drops messages after its retention (rather than keeping them
/// until someone deals with them, or as long as the backend can).
pub fn drops_messages(backend: Backend, retention: Option<Duration>) -> bool {
    match (backend, retention) {
        (_, None) => backend == Backend::Kafka,
        (Backend::Sqs, Some(d)) => d < SQS_MAX_RETENTION,
        (Backend::Pubsub, Some(d)) => d < PUBSUB_MAX_RETENTION,
        (Backend::Rabbitmq | Backend::Kafka, Some(_)) => true,
    }
}

/// `deadletter/retention-implicit` (warning): a Kafka dead-letter topic without a retention.
fn retention_implicit(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    if r.backend != Backend::Kafka || r.dead_letter_retention.is_some() {
        return;
    }
    let at = if doc.locs.has("/spec/deadLetter") {
        "/spec/deadLetter"
    } else {
        "/spec"
    };
    out.push(
        Diagnostic::warning(
            "deadletter/retention-implicit",
            format!(
                "the dead-letter topic `{}` has no retention: it gets the broker's default (`log.retention.ms`, 7d on stock Kafka) and dead letters are deleted after that without anyone having decided so",
                r.dead_letter
            ),
        )
        .at(doc.locs.key(at))
        .hint("write the decision: `deadLetter: {discard: {after: 7d, reason: \"...\"}}` (Kafka deletes records after a retention, so keeping them is a retention too)"),
    );
}

/// `deadletter/discard-undeclared` (warning; an error from dlqctl/v2): the dead-letter queue
/// drops messages after its retention and `discard.reason` does not say why.
fn discard_undeclared(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let Some(after) = r.dead_letter_retention else {
        return;
    };
    if !drops_messages(r.backend, Some(after)) {
        return;
    }
    if r.discard.as_ref().is_some_and(|d| d.reason.is_some()) {
        return;
    }
    let what = match r.backend {
        Backend::Sqs => {
            format!("SQS deletes dead letters after {after}, less than its 14d maximum")
        }
        Backend::Rabbitmq => format!(
            "the dead-letter queue's message-ttl is {after}: RabbitMQ drops every dead letter older than that (the DLQ has no dead-letter exchange)"
        ),
        Backend::Kafka => format!(
            "the dead-letter topic's retention.ms is {after}: Kafka deletes dead letters older than that"
        ),
        Backend::Pubsub => format!(
            "Pub/Sub deletes dead letters after {after}, less than a subscription's 7d maximum"
        ),
    };
    let (pointer, hint) = if r.discard.is_some() {
        (
            "/spec/deadLetter/discard",
            format!(
                "add `reason:` to `deadLetter.discard`: why may a dead letter be dropped after {after}?"
            ),
        )
    } else {
        let keep = match r.backend {
            Backend::Sqs => ", or keep them 14d (the SQS maximum)",
            Backend::Rabbitmq => {
                ", or remove `retention` (RabbitMQ then keeps them until they are consumed)"
            }
            Backend::Kafka => "",
            Backend::Pubsub => ", or keep them 7d (the Pub/Sub maximum)",
        };
        (
            "/spec/deadLetter/retention",
            format!(
                "if dropping them is intended, write why: `discard: {{after: {after}, reason: \"...\"}}` in place of `retention`{keep}"
            ),
        )
    };
    let at = if doc.locs.has(pointer) {
        doc.locs.key(pointer)
    } else {
        doc.locs.key("/spec")
    };
    out.push(
        Diagnostic::warning(
            "deadletter/discard-undeclared",
            format!("{what}, and no reason for discarding them is written down (a warning in dlqctl/v1, an error from v2)"),
        )
        .at(at)
        .hint(hint),
    );
}

/// `deadletter/discard-before-alarm` (error): a tier of the age alarm would fire only after
/// the dead letters it is about are discarded. An alarm fires when the oldest message has been
/// older than the threshold for `period × evaluationPeriods`.
fn discard_before_alarm(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let (Some(discard), Some(age)) = (&r.discard, &r.alarms.oldest_message_age) else {
        return;
    };
    let wait = age
        .period
        .as_millis()
        .saturating_mul(u64::from(age.evaluation_periods));
    for t in &age.tiers {
        let fires = Duration::from_millis(t.threshold.saturating_mul(1000).saturating_add(wait));
        if fires < discard.after {
            continue;
        }
        let key = match t.tier {
            None => "above",
            Some(Tier::Warning) => "warning",
            Some(Tier::Critical) => "critical",
        };
        let pointer = format!("/spec/alarms/oldestMessageAge/{key}");
        out.push(
            Diagnostic::error(
                "deadletter/discard-before-alarm",
                format!(
                    "`spec.alarms.oldestMessageAge.{key}` fires at the earliest when the oldest dead letter is {fires} old (threshold {} + period × evaluationPeriods {}), but dead letters are discarded after {}: the message is gone before anyone is told",
                    Duration::from_secs(t.threshold),
                    Duration::from_millis(wait),
                    discard.after
                ),
            )
            .at(doc.locs.value(&pointer))
            .hint("alarm well before the discard, or discard later (`deadLetter.discard.after`)"),
        );
    }
}
