//! Azure Service Bus apply: the only module that writes to a namespace, through ARM. A queue,
//! topic or subscription is written with `PUT` (Queues_CreateOrUpdate, Topics_CreateOrUpdate,
//! Subscriptions_CreateOrUpdate), which replaces the entity's settings: an update therefore
//! reads it first and sends back every setting it has (less the readOnly ones of its
//! definition: SBQueueProperties, SBTopicProperties, SBSubscriptionProperties), with the
//! spec's owned ones changed, so nothing dlqctl does not own falls back to a default. Every
//! write stays inside the target's ownership prefixes (entities carry no tags; a
//! subscription's name is `topic/subscriptions/sub`, owned through its topic); a delete of an
//! entity that holds messages (a topic: its subscriptions') needs `--allow-message-loss`.
//!
//! ARM's answers to a busy or changing namespace ("request limits and throttling", common
//! errors): a write throttled with 429 was not carried out, so it is sent again after the
//! answer's `Retry-After` (capped), at most [`WRITE_TRIES`] times in all, each wait said on
//! `-v`. A 409 Conflict (the entity is being changed by another request) stops the apply with
//! an error naming it: the write is not retried, since it may overwrite a person's change; a
//! new plan shows what the entity is now.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Map, Value, json};

use super::read::Reader;
use super::*;
use crate::backend::kit::errors::{AtTarget, BackendError};
use crate::backend::wire::http::{HttpError, WriteHttp};
use crate::plan::{Action, Change};

/// The members of SBQueueProperties, SBTopicProperties and SBSubscriptionProperties that
/// ARM answers but a PUT may not send (readOnly in Queue.json, topics.json,
/// subscriptions.json, 2021-11-01).
const READ_ONLY: [&str; 7] = [
    "countDetails",
    "createdAt",
    "updatedAt",
    "accessedAt",
    "sizeInBytes",
    "messageCount",
    "subscriptionCount",
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
        if !matches!(r.kind, Kind::Queue | Kind::Topic | Kind::Subscription) {
            return Err(refused(
                target,
                format!("{r}: only queues, topics and subscriptions are written (docs/azure.md)"),
            ));
        }
        if !self.reader.owns_entity(r) {
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
                let Some(now) = self.reader.get_entity(r).await? else {
                    return Err(refused(target, format!("{r} no longer exists; plan again")));
                };
                let mut props = now["properties"].as_object().cloned().unwrap_or_default();
                for k in READ_ONLY {
                    props.remove(k);
                }
                self.put(change, props).await
            }
            Action::Delete => {
                // Deleting a topic deletes every subscription of it: none may be another's.
                if r.kind == Kind::Topic {
                    let foreign: Vec<String> = self
                        .reader
                        .subscriptions_of(&r.name)
                        .await?
                        .into_iter()
                        .filter(|s| !self.reader.owns(s))
                        .collect();
                    if !foreign.is_empty() {
                        return Err(refused(
                            target,
                            format!(
                                "{r} has subscriptions outside the ownership prefixes ({}): deleting the topic would delete them; dlqctl does not",
                                foreign.join(", ")
                            ),
                        ));
                    }
                }
                let held = crate::backend::kit::doors::Read::message_count(&self.reader, r).await?;
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
                let (path, api) = self.reader.arm_path(r);
                let what = format!("DELETE {api}");
                self.write(r, || self.http.send(Method::DELETE, &what, &path, None))
                    .await?;
                Ok(())
            }
            Action::Impossible => Ok(()),
        }
    }

    /// PUTs the entity with `base` (its current settings, or none) and the change's owned
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
        let (path, api) = self.reader.arm_path(&change.resource);
        let what = format!("PUT {api}");
        self.write(&change.resource, || {
            self.http.call(Method::PUT, &what, &path, Some(&body))
        })
        .await?;
        Ok(())
    }

    /// One write to entity `id`: sent again after a 429 (see the module doc), stopped with an
    /// error naming the entity on a 409.
    async fn write<T, F, Fut>(&self, id: &ResourceId, call: F) -> Result<T, BackendError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, HttpError>>,
    {
        let target = &self.reader.target;
        let name = id;
        let mut attempt = 1;
        loop {
            match call().await {
                Ok(v) => return Ok(v),
                Err(e @ HttpError::Throttled { .. }) if attempt < WRITE_TRIES => {
                    let wait = e.retry_after().unwrap_or(THROTTLED_WAIT);
                    tracing::warn!(
                        "target {target}: {name}: ARM throttled the write (HTTP 429); try {} of {WRITE_TRIES} in {} ms (the server's Retry-After)",
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
                            "{name}: ARM answered 409 Conflict ({e}): it is being changed by another request, or its state does not allow this write. The write was not retried (it could overwrite that change) and the apply stops here: check it, then plan again"
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
