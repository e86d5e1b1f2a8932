//! `redrive --from-archive` on Pub/Sub: archived messages published to the destination topic
//! (the main topic with `--to source`) with `topics.publish`, up to [`BATCH`] a request; a
//! message counts once the answer gives its message id.
//!
//! What goes back: the data, the attributes (without the `CloudPubSubDeadLetter*` ones
//! Pub/Sub added, with `dlq-redrive-count` one higher) and the ordering key. What cannot:
//! the `messageId` and `publishTime` (Pub/Sub gives the copy its own).

use std::sync::atomic::Ordering;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::read::Reader;
use super::*;
use crate::backend::kit::errors::MoveError;
use crate::backend::wire::http::WriteHttp;
use crate::redrive::Pace;
use crate::redrive::replay::Job;
use crate::spec::resolve::Resolved;
use crate::spec::resolve::headers::HeaderRules;
use crate::status::Message;

/// Messages per publish request (the API takes up to 1,000 and 10 MB).
const BATCH: usize = 100;

/// Publishes archived messages to one target's topics.
#[derive(Debug, Clone)]
pub struct Replayer {
    reader: Reader,
    http: WriteHttp,
}

impl Replayer {
    pub fn new(reader: Reader) -> Self {
        let http = reader.http.clone().into_writer();
        Replayer { reader, http }
    }

    pub async fn replay(&self, r: &Resolved, job: &Job) -> Result<(), MoveError> {
        let dest = if job.to.source { &r.main } else { &job.to.name };
        let Some(found) = self
            .reader
            .get_json(Kind::Topic, dest)
            .await
            .map_err(MoveError::of)?
        else {
            return Err(MoveError(format!(
                "the destination topic `{dest}` does not exist; nothing was published"
            )));
        };
        job.check_owned(super::redrive::not_dlqctls(&found))
            .map_err(MoveError)?;
        let topic = self.reader.path(Kind::Topic, dest);
        let mut pace = Pace::new(job.rate);
        let mut at = 0;
        loop {
            let n = job.take(&mut pace, at, BATCH).await;
            if n == 0 {
                return Ok(());
            }
            let batch = &job.messages[at..at + n];
            let published = self
                .http
                .call(
                    reqwest::Method::POST,
                    "POST topics/{topic}:publish",
                    &format!("{topic}:publish"),
                    Some(&json!({"messages": batch.iter().map(|m| copy(m, job.as_is, &r.headers)).collect::<Vec<_>>()})),
                )
                .await;
            let ids = published
                .as_ref()
                .ok()
                .and_then(|v| v.get("messageIds").and_then(Value::as_array))
                .map_or(0, Vec::len);
            if ids != n {
                // No answer, or not every id: each may or may not have landed.
                job.tally.duplicated.fetch_add(n as u64, Ordering::Relaxed);
                return Err(MoveError(format!(
                    "publishing {n} message(s) to topic {dest} was not confirmed ({}); {} were published before them, nothing after",
                    published.err().map_or_else(
                        || format!("{ids} message ids for {n} messages"),
                        |e| e.to_string()
                    ),
                    job.tally.moved()
                )));
            }
            job.tally.moved.fetch_add(n as u64, Ordering::Relaxed);
            job.tally.moved_ids(batch.iter().map(|m| m.id.clone()));
            at += n;
        }
    }
}

/// The message to publish for an archived one.
fn copy(m: &Message, as_is: bool, rules: &HeaderRules) -> Value {
    let attributes: Map<String, Value> =
        Job::headers_of(as_is, m, &["CloudPubSubDeadLetter*"], rules)
            .into_iter()
            .map(|(k, v)| (k, json!(v)))
            .collect();
    let mut out = Map::new();
    out.insert(
        "data".into(),
        json!(base64::engine::general_purpose::STANDARD.encode(&m.body)),
    );
    out.insert("attributes".into(), Value::Object(attributes));
    if let Some((_, k)) = m
        .properties
        .iter()
        .find(|(k, v)| k == "orderingKey" && !v.is_empty())
    {
        out.insert("orderingKey".into(), json!(k));
    }
    Value::Object(out)
}

impl crate::backend::kit::doors::Connected for Replayer {
    type Error = MoveError;

    fn target(&self) -> &str {
        self.reader.target()
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
    fn the_copy_has_the_data_attributes_and_ordering_key_without_pubsubs_own() {
        let m = Message {
            headers: vec![
                ("a".into(), "b".into()),
                ("CloudPubSubDeadLetterSourceSubscription".into(), "s".into()),
                ("dlq-redrive-count".into(), "1".into()),
            ],
            properties: vec![
                ("messageId".into(), "7".into()),
                ("orderingKey".into(), "acct-9".into()),
            ],
            body: b"hi".to_vec(),
            ..Message::default()
        };
        assert_eq!(
            copy(&m, false, &HeaderRules::default()),
            json!({"data": "aGk=", "attributes": {"a": "b", "dlq-redrive-count": "2"}, "orderingKey": "acct-9"})
        );
    }
}
