//! A Defaults document shared by channels of every backend, through the real binary: each
//! backend block in Defaults (`sqs:`, `rabbitmq:`, `kafka:`, `pubsub:`, `azure-servicebus:`) reaches the channels of
//! that backend only, so no channel is failed with `target/backend-mismatch` for a block it
//! never wrote.
//!
//! Regression (issue 32): the list of backend blocks the Defaults merge filters by was written
//! by hand and missed `pubsub`, so a Defaults `spec.pubsub` block reached an SQS channel too.

mod support;

use support::dlqctl_bare as dlqctl;

/// One valid block per backend, as a Defaults document may hold them all at once.
const BLOCKS: [(&str, &str); 5] = [
    ("sqs", "sqs: {visibilityTimeout: 60s}"),
    ("rabbitmq", "rabbitmq: {queueType: quorum}"),
    ("kafka", "kafka: {partitions: 3}"),
    ("pubsub", "pubsub: {ackDeadline: 30s}"),
    ("azure-servicebus", "azure-servicebus: {lockDuration: 30s}"),
];

/// The target of each backend in tests/fixtures/targets.yaml.
fn target_of(backend: &str) -> &'static str {
    match backend {
        "sqs" => "sqs",
        "rabbitmq" => "rabbit",
        "kafka" => "kafka",
        "pubsub" => "pubsub",
        "azure-servicebus" => "azure",
        other => panic!("no fixture target for backend {other}"),
    }
}

fn lint(specs: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("specs.yaml");
    std::fs::write(&file, specs).expect("write specs");
    let out = dlqctl()
        .args(["lint", "--color", "never"])
        .arg(&file)
        .args(["--targets", "tests/fixtures/targets.yaml"])
        .output()
        .expect("dlqctl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// A channel that lints clean on `backend`'s fixture target: SQS names have no dots, the
/// others are named inside the targets' ownership prefixes (`app.`).
fn channel(name: &str, backend: &str) -> String {
    let name = if backend == "sqs" {
        name.to_owned()
    } else {
        format!("app.{name}")
    };
    format!(
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {name}}}\nspec:\n  target: {}\n  lint: {{allow: [alarms/missing]}}\n",
        target_of(backend)
    )
}

/// What every channel shares, whatever its backend: valid on all five (the dead-letter queue
/// is named, since Service Bus's built-in subqueue takes no retention; its backoff is a
/// warning there, which lint exits 0 on).
const SHARED: &str = "  retention: 1d\n  retry: {maxAttempts: 5, backoff: {initial: 1s}}\n  deadLetter: {name: \"{channel}-dlq\", discard: {after: 4d, reason: a test fixture}}\n";

#[test]
fn the_blocks_here_are_one_per_backend() {
    assert_eq!(
        BLOCKS.map(|(backend, _)| backend),
        dlqctl::spec::model::Backend::ALL.map(|b| b.as_str()),
        "give every backend a block here (and a target in tests/fixtures/targets.yaml)"
    );
}

#[test]
fn a_defaults_pubsub_block_does_not_reach_an_sqs_channel() {
    let specs = format!(
        "apiVersion: dlqctl/v1\nkind: Defaults\nspec:\n{SHARED}  pubsub: {{ackDeadline: 30s}}\n---\n{}",
        channel("payments", "sqs")
    );
    let (code, out) = lint(&specs);
    assert!(!out.contains("target/backend-mismatch"), "{out}");
    assert_eq!(code, 0, "{out}");
}

#[test]
fn defaults_with_every_backend_block_serve_a_channel_of_every_backend() {
    let defaults = BLOCKS
        .iter()
        .map(|(_, block)| format!("  {block}\n"))
        .collect::<String>();
    let channels = BLOCKS
        .iter()
        .map(|(backend, _)| channel(&format!("on-{backend}"), backend))
        .collect::<Vec<_>>()
        .join("---\n");
    let specs =
        format!("apiVersion: dlqctl/v1\nkind: Defaults\nspec:\n{SHARED}{defaults}---\n{channels}");
    let (code, out) = lint(&specs);
    assert!(!out.contains("target/backend-mismatch"), "{out}");
    assert_eq!(code, 0, "{out}");
}
