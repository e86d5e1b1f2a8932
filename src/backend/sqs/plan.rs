//! SQS plan rules on top of the generic diff: [`refine`] (pure) and the review of a plan's
//! changes against what only further reads can tell (ownership tags, a RedriveAllowPolicy the
//! endpoint cannot return). The review reads; it never writes.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde_json::Value;

use super::*;
use crate::backend::wire::aws::AwsError;
use crate::plan::{Action, Note};
use crate::resource::{Desired, Live, Role, TimeUnit};
use crate::spec::access;

/// Observations (pure door): a dead-letter queue encrypted more weakly than its source, as
/// both are live, where the spec does not own the dead-letter queue's encryption (where it
/// does, the plan changes it and lint judges the spec).
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
    for dlq in desired.iter().filter(|d| {
        d.id.backend == Backend::Sqs && d.id.kind == Kind::Queue && d.role == Role::DeadLetter
    }) {
        if dlq.props.contains_key(MANAGED_SSE) {
            continue;
        }
        let Some(main) = queue(Role::Main, &dlq.channel) else {
            continue;
        };
        let (Some(dl), Some(ml)) = (live.get(&dlq.id), live.get(&main.id)) else {
            continue;
        };
        let (Some(de), Some(me)) = (encryption(dl), encryption(ml)) else {
            continue;
        };
        if de.level() < me.level() {
            out.push(Note {
                resource: dlq.id.clone(),
                message: format!(
                    "dead-letter queue encrypted less strongly than its source {} ({} here, {} there): it holds the same messages; `sqs.encryption` in the spec gives both the same",
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

impl Reader {
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
        self.drop_unreadable_allow_policies(live, changes, notes)
            .await?;
        let verdicts = self
            .ownership_problems(desired, live, changes, adopt)
            .await?;
        for (d, tags, problem) in verdicts {
            let verdict = Verdict {
                desired: d,
                tags: &tags,
                problem: &problem,
                live,
                adopt,
            };
            verdict.apply(changes, notes);
        }
        Ok(())
    }

    /// Whether the resource is one of this target's SQS objects.
    fn mine(&self, id: &ResourceId) -> bool {
        id.target == self.target && id.backend == Backend::Sqs
    }

    /// A RedriveAllowPolicy that reads back absent: absent, or unreadable here? Unreadable:
    /// its fields leave the change (and a change left empty goes), with a note.
    async fn drop_unreadable_allow_policies(
        &self,
        live: &BTreeMap<ResourceId, Live>,
        changes: &mut Vec<Change>,
        notes: &mut Vec<Note>,
    ) -> Result<(), AwsError> {
        let mut i = 0;
        while i < changes.len() {
            let c = &changes[i];
            let allow_missing = self.mine(&c.resource)
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
        Ok(())
    }

    /// The ownership problems of every existing object in a channel the plan would change
    /// (with `adopt`: of every existing object, since adopting is itself a change), by id;
    /// an object gone since it was read is left out (the plan's create/delete logic stands).
    async fn ownership_problems<'d>(
        &self,
        desired: &'d [Desired],
        live: &BTreeMap<ResourceId, Live>,
        changes: &[Change],
        adopt: bool,
    ) -> Result<Vec<(&'d Desired, BTreeMap<String, String>, String)>, AwsError> {
        let touched: BTreeSet<&str> = changes
            .iter()
            .filter(|c| self.mine(&c.resource))
            .map(|c| c.channel.as_str())
            .collect();
        let to_check: Vec<&Desired> = desired
            .iter()
            .filter(|d| {
                self.mine(&d.id)
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
            .filter_map(|(d, tags)| {
                let tags = tags?;
                let problem = ownership_problem(&tags, &d.channel)?;
                Some((d, tags, problem))
            })
            .collect();
        verdicts.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        Ok(verdicts)
    }
}

/// An existing object whose tags do not say it is this channel's, and what the plan needs.
struct Verdict<'a> {
    desired: &'a Desired,
    tags: &'a BTreeMap<String, String>,
    problem: &'a str,
    live: &'a BTreeMap<ResourceId, Live>,
    adopt: bool,
}

impl Verdict<'_> {
    /// What the ownership problem does to the plan: with `adopt`, an unclaimed object changed
    /// in place gets the ownership tags; one not wanted is left alone (noted); any other
    /// change to it becomes impossible.
    fn apply(&self, changes: &mut Vec<Change>, notes: &mut Vec<Note>) {
        let d = self.desired;
        let pos = changes.iter().position(|c| c.resource == d.id);
        let in_place = pos.is_none_or(|p| changes[p].action == Action::Update);
        if self.adopt && d.present && adoptable(self.tags) && in_place {
            // Adoption: add the ownership tags; settings that already match stay as they are.
            let fields = adoption_fields(self.tags, &d.channel);
            match pos {
                Some(p) => {
                    let c = &mut changes[p];
                    c.fields.splice(0..0, fields);
                }
                None => changes.push(Change::of(
                    d,
                    Action::Update,
                    fields,
                    self.live.get(&d.id).and_then(|l| l.messages),
                )),
            }
            return;
        }
        if !d.present {
            // Not dlqctl's and not wanted: nothing to do with it.
            if let Some(p) = pos {
                changes.remove(p);
            }
            notes.push(Note {
                resource: d.id.clone(),
                message: format!("{} {}; left alone", d.id.kind.as_str(), self.problem),
            });
            return;
        }
        let fields = pos.map(|p| changes[p].fields.clone()).unwrap_or_default();
        let messages = self.live.get(&d.id).and_then(|l| l.messages);
        let change = Change {
            reason: Some(format!(
                "{} {} {}",
                d.id.kind.as_str(),
                d.id.name,
                self.problem
            )),
            ..Change::of(d, Action::Impossible, fields, messages)
        };
        match pos {
            Some(p) => changes[p] = change,
            None => changes.push(change),
        }
    }
}
