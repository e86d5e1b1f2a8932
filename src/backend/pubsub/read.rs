//! Pub/Sub reads (read-only: no call here changes a topic, a subscription or a message): the
//! live state of the topics and subscriptions a plan names (one GET each, [`CONCURRENCY`] in
//! flight), the listings `import` and `--prune` need, and the target's identity.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde_json::Value;

use super::import::group;
use super::*;
use crate::backend::kit::connect::ConnectOptions;
use crate::backend::kit::errors::{AtTarget, BackendError};
use crate::backend::kit::import::{Found, Prunable};
use crate::backend::wire::http::{HttpConfig, HttpError, ReadHttp, Stats};
use crate::backend::wire::retry::ReadBudget;
use crate::resource::Role;
use crate::spec::model::Target;

/// Google's Pub/Sub REST endpoint, used when no emulator is named.
pub const GOOGLE_ENDPOINT: &str = "https://pubsub.googleapis.com/v1";
/// Where Google's clients (and dlqctl) find an emulator.
pub const EMULATOR_ENV: &str = "PUBSUB_EMULATOR_HOST";
/// The OAuth access token for the real service (e.g. `$(gcloud auth print-access-token)`).
pub const TOKEN_ENV: &str = "GOOGLE_OAUTH_ACCESS_TOKEN";
/// More pages than any project holds (1000 objects each): a server that keeps answering
/// with a next page is broken.
const MAX_PAGES: usize = 10_000;

/// From how many objects a plan lists the project's topics and subscriptions (two paged
/// calls) rather than GET each: two channels. Below it, GETs cost less than two listings of
/// a large shared project; above it, listings cost less unless the project holds more than
/// 1,000 times as many objects as the plan names.
pub const LIST_FROM: usize = 8;

/// Read-only view of one Pub/Sub project.
#[derive(Debug, Clone)]
pub struct Reader {
    pub target: String,
    pub(super) http: ReadHttp,
    pub(super) project: String,
    /// The target's optional `ownership.prefixes`: when declared, dlqctl also keeps to names
    /// inside them.
    pub(super) prefixes: Vec<String>,
    /// Whether this is an emulator (no IAM there).
    pub(super) emulator: bool,
    /// With `grantServiceAgent: true`: the project number that names the service agent.
    pub(super) grant: Option<String>,
    /// Where status reads the metrics ([`super::monitoring`]), or why it does not.
    /// Boxed: a second HTTP client would double the reader's size in the dispatcher's enum.
    pub(super) monitoring: Result<Box<super::monitoring::Monitoring>, String>,
}

/// Where the API is and which token it takes, from the target and the environment: the
/// target's `emulatorHost`, else `PUBSUB_EMULATOR_HOST`, else Google with a bearer token.
pub fn endpoint(
    name: &str,
    target: &Target,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(String, Option<String>), BackendError> {
    let emulator = target
        .emulator_host
        .clone()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| env(EMULATOR_ENV).filter(|h| !h.trim().is_empty()));
    if let Some(host) = emulator {
        let host = host.trim().trim_end_matches('/');
        let base = if host.starts_with("http://") || host.starts_with("https://") {
            format!("{host}/v1")
        } else {
            format!("http://{host}/v1")
        };
        return Ok((base, None));
    }
    let token = env(TOKEN_ENV).filter(|t| !t.trim().is_empty()).ok_or_else(|| {
        BackendError::Config {
            target: name.to_owned(),
            message: format!(
                "no emulator (`emulatorHost`, {EMULATOR_ENV}) and no access token in {TOKEN_ENV}; for Google Cloud run `export {TOKEN_ENV}=$(gcloud auth print-access-token)` (docs/pubsub.md)"
            ),
        }
    })?;
    Ok((GOOGLE_ENDPOINT.to_owned(), Some(token.trim().to_owned())))
}

/// The target's Cloud Monitoring client, or why there is none: off with
/// `monitoring.enabled: false`; on an emulator (no metrics there) only when
/// `monitoring.endpoint` names one, and then without credentials; on Google Cloud at
/// `monitoring.endpoint` or [`super::monitoring::GOOGLE_ENDPOINT`], with the same token.
/// It shares the Pub/Sub client's read budget, so the exporter renews both at once.
fn monitoring(
    name: &str,
    target: &Target,
    emulator: bool,
    pubsub: &ReadHttp,
    bearer: Option<&str>,
    opts: ConnectOptions,
    stats: &Arc<Stats>,
) -> Result<Result<Box<super::monitoring::Monitoring>, String>, BackendError> {
    let settings = target.monitoring.clone().unwrap_or_default();
    if settings.enabled == Some(false) {
        return Ok(Err(
            "Cloud Monitoring is off for this target (`monitoring.enabled: false`)".to_owned(),
        ));
    }
    let named = settings.endpoint.filter(|e| !e.trim().is_empty());
    let base = match (named, emulator) {
        (None, true) => {
            return Ok(Err(
                "the emulator has no metrics (Cloud Monitoring is read on an emulator target only when `monitoring.endpoint` names one)"
                    .to_owned(),
            ));
        }
        (Some(e), _) => e.trim().trim_end_matches('/').to_owned(),
        (None, false) => super::monitoring::GOOGLE_ENDPOINT.to_owned(),
    };
    let http = ReadHttp::new(
        HttpConfig {
            target: name.to_owned(),
            base,
            user: None,
            password: None,
            bearer: if emulator {
                None
            } else {
                bearer.map(str::to_owned)
            },
            creds_hint: TOKEN_ENV.to_owned(),
            insecure: opts.insecure,
            budget: pubsub.budget().clone(),
        },
        Arc::clone(stats),
    )
    .map_err(|e| e.at(name))?;
    Ok(Ok(Box::new(super::monitoring::Monitoring { http })))
}

impl Reader {
    pub fn connect(
        name: &str,
        target: &Target,
        opts: ConnectOptions,
        stats: Arc<Stats>,
    ) -> Result<Self, BackendError> {
        let project = target.project.clone().ok_or_else(|| BackendError::Config {
            target: name.to_owned(),
            message: "no `project`".into(),
        })?;
        let (base, bearer) = endpoint(name, target, |v| std::env::var(v).ok())?;
        if let Some(t) = &bearer {
            crate::secrets::never_show(t);
        }
        let emulator = bearer.is_none();
        let http = ReadHttp::new(
            HttpConfig {
                target: name.to_owned(),
                base,
                user: None,
                password: None,
                bearer: bearer.clone(),
                creds_hint: TOKEN_ENV.to_owned(),
                insecure: opts.insecure,
                budget: ReadBudget::new(opts.read_timeout),
            },
            Arc::clone(&stats),
        )
        .map_err(|e| e.at(name))?;
        let monitoring = monitoring(
            name,
            target,
            emulator,
            &http,
            bearer.as_deref(),
            opts,
            &stats,
        )?;
        let grant = match target.grant_service_agent {
            Some(true) => target.project_number.clone(),
            _ => None,
        };
        Ok(Reader {
            target: name.to_owned(),
            http,
            project,
            prefixes: crate::backend::kit::connect::prefixes(target),
            emulator,
            grant,
            monitoring,
        })
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    /// The target's read budget (renewed by the exporter before each reading).
    pub fn read_budget(&self) -> &ReadBudget {
        self.http.budget()
    }

    /// `/projects/P/topics/T` or `/projects/P/subscriptions/S`.
    pub(super) fn path(&self, kind: Kind, name: &str) -> String {
        let collection = if kind == Kind::Subscription {
            "subscriptions"
        } else {
            "topics"
        };
        format!(
            "/projects/{}/{collection}/{}",
            seg(&self.project),
            seg(name)
        )
    }

    /// The API name a call is counted under (`GET subscriptions/{subscription}`).
    pub(super) fn api(method: &str, kind: Kind) -> String {
        if kind == Kind::Subscription {
            format!("{method} subscriptions/{{subscription}}")
        } else {
            format!("{method} topics/{{topic}}")
        }
    }

    /// One topic or subscription as its JSON; `None` when it does not exist.
    pub(super) async fn get_json(
        &self,
        kind: Kind,
        name: &str,
    ) -> Result<Option<Value>, HttpError> {
        self.http
            .get(&Self::api("GET", kind), &self.path(kind, name))
            .await
    }

    /// The live state of one object.
    pub(super) fn live(&self, kind: Kind, v: &Value) -> Live {
        if kind == Kind::Subscription {
            live_subscription(&self.project, v)
        } else {
            live_topic(v)
        }
    }

    /// Reads the topics and subscriptions `ids` names (those that exist): one GET each for a
    /// few objects, else the two listings (1,000 objects a page), which return the same JSON
    /// (see [`LIST_FROM`]).
    pub async fn read(&self, ids: &[&ResourceId]) -> Result<BTreeMap<ResourceId, Live>, HttpError> {
        let mine: Vec<&ResourceId> = ids
            .iter()
            .copied()
            .filter(|i| i.backend == Backend::Pubsub && i.target == self.target)
            .collect();
        if mine.len() >= LIST_FROM {
            let wanted: BTreeSet<&ResourceId> = mine.into_iter().collect();
            return Ok(self
                .listed()
                .await?
                .into_iter()
                .filter(|(id, _)| wanted.contains(id))
                .collect());
        }
        let read: Vec<Option<(ResourceId, Live)>> = stream::iter(mine)
            .map(|id| async move {
                let v = self.get_json(id.kind, &id.name).await?;
                Ok::<_, HttpError>(v.map(|v| (id.clone(), self.live(id.kind, &v))))
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        Ok(read.into_iter().flatten().collect())
    }

    /// One object as [`read`](Self::read) returns it (apply's re-check before each write).
    pub async fn read_one(&self, id: &ResourceId) -> Result<Option<Live>, HttpError> {
        Ok(self.read(&[id]).await?.remove(id))
    }

    /// A topic holds nothing itself; a subscription's backlog is not in the REST API (Cloud
    /// Monitoring has it): unknown.
    pub async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, HttpError> {
        Ok(match id.kind {
            Kind::Topic => Some(0),
            _ => None,
        })
    }

    /// Which project at which endpoint, for binding a saved plan to it.
    pub async fn identity(&self) -> Result<String, HttpError> {
        Ok(format!(
            "pubsub project {} at {}",
            self.project,
            self.http.base()
        ))
    }

    /// The short names of the subscriptions of `topic` (`GET topics/{topic}/subscriptions`,
    /// every page): what receives a message published to it.
    pub async fn subscriptions_of(&self, topic: &str) -> Result<Vec<String>, HttpError> {
        let api = "GET topics/{topic}/subscriptions".to_owned();
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut path = format!(
                "{}/subscriptions?pageSize={PAGE_SIZE}",
                self.path(Kind::Topic, topic)
            );
            if let Some(t) = &token {
                path.push_str(&format!("&pageToken={}", seg(t)));
            }
            let Some(page) = self.http.get(&api, &path).await? else {
                return Ok(out);
            };
            if let Some(items) = page.get("subscriptions").and_then(Value::as_array) {
                out.extend(
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|p| short_name(&self.project, p)),
                );
            }
            match page.get("nextPageToken").and_then(Value::as_str) {
                Some(t) if !t.is_empty() && token.as_deref() != Some(t) => {
                    token = Some(t.to_owned())
                }
                _ => {
                    out.sort();
                    return Ok(out);
                }
            }
        }
        Err(HttpError::Decode {
            api,
            reason: format!(
                "more than {MAX_PAGES} pages; the endpoint does not behave like Pub/Sub"
            ),
        })
    }

    /// Every page of a listing (`topics` or `subscriptions`) of the project, as JSON objects.
    pub(super) async fn list(&self, collection: &str) -> Result<Vec<Value>, HttpError> {
        let api = format!("GET {collection} (list)");
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut path = format!(
                "/projects/{}/{collection}?pageSize={PAGE_SIZE}",
                seg(&self.project)
            );
            if let Some(t) = &token {
                path.push_str(&format!("&pageToken={}", seg(t)));
            }
            let Some(page) = self.http.get(&api, &path).await? else {
                return Ok(out);
            };
            if let Some(items) = page.get(collection).and_then(Value::as_array) {
                out.extend(items.iter().cloned());
            }
            match page.get("nextPageToken").and_then(Value::as_str) {
                Some(t) if !t.is_empty() && token.as_deref() != Some(t) => {
                    token = Some(t.to_owned())
                }
                _ => return Ok(out),
            }
        }
        Err(HttpError::Decode {
            api,
            reason: format!(
                "more than {MAX_PAGES} pages; the endpoint does not behave like Pub/Sub"
            ),
        })
    }

    /// Every topic and subscription of the project (two listings), as live state by id.
    async fn listed(&self) -> Result<BTreeMap<ResourceId, Live>, HttpError> {
        let (topics, subs) = tokio::join!(self.list("topics"), self.list("subscriptions"));
        let mut out = BTreeMap::new();
        for (kind, items) in [(Kind::Topic, topics?), (Kind::Subscription, subs?)] {
            for v in items {
                let Some(path) = v.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let name = short_name(&self.project, path);
                let id = if kind == Kind::Topic {
                    topic_id(&self.target, &name)
                } else {
                    subscription_id(&self.target, &name)
                };
                out.insert(id, self.live(kind, &v));
            }
        }
        Ok(out)
    }

    /// Every topic and subscription of the project inside the ownership prefixes (and
    /// starting with `filter`), as live state by id.
    pub async fn inventory(
        &self,
        filter: Option<&str>,
    ) -> Result<BTreeMap<ResourceId, Live>, HttpError> {
        let mut all = self.listed().await?;
        all.retain(|id, _| {
            !id.name.contains('/')
                && crate::backend::kit::ownership::in_prefixes(&self.prefixes, &id.name)
                && filter.is_none_or(|f| id.name.starts_with(f))
        });
        Ok(all)
    }

    /// What `plan --prune` may delete: topics and subscriptions labelled
    /// `managed-by: dlqctl` (with a channel label), inside the ownership prefixes, that `skip`
    /// does not name. Two listings, whatever the count.
    ///
    /// Refused on a target without `ownership.prefixes`: the labels say which dlqctl channel
    /// an object belongs to, not whose dlqctl wrote it, and a project is often shared, so
    /// without prefixes prune would list another team's channels (every one its specs do
    /// not name) for deletion.
    pub async fn prunable(
        &self,
        skip: &BTreeSet<ResourceId>,
        _target: &Target,
    ) -> Result<Vec<Prunable>, HttpError> {
        if self.prefixes.is_empty() {
            return Err(HttpError::Refused {
                what: "--prune".into(),
                reason: format!(
                    "refused: this Pub/Sub target declares no `ownership.prefixes`, and the labels (`{LABEL_MANAGED_BY}: {LABEL_MANAGED_BY_VALUE}`, `{LABEL_CHANNEL}`) cannot tell this team's channels from another dlqctl user's in project `{}`; declare `ownership.prefixes` for the target in the targets file (prune then looks only inside them); nothing was listed or deleted",
                    self.project
                ),
            });
        }
        let all = self.inventory(None).await?;
        let dead_letter_topics: BTreeSet<&str> = all
            .values()
            .filter_map(|l| l.props.get(DEAD_LETTER_TOPIC).and_then(Value::as_str))
            .collect();
        let mut out = Vec::new();
        for (id, live) in &all {
            if skip.contains(id) {
                continue;
            }
            let labels = labels(live);
            let Some(channel) = labels.get(LABEL_CHANNEL).filter(|c| !c.is_empty()) else {
                continue;
            };
            if ownership_problem(&labels, channel).is_some() {
                continue;
            }
            let role = match id.kind {
                Kind::Subscription if live.props.contains_key(DEAD_LETTER_TOPIC) => {
                    Role::Subscription
                }
                Kind::Subscription => Role::DeadLetterSubscription,
                _ if dead_letter_topics.contains(id.name.as_str()) => Role::DeadLetter,
                _ => Role::Main,
            };
            out.push(Prunable {
                id: id.clone(),
                live: live.clone(),
                channel: channel.clone(),
                role,
                identity: Props::new(),
            });
        }
        Ok(out)
    }
}

impl Reader {
    /// The import door: every topic and subscription in scope, grouped into channels.
    pub async fn import(&self, target: &Target, prefix: Option<&str>) -> Result<Found, HttpError> {
        let live = self.inventory(prefix).await?;
        let count = |k: Kind| live.keys().filter(|i| i.kind == k).count();
        let read = BTreeMap::from([
            ("topics", count(Kind::Topic)),
            ("subscriptions", count(Kind::Subscription)),
        ]);
        let (c, u) = group(&live, self.target(), target);
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
        // One read of them all: the same listing or multi-name read the plan made.
        Reader::read(self, ids).await
    }

    async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, Self::Error> {
        Reader::message_count(self, id).await
    }

    async fn identity(&self) -> Result<String, Self::Error> {
        Reader::identity(self).await
    }
}

impl crate::backend::kit::doors::Operator for Reader {
    /// `emulator` on an emulator (no credentials are sent to one). On Google the only
    /// credential dlqctl reads is an OAuth access token, which names no account by itself
    /// (resolving it would take a call to Google's tokeninfo, which dlqctl does not make).
    async fn operator(&self) -> Result<String, Self::Error> {
        Ok(if self.emulator {
            "emulator".to_owned()
        } else {
            "unknown (a Google OAuth access token; its account is not resolved)".to_owned()
        })
    }
}

impl crate::backend::kit::doors::Import for Reader {
    async fn import(&self, target: &Target, prefix: Option<&str>) -> Result<Found, Self::Error> {
        Reader::import(self, target, prefix).await
    }
}
