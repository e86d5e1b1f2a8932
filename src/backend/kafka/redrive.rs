//! Kafka's mover: brings dead letters back from the dead-letter topic to the main topic, at
//! least once, never lost.
//!
//! The contract (docs/kafka.md, "redrive"):
//! - records are read by the consumer group `dlqctl-redrive.<channel>`, which is also the
//!   lock: a run refuses to start while the group has members, and names them. Auto-commit is
//!   off; the group's committed offset in a partition moves only past records that were
//!   delivered to the destination (or passed over: not selected, or at `maxRedrives`), so a
//!   later run starts where this one stopped, and `status` counts what is left;
//! - the copy goes to the main topic (or `--to`) through an idempotent producer with
//!   `acks=all`, with the same key and payload and the record's headers minus Spring's
//!   `kafka_dlt-exception-*` and `retry_topic-*` (so the consumer's attempts start again),
//!   plus `dlq-redrive-count` + 1. Its timestamp is the time of the move (an old timestamp
//!   could put it past the main topic's retention at once);
//! - `--limit N` moves exactly N, whatever the number of partitions: once N are moved or in
//!   flight, no further record is taken, and no offset moves past one that was not moved;
//! - records that arrive after the run started are left for the next run.
//!
//! A crash after the destination confirmed a record and before its offset was committed
//! makes the next run move it again: duplicated, never lost. The consumer must be
//! idempotent. Records passed over stay in the topic but are behind the redrive group's
//! offset: `dlqctl status` counts them no more.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message as _, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use super::CONNECT_TIMEOUT;
use super::read::Reader;
use crate::backend::MoveError;
use crate::redrive::{self, Decision, Run};
use crate::spec::resolve::Resolved;
use crate::status::envelope::REDRIVE_COUNT;
use crate::status::now_ms;

/// Records sent before their deliveries are awaited and their offsets committed.
const BATCH: usize = 500;
/// How long to wait for the group's assignment, and for the next record.
const ASSIGN: Duration = Duration::from_secs(30);
const IDLE: Duration = Duration::from_secs(3);
/// Headers the copy does not carry.
const DROP: [&str; 2] = ["kafka_dlt-exception-", "retry_topic-"];

/// The consumer group of redrives of `channel`.
pub fn group(channel: &str) -> String {
    format!("dlqctl-redrive.{channel}")
}

/// The writing capability for records: made only by `dlqctl redrive`.
#[derive(Debug, Clone)]
pub struct Mover {
    reader: Reader,
}

fn err(e: impl std::fmt::Display) -> MoveError {
    MoveError(e.to_string())
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
        let meta = self.reader.metadata().await.map_err(err)?;
        let Some(m) = meta.get(&dlt) else {
            return Err(MoveError(format!("topic `{dlt}` does not exist")));
        };
        if !meta.contains_key(&dest) {
            return Err(MoveError(format!(
                "the destination topic `{dest}` does not exist; nothing was moved"
            )));
        }
        let partitions = m.partitions;
        let marks = self.reader.dlt_marks(&dlt, partitions).await.map_err(err)?;
        let group = group(&r.channel);

        let mut config: ClientConfig = (*self.reader.config).clone();
        config
            .set("group.id", &group)
            .set("client.id", format!("dlqctl-redrive {}", run.holder))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest");
        let consumer: StreamConsumer = config.create().map_err(err)?;
        let consumer = std::sync::Arc::new(consumer);
        if let Some(holders) = members(&consumer, &group).await? {
            return Err(MoveError(format!(
                "topic `{dlt}` is being redriven already: the group `{group}` has member(s) {holders}; wait for them to finish"
            )));
        }
        // Nothing after the group's position: done without joining (a join takes seconds).
        let starts = committed(&consumer, &dlt, &marks).await?;
        let waiting: i64 = marks
            .iter()
            .zip(&starts)
            .map(|((_, high), start)| (high - start).max(0))
            .sum();
        if waiting == 0 {
            return Ok(());
        }
        let mut pconfig: ClientConfig = (*self.reader.config).clone();
        pconfig
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("message.timeout.ms", "30000");
        let producer: FutureProducer = pconfig.create().map_err(err)?;

        consumer.subscribe(&[&dlt]).map_err(err)?;
        // The end of each partition as the run starts: later records wait for the next run.
        let ends: BTreeMap<i32, i64> = marks
            .iter()
            .enumerate()
            .filter_map(|(p, (_, high))| Some((i32::try_from(p).ok()?, *high)))
            .collect();
        let result = self
            .run(&consumer, &producer, &dlt, &dest, &ends, run)
            .await;
        consumer.unsubscribe();
        result
    }

    async fn run(
        &self,
        consumer: &StreamConsumer,
        producer: &FutureProducer,
        dlt: &str,
        dest: &str,
        ends: &BTreeMap<i32, i64>,
        run: &Run,
    ) -> Result<(), MoveError> {
        let mut pace = redrive::Pace::new(run.rate);
        // Per partition, the next offset to commit.
        let mut commit: BTreeMap<i32, i64> = BTreeMap::new();
        let mut finished: BTreeMap<i32, bool> = BTreeMap::new();
        let mut result = Ok(());
        let started = tokio::time::Instant::now();
        'run: loop {
            let mut pending = Vec::new();
            while pending.len() < BATCH {
                if run.done() {
                    break;
                }
                let room = run
                    .select
                    .limit
                    .is_none_or(|l| run.tally.moved() + (pending.len() as u64) < l);
                if !room {
                    break;
                }
                if !ends.is_empty()
                    && ends.iter().all(|(p, end)| {
                        finished.get(p).copied().unwrap_or(false)
                            || commit.get(p).is_some_and(|c| c >= end)
                    })
                {
                    break;
                }
                let wait = if commit.is_empty() && started.elapsed() < ASSIGN {
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
                let end = ends.get(&p).copied().unwrap_or(0);
                if offset >= end {
                    finished.insert(p, true);
                    continue;
                }
                let msg = super::status::record(&m, 0);
                let d = redrive::decide(&run.select, &msg, now_ms());
                run.tally.add(&d);
                if d != Decision::Move {
                    pending.push((p, offset, None));
                    continue;
                }
                pace.wait().await;
                let headers = copy_headers(m.headers());
                let mut record = FutureRecord::to(dest).headers(headers);
                if let Some(k) = m.key() {
                    record = record.key(k);
                }
                if let Some(v) = m.payload() {
                    record = record.payload(v);
                }
                let delivery = producer
                    .send_result(record)
                    .map_err(|(e, _)| MoveError(format!("producing to `{dest}`: {e}")))?;
                pending.push((p, offset, Some(delivery)));
            }
            if pending.is_empty() {
                break;
            }
            // In order: a partition's offset moves past a record only when it was delivered
            // (or passed over); the first failure freezes it there and stops the run.
            let mut frozen: BTreeMap<i32, bool> = BTreeMap::new();
            for (p, offset, delivery) in pending {
                if frozen.get(&p).copied().unwrap_or(false) {
                    continue;
                }
                match delivery {
                    None => {
                        commit.insert(p, offset + 1);
                    }
                    Some(f) => match f.await {
                        Ok(Ok(_)) => {
                            run.tally.moved.fetch_add(1, Ordering::Relaxed);
                            commit.insert(p, offset + 1);
                        }
                        Ok(Err((e, _))) => {
                            frozen.insert(p, true);
                            result = Err(MoveError(format!(
                                "the destination `{dest}` refused a record ({e}); it stays in `{dlt}` (partition {p}, offset {offset})"
                            )));
                        }
                        Err(_) => {
                            frozen.insert(p, true);
                            result = Err(MoveError(format!(
                                "the delivery of a record to `{dest}` was cancelled; it stays in `{dlt}` (partition {p}, offset {offset})"
                            )));
                        }
                    },
                }
            }
            let mut tpl = TopicPartitionList::new();
            for (p, o) in &commit {
                tpl.add_partition_offset(dlt, *p, Offset::Offset(*o))
                    .map_err(err)?;
            }
            if tpl.count() > 0 {
                consumer
                    .commit(&tpl, CommitMode::Sync)
                    .map_err(|e| {
                        MoveError(format!(
                            "committing the redrive group's offsets on `{dlt}` ({e}): the records moved in this batch will be moved again by the next run"
                        ))
                    })?;
            }
            if result.is_err() || run.done() {
                break;
            }
        }
        result
    }
}

/// The group's committed offset per partition (the low watermark where it has none).
async fn committed(
    consumer: &std::sync::Arc<StreamConsumer>,
    topic: &str,
    marks: &[(i64, i64)],
) -> Result<Vec<i64>, MoveError> {
    let c = std::sync::Arc::clone(consumer);
    let (t, m) = (topic.to_owned(), marks.to_vec());
    tokio::task::spawn_blocking(move || {
        let mut tpl = TopicPartitionList::new();
        for p in 0..m.len() {
            tpl.add_partition(&t, i32::try_from(p).unwrap_or(i32::MAX));
        }
        let got = c.committed_offsets(tpl, CONNECT_TIMEOUT)?;
        Ok::<_, rdkafka::error::KafkaError>(
            m.iter()
                .enumerate()
                .map(|(p, (low, high))| {
                    let at = got
                        .find_partition(&t, i32::try_from(p).unwrap_or(i32::MAX))
                        .and_then(|e| match e.offset() {
                            Offset::Offset(n) => Some(n),
                            _ => None,
                        });
                    at.map_or(*low, |n| n.clamp(*low, *high))
                })
                .collect(),
        )
    })
    .await
    .map_err(err)?
    .map_err(|e| {
        MoveError(format!(
            "reading the redrive group's offsets on `{topic}`: {e}"
        ))
    })
}

/// The members of `group`, if it has any (`None`: nobody holds it).
async fn members(
    consumer: &std::sync::Arc<StreamConsumer>,
    group: &str,
) -> Result<Option<String>, MoveError> {
    let c = std::sync::Arc::clone(consumer);
    let g = group.to_owned();
    let names = tokio::task::spawn_blocking(move || {
        c.fetch_group_list(Some(&g), CONNECT_TIMEOUT).map(|list| {
            list.groups()
                .iter()
                .flat_map(|g| g.members())
                .map(|m| format!("{} ({})", m.client_id(), m.client_host()))
                .collect::<Vec<String>>()
        })
    })
    .await
    .map_err(err)?
    .map_err(|e| MoveError(format!("describing the consumer group `{group}`: {e}")))?;
    Ok((!names.is_empty()).then(|| names.join(", ")))
}

/// The copy's headers: Spring's exception and retry headers dropped, `dlq-redrive-count` + 1.
fn copy_headers(h: Option<&rdkafka::message::BorrowedHeaders>) -> OwnedHeaders {
    let mut count: u32 = 0;
    let mut out = OwnedHeaders::new();
    for x in h.map(|h| h.iter().collect::<Vec<_>>()).unwrap_or_default() {
        if x.key.eq_ignore_ascii_case(REDRIVE_COUNT) {
            count = x
                .value
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            continue;
        }
        if DROP.iter().any(|d| x.key.starts_with(d)) {
            continue;
        }
        out = out.insert(Header {
            key: x.key,
            value: x.value,
        });
    }
    let n = (count + 1).to_string();
    out.insert(Header {
        key: REDRIVE_COUNT,
        value: Some(n.as_bytes()),
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
