//! The backends, one folder each with the same doors, and the one dispatch over them.
//!
//! Each door is a trait in the kit ([`kit::doors`]), its contract on the trait; every backend
//! implements every door, in the file named for it, and each arm below calls through the
//! trait, so the compiler enforces this table: a backend missing a door does not build.
//!
//! | file | door (trait) | may do |
//! |---|---|---|
//! | `mod.rs` | names, keys, the shapes `read` returns; the backend's marker type | pure, imports none of its rooms |
//! | `desired.rs` | resolved channel → desired resources ([`Plan::desired`]) | pure, no I/O |
//! | `plan.rs` | [`Plan`]: refine, notes, apply-order hints, duration units, retention keys | pure |
//! | `import.rs` | live objects → channel candidates (pure grouping) | pure over what `read.rs` returned |
//! | `read.rs` | [`Read`], [`Import`] and [`Operator`] on the read-only `Reader` | reads only |
//! | `review.rs` | [`Review`]: a plan's changes against what only further reads can tell | reads only |
//! | `status.rs` | [`Status`]: depth, samples and ages of a channel's dead letters | reads; its `//!` says what a read does to a message |
//! | `apply.rs` | [`Apply`] on the `Writer` | the only door that writes objects |
//! | `redrive.rs` | [`Redrive`] on the `Mover` (Kafka's impl: `kafka/mover.rs`) | the only door that moves messages |
//! | `replay.rs` | [`Replay`] on the `Replayer`: archived messages published back (`redrive --from-archive`) | publishes only; takes nothing out of a queue |
//!
//! Inside a folder imports point down the table's order (mod < desired, plan, import < read <
//! review, status < apply, redrive); a backend imports the kit (`kit/`, `wire/`) and never
//! another backend or this file. Plus what a backend needs of its own (`sqs/alarms.rs` for
//! CloudWatch, `kafka/ffi.rs`, `kafka/ledger.rs`, `rabbitmq/guard.rs`). Above them,
//! `crate::engine` holds the backend-neutral verbs, which reach a backend only through this
//! file: each dispatch arm is one line, and each backend's own error becomes a
//! [`BackendError`] naming the target in one place ([`AtTarget`]). Adding a door to every
//! backend is one trait in the kit, one impl per backend folder, one method here, and one
//! driver in `crate::engine`.
//!
//! Credentials come only from the environment variables the targets file names; they are
//! held in memory for the calls and never printed, logged or saved.

pub mod azure;
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

use kit::alerts::{AlertHome, Alerts};
use kit::doors::{Apply, Connected, Import, Operator, Plan, Read, Redrive, Replay, Review, Status};
use kit::draw::{Draw, Drawing};

use crate::plan::{Change, Note};
use crate::resource::{Desired, Live, ResourceId, TimeUnit};
use crate::spec::model::{Backend, Target};
use crate::spec::resolve::Resolved;
use crate::status::{Message, Observed, ReadOptions};
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
        Backend::AzureServicebus => format!(
            "Azure Service Bus namespace {} (resource group {}) through ARM at {}",
            target.namespace.as_deref().unwrap_or("(no namespace)"),
            target.resource_group.as_deref().unwrap_or("(none)"),
            target.arm_url.as_deref().map_or_else(
                || "https://management.azure.com".to_owned(),
                wire::http::redact_userinfo
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

/// Calls a pure door (`$door` of trait `$trait`: [`Plan`], [`Draw`], [`Alerts`]) of the
/// backend `$backend`.
macro_rules! pure {
    ($backend:expr, $trait:ident :: $door:ident ( $($arg:expr),* )) => {
        match $backend {
            Backend::Rabbitmq => <rabbitmq::Rabbitmq as $trait>::$door($($arg),*),
            Backend::Sqs => <sqs::Sqs as $trait>::$door($($arg),*),
            Backend::Kafka => <kafka::Kafka as $trait>::$door($($arg),*),
            Backend::Pubsub => <pubsub::Pubsub as $trait>::$door($($arg),*),
            Backend::AzureServicebus => <azure::Azure as $trait>::$door($($arg),*),
        }
    };
}

/// How `dlqctl graph` draws channel `r` on its backend, from its present desired resources
/// (pure; see [`Draw`]).
pub fn drawing(r: &Resolved, desired: &[Desired], attempts: &str) -> Drawing {
    pure!(r.backend, Draw::drawing(r, desired, attempts))
}

/// Where the dead-letter alerts of a backend live (pure; see [`Alerts`]).
pub fn alert_home(backend: Backend) -> AlertHome {
    pure!(backend, Alerts::home())
}

/// The PromQL of a depth alert read from the broker's own exporter, where the backend has
/// one (pure; see [`Alerts::native_depth`]).
pub fn native_depth(r: &Resolved, matchers: &str, n: u64) -> Option<String> {
    pure!(r.backend, Alerts::native_depth(r, matchers, n))
}

/// The channel's Cloud Monitoring alert policies, one per tier (pure; see
/// [`Alerts::policies`]).
pub fn alert_policies(r: &Resolved) -> Vec<(crate::spec::model::Tier, serde_json::Value)> {
    pure!(r.backend, Alerts::policies(r))
}

/// The channel's Azure Monitor metric alerts, one per tier (pure; see
/// [`Alerts::metric_alerts`]).
pub fn alert_metric_alerts(
    r: &Resolved,
    target: &Target,
) -> Vec<(crate::spec::model::Tier, serde_json::Value)> {
    pure!(r.backend, Alerts::metric_alerts(r, target))
}

/// Every resource a channel needs on its backend (pure).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    pure!(r.backend, Plan::desired(r))
}

/// Backend rules the generic diff cannot know (see [`Plan::refine`]). Pure; called on every
/// change of a plan.
pub fn refine(change: &mut Change) {
    pure!(change.resource.backend, Plan::refine(change))
}

/// How a backend takes `redrive --to failed-consumer` (issue 37): the redrive driver builds
/// the destination from it and refuses what the backend cannot do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailedConsumer {
    /// The mover routes each message to the queue it failed in (RabbitMQ: x-death).
    PerMessage(&'static str),
    /// The mover routes each message to the queue the broker recorded on it as its source
    /// (SQS: `DeadLetterQueueSourceArn`), which a status read shows too: the dry run counts
    /// the messages by it ([`failed_consumer_source`]). One naming none stays, reported.
    BySource(&'static str),
    /// Only the main topic can be published to, which every subscription receives
    /// (Pub/Sub, a Service Bus topic channel): allowed when the channel's own subscription
    /// is the topic's only one, else with `--allow-fanout`, the subscriptions listed.
    Fanout,
    /// Not possible, or not built: why (the refusal's words).
    Refused(String),
}

/// [`FailedConsumer`] for channel `r` on its backend.
pub fn failed_consumer(r: &Resolved) -> FailedConsumer {
    let (channel, main) = (&r.channel, &r.main);
    match r.backend {
        Backend::Rabbitmq => FailedConsumer::PerMessage(
            "the queue each message was rejected from (x-death), through the default exchange",
        ),
        Backend::Pubsub => FailedConsumer::Fanout,
        Backend::Kafka => FailedConsumer::Refused(format!(
            "channel `{channel}` is on Kafka, where a topic reaches every consumer group that reads it, and there is no per-group path back: Spring's `kafka_dlt-original-consumer-group` header names the group a record failed in, but its retry and dead-letter topics are per topic, not per group (`{main}`, its retry topics and DLT are shared by every group). Redrive with `--to source` (every group reads the copies again) or `--to TOPIC` (a topic only the failed group reads)"
        )),
        Backend::Sqs => {
            FailedConsumer::BySource("the queue each message came from (DeadLetterQueueSourceArn)")
        }
        // A topic channel's subscription: only its topic can be sent to.
        Backend::AzureServicebus if source_fans_out(r) => FailedConsumer::Fanout,
        Backend::AzureServicebus => FailedConsumer::Refused(format!(
            "channel `{channel}` is a Service Bus queue, whose consumers share it: `--to source` (`{main}`) is the consumer the message failed in"
        )),
    }
}

/// Whether `--to source` of channel `r` sends to a topic that every subscription of it
/// receives, so that the redrive driver lists them and asks for `--allow-fanout` when there
/// are others than the channel's own: a Pub/Sub channel, and a Service Bus topic channel.
/// (A copy published to the main topic reaches every subscription of it: another team's
/// consumer would get the dead letters of this one a second time.)
pub fn source_fans_out(r: &Resolved) -> bool {
    match r.backend {
        Backend::Pubsub => true,
        Backend::AzureServicebus => r.azure.as_ref().is_some_and(|a| a.subscription.is_some()),
        Backend::Sqs | Backend::Rabbitmq | Backend::Kafka => false,
    }
}

/// Whether `a` and `b` name the same queue, topic or subscription on channel `r`'s backend:
/// Service Bus entities are ARM resources, whose names are case-insensitive ("Naming rules
/// and restrictions for Azure resources": "Always perform a case-insensitive comparison of
/// names"); every other backend's are exact.
pub fn same_name(r: &Resolved, a: &str, b: &str) -> bool {
    match r.backend {
        Backend::AzureServicebus => a.eq_ignore_ascii_case(b),
        Backend::Pubsub | Backend::Sqs | Backend::Rabbitmq | Backend::Kafka => a == b,
    }
}

/// What a refused fan-out may do instead, as the end of the refusal's sentence: a Service
/// Bus topic channel can redrive to a queue only the failed consumer reads; a Pub/Sub
/// consumer reads one subscription of one topic, so nothing is offered there.
pub fn fanout_alternative(r: &Resolved) -> &'static str {
    match r.backend {
        Backend::AzureServicebus => ", or --to QUEUE (a queue only the failed consumer reads)",
        Backend::Pubsub | Backend::Sqs | Backend::Rabbitmq | Backend::Kafka => "",
    }
}

/// The channel's own subscription on its main topic, where the backend has one: a redrive
/// to that topic needs no `--allow-fanout` when it is the topic's only subscription (a
/// Pub/Sub channel's consumer subscription, a Service Bus topic channel's); `None`
/// elsewhere.
pub fn own_subscription(r: &Resolved) -> Option<&str> {
    match r.backend {
        Backend::AzureServicebus => r.azure.as_ref().and_then(|a| a.subscription.as_deref()),
        Backend::Pubsub => r.pubsub.as_ref().map(|p| p.subscription.as_str()),
        Backend::Sqs | Backend::Rabbitmq | Backend::Kafka => None,
    }
}

/// [`FailedConsumer::BySource`]: the source message `m` goes back to, as the broker recorded
/// it, and that queue's name (SQS: the ARN in `DeadLetterQueueSourceArn`, and the name in
/// it); `None`: it names none the backend can send to, and stays in the dead-letter queue.
pub fn failed_consumer_source(backend: Backend, m: &Message) -> Option<(String, String)> {
    match backend {
        Backend::Sqs => sqs::failed_consumer_source(m),
        Backend::Rabbitmq | Backend::Kafka | Backend::Pubsub | Backend::AzureServicebus => None,
    }
}

/// [`FailedConsumer::PerMessage`]: the queue message `m` (as a status read gives it) would
/// be sent back to, chosen as the mover chooses it (RabbitMQ: from its `x-death`); `None`:
/// it names none, and would stay in the dead-letter queue. Always `None` on the other
/// backends.
pub fn failed_consumer_queue(r: &Resolved, m: &Message) -> Option<String> {
    match r.backend {
        Backend::Rabbitmq => rabbitmq::redrive::failed_queue_of(m, r),
        Backend::Sqs | Backend::Kafka | Backend::Pubsub | Backend::AzureServicebus => None,
    }
}

/// [`FailedConsumer::PerMessage`]: how a run's report names message `m` (as a status read
/// gives it) when it stays (RabbitMQ: its `message_id`, else a digest of its body).
pub fn failed_consumer_id(r: &Resolved, m: &Message) -> String {
    match r.backend {
        Backend::Rabbitmq => rabbitmq::redrive::audit_id_of(m),
        Backend::Sqs | Backend::Kafka | Backend::Pubsub | Backend::AzureServicebus => m.id.clone(),
    }
}

impl Reader {
    /// [`FailedConsumer::PerMessage`]: whether queue `q` may receive the messages of channel
    /// `r` sent back to it, checked as the mover checks it before publishing (ownership
    /// unless `allow_unowned`, existence, the destination guard), nothing published: a dry
    /// run says what the run would leave (issue 52, F1). `Err`: why it would be refused.
    /// Nothing to check on the other backends.
    pub async fn failed_consumer_check(
        &self,
        r: &Resolved,
        q: &str,
        allow_unowned: bool,
    ) -> Result<(), String> {
        match self {
            Reader::Rabbitmq(x) => {
                let vhost = r.rabbitmq.as_ref().map_or("/", |x| x.vhost.as_str());
                rabbitmq::redrive::failed_queue_ok(x, r, allow_unowned, vhost, q)
                    .await
                    .map_err(|e| e.0)
            }
            Reader::Sqs(_) | Reader::Kafka(_) | Reader::Pubsub(_) | Reader::Azure(_) => Ok(()),
        }
    }
}

/// Whether the backend moves a dead-letter queue's messages itself when asked (`redrive
/// --native`: SQS's StartMessageMoveTask); the redrive driver refuses `--native` elsewhere.
pub fn native_move(backend: Backend) -> bool {
    match backend {
        Backend::Sqs => true,
        Backend::Rabbitmq => false,
        Backend::Kafka => false,
        Backend::Pubsub => false,
        Backend::AzureServicebus => false,
    }
}

/// The unit of a changed property that holds a duration, or `None` (pure): plans show such
/// values as people write them (`30d`) beside the number the backend stores.
pub fn duration_unit(change: &Change, key: &str) -> Option<TimeUnit> {
    pure!(change.resource.backend, Plan::duration_unit(change, key))
}

/// Whether a changed property is a queue, topic or subscription's retention (pure): where a
/// plan shows a dead-letter queue's discard decision (see [`Plan::is_retention`]).
pub fn is_retention(change: &Change, key: &str) -> bool {
    pure!(change.resource.backend, Plan::is_retention(key))
}

/// Backend observations for a plan that the diff cannot make, from the desired resources and
/// what was read (pure): e.g. a RabbitMQ policy the broker does not apply.
pub fn notes(desired: &[Desired], live: &BTreeMap<ResourceId, Live>) -> Vec<Note> {
    let mut out = rabbitmq::Rabbitmq::notes(desired, live);
    out.extend(sqs::Sqs::notes(desired, live));
    out.extend(kafka::Kafka::notes(desired, live));
    out.extend(pubsub::Pubsub::notes(desired, live));
    out.extend(azure::Azure::notes(desired, live));
    out
}

/// The changes that must run before everything else of their target (pure): e.g. the
/// RabbitMQ policies of queues this plan creates (see [`crate::plan::sort_for_apply`]).
pub fn goes_first(changes: &[Change]) -> HashSet<ResourceId> {
    let mut out = rabbitmq::Rabbitmq::goes_first(changes);
    out.extend(sqs::Sqs::goes_first(changes));
    out.extend(kafka::Kafka::goes_first(changes));
    out.extend(pubsub::Pubsub::goes_first(changes));
    out.extend(azure::Azure::goes_first(changes));
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
    Azure(azure::read::Reader),
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
    Azure(azure::apply::Writer),
}

/// Calls the same door on whichever backend `$reader` is, and names the target in its error.
macro_rules! each {
    ($enum:ident, $value:expr, $b:ident => $call:expr) => {
        match $value {
            $enum::Rabbitmq($b) => $call.map_err(|e| e.at(Connected::target($b))),
            $enum::Sqs($b) => $call.map_err(|e| e.at(Connected::target($b))),
            $enum::Kafka($b) => $call.map_err(|e| e.at(Connected::target($b))),
            $enum::Pubsub($b) => $call.map_err(|e| e.at(Connected::target($b))),
            $enum::Azure($b) => $call.map_err(|e| e.at(Connected::target($b))),
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
            Backend::AzureServicebus => {
                Reader::Azure(azure::read::Reader::connect(name, target, opts, stats)?)
            }
        })
    }

    pub fn target(&self) -> &str {
        match self {
            Reader::Rabbitmq(r) => Connected::target(r),
            Reader::Sqs(r) => Connected::target(r),
            Reader::Kafka(r) => Connected::target(r),
            Reader::Pubsub(r) => Connected::target(r),
            Reader::Azure(r) => Connected::target(r),
        }
    }

    /// Starts a new reading of this target: its budget for reads that get no answer is whole
    /// again (`--read-timeout` is per reading; the exporter reads every interval with the same
    /// reader). Kafka has no such budget: each of its calls has its own timeout.
    pub fn renew_read_budget(&self) {
        match self {
            Reader::Rabbitmq(r) => Read::renew_read_budget(r),
            Reader::Sqs(r) => Read::renew_read_budget(r),
            Reader::Pubsub(r) => Read::renew_read_budget(r),
            Reader::Kafka(r) => Read::renew_read_budget(r),
            Reader::Azure(r) => Read::renew_read_budget(r),
        }
    }

    /// Reads the live state of everything `ids` could name (and more of the same scope).
    pub async fn read(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, BackendError> {
        each!(Reader, self, r => Read::read(r, ids).await)
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
        each!(Reader, self, r => Review::review(r, desired, live, changes, notes, adopt).await)
    }

    /// Every owned live object on this target that `skip` does not name (`plan --prune`),
    /// labelled with the channel and role it would have if it were imported.
    pub async fn prunable(
        &self,
        skip: &BTreeSet<ResourceId>,
        target: &Target,
    ) -> Result<Vec<Prunable>, BackendError> {
        each!(Reader, self, r => Read::prunable(r, skip, target).await)
    }

    /// Apply's re-check of a group of objects before it writes them: those of `ids` that exist,
    /// as [`read`](Self::read) returns them, in one listing or multi-name read per kind (see
    /// [`Read::recheck`]).
    pub async fn recheck(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, BackendError> {
        each!(Reader, self, r => Read::recheck(r, ids).await)
    }

    /// Messages held by a queue or topic, where the backend can tell.
    pub async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, BackendError> {
        each!(Reader, self, r => Read::message_count(r, id).await)
    }

    /// Which server this target is (RabbitMQ cluster name, Kafka cluster id, AWS endpoint and
    /// region): what a saved plan is bound to.
    pub async fn identity(&self) -> Result<String, BackendError> {
        each!(Reader, self, r => Read::identity(r).await)
    }

    /// Pub/Sub and Service Bus: the subscriptions of `topic` (all of them receive what is
    /// sent to it), for the fan-out check of a redrive; empty on every other backend.
    pub async fn subscriptions_of(&self, topic: &str) -> Result<Vec<String>, BackendError> {
        match self {
            Reader::Pubsub(r) => r
                .subscriptions_of(topic)
                .await
                .map_err(|e| AtTarget::at(e, Connected::target(r))),
            Reader::Azure(r) => r.subscriptions_of(topic).await,
            _ => Ok(Vec::new()),
        }
    }

    /// Why a copy sent to `topic` might not come back to its subscription `sub`, for a
    /// redrive through a topic: Service Bus, where a subscription's rules filter what it
    /// takes (see `azure::redrive::subscription_refuses`); `None` when they take every
    /// message, and on every other backend (a Pub/Sub subscription's filter is not checked:
    /// it matched the message once, and the copy keeps its attributes but for those
    /// `--transform` changes and `deadLetter.redrive` sheds; docs/pubsub.md says so).
    pub async fn subscription_refuses(
        &self,
        topic: &str,
        sub: &str,
    ) -> Result<Option<String>, BackendError> {
        match self {
            Reader::Azure(r) => azure::redrive::subscription_refuses(r, topic, sub).await,
            _ => Ok(None),
        }
    }

    /// Who this target's credentials are, as the backend names them (see [`Operator`]): the
    /// identity of redrive's audit record and of `operations.allowedOperators`.
    pub async fn operator(&self) -> Result<String, BackendError> {
        each!(Reader, self, r => Operator::operator(r).await)
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
            Reader::Rabbitmq(r) => per_channel(
                Connected::target(r),
                Status::status(r, channels, read).await,
            ),
            Reader::Sqs(r) => per_channel(
                Connected::target(r),
                Status::status(r, channels, read).await,
            ),
            Reader::Kafka(r) => per_channel(
                Connected::target(r),
                Status::status(r, channels, read).await,
            ),
            Reader::Pubsub(r) => per_channel(
                Connected::target(r),
                Status::status(r, channels, read).await,
            ),
            Reader::Azure(r) => per_channel(
                Connected::target(r),
                Status::status(r, channels, read).await,
            ),
        }
    }

    /// Groups what the target holds into channel candidates (`dlqctl import`).
    pub async fn import(
        &self,
        target: &Target,
        prefix: Option<&str>,
    ) -> Result<Found, BackendError> {
        each!(Reader, self, r => Import::import(r, target, prefix).await)
    }

    pub fn into_writer(self) -> Writer {
        match self {
            Reader::Rabbitmq(r) => Writer::Rabbitmq(r.into_writer()),
            Reader::Sqs(r) => Writer::Sqs(r.into_writer()),
            Reader::Kafka(r) => Writer::Kafka(r.into_writer()),
            Reader::Pubsub(r) => Writer::Pubsub(r.into_writer()),
            Reader::Azure(r) => Writer::Azure(r.into_writer()),
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
    Azure(azure::redrive::Mover),
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
            Reader::Azure(r) => Mover::Azure(azure::redrive::Mover::new(r)),
        })
    }

    /// Moves what `run` selects from the channel's dead-letter queue; `run.tally` counts what
    /// happened, also when this fails part-way.
    pub async fn redrive(
        &self,
        r: &Resolved,
        run: &crate::redrive::Run,
    ) -> Result<(), BackendError> {
        each!(Mover, self, m => Redrive::redrive(m, r, run).await)
    }

    /// Holds the DLQ's redrive lock between two batches of one run ([`Redrive::hold`]).
    pub async fn hold(
        &self,
        r: &Resolved,
        run: &crate::redrive::Run,
    ) -> Result<kit::doors::Lease, BackendError> {
        each!(Mover, self, m => Redrive::hold(m, r, run).await)
    }

    /// Releases what a run that kept its lock between batches held ([`Redrive::release`]).
    pub async fn release(
        &self,
        r: &Resolved,
        run: &crate::redrive::Run,
    ) -> Result<(), BackendError> {
        each!(Mover, self, m => Redrive::release(m, r, run).await)
    }
}

/// The capability to publish archived messages back (`redrive --from-archive`), one per
/// backend (`*/replay.rs`). Made from a reader only by the replay driver.
#[derive(Debug, Clone)]
pub enum Replayer {
    Rabbitmq(rabbitmq::replay::Replayer),
    Sqs(sqs::replay::Replayer),
    Kafka(kafka::replay::Replayer),
    Pubsub(pubsub::replay::Replayer),
    Azure(azure::redrive::Replayer),
}

impl Replayer {
    pub fn connect(reader: Reader, target: &Target) -> Result<Self, BackendError> {
        Ok(match reader {
            Reader::Rabbitmq(r) => {
                Replayer::Rabbitmq(rabbitmq::replay::Replayer::connect(r, target)?)
            }
            Reader::Sqs(r) => Replayer::Sqs(sqs::replay::Replayer::new(r)),
            Reader::Kafka(r) => Replayer::Kafka(kafka::replay::Replayer::new(r)),
            Reader::Pubsub(r) => Replayer::Pubsub(pubsub::replay::Replayer::new(r)),
            Reader::Azure(r) => Replayer::Azure(azure::redrive::Replayer::new(r)),
        })
    }

    /// Publishes `job.messages` to `job.to`, confirmed (see [`Replay`]); `job.tally` counts
    /// what happened, also when this fails part-way.
    pub async fn replay(
        &self,
        r: &Resolved,
        job: &crate::redrive::replay::Job,
    ) -> Result<(), BackendError> {
        each!(Replayer, self, p => Replay::replay(p, r, job).await)
    }
}

impl Writer {
    pub async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), BackendError> {
        each!(Writer, self, w => Apply::apply(w, change, allow_loss).await)
    }

    /// How many changes [`apply_many`](Self::apply_many) takes in one call: more than one
    /// where the protocol writes many objects in one request (Kafka's CreateTopics,
    /// IncrementalAlterConfigs, CreatePartitions).
    pub fn batch_limit(&self) -> usize {
        match self {
            Writer::Rabbitmq(w) => Apply::batch_limit(w),
            Writer::Sqs(w) => Apply::batch_limit(w),
            Writer::Kafka(w) => Apply::batch_limit(w),
            Writer::Pubsub(w) => Apply::batch_limit(w),
            Writer::Azure(w) => Apply::batch_limit(w),
        }
    }

    /// Applies several independent changes (at most [`batch_limit`](Self::batch_limit)), as
    /// few requests as the backend allows; one result per change, in order.
    pub async fn apply_many(
        &self,
        changes: &[&Change],
        allow_loss: bool,
    ) -> Vec<Result<(), BackendError>> {
        fn at<E: AtTarget>(target: &str, v: Vec<Result<(), E>>) -> Vec<Result<(), BackendError>> {
            v.into_iter().map(|r| r.map_err(|e| e.at(target))).collect()
        }
        match self {
            Writer::Rabbitmq(w) => at(
                Connected::target(w),
                Apply::apply_many(w, changes, allow_loss).await,
            ),
            Writer::Sqs(w) => at(
                Connected::target(w),
                Apply::apply_many(w, changes, allow_loss).await,
            ),
            Writer::Kafka(w) => at(
                Connected::target(w),
                Apply::apply_many(w, changes, allow_loss).await,
            ),
            Writer::Pubsub(w) => at(
                Connected::target(w),
                Apply::apply_many(w, changes, allow_loss).await,
            ),
            Writer::Azure(w) => at(
                Connected::target(w),
                Apply::apply_many(w, changes, allow_loss).await,
            ),
        }
    }

    /// Waits for the backend to show what was written; returns what did not settle in time.
    pub async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, BackendError> {
        each!(Writer, self, w => Apply::settle(w, applied).await)
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
