//! `operations.auditTo`: the audit record of every run on a target — redrive, archive,
//! refusal — delivered where the target's owners keep it, beside or instead of the operator's
//! own `--audit-log FILE`. A file on one operator's laptop is no audit trail for a team; an S3
//! prefix, or a topic with a long retention, that every run writes to is.
//!
//! To S3 or a folder: one object per record, through the archive's store
//! ([`Store::put_durable`]: S3 PutObject answered, then read back and compared; a folder:
//! fsynced and read back), named `<channel>/<UTC start>-<pid>-<kind>.json` so that records
//! never overwrite each other and list in time order. To a queue or topic of the target: one
//! message, the record as its JSON body with `dlq-audit-kind` and `content-type` headers,
//! published through the backend's replay door as given (no redrive counter), confirmed by
//! the broker. A record that does not land fails the run, as `--audit-log` does.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use crate::archive::store::Store;
use crate::backend::wire::Stats;
use crate::backend::{ConnectOptions, Reader, Replayer};
use crate::journal::AuditTo;
use crate::redrive::replay::Job;
use crate::redrive::{Destination, Tally};
use crate::spec::model::Target;
use crate::spec::resolve::Resolved;
use crate::status::Message;

/// Writes `record` (of `kind`: `redrive`, `archive`, `refused`) for channel `r` to `to`, and
/// returns where it landed.
pub async fn deliver(
    to: &AuditTo,
    r: &Resolved,
    target: &Target,
    opts: ConnectOptions,
    kind: &str,
    started_ms: i64,
    record: &impl Serialize,
) -> Result<String, String> {
    let mut bytes =
        serde_json::to_vec(record).map_err(|e| format!("cannot encode the record: {e}"))?;
    match to {
        AuditTo::Place(place) => {
            bytes.push(b'\n');
            let key = format!(
                "{}/{}-{kind}.json",
                r.channel,
                crate::archive::run_name(started_ms, std::process::id(), crate::archive::nonce())
            );
            let store = Store::open(place).await.map_err(|e| e.to_string())?;
            store
                .put_durable(&key, &bytes)
                .await
                .map_err(|e| e.to_string())?;
            Ok(store.name(&key))
        }
        AuditTo::Channel(name) => publish(r, target, opts, name, kind, bytes).await,
    }
}

/// One message to `name` on the channel's target, confirmed.
async fn publish(
    r: &Resolved,
    target: &Target,
    opts: ConnectOptions,
    name: &str,
    kind: &str,
    body: Vec<u8>,
) -> Result<String, String> {
    let reader = Reader::connect(&r.target, target, opts, Arc::new(Stats::default()))
        .map_err(|e| e.to_string())?;
    let replayer = Replayer::connect(reader, target).map_err(|e| e.to_string())?;
    let tally = Arc::new(Tally::default());
    let job = Job {
        to: Destination {
            name: name.to_owned(),
            source: false,
            ..Destination::default()
        },
        messages: vec![Message {
            id: String::new(),
            headers: vec![
                ("dlq-audit-kind".to_owned(), kind.to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ],
            properties: Vec::new(),
            body_len: body.len() as u64,
            body,
            published_ms: None,
            dead_lettered_ms: None,
            attempts: None,
            source: None,
            native_class: None,
            retained_since_ms: None,
        }],
        rate: None,
        stop: Arc::new(AtomicBool::new(false)),
        tally: Arc::clone(&tally),
        // The target's own operations name it: no ownership to prove.
        allow_unowned: true,
        as_is: true,
    };
    let at = format!("`{name}` on target `{}`", r.target);
    replayer
        .replay(r, &job)
        .await
        .map_err(|e| format!("publishing to {at}: {e}"))?;
    if tally.moved() == 1 {
        Ok(at)
    } else {
        Err(format!(
            "publishing to {at}: the broker did not confirm the record"
        ))
    }
}
