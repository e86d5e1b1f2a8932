//! Issue 35: docs/operations.md's Kubernetes manifests (docs/k8s/: the redrive and archive
//! CronJobs, the exporter's Deployment and Service) pass a real Kubernetes
//! schema validator, offline: `kubernetes-validate` (PyPI, pinned in scripts/stack, with
//! Kubernetes' own OpenAPI schemas bundled), `--strict` (an unknown field is an error). No
//! cluster runs here: the manifests never met an API server. The ServiceMonitor is a custom
//! resource of the Prometheus Operator, whose schema is not bundled: it is parsed, not
//! validated. The dlqctl arguments each manifest runs are parsed by dlqctl's own CLI.

mod support;

use std::path::PathBuf;
use std::process::Command;

use clap::Parser as _;

fn validator() -> Option<PathBuf> {
    let bin = support::cache_dir().join("venv/bin/kubernetes-validate");
    support::require(
        "kubernetes-validate (scripts/stack up installs it)",
        bin.is_file(),
    )
    .then_some(bin)
}

const VALIDATED: [&str; 3] = [
    "docs/k8s/redrive-cronjob.yaml",
    "docs/k8s/archive-cronjob.yaml",
    "docs/k8s/exporter.yaml",
];

#[test]
fn the_cronjob_and_the_exporter_deployment_pass_kubernetes_own_schemas() {
    let Some(bin) = validator() else { return };
    for file in VALIDATED {
        let out = support::output(
            Command::new(&bin)
                .args(["--strict", "--kubernetes-version", "1.37.0"])
                .arg(support::root().join(file))
                // Offline: a schema fetched from the network would fail.
                .env("HTTPS_PROXY", "http://127.0.0.1:9")
                .env("HTTP_PROXY", "http://127.0.0.1:9"),
        );
        out.ok_with(file);
        assert!(
            out.stdout.contains("passed") && !out.stdout.contains("ERROR"),
            "{file}: {}{}",
            out.stdout,
            out.stderr
        );
    }
    // The validator can fail: a CronJob without its schedule does not pass.
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(support::root().join(VALIDATED[0])).expect("manifest");
    std::fs::write(&bad, text.replace("  schedule:", "  schedul:")).expect("write");
    let out = support::output(Command::new(&bin).arg("--strict").arg(&bad));
    assert_ne!(out.code, 0, "{}", out.stdout);
}

/// Every container's `args` in docs/k8s/ parse as a dlqctl command line.
#[test]
fn the_manifests_run_dlqctl_with_arguments_it_has() {
    let mut seen = 0;
    for file in [
        "docs/k8s/redrive-cronjob.yaml",
        "docs/k8s/archive-cronjob.yaml",
        "docs/k8s/exporter.yaml",
        "docs/k8s/servicemonitor.yaml",
    ] {
        let text = std::fs::read_to_string(support::root().join(file)).expect("manifest");
        let docs = dlqctl::spec::yaml::parse(&text, dlqctl::spec::yaml::Limits::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        for doc in docs {
            let v = doc.root.to_json();
            let spec = &v["spec"];
            let pod = if v["kind"] == "CronJob" {
                &spec["jobTemplate"]["spec"]["template"]["spec"]
            } else {
                &spec["template"]["spec"]
            };
            for c in pod["containers"].as_array().into_iter().flatten() {
                let args: Vec<&str> = c["args"]
                    .as_array()
                    .expect("args")
                    .iter()
                    .map(|a| a.as_str().expect("a string"))
                    .collect();
                dlqctl::cli::Cli::try_parse_from(std::iter::once("dlqctl").chain(args.clone()))
                    .unwrap_or_else(|e| panic!("{file}: dlqctl {args:?}: {e}"));
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 3, "the redrive and archive CronJobs and the exporter");
}

/// Issue 35, `--target`, live: examples/ has `payments-transactions-pending` on SQS and on
/// Pub/Sub; with `--target` each of `status`, `redrive --dry-run` and `archive --dry-run`
/// reads the one it names (the JSON says which target it read), and exits 0 or says why.
#[test]
fn target_says_which_of_the_two_example_channels_named_alike_is_read() {
    if !support::whole_stack_up() {
        return;
    }
    const NAME: &str = "payments-transactions-pending";
    for target in ["local-sqs", "local-pubsub"] {
        let out = support::output(
            support::dlqctl()
                .envs(support::local_env())
                .args(["status", "examples/", "--channel", NAME, "--target", target])
                .args(["--no-peek", "--format", "json"]),
        );
        out.ok_with(format!("status --target {target}"));
        let doc = out.json("the status document");
        let targets: Vec<&str> = doc["channels"]
            .as_array()
            .expect("channels")
            .iter()
            .map(|c| c["target"].as_str().expect("target"))
            .collect();
        assert!(
            !targets.is_empty() && targets.iter().all(|t| *t == target),
            "{targets:?}"
        );
        for verb in ["redrive", "archive"] {
            let mut cmd = support::dlqctl();
            cmd.envs(support::local_env())
                .args([verb, NAME, "examples/", "--target", target, "--dry-run"])
                .args(["--format", "json"]);
            if verb == "archive" {
                cmd.args(["--to", "/nonexistent-never-written"]);
            }
            let out = support::output(&mut cmd);
            // Not applied here, the queues may not exist: then the refusal names this
            // target's DLQ, never the other target's.
            let text = format!("{}{}", out.stdout, out.stderr);
            assert!(
                !text.contains("say which with --target"),
                "{verb} --target {target}: {text}"
            );
            if out.code == 0 {
                let doc = out.json("the report");
                assert_eq!(doc["target"], target, "{verb}: {doc:#}");
            }
        }
    }
}
