//! Kafka apply: the only module that writes topics (CreateTopics, IncrementalAlterConfigs,
//! CreatePartitions, DeleteTopics) and their ACL bindings (CreateAcls, DeleteAcls), and only
//! inside the ownership prefixes; share groups' dead-letter configs ([`super::share`]); and the
//! one Connect write (`PUT /connectors/{name}/config`, [`super::connect`]).

use rdkafka::admin::{AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::types::RDKafkaErrorCode;
use std::collections::BTreeMap;

use serde_json::Value;

use std::sync::Arc;

use super::ffi::{ConfigOp, Grant};
use super::plan::{Step, update_steps};
use super::read::Reader;
use super::*;
use crate::plan::{Action, Change};
use crate::resource::Desired;

/// Read-write access to one Kafka target, for apply.
#[derive(Debug, Clone)]
pub struct Writer {
    pub reader: Reader,
    /// Whether the cluster can keep the bindings dlqctl owns (see
    /// [`acl_support`](Self::acl_support)), asked once per apply.
    pub(super) acl_support: std::sync::Arc<tokio::sync::OnceCell<Result<(), String>>>,
}

/// Why the cluster gets no ACL writes, from what the support probe's DeleteAcls answered.
fn probe_refusal(code: Option<RDKafkaErrorCode>, detail: &str) -> String {
    if code == Some(RDKafkaErrorCode::SecurityDisabled) {
        return "the cluster has no authorizer (SECURITY_DISABLED), so it keeps no ACLs; remove `kafka.acls` or enable an authorizer".to_owned();
    }
    format!(
        "the cluster cannot delete ACL bindings ({detail}), so dlqctl creates none it could not remove later"
    )
}

/// The binding the ACL support probe's DeleteAcls filter names: nobody makes it, so the
/// filter matches nothing.
const PROBE: &str = "__dlqctl_acl_probe";

impl Writer {
    pub fn target(&self) -> &str {
        &self.reader.target
    }

    /// A connector's planned error-handling keys, through the worker ([`super::connect`]).
    async fn apply_connector(&self, change: &Change) -> Result<(), KafkaError> {
        let Some(client) = &self.reader.connect else {
            return Err(KafkaError::NoConnectUrl {
                target: self.reader.target.clone(),
                connector: change.resource.name.clone(),
            });
        };
        client.clone().into_writer().apply(change).await
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

    /// Applies one change to one topic: [`apply_many`](Self::apply_many) with one change. A
    /// delete (only `plan --prune` plans one) drops a topic that holds records only with
    /// `allow_loss`; the count is read again first.
    pub async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), KafkaError> {
        self.apply_many(&[change], allow_loss)
            .await
            .pop()
            .unwrap_or(Ok(()))
    }

    /// A change that never shares a request: a delete, or a replace (refused).
    async fn apply_alone(&self, change: &Change, allow_loss: bool) -> Result<(), KafkaError> {
        let topic = change.resource.name.as_str();
        match change.action {
            Action::Delete => self.delete(topic, allow_loss).await,
            _ => Err(topic_error(
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

    /// Creates every topic of `changes` with one CreateTopics request; one result per change,
    /// in order. A topic someone else created meanwhile is a success only with the planned
    /// settings.
    async fn create_many(&self, changes: &[&Change]) -> Vec<Result<(), KafkaError>> {
        let specs: Vec<Result<TopicSpec, KafkaError>> =
            changes.iter().map(|c| TopicSpec::of(c)).collect();
        let news: Vec<NewTopic<'_>> = specs.iter().flatten().map(TopicSpec::new_topic).collect();
        let mut answers: BTreeMap<String, Result<(), RDKafkaErrorCode>> = BTreeMap::new();
        if !news.is_empty() {
            self.reader.stats.count("kafka:CreateTopics");
            match self
                .reader
                .admin
                .create_topics(news.iter(), &Self::options())
                .await
            {
                Ok(results) => {
                    for r in results {
                        match r {
                            Ok(name) => answers.insert(name, Ok(())),
                            Err((name, code)) => answers.insert(name, Err(code)),
                        };
                    }
                }
                Err(e) => {
                    let e = e.to_string();
                    return changes
                        .iter()
                        .map(|c| Err(topic_error(&c.resource.name, "CreateTopics", &e)))
                        .collect();
                }
            }
        }
        let mut out = Vec::with_capacity(changes.len());
        for (c, spec) in changes.iter().zip(specs) {
            let topic = c.resource.name.as_str();
            out.push(match (spec, answers.remove(topic)) {
                (Err(e), _) => Err(e),
                (Ok(_), Some(Ok(()))) => Ok(()),
                (Ok(_), Some(Err(RDKafkaErrorCode::TopicAlreadyExists))) => {
                    self.created_meanwhile(c).await
                }
                (Ok(_), Some(Err(code))) => Err(topic_error(topic, "CreateTopics", code)),
                (Ok(_), None) => Err(topic_error(
                    topic,
                    "CreateTopics",
                    "the broker's answer does not name this topic",
                )),
            });
        }
        out
    }

    /// Applies several changes with as few requests as the protocol allows: every create in
    /// one CreateTopics, every config change in one IncrementalAlterConfigs, then every
    /// partition growth in one CreatePartitions (a topic whose configs failed grows no
    /// partitions); deletes one at a time, each re-counting its records. One result per
    /// change, in order; each change succeeds or fails on its own.
    pub async fn apply_many(
        &self,
        changes: &[&Change],
        allow_loss: bool,
    ) -> Vec<Result<(), KafkaError>> {
        let mut out: Vec<Option<Result<(), KafkaError>>> = changes.iter().map(|_| None).collect();
        let mut creates: Vec<usize> = Vec::new();
        let mut alters: Vec<(usize, Vec<ConfigOp>)> = Vec::new();
        let mut grows: Vec<(usize, usize)> = Vec::new();
        let mut grants: Vec<(usize, Grant)> = Vec::new();
        let mut revokes: Vec<(usize, Grant)> = Vec::new();
        let mut groups: Vec<usize> = Vec::new();
        for (i, c) in changes.iter().enumerate() {
            let topic = c.resource.name.as_str();
            if c.action == Action::Impossible {
                out[i] = Some(Ok(()));
                continue;
            }
            if c.resource.kind == Kind::ShareGroup {
                groups.push(i);
                continue;
            }
            if c.resource.kind == Kind::Connector {
                out[i] = Some(self.apply_connector(c).await);
                continue;
            }
            if c.resource.kind == Kind::Acl {
                match self.acl_step(c) {
                    Ok((Action::Delete, g)) => revokes.push((i, g)),
                    Ok((_, g)) => grants.push((i, g)),
                    Err(e) => out[i] = Some(Err(e)),
                }
                continue;
            }
            if let Err(e) = self.check_owned(topic) {
                out[i] = Some(Err(e));
                continue;
            }
            match c.action {
                Action::Create => creates.push(i),
                Action::Update => match update_steps(c) {
                    Ok(steps) => {
                        for step in steps {
                            match step {
                                Step::AlterConfigs(ops) => alters.push((i, ops)),
                                Step::CreatePartitions(n) => grows.push((i, n)),
                            }
                        }
                        out[i] = Some(Ok(()));
                    }
                    Err(m) => out[i] = Some(Err(topic_error(topic, "update", m))),
                },
                _ => out[i] = Some(self.apply_alone(c, allow_loss).await),
            }
        }
        let batch: Vec<&Change> = creates.iter().map(|i| changes[*i]).collect();
        for (i, r) in creates.iter().zip(self.create_many(&batch).await) {
            out[*i] = Some(r);
        }
        if !alters.is_empty() {
            let request: Vec<(String, Vec<ConfigOp>)> = alters
                .iter()
                .map(|(i, ops)| (changes[*i].resource.name.clone(), ops.clone()))
                .collect();
            self.reader.stats.count("kafka:IncrementalAlterConfigs");
            match ffi::incremental_alter_topic_configs(&self.reader.admin, &request, TIMEOUT).await
            {
                Ok(answers) => {
                    let answers: BTreeMap<String, _> = answers.into_iter().collect();
                    for (i, _) in &alters {
                        let topic = &changes[*i].resource.name;
                        match answers.get(topic) {
                            Some(Ok(())) => {}
                            Some(Err(e)) => {
                                out[*i] =
                                    Some(Err(topic_error(topic, "IncrementalAlterConfigs", e)))
                            }
                            None => {
                                out[*i] = Some(Err(topic_error(
                                    topic,
                                    "IncrementalAlterConfigs",
                                    "the broker's answer does not name this topic",
                                )))
                            }
                        }
                    }
                }
                Err(e) => {
                    for (i, _) in &alters {
                        let topic = &changes[*i].resource.name;
                        out[*i] = Some(Err(topic_error(
                            topic,
                            "IncrementalAlterConfigs",
                            e.detail(),
                        )));
                    }
                }
            }
        }
        if !groups.is_empty() {
            let batch: Vec<&Change> = groups.iter().map(|i| changes[*i]).collect();
            self.reader
                .stats
                .count("kafka:IncrementalAlterConfigs(group)");
            let answers = super::share::alter_groups(&self.reader.admin, &batch).await;
            for (i, r) in groups.iter().zip(answers) {
                out[*i] = Some(r);
            }
        }
        grows.retain(|(i, _)| matches!(out[*i], Some(Ok(()))));
        if !grows.is_empty() {
            let news: Vec<NewPartitions<'_>> = grows
                .iter()
                .map(|(i, n)| NewPartitions::new(&changes[*i].resource.name, *n))
                .collect();
            self.reader.stats.count("kafka:CreatePartitions");
            let answers = self
                .reader
                .admin
                .create_partitions(news.iter(), &Self::options())
                .await;
            let answers: Result<BTreeMap<String, Option<RDKafkaErrorCode>>, String> = answers
                .map(|rs| {
                    rs.into_iter()
                        .map(|r| match r {
                            Ok(name) => (name, None),
                            Err((name, code)) => (name, Some(code)),
                        })
                        .collect()
                })
                .map_err(|e| e.to_string());
            for (i, _) in &grows {
                let topic = &changes[*i].resource.name;
                let failed = match &answers {
                    Ok(a) => match a.get(topic) {
                        Some(None) => None,
                        Some(Some(code)) => Some(code.to_string()),
                        None => Some("the broker's answer does not name this topic".to_owned()),
                    },
                    Err(e) => Some(e.clone()),
                };
                if let Some(m) = failed {
                    out[*i] = Some(Err(topic_error(topic, "CreatePartitions", m)));
                }
            }
        }
        for (api, batch) in [("CreateAcls", grants), ("DeleteAcls", revokes)] {
            if batch.is_empty() {
                continue;
            }
            if let Err(message) = self.acl_support().await {
                for (i, _) in &batch {
                    out[*i] = Some(Err(KafkaError::Acl {
                        binding: changes[*i].resource.name.clone(),
                        api,
                        message: message.clone(),
                    }));
                }
                continue;
            }
            let request: Vec<Grant> = batch.iter().map(|(_, g)| g.clone()).collect();
            self.reader.stats.count(if api == "CreateAcls" {
                "kafka:CreateAcls"
            } else {
                "kafka:DeleteAcls"
            });
            let answers: Result<Vec<Result<usize, ffi::AclError>>, _> = if api == "CreateAcls" {
                ffi::create_acls(&self.reader.admin, request, TIMEOUT)
                    .await
                    .map(|a| a.into_iter().map(|r| r.map(|()| 1)).collect())
            } else {
                ffi::delete_acls(&self.reader.admin, request, TIMEOUT).await
            };
            for (n, (i, _)) in batch.iter().enumerate() {
                let failed = match &answers {
                    // A filter that matched nothing: the binding is gone already.
                    Ok(a) => a[n].as_ref().err().map(ToString::to_string),
                    Err(e) => Some(e.detail()),
                };
                out[*i] = Some(match failed {
                    None => Ok(()),
                    Some(message) => Err(KafkaError::Acl {
                        binding: changes[*i].resource.name.clone(),
                        api,
                        message,
                    }),
                });
            }
        }
        out.into_iter().map(|r| r.unwrap_or(Ok(()))).collect()
    }

    /// Whether the cluster can keep the bindings dlqctl owns: it must answer DeleteAcls, or
    /// a binding could be created and never removed. Asked once, before the first ACL write,
    /// with a DeleteAcls whose filter matches nothing ([`PROBE`]). It also keeps dlqctl from
    /// sending CreateAcls to a broker that advertises it without answering it in full: tansu
    /// 0.6.0 answers CreateAcls without its results, and librdkafka 2.12 then aborts the
    /// process (`rd_kafka_admin_response_parse: Assertion rko_result failed`, measured).
    async fn acl_support(&self) -> Result<(), String> {
        self.acl_support
            .get_or_init(|| async {
                let probe = Grant {
                    topic: PROBE.to_owned(),
                    operation: ffi::AclOperation::Read,
                    principal: format!("User:{PROBE}"),
                };
                self.reader.stats.count("kafka:DeleteAcls");
                // Kafka answers DeleteAcls per filter: an error there (no authorizer, no right
                // to alter the cluster's ACLs) fails the probe as much as one for the request.
                let (code, detail) =
                    match ffi::delete_acls(&self.reader.admin, vec![probe], TIMEOUT).await {
                        Ok(answers) => match answers.into_iter().find_map(Result::err) {
                            None => return Ok(()),
                            Some(e) => (Some(e.code), e.message),
                        },
                        Err(e @ ffi::CallError::Failed { code, .. }) => (Some(code), e.detail()),
                        Err(e) => (None, e.detail()),
                    };
                Err(probe_refusal(code, &detail))
            })
            .await
            .clone()
    }

    /// What one `kafka.acls` change writes: a binding to create or to delete, on an owned
    /// topic. Nothing else is ever done to a binding.
    fn acl_step(&self, c: &Change) -> Result<(Action, Grant), KafkaError> {
        let refuse = |message: &str| KafkaError::Acl {
            binding: c.resource.name.clone(),
            api: "apply",
            message: message.to_owned(),
        };
        let g = grant_of(&c.resource).ok_or_else(|| {
            refuse("not a binding dlqctl makes (`<topic> READ|WRITE <principal>`)")
        })?;
        self.check_owned(&g.topic)?;
        match c.action {
            Action::Create | Action::Delete => Ok((c.action, g)),
            _ => Err(refuse("an ACL binding is only created or deleted")),
        }
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
            .map(|c| format!("{} {}", c.resource.kind.as_str(), c.resource.name))
            .collect())
    }
}

/// A topic to create, as the plan gives it: what [`NewTopic`] borrows from.
struct TopicSpec {
    name: String,
    partitions: i32,
    replication: i32,
    configs: Vec<(String, String)>,
}

impl TopicSpec {
    fn of(change: &Change) -> Result<Self, KafkaError> {
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
        let configs = change
            .desired
            .iter()
            .filter(|(_, v)| !v.is_null())
            .filter_map(|(k, v)| {
                k.strip_prefix("config.")
                    .map(|k| (k.to_owned(), config_text(v)))
            })
            .collect();
        Ok(TopicSpec {
            name: topic.to_owned(),
            partitions,
            replication,
            configs,
        })
    }

    fn new_topic(&self) -> NewTopic<'_> {
        let mut new = NewTopic::new(
            &self.name,
            self.partitions,
            TopicReplication::Fixed(self.replication),
        );
        for (k, v) in &self.configs {
            new = new.set(k, v);
        }
        new
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

/// The only way to a [`Writer`]: from the reader of the same target.
impl Reader {
    pub fn into_writer(self) -> Writer {
        Writer {
            reader: self,
            acl_support: Arc::default(),
        }
    }
}

impl crate::backend::kit::doors::Connected for Writer {
    type Error = super::KafkaError;

    fn target(&self) -> &str {
        Writer::target(self)
    }
}

impl crate::backend::kit::doors::Apply for Writer {
    async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), Self::Error> {
        Writer::apply(self, change, allow_loss).await
    }

    fn batch_limit(&self) -> usize {
        super::BATCH
    }

    async fn apply_many(
        &self,
        changes: &[&Change],
        allow_loss: bool,
    ) -> Vec<Result<(), Self::Error>> {
        Writer::apply_many(self, changes, allow_loss).await
    }

    async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, Self::Error> {
        Writer::settle(self, applied).await
    }
}
