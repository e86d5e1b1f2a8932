//! Azure Service Bus apply: the only module that writes to a namespace, through ARM. A queue
//! is written with `PUT` (Queues_CreateOrUpdate), which replaces the queue's settings: an
//! update therefore reads the queue first and sends back every setting it has, with the
//! spec's owned ones changed, so nothing dlqctl does not own falls back to a default. Every
//! write stays inside the target's ownership prefixes (entities carry no tags); a delete of a
//! queue that holds messages needs `--allow-message-loss`.
//!
//! ARM's answers to a busy or changing namespace ("request limits and throttling", common
//! errors): a write throttled with 429 was not carried out, so it is sent again after the
//! answer's `Retry-After` (capped), at most [`WRITE_TRIES`] times in all, each wait said on
//! `-v`. A 409 Conflict (the queue is being changed by another request) stops the apply with
//! an error naming the queue: the write is not retried, since it may overwrite a person's
//! change; a new plan shows what the queue is now.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Map, Value, json};

use super::read::Reader;
use super::*;
use crate::backend::kit::errors::{AtTarget, BackendError};
use crate::backend::wire::http::{HttpError, WriteHttp};
use crate::plan::{Action, Change};

/// The members of SBQueueProperties that ARM answers but a PUT may not send (readOnly).
const READ_ONLY: [&str; 6] = [
    "countDetails",
    "createdAt",
    "updatedAt",
    "accessedAt",
    "sizeInBytes",
    "messageCount",
];

/// Tries of a write that ARM throttled (429), the first included.
pub const WRITE_TRIES: u32 = 4;
/// The wait after a 429 without `Retry-After`.
const THROTTLED_WAIT: Duration = Duration::from_secs(1);

/// Read-write access to one namespace, for apply.
#[derive(Debug, Clone)]
pub struct Writer {
    pub reader: Reader,
    http: WriteHttp,
}

fn refused(target: &str, message: String) -> BackendError {
    BackendError::Config {
        target: target.to_owned(),
        message,
    }
}

impl Writer {
    pub fn new(reader: Reader) -> Self {
        let http = reader.http.clone().into_writer();
        Writer { reader, http }
    }

    /// Applies one change (see the module doc for the guards).
    pub async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), BackendError> {
        let r = &change.resource;
        let target = &self.reader.target;
        if change.action == Action::Impossible {
            return Ok(());
        }
        if r.kind != Kind::Queue {
            return Err(refused(
                target,
                format!("{r}: only queues are written in this version (docs/azure.md)"),
            ));
        }
        if !self
            .reader
            .prefixes
            .iter()
            .any(|p| r.name.starts_with(p.as_str()))
        {
            return Err(refused(
                target,
                format!(
                    "{r} is outside the target's ownership prefixes ({}): dlqctl does not write it",
                    self.reader.prefixes.join(", ")
                ),
            ));
        }
        match change.action {
            Action::Create => self.put(change, Map::new()).await,
            Action::Update | Action::Replace => {
                let Some(now) = self.reader.get_queue(&r.name).await? else {
                    return Err(refused(target, format!("{r} no longer exists; plan again")));
                };
                let mut props = now["properties"].as_object().cloned().unwrap_or_default();
                for k in READ_ONLY {
                    props.remove(k);
                }
                self.put(change, props).await
            }
            Action::Delete => {
                let held = self
                    .reader
                    .get_queue(&r.name)
                    .await?
                    .and_then(|v| live_queue(&v).messages);
                if held.unwrap_or(1) > 0 && !allow_loss {
                    return Err(refused(
                        target,
                        format!(
                            "{r} holds {} messages: deleting it loses them; pass --allow-message-loss",
                            held.map_or_else(
                                || "an unknown number of".to_owned(),
                                |n| n.to_string()
                            )
                        ),
                    ));
                }
                let path = self.reader.queue_path(&r.name);
                self.write(&r.name, || {
                    self.http.send(
                        Method::DELETE,
                        "DELETE namespaces/queues/{queue}",
                        &path,
                        None,
                    )
                })
                .await?;
                Ok(())
            }
            Action::Impossible => Ok(()),
        }
    }

    /// PUTs the queue with `base` (its current settings, or none) and the change's owned
    /// settings: durations as ISO 8601, a `null` one left out (Service Bus's default).
    async fn put(
        &self,
        change: &Change,
        mut props: Map<String, Value>,
    ) -> Result<(), BackendError> {
        for (k, v) in change.desired.iter() {
            let value = match k.as_str() {
                LOCK_DURATION | TIME_TO_LIVE => iso_text(v).map(Value::String),
                _ if v.is_null() => None,
                _ => Some(v.clone()),
            };
            match value {
                Some(v) => {
                    props.insert(k.clone(), v);
                }
                None => {
                    props.remove(k);
                }
            }
        }
        let body = json!({ "properties": props });
        let path = self.reader.queue_path(&change.resource.name);
        self.write(&change.resource.name, || {
            self.http.call(
                Method::PUT,
                "PUT namespaces/queues/{queue}",
                &path,
                Some(&body),
            )
        })
        .await?;
        Ok(())
    }

    /// One write to queue `name`: sent again after a 429 (see the module doc), stopped with an
    /// error naming the queue on a 409.
    async fn write<T, F, Fut>(&self, name: &str, call: F) -> Result<T, BackendError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, HttpError>>,
    {
        let target = &self.reader.target;
        let mut attempt = 1;
        loop {
            match call().await {
                Ok(v) => return Ok(v),
                Err(e @ HttpError::Throttled { .. }) if attempt < WRITE_TRIES => {
                    let wait = e.retry_after().unwrap_or(THROTTLED_WAIT);
                    tracing::warn!(
                        "target {target}: queue `{name}`: ARM throttled the write (HTTP 429); try {} of {WRITE_TRIES} in {} ms (the server's Retry-After)",
                        attempt + 1,
                        wait.as_millis()
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) if e.status() == Some(409) => {
                    return Err(refused(
                        target,
                        format!(
                            "queue `{name}`: ARM answered 409 Conflict ({e}): the queue is being changed by another request, or its state does not allow this write. The write was not retried (it could overwrite that change) and the apply stops here: check the queue, then plan again"
                        ),
                    ));
                }
                Err(e) => return Err(e.at(target)),
            }
        }
    }
}

impl Reader {
    pub fn into_writer(self) -> Writer {
        Writer::new(self)
    }
}

impl crate::backend::kit::doors::Connected for Writer {
    type Error = BackendError;

    fn target(&self) -> &str {
        &self.reader.target
    }
}

impl crate::backend::kit::doors::Apply for Writer {
    async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), Self::Error> {
        Writer::apply(self, change, allow_loss).await
    }

    /// ARM answers a queue's PUT once it is written: nothing to wait for.
    async fn settle(&self, _applied: &[&Change]) -> Result<Vec<String>, Self::Error> {
        Ok(Vec::new())
    }
}
