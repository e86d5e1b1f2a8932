//! Kafka plan rules on top of the generic diff (pure): what cannot be changed in place, what
//! drops records by itself, the admin requests an update takes, and who may read a
//! dead-letter topic but not its source (from the ACLs the review reads).

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::ffi::{AclBinding, AclOperation, AclPattern, ConfigOp, Grant};
use super::*;
use crate::plan::{Action, Change, Note};
use crate::resource::{Desired, Live, Role, TimeUnit};
use crate::spec::duration;

/// Kafka has no observations beyond the diff (pure door, for the same shape as the others).
pub fn notes(_desired: &[Desired], _live: &BTreeMap<ResourceId, Live>) -> Vec<Note> {
    Vec::new()
}

/// Notes on dead-letter topics that a principal may read while the channel's main topic is
/// out of its reach, from the topics' ACL bindings (pure). A principal may read a topic when
/// an ALLOW binding for READ (or ALL) matches it (its own principal or `User:*`; a literal
/// name, `*`, or a prefix) and no DENY binding does. Hosts are not told apart. The spec's own
/// `kafka.acls.readDeadLetters` are not noted: they read the dead letters by decision.
pub fn acl_notes(target: &str, desired: &[Desired], bindings: &[AclBinding]) -> Vec<Note> {
    let reads = |b: &AclBinding| matches!(b.operation, AclOperation::Read | AclOperation::All);
    let matches = |b: &AclBinding, topic: &str| match b.pattern {
        AclPattern::Literal => b.name == topic || b.name == "*",
        AclPattern::Prefixed => topic.starts_with(b.name.as_str()),
        AclPattern::Other => false,
    };
    let can_read = |principal: &str, topic: &str| {
        let applies = |b: &&AclBinding| {
            reads(b) && matches(b, topic) && (b.principal == principal || b.principal == "User:*")
        };
        bindings.iter().filter(applies).any(|b| b.allow)
            && !bindings.iter().filter(applies).any(|b| !b.allow)
    };
    let topics = |role: Role| {
        desired.iter().filter(move |d| {
            d.id.target == target && d.id.kind == Kind::Topic && d.role == role && d.present
        })
    };
    let mut out = Vec::new();
    for dlt in topics(Role::DeadLetter) {
        let Some(main) = topics(Role::Main).find(|m| m.channel == dlt.channel) else {
            continue;
        };
        let mut principals: Vec<&str> = bindings
            .iter()
            .filter(|b| b.allow && reads(b) && matches(b, &dlt.id.name))
            .map(|b| b.principal.as_str())
            .collect();
        principals.sort_unstable();
        principals.dedup();
        // The spec's own `readDeadLetters` (operators, by decision) are not news.
        let declared = |p: &str| {
            let g = Grant {
                topic: dlt.id.name.clone(),
                operation: AclOperation::Read,
                principal: p.to_owned(),
            };
            let id = acl_id(target, &g);
            desired.iter().any(|d| d.present && d.id == id)
        };
        let wider: Vec<String> = principals
            .into_iter()
            .filter(|p| can_read(p, &dlt.id.name) && !can_read(p, &main.id.name))
            .filter(|p| !declared(p))
            .map(|p| format!("`{p}`"))
            .collect();
        if !wider.is_empty() {
            out.push(Note {
                resource: dlt.id.clone(),
                message: format!(
                    "{} may read this dead-letter topic but not its source {} (ACLs): dead letters are the same records; give dead-letter access to operators only",
                    wider.join(", "),
                    main.id.name
                ),
            });
        }
    }
    out
}

/// The deletes `kafka.acls` asks for (pure). Each list a channel writes owns its bindings:
/// `produce` the WRITEs on the main topic; `consume` the READs on the main and retry topics
/// and the WRITEs on the retry, dead-letter and invalid-message topics; `readDeadLetters` the
/// READs on the dead-letter and invalid-message topics. A live binding dlqctl could have made
/// ([`Grant::of`]) in an owned (topic, operation) that the lists do not name is deleted.
/// Bindings of any other shape (prefixed, DENY, one host, another operation), and those a
/// list the channel does not write would own, are never touched.
///
/// Which lists are written is read off the desired bindings: every written list names a
/// principal, and each list alone grants its marker (`produce`: WRITE on the main topic;
/// `consume`: READ on the main topic; `readDeadLetters`: READ on a dead-letter topic).
pub fn revoked(target: &str, desired: &[Desired], bindings: &[AclBinding]) -> Vec<Change> {
    use AclOperation::{Read, Write};
    let ours: Vec<&Desired> = desired
        .iter()
        .filter(|d| d.id.target == target && d.present)
        .collect();
    let wanted: HashSet<&ResourceId> = ours
        .iter()
        .filter(|d| d.id.kind == Kind::Acl)
        .map(|d| &d.id)
        .collect();
    // Each topic of the channels: its channel and role.
    let topics: BTreeMap<&str, (&str, Role)> = ours
        .iter()
        .filter(|d| d.id.kind == Kind::Topic)
        .map(|d| (d.id.name.as_str(), (d.channel.as_str(), d.role)))
        .collect();
    // The lists each channel writes, by their markers.
    let mut written: HashSet<(&str, &str)> = HashSet::new();
    for g in wanted.iter().filter_map(|id| grant_of(id)) {
        let Some(&(channel, role)) = topics.get(g.topic.as_str()) else {
            continue;
        };
        let list = match (role, g.operation) {
            (Role::Main, Write) => "produce",
            (Role::Main, Read) => "consume",
            (Role::DeadLetter | Role::Invalid, Read) => "readDeadLetters",
            _ => continue,
        };
        written.insert((channel, list));
    }
    let owner = |role: Role, op: AclOperation| match (role, op) {
        (Role::Main, Write) => Some("produce"),
        (Role::Main | Role::Retry, Read)
        | (Role::Retry | Role::DeadLetter | Role::Invalid, Write) => Some("consume"),
        (Role::DeadLetter | Role::Invalid, Read) => Some("readDeadLetters"),
        _ => None,
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for g in bindings.iter().filter_map(Grant::of) {
        let Some(&(channel, role)) = topics.get(g.topic.as_str()) else {
            continue;
        };
        let owned = owner(role, g.operation).is_some_and(|list| written.contains(&(channel, list)));
        let id = acl_id(target, &g);
        if !owned || wanted.contains(&id) || !seen.insert(id.clone()) {
            continue;
        }
        let gone = Desired {
            id,
            channel: channel.to_owned(),
            role: Role::Acl,
            props: crate::resource::Props::new(),
            immutable: false,
            present: false,
        };
        out.push(Change::of(&gone, Action::Delete, Vec::new(), None));
    }
    out
}

/// What `plan --prune` deletes among the live bindings dlqctl could have made (pure): those on
/// owned topics that no spec names, with the channel the topic's name suggests. On a topic a
/// spec names, only its channel's `kafka.acls` decides ([`revoked`]).
pub fn prunable_acls(
    target: &str,
    skip: &std::collections::BTreeSet<ResourceId>,
    grants: &[Grant],
    owned: impl Fn(&str) -> bool,
) -> Vec<(ResourceId, String)> {
    let named: HashSet<&str> = skip
        .iter()
        .filter(|id| id.kind == Kind::Topic && id.target == target)
        .map(|id| id.name.as_str())
        .collect();
    let mut out: Vec<(ResourceId, String)> = grants
        .iter()
        .filter(|g| owned(&g.topic) && !named.contains(g.topic.as_str()))
        .map(|g| (acl_id(target, g), role_by_name(&g.topic).0))
        .filter(|(id, _)| !skip.contains(id))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// No Kafka change needs to run before the per-channel order (pure door).
pub fn goes_first(_changes: &[Change]) -> HashSet<ResourceId> {
    HashSet::new()
}

/// Kafka's duration configs are milliseconds, and all of them end in `.ms` (`retention.ms`,
/// `segment.ms`, …) (pure door).
pub fn duration_unit(_change: &Change, key: &str) -> Option<TimeUnit> {
    (key.starts_with("config.") && key.ends_with(".ms")).then_some(TimeUnit::Millis)
}

/// Kafka's rules for a planned update: fewer partitions and another replication factor cannot
/// be made in place; lower retention, and compaction, drop records by themselves.
pub fn refine(change: &mut Change) {
    if change.resource.kind == Kind::Connector {
        return super::connect::refine(change);
    }
    if change.action != Action::Update {
        return;
    }
    let mut impossible = Vec::new();
    let mut destructive = Vec::new();
    for f in &change.fields {
        let old = f.old.as_ref().and_then(Value::as_i64);
        let new = f.new.as_ref().and_then(Value::as_i64);
        match f.key.as_str() {
            "partitions" => {
                if let (Some(old), Some(new)) = (old, new)
                    && new < old
                {
                    impossible.push(format!(
                        "Kafka cannot remove partitions ({old} → {new}); keep {old} in the spec, or create a new topic and move producers and consumers to it"
                    ));
                }
            }
            "replication.factor" => impossible.push(format!(
                "changing the replication factor ({} → {}) needs a partition reassignment (kafka-reassign-partitions.sh, or the AlterPartitionReassignments API), which this version of dlqctl does not do; reassign by hand, then plan again",
                show(f.old.as_ref()),
                show(f.new.as_ref())
            )),
            "config.retention.ms" | "config.retention.bytes" => {
                let shorter = match (old, new) {
                    (Some(o), Some(n)) => n >= 0 && (o < 0 || n < o),
                    _ => false,
                };
                // No topic-level value read (tansu lists only explicit keys; a broker may hide
                // its default): the retention in force is unknown, so a new limit may be
                // shorter. Only a topic known to be empty is spared the guard.
                let unknown = f.old.is_none() && new.is_some_and(|n| n >= 0);
                if unknown && change.messages != Some(0) {
                    let key = f.key.trim_start_matches("config.");
                    destructive.push(format!(
                        "{key} has no value read on the topic (the broker's default applies, unknown here), so setting it to {} may delete records the topic holds now",
                        show(f.new.as_ref())
                    ));
                } else if shorter {
                    let what = if f.key.ends_with(".ms") {
                        let d = |ms: i64| duration::Duration::from_millis(ms.unsigned_abs()).to_string();
                        let from = old.filter(|o| *o >= 0).map_or("unlimited".to_owned(), d);
                        format!("lowering retention.ms from {from} to {} deletes the records older than that", d(new.unwrap_or(0)))
                    } else {
                        "lowering retention.bytes deletes the oldest records beyond the new size".to_owned()
                    };
                    destructive.push(what);
                }
            }
            "config.cleanup.policy" => {
                let compacts = |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| s.contains("compact"));
                if compacts(f.new.as_ref()) && !compacts(f.old.as_ref()) {
                    destructive.push("compaction keeps only the latest record of each key".to_owned());
                }
            }
            _ => {}
        }
    }
    if !impossible.is_empty() {
        change.action = Action::Impossible;
        change.reason = Some(impossible.join("; "));
    } else if !destructive.is_empty() {
        change.destructive = Some(destructive.join("; "));
    }
}

pub(super) fn show(v: Option<&Value>) -> String {
    v.map_or("(absent)".to_owned(), Value::to_string)
}

/// One admin request an update needs, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Topic configs: SET for a value, DELETE for a key that must lose its topic-level value.
    AlterConfigs(Vec<ConfigOp>),
    /// Grow to this many partitions in total.
    CreatePartitions(usize),
}

/// What an update of a topic takes: config changes first (they can be undone), then new
/// partitions (they cannot). Refuses what [`refine`] makes impossible.
pub fn update_steps(change: &Change) -> Result<Vec<Step>, String> {
    let mut ops = Vec::new();
    let mut grow = None;
    for f in &change.fields {
        if let Some(key) = f.key.strip_prefix("config.") {
            ops.push(match &f.new {
                Some(v) => ConfigOp::Set {
                    key: key.to_owned(),
                    value: config_text(v),
                },
                None => ConfigOp::Delete {
                    key: key.to_owned(),
                },
            });
            continue;
        }
        match f.key.as_str() {
            "partitions" => {
                let old = f.old.as_ref().and_then(Value::as_u64).unwrap_or(0);
                let new = f.new.as_ref().and_then(Value::as_u64).unwrap_or(0);
                if new < old {
                    return Err(format!("cannot remove partitions ({old} → {new})"));
                }
                grow = Some(
                    usize::try_from(new).map_err(|_| format!("{new} partitions is too many"))?,
                );
            }
            other => return Err(format!("`{other}` cannot be changed in place")),
        }
    }
    let mut steps = Vec::new();
    if !ops.is_empty() {
        steps.push(Step::AlterConfigs(ops));
    }
    if let Some(n) = grow {
        steps.push(Step::CreatePartitions(n));
    }
    Ok(steps)
}

impl crate::backend::kit::doors::Plan for super::Kafka {
    fn desired(r: &crate::spec::resolve::Resolved) -> Vec<crate::resource::Desired> {
        super::desired::desired(r)
    }

    fn refine(change: &mut Change) {
        refine(change);
    }

    fn duration_unit(change: &Change, key: &str) -> Option<crate::resource::TimeUnit> {
        duration_unit(change, key)
    }

    /// Kafka: a topic's `retention.ms`.
    fn is_retention(key: &str) -> bool {
        key == "config.retention.ms"
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
    use super::*;

    fn topics() -> Vec<Desired> {
        [
            ("app.orders", Role::Main),
            ("app.orders-dlt", Role::DeadLetter),
        ]
        .into_iter()
        .map(|(name, role)| Desired {
            id: topic_id("k", name),
            channel: "app.orders".into(),
            role,
            props: crate::resource::Props::new(),
            immutable: false,
            present: true,
        })
        .collect()
    }

    fn acl(
        name: &str,
        pattern: AclPattern,
        principal: &str,
        read: bool,
        allow: bool,
    ) -> AclBinding {
        AclBinding {
            name: name.into(),
            pattern,
            principal: principal.into(),
            host: "*".into(),
            operation: if read {
                AclOperation::Read
            } else {
                AclOperation::Other
            },
            allow,
        }
    }

    #[test]
    fn a_principal_who_may_read_the_dlt_but_not_its_source_is_noted() {
        use AclPattern::{Literal, Prefixed};
        let d = topics();
        let support = acl("app.orders-dlt", Literal, "User:support", true, true);
        let n = acl_notes("k", &d, std::slice::from_ref(&support));
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(n[0].resource.name, "app.orders-dlt");
        assert!(
            n[0].message.starts_with(
                "`User:support` may read this dead-letter topic but not its source app.orders"
            ),
            "{}",
            n[0].message
        );
        for quiet in [
            // Reads the source too: by prefix, by `*`, or through `User:*`.
            vec![
                support.clone(),
                acl("app.", Prefixed, "User:support", true, true),
            ],
            vec![
                support.clone(),
                acl("*", Literal, "User:support", true, true),
            ],
            vec![
                support.clone(),
                acl("app.orders", Literal, "User:*", true, true),
            ],
            // Denied on the dead-letter topic after all.
            vec![
                support.clone(),
                acl("app.orders-dlt", Literal, "User:support", true, false),
            ],
            // Not a read.
            vec![acl("app.orders-dlt", Literal, "User:support", false, true)],
            // Another topic.
            vec![acl("app.payments-dlt", Literal, "User:support", true, true)],
        ] {
            assert_eq!(acl_notes("k", &d, &quiet), Vec::new(), "{quiet:?}");
        }
        // Everyone may read the dead letters, and the source is restricted: said.
        let n = acl_notes(
            "k",
            &d,
            &[acl("app.orders-dlt", Literal, "User:*", true, true)],
        );
        assert!(
            n.len() == 1 && n[0].message.starts_with("`User:*`"),
            "{n:?}"
        );
        // An operator the spec's `readDeadLetters` names reads the dead letters by decision.
        let mut declared = d.clone();
        declared.extend(
            owning(&[("app.orders-dlt", AclOperation::Read, "User:support")])
                .into_iter()
                .filter(|x| x.id.kind == Kind::Acl),
        );
        assert_eq!(
            acl_notes("k", &declared, std::slice::from_ref(&support)),
            Vec::new()
        );
        // Only the dead-letter topics of this target that the plan keeps are looked at: not a
        // retry topic, not the same channel on another target, not a DLT being deleted.
        let mut wide = d.clone();
        wide.push(Desired {
            id: topic_id("k", "app.orders-retry-0"),
            role: Role::Retry,
            ..d[1].clone()
        });
        for (name, role) in [
            ("app.orders", Role::Main),
            ("app.orders-dlt2", Role::DeadLetter),
        ] {
            wide.push(Desired {
                id: topic_id("other", name),
                role,
                ..d[1].clone()
            });
        }
        wide.push(Desired {
            id: topic_id("k", "app.orders-old-dlt"),
            present: false,
            ..d[1].clone()
        });
        for topic in [
            "app.orders-retry-0",
            "app.orders-dlt2",
            "app.orders-old-dlt",
        ] {
            let quiet = [acl(topic, Literal, "User:support", true, true)];
            assert_eq!(acl_notes("k", &wide, &quiet), Vec::new(), "{topic}");
        }
        // Who is named: those an ALLOW READ binding of the DLT names, read through `User:*`
        // too; not a principal allowed something else, or a read of another topic.
        let n = acl_notes(
            "k",
            &d,
            &[
                acl("app.orders-dlt", Literal, "User:*", true, true),
                acl("app.orders-dlt", Literal, "User:writer", false, true),
                acl("app.payments", Literal, "User:reader", true, true),
            ],
        );
        assert!(
            n.len() == 1 && n[0].message.starts_with("`User:*` may read"),
            "{n:?}"
        );
        // A deny on the source keeps a prefix grant from reaching it.
        let n = acl_notes(
            "k",
            &d,
            &[
                acl("app.", Prefixed, "User:ops", true, true),
                acl("app.orders", Literal, "User:ops", true, false),
            ],
        );
        assert!(
            n.len() == 1 && n[0].message.starts_with("`User:ops`"),
            "{n:?}"
        );
    }
    fn binding(topic: &str, operation: AclOperation, principal: &str) -> AclBinding {
        AclBinding {
            name: topic.into(),
            pattern: AclPattern::Literal,
            principal: principal.into(),
            host: "*".into(),
            operation,
            allow: true,
        }
    }

    /// The two topics of `app.orders`, and the bindings its `kafka.acls` lists.
    fn owning(grants: &[(&str, AclOperation, &str)]) -> Vec<Desired> {
        let mut d = topics();
        d.extend(grants.iter().map(|(topic, operation, principal)| Desired {
            id: acl_id(
                "k",
                &Grant {
                    topic: (*topic).into(),
                    operation: *operation,
                    principal: (*principal).into(),
                },
            ),
            channel: "app.orders".into(),
            role: Role::Acl,
            props: crate::resource::Props::new(),
            immutable: false,
            present: true,
        }));
        d
    }

    #[test]
    fn bindings_the_spec_no_longer_lists_are_deleted_and_no_others() {
        use AclOperation::{All, Read, Write};
        // `produce` and `readDeadLetters` written, `consume` not.
        let d = owning(&[
            ("app.orders", Write, "User:api"),
            ("app.orders-dlt", Read, "User:ops"),
        ]);
        let live = [
            binding("app.orders", Write, "User:api"),
            binding("app.orders-dlt", Read, "User:ops"),
            // What `consume` would own, and it is not written: kept.
            binding("app.orders", Read, "User:worker"),
            binding("app.orders-dlt", Write, "User:worker"),
            // Not listed any more: deleted, once, whatever the order.
            binding("app.orders", Write, "User:old-api"),
            binding("app.orders-dlt", Read, "User:support"),
            binding("app.orders-dlt", Read, "User:support"),
            // Not dlqctl's shape: kept.
            binding("app.orders", All, "User:admin"),
            AclBinding {
                pattern: AclPattern::Prefixed,
                ..binding("app.", Read, "User:etl")
            },
            AclBinding {
                allow: false,
                ..binding("app.orders", Read, "User:intern")
            },
            AclBinding {
                host: "10.1.2.3".into(),
                ..binding("app.orders", Read, "User:bastion")
            },
            // Another channel's topic, and another target's would-be names: kept.
            binding("app.payments", Write, "User:old-api"),
        ];
        let gone: Vec<(String, Action, Role, &str)> = revoked("k", &d, &live)
            .into_iter()
            .map(|c| {
                assert_eq!(c.resource.kind, Kind::Acl);
                assert_eq!(c.resource.target, "k");
                (
                    c.resource.name,
                    c.action,
                    c.role,
                    if c.channel == "app.orders" {
                        "app.orders"
                    } else {
                        "?"
                    },
                )
            })
            .collect();
        assert_eq!(
            gone,
            [
                (
                    "app.orders WRITE User:old-api".to_owned(),
                    Action::Delete,
                    Role::Acl,
                    "app.orders"
                ),
                (
                    "app.orders-dlt READ User:support".to_owned(),
                    Action::Delete,
                    Role::Acl,
                    "app.orders"
                ),
            ]
        );
        // Deleting a binding drops no message, but still asks for --allow-delete.
        let c = &revoked("k", &d, &live)[0];
        assert!(!c.may_lose_messages());
        assert_eq!(c.allow_flags(), ["--allow-delete"]);
        // On another target, nothing of this channel is owned.
        assert_eq!(revoked("other", &d, &live), Vec::new());
    }

    #[test]
    fn each_written_list_owns_only_its_own_topics_and_operations() {
        use AclOperation::{Read, Write};
        let mut d = topics();
        let mut retry = d[0].clone();
        retry.id = topic_id("k", "app.orders-retry");
        retry.role = Role::Retry;
        d.push(retry);
        // Another channel, without `kafka.acls`.
        let mut other = d[0].clone();
        other.id = topic_id("k", "app.payments");
        other.channel = "app.payments".into();
        d.push(other);
        let live = [
            binding("app.orders", Write, "User:p"),
            binding("app.orders", Read, "User:c"),
            binding("app.orders-retry", Read, "User:c"),
            binding("app.orders-retry", Write, "User:c"),
            binding("app.orders-dlt", Write, "User:c"),
            binding("app.orders-dlt", Read, "User:r"),
            binding("app.payments", Write, "User:p"),
            binding("app.payments", Read, "User:c"),
        ];
        let gone = |lists: &[(&str, AclOperation, &str)]| -> Vec<String> {
            let mut with = d.clone();
            with.extend(owning(lists).into_iter().filter(|x| x.id.kind == Kind::Acl));
            revoked("k", &with, &live)
                .into_iter()
                .map(|c| c.resource.name)
                .collect()
        };
        // `produce: [User:new]`: the main topic's WRITEs only.
        assert_eq!(
            gone(&[("app.orders", Write, "User:new")]),
            ["app.orders WRITE User:p"]
        );
        // `consume: [User:new]` (its marker, READ on the main topic, and its READ on the retry
        // topic, which marks no other list): what a consumer holds.
        assert_eq!(
            gone(&[
                ("app.orders", Read, "User:new"),
                ("app.orders-retry", Read, "User:new")
            ]),
            [
                "app.orders READ User:c",
                "app.orders-retry READ User:c",
                "app.orders-retry WRITE User:c",
                "app.orders-dlt WRITE User:c",
            ]
        );
        // `readDeadLetters: [User:new]`: the dead-letter READs only.
        assert_eq!(
            gone(&[("app.orders-dlt", Read, "User:new")]),
            ["app.orders-dlt READ User:r"]
        );
        // All three, naming who is there: nothing to delete; app.payments is never touched.
        assert_eq!(
            gone(&[
                ("app.orders", Write, "User:p"),
                ("app.orders", Read, "User:c"),
                ("app.orders-retry", Read, "User:c"),
                ("app.orders-retry", Write, "User:c"),
                ("app.orders-dlt", Write, "User:c"),
                ("app.orders-dlt", Read, "User:r"),
            ]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn prune_lists_bindings_on_owned_topics_no_spec_names() {
        use AclOperation::{Read, Write};
        let g = |topic: &str, operation, principal: &str| Grant {
            topic: topic.into(),
            operation,
            principal: principal.into(),
        };
        let kept = g("app.orders", Read, "User:c");
        let skip: std::collections::BTreeSet<ResourceId> = [
            topic_id("k", "app.orders"),
            acl_id("k", &kept),
            topic_id("other", "app.gone"),
        ]
        .into_iter()
        .collect();
        let grants = [
            kept.clone(),
            // On a named topic, but not listed: for `revoked` to decide, not prune.
            g("app.orders", Write, "User:p"),
            // A topic no spec names (on this target), inside the prefixes: pruned, twice said once.
            g("app.gone-dlt", Read, "User:r"),
            g("app.gone-dlt", Read, "User:r"),
            g("app.gone", Write, "User:p"),
            // Outside the ownership prefixes.
            g("billing.x", Write, "User:p"),
        ];
        let found = prunable_acls("k", &skip, &grants, |t| t.starts_with("app."));
        assert_eq!(
            found,
            [
                (
                    acl_id("k", &g("app.gone", Write, "User:p")),
                    "app.gone".to_owned()
                ),
                (
                    acl_id("k", &g("app.gone-dlt", Read, "User:r")),
                    "app.gone".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn a_channel_without_kafka_acls_owns_no_binding() {
        let live = [binding(
            "app.orders-dlt",
            AclOperation::Read,
            "User:support",
        )];
        assert_eq!(revoked("k", &topics(), &live), Vec::new());
        // A listed binding that is live is kept.
        let d = owning(&[("app.orders-dlt", AclOperation::Read, "User:support")]);
        assert_eq!(revoked("k", &d, &live), Vec::new());
        // A channel whose topics are absent from the spec (only its bindings) owns no topic.
        let only_acls: Vec<Desired> = d.into_iter().filter(|x| x.id.kind == Kind::Acl).collect();
        let stray = [binding("app.orders", AclOperation::Read, "User:x")];
        assert_eq!(revoked("k", &only_acls, &stray), Vec::new());
    }
}
