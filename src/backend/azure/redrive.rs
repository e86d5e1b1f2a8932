//! `dlqctl redrive` on Azure Service Bus: peek-lock each message of the queue's
//! `$DeadLetterQueue`, send a copy to the destination queue (the channel's queue with `--to
//! source`), and complete it (Delete Message on its lock) only after the send was confirmed
//! (201): at least once, never lost. A message that fails in between stays: a send that is
//! not confirmed leaves it locked until it is unlocked (or its lock runs out); a copy that
//! was sent but whose complete failed (or whose lock had run out) is counted as possibly
//! duplicated.
//!
//! A message the selection leaves, or one at `maxRedrives`, is held locked until the run
//! ends, then unlocked (so the next peek-lock gets the next message): its DeliveryCount in
//! the subqueue is one higher, and nothing else happens to it (no dead-lettering there).
//! Reads end at an empty peek-lock, at a message this run has already seen (a held lock ran
//! out), at `--limit`, or at a stop. Messages another receiver holds locked (a killed run's,
//! until their lockDuration runs out) are not seen: the run then says how many it could not
//! read, and is not complete.
//!
//! The copy carries the body, the content type, the sender's BrokerProperties that a sender
//! may set (MessageId, CorrelationId, Label, ReplyTo, ReplyToSessionId, To, PartitionKey,
//! TimeToLive) and the custom properties, without `DeadLetterReason` and
//! `DeadLetterErrorDescription` and those `deadLetter.redrive` and the default list shed,
//! with `dlq-redrive-count` one higher. The MessageId is kept, so a destination with
//! duplicate detection would drop the copy as a duplicate and lose the message: such a
//! destination is refused. A forward queue (`deadLetter.name`) is not redriven: each lock
//! there spends one of its own deliveries (docs/azure.md).
//!
//! `redrive --from-archive` and `archive` are not built for Service Bus; they refuse before
//! anything is read.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use super::data::{DataWriter, Locked};
use super::read::Reader;
use crate::backend::kit::errors::{BackendError, MoveError};
use crate::redrive::{Decision, Pace, Run, decide_copy, moved_headers};
use crate::spec::resolve::Resolved;

/// Peek-locks at most, whatever the server answers (1,000,000 messages).
const MAX_READS: usize = 1_000_000;

/// BrokerProperties a copy keeps (those "Message properties" lists that a sender sets and
/// that describe the message, not its delivery).
const KEPT: [&str; 8] = [
    "MessageId",
    "CorrelationId",
    "Label",
    "ReplyTo",
    "ReplyToSessionId",
    "To",
    "PartitionKey",
    "TimeToLive",
];

/// Custom properties Service Bus adds when it dead-letters: dropped from the copy.
const DEAD_LETTER_PROPERTIES: [&str; 2] = ["DeadLetterReason", "DeadLetterErrorDescription"];

fn not_built(target: &str, what: &str) -> BackendError {
    BackendError::Config {
        target: target.to_owned(),
        message: format!(
            "`{what}` is not built for Azure Service Bus in this version: nothing was read or moved (docs/azure.md)"
        ),
    }
}

/// The redrive capability: the reader's ARM view and the data plane's writing face.
#[derive(Debug, Clone)]
pub struct Mover {
    reader: Reader,
    data: DataWriter,
}

impl Mover {
    pub fn new(reader: Reader) -> Self {
        let data = reader.data.clone().into_writer();
        Mover { reader, data }
    }

    pub async fn redrive(&self, r: &Resolved, run: &Run) -> Result<(), MoveError> {
        let Some(a) = &r.azure else {
            return Err(MoveError(format!(
                "channel {} is not an Azure Service Bus channel",
                r.channel
            )));
        };
        if a.subscription.is_some() {
            return Err(MoveError(format!(
                "channel `{}`: topic channels are not redriven in this version, only queues (docs/azure.md); nothing was read or moved",
                r.channel
            )));
        }
        if let Some(f) = &a.forward_to {
            return Err(MoveError(format!(
                "channel `{}` forwards its dead letters to `{f}`, an ordinary queue whose own maxDeliveryCount each lock would spend: redrive from a forward queue is not built in this version (docs/azure.md); nothing was read or moved",
                r.channel
            )));
        }
        if run.archive.is_some() {
            return Err(MoveError(
                "`archive` is not built for Azure Service Bus in this version: nothing was read or moved (docs/azure.md)".into(),
            ));
        }
        let dest = if run.to.source { &r.main } else { &run.to.name };
        let Some(found) = self
            .reader
            .get_queue(dest)
            .await
            .map_err(|e| MoveError(e.to_string()))?
        else {
            return Err(MoveError(format!(
                "the destination queue `{dest}` does not exist; nothing was moved"
            )));
        };
        run.check_owned(crate::redrive::outside_prefixes(
            &self.reader.prefixes,
            dest,
        ))
        .map_err(MoveError)?;
        if found["properties"]["requiresDuplicateDetection"] == Value::Bool(true) {
            return Err(MoveError(format!(
                "the destination queue `{dest}` has duplicate detection on: a copy keeps its MessageId, and Service Bus would drop it as a duplicate while its original is completed here. Nothing was moved"
            )));
        }
        let dlq = &r.dead_letter;
        let mut held: Vec<Locked> = Vec::new();
        let outcome = self.moves(r, run, dest, dlq, &mut held).await;
        // What the selection left, handed back whatever happened.
        let unlocked = self.data.reader().unlock_all(&held).await;
        outcome?;
        if let Err(e) = unlocked {
            run.tally.incomplete(format!(
                "some messages of {dlq} this run left could not be unlocked ({e}); they are back after their lockDuration"
            ));
        }
        // Messages locked by another receiver were never seen: not complete.
        if !run.done()
            && let Ok(Some(q)) = self.reader.get_queue(&r.main).await
            && let Some(n) = q["properties"]["countDetails"]["deadLetterMessageCount"].as_u64()
            && n > held.len() as u64
        {
            run.tally.incomplete(format!(
                "{} message(s) in {dlq} were locked by another receiver and not read (a killed run's locks run out after the queue's lockDuration): run again then",
                n - held.len() as u64
            ));
        }
        Ok(())
    }

    /// The reads and moves; what it leaves locked goes into `held`.
    async fn moves(
        &self,
        r: &Resolved,
        run: &Run,
        dest: &str,
        dlq: &str,
        held: &mut Vec<Locked>,
    ) -> Result<(), MoveError> {
        let mut pace = Pace::new(run.rate);
        let mut seen: BTreeSet<u64> = BTreeSet::new();
        for _ in 0..MAX_READS {
            if run.done() {
                break;
            }
            let Some(locked) = self
                .data
                .reader()
                .peek_lock(dlq)
                .await
                .map_err(|e| MoveError(e.to_string()))?
            else {
                break;
            };
            if !seen.insert(locked.sequence) {
                held.push(locked);
                break;
            }
            let m = super::status::message(&locked, &r.main);
            let (d, edit) = decide_copy(&run.select, &m, crate::status::now_ms());
            run.tally.add(&d);
            if d != Decision::Move {
                held.push(locked);
                continue;
            }
            // Interrupted during the wait: handed back, nothing sent after it.
            if !pace.wait_or_stop(&run.stop).await {
                held.push(locked);
                break;
            }
            run.tally
                .chose(m.id.clone(), crate::redrive::since(&run.select, &m));
            run.tally.edited(&m.id, &edit);
            // Header names arrive lowercased (HTTP/1 carries them so): compared without case.
            let own: Vec<(String, String)> = edit
                .headers(&m.headers)
                .into_iter()
                .filter(|(k, _)| {
                    !DEAD_LETTER_PROPERTIES
                        .iter()
                        .any(|d| k.eq_ignore_ascii_case(d))
                })
                .collect();
            let custom = moved_headers(&own, &[], &r.headers);
            let broker: Map<String, Value> = locked
                .broker
                .iter()
                .filter(|(k, _)| KEPT.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let body = edit.body.clone().unwrap_or_else(|| locked.body.clone());
            if let Err(e) = self
                .data
                .send(dest, locked.content_type.as_deref(), &broker, &custom, body)
                .await
            {
                // Not confirmed: the message stays in the subqueue (handed back below).
                held.push(locked);
                return Err(MoveError(format!(
                    "sending message {} to queue {dest} was not confirmed ({e}); it stays in {dlq}, and {} moved before it",
                    m.id,
                    run.tally.moved()
                )));
            }
            match self.data.complete(&locked).await {
                Ok(true) => {
                    run.tally.moved.fetch_add(1, Ordering::Relaxed);
                    run.tally.moved_body(edit.body(&m.body));
                    run.tally.moved_ids([m.id.clone()]);
                }
                Ok(false) => {
                    run.tally.duplicated.fetch_add(1, Ordering::Relaxed);
                    return Err(MoveError(format!(
                        "message {} was sent to {dest} but its lock in {dlq} had run out, so it could not be completed: it may be delivered twice",
                        m.id
                    )));
                }
                Err(e) => {
                    run.tally.duplicated.fetch_add(1, Ordering::Relaxed);
                    return Err(MoveError(format!(
                        "message {} was sent to {dest} but could not be completed in {dlq} ({e}): it may be delivered twice",
                        m.id
                    )));
                }
            }
        }
        Ok(())
    }
}

impl crate::backend::kit::doors::Connected for Mover {
    type Error = MoveError;

    fn target(&self) -> &str {
        &self.reader.target
    }
}

impl crate::backend::kit::doors::Redrive for Mover {
    async fn redrive(&self, r: &Resolved, run: &Run) -> Result<(), MoveError> {
        Mover::redrive(self, r, run).await
    }
}

/// The replay capability (refuses, see the module doc).
#[derive(Debug, Clone)]
pub struct Replayer {
    reader: Reader,
}

impl Replayer {
    pub fn new(reader: Reader) -> Self {
        Replayer { reader }
    }
}

impl crate::backend::kit::doors::Connected for Replayer {
    type Error = BackendError;

    fn target(&self) -> &str {
        &self.reader.target
    }
}

impl crate::backend::kit::doors::Replay for Replayer {
    async fn replay(
        &self,
        _r: &Resolved,
        _job: &crate::redrive::replay::Job,
    ) -> Result<(), Self::Error> {
        Err(not_built(&self.reader.target, "redrive --from-archive"))
    }
}
