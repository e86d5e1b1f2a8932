//! RabbitMQ's mover: brings dead letters back over AMQP, at least once, never lost.
//!
//! The contract (docs/rabbitmq.md, "redrive"):
//! - the DLQ is consumed by one exclusive consumer (tag `dlqctl-redrive <holder>`) with manual
//!   acknowledgements: a second redrive of the same DLQ is refused by the broker, and told who
//!   holds it;
//! - a chosen message is published to the destination with the `mandatory` flag and publisher
//!   confirms, and acknowledged in the DLQ only after the broker confirmed it. An unroutable
//!   message (returned) or a refused one (nacked: a full queue with `reject-publish`) stops the
//!   run; that message and every one not yet acknowledged stay in the DLQ;
//! - a message not chosen (`--class`, `--older-than`, at `maxRedrives`) is held unacknowledged
//!   until the run ends, then handed back by closing the channel, at its place;
//! - the copy loses the attempt history (the broker's `x-death`, `x-first-death-*`,
//!   `x-last-death-*`, and the consumer's own `dlq-attempts`, which the consumer contract
//!   counts with first), so the consumer's attempts start again, and gains
//!   `dlq-redrive-count` + 1. Everything else (body, properties, other headers) is kept.
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

use super::read::Reader;
use crate::backend::wire::http::seg;
use crate::backend::{BackendError, MoveError, env_value};
use crate::redrive::{self, Decision, Run};
use crate::spec::model::Target;
use crate::spec::resolve::Resolved;
use crate::status::{Message, now_ms};

/// Chosen messages published before their confirms are awaited.
const BATCH: usize = 200;
/// Deliveries the consumer may hold beyond the non-chosen ones it keeps.
const WINDOW: u16 = 500;
/// How long a consumer waits for the next delivery before it calls the DLQ drained.
const IDLE: std::time::Duration = std::time::Duration::from_secs(2);
/// Headers the copy does not carry: the attempt history, the broker's and the consumer's
/// (docs/rabbitmq.md, consumer contract: `dlq-attempts` first, else `x-death`).
const ATTEMPT_HISTORY: [&str; 4] = [
    "x-death",
    "x-first-death-*",
    "x-last-death-*",
    crate::status::envelope::ATTEMPTS,
];
/// The consumer tag's prefix: how a second run recognises the first.
pub const TAG: &str = "dlqctl-redrive";

/// The writing capability for messages (not for topology): made only by `dlqctl redrive`.
#[derive(Debug, Clone)]
pub struct Mover {
    reader: Reader,
    /// AMQP URI with credentials, without a vhost (added per channel). Never printed.
    amqp: String,
    /// The same, without credentials, for messages.
    shown: String,
}

impl Mover {
    pub fn connect(reader: Reader, name: &str, target: &Target) -> Result<Self, BackendError> {
        let (base, shown) = amqp_base(target).map_err(|message| BackendError::Config {
            target: name.to_owned(),
            message,
        })?;
        let user = env_value(name, "usernameEnv", target.username_env.as_ref())?;
        let password = env_value(name, "passwordEnv", target.password_env.as_ref())?;
        let auth = match (user, password) {
            (Some(u), Some(p)) => {
                // As it appears in the AMQP URI, too (the raw value is registered already).
                crate::printer::never_show(&seg(&p));
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
        if let Some(holder) = holder(&q) {
            return Err(MoveError(format!(
                "queue `{dlq}` is being redriven already, by {holder}; wait for it to finish"
            )));
        }
        let (exchange, route) = self.destination(r, run, vhost).await?;
        let uri = format!("{}/{}", self.amqp, seg(vhost));
        let fail = |what: &str, e: lapin::Error| {
            MoveError(format!("{what} ({} vhost {vhost}): {e}", self.shown))
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
        let ch = conn
            .create_channel()
            .await
            .map_err(|e| fail("AMQP channel", e))?;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| fail("confirm.select", e))?;
        ch.basic_qos(WINDOW, BasicQosOptions::default())
            .await
            .map_err(|e| fail("basic.qos", e))?;
        let tag = format!("{TAG} {}", run.holder);
        // The exact count now (the management API's lags by seconds): this run examines
        // these, and leaves what arrives later for the next.
        let ready = match ch
            .queue_declare(
                dlq.as_str().into(),
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..lapin::options::QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
        {
            Ok(q) => u64::from(q.message_count()),
            Err(e) => return Err(fail(&format!("count `{dlq}`"), e)),
        };
        let consumed = ch
            .basic_consume(
                dlq.as_str().into(),
                tag.as_str().into(),
                BasicConsumeOptions {
                    exclusive: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await;
        let mut consumer = match consumed {
            Ok(c) => c,
            Err(e) => {
                let _ = conn.close(200, "redrive refused".into()).await;
                // Exclusive use is refused while any consumer reads the DLQ: say which (the
                // management API lists a new consumer within its statistics interval).
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
                return Err(match who {
                    Some(w) => MoveError(format!(
                        "queue `{dlq}` is in use by {w}; a redrive needs it to itself: wait, or stop them"
                    )),
                    None if refused => MoveError(format!(
                        "queue `{dlq}` is in exclusive use by another consumer (another redrive?); a redrive needs it to itself: wait, or stop it"
                    )),
                    None => fail(&format!("consume from `{dlq}`"), e),
                });
            }
        };
        let mut pace = redrive::Pace::new(run.rate);
        let mut held: u64 = 0;
        let mut result = Ok(());
        // Only the messages ready when the run started: what arrives later waits for the next.
        'run: while run
            .tally
            .examined
            .load(std::sync::atomic::Ordering::Relaxed)
            < ready
            && !run.done()
        {
            let mut batch: Vec<(lapin::message::Delivery, PublisherConfirm)> = Vec::new();
            while batch.len() < BATCH && !run.done() {
                let examined = run
                    .tally
                    .examined
                    .load(std::sync::atomic::Ordering::Relaxed);
                if examined >= ready {
                    break;
                }
                let wait = if batch.is_empty() {
                    IDLE
                } else {
                    std::time::Duration::from_millis(20)
                };
                let next = match tokio::time::timeout(wait, consumer.next()).await {
                    Err(_) if batch.is_empty() => break 'run,
                    Err(_) | Ok(None) => break,
                    Ok(Some(Err(e))) => {
                        result = Err(fail("delivery", e));
                        break 'run;
                    }
                    Ok(Some(Ok(d))) => d,
                };
                let m = message(&next);
                let d = redrive::decide(&run.select, &m, now_ms());
                run.tally.add(&d);
                if d != Decision::Move {
                    // Kept unacknowledged until the channel closes: back at its place then.
                    held += 1;
                    let window = u16::try_from(held).ok().and_then(|h| h.checked_add(WINDOW));
                    let Some(window) = window else {
                        result = Err(MoveError(format!(
                            "more than {} messages of `{dlq}` are not selected; stopping before holding more (select fewer, or move them in parts)",
                            u16::MAX - WINDOW
                        )));
                        break 'run;
                    };
                    if let Err(e) = ch.basic_qos(window, BasicQosOptions::default()).await {
                        result = Err(fail("basic.qos", e));
                        break;
                    }
                    continue;
                }
                // The selected count of this batch may not exceed the limit.
                if run
                    .select
                    .limit
                    .is_some_and(|l| run.tally.moved() + batch.len() as u64 >= l)
                {
                    // Handed back at close, like a message not chosen.
                    break;
                }
                pace.wait().await;
                let key = route.clone().unwrap_or_else(|| original_key(&next, r));
                let props = next
                    .properties
                    .clone()
                    .with_headers(moved_headers(next.properties.headers().as_ref()));
                let published = ch
                    .basic_publish(
                        exchange.as_str().into(),
                        key.as_str().into(),
                        BasicPublishOptions {
                            mandatory: true,
                            ..BasicPublishOptions::default()
                        },
                        &next.data,
                        props,
                    )
                    .await;
                match published {
                    Ok(confirm) => batch.push((next, confirm)),
                    Err(e) => {
                        // Not published: it stays in the DLQ; what this batch published is
                        // still confirmed and acknowledged below.
                        result = Err(fail("publish", e));
                        break;
                    }
                }
            }
            // Acknowledge in the DLQ only what the broker confirmed, in order; the first
            // refusal stops the run with that message and the rest unacknowledged.
            // A failure below stops acknowledging; a publish failure above does not: what was
            // published before it is confirmed (or not) and counted like any other.
            let mut refused = false;
            let mut confirmed = Vec::with_capacity(batch.len());
            for (delivery, confirm) in batch {
                if refused {
                    break;
                }
                match confirm.await {
                    Ok(Confirmation::Ack(None)) => confirmed.push(delivery),
                    Ok(Confirmation::Ack(Some(_))) => {
                        refused = true;
                        result = Err(MoveError(format!(
                            "the destination does not route the message (exchange `{}`, routing key `{key}`): returned unroutable; it stays in `{dlq}`",
                            if exchange.is_empty() {
                                "(default)"
                            } else {
                                exchange.as_str()
                            },
                            key = route.clone().unwrap_or_else(|| original_key(&delivery, r))
                        )));
                    }
                    Ok(Confirmation::Nack(_)) => {
                        refused = true;
                        result = Err(MoveError(format!(
                            "the broker refused the message for the destination (a full queue with `overflow: reject-publish`?); it stays in `{dlq}`"
                        )));
                    }
                    Ok(Confirmation::NotRequested) => {
                        refused = true;
                        result = Err(MoveError("the broker did not confirm the publish".into()));
                    }
                    Err(e) => {
                        refused = true;
                        result = Err(fail("publish confirm", e));
                    }
                }
            }
            // Acknowledge in the DLQ exactly what the broker confirmed (in order, up to the
            // first refusal). With nothing held back in this run, one `multiple` ack of the
            // last covers them all (every lower tag is one of them, or acknowledged already).
            let acks: Vec<&lapin::message::Delivery> = if held == 0 {
                confirmed.last().into_iter().collect()
            } else {
                confirmed.iter().collect()
            };
            let multiple = held == 0;
            let mut acked = 0u64;
            for d in acks {
                match d.acker.ack(BasicAckOptions { multiple }).await {
                    Ok(_) => {
                        acked = if multiple {
                            confirmed.len() as u64
                        } else {
                            acked + 1
                        }
                    }
                    Err(e) => {
                        result = Err(fail(
                            "ack in the dead-letter queue after the publish was confirmed (the message is in both queues)",
                            e,
                        ));
                        break;
                    }
                }
            }
            let ordering = std::sync::atomic::Ordering::Relaxed;
            run.tally.moved.fetch_add(acked, ordering);
            run.tally
                .duplicated
                .fetch_add(confirmed.len() as u64 - acked, ordering);
            if result.is_err() {
                break;
            }
        }
        let _ = ch
            .basic_cancel(tag.as_str().into(), BasicCancelOptions::default())
            .await;
        // Everything not acknowledged (held, or after a refusal) goes back to the DLQ here.
        let _ = ch.close(200, "redrive done".into()).await;
        // What is left, counted exactly (the management API's figure lags by seconds).
        if let Ok(c) = conn.create_channel().await {
            let passive = lapin::options::QueueDeclareOptions {
                passive: true,
                ..lapin::options::QueueDeclareOptions::default()
            };
            if let Ok(q) = c
                .queue_declare(dlq.as_str().into(), passive, FieldTable::default())
                .await
            {
                run.tally.left.store(
                    u64::from(q.message_count()),
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
            let _ = c.close(200, "counted".into()).await;
        }
        let _ = conn.close(200, "redrive done".into()).await;
        result
    }

    async fn queue(&self, vhost: &str, name: &str) -> Result<Value, MoveError> {
        let path = format!(
            "/api/queues/{}/{}?columns=name,type,messages_ready,arguments,effective_policy_definition,consumer_details",
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

    /// The exchange and fixed routing key to publish to (`None`: the message's own key).
    async fn destination(
        &self,
        r: &Resolved,
        run: &Run,
        vhost: &str,
    ) -> Result<(String, Option<String>), MoveError> {
        let name = if run.to.source { &r.main } else { &run.to.name };
        let q = self
            .queue(vhost, name)
            .await
            .map_err(|e| MoveError(format!("destination: {}", e.0)))?;
        if let Some(why) = drops_when_full(&q) {
            return Err(MoveError(format!(
                "not redriving into `{name}`: {why}; the broker would confirm each publish and push older messages out. Set `overflow: reject-publish` on it (a full queue then refuses, and the run stops with nothing lost), or remove the limit"
            )));
        }
        if !run.to.source {
            return Ok((String::new(), Some(run.to.name.clone())));
        }
        match r.rabbitmq.as_ref().and_then(|x| x.exchange.as_ref()) {
            Some(x) => Ok((x.name.clone(), None)),
            None => Ok((String::new(), Some(r.main.clone()))),
        }
    }
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

/// Why a queue would drop messages to take new ones (a length limit whose overflow is
/// `drop-head`, RabbitMQ's default), if it would.
fn drops_when_full(q: &Value) -> Option<String> {
    let setting = |arg: &str, policy: &str| super::status::setting(q, arg, policy);
    let limits: Vec<String> = [
        ("x-max-length", "max-length"),
        ("x-max-length-bytes", "max-length-bytes"),
    ]
    .iter()
    .filter_map(|(a, p)| setting(a, p).map(|v| format!("{p} {v}")))
    .collect();
    if limits.is_empty() {
        return None;
    }
    let overflow = setting("x-overflow", "overflow");
    let overflow = overflow
        .as_ref()
        .and_then(Value::as_str)
        .unwrap_or("drop-head");
    (!matches!(overflow, "reject-publish" | "reject-publish-dlx"))
        .then(|| format!("it has {} with overflow `{overflow}`", limits.join(" and ")))
}

/// The consumer that holds the DLQ for another redrive, if one does.
fn holder(q: &Value) -> Option<String> {
    q.get("consumer_details")?
        .as_array()?
        .iter()
        .filter_map(|c| c.get("consumer_tag").and_then(Value::as_str))
        .find(|t| t.starts_with(TAG))
        .map(|t| t.trim_start_matches(TAG).trim().to_owned())
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

/// The copy's headers: the broker's attempt history dropped, `dlq-redrive-count` + 1.
fn moved_headers(h: Option<&FieldTable>) -> FieldTable {
    let mut out = FieldTable::default();
    let mut count: i64 = 0;
    for (k, v) in h.map(|t| t.inner().iter()).into_iter().flatten() {
        let name = k.as_str();
        if name.eq_ignore_ascii_case(crate::status::envelope::REDRIVE_COUNT) {
            count = text(v).trim().parse().unwrap_or(0);
            continue;
        }
        let history = ATTEMPT_HISTORY.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name.eq_ignore_ascii_case(p),
        });
        if !history {
            out.insert(k.clone(), v.clone());
        }
    }
    out.insert(
        ShortString::from(crate::status::envelope::REDRIVE_COUNT),
        AMQPValue::LongLongInt(count + 1),
    );
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
    Message {
        id: d
            .properties
            .message_id()
            .as_ref()
            .map_or_else(|| format!("#{}", d.delivery_tag), |m| m.as_str().to_owned()),
        native_class: headers.get("x-first-death-reason").cloned(),
        published_ms: d
            .properties
            .timestamp()
            .and_then(|t| i64::try_from(t).ok())
            .map(|s| s * 1000),
        dead_lettered_ms: death_time,
        headers: headers.into_iter().collect(),
        body_len: d.data.len() as u64,
        ..Message::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(s: &str) -> AMQPValue {
        AMQPValue::LongString(lapin::types::LongString::from(s))
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
        let out = moved_headers(Some(&h));
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
    fn a_bounded_destination_must_refuse_rather_than_drop() {
        let q = |v: Value| drops_when_full(&v);
        assert_eq!(q(serde_json::json!({"arguments": {}})), None);
        assert!(
            q(serde_json::json!({"arguments": {"x-max-length": 2}}))
                .is_some_and(|w| w.contains("drop-head"))
        );
        assert_eq!(
            q(
                serde_json::json!({"arguments": {"x-max-length": 2, "x-overflow": "reject-publish"}})
            ),
            None
        );
        assert!(
            q(serde_json::json!({"arguments": {}, "effective_policy_definition": {"max-length-bytes": 10}}))
                .is_some()
        );
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
