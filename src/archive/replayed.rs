//! What the replays of an archive published (issue 52, M10): `redrive --from-archive`
//! takes nothing out of the archive, so without a record of its own a second replay of the
//! same archive published everything again, and `--limit N` the same first N each time.
//! Each replay writes a ledger into the archive, `<channel>/replays/<run>.json`: once before
//! it publishes (`complete: false`, every record it sets out to publish as `unsure`), then
//! once it ended (those the destination confirmed as `replayed`, those whose answer was
//! lost as `unsure`). The next replay of the channel to the same target reads every ledger:
//! a record replayed before is skipped and counted, so a replay continues where the last
//! one stopped; one a replay may or may not have published (killed, an answer lost) stops
//! the replay until the operator has looked (`--replay-again` publishes both kinds again).
//!
//! A record is named by its run and [`super::Record::key`] ([`reference`]): unique in the
//! archive once deduplicated, the same at every read.

use serde::{Deserialize, Serialize};

use super::Record;
use super::store::Store;
use crate::integrity::Key;

/// The folder of the ledgers, in the channel's folder (never a run's name: those start
/// with the time).
pub const FOLDER: &str = "replays";
/// The `kind` of a ledger.
pub const KIND: &str = "dlqctl/archive-replay";

/// How a ledger names a record: `<run>/<key>`.
pub fn reference(r: &Record) -> String {
    format!(
        "{}/{}",
        r.run,
        if r.key.is_empty() { &r.id } else { &r.key }
    )
}

/// Every name a ledger may give `r`: its [`reference`], and the same key under the runs of
/// the byte copies of it the reader dropped ([`Record::copies_in`]; issue 52 fixes, F7): a
/// replay that published the copy published the record.
pub fn references(r: &Record) -> Vec<String> {
    let key = if r.key.is_empty() { &r.id } else { &r.key };
    std::iter::once(reference(r))
        .chain(r.copies_in.iter().map(|run| format!("{run}/{key}")))
        .collect()
}

/// One replay's ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ledger {
    #[serde(rename = "format_version")]
    pub format_version: u32,
    pub kind: String,
    pub channel: String,
    pub target: String,
    /// Where the replay published (`--to`, or the main queue or topic).
    pub to: String,
    /// The replay's name ([`super::run_name`]), the ledger's file name without `.json`.
    pub run: String,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    pub operator: String,
    /// `false` while it runs, and forever when it was killed.
    pub complete: bool,
    /// Records the destination confirmed ([`reference`]).
    pub replayed: Vec<String>,
    /// Records that may or may not have been published.
    pub unsure: Vec<String>,
    /// With the target's HMAC key (`operations.hmacKeyEnv`): the HMAC-SHA256 (hex) of the
    /// ledger as written without this field. A ledger decides what is not published again,
    /// so with a key one that does not verify stops the replay (hx4 F: a forged, unsigned
    /// ledger listing every record hid the whole archive, "0 moved", exit 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac_sha256: Option<String>,
}

impl Ledger {
    /// The ledger's key in the archive.
    pub fn key(&self) -> String {
        format!("{}/{FOLDER}/{}.json", self.channel, self.run)
    }

    /// The bytes it is signed over: itself without [`Ledger::hmac_sha256`].
    fn unsigned(&self) -> Result<Vec<u8>, String> {
        let mut u = self.clone();
        u.hmac_sha256 = None;
        serde_json::to_vec_pretty(&u).map_err(|e| e.to_string())
    }

    /// Writes it, durably; signed with `key` when the target names one.
    pub async fn write(&self, store: &Store, key: Option<&Key>) -> Result<String, String> {
        let mut signed = self.clone();
        signed.hmac_sha256 = key
            .map(|k| self.unsigned().map(|b| k.sign(&b)))
            .transpose()?;
        let mut bytes = serde_json::to_vec_pretty(&signed).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        let key = self.key();
        store
            .put_durable(&key, &bytes)
            .await
            .map_err(|e| e.to_string())?;
        Ok(store.name(&key))
    }
}

/// What the ledgers of `channel` for `target` say.
#[derive(Debug, Clone, Default)]
pub struct Replayed {
    /// Published and confirmed, by reference.
    pub replayed: std::collections::HashSet<String>,
    /// May or may not have been published: by reference, the ledger that says so.
    pub unsure: std::collections::HashMap<String, String>,
    /// Published and confirmed to another destination (another `to`), by reference: not
    /// replayed for this one (issue 52 fixes, F4).
    pub elsewhere: std::collections::HashSet<String>,
    /// The ledgers (keys in the store) read that are not complete: replays killed, or
    /// still running.
    pub unfinished: std::collections::HashSet<String>,
}

/// Reads every ledger of `channel` in `store`, keeping those of `target`; what a ledger
/// of another destination than `to` lists counts only as [`Replayed::elsewhere`]. A
/// ledger that does not read is an error naming it: what it says decides what is published.
pub async fn read(
    store: &Store,
    channel: &str,
    target: &str,
    to: &str,
    hmac: Option<&Key>,
) -> Result<Replayed, String> {
    let mut out = Replayed::default();
    let folder = format!("{channel}/{FOLDER}");
    for key in store.list(&folder).await.map_err(|e| e.to_string())? {
        if !key.ends_with(".json") {
            continue;
        }
        let at = store.name(&key);
        let bytes = store.get(&key).await.map_err(|e| e.to_string())?;
        let l: Ledger = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{at}: not a replay ledger: {e}"))?;
        if l.kind != KIND {
            return Err(format!(
                "{at}: kind `{}` is not a replay ledger ({KIND})",
                l.kind
            ));
        }
        if let Some(k) = hmac {
            let ok = match &l.hmac_sha256 {
                Some(tag) => k.verifies(&l.unsigned()?, tag),
                None => false,
            };
            if !ok {
                return Err(format!(
                    "{at}: this replay ledger's HMAC does not verify with the target's key (operations.hmacKeyEnv): it was written without the key, or changed, and what a ledger lists is not published again, so the replay stops. If it is a ledger of yours written before the key was set, move it out of `{folder}` and replay again"
                ));
            }
        }
        if l.target != target {
            continue;
        }
        if !l.complete {
            out.unfinished.insert(key.clone());
        }
        if l.to != to {
            out.elsewhere.extend(l.replayed);
            continue;
        }
        out.replayed.extend(l.replayed);
        for r in l.unsure {
            out.unsure.entry(r).or_insert_with(|| at.clone());
        }
    }
    // Replayed by a later replay: no longer unsure.
    out.unsure.retain(|r, _| !out.replayed.contains(r));
    Ok(out)
}

/// The ledgers of `channel` for `target`, other than `mine` and those in `known` (read
/// before `mine` was written), that are not complete: replays that started while this one
/// did (issue 52 fixes, F1). Each replay writes its own ledger first, then asks this: of
/// two replays started together, at least one sees the other's, so they never both
/// publish. By name, with when and by whom each started.
pub async fn started_meanwhile(
    store: &Store,
    channel: &str,
    target: &str,
    mine: &str,
    known: &std::collections::HashSet<String>,
) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let folder = format!("{channel}/{FOLDER}");
    for key in store.list(&folder).await.map_err(|e| e.to_string())? {
        if !key.ends_with(".json") || key == mine || known.contains(&key) {
            continue;
        }
        let at = store.name(&key);
        let bytes = store.get(&key).await.map_err(|e| e.to_string())?;
        let l: Ledger = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{at}: not a replay ledger: {e}"))?;
        if l.kind == KIND && l.target == target && !l.complete {
            out.push(format!("{at} (started {} by {})", l.started_at, l.operator));
        }
    }
    Ok(out)
}
