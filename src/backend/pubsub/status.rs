//! `dlqctl status` on Pub/Sub: the dead-letter subscription's messages, sampled by pull and
//! nack. What a read does to a message: a pull leases it, and the nack (modifyAckDeadline 0)
//! hands it straight back; the dead-letter subscription has no dead-letter policy of its own,
//! so the delivery it counts is harmless, and nothing is acknowledged (nothing consumed).
//! Only with `--peek` (the default; `--no-peek` reads no message).
//!
//! The depth: Pub/Sub's REST API has no backlog count (Cloud Monitoring's
//! `subscription/num_undelivered_messages` has it, and the emulator has no metrics), so with
//! `peek` the dead-letter subscription is counted by pulling, holding every lease until an
//! empty pull (or `--scan` messages), then nacking them all: exact when an empty pull ended
//! it, a lower bound (`lower_bound`) when `--scan` did. A count that dies part-way loses
//! nothing: the leases run out after the ack deadline and the messages are delivered again.
//! Without `peek` the depth is unknown, and said so.

use serde_json::{Value, json};

use super::read::Reader;
use super::*;
use crate::backend::wire::http::HttpError;
use crate::spec::resolve::Resolved;
use crate::status::{Depth, Message, Observed, QueueDepth, ReadOptions};

/// Pub/Sub's maximum for one pull.
const MAX_PULL: usize = 1000;

impl Reader {
    async fn observe(&self, r: &Resolved, read: ReadOptions) -> Result<Observed, HttpError> {
        let Some(p) = &r.pubsub else {
            return Ok(Observed::missing(Vec::new()));
        };
        let unknown = |exists: bool| Depth {
            exists,
            ..Depth::missing()
        };
        let main_exists = self
            .get_json(Kind::Subscription, &p.subscription)
            .await?
            .is_some();
        let others = vec![QueueDepth {
            name: p.subscription.clone(),
            role: "main",
            depth: unknown(main_exists),
        }];
        let dl = &p.dead_letter_subscription;
        let Some(sub) = self.get_json(Kind::Subscription, dl).await? else {
            return Ok(Observed::missing(others));
        };
        let mut notes = Vec::new();
        let mut messages = Vec::new();
        let mut depth = unknown(true);
        // Without `peek` (the exporter) the count is still made where it leaves no trace: a
        // nack on a subscription without a dead-letter policy spends nothing. The messages
        // read are then not kept (no sample, no class, no age).
        let traceless = sub.get("deadLetterPolicy").is_none_or(Value::is_null);
        let count_only = !read.peek && read.count_by_reading && traceless;
        if (read.peek || count_only) && read.scan > 0 {
            let (read_all, mut all) = self.sample(dl, read).await?;
            depth = Depth {
                lower_bound: !read_all,
                ..Depth::total(all.len() as u64, crate::status::Measure::Waiting)
            };
            notes.push(if read_all {
                format!(
                    "depth counted by pulling {dl} to an empty pull, every message nacked at once (it has no dead-letter policy of its own): nothing acknowledged"
                )
            } else {
                format!(
                    "depth at least {}: counted by pulling {dl} up to --scan, every message nacked at once: nothing acknowledged",
                    all.len()
                )
            });
            if count_only {
                notes.push("no message kept (--peek off): depth only".to_owned());
                all.clear();
            }
            messages = all;
        } else {
            notes.push(
                "Pub/Sub's REST API has no depth: see Cloud Monitoring's subscription/num_undelivered_messages (the emulator has none); with --peek it is counted by pulling"
                    .to_owned(),
            );
            notes.push("no message read (--no-peek)".to_owned());
        }
        Ok(Observed {
            dead_letter: depth,
            others,
            messages,
            head_first: false,
            metric_age_seconds: None,
            notes,
            flow: crate::status::Flow::default(),
        })
    }

    /// Pulls until a pull comes back empty or `scan` messages are held (every lease kept,
    /// so none is counted twice), then nacks every one it got, whatever happened to the
    /// rest; whether the empty pull ended it (every message was read), and the messages.
    async fn sample(
        &self,
        sub: &str,
        read: ReadOptions,
    ) -> Result<(bool, Vec<Message>), HttpError> {
        let path = self.path(Kind::Subscription, sub);
        let mut received: Vec<Value> = Vec::new();
        let mut read_all = false;
        let mut result = Ok(());
        // Bounded: each pull that returns something adds at least one, up to `scan`.
        while received.len() < read.scan {
            let want = (read.scan - received.len()).min(MAX_PULL);
            match self
                .http
                .peek(
                    "POST subscriptions/{subscription}:pull",
                    &format!("{path}:pull"),
                    &json!({"maxMessages": want, "returnImmediately": true}),
                )
                .await
            {
                Ok(pulled) => {
                    let got: Vec<Value> = pulled
                        .get("receivedMessages")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    if got.is_empty() {
                        read_all = true;
                        break;
                    }
                    received.extend(got);
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let ack_ids: Vec<&str> = received
            .iter()
            .filter_map(|m| m.get("ackId").and_then(Value::as_str))
            .collect();
        for chunk in ack_ids.chunks(MAX_PULL) {
            self.http
                .peek(
                    "POST subscriptions/{subscription}:modifyAckDeadline",
                    &format!("{path}:modifyAckDeadline"),
                    &json!({"ackIds": chunk, "ackDeadlineSeconds": 0}),
                )
                .await?;
        }
        result?;
        Ok((
            read_all,
            received.iter().map(|m| message(m, read.max_body)).collect(),
        ))
    }
}

/// One pulled message as status reads it: attributes as headers, the emulator's and Google's
/// dead-letter attributes as its source and attempts.
pub fn message(received: &Value, max_body: usize) -> Message {
    use base64::Engine;
    let m = received.get("message").unwrap_or(&Value::Null);
    let body = m
        .get("data")
        .and_then(Value::as_str)
        .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
        .unwrap_or_default();
    let headers: Vec<(String, String)> = m
        .get("attributes")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let header = |k: &str| headers.iter().find(|(h, _)| h == k).map(|(_, v)| v.clone());
    let ms = |t: &str| {
        time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
            .ok()
            .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
    };
    // On the dead-letter topic, publishTime is when Pub/Sub dead-lettered it; the source
    // topic's publish time is an attribute.
    let dead_lettered_ms = m.get("publishTime").and_then(Value::as_str).and_then(ms);
    let published_ms = header("CloudPubSubDeadLetterSourceTopicPublishTime")
        .as_deref()
        .and_then(ms)
        .or(dead_lettered_ms);
    let mut properties: Vec<(String, String)> = ["publishTime", "messageId", "orderingKey"]
        .iter()
        .filter_map(|k| {
            let v = m.get(*k)?.as_str()?;
            Some(((*k).to_owned(), v.to_owned()))
        })
        .collect();
    if let Some(n) = received.get("deliveryAttempt").and_then(Value::as_u64) {
        properties.push(("deliveryAttempt".to_owned(), n.to_string()));
    }
    Message {
        properties,
        id: m
            .get("messageId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        body_len: body.len() as u64,
        body: body.into_iter().take(max_body).collect(),
        published_ms,
        dead_lettered_ms,
        // messageRetentionDuration counts from the publish on the dead-letter topic.
        retained_since_ms: dead_lettered_ms,
        attempts: header("CloudPubSubDeadLetterSourceDeliveryCount").and_then(|n| n.parse().ok()),
        source: header("CloudPubSubDeadLetterSourceSubscription"),
        native_class: None,
        headers,
    }
}

impl crate::backend::kit::doors::Status for Reader {
    async fn status(
        &self,
        channels: &[&Resolved],
        read: ReadOptions,
    ) -> Result<Vec<Result<Observed, HttpError>>, HttpError> {
        let mut out = Vec::with_capacity(channels.len());
        for r in channels {
            out.push(self.observe(r, read).await);
        }
        Ok(out)
    }
}
