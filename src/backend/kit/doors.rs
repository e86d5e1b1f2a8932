//! The doors every backend has, one trait per capability, each method's contract on it.
//!
//! Every backend implements every trait (SQS, RabbitMQ, Kafka, Pub/Sub), and the dispatcher
//! in `backend/mod.rs` reaches a backend only through them: a backend missing a door, or a
//! door with the wrong shape, does not compile. What a door may do is part of its contract:
//! [`Plan`] is pure, [`Read`], [`Review`], [`Import`] and [`Status`] only read, [`Apply`] is
//! the only door that writes objects, and [`Redrive`] the only one that moves messages.
//!
//! The reading and writing doors fail with the backend's own error ([`Connected::Error`]);
//! the dispatcher turns it into a [`BackendError`](super::errors::BackendError) naming the
//! target, through [`AtTarget`]. Their futures are `impl Future` without a `Send` bound: the
//! dispatcher calls each on its concrete type, so a future is `Send` exactly when the
//! backend's is (a `+ Send` here trips rustc's higher-ranked closure checks on the stream
//! combinators several backends use).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::future::Future;

use super::errors::AtTarget;
use super::import::{Found, Prunable};
use crate::plan::{Change, Note};
use crate::redrive::Run;
use crate::resource::{Desired, Live, ResourceId, TimeUnit};
use crate::spec::model::Target;
use crate::spec::resolve::Resolved;
use crate::status::{Observed, ReadOptions};

/// The backend rules of a plan. Pure: no I/O, no clock; called on every channel and change.
pub trait Plan {
    /// Every resource a channel needs on this backend.
    fn desired(r: &Resolved) -> Vec<Desired>;

    /// Backend rules the generic diff cannot know: a change that is impossible in place
    /// (fewer Kafka partitions), or one that destroys messages by itself (lower SQS
    /// retention). Called on each change of this backend.
    fn refine(change: &mut Change);

    /// The unit of a changed property that holds a duration, or `None`: plans show such
    /// values as people write them (`30d`) beside the number the backend stores.
    fn duration_unit(change: &Change, key: &str) -> Option<TimeUnit>;

    /// Whether a changed property of this backend is a queue, topic or subscription's
    /// retention: where a plan shows a dead-letter queue's discard decision.
    fn is_retention(key: &str) -> bool;

    /// Observations for a plan that the diff cannot make, from the desired resources and
    /// what was read (e.g. a RabbitMQ policy the broker does not apply). Sees every
    /// backend's resources: keeps to its own.
    fn notes(desired: &[Desired], live: &BTreeMap<ResourceId, Live>) -> Vec<Note>;

    /// The changes that must run before everything else of their target (e.g. the RabbitMQ
    /// policies of queues this plan creates). Sees every backend's changes: keeps to its own.
    fn goes_first(changes: &[Change]) -> HashSet<ResourceId>;
}

/// A connection to one target: its name (what every error names) and the backend's error.
pub trait Connected {
    /// The backend's own error, turned into the target-level error in one place.
    type Error: AtTarget;

    /// The target's name in the targets file.
    fn target(&self) -> &str;
}

/// The read-only doors of a target. Nothing here changes an object or a message.
pub trait Read: Connected {
    /// Starts a new reading of this target: its budget for reads that get no answer is whole
    /// again (`--read-timeout` is per reading). A backend without such a budget does nothing.
    fn renew_read_budget(&self);

    /// The live state of everything `ids` could name (and more of the same scope).
    fn read(
        &self,
        ids: &[&ResourceId],
    ) -> impl Future<Output = Result<BTreeMap<ResourceId, Live>, Self::Error>>;

    /// Every owned live object on this target that `skip` does not name (`plan --prune`),
    /// labelled with the channel and role it would have if it were imported.
    fn prunable(
        &self,
        skip: &BTreeSet<ResourceId>,
        target: &Target,
    ) -> impl Future<Output = Result<Vec<Prunable>, Self::Error>>;

    /// Apply's re-check of a group of objects it is about to write: each of `ids` that exists
    /// now, as [`read`](Self::read) would return it (keys starting with `@`, derived from other
    /// objects, may be missing: nothing compares them), in as few calls as the backend allows
    /// — one listing or one multi-name read per kind and scope, not a read per object. An
    /// absent object is left out; an object not in `ids` may be in the answer.
    fn recheck(
        &self,
        ids: &[&ResourceId],
    ) -> impl Future<Output = Result<BTreeMap<ResourceId, Live>, Self::Error>>;

    /// Messages held by a queue or topic, where the backend can tell (`None`: it cannot).
    fn message_count(
        &self,
        id: &ResourceId,
    ) -> impl Future<Output = Result<Option<u64>, Self::Error>>;

    /// Which server this target is (RabbitMQ cluster name, Kafka cluster id, AWS endpoint and
    /// region): what a saved plan is bound to.
    fn identity(&self) -> impl Future<Output = Result<String, Self::Error>>;
}

/// Who this target's credentials are, as the backend itself names them: the identity an
/// audit record gives for a redrive, and what `operations.allowedOperators` is matched
/// against. Reads only (one call at most); says `unknown`-like words rather than guess where
/// the backend cannot name anyone (Kafka without SASL, the Pub/Sub emulator).
pub trait Operator: Connected {
    /// SQS: the ARN `sts:GetCallerIdentity` answers; RabbitMQ: the user `GET /api/whoami`
    /// names; Kafka: `User:<sasl.username>` (the broker's default principal), `User:ANONYMOUS`
    /// without SASL; Pub/Sub: `emulator` or what the credentials say.
    fn operator(&self) -> impl Future<Output = Result<String, Self::Error>>;
}

/// The review of a plan's changes on this target against what the generic diff cannot see
/// and only further reads can tell (SQS: ownership tags, read only where the plan would
/// write). It may read; it never writes. It may turn changes impossible, add changes (an
/// adoption), and add notes.
pub trait Review: Connected {
    fn review(
        &self,
        desired: &[Desired],
        live: &BTreeMap<ResourceId, Live>,
        changes: &mut Vec<Change>,
        notes: &mut Vec<Note>,
        adopt: bool,
    ) -> impl Future<Output = Result<(), Self::Error>>;
}

/// `dlqctl import`: what the target holds, grouped into channel candidates. Reads; the
/// grouping itself is pure (each backend's `import.rs`).
pub trait Import: Connected {
    fn import(
        &self,
        target: &Target,
        prefix: Option<&str>,
    ) -> impl Future<Output = Result<Found, Self::Error>>;
}

/// `dlqctl status`: depth, messages read from the head of each channel's dead-letter queue,
/// and the depth of its other queues. Each backend's `status.rs` says what a read does to a
/// message. The outer error: the target could not be read at all; otherwise each channel
/// succeeds or fails on its own.
pub trait Status: Connected {
    #[allow(clippy::type_complexity)]
    fn status(
        &self,
        channels: &[&Resolved],
        read: ReadOptions,
    ) -> impl Future<Output = Result<Vec<Result<Observed, Self::Error>>, Self::Error>>;
}

/// The only door that writes objects (queues, topics, policies, bindings, alarms).
pub trait Apply: Connected {
    /// Applies one change; a change that loses messages needs `allow_loss`.
    fn apply(
        &self,
        change: &Change,
        allow_loss: bool,
    ) -> impl Future<Output = Result<(), Self::Error>>;

    /// How many changes [`apply_many`](Self::apply_many) takes in one call: more than one
    /// where the protocol writes many objects in one request (Kafka's CreateTopics,
    /// IncrementalAlterConfigs, CreatePartitions).
    fn batch_limit(&self) -> usize {
        1
    }

    /// Applies several independent changes (at most [`batch_limit`](Self::batch_limit)), in
    /// as few requests as the backend allows; one result per change, in order. By default,
    /// one after the other.
    fn apply_many(
        &self,
        changes: &[&Change],
        allow_loss: bool,
    ) -> impl Future<Output = Vec<Result<(), Self::Error>>> {
        async move {
            let mut out = Vec::with_capacity(changes.len());
            for c in changes {
                out.push(self.apply(c, allow_loss).await);
            }
            out
        }
    }

    /// Waits for the backend to show what was written; returns what did not settle in time.
    fn settle(&self, applied: &[&Change])
    -> impl Future<Output = Result<Vec<String>, Self::Error>>;
}

/// The capability to move messages out of a dead-letter queue (`dlqctl redrive`), one per
/// backend (`*/redrive.rs`, whose `//!` states its guarantee). Made from a reader only by
/// the redrive driver: plan, status and apply never hold one.
pub trait Redrive: Connected {
    /// Moves what `run` selects from the channel's dead-letter queue; `run.tally` counts what
    /// happened, also when this fails part-way.
    fn redrive(&self, r: &Resolved, run: &Run) -> impl Future<Output = Result<(), Self::Error>>;

    /// Between two batches of one run (`run.keep_lock`): holds the DLQ's redrive lock until
    /// the returned [`Lease`] is released, so that no other redrive or archive of the DLQ
    /// starts during the pause, the health checks or `--verify-for`. A backend whose lock
    /// `redrive` leaves held when `run.keep_lock` (SQS's tag) has nothing more to hold.
    fn hold(&self, r: &Resolved, run: &Run) -> impl Future<Output = Result<Lease, Self::Error>> {
        let _ = (r, run);
        async { Ok(Lease::default()) }
    }

    /// The run is over: releases what `redrive` left held because of `run.keep_lock`.
    fn release(&self, r: &Resolved, run: &Run) -> impl Future<Output = Result<(), Self::Error>> {
        let _ = (r, run);
        async { Ok(()) }
    }
}

/// What holds a DLQ's redrive lock between two batches ([`Redrive::hold`]): released by
/// [`Lease::release`] (dropped, the backend's connection closes when the process ends).
#[derive(Default)]
pub struct Lease {
    close: Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Lease {
    /// A lease released by running `close`.
    pub fn closing(close: impl Future<Output = ()> + Send + 'static) -> Self {
        Lease {
            close: Some(Box::pin(close)),
        }
    }

    /// Lets the lock go (the next batch takes it at once).
    pub async fn release(self) {
        if let Some(c) = self.close {
            c.await;
        }
    }
}

/// `redrive --from-archive`: publishes archived messages to the channel's main queue or topic
/// (or `--to`), each confirmed by the broker before it counts (RabbitMQ publisher confirms,
/// SQS SendMessageBatch's answer, Kafka's idempotent producer with `acks=all`, Pub/Sub's
/// message ids), one per backend (`*/replay.rs`, whose `//!` says what of a message goes
/// back). It takes nothing out of any queue. Made from a reader only by the replay driver.
pub trait Replay: Connected {
    /// Publishes `job.messages` in order, under `job.rate`, until done or `job.stop`;
    /// `job.tally` counts what was confirmed (`moved`, `moved_ids`) and what was published
    /// without an answer (`duplicated`), also when this fails part-way.
    fn replay(
        &self,
        r: &Resolved,
        job: &crate::redrive::replay::Job,
    ) -> impl Future<Output = Result<(), Self::Error>>;
}
