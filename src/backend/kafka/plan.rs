//! Kafka plan rules on top of the generic diff (pure): what cannot be changed in place, what
//! drops records by itself, and the admin requests an update takes.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::ffi::ConfigOp;
use super::*;
use crate::plan::{Action, Change, Note};
use crate::resource::{Desired, Live, TimeUnit};
use crate::spec::duration;

/// Kafka has no observations beyond the diff (pure door, for the same shape as the others).
pub fn notes(_desired: &[Desired], _live: &BTreeMap<ResourceId, Live>) -> Vec<Note> {
    Vec::new()
}

/// No Kafka change needs to run before the per-channel order (pure door).
pub fn goes_first(_changes: &[Change]) -> HashSet<ResourceId> {
    HashSet::new()
}

/// Kafka's duration configs are milliseconds, and all of them end in `.ms` (`retention.ms`,
/// `segment.ms`, …) (pure door).
pub fn duration_unit(_change: &Change, key: &str) -> Option<TimeUnit> {
    (key.starts_with("config.") && key.ends_with(".ms")).then_some(TimeUnit::Millis)
}

/// Kafka's rules for a planned update: fewer partitions and another replication factor cannot
/// be made in place; lower retention, and compaction, drop records by themselves.
pub fn refine(change: &mut Change) {
    if change.action != Action::Update {
        return;
    }
    let mut impossible = Vec::new();
    let mut destructive = Vec::new();
    for f in &change.fields {
        let old = f.old.as_ref().and_then(Value::as_i64);
        let new = f.new.as_ref().and_then(Value::as_i64);
        match f.key.as_str() {
            "partitions" => {
                if let (Some(old), Some(new)) = (old, new)
                    && new < old
                {
                    impossible.push(format!(
                        "Kafka cannot remove partitions ({old} → {new}); keep {old} in the spec, or create a new topic and move producers and consumers to it"
                    ));
                }
            }
            "replication.factor" => impossible.push(format!(
                "changing the replication factor ({} → {}) needs a partition reassignment (kafka-reassign-partitions.sh, or the AlterPartitionReassignments API), which this version of dlqctl does not do; reassign by hand, then plan again",
                show(f.old.as_ref()),
                show(f.new.as_ref())
            )),
            "config.retention.ms" | "config.retention.bytes" => {
                let shorter = match (old, new) {
                    (Some(o), Some(n)) => n >= 0 && (o < 0 || n < o),
                    _ => false,
                };
                // No topic-level value read (tansu lists only explicit keys; a broker may hide
                // its default): the retention in force is unknown, so a new limit may be
                // shorter. Only a topic known to be empty is spared the guard.
                let unknown = f.old.is_none() && new.is_some_and(|n| n >= 0);
                if unknown && change.messages != Some(0) {
                    let key = f.key.trim_start_matches("config.");
                    destructive.push(format!(
                        "{key} has no value read on the topic (the broker's default applies, unknown here), so setting it to {} may delete records the topic holds now",
                        show(f.new.as_ref())
                    ));
                } else if shorter {
                    let what = if f.key.ends_with(".ms") {
                        let d = |ms: i64| duration::Duration::from_millis(ms.unsigned_abs()).to_string();
                        let from = old.filter(|o| *o >= 0).map_or("unlimited".to_owned(), d);
                        format!("lowering retention.ms from {from} to {} deletes the records older than that", d(new.unwrap_or(0)))
                    } else {
                        "lowering retention.bytes deletes the oldest records beyond the new size".to_owned()
                    };
                    destructive.push(what);
                }
            }
            "config.cleanup.policy" => {
                let compacts = |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| s.contains("compact"));
                if compacts(f.new.as_ref()) && !compacts(f.old.as_ref()) {
                    destructive.push("compaction keeps only the latest record of each key".to_owned());
                }
            }
            _ => {}
        }
    }
    if !impossible.is_empty() {
        change.action = Action::Impossible;
        change.reason = Some(impossible.join("; "));
    } else if !destructive.is_empty() {
        change.destructive = Some(destructive.join("; "));
    }
}

pub(super) fn show(v: Option<&Value>) -> String {
    v.map_or("(absent)".to_owned(), Value::to_string)
}

/// One admin request an update needs, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Topic configs: SET for a value, DELETE for a key that must lose its topic-level value.
    AlterConfigs(Vec<ConfigOp>),
    /// Grow to this many partitions in total.
    CreatePartitions(usize),
}

/// What an update of a topic takes: config changes first (they can be undone), then new
/// partitions (they cannot). Refuses what [`refine`] makes impossible.
pub fn update_steps(change: &Change) -> Result<Vec<Step>, String> {
    let mut ops = Vec::new();
    let mut grow = None;
    for f in &change.fields {
        if let Some(key) = f.key.strip_prefix("config.") {
            ops.push(match &f.new {
                Some(v) => ConfigOp::Set {
                    key: key.to_owned(),
                    value: config_text(v),
                },
                None => ConfigOp::Delete {
                    key: key.to_owned(),
                },
            });
            continue;
        }
        match f.key.as_str() {
            "partitions" => {
                let old = f.old.as_ref().and_then(Value::as_u64).unwrap_or(0);
                let new = f.new.as_ref().and_then(Value::as_u64).unwrap_or(0);
                if new < old {
                    return Err(format!("cannot remove partitions ({old} → {new})"));
                }
                grow = Some(
                    usize::try_from(new).map_err(|_| format!("{new} partitions is too many"))?,
                );
            }
            other => return Err(format!("`{other}` cannot be changed in place")),
        }
    }
    let mut steps = Vec::new();
    if !ops.is_empty() {
        steps.push(Step::AlterConfigs(ops));
    }
    if let Some(n) = grow {
        steps.push(Step::CreatePartitions(n));
    }
    Ok(steps)
}
