//! What `dlqctl redrive` decides and reports, whatever the backend: which dead letters move
//! (the selection, and the ping-pong guard), what each move adds to a message, the running
//! tally, and the final report for people and for audit (JSON).
//!
//! Each backend's mover (`backend/*/redrive.rs`) reads messages from the DLQ, asks [`decide`]
//! about each, writes the chosen ones to the destination, and removes a message from the DLQ
//! only after the destination confirmed it: at least once, never lost. The mover is a
//! capability of its own, made from a reader only by the redrive driver; plan and status
//! never hold one.

pub mod replay;
pub mod transform;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::spec::resolve::EnvelopeResolved;
use crate::spec::resolve::headers::HeaderRules;
pub use crate::status::resolution::Waited;
use crate::status::selector::{self, Where};
use crate::status::{self, Message, envelope};

/// Which messages move.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// At most this many move (`--limit`).
    pub limit: Option<u64>,
    /// Only these error classes (`--class`, repeatable); empty: every class.
    pub classes: Vec<String>,
    /// Only messages older than this, in milliseconds (`--older-than`, or `archive --due`'s
    /// horizon), their age counted from [`Selection::age`].
    pub older_than_ms: Option<i64>,
    /// Where `older_than_ms` counts a message's age from.
    pub age: AgeFrom,
    /// Messages already brought back this many times are skipped (`deadLetter.maxRedrives`).
    pub max_redrives: u32,
    pub envelope: EnvelopeResolved,
    /// Only these failure groups (`--group`, repeatable; [`selector::group`]); empty: every
    /// group.
    pub groups: Vec<String>,
    /// Only messages for which this jq expression yields `true` (`--where`).
    pub where_: Option<Where>,
    /// `--transform`: the program that makes each chosen message's copy; a message it fails
    /// on stays ([`Decision::TransformFailed`]).
    pub transform: Option<transform::Transform>,
}

/// Where a message's age starts, for `older_than_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AgeFrom {
    /// `--older-than`: since it was dead-lettered, as its envelope says, else its first
    /// failure, else its publication.
    #[default]
    DeadLettered,
    /// `archive --due`: since its queue's retention started counting for it
    /// ([`Message::retained_since_ms`]; SQS standard queues count from the original enqueue,
    /// earlier than the dead-lettering), else the earliest time the message carries.
    Retention,
}

/// A message's age in milliseconds at `now_ms`, counted from `from`; `None`: unknown.
pub fn age_ms(from: AgeFrom, m: &Message, e: &envelope::Read, now_ms: i64) -> Option<i64> {
    let since = match from {
        AgeFrom::DeadLettered => e.dead_lettered_ms.or(e.first_failure_ms).or(m.published_ms),
        AgeFrom::Retention => m.retained_since_ms.or_else(|| {
            [e.dead_lettered_ms, e.first_failure_ms, m.published_ms]
                .into_iter()
                .flatten()
                .min()
        }),
    };
    since.map(|t| now_ms - t)
}

/// What to do with one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Move,
    /// Not chosen by `--class`, `--older-than`, `--group` or `--where`: left where it is.
    NotSelected,
    /// Already brought back `maxRedrives` times: left where it is, and reported.
    AtLimit,
    /// Chosen, but `--transform` failed on it: left where it is, and reported by id.
    TransformFailed,
}

/// The times a message was brought back, from its `dlq-redrive-count` header: `Some(0)`
/// without one, `None` when it cannot be read as a whole number of at most `u32::MAX`
/// (`abc`, `3.0`, `-1`, `4294967296`): such a message is treated as at the limit, so a
/// mangled counter never lets it round the ping-pong guard.
pub fn redrive_count(m: &Message) -> Option<u32> {
    match m
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(envelope::REDRIVE_COUNT))
    {
        None => Some(0),
        Some((_, v)) => parse_count(v),
    }
}

/// A `dlq-redrive-count` value: decimal digits only, at most `u32::MAX`.
pub fn parse_count(v: &str) -> Option<u32> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// Since when `m` has been a dead letter, in milliseconds since the Unix epoch, as far as
/// anything says: when it was dead-lettered (the envelope or the broker), else when it first
/// failed, else when it was published. What `--older-than` measures and the journal's time
/// in the dead-letter queue counts from.
pub fn since(sel: &Selection, m: &Message) -> Option<i64> {
    let e = envelope::read(&sel.envelope, m);
    e.dead_lettered_ms.or(e.first_failure_ms).or(m.published_ms)
}

/// Decides about one message (pure; `now_ms` is the wall clock).
pub fn decide(sel: &Selection, m: &Message, now_ms: i64) -> Decision {
    let e = envelope::read(&sel.envelope, m);
    if !sel.classes.is_empty() && !sel.classes.contains(&e.class) {
        return Decision::NotSelected;
    }
    if let Some(min) = sel.older_than_ms {
        // A message whose age is unknown is not known to be old enough.
        if age_ms(sel.age, m, &e, now_ms).is_none_or(|age| age < min) {
            return Decision::NotSelected;
        }
    }
    if !sel.groups.is_empty() || sel.where_.is_some() {
        let age = age_ms(AgeFrom::DeadLettered, m, &e, now_ms).map(|a| a.max(0) as f64 / 1000.0);
        if !selector::chosen(&sel.groups, sel.where_.as_ref(), m, &e, age) {
            return Decision::NotSelected;
        }
    }
    if redrive_count(m).is_none_or(|n| n >= sel.max_redrives) {
        return Decision::AtLimit;
    }
    Decision::Move
}

/// [`decide`], and for a message that moves, what `--transform` makes of its copy (nothing
/// without one): a message the program fails on is [`Decision::TransformFailed`] instead.
pub fn decide_copy(sel: &Selection, m: &Message, now_ms: i64) -> (Decision, transform::Edit) {
    match decide(sel, m, now_ms) {
        Decision::Move => copy_of(sel, m, now_ms),
        d => (d, transform::Edit::default()),
    }
}

/// For a message [`decide`] chose: what `--transform` makes of its copy, or
/// [`Decision::TransformFailed`] when the program fails on it (a mover that must check
/// `--limit` between the two asks this second, so that no program runs on a message that
/// would not move anyway).
pub fn copy_of(sel: &Selection, m: &Message, now_ms: i64) -> (Decision, transform::Edit) {
    let Some(t) = &sel.transform else {
        return (Decision::Move, transform::Edit::default());
    };
    let e = envelope::read(&sel.envelope, m);
    let age = age_ms(AgeFrom::DeadLettered, m, &e, now_ms).map(|a| a.max(0) as f64 / 1000.0);
    match t.apply(m, &e, age) {
        Ok(edit) => (Decision::Move, edit),
        Err(_) => (Decision::TransformFailed, transform::Edit::default()),
    }
}

/// The headers a moved message carries: its own, minus those that would make the consumer
/// think its attempts are spent (`drop`, the backend's own: exact names or prefixes ending
/// in `*`), minus those `rules` shed (`deadLetter.redrive` and the default list; no
/// `keepHeaders` brings back one of `drop`), with `dlq-redrive-count` one higher.
pub fn moved_headers(
    headers: &[(String, String)],
    drop: &[&str],
    rules: &HeaderRules,
) -> Vec<(String, String)> {
    let count = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(envelope::REDRIVE_COUNT))
        .and_then(|(_, v)| parse_count(v))
        .unwrap_or(0);
    let dropped = |k: &str| {
        k.eq_ignore_ascii_case(envelope::REDRIVE_COUNT)
            || k.eq_ignore_ascii_case(envelope::REDRIVE_RUN)
            || drop.iter().any(|d| match d.strip_suffix('*') {
                Some(prefix) => k.starts_with(prefix),
                None => k == *d,
            })
            || rules.sheds(k)
    };
    let mut out: Vec<(String, String)> = headers
        .iter()
        .filter(|(k, _)| !dropped(k))
        .cloned()
        .collect();
    out.push((envelope::REDRIVE_COUNT.to_owned(), (count + 1).to_string()));
    out
}

/// The running count, shared with the progress line and the Ctrl-C handler.
#[derive(Debug)]
pub struct Tally {
    pub examined: AtomicU64,
    pub moved: AtomicU64,
    pub not_selected: AtomicU64,
    pub at_limit: AtomicU64,
    /// Confirmed by the destination, but not removed from the DLQ (a failure in between): the
    /// consumer may see these twice.
    pub duplicated: AtomicU64,
    /// Messages left in the DLQ as the mover counted them at the end (exact where the
    /// backend can count; `u64::MAX`: not counted, the driver reads the depth instead).
    pub left: AtomicU64,
    /// `left` includes figures from the backend's statistics (messages another consumer
    /// holds): said `statistics`, never `exact`.
    pub left_statistics: AtomicBool,
    /// The broker's own move task did the moving (no `dlq-redrive-count`, no maxRedrives
    /// check: the broker copies messages as they are).
    pub by_service: AtomicBool,
    /// Why the run did not examine every message it set out to (messages it could not read
    /// past, a destination it could not be sure of): a run with any is never "complete".
    incomplete: Mutex<Vec<String>>,
    /// Whether movers keep [`body_print`]s of what they moved (`--verify-for` asks).
    pub keep_prints: bool,
    /// The [`body_print`] of each message moved, when `keep_prints`.
    prints: Mutex<Vec<u64>>,
    /// The ids of what moved, as each mover names a message (SQS and Pub/Sub: the message
    /// id; Kafka: `topic/partition/offset`; RabbitMQ: its `message_id`, else `sha256:` of
    /// the body), for the audit record.
    moved_ids: Mutex<Vec<String>>,
    /// How long each message that left the DLQ had been dead-lettered, in seconds, when it
    /// left ([`since`]); the count of those whose time is unknown or was not noted (for
    /// `status`'s time to resolution, from the journal).
    waited: Mutex<(Vec<u64>, u64)>,
    /// [`Tally::chose`]: each chosen message's [`since`], by the id it will move under.
    chosen: Mutex<std::collections::HashMap<String, Vec<Option<i64>>>>,
    /// [`Tally::edited`]: each chosen message's prints before and after `--transform`, by
    /// the id it will move under, until it moved; then in `transformed`.
    edits: Mutex<std::collections::HashMap<String, Vec<(String, String)>>>,
    transformed: Mutex<Vec<transform::Transformed>>,
    /// `--to failed-consumer` by source: what moved to each source ([`Tally::moved_to`]).
    sources: Mutex<Vec<SourceCount>>,
    /// The same: chosen messages that named no source, left in the DLQ.
    pub without_source: AtomicU64,
    /// Copies this run moved that failed again and were back in the DLQ before it ended:
    /// left there, not moved a second time (RabbitMQ, whose run takes what becomes ready
    /// while it goes).
    pub came_back: AtomicU64,
    /// Messages of the DLQ another consumer held unacknowledged at the end of the batch (the
    /// backend's statistics; RabbitMQ): not examined, said once for the run by the driver,
    /// which goes on with the next batch meanwhile (issue 52: the run used to stop after one).
    pub held_elsewhere: AtomicU64,
}

/// Bytes of a body that [`body_print`] reads (as a status read keeps them).
pub const PRINT_BODY: usize = 1024;

/// A message's body as `--verify-for` recognises it when it comes back: its first
/// [`PRINT_BODY`] bytes and its whole length, hashed (headers change on the way: the move
/// adds `dlq-redrive-count`, a consumer that dead-letters it again adds its own).
pub fn body_print(body: &[u8], len: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body[..body.len().min(PRINT_BODY)].hash(&mut h);
    len.hash(&mut h);
    h.finish()
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            examined: AtomicU64::new(0),
            moved: AtomicU64::new(0),
            not_selected: AtomicU64::new(0),
            at_limit: AtomicU64::new(0),
            duplicated: AtomicU64::new(0),
            left: AtomicU64::new(u64::MAX),
            left_statistics: AtomicBool::new(false),
            by_service: AtomicBool::new(false),
            incomplete: Mutex::new(Vec::new()),
            keep_prints: false,
            prints: Mutex::new(Vec::new()),
            moved_ids: Mutex::new(Vec::new()),
            waited: Mutex::new((Vec::new(), 0)),
            chosen: Mutex::new(std::collections::HashMap::new()),
            edits: Mutex::new(std::collections::HashMap::new()),
            transformed: Mutex::new(Vec::new()),
            sources: Mutex::new(Vec::new()),
            without_source: AtomicU64::new(0),
            came_back: AtomicU64::new(0),
            held_elsewhere: AtomicU64::new(0),
        }
    }
}

impl Tally {
    /// A fresh tally whose movers keep the [`body_print`]s of what they move, or not.
    pub fn keeping_prints(keep: bool) -> Self {
        Tally {
            keep_prints: keep,
            ..Tally::default()
        }
    }

    /// Notes when a message chosen to move became a dead letter ([`since`]), under the id
    /// [`Tally::moved_ids`] will name it by once it has moved: then its time in the queue is
    /// counted (see [`Tally::waited`]). A message chosen and then not moved (the limit, a
    /// failure, Ctrl-C) is never counted.
    pub fn chose(&self, id: String, since: Option<i64>) {
        if let Ok(mut c) = self.chosen.lock() {
            c.entry(id).or_default().push(since);
        }
    }

    /// The seconds in the dead-letter queue of each message that left it (not sorted), and
    /// how many had no known time.
    pub fn waited(&self) -> (Vec<u64>, u64) {
        self.waited.lock().map(|w| w.clone()).unwrap_or_default()
    }

    pub fn add(&self, d: &Decision) {
        self.examined.fetch_add(1, Ordering::Relaxed);
        match d {
            Decision::Move => {}
            Decision::NotSelected => {
                self.not_selected.fetch_add(1, Ordering::Relaxed);
            }
            Decision::AtLimit => {
                self.at_limit.fetch_add(1, Ordering::Relaxed);
            }
            // Counted by the program itself, each message once however often a batched run
            // reads it again ([`transform::Transform::failures`]).
            Decision::TransformFailed => {}
        }
    }

    /// Notes the prints of a chosen message's copy made by `--transform` (nothing for an
    /// [`transform::Edit`] without prints), under the id [`Tally::moved_ids`] will name it by:
    /// the audit record lists them for what moved.
    pub fn edited(&self, id: &str, edit: &transform::Edit) {
        if let Some(p) = &edit.prints
            && let Ok(mut e) = self.edits.lock()
        {
            e.entry(id.to_owned()).or_default().push(p.clone());
        }
    }

    /// The prints of what moved with a transform, in the order it moved.
    pub fn transformed(&self) -> Vec<transform::Transformed> {
        self.transformed
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    pub fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// What the mover counted as left in the DLQ, if it counted.
    pub fn left(&self) -> Option<u64> {
        Some(self.left.load(Ordering::Relaxed)).filter(|n| *n != u64::MAX)
    }

    /// Records why the run stopped short of what it set out to examine (said once each).
    pub fn incomplete(&self, why: impl Into<String>) {
        let why = why.into();
        if let Ok(mut v) = self.incomplete.lock()
            && !v.contains(&why)
        {
            v.push(why);
        }
    }

    /// Records that a message with this body moved (when `keep_prints`).
    pub fn moved_body(&self, body: &[u8]) {
        if self.keep_prints
            && let Ok(mut v) = self.prints.lock()
        {
            v.push(body_print(body, body.len() as u64));
        }
    }

    /// Records a message's [`body_print`], made before it moved (when `keep_prints`).
    pub fn moved_print(&self, print: u64) {
        if self.keep_prints
            && let Ok(mut v) = self.prints.lock()
        {
            v.push(print);
        }
    }

    /// The prints [`Tally::moved_body`] kept.
    pub fn prints(&self) -> Vec<u64> {
        self.prints.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// Records the ids of messages counted as moved, and how long those [`Tally::chose`]
    /// named had waited in the queue.
    pub fn moved_ids(&self, ids: impl IntoIterator<Item = String>) {
        let ids: Vec<String> = ids.into_iter().collect();
        let now = status::now_ms();
        if let (Ok(mut chosen), Ok(mut w)) = (self.chosen.lock(), self.waited.lock()) {
            for id in &ids {
                match chosen.get_mut(id).and_then(Vec::pop) {
                    Some(Some(t)) => {
                        w.0.push(u64::try_from(now.saturating_sub(t) / 1000).unwrap_or(0))
                    }
                    _ => w.1 += 1,
                }
            }
        }
        if let (Ok(mut edits), Ok(mut done)) = (self.edits.lock(), self.transformed.lock())
            && !edits.is_empty()
        {
            for id in &ids {
                if let Some((before, after)) = edits.get_mut(id).and_then(Vec::pop) {
                    done.push(transform::Transformed {
                        id: status::safe(&crate::secrets::text(id)),
                        before,
                        after,
                    });
                }
            }
        }
        if let Ok(mut v) = self.moved_ids.lock() {
            v.extend(ids);
        }
    }

    /// The ids recorded by [`Tally::moved_ids`].
    pub fn moved_id_list(&self) -> Vec<String> {
        self.moved_ids.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// Records that `n` messages moved to source `source` (queue `queue`): `--to
    /// failed-consumer` by source.
    pub fn moved_to(&self, source: &str, queue: &str, n: u64) {
        if n > 0
            && let Ok(mut v) = self.sources.lock()
        {
            count_source(&mut v, source, queue, n);
        }
    }

    /// What [`Tally::moved_to`] recorded.
    pub fn sources(&self) -> Vec<SourceCount> {
        self.sources.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// The reasons recorded by [`Tally::incomplete`].
    pub fn incomplete_reasons(&self) -> Vec<String> {
        self.incomplete
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }
}

/// Where messages go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Destination {
    /// The queue or topic (for RabbitMQ, the exchange and routing are decided per message).
    pub name: String,
    /// `true`: the channel's main queue or topic (`--to source`).
    pub source: bool,
    /// `--to failed-consumer`: only the consumer the message failed in (see
    /// [`FAILED_CONSUMER`]); on Pub/Sub and a Service Bus topic channel, the main topic
    /// (`source` is then set too).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub failed_consumer: bool,
    /// What else receives the copies (every subscription of the topic), as the plan of a run
    /// with `--allow-fanout` says it: a Pub/Sub channel's or a Service Bus topic channel's
    /// `--to source` or `--to failed-consumer`, when the topic has other subscriptions than
    /// the channel's own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fanout: Vec<String>,
    /// `--to failed-consumer` where each message goes back to the source the broker recorded
    /// on it (SQS: `DeadLetterQueueSourceArn`): per source, the messages that would move
    /// there (dry run) or moved there (run), most first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceCount>,
    /// The same: chosen messages that name no source. They stay in the dead-letter queue
    /// (never guessed), and the run says so (not complete).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub without_source: Option<u64>,
}

/// One source of a `--to failed-consumer` run and its count ([`Destination::sources`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceCount {
    /// As the broker recorded it (SQS: the queue's ARN).
    pub source: String,
    /// The queue's name.
    pub queue: String,
    pub count: u64,
}

/// Adds `n` messages of `source` (queue `queue`) to `list`, kept most first (then by source).
pub fn count_source(list: &mut Vec<SourceCount>, source: &str, queue: &str, n: u64) {
    match list.iter_mut().find(|s| s.source == source) {
        Some(s) => s.count += n,
        None => list.push(SourceCount {
            source: source.to_owned(),
            queue: queue.to_owned(),
            count: n,
        }),
    }
    list.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.source.cmp(&b.source)));
}

/// The reserved `--to` word: back to the consumer the message failed in only, never to every
/// subscriber of the channel. A queue or topic literally named so cannot be a `--to`.
pub const FAILED_CONSUMER: &str = "failed-consumer";

/// What a mover needs besides the channel.
#[derive(Clone)]
pub struct Run {
    pub to: Destination,
    pub select: Selection,
    /// Messages per second at most (`--rate`).
    pub rate: Option<f64>,
    /// Set by Ctrl-C / SIGTERM: finish the message in flight, then stop.
    pub stop: Arc<AtomicBool>,
    pub tally: Arc<Tally>,
    /// Who runs it, for the lock and the audit record: `user@host pid N`.
    pub holder: String,
    /// Whether the broker's own move does the moving (`--native`: SQS's StartMessageMoveTask,
    /// for a whole standard queue back to its source).
    pub service_task: bool,
    /// `--allow-unowned-destination`: a `--to` outside the target's ownership is allowed.
    pub allow_unowned: bool,
    /// `dlqctl archive`: the chosen messages go to this archive instead of the destination,
    /// one object per batch ([`crate::archive::sink::Sink::put`]), and leave the DLQ only
    /// after it returned, and only with `--delete` (else they are handed back).
    pub archive: Option<Arc<crate::archive::sink::Sink>>,
    /// The copies the whole run made (every batch): one that fails again and comes back is
    /// left in the DLQ and counted as came back, never moved a second time by the same run.
    pub copies: Arc<Copies>,
    /// More batches may follow: the DLQ's lock stays held at the end of this one (SQS's
    /// tag; RabbitMQ's exclusive consumer is held by a lease), released by the driver when
    /// the run ends (issue 52, M4).
    pub keep_lock: bool,
}

/// The copies one run made, in all its batches, known again when they come back to the
/// DLQ: by the stamp each copy carries ([`envelope::REDRIVE_RUN`]: the run's, `/` and the
/// copy's number; a copy comes back with its headers, as it does with `dlq-redrive-count`),
/// and on SQS, where a copy carries no stamp, by the message id the copy was sent under
/// (SQS keeps it when a redrive policy moves the message to the DLQ).
#[derive(Debug)]
pub struct Copies {
    /// This run's stamp: unique per run (the holder, the clock, the process).
    pub stamp: String,
    made: AtomicU64,
    /// SQS: each copy's id, and its number (as [`Copies::next`] would have given it).
    ids: Mutex<std::collections::HashMap<String, u64>>,
    /// The copies seen back so far (each counted once, however many batches see it).
    back: Mutex<std::collections::HashSet<String>>,
}

impl Copies {
    /// A run's: a fresh stamp from `holder` (`user@host pid N`) and the clock.
    pub fn new(holder: &str) -> Self {
        use std::hash::{Hash, Hasher};
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        holder.hash(&mut h);
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
            .hash(&mut h);
        SEQ.fetch_add(1, Ordering::Relaxed).hash(&mut h);
        std::process::id().hash(&mut h);
        Copies {
            stamp: format!("{:016x}", h.finish()),
            made: AtomicU64::new(0),
            ids: Mutex::new(std::collections::HashMap::new()),
            back: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// The stamp of the next copy: the run's, `/`, a number of its own.
    pub fn next(&self) -> String {
        format!(
            "{}/{}",
            self.stamp,
            self.made.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Notes the id a copy was sent under, where the backend names a copy by the id it
    /// keeps on its way back (SQS).
    pub fn sent_as(&self, id: impl Into<String>) {
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut ids) = self.ids.lock() {
            ids.insert(id.into(), n);
        }
    }

    /// How many copies the run made so far: the number the next one gets. A batch's copies
    /// are those numbered from what this said as it started ([`Copies::number`]).
    pub fn made(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }

    /// The number of the copy [`Copies::ours`] named `key`.
    pub fn number(&self, key: &str) -> Option<u64> {
        if let Some(n) = key
            .strip_prefix(self.stamp.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
        {
            return n.parse().ok();
        }
        self.ids.lock().ok()?.get(key).copied()
    }

    /// The copy's key when `headers` carry this run's stamp or `id` is one a copy of it was
    /// sent under (a copy this run made, back in the DLQ); `None` otherwise.
    pub fn ours<'a>(
        &self,
        id: &str,
        mut headers: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Option<String> {
        let mine = |v: &str| {
            v.strip_prefix(self.stamp.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
        };
        if let Some((_, v)) =
            headers.find(|&(k, v)| k.eq_ignore_ascii_case(envelope::REDRIVE_RUN) && mine(v))
        {
            return Some(v.to_owned());
        }
        self.ids
            .lock()
            .is_ok_and(|ids| ids.contains_key(id))
            .then(|| id.to_owned())
    }

    /// [`Copies::ours`] of a message as the status door reads it.
    pub fn ours_message(&self, m: &Message) -> Option<String> {
        self.ours(
            &m.id,
            m.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        )
    }

    /// Counts copy `key` ([`Copies::ours`]) as came back in `tally`, once per run however
    /// many batches see it again.
    pub fn came_back(&self, key: String, tally: &Tally) {
        if self.back.lock().is_ok_and(|mut b| b.insert(key)) {
            tally.came_back.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Default for Copies {
    fn default() -> Self {
        Copies::new("")
    }
}

impl Run {
    /// Refuses a `--to` the target does not own (`why` says how it is not), unless the run
    /// allows it. The channel's own main queue or topic is its own, and never asked about.
    pub fn check_owned(&self, why: Option<String>) -> Result<(), String> {
        match why {
            Some(why) if !self.to.source && !self.allow_unowned => Err(format!(
                "not redriving into `{}`: {why}; dlqctl moves messages only into what the target owns. Pass --allow-unowned-destination to move them there anyway",
                self.to.name
            )),
            _ => Ok(()),
        }
    }
}

impl Run {
    /// Whether the limit is reached or a stop was asked for.
    pub fn done(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
            || self.select.limit.is_some_and(|l| self.tally.moved() >= l)
    }
}

/// `--to failed-consumer` (RabbitMQ): the `incomplete` line for a message whose `x-death`
/// names no queue it was rejected from; `would`: said by a dry run. One wording for the run
/// and its dry run (issue 52, F1).
pub fn without_death_line(id: &str, dlq: &str, would: bool) -> String {
    format!(
        "message {} has no x-death entry naming the queue it was rejected from; it {} in `{dlq}`",
        status::safe(&crate::secrets::said(id)),
        if would { "would stay" } else { "stays" },
    )
}

/// `--to failed-consumer` (RabbitMQ): the `incomplete` line for the messages (`ids`) whose
/// queue `q` was refused, and `why`; up to 20 ids shown. `would`: said by a dry run.
pub fn refused_queue_line(q: &str, why: &str, ids: &[String], dlq: &str, would: bool) -> String {
    let shown: Vec<String> = ids
        .iter()
        .take(20)
        .map(|id| status::safe(&crate::secrets::said(id)))
        .collect();
    let one = ids.len() == 1;
    format!(
        "{n} message{s} rejected from `{q}` (by {their} x-death) {stay} in `{dlq}`: {why} (id{s}: {}{more})",
        shown.join(", "),
        n = ids.len(),
        s = if one { "" } else { "s" },
        their = if one { "its" } else { "their" },
        stay = match (would, one) {
            (true, _) => "would stay",
            (false, true) => "stays",
            (false, false) => "stay",
        },
        more = if ids.len() > shown.len() { ", …" } else { "" },
    )
}

/// Why `name` is not owned by a target owning what its `prefixes` start (`None`: it is).
pub fn outside_prefixes(prefixes: &[String], name: &str) -> Option<String> {
    if prefixes.iter().any(|p| name.starts_with(p.as_str())) {
        return None;
    }
    Some(if prefixes.is_empty() {
        "the target declares no ownership prefixes".to_owned()
    } else {
        format!(
            "it is outside the target's ownership prefixes ({})",
            prefixes.join(", ")
        )
    })
}

/// Whether `identity` is one of `allowed` (`operations.allowedOperators`): equal to an
/// entry, or matched by it as a glob (`*` matches any run of characters, `/` included). An
/// entry that is not a valid glob matches only itself.
pub fn allowed(allowed: &[String], identity: &str) -> bool {
    allowed.iter().any(|p| {
        p == identity || globset::Glob::new(p).is_ok_and(|g| g.compile_matcher().is_match(identity))
    })
}

/// Who runs this redrive: `user@host pid N`, for locks and the audit record.
pub fn holder() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!("{user}@{} pid {}", host(), std::process::id())
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether a lock's holder (`user@host pid N`) is a process of this host that is gone: then
/// its lock is stale and may be taken over. Another host's holder is never presumed gone.
pub fn holder_gone(holder: &str) -> bool {
    let Some((who, pid)) = holder.rsplit_once(" pid ") else {
        return false;
    };
    let on_this_host = who.rsplit_once('@').is_some_and(|(_, h)| h == host());
    on_this_host
        && pid
            .trim()
            .parse::<u32>()
            .is_ok_and(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
}

/// Keeps to `--rate`: call [`Pace::wait_or_stop`] before each move.
pub struct Pace {
    every: Option<std::time::Duration>,
    next: tokio::time::Instant,
}

impl Pace {
    pub fn new(rate: Option<f64>) -> Self {
        Pace {
            every: rate
                .filter(|r| *r > 0.0)
                .map(|r| std::time::Duration::from_secs_f64(1.0 / r)),
            next: tokio::time::Instant::now(),
        }
    }

    /// Waits for the next move's turn unless `stop` is set first (Ctrl-C): `false` then, and
    /// nothing may start after it. The wait is watched in slices of at most 50 ms, so an
    /// interrupt at `--rate 0.1` is honoured at once rather than after ten seconds.
    pub async fn wait_or_stop(&mut self, stop: &AtomicBool) -> bool {
        const SLICE: std::time::Duration = std::time::Duration::from_millis(50);
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let Some(every) = self.every else { return true };
        let now = tokio::time::Instant::now();
        while self.next > tokio::time::Instant::now() {
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            tokio::time::sleep_until(self.next.min(tokio::time::Instant::now() + SLICE)).await;
        }
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        self.next = self.next.max(now) + every;
        true
    }

    /// Whether the next move's turn comes after `t` (a batch due then is sent first).
    pub fn next_after(&self, t: tokio::time::Instant) -> bool {
        self.every.is_some() && self.next > t
    }
}

/// The final report (and the audit record with `--format json`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    #[serde(rename = "format_version")]
    pub format_version: u32,
    pub kind: &'static str,
    pub channel: String,
    pub target: String,
    pub backend: &'static str,
    /// The queue or topic the messages come from: the channel's DLQ, or another of its
    /// destinations (`--from`).
    pub dead_letter: String,
    /// Which destination `dead_letter` is: `dead-letter`, `invalid` or `exception`.
    pub role: &'static str,
    pub destination: Destination,
    pub dry_run: bool,
    pub selection: SelectionRecord,
    pub examined: u64,
    pub moved: u64,
    pub not_selected: u64,
    pub skipped_at_max_redrives: u64,
    pub possibly_duplicated: u64,
    /// Copies this run moved that failed again and came back to the DLQ before it ended
    /// (met by a batch, or seen by `--verify-for`), each once: left there, not moved again.
    /// Always present for a batched run and a `--verify-for` run (0 too); otherwise only
    /// when not 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub came_back: Option<u64>,
    /// Why the run ended ([`stop`]): present for every run that moved or could have (not a
    /// dry run); `batches.stoppedBy` says the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<&'static str>,
    /// Messages another consumer held unacknowledged when the run ended (RabbitMQ's
    /// `messages_unacknowledged`): not examined, and counted in `leftInDeadLetter` as a
    /// statistic; the run is not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_elsewhere: Option<u64>,
    /// Messages in the DLQ afterwards, where the backend can tell.
    pub left_in_dead_letter: Option<u64>,
    /// How `left_in_dead_letter` was counted: `exact` (by the run itself, on its own
    /// connection) or `statistics` (the backend's figures, which may lag: RabbitMQ's
    /// management API by up to 5 s, SQS's approximate counts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_basis: Option<&'static str>,
    pub interrupted: bool,
    pub error: Option<String>,
    /// Why the run is not complete although nothing failed (messages it could not read past,
    /// held by an earlier run, …): a report with any exits non-zero.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub incomplete: Vec<String>,
    pub started_at: String,
    pub ended_at: String,
    pub operator: String,
    /// Who the target's credentials are, as the backend names them (SQS: the caller's ARN
    /// from sts:GetCallerIdentity; RabbitMQ: the user of GET /api/whoami; Kafka:
    /// `User:<sasl.username>`, `User:ANONYMOUS` without SASL; Pub/Sub: `emulator`). `null`:
    /// the backend could not be asked (`identityUnknown` says why).
    pub identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_unknown: Option<String>,
    pub reason: Option<String>,
    /// Dry run: the classes of what would move, and its oldest and newest ages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_move: Option<WouldMove>,
    /// Who moved the messages when it was not dlqctl itself: `sqs:StartMessageMoveTask`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_by: Option<&'static str>,
    /// What moved, by id: a digest always, the ids themselves up to [`MAX_IDS`]. Absent on a
    /// dry run and when the broker's own move task moved them (it names none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_ids: Option<MovedIds>,
    /// How long what moved had waited in the dead-letter queue. Absent on a dry run, a
    /// replay, and a `--native` run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_in_dead_letter: Option<Waited>,
    /// `--where`: the messages it could not be evaluated on (an error, or a value that is
    /// not a boolean): not selected, and counted here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub where_failures: Option<status::WhereFailures>,
    /// `--transform`: the program, the messages it failed on (they stayed), and for each
    /// message moved the prints of it and its copy; a dry run's diffs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<TransformRecord>,
    /// `--batch` (or a health gate): how the run went, batch by batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batches: Option<BatchRecord>,
    /// `--verify-for`: moved messages that came back to the dead-letter queue while the run
    /// watched, when more than `--max-redead` did (the run stopped there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redead: Option<Redead>,
    /// Why a health gate stopped the run (`--health-check`, `--health-query`): nothing more
    /// moved after it said so, and the command exits 75.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unhealthy: Option<String>,
    /// A dry run with health gates: what they answered now (a dry run asks them, and moves
    /// nothing whatever they say; issue 52).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
    /// `archive` when the messages came from an archive (`--from-archive`), not a queue:
    /// then `deadLetter` is the archive's place and `archive` says what was read there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<crate::archive::read::ArchiveRead>,
}

/// The most ids an audit record lists (beyond: the digest and the count only).
pub const MAX_IDS: usize = 1000;

/// What `--transform` did, for the audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransformRecord {
    /// The jq program, as given.
    pub program: String,
    /// The messages it failed on: not moved, they stayed where they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<transform::TransformFailures>,
    /// How many messages moved with it.
    pub moved: u64,
    /// For each message moved (the first [`MAX_IDS`]), the sha256 of it as read and of its
    /// copy as the program made it ([`transform::print`]).
    pub messages: Vec<transform::Transformed>,
    /// A dry run: the diff of each of the first `--samples` copies, masked as samples are.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diffs: Vec<CopyDiff>,
}

/// One copy's diff in a dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CopyDiff {
    pub id: String,
    pub diff: String,
}

impl TransformRecord {
    /// The record of a run with `t`, nothing moved yet.
    pub fn of(t: &transform::Transform) -> Self {
        TransformRecord {
            program: t.code().to_owned(),
            failed: None,
            moved: 0,
            messages: Vec::new(),
            diffs: Vec::new(),
        }
    }

    /// Adds what moved with the transform (a batch's, or the run's).
    pub fn add(&mut self, moved: Vec<transform::Transformed>) {
        self.moved += moved.len() as u64;
        let room = MAX_IDS.saturating_sub(self.messages.len());
        self.messages.extend(moved.into_iter().take(room));
    }
}

/// The ids of what a run moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MovedIds {
    pub count: u64,
    /// sha256 (hex) of the ids sorted, each followed by a newline: two records moved the
    /// same messages exactly when their digests agree.
    pub sha256: String,
    /// The ids, sorted, when there are at most [`MAX_IDS`]; else empty.
    pub ids: Vec<String>,
}

impl MovedIds {
    /// `ids` listed and hashed with their card numbers masked, as `status` masks them (issue
    /// 52: a `message_id` that is a card number was journaled in clear); the copies still
    /// carry them whole.
    pub fn of(ids: Vec<String>) -> Self {
        use sha2::Digest;
        let mut ids: Vec<String> = ids.iter().map(|id| crate::secrets::said(id)).collect();
        ids.sort();
        let mut h = sha2::Sha256::new();
        for id in &ids {
            h.update(id.as_bytes());
            h.update(b"\n");
        }
        let sha256 = h
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        MovedIds {
            count: ids.len() as u64,
            sha256,
            ids: if ids.len() <= MAX_IDS {
                ids
            } else {
                Vec::new()
            },
        }
    }
}

/// What the health gates answered a dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    /// Whether every gate said healthy: a run now would move (`false`: it would stop, 75).
    pub healthy: bool,
    /// What they said: the first gate that said no, and how.
    pub answer: String,
}

/// What `moved_by` says when SQS's own move task did the moving.
pub const SQS_MOVE_TASK: &str = "sqs:StartMessageMoveTask";

/// Moved messages seen back in the dead-letter queue (`--verify-for`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Redead {
    /// Of the last batch's moved messages, how many came back, and the share in percent.
    pub count: u64,
    pub of: u64,
    pub percent: f64,
    /// `--max-redead`, in percent.
    pub allowed_percent: f64,
    /// Their ids as the dead-letter queue now has them (at most 100).
    pub ids: Vec<String>,
}

/// A batched run (`--batch N`, `--until-empty`), as the audit record says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchRecord {
    /// `--batch`: messages per batch at most (none: one run, gated).
    pub size: Option<u64>,
    pub until_empty: bool,
    /// `--max-duration`, in seconds: no batch starts after it; an `--until-empty` run
    /// without one is bounded by an hour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_duration_seconds: Option<u64>,
    /// Batches run.
    pub count: u64,
    /// Why the run ended, one of [`stop`]'s values.
    pub stopped_by: &'static str,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectionRecord {
    pub limit: Option<u64>,
    pub classes: Vec<String>,
    pub older_than_seconds: Option<f64>,
    pub max_redrives: u32,
    pub rate: Option<f64>,
    /// `--group`: the failure groups chosen.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// `--where`: the jq expression, as given.
    #[serde(rename = "where", skip_serializing_if = "Option::is_none")]
    pub where_: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WouldMove {
    pub count: u64,
    /// Whether every message of the DLQ was read (else the figures cover those read).
    pub exact: bool,
    pub by_error_class: std::collections::BTreeMap<String, u64>,
    pub oldest_age_seconds: Option<f64>,
    pub newest_age_seconds: Option<f64>,
    /// What would move, by failure group (most first), as `status --group-by fingerprint`
    /// shows them.
    pub groups: Vec<status::FailureGroup>,
    pub samples: Vec<status::Sample>,
}

pub const KIND: &str = "dlqctl/redrive";

/// The `kind` of a [`Refusal`] in the journal.
pub const REFUSED_KIND: &str = "dlqctl/refused";

/// The audit record of a run refused before anything was read or moved (a missing
/// `--reason`, an operator `operations.allowedOperators` does not list, a destination the
/// target does not own, ...): the journal keeps who tried what, and why it was refused, as
/// it keeps the runs that moved something.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    #[serde(rename = "format_version")]
    pub format_version: u32,
    pub kind: &'static str,
    /// `redrive` or `archive`.
    pub verb: &'static str,
    pub channel: String,
    pub target: String,
    pub backend: &'static str,
    pub dry_run: bool,
    /// `user@host pid N` ([`holder`]).
    pub operator: String,
    /// Who the target's credentials are, when the refusal came after the backend was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The refusal, as the run said it.
    pub refused: String,
    /// When (RFC 3339, UTC).
    pub at: String,
}

/// The `kind` of a [`Started`] record in the journal.
pub const STARTED_KIND: &str = "dlqctl/started";

/// The audit record written before a run moves its first message (issue 52, M5): a run
/// killed on the way (SIGKILL, out of memory, a pod's grace period) leaves at least this;
/// its outcome follows as the [`Report`] with the same `startedAt` and `operator`. A
/// `started` record without its outcome is a run that never finished: what it moved is in
/// the destination, and may be in both queues.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    #[serde(rename = "format_version")]
    pub format_version: u32,
    pub kind: &'static str,
    /// `redrive` or `archive`.
    pub verb: &'static str,
    pub channel: String,
    pub target: String,
    pub backend: &'static str,
    pub dead_letter: String,
    pub destination: Destination,
    pub selection: SelectionRecord,
    /// `--transform`: the jq program, as given (the outcome's `transform.program`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    /// `user@host pid N` ([`holder`]).
    pub operator: String,
    pub identity: Option<String>,
    pub reason: Option<String>,
    /// As the outcome's report says it: the two records are one run.
    pub started_at: String,
}

impl Started {
    /// The record of the run `r` starts (a report before anything was counted).
    pub fn of(r: &Report, verb: &'static str) -> Self {
        Started {
            format_version: 1,
            kind: STARTED_KIND,
            verb,
            channel: r.channel.clone(),
            target: r.target.clone(),
            backend: r.backend,
            dead_letter: r.dead_letter.clone(),
            destination: r.destination.clone(),
            selection: r.selection.clone(),
            transform: r.transform.as_ref().map(|t| t.program.clone()),
            operator: r.operator.clone(),
            identity: r.identity.clone(),
            reason: r.reason.clone(),
            started_at: r.started_at.clone(),
        }
    }
}

/// `leftBasis` values.
pub const EXACT: &str = "exact";
pub const STATISTICS: &str = "statistics";
/// Counted exactly by the run's last batch as it ended, before the pause or gate that came
/// after it: what came back or arrived since is not in it.
pub const LAST_BATCH: &str = "last-batch";

/// Why a run ended (`stoppedBy`, and `batches.stoppedBy`), one value per cause (issue 52,
/// F5: `stopped` used to stand for three). docs/redrive.md lists them.
pub mod stop {
    /// Nothing more the selection would move: the run (or its last batch) found fewer than
    /// it could take. The only way a run is `complete`.
    pub const EMPTY: &str = "empty";
    /// `--limit` reached, with messages left in the DLQ.
    pub const LIMIT: &str = "limit";
    /// `--batch N` without `--until-empty`: one batch moved N, with messages left.
    pub const ONE_BATCH: &str = "one-batch";
    /// `--max-duration` (or the hour of an `--until-empty` run) passed.
    pub const MAX_DURATION: &str = "max-duration";
    /// A health gate said the downstream is not healthy.
    pub const UNHEALTHY: &str = "unhealthy";
    /// `--verify-for` saw more than `--max-redead` of a batch come back.
    pub const REDEAD: &str = "redead";
    /// Ctrl-C or SIGTERM.
    pub const INTERRUPTED: &str = "interrupted";
    /// An error or a refusal (`error` says which).
    pub const ERROR: &str = "error";
    /// A batch could not examine every message it set out to (`incomplete` says why).
    pub const INCOMPLETE: &str = "incomplete";
}

/// The report for people.
/// The source as people read it: `orders.dlq`, or `orders.invalid (invalid)` for another of
/// the channel's destinations.
fn source_shown(r: &Report) -> String {
    if r.role == "dead-letter" {
        r.dead_letter.clone()
    } else {
        format!("{} ({})", r.dead_letter, r.role)
    }
}

/// `--transform` failed on some messages: they stayed (`stay`: "stayed", or "would stay").
pub fn transform_failures_line(f: &transform::TransformFailures, stay: &str) -> String {
    format!(
        "  --transform failed on {} message{} ({stay} in the dead-letter queue; the first, {}: {})\n",
        f.count,
        if f.count == 1 { "" } else { "s" },
        f.ids.first().map_or("?", String::as_str),
        f.first_error
    )
}

/// `--where` could not be evaluated on some messages: they stayed where they were.
pub fn where_failures_line(f: &status::WhereFailures) -> String {
    format!(
        "  --where failed on {} message{} (not selected; the first, {}: {})\n",
        f.count,
        if f.count == 1 { "" } else { "s" },
        f.first_id,
        f.first_error
    )
}

pub fn human(r: &Report) -> String {
    let mut out = String::new();
    let to = &r.destination.name;
    let from = source_shown(r);
    if !r.destination.fanout.is_empty() {
        out.push_str(&format!(
            "Fan-out (--allow-fanout): publishing to topic {to} reaches every subscription of it: {}.\n",
            r.destination.fanout.join(", ")
        ));
    }
    if let Some(w) = &r.would_move {
        out.push_str(&format!(
            "Dry run: {} message{} would move from {} to {to}{}.\n",
            w.count,
            if w.count == 1 { "" } else { "s" },
            from,
            if w.exact {
                ""
            } else {
                " (among the messages read; more may match)"
            }
        ));
        out.push_str(&sources_line(&r.destination, "would stay"));
        if !w.by_error_class.is_empty() {
            let classes: Vec<String> = w
                .by_error_class
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            out.push_str(&format!("  classes   {}\n", classes.join(", ")));
        }
        if let (Some(o), Some(n)) = (w.oldest_age_seconds, w.newest_age_seconds) {
            out.push_str(&format!(
                "  ages      oldest {}, newest {}\n",
                status::age::age(o),
                status::age::age(n)
            ));
        }
        if w.groups.len() > 1 || !r.selection.groups.is_empty() {
            for g in &w.groups {
                out.push_str(&format!(
                    "  group     {}  {:>6}  {}{}{}\n",
                    g.id,
                    g.count,
                    g.class,
                    if g.message.is_empty() { "" } else { ": " },
                    g.message
                ));
            }
        }
        for (i, s) in w.samples.iter().enumerate() {
            out.push_str(&format!("  {}. {}  {}\n", i + 1, s.error_class, s.id));
        }
        if let Some(f) = &r.where_failures {
            out.push_str(&where_failures_line(f));
        }
        if let Some(t) = &r.transform {
            if let Some(f) = &t.failed {
                out.push_str(&transform_failures_line(f, "would stay"));
            }
            for d in &t.diffs {
                out.push_str(&format!("  copy of {} (--transform):\n", d.id));
                for line in d.diff.lines() {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        }
        if r.skipped_at_max_redrives > 0 {
            out.push_str(&format!(
                "  {} at maxRedrives ({}): would be skipped\n",
                r.skipped_at_max_redrives, r.selection.max_redrives
            ));
        }
        if let Some(a) = &r.archive {
            out.push_str(&archive_line(a));
        }
        if let Some(h) = &r.health {
            out.push_str(&format!(
                "  health gates: {}{}\n",
                h.answer,
                if h.healthy {
                    ""
                } else {
                    "; a run now would move nothing (exit 75)"
                }
            ));
        }
        for why in &r.incomplete {
            out.push_str(&format!("  not judged: {why}\n"));
        }
        out.push_str("Nothing was moved.\n");
        return out;
    }
    out.push_str(&format!(
        "Redrive {}: {} moved from {} to {to}; {} not selected; {} skipped at maxRedrives ({}); {} possibly duplicated",
        outcome(r),
        r.moved,
        from,
        r.not_selected,
        r.skipped_at_max_redrives,
        r.selection.max_redrives,
        r.possibly_duplicated
    ));
    if let Some(left) = r.left_in_dead_letter {
        let place = if r.role == "dead-letter" {
            "the dead-letter queue".to_owned()
        } else {
            r.dead_letter.clone()
        };
        if r.left_basis == Some(STATISTICS) {
            out.push_str(&format!(
                "; about {left} left in {place} (the broker's statistics, which may lag)"
            ));
        } else if r.left_basis == Some(LAST_BATCH) {
            out.push_str(&format!(
                "; {left} left in {place} as the last batch ended (what came back or arrived after it is not counted)"
            ));
        } else {
            out.push_str(&format!("; {left} left in {place}"));
        }
    }
    out.push_str(".\n");
    if let Some(n) = r.held_elsewhere {
        out.push_str(&format!(
            "  {n} held by another consumer (unacknowledged): not examined, still in {}.\n",
            if r.role == "dead-letter" {
                "the dead-letter queue"
            } else {
                r.dead_letter.as_str()
            }
        ));
    }
    if let Some(n) = r.came_back.filter(|n| *n > 0) {
        out.push_str(&format!(
            "  {} of the copies failed again and came back to {} while the run went; they were left there, not moved again.\n",
            n,
            if r.role == "dead-letter" { "the dead-letter queue" } else { r.dead_letter.as_str() }
        ));
    }
    out.push_str(&sources_line(&r.destination, "stayed"));
    for why in &r.incomplete {
        out.push_str(&format!("  not complete: {why}\n"));
    }
    if let Some(f) = &r.where_failures {
        out.push_str(&where_failures_line(f));
    }
    if let Some(t) = &r.transform {
        out.push_str(&format!(
            "  {} cop{} made by --transform (the sha256 of each message and its copy: the audit record, --format json)\n",
            t.moved,
            if t.moved == 1 { "y" } else { "ies" }
        ));
    }
    if let Some(b) = &r.batches
        && b.size.is_some()
    {
        out.push_str(&format!(
            "  {} batch{} of at most {}{}{}; stopped: {}\n",
            b.count,
            if b.count == 1 { "" } else { "es" },
            b.size.unwrap_or_default(),
            if b.until_empty { ", until empty" } else { "" },
            b.max_duration_seconds.map_or_else(String::new, |s| format!(
                " for {} at most",
                status::age::age(s as f64)
            )),
            b.stopped_by
        ));
    }
    if let Some(a) = &r.archive {
        out.push_str(&archive_line(a));
    }
    if let Some(why) = &r.unhealthy {
        out.push_str(&format!(
            "  not healthy: {why}; nothing more was moved (exit 75: run it again later)\n"
        ));
    }
    if let Some(d) = &r.redead {
        out.push_str(&format!(
            "  came back: {} of the {} moved by the last batch were back in {} within --verify-for ({}%, more than --max-redead {}%): the downstream is not fixed, nothing more was moved{}\n",
            d.count,
            d.of,
            if r.role == "dead-letter" { "the dead-letter queue" } else { r.dead_letter.as_str() },
            d.percent,
            d.allowed_percent,
            if d.ids.is_empty() {
                String::new()
            } else {
                format!(" (the first: {})", d.ids[0])
            }
        ));
    }
    if let Some(by) = r.moved_by {
        out.push_str(&format!(
            "  moved by {by} (--native): the messages went back as they were, with no dlq-redrive-count and no maxRedrives check.\n"
        ));
    }
    out
}

/// How a run ended, as the report's first line says it: `complete` only when nothing more
/// was there for it to move; else why it stopped (issue 52: never "complete" for a run a
/// gate, `--verify-for`, `--max-duration`, `--limit` or a single `--batch` stopped early).
fn outcome(r: &Report) -> &'static str {
    let by = r
        .stopped_by
        .or(r.batches.as_ref().map(|b| b.stopped_by))
        .unwrap_or("");
    if r.error.is_some() {
        "stopped"
    } else if r.interrupted {
        "interrupted"
    } else if r.redead.is_some() {
        "stopped (too many came back)"
    } else if r.unhealthy.is_some() {
        "stopped (not healthy)"
    } else if !r.incomplete.is_empty() {
        "incomplete"
    } else if by == stop::MAX_DURATION {
        "stopped at --max-duration"
    } else if by == stop::LIMIT {
        "stopped at --limit"
    } else if by == stop::ONE_BATCH {
        "stopped after one batch (--batch without --until-empty)"
    } else {
        "complete"
    }
}

/// `--to failed-consumer` by source: the sources and their counts, and the messages that
/// name none (`stay`: what became of them); empty when the destination has neither.
fn sources_line(d: &Destination, stay: &str) -> String {
    let mut out = String::new();
    if !d.sources.is_empty() {
        let each: Vec<String> = d
            .sources
            .iter()
            .map(|s| format!("{} {}", s.queue, s.count))
            .collect();
        out.push_str(&format!("  sources   {}\n", each.join(", ")));
    }
    if let Some(n) = d.without_source {
        out.push_str(&format!(
            "  {n} message{} name{} no source: {stay} in the dead-letter queue\n",
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" },
        ));
    }
    out
}

/// What a replay read of its archive, for people.
fn archive_line(a: &crate::archive::read::ArchiveRead) -> String {
    let mut out = format!(
        "  archive   {} run(s), {} object(s), {} record(s) read, {} duplicate(s) replayed once",
        a.runs, a.objects, a.read, a.duplicates
    );
    if a.already_replayed > 0 {
        out.push_str(&format!(
            ", {} replayed before and not again (--replay-again publishes them)",
            a.already_replayed
        ));
    }
    if a.differing > 0 {
        out.push_str(&format!(
            ", {} sharing an id with another record but different, each replayed",
            a.differing
        ));
    }
    if a.possibly_duplicated > 0 {
        out.push_str(&format!(
            ", {} possibly duplicated (identical in everything to a record of a run killed with --delete, which may or may not have removed it: each replayed)",
            a.possibly_duplicated
        ));
    }
    if a.unlisted > 0 {
        out.push_str(&format!(
            ", {} object(s) no manifest lists {}",
            a.unlisted,
            if a.unlisted_read {
                "read (--read-unlisted)"
            } else {
                "not read"
            }
        ));
    }
    if a.pending > 0 {
        out.push_str(&format!(
            ", {} object(s) a killed run wrote and never listed not read (their messages never left the queue)",
            a.pending
        ));
    }
    if a.elsewhere > 0 {
        out.push_str(&format!(
            ", {} record(s) of another target or queue left",
            a.elsewhere
        ));
    }
    if a.replayed_elsewhere > 0 {
        out.push_str(&format!(
            ", {} replayed before to another destination (published to this one)",
            a.replayed_elsewhere
        ));
    }
    if a.replayed_again > 0 {
        out.push_str(&format!(
            ", {} replayed before and again (--replay-again): possibly duplicated",
            a.replayed_again
        ));
    }
    if a.from_copy > 0 {
        out.push_str(&format!(
            ", {} from a copy archive (archived without --delete: the messages may still be in the dead-letter queue): possibly duplicated",
            a.from_copy
        ));
    }
    out.push('\n');
    if let Some(l) = &a.ledger {
        out.push_str(&format!("  ledger    {l}\n"));
    }
    out
}

/// The audit record.
pub fn json(r: &Report) -> String {
    let mut t = serde_json::to_string_pretty(r).unwrap_or_else(|_| "{}".into());
    t.push('\n');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(class: Option<&str>, redriven: Option<&str>, published_ms: i64) -> Message {
        let mut headers = Vec::new();
        if let Some(c) = class {
            headers.push(("dlq-error-class".to_owned(), c.to_owned()));
        }
        if let Some(n) = redriven {
            headers.push(("dlq-redrive-count".to_owned(), n.to_owned()));
        }
        Message {
            headers,
            published_ms: Some(published_ms),
            ..Message::default()
        }
    }

    /// Issue 37: what a person reads of a selective run: the dry run's groups, and where
    /// `--where` failed, in the dry run and in the run's report.
    #[test]
    fn a_selective_run_reads_as_groups_and_failures() {
        let group = |id: &str, count, class: &str, message: &str| status::FailureGroup {
            id: id.into(),
            class: class.into(),
            message: message.into(),
            count,
            first_seen_ms: None,
            last_seen_ms: None,
            sample_ids: Vec::new(),
        };
        let mut r = Report {
            format_version: 1,
            kind: KIND,
            channel: "orders".into(),
            target: "local-rabbitmq".into(),
            backend: "rabbitmq",
            dead_letter: "orders.dlq".into(),
            role: "dead-letter",
            destination: Destination {
                name: "orders.process".into(),
                source: true,
                failed_consumer: false,
                fanout: Vec::new(),
                ..Destination::default()
            },
            dry_run: true,
            selection: SelectionRecord {
                limit: None,
                classes: Vec::new(),
                older_than_seconds: None,
                max_redrives: 3,
                rate: None,
                groups: Vec::new(),
                where_: Some(".body.region == \"eu\"".into()),
            },
            examined: 3000,
            moved: 0,
            not_selected: 1800,
            skipped_at_max_redrives: 0,
            possibly_duplicated: 0,
            came_back: None,
            stopped_by: None,
            held_elsewhere: None,
            left_in_dead_letter: Some(3000),
            left_basis: Some(STATISTICS),
            interrupted: false,
            error: None,
            incomplete: Vec::new(),
            started_at: String::new(),
            ended_at: String::new(),
            operator: "ops@host pid 1".into(),
            identity: None,
            identity_unknown: None,
            reason: None,
            would_move: Some(WouldMove {
                count: 1200,
                exact: true,
                by_error_class: [
                    ("PaymentDeclined".to_owned(), 700),
                    ("Timeout".to_owned(), 500),
                ]
                .into_iter()
                .collect(),
                oldest_age_seconds: Some(7200.0),
                newest_age_seconds: Some(60.0),
                groups: vec![
                    group(
                        "641a4d89f69d",
                        700,
                        "PaymentDeclined",
                        "order <n> failed: amount <n>",
                    ),
                    group("0c3e5a7b9d1f", 500, "Timeout", ""),
                ],
                samples: Vec::new(),
            }),
            moved_by: None,
            moved_ids: None,
            time_in_dead_letter: None,
            where_failures: Some(status::WhereFailures {
                count: 12,
                first_id: "o-17".into(),
                first_error: "cannot index <str> with <str>".into(),
            }),
            transform: None,
            batches: None,
            redead: None,
            unhealthy: None,
            health: None,
            from: None,
            archive: None,
        };
        insta::assert_snapshot!("redrive-dry-run-selected", human(&r));
        let dry = r.clone();
        r.dry_run = false;
        r.would_move = None;
        r.moved = 1200;
        r.left_in_dead_letter = Some(1800);
        r.left_basis = Some(EXACT);
        insta::assert_snapshot!("redrive-run-selected", human(&r));

        // With `--transform`: the dry run's diff and what would stay; the run's copies and
        // what stayed (the run is incomplete).
        let failed = transform::TransformFailures {
            count: 3,
            ids: vec!["o-10".into(), "o-20".into(), "o-30".into()],
            first_error: "cannot parse <str> as number".into(),
        };
        let m = Message {
            id: "o-11".into(),
            headers: vec![
                ("tenant".into(), "acme".into()),
                ("trace-id".into(), "t-11".into()),
            ],
            body: br#"{"order":11,"amount":"11.11"}"#.to_vec(),
            body_len: 29,
            ..Message::default()
        };
        let edit = transform::Transform::compile(
            r#".body.amount |= tonumber | .headers |= (del(."trace-id") | .repaired = "yes")"#,
        )
        .expect("compiles")
        .apply(&m, &envelope::read(&Default::default(), &m), None)
        .expect("edits");
        let mut d = dry;
        d.transform = Some(TransformRecord {
            program: ".body.amount |= tonumber".into(),
            failed: Some(failed.clone()),
            moved: 0,
            messages: Vec::new(),
            diffs: vec![CopyDiff {
                id: "o-11".into(),
                diff: transform::diff(&m, &edit, &Default::default()),
            }],
        });
        insta::assert_snapshot!("redrive-dry-run-transform", human(&d));
        r.transform = Some(TransformRecord {
            program: ".body.amount |= tonumber".into(),
            failed: Some(failed),
            moved: 1200,
            messages: Vec::new(),
            diffs: Vec::new(),
        });
        r.incomplete = vec![
            "--transform failed on 3 messages; they stay in `orders.dlq` (the first, o-10: cannot parse <str> as number; every id, up to 100: transform.failed in --format json)".into(),
        ];
        insta::assert_snapshot!("redrive-run-transform", human(&r));

        // Issue 52 (fixjq 3): the `started` record names the program as it names `--where`.
        let started = serde_json::to_value(Started::of(&r, "redrive")).expect("JSON");
        assert_eq!(started["selection"]["where"], ".body.region == \"eu\"");
        assert_eq!(
            started["transform"], ".body.amount |= tonumber",
            "{started:#}"
        );
        r.transform = None;
        let started = serde_json::to_value(Started::of(&r, "redrive")).expect("JSON");
        assert!(started.get("transform").is_none(), "{started:#}");
    }

    /// Issue 37, to the failed consumer on SQS: sources are counted most first (then by
    /// source), and the report says them, and what names none, in the dry run and the run.
    #[test]
    fn a_run_by_source_lists_its_sources_and_what_stays() {
        let mut list = Vec::new();
        for (source, queue) in [("arn:b", "b"), ("arn:a", "a"), ("arn:b", "b")] {
            count_source(&mut list, source, queue, 1);
        }
        count_source(&mut list, "arn:c", "c", 2);
        let order: Vec<(&str, u64)> = list.iter().map(|s| (s.queue.as_str(), s.count)).collect();
        assert_eq!(order, [("b", 2), ("c", 2), ("a", 1)]);
        let d = Destination {
            name: "the queue each message came from".into(),
            failed_consumer: true,
            sources: list,
            without_source: Some(1),
            ..Destination::default()
        };
        assert_eq!(
            sources_line(&d, "stayed"),
            "  sources   b 2, c 2, a 1\n  1 message names no source: stayed in the dead-letter queue\n"
        );
        let json = serde_json::to_value(&d).expect("json");
        assert_eq!(json["sources"][0]["source"], "arn:b");
        assert_eq!(json["withoutSource"], 1);
        // Another destination shows neither (and its JSON is as it was).
        let plain = Destination {
            name: "orders".into(),
            source: true,
            ..Destination::default()
        };
        assert_eq!(sources_line(&plain, "stayed"), "");
        assert_eq!(
            serde_json::to_value(&plain).expect("json"),
            serde_json::json!({"name": "orders", "source": true})
        );
    }

    /// Issue 37: `--group` and `--where` compose with `--class` and the ping-pong guard: a
    /// message moves only when every selector chooses it.
    #[test]
    fn groups_and_where_compose_with_the_other_selectors() {
        let now: i64 = 1_764_576_000_000;
        let m = |class: &str, message: &str, body: &str, redriven: Option<&str>| {
            let mut headers = vec![
                ("dlq-error-class".to_owned(), class.to_owned()),
                ("dlq-error-message".to_owned(), message.to_owned()),
            ];
            if let Some(n) = redriven {
                headers.push(("dlq-redrive-count".to_owned(), n.to_owned()));
            }
            Message {
                id: "m".into(),
                headers,
                body: body.as_bytes().to_vec(),
                body_len: body.len() as u64,
                published_ms: Some(now - 1000),
                ..Message::default()
            }
        };
        let e = envelope::read(
            &EnvelopeResolved::default(),
            &m("poison", "order 1 failed", "", None),
        );
        let poison = selector::group(&e);
        let sel = Selection {
            classes: vec!["poison".into()],
            groups: vec![poison.clone()],
            where_: Some(Where::compile(".body.region == \"eu\"").expect("compiles")),
            max_redrives: 3,
            ..Selection::default()
        };
        let eu = r#"{"region":"eu"}"#;
        // The same group whatever the order number.
        assert_eq!(
            decide(&sel, &m("poison", "order 77 failed", eu, None), now),
            Decision::Move
        );
        assert_eq!(
            decide(
                &sel,
                &m("poison", "order 77 failed", r#"{"region":"us"}"#, None),
                now
            ),
            Decision::NotSelected
        );
        assert_eq!(
            decide(&sel, &m("poison", "order 77 refused", eu, None), now),
            Decision::NotSelected
        );
        assert_eq!(
            decide(&sel, &m("transient", "order 77 failed", eu, None), now),
            Decision::NotSelected
        );
        assert_eq!(
            decide(&sel, &m("poison", "order 77 failed", eu, Some("3")), now),
            Decision::AtLimit
        );
    }

    /// Issue 35: `archive --due` ages a message from where its queue's retention counts.
    /// An SQS standard DLQ counts from the original enqueue (SentTimestamp), which comes
    /// before the `dlq-dead-lettered-at` the consumer wrote: by the dead-lettering the
    /// message is young, by the retention it is due.
    #[test]
    fn due_ages_a_message_from_its_retention_not_its_dead_lettering() {
        let now: i64 = 1_764_576_000_000;
        let day = 86_400_000;
        let m = Message {
            headers: vec![(
                "dlq-dead-lettered-at".to_owned(),
                (now - 3_600_000).to_string(),
            )],
            // Sent 3 days ago, an hour in the DLQ.
            published_ms: Some(now - 3 * day),
            retained_since_ms: Some(now - 3 * day),
            ..Message::default()
        };
        let e = envelope::read(&EnvelopeResolved::default(), &m);
        assert_eq!(age_ms(AgeFrom::DeadLettered, &m, &e, now), Some(3_600_000));
        assert_eq!(age_ms(AgeFrom::Retention, &m, &e, now), Some(3 * day));
        let due = |age: AgeFrom| {
            decide(
                &Selection {
                    older_than_ms: Some(2 * day),
                    age,
                    max_redrives: u32::MAX,
                    ..Selection::default()
                },
                &m,
                now,
            )
        };
        assert_eq!(due(AgeFrom::DeadLettered), Decision::NotSelected);
        assert_eq!(due(AgeFrom::Retention), Decision::Move);
        // No retention start from the backend: the earliest time the message carries.
        let bare = Message {
            retained_since_ms: None,
            ..m.clone()
        };
        let e = envelope::read(&EnvelopeResolved::default(), &bare);
        assert_eq!(age_ms(AgeFrom::Retention, &bare, &e, now), Some(3 * day));
        // Nothing at all: unknown, never due.
        let none = Message::default();
        let e = envelope::read(&EnvelopeResolved::default(), &none);
        assert_eq!(age_ms(AgeFrom::Retention, &none, &e, now), None);
    }

    #[test]
    fn selection_by_class_age_and_the_ping_pong_guard() {
        let sel = Selection {
            classes: vec!["poison".into()],
            older_than_ms: Some(60_000),
            max_redrives: 3,
            ..Selection::default()
        };
        let now = 1_000_000;
        assert_eq!(
            decide(&sel, &msg(Some("poison"), None, now - 61_000), now),
            Decision::Move
        );
        assert_eq!(
            decide(
                &sel,
                &msg(Some("transient_exhausted"), None, now - 61_000),
                now
            ),
            Decision::NotSelected
        );
        assert_eq!(
            decide(&sel, &msg(Some("poison"), None, now - 59_000), now),
            Decision::NotSelected,
            "too young"
        );
        assert_eq!(
            decide(&sel, &msg(Some("poison"), Some("3"), now - 61_000), now),
            Decision::AtLimit
        );
        assert_eq!(
            decide(&sel, &msg(Some("poison"), Some("2"), now - 61_000), now),
            Decision::Move
        );
    }

    #[test]
    fn only_what_moved_counts_for_the_time_in_the_queue() {
        let t = Tally::default();
        let now = status::now_ms();
        // Chosen: a (waited 2 min), b (no time), c (waited 1 h); only a and b moved, plus d,
        // which was never noted.
        t.chose("a".into(), Some(now - 120_000));
        t.chose("b".into(), None);
        t.chose("c".into(), Some(now - 3_600_000));
        t.moved_ids(["a".to_owned(), "b".to_owned(), "d".to_owned()]);
        let (mut seconds, unknown) = t.waited();
        seconds.sort_unstable();
        assert_eq!(seconds.len(), 1);
        assert!((119..=121).contains(&seconds[0]), "{seconds:?}");
        assert_eq!(unknown, 2, "b had no time, d was never noted");
        // Two messages under one id (RabbitMQ: equal bodies) count once each.
        t.chose("e".into(), Some(now));
        t.chose("e".into(), Some(now));
        t.moved_ids(["e".to_owned(), "e".to_owned()]);
        assert_eq!(t.waited().0.len(), 3);
    }

    #[test]
    fn moved_ids_are_digested_in_sorted_order() {
        let a = MovedIds::of(vec!["b".into(), "a".into()]);
        let b = MovedIds::of(vec!["a".into(), "b".into()]);
        assert_eq!(a, b);
        assert_eq!(a.ids, vec!["a", "b"]);
        // printf 'a\nb\n' | sha256sum
        assert_eq!(
            a.sha256,
            "911169ddaaf146aff539f58c26c489af3b892dff0fe283c1c264c65ae5aa59a2"
        );
        let many = MovedIds::of((0..=MAX_IDS).map(|i| i.to_string()).collect());
        assert_eq!(many.count, MAX_IDS as u64 + 1);
        assert!(many.ids.is_empty());
    }

    #[test]
    fn allowed_operators_match_exactly_or_as_globs() {
        let list = vec![
            "ops".to_owned(),
            "arn:aws:sts::123456789012:assumed-role/oncall/*".to_owned(),
            "User:[".to_owned(),
        ];
        assert!(allowed(&list, "ops"));
        assert!(!allowed(&list, "ops2"));
        assert!(allowed(
            &list,
            "arn:aws:sts::123456789012:assumed-role/oncall/alice"
        ));
        assert!(!allowed(
            &list,
            "arn:aws:sts::123456789012:assumed-role/dev/alice"
        ));
        assert!(allowed(&list, "User:["), "an invalid glob matches itself");
        assert!(!allowed(&[], "ops"));
    }

    #[test]
    fn an_unreadable_redrive_count_is_at_the_limit_not_zero() {
        let sel = Selection {
            max_redrives: 3,
            ..Selection::default()
        };
        for bad in ["abc", "3.0", "-1", "4294967296", "", " 1 2", "+1", "0x1"] {
            assert_eq!(
                decide(&sel, &msg(None, Some(bad), 0), 1),
                Decision::AtLimit,
                "`{bad}`"
            );
        }
        assert_eq!(decide(&sel, &msg(None, Some(" 2 "), 0), 1), Decision::Move);
        assert_eq!(decide(&sel, &msg(None, None, 0), 1), Decision::Move);
        assert_eq!(parse_count("4294967295"), Some(u32::MAX));
    }

    #[tokio::test]
    async fn a_stop_during_a_rate_wait_is_honoured_at_once() {
        let stop = Arc::new(AtomicBool::new(false));
        let mut pace = Pace::new(Some(0.1));
        assert!(
            pace.wait_or_stop(&stop).await,
            "the first move goes at once"
        );
        let flag = Arc::clone(&stop);
        let started = tokio::time::Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            flag.store(true, Ordering::SeqCst);
        });
        assert!(!pace.wait_or_stop(&stop).await, "stopped, not moved");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(!pace.wait_or_stop(&stop).await, "nothing starts after it");
    }

    #[test]
    fn a_moved_message_counts_one_more_redrive_and_sheds_its_attempt_history() {
        let h = vec![
            ("x-death".to_owned(), "[..]".to_owned()),
            ("x-first-death-reason".to_owned(), "rejected".to_owned()),
            ("dlq-error-class".to_owned(), "poison".to_owned()),
            ("dlq-redrive-count".to_owned(), "1".to_owned()),
        ];
        let none = HeaderRules::default();
        assert_eq!(
            moved_headers(&h, &["x-death", "x-first-death-*"], &none),
            vec![
                ("dlq-error-class".to_owned(), "poison".to_owned()),
                ("dlq-redrive-count".to_owned(), "2".to_owned()),
            ]
        );
        assert_eq!(
            moved_headers(&[], &[], &none),
            vec![("dlq-redrive-count".to_owned(), "1".to_owned())]
        );
    }

    /// Issue 37, header hygiene: after the backend's own drops, `deadLetter.redrive` and
    /// the default list; `keepHeaders` wins over both but brings back neither the backend's
    /// drops nor a stale counter.
    #[test]
    fn the_copy_sheds_the_declared_and_default_headers_and_keeps_what_keep_headers_names() {
        let h: Vec<(String, String)> = [
            ("x-death", "[..]"),
            ("dlq-redrive-count", "4"),
            ("x-internal-route", "a"),
            ("x-internal-keep", "b"),
            (
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ),
            ("tracestate", "x=1"),
            ("__mskmr", "src"),
            ("order-id", "42"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let rules = HeaderRules::resolve(Some(&crate::spec::model::RedriveHeaders {
            drop_headers: Some(vec!["x-internal-*".into()]),
            keep_headers: Some(vec![
                "x-internal-keep".into(),
                "traceparent".into(),
                "x-death".into(),
                "dlq-redrive-count".into(),
            ]),
        }));
        let out = moved_headers(&h, &["x-death"], &rules);
        let names: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "x-internal-keep",
                "traceparent",
                "order-id",
                "dlq-redrive-count"
            ]
        );
        assert_eq!(
            out[3].1, "5",
            "the counter is rewritten whatever keepHeaders says"
        );
        // Nor can dropHeaders reset it: a glob over it still counts from its value.
        let greedy = HeaderRules::resolve(Some(&crate::spec::model::RedriveHeaders {
            drop_headers: Some(vec!["dlq-*".into()]),
            keep_headers: None,
        }));
        assert_eq!(
            moved_headers(&h, &[], &greedy).last(),
            Some(&("dlq-redrive-count".to_owned(), "5".to_owned()))
        );
    }

    /// A run's report as the tests below vary it: 5 moved of 20, nothing else.
    fn run_report() -> Report {
        Report {
            format_version: 1,
            kind: KIND,
            channel: "orders".into(),
            target: "local-rabbitmq".into(),
            backend: "rabbitmq",
            dead_letter: "orders.dlq".into(),
            role: "dead-letter",
            destination: Destination {
                name: "orders".into(),
                source: true,
                ..Destination::default()
            },
            dry_run: false,
            selection: SelectionRecord {
                limit: None,
                classes: Vec::new(),
                older_than_seconds: None,
                max_redrives: 3,
                rate: None,
                groups: Vec::new(),
                where_: None,
            },
            examined: 5,
            moved: 5,
            not_selected: 0,
            skipped_at_max_redrives: 0,
            possibly_duplicated: 0,
            came_back: None,
            stopped_by: None,
            held_elsewhere: None,
            left_in_dead_letter: Some(15),
            left_basis: Some(EXACT),
            interrupted: false,
            error: None,
            incomplete: Vec::new(),
            started_at: String::new(),
            ended_at: String::new(),
            operator: "ops@host pid 1".into(),
            identity: None,
            identity_unknown: None,
            reason: None,
            would_move: None,
            moved_by: None,
            moved_ids: None,
            time_in_dead_letter: None,
            where_failures: None,
            transform: None,
            batches: None,
            redead: None,
            unhealthy: None,
            from: None,
            archive: None,
            health: None,
        }
    }

    /// Issue 52, M2: a run that `--verify-for`, a gate or `--max-duration` stopped early
    /// never reads "complete", and says why it stopped (the redead also without `--batch`).
    #[test]
    fn a_run_stopped_early_says_why_and_never_complete() {
        let redead = Redead {
            count: 4,
            of: 5,
            percent: 80.0,
            allowed_percent: 20.0,
            ids: vec!["m-01".into(), "m-02".into()],
        };
        let mut r = run_report();
        r.redead = Some(redead.clone());
        r.batches = Some(BatchRecord {
            size: None,
            until_empty: false,
            max_duration_seconds: None,
            count: 1,
            stopped_by: "redead",
        });
        insta::assert_snapshot!("redrive-run-redead", human(&r));
        let mut r = run_report();
        r.redead = Some(redead);
        r.batches = Some(BatchRecord {
            size: Some(5),
            until_empty: true,
            max_duration_seconds: Some(3600),
            count: 1,
            stopped_by: "redead",
        });
        insta::assert_snapshot!("redrive-run-redead-batched", human(&r));
        let mut r = run_report();
        r.moved = 0;
        r.left_in_dead_letter = Some(20);
        r.unhealthy = Some("http://127.0.0.1:9/health answered 503".into());
        r.batches = Some(BatchRecord {
            size: Some(5),
            until_empty: true,
            max_duration_seconds: Some(3600),
            count: 0,
            stopped_by: "unhealthy",
        });
        insta::assert_snapshot!("redrive-run-unhealthy", human(&r));
        let mut r = run_report();
        r.batches = Some(BatchRecord {
            size: Some(5),
            until_empty: true,
            max_duration_seconds: Some(3600),
            count: 1,
            stopped_by: "max-duration",
        });
        insta::assert_snapshot!("redrive-run-max-duration", human(&r));
        // F2: stopped at --limit, or after one --batch, with messages left: not "complete".
        let mut r = run_report();
        r.selection.limit = Some(5);
        r.stopped_by = Some(stop::LIMIT);
        r.left_in_dead_letter = Some(25);
        insta::assert_snapshot!("redrive-run-limit", human(&r));
        let mut r = run_report();
        r.stopped_by = Some(stop::ONE_BATCH);
        r.came_back = Some(0);
        r.batches = Some(BatchRecord {
            size: Some(5),
            until_empty: false,
            max_duration_seconds: None,
            count: 1,
            stopped_by: stop::ONE_BATCH,
        });
        insta::assert_snapshot!("redrive-run-one-batch", human(&r));
        // A count made before the pause that came after it is said as the last batch's.
        let mut r = run_report();
        r.stopped_by = Some(stop::MAX_DURATION);
        r.left_basis = Some(LAST_BATCH);
        assert!(
            human(&r).contains("; 15 left in the dead-letter queue as the last batch ended"),
            "{}",
            human(&r)
        );
        // Each cause its own word, none of them "complete".
        for (by, error, interrupted, incomplete) in [
            (stop::ERROR, true, false, false),
            (stop::INTERRUPTED, false, true, false),
            (stop::INCOMPLETE, false, false, true),
        ] {
            let mut r = run_report();
            r.stopped_by = Some(by);
            r.error = error.then(|| "refused".to_owned());
            r.interrupted = interrupted;
            if incomplete {
                r.incomplete.push("3 not examined".into());
            }
            assert!(
                !human(&r).starts_with("Redrive complete"),
                "{by}: {}",
                human(&r)
            );
            let doc: serde_json::Value =
                serde_json::from_str(&json(&r)).expect("the report is JSON");
            assert_eq!(doc["stoppedBy"], by);
        }
        for r in [
            run_report(),
            Report {
                batches: Some(BatchRecord {
                    size: Some(5),
                    until_empty: true,
                    max_duration_seconds: Some(3600),
                    count: 4,
                    stopped_by: "empty",
                }),
                ..run_report()
            },
        ] {
            assert!(
                human(&r).starts_with("Redrive complete: 5 moved"),
                "{}",
                human(&r)
            );
        }
    }

    /// Issue 52, H4: a run knows its own copies back in the DLQ by their stamp (every
    /// batch's), or on SQS by the id a copy was sent under; each is counted once.
    #[test]
    fn a_run_knows_its_own_copies_and_counts_each_back_once() {
        let run = Copies::new("ops@host pid 1");
        let other = Copies::new("ops@host pid 1");
        assert_ne!(run.stamp, other.stamp, "each run its own stamp");
        let (a, b) = (run.next(), run.next());
        assert_ne!(a, b);
        let header = |v: &str| vec![(envelope::REDRIVE_RUN.to_owned(), v.to_owned())];
        let m = |id: &str, headers| Message {
            id: id.into(),
            headers,
            ..Message::default()
        };
        assert_eq!(run.ours_message(&m("x", header(&a))), Some(a.clone()));
        assert_eq!(run.ours_message(&m("x", header(&other.next()))), None);
        assert_eq!(run.ours_message(&m("x", header(&run.stamp))), None);
        assert_eq!(run.ours_message(&m("x", Vec::new())), None);
        run.sent_as("sqs-copy-1");
        assert_eq!(
            run.ours_message(&m("sqs-copy-1", Vec::new())),
            Some("sqs-copy-1".to_owned())
        );
        let t = Tally::default();
        run.came_back(a.clone(), &t);
        run.came_back(a, &t);
        run.came_back(b, &t);
        assert_eq!(t.came_back.load(Ordering::Relaxed), 2);
        // A copy's headers never carry an earlier run's stamp.
        let out = moved_headers(&header("old/1"), &[], &HeaderRules::default());
        assert!(
            out.iter().all(|(k, _)| k != envelope::REDRIVE_RUN),
            "{out:?}"
        );
    }
}
