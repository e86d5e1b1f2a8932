//! Rules for channels on a Kafka target: partitions of the dead-letter topic, retention,
//! share groups' dead-letter topic prefix and delivery limit (KIP-1191),
//! Spring Kafka's retry topic naming profiles and suffixes, and topic configs dlqctl owns.
//!
//! Depends on `alarms` and `channel` (the advice every broker shares) and the resolved
//! channel.

use super::alarms::check_alarms;
use super::common::{invalid_retention_at, jitter_info, retention_field, retention_pointer};
use super::names::kafka_alphabet_problem;
use crate::diag::Diagnostic;
use crate::spec::duration::Duration;
use crate::spec::load::Doc;
use crate::spec::model::{Backend, Channel, KafkaNaming, Target};
use crate::spec::resolve::{Resolved, SPRING_DLT_SUFFIX, SPRING_RETRY_SUFFIX, java_has_text};

pub const KAFKA_MIN_RETENTION: Duration = Duration::from_secs(1);

/// `kafka.shareGroups` (KIP-1191): the broker writes dead letters only to a topic whose name
/// has the cluster's `errors.deadletterqueue.topic.name.prefix` (`dlq.` by default; it checks
/// when it writes, not when the group config is set, and drops the record otherwise), and
/// takes a delivery limit only inside `group.share.min/max.delivery.count.limit` (2 to 10).
fn check_share_groups(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    use crate::spec::model::{
        SHARE_DELIVERY_LIMITS as DELIVERY_LIMITS, SHARE_DLQ_PREFIX as DLQ_PREFIX,
    };
    let Some(k) = &r.kafka else { return };
    if k.share_groups.is_empty() {
        return;
    }
    if !r.dead_letter.starts_with(DLQ_PREFIX) {
        out.push(
            Diagnostic::error(
                "kafka/share-dlt-prefix",
                format!(
                    "the share groups' dead-letter topic `{}` does not start with `{DLQ_PREFIX}`: Kafka 4.4 writes a share group's dead letters only to topics with the cluster's `errors.deadletterqueue.topic.name.prefix` (default `{DLQ_PREFIX}`), and archives the record without writing it otherwise",
                    r.dead_letter
                ),
            )
            .at(doc.locs.value("/spec/kafka/shareGroups"))
            .hint("name the DLT with the prefix: `deadLetter: {name: \"dlq.{channel}\"}`"),
        );
    }
    let (min, max) = DELIVERY_LIMITS;
    if let Some(n) = k.share_delivery_limit
        && !(min..=max).contains(&n)
    {
        out.push(
            Diagnostic::error(
                "kafka/share-delivery-limit",
                format!(
                    "`retry.maxAttempts` is {n}: a share group's `share.delivery.count.limit` must be {min} to {max} (Kafka 4.4's `group.share.min.delivery.count.limit` and `group.share.max.delivery.count.limit`)"
                ),
            )
            .at(doc.locs.value("/spec/retry/maxAttempts"))
            .hint(format!("use {min} to {max} attempts, or leave `retry.maxAttempts` out for the broker's default (5)")),
        );
    }
}

pub(super) fn check_kafka(
    doc: &Doc<Channel>,
    r: &Resolved,
    target: &Target,
    out: &mut Vec<Diagnostic>,
) {
    super::connect::check_connectors(doc, r, target, out);
    check_alarms(doc, r, out);
    jitter_info(doc, Backend::Kafka, out);
    let Some(k) = &r.kafka else { return };
    if k.dead_letter_partitions < k.partitions {
        out.push(
            Diagnostic::warning(
                "kafka/dlt-partitions",
                format!(
                    "the dead-letter topic has {} partitions, fewer than its source's {}; a recoverer that publishes to the partition of the same number (Spring Kafka's DeadLetterPublishingRecoverer by default) fails for records from the partitions the DLT lacks",
                    k.dead_letter_partitions, k.partitions
                ),
            )
            .at(doc.locs.value("/spec/kafka/deadLetterPartitions"))
            .hint(format!("raise `kafka.deadLetterPartitions` to {} (partitions can be added, never removed), or have the recoverer let Kafka choose the partition (a destination resolver returning partition -1)", k.partitions)),
        );
    }
    for (field, pointer, value) in [
        ("spec.retention", "/spec/retention", r.retention),
        (
            retention_field(doc),
            retention_pointer(doc),
            r.dead_letter_retention,
        ),
        (
            invalid_retention_at(doc).0,
            invalid_retention_at(doc).1,
            r.invalid.as_ref().and_then(|i| i.retention),
        ),
    ] {
        if let Some(v) = value
            && v < KAFKA_MIN_RETENTION
        {
            out.push(
                Diagnostic::error(
                    "kafka/retention-range",
                    format!("`{field}` is {v}; Kafka's retention.ms must be at least 1s here"),
                )
                .at(doc.locs.value(pointer)),
            );
        }
    }
    let retry_template = doc.value.spec.retry.as_ref().and_then(|t| t.name.as_ref());
    match (k.naming, retry_template) {
        (KafkaNaming::Custom, None) if !r.retry_stages.is_empty() => out.push(
            Diagnostic::error("kafka/naming", "`kafka.naming: custom` names the retry topics by `retry.name`, which is not set")
                .at(doc.locs.value("/spec/kafka/naming"))
                .hint("set `retry.name` (e.g. `{channel}.retry.{delay}`), or use `naming: spring`"),
        ),
        (KafkaNaming::Spring | KafkaNaming::Index, Some(_)) => out.push(
            Diagnostic::error(
                "kafka/naming",
                "`retry.name` would be ignored: with the `spring` and `index` naming profiles, retry topics are named as Spring Kafka names them",
            )
            .at(doc.locs.value("/spec/retry/name"))
            .hint("remove `retry.name`, or set `kafka.naming: custom`"),
        ),
        _ => {}
    }
    check_suffixes(doc, k.naming, out);
    check_share_groups(doc, r, out);
    if k.config.contains_key("retention.ms") {
        out.push(
            Diagnostic::error(
                "kafka/config-retention",
                "`spec.kafka.config` sets `retention.ms`; use `spec.retention` and `spec.deadLetter.retention` instead",
            )
            .at(doc.locs.key("/spec/kafka/config/retention.ms")),
        );
    }
    let total = Duration::from_millis(r.delays.iter().map(|d| d.as_millis()).sum());
    if let Some(ret) = r.retention
        && total >= ret
    {
        out.push(
            Diagnostic::error(
                "retry/exceeds-retention",
                format!("the retry delays add up to {total}, which does not fit inside the retention of {ret}"),
            )
            .at(doc.locs.value("/spec/retention")),
        );
    }
}

/// `kafka/suffix`: Spring's `retryTopicSuffix` and `dltSuffix`, and the suffixes of its
/// exception-based DLTs, must be usable in a topic name; the first two must also say something
/// (Spring replaces a blank suffix by its default without a word) and must not be set where
/// another field names the topics instead.
fn check_suffixes(doc: &Doc<Channel>, naming: KafkaNaming, out: &mut Vec<Diagnostic>) {
    let Some(o) = doc.value.spec.kafka.as_ref() else {
        return;
    };
    let dead_letter_named = doc
        .value
        .spec
        .dead_letter
        .as_ref()
        .is_some_and(|d| d.name.is_some());
    for (field, value, default) in [
        (
            "retryTopicSuffix",
            &o.retry_topic_suffix,
            SPRING_RETRY_SUFFIX,
        ),
        ("dltSuffix", &o.dlt_suffix, SPRING_DLT_SUFFIX),
    ] {
        let Some(value) = value.as_deref() else {
            continue;
        };
        let at = doc.locs.value(&format!("/spec/kafka/{field}"));
        let ignored_by = match field {
            "retryTopicSuffix" if naming == KafkaNaming::Custom => {
                Some("`kafka.naming: custom` names the retry topics by `retry.name`")
            }
            // The exception-based DLTs still take it.
            "dltSuffix" if dead_letter_named && o.exception_based_dlts.is_none() => {
                Some("`deadLetter.name` names the dead-letter topic")
            }
            _ => None,
        };
        let diagnostic = if let Some(why) = ignored_by {
            Diagnostic::error(
                "kafka/suffix",
                format!("`kafka.{field}` would be ignored: {why}"),
            )
            .hint(format!(
                "remove `kafka.{field}`, or the field that names the topic instead"
            ))
        } else if !java_has_text(value) {
            Diagnostic::error(
                "kafka/suffix",
                format!(
                    "`kafka.{field}` is blank; Spring Kafka ignores a suffix without text and uses its default `{default}`"
                ),
            )
            .hint(format!(
                "write the suffix the application configures, or remove `kafka.{field}` for `{default}`"
            ))
        } else if let Some(problem) = kafka_alphabet_problem(value) {
            Diagnostic::error(
                "kafka/suffix",
                format!("`kafka.{field}` `{}`: {problem}", value.escape_default()),
            )
            .hint("Spring appends the suffix to the main topic's name as it is: the topic would be refused")
        } else {
            continue;
        };
        out.push(diagnostic.at(at));
    }
    // `<main><suffix><dltSuffix>`, taken as it is (an empty one is the main DLT's name, which
    // `name/collision` reports).
    for (i, suffix) in o.exception_based_dlts.iter().flatten().enumerate() {
        if let Some(problem) = kafka_alphabet_problem(suffix) {
            out.push(
                Diagnostic::error(
                    "kafka/suffix",
                    format!(
                        "`kafka.exceptionBasedDlts` `{}`: {problem}",
                        suffix.escape_default()
                    ),
                )
                .at(doc.locs.value(&format!("/spec/kafka/exceptionBasedDlts/{i}")))
                .hint("Spring puts the suffix between the main topic's name and the DLT suffix as it is: the topic would be refused"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::findings_of;

    /// The rule ids of a Kafka channel with these `spec` lines (`alarms/missing` silenced).
    fn kafka_rules(spec: &str) -> Vec<&'static str> {
        findings_of(
            "kafka",
            &format!("{spec}  lint: {{allow: [alarms/missing]}}\n"),
            "",
        )
        .iter()
        .map(|d| d.rule)
        .collect()
    }

    #[test]
    fn a_retention_may_be_one_second_but_not_less() {
        let spec = |dlq: &str| {
            format!(
                "  retry: {{maxAttempts: 3}}\n  deadLetter: {{discard: {{after: {dlq}, reason: r}}}}\n"
            )
        };
        assert_eq!(kafka_rules(&spec("1s")), Vec::<&str>::new());
        assert_eq!(kafka_rules(&spec("999ms")), ["kafka/retention-range"]);
    }

    #[test]
    fn the_retry_delays_must_end_before_the_retention_does() {
        let spec = |retention: &str| {
            format!(
                "  retention: {retention}\n  retry: {{maxAttempts: 3, backoff: {{initial: 1h}}}}\n  deadLetter: {{discard: {{after: 7d, reason: r}}}}\n"
            )
        };
        // Two retries of 1h: a 2h retention expires the message as the last retry comes.
        assert_eq!(kafka_rules(&spec("2h")), ["retry/exceeds-retention"]);
        assert_eq!(kafka_rules(&spec("2h1s")), Vec::<&str>::new());
    }

    #[test]
    fn custom_naming_needs_a_retry_name_only_when_there_are_retry_topics() {
        // One attempt: no retry topic to name.
        assert_eq!(
            kafka_rules(
                "  retry: {maxAttempts: 1}\n  kafka: {naming: custom}\n  deadLetter: {discard: {after: 7d, reason: r}}\n"
            ),
            ["retry/none"]
        );
        assert_eq!(
            kafka_rules(
                "  retry: {maxAttempts: 2}\n  kafka: {naming: custom}\n  deadLetter: {discard: {after: 7d, reason: r}}\n"
            ),
            ["kafka/naming"]
        );
    }
}
