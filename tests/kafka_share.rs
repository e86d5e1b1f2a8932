//! Share-group dead-letter queues on Apache Kafka 4.4 (KIP-1191, issue 38): `kafka.shareGroups`
//! sets each group's `errors.deadletterqueue.topic.name` (the channel's DLT, `dlq.`-prefixed as
//! the broker requires), `errors.deadletterqueue.copy.record.enable` and
//! `share.delivery.count.limit` (from `retry.maxAttempts`), and the DLT's
//! `errors.deadletterqueue.group.enable`.
//!
//! The third-party client is kafka-clients' own `KafkaShareConsumer` (the jars the stack's
//! broker runs on), in tests/kafka-share/ShareReject.java, compiled once with `javac` into
//! `$DLQCTL_CACHE/kafka-share-<sha256 of the source>/`. Two share groups read the same main
//! topic: one REJECTs the bad records, the other RELEASEs them until the delivery limit; the
//! broker writes each bad record once per group to the DLT with its `__dlq.errors.*` headers,
//! every one is read back by id with rdkafka, and `dlqctl status` classes them. Apply, then
//! plan is empty; a hand change of one group key is a one-key diff that apply restores; prune
//! never names a group.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use dlqctl::backend::kafka::ffi::{self, ConfigOp};
use sha2::{Digest, Sha256};
use support::kafka::Fixture;

fn cache() -> PathBuf {
    std::env::var_os("DLQCTL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(support::var("HOME", "/root")).join(".cache/dlqctl"))
}

/// The jars the stack's Apache Kafka runs on (kafka-clients 4.4.0 among them).
fn kafka_libs() -> PathBuf {
    cache().join("kafka-4.4.0/libs")
}

/// The compiled share consumer's class folder, built at most once per change of its source.
fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let source = support::root().join("tests/kafka-share/ShareReject.java");
        let text = std::fs::read(&source).expect("ShareReject.java");
        let sum = format!("{:x}", Sha256::digest(&text));
        let dir = cache().join(format!("kafka-share-{}", &sum[..16]));
        std::fs::create_dir_all(&dir).expect("cache dir");
        let lock = std::fs::File::create(dir.join("build.lock")).expect("lock file");
        lock.lock().expect("lock");
        if !dir.join("ShareReject.class").exists() {
            let out = Command::new("javac")
                .arg("-cp")
                .arg(kafka_libs().join("kafka-clients-4.4.0.jar"))
                .arg("-d")
                .arg(&dir)
                .arg(&source)
                .output()
                .expect("javac runs");
            assert!(
                out.status.success(),
                "javac ShareReject.java:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        dir
    })
}

/// Apache Kafka (share groups are not in tansu), javac, and the broker's jars.
fn ready() -> bool {
    let javac = Command::new("javac")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    support::kafka::apache_kafka("share groups (KIP-932, KIP-1191)")
        && support::require(
            "javac and Apache Kafka's jars (share consumer)",
            javac && kafka_libs().join("kafka-clients-4.4.0.jar").exists(),
        )
}

/// Runs the share consumer of `group` on `topic` (`reject` or `release`) until it has
/// accepted `good` and given up `bad` records (bounded by 60 s): its output.
fn share_consumer(topic: &str, group: &str, mode: &str, good: usize, bad: usize) -> Command {
    let mut cp = std::ffi::OsString::from(classes());
    cp.push(":");
    cp.push(kafka_libs().join("*"));
    let mut c = Command::new("java");
    c.args(["-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp"])
        .arg(cp)
        .arg("ShareReject")
        .args([
            support::kafka_bootstrap().as_str(),
            topic,
            group,
            mode,
            &good.to_string(),
            &bad.to_string(),
            "3",
            "60",
        ]);
    c
}

fn group_ops(group: &str, ops: Vec<ConfigOp>) {
    let admin = support::kafka::admin();
    let answers = support::block(ffi::incremental_alter_group_configs(
        &admin,
        &[(group.to_owned(), ops)],
        Duration::from_secs(15),
    ))
    .expect("IncrementalAlterConfigs (group)");
    for (g, a) in answers {
        a.unwrap_or_else(|e| panic!("group {g}: {e}"));
    }
}

/// A group's configs as the broker reports them (the third party's read).
fn group_configs(group: &str) -> BTreeMap<String, String> {
    let admin = support::kafka::admin();
    let answers = support::block(ffi::describe_group_configs(
        &admin,
        &[group.to_owned()],
        Duration::from_secs(15),
    ))
    .expect("DescribeConfigs (group)");
    let (_, entries) = answers.into_iter().next().expect("one group");
    entries
        .expect("group configs")
        .into_iter()
        .filter_map(|e| Some((e.name, e.value?)))
        .collect()
}

fn spec(channel: &str) -> String {
    format!(
        r#"apiVersion: dlqctl/v1
kind: Channel
metadata: {{name: {channel}}}
spec:
  target: local-kafka
  retry: {{maxAttempts: 3}}
  deadLetter:
    name: "dlq.{{channel}}"
    # The broker's own context headers (KIP-1191).
    envelope:
      from: none
      errorClass: {{header: __dlq.errors.message}}
      attempts: {{header: __dlq.errors.delivery.count}}
      source: {{header: __dlq.errors.topic}}
  kafka:
    shareGroups:
      - name: {channel}-rejects
      - name: {channel}-releases
"#
    )
}

/// Deletes the DLT (outside the fixture's prefix) and the groups' configs on drop.
struct Cleanup {
    dlt: String,
    groups: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        support::kafka::delete_topics(&[self.dlt.as_str()]);
        for g in &self.groups {
            let keys = [
                "errors.deadletterqueue.topic.name",
                "errors.deadletterqueue.copy.record.enable",
                "share.delivery.count.limit",
                "share.auto.offset.reset",
            ];
            let ops = keys
                .iter()
                .map(|k| ConfigOp::Delete {
                    key: (*k).to_owned(),
                })
                .collect();
            let admin = support::kafka::admin();
            let _ = support::block(ffi::incremental_alter_group_configs(
                &admin,
                &[(g.clone(), ops)],
                Duration::from_secs(15),
            ));
        }
    }
}

#[test]
fn rejected_and_exhausted_records_are_dead_lettered_by_the_broker_and_status_reads_them() {
    if !ready() {
        return;
    }
    let Some(f) = Fixture::new() else { return };
    let main = f.main();
    let dlt = format!("dlq.{main}");
    let (rejects, releases) = (format!("{main}-rejects"), format!("{main}-releases"));
    let _cleanup = Cleanup {
        dlt: dlt.clone(),
        groups: vec![rejects.clone(), releases.clone()],
    };
    f.edit_targets(|t| {
        t.replace(
            r#"prefixes: ["inventory."]"#,
            r#"prefixes: ["inventory.", "dlq.inventory."]"#,
        )
    });
    std::fs::write(f.path().join("channel.yaml"), spec(&main)).expect("spec");

    // Apply, then plan is empty; the broker reports what dlqctl set.
    let (plan, _) = f.first_apply("share groups");
    plan.assert_stdout_contains("errors.deadletterqueue.topic.name");
    for g in [&rejects, &releases] {
        let c = group_configs(g);
        assert_eq!(c["errors.deadletterqueue.topic.name"], dlt, "{g}");
        assert_eq!(
            c["errors.deadletterqueue.copy.record.enable"], "true",
            "{g}"
        );
        assert_eq!(c["share.delivery.count.limit"], "3", "{g}");
    }
    assert_eq!(
        support::kafka::topic_config(&dlt, "errors.deadletterqueue.group.enable").as_deref(),
        Some("true")
    );

    // A hand change of one key is a one-key diff; apply restores it; other keys are kept.
    group_ops(
        &rejects,
        vec![
            ConfigOp::Set {
                key: "errors.deadletterqueue.topic.name".into(),
                value: "dlq.elsewhere".into(),
            },
            // Not owned by dlqctl: the consumers start from the first record.
            ConfigOp::Set {
                key: "share.auto.offset.reset".into(),
                value: "earliest".into(),
            },
        ],
    );
    group_ops(
        &releases,
        vec![ConfigOp::Set {
            key: "share.auto.offset.reset".into(),
            value: "earliest".into(),
        }],
    );
    let drift = f.run(&["plan", "channel.yaml", "--format", "json"]);
    assert!(
        drift.code == 0 || drift.code == 2,
        "{}{}",
        drift.stdout,
        drift.stderr
    );
    let doc: serde_json::Value = serde_json::from_str(&drift.stdout).expect("plan JSON");
    assert_eq!(doc["summary"]["update"], 1, "{}", drift.stdout);
    let changes = doc["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{}", drift.stdout);
    assert_eq!(changes[0]["resource"]["kind"], "share-group");
    assert_eq!(changes[0]["resource"]["name"], rejects.as_str());
    let fields = changes[0]["fields"].as_array().expect("fields");
    assert_eq!(fields.len(), 1, "{}", drift.stdout);
    assert_eq!(fields[0]["key"], "config.errors.deadletterqueue.topic.name");
    assert_eq!(fields[0]["old"], "dlq.elsewhere");
    assert_eq!(fields[0]["new"], dlt.as_str());
    f.apply(&[]).ok_with("restore the group's DLT");
    f.assert_empty_plan("after the restore");
    assert_eq!(
        group_configs(&rejects)["share.auto.offset.reset"],
        "earliest",
        "a key dlqctl does not own is kept"
    );
    // Prune never names a group.
    let (pruned, out) = f.prune_plan();
    assert!(
        pruned
            .iter()
            .all(|n| !n.ends_with("-rejects") && !n.ends_with("-releases")),
        "{}",
        out.stdout
    );

    // Six records by id: the even ones are good, the odd ones bad.
    {
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
        let p: BaseProducer = support::kafka::producer(&[]);
        for i in 0..6 {
            let (key, value) = (
                format!("id-{i}"),
                format!("{}-{i}", if i % 2 == 0 { "good" } else { "bad" }),
            );
            p.send(BaseRecord::to(&main).key(&key).payload(&value))
                .expect("send");
        }
        p.flush(Duration::from_secs(15)).expect("flush");
    }
    let mut a = share_consumer(&main, &rejects, "reject", 3, 3)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("java");
    let b = share_consumer(&main, &releases, "release", 3, 3)
        .output()
        .expect("java");
    let a_status = a.wait().expect("wait");
    let mut a_out = String::new();
    std::io::Read::read_to_string(a.stdout.as_mut().expect("stdout"), &mut a_out).expect("read");
    assert!(a_status.success(), "rejecting consumer:\n{a_out}");
    let b_out = String::from_utf8_lossy(&b.stdout);
    assert!(
        b.status.success(),
        "releasing consumer:\n{b_out}{}",
        String::from_utf8_lossy(&b.stderr)
    );
    for id in ["id-1", "id-3", "id-5"] {
        assert!(a_out.contains(&format!("reject {id} 1")), "{a_out}");
        for n in 1..=3 {
            assert!(b_out.contains(&format!("release {id} {n}")), "{b_out}");
        }
    }

    // Every bad record, once per group, on the DLT with its context headers and its record.
    let tail = support::kafka::Tail::new(&dlt, &format!("{main}-reader"));
    let got = tail.take(6);
    assert_eq!(got.len(), 6, "{got:?}");
    let mut by: BTreeMap<(String, String), (String, BTreeMap<String, String>)> = BTreeMap::new();
    for (body, headers) in got {
        let body = String::from_utf8(body).expect("text body");
        let group = headers["__dlq.errors.group"].clone();
        let id = format!("id-{}", body.trim_start_matches("bad-"));
        assert!(
            by.insert((group, id), (body, headers)).is_none(),
            "a duplicate"
        );
    }
    for g in [&rejects, &releases] {
        for (i, id) in [(1, "id-1"), (3, "id-3"), (5, "id-5")] {
            let (body, h) = &by[&(g.clone(), id.to_owned())];
            assert_eq!(
                body,
                &format!("bad-{i}"),
                "copy.record.enable: the record itself"
            );
            assert_eq!(h["__dlq.errors.topic"], main);
            assert_eq!(h["__dlq.errors.offset"], i.to_string());
            let (message, count) = if g == &rejects {
                ("Offset rejected by client.", "1")
            } else {
                ("Offset delivery count exceeded the threshold.", "3")
            };
            assert_eq!(h["__dlq.errors.message"], message, "{g} {id}");
            assert_eq!(h["__dlq.errors.delivery.count"], count, "{g} {id}");
        }
    }

    // `dlqctl status` reads them: six dead letters, classed by the broker's reason.
    let out = f.run(&[
        "status",
        "channel.yaml",
        "--format",
        "json",
        "--scan",
        "100",
    ]);
    let doc = out.json("status");
    let dl = &doc["channels"][0]["deadLetter"];
    assert_eq!(dl["depth"], 6, "{}", out.stdout);
    let by_class = dl["byErrorClass"].as_object().expect("byErrorClass");
    assert_eq!(
        by_class.get("Offset rejected by client."),
        Some(&serde_json::json!(3)),
        "{}",
        out.stdout
    );
    assert_eq!(
        by_class.get("Offset delivery count exceeded the threshold."),
        Some(&serde_json::json!(3)),
        "{}",
        out.stdout
    );
}
