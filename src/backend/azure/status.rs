//! Azure Service Bus status: the depth of each channel's dead letters from ARM's
//! `countDetails` (MessageCountDetails): a queue's (or a topic channel's subscription's)
//! `deadLetterMessageCount` is its built-in `$DeadLetterQueue`; a forward queue's
//! `activeMessageCount` is what waits there. Reading a count touches no message.
//!
//! Samples, ages and error classes come from reading the built-in subqueue through the data
//! plane (`data.rs`), only with `--peek` (the default; the exporter and `--no-peek` read no
//! message). What a read does to a message: Service Bus's REST API has no read without a
//! lock, so each message is peek-locked (held, so the next peek-lock gets the next one) and,
//! when the read ends, unlocked. Each message read has its DeliveryCount in
//! `$DeadLetterQueue` one higher afterwards; nothing is dead-lettered from the subqueue and
//! nothing is completed, so no message leaves it or moves. While the read holds them (at
//! most until the entity's lockDuration), no other receiver gets those messages. A read
//! killed part-way leaves its locks to run out.
//!
//! A forward queue (`deadLetter.name`) is an ordinary queue with a maxDeliveryCount of its
//! own: each lock would spend one of its deliveries and, at the last, dead-letter the
//! message into the forward queue's own subqueue. Its messages are not read; a note says so.
//!
//! The class is `DeadLetterReason` and the message `DeadLetterErrorDescription` (the
//! properties Service Bus, or the application that dead-lettered the message, adds), read
//! through the channel's envelope like every backend's; the age counts from
//! `EnqueuedTimeUtc`.

use serde_json::Value;

use super::data::Locked;
use super::read::Reader;
use crate::backend::kit::errors::{AtTarget, BackendError};
use crate::spec::resolve::Resolved;
use crate::status::{Depth, Measure, Message, Observed, QueueDepth, ReadOptions};

/// A count of `countDetails` as a depth of waiting messages.
fn depth(n: Option<u64>) -> Depth {
    Depth {
        total: n,
        ready: n,
        in_flight: None,
        delayed: None,
        measure: Measure::Waiting,
        exists: true,
        lower_bound: false,
        basis: None,
    }
}

fn count(v: &serde_json::Value, key: &str) -> Option<u64> {
    v["properties"]["countDetails"][key].as_u64()
}

/// An RFC 1123 time (`Wed, 02 Jul 2014 01:32:27 GMT`, as BrokerProperties writes them) in
/// milliseconds since the epoch.
pub fn http_time_ms(text: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(
        &text.replace(" GMT", " +0000"),
        &time::format_description::well_known::Rfc2822,
    )
    .ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// The name a message's content type is kept under among its properties.
pub const CONTENT_TYPE: &str = "ContentType";

/// A locked message as every backend hands it up: its custom properties as headers, its
/// BrokerProperties as properties, `DeadLetterReason` as the broker's class, the entity it
/// was dead-lettered in (`DeadLetterSource`, else `source`) as its source.
pub fn message(m: &Locked, source: &str) -> Message {
    let broker_text = |k: &str| {
        m.broker.get(k).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let header = |name: &str| {
        m.custom
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let enqueued = broker_text("EnqueuedTimeUtc").and_then(|t| http_time_ms(&t));
    Message {
        id: m.message_id(),
        headers: m.custom.clone(),
        // The content type travels as the HTTP Content-Type, not a BrokerProperty: kept
        // beside them as `ContentType` (what an archived copy is sent back with).
        properties: m
            .broker
            .keys()
            .filter(|k| *k != "LockToken")
            .filter_map(|k| broker_text(k).map(|v| (k.clone(), v)))
            .chain(
                m.content_type
                    .iter()
                    .map(|c| (CONTENT_TYPE.to_owned(), c.clone())),
            )
            .collect(),
        body: m.body.clone(),
        body_len: m.body.len() as u64,
        published_ms: enqueued,
        dead_lettered_ms: None,
        retained_since_ms: enqueued,
        attempts: None,
        source: broker_text("DeadLetterSource").or_else(|| Some(source.to_owned())),
        native_class: header("DeadLetterReason"),
    }
}

impl Reader {
    /// Peek-locks up to `scan` messages of `entity`, holding each, then unlocks them all.
    /// `true` with them when the entity ran out first (every message was read).
    async fn sample(
        &self,
        entity: &str,
        source: &str,
        scan: usize,
    ) -> Result<(bool, Vec<Message>), BackendError> {
        let mut held: Vec<Locked> = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        let mut read_all = false;
        let mut failed = None;
        while held.len() < scan {
            match self.data.peek_lock(entity).await {
                Ok(Some(m)) => {
                    let again = !seen.insert(m.sequence);
                    held.push(m);
                    // A lock that ran out while this read went on: it came round again.
                    if again {
                        break;
                    }
                }
                Ok(None) => {
                    read_all = true;
                    break;
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let unlocked = self.data.unlock_all(&held).await;
        if let Some(e) = failed.or(unlocked.err()) {
            return Err(e.at(&self.target));
        }
        let mut messages: Vec<Message> = Vec::with_capacity(held.len());
        let mut ids = std::collections::BTreeSet::new();
        for m in &held {
            if ids.insert(m.sequence) {
                messages.push(message(m, source));
            }
        }
        Ok((read_all, messages))
    }

    async fn observe(&self, r: &Resolved, read: ReadOptions) -> Result<Observed, BackendError> {
        let Some(a) = &r.azure else {
            return Ok(Observed::missing(Vec::new()));
        };
        // The entity that dead-letters: the queue, or the topic's subscription (its own
        // countDetails: Subscriptions_Get).
        let entity = match &a.subscription {
            None => super::queue_id(&self.target, &r.main),
            Some(s) => super::subscription_id(&self.target, &r.main, s),
        };
        let Some(main) = self.get_entity(&entity).await? else {
            return Ok(Observed::missing(Vec::new()));
        };
        let others = vec![QueueDepth {
            name: a.entity_path(&r.main),
            role: "main",
            depth: depth(count(&main, "activeMessageCount")),
        }];
        let dead_letter = match &a.forward_to {
            None => depth(count(&main, "deadLetterMessageCount")),
            Some(f) => match self.get_queue(f).await? {
                Some(q) => depth(count(&q, "activeMessageCount")),
                None => Depth::missing(),
            },
        };
        let mut observed = Observed::missing(others);
        let waiting = dead_letter.total.is_some_and(|n| n > 0);
        observed.dead_letter = dead_letter;
        if !waiting {
            return Ok(observed);
        }
        if let Some(f) = &a.forward_to {
            observed.notes.push(format!(
                "messages not read: `{f}` is an ordinary queue with a maxDeliveryCount of its own, and Service Bus's REST API reads only with a lock, which spends one of its deliveries (at the last, the message would be dead-lettered into `{f}/$DeadLetterQueue`)"
            ));
            return Ok(observed);
        }
        if !read.peek || read.scan == 0 {
            observed.notes.push("no message read (--no-peek)".into());
            return Ok(observed);
        }
        let (read_all, messages) = self
            .sample(&r.dead_letter, &a.entity_path(&r.main), read.scan)
            .await?;
        observed.notes.push(format!(
            "{} message(s) read from {} by peek-lock, then unlocked: each one's DeliveryCount there is one higher; nothing completed or dead-lettered{}",
            messages.len(),
            r.dead_letter,
            if read_all { "" } else { " (the read stopped at --scan)" }
        ));
        observed.head_first = true;
        observed.messages = messages;
        Ok(observed)
    }
}

impl crate::backend::kit::doors::Status for Reader {
    #[allow(clippy::type_complexity)]
    async fn status(
        &self,
        channels: &[&Resolved],
        read: ReadOptions,
    ) -> Result<Vec<Result<Observed, BackendError>>, BackendError> {
        let mut out = Vec::with_capacity(channels.len());
        for r in channels {
            out.push(self.observe(r, read).await);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_times_are_rfc_1123() {
        assert_eq!(
            http_time_ms("Wed, 02 Jul 2014 01:32:27 GMT"),
            Some(1_404_264_747_000)
        );
        assert_eq!(http_time_ms("yesterday"), None);
    }
}
