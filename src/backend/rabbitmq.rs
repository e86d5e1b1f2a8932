//! RabbitMQ through the management HTTP API: queues, policies, exchanges and bindings.
//!
//! A channel becomes the classic TTL retry loop (a retry queue per distinct delay whose TTL
//! dead-letters back to the main queue, and a DLQ) or, on quorum queues, a delivery limit
//! that dead-letters to the DLQ. Dead-lettering and TTLs are set by policy (mutable, updated
//! in place; RabbitMQ's recommendation) or by queue x-arguments (immutable: a change replaces
//! the queue). Queues, policies and exchanges are only touched inside the target's ownership
//! prefixes, and live reads ask only for those names.
//!
//! Reads are few and light: one paginated queue listing per vhost without statistics, one
//! call each for policies, exchanges and bindings; message counts only for queues a plan
//! would drop.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::Method;
use serde_json::{Value, json};

use super::http::{HttpError, ReadHttp, WriteHttp, seg};
use crate::plan::{Action, Change};
use crate::resource::{Desired, Kind, Live, Props, ResourceId, Role};
use crate::spec::model::{Backend, DlxMode, ExchangeKind, QueueType, RetryModel};
use crate::spec::resolve::Resolved;

/// Queue arguments dlqctl owns; others on a live queue are reported, never touched.
pub const OWNED_ARGUMENTS: [&str; 7] = [
    "x-queue-type",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-delivery-limit",
    "x-dead-letter-strategy",
    "x-overflow",
];

/// Page size of queue listings (the management API's maximum).
pub const PAGE_SIZE: usize = 500;

/// A RabbitMQ object's identity (also how `import` names what it reads).
pub(crate) fn id(target: &str, kind: Kind, vhost: &str, name: &str) -> ResourceId {
    ResourceId {
        target: target.to_owned(),
        backend: Backend::Rabbitmq,
        kind,
        scope: vhost.to_owned(),
        name: name.to_owned(),
    }
}

/// What one queue should carry, as (policy key, value): written to a policy definition in
/// policy mode or as `x-` arguments in arguments mode.
type Settings = Vec<(&'static str, Value)>;

/// The desired resources of one channel (pure).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(rb) = &r.rabbitmq else {
        return Vec::new();
    };
    let vhost = rb.vhost.as_str();
    let mut out = Vec::new();
    let dl_exchange = || ("dead-letter-exchange", json!(""));
    let mut queues: Vec<(&str, Role, Role, Settings)> = Vec::new();

    let mut dlq = Settings::new();
    if let Some(t) = r.dead_letter_retention {
        dlq.push(("message-ttl", json!(t.as_millis())));
    }
    queues.push((
        &r.dead_letter,
        Role::DeadLetter,
        Role::DeadLetterPolicy,
        dlq,
    ));

    for stage in &r.retry_stages {
        queues.push((
            &stage.name,
            Role::Retry,
            Role::RetryPolicy,
            vec![
                ("message-ttl", json!(stage.delay.as_millis())),
                dl_exchange(),
                ("dead-letter-routing-key", json!(r.main)),
            ],
        ));
    }

    let mut main = Settings::new();
    if let Some(t) = r.retention {
        main.push(("message-ttl", json!(t.as_millis())));
    }
    match rb.retry_model {
        RetryModel::DeliveryLimit => {
            main.push(("delivery-limit", json!(r.max_attempts.saturating_sub(1))));
            main.push(dl_exchange());
            main.push(("dead-letter-routing-key", json!(r.dead_letter)));
            // Quorum dead-lettering is at-most-once unless both of these are set.
            main.push(("dead-letter-strategy", json!("at-least-once")));
            main.push(("overflow", json!("reject-publish")));
        }
        RetryModel::Ttl => {
            // In policy mode a rejected message goes to the first retry queue rather than being
            // dropped. In arguments mode the main queue stays plain, as consumers declare it.
            if rb.dlx == DlxMode::Policy
                && let Some(first) = r.retry_stages.first()
            {
                main.push(dl_exchange());
                main.push(("dead-letter-routing-key", json!(first.name)));
            }
        }
    }
    queues.push((&r.main, Role::Main, Role::MainPolicy, main));

    for (name, role, policy_role, settings) in queues {
        let mut props = Props::new();
        props.insert("durable".into(), json!(true));
        props.insert("auto_delete".into(), json!(false));
        props.insert(
            "type".into(),
            json!(match rb.queue_type {
                QueueType::Classic => "classic",
                QueueType::Quorum => "quorum",
            }),
        );
        for key in OWNED_ARGUMENTS {
            props.insert(format!("arguments.{key}"), Value::Null);
        }
        if rb.queue_type == QueueType::Quorum {
            props.insert("arguments.x-queue-type".into(), json!("quorum"));
        }
        if rb.dlx == DlxMode::Arguments {
            for (k, v) in &settings {
                props.insert(format!("arguments.x-{k}"), v.clone());
            }
        }
        out.push(Desired {
            id: id(&r.target, Kind::Queue, vhost, name),
            channel: r.channel.clone(),
            role,
            props,
            immutable: true,
            present: true,
        });
        // The policy carrying the settings in policy mode; in arguments mode (or with nothing
        // to set) a dlqctl policy of that name must not exist.
        let present = rb.dlx == DlxMode::Policy && !settings.is_empty();
        let mut props = Props::new();
        if present {
            props.insert("pattern".into(), json!(exact_pattern(name)));
            props.insert("apply-to".into(), json!("queues"));
            props.insert("priority".into(), json!(rb.policy_priority));
            for (k, v) in settings {
                props.insert(format!("definition.{k}"), v);
            }
        }
        out.push(Desired {
            id: id(&r.target, Kind::Policy, vhost, name),
            channel: r.channel.clone(),
            role: policy_role,
            props,
            immutable: false,
            present,
        });
    }

    if let Some(x) = &rb.exchange {
        out.push(Desired {
            id: id(&r.target, Kind::Exchange, vhost, &x.name),
            channel: r.channel.clone(),
            role: Role::Exchange,
            props: [
                ("type".to_owned(), json!(exchange_type(x.kind))),
                ("durable".to_owned(), json!(true)),
                ("auto_delete".to_owned(), json!(false)),
                ("internal".to_owned(), json!(false)),
            ]
            .into_iter()
            .collect(),
            immutable: true,
            present: true,
        });
        for key in &x.routing_keys {
            out.push(Desired {
                id: id(
                    &r.target,
                    Kind::Binding,
                    vhost,
                    &binding_name(&x.name, &r.main, key),
                ),
                channel: r.channel.clone(),
                role: Role::Binding,
                props: [
                    ("source".to_owned(), json!(x.name)),
                    ("destination".to_owned(), json!(r.main)),
                    ("routing_key".to_owned(), json!(key)),
                ]
                .into_iter()
                .collect(),
                immutable: true,
                present: true,
            });
        }
    }
    out
}

fn exchange_type(k: ExchangeKind) -> &'static str {
    match k {
        ExchangeKind::Direct => "direct",
        ExchangeKind::Topic => "topic",
        ExchangeKind::Fanout => "fanout",
        ExchangeKind::Headers => "headers",
    }
}

/// How a binding is named in plans: `exchange → queue [key]`.
pub fn binding_name(exchange: &str, queue: &str, key: &str) -> String {
    format!("{exchange} -> {queue} [{key}]")
}

/// The policy fields dlqctl reads besides its definition.
const POLICY_KEYS: [&str; 3] = ["pattern", "apply-to", "priority"];

/// Flat props from a management API object: `keys` as they are, and each entry of the
/// `nested` object (`arguments`, `definition`) as `nested.key`.
fn flat(item: &Value, keys: &[&str], nested: &str) -> Props {
    let mut props: Props = keys
        .iter()
        .filter_map(|k| item.get(*k).map(|v| ((*k).to_owned(), v.clone())))
        .collect();
    for (k, v) in item
        .get(nested)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        props.insert(format!("{nested}.{k}"), v.clone());
    }
    props
}

/// A policy pattern that matches exactly one queue name.
pub fn exact_pattern(name: &str) -> String {
    format!("^{}$", regex_escape(name))
}

fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Read-only view of one RabbitMQ target.
#[derive(Debug, Clone)]
pub struct Reader {
    pub target: String,
    http: ReadHttp,
    pub(crate) prefixes: Vec<String>,
}

impl Reader {
    pub fn new(target: &str, http: ReadHttp, prefixes: Vec<String>) -> Self {
        Reader {
            target: target.to_owned(),
            http,
            prefixes,
        }
    }

    /// Reads every owned queue, policy, exchange and binding of the given vhosts.
    pub async fn read(
        &self,
        vhosts: &BTreeSet<String>,
    ) -> Result<BTreeMap<ResourceId, Live>, HttpError> {
        let mut out = BTreeMap::new();
        for vhost in vhosts {
            self.read_vhost(vhost, &mut out).await?;
        }
        Ok(out)
    }

    /// The HTTP client with write access; only `Reader::into_writer` (apply) calls this.
    pub(super) fn http_for_writer(&self) -> WriteHttp {
        self.http.clone().into_writer()
    }

    /// The items of a management API listing whose `name` is inside the ownership prefixes.
    fn owned_items<'a>(
        &'a self,
        list: Option<&'a Value>,
    ) -> impl Iterator<Item = (&'a str, &'a Value)> + 'a {
        list.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(move |item| {
                let name = item.get("name").and_then(Value::as_str)?;
                self.owned(name).then_some((name, item))
            })
    }

    pub fn owned(&self, name: &str) -> bool {
        self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
    }

    async fn read_vhost(
        &self,
        vhost: &str,
        out: &mut BTreeMap<ResourceId, Live>,
    ) -> Result<(), HttpError> {
        let v = seg(vhost);
        let name_filter = format!(
            "^({})",
            self.prefixes
                .iter()
                .map(|p| regex_escape(p))
                .collect::<Vec<_>>()
                .join("|")
        );
        let mut page = 1;
        loop {
            let path = format!(
                "/api/queues/{v}?page={page}&page_size={PAGE_SIZE}&disable_stats=true&use_regex=true&name={}&columns=name,arguments,policy,type,durable,auto_delete",
                seg(&name_filter)
            );
            let Some(body) = self.http.get("GET /api/queues/{vhost}", &path).await? else {
                return Err(HttpError::Status {
                    api: format!("vhost `{vhost}`"),
                    status: 404,
                    reason: "the vhost does not exist; create it or fix `vhost` in the targets file or spec".into(),
                });
            };
            for (name, q) in self.owned_items(body.get("items")) {
                let mut props = flat(q, &["durable", "auto_delete", "type"], "arguments");
                if let Some(p) = q.get("policy").and_then(Value::as_str) {
                    props.insert("@policy".into(), json!(p));
                }
                out.insert(
                    id(&self.target, Kind::Queue, vhost, name),
                    Live {
                        props,
                        messages: None,
                    },
                );
            }
            let pages = body.get("page_count").and_then(Value::as_u64).unwrap_or(1);
            if page as u64 >= pages || page >= 10_000 {
                break;
            }
            page += 1;
        }

        let policies = self
            .http
            .get("GET /api/policies/{vhost}", &format!("/api/policies/{v}"))
            .await?;
        for (name, p) in self.owned_items(policies.as_ref()) {
            let props = flat(p, &POLICY_KEYS, "definition");
            out.insert(
                id(&self.target, Kind::Policy, vhost, name),
                Live {
                    props,
                    messages: None,
                },
            );
        }

        let exchanges = self
            .http
            .get("GET /api/exchanges/{vhost}", &format!("/api/exchanges/{v}?disable_stats=true&columns=name,type,durable,auto_delete,internal,arguments"))
            .await?;
        for (name, x) in self.owned_items(exchanges.as_ref()) {
            // dlqctl declares exchanges without arguments; any (alternate-exchange, ...) are
            // someone else's and show up in a plan as unmanaged settings.
            let props = flat(
                x,
                &["type", "durable", "auto_delete", "internal"],
                "arguments",
            );
            out.insert(
                id(&self.target, Kind::Exchange, vhost, name),
                Live {
                    props,
                    messages: None,
                },
            );
        }

        let bindings = self
            .http
            .get("GET /api/bindings/{vhost}", &format!("/api/bindings/{v}"))
            .await?;
        for b in bindings
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let get = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or_default();
            let (source, dest) = (get("source"), get("destination"));
            if get("destination_type") != "queue" || !self.owned(source) {
                continue;
            }
            let key = get("routing_key");
            let mut props: Props = [
                ("source".to_owned(), json!(source)),
                ("destination".to_owned(), json!(dest)),
                ("routing_key".to_owned(), json!(key)),
            ]
            .into_iter()
            .collect();
            if let Some(args) = b
                .get("arguments")
                .filter(|a| a.as_object().is_some_and(|o| !o.is_empty()))
            {
                props.insert("arguments".into(), args.clone());
            }
            props.insert("@properties_key".into(), json!(get("properties_key")));
            out.insert(
                id(
                    &self.target,
                    Kind::Binding,
                    vhost,
                    &binding_name(source, dest, key),
                ),
                Live {
                    props,
                    messages: None,
                },
            );
        }
        Ok(())
    }

    /// One policy by name, wherever its name is (import: the policy RabbitMQ applies to an
    /// owned queue may be named outside the prefixes). Same shape as [`read`](Self::read)'s.
    pub async fn policy(&self, vhost: &str, name: &str) -> Result<Option<Live>, HttpError> {
        let path = format!("/api/policies/{}/{}", seg(vhost), seg(name));
        let Some(p) = self
            .http
            .get("GET /api/policies/{vhost}/{name}", &path)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(Live {
            props: flat(&p, &POLICY_KEYS, "definition"),
            messages: None,
        }))
    }

    /// Messages in one queue (for the plan's drop warnings). `None` if it cannot be read.
    pub async fn message_count(&self, vhost: &str, queue: &str) -> Result<Option<u64>, HttpError> {
        let path = format!(
            "/api/queues/{}/{}?columns=messages,messages_ready,messages_unacknowledged",
            seg(vhost),
            seg(queue)
        );
        let body = self
            .http
            .get("GET /api/queues/{vhost}/{name}", &path)
            .await?;
        Ok(body.and_then(|b| {
            b.get("messages").and_then(Value::as_u64).or_else(|| {
                let ready = b.get("messages_ready").and_then(Value::as_u64)?;
                let unacked = b
                    .get("messages_unacknowledged")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                Some(ready + unacked)
            })
        }))
    }

    /// The policy RabbitMQ currently applies to a queue.
    pub async fn applied_policy(
        &self,
        vhost: &str,
        queue: &str,
    ) -> Result<Option<String>, HttpError> {
        // `disable_stats` would hide the `policy` field here; `columns` keeps the answer small.
        let path = format!(
            "/api/queues/{}/{}?columns=name,policy",
            seg(vhost),
            seg(queue)
        );
        let body = self
            .http
            .get("GET /api/queues/{vhost}/{name}", &path)
            .await?;
        Ok(body.and_then(|b| b.get("policy").and_then(Value::as_str).map(str::to_owned)))
    }
}

/// Read-write access to one RabbitMQ target, for apply.
#[derive(Debug, Clone)]
pub struct Writer {
    pub reader: Reader,
    http: WriteHttp,
}

impl Writer {
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
            (Kind::Queue, Action::Delete) => self.delete_queue(&v, &n, allow_loss).await,
            (Kind::Queue, Action::Replace) => {
                self.delete_queue(&v, &n, allow_loss).await?;
                self.put_queue(&v, &n, &change.desired).await
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
                if action == Action::Replace {
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
                .await
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
            (Kind::Topic | Kind::Alarm, _) => Ok(()),
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

    async fn delete_queue(&self, v: &str, n: &str, allow_loss: bool) -> Result<(), HttpError> {
        let guard = if allow_loss { "" } else { "?if-empty=true" };
        self.send(
            Method::DELETE,
            "DELETE /api/queues/{vhost}/{name}",
            &format!("/api/queues/{v}/{n}{guard}"),
            None,
        )
        .await
    }

    async fn send(
        &self,
        method: Method,
        api: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(), HttpError> {
        self.http.send(method, api, path, body).await.map(|_| ())
    }

    /// Waits until RabbitMQ applies each policy to its queue (the management API lags by up
    /// to several seconds), so that a plan right after apply sees the final state.
    pub async fn settle(&self, policies: &[(String, String)]) -> Result<Vec<String>, HttpError> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut pending: Vec<&(String, String)> = policies.iter().collect();
        while !pending.is_empty() {
            let mut still = Vec::new();
            for p in pending {
                let (vhost, queue) = p;
                if self.reader.applied_policy(vhost, queue).await?.as_deref()
                    != Some(queue.as_str())
                {
                    still.push(p);
                }
            }
            pending = still;
            if pending.is_empty() || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        Ok(pending
            .into_iter()
            .map(|(v, q)| format!("{q} (vhost {v})"))
            .collect())
    }
}

/// Broker-side observations for a plan: a queue whose dlqctl policy exists but is not the one
/// RabbitMQ applies (another policy with a higher priority wins, or it is still propagating).
pub fn policy_notes(
    desired: &[Desired],
    live: &BTreeMap<ResourceId, Live>,
) -> Vec<(ResourceId, String)> {
    let mut out = Vec::new();
    for d in desired
        .iter()
        .filter(|d| d.id.kind == Kind::Policy && d.present)
    {
        let queue_id = ResourceId {
            kind: Kind::Queue,
            ..d.id.clone()
        };
        let (Some(q), Some(_)) = (live.get(&queue_id), live.get(&d.id)) else {
            continue;
        };
        let applied = q.props.get("@policy").and_then(Value::as_str);
        if applied != Some(d.id.name.as_str()) {
            out.push((
                queue_id,
                match applied {
                    Some(other) => format!("RabbitMQ applies policy `{other}` to this queue, not dlqctl's `{}`: only one policy applies (the highest priority); raise `rabbitmq.policyPriority` or remove `{other}`", d.id.name),
                    None => format!("policy `{}` exists but RabbitMQ does not (yet) apply it to this queue", d.id.name),
                },
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_patterns_escape_dots() {
        assert_eq!(exact_pattern("orders.retry"), r"^orders\.retry$");
    }
}
