//! RabbitMQ plan rules on top of the generic diff (pure): notes about policies the broker does
//! not apply, and the apply-order hint that a new queue's policy goes first.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use crate::plan::{Action, Change, Note};
use crate::resource::{Desired, Kind, Live, ResourceId};

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

/// RabbitMQ's changes are all made in place or by the guarded replace: nothing to refine.
pub fn refine(_change: &mut Change) {}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{diff, sort_for_apply};
    use crate::resource::Role;
    use crate::spec::model::Backend;
    use serde_json::json;

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
}
