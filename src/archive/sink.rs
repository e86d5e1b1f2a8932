//! The archive as a mover's destination (`dlqctl archive`): each backend's mover hands a
//! batch of chosen messages to [`Sink::put`] instead of publishing them, and removes them
//! from the dead-letter queue (`--delete`) only once it returned. `put` writes the batch as
//! one object ([`Store::put_durable`]: durable and read back), then writes the run's
//! manifest again listing it: whatever leaves the queue is listed in a manifest first
//! (module doc of `crate::archive`).
//!
//! Backend-neutral: it sees only `status::Message`s, as the movers read them whole.

use tokio::sync::Mutex;

use super::store::Store;
use super::{Keys, Manifest, ObjectEntry, Origin, Record, object_bytes, object_name, rfc3339};
use crate::spec::resolve::EnvelopeResolved;
use crate::status::{Message, envelope};

/// Where one run writes, and what it wrote so far.
#[derive(Debug)]
pub struct Sink {
    store: Store,
    /// `<channel>/<run>`.
    folder: String,
    envelope: EnvelopeResolved,
    /// `--delete`: the movers remove what `put` archived.
    pub delete: bool,
    /// `--compress gzip`.
    pub gzip: bool,
    manifest: Mutex<Manifest>,
    /// The run's records' keys so far ([`Keys`]).
    keys: Mutex<Keys>,
    /// Whether the manifest was written once (before the first object: an object no
    /// manifest lists is then never the run's only trace).
    started: Mutex<bool>,
    /// The target's HMAC key (`operations.hmacKeyEnv`): each object's entry and the
    /// manifest then carry an HMAC (issue 52, L4).
    key: Option<crate::integrity::Key>,
    /// How long (ms) the backend holds what a run read from others, when it says
    /// ([`Sink::held_for`]): a Pub/Sub lease, an SQS visibility timeout.
    hold_ms: std::sync::atomic::AtomicI64,
}

impl Sink {
    /// A run writing into `store`, its manifest as it starts (`manifest.run` names the
    /// run's folder). Nothing is written before the first [`Sink::put`].
    pub fn new(
        store: Store,
        manifest: Manifest,
        envelope: EnvelopeResolved,
        delete: bool,
        gzip: bool,
    ) -> Sink {
        Sink {
            folder: format!("{}/{}", manifest.channel, manifest.run),
            store,
            envelope,
            delete,
            gzip,
            manifest: Mutex::new(manifest),
            keys: Mutex::new(Keys::default()),
            started: Mutex::new(false),
            key: None,
            hold_ms: std::sync::atomic::AtomicI64::new(0),
        }
    }

    /// The mover says how long what it reads stays held from other readers (ms) until it
    /// settles it: a killed run's messages stay unseen that long (issue 52, second review).
    pub fn held_for(&self, ms: i64) {
        self.hold_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// What [`Sink::held_for`] set (0: nothing held past the run's end).
    pub fn hold_ms(&self) -> i64 {
        self.hold_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Signs each object and the manifest with `key` (the target's `operations.hmacKeyEnv`).
    pub fn with_key(mut self, key: Option<crate::integrity::Key>) -> Sink {
        self.key = key;
        self
    }

    /// The run's folder, relative to the archive.
    pub fn folder(&self) -> &str {
        &self.folder
    }

    /// How the manifest is named (`s3://…` or a path).
    pub fn manifest_name(&self) -> String {
        self.store
            .name(&format!("{}/{}", self.folder, super::MANIFEST))
    }

    /// The manifest as written last (or as it starts).
    pub async fn manifest(&self) -> Manifest {
        self.manifest.lock().await.clone()
    }

    /// Writes `messages` as the run's next object, durably, then the manifest listing it.
    /// Returns only once both are durable: then, and only then, may they leave the queue.
    /// Nothing is listed when either write fails (an object written but not listed holds
    /// messages still in the queue; a reader ignores it).
    pub async fn put(&self, messages: &[Message]) -> Result<ObjectEntry, String> {
        let mut manifest = self.manifest.lock().await;
        let origin = Origin {
            channel: &manifest.channel,
            target: &manifest.target,
            backend: &manifest.backend,
            from: &manifest.from,
            role: &manifest.role,
        };
        let now = crate::status::now_ms();
        let mut records: Vec<Record> = messages
            .iter()
            .map(|m| Record::of(m, &envelope::read(&self.envelope, m), &origin, now))
            .collect();
        {
            let mut keys = self.keys.lock().await;
            for r in &mut records {
                keys.assign(r);
            }
        }
        // The manifest first, listing nothing yet: a reader then knows every object of this
        // run beyond the next one it would list as not this writer's (read.rs, issue 52 L3).
        let mut started = self.started.lock().await;
        if !*started {
            self.write(&manifest).await?;
            *started = true;
        }
        drop(started);
        let plain = object_bytes(&records);
        let bytes = if self.gzip { gzip(&plain)? } else { plain };
        let n = u32::try_from(manifest.objects.len() + 1).unwrap_or(u32::MAX);
        let name = object_name(n, self.gzip);
        self.store
            .put_durable(&format!("{}/{name}", self.folder), &bytes)
            .await
            .map_err(|e| e.to_string())?;
        let entry = ObjectEntry {
            name,
            records: records.len() as u64,
            bytes: bytes.len() as u64,
            sha256: super::sha256_hex(&bytes),
            compression: self.gzip.then(|| "gzip".to_owned()),
            hmac_sha256: self.key.as_ref().map(|k| k.sign(&bytes)),
        };
        let mut next = manifest.clone();
        next.objects.push(entry.clone());
        next.records += entry.records;
        self.write(&next).await?;
        *manifest = next;
        Ok(entry)
    }

    /// Marks the run ended (`complete` when nothing failed or was left short) and writes the
    /// manifest a last time, if the run wrote any object.
    pub async fn finish(&self, complete: bool) -> Result<(), String> {
        let mut manifest = self.manifest.lock().await;
        if manifest.objects.is_empty() {
            return Ok(());
        }
        let mut next = manifest.clone();
        next.complete = complete;
        next.ended_at = Some(rfc3339(crate::status::now_ms()));
        self.write(&next).await?;
        *manifest = next;
        Ok(())
    }

    async fn write(&self, m: &Manifest) -> Result<(), String> {
        let m = m.sealed(self.key.as_ref());
        let mut bytes = serde_json::to_vec_pretty(&m).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        self.store
            .put_durable(&format!("{}/{}", self.folder, super::MANIFEST), &bytes)
            .await
            .map_err(|e| e.to_string())
    }
}

/// gzip of `bytes`.
pub fn gzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes)
        .and_then(|()| e.finish())
        .map_err(|e| format!("gzip: {e}"))
}

/// The bytes of a gzip object.
pub fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|e| format!("gunzip: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{MANIFEST_KIND, Place, parse_object};

    fn manifest() -> Manifest {
        Manifest {
            format_version: crate::archive::FORMAT_VERSION,
            kind: MANIFEST_KIND.into(),
            channel: "orders".into(),
            target: "local".into(),
            backend: "sqs".into(),
            from: "orders-dlq".into(),
            role: "dead-letter".into(),
            run: "20261202T081500Z-1".into(),
            selection: serde_json::json!({}),
            delete: true,
            complete: false,
            records: 0,
            objects: Vec::new(),
            started_at: "2026-12-02T08:15:00Z".into(),
            ended_at: None,
            operator: "me@here pid 1".into(),
            identity: None,
            reason: None,
            hmac_sha256: None,
        }
    }

    #[tokio::test]
    async fn each_put_is_an_object_listed_in_the_manifest_with_its_checksum() {
        let dir = tempfile::tempdir().expect("tempdir");
        for gz in [false, true] {
            let place = Place::Dir(dir.path().join(format!("a{gz}")));
            let store = Store::open(&place).await.expect("opens");
            let sink = Sink::new(
                store.clone(),
                manifest(),
                EnvelopeResolved::default(),
                true,
                gz,
            );
            let m = |id: &str, body: &[u8]| Message {
                id: id.into(),
                body: body.to_vec(),
                body_len: body.len() as u64,
                ..Message::default()
            };
            sink.put(&[m("a", b"x"), m("b", &[0xff, 0])])
                .await
                .expect("put");
            sink.put(&[m("c", b"y")]).await.expect("put");
            sink.finish(true).await.expect("finish");
            let written: Manifest = serde_json::from_slice(
                &store
                    .get("orders/20261202T081500Z-1/manifest.json")
                    .await
                    .expect("manifest"),
            )
            .expect("json");
            assert!(written.complete && written.records == 3);
            assert_eq!(written.objects.len(), 2);
            let mut ids = Vec::new();
            for o in &written.objects {
                let bytes = store
                    .get(&format!("orders/20261202T081500Z-1/{}", o.name))
                    .await
                    .expect("object");
                assert_eq!(crate::archive::sha256_hex(&bytes), o.sha256);
                let plain = if gz {
                    gunzip(&bytes).expect("gz")
                } else {
                    bytes
                };
                for r in parse_object(&plain, &o.name).expect("records") {
                    ids.push(r.id.clone());
                    r.body_bytes().expect("body");
                }
            }
            assert_eq!(ids, ["a", "b", "c"]);
        }
    }
}
