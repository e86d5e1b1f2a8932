//! RabbitMQ reads through a [`ReadHttp`], which can only GET: live queues, policies, exchanges
//! and bindings inside the ownership prefixes, single policies, message counts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

pub use super::Binding;
use super::import::{Scope, counts, foreign_policies, group};
use super::*;
use crate::backend::kit::connect::{ConnectOptions, env_value};
use crate::backend::kit::errors::{AtTarget, BackendError};
use crate::backend::kit::import::{Found, NO_SPEC_CHANNEL, Prunable};
use crate::backend::wire::Stats;
use crate::backend::wire::http::HttpConfig;
use crate::backend::wire::http::{HttpError, ReadHttp, WriteHttp, seg};
use crate::backend::wire::retry::ReadBudget;
use crate::plan::Note;
use crate::resource::{Desired, Live, Props, Role};
use crate::spec::model::Target;

/// The policy fields dlqctl reads besides its definition.
pub(super) const POLICY_KEYS: [&str; 3] = ["pattern", "apply-to", "priority"];

/// Flat props from a management API object: `keys` as they are, and each entry of the
/// `nested` object (`arguments`, `definition`) as `nested.key`.
pub(super) fn flat(item: &Value, keys: &[&str], nested: &str) -> Props {
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

/// A management API answer of a shape the API never returns: an error naming the call,
/// never an empty state (which a plan would turn into creates).
pub(super) fn bad_shape(api: &str, path: &str, what: &str) -> HttpError {
    HttpError::Decode {
        api: format!("{api} ({path})"),
        reason: what.to_owned(),
    }
}

/// The list a listing answered, or an error naming the call.
pub(super) fn list<'a>(
    api: &str,
    path: &str,
    body: &'a Value,
) -> Result<&'a Vec<Value>, HttpError> {
    body.as_array()
        .ok_or_else(|| bad_shape(api, path, "expected a JSON list"))
}

/// A listed object's `name`, or an error naming the call.
pub(super) fn item_name<'a>(api: &str, path: &str, item: &'a Value) -> Result<&'a str, HttpError> {
    let name = item
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad_shape(api, path, "a listed object has no string `name`"))?;
    // RabbitMQ refuses names over 255 bytes: a longer one is a broken or hostile server, and
    // would be sent back in every later call.
    if name.len() > MAX_NAME {
        return Err(bad_shape(
            api,
            path,
            &format!(
                "a listed name is {} bytes long (RabbitMQ allows {MAX_NAME}): `{}…`",
                name.len(),
                name.chars().take(40).collect::<String>()
            ),
        ));
    }
    Ok(name)
}

/// The longest queue, exchange or policy name RabbitMQ accepts, in bytes.
const MAX_NAME: usize = 255;

/// Messages held by a queue as the management API reports them (`None`: not reported).
pub(super) fn count(b: &Value) -> Option<u64> {
    b.get("messages").and_then(Value::as_u64).or_else(|| {
        let ready = b.get("messages_ready").and_then(Value::as_u64)?;
        let unacked = b
            .get("messages_unacknowledged")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Some(ready + unacked)
    })
}

/// A 404 on a vhost listing: the vhost does not exist (or was deleted since the last call).
/// The columns of a queue that a plan reads (listings and single reads alike).
const QUEUE_COLUMNS: &str = "name,arguments,policy,type,durable,auto_delete";

/// Moves the objects `ids` names from `all` (a listing) into `out`.
fn keep(
    out: &mut BTreeMap<ResourceId, Live>,
    mut all: BTreeMap<ResourceId, Live>,
    ids: &[&ResourceId],
) {
    for i in ids {
        if let Some(l) = all.remove(*i) {
            out.insert((*i).clone(), l);
        }
    }
}

/// The most queue names one filtered listing of apply's re-check asks for (the regex travels
/// in the URL).
const RECHECK_NAMES: usize = 50;

/// A group's re-check lists its vhost only while the vhost holds at most this many queues per
/// object of the group; in a larger vhost it reads each object by name. The broker builds the
/// whole vhost's listing for every filtered call, so listings per group grow with the square of
/// the estate: measured, +16 % broker CPU at 1,000 channels (3,000 queues, groups of 32) and
/// about 2.7× at 5,000 (15,000 queues) against a GET per object (BENCHMARKS.md §12).
const LISTING_PER_OBJECT: u64 = 128;

/// A queue object of the management API in the flat shape a plan compares; a field of the
/// wrong type is an error naming the call.
fn queue_props(api: &str, path: &str, name: &str, q: &Value) -> Result<Props, HttpError> {
    if q.get("arguments")
        .is_some_and(|a| !a.is_object() && !a.is_array())
    {
        return Err(bad_shape(
            api,
            path,
            &format!("queue `{name}`: `arguments` is not an object"),
        ));
    }
    let mut props = flat(q, &["durable", "auto_delete", "type"], "arguments");
    match q.get("policy") {
        None | Some(Value::Null) => {}
        Some(Value::String(p)) => {
            props.insert("@policy".into(), json!(p));
        }
        Some(_) => {
            return Err(bad_shape(
                api,
                path,
                &format!("queue `{name}`: `policy` is not a string"),
            ));
        }
    }
    Ok(props)
}

pub(super) fn no_vhost(vhost: &str) -> HttpError {
    HttpError::Status {
        api: format!("vhost `{vhost}`"),
        status: 404,
        reason: "the vhost does not exist; create it or fix `vhost` in the targets file or spec"
            .into(),
    }
}

/// Read-only view of one RabbitMQ target.
#[derive(Debug, Clone)]
pub struct Reader {
    pub target: String,
    pub(super) http: ReadHttp,
    pub(crate) prefixes: Vec<String>,
    /// Each vhost's queue count, as a re-check's listing last found it (`total_count`):
    /// whether the next group lists the vhost or reads its objects one by one.
    vhost_queues: Arc<std::sync::Mutex<BTreeMap<String, u64>>>,
}

impl Reader {
    /// A reader for the target: the management URL, and the credentials from the environment
    /// variables the target names (never from the file itself).
    pub fn connect(
        name: &str,
        target: &Target,
        opts: ConnectOptions,
        stats: Arc<Stats>,
    ) -> Result<Self, BackendError> {
        let url = target.url.clone().ok_or_else(|| BackendError::Config {
            target: name.to_owned(),
            message: "no `url`".into(),
        })?;
        let user = env_value(name, "usernameEnv", target.username_env.as_ref())?;
        let password = env_value(name, "passwordEnv", target.password_env.as_ref())?;
        let creds_hint = match (&target.username_env, &target.password_env) {
            (Some(u), Some(p)) => format!("{u} / {p}"),
            _ => "usernameEnv / passwordEnv of the target (none set)".into(),
        };
        let http = ReadHttp::new(
            HttpConfig {
                target: name.to_owned(),
                base: url,
                user,
                password,
                bearer: None,
                creds_hint,
                insecure: opts.insecure,
                budget: ReadBudget::new(opts.read_timeout),
            },
            stats,
        )
        .map_err(|e| e.at(name))?;
        Ok(Reader::new(
            name,
            http,
            crate::backend::kit::connect::prefixes(target),
        ))
    }

    pub fn new(target: &str, http: ReadHttp, prefixes: Vec<String>) -> Self {
        Reader {
            target: target.to_owned(),
            http,
            prefixes,
            vhost_queues: Arc::default(),
        }
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    /// The target's read budget (renewed by the exporter before each reading).
    pub fn read_budget(&self) -> &ReadBudget {
        self.http.budget()
    }

    /// Reads every owned queue, policy, exchange and binding of the vhosts `ids` name.
    pub async fn read(&self, ids: &[&ResourceId]) -> Result<BTreeMap<ResourceId, Live>, HttpError> {
        let vhosts: BTreeSet<String> = ids.iter().map(|i| i.scope.clone()).collect();
        self.read_vhosts(&vhosts).await
    }

    /// Who besides administrators may read this target's dead-letter queues: two small reads
    /// (`/api/users`, `/api/permissions`), only where the plan has a dead-letter queue here.
    /// Listing them needs the administrator tag; without it the plan says it could not check.
    pub(super) async fn permission_notes(&self, desired: &[Desired]) -> Vec<Note> {
        let Some(first_dlq) = desired.iter().find(|d| {
            d.id.target == self.target && d.id.kind == Kind::Queue && d.role == Role::DeadLetter
        }) else {
            return Vec::new();
        };
        // Only a note depends on these reads, never a change: an error is said, not fatal.
        let read = |api: &'static str, path: &'static str| async move {
            self.http
                .get(api, path)
                .await
                .map_err(|e| match e.status() {
                    Some(401 | 403) => {
                        "listing users and permissions needs the administrator tag".to_owned()
                    }
                    _ => e.to_string(),
                })
        };
        let answers = match (
            read("GET /api/users", "/api/users?columns=name,tags").await,
            read("GET /api/permissions", "/api/permissions").await,
        ) {
            (Ok(users), Ok(perms)) => (users, perms),
            (Err(why), _) | (_, Err(why)) => {
                return vec![Note {
                    resource: first_dlq.id.clone(),
                    message: format!("who may read the dead-letter queues was not checked: {why}"),
                }];
            }
        };
        let (users, perms) = answers;
        let admins: BTreeSet<&str> = users
            .iter()
            .flat_map(|b| b.as_array().into_iter().flatten())
            .filter(|u| is_administrator(u.get("tags")))
            .filter_map(|u| u.get("name").and_then(Value::as_str))
            .collect();
        let permissions: Vec<super::plan::Permission> = perms
            .iter()
            .flat_map(|b| b.as_array().into_iter().flatten())
            .filter_map(|p| {
                let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_owned);
                let user = s("user")?;
                Some(super::plan::Permission {
                    administrator: admins.contains(user.as_str()),
                    vhost: s("vhost")?,
                    read: s("read")?,
                    user,
                })
            })
            .collect();
        super::plan::permission_notes(&self.target, desired, &permissions)
    }

    /// The operator policies that govern the spec's live queues: one listing per vhost, and
    /// only when one of them sets a governing key, one small read per such queue for the
    /// operator policy RabbitMQ applies to it.
    pub(super) async fn operator_policies(
        &self,
        desired: &[Desired],
        live: &BTreeMap<ResourceId, Live>,
    ) -> Result<super::plan::OperatorPolicies, HttpError> {
        let queues: Vec<&ResourceId> = desired
            .iter()
            .filter(|d| {
                d.id.target == self.target
                    && d.id.kind == Kind::Queue
                    && d.present
                    && live.contains_key(&d.id)
            })
            .map(|d| &d.id)
            .collect();
        let vhosts: BTreeSet<&str> = queues.iter().map(|q| q.scope.as_str()).collect();
        let mut out = super::plan::OperatorPolicies::new();
        for vhost in vhosts {
            let api = "GET /api/operator-policies/{vhost}";
            let path = format!("/api/operator-policies/{}", seg(vhost));
            let Some(body) = self.http.get(api, &path).await? else {
                return Err(no_vhost(vhost));
            };
            let mut governing: BTreeMap<String, Props> = BTreeMap::new();
            for p in list(api, &path, &body)? {
                let name = item_name(api, &path, p)?;
                let def = p
                    .get("definition")
                    .and_then(Value::as_object)
                    .ok_or_else(|| {
                        bad_shape(
                            api,
                            &path,
                            &format!("operator policy `{name}`: `definition` is not an object"),
                        )
                    })?;
                let keys: Props = def
                    .iter()
                    .filter(|(k, _)| super::plan::GOVERNING_KEYS.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if !keys.is_empty() {
                    governing.insert(name.to_owned(), keys);
                }
            }
            if governing.is_empty() {
                continue;
            }
            for q in queues.iter().filter(|q| q.scope == vhost) {
                let api = "GET /api/queues/{vhost}/{name}";
                let path = format!(
                    "/api/queues/{}/{}?columns=name,operator_policy",
                    seg(vhost),
                    seg(&q.name)
                );
                let applied = self.http.get(api, &path).await?.and_then(|b| {
                    b.get("operator_policy")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
                if let Some(name) = applied
                    && let Some(keys) = governing.get(&name)
                {
                    out.insert((*q).clone(), (name, keys.clone()));
                }
            }
        }
        Ok(out)
    }

    /// Every binding a delete of this queue or exchange drops with it (`None`: it does not
    /// exist), except the default exchange's, which RabbitMQ makes and removes by itself.
    pub async fn bindings_of(
        &self,
        kind: Kind,
        vhost: &str,
        name: &str,
    ) -> Result<Vec<Binding>, HttpError> {
        let (v, n) = (seg(vhost), seg(name));
        let calls = match kind {
            Kind::Queue => vec![(
                "GET /api/queues/{vhost}/{name}/bindings",
                format!("/api/queues/{v}/{n}/bindings"),
            )],
            Kind::Exchange => vec![
                (
                    "GET /api/exchanges/{vhost}/{name}/bindings/source",
                    format!("/api/exchanges/{v}/{n}/bindings/source"),
                ),
                (
                    "GET /api/exchanges/{vhost}/{name}/bindings/destination",
                    format!("/api/exchanges/{v}/{n}/bindings/destination"),
                ),
            ],
            _ => Vec::new(),
        };
        let mut out = Vec::new();
        for (api, path) in calls {
            let Some(body) = self.http.get(api, &path).await? else {
                continue;
            };
            for b in list(api, &path, &body)? {
                let b = Binding::from_value(b).ok_or_else(|| {
                    bad_shape(api, &path, "a binding lacks a string `source`, `destination`, `destination_type` or `routing_key`")
                })?;
                if !b.source.is_empty() && !out.contains(&b) {
                    out.push(b);
                }
            }
        }
        Ok(out)
    }

    /// A queue's type and message count, read just before it is dropped (`None`: it does not
    /// exist). The count is `None` when RabbitMQ has not reported one yet.
    pub async fn queue_state(
        &self,
        vhost: &str,
        queue: &str,
    ) -> Result<Option<(String, Option<u64>)>, HttpError> {
        let api = "GET /api/queues/{vhost}/{name}";
        let path = format!(
            "/api/queues/{}/{}?columns=type,messages,messages_ready,messages_unacknowledged",
            seg(vhost),
            seg(queue)
        );
        let Some(b) = self.http.get(api, &path).await? else {
            return Ok(None);
        };
        let kind = b
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| bad_shape(api, &path, "no string `type`"))?
            .to_owned();
        Ok(Some((kind, count(&b))))
    }

    /// What `plan --prune` may delete: every owned object in the vhosts the specs use and the
    /// target's own vhost that `skip` does not name, labelled with the channel and role it
    /// would have if it were imported.
    pub async fn prunable(
        &self,
        skip: &BTreeSet<ResourceId>,
        target: &Target,
    ) -> Result<Vec<Prunable>, HttpError> {
        let mut vhosts: BTreeSet<String> = skip
            .iter()
            .filter(|i| i.target == self.target)
            .map(|i| i.scope.clone())
            .collect();
        vhosts.insert(target.vhost.clone().unwrap_or_else(|| "/".to_owned()));
        vhosts.retain(|v| !v.is_empty());
        let live = self.read_vhosts(&vhosts).await?;
        let mut found: Vec<Prunable> = live
            .into_iter()
            .filter(|(id, _)| !skip.contains(id))
            .map(|(id, live)| {
                let role = match id.kind {
                    Kind::Binding => Role::Binding,
                    Kind::Exchange => Role::Exchange,
                    Kind::Policy => Role::MainPolicy,
                    _ => Role::Main,
                };
                let identity = if id.kind == Kind::Binding {
                    ["source", "destination", "routing_key", "@properties_key"]
                        .into_iter()
                        .filter_map(|k| live.props.get(k).map(|v| (k.to_owned(), v.clone())))
                        .collect()
                } else {
                    Props::new()
                };
                Prunable {
                    id,
                    live,
                    channel: NO_SPEC_CHANNEL.to_owned(),
                    role,
                    identity,
                }
            })
            .collect();
        crate::backend::kit::import::relabel(&mut found, |live| {
            super::import::labels(live, &self.target, target)
        });
        Ok(found)
    }

    /// Reads every owned queue, policy, exchange and binding of the given vhosts.
    pub async fn read_vhosts(
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

    pub fn owned(&self, name: &str) -> bool {
        self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
    }

    /// A name filter (`use_regex=true`) for the queues the ownership prefixes cover.
    fn owned_filter(&self) -> String {
        format!(
            "^({})",
            self.prefixes
                .iter()
                .map(|p| regex_escape(p))
                .collect::<Vec<_>>()
                .join("|")
        )
    }

    /// Every page of a vhost's queue listing matching `name_filter` (`query`: more query
    /// parameters, such as `&columns=…`); `each` sees every queue object, with the call's API
    /// and path for its errors.
    async fn queue_pages(
        &self,
        vhost: &str,
        name_filter: &str,
        query: &str,
        mut each: impl FnMut(&str, &str, &Value) -> Result<(), HttpError>,
    ) -> Result<Option<u64>, HttpError> {
        let v = seg(vhost);
        let mut page = 1;
        let mut total = None;
        loop {
            let api = "GET /api/queues/{vhost}";
            let path = format!(
                "/api/queues/{v}?page={page}&page_size={PAGE_SIZE}{query}&use_regex=true&name={}",
                seg(name_filter)
            );
            let Some(body) = self.http.get(api, &path).await? else {
                return Err(no_vhost(vhost));
            };
            let items = body
                .get("items")
                .ok_or_else(|| bad_shape(api, &path, "no `items` in a paginated listing"))?;
            for q in list(api, &path, items)? {
                each(api, &path, q)?;
            }
            if page == 1 {
                // Every queue of the vhost, the filter aside.
                total = body.get("total_count").and_then(Value::as_u64);
            }
            let pages = match body.get("page_count") {
                None => 1,
                Some(n) => n
                    .as_u64()
                    .ok_or_else(|| bad_shape(api, &path, "`page_count` is not a number"))?,
            };
            if page as u64 >= pages || page >= 10_000 {
                return Ok(total);
            }
            page += 1;
        }
    }

    /// Keeps a vhost's queue count for the re-check's choice ([`LISTING_PER_OBJECT`]).
    fn note_queues(&self, vhost: &str, total: Option<u64>) {
        if let (Some(n), Ok(mut m)) = (total, self.vhost_queues.lock()) {
            m.insert(vhost.to_owned(), n);
        }
    }

    pub(super) async fn read_vhost(
        &self,
        vhost: &str,
        out: &mut BTreeMap<ResourceId, Live>,
    ) -> Result<(), HttpError> {
        let v = seg(vhost);
        let query = format!("&disable_stats=true&columns={QUEUE_COLUMNS}");
        let total = self
            .queue_pages(vhost, &self.owned_filter(), &query, |api, path, q| {
                let name = item_name(api, path, q)?;
                if self.owned(name) {
                    let props = queue_props(api, path, name, q)?;
                    out.insert(
                        id(&self.target, Kind::Queue, vhost, name),
                        Live {
                            props,
                            messages: None,
                        },
                    );
                }
                Ok(())
            })
            .await?;
        self.note_queues(vhost, total);

        let (api, path) = ("GET /api/policies/{vhost}", format!("/api/policies/{v}"));
        let policies = self
            .http
            .get(api, &path)
            .await?
            .ok_or_else(|| no_vhost(vhost))?;
        // Every policy's governing keys, owned or not: a queue may be governed by either.
        let mut governing: BTreeMap<&str, Vec<(&str, &Value)>> = BTreeMap::new();
        for p in list(api, &path, &policies)? {
            let name = item_name(api, &path, p)?;
            let Some(def) = p.get("definition").and_then(Value::as_object) else {
                return Err(bad_shape(
                    api,
                    &path,
                    &format!("policy `{name}`: `definition` is not an object"),
                ));
            };
            governing.insert(
                name,
                def.iter()
                    .filter(|(k, _)| super::plan::GOVERNING_KEYS.contains(&k.as_str()))
                    .map(|(k, v)| (k.as_str(), v))
                    .collect(),
            );
            if !self.owned(name) {
                continue;
            }
            let props = flat(p, &POLICY_KEYS, "definition");
            out.insert(
                id(&self.target, Kind::Policy, vhost, name),
                Live {
                    props,
                    messages: None,
                },
            );
        }

        // A queue governed by a policy other than its own dlqctl policy (named after it)
        // carries that policy's governing keys, for the plan's drift check.
        for (qid, q) in out.iter_mut() {
            if qid.kind != Kind::Queue || qid.scope != vhost || qid.target != self.target {
                continue;
            }
            let Some(applied) = q
                .props
                .get("@policy")
                .and_then(Value::as_str)
                .map(str::to_owned)
            else {
                continue;
            };
            if applied == qid.name {
                continue;
            }
            for (k, v) in governing.get(applied.as_str()).into_iter().flatten() {
                q.props
                    .insert(format!("{}{k}", super::plan::FOREIGN_POLICY), (*v).clone());
            }
        }

        self.read_exchanges(vhost, out).await?;
        self.read_bindings(vhost, out).await
    }

    /// A vhost's owned exchanges (one listing), into `out`.
    async fn read_exchanges(
        &self,
        vhost: &str,
        out: &mut BTreeMap<ResourceId, Live>,
    ) -> Result<(), HttpError> {
        let v = seg(vhost);
        let api = "GET /api/exchanges/{vhost}";
        let path = format!(
            "/api/exchanges/{v}?disable_stats=true&columns=name,type,durable,auto_delete,internal,arguments"
        );
        let exchanges = self
            .http
            .get(api, &path)
            .await?
            .ok_or_else(|| no_vhost(vhost))?;
        for x in list(api, &path, &exchanges)? {
            let name = item_name(api, &path, x)?;
            if !self.owned(name) {
                continue;
            }
            if !x.get("type").is_some_and(Value::is_string) {
                return Err(bad_shape(
                    api,
                    &path,
                    &format!("exchange `{name}`: `type` is not a string"),
                ));
            }
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

        Ok(())
    }

    /// A vhost's bindings from an owned exchange to a queue (one listing), into `out`.
    async fn read_bindings(
        &self,
        vhost: &str,
        out: &mut BTreeMap<ResourceId, Live>,
    ) -> Result<(), HttpError> {
        let v = seg(vhost);
        let (api, path) = ("GET /api/bindings/{vhost}", format!("/api/bindings/{v}"));
        let bindings = self
            .http
            .get(api, &path)
            .await?
            .ok_or_else(|| no_vhost(vhost))?;
        for b in list(api, &path, &bindings)? {
            let Some(b) = Binding::from_value(b) else {
                return Err(bad_shape(
                    api,
                    &path,
                    "a binding lacks a string `source`, `destination`, `destination_type` or `routing_key`",
                ));
            };
            if b.destination_type != "queue" || !self.owned(&b.source) {
                continue;
            }
            out.insert(
                id(
                    &self.target,
                    Kind::Binding,
                    vhost,
                    &binding_name(&b.source, &b.destination, &b.routing_key),
                ),
                Live {
                    props: b.props(),
                    messages: None,
                },
            );
        }
        Ok(())
    }

    /// One object as [`read`](Self::read) would return it, in one call where the management
    /// API has one (a queue, a policy, an exchange; a binding reads its vhost): apply's re-check
    /// immediately before each write. Keys starting with `@` (derived from other objects) may
    /// be missing; nothing compares them.
    pub async fn read_one(&self, rid: &ResourceId) -> Result<Option<Live>, HttpError> {
        let (v, n) = (seg(&rid.scope), seg(&rid.name));
        let live = |props| Live {
            props,
            messages: None,
        };
        match rid.kind {
            Kind::Queue => {
                let api = "GET /api/queues/{vhost}/{name}";
                let path =
                    format!("/api/queues/{v}/{n}?disable_stats=true&columns={QUEUE_COLUMNS}");
                match self.http.get(api, &path).await? {
                    None => Ok(None),
                    Some(q) => Ok(Some(live(queue_props(api, &path, &rid.name, &q)?))),
                }
            }
            Kind::Policy => self.policy(&rid.scope, &rid.name).await,
            Kind::Exchange => {
                let api = "GET /api/exchanges/{vhost}/{name}";
                let path = format!(
                    "/api/exchanges/{v}/{n}?disable_stats=true&columns=name,type,durable,auto_delete,internal,arguments"
                );
                Ok(self.http.get(api, &path).await?.map(|x| {
                    live(flat(
                        &x,
                        &["type", "durable", "auto_delete", "internal"],
                        "arguments",
                    ))
                }))
            }
            _ => Ok(self
                .read_vhosts(&BTreeSet::from([rid.scope.clone()]))
                .await?
                .remove(rid)),
        }
    }

    /// Apply's re-check of a group of objects (see [`Read::recheck`]), per vhost: one queue
    /// listing filtered to the group's queue names (up to [`RECHECK_NAMES`] names a call),
    /// one policy listing and one exchange listing (one GET for a lone policy or exchange),
    /// one binding listing. The listings read the same columns as the plan's, so
    /// what they return compares with what it read.
    ///
    /// [`Read::recheck`]: crate::backend::kit::doors::Read::recheck
    pub async fn recheck(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, HttpError> {
        let mut by_vhost: BTreeMap<&str, Vec<&ResourceId>> = BTreeMap::new();
        for i in ids {
            by_vhost.entry(i.scope.as_str()).or_default().push(i);
        }
        let mut out = BTreeMap::new();
        for (vhost, ids) in by_vhost {
            let known = self
                .vhost_queues
                .lock()
                .ok()
                .and_then(|m| m.get(vhost).copied());
            let ids: Vec<&ResourceId> =
                if known.is_some_and(|n| n > LISTING_PER_OBJECT * ids.len() as u64) {
                    // A large vhost: queues, policies and exchanges each by name; the rest
                    // (bindings) by their listings below.
                    let mut rest = Vec::new();
                    for i in ids {
                        if matches!(i.kind, Kind::Queue | Kind::Policy | Kind::Exchange) {
                            if let Some(l) = self.read_one(i).await? {
                                out.insert(i.clone(), l);
                            }
                        } else {
                            rest.push(i);
                        }
                    }
                    rest
                } else {
                    ids
                };
            let of = |kind: Kind| -> Vec<&ResourceId> {
                ids.iter().copied().filter(|i| i.kind == kind).collect()
            };
            let queues: Vec<&str> = of(Kind::Queue).iter().map(|i| i.name.as_str()).collect();
            let query = format!("&disable_stats=true&columns={QUEUE_COLUMNS}");
            for names in queues.chunks(RECHECK_NAMES) {
                let filter = format!(
                    "^({})$",
                    names
                        .iter()
                        .map(|n| regex_escape(n))
                        .collect::<Vec<_>>()
                        .join("|")
                );
                let total = self
                    .queue_pages(vhost, &filter, &query, |api, path, q| {
                        let name = item_name(api, path, q)?;
                        if names.contains(&name) {
                            let props = queue_props(api, path, name, q)?;
                            out.insert(
                                id(&self.target, Kind::Queue, vhost, name),
                                Live {
                                    props,
                                    messages: None,
                                },
                            );
                        }
                        Ok(())
                    })
                    .await?;
                self.note_queues(vhost, total);
            }
            match of(Kind::Policy).as_slice() {
                [] => {}
                [one] => {
                    if let Some(l) = self.policy(vhost, &one.name).await? {
                        out.insert((*one).clone(), l);
                    }
                }
                many => {
                    let wanted: BTreeSet<&str> = many.iter().map(|i| i.name.as_str()).collect();
                    let v = seg(vhost);
                    let (api, path) = ("GET /api/policies/{vhost}", format!("/api/policies/{v}"));
                    let policies = self
                        .http
                        .get(api, &path)
                        .await?
                        .ok_or_else(|| no_vhost(vhost))?;
                    for p in list(api, &path, &policies)? {
                        let name = item_name(api, &path, p)?;
                        if !wanted.contains(name) {
                            continue;
                        }
                        if !p.get("definition").is_some_and(Value::is_object) {
                            return Err(bad_shape(
                                api,
                                &path,
                                &format!("policy `{name}`: `definition` is not an object"),
                            ));
                        }
                        out.insert(
                            id(&self.target, Kind::Policy, vhost, name),
                            Live {
                                props: flat(p, &POLICY_KEYS, "definition"),
                                messages: None,
                            },
                        );
                    }
                }
            }
            match of(Kind::Exchange).as_slice() {
                [] => {}
                [one] => {
                    if let Some(l) = self.read_one(one).await? {
                        out.insert((*one).clone(), l);
                    }
                }
                many => {
                    let mut all = BTreeMap::new();
                    self.read_exchanges(vhost, &mut all).await?;
                    keep(&mut out, all, many);
                }
            }
            let bindings = of(Kind::Binding);
            if !bindings.is_empty() {
                let mut all = BTreeMap::new();
                self.read_bindings(vhost, &mut all).await?;
                keep(&mut out, all, &bindings);
            }
            let rest: Vec<&ResourceId> = ids
                .iter()
                .copied()
                .filter(|i| {
                    !matches!(
                        i.kind,
                        Kind::Queue | Kind::Policy | Kind::Exchange | Kind::Binding
                    )
                })
                .collect();
            if !rest.is_empty() {
                let mut all = BTreeMap::new();
                self.read_vhost(vhost, &mut all).await?;
                keep(&mut out, all, &rest);
            }
        }
        Ok(out)
    }

    /// One policy by name, wherever its name is (import: the policy RabbitMQ applies to an
    /// owned queue may be named outside the prefixes). Same shape as [`read`](Self::read)'s.
    pub async fn policy(&self, vhost: &str, name: &str) -> Result<Option<Live>, HttpError> {
        let path = format!("/api/policies/{}/{}", seg(vhost), seg(name));
        let api = "GET /api/policies/{vhost}/{name}";
        let Some(p) = self.http.get(api, &path).await? else {
            return Ok(None);
        };
        if !p.get("definition").is_some_and(Value::is_object) {
            return Err(bad_shape(
                api,
                &path,
                "a policy without a `definition` object",
            ));
        }
        Ok(Some(Live {
            props: flat(&p, &POLICY_KEYS, "definition"),
            messages: None,
        }))
    }

    /// Messages in one queue (for the plan's drop warnings). `None` if it cannot be read.
    /// Messages held by a queue (`None` for anything else, or a queue that does not exist).
    pub async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, HttpError> {
        if id.kind != Kind::Queue {
            return Ok(None);
        }
        Ok(self
            .queue_state(&id.scope, &id.name)
            .await?
            .and_then(|(_, count)| count))
    }

    /// What apply's settle check needs of queues of a vhost, by name: the named queues when
    /// there are few, otherwise every owned queue, in pages of 500 (a handful of calls instead
    /// of one per queue). Without `stats`, each queue's applied policy as the plan's listing
    /// reads it (it shows at once); with `stats`, its message count, which the statistics
    /// report up to 5 s after the queue is created (`None` until then).
    pub async fn settle_listing(
        &self,
        vhost: &str,
        names: &[&str],
        stats: bool,
    ) -> Result<BTreeMap<String, Option<Value>>, HttpError> {
        let name_filter = if names.len() <= 20 {
            format!(
                "^({})$",
                names
                    .iter()
                    .map(|n| regex_escape(n))
                    .collect::<Vec<_>>()
                    .join("|")
            )
        } else {
            self.owned_filter()
        };
        let (column, query) = if stats {
            ("messages", "&columns=name,messages")
        } else {
            ("policy", "&disable_stats=true&columns=name,policy")
        };
        let mut out = BTreeMap::new();
        self.queue_pages(vhost, &name_filter, query, |api, path, q| {
            out.insert(item_name(api, path, q)?.to_owned(), q.get(column).cloned());
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// The broker's version (`rabbitmq_version` of `/api/overview`). `None` when the answer
    /// does not carry it as a string: it only decides a plan note, never a change.
    pub async fn version(&self) -> Result<Option<String>, HttpError> {
        let body = self
            .http
            .get(
                "GET /api/overview",
                "/api/overview?columns=rabbitmq_version",
            )
            .await?;
        Ok(body.and_then(|b| {
            b.get("rabbitmq_version")
                .and_then(Value::as_str)
                .map(str::to_owned)
        }))
    }

    /// Which server this is, for binding a saved plan to it: the cluster name.
    pub async fn identity(&self) -> Result<String, HttpError> {
        let body = self.http.get("GET /api/overview", "/api/overview").await?;
        let name = body.as_ref().and_then(|b| b.get("cluster_name"));
        Ok(format!(
            "rabbitmq cluster {}",
            name.and_then(Value::as_str).unwrap_or("(unnamed)")
        ))
    }
}

/// Whether a user's `tags` (a list from 3.9 on, a comma-separated string before) include
/// `administrator`.
fn is_administrator(tags: Option<&Value>) -> bool {
    match tags {
        Some(Value::Array(a)) => a.iter().any(|t| t.as_str() == Some("administrator")),
        Some(Value::String(s)) => s.split(',').any(|t| t.trim() == "administrator"),
        _ => false,
    }
}

impl Reader {
    /// The import door: the target's vhost, with the policies named outside the prefixes that
    /// apply to owned queues, grouped into channels.
    pub async fn import(&self, target: &Target, prefix: Option<&str>) -> Result<Found, HttpError> {
        let vhost = target.vhost.clone().unwrap_or_else(|| "/".to_owned());
        let live = self.read_vhosts(&BTreeSet::from([vhost.clone()])).await?;
        // Policies that apply to owned queues but are named outside the prefixes.
        let mut foreign = BTreeMap::new();
        for name in foreign_policies(&live) {
            if let Some(p) = self.policy(&vhost, &name).await? {
                foreign.insert(name, p);
            }
        }
        let read = counts(&live);
        let s = Scope {
            live: &live,
            target_name: self.target(),
            target,
            vhost: &vhost,
        };
        let (c, u) = group(&s, &foreign, prefix);
        Ok((c, u, read))
    }
}

impl crate::backend::kit::doors::Connected for Reader {
    type Error = crate::backend::wire::http::HttpError;

    fn target(&self) -> &str {
        Reader::target(self)
    }
}

impl crate::backend::kit::doors::Read for Reader {
    fn renew_read_budget(&self) {
        Reader::read_budget(self).renew();
    }

    async fn read(&self, ids: &[&ResourceId]) -> Result<BTreeMap<ResourceId, Live>, Self::Error> {
        Reader::read(self, ids).await
    }

    async fn prunable(
        &self,
        skip: &std::collections::BTreeSet<ResourceId>,
        target: &Target,
    ) -> Result<Vec<Prunable>, Self::Error> {
        Reader::prunable(self, skip, target).await
    }

    async fn recheck(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, Self::Error> {
        Reader::recheck(self, ids).await
    }

    async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, Self::Error> {
        Reader::message_count(self, id).await
    }

    async fn identity(&self) -> Result<String, Self::Error> {
        Reader::identity(self).await
    }
}

impl crate::backend::kit::doors::Operator for Reader {
    /// The user the management API says these credentials are (`GET /api/whoami`).
    async fn operator(&self) -> Result<String, Self::Error> {
        let body = self.http.get("GET /api/whoami", "/api/whoami").await?;
        Ok(body
            .as_ref()
            .and_then(|b| b.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("(unnamed)")
            .to_owned())
    }
}

impl crate::backend::kit::doors::Import for Reader {
    async fn import(&self, target: &Target, prefix: Option<&str>) -> Result<Found, Self::Error> {
        Reader::import(self, target, prefix).await
    }
}
