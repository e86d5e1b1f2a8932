//! The Defaults merge: a `Defaults` document's `spec` merged under each channel's before the
//! channel is validated, key by key, with what must not be inherited left out: a backend's
//! block reaches only channels of that backend ([`Backend::ALL`]), a channel's own answer to
//! "how long are dead letters kept" replaces the other one, and encryption and policy blocks
//! are replaced whole. Merged values keep the Defaults file's positions.

use std::collections::HashMap;

use serde_json::Value;

use super::workspace::RawDoc;
use crate::spec::locate::Locations;
use crate::spec::model::Backend;
use crate::spec::schema::DocKind;

/// Merges the Defaults document's `(json, positions)` under the channel `d`: the blocks of its
/// target's backend only (`backends`: target name → backend).
pub(super) fn defaults_into(
    d: &mut RawDoc,
    (dj, dl): &(Value, Locations),
    backends: &HashMap<String, String>,
) {
    if let (Some(Value::Object(dspec)), Some(obj)) = (dj.get("spec"), d.json.as_object_mut()) {
        let spec = obj
            .entry("spec")
            .or_insert_with(|| Value::Object(Default::default()));
        if spec.is_object() {
            // A defaults backend block applies only to channels of that backend.
            let target = spec
                .get("target")
                .or_else(|| dspec.get("target"))
                .and_then(Value::as_str);
            let backend = target.and_then(|t| backends.get(t)).map(String::as_str);
            let mut shared = dspec.clone();
            shared.retain(|k, _| !is_backend_block(k) || Some(k.as_str()) == backend);
            // So is the dead-letter queue's own block (`deadLetter.sqs`).
            if let Some(Value::Object(dl)) = shared.get_mut("deadLetter") {
                dl.retain(|k, _| !is_backend_block(k) || Some(k.as_str()) == backend);
            }
            drop_answered_retention(spec, &mut shared);
            drop_owner_fields(spec, &mut shared);
            drop_whole_values(spec, &mut shared);
            merge_under(spec, &Value::Object(shared));
            d.locs.fill_from(dl, "/spec", "/spec");
        }
    }
}

/// Whether `key` is a backend's own block (`sqs:`, ..., `pubsub:`): [`Backend::ALL`], so no
/// backend is left out of the Defaults filter.
fn is_backend_block(key: &str) -> bool {
    Backend::from_key(key).is_some()
}

/// Target name → backend, from the (not yet validated) Targets documents.
pub(super) fn target_backends(raw: &[RawDoc]) -> HashMap<String, String> {
    raw.iter()
        .filter(|d| d.kind == DocKind::Targets)
        .filter_map(|d| d.json.get("targets").and_then(Value::as_object))
        .flat_map(|m| m.iter())
        .filter_map(|(name, t)| Some((name.clone(), t.get("backend")?.as_str()?.to_owned())))
        .collect()
}

/// A channel whose `deadLetter.of` names the owner of its destination inherits none of the
/// destination's own fields from Defaults
/// ([`crate::spec::model::DEAD_LETTER_OWNER_FIELDS`]), nor its alarms and dead-letter exchange.
fn drop_owner_fields(spec: &Value, shared: &mut serde_json::Map<String, Value>) {
    if spec.pointer("/deadLetter/of").is_none() {
        return;
    }
    if let Some(Value::Object(from_defaults)) = shared.get_mut("deadLetter") {
        from_defaults
            .retain(|k, _| !crate::spec::model::DEAD_LETTER_OWNER_FIELDS.contains(&k.as_str()));
    }
    // The owner watches the destination and names its dead-letter exchange.
    shared.remove("alarms");
    if let Some(Value::Object(rabbitmq)) = shared.get_mut("rabbitmq") {
        rabbitmq.remove("deadLetterExchange");
    }
}

/// `deadLetter.retention` and `deadLetter.discard` answer one question (how long dead letters
/// are kept), as do `invalid.retention` and `invalid.discard`: a channel that gives one answer
/// does not inherit the other from Defaults.
fn drop_answered_retention(spec: &Value, shared: &mut serde_json::Map<String, Value>) {
    for block in ["deadLetter", "invalid"] {
        let Some(own) = spec.get(block).and_then(Value::as_object) else {
            continue;
        };
        let Some(Value::Object(from_defaults)) = shared.get_mut(block) else {
            continue;
        };
        for (answer, other) in [("discard", "retention"), ("retention", "discard")] {
            if own.contains_key(answer) {
                from_defaults.remove(other);
            }
        }
    }
}

/// Values that are replaced whole, never merged key by key: an encryption block (a KMS key
/// from Defaults and a channel's `managed: true` would make both) and a policy document.
const WHOLE_VALUES: [&str; 4] = [
    "/sqs/encryption",
    "/sqs/policy",
    "/deadLetter/sqs/encryption",
    "/deadLetter/sqs/policy",
];

fn drop_whole_values(spec: &Value, shared: &mut serde_json::Map<String, Value>) {
    for pointer in WHOLE_VALUES {
        if spec.pointer(pointer).is_none() {
            continue;
        }
        let Some((parent, key)) = pointer.rsplit_once('/') else {
            continue;
        };
        let mut from_defaults = Value::Object(std::mem::take(shared));
        if let Some(Value::Object(m)) = from_defaults.pointer_mut(parent) {
            m.remove(key);
        }
        if let Value::Object(m) = from_defaults {
            *shared = m;
        }
    }
}

/// Deep-merges `base` under `top`: `top`'s values win, mappings merge key by key.
fn merge_under(top: &mut Value, base: &Value) {
    if let (Value::Object(t), Value::Object(b)) = (top, base) {
        for (k, bv) in b {
            match t.get_mut(k) {
                Some(tv) => merge_under(tv, bv),
                None => {
                    t.insert(k.clone(), bv.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::load_str;
    use super::super::tests::{CHANNEL, TARGETS, found};
    use super::*;

    #[test]
    fn a_second_defaults_document_is_refused_and_the_first_one_used() {
        let defaults =
            |r: &str| format!("apiVersion: dlqctl/v1\nkind: Defaults\nspec: {{retention: {r}}}\n");
        let ws = load_str(
            "d.yaml",
            &format!(
                "{}---\n{}---\n{}---\n{CHANNEL}",
                defaults("4d"),
                defaults("5d"),
                defaults("6d")
            ),
        );
        assert_eq!(
            found(&ws),
            [
                "spec/defaults-duplicate | more than one Defaults document; dlqctl reads one per run | merge them into one document | 4:1",
                "spec/defaults-duplicate | more than one Defaults document; dlqctl reads one per run | merge them into one document | 8:1"
            ]
        );
        assert_eq!(
            ws.diagnostics[0]
                .related
                .iter()
                .map(|(l, n)| (l.span.line, n.as_str()))
                .collect::<Vec<_>>(),
            [(1, "the first Defaults document")]
        );
        assert_eq!(
            ws.channels[0].value.spec.retention.map(|d| d.to_string()),
            Some("4d".to_owned())
        );
        assert!(ws.defaults.is_some());
    }

    fn merged_spec(defaults: &str, spec: &str) -> Value {
        let text = format!(
            "{TARGETS}  rmq: {{backend: rabbitmq, url: 'http://r'}}\n  ps: {{backend: pubsub, project: my-project}}\n---\napiVersion: dlqctl/v1\nkind: Defaults\nspec:\n{defaults}---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: c}}\nspec:\n{spec}"
        );
        let ws = load_str("m.yaml", &text);
        assert_eq!(found(&ws), Vec::<String>::new());
        serde_json::to_value(&ws.channels[0].value.spec).expect("serialises")
    }

    #[test]
    fn defaults_merge_under_a_channel_by_key_with_backend_blocks_for_that_backend_only() {
        let defaults = "  retention: 4d\n  retry: {maxAttempts: 5, name: r}\n  sqs: {fifo: false}\n  rabbitmq: {queueType: quorum}\n  pubsub: {ackDeadline: 30s}\n  deadLetter:\n    retention: 9d\n    sqs: {encryption: {managed: true}}\n";
        let sqs = merged_spec(defaults, "  target: sqs\n  retry: {maxAttempts: 3}\n");
        assert_eq!(sqs["retention"], "4d");
        assert_eq!(
            sqs["retry"],
            serde_json::json!({"maxAttempts": 3, "name": "r"})
        );
        assert_eq!(sqs["sqs"], serde_json::json!({"fifo": false}));
        assert_eq!(sqs.get("rabbitmq"), None);
        // Regression (issue 32): `pubsub` was missing from the hand-written list of blocks.
        assert_eq!(sqs.get("pubsub"), None);
        assert_eq!(
            sqs["deadLetter"]["sqs"],
            serde_json::json!({"encryption": {"managed": true}})
        );
        let rmq = merged_spec(defaults, "  target: rmq\n");
        assert_eq!(rmq.get("sqs"), None);
        assert_eq!(rmq["rabbitmq"], serde_json::json!({"queueType": "quorum"}));
        assert_eq!(rmq["deadLetter"], serde_json::json!({"retention": "9d"}));
        let ps = merged_spec(defaults, "  target: ps\n");
        assert_eq!(ps["pubsub"], serde_json::json!({"ackDeadline": "30s"}));
        assert_eq!((ps.get("sqs"), ps.get("rabbitmq")), (None, None));
        // The target may come from the defaults too.
        let from_defaults = merged_spec(&format!("  target: rmq\n{defaults}"), "  name: q\n");
        assert_eq!(
            from_defaults["rabbitmq"],
            serde_json::json!({"queueType": "quorum"})
        );
        assert_eq!(from_defaults.get("sqs"), None);
    }

    #[test]
    fn one_answer_to_how_long_dead_letters_stay_and_whole_values_are_not_merged() {
        let defaults = "  deadLetter:\n    retention: 9d\n    discard: {after: 1d}\n  invalid:\n    retention: 8d\n    discard: {after: 2d}\n  sqs:\n    encryption: {kms: alias/k}\n    policy: {Statement: [], Id: d}\n";
        let spec = merged_spec(
            defaults,
            "  target: sqs\n  deadLetter: {discard: {after: 3d}}\n  invalid: {retention: 7d}\n  sqs: {encryption: {managed: true}}\n",
        );
        assert_eq!(
            spec["deadLetter"],
            serde_json::json!({"discard": {"after": "3d"}})
        );
        assert_eq!(spec["invalid"], serde_json::json!({"retention": "7d"}));
        assert_eq!(
            spec["sqs"],
            serde_json::json!({"encryption": {"managed": true}, "policy": {"Statement": [], "Id": "d"}})
        );
        let spec = merged_spec(
            defaults,
            "  target: sqs\n  deadLetter: {retention: 5d}\n  invalid: {discard: {after: 1h}}\n  sqs: {policy: {Statement: [], Version: '2012-10-17'}}\n",
        );
        assert_eq!(spec["deadLetter"], serde_json::json!({"retention": "5d"}));
        assert_eq!(
            spec["invalid"],
            serde_json::json!({"discard": {"after": "1h"}})
        );
        assert_eq!(
            spec["sqs"],
            serde_json::json!({"encryption": {"kms": "alias/k"}, "policy": {"Statement": [], "Version": "2012-10-17"}})
        );
    }

    /// Issue 37: `deadLetter.redrive` merges key by key, like the rest of `deadLetter`; a
    /// channel's list replaces the one from Defaults, it does not add to it.
    #[test]
    fn redrive_header_lists_merge_by_key_and_a_channels_list_replaces_the_defaults() {
        let defaults =
            "  deadLetter:\n    redrive: {dropHeaders: [a-*], keepHeaders: [traceparent]}\n";
        let spec = merged_spec(
            defaults,
            "  target: sqs\n  deadLetter: {redrive: {dropHeaders: [b]}}\n",
        );
        assert_eq!(
            spec["deadLetter"]["redrive"],
            serde_json::json!({"dropHeaders": ["b"], "keepHeaders": ["traceparent"]})
        );
        let spec = merged_spec(defaults, "  target: sqs\n");
        assert_eq!(
            spec["deadLetter"]["redrive"],
            serde_json::json!({"dropHeaders": ["a-*"], "keepHeaders": ["traceparent"]})
        );
    }
}
