//! Reading an archive back, for `redrive --from-archive`: every run's manifest of one
//! channel, every object a manifest lists checked against it (size, sha256, compression)
//! and parsed, every record's body checked against its own sha256, and the records of all
//! runs deduplicated ([`super::Dedup`]). Nothing is trusted that does not check: the first
//! object or record that fails refuses the whole archive, naming it, before anything is
//! published.
//!
//! Objects that no manifest lists: a run writes its manifest before its first object and
//! lists each object right after writing it, so the one object a killed run can leave
//! unlisted is the next one of a manifest that is not `complete` — its messages never left
//! the queue (the module doc of [`super`]); it is `pending`, not read. Any other unlisted
//! object (a run folder without its manifest, a manifest emptied or replaced, a complete
//! one with more objects than it lists, a file that is no run's) may hold dead letters that
//! are in no queue any more: it is `unlisted`, and a replay refuses the archive naming it
//! unless asked to read those too (issue 52, L3). `<channel>/replays/` holds the replays'
//! ledgers ([`super::replayed`]), not archived messages.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;

use serde::Serialize;

use super::store::Store;
use super::{
    Dedup, Keys, MANIFEST, Manifest, Record, RunKind, object_name, parse_object, sha256_hex,
};

/// What an archive held for one channel.
#[derive(Debug, Clone, Default)]
pub struct Archived {
    /// Every record, deduplicated, in the order of the runs (by name: by time), then of the
    /// objects in each manifest, then of the lines.
    pub records: Vec<Record>,
    /// Runs with a manifest.
    pub runs: u64,
    /// Objects listed by a manifest, all read.
    pub objects: u64,
    /// Records read, duplicates included.
    pub read: u64,
    /// Records dropped as copies of one read before (a message archived by two runs).
    pub duplicates: u64,
    /// Records kept though they share a key with another, since they differ ([`Dedup`]).
    pub differing: u64,
    /// Records kept that may be copies of another ([`Dedup`]: RabbitMQ, after a run killed
    /// with `--delete`).
    pub possibly_duplicated: u64,
    /// Objects no manifest lists that may hold messages in no queue (module doc), by name;
    /// read when asked ([`read`]'s `unlisted`), else not.
    pub unlisted: Vec<String>,
    /// Whether the [`Archived::unlisted`] objects were read.
    pub unlisted_read: bool,
    /// The next object of a run that did not end, written and not listed: its messages
    /// never left the queue; not read.
    pub pending: Vec<String>,
    /// The runs whose manifest says `delete: false` (copies: their messages stayed in the
    /// queue), by name.
    pub copy_runs: BTreeSet<String>,
    /// Each run's manifest as read: the objects it lists, (name, sha256), by run name (for
    /// the cross-check against the journal, issue 52 second review F6).
    pub manifests: BTreeMap<String, Vec<(String, String)>>,
}

/// Reads every run of `channel` in `store` (see the module doc); with `unlisted`, also the
/// objects no manifest lists that are not a killed run's pending one. An error names the
/// manifest, object or record (with its line) that does not check.
pub async fn read(store: &Store, channel: &str, unlisted: bool) -> Result<Archived, String> {
    read_keyed(store, channel, unlisted, None).await
}

/// [`read`], with the target's HMAC key when it names one (issue 52, L4): every manifest
/// and every object it lists must then carry an HMAC that verifies with it
/// ([`Manifest::authenticate`]), and no unlisted object is read (none can be checked).
/// Without a key, a manifest that carries an HMAC is refused (it could not be checked).
pub async fn read_keyed(
    store: &Store,
    channel: &str,
    unlisted: bool,
    hmac_key: Option<&crate::integrity::Key>,
) -> Result<Archived, String> {
    if channel.is_empty() || channel.contains('/') {
        return Err(format!(
            "channel `{channel}`: not a folder name in an archive"
        ));
    }
    let keys = store.list(channel).await.map_err(|e| e.to_string())?;
    // `<channel>/<run>/<name>`: a run's files, by run.
    let mut runs: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut stray = Vec::new();
    for key in &keys {
        let mut parts = key.splitn(3, '/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(c), Some(super::replayed::FOLDER), Some(_)) if c == channel => {}
            (Some(c), Some(run), Some(name)) if c == channel && !name.contains('/') => {
                runs.entry(run).or_default().insert(name);
            }
            _ => stray.push(key.clone()),
        }
    }
    let mut out = Archived {
        unlisted_read: unlisted,
        ..Archived::default()
    };
    // Every record with what its run did and whether a manifest lists it, in order.
    let mut records: Vec<(Record, RunKind, bool)> = Vec::new();
    // Each record's written form when it carries a written key (format 2), for
    // [`drop_copies`].
    let mut forms: Vec<Option<Vec<u8>>> = Vec::new();
    for (run, names) in &runs {
        let mut listed: BTreeSet<String> = BTreeSet::new();
        let mut manifest = None;
        let mut run_records = Vec::new();
        if names.contains(MANIFEST) {
            let key = format!("{channel}/{run}/{MANIFEST}");
            let at = store.name(&key);
            let bytes = store.get(&key).await.map_err(|e| e.to_string())?;
            let m: Manifest = serde_json::from_slice(&bytes)
                .map_err(|e| format!("{at}: not an archive manifest: {e}"))?;
            m.check(&at)?;
            m.authenticate(hmac_key, run, &at)?;
            if m.channel != channel {
                return Err(format!(
                    "{at}: the manifest is channel `{}`'s, in channel `{channel}`'s folder",
                    m.channel
                ));
            }
            out.runs += 1;
            for entry in &m.objects {
                if entry.name.is_empty()
                    || entry.name.contains('/')
                    || entry.name == MANIFEST
                    || entry.name.starts_with('.')
                {
                    return Err(format!(
                        "{at}: lists an object named `{}`, which is not one of its run's",
                        entry.name
                    ));
                }
                let key = format!("{channel}/{run}/{}", entry.name);
                let name = store.name(&key);
                let stored = store.get(&key).await.map_err(|e| {
                    format!("{e} (listed by {at}: the archive is missing an object)")
                })?;
                let sum = sha256_hex(&stored);
                if stored.len() as u64 != entry.bytes || sum != entry.sha256 {
                    return Err(format!(
                        "{name}: {} bytes with sha256 {sum}, but its manifest ({at}) says {} bytes with sha256 {}: the object was changed or damaged",
                        stored.len(),
                        entry.bytes,
                        entry.sha256
                    ));
                }
                if let Some(k) = hmac_key
                    && !entry
                        .hmac_sha256
                        .as_deref()
                        .is_some_and(|tag| k.verifies(&stored, tag))
                {
                    return Err(format!(
                        "{name}: its HMAC (in its manifest {at}) is {} with target `{}`'s key (operations.hmacKeyEnv): the object was changed, or written with another key",
                        if entry.hmac_sha256.is_some() {
                            "not verified"
                        } else {
                            "missing, so it cannot be verified"
                        },
                        m.target
                    ));
                }
                let plain = match entry.compression.as_deref() {
                    None => stored,
                    Some("gzip") => gunzip(&stored).map_err(|e| format!("{name}: {e}"))?,
                    Some(other) => {
                        return Err(format!(
                            "{name}: compression `{other}` (its manifest {at}) is not one this dlqctl reads (gzip)"
                        ));
                    }
                };
                let got = checked(&plain, &name)?;
                if got.len() as u64 != entry.records {
                    return Err(format!(
                        "{name}: {} records, but its manifest ({at}) says {}",
                        got.len(),
                        entry.records
                    ));
                }
                out.read += got.len() as u64;
                out.objects += 1;
                run_records.extend(got.into_iter().map(|r| (r, true)));
                listed.insert(entry.name.clone());
            }
            out.manifests.insert(
                (*run).to_owned(),
                m.objects
                    .iter()
                    .map(|o| (o.name.clone(), o.sha256.clone()))
                    .collect(),
            );
            manifest = Some(m);
        }
        // The one object a killed run can leave unlisted: the next after those listed.
        let pending = manifest.as_ref().filter(|m| !m.complete).map(|m| {
            let n = u32::try_from(m.objects.len() + 1).unwrap_or(u32::MAX);
            [object_name(n, false), object_name(n, true)]
        });
        for n in names {
            if *n == MANIFEST || listed.contains(*n) {
                continue;
            }
            let key = format!("{channel}/{run}/{n}");
            if pending.as_ref().is_some_and(|p| p.iter().any(|p| p == n)) {
                out.pending.push(store.name(&key));
                continue;
            }
            out.unlisted.push(store.name(&key));
            if unlisted {
                let got = unlisted_records(store, &key, hmac_key.is_some()).await?;
                out.read += got.len() as u64;
                run_records.extend(got.into_iter().map(|r| (r, false)));
            }
        }
        if manifest.as_ref().is_some_and(|m| !m.delete) {
            out.copy_runs.insert((*run).to_owned());
        }
        // A run without its manifest: what it did with its messages is not known.
        let kind = manifest.as_ref().map_or(RunKind::Unsure, RunKind::of);
        let mut keys = Keys::default();
        for (mut r, listed) in run_records {
            forms.push(written_form(&r));
            keys.assign(&mut r);
            r.run = (*run).to_owned();
            records.push((r, kind, listed));
        }
    }
    for key in stray {
        out.unlisted.push(store.name(&key));
        if unlisted {
            let got = unlisted_records(store, &key, hmac_key.is_some()).await?;
            out.read += got.len() as u64;
            let mut keys = Keys::default();
            for mut r in got {
                forms.push(written_form(&r));
                keys.assign(&mut r);
                r.run = key.clone();
                records.push((r, RunKind::Unsure, false));
            }
        }
    }
    let copies = drop_copies(&mut records, &forms);
    let mut dedup = Dedup::default();
    out.records = records
        .into_iter()
        .filter(|(r, kind, _)| dedup.keep(r, *kind))
        .map(|(r, _, _)| r)
        .collect();
    out.duplicates = dedup.duplicates + copies;
    out.differing = dedup.differing;
    out.possibly_duplicated = dedup.possibly_duplicated;
    Ok(out)
}

/// Checks the archive as read against the journal (`--audit-log FILE`, issue 52 second
/// review F6): every `dlqctl/archive` record of `channel` and `target` that wrote into
/// `place` names its run and the objects its manifest listed when it ended (name, sha256).
/// Each of them must still be listed by that run's manifest: a manifest put back from an
/// older copy (a shorter list, signed or not), emptied, or a run folder removed, would else
/// hide archived dead letters that are in no queue any more. Returns what does not agree,
/// naming the journal's line; lines that are not JSON or not such a record are skipped.
pub fn against_journal(
    got: &Archived,
    journal: &str,
    at: &str,
    place: &str,
    channel: &str,
    target: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    for (i, line) in journal.lines().enumerate() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let s = |k: &str| v.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
        if s("kind") != "dlqctl/archive" || s("channel") != channel || s("target") != target {
            continue;
        }
        let (Some(run), Some(manifest)) = (
            v.get("run").and_then(serde_json::Value::as_str),
            v.get("manifest").and_then(serde_json::Value::as_str),
        ) else {
            continue;
        };
        let Some(run) = run.strip_prefix(&format!("{channel}/")) else {
            continue;
        };
        // The archive the run wrote into: the manifest's name less `/<channel>/<run>/…`;
        // a folder named another way (relative, a link) is the same one if it resolves so.
        let Some(root) = manifest.strip_suffix(&format!("/{channel}/{run}/{MANIFEST}")) else {
            continue;
        };
        let place = place.trim_end_matches('/');
        let same = root == place
            || std::fs::canonicalize(root)
                .ok()
                .is_some_and(|a| std::fs::canonicalize(place).ok() == Some(a));
        if !same {
            continue;
        }
        let journaled: Vec<(String, String)> = v
            .get("objects")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .map(|o| {
                let f = |k: &str| {
                    o.get(k)
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                (f("name"), f("sha256"))
            })
            .collect();
        let line = i + 1;
        match got.manifests.get(run) {
            None if !journaled.is_empty() => out.push(format!(
                "{manifest}: missing, though the journal ({at}:{line}) says run `{run}` archived {} object(s) there",
                journaled.len()
            )),
            None => {}
            Some(listed) => {
                let gone: Vec<&str> = journaled
                    .iter()
                    .filter(|o| !listed.contains(o))
                    .map(|(n, _)| n.as_str())
                    .collect();
                if !gone.is_empty() {
                    out.push(format!(
                        "{manifest} lists {} object(s), and not {} that the journal ({at}:{line}) says run `{run}` listed when it ended: a manifest put back from an older copy, or edited",
                        listed.len(),
                        gone.join(", ")
                    ));
                }
            }
        }
    }
    out
}

/// Drops the byte copies of a record (issue 52 fixes, F7): an object copied under another
/// name (`--read-unlisted` reads it) or a run folder copied under another run's name holds
/// records equal in every written field to the original's — the same written
/// [`Record::key`] (format 2: unique per dead letter in its run) and the same `archivedAt`
/// (two runs never read a queue in the same millisecond: the per-DLQ lock) — which are one
/// archived dead letter, not another the broker held: without this, each was published
/// again ([`Dedup`] keeps a twin of a completed `--delete` run's record as a new dead
/// letter). The record a manifest lists is kept (else the first read), with the runs of
/// its dropped copies in [`Record::copies_in`] (a ledger naming any of them counts). Version 1
/// records (no written key: two identical dead letters of one batch are equal in every
/// field) are never dropped here. `forms`: each record's [`written_form`], in the same
/// order. Returns how many were dropped.
fn drop_copies(records: &mut Vec<(Record, RunKind, bool)>, forms: &[Option<Vec<u8>>]) -> u64 {
    use std::collections::HashMap;
    let mut first: HashMap<Vec<u8>, usize> = HashMap::new();
    // Listed records first, then the rest, each in order.
    let order = (0..records.len())
        .filter(|i| records[*i].2)
        .chain((0..records.len()).filter(|i| !records[*i].2))
        .collect::<Vec<_>>();
    let mut dropped = vec![false; records.len()];
    for i in order {
        let Some(form) = forms.get(i).cloned().flatten() else {
            continue;
        };
        match first.entry(form) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(i);
            }
            std::collections::hash_map::Entry::Occupied(o) => {
                let kept = *o.get();
                let run = records[i].0.run.clone();
                if !records[kept].0.copies_in.contains(&run) && records[kept].0.run != run {
                    records[kept].0.copies_in.push(run);
                }
                dropped[i] = true;
            }
        }
    }
    let n = dropped.iter().filter(|d| **d).count() as u64;
    let mut at = 0;
    records.retain(|_| {
        at += 1;
        !dropped[at - 1]
    });
    n
}

/// A record as it was written (every field, `archivedAt` included; not the reader's `run`),
/// when it carries the key its writer gave it (format 2): what [`drop_copies`] compares.
fn written_form(r: &Record) -> Option<Vec<u8>> {
    (r.format_version >= 2 && !r.key.is_empty())
        .then(|| serde_json::to_vec(r).ok())
        .flatten()
}

/// The runs of `channel` in `store` that did not end (manifest `complete: false`: killed, or
/// still running) and wrote their manifest less than `hold_ms` before `now_ms`: what such
/// a run read may still be held by it (a Pub/Sub lease, an SQS visibility timeout, a Service
/// Bus lock), unseen by another run until the hold runs out (issue 52, second review). By
/// run, with when its manifest was last written (Unix ms). A manifest that does not read
/// is skipped (the replay's read names it).
pub async fn unfinished_within(
    store: &Store,
    channel: &str,
    hold_ms: i64,
    now_ms: i64,
) -> Result<Vec<(String, i64)>, String> {
    let mut out = Vec::new();
    for key in store.list(channel).await.map_err(|e| e.to_string())? {
        let mut parts = key.splitn(3, '/');
        let (Some(_), Some(run), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if name != MANIFEST {
            continue;
        }
        let Ok(bytes) = store.get(&key).await else {
            continue;
        };
        let Ok(m) = serde_json::from_slice::<Manifest>(&bytes) else {
            continue;
        };
        if m.complete {
            continue;
        }
        let Some(at) = store.modified_ms(&key).await else {
            continue;
        };
        if now_ms - at < hold_ms {
            out.push((run.to_owned(), at));
        }
    }
    Ok(out)
}

/// The records of an object no manifest lists (`--read-unlisted`), each checked against its
/// own sha256 only; refused when the target names a key: such an object carries no HMAC.
async fn unlisted_records(store: &Store, key: &str, keyed: bool) -> Result<Vec<Record>, String> {
    let name = store.name(key);
    if keyed {
        return Err(format!(
            "{name}: listed by no manifest, and an object no manifest lists carries no HMAC to check with the target's key (operations.hmacKeyEnv); --read-unlisted is refused with a key"
        ));
    }
    let stored = store.get(key).await.map_err(|e| e.to_string())?;
    let plain = if key.ends_with(".gz") {
        gunzip(&stored).map_err(|e| format!("{name}: {e}"))?
    } else {
        stored
    };
    checked(&plain, &name)
}

/// An object's records, each record's body checked against its own sha256.
fn checked(plain: &[u8], name: &str) -> Result<Vec<Record>, String> {
    let got = parse_object(plain, name)?;
    for (i, r) in got.iter().enumerate() {
        r.body_bytes()
            .map_err(|e| format!("{name}: record {}: {e}", i + 1))?;
    }
    Ok(got)
}

/// The bytes of a gzip stream, whole.
fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|e| format!("does not decompress as gzip: {e}"))?;
    Ok(out)
}

/// The report's account of the archive a replay read (`archive` in the JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveRead {
    /// `--from-archive`, as given.
    pub place: String,
    /// Runs with a manifest, and the objects they list (all read and checked).
    pub runs: u64,
    pub objects: u64,
    /// Records read, duplicates included.
    pub read: u64,
    /// Records that were copies of one read before (archived by two runs): replayed once.
    pub duplicates: u64,
    /// Records that share a key (an id) with another but differ: each replayed.
    pub differing: u64,
    /// Records replayed that may be copies of another (RabbitMQ gives no id: identical in
    /// everything, archived by a run killed with `--delete` and by a later run).
    pub possibly_duplicated: u64,
    /// Objects no manifest lists that may hold messages in no queue: a replay refuses the
    /// archive unless `--read-unlisted` (then they are read, `unlistedRead`).
    pub unlisted: u64,
    pub unlisted_read: bool,
    /// The first [`MAX_UNLISTED`] of them, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unlisted_objects: Vec<String>,
    /// The next object of a run killed before it listed it: its messages never left the
    /// queue; not read.
    pub pending: u64,
    /// Records a replay before this one published (their ledgers in `<channel>/replays/`):
    /// not published again (`--replay-again` publishes them).
    pub already_replayed: u64,
    /// The ledger this replay wrote into the archive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger: Option<String>,
    /// Records archived from another target or another of the channel's queues (`--from`):
    /// not replayed here.
    pub elsewhere: u64,
    /// Selected records an earlier replay published to another destination (its ledger's
    /// `to`): published to this one all the same.
    pub replayed_elsewhere: u64,
    /// Records published that an earlier replay to this destination published or may have
    /// (`--replay-again`): possibly duplicated.
    pub replayed_again: u64,
    /// Records published from a copy run (manifest `delete: false`): the message may still
    /// be in the dead-letter queue; possibly duplicated.
    pub from_copy: u64,
    /// The possibly duplicated the replay knew of when it published (the archive's, the
    /// replayed again, the copies'): in the report's figure, not a lost answer.
    #[serde(skip)]
    pub known_duplicates: u64,
}

/// The most unlisted objects a report names.
pub const MAX_UNLISTED: usize = 20;

#[cfg(test)]
mod tests {
    use super::super::{
        FORMAT_VERSION, MANIFEST_KIND, ObjectEntry, Origin, object_bytes, object_name,
    };
    use super::*;
    use crate::integrity::Key;
    use crate::status::Message;
    use crate::status::envelope::Read;

    fn record(id: &str, body: &[u8]) -> Record {
        let m = Message {
            id: id.into(),
            body: body.to_vec(),
            body_len: body.len() as u64,
            ..Message::default()
        };
        let origin = Origin {
            channel: "orders",
            target: "local",
            backend: "sqs",
            from: "orders-dlq",
            role: "dead-letter",
        };
        let e = Read {
            class: "poison".into(),
            raw_class: None,
            message: None,
            source: None,
            attempts: None,
            dead_lettered_ms: None,
            first_failure_ms: None,
        };
        Record::of(&m, &e, &origin, 0)
    }

    fn manifest(run: &str, objects: Vec<ObjectEntry>) -> Manifest {
        Manifest {
            format_version: FORMAT_VERSION,
            kind: MANIFEST_KIND.into(),
            channel: "orders".into(),
            target: "local".into(),
            backend: "sqs".into(),
            from: "orders-dlq".into(),
            role: "dead-letter".into(),
            run: run.into(),
            selection: serde_json::json!({}),
            delete: true,
            complete: true,
            records: objects.iter().map(|o| o.records).sum(),
            objects,
            started_at: "2026-12-02T00:00:00Z".into(),
            ended_at: None,
            operator: "test".into(),
            identity: None,
            reason: None,
            hmac_sha256: None,
        }
    }

    /// Puts `records` as object `n` of `run` (gzip when asked) and returns its entry.
    async fn put(s: &Store, run: &str, n: u32, records: &[Record], gz: bool) -> ObjectEntry {
        use std::io::Write as _;
        let mut bytes = object_bytes(records);
        if gz {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&bytes).expect("gzip");
            bytes = e.finish().expect("gzip");
        }
        let name = object_name(n, gz);
        s.put_durable(&format!("orders/{run}/{name}"), &bytes)
            .await
            .expect("put");
        ObjectEntry {
            name,
            records: records.len() as u64,
            bytes: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
            compression: gz.then(|| "gzip".to_owned()),
            hmac_sha256: None,
        }
    }

    async fn put_manifest(s: &Store, m: &Manifest) {
        let bytes = serde_json::to_vec(m).expect("json");
        s.put_durable(&format!("orders/{}/{MANIFEST}", m.run), &bytes)
            .await
            .expect("put");
    }

    #[tokio::test]
    async fn two_runs_are_read_checked_deduplicated_and_a_killed_runs_next_object_is_pending() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store::open(&super::super::Place::Dir(dir.path().into()))
            .await
            .expect("opens");
        let (a, b, c) = (record("a", b"1"), record("b", &[0xff]), record("c", b"3"));
        let one = put(&s, "r1", 1, &[a.clone(), b.clone()], false).await;
        // r1 crashed (a twin of a completed `--delete` run's record is a new dead letter).
        let mut crashed = manifest("r1", vec![one]);
        crashed.complete = false;
        put_manifest(&s, &crashed).await;
        // The rerun after a crash archived `b` again, and was killed after writing its
        // second object, before listing it.
        let two = put(&s, "r2", 1, &[b.clone(), c.clone()], true).await;
        put(&s, "r2", 2, &[record("d", b"4")], false).await;
        let mut killed = manifest("r2", vec![two]);
        killed.complete = false;
        put_manifest(&s, &killed).await;
        let got = read(&s, "orders", false).await.expect("reads");
        let ids: Vec<&str> = got.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(
            (got.runs, got.objects, got.read, got.duplicates),
            (2, 2, 4, 1)
        );
        assert!(got.unlisted.is_empty(), "{:?}", got.unlisted);
        assert_eq!(got.pending.len(), 1);
        assert!(got.pending[0].ends_with("orders/r2/batch-00002.jsonl"));
        assert_eq!(got.records[1].run, "r1");
    }

    /// Issue 52, L3: objects no manifest lists that are not a killed run's next one — a
    /// run folder without its manifest, a manifest emptied of its objects, a complete one
    /// listing fewer than are there — are named as unlisted (a replay refuses them), and
    /// read when asked.
    #[tokio::test]
    async fn objects_a_missing_or_emptied_manifest_does_not_list_are_unlisted_and_read_when_asked()
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store::open(&super::super::Place::Dir(dir.path().into()))
            .await
            .expect("opens");
        // r1: its manifest deleted.
        put(&s, "r1", 1, &[record("a", b"1")], false).await;
        // r2: its manifest emptied (complete, listing nothing).
        put(&s, "r2", 1, &[record("b", b"2")], false).await;
        put_manifest(&s, &manifest("r2", Vec::new())).await;
        // r3: complete, listing its first object of two.
        let one = put(&s, "r3", 1, &[record("c", b"3")], false).await;
        put(&s, "r3", 2, &[record("d", b"4")], true).await;
        put_manifest(&s, &manifest("r3", vec![one])).await;
        let got = read(&s, "orders", false).await.expect("reads");
        let ids: Vec<&str> = got.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["c"]);
        let names: Vec<&str> = got
            .unlisted
            .iter()
            .map(|n| n.rsplit_once("orders/").map_or(n.as_str(), |(_, t)| t))
            .collect();
        assert_eq!(
            names,
            [
                "r1/batch-00001.jsonl",
                "r2/batch-00001.jsonl",
                "r3/batch-00002.jsonl.gz"
            ]
        );
        assert!(got.pending.is_empty());
        let all = read(&s, "orders", true).await.expect("reads");
        let ids: Vec<&str> = all.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d"]);
        assert!(all.unlisted_read && all.unlisted.len() == 3);
    }

    #[tokio::test]
    async fn a_changed_object_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store::open(&super::super::Place::Dir(dir.path().into()))
            .await
            .expect("opens");
        let entry = put(&s, "r1", 1, &[record("a", b"1")], false).await;
        put_manifest(&s, &manifest("r1", vec![entry])).await;
        let key = "orders/r1/batch-00001.jsonl";
        let mut bytes = s.get(key).await.expect("get");
        let at = bytes.iter().rposition(|b| *b == b'1').expect("a digit");
        bytes[at] = b'2';
        s.put_durable(key, &bytes).await.expect("put");
        let e = read(&s, "orders", false).await.expect_err("refused");
        assert!(
            e.contains("batch-00001.jsonl") && e.contains("sha256"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_record_whose_body_does_not_match_is_refused_by_object_and_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store::open(&super::super::Place::Dir(dir.path().into()))
            .await
            .expect("opens");
        let mut bad = record("a", b"1");
        bad.body = "2".into();
        // The manifest agrees with the object: only the record's own checksum catches it.
        let entry = put(&s, "r1", 1, &[record("z", b"0"), bad], false).await;
        put_manifest(&s, &manifest("r1", vec![entry])).await;
        let e = read(&s, "orders", false).await.expect_err("refused");
        assert!(
            e.contains("batch-00001.jsonl: record 2") && e.contains("record `a`"),
            "{e}"
        );
    }

    /// Writes run `r1` of two records through the real writer ([`super::super::sink::Sink`]),
    /// signed with `key` when given, then edits record `a` consistently, as someone who
    /// can write the archive would: its body and `bodySha256`, the object, and the
    /// manifest entry's size and sha256 (the manifest's own HMAC, which needs the key, is
    /// left as it was). Returns the store.
    async fn tampered(dir: &std::path::Path, key: Option<&Key>) -> Store {
        let s = Store::open(&super::super::Place::Dir(dir.into()))
            .await
            .expect("opens");
        let mut m = manifest("r1", Vec::new());
        m.complete = false;
        let sink = super::super::sink::Sink::new(
            s.clone(),
            m,
            crate::spec::resolve::EnvelopeResolved::default(),
            false,
            false,
        )
        .with_key(key.cloned());
        let msg = |id: &str, body: &[u8]| Message {
            id: id.into(),
            body: body.to_vec(),
            body_len: body.len() as u64,
            ..Message::default()
        };
        sink.put(&[msg("a", b"{\"amount\":10}"), msg("b", b"{\"amount\":20}")])
            .await
            .expect("put");
        sink.finish(true).await.expect("finish");
        let object = "orders/r1/batch-00001.jsonl";
        let mut records =
            parse_object(&s.get(object).await.expect("object"), object).expect("parses");
        records[0].body = "{\"amount\":99999}".into();
        records[0].body_sha256 = sha256_hex(records[0].body.as_bytes());
        let bytes = super::super::object_bytes(&records);
        s.put_durable(object, &bytes).await.expect("put");
        let at = format!("orders/r1/{MANIFEST}");
        let mut m: Manifest =
            serde_json::from_slice(&s.get(&at).await.expect("manifest")).expect("json");
        m.objects[0].sha256 = sha256_hex(&bytes);
        m.objects[0].bytes = bytes.len() as u64;
        s.put_durable(&at, &serde_json::to_vec_pretty(&m).expect("json"))
            .await
            .expect("put");
        s
    }

    /// Issue 52, L4: an archive edited consistently (body, bodySha256, manifest) is read
    /// as it now says without a key — the checksums guard against damage only — and is
    /// refused, naming the manifest, when the target names a key; an object whose HMAC
    /// does not verify is refused by name; an archive written with a key is refused
    /// without one; an untouched signed archive reads.
    #[tokio::test]
    async fn an_archive_edited_consistently_is_refused_with_a_key() {
        let key = Key::new(b"the target's key");
        // Without a key: the edit goes through (what the checksums cannot tell).
        let dir = tempfile::tempdir().expect("tempdir");
        let s = tampered(dir.path(), None).await;
        let got = read(&s, "orders", false).await.expect("reads");
        assert_eq!(got.records[0].body, "{\"amount\":99999}");
        // With a key: refused, naming the manifest.
        let dir = tempfile::tempdir().expect("tempdir");
        let s = tampered(dir.path(), Some(&key)).await;
        let e = read_keyed(&s, "orders", false, Some(&key))
            .await
            .expect_err("refused");
        assert!(
            e.contains("r1/manifest.json") && e.contains("HMAC does not verify"),
            "{e}"
        );
        // Another key: refused the same way.
        let e = read_keyed(&s, "orders", false, Some(&Key::new(b"another")))
            .await
            .expect_err("refused");
        assert!(e.contains("HMAC does not verify"), "{e}");
        // The manifest sealed again (a writer's bug, or a key leaked): the object's own
        // HMAC still refuses it, by name.
        let at = format!("orders/r1/{MANIFEST}");
        let m: Manifest = serde_json::from_slice(&s.get(&at).await.expect("m")).expect("json");
        let m = m.sealed(Some(&key));
        s.put_durable(&at, &serde_json::to_vec(&m).expect("json"))
            .await
            .expect("put");
        let e = read_keyed(&s, "orders", false, Some(&key))
            .await
            .expect_err("refused");
        assert!(
            e.contains("batch-00001.jsonl: its HMAC") && e.contains("not verified"),
            "{e}"
        );
        // Written with a key, read without one: refused, saying so.
        let e = read(&s, "orders", false).await.expect_err("refused");
        assert!(e.contains("no key is configured"), "{e}");
        // Untouched and signed: read with the key; unsigned, refused with one.
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store::open(&super::super::Place::Dir(dir.path().into()))
            .await
            .expect("opens");
        let sink = super::super::sink::Sink::new(
            s.clone(),
            manifest("r1", Vec::new()),
            crate::spec::resolve::EnvelopeResolved::default(),
            false,
            true,
        )
        .with_key(Some(key.clone()));
        sink.put(&[Message {
            id: "a".into(),
            body: b"1".to_vec(),
            body_len: 1,
            ..Message::default()
        }])
        .await
        .expect("put");
        sink.finish(true).await.expect("finish");
        let got = read_keyed(&s, "orders", false, Some(&key))
            .await
            .expect("a signed archive reads");
        assert_eq!(got.records.len(), 1);
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store::open(&super::super::Place::Dir(dir.path().into()))
            .await
            .expect("opens");
        let entry = put(&s, "r1", 1, &[record("a", b"1")], false).await;
        put_manifest(&s, &manifest("r1", vec![entry])).await;
        let e = read_keyed(&s, "orders", false, Some(&key))
            .await
            .expect_err("refused");
        assert!(e.contains("carries no HMAC"), "{e}");
    }
}
