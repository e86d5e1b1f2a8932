//! The backends, one folder each with the same doors, and the one dispatch over them.
//!
//! Every backend folder (`sqs/`, `rabbitmq/`, `kafka/`, `pubsub/`) has the same files for the same doors:
//!
//! | file | door | may do |
//! |---|---|---|
//! | `desired.rs` | resolved channel → desired resources | pure, no I/O |
//! | `read.rs` | the read-only [`Reader`]: live state, prunable objects, message counts | reads only |
//! | `plan.rs` | backend rules on top of the generic diff: refine, notes, apply-order hints, review | pure, except the review, which may read |
//! | `apply.rs` | the [`Writer`] | the only door that writes |
//! | `import.rs` | live objects → channel specs | pure over what `read.rs` returned |
//! | `status.rs` | depth, samples and ages of a channel's dead letters (`dlqctl status`) | reads; its `//!` says what a read does to a message |
//!
//! plus what a backend needs of its own (`sqs/alarms.rs` for CloudWatch, `kafka/ffi.rs`).
//! Below them, `wire/` holds the clients (AWS, HTTP, retry budget, call counts) and never
//! imports the spec. Above them, `crate::engine` holds the backend-neutral verbs (plan, apply,
//! import), which reach a backend only through this file: each dispatch arm is one line, and
//! each backend's own error becomes a [`BackendError`] naming the target in one place
//! ([`AtTarget`]). Adding an operation to every backend is one file per backend folder, one
//! method here, and one driver in `crate::engine`.
//!
//! Credentials come only from the environment variables the targets file names; they are
//! held in memory for the calls and never printed, logged or saved.

pub mod kafka;
pub mod kit;
pub mod pubsub;
pub mod rabbitmq;
pub mod sqs;
pub mod wire;

/// The read retry budget, where tests and docs have always found it.
pub use wire::retry;

/// What the backends share, where the verbs have always found it.
pub use kit::connect::ConnectOptions;
pub use kit::errors::{AtTarget, BackendError, MoveError};
pub use kit::import::{Found, NO_SPEC_CHANNEL, Prunable};

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use crate::plan::{Change, Note};
use crate::resource::{Desired, Live, ResourceId, TimeUnit};
use crate::spec::model::{Backend, Target};
use crate::spec::resolve::Resolved;
use crate::status::{Observed, ReadOptions};
use wire::Stats;

/// Where a target is, for `-v`: backend and endpoint, never a credential (URLs lose their
/// userinfo; Kafka's properties show only their names).
fn where_is(target: &Target) -> String {
    let url = |u: &Option<String>| {
        u.as_deref()
            .map_or_else(|| "(no url)".to_owned(), wire::http::redact_userinfo)
    };
    match target.backend {
        Backend::Rabbitmq => format!("RabbitMQ management API at {}", url(&target.url)),
        Backend::Sqs => format!(
            "SQS and CloudWatch in region {} at {}{}",
            target.region.as_deref().unwrap_or("(from the AWS chain)"),
            target.endpoint.as_deref().map_or_else(
                || "the AWS endpoint".to_owned(),
                wire::http::redact_userinfo
            ),
            target
                .profile
                .as_deref()
                .map_or_else(String::new, |p| format!(", profile {p}"))
        ),
        Backend::Kafka => format!(
            "Kafka at {}; properties {}; secret properties from {}",
            target.bootstrap_servers.as_deref().unwrap_or("(none)"),
            names(target.properties.iter().flatten().map(|(k, _)| k.clone())),
            names(
                target
                    .secret_properties
                    .iter()
                    .flatten()
                    .map(|(k, var)| format!("{k} (${var})"))
            ),
        ),
        Backend::Pubsub => format!(
            "Pub/Sub project {} at {}",
            target.project.as_deref().unwrap_or("(no project)"),
            target.emulator_host.as_deref().map_or_else(
                || "pubsub.googleapis.com (or PUBSUB_EMULATOR_HOST)".to_owned(),
                |h| format!("the emulator {h}")
            )
        ),
    }
}

fn names(it: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = it.collect();
    if v.is_empty() {
        "(none)".to_owned()
    } else {
        v.join(", ")
    }
}

// ---------------------------------------------------------------------------------------------
// Pure doors, dispatched on the backend
// ---------------------------------------------------------------------------------------------

/// Every resource a channel needs on its backend (pure).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    match r.backend {
        Backend::Rabbitmq => rabbitmq::desired::desired(r),
        Backend::Sqs => sqs::desired::desired(r),
        Backend::Kafka => kafka::desired::desired(r),
        Backend::Pubsub => pubsub::desired::desired(r),
    }
}

/// Backend rules the generic diff cannot know: a change that is impossible in place (fewer
/// Kafka partitions), or one that destroys messages by itself (lower SQS retention).
/// Pure; called on every change of a plan.
pub fn refine(change: &mut Change) {
    match change.resource.backend {
        Backend::Rabbitmq => rabbitmq::plan::refine(change),
        Backend::Sqs => sqs::plan::refine(change),
        Backend::Kafka => kafka::plan::refine(change),
        Backend::Pubsub => pubsub::plan::refine(change),
    }
}

/// The unit of a changed property that holds a duration, or `None` (pure): plans show such
/// values as people write them (`30d`) beside the number the backend stores.
pub fn duration_unit(change: &Change, key: &str) -> Option<TimeUnit> {
    match change.resource.backend {
        Backend::Rabbitmq => rabbitmq::plan::duration_unit(change, key),
        Backend::Sqs => sqs::plan::duration_unit(change, key),
        Backend::Kafka => kafka::plan::duration_unit(change, key),
        Backend::Pubsub => pubsub::plan::duration_unit(change, key),
    }
}

/// Whether a changed property is a queue or topic's retention (SQS MessageRetentionPeriod,
/// RabbitMQ `message-ttl` in a policy or as an x-argument, Kafka `retention.ms`) (pure): where
/// a plan shows a dead-letter queue's discard decision. Pub/Sub: a subscription's
/// messageRetentionDuration.
pub fn is_retention(change: &Change, key: &str) -> bool {
    match change.resource.backend {
        Backend::Sqs => key == sqs::RETENTION,
        Backend::Rabbitmq => key == "definition.message-ttl" || key == "arguments.x-message-ttl",
        Backend::Kafka => key == "config.retention.ms",
        Backend::Pubsub => key == pubsub::RETENTION,
    }
}

/// Backend observations for a plan that the diff cannot make, from the desired resources and
/// what was read (pure): e.g. a RabbitMQ policy the broker does not apply.
pub fn notes(desired: &[Desired], live: &BTreeMap<ResourceId, Live>) -> Vec<Note> {
    let mut out = rabbitmq::plan::notes(desired, live);
    out.extend(sqs::plan::notes(desired, live));
    out.extend(kafka::plan::notes(desired, live));
    out.extend(pubsub::plan::notes(desired, live));
    out
}

/// The changes that must run before everything else of their target (pure): e.g. the
/// RabbitMQ policies of queues this plan creates (see [`crate::plan::sort_for_apply`]).
pub fn goes_first(changes: &[Change]) -> HashSet<ResourceId> {
    let mut out = rabbitmq::plan::goes_first(changes);
    out.extend(sqs::plan::goes_first(changes));
    out.extend(kafka::plan::goes_first(changes));
    out.extend(pubsub::plan::goes_first(changes));
    out
}

// ---------------------------------------------------------------------------------------------
// Read and write doors
// ---------------------------------------------------------------------------------------------

/// Read-only access to one target.
#[derive(Debug, Clone)]
pub enum Reader {
    Rabbitmq(rabbitmq::read::Reader),
    Sqs(sqs::read::Reader),
    Kafka(kafka::read::Reader),
    Pubsub(pubsub::read::Reader),
}

/// Read-write access to one target.
// One per target, built once by apply: variant sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Writer {
    Rabbitmq(rabbitmq::apply::Writer),
    Sqs(sqs::apply::Writer),
    Kafka(kafka::apply::Writer),
    Pubsub(pubsub::apply::Writer),
}

/// Calls the same door on whichever backend `$reader` is, and names the target in its error.
macro_rules! each {
    ($enum:ident, $value:expr, $b:ident => $call:expr) => {
        match $value {
            $enum::Rabbitmq($b) => $call.map_err(|e| e.at($b.target())),
            $enum::Sqs($b) => $call.map_err(|e| e.at($b.target())),
            $enum::Kafka($b) => $call.map_err(|e| e.at($b.target())),
            $enum::Pubsub($b) => $call.map_err(|e| e.at($b.target())),
        }
    };
}

impl Reader {
    pub fn connect(
        name: &str,
        target: &Target,
        opts: ConnectOptions,
        stats: Arc<Stats>,
    ) -> Result<Self, BackendError> {
        tracing::info!("target {name}: {}", where_is(target));
        Ok(match target.backend {
            Backend::Rabbitmq => {
                Reader::Rabbitmq(rabbitmq::read::Reader::connect(name, target, opts, stats)?)
            }
            Backend::Sqs => Reader::Sqs(sqs::read::Reader::connect(name, target, opts, stats)),
            Backend::Kafka => Reader::Kafka(kafka::read::Reader::connect(name, target, stats)?),
            Backend::Pubsub => {
                Reader::Pubsub(pubsub::read::Reader::connect(name, target, opts, stats)?)
            }
        })
    }

    pub fn target(&self) -> &str {
        match self {
            Reader::Rabbitmq(r) => r.target(),
            Reader::Sqs(r) => r.target(),
            Reader::Kafka(r) => r.target(),
            Reader::Pubsub(r) => r.target(),
        }
    }

    /// Starts a new reading of this target: its budget for reads that get no answer is whole
    /// again (`--read-timeout` is per reading; the exporter reads every interval with the same
    /// reader). Kafka has no such budget: each of its calls has its own timeout.
    pub fn renew_read_budget(&self) {
        match self {
            Reader::Rabbitmq(r) => r.read_budget().renew(),
            Reader::Sqs(r) => r.read_budget().renew(),
            Reader::Pubsub(r) => r.read_budget().renew(),
            Reader::Kafka(_) => {}
        }
    }

    /// Reads the live state of everything `ids` could name (and more of the same scope).
    pub async fn read(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, BackendError> {
        each!(Reader, self, r => r.read(ids).await)
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
        each!(Reader, self, r => r.review(desired, live, changes, notes, adopt).await)
    }

    /// Every owned live object on this target that `skip` does not name (`plan --prune`),
    /// labelled with the channel and role it would have if it were imported.
    pub async fn prunable(
        &self,
        skip: &BTreeSet<ResourceId>,
        target: &Target,
    ) -> Result<Vec<Prunable>, BackendError> {
        each!(Reader, self, r => r.prunable(skip, target).await)
    }

    /// One object as [`read`](Self::read) would return it, read as cheaply as the backend
    /// allows (apply's re-check immediately before each write).
    pub async fn read_one(&self, id: &ResourceId) -> Result<Option<Live>, BackendError> {
        each!(Reader, self, r => r.read_one(id).await)
    }

    /// Messages held by a queue or topic, where the backend can tell.
    pub async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, BackendError> {
        each!(Reader, self, r => r.message_count(id).await)
    }

    /// Which server this target is (RabbitMQ cluster name, Kafka cluster id, AWS endpoint and
    /// region): what a saved plan is bound to.
    pub async fn identity(&self) -> Result<String, BackendError> {
        each!(Reader, self, r => r.identity().await)
    }

    /// What `dlqctl status` shows of each channel: depth, messages read from the head of its
    /// dead-letter queue, and the depth of its other queues. Each backend's `status.rs` says
    /// what a read does to a message. The outer error: the target could not be read at all;
    /// otherwise each channel succeeds or fails on its own.
    pub async fn status(
        &self,
        channels: &[&Resolved],
        read: ReadOptions,
    ) -> Result<Vec<Result<Observed, BackendError>>, BackendError> {
        match self {
            Reader::Rabbitmq(r) => per_channel(r.target(), r.status(channels, read).await),
            Reader::Sqs(r) => per_channel(r.target(), r.status(channels, read).await),
            Reader::Kafka(r) => per_channel(r.target(), r.status(channels, read).await),
            Reader::Pubsub(r) => per_channel(r.target(), r.status(channels, read).await),
        }
    }

    /// Groups what the target holds into channel candidates (`dlqctl import`).
    pub async fn import(
        &self,
        target: &Target,
        prefix: Option<&str>,
    ) -> Result<Found, BackendError> {
        each!(Reader, self, r => r.import(target, prefix).await)
    }

    pub fn into_writer(self) -> Writer {
        match self {
            Reader::Rabbitmq(r) => Writer::Rabbitmq(r.into_writer()),
            Reader::Sqs(r) => Writer::Sqs(r.into_writer()),
            Reader::Kafka(r) => Writer::Kafka(r.into_writer()),
            Reader::Pubsub(r) => Writer::Pubsub(r.into_writer()),
        }
    }
}

/// A door's answer per channel, each error naming the target.
type PerChannel<T, E> = Result<Vec<Result<T, E>>, E>;

fn per_channel<T, E: AtTarget>(target: &str, r: PerChannel<T, E>) -> PerChannel<T, BackendError> {
    r.map(|v| v.into_iter().map(|x| x.map_err(|e| e.at(target))).collect())
        .map_err(|e| e.at(target))
}

/// The capability to move messages out of a dead-letter queue (`dlqctl redrive`), one per
/// backend (`*/redrive.rs`, whose `//!` states its guarantee). Made from a reader only by the
/// redrive driver: plan, status and apply never hold one.
#[derive(Debug, Clone)]
pub enum Mover {
    Rabbitmq(rabbitmq::redrive::Mover),
    Sqs(sqs::redrive::Mover),
    Kafka(kafka::redrive::Mover),
    Pubsub(pubsub::redrive::Mover),
}

impl Mover {
    pub fn connect(reader: Reader, target: &Target) -> Result<Self, BackendError> {
        Ok(match reader {
            Reader::Rabbitmq(r) => {
                let name = r.target().to_owned();
                Mover::Rabbitmq(rabbitmq::redrive::Mover::connect(r, &name, target)?)
            }
            Reader::Sqs(r) => Mover::Sqs(sqs::redrive::Mover::new(r)),
            Reader::Kafka(r) => Mover::Kafka(kafka::redrive::Mover::new(r)),
            Reader::Pubsub(r) => Mover::Pubsub(pubsub::redrive::Mover::new(r)),
        })
    }

    /// Moves what `run` selects from the channel's dead-letter queue; `run.tally` counts what
    /// happened, also when this fails part-way.
    pub async fn redrive(
        &self,
        r: &Resolved,
        run: &crate::redrive::Run,
    ) -> Result<(), BackendError> {
        each!(Mover, self, m => m.redrive(r, run).await)
    }
}

impl Writer {
    pub async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), BackendError> {
        each!(Writer, self, w => w.apply(change, allow_loss).await)
    }

    /// How many changes [`apply_many`](Self::apply_many) takes in one call: more than one
    /// where the protocol writes many objects in one request (Kafka's CreateTopics,
    /// IncrementalAlterConfigs, CreatePartitions).
    pub fn batch_limit(&self) -> usize {
        match self {
            Writer::Kafka(_) => kafka::BATCH,
            _ => 1,
        }
    }

    /// Applies several independent changes (at most [`batch_limit`](Self::batch_limit)), as
    /// few requests as the backend allows; one result per change, in order.
    pub async fn apply_many(
        &self,
        changes: &[&Change],
        allow_loss: bool,
    ) -> Vec<Result<(), BackendError>> {
        match self {
            Writer::Kafka(w) => w
                .apply_many(changes, allow_loss)
                .await
                .into_iter()
                .map(|r| r.map_err(|e| e.at(w.target())))
                .collect(),
            _ => {
                let mut out = Vec::with_capacity(changes.len());
                for c in changes {
                    out.push(self.apply(c, allow_loss).await);
                }
                out
            }
        }
    }

    /// Waits for the backend to show what was written; returns what did not settle in time.
    pub async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, BackendError> {
        each!(Writer, self, w => w.settle(applied).await)
    }
}

/// Tests: the example spec `text` (its first channel), lint-clean and resolved against the
/// target `target` (JSON, as in a targets file) named `name`.
#[cfg(test)]
pub(crate) fn resolved_example(
    text: &str,
    name: &str,
    target: serde_json::Value,
) -> crate::spec::resolve::Resolved {
    let ws = crate::spec::load::load_str("example.yaml", text);
    assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
    let target = serde_json::from_value(target).expect("target");
    crate::spec::resolve::resolve(&ws.channels[0].value, name, &target).expect("resolves")
}
