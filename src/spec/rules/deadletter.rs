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
//! The same three rules apply to the invalid-message queue (`spec.invalid`), which holds
//! messages for people in the same way: each runs over a [`Held`] view of either queue, and
//! the messages and pointers name the block at fault.
//!
//! Depends on the resolved channel (the effective retention and alarms) and the SQS limits.

use super::pubsub::PUBSUB_MAX_RETENTION;
use super::sqs::SQS_MAX_RETENTION;
use crate::diag::Diagnostic;
use crate::spec::duration::Duration;
use crate::spec::load::Doc;
use crate::spec::model::{Backend, Channel, Tier};
use crate::spec::resolve::{AlarmsResolved, DiscardResolved, Resolved};

/// A queue or topic that holds failed messages for people: the dead-letter one or the
/// invalid-message one, as the rules of this module see it.
struct Held<'a> {
    /// The spec block: `deadLetter` or `invalid`.
    block: &'static str,
    /// `dead-letter` or `invalid-message` (before `queue`/`topic`).
    what: &'static str,
    /// `dead letters` or `invalid messages`.
    items: &'static str,
    name: &'a str,
    retention: Option<Duration>,
    discard: Option<&'a DiscardResolved>,
    alarms: &'a AlarmsResolved,
    /// Where the age alarm is written: `/spec/alarms` or `/spec/invalid/alarms`.
    alarms_pointer: &'static str,
}

impl<'a> Held<'a> {
    fn dead_letter(r: &'a Resolved) -> Self {
        Held {
            block: "deadLetter",
            what: "dead-letter",
            items: "dead letters",
            name: &r.dead_letter,
            retention: r.dead_letter_retention,
            discard: r.discard.as_ref(),
            alarms: &r.alarms,
            alarms_pointer: "/spec/alarms",
        }
    }

    fn invalid(r: &'a Resolved) -> Option<Self> {
        let i = r.invalid.as_ref()?;
        Some(Held {
            block: "invalid",
            what: "invalid-message",
            items: "invalid messages",
            name: &i.name,
            retention: i.retention,
            discard: i.discard.as_ref(),
            alarms: &i.alarms,
            alarms_pointer: "/spec/invalid/alarms",
        })
    }

    fn pointer(&self, field: &str) -> String {
        format!("/spec/{}/{field}", self.block)
    }
}

pub(super) fn check_dead_letter(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    for h in std::iter::once(Held::dead_letter(r)).chain(Held::invalid(r)) {
        retention_implicit(doc, r.backend, &h, out);
        discard_undeclared(doc, r.backend, &h, out);
        discard_before_alarm(doc, &h, out);
    }
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

/// `deadletter/retention-implicit` (warning): a Kafka dead-letter (or invalid-message) topic
/// without a retention.
fn retention_implicit(doc: &Doc<Channel>, backend: Backend, h: &Held, out: &mut Vec<Diagnostic>) {
    if backend != Backend::Kafka || h.retention.is_some() {
        return;
    }
    let block = format!("/spec/{}", h.block);
    let at = if doc.locs.has(&block) {
        &block
    } else {
        "/spec"
    };
    out.push(
        Diagnostic::warning(
            "deadletter/retention-implicit",
            format!(
                "the {} topic `{}` has no retention: it gets the broker's default (`log.retention.ms`, 7d on stock Kafka) and {} are deleted after that without anyone having decided so",
                h.what, h.name, h.items
            ),
        )
        .at(doc.locs.key(at))
        .hint(format!("write the decision: `{}: {{discard: {{after: 7d, reason: \"...\"}}}}` (Kafka deletes records after a retention, so keeping them is a retention too)", h.block)),
    );
}

/// `deadletter/discard-undeclared` (warning; an error from dlqctl/v2): the dead-letter queue
/// drops messages after its retention and `discard.reason` does not say why.
fn discard_undeclared(doc: &Doc<Channel>, backend: Backend, h: &Held, out: &mut Vec<Diagnostic>) {
    let Some(after) = h.retention else {
        return;
    };
    if !drops_messages(backend, Some(after)) {
        return;
    }
    if h.discard.is_some_and(|d| d.reason.is_some()) {
        return;
    }
    let (w, items, block) = (h.what, h.items, h.block);
    let what = match backend {
        Backend::Sqs => {
            format!("SQS deletes {items} after {after}, less than its 14d maximum")
        }
        Backend::Rabbitmq if block == "invalid" => format!(
            "the invalid-message queue's message-ttl is {after}: RabbitMQ drops every invalid message older than that"
        ),
        Backend::Rabbitmq => format!(
            "the dead-letter queue's message-ttl is {after}: RabbitMQ drops every dead letter older than that (the DLQ has no dead-letter exchange)"
        ),
        Backend::Kafka => format!(
            "the {w} topic's retention.ms is {after}: Kafka deletes {items} older than that"
        ),
        Backend::Pubsub => format!(
            "Pub/Sub deletes dead letters after {after}, less than a subscription's 7d maximum"
        ),
    };
    let one = if block == "invalid" {
        "an invalid message"
    } else {
        "a dead letter"
    };
    let (pointer, hint) = if h.discard.is_some() {
        (
            h.pointer("discard"),
            format!("add `reason:` to `{block}.discard`: why may {one} be dropped after {after}?"),
        )
    } else {
        let keep = match backend {
            Backend::Sqs => ", or keep them 14d (the SQS maximum)",
            Backend::Rabbitmq => {
                ", or remove `retention` (RabbitMQ then keeps them until they are consumed)"
            }
            Backend::Kafka => "",
            Backend::Pubsub => ", or keep them 7d (the Pub/Sub maximum)",
        };
        (
            h.pointer("retention"),
            format!(
                "if dropping them is intended, write why: `discard: {{after: {after}, reason: \"...\"}}` in place of `retention`{keep}"
            ),
        )
    };
    let at = if doc.locs.has(&pointer) {
        doc.locs.key(&pointer)
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
fn discard_before_alarm(doc: &Doc<Channel>, h: &Held, out: &mut Vec<Diagnostic>) {
    let (Some(discard), Some(age)) = (h.discard, &h.alarms.oldest_message_age) else {
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
        let pointer = format!("{}/oldestMessageAge/{key}", h.alarms_pointer);
        let field = pointer.trim_start_matches('/').replace('/', ".");
        let (items, block) = (h.items, h.block);
        let oldest = if block == "invalid" {
            "invalid message"
        } else {
            "dead letter"
        };
        out.push(
            Diagnostic::error(
                "deadletter/discard-before-alarm",
                format!(
                    "`{field}` fires at the earliest when the oldest {oldest} is {fires} old (threshold {} + period × evaluationPeriods {}), but {items} are discarded after {}: the message is gone before anyone is told",
                    Duration::from_secs(t.threshold),
                    Duration::from_millis(wait),
                    discard.after
                ),
            )
            .at(doc.locs.value(&pointer))
            .hint(format!("alarm well before the discard, or discard later (`{block}.discard.after`)")),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{findings_of, rules_on};
    use super::*;

    /// One second less than `d`.
    fn just_under(d: Duration) -> Duration {
        Duration::from_millis(d.as_millis() - 1000)
    }

    #[test]
    fn a_queue_drops_messages_below_its_backend_s_maximum_and_kafka_always() {
        // No retention: only Kafka deletes (the broker's default); the others keep them.
        assert!(drops_messages(Backend::Kafka, None));
        for b in [Backend::Sqs, Backend::Rabbitmq, Backend::Pubsub] {
            assert!(!drops_messages(b, None), "{b:?}");
        }
        // SQS and Pub/Sub: their maximum is no decision, one second less is.
        for (b, max) in [
            (Backend::Sqs, SQS_MAX_RETENTION),
            (Backend::Pubsub, PUBSUB_MAX_RETENTION),
        ] {
            assert!(!drops_messages(b, Some(max)), "{b:?} at its maximum");
            assert!(drops_messages(b, Some(just_under(max))), "{b:?} below it");
        }
        // RabbitMQ's message-ttl and Kafka's retention.ms always delete.
        for b in [Backend::Rabbitmq, Backend::Kafka] {
            assert!(
                drops_messages(b, Some(Duration::from_secs(30 * 86_400))),
                "{b:?}"
            );
        }
    }

    #[test]
    fn a_pubsub_dead_letter_retention_below_seven_days_needs_a_reason() {
        let rules = |retention: &str| -> Vec<&'static str> {
            findings_of(
                "pubsub",
                &format!("  retry: {{maxAttempts: 5}}\n  deadLetter: {{retention: {retention}}}\n  lint: {{allow: [alarms/missing]}}\n"),
                "",
            )
            .iter()
            .map(|d| d.rule)
            .collect()
        };
        assert_eq!(rules("7d"), Vec::<&str>::new());
        assert_eq!(rules("6d"), ["deadletter/discard-undeclared"]);
    }

    #[test]
    fn an_alarm_that_fires_exactly_at_the_discard_is_too_late() {
        // 58m + 2 × 60s = 1h: the message is discarded as the alarm fires.
        let found: Vec<_> = super::super::tests::findings_on(
            "sqs",
            "  retention: 10m\n  deadLetter: {discard: {after: 1h, reason: r}}\n  alarms:\n    oldestMessageAge: {above: 58m, period: 60s, evaluationPeriods: 2}\n    actions: [\"arn:aws:sns:eu-west-1:1:o\"]\n",
            "",
        )
        .into_iter()
        .filter(|d| d.rule != "sqs/backoff-consumer")
        .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].rule, "deadletter/discard-before-alarm");
        assert_eq!(
            found[0].message,
            "`spec.alarms.oldestMessageAge.above` fires at the earliest when the oldest dead letter is 1h old (threshold 58m + period × evaluationPeriods 2m), but dead letters are discarded after 1h: the message is gone before anyone is told"
        );
        // One minute earlier is in time.
        assert_eq!(
            rules_on(
                "sqs",
                "  retention: 10m\n  deadLetter: {discard: {after: 1h, reason: r}}\n  alarms:\n    oldestMessageAge: {above: 57m, period: 60s, evaluationPeriods: 2}\n    actions: [\"arn:aws:sns:eu-west-1:1:o\"]\n",
                ""
            ),
            Vec::<&str>::new()
        );
    }
}
