//! Rules for channels on an SQS target: SQS's limits (retention, visibility timeout,
//! maxReceiveCount) and what SQS's redrive means for the settings (a standard DLQ keeps the
//! original enqueue time; retries are spaced by the visibility timeout). Alarms (CloudWatch's
//! limits among them) are checked from here, as from each backend's rules.
//!
//! Depends on `alarms`, the shared helpers in `rules` and the resolved channel.

use super::alarms::check_alarms;
use super::deadletter::{retention_field, retention_pointer};
use super::range_error;
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
    super::check_retention_ranges(
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
        out.push(
            Diagnostic::error(
                "sqs/dlq-retention",
                format!(
                    "the dead-letter queue keeps messages {dlq}, not longer than its source ({src}); SQS keeps a message's original enqueue time when it moves to a standard DLQ, so dead letters would expire early"
                ),
            )
            .at(at(if doc.locs.has(retention_pointer(doc)) { retention_pointer(doc) } else { "/spec/retention" }))
            .hint(if src >= SQS_MAX_RETENTION {
                "the DLQ cannot keep messages longer than 14d (the SQS maximum): lower `spec.retention`".to_owned()
            } else {
                format!("make `{}` longer than `spec.retention` (14d is the SQS maximum)", retention_field(doc))
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
