//! The SQS review of a plan's changes against what only further reads can tell: ownership
//! tags (read for the channels the plan would change, and nowhere else) and a
//! RedriveAllowPolicy the endpoint cannot return. It reads; it never writes.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::stream::{self, StreamExt, TryStreamExt};

use super::read::Reader;
use super::*;
use crate::backend::wire::aws::AwsError;
use crate::plan::{Action, Change, Note};
use crate::resource::{Desired, Live};

impl Reader {
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
pub(super) struct Verdict<'a> {
    pub(super) desired: &'a Desired,
    pub(super) tags: &'a BTreeMap<String, String>,
    pub(super) problem: &'a str,
    pub(super) live: &'a BTreeMap<ResourceId, Live>,
    pub(super) adopt: bool,
}

impl Verdict<'_> {
    /// What the ownership problem does to the plan: with `adopt`, an unclaimed object changed
    /// in place gets the ownership tags; one not wanted is left alone (noted); any other
    /// change to it becomes impossible.
    pub(super) fn apply(&self, changes: &mut Vec<Change>, notes: &mut Vec<Note>) {
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

impl crate::backend::kit::doors::Review for Reader {
    /// Checks the plan's SQS changes against what only more reads can tell: ownership tags
    /// (read for the channels the plan would change, and nowhere else; with `adopt`, for every
    /// existing object, and an unclaimed one gets an update adding the tags) and a
    /// RedriveAllowPolicy the endpoint cannot return.
    async fn review(
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
}
