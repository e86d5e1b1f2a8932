//! `operations.auditTo`: the audit record of every run on a target — redrive, archive,
//! refusal — delivered where the target's owners keep it, beside or instead of the operator's
//! own `--audit-log FILE`. A file on one operator's laptop is no audit trail for a team; an S3
//! prefix the whole team's runs write to is.
//!
//! One object per record, written through the archive's store ([`Store::put_durable`]: S3
//! PutObject answered, then read back and compared; a folder: fsynced and read back), named
//! `<channel>/<UTC start>-<pid>-<kind>.json` so that records never overwrite each other and
//! list in time order. A record that does not land fails the run, as `--audit-log` does.

use serde::Serialize;

use crate::archive::Place;
use crate::archive::store::Store;

/// Writes `record` (of `kind`: `redrive`, `archive`, `refused`) for `channel` to `to`, and
/// returns where it landed.
pub async fn deliver(
    to: &Place,
    channel: &str,
    kind: &str,
    started_ms: i64,
    record: &impl Serialize,
) -> Result<String, String> {
    let mut bytes =
        serde_json::to_vec(record).map_err(|e| format!("cannot encode the record: {e}"))?;
    bytes.push(b'\n');
    let key = format!(
        "{channel}/{}-{kind}.json",
        crate::archive::run_name(started_ms, std::process::id())
    );
    let store = Store::open(to).await.map_err(|e| e.to_string())?;
    store
        .put_durable(&key, &bytes)
        .await
        .map_err(|e| e.to_string())?;
    Ok(store.name(&key))
}
