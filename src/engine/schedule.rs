//! Which of a plan's changes may run at the same time (pure): the ordering rules of
//! [`crate::plan::sort_for_apply`] turned into explicit dependencies, so that apply can run
//! independent changes concurrently without breaking any of them.
//!
//! The plan's order stays the reference: every dependency points to an earlier change, so the
//! lowest change not yet done is always ready and running one change at a time reproduces the
//! plan's order exactly. Within one target:
//!
//! - **Phases.** The changes that must go first (RabbitMQ policies of queues this plan
//!   creates: [`crate::backend::goes_first`]), then the other creates and updates, then the
//!   deletes. A phase starts only when every change of the earlier phases of its target is
//!   done.
//! - **Channels.** Within a phase, the changes of one channel run one after the other, in the
//!   plan's order (by role: a DLQ before what dead-letters into it, an exchange before its
//!   bindings; deletes in reverse). Different channels run side by side.
//! - **Objects.** Two changes to the same object (a shared exchange two channels declare) never
//!   overlap, nor does a RabbitMQ binding with a change to its source exchange.
//!
//! Different targets share nothing and run side by side.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::plan::{Action, Change};
use crate::resource::{Kind, ResourceId};

/// The three phases of a target, in the order they run.
const PHASES: usize = 3;

fn phase(c: &Change, first: &HashSet<ResourceId>) -> usize {
    match c.action {
        Action::Delete => 2,
        _ if first.contains(&c.resource) => 0,
        _ => 1,
    }
}

/// The objects a change writes or depends on being left alone meanwhile: its own, and for a
/// RabbitMQ binding its source exchange (a replace of that exchange, in any channel, re-creates
/// the bindings it reads just before; a binding created meanwhile would be lost).
fn touches(c: &Change) -> Vec<ResourceId> {
    let mut out = vec![c.resource.clone()];
    if c.resource.kind == Kind::Binding
        && let Some(source) = c.desired.get("source").and_then(|v| v.as_str())
        && !source.is_empty()
    {
        out.push(ResourceId {
            kind: Kind::Exchange,
            name: source.to_owned(),
            ..c.resource.clone()
        });
    }
    out
}

/// The dependency state of one apply: hands out changes whose dependencies are done.
#[derive(Debug)]
pub struct Schedule {
    /// Target names, in the order they first appear; a change's target is an index into it.
    targets: Vec<String>,
    target_of: Vec<usize>,
    phase_of: Vec<usize>,
    /// Per change: how many of its explicit dependencies are not done.
    waiting: Vec<usize>,
    /// Per change: the changes that wait for it.
    dependents: Vec<Vec<usize>>,
    /// Per target and phase: changes not done.
    remaining: Vec<[usize; PHASES]>,
    /// Per target: changes whose dependencies are done but whose phase has not started.
    parked: Vec<[Vec<usize>; PHASES]>,
    /// Per target: changes that may start, lowest first.
    ready: Vec<BinaryHeap<Reverse<usize>>>,
    done: Vec<bool>,
}

impl Schedule {
    /// `steps` in the plan's order; `first`: what [`crate::backend::goes_first`] says.
    pub fn new(steps: &[&Change], first: &HashSet<ResourceId>) -> Self {
        let mut targets: Vec<String> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut target_of = Vec::with_capacity(steps.len());
        let mut phase_of = Vec::with_capacity(steps.len());
        let mut waiting = vec![0; steps.len()];
        let mut dependents = vec![Vec::new(); steps.len()];
        // The last change seen of each (target, phase, channel), and of each object.
        let mut chain: HashMap<(usize, usize, &str), usize> = HashMap::new();
        let mut object: HashMap<ResourceId, usize> = HashMap::new();
        for (i, c) in steps.iter().enumerate() {
            let t = *index.entry(c.resource.target.as_str()).or_insert_with(|| {
                targets.push(c.resource.target.clone());
                targets.len() - 1
            });
            let p = phase(c, first);
            target_of.push(t);
            phase_of.push(p);
            let mut after: Vec<usize> = Vec::with_capacity(2);
            if let Some(prev) = chain.insert((t, p, c.channel.as_str()), i) {
                after.push(prev);
            }
            for touched in touches(c) {
                if let Some(prev) = object.insert(touched, i)
                    && !after.contains(&prev)
                {
                    after.push(prev);
                }
            }
            waiting[i] = after.len();
            for a in after {
                dependents[a].push(i);
            }
        }
        let mut remaining = vec![[0; PHASES]; targets.len()];
        for (t, p) in target_of.iter().zip(&phase_of) {
            remaining[*t][*p] += 1;
        }
        let mut s = Schedule {
            parked: vec![Default::default(); targets.len()],
            ready: vec![BinaryHeap::new(); targets.len()],
            targets,
            target_of,
            phase_of,
            waiting,
            dependents,
            remaining,
            done: vec![false; steps.len()],
        };
        for i in 0..steps.len() {
            if s.waiting[i] == 0 {
                s.release(i);
            }
        }
        s
    }

    /// The targets, in the order the plan names them first.
    pub fn targets(&self) -> &[String] {
        &self.targets
    }

    /// The target of change `i`, as an index into [`targets`](Self::targets).
    pub fn target_of(&self, i: usize) -> usize {
        self.target_of[i]
    }

    /// The lowest change of target `t` that may start now, taken out of the ready set.
    pub fn next(&mut self, t: usize) -> Option<usize> {
        self.ready[t].pop().map(|Reverse(i)| i)
    }

    /// The change [`next`](Self::next) would hand out, left in the ready set.
    pub fn peek(&self, t: usize) -> Option<usize> {
        self.ready[t].peek().map(|Reverse(i)| *i)
    }

    /// Whether target `t` has a change that may start now (the tests' view; apply asks
    /// [`next`](Self::next)).
    #[cfg(test)]
    pub fn has_ready(&self, t: usize) -> bool {
        !self.ready[t].is_empty()
    }

    /// How many changes of target `t` may start now.
    pub fn ready_len(&self, t: usize) -> usize {
        self.ready[t].len()
    }

    /// Marks change `i` (handed out by [`next`](Self::next)) done: what waited only for it,
    /// and a phase that only it held back, become ready.
    pub fn finish(&mut self, i: usize) {
        if std::mem::replace(&mut self.done[i], true) {
            return;
        }
        let (t, p) = (self.target_of[i], self.phase_of[i]);
        self.remaining[t][p] -= 1;
        for d in std::mem::take(&mut self.dependents[i]) {
            self.waiting[d] -= 1;
            if self.waiting[d] == 0 {
                self.release(d);
            }
        }
        if self.remaining[t][p] == 0 {
            // Phase `p` is over: what later phases parked is released again, and `release`
            // parks it back while an earlier phase still has changes left (at most once per
            // phase of a target). Phase `p`'s own list is empty by now: nothing is parked in
            // a phase that has started.
            for phase in p..PHASES {
                for d in std::mem::take(&mut self.parked[t][phase]) {
                    self.release(d);
                }
            }
        }
    }

    /// Change `i` has no explicit dependency left: ready if every earlier phase of its target
    /// is done, parked until then otherwise.
    fn release(&mut self, i: usize) {
        let (t, p) = (self.target_of[i], self.phase_of[i]);
        if self.remaining[t][..p].iter().all(|n| *n == 0) {
            self.ready[t].push(Reverse(i));
        } else {
            self.parked[t][p].push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The ordering rules, offline: whatever order concurrent changes finish in, no change
    //! starts before what it depends on, and one at a time is the plan's order.
    use super::*;
    use crate::resource::{Desired, Kind, Role};
    use crate::spec::model::Backend;
    use serde_json::json;
    use std::collections::BTreeMap;

    /// Each change's explicit dependencies, by index (for the tests).
    fn dependencies(steps: &[&Change], first: &HashSet<ResourceId>) -> BTreeMap<usize, Vec<usize>> {
        let s = Schedule::new(steps, first);
        let mut out: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (a, ds) in s.dependents.iter().enumerate() {
            for d in ds {
                out.entry(*d).or_default().push(a);
            }
        }
        out
    }

    fn change(
        target: &str,
        channel: &str,
        kind: Kind,
        name: &str,
        role: Role,
        action: Action,
    ) -> Change {
        let d = Desired {
            id: ResourceId {
                target: target.into(),
                backend: Backend::Rabbitmq,
                kind,
                scope: "/".into(),
                name: name.into(),
            },
            channel: channel.into(),
            role,
            props: [("a".to_owned(), json!(1))].into_iter().collect(),
            immutable: false,
            present: true,
        };
        let mut c = crate::plan::diff(&d, None).expect("a create");
        c.action = action;
        c
    }

    /// A mix of every rule: two targets, policies that go first, channels with a DLQ and a main
    /// queue, a shared exchange, and deletes.
    fn mix() -> (Vec<Change>, HashSet<ResourceId>) {
        use Action::*;
        let mut cs = vec![
            change(
                "r",
                "a",
                Kind::Policy,
                "a.dlq",
                Role::DeadLetterPolicy,
                Create,
            ),
            change(
                "r",
                "b",
                Kind::Policy,
                "b.dlq",
                Role::DeadLetterPolicy,
                Create,
            ),
            change("r", "a", Kind::Queue, "a.dlq", Role::DeadLetter, Create),
            change("r", "a", Kind::Queue, "a", Role::Main, Create),
            change("r", "a", Kind::Exchange, "in", Role::Exchange, Create),
            change("r", "a", Kind::Binding, "in->a", Role::Binding, Create),
            change("r", "b", Kind::Queue, "b.dlq", Role::DeadLetter, Create),
            change("r", "b", Kind::Queue, "b", Role::Main, Update),
            change("r", "b", Kind::Exchange, "in", Role::Exchange, Create),
            change("r", "b", Kind::Binding, "in->b", Role::Binding, Create),
            change("r", "old", Kind::Queue, "old", Role::Main, Delete),
            change("r", "old", Kind::Queue, "old.dlq", Role::DeadLetter, Delete),
            change("s", "x", Kind::Queue, "x-dlq", Role::DeadLetter, Create),
            change("s", "x", Kind::Queue, "x", Role::Main, Create),
            change("s", "x", Kind::Alarm, "x-dlq-depth", Role::Alarm, Create),
            change("s", "y", Kind::Queue, "y-dlq", Role::DeadLetter, Create),
        ];
        let first: HashSet<ResourceId> = cs
            .iter()
            .filter(|c| c.resource.kind == Kind::Policy)
            .map(|c| c.resource.clone())
            .collect();
        crate::plan::sort_for_apply(&mut cs, &first);
        (cs, first)
    }

    fn pos(steps: &[&Change], target: &str, name: &str, kind: Kind, channel: &str) -> usize {
        steps
            .iter()
            .position(|c| {
                c.resource.target == target
                    && c.resource.name == name
                    && c.resource.kind == kind
                    && c.channel == channel
            })
            .unwrap_or_else(|| panic!("{name} not in the mix"))
    }

    /// Runs the schedule with up to `width` changes in flight per target, finishing them in an
    /// order `pick` chooses; returns when each change started and finished (a global clock).
    fn run(
        steps: &[&Change],
        first: &HashSet<ResourceId>,
        width: usize,
        mut pick: impl FnMut(usize) -> usize,
    ) -> (Vec<usize>, Vec<usize>) {
        let mut s = Schedule::new(steps, first);
        let mut started = vec![usize::MAX; steps.len()];
        let mut finished = vec![usize::MAX; steps.len()];
        let mut flight: Vec<usize> = Vec::new();
        let mut clock = 0;
        for _ in 0..10 * steps.len() + 10 {
            for t in 0..s.targets().len() {
                while flight.iter().filter(|i| s.target_of(**i) == t).count() < width {
                    let Some(i) = s.next(t) else { break };
                    assert_eq!(started[i], usize::MAX, "change {i} handed out twice");
                    started[i] = clock;
                    clock += 1;
                    flight.push(i);
                }
            }
            if flight.is_empty() {
                break;
            }
            let i = flight.remove(pick(flight.len()) % flight.len());
            finished[i] = clock;
            clock += 1;
            s.finish(i);
        }
        assert!(
            finished.iter().all(|f| *f != usize::MAX),
            "every change runs: {finished:?}"
        );
        (started, finished)
    }

    #[test]
    fn one_at_a_time_is_the_plans_order() {
        let (cs, first) = mix();
        let steps: Vec<&Change> = cs.iter().collect();
        let (started, _) = run(&steps, &first, 1, |_| 0);
        // Targets run side by side, so compare within each target.
        for t in ["r", "s"] {
            let order: Vec<usize> = (0..steps.len())
                .filter(|i| steps[*i].resource.target == t)
                .collect();
            let mut by_start = order.clone();
            by_start.sort_by_key(|i| started[*i]);
            assert_eq!(by_start, order, "target {t}");
        }
    }

    #[test]
    fn no_change_starts_before_what_it_depends_on_in_any_finishing_order() {
        let (cs, first) = mix();
        let steps: Vec<&Change> = cs.iter().collect();
        let deps = dependencies(&steps, &first);
        // A small deterministic generator: many finishing orders, always the same ones.
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for width in [1, 2, 3, 8, 64] {
            for _ in 0..200 {
                let (started, finished) = run(&steps, &first, width, |n| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed % n as u64) as usize
                });
                for (i, before) in &deps {
                    for b in before {
                        assert!(
                            finished[*b] < started[*i],
                            "{i} started before {b} finished"
                        );
                    }
                }
                let at = |name, kind, channel: &str, target: &str| {
                    pos(&steps, target, name, kind, channel)
                };
                let (s, f) = (&started, &finished);
                // Policies of new queues before any queue of the target.
                for q in [
                    at("a.dlq", Kind::Queue, "a", "r"),
                    at("b", Kind::Queue, "b", "r"),
                    at("a", Kind::Queue, "a", "r"),
                ] {
                    assert!(f[at("a.dlq", Kind::Policy, "a", "r")] < s[q]);
                    assert!(f[at("b.dlq", Kind::Policy, "b", "r")] < s[q]);
                }
                // A DLQ before what dead-letters into it; an exchange before its binding.
                assert!(f[at("a.dlq", Kind::Queue, "a", "r")] < s[at("a", Kind::Queue, "a", "r")]);
                assert!(f[at("x-dlq", Kind::Queue, "x", "s")] < s[at("x", Kind::Queue, "x", "s")]);
                assert!(
                    f[at("in", Kind::Exchange, "b", "r")] < s[at("in->b", Kind::Binding, "b", "r")]
                );
                // The shared exchange is never written twice at once.
                let (e1, e2) = (
                    at("in", Kind::Exchange, "a", "r"),
                    at("in", Kind::Exchange, "b", "r"),
                );
                assert!(f[e1] < s[e2] || f[e2] < s[e1]);
                // Deletes last, in reverse: the main queue before its DLQ.
                for i in 0..steps.len() {
                    if steps[i].resource.target == "r" && steps[i].action != Action::Delete {
                        assert!(f[i] < s[at("old", Kind::Queue, "old", "r")]);
                    }
                }
                assert!(
                    f[at("old", Kind::Queue, "old", "r")]
                        < s[at("old.dlq", Kind::Queue, "old", "r")]
                );
            }
        }
    }

    #[test]
    fn a_binding_never_overlaps_a_change_to_its_source_exchange_in_another_channel() {
        let bind = |channel: &str, name: &str| {
            let mut c = change(
                "r",
                channel,
                Kind::Binding,
                name,
                Role::Binding,
                Action::Create,
            );
            c.desired = [("source".to_owned(), json!("ex"))].into_iter().collect();
            c
        };
        let replace = |channel: &str| {
            change(
                "r",
                channel,
                Kind::Exchange,
                "ex",
                Role::Exchange,
                Action::Replace,
            )
        };
        // The exchange's channel first, and the binding's channel first.
        for (cs, exchange, binding) in [
            (vec![replace("a"), bind("b", "ex->b")], 0, 1),
            (vec![bind("a", "ex->a"), replace("b")], 1, 0),
        ] {
            let steps: Vec<&Change> = cs.iter().collect();
            let deps = dependencies(&steps, &HashSet::new());
            let (later, earlier) = (exchange.max(binding), exchange.min(binding));
            assert_eq!(deps.get(&later), Some(&vec![earlier]), "{deps:?}");
        }
        // Bindings of unrelated exchanges stay independent.
        let mut other = bind("b", "other->b");
        other.desired = [("source".to_owned(), json!("other"))]
            .into_iter()
            .collect();
        let cs = [replace("a"), other];
        let steps: Vec<&Change> = cs.iter().collect();
        assert!(dependencies(&steps, &HashSet::new()).is_empty());
    }

    #[test]
    fn independent_channels_and_targets_overlap() {
        let (cs, first) = mix();
        let steps: Vec<&Change> = cs.iter().collect();
        let mut s = Schedule::new(&steps, &first);
        let r = s.targets().iter().position(|t| t == "r").expect("target r");
        let t = s.targets().iter().position(|t| t == "s").expect("target s");
        // Both policies at once, and both SQS channels' first changes at once.
        let (p1, p2) = (s.next(r), s.next(r));
        assert!(p1.is_some() && p2.is_some());
        assert!(!s.has_ready(r), "no queue before the policies are done");
        let (x, y) = (s.next(t), s.next(t));
        assert!(x.is_some() && y.is_some(), "x-dlq and y-dlq side by side");
        assert!(s.next(t).is_none(), "x's main queue waits for x-dlq");
        s.finish(p1.unwrap_or_default());
        assert!(!s.has_ready(r), "one policy still running");
        s.finish(p2.unwrap_or_default());
        let a = s.next(r);
        let b = s.next(r);
        assert!(
            a.is_some() && b.is_some(),
            "both channels' DLQs once the policies are done"
        );
    }

    #[test]
    fn an_empty_phase_is_skipped_and_a_busy_one_holds_the_deletes_back() {
        use Action::*;
        let policy = change("r", "a", Kind::Policy, "a", Role::MainPolicy, Create);
        let queue = change("r", "b", Kind::Queue, "b", Role::Main, Create);
        let gone = change("r", "old", Kind::Queue, "old", Role::Main, Delete);
        let first: HashSet<ResourceId> = [policy.resource.clone()].into();
        // Only the first and the last phase: once the policy is done, the delete may start.
        let mut s = Schedule::new(&[&policy, &gone], &first);
        assert!(s.has_ready(0));
        assert_eq!(s.next(0), Some(0));
        assert!(!s.has_ready(0), "the delete waits for the policy's phase");
        s.finish(0);
        assert!(s.has_ready(0), "no create or update in between to wait for");
        assert_eq!(s.next(0), Some(1));
        // A create in between: the delete waits for it too.
        let mut s = Schedule::new(&[&policy, &queue, &gone], &first);
        assert_eq!(s.next(0), Some(0));
        assert_eq!(s.next(0), None, "the create waits for the policy's phase");
        s.finish(0);
        assert_eq!(s.next(0), Some(1));
        assert_eq!(s.next(0), None, "the delete waits for the create");
        s.finish(1);
        assert_eq!(s.next(0), Some(2));
    }

    #[test]
    fn a_channel_is_a_chain_within_its_phase_and_nothing_else_depends() {
        use Action::*;
        let dlq = change("r", "a", Kind::Queue, "a.dlq", Role::DeadLetter, Create);
        let main = change("r", "a", Kind::Queue, "a", Role::Main, Create);
        let other = change("r", "b", Kind::Queue, "b", Role::Main, Create);
        let deps = dependencies(&[&dlq, &main, &other], &HashSet::new());
        assert_eq!(deps, BTreeMap::from([(1, vec![0])]));
    }
}
