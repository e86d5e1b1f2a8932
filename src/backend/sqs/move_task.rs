//! SQS's own redrive: StartMessageMoveTask, where the endpoint has it (AWS; moto does not).
//!
//! Used by the SQS mover for the one case it fits: every message of a standard DLQ back to
//! the channel's main queue (no `--limit`, `--class` or `--older-than`, not `--no-native`).
//! SQS then moves the messages itself, server-side, at `--rate` (its
//! `MaxNumberOfMessagesPerSecond`, at most 500), never losing one; dlqctl follows the task
//! with ListMessageMoveTasks for progress and cancels it on Ctrl-C (CancelMessageMoveTask:
//! what has moved stays moved, the rest stays in the DLQ). The task copies messages as they
//! are: no `dlq-redrive-count`, no maxRedrives check; the report says so.
//!
//! ListMessageMoveTasks is also the probe: an endpoint that does not answer it (moto answers
//! HTTP 500) has no move tasks, and the mover moves the messages itself. A task already
//! RUNNING on the DLQ (started from the console, say) refuses any redrive, naming it: SQS
//! allows one per queue, and two movers at once would race.
//!
//! Tested against responses written from the SQS API reference (tests/redrive_sqs_task.rs),
//! since no local server implements these calls.

use std::sync::atomic::Ordering;
use std::time::Duration;

use aws_sdk_sqs::types::ListMessageMoveTasksResultEntry;

use super::Reader;
use crate::backend::MoveError;
use crate::backend::wire::aws::classify;
use crate::redrive::Run;

/// SQS's ceiling for `MaxNumberOfMessagesPerSecond`.
pub const MAX_RATE: i32 = 500;
/// How often the task is read for progress.
const POLL: Duration = Duration::from_secs(2);
/// The most polls one run makes (a day at [`POLL`]); then dlqctl stops following and says
/// how to follow the task, which goes on without it.
const MAX_POLLS: u32 = 43_200;

/// The DLQ's move tasks, newest first; `None` when the endpoint has no such call.
pub(super) async fn tasks(
    reader: &Reader,
    dlq_arn: &str,
) -> Option<Vec<ListMessageMoveTasksResultEntry>> {
    let clients = reader.aws.clients().await;
    reader.aws.stats.count("sqs:ListMessageMoveTasks");
    // One attempt, not a retried read: an endpoint without the call (moto) answers 500, and
    // anything but an answer means "move the messages ourselves", which is always safe.
    clients
        .sqs
        .list_message_move_tasks()
        .source_arn(dlq_arn)
        .max_results(10)
        .send()
        .await
        .ok()
        .map(|o| o.results.unwrap_or_default())
}

/// A task that is still moving messages, as a refusal naming it.
pub(super) fn running(dlq: &str, tasks: &[ListMessageMoveTasksResultEntry]) -> Option<MoveError> {
    let t = tasks
        .iter()
        .find(|t| matches!(t.status(), Some("RUNNING" | "CANCELLING")))?;
    Some(MoveError(format!(
        "queue `{dlq}` is being redriven already, by an SQS move task ({}, started {}, {} of {} moved; handle {}); wait for it, or cancel it (aws sqs cancel-message-move-task)",
        t.status().unwrap_or_default(),
        started(t.started_timestamp),
        t.approximate_number_of_messages_moved,
        t.approximate_number_of_messages_to_move
            .map_or_else(|| "?".to_owned(), |n| n.to_string()),
        t.task_handle().unwrap_or("unknown"),
    )))
}

fn started(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| ms.to_string())
}

/// Starts the task from `dlq_arn` to `dest_arn` and follows it to its end. The tally's
/// `moved` follows the task's own count.
pub(super) async fn run(
    reader: &Reader,
    dlq: &str,
    dlq_arn: &str,
    dest_arn: &str,
    run: &Run,
) -> Result<(), MoveError> {
    let clients = reader.aws.clients().await;
    let rate = run
        .rate
        .map(|r| (r.floor() as i64).clamp(1, i64::from(MAX_RATE)) as i32);
    reader.aws.stats.count("sqs:StartMessageMoveTask");
    let handle = clients
        .sqs
        .start_message_move_task()
        .source_arn(dlq_arn)
        .destination_arn(dest_arn)
        .set_max_number_of_messages_per_second(rate)
        .send()
        .await
        .map_err(|e| {
            MoveError::of(classify(
                "sqs:StartMessageMoveTask",
                &format!("queue {dlq}"),
                e,
            ))
        })?
        .task_handle
        .unwrap_or_default();
    run.tally.by_service.store(true, Ordering::Relaxed);
    let mut cancelled = false;
    for _ in 0..MAX_POLLS {
        if run.stop.load(Ordering::SeqCst) && !cancelled {
            reader.aws.stats.count("sqs:CancelMessageMoveTask");
            clients
                .sqs
                .cancel_message_move_task()
                .task_handle(&handle)
                .send()
                .await
                .map_err(|e| {
                    MoveError::of(classify(
                        "sqs:CancelMessageMoveTask",
                        &format!("the move task of queue {dlq}"),
                        e,
                    ))
                })?;
            cancelled = true;
        }
        tokio::time::sleep(POLL).await;
        let Some(all) = tasks(reader, dlq_arn).await else {
            continue;
        };
        let Some(t) = all
            .iter()
            .find(|t| t.task_handle() == Some(handle.as_str()))
        else {
            continue;
        };
        let moved = u64::try_from(t.approximate_number_of_messages_moved).unwrap_or(0);
        run.tally.moved.store(moved, Ordering::Relaxed);
        run.tally.examined.store(moved, Ordering::Relaxed);
        match t.status() {
            Some("COMPLETED" | "CANCELLED") => return Ok(()),
            Some("FAILED") => {
                return Err(MoveError(format!(
                    "the SQS move task from `{dlq}` failed after {moved} moved: {}; the rest is still in `{dlq}`",
                    t.failure_reason().unwrap_or("no reason given")
                )));
            }
            _ => {}
        }
    }
    Err(MoveError(format!(
        "stopped following the SQS move task of `{dlq}` after {} hours; it goes on (handle {handle}): aws sqs list-message-move-tasks --source-arn {dlq_arn}",
        u64::from(MAX_POLLS) * POLL.as_secs() / 3600
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_task_is_a_refusal_naming_it_and_finished_ones_are_not() {
        let t = |status: &str| {
            ListMessageMoveTasksResultEntry::builder()
                .status(status)
                .task_handle("AQEB-handle")
                .approximate_number_of_messages_moved(40)
                .approximate_number_of_messages_to_move(100)
                .started_timestamp(1_764_547_200_000)
                .build()
        };
        assert!(running("dlq", &[t("COMPLETED"), t("CANCELLED"), t("FAILED")]).is_none());
        let e = running("dlq", &[t("COMPLETED"), t("RUNNING")]).expect("refused");
        assert!(
            e.0.contains("AQEB-handle")
                && e.0.contains("40 of 100")
                && e.0.contains("2025-12-01T00:00:00Z"),
            "{}",
            e.0
        );
        assert!(running("dlq", &[t("CANCELLING")]).is_some());
    }
}
