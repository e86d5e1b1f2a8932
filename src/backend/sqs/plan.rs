//! SQS plan rules on top of the generic diff: [`refine`], the notes, the durations' unit.
//! Pure; the review of a plan's changes against what only further reads can tell lives in
//! `review.rs`.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::*;
use crate::plan::{Action, Note};
use crate::resource::{Desired, Live, Role, TimeUnit};
use crate::spec::access;

/// Observations (pure door): a dead-letter or invalid-message queue encrypted more weakly
/// than its source, as both are live, where the spec does not own that queue's encryption
/// (where it does, the plan changes it and lint judges the spec). Both hold the source's
/// messages.
pub fn notes(desired: &[Desired], live: &BTreeMap<ResourceId, Live>) -> Vec<Note> {
    let encryption = |l: &Live| {
        access::live_encryption(
            l.props.get(KMS_KEY),
            l.props.get(KMS_REUSE),
            l.props.get(MANAGED_SSE),
        )
    };
    let queue = |role: Role, channel: &str| {
        desired.iter().find(|d| {
            d.id.backend == Backend::Sqs
                && d.id.kind == Kind::Queue
                && d.role == role
                && d.channel == channel
        })
    };
    let mut out = Vec::new();
    for copy in desired.iter().filter(|d| {
        d.id.backend == Backend::Sqs
            && d.id.kind == Kind::Queue
            && matches!(d.role, Role::DeadLetter | Role::Invalid)
    }) {
        if copy.props.contains_key(MANAGED_SSE) {
            continue;
        }
        let Some(main) = queue(Role::Main, &copy.channel) else {
            continue;
        };
        let (Some(dl), Some(ml)) = (live.get(&copy.id), live.get(&main.id)) else {
            continue;
        };
        let (Some(de), Some(me)) = (encryption(dl), encryption(ml)) else {
            continue;
        };
        if de.level() < me.level() {
            out.push(Note {
                resource: copy.id.clone(),
                message: format!(
                    "{} encrypted less strongly than its source {} ({} here, {} there): it holds the same messages; `sqs.encryption` in the spec gives both the same",
                    if copy.role == Role::Invalid {
                        "invalid-message queue"
                    } else {
                        "dead-letter queue"
                    },
                    main.id.name,
                    de.level().describe(),
                    me.level().describe(),
                ),
            });
        }
    }
    out
}

/// No SQS change needs to run before the per-channel order (pure door).
pub fn goes_first(_changes: &[Change]) -> HashSet<ResourceId> {
    HashSet::new()
}

/// SQS keeps durations in seconds: queue retention and visibility timeout, an alarm's period,
/// and the threshold of the oldest-message-age alarm (pure door).
pub fn duration_unit(c: &Change, key: &str) -> Option<TimeUnit> {
    let age_alarm =
        || c.desired.get("MetricName") == Some(&Value::from(super::alarms::OLDEST_AGE_METRIC));
    match (c.resource.kind, key) {
        (Kind::Queue, RETENTION | VISIBILITY) | (Kind::Alarm, "Period") => Some(TimeUnit::Seconds),
        (Kind::Alarm, "Threshold") if age_alarm() => Some(TimeUnit::Seconds),
        _ => None,
    }
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

impl crate::backend::kit::doors::Plan for super::Sqs {
    fn desired(r: &crate::spec::resolve::Resolved) -> Vec<crate::resource::Desired> {
        super::desired::desired(r)
    }

    fn refine(change: &mut Change) {
        refine(change);
    }

    fn duration_unit(change: &Change, key: &str) -> Option<crate::resource::TimeUnit> {
        duration_unit(change, key)
    }

    /// SQS: a queue's MessageRetentionPeriod.
    fn is_retention(key: &str) -> bool {
        key == super::RETENTION
    }

    fn notes(
        desired: &[crate::resource::Desired],
        live: &BTreeMap<ResourceId, crate::resource::Live>,
    ) -> Vec<Note> {
        notes(desired, live)
    }

    fn goes_first(changes: &[Change]) -> HashSet<ResourceId> {
        goes_first(changes)
    }
}

#[cfg(test)]
mod tests {
    //! The pure doors and the ownership verdict, offline (the review's reads are live-tested).
    use serde_json::json;

    use super::*;
    use crate::backend::sqs::review::Verdict;
    use crate::plan::{FieldChange, diff};
    use crate::resource::{Props, Role};

    fn queue_change(kind: Kind, action: Action, props: Props) -> Change {
        let d = Desired {
            id: ResourceId {
                kind,
                ..queue_id("t", "q")
            },
            channel: "c".into(),
            role: Role::Main,
            props,
            immutable: false,
            present: true,
        };
        let mut c = diff(&d, None).expect("a create");
        c.action = action;
        c
    }

    fn props(pairs: &[(&str, Value)]) -> Props {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn sqs_durations_are_seconds_and_only_where_sqs_keeps_time() {
        let q = queue_change(Kind::Queue, Action::Update, Props::new());
        assert_eq!(duration_unit(&q, RETENTION), Some(TimeUnit::Seconds));
        assert_eq!(duration_unit(&q, VISIBILITY), Some(TimeUnit::Seconds));
        assert_eq!(duration_unit(&q, MAX_RECEIVE), None);
        assert_eq!(duration_unit(&q, "Period"), None, "a queue has no period");
        let age = queue_change(
            Kind::Alarm,
            Action::Create,
            props(&[("MetricName", json!(super::super::alarms::OLDEST_AGE_METRIC))]),
        );
        assert_eq!(duration_unit(&age, "Period"), Some(TimeUnit::Seconds));
        assert_eq!(duration_unit(&age, "Threshold"), Some(TimeUnit::Seconds));
        assert_eq!(duration_unit(&age, RETENTION), None);
        let depth = queue_change(
            Kind::Alarm,
            Action::Create,
            props(&[("MetricName", json!("ApproximateNumberOfMessagesVisible"))]),
        );
        assert_eq!(
            duration_unit(&depth, "Threshold"),
            None,
            "a count, not a time"
        );
        assert!(notes(&[], &BTreeMap::new()).is_empty());
        assert!(goes_first(&[q]).is_empty());
    }

    #[test]
    fn a_queue_holding_the_sources_messages_encrypted_more_weakly_is_noted() {
        let queue = |name: &str, role: Role, props: Props| Desired {
            id: queue_id("t", name),
            channel: "c".into(),
            role,
            props,
            immutable: false,
            present: true,
        };
        let kms = Live {
            props: props(&[(KMS_KEY, json!("alias/k")), (MANAGED_SSE, json!(false))]),
            messages: None,
        };
        let managed = Live {
            props: props(&[(MANAGED_SSE, json!(true))]),
            messages: None,
        };
        let desired = vec![
            queue("c-dlq", Role::DeadLetter, Props::new()),
            queue("c-invalid", Role::Invalid, Props::new()),
            queue("c", Role::Main, Props::new()),
            // Another kind of object of the channel: not a queue, never judged.
            Desired {
                id: ResourceId {
                    kind: Kind::Alarm,
                    ..queue_id("t", "c-dlq-depth")
                },
                ..queue("c-dlq-depth", Role::Alarm, Props::new())
            },
            // A channel of the same name on a RabbitMQ target: another backend's queue.
            Desired {
                id: ResourceId {
                    backend: Backend::Rabbitmq,
                    target: "r".into(),
                    ..queue_id("t", "c-dlq")
                },
                ..queue("c-dlq", Role::DeadLetter, Props::new())
            },
        ];
        let live: BTreeMap<ResourceId, Live> = [
            (desired[0].id.clone(), managed.clone()),
            (desired[1].id.clone(), managed.clone()),
            (desired[2].id.clone(), kms.clone()),
            (desired[3].id.clone(), managed.clone()),
            (desired[4].id.clone(), managed.clone()),
        ]
        .into_iter()
        .collect();
        let n = notes(&desired, &live);
        let said: Vec<(&str, &str)> = n
            .iter()
            .map(|n| (n.resource.name.as_str(), n.message.as_str()))
            .collect();
        assert_eq!(
            said,
            [
                (
                    "c-dlq",
                    "dead-letter queue encrypted less strongly than its source c (SSE-SQS here, SSE-KMS there): it holds the same messages; `sqs.encryption` in the spec gives both the same"
                ),
                (
                    "c-invalid",
                    "invalid-message queue encrypted less strongly than its source c (SSE-SQS here, SSE-KMS there): it holds the same messages; `sqs.encryption` in the spec gives both the same"
                ),
            ]
        );
        // As strong, or owned by the spec (the plan changes it): nothing to say.
        let mut same = live.clone();
        same.insert(desired[2].id.clone(), managed.clone());
        assert_eq!(notes(&desired, &same), Vec::new());
        let owned: Vec<Desired> = desired
            .iter()
            .cloned()
            .map(|mut d| {
                d.props.insert(MANAGED_SSE.into(), json!(true));
                d
            })
            .collect();
        assert_eq!(notes(&owned, &live), Vec::new());
    }

    fn retention(old: u64, new: u64) -> FieldChange {
        FieldChange {
            key: RETENTION.into(),
            old: Some(json!(old)),
            new: Some(json!(new)),
        }
    }

    #[test]
    fn refine_touches_only_queue_updates_and_an_equal_retention_is_not_lowered() {
        let mut same = queue_change(Kind::Queue, Action::Update, Props::new());
        same.fields = vec![retention(60, 60)];
        refine(&mut same);
        assert_eq!((same.action, same.destructive), (Action::Update, None));
        // A retention lowered on something that is not a queue update: left alone.
        for (kind, action) in [(Kind::Alarm, Action::Update), (Kind::Queue, Action::Create)] {
            let mut c = queue_change(kind, action, Props::new());
            c.fields = vec![
                retention(600, 60),
                FieldChange {
                    key: FIFO.into(),
                    old: Some(json!(false)),
                    new: Some(json!(true)),
                },
            ];
            refine(&mut c);
            assert_eq!(
                (c.action, c.destructive),
                (action, None),
                "{kind:?} {action:?}"
            );
        }
        // Unknown count: the message says nothing about how many.
        let mut c = queue_change(Kind::Queue, Action::Update, Props::new());
        c.messages = None;
        c.fields = vec![retention(600, 60)];
        refine(&mut c);
        let how = c.destructive.expect("destructive");
        assert!(
            how.contains("600 s to 60 s") && !how.contains("holds"),
            "{how}"
        );
    }

    fn desired(present: bool) -> Desired {
        Desired {
            id: queue_id("t", "q"),
            channel: "c".into(),
            role: Role::Main,
            props: props(&[(RETENTION, json!(60))]),
            immutable: false,
            present,
        }
    }

    fn live() -> BTreeMap<ResourceId, Live> {
        [(
            queue_id("t", "q"),
            Live {
                props: Props::new(),
                messages: Some(4),
            },
        )]
        .into()
    }

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// The plan after `verdict` on the change `changes` holds, and its notes.
    fn judged(
        d: &Desired,
        t: &BTreeMap<String, String>,
        adopt: bool,
        mut changes: Vec<Change>,
    ) -> (Vec<Change>, Vec<Note>) {
        let live = live();
        let mut notes = Vec::new();
        Verdict {
            desired: d,
            tags: t,
            problem: "is not dlqctl's",
            live: &live,
            adopt,
        }
        .apply(&mut changes, &mut notes);
        (changes, notes)
    }

    #[test]
    fn an_unowned_queue_is_adopted_only_when_asked_untagged_and_changed_in_place() {
        let d = desired(true);
        let untagged = tags(&[]);
        // Adopted with nothing else to change: an update that adds the two tags.
        let (c, n) = judged(&d, &untagged, true, Vec::new());
        assert!(n.is_empty());
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].action, c[0].messages), (Action::Update, Some(4)));
        let keys: Vec<&str> = c[0].fields.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["tags.managed-by", "tags.dlqctl-channel"]);
        // Adopted with a setting to change: the tags go first in the same update.
        let mut update = queue_change(Kind::Queue, Action::Update, Props::new());
        update.fields = vec![retention(120, 60)];
        let (c, _) = judged(&d, &untagged, true, vec![update.clone()]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].fields.len(), 3);
        assert_eq!(c[0].fields[2].key, RETENTION);
        // Without --adopt, or tagged by another tool, or replaced: impossible, with the reason.
        let foreign = tags(&[(TAG_MANAGED_BY, "terraform")]);
        let mut replace = update.clone();
        replace.action = Action::Replace;
        for (t, adopt, change) in [
            (&untagged, false, update.clone()),
            (&foreign, true, update.clone()),
            (&untagged, true, replace),
        ] {
            let (c, n) = judged(&d, t, adopt, vec![change]);
            assert!(n.is_empty());
            assert_eq!(c.len(), 1);
            assert_eq!(c[0].action, Action::Impossible, "{t:?} adopt={adopt}");
            assert_eq!(c[0].messages, Some(4));
            assert_eq!(c[0].fields.len(), 1, "the fields stay for the reader");
            let reason = c[0].reason.as_deref().unwrap_or_default();
            assert_eq!(reason, "queue q is not dlqctl's");
        }
        // Nothing planned for it and not adoptable: impossible all the same.
        let (c, _) = judged(&d, &untagged, false, Vec::new());
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].action, Action::Impossible);
    }

    #[test]
    fn an_unowned_queue_no_spec_wants_is_left_alone_with_a_note() {
        let d = desired(false);
        let mut delete = queue_change(Kind::Queue, Action::Delete, Props::new());
        delete.messages = Some(4);
        let other = {
            let mut c = delete.clone();
            c.resource.name = "other".into();
            c
        };
        let (c, n) = judged(&d, &tags(&[]), true, vec![delete, other]);
        let names: Vec<&str> = c.iter().map(|c| c.resource.name.as_str()).collect();
        assert_eq!(names, ["other"], "only its own delete goes");
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].message, "queue is not dlqctl's; left alone");
    }
}
