//! Connections to live systems: one read-only [`Reader`] per target for plan, turned into a
//! [`Writer`] only by apply.
//!
//! Credentials come only from the environment variables the targets file names; they are
//! held in memory for the calls and never printed, logged or saved.

pub mod aws;
pub mod cloudwatch;
pub mod http;
pub mod kafka;
pub mod rabbitmq;
pub mod retry;
pub mod sqs;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::plan::{Change, Note};
use crate::resource::{Desired, Kind, Live, Props, ResourceId, Role};
use crate::spec::model::{Backend, Target};
use http::{HttpConfig, HttpError, ReadHttp, Stats};

/// Connection options from the command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnectOptions {
    /// Accept any TLS certificate (`--insecure`).
    pub insecure: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("target `{target}`: environment variable {var} ({field}) is not set")]
    MissingEnv {
        target: String,
        field: &'static str,
        var: String,
    },
    #[error("target `{target}`: {message}")]
    Config { target: String, message: String },
    // Not a `#[source]`: the message already says it, and `{:#}` would say it twice.
    #[error("target `{target}`: {error}")]
    Http { target: String, error: HttpError },
    // Not a `#[source]`: the message already says it, and `{:#}` would say it twice.
    #[error("target `{target}`: {error}")]
    Aws {
        target: String,
        error: aws::AwsError,
    },
    // Not a `#[source]`: the message already says it, and `{:#}` would repeat it.
    #[error("target `{target}`: {error}")]
    Kafka {
        target: String,
        error: kafka::KafkaError,
    },
}

impl BackendError {
    pub fn http(target: &str, error: HttpError) -> Self {
        BackendError::Http {
            target: target.to_owned(),
            error,
        }
    }

    pub fn aws(target: &str, error: aws::AwsError) -> Self {
        BackendError::Aws {
            target: target.to_owned(),
            error,
        }
    }

    pub fn kafka(target: &str, error: kafka::KafkaError) -> Self {
        BackendError::Kafka {
            target: target.to_owned(),
            error,
        }
    }
}

fn env_value(
    target: &str,
    field: &'static str,
    var: Option<&String>,
) -> Result<Option<String>, BackendError> {
    let Some(var) = var else { return Ok(None) };
    match std::env::var(var) {
        Ok(v) => Ok(Some(v)),
        Err(_) => Err(BackendError::MissingEnv {
            target: target.to_owned(),
            field,
            var: var.clone(),
        }),
    }
}

/// Backend rules the generic diff cannot know: a change that is impossible in place (fewer
/// Kafka partitions), or one that destroys messages by itself (lower SQS retention).
/// Pure; called on every change of a plan.
pub fn refine(change: &mut Change) {
    match change.resource.backend {
        Backend::Sqs => sqs::refine(change),
        Backend::Kafka => kafka::refine(change),
        Backend::Rabbitmq => {}
    }
}

/// A live object in a target's ownership scope that no spec names: what `plan --prune`
/// deletes.
#[derive(Debug, Clone)]
pub struct Prunable {
    pub id: ResourceId,
    pub live: Live,
    /// The channel it belonged to: its `dlqctl-channel` tag (SQS), or the channel its name
    /// suggests (RabbitMQ, Kafka), for grouping and ordering the deletes.
    pub channel: String,
    pub role: Role,
    /// What a delete needs besides the name (a RabbitMQ binding's source, destination, routing
    /// and properties key); carried in the change's `desired`.
    pub identity: Props,
}

/// The channel label of pruned RabbitMQ resources: names alone do not say which channel a
/// queue belonged to.
pub const NO_SPEC_CHANNEL: &str = "(no spec)";

/// Read-only access to one target.
#[derive(Debug, Clone)]
pub enum Reader {
    Rabbitmq(rabbitmq::Reader),
    Sqs(sqs::Reader),
    Kafka(kafka::Reader),
}

/// Read-write access to one target.
// One per target, built once by apply: variant sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Writer {
    Rabbitmq(rabbitmq::Writer),
    Sqs(sqs::Writer),
    Kafka(kafka::Writer),
}

impl Reader {
    pub fn connect(
        name: &str,
        target: &Target,
        opts: ConnectOptions,
        stats: Arc<Stats>,
    ) -> Result<Self, BackendError> {
        match target.backend {
            Backend::Rabbitmq => {
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
                        base: url,
                        user,
                        password,
                        creds_hint,
                        insecure: opts.insecure,
                    },
                    stats,
                )
                .map_err(|e| BackendError::http(name, e))?;
                let prefixes = target
                    .ownership
                    .as_ref()
                    .map(|o| o.prefixes.clone())
                    .unwrap_or_default();
                Ok(Reader::Rabbitmq(rabbitmq::Reader::new(
                    name, http, prefixes,
                )))
            }
            // The AWS SDK's standard credential chain; the targets file only says where.
            Backend::Sqs => Ok(Reader::Sqs(sqs::Reader::new(
                name,
                aws::Settings::from_target(target),
                target
                    .ownership
                    .as_ref()
                    .map(|o| o.prefixes.clone())
                    .unwrap_or_default(),
                stats,
            ))),
            Backend::Kafka => Ok(Reader::Kafka(kafka::Reader::connect(name, target, stats)?)),
        }
    }

    pub fn target(&self) -> &str {
        match self {
            Reader::Rabbitmq(r) => &r.target,
            Reader::Sqs(r) => &r.target,
            Reader::Kafka(r) => &r.target,
        }
    }

    /// Reads the live state of everything `ids` could name (and more of the same scope).
    pub async fn read(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, BackendError> {
        match self {
            Reader::Rabbitmq(r) => {
                let vhosts: BTreeSet<String> = ids.iter().map(|i| i.scope.clone()).collect();
                r.read(&vhosts)
                    .await
                    .map_err(|e| BackendError::http(&r.target, e))
            }
            Reader::Sqs(r) => r
                .read(ids)
                .await
                .map_err(|e| BackendError::aws(&r.target, e)),
            Reader::Kafka(r) => r
                .read(ids)
                .await
                .map_err(|e| BackendError::kafka(&r.target, e)),
        }
    }

    /// Checks a plan's changes on this target against what the generic diff cannot see and
    /// only further reads can tell (SQS: ownership tags, read only where the plan would write).
    pub async fn review(
        &self,
        desired: &[Desired],
        live: &BTreeMap<ResourceId, Live>,
        changes: &mut Vec<Change>,
        notes: &mut Vec<Note>,
        adopt: bool,
    ) -> Result<(), BackendError> {
        match self {
            Reader::Sqs(r) => r
                .review(desired, live, changes, notes, adopt)
                .await
                .map_err(|e| BackendError::aws(&r.target, e)),
            Reader::Rabbitmq(_) | Reader::Kafka(_) => Ok(()),
        }
    }

    /// Every owned live object on this target that `skip` does not name (`plan --prune`).
    /// Ownership: RabbitMQ and Kafka, inside the ownership prefixes (RabbitMQ: in `vhosts`);
    /// SQS and CloudWatch, tagged `managed-by: dlqctl` (and inside the prefixes, if declared).
    pub async fn prunable(
        &self,
        skip: &BTreeSet<ResourceId>,
        vhosts: &BTreeSet<String>,
    ) -> Result<Vec<Prunable>, BackendError> {
        match self {
            Reader::Rabbitmq(r) => {
                let live = r
                    .read(vhosts)
                    .await
                    .map_err(|e| BackendError::http(&r.target, e))?;
                Ok(live
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
                                .filter_map(|k| {
                                    live.props.get(k).map(|v| (k.to_owned(), v.clone()))
                                })
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
                    .collect())
            }
            Reader::Sqs(r) => r
                .prunable(skip)
                .await
                .map_err(|e| BackendError::aws(&r.target, e)),
            Reader::Kafka(r) => {
                let live = r
                    .inventory(None)
                    .await
                    .map_err(|e| BackendError::kafka(&r.target, e))?;
                Ok(live
                    .into_iter()
                    .filter(|(id, _)| !skip.contains(id))
                    .map(|(id, live)| {
                        let (channel, role) = kafka::role_by_name(&id.name);
                        Prunable {
                            id,
                            live,
                            channel,
                            role,
                            identity: Props::new(),
                        }
                    })
                    .collect())
            }
        }
    }

    /// Messages held by a queue or topic, where the backend can tell.
    pub async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, BackendError> {
        match self {
            Reader::Rabbitmq(r) if id.kind == Kind::Queue => r
                .message_count(&id.scope, &id.name)
                .await
                .map_err(|e| BackendError::http(&r.target, e)),
            Reader::Rabbitmq(_) => Ok(None),
            Reader::Sqs(r) if id.kind == Kind::Queue => r
                .message_count(&id.name)
                .await
                .map_err(|e| BackendError::aws(&r.target, e)),
            Reader::Sqs(_) => Ok(None),
            Reader::Kafka(r) if id.kind == Kind::Topic => r
                .record_count(&id.name)
                .await
                .map_err(|e| BackendError::kafka(&r.target, e)),
            Reader::Kafka(_) => Ok(None),
        }
    }

    pub fn into_writer(self) -> Writer {
        match self {
            Reader::Rabbitmq(r) => {
                let http = r.http_for_writer();
                Writer::Rabbitmq(rabbitmq::Writer::new(r, http))
            }
            Reader::Sqs(r) => Writer::Sqs(sqs::Writer::new(r)),
            Reader::Kafka(r) => Writer::Kafka(r.into_writer()),
        }
    }
}

impl Writer {
    pub async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), BackendError> {
        match self {
            Writer::Rabbitmq(w) => w
                .apply(change, allow_loss)
                .await
                .map_err(|e| BackendError::http(&w.reader.target, e)),
            Writer::Sqs(w) => w
                .apply(change, allow_loss)
                .await
                .map_err(|e| BackendError::aws(&w.reader.target, e)),
            Writer::Kafka(w) => w
                .apply(change, allow_loss)
                .await
                .map_err(|e| BackendError::kafka(&w.reader.target, e)),
        }
    }

    /// Waits for the backend to show what was written; returns what did not settle in time.
    pub async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, BackendError> {
        match self {
            Writer::Rabbitmq(w) => {
                let policies: Vec<(String, String)> = applied
                    .iter()
                    .filter(|c| {
                        c.resource.kind == Kind::Policy && c.action != crate::plan::Action::Delete
                    })
                    .map(|c| (c.resource.scope.clone(), c.resource.name.clone()))
                    .collect();
                w.settle(&policies)
                    .await
                    .map_err(|e| BackendError::http(&w.reader.target, e))
            }
            Writer::Sqs(w) => w
                .settle(applied)
                .await
                .map_err(|e| BackendError::aws(&w.reader.target, e)),
            Writer::Kafka(w) => w
                .settle(applied)
                .await
                .map_err(|e| BackendError::kafka(&w.reader.target, e)),
        }
    }
}
