//! Kafka through the admin API (rdkafka, bundled librdkafka): per channel a main topic, one
//! retry topic per distinct delay (named by the channel's naming profile) and a dead-letter
//! topic with at least as many partitions as its source.
//!
//! A topic is compared on its partition count, its replication factor and the config keys the
//! spec owns (`retention.ms` from the retention fields, and the keys of `kafka.config`),
//! against their effective values: whatever the broker reports for the key, set on the topic
//! or inherited. Keys the broker reports at their default are listed under `@defaults`, so the
//! plan does not present hundreds of broker defaults as unmanaged settings. A key the broker
//! does not report at all (tansu reports only explicitly set keys) has the broker's default,
//! whose value dlqctl cannot know: a spec value for it is set explicitly.
//!
//! dlqctl owns a config key while the spec gives it a value; a key removed from the spec keeps
//! its value on the topic (the plan then lists it as an unmanaged setting). A broker that
//! answers DescribeConfigs with only a handful of keys, all marked default (tansu), lists only
//! what was set: those keys count as set, so unmanaged ones are listed too.
//!
//! Reads are batched: one Metadata request (all topics) and one DescribeConfigs request for
//! every topic of the target that exists. Writes: CreateTopics, IncrementalAlterConfigs (see
//! [`ffi`]; plans only SET, since every owned key has a value; DELETE is there for a key that
//! must lose its topic-level value) and CreatePartitions. Fewer partitions and another
//! replication factor are `impossible` in the plan ([`refine`]). Only topics inside the
//! target's ownership prefixes are ever written. A topic is deleted (DeleteTopics) only when
//! `plan --prune` planned it, and, unless message loss is allowed, only while it holds no
//! records ([`Reader::record_count`]).

pub mod ffi;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::types::RDKafkaErrorCode;
use serde_json::{Value, json};

use super::BackendError;
use super::http::Stats;
use crate::plan::{Action, Change};
use crate::resource::{Desired, Kind, Live, Props, ResourceId, Role};
use crate::spec::duration;
use crate::spec::model::{Backend, Target};
use crate::spec::resolve::Resolved;
use ffi::{Admin, ConfigOp, Source};

/// How long one admin request may take before it fails.
pub const TIMEOUT: Duration = Duration::from_secs(15);
/// How long the first request (Metadata) waits for a broker to answer at all.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long apply waits for the brokers to show what it wrote.
pub const SETTLE: Duration = Duration::from_secs(20);

/// librdkafka properties that hold secrets: only `secretProperties` (an environment variable
/// name) may set them, so that they are never written in a targets file.
pub const SECRET_PROPERTIES: [&str; 6] = [
    "sasl.password",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.password",
];

/// Properties dlqctl sets itself.
const FIXED_PROPERTIES: [&str; 2] = ["bootstrap.servers", "allow.auto.create.topics"];

/// The live key listing the config keys a broker reports at their default value.
pub const DEFAULTS_KEY: &str = "@defaults";

/// A Kafka call that failed, said so that the user knows which topic and API.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    #[error(
        "cannot read the cluster at {bootstrap}: {reason}; is Kafka running and `bootstrapServers` right?"
    )]
    Connect { bootstrap: String, reason: String },
    #[error("{0}")]
    Call(#[from] ffi::CallError),
    #[error("topic `{topic}`: {api}: {message}")]
    Topic {
        topic: String,
        api: &'static str,
        message: String,
    },
    #[error(
        "topic `{topic}` is outside the target's ownership prefixes ({prefixes}); dlqctl never changes it"
    )]
    NotOwned { topic: String, prefixes: String },
}

fn topic_error(topic: &str, api: &'static str, message: impl std::fmt::Display) -> KafkaError {
    KafkaError::Topic {
        topic: topic.to_owned(),
        api,
        message: message.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Desired state (pure)
// ---------------------------------------------------------------------------------------------

/// The desired topics of one channel (pure).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(k) = &r.kafka else { return Vec::new() };
    let topic = |name: &str, role: Role, partitions: u32, retention: Option<duration::Duration>| {
        let mut props = Props::new();
        props.insert("partitions".into(), json!(partitions));
        props.insert("replication.factor".into(), json!(k.replication_factor));
        if let Some(t) = retention {
            props.insert("config.retention.ms".into(), json!(t.as_millis()));
        }
        for (key, value) in &k.config {
            props.insert(format!("config.{key}"), normalise_value(value));
        }
        Desired {
            id: topic_id(&r.target, name),
            channel: r.channel.clone(),
            role,
            props,
            immutable: false,
            present: true,
        }
    };
    let mut out = vec![topic(
        &r.dead_letter,
        Role::DeadLetter,
        k.dead_letter_partitions,
        r.dead_letter_retention,
    )];
    // Retry topics keep the main topic's retention: a record may wait there behind a lagging
    // consumer far longer than its delay.
    for stage in &r.retry_stages {
        out.push(topic(&stage.name, Role::Retry, k.partitions, r.retention));
    }
    out.push(topic(&r.main, Role::Main, k.partitions, r.retention));
    out
}

pub fn topic_id(target: &str, name: &str) -> ResourceId {
    ResourceId {
        target: target.to_owned(),
        backend: Backend::Kafka,
        kind: Kind::Topic,
        scope: String::new(),
        name: name.to_owned(),
    }
}

/// The channel (its main topic) and role a topic's name suggests under Spring's naming:
/// `<main>-dlt` / `<main>.DLT` is a dead-letter topic, `<main>-retry[-…]` a retry topic.
pub fn role_by_name(topic: &str) -> (String, Role) {
    for suffix in ["-dlt", ".DLT"] {
        if let Some(main) = topic.strip_suffix(suffix) {
            return (main.to_owned(), Role::DeadLetter);
        }
    }
    if let Some(i) = topic.rfind("-retry") {
        let rest = &topic[i + "-retry".len()..];
        if rest.is_empty() || rest.starts_with('-') {
            return (topic[..i].to_owned(), Role::Retry);
        }
    }
    (topic.to_owned(), Role::Main)
}

/// A config value as compared and shown: whole numbers as numbers, lists without blanks
/// around commas (`compact, delete` = `compact,delete`), everything else as text.
pub fn normalise_value(text: &str) -> Value {
    let t = text.trim();
    let canonical_int = t.parse::<i64>().ok().filter(|n| n.to_string() == t);
    if let Some(n) = canonical_int {
        return json!(n);
    }
    if t.contains(',') {
        return json!(t.split(',').map(str::trim).collect::<Vec<_>>().join(","));
    }
    json!(t)
}

/// A desired or live value as Kafka takes it (text).
fn config_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Plan rules (pure)
// ---------------------------------------------------------------------------------------------

/// Kafka's rules for a planned update: fewer partitions and another replication factor cannot
/// be made in place; lower retention, and compaction, drop records by themselves.
pub fn refine(change: &mut Change) {
    if change.action != Action::Update {
        return;
    }
    let mut impossible = Vec::new();
    let mut destructive = Vec::new();
    for f in &change.fields {
        let old = f.old.as_ref().and_then(Value::as_i64);
        let new = f.new.as_ref().and_then(Value::as_i64);
        match f.key.as_str() {
            "partitions" => {
                if let (Some(old), Some(new)) = (old, new)
                    && new < old
                {
                    impossible.push(format!(
                        "Kafka cannot remove partitions ({old} → {new}); keep {old} in the spec, or create a new topic and move producers and consumers to it"
                    ));
                }
            }
            "replication.factor" => impossible.push(format!(
                "changing the replication factor ({} → {}) needs a partition reassignment (kafka-reassign-partitions.sh, or the AlterPartitionReassignments API), which this version of dlqctl does not do; reassign by hand, then plan again",
                show(f.old.as_ref()),
                show(f.new.as_ref())
            )),
            "config.retention.ms" | "config.retention.bytes" => {
                let shorter = match (old, new) {
                    (Some(o), Some(n)) => n >= 0 && (o < 0 || n < o),
                    _ => false,
                };
                if shorter {
                    let what = if f.key.ends_with(".ms") {
                        let d = |ms: i64| duration::Duration::from_millis(ms.unsigned_abs()).to_string();
                        let from = old.filter(|o| *o >= 0).map_or("unlimited".to_owned(), d);
                        format!("lowering retention.ms from {from} to {} deletes the records older than that", d(new.unwrap_or(0)))
                    } else {
                        "lowering retention.bytes deletes the oldest records beyond the new size".to_owned()
                    };
                    destructive.push(what);
                }
            }
            "config.cleanup.policy" => {
                let compacts = |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| s.contains("compact"));
                if compacts(f.new.as_ref()) && !compacts(f.old.as_ref()) {
                    destructive.push("compaction keeps only the latest record of each key".to_owned());
                }
            }
            _ => {}
        }
    }
    if !impossible.is_empty() {
        change.action = Action::Impossible;
        change.reason = Some(impossible.join("; "));
    } else if !destructive.is_empty() {
        change.destructive = Some(destructive.join("; "));
    }
}

fn show(v: Option<&Value>) -> String {
    v.map_or("(absent)".to_owned(), Value::to_string)
}

/// One admin request an update needs, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Topic configs: SET for a value, DELETE for a key that must lose its topic-level value.
    AlterConfigs(Vec<ConfigOp>),
    /// Grow to this many partitions in total.
    CreatePartitions(usize),
}

/// What an update of a topic takes: config changes first (they can be undone), then new
/// partitions (they cannot). Refuses what [`refine`] makes impossible.
pub fn update_steps(change: &Change) -> Result<Vec<Step>, String> {
    let mut ops = Vec::new();
    let mut grow = None;
    for f in &change.fields {
        if let Some(key) = f.key.strip_prefix("config.") {
            ops.push(match &f.new {
                Some(v) => ConfigOp::Set {
                    key: key.to_owned(),
                    value: config_text(v),
                },
                None => ConfigOp::Delete {
                    key: key.to_owned(),
                },
            });
            continue;
        }
        match f.key.as_str() {
            "partitions" => {
                let old = f.old.as_ref().and_then(Value::as_u64).unwrap_or(0);
                let new = f.new.as_ref().and_then(Value::as_u64).unwrap_or(0);
                if new < old {
                    return Err(format!("cannot remove partitions ({old} → {new})"));
                }
                grow = Some(
                    usize::try_from(new).map_err(|_| format!("{new} partitions is too many"))?,
                );
            }
            other => return Err(format!("`{other}` cannot be changed in place")),
        }
    }
    let mut steps = Vec::new();
    if !ops.is_empty() {
        steps.push(Step::AlterConfigs(ops));
    }
    if let Some(n) = grow {
        steps.push(Step::CreatePartitions(n));
    }
    Ok(steps)
}

// ---------------------------------------------------------------------------------------------
// Live state
// ---------------------------------------------------------------------------------------------

/// The settings of one target that make a client, minus secrets.
fn client_config(name: &str, target: &Target) -> Result<(ClientConfig, String), BackendError> {
    let config_error = |message: String| BackendError::Config {
        target: name.to_owned(),
        message,
    };
    let bootstrap = target
        .bootstrap_servers
        .clone()
        .ok_or_else(|| config_error("no `bootstrapServers`".into()))?;
    let mut config = ClientConfig::new();
    config.set("client.id", "dlqctl");
    for (key, value) in target.properties.iter().flatten() {
        if SECRET_PROPERTIES.contains(&key.as_str()) {
            return Err(config_error(format!(
                "`properties.{key}` holds a secret: name the environment variable that holds it under `secretProperties` instead"
            )));
        }
        if FIXED_PROPERTIES.contains(&key.as_str()) {
            return Err(config_error(format!(
                "`properties.{key}` is set by dlqctl (bootstrapServers; topics are never auto-created)"
            )));
        }
        config.set(key, value);
    }
    for (key, var) in target.secret_properties.iter().flatten() {
        if FIXED_PROPERTIES.contains(&key.as_str()) {
            return Err(config_error(format!(
                "`secretProperties.{key}` is set by dlqctl"
            )));
        }
        let value = std::env::var(var).map_err(|_| BackendError::MissingEnv {
            target: name.to_owned(),
            field: "secretProperties",
            var: var.clone(),
        })?;
        config.set(key, value);
    }
    config.set("bootstrap.servers", &bootstrap);
    // A metadata request must never create a topic (tansu does unless told).
    config.set("allow.auto.create.topics", "false");
    Ok((config, bootstrap))
}

/// librdkafka's complaint about a property, without the value when it is a secret (its own
/// message quotes the value).
fn describe_config_error(target: &Target, e: &rdkafka::error::KafkaError) -> String {
    match e {
        rdkafka::error::KafkaError::ClientConfig(_, desc, key, _) => {
            let secret = target.secret_properties.as_ref().and_then(|s| s.get(key));
            match secret {
                Some(var) => format!("librdkafka refused property `{key}` (from ${var})"),
                None => format!("librdkafka refused property `{key}`: {desc}"),
            }
        }
        other => format!("cannot create the Kafka client: {other}"),
    }
}

/// Partition count and replication factor of one topic, from Metadata.
#[derive(Debug, Clone, PartialEq)]
struct TopicMeta {
    partitions: usize,
    replication: usize,
}

/// Read-only view of one Kafka target.
#[derive(Clone)]
pub struct Reader {
    pub target: String,
    bootstrap: String,
    admin: Arc<Admin>,
    prefixes: Vec<String>,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the client config: it holds the secret properties.
        f.debug_struct("kafka::Reader")
            .field("target", &self.target)
            .field("bootstrap", &self.bootstrap)
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// Builds the client (it connects on first use).
    pub fn connect(name: &str, target: &Target, stats: Arc<Stats>) -> Result<Self, BackendError> {
        let (config, bootstrap) = client_config(name, target)?;
        let admin: Admin = config.create().map_err(|e| BackendError::Config {
            target: name.to_owned(),
            message: describe_config_error(target, &e),
        })?;
        Ok(Reader {
            target: name.to_owned(),
            bootstrap,
            admin: Arc::new(admin),
            prefixes: target
                .ownership
                .as_ref()
                .map(|o| o.prefixes.clone())
                .unwrap_or_default(),
            stats,
        })
    }

    pub fn owned(&self, topic: &str) -> bool {
        self.prefixes.iter().any(|p| topic.starts_with(p.as_str()))
    }

    /// One Metadata request for every topic of the cluster.
    async fn metadata(&self) -> Result<BTreeMap<String, TopicMeta>, KafkaError> {
        self.stats.count("kafka:Metadata");
        let admin = Arc::clone(&self.admin);
        let read = tokio::task::spawn_blocking(move || {
            let md = admin.inner().fetch_metadata(None, CONNECT_TIMEOUT)?;
            let mut out = BTreeMap::new();
            for t in md.topics() {
                // A topic being created may answer LeaderNotAvailable with its partitions;
                // without partitions it is not (yet) there.
                if t.error().is_some() && t.partitions().is_empty() {
                    continue;
                }
                let replication = t
                    .partitions()
                    .iter()
                    .map(|p| p.replicas().len())
                    .min()
                    .unwrap_or(0);
                out.insert(
                    t.name().to_owned(),
                    TopicMeta {
                        partitions: t.partitions().len(),
                        replication,
                    },
                );
            }
            Ok::<_, rdkafka::error::KafkaError>(out)
        });
        match read.await {
            Ok(Ok(topics)) => Ok(topics),
            Ok(Err(e)) => Err(KafkaError::Connect {
                bootstrap: self.bootstrap.clone(),
                reason: e
                    .rdkafka_error_code()
                    .map_or_else(|| e.to_string(), |c| c.to_string()),
            }),
            Err(e) => Err(KafkaError::Connect {
                bootstrap: self.bootstrap.clone(),
                reason: format!("the metadata thread failed: {e}"),
            }),
        }
    }

    /// Reads the topics `ids` name: existence, partitions and replication factor from one
    /// Metadata request, configs from one DescribeConfigs request for all that exist.
    pub async fn read(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, KafkaError> {
        let meta = self.metadata().await?;
        let wanted: BTreeSet<&str> = ids
            .iter()
            .filter(|i| i.kind == Kind::Topic && meta.contains_key(&i.name))
            .map(|i| i.name.as_str())
            .collect();
        let mut out = BTreeMap::new();
        if wanted.is_empty() {
            return Ok(out);
        }
        self.stats.count("kafka:DescribeConfigs");
        let names: Vec<String> = wanted.iter().map(|s| (*s).to_owned()).collect();
        for (topic, answer) in ffi::describe_topic_configs(&self.admin, &names, TIMEOUT).await? {
            let entries = match answer {
                Ok(entries) => entries,
                // Deleted between the two requests: it does not exist.
                Err(e) if e.code == RDKafkaErrorCode::UnknownTopicOrPartition => continue,
                Err(e) => return Err(topic_error(&topic, "DescribeConfigs", e)),
            };
            let Some(m) = meta.get(&topic) else { continue };
            out.insert(topic_id(&self.target, &topic), live_topic(m, &entries));
        }
        Ok(out)
    }

    /// Records a topic holds: the sum over its partitions of high minus low watermark (what a
    /// delete would drop). `None` when the topic does not exist.
    pub async fn record_count(&self, topic: &str) -> Result<Option<u64>, KafkaError> {
        let meta = self.metadata().await?;
        let Some(m) = meta.get(topic) else {
            return Ok(None);
        };
        self.stats.count("kafka:ListOffsets");
        let admin = Arc::clone(&self.admin);
        let (name, partitions) = (topic.to_owned(), m.partitions);
        let counted = tokio::task::spawn_blocking(move || {
            let mut total: u64 = 0;
            for p in 0..partitions {
                let p = i32::try_from(p).map_err(|_| format!("partition {p} is out of range"))?;
                let (low, high) = admin
                    .inner()
                    .fetch_watermarks(&name, p, TIMEOUT)
                    .map_err(|e| format!("partition {p}: {e}"))?;
                total = total.saturating_add(u64::try_from(high.saturating_sub(low)).unwrap_or(0));
            }
            Ok::<_, String>(total)
        })
        .await
        .map_err(|e| {
            topic_error(
                topic,
                "ListOffsets",
                format!("the offsets thread failed: {e}"),
            )
        })?;
        counted
            .map(Some)
            .map_err(|m| topic_error(topic, "ListOffsets", m))
    }

    /// Every topic inside the ownership prefixes (and starting with `prefix`, if given), read
    /// as [`read`](Self::read) reads them: the scope of `plan --prune` and `import`.
    pub async fn inventory(
        &self,
        prefix: Option<&str>,
    ) -> Result<BTreeMap<ResourceId, Live>, KafkaError> {
        let meta = self.metadata().await?;
        let ids: Vec<ResourceId> = meta
            .keys()
            .filter(|t| self.owned(t) && prefix.is_none_or(|p| t.starts_with(p)))
            .map(|t| topic_id(&self.target, t))
            .collect();
        let refs: Vec<&ResourceId> = ids.iter().collect();
        if refs.is_empty() {
            return Ok(BTreeMap::new());
        }
        self.read(&refs).await
    }

    pub fn into_writer(self) -> Writer {
        Writer { reader: self }
    }
}

/// A topic's live properties: the effective value of every config the broker reports, and
/// which of those are the broker's defaults rather than set on the topic.
fn live_topic(m: &TopicMeta, entries: &[ffi::Entry]) -> Live {
    let mut props = Props::new();
    props.insert("partitions".into(), json!(m.partitions));
    props.insert("replication.factor".into(), json!(m.replication));
    let mut defaults = Vec::new();
    for e in entries {
        let Some(value) = &e.value else { continue };
        if e.is_sensitive {
            continue;
        }
        let key = format!("config.{}", e.name);
        if !matches!(e.source, Source::DynamicTopic | Source::Unknown) {
            defaults.push(json!(key));
        }
        props.insert(key, normalise_value(value));
    }
    // A real broker reports every topic config (dozens), most at their default. One that
    // reports only a handful, all marked default, reports only what was set on the topic
    // (tansu does): those are settings, not defaults.
    let configs = props.keys().filter(|k| k.starts_with("config.")).count();
    let sparse = configs < SPARSE_ANSWER && defaults.len() == configs;
    if !defaults.is_empty() && !sparse {
        props.insert(DEFAULTS_KEY.into(), Value::Array(defaults));
    }
    Live {
        props,
        messages: None,
    }
}

/// Fewer configs than this, all marked default, in a DescribeConfigs answer: the broker lists
/// only what was set (see [`live_topic`]).
pub const SPARSE_ANSWER: usize = 10;

// ---------------------------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------------------------

/// Read-write access to one Kafka target, for apply.
#[derive(Debug, Clone)]
pub struct Writer {
    pub reader: Reader,
}

impl Writer {
    fn check_owned(&self, topic: &str) -> Result<(), KafkaError> {
        if self.reader.owned(topic) {
            return Ok(());
        }
        Err(KafkaError::NotOwned {
            topic: topic.to_owned(),
            prefixes: self.reader.prefixes.join(", "),
        })
    }

    fn options() -> AdminOptions {
        AdminOptions::new()
            .request_timeout(Some(TIMEOUT))
            .operation_timeout(Some(TIMEOUT))
    }

    /// Applies one change to one topic. A delete (only `plan --prune` plans one) drops a
    /// topic that holds records only with `allow_loss`; the count is read again first.
    pub async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), KafkaError> {
        let topic = change.resource.name.as_str();
        if change.action == Action::Impossible {
            return Ok(());
        }
        self.check_owned(topic)?;
        match change.action {
            Action::Create => self.create(change).await,
            Action::Update => {
                let steps = update_steps(change).map_err(|m| topic_error(topic, "update", m))?;
                for step in steps {
                    match step {
                        Step::AlterConfigs(ops) => self.alter_configs(topic, ops).await?,
                        Step::CreatePartitions(n) => self.create_partitions(topic, n).await?,
                    }
                }
                Ok(())
            }
            Action::Delete => self.delete(topic, allow_loss).await,
            Action::Replace | Action::Impossible => Err(topic_error(
                topic,
                "apply",
                "dlqctl does not re-create Kafka topics; delete it by hand if it must go",
            )),
        }
    }

    async fn delete(&self, topic: &str, allow_loss: bool) -> Result<(), KafkaError> {
        if !allow_loss {
            match self.reader.record_count(topic).await? {
                None => return Ok(()),
                Some(0) => {}
                Some(n) => {
                    return Err(topic_error(
                        topic,
                        "DeleteTopics",
                        format!(
                            "not deleted: it holds {n} records now; move them first, or pass --allow-message-loss"
                        ),
                    ));
                }
            }
        }
        self.reader.stats.count("kafka:DeleteTopics");
        let results = self
            .reader
            .admin
            .delete_topics(&[topic], &Self::options())
            .await
            .map_err(|e| topic_error(topic, "DeleteTopics", e))?;
        for r in results {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
                Err((name, code)) => return Err(topic_error(&name, "DeleteTopics", code)),
            }
        }
        Ok(())
    }

    async fn create(&self, change: &Change) -> Result<(), KafkaError> {
        let topic = change.resource.name.as_str();
        let number = |key: &str| {
            change
                .desired
                .get(key)
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
        };
        let (Some(partitions), Some(replication)) =
            (number("partitions"), number("replication.factor"))
        else {
            return Err(topic_error(
                topic,
                "CreateTopics",
                "the plan gives no partitions or replication factor",
            ));
        };
        let configs: Vec<(String, String)> = change
            .desired
            .iter()
            .filter(|(_, v)| !v.is_null())
            .filter_map(|(k, v)| {
                k.strip_prefix("config.")
                    .map(|k| (k.to_owned(), config_text(v)))
            })
            .collect();
        let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
        for (k, v) in &configs {
            new = new.set(k, v);
        }
        self.reader.stats.count("kafka:CreateTopics");
        let results = self
            .reader
            .admin
            .create_topics([&new], &Self::options())
            .await
            .map_err(|e| topic_error(topic, "CreateTopics", e))?;
        for r in results {
            match r {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                    return self.created_meanwhile(change).await;
                }
                Err((name, code)) => return Err(topic_error(&name, "CreateTopics", code)),
            }
        }
        Ok(())
    }

    /// A topic the plan would create exists: success if it already has the planned settings.
    async fn created_meanwhile(&self, change: &Change) -> Result<(), KafkaError> {
        let id = &change.resource;
        let live = self.reader.read(&[id]).await?;
        match crate::plan::diff(&as_desired(change), live.get(id)) {
            None => Ok(()),
            Some(c) => Err(topic_error(
                &id.name,
                "CreateTopics",
                format!(
                    "the topic was created by someone else since the plan, with other settings ({}); plan again",
                    c.fields
                        .iter()
                        .map(|f| f.key.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    async fn alter_configs(&self, topic: &str, ops: Vec<ConfigOp>) -> Result<(), KafkaError> {
        self.reader.stats.count("kafka:IncrementalAlterConfigs");
        let answers = ffi::incremental_alter_topic_configs(
            &self.reader.admin,
            &[(topic.to_owned(), ops)],
            TIMEOUT,
        )
        .await
        .map_err(|e| topic_error(topic, "IncrementalAlterConfigs", e.detail()))?;
        for (name, result) in answers {
            result.map_err(|e| topic_error(&name, "IncrementalAlterConfigs", e))?;
        }
        Ok(())
    }

    async fn create_partitions(&self, topic: &str, total: usize) -> Result<(), KafkaError> {
        self.reader.stats.count("kafka:CreatePartitions");
        let results = self
            .reader
            .admin
            .create_partitions([&NewPartitions::new(topic, total)], &Self::options())
            .await
            .map_err(|e| topic_error(topic, "CreatePartitions", e))?;
        for r in results {
            if let Err((name, code)) = r {
                return Err(topic_error(&name, "CreatePartitions", code));
            }
        }
        Ok(())
    }

    /// Waits until the brokers show every applied change (topic creation and config changes
    /// reach the other brokers asynchronously); returns the topics that did not settle in time.
    pub async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, KafkaError> {
        let deadline = tokio::time::Instant::now() + SETTLE;
        let mut pending: Vec<&Change> = applied
            .iter()
            .copied()
            .filter(|c| matches!(c.action, Action::Create | Action::Update | Action::Delete))
            .collect();
        while !pending.is_empty() {
            let ids: Vec<&ResourceId> = pending.iter().map(|c| &c.resource).collect();
            let live = self.reader.read(&ids).await?;
            pending.retain(|c| match c.action {
                Action::Delete => live.contains_key(&c.resource),
                _ => crate::plan::diff(&as_desired(c), live.get(&c.resource)).is_some(),
            });
            if pending.is_empty() || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(pending
            .into_iter()
            .map(|c| format!("topic {}", c.resource.name))
            .collect())
    }
}

/// The desired state a change was planned towards.
fn as_desired(c: &Change) -> Desired {
    Desired {
        id: c.resource.clone(),
        channel: c.channel.clone(),
        role: c.role,
        props: c.desired.clone(),
        immutable: false,
        present: true,
    }
}

#[cfg(test)]
mod tests {
    //! The paths tansu cannot run (it answers CreatePartitions with UnsupportedFeature and has
    //! a single broker): partition growth, partition decrease and replication-factor changes
    //! are checked here on the plan values; tests/kafka.rs covers what tansu supports live.
    use super::*;
    use crate::plan::{FieldChange, diff};

    fn topic(props: Value) -> Desired {
        Desired {
            id: topic_id("k", "app.orders"),
            channel: "app.orders".into(),
            role: Role::Main,
            props: serde_json::from_value(props).expect("props"),
            immutable: false,
            present: true,
        }
    }

    fn live(props: Value) -> Live {
        Live {
            props: serde_json::from_value(props).expect("props"),
            messages: None,
        }
    }

    fn planned(desired: Value, live_props: Value) -> Change {
        let mut c = diff(&topic(desired), Some(&live(live_props))).expect("a change");
        refine(&mut c);
        c
    }

    #[test]
    fn more_partitions_is_an_update_made_by_create_partitions() {
        let c = planned(
            json!({"partitions": 6, "replication.factor": 1}),
            json!({"partitions": 3, "replication.factor": 1}),
        );
        assert_eq!(c.action, Action::Update);
        assert_eq!(update_steps(&c), Ok(vec![Step::CreatePartitions(6)]));
    }

    #[test]
    fn fewer_partitions_is_impossible_with_the_reason() {
        let c = planned(
            json!({"partitions": 2, "replication.factor": 1, "config.retention.ms": 1000}),
            json!({"partitions": 3, "replication.factor": 1, "config.retention.ms": 2000}),
        );
        assert_eq!(c.action, Action::Impossible);
        let reason = c.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("cannot remove partitions (3 → 2)"),
            "{reason}"
        );
        assert!(update_steps(&c).is_err(), "the writer refuses it too");
    }

    #[test]
    fn another_replication_factor_is_impossible_with_the_reassignment_hint() {
        let c = planned(
            json!({"partitions": 3, "replication.factor": 3}),
            json!({"partitions": 3, "replication.factor": 1}),
        );
        assert_eq!(c.action, Action::Impossible);
        let reason = c.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("(1 → 3)") && reason.contains("reassignment"),
            "{reason}"
        );
    }

    #[test]
    fn config_changes_are_set_before_partitions_grow() {
        let c = planned(
            json!({"partitions": 4, "replication.factor": 1, "config.retention.ms": 5000, "config.cleanup.policy": "delete"}),
            json!({"partitions": 3, "replication.factor": 1, "config.retention.ms": 4000, "config.cleanup.policy": "delete"}),
        );
        assert_eq!(c.action, Action::Update);
        assert_eq!(c.destructive, None, "longer retention drops nothing");
        assert_eq!(
            update_steps(&c),
            Ok(vec![
                Step::AlterConfigs(vec![ConfigOp::Set {
                    key: "retention.ms".into(),
                    value: "5000".into()
                }]),
                Step::CreatePartitions(4),
            ])
        );
    }

    #[test]
    fn shorter_retention_and_compaction_are_guarded_as_destructive() {
        let c = planned(
            json!({"config.retention.ms": 86_400_000}),
            json!({"config.retention.ms": 604_800_000}),
        );
        assert_eq!(c.action, Action::Update);
        let how = c.destructive.as_deref().unwrap_or_default();
        assert!(how.contains("from 7d to 1d"), "{how}");
        // From unlimited (-1) to anything is shorter.
        let c = planned(
            json!({"config.retention.ms": 1000}),
            json!({"config.retention.ms": -1}),
        );
        assert!(c.destructive.is_some());
        let c = planned(
            json!({"config.cleanup.policy": "compact"}),
            json!({"config.cleanup.policy": "delete"}),
        );
        assert!(
            c.destructive
                .as_deref()
                .unwrap_or_default()
                .contains("latest record")
        );
    }

    #[test]
    fn effective_values_are_compared_whatever_their_source() {
        // A real broker reports retention.ms at its default: equal to the spec means no change,
        // and a default is not an unmanaged setting.
        let m = TopicMeta {
            partitions: 3,
            replication: 1,
        };
        let entry = |name: &str, value: &str, source| ffi::Entry {
            name: name.into(),
            value: Some(value.into()),
            source,
            is_default: source == Source::Default,
            is_sensitive: false,
        };
        let l = live_topic(
            &m,
            &[
                entry("retention.ms", "604800000", Source::Default),
                entry("segment.bytes", "1073741824", Source::StaticBroker),
                entry("max.message.bytes", "2000000", Source::DynamicTopic),
            ],
        );
        let d = topic(
            json!({"partitions": 3, "replication.factor": 1, "config.retention.ms": 604_800_000}),
        );
        assert_eq!(diff(&d, Some(&l)), None);
        assert_eq!(
            crate::plan::unmanaged(&d, &l),
            vec!["config.max.message.bytes = 2000000"]
        );
        // A key the broker does not report (tansu: never set) is set explicitly.
        let d = topic(
            json!({"partitions": 3, "replication.factor": 1, "config.cleanup.policy": "delete"}),
        );
        let c = diff(&d, Some(&l)).expect("change");
        assert_eq!(
            c.fields,
            vec![FieldChange {
                key: "config.cleanup.policy".into(),
                old: None,
                new: Some(json!("delete"))
            }]
        );
    }

    #[test]
    fn a_broker_that_lists_only_set_keys_has_no_defaults_to_hide() {
        // tansu: the keys set on the topic, all marked Default.
        let m = TopicMeta {
            partitions: 1,
            replication: 1,
        };
        let entry = |name: &str, value: &str| ffi::Entry {
            name: name.into(),
            value: Some(value.into()),
            source: Source::Default,
            is_default: true,
            is_sensitive: false,
        };
        let l = live_topic(
            &m,
            &[
                entry("retention.ms", "1000"),
                entry("max.message.bytes", "2000000"),
            ],
        );
        let d =
            topic(json!({"partitions": 1, "replication.factor": 1, "config.retention.ms": 1000}));
        assert_eq!(
            crate::plan::unmanaged(&d, &l),
            vec!["config.max.message.bytes = 2000000"]
        );
    }

    #[test]
    fn values_are_normalised_on_both_sides() {
        assert_eq!(normalise_value("604800000"), json!(604_800_000));
        assert_eq!(normalise_value("-1"), json!(-1));
        assert_eq!(
            normalise_value("007"),
            json!("007"),
            "not a canonical number"
        );
        assert_eq!(normalise_value("compact, delete"), json!("compact,delete"));
        assert_eq!(normalise_value("0.5"), json!("0.5"));
        assert_eq!(config_text(&json!(604_800_000)), "604800000");
        assert_eq!(config_text(&json!("delete")), "delete");
    }

    fn target(props: Value, secrets: Value) -> Target {
        Target {
            backend: Backend::Kafka,
            region: None,
            endpoint: None,
            profile: None,
            url: None,
            vhost: None,
            username_env: None,
            password_env: None,
            bootstrap_servers: Some("127.0.0.1:9092".into()),
            properties: serde_json::from_value(props).expect("properties"),
            secret_properties: serde_json::from_value(secrets).expect("secrets"),
            ownership: None,
        }
    }

    #[test]
    fn secrets_come_only_from_the_environment_and_are_never_shown() {
        let e = client_config(
            "prod",
            &target(json!({"sasl.password": "hunter2"}), Value::Null),
        )
        .expect_err("refused");
        assert!(e.to_string().contains("secretProperties"), "{e}");
        assert!(!e.to_string().contains("hunter2"));

        let e = client_config(
            "prod",
            &target(
                Value::Null,
                json!({"sasl.password": "DLQCTL_TEST_UNSET_VAR"}),
            ),
        )
        .expect_err("missing env");
        assert!(e.to_string().contains("DLQCTL_TEST_UNSET_VAR"), "{e}");

        let e = client_config(
            "prod",
            &target(json!({"allow.auto.create.topics": "true"}), Value::Null),
        )
        .expect_err("refused");
        assert!(e.to_string().contains("allow.auto.create.topics"), "{e}");

        // librdkafka quotes a refused value; for a secret property dlqctl names the variable.
        let t = target(Value::Null, json!({"sasl.password": "PATH"}));
        let err = rdkafka::error::KafkaError::ClientConfig(
            rdkafka::types::RDKafkaConfRes::RD_KAFKA_CONF_INVALID,
            "Invalid value \"secret-value\"".into(),
            "sasl.password".into(),
            "secret-value".into(),
        );
        let m = describe_config_error(&t, &err);
        assert!(!m.contains("secret-value") && m.contains("$PATH"), "{m}");
    }

    #[tokio::test]
    async fn topics_outside_the_ownership_prefixes_are_never_written() {
        let mut t = target(Value::Null, Value::Null);
        t.bootstrap_servers = Some("127.0.0.1:1".into());
        t.ownership = Some(crate::spec::model::Ownership {
            prefixes: vec!["app.".into()],
        });
        let w = Reader::connect("prod", &t, Arc::new(Stats::default()))
            .expect("client")
            .into_writer();
        let mut c = diff(
            &topic(json!({"partitions": 1, "replication.factor": 1})),
            None,
        )
        .expect("create");
        c.resource.name = "billing.orders".into();
        let e = w.apply(&c, false).await.expect_err("refused");
        assert!(
            e.to_string().contains("topic `billing.orders` is outside"),
            "{e}"
        );
        assert!(
            w.reader.stats.snapshot().is_empty(),
            "refused before any request"
        );
    }

    #[test]
    fn sasl_ssl_with_scram_is_supported_by_this_build() {
        // librdkafka refuses these properties when it was built without OpenSSL.
        let t = target(
            json!({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "dlqctl"}),
            json!({"sasl.password": "PATH"}),
        );
        Reader::connect("prod", &t, Arc::new(Stats::default())).expect("SASL_SSL + SCRAM client");
    }

    #[test]
    fn the_reader_debug_output_holds_no_configuration() {
        let t = target(Value::Null, json!({"sasl.password": "PATH"}));
        let r = Reader::connect("prod", &t, Arc::new(Stats::default())).expect("client");
        let shown = format!("{r:?}");
        assert!(
            !shown.contains(&std::env::var("PATH").unwrap_or_default()),
            "{shown}"
        );
        assert!(shown.contains("127.0.0.1:9092"));
    }

    #[test]
    fn every_topic_of_the_channel_is_desired_with_its_partitions_and_retention() {
        let ws = crate::spec::load::load_str(
            "c.yaml",
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: app.orders}\nspec:\n  target: k\n  retention: 7d\n  retry: {maxAttempts: 3, backoff: {initial: 1s, multiplier: 2}}\n  deadLetter: {retention: 30d}\n  kafka: {partitions: 3, deadLetterPartitions: 6, replicationFactor: 1, config: {cleanup.policy: delete}}\n",
        );
        let r = crate::spec::resolve::resolve(
            &ws.channels[0].value,
            "k",
            &target(Value::Null, Value::Null),
        )
        .expect("resolves");
        let d = desired(&r);
        let names: Vec<(&str, Role)> = d.iter().map(|x| (x.id.name.as_str(), x.role)).collect();
        assert_eq!(
            names,
            [
                ("app.orders-dlt", Role::DeadLetter),
                ("app.orders-retry-1000", Role::Retry),
                ("app.orders-retry-2000", Role::Retry),
                ("app.orders", Role::Main)
            ]
        );
        assert_eq!(*d[0].props.get("partitions").unwrap(), json!(6));
        assert_eq!(
            *d[0].props.get("config.retention.ms").unwrap(),
            json!(2_592_000_000_u64)
        );
        assert_eq!(
            *d[1].props.get("config.retention.ms").unwrap(),
            json!(604_800_000)
        );
        assert_eq!(
            *d[3].props.get("config.cleanup.policy").unwrap(),
            json!("delete")
        );
    }
}
