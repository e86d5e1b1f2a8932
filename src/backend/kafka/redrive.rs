//! Kafka's mover: brings dead letters back from the dead-letter topic to the main topic, at
//! least once, never lost.
//!
//! The contract (docs/kafka.md, "redrive"):
//! - records are read by the consumer group `dlqctl-redrive.<channel>`, which is also the
//!   lock: a run refuses to start while the group has members, and names them. Auto-commit is
//!   off. What is moved is kept as a ledger in the group's commits: the committed offset of a
//!   partition moves only past records that were delivered to the destination, and the
//!   offsets of records delivered beyond it (when a record before them was not selected, or
//!   is at `maxRedrives`) are kept in the commit's metadata ([`Ledger`]). A later run skips
//!   what the ledger holds, and `status` counts what it does not: a record not selected stays
//!   waiting for a later redrive. A broker that does not keep commit metadata (tansu 0.6;
//!   probed at the start of every run) gets no ledger: there, a partition moves nothing past
//!   the first record left behind, which waits for a later run with what follows it;
//! - the copy goes to the main topic (or `--to`) through an idempotent producer with
//!   `acks=all`, with the same key and payload and the record's headers minus Spring's
//!   exception headers (`kafka_dlt-exception-*`, Spring Kafka 3's `kafka_exception-*`, and
//!   their `key-exception` kin) and `retry_topic-*` (so the consumer's attempts start again)
//!   and those `deadLetter.redrive` and the default list of replication and tracing headers
//!   shed, plus `dlq-redrive-count` + 1. Its timestamp is the time of the move (an old
//!   timestamp could put it past the main topic's retention at once);
//! - `--limit N` moves exactly N, whatever the number of partitions: once N are moved or in
//!   flight, no further record is taken, and no offset moves past one that was not moved;
//! - records that arrive after the run started are left for the next run.
//!
//! A crash after the destination confirmed a record and before its offset was committed
//! makes the next run move it again: duplicated, never lost. The consumer must be
//! idempotent.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message as _, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use super::CONNECT_TIMEOUT;
use super::ledger::{LEDGER_PREFIX, Ledger, MAX_LEDGER, group};
use super::read::Reader;
use crate::backend::kit::errors::MoveError;
use crate::redrive::transform::Edit;
use crate::redrive::{self, Decision, Run};
use crate::spec::resolve::Resolved;
use crate::spec::resolve::headers::HeaderRules;
use crate::status::envelope::{REDRIVE_COUNT, REDRIVE_RUN};
use crate::status::now_ms;

/// Records sent before their deliveries are awaited and their offsets committed.
const BATCH: usize = 500;
/// How long to wait for the group's assignment, and for the next record.
const ASSIGN: Duration = Duration::from_secs(30);
const IDLE: Duration = Duration::from_secs(3);
/// Headers the copy does not carry (by prefix): Spring Kafka's exception headers under its
/// older (`kafka_dlt-`) and Spring Kafka 3's names, for the record and for its key, and its
/// retry-topic state.
pub(super) const DROP: [&str; 5] = [
    "kafka_dlt-exception-",
    "kafka_dlt-key-exception-",
    "kafka_exception-",
    "kafka_key-exception-",
    "retry_topic-",
];

/// What one run moves with, between what: the joined consumer and its group, the producer,
/// the dead-letter topic and the destination, each partition's end as the run started, and
/// whether the broker keeps ledgers (commit metadata).
#[derive(Clone, Copy)]
struct Leg<'a> {
    consumer: &'a std::sync::Arc<StreamConsumer>,
    group: &'a str,
    producer: &'a FutureProducer,
    dlt: &'a str,
    dest: &'a str,
    ends: &'a BTreeMap<i32, i64>,
    scattered: bool,
    /// What the copies leave behind of the records' headers (`deadLetter.redrive`).
    headers: &'a HeaderRules,
}

/// The writing capability for records: made only by `dlqctl redrive`.
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
        let dlt = r.dead_letter.clone();
        let dest = if run.to.source {
            r.main.clone()
        } else {
            run.to.name.clone()
        };
        run.check_owned(redrive::outside_prefixes(&self.reader.prefixes, &dest))
            .map_err(MoveError)?;
        let meta = self.reader.metadata().await.map_err(MoveError::of)?;
        let Some(m) = meta.get(&dlt) else {
            return Err(MoveError(format!("topic `{dlt}` does not exist")));
        };
        if !meta.contains_key(&dest) {
            return Err(MoveError(format!(
                "the destination topic `{dest}` does not exist; nothing was moved"
            )));
        }
        let partitions = m.partitions;
        let marks = self
            .reader
            .dlt_marks(&dlt, partitions)
            .await
            .map_err(MoveError::of)?;
        let group = group(&r.channel);

        let mut config: ClientConfig = (*self.reader.config).clone();
        config
            .set("group.id", &group)
            .set("client.id", format!("dlqctl-redrive {}", run.holder))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "10000")
            .set("heartbeat.interval.ms", "1000");
        let consumer: StreamConsumer = config.create().map_err(MoveError::of)?;
        let consumer = std::sync::Arc::new(consumer);
        let holders = members(&self.reader.admin, &group).await?;
        if !holders.is_empty() {
            return Err(MoveError(format!(
                "topic `{dlt}` is being redriven already: the group `{group}` has member(s) {}; wait for them to finish (a killed run stays a member until its session times out: 10 s on Kafka)",
                holders.join(", ")
            )));
        }
        // Nothing after the group's position: done without joining (a join takes seconds).
        let ledgers = committed(&self.reader.admin, &group, &dlt, &marks).await?;
        let waiting: u64 = marks
            .iter()
            .zip(&ledgers)
            .map(|((_, high), l)| l.waiting(*high))
            .sum();
        if waiting == 0 {
            return Ok(());
        }
        let mut pconfig: ClientConfig = (*self.reader.config).clone();
        pconfig
            .set("enable.idempotence", "true")
            .set("acks", "all")
            // A batch is sent in one go and then awaited: waiting librdkafka's default 5 ms
            // for more records that are not coming costs every batch (100,000 records: 2.3 s
            // → 2.0 s, debug build).
            .set("linger.ms", "1")
            .set("message.timeout.ms", "30000");
        let producer: FutureProducer = pconfig.create().map_err(MoveError::of)?;

        // Does the broker keep a commit's metadata (real Kafka does; tansu 0.6 does not)? Only
        // then may records move past one left behind: otherwise the next run could not tell
        // they were moved, and would move them again.
        let scattered = keeps_ledgers(&consumer, &dlt, &ledgers).await?;
        consumer.subscribe(&[&dlt]).map_err(MoveError::of)?;
        // The end of each partition as the run starts: later records wait for the next run.
        let ends: BTreeMap<i32, i64> = marks
            .iter()
            .enumerate()
            .filter_map(|(p, (_, high))| Some((i32::try_from(p).ok()?, *high)))
            .collect();
        let ledgers: BTreeMap<i32, Ledger> = ledgers
            .into_iter()
            .enumerate()
            .filter_map(|(p, l)| Some((i32::try_from(p).ok()?, l)))
            .collect();
        let leg = Leg {
            consumer: &consumer,
            group: &group,
            producer: &producer,
            dlt: &dlt,
            dest: &dest,
            ends: &ends,
            scattered,
            headers: &r.headers,
        };
        let result = self.run(&leg, ledgers, run).await;
        consumer.unsubscribe();
        result
    }

    async fn run(
        &self,
        leg: &Leg<'_>,
        mut ledgers: BTreeMap<i32, Ledger>,
        run: &Run,
    ) -> Result<(), MoveError> {
        let Leg {
            consumer,
            group,
            producer,
            dlt,
            dest,
            ends,
            scattered,
            headers: rules,
        } = *leg;
        let mut pace = redrive::Pace::new(run.rate);
        // Without ledgers: partitions where a record was left behind move nothing more (the
        // offset of that record, and how many records after it were not examined).
        let mut blocked: BTreeMap<i32, (i64, u64)> = BTreeMap::new();
        // Per partition, the last offset read in this run.
        let mut seen: BTreeMap<i32, i64> = BTreeMap::new();
        let mut result = Ok(());
        let started = tokio::time::Instant::now();
        let finished = |seen: &BTreeMap<i32, i64>, ledgers: &BTreeMap<i32, Ledger>| {
            ends.iter().all(|(p, end)| {
                seen.get(p).is_some_and(|o| o + 1 >= *end)
                    || ledgers.get(p).is_some_and(|l| l.waiting(*end) == 0)
            })
        };
        'run: loop {
            let mut pending = Vec::new();
            // `dlqctl archive`: the chosen records of this batch, for the archive.
            let mut archived: Vec<(i32, i64, crate::status::Message)> = Vec::new();
            // A batch ends at BATCH records or after a second: what moved is committed often,
            // whatever the rate.
            let batch_started = tokio::time::Instant::now();
            while pending.len() + archived.len() < BATCH
                && !run.done()
                && !finished(&seen, &ledgers)
                && ((pending.is_empty() && archived.is_empty())
                    || batch_started.elapsed() < Duration::from_secs(1))
            {
                let room = run.select.limit.is_none_or(|l| {
                    run.tally.moved() + ((pending.len() + archived.len()) as u64) < l
                });
                if !room {
                    break;
                }
                let wait = if seen.is_empty() && started.elapsed() < ASSIGN {
                    ASSIGN
                } else {
                    IDLE
                };
                let m = match tokio::time::timeout(wait, consumer.recv()).await {
                    Err(_) => break,
                    Ok(Err(e)) => {
                        result = Err(MoveError(format!("reading `{dlt}`: {e}")));
                        break 'run;
                    }
                    Ok(Ok(m)) => m,
                };
                let (p, offset) = (m.partition(), m.offset());
                if seen.is_empty() {
                    // Joined: if another run joined the group meanwhile (the check before
                    // joining has a gap), stop before moving anything.
                    let members = members(&self.reader.admin, group).await?;
                    if members.len() > 1 {
                        result = Err(MoveError(format!(
                            "another redrive joined the group `{group}` at the same time ({}); stopping before moving anything",
                            members.join(", ")
                        )));
                        break 'run;
                    }
                }
                let end = ends.get(&p).copied().unwrap_or(0);
                if offset >= end {
                    // Arrived after the run started: for the next run.
                    seen.insert(p, end - 1);
                    continue;
                }
                // Offsets the consumer skipped (transaction markers, aborted or compacted
                // records) hold nothing to move: done, so the commit can pass them.
                let from = seen.get(&p).map_or_else(
                    || ledgers.get(&p).map_or(offset, |l| l.committed),
                    |s| s + 1,
                );
                if offset > from {
                    let l = ledgers.entry(p).or_default();
                    if from <= l.committed {
                        l.committed = l.committed.max(offset);
                    } else {
                        l.moved.extend(from..offset.min(from + 1_000_000));
                    }
                }
                seen.insert(p, offset);
                if ledgers.get(&p).is_some_and(|l| l.moved.contains(&offset)) {
                    // Moved by an earlier run.
                    continue;
                }
                if let Some((_, behind)) = blocked.get_mut(&p) {
                    *behind += 1;
                    continue;
                }
                let stamp = m.headers().and_then(|h| {
                    h.iter()
                        .find(|x| x.key.eq_ignore_ascii_case(REDRIVE_RUN))
                        .and_then(|x| x.value)
                        .and_then(|v| std::str::from_utf8(v).ok())
                        .map(str::to_owned)
                });
                if let Some(key) = stamp.and_then(|v| {
                    run.copies
                        .ours("", std::iter::once((REDRIVE_RUN, v.as_str())))
                }) {
                    // A copy this run produced (in this batch or an earlier one), failed
                    // again and back: left in the DLT, as a record not chosen is, not moved
                    // a second time.
                    run.copies.came_back(key, &run.tally);
                    if !scattered {
                        blocked.insert(p, (offset, 0));
                    }
                    continue;
                }
                // The whole payload: a declared envelope may point into it.
                let msg = super::status::record(&m, usize::MAX);
                let (d, edit) = redrive::decide_copy(&run.select, &msg, now_ms());
                run.tally.add(&d);
                if d != Decision::Move {
                    if !scattered {
                        blocked.insert(p, (offset, 0));
                    }
                    continue;
                }
                run.tally.edited(&format!("{dlt}/{p}/{offset}"), &edit);
                run.tally.chose(
                    format!("{dlt}/{p}/{offset}"),
                    redrive::since(&run.select, &msg),
                );
                // Interrupted during the wait: this record is left as one not chosen is.
                if !pace.wait_or_stop(&run.stop).await {
                    if !scattered {
                        blocked.insert(p, (offset, 0));
                    }
                    continue;
                }
                if run.archive.is_some() {
                    let msg = crate::status::Message {
                        id: format!("{dlt}/{p}/{offset}"),
                        ..msg
                    };
                    archived.push((p, offset, msg));
                    continue;
                }
                let headers = copy_headers(m.headers(), rules, &edit, &run.copies.next());
                let mut record = FutureRecord::to(dest).headers(headers);
                if let Some(k) = m.key() {
                    record = record.key(k);
                }
                // A tombstone stays one unless the program gave it a body.
                if let Some(v) = edit.body.as_deref().or(m.payload()) {
                    record = record.payload(v);
                }
                match producer.send_result(record) {
                    Ok(delivery) => {
                        let payload = edit.body.as_deref().or(m.payload()).unwrap_or_default();
                        let print = redrive::body_print(payload, payload.len() as u64);
                        pending.push((p, offset, delivery, print));
                    }
                    Err((e, _)) => {
                        // Not sent: it stays; what this batch sent is settled below.
                        result = Err(MoveError(format!(
                            "producing to `{dest}` ({e}); the record stays in `{dlt}` (partition {p}, offset {offset})"
                        )));
                        break;
                    }
                }
            }
            if pending.is_empty() && archived.is_empty() {
                break;
            }
            let mut keep = false;
            if let Some(sink) = run.archive.as_deref() {
                let messages: Vec<_> = archived.iter().map(|(_, _, m)| m.clone()).collect();
                match sink.put(&messages).await {
                    Ok(_) => {
                        run.tally
                            .moved
                            .fetch_add(messages.len() as u64, Ordering::Relaxed);
                        run.tally.moved_ids(messages.iter().map(|m| m.id.clone()));
                        // With --delete, archived is "removed": the ledger moves past them.
                        if sink.delete {
                            for (p, offset, _) in &archived {
                                ledgers.entry(*p).or_default().moved.insert(*offset);
                            }
                        }
                    }
                    Err(e) => {
                        result = Err(MoveError(format!(
                            "{e}; nothing of this batch left `{dlt}`"
                        )));
                    }
                }
                // Without --delete, nothing is committed: every record stays waiting.
                keep = !sink.delete;
            }
            if keep {
                if result.is_err() || run.done() {
                    break;
                }
                continue;
            }
            // Only records the destination confirmed enter the ledger.
            for (p, offset, delivery, print) in pending {
                match delivery.await {
                    Ok(Ok(_)) => {
                        run.tally.moved.fetch_add(1, Ordering::Relaxed);
                        run.tally.moved_print(print);
                        run.tally.moved_ids([format!("{dlt}/{p}/{offset}")]);
                        ledgers.entry(p).or_default().moved.insert(offset);
                    }
                    Ok(Err((e, _))) => {
                        if result.is_ok() {
                            result = Err(MoveError(format!(
                                "the destination `{dest}` refused a record ({e}); it stays in `{dlt}` (partition {p}, offset {offset})"
                            )));
                        }
                    }
                    Err(_) => {
                        if result.is_ok() {
                            result = Err(MoveError(format!(
                                "the delivery of a record to `{dest}` was cancelled; it stays in `{dlt}` (partition {p}, offset {offset})"
                            )));
                        }
                    }
                }
            }
            let mut tpl = TopicPartitionList::new();
            let mut full = false;
            for (p, l) in ledgers.iter_mut() {
                l.settle();
                let md = l.encode();
                full |= md.len() > MAX_LEDGER;
                let mut e = tpl.add_partition(dlt, *p);
                e.set_offset(Offset::Offset(l.committed))
                    .map_err(MoveError::of)?;
                e.set_metadata(md);
            }
            consumer.commit(&tpl, CommitMode::Sync).map_err(|e| {
                MoveError(format!(
                    "committing the redrive group's offsets on `{dlt}` ({e}): the records moved in this batch will be moved again by the next run"
                ))
            })?;
            if full && result.is_ok() {
                result = Err(MoveError(format!(
                    "the records moved are scattered among records left behind, and the ledger of `{dlt}` is full: run the redrive again to go on"
                )));
            }
            if result.is_err() || run.done() {
                break;
            }
        }
        if result.is_ok() && !run.done() {
            incomplete(run, dlt, ends, &seen, &ledgers, &blocked);
        }
        // What is left, exactly: the ledgers just committed against the ends as they are now
        // (records that came during the run count). Unread, the report falls back to status.
        let kept = run.archive.as_ref().is_some_and(|s| !s.delete);
        if !kept && let Ok(marks) = self.reader.dlt_marks(dlt, ends.len()).await {
            let left = marks
                .iter()
                .enumerate()
                .map(|(p, (low, high))| {
                    let p = i32::try_from(p).unwrap_or(i32::MAX);
                    ledgers.get(&p).map_or_else(
                        || u64::try_from(high - low).unwrap_or(0),
                        |l| {
                            let mut l = l.clone();
                            l.committed = l.committed.max(*low);
                            l.waiting(*high)
                        },
                    )
                })
                .sum();
            run.tally.left.store(left, Ordering::Relaxed);
        }
        result
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
}

/// Records in the report why a run that ended by itself did not examine every record it set
/// out to: partitions stopped at a record left behind (no ledger), and partitions not read
/// to their end (no record came for [`IDLE`]).
fn incomplete(
    run: &Run,
    dlt: &str,
    ends: &BTreeMap<i32, i64>,
    seen: &BTreeMap<i32, i64>,
    ledgers: &BTreeMap<i32, Ledger>,
    blocked: &BTreeMap<i32, (i64, u64)>,
) {
    let stopped: Vec<String> = blocked
        .iter()
        .filter(|(_, (_, behind))| *behind > 0)
        .map(|(p, (o, behind))| format!("partition {p} at offset {o} ({behind} after it)"))
        .collect();
    if !stopped.is_empty() {
        let behind: u64 = blocked.values().map(|(_, b)| *b).sum();
        run.tally.incomplete(format!(
            "{behind} record(s) of `{dlt}` not examined: this broker keeps no commit metadata (where the ledger of records moved past one left behind lives; tansu 0.6), so nothing moves past the first record a run leaves behind: {}; they wait for a redrive that selects those records",
            stopped.join(", ")
        ));
    }
    let short: Vec<String> = ends
        .iter()
        .filter_map(|(p, end)| {
            let from = seen
                .get(p)
                .map(|o| o + 1)
                .or_else(|| ledgers.get(p).map(|l| l.committed))
                .unwrap_or(0);
            let done = from >= *end || ledgers.get(p).is_some_and(|l| l.waiting(*end) == 0);
            (!done).then(|| format!("partition {p} from offset {from} to {end}"))
        })
        .collect();
    if !short.is_empty() {
        run.tally.incomplete(format!(
            "`{dlt}` was not read to the end it had at the start (no record came for {}s): {}; run again",
            IDLE.as_secs(),
            short.join(", ")
        ));
    }
}

/// The redrive group's ledger per partition (from the low watermark where it committed
/// nothing), read through the shared admin client: no consumer is needed before the group is
/// joined.
async fn committed(
    admin: &std::sync::Arc<super::ffi::Admin>,
    group: &str,
    topic: &str,
    marks: &[(i64, i64)],
) -> Result<Vec<Ledger>, MoveError> {
    let commits = super::ffi::list_group_offsets(admin, group, topic, marks.len(), CONNECT_TIMEOUT)
        .await
        .map_err(|e| {
            MoveError(format!(
                "reading the redrive group's offsets on `{topic}`: {}",
                e.detail()
            ))
        })?;
    Ok(super::ledger::ledgers_of(&commits, marks))
}

/// Whether the broker keeps the metadata of a commit: the group's own ledgers are committed
/// again, unchanged, and read back.
async fn keeps_ledgers(
    consumer: &std::sync::Arc<StreamConsumer>,
    topic: &str,
    ledgers: &[Ledger],
) -> Result<bool, MoveError> {
    let mut tpl = TopicPartitionList::new();
    for (p, l) in ledgers.iter().enumerate() {
        let mut e = tpl.add_partition(topic, i32::try_from(p).unwrap_or(i32::MAX));
        e.set_offset(Offset::Offset(l.committed))
            .map_err(MoveError::of)?;
        e.set_metadata(l.encode());
    }
    let c = std::sync::Arc::clone(consumer);
    let t = topic.to_owned();
    let n = ledgers.len();
    tokio::task::spawn_blocking(move || {
        c.commit(&tpl, CommitMode::Sync)?;
        let mut ask = TopicPartitionList::new();
        for p in 0..n {
            ask.add_partition(&t, i32::try_from(p).unwrap_or(i32::MAX));
        }
        let got = c.committed_offsets(ask, CONNECT_TIMEOUT)?;
        Ok::<_, rdkafka::error::KafkaError>(
            got.elements()
                .iter()
                .all(|e| e.metadata().starts_with(LEDGER_PREFIX)),
        )
    })
    .await
    .map_err(MoveError::of)?
    .map_err(|e| {
        MoveError(format!(
            "committing the redrive group's offsets on `{topic}`: {e}"
        ))
    })
}

/// The members of `group` (none: nobody holds it).
async fn members(
    admin: &std::sync::Arc<super::ffi::Admin>,
    group: &str,
) -> Result<Vec<String>, MoveError> {
    let c = std::sync::Arc::clone(admin);
    let g = group.to_owned();
    let names = tokio::task::spawn_blocking(move || {
        c.inner()
            .fetch_group_list(Some(&g), CONNECT_TIMEOUT)
            .map(|list| {
                list.groups()
                    .iter()
                    .flat_map(|g| g.members())
                    .map(|m| match (m.client_id(), m.client_host()) {
                        ("", "") => "(a member the broker does not name)".to_owned(),
                        (id, host) => format!("{id} ({host})"),
                    })
                    .collect::<Vec<String>>()
            })
    })
    .await
    .map_err(MoveError::of)?
    .map_err(|e| MoveError(format!("describing the consumer group `{group}`: {e}")))?;
    Ok(names)
}

/// The copy's headers: Spring's exception and retry headers dropped, then those `rules` shed
/// (`deadLetter.redrive` and the default list), `dlq-redrive-count` + 1.
fn copy_headers(
    h: Option<&rdkafka::message::BorrowedHeaders>,
    rules: &HeaderRules,
    edit: &Edit,
    stamp: &str,
) -> OwnedHeaders {
    let mut count: u32 = 0;
    let mut out = OwnedHeaders::new();
    // `--transform`: removed and changed names leave (every occurrence); the changed ones
    // come back once, with the program's text.
    let set = edit.set.iter().map(|(k, v)| Header {
        key: k.as_str(),
        value: Some(v.as_bytes()),
    });
    let kept = h
        .map(|h| h.iter().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|x| {
            !edit.removed.iter().any(|r| r == x.key) && !edit.set.iter().any(|(k, _)| k == x.key)
        });
    for x in kept.chain(set) {
        if x.key.eq_ignore_ascii_case(REDRIVE_COUNT) {
            count = x
                .value
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            continue;
        }
        if x.key.eq_ignore_ascii_case(REDRIVE_RUN) {
            continue;
        }
        if DROP.iter().any(|d| x.key.starts_with(d)) || rules.sheds(x.key) {
            continue;
        }
        out = out.insert(Header {
            key: x.key,
            value: x.value,
        });
    }
    let n = (count + 1).to_string();
    let out = out.insert(Header {
        key: REDRIVE_COUNT,
        value: Some(n.as_bytes()),
    });
    if stamp.is_empty() {
        return out;
    }
    out.insert(Header {
        key: REDRIVE_RUN,
        value: Some(stamp.as_bytes()),
    })
}

impl Reader {
    /// The watermarks of one topic (for the mover's end of run).
    pub(super) async fn dlt_marks(
        &self,
        topic: &str,
        partitions: usize,
    ) -> Result<Vec<(i64, i64)>, super::KafkaError> {
        let topics = BTreeMap::from([(topic, partitions)]);
        let mut all = self.watermarks(&topics).await?;
        Ok(all.remove(topic).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Run {
        Run {
            to: redrive::Destination {
                name: "main".into(),
                source: true,
                ..redrive::Destination::default()
            },
            select: redrive::Selection::default(),
            rate: None,
            stop: std::sync::Arc::default(),
            tally: std::sync::Arc::default(),
            holder: "me@here pid 1".into(),
            allow_unowned: false,
            service_task: false,
            archive: None,
            copies: std::sync::Arc::default(),
            keep_lock: false,
        }
    }

    #[test]
    fn a_run_that_stopped_short_says_where_and_is_incomplete() {
        let ends: BTreeMap<i32, i64> = [(0, 10), (1, 5), (2, 0)].into_iter().collect();
        // Partition 0 read to its end; partition 1 only to offset 2 (no record came).
        let seen: BTreeMap<i32, i64> = [(0, 9), (1, 2)].into_iter().collect();
        let r = run();
        incomplete(
            &r,
            "t-dlt",
            &ends,
            &seen,
            &BTreeMap::new(),
            &BTreeMap::new(),
        );
        assert_eq!(
            r.tally.incomplete_reasons(),
            [
                "`t-dlt` was not read to the end it had at the start (no record came for 3s): partition 1 from offset 3 to 5; run again"
            ]
        );
        // Without a ledger, a partition stopped at a record left behind with records after it.
        let seen: BTreeMap<i32, i64> = [(0, 9), (1, 4)].into_iter().collect();
        let blocked: BTreeMap<i32, (i64, u64)> = [(0, (3, 6)), (1, (4, 0))].into_iter().collect();
        let r = run();
        incomplete(&r, "t-dlt", &ends, &seen, &BTreeMap::new(), &blocked);
        let why = r.tally.incomplete_reasons();
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(
            why[0].starts_with("6 record(s) of `t-dlt` not examined")
                && why[0].contains("partition 0 at offset 3 (6 after it)")
                && !why[0].contains("partition 1"),
            "{why:?}"
        );
        // Everything read, nothing blocked: complete.
        let r = run();
        incomplete(
            &r,
            "t-dlt",
            &ends,
            &seen,
            &BTreeMap::new(),
            &BTreeMap::new(),
        );
        assert!(r.tally.incomplete_reasons().is_empty());
    }
}
