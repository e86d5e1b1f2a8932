//! Kafka Connect's dead-letter settings as part of a channel (issue 38), live, on the stack's
//! Apache Kafka and its real Connect worker (`scripts/stack up`: Connect 4.4.0, FileStreamSink).
//!
//! A FileStreamSink connector made by hand through the REST API reads the channel's main
//! topic with a JSON converter (schemas off). `dlqctl apply` sets its error-handling keys
//! (and nothing else: the whole config is compared before and after), then plan is empty.
//! Ten JSON records and five that are not JSON, each with an id as key, are produced with
//! rdkafka: the ten land in the sink's file, the five on the channel's DLT with
//! `__connect.errors.*` headers (read back by id); `status` classes them by Connect's headers
//! (envelope `connect`); `redrive` sends them back to the main topic (read back by id). A hand
//! change of `errors.tolerance` on the worker is a one-key diff in plan, and apply restores it,
//! leaving every other key as it was. A connector the worker does not know is an error naming
//! it, and plan never offers to create it.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use serde_json::Value;

use support::connect;
use support::kafka::{Fixture, headers_text, producer};

/// Records by key: the value and the headers (as text) of the last one read.
type ByKey = BTreeMap<String, (String, BTreeMap<String, String>)>;

/// Every record of `topic` (one partition at a time, from the start) until `want` keys
/// are there or 90 s passed: key → (value, headers), and how many times each key came.
fn read_by_key(
    topic: &str,
    partitions: i32,
    want: &BTreeSet<String>,
) -> (ByKey, BTreeMap<String, usize>) {
    let consumer: BaseConsumer = support::kafka::consumer(&support::unique("connect-reader"), &[]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .expect("tpl");
    }
    consumer.assign(&tpl).expect("assign");
    let mut out = BTreeMap::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                *seen.entry(key.clone()).or_default() += 1;
                out.insert(key, (value, headers_text(&m)));
                quiet_since = Instant::now();
            }
            _ if want.iter().all(|k| out.contains_key(k))
                && quiet_since.elapsed() > Duration::from_secs(2) =>
            {
                break;
            }
            _ => {}
        }
    }
    (out, seen)
}

fn produce(topic: &str, records: &[(String, String)]) {
    let p: ThreadedProducer<DefaultProducerContext> = producer(&[("linger.ms", "5")]);
    for (k, v) in records {
        p.send(BaseRecord::to(topic).key(k).payload(v))
            .map_err(|(e, _)| e)
            .expect("produce");
    }
    p.flush(Duration::from_secs(30)).expect("flush");
}

/// The channel with one connector in `kafka.connectors` and Connect's envelope.
fn with_connector(spec: String, connector: &str) -> String {
    spec.replace(
        "    naming: spring\n",
        &format!("    naming: spring\n    connectors: [{{name: {connector}}}]\n"),
    )
    .replace("  deadLetter:\n", "  deadLetter:\n    envelope: connect\n")
}

#[test]
fn a_file_sink_connectors_bad_records_go_to_the_channels_dlt_and_dlqctl_owns_only_its_error_keys() {
    if !support::kafka::apache_kafka("a Kafka Connect worker runs on Apache Kafka")
        || !connect::up()
    {
        return;
    }
    let f = Fixture::new().expect("kafka is up");
    let main = f.main();
    let dlt = format!("{main}-dlt");
    let name = format!("{main}-sink");
    // The target names the stack's worker.
    let url = connect::url();
    f.edit_targets(|t| {
        t.replace(
            "    bootstrapServers: ",
            &format!("    connectUrl: {url}\n    bootstrapServers: "),
        )
    });
    // The topics first (Connect's sink subscribes to an existing topic at once).
    f.write_example(|t| t);
    f.apply(&[]).ok_with("the channel's topics");

    // A connector the worker does not know: an error naming it, never a create.
    f.write_example(|t| with_connector(t, &name));
    let p = f.plan();
    assert_eq!(p.code, 1, "{}{}", p.stdout, p.stderr);
    assert!(
        p.stderr.contains(&format!("connector `{name}`")) && p.stderr.contains("never creates"),
        "{}",
        p.stderr
    );

    // The operator's connector, made by hand.
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out_file = out_dir.path().join("sink.txt");
    let mut hand: BTreeMap<String, String> = [
        (
            "connector.class",
            "org.apache.kafka.connect.file.FileStreamSinkConnector",
        ),
        ("tasks.max", "1"),
        ("topics", main.as_str()),
        ("file", out_file.to_str().expect("utf-8 path")),
        (
            "key.converter",
            "org.apache.kafka.connect.storage.StringConverter",
        ),
        (
            "value.converter",
            "org.apache.kafka.connect.json.JsonConverter",
        ),
        ("value.converter.schemas.enable", "false"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let (status, body) = connect::put_config(&name, &hand);
    assert_eq!(status, 201, "{body}");
    let _connector = connect::Connector { name: name.clone() };
    hand.insert("name".into(), name.clone());
    let before = connect::config(&name);
    assert_eq!(
        before, hand,
        "the worker keeps the config as sent (plus its name)"
    );

    // apply sets the seven owned keys, derived from the channel, and nothing else.
    f.apply(&[]).ok_with("the connector's error keys");
    let after = connect::config(&name);
    let owned: BTreeMap<&str, &str> = [
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", dlt.as_str()),
        ("errors.deadletterqueue.topic.replication.factor", "1"),
        ("errors.deadletterqueue.context.headers.enable", "true"),
        // inventory: 4 deliveries, 1 s, 2 s and 4 s apart.
        ("errors.retry.timeout", "7000"),
        ("errors.retry.delay.max.ms", "4000"),
        ("errors.log.enable", "true"),
    ]
    .into_iter()
    .collect();
    let mut want = before.clone();
    for (k, v) in &owned {
        want.insert((*k).to_owned(), (*v).to_owned());
    }
    assert_eq!(after, want, "every other key of the config as read");
    f.assert_empty_plan("apply, then plan");
    connect::wait_running(&name);

    // import reads the connector into the channel, its owned keys where they differ.
    let imp = f.run(&[
        "import",
        "--target",
        "local-kafka",
        "--prefix",
        &main,
        "--out",
        "imported",
    ]);
    imp.ok();
    let imported: String = std::fs::read_dir(f.path().join("imported"))
        .expect("imported/")
        .filter_map(|e| e.ok())
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(
        imported.contains("connectors:") && imported.contains(&format!("name: {name}")),
        "{imported}\n{}",
        imp.stderr
    );

    // 10 JSON records and 5 that are not, each with its id as key.
    let good: Vec<(String, String)> = (0..10)
        .map(|i| {
            (
                format!("good-{i}"),
                format!("{{\"id\": \"good-{i}\", \"n\": {i}}}"),
            )
        })
        .collect();
    let bad: Vec<(String, String)> = (0..5)
        .map(|i| (format!("bad-{i}"), format!("not json {{ bad-{i}")))
        .collect();
    let mut all = good.clone();
    all.extend(bad.iter().cloned());
    produce(&main, &all);

    // The five land on the channel's DLT, each with Connect's error headers.
    let bad_keys: BTreeSet<String> = bad.iter().map(|(k, _)| k.clone()).collect();
    let (dead, seen) = read_by_key(&dlt, 3, &bad_keys);
    assert_eq!(
        dead.keys().cloned().collect::<BTreeSet<_>>(),
        bad_keys,
        "exactly the records that are not JSON, by id"
    );
    assert!(seen.values().all(|n| *n == 1), "each once: {seen:?}");
    for (key, (value, headers)) in &dead {
        let sent = bad.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        assert_eq!(Some(value), sent, "{key}: the record as produced");
        assert_eq!(
            headers.get("__connect.errors.topic").map(String::as_str),
            Some(main.as_str()),
            "{key}: {headers:?}"
        );
        assert_eq!(
            headers
                .get("__connect.errors.exception.class.name")
                .map(String::as_str),
            Some("org.apache.kafka.connect.errors.DataException"),
            "{key}: {headers:?}"
        );
        assert_eq!(
            headers.get("__connect.errors.connector.name"),
            Some(&name),
            "{key}"
        );
    }
    // The ten reached the sink's file, each once.
    let deadline = Instant::now() + Duration::from_secs(60);
    let lines = loop {
        let text = std::fs::read_to_string(&out_file).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.len() >= good.len() || Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(lines.len(), good.len(), "{lines:?}");
    for (id, _) in &good {
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains(&format!("{id},")))
                .count(),
            1,
            "{id} in {lines:?}"
        );
    }

    // status classes them by Connect's headers.
    let status = f.run(&[
        "status",
        "channel.yaml",
        "--format",
        "json",
        "--samples",
        "5",
    ]);
    status.ok();
    let doc: Value = status.json("status");
    let dl = &doc["channels"][0]["deadLetter"];
    assert_eq!(dl["depth"], 5, "{}", status.stdout);
    assert_eq!(
        dl["byErrorClass"],
        serde_json::json!({"org.apache.kafka.connect.errors.DataException": 5}),
        "{}",
        status.stdout
    );
    for s in dl["samples"].as_array().expect("samples") {
        assert_eq!(s["source"], main.as_str(), "{s}");
        assert!(
            s["errorMessage"].as_str().is_some_and(|m| !m.is_empty()),
            "{s}"
        );
    }

    // redrive sends them back to the main topic: each bad id twice there now.
    support::redrive::redrive_ok(&f, &["--yes"]);
    let mut every: BTreeSet<String> = bad_keys.clone();
    every.extend(good.iter().map(|(k, _)| k.clone()));
    let (_, on_main) = read_by_key(&main, 3, &every);
    for k in &bad_keys {
        assert_eq!(on_main.get(k), Some(&2), "{k}: {on_main:?}");
    }
    for (k, _) in &good {
        assert_eq!(on_main.get(k), Some(&1), "{k}: {on_main:?}");
    }

    // A hand change of errors.tolerance: a one-key diff; apply restores it, nothing else moves.
    let mut changed = after.clone();
    changed.insert("errors.tolerance".into(), "none".into());
    let (status, body) = connect::put_config(&name, &changed);
    assert_eq!(status, 200, "{body}");
    let p = f.run(&["plan", "channel.yaml", "--format", "json"]);
    let plan: Value = p.json("plan");
    let changes = plan["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{}", p.stdout);
    assert_eq!(changes[0]["resource"]["kind"], "connector", "{}", p.stdout);
    assert_eq!(changes[0]["resource"]["name"], name.as_str());
    assert_eq!(changes[0]["action"], "update");
    assert_eq!(
        changes[0]["fields"],
        serde_json::json!([{"key": "errors.tolerance", "old": "none", "new": "all"}]),
        "{}",
        p.stdout
    );
    f.apply(&[]).ok_with("restore errors.tolerance");
    assert_eq!(
        connect::config(&name),
        after,
        "the whole config as before the hand change"
    );
    f.assert_empty_plan("after the restore");
}
