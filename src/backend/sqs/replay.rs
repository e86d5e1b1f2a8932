//! `redrive --from-archive` on SQS: archived messages sent to the destination queue (the
//! main queue with `--to source`) with SendMessageBatch, ten at most a request and at most
//! [`super::redrive::BATCH_BYTES`] of payload; a message counts once the answer lists it as
//! successful. A send is never retried blindly (a lost answer would send twice): a request
//! that got no answer counts its messages as possibly duplicated and stops the run.
//!
//! What goes back: the body and the message attributes, each as a `String` attribute
//! (`dlq-redrive-count`, one higher, as a `Number`): the archive keeps attribute values as
//! text, not their data types, so a `Number` attribute comes back as a `String` of the same
//! digits and a `Binary` one as the text `(binary) <hex>` the archive holds. On a FIFO queue
//! the copy keeps its `MessageGroupId` and its deduplication id is its original message id
//! (within SQS's five-minute window a second replay of it is dropped by SQS). What cannot
//! go back: the system attributes (`SentTimestamp`, `ApproximateReceiveCount`,
//! `DeadLetterQueueSourceArn`, …), which SQS sets itself, and the message id.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::Ordering;

use aws_sdk_sqs::types::{MessageAttributeValue, QueueAttributeName, SendMessageBatchRequestEntry};

use super::read::Reader;
use super::redrive::{by_size, not_dlqctls, payload, too_long};
use crate::backend::kit::errors::MoveError;
use crate::backend::wire::aws::classify;
use crate::redrive::Pace;
use crate::redrive::replay::Job;
use crate::spec::resolve::Resolved;
use crate::spec::resolve::headers::HeaderRules;
use crate::status::Message;
use crate::status::envelope::REDRIVE_COUNT;

/// Messages per SendMessageBatch (SQS's maximum).
const BATCH: usize = 10;

/// Publishes archived messages to one target's queues.
#[derive(Debug, Clone)]
pub struct Replayer {
    reader: Reader,
}

impl Replayer {
    pub fn new(reader: Reader) -> Self {
        Replayer { reader }
    }

    pub async fn replay(&self, r: &Resolved, job: &Job) -> Result<(), MoveError> {
        let dest = if job.to.source { &r.main } else { &job.to.name };
        if !job.to.source && !job.allow_unowned {
            let tags = self.reader.queue_tags(dest).await.map_err(MoveError::of)?;
            if let Some(tags) = tags {
                job.check_owned(not_dlqctls(&tags)).map_err(MoveError)?;
            }
        }
        let missing = || {
            MoveError(format!(
                "the destination queue `{dest}` does not exist; nothing was published"
            ))
        };
        let url = self
            .reader
            .url(dest)
            .await
            .map_err(MoveError::of)?
            .ok_or_else(missing)?;
        let attrs = self
            .reader
            .attributes(dest, &url, QueueAttributeName::FifoQueue)
            .await
            .map_err(MoveError::of)?
            .ok_or_else(missing)?;
        let fifo = attrs.get("FifoQueue").is_some_and(|v| v == "true");
        let mut pace = Pace::new(job.rate);
        let mut at = 0;
        loop {
            let n = job.take(&mut pace, at, BATCH).await;
            if n == 0 {
                return Ok(());
            }
            let batch = &job.messages[at..at + n];
            let entries: Vec<SendMessageBatchRequestEntry> = batch
                .iter()
                .enumerate()
                .map(|(i, m)| entry(i, m, fifo, job.as_is, &r.headers))
                .collect::<Result<_, _>>()?;
            self.send(dest, &url, batch, &entries, job).await?;
            at += n;
        }
    }

    /// Sends `entries` (of `batch`) in requests small enough, halving one SQS finds too
    /// long; counts what SQS accepted.
    async fn send(
        &self,
        dest: &str,
        url: &str,
        batch: &[Message],
        entries: &[SendMessageBatchRequestEntry],
        job: &Job,
    ) -> Result<(), MoveError> {
        let sizes: Vec<usize> = entries.iter().map(payload).collect();
        let mut todo: VecDeque<Vec<usize>> = by_size(&sizes).into();
        let clients = self.reader.aws.clients().await;
        for _ in 0..4 * entries.len() {
            let Some(part) = todo.pop_front() else {
                return Ok(());
            };
            let request: Vec<SendMessageBatchRequestEntry> =
                part.iter().map(|i| entries[*i].clone()).collect();
            let sent = match clients
                .sqs
                .send_message_batch()
                .queue_url(url)
                .set_entries(Some(request))
                .send()
                .await
            {
                Ok(s) => s,
                Err(e) if too_long(&e) && part.len() > 1 => {
                    let (a, b) = part.split_at(part.len() / 2);
                    todo.push_front(b.to_vec());
                    todo.push_front(a.to_vec());
                    continue;
                }
                Err(e) => {
                    // No answer may still mean sent: counted as possibly duplicated.
                    let unsure = e.as_service_error().is_none();
                    if unsure {
                        job.tally
                            .duplicated
                            .fetch_add(part.len() as u64, Ordering::Relaxed);
                    }
                    return Err(MoveError(format!(
                        "{}; {} message(s) of this request {}",
                        classify("sqs:SendMessageBatch", &format!("queue {dest}"), e),
                        part.len(),
                        if unsure {
                            "may or may not have been sent"
                        } else {
                            "were not sent"
                        }
                    )));
                }
            };
            let ok: BTreeSet<usize> = sent
                .successful()
                .iter()
                .filter_map(|s| s.id().parse().ok())
                .collect();
            job.tally
                .moved
                .fetch_add(ok.len() as u64, Ordering::Relaxed);
            job.tally.moved_ids(
                ok.iter()
                    .filter_map(|i| batch.get(*i))
                    .map(|m| m.id.clone()),
            );
            if let Some(f) = sent.failed().first() {
                let id = f
                    .id()
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| batch.get(i))
                    .map_or("?", |m| m.id.as_str());
                return Err(MoveError(format!(
                    "sqs:SendMessageBatch on queue {dest} refused archived message {id} ({}: {}); it was not sent",
                    f.code(),
                    f.message().unwrap_or_default()
                )));
            }
        }
        if todo.is_empty() {
            Ok(())
        } else {
            Err(MoveError(format!(
                "sqs:SendMessageBatch on queue {dest}: a message is longer than a request may be; it was not sent"
            )))
        }
    }
}

/// The SendMessageBatch entry of archived message `m`, `i`th of its request.
fn entry(
    i: usize,
    m: &Message,
    fifo: bool,
    as_is: bool,
    rules: &HeaderRules,
) -> Result<SendMessageBatchRequestEntry, MoveError> {
    let body = std::str::from_utf8(&m.body).map_err(|_| {
        MoveError(format!(
            "archived message {}: its body is not UTF-8, which an SQS message cannot carry",
            m.id
        ))
    })?;
    let mut attrs: HashMap<String, MessageAttributeValue> = HashMap::new();
    for (k, v) in Job::headers_of(as_is, m, &[], rules) {
        let kind = if k == REDRIVE_COUNT {
            "Number"
        } else {
            "String"
        };
        let value = MessageAttributeValue::builder()
            .data_type(kind)
            .string_value(v)
            .build()
            .map_err(MoveError::of)?;
        attrs.insert(k, value);
    }
    let mut e = SendMessageBatchRequestEntry::builder()
        .id(i.to_string())
        .message_body(body)
        .set_message_attributes(Some(attrs));
    if fifo {
        let group = m
            .properties
            .iter()
            .find(|(k, _)| k == "MessageGroupId")
            .map_or_else(|| "dlqctl-redrive".to_owned(), |(_, v)| v.clone());
        e = e.message_group_id(group).message_deduplication_id(&m.id);
    }
    e.build().map_err(MoveError::of)
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
    fn the_entry_carries_the_attributes_as_text_and_counts_the_redrive() {
        let m = Message {
            id: "m-1".into(),
            headers: vec![
                ("dlq-error-class".into(), "poison".into()),
                ("dlq-redrive-count".into(), "2".into()),
            ],
            properties: vec![("MessageGroupId".into(), "g".into())],
            body: b"x".to_vec(),
            ..Message::default()
        };
        let e = entry(3, &m, true, false, &HeaderRules::default()).expect("entry");
        assert_eq!(e.id(), "3");
        assert_eq!(e.message_group_id(), Some("g"));
        assert_eq!(e.message_deduplication_id(), Some("m-1"));
        let a = e.message_attributes().expect("attributes");
        assert_eq!(a["dlq-redrive-count"].string_value(), Some("3"));
        assert_eq!(a["dlq-redrive-count"].data_type(), "Number");
        assert_eq!(a["dlq-error-class"].data_type(), "String");
        let bad = Message {
            body: vec![0xff],
            ..m
        };
        assert!(entry(0, &bad, false, false, &HeaderRules::default()).is_err());
    }
}
