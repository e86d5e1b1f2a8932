//! SQS apply: the only module that writes to SQS or CloudWatch. Every write re-checks
//! ownership first; a queue is only dropped with messages in it when the user allowed it.

use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};

use super::alarms;
use super::live::live_queue;
use super::read::Reader;
use super::*;
use crate::backend::wire::aws::{Aws, AwsError, ErrorKind, arn_prefix, classify};
use crate::plan::Action;
use crate::resource::{Props, same};

/// Read-write access to one SQS target, for apply.
#[derive(Debug, Clone)]
pub struct Writer {
    pub reader: Reader,
}

impl Writer {
    pub fn target(&self) -> &str {
        &self.reader.target
    }

    pub fn new(reader: Reader) -> Self {
        Writer { reader }
    }

    fn aws(&self) -> &Aws {
        &self.reader.aws
    }

    /// Applies one change. Updates, replaces and deletes first re-check the ownership tags,
    /// and a queue is only dropped with messages in it when `allow_loss`.
    pub async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), AwsError> {
        let r = &change.resource;
        match (r.kind, change.action) {
            (_, Action::Impossible) => Ok(()),
            (Kind::Queue, Action::Create) => self.create_queue(change).await,
            (Kind::Queue, Action::Update) => {
                if is_adoption(change) {
                    self.adopt(change).await?;
                    if change
                        .fields
                        .iter()
                        .all(|f| f.key.starts_with(TAG_FIELD_PREFIX))
                    {
                        return Ok(());
                    }
                } else {
                    self.ensure_owned(change).await?;
                }
                self.set_attributes(change).await
            }
            (Kind::Queue, Action::Replace) => {
                self.ensure_owned(change).await?;
                self.delete_queue(&r.name, allow_loss).await?;
                self.create_after_delete(change).await
            }
            (Kind::Queue, Action::Delete) => {
                self.ensure_owned(change).await?;
                self.delete_queue(&r.name, allow_loss).await
            }
            (Kind::Alarm, Action::Delete) => {
                self.ensure_owned(change).await?;
                let res = alarms::delete(self.aws(), &r.name).await;
                self.verify_alarm(res, &r.name, None).await
            }
            (Kind::Alarm, action) => {
                let tags = ownership_tags(&change.channel);
                let tags: &[(&str, &str)] = if action == Action::Create {
                    &tags
                } else if is_adoption(change) {
                    self.adopt(change).await?;
                    if change
                        .fields
                        .iter()
                        .all(|f| f.key.starts_with(TAG_FIELD_PREFIX))
                    {
                        return Ok(());
                    }
                    &[]
                } else {
                    self.ensure_owned(change).await?;
                    &[]
                };
                let res = alarms::put(self.aws(), &r.name, &change.desired, tags).await;
                self.verify_alarm(res, &r.name, Some(&change.desired)).await
            }
            (
                Kind::Policy
                | Kind::Exchange
                | Kind::Binding
                | Kind::Topic
                | Kind::Subscription
                | Kind::Acl
                | Kind::ShareGroup
                | Kind::Connector,
                _,
            ) => Ok(()),
        }
    }

    /// Adopts a live object (`--adopt`): adds the ownership tags, and nothing else. Refuses
    /// when, since the plan, another tool or another dlqctl channel has claimed it; succeeds
    /// when it already carries exactly these tags (an earlier apply got this far).
    async fn adopt(&self, change: &Change) -> Result<(), AwsError> {
        let r = &change.resource;
        let (api, read_api) = if r.kind == Kind::Alarm {
            ("cloudwatch:TagResource", "cloudwatch:ListTagsForResource")
        } else {
            ("sqs:TagQueue", "sqs:ListQueueTags")
        };
        let what = format!("{} {}", r.kind.as_str(), r.name);
        self.check_prefixes(change, api)?;
        let Some(tags) = self.reader.tags(r).await? else {
            return Err(AwsError::new(
                read_api,
                what,
                ErrorKind::Rejected,
                "it no longer exists; run `dlqctl plan` again",
            ));
        };
        if ownership_problem(&tags, &change.channel).is_none() {
            return Ok(());
        }
        if !adoptable(&tags) {
            let problem = ownership_problem(&tags, &change.channel).unwrap_or_default();
            return Err(AwsError::new(
                api,
                what,
                ErrorKind::Rejected,
                format!("refusing to adopt it: it {problem}"),
            ));
        }
        let wanted = ownership_tags(&change.channel);
        let res = match r.kind {
            Kind::Alarm => {
                let arn = self.reader.alarm_arn(&r.name).await?.ok_or_else(|| {
                    AwsError::new(
                        api,
                        what.clone(),
                        ErrorKind::Rejected,
                        "it no longer exists; run `dlqctl plan` again",
                    )
                })?;
                alarms::tag(self.aws(), &r.name, &arn, &wanted).await
            }
            _ => {
                let url = self.reader.url(&r.name).await?.ok_or_else(|| {
                    AwsError::new(
                        api,
                        what.clone(),
                        ErrorKind::Rejected,
                        "it no longer exists; run `dlqctl plan` again",
                    )
                })?;
                self.aws()
                    .write("sqs:TagQueue", |c| {
                        let what = what.clone();
                        async move {
                            let mut req = c.sqs.tag_queue().queue_url(url);
                            for (k, v) in wanted {
                                req = req.tags(k, v);
                            }
                            req.send()
                                .await
                                .map(|_| ())
                                .map_err(|e| classify("sqs:TagQueue", &what, e))
                        }
                    })
                    .await
            }
        };
        match res {
            Err(e) if e.ambiguous() => match self.reader.tags(r).await? {
                Some(t) if ownership_problem(&t, &change.channel).is_none() => Ok(()),
                _ => Err(e),
            },
            other => other,
        }
    }

    /// Refuses a name outside the target's ownership prefixes, when it declares them.
    fn check_prefixes(&self, change: &Change, api: &'static str) -> Result<(), AwsError> {
        let r = &change.resource;
        if in_prefixes(&self.reader.prefixes, &r.name) {
            return Ok(());
        }
        Err(AwsError::new(
            api,
            format!("{} {}", r.kind.as_str(), r.name),
            ErrorKind::Rejected,
            format!(
                "refusing to change it: it is outside the target's ownership prefixes ({})",
                self.reader.prefixes.join(", ")
            ),
        ))
    }

    /// Refuses to touch a live object that is not provably this channel's (the plan checked,
    /// but tags may have changed since, and a saved plan's fingerprints do not cover them).
    async fn ensure_owned(&self, change: &Change) -> Result<(), AwsError> {
        let r = &change.resource;
        let api = if r.kind == Kind::Alarm {
            "cloudwatch:ListTagsForResource"
        } else {
            "sqs:ListQueueTags"
        };
        let what = format!("{} {}", r.kind.as_str(), r.name);
        self.check_prefixes(change, api)?;
        match self.reader.tags(r).await? {
            None => Err(AwsError::new(
                api,
                what,
                ErrorKind::Rejected,
                "it no longer exists; run `dlqctl plan` again",
            )),
            Some(tags) => match ownership_problem(&tags, &change.channel) {
                Some(p) => Err(AwsError::new(
                    api,
                    what,
                    ErrorKind::Rejected,
                    format!("refusing to change it: it {p}"),
                )),
                None => Ok(()),
            },
        }
    }

    /// The attributes to send. `create`: only what must be set (a new queue has no redrive
    /// policy to remove, and `FifoQueue` can only be given at creation).
    async fn attributes(
        &self,
        name: &str,
        desired: &Props,
        create: bool,
    ) -> Result<Vec<(QueueAttributeName, String)>, AwsError> {
        let mut out = Vec::new();
        for k in [RETENTION, VISIBILITY] {
            if let Some(n) = desired.get(k).and_then(Value::as_u64) {
                out.push((QueueAttributeName::from(k), n.to_string()));
            }
        }
        if create && desired.get(FIFO).and_then(Value::as_bool) == Some(true) {
            out.push((QueueAttributeName::FifoQueue, "true".into()));
        }
        match desired.get(DLQ_TARGET) {
            Some(Value::String(dlq)) => {
                let arn = self.reader.arn(dlq).await?;
                let count = desired.get(MAX_RECEIVE).cloned().unwrap_or(json!(1));
                let policy = json!({"deadLetterTargetArn": arn, "maxReceiveCount": count});
                out.push((QueueAttributeName::RedrivePolicy, policy.to_string()));
            }
            Some(Value::Null) if !create => {
                out.push((QueueAttributeName::RedrivePolicy, String::new()))
            }
            _ => {}
        }
        protection_attributes(desired, create, &mut out);
        // The allow policy needs this queue's own ARN; on create it is set right after.
        if !create && let Some(a) = self.allow_policy(name, desired).await? {
            out.push((QueueAttributeName::RedriveAllowPolicy, a));
        }
        Ok(out)
    }

    /// The RedriveAllowPolicy JSON (source queues are in the DLQ's account and region), `""`
    /// to remove one, `None` when dlqctl does not own it on this queue.
    async fn allow_policy(&self, name: &str, desired: &Props) -> Result<Option<String>, AwsError> {
        match desired.get(ALLOW_PERMISSION) {
            Some(Value::String(perm)) => {
                let own = self.reader.arn(name).await?;
                let prefix = arn_prefix(&own);
                let sources: Vec<String> = desired
                    .get(ALLOW_SOURCES)
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(|s| format!("{prefix}{s}"))
                            .collect()
                    })
                    .unwrap_or_default();
                let mut policy = json!({"redrivePermission": perm});
                if perm == "byQueue" {
                    policy["sourceQueueArns"] = json!(sources);
                }
                Ok(Some(policy.to_string()))
            }
            Some(Value::Null) => Ok(Some(String::new())),
            _ => Ok(None),
        }
    }

    async fn create_queue(&self, change: &Change) -> Result<(), AwsError> {
        let name = change.resource.name.as_str();
        let attrs = self.attributes(name, &change.desired, true).await?;
        let what = format!("queue {name}");
        let channel = change.channel.clone();
        let res = self
            .aws()
            .write("sqs:CreateQueue", |c| async move {
                let mut req = c.sqs.create_queue().queue_name(name);
                for (k, v) in attrs {
                    req = req.attributes(k, v);
                }
                for (k, v) in ownership_tags(&channel) {
                    req = req.tags(k, v);
                }
                req.send()
                    .await
                    .map_err(|e| classify("sqs:CreateQueue", &what, e))
            })
            .await;
        match res {
            Ok(out) => {
                if let Some(u) = out.queue_url() {
                    self.reader
                        .cached(|c| c.urls.insert(name.to_owned(), u.to_owned()));
                }
            }
            Err(e) if e.is_code(&DELETED_RECENTLY) => return Err(deleted_recently(e)),
            Err(e) if e.is_code(&QUEUE_EXISTS) => {
                return Err(AwsError {
                    detail: format!(
                        "{}; it was created with other settings after the plan was made: run `dlqctl plan` again",
                        e.detail
                    ),
                    ..e
                });
            }
            Err(e) if e.ambiguous() => self.verify_queue(e, change, true).await?,
            Err(e) => return Err(e),
        }
        // Set after creation: the allow policy names source ARNs in the DLQ's own account.
        if let Some(policy) = self
            .allow_policy(name, &change.desired)
            .await?
            .filter(|p| !p.is_empty())
        {
            let mut attrs = vec![(QueueAttributeName::RedriveAllowPolicy, policy)];
            // Sent again: moto drops a queue's Policy on any SetQueueAttributes without it.
            if let Some(p) = change.desired.get(POLICY).filter(|p| p.is_object()) {
                attrs.push((QueueAttributeName::Policy, p.to_string()));
            }
            self.set(name, attrs, change).await?;
        }
        Ok(())
    }

    /// The create half of a replace: SQS refuses a deleted queue's name for 60 s, and that
    /// refusal is an answer, not an ambiguity, so asking again until it passes is safe.
    async fn create_after_delete(&self, change: &Change) -> Result<(), AwsError> {
        let deadline = tokio::time::Instant::now() + NAME_REUSE_DELAY + Duration::from_secs(10);
        loop {
            match self.create_queue(change).await {
                Err(e)
                    if e.is_code(&DELETED_RECENTLY) && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                other => return other,
            }
        }
    }

    async fn set_attributes(&self, change: &Change) -> Result<(), AwsError> {
        let name = change.resource.name.as_str();
        let attrs = self.attributes(name, &change.desired, false).await?;
        self.set(name, attrs, change).await
    }

    async fn set(
        &self,
        name: &str,
        attrs: Vec<(QueueAttributeName, String)>,
        change: &Change,
    ) -> Result<(), AwsError> {
        let what = format!("queue {name}");
        let missing = || {
            AwsError::new(
                "sqs:SetQueueAttributes",
                what.clone(),
                ErrorKind::Rejected,
                "the queue does not exist any more; run `dlqctl plan` again",
            )
        };
        let url = self.reader.url(name).await?.ok_or_else(missing)?;
        let res = self
            .aws()
            .write("sqs:SetQueueAttributes", |c| async move {
                let mut req = c.sqs.set_queue_attributes().queue_url(url);
                for (k, v) in attrs {
                    req = req.attributes(k, v);
                }
                req.send()
                    .await
                    .map(|_| ())
                    .map_err(|e| classify("sqs:SetQueueAttributes", &what, e))
            })
            .await;
        match res {
            Err(e) if e.ambiguous() => self.verify_queue(e, change, false).await,
            other => other,
        }
    }

    /// After a write that may or may not have happened: re-read, and succeed only if the
    /// queue now holds what was asked.
    async fn verify_queue(
        &self,
        err: AwsError,
        change: &Change,
        create: bool,
    ) -> Result<(), AwsError> {
        let name = &change.resource.name;
        if create {
            self.reader.cached(|c| c.urls.remove(name));
        }
        let Some(url) = self.reader.url(name).await? else {
            return Err(err);
        };
        let Some(attrs) = self
            .reader
            .attributes(name, &url, QueueAttributeName::All)
            .await?
        else {
            return Err(err);
        };
        let live = live_queue(&attrs);
        let settled = change
            .desired
            .iter()
            .filter(|(k, _)| !k.starts_with("RedriveAllowPolicy."))
            .all(|(k, v)| same(v, live.props.get(k)));
        if settled { Ok(()) } else { Err(err) }
    }

    async fn verify_alarm(
        &self,
        res: Result<(), AwsError>,
        name: &str,
        desired: Option<&Props>,
    ) -> Result<(), AwsError> {
        let err = match res {
            Err(e) if e.ambiguous() => e,
            other => return other,
        };
        let found = alarms::read(self.aws(), &[name.to_owned()]).await?;
        let ok = match (desired, found.get(name)) {
            (None, None) => true,
            (Some(d), Some(a)) => d.iter().all(|(k, v)| same(v, a.props.get(k))),
            _ => false,
        };
        if ok { Ok(()) } else { Err(err) }
    }

    /// Deletes a queue. Without `allow_loss` it first checks the queue is empty: SQS has no
    /// conditional delete, so a message arriving in the last milliseconds is still lost.
    async fn delete_queue(&self, name: &str, allow_loss: bool) -> Result<(), AwsError> {
        let what = format!("queue {name}");
        let Some(url) = self.reader.url(name).await? else {
            return Ok(());
        };
        if !allow_loss {
            let held = self
                .reader
                .message_count(&queue_id(self.reader.target(), name))
                .await?;
            if held != Some(0) {
                let n = held.map_or("an unknown number of".to_owned(), |n| n.to_string());
                return Err(AwsError::new(
                    "sqs:DeleteQueue",
                    what,
                    ErrorKind::Rejected,
                    format!(
                        "not deleted: it holds {n} messages now; move them first, or pass --allow-message-loss"
                    ),
                ));
            }
        }
        let res = self
            .aws()
            .write("sqs:DeleteQueue", |c| {
                let what = what.clone();
                async move {
                    c.sqs
                        .delete_queue()
                        .queue_url(url)
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| classify("sqs:DeleteQueue", &what, e))
                }
            })
            .await;
        self.reader.cached(|c| {
            c.urls.remove(name);
            c.arns.remove(name)
        });
        match res {
            Err(e) if e.is_code(&NO_SUCH_QUEUE) => Ok(()),
            Err(e) if e.ambiguous() => match self.reader.url(name).await? {
                None => Ok(()),
                Some(_) => Err(e),
            },
            other => other,
        }
    }

    /// Waits until each written queue reads back as desired (AWS propagates attribute
    /// changes within seconds, retention within minutes); returns what did not settle.
    pub async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, AwsError> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let mut pending: Vec<&Change> = applied
            .iter()
            .copied()
            .filter(|c| {
                c.resource.kind == Kind::Queue
                    && matches!(c.action, Action::Create | Action::Update | Action::Replace)
            })
            .collect();
        while !pending.is_empty() {
            let mut still = Vec::new();
            for c in pending {
                let name = &c.resource.name;
                let live = match self.reader.url(name).await? {
                    Some(url) => self
                        .reader
                        .attributes(name, &url, QueueAttributeName::All)
                        .await?
                        .map(|a| live_queue(&a)),
                    None => None,
                };
                let done = live.is_some_and(|l| {
                    c.desired
                        .iter()
                        .filter(|(k, _)| !k.starts_with("RedriveAllowPolicy."))
                        .all(|(k, v)| same(v, l.props.get(k)))
                });
                if !done {
                    still.push(c);
                }
            }
            pending = still;
            if pending.is_empty() || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(pending
            .into_iter()
            .map(|c| c.resource.to_string())
            .collect())
    }
}

/// SQS's refusal to reuse a name within 60 s of deleting it, said plainly.
pub(super) fn deleted_recently(e: AwsError) -> AwsError {
    AwsError {
        detail: format!(
            "SQS does not allow re-creating a queue within {} s of deleting one with the same name (QueueDeletedRecently); wait a minute, then run `dlqctl apply` again: the plan will show the remaining create",
            NAME_REUSE_DELAY.as_secs()
        ),
        ..e
    }
}

/// Encryption and access policy, where the spec owns them. `KmsMasterKeyId` is emptied
/// (SQS's way to drop a KMS key) only on an update whose spec has none: a new queue has none.
fn protection_attributes(
    desired: &Props,
    create: bool,
    out: &mut Vec<(QueueAttributeName, String)>,
) {
    match desired.get(KMS_KEY) {
        Some(Value::String(key)) => out.push((QueueAttributeName::KmsMasterKeyId, key.clone())),
        Some(Value::Null) if !create => {
            out.push((QueueAttributeName::KmsMasterKeyId, String::new()))
        }
        _ => {}
    }
    if let Some(n) = desired.get(KMS_REUSE).and_then(Value::as_u64) {
        out.push((
            QueueAttributeName::KmsDataKeyReusePeriodSeconds,
            n.to_string(),
        ));
    }
    if let Some(b) = desired.get(MANAGED_SSE).and_then(Value::as_bool) {
        out.push((QueueAttributeName::SqsManagedSseEnabled, b.to_string()));
    }
    if let Some(p) = desired.get(POLICY).filter(|p| p.is_object()) {
        out.push((QueueAttributeName::Policy, p.to_string()));
    }
}

/// The only way to a [`Writer`]: from the reader of the same target.
impl Reader {
    pub fn into_writer(self) -> Writer {
        Writer::new(self)
    }
}

impl crate::backend::kit::doors::Connected for Writer {
    type Error = crate::backend::wire::aws::AwsError;

    fn target(&self) -> &str {
        Writer::target(self)
    }
}

impl crate::backend::kit::doors::Apply for Writer {
    async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), Self::Error> {
        Writer::apply(self, change, allow_loss).await
    }

    async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, Self::Error> {
        Writer::settle(self, applied).await
    }
}
