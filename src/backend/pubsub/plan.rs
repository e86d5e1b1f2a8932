//! Pub/Sub plan rules on top of the generic diff: [`refine`] (pure: the subscription's topic
//! cannot change in place; a lower retention drops messages), the durations' unit, and the
//! review, which needs no reads of its own: ownership comes from the labels every GET
//! returned. The review also says which IAM grants dead lettering needs (the emulator has no
//! IAM; on Google Cloud nothing is ever dead-lettered without them).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde_json::{Value, json};

use super::*;
use crate::plan::{Action, Change, FieldChange, Note};
use crate::resource::{Desired, Role, TimeUnit};

/// Nothing to observe from desired and live state alone (the review says the rest).
pub fn notes(_desired: &[Desired], _live: &BTreeMap<ResourceId, Live>) -> Vec<Note> {
    Vec::new()
}

/// The roles already order a channel (dead-letter topic, its subscription, main topic,
/// subscription): nothing goes before that.
pub fn goes_first(_changes: &[Change]) -> HashSet<ResourceId> {
    HashSet::new()
}

/// Subscriptions keep their durations in seconds (retention, backoffs, ack deadline, expiry).
pub fn duration_unit(c: &Change, key: &str) -> Option<TimeUnit> {
    match (c.resource.kind, key) {
        (Kind::Subscription, RETENTION | MIN_BACKOFF | MAX_BACKOFF | ACK_DEADLINE | EXPIRY) => {
            Some(TimeUnit::Seconds)
        }
        (Kind::Topic, "messageRetentionDuration") => Some(TimeUnit::Seconds),
        _ => None,
    }
}

/// Rules the generic diff cannot know (pure): a subscription's topic cannot change (Pub/Sub
/// refuses it in an update mask), so the subscription is replaced, and its backlog with it;
/// a lower retention deletes the older messages at once.
pub fn refine(c: &mut Change) {
    if c.resource.kind != Kind::Subscription || c.action != Action::Update {
        return;
    }
    if c.fields.iter().any(|f| f.key == TOPIC) {
        c.action = Action::Replace;
        return;
    }
    let secs = |v: &Option<Value>| v.as_ref().and_then(Value::as_f64);
    if let Some(f) = c.fields.iter().find(|f| f.key == RETENTION)
        && let (Some(old), Some(new)) = (secs(&f.old), secs(&f.new))
        && new < old
    {
        c.destructive = Some(format!(
            "lowering {RETENTION} from {old} s to {new} s deletes every message older than {new} s at once (Pub/Sub's REST API cannot count the backlog)"
        ));
    }
}

/// Why an unlabelled object that the spec would replace cannot be adopted (pure).
pub fn not_adoptable(change: Option<&Change>) -> String {
    let why = match change {
        Some(c) if c.fields.iter().any(|f| f.key == TOPIC) => {
            let topic = c
                .fields
                .iter()
                .find(|f| f.key == TOPIC)
                .and_then(|f| f.old.as_ref())
                .and_then(Value::as_str)
                .map_or_else(String::new, |t| format!(" (`{t}`)"));
            format!(
                "it is attached to another topic{topic}, and a subscription's topic cannot change in place"
            )
        }
        _ => "making it the spec's needs a replace".to_owned(),
    };
    format!(
        "exists but is not labelled `{LABEL_MANAGED_BY}: {LABEL_MANAGED_BY_VALUE}`, so dlqctl did not create it and will not change it; `--adopt` cannot adopt it either: {why}, and adopting only adds the labels; delete or rename it, or name another one in the spec"
    )
}

/// The Pub/Sub service agent of a project (`service-NUMBER@gcp-sa-pubsub...`); without the
/// number, the shell expression that finds it.
pub fn service_agent(project: &str, number: Option<&str>) -> String {
    let n = number.map_or_else(
        || format!("$(gcloud projects describe {project} --format='value(projectNumber)')"),
        str::to_owned,
    );
    format!("service-{n}@gcp-sa-pubsub.iam.gserviceaccount.com")
}

/// The two grants dead lettering needs, as `gcloud` commands.
pub fn iam_commands(project: &str, number: Option<&str>, dead_letter: &str, sub: &str) -> String {
    let member = format!("serviceAccount:{}", service_agent(project, number));
    format!(
        "gcloud pubsub topics add-iam-policy-binding {dead_letter} --project={project} --member={member} --role=roles/pubsub.publisher && gcloud pubsub subscriptions add-iam-policy-binding {sub} --project={project} --member={member} --role=roles/pubsub.subscriber"
    )
}

impl Reader {
    fn mine(&self, id: &ResourceId) -> bool {
        id.target == self.target && id.backend == Backend::Pubsub
    }

    /// Checks the plan's Pub/Sub changes against the ownership labels (of the channels the
    /// plan would change; with `adopt`, of every existing object, and an unclaimed one gets
    /// an update adding the labels), and notes the IAM grants for each subscription whose
    /// dead-letter policy this plan writes. No reads: the labels came with the plan's GETs.
    pub async fn review(
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
