//! Kafka reads (read-only: Metadata, DescribeConfigs, watermarks; `GET /connectors/{name}` on
//! the Connect worker): the live topics and connectors a plan names, the inventory for
//! `import` and `--prune`, record counts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rdkafka::ClientConfig;
use rdkafka::types::RDKafkaErrorCode;
use serde_json::{Value, json};

use super::ffi::{self, Admin, Source};
use super::import::group;
use super::*;
use crate::backend::kit::errors::BackendError;
use crate::backend::kit::import::Found;
use crate::backend::kit::import::Prunable;
use crate::backend::wire::http::Stats;
use crate::resource::{Desired, Live, Props, Role};
use crate::spec::model::Target;

/// The settings of one target that make a client, minus secrets.
pub(super) fn client_config(
    name: &str,
    target: &Target,
) -> Result<(ClientConfig, String), BackendError> {
    let config_error = |message: String| BackendError::Config {
        target: name.to_owned(),
        message,
    };
    let bootstrap = target
        .bootstrap_servers
        .clone()
        .ok_or_else(|| config_error("no `bootstrapServers`".into()))?;
    let mut config = ClientConfig::new();
    config.set("client.id", "dlqctl");
    for (key, value) in target.properties.iter().flatten() {
        if SECRET_PROPERTIES.contains(&key.as_str()) || crate::spec::model::is_secret_property(key)
        {
            return Err(config_error(format!(
                "`properties.{key}` holds a secret: name the environment variable that holds it under `secretProperties` instead"
            )));
        }
        if FIXED_PROPERTIES.contains(&key.as_str()) {
            return Err(config_error(format!(
                "`properties.{key}` is set by dlqctl (bootstrapServers; topics are never auto-created)"
            )));
        }
        config.set(key, value);
    }
    for (key, var) in target.secret_properties.iter().flatten() {
        if FIXED_PROPERTIES.contains(&key.as_str()) {
            return Err(config_error(format!(
                "`secretProperties.{key}` is set by dlqctl"
            )));
        }
        let value = std::env::var(var).map_err(|_| BackendError::MissingEnv {
            target: name.to_owned(),
            field: "secretProperties",
            var: var.clone(),
        })?;
        crate::secrets::never_show(&value);
        config.set(key, value);
    }
    config.set("bootstrap.servers", &bootstrap);
    // A metadata request must never create a topic (tansu does unless told).
    config.set("allow.auto.create.topics", "false");
    Ok((config, bootstrap))
}

/// librdkafka's complaint about a property, without the value when it is a secret (its own
/// message quotes the value).
pub(super) fn describe_config_error(target: &Target, e: &rdkafka::error::KafkaError) -> String {
    match e {
        rdkafka::error::KafkaError::ClientConfig(_, desc, key, _) => {
            let secret = target.secret_properties.as_ref().and_then(|s| s.get(key));
            match secret {
                Some(var) => format!("librdkafka refused property `{key}` (from ${var})"),
                None => format!("librdkafka refused property `{key}`: {desc}"),
            }
        }
        other => format!("cannot create the Kafka client: {other}"),
    }
}

/// Partition count and replication factor of one topic, from Metadata.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct TopicMeta {
    pub(super) partitions: usize,
    pub(super) replication: usize,
}

/// Read-only view of one Kafka target.
#[derive(Clone)]
pub struct Reader {
    pub target: String,
    pub(super) bootstrap: String,
    pub(super) admin: Arc<Admin>,
    pub(super) prefixes: Vec<String>,
    pub(super) stats: Arc<Stats>,
    /// The client settings (secrets included: never printed), for the status door's
    /// read-only consumers.
    pub(super) config: Arc<ClientConfig>,
    /// The Connect worker's read-only REST client (the target's `connectUrl`), if named.
    pub(super) connect: Option<super::connect::Client>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the client config: it holds the secret properties.
        f.debug_struct("kafka::Reader")
            .field("target", &self.target)
            .field("bootstrap", &self.bootstrap)
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// Builds the client (it connects on first use).
    pub fn connect(name: &str, target: &Target, stats: Arc<Stats>) -> Result<Self, BackendError> {
        let (config, bootstrap) = client_config(name, target)?;
        let admin: Admin = config.create().map_err(|e| BackendError::Config {
            target: name.to_owned(),
            message: describe_config_error(target, &e),
        })?;
        let connect = super::connect::Client::of(name, target, Arc::clone(&stats))?;
        Ok(Reader {
            connect,
            config: Arc::new(config),
            target: name.to_owned(),
            bootstrap,
            admin: Arc::new(admin),
            prefixes: target
                .ownership
                .as_ref()
                .map(|o| o.prefixes.clone())
                .unwrap_or_default(),
            stats,
        })
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    /// The live topic bindings dlqctl could have made (literal, any host, ALLOW, READ or
    /// WRITE: [`ffi::Grant::of`]), from one DescribeAcls.
    pub(super) async fn grants(&self) -> Result<Vec<ffi::Grant>, KafkaError> {
        let bindings = self.describe_acls().await?;
        Ok(bindings.iter().filter_map(ffi::Grant::of).collect())
    }

    /// Every ACL binding on topics (one DescribeAcls). A cluster without an authorizer keeps
    /// none, and cannot keep the ones `kafka.acls` asks for: [`KafkaError::NoAuthorizer`].
    pub(super) async fn describe_acls(&self) -> Result<Vec<ffi::AclBinding>, KafkaError> {
        self.stats.count("kafka:DescribeAcls");
        match ffi::describe_topic_acls(&self.admin, TIMEOUT).await {
            Ok(bindings) => Ok(bindings),
            Err(ffi::CallError::Failed {
                code: RDKafkaErrorCode::SecurityDisabled,
                ..
            }) => Err(KafkaError::NoAuthorizer {
                target: self.target.clone(),
                api: "DescribeAcls",
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// What `plan --prune` may delete: every topic inside the ownership prefixes that `skip`
    /// does not name, labelled with the channel and role it would have if it were imported
    /// (else the ones its name suggests); and, where a channel of the target writes
    /// `kafka.acls`, the ACL bindings dlqctl could have made on such topics.
    pub async fn prunable(
        &self,
        skip: &BTreeSet<ResourceId>,
        target: &Target,
    ) -> Result<Vec<Prunable>, KafkaError> {
        let live = self.inventory(None).await?;
        let mut found: Vec<Prunable> = live
            .into_iter()
            .filter(|(id, _)| !skip.contains(id))
            .map(|(id, live)| {
                let (channel, role) = role_by_name(&id.name);
                Prunable {
                    id,
                    live,
                    channel,
                    role,
                    identity: Props::new(),
                }
            })
            .collect();
        crate::backend::kit::import::relabel(&mut found, |live| {
            super::import::labels(live, &self.target, target)
        });
        // Where a channel owns ACLs (`kafka.acls`), the bindings dlqctl could have made on owned
        // topics that no spec names (ACLs outlive their topic): owned like the topics.
        if skip
            .iter()
            .any(|id| id.kind == Kind::Acl && id.target == self.target)
        {
            let grants = self.grants().await?;
            for (id, channel) in
                super::plan::prunable_acls(&self.target, skip, &grants, |t| self.owned(t))
            {
                found.push(Prunable {
                    id,
                    live: Live {
                        props: Props::new(),
                        messages: None,
                    },
                    channel,
                    role: Role::Acl,
                    identity: Props::new(),
                });
            }
        }
        Ok(found)
    }

    /// Records a topic holds (`None` for anything else, or a topic that does not exist).
    pub async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, KafkaError> {
        if id.kind != Kind::Topic {
            return Ok(None);
        }
        self.record_count(&id.name).await
    }

    pub fn owned(&self, topic: &str) -> bool {
        self.prefixes.iter().any(|p| topic.starts_with(p.as_str()))
    }

    /// One Metadata request for every topic of the cluster.
    pub(super) async fn metadata(&self) -> Result<BTreeMap<String, TopicMeta>, KafkaError> {
        self.stats.count("kafka:Metadata");
        let started = std::time::Instant::now();
        let admin = Arc::clone(&self.admin);
        let read = tokio::task::spawn_blocking(move || {
            let md = admin.inner().fetch_metadata(None, CONNECT_TIMEOUT);
            // What a failed (or any) call left on the main queue would stay there for good.
            super::ffi::drain_events(&admin);
            let md = md?;
            let mut out = BTreeMap::new();
            for t in md.topics() {
                // A topic being created may answer LeaderNotAvailable with its partitions;
                // without partitions it is not (yet) there.
                if t.error().is_some() && t.partitions().is_empty() {
                    continue;
                }
                let replication = t
                    .partitions()
                    .iter()
                    .map(|p| p.replicas().len())
                    .min()
                    .unwrap_or(0);
                out.insert(
                    t.name().to_owned(),
                    TopicMeta {
                        partitions: t.partitions().len(),
                        replication,
                    },
                );
            }
            Ok::<_, rdkafka::error::KafkaError>(out)
        });
        let answer = read.await;
        tracing::info!(
            "target {}: Kafka Metadata (all topics) at {} -> {} in {} ms",
            self.target,
            self.bootstrap,
            match &answer {
                Ok(Ok(topics)) => format!("{} topics", topics.len()),
                Ok(Err(e)) => format!("failed: {e}"),
                Err(e) => format!("failed: {e}"),
            },
            started.elapsed().as_millis()
        );
        match answer {
            Ok(Ok(topics)) => Ok(topics),
            Ok(Err(e)) => Err(KafkaError::Connect {
                bootstrap: self.bootstrap.clone(),
                reason: e
                    .rdkafka_error_code()
                    .map_or_else(|| e.to_string(), |c| c.to_string()),
            }),
            Err(e) => Err(KafkaError::Connect {
                bootstrap: self.bootstrap.clone(),
                reason: format!("the metadata thread failed: {e}"),
            }),
        }
    }

    /// Reads the topics `ids` name: existence, partitions and replication factor from one
    /// Metadata request, configs from one DescribeConfigs request for all that exist.
    pub async fn read(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, KafkaError> {
        let mut out = BTreeMap::new();
        let acls: BTreeSet<&ResourceId> = ids
            .iter()
            .copied()
            .filter(|i| i.kind == Kind::Acl)
            .collect();
        if !acls.is_empty() {
            for g in self.grants().await? {
                let id = acl_id(&self.target, &g);
                if acls.contains(&id) {
                    out.insert(
                        id,
                        Live {
                            props: Props::new(),
                            messages: None,
                        },
                    );
                }
            }
        }
        if ids.iter().any(|i| i.kind == Kind::ShareGroup) {
            self.stats.count("kafka:DescribeConfigs(group)");
            out.extend(super::share::read_groups(&self.admin, &self.target, ids).await?);
        }
        for id in ids.iter().filter(|i| i.kind == Kind::Connector) {
            let Some(client) = &self.connect else {
                return Err(KafkaError::NoConnectUrl {
                    target: self.target.clone(),
                    connector: id.name.clone(),
                });
            };
            let c = client.connector(&id.name).await?;
            out.insert((*id).clone(), super::connect::live(&c.kind, &c.config));
        }
        if !ids.iter().any(|i| i.kind == Kind::Topic) {
            return Ok(out);
        }
        let meta = self.metadata().await?;
        let wanted: BTreeSet<&str> = ids
            .iter()
            .filter(|i| i.kind == Kind::Topic && meta.contains_key(&i.name))
            .map(|i| i.name.as_str())
            .collect();
        if wanted.is_empty() {
            return Ok(out);
        }
        self.stats.count("kafka:DescribeConfigs");
        let names: Vec<String> = wanted.iter().map(|s| (*s).to_owned()).collect();
        let started = std::time::Instant::now();
        let answers = ffi::describe_topic_configs(&self.admin, &names, TIMEOUT).await;
        tracing::info!(
            "target {}: Kafka DescribeConfigs ({} topics) at {} -> {} in {} ms",
            self.target,
            names.len(),
            self.bootstrap,
            if answers.is_ok() {
                "answered"
            } else {
                "failed"
            },
            started.elapsed().as_millis()
        );
        for (topic, answer) in answers? {
            let entries = match answer {
                Ok(entries) => entries,
                // Deleted between the two requests: it does not exist.
                Err(e) if e.code == RDKafkaErrorCode::UnknownTopicOrPartition => continue,
                Err(e) => return Err(topic_error(&topic, "DescribeConfigs", e)),
            };
            let Some(m) = meta.get(&topic) else { continue };
            out.insert(topic_id(&self.target, &topic), live_topic(m, &entries));
        }
        Ok(out)
    }

    /// Records a topic holds: the sum over its partitions of high minus low watermark (what a
    /// delete would drop). `None` when the topic does not exist.
    pub async fn record_count(&self, topic: &str) -> Result<Option<u64>, KafkaError> {
        let meta = self.metadata().await?;
        let Some(m) = meta.get(topic) else {
            return Ok(None);
        };
        self.stats.count("kafka:ListOffsets");
        let admin = Arc::clone(&self.admin);
        let (name, partitions) = (topic.to_owned(), m.partitions);
        let counted = tokio::task::spawn_blocking(move || {
            let mut total: u64 = 0;
            for p in 0..partitions {
                let p = i32::try_from(p).map_err(|_| format!("partition {p} is out of range"))?;
                let (low, high) = admin
                    .inner()
                    .fetch_watermarks(&name, p, TIMEOUT)
                    .map_err(|e| format!("partition {p}: {e}"))?;
                total = total.saturating_add(u64::try_from(high.saturating_sub(low)).unwrap_or(0));
            }
            Ok::<_, String>(total)
        })
        .await
        .map_err(|e| {
            topic_error(
                topic,
                "ListOffsets",
                format!("the offsets thread failed: {e}"),
            )
        })?;
        counted
            .map(Some)
            .map_err(|m| topic_error(topic, "ListOffsets", m))
    }

    /// Every topic inside the ownership prefixes (and starting with `prefix`, if given), read
    /// as [`read`](Self::read) reads them: the scope of `plan --prune` and `import`.
    pub async fn inventory(
        &self,
        prefix: Option<&str>,
    ) -> Result<BTreeMap<ResourceId, Live>, KafkaError> {
        let meta = self.metadata().await?;
        let ids: Vec<ResourceId> = meta
            .keys()
            .filter(|t| self.owned(t) && prefix.is_none_or(|p| t.starts_with(p)))
            .map(|t| topic_id(&self.target, t))
            .collect();
        let refs: Vec<&ResourceId> = ids.iter().collect();
        if refs.is_empty() {
            return Ok(BTreeMap::new());
        }
        self.read(&refs).await
    }

    /// Which cluster this is, for binding a saved plan to it: the cluster id.
    pub async fn identity(&self) -> Result<String, KafkaError> {
        self.stats.count("kafka:ClusterId");
        let admin = Arc::clone(&self.admin);
        let id =
            tokio::task::spawn_blocking(move || admin.inner().fetch_cluster_id(CONNECT_TIMEOUT))
                .await
                .ok()
                .flatten();
        Ok(format!(
            "kafka cluster {}",
            id.as_deref().unwrap_or("(unknown)")
        ))
    }
}

/// A topic's live properties: the effective value of every config the broker reports, and
/// which of those are the broker's defaults rather than set on the topic.
pub(super) fn live_topic(m: &TopicMeta, entries: &[ffi::Entry]) -> Live {
    let mut props = Props::new();
    props.insert("partitions".into(), json!(m.partitions));
    props.insert("replication.factor".into(), json!(m.replication));
    let mut defaults = Vec::new();
    for e in entries {
        let Some(value) = &e.value else { continue };
        if e.is_sensitive {
            continue;
        }
        let key = format!("config.{}", e.name);
        if !matches!(e.source, Source::DynamicTopic | Source::Unknown) {
            defaults.push(json!(key));
        }
        props.insert(key, normalise_value(value));
    }
    // A real broker reports every topic config (dozens), most at their default. One that
    // reports only a handful, all marked default, reports only what was set on the topic
    // (tansu does): those are settings, not defaults.
    let configs = props.keys().filter(|k| k.starts_with("config.")).count();
    let sparse = configs < SPARSE_ANSWER && defaults.len() == configs;
    if !defaults.is_empty() && !sparse {
        props.insert(DEFAULTS_KEY.into(), Value::Array(defaults));
    }
    Live {
        props,
        messages: None,
    }
}

/// Whether a channel on `target` owns ACL bindings (`kafka.acls`).
pub(super) fn owns_acls(target: &str, desired: &[Desired]) -> bool {
    desired
        .iter()
        .any(|d| d.id.target == target && d.id.kind == Kind::Acl && d.present)
}

/// Fewer configs than this, all marked default, in a DescribeConfigs answer: the broker lists
/// only what was set (see [`live_topic`]).
pub const SPARSE_ANSWER: usize = 10;

impl Reader {
    /// The import door: every topic in scope, grouped into channels by Spring's naming.
    pub async fn import(&self, target: &Target, prefix: Option<&str>) -> Result<Found, KafkaError> {
        let live = self.inventory(prefix).await?;
        let mut read = BTreeMap::from([("topics", live.len())]);
        let (mut c, u) = group(&live, self.target(), target);
        // The sink connectors that read an imported main topic (`kafka.connectors`).
        if let Some(client) = &self.connect {
            let connectors = client.list().await?;
            read.insert("connectors", connectors.len());
            super::connect::attach(&mut c, &connectors, self.target(), target);
        }
        Ok((c, u, read))
    }
}

impl crate::backend::kit::doors::Connected for Reader {
    type Error = super::KafkaError;

    fn target(&self) -> &str {
        Reader::target(self)
    }
}

impl crate::backend::kit::doors::Read for Reader {
    fn renew_read_budget(&self) {}

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
    /// The principal the broker gives these settings. Asked of the cluster first (its id),
    /// so that a target whose SASL handshake fails names no one it is not.
    async fn operator(&self) -> Result<String, Self::Error> {
        Reader::identity(self).await?;
        Ok(principal(&self.config))
    }
}

/// The principal Kafka's default principal builder gives a client with these settings:
/// `User:<sasl.username>` over SASL PLAIN or SCRAM, `User:ANONYMOUS` over PLAINTEXT or TLS
/// without a client certificate (the broker names no one then), and `unknown (…)` where the
/// broker derives the name from something dlqctl does not read (a Kerberos ticket, an OAuth
/// token, a certificate's subject).
pub(super) fn principal(config: &ClientConfig) -> String {
    let protocol = config
        .get("security.protocol")
        .unwrap_or("plaintext")
        .to_ascii_uppercase();
    if protocol.starts_with("SASL") {
        let mechanism = config
            .get("sasl.mechanism")
            .or_else(|| config.get("sasl.mechanisms"))
            .unwrap_or("GSSAPI")
            .to_ascii_uppercase();
        return match (mechanism.as_str(), config.get("sasl.username")) {
            ("PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512", Some(u)) if !u.is_empty() => {
                format!("User:{u}")
            }
            (m, _) => format!("unknown (SASL {m}: the broker names the principal)"),
        };
    }
    let certificate = [
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.keystore.location",
    ]
    .iter()
    .any(|k| config.get(k).is_some());
    if protocol == "SSL" && certificate {
        "unknown (TLS client certificate: the broker names the principal by its subject)".into()
    } else {
        "User:ANONYMOUS".into()
    }
}

impl crate::backend::kit::doors::Import for Reader {
    async fn import(&self, target: &Target, prefix: Option<&str>) -> Result<Found, Self::Error> {
        Reader::import(self, target, prefix).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(props: &[(&str, &str)]) -> ClientConfig {
        let mut c = ClientConfig::new();
        for (k, v) in props {
            c.set(*k, *v);
        }
        c
    }

    #[test]
    fn the_principal_is_the_sasl_user_and_anonymous_without_sasl() {
        assert_eq!(principal(&config(&[])), "User:ANONYMOUS");
        assert_eq!(
            principal(&config(&[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "ops"),
            ])),
            "User:ops"
        );
        assert!(
            principal(&config(&[
                ("security.protocol", "sasl_ssl"),
                ("sasl.mechanism", "OAUTHBEARER"),
            ]))
            .starts_with("unknown (SASL OAUTHBEARER")
        );
        assert!(
            principal(&config(&[
                ("security.protocol", "SSL"),
                ("ssl.certificate.location", "/c.pem"),
            ]))
            .starts_with("unknown (TLS client certificate")
        );
        assert_eq!(
            principal(&config(&[("security.protocol", "SSL")])),
            "User:ANONYMOUS"
        );
    }
}
