//! The plan: a value that says exactly what apply would do, built before anything changes.
//!
//! `diff` compares desired resources with what was read (only the keys dlqctl owns; other live
//! keys are listed as information) and labels each difference create / update / replace /
//! delete / impossible. The plan carries a fingerprint of every live object it read, so a saved
//! plan can be refused when the world moved on. Rendering lives in `render` (the
//! pull-request comment in `markdown`).

pub mod markdown;
pub mod render;
pub mod schema;

use std::collections::{BTreeMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::resource::{Desired, Live, Props, ResourceId, Role, same};
use crate::spec::model::Target;

/// Version of the plan JSON (both `--format json` and saved plans).
pub const FORMAT_VERSION: u32 = 1;
/// The `kind` field that marks a saved plan file.
pub const PLAN_KIND: &str = "dlqctl/plan";

/// What apply does to a resource: create it, update it in place, replace it (delete and
/// create again), delete it, or nothing, because the change cannot be made (`impossible`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Replace,
    Delete,
    Impossible,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Replace => "replace",
            Action::Delete => "delete",
            Action::Impossible => "impossible",
        }
    }
}

/// One property that differs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FieldChange {
    /// The flat property name, as the backend calls it (`MessageRetentionPeriod`,
    /// `definition.message-ttl`, `config.retention.ms`); nested keys joined by `.`.
    pub key: String,
    /// `None`: absent live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// `None`: to be removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

/// One change apply would make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Change {
    /// The live object.
    pub resource: ResourceId,
    /// The channel (`metadata.name`) the resource belongs to.
    pub channel: String,
    /// The part the resource plays in its channel.
    pub role: Role,
    pub action: Action,
    /// For updates and replaces: each differing field. For creates: every desired field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldChange>,
    /// What the resource must hold after apply (the full desired state). For a delete added
    /// by `--prune`: what identifies it besides its name (a RabbitMQ binding's source,
    /// destination and keys).
    pub desired: Props,
    /// Messages the live object holds, where the backend can tell (absent: unknown, or
    /// nothing live). What a replace or delete would drop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<u64>,
    /// Why an `impossible` change cannot be made, and what to do instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Set when an in-place change itself destroys messages (lowering SQS retention deletes
    /// older messages): says how. Guarded like a drop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<String>,
    /// A delete added by `--prune`: an owned live object that no spec names.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pruned: bool,
    /// On the change that sets a dead-letter queue's retention, when the spec discards dead
    /// letters on purpose (`deadLetter.discard`): after how long, why, and who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discard: Option<crate::spec::resolve::DiscardResolved>,
}

impl Change {
    /// A change to a desired resource that the diff did not make (a backend's review: an
    /// adoption, an impossible change), with nothing else set.
    pub fn of(
        d: &Desired,
        action: Action,
        fields: Vec<FieldChange>,
        messages: Option<u64>,
    ) -> Self {
        Change {
            resource: d.id.clone(),
            channel: d.channel.clone(),
            role: d.role,
            action,
            fields,
            desired: d.props.clone(),
            messages,
            reason: None,
            destructive: None,
            pruned: false,
            discard: None,
        }
    }

    /// Whether applying it drops the live object (and with it, any messages it holds).
    pub fn drops_object(&self) -> bool {
        matches!(self.action, Action::Replace | Action::Delete)
    }

    /// Whether it would drop messages: a count above zero, or a count nobody could read; or
    /// an in-place change that destroys messages by itself.
    pub fn may_lose_messages(&self) -> bool {
        self.destructive.is_some()
            || (self.drops_object()
                && self.resource.kind.holds_messages()
                && self.messages != Some(0))
    }
}

impl Change {
    /// Whether a reviewer must look twice: it drops the live object, cannot be made, or may
    /// lose messages. Apply refuses each of these unless allowed (impossible ones always).
    pub fn is_risky(&self) -> bool {
        self.drops_object() || self.action == Action::Impossible || self.may_lose_messages()
    }

    /// The flags `apply` needs before it makes this change, as `engine::apply::refusals`
    /// decides (a test keeps the two in step). Empty for an impossible change: no flag
    /// allows it.
    pub fn allow_flags(&self) -> Vec<&'static str> {
        let mut flags = Vec::new();
        match self.action {
            Action::Replace => flags.push("--allow-replace"),
            Action::Delete => flags.push("--allow-delete"),
            _ => {}
        }
        if self.may_lose_messages() {
            flags.push("--allow-message-loss");
        }
        flags
    }
}

impl crate::resource::Kind {
    pub fn holds_messages(self) -> bool {
        matches!(
            self,
            crate::resource::Kind::Queue
                | crate::resource::Kind::Topic
                | crate::resource::Kind::Subscription
        )
    }
}

/// Information that needs no action: unmanaged live settings, broker-side observations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Note {
    pub resource: ResourceId,
    /// What was observed, for people.
    pub message: String,
}

/// What the plan read: every live object (or its absence) by fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Fingerprint {
    pub resource: ResourceId,
    /// A hash of the live settings as read (`null`: the object did not exist). `apply FILE`
    /// refuses when it differs from a fresh read.
    pub hash: Option<String>,
}

/// How many changes of each action; `unchanged` counts the resources that already match.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub replace: usize,
    pub delete: usize,
    pub impossible: usize,
    pub unchanged: usize,
}

impl Summary {
    pub fn has_changes(&self) -> bool {
        self.create + self.update + self.replace + self.delete + self.impossible > 0
    }
}

/// A dlqctl plan: what `dlqctl plan --format json` prints and `dlqctl plan --out FILE` saves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "dlqctl plan, format_version 1")]
pub struct Plan {
    /// The version of this document's format: 1. A change that could break a reader of
    /// version 1 gets a new number (and a new schema, `plan.v2.json`).
    #[schemars(extend("const" = 1))]
    pub format_version: u32,
    /// Always `dlqctl/plan`: how a saved plan is told from a spec.
    #[schemars(extend("const" = "dlqctl/plan"))]
    pub kind: String,
    /// The dlqctl that made the plan.
    pub dlqctl_version: String,
    /// In apply order.
    pub changes: Vec<Change>,
    /// Observations that need no action (absent when there are none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Note>,
    pub summary: Summary,
    /// The connections, so a saved plan can be applied on its own (no credentials: only the
    /// names of the variables that hold them).
    pub targets: BTreeMap<String, Target>,
    /// Every live object the plan read, or found absent.
    pub fingerprints: Vec<Fingerprint>,
    /// Saved plans only (`plan --out`): what the plan was made from. `apply FILE` re-plans
    /// from it and trusts nothing else in the file that it can re-derive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
}

/// What a saved plan was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Source {
    /// The spec paths as given to `plan` (relative to the folder it ran in).
    pub paths: Vec<std::path::PathBuf>,
    /// `--targets`, if it was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets_file: Option<std::path::PathBuf>,
    /// Every file read (specs, targets file, defaults), with the SHA-256 of its content.
    pub files: BTreeMap<std::path::PathBuf, String>,
    /// Planned with `--prune`.
    #[serde(default)]
    pub prune: bool,
    /// Planned with `--adopt`.
    #[serde(default)]
    pub adopt: bool,
    /// Per target, the server planned against (RabbitMQ cluster name, Kafka cluster id,
    /// AWS endpoint and region).
    pub identities: BTreeMap<String, String>,
}

/// Compares one desired resource with its live state.
pub fn diff(desired: &Desired, live: Option<&Live>) -> Option<Change> {
    let change = |action, fields| Change {
        resource: desired.id.clone(),
        channel: desired.channel.clone(),
        role: desired.role,
        action,
        fields,
        desired: desired.props.clone(),
        messages: live.and_then(|l| l.messages),
        reason: None,
        destructive: None,
        pruned: false,
        discard: None,
    };
    if !desired.present {
        return live.map(|_| change(Action::Delete, Vec::new()));
    }
    let Some(live) = live else {
        let fields = desired
            .props
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| FieldChange {
                key: k.clone(),
                old: None,
                new: Some(v.clone()),
            })
            .collect();
        return Some(change(Action::Create, fields));
    };
    let fields: Vec<FieldChange> = desired
        .props
        .iter()
        .filter(|(k, v)| !same(v, live.props.get(*k)))
        .map(|(k, v)| FieldChange {
            key: k.clone(),
            old: live.props.get(k).filter(|o| !o.is_null()).cloned(),
            new: (!v.is_null()).then(|| v.clone()),
        })
        .collect();
    if fields.is_empty() {
        return None;
    }
    let action = if desired.immutable {
        Action::Replace
    } else {
        Action::Update
    };
    Some(change(action, fields))
}

/// Live keys the spec does not own, shown as information (never changed). A backend may list
/// under `@defaults` the keys whose live value is the server's default (Kafka reports every
/// topic config): nobody set those, so they are not shown.
pub fn unmanaged(desired: &Desired, live: &Live) -> Vec<String> {
    let defaults: Vec<&str> = live
        .props
        .get("@defaults")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    live.props
        .iter()
        .filter(|(k, v)| !desired.props.contains_key(*k) && !k.starts_with('@') && !v.is_null())
        .filter(|(k, _)| !defaults.contains(&k.as_str()))
        .map(|(k, v)| format!("{k} = {v}"))
        .collect()
}

impl Plan {
    pub fn new(
        mut changes: Vec<Change>,
        notes: Vec<Note>,
        unchanged: usize,
        targets: BTreeMap<String, Target>,
        fingerprints: Vec<Fingerprint>,
        first: &HashSet<ResourceId>,
    ) -> Self {
        sort_for_apply(&mut changes, first);
        let mut summary = Summary {
            unchanged,
            ..Summary::default()
        };
        for c in &changes {
            match c.action {
                Action::Create => summary.create += 1,
                Action::Update => summary.update += 1,
                Action::Replace => summary.replace += 1,
                Action::Delete => summary.delete += 1,
                Action::Impossible => summary.impossible += 1,
            }
        }
        Plan {
            format_version: FORMAT_VERSION,
            kind: PLAN_KIND.to_owned(),
            dlqctl_version: env!("CARGO_PKG_VERSION").to_owned(),
            changes,
            notes,
            summary,
            targets,
            fingerprints,
            source: None,
        }
    }
}

/// Apply order, per target: the changes a backend says go first (`first`: e.g. RabbitMQ
/// policies of queues this plan creates, see `crate::backend::goes_first`), before anything
/// else; then per channel the dead-letter side first and what points at it after; deletes
/// after everything else, in reverse.
pub fn sort_for_apply(changes: &mut [Change], first: &HashSet<ResourceId>) {
    changes.sort_by_cached_key(|c| {
        let deleting = c.action == Action::Delete;
        let goes_first = !deleting && first.contains(&c.resource);
        let role = c.role as i32;
        (
            c.resource.target.clone(),
            deleting,
            !goes_first,
            c.channel.clone(),
            if deleting { -role } else { role },
            c.resource.clone(),
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Kind;
    use crate::spec::model::Backend;
    use serde_json::json;

    fn desired(immutable: bool, props: Value) -> Desired {
        Desired {
            id: ResourceId {
                target: "t".into(),
                backend: Backend::Rabbitmq,
                kind: Kind::Queue,
                scope: "/".into(),
                name: "q".into(),
            },
            channel: "c".into(),
            role: Role::Main,
            props: serde_json::from_value(props).unwrap(),
            immutable,
            present: true,
        }
    }

    fn live(props: Value) -> Live {
        Live {
            props: serde_json::from_value(props).unwrap(),
            messages: Some(0),
        }
    }

    #[test]
    fn equal_meaning_is_no_change() {
        let d = desired(false, json!({"ttl": 5000, "absent": null}));
        assert_eq!(diff(&d, Some(&live(json!({"ttl": 5000.0})))), None);
    }

    #[test]
    fn a_missing_object_is_created() {
        let d = desired(false, json!({"ttl": 5000}));
        assert_eq!(diff(&d, None).unwrap().action, Action::Create);
    }

    #[test]
    fn mutable_differences_update_immutable_ones_replace() {
        let l = live(json!({"ttl": 1000, "extra": 1}));
        let c = diff(&desired(false, json!({"ttl": 5000})), Some(&l)).unwrap();
        assert_eq!(c.action, Action::Update);
        assert_eq!(
            c.fields,
            vec![FieldChange {
                key: "ttl".into(),
                old: Some(json!(1000)),
                new: Some(json!(5000))
            }]
        );
        let c = diff(&desired(true, json!({"ttl": 5000})), Some(&l)).unwrap();
        assert_eq!(c.action, Action::Replace);
    }

    #[test]
    fn an_owned_key_that_must_be_absent_is_a_change() {
        let c = diff(
            &desired(false, json!({"ttl": null})),
            Some(&live(json!({"ttl": 1}))),
        )
        .unwrap();
        assert_eq!(c.fields[0].new, None);
    }

    #[test]
    fn unowned_keys_are_information() {
        let l = live(json!({"ttl": 1, "x-max-length": 10}));
        assert_eq!(
            unmanaged(&desired(false, json!({"ttl": 1})), &l),
            vec!["x-max-length = 10"]
        );
    }

    #[test]
    fn apply_order_puts_the_dead_letter_side_first_and_deletes_last_in_reverse() {
        let mk = |role, action| {
            let mut c = diff(&desired(false, json!({"a": 1})), None).unwrap();
            c.role = role;
            c.action = action;
            c
        };
        let mut v = vec![
            mk(Role::Main, Action::Create),
            mk(Role::DeadLetter, Action::Delete),
            mk(Role::DeadLetter, Action::Create),
            mk(Role::Main, Action::Delete),
            mk(Role::Retry, Action::Create),
            mk(Role::Invalid, Action::Delete),
            mk(Role::Invalid, Action::Create),
        ];
        sort_for_apply(&mut v, &HashSet::new());
        let order: Vec<_> = v.iter().map(|c| (c.role, c.action)).collect();
        // The invalid-message queue: nothing points at it, but the main queue's consumer
        // sends to it, so it exists before the main queue and goes after it.
        assert_eq!(
            order,
            vec![
                (Role::DeadLetter, Action::Create),
                (Role::Invalid, Action::Create),
                (Role::Retry, Action::Create),
                (Role::Main, Action::Create),
                (Role::Main, Action::Delete),
                (Role::Invalid, Action::Delete),
                (Role::DeadLetter, Action::Delete),
            ]
        );
        // It holds messages: dropping it is guarded like dropping the DLQ.
        let mut drop = change(Kind::Queue, Action::Delete, Some(2));
        drop.role = Role::Invalid;
        assert!(drop.may_lose_messages());
    }

    /// A change of `kind` with `action`, holding `messages` (pure values, no server).
    fn change(kind: Kind, action: Action, messages: Option<u64>) -> Change {
        let mut c = diff(&desired(false, json!({"a": 1})), None).expect("a create");
        c.resource.kind = kind;
        c.action = action;
        c.messages = messages;
        c
    }

    #[test]
    fn only_replaces_and_deletes_drop_the_object() {
        for (action, drops) in [
            (Action::Create, false),
            (Action::Update, false),
            (Action::Impossible, false),
            (Action::Replace, true),
            (Action::Delete, true),
        ] {
            assert_eq!(
                change(Kind::Queue, action, Some(1)).drops_object(),
                drops,
                "{action:?}"
            );
        }
    }

    #[test]
    fn queues_and_topics_hold_messages_nothing_else_does() {
        for (kind, holds) in [
            (Kind::Queue, true),
            (Kind::Topic, true),
            (Kind::Policy, false),
            (Kind::Exchange, false),
            (Kind::Binding, false),
            (Kind::Alarm, false),
        ] {
            assert_eq!(kind.holds_messages(), holds, "{kind:?}");
        }
    }

    #[test]
    fn a_drop_may_lose_messages_unless_the_object_is_known_to_be_empty() {
        for action in [Action::Replace, Action::Delete] {
            assert!(change(Kind::Queue, action, Some(3)).may_lose_messages());
            // A count nobody could read is not "empty".
            assert!(change(Kind::Topic, action, None).may_lose_messages());
            assert!(!change(Kind::Queue, action, Some(0)).may_lose_messages());
            // Objects that hold no messages lose none, whatever the count says.
            assert!(!change(Kind::Policy, action, None).may_lose_messages());
        }
        // In place: nothing is dropped...
        assert!(!change(Kind::Queue, Action::Update, Some(5)).may_lose_messages());
        // ...unless the change destroys messages by itself (lower retention).
        let mut lower = change(Kind::Queue, Action::Update, Some(0));
        lower.destructive = Some("lowering retention".into());
        assert!(lower.may_lose_messages());
    }

    #[test]
    fn any_counted_change_is_a_change_for_the_detailed_exit_code() {
        assert!(!Summary::default().has_changes());
        assert!(
            !Summary {
                unchanged: 9,
                ..Summary::default()
            }
            .has_changes()
        );
        for s in [
            Summary {
                create: 1,
                ..Summary::default()
            },
            Summary {
                update: 1,
                ..Summary::default()
            },
            Summary {
                replace: 1,
                ..Summary::default()
            },
            Summary {
                delete: 1,
                ..Summary::default()
            },
            Summary {
                impossible: 1,
                ..Summary::default()
            },
        ] {
            assert!(s.has_changes(), "{s:?}");
        }
    }

    #[test]
    fn action_names_are_the_json_names() {
        for a in [
            Action::Create,
            Action::Update,
            Action::Replace,
            Action::Delete,
            Action::Impossible,
        ] {
            assert_eq!(json!(a), json!(a.as_str()), "{a:?}");
        }
    }

    #[test]
    fn an_object_the_spec_no_longer_wants_is_deleted_only_if_it_exists() {
        let mut d = desired(false, json!({"ttl": 1}));
        d.present = false;
        let c = diff(&d, Some(&live(json!({"ttl": 1})))).expect("a delete");
        assert_eq!((c.action, c.messages), (Action::Delete, Some(0)));
        assert!(c.fields.is_empty());
        assert_eq!(diff(&d, None), None, "nothing live, nothing to delete");
    }

    #[test]
    fn a_create_lists_the_set_fields_and_an_update_shows_a_null_as_absent() {
        let set_ttl = vec![FieldChange {
            key: "ttl".into(),
            old: None,
            new: Some(json!(5)),
        }];
        let c = diff(&desired(false, json!({"ttl": 5, "absent": null})), None).expect("create");
        assert_eq!(c.fields, set_ttl);
        let c = diff(
            &desired(false, json!({"ttl": 5})),
            Some(&live(json!({"ttl": null}))),
        )
        .expect("an update");
        assert_eq!(c.fields, set_ttl);
    }

    #[test]
    fn unmanaged_leaves_out_owned_hidden_null_and_default_keys() {
        let l = live(json!({
            "ttl": 1,
            "@policy": "p",
            "gone": null,
            "segment.ms": 5,
            "x-max-length": 10,
            "@defaults": ["segment.ms"],
        }));
        assert_eq!(
            unmanaged(&desired(false, json!({"ttl": 2})), &l),
            vec!["x-max-length = 10"]
        );
    }

    #[test]
    fn risky_changes_and_their_flags() {
        let empty = |kind, action| change(kind, action, Some(0));
        assert!(!empty(Kind::Queue, Action::Create).is_risky());
        assert!(!change(Kind::Queue, Action::Update, Some(9)).is_risky());
        assert!(empty(Kind::Queue, Action::Impossible).is_risky());
        assert!(empty(Kind::Policy, Action::Replace).is_risky());
        assert!(empty(Kind::Policy, Action::Delete).is_risky());
        let mut lower = empty(Kind::Queue, Action::Update);
        lower.destructive = Some("lowering retention".into());
        assert!(lower.is_risky(), "destroys messages in place");

        assert!(empty(Kind::Queue, Action::Create).allow_flags().is_empty());
        assert!(
            empty(Kind::Queue, Action::Impossible)
                .allow_flags()
                .is_empty()
        );
        assert_eq!(
            empty(Kind::Queue, Action::Replace).allow_flags(),
            ["--allow-replace"]
        );
        assert_eq!(
            empty(Kind::Queue, Action::Delete).allow_flags(),
            ["--allow-delete"]
        );
        assert_eq!(
            change(Kind::Queue, Action::Delete, None).allow_flags(),
            ["--allow-delete", "--allow-message-loss"]
        );
        assert_eq!(lower.allow_flags(), ["--allow-message-loss"]);
    }

    #[test]
    fn the_summary_counts_each_action_and_the_plan_keeps_apply_order() {
        let p = Plan::new(
            vec![
                change(Kind::Queue, Action::Delete, None),
                change(Kind::Queue, Action::Create, None),
                change(Kind::Queue, Action::Update, None),
                change(Kind::Queue, Action::Replace, None),
                change(Kind::Queue, Action::Impossible, None),
                change(Kind::Queue, Action::Create, None),
            ],
            Vec::new(),
            4,
            BTreeMap::new(),
            Vec::new(),
            &HashSet::new(),
        );
        assert_eq!(
            p.summary,
            Summary {
                create: 2,
                update: 1,
                replace: 1,
                delete: 1,
                impossible: 1,
                unchanged: 4,
            }
        );
        assert_eq!(p.changes.last().map(|c| c.action), Some(Action::Delete));
        assert_eq!((p.format_version, p.kind.as_str()), (1, "dlqctl/plan"));
    }

    /// A change of `kind` named `name`, playing `role`.
    fn named(kind: Kind, action: Action, name: &str, role: Role) -> Change {
        let mut c = change(kind, action, None);
        c.resource.name = name.into();
        c.role = role;
        c
    }

    /// The names of `changes` in apply order.
    fn apply_order(mut changes: Vec<Change>, first: &HashSet<ResourceId>) -> Vec<String> {
        sort_for_apply(&mut changes, first);
        changes.into_iter().map(|c| c.resource.name).collect()
    }

    #[test]
    fn among_deletes_the_backends_hint_changes_nothing() {
        // Deletes run in reverse role order even when the backend names one to go first: a
        // dead-letter queue is deleted after what points at it.
        let dlq = named(Kind::Queue, Action::Delete, "d", Role::DeadLetter);
        let main = named(Kind::Queue, Action::Delete, "m", Role::Main);
        let first: HashSet<ResourceId> = [dlq.resource.clone()].into();
        assert_eq!(apply_order(vec![dlq, main], &first), ["m", "d"]);
    }

    #[test]
    fn each_target_is_ordered_on_its_own_and_channels_stay_together() {
        let mk = |target: &str, channel: &str, role, name: &str| {
            let mut c = named(Kind::Queue, Action::Create, name, role);
            c.resource.target = target.into();
            c.channel = channel.into();
            c
        };
        let v = vec![
            mk("b", "x", Role::DeadLetter, "b-x-dlq"),
            mk("a", "y", Role::Main, "a-y-main"),
            mk("a", "x", Role::Main, "a-x-main"),
            mk("a", "y", Role::DeadLetter, "a-y-dlq"),
            mk("a", "x", Role::DeadLetter, "a-x-dlq"),
        ];
        assert_eq!(
            apply_order(v, &HashSet::new()),
            ["a-x-dlq", "a-x-main", "a-y-dlq", "a-y-main", "b-x-dlq"]
        );
    }

    #[test]
    fn what_a_backend_puts_first_goes_before_everything_else_of_its_target_but_never_a_delete() {
        let policy = named(Kind::Policy, Action::Create, "p", Role::MainPolicy);
        let dlq = named(Kind::Queue, Action::Create, "d", Role::DeadLetter);
        let gone = named(Kind::Policy, Action::Delete, "g", Role::Main);
        let first: HashSet<ResourceId> = [policy.resource.clone(), gone.resource.clone()].into();
        let v = vec![gone, dlq.clone(), policy.clone()];
        // The delete stays last although the backend named it: deletes never go first.
        assert_eq!(apply_order(v, &first), ["p", "d", "g"]);
        // Without the hint, the dead-letter side comes first.
        assert_eq!(apply_order(vec![policy, dlq], &HashSet::new()), ["d", "p"]);
    }
}
