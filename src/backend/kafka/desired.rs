//! Kafka desired state (pure, no I/O): a resolved channel becomes its main topic, one retry
//! topic per distinct delay (named by the naming profile), the dead-letter topic, Spring's
//! exception-based dead-letter topics, if any, and the invalid-message topic (`spec.invalid`),
//! partitioned like the dead-letter topic.

use serde_json::json;

use super::*;
use crate::resource::{Desired, Props};
use crate::spec::duration;
use crate::spec::resolve::Resolved;

/// The desired topics of one channel (pure).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(k) = &r.kafka else { return Vec::new() };
    let topic = |name: &str, role: Role, partitions: u32, retention: Option<duration::Duration>| {
        let mut props = Props::new();
        props.insert("partitions".into(), json!(partitions));
        props.insert("replication.factor".into(), json!(k.replication_factor));
        if let Some(t) = retention {
            props.insert("config.retention.ms".into(), json!(t.as_millis()));
        }
        for (key, value) in &k.config {
            props.insert(format!("config.{key}"), normalise_value(value));
        }
        Desired {
            id: topic_id(&r.target, name),
            channel: r.channel.clone(),
            role,
            props,
            immutable: false,
            present: true,
        }
    };
    // Spring's exception-based DLTs are dead-letter topics like the main one (same partitions,
    // same retention), created first with it.
    let mut out: Vec<Desired> = k
        .exception_dead_letters
        .iter()
        .map(|name| {
            topic(
                name,
                Role::DeadLetter,
                k.dead_letter_partitions,
                r.dead_letter_retention,
            )
        })
        .collect();
    out.push(topic(
        &r.dead_letter,
        Role::DeadLetter,
        k.dead_letter_partitions,
        r.dead_letter_retention,
    ));
    if let Some(i) = &r.invalid {
        out.push(topic(
            &i.name,
            Role::Invalid,
            k.dead_letter_partitions,
            i.retention,
        ));
    }
    // Retry topics keep the main topic's retention: a record may wait there behind a lagging
    // consumer far longer than its delay.
    for stage in &r.retry_stages {
        out.push(topic(&stage.name, Role::Retry, k.partitions, r.retention));
    }
    out.push(topic(&r.main, Role::Main, k.partitions, r.retention));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inventory example (Spring naming, three retries), resolved against a Kafka target.
    fn inventory() -> Resolved {
        crate::backend::resolved_example(
            include_str!("../../../examples/inventory-kafka.yaml"),
            "local-kafka",
            json!({
                "backend": "kafka",
                "bootstrapServers": "127.0.0.1:9092",
                "ownership": {"prefixes": ["inventory."]}
            }),
        )
    }

    #[test]
    fn the_dead_letter_topic_first_then_retries_in_order_then_the_main_topic() {
        let r = inventory();
        let ds = desired(&r);
        let order: Vec<(&str, Role)> = ds.iter().map(|d| (d.id.name.as_str(), d.role)).collect();
        let mut want = vec![(r.dead_letter.as_str(), Role::DeadLetter)];
        want.extend(
            r.retry_stages
                .iter()
                .map(|s| (s.name.as_str(), Role::Retry)),
        );
        want.push((r.main.as_str(), Role::Main));
        assert_eq!(order, want);
        assert_eq!(r.retry_stages.len(), 3, "1s, 2s, 4s");
        assert!(
            ds.iter()
                .all(|d| d.id == topic_id("local-kafka", &d.id.name))
        );
    }

    #[test]
    fn retry_topics_keep_the_main_retention_and_the_dlt_its_discard_age() {
        let ds = desired(&inventory());
        let week = json!(7 * 86_400_000_u64);
        for d in &ds {
            assert_eq!(d.props.get("partitions"), Some(&json!(3)), "{}", d.id.name);
            assert_eq!(
                d.props.get("replication.factor"),
                Some(&json!(1)),
                "{}",
                d.id.name
            );
            assert_eq!(
                d.props.get("config.cleanup.policy"),
                Some(&json!("delete")),
                "{}",
                d.id.name
            );
            let retention = d.props.get("config.retention.ms").expect("a retention");
            match d.role {
                Role::DeadLetter => assert_eq!(*retention, json!(30 * 86_400_000_u64)),
                _ => assert_eq!(*retention, week, "{}", d.id.name),
            }
        }
    }

    #[test]
    fn a_channel_on_another_backend_has_no_topics() {
        let mut r = inventory();
        r.kafka = None;
        assert!(desired(&r).is_empty());
    }
}
