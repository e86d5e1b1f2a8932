//! The Pub/Sub review of a plan's changes, which needs no reads of its own: ownership comes
//! from the labels every GET returned. It also says which IAM grants dead lettering needs
//! (the emulator has no IAM; on Google Cloud nothing is ever dead-lettered without them).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::plan::*;
use super::read::Reader;
use super::*;
use crate::plan::{Action, Change, FieldChange, Note};
use crate::resource::{Desired, Role};

impl Reader {
    fn mine(&self, id: &ResourceId) -> bool {
        id.target == self.target && id.backend == Backend::Pubsub
    }

    /// One note per subscription whose dead-letter policy this plan writes: the grants it
    /// needs, and whether apply makes them (`grantServiceAgent`).
    fn iam_notes(&self, changes: &[Change], notes: &mut Vec<Note>) {
        for c in changes {
            let writes_policy = c.role == Role::Subscription
                && self.mine(&c.resource)
                && (matches!(c.action, Action::Create | Action::Replace)
                    || c.fields.iter().any(|f| f.key == DEAD_LETTER_TOPIC));
            let Some(dead_letter) = c.desired.get(DEAD_LETTER_TOPIC).and_then(Value::as_str) else {
                continue;
            };
            if !writes_policy {
                continue;
            }
            let commands = iam_commands(
                &self.project,
                self.grant.as_deref(),
                dead_letter,
                &c.resource.name,
            );
            let how = match (&self.grant, self.emulator) {
                (Some(_), true) => "apply would grant them (`grantServiceAgent: true`), but the emulator has no IAM, so it skips them".to_owned(),
                (Some(_), false) => "apply grants them (`grantServiceAgent: true`)".to_owned(),
                (None, true) => format!("the emulator has no IAM and needs none; on Google Cloud run: {commands}"),
                (None, false) => format!("dlqctl does not grant them (set `grantServiceAgent: true` and `projectNumber` to let apply do it); run: {commands}"),
            };
            notes.push(Note {
                resource: c.resource.clone(),
                message: format!(
                    "dead lettering needs the Pub/Sub service agent to publish to topic {dead_letter} (roles/pubsub.publisher) and to subscribe to {} (roles/pubsub.subscriber), or nothing is ever dead-lettered; {how}",
                    c.resource.name
                ),
            });
        }
    }
}

impl crate::backend::kit::doors::Review for Reader {
    /// Checks the plan's Pub/Sub changes against the ownership labels (of the channels the
    /// plan would change; with `adopt`, of every existing object, and an unclaimed one gets
    /// an update adding the labels), and notes the IAM grants for each subscription whose
    /// dead-letter policy this plan writes. No reads: the labels came with the plan's GETs.
    async fn review(
        &self,
        desired: &[Desired],
        live: &BTreeMap<ResourceId, Live>,
        changes: &mut Vec<Change>,
        notes: &mut Vec<Note>,
        adopt: bool,
    ) -> Result<(), crate::backend::wire::http::HttpError> {
        self.iam_notes(changes, notes);
        let touched: BTreeSet<String> = changes
            .iter()
            .filter(|c| self.mine(&c.resource))
            .map(|c| c.channel.clone())
            .collect();
        for d in desired {
            if !self.mine(&d.id) || !(adopt || touched.contains(&d.channel)) {
                continue;
            }
            let Some(l) = live.get(&d.id) else { continue };
            let labels = labels(l);
            let Some(problem) = ownership_problem(&labels, &d.channel) else {
                continue;
            };
            let pos = changes.iter().position(|c| c.resource == d.id);
            // Nothing to write to it: an object that is not dlqctl's is refused only where the
            // plan would change it (or `--adopt` would label it), never where nothing changes.
            if pos.is_none() && !adopt {
                continue;
            }
            let in_place = pos.is_none_or(|p| changes[p].action == Action::Update);
            if adopt && crate::backend::kit::ownership::adoptable(&labels) && in_place {
                let fields = vec![
                    FieldChange {
                        key: format!("{LABEL_FIELD_PREFIX}{LABEL_MANAGED_BY}"),
                        old: None,
                        new: Some(json!(LABEL_MANAGED_BY_VALUE)),
                    },
                    FieldChange {
                        key: format!("{LABEL_FIELD_PREFIX}{LABEL_CHANNEL}"),
                        old: labels.get(LABEL_CHANNEL).map(|c| json!(c)),
                        new: Some(json!(d.channel)),
                    },
                ];
                match pos {
                    Some(p) => {
                        changes[p].fields.splice(0..0, fields);
                    }
                    None => changes.push(Change::of(d, Action::Update, fields, l.messages)),
                }
                continue;
            }
            let fields = pos.map(|p| changes[p].fields.clone()).unwrap_or_default();
            // `--adopt` only labels an object in place: one the spec would replace (a
            // subscription on another topic) cannot be adopted, so the hint must not offer it.
            let problem = if crate::backend::kit::ownership::adoptable(&labels) && !in_place {
                not_adoptable(pos.map(|p| &changes[p]))
            } else {
                problem
            };
            let change = Change {
                reason: Some(format!("{} {} {problem}", d.id.kind.as_str(), d.id.name)),
                ..Change::of(d, Action::Impossible, fields, l.messages)
            };
            match pos {
                Some(p) => changes[p] = change,
                None => changes.push(change),
            }
        }
        Ok(())
    }
}
