//! SQS reads (read-only: no call here changes a queue, an alarm or a message): live state of
//! the queues and alarms a plan names, the inventory `import` groups, what `--prune` may
//! delete, and message counts. Everything is paged and bounded to [`CONCURRENCY`] calls in
//! flight.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use aws_sdk_sqs::types::QueueAttributeName;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde_json::json;
use tokio::sync::OnceCell;

use super::alarms;
use super::import::{group, missing_dead_letter_queues};
use super::*;
use crate::backend::kit::import::{Found, Prunable};
use crate::backend::wire::aws::{Aws, AwsError, ErrorKind, Pages, Settings, arn_prefix, classify};
use crate::backend::wire::http::{Stats, redact_userinfo};
use crate::backend::wire::retry::ReadBudget;
use crate::resource::{Live, Props, Role};
use crate::spec::model::Target;

use super::live::common_prefix;
pub use super::live::{Inventory, MAX_QUEUE_NAME, SeenAlarm, SeenQueue, live_queue};

/// Names seen during a run: queue URLs and ARNs, alarm ARNs (saves calls in apply).
#[derive(Debug, Default)]
pub(super) struct Cache {
    pub(super) urls: BTreeMap<String, String>,
    pub(super) arns: BTreeMap<String, String>,
    pub(super) alarm_arns: BTreeMap<String, String>,
}

impl Cache {
    /// The ARN of queue `name` without a call: every queue of a target is in one account and
    /// region, so once one ARN is known, that of a queue known to exist (listed, or created
    /// in this run: its URL is cached) follows from it — when its URL names the same account.
    fn arn_of(&self, name: &str) -> Option<String> {
        let url = self.urls.get(name)?;
        let prefix = arn_prefix(self.arns.values().next()?);
        let account = prefix.trim_end_matches(':').rsplit(':').next()?;
        let url_account = url.trim_end_matches('/').rsplit('/').nth(1)?;
        (!account.is_empty() && account == url_account).then(|| format!("{prefix}{name}"))
    }
}

/// Read-only view of one SQS target (and its CloudWatch alarms).
#[derive(Debug, Clone)]
pub struct Reader {
    pub target: String,
    pub(super) aws: Arc<Aws>,
    pub(super) cache: Arc<Mutex<Cache>>,
    /// Whether the endpoint can return RedriveAllowPolicy (probed at most once, when needed).
    pub(super) allow_policy_readable: Arc<OnceCell<bool>>,
    /// The target's optional `ownership.prefixes`: when declared, dlqctl also keeps to names
    /// inside them (prune, import, and every change or delete of a live object).
    pub(super) prefixes: Vec<String>,
}

impl Reader {
    /// A reader for the target: the AWS SDK's standard credential chain; the targets file only
    /// says where (region, profile, endpoint).
    pub fn connect(
        name: &str,
        target: &Target,
        opts: crate::backend::kit::connect::ConnectOptions,
        stats: Arc<Stats>,
    ) -> Self {
        let settings = Settings {
            target: name.to_owned(),
            region: target.region.clone(),
            profile: target.profile.clone(),
            endpoint: target.endpoint.clone(),
            read_budget: ReadBudget::new(opts.read_timeout),
        };
        Reader::new(
            name,
            settings,
            crate::backend::kit::connect::prefixes(target),
            stats,
        )
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    /// The target's read budget (renewed by the exporter before each reading).
    pub fn read_budget(&self) -> &ReadBudget {
        self.aws.budget()
    }

    pub fn new(target: &str, settings: Settings, prefixes: Vec<String>, stats: Arc<Stats>) -> Self {
        Reader {
            target: target.to_owned(),
            aws: Arc::new(Aws::new(settings, stats)),
            cache: Arc::new(Mutex::new(Cache::default())),
            allow_policy_readable: Arc::new(OnceCell::new()),
            prefixes,
        }
    }

    /// Every page of ListQueues for one name prefix (`""`: all queues), as (name, URL).
    pub(super) async fn list_queues(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, AwsError> {
        let what = if prefix.is_empty() {
            "queues".to_owned()
        } else {
            format!("queues starting with {prefix}")
        };
        let mut out = Vec::new();
        let mut pages = Pages::default();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .aws
                .read("sqs:ListQueues", |c| {
                    let (prefix, token, what) = (prefix.to_owned(), token.clone(), what.clone());
                    async move {
                        c.sqs
                            .list_queues()
                            .set_queue_name_prefix((!prefix.is_empty()).then_some(prefix))
                            .max_results(PAGE_SIZE)
                            .set_next_token(token)
                            .send()
                            .await
                            .map_err(|e| classify("sqs:ListQueues", &what, e))
                    }
                })
                .await?;
            for url in page.queue_urls() {
                let name = url
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or_default();
                if name.len() > MAX_QUEUE_NAME {
                    // SQS never returns such a name: refuse it rather than send it back in
                    // every later call (a megabyte-long URL the SDK cannot even parse).
                    return Err(AwsError::new(
                        "sqs:ListQueues",
                        what.clone(),
                        ErrorKind::Rejected,
                        format!(
                            "the endpoint listed a queue name of {} bytes starting `{}…`; SQS names are at most {MAX_QUEUE_NAME} characters, so this endpoint does not behave like SQS",
                            name.len(),
                            name.chars().take(40).collect::<String>()
                        ),
                    ));
                }
                out.push((name.to_owned(), url.clone()));
            }
            match pages.next("sqs:ListQueues", &what, page.next_token())? {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        self.cached(|c| c.urls.extend(out.iter().cloned()));
        Ok(out)
    }

    /// Queue names in scope: inside the ownership prefixes and starting with `filter`.
    pub(super) async fn queues_in_scope(
        &self,
        filter: Option<&str>,
    ) -> Result<Vec<String>, AwsError> {
        let mut names = BTreeSet::new();
        for prefix in listing_prefixes(&self.prefixes, filter) {
            for (name, _) in self.list_queues(&prefix).await? {
                if in_prefixes(&self.prefixes, &name) && filter.is_none_or(|f| name.starts_with(f))
                {
                    names.insert(name);
                }
            }
        }
        Ok(names.into_iter().collect())
    }

    /// One queue by name, with its tags; `None` when it does not exist.
    pub async fn seen_queue(&self, name: &str) -> Result<Option<SeenQueue>, AwsError> {
        let Some(url) = self.url(name).await? else {
            return Ok(None);
        };
        let Some(attributes) = self.attributes(name, &url, QueueAttributeName::All).await? else {
            return Ok(None);
        };
        if let Some(arn) = attributes.get("QueueArn") {
            self.cached(|c| c.arns.insert(name.to_owned(), arn.clone()));
        }
        let Some(tags) = self.queue_tags(name).await? else {
            return Ok(None);
        };
        Ok(Some(SeenQueue {
            live: live_queue(&attributes),
            tags,
            attributes,
        }))
    }

    /// Everything `import` reads: every queue in scope with its attributes and tags, and every
    /// metric alarm of the account and region (alarms are matched to queues by their
    /// QueueName dimension, or a metric-math alarm's first query's, whatever they are called).
    pub async fn inventory(&self, filter: Option<&str>) -> Result<Inventory, AwsError> {
        let names = self.queues_in_scope(filter).await?;
        let seen: Vec<Option<(String, SeenQueue)>> = stream::iter(names)
            .map(|name| async move {
                Ok::<_, AwsError>(self.seen_queue(&name).await?.map(|q| (name, q)))
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        let queues: BTreeMap<String, SeenQueue> = seen.into_iter().flatten().collect();
        let alarms = alarms::list(&self.aws, "").await?;
        let watched: Vec<(String, Option<String>, Props)> = alarms
            .into_iter()
            .filter(|(_, a)| {
                alarms::watched_queue(&a.props).is_some_and(|q| {
                    queues.contains_key(q)
                        || (in_prefixes(&self.prefixes, q)
                            && filter.is_none_or(|f| q.starts_with(f)))
                })
            })
            .map(|(name, a)| (name, a.arn, a.props))
            .collect();
        let alarms: Vec<(String, SeenAlarm)> = stream::iter(watched)
            .map(|(name, arn, props)| async move {
                let tags = match &arn {
                    Some(arn) => alarms::tags(&self.aws, &name, arn).await?,
                    None => BTreeMap::new(),
                };
                if let Some(arn) = arn {
                    self.cached(|c| c.alarm_arns.insert(name.clone(), arn));
                }
                Ok::<_, AwsError>((name, SeenAlarm { props, tags }))
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        let probe = queues.keys().next().cloned();
        let allow_policy_readable = match probe {
            Some(q) => self.allow_policy_readable(&q).await?,
            None => true,
        };
        Ok(Inventory {
            queues,
            alarms: alarms.into_iter().collect(),
            allow_policy_readable,
        })
    }

    /// What `plan --prune` may delete on this target: queues and alarms tagged
    /// `managed-by: dlqctl`, inside the ownership prefixes if the target declares them, that
    /// `skip` (every name the specs use) does not name. Tags are read for every other queue
    /// in scope, and for every SQS alarm in scope (metric-math ones too: the rate alarms).
    pub async fn prunable(
        &self,
        skip: &BTreeSet<ResourceId>,
        _target: &Target,
    ) -> Result<Vec<Prunable>, AwsError> {
        let skipped = |kind: Kind, name: &str| {
            skip.contains(&ResourceId {
                kind,
                ..queue_id(&self.target, name)
            })
        };
        let names: Vec<String> = self
            .queues_in_scope(None)
            .await?
            .into_iter()
            .filter(|n| !skipped(Kind::Queue, n))
            .collect();
        let queues: Vec<Option<Prunable>> = stream::iter(names)
            .map(|name| async move {
                let Some(tags) = self.queue_tags(&name).await? else {
                    return Ok(None);
                };
                if ownership_problem_any(&tags).is_some() {
                    return Ok(None);
                }
                let Some(q) = self.seen_queue(&name).await? else {
                    return Ok(None);
                };
                // A queue that denies every source is an invalid-message queue (where the
                // endpoint can say so; moto cannot return RedriveAllowPolicy).
                let deny_all = q.live.props.get(ALLOW_PERMISSION) == Some(&json!("denyAll"));
                let role = if q.live.props.contains_key(DLQ_TARGET) {
                    Role::Main
                } else if deny_all {
                    Role::Invalid
                } else {
                    Role::DeadLetter
                };
                Ok::<_, AwsError>(Some(Prunable {
                    id: queue_id(&self.target, &name),
                    live: q.live,
                    channel: tags.get(TAG_CHANNEL).cloned().unwrap_or_default(),
                    role,
                    identity: Props::new(),
                }))
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        let mut out: Vec<Prunable> = queues.into_iter().flatten().collect();
        let mut alarms = BTreeMap::new();
        for prefix in listing_prefixes(&self.prefixes, None) {
            alarms.extend(alarms::list(&self.aws, &prefix).await?);
        }
        let candidates: Vec<(String, alarms::LiveAlarm)> = alarms
            .into_iter()
            .filter(|(name, a)| {
                in_prefixes(&self.prefixes, name)
                    && !skipped(Kind::Alarm, name)
                    && alarms::is_sqs_alarm(&a.props)
            })
            .collect();
        let found: Vec<Option<Prunable>> = stream::iter(candidates)
            .map(|(name, a)| async move {
                let Some(arn) = a.arn.clone() else {
                    return Ok(None);
                };
                self.cached(|c| c.alarm_arns.insert(name.clone(), arn.clone()));
                let tags = alarms::tags(&self.aws, &name, &arn).await?;
                if ownership_problem_any(&tags).is_some() {
                    return Ok(None);
                }
                Ok::<_, AwsError>(Some(Prunable {
                    id: ResourceId {
                        kind: Kind::Alarm,
                        ..queue_id(&self.target, &name)
                    },
                    live: Live {
                        props: a.props,
                        messages: None,
                    },
                    channel: tags.get(TAG_CHANNEL).cloned().unwrap_or_default(),
                    role: Role::Alarm,
                    identity: Props::new(),
                }))
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        out.extend(found.into_iter().flatten());
        Ok(out)
    }

    pub(super) fn cached<T>(&self, f: impl FnOnce(&mut Cache) -> T) -> Option<T> {
        self.cache.lock().ok().map(|mut c| f(&mut c))
    }

    /// Reads the queues and alarms `ids` names (those that exist).
    pub async fn read(&self, ids: &[&ResourceId]) -> Result<BTreeMap<ResourceId, Live>, AwsError> {
        let queues: Vec<&str> = ids
            .iter()
            .filter(|i| i.kind == Kind::Queue)
            .map(|i| i.name.as_str())
            .collect();
        let alarms: Vec<String> = ids
            .iter()
            .filter(|i| i.kind == Kind::Alarm)
            .map(|i| i.name.clone())
            .collect();
        let (queues, alarms) = tokio::join!(self.read_queues(&queues), async {
            if alarms.is_empty() {
                Ok(BTreeMap::new())
            } else {
                alarms::read(&self.aws, &alarms).await
            }
        });
        let mut out = queues?;
        for (name, a) in alarms? {
            if let Some(arn) = &a.arn {
                self.cached(|c| c.alarm_arns.insert(name.clone(), arn.clone()));
            }
            let id = ResourceId {
                kind: Kind::Alarm,
                ..queue_id(&self.target, &name)
            };
            out.insert(
                id,
                Live {
                    props: a.props,
                    messages: None,
                },
            );
        }
        Ok(out)
    }

    pub(super) async fn read_queues(
        &self,
        names: &[&str],
    ) -> Result<BTreeMap<ResourceId, Live>, AwsError> {
        if names.is_empty() {
            return Ok(BTreeMap::new());
        }
        let wanted: BTreeSet<&str> = names.iter().copied().collect();
        let prefix = common_prefix(names).to_owned();
        let existing: Vec<(String, String)> = self
            .list_queues(&prefix)
            .await?
            .into_iter()
            .filter(|(name, _)| wanted.contains(name.as_str()))
            .collect();
        let read: Vec<Option<(String, Live)>> = stream::iter(existing)
            .map(|(name, url)| async move {
                let attrs = self
                    .attributes(&name, &url, QueueAttributeName::All)
                    .await?;
                Ok::<_, AwsError>(attrs.map(|a| {
                    if let Some(arn) = a.get("QueueArn") {
                        self.cached(|c| c.arns.insert(name.clone(), arn.clone()));
                    }
                    (name, live_queue(&a))
                }))
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        Ok(read
            .into_iter()
            .flatten()
            .map(|(name, live)| (queue_id(&self.target, &name), live))
            .collect())
    }

    /// One GetQueueAttributes call; `None` when the queue no longer exists.
    pub(super) async fn attributes(
        &self,
        name: &str,
        url: &str,
        which: QueueAttributeName,
    ) -> Result<Option<BTreeMap<String, String>>, AwsError> {
        let what = format!("queue {name}");
        let res = self
            .aws
            .read("sqs:GetQueueAttributes", |c| {
                let (url, which, what) = (url.to_owned(), which.clone(), what.clone());
                async move {
                    c.sqs
                        .get_queue_attributes()
                        .queue_url(url)
                        .attribute_names(which)
                        .send()
                        .await
                        .map_err(|e| classify("sqs:GetQueueAttributes", &what, e))
                }
            })
            .await;
        match res {
            Ok(out) => Ok(Some(
                out.attributes()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                    .collect(),
            )),
            Err(e) if e.is_code(&NO_SUCH_QUEUE) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A queue's URL: from this run's listing, else GetQueueUrl. `None`: it does not exist.
    pub(super) async fn url(&self, name: &str) -> Result<Option<String>, AwsError> {
        if let Some(Some(u)) = self.cached(|c| c.urls.get(name).cloned()) {
            return Ok(Some(u));
        }
        let what = format!("queue {name}");
        let res = self
            .aws
            .read("sqs:GetQueueUrl", |c| {
                let (name, what) = (name.to_owned(), what.clone());
                async move {
                    c.sqs
                        .get_queue_url()
                        .queue_name(name)
                        .send()
                        .await
                        .map_err(|e| classify("sqs:GetQueueUrl", &what, e))
                }
            })
            .await;
        match res {
            Ok(out) => {
                let url = out.queue_url().map(str::to_owned);
                if let Some(u) = &url {
                    self.cached(|c| c.urls.insert(name.to_owned(), u.clone()));
                }
                Ok(url)
            }
            Err(e) if e.is_code(&NO_SUCH_QUEUE) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A queue's ARN (for redrive policies): from this run's reads, else one lookup.
    pub(super) async fn arn(&self, name: &str) -> Result<String, AwsError> {
        if let Some(Some(a)) = self.cached(|c| c.arns.get(name).cloned().or_else(|| c.arn_of(name)))
        {
            self.cached(|c| c.arns.insert(name.to_owned(), a.clone()));
            return Ok(a);
        }
        let missing = || {
            AwsError::new(
                "sqs:GetQueueAttributes",
                format!("queue {name}"),
                ErrorKind::Rejected,
                "the queue does not exist, so its ARN cannot be used in a redrive policy; run `dlqctl plan` again",
            )
        };
        let url = self.url(name).await?.ok_or_else(missing)?;
        let attrs = self
            .attributes(name, &url, QueueAttributeName::QueueArn)
            .await?
            .ok_or_else(missing)?;
        let arn = attrs.get("QueueArn").cloned().ok_or_else(missing)?;
        self.cached(|c| c.arns.insert(name.to_owned(), arn.clone()));
        Ok(arn)
    }

    /// Messages a queue holds (visible + in flight + delayed). `None`: no such queue.
    pub async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, AwsError> {
        if id.kind != Kind::Queue {
            return Ok(None);
        }
        let name = id.name.as_str();
        let Some(url) = self.url(name).await? else {
            return Ok(None);
        };
        Ok(self
            .attributes(name, &url, QueueAttributeName::All)
            .await?
            .and_then(|a| live_queue(&a).messages))
    }

    /// The URL of queue `name` of account `account` (GetQueueUrl with
    /// `QueueOwnerAWSAccountId`: a source queue named by a message's
    /// `DeadLetterQueueSourceArn` may be another account's). Not cached: the caller keeps
    /// what it needs. `None`: it does not exist (or is not shared with these credentials).
    pub(super) async fn url_in(
        &self,
        name: &str,
        account: &str,
    ) -> Result<Option<String>, AwsError> {
        let what = format!("queue {name} of account {account}");
        let res = self
            .aws
            .read("sqs:GetQueueUrl", |c| {
                let (name, account, what) = (name.to_owned(), account.to_owned(), what.clone());
                async move {
                    c.sqs
                        .get_queue_url()
                        .queue_name(name)
                        .queue_owner_aws_account_id(account)
                        .send()
                        .await
                        .map_err(|e| classify("sqs:GetQueueUrl", &what, e))
                }
            })
            .await;
        match res {
            Ok(out) => Ok(out.queue_url().map(str::to_owned)),
            Err(e) if e.is_code(&NO_SUCH_QUEUE) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn queue_tags(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, AwsError> {
        let Some(url) = self.url(name).await? else {
            return Ok(None);
        };
        self.queue_tags_at(name, &url).await
    }

    /// [`Reader::queue_tags`] of the queue at `url` (named `name` in errors).
    pub(super) async fn queue_tags_at(
        &self,
        name: &str,
        url: &str,
    ) -> Result<Option<BTreeMap<String, String>>, AwsError> {
        let url = url.to_owned();
        let what = format!("queue {name}");
        let res = self
            .aws
            .read("sqs:ListQueueTags", |c| {
                let (url, what) = (url.clone(), what.clone());
                async move {
                    c.sqs
                        .list_queue_tags()
                        .queue_url(url)
                        .send()
                        .await
                        .map_err(|e| classify("sqs:ListQueueTags", &what, e))
                }
            })
            .await;
        match res {
            Ok(out) => Ok(Some(
                out.tags()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )),
            Err(e) if e.is_code(&NO_SUCH_QUEUE) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn alarm_arn(&self, name: &str) -> Result<Option<String>, AwsError> {
        if let Some(Some(a)) = self.cached(|c| c.alarm_arns.get(name).cloned()) {
            return Ok(Some(a));
        }
        let found = alarms::read(&self.aws, &[name.to_owned()]).await?;
        Ok(found.get(name).and_then(|a| a.arn.clone()))
    }

    /// The tags of a live queue or alarm; `None` when it does not exist (any more).
    pub(super) async fn tags(
        &self,
        id: &ResourceId,
    ) -> Result<Option<BTreeMap<String, String>>, AwsError> {
        match id.kind {
            Kind::Alarm => match self.alarm_arn(&id.name).await? {
                Some(arn) => alarms::tags(&self.aws, &id.name, &arn).await.map(Some),
                None => Ok(None),
            },
            _ => self.queue_tags(&id.name).await,
        }
    }

    /// Whether the endpoint returns RedriveAllowPolicy: asks for it by name once. AWS answers
    /// (with or without a value); an endpoint that does not store it answers
    /// InvalidAttributeName.
    pub(super) async fn allow_policy_readable(&self, queue: &str) -> Result<bool, AwsError> {
        let readable = self
            .allow_policy_readable
            .get_or_try_init(|| async {
                let Some(url) = self.url(queue).await? else {
                    return Ok(true);
                };
                match self
                    .attributes(queue, &url, QueueAttributeName::RedriveAllowPolicy)
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(e) if e.is_code(&["InvalidAttributeName"]) => Ok(false),
                    Err(e) => Err(e),
                }
            })
            .await?;
        Ok(*readable)
    }

    /// Which region this is, for binding a saved plan to it (as the SDK resolves it; the
    /// endpoint and account id are not included: the SDK does not expose the one, and the
    /// other would cost a call).
    pub async fn identity(&self) -> Result<String, AwsError> {
        let clients = self.aws.clients().await;
        let region = clients.sqs.config().region().map(|r| r.to_string());
        // The endpoint override tells a local emulator from AWS in the same region.
        let endpoint = self
            .aws
            .endpoint()
            .map_or_else(|| "AWS".to_owned(), redact_userinfo);
        Ok(format!(
            "aws region {} at {endpoint}",
            region.as_deref().unwrap_or("(default)")
        ))
    }
}

impl Reader {
    /// Who the target's credentials are: the ARN `sts:GetCallerIdentity` answers (a call that
    /// needs no permission; moto answers it too).
    pub async fn caller(&self) -> Result<String, AwsError> {
        const API: &str = "sts:GetCallerIdentity";
        self.aws
            .read(API, |c| async move {
                let out = c
                    .sts
                    .get_caller_identity()
                    .send()
                    .await
                    .map_err(|e| classify(API, "the caller", e))?;
                out.arn().map(str::to_owned).ok_or_else(|| {
                    AwsError::new(
                        API,
                        "the caller",
                        ErrorKind::Rejected,
                        "no Arn in the answer",
                    )
                })
            })
            .await
    }
}

impl crate::backend::kit::doors::Operator for Reader {
    async fn operator(&self) -> Result<String, Self::Error> {
        self.caller().await
    }
}

impl Reader {
    /// The import door: every queue in scope (and the dead-letter queues their redrive
    /// policies point at, even outside `prefix`) with its alarms, grouped into channels.
    pub async fn import(&self, target: &Target, prefix: Option<&str>) -> Result<Found, AwsError> {
        let mut inv = self.inventory(prefix).await?;
        // Follow redrive links to dead-letter queues outside the `--prefix` filter.
        for name in missing_dead_letter_queues(&inv, target) {
            if let Some(q) = self.seen_queue(&name).await? {
                inv.queues.insert(name, q);
            }
        }
        let read = BTreeMap::from([("queues", inv.queues.len()), ("alarms", inv.alarms.len())]);
        let (c, u) = group(&inv, self.target());
        Ok((c, u, read))
    }
}

impl crate::backend::kit::doors::Connected for Reader {
    type Error = crate::backend::wire::aws::AwsError;

    fn target(&self) -> &str {
        Reader::target(self)
    }
}

impl crate::backend::kit::doors::Read for Reader {
    fn renew_read_budget(&self) {
        Reader::read_budget(self).renew();
    }

    async fn read(&self, ids: &[&ResourceId]) -> Result<BTreeMap<ResourceId, Live>, Self::Error> {
        Reader::read(self, ids).await
    }

    async fn prunable(
        &self,
        skip: &std::collections::BTreeSet<ResourceId>,
        target: &Target,
    ) -> Result<Vec<Prunable>, Self::Error> {
        Reader::prunable(self, skip, target).await
    }

    async fn recheck(
        &self,
        ids: &[&ResourceId],
    ) -> Result<BTreeMap<ResourceId, Live>, Self::Error> {
        // One read of them all: the same listing or multi-name read the plan made.
        Reader::read(self, ids).await
    }

    async fn message_count(&self, id: &ResourceId) -> Result<Option<u64>, Self::Error> {
        Reader::message_count(self, id).await
    }

    async fn identity(&self) -> Result<String, Self::Error> {
        Reader::identity(self).await
    }
}

impl crate::backend::kit::doors::Import for Reader {
    async fn import(&self, target: &Target, prefix: Option<&str>) -> Result<Found, Self::Error> {
        Reader::import(self, target, prefix).await
    }
}

#[cfg(test)]
mod tests {
    //! The ARN a queue gets without a call, offline.
    use super::*;

    #[test]
    fn an_arn_follows_from_another_of_the_same_account_only_for_a_queue_known_to_exist() {
        let mut c = Cache::default();
        let url = |acct: &str, q: &str| format!("http://127.0.0.1:5000/{acct}/{q}");
        c.urls
            .insert("new-dlq".into(), url("123456789012", "new-dlq"));
        assert_eq!(c.arn_of("new-dlq"), None, "no ARN known yet");
        c.arns.insert(
            "other".into(),
            "arn:aws:sqs:us-east-1:123456789012:other".into(),
        );
        assert_eq!(
            c.arn_of("new-dlq").as_deref(),
            Some("arn:aws:sqs:us-east-1:123456789012:new-dlq")
        );
        assert_eq!(c.arn_of("unknown"), None, "not listed nor created");
        c.urls
            .insert("theirs".into(), url("999999999999", "theirs"));
        assert_eq!(c.arn_of("theirs"), None, "another account's URL");
    }
}
