//! The archive's format, whatever the backend and wherever it is kept (issue 35): what
//! `dlqctl archive` writes and `dlqctl redrive --from-archive` reads, so that a dead letter
//! outlives its queue's retention (an SQS DLQ keeps a message 14 days at most) and can be
//! replayed from the archive later.
//!
//! An archive is a folder (a local directory, or an S3 prefix) holding one folder per run,
//! `<channel>/<run>/` (`run`: [`run_name`], UTC time, pid and a nonce, so runs sort by time), with
//! - `batch-00001.jsonl` (`.jsonl.gz` compressed), … : JSON Lines, one [`Record`] per
//!   message, one object per batch;
//! - `manifest.json`: the [`Manifest`] — counts, the sha256 of each object, the selection,
//!   the time, the operator.
//!
//! The manifest is written again after each object is durable and **before** the messages of
//! that object leave the dead-letter queue (`--delete`): whatever left the queue is listed
//! in a manifest, whatever the moment a run is killed. An object written but not yet listed
//! holds messages still in the queue; a reader ignores it (counted as unlisted), and the next
//! run archives those messages again. A reader deduplicates by [`Record::key`] across every
//! run of the archive ([`Dedup`]): at least once, never lost, a message in two runs replayed
//! once. The key is unique per dead letter as the broker held it: the broker's own id where
//! it gives one that no other message carries (SQS, Kafka, Pub/Sub, Service Bus), else
//! (RabbitMQ) a digest of everything the message carries and its place among the run's
//! copies of it ([`content_key`]); two records that differ in anything are never merged
//! (issue 52).
//!
//! This module is pure (values and (de)serialization); the stores that put and get objects
//! (file system, S3) are in [`store`], and the movers' side of a run in [`sink`].

pub mod read;
pub mod replayed;
pub mod sink;
pub mod store;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::status::Message;
use crate::status::envelope::Read;

/// The version of [`Record`] and [`Manifest`]; a reader refuses a newer one. 2: records
/// carry their [`Record::key`] (issue 52); a version 1 record gets it when read, computed as
/// a version 2 writer does.
pub const FORMAT_VERSION: u32 = 2;
/// The `kind` of a record line.
pub const RECORD_KIND: &str = "dlqctl/archive-record";
/// The `kind` of a manifest.
pub const MANIFEST_KIND: &str = "dlqctl/archive-manifest";
/// The manifest's name in a run's folder.
pub const MANIFEST: &str = "manifest.json";

/// Where an archive is: `--to DIR` or `--to s3://bucket/prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Dir(std::path::PathBuf),
    S3 { bucket: String, prefix: String },
}

impl Place {
    /// Reads `--to`/`--from-archive`: `s3://bucket[/prefix]` or a path.
    pub fn parse(s: &str) -> Result<Place, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err(
                "an archive location is empty: give a directory or s3://bucket/prefix".into(),
            );
        }
        if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!("`{s}`: no bucket after s3:// (s3://bucket/prefix)"));
            }
            return Ok(Place::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.trim_matches('/').to_owned(),
            });
        }
        if s.contains("://") {
            return Err(format!(
                "`{s}`: an archive is a directory or s3://bucket/prefix; no other scheme is known"
            ));
        }
        Ok(Place::Dir(s.into()))
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Dir(p) => write!(f, "{}", p.display()),
            Place::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Place::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

/// A run's folder name: `20261202T081500Z-1234-9f3ac01e` (UTC time of the start, pid, and a
/// [`nonce`]: two runs that start in the same second as the same pid — PID 1 in two
/// containers, archiving two targets' channels of one name to one place — never share a
/// folder, where the second would overwrite the first's objects after the first deleted
/// what they hold).
pub fn run_name(start_ms: i64, pid: u32, nonce: u32) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(start_ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z-{pid}-{nonce:08x}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// A number unlikely to repeat across processes and calls: the process's random hasher
/// seed (std draws it from the OS) over the wall clock's nanoseconds and a counter.
pub fn nonce() -> u32 {
    use std::hash::{BuildHasher as _, Hasher as _};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u64(N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.finish() as u32
}

/// The name of a run's `n`th object (from 1).
pub fn object_name(n: u32, compressed: bool) -> String {
    format!("batch-{n:05}.jsonl{}", if compressed { ".gz" } else { "" })
}

/// How a body is written in a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BodyEncoding {
    /// The body is UTF-8 and written as it is.
    Utf8,
    /// The body is not UTF-8: standard base64 with padding.
    Base64,
}

/// What the envelope said when the message was archived (as `status` reads it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvelopeRecord {
    pub class: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u64>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_lettered_at: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failure_at: Option<String>,
}

/// One archived message: one line of an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    #[serde(rename = "format_version")]
    pub format_version: u32,
    pub kind: String,
    /// The backend's id of the message (SQS and Pub/Sub: the message id; Kafka:
    /// `topic/partition/offset`; RabbitMQ: its `message_id`, else `sha256:` of the body;
    /// Service Bus: `MessageId#SequenceNumber`). Not unique on RabbitMQ: see `key`.
    pub id: String,
    /// What tells this dead letter from every other one of its queue (format 2; empty in a
    /// version 1 record until read): `id` where the broker's ids are unique
    /// ([`unique_ids`]), else `amqp:` [`content_key`]. Replays deduplicate by it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    pub channel: String,
    pub target: String,
    pub backend: String,
    /// The queue, topic or subscription it was read from.
    pub from: String,
    /// Which destination of the channel `from` is: `dead-letter`, `invalid` or `exception`.
    pub role: String,
    pub body: String,
    pub body_encoding: BodyEncoding,
    /// sha256 of the body's bytes, hex: checked when the record is read back.
    pub body_sha256: String,
    /// Headers (SQS: message attributes) in the order the backend gave them, as
    /// `[name, value]` (a name may repeat).
    pub headers: Vec<(String, String)>,
    /// The broker's properties beside the headers (RabbitMQ AMQP properties, SQS system
    /// attributes, Kafka key/partition/offset/timestamp, Pub/Sub publishTime/…).
    pub properties: Vec<(String, String)>,
    pub envelope: EnvelopeRecord,
    /// RFC 3339, when the backend says when it was published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
    /// RFC 3339.
    pub archived_at: String,
    /// The run (folder) it was read from: set by the reader, not written.
    #[serde(skip)]
    pub run: String,
    /// The runs (folders, or an unlisted object's name) of byte copies of this record the
    /// reader dropped ([`read`]: the same written key and every field equal, `archivedAt`
    /// included): a replay ledger naming the record under any of them counts for it.
    #[serde(skip)]
    pub copies_in: Vec<String>,
}

/// RFC 3339 (UTC, milliseconds) of a Unix time in milliseconds.
pub fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| ms.to_string())
}

/// Unix milliseconds of an RFC 3339 time, if it is one.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    crate::status::envelope::parse_time(s, crate::spec::model::Format::Rfc3339)
}

/// Hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where a record comes from, besides the message.
#[derive(Debug, Clone)]
pub struct Origin<'a> {
    pub channel: &'a str,
    pub target: &'a str,
    pub backend: &'a str,
    pub from: &'a str,
    pub role: &'a str,
}

impl Record {
    /// The record of `m` (its whole body: a mover reads it whole), with its envelope as read.
    pub fn of(m: &Message, e: &Read, origin: &Origin<'_>, archived_ms: i64) -> Record {
        let (body, body_encoding) = match std::str::from_utf8(&m.body) {
            Ok(s) => (s.to_owned(), BodyEncoding::Utf8),
            Err(_) => (
                base64::engine::general_purpose::STANDARD.encode(&m.body),
                BodyEncoding::Base64,
            ),
        };
        Record {
            format_version: FORMAT_VERSION,
            kind: RECORD_KIND.to_owned(),
            id: m.id.clone(),
            key: String::new(),
            channel: origin.channel.to_owned(),
            target: origin.target.to_owned(),
            backend: origin.backend.to_owned(),
            from: origin.from.to_owned(),
            role: origin.role.to_owned(),
            body,
            body_encoding,
            body_sha256: sha256_hex(&m.body),
            headers: m.headers.clone(),
            properties: m.properties.clone(),
            envelope: EnvelopeRecord {
                class: e.class.clone(),
                raw_class: e.raw_class.clone(),
                message: e.message.clone(),
                source: e.source.clone().or_else(|| m.source.clone()),
                attempts: e.attempts.or(m.attempts),
                dead_lettered_at: e.dead_lettered_ms.or(m.dead_lettered_ms).map(rfc3339),
                first_failure_at: e.first_failure_ms.map(rfc3339),
            },
            published_at: m.published_ms.map(rfc3339),
            archived_at: rfc3339(archived_ms),
            run: String::new(),
            copies_in: Vec::new(),
        }
    }

    /// The body's bytes, checked against `bodySha256`.
    pub fn body_bytes(&self) -> Result<Vec<u8>, String> {
        let bytes = match self.body_encoding {
            BodyEncoding::Utf8 => self.body.as_bytes().to_vec(),
            BodyEncoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(&self.body)
                .map_err(|e| {
                    format!("record `{}`: its base64 body does not decode: {e}", self.id)
                })?,
        };
        let sum = sha256_hex(&bytes);
        if sum != self.body_sha256 {
            return Err(format!(
                "record `{}`: its body's sha256 is {sum}, the record says {}",
                self.id, self.body_sha256
            ));
        }
        Ok(bytes)
    }

    /// What deduplicates records across runs: the same message of the same queue.
    pub fn key(&self) -> (String, String, String) {
        let key = if self.key.is_empty() {
            &self.id
        } else {
            &self.key
        };
        (self.target.clone(), self.from.clone(), key.clone())
    }

    /// sha256 (hex) of what this record carries that stays the same while the message waits
    /// in its queue: the body, the headers (less [`VOLATILE_HEADERS`]) and, where the broker
    /// gives no id of its own ([`unique_ids`]), the properties too. Two records with one
    /// key are merged only when this agrees.
    pub fn content(&self) -> String {
        let headers: Vec<&(String, String)> = self
            .headers
            .iter()
            .filter(|(k, _)| !VOLATILE_HEADERS.iter().any(|v| k.eq_ignore_ascii_case(v)))
            .collect();
        let properties: Vec<&(String, String)> = if unique_ids(&self.backend) {
            Vec::new()
        } else {
            self.properties.iter().collect()
        };
        let text =
            serde_json::to_vec(&(&self.body_sha256, headers, properties)).unwrap_or_default();
        sha256_hex(&text)
    }

    /// The message again, as a mover hands it on (replay): body, headers, properties and
    /// what the envelope knew.
    pub fn message(&self) -> Result<Message, String> {
        let body = self.body_bytes()?;
        Ok(Message {
            id: self.id.clone(),
            headers: self.headers.clone(),
            properties: self.properties.clone(),
            body_len: body.len() as u64,
            body,
            published_ms: self.published_at.as_deref().and_then(parse_rfc3339),
            dead_lettered_ms: self
                .envelope
                .dead_lettered_at
                .as_deref()
                .and_then(parse_rfc3339),
            // The queue it was read from is not where it goes back to.
            retained_since_ms: None,
            attempts: self.envelope.attempts,
            source: self.envelope.source.clone(),
            native_class: None,
        })
    }
}

/// One object of a run, as its manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectEntry {
    /// Its name in the run's folder.
    pub name: String,
    pub records: u64,
    /// Its size and the sha256 of its bytes as stored (compressed, when it is).
    pub bytes: u64,
    pub sha256: String,
    /// `gzip`, or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    /// HMAC-SHA256 (hex) of its bytes as stored, with the target's key
    /// (`operations.hmacKeyEnv`; issue 52, L4); absent when the target names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac_sha256: Option<String>,
}

/// A run's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    #[serde(rename = "format_version")]
    pub format_version: u32,
    pub kind: String,
    pub channel: String,
    pub target: String,
    pub backend: String,
    pub from: String,
    pub role: String,
    /// The run's folder name ([`run_name`]).
    pub run: String,
    /// What was asked for, as `redrive`'s report says it (limit, classes, older-than, due).
    pub selection: serde_json::Value,
    /// Whether the messages listed here were removed from the dead-letter queue.
    pub delete: bool,
    /// `false` until the run ended: a run killed part-way leaves `false` here, and what it
    /// listed is all the same archived (and, with `delete`, gone from the queue).
    pub complete: bool,
    pub records: u64,
    pub objects: Vec<ObjectEntry>,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// HMAC-SHA256 (hex), with the target's key, of this manifest as JSON without this
    /// field ([`Manifest::signed_bytes`]); absent when the target names no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac_sha256: Option<String>,
}

impl Manifest {
    /// What the manifest's HMAC covers: the manifest as compact JSON, without its HMAC
    /// (every field, the objects' entries and their HMACs included).
    pub fn signed_bytes(&self) -> Vec<u8> {
        let mut m = self.clone();
        m.hmac_sha256 = None;
        // A manifest of strings, numbers and a JSON value always encodes.
        serde_json::to_vec(&m).unwrap_or_default()
    }

    /// The manifest with its HMAC set, when there is a key (cleared when there is none).
    pub fn sealed(&self, key: Option<&crate::integrity::Key>) -> Manifest {
        let mut m = self.clone();
        m.hmac_sha256 = key.map(|k| k.sign(&self.signed_bytes()));
        m
    }

    /// With a key: refuses a manifest without an HMAC, or whose HMAC does not verify, or
    /// that names another run than its folder's; without one, refuses a manifest written
    /// with a key (it could not be checked). `at` names the manifest.
    pub fn authenticate(
        &self,
        key: Option<&crate::integrity::Key>,
        run: &str,
        at: &str,
    ) -> Result<(), String> {
        match (key, self.hmac_sha256.as_deref()) {
            (None, None) => Ok(()),
            (None, Some(_)) => Err(format!(
                "{at}: the manifest carries an HMAC (the archive was written with a key, operations.hmacKeyEnv), and no key is configured for target `{}` to check it: name the key in the target's operations.hmacKeyEnv and set that variable",
                self.target
            )),
            (Some(_), None) => Err(format!(
                "{at}: the manifest carries no HMAC, and target `{}` names a key (operations.hmacKeyEnv): an archive written without the key cannot be told from one edited",
                self.target
            )),
            (Some(k), Some(tag)) => {
                if !k.verifies(&self.signed_bytes(), tag) {
                    return Err(format!(
                        "{at}: the manifest's HMAC does not verify with target `{}`'s key (operations.hmacKeyEnv): the manifest was changed, or written with another key",
                        self.target
                    ));
                }
                if self.run != run {
                    return Err(format!(
                        "{at}: the manifest is run `{}`'s, in run `{run}`'s folder",
                        self.run
                    ));
                }
                Ok(())
            }
        }
    }

    /// Refuses a manifest this build cannot read.
    pub fn check(&self, at: &str) -> Result<(), String> {
        if self.kind != MANIFEST_KIND {
            return Err(format!(
                "{at}: kind `{}` is not an archive manifest ({MANIFEST_KIND})",
                self.kind
            ));
        }
        if self.format_version > FORMAT_VERSION {
            return Err(format!(
                "{at}: format_version {} is newer than this dlqctl reads ({FORMAT_VERSION}); upgrade dlqctl",
                self.format_version
            ));
        }
        Ok(())
    }
}

/// Reads one object's bytes (already checked against its manifest entry and decompressed)
/// as records; `at` names the object in errors, with the line.
pub fn parse_object(bytes: &[u8], at: &str) -> Result<Vec<Record>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("{at}: not UTF-8: {e}"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: Record = serde_json::from_str(line)
            .map_err(|e| format!("{at}:{}: not an archive record: {e}", i + 1))?;
        if r.format_version > FORMAT_VERSION {
            return Err(format!(
                "{at}:{}: format_version {} is newer than this dlqctl reads ({FORMAT_VERSION})",
                i + 1,
                r.format_version
            ));
        }
        out.push(r);
    }
    Ok(out)
}

/// Writes records as one object's bytes (JSON Lines, uncompressed).
pub fn object_bytes(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        // A record of strings, numbers and vectors always encodes.
        if let Ok(line) = serde_json::to_vec(r) {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
    }
    out
}

/// Whether `backend` gives each dead letter an id no other message of its queue carries:
/// SQS's MessageId, Kafka's topic/partition/offset, Pub/Sub's messageId (unique per publish
/// on a topic), Service Bus's `MessageId#SequenceNumber`. RabbitMQ gives none (`message_id`
/// is the application's, often shared by the events of one order, or absent).
pub fn unique_ids(backend: &str) -> bool {
    backend != "rabbitmq"
}

/// Headers a broker changes while a message waits in its queue (a quorum queue's delivery
/// counter): left out of [`Record::content`], so a message handed back and archived again
/// is known as itself.
pub const VOLATILE_HEADERS: [&str; 1] = ["x-delivery-count"];

/// The key of a record whose broker gives no id ([`unique_ids`]): its
/// [`Record::content`] and its place among the records of its run with that content (`#1`,
/// `#2`, … in the order read: one run reads each message of a queue once, so two copies in
/// one run are two dead letters, never one read twice).
pub fn content_key(content: &str, nth: u32) -> String {
    format!("amqp:{content}#{nth}")
}

/// Gives the records of one run their keys, in the order they were written: what a
/// version 2 writer stores, and what a version 1 record gets when read.
#[derive(Debug, Default)]
pub struct Keys {
    seen: std::collections::HashMap<String, u32>,
}

impl Keys {
    /// Sets `r.key` (kept when it has one).
    pub fn assign(&mut self, r: &mut Record) {
        if !r.key.is_empty() {
            return;
        }
        if unique_ids(&r.backend) {
            r.key = r.id.clone();
            return;
        }
        let content = r.content();
        let n = self.seen.entry(content.clone()).or_insert(0);
        *n += 1;
        r.key = content_key(&content, *n);
    }
}

/// What a run did to the messages it archived, as its manifest says: whether a later run
/// could have read them again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// Without `--delete`: every message stayed in the queue; a later run reads them again.
    Kept,
    /// `--delete`, and the run ended complete: what it archived left the queue.
    Deleted,
    /// `--delete`, and the run did not end (killed, or stopped by an error): what it
    /// archived may or may not have left the queue.
    Unsure,
}

impl RunKind {
    pub fn of(m: &Manifest) -> RunKind {
        match (m.delete, m.complete) {
            (false, _) => RunKind::Kept,
            (true, true) => RunKind::Deleted,
            (true, false) => RunKind::Unsure,
        }
    }
}

/// Deduplicates the records of an archive's runs, read in order (runs by time): a record
/// is dropped as a copy of an earlier one only when it has the same [`Record::key`] and the
/// same [`Record::content`], and
/// - the earlier copy's run did not complete a `--delete` (a copy run, or one killed), and
/// - the broker's ids are unique ([`unique_ids`]): one id is one dead letter; or
/// - (RabbitMQ) the earlier copy's run kept it in the queue (no `--delete`), so this run
///   could read that very message again.
///
/// Kept, never merged: records with one key that differ (a broker id reused: a topic or
/// entity deleted and made again), counted in `differing`; on RabbitMQ a record whose
/// earlier twin's run removed it and completed (a new dead letter all the same, since the
/// first left the queue); and one whose earlier twin's run was killed or stopped with
/// `--delete`: it may be the same message, not removed before the kill, or a second one
/// identical in everything — losing a payment is worse than sending one twice, so both are
/// replayed and counted in `possibly_duplicated`.
#[derive(Debug, Default)]
pub struct Dedup {
    /// By key: the content and what the last kept record's run did with it.
    seen: std::collections::HashMap<(String, String, String), (String, RunKind, String)>,
    /// Records dropped as copies of one kept before.
    pub duplicates: u64,
    /// Records kept though they share a key with another (they differ).
    pub differing: u64,
    /// Records kept that may be copies of another (RabbitMQ, after a run that did not end).
    pub possibly_duplicated: u64,
}

impl Dedup {
    /// Whether `r`, of a run that did `kind`, is kept (see the type's doc).
    pub fn keep(&mut self, r: &Record, kind: RunKind) -> bool {
        let content = r.content();
        let key = r.key();
        let Some((was, earlier, run)) = self.seen.get(&key).cloned() else {
            self.seen.insert(key, (content, kind, r.run.clone()));
            return true;
        };
        if was != content {
            self.differing += 1;
            self.seen.insert(key, (content, kind, r.run.clone()));
            return true;
        }
        // The earlier twin left the queue with a run that completed its `--delete`: this
        // one, archived by another run, is a new dead letter on every backend (a topic
        // made again, an id reused; issue 52 fixes, F3).
        if earlier == RunKind::Deleted && run != r.run {
            self.seen.insert(key, (content, kind, r.run.clone()));
            return true;
        }
        if unique_ids(&r.backend) {
            self.duplicates += 1;
            return false;
        }
        match earlier {
            RunKind::Kept => {
                self.duplicates += 1;
                // What this run did with the message is what holds now.
                self.seen.insert(key, (content, kind, r.run.clone()));
                false
            }
            RunKind::Deleted => {
                self.seen.insert(key, (content, kind, r.run.clone()));
                true
            }
            RunKind::Unsure => {
                self.possibly_duplicated += 1;
                self.seen.insert(key, (content, kind, r.run.clone()));
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &[u8]) -> Message {
        Message {
            id: "m-1".into(),
            headers: vec![
                ("dlq-error-class".into(), "poison".into()),
                ("a".into(), "1".into()),
                ("a".into(), "2".into()),
            ],
            properties: vec![("timestamp".into(), "1764576000".into())],
            body: body.to_vec(),
            body_len: body.len() as u64,
            published_ms: Some(1_764_576_000_123),
            dead_lettered_ms: None,
            retained_since_ms: None,
            attempts: Some(3),
            source: Some("orders".into()),
            native_class: None,
        }
    }

    fn origin() -> Origin<'static> {
        Origin {
            channel: "orders",
            target: "local",
            backend: "rabbitmq",
            from: "orders.dlq",
            role: "dead-letter",
        }
    }

    fn read() -> Read {
        Read {
            class: "poison".into(),
            raw_class: None,
            message: Some("boom".into()),
            source: None,
            attempts: None,
            dead_lettered_ms: Some(1_764_576_001_000),
            first_failure_ms: None,
        }
    }

    #[test]
    fn a_record_round_trips_byte_exact_in_utf8_and_in_base64() {
        for body in [
            &b"{\"order\":1}"[..],
            &[0xff, 0x00, 0xfe, b'x'][..],
            &b""[..],
        ] {
            let m = message(body);
            let r = Record::of(&m, &read(), &origin(), 1_764_576_002_000);
            let line = object_bytes(std::slice::from_ref(&r));
            let back = parse_object(&line, "batch-00001.jsonl").expect("parses");
            assert_eq!(back, vec![r.clone()]);
            let again = back[0].message().expect("body checks");
            assert_eq!(again.body, body);
            assert_eq!(again.headers, m.headers);
            assert_eq!(again.properties, m.properties);
            assert_eq!(again.published_ms, m.published_ms);
            assert_eq!(again.dead_lettered_ms, Some(1_764_576_001_000));
        }
        let r = Record::of(&message(&[0xff]), &read(), &origin(), 0);
        assert_eq!(r.body_encoding, BodyEncoding::Base64);
    }

    #[test]
    fn a_record_whose_body_does_not_match_its_checksum_is_refused_by_id() {
        let mut r = Record::of(&message(b"abc"), &read(), &origin(), 0);
        r.body = "abd".into();
        let e = r.message().expect_err("refused");
        assert!(e.contains("record `m-1`") && e.contains("sha256"), "{e}");
    }

    #[test]
    fn a_bad_line_is_named_by_object_and_line() {
        let r = Record::of(&message(b"abc"), &read(), &origin(), 0);
        let mut bytes = object_bytes(&[r]);
        bytes.extend_from_slice(b"{not json\n");
        let e = parse_object(&bytes, "s3://b/p/orders/run/batch-00001.jsonl").expect_err("bad");
        assert!(
            e.starts_with("s3://b/p/orders/run/batch-00001.jsonl:2:"),
            "{e}"
        );
    }

    #[test]
    fn places_are_a_directory_or_an_s3_bucket_and_prefix() {
        assert_eq!(
            Place::parse("s3://bucket/a/b/").expect("s3"),
            Place::S3 {
                bucket: "bucket".into(),
                prefix: "a/b".into()
            }
        );
        assert_eq!(
            Place::parse("s3://bucket").expect("s3"),
            Place::S3 {
                bucket: "bucket".into(),
                prefix: String::new()
            }
        );
        assert!(Place::parse("s3:///x").is_err());
        assert!(Place::parse("gs://x").is_err());
        assert_eq!(
            Place::parse("./arch").expect("dir"),
            Place::Dir("./arch".into())
        );
        assert_eq!(
            Place::parse("s3://b/p").expect("s3").to_string(),
            "s3://b/p"
        );
    }

    #[test]
    fn run_names_sort_by_time() {
        assert_eq!(
            run_name(1_764_662_100_000, 42, 0x9f3a_c01e),
            "20251202T075500Z-42-9f3ac01e"
        );
        assert_ne!(nonce(), nonce());
        assert_eq!(object_name(3, true), "batch-00003.jsonl.gz");
    }

    fn with_backend(backend: &str, id: &str, body: &[u8], tenant: &str) -> Record {
        let mut m = message(body);
        m.id = id.into();
        m.headers.push(("tenant".into(), tenant.into()));
        let o = Origin {
            backend,
            ..origin()
        };
        Record::of(&m, &read(), &o, 0)
    }

    /// Issue 52 fixes, F3: on every backend, a record whose identical twin (same key, same
    /// content) was taken by an earlier run that completed its `--delete` is a new dead
    /// letter (a topic made again, an id reused): replayed, not merged. A twin of a copy
    /// run (no `--delete`) or of a killed `--delete` run is merged on brokers with unique
    /// ids.
    #[test]
    fn a_twin_of_a_completed_delete_run_is_a_new_dead_letter_on_every_backend() {
        for backend in ["kafka", "sqs", "pubsub", "servicebus", "rabbitmq"] {
            let mut first = with_backend(backend, "t/0/5", b"a", "t1");
            first.run = "r1".into();
            let mut second = first.clone();
            second.run = "r2".into();
            let mut keys = Keys::default();
            keys.assign(&mut first);
            let mut keys = Keys::default();
            keys.assign(&mut second);
            let mut d = Dedup::default();
            assert!(d.keep(&first, RunKind::Deleted), "{backend}");
            assert!(
                d.keep(&second, RunKind::Deleted),
                "{backend}: a new dead letter"
            );
            assert_eq!(d.duplicates, 0, "{backend}");
            if unique_ids(backend) {
                for earlier in [RunKind::Kept, RunKind::Unsure] {
                    let mut d = Dedup::default();
                    assert!(d.keep(&first, earlier), "{backend}");
                    assert!(!d.keep(&second, RunKind::Deleted), "{backend}: merged");
                }
            }
        }
    }

    /// Issue 52, H1: a unique broker id is one dead letter (a copy archived again is
    /// dropped), unless the records differ (an id reused: both kept, counted).
    #[test]
    fn unique_ids_merge_copies_and_never_records_that_differ() {
        let a = with_backend("sqs", "m-1", b"a", "t1");
        let mut again = a.clone();
        again.archived_at = "later".into();
        // SQS's receive count is a property: it changes between two reads of one message.
        again
            .properties
            .push(("ApproximateReceiveCount".into(), "2".into()));
        let c = with_backend("sqs", "m-2", b"a", "t1");
        let reused = with_backend("sqs", "m-1", b"b", "t1");
        let mut v = vec![a.clone(), again, c, reused];
        let mut d = Dedup::default();
        let mut keys = Keys::default();
        v.retain_mut(|r| {
            keys.assign(r);
            d.keep(r, RunKind::Deleted)
        });
        let ids: Vec<(&str, &[u8])> = v
            .iter()
            .map(|r| (r.key.as_str(), r.body.as_bytes()))
            .collect();
        assert_eq!(ids, [("m-1", &b"a"[..]), ("m-2", b"a"), ("m-1", b"b")]);
        assert_eq!(
            (d.duplicates, d.differing, d.possibly_duplicated),
            (1, 1, 0)
        );
    }

    /// Issue 52, H1: RabbitMQ gives no id. Three events under one `message_id`, three
    /// tenants' payments with one body, two byte-identical dead letters: one run keeps all
    /// eight. A later run's twin merges into a copy a kept run left in the queue; it does
    /// not after a run that removed it and completed (a new dead letter); after a run that
    /// was killed with `--delete` it is kept and counted as possibly duplicated.
    #[test]
    fn rabbitmq_records_that_differ_in_anything_are_never_merged() {
        let l = |id: &str, body: &[u8], tenant: &str| with_backend("rabbitmq", id, body, tenant);
        let run = || {
            vec![
                l("order-1", b"created", "t1"),
                l("order-1", b"paid", "t1"),
                l("order-1", b"refunded", "t1"),
                l("sha256:x", b"pay", "t1"),
                l("sha256:x", b"pay", "t2"),
                l("sha256:x", b"pay", "t3"),
                l("p-7", b"seven", "t1"),
                l("p-7", b"seven", "t1"),
            ]
        };
        let read_runs = |kinds: &[RunKind]| {
            let mut d = Dedup::default();
            let mut kept = 0;
            for kind in kinds {
                let mut keys = Keys::default();
                for mut r in run() {
                    keys.assign(&mut r);
                    assert!(r.key.starts_with("amqp:"), "{}", r.key);
                    kept += u64::from(d.keep(&r, *kind));
                }
            }
            (kept, d.duplicates, d.possibly_duplicated)
        };
        assert_eq!(read_runs(&[RunKind::Deleted]), (8, 0, 0));
        assert_eq!(read_runs(&[RunKind::Kept, RunKind::Deleted]), (8, 8, 0));
        assert_eq!(
            read_runs(&[RunKind::Kept, RunKind::Kept, RunKind::Unsure]),
            (8, 16, 0)
        );
        assert_eq!(read_runs(&[RunKind::Deleted, RunKind::Deleted]), (16, 0, 0));
        assert_eq!(read_runs(&[RunKind::Unsure, RunKind::Deleted]), (16, 0, 8));
        // The quorum queue's delivery counter is no difference: a message handed back by a
        // kept run and read again is itself.
        let mut first = l("p-7", b"seven", "t1");
        let mut second = first.clone();
        second.headers.push(("x-delivery-count".into(), "1".into()));
        Keys::default().assign(&mut first);
        Keys::default().assign(&mut second);
        assert_eq!(first.key, second.key);
        // The broker's properties are part of it: another timestamp is another message.
        let mut third = l("p-7", b"seven", "t1");
        third.properties[0].1 = "1764576001".into();
        Keys::default().assign(&mut third);
        assert_ne!(first.key, third.key);
    }

    /// A version 1 record (no key) gets the key a version 2 writer gives it.
    #[test]
    fn a_version_1_record_gets_its_key_when_read() {
        let mut r = with_backend("rabbitmq", "order-1", b"paid", "t1");
        let line = object_bytes(std::slice::from_ref(&r));
        let text = String::from_utf8(line)
            .expect("utf-8")
            .replace("\"format_version\":2", "\"format_version\":1");
        let mut back =
            parse_object(text.as_bytes(), "batch-00001.jsonl").expect("a version 1 record");
        assert_eq!(back[0].format_version, 1);
        assert!(back[0].key.is_empty());
        Keys::default().assign(&mut back[0]);
        Keys::default().assign(&mut r);
        assert_eq!(back[0].key, r.key);
    }
}
