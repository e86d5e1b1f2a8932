//! Kafka's status door: depth from partition watermarks (and the dead-letter topic's consumer
//! group, when the spec names one), samples and the oldest age from the head of every
//! partition.
//!
//! What a read does to a record (docs/kafka.md, "status"): nothing. Records are read by a
//! consumer that is assigned partitions directly: it never joins a consumer group and never
//! commits an offset (its `group.id`, [`PEEK_GROUP`], is there because librdkafka asks for
//! one), so no group's position moves. The committed
//! offsets of `deadLetter.consumerGroup` are fetched (OffsetFetch) without joining it.
//! Without a consumer group the depth is what the topic retains (high − low watermark),
//! labelled "retained", not "waiting"; once `dlqctl redrive` brought records back, those are
//! not counted, and the depth is labelled "waiting" (for a redrive), with a note that says
//! how many the topic retains.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message as _};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use super::ledger::Ledger;
use super::read::Reader;
use super::{KafkaError, TIMEOUT, topic_error};

use crate::spec::resolve::Resolved;
use crate::status::{Depth, Measure, Message, Observed, QueueDepth, ReadOptions};

/// How long sample reads of one topic may take in all.
const READ_DEADLINE: Duration = Duration::from_secs(10);

/// The group.id of the reading consumer: librdkafka needs one to assign partitions; the
/// consumer never joins it (it is assigned, not subscribed) and never commits.
pub const PEEK_GROUP: &str = "dlqctl-status-reader";

/// Low and high watermark of each partition.
type Marks = Vec<(i64, i64)>;

impl Reader {
    async fn channel_status(
        &self,
        r: &Resolved,
        read: ReadOptions,
        all: &BTreeMap<String, Marks>,
        since: &Since,
    ) -> Result<Observed, KafkaError> {
        let others = std::iter::once((r.main.as_str(), "main"))
            .chain(r.retry_stages.iter().map(|s| (s.name.as_str(), "retry")))
            .map(|(name, role)| QueueDepth {
                name: name.to_owned(),
                role,
                depth: all.get(name).map_or_else(Depth::missing, |m| {
                    Depth::total(retained(m), Measure::Retained)
                }),
            })
            .collect();
        let Some(marks) = all.get(&r.dead_letter) else {
            return Ok(Observed::missing(others));
        };
        // Where reading starts in each partition: the group's committed offset, else the
        // first record retained.
        let group = r.dead_letter_group.as_ref().filter(|_| !read.redrive_view);
        let (ledgers, measure) = match group {
            Some(group) => (
                self.committed(&r.dead_letter, group, marks).await?,
                Measure::Waiting,
            ),
            // What `dlqctl redrive` already brought back is behind its group's offset: not
            // counted (one OffsetFetch, only for a topic that holds records).
            None if retained(marks) > 0 => (
                self.committed(&r.dead_letter, &super::ledger::group(&r.channel), marks)
                    .await?,
                Measure::Retained,
            ),
            None => (
                marks
                    .iter()
                    .map(|(low, _)| Ledger {
                        committed: *low,
                        ..Ledger::default()
                    })
                    .collect(),
                Measure::Retained,
            ),
        };
        let total: u64 = marks
            .iter()
            .zip(&ledgers)
            .map(|((_, high), l)| l.waiting(*high))
            .sum();
        let kept = retained(marks);
        let mut notes = Vec::new();
        // Records the redrive group already brought back are not counted: then the figure
        // is what waits for a redrive, not what the topic retains (which the note says).
        let measure = if measure == Measure::Retained && total < kept {
            notes.push(format!(
                "the topic retains {kept} record{}; {} of them were brought back by `dlqctl redrive` (group `{}`) and are not counted: the depth is what waits for a redrive",
                if kept == 1 { "" } else { "s" },
                kept - total,
                super::ledger::group(&r.channel)
            ));
            Measure::Waiting
        } else {
            measure
        };
        let mut observed = Observed {
            dead_letter: Depth::total(total, measure),
            others,
            messages: Vec::new(),
            head_first: true,
            metric_age_seconds: None,
            notes,
            flow: flow_of(r, all, since, read),
        };
        if total > 0 && read.scan > 0 {
            observed.messages = self.sample(&r.dead_letter, marks, &ledgers, read).await?;
        }
        Ok(observed)
    }

    /// Low and high watermark of every partition of `topics`, in two ListOffsets requests
    /// for all of them (earliest, latest) rather than one per partition.
    pub(super) async fn watermarks(
        &self,
        topics: &BTreeMap<&str, usize>,
    ) -> Result<BTreeMap<String, Marks>, KafkaError> {
        if topics.is_empty() {
            return Ok(BTreeMap::new());
        }
        self.stats.count("kafka:ListOffsets");
        self.stats.count("kafka:ListOffsets");
        let wanted: Vec<(String, usize)> =
            topics.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect();
        let failed = |e: super::ffi::CallError| KafkaError::Connect {
            bootstrap: self.bootstrap.clone(),
            reason: e.to_string(),
        };
        let low =
            super::ffi::list_offsets(&self.admin, &wanted, super::ffi::End::Earliest, TIMEOUT)
                .await
                .map_err(failed)?;
        let high = super::ffi::list_offsets(&self.admin, &wanted, super::ffi::End::Latest, TIMEOUT)
            .await
            .map_err(failed)?;
        let mut out = BTreeMap::new();
        for (t, n) in &wanted {
            let mut marks = Vec::with_capacity(*n);
            for p in 0..*n {
                let p = i32::try_from(p).unwrap_or(i32::MAX);
                let key = (t.clone(), p);
                match (low.get(&key), high.get(&key)) {
                    (Some(l), Some(h)) if *l >= 0 && *h >= 0 => marks.push((*l, (*h).max(*l))),
                    _ => {
                        return Err(KafkaError::Connect {
                            bootstrap: self.bootstrap.clone(),
                            reason: format!(
                                "topic `{t}` partition {p}: no offsets in the ListOffsets answer"
                            ),
                        });
                    }
                }
            }
            out.insert(t.clone(), marks);
        }
        Ok(out)
    }

    /// Each partition's first offset at or after `now - window`, for every topic: one
    /// ListOffsets by timestamp (status's window; the exporter asks for none).
    async fn offsets_since(
        &self,
        topics: &BTreeMap<&str, usize>,
        window: Duration,
    ) -> Result<Since, KafkaError> {
        if topics.is_empty() {
            return Ok(Since::new());
        }
        self.stats.count("kafka:ListOffsets");
        let wanted: Vec<(String, usize)> =
            topics.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect();
        let start = crate::status::now_ms() - i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        super::ffi::list_offsets(&self.admin, &wanted, super::ffi::End::At(start), TIMEOUT)
            .await
            .map_err(|e| KafkaError::Connect {
                bootstrap: self.bootstrap.clone(),
                reason: e.to_string(),
            })
    }

    async fn committed(
        &self,
        topic: &str,
        group: &str,
        marks: &Marks,
    ) -> Result<Vec<Ledger>, KafkaError> {
        self.stats.count("kafka:OffsetFetch");
        let commits = super::ffi::list_group_offsets(
            &self.admin,
            group,
            topic,
            marks.len(),
            super::CONNECT_TIMEOUT,
        )
        .await
        .map_err(|e| topic_error(topic, "OffsetFetch", e.detail()))?;
        Ok(super::ledger::ledgers_of(&commits, marks))
    }

    /// Records from the head (`starts`) of every partition that has any: an equal share of
    /// `scan` each, at least one (the head, for the oldest age). Read by assignment, never
    /// by a group; bounded by [`READ_DEADLINE`].
    async fn sample(
        &self,
        topic: &str,
        marks: &[(i64, i64)],
        ledgers: &[Ledger],
        read: ReadOptions,
    ) -> Result<Vec<Message>, KafkaError> {
        self.stats.count("kafka:Fetch");
        let mut config: ClientConfig = (*self.config).clone();
        // librdkafka wants a group.id for any assignment; it is never joined (assign, not
        // subscribe) and never committed to.
        config
            .set("group.id", PEEK_GROUP)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "error");
        // (partition, start, high, records waiting, records already redriven beyond start)
        let nonempty: Vec<(i32, i64, i64, u64, std::collections::BTreeSet<i64>)> = marks
            .iter()
            .zip(ledgers)
            .enumerate()
            .filter(|(_, ((_, high), l))| l.waiting(*high) > 0)
            .filter_map(|(p, ((_, high), l))| {
                Some((
                    i32::try_from(p).ok()?,
                    l.committed,
                    *high,
                    l.waiting(*high),
                    l.moved.clone(),
                ))
            })
            .collect();
        let available: Vec<usize> = nonempty
            .iter()
            .map(|(_, _, _, waiting, _)| usize::try_from(*waiting).unwrap_or(usize::MAX))
            .collect();
        let quota = shares(read.scan, &available);
        let name = topic.to_owned();
        let max_body = read.max_body;
        let records = tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = config.create().map_err(|e| e.to_string())?;
            let mut tpl = TopicPartitionList::new();
            // How many more each partition may give, and where it ends.
            let mut left: BTreeMap<i32, (usize, i64)> = BTreeMap::new();
            let mut skip: BTreeMap<i32, std::collections::BTreeSet<i64>> = BTreeMap::new();
            for ((p, start, high, _, moved), n) in nonempty.iter().zip(quota) {
                tpl.add_partition_offset(&name, *p, Offset::Offset(*start))
                    .map_err(|e| e.to_string())?;
                left.insert(*p, (n, *high));
                skip.insert(*p, moved.clone());
            }
            consumer.assign(&tpl).map_err(|e| e.to_string())?;
            let deadline = Instant::now() + READ_DEADLINE;
            let mut out = Vec::new();
            while left.values().any(|(n, _)| *n > 0) && Instant::now() < deadline {
                match consumer.poll(Duration::from_millis(200)) {
                    None => {}
                    Some(Err(e)) => return Err(e.to_string()),
                    Some(Ok(m)) => {
                        let Some((n, high)) = left.get_mut(&m.partition()) else {
                            continue;
                        };
                        if *n == 0
                            || m.offset() >= *high
                            || skip
                                .get(&m.partition())
                                .is_some_and(|s| s.contains(&m.offset()))
                        {
                            continue;
                        }
                        *n -= 1;
                        out.push(record(&m, max_body));
                    }
                }
            }
            Ok::<_, String>(out)
        })
        .await
        .map_err(|e| topic_error(topic, "Fetch", format!("the reading thread failed: {e}")))?
        .map_err(|m| topic_error(topic, "Fetch", m))?;
        let mut records = records;
        // Oldest first across partitions, as they entered the topic.
        records.sort_by(|a, b| a.published_ms.cmp(&b.published_ms).then(a.id.cmp(&b.id)));
        Ok(records)
    }
}

/// How many records to read of each partition, `available` waiting in each: `scan` shared as
/// evenly as it goes, a partition holding less than its share leaving the rest to the others
/// (so a scan as large as the topic reads all of it, however its records are spread), and at
/// least one each (the head, for the oldest age).
fn shares(scan: usize, available: &[usize]) -> Vec<usize> {
    let mut out = vec![0; available.len()];
    let mut order: Vec<usize> = (0..available.len()).collect();
    order.sort_by_key(|&i| available[i]);
    let mut budget = scan;
    for (k, i) in order.into_iter().enumerate() {
        let share = (budget / (available.len() - k)).max(1);
        out[i] = share.min(available[i]);
        budget = budget.saturating_sub(out[i]);
    }
    out
}

/// The offset of each partition's first record at or after the window's start, by topic
/// (one ListOffsets by timestamp for every topic; empty without a window).
type Since = BTreeMap<(String, i32), i64>;

/// How the flow is counted, for the JSON document.
const BASIS: &str = "kafka: end offsets of the dead-letter and main topics, summed over partitions; the window by ListOffsets at its start";

/// What entered a topic: the sum of its partitions' end offsets (every record ever
/// appended, whatever retention removed since), and over the window, the records whose
/// timestamp is in it (a partition with none that recent counts 0).
fn entered(topic: &str, marks: &Marks, since: &Since) -> (u64, Option<u64>) {
    let total = marks
        .iter()
        .map(|(_, high)| u64::try_from(*high).unwrap_or(0))
        .sum();
    let window = (!since.is_empty()).then(|| {
        marks
            .iter()
            .enumerate()
            .map(|(p, (_, high))| {
                let p = i32::try_from(p).unwrap_or(i32::MAX);
                let from = since
                    .get(&(topic.to_owned(), p))
                    .copied()
                    .filter(|o| *o >= 0)
                    .unwrap_or(*high);
                u64::try_from(high - from.min(*high)).unwrap_or(0)
            })
            .sum()
    });
    (total, window)
}

fn flow_of(
    r: &Resolved,
    all: &BTreeMap<String, Marks>,
    since: &Since,
    read: ReadOptions,
) -> crate::status::Flow {
    let dlt = all
        .get(&r.dead_letter)
        .map(|m| entered(&r.dead_letter, m, since));
    let main = all.get(&r.main).map(|m| entered(&r.main, m, since));
    crate::status::Flow {
        dead_lettered_total: dlt.map(|d| d.0),
        source_total: main.map(|m| m.0),
        source: Some(r.main.clone()),
        window: read.rate_window.map(|w| crate::status::FlowWindow {
            seconds: w.as_secs(),
            dead_lettered: dlt.and_then(|d| d.1),
            source: main.and_then(|m| m.1),
        }),
        basis: Some(BASIS),
        periods: Vec::new(),
        settles: false,
    }
}

fn retained(marks: &[(i64, i64)]) -> u64 {
    marks
        .iter()
        .map(|(low, high)| u64::try_from(high - low).unwrap_or(0))
        .sum()
}

/// Spring's numeric headers are big-endian integers, not text.
pub(super) const SPRING_NUMBERS: [&str; 3] = [
    "kafka_dlt-original-partition",
    "kafka_dlt-original-offset",
    "kafka_dlt-original-timestamp",
];

fn header_text(key: &str, v: &[u8]) -> String {
    if SPRING_NUMBERS.contains(&key) {
        match v.len() {
            4 => return i32::from_be_bytes([v[0], v[1], v[2], v[3]]).to_string(),
            8 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(v);
                return i64::from_be_bytes(b).to_string();
            }
            _ => {}
        }
    }
    match std::str::from_utf8(v) {
        Ok(t) => t.to_owned(),
        Err(_) => format!(
            "(binary, {} bytes) {}",
            v.len(),
            v.iter()
                .take(32)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
    }
}

pub(super) fn record(m: &rdkafka::message::BorrowedMessage<'_>, max_body: usize) -> Message {
    let payload = m.payload().unwrap_or_default();
    let headers = m
        .headers()
        .map(|h| {
            h.iter()
                .map(|x| {
                    (
                        x.key.to_owned(),
                        header_text(x.key, x.value.unwrap_or_default()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut properties = vec![
        ("topic".to_owned(), m.topic().to_owned()),
        ("partition".to_owned(), m.partition().to_string()),
        ("offset".to_owned(), m.offset().to_string()),
    ];
    if let Some(t) = m.timestamp().to_millis() {
        properties.push(("timestamp".to_owned(), t.to_string()));
    }
    if let Some(k) = m.key() {
        properties.push(("key".to_owned(), String::from_utf8_lossy(k).into_owned()));
    }
    Message {
        id: format!("{}/{}", m.partition(), m.offset()),
        headers,
        properties,
        body: payload[..payload.len().min(max_body.max(1))].to_vec(),
        body_len: payload.len() as u64,
        published_ms: m.timestamp().to_millis(),
        dead_lettered_ms: None,
        // retention.ms counts from the record's timestamp (a segment goes once its newest
        // record is older than that, so no record goes earlier).
        retained_since_ms: m.timestamp().to_millis(),
        attempts: None,
        source: None,
        native_class: None,
    }
}

impl crate::backend::kit::doors::Status for Reader {
    /// Depth of each channel's topics, samples of its dead-letter topic. The outer error: the
    /// cluster could not be read at all.
    async fn status(
        &self,
        channels: &[&Resolved],
        read: ReadOptions,
    ) -> Result<Vec<Result<Observed, KafkaError>>, KafkaError> {
        let meta = self.metadata().await?;
        let mut topics: BTreeMap<&str, usize> = BTreeMap::new();
        for r in channels {
            let names = std::iter::once(r.main.as_str())
                .chain(r.retry_stages.iter().map(|s| s.name.as_str()))
                .chain(std::iter::once(r.dead_letter.as_str()));
            for name in names {
                if let Some(m) = meta.get(name) {
                    topics.insert(name, m.partitions);
                }
            }
        }
        let marks = self.watermarks(&topics).await?;
        let since = match read.rate_window {
            Some(w) => self.offsets_since(&topics, w).await?,
            None => Since::new(),
        };
        let mut out = Vec::with_capacity(channels.len());
        for r in channels {
            out.push(self.channel_status(r, read, &marks, &since).await);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37: a scan as large as the topic reads every record, however unevenly the
    /// producer spread them (a sticky partitioner), and never more than `scan` but for the
    /// one head of each partition.
    #[test]
    fn the_scan_is_shared_by_what_each_partition_holds() {
        assert_eq!(shares(200, &[100, 60, 40]), vec![100, 60, 40]);
        assert_eq!(shares(200, &[120, 60, 20]), vec![120, 60, 20]);
        assert_eq!(shares(90, &[120, 60, 20]), vec![35, 35, 20]);
        assert_eq!(shares(6, &[100, 1, 1]), vec![4, 1, 1]);
        assert_eq!(shares(2, &[5, 5, 5]), vec![1, 1, 1]);
        assert_eq!(shares(0, &[]), Vec::<usize>::new());
    }

    #[test]
    fn spring_numeric_headers_are_read_as_numbers_and_other_binary_as_hex() {
        assert_eq!(
            header_text("kafka_dlt-original-partition", &7i32.to_be_bytes()),
            "7"
        );
        assert_eq!(
            header_text(
                "kafka_dlt-original-timestamp",
                &1_700_000_000_000i64.to_be_bytes()
            ),
            "1700000000000"
        );
        assert_eq!(header_text("x", &[0xff, 0x00]), "(binary, 2 bytes) ff00");
        assert_eq!(header_text("x", b"text"), "text");
        assert_eq!(retained(&[(2, 5), (0, 0), (10, 11)]), 4);
    }
}
