//! `dlqctl lint` through the real binary: every invalid fixture yields its snapshot and the
//! rule it was written for; the examples are clean; the committed schemas are current.

mod support;

use std::path::Path;

use support::{dlqctl_bare as dlqctl, root};

fn run(args: &[&str]) -> support::Output {
    support::output(dlqctl().args(args))
}

fn targets_for(fixture: &str) -> Vec<String> {
    if fixture.contains("kind: Targets") {
        Vec::new()
    } else {
        vec!["--targets".into(), "tests/fixtures/targets.yaml".into()]
    }
}

/// Each fixture's first line is `# expect: RULE[, RULE...]`: the findings it must produce.
fn expected_rules(text: &str) -> Vec<String> {
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("# expect:"))
        .map(|r| {
            r.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn invalid_fixtures_match_their_snapshots() {
    let dir = root().join("tests/fixtures/invalid");
    let mut count = 0;
    insta::glob!("fixtures/invalid/*", |path| {
        count += 1;
        let rel = path.strip_prefix(root()).expect("fixture under the repo");
        let rel = rel.to_str().expect("utf-8 path");
        let bytes = std::fs::read(path).expect("fixture readable");
        let text = String::from_utf8_lossy(&bytes);
        let expect = expected_rules(&text);
        assert!(
            !expect.is_empty(),
            "{rel}: first line must be `# expect: RULE`"
        );
        let mut args = vec!["lint", "--color", "never", rel];
        let targets = targets_for(&text);
        args.extend(targets.iter().map(String::as_str));
        let r = run(&args);
        assert!(r.stderr.is_empty(), "{rel}: stderr: {}", r.stderr);
        for rule in &expect {
            assert!(
                r.stdout.contains(&format!("[{rule}]")),
                "{rel}: expected a `{rule}` finding, got:\n{}",
                r.stdout
            );
        }
        let errors_expected = expect.iter().any(|r| !is_advice(r));
        assert_eq!(
            r.code,
            i32::from(errors_expected),
            "{rel}: exit code\n{}",
            r.stdout
        );
        insta::assert_snapshot!(format!("exit: {}\n{}", r.code, r.stdout));
    });
    assert!(dir.is_dir());
    assert!(count >= 30, "at least 30 invalid fixtures, found {count}");
}

/// Rules that only warn or inform (exit 0 without --deny-warnings).
fn is_advice(rule: &str) -> bool {
    dlqctl::spec::rules::ADVICE_RULES.contains(&rule) || rule == "lint/unknown-rule"
}

#[test]
fn examples_are_clean_even_with_deny_warnings() {
    let r = run(&["lint", "--color", "never", "--deny-warnings", "examples"]);
    r.ok();
    r.assert_stdout_contains("no problems found");
}

#[test]
fn examples_point_editors_at_the_schema() {
    for entry in std::fs::read_dir(root().join("examples")).expect("examples/") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("readable");
        let first = text.lines().next().unwrap_or_default();
        let schema = first
            .strip_prefix("# yaml-language-server: $schema=")
            .unwrap_or_else(|| panic!("{}: first line must name the schema", path.display()));
        let file = path.parent().map(|p| p.join(schema)).expect("parent");
        assert!(
            file.is_file(),
            "{}: {schema} does not exist",
            path.display()
        );
    }
}

#[test]
fn committed_schemas_are_current() {
    let r = run(&["schema", "--check", "--out-dir", "schemas"]);
    r.ok_with("schemas/ is stale: run `cargo run -- schema` and commit the result");
}

#[test]
fn committed_schemas_accept_the_examples() {
    // The schema file an editor uses must agree with the binary on every example.
    for (file, schema) in [
        ("examples/payments-sqs.yaml", "schemas/channel.v1.json"),
        ("examples/dlqctl.yaml", "schemas/targets.v1.json"),
    ] {
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(root().join(schema)).expect("schema"))
                .expect("json");
        let validator = jsonschema::validator_for(&schema).expect("valid schema");
        let ws = dlqctl::spec::load::load(&[root().join(file)], None).expect("loads");
        assert!(ws.diagnostics.is_empty(), "{file}: {:?}", ws.diagnostics);
        let text = std::fs::read_to_string(root().join(file)).expect("example");
        let docs = dlqctl::spec::yaml::parse(&text, Default::default()).expect("yaml");
        for d in docs {
            let errors: Vec<String> = validator
                .iter_errors(&d.root.to_json())
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{file}: {errors:?}");
        }
    }
}

#[test]
fn output_formats() {
    let f = "tests/fixtures/invalid/sqs-retention-range.yaml";
    for format in ["json", "github"] {
        let r = run(&[
            "lint",
            "--format",
            format,
            f,
            "--targets",
            "tests/fixtures/targets.yaml",
        ]);
        assert_eq!(r.code, 1);
        insta::assert_snapshot!(format!("format-{format}"), r.stdout);
    }
    let json: serde_json::Value = serde_json::from_str(
        &run(&[
            "lint",
            "--format",
            "json",
            f,
            "--targets",
            "tests/fixtures/targets.yaml",
        ])
        .stdout,
    )
    .expect("lint --format json is JSON");
    assert_eq!(json["format_version"], 1);
}

/// The official SARIF 2.1.0 schema (tests/fixtures/sarif/README.md says where it is from).
fn sarif_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("tests/fixtures/sarif/sarif-2.1.0-rtm.5.json"))
        .expect("the vendored SARIF schema");
    // One pattern in it (`run.language`) has a bare `]`, a literal in JavaScript's regexes
    // but an error in Rust's; escaped here, in memory, to the same meaning. The file stays as
    // published.
    let bad = r#""^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$""#;
    assert!(
        text.contains(bad),
        "the vendored schema changed: revisit this fix-up"
    );
    let text = text.replace(bad, r#""^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}\\]?$""#);
    let schema: serde_json::Value = serde_json::from_str(&text).expect("json");
    jsonschema::validator_for(&schema).expect("a valid schema")
}

fn sarif_errors(validator: &jsonschema::Validator, log: &serde_json::Value) -> Vec<String> {
    validator
        .iter_errors(log)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn sarif_of_every_invalid_fixture_is_valid_sarif_2_1_0() {
    let validator = sarif_validator();
    // The schema really checks: a log without `runs` is refused.
    assert!(!sarif_errors(&validator, &serde_json::json!({"version": "2.1.0"})).is_empty());
    let r = run(&[
        "lint",
        "--format",
        "sarif",
        "tests/fixtures/invalid",
        "--targets",
        "tests/fixtures/targets.yaml",
    ]);
    r.exits(1);
    let log: serde_json::Value = serde_json::from_str(&r.stdout).expect("SARIF is JSON");
    let errors = sarif_errors(&validator, &log);
    assert!(errors.is_empty(), "not valid SARIF 2.1.0: {errors:#?}");
    let run = &log["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    let results = run["results"].as_array().expect("results");
    assert!(results.len() > 100, "{} results", results.len());
    for result in results {
        let id = result["ruleId"].as_str().expect("ruleId");
        let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules[index]["id"], id, "ruleIndex of {id}");
        assert!(
            rules[index]["help"]["text"]
                .as_str()
                .is_some_and(|h| !h.is_empty()),
            "{id} has help"
        );
        let location = &result["locations"][0]["physicalLocation"];
        let uri = location["artifactLocation"]["uri"].as_str().expect("uri");
        assert!(
            uri.starts_with("tests/fixtures/invalid/") || uri == "tests/fixtures/targets.yaml",
            "a relative path: {uri}"
        );
        assert!(
            location["region"]["startLine"]
                .as_u64()
                .is_some_and(|l| l >= 1)
        );
    }
    // Every level a finding can have.
    for level in ["error", "warning", "note"] {
        assert!(results.iter().any(|r| r["level"] == level), "no {level}");
    }
}

#[test]
fn sarif_snapshot_of_errors_and_warnings_with_related_locations_across_files() {
    let r = run(&[
        "lint",
        "--format",
        "sarif",
        "tests/fixtures/invalid/name-collision-across-channels.yaml",
        "tests/fixtures/invalid/retry-none.yaml",
        "--targets",
        "tests/fixtures/targets.yaml",
    ]);
    r.exits(1);
    let log: serde_json::Value = serde_json::from_str(&r.stdout).expect("SARIF is JSON");
    assert!(sarif_errors(&sarif_validator(), &log).is_empty());
    let mut settings = insta::Settings::clone_current();
    // The version carries the commit the binary was built from.
    settings.add_filter(
        r#""version": "\d+\.\d+\.\d+[^"]*""#,
        r#""version": "[VERSION]""#,
    );
    settings.bind(|| insta::assert_snapshot!("format-sarif", r.stdout));
}

#[test]
fn colour_only_when_asked_and_never_with_no_color() {
    let f = "tests/fixtures/invalid/sqs-retention-range.yaml";
    let plain = run(&["lint", f, "--targets", "tests/fixtures/targets.yaml"]);
    assert!(!plain.stdout.contains('\x1b'), "not a terminal: no colour");
    let forced = run(&[
        "lint",
        "--color",
        "always",
        f,
        "--targets",
        "tests/fixtures/targets.yaml",
    ]);
    assert!(forced.stdout.contains('\x1b'), "--color always colours");
}

#[test]
fn missing_path_is_a_usage_error() {
    let r = run(&["lint", "does/not/exist.yaml"]);
    assert_eq!(r.code, 2);
    r.assert_stderr_contains("does/not/exist.yaml");
}

#[test]
fn non_dlqctl_yaml_is_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("ci.yml"), "on: push\njobs: {}\n").expect("write");
    let r = run(&[
        "lint",
        "--color",
        "never",
        dir.path().to_str().expect("utf-8"),
    ]);
    r.ok();
}

/// What a real repository holds beside dlqctl specs: none of it is dlqctl's, whatever its tags,
/// syntax or keys, so a hook over every YAML file passes it (skipped and counted); a dlqctl
/// file beside them keeps every check, a mistyped apiVersion included.
#[test]
fn foreign_yaml_of_a_real_repository_is_skipped_whatever_its_syntax() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = [
        (
            "template.yaml",
            "AWSTemplateFormatVersion: '2010-09-09'\nResources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n      QueueName: !Sub '${AWS::StackName}-q'\n      RedrivePolicy:\n        deadLetterTargetArn: !GetAtt DLQ.Arn\n",
        ),
        (
            "deployment.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n{{- if .Values.x }}\n  labels: {{ toYaml .Values.labels | nindent 4 }}\n{{- end }}\n",
        ),
        ("dup.yaml", "a: 1\nb: 2\na: 3\n"),
        ("latin1.yaml", "name: caf\u{e9}\n"),
    ];
    for (name, text) in files {
        let bytes = if name == "latin1.yaml" {
            b"name: caf\xe9\n".to_vec()
        } else {
            text.as_bytes().to_vec()
        };
        std::fs::write(dir.path().join(name), bytes).expect("write");
    }
    let d = dir.path().to_str().expect("utf-8");
    let r = run(&["lint", "--color", "never", d]);
    r.ok();
    r.assert_stdout_contains("(4 skipped: not dlqctl documents)");

    // A dlqctl document with a mistyped apiVersion is still ours: reported, never skipped.
    std::fs::write(
        dir.path().join("typo.yaml"),
        "apiVersion: v1\nkind: Channel\nmetadata: {name: typo}\nspec: {target: x}\n",
    )
    .expect("write");
    let r = run(&["lint", "--color", "never", d]);
    r.exits(1);
    r.assert_stdout_contains("typo.yaml");
    std::fs::remove_file(dir.path().join("typo.yaml")).expect("remove");

    // A broken dlqctl file beside them is still checked, however its keys are written.
    std::fs::write(
        dir.path().join("quoted.yaml"),
        "\"apiVersion\": \"dlqctl/v1\"\n\"kind\": \"Channel\"  # the channel\nspec:\n  target: x\n  target: y\n",
    )
    .expect("write");
    let r = run(&["lint", "--color", "never", d]);
    r.exits(1);
    r.assert_stdout_contains("quoted.yaml");
    std::fs::remove_file(dir.path().join("quoted.yaml")).expect("remove");
    std::fs::write(
        dir.path().join("orders.yaml"),
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: orders}\nspec:\n  target: x\n  target: y\n",
    )
    .expect("write");
    let r = run(&["lint", "--color", "never", d]);
    r.exits(1);
    r.assert_stdout_contains("[yaml/duplicate-key]");
}

#[test]
fn warnings_fail_only_with_deny_warnings() {
    let f = "tests/fixtures/invalid/alarms-missing.yaml";
    let t = ["--targets", "tests/fixtures/targets.yaml"];
    let plain = run(&[&["lint", f][..], &t[..]].concat());
    plain.ok();
    let deny = run(&[&["lint", "--deny-warnings", f][..], &t[..]].concat());
    deny.exits(1);
}

/// Issue 39: `plan` and `apply` fold lint warnings to one line per rule, but never an error:
/// it stops the command, shown in full as `lint` shows it, before any server is asked (the
/// target's endpoint is a closed port). `-v` shows the warnings in full as well.
#[test]
fn plan_and_apply_show_an_error_in_full_and_fold_the_warnings_beside_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &str| {
        std::fs::write(dir.path().join(name), text).expect("write");
    };
    write(
        "dlqctl.yaml",
        "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  sqs: {backend: sqs, region: us-east-1, endpoint: \"http://127.0.0.1:9\"}\n",
    );
    let channel = |name: &str, spec: &str| {
        format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {name}}}\nspec:\n  target: sqs\n{spec}"
        )
    };
    for name in ["a", "b", "c", "d", "e"] {
        write(
            &format!("{name}.yaml"),
            &channel(
                name,
                "  retry: {maxAttempts: 3}\n  deadLetter: {retention: 7d}\n",
            ),
        );
    }
    write("f.yaml", &channel("f", "  retry: {maxAttempts: 0}\n"));
    let at = |args: &[&str]| {
        let r = support::output(dlqctl().current_dir(dir.path()).args(args));
        r.exits(1);
        assert!(r.stdout.is_empty(), "no plan: {}", r.stdout);
        r
    };
    let plan = at(&["plan", "."]);
    // The apply stops at the same place, before its question or any write.
    let apply = at(&["apply", ".", "--auto-approve"]);
    assert_eq!(apply.stderr, plan.stderr);
    assert_eq!(
        plan.stderr.matches("error[schema/range]").count(),
        1,
        "{}",
        plan.stderr
    );
    assert!(!plan.stderr.contains("warning["), "{}", plan.stderr);
    insta::assert_snapshot!("plan-error-and-folded-warnings", plan.stderr);

    let verbose = at(&["plan", ".", "-v"]);
    for (finding, n) in [
        ("error[schema/range]", 1),
        ("warning[deadletter/discard-undeclared]", 5),
        ("warning[alarms/missing]", 5),
    ] {
        assert_eq!(
            verbose.stderr.matches(finding).count(),
            n,
            "{}",
            verbose.stderr
        );
    }
    verbose.assert_stderr_contains("7 files checked: 1 error, 10 warnings.");
}

#[test]
fn help_is_snapshotted() {
    for args in [
        &["--help"][..],
        &["lint", "--help"][..],
        &["schema", "--help"][..],
        &["plan", "--help"][..],
        &["apply", "--help"][..],
        &["status", "--help"][..],
        &["exporter", "--help"][..],
        &["redrive", "--help"][..],
        &["archive", "--help"][..],
        &["audit", "--help"][..],
        &["alerts", "--help"][..],
        &["graph", "--help"][..],
        &["completions", "--help"][..],
        &["man", "--help"][..],
    ] {
        let r = run(args);
        r.ok();
        insta::assert_snapshot!(
            format!("help-{}", args.join("-").trim_start_matches('-')),
            r.stdout
        );
    }
}

#[test]
fn fixture_paths_exist() {
    assert!(Path::new(&root().join("tests/fixtures/targets.yaml")).is_file());
}

#[test]
fn a_defaults_backend_block_applies_only_to_channels_of_that_backend() {
    // Regression: an `sqs:` block in Defaults used to reach Kafka channels too.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("specs.yaml"),
        "apiVersion: dlqctl/v1\nkind: Defaults\nspec:\n  sqs: {visibilityTimeout: 60s}\n---\n\
         apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: app.inventory}\nspec:\n  target: kafka\n  retry: {maxAttempts: 3}\n  lint: {allow: [alarms/missing]}\n---\n\
         apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: payments}\nspec:\n  target: sqs\n  retry: {maxAttempts: 3, backoff: {initial: 1s}}\n  alarms: {depth: {above: 0}}\n",
    )
    .expect("write");
    let ws = dlqctl::spec::load::load(
        &[dir.path().join("specs.yaml")],
        Some(&root().join("tests/fixtures/targets.yaml")),
    )
    .expect("loads");
    let (findings, checked) = dlqctl::spec::rules::check(&ws);
    assert!(
        ws.diagnostics.is_empty()
            && findings
                .iter()
                .all(|d| d.severity != dlqctl::diag::Severity::Error),
        "{findings:?}"
    );
    let sqs = checked
        .iter()
        .find(|c| c.resolved.channel == "payments")
        .expect("sqs channel");
    assert_eq!(
        sqs.resolved
            .sqs
            .as_ref()
            .map(|s| s.visibility_timeout.as_millis()),
        Some(60_000),
        "the SQS channel inherits it"
    );
}

#[test]
fn a_directory_walk_reads_symlinked_spec_files_but_not_symlinked_folders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shared = dir.path().join("shared");
    let specs = dir.path().join("specs");
    std::fs::create_dir_all(&shared).expect("mkdir");
    std::fs::create_dir_all(&specs).expect("mkdir");
    std::fs::copy(
        root().join("examples/payments-sqs.yaml"),
        shared.join("payments.yaml"),
    )
    .expect("copy");
    std::os::unix::fs::symlink(shared.join("payments.yaml"), specs.join("payments.yaml"))
        .expect("symlink");
    // A link back to an ancestor: followed, it would loop.
    std::os::unix::fs::symlink(dir.path(), specs.join("loop")).expect("symlink");
    let ws = dlqctl::spec::load::load(
        std::slice::from_ref(&specs),
        Some(&root().join("examples/dlqctl.yaml")),
    )
    .expect("loads");
    let names: Vec<&str> = ws
        .channels
        .iter()
        .map(|c| c.value.metadata.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["payments-transactions-pending"],
        "{:?}",
        ws.diagnostics
    );
}

#[test]
fn a_file_over_the_size_cap_is_refused_unread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big.yaml");
    let line = "# padding padding padding padding padding padding padding padding\n";
    std::fs::write(&big, line.repeat((1024 * 1024) / line.len() + 10)).expect("write");
    let r = run(&["lint", "--color", "never", big.to_str().expect("utf-8")]);
    r.exits(1);
    assert!(
        r.stdout.contains("[file/too-large]") && r.stdout.contains("big.yaml:1:1"),
        "{}",
        r.stdout
    );
}

/// Peak resident memory of all finished child processes, in KiB (Linux `ru_maxrss`).
fn children_max_rss_kib() -> i64 {
    // SAFETY: getrusage writes into the zeroed struct we own; no other invariants.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage.ru_maxrss
    }
}

#[test]
fn every_hostile_file_gets_located_findings_in_bounded_time_and_memory() {
    let dir = root().join("tests/fixtures/invalid");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 50,
        "the hostile corpus has at least 50 files"
    );
    for path in &files {
        let rel = path
            .strip_prefix(root())
            .expect("under root")
            .to_str()
            .expect("utf-8")
            .to_owned();
        let text = String::from_utf8_lossy(&std::fs::read(path).expect("read")).into_owned();
        let mut args = vec![
            "lint".to_owned(),
            "--format".into(),
            "json".into(),
            rel.clone(),
        ];
        args.extend(targets_for(&text));
        let started = std::time::Instant::now();
        let r = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(5),
            "{rel}: took {took:?}"
        );
        assert!(!r.stderr.contains("panicked"), "{rel}: {}", r.stderr);
        let doc: serde_json::Value =
            serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{rel}: {e}\n{}", r.stdout));
        let diags = doc["diagnostics"].as_array().expect("diagnostics");
        assert!(!diags.is_empty(), "{rel}: no finding");
        for d in diags {
            assert!(
                d["file"].is_string()
                    && d["line"].as_u64().is_some_and(|l| l >= 1)
                    && d["column"].as_u64().is_some(),
                "{rel}: finding without a location: {d}"
            );
        }
    }
    let rss_mib = children_max_rss_kib() / 1024;
    assert!(rss_mib < 64, "a lint run peaked at {rss_mib} MiB");
}

#[test]
fn target_addresses_read_the_environment_and_are_checked_as_expanded() {
    let lint = |var: Option<&str>| {
        let mut c = dlqctl();
        c.args(["lint", "--color", "never", "examples/"]);
        if let Some(v) = var {
            c.env("DLQCTL_RABBITMQ_URL", v);
        }
        let out = c.output().expect("dlqctl runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    // Unset: the default in examples/dlqctl.yaml; set to a good URL: used.
    assert_eq!(lint(None).0, 0);
    assert_eq!(lint(Some("https://rabbit.internal:15671")).0, 0);
    // Set but empty: the default, as with the shell's `:-`.
    assert_eq!(lint(Some("")).0, 0);
    // The expanded value is what is checked, at the reference's position.
    let (code, out) = lint(Some("ftp://elsewhere:15672"));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("[target/url]")
            && out.contains("found `ftp://elsewhere:15672`")
            && out.contains("examples/dlqctl.yaml:15:"),
        "{out}"
    );
    // A value that still holds `${` after a good expansion is checked all the same.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("dlqctl.yaml"),
        "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  r:\n    backend: rabbitmq\n    url: \"http://admin:hunter2@127.0.0.1:15672/$${X:-}{\"\n    ownership: {prefixes: [o.]}\n",
    )
    .expect("write");
    let out = dlqctl()
        .args(["lint", "--color", "never"])
        .arg(dir.path().join("dlqctl.yaml"))
        .output()
        .expect("dlqctl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("[target/credentials-in-url]"), "{text}");
    // Credentials from the environment are refused like written ones, and never shown.
    let (code, out) = lint(Some("http://admin:hunter2@rabbit:15672"));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("[target/credentials-in-url]"), "{out}");
    assert!(!out.contains("hunter2"), "{out}");
}
