//! RabbitMQ's mover: brings dead letters back over AMQP, at least once, never lost.
//!
//! The contract (docs/rabbitmq.md, "redrive"):
//! - the DLQ is consumed by one exclusive consumer (tag `dlqctl-redrive <holder>`) with manual
//!   acknowledgements: a second redrive of the same DLQ is refused by the broker, and told who
//!   holds it;
//! - a chosen message is published to the destination with the `mandatory` flag and publisher
//!   confirms, and acknowledged in the DLQ only after the broker confirmed it. An unroutable
//!   message (returned) or a refused one (nacked: a full queue with `reject-publish`) stops the
//!   run; that message and every one not yet acknowledged stay in the DLQ, and the copies
//!   confirmed after it (published meanwhile) count as possibly duplicated;
//! - copies go in batches, and a batch settles (its confirms awaited in order, the destination
//!   read again, its messages acknowledged: one `multiple` ack when nothing kept
//!   unacknowledged lies below it) while the next batch is taken and published, as the
//!   shovel keeps publishing while confirms come back: at most two batches in flight;
//! - a message not chosen (`--class`, `--older-than`, at `maxRedrives`) is held unacknowledged
//!   until the run ends, then handed back by closing the channel, at its place;
//! - the copy loses the attempt history (the broker's `x-death`, `x-first-death-*`,
//!   `x-last-death-*`, and the consumer's own `dlq-attempts`, which the consumer contract
//!   counts with first), so the consumer's attempts start again, and gains
//!   `dlq-redrive-count` + 1. Everything else (body, properties, other headers) is kept, but
//!   the headers `deadLetter.redrive` and the default list shed.
//!
//! A crash after the broker's confirm and before the DLQ's ack leaves the message in both
//! places: duplicated, never lost. The consumer must be idempotent.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Confirmation, PublisherConfirm};
use serde_json::Value;

use super::desired::main_dead_letters;
use super::read::Reader;
use crate::backend::kit::connect::env_value;
use crate::backend::kit::errors::{BackendError, MoveError};
use crate::backend::wire::http::seg;
use crate::redrive::transform::Edit;
use crate::redrive::{self, Decision, Run};
use crate::spec::model::Target;
use crate::spec::resolve::Resolved;
use crate::spec::resolve::headers::HeaderRules;
use crate::status::{Message, now_ms};

/// Chosen messages settled together (confirmed, the destination read again, acknowledged):
/// one batch settles while the next is taken and published.
const BATCH: usize = 200;
/// Deliveries one consumer may hold unacknowledged. Messages not chosen stay unacknowledged
/// until the run ends; when they fill this, the consumer is replaced (`Consuming::renew`).
const PREFETCH: u16 = 2_000;
/// How long a consumer waits for the next delivery before the DLQ is counted again.
/// How many times a run counts again what became ready while it went, and takes it, before
/// it stops and says what is left unexamined: a DLQ fed faster than the run moves is not
/// followed for ever.
const RECOUNTS: u32 = 3;
const IDLE: std::time::Duration = std::time::Duration::from_secs(2);
/// How long after the first count the last one is taken at the earliest: messages a reader
/// that just let go of them (a status read, a dry run) hands back are ready again by then.
const SETTLING: std::time::Duration = std::time::Duration::from_millis(250);
/// A batch is confirmed and acknowledged at least this often, whatever `--rate` is.
const ACK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// How long the broker may take to answer the call that proves it handled a batch's acks.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(15);
/// AMQP heartbeat asked for, in seconds (unless the URL sets one): a stalled broker is
/// noticed in about twice this.
const HEARTBEAT: u16 = 10;
/// How long a run that found messages held by another consumer at its start waits, after
/// it closed its own channel, for the management API's statistics to say whether they still
/// are (they refresh every 5 s by default).
const HELD_WAIT: std::time::Duration = std::time::Duration::from_secs(7);
/// Headers the copy does not carry: the attempt history, the broker's and the consumer's
/// (docs/rabbitmq.md, consumer contract: `dlq-attempts` first, else `x-death`), and what the
/// broker stamps on a delivery: a quorum queue's `x-delivery-count` (kept, a consumer
/// counting `x-delivery-count + 1` would dead-letter the copy at once) and the shovel's and
/// federation's `x-received-from`.
pub(super) const ATTEMPT_HISTORY: [&str; 6] = [
    "x-death",
    "x-first-death-*",
    "x-last-death-*",
    "x-delivery-count",
    "x-received-from",
    crate::status::envelope::ATTEMPTS,
];
/// The consumer tag's prefix: how a second run recognises the first.
pub const TAG: &str = "dlqctl-redrive";

/// The writing capability for messages (not for topology): made only by `dlqctl redrive`.
#[derive(Debug, Clone)]
pub struct Mover {
    reader: Reader,
    /// AMQP URI with credentials, without a vhost (added per channel). Never printed.
    pub(super) amqp: String,
    /// The same, without credentials, for messages.
    pub(super) shown: String,
    /// The user the connection logs in as (`guest` without one): a message's `user_id` is
    /// kept on its copy only when it is this user, which the broker checks on publish.
    pub(super) user: String,
}

impl Mover {
    pub fn connect(reader: Reader, name: &str, target: &Target) -> Result<Self, BackendError> {
        let (base, shown) = amqp_base(target).map_err(|message| BackendError::Config {
            target: name.to_owned(),
            message,
        })?;
        let user = env_value(name, "usernameEnv", target.username_env.as_ref())?;
        let password = env_value(name, "passwordEnv", target.password_env.as_ref())?;
        let login = user.clone().unwrap_or_else(|| "guest".into());
        let auth = match (user, password) {
            (Some(u), Some(p)) => {
                // As it appears in the AMQP URI, too (the raw value is registered already).
                crate::secrets::never_show(&seg(&p));
                format!("{}:{}@", seg(&u), seg(&p))
            }
            (Some(u), None) => format!("{}@", seg(&u)),
            _ => String::new(),
        };
        let (scheme, rest) = base.split_once("://").unwrap_or(("amqp", base.as_str()));
        Ok(Mover {
            reader,
            amqp: format!("{scheme}://{auth}{rest}"),
            shown,
            user: login,
        })
    }

    pub fn target(&self) -> &str {
        self.reader.target()
    }

    /// Moves what `run` selects from the channel's DLQ to the destination. The tally says
    /// what happened, also when this returns an error part-way.
    pub async fn redrive(&self, r: &Resolved, run: &Run) -> Result<(), MoveError> {
        let vhost = r.rabbitmq.as_ref().map_or("/", |x| x.vhost.as_str());
        let dlq = &r.dead_letter;
        let q = self.queue(vhost, dlq).await?;
        // A message handed back (not selected, beyond the limit, in flight at Ctrl-C) counts a
        // delivery on a quorum queue: where the broker drops at the limit, refuse.
        if let Some(why) = self
            .reader
            .refuse(&q, &mut None)
            .await
            .map_err(|e| MoveError(e.to_string()))?
        {
            let why = why.replace("samples not read: ", "");
            return Err(MoveError(format!(
                "not redriving `{dlq}`: {why}. A redrive hands back what it does not move, which counts as a delivery too"
            )));
        }
        // Held unacknowledged by another consumer as the run starts (the management API's
        // statistics): this run cannot examine those, and its count of what is left, made on
        // its own channel, cannot see them.
        let held_elsewhere = q
            .get("messages_unacknowledged")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if let Some(holder) = holder(&q).filter(|h| *h != run.holder) {
            return Err(MoveError(format!(
                "queue `{dlq}` is being redriven already, by {holder}; wait for it to finish"
            )));
        }
        let (exchange, route, into) = self.destination(r, run, vhost).await?;
        let uri = with_heartbeat(&format!("{}/{}", self.amqp, seg(vhost)));
        let fail = |what: &str, e: lapin::Error| {
            MoveError(format!(
                "{what} ({} vhost {vhost}): {}",
                self.shown,
                lost(&e)
            ))
        };
        // `shown` is the AMQP address without credentials; `uri` has them.
        tracing::info!(
            "AMQP connect to {} vhost {vhost}",
            crate::backend::wire::http::redact_userinfo(&self.shown)
        );
        let started = std::time::Instant::now();
        let conn = lapin::Connection::connect(&uri, lapin::ConnectionProperties::default())
            .await
            .map_err(|e| fail("AMQP connect", e))?;
        tracing::info!("AMQP connected in {} ms", started.elapsed().as_millis());
        // The DLQ's channel (consume, ack, count) and the destination's (publish, confirm):
        // the broker runs each channel as a process of its own, so the copies' publishes and
        // confirms are handled beside the DLQ's deliveries and acks, not queued behind them
        // (the shovel, too, has a source and a destination).
        let ch = conn
            .create_channel()
            .await
            .map_err(|e| fail("AMQP channel", e))?;
        let to_ch = conn
            .create_channel()
            .await
            .map_err(|e| fail("AMQP channel", e))?;
        to_ch
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| fail("confirm.select", e))?;
        // Per consumer, for the consumers made after it (RabbitMQ applies a raised
        // prefetch to new consumers only): see `Consuming::renew`. No more than the run may
        // move: a delivery it does not move goes back at close, and on a quorum queue that
        // counts one delivery of the message: a batched run of 5 with a prefetch of 2,000
        // handed every message of the DLQ back once a batch, and a delivery limit set meanwhile
        // dropped them (issue 52, hx3 F1).
        let prefetch = prefetch_for(run.select.limit);
        ch.basic_qos(prefetch, BasicQosOptions::default())
            .await
            .map_err(|e| fail("basic.qos", e))?;
        let tag = format!("{TAG} {}", run.holder);
        // The exact count now (the management API's lags by seconds): this run examines
        // these, then what became ready while it went ([`Consuming::recount`]), the last
        // count SETTLING after this one at the earliest.
        let counted = std::time::Instant::now();
        let mut ready = match ready_count(&ch, dlq).await {
            Ok(n) => n,
            Err(e) => return Err(fail(&format!("count `{dlq}`"), e)),
        };
        let mut consuming = match Consuming::start(&ch, dlq, &tag, prefetch).await {
            Ok(c) => c,
            Err(e) => {
                let _ = conn.close(200, "redrive refused".into()).await;
                return Err(self.refused(vhost, dlq, e, &fail).await);
            }
        };
        let mut pace = redrive::Pace::new(run.rate);
        let ordering = std::sync::atomic::Ordering::Relaxed;
        // Deliveries taken from the DLQ and not acknowledged by a confirmed ack: they go back
        // to the DLQ when the channel closes.
        let mut unacked: u64 = 0;
        // The lowest delivery tag this run keeps unacknowledged until it ends (not chosen,
        // held back, beyond the limit, in flight at Ctrl-C): a `multiple` ack covers every
        // unacknowledged tag up to its own, so it is sent only for tags below this one.
        let mut kept_from: Option<u64> = None;
        let mut result = Ok(());
        // `--to failed-consumer`: the queues published to so far, each checked once.
        let mut used: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        // ... and those refused (not the target's, gone, unsafe: `Mover::failed_queue_ok`),
        // each with why and the ids of the messages that stay for it (issue 52, L5: one such
        // message stopped every run, and those behind it never moved).
        let mut refused: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
        // Deliveries taken so far: each examined, or held as a copy of this run's come back.
        let mut taken: u64 = 0;
        let mut recounts = 0;
        let mut examined_then = 0;
        let stage = Stage {
            mover: self,
            r,
            run,
            ch: &ch,
            dlq,
            exchange: &exchange,
            route: route.as_deref(),
            into: &into,
            vhost,
            fail: &fail,
            halt: std::sync::atomic::AtomicBool::new(false),
        };
        // The batch published and not settled yet: its confirms, the destination's guard and
        // its acks run while the next batch is taken and published (at most two batches of
        // copies unconfirmed or unacknowledged at a time).
        let mut outstanding: Option<Batch> = None;
        // Whether the batch still outstanding when the run stops on an error is settled
        // (acknowledged as far as confirmed) or abandoned (left in the DLQ, its confirmed
        // copies counted as duplicated): abandoned after a failed settle or a lost delivery.
        let mut settle_last = true;
        'run: loop {
            let in_flight = outstanding.as_ref().map_or(0, Batch::len) as u64;
            if run.stop.load(std::sync::atomic::Ordering::SeqCst)
                || result.is_err()
                || run
                    .select
                    .limit
                    .is_some_and(|l| run.tally.moved() + in_flight >= l)
            {
                break 'run;
            }
            if taken >= ready {
                // What this run published is settled before it counts again: its own copies
                // coming back are then known.
                if let Some(b) = outstanding.take() {
                    let multiple = b.multiple(kept_from);
                    let s = stage.settle(b, multiple).await;
                    if let Err(e) = s.apply(&mut unacked, &mut kept_from, &mut consuming) {
                        result = Err(e);
                    }
                    continue 'run;
                }
                // Messages another reader held at the start come back when its channel
                // closes, perhaps only now; a run that stopped at the first count would say
                // "complete" with them unexamined (CI, 2026-12-03: 17 of 3,000 after a dry
                // run). Examine what became ready while the run went, a few rounds at most.
                let more = match consuming.recount(&ch, dlq, &tag).await {
                    Ok(n) => n,
                    Err(e) => {
                        result = Err(fail(&format!("count `{dlq}` again"), e));
                        break 'run;
                    }
                };
                if more == 0 {
                    // The last count is taken at least SETTLING after the first: what a
                    // reader that just let go hands back is ready by then (the broker returns
                    // a closed channel's deliveries asynchronously), and a short run does
                    // not finish before it (what the first count's 250 ms of waiting did).
                    let since = counted.elapsed();
                    if since < SETTLING {
                        tokio::time::sleep(SETTLING - since).await;
                        continue 'run;
                    }
                    break 'run;
                }
                // A round that brought only this run's own copies back is not counted: each
                // comes back once at most (it is held then), so those rounds end by themselves.
                let examined = run.tally.examined.load(ordering);
                if recounts == 0 || examined > examined_then {
                    if recounts == RECOUNTS {
                        run.tally.incomplete(format!(
                            "{more} more message{s} became ready in `{dlq}` while the run went (handed back by another reader, dead-lettered since it started, or copies of this run's back again) and {were} not examined; run it again",
                            s = if more == 1 { "" } else { "s" },
                            were = if more == 1 { "was" } else { "were" },
                        ));
                        break 'run;
                    }
                    recounts += 1;
                }
                examined_then = examined;
                ready = taken + more;
            }
            // The selected this batch may take: the limit, less what is moved and in flight
            // (a batch in flight is either moved whole or stops the run).
            let budget = run
                .select
                .limit
                .map(|l| l.saturating_sub(run.tally.moved() + in_flight));
            let want = budget.map_or(BATCH as u64, |b| b.min(BATCH as u64));
            if consuming.full(in_flight, want)
                && let Err(e) = consuming.renew(&ch, dlq, &tag).await
            {
                result = Err(fail(&format!("consume from `{dlq}` again"), e));
                break 'run;
            }
            // The batch before settles while this one is taken: its `multiple` is decided now,
            // from what was kept before this batch's first delivery (every tag kept later is
            // higher).
            let before = outstanding.take().map(|b| {
                let multiple = b.multiple(kept_from);
                (b, multiple)
            });
            let collect = async {
                let mut batch = Batch {
                    used: Vec::new(),
                    published: Vec::new(),
                    archived: Vec::new(),
                };
                let mut stop = None;
                let mut opened = tokio::time::Instant::now();
                while batch.len() < BATCH
                    && !run.stop.load(std::sync::atomic::Ordering::SeqCst)
                    && !stage.halted()
                    && !consuming.full(in_flight, want)
                    && budget.is_none_or(|b| (batch.len() as u64) < b)
                {
                    if taken >= ready {
                        break;
                    }
                    // Acknowledge by time too: at a low `--rate` a batch would span minutes,
                    // all of it to be sent again after a crash.
                    if !batch.is_empty()
                        && (opened.elapsed() >= ACK_EVERY || pace.next_after(opened + ACK_EVERY))
                    {
                        break;
                    }
                    let wait = if batch.is_empty() {
                        IDLE
                    } else {
                        std::time::Duration::from_millis(20)
                    };
                    let next = match consuming.next(wait).await {
                        Next::Idle if batch.is_empty() => {
                            // Nothing within IDLE: drained (what was ready has expired or
                            // gone), or the broker holds back the rest; the exact count says
                            // which.
                            stop = Some(match ready_count(&ch, dlq).await {
                                Ok(0) => Stop::Drained,
                                Ok(n) => {
                                    run.tally.incomplete(format!(
                                        "stopped after examining {} of the {ready} messages that were ready: no delivery for {} s while {n} more are ready in `{dlq}`; run it again",
                                        run.tally.examined.load(ordering),
                                        IDLE.as_secs()
                                    ));
                                    Stop::Drained
                                }
                                Err(e) => Stop::Failed(fail(&format!("count `{dlq}`"), e), false),
                            });
                            break;
                        }
                        Next::Idle => break,
                        Next::Ended => {
                            // The broker cancelled the consumer (the queue was deleted, or
                            // its leader went away): no delivery will come on it again, and
                            // going round for more would spin. What this batch published is
                            // settled first.
                            stop = Some(Stop::Failed(
                                MoveError(format!(
                                    "the broker cancelled this run's consumer of `{dlq}` (the queue deleted, or its node gone) after {} messages were examined; copies confirmed before it are acknowledged if the queue still exists, else counted as possibly duplicated; check the queue and run it again",
                                    run.tally.examined.load(ordering)
                                )),
                                true,
                            ));
                            break;
                        }
                        Next::Failed(e) => {
                            stop = Some(Stop::Failed(fail("delivery", e), false));
                            break;
                        }
                        Next::Delivery(d) => *d,
                    };
                    unacked += 1;
                    taken += 1;
                    let tag_of = next.delivery_tag;
                    if let Some(key) = ours(&next, run) {
                        // A copy this run (this batch or an earlier one) moved, failed again
                        // and back: not moved a second time (`--verify-for` watches for
                        // these, the next run takes them).
                        run.copies.came_back(key, &run.tally);
                        keep(&mut kept_from, tag_of);
                        consuming.hold();
                        continue;
                    }
                    let m = message(&next);
                    let d = redrive::decide(&run.select, &m, now_ms());
                    run.tally.add(&d);
                    if d != Decision::Move {
                        // Kept unacknowledged until the channel closes: back at its place then.
                        keep(&mut kept_from, tag_of);
                        consuming.hold();
                        continue;
                    }
                    // The selected count may not exceed the limit.
                    if budget.is_some_and(|b| batch.len() as u64 >= b) {
                        // Handed back at close, like a message not chosen.
                        keep(&mut kept_from, tag_of);
                        break;
                    }
                    // Ctrl-C during the wait: this message is not published; it goes back at
                    // close.
                    if !pace.wait_or_stop(&run.stop).await {
                        keep(&mut kept_from, tag_of);
                        break;
                    }
                    let (d, edit) = redrive::copy_of(&run.select, &m, now_ms());
                    if d != Decision::Move {
                        // `--transform` failed on it (examined already; the program counts
                        // it): it stays, like one not chosen, back at its place at close.
                        keep(&mut kept_from, tag_of);
                        consuming.hold();
                        continue;
                    }
                    // Its id once (without a `message_id`, a digest of the body).
                    let id = audit_id(&next);
                    run.tally.edited(&id, &edit);
                    run.tally.chose(id.clone(), redrive::since(&run.select, &m));
                    if batch.is_empty() {
                        opened = tokio::time::Instant::now();
                    }
                    if run.archive.is_some() {
                        batch.archived.push(next);
                        continue;
                    }
                    let key = if run.to.failed_consumer {
                        let Some(q) = failed_queue(&next, r) else {
                            // No x-death: it stays in the DLQ (back at its place at close).
                            run.tally
                                .incomplete(redrive::without_death_line(&id, dlq, false));
                            keep(&mut kept_from, tag_of);
                            consuming.hold();
                            continue;
                        };
                        if !used.contains(&q) && !refused.contains_key(&q) {
                            match failed_queue_ok(&self.reader, r, run.allow_unowned, vhost, &q)
                                .await
                            {
                                Ok(()) => {
                                    used.insert(q.clone());
                                }
                                Err(e) => {
                                    refused.insert(q.clone(), (e.0, Vec::new()));
                                }
                            }
                        }
                        if let Some((_, ids)) = refused.get_mut(&q) {
                            // It stays in the DLQ (back at its place at close), and the rest
                            // go on: reported once per queue, with the ids, at the end.
                            ids.push(id);
                            keep(&mut kept_from, tag_of);
                            consuming.hold();
                            continue;
                        }
                        q
                    } else {
                        route.clone().unwrap_or_else(|| original_key(&next, r))
                    };
                    let props = copy_properties(
                        &next.properties,
                        &self.user,
                        &r.headers,
                        &edit,
                        &run.copies.next(),
                    );
                    let print = edit
                        .body
                        .as_ref()
                        .map(|b| redrive::body_print(b, b.len() as u64));
                    match publish(&to_ch, &exchange, &key, edit.body(&next.data), props) {
                        Ok(sending) => {
                            batch.published.push(Published {
                                delivery: next,
                                id,
                                sending,
                                print,
                            });
                        }
                        Err(e) => {
                            // Not published: it stays in the DLQ; what this batch published
                            // before it is still confirmed and acknowledged.
                            keep(&mut kept_from, tag_of);
                            stop = Some(Stop::Failed(fail("publish", e), true));
                            break;
                        }
                    }
                }
                batch.used = used.iter().cloned().collect();
                (batch, stop)
            };
            let ((batch, stop), settled) = match before {
                Some((b, multiple)) => {
                    let (c, s) =
                        futures_util::future::join(collect, stage.settle(b, multiple)).await;
                    (c, Some(s))
                }
                None => (collect.await, None),
            };
            if let Some(s) = settled
                && let Err(e) = s.apply(&mut unacked, &mut kept_from, &mut consuming)
            {
                // The batch taken meanwhile is not acknowledged: every message of it stays.
                result = Err(e);
                settle_last = false;
            }
            if !batch.is_empty() {
                outstanding = Some(batch);
            }
            match stop {
                None => {}
                Some(Stop::Drained) => break 'run,
                Some(Stop::Failed(e, settle)) => {
                    if result.is_ok() {
                        result = Err(e);
                    }
                    settle_last &= settle;
                    break 'run;
                }
            }
        }
        for (q, (why, ids)) in &refused {
            run.tally
                .incomplete(redrive::refused_queue_line(q, why, ids, dlq, false));
        }
        // No delivery after this: the consumer goes before the last batch is acknowledged,
        // else each ack makes room the broker fills at once with messages this run will only
        // hand back (one delivery each on a quorum queue). Its acks still go on the channel.
        let buffered = consuming.stop(&ch, &tag).await;
        // The batch still in flight: acknowledged as confirmed when the run ends well (or
        // stopped on something of its own, the publish or the destination check of one
        // message); else left in the DLQ, its confirmed copies counted as duplicated.
        if let Some(b) = outstanding.take() {
            if result.is_ok() || settle_last {
                let multiple = b.multiple(kept_from);
                let s = stage.settle(b, multiple).await;
                if let Err(e) = s.apply(&mut unacked, &mut kept_from, &mut consuming)
                    && result.is_ok()
                {
                    result = Err(e);
                }
            } else {
                stage.abandon(b).await;
            }
        }
        // What is left, counted exactly before the channel hands back what it holds (a
        // quorum queue returns them asynchronously: counted after, they read as gone): the
        // ready messages plus every delivery not acknowledged, those lapin has buffered too.
        if (result.is_ok() || conn.status().connected())
            && let Ok(n) = ready_count(&ch, dlq).await
        {
            run.tally.left.store(n + unacked + buffered, ordering);
        }
        // Everything not acknowledged (held, or after a refusal) goes back to the DLQ here.
        let _ = to_ch.close(200, "redrive done".into()).await;
        let _ = ch.close(200, "redrive done".into()).await;
        let _ = conn.close(200, "redrive done".into()).await;
        if held_elsewhere > 0 {
            self.held_elsewhere(vhost, dlq, run).await;
        }
        result
    }

    /// Another consumer held messages of `dlq` unacknowledged as the run started: once this
    /// run's channel is closed, the management API is asked until its statistics (refreshed
    /// every few seconds) say none is held any more, for [`HELD_WAIT`] at most. Still held:
    /// the run was not complete, and what is left is counted with them, from the
    /// statistics (issue 52, M11: never "exact" or "complete" while some are held).
    async fn held_elsewhere(&self, vhost: &str, dlq: &str, run: &Run) {
        let until = std::time::Instant::now() + HELD_WAIT;
        let mut held = None;
        loop {
            if let Ok(q) = self.queue(vhost, dlq).await {
                held = q.get("messages_unacknowledged").and_then(Value::as_u64);
            }
            if held == Some(0) || std::time::Instant::now() >= until {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        let Some(n) = held.filter(|n| *n > 0) else {
            return;
        };
        let ordering = std::sync::atomic::Ordering::Relaxed;
        if let Some(left) = run.tally.left() {
            run.tally.left.store(left + n, ordering);
        }
        run.tally.left_statistics.store(true, ordering);
        // Said by the driver once for the run (not complete), which goes on batch after
        // batch meanwhile.
        run.tally.held_elsewhere.store(n, ordering);
    }

    /// Between two batches of a run: the DLQ's exclusive consumer, under the run's tag, on a
    /// connection of its own, with a prefetch of 1 (it holds at most one message, handed
    /// back at its place when the lease is released, just before the next batch takes the
    /// queue). Another redrive or an archive of the DLQ is refused meanwhile, as during a
    /// batch (issue 52, M4: the lock used to be free during `--pause`).
    pub async fn hold(
        &self,
        r: &Resolved,
        run: &Run,
    ) -> Result<crate::backend::kit::doors::Lease, MoveError> {
        let vhost = r.rabbitmq.as_ref().map_or("/", |x| x.vhost.as_str());
        let dlq = r.dead_letter.clone();
        // A quorum queue does not enforce an exclusive consumer (hx4 D: two runs and an
        // outside consumer consumed beside one), so holding one locks nothing, and the message
        // it held would count one delivery more each pause (a delivery limit set meanwhile
        // dropped it: hx4 A). Nothing is held; the next batch's start checks for another run.
        let q = self.queue(vhost, &dlq).await?;
        if q.get("type").and_then(Value::as_str) == Some("quorum") {
            return Ok(crate::backend::kit::doors::Lease::closing(async {}));
        }
        let uri = with_heartbeat(&format!("{}/{}", self.amqp, seg(vhost)));
        let fail = |what: &str, e: lapin::Error| {
            MoveError(format!(
                "{what} ({} vhost {vhost}): {}",
                self.shown,
                lost(&e)
            ))
        };
        let conn = lapin::Connection::connect(&uri, lapin::ConnectionProperties::default())
            .await
            .map_err(|e| fail("AMQP connect", e))?;
        let ch = conn
            .create_channel()
            .await
            .map_err(|e| fail("AMQP channel", e))?;
        if let Err(e) = ch.basic_qos(1, BasicQosOptions::default()).await {
            let _ = conn.close(200, "redrive lease refused".into()).await;
            return Err(fail("basic.qos", e));
        }
        let tag = format!("{TAG} {}", run.holder);
        match consume(&ch, &dlq, &tag).await {
            Ok(consumer) => Ok(crate::backend::kit::doors::Lease::closing(async move {
                drop(consumer);
                let _ = ch.close(200, "redrive lease over".into()).await;
                let _ = conn.close(200, "redrive lease over".into()).await;
            })),
            Err(e) => {
                let _ = conn.close(200, "redrive lease refused".into()).await;
                Err(self.refused(vhost, &dlq, e, &fail).await)
            }
        }
    }

    /// Why the DLQ could not be consumed exclusively: who holds it, if the management API
    /// can tell within a few seconds (it lists a new consumer within its statistics interval).
    async fn refused(
        &self,
        vhost: &str,
        dlq: &str,
        e: lapin::Error,
        fail: &impl Fn(&str, lapin::Error) -> MoveError,
    ) -> MoveError {
        let mut who = None;
        for _ in 0..6 {
            who = self.queue(vhost, dlq).await.ok().and_then(|q| {
                holder(&q)
                    .map(|h| format!("another redrive, by {h}"))
                    .or_else(|| consumers(&q).map(|c| format!("its consumer(s) {c}")))
            });
            if who.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        let refused = e.to_string().contains("exclusive use");
        match who {
            Some(w) => MoveError(format!(
                "queue `{dlq}` is in use by {w}; a redrive needs it to itself: wait, or stop them"
            )),
            None if refused => MoveError(format!(
                "queue `{dlq}` is in exclusive use by another consumer (another redrive?); a redrive needs it to itself: wait, or stop it"
            )),
            None => fail(&format!("consume from `{dlq}`"), e),
        }
    }

    /// Refuses a destination that would drop what it is given (a length cap with
    /// `drop-head`), and, for the channel's main queue, one that lost its dead-letter
    /// exchange (a message failing again would vanish). Read now: see [`super::guard`].
    pub(super) async fn guard(&self, vhost: &str, name: &str, main: bool) -> Result<(), MoveError> {
        let dlx = if main { Dlx::Main } else { Dlx::Unchecked };
        guard(&self.reader, vhost, name, dlx).await
    }

    async fn queue(&self, vhost: &str, name: &str) -> Result<Value, MoveError> {
        let path = format!(
            "/api/queues/{}/{}?columns=name,type,messages_ready,messages_unacknowledged,arguments,effective_policy_definition,consumer_details",
            seg(vhost),
            seg(name)
        );
        self.reader
            .http
            .get("GET /api/queues/{vhost}/{name}", &path)
            .await
            .map_err(|e| MoveError(e.to_string()))?
            .ok_or_else(|| MoveError(format!("queue `{name}` (vhost {vhost}) does not exist")))
    }

    /// The exchange and fixed routing key to publish to (`None`: the message's own key), and
    /// the queue the guard watches.
    async fn destination(
        &self,
        r: &Resolved,
        run: &Run,
        vhost: &str,
    ) -> Result<(String, Option<String>, String), MoveError> {
        if run.archive.is_some() {
            // `dlqctl archive` publishes nothing (the archive takes the messages): no
            // destination to check (issue 52, M12).
            return Ok((String::new(), None, String::new()));
        }
        if run.to.failed_consumer {
            // Each message's own queue, through the default exchange: checked as it is met
            // (`Mover::failed_queue_ok`); the guard after each batch reads every queue used.
            return Ok((String::new(), None, String::new()));
        }
        let name = if run.to.source { &r.main } else { &run.to.name };
        run.check_owned(redrive::outside_prefixes(&self.reader.prefixes, name))
            .map_err(MoveError)?;
        self.guard(vhost, name, run.to.source && main_dead_letters(r))
            .await
            .map_err(|e| MoveError(format!("destination: {}", e.0)))?;
        if !run.to.source {
            return Ok((String::new(), Some(run.to.name.clone()), name.clone()));
        }
        match r.rabbitmq.as_ref().and_then(|x| x.exchange.as_ref()) {
            Some(x) => Ok((x.name.clone(), None, name.clone())),
            None => Ok((String::new(), Some(r.main.clone()), name.clone())),
        }
    }
}

/// Whether [`guard`] asks for a dead-letter exchange on the destination, and what it says
/// when there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dlx {
    /// Not asked (`--to QUEUE`: a queue the operator names).
    Unchecked,
    /// The channel's main queue, whose spec gives it a dead-letter exchange ([`main_dlx`]).
    Main,
    /// Another queue a message is sent back to by `--to failed-consumer` (issue 52, F2: a
    /// copy that failed again there was dropped).
    Side,
}

/// What [`guard`] asks of the channel's main queue: a dead-letter exchange when the spec
/// gives it one; none in `dlx: arguments` mode, where it has none by design (issue 52, M12
/// and second review F8: the refusal blamed a displaced policy this mode never has).
fn main_dlx(r: &Resolved) -> Dlx {
    if main_dead_letters(r) {
        Dlx::Main
    } else {
        Dlx::Unchecked
    }
}

/// Refuses a destination that would drop what it is given (a length cap with `drop-head`),
/// and, as `dlx` asks, one without a dead-letter exchange (a message failing again would
/// vanish). Read now: see [`super::guard`].
async fn guard(reader: &Reader, vhost: &str, name: &str, dlx: Dlx) -> Result<(), MoveError> {
    let g = super::guard::read(reader, vhost, name)
        .await
        .map_err(|e| MoveError(format!("destination `{name}`: {e}")))?
        .ok_or_else(|| {
            MoveError(format!(
                "destination queue `{name}` (vhost {vhost}) no longer exists"
            ))
        })?;
    if let Some(why) = g.drops() {
        return Err(MoveError(format!(
            "not redriving into `{name}`: {why}; the broker would confirm each publish and push older messages out. Set `overflow: reject-publish` on it (a full queue then refuses, and the run stops with nothing lost), or remove the limit"
        )));
    }
    if dlx != Dlx::Unchecked && g.dead_letter_exchange.is_none() {
        let by = if g.policies.is_empty() {
            "no policy applies to it and it has no `x-dead-letter-exchange` argument".to_owned()
        } else {
            format!("{} applies to it and sets none", g.policies.join(", "))
        };
        let hint = if dlx == Dlx::Main {
            "the channel's spec gives it one: run `dlqctl plan` to see what differs (a policy displaced, or the queue declared without the argument)"
        } else {
            "give it one (a policy or an `x-dead-letter-exchange` argument), or redrive these messages --to a queue that has one"
        };
        return Err(MoveError(format!(
            "not redriving into `{name}`: it has no dead-letter exchange now ({by}), so a message that fails again would be dropped; {hint}"
        )));
    }
    // A dead-letter exchange named but absent drops what fails again as surely as none (hx4
    // E: `--to failed-consumer` moved three into a queue whose DLX was never declared).
    if dlx != Dlx::Unchecked
        && let (Some(from), Some(x)) = (&g.dead_letter_exchange, &g.dead_letter_exchange_name)
        && !x.is_empty()
    {
        let path = format!("/api/exchanges/{}/{}", seg(vhost), seg(x));
        let found = reader
            .http
            .get("GET /api/exchanges/{vhost}/{name}", &path)
            .await
            .map_err(|e| {
                MoveError(format!(
                    "destination `{name}`'s dead-letter exchange `{x}`: {e}"
                ))
            })?;
        if found.is_none() {
            return Err(MoveError(format!(
                "not redriving into `{name}`: its dead-letter exchange `{x}` (set by {from}) does not exist (vhost {vhost}), so a message that fails again would be dropped; declare it, or redrive these messages --to a queue whose dead-letter exchange exists"
            )));
        }
    }
    Ok(())
}

/// `--to failed-consumer`: queue `q`, the one a message was rejected from, may receive it:
/// inside the target's ownership prefixes (unless `allow_unowned`), and as safe as any
/// destination: no length cap that drops, and a dead-letter exchange present, whichever
/// queue it is (issue 52, F2). The run and its dry run ask this alike (F1).
pub async fn failed_queue_ok(
    reader: &Reader,
    r: &Resolved,
    allow_unowned: bool,
    vhost: &str,
    q: &str,
) -> Result<(), MoveError> {
    if q != r.main
        && !allow_unowned
        && let Some(why) = redrive::outside_prefixes(&reader.prefixes, q)
    {
        return Err(MoveError(format!(
            "not redriving into `{q}` (the queue a message was rejected from, by its x-death): {why}; dlqctl moves messages only into what the target owns. Pass --allow-unowned-destination to move them there anyway"
        )));
    }
    let dlx = if q == r.main { main_dlx(r) } else { Dlx::Side };
    guard(reader, vhost, q, dlx)
        .await
        .map_err(|e| MoveError(format!("destination: {}", e.0)))
}

/// Records a delivery this run keeps unacknowledged until it ends ([`Batch::multiple`]).
fn keep(kept_from: &mut Option<u64>, tag: u64) {
    *kept_from = Some(kept_from.map_or(tag, |k| k.min(tag)));
}

/// Why the taking of a batch stopped the run.
enum Stop {
    /// Nothing more to take (drained, or what is left was reported as not examined).
    Drained,
    /// An error; `true`: what was published before it is still settled (the publish or the
    /// destination check of one message failed), `false`: abandoned (the delivery stream
    /// failed: the connection is gone).
    Failed(MoveError, bool),
}

/// A copy on its way: its publish, polled once when made (its frames queued, and its
/// delivery tag for the confirm taken, in the order of the deliveries) and resolved once
/// lapin wrote it; the confirm comes from its output.
type Sending =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<PublisherConfirm, lapin::Error>>>>;

/// Publishes a copy without waiting for lapin's I/O thread to write it: awaiting each write
/// before taking the next delivery put a round trip to that thread between any two messages.
/// The publish is awaited, then confirmed, when its batch settles.
fn publish(
    ch: &lapin::Channel,
    exchange: &str,
    key: &str,
    body: &[u8],
    props: lapin::BasicProperties,
) -> Result<Sending, lapin::Error> {
    let (ch, exchange, key, body) = (
        ch.clone(),
        exchange.to_owned(),
        key.to_owned(),
        body.to_vec(),
    );
    let mut sending: Sending = Box::pin(async move {
        ch.basic_publish(
            exchange.as_str().into(),
            key.as_str().into(),
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            &body,
            props,
        )
        .await
    });
    match futures_util::FutureExt::now_or_never(&mut sending) {
        Some(Err(e)) => Err(e),
        Some(Ok(confirm)) => Ok(Box::pin(async move { Ok(confirm) })),
        None => Ok(sending),
    }
}

/// A chosen delivery published to the destination, not settled yet.
struct Published {
    delivery: lapin::message::Delivery,
    /// As the audit record names it.
    id: String,
    sending: Sending,
    /// `--transform`: the body print of the copy the program changed (`--verify-for`
    /// recognises the copy, not the message as it was).
    print: Option<u64>,
}

impl Published {
    /// The broker's answer to the publish, and the delivery, its id and print back.
    async fn confirmed(self) -> (Settling, Result<Confirmation, lapin::Error>) {
        let answer = match self.sending.await {
            Ok(confirm) => confirm.await,
            Err(e) => Err(e),
        };
        (
            Settling {
                delivery: self.delivery,
                id: self.id,
                print: self.print,
            },
            answer,
        )
    }
}

/// A chosen delivery whose copy the broker confirmed (or that the archive holds), to be
/// acknowledged.
struct Settling {
    delivery: lapin::message::Delivery,
    id: String,
    print: Option<u64>,
}

/// The chosen deliveries taken together, in delivery-tag order: published (or, for
/// `dlqctl archive`, to archive), then settled: confirmed, the destination checked, and
/// acknowledged in the DLQ.
struct Batch {
    published: Vec<Published>,
    /// `dlqctl archive`: the chosen deliveries, for the archive.
    archived: Vec<lapin::message::Delivery>,
    /// `--to failed-consumer`: the queues published to up to the end of this batch, each
    /// read again before its acks.
    used: Vec<String>,
}

impl Batch {
    fn len(&self) -> usize {
        self.published.len() + self.archived.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether one `multiple` ack of its last delivery may acknowledge it: nothing kept
    /// unacknowledged below that tag (every lower tag is then this batch's, or acknowledged
    /// already: a batch settles whole or stops the run).
    fn multiple(&self, kept_from: Option<u64>) -> bool {
        let last = self
            .published
            .last()
            .map(|p| p.delivery.delivery_tag)
            .max(self.archived.last().map(|d| d.delivery_tag));
        last.is_some_and(|t| kept_from.is_none_or(|k| k > t))
    }
}

/// What settling a batch changed for the loop that took it.
#[derive(Default)]
struct Settled {
    /// Acknowledged, and so no longer unacknowledged on the channel.
    sent: u64,
    /// Delivery tags kept unacknowledged (archived without `--delete`).
    kept: Vec<u64>,
    error: Option<MoveError>,
}

impl Settled {
    fn apply(
        self,
        unacked: &mut u64,
        kept_from: &mut Option<u64>,
        consuming: &mut Consuming,
    ) -> Result<(), MoveError> {
        *unacked -= self.sent;
        for tag in self.kept {
            keep(kept_from, tag);
            consuming.hold();
        }
        self.error.map_or(Ok(()), Err)
    }
}

/// What settling a batch reads; shared with the taking of the next batch, which runs
/// meanwhile.
struct Stage<'a, F: Fn(&str, lapin::Error) -> MoveError> {
    mover: &'a Mover,
    r: &'a Resolved,
    run: &'a Run,
    ch: &'a lapin::Channel,
    dlq: &'a str,
    vhost: &'a str,
    exchange: &'a str,
    route: Option<&'a str>,
    /// The queue the guard watches (not `--to failed-consumer`).
    into: &'a str,
    fail: &'a F,
    /// Set when a settle failed: the batch being taken stops at once (what it published
    /// stays in the DLQ, its confirmed copies counted as duplicated).
    halt: std::sync::atomic::AtomicBool,
}

impl<F: Fn(&str, lapin::Error) -> MoveError> Stage<'_, F> {
    fn halted(&self) -> bool {
        self.halt.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Records the batch's first error (the cause: what follows it, a check or an ack on a
    /// connection already gone, adds nothing) and stops the batch being taken.
    fn failed(&self, out: &mut Settled, e: MoveError) {
        self.halt.store(true, std::sync::atomic::Ordering::SeqCst);
        out.error.get_or_insert(e);
    }

    /// Confirms, checks the destination, acknowledges: the DLQ lets go of exactly what the
    /// broker confirmed (in order, up to the first refusal), and only once the destination
    /// read after the confirms is still safe.
    async fn settle(&self, batch: Batch, multiple: bool) -> Settled {
        let ordering = std::sync::atomic::Ordering::Relaxed;
        let (run, dlq, r) = (self.run, self.dlq, self.r);
        let mut out = Settled::default();
        let Batch {
            published,
            archived,
            used,
        } = batch;
        // Acknowledge in the DLQ only what the broker confirmed, in order; the first refusal
        // stops the run with that message and the rest unacknowledged.
        let mut confirmed: Vec<Settling> = Vec::with_capacity(published.len());
        let mut rest = published.into_iter();
        while let Some(p) = rest.next() {
            let (done, answer) = p.confirmed().await;
            let delivery = &done.delivery;
            let error = match answer {
                Ok(Confirmation::Ack(None)) => {
                    confirmed.push(done);
                    continue;
                }
                Ok(Confirmation::Ack(Some(_))) => MoveError(format!(
                    "the destination does not route the message (exchange `{}`, routing key `{key}`): returned unroutable; it stays in `{dlq}`",
                    if self.exchange.is_empty() {
                        "(default)"
                    } else {
                        self.exchange
                    },
                    key = if run.to.failed_consumer {
                        failed_queue(delivery, r).unwrap_or_default()
                    } else {
                        self.route
                            .map_or_else(|| original_key(delivery, r), str::to_owned)
                    }
                )),
                Ok(Confirmation::Nack(_)) => MoveError(format!(
                    "the broker refused the message for the destination (a full queue with `overflow: reject-publish`?); it stays in `{dlq}`"
                )),
                Ok(Confirmation::NotRequested) => {
                    MoveError("the broker did not confirm the publish".into())
                }
                Err(e) => {
                    // The connection went before the broker's answer: this publish and every
                    // later one may have landed (they are in the DLQ still, and perhaps in
                    // the destination).
                    run.tally
                        .duplicated
                        .fetch_add(1 + rest.len() as u64, ordering);
                    self.failed(&mut out, (self.fail)("publish confirm", e));
                    break;
                }
            };
            self.failed(&mut out, error);
            // The copies published after it stay in the DLQ too: each the broker confirmed
            // is in the destination as well.
            self.abandon_published(rest.collect()).await;
            break;
        }
        // What was confirmed before a refusal or a lost answer is still acknowledged below
        // (the run stops after this batch).
        if let Some(sink) = run.archive.as_deref()
            && !archived.is_empty()
        {
            // The archive first; the DLQ lets go of them only once it returned.
            let messages: Vec<Message> = archived
                .iter()
                .map(|d| Message {
                    id: audit_id(d),
                    ..message(d)
                })
                .collect();
            if let Err(e) = sink.put(&messages).await {
                self.failed(
                    &mut out,
                    MoveError(format!("{e}; nothing of this batch left `{dlq}`")),
                );
                return out;
            }
            if !sink.delete {
                // Archived, and kept: unacknowledged until the channel closes, then back at
                // their place.
                run.tally.moved.fetch_add(archived.len() as u64, ordering);
                run.tally.moved_ids(archived.iter().map(audit_id));
                out.kept = archived.iter().map(|d| d.delivery_tag).collect();
                return out;
            }
            confirmed = archived
                .into_iter()
                .map(|delivery| Settling {
                    id: audit_id(&delivery),
                    delivery,
                    print: None,
                })
                .collect();
        }
        if confirmed.is_empty() {
            return out;
        }
        // The destination again, read now: a cap or a displaced dead-letter policy that
        // landed while this batch was published stops the run before the DLQ lets go.
        let guarded = if run.archive.is_some() {
            Ok(())
        } else if run.to.failed_consumer {
            let mut ok = Ok(());
            for q in &used {
                let dlx = if q == &r.main { main_dlx(r) } else { Dlx::Side };
                if let Err(e) = guard(&self.mover.reader, self.vhost, q, dlx).await {
                    ok = Err(e);
                    break;
                }
            }
            ok
        } else {
            self.mover
                .guard(self.vhost, self.into, run.to.source && main_dead_letters(r))
                .await
        };
        if let Err(e) = guarded {
            run.tally
                .duplicated
                .fetch_add(confirmed.len() as u64, ordering);
            self.failed(
                &mut out,
                MoveError(format!(
                    "{}; the last {} published are kept in `{dlq}` too (possibly duplicated), every message not moved is still there",
                    e.0,
                    confirmed.len()
                )),
            );
            return out;
        }
        // Acknowledge in the DLQ exactly what the broker confirmed (in order, up to the
        // first refusal): one `multiple` ack of the last when nothing is kept below it, else
        // one ack each (written together, counted up to the first that failed).
        let acks: Vec<&lapin::message::Delivery> = if multiple {
            confirmed.last().map(|s| &s.delivery).into_iter().collect()
        } else {
            confirmed.iter().map(|s| &s.delivery).collect()
        };
        let written = futures_util::future::join_all(
            acks.iter()
                .map(|d| d.acker.ack(BasicAckOptions { multiple })),
        )
        .await;
        let ok = written.iter().take_while(|w| w.is_ok()).count() as u64;
        let sent = if multiple {
            if ok == 1 { confirmed.len() as u64 } else { 0 }
        } else {
            ok
        };
        let ack_error = written.into_iter().find_map(Result::err);
        // An ack has no answer in AMQP 0-9-1: a written ack may die with the connection. A
        // synchronous call on the same channel after it is answered only once the broker has
        // handled every frame before it, the acks included; until then they count as possibly
        // duplicated, not moved.
        let settled = match ack_error {
            Some(e) => Err(e),
            None => match tokio::time::timeout(SETTLE, ready_count(self.ch, dlq)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(lapin::Error::from(lapin::ErrorKind::MissingHeartbeatError)),
            },
        };
        match settled {
            Ok(()) => {
                let sent_now = usize::try_from(sent).unwrap_or(usize::MAX);
                run.tally.moved.fetch_add(sent, ordering);
                for s in confirmed.iter().take(sent_now) {
                    match s.print {
                        Some(p) => run.tally.moved_print(p),
                        None => run.tally.moved_body(&s.delivery.data),
                    }
                }
                out.sent = sent;
                run.tally
                    .duplicated
                    .fetch_add(confirmed.len() as u64 - sent, ordering);
                run.tally
                    .moved_ids(confirmed.into_iter().take(sent_now).map(|s| s.id));
            }
            Err(e) => {
                run.tally
                    .duplicated
                    .fetch_add(confirmed.len() as u64, ordering);
                self.failed(
                    &mut out,
                    (self.fail)(
                        &format!(
                            "removing {} confirmed copies from the dead-letter queue was not confirmed by the broker (they may be in both queues)",
                            confirmed.len()
                        ),
                        e,
                    ),
                );
            }
        }
        out
    }

    /// A batch the run stopped before settling: nothing of it is acknowledged (every message
    /// stays in the DLQ); what the broker confirmed of its copies is counted as duplicated.
    async fn abandon(&self, batch: Batch) {
        self.abandon_published(batch.published).await;
    }

    /// Counts the copies among `published` that landed (confirmed, or unanswered: possibly)
    /// as duplicated; their messages stay in the DLQ. Waits SETTLE at most for the answers.
    async fn abandon_published(&self, published: Vec<Published>) {
        if published.is_empty() {
            return;
        }
        let total = published.len() as u64;
        let landed = async {
            let mut n = 0u64;
            for p in published {
                if !matches!(
                    p.confirmed().await.1,
                    Ok(Confirmation::Ack(Some(_)) | Confirmation::Nack(_))
                ) {
                    n += 1;
                }
            }
            n
        };
        let duplicated = tokio::time::timeout(SETTLE, landed).await.unwrap_or(total);
        self.run
            .tally
            .duplicated
            .fetch_add(duplicated, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The DLQ's consumer, replaced when the messages it holds back fill its prefetch: RabbitMQ
/// applies a raised `basic.qos` to consumers made after it only, so raising it in place left
/// delivery stopped at the first prefetch, and a 2 s idle read as "drained" (a hostile run
/// moved 250 of 500 selected). The held messages stay unacknowledged on the channel across a
/// `basic.cancel`; what the old consumer had buffered is served first.
struct Consuming {
    consumer: lapin::Consumer,
    /// Deliveries the cancelled consumers had buffered, in order.
    pending: std::collections::VecDeque<lapin::message::Delivery>,
    /// Unacknowledged messages held back since this consumer started.
    held: u64,
    /// The stream ended: the consumer is gone (cancelled by the broker), nothing to cancel.
    ended: bool,
    /// The channel's prefetch: see [`prefetch_for`].
    prefetch: u16,
    /// How many times the consumer was started again: each consumer after the first has a
    /// tag of its own (`<tag> #<n>`). A quorum queue hands a new consumer with the tag of one
    /// just cancelled nothing while that one's deliveries are unacknowledged (hx4 B: a
    /// selection behind a prefetch of messages not chosen moved 0, "run it again").
    serial: u32,
}

/// The prefetch of a run that moves at most `limit`: no more than it, and no more than two
/// batches (one settling while the next is taken): a delivery not moved goes back at close,
/// one delivery more on a quorum queue, and each batch acknowledged makes room the broker
/// fills at once, so a prefetch of the whole limit handed back up to `limit − 200` (hx4 C).
/// Unlimited, [`PREFETCH`].
fn prefetch_for(limit: Option<u64>) -> u16 {
    let most = 2 * BATCH as u64;
    limit.map_or(PREFETCH, |l| {
        u16::try_from(l.clamp(1, most)).unwrap_or(PREFETCH)
    })
}

enum Next {
    Delivery(Box<lapin::message::Delivery>),
    /// Nothing within the wait.
    Idle,
    /// The consumer was cancelled (by the broker: the queue was deleted).
    Ended,
    Failed(lapin::Error),
}

impl Consuming {
    async fn start(
        ch: &lapin::Channel,
        dlq: &str,
        tag: &str,
        prefetch: u16,
    ) -> Result<Self, lapin::Error> {
        Ok(Consuming {
            consumer: consume(ch, dlq, tag).await?,
            pending: std::collections::VecDeque::new(),
            held: 0,
            ended: false,
            prefetch,
            serial: 0,
        })
    }

    /// Whether the messages held back and `in_flight` (taken, not settled) leave less room
    /// than the batch being taken `want`s before the prefetch, or than half the prefetch when
    /// that is less: a small prefetch (a run of `--limit 100 --where …`) is not replaced for
    /// every message held back.
    fn full(&self, in_flight: u64, want: u64) -> bool {
        let prefetch = u64::from(self.prefetch);
        self.held + in_flight + want.min(prefetch / 2).max(1) > prefetch
    }

    fn hold(&mut self) {
        self.held += 1;
    }

    /// The current consumer's tag, from the run's.
    fn tag_of(&self, tag: &str) -> String {
        if self.serial == 0 {
            tag.to_owned()
        } else {
            format!("{tag} #{}", self.serial)
        }
    }

    async fn next(&mut self, wait: std::time::Duration) -> Next {
        if let Some(d) = self.pending.pop_front() {
            return Next::Delivery(Box::new(d));
        }
        match tokio::time::timeout(wait, self.consumer.next()).await {
            Err(_) => Next::Idle,
            Ok(None) => {
                self.ended = true;
                Next::Ended
            }
            Ok(Some(Err(e))) => Next::Failed(e),
            Ok(Some(Ok(d))) => Next::Delivery(Box::new(d)),
        }
    }

    /// Cancels the consumer, keeps what it had buffered, and consumes again with a fresh
    /// prefetch (exclusive, under a tag of its own beginning with the run's: no other consumer
    /// gets in unless it was waiting for exactly this moment, and then the new consume is
    /// refused and the run stops).
    async fn renew(
        &mut self,
        ch: &lapin::Channel,
        dlq: &str,
        tag: &str,
    ) -> Result<(), lapin::Error> {
        self.drain(ch, tag).await?;
        self.resume(ch, dlq, tag).await
    }

    /// Consumes again after [`drain`](Self::drain), with a fresh prefetch.
    async fn resume(
        &mut self,
        ch: &lapin::Channel,
        dlq: &str,
        tag: &str,
    ) -> Result<(), lapin::Error> {
        self.serial += 1;
        self.consumer = consume(ch, dlq, &self.tag_of(tag)).await?;
        self.held = 0;
        self.ended = false;
        Ok(())
    }

    /// What became ready for this run since it counted: the deliveries the consumer had
    /// buffered (a consumer with room in its prefetch is handed a message the moment it is
    /// ready, so the queue's count alone misses them) plus the queue's ready count, read
    /// exactly while nothing is being delivered; then consumes again.
    async fn recount(
        &mut self,
        ch: &lapin::Channel,
        dlq: &str,
        tag: &str,
    ) -> Result<u64, lapin::Error> {
        self.drain(ch, tag).await?;
        let ready = ready_count(ch, dlq).await?;
        self.resume(ch, dlq, tag).await?;
        Ok(self.pending.len() as u64 + ready)
    }

    /// Cancels the consumer and returns how many deliveries it had buffered (unacknowledged:
    /// they go back to the DLQ with the channel).
    async fn stop(&mut self, ch: &lapin::Channel, tag: &str) -> u64 {
        let _ = self.drain(ch, tag).await;
        self.pending.len() as u64
    }

    async fn drain(&mut self, ch: &lapin::Channel, tag: &str) -> Result<(), lapin::Error> {
        if self.ended {
            // Cancelled by the broker: no cancel-ok would come, nor any delivery.
            return Ok(());
        }
        ch.basic_cancel(
            self.tag_of(tag).as_str().into(),
            BasicCancelOptions::default(),
        )
        .await?;
        // After cancel-ok the stream yields what it had buffered, then ends.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while let Ok(Some(Ok(d))) = tokio::time::timeout_at(deadline, self.consumer.next()).await {
            self.pending.push_back(d);
        }
        Ok(())
    }
}

async fn consume(
    ch: &lapin::Channel,
    dlq: &str,
    tag: &str,
) -> Result<lapin::Consumer, lapin::Error> {
    ch.basic_consume(
        dlq.into(),
        tag.into(),
        BasicConsumeOptions {
            exclusive: true,
            ..BasicConsumeOptions::default()
        },
        FieldTable::default(),
    )
    .await
}

/// The queue's ready messages now, exactly (a passive `queue.declare`: the management API's
/// figure lags by seconds). Also the synchronous call that proves earlier acks were handled.
async fn ready_count(ch: &lapin::Channel, queue: &str) -> Result<u64, lapin::Error> {
    let passive = lapin::options::QueueDeclareOptions {
        passive: true,
        ..lapin::options::QueueDeclareOptions::default()
    };
    ch.queue_declare(queue.into(), passive, FieldTable::default())
        .await
        .map(|q| u64::from(q.message_count()))
}

/// The AMQP URI with a heartbeat, unless it sets one.
pub(super) fn with_heartbeat(uri: &str) -> String {
    if uri.contains("heartbeat=") {
        return uri.to_owned();
    }
    let sep = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{sep}heartbeat={HEARTBEAT}")
}

/// An AMQP error as an on-call engineer needs it: what happened to the connection, and what
/// that means for the messages.
pub(super) fn lost(e: &lapin::Error) -> String {
    use lapin::ErrorKind as K;
    let back = "every message not acknowledged is back in the dead-letter queue";
    match e.kind() {
        K::MissingHeartbeatError => format!(
            "the broker stopped answering (no heartbeat within {} s): connection given up; {back}",
            2 * HEARTBEAT
        ),
        K::IOError(io) => format!("connection lost ({io}); {back}"),
        K::InvalidConnectionState(_) | K::InvalidChannelState(..) | K::InvalidChannel(_) => {
            format!("connection or channel closed ({e}); {back}")
        }
        K::ProtocolError(amqp) => format!("the broker closed the channel: {amqp}; {back}"),
        _ => e.to_string(),
    }
}

/// Whether a delivery is a copy this run made (in any of its batches): it carries the run's
/// stamp ([`redrive::Copies`]).
fn ours(d: &lapin::message::Delivery, run: &Run) -> Option<String> {
    let h = d.properties.headers().as_ref()?;
    let stamp = h
        .inner()
        .iter()
        .find(|(k, _)| {
            k.as_str()
                .eq_ignore_ascii_case(crate::status::envelope::REDRIVE_RUN)
        })
        .map(|(_, v)| text(v))?;
    run.copies.ours(
        "",
        std::iter::once((crate::status::envelope::REDRIVE_RUN, stamp.as_str())),
    )
}

/// How the audit record names a moved message: its `message_id` property, else `sha256:` of
/// its body (AMQP gives a message no id of its own).
fn audit_id(d: &lapin::message::Delivery) -> String {
    use sha2::Digest;
    match d.properties.message_id() {
        Some(id) if !id.as_str().is_empty() => id.as_str().to_owned(),
        _ => format!(
            "sha256:{}",
            sha2::Sha256::digest(&d.data)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
    }
}

/// [`audit_id`] of a message as `status` read it: its `message_id`, else `sha256:` of its
/// body when the read has it whole, else the position the status reader gives it.
pub fn audit_id_of(m: &Message) -> String {
    use sha2::Digest;
    match m.properties.iter().find(|(k, _)| k == "message_id") {
        Some((_, id)) if !id.is_empty() => id.clone(),
        _ if m.body.len() as u64 == m.body_len => format!(
            "sha256:{}",
            sha2::Sha256::digest(&m.body)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
        _ => m.id.clone(),
    }
}

/// The copy's properties: the delivery's, with the headers of [`moved_headers`], and without
/// a `user_id` naming another user (the broker refuses it with PRECONDITION_FAILED and closes
/// the channel: it is valid only for the connection that published it).
fn copy_properties(
    p: &lapin::BasicProperties,
    user: &str,
    rules: &HeaderRules,
    edit: &Edit,
    stamp: &str,
) -> lapin::BasicProperties {
    let mut props = lapin::BasicProperties::default();
    if let Some(v) = p.content_type() {
        props = props.with_content_type(v.clone());
    }
    if let Some(v) = p.content_encoding() {
        props = props.with_content_encoding(v.clone());
    }
    if let Some(v) = p.delivery_mode() {
        props = props.with_delivery_mode(*v);
    }
    if let Some(v) = p.priority() {
        props = props.with_priority(*v);
    }
    if let Some(v) = p.correlation_id() {
        props = props.with_correlation_id(v.clone());
    }
    if let Some(v) = p.reply_to() {
        props = props.with_reply_to(v.clone());
    }
    if let Some(v) = p.expiration() {
        props = props.with_expiration(v.clone());
    }
    if let Some(v) = p.message_id() {
        props = props.with_message_id(v.clone());
    }
    if let Some(v) = p.timestamp() {
        props = props.with_timestamp(*v);
    }
    if let Some(v) = p.kind() {
        props = props.with_type(v.clone());
    }
    if let Some(v) = p.app_id() {
        props = props.with_app_id(v.clone());
    }
    if let Some(v) = p.cluster_id() {
        props = props.with_cluster_id(v.clone());
    }
    if let Some(v) = p.user_id().as_ref().filter(|u| u.as_str() == user) {
        props = props.with_user_id(v.clone());
    }
    props.with_headers(moved_headers(p.headers().as_ref(), rules, edit, stamp))
}

/// The management URL's host with the AMQP port (`amqpUrl` wins), and the same for messages.
fn amqp_base(target: &Target) -> Result<(String, String), String> {
    if let Some(u) = &target.amqp_url {
        let u = u.trim_end_matches('/').to_owned();
        if !(u.starts_with("amqp://") || u.starts_with("amqps://")) {
            return Err(format!(
                "`amqpUrl` must start with amqp:// or amqps://, not `{}`",
                crate::backend::wire::http::redact_userinfo(&u)
            ));
        }
        // The URL for messages never shows credentials, even if the file's were let through.
        let shown = crate::backend::wire::http::redact_userinfo(&u);
        return Ok((u, shown));
    }
    let url = target.url.as_deref().ok_or("no `url`")?;
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("`url` has no scheme: `{url}`"))?;
    let hostport = rest.split('/').next().unwrap_or_default();
    let host = hostport
        .rsplit_once(':')
        .map_or(hostport, |(h, _)| h)
        .rsplit('@')
        .next()
        .unwrap_or_default();
    let base = match scheme {
        "https" => format!("amqps://{host}:5671"),
        _ => format!("amqp://{host}:5672"),
    };
    Ok((base.clone(), base))
}

/// The consumer that holds the DLQ for another redrive, if one does.
fn holder(q: &Value) -> Option<String> {
    q.get("consumer_details")?
        .as_array()?
        .iter()
        .filter_map(|c| c.get("consumer_tag").and_then(Value::as_str))
        .find(|t| t.starts_with(TAG))
        .map(|t| {
            let t = t.trim_start_matches(TAG).trim();
            // A run's consumers after its first: `<holder> #<n>`.
            t.rsplit_once(" #")
                .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .map_or(t, |(h, _)| h)
                .to_owned()
        })
}

/// The tags of the queue's consumers, if it has any.
fn consumers(q: &Value) -> Option<String> {
    let tags: Vec<&str> = q
        .get("consumer_details")?
        .as_array()?
        .iter()
        .filter_map(|c| c.get("consumer_tag").and_then(Value::as_str))
        .collect();
    (!tags.is_empty()).then(|| tags.join(", "))
}

/// The routing key to publish a moved message with through the channel's exchange: the key it
/// was published to that exchange with (`routing-keys[0]` of the most recent `x-death` entry
/// whose `exchange` is the channel's), else the channel's first binding key, else the main
/// queue (default exchange).
///
/// Not simply `x-death[0]`: a message that went round a retry loop, or dead-lettered through
/// a named dead-letter exchange after one, carries the keys the broker or the consumer gave it
/// since (the retry queue's, the main queue's name), which the channel's exchange does not
/// route: the publish came back unroutable and the message stayed in the DLQ.
fn original_key(d: &lapin::message::Delivery, r: &Resolved) -> String {
    let exchange = r.rabbitmq.as_ref().and_then(|x| x.exchange.as_ref());
    let from_death =
        exchange.and_then(|x| published_key(d.properties.headers().as_ref()?, &x.name));
    from_death
        .or_else(|| exchange.and_then(|x| x.routing_keys.first().cloned()))
        .unwrap_or_else(|| r.main.clone())
}

/// `--to failed-consumer`: the queue the message was rejected from, by its `x-death`: the most
/// recent entry with reason `rejected`, else the most recent whose queue is neither the DLQ
/// nor one of the channel's retry queues. `None`: no such entry (the message stays).
fn failed_queue(d: &lapin::message::Delivery, r: &Resolved) -> Option<String> {
    let skip = |q: &str| q == r.dead_letter || r.retry_stages.iter().any(|s| s.name == q);
    failed_queue_in(d.properties.headers().as_ref()?, skip)
}

/// [`failed_queue`] over the headers; `skip`: the DLQ and the channel's retry queues.
fn failed_queue_in(headers: &FieldTable, skip: impl Fn(&str) -> bool) -> Option<String> {
    let AMQPValue::FieldArray(deaths) = headers.inner().get("x-death")? else {
        return None;
    };
    let entries: Vec<(String, String)> = deaths
        .as_slice()
        .iter()
        .filter_map(|death| {
            let AMQPValue::FieldTable(death) = death else {
                return None;
            };
            let queue = death.inner().get("queue").map(text)?;
            let reason = death.inner().get("reason").map(text).unwrap_or_default();
            Some((queue, reason))
        })
        .collect();
    pick_failed(&entries, skip)
}

/// Of the `x-death` entries (queue, reason), newest first: the most recent with reason
/// `rejected` whose queue is not skipped, else the most recent not skipped; an empty queue
/// name is none.
fn pick_failed(entries: &[(String, String)], skip: impl Fn(&str) -> bool) -> Option<String> {
    let usable = |q: &str| !q.is_empty() && !skip(q);
    entries
        .iter()
        .find(|(q, reason)| reason == "rejected" && usable(q))
        .or_else(|| entries.iter().find(|(q, _)| usable(q)))
        .map(|(q, _)| q.clone())
}

/// [`failed_queue`] of a message as `status` read it (a dry run: the management API gives
/// `x-death` as JSON, which the status reader keeps as text): the same entries, the same
/// choice. `None`: the message would stay.
pub fn failed_queue_of(m: &Message, r: &Resolved) -> Option<String> {
    let skip = |q: &str| q == r.dead_letter || r.retry_stages.iter().any(|s| s.name == q);
    let (_, death) = m.headers.iter().find(|(k, _)| k == "x-death")?;
    let Ok(Value::Array(deaths)) = serde_json::from_str::<Value>(death) else {
        return None;
    };
    let as_text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let entries: Vec<(String, String)> = deaths
        .iter()
        .filter_map(|death| {
            let death = death.as_object()?;
            let queue = death.get("queue").map(as_text)?;
            let reason = death.get("reason").map(as_text).unwrap_or_default();
            Some((queue, reason))
        })
        .collect();
    pick_failed(&entries, skip)
}

/// `routing-keys[0]` of the most recent `x-death` entry whose message had been published to
/// `exchange`.
fn published_key(headers: &FieldTable, exchange: &str) -> Option<String> {
    let AMQPValue::FieldArray(deaths) = headers.inner().get("x-death")? else {
        return None;
    };
    deaths.as_slice().iter().find_map(|death| {
        let AMQPValue::FieldTable(death) = death else {
            return None;
        };
        if death.inner().get("exchange").map(text).as_deref() != Some(exchange) {
            return None;
        }
        let AMQPValue::FieldArray(keys) = death.inner().get("routing-keys")? else {
            return None;
        };
        match keys.as_slice().first()? {
            AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
            AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
            _ => None,
        }
    })
}

/// The copy's headers: `edit` applied (`--transform`: names removed, changed ones set as
/// long strings, the rest kept as typed), the broker's attempt history dropped, then those
/// `rules` shed (`deadLetter.redrive` and the default list), `dlq-redrive-count` + 1.
fn moved_headers(
    h: Option<&FieldTable>,
    rules: &HeaderRules,
    edit: &Edit,
    stamp: &str,
) -> FieldTable {
    let mut out = FieldTable::default();
    let mut count: u32 = 0;
    let set = edit.set.iter().map(|(k, v)| {
        (
            ShortString::from(k.clone()),
            AMQPValue::LongString(v.clone().into()),
        )
    });
    let kept = h
        .map(|t| t.inner().iter())
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            !edit.removed.iter().any(|r| r == k.as_str())
                && !edit.set.iter().any(|(s, _)| s == k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect::<Vec<_>>();
    for (k, v) in kept.into_iter().chain(set) {
        let (k, v) = (&k, &v);
        let name = k.as_str();
        if name.eq_ignore_ascii_case(crate::status::envelope::REDRIVE_COUNT) {
            count = redrive::parse_count(&text(v)).unwrap_or(0);
            continue;
        }
        if name.eq_ignore_ascii_case(crate::status::envelope::REDRIVE_RUN) {
            continue;
        }
        let history = ATTEMPT_HISTORY.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name.eq_ignore_ascii_case(p),
        });
        if !history && !rules.sheds(name) {
            out.insert(k.clone(), v.clone());
        }
    }
    out.insert(
        ShortString::from(crate::status::envelope::REDRIVE_COUNT),
        AMQPValue::LongLongInt(i64::from(count) + 1),
    );
    if !stamp.is_empty() {
        out.insert(
            ShortString::from(crate::status::envelope::REDRIVE_RUN),
            AMQPValue::LongString(stamp.into()),
        );
    }
    out
}

fn json(v: &AMQPValue) -> Value {
    match v {
        AMQPValue::Boolean(b) => Value::from(*b),
        AMQPValue::ShortShortInt(n) => Value::from(*n),
        AMQPValue::ShortShortUInt(n) => Value::from(*n),
        AMQPValue::ShortInt(n) => Value::from(*n),
        AMQPValue::ShortUInt(n) => Value::from(*n),
        AMQPValue::LongInt(n) => Value::from(*n),
        AMQPValue::LongUInt(n) => Value::from(*n),
        AMQPValue::LongLongInt(n) => Value::from(*n),
        AMQPValue::Float(n) => Value::from(*n),
        AMQPValue::Double(n) => Value::from(*n),
        AMQPValue::Timestamp(n) => Value::from(*n),
        AMQPValue::ShortString(s) => Value::from(s.as_str()),
        AMQPValue::LongString(s) => Value::from(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::FieldArray(a) => Value::Array(a.as_slice().iter().map(json).collect()),
        AMQPValue::FieldTable(t) => Value::Object(
            t.inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), json(v)))
                .collect(),
        ),
        AMQPValue::ByteArray(b) => Value::from(
            b.as_slice()
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect::<String>(),
        ),
        AMQPValue::DecimalValue(d) => Value::from(format!("{d:?}")),
        AMQPValue::Void => Value::Null,
    }
}

fn text(v: &AMQPValue) -> String {
    match json(v) {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// A delivery as the envelope reads it.
fn message(d: &lapin::message::Delivery) -> Message {
    let headers: BTreeMap<String, String> = d
        .properties
        .headers()
        .as_ref()
        .map(|h| {
            h.inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), text(v)))
                .collect()
        })
        .unwrap_or_default();
    let death_time = d.properties.headers().as_ref().and_then(|h| {
        let AMQPValue::FieldArray(a) = h.inner().get("x-death")? else {
            return None;
        };
        let AMQPValue::FieldTable(first) = a.as_slice().first()? else {
            return None;
        };
        match first.inner().get("time")? {
            AMQPValue::Timestamp(t) => i64::try_from(*t).ok().map(|s| s * 1000),
            _ => None,
        }
    });
    let published_ms = d
        .properties
        .timestamp()
        .and_then(|t| i64::try_from(t).ok())
        .map(|s| s * 1000);
    Message {
        id: d
            .properties
            .message_id()
            .as_ref()
            .map_or_else(|| format!("#{}", d.delivery_tag), |m| m.as_str().to_owned()),
        native_class: headers.get("x-first-death-reason").cloned(),
        published_ms,
        dead_lettered_ms: death_time,
        // As the status door reads it: the DLQ's enqueue is not exposed, these come before.
        retained_since_ms: death_time.or(published_ms),
        headers: headers.into_iter().collect(),
        properties: properties(d),
        // The whole body: a declared envelope may point into it.
        body: d.data.clone(),
        body_len: d.data.len() as u64,
        ..Message::default()
    }
}

/// A delivery's AMQP properties and where it was published, by the names of
/// `spec::resolve::envelope::properties` (as the management API names them for status).
fn properties(d: &lapin::message::Delivery) -> Vec<(String, String)> {
    let p = &d.properties;
    let short = |v: &Option<ShortString>| v.as_ref().map(|s| s.as_str().to_owned());
    let mut out: Vec<(String, String)> = [
        ("app_id", short(p.app_id())),
        ("content_encoding", short(p.content_encoding())),
        ("content_type", short(p.content_type())),
        ("correlation_id", short(p.correlation_id())),
        ("message_id", short(p.message_id())),
        ("priority", p.priority().map(|n| n.to_string())),
        ("reply_to", short(p.reply_to())),
        ("timestamp", p.timestamp().map(|t| t.to_string())),
        ("type", short(p.kind())),
        ("user_id", short(p.user_id())),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_owned(), v?)))
    .collect();
    out.push(("routing_key".to_owned(), d.routing_key.as_str().to_owned()));
    out.push(("exchange".to_owned(), d.exchange.as_str().to_owned()));
    out
}

impl crate::backend::kit::doors::Connected for Mover {
    type Error = MoveError;

    fn target(&self) -> &str {
        Mover::target(self)
    }
}

impl crate::backend::kit::doors::Redrive for Mover {
    async fn redrive(&self, r: &Resolved, run: &Run) -> Result<(), MoveError> {
        Mover::redrive(self, r, run).await
    }

    async fn hold(
        &self,
        r: &Resolved,
        run: &Run,
    ) -> Result<crate::backend::kit::doors::Lease, MoveError> {
        Mover::hold(self, r, run).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(s: &str) -> AMQPValue {
        AMQPValue::LongString(lapin::types::LongString::from(s))
    }

    /// `--to failed-consumer`: after a retry loop (rejected from `o.process`, expired from
    /// `o.retry`), the queue is the one that rejected it, not the retry queue; no x-death:
    /// none.
    #[test]
    fn the_failed_queue_is_the_one_that_rejected_the_message() {
        let death = |queue: &str, reason: &str| {
            let mut t = FieldTable::default();
            t.insert("queue".into(), long(queue));
            t.insert("reason".into(), long(reason));
            AMQPValue::FieldTable(t)
        };
        let skip = |q: &str| q == "o.retry" || q == "o.dlq";
        let mut h = FieldTable::default();
        h.insert(
            "x-death".into(),
            AMQPValue::FieldArray(
                vec![death("o.retry", "expired"), death("o.process", "rejected")].into(),
            ),
        );
        assert_eq!(failed_queue_in(&h, skip).as_deref(), Some("o.process"));
        let mut h = FieldTable::default();
        h.insert(
            "x-death".into(),
            AMQPValue::FieldArray(
                vec![death("o.retry", "expired"), death("o.process", "maxlen")].into(),
            ),
        );
        assert_eq!(failed_queue_in(&h, skip).as_deref(), Some("o.process"));
        assert_eq!(failed_queue_in(&FieldTable::default(), skip), None);
    }

    #[test]
    fn the_copy_sheds_the_attempt_history_and_counts_the_redrive() {
        let mut h = FieldTable::default();
        h.insert("x-death".into(), AMQPValue::FieldArray(Default::default()));
        h.insert("x-first-death-reason".into(), long("rejected"));
        h.insert("dlq-error-class".into(), long("poison"));
        // Kept, the consumer would count its attempts as spent and dead-letter it at once.
        h.insert("dlq-attempts".into(), AMQPValue::LongLongInt(4));
        h.insert("dlq-redrive-count".into(), AMQPValue::LongInt(2));
        let out = moved_headers(Some(&h), &HeaderRules::default(), &Edit::default(), "");
        let names: Vec<&str> = out.inner().keys().map(ShortString::as_str).collect();
        assert_eq!(names, ["dlq-error-class", "dlq-redrive-count"]);
        assert_eq!(
            out.inner().get("dlq-redrive-count"),
            Some(&AMQPValue::LongLongInt(3))
        );
    }

    #[test]
    fn the_key_back_is_the_one_the_message_was_published_to_the_channels_exchange_with() {
        let death = |exchange: &str, key: &str| {
            let mut t = FieldTable::default();
            t.insert("exchange".into(), long(exchange));
            t.insert(
                "routing-keys".into(),
                AMQPValue::FieldArray(vec![long(key)].into()),
            );
            AMQPValue::FieldTable(t)
        };
        let mut h = FieldTable::default();
        // Most recent first: rejected from the main queue after a trip through the retry
        // queue (both reached through the default exchange), first published to `o.in`.
        h.insert(
            "x-death".into(),
            AMQPValue::FieldArray(
                vec![
                    death("", "o.main"),
                    death("", "o.retry"),
                    death("o.in", "orders.created"),
                ]
                .into(),
            ),
        );
        assert_eq!(published_key(&h, "o.in").as_deref(), Some("orders.created"));
        assert_eq!(published_key(&h, "o.other"), None);
        assert_eq!(published_key(&FieldTable::default(), "o.in"), None);
    }

    #[test]
    fn the_amqp_address_follows_the_management_url() {
        let t = |url: &str| Target {
            url: Some(url.into()),
            ..serde_json::from_value(serde_json::json!({"backend": "rabbitmq"})).expect("target")
        };
        assert_eq!(
            amqp_base(&t("http://127.0.0.1:15672")).map(|x| x.0),
            Ok("amqp://127.0.0.1:5672".into())
        );
        assert_eq!(
            amqp_base(&t("https://rabbit.internal:15671/")).map(|x| x.0),
            Ok("amqps://rabbit.internal:5671".into())
        );
    }
}
