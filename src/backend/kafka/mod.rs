//! Kafka through the admin API (rdkafka, bundled librdkafka): per channel a main topic, one
//! retry topic per distinct delay (named by the channel's naming profile) and a dead-letter
//! topic with at least as many partitions as its source.
//!
//! A topic is compared on its partition count, its replication factor and the config keys the
//! spec owns (`retention.ms` from the retention fields, and the keys of `kafka.config`),
//! against their effective values: whatever the broker reports for the key, set on the topic
//! or inherited. Keys the broker reports at their default are listed under `@defaults`, so the
//! plan does not present hundreds of broker defaults as unmanaged settings. A key the broker
//! does not report at all (tansu reports only explicitly set keys) has the broker's default,
//! whose value dlqctl cannot know: a spec value for it is set explicitly.
//!
//! dlqctl owns a config key while the spec gives it a value; a key removed from the spec keeps
//! its value on the topic (the plan then lists it as an unmanaged setting). A broker that
//! answers DescribeConfigs with only a handful of keys, all marked default (tansu), lists only
//! what was set: those keys count as set, so unmanaged ones are listed too.
//!
//! Reads are batched: one Metadata request (all topics) and one DescribeConfigs request for
//! every topic of the target that exists. Writes: CreateTopics, IncrementalAlterConfigs (see
//! [`ffi`]; plans only SET, since every owned key has a value; DELETE is there for a key that
//! must lose its topic-level value) and CreatePartitions. Fewer partitions and another
//! replication factor are `impossible` in the plan ([`plan::refine`]). Only topics inside the
//! target's ownership prefixes are ever written. A topic is deleted (DeleteTopics) only when
//! `plan --prune` planned it, and, unless message loss is allowed, only while it holds no
//! records ([`read::Reader::record_count`]).
//!
//! The doors, each in its own file: [`desired`] (pure), [`read`] (read-only: Metadata,
//! DescribeConfigs, offsets), [`plan`] (pure rules on top of the generic diff), [`apply`] (the
//! only writer; [`ffi`] holds the IncrementalAlterConfigs call rdkafka has no wrapper for) and
//! [`import`] (live → specs, pure over what `read` saw). [`connect`] holds the Kafka Connect
//! connectors of `kafka.connectors` (their error-handling keys, through the worker's REST API)
//! in all their doors. This file holds the names, errors and value normalisation they share.

pub mod alerts;
pub mod apply;
pub mod connect;
pub mod desired;
pub mod draw;
pub mod ffi;
pub mod import;
pub mod ledger;
pub mod plan;
pub mod read;
pub mod redrive;
pub mod replay;
pub mod review;
pub mod share;
pub mod status;

use std::time::Duration;

use serde_json::{Value, json};

use crate::resource::{Kind, ResourceId, Role};
use crate::spec::model::Backend;

/// How long one admin request may take before it fails.
pub const TIMEOUT: Duration = Duration::from_secs(15);
/// How long the first request (Metadata) waits for a broker to answer at all.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long apply waits for the brokers to show what it wrote.
pub const SETTLE: Duration = Duration::from_secs(20);
/// Topics written by one CreateTopics, IncrementalAlterConfigs or CreatePartitions request
/// during apply: a thousand topics take ten requests, and one request stays well inside
/// [`TIMEOUT`] even when the broker serialises the 8 in flight (at 200 a request, tansu on a
/// loaded machine answered some after 10.9 s; BENCHMARKS.md §8).
pub const BATCH: usize = 100;

/// librdkafka properties that hold secrets: only `secretProperties` (an environment variable
/// name) may set them, so that they are never written in a targets file.
pub const SECRET_PROPERTIES: [&str; 6] = [
    "sasl.password",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.password",
];

/// Properties dlqctl sets itself.
pub(super) const FIXED_PROPERTIES: [&str; 2] = ["bootstrap.servers", "allow.auto.create.topics"];

/// The live key listing the config keys a broker reports at their default value.
pub const DEFAULTS_KEY: &str = "@defaults";

/// A Kafka call that failed, said so that the user knows which topic and API.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    #[error(
        "cannot read the cluster at {bootstrap}: {reason}; is Kafka running and `bootstrapServers` right?"
    )]
    Connect { bootstrap: String, reason: String },
    #[error("{0}")]
    Call(#[from] ffi::CallError),
    #[error("topic `{topic}`: {api}: {message}")]
    Topic {
        topic: String,
        api: &'static str,
        message: String,
    },
    #[error(
        "topic `{topic}` is outside the target's ownership prefixes ({prefixes}); dlqctl never changes it"
    )]
    NotOwned { topic: String, prefixes: String },
    #[error("acl `{binding}`: {api}: {message}")]
    Acl {
        binding: String,
        api: &'static str,
        message: String,
    },
    #[error(
        "target {target}: {api}: the cluster has no authorizer (SECURITY_DISABLED), so it keeps no ACLs; remove `kafka.acls` from the channels on this target, or enable an authorizer on the brokers"
    )]
    NoAuthorizer { target: String, api: &'static str },
    #[error("connector `{connector}`: {message}")]
    Connector { connector: String, message: String },
    #[error(
        "target {target}: connector `{connector}` is listed in `kafka.connectors`, and the target has no `connectUrl` (the Connect worker's REST API)"
    )]
    NoConnectUrl { target: String, connector: String },
}

impl crate::backend::kit::errors::AtTarget for KafkaError {
    fn at(self, target: &str) -> crate::backend::kit::errors::BackendError {
        crate::backend::kit::errors::BackendError::Client {
            target: target.to_owned(),
            error: Box::new(self),
        }
    }
}

pub(super) fn topic_error(
    topic: &str,
    api: &'static str,
    message: impl std::fmt::Display,
) -> KafkaError {
    KafkaError::Topic {
        topic: topic.to_owned(),
        api,
        message: message.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Desired state (pure)
// ---------------------------------------------------------------------------------------------

pub fn topic_id(target: &str, name: &str) -> ResourceId {
    ResourceId {
        target: target.to_owned(),
        backend: Backend::Kafka,
        kind: Kind::Topic,
        scope: String::new(),
        name: name.to_owned(),
    }
}

/// A `kafka.acls` binding as a resource, named `<topic> <OPERATION> <principal>` (a topic name
/// has no blanks; a principal may: `User:CN=ops, O=acme`).
pub fn acl_id(target: &str, g: &ffi::Grant) -> ResourceId {
    ResourceId {
        target: target.to_owned(),
        backend: Backend::Kafka,
        kind: Kind::Acl,
        scope: String::new(),
        name: format!("{} {} {}", g.topic, g.operation.as_str(), g.principal),
    }
}

/// The binding an [`acl_id`] names (`None` for another kind or name).
pub fn grant_of(id: &ResourceId) -> Option<ffi::Grant> {
    if id.kind != Kind::Acl {
        return None;
    }
    let (topic, rest) = id.name.split_once(' ')?;
    let (operation, principal) = rest.split_once(' ')?;
    let operation = match operation {
        "READ" => ffi::AclOperation::Read,
        "WRITE" => ffi::AclOperation::Write,
        _ => return None,
    };
    (!topic.is_empty() && !principal.is_empty()).then(|| ffi::Grant {
        topic: topic.to_owned(),
        operation,
        principal: principal.to_owned(),
    })
}

/// The channel (its main topic) and role a topic's name suggests under Spring's naming:
/// `<main>-invalid-dlt` is an invalid-message topic, `<main>-dlt` / `<main>.DLT` a dead-letter
/// topic, `<main>-retry[-…]` a retry topic.
pub fn role_by_name(topic: &str) -> (String, Role) {
    if let Some(main) = topic.strip_suffix(crate::spec::resolve::KAFKA_INVALID_SUFFIX) {
        return (main.to_owned(), Role::Invalid);
    }
    for suffix in ["-dlt", ".DLT"] {
        if let Some(main) = topic.strip_suffix(suffix) {
            return (main.to_owned(), Role::DeadLetter);
        }
    }
    if let Some(i) = topic.rfind("-retry") {
        let rest = &topic[i + "-retry".len()..];
        if rest.is_empty() || rest.starts_with('-') {
            return (topic[..i].to_owned(), Role::Retry);
        }
    }
    (topic.to_owned(), Role::Main)
}

/// A config value as compared and shown: whole numbers as numbers, lists without blanks
/// around commas (`compact, delete` = `compact,delete`), everything else as text.
pub fn normalise_value(text: &str) -> Value {
    let t = text.trim();
    let canonical_int = t.parse::<i64>().ok().filter(|n| n.to_string() == t);
    if let Some(n) = canonical_int {
        return json!(n);
    }
    if t.contains(',') {
        return json!(t.split(',').map(str::trim).collect::<Vec<_>>().join(","));
    }
    json!(t)
}

/// A desired or live value as Kafka takes it (text).
pub(super) fn config_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// This backend's pure doors ([`crate::backend::kit::doors::Plan`], in `plan.rs`): the dispatcher's handle on them.
#[derive(Debug, Clone, Copy)]
pub struct Kafka;

#[cfg(test)]
mod tests {
    //! The paths tansu cannot run (it answers CreatePartitions with UnsupportedFeature and has
    //! a single broker): partition growth, partition decrease and replication-factor changes
    //! are checked here on the plan values; tests/kafka.rs covers what tansu supports live.
    use std::sync::Arc;

    use super::desired::desired;
    use super::ffi::{ConfigOp, Source};
    use super::plan::*;
    use super::read::*;
    use super::*;
    use crate::backend::wire::Stats;
    use crate::plan::{Action, Change, FieldChange, diff};
    use crate::resource::{Desired, Live};
    use crate::spec::model::Target;

    fn topic(props: Value) -> Desired {
        Desired {
            id: topic_id("k", "app.orders"),
            channel: "app.orders".into(),
            role: Role::Main,
            props: serde_json::from_value(props).expect("props"),
            immutable: false,
            present: true,
        }
    }

    fn live(props: Value) -> Live {
        Live {
            props: serde_json::from_value(props).expect("props"),
            messages: None,
        }
    }

    fn planned(desired: Value, live_props: Value) -> Change {
        let mut c = diff(&topic(desired), Some(&live(live_props))).expect("a change");
        refine(&mut c);
        c
    }

    #[test]
    fn more_partitions_is_an_update_made_by_create_partitions() {
        let c = planned(
            json!({"partitions": 6, "replication.factor": 1}),
            json!({"partitions": 3, "replication.factor": 1}),
        );
        assert_eq!(c.action, Action::Update);
        assert_eq!(update_steps(&c), Ok(vec![Step::CreatePartitions(6)]));
    }

    #[test]
    fn fewer_partitions_is_impossible_with_the_reason() {
        let c = planned(
            json!({"partitions": 2, "replication.factor": 1, "config.retention.ms": 1000}),
            json!({"partitions": 3, "replication.factor": 1, "config.retention.ms": 2000}),
        );
        assert_eq!(c.action, Action::Impossible);
        let reason = c.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("cannot remove partitions (3 → 2)"),
            "{reason}"
        );
        assert!(update_steps(&c).is_err(), "the writer refuses it too");
    }

    #[test]
    fn another_replication_factor_is_impossible_with_the_reassignment_hint() {
        let c = planned(
            json!({"partitions": 3, "replication.factor": 3}),
            json!({"partitions": 3, "replication.factor": 1}),
        );
        assert_eq!(c.action, Action::Impossible);
        let reason = c.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("(1 → 3)") && reason.contains("reassignment"),
            "{reason}"
        );
    }

    #[test]
    fn config_changes_are_set_before_partitions_grow() {
        let c = planned(
            json!({"partitions": 4, "replication.factor": 1, "config.retention.ms": 5000, "config.cleanup.policy": "delete"}),
            json!({"partitions": 3, "replication.factor": 1, "config.retention.ms": 4000, "config.cleanup.policy": "delete"}),
        );
        assert_eq!(c.action, Action::Update);
        assert_eq!(c.destructive, None, "longer retention drops nothing");
        assert_eq!(
            update_steps(&c),
            Ok(vec![
                Step::AlterConfigs(vec![ConfigOp::Set {
                    key: "retention.ms".into(),
                    value: "5000".into()
                }]),
                Step::CreatePartitions(4),
            ])
        );
    }

    #[test]
    fn shorter_retention_and_compaction_are_guarded_as_destructive() {
        let c = planned(
            json!({"config.retention.ms": 86_400_000}),
            json!({"config.retention.ms": 604_800_000}),
        );
        assert_eq!(c.action, Action::Update);
        let how = c.destructive.as_deref().unwrap_or_default();
        assert!(how.contains("from 7d to 1d"), "{how}");
        // From unlimited (-1) to anything is shorter.
        let c = planned(
            json!({"config.retention.ms": 1000}),
            json!({"config.retention.ms": -1}),
        );
        assert!(c.destructive.is_some());
        let c = planned(
            json!({"config.cleanup.policy": "compact"}),
            json!({"config.cleanup.policy": "delete"}),
        );
        assert!(
            c.destructive
                .as_deref()
                .unwrap_or_default()
                .contains("latest record")
        );
    }

    #[test]
    fn a_retention_set_where_none_was_read_is_guarded_as_possibly_destructive() {
        for key in ["config.retention.ms", "config.retention.bytes"] {
            let c = planned(json!({key: 1000}), json!({"partitions": 3}));
            assert_eq!(c.action, Action::Update, "{key}");
            let how = c.destructive.as_deref().unwrap_or_default();
            assert!(
                how.contains("may delete records") && how.contains(&key[7..]),
                "{key}: {how}"
            );
            // A topic known to hold no records loses nothing.
            let mut empty = diff(
                &topic(json!({key: 1000})),
                Some(&Live {
                    props: serde_json::from_value(json!({"partitions": 3})).expect("props"),
                    messages: Some(0),
                }),
            )
            .expect("a change");
            refine(&mut empty);
            assert_eq!(empty.destructive, None, "{key}");
        }
        // A create is never destructive.
        let mut create = diff(&topic(json!({"config.retention.ms": 1000})), None).expect("create");
        refine(&mut create);
        assert_eq!(create.action, Action::Create);
        assert_eq!(create.destructive, None);
    }

    #[test]
    fn effective_values_are_compared_whatever_their_source() {
        // A real broker reports retention.ms at its default: equal to the spec means no change,
        // and a default is not an unmanaged setting.
        let m = TopicMeta {
            partitions: 3,
            replication: 1,
        };
        let entry = |name: &str, value: &str, source| ffi::Entry {
            name: name.into(),
            value: Some(value.into()),
            source,
            is_default: source == Source::Default,
            is_sensitive: false,
        };
        let l = live_topic(
            &m,
            &[
                entry("retention.ms", "604800000", Source::Default),
                entry("segment.bytes", "1073741824", Source::StaticBroker),
                entry("max.message.bytes", "2000000", Source::DynamicTopic),
            ],
        );
        let d = topic(
            json!({"partitions": 3, "replication.factor": 1, "config.retention.ms": 604_800_000}),
        );
        assert_eq!(diff(&d, Some(&l)), None);
        assert_eq!(
            crate::plan::unmanaged(&d, &l),
            vec!["config.max.message.bytes = 2000000"]
        );
        // A key the broker does not report (tansu: never set) is set explicitly.
        let d = topic(
            json!({"partitions": 3, "replication.factor": 1, "config.cleanup.policy": "delete"}),
        );
        let c = diff(&d, Some(&l)).expect("change");
        assert_eq!(
            c.fields,
            vec![FieldChange {
                key: "config.cleanup.policy".into(),
                old: None,
                new: Some(json!("delete"))
            }]
        );
    }

    #[test]
    fn a_broker_that_lists_only_set_keys_has_no_defaults_to_hide() {
        // tansu: the keys set on the topic, all marked Default.
        let m = TopicMeta {
            partitions: 1,
            replication: 1,
        };
        let entry = |name: &str, value: &str| ffi::Entry {
            name: name.into(),
            value: Some(value.into()),
            source: Source::Default,
            is_default: true,
            is_sensitive: false,
        };
        let l = live_topic(
            &m,
            &[
                entry("retention.ms", "1000"),
                entry("max.message.bytes", "2000000"),
            ],
        );
        let d =
            topic(json!({"partitions": 1, "replication.factor": 1, "config.retention.ms": 1000}));
        assert_eq!(
            crate::plan::unmanaged(&d, &l),
            vec!["config.max.message.bytes = 2000000"]
        );
    }

    /// `refine` on one hand-made field change (values `diff` would not produce are allowed:
    /// this pins the comparison itself).
    fn refined(key: &str, old: Option<Value>, new: Option<Value>, messages: Option<u64>) -> Change {
        let mut c = diff(&topic(json!({"partitions": 1})), None).expect("a create");
        c.action = Action::Update;
        c.messages = messages;
        c.fields = vec![FieldChange {
            key: key.into(),
            old,
            new,
        }];
        refine(&mut c);
        c
    }

    #[test]
    fn retention_is_shorter_only_when_the_new_limit_is_lower_or_the_old_was_unlimited() {
        let ms = "config.retention.ms";
        for (old, new, shorter) in [
            (604_800_000, 86_400_000, true),
            (-1, 1000, true),
            (1000, 1000, false),
            (1000, 2000, false),
            (1000, -1, false),
            (0, 1000, false),
        ] {
            let c = refined(ms, Some(json!(old)), Some(json!(new)), None);
            assert_eq!(c.destructive.is_some(), shorter, "{old} -> {new}");
            assert_eq!(c.action, Action::Update);
        }
        let c = refined(ms, Some(json!(-1)), Some(json!(1000)), None);
        let how = c.destructive.unwrap_or_default();
        assert!(how.contains("from unlimited to 1s"), "{how}");
        let c = refined(
            "config.retention.bytes",
            Some(json!(2048)),
            Some(json!(1024)),
            Some(0),
        );
        let how = c.destructive.unwrap_or_default();
        assert!(
            how.contains("retention.bytes deletes the oldest records"),
            "{how}"
        );
        // Setting no limit where none was read deletes nothing.
        let c = refined(ms, None, Some(json!(-1)), None);
        assert_eq!(c.destructive, None);
        // Removing the topic's own value is not a limit of its own.
        let c = refined(ms, Some(json!(1000)), None, None);
        assert_eq!(c.destructive, None);
    }

    #[test]
    fn equal_partitions_are_neither_impossible_nor_a_refusal_to_write() {
        let c = refined("partitions", Some(json!(3)), Some(json!(3)), None);
        assert_eq!((c.action, c.reason.as_deref()), (Action::Update, None));
        assert_eq!(update_steps(&c), Ok(vec![Step::CreatePartitions(3)]));
        let c = refined("partitions", Some(json!(3)), Some(json!(2)), None);
        assert_eq!(c.action, Action::Impossible);
    }

    #[test]
    fn compaction_is_destructive_only_when_it_is_new() {
        let policy = "config.cleanup.policy";
        for (old, new, destructive) in [
            ("delete", "compact", true),
            ("delete", "compact,delete", true),
            ("compact", "compact,delete", false),
            ("compact", "delete", false),
        ] {
            let c = refined(policy, Some(json!(old)), Some(json!(new)), None);
            assert_eq!(c.destructive.is_some(), destructive, "{old} -> {new}");
        }
    }

    #[test]
    fn only_updates_are_refined_and_a_removed_config_is_deleted_on_the_topic() {
        for action in [Action::Create, Action::Replace, Action::Delete] {
            let mut c = refined("replication.factor", Some(json!(1)), Some(json!(3)), None);
            c.action = action;
            c.reason = None;
            refine(&mut c);
            assert_eq!((c.action, c.reason), (action, None), "{action:?}");
        }
        let c = refined("config.segment.ms", Some(json!(1000)), None, None);
        assert_eq!(
            update_steps(&c),
            Ok(vec![Step::AlterConfigs(vec![ConfigOp::Delete {
                key: "segment.ms".into()
            }])])
        );
        let c = refined("replication.factor", Some(json!(1)), Some(json!(3)), None);
        assert!(update_steps(&c).is_err(), "the writer refuses it too");
    }

    #[test]
    fn kafka_durations_are_the_configs_ending_in_ms() {
        let c = refined("partitions", Some(json!(1)), Some(json!(2)), None);
        assert_eq!(
            duration_unit(&c, "config.retention.ms"),
            Some(crate::resource::TimeUnit::Millis)
        );
        assert_eq!(duration_unit(&c, "config.retention.bytes"), None);
        assert_eq!(duration_unit(&c, "retention.ms"), None, "not a config key");
        assert_eq!(duration_unit(&c, "partitions"), None);
        assert!(notes(&[], &std::collections::BTreeMap::new()).is_empty());
        assert!(goes_first(&[c]).is_empty());
    }

    #[test]
    fn values_are_normalised_on_both_sides() {
        assert_eq!(normalise_value("604800000"), json!(604_800_000));
        assert_eq!(normalise_value("-1"), json!(-1));
        assert_eq!(
            normalise_value("007"),
            json!("007"),
            "not a canonical number"
        );
        assert_eq!(normalise_value("compact, delete"), json!("compact,delete"));
        assert_eq!(normalise_value("0.5"), json!("0.5"));
        assert_eq!(config_text(&json!(604_800_000)), "604800000");
        assert_eq!(config_text(&json!("delete")), "delete");
    }

    fn target(props: Value, secrets: Value) -> Target {
        Target {
            backend: Backend::Kafka,
            region: None,
            endpoint: None,
            profile: None,
            url: None,
            amqp_url: None,
            vhost: None,
            username_env: None,
            password_env: None,
            bootstrap_servers: Some("127.0.0.1:9092".into()),
            properties: serde_json::from_value(props).expect("properties"),
            secret_properties: serde_json::from_value(secrets).expect("secrets"),
            connect_url: None,
            brokers: None,
            project: None,
            emulator_host: None,
            grant_service_agent: None,
            project_number: None,
            subscription_id: None,
            resource_group: None,
            namespace: None,
            arm_url: None,
            data_url: None,
            token_url: None,
            access_token_env: None,
            data_access_token_env: None,
            tenant_id: None,
            client_id: None,
            client_secret_env: None,
            managed_identity: None,
            workload_identity: None,
            identity_url: None,
            monitoring: None,
            ownership: None,
            alerts: None,
            redact: None,
            operations: None,
        }
    }

    /// Issue 31 (13): with the broker down, the exporter's memory grew by tens of KB per
    /// reading: librdkafka's log lines and errors go to the admin client's main queue
    /// (rdkafka sets `log.queue`), which an AdminClient never polls.
    #[test]
    fn a_failed_reading_leaves_no_event_behind_on_the_admin_clients_queue() {
        let mut t = target(Value::Null, Value::Null);
        t.bootstrap_servers = Some("127.0.0.1:1".into());
        let reader = Reader::connect("k", &t, Arc::new(Stats::default())).expect("reader");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        assert!(
            rt.block_on(reader.metadata()).is_err(),
            "nothing listens on port 1"
        );
        // 198 before the drain; a reconnect may log again between the drain and this look.
        let left = ffi::main_queue_len(&reader.admin);
        assert!(
            left < 10,
            "{left} events left on the admin client's main queue"
        );
    }

    #[test]
    fn secrets_come_only_from_the_environment_and_are_never_shown() {
        let e = client_config(
            "prod",
            &target(json!({"sasl.password": "hunter2"}), Value::Null),
        )
        .expect_err("refused");
        assert!(e.to_string().contains("secretProperties"), "{e}");
        assert!(!e.to_string().contains("hunter2"));

        let e = client_config(
            "prod",
            &target(
                Value::Null,
                json!({"sasl.password": "DLQCTL_TEST_UNSET_VAR"}),
            ),
        )
        .expect_err("missing env");
        assert!(e.to_string().contains("DLQCTL_TEST_UNSET_VAR"), "{e}");

        let e = client_config(
            "prod",
            &target(json!({"allow.auto.create.topics": "true"}), Value::Null),
        )
        .expect_err("refused");
        assert!(e.to_string().contains("allow.auto.create.topics"), "{e}");

        // librdkafka quotes a refused value; for a secret property dlqctl names the variable.
        let t = target(Value::Null, json!({"sasl.password": "PATH"}));
        let err = rdkafka::error::KafkaError::ClientConfig(
            rdkafka::types::RDKafkaConfRes::RD_KAFKA_CONF_INVALID,
            "Invalid value \"secret-value\"".into(),
            "sasl.password".into(),
            "secret-value".into(),
        );
        let m = describe_config_error(&t, &err);
        assert!(!m.contains("secret-value") && m.contains("$PATH"), "{m}");
    }

    #[tokio::test]
    async fn topics_outside_the_ownership_prefixes_are_never_written() {
        let mut t = target(Value::Null, Value::Null);
        t.bootstrap_servers = Some("127.0.0.1:1".into());
        t.ownership = Some(crate::spec::model::Ownership {
            prefixes: vec!["app.".into()],
        });
        let w = Reader::connect("prod", &t, Arc::new(Stats::default()))
            .expect("client")
            .into_writer();
        let mut c = diff(
            &topic(json!({"partitions": 1, "replication.factor": 1})),
            None,
        )
        .expect("create");
        c.resource.name = "billing.orders".into();
        let e = w.apply(&c, false).await.expect_err("refused");
        assert!(
            e.to_string().contains("topic `billing.orders` is outside"),
            "{e}"
        );
        assert!(
            w.reader.stats.snapshot().is_empty(),
            "refused before any request"
        );
    }

    #[test]
    fn sasl_ssl_with_scram_is_supported_by_this_build() {
        // librdkafka refuses these properties when it was built without OpenSSL.
        let t = target(
            json!({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "dlqctl"}),
            json!({"sasl.password": "PATH"}),
        );
        Reader::connect("prod", &t, Arc::new(Stats::default())).expect("SASL_SSL + SCRAM client");
    }

    #[test]
    fn the_reader_debug_output_holds_no_configuration() {
        let t = target(Value::Null, json!({"sasl.password": "PATH"}));
        let r = Reader::connect("prod", &t, Arc::new(Stats::default())).expect("client");
        let shown = format!("{r:?}");
        assert!(
            !shown.contains(&std::env::var("PATH").unwrap_or_default()),
            "{shown}"
        );
        assert!(shown.contains("127.0.0.1:9092"));
    }

    /// The desired topics of channel `app.orders` with these `spec:` lines.
    fn desired_of(spec: &str) -> Vec<crate::resource::Desired> {
        let ws = crate::spec::load::load_str(
            "c.yaml",
            &format!(
                "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: app.orders}}\nspec:\n  target: k\n{spec}"
            ),
        );
        let r = crate::spec::resolve::resolve(
            &ws.channels[0].value,
            "k",
            &target(Value::Null, Value::Null),
        )
        .expect("resolves");
        desired(&r)
    }

    #[test]
    fn every_topic_of_the_channel_is_desired_with_its_partitions_and_retention() {
        let d = desired_of(
            "  retention: 7d\n  retry: {maxAttempts: 3, backoff: {initial: 1s, multiplier: 2}}\n  deadLetter: {retention: 30d}\n  kafka: {partitions: 3, deadLetterPartitions: 6, replicationFactor: 1, config: {cleanup.policy: delete}}\n",
        );
        let names: Vec<(&str, Role)> = d.iter().map(|x| (x.id.name.as_str(), x.role)).collect();
        assert_eq!(
            names,
            [
                ("app.orders-dlt", Role::DeadLetter),
                ("app.orders-retry-1000", Role::Retry),
                ("app.orders-retry-2000", Role::Retry),
                ("app.orders", Role::Main)
            ]
        );
        assert_eq!(*d[0].props.get("partitions").unwrap(), json!(6));
        assert_eq!(
            *d[0].props.get("config.retention.ms").unwrap(),
            json!(2_592_000_000_u64)
        );
        assert_eq!(
            *d[1].props.get("config.retention.ms").unwrap(),
            json!(604_800_000)
        );
        assert_eq!(
            *d[3].props.get("config.cleanup.policy").unwrap(),
            json!("delete")
        );
    }

    #[test]
    fn the_invalid_message_topic_is_partitioned_like_the_dead_letter_topic() {
        let d = desired_of(
            "  retry: {maxAttempts: 1}\n  invalid: {discard: {after: 2d, reason: r}}\n  kafka: {partitions: 3, deadLetterPartitions: 6}\n",
        );
        let t = d
            .iter()
            .find(|x| x.id.name == "app.orders-invalid-dlt")
            .expect("the invalid topic");
        assert_eq!(t.role, Role::Invalid);
        assert_eq!(t.props.get("partitions"), Some(&json!(6)));
        assert_eq!(
            t.props.get("config.retention.ms"),
            Some(&json!(172_800_000))
        );
        // Read back by name (prune), it is the invalid topic of `app.orders`, not a DLT of
        // a topic `app.orders-invalid`.
        assert_eq!(
            role_by_name("app.orders-invalid-dlt"),
            ("app.orders".to_owned(), Role::Invalid)
        );
    }

    #[test]
    fn exception_based_dead_letter_topics_are_desired_like_the_dead_letter_topic() {
        let ws = crate::spec::load::load_str(
            "c.yaml",
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: app.orders}\nspec:\n  target: k\n  retry: {maxAttempts: 2}\n  deadLetter: {retention: 30d}\n  kafka: {partitions: 3, deadLetterPartitions: 6, exceptionBasedDlts: [-deserialization, -validation]}\n",
        );
        let r = crate::spec::resolve::resolve(
            &ws.channels[0].value,
            "k",
            &target(Value::Null, Value::Null),
        )
        .expect("resolves");
        let d = desired(&r);
        let names: Vec<(&str, Role)> = d.iter().map(|x| (x.id.name.as_str(), x.role)).collect();
        assert_eq!(
            names,
            [
                ("app.orders-deserialization-dlt", Role::DeadLetter),
                ("app.orders-validation-dlt", Role::DeadLetter),
                ("app.orders-dlt", Role::DeadLetter),
                ("app.orders-retry", Role::Retry),
                ("app.orders", Role::Main)
            ]
        );
        for dlt in &d[..3] {
            assert_eq!(dlt.props.get("partitions"), Some(&json!(6)));
            assert_eq!(
                dlt.props.get("config.retention.ms"),
                Some(&json!(2_592_000_000_u64))
            );
        }
    }
    #[test]
    fn an_acl_resource_name_reads_back_as_its_binding() {
        use ffi::{AclOperation, Grant};
        for (topic, operation, principal) in [
            ("app.orders-dlt", AclOperation::Read, "User:CN=ops, O=acme"),
            ("app.orders", AclOperation::Write, "User:*"),
        ] {
            let g = Grant {
                topic: topic.into(),
                operation,
                principal: principal.into(),
            };
            let id = acl_id("k", &g);
            assert_eq!(id.kind, Kind::Acl);
            assert_eq!(
                id.name,
                format!("{topic} {} {principal}", operation.as_str())
            );
            assert_eq!(grant_of(&id), Some(g));
        }
        let named = |name: &str| ResourceId {
            name: name.into(),
            ..acl_id(
                "k",
                &Grant {
                    topic: "t".into(),
                    operation: AclOperation::Read,
                    principal: "User:a".into(),
                },
            )
        };
        for bad in ["t ALL User:a", "t READ", "t", " READ User:a", "t READ "] {
            assert_eq!(grant_of(&named(bad)), None, "{bad:?}");
        }
        assert_eq!(
            grant_of(&topic_id("k", "t READ User:a")),
            None,
            "a topic is no binding"
        );
    }
}
