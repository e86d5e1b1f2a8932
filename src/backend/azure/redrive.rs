//! `dlqctl redrive` on Azure Service Bus: peek-lock each message of the queue's (or a topic
//! channel's subscription's) `$DeadLetterQueue`, send a copy to the destination (with `--to
//! source` the channel's queue, or its topic: a subscription cannot be sent to, and the
//! redrive driver has asked for `--allow-fanout` when the topic has other subscriptions;
//! `--to QUEUE` a queue), and complete it (Delete Message on its lock) only after the send
//! was confirmed (201): at least once, never lost. A message that fails in between stays:
//! a send that is not confirmed leaves it locked until it is unlocked (or its lock runs
//! out); a copy that was sent but whose complete failed (or whose lock had run out) is
//! counted as possibly duplicated.
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
//! `dlqctl archive` reads the same way and writes the chosen messages to the archive
//! ([`ARCHIVE_BATCH`] an object) while they are locked, completing them (with `--delete`)
//! only after the object was written. `redrive --from-archive` ([`Replayer`]) sends each
//! archived message to the queue or topic as a redrive sends a copy.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use super::data::{DataWriter, Locked};
use super::read::Reader;
use crate::archive::sink::Sink;
use crate::backend::kit::errors::{BackendError, MoveError};
use crate::redrive::replay::Job;
use crate::redrive::{Decision, Pace, Run, decide_copy, moved_headers};
use crate::resource::ResourceId;
use crate::spec::resolve::headers::HeaderRules;
use crate::spec::resolve::{AzureResolved, Resolved};
use crate::status::Message;

/// Messages per archive object (`dlqctl archive`).
const ARCHIVE_BATCH: usize = 100;

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

/// What a run holds locked when its reads end: what it leaves (`held`, unlocked at the end)
/// and, for `dlqctl archive`, what it chose and has not written yet (`pending`); `lapsed`: a
/// lock it held ran out, and the read stopped at that message.
#[derive(Default)]
struct Left {
    held: Vec<Locked>,
    pending: Vec<(Locked, Message)>,
    lapsed: bool,
}

/// Where a run sends: a queue, or a topic channel's topic.
struct Destination<'a> {
    name: &'a str,
    /// `queue` or `topic`, for messages.
    kind: &'static str,
    /// The entity the dead letters came from, as status names it (`topic/subscriptions/s`).
    source: String,
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
        let a = azure_of(r)?;
        if let Some(f) = &a.forward_to {
            return Err(MoveError(format!(
                "channel `{}` forwards its dead letters to `{f}`, an ordinary queue whose own maxDeliveryCount each lock would spend: redrive from a forward queue is not built in this version (docs/azure.md); nothing was read or moved",
                r.channel
            )));
        }
        // The entity that dead-lettered (the queue, or the topic channel's subscription),
        // and the destination: `--to source` is the channel's queue, or its topic (the
        // redrive driver has checked the topic's other subscriptions: --allow-fanout).
        let target = &self.reader.target;
        let entity = match &a.subscription {
            None => super::queue_id(target, &r.main),
            Some(s) => super::subscription_id(target, &r.main, s),
        };
        let (dest, kind, found) =
            destination(&self.reader, r, a, &run.to, "nothing was moved").await?;
        run.check_owned(crate::redrive::outside_prefixes(
            &self.reader.prefixes,
            &dest.name,
        ))
        .map_err(MoveError)?;
        // `dlqctl archive` sends nothing: the destination is only checked to exist.
        if run.archive.is_none()
            && found["properties"]["requiresDuplicateDetection"] == Value::Bool(true)
        {
            return Err(MoveError(format!(
                "the destination {kind} `{}` has duplicate detection on: a copy keeps its MessageId, and Service Bus would drop it as a duplicate while its original is completed here. Nothing was moved",
                dest.name
            )));
        }
        let dest = Destination {
            name: &dest.name,
            kind,
            source: a.entity_path(&r.main),
        };
        let dlq = &r.dead_letter;
        let mut left = Left::default();
        let mut outcome = self.moves(r, run, &dest, dlq, &mut left).await;
        let Left {
            mut held,
            mut pending,
            lapsed,
        } = left;
        // `dlqctl archive`: what was chosen and is still locked goes into the archive
        // whatever stopped the reads (nothing is lost by writing it: it is still ours).
        if let Some(sink) = run.archive.as_deref() {
            let archived = self.archive(run, sink, dlq, &mut pending, &mut held).await;
            outcome = match (outcome, archived) {
                (Err(a), Err(b)) => Err(MoveError(format!("{}; then {}", a.0, b.0))),
                (a, b) => a.and(b),
            };
        }
        held.extend(pending.into_iter().map(|(l, _)| l));
        // What the selection left, handed back whatever happened.
        let unlocked = self.data.reader().unlock_all(&held).await;
        outcome?;
        if let Err(e) = unlocked {
            run.tally.incomplete(format!(
                "some messages of {dlq} this run left could not be unlocked ({e}); they are back after their lockDuration"
            ));
        }
        // Messages never seen (locked by another receiver, or not reached because a lock of
        // this run's ran out and the read stopped): not complete.
        let distinct = held
            .iter()
            .map(|l| l.sequence)
            .collect::<BTreeSet<_>>()
            .len() as u64;
        if !run.done()
            && let Ok(Some(q)) = self.reader.get_entity(&entity).await
            && let Some(n) = q["properties"]["countDetails"]["deadLetterMessageCount"].as_u64()
            && n > distinct
        {
            run.tally.incomplete(if lapsed {
                format!(
                    "{} message(s) in {dlq} were not read: a lock this run held ran out (the lockDuration) before the read reached them, and a read stops at a message it has seen; run again (what this run leaves in the subqueue stays locked until the run ends, so fewer of them, with --delete or --limit, reach further)",
                    n - distinct
                )
            } else {
                format!(
                    "{} message(s) in {dlq} were locked by another receiver and not read (a killed run's locks run out after the queue's lockDuration): run again then",
                    n - distinct
                )
            });
        }
        Ok(())
    }

    /// The reads and moves; what it leaves locked goes into `left.held`, what `dlqctl
    /// archive` chose into `left.pending` (written [`ARCHIVE_BATCH`] at a time).
    async fn moves(
        &self,
        r: &Resolved,
        run: &Run,
        dest: &Destination<'_>,
        dlq: &str,
        left: &mut Left,
    ) -> Result<(), MoveError> {
        let mut pace = Pace::new(run.rate);
        let mut seen: BTreeSet<u64> = BTreeSet::new();
        // `dlqctl archive`: an object is written once it holds ARCHIVE_BATCH messages, or
        // once its first has been locked for half the lockDuration (as the spec sets it), so
        // that a slow run (`--rate`) completes each while its lock still holds.
        let half_lock = std::time::Duration::from_millis(
            r.azure
                .as_ref()
                .map_or(60_000, |a| a.lock_duration.as_millis())
                / 2,
        );
        let mut first_pending: Option<std::time::Instant> = None;
        for _ in 0..MAX_READS {
            if run.done() {
                break;
            }
            if let (Some(sink), Some(since)) = (run.archive.as_deref(), first_pending)
                && since.elapsed() >= half_lock
            {
                first_pending = None;
                self.archive(run, sink, dlq, &mut left.pending, &mut left.held)
                    .await?;
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
                // Peek-lock hands out only unlocked messages: a lock this run held ran out.
                left.lapsed = true;
                left.held.push(locked);
                break;
            }
            let m = super::status::message(&locked, &dest.source);
            if let Some(key) = run.copies.ours_message(&m) {
                // A copy this run sent (in this batch or an earlier one), failed again and
                // back: handed back, not moved a second time.
                run.copies.came_back(key, &run.tally);
                left.held.push(locked);
                continue;
            }
            let (d, edit) = decide_copy(&run.select, &m, crate::status::now_ms());
            run.tally.add(&d);
            if d != Decision::Move {
                left.held.push(locked);
                continue;
            }
            // Interrupted during the wait: handed back, nothing sent after it.
            if !pace.wait_or_stop(&run.stop).await {
                left.held.push(locked);
                break;
            }
            if let Some(sink) = run.archive.as_deref() {
                // Beyond --limit: handed back.
                if run
                    .select
                    .limit
                    .is_some_and(|l| run.tally.moved() + left.pending.len() as u64 >= l)
                {
                    left.held.push(locked);
                    break;
                }
                // A MessageId is the application's and need not be unique: the record's id
                // adds the SequenceNumber, which a rerun reads again for the same message.
                let mut m = m;
                m.id = format!("{}#{}", m.id, locked.sequence);
                run.tally
                    .chose(m.id.clone(), crate::redrive::since(&run.select, &m));
                left.pending.push((locked, m));
                let since = *first_pending.get_or_insert_with(std::time::Instant::now);
                if left.pending.len() >= ARCHIVE_BATCH || since.elapsed() >= half_lock {
                    first_pending = None;
                    self.archive(run, sink, dlq, &mut left.pending, &mut left.held)
                        .await?;
                }
                continue;
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
            let mut custom = moved_headers(&own, &[], &r.headers);
            custom.push((
                crate::status::envelope::REDRIVE_RUN.to_owned(),
                run.copies.next(),
            ));
            let broker: Map<String, Value> = locked
                .broker
                .iter()
                .filter(|(k, _)| KEPT.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let body = edit.body.clone().unwrap_or_else(|| locked.body.clone());
            if let Err(e) = self
                .data
                .send(
                    dest.name,
                    locked.content_type.as_deref(),
                    &broker,
                    &custom,
                    body,
                )
                .await
            {
                // Not confirmed: the message stays in the subqueue (handed back below), and
                // may have landed too.
                if may_have_landed(&e) {
                    run.tally.duplicated.fetch_add(1, Ordering::Relaxed);
                }
                left.held.push(locked);
                return Err(MoveError(format!(
                    "sending message {} to {} {} was not confirmed ({e}); it stays in {dlq}, and {} moved before it",
                    m.id,
                    dest.kind,
                    dest.name,
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
                        "message {} was sent to {} but its lock in {dlq} had run out, so it could not be completed: it may be delivered twice",
                        m.id, dest.name
                    )));
                }
                Err(e) => {
                    run.tally.duplicated.fetch_add(1, Ordering::Relaxed);
                    return Err(MoveError(format!(
                        "message {} was sent to {} but could not be completed in {dlq} ({e}): it may be delivered twice",
                        m.id, dest.name
                    )));
                }
            }
        }
        Ok(())
    }

    /// `dlqctl archive`: writes the chosen messages in `pending` (still locked by this run)
    /// to the archive as one object, then, with `--delete`, completes each; without it they
    /// go into `held` (unlocked when the run ends). A write that fails leaves every one of
    /// them in the subqueue; one whose complete fails is in the archive and may stay in the
    /// subqueue too (possibly duplicated), and so are those after it.
    async fn archive(
        &self,
        run: &Run,
        sink: &Sink,
        dlq: &str,
        pending: &mut Vec<(Locked, Message)>,
        held: &mut Vec<Locked>,
    ) -> Result<(), MoveError> {
        if pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(pending);
        let messages: Vec<Message> = batch.iter().map(|(_, m)| m.clone()).collect();
        let n = messages.len();
        if let Err(e) = sink.put(&messages).await {
            held.extend(batch.into_iter().map(|(l, _)| l));
            return Err(MoveError(format!(
                "{e}; the {n} message(s) of this object stay in {dlq}, and {} were archived before them",
                run.tally.moved()
            )));
        }
        run.tally.moved.fetch_add(n as u64, Ordering::Relaxed);
        run.tally.moved_ids(messages.iter().map(|m| m.id.clone()));
        if !sink.delete {
            held.extend(batch.into_iter().map(|(l, _)| l));
            return Ok(());
        }
        let mut rest = batch.into_iter();
        while let Some((locked, m)) = rest.next() {
            let why = match self.data.complete(&locked).await {
                Ok(true) => continue,
                Ok(false) => "its lock had run out".to_owned(),
                Err(e) => e.to_string(),
            };
            let left: Vec<Locked> = rest.map(|(l, _)| l).collect();
            run.tally
                .duplicated
                .fetch_add(1 + left.len() as u64, Ordering::Relaxed);
            let after = left.len();
            held.extend(left);
            return Err(MoveError(format!(
                "message {} is in the archive but could not be completed in {dlq} ({why}): it and the {after} archived after it may stay in {dlq} too",
                m.id
            )));
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

/// The replay capability (`redrive --from-archive`): the mover's reader and writing face,
/// sending archived messages to the channel's queue or topic (or `--to QUEUE`), one Send
/// Message each; a message counts once the send is confirmed (201).
pub type Replayer = Mover;

impl Mover {
    pub async fn replay(&self, r: &Resolved, job: &Job) -> Result<(), MoveError> {
        let a = azure_of(r)?;
        let (dest, kind, found) =
            destination(&self.reader, r, a, &job.to, "nothing was published").await?;
        job.check_owned(crate::redrive::outside_prefixes(
            &self.reader.prefixes,
            &dest.name,
        ))
        .map_err(MoveError)?;
        if found["properties"]["requiresDuplicateDetection"] == Value::Bool(true) {
            return Err(MoveError(format!(
                "the destination {kind} `{}` has duplicate detection on: a copy keeps its MessageId, and Service Bus would drop a replayed one as a duplicate of what it has seen. Nothing was published",
                dest.name
            )));
        }
        let mut pace = Pace::new(job.rate);
        let mut at = 0;
        loop {
            if job.take(&mut pace, at, 1).await == 0 {
                return Ok(());
            }
            let m = &job.messages[at];
            let out = copy(m, job.as_is, &r.headers);
            if let Err(e) = self
                .data
                .send(
                    &dest.name,
                    out.content_type.as_deref(),
                    &out.broker,
                    &out.custom,
                    m.body.clone(),
                )
                .await
            {
                if may_have_landed(&e) {
                    job.tally.duplicated.fetch_add(1, Ordering::Relaxed);
                }
                return Err(MoveError(format!(
                    "sending message {} to {kind} {} was not confirmed ({e}); {} were sent before it, nothing after",
                    m.id,
                    dest.name,
                    job.tally.moved()
                )));
            }
            job.tally.moved.fetch_add(1, Ordering::Relaxed);
            job.tally.moved_ids([m.id.clone()]);
            at += 1;
        }
    }
}

/// The channel's Service Bus settings; an error for a channel of another backend.
fn azure_of(r: &Resolved) -> Result<&AzureResolved, MoveError> {
    r.azure.as_ref().ok_or_else(|| {
        MoveError(format!(
            "channel {} is not an Azure Service Bus channel",
            r.channel
        ))
    })
}

/// Where a run sends (`--to source`: the channel's queue, or a topic channel's topic, which
/// the redrive driver has checked for other subscriptions; else the queue `--to` names): its
/// id, its kind for messages and its ARM JSON. `None_said` ends the error when it does not
/// exist.
async fn destination(
    reader: &Reader,
    r: &Resolved,
    a: &AzureResolved,
    to: &crate::redrive::Destination,
    none_said: &str,
) -> Result<(ResourceId, &'static str, Value), MoveError> {
    let target = &reader.target;
    let (dest, kind) = match (&a.subscription, to.source) {
        (Some(_), true) => (super::topic_id(target, &r.main), "topic"),
        (None, true) => (super::queue_id(target, &r.main), "queue"),
        (_, false) => (super::queue_id(target, &to.name), "queue"),
    };
    let Some(found) = reader
        .get_entity(&dest)
        .await
        .map_err(|e| MoveError(e.to_string()))?
    else {
        return Err(MoveError(format!(
            "the destination {kind} `{}` does not exist; {none_said}",
            dest.name
        )));
    };
    if let (Some(sub), "topic") = (&a.subscription, kind)
        && let Some(why) = subscription_refuses(reader, &r.main, sub)
            .await
            .map_err(|e| MoveError(e.to_string()))?
    {
        return Err(MoveError(format!("{why}; {none_said}")));
    }
    Ok((dest, kind, found))
}

/// Why a copy sent to `topic` might not come back to its subscription `sub` (`None`: its
/// rules take every message). A topic answers 201 whether or not any subscription's rule
/// takes the copy: only a subscription that takes everything is sure to receive it back, so
/// the redrive driver asks before anything is read (a dry run too), and a run again before
/// its first send.
pub async fn subscription_refuses(
    reader: &Reader,
    topic: &str,
    sub: &str,
) -> Result<Option<String>, BackendError> {
    let Some(rules) = reader.rules(topic, sub).await? else {
        return Ok(Some(format!(
            "subscription `{sub}` of topic `{topic}` does not exist: a copy sent to the topic would reach no consumer of this channel. Recreate it (dlqctl apply), or redrive with --to QUEUE (a queue its consumer reads)"
        )));
    };
    Ok(not_true_filter(&rules).map(|why| {
        format!(
            "subscription `{sub}` of topic `{topic}` {why}: a copy sent to the topic might not reach it, while its original is completed (or, replayed from an archive, it is the only copy). Redrive with --to QUEUE (a queue its consumer reads) instead"
        )
    }))
}

/// Why a subscription's rules might not take every message sent to its topic (`None`: they
/// take all): its only rule must be a filter that is always true (the `$Default` rule's
/// `1=1`, or `TRUE`) with no action, which could change the copy on its way in.
fn not_true_filter(rules: &[Value]) -> Option<String> {
    let names = || {
        rules
            .iter()
            .map(|r| format!("`{}`", r["name"].as_str().unwrap_or("?")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let [rule] = rules else {
        return Some(if rules.is_empty() {
            "has no rule (it receives nothing sent to the topic)".to_owned()
        } else {
            format!("has the rules {}", names())
        });
    };
    let p = &rule["properties"];
    let squeezed = |v: &Value| -> String {
        v.as_str()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase()
    };
    let always = p["filterType"].as_str() == Some("SqlFilter")
        && matches!(
            squeezed(&p["sqlFilter"]["sqlExpression"]).as_str(),
            "1=1" | "true"
        );
    let acts = !squeezed(&p["action"]["sqlExpression"]).is_empty();
    if always && !acts {
        return None;
    }
    Some(format!(
        "has the rule {} ({})",
        names(),
        if acts {
            "with an action that changes what it receives".to_owned()
        } else {
            format!(
                "a {} that does not take every message",
                p["filterType"].as_str().unwrap_or("filter")
            )
        }
    ))
}

/// Whether a send that was not confirmed may still have been taken: no answer in time, an
/// answer that could not be read, or a server error other than "busy" (503) or throttled
/// (429), which Service Bus answers without taking the message. A refusal (4xx), no
/// connection or a redirect never took it.
fn may_have_landed(e: &crate::backend::wire::http::HttpError) -> bool {
    use crate::backend::wire::http::HttpError as H;
    match e {
        H::Timeout { .. } | H::Budget { .. } | H::Decode { .. } | H::TooLarge { .. } => true,
        H::Status { status, .. } => *status == 408 || (*status >= 500 && *status != 503),
        _ => false,
    }
}

/// What an archived message is sent back with: its content type, the BrokerProperties a
/// sender sets ([`KEPT`]; TimeToLive as the number of seconds it is) and its custom
/// properties, without the dead-lettering's and with `dlq-redrive-count` one higher (as
/// given with `as_is`).
fn copy(m: &Message, as_is: bool, rules: &HeaderRules) -> Outgoing {
    let content_type = m
        .properties
        .iter()
        .find(|(k, _)| k == super::status::CONTENT_TYPE)
        .map(|(_, v)| v.clone());
    let broker: Map<String, Value> = m
        .properties
        .iter()
        .filter(|(k, _)| KEPT.contains(&k.as_str()))
        .map(|(k, v)| {
            let value = match (k.as_str(), v.parse::<f64>()) {
                ("TimeToLive", Ok(n)) => serde_json::json!(n),
                _ => Value::String(v.clone()),
            };
            (k.clone(), value)
        })
        .collect();
    let own = Message {
        headers: if as_is {
            m.headers.clone()
        } else {
            m.headers
                .iter()
                .filter(|(k, _)| {
                    !DEAD_LETTER_PROPERTIES
                        .iter()
                        .any(|d| k.eq_ignore_ascii_case(d))
                })
                .cloned()
                .collect()
        },
        ..Message::default()
    };
    Outgoing {
        content_type,
        broker,
        custom: Job::headers_of(as_is, &own, &[], rules),
    }
}

/// A message as Send Message takes it, less the body.
struct Outgoing {
    content_type: Option<String>,
    broker: Map<String, Value>,
    custom: Vec<(String, String)>,
}

impl crate::backend::kit::doors::Replay for Mover {
    async fn replay(&self, r: &Resolved, job: &Job) -> Result<(), MoveError> {
        Mover::replay(self, r, job).await
    }
}
