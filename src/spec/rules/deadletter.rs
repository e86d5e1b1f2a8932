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
//! The other answer to a queue that drops messages is to keep them elsewhere first:
//! `deadLetter.archive` (`dlqctl archive --due` archives what would expire within `before`),
//! which silences `deadletter/discard-undeclared` for the dead-letter queue.
//! `deadletter/archive-before`: a `before` that makes every dead letter due on arrival (not
//! less than the retention), or none before it is gone (zero). `deadletter/archive-never-due`:
//! an archive on a queue that never drops by age (RabbitMQ without a TTL), or whose retention
//! is the broker's unknown default (Kafka without one).
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
use crate::spec::resolve::{AlarmsResolved, ArchiveResolved, DiscardResolved, Due, Resolved};

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
    /// `deadLetter.archive` (the dead-letter queue only: `archive` reads from it alone).
    archive: Option<&'a ArchiveResolved>,
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
            archive: r.archive.as_ref(),
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
            archive: None,
            alarms: &i.alarms,
            alarms_pointer: "/spec/invalid/alarms",
        })
    }

    fn pointer(&self, field: &str) -> String {
        format!("/spec/{}/{field}", self.block)
    }
}

pub(super) fn check_dead_letter(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    // Service Bus's built-in subqueue keeps dead letters until received, whatever the spec
    // says of a retention (`azure-servicebus/subqueue-retention` refuses one): nothing is
    // discarded there.
    let subqueue = r.azure.as_ref().is_some_and(|a| a.forward_to.is_none());
    let dead_letter = (!subqueue).then(|| Held::dead_letter(r));
    for h in dead_letter.into_iter().chain(Held::invalid(r)) {
        retention_implicit(doc, r.backend, &h, out);
        discard_undeclared(doc, r.backend, &h, out);
        discard_before_alarm(doc, &h, out);
    }
    archive_before(doc, r, out);
}

/// Whether the dead-letter queue drops messages after its retention (rather than keeping them
/// until someone deals with them, or as long as the backend can).
pub fn drops_messages(backend: Backend, retention: Option<Duration>) -> bool {
    match (backend, retention) {
        (_, None) => backend == Backend::Kafka,
        (Backend::Sqs, Some(d)) => d < SQS_MAX_RETENTION,
        (Backend::Pubsub, Some(d)) => d < PUBSUB_MAX_RETENTION,
        // Service Bus: a forward target's defaultMessageTimeToLive drops what outlives it (the
        // built-in subqueue has no retention of its own: lint refuses one there).
        (Backend::Rabbitmq | Backend::Kafka | Backend::AzureServicebus, Some(_)) => true,
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
    if h.discard.is_some_and(|d| d.reason.is_some()) || h.archive.is_some() {
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
        Backend::AzureServicebus => format!(
            "the {w} queue's defaultMessageTimeToLive is {after}: Service Bus drops {items} older than that (dlqctl does not dead-letter a dead-letter queue's expired messages)"
        ),
    };
    let one = if block == "invalid" {
        "an invalid message"
    } else {
        "a dead letter"
    };
    // The dead-letter queue has a second answer: archive what would expire, before it does
    // (`archive` reads the dead-letter queue only, so not for `invalid`).
    let archive = "archive them before they expire: `deadLetter.archive: {to: DIR | s3://bucket/prefix, before: 2d}`, with `dlqctl archive CHANNEL --due` on a schedule (docs/archive.md)";
    let (pointer, hint) = if h.discard.is_some() {
        let then_archive = if block == "deadLetter" {
            format!(" Or, to keep them past {after}, {archive}")
        } else {
            String::new()
        };
        (
            h.pointer("discard"),
            format!(
                "add `reason:` to `{block}.discard`: why may {one} be dropped after {after}?{then_archive}"
            ),
        )
    } else {
        let keep = match backend {
            Backend::Sqs => "; or keep them 14d, the SQS maximum",
            Backend::Rabbitmq => {
                "; or remove `retention` (RabbitMQ then keeps them until they are consumed)"
            }
            Backend::Kafka => "",
            Backend::Pubsub => "; or keep them 7d, the Pub/Sub maximum",
            Backend::AzureServicebus => {
                "; or remove `retention` (Service Bus then keeps them until they are received)"
            }
        };
        let or_archive = if block == "deadLetter" {
            format!("; or {archive}")
        } else {
            String::new()
        };
        (
            h.pointer("retention"),
            format!(
                "if dropping them is intended, write the decision: `{block}.discard: {{after: {after}, reason: \"...\"}}` in place of `retention`{or_archive}{keep}"
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
            format!(
                "{what}, and no reason for discarding them is written down{} (a warning in dlqctl/v1, an error from v2)",
                if block == "deadLetter" { " nor an archive declared" } else { "" }
            ),
        )
        .at(at)
        .hint(hint),
    );
}

/// `deadletter/archive-before` (error) and `deadletter/archive-never-due` (warning): what
/// `deadLetter.archive.before` makes of the dead-letter queue's retention.
fn archive_before(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let Some(a) = &r.archive else {
        return;
    };
    let pointer = if doc.locs.has("/spec/deadLetter/archive/before") {
        "/spec/deadLetter/archive/before"
    } else {
        "/spec/deadLetter/archive"
    };
    let at = if doc.locs.has(pointer) {
        doc.locs.key(pointer)
    } else {
        doc.locs.key("/spec")
    };
    let dlq = &r.dead_letter;
    let before = a.before;
    match Due::of(r.backend, r.dead_letter_retention, before) {
        Due::OlderThan(_) if before.as_millis() == 0 => out.push(
            Diagnostic::error(
                "deadletter/archive-before",
                "`deadLetter.archive.before` is 0s: a dead letter is due only as it expires, so `archive --due` comes too late for every one of them",
            )
            .at(at)
            .hint("give it the time between two scheduled runs and some: `before: 2d` for a daily run"),
        ),
        Due::OlderThan(horizon) if horizon.as_millis() == 0 => {
            let retention = r.dead_letter_retention.unwrap_or(before);
            out.push(
                Diagnostic::error(
                    "deadletter/archive-before",
                    format!(
                        "`deadLetter.archive.before` ({before}) is not less than the retention of `{dlq}` ({retention}): every dead letter is due the moment it arrives, so `archive --due` takes the whole queue on each run (with `--delete`, nothing stays for people to look at)"
                    ),
                )
                .at(at)
                .hint(format!(
                    "make `before` less than {retention} (and longer than the time between two runs); to archive everything, run `dlqctl archive` without `--due`"
                )),
            );
        }
        Due::OlderThan(_) => {}
        Due::Never => out.push(
            Diagnostic::warning(
                "deadletter/archive-never-due",
                format!(
                    "`deadLetter.archive` on `{dlq}`, which drops no dead letter by age (no `message-ttl`: RabbitMQ keeps them until they are consumed): nothing is ever due, and `archive --due` archives nothing"
                ),
            )
            .at(doc.locs.key(if doc.locs.has("/spec/deadLetter/archive") { "/spec/deadLetter/archive" } else { "/spec" }))
            .hint("remove `archive`, or archive by age with `dlqctl archive CHANNEL --older-than D --to ...`"),
        ),
        Due::Unknown => out.push(
            Diagnostic::warning(
                "deadletter/archive-never-due",
                format!(
                    "`deadLetter.archive` on `{dlq}`, whose retention is the broker's default (`log.retention.ms`), which dlqctl does not read: `archive --due` cannot tell what is due and refuses"
                ),
            )
            .at(doc.locs.key(if doc.locs.has("/spec/deadLetter/archive") { "/spec/deadLetter/archive" } else { "/spec" }))
            .hint("write the retention the archive runs ahead of: `deadLetter.retention: 7d`"),
        ),
    }
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

    /// Issue 35: an archive is the other answer to a retention that drops dead letters, and
    /// the warning names both; the invalid-message queue (which `archive` does not read) keeps
    /// its warning.
    #[test]
    fn an_archive_answers_discard_undeclared_for_the_dead_letter_queue_only() {
        let archive = "archive: {to: s3://b/p, before: 1h}";
        for (backend, retention) in [
            ("sqs", "7d"),
            ("rabbitmq", "3d"),
            ("kafka", "3d"),
            ("pubsub", "6d"),
        ] {
            let target = if backend == "rabbitmq" {
                "rabbit"
            } else {
                backend
            };
            let bare = rules_on(
                target,
                &format!("  deadLetter: {{retention: {retention}}}\n"),
                "",
            );
            assert!(
                bare.contains(&"deadletter/discard-undeclared"),
                "{backend}: {bare:?}"
            );
            let archived = rules_on(
                target,
                &format!("  deadLetter: {{retention: {retention}, {archive}}}\n"),
                "",
            );
            assert!(
                !archived.contains(&"deadletter/discard-undeclared"),
                "{backend}: {archived:?}"
            );
        }
        let found = super::super::tests::findings_on("sqs", "  deadLetter: {retention: 7d}\n", "");
        let d = found
            .iter()
            .find(|d| d.rule == "deadletter/discard-undeclared")
            .expect("the warning");
        assert!(
            d.message.contains("nor an archive declared"),
            "{}",
            d.message
        );
        let hint = d.hint.as_deref().unwrap_or_default();
        assert!(
            hint.contains("discard: {after: 7d") && hint.contains("archive: {to:"),
            "{hint}"
        );
        // A discard without its reason: the hint names the archive too.
        let found =
            super::super::tests::findings_on("sqs", "  deadLetter: {discard: {after: 7d}}\n", "");
        let hint = found
            .iter()
            .find(|d| d.rule == "deadletter/discard-undeclared")
            .and_then(|d| d.hint.clone())
            .unwrap_or_default();
        assert!(
            hint.starts_with("add `reason:`") && hint.contains("archive"),
            "{hint}"
        );
        // From Defaults, too (merged key by key).
        assert_eq!(
            rules_on(
                "sqs",
                "  deadLetter: {retention: 7d}\n",
                &format!("  deadLetter: {{{archive}}}\n")
            ),
            Vec::<&str>::new()
        );
        // The invalid-message queue is not archived: its warning stays, without the archive.
        let found = super::super::tests::findings_on(
            "sqs",
            &format!("  deadLetter: {{{archive}}}\n  invalid: {{retention: 7d}}\n"),
            "",
        );
        let inv: Vec<_> = found
            .iter()
            .filter(|d| d.rule == "deadletter/discard-undeclared")
            .collect();
        assert_eq!(inv.len(), 1, "{found:?}");
        assert!(
            !inv[0]
                .hint
                .as_deref()
                .unwrap_or_default()
                .contains("archive")
        );
    }

    #[test]
    fn before_must_leave_time_before_the_retention_and_not_be_zero() {
        let on = |dl: &str| rules_on("sqs", &format!("  deadLetter: {dl}\n"), "");
        assert_eq!(
            on("{retention: 1d, archive: {to: a, before: 23h59m59s}}"),
            Vec::<&str>::new()
        );
        assert_eq!(
            on("{retention: 1d, archive: {to: a, before: 1d}}"),
            ["deadletter/archive-before"]
        );
        assert_eq!(
            on("{retention: 1d, archive: {to: a, before: 2d}}"),
            ["deadletter/archive-before"]
        );
        assert_eq!(
            on("{archive: {to: a, before: 0s}}"),
            ["deadletter/archive-before"]
        );
        // The default `before` (2d) against the SQS default retention (14d).
        assert_eq!(on("{archive: {to: a}}"), Vec::<&str>::new());
        let found = super::super::tests::findings_on(
            "sqs",
            "  deadLetter: {retention: 1d, archive: {to: a, before: 1d}}\n",
            "",
        );
        let found: Vec<_> = found
            .into_iter()
            .filter(|d| d.rule == "deadletter/archive-before")
            .collect();
        assert_eq!(
            found[0].message,
            "`deadLetter.archive.before` (1d) is not less than the retention of `quotes-dlq` (1d): every dead letter is due the moment it arrives, so `archive --due` takes the whole queue on each run (with `--delete`, nothing stays for people to look at)"
        );
    }

    #[test]
    fn an_archive_of_a_queue_that_never_expires_is_never_due() {
        assert_eq!(
            rules_on("rabbit", "  deadLetter: {archive: {to: a}}\n", ""),
            ["deadletter/archive-never-due"]
        );
        // Kafka without a retention: the broker's, which `--due` cannot read.
        let found = findings_of(
            "kafka",
            "  retry: {maxAttempts: 2}\n  deadLetter: {archive: {to: a}}\n  lint: {allow: [alarms/missing]}\n",
            "",
        );
        let rules: Vec<_> = found.iter().map(|d| d.rule).collect();
        assert_eq!(
            rules,
            [
                "deadletter/retention-implicit",
                "deadletter/archive-never-due"
            ]
        );
        assert!(
            found[1].message.contains("log.retention.ms"),
            "{}",
            found[1].message
        );
        // With a retention it is an archive like any other.
        assert_eq!(
            rules_on(
                "kafka",
                "  deadLetter: {retention: 3d, archive: {to: a}}\n",
                ""
            ),
            Vec::<&str>::new()
        );
    }
}
