//! Azure Service Bus apply: the only module that writes to a namespace, through ARM. A queue
//! is written with `PUT` (Queues_CreateOrUpdate), which replaces the queue's settings: an
//! update therefore reads the queue first and sends back every setting it has, with the
//! spec's owned ones changed, so nothing dlqctl does not own falls back to a default. Every
//! write stays inside the target's ownership prefixes (entities carry no tags); a delete of a
//! queue that holds messages needs `--allow-message-loss`.

use reqwest::Method;
use serde_json::{Map, Value, json};

use super::read::Reader;
use super::*;
use crate::backend::kit::errors::{AtTarget, BackendError};
use crate::backend::wire::http::WriteHttp;
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
                self.http
                    .send(
                        Method::DELETE,
                        "DELETE namespaces/queues/{queue}",
                        &self.reader.queue_path(&r.name),
                        None,
                    )
                    .await
                    .map_err(|e| e.at(target))?;
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
        self.http
            .call(
                Method::PUT,
                "PUT namespaces/queues/{queue}",
                &self.reader.queue_path(&change.resource.name),
                Some(&body),
            )
            .await
            .map_err(|e| e.at(&self.reader.target))?;
        Ok(())
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
