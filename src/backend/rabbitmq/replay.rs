//! `redrive --from-archive` on RabbitMQ: archived messages published over AMQP with the
//! `mandatory` flag and publisher confirms, up to [`BATCH`] before their confirms are
//! awaited; a message counts once the broker confirmed it (an unroutable one, returned, or
//! a refused one, nacked, stops the run). The destination is guarded as the mover's is: a
//! queue that would drop what it is given (a length cap with `drop-head`) or, for the main
//! queue when the spec gives it a dead-letter exchange, one without it now, is refused
//! before anything is published.
//!
//! Where it goes: `--to QUEUE` through the default exchange; the channel's main queue
//! through the channel's exchange with the key the message was first published with (from
//! its archived `x-death`), else the channel's first binding key, else the main queue's name
//! through the default exchange.
//!
//! What goes back: the body; the headers minus the attempt history (as the mover drops
//! it), with `dlq-redrive-count` one higher, each as a string (the archive keeps header
//! values as text: a number or a table comes back as its text); the properties `content_type`,
//! `content_encoding`, `correlation_id`, `message_id`, `priority`, `reply_to`, `timestamp`,
//! `type`, `app_id`, and `user_id` when it is the user the connection logs in as (the broker
//! refuses any other). Every copy is persistent (`delivery_mode` 2): the archive does not
//! keep the delivery mode. What cannot go back: `expiration`, `cluster_id` and the
//! delivery's exchange and routing key as the dead-letter queue had them.

use std::sync::atomic::Ordering;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Confirmation};

use super::read::Reader;
use super::redrive::{ATTEMPT_HISTORY, Mover, lost, with_heartbeat};
use crate::backend::kit::errors::{BackendError, MoveError};
use crate::backend::wire::http::seg;
use crate::redrive::replay::Job;
use crate::redrive::{self, Pace};
use crate::spec::model::Target;
use crate::spec::resolve::Resolved;
use crate::spec::resolve::headers::HeaderRules;
use crate::status::Message;
use crate::status::envelope::REDRIVE_COUNT;

/// Messages published before their confirms are awaited.
const BATCH: usize = 200;

/// Publishes archived messages to one target's queues.
#[derive(Debug, Clone)]
pub struct Replayer {
    /// The mover's connection settings and destination guard (it moves nothing here).
    mover: Mover,
    prefixes: Vec<String>,
    target: String,
}

impl Replayer {
    pub fn connect(reader: Reader, target: &Target) -> Result<Self, BackendError> {
        let name = reader.target().to_owned();
        let prefixes = reader.prefixes.clone();
        let mover = Mover::connect(reader, &name, target)?;
        Ok(Replayer {
            mover,
            prefixes,
            target: name,
        })
    }

    pub async fn replay(&self, r: &Resolved, job: &Job) -> Result<(), MoveError> {
        let vhost = r.rabbitmq.as_ref().map_or("/", |x| x.vhost.as_str());
        let into = if job.to.source { &r.main } else { &job.to.name };
        job.check_owned(redrive::outside_prefixes(&self.prefixes, into))
            .map_err(MoveError)?;
        // The main queue is asked for a dead-letter exchange only when the spec gives it
        // one: a `dlx: arguments` channel's main queue has none by design (its consumer
        // publishes failures to the retry queues), and a copy replayed there is as safe as
        // any message published to it (issue 52, second review F8).
        let dlx = job.to.source && super::desired::main_dead_letters(r);
        self.mover
            .guard(vhost, into, dlx)
            .await
            .map_err(|e| MoveError(format!("destination: {}; nothing was published", e.0)))?;
        let shown = &self.mover.shown;
        let fail = |what: &str, e: lapin::Error| {
            MoveError(format!("{what} ({shown} vhost {vhost}): {}", lost(&e)))
        };
        let uri = with_heartbeat(&format!("{}/{}", self.mover.amqp, seg(vhost)));
        tracing::info!(
            "AMQP connect to {} vhost {vhost}",
            crate::backend::wire::http::redact_userinfo(shown)
        );
        let conn = lapin::Connection::connect(&uri, lapin::ConnectionProperties::default())
            .await
            .map_err(|e| fail("AMQP connect", e))?;
        let ch = conn
            .create_channel()
            .await
            .map_err(|e| fail("AMQP channel", e))?;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| fail("confirm.select", e))?;
        let result = self.publish(r, job, &ch, &fail).await;
        let _ = ch.close(200, "replay done".into()).await;
        let _ = conn.close(200, "replay done".into()).await;
        result
    }

    async fn publish(
        &self,
        r: &Resolved,
        job: &Job,
        ch: &lapin::Channel,
        fail: &impl Fn(&str, lapin::Error) -> MoveError,
    ) -> Result<(), MoveError> {
        let mut pace = Pace::new(job.rate);
        let mut at = 0;
        loop {
            let n = job.take(&mut pace, at, BATCH).await;
            if n == 0 {
                return Ok(());
            }
            let batch = &job.messages[at..at + n];
            let mut pending = Vec::with_capacity(n);
            let mut result = Ok(());
            for m in batch {
                let (exchange, key) = route(r, job, m);
                let published = ch
                    .basic_publish(
                        exchange.as_str().into(),
                        key.as_str().into(),
                        BasicPublishOptions {
                            mandatory: true,
                            ..BasicPublishOptions::default()
                        },
                        &m.body,
                        properties(m, &self.mover.user, job.as_is, &r.headers),
                    )
                    .await;
                match published {
                    Ok(confirm) => pending.push((m, exchange, key, confirm)),
                    Err(e) => {
                        result = Err(fail(&format!("publish archived message {}", m.id), e));
                        break;
                    }
                }
            }
            let total = pending.len();
            for (i, (m, exchange, key, confirm)) in pending.into_iter().enumerate() {
                match confirm.await {
                    Ok(Confirmation::Ack(None)) => {
                        job.tally.moved.fetch_add(1, Ordering::Relaxed);
                        job.tally.moved_ids([m.id.clone()]);
                    }
                    Ok(Confirmation::Ack(Some(_))) if result.is_ok() => {
                        result = Err(MoveError(format!(
                            "the destination does not route archived message {} (exchange `{}`, routing key `{key}`): returned unroutable",
                            m.id,
                            if exchange.is_empty() {
                                "(default)"
                            } else {
                                exchange.as_str()
                            }
                        )));
                    }
                    Ok(Confirmation::Nack(_)) if result.is_ok() => {
                        result = Err(MoveError(format!(
                            "the broker refused archived message {} (a full queue with `overflow: reject-publish`?)",
                            m.id
                        )));
                    }
                    Ok(Confirmation::NotRequested) if result.is_ok() => {
                        result = Err(MoveError("the broker did not confirm the publish".into()));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        // The connection went before the answer: these may have landed.
                        job.tally
                            .duplicated
                            .fetch_add((total - i) as u64, Ordering::Relaxed);
                        if result.is_ok() {
                            result = Err(fail("publish confirm", e));
                        }
                        break;
                    }
                }
            }
            result?;
            at += n;
        }
    }
}

/// The exchange and routing key of one archived message (see the module doc).
fn route(r: &Resolved, job: &Job, m: &Message) -> (String, String) {
    if !job.to.source {
        return (String::new(), job.to.name.clone());
    }
    let Some(x) = r.rabbitmq.as_ref().and_then(|x| x.exchange.as_ref()) else {
        return (String::new(), r.main.clone());
    };
    let key = published_key(m, &x.name)
        .or_else(|| x.routing_keys.first().cloned())
        .unwrap_or_else(|| r.main.clone());
    (x.name.clone(), key)
}

/// `routing-keys[0]` of the most recent archived `x-death` entry (JSON text) whose message
/// had been published to `exchange`.
fn published_key(m: &Message, exchange: &str) -> Option<String> {
    let (_, text) = m.headers.iter().find(|(k, _)| k == "x-death")?;
    let deaths: serde_json::Value = serde_json::from_str(text).ok()?;
    deaths.as_array()?.iter().find_map(|d| {
        if d.get("exchange")?.as_str()? != exchange {
            return None;
        }
        Some(
            d.get("routing-keys")?
                .as_array()?
                .first()?
                .as_str()?
                .to_owned(),
        )
    })
}

/// The copy's AMQP properties from the archived ones (see the module doc).
fn properties(m: &Message, user: &str, as_is: bool, rules: &HeaderRules) -> BasicProperties {
    let get = |k: &str| {
        m.properties
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let short = |k: &str| get(k).map(ShortString::from);
    let mut p = BasicProperties::default().with_delivery_mode(2);
    if let Some(v) = short("content_type") {
        p = p.with_content_type(v);
    }
    if let Some(v) = short("content_encoding") {
        p = p.with_content_encoding(v);
    }
    if let Some(v) = short("correlation_id") {
        p = p.with_correlation_id(v);
    }
    if let Some(v) = short("message_id") {
        p = p.with_message_id(v);
    }
    if let Some(v) = get("priority").and_then(|v| v.parse::<u8>().ok()) {
        p = p.with_priority(v);
    }
    if let Some(v) = short("reply_to") {
        p = p.with_reply_to(v);
    }
    if let Some(v) = get("timestamp").and_then(|v| v.parse::<u64>().ok()) {
        p = p.with_timestamp(v);
    }
    if let Some(v) = short("type") {
        p = p.with_type(v);
    }
    if let Some(v) = short("app_id") {
        p = p.with_app_id(v);
    }
    if let Some(v) = get("user_id").filter(|u| *u == user) {
        p = p.with_user_id(ShortString::from(v));
    }
    let mut headers = FieldTable::default();
    for (k, v) in Job::headers_of(as_is, m, &ATTEMPT_HISTORY, rules) {
        let value = match (k == REDRIVE_COUNT, v.parse::<i64>()) {
            (true, Ok(n)) => AMQPValue::LongLongInt(n),
            _ => AMQPValue::LongString(LongString::from(v.into_bytes())),
        };
        headers.insert(ShortString::from(k), value);
    }
    p.with_headers(headers)
}

impl crate::backend::kit::doors::Connected for Replayer {
    type Error = MoveError;

    fn target(&self) -> &str {
        &self.target
    }
}

impl crate::backend::kit::doors::Replay for Replayer {
    async fn replay(&self, r: &Resolved, job: &Job) -> Result<(), MoveError> {
        Replayer::replay(self, r, job).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_keeps_its_properties_sheds_the_history_and_finds_its_first_key() {
        let m = Message {
            headers: vec![
                (
                    "x-death".into(),
                    r#"[{"exchange":"dlx","routing-keys":["q"]},{"exchange":"orders","routing-keys":["orders.created"]}]"#.into(),
                ),
                ("x-first-death-reason".into(), "rejected".into()),
                ("a".into(), "1".into()),
            ],
            properties: vec![
                ("content_type".into(), "application/json".into()),
                ("message_id".into(), "m-1".into()),
                ("timestamp".into(), "1764576000".into()),
                ("user_id".into(), "someone".into()),
                ("routing_key".into(), "orders.dlq".into()),
            ],
            ..Message::default()
        };
        assert_eq!(
            published_key(&m, "orders").as_deref(),
            Some("orders.created")
        );
        assert_eq!(published_key(&m, "other"), None);
        let p = properties(&m, "guest", false, &HeaderRules::default());
        assert_eq!(
            p.content_type().as_ref().map(|s| s.as_str()),
            Some("application/json")
        );
        assert_eq!(p.message_id().as_ref().map(|s| s.as_str()), Some("m-1"));
        assert_eq!(*p.timestamp(), Some(1_764_576_000));
        assert_eq!(*p.delivery_mode(), Some(2));
        assert!(p.user_id().is_none(), "another user's id is not sent");
        let h = p.headers().clone().unwrap_or_default();
        let names: Vec<&str> = h.inner().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["a", "dlq-redrive-count"]);
        assert_eq!(
            h.inner().get("dlq-redrive-count"),
            Some(&AMQPValue::LongLongInt(1))
        );
    }
}
