//! Kafka, live: Apache Kafka from `scripts/stack up --only kafka` (or its fallback, tansu, where
//! no JVM runs), through the real binary.
//!
//! Every test works on its own channel (`inventory.t<random>`, inside the example target's
//! ownership prefix) and deletes its topics when it ends. Hand changes are made the way an
//! operator would: raw admin calls (rdkafka's AdminClient, and IncrementalAlterConfigs through
//! dlqctl's wrapper), never through dlqctl's plan.
//!
//! The stack has one broker, so a replication-factor change is checked as far as the plan and
//! its refusal go. ACLs are live in tests/kafka_acls.rs (the SASL listener and its authorizer).
//! What only Apache Kafka does (CreatePartitions) is skipped loudly on the tansu fallback, and
//! fails under CI=true (support::kafka::apache_kafka).

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use dlqctl::backend::kafka::ffi::ConfigOp;
use rdkafka::ClientConfig;
use serde_json::Value;
use support::kafka::{Fixture, alter, create_topics, delete_topics, set};
use support::{block, unique};

#[test]
fn every_kafka_example_applies_then_plans_empty_and_a_second_apply_writes_nothing() {
    let examples = support::examples_on("local-kafka");
    assert!(
        !examples.is_empty(),
        "no example uses the local-kafka target"
    );
    for example in examples {
        let Some(f) = Fixture::new() else { return };
        f.write_from(&example, |t| t);
        f.first_apply(&example);
        f.assert_second_apply_writes_nothing(&example);

        // A no-change plan costs one Metadata, one DescribeConfigs and one DescribeAcls
        // request, whatever the number of topics; the examples' topics have no binding, so
        // no note: the answer was read.
        let stats = f.run(&["plan", "channel.yaml", "--stats"]);
        stats.assert_stderr_contains("API calls: 3\n");
        assert!(
            stats.stderr.contains("1  kafka:Metadata")
                && stats.stderr.contains("1  kafka:DescribeConfigs")
                && stats.stderr.contains("1  kafka:DescribeAcls"),
            "{}",
            stats.stderr
        );
        assert!(!stats.stdout.contains("not checked"), "{}", stats.stdout);
    }
}

#[test]
fn the_inventory_example_has_the_topics_spring_kafka_expects() {
    let Some(f) = Fixture::applied() else { return };
    let c = &f.channel;
    // Backoff 1 s × 2 up to 4 s, 4 attempts: one retry topic per delay, DLT as wide as the source.
    let expected: BTreeMap<String, usize> = [
        (c.clone(), 3),
        (format!("{c}-dlt"), 3),
        (format!("{c}-retry-1000"), 3),
        (format!("{c}-retry-2000"), 3),
        (format!("{c}-retry-4000"), 3),
    ]
    .into();
    assert_eq!(f.topics(), expected);
}

#[test]
fn every_naming_profile_applies_then_plans_empty() {
    type Case = (&'static str, fn(String) -> String, &'static [&'static str]);
    let cases: [Case; 4] = [
        // Fixed backoff: Spring (3.2+) reuses one `-retry` topic for every attempt.
        (
            "fixed",
            |t| {
                t.replace(
                    "backoff: {initial: 1s, multiplier: 2, max: 4s}",
                    "backoff: {initial: 2s}",
                )
            },
            &["-retry"],
        ),
        // Spring's RetryTopicConfigurationBuilder default: one topic per attempt, by index.
        (
            "multiple",
            |t| {
                t.replace(
                    "backoff: {initial: 1s, multiplier: 2, max: 4s}",
                    "backoff: {initial: 2s}",
                )
                .replace(
                    "naming: spring",
                    "naming: spring\n    sameIntervalTopicReuse: multipleTopics",
                )
            },
            &["-retry-0", "-retry-1", "-retry-2"],
        ),
        (
            "index",
            |t| t.replace("naming: spring", "naming: index"),
            &["-retry-0", "-retry-1", "-retry-2"],
        ),
        (
            "custom",
            |t| {
                t.replace("naming: spring", "naming: custom")
                    .replace(
                        "    maxAttempts: 4\n",
                        "    maxAttempts: 4\n    name: \"{channel}.retry.{index}\"\n",
                    )
                    .replace(
                        "  deadLetter:\n",
                        "  deadLetter:\n    name: \"{channel}.dead\"\n",
                    )
            },
            &[".retry.1", ".retry.2", ".retry.3", ".dead"],
        ),
    ];
    for (profile, edit, suffixes) in cases {
        let Some(f) = Fixture::new() else { return };
        f.write_example(edit);
        let a = f.apply(&[]);
        a.ok_with(profile);
        let live: Vec<String> = f.topics().into_keys().filter(|t| t != &f.channel).collect();
        let mut expected: Vec<String> = suffixes
            .iter()
            .map(|s| format!("{}{s}", f.channel))
            .collect();
        if profile != "custom" {
            expected.push(format!("{}-dlt", f.channel));
        }
        expected.sort();
        assert_eq!(live, expected, "{profile}");
        f.assert_empty_plan(profile);
    }
}

#[test]
fn hand_changes_and_a_deleted_retry_topic_show_up_in_the_next_plan() {
    let Some(f) = Fixture::applied() else { return };
    let main = f.main();
    let dlt = format!("{main}-dlt");
    let retry = format!("{main}-retry-2000");

    alter(&main, set("retention.ms", "1000"));
    // A key deleted by hand falls back to the broker's default: Apache Kafka's retention.ms is
    // 7 days, the spec keeps dead letters 30. (The tansu fallback lists a deleted key as
    // absent, and setting a retention where none was read is guarded: there the key is
    // cleanup.policy.)
    let (key, change) = if support::kafka::on_tansu() {
        (
            "cleanup.policy",
            "config.cleanup.policy: (absent) → \"delete\"",
        )
    } else {
        (
            "retention.ms",
            "config.retention.ms: 604800000 → 2592000000",
        )
    };
    alter(&dlt, ConfigOp::Delete { key: key.into() });
    let p = f.plan();
    p.exits(2);
    p.assert_stdout_contains(&format!("~ update     topic {main}\n"));
    p.assert_stdout_contains("config.retention.ms: 1000 → 604800000");
    p.assert_stdout_contains(&format!("~ update     topic {dlt}\n"));
    p.assert_stdout_contains(change);

    // A retry topic deleted by hand is created again.
    delete_topics(&[&retry]);
    let p = f.plan();
    p.assert_stdout_contains(&format!("+ create     topic {retry}\n"));
    p.assert_stdout_contains("Plan: 1 to create, 2 to update, 0 to replace, 0 to delete.");

    let a = f.apply(&[]);
    a.ok();
    f.assert_empty_plan("after repair");
    assert!(f.topics().contains_key(&retry));
}

#[test]
fn a_shorter_retention_is_guarded_as_message_loss() {
    let Some(f) = Fixture::applied() else { return };
    let p = f.plan_edited(|t| t.replace("  retention: 7d\n", "  retention: 1d\n"));
    p.assert_stdout_contains(
        "lowering retention.ms from 7d to 1d deletes the records older than that",
    );
    let refused = f.apply(&[]);
    refused.exits(1);
    assert!(
        refused.stderr.contains("--allow-message-loss") && !refused.stderr.contains("[1/"),
        "{}",
        refused.stderr
    );
    let done = f.apply(&["--allow-message-loss"]);
    done.ok();
    f.assert_empty_plan("after the shorter retention");
}

#[test]
fn partitions_grow_by_create_partitions_and_removing_them_or_changing_replication_is_refused() {
    let Some(f) = Fixture::applied() else { return };
    let main = f.main();

    let p = f.plan_edited(|t| t.replace("partitions: 3", "partitions: 2"));
    p.assert_stdout_contains(&format!("! impossible topic {main}\n"));
    p.assert_stdout_contains("Kafka cannot remove partitions (3 → 2)");
    let refused = f.apply(&[]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("cannot remove partitions") && !refused.stderr.contains("[1/"),
        "{}",
        refused.stderr
    );

    let p = f.plan_edited(|t| t.replace("replicationFactor: 1", "replicationFactor: 3"));
    p.assert_stdout_contains(
        "changing the replication factor (1 → 3) needs a partition reassignment",
    );
    assert_eq!(
        f.topics().values().copied().collect::<Vec<_>>(),
        vec![3; 5],
        "nothing was changed"
    );

    // Growing partitions is a plain update, made by CreatePartitions.
    let p = f.plan_edited(|t| t.replace("partitions: 3", "partitions: 4"));
    p.assert_stdout_contains(&format!(
        "~ update     topic {main}\n        partitions: 3 → 4"
    ));
    if !support::kafka::apache_kafka("CreatePartitions (tansu 0.6.0 answers UnsupportedFeature)") {
        return;
    }
    let a = f.apply(&[]);
    a.ok();
    // The dead-letter topic grows first: never narrower than its source.
    let order: Vec<&str> = a.stderr.lines().filter(|l| l.starts_with('[')).collect();
    assert!(
        order[0].contains(&format!("update topic {main}-dlt ")),
        "{}",
        a.stderr
    );
    f.assert_empty_plan("after growing to 4 partitions");
    assert_eq!(
        f.topics().values().copied().collect::<Vec<_>>(),
        vec![4; 5],
        "{:?}",
        f.topics()
    );
}

#[test]
fn spring_suffixes_name_the_topics_as_spring_kafka_does_and_each_carries_a_record() {
    // Issue 18's Spring application: `retryTopicSuffix(".retry")`, `dltSuffix(".dlt")`,
    // `suffixTopicsWithIndexValues()`, `exponentialBackoff(1_000, 2, 16_000)`,
    // `maxAttempts(5)`: four retry topics, by index from 0, and the DLT; with
    // `dltRoutingRules(Map.of("-deserialization", ...))` one more DLT, `<main>-deserialization.dlt`.
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| {
        support::kafka::with_index_naming(t, "\n    exceptionBasedDlts: [-deserialization]")
    });
    let lint = f.run(&["lint", "channel.yaml"]);
    lint.ok();
    f.first_apply("spring suffixes");
    let c = &f.channel;
    let expected: BTreeMap<String, usize> = [
        (c.clone(), 3),
        (format!("{c}.retry-0"), 3),
        (format!("{c}.retry-1"), 3),
        (format!("{c}.retry-2"), 3),
        (format!("{c}.retry-3"), 3),
        (format!("{c}.dlt"), 3),
        (format!("{c}-deserialization.dlt"), 3),
    ]
    .into();
    assert_eq!(f.topics(), expected);
    f.assert_second_apply_writes_nothing("spring suffixes");
    assert_each_topic_reads_back_a_record(f.topics().into_keys());
}

#[test]
fn every_provisioned_topic_accepts_a_record_that_a_consumer_reads_back() {
    let Some(f) = Fixture::applied() else { return };
    assert_each_topic_reads_back_a_record(f.topics().into_keys());
}

/// Produces one record to partition 0 of each topic (rdkafka, as a client application would)
/// and reads it back from its offset with a consumer that is only assigned.
fn assert_each_topic_reads_back_a_record(topics: impl IntoIterator<Item = String>) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    use rdkafka::{Message, Offset, TopicPartitionList};

    let producer: FutureProducer = support::kafka::producer(&[
        ("allow.auto.create.topics", "false"),
        ("message.timeout.ms", "10000"),
    ]);
    for topic in topics {
        let payload = format!("record for {topic}");
        let delivery = block(
            producer.send(
                FutureRecord::to(&topic)
                    .key("sku-1")
                    .payload(&payload)
                    .partition(0),
                Duration::from_secs(10),
            ),
        )
        .unwrap_or_else(|(e, _)| panic!("produce to {topic}: {e}"));
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", support::kafka_bootstrap())
            .set("group.id", unique("dlqctl-test-"))
            .set("enable.auto.commit", "false")
            .set("allow.auto.create.topics", "false")
            .create()
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, delivery.partition, Offset::Offset(delivery.offset))
            .expect("offset");
        consumer.assign(&tpl).expect("assign");
        let deadline = Instant::now() + Duration::from_secs(15);
        let read = loop {
            assert!(Instant::now() < deadline, "{topic}: nothing read back");
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => break m.payload().map(<[u8]>::to_vec),
                Some(Err(e)) => panic!("{topic}: {e}"),
                None => {}
            }
        };
        assert_eq!(read.as_deref(), Some(payload.as_bytes()), "{topic}");
    }
}

#[test]
fn a_stale_saved_plan_is_refused_with_zero_writes() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    f.save_plan();
    // Someone creates the dead-letter topic by hand between plan and apply.
    let dlt = format!("{}-dlt", f.channel);
    create_topics(&[(&dlt, 1, &[])]);
    let a = f.run(&["apply", "plan.json"]);
    a.exits(1);
    a.assert_stderr_contains("refused");
    a.assert_stderr_contains(&format!("topic {dlt} on target `local-kafka` was created"));
    assert_eq!(
        f.topics().into_keys().collect::<Vec<_>>(),
        vec![dlt.clone()],
        "zero writes"
    );

    // Same for a config changed by hand after an update was planned.
    delete_topics(&[&dlt]);
    f.apply(&[]).ok();
    let main = f.main();
    alter(&main, set("retention.ms", "1000"));
    f.save_plan();
    alter(&main, set("retention.ms", "2000"));
    let a = f.run(&["apply", "plan.json"]);
    a.exits(1);
    a.assert_stderr_contains(&format!(
        "topic {main} on target `local-kafka` was modified"
    ));
    let p = f.plan();
    assert!(
        p.stdout.contains("config.retention.ms: 2000 → 604800000"),
        "zero writes\n{}",
        p.stdout
    );
}

#[test]
fn plans_render_in_every_format() {
    let Some(f) = Fixture::applied() else { return };
    // One in-place update and one re-create.
    let main = f.main();
    alter(&main, set("retention.ms", "86400000"));
    delete_topics(&[&format!("{main}-retry-2000")]);
    assert_plan_snapshots!(f, Some((&support::kafka_bootstrap(), "[BOOTSTRAP]")));
    let json: Value =
        serde_json::from_str(&f.run(&["plan", "channel.yaml", "--format", "json"]).stdout)
            .expect("JSON plan");
    assert_eq!(json["summary"]["update"], 1);
    assert_eq!(json["summary"]["create"], 1);
}

/// The inventory example's `deadLetter.discard` is the DLT's `retention.ms` (read back with
/// rdkafka's DescribeConfigs), the plan says why, and after apply it is empty; changing the
/// decision's `after` is an in-place update that names it again.
#[test]
fn a_discard_decision_is_the_dlt_retention_ms() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    f.plan().assert_stdout_contains(
        "discarded on purpose after 30d: stock levels are re-synced from the warehouse system every night",
    );
    f.first_apply("the inventory example's discard decision");
    let dlt = format!("{}-dlt", f.main());
    assert_eq!(
        support::kafka::topic_config(&dlt, "retention.ms").as_deref(),
        Some("2592000000"),
        "30d in ms"
    );
    let longer = f.plan_edited(|t| t.replace("after: 30d", "after: 45d"));
    longer.exits(2);
    longer.assert_stdout_contains("config.retention.ms: 2592000000 → 3888000000");
    longer.assert_stdout_contains("discarded on purpose after 45d");
    let a = f.apply(&[]);
    a.ok();
    f.assert_empty_plan("after the longer discard");
    assert_eq!(
        support::kafka::topic_config(&dlt, "retention.ms").as_deref(),
        Some("3888000000")
    );
}

/// `spec.invalid` on Kafka: the topic `<main>-invalid-dlt`, with the dead-letter topic's
/// partitions and the `invalid.discard` retention (read back with rdkafka's metadata and
/// DescribeConfigs); apply then plan is empty; a record an rdkafka producer wrote there is
/// still there after a second apply.
#[test]
fn an_invalid_message_topic_has_the_dlt_partitions_and_keeps_what_a_producer_wrote() {
    use rdkafka::producer::Producer as _;
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| {
        t.replace(
            "  kafka:\n",
            "  invalid:\n    discard: {after: 14d, reason: the producing team replays corrected events within a week}\n  kafka:\n",
        )
    });
    let (first, _) = f.first_apply("the inventory example with an invalid-message topic");
    let invalid = format!("{}-invalid-dlt", f.main());
    first.assert_stdout_contains(&format!("+ create     topic {invalid}\n"));
    first.assert_stdout_contains(
        "discarded on purpose after 14d: the producing team replays corrected events",
    );
    let topics = f.topics();
    assert_eq!(
        topics.get(&invalid),
        topics.get(&format!("{}-dlt", f.main())),
        "as many partitions as the DLT: {topics:?}"
    );
    assert_eq!(topics.get(&invalid), Some(&3), "{topics:?}");
    assert_eq!(
        support::kafka::topic_config(&invalid, "retention.ms").as_deref(),
        Some("1209600000"),
        "14d in ms"
    );

    let producer: rdkafka::producer::BaseProducer = support::kafka::producer(&[]);
    producer
        .send(
            rdkafka::producer::BaseRecord::to(&invalid)
                .payload("sku-9: negative stock")
                .key("sku-9"),
        )
        .map_err(|(e, _)| e)
        .expect("produce");
    producer.flush(Duration::from_secs(10)).expect("flush");
    f.assert_second_apply_writes_nothing("a record waits in the invalid topic");
    let records = support::kafka::read_from_start(&invalid, 3, 1, Duration::from_secs(1));
    assert_eq!(
        records
            .iter()
            .map(|(_, _, body)| body.as_str())
            .collect::<Vec<_>>(),
        ["sku-9: negative stock"]
    );
}
