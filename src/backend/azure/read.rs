//! Azure Service Bus reads through Azure Resource Manager (read-only: no call here changes an
//! entity or a message): each queue a plan names (one GET, [`CONCURRENCY`] in flight), the
//! namespace's queue listing for `--prune`, and the target's identity. `status` is in
//! `status.rs`; the reader also holds the data plane's lock-and-unlock face (`data.rs`),
//! which status's samples and the redrive mover use (the mover makes the writing face).
//!
//! Credentials: a token per audience (ARM, `https://management.azure.com`, and the data plane,
//! `https://servicebus.azure.net`). Ready tokens from the environment (`accessTokenEnv` for
//! ARM, and for the data plane too unless `dataAccessTokenEnv` names its own); or fetched
//! (`wire::http::token`) one per audience on first use and kept, from Microsoft Entra client
//! credentials (`tenantId`, `clientId`, `clientSecretEnv`, at `tokenUrl`), the machine's
//! managed identity (`managedIdentity`, at `identityUrl`), or Kubernetes workload identity
//! (`workloadIdentity`: the webhook's service account token as a federated credential):
//! connecting makes no call. A secret or an assertion goes only to an `https` endpoint, or
//! `http` on a loopback address (a local proxy or test server).
//!
//! Topic channels: a topic (`GET namespaces/topics/{topic}`, Topics_Get) and its subscription
//! (`GET .../topics/{topic}/subscriptions/{sub}`, Subscriptions_Get), api-version
//! [`API_VERSION`] (topics.json, subscriptions.json). A subscription's resource id is named
//! `topic/subscriptions/sub` (its names are unique only within the topic); it is owned when
//! both its topic's name and its own are inside the ownership prefixes, as lint asks of a
//! spec. A topic holds no messages of its own: what a delete of it would drop is what its
//! subscriptions hold, read from their listing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde_json::Value;

use super::*;
use crate::backend::kit::connect::ConnectOptions;
use crate::backend::kit::errors::{AtTarget, BackendError};
use crate::backend::kit::import::{Found, NO_SPEC_CHANNEL, Prunable};
use crate::backend::wire::http::{HttpConfig, ReadHttp, Stats};
use crate::backend::wire::retry::ReadBudget;
use crate::backend::wire::token::{Bearer, ClientCredentials, Grant, IMDS_URL, TokenSource};
use crate::resource::{Live, Role};
use crate::spec::model::Target;

/// Azure Resource Manager's public endpoint, used when the target names no `armUrl`.
pub const ARM_URL: &str = "https://management.azure.com";
/// The scope of a token for ARM (client credentials ask for `{audience}/.default`).
pub const ARM_SCOPE: &str = "https://management.azure.com/.default";
/// The scope of a token for the Service Bus data plane.
pub const DATA_SCOPE: &str = "https://servicebus.azure.net/.default";
const ARM_SCOPE_AUDIENCE: &str = "https://management.azure.com";
const DATA_SCOPE_AUDIENCE: &str = "https://servicebus.azure.net";
/// Calls in flight at once per target.
pub const CONCURRENCY: usize = 8;
/// More pages than any namespace holds: a server that keeps answering with a next page is
/// broken.
const MAX_PAGES: usize = 1000;

/// Read-only view of one Service Bus namespace.
#[derive(Debug, Clone)]
pub struct Reader {
    pub target: String,
    pub(super) http: ReadHttp,
    /// `/subscriptions/S/resourceGroups/RG/providers/Microsoft.ServiceBus/namespaces/NS`.
    pub(super) namespace_path: String,
    pub(super) namespace: String,
    /// The target's `ownership.prefixes`: the only names dlqctl writes, deletes or prunes.
    pub(super) prefixes: Vec<String>,
    /// The namespace's data plane (`dataUrl`), for status's samples and redrive's mover.
    pub(super) data: super::data::DataPlane,
    /// Who the credentials are, as far as the targets file says (the audit record's
    /// identity): a token's owner is not known without decoding it.
    operator: String,
}

fn config(name: &str, message: impl Into<String>) -> BackendError {
    BackendError::Config {
        target: name.to_owned(),
        message: message.into(),
    }
}

/// ARM's bearer and the data plane's, and how an error names each.
struct Credentials {
    arm: Bearer,
    arm_hint: String,
    data: Bearer,
    data_hint: String,
    /// Who they are, for [`Reader::operator`].
    who: String,
}

impl Credentials {
    /// The target's tokens: ready ones from `accessTokenEnv` (and `dataAccessTokenEnv`), or
    /// one [`TokenSource`] per audience from the client credentials, fetched on first use.
    fn of(
        name: &str,
        target: &Target,
        insecure: bool,
        stats: &Arc<Stats>,
    ) -> Result<Self, BackendError> {
        let env = crate::backend::kit::connect::env_value;
        if let Some(var) = &target.access_token_env {
            let token = |field: &'static str, var: &String| -> Result<String, BackendError> {
                env(name, field, Some(var))?
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| config(name, format!("`{field}`: the variable {var} is empty")))
            };
            let arm = token("accessTokenEnv", var)?;
            let who = format!("unknown (the Azure access token in {var})");
            return Ok(match &target.data_access_token_env {
                Some(dvar) => Credentials {
                    who,
                    arm: Bearer::Fixed(arm),
                    arm_hint: format!("{var} (`accessTokenEnv`, a token for {ARM_SCOPE_AUDIENCE})"),
                    data: Bearer::Fixed(token("dataAccessTokenEnv", dvar)?),
                    data_hint: format!(
                        "{dvar} (`dataAccessTokenEnv`, a token for {DATA_SCOPE_AUDIENCE})"
                    ),
                },
                None => Credentials {
                    who,
                    arm: Bearer::Fixed(arm.clone()),
                    arm_hint: format!("{var} (`accessTokenEnv`, a token for {ARM_SCOPE_AUDIENCE})"),
                    data: Bearer::Fixed(arm),
                    data_hint: format!(
                        "{var} (`accessTokenEnv`, sent to ARM too: a token is issued for one audience; give the data plane a token for {DATA_SCOPE_AUDIENCE} with `dataAccessTokenEnv`)"
                    ),
                },
            });
        }
        if target.managed_identity == Some(true) {
            let client_id = target
                .client_id
                .as_deref()
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned);
            let grant = Grant::ManagedIdentity {
                url: target
                    .identity_url
                    .clone()
                    .unwrap_or_else(|| IMDS_URL.to_owned()),
                client_id: client_id.clone(),
            };
            let who = match &client_id {
                Some(id) => format!("user-assigned managed identity {id}"),
                None => "system-assigned managed identity".to_owned(),
            };
            let holder = who.clone();
            return Credentials::fetched(name, &grant, who, (holder, "identity"), insecure, stats);
        }
        if target.workload_identity == Some(true) {
            return workload_identity(name, target, insecure, stats);
        }
        let (Some(tenant), Some(client_id), Some(secret_var)) = (
            target.tenant_id.as_deref().filter(|t| !t.trim().is_empty()),
            target.client_id.as_deref().filter(|c| !c.trim().is_empty()),
            target.client_secret_env.as_ref(),
        ) else {
            return Err(config(
                name,
                "no credentials: name an access token with `accessTokenEnv`, give all of `tenantId`, `clientId` and `clientSecretEnv`, or set `managedIdentity: true` (an Azure machine) or `workloadIdentity: true` (a Kubernetes pod) (docs/azure.md)",
            ));
        };
        let secret = env(name, "clientSecretEnv", Some(secret_var))?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                config(
                    name,
                    format!("`clientSecretEnv`: the variable {secret_var} is empty"),
                )
            })?;
        let url = target.token_url.clone().unwrap_or_else(|| {
            format!(
                "https://login.microsoftonline.com/{}/oauth2/v2.0/token",
                seg(tenant.trim())
            )
        });
        secure_endpoint(name, "tokenUrl", &url)?;
        let creds = ClientCredentials {
            url,
            client_id: client_id.trim().to_owned(),
            client_secret: secret,
        };
        let who = format!("application {} (tenant {})", creds.client_id, tenant.trim());
        let holder = format!(
            "the client credentials (clientId {}, secret in {secret_var})",
            creds.client_id
        );
        Credentials::fetched(
            name,
            &Grant::ClientCredentials(creds),
            who,
            (holder, "application"),
            insecure,
            stats,
        )
    }

    /// One [`TokenSource`] per audience from `grant`, fetched on first use; an error names
    /// `holder` (`holder.0`: who holds the credentials, `holder.1`: what needs the role on
    /// the namespace).
    fn fetched(
        name: &str,
        grant: &Grant,
        who: String,
        holder: (String, &str),
        insecure: bool,
        stats: &Arc<Stats>,
    ) -> Result<Self, BackendError> {
        let source = |scope: &str| {
            TokenSource::new(name, grant.clone(), scope, insecure, Arc::clone(stats))
                .map_err(|e| e.at(name))
        };
        let (holder, role) = holder;
        let hint = |scope: &str| {
            format!("{holder}: the token for {scope}; check the {role}'s role on the namespace")
        };
        Ok(Credentials {
            arm: Bearer::Fetched(source(ARM_SCOPE)?),
            arm_hint: hint(ARM_SCOPE),
            data: Bearer::Fetched(source(DATA_SCOPE)?),
            data_hint: hint(DATA_SCOPE),
            who,
        })
    }
}

/// Refuses a token endpoint a secret or an assertion would travel to in the clear: `https`,
/// or `http` on a loopback address only.
fn secure_endpoint(name: &str, field: &str, url: &str) -> Result<(), BackendError> {
    let ok = reqwest::Url::parse(url).is_ok_and(|u| match u.scheme() {
        "https" => true,
        "http" => u.host_str().is_some_and(|h| {
            let h = h.trim_start_matches('[').trim_end_matches(']');
            h.eq_ignore_ascii_case("localhost")
                || h.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
        }),
        _ => false,
    });
    if ok {
        Ok(())
    } else {
        Err(config(
            name,
            format!(
                "{field} `{}`: a token endpoint must be https (or http on a loopback address): the credential sent to it would travel in the clear",
                crate::backend::wire::http::redact_userinfo(url)
            ),
        ))
    }
}

/// [`Credentials`] from Kubernetes workload identity (`workloadIdentity: true`): the target's
/// `tenantId` and `clientId`, else the webhook's `AZURE_TENANT_ID` and `AZURE_CLIENT_ID`; the
/// service account token file `AZURE_FEDERATED_TOKEN_FILE` (read at each exchange, never
/// here); the endpoint `tokenUrl`, else on `AZURE_AUTHORITY_HOST` (or Entra's public host).
fn workload_identity(
    name: &str,
    target: &Target,
    insecure: bool,
    stats: &Arc<Stats>,
) -> Result<Credentials, BackendError> {
    let var = |v: &str| {
        std::env::var(v)
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let webhook = "the AKS workload identity webhook sets it in a pod whose service account is annotated with `azure.workload.identity/client-id` and that is labelled `azure.workload.identity/use: \"true\"`";
    let either = |field: &Option<String>, key: &str, env: &str| {
        field
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .or_else(|| var(env))
            .ok_or_else(|| {
                config(
                    name,
                    format!("workload identity: no `{key}`, and the variable {env} is not set ({webhook})"),
                )
            })
    };
    let tenant = either(&target.tenant_id, "tenantId", "AZURE_TENANT_ID")?;
    let client_id = either(&target.client_id, "clientId", "AZURE_CLIENT_ID")?;
    let token_file = var("AZURE_FEDERATED_TOKEN_FILE").ok_or_else(|| {
        config(
            name,
            format!(
                "workload identity: the variable AZURE_FEDERATED_TOKEN_FILE is not set ({webhook})"
            ),
        )
    })?;
    let url = target.token_url.clone().unwrap_or_else(|| {
        format!(
            "{}/{}/oauth2/v2.0/token",
            var("AZURE_AUTHORITY_HOST")
                .as_deref()
                .unwrap_or("https://login.microsoftonline.com")
                .trim_end_matches('/'),
            seg(&tenant)
        )
    });
    secure_endpoint(
        name,
        if target.token_url.is_some() {
            "tokenUrl"
        } else {
            "the token endpoint on AZURE_AUTHORITY_HOST"
        },
        &url,
    )?;
    let grant = Grant::Federated {
        url,
        client_id: client_id.clone(),
        token_file: token_file.into(),
    };
    Credentials::fetched(
        name,
        &grant,
        format!("workload identity {client_id} (tenant {tenant})"),
        (
            format!("the workload identity (clientId {client_id})"),
            "application",
        ),
        insecure,
        stats,
    )
}

impl Reader {
    pub fn connect(
        name: &str,
        target: &Target,
        opts: ConnectOptions,
        stats: Arc<Stats>,
    ) -> Result<Self, BackendError> {
        let need = |v: &Option<String>, field: &str| {
            v.clone()
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| config(name, format!("no `{field}`")))
        };
        let subscription = need(&target.subscription_id, "subscriptionId")?;
        let group = need(&target.resource_group, "resourceGroup")?;
        let namespace = need(&target.namespace, "namespace")?;
        let base = target
            .arm_url
            .as_deref()
            .unwrap_or(ARM_URL)
            .trim_end_matches('/')
            .to_owned();
        let data_base = target.data_url.as_deref().map_or_else(
            || format!("https://{}.servicebus.windows.net", seg(&namespace)),
            |u| u.trim_end_matches('/').to_owned(),
        );
        let creds = Credentials::of(name, target, opts.insecure, &stats)?;
        let data = super::data::DataPlane::new(
            name,
            &data_base,
            creds.data,
            &creds.data_hint,
            opts.insecure,
            Arc::clone(&stats),
        )
        .map_err(|e| e.at(name))?;
        let (bearer, source) = match creds.arm {
            Bearer::Fixed(t) => (Some(t), None),
            Bearer::Fetched(s) => (None, Some(s)),
        };
        let mut http = ReadHttp::new(
            HttpConfig {
                target: name.to_owned(),
                base,
                user: None,
                password: None,
                bearer,
                creds_hint: creds.arm_hint,
                insecure: opts.insecure,
                budget: ReadBudget::new(opts.read_timeout),
            },
            stats,
        )
        .map_err(|e| e.at(name))?;
        if let Some(s) = source {
            http = http.with_token_source(s);
        }
        Ok(Reader {
            target: name.to_owned(),
            http,
            namespace_path: format!(
                "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.ServiceBus/namespaces/{}",
                seg(&subscription),
                seg(&group),
                seg(&namespace)
            ),
            namespace,
            prefixes: crate::backend::kit::connect::prefixes(target),
            data,
            operator: creds.who,
        })
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    /// A queue's ARM path, with the api-version.
    pub(super) fn queue_path(&self, name: &str) -> String {
        format!(
            "{}/queues/{}?api-version={API_VERSION}",
            self.namespace_path,
            seg(name)
        )
    }

    /// A topic's ARM path, with the api-version.
    pub(super) fn topic_path(&self, topic: &str) -> String {
        format!(
            "{}/topics/{}?api-version={API_VERSION}",
            self.namespace_path,
            seg(topic)
        )
    }

    /// A subscription's ARM path, with the api-version.
    pub(super) fn subscription_path(&self, topic: &str, sub: &str) -> String {
        format!(
            "{}/topics/{}/subscriptions/{}?api-version={API_VERSION}",
            self.namespace_path,
            seg(topic),
            seg(sub)
        )
    }

    /// The ARM path of any entity id, and the API name `--stats` counts it under.
    pub(super) fn arm_path(&self, id: &ResourceId) -> (String, &'static str) {
        match id.kind {
            Kind::Topic => (self.topic_path(&id.name), "namespaces/topics/{topic}"),
            Kind::Subscription => {
                let (t, s) = split_subscription(&id.name);
                (
                    self.subscription_path(t, s),
                    "namespaces/topics/{topic}/subscriptions/{subscription}",
                )
            }
            _ => (self.queue_path(&id.name), "namespaces/queues/{queue}"),
        }
    }

    /// One entity's ARM JSON (a queue, topic or subscription); `None` when it does not exist.
    pub(super) async fn get_entity(&self, id: &ResourceId) -> Result<Option<Value>, BackendError> {
        let (path, api) = self.arm_path(id);
        self.http
            .get(&format!("GET {api}"), &path)
            .await
            .map_err(|e| e.at(&self.target))
    }

    /// One queue's ARM JSON; `None` when it does not exist.
    pub(super) async fn get_queue(&self, name: &str) -> Result<Option<Value>, BackendError> {
        self.http
            .get("GET namespaces/queues/{queue}", &self.queue_path(name))
            .await
            .map_err(|e| e.at(&self.target))
    }

    /// An entity as live properties: a queue's or subscription's settings; a topic carries
    /// none dlqctl owns, and the messages it holds are its subscriptions'.
    async fn live(&self, id: &ResourceId, v: &Value) -> Result<Live, BackendError> {
        if id.kind != Kind::Topic {
            return Ok(live_queue(v));
        }
        let mut held = Some(0_u64);
        for (_, s) in self.subscriptions(&id.name).await? {
            held = held.zip(s.messages).map(|(a, b)| a + b);
        }
        Ok(Live {
            props: Default::default(),
            messages: held,
        })
    }

    /// Reads the entities `ids` names (those that exist), one GET each.
    pub async fn read(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, BackendError> {
        let mine: Vec<&ResourceId> = ids
            .iter()
            .copied()
            .filter(|i| i.backend == Backend::AzureServicebus && i.target == self.target)
            .collect();
        let read: Vec<Option<(ResourceId, Live)>> = stream::iter(mine)
            .map(|id| async move {
                let Some(v) = self.get_entity(id).await? else {
                    return Ok::<_, BackendError>(None);
                };
                Ok(Some((id.clone(), self.live(id, &v).await?)))
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        Ok(read.into_iter().flatten().collect())
    }

    /// Every item of an ARM listing (`value`, every page of `nextLink`, followed on this
    /// target's endpoint only).
    async fn list(&self, api: &str, first: String) -> Result<Vec<Value>, BackendError> {
        let mut out = Vec::new();
        let mut path = first;
        for _ in 0..MAX_PAGES {
            let Some(page) = self
                .http
                .get(api, &path)
                .await
                .map_err(|e| e.at(&self.target))?
            else {
                return Ok(out);
            };
            out.extend(page["value"].as_array().into_iter().flatten().cloned());
            match page["nextLink"].as_str().filter(|l| !l.is_empty()) {
                Some(link) => {
                    let at = link.find(&self.namespace_path).ok_or_else(|| {
                        config(
                            &self.target,
                            format!("a nextLink outside the namespace: {link}"),
                        )
                    })?;
                    let next = link[at..].to_owned();
                    if next == path {
                        return Ok(out);
                    }
                    path = next;
                }
                None => return Ok(out),
            }
        }
        Ok(out)
    }

    /// Every topic of the namespace (`GET namespaces/topics`, every page), by name.
    pub async fn topics(&self) -> Result<Vec<String>, BackendError> {
        Ok(self
            .list(
                "GET namespaces/topics",
                format!("{}/topics?api-version={API_VERSION}", self.namespace_path),
            )
            .await?
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect())
    }

    /// The rules of a topic's subscription (`GET .../subscriptions/{subscription}/rules`,
    /// Rules_ListBySubscriptions, every page), as ARM gives them; `None` when the
    /// subscription does not exist.
    pub async fn rules(&self, topic: &str, sub: &str) -> Result<Option<Vec<Value>>, BackendError> {
        let base = format!(
            "{}/topics/{}/subscriptions/{}",
            self.namespace_path,
            seg(topic),
            seg(sub)
        );
        let api = "GET namespaces/topics/{topic}/subscriptions/{subscription}/rules";
        if self
            .http
            .get(
                "GET namespaces/topics/{topic}/subscriptions/{subscription}",
                &format!("{base}?api-version={API_VERSION}"),
            )
            .await
            .map_err(|e| e.at(&self.target))?
            .is_none()
        {
            return Ok(None);
        }
        self.list(api, format!("{base}/rules?api-version={API_VERSION}"))
            .await
            .map(Some)
    }

    /// Every subscription of `topic` (`GET .../topics/{topic}/subscriptions`, every page), by
    /// name, as live properties.
    pub async fn subscriptions(&self, topic: &str) -> Result<Vec<(String, Live)>, BackendError> {
        Ok(self
            .list(
                "GET namespaces/topics/{topic}/subscriptions",
                format!(
                    "{}/topics/{}/subscriptions?api-version={API_VERSION}",
                    self.namespace_path,
                    seg(topic)
                ),
            )
            .await?
            .iter()
            .filter_map(|s| s["name"].as_str().map(|n| (n.to_owned(), live_queue(s))))
            .collect())
    }

    /// The subscriptions of `topic` by name: every one of them receives a copy of what is
    /// sent to the topic (the default rule's TrueFilter; dlqctl does not read rules).
    pub async fn subscriptions_of(&self, topic: &str) -> Result<Vec<String>, BackendError> {
        Ok(self
            .subscriptions(topic)
            .await?
            .into_iter()
            .map(|(n, _)| n)
            .collect())
    }

    /// Whether a name is inside the ownership prefixes.
    pub(super) fn owns(&self, name: &str) -> bool {
        self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
    }

    /// Whether an entity is dlqctl's to write: its name inside the ownership prefixes; for a
    /// subscription, both its topic's name and its own (lint asks the same of a spec).
    pub(super) fn owns_entity(&self, id: &ResourceId) -> bool {
        match id.kind {
            Kind::Subscription => {
                let (t, s) = split_subscription(&id.name);
                self.owns(t) && self.owns(s)
            }
            _ => self.owns(&id.name),
        }
    }

    /// Owned topics and their owned subscriptions (both names inside the prefixes).
    async fn owned_topics(&self) -> Result<BTreeMap<ResourceId, Live>, BackendError> {
        let mut out = BTreeMap::new();
        for t in self.topics().await? {
            if !self.owns(&t) {
                continue;
            }
            let subs = self.subscriptions(&t).await?;
            let held = subs
                .iter()
                .try_fold(0_u64, |a, (_, l)| l.messages.map(|m| a + m));
            out.insert(
                topic_id(&self.target, &t),
                Live {
                    props: Default::default(),
                    messages: held,
                },
            );
            for (s, l) in subs {
                if self.owns(&s) {
                    out.insert(subscription_id(&self.target, &t, &s), l);
                }
            }
        }
        Ok(out)
    }

    /// Every queue of the namespace (`GET namespaces/queues`, every page), by name.
    pub async fn queues(&self) -> Result<Vec<(String, Live)>, BackendError> {
        Ok(self
            .list(
                "GET namespaces/queues",
                format!("{}/queues?api-version={API_VERSION}", self.namespace_path),
            )
            .await?
            .iter()
            .filter_map(|q| q["name"].as_str().map(|n| (n.to_owned(), live_queue(q))))
            .collect())
    }

    /// Owned queues, topics and subscriptions (inside the ownership prefixes) that `skip`
    /// does not name.
    pub async fn prunable(
        &self,
        skip: &BTreeSet<ResourceId>,
    ) -> Result<Vec<Prunable>, BackendError> {
        if self.prefixes.is_empty() {
            return Err(config(
                &self.target,
                "`plan --prune` needs `ownership.prefixes`: Service Bus entities carry no tags to say whose they are",
            ));
        }
        let queues = self
            .queues()
            .await?
            .into_iter()
            .filter(|(n, _)| self.prefixes.iter().any(|p| n.starts_with(p.as_str())))
            .map(|(n, live)| (queue_id(&self.target, &n), live));
        Ok(queues
            .chain(self.owned_topics().await?)
            .filter(|(id, _)| !skip.contains(id))
            .map(|(id, live)| Prunable {
                role: if id.kind == Kind::Subscription {
                    Role::Subscription
                } else {
                    Role::Main
                },
                id,
                live,
                channel: NO_SPEC_CHANNEL.to_owned(),
                identity: Default::default(),
            })
            .collect())
    }
}

impl crate::backend::kit::doors::Connected for Reader {
    type Error = BackendError;

    fn target(&self) -> &str {
        &self.target
    }
}

impl crate::backend::kit::doors::Read for Reader {
    fn renew_read_budget(&self) {
        self.http.budget().renew();
    }

    async fn read(&self, ids: &[&ResourceId]) -> Result<BTreeMap<ResourceId, Live>, Self::Error> {
        Reader::read(self, ids).await
    }

    async fn prunable(
        &self,
        skip: &BTreeSet<ResourceId>,
        _target: &Target,
    ) -> Result<Vec<Prunable>, Self::Error> {
        Reader::prunable(self, skip).await
    }

    async fn recheck(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, Self::Error> {
        // The same read the plan made.
        Reader::read(self, ids).await
    }

    /// Active and dead-lettered messages of a queue or subscription, from its
    /// `countDetails`; a topic's are its subscriptions'.
    async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, Self::Error> {
        let Some(v) = self.get_entity(id).await? else {
            return Ok(None);
        };
        Ok(self.live(id, &v).await?.messages)
    }

    async fn identity(&self) -> Result<String, Self::Error> {
        Ok(format!(
            "azure-servicebus namespace {} at {}{}",
            self.namespace,
            self.http.base(),
            self.namespace_path
        ))
    }
}

impl crate::backend::kit::doors::Operator for Reader {
    /// The token's identity is not read in this version (its claims would say).
    async fn operator(&self) -> Result<String, Self::Error> {
        Ok(self.operator.clone())
    }
}

impl crate::backend::kit::doors::Review for Reader {
    /// Ownership is by prefix, which lint checks and apply re-checks: nothing to read.
    async fn review(
        &self,
        _desired: &[crate::resource::Desired],
        _live: &BTreeMap<ResourceId, Live>,
        _changes: &mut Vec<crate::plan::Change>,
        _notes: &mut Vec<crate::plan::Note>,
        _adopt: bool,
    ) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl crate::backend::kit::doors::Import for Reader {
    /// The namespace's queues, and topics with their subscriptions, inside the ownership
    /// prefixes (and `--prefix`), grouped by `import.rs`.
    async fn import(&self, _target: &Target, prefix: Option<&str>) -> Result<Found, Self::Error> {
        let queues: BTreeMap<ResourceId, Live> = self
            .queues()
            .await?
            .into_iter()
            .filter(|(n, _)| {
                self.prefixes.is_empty() || self.prefixes.iter().any(|p| n.starts_with(p.as_str()))
            })
            .filter(|(n, _)| prefix.is_none_or(|p| n.starts_with(p)))
            .map(|(n, l)| (queue_id(&self.target, &n), l))
            .collect();
        let read = queues.len();
        let mut all = queues;
        let mut topics = 0;
        if !self.prefixes.is_empty() {
            for (id, l) in self.owned_topics().await? {
                let topic = split_subscription(&id.name).0;
                if prefix.is_none_or(|p| topic.starts_with(p)) {
                    topics += usize::from(id.kind == Kind::Topic);
                    all.insert(id, l);
                }
            }
        }
        let (candidates, unmatched) = super::import::group(&all, &self.target);
        Ok((
            candidates,
            unmatched,
            BTreeMap::from([("queues", read), ("topics", topics)]),
        ))
    }
}
