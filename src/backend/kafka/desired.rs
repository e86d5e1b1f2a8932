//! Kafka desired state (pure, no I/O): a resolved channel becomes its main topic, one retry
//! topic per distinct delay (named by the naming profile), the dead-letter topic, Spring's
//! exception-based dead-letter topics, if any, and the invalid-message topic (`spec.invalid`),
//! partitioned like the dead-letter topic; then the ACL bindings of `kafka.acls`, if written,
//! and the connectors of `kafka.connectors` ([`super::connect`]).

use std::collections::BTreeSet;

use serde_json::json;

use super::ffi::{AclOperation, Grant};
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
        // The broker writes a share group's dead letters only to a topic that allows it.
        if role == Role::DeadLetter && name == r.dead_letter && super::share::has_share_groups(r) {
            props.insert(
                format!("config.{}", super::share::TOPIC_ENABLE),
                json!("true"),
            );
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
    out.extend(super::share::desired(r));
    let grants = grants(r);
    out.extend(grants.into_iter().map(|g| Desired {
        id: acl_id(&r.target, &g),
        channel: r.channel.clone(),
        role: Role::Acl,
        props: Props::new(),
        immutable: false,
        present: true,
    }));
    out.extend(super::connect::desired(r));
    out
}

/// The ACL bindings `kafka.acls` asks for, sorted, each once (pure): producers WRITE the main
/// topic; the consuming service READs the main and retry topics and WRITEs the retry, dead-
/// letter and invalid-message topics (Spring's retry and dead-letter publishing runs in the
/// consumer); dead-letter readers READ the dead-letter and invalid-message topics only.
pub fn grants(r: &Resolved) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    let Some(acls) = r.kafka.as_ref().and_then(|k| k.acls.as_ref()) else {
        return out;
    };
    let retries: Vec<&str> = r.retry_stages.iter().map(|s| s.name.as_str()).collect();
    let mut dead: Vec<&str> = r
        .kafka
        .iter()
        .flat_map(|k| k.exception_dead_letters.iter().map(String::as_str))
        .collect();
    dead.push(&r.dead_letter);
    dead.extend(r.invalid.iter().map(|i| i.name.as_str()));
    let mut grant = |topics: &[&str], operation, principals: &Option<Vec<_>>| {
        for t in topics {
            for p in crate::spec::model::KafkaAcls::of(principals) {
                out.insert(Grant {
                    topic: (*t).to_owned(),
                    operation,
                    principal: p.to_owned(),
                });
            }
        }
    };
    let main = [r.main.as_str()];
    grant(&main, AclOperation::Write, &acls.produce);
    let read: Vec<&str> = main.iter().chain(&retries).copied().collect();
    grant(&read, AclOperation::Read, &acls.consume);
    let write: Vec<&str> = retries.iter().chain(&dead).copied().collect();
    grant(&write, AclOperation::Write, &acls.consume);
    grant(&dead, AclOperation::Read, &acls.read_dead_letters);
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
    #[test]
    fn kafka_acls_grant_each_role_its_topics_and_nothing_else() {
        let ws = crate::spec::load::load_str(
            "c.yaml",
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: app.orders}\nspec:\n  target: k\n  retry: {maxAttempts: 3, backoff: {initial: 1s, multiplier: 2}}\n  invalid: {retention: 7d}\n  kafka:\n    exceptionBasedDlts: [-deserialization]\n    acls:\n      produce: [User:api, User:worker]\n      consume: [User:worker]\n      readDeadLetters: [User:ops]\n",
        );
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target = serde_json::from_value(
            json!({"backend": "kafka", "bootstrapServers": "127.0.0.1:9092"}),
        )
        .expect("target");
        let r =
            crate::spec::resolve::resolve(&ws.channels[0].value, "k", &target).expect("resolves");
        let got: Vec<String> = grants(&r)
            .iter()
            .map(|g| format!("{} {} {}", g.topic, g.operation.as_str(), g.principal))
            .collect();
        assert_eq!(
            got,
            [
                // Producers write the main topic; the worker consumes it (and produces too).
                "app.orders READ User:worker",
                "app.orders WRITE User:api",
                "app.orders WRITE User:worker",
                // Spring's publishing runs in the consumer: it writes every dead-letter topic;
                // operators read them, and nothing else.
                "app.orders-deserialization-dlt READ User:ops",
                "app.orders-deserialization-dlt WRITE User:worker",
                "app.orders-dlt READ User:ops",
                "app.orders-dlt WRITE User:worker",
                "app.orders-invalid-dlt READ User:ops",
                "app.orders-invalid-dlt WRITE User:worker",
                // The consumer reads and writes its retry topics.
                "app.orders-retry-1000 READ User:worker",
                "app.orders-retry-1000 WRITE User:worker",
                "app.orders-retry-2000 READ User:worker",
                "app.orders-retry-2000 WRITE User:worker",
            ]
        );
        // Each is a resource of the channel, after its topics, named as `grant_of` reads it.
        let ds = desired(&r);
        let acls: Vec<&Desired> = ds.iter().filter(|d| d.id.kind == Kind::Acl).collect();
        assert_eq!(acls.len(), got.len());
        assert!(
            ds[ds.len() - acls.len()..]
                .iter()
                .all(|d| d.id.kind == Kind::Acl)
        );
        for (d, g) in acls.iter().zip(grants(&r)) {
            assert_eq!(
                (d.role, d.present, d.channel.as_str()),
                (Role::Acl, true, "app.orders")
            );
            assert_eq!(grant_of(&d.id), Some(g));
        }
        // Without `kafka.acls`, no binding.
        assert!(
            desired(&inventory())
                .iter()
                .all(|d| d.id.kind == Kind::Topic)
        );
        assert!(grants(&inventory()).is_empty());
    }
}
