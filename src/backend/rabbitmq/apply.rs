//! RabbitMQ apply: the only module that writes to the management API.

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::{Value, json};

use super::Binding;
use super::read::Reader;
use super::*;
use crate::backend::wire::http::{HttpError, WriteHttp, seg};
use crate::plan::{Action, Change};
use crate::resource::{Props, ResourceId};

/// Read-write access to one RabbitMQ target, for apply.
#[derive(Debug, Clone)]
pub struct Writer {
    pub reader: Reader,
    http: WriteHttp,
}

impl Writer {
    pub fn target(&self) -> &str {
        &self.reader.target
    }

    pub fn new(reader: Reader, http: WriteHttp) -> Self {
        Writer { reader, http }
    }

    /// Applies one change. `allow_loss`: a queue with messages may be deleted; otherwise the
    /// delete carries `if-empty=true`, so RabbitMQ itself refuses to drop a message that
    /// arrived after the plan.
    pub async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), HttpError> {
        let r = &change.resource;
        let v = seg(&r.scope);
        let n = seg(&r.name);
        // Checked again here, whatever the plan said: nothing outside the prefixes is touched.
        let named = match r.kind {
            Kind::Binding => change
                .desired
                .get("source")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            _ => r.name.clone(),
        };
        if change.action != Action::Impossible && !self.reader.owned(&named) {
            return Err(HttpError::Refused {
                what: r.to_string(),
                reason: format!(
                    "refusing to change it: `{named}` is outside the target's ownership prefixes ({})",
                    self.reader.prefixes.join(", ")
                ),
            });
        }
        match (r.kind, change.action) {
            (_, Action::Impossible) => Ok(()),
            (Kind::Queue, Action::Delete) => self.delete_queue(r, allow_loss).await,
            (Kind::Queue, Action::Replace) => {
                // Every binding the delete drops, the spec's and everyone else's: as the plan
                // listed them and as they are now.
                let bindings = self.bindings_to_restore(change).await?;
                self.delete_queue(r, allow_loss).await?;
                self.put_queue(&v, &n, &change.desired).await?;
                self.rebind(r, &bindings).await
            }
            (Kind::Queue, _) => self.put_queue(&v, &n, &change.desired).await,
            (Kind::Policy, Action::Delete) => {
                self.send(
                    Method::DELETE,
                    "DELETE /api/policies/{vhost}/{name}",
                    &format!("/api/policies/{v}/{n}"),
                    None,
                )
                .await
            }
            (Kind::Policy, _) => {
                let definition: serde_json::Map<String, Value> = change
                    .desired
                    .iter()
                    .filter_map(|(k, val)| {
                        k.strip_prefix("definition.")
                            .map(|d| (d.to_owned(), val.clone()))
                    })
                    .filter(|(_, val)| !val.is_null())
                    .collect();
                let body = json!({
                    "pattern": change.desired.get("pattern"),
                    "apply-to": change.desired.get("apply-to"),
                    "priority": change.desired.get("priority"),
                    "definition": definition,
                });
                self.send(
                    Method::PUT,
                    "PUT /api/policies/{vhost}/{name}",
                    &format!("/api/policies/{v}/{n}"),
                    Some(&body),
                )
                .await
            }
            (Kind::Exchange, Action::Delete) => {
                self.send(
                    Method::DELETE,
                    "DELETE /api/exchanges/{vhost}/{name}",
                    &format!("/api/exchanges/{v}/{n}"),
                    None,
                )
                .await
            }
            (Kind::Exchange, action) => {
                let mut bindings = Vec::new();
                if action == Action::Replace {
                    bindings = self.bindings_to_restore(change).await?;
                    self.send(
                        Method::DELETE,
                        "DELETE /api/exchanges/{vhost}/{name}",
                        &format!("/api/exchanges/{v}/{n}"),
                        None,
                    )
                    .await?;
                }
                let body = json!({
                    "type": change.desired.get("type"),
                    "durable": true, "auto_delete": false, "internal": false, "arguments": {},
                });
                self.send(
                    Method::PUT,
                    "PUT /api/exchanges/{vhost}/{name}",
                    &format!("/api/exchanges/{v}/{n}"),
                    Some(&body),
                )
                .await?;
                self.rebind(r, &bindings).await
            }
            (Kind::Binding, action) => {
                let get = |k: &str| {
                    change
                        .desired
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let (x, q, key) = (
                    seg(&get("source")),
                    seg(&get("destination")),
                    get("routing_key"),
                );
                if matches!(action, Action::Delete | Action::Replace) {
                    // With no binding arguments, RabbitMQ's properties key is the routing key;
                    // a pruned binding carries the one RabbitMQ reported.
                    let props_key = match get("@properties_key") {
                        k if !k.is_empty() => seg(&k),
                        _ if key.is_empty() => "~".to_owned(),
                        _ => seg(&key),
                    };
                    self.send(
                        Method::DELETE,
                        "DELETE /api/bindings/{vhost}/e/{x}/q/{q}/{key}",
                        &format!("/api/bindings/{v}/e/{x}/q/{q}/{props_key}"),
                        None,
                    )
                    .await?;
                    if action == Action::Delete {
                        return Ok(());
                    }
                }
                let body = json!({"routing_key": key, "arguments": {}});
                self.send(
                    Method::POST,
                    "POST /api/bindings/{vhost}/e/{x}/q/{q}",
                    &format!("/api/bindings/{v}/e/{x}/q/{q}"),
                    Some(&body),
                )
                .await
            }
            (
                Kind::Topic
                | Kind::Alarm
                | Kind::Subscription
                | Kind::Acl
                | Kind::ShareGroup
                | Kind::Connector,
                _,
            ) => Ok(()),
        }
    }

    async fn put_queue(&self, v: &str, n: &str, desired: &Props) -> Result<(), HttpError> {
        let arguments: serde_json::Map<String, Value> = desired
            .iter()
            .filter_map(|(k, val)| {
                k.strip_prefix("arguments.")
                    .map(|a| (a.to_owned(), val.clone()))
            })
            .filter(|(_, val)| !val.is_null())
            .collect();
        let body = json!({
            "durable": desired.get("durable").cloned().unwrap_or(json!(true)),
            "auto_delete": false,
            "arguments": arguments,
        });
        self.send(
            Method::PUT,
            "PUT /api/queues/{vhost}/{name}",
            &format!("/api/queues/{v}/{n}"),
            Some(&body),
        )
        .await
    }

    /// Deletes a queue. Unless `allow_loss`: a classic queue with `if-empty=true`, so that
    /// RabbitMQ itself refuses to drop a message that arrived after the plan; a quorum (or
    /// stream) queue, which refuses `if-empty`, only when a count read just before is zero.
    async fn delete_queue(&self, r: &ResourceId, allow_loss: bool) -> Result<(), HttpError> {
        let (v, n) = (seg(&r.scope), seg(&r.name));
        let mut guard = "";
        if !allow_loss {
            let Some((kind, count)) = self.reader.queue_state(&r.scope, &r.name).await? else {
                // Already gone: nothing to delete.
                return Ok(());
            };
            if kind == "classic" {
                guard = "?if-empty=true";
            } else {
                match count {
                    Some(0) => {}
                    Some(n) => {
                        return Err(HttpError::Refused {
                            what: r.to_string(),
                            reason: format!(
                                "refusing to delete this {kind} queue: it holds {n} messages now (RabbitMQ cannot delete it only if empty); move them first, or pass --allow-message-loss"
                            ),
                        });
                    }
                    None => {
                        return Err(HttpError::Refused {
                            what: r.to_string(),
                            reason: format!(
                                "refusing to delete this {kind} queue: RabbitMQ reports no message count for it yet (RabbitMQ cannot delete it only if empty); try again in a few seconds, or pass --allow-message-loss"
                            ),
                        });
                    }
                }
            }
        }
        self.send(
            Method::DELETE,
            "DELETE /api/queues/{vhost}/{name}",
            &format!("/api/queues/{v}/{n}{guard}"),
            None,
        )
        .await
    }

    /// The bindings a replace must re-create: those the plan listed, and those the object has
    /// now (one made since the plan is not lost either). The default exchange's are left out.
    async fn bindings_to_restore(&self, change: &Change) -> Result<Vec<Binding>, HttpError> {
        let r = &change.resource;
        let mut out = super::plan::rebinds(change);
        for b in self.reader.bindings_of(r.kind, &r.scope, &r.name).await? {
            if !out.contains(&b) {
                out.push(b);
            }
        }
        Ok(out)
    }

    /// Re-creates bindings a replace dropped; names every one that could not be.
    async fn rebind(&self, r: &ResourceId, bindings: &[Binding]) -> Result<(), HttpError> {
        let v = seg(&r.scope);
        let mut failed = Vec::new();
        for b in bindings {
            let (x, d) = (seg(&b.source), seg(&b.destination));
            let (api, path) = if b.destination_type == "exchange" {
                (
                    "POST /api/bindings/{vhost}/e/{x}/e/{y}",
                    format!("/api/bindings/{v}/e/{x}/e/{d}"),
                )
            } else {
                (
                    "POST /api/bindings/{vhost}/e/{x}/q/{q}",
                    format!("/api/bindings/{v}/e/{x}/q/{d}"),
                )
            };
            let body = json!({
                "routing_key": b.routing_key,
                "arguments": b.arguments.clone().unwrap_or_else(|| json!({})),
            });
            if let Err(e) = self.send(Method::POST, api, &path, Some(&body)).await {
                failed.push(format!(
                    "{}: {e}",
                    binding_name(&b.source, &b.destination, &b.routing_key)
                ));
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        Err(HttpError::Refused {
            what: r.to_string(),
            reason: format!(
                "re-created, but {} of its {} bindings could not be re-created; add them by hand: {}",
                failed.len(),
                bindings.len(),
                failed.join("; ")
            ),
        })
    }

    async fn send(
        &self,
        method: Method,
        api: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(), HttpError> {
        let deletes = method == Method::DELETE;
        let status = self.http.send(method, api, path, body).await?;
        // Only a delete may take "not found" as done: any other write that RabbitMQ did not
        // acknowledge (the vhost, exchange or queue is gone) did not happen.
        if status == reqwest::StatusCode::NOT_FOUND && !deletes {
            return Err(HttpError::Status {
                api: format!("{api} ({path})"),
                status: 404,
                reason: "not found: the vhost or an object this write needs no longer exists; the write was not made".into(),
            });
        }
        Ok(())
    }

    /// Waits until the next plan can see what was written: each policy applied to its queue
    /// (as the plan's listing shows it: at once), and each queue this apply created showing
    /// its message count in the statistics (up to 5 s later; until then a plan could not count
    /// what a replace or delete of it would drop, and would refuse it).
    pub async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, HttpError> {
        let written = |kind: Kind, actions: &[Action]| -> Vec<(String, String)> {
            applied
                .iter()
                .filter(|c| c.resource.kind == kind && actions.contains(&c.action))
                .map(|c| (c.resource.scope.clone(), c.resource.name.clone()))
                .collect()
        };
        let policies = written(
            Kind::Policy,
            &[Action::Create, Action::Update, Action::Replace],
        );
        let queues = written(Kind::Queue, &[Action::Create, Action::Replace]);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut pending: Vec<(&(String, String), bool)> = policies
            .iter()
            .map(|p| (p, false))
            .chain(queues.iter().map(|q| (q, true)))
            .collect();
        while !pending.is_empty() {
            let mut still = Vec::new();
            let mut by_listing: BTreeMap<(&str, bool), Vec<&(String, String)>> = BTreeMap::new();
            for (p, stats) in pending {
                by_listing.entry((p.0.as_str(), stats)).or_default().push(p);
            }
            for ((vhost, stats), ps) in by_listing {
                let names: Vec<&str> = ps.iter().map(|(_, q)| q.as_str()).collect();
                let listed = self.reader.settle_listing(vhost, &names, stats).await?;
                // A queue that does not exist (an apply stopped before creating it, or someone
                // deleted it) has nothing to show; the next plan lists its create.
                still.extend(
                    ps.into_iter()
                        .filter(|(_, queue)| match listed.get(queue) {
                            None => false,
                            Some(value) if stats => !value.as_ref().is_some_and(Value::is_u64),
                            Some(policy) => {
                                policy.as_ref().and_then(Value::as_str) != Some(queue.as_str())
                            }
                        })
                        .map(|p| (p, stats)),
                );
            }
            pending = still;
            if pending.is_empty() || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        Ok(pending
            .into_iter()
            .map(|((v, q), stats)| {
                if stats {
                    format!("queue {q} (vhost {v}): its message count")
                } else {
                    format!("{q} (vhost {v})")
                }
            })
            .collect())
    }
}

/// The only way to a [`Writer`]: from the reader of the same target.
impl Reader {
    pub fn into_writer(self) -> Writer {
        let http = self.http_for_writer();
        Writer::new(self, http)
    }
}

impl crate::backend::kit::doors::Connected for Writer {
    type Error = crate::backend::wire::http::HttpError;

    fn target(&self) -> &str {
        Writer::target(self)
    }
}

impl crate::backend::kit::doors::Apply for Writer {
    async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), Self::Error> {
        Writer::apply(self, change, allow_loss).await
    }

    async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, Self::Error> {
        Writer::settle(self, applied).await
    }
}
