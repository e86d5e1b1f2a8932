//! Pub/Sub plan rules on top of the generic diff: [`refine`] (pure: the subscription's topic
//! cannot change in place; a lower retention drops messages), the durations' unit, and what
//! the review says of IAM. Pure; the review itself lives in `review.rs`.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::*;
use crate::plan::{Action, Change, Note};
use crate::resource::{Desired, TimeUnit};

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

impl crate::backend::kit::doors::Plan for super::Pubsub {
    fn desired(r: &crate::spec::resolve::Resolved) -> Vec<crate::resource::Desired> {
        super::desired::desired(r)
    }

    fn refine(change: &mut Change) {
        refine(change);
    }

    fn duration_unit(change: &Change, key: &str) -> Option<crate::resource::TimeUnit> {
        duration_unit(change, key)
    }

    /// Pub/Sub: a subscription's messageRetentionDuration.
    fn is_retention(key: &str) -> bool {
        key == super::RETENTION
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
