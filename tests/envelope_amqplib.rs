//! Issue 34 on RabbitMQ: dead letters read as their producer wrote them. The producer is the
//! project's source material's consumer, unmodified (tests/consumers/amqplib-consumer.js:
//! Node.js and amqplib; poison at 0 retries, transient after 3 retries of 5 s, its own
//! `x-retry-count`, `x-failure-reason`, `x-original-queue`, no timestamp and no class). The
//! spec declares that envelope and two class rules on the error message; `dlqctl status`
//! must give both classes, the attempts and the source, say the age is unknown (nothing
//! carries a time), and consume nothing; `plan` says why the age is blind.

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::rabbit::{self, Fixture};

/// The envelope and class rules of the source material's consumer, in the spec.
const ENVELOPE: &str = r#"    name: "{channel}.dlq"
    envelope:
      from: none
      errorMessage: {header: x-failure-reason}
      attempts: {header: x-retry-count}
      source: {header: x-original-queue}
    classes:
      - {name: poison, errorMessage: ["*is not valid JSON*", "Unexpected token*"]}
      - {name: transient_exhausted, errorMessage: "*unavailable*"}
"#;

fn with_envelope(spec: String) -> String {
    let out = spec.replace("    name: \"{channel}.dlq\"\n", ENVELOPE);
    assert_ne!(out, spec, "the example's deadLetter block moved");
    out
}

/// amqplib's node_modules (scripts/stack installs it), or a loud skip (a failure under CI).
fn amqplib() -> Option<PathBuf> {
    let dir = std::env::var_os("DLQCTL_AMQPLIB_NODE_PATH").map(PathBuf::from);
    let found = dir
        .as_ref()
        .is_some_and(|d| d.join("amqplib/package.json").is_file())
        && Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    support::require(
        "node with amqplib (DLQCTL_AMQPLIB_NODE_PATH, from `scripts/stack env`)",
        found,
    )
    .then(|| dir.expect("checked"))
}

/// The consumer, running until dropped.
struct Consumer(Child);

impl Consumer {
    fn start(node_path: &PathBuf, queue: &str, dlq: &str) -> Self {
        let mut child = Command::new("node")
            .arg(support::root().join("tests/consumers/amqplib-consumer.js"))
            .env("NODE_PATH", node_path)
            .env("AMQP_URL", support::amqp_url())
            .env("QUEUE", queue)
            .env("DLQ", dlq)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node starts");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "ready", "the consumer did not start");
        Consumer(child)
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_source_materials_amqplib_consumer_is_read_by_its_declared_envelope_and_classes() {
    let Some(node_path) = amqplib() else { return };
    let Some(f) = Fixture::applied_with(with_envelope) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let consumer = Consumer::start(&node_path, &main, &dlq);
    rabbit::fill(&main, 2, |i| {
        let body = if i == 0 {
            b"not json".to_vec()
        } else {
            br#"{"order": 42}"#.to_vec()
        };
        let props = lapin::BasicProperties::default()
            .with_message_id(format!("order-{i}").into())
            .with_delivery_mode(2);
        (body, props)
    });
    // Poison at once, the transient one after 3 retries of 5 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    while rabbit::count(&dlq) < 2 {
        assert!(
            Instant::now() < deadline,
            "the consumer dead-lettered {} of 2 messages in 60 s",
            rabbit::count(&dlq)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(consumer);

    let out = f.run(&["status", "channel.yaml", "--format", "json"]);
    out.ok();
    let doc = out.json("status");
    let dl = &doc["channels"][0]["deadLetter"];
    assert_eq!(
        dl["byErrorClass"],
        serde_json::json!({"poison": 1, "transient_exhausted": 1}),
        "{dl:#}"
    );
    let samples = dl["samples"].as_array().expect("samples");
    let by_id = |id: &str| -> &Value {
        samples
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("sample {id} in {dl:#}"))
    };
    let poison = by_id("order-0");
    assert_eq!(poison["errorClass"], "poison");
    assert_eq!(poison["attempts"], 0);
    assert_eq!(poison["source"], main.as_str());
    assert!(
        poison["errorMessage"]
            .as_str()
            .is_some_and(|m| m.contains("JSON")),
        "{poison:#}"
    );
    let transient = by_id("order-1");
    assert_eq!(transient["errorClass"], "transient_exhausted");
    assert_eq!(transient["errorMessage"], "downstream unavailable");
    assert_eq!(transient["attempts"], 3);
    assert_eq!(transient["source"], main.as_str());
    // Nothing carries a time: the age is said to be unknown, not left out.
    assert_eq!(dl["oldestAgeSeconds"], Value::Null, "{dl:#}");
    assert_eq!(dl["oldestAgeBasis"], "unknown", "{dl:#}");
    // Nothing consumed.
    assert_eq!(rabbit::count(&dlq), 2);

    let plan = f.run(&["plan", "channel.yaml"]);
    plan.ok();
    assert!(
        plan.stdout.contains("the envelope names no time"),
        "plan notes the blind age:\n{}",
        plan.stdout
    );
    // A class the channel does not declare is refused, and nothing moves.
    let out = f.run(&[
        "redrive",
        &f.channel,
        "channel.yaml",
        "--class",
        "com.acme.Nope",
        "--dry-run",
    ]);
    let err = &out.stderr;
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        err.contains("declares the classes `poison`, `transient_exhausted`"),
        "{err}"
    );
    // The class selects exactly its message.
    let report = support::redrive::redrive_ok(
        &f,
        &[
            "--class",
            "transient_exhausted",
            "--yes",
            "--reason",
            "downstream back",
        ],
    );
    assert_eq!(
        rabbit::count(&dlq),
        1,
        "the poison message stays: {report:#}"
    );
    assert_eq!(
        rabbit::count(&main),
        1,
        "the transient one is back: {report:#}"
    );
}
