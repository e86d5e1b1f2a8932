//! Kafka: the live fixture (the inventory example under a random channel name, its topics
//! deleted on drop) and the admin client the tests use as an operator would: rdkafka's
//! AdminClient, and IncrementalAlterConfigs through dlqctl's wrapper (rdkafka has none).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dlqctl::backend::kafka::ffi::{self, Admin, ConfigOp};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};

use super::block;
use super::workspace::{Endpoints, Workspace};

/// An rdkafka producer (or any client made from a config) on the local broker, with
/// `settings` on top: the third-party client the tests produce with, as an application would.
pub fn producer<P: rdkafka::config::FromClientConfig>(settings: &[(&str, &str)]) -> P {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", super::kafka_bootstrap());
    for (k, v) in settings {
        config.set(*k, *v);
    }
    config.create().expect("producer")
}

/// The inventory example named as docs/kafka.md's Spring application names its topics:
/// `maxAttempts(5)`, `exponentialBackoff(1_000, 2, 16_000)`, `retryTopicSuffix(".retry")`,
/// `dltSuffix(".dlt")`, `suffixTopicsWithIndexValues()`; `more` ends the naming block.
pub fn with_index_naming(spec: String, more: &str) -> String {
    spec.replace("    maxAttempts: 4\n", "    maxAttempts: 5\n")
        .replace(
            "backoff: {initial: 1s, multiplier: 2, max: 4s}",
            "backoff: {initial: 1s, multiplier: 2, max: 16s}",
        )
        .replace(
            "naming: spring",
            &format!("naming: index\n    retryTopicSuffix: .retry\n    dltSuffix: .dlt{more}"),
        )
}

/// A consumer of `group` on the local broker that commits only when told (no auto-commit),
/// with `settings` on top: how the tests read, commit and ask for offsets as a third party.
pub fn consumer(group: &str, settings: &[(&str, &str)]) -> BaseConsumer {
    let mut all = vec![("group.id", group), ("enable.auto.commit", "false")];
    all.extend_from_slice(settings);
    producer(&all)
}

/// The DLT's depth as `status` counts it: the records after the redrive group's position
/// (what the group has not committed yet).
pub fn waiting(ws: &Workspace) -> u64 {
    let out = ws.run(&["status", "channel.yaml", "--format", "json", "--no-peek"]);
    out.json("status")["channels"][0]["deadLetter"]["depth"]
        .as_u64()
        .expect("depth")
}

/// Commits `offset` for `group` on one partition of `topic`, as the group's consumer would.
pub fn commit(topic: &str, group: &str, partition: i32, offset: i64) {
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, rdkafka::Offset::Offset(offset))
        .expect("tpl");
    consumer(group, &[])
        .commit(&tpl, CommitMode::Sync)
        .expect("commit the group's offset");
}

/// The committed offsets of `group` on the partitions of `topic` (0 where none).
pub fn committed_offsets(topic: &str, group: &str, partitions: i32) -> Vec<i64> {
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = consumer(group, &[])
        .committed_offsets(tpl, Duration::from_secs(10))
        .expect("committed offsets");
    (0..partitions)
        .map(|p| match got.find_partition(topic, p).map(|e| e.offset()) {
            Some(rdkafka::Offset::Offset(n)) => n,
            _ => 0,
        })
        .collect()
}

/// A workspace with a channel on the `local-kafka` target; deletes its topics on drop.
pub struct Fixture {
    ws: Workspace,
}

impl Fixture {
    pub fn new() -> Option<Self> {
        up().then(|| Fixture {
            ws: Workspace::new("inventory-kafka.yaml", "inventory.t", &Endpoints::default()),
        })
    }

    /// The live topics of this channel, with their partition counts.
    pub fn topics(&self) -> BTreeMap<String, usize> {
        topics(&self.channel)
    }

    pub fn main(&self) -> String {
        self.channel.clone()
    }
}

fixture_face!(Fixture);

impl Drop for Fixture {
    fn drop(&mut self) {
        delete_prefixed(&self.channel);
    }
}

/// Whether the broker answers (the live rule: skip loudly, or fail when required).
pub fn up() -> bool {
    super::require(
        &format!("Kafka ({})", broker()),
        super::tcp_up(&super::kafka_bootstrap()),
    )
}

/// The broker the tests run on, as `scripts/stack env` says (`DLQCTL_KAFKA_BROKER`):
/// `apache-kafka`, or `tansu` where no JVM could run it (the fallback).
pub fn broker() -> String {
    super::var("DLQCTL_KAFKA_BROKER", "apache-kafka")
}

/// Whether the tests run on the tansu fallback.
pub fn on_tansu() -> bool {
    broker() == "tansu"
}

/// For a test of behaviour only Apache Kafka has (`what`, naming what tansu 0.6.0 lacks):
/// true on Apache Kafka and when the broker answers. On the tansu fallback a loud skip, or a
/// failure under CI=true, where the Kafka tests must have run on Apache Kafka.
pub fn apache_kafka(what: &str) -> bool {
    if !on_tansu() {
        return up();
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what}: this needs Apache Kafka, and CI=true runs on tansu (scripts/stack: DLQCTL_KAFKA)"
    );
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "\n*** SKIPPED on tansu (the fallback broker): {what}; `scripts/stack up` with java 17+ runs Apache Kafka ***\n"
        );
    }
    false
}

/// An operator's admin client (never auto-creates topics).
pub fn admin() -> Arc<Admin> {
    let admin: Admin = ClientConfig::new()
        .set("bootstrap.servers", super::kafka_bootstrap())
        .set("allow.auto.create.topics", "false")
        .create()
        .expect("admin client");
    Arc::new(admin)
}

/// The live topics whose names start with `prefix`, with their partition counts.
pub fn topics(prefix: &str) -> BTreeMap<String, usize> {
    let md = admin()
        .inner()
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("metadata");
    md.topics()
        .iter()
        .filter(|t| t.name().starts_with(prefix) && t.error().is_none())
        .map(|t| (t.name().to_owned(), t.partitions().len()))
        .collect()
}

/// A topic to create by hand: name, partitions, configs.
pub type TopicSpec<'a> = (&'a str, i32, &'a [(&'a str, &'a str)]);

/// CreateTopics by hand (replication factor 1); every topic must be created, and seen.
///
/// Like [`alter`], the call returns once the controller committed the topics, while the
/// broker that answers Metadata learns them from the metadata log a moment later: on a loaded
/// machine the next command's listing had not seen them yet, and an import found nothing (CI,
/// 2026-12-03). So this waits, bounded by 10 s, until a Metadata listing shows every topic with
/// its partitions, and panics naming the ones it never saw.
pub fn create_topics(specs: &[TopicSpec]) {
    let news: Vec<NewTopic> = specs
        .iter()
        .map(|(name, partitions, configs)| {
            let mut t = NewTopic::new(name, *partitions, TopicReplication::Fixed(1));
            for (k, v) in *configs {
                t = t.set(k, v);
            }
            t
        })
        .collect();
    let refs: Vec<&NewTopic> = news.iter().collect();
    for r in block(admin().create_topics(refs, &AdminOptions::new())).expect("CreateTopics") {
        r.unwrap_or_else(|(t, e)| panic!("{t}: {e}"));
    }
    let unseen = |live: &BTreeMap<String, usize>| -> Vec<String> {
        specs
            .iter()
            .filter(|(name, partitions, _)| {
                live.get(*name).copied() != usize::try_from(*partitions).ok()
            })
            .map(|(name, _, _)| (*name).to_owned())
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let missing = unseen(&topics(""));
        if missing.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "created but not listed by Metadata within 10 s: {missing:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// DeleteTopics by hand; the request must be answered.
pub fn delete_topics(names: &[&str]) {
    block(admin().delete_topics(names, &AdminOptions::new())).expect("delete");
}

/// Deletes every topic whose name starts with `prefix` (best effort).
pub fn delete_prefixed(prefix: &str) {
    let names: Vec<String> = topics(prefix).into_keys().collect();
    if !names.is_empty() {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let _ = block(admin().delete_topics(&refs, &AdminOptions::new()));
    }
}

/// A config change made by hand, through IncrementalAlterConfigs, and seen: the call
/// returns once the controller committed it, while the broker that answers DescribeConfigs
/// applies it from the metadata log a moment later (on a loaded machine, after the next
/// command's plan had already read the old value: CI, 2026-12-02). So this waits, bounded by
/// 10 s, until DescribeConfigs shows the set value, or (a deletion) a value other than before.
pub fn alter(topic: &str, op: ConfigOp) {
    let key = op.key().to_owned();
    let before = topic_config(topic, &key);
    let want = match &op {
        ConfigOp::Set { value, .. } => Some(value.clone()),
        ConfigOp::Delete { .. } => None,
    };
    let answers = block(ffi::incremental_alter_topic_configs(
        &admin(),
        &[(topic.to_owned(), vec![op])],
        Duration::from_secs(10),
    ))
    .expect("IncrementalAlterConfigs");
    for (t, r) in answers {
        r.unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let now = topic_config(topic, &key);
        let seen = match &want {
            Some(v) => now.as_ref() == Some(v),
            None => now != before,
        };
        if seen {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One config of a topic as the broker reports it (DescribeConfigs by hand, rdkafka's).
pub fn topic_config(topic: &str, key: &str) -> Option<String> {
    let resource = rdkafka::admin::ResourceSpecifier::Topic(topic);
    let answers = block(admin().describe_configs([&resource], &AdminOptions::new()))
        .expect("DescribeConfigs");
    let config = answers
        .into_iter()
        .next()
        .expect("one answer")
        .unwrap_or_else(|e| panic!("{topic}: {e:?}"));
    config.get(key).and_then(|e| e.value.clone())
}

pub fn set(key: &str, value: &str) -> ConfigOp {
    ConfigOp::Set {
        key: key.into(),
        value: value.into(),
    }
}

/// Every record of `topic` from the start of each partition, read by assignment as a third
/// party (no group joined, nothing committed): (partition, offset, body). Reads until it has
/// `want`, then `settle` longer for anything beyond (a record nobody should have written);
/// bounded by 90 s.
pub fn read_from_start(
    topic: &str,
    partitions: i32,
    want: usize,
    settle: Duration,
) -> Vec<(i32, i64, String)> {
    use rdkafka::Message;
    let consumer = consumer("dlqctl-tests-reader", &[]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .expect("tpl");
    }
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let mut last = std::time::Instant::now();
    while std::time::Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let body = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                out.push((m.partition(), m.offset(), body));
                last = std::time::Instant::now();
            }
            _ if out.len() >= want && last.elapsed() >= settle => break,
            _ => {}
        }
    }
    out
}

/// A third party reading a topic as it fills (a group of its own, from the earliest offset,
/// nothing committed): each [`Tail::take`] returns the records that arrived since the last.
pub struct Tail {
    consumer: BaseConsumer,
}

impl Tail {
    /// Subscribed to `topic` in the group `group` (a fresh one per test).
    pub fn new(topic: &str, group: &str) -> Tail {
        let consumer = consumer(group, &[("auto.offset.reset", "earliest")]);
        consumer.subscribe(&[topic]).expect("subscribe");
        Tail { consumer }
    }

    /// The next `want` records (within 30 s): body and headers (values as text); then
    /// panics, naming it, on any record that comes within 2 s more (one nobody should have
    /// written).
    pub fn take(&self, want: usize) -> Vec<(Vec<u8>, BTreeMap<String, String>)> {
        use rdkafka::Message;
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while out.len() < want && std::time::Instant::now() < deadline {
            if let Some(Ok(m)) = self.consumer.poll(Duration::from_millis(200)) {
                out.push((m.payload().unwrap_or_default().to_vec(), headers_text(&m)));
            }
        }
        if let Some(Ok(m)) = self.consumer.poll(Duration::from_secs(2)) {
            panic!("an unexpected record at {}/{}", m.partition(), m.offset());
        }
        out
    }
}

/// A record's headers by name, their values as text (lossy: as a reader prints them).
pub fn headers_text(m: &impl rdkafka::Message) -> BTreeMap<String, String> {
    use rdkafka::message::Headers;
    m.headers()
        .map(|h| {
            h.iter()
                .map(|x| {
                    (
                        x.key.to_owned(),
                        String::from_utf8_lossy(x.value.unwrap_or_default()).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}
