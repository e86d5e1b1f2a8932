//! `dlqctl alerts` through the real binary: snapshots of both formats, `--check`'s exit codes,
//! and Prometheus's own tools on the output: `promtool check rules` (the file loads) and
//! `promtool test rules` with `tests/fixtures/alerts/rules.test.yaml` (each alert fires on
//! synthetic series above its threshold, and not below or after the DLQ is emptied).
//!
//! promtool comes from `$DLQCTL_PROMTOOL` (which `scripts/stack env` exports), else `PATH`.
//! Under `CI=true` or `DLQCTL_LIVE_REQUIRED=1` a missing promtool fails these tests, as a
//! missing server fails the live ones; otherwise they skip loudly.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{dlqctl, output, root};

const FIXTURES: &str = "tests/fixtures/alerts";

fn alerts(args: &[&str]) -> support::Output {
    output(dlqctl().arg("alerts").args(args).args(["--color", "never"]))
}

/// The promtool binary, or `None` (skip) when it is missing and live tests may skip.
fn promtool() -> Option<PathBuf> {
    let path = std::env::var_os("DLQCTL_PROMTOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("promtool"));
    let found = Command::new(&path)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    support::require(
        &format!(
            "promtool ({}; `scripts/stack up` installs it)",
            path.display()
        ),
        found,
    )
    .then_some(path)
}

fn run_promtool(promtool: &Path, dir: &Path, args: &[&str]) -> support::Output {
    output(Command::new(promtool).args(args).current_dir(dir))
}

#[test]
fn both_formats_match_their_snapshots() {
    let r = alerts(&[FIXTURES]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    insta::assert_snapshot!("alerts-prometheus", r.stdout);
    insta::assert_snapshot!("alerts-report", r.stderr);
    let op = alerts(&[FIXTURES, "--format", "prometheus-operator"]);
    assert_eq!(op.code, 0, "{}", op.stderr);
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
    assert_eq!(b.code, 0, "{}", b.stderr);
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
    assert_eq!(w.code, 0, "{}", w.stderr);
    assert!(w.stdout.is_empty(), "--out writes nothing to stdout");
    let ok = alerts(&[FIXTURES, "--check", file_s]);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    ok.assert_stderr_contains("is up to date");

    // Someone edits a threshold in the committed file: --check says so, with the line.
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(&file, text.replacen("> 1800", "> 900", 1)).expect("write");
    let stale = alerts(&[FIXTURES, "--check", file_s]);
    assert_eq!(stale.code, 2, "{}", stale.stderr);
    stale.assert_stdout_contains("-        expr: \"dlq_oldest_message_age_seconds{target=\\\"rabbit\\\",channel=\\\"orders.created\\\"} > 900\"");
    stale.assert_stdout_contains("+        expr: \"dlq_oldest_message_age_seconds{target=\\\"rabbit\\\",channel=\\\"orders.created\\\"} > 1800\"");
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
    assert_eq!(r.code, 1, "{}", r.stderr);
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
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules.yaml");
    let w = alerts(&[FIXTURES, "--out", rules.to_str().expect("utf-8")]);
    assert_eq!(w.code, 0, "{}", w.stderr);
    let check = run_promtool(&promtool, dir.path(), &["check", "rules", "rules.yaml"]);
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    check.assert_stdout_contains("SUCCESS: 7 rules found");

    std::fs::copy(
        root().join(FIXTURES).join("rules.test.yaml"),
        dir.path().join("rules.test.yaml"),
    )
    .expect("copy the unit tests");
    let test = run_promtool(&promtool, dir.path(), &["test", "rules", "rules.test.yaml"]);
    assert_eq!(test.code, 0, "{}{}", test.stdout, test.stderr);
    test.assert_stdout_contains("SUCCESS");

    // The unit tests can fail: with the warning threshold moved, the 15-minute case breaks.
    let text = std::fs::read_to_string(&rules).expect("read");
    std::fs::write(&rules, text.replacen("> 1800", "> 3500", 1)).expect("write");
    let broken = run_promtool(&promtool, dir.path(), &["test", "rules", "rules.test.yaml"]);
    assert_eq!(broken.code, 1, "{}{}", broken.stdout, broken.stderr);
}

#[test]
fn the_examples_rules_load_in_promtool() {
    let Some(promtool) = promtool() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    for (format, file) in [("prometheus", "rules.yaml")] {
        let path = dir.path().join(file);
        let w = alerts(&[
            "examples",
            "--format",
            format,
            "--out",
            path.to_str().expect("utf-8"),
        ]);
        assert_eq!(w.code, 0, "{}", w.stderr);
        w.assert_stderr_contains("2 SQS channels left out");
        let check = run_promtool(&promtool, dir.path(), &["check", "rules", file]);
        assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    }
}
