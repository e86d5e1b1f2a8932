//! `dlqctl dashboards` through the real binary: a snapshot of one dashboard, the rate panel's
//! tiers, every dashboard the examples and tests/fixtures/dashboards produce type-checked against Grafana's own dashboard types (and a broken one
//! rejected by the same check), `--check`'s exit codes, `--out`'s refusals, and the metric
//! names of the panels against a live scrape of `dlqctl exporter` and AWS's list of SQS
//! metrics.
//!
//! The validator is TypeScript's compiler (`tsc --strict`) over `@grafana/schema`, Grafana's
//! dashboard model as Grafana generates it from its CUE schemas, plus the foundation SDK's
//! Prometheus query (tests/fixtures/grafana/model.ts says how). `scripts/stack up` installs
//! them, pinned, under `$DLQCTL_CACHE` and exports `DLQCTL_GRAFANA_SCHEMA` (their
//! `node_modules`). Under `CI=true` or `DLQCTL_LIVE_REQUIRED=1` a missing validator fails these
//! tests, as a missing server fails the live ones; otherwise they skip loudly.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::{dlqctl, output};

fn dashboards(args: &[&str]) -> support::Output {
    output(
        dlqctl()
            .arg("dashboards")
            .args(args)
            .args(["--color", "never"]),
    )
}

/// Writes the dashboards of `paths` into a fresh folder; the folder and its files by name.
fn generate(paths: &[&str], extra: &[&str]) -> (tempfile::TempDir, Vec<(String, String)>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let out_s = out.to_str().expect("utf-8");
    let mut args: Vec<&str> = paths.to_vec();
    args.extend(["--out", out_s]);
    args.extend_from_slice(extra);
    let r = dashboards(&args);
    r.ok();
    let mut files: Vec<(String, String)> = std::fs::read_dir(&out)
        .expect("out")
        .map(|e| {
            let p = e.expect("entry").path();
            (
                p.file_name().expect("name").to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).expect("read"),
            )
        })
        .collect();
    files.sort();
    (dir, files)
}

const FIXTURES: &str = "tests/fixtures/dashboards";

/// The rate panel of the dashboard `text`: its thresholds and its queries.
fn rate_panel(text: &str) -> Value {
    let v: Value = serde_json::from_str(text).expect("json");
    v["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .find(|p| p["title"] == "Dead-letter rate")
        .expect("a rate panel")
        .clone()
}

#[test]
fn a_dashboard_with_every_kind_of_panel_matches_its_snapshot() {
    let (_dir, files) = generate(&[FIXTURES], &[]);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["dlq-target-aws.json", "dlq-target-rabbit.json"]);
    insta::assert_snapshot!("dashboard-rabbit", files[1].1);
}

#[test]
fn the_rate_panel_draws_the_dead_letter_rate_tiers() {
    let (_dir, files) = generate(&[FIXTURES], &[]);
    let rabbit = rate_panel(&files[1].1);
    assert_eq!(
        rabbit["fieldConfig"]["defaults"]["thresholds"]["steps"],
        serde_json::json!([
            {"color": "green", "value": null},
            {"color": "yellow", "value": 0.001},
            {"color": "red", "value": 0.01}
        ])
    );
    assert_eq!(rabbit["fieldConfig"]["defaults"]["unit"], "percentunit");
    assert_eq!(
        rabbit["targets"][0]["expr"],
        "sum by (target, channel) (rate(dlq_dead_lettered_messages_total{target=\"rabbit\",channel=\"billing.invoices\"}[2m])) / sum by (target, channel) (rate(dlq_source_messages_total{target=\"rabbit\",channel=\"billing.invoices\"}[2m]))"
    );
    // SQS: one threshold (critical, red), CloudWatch metric math over the period.
    let sqs = rate_panel(&files[0].1);
    assert_eq!(
        sqs["fieldConfig"]["defaults"]["thresholds"]["steps"],
        serde_json::json!([
            {"color": "green", "value": null},
            {"color": "red", "value": 0.005}
        ])
    );
    let queries = sqs["targets"].as_array().expect("targets");
    let ids: Vec<&str> = queries
        .iter()
        .map(|q| q["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["vis", "nv", "del", "src", "arr", "rate"]);
    assert!(
        queries
            .iter()
            .all(|q| q["period"] == "300" && q["region"] == "eu-west-1")
    );
    assert_eq!(queries[3]["dimensions"]["QueueName"], "billing-refunds");
    assert_eq!(queries[0]["dimensions"]["QueueName"], "billing-refunds-dlq");
}

#[test]
fn the_examples_get_one_dashboard_per_target() {
    let (_dir, files) = generate(&["examples"], &[]);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "dlq-target-azure-servicebus.json",
            "dlq-target-local-kafka.json",
            "dlq-target-local-pubsub.json",
            "dlq-target-local-rabbitmq.json",
            "dlq-target-local-sqs.json"
        ]
    );
    let sqs: Value = serde_json::from_str(&files[4].1).expect("json");
    let targets: Vec<&Value> = sqs["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .collect();
    assert!(
        targets
            .iter()
            .any(|t| t["namespace"] == "AWS/SQS"
                && t["metricName"] == "ApproximateAgeOfOldestMessage"),
        "SQS channels are drawn from CloudWatch"
    );
    assert!(
        targets.iter().any(|t| t["expression"]
            .as_str()
            .is_some_and(|e| e.contains("DIFF(vis + nv)"))),
        "the SQS rate is metric math"
    );
}

#[test]
fn the_bytes_are_the_same_on_every_run_and_uids_are_stable() {
    let (_a, first) = generate(&["examples"], &[]);
    let (_b, second) = generate(&["examples"], &[]);
    assert_eq!(first, second);
    let (_c, by_team) = generate(&["examples"], &["--by", "team"]);
    let names: Vec<&str> = by_team.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"dlq-team-payments.json"), "{names:?}");
    let uids: BTreeSet<String> = first
        .iter()
        .chain(&by_team)
        .map(|(_, t)| {
            serde_json::from_str::<Value>(t).expect("json")["uid"]
                .as_str()
                .expect("uid")
                .to_owned()
        })
        .collect();
    assert_eq!(
        uids.len(),
        first.len() + by_team.len(),
        "one uid per dashboard"
    );
}

/// `node_modules` holding @grafana/schema, the foundation SDK and typescript, or `None`
/// (a loud skip, a failure under CI=true) when they are not installed.
fn grafana_schema() -> Option<PathBuf> {
    let dir = std::env::var_os("DLQCTL_GRAFANA_SCHEMA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            support::cache_dir().join("grafana-schema-13.2.3-sdk-0.0.21-ts-5.9.3/node_modules")
        });
    let found = dir.join("@grafana/schema/package.json").is_file()
        && dir
            .join("@grafana/grafana-foundation-sdk/package.json")
            .is_file()
        && dir.join("typescript/bin/tsc").is_file()
        && Command::new("node").arg("--version").output().is_ok();
    support::require(
        &format!(
            "Grafana's dashboard types and tsc ({}; `scripts/stack up` installs them) and node",
            dir.display()
        ),
        found,
    )
    .then_some(dir)
}

/// Type-checks each `(name, dashboard JSON)` as a `DlqctlDashboard` literal with
/// `tsc --strict`; the run's output.
fn type_check(node_modules: &Path, dashboards: &[(String, String)]) -> support::Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::os::unix::fs::symlink(node_modules, d.join("node_modules")).expect("symlink");
    std::fs::copy(
        support::root().join("tests/fixtures/grafana/model.ts"),
        d.join("model.ts"),
    )
    .expect("model.ts");
    std::fs::write(
        d.join("tsconfig.json"),
        r#"{"compilerOptions": {"strict": true, "noEmit": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022", "skipLibCheck": true, "types": []}, "include": ["*.ts"]}"#,
    )
    .expect("tsconfig");
    for (name, json) in dashboards {
        let stem = name.trim_end_matches(".json").replace(['.', '-'], "_");
        std::fs::write(
            d.join(format!("{stem}.ts")),
            format!(
                "import type {{ DlqctlDashboard }} from \"./model\";\nexport const d: DlqctlDashboard = {json};\n"
            ),
        )
        .expect("write");
    }
    let r = output(
        Command::new("node")
            .arg(node_modules.join("typescript/bin/tsc"))
            .args(["-p", "tsconfig.json"])
            .current_dir(d),
    );
    drop(dir);
    r
}

#[test]
fn every_example_dashboard_type_checks_against_grafanas_dashboard_schema() {
    let Some(node_modules) = grafana_schema() else {
        return;
    };
    let (_a, by_target) = generate(&["examples"], &[]);
    let (_b, by_team) = generate(&["examples"], &["--by", "team"]);
    let (_c, fixtures) = generate(&[FIXTURES], &[]);
    let mut all = by_target;
    all.extend(by_team.into_iter().map(|(n, t)| (format!("team_{n}"), t)));
    all.extend(fixtures);
    assert!(all.len() >= 9, "{}", all.len());
    let r = type_check(&node_modules, &all);
    assert_eq!(
        r.code, 0,
        "tsc rejected a generated dashboard:\n{}{}",
        r.stdout, r.stderr
    );
}

#[test]
fn the_schema_check_rejects_a_dashboard_with_a_wrong_field() {
    let Some(node_modules) = grafana_schema() else {
        return;
    };
    let (_a, files) = generate(&[FIXTURES], &[]);
    let good = files[1].1.clone();
    // Each breaks one rule of Grafana's model, at a different depth.
    let broken: Vec<(&str, String)> = vec![
        (
            "unknown_top_level",
            good.replacen("\"editable\"", "\"editible\"", 1),
        ),
        (
            "row_collapsed_not_a_boolean",
            good.replacen("\"collapsed\": false", "\"collapsed\": \"no\"", 1),
        ),
        (
            "unknown_thresholds_style",
            good.replacen("\"mode\": \"line+area\"", "\"mode\": \"lines\"", 1),
        ),
        (
            "unknown_query_field",
            good.replacen("\"legendFormat\"", "\"legend_format\"", 1),
        ),
        (
            "text_mode_not_an_enum_value",
            good.replacen("\"mode\": \"markdown\"", "\"mode\": \"md\"", 1),
        ),
    ];
    for (name, text) in &broken {
        assert_ne!(text, &good, "{name}: the edit applies");
    }
    let r = type_check(
        &node_modules,
        &broken
            .iter()
            .map(|(n, t)| (format!("{n}.json"), t.clone()))
            .collect::<Vec<_>>(),
    );
    assert_ne!(r.code, 0, "tsc accepted broken dashboards");
    let said = format!("{}{}", r.stdout, r.stderr);
    for (name, _) in &broken {
        assert!(
            said.contains(&format!("{name}.ts(")),
            "{name} was not rejected:\n{said}"
        );
    }
}

#[test]
fn check_exits_0_when_current_and_2_with_a_diff_when_stale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("dash");
    let out_s = out.to_str().expect("utf-8");
    let missing = dashboards(&["examples", "--check", out_s]);
    assert_eq!(
        missing.code, 2,
        "a missing folder is stale\n{}",
        missing.stderr
    );
    missing.assert_stderr_contains("does not exist");

    dashboards(&["examples", "--out", out_s]).ok();
    let ok = dashboards(&["examples", "--check", out_s]);
    ok.ok();
    ok.assert_stderr_contains("is up to date");

    // Someone edits a threshold in a committed dashboard: --check shows the line.
    let file = out.join("dlq-target-local-rabbitmq.json");
    let text = std::fs::read_to_string(&file).expect("read");
    let edited = text.replacen("\"value\": 100", "\"value\": 50", 1);
    assert_ne!(edited, text);
    std::fs::write(&file, edited).expect("write");
    let stale = dashboards(&["examples", "--check", out_s]);
    stale.exits(2);
    stale.assert_stdout_contains("-                \"value\": 50");
    stale.assert_stdout_contains("+                \"value\": 100");
    stale.assert_stderr_contains("is stale");

    // A dashboard no spec produces any more is stale too, and --out removes it.
    dashboards(&["examples", "--out", out_s]).ok();
    dashboards(&[
        "examples/orders-rabbitmq.yaml",
        "--targets",
        "examples/dlqctl.yaml",
        "--check",
        out_s,
    ])
    .exits(2)
    .assert_stderr_contains("no spec produces it any more");
    dashboards(&[
        "examples/orders-rabbitmq.yaml",
        "--targets",
        "examples/dlqctl.yaml",
        "--out",
        out_s,
    ])
    .ok();
    let left: Vec<_> = std::fs::read_dir(&out).expect("dir").collect();
    assert_eq!(
        left.len(),
        1,
        "only the RabbitMQ target's dashboard is left"
    );
}

#[test]
fn out_never_overwrites_a_file_it_did_not_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("dash");
    std::fs::create_dir(&out).expect("mkdir");
    let foreign = out.join("dlq-target-local-rabbitmq.json");
    std::fs::write(&foreign, "{\"title\": \"hand-made\"}\n").expect("write");
    let r = dashboards(&["examples", "--out", out.to_str().expect("utf-8")]);
    r.exits(1);
    r.assert_stderr_contains("not overwriting");
    assert_eq!(
        std::fs::read_to_string(&foreign).expect("read"),
        "{\"title\": \"hand-made\"}\n"
    );
    assert_eq!(
        std::fs::read_dir(&out).expect("dir").count(),
        1,
        "nothing was written"
    );
}

#[test]
fn specs_with_lint_errors_write_no_dashboards() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        support::root().join("examples/dlqctl.yaml"),
        dir.path().join("dlqctl.yaml"),
    )
    .expect("targets");
    std::fs::write(
        dir.path().join("bad.yaml"),
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: bad}\nspec:\n  target: local-rabbitmq\n  retry: {maxAttempts: 0}\n",
    )
    .expect("write");
    let out = dir.path().join("out");
    let r = dashboards(&[
        dir.path().to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ]);
    r.exits(1);
    assert!(!out.exists(), "nothing written");
}

/// The `dlq_…` metric names the PromQL of a dashboard's panels reads.
fn promql_metrics(dashboard: &str) -> BTreeSet<String> {
    let v: Value = serde_json::from_str(dashboard).expect("json");
    let mut names = BTreeSet::new();
    for p in v["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            let Some(expr) = t["expr"].as_str() else {
                continue;
            };
            let mut rest = expr;
            while let Some(at) = rest.find("dlq_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[at + name.len()..];
                names.insert(name);
            }
        }
    }
    names
}

/// SQS's CloudWatch metrics, as AWS lists them ("Available CloudWatch metrics for Amazon
/// SQS", Amazon SQS Developer Guide).
const SQS_METRICS: [&str; 8] = [
    "ApproximateAgeOfOldestMessage",
    "ApproximateNumberOfGroupsWithInflightMessages",
    "ApproximateNumberOfMessagesDelayed",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesVisible",
    "NumberOfEmptyReceives",
    "NumberOfMessagesDeleted",
    "NumberOfMessagesSent",
];

#[test]
fn sqs_panels_name_only_metrics_cloudwatch_publishes() {
    let (_a, files) = generate(&["examples"], &[]);
    let sqs: Value = serde_json::from_str(&files[4].1).expect("json");
    let mut seen = 0;
    for p in sqs["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(m) = t["metricName"].as_str() {
                seen += 1;
                assert!(SQS_METRICS.contains(&m), "{m} is not an SQS metric");
                assert_eq!(t["namespace"], "AWS/SQS");
            }
        }
    }
    assert!(seen >= 4, "{seen} CloudWatch queries");
}

/// Every exporter metric a panel reads is one a live `dlqctl exporter` serves: a RabbitMQ
/// channel applied, three classified, timestamped dead letters published into its DLQ, the
/// exporter scraped after its third reading, and each name looked up as a `# TYPE` line. The names it
/// could not find are listed, and the test fails on them.
#[test]
fn panels_name_only_metrics_a_live_exporter_serves() {
    let Some(f) = support::rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    support::rabbit::fill(&dlq, 3, |i| {
        let class = if i == 0 {
            "poison"
        } else {
            "transient_exhausted"
        };
        let props = lapin::BasicProperties::default()
            .with_headers(support::rabbit::table(&[(
                "dlq-error-class",
                support::rabbit::text(class),
            )]))
            .with_timestamp(now - 600);
        (format!("e{i}").into_bytes(), props)
    });
    support::rabbit::wait_for_messages(&dlq, 3);
    // A reading a second: RabbitMQ's totals are published once two readings agree on them
    // (docs/status.md, "Flow"), so the scrape taken is the one after the third reading.
    let exporter = support::exporter::Exporter::start(&f, &["--interval", "1s", "--peek"]);
    let readings = |body: &str| -> u64 {
        body.lines()
            .find_map(|l| l.strip_prefix("dlq_exporter_reads_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let scrape = exporter.until(std::time::Duration::from_secs(60), |b| readings(b) >= 3);
    drop(exporter);
    assert!(readings(&scrape) >= 3, "three readings in 60 s:\n{scrape}");
    let out = f.path().join("dash");
    f.run(&[
        "dashboards",
        "channel.yaml",
        "--out",
        out.to_str().expect("utf-8"),
    ])
    .ok();
    let text =
        std::fs::read_to_string(out.join("dlq-target-local-rabbitmq.json")).expect("the dashboard");
    let names = promql_metrics(&text);
    assert!(names.len() >= 5, "{names:?}");
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !scrape.contains(&format!("# TYPE {n} ")))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard's panels read {} metric(s) the exporter does not serve: {missing:?}\n(all read: {names:?})\nscrape:\n{scrape}",
        missing.len()
    );
}
