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
