//! The plan driver: desired resources, live reads per target (concurrently, read-only), the
//! generic diff, then each backend's rules through its doors.
//!
//! Also re-checks a saved plan's fingerprints before apply. This is the only place that
//! talks to backends during `plan`; it holds [`Reader`]s, which cannot write. It names no
//! backend: everything backend-specific comes back through `crate::backend`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures_util::future::try_join_all;

use crate::backend::wire::Stats;
use crate::backend::{self, BackendError, ConnectOptions, Prunable, Reader};
use crate::graph::ChannelGraph;
use crate::plan::markdown::Chart;
use crate::plan::{self, Action, Change, Fingerprint, Note, Plan};
use crate::resource::{Desired, Live, ResourceId, Role};
use crate::spec::model::Target;
use crate::spec::resolve::envelope;
use crate::spec::resolve::{DiscardResolved, Resolved};

/// What a plan covers beyond making the specs' resources match.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanOptions {
    /// Also delete owned live objects that no spec names (`--prune`).
    pub prune: bool,
    /// Take over existing objects the specs name that nothing claims yet, by adding the
    /// ownership tags where the backend records ownership (`--adopt`; SQS and CloudWatch).
    pub adopt: bool,
}

/// A plan and the readers that made it (apply turns them into writers).
pub struct Planned {
    pub plan: Plan,
    pub readers: BTreeMap<String, Reader>,
    pub stats: Arc<Stats>,
    /// Per planned resource, its [`step_fingerprint`] as read: what apply re-checks
    /// immediately before writing it.
    pub baseline: BTreeMap<ResourceId, Option<String>>,
}

/// What apply's per-step re-check compares: the object's settings without the server's own
/// annotations (`@` keys, e.g. the effective RabbitMQ policy, which an earlier step of the
/// same apply may set). `None`: absent.
pub fn step_fingerprint(live: Option<&Live>) -> Option<String> {
    live.map(|l| {
        let props: crate::resource::Props = l
            .props
            .iter()
            .filter(|(k, _)| !k.starts_with('@'))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        crate::resource::fingerprint(&props)
    })
}

/// Connects a reader per target named by `names`.
pub fn connect(
    names: impl IntoIterator<Item = String>,
    targets: &BTreeMap<String, Target>,
    opts: ConnectOptions,
    stats: &Arc<Stats>,
) -> Result<BTreeMap<String, Reader>, BackendError> {
    let mut readers = BTreeMap::new();
    for name in names {
        let target = targets.get(&name).ok_or_else(|| BackendError::Config {
            target: name.clone(),
            message: "not defined in the targets file".into(),
        })?;
        readers.insert(
            name.clone(),
            Reader::connect(&name, target, opts, Arc::clone(stats))?,
        );
    }
    Ok(readers)
}

/// Reads each target's live state, concurrently across targets.
async fn read_all(
    readers: &BTreeMap<String, Reader>,
    ids: &[&ResourceId],
) -> Result<BTreeMap<ResourceId, Live>, BackendError> {
    let reads = readers.iter().map(|(name, r)| {
        let mine: Vec<&ResourceId> = ids.iter().copied().filter(|i| &i.target == name).collect();
        async move {
            if mine.is_empty() {
                Ok(BTreeMap::new())
            } else {
                r.read(&mine).await
            }
        }
    });
    let mut live = BTreeMap::new();
    for part in try_join_all(reads).await? {
        live.extend(part);
    }
    Ok(live)
}

pub async fn plan(
    channels: &[Resolved],
    targets: &BTreeMap<String, Target>,
    opts: ConnectOptions,
    scope: PlanOptions,
) -> Result<Planned, BackendError> {
    let stats = Arc::new(Stats::default());
    let desired: Vec<Desired> = channels.iter().flat_map(backend::desired).collect();
    let names: std::collections::BTreeSet<String> =
        channels.iter().map(|c| c.target.clone()).collect();
    let used: BTreeMap<String, Target> = targets
        .iter()
        .filter(|(k, _)| names.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let readers = connect(names, &used, opts, &stats)?;
    let ids: Vec<&ResourceId> = desired.iter().map(|d| &d.id).collect();
    let live = read_all(&readers, &ids).await?;

    let discards: BTreeMap<(&str, &str), &DiscardResolved> = channels
        .iter()
        .filter_map(|c| Some(((c.target.as_str(), c.channel.as_str()), c.discard.as_ref()?)))
        .collect();
    // The invalid-message queue's own decision (`invalid.discard`).
    let invalid_discards: BTreeMap<(&str, &str), &DiscardResolved> = channels
        .iter()
        .filter_map(|c| {
            let d = c.invalid.as_ref()?.discard.as_ref()?;
            Some(((c.target.as_str(), c.channel.as_str()), d))
        })
        .collect();
    let mut changes = Vec::new();
    let mut notes = Vec::new();
    for d in &desired {
        let l = live.get(&d.id);
        if let Some(mut c) = plan::diff(d, l) {
            backend::refine(&mut c);
            let key = (c.resource.target.as_str(), c.channel.as_str());
            let decision = match c.role {
                Role::DeadLetter | Role::DeadLetterPolicy => discards.get(&key),
                Role::Invalid | Role::InvalidPolicy => invalid_discards.get(&key),
                _ => None,
            };
            if let Some(discard) = decision
                && c.fields.iter().any(|f| backend::is_retention(&c, &f.key))
            {
                c.discard = Some((*discard).clone());
            }
            changes.push(c);
        }
        if let Some(l) = l
            && d.present
        {
            for u in plan::unmanaged(d, l) {
                notes.push(Note {
                    resource: d.id.clone(),
                    message: format!("unmanaged setting, left as is: {u}"),
                });
            }
        }
    }
    notes.extend(backend::notes(&desired, &live));
    for c in channels {
        let Some(why) = envelope::age_blind(c.backend, &c.envelope) else {
            continue;
        };
        if let Some(d) = desired
            .iter()
            .find(|d| d.channel == c.channel && d.role == Role::DeadLetter && d.present)
        {
            notes.push(Note {
                resource: d.id.clone(),
                message: why,
            });
        }
    }
    // Backend checks that need more reads (SQS ownership tags), only where the plan writes.
    for r in readers.values() {
        r.review(&desired, &live, &mut changes, &mut notes, scope.adopt)
            .await?;
    }
    let mut pruned_fingerprints = Vec::new();
    let mut baseline: BTreeMap<ResourceId, Option<String>> = desired
        .iter()
        .map(|d| (d.id.clone(), step_fingerprint(live.get(&d.id))))
        .collect();
    if scope.prune {
        for (name, r) in &readers {
            for p in prunable(name, r, &desired, &used).await? {
                pruned_fingerprints.push(Fingerprint {
                    resource: p.id.clone(),
                    hash: Some(p.live.fingerprint()),
                });
                baseline.insert(p.id.clone(), step_fingerprint(Some(&p.live)));
                changes.push(Change {
                    resource: p.id,
                    channel: p.channel,
                    role: p.role,
                    action: Action::Delete,
                    fields: Vec::new(),
                    desired: p.identity,
                    messages: p.live.messages,
                    reason: None,
                    destructive: None,
                    pruned: true,
                    discard: None,
                });
            }
        }
    }
    let changed: std::collections::BTreeSet<&ResourceId> =
        changes.iter().map(|c| &c.resource).collect();
    let unchanged = desired
        .iter()
        .filter(|d| d.present && !changed.contains(&d.id))
        .count();
    // What a replace or delete would drop: read the counts of just those queues.
    for c in changes
        .iter_mut()
        .filter(|c| c.drops_object() && c.resource.kind.holds_messages())
    {
        if let Some(r) = readers.get(&c.resource.target) {
            c.messages = r.message_count(&c.resource).await?;
        }
    }
    let mut fingerprints: Vec<Fingerprint> = desired
        .iter()
        .map(|d| Fingerprint {
            resource: d.id.clone(),
            hash: live.get(&d.id).map(Live::fingerprint),
        })
        .collect();
    fingerprints.extend(pruned_fingerprints);
    Ok(Planned {
        plan: {
            let first = backend::goes_first(&changes);
            Plan::new(changes, notes, unchanged, used, fingerprints, &first)
        },
        readers,
        stats,
        baseline,
    })
}

/// Each target's server identity (what a saved plan is bound to).
pub async fn identities(
    readers: &BTreeMap<String, Reader>,
) -> Result<BTreeMap<String, String>, BackendError> {
    let mut out = BTreeMap::new();
    for (name, r) in readers {
        out.insert(name.clone(), r.identity().await?);
    }
    Ok(out)
}

/// How a live object moved between two fingerprints (`None`: it did not): what a stale saved
/// plan and apply's per-step re-check both report.
pub fn how_changed(then: &Option<String>, now: &Option<String>) -> Option<&'static str> {
    match (then, now) {
        (a, b) if a == b => None,
        (None, Some(_)) => Some("was created"),
        (Some(_), None) => Some("was deleted"),
        _ => Some("was modified"),
    }
}

/// The resources whose live state differs between a saved plan and a fresh one (made from
/// the same specs, just now), with how; a resource the fresh plan read that the saved plan
/// has no fingerprint for counts as changed.
pub fn stale_against(saved: &Plan, fresh: &Plan) -> Vec<String> {
    let then: BTreeMap<&ResourceId, &Option<String>> = saved
        .fingerprints
        .iter()
        .map(|f| (&f.resource, &f.hash))
        .collect();
    let mut out = Vec::new();
    for f in &fresh.fingerprints {
        let what = format!("{} on target `{}`", f.resource, f.resource.target);
        match then.get(&f.resource) {
            None => out.push(format!(
                "{what} has no fingerprint in the saved plan (the file was edited, or made by another dlqctl)"
            )),
            Some(h) => {
                if let Some(how) = how_changed(h, &f.hash) {
                    out.push(format!("{what} {how}"));
                }
            }
        }
    }
    out
}

/// Every way the saved plan's changes differ from a fresh plan's (same resources, actions,
/// fields, desired values): empty when the saved plan is exactly what the specs make now.
/// Message counts are not compared: the fresh plan's are the ones the guards check.
pub fn differences(saved: &Plan, fresh: &Plan) -> Vec<String> {
    let key = |c: &Change| (c.resource.clone(), c.action);
    let now: BTreeMap<_, &Change> = fresh.changes.iter().map(|c| (key(c), c)).collect();
    let then: BTreeMap<_, &Change> = saved.changes.iter().map(|c| (key(c), c)).collect();
    let name = |c: &Change| {
        format!(
            "{} {} on target `{}`",
            c.action.as_str(),
            c.resource,
            c.resource.target
        )
    };
    let mut out = Vec::new();
    if saved.changes.len() != then.len() {
        out.push("the saved plan lists a change twice".to_owned());
    }
    for (k, s) in &then {
        let Some(f) = now.get(k) else {
            out.push(format!(
                "{}: in the saved plan, but a fresh plan from its specs does not make it",
                name(s)
            ));
            continue;
        };
        let mut parts = Vec::new();
        if s.fields != f.fields {
            parts.push("fields");
        }
        if s.desired != f.desired {
            parts.push("desired values");
        }
        if s.channel != f.channel || s.role != f.role {
            parts.push("channel or role");
        }
        if s.reason != f.reason || s.destructive != f.destructive || s.pruned != f.pruned {
            parts.push("guard notes");
        }
        if s.discard != f.discard {
            parts.push("discard decision");
        }
        if !parts.is_empty() {
            out.push(format!(
                "{}: its {} differ from a fresh plan's",
                name(s),
                parts.join(", ")
            ));
        }
    }
    for (k, f) in &now {
        if !then.contains_key(k) {
            out.push(format!(
                "{}: a fresh plan from the same specs makes it, the saved plan does not",
                name(f)
            ));
        }
    }
    out
}

/// What `--prune` deletes on one target: owned live objects that none of the specs name.
/// The specs given are taken as the whole truth for each target they use; a target no spec
/// uses is not looked at.
async fn prunable(
    target: &str,
    reader: &Reader,
    desired: &[Desired],
    targets: &BTreeMap<String, Target>,
) -> Result<Vec<Prunable>, BackendError> {
    let skip: BTreeSet<ResourceId> = desired
        .iter()
        .filter(|d| d.id.target == target)
        .map(|d| d.id.clone())
        .collect();
    let Some(t) = targets.get(target) else {
        return Ok(Vec::new());
    };
    reader.prunable(&skip, t).await
}

/// The pictures of the plan's pull-request comment: each channel the plan changes, drawn as
/// `dlqctl graph` draws it with the nodes coloured by what the plan does to them. The comment
/// (`plan/markdown.rs`) places them and draws nothing itself.
pub fn charts(graphs: &[ChannelGraph], plan: &Plan) -> Vec<Chart> {
    graphs
        .iter()
        .filter(|g| {
            plan.changes
                .iter()
                .any(|ch| ch.channel == g.channel && ch.resource.target == g.target)
        })
        .map(|g| {
            let mut g = g.clone();
            g.mark(plan);
            Chart {
                mermaid: crate::graph::mermaid::flowchart(std::slice::from_ref(&g)),
                target: g.target,
                channel: g.channel,
            }
        })
        .collect()
}
