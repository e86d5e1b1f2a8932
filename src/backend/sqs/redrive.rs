//! SQS's mover: brings dead letters back with receive → send → delete, at least once, never
//! lost.
//!
//! The contract (docs/sqs.md, "redrive"):
//! - one redrive per DLQ at a time: the run tags the DLQ `dlqctl-redrive: <holder>` and checks
//!   the tag is still its own before moving; a second run is refused and told who holds it (a
//!   holder on this host whose process is gone is taken over). The tag is removed at the end;
//! - messages are received with a visibility timeout of [`HOLD`]: while the run holds them,
//!   nobody else sees them. A chosen message is sent to the destination (SendMessageBatch) and
//!   deleted from the DLQ (DeleteMessageBatch) only if its send succeeded. A send that fails
//!   stops the run; that message reappears in the DLQ when its visibility ends;
//! - messages not chosen are made visible again at the end (ChangeMessageVisibilityBatch 0);
//! - the copy keeps its body and message attributes but those `deadLetter.redrive` and the
//!   default list of replication and tracing headers shed, gains `dlq-redrive-count` + 1; on
//!   FIFO queues it keeps its `MessageGroupId`, and its deduplication id is the original
//!   message id;
//! - never from a DLQ with a redrive policy of its own: each receive counts towards it;
//! - `--to failed-consumer`: each message goes back to its own source, the queue its
//!   `DeadLetterQueueSourceArn` names (SQS sets it when a redrive policy moves a message, so
//!   one DLQ fed by several sources returns each to its own, as SQS's own move task does
//!   without a destination), one SendMessageBatch per source ([`Mover::route`] says which
//!   sources may be sent to). A message without one (sent to the DLQ directly) stays, and the
//!   run says so: never guessed, never "complete".
//!
//! With `--native`, SQS's own StartMessageMoveTask does the moving instead, for a whole
//! standard queue back to its source ([`super::move_task`]); one running on the DLQ refuses
//! any redrive.
//!
//! A delete that fails after the send succeeded leaves the message in both queues: counted as
//! possibly duplicated, never lost. The consumer must be idempotent.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageAttributeValue, MessageSystemAttributeName,
    QueueAttributeName, SendMessageBatchRequestEntry,
};

use super::QueueArn;
use super::move_task;
use super::read::Reader;
use crate::backend::kit::errors::MoveError;
use crate::backend::wire::aws::classify;
use crate::redrive::transform::Edit;
use crate::redrive::{self, Decision, Run};
use crate::spec::resolve::headers::HeaderRules;
use crate::spec::resolve::{DeadLetterRole, Resolved};
use crate::status::envelope::REDRIVE_COUNT;
use crate::status::now_ms;

/// How long the run holds a received message out of sight, in seconds: long enough for any
/// batch to be sent and deleted; after a crash, what was held reappears this much later.
pub const HOLD: i32 = 300;

/// The hold this run uses: [`HOLD`], or `DLQCTL_SQS_REDRIVE_HOLD` seconds (1 to 43,200, SQS's
/// range) for whoever cannot wait five minutes for a crashed run's messages (the crash tests).
/// A value the variable cannot mean is refused rather than ignored.
pub fn hold() -> Result<i32, MoveError> {
    match std::env::var("DLQCTL_SQS_REDRIVE_HOLD") {
        Err(_) => Ok(HOLD),
        Ok(v) => v
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|s| (1..=43_200).contains(s))
            .ok_or_else(|| {
                MoveError(format!(
                    "DLQCTL_SQS_REDRIVE_HOLD={v}: give whole seconds from 1 to 43200"
                ))
            }),
    }
}
/// The tag that says a redrive holds the queue.
pub const LOCK_TAG: &str = "dlqctl-redrive";

/// The writing capability for messages: made only by `dlqctl redrive`.
#[derive(Debug, Clone)]
pub struct Mover {
    reader: Reader,
}

impl Mover {
    pub fn new(reader: Reader) -> Self {
        Mover { reader }
    }

    pub fn target(&self) -> &str {
        self.reader.target()
    }

    pub async fn redrive(&self, r: &Resolved, run: &Run) -> Result<(), MoveError> {
        let dlq = &r.dead_letter;
        let url = self
            .reader
            .url(dlq)
            .await
            .map_err(MoveError::of)?
            .ok_or_else(|| MoveError(format!("queue `{dlq}` does not exist")))?;
        let attrs = self
            .reader
            .attributes(dlq, &url, QueueAttributeName::All)
            .await
            .map_err(MoveError::of)?
            .ok_or_else(|| MoveError(format!("queue `{dlq}` does not exist")))?;
        if attrs.contains_key("RedrivePolicy") {
            return Err(MoveError(format!(
                "queue `{dlq}` has a redrive policy of its own: every receive counts towards it, so a redrive could move messages on; remove it first"
            )));
        }
        let fifo = attrs.get("FifoQueue").is_some_and(|v| v == "true");
        let dlq_arn = attrs.get("QueueArn").cloned().unwrap_or_default();
        let dest = if run.to.source { &r.main } else { &run.to.name };
        let mut to = if run.to.failed_consumer {
            // Each message to the queue its DeadLetterQueueSourceArn names, as met.
            To::BySource(Routes {
                main: r.main.clone(),
                shared: r.dead_letter_sources.clone(),
                dlq_arn: QueueArn::parse(&dlq_arn),
                dlq_url: url.clone(),
                known: HashMap::new(),
            })
        } else {
            if !run.to.source && !run.allow_unowned {
                // Owned: tagged by dlqctl (for some channel). A missing queue is said below.
                let tags = self.reader.queue_tags(dest).await.map_err(MoveError::of)?;
                if let Some(tags) = tags {
                    run.check_owned(not_dlqctls(&tags)).map_err(MoveError)?;
                }
            }
            To::Queue(
                self.reader
                    .url(dest)
                    .await
                    .map_err(MoveError::of)?
                    .ok_or_else(|| {
                        MoveError(format!(
                            "the destination queue `{dest}` does not exist; nothing was moved"
                        ))
                    })?,
            )
        };
        let count = |k: &str| attrs.get(k).and_then(|v| v.parse::<u64>().ok());
        let total: u64 = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesDelayed",
        ]
        .iter()
        .filter_map(|k| count(k))
        .sum();
        // Received by someone and not yet visible again (an earlier run holds what it received
        // for its hold): this run cannot examine them, and says so at the end.
        let in_flight = count("ApproximateNumberOfMessagesNotVisible").unwrap_or(0);
        // SQS's own move task: one running on the DLQ refuses this run; with `--native`, a
        // whole standard queue back to its source is handed to it (`move_task`).
        match move_task::tasks(&self.reader, dlq, &dlq_arn).await {
            Ok(tasks) => {
                if let Some(e) = move_task::running(dlq, &tasks) {
                    return Err(e);
                }
            }
            Err(e) if run.service_task => {
                return Err(MoveError(format!(
                    "--native: {e}; this endpoint's move tasks cannot be used (leave out --native for dlqctl's own mover); nothing was moved"
                )));
            }
            // moto has no move tasks; an IAM policy may not allow listing them. Nothing can
            // be lost either way (SQS hides a message from all but one receiver at a time).
            Err(e) => {
                tracing::info!("cannot tell whether an SQS move task is running on `{dlq}`: {e}")
            }
        }
        let whole_queue = run.select.limit.is_none()
            && run.select.classes.is_empty()
            && run.select.older_than_ms.is_none();
        if run.service_task && !(whole_queue && run.to.source && !fifo) {
            return Err(MoveError(
                "--native hands a whole standard queue back to its source to SQS's move task: it takes no --limit, --class, --older-than or --to, and no FIFO queue; nothing was moved".into(),
            ));
        }
        let native = run.service_task;
        self.lock(dlq, &url, &run.holder).await?;
        let result = if native {
            match &to {
                To::Queue(dest_url) => match self.arn(dest, dest_url).await {
                    Ok(dest_arn) => {
                        move_task::run(&self.reader, dlq, &dlq_arn, &dest_arn, run).await
                    }
                    Err(e) => Err(e),
                },
                // Refused above (`--native` takes no `--to`).
                To::BySource(_) => Err(MoveError(
                    "--native takes no --to; nothing was moved".into(),
                )),
            }
        } else {
            let start = Start {
                fifo,
                total,
                in_flight,
                role: r.dead_letter_role,
                headers: &r.headers,
            };
            self.run(dlq, &url, &mut to, start, run).await
        };
        if run.keep_lock && result.is_ok() {
            // More batches follow: the tag stays until the run ends (`release`).
            return result;
        }
        let unlocked = self.unlock(dlq, &url, &run.holder).await;
        result.and(unlocked)
    }

    /// The run is over: its lock tag goes (if it is still its own).
    pub async fn release(&self, r: &Resolved, run: &Run) -> Result<(), MoveError> {
        let dlq = &r.dead_letter;
        let Some(url) = self.reader.url(dlq).await.map_err(MoveError::of)? else {
            return Ok(());
        };
        self.unlock(dlq, &url, &run.holder).await
    }

    async fn run(
        &self,
        dlq: &str,
        url: &str,
        to: &mut To,
        start: Start<'_>,
        run: &Run,
    ) -> Result<(), MoveError> {
        let Start {
            fifo,
            total,
            in_flight,
            role,
            headers,
        } = start;
        let hold = hold()?;
        if let Some(sink) = run.archive.as_deref() {
            sink.held_for(i64::from(hold) * 1000);
        }
        // FIFO: the groups of messages this run leaves in place. SQS delivers nothing of a
        // group behind a message in flight, so nothing behind one can be read this run; and
        // what is behind it in this run's batches is held too, so each group moves in order
        // up to its first message left behind, never past it.
        let mut blocked_groups: BTreeSet<String> = BTreeSet::new();
        let mut blocked: u64 = 0;
        let mut pace = redrive::Pace::new(run.rate);
        // Ids of the messages this run holds back (a receive may hand one out again); moved
        // ones are deleted and cannot come back, so memory grows only with what is held.
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut received: u64 = 0;
        let mut held: Vec<String> = Vec::new();
        // `--to failed-consumer`: the ids of messages that name no source (they stay), and
        // why the run stops when a source may not be sent to (what follows it is held).
        let mut without_source: Vec<String> = Vec::new();
        let mut refused: Option<MoveError> = None;
        let mut result = Ok(());
        let mut empty = 0;
        let mut last_check = std::time::Instant::now();
        // At most one second's worth of messages per receive with --rate (10 without).
        let batch: usize = match run.rate {
            Some(r) => (r.floor() as usize).clamp(1, 10),
            None => 10,
        };
        // Bounded: every message present at the start once, plus a few empty answers.
        for _ in 0..total.div_ceil(batch as u64) * 2 + 5 {
            if run.done() || received >= total || empty >= 2 {
                break;
            }
            // Still ours? (Two runs that tagged at nearly the same moment: only one goes on.)
            // Checked every few seconds, not every batch: a tag read per 10 messages would
            // double the calls.
            if last_check.elapsed() >= std::time::Duration::from_secs(5) {
                if let Some(e) = self.lost_lock(dlq, &run.holder).await {
                    result = Err(e);
                    break;
                }
                last_check = std::time::Instant::now();
            }
            // With --rate, the pace is kept before receiving, never while messages are held:
            // a held message must be sent and deleted well within the hold, whatever the rate.
            if run.rate.is_some() {
                let mut go = true;
                for _ in 0..batch {
                    go = go && pace.wait_or_stop(&run.stop).await;
                }
                // Interrupted during the wait: nothing is received after it.
                if !go {
                    break;
                }
            }
            let got = match self
                .reader
                .receive(dlq, url, batch, hold)
                .await
                .map_err(MoveError::of)
            {
                Ok(g) => g,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            // Only an empty answer counts towards the end: messages handed back (not chosen)
            // and received again are not "no more messages".
            if got.is_empty() {
                empty += 1;
                continue;
            }
            empty = 0;
            let fresh: Vec<_> = got
                .into_iter()
                .filter(|m| !seen.contains(m.message_id().unwrap_or_default()))
                .collect();
            received += fresh.len() as u64;
            if fresh.is_empty() {
                continue;
            }
            let mut chosen = Vec::new();
            // `--transform`: what each chosen message's copy is made of, in step with `chosen`.
            let mut edits = Vec::new();
            // `--to failed-consumer`: where each of `chosen` goes (its source).
            let mut chosen_to: Vec<Source> = Vec::new();
            for m in fresh {
                if refused.is_some() {
                    // Behind a message this run may not send: handed back, not examined.
                    seen.insert(m.message_id().unwrap_or_default().to_owned());
                    held.push(m.receipt_handle().unwrap_or_default().to_owned());
                    continue;
                }
                let group = fifo.then(|| group_of(&m)).flatten();
                if group.as_ref().is_some_and(|g| blocked_groups.contains(g)) {
                    // Behind a message of its group that stays: held, not examined.
                    blocked += 1;
                    seen.insert(m.message_id().unwrap_or_default().to_owned());
                    held.push(m.receipt_handle().unwrap_or_default().to_owned());
                    continue;
                }
                if let Some(key) = run
                    .copies
                    .ours(m.message_id().unwrap_or_default(), std::iter::empty())
                {
                    // A copy this run sent (in this batch or an earlier one), failed again
                    // and back: left in the DLQ, not moved a second time.
                    run.copies.came_back(key, &run.tally);
                    if let Some(g) = group {
                        blocked_groups.insert(g);
                    }
                    seen.insert(m.message_id().unwrap_or_default().to_owned());
                    held.push(m.receipt_handle().unwrap_or_default().to_owned());
                    continue;
                }
                // The whole body: a declared envelope may point into it.
                let msg = super::status::message_in(&m, usize::MAX, role);
                let mut d = redrive::decide(&run.select, &msg, now_ms());
                let room = run
                    .select
                    .limit
                    .is_none_or(|l| run.tally.moved() + (chosen.len() as u64) < l);
                if d == Decision::Move && !room {
                    // Beyond the limit: handed back like a message not chosen, not counted.
                    seen.insert(m.message_id().unwrap_or_default().to_owned());
                    held.push(m.receipt_handle().unwrap_or_default().to_owned());
                    continue;
                }
                if d == Decision::Move && run.stop.load(Ordering::SeqCst) {
                    d = Decision::NotSelected;
                }
                let mut source = None;
                if d == Decision::Move
                    && let To::BySource(routes) = &mut *to
                {
                    let id = m.message_id().unwrap_or_default().to_owned();
                    match self.route(&m, dlq, routes, run).await {
                        Ok(Route::To(s)) => source = Some(s),
                        Ok(Route::NoSource) => without_source.push(id.clone()),
                        Ok(Route::Gone(why)) => run.tally.incomplete(why),
                        Err(e) => refused = Some(e),
                    }
                    if source.is_none() {
                        // Never guessed: it stays, and so does what follows it in its FIFO
                        // group. Refused: this one and what follows it in the batch are
                        // handed back, and the run stops after moving what came before.
                        if refused.is_none() {
                            run.tally.add(&d);
                            if let Some(g) = group {
                                blocked_groups.insert(g);
                            }
                        }
                        seen.insert(id);
                        held.push(m.receipt_handle().unwrap_or_default().to_owned());
                        continue;
                    }
                }
                let mut edit = redrive::transform::Edit::default();
                if d == Decision::Move {
                    (d, edit) = redrive::copy_of(&run.select, &msg, now_ms());
                }
                run.tally.add(&d);
                if d == Decision::Move {
                    let id = m.message_id().unwrap_or_default().to_owned();
                    run.tally.edited(&id, &edit);
                    run.tally.chose(id, redrive::since(&run.select, &msg));
                    chosen.push(m);
                    edits.push(edit);
                    chosen_to.extend(source);
                } else {
                    if let Some(g) = group {
                        blocked_groups.insert(g);
                    }
                    seen.insert(m.message_id().unwrap_or_default().to_owned());
                    held.push(m.receipt_handle().unwrap_or_default().to_owned());
                }
            }
            let moved = match &run.archive {
                Some(sink) => {
                    self.archive_batch(dlq, url, role, &chosen, sink, run, &mut held)
                        .await
                }
                None => match &*to {
                    To::Queue(dest_url) => {
                        self.move_batch(dlq, url, dest_url, (fifo, headers), (&chosen, &edits), run)
                            .await
                    }
                    To::BySource(_) => {
                        self.move_by_source(
                            dlq,
                            url,
                            (fifo, headers),
                            (chosen, edits),
                            chosen_to,
                            run,
                        )
                        .await
                    }
                },
            };
            if let Err(e) = moved {
                result = Err(e);
                break;
            }
            // What was chosen before it moved; the run stops here.
            if let Some(e) = refused.take() {
                result = Err(e);
                break;
            }
        }
        if !without_source.is_empty() {
            let n = without_source.len();
            run.tally
                .without_source
                .fetch_add(n as u64, Ordering::Relaxed);
            let mut ids: Vec<String> = without_source
                .iter()
                .take(10)
                .map(|i| format!("`{i}`"))
                .collect();
            if n > 10 {
                ids.push(format!("and {} more", n - 10));
            }
            run.tally.incomplete(format!(
                "{n} message(s) of `{dlq}` have no DeadLetterQueueSourceArn (SQS sets it only when a source queue's redrive policy moves a message; these were sent to `{dlq}` directly), so the queue they failed in is unknown: {}; they stay in `{dlq}` (redrive them with --to QUEUE)",
                ids.join(", ")
            ));
        }
        // What this run could not examine, said in the report (never "complete").
        let finished = result.is_ok() && !run.done();
        if finished {
            let not_read = total.saturating_sub(received) + blocked;
            if fifo && not_read > 0 && !blocked_groups.is_empty() {
                run.tally.incomplete(format!(
                    "{not_read} message(s) of FIFO queue `{dlq}` not read: SQS delivers nothing of a message group behind a message in flight, and this run leaves in place (not selected, or at maxRedrives) the first message of group(s) {}; they stay in the queue in order (move or remove those messages first, then run again)",
                    listed(&blocked_groups)
                ));
            } else if not_read > 0 {
                run.tally.incomplete(format!(
                    "{not_read} of the {total} message(s) visible or delayed in `{dlq}` at the start were not examined (SQS returned no more: delayed ones are not delivered before their delay ends); run again"
                ));
            }
            if in_flight > 0 {
                run.tally.incomplete(format!(
                    "{in_flight} message(s) in flight in `{dlq}` at the start (received and not yet visible again: held by an earlier run, for up to {hold}s after it received them, or by another reader) were not examined; run again when they are visible"
                ));
            }
        }
        // Messages not chosen become visible again now, not in `hold` seconds.
        let _ = self.reader.make_visible(dlq, url, &held).await;
        result
    }

    /// `dlqctl archive`: `chosen` written to the archive as one object (durable, listed in
    /// the manifest), then, with `--delete`, deleted from the DLQ; without, or when the
    /// archive could not be written, handed back (`held`: visible again at the end).
    #[allow(clippy::too_many_arguments)]
    async fn archive_batch(
        &self,
        dlq: &str,
        url: &str,
        role: DeadLetterRole,
        chosen: &[aws_sdk_sqs::types::Message],
        sink: &crate::archive::sink::Sink,
        run: &Run,
        held: &mut Vec<String>,
    ) -> Result<(), MoveError> {
        if chosen.is_empty() {
            return Ok(());
        }
        let receipts = || {
            chosen
                .iter()
                .map(|m| m.receipt_handle().unwrap_or_default().to_owned())
        };
        let messages: Vec<_> = chosen
            .iter()
            .map(|m| super::status::message_in(m, usize::MAX, role))
            .collect();
        if let Err(e) = sink.put(&messages).await {
            held.extend(receipts());
            return Err(MoveError(format!(
                "{e}; nothing of this batch was deleted from `{dlq}`"
            )));
        }
        let n = chosen.len() as u64;
        run.tally.moved.fetch_add(n, Ordering::Relaxed);
        run.tally.moved_ids(messages.iter().map(|m| m.id.clone()));
        if !sink.delete {
            held.extend(receipts());
            return Ok(());
        }
        let deletes: Vec<DeleteMessageBatchRequestEntry> = chosen
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .ok()
            })
            .collect();
        let clients = self.reader.aws.clients().await;
        let deleted = match clients
            .sqs
            .delete_message_batch()
            .queue_url(url)
            .set_entries(Some(deletes))
            .send()
            .await
        {
            Ok(d) => d.successful().len() as u64,
            Err(_) => 0,
        };
        let dup = n - deleted.min(n);
        run.tally.duplicated.fetch_add(dup, Ordering::Relaxed);
        if dup > 0 {
            return Err(MoveError(format!(
                "{dup} archived message(s) could not be deleted from `{dlq}`: they are in the archive and still in the queue"
            )));
        }
        Ok(())
    }

    /// Sends `chosen` to the destination in requests of at most [`BATCH_BYTES`], then deletes
    /// from the DLQ exactly those sent. A request SQS finds too long all the same
    /// (BatchRequestTooLong: nothing of it was sent; older quotas allow 256 KiB) is split in
    /// two and sent again, down to one message.
    async fn move_batch(
        &self,
        dlq: &str,
        url: &str,
        dest_url: &str,
        (fifo, headers): (bool, &HeaderRules),
        (chosen, edits): (&[aws_sdk_sqs::types::Message], &[Edit]),
        run: &Run,
    ) -> Result<(), MoveError> {
        if chosen.is_empty() {
            return Ok(());
        }
        let none = Edit::default();
        let entries: Vec<SendMessageBatchRequestEntry> = chosen
            .iter()
            .enumerate()
            .map(|(i, m)| copy(i, m, edits.get(i).unwrap_or(&none), fifo, headers))
            .collect::<Result<_, _>>()?;
        let sizes: Vec<usize> = entries.iter().map(payload).collect();
        let mut todo: std::collections::VecDeque<Vec<usize>> = by_size(&sizes).into();
        // Bounded: each split makes two smaller requests, so at most 2 × 10 requests.
        for _ in 0..4 * chosen.len() {
            let Some(part) = todo.pop_front() else { break };
            match self
                .send_part(dlq, url, dest_url, chosen, &entries, &part, run)
                .await?
            {
                Sent::Done => {}
                Sent::TooLong if part.len() > 1 => {
                    let (a, b) = part.split_at(part.len() / 2);
                    todo.push_front(b.to_vec());
                    todo.push_front(a.to_vec());
                }
                Sent::TooLong => {
                    return Err(MoveError(format!(
                        "sqs:SendMessageBatch on queue {}: a single message of {} bytes (body and attributes) is longer than a batch may be; it stays in `{dlq}` (visible again within {}s)",
                        dest_url.rsplit('/').next().unwrap_or(dest_url),
                        sizes[part[0]],
                        hold().unwrap_or(HOLD)
                    )));
                }
            }
        }
        if todo.is_empty() {
            Ok(())
        } else {
            Err(MoveError(format!(
                "sqs:SendMessageBatch: the batch could not be split small enough; what was not sent stays in `{dlq}` (visible again within {}s)",
                hold().unwrap_or(HOLD)
            )))
        }
    }

    /// `--to failed-consumer`: `chosen` sent back to their sources (`to`, one per message),
    /// one [`Mover::move_batch`] per source in the order each is first met, so each source
    /// receives its messages in the order they were read (FIFO groups keep their order).
    /// What moved to each source is counted in the tally ([`redrive::Tally::moved_to`]).
    async fn move_by_source(
        &self,
        dlq: &str,
        url: &str,
        copies: (bool, &HeaderRules),
        (chosen, edits): (Vec<aws_sdk_sqs::types::Message>, Vec<Edit>),
        to: Vec<Source>,
        run: &Run,
    ) -> Result<(), MoveError> {
        type Part = (Source, Vec<aws_sdk_sqs::types::Message>, Vec<Edit>);
        let mut parts: Vec<Part> = Vec::new();
        for ((m, e), s) in chosen.into_iter().zip(edits).zip(to) {
            match parts.iter_mut().find(|(p, _, _)| p.arn == s.arn) {
                Some((_, ms, es)) => {
                    ms.push(m);
                    es.push(e);
                }
                None => parts.push((s, vec![m], vec![e])),
            }
        }
        for (s, ms, es) in parts {
            let before = run.tally.moved();
            let sent = self
                .move_batch(dlq, url, &s.url, copies, (&ms, &es), run)
                .await;
            run.tally
                .moved_to(&s.arn, &s.name, run.tally.moved().saturating_sub(before));
            sent?;
        }
        Ok(())
    }

    /// `--to failed-consumer`: where message `m` goes back to, by its
    /// `DeadLetterQueueSourceArn`, each source resolved once per run (GetQueueUrl with the
    /// ARN's account).
    ///
    /// A source other than the channel's main queue must be owned by the target, as a
    /// `--to QUEUE` must (tagged by dlqctl; else `--allow-unowned-destination`), rather than
    /// taken on the word of its redrive policy: a redrive policy naming this DLQ shows only
    /// that the queue dead-letters here, not that this target may write to it (another team's
    /// queue can point at a shared DLQ). The channel's own main queue is never asked, as with
    /// `--to source`. RabbitMQ's mover checks the queue an x-death names the same way.
    async fn route(
        &self,
        m: &aws_sdk_sqs::types::Message,
        dlq: &str,
        routes: &mut Routes,
        run: &Run,
    ) -> Result<Route, MoveError> {
        let Some((arn, q)) = m
            .attributes()
            .and_then(|a| a.get(&MessageSystemAttributeName::DeadLetterQueueSourceArn))
            .map(|a| a.trim().to_owned())
            .and_then(|a| QueueArn::parse(&a).map(|q| (a, q)))
        else {
            return Ok(Route::NoSource);
        };
        if let Some(known) = routes.known.get(&arn) {
            return Ok(known.clone());
        }
        let here = routes.dlq_arn.as_ref();
        // A shared DLQ's declared sources (`deadLetter.of`) are the specs' own too.
        let own = (q.name == routes.main || routes.shared.contains(&q.name))
            && here.is_none_or(|d| d.account == q.account);
        // SQS keeps a DLQ in its sources' region; a client finds queues of its own region only.
        let elsewhere = here.is_some_and(|d| d.region != q.region);
        let found = if elsewhere {
            None
        } else {
            self.reader
                .url_in(&q.name, &q.account)
                .await
                .map_err(MoveError::of)?
        };
        let route = match found {
            None if elsewhere => Route::Gone(format!(
                "the source queue {arn} is in another region than `{dlq}`; the messages that came from it stay in `{dlq}`"
            )),
            None => Route::Gone(format!(
                "the source queue `{}` (DeadLetterQueueSourceArn {arn}) does not exist any more; the messages that came from it stay in `{dlq}` (recreate it, or redrive them with --to QUEUE)",
                q.name
            )),
            Some(u) if u == routes.dlq_url => Route::Gone(format!(
                "DeadLetterQueueSourceArn {arn} names `{dlq}` itself; those messages stay in it"
            )),
            Some(u) => {
                if !own && !run.allow_unowned {
                    let tags = self
                        .reader
                        .queue_tags_at(&q.name, &u)
                        .await
                        .map_err(MoveError::of)?;
                    let why = match tags {
                        Some(t) => not_dlqctls(&t),
                        None => Some("the queue does not exist".to_owned()),
                    };
                    if let Some(why) = why {
                        return Err(MoveError(format!(
                            "not redriving into `{}` (the source queue message {} came from, by its DeadLetterQueueSourceArn): {why}; dlqctl moves messages only into what the target owns. Pass --allow-unowned-destination to move them there anyway",
                            q.name,
                            m.message_id().unwrap_or_default()
                        )));
                    }
                }
                Route::To(Source {
                    arn: arn.clone(),
                    url: u,
                    name: q.name.clone(),
                })
            }
        };
        routes.known.insert(arn, route.clone());
        Ok(route)
    }

    /// One SendMessageBatch of the entries `part`, then the DeleteMessageBatch of those sent.
    #[allow(clippy::too_many_arguments)]
    async fn send_part(
        &self,
        dlq: &str,
        url: &str,
        dest_url: &str,
        chosen: &[aws_sdk_sqs::types::Message],
        entries: &[SendMessageBatchRequestEntry],
        part: &[usize],
        run: &Run,
    ) -> Result<Sent, MoveError> {
        let dest = dest_url.rsplit('/').next().unwrap_or(dest_url).to_owned();
        let batch: Vec<SendMessageBatchRequestEntry> =
            part.iter().map(|i| entries[*i].clone()).collect();
        // A send is a write: never retried blindly (a lost answer would send twice).
        let clients = self.reader.aws.clients().await;
        let sent = match clients
            .sqs
            .send_message_batch()
            .queue_url(dest_url)
            .set_entries(Some(batch))
            .send()
            .await
        {
            Ok(s) => s,
            Err(e) if too_long(&e) => return Ok(Sent::TooLong),
            Err(e) => {
                return Err(MoveError(format!(
                    "{}; nothing of this batch was deleted from `{dlq}`",
                    classify("sqs:SendMessageBatch", &format!("queue {dest}"), e)
                )));
            }
        };
        let ok: BTreeSet<usize> = sent
            .successful()
            .iter()
            .filter_map(|s| s.id().parse().ok())
            .collect();
        // The copies' own ids: SQS keeps them when a redrive policy brings a copy back.
        for s in sent.successful() {
            run.copies.sent_as(s.message_id());
        }
        let deletes: Vec<DeleteMessageBatchRequestEntry> = chosen
            .iter()
            .enumerate()
            .filter(|(i, _)| ok.contains(i))
            .filter_map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .ok()
            })
            .collect();
        let mut deleted = 0u64;
        if !deletes.is_empty() {
            match clients
                .sqs
                .delete_message_batch()
                .queue_url(url)
                .set_entries(Some(deletes.clone()))
                .send()
                .await
            {
                Ok(d) => deleted = d.successful().len() as u64,
                Err(_) => deleted = 0,
            }
        }
        run.tally
            .moved
            .fetch_add(ok.len() as u64, Ordering::Relaxed);
        // What was sent (a `--transform` copy's body is the program's).
        for i in ok.iter().filter(|i| **i < entries.len()) {
            run.tally.moved_body(entries[*i].message_body().as_bytes());
        }
        run.tally.moved_ids(
            chosen
                .iter()
                .enumerate()
                .filter(|(i, _)| ok.contains(i))
                .map(|(_, m)| m.message_id().unwrap_or_default().to_owned()),
        );
        let dup = ok.len() as u64 - deleted.min(ok.len() as u64);
        run.tally.duplicated.fetch_add(dup, Ordering::Relaxed);
        if let Some(f) = sent.failed().first() {
            return Err(MoveError(format!(
                "sqs:SendMessageBatch on queue {dest} refused a message ({}: {}); it stays in `{dlq}` (visible again within {}s)",
                f.code(),
                f.message().unwrap_or_default(),
                hold().unwrap_or(HOLD)
            )));
        }
        if dup > 0 {
            return Err(MoveError(format!(
                "{dup} message(s) were sent to `{dest}` but could not be deleted from `{dlq}`: they are in both queues"
            )));
        }
        Ok(Sent::Done)
    }

    /// A queue's ARN (for the move task's destination).
    async fn arn(&self, name: &str, url: &str) -> Result<String, MoveError> {
        self.reader
            .attributes(name, url, QueueAttributeName::QueueArn)
            .await
            .map_err(MoveError::of)?
            .and_then(|a| a.get("QueueArn").cloned())
            .ok_or_else(|| MoveError(format!("queue `{name}` does not exist; nothing was moved")))
    }

    /// Tags the DLQ as held by `holder`, after checking nobody else holds it.
    async fn lock(&self, dlq: &str, url: &str, holder: &str) -> Result<(), MoveError> {
        if let Some(other) = self.lock_holder(dlq).await?
            && other != holder
            && !stale(&other)
        {
            return Err(MoveError(format!(
                "queue `{dlq}` is being redriven already, by {other}; wait for it to finish (if that run is gone, remove the queue's `{LOCK_TAG}` tag)"
            )));
        }
        let clients = self.reader.aws.clients().await;
        clients
            .sqs
            .tag_queue()
            .queue_url(url)
            .tags(LOCK_TAG, holder)
            .send()
            .await
            .map_err(|e| MoveError::of(classify("sqs:TagQueue", &format!("queue {dlq}"), e)))?;
        // Two runs that tagged at once: the last tag wins, and only its writer goes on.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        match self.lock_holder(dlq).await? {
            Some(h) if h == holder => Ok(()),
            Some(h) => Err(MoveError(format!(
                "queue `{dlq}` is being redriven already, by {h}; wait for it to finish"
            ))),
            None => Err(MoveError(format!(
                "queue `{dlq}`: the `{LOCK_TAG}` tag did not stay"
            ))),
        }
    }

    /// Why this run no longer holds the lock, if it does not.
    async fn lost_lock(&self, dlq: &str, holder: &str) -> Option<MoveError> {
        match self.lock_holder(dlq).await {
            Ok(Some(h)) if h == holder => None,
            Ok(other) => Some(MoveError(format!(
                "queue `{dlq}`: the redrive lock is now held by {}; stopping",
                other.unwrap_or_else(|| "nobody (the tag was removed)".into())
            ))),
            Err(e) => Some(e),
        }
    }

    async fn lock_holder(&self, dlq: &str) -> Result<Option<String>, MoveError> {
        let tags = self.reader.queue_tags(dlq).await.map_err(MoveError::of)?;
        Ok(tags.and_then(|t| t.get(LOCK_TAG).cloned()))
    }

    /// Removes the lock tag, if it is still this run's (never another run's).
    async fn unlock(&self, dlq: &str, url: &str, holder: &str) -> Result<(), MoveError> {
        if self.lock_holder(dlq).await?.as_deref() != Some(holder) {
            return Ok(());
        }
        let clients = self.reader.aws.clients().await;
        clients
            .sqs
            .untag_queue()
            .queue_url(url)
            .tag_keys(LOCK_TAG)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| MoveError::of(classify("sqs:UntagQueue", "the redrive lock", e)))
    }
}

/// What the mover knows of the DLQ when it starts.
#[derive(Debug, Clone, Copy)]
struct Start<'a> {
    fifo: bool,
    /// Visible and delayed messages: what this run sets out to examine.
    total: u64,
    /// Received by someone and not yet visible again.
    in_flight: u64,
    /// Which of the channel's destinations the messages come from (a message a redrive
    /// policy moved to the DLQ used up its receives; one in the invalid queue did not).
    role: DeadLetterRole,
    /// What the copies leave behind of the messages' attributes (`deadLetter.redrive`).
    headers: &'a HeaderRules,
}

/// Where a run sends what it moves.
enum To {
    /// One queue (`--to source`, `--to QUEUE`): its URL.
    Queue(String),
    /// `--to failed-consumer`: each message to its own source.
    BySource(Routes),
}

/// `--to failed-consumer`: the sources met so far, each resolved once per run.
struct Routes {
    /// The channel's main queue, and the DLQ's ARN: a source that is that queue in the
    /// DLQ's account is the channel's own.
    main: String,
    /// The main queues of the channels sharing the DLQ (`deadLetter.of`): declared sources.
    shared: Vec<String>,
    dlq_arn: Option<QueueArn>,
    /// The DLQ's URL (no message goes back into it).
    dlq_url: String,
    /// By source ARN.
    known: HashMap<String, Route>,
}

/// Where one message goes back to ([`Mover::route`]).
#[derive(Debug, Clone)]
enum Route {
    To(Source),
    /// No `DeadLetterQueueSourceArn` (or not a queue ARN): it stays, and is reported.
    NoSource,
    /// The source cannot receive it (gone): it stays; why, for the report.
    Gone(String),
}

/// A source queue a message goes back to.
#[derive(Debug, Clone)]
struct Source {
    /// As SQS recorded it (`DeadLetterQueueSourceArn`).
    arn: String,
    url: String,
    name: String,
}

/// How one SendMessageBatch went, when SQS answered.
enum Sent {
    Done,
    /// BatchRequestTooLong: the request as a whole was refused, nothing of it was sent.
    TooLong,
}

/// SendMessageBatch's limit on a request: the bodies and message attributes of its entries
/// together (AWS: 1 MiB; moto counts the bodies).
pub const BATCH_BYTES: usize = 1024 * 1024;

/// What an entry counts towards [`BATCH_BYTES`]: its body and, per message attribute, the
/// name, the data type and the value.
pub(super) fn payload(e: &SendMessageBatchRequestEntry) -> usize {
    let attrs: usize = e
        .message_attributes()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            k.len()
                + v.data_type().len()
                + v.string_value().map_or(0, str::len)
                + v.binary_value().map_or(0, |b| b.as_ref().len())
        })
        .sum();
    e.message_body().len() + attrs
}

/// Entries (by index) packed in order into requests of at most [`BATCH_BYTES`] each.
pub(super) fn by_size(sizes: &[usize]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut bytes = 0;
    for (i, n) in sizes.iter().enumerate() {
        match out.last_mut() {
            Some(last) if bytes + n <= BATCH_BYTES => {
                last.push(i);
                bytes += n;
            }
            _ => {
                out.push(vec![i]);
                bytes = *n;
            }
        }
    }
    out
}

/// Whether SendMessageBatch refused the request as too long (modelled, or by its code).
pub(super) fn too_long<R>(
    e: &aws_sdk_sqs::error::SdkError<
        aws_sdk_sqs::operation::send_message_batch::SendMessageBatchError,
        R,
    >,
) -> bool {
    use aws_sdk_sqs::error::ProvideErrorMetadata;
    e.as_service_error().is_some_and(|s| {
        s.is_batch_request_too_long() || s.code().is_some_and(|c| c.contains("BatchRequestTooLong"))
    })
}

/// A FIFO message's group.
fn group_of(m: &aws_sdk_sqs::types::Message) -> Option<String> {
    m.attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
        .cloned()
}

/// Group names for a report: backquoted, the first ten, then how many more.
fn listed(groups: &BTreeSet<String>) -> String {
    let mut names: Vec<String> = groups.iter().take(10).map(|g| format!("`{g}`")).collect();
    if groups.len() > 10 {
        names.push(format!("and {} more", groups.len() - 10));
    }
    names.join(", ")
}

/// A holder on this host whose process is gone (`user@host pid N`).
fn stale(holder: &str) -> bool {
    crate::redrive::holder_gone(holder)
}

/// The copy of one message for SendMessageBatch.
fn copy(
    i: usize,
    m: &aws_sdk_sqs::types::Message,
    edit: &Edit,
    fifo: bool,
    headers: &HeaderRules,
) -> Result<SendMessageBatchRequestEntry, MoveError> {
    let mut attrs: HashMap<String, MessageAttributeValue> =
        m.message_attributes().cloned().unwrap_or_default();
    // `--transform`: removed names go, changed and new ones are set as String attributes;
    // the others keep the type they were sent with.
    attrs.retain(|k, _| !edit.removed.contains(k));
    for (k, v) in &edit.set {
        let value = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(v)
            .build()
            .map_err(MoveError::of)?;
        attrs.insert(k.clone(), value);
    }
    let body = match &edit.body {
        None => m.body().unwrap_or_default().to_owned(),
        Some(b) => String::from_utf8(b.clone()).map_err(|_| {
            MoveError(format!(
                "the copy --transform made of message {} is not UTF-8 text, which SQS message bodies must be; it stays in the dead-letter queue",
                m.message_id().unwrap_or_default()
            ))
        })?,
    };
    // `deadLetter.redrive` and the default list; the counter is read and rewritten below,
    // whatever they say.
    attrs.retain(|k, _| k.eq_ignore_ascii_case(REDRIVE_COUNT) || !headers.sheds(k));
    let count = attrs
        .get(REDRIVE_COUNT)
        .and_then(|v| v.string_value())
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let value = MessageAttributeValue::builder()
        .data_type("Number")
        .string_value((count + 1).to_string())
        .build()
        .map_err(MoveError::of)?;
    attrs.insert(REDRIVE_COUNT.to_owned(), value);
    let mut e = SendMessageBatchRequestEntry::builder()
        .id(i.to_string())
        .message_body(body)
        .set_message_attributes(Some(attrs));
    if fifo {
        let group = m
            .attributes()
            .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
            .cloned()
            .unwrap_or_else(|| "dlqctl-redrive".to_owned());
        e = e
            .message_group_id(group)
            .message_deduplication_id(m.message_id().unwrap_or_default());
    }
    e.build().map_err(MoveError::of)
}

/// Why a queue with these tags is not dlqctl's (not tagged `managed-by: dlqctl` with a
/// channel), if it is not: a `--to` must be owned.
pub(super) fn not_dlqctls(tags: &std::collections::BTreeMap<String, String>) -> Option<String> {
    use super::{TAG_CHANNEL, TAG_MANAGED_BY, TAG_MANAGED_BY_VALUE};
    match tags.get(TAG_MANAGED_BY).map(String::as_str) {
        Some(TAG_MANAGED_BY_VALUE) if tags.get(TAG_CHANNEL).is_some_and(|c| !c.is_empty()) => None,
        Some(TAG_MANAGED_BY_VALUE) => Some(format!("the queue has no `{TAG_CHANNEL}` tag")),
        Some(other) => Some(format!(
            "the queue is tagged `{TAG_MANAGED_BY}: {other}`: another tool manages it"
        )),
        None => Some(format!(
            "the queue is not tagged `{TAG_MANAGED_BY}: {TAG_MANAGED_BY_VALUE}`"
        )),
    }
}

impl crate::backend::kit::doors::Connected for Mover {
    type Error = MoveError;

    fn target(&self) -> &str {
        Mover::target(self)
    }
}

impl crate::backend::kit::doors::Redrive for Mover {
    async fn redrive(&self, r: &Resolved, run: &Run) -> Result<(), MoveError> {
        Mover::redrive(self, r, run).await
    }

    async fn release(&self, r: &Resolved, run: &Run) -> Result<(), MoveError> {
        Mover::release(self, r, run).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_packed_by_payload_under_one_mebibyte() {
        let kib = 1024;
        // Ten of 250 KiB: four fit in 1 MiB (1,024,000 bytes), a fifth does not.
        assert_eq!(
            by_size(&[250 * kib; 10]),
            vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]
        );
        // Small messages: one request of ten.
        assert_eq!(by_size(&[100; 10]), vec![(0..10).collect::<Vec<_>>()]);
        // Exactly the limit fits; one byte more starts a new request.
        assert_eq!(
            by_size(&[BATCH_BYTES / 2, BATCH_BYTES / 2]),
            vec![vec![0, 1]]
        );
        assert_eq!(
            by_size(&[BATCH_BYTES / 2, BATCH_BYTES / 2 + 1]),
            vec![vec![0], vec![1]]
        );
        // A message alone over the limit still goes alone (SQS then says why).
        assert_eq!(by_size(&[BATCH_BYTES + 1, 1]), vec![vec![0], vec![1]]);
        assert!(by_size(&[]).is_empty());
    }

    #[test]
    fn the_payload_counts_message_attributes_too() {
        let m = aws_sdk_sqs::types::Message::builder()
            .message_id("m-1")
            .body("x".repeat(1000))
            .message_attributes(
                "dlq-error-class",
                MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value("poison")
                    .build()
                    .expect("attribute"),
            )
            .build();
        let e = copy(0, &m, &Edit::default(), false, &HeaderRules::default()).expect("copy");
        // body + "dlq-error-class" String poison + "dlq-redrive-count" Number 1
        assert_eq!(payload(&e), 1000 + (15 + 6 + 6) + (17 + 6 + 1));
    }
}
