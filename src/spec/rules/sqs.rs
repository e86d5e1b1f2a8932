//! Rules for channels on an SQS target: SQS's limits (retention, visibility timeout,
//! maxReceiveCount) and what SQS's redrive means for the settings (a standard DLQ keeps the
//! original enqueue time; retries are spaced by the visibility timeout). Alarms (CloudWatch's
//! limits among them) are checked from here, as from each backend's rules.
//!
//! Depends on `alarms`, the shared helpers in `rules` and the resolved channel.

use super::alarms::check_alarms;
use super::common::{check_retention_ranges, range_error, retention_field, retention_pointer};
use crate::diag::Diagnostic;
use crate::spec::duration::Duration;
use crate::spec::load::Doc;
use crate::spec::model::Channel;
use crate::spec::resolve::{self, Resolved};

pub const SQS_MIN_RETENTION: Duration = Duration::from_secs(60);
pub const SQS_MAX_RETENTION: Duration = Duration::from_secs(14 * 86_400);
pub const SQS_MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3_600);
pub const SQS_MAX_RECEIVE_COUNT: u32 = 1000;

pub(super) fn check_sqs(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    check_retention_range(doc, out);
    check_max_receive_count(doc, r, out);
    let vis = check_visibility(doc, r, out);
    check_dlq_retention(doc, r, out);
    backoff_consumer(doc, vis, out);
    check_retry_fits_retention(doc, r, vis, out);
    check_alarms(doc, r, out);
    fifo_redrive_order(doc, r, out);
    super::sqs_access::check_access(doc, r, out);
}

/// `sqs/fifo-redrive-order` (info): redriven messages of a FIFO channel come back behind newer
/// messages of their group; said where the people who redrive will read it.
fn fifo_redrive_order(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    if r.sqs.as_ref().is_some_and(|s| s.fifo) {
        out.push(
            Diagnostic::info(
                "sqs/fifo-redrive-order",
                "FIFO channel: a message redriven from the dead-letter queue comes back behind the newer messages of its group, not in its original place",
            )
            .at(doc.locs.value("/spec/sqs/fifo"))
            .hint("consumers of a FIFO queue must tolerate a redriven message arriving after later ones of its group"),
        );
    }
}

/// `sqs/retention-range`: both retentions within SQS's 60s to 14d.
fn check_retention_range(doc: &Doc<Channel>, out: &mut Vec<Diagnostic>) {
    check_retention_ranges(
        doc,
        "sqs/retention-range",
        (SQS_MIN_RETENTION, SQS_MAX_RETENTION),
        "SQS",
        "SQS keeps messages between 60s and 14d (MessageRetentionPeriod)",
        out,
    );
}

/// `sqs/max-receive-count`: `retry.maxAttempts` becomes maxReceiveCount.
fn check_max_receive_count(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let at = |p: &str| doc.locs.value(p);
    if r.max_attempts > SQS_MAX_RECEIVE_COUNT {
        out.push(
            Diagnostic::error(
                "sqs/max-receive-count",
                format!(
                    "`spec.retry.maxAttempts` is {}, but SQS's maxReceiveCount is at most {SQS_MAX_RECEIVE_COUNT}",
                    r.max_attempts
                ),
            )
            .at(at("/spec/retry/maxAttempts")),
        );
    }
}

/// `sqs/visibility-range` and `sqs/whole-seconds`; returns the effective visibility timeout.
fn check_visibility(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) -> Duration {
    let at = |p: &str| doc.locs.value(p);
    let sqs = r.sqs.as_ref();
    let vis = sqs
        .map(|s| s.visibility_timeout)
        .unwrap_or(resolve::SQS_DEFAULT_VISIBILITY);
    if vis > SQS_MAX_VISIBILITY {
        out.push(
            range_error(
                "sqs/visibility-range",
                "spec.sqs.visibilityTimeout",
                vis,
                Duration::from_secs(0),
                SQS_MAX_VISIBILITY,
                "SQS",
            )
            .at(at("/spec/sqs/visibilityTimeout")),
        );
    }
    if !vis.as_millis().is_multiple_of(1000) {
        out.push(
            Diagnostic::error(
                "sqs/whole-seconds",
                format!("`spec.sqs.visibilityTimeout` is {vis}; SQS counts it in whole seconds"),
            )
            .at(at("/spec/sqs/visibilityTimeout")),
        );
    }
    vis
}

/// `sqs/dlq-retention`: a standard DLQ must keep messages longer than its source.
fn check_dlq_retention(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let at = |p: &str| doc.locs.value(p);
    let fifo = r.sqs.as_ref().is_some_and(|s| s.fifo);
    if let (Some(src), Some(dlq)) = (r.retention, r.dead_letter_retention)
        && !fifo
        && dlq <= src
        && (SQS_MIN_RETENTION..=SQS_MAX_RETENTION).contains(&src)
    {
        // A warning, not an error: the most used Terraform SQS module makes exactly this pair
        // by default (both 4 days), and an estate that runs must stay adoptable.
        out.push(
            Diagnostic::warning(
                "sqs/dlq-retention",
                format!(
                    "the dead-letter queue keeps messages {dlq}, not longer than its source ({src}); SQS keeps a message's original enqueue time when it moves to a standard DLQ, so dead letters would expire early"
                ),
            )
            .at(at(if doc.locs.has(retention_pointer(doc)) { retention_pointer(doc) } else { "/spec/retention" }))
            .hint(if src >= SQS_MAX_RETENTION {
                "the DLQ cannot keep messages longer than 14d (the SQS maximum): lower `spec.retention`, or archive with `deadLetter.archive`".to_owned()
            } else {
                format!("raise the DLQ's retention (`{}`) above the source's (`spec.retention`; 14d is the SQS maximum), or archive with `deadLetter.archive`", retention_field(doc))
            }),
        );
    }
}

/// `sqs/backoff-consumer`: SQS has no native backoff.
fn backoff_consumer(doc: &Doc<Channel>, vis: Duration, out: &mut Vec<Diagnostic>) {
    let spec = &doc.value.spec;
    if spec.retry.as_ref().is_some_and(|x| x.backoff.is_some()) {
        out.push(
            Diagnostic::info(
                "sqs/backoff-consumer",
                format!(
                    "SQS has no native backoff: messages are retried when the visibility timeout ({vis}) ends; the consumer must apply `retry.backoff` itself (ChangeMessageVisibility)"
                ),
            )
            .at(doc.locs.key("/spec/retry/backoff")),
        );
    }
}

/// `retry/exceeds-retention`: every attempt's visibility timeout fits inside the retention.
fn check_retry_fits_retention(
    doc: &Doc<Channel>,
    r: &Resolved,
    vis: Duration,
    out: &mut Vec<Diagnostic>,
) {
    let at = |p: &str| doc.locs.value(p);
    let retry_time =
        Duration::from_millis(vis.as_millis().saturating_mul(u64::from(r.max_attempts)));
    if let Some(src) = r.retention
        && retry_time >= src
    {
        out.push(
            Diagnostic::error(
                "retry/exceeds-retention",
                format!(
                    "{} attempts × visibility timeout {vis} = {retry_time}, which does not fit inside the retention of {src}: messages would expire before they are dead-lettered",
                    r.max_attempts
                ),
            )
            .at(at(if doc.locs.has("/spec/retention") { "/spec/retention" } else { "/spec/retry/maxAttempts" })),
        );
    }
}

#[cfg(test)]
mod tests {
    //! SQS's limits at their edges: the largest value SQS takes passes, the next one is refused.

    use super::super::tests::findings_of;

    /// The rule ids of an SQS channel with these `spec` lines (a 1h retention unless they set
    /// one; `alarms/missing` silenced).
    fn sqs_rules(spec: &str) -> Vec<&'static str> {
        findings_of(
            "sqs",
            &format!("{spec}  lint: {{allow: [alarms/missing, retry/excessive]}}\n"),
            "",
        )
        .iter()
        .map(|d| d.rule)
        .collect()
    }

    #[test]
    fn max_attempts_may_be_sqs_s_max_receive_count_but_not_more() {
        let spec = |n: u32| format!("  retention: 4d\n  retry: {{maxAttempts: {n}}}\n");
        assert_eq!(sqs_rules(&spec(1000)), Vec::<&str>::new());
        assert_eq!(sqs_rules(&spec(1001)), ["sqs/max-receive-count"]);
    }

    #[test]
    fn the_visibility_timeout_may_be_twelve_hours_but_not_more() {
        let spec = |v: &str| {
            format!(
                "  retention: 4d\n  retry: {{maxAttempts: 3}}\n  sqs: {{visibilityTimeout: {v}}}\n"
            )
        };
        assert_eq!(sqs_rules(&spec("12h")), Vec::<&str>::new());
        assert_eq!(sqs_rules(&spec("12h1s")), ["sqs/visibility-range"]);
    }

    #[test]
    fn a_retention_may_be_sqs_s_minimum_or_maximum_but_not_beyond() {
        let spec = |main: &str, dlq: &str| {
            format!(
                "  retention: {main}\n  retry: {{maxAttempts: 3}}\n  sqs: {{visibilityTimeout: 10s}}\n  deadLetter: {{retention: {dlq}}}\n"
            )
        };
        assert_eq!(sqs_rules(&spec("60s", "14d")), Vec::<&str>::new());
        assert_eq!(sqs_rules(&spec("59s", "14d")), ["sqs/retention-range"]);
        assert_eq!(sqs_rules(&spec("60s", "14d1s")), ["sqs/retention-range"]);
    }

    #[test]
    fn a_standard_dlq_must_keep_messages_longer_than_its_source() {
        let found = |main: &str, dlq: &str| {
            findings_of(
                "sqs",
                &format!(
                    "  retention: {main}\n  retry: {{maxAttempts: 3}}\n  deadLetter: {{discard: {{after: {dlq}, reason: r}}}}\n  lint: {{allow: [alarms/missing]}}\n"
                ),
                "",
            )
        };
        let same = found("4d", "4d");
        assert_eq!(same.len(), 1, "{same:?}");
        assert_eq!(same[0].rule, "sqs/dlq-retention");
        // A warning with its fix, not an error: estates made this way must stay adoptable.
        assert_eq!(same[0].severity, crate::diag::Severity::Warning);
        assert_eq!(
            same[0].hint.as_deref(),
            Some(
                "raise the DLQ's retention (`spec.deadLetter.discard.after`) above the source's (`spec.retention`; 14d is the SQS maximum), or archive with `deadLetter.archive`"
            )
        );
        assert_eq!(
            found("4d", "4d1s")
                .iter()
                .map(|d| d.rule)
                .collect::<Vec<_>>(),
            Vec::<&str>::new()
        );
        // A source that keeps messages 14d leaves the DLQ nothing longer to keep them.
        let max = findings_of(
            "sqs",
            "  retention: 14d\n  retry: {maxAttempts: 3}\n  lint: {allow: [alarms/missing]}\n",
            "",
        );
        assert_eq!(max.len(), 1, "{max:?}");
        assert_eq!(max[0].rule, "sqs/dlq-retention");
        assert_eq!(
            max[0].hint.as_deref(),
            Some(
                "the DLQ cannot keep messages longer than 14d (the SQS maximum): lower `spec.retention`, or archive with `deadLetter.archive`"
            )
        );
        // A source retention SQS refuses is reported as such, not compared.
        assert_eq!(
            found("15d", "4d")
                .iter()
                .map(|d| d.rule)
                .collect::<Vec<_>>(),
            ["sqs/retention-range"]
        );
    }

    #[test]
    fn every_attempt_must_end_before_the_retention_does() {
        let spec =
            |v: &str| format!("  retry: {{maxAttempts: 3}}\n  sqs: {{visibilityTimeout: {v}}}\n");
        // 3 × 20m = 1h: the third attempt ends as the message expires.
        assert_eq!(sqs_rules(&spec("20m")), ["retry/exceeds-retention"]);
        assert_eq!(sqs_rules(&spec("19m59s")), Vec::<&str>::new());
    }
}
