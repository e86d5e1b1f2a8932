//! SQS's own redrive: StartMessageMoveTask, where the endpoint has it (AWS; moto does not).
//!
//! Used only when asked (`dlqctl redrive --native`), for the one case it fits: every message of
//! a standard DLQ back to the channel's main queue (no `--limit`, `--class`, `--older-than` or
//! `--to`). SQS then moves the messages itself, server-side, at `--rate` (its
//! `MaxNumberOfMessagesPerSecond`, 1 to 500), never losing one; dlqctl follows the task with
//! ListMessageMoveTasks for progress and cancels it on Ctrl-C (CancelMessageMoveTask: what has
//! moved stays moved, the rest stays in the DLQ). The task copies messages as they are: no
//! `dlq-redrive-count`, no maxRedrives check. That is why it is never chosen by itself.
//!
//! ListMessageMoveTasks also tells whether a task is already RUNNING on the DLQ (started from
//! the console, say): every SQS redrive asks first and refuses, naming it; SQS allows one per
//! queue. ListMessageMoveTasks names a task by its handle only while it runs, so a task that
//! ended is recognised by its source and start time.
//!
//! Tested against responses written from the SQS API reference (tests/redrive_sqs_task.rs),
//! since no local server implements these calls.

use std::sync::atomic::Ordering;
use std::time::Duration;

use aws_sdk_sqs::types::ListMessageMoveTasksResultEntry;

use super::read::Reader;
use crate::backend::kit::errors::MoveError;
use crate::backend::wire::aws::classify;
use crate::redrive::Run;

/// SQS's ceiling for `MaxNumberOfMessagesPerSecond`.
pub const MAX_RATE: i32 = 500;
/// How often the task is read for progress.
const POLL: Duration = Duration::from_secs(2);
/// Polls in a row that may fail or not show the task before dlqctl stops following it.
const MAX_UNSEEN: u32 = 30;
/// The most polls one run makes (a day at [`POLL`]); then dlqctl stops following and says
/// how to follow the task, which goes on without it.
const MAX_POLLS: u32 = 43_200;

/// The DLQ's move tasks, newest first, or why they could not be listed (an endpoint without
/// the call, as moto, answers an error; so does one where the caller may not list them).
pub(super) async fn tasks(
    reader: &Reader,
    dlq: &str,
    dlq_arn: &str,
) -> Result<Vec<ListMessageMoveTasksResultEntry>, MoveError> {
    let clients = reader.aws.clients().await;
    reader.aws.stats.count("sqs:ListMessageMoveTasks");
    // One attempt: moto answers 500 to a call it does not have, and retrying it on every
    // redrive would cost seconds for nothing. The callers decide what a failure means.
    clients
        .sqs
        .list_message_move_tasks()
        .source_arn(dlq_arn)
        .max_results(10)
        .send()
        .await
        .map(|o| o.results.unwrap_or_default())
        .map_err(|e| {
            MoveError::of(classify(
                "sqs:ListMessageMoveTasks",
                &format!("queue {dlq}"),
                e,
            ))
        })
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
    let rate = match run.rate {
        None => None,
        Some(r) if (1.0..=f64::from(MAX_RATE)).contains(&r) && r.fract() == 0.0 => Some(r as i32),
        Some(r) => {
            return Err(MoveError(format!(
                "--rate {r}: SQS's move task takes whole messages per second from 1 to {MAX_RATE}; nothing was moved"
            )));
        }
    };
    // A Ctrl-C before the start: nothing is started.
    if run.stop.load(Ordering::SeqCst) {
        return Ok(());
    }
    let clients = reader.aws.clients().await;
    reader.aws.stats.count("sqs:StartMessageMoveTask");
    // Tasks that started from now on (less a minute for clocks that disagree) may be ours.
    let since_ms = crate::status::now_ms() - 60_000;
    let handle = clients
        .sqs
        .start_message_move_task()
        .source_arn(dlq_arn)
        .destination_arn(dest_arn)
        .set_max_number_of_messages_per_second(rate)
        .send()
        .await
        .map_err(|e| {
            MoveError(format!(
                "{}; nothing was moved (--native can be left out: dlqctl's own mover does not need the move task)",
                classify("sqs:StartMessageMoveTask", &format!("queue {dlq}"), e)
            ))
        })?
        .task_handle
        .unwrap_or_default();
    run.tally.by_service.store(true, Ordering::Relaxed);
    let mut cancelled = false;
    let mut unseen = 0;
    for _ in 0..MAX_POLLS {
        if run.stop.load(Ordering::SeqCst) && !cancelled {
            cancelled = true;
            reader.aws.stats.count("sqs:CancelMessageMoveTask");
            if let Err(e) = clients
                .sqs
                .cancel_message_move_task()
                .task_handle(&handle)
                .send()
                .await
            {
                // It may have ended just before: the next poll says how it ended.
                let e = classify(
                    "sqs:CancelMessageMoveTask",
                    &format!("the move task of queue {dlq}"),
                    e,
                );
                tracing::info!("{e}; reading the task's state");
            }
        }
        tokio::time::sleep(POLL).await;
        let found = tasks(reader, dlq, dlq_arn)
            .await
            .ok()
            .and_then(|all| ours(&all, &handle, since_ms).cloned());
        let Some(t) = found else {
            unseen += 1;
            if unseen >= MAX_UNSEEN {
                return Err(MoveError(format!(
                    "lost sight of the SQS move task of `{dlq}` (handle {handle}): ListMessageMoveTasks has not shown it for {} s; it may still be moving messages: aws sqs list-message-move-tasks --source-arn {dlq_arn}",
                    u64::from(MAX_UNSEEN) * POLL.as_secs()
                )));
            }
            continue;
        };
        unseen = 0;
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
        "stopped following the SQS move task of `{dlq}` after {} hours; it may still be moving messages (handle {handle}): aws sqs list-message-move-tasks --source-arn {dlq_arn}",
        u64::from(MAX_POLLS) * POLL.as_secs() / 3600
    )))
}

/// This run's task among the DLQ's, newest first: by its handle while it runs (the only time
/// ListMessageMoveTasks shows one), else the newest task that started since this run started
/// its own (SQS runs one at a time per queue, and this run refused to start beside another).
fn ours<'a>(
    tasks: &'a [ListMessageMoveTasksResultEntry],
    handle: &str,
    since_ms: i64,
) -> Option<&'a ListMessageMoveTasksResultEntry> {
    tasks
        .iter()
        .find(|t| t.task_handle() == Some(handle))
        .or_else(|| {
            tasks
                .first()
                .filter(|t| t.task_handle().is_none() && t.started_timestamp >= since_ms)
        })
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

    #[test]
    fn an_ended_task_without_its_handle_is_recognised_by_its_start() {
        let entry = |handle: Option<&str>, status: &str, started: i64| {
            ListMessageMoveTasksResultEntry::builder()
                .set_task_handle(handle.map(str::to_owned))
                .status(status)
                .started_timestamp(started)
                .build()
        };
        let running = [entry(Some("h1"), "RUNNING", 1_000)];
        assert_eq!(
            ours(&running, "h1", 500).and_then(|t| t.status()),
            Some("RUNNING")
        );
        // Ended: no handle; ours when it started since this run started its own.
        let ended = [entry(None, "COMPLETED", 1_000), entry(None, "FAILED", 10)];
        assert_eq!(
            ours(&ended, "h1", 500).and_then(|t| t.status()),
            Some("COMPLETED")
        );
        // An older task (another run's, long ago) is not taken for ours.
        assert!(ours(&ended, "h1", 5_000).is_none());
        // Another run's task that is running is not ours either.
        assert!(ours(&[entry(Some("h2"), "RUNNING", 1_000)], "h1", 500).is_none());
    }
}
