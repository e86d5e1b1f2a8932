//! Kafka apply: the only module that writes topics (CreateTopics, IncrementalAlterConfigs,
//! CreatePartitions, DeleteTopics), and only inside the ownership prefixes.

use rdkafka::admin::{AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::types::RDKafkaErrorCode;
use serde_json::Value;

use super::ffi::ConfigOp;
use super::read::Reader;
use super::*;
use crate::plan::{Action, Change};
use crate::resource::Desired;

/// Read-write access to one Kafka target, for apply.
#[derive(Debug, Clone)]
pub struct Writer {
    pub reader: Reader,
}

impl Writer {
    pub fn target(&self) -> &str {
        &self.reader.target
    }

    fn check_owned(&self, topic: &str) -> Result<(), KafkaError> {
        if self.reader.owned(topic) {
            return Ok(());
        }
        Err(KafkaError::NotOwned {
            topic: topic.to_owned(),
            prefixes: self.reader.prefixes.join(", "),
        })
    }

    fn options() -> AdminOptions {
        AdminOptions::new()
            .request_timeout(Some(TIMEOUT))
            .operation_timeout(Some(TIMEOUT))
    }

    /// Applies one change to one topic. A delete (only `plan --prune` plans one) drops a
    /// topic that holds records only with `allow_loss`; the count is read again first.
    pub async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), KafkaError> {
        let topic = change.resource.name.as_str();
        if change.action == Action::Impossible {
            return Ok(());
        }
        self.check_owned(topic)?;
        match change.action {
            Action::Create => self.create(change).await,
            Action::Update => {
                let steps = update_steps(change).map_err(|m| topic_error(topic, "update", m))?;
                for step in steps {
                    match step {
                        Step::AlterConfigs(ops) => self.alter_configs(topic, ops).await?,
                        Step::CreatePartitions(n) => self.create_partitions(topic, n).await?,
                    }
                }
                Ok(())
            }
            Action::Delete => self.delete(topic, allow_loss).await,
            Action::Replace | Action::Impossible => Err(topic_error(
                topic,
                "apply",
                "dlqctl does not re-create Kafka topics; delete it by hand if it must go",
            )),
        }
    }

    async fn delete(&self, topic: &str, allow_loss: bool) -> Result<(), KafkaError> {
        if !allow_loss {
            match self.reader.record_count(topic).await? {
                None => return Ok(()),
                Some(0) => {}
                Some(n) => {
                    return Err(topic_error(
                        topic,
                        "DeleteTopics",
                        format!(
                            "not deleted: it holds {n} records now; move them first, or pass --allow-message-loss"
                        ),
                    ));
                }
            }
        }
        self.reader.stats.count("kafka:DeleteTopics");
        let results = self
            .reader
            .admin
            .delete_topics(&[topic], &Self::options())
            .await
            .map_err(|e| topic_error(topic, "DeleteTopics", e))?;
        for r in results {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
                Err((name, code)) => return Err(topic_error(&name, "DeleteTopics", code)),
            }
        }
        Ok(())
    }

    async fn create(&self, change: &Change) -> Result<(), KafkaError> {
        let topic = change.resource.name.as_str();
        let number = |key: &str| {
            change
                .desired
                .get(key)
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
        };
        let (Some(partitions), Some(replication)) =
            (number("partitions"), number("replication.factor"))
        else {
            return Err(topic_error(
                topic,
                "CreateTopics",
                "the plan gives no partitions or replication factor",
            ));
        };
        let configs: Vec<(String, String)> = change
            .desired
            .iter()
            .filter(|(_, v)| !v.is_null())
            .filter_map(|(k, v)| {
                k.strip_prefix("config.")
                    .map(|k| (k.to_owned(), config_text(v)))
            })
            .collect();
        let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
        for (k, v) in &configs {
            new = new.set(k, v);
        }
        self.reader.stats.count("kafka:CreateTopics");
        let results = self
            .reader
            .admin
            .create_topics([&new], &Self::options())
            .await
            .map_err(|e| topic_error(topic, "CreateTopics", e))?;
        for r in results {
            match r {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                    return self.created_meanwhile(change).await;
                }
                Err((name, code)) => return Err(topic_error(&name, "CreateTopics", code)),
            }
        }
        Ok(())
    }

    /// A topic the plan would create exists: success if it already has the planned settings.
    async fn created_meanwhile(&self, change: &Change) -> Result<(), KafkaError> {
        let id = &change.resource;
        let live = self.reader.read(&[id]).await?;
        match crate::plan::diff(&as_desired(change), live.get(id)) {
            None => Ok(()),
            Some(c) => Err(topic_error(
                &id.name,
                "CreateTopics",
                format!(
                    "the topic was created by someone else since the plan, with other settings ({}); plan again",
                    c.fields
                        .iter()
                        .map(|f| f.key.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    async fn alter_configs(&self, topic: &str, ops: Vec<ConfigOp>) -> Result<(), KafkaError> {
        self.reader.stats.count("kafka:IncrementalAlterConfigs");
        let answers = ffi::incremental_alter_topic_configs(
            &self.reader.admin,
            &[(topic.to_owned(), ops)],
            TIMEOUT,
        )
        .await
        .map_err(|e| topic_error(topic, "IncrementalAlterConfigs", e.detail()))?;
        for (name, result) in answers {
            result.map_err(|e| topic_error(&name, "IncrementalAlterConfigs", e))?;
        }
        Ok(())
    }

    async fn create_partitions(&self, topic: &str, total: usize) -> Result<(), KafkaError> {
        self.reader.stats.count("kafka:CreatePartitions");
        let results = self
            .reader
            .admin
            .create_partitions([&NewPartitions::new(topic, total)], &Self::options())
            .await
            .map_err(|e| topic_error(topic, "CreatePartitions", e))?;
        for r in results {
            if let Err((name, code)) = r {
                return Err(topic_error(&name, "CreatePartitions", code));
            }
        }
        Ok(())
    }

    /// Waits until the brokers show every applied change (topic creation and config changes
    /// reach the other brokers asynchronously); returns the topics that did not settle in time.
    pub async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, KafkaError> {
        let deadline = tokio::time::Instant::now() + SETTLE;
        let mut pending: Vec<&Change> = applied
            .iter()
            .copied()
            .filter(|c| matches!(c.action, Action::Create | Action::Update | Action::Delete))
            .collect();
        while !pending.is_empty() {
            let ids: Vec<&ResourceId> = pending.iter().map(|c| &c.resource).collect();
            let live = self.reader.read(&ids).await?;
            pending.retain(|c| match c.action {
                Action::Delete => live.contains_key(&c.resource),
                _ => crate::plan::diff(&as_desired(c), live.get(&c.resource)).is_some(),
            });
            if pending.is_empty() || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(pending
            .into_iter()
            .map(|c| format!("topic {}", c.resource.name))
            .collect())
    }
}

/// The desired state a change was planned towards.
pub(super) fn as_desired(c: &Change) -> Desired {
    Desired {
        id: c.resource.clone(),
        channel: c.channel.clone(),
        role: c.role,
        props: c.desired.clone(),
        immutable: false,
        present: true,
    }
}
