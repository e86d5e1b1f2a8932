//! SQS: a channel's dead-letter queue, its main queue with the redrive policy pointing at it,
//! and (through `cloudwatch`) the two alarms on the DLQ.
//!
//! Queue attributes are read back into flat, normalised properties so that the generic diff
//! compares meaning: numbers as numbers, `FifoQueue` as a boolean, and the RedrivePolicy JSON
//! as `RedrivePolicy.deadLetterTarget` (the DLQ's *name*, so a plan needs no ARN before the
//! DLQ exists; apply resolves the ARN) and `RedrivePolicy.maxReceiveCount`.
//!
//! Ownership is recorded on the live objects as tags (`managed-by: dlqctl`,
//! `dlqctl-channel: <channel>`). Tags cost one call per object, so they are read only where a
//! plan would write: a plan with no changes makes ⌈Q/1000⌉ ListQueues calls, one
//! GetQueueAttributes per existing queue and ⌈A/100⌉ DescribeAlarms calls, nothing more. A
//! queue or alarm that is not provably dlqctl's is never changed or deleted: the plan marks it
//! `impossible`, unless `--adopt` asks to take over what no tool claims yet (an update that
//! adds the two tags; tags are then read for every existing object). `--prune` lists the
//! queues and alarms in scope and reads the tags of those no spec names.
//!
//! RedriveAllowPolicy is written on the DLQ, but some endpoints cannot return it (moto answers
//! InvalidAttributeName). When a plan finds it missing, one probe asks for it by name; if the
//! endpoint cannot return it, the plan says so in a note instead of showing a change forever.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use super::Prunable;
use super::aws::{Aws, AwsError, ErrorKind, Settings, arn_name, arn_prefix, classify};
use super::cloudwatch;
use super::http::Stats;
use crate::plan::{Action, Change, FieldChange, Note};
use crate::resource::{Desired, Kind, Live, Props, ResourceId, Role, same};
use crate::spec::model::Backend;
use crate::spec::resolve::Resolved;

/// ListQueues page size (the API's maximum).
pub const PAGE_SIZE: i32 = 1000;
/// Calls in flight at once per target.
pub const CONCURRENCY: usize = 8;
pub const TAG_MANAGED_BY: &str = "managed-by";
pub const TAG_MANAGED_BY_VALUE: &str = "dlqctl";
pub const TAG_CHANNEL: &str = "dlqctl-channel";
/// How long SQS refuses to re-create a queue name after deleting it.
pub const NAME_REUSE_DELAY: Duration = Duration::from_secs(60);

pub const RETENTION: &str = "MessageRetentionPeriod";
pub const VISIBILITY: &str = "VisibilityTimeout";
pub const FIFO: &str = "FifoQueue";
pub const DLQ_TARGET: &str = "RedrivePolicy.deadLetterTarget";
pub const MAX_RECEIVE: &str = "RedrivePolicy.maxReceiveCount";
const ALLOW_PERMISSION: &str = "RedriveAllowPolicy.redrivePermission";
const ALLOW_SOURCES: &str = "RedriveAllowPolicy.sourceQueues";

/// Queue attributes dlqctl does not own, read so that a plan can list them as unmanaged
/// settings, with the values SQS gives a queue nobody configured (either of two for
/// MaximumMessageSize: AWS raised its default from 256 KiB to 1 MiB in 2025). Read-only
/// attributes (ARN, timestamps, counts) are not settings and are left out.
const UNOWNED_ATTRIBUTES: [(&str, &[&str]); 10] = [
    ("DelaySeconds", &["0"]),
    ("MaximumMessageSize", &["262144", "1048576"]),
    ("ReceiveMessageWaitTimeSeconds", &["0"]),
    ("KmsMasterKeyId", &[]),
    ("KmsDataKeyReusePeriodSeconds", &["300"]),
    ("SqsManagedSseEnabled", &["true"]),
    ("ContentBasedDeduplication", &["false"]),
    ("DeduplicationScope", &["queue"]),
    ("FifoThroughputLimit", &["perQueue"]),
    ("Policy", &[]),
];

/// The live key listing the unowned attributes that hold SQS's default value (see
/// [`crate::plan::unmanaged`]).
const DEFAULTS_KEY: &str = "@defaults";

/// SQS says "no such queue" in two ways, depending on the protocol.
const NO_SUCH_QUEUE: [&str; 2] = [
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
];
const QUEUE_EXISTS: [&str; 2] = ["QueueAlreadyExists", "QueueNameExists"];
const DELETED_RECENTLY: [&str; 2] = [
    "AWS.SimpleQueueService.QueueDeletedRecently",
    "QueueDeletedRecently",
];

pub fn queue_id(target: &str, name: &str) -> ResourceId {
    ResourceId {
        target: target.to_owned(),
        backend: Backend::Sqs,
        kind: Kind::Queue,
        scope: String::new(),
        name: name.to_owned(),
    }
}

/// The desired resources of one channel (pure): DLQ, main queue, two alarms.
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(s) = &r.sqs else { return Vec::new() };
    let secs = |d: Option<crate::spec::duration::Duration>| {
        d.map_or(Value::Null, |d| json!(d.as_millis() / 1000))
    };
    let visibility = json!(s.visibility_timeout.as_millis() / 1000);
    let dlq: Props = [
        (RETENTION, secs(r.dead_letter_retention)),
        (VISIBILITY, visibility.clone()),
        (FIFO, json!(s.fifo)),
        // A DLQ does not dead-letter further: a redrive policy on it is removed.
        (DLQ_TARGET, Value::Null),
        (MAX_RECEIVE, Value::Null),
        (ALLOW_PERMISSION, json!("byQueue")),
        (ALLOW_SOURCES, json!([r.main])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let main: Props = [
        (RETENTION, secs(r.retention)),
        (VISIBILITY, visibility),
        (FIFO, json!(s.fifo)),
        (DLQ_TARGET, json!(r.dead_letter)),
        (MAX_RECEIVE, json!(r.max_attempts)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut out: Vec<Desired> = [
        (&r.dead_letter, Role::DeadLetter, dlq),
        (&r.main, Role::Main, main),
    ]
    .into_iter()
    .map(|(name, role, props)| Desired {
        id: queue_id(&r.target, name),
        channel: r.channel.clone(),
        role,
        props,
        immutable: false,
        present: true,
    })
    .collect();
    out.extend(cloudwatch::desired(r));
    out
}

/// Rules the generic diff cannot know (pure): `FifoQueue` cannot change in place (the queue
/// is replaced), and lowering the retention deletes every message older than the new value.
pub fn refine(c: &mut Change) {
    if c.resource.kind != Kind::Queue || c.action != Action::Update {
        return;
    }
    if c.fields.iter().any(|f| f.key == FIFO) {
        c.action = Action::Replace;
        return;
    }
    let secs = |v: &Option<Value>| v.as_ref().and_then(Value::as_u64);
    if let Some(f) = c.fields.iter().find(|f| f.key == RETENTION)
        && let (Some(old), Some(new)) = (secs(&f.old), secs(&f.new))
        && new < old
    {
        let held = match c.messages {
            Some(n) => format!("; the queue holds {n} messages now"),
            None => String::new(),
        };
        c.destructive = Some(format!(
            "lowering {RETENTION} from {old} s to {new} s deletes every message older than {new} s at once{held}"
        ));
    }
}

/// Why a live object is not provably this channel's, from its tags (`None`: it is).
pub fn ownership_problem(tags: &BTreeMap<String, String>, channel: &str) -> Option<String> {
    match tags.get(TAG_MANAGED_BY).map(String::as_str) {
        Some(TAG_MANAGED_BY_VALUE) => {}
        None => {
            return Some(format!(
                "exists but is not tagged `{TAG_MANAGED_BY}: {TAG_MANAGED_BY_VALUE}`, so dlqctl did not create it and will not change it; adopt it with `dlqctl plan --adopt` / `dlqctl apply --adopt` (only the two tags are added; `dlqctl import` writes a spec from it), or delete or rename it"
            ));
        }
        Some(other) => {
            return Some(format!(
                "is tagged `{TAG_MANAGED_BY}: {other}`: another tool manages it, and dlqctl will not change or adopt it"
            ));
        }
    }
    match tags.get(TAG_CHANNEL) {
        Some(c) if c == channel => None,
        Some(other) => Some(format!(
            "belongs to dlqctl channel `{other}` (tag `{TAG_CHANNEL}`), not `{channel}`; two channels cannot share it"
        )),
        None => Some(format!(
            "has no `{TAG_CHANNEL}` tag, so it cannot be tied to channel `{channel}`"
        )),
    }
}

/// Why a live object is not dlqctl's at all, whatever its channel (`None`: it is).
fn ownership_problem_any(tags: &BTreeMap<String, String>) -> Option<String> {
    let channel = tags.get(TAG_CHANNEL).map_or("", String::as_str);
    if channel.is_empty() {
        return Some(format!("has no `{TAG_CHANNEL}` tag"));
    }
    ownership_problem(tags, channel)
}

/// Whether `--adopt` may take over a live object with these tags: nothing claims it yet
/// (no `managed-by` tag). Objects another tool manages are never adopted.
pub fn adoptable(tags: &BTreeMap<String, String>) -> bool {
    !tags.contains_key(TAG_MANAGED_BY)
}

/// Plan fields that add the ownership tags (an adoption); apply writes them as tags.
pub const TAG_FIELD_PREFIX: &str = "tags.";

fn adoption_fields(tags: &BTreeMap<String, String>, channel: &str) -> Vec<FieldChange> {
    vec![
        FieldChange {
            key: format!("{TAG_FIELD_PREFIX}{TAG_MANAGED_BY}"),
            old: None,
            new: Some(json!(TAG_MANAGED_BY_VALUE)),
        },
        FieldChange {
            key: format!("{TAG_FIELD_PREFIX}{TAG_CHANNEL}"),
            old: tags.get(TAG_CHANNEL).map(|c| json!(c)),
            new: Some(json!(channel)),
        },
    ]
}

/// Whether a planned change adopts the object (adds the ownership tags).
pub fn is_adoption(change: &Change) -> bool {
    change
        .fields
        .iter()
        .any(|f| f.key.starts_with(TAG_FIELD_PREFIX))
}

/// Whether a name is inside the target's ownership prefixes (no prefixes: every name).
pub fn in_prefixes(prefixes: &[String], name: &str) -> bool {
    prefixes.is_empty() || prefixes.iter().any(|p| name.starts_with(p.as_str()))
}

/// The prefixes to list (ListQueues, DescribeAlarms) to see every name inside the ownership
/// prefixes that also starts with `filter`: `[""]` is everything.
pub fn listing_prefixes(prefixes: &[String], filter: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = match (prefixes.is_empty(), filter) {
        (true, None) => vec![String::new()],
        (true, Some(f)) => vec![f.to_owned()],
        (false, None) => prefixes.to_vec(),
        (false, Some(f)) => prefixes
            .iter()
            .filter_map(|p| {
                if f.starts_with(p.as_str()) {
                    Some(f.to_owned())
                } else if p.starts_with(f) {
                    Some(p.clone())
                } else {
                    None
                }
            })
            .collect(),
    };
    out.sort();
    out.dedup();
    // A prefix that another one in the list starts with is already covered.
    let all = out.clone();
    out.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q.as_str())));
    out
}

/// The tags dlqctl puts on everything it creates.
fn ownership_tags(channel: &str) -> [(&'static str, &str); 2] {
    [
        (TAG_MANAGED_BY, TAG_MANAGED_BY_VALUE),
        (TAG_CHANNEL, channel),
    ]
}

/// A queue's attributes (as GetQueueAttributes returns them) in the flat shape of
/// [`desired`], with the messages it holds.
pub fn live_queue(attrs: &BTreeMap<String, String>) -> Live {
    let mut props = Props::new();
    let number = |k: &str| attrs.get(k).and_then(|v| v.trim().parse::<u64>().ok());
    for k in [RETENTION, VISIBILITY] {
        if let Some(v) = attrs.get(k) {
            props.insert(
                k.to_owned(),
                number(k).map_or_else(|| json!(v), |n| json!(n)),
            );
        }
    }
    props.insert(
        FIFO.to_owned(),
        json!(
            attrs
                .get(FIFO)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        ),
    );
    let own_prefix = attrs
        .get("QueueArn")
        .map(|a| arn_prefix(a).to_owned())
        .unwrap_or_default();
    // An ARN in this queue's account and region is shown by name; any other in full.
    let short = |arn: &str| {
        if !own_prefix.is_empty() && arn_prefix(arn) == own_prefix {
            arn_name(arn).to_owned()
        } else {
            arn.to_owned()
        }
    };
    if let Some(raw) = attrs.get("RedrivePolicy").filter(|r| !r.trim().is_empty()) {
        match serde_json::from_str::<Value>(raw) {
            Ok(p) => {
                if let Some(arn) = p.get("deadLetterTargetArn").and_then(Value::as_str) {
                    props.insert(DLQ_TARGET.to_owned(), json!(short(arn)));
                }
                if let Some(n) = p.get("maxReceiveCount").and_then(as_count) {
                    props.insert(MAX_RECEIVE.to_owned(), n);
                }
            }
            Err(_) => {
                props.insert("RedrivePolicy".to_owned(), json!(raw));
            }
        }
    }
    if let Some(raw) = attrs
        .get("RedriveAllowPolicy")
        .filter(|r| !r.trim().is_empty())
    {
        match serde_json::from_str::<Value>(raw) {
            Ok(p) => {
                if let Some(perm) = p.get("redrivePermission").and_then(Value::as_str) {
                    props.insert(ALLOW_PERMISSION.to_owned(), json!(perm));
                }
                if let Some(arns) = p.get("sourceQueueArns").and_then(Value::as_array) {
                    let mut names: Vec<String> =
                        arns.iter().filter_map(Value::as_str).map(short).collect();
                    names.sort();
                    props.insert(ALLOW_SOURCES.to_owned(), json!(names));
                }
            }
            Err(_) => {
                props.insert("RedriveAllowPolicy".to_owned(), json!(raw));
            }
        }
    }
    let mut defaults = Vec::new();
    for (key, default_values) in UNOWNED_ATTRIBUTES {
        let Some(v) = attrs.get(key) else { continue };
        if default_values.contains(&v.as_str()) {
            defaults.push(json!(key));
        }
        props.insert(
            key.to_owned(),
            v.trim()
                .parse::<u64>()
                .map_or_else(|_| json!(v), |n| json!(n)),
        );
    }
    if !defaults.is_empty() {
        props.insert(DEFAULTS_KEY.to_owned(), Value::Array(defaults));
    }
    let messages = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    .iter()
    .map(|k| number(k))
    .try_fold(0u64, |acc, n| n.map(|n| acc.saturating_add(n)));
    Live { props, messages }
}

/// `maxReceiveCount` as a number, whether it was stored as `3` or `"3"`.
fn as_count(v: &Value) -> Option<Value> {
    match v {
        Value::Number(_) => Some(v.clone()),
        Value::String(s) => s.trim().parse::<u64>().ok().map(|n| json!(n)),
        _ => None,
    }
}

/// The longest prefix shared by all names (ListQueues filters by prefix).
fn common_prefix<'a>(names: &[&'a str]) -> &'a str {
    let Some(first) = names.first() else {
        return "";
    };
    let mut len = first.len();
    for n in &names[1..] {
        len = first
            .char_indices()
            .zip(n.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map_or(0, |((i, a), _)| i + a.len_utf8())
            .min(len);
    }
    &first[..len]
}

/// Names seen during a run: queue URLs and ARNs, alarm ARNs (saves calls in apply).
#[derive(Debug, Default)]
struct Cache {
    urls: BTreeMap<String, String>,
    arns: BTreeMap<String, String>,
    alarm_arns: BTreeMap<String, String>,
}

/// Read-only view of one SQS target (and its CloudWatch alarms).
#[derive(Debug, Clone)]
pub struct Reader {
    pub target: String,
    aws: Arc<Aws>,
    cache: Arc<Mutex<Cache>>,
    /// Whether the endpoint can return RedriveAllowPolicy (probed at most once, when needed).
    allow_policy_readable: Arc<OnceCell<bool>>,
    /// The target's optional `ownership.prefixes`: when declared, dlqctl also keeps to names
    /// inside them (prune, import, and every change or delete of a live object).
    prefixes: Vec<String>,
}

/// What `import` needs of one SQS target: queues with their tags, and the alarms that may
/// watch them.
#[derive(Debug, Default)]
pub struct Inventory {
    pub queues: BTreeMap<String, SeenQueue>,
    pub alarms: BTreeMap<String, SeenAlarm>,
    /// Whether this endpoint returns RedriveAllowPolicy at all (moto does not).
    pub allow_policy_readable: bool,
}

#[derive(Debug, Clone)]
pub struct SeenQueue {
    pub live: Live,
    pub tags: BTreeMap<String, String>,
    /// The raw attributes (RedrivePolicy's target ARN, QueueArn).
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct SeenAlarm {
    pub props: Props,
    pub tags: BTreeMap<String, String>,
}

impl Reader {
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
    async fn list_queues(&self, prefix: &str) -> Result<Vec<(String, String)>, AwsError> {
        let what = if prefix.is_empty() {
            "queues".to_owned()
        } else {
            format!("queues starting with {prefix}")
        };
        let mut out = Vec::new();
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
                out.push((name.to_owned(), url.clone()));
            }
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                _ => break,
            }
        }
        self.cached(|c| c.urls.extend(out.iter().cloned()));
        Ok(out)
    }

    /// Queue names in scope: inside the ownership prefixes and starting with `filter`.
    async fn queues_in_scope(&self, filter: Option<&str>) -> Result<Vec<String>, AwsError> {
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
    /// QueueName dimension, whatever they are called).
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
        let alarms = cloudwatch::list(&self.aws, "").await?;
        let watched: Vec<(String, Option<String>, Props)> = alarms
            .into_iter()
            .filter(|(_, a)| {
                a.props
                    .get("Dimensions")
                    .and_then(|d| d.get("QueueName"))
                    .and_then(Value::as_str)
                    .is_some_and(|q| {
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
                    Some(arn) => cloudwatch::tags(&self.aws, &name, arn).await?,
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
    /// in scope, and for every AWS/SQS alarm in scope.
    pub async fn prunable(&self, skip: &BTreeSet<ResourceId>) -> Result<Vec<Prunable>, AwsError> {
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
                let role = if q.live.props.contains_key(DLQ_TARGET) {
                    Role::Main
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
            alarms.extend(cloudwatch::list(&self.aws, &prefix).await?);
        }
        let candidates: Vec<(String, cloudwatch::LiveAlarm)> = alarms
            .into_iter()
            .filter(|(name, a)| {
                in_prefixes(&self.prefixes, name)
                    && !skipped(Kind::Alarm, name)
                    && a.props.get("Namespace").and_then(Value::as_str)
                        == Some(cloudwatch::NAMESPACE)
            })
            .collect();
        let found: Vec<Option<Prunable>> = stream::iter(candidates)
            .map(|(name, a)| async move {
                let Some(arn) = a.arn.clone() else {
                    return Ok(None);
                };
                self.cached(|c| c.alarm_arns.insert(name.clone(), arn.clone()));
                let tags = cloudwatch::tags(&self.aws, &name, &arn).await?;
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

    fn cached<T>(&self, f: impl FnOnce(&mut Cache) -> T) -> Option<T> {
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
                cloudwatch::read(&self.aws, &alarms).await
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

    async fn read_queues(&self, names: &[&str]) -> Result<BTreeMap<ResourceId, Live>, AwsError> {
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
    async fn attributes(
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
    async fn url(&self, name: &str) -> Result<Option<String>, AwsError> {
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
    async fn arn(&self, name: &str) -> Result<String, AwsError> {
        if let Some(Some(a)) = self.cached(|c| c.arns.get(name).cloned()) {
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
    pub async fn message_count(&self, name: &str) -> Result<Option<u64>, AwsError> {
        let Some(url) = self.url(name).await? else {
            return Ok(None);
        };
        Ok(self
            .attributes(name, &url, QueueAttributeName::All)
            .await?
            .and_then(|a| live_queue(&a).messages))
    }

    async fn queue_tags(&self, name: &str) -> Result<Option<BTreeMap<String, String>>, AwsError> {
        let Some(url) = self.url(name).await? else {
            return Ok(None);
        };
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

    async fn alarm_arn(&self, name: &str) -> Result<Option<String>, AwsError> {
        if let Some(Some(a)) = self.cached(|c| c.alarm_arns.get(name).cloned()) {
            return Ok(Some(a));
        }
        let found = cloudwatch::read(&self.aws, &[name.to_owned()]).await?;
        Ok(found.get(name).and_then(|a| a.arn.clone()))
    }

    /// The tags of a live queue or alarm; `None` when it does not exist (any more).
    async fn tags(&self, id: &ResourceId) -> Result<Option<BTreeMap<String, String>>, AwsError> {
        match id.kind {
            Kind::Alarm => match self.alarm_arn(&id.name).await? {
                Some(arn) => cloudwatch::tags(&self.aws, &id.name, &arn).await.map(Some),
                None => Ok(None),
            },
            _ => self.queue_tags(&id.name).await,
        }
    }

    /// Whether the endpoint returns RedriveAllowPolicy: asks for it by name once. AWS answers
    /// (with or without a value); an endpoint that does not store it answers
    /// InvalidAttributeName.
    async fn allow_policy_readable(&self, queue: &str) -> Result<bool, AwsError> {
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

    /// Checks the plan's SQS changes against what only more reads can tell: ownership tags
    /// (read for the channels the plan would change, and nowhere else; with `adopt`, for every
    /// existing object, and an unclaimed one gets an update adding the tags) and a
    /// RedriveAllowPolicy the endpoint cannot return.
    pub async fn review(
        &self,
        desired: &[Desired],
        live: &BTreeMap<ResourceId, Live>,
        changes: &mut Vec<Change>,
        notes: &mut Vec<Note>,
        adopt: bool,
    ) -> Result<(), AwsError> {
        let mine = |id: &ResourceId| id.target == self.target && id.backend == Backend::Sqs;

        // 1. A RedriveAllowPolicy that reads back absent: absent, or unreadable here?
        let mut i = 0;
        while i < changes.len() {
            let c = &changes[i];
            let allow_missing = mine(&c.resource)
                && c.action == Action::Update
                && c.fields
                    .iter()
                    .any(|f| f.key.starts_with("RedriveAllowPolicy.") && f.old.is_none())
                && live
                    .get(&c.resource)
                    .is_some_and(|l| !l.props.keys().any(|k| k.starts_with("RedriveAllowPolicy")));
            if allow_missing && !self.allow_policy_readable(&c.resource.name).await? {
                let c = &mut changes[i];
                c.fields
                    .retain(|f| !f.key.starts_with("RedriveAllowPolicy."));
                notes.push(Note {
                    resource: c.resource.clone(),
                    message: "RedriveAllowPolicy cannot be read from this endpoint (it answers InvalidAttributeName, as moto does): dlqctl writes it but cannot read it back to verify it".into(),
                });
                if c.fields.is_empty() {
                    changes.remove(i);
                    continue;
                }
            }
            i += 1;
        }

        // 2. Ownership of every existing object in a channel the plan would change (with
        //    `adopt`: of every existing object, since adopting is itself a change).
        let touched: BTreeSet<&str> = changes
            .iter()
            .filter(|c| mine(&c.resource))
            .map(|c| c.channel.as_str())
            .collect();
        let to_check: Vec<&Desired> = desired
            .iter()
            .filter(|d| {
                mine(&d.id)
                    && (adopt || touched.contains(d.channel.as_str()))
                    && live.contains_key(&d.id)
            })
            .collect();
        let verdicts: Vec<(&Desired, Option<BTreeMap<String, String>>)> = stream::iter(to_check)
            .map(|d| async move { Ok::<_, AwsError>((d, self.tags(&d.id).await?)) })
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        let mut verdicts: Vec<(&Desired, BTreeMap<String, String>, String)> = verdicts
            .into_iter()
            // Gone since it was read: the plan's create/delete logic stands.
            .filter_map(|(d, tags)| {
                let tags = tags?;
                let problem = ownership_problem(&tags, &d.channel)?;
                Some((d, tags, problem))
            })
            .collect();
        verdicts.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        for (d, tags, problem) in verdicts {
            let pos = changes.iter().position(|c| c.resource == d.id);
            let in_place = pos.is_none_or(|p| changes[p].action == Action::Update);
            if adopt && d.present && adoptable(&tags) && in_place {
                // Adoption: add the ownership tags; settings that already match stay as they are.
                let fields = adoption_fields(&tags, &d.channel);
                match pos {
                    Some(p) => {
                        let c = &mut changes[p];
                        c.fields.splice(0..0, fields);
                    }
                    None => changes.push(Change {
                        resource: d.id.clone(),
                        channel: d.channel.clone(),
                        role: d.role,
                        action: Action::Update,
                        fields,
                        desired: d.props.clone(),
                        messages: live.get(&d.id).and_then(|l| l.messages),
                        reason: None,
                        destructive: None,
                        pruned: false,
                    }),
                }
                continue;
            }
            if !d.present {
                // Not dlqctl's and not wanted: nothing to do with it.
                if let Some(p) = pos {
                    changes.remove(p);
                }
                notes.push(Note {
                    resource: d.id.clone(),
                    message: format!("{} {problem}; left alone", d.id.kind.as_str()),
                });
                continue;
            }
            let change = Change {
                resource: d.id.clone(),
                channel: d.channel.clone(),
                role: d.role,
                action: Action::Impossible,
                fields: pos.map(|p| changes[p].fields.clone()).unwrap_or_default(),
                desired: d.props.clone(),
                messages: live.get(&d.id).and_then(|l| l.messages),
                reason: Some(format!("{} {} {problem}", d.id.kind.as_str(), d.id.name)),
                destructive: None,
                pruned: false,
            };
            match pos {
                Some(p) => changes[p] = change,
                None => changes.push(change),
            }
        }
        Ok(())
    }
}

/// Read-write access to one SQS target, for apply.
#[derive(Debug, Clone)]
pub struct Writer {
    pub reader: Reader,
}

impl Writer {
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
                let res = cloudwatch::delete(self.aws(), &r.name).await;
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
                let res = cloudwatch::put(self.aws(), &r.name, &change.desired, tags).await;
                self.verify_alarm(res, &r.name, Some(&change.desired)).await
            }
            (Kind::Policy | Kind::Exchange | Kind::Binding | Kind::Topic, _) => Ok(()),
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
                cloudwatch::tag(self.aws(), &r.name, &arn, &wanted).await
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
        // The allow policy needs this queue's own ARN; on create it is set right after.
        if !create {
            if let Some(a) = self.allow_policy(name, desired).await? {
                out.push((QueueAttributeName::RedriveAllowPolicy, a));
            }
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
            self.set(
                name,
                vec![(QueueAttributeName::RedriveAllowPolicy, policy)],
                change,
            )
            .await?;
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
        let found = cloudwatch::read(self.aws(), &[name.to_owned()]).await?;
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
            let held = self.reader.message_count(name).await?;
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
fn deleted_recently(e: AwsError) -> AwsError {
    AwsError {
        detail: format!(
            "SQS does not allow re-creating a queue within {} s of deleting one with the same name (QueueDeletedRecently); wait a minute, then run `dlqctl apply` again: the plan will show the remaining create",
            NAME_REUSE_DELAY.as_secs()
        ),
        ..e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{FieldChange, diff};

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn attributes_read_back_as_meaning_not_text() {
        let live = live_queue(&attrs(&[
            ("QueueArn", "arn:aws:sqs:us-east-1:123456789012:payments"),
            ("MessageRetentionPeriod", "345600"),
            ("VisibilityTimeout", "30"),
            (
                "RedrivePolicy",
                r#"{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:123456789012:payments-dlq", "maxReceiveCount": "5"}"#,
            ),
            ("ApproximateNumberOfMessages", "2"),
            ("ApproximateNumberOfMessagesNotVisible", "1"),
            ("ApproximateNumberOfMessagesDelayed", "0"),
        ]));
        assert_eq!(*live.props.get(RETENTION).unwrap(), json!(345600));
        assert_eq!(*live.props.get(FIFO).unwrap(), json!(false));
        assert_eq!(*live.props.get(DLQ_TARGET).unwrap(), json!("payments-dlq"));
        assert_eq!(*live.props.get(MAX_RECEIVE).unwrap(), json!(5));
        assert_eq!(live.messages, Some(3));
    }

    #[test]
    fn unowned_attributes_are_listed_unless_they_hold_the_default() {
        let live = live_queue(&attrs(&[
            ("DelaySeconds", "5"),
            ("MaximumMessageSize", "1048576"),
            ("ReceiveMessageWaitTimeSeconds", "0"),
            ("QueueArn", "arn:aws:sqs:us-east-1:123456789012:payments"),
            ("CreatedTimestamp", "1796045196"),
        ]));
        let d = Desired {
            id: queue_id("t", "payments"),
            channel: "c".into(),
            role: Role::Main,
            props: [(FIFO.to_owned(), json!(false))].into_iter().collect(),
            immutable: false,
            present: true,
        };
        assert_eq!(crate::plan::unmanaged(&d, &live), vec!["DelaySeconds = 5"]);
    }

    #[test]
    fn a_dead_letter_target_in_another_account_is_shown_in_full() {
        let live = live_queue(&attrs(&[
            ("QueueArn", "arn:aws:sqs:us-east-1:123456789012:payments"),
            (
                "RedrivePolicy",
                r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:999999999999:payments-dlq","maxReceiveCount":5}"#,
            ),
            (
                "RedriveAllowPolicy",
                r#"{"redrivePermission":"byQueue","sourceQueueArns":["arn:aws:sqs:us-east-1:123456789012:b","arn:aws:sqs:us-east-1:123456789012:a"]}"#,
            ),
        ]));
        assert_eq!(
            *live.props.get(DLQ_TARGET).unwrap(),
            json!("arn:aws:sqs:us-east-1:999999999999:payments-dlq")
        );
        assert_eq!(*live.props.get(ALLOW_SOURCES).unwrap(), json!(["a", "b"]));
        assert_eq!(live.messages, None, "counts not read");
    }

    #[test]
    fn unparsable_policies_are_kept_as_text_and_differ() {
        let live = live_queue(&attrs(&[("RedrivePolicy", "{not json")]));
        assert_eq!(
            *live.props.get("RedrivePolicy").unwrap(),
            json!("{not json")
        );
        assert!(!live.props.contains_key(DLQ_TARGET));
    }

    fn update(fields: Vec<FieldChange>) -> Change {
        let d = Desired {
            id: queue_id("t", "q"),
            channel: "c".into(),
            role: Role::Main,
            props: Props::new(),
            immutable: false,
            present: true,
        };
        let mut c = diff(&d, None).unwrap_or_else(|| unreachable!());
        c.action = Action::Update;
        c.fields = fields;
        c.messages = Some(7);
        c
    }

    #[test]
    fn lowering_retention_is_destructive_and_raising_it_is_not() {
        let f = |old: u64, new: u64| FieldChange {
            key: RETENTION.into(),
            old: Some(json!(old)),
            new: Some(json!(new)),
        };
        let mut c = update(vec![f(345600, 86400)]);
        refine(&mut c);
        assert_eq!(c.action, Action::Update);
        let how = c.destructive.unwrap_or_default();
        assert!(
            how.contains("345600 s to 86400 s") && how.contains("holds 7 messages"),
            "{how}"
        );
        let mut c = update(vec![f(86400, 345600)]);
        refine(&mut c);
        assert_eq!(c.destructive, None);
    }

    #[test]
    fn a_fifo_change_is_a_replace() {
        let mut c = update(vec![FieldChange {
            key: FIFO.into(),
            old: Some(json!(false)),
            new: Some(json!(true)),
        }]);
        refine(&mut c);
        assert_eq!(c.action, Action::Replace);
    }

    #[test]
    fn only_tagged_objects_of_the_same_channel_are_owned() {
        let tags = |pairs: &[(&str, &str)]| attrs(pairs);
        assert_eq!(
            ownership_problem(
                &tags(&[("managed-by", "dlqctl"), ("dlqctl-channel", "c")]),
                "c"
            ),
            None
        );
        assert!(
            ownership_problem(&tags(&[]), "c")
                .unwrap_or_default()
                .contains("dlqctl import")
        );
        assert!(
            ownership_problem(
                &tags(&[("managed-by", "dlqctl"), ("dlqctl-channel", "d")]),
                "c"
            )
            .unwrap_or_default()
            .contains("`d`")
        );
    }

    #[test]
    fn the_name_reuse_refusal_says_what_to_do() {
        let e = AwsError::new(
            "sqs:CreateQueue",
            "queue q",
            ErrorKind::Rejected,
            "QueueDeletedRecently: ...",
        );
        let text = deleted_recently(e).to_string();
        assert!(text.starts_with("sqs:CreateQueue on queue q: "), "{text}");
        assert!(
            text.contains("within 60 s") && text.contains("run `dlqctl apply` again"),
            "{text}"
        );
    }

    #[test]
    fn listing_uses_the_longest_shared_prefix() {
        assert_eq!(common_prefix(&["payments", "payments-dlq"]), "payments");
        assert_eq!(common_prefix(&["a-x", "a-y", "a-"]), "a-");
        assert_eq!(common_prefix(&["x", "y"]), "");
        assert_eq!(common_prefix(&[]), "");
    }
}
