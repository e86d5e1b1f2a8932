//! Azure Service Bus reads through Azure Resource Manager (read-only: no call here changes an
//! entity or a message): each queue a plan names (one GET, [`CONCURRENCY`] in flight), the
//! namespace's queue listing for `--prune`, and the target's identity. `status` is in
//! `status.rs`; the reader also holds the data plane's lock-and-unlock face (`data.rs`),
//! which status's samples and the redrive mover use (the mover makes the writing face).
//!
//! Credentials: a token per audience (ARM, `https://management.azure.com`, and the data plane,
//! `https://servicebus.azure.net`). Either ready tokens from the environment (`accessTokenEnv`
//! for ARM, and for the data plane too unless `dataAccessTokenEnv` names its own), or
//! Microsoft Entra client credentials (`tenantId`, `clientId`, `clientSecretEnv`), exchanged
//! at `tokenUrl` for one token per audience on first use and kept (`wire/token.rs`): connecting
//! makes no call. Topic channels (a topic and a subscription) are refused: only queues are read
//! and written so far.

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
use crate::backend::wire::token::{Bearer, ClientCredentials, TokenSource};
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
            return Ok(match &target.data_access_token_env {
                Some(dvar) => Credentials {
                    arm: Bearer::Fixed(arm),
                    arm_hint: format!("{var} (`accessTokenEnv`, a token for {ARM_SCOPE_AUDIENCE})"),
                    data: Bearer::Fixed(token("dataAccessTokenEnv", dvar)?),
                    data_hint: format!(
                        "{dvar} (`dataAccessTokenEnv`, a token for {DATA_SCOPE_AUDIENCE})"
                    ),
                },
                None => Credentials {
                    arm: Bearer::Fixed(arm.clone()),
                    arm_hint: format!("{var} (`accessTokenEnv`, a token for {ARM_SCOPE_AUDIENCE})"),
                    data: Bearer::Fixed(arm),
                    data_hint: format!(
                        "{var} (`accessTokenEnv`, sent to ARM too: a token is issued for one audience; give the data plane a token for {DATA_SCOPE_AUDIENCE} with `dataAccessTokenEnv`)"
                    ),
                },
            });
        }
        let (Some(tenant), Some(client_id), Some(secret_var)) = (
            target.tenant_id.as_deref().filter(|t| !t.trim().is_empty()),
            target.client_id.as_deref().filter(|c| !c.trim().is_empty()),
            target.client_secret_env.as_ref(),
        ) else {
            return Err(config(
                name,
                "no credentials: name an access token with `accessTokenEnv`, or give all of `tenantId`, `clientId` and `clientSecretEnv` (docs/azure.md)",
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
        let creds = ClientCredentials {
            url,
            client_id: client_id.trim().to_owned(),
            client_secret: secret,
        };
        let source = |scope: &str| {
            TokenSource::new(name, creds.clone(), scope, insecure, Arc::clone(stats))
                .map_err(|e| e.at(name))
        };
        let hint = |scope: &str| {
            format!(
                "the client credentials (clientId {}, secret in {secret_var}): the token for {scope}; check the application's role on the namespace",
                creds.client_id
            )
        };
        Ok(Credentials {
            arm: Bearer::Fetched(source(ARM_SCOPE)?),
            arm_hint: hint(ARM_SCOPE),
            data: Bearer::Fetched(source(DATA_SCOPE)?),
            data_hint: hint(DATA_SCOPE),
        })
    }
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

    /// Refuses what this version cannot read: a topic or subscription.
    fn queues_only(&self, id: &ResourceId) -> Result<(), BackendError> {
        if id.kind == Kind::Queue {
            return Ok(());
        }
        Err(config(
            &self.target,
            format!(
                "{id}: topics and subscriptions are not read in this version, only queues (docs/azure.md)"
            ),
        ))
    }

    /// One queue's ARM JSON; `None` when it does not exist.
    pub(super) async fn get_queue(&self, name: &str) -> Result<Option<Value>, BackendError> {
        self.http
            .get("GET namespaces/queues/{queue}", &self.queue_path(name))
            .await
            .map_err(|e| e.at(&self.target))
    }

    /// Reads the queues `ids` names (those that exist), one GET each.
    pub async fn read(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, BackendError> {
        let mine: Vec<&ResourceId> = ids
            .iter()
            .copied()
            .filter(|i| i.backend == Backend::AzureServicebus && i.target == self.target)
            .collect();
        for id in &mine {
            self.queues_only(id)?;
        }
        let read: Vec<Option<(ResourceId, Live)>> = stream::iter(mine)
            .map(|id| async move {
                let v = self.get_queue(&id.name).await?;
                Ok::<_, BackendError>(v.map(|v| (id.clone(), live_queue(&v))))
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        Ok(read.into_iter().flatten().collect())
    }

    /// Every queue of the namespace (`GET namespaces/queues`, every page), by name.
    pub async fn queues(&self) -> Result<Vec<(String, Live)>, BackendError> {
        let mut out = Vec::new();
        let mut path = format!("{}/queues?api-version={API_VERSION}", self.namespace_path);
        for _ in 0..MAX_PAGES {
            let Some(page) = self
                .http
                .get("GET namespaces/queues", &path)
                .await
                .map_err(|e| e.at(&self.target))?
            else {
                return Ok(out);
            };
            for q in page["value"].as_array().into_iter().flatten() {
                if let Some(n) = q["name"].as_str() {
                    out.push((n.to_owned(), live_queue(q)));
                }
            }
            // nextLink is absolute on ARM; only its path and query are followed, on this
            // target's endpoint (never another host).
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

    /// Owned queues (inside the ownership prefixes) that `skip` does not name.
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
        Ok(self
            .queues()
            .await?
            .into_iter()
            .filter(|(n, _)| self.prefixes.iter().any(|p| n.starts_with(p.as_str())))
            .map(|(n, live)| (queue_id(&self.target, &n), live))
            .filter(|(id, _)| !skip.contains(id))
            .map(|(id, live)| Prunable {
                id,
                live,
                channel: NO_SPEC_CHANNEL.to_owned(),
                role: Role::Main,
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

    /// Active and dead-lettered messages of a queue, from its `countDetails`.
    async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, Self::Error> {
        self.queues_only(id)?;
        Ok(self
            .get_queue(&id.name)
            .await?
            .and_then(|v| live_queue(&v).messages))
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
        Ok("unknown (Azure access token)".to_owned())
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
    /// The namespace's queues inside the ownership prefixes (and `--prefix`), grouped by
    /// `import.rs`.
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
        let (candidates, unmatched) = super::import::group(&queues, &self.target);
        Ok((candidates, unmatched, BTreeMap::from([("queues", read)])))
    }
}
