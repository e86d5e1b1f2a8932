//! `redrive --from-archive` on Kafka: archived records produced to the destination topic
//! (the main topic with `--to source`) through an idempotent producer with `acks=all`, up to
//! [`BATCH`] in flight; a record counts once its delivery is confirmed.
//!
//! What goes back: the value, the key (as the archive holds it: text), and the headers minus
//! Spring's exception and retry-topic headers (as the mover drops them), with
//! `dlq-redrive-count` one higher. Spring's numeric `kafka_dlt-original-*` headers, which the
//! archive holds as decimal text, go back as the big-endian integers Spring wrote. What
//! cannot: the partition and offset (the partitioner picks the partition by key; the broker
//! gives the offset), and the timestamp, which is the time of the replay (an old one could
//! put the copy past the topic's retention at once); a header or key that was not UTF-8 is
//! held by the archive as a hex summary and goes back as that text.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

use super::read::Reader;
use super::redrive::DROP;
use super::status::SPRING_NUMBERS;
use crate::backend::kit::errors::MoveError;
use crate::redrive::replay::Job;
use crate::redrive::{self, Pace};
use crate::spec::resolve::Resolved;
use crate::spec::resolve::headers::HeaderRules;
use crate::status::Message;

/// Records in flight before their deliveries are awaited.
const BATCH: usize = 500;

/// Produces archived records to one target's topics.
#[derive(Debug, Clone)]
pub struct Replayer {
    reader: Reader,
}

impl Replayer {
    pub fn new(reader: Reader) -> Self {
        Replayer { reader }
    }

    pub async fn replay(&self, r: &Resolved, job: &Job) -> Result<(), MoveError> {
        let dest = if job.to.source {
            r.main.clone()
        } else {
            job.to.name.clone()
        };
        job.check_owned(redrive::outside_prefixes(&self.reader.prefixes, &dest))
            .map_err(MoveError)?;
        let meta = self.reader.metadata().await.map_err(MoveError::of)?;
        if !meta.contains_key(&dest) {
            return Err(MoveError(format!(
                "the destination topic `{dest}` does not exist; nothing was published"
            )));
        }
        let mut config: ClientConfig = (*self.reader.config).clone();
        config
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "1")
            .set("message.timeout.ms", "30000");
        let producer: FutureProducer = config.create().map_err(MoveError::of)?;
        let drop: Vec<String> = DROP.iter().map(|d| format!("{d}*")).collect();
        let drop: Vec<&str> = drop.iter().map(String::as_str).collect();
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
                let headers = headers(m, &drop, job.as_is, &r.headers);
                let mut record = FutureRecord::to(&dest).headers(headers).payload(&m.body);
                let key = m.properties.iter().find(|(k, _)| k == "key");
                if let Some((_, k)) = key {
                    record = record.key(k.as_bytes());
                }
                match producer.send_result(record) {
                    Ok(delivery) => pending.push((m, delivery)),
                    Err((e, _)) => {
                        result = Err(MoveError(format!(
                            "producing archived record {} to `{dest}` ({e}); it was not sent",
                            m.id
                        )));
                        break;
                    }
                }
            }
            for (m, delivery) in pending {
                match tokio::time::timeout(Duration::from_secs(60), delivery).await {
                    Ok(Ok(Ok(_))) => {
                        job.tally.moved.fetch_add(1, Ordering::Relaxed);
                        job.tally.moved_ids([m.id.clone()]);
                    }
                    Ok(Ok(Err((e, _)))) => {
                        if result.is_ok() {
                            result = Err(MoveError(format!(
                                "the destination `{dest}` refused archived record {} ({e})",
                                m.id
                            )));
                        }
                    }
                    Ok(Err(_)) | Err(_) => {
                        job.tally.duplicated.fetch_add(1, Ordering::Relaxed);
                        if result.is_ok() {
                            result = Err(MoveError(format!(
                                "the delivery of archived record {} to `{dest}` was not confirmed; it may or may not be there",
                                m.id
                            )));
                        }
                    }
                }
            }
            result?;
            at += n;
        }
    }
}

/// The copy's headers: the archived ones minus `drop`, `dlq-redrive-count` + 1; Spring's
/// numeric headers as the integers Spring wrote.
fn headers(m: &Message, drop: &[&str], as_is: bool, rules: &HeaderRules) -> OwnedHeaders {
    let mut out = OwnedHeaders::new();
    for (k, v) in Job::headers_of(as_is, m, drop, rules) {
        let bytes = spring_number(&k, &v).unwrap_or_else(|| v.into_bytes());
        out = out.insert(Header {
            key: &k,
            value: Some(&bytes),
        });
    }
    out
}

/// Spring's `kafka_dlt-original-partition` (4 bytes) or `-offset`/`-timestamp` (8), as the
/// big-endian integer the archive's decimal text was read from.
fn spring_number(key: &str, text: &str) -> Option<Vec<u8>> {
    if !SPRING_NUMBERS.contains(&key) {
        return None;
    }
    if key.ends_with("-partition") {
        text.trim()
            .parse::<i32>()
            .ok()
            .map(|n| n.to_be_bytes().to_vec())
    } else {
        text.trim()
            .parse::<i64>()
            .ok()
            .map(|n| n.to_be_bytes().to_vec())
    }
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
    use rdkafka::message::Headers as _;

    #[test]
    fn the_copy_sheds_springs_exception_headers_and_restores_its_numbers() {
        let m = Message {
            headers: vec![
                ("a".into(), "1".into()),
                ("kafka_dlt-exception-message".into(), "boom".into()),
                ("kafka_dlt-original-partition".into(), "3".into()),
                ("kafka_dlt-original-offset".into(), "42".into()),
            ],
            ..Message::default()
        };
        let drop: Vec<String> = DROP.iter().map(|d| format!("{d}*")).collect();
        let drop: Vec<&str> = drop.iter().map(String::as_str).collect();
        let h = headers(&m, &drop, false, &HeaderRules::default());
        let got: Vec<(String, Vec<u8>)> = h
            .iter()
            .map(|x| (x.key.to_owned(), x.value.unwrap_or_default().to_vec()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".to_owned(), b"1".to_vec()),
                (
                    "kafka_dlt-original-partition".to_owned(),
                    3i32.to_be_bytes().to_vec()
                ),
                (
                    "kafka_dlt-original-offset".to_owned(),
                    42i64.to_be_bytes().to_vec()
                ),
                ("dlq-redrive-count".to_owned(), b"1".to_vec()),
            ]
        );
    }
}
