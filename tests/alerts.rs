//! `dlqctl alerts` through the real binary: snapshots of both formats, `--check`'s exit codes,
//! and Prometheus's own tools on the output: `promtool check rules` (the file loads) and
//! `promtool test rules` with `tests/fixtures/alerts/rules.test.yaml` (each alert fires on
//! synthetic series above its threshold, and not below or after the DLQ is emptied).
//! Two end-to-end tests load the rules in a real Prometheus that scrapes `dlqctl exporter` on
//! the local stack: dead letters raise and clear the depth and age alerts, and real traffic
//! with failures raises and clears the dead-letter rate alert.
//!
//! promtool comes from `$DLQCTL_PROMTOOL` (which `scripts/stack env` exports), else `PATH`.
//! Under `CI=true` or `DLQCTL_LIVE_REQUIRED=1` a missing promtool fails these tests, as a
//! missing server fails the live ones; otherwise they skip loudly.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{dlqctl, output, root};

const FIXTURES: &str = "tests/fixtures/alerts";

fn alerts(args: &[&str]) -> support::Output {
    output(dlqctl().arg("alerts").args(args).args(["--color", "never"]))
}

/// The promtool binary, or `None` (skip) when it is missing and live tests may skip.
fn promtool() -> Option<PathBuf> {
    support::tool("DLQCTL_PROMTOOL", "promtool", "--version")
}

fn run_promtool(promtool: &Path, dir: &Path, args: &[&str]) -> support::Output {
    output(Command::new(promtool).args(args).current_dir(dir))
}

#[test]
fn both_formats_match_their_snapshots() {
    let r = alerts(&[FIXTURES]);
    r.ok();
    insta::assert_snapshot!("alerts-prometheus", r.stdout);
    insta::assert_snapshot!("alerts-report", r.stderr);
    let op = alerts(&[FIXTURES, "--format", "prometheus-operator"]);
    op.ok();
    insta::assert_snapshot!("alerts-prometheus-operator", op.stdout);
    // The manifest holds the same groups, indented under `spec:`.
    let groups = r
        .stdout
        .split_once("groups:")
        .map(|(_, g)| g)
        .expect("groups");
    let indented: String = groups
        .lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("  {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        op.stdout.contains(indented.trim_start()),
        "the operator manifest wraps the same groups"
    );
}

#[test]
fn the_output_is_deterministic_whatever_the_order_of_the_specs() {
    let dir = tempfile::tempdir().expect("tempdir");
    for f in ["dlqctl.yaml", "defaults.yaml"] {
        std::fs::copy(root().join(FIXTURES).join(f), dir.path().join(f)).expect("copy");
    }
    // The same channels, one file each, in reverse order.
    let text = std::fs::read_to_string(root().join(FIXTURES).join("channels.yaml")).expect("read");
    for (i, doc) in text
        .split("\n---\n")
        .collect::<Vec<_>>()
        .iter()
        .rev()
        .enumerate()
    {
        std::fs::write(dir.path().join(format!("{i}.yaml")), doc).expect("write");
    }
    let a = alerts(&[FIXTURES]);
    let b = alerts(&[dir.path().to_str().expect("utf-8")]);
    b.ok();
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn check_exits_0_when_current_and_2_with_a_diff_when_stale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rules.yaml");
    let file_s = file.to_str().expect("utf-8");
    let missing = alerts(&[FIXTURES, "--check", file_s]);
    assert_eq!(
        missing.code, 2,
        "a missing file is stale\n{}",
        missing.stderr
    );
    missing.assert_stderr_contains("does not exist");

    let w = alerts(&[FIXTURES, "--out", file_s]);
    w.ok();
    assert!(w.stdout.is_empty(), "--out writes nothing to stdout");
    let ok = alerts(&[FIXTURES, "--check", file_s]);
    ok.ok();
    ok.assert_stderr_contains("is up to date");

    // Someone edits a threshold in the committed file: --check says so, with the line.
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(&file, text.replacen("> 1800", "> 900", 1)).expect("write");
    let stale = alerts(&[FIXTURES, "--check", file_s]);
    stale.exits(2);
    stale.assert_stdout_contains("-        expr: \"dlq_oldest_message_age_seconds{target=\\\"rabbit\\\",channel=\\\"orders.created\\\",role=\\\"dead-letter\\\"} > 900\"");
    stale.assert_stdout_contains("+        expr: \"dlq_oldest_message_age_seconds{target=\\\"rabbit\\\",channel=\\\"orders.created\\\",role=\\\"dead-letter\\\"} > 1800\"");
    stale.assert_stderr_contains("is stale");
    // The other format is not the committed file either.
    let other = alerts(&[
        FIXTURES,
        "--check",
        file_s,
        "--format",
        "prometheus-operator",
    ]);
    assert_eq!(other.code, 2);
}

#[test]
fn out_never_overwrites_a_file_it_did_not_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, "groups: []  # written by hand\n").expect("write");
    let r = alerts(&[FIXTURES, "--out", file.to_str().expect("utf-8")]);
    r.exits(1);
    r.assert_stderr_contains("not overwriting");
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "groups: []  # written by hand\n"
    );
}

#[test]
fn specs_with_lint_errors_write_no_rules() {
    let r = alerts(&[
        "tests/fixtures/invalid/rabbitmq-alarms-tier-order.yaml",
        "--targets",
        "tests/fixtures/targets.yaml",
    ]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    r.assert_stderr_contains("[alarms/tier-order]");
}

#[test]
fn promtool_loads_the_rules_and_their_unit_tests_pass() {
    let Some(promtool) = promtool() else { return };
    // The exporter's metrics, and the brokers' own (`alerts.source: native`).
    // Each: depth and age tiers, an exporter-down rule and an age-unknown rule per age alarm.
    for (fixtures, rules_found) in [(FIXTURES, 12), ("tests/fixtures/alerts-native", 8)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let rules = dir.path().join("rules.yaml");
        let w = alerts(&[fixtures, "--out", rules.to_str().expect("utf-8")]);
        w.ok_with(fixtures);
        let check = run_promtool(&promtool, dir.path(), &["check", "rules", "rules.yaml"]);
        check.ok_with(fixtures);
        check.assert_stdout_contains(&format!("SUCCESS: {rules_found} rules found"));

        std::fs::copy(
            root().join(fixtures).join("rules.test.yaml"),
            dir.path().join("rules.test.yaml"),
        )
        .expect("copy the unit tests");
        let test = run_promtool(&promtool, dir.path(), &["test", "rules", "rules.test.yaml"]);
        test.ok_with(fixtures);
        test.assert_stdout_contains("SUCCESS");

        // The unit tests can fail: with the RabbitMQ channel's warning thresholds moved up,
        // the 15-minute cases break.
        let text = std::fs::read_to_string(&rules).expect("read");
        std::fs::write(
            &rules,
            text.replace("> 0\"", "> 50\"").replace("> 1800", "> 3500"),
        )
        .expect("write");
        let broken = run_promtool(&promtool, dir.path(), &["test", "rules", "rules.test.yaml"]);
        assert_eq!(
            broken.code, 1,
            "{fixtures}: {}{}",
            broken.stdout, broken.stderr
        );
        // The rate's cases can fail too: with every rate threshold at 2%, the 1% series
        // fires nothing.
        if text.contains("DeadLetterRateHigh") {
            std::fs::write(
                &rules,
                text.replace("> 0.001\"", "> 0.02\"")
                    .replace("> 0.005\"", "> 0.02\""),
            )
            .expect("write");
            let rate = run_promtool(&promtool, dir.path(), &["test", "rules", "rules.test.yaml"]);
            assert_eq!(rate.code, 1, "{fixtures}: {}{}", rate.stdout, rate.stderr);
            assert!(
                rate.stderr.contains("DeadLetterRateHigh")
                    || rate.stdout.contains("DeadLetterRateHigh"),
                "{}{}",
                rate.stdout,
                rate.stderr
            );
        }
    }
}

/// Issue 34: every destination of a channel's dead letters is alerted on its own series: the
/// invalid-message queue by `invalid.alarms`, an exception-based DLT by the channel's alarms
/// with its own `queue`; the DLQ rules select `role="dead-letter"`, so they never fire on the
/// others' series (promtool's unit tests say so). Fails before issue 34: no rule for either.
#[test]
fn the_invalid_queue_and_exception_dlts_get_rules_of_their_own() {
    const ROLES: &str = "tests/fixtures/alerts-roles";
    let r = alerts(&[ROLES]);
    r.ok();
    insta::assert_snapshot!("alerts-roles", r.stdout);
    let Some(promtool) = promtool() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules.yaml");
    alerts(&[ROLES, "--out", rules.to_str().expect("utf-8")]).ok();
    let check = run_promtool(&promtool, dir.path(), &["check", "rules", "rules.yaml"]);
    check.ok();
    check.assert_stdout_contains("SUCCESS: 9 rules found");
    std::fs::copy(
        root().join(ROLES).join("rules.test.yaml"),
        dir.path().join("rules.test.yaml"),
    )
    .expect("copy the unit tests");
    let test = run_promtool(&promtool, dir.path(), &["test", "rules", "rules.test.yaml"]);
    test.ok();
    test.assert_stdout_contains("SUCCESS");
}

#[test]
fn native_sources_read_the_brokers_own_metrics() {
    let r = alerts(&["tests/fixtures/alerts-native"]);
    r.ok();
    insta::assert_snapshot!("alerts-native", r.stdout);
    // A group that reads no `dlqctl exporter` metric has no exporter-down rule.
    let kafka = r
        .stdout
        .split("- name: \"dlqctl-kafka\"")
        .nth(1)
        .and_then(|g| g.split("- name: ").next())
        .expect("the kafka group");
    assert!(!kafka.contains("DeadLetterExporterDown"), "{kafka}");
}

#[test]
fn the_examples_rules_load_in_promtool() {
    let Some(promtool) = promtool() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.yaml");
    let w = alerts(&["examples", "--out", path.to_str().expect("utf-8")]);
    w.ok();
    w.assert_stderr_contains("3 SQS channels left out");
    let check = run_promtool(&promtool, dir.path(), &["check", "rules", "rules.yaml"]);
    check.ok();
}

/// The Prometheus server binary (Debian's `prometheus` package, which `scripts/stack up`
/// installs with promtool), from `$DLQCTL_PROMETHEUS`, else `PATH`.
fn prometheus() -> Option<PathBuf> {
    support::tool("DLQCTL_PROMETHEUS", "prometheus", "--version")
}

/// A free port on 127.0.0.1 (bound, then released for the child to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Child processes this test started (the exporter, Prometheus), killed by their handle and
/// the test's queues and topics deleted, whatever way the test ends.
struct Stack {
    children: Vec<std::process::Child>,
    stem: String,
}

impl Drop for Stack {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        support::rabbit::delete_prefixed(&self.stem);
        support::kafka::delete_prefixed(&self.stem);
    }
}

/// The two local targets of the live tests, owning only names under `{stem}.`; `rabbit_extra`
/// goes under the RabbitMQ target (e.g. `alerts: {source: native}`).
fn local_targets(stem: &str, rabbit_extra: &str) -> String {
    format!(
        "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  local-rabbitmq:\n    backend: rabbitmq\n    url: {}\n    vhost: /\n    usernameEnv: DLQCTL_RABBITMQ_USER\n    passwordEnv: DLQCTL_RABBITMQ_PASSWORD\n{rabbit_extra}    ownership: {{prefixes: [\"{stem}.\"]}}\n  local-kafka:\n    backend: kafka\n    bootstrapServers: {}\n    ownership: {{prefixes: [\"{stem}.\"]}}\n",
        support::rabbitmq_url(),
        support::kafka_bootstrap()
    )
}

impl Stack {
    /// `dlqctl exporter . --interval 1s <args> --listen` in `d` (its log in `exporter.log`);
    /// the port it listens on.
    fn exporter(&mut self, d: &Path, args: &[&str]) -> u16 {
        let port = free_port();
        self.children.push(
            support::dlqctl_local(d)
                .args(["exporter", ".", "--interval", "1s"])
                .args(args)
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(d.join("exporter.log")).expect("log"))
                .spawn()
                .expect("dlqctl exporter starts"),
        );
        port
    }

    /// A Prometheus in `d` (1 s scrape and evaluation, the rules in `rules.yaml`) scraping the
    /// exporter on `exporter_port` and whatever `more_jobs` adds to `scrape_configs`; its port.
    fn prometheus(
        &mut self,
        prometheus: &Path,
        d: &Path,
        exporter_port: u16,
        more_jobs: &str,
    ) -> u16 {
        let port = free_port();
        std::fs::write(
            d.join("prometheus.yml"),
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: [rules.yaml]\nscrape_configs:\n  - job_name: dlqctl\n    static_configs: [{{targets: [\"127.0.0.1:{exporter_port}\"]}}]\n{more_jobs}"
            ),
        )
        .expect("prometheus.yml");
        self.children.push(
            Command::new(prometheus)
                .current_dir(d)
                .args(["--config.file=prometheus.yml", "--storage.tsdb.path=data"])
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("prometheus starts"),
        );
        port
    }
}

/// `GET` on Prometheus's HTTP API; the JSON answer's `data`.
fn prom_api(port: u16, path: &str) -> Option<serde_json::Value> {
    let url = format!("http://127.0.0.1:{port}{path}");
    let answer = support::block(async move {
        let r = reqwest::get(url).await.ok()?;
        r.json::<serde_json::Value>().await.ok()
    })?;
    answer.get("data").cloned()
}

/// The active alerts as `(alertname, channel or target, state)`, sorted.
fn active_alerts(port: u16) -> Vec<(String, String, String)> {
    let Some(data) = prom_api(port, "/api/v1/alerts") else {
        return Vec::new();
    };
    let mut out: Vec<(String, String, String)> = data["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let l = &a["labels"];
            let who = l["channel"].as_str().or(l["target"].as_str()).unwrap_or("");
            (
                l["alertname"].as_str().unwrap_or("").to_owned(),
                who.to_owned(),
                a["state"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Polls until `done` holds for the active alerts (60 s at most); returns every distinct
/// state seen on the way, in order.
fn poll_alerts(
    port: u16,
    what: &str,
    done: impl Fn(&[(String, String, String)]) -> bool,
) -> Vec<Vec<(String, String, String)>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    poll_alerts_until(port, what, deadline, done)
}

/// [`poll_alerts`] until `deadline`.
fn poll_alerts_until(
    port: u16,
    what: &str,
    deadline: std::time::Instant,
    done: impl Fn(&[(String, String, String)]) -> bool,
) -> Vec<Vec<(String, String, String)>> {
    let start = std::time::Instant::now();
    let mut seen: Vec<Vec<(String, String, String)>> = Vec::new();
    loop {
        let now = active_alerts(port);
        if seen.last() != Some(&now) {
            seen.push(now.clone());
        }
        if done(&now) {
            return seen;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {:.0?}; seen: {seen:#?}",
            deadline - start
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// Commits `group`'s offset of partition 0 of `topic` at its end, as a consumer that has read
/// everything would.
fn commit_to_end(group: &str, topic: &str) {
    use rdkafka::consumer::Consumer;
    let (_, high) = support::kafka::consumer(group, &[])
        .fetch_watermarks(topic, 0, std::time::Duration::from_secs(10))
        .expect("watermarks");
    support::kafka::commit(topic, group, 0, high);
}

/// The end-to-end check on the local stack: the rules `dlqctl alerts` writes, loaded
/// in a real Prometheus (loopback, 1 s scrape and evaluation) that scrapes `dlqctl exporter`.
/// A dead letter in a RabbitMQ DLQ and one in a Kafka DLT make their depth and age alerts go
/// pending, then firing; emptying the DLQ (purge) and the DLT (the consumer group commits past
/// the record) resolves them. Alerts are read through Prometheus's HTTP API.
///
/// Issue 34: a third channel's dead letter carries no time at all (no `timestamp`, no
/// headers): its age-unknown alert fires, and so does its age alert, on the exporter's
/// first-seen age; the channels whose messages carry a time never raise the age-unknown one.
#[test]
fn a_real_prometheus_fires_and_resolves_the_alerts_of_a_rabbitmq_dlq_and_a_kafka_dlt() {
    let Some(prometheus) = prometheus() else {
        return;
    };
    if !support::rabbit::up() || !support::kafka::up() {
        return;
    }
    let stem = support::unique("alrt");
    let mut stack = Stack {
        children: Vec::new(),
        stem: stem.clone(),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(
        d.join("dlqctl.yaml"),
        local_targets(&stem, "    alerts: {source: native}\n"),
    )
    .expect("targets");
    // Thresholds a test can cross in seconds: any dead letter, older than 2 s, for 3 s.
    let alarms = "  alarms:\n    depth: {warning: 0, period: 3s}\n    oldestMessageAge: {warning: 2s, period: 3s}\n";
    let (orders, inventory) = (format!("{stem}.orders"), format!("{stem}.inventory"));
    let untimed = format!("{stem}.untimed");
    let group = format!("{stem}.inventory-dlt-readers");
    std::fs::write(
        d.join("channels.yaml"),
        format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {orders}, labels: {{team: fulfilment}}}}\nspec:\n  target: local-rabbitmq\n  retry: {{maxAttempts: 2, backoff: {{initial: 1s}}}}\n{alarms}---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {inventory}, labels: {{team: inventory}}}}\nspec:\n  target: local-kafka\n  retry: {{maxAttempts: 2}}\n  deadLetter: {{consumerGroup: {group}}}\n{alarms}---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {untimed}}}\nspec:\n  target: local-rabbitmq\n  retry: {{maxAttempts: 2, backoff: {{initial: 1s}}}}\n{alarms}"
        ),
    )
    .expect("channels");
    let run = |args: &[&str]| output(support::dlqctl_local(d).args(args));
    let a = run(&["apply", ".", "--auto-approve"]);
    a.ok();
    let dlt = format!("{inventory}-dlt");
    let w = run(&["alerts", ".", "--out", "rules.yaml"]);
    w.ok();
    let rules = std::fs::read_to_string(d.join("rules.yaml")).expect("rules");
    assert!(
        rules.contains("rabbitmq_detailed_queue_messages{")
            && rules.contains("dlq_oldest_message_age_seconds{"),
        "RabbitMQ depth from the broker, ages from the exporter:\n{rules}"
    );
    assert!(
        rules.contains("alert: DeadLetterQueueAgeUnknown")
            && rules.contains("dlq_oldest_message_age_known{"),
        "an age-unknown rule per channel with an age alarm:\n{rules}"
    );

    let exporter_port = stack.exporter(d, &["--peek"]);
    // RabbitMQ's depth comes from the broker's own rabbitmq_prometheus plugin (the stack
    // enables it on loopback), its age from the exporter.
    let rabbit_metrics = support::host_port(
        &std::env::var("DLQCTL_RABBITMQ_PROMETHEUS_URL")
            .unwrap_or_else(|_| "http://127.0.0.1:15692".into()),
    );
    if !support::require(
        "RabbitMQ's rabbitmq_prometheus plugin",
        support::tcp_up(&rabbit_metrics),
    ) {
        return;
    }
    let prom_port = stack.prometheus(
        &prometheus,
        d,
        exporter_port,
        &format!(
            "  - job_name: rabbitmq\n    metrics_path: /metrics/detailed\n    params: {{family: [queue_coarse_metrics]}}\n    static_configs: [{{targets: [\"{rabbit_metrics}\"]}}]\n"
        ),
    );

    // Both targets read (dlq_up 1), and no dead-letter alert while the DLQs are empty.
    // 120 s: a CI run on a loaded 2-core machine (load ≈ 5) once took longer than 60 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let up = prom_api(prom_port, "/api/v1/query?query=sum(dlq_up)")
            .and_then(|d| d["result"][0]["value"][1].as_str().map(str::to_owned));
        let broker = prom_api(
            prom_port,
            "/api/v1/query?query=up%7Bjob%3D%22rabbitmq%22%7D",
        )
        .and_then(|d| d["result"][0]["value"][1].as_str().map(str::to_owned));
        if up.as_deref() == Some("2") && broker.as_deref() == Some("1") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Prometheus never saw both targets up: sum(dlq_up) {up:?}, up{{job=\"rabbitmq\"}} {broker:?}; the exporter's log: {}",
            std::fs::read_to_string(d.join("exporter.log")).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    std::thread::sleep(std::time::Duration::from_secs(4));
    let quiet = active_alerts(prom_port);
    assert!(
        quiet
            .iter()
            .all(|(name, _, _)| !name.starts_with("DeadLetterQueue")),
        "empty DLQs alert nobody: {quiet:?}"
    );

    // A dead letter in each: the RabbitMQ one published a minute ago (its timestamp is what
    // the exporter ages), the Kafka one now (the record's timestamp).
    let published = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.as_secs() - 60)
        .unwrap_or(0);
    support::block(support::rabbit::api_ok(
        reqwest::Method::POST,
        "/api/exchanges/%2F/amq.default/publish",
        serde_json::json!({"properties": {"timestamp": published}, "routing_key": format!("{orders}.dlq"), "payload": "boom", "payload_encoding": "string"}),
    ));
    // No time at all: no `timestamp` property, no headers.
    support::block(support::rabbit::api_ok(
        reqwest::Method::POST,
        "/api/exchanges/%2F/amq.default/publish",
        serde_json::json!({"properties": {}, "routing_key": format!("{untimed}.dlq"), "payload": "no time", "payload_encoding": "string"}),
    ));
    {
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
        let producer: BaseProducer = support::kafka::producer(&[]);
        producer
            .send(BaseRecord::to(&dlt).payload("boom").key("k"))
            .map_err(|(e, _)| e)
            .expect("produce");
        producer
            .flush(std::time::Duration::from_secs(10))
            .expect("flush");
    }
    let mut wanted: Vec<(String, String, String)> = [&inventory, &orders, &untimed]
        .into_iter()
        .flat_map(|c| {
            ["DeadLetterQueueDepth", "DeadLetterQueueOldestMessageAge"]
                .map(|a| (a.to_owned(), c.clone(), "firing".to_owned()))
        })
        .collect();
    wanted.push((
        "DeadLetterQueueAgeUnknown".to_owned(),
        untimed.clone(),
        "firing".to_owned(),
    ));
    let seen = poll_alerts(prom_port, "all seven alerts firing", |now| {
        let done = wanted.iter().all(|w| now.contains(w));
        if !done && now.iter().any(|(a, _, _)| a == "DeadLetterExporterDown") {
            let st = run(&["status", "."]);
            panic!("the exporter failed a read: {}{}", st.stdout, st.stderr);
        }
        done
    });
    for (alert, channel, _) in &wanted {
        let pending = seen.iter().position(|s| {
            s.iter()
                .any(|(a, c, st)| a == alert && c == channel && st == "pending")
        });
        assert!(
            pending.is_some(),
            "{alert} {channel} was pending before firing: {seen:#?}"
        );
    }
    assert!(
        seen.iter()
            .flatten()
            .all(|(a, c, _)| a != "DeadLetterQueueAgeUnknown" || *c == untimed),
        "only the channel with no time has an unknown age: {seen:#?}"
    );

    // Emptied: the RabbitMQ DLQ purged, the Kafka group's offset committed past the record.
    support::block(support::rabbit::api(
        reqwest::Method::DELETE,
        &format!("/api/queues/%2F/{orders}.dlq/contents"),
        None,
    ));
    support::block(support::rabbit::api(
        reqwest::Method::DELETE,
        &format!("/api/queues/%2F/{untimed}.dlq/contents"),
        None,
    ));
    commit_to_end(&group, &dlt);
    poll_alerts(prom_port, "the dead-letter alerts resolved", |now| {
        now.iter()
            .all(|(name, _, _)| !name.starts_with("DeadLetterQueue"))
    });
    drop(stack);
}

// -------------------------------------------------------------- the dead-letter rate, live

/// The traffic's phases: every message processed; 1 in [`FAIL_EVERY`] dead-lettered; every
/// one processed again.
const HEALTHY: u8 = 0;
const FAILING: u8 = 1;
const FIXED: u8 = 2;
/// One message into each channel's source every 20 ms: 50 a second.
const TICK: Duration = Duration::from_millis(20);
/// While failing, the consumers dead-letter every 20th message they take: 5%.
const FAIL_EVERY: u64 = 20;

/// One channel's ids: as the broker confirmed them to the producer, as the consumer
/// processed them, as the consumer dead-lettered them.
#[derive(Default)]
struct Ledger {
    produced: Vec<String>,
    processed: Vec<String>,
    dead: Vec<String>,
}

type Shared = Arc<Mutex<Ledger>>;

/// What the traffic threads read from the test: the phase, whether producers and consumers
/// still run, and a deadline no thread runs past whatever happens to the test.
#[derive(Clone)]
struct Control {
    phase: Arc<AtomicU8>,
    producing: Arc<AtomicBool>,
    consuming: Arc<AtomicBool>,
    deadline: Instant,
}

impl Control {
    fn producing(&self) -> bool {
        self.producing.load(Ordering::SeqCst) && Instant::now() < self.deadline
    }

    fn consuming(&self) -> bool {
        self.consuming.load(Ordering::SeqCst) && Instant::now() < self.deadline
    }

    /// Whether the consumer fails the message it just took: every [`FAIL_EVERY`]th one it
    /// takes while the phase is [`FAILING`] (`failing` counts those).
    fn fails(&self, failing: &mut u64) -> bool {
        if self.phase.load(Ordering::SeqCst) != FAILING {
            return false;
        }
        *failing += 1;
        failing.is_multiple_of(FAIL_EVERY)
    }
}

/// The next tick of a producer's schedule; one that fell more than a second behind starts
/// again from now instead of bursting to catch up.
fn next_tick(next: tokio::time::Instant) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    if next + Duration::from_secs(1) < now {
        now
    } else {
        next + TICK
    }
}

/// A third-party producer on one long-lived, confirmed AMQP channel: a message with id `r-N`
/// into `queue` (through the default exchange) every tick; an id is produced once the broker
/// confirmed it.
fn rabbit_producer(c: Control, queue: String, ledger: Shared) {
    support::block(async move {
        let conn = support::rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        ch.confirm_select(Default::default())
            .await
            .expect("confirms");
        let mut next = tokio::time::Instant::now();
        let mut i = 0u64;
        while c.producing() {
            let id = format!("r-{i}");
            let props = lapin::BasicProperties::default().with_message_id(id.clone().into());
            let confirm = ch
                .basic_publish(
                    "".into(),
                    queue.as_str().into(),
                    Default::default(),
                    id.as_bytes(),
                    props,
                )
                .await
                .expect("publish")
                .await
                .expect("confirm");
            assert!(confirm.is_ack(), "{id}: not confirmed: {confirm:?}");
            ledger.lock().expect("ledger").produced.push(id);
            i += 1;
            next = next_tick(next);
            tokio::time::sleep_until(next).await;
        }
        let _ = conn.close(200, "done".into()).await;
    });
}

/// The application on RabbitMQ, on one long-lived channel: `basic.get`, then `basic.ack`
/// what it processed and `basic.reject` with `requeue=false` what fails (the main queue
/// dead-letters it into the DLQ).
fn rabbit_consumer(c: Control, queue: String, ledger: Shared) {
    support::block(async move {
        let conn = support::rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        let mut failing = 0u64;
        while c.consuming() {
            let Some((id, failed)) =
                support::rabbit::settle_next(&ch, &queue, |_| c.fails(&mut failing)).await
            else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let mut l = ledger.lock().expect("ledger");
            if failed {
                &mut l.dead
            } else {
                &mut l.processed
            }
            .push(id);
        }
        let _ = conn.close(200, "done".into()).await;
    });
}

/// A third-party producer on Kafka: a record keyed `k-N` into `topic` every tick; an id is
/// produced once the broker acknowledged it.
fn kafka_producer(c: Control, topic: String, ledger: Shared) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = support::kafka::producer(&[("linger.ms", "0")]);
    support::block(async move {
        let mut next = tokio::time::Instant::now();
        let mut i = 0u64;
        while c.producing() {
            let id = format!("k-{i}");
            producer
                .send(
                    FutureRecord::to(&topic).key(&id).payload(&id),
                    Duration::from_secs(10),
                )
                .await
                .map_err(|(e, _)| e)
                .expect("produce");
            ledger.lock().expect("ledger").produced.push(id);
            i += 1;
            next = next_tick(next);
            tokio::time::sleep_until(next).await;
        }
    });
}

/// The application on Kafka: a group consumer of `topic` that produces what fails to the
/// DLT (as Spring's DeadLetterPublishingRecoverer does) before it counts it dead-lettered.
fn kafka_consumer(c: Control, topic: String, dlt: String, group: String, ledger: Shared) {
    use rdkafka::Message;
    use rdkafka::consumer::Consumer;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let consumer = support::kafka::consumer(&group, &[("auto.offset.reset", "earliest")]);
    consumer.subscribe(&[topic.as_str()]).expect("subscribe");
    let producer: FutureProducer = support::kafka::producer(&[("linger.ms", "0")]);
    let mut failing = 0u64;
    while c.consuming() {
        let Some(m) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("consume");
        let id = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
        if c.fails(&mut failing) {
            let body = m.payload().unwrap_or_default().to_vec();
            support::block(producer.send(
                FutureRecord::to(&dlt).key(&id).payload(&body),
                Duration::from_secs(10),
            ))
            .map_err(|(e, _)| e)
            .expect("produce to the DLT");
            ledger.lock().expect("ledger").dead.push(id);
        } else {
            ledger.lock().expect("ledger").processed.push(id);
        }
    }
}

/// The traffic of both channels: a producer and a consumer each, on threads of their own,
/// stopped and joined on drop (or by [`Traffic::finish`]).
struct Traffic {
    control: Control,
    rabbit: Shared,
    kafka: Shared,
    /// Producers first, then consumers, each named for the messages.
    threads: Vec<(&'static str, std::thread::JoinHandle<()>)>,
}

impl Traffic {
    fn start(queue: &str, topic: &str, dlt: &str, group: &str, deadline: Instant) -> Self {
        let control = Control {
            phase: Arc::new(AtomicU8::new(HEALTHY)),
            producing: Arc::new(AtomicBool::new(true)),
            consuming: Arc::new(AtomicBool::new(true)),
            deadline,
        };
        let (rabbit, kafka) = (Shared::default(), Shared::default());
        let threads = vec![
            ("the RabbitMQ producer", {
                let (c, q, l) = (control.clone(), queue.to_owned(), rabbit.clone());
                std::thread::spawn(move || rabbit_producer(c, q, l))
            }),
            ("the Kafka producer", {
                let (c, t, l) = (control.clone(), topic.to_owned(), kafka.clone());
                std::thread::spawn(move || kafka_producer(c, t, l))
            }),
            ("the RabbitMQ consumer", {
                let (c, q, l) = (control.clone(), queue.to_owned(), rabbit.clone());
                std::thread::spawn(move || rabbit_consumer(c, q, l))
            }),
            ("the Kafka consumer", {
                let (c, l) = (control.clone(), kafka.clone());
                let (t, d, g) = (topic.to_owned(), dlt.to_owned(), group.to_owned());
                std::thread::spawn(move || kafka_consumer(c, t, d, g, l))
            }),
        ];
        Traffic {
            control,
            rabbit,
            kafka,
            threads,
        }
    }

    fn set_phase(&self, phase: u8) {
        self.control.phase.store(phase, Ordering::SeqCst);
    }

    /// Panics when a thread has ended before it was told to (its own panic is on stderr).
    fn check(&self) {
        let ended: Vec<&str> = self
            .threads
            .iter()
            .filter(|(_, h)| h.is_finished())
            .map(|(name, _)| *name)
            .collect();
        assert!(ended.is_empty(), "the traffic stopped early: {ended:?}");
    }

    /// (produced, processed + dead-lettered) of a ledger.
    fn counts(ledger: &Shared) -> (usize, usize) {
        let l = ledger.lock().expect("ledger");
        (l.produced.len(), l.processed.len() + l.dead.len())
    }

    /// Stops the producers, lets the consumers take what is left (30 s at most), stops them:
    /// the two ledgers, RabbitMQ's and Kafka's.
    fn finish(mut self) -> (Ledger, Ledger) {
        self.check();
        self.control.producing.store(false, Ordering::SeqCst);
        let consumers = self.threads.split_off(2);
        for (_, h) in std::mem::replace(&mut self.threads, consumers) {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (r, k) = (Self::counts(&self.rabbit), Self::counts(&self.kafka));
            if r.0 == r.1 && k.0 == k.1 {
                break;
            }
            self.check();
            assert!(
                Instant::now() < deadline,
                "the consumers did not take every message within 30 s: (produced, taken) RabbitMQ {r:?}, Kafka {k:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        self.control.consuming.store(false, Ordering::SeqCst);
        for (_, h) in std::mem::take(&mut self.threads) {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
        let take = |l: &Shared| std::mem::take(&mut *l.lock().expect("ledger"));
        (take(&self.rabbit), take(&self.kafka))
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.control.producing.store(false, Ordering::SeqCst);
        self.control.consuming.store(false, Ordering::SeqCst);
        for (_, h) in std::mem::take(&mut self.threads) {
            let _ = h.join();
        }
    }
}

/// A figure the report needs (run with `--nocapture` to see them).
#[allow(clippy::print_stderr)]
fn note(what: std::fmt::Arguments) {
    eprintln!("rate test: {what}");
}

/// An instant query's result as (the `channel` label, the value).
fn prom_query(port: u16, query: &str) -> Vec<(String, f64)> {
    let path = format!("/api/v1/query?query={}", url_encode(query));
    let Some(data) = prom_api(port, &path) else {
        return Vec::new();
    };
    data["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let channel = r["metric"]["channel"].as_str().unwrap_or("").to_owned();
            let value = r["value"][1].as_str()?.parse().ok()?;
            Some((channel, value))
        })
        .collect()
}

/// Percent-encodes a query string's value.
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value `query` has for `channel`, if any.
fn value_of(port: u16, query: &str, channel: &str) -> Option<f64> {
    prom_query(port, query)
        .into_iter()
        .find(|(c, _)| c == channel)
        .map(|(_, v)| v)
}

/// The ratio the channel's `DeadLetterRateHigh` rule compares with its threshold: the rule's
/// expression in `rules` without its ` > F`.
fn rate_ratio(rules: &str, channel: &str) -> String {
    let needle = format!("channel=\\\"{channel}\\\"");
    let expr = rules
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("expr: "))
        .find(|e| e.contains("dlq_dead_lettered_messages_total") && e.contains(&needle))
        .unwrap_or_else(|| panic!("no rate rule for {channel}:\n{rules}"));
    let expr: String = serde_json::from_str(expr).expect("a quoted expression");
    let (ratio, _) = expr.rsplit_once(" > ").expect("a threshold");
    ratio.to_owned()
}

/// Whether the active alerts have `DeadLetterRateHigh` of `channel` in `state`.
fn rate_alert(now: &[(String, String, String)], channel: &str, state: &str) -> bool {
    now.iter()
        .any(|(a, c, s)| a == "DeadLetterRateHigh" && c == channel && s == state)
}

/// Issue 36, end to end: the `DeadLetterRateHigh` rules `dlqctl alerts` writes, in a real
/// Prometheus (1 s scrape and evaluation) scraping `dlqctl exporter --interval 1s`, on real
/// traffic: 50 messages a second into a RabbitMQ queue and a Kafka topic, each consumed by an
/// application. Healthy (everything processed, ≥ 20 s): no rate alert, though the source
/// counters increase. Failing (1 in 20 dead-lettered: RabbitMQ `basic.reject` with
/// `requeue=false`, Kafka a record produced to the DLT): each channel's alert goes pending,
/// then firing, and Prometheus computes about 5%. Fixed (no failures, traffic goes on): both
/// resolve once the 15 s window has rolled past. Then every id is accounted for, and the
/// exporter's counters equal what was produced and dead-lettered.
#[test]
fn a_real_prometheus_fires_and_resolves_the_dead_letter_rate_of_a_rabbitmq_and_a_kafka_channel() {
    let Some(prometheus) = prometheus() else {
        return;
    };
    if !support::rabbit::up() || !support::kafka::up() {
        return;
    }
    let started = Instant::now();
    // Every wait below is bounded by its own limit and by this one.
    let test_deadline = started + Duration::from_secs(180);
    let until = |limit: Duration| (Instant::now() + limit).min(test_deadline);
    let stem = support::unique("rate");
    let mut stack = Stack {
        children: Vec::new(),
        stem: stem.clone(),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("dlqctl.yaml"), local_targets(&stem, "")).expect("targets");
    // A rate a test can cross in seconds: over 15 s, above 0.1% for 2 s.
    let alarms = "  alarms:\n    deadLetterRate: {warning: 0.1%, period: 15s, for: 2s}\n";
    let (orders, inventory) = (format!("{stem}.orders"), format!("{stem}.inventory"));
    // RabbitMQ: no retry queue (1 attempt) and a dead-letter exchange of its own, so that a
    // reject with requeue=false goes straight into the DLQ.
    std::fs::write(
        d.join("channels.yaml"),
        format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {orders}}}\nspec:\n  target: local-rabbitmq\n  retry: {{maxAttempts: 1}}\n  rabbitmq:\n    deadLetterExchange: {{name: \"{{channel}}.dlx\"}}\n{alarms}---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {inventory}}}\nspec:\n  target: local-kafka\n  retry: {{maxAttempts: 1}}\n{alarms}"
        ),
    )
    .expect("channels");
    let run = |args: &[&str]| output(support::dlqctl_local(d).args(args));
    let lint = run(&["lint", "."]);
    lint.ok();
    run(&["apply", ".", "--auto-approve"]).ok();
    let (dlq, dlt) = (format!("{orders}.dlq"), format!("{inventory}-dlt"));
    run(&["alerts", ".", "--out", "rules.yaml"]).ok();
    let rules = std::fs::read_to_string(d.join("rules.yaml")).expect("rules");
    assert_eq!(
        rules.matches("alert: DeadLetterRateHigh").count(),
        2,
        "one rate rule per channel:\n{rules}"
    );
    let ratio = |channel: &str| rate_ratio(&rules, channel);
    for channel in [&orders, &inventory] {
        let r = ratio(channel);
        assert!(r.contains("[15s]"), "{r}");
    }
    assert!(rules.contains("> 0.001\""), "{rules}");
    assert!(rules.contains("for: 2s"), "{rules}");

    let exporter_port = stack.exporter(d, &[]);
    let prom_port = stack.prometheus(&prometheus, d, exporter_port, "");
    let exporter_log = || std::fs::read_to_string(d.join("exporter.log")).unwrap_or_default();
    let up = || {
        prom_query(prom_port, "sum(dlq_up)")
            .first()
            .map(|(_, v)| *v)
    };
    let deadline = until(Duration::from_secs(60));
    while up() != Some(2.0) {
        assert!(
            Instant::now() < deadline,
            "Prometheus never saw both targets up: sum(dlq_up) {:?}; the exporter's log: {}",
            up(),
            exporter_log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    note(format_args!(
        "both targets up after {:.1?}",
        started.elapsed()
    ));

    // Healthy: the source counters increase, and no rate alert for 20 s and more.
    let group = format!("{inventory}.app");
    let traffic = Traffic::start(
        &orders,
        &inventory,
        &dlt,
        &group,
        started + Duration::from_secs(200),
    );
    let healthy = Instant::now();
    let flowing = "rate(dlq_source_messages_total[15s]) > 0";
    let both_flow = || {
        let got = prom_query(prom_port, flowing);
        [&orders, &inventory]
            .iter()
            .all(|c| got.iter().any(|(g, _)| g == *c))
    };
    let deadline = until(Duration::from_secs(30));
    while !both_flow() {
        traffic.check();
        assert!(
            Instant::now() < deadline,
            "the source counters did not increase in Prometheus within 30 s: {:?}; the exporter's log: {}",
            prom_query(prom_port, "dlq_source_messages_total"),
            exporter_log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    note(format_args!(
        "the source counters increase {:.1?} after the traffic started",
        healthy.elapsed()
    ));
    while healthy.elapsed() < Duration::from_secs(22) {
        traffic.check();
        let now = active_alerts(prom_port);
        assert!(
            now.iter().all(|(a, _, _)| a != "DeadLetterRateHigh"),
            "no rate alert while every message is processed ({:.1?} in): {now:?}",
            healthy.elapsed()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(up(), Some(2.0), "both targets still read");
    assert!(both_flow(), "the source counters still increase");

    // Failing: 1 in 20 dead-lettered. Each channel's rate alert is pending, then firing.
    traffic.set_phase(FAILING);
    let failing = Instant::now();
    let seen = poll_alerts_until(
        prom_port,
        "both rate alerts firing",
        until(Duration::from_secs(60)),
        |now| {
            traffic.check();
            [&orders, &inventory]
                .iter()
                .all(|c| rate_alert(now, c, "firing"))
        },
    );
    note(format_args!(
        "both rate alerts firing {:.1?} after the failures began",
        failing.elapsed()
    ));
    for channel in [&orders, &inventory] {
        let pending = seen.iter().position(|s| rate_alert(s, channel, "pending"));
        let firing = seen.iter().position(|s| rate_alert(s, channel, "firing"));
        assert!(
            pending.is_some() && pending < firing,
            "{channel}: DeadLetterRateHigh pending before firing: {seen:#?}"
        );
    }
    // Once the 15 s window holds failures only (and the exporter's and Prometheus' lag: the
    // RabbitMQ totals are published once they held for 10 s, `exporter::SETTLE_MS`),
    // Prometheus computes about the injected 5%.
    while failing.elapsed() < Duration::from_secs(32) {
        traffic.check();
        let now = active_alerts(prom_port);
        for channel in [&orders, &inventory] {
            assert!(
                rate_alert(&now, channel, "firing"),
                "{channel}: still firing while failing: {now:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    for _ in 0..3 {
        for channel in [&orders, &inventory] {
            let r = value_of(prom_port, &ratio(channel), channel);
            note(format_args!("{channel}: Prometheus computes {r:?}"));
            assert!(
                r.is_some_and(|r| (0.02..=0.10).contains(&r)),
                "{channel}: the rule's ratio is {r:?}, not about 5% (2% to 10%)"
            );
        }
        std::thread::sleep(Duration::from_secs(1));
    }

    // Fixed: no failures, the traffic goes on; both alerts resolve once the window rolls past.
    traffic.set_phase(FIXED);
    let fixed = Instant::now();
    poll_alerts_until(
        prom_port,
        "both rate alerts resolved",
        until(Duration::from_secs(90)),
        |now| {
            traffic.check();
            now.iter().all(|(a, _, _)| a != "DeadLetterRateHigh")
        },
    );
    note(format_args!(
        "both rate alerts resolved {:.1?} after the failures ended",
        fixed.elapsed()
    ));
    assert!(both_flow(), "the traffic went on");

    // Nothing lost: every id produced was processed or dead-lettered, once; the exporter's
    // counters are what was produced and dead-lettered (read before the DLQ is emptied).
    let (rabbit, kafka) = traffic.finish();
    for (channel, l) in [(&orders, &rabbit), (&inventory, &kafka)] {
        let produced: BTreeSet<&String> = l.produced.iter().collect();
        let processed: BTreeSet<&String> = l.processed.iter().collect();
        let dead: BTreeSet<&String> = l.dead.iter().collect();
        assert_eq!(
            (produced.len(), processed.len(), dead.len()),
            (l.produced.len(), l.processed.len(), l.dead.len()),
            "{channel}: no id twice"
        );
        assert!(processed.is_disjoint(&dead), "{channel}");
        let taken: BTreeSet<&String> = processed.union(&dead).copied().collect();
        assert_eq!(taken, produced, "{channel}: every id produced was taken");
        assert!(
            l.dead.len() >= 10 && l.dead.len() * 10 < l.produced.len(),
            "{channel}: {} dead-lettered of {}",
            l.dead.len(),
            l.produced.len()
        );
        note(format_args!(
            "{channel}: {} produced, {} processed, {} dead-lettered",
            l.produced.len(),
            l.processed.len(),
            l.dead.len()
        ));
    }
    // How far below what the producer had confirmed RabbitMQ's `publish` statistic of the main
    // queue may read. Seen in 2 of 7 runs of this file with the other live test beside it
    // (never alone): 3,178 of 3,244 (66 short, about 1.3 s of this traffic), and still short
    // 30 s later, in the broker's own statistic; the cause (the management plugin's, not
    // dlqctl's: the exporter publishes what the broker says) is not established. Kafka's end
    // offsets are exact, and so is every dead-lettered count.
    let publish_slack = |channel: &String, produced: usize| {
        if *channel == orders {
            produced.div_ceil(20)
        } else {
            0
        }
    };
    let close_enough = |got: Option<u64>, produced: usize, slack: usize| {
        got.is_some_and(|n| n <= produced as u64 && n + slack as u64 >= produced as u64)
    };
    let deadline = until(Duration::from_secs(30));
    for (channel, l) in [(&orders, &rabbit), (&inventory, &kafka)] {
        let counters = || {
            (
                value_of(
                    prom_port,
                    &format!("dlq_dead_lettered_messages_total{{channel=\"{channel}\"}}"),
                    channel,
                ),
                value_of(
                    prom_port,
                    &format!("dlq_source_messages_total{{channel=\"{channel}\"}}"),
                    channel,
                ),
            )
        };
        let want = (Some(l.dead.len() as f64), Some(l.produced.len() as f64));
        let slack = publish_slack(channel, l.produced.len());
        let good = |(d, src): (Option<f64>, Option<f64>)| {
            d == want.0 && close_enough(src.map(|v| v as u64), l.produced.len(), slack)
        };
        while !good(counters()) {
            assert!(
                Instant::now() < deadline,
                "{channel}: the exporter's (dead-lettered, source) counters are {:?}, not {want:?}; the broker's main queue: {}",
                counters(),
                support::block(support::rabbit::api(
                    reqwest::Method::GET,
                    &format!("/api/queues/%2F/{channel}?columns=messages,message_stats"),
                    None,
                ))
                .1
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    // The dead letters are where they were sent: the RabbitMQ DLQ, the Kafka DLT.
    let in_dlq: BTreeSet<String> = support::block(support::rabbit::take_each(&dlq, |m| {
        m.properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default()
    }))
    .into_iter()
    .collect();
    assert_eq!(in_dlq, rabbit.dead.iter().cloned().collect(), "the DLQ");
    assert_eq!(
        support::rabbit::count(&orders),
        0,
        "the main queue is empty"
    );
    // The broker's own totals, read afresh by `status` (no exporter memory), once the
    // producer's and consumer's channels have closed and the DLQ was emptied by a channel
    // that lived for one drain: RabbitMQ's statistics must not lose them.
    let totals = || {
        let out = run(&["status", "channels.yaml", "--format", "json", "--no-peek"]);
        let doc = out.json("status");
        let entry = doc["channels"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["channel"] == orders.as_str())
            .cloned()
            .unwrap_or_default();
        let flow = &entry["deadLetter"]["flow"];
        (
            flow["deadLetteredTotal"].as_u64(),
            flow["sourceTotal"].as_u64(),
        )
    };
    let want = (
        Some(rabbit.dead.len() as u64),
        Some(rabbit.produced.len() as u64),
    );
    let deadline = until(Duration::from_secs(20));
    loop {
        let got = totals();
        if got.0 == want.0
            && close_enough(
                got.1,
                rabbit.produced.len(),
                publish_slack(&orders, rabbit.produced.len()),
            )
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{orders}: status reads (dead-lettered, source) totals {got:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let in_dlt: BTreeSet<String> = {
        use rdkafka::Message;
        use rdkafka::consumer::Consumer;
        let reader = support::kafka::consumer(&format!("{stem}.check"), &[]);
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset(&dlt, 0, rdkafka::Offset::Beginning)
            .expect("tpl");
        reader.assign(&tpl).expect("assign");
        let mut got = BTreeSet::new();
        let deadline = until(Duration::from_secs(30));
        while got.len() < kafka.dead.len() && Instant::now() < deadline {
            if let Some(m) = reader.poll(Duration::from_millis(200)) {
                let m = m.expect("read the DLT");
                got.insert(String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned());
            }
        }
        got
    };
    assert_eq!(in_dlt, kafka.dead.iter().cloned().collect(), "the DLT");
    note(format_args!(
        "the whole test took {:.1?}",
        started.elapsed()
    ));
    drop(stack);
}

const PUBSUB: &str = "tests/fixtures/alerts-pubsub";

/// The Monitoring API v3 schemas an AlertPolicy uses, vendored from its discovery document
/// (tests/fixtures/cloud-monitoring/monitoring-v3-alert-policy.json says where from).
fn discovery() -> serde_json::Value {
    let path = root().join("tests/fixtures/cloud-monitoring/monitoring-v3-alert-policy.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json")
}

/// The limits the discovery document's descriptions state (its `_limits`), on one policy.
fn check_limits(policy: &serde_json::Value, out: &mut Vec<String>) {
    let secs = |v: &serde_json::Value| -> u64 {
        v.as_str()
            .and_then(|s| s.strip_suffix('s'))
            .and_then(|s| s.parse().ok())
            .unwrap_or(u64::MAX)
    };
    let conditions = policy["conditions"].as_array().cloned().unwrap_or_default();
    if !(1..=6).contains(&conditions.len()) {
        out.push(format!("{} conditions (1 to 6)", conditions.len()));
    }
    for c in &conditions {
        let t = &c["conditionThreshold"];
        if secs(&t["duration"]) % 60 != 0 {
            out.push(format!("duration {} is not whole minutes", t["duration"]));
        }
        if !["COMPARISON_GT", "COMPARISON_LT"].contains(&t["comparison"].as_str().unwrap_or("")) {
            out.push(format!("comparison {} is not GT or LT", t["comparison"]));
        }
        for key in ["aggregations", "denominatorAggregations"] {
            for a in t[key].as_array().into_iter().flatten() {
                let p = secs(&a["alignmentPeriod"]);
                if !(60..=90_000).contains(&p) {
                    out.push(format!("alignmentPeriod {p}s outside 60s..90000s"));
                }
            }
        }
        if t.get("denominatorFilter").is_some()
            && t["aggregations"][0]["alignmentPeriod"]
                != t["denominatorAggregations"][0]["alignmentPeriod"]
        {
            out.push("a ratio whose two alignment periods differ".to_owned());
        }
    }
    if policy["documentation"]["mimeType"] != "text/markdown" {
        out.push("documentation.mimeType is not text/markdown".to_owned());
    }
    let content = policy["documentation"]["content"].as_str().unwrap_or("");
    if content.chars().count() > 8192 || content.len() > 10_240 {
        out.push("documentation.content too long".to_owned());
    }
    if policy["displayName"].as_str().unwrap_or("").chars().count() > 512 {
        out.push("displayName too long".to_owned());
    }
    let labels = policy["userLabels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if labels.len() > 64 {
        out.push("more than 64 userLabels".to_owned());
    }
    let allowed = |s: &str| {
        s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    };
    for (k, v) in &labels {
        let v = v.as_str().unwrap_or("");
        if !allowed(k) || !k.starts_with(|c: char| c.is_ascii_lowercase()) || !allowed(v) {
            out.push(format!("userLabels {k}: {v} breaks the label rules"));
        }
    }
}

/// Everything wrong with one policy against the documented resource shape.
fn policy_findings(policy: &serde_json::Value) -> Vec<String> {
    let doc = discovery();
    let mut out = Vec::new();
    support::discovery::check_schema(
        &doc["schemas"],
        "AlertPolicy",
        policy,
        "AlertPolicy",
        &mut out,
    );
    check_limits(policy, &mut out);
    out
}

/// Issue 36: `alerts --format cloud-monitoring` writes one AlertPolicy per Pub/Sub channel and
/// tier, each valid against the Monitoring API's discovery document (field names, types,
/// enums, durations) and the limits its descriptions state; `--check` exits 2 when the folder
/// is stale, and `--out` replaces or removes only the policies it wrote.
#[test]
fn cloud_monitoring_policies_match_the_monitoring_apis_alert_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("policies");
    let out_s = out.to_str().expect("utf-8");
    let w = alerts(&[PUBSUB, "--format", "cloud-monitoring", "--out", out_s]);
    w.ok();
    w.assert_stderr_contains("3 alert policies");
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("the folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "gcp.payments.critical.json",
            "gcp.payments.warning.json",
            "gcp.refunds.critical.json"
        ]
    );
    for name in &names {
        let text = std::fs::read_to_string(out.join(name)).expect("read");
        let policy: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(policy_findings(&policy), Vec::<String>::new(), "{name}");
    }
    let warning = std::fs::read_to_string(out.join("gcp.payments.warning.json")).expect("read");
    insta::assert_snapshot!("alerts-cloud-monitoring-warning", warning);
    let policy: serde_json::Value = serde_json::from_str(&warning).expect("json");
    assert_eq!(policy["severity"], "WARNING");
    assert_eq!(policy["conditions"].as_array().map(Vec::len), Some(3));
    let rate = &policy["conditions"][2]["conditionThreshold"];
    assert_eq!(rate["thresholdValue"], 0.001);
    assert_eq!(rate["duration"], "600s");
    assert!(
        rate["filter"]
            .as_str()
            .is_some_and(|f| f.contains("subscription/dead_letter_message_count")
                && f.contains("\"payment-processor\"")),
        "{rate}"
    );
    assert!(
        rate["denominatorFilter"].as_str().is_some_and(|f| f
            .contains("topic/send_message_operation_count")
            && f.contains("\"payments\"")),
        "{rate}"
    );

    // The check can fail: a misspelt field and an enum value the API does not have.
    let mut broken = policy.clone();
    broken["combiner"] = serde_json::json!("ANY");
    broken["conditions"][0]["conditionThreshold"]["comparision"] =
        serde_json::json!("COMPARISON_GT");
    assert_eq!(
        policy_findings(&broken),
        [
            "AlertPolicy.combiner: \"ANY\" is not one of [\"COMBINE_UNSPECIFIED\",\"AND\",\"OR\",\"AND_WITH_MATCHING_RESOURCE\"]",
            "AlertPolicy.conditions[0].conditionThreshold.comparision: no such field in MetricThreshold"
        ]
    );

    // `graph` draws the Pub/Sub alarms as what writes them: Cloud Monitoring policies.
    let g = output(dlqctl().args(["graph", PUBSUB, "--color", "never"]));
    g.ok();
    for line in [
        "Cloud Monitoring policy: more than 0 waiting",
        "Cloud Monitoring policy: oldest older than 2h",
        "Cloud Monitoring policy: more than 0.5% dead-lettered",
        "alert rule: more than 0 waiting",
    ] {
        g.assert_stdout_contains(line);
    }

    let up_to_date = alerts(&[PUBSUB, "--format", "cloud-monitoring", "--check", out_s]);
    up_to_date.ok();
    up_to_date.assert_stderr_contains("is up to date");
    // A hand edit, then a policy whose channel is gone: both stale.
    let file = out.join("gcp.refunds.critical.json");
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(
        &file,
        text.replace("\"thresholdValue\": 0.005", "\"thresholdValue\": 0.05"),
    )
    .expect("write");
    let edited = alerts(&[PUBSUB, "--format", "cloud-monitoring", "--check", out_s]);
    edited.exits(2);
    edited.assert_stdout_contains("-        \"thresholdValue\": 0.05,");
    edited.assert_stderr_contains("gcp.refunds.critical.json differs");
    std::fs::write(out.join("gcp.gone.critical.json"), &text).expect("write");
    let left = alerts(&[PUBSUB, "--format", "cloud-monitoring", "--check", out_s]);
    left.exits(2);
    left.assert_stderr_contains("gcp.gone.critical.json is no longer produced by the specs");
    let missing = alerts(&[
        PUBSUB,
        "--format",
        "cloud-monitoring",
        "--check",
        dir.path().join("nowhere").to_str().expect("utf-8"),
    ]);
    missing.exits(2);
    // --out repairs both, and never touches a file it did not write.
    std::fs::write(out.join("notes.json"), "{\"mine\": true}\n").expect("write");
    let again = alerts(&[PUBSUB, "--format", "cloud-monitoring", "--out", out_s]);
    again.ok();
    again.assert_stderr_contains("removed 1 alert policy the specs no longer produce");
    assert!(!out.join("gcp.gone.critical.json").exists());
    assert!(out.join("notes.json").exists());
    alerts(&[PUBSUB, "--format", "cloud-monitoring", "--check", out_s]).ok();
    std::fs::write(&file, "{\"mine\": true}\n").expect("write");
    let refused = alerts(&[PUBSUB, "--format", "cloud-monitoring", "--out", out_s]);
    refused.exits(1);
    refused.assert_stderr_contains("not overwriting");
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "{\"mine\": true}\n"
    );
}
