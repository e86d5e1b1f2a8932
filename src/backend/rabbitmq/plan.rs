//! RabbitMQ plan rules on top of the generic diff (pure): notes about policies the broker does
//! not apply, and the apply-order hint that a new queue's policy goes first.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use serde_json::json;

use super::Binding;
use super::binding_name;
use crate::plan::{Action, Change, FieldChange, Note};
use crate::resource::{Desired, Kind, Live, Props, ResourceId, Role, TimeUnit};

/// RabbitMQ's TTLs and expiries are milliseconds, as a policy definition (`message-ttl`) or
/// a queue argument (`x-message-ttl`) (pure door).
pub fn duration_unit(_change: &Change, key: &str) -> Option<TimeUnit> {
    let name = key.rsplit('.').next().unwrap_or(key);
    matches!(
        name,
        "message-ttl" | "x-message-ttl" | "expires" | "x-expires"
    )
    .then_some(TimeUnit::Millis)
}

/// Broker-side observations for a plan: a queue whose dlqctl policy exists but is not the one
/// RabbitMQ applies (another policy with a higher priority wins, or it is still propagating).
pub fn notes(desired: &[Desired], live: &BTreeMap<ResourceId, Live>) -> Vec<Note> {
    let mut out = Vec::new();
    for d in desired
        .iter()
        .filter(|d| d.id.kind == Kind::Policy && d.present)
    {
        let queue_id = ResourceId {
            kind: Kind::Queue,
            ..d.id.clone()
        };
        let (Some(q), Some(_)) = (live.get(&queue_id), live.get(&d.id)) else {
            continue;
        };
        let applied = q.props.get("@policy").and_then(Value::as_str);
        if applied != Some(d.id.name.as_str()) {
            out.push(Note {
                resource: queue_id,
                message: match applied {
                    Some(other) => format!("RabbitMQ applies policy `{other}` to this queue, not dlqctl's `{}`: only one policy applies (the highest priority); raise `rabbitmq.policyPriority` or remove `{other}`", d.id.name),
                    None => format!("policy `{}` exists but RabbitMQ does not (yet) apply it to this queue", d.id.name),
                },
            });
        }
    }
    out
}

/// The one in-place RabbitMQ change that drops messages by itself: the dead-letter queue's
/// (or the invalid-message queue's) policy getting a shorter `message-ttl` (or one where there
/// was none). Both dead-letter nowhere, so every message older than the new TTL expires at
/// once. Guarded like a drop (`--allow-message-loss`). A shorter TTL on a retry queue only
/// retries sooner; changes to queue x-arguments are replaces, guarded by the message count.
pub fn refine(change: &mut Change) {
    let (queue, item) = match change.role {
        Role::DeadLetterPolicy => ("dead-letter queue", "dead letter"),
        Role::InvalidPolicy => ("invalid-message queue", "invalid message"),
        _ => return,
    };
    if change.action != Action::Update || change.resource.kind != Kind::Policy {
        return;
    }
    let Some(f) = change
        .fields
        .iter()
        .find(|f| f.key == "definition.message-ttl")
    else {
        return;
    };
    let (old, new) = (
        f.old.as_ref().and_then(Value::as_u64),
        f.new.as_ref().and_then(Value::as_u64),
    );
    let how = match (old, new) {
        (Some(o), Some(n)) if n < o => format!(
            "lowering the {queue}'s message-ttl from {o} ms to {n} ms expires every {item} older than {n} ms at once"
        ),
        (None, Some(n)) => format!(
            "a message-ttl of {n} ms on the {queue} expires every {item} older than that at once"
        ),
        _ => return,
    };
    change.destructive = Some(how);
}

/// The queue a dead-letter (or invalid-message) policy change puts a new or lower
/// `message-ttl` on, when that queue already exists: a create of the policy (the queue was
/// made before, by hand or by another spec) is as destructive as the update [`refine`] guards,
/// unless the TTL already in force on the queue (an x-argument, or another policy) is as short.
/// `None`: no such TTL, or the queue is new (it holds nothing).
pub fn ttl_on_existing_queue(c: &Change, live: &BTreeMap<ResourceId, Live>) -> Option<ResourceId> {
    if c.resource.kind != Kind::Policy
        || !matches!(c.role, Role::DeadLetterPolicy | Role::InvalidPolicy)
    {
        return None;
    }
    let new = c
        .fields
        .iter()
        .find(|f| f.key == "definition.message-ttl")
        .and_then(|f| f.new.as_ref())
        .and_then(Value::as_u64)?;
    let queue = ResourceId {
        kind: Kind::Queue,
        ..c.resource.clone()
    };
    let q = live.get(&queue)?;
    match c.action {
        Action::Update if c.destructive.is_some() => Some(queue),
        Action::Create => {
            let in_force = ["arguments.x-message-ttl", "@policy_definition.message-ttl"]
                .iter()
                .filter_map(|k| q.props.get(*k).and_then(Value::as_u64))
                .min();
            (in_force.is_none_or(|t| new < t)).then_some(queue)
        }
        _ => None,
    }
}

/// Guards a new or lower dead-letter `message-ttl` on a queue that exists by what it holds
/// now (`held`, `None`: RabbitMQ reported no count): a create needs `--allow-message-loss`
/// unless the queue is empty, and both say how many messages are at risk.
pub fn guard_ttl(c: &mut Change, held: Option<u64>) {
    let (queue, item) = match c.role {
        Role::InvalidPolicy => ("invalid-message queue", "invalid message"),
        _ => ("dead-letter queue", "dead letter"),
    };
    let count = match held {
        Some(n) => format!("it holds {n} messages now, each at risk"),
        None => "RabbitMQ reports no message count for it yet: any it holds are at risk".into(),
    };
    match c.action {
        Action::Create => {
            if held == Some(0) {
                return;
            }
            let n = c
                .fields
                .iter()
                .find(|f| f.key == "definition.message-ttl")
                .and_then(|f| f.new.as_ref())
                .and_then(Value::as_u64)
                .unwrap_or_default();
            c.destructive = Some(format!(
                "a new message-ttl of {n} ms on the {queue}, which exists, expires every {item} older than that at once; {count}"
            ));
        }
        _ => {
            if let Some(d) = c.destructive.as_mut() {
                d.push_str(&format!("; {count}"));
            }
        }
    }
}

/// Policy keys that change what a queue dead-letters, keeps or drops. Any of these set by a
/// policy dlqctl does not own for that queue (or by an operator policy) is drift; others
/// (`queue-mode`, `ha-*`, ...) are harmless to dead letters.
pub const GOVERNING_KEYS: [&str; 9] = [
    "dead-letter-exchange",
    "dead-letter-routing-key",
    "message-ttl",
    "expires",
    "max-length",
    "max-length-bytes",
    "overflow",
    "delivery-limit",
    "dead-letter-strategy",
];

/// Where the reader puts the governing keys of a policy that applies to a queue and is not
/// that queue's dlqctl policy: `@policy_definition.<key>`.
pub const FOREIGN_POLICY: &str = "@policy_definition.";

/// An operator policy that applies to an owned queue: its name and governing keys.
pub type OperatorPolicies = BTreeMap<ResourceId, (String, Props)>;

/// Policies dlqctl does not own (for that queue) that govern an owned queue's dead-lettering,
/// length or TTL: an `impossible` change on the queue, one `effective_policy.<key>` field per
/// key that differs from what the spec wants in force, and a reason that names the policy and
/// says what to do. dlqctl never changes a policy it does not own, so apply refuses the plan
/// until the policy is removed or narrowed; `--detailed-exitcode` says 2.
pub fn add_policy_drift(
    changes: &mut Vec<Change>,
    desired: &[Desired],
    live: &BTreeMap<ResourceId, Live>,
    operator: &OperatorPolicies,
) {
    let policies: BTreeMap<&ResourceId, &Desired> = desired
        .iter()
        .filter(|d| d.id.kind == Kind::Policy && d.present)
        .map(|d| (&d.id, d))
        .collect();
    for d in desired
        .iter()
        .filter(|d| d.id.kind == Kind::Queue && d.present)
    {
        let Some(q) = live.get(&d.id) else { continue };
        let own = policies
            .get(&ResourceId {
                kind: Kind::Policy,
                ..d.id.clone()
            })
            .copied();
        // What the spec wants in force for a key: its policy's value, or its x-argument.
        let wanted = |k: &str| -> Option<Value> {
            own.and_then(|p| p.props.get(&format!("definition.{k}")).cloned())
                .or_else(|| d.props.get(&format!("arguments.x-{k}")).cloned())
                .filter(|v| !v.is_null())
        };
        let mut fields = Vec::new();
        let mut reasons = Vec::new();
        let mut compare = |what: String, found: Props, replaces_own: bool, fix: &str| {
            let mut set = Vec::new();
            for k in GOVERNING_KEYS {
                let have = found.get(k).filter(|v| !v.is_null());
                let want = wanted(k);
                let drift = match (&want, have) {
                    (_, None) => false,
                    (Some(w), Some(h)) => !crate::resource::same(w, Some(h)),
                    (None, Some(_)) => true,
                };
                // Only one policy applies: one that is not dlqctl's leaves out what dlqctl's set.
                let dropped = replaces_own
                    && have.is_none()
                    && own.is_some_and(|p| {
                        p.props
                            .get(&format!("definition.{k}"))
                            .is_some_and(|v| !v.is_null())
                    });
                if drift || dropped {
                    fields.push(FieldChange {
                        key: format!("effective_policy.{k}"),
                        old: have.cloned(),
                        new: want.clone(),
                    });
                    if let Some(h) = have {
                        set.push(format!("{k} = {h}"));
                    } else {
                        set.push(format!("no {k}"));
                    }
                }
            }
            if !set.is_empty() {
                reasons.push(format!(
                    "{what} applies to this queue with {}, which changes what it dead-letters, keeps or drops; dlqctl does not change policies it does not own: {fix}, then plan again",
                    set.join(", ")
                ));
            }
        };
        if let Some(name) = q.props.get("@policy").and_then(Value::as_str)
            && name != d.id.name
        {
            let found: Props = q
                .props
                .iter()
                .filter_map(|(k, v)| {
                    k.strip_prefix(FOREIGN_POLICY)
                        .map(|k| (k.to_owned(), v.clone()))
                })
                .collect();
            let fix = if own.is_some() {
                format!(
                    "remove policy `{name}` or narrow its pattern so it no longer matches this queue, or raise `rabbitmq.policyPriority` above its priority"
                )
            } else {
                format!(
                    "remove policy `{name}` or narrow its pattern so it no longer matches this queue"
                )
            };
            compare(
                format!("policy `{name}` (not dlqctl's for this queue)"),
                found,
                true,
                &fix,
            );
        }
        if let Some((name, found)) = operator.get(&d.id) {
            compare(
                format!("operator policy `{name}`"),
                found.clone(),
                false,
                &format!(
                    "remove operator policy `{name}` (rabbitmqctl clear_operator_policy) or narrow its pattern so it no longer matches this queue"
                ),
            );
        }
        if fields.is_empty() {
            continue;
        }
        let reason = reasons.join("; ");
        match changes.iter_mut().find(|c| c.resource == d.id) {
            Some(c) => {
                c.action = Action::Impossible;
                c.fields.extend(fields);
                c.reason = Some(match c.reason.take() {
                    Some(r) => format!("{r}; {reason}"),
                    None => reason,
                });
            }
            None => changes.push(Change {
                resource: d.id.clone(),
                channel: d.channel.clone(),
                role: d.role,
                action: Action::Impossible,
                fields,
                desired: d.props.clone(),
                messages: None,
                reason: Some(reason),
                destructive: None,
                pruned: false,
                discard: None,
            }),
        }
    }
}

/// Where a replace carries the bindings it re-creates (in the change's `desired`).
pub const REBINDS: &str = "@bindings";

/// Lists in a replace every binding the delete drops with the object, the spec's and
/// everyone else's: one field each, and the whole list in `desired` for apply.
pub fn list_rebinds(change: &mut Change, bindings: &[Binding]) {
    if bindings.is_empty() {
        return;
    }
    let kind = change.resource.kind.as_str();
    for b in bindings {
        change.fields.push(FieldChange {
            key: format!(
                "binding {}",
                binding_name(&b.source, &b.destination, &b.routing_key)
            ),
            old: Some(json!(format!("deleted with the {kind}"))),
            new: Some(json!("re-created")),
        });
    }
    change.desired.insert(
        REBINDS.to_owned(),
        Value::Array(bindings.iter().map(Binding::to_value).collect()),
    );
}

/// The bindings a replace re-creates, as the plan listed them.
pub fn rebinds(change: &Change) -> Vec<Binding> {
    change
        .desired
        .get(REBINDS)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Binding::from_value)
        .collect()
}

/// How a quorum queue is dropped: RabbitMQ refuses `if-empty` on it, so apply counts its
/// messages just before the delete instead; the plan says so.
pub fn quorum_notes(changes: &[Change], live: &BTreeMap<ResourceId, Live>) -> Vec<Note> {
    changes
        .iter()
        .filter(|c| c.drops_object() && c.resource.kind == Kind::Queue)
        .filter(|c| {
            live.get(&c.resource)
                .and_then(|l| l.props.get("type"))
                .and_then(Value::as_str)
                == Some("quorum")
        })
        .map(|c| Note {
            resource: c.resource.clone(),
            message: "quorum queue: RabbitMQ cannot delete it only if empty, so apply counts its messages just before the delete and stops if it holds any (the count lags by up to the broker's statistics interval, 5 s by default: stop producers first)".to_owned(),
        })
        .collect()
}

/// A RabbitMQ version as `/api/overview` reports it (`3.13.7`, `4.0.0+2`, `4.1.0-rc.1`):
/// (major, minor, patch), the patch 0 when absent. `None` when it does not start with numbers.
pub fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let core = v.trim().split(['+', '-', ' ']).next().unwrap_or_default();
    let mut parts = core.split('.').map(str::parse::<u32>);
    let major = parts.next()?.ok()?;
    let minor = parts.next()?.ok()?;
    let patch = match parts.next() {
        Some(p) => p.ok()?,
        None => 0,
    };
    Some((major, minor, patch))
}

/// What the broker's version means for the TTL loop's consumer contract, from 3.13 on.
///
/// RabbitMQ 3.13 introduced message containers: the broker counts `x-death` from its own
/// record of a message's deaths and no longer from an `x-death` header a client publishes.
/// 3.13.3 restored the old reading for AMQP 0-9-1 publishers on the 3.13 line only
/// (rabbitmq-server#11339); 4.0 dropped it for good (4.0 release notes, "AMQP 0.9.1 x-death
/// header"). A consumer that publishes a message to a retry queue itself then sees the same
/// `x-death` count on every delivery and retries forever. `None` below 3.13 (or unparsable).
pub fn contract_note(version: &str) -> Option<String> {
    let v = parse_version(version)?;
    let tail = "a consumer that publishes to a retry queue itself must count attempts in `dlq-attempts`, not `x-death` (docs/rabbitmq.md, consumer contract)";
    let what = if v >= (4, 0, 0) {
        "ignores the `x-death` header a client publishes (4.0 and later)"
    } else if v >= (3, 13, 3) {
        "still counts the `x-death` header an AMQP 0-9-1 client publishes, on the 3.13 line only (3.13.3 and later; 4.0 ignores it)"
    } else if v >= (3, 13, 0) {
        "ignores the `x-death` header a client publishes (3.13.0 to 3.13.2, and 4.0 and later)"
    } else {
        return None;
    };
    // The parsed numbers, not the server's text: a hostile answer prints nothing of its own.
    let (major, minor, patch) = v;
    Some(format!("RabbitMQ {major}.{minor}.{patch} {what}: {tail}"))
}

/// The contract note on the main queue of each channel of `target` that has a TTL retry
/// loop (retry queues): the channels whose consumer counts attempts.
pub fn contract_notes(target: &str, version: &str, desired: &[Desired]) -> Vec<Note> {
    let Some(message) = contract_note(version) else {
        return Vec::new();
    };
    let looped: HashSet<&str> = desired
        .iter()
        .filter(|d| d.id.target == target && d.role == Role::Retry && d.present)
        .map(|d| d.channel.as_str())
        .collect();
    desired
        .iter()
        .filter(|d| {
            d.id.target == target
                && d.id.kind == Kind::Queue
                && d.role == Role::Main
                && d.present
                && looped.contains(d.channel.as_str())
        })
        .map(|d| Note {
            resource: d.id.clone(),
            message: message.clone(),
        })
        .collect()
}

/// One user's permissions on one vhost (`GET /api/permissions`), with whether the user is an
/// administrator (`GET /api/users`, tag `administrator`).
#[derive(Debug, Clone)]
pub struct Permission {
    pub user: String,
    pub vhost: String,
    /// The `read` pattern: the queues the user may consume from or `get` (a regular
    /// expression matched anywhere in the name; empty: none).
    pub read: String,
    pub administrator: bool,
}

/// Notes on dead-letter queues that a non-administrator may read while the channel's main
/// queue is out of that user's reach: RabbitMQ permissions are regular expressions per user
/// and vhost, so a pattern like `.*\.dlq$` gives someone the dead letters of every channel.
/// A pattern this reader cannot evaluate (RabbitMQ uses PCRE) is said so instead.
pub fn permission_notes(
    target: &str,
    desired: &[Desired],
    permissions: &[Permission],
) -> Vec<Note> {
    let queues = |role: Role| {
        desired.iter().filter(move |d| {
            d.id.target == target && d.id.kind == Kind::Queue && d.role == role && d.present
        })
    };
    let mut out = Vec::new();
    for p in permissions
        .iter()
        .filter(|p| !p.administrator && !p.read.is_empty())
    {
        let dlqs: Vec<&Desired> = queues(Role::DeadLetter)
            .filter(|d| d.id.scope == p.vhost)
            .collect();
        if dlqs.is_empty() {
            continue;
        }
        let re = match regex_lite::Regex::new(&p.read) {
            Ok(re) => re,
            Err(_) => {
                for d in dlqs {
                    out.push(Note {
                        resource: d.id.clone(),
                        message: format!("user `{}`'s read permission `{}` could not be evaluated here (RabbitMQ uses PCRE): check by hand that it does not reach the dead-letter queue", p.user, p.read),
                    });
                }
                continue;
            }
        };
        for d in dlqs {
            let Some(main) =
                queues(Role::Main).find(|m| m.channel == d.channel && m.id.scope == d.id.scope)
            else {
                continue;
            };
            if re.is_match(&d.id.name) && !re.is_match(&main.id.name) {
                out.push(Note {
                    resource: d.id.clone(),
                    message: format!(
                        "user `{}` (not an administrator) may read this dead-letter queue (read permission `{}` on vhost `{}`) but not its source {}: dead letters are the same messages; give dead-letter access to operators only (docs/rabbitmq.md)",
                        p.user, p.read, p.vhost, main.id.name
                    ),
                });
            }
        }
    }
    out
}

/// The policies of queues this plan creates go before anything else of their target.
///
/// A RabbitMQ policy write makes the broker re-match every queue of the vhost against every
/// policy: written before its queue exists it costs next to nothing, and the queue is born
/// with its dead-letter settings. Interleaved with queue creation, the cost of each write
/// grows with queues × policies (measured: 64 ms per queue+policy pair at 250 channels,
/// 800 ms at 750; policies first: 3–7 ms a policy, then ~19 ms a queue at 1,000 policies —
/// BENCHMARKS.md). The policy of a queue that already exists keeps its place after the queues
/// it routes to, so a live queue never dead-letters towards one that is not there yet.
pub fn goes_first(changes: &[Change]) -> HashSet<ResourceId> {
    let created: HashSet<(&str, &str, &str)> = changes
        .iter()
        .filter(|c| c.action == Action::Create && c.resource.kind == Kind::Queue)
        .map(|c| queue_key(&c.resource))
        .collect();
    changes
        .iter()
        .filter(|c| {
            c.action != Action::Delete
                && c.resource.kind == Kind::Policy
                && created.contains(&queue_key(&c.resource))
        })
        .map(|c| c.resource.clone())
        .collect()
}

/// A policy is named after its queue: (target, vhost, name) ties them.
fn queue_key(r: &ResourceId) -> (&str, &str, &str) {
    (&r.target, &r.scope, &r.name)
}

impl crate::backend::kit::doors::Plan for super::Rabbitmq {
    fn desired(r: &crate::spec::resolve::Resolved) -> Vec<crate::resource::Desired> {
        super::desired::desired(r)
    }

    fn refine(change: &mut Change) {
        refine(change);
    }

    fn duration_unit(change: &Change, key: &str) -> Option<crate::resource::TimeUnit> {
        duration_unit(change, key)
    }

    /// RabbitMQ: `message-ttl` in a policy or as an x-argument.
    fn is_retention(key: &str) -> bool {
        key == "definition.message-ttl" || key == "arguments.x-message-ttl"
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
    use crate::plan::{FieldChange, diff, sort_for_apply};
    use crate::resource::Role;
    use crate::spec::model::Backend;

    fn queue() -> Desired {
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
            props: [("a".to_owned(), json!(1))].into_iter().collect(),
            immutable: false,
            present: true,
        }
    }

    fn live(props: serde_json::Value) -> Live {
        Live {
            props: serde_json::from_value(props).expect("props"),
            messages: None,
        }
    }

    fn channel_queues(vhost: &str) -> Vec<Desired> {
        [
            ("orders.created", Role::Main),
            ("orders.created.dlq", Role::DeadLetter),
        ]
        .into_iter()
        .map(|(name, role)| {
            let mut d = queue();
            d.id.name = name.into();
            d.id.scope = vhost.into();
            d.role = role;
            d
        })
        .collect()
    }

    fn reader(user: &str, read: &str, administrator: bool) -> Permission {
        Permission {
            user: user.into(),
            vhost: "/".into(),
            read: read.into(),
            administrator,
        }
    }

    #[test]
    fn a_user_who_may_read_the_dlq_but_not_its_source_is_noted() {
        let d = channel_queues("/");
        let notes = permission_notes("t", &d, &[reader("support", "\\.dlq$", false)]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].resource.name, "orders.created.dlq");
        assert!(
            notes[0]
                .message
                .starts_with("user `support` (not an administrator)"),
            "{}",
            notes[0].message
        );
        for quiet in [
            reader("ops", "\\.dlq$", true),
            reader("app", "^orders\\.", false),
            reader("nobody", "", false),
            reader("other", "^payments\\.", false),
        ] {
            assert_eq!(
                permission_notes("t", &d, std::slice::from_ref(&quiet)),
                Vec::new(),
                "{quiet:?}"
            );
        }
        // The source is the main queue of the same channel and vhost, not the first main
        // queue listed: another channel's in this vhost, or this channel's in another.
        let mut crowded = Vec::new();
        for (name, channel, vhost) in [
            ("payments", "payments", "/"),
            ("legacy.orders", "c", "/prod"),
        ] {
            let mut m = queue();
            m.id.name = name.into();
            m.id.scope = vhost.into();
            m.channel = channel.into();
            m.role = Role::Main;
            crowded.push(m);
        }
        crowded.extend(d.iter().cloned());
        assert_eq!(
            permission_notes("t", &crowded, &[reader("app", "^orders\\.", false)]),
            Vec::new()
        );
        // Another vhost's permissions say nothing about this one.
        assert_eq!(
            permission_notes(
                "t",
                &channel_queues("/prod"),
                &[reader("support", ".*dlq", false)]
            ),
            Vec::new()
        );
        // A pattern outside what can be evaluated here is said, not guessed.
        let n = permission_notes("t", &d, &[reader("x", "(?<=a)b", false)]);
        assert!(
            n.len() == 1 && n[0].message.contains("could not be evaluated"),
            "{n:?}"
        );
    }

    #[test]
    fn versions_parse_as_the_management_api_reports_them() {
        assert_eq!(parse_version("3.10.8"), Some((3, 10, 8)));
        assert_eq!(parse_version("3.13.7"), Some((3, 13, 7)));
        assert_eq!(parse_version("4.0.0+2"), Some((4, 0, 0)));
        assert_eq!(parse_version("4.1.0-rc.1"), Some((4, 1, 0)));
        assert_eq!(parse_version(" 4.2 "), Some((4, 2, 0)));
        assert_eq!(parse_version("3.9.10"), Some((3, 9, 10)));
        assert_eq!(parse_version(""), None);
        assert_eq!(parse_version("unknown"), None);
        assert_eq!(parse_version("4.x.1"), None);
        // Numbers, not strings: 3.9 < 3.13 < 4.0.
        assert!(parse_version("3.9.29") < parse_version("3.13.0"));
        assert!(parse_version("3.13.7") < parse_version("4.0.0"));
    }

    #[test]
    fn the_contract_note_appears_from_3_13_and_says_what_each_version_does() {
        for quiet in ["3.10.8", "3.12.14", "3.9.29", "2.8.0", "garbage", ""] {
            assert_eq!(contract_note(quiet), None, "{quiet}");
        }
        for (v, says) in [
            ("3.13.0", "3.13.0 to 3.13.2"),
            ("3.13.2", "3.13.0 to 3.13.2"),
            ("3.13.3", "still counts"),
            ("3.13.7", "still counts"),
            ("4.0.0+2", "4.0 and later"),
            ("4.1.4", "4.0 and later"),
            ("10.0.0", "4.0 and later"),
        ] {
            let n = contract_note(v).unwrap_or_else(|| panic!("{v}: a note"));
            let shown = v.split('+').next().unwrap_or(v);
            assert!(n.starts_with(&format!("RabbitMQ {shown} ")), "{n}");
            assert!(n.contains(says) && n.contains("`dlq-attempts`"), "{v}: {n}");
        }
    }

    #[test]
    fn the_contract_note_goes_on_the_main_queue_of_each_channel_with_a_retry_loop() {
        let q = |name: &str, channel: &str, role: Role, target: &str| Desired {
            id: ResourceId {
                target: target.into(),
                name: name.into(),
                ..queue().id
            },
            channel: channel.into(),
            role,
            ..queue()
        };
        let desired = vec![
            q("a.process", "a", Role::Main, "t"),
            q("a.retry", "a", Role::Retry, "t"),
            q("a.dlq", "a", Role::DeadLetter, "t"),
            // A delivery limit: no retry queue, no consumer count.
            q("b.process", "b", Role::Main, "t"),
            q("b.dlq", "b", Role::DeadLetter, "t"),
            // Another target's loop.
            q("c.process", "c", Role::Main, "u"),
            q("c.retry", "c", Role::Retry, "u"),
        ];
        let notes = contract_notes("t", "4.0.5", &desired);
        let named: Vec<&str> = notes.iter().map(|n| n.resource.name.as_str()).collect();
        assert_eq!(named, ["a.process"]);
        assert!(contract_notes("t", "3.12.14", &desired).is_empty());
        // Only the numbers of what the server sent are shown.
        let odd = contract_note("4.0.0+\u{1b}[2J").unwrap_or_default();
        assert!(
            odd.starts_with("RabbitMQ 4.0.0 ") && !odd.contains('\u{1b}'),
            "{odd}"
        );
    }

    #[test]
    fn a_foreign_policy_that_caps_a_queue_without_a_dlqctl_policy_is_impossible_drift() {
        let dlq = queue();
        let mut changes = Vec::new();
        // `queue-mode` is harmless: the reader never carries it.
        let capped = live(
            json!({"a": 1, "@policy": "cap", "@policy_definition.max-length": 1, "@policy_definition.overflow": "drop-head"}),
        );
        let state = [(dlq.id.clone(), capped)].into_iter().collect();
        add_policy_drift(
            &mut changes,
            std::slice::from_ref(&dlq),
            &state,
            &OperatorPolicies::new(),
        );
        assert_eq!(changes.len(), 1);
        let c = &changes[0];
        assert_eq!(c.action, Action::Impossible);
        let keys: Vec<&str> = c.fields.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(
            keys,
            ["effective_policy.max-length", "effective_policy.overflow"]
        );
        let reason = c.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("policy `cap`") && reason.contains("remove"),
            "{reason}"
        );

        // An operator policy counts the same; no policy at all is no drift.
        let mut changes = Vec::new();
        let op: OperatorPolicies = [(
            dlq.id.clone(),
            (
                "limits".to_owned(),
                [("message-ttl".to_owned(), json!(1000))]
                    .into_iter()
                    .collect(),
            ),
        )]
        .into_iter()
        .collect();
        let state = [(dlq.id.clone(), live(json!({"a": 1})))]
            .into_iter()
            .collect();
        add_policy_drift(
            &mut changes,
            std::slice::from_ref(&dlq),
            &state,
            &OperatorPolicies::new(),
        );
        assert!(changes.is_empty());
        add_policy_drift(&mut changes, &[dlq], &state, &op);
        assert_eq!(changes.len(), 1);
        assert!(
            changes[0]
                .reason
                .as_deref()
                .unwrap_or_default()
                .contains("operator policy `limits`")
        );
    }

    #[test]
    fn a_foreign_policy_winning_over_dlqctls_drops_its_dead_lettering() {
        let q = queue();
        let mut policy = queue();
        policy.id.kind = Kind::Policy;
        policy.props = [("definition.dead-letter-exchange".to_owned(), json!(""))]
            .into_iter()
            .collect();
        let mut changes = Vec::new();
        let state = [(q.id.clone(), live(json!({"a": 1, "@policy": "other"})))]
            .into_iter()
            .collect();
        add_policy_drift(
            &mut changes,
            &[q.clone(), policy.clone()],
            &state,
            &OperatorPolicies::new(),
        );
        assert_eq!(changes.len(), 1);
        assert_eq!(
            changes[0].fields[0].key,
            "effective_policy.dead-letter-exchange"
        );
        assert_eq!(changes[0].fields[0].old, None);
        // dlqctl's own policy applied: nothing to say.
        let mut changes = Vec::new();
        let state = [(q.id.clone(), live(json!({"a": 1, "@policy": "q"})))]
            .into_iter()
            .collect();
        add_policy_drift(&mut changes, &[q, policy], &state, &OperatorPolicies::new());
        assert!(changes.is_empty());
    }

    #[test]
    fn apply_order_writes_policies_of_new_queues_first_and_keeps_existing_queues_safe() {
        let mk = |channel: &str, name: &str, kind, role, action| {
            let mut c = diff(&queue(), None).expect("a create");
            c.channel = channel.into();
            c.resource.kind = kind;
            c.resource.name = name.into();
            c.role = role;
            c.action = action;
            c
        };
        let mut v = vec![
            // Channel a: new; its main policy may go before every queue.
            mk("a", "a.main", Kind::Queue, Role::Main, Action::Create),
            mk(
                "a",
                "a.main",
                Kind::Policy,
                Role::MainPolicy,
                Action::Create,
            ),
            mk("a", "a.dlq", Kind::Queue, Role::DeadLetter, Action::Create),
            // Channel b: its main queue exists; the policy now routes to a new retry queue,
            // which must exist first.
            mk("b", "b.retry", Kind::Queue, Role::Retry, Action::Create),
            mk(
                "b",
                "b.main",
                Kind::Policy,
                Role::MainPolicy,
                Action::Update,
            ),
            // Channel c: going away.
            mk(
                "c",
                "c.main",
                Kind::Policy,
                Role::MainPolicy,
                Action::Delete,
            ),
            mk("c", "c.main", Kind::Queue, Role::Main, Action::Delete),
        ];
        let first = goes_first(&v);
        sort_for_apply(&mut v, &first);
        let order: Vec<_> = v
            .iter()
            .map(|c| format!("{} {}", c.resource.kind.as_str(), c.resource.name))
            .collect();
        assert_eq!(
            order,
            vec![
                "policy a.main",
                "queue a.dlq",
                "queue a.main",
                "queue b.retry",
                "policy b.main",
                "policy c.main",
                "queue c.main",
            ]
        );
    }

    fn dlq_policy_update(old: Option<u64>, new: Option<u64>, role: Role) -> Change {
        let mut c = diff(&queue(), None).expect("a create");
        c.resource.kind = Kind::Policy;
        c.role = role;
        c.action = Action::Update;
        c.fields = vec![FieldChange {
            key: "definition.message-ttl".into(),
            old: old.map(|v| json!(v)),
            new: new.map(|v| json!(v)),
        }];
        c
    }

    /// Issue 53: the create of a dead-letter policy with a TTL, for a DLQ that already exists,
    /// is guarded by what the DLQ holds (not for a new DLQ, an empty one, or one whose TTL in
    /// force is already as short), and says the count; a lower TTL says it too.
    #[test]
    fn a_new_ttl_on_an_existing_dlq_is_guarded_by_what_it_holds() {
        let mut create = dlq_policy_update(None, Some(3_600_000), Role::DeadLetterPolicy);
        create.action = Action::Create;
        let queue_id = ResourceId {
            kind: Kind::Queue,
            ..create.resource.clone()
        };
        let live_with = |props: Value| -> BTreeMap<ResourceId, Live> {
            [(
                queue_id.clone(),
                Live {
                    props: serde_json::from_value(props).expect("props"),
                    messages: None,
                },
            )]
            .into()
        };
        assert_eq!(
            ttl_on_existing_queue(&create, &BTreeMap::new()),
            None,
            "a new DLQ"
        );
        let plain = live_with(json!({"type": "classic"}));
        assert_eq!(
            ttl_on_existing_queue(&create, &plain),
            Some(queue_id.clone())
        );
        let shorter = live_with(json!({"arguments.x-message-ttl": 1000}));
        assert_eq!(
            ttl_on_existing_queue(&create, &shorter),
            None,
            "already shorter"
        );
        let longer = live_with(json!({"@policy_definition.message-ttl": 86_400_000}));
        assert!(ttl_on_existing_queue(&create, &longer).is_some());

        let mut empty = create.clone();
        guard_ttl(&mut empty, Some(0));
        assert!(empty.destructive.is_none(), "an empty DLQ loses nothing");
        let mut held = create.clone();
        guard_ttl(&mut held, Some(5));
        assert!(
            held.destructive
                .as_deref()
                .is_some_and(|d| d.contains("3600000 ms") && d.contains("it holds 5 messages now")),
            "{:?}",
            held.destructive
        );
        assert!(held.may_lose_messages());
        let mut unknown = create;
        guard_ttl(&mut unknown, None);
        assert!(unknown.may_lose_messages(), "no count: at risk");

        let mut lower =
            dlq_policy_update(Some(86_400_000), Some(3_600_000), Role::DeadLetterPolicy);
        refine(&mut lower);
        assert_eq!(ttl_on_existing_queue(&lower, &plain), Some(queue_id));
        guard_ttl(&mut lower, Some(7));
        assert!(
            lower
                .destructive
                .as_deref()
                .is_some_and(|d| d.starts_with("lowering")
                    && d.ends_with("it holds 7 messages now, each at risk")),
            "{:?}",
            lower.destructive
        );
    }

    #[test]
    fn a_shorter_or_new_ttl_on_the_dead_letter_queue_is_guarded_as_message_loss() {
        for (old, new, destructive) in [
            (Some(86_400_000), Some(3_600_000), true),
            (None, Some(3_600_000), true),
            (Some(3_600_000), Some(86_400_000), false),
            (Some(3_600_000), None, false),
        ] {
            let mut c = dlq_policy_update(old, new, Role::DeadLetterPolicy);
            refine(&mut c);
            assert_eq!(c.destructive.is_some(), destructive, "{old:?} -> {new:?}");
            assert_eq!(c.may_lose_messages(), destructive, "{old:?} -> {new:?}");
        }
        // The invalid-message queue dead-letters nowhere either.
        let mut c = dlq_policy_update(Some(86_400_000), Some(3_600_000), Role::InvalidPolicy);
        refine(&mut c);
        assert!(
            c.destructive
                .as_deref()
                .is_some_and(|d| d.contains("invalid-message queue")),
            "{:?}",
            c.destructive
        );
        // A retry queue's TTL is its delay: shorter only retries sooner.
        let mut c = dlq_policy_update(Some(5_000), Some(1_000), Role::RetryPolicy);
        refine(&mut c);
        assert!(c.destructive.is_none());
    }

    fn binding(destination: &str, key: &str) -> Binding {
        Binding {
            source: "x".into(),
            destination: destination.into(),
            destination_type: "queue".into(),
            routing_key: key.into(),
            properties_key: key.into(),
            arguments: None,
        }
    }

    #[test]
    fn a_replace_lists_every_binding_it_drops_and_carries_them_for_apply() {
        let mut c = diff(&queue(), None).expect("a create");
        c.action = Action::Replace;
        let before = c.fields.len();
        list_rebinds(&mut c, &[]);
        assert_eq!(c.fields.len(), before, "no bindings, nothing listed");
        assert!(rebinds(&c).is_empty());
        let bs = [binding("q", "a"), binding("q", "b")];
        list_rebinds(&mut c, &bs);
        let listed: Vec<(&str, Option<&serde_json::Value>)> = c.fields[before..]
            .iter()
            .map(|f| (f.key.as_str(), f.old.as_ref()))
            .collect();
        let deleted = json!("deleted with the queue");
        assert_eq!(
            listed,
            [
                ("binding x -> q [a]", Some(&deleted)),
                ("binding x -> q [b]", Some(&deleted)),
            ]
        );
        assert_eq!(rebinds(&c), bs);
    }

    #[test]
    fn only_a_dropped_quorum_queue_gets_the_count_before_delete_note() {
        let mk = |kind, action| {
            let mut c = diff(&queue(), None).expect("a create");
            c.resource.kind = kind;
            c.action = action;
            c
        };
        let quorum = |kind| {
            let id = ResourceId { kind, ..queue().id };
            (id, live(json!({"type": "quorum"})))
        };
        let live_quorum: BTreeMap<ResourceId, Live> =
            [quorum(Kind::Queue), quorum(Kind::Policy)].into();
        for (kind, action, noted) in [
            (Kind::Queue, Action::Replace, true),
            (Kind::Queue, Action::Delete, true),
            (Kind::Queue, Action::Update, false),
            (Kind::Policy, Action::Delete, false),
        ] {
            let n = quorum_notes(&[mk(kind, action)], &live_quorum);
            assert_eq!(n.len(), usize::from(noted), "{kind:?} {action:?}");
        }
        let classic: BTreeMap<ResourceId, Live> =
            [(queue().id, live(json!({"type": "classic"})))].into();
        assert!(quorum_notes(&[mk(Kind::Queue, Action::Delete)], &classic).is_empty());
        let n = quorum_notes(&[mk(Kind::Queue, Action::Delete)], &live_quorum);
        assert!(
            n[0].message
                .starts_with("quorum queue: RabbitMQ cannot delete it only if empty")
        );
    }

    #[test]
    fn the_ttl_guard_applies_to_updates_of_the_dead_letter_policy_only() {
        let mut create = dlq_policy_update(None, Some(1_000), Role::DeadLetterPolicy);
        create.action = Action::Create;
        refine(&mut create);
        assert_eq!(create.destructive, None, "a new policy drops nothing");
        let mut queue_ttl = dlq_policy_update(Some(5_000), Some(1_000), Role::DeadLetterPolicy);
        queue_ttl.resource.kind = Kind::Queue;
        refine(&mut queue_ttl);
        assert_eq!(
            queue_ttl.destructive, None,
            "a queue argument change is a replace"
        );
        let mut same = dlq_policy_update(Some(1_000), Some(1_000), Role::DeadLetterPolicy);
        refine(&mut same);
        assert_eq!(same.destructive, None);
        let mut other = dlq_policy_update(Some(5_000), Some(1_000), Role::DeadLetterPolicy);
        other.fields[0].key = "definition.expires".into();
        refine(&mut other);
        assert_eq!(
            other.destructive, None,
            "only message-ttl expires dead letters"
        );
        let mut shorter = dlq_policy_update(Some(5_000), Some(1_000), Role::DeadLetterPolicy);
        refine(&mut shorter);
        let how = shorter.destructive.unwrap_or_default();
        assert!(how.contains("from 5000 ms to 1000 ms"), "{how}");
    }

    #[test]
    fn rabbitmq_durations_are_the_ttls_and_expiries_in_milliseconds() {
        let c = diff(&queue(), None).expect("a create");
        for key in [
            "definition.message-ttl",
            "arguments.x-message-ttl",
            "definition.expires",
            "arguments.x-expires",
            "message-ttl",
        ] {
            assert_eq!(duration_unit(&c, key), Some(TimeUnit::Millis), "{key}");
        }
        for key in ["definition.max-length", "arguments.x-delivery-limit"] {
            assert_eq!(duration_unit(&c, key), None, "{key}");
        }
    }

    #[test]
    fn a_queue_whose_dlqctl_policy_is_not_the_one_applied_gets_a_note() {
        let q = queue();
        let mut policy = queue();
        policy.id.kind = Kind::Policy;
        let noted = |queue_live: serde_json::Value| {
            let state: BTreeMap<ResourceId, Live> = [
                (q.id.clone(), live(queue_live)),
                (policy.id.clone(), live(json!({}))),
            ]
            .into();
            notes(&[q.clone(), policy.clone()], &state)
        };
        let n = noted(json!({"@policy": "other"}));
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].resource, q.id, "the note is on the queue");
        assert!(
            n[0].message.contains("applies policy `other`"),
            "{}",
            n[0].message
        );
        let n = noted(json!({}));
        assert_eq!(n.len(), 1);
        assert!(
            n[0].message.contains("does not (yet) apply it"),
            "{}",
            n[0].message
        );
        assert!(
            noted(json!({"@policy": "q"})).is_empty(),
            "its own policy applies"
        );
        // No live policy, or a policy the spec no longer wants: nothing to observe.
        let only_queue: BTreeMap<ResourceId, Live> = [(q.id.clone(), live(json!({})))].into();
        assert!(notes(&[q.clone(), policy.clone()], &only_queue).is_empty());
        let mut gone = policy.clone();
        gone.present = false;
        let state: BTreeMap<ResourceId, Live> = [
            (q.id.clone(), live(json!({}))),
            (policy.id.clone(), live(json!({}))),
        ]
        .into();
        assert!(notes(&[q.clone(), gone], &state).is_empty());
    }

    #[test]
    fn only_the_policy_of_a_queue_this_plan_creates_goes_first() {
        let mk = |name: &str, kind, action| {
            let mut c = diff(&queue(), None).expect("a create");
            c.resource.kind = kind;
            c.resource.name = name.into();
            c.action = action;
            c
        };
        let changes = [
            // The queue exists (updated in place): its new policy waits for the usual order.
            mk("d.main", Kind::Queue, Action::Update),
            mk("d.main", Kind::Policy, Action::Create),
            // The queue is new: its policy, even an update, goes first.
            mk("e.main", Kind::Queue, Action::Create),
            mk("e.main", Kind::Policy, Action::Update),
        ];
        let first = goes_first(&changes);
        assert_eq!(first, [changes[3].resource.clone()].into());
    }

    #[test]
    fn drift_is_a_foreign_value_other_than_the_spec_wants_on_a_queue_the_spec_keeps() {
        let q = queue();
        let mut policy = queue();
        policy.id.kind = Kind::Policy;
        policy.props = [("definition.message-ttl".to_owned(), json!(1000))]
            .into_iter()
            .collect();
        let op = |ttl: serde_json::Value| -> OperatorPolicies {
            [(
                q.id.clone(),
                (
                    "limits".to_owned(),
                    [("message-ttl".to_owned(), ttl)].into_iter().collect(),
                ),
            )]
            .into()
        };
        let state: BTreeMap<ResourceId, Live> =
            [(q.id.clone(), live(json!({"a": 1, "@policy": "q"})))].into();
        let drift = |desired: &[Desired], op: &OperatorPolicies, changes: &mut Vec<Change>| {
            add_policy_drift(changes, desired, &state, op);
        };
        // The same value as the spec's policy: no drift; another value: drift.
        let mut changes = Vec::new();
        drift(&[q.clone(), policy.clone()], &op(json!(1000)), &mut changes);
        assert!(changes.is_empty(), "{changes:?}");
        drift(&[q.clone(), policy.clone()], &op(json!(5)), &mut changes);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].fields[0].new, Some(json!(1000)));
        // A queue the spec no longer wants is not judged.
        let mut gone = q.clone();
        gone.present = false;
        let mut changes = Vec::new();
        drift(&[gone, policy.clone()], &op(json!(5)), &mut changes);
        assert!(changes.is_empty(), "{changes:?}");
        // A policy the spec no longer wants sets nothing the queue should keep.
        let mut unwanted = policy.clone();
        unwanted.present = false;
        let mut changes = Vec::new();
        drift(&[q.clone(), unwanted], &op(json!(1000)), &mut changes);
        assert_eq!(changes.len(), 1, "1000 is no longer wanted: drift");
        assert_eq!(changes[0].fields[0].new, None);
        // A change already planned for the queue becomes impossible, keeping its reason.
        let mut update = diff(&q, None).expect("a create");
        update.action = Action::Update;
        update.reason = Some("planned".into());
        let mut changes = vec![update];
        drift(&[q.clone(), policy], &op(json!(5)), &mut changes);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].action, Action::Impossible);
        let reason = changes[0].reason.as_deref().unwrap_or_default();
        assert!(
            reason.starts_with("planned; operator policy `limits`"),
            "{reason}"
        );
    }
}
