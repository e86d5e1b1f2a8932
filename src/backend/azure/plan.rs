//! Azure Service Bus plan rules on top of the generic diff (pure): durations are seconds, and
//! a lower (or newly set) time-to-live is marked destructive. A message's effective TTL is the
//! lower of its own and the entity's defaultMessageTimeToLive ("Message expiration" on
//! Microsoft Learn); whether Service Bus re-applies a lowered entity TTL to messages already
//! waiting is not stated there, so dlqctl assumes the worst: the backlog may expire at once,
//! dead-lettered (with deadLetteringOnMessageExpiration) or dropped.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::*;
use crate::plan::{Action, Change, Note};
use crate::resource::{Desired, Live, TimeUnit};

/// Lock and time-to-live are kept in seconds.
pub fn duration_unit(c: &Change, key: &str) -> Option<TimeUnit> {
    match (c.resource.kind, key) {
        (Kind::Queue | Kind::Subscription, LOCK_DURATION | TIME_TO_LIVE) => Some(TimeUnit::Seconds),
        _ => None,
    }
}

/// A lower (or newly set) time-to-live expires older messages at once.
pub fn refine(c: &mut Change) {
    if c.action != Action::Update {
        return;
    }
    let secs = |v: &Option<Value>| v.as_ref().and_then(Value::as_f64);
    if let Some(f) = c.fields.iter().find(|f| f.key == TIME_TO_LIVE)
        && let Some(new) = secs(&f.new)
        && secs(&f.old).is_none_or(|old| new < old)
    {
        c.destructive = Some(format!(
            "setting {TIME_TO_LIVE} to {new} s expires every waiting message older than {new} s at once"
        ));
    }
}

impl crate::backend::kit::doors::Plan for super::Azure {
    fn desired(r: &crate::spec::resolve::Resolved) -> Vec<Desired> {
        super::desired::desired(r)
    }

    fn refine(change: &mut Change) {
        refine(change);
    }

    fn duration_unit(change: &Change, key: &str) -> Option<TimeUnit> {
        duration_unit(change, key)
    }

    /// Azure Service Bus: an entity's defaultMessageTimeToLive.
    fn is_retention(key: &str) -> bool {
        key == TIME_TO_LIVE
    }

    /// Where the dead letters wait when nothing is forwarded: the built-in subqueue, which no
    /// resource stands for, so the plan says it.
    fn notes(desired: &[Desired], _live: &BTreeMap<ResourceId, Live>) -> Vec<Note> {
        desired
            .iter()
            .filter(|d| d.id.backend == crate::spec::model::Backend::AzureServicebus)
            // The entity that dead-letters (it has the retry budget), not a dead-letter queue.
            .filter(|d| d.props.get(MAX_DELIVERY_COUNT).is_some())
            .filter(|d| d.props.get(FORWARD_DEAD_LETTERS).is_some_and(Value::is_null))
            .map(|d| Note {
                resource: d.id.clone(),
                message: format!(
                    "dead letters of `{}` wait in its built-in `{}/$DeadLetterQueue` subqueue (no `deadLetter.name`: nothing to create)",
                    d.id.name, d.id.name
                ),
            })
            .collect()
    }

    fn goes_first(_changes: &[Change]) -> HashSet<ResourceId> {
        HashSet::new()
    }
}
