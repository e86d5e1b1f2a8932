//! The plan JSON's schema (`schemas/plan.v1.json`), generated from the plan types.
//!
//! A policy engine or a CI script that checks plans (no deletes on Fridays, no retention
//! below 7 days) needs a contract, not the shape of today's output: this is it, published
//! beside the spec schemas by `dlqctl schema` and checked for staleness by the same test.
//! It describes what dlqctl writes (the serialisation), so optional fields are the ones that
//! may be left out, and `null` appears only where dlqctl writes it.

use schemars::generate::SchemaSettings;
use serde_json::Value;

use super::Plan;

/// File name under `schemas/`.
pub const FILE_NAME: &str = "plan.v1.json";

/// The schema of [`Plan`] as dlqctl writes it.
pub fn schema() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    generator.into_root_schema_for::<Plan>().to_value()
}

/// The schema as written to `schemas/`: pretty JSON with a trailing newline.
pub fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_accepts_a_plan_and_refuses_a_wrong_action() {
        let validator = jsonschema::validator_for(&schema()).expect("a valid schema");
        let plan = serde_json::json!({
            "format_version": 1,
            "kind": "dlqctl/plan",
            "dlqctl_version": "0.1.0",
            "changes": [{
                "resource": {"target": "t", "backend": "rabbitmq", "kind": "queue", "scope": "/", "name": "q"},
                "channel": "c",
                "role": "dead-letter",
                "action": "replace",
                "fields": [{"key": "arguments.x-message-ttl", "old": 1000, "new": 2000}],
                "desired": {"arguments.x-message-ttl": 2000, "durable": true},
                "messages": 3
            }],
            "summary": {"create": 0, "update": 0, "replace": 1, "delete": 0, "impossible": 0, "unchanged": 2},
            "targets": {"t": {"backend": "rabbitmq", "url": "http://127.0.0.1:15672"}},
            "fingerprints": [{"resource": {"target": "t", "backend": "rabbitmq", "kind": "queue", "scope": "/", "name": "q"}, "hash": null}]
        });
        let errors: Vec<String> = validator
            .iter_errors(&plan)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
        let mut wrong = plan.clone();
        wrong["changes"][0]["action"] = "rename".into();
        assert!(!validator.is_valid(&wrong));
        let mut wrong = plan;
        wrong["format_version"] = 2.into();
        assert!(!validator.is_valid(&wrong));
    }
}
