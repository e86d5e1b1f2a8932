//! SQS: a channel's dead-letter queue, its main queue with the redrive policy pointing at it,
//! its invalid-message queue when the spec has one (RedriveAllowPolicy `denyAll`), and
//! (through [`alarms`]) the CloudWatch alarms on the DLQ and on the invalid-message queue.
//!
//! The doors, each in its own file: [`desired`] (pure: resolved channel → resources),
//! [`read`] (read-only: live state, inventory, prunable objects, message counts), [`plan`]
//! (backend rules on top of the generic diff; its review reads tags but never writes),
//! [`apply`] (the only writer), [`import`] (live → specs, pure over what `read` saw) and
//! [`alarms`] (CloudWatch, for all of them). This file holds what they share: names,
//! attribute keys and the ownership rules.
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
//! Encryption (`KmsMasterKeyId`, `KmsDataKeyReusePeriodSeconds`, `SqsManagedSseEnabled`) and
//! the access policy (`Policy`, compared as parsed JSON, statement order ignored) are owned
//! only where the spec writes them; where it does not, the plan still notes a dead-letter
//! queue encrypted more weakly than its source (see `spec::access`).
//!
//! RedriveAllowPolicy is written on the DLQ, but some endpoints cannot return it (moto answers
//! InvalidAttributeName). When a plan finds it missing, one probe asks for it by name; if the
//! endpoint cannot return it, the plan says so in a note instead of showing a change forever.

pub mod alarms;
pub mod apply;
pub mod desired;
pub mod draw;
pub mod import;
pub mod live;
pub mod move_task;
pub mod plan;
pub mod read;
pub mod redrive;
pub mod replay;
pub mod review;
pub mod status;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use crate::plan::{Change, FieldChange};
use crate::resource::{Kind, ResourceId};
use crate::spec::model::Backend;

/// ListQueues page size (the API's maximum).
pub const PAGE_SIZE: i32 = 1000;
/// Calls in flight at once per target (reads; apply's writes follow `--parallelism`). With
/// 8, a plan of 4,000 queues and 4,000 alarms behind 20 ms of latency waited on the network
/// (4,045 calls × 20 ms ÷ 8 ≈ 10 s, against the server's 6.6 s of work); with 32 the latency
/// hides behind the server's own time (BENCHMARKS.md §8).
pub const CONCURRENCY: usize = 32;
/// Ownership by tag: the kit's rule, shared with Pub/Sub's labels.
pub use crate::backend::kit::ownership::{
    CHANNEL as TAG_CHANNEL, MANAGED_BY as TAG_MANAGED_BY, MANAGED_BY_VALUE as TAG_MANAGED_BY_VALUE,
    adoptable, in_prefixes, ownership_problem,
};
/// How long SQS refuses to re-create a queue name after deleting it.
pub const NAME_REUSE_DELAY: Duration = Duration::from_secs(60);

pub const RETENTION: &str = "MessageRetentionPeriod";
pub const VISIBILITY: &str = "VisibilityTimeout";
pub const FIFO: &str = "FifoQueue";
pub const DLQ_TARGET: &str = "RedrivePolicy.deadLetterTarget";
pub const MAX_RECEIVE: &str = "RedrivePolicy.maxReceiveCount";
pub const KMS_KEY: &str = "KmsMasterKeyId";
pub const KMS_REUSE: &str = "KmsDataKeyReusePeriodSeconds";
pub const MANAGED_SSE: &str = "SqsManagedSseEnabled";
/// The queue access policy, read back as normalised JSON (`spec::access`).
pub const POLICY: &str = "Policy";
pub(super) const ALLOW_PERMISSION: &str = "RedriveAllowPolicy.redrivePermission";
pub(super) const ALLOW_SOURCES: &str = "RedriveAllowPolicy.sourceQueues";

/// Queue attributes dlqctl does not own unless the spec says (encryption and policy are owned
/// only where `sqs.encryption` / `sqs.policy` are written), read so that a plan can list
/// them as unmanaged settings, with the values SQS gives a queue nobody configured (either of two for
/// MaximumMessageSize: AWS raised its default from 256 KiB to 1 MiB in 2025). Read-only
/// attributes (ARN, timestamps, counts) are not settings and are left out.
pub(super) const UNOWNED_ATTRIBUTES: [(&str, &[&str]); 10] = [
    ("DelaySeconds", &["0"]),
    ("MaximumMessageSize", &["262144", "1048576"]),
    ("ReceiveMessageWaitTimeSeconds", &["0"]),
    (KMS_KEY, &[]),
    (KMS_REUSE, &["300"]),
    (MANAGED_SSE, &["true"]),
    ("ContentBasedDeduplication", &["false"]),
    ("DeduplicationScope", &["queue"]),
    ("FifoThroughputLimit", &["perQueue"]),
    (POLICY, &[]),
];

/// The live key listing the unowned attributes that hold SQS's default value (see
/// [`crate::plan::unmanaged`]).
pub(super) const DEFAULTS_KEY: &str = "@defaults";

/// SQS says "no such queue" in two ways, depending on the protocol.
pub(super) const NO_SUCH_QUEUE: [&str; 2] = [
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
];
pub(super) const QUEUE_EXISTS: [&str; 2] = ["QueueAlreadyExists", "QueueNameExists"];
pub(super) const DELETED_RECENTLY: [&str; 2] = [
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

/// A queue ARN's parts (`arn:<partition>:sqs:<region>:<account>:<name>`), as SQS writes
/// one in a message's `DeadLetterQueueSourceArn`; `None`: not an SQS queue ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueArn {
    pub region: String,
    pub account: String,
    pub name: String,
}

impl QueueArn {
    pub fn parse(arn: &str) -> Option<QueueArn> {
        let mut parts = arn.trim().splitn(6, ':');
        let (arn_word, _partition, service) = (parts.next()?, parts.next()?, parts.next()?);
        let (region, account, name) = (parts.next()?, parts.next()?, parts.next()?);
        let ok = arn_word == "arn"
            && service == "sqs"
            && !account.is_empty()
            && !name.is_empty()
            && !name.contains([':', '/']);
        ok.then(|| QueueArn {
            region: region.to_owned(),
            account: account.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// `--to failed-consumer`: the source a dead letter goes back to, by its
/// `DeadLetterQueueSourceArn` (which SQS sets when a redrive policy moves it), and that
/// queue's name; `None`: none, or not a queue ARN.
pub fn failed_consumer_source(m: &crate::status::Message) -> Option<(String, String)> {
    let arn = m.source.as_deref()?;
    QueueArn::parse(arn).map(|q| (arn.trim().to_owned(), q.name))
}

/// Why a live object is not dlqctl's at all, whatever its channel (`None`: it is).
pub(super) fn ownership_problem_any(tags: &BTreeMap<String, String>) -> Option<String> {
    let channel = tags.get(TAG_CHANNEL).map_or("", String::as_str);
    if channel.is_empty() {
        return Some(format!("has no `{TAG_CHANNEL}` tag"));
    }
    ownership_problem(tags, channel)
}

/// Plan fields that add the ownership tags (an adoption); apply writes them as tags.
pub const TAG_FIELD_PREFIX: &str = "tags.";

pub(super) fn adoption_fields(tags: &BTreeMap<String, String>, channel: &str) -> Vec<FieldChange> {
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
pub(super) fn ownership_tags(channel: &str) -> [(&'static str, &str); 2] {
    [
        (TAG_MANAGED_BY, TAG_MANAGED_BY_VALUE),
        (TAG_CHANNEL, channel),
    ]
}

/// This backend's pure doors ([`crate::backend::kit::doors::Plan`], in `plan.rs`): the dispatcher's handle on them.
#[derive(Debug, Clone, Copy)]
pub struct Sqs;

#[cfg(test)]
mod tests {
    use super::apply::*;
    use super::plan::*;
    use super::read::*;
    use super::*;

    use super::live::*;
    use crate::backend::wire::aws::{AwsError, ErrorKind};
    use crate::plan::{Action, diff};
    use crate::resource::{Desired, Props, Role};

    #[test]
    fn a_source_arn_names_its_queue_and_account() {
        assert_eq!(
            QueueArn::parse("arn:aws:sqs:us-east-1:000000000000:orders-a"),
            Some(QueueArn {
                region: "us-east-1".into(),
                account: "000000000000".into(),
                name: "orders-a".into(),
            })
        );
        assert_eq!(
            QueueArn::parse("arn:aws-cn:sqs:cn-north-1:123456789012:o.fifo").map(|a| a.name),
            Some("o.fifo".to_owned())
        );
        for bad in [
            "",
            "orders-a",
            "arn:aws:sns:us-east-1:000000000000:topic",
            "arn:aws:sqs:us-east-1::orders",
            "arn:aws:sqs:us-east-1:000000000000:",
            "arn:aws:sqs:us-east-1:000000000000:a:b",
            "https://sqs.us-east-1.amazonaws.com/000000000000/orders",
        ] {
            assert_eq!(QueueArn::parse(bad), None, "`{bad}`");
        }
    }

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
    fn encryption_and_policy_read_back_as_meaning() {
        let live = live_queue(&attrs(&[
            ("KmsMasterKeyId", ""),
            ("SqsManagedSseEnabled", "false"),
            (
                "Policy",
                r#"{"Statement": [{"Sid": "b"}, {"Sid": "a"}], "Version": "2012-10-17"}"#,
            ),
        ]));
        assert!(
            !live.props.contains_key(KMS_KEY),
            "an empty key id is no key"
        );
        assert_eq!(*live.props.get(MANAGED_SSE).unwrap(), json!(false));
        assert_eq!(
            *live.props.get(POLICY).unwrap(),
            json!({"Statement": [{"Sid": "a"}, {"Sid": "b"}], "Version": "2012-10-17"})
        );
        let live = live_queue(&attrs(&[
            ("Policy", "{not json"),
            ("SqsManagedSseEnabled", "true"),
        ]));
        assert_eq!(*live.props.get(POLICY).unwrap(), json!("{not json"));
        assert_eq!(
            *live.props.get(DEFAULTS_KEY).unwrap(),
            json!([MANAGED_SSE]),
            "SSE-SQS is the default a new queue gets"
        );
    }

    fn queue_pair(
        dlq_attrs: &[(&str, &str)],
        main_attrs: &[(&str, &str)],
        owned: bool,
    ) -> Vec<crate::plan::Note> {
        let d = |name: &str, role| Desired {
            id: queue_id("t", name),
            channel: "c".into(),
            role,
            props: if owned && role == Role::DeadLetter {
                [(MANAGED_SSE.to_owned(), json!(true))]
                    .into_iter()
                    .collect()
            } else {
                Props::new()
            },
            immutable: false,
            present: true,
        };
        let desired = vec![d("c-dlq", Role::DeadLetter), d("c", Role::Main)];
        let live: BTreeMap<ResourceId, crate::resource::Live> = [
            (queue_id("t", "c-dlq"), live_queue(&attrs(dlq_attrs))),
            (queue_id("t", "c"), live_queue(&attrs(main_attrs))),
        ]
        .into_iter()
        .collect();
        notes(&desired, &live)
    }

    #[test]
    fn a_live_dlq_weaker_than_its_source_is_noted_unless_the_spec_owns_it() {
        let kms = [
            ("KmsMasterKeyId", "alias/k"),
            ("SqsManagedSseEnabled", "true"),
        ];
        let sse = [("SqsManagedSseEnabled", "true")];
        let none = [("SqsManagedSseEnabled", "false")];
        let n = queue_pair(&sse, &kms, false);
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(n[0].resource.name, "c-dlq");
        assert!(
            n[0].message.contains("(SSE-SQS here, SSE-KMS there)"),
            "{}",
            n[0].message
        );
        let n = queue_pair(&none, &sse, false);
        assert!(
            n[0].message
                .contains("(no server-side encryption here, SSE-SQS there)"),
            "{n:?}"
        );
        assert_eq!(
            queue_pair(&kms, &sse, false),
            Vec::new(),
            "stronger is fine"
        );
        assert_eq!(queue_pair(&sse, &sse, false), Vec::new());
        assert_eq!(
            queue_pair(&sse, &kms, true),
            Vec::new(),
            "owned: the plan changes it"
        );
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
