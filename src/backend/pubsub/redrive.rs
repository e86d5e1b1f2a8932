//! `dlqctl redrive` on Pub/Sub: pull from the dead-letter subscription, publish each chosen
//! message to the destination topic (the main topic with `--to source`), and acknowledge it
//! on the dead-letter subscription only after the publish returned its message id: at least
//! once, never lost. A message the selection leaves, or one at `maxRedrives`, is nacked
//! (handed straight back; the dead-letter subscription has no dead-letter policy, so the
//! delivery it counts is harmless). A failed ack after a confirmed publish counts as possibly
//! duplicated.
//!
//! Pulls repeat until a pull returns no message this run has not seen (the ones it left are
//! handed back and come round again), `--limit` is reached, or a stop is asked for. The
//! emulator forwards nothing elsewhere, so these runs are live-tested there.
//!
//! The published copy carries the message's data, attributes and ordering key, without the
//! `CloudPubSubDeadLetter*` attributes Pub/Sub added and those `deadLetter.redrive` and the
//! default list shed, and with `dlq-redrive-count` one higher.
//! (A consumer with message ordering gets each key's copies in the order they were moved.)

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value, json};

use super::read::Reader;
use super::*;
use crate::backend::kit::errors::MoveError;
use crate::backend::wire::http::WriteHttp;
use crate::redrive::{Decision, Pace, Run, decide_copy, moved_headers};
use crate::spec::resolve::Resolved;
use crate::status::envelope;

/// Messages per pull.
const BATCH: usize = 100;
/// Pulls at most, whatever the server answers (1,000,000 messages at `BATCH`).
const MAX_PULLS: usize = 10_000;

/// Moves messages out of one target's dead-letter subscriptions.
#[derive(Debug, Clone)]
pub struct Mover {
    reader: Reader,
    http: WriteHttp,
}

impl Mover {
    pub fn new(reader: Reader) -> Self {
        let http = reader.http.clone().into_writer();
        Mover { reader, http }
    }

    pub fn target(&self) -> &str {
        self.reader.target()
    }

    async fn post(&self, api: &str, path: String, body: Value) -> Result<Value, MoveError> {
        self.http
            .call(reqwest::Method::POST, api, &path, Some(&body))
            .await
            .map_err(MoveError::of)
    }

    pub async fn redrive(&self, r: &Resolved, run: &Run) -> Result<(), MoveError> {
        let Some(p) = &r.pubsub else {
            return Err(MoveError(format!(
                "channel {} is not a Pub/Sub channel",
                r.channel
            )));
        };
        let sub = self
            .reader
            .path(Kind::Subscription, &p.dead_letter_subscription);
        let dest = if run.to.source { &r.main } else { &run.to.name };
        let topic = self.reader.path(Kind::Topic, dest);
        let Some(found) = self
            .reader
            .get_json(Kind::Topic, dest)
            .await
            .map_err(MoveError::of)?
        else {
            return Err(MoveError(format!(
                "the destination topic `{dest}` does not exist; nothing was moved"
            )));
        };
        run.check_owned(not_dlqctls(&found)).map_err(MoveError)?;
        if let Some(sink) = run.archive.as_deref() {
            // What a run pulls stays leased to it until the subscription's ack deadline
            // (10 s when unset): a killed archive run's messages are unseen that long.
            let deadline = self
                .reader
                .get_json(Kind::Subscription, &p.dead_letter_subscription)
                .await
                .ok()
                .flatten()
                .and_then(|s| s.get("ackDeadlineSeconds").and_then(Value::as_i64))
                .unwrap_or(10);
            sink.held_for(deadline.saturating_mul(1000));
        }
        let mut pace = Pace::new(run.rate);
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for _ in 0..MAX_PULLS {
            if run.done() {
                break;
            }
            let pulled = self
                .post(
                    "POST subscriptions/{subscription}:pull",
                    format!("{sub}:pull"),
                    json!({"maxMessages": BATCH, "returnImmediately": true}),
                )
                .await?;
            let received: Vec<Value> = pulled
                .get("receivedMessages")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut new = 0;
            let mut back: Vec<String> = Vec::new();
            // `dlqctl archive`: this pull's chosen messages, for the archive.
            let mut archived: Vec<(String, crate::status::Message)> = Vec::new();
            for rm in &received {
                let ack = rm.get("ackId").and_then(Value::as_str).unwrap_or_default();
                let m = super::status::message(rm, usize::MAX);
                if !seen.insert(m.id.clone()) || run.done() {
                    back.push(ack.to_owned());
                    continue;
                }
                new += 1;
                if let Some(key) = run.copies.ours_message(&m) {
                    // A copy this run published (in this batch or an earlier one), failed
                    // again and back: handed back, not moved a second time.
                    run.copies.came_back(key, &run.tally);
                    back.push(ack.to_owned());
                    continue;
                }
                let (d, edit) = decide_copy(&run.select, &m, crate::status::now_ms());
                run.tally.add(&d);
                if d != Decision::Move {
                    back.push(ack.to_owned());
                    continue;
                }
                // Interrupted during the wait: handed back, nothing published after it.
                if !pace.wait_or_stop(&run.stop).await {
                    back.push(ack.to_owned());
                    continue;
                }
                if run.archive.is_some() {
                    // Beyond --limit: handed back.
                    if run
                        .select
                        .limit
                        .is_some_and(|l| run.tally.moved() + archived.len() as u64 >= l)
                    {
                        back.push(ack.to_owned());
                        continue;
                    }
                    run.tally
                        .chose(m.id.clone(), crate::redrive::since(&run.select, &m));
                    archived.push((ack.to_owned(), m));
                    continue;
                }
                run.tally
                    .chose(m.id.clone(), crate::redrive::since(&run.select, &m));
                run.tally.edited(&m.id, &edit);
                let mut attributes = moved_headers(
                    &edit.headers(&m.headers),
                    &["CloudPubSubDeadLetter*"],
                    &r.headers,
                );
                attributes.push((envelope::REDRIVE_RUN.to_owned(), run.copies.next()));
                let attributes: Map<String, Value> =
                    attributes.into_iter().map(|(k, v)| (k, json!(v))).collect();
                let published = self
                    .post(
                        "POST topics/{topic}:publish",
                        format!("{topic}:publish"),
                        json!({"messages": [copy(&rm["message"], attributes, edit.body.as_deref())]}),
                    )
                    .await;
                let confirmed = published.as_ref().is_ok_and(|v| {
                    v.get("messageIds")
                        .and_then(Value::as_array)
                        .is_some_and(|ids| !ids.is_empty())
                });
                if !confirmed {
                    // Not confirmed: the message stays in the dead-letter subscription.
                    self.nack(&sub, &[ack.to_owned()]).await?;
                    return Err(MoveError(format!(
                        "publishing message {} to topic {dest} was not confirmed ({}); it stays in {}, and {} moved before it",
                        m.id,
                        published
                            .err()
                            .map_or_else(|| "no message id".to_owned(), |e| e.0),
                        p.dead_letter_subscription,
                        run.tally.moved()
                    )));
                }
                match self
                    .post(
                        "POST subscriptions/{subscription}:acknowledge",
                        format!("{sub}:acknowledge"),
                        json!({"ackIds": [ack]}),
                    )
                    .await
                {
                    Ok(_) => {
                        run.tally.moved.fetch_add(1, Ordering::Relaxed);
                        run.tally.moved_body(edit.body(&m.body));
                        run.tally.moved_ids([m.id.clone()]);
                    }
                    Err(e) => {
                        run.tally.duplicated.fetch_add(1, Ordering::Relaxed);
                        return Err(MoveError(format!(
                            "message {} was published to {dest} but could not be acknowledged in {} ({e}): it may be delivered twice",
                            m.id, p.dead_letter_subscription
                        )));
                    }
                }
            }
            if let Some(sink) = run.archive.as_deref()
                && !archived.is_empty()
            {
                let messages: Vec<_> = archived.iter().map(|(_, m)| m.clone()).collect();
                let acks: Vec<String> = archived.iter().map(|(a, _)| a.clone()).collect();
                if let Err(e) = sink.put(&messages).await {
                    back.extend(acks);
                    self.nack(&sub, &back).await?;
                    return Err(MoveError(format!(
                        "{e}; nothing of this pull left {}",
                        p.dead_letter_subscription
                    )));
                }
                let n = messages.len() as u64;
                run.tally.moved.fetch_add(n, Ordering::Relaxed);
                run.tally.moved_ids(messages.iter().map(|m| m.id.clone()));
                if !sink.delete {
                    back.extend(acks);
                } else if let Err(e) = self
                    .post(
                        "POST subscriptions/{subscription}:acknowledge",
                        format!("{sub}:acknowledge"),
                        json!({"ackIds": acks}),
                    )
                    .await
                {
                    run.tally.duplicated.fetch_add(n, Ordering::Relaxed);
                    self.nack(&sub, &back).await?;
                    return Err(MoveError(format!(
                        "{n} archived message(s) could not be acknowledged in {} ({e}): they are in the archive and may stay in the subscription",
                        p.dead_letter_subscription
                    )));
                }
            }
            self.nack(&sub, &back).await?;
            if new == 0 {
                break;
            }
        }
        Ok(())
    }

    /// Hands messages straight back (modifyAckDeadline 0).
    async fn nack(&self, sub: &str, acks: &[String]) -> Result<(), MoveError> {
        if acks.is_empty() {
            return Ok(());
        }
        self.post(
            "POST subscriptions/{subscription}:modifyAckDeadline",
            format!("{sub}:modifyAckDeadline"),
            json!({"ackIds": acks, "ackDeadlineSeconds": 0}),
        )
        .await
        .map(|_| ())
    }
}

/// The message to publish for a pulled `message`: its data and ordering key, with
/// `attributes` (already without Pub/Sub's dead-letter ones).
fn copy(message: &Value, attributes: Map<String, Value>, body: Option<&[u8]>) -> Value {
    use base64::Engine as _;
    let mut out = Map::new();
    out.insert(
        "data".into(),
        match body {
            // `--transform` made a new body.
            Some(b) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
            None => message.get("data").cloned().unwrap_or(json!("")),
        },
    );
    out.insert("attributes".into(), Value::Object(attributes));
    if let Some(k) = message
        .get("orderingKey")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
    {
        out.insert("orderingKey".into(), json!(k));
    }
    Value::Object(out)
}

/// Why a topic is not dlqctl's (not labelled `managed-by: dlqctl` with a channel), if it is
/// not: a `--to` must be owned.
pub(super) fn not_dlqctls(topic: &Value) -> Option<String> {
    let label = |k: &str| {
        topic
            .get("labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
    };
    match (label(super::LABEL_MANAGED_BY), label(super::LABEL_CHANNEL)) {
        (Some(super::LABEL_MANAGED_BY_VALUE), Some(c)) if !c.is_empty() => None,
        (Some(super::LABEL_MANAGED_BY_VALUE), _) => {
            Some(format!("the topic has no `{}` label", super::LABEL_CHANNEL))
        }
        _ => Some(format!(
            "the topic is not labelled `{}: {}`",
            super::LABEL_MANAGED_BY,
            super::LABEL_MANAGED_BY_VALUE
        )),
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_keeps_data_attributes_and_the_ordering_key() {
        let m = json!({"data": "aGk=", "messageId": "7", "orderingKey": "acct-9", "attributes": {"a": "b"}});
        let mut attrs = Map::new();
        attrs.insert("a".into(), json!("b"));
        assert_eq!(
            copy(&m, attrs.clone(), None),
            json!({"data": "aGk=", "attributes": {"a": "b"}, "orderingKey": "acct-9"})
        );
        // No key (or an empty one, as the API writes "none"): none sent.
        let m = json!({"data": "aGk=", "orderingKey": ""});
        assert_eq!(
            copy(&m, attrs, None),
            json!({"data": "aGk=", "attributes": {"a": "b"}})
        );
    }
}
