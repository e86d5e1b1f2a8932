//! Promises a production apply depends on, each proven against the real local RabbitMQ,
//! through a fault-injecting proxy where the fault cannot be had otherwise:
//! flaky reads leave the plan unchanged; a failed step stops apply and the next plan lists
//! exactly the remainder, also when it happens while other steps are in flight (which finish);
//! a write whose answer was lost is re-read, not retried; Ctrl-C lets the steps in flight
//! finish; credentials never appear anywhere; bad connections give one
//! actionable line.

mod support;

use std::io::Read;
use std::time::{Duration, Instant};

use support::block;
use support::proxy::{Faults, Proxy};
use support::rabbit::{Fixture, api, delete_queue};

fn rabbit_throttle() -> Faults {
    Faults {
        throttle_status: 503,
        throttle_body: r#"{"error":"service_unavailable","reason":"throttled"}"#.into(),
        ..Faults::default()
    }
}

/// A fixture whose target talks to RabbitMQ through a proxy with `faults`, the example
/// written; `None` when live tests may skip.
fn through_proxy(faults: Faults) -> Option<(Proxy, Fixture)> {
    let proxy = Proxy::start(&support::rabbitmq_url(), faults);
    let f = Fixture::with_url(&proxy.addr)?;
    f.write_example(|t| t);
    Some((proxy, f))
}

/// Plans `via`, a workspace whose target is behind `proxy`, and checks it against the direct
/// `baseline` (`plan --stats`): the same plan, within the retry budget. Returns the number of
/// faults the proxy injected.
fn assert_plan_unchanged_under_faults(
    seed: u64,
    proxy: &Proxy,
    via: &support::workspace::Workspace,
    baseline: &support::Output,
) -> u64 {
    let base_calls = calls(&baseline.stderr);
    let flaky = via.run(&["plan", "channel.yaml", "--stats"]);
    flaky.ok_with(format!("seed {seed}"));
    assert_eq!(
        flaky.stdout, baseline.stdout,
        "seed {seed}: the plan must not change under faults"
    );
    // The retry budget (documented in README and backend/retry.rs) per read.
    let attempts = calls(&flaky.stderr);
    assert!(
        attempts <= base_calls * u64::from(dlqctl::backend::retry::READ_ATTEMPTS),
        "seed {seed}: {attempts} calls for {base_calls} reads"
    );
    proxy
        .counters
        .faulted
        .load(std::sync::atomic::Ordering::SeqCst)
}

/// Total API calls from `plan --stats` output.
fn calls(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("API calls: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `API calls:` line in\n{stderr}"))
}

#[test]
fn throttled_and_dropped_reads_leave_the_plan_byte_identical() {
    let Some(direct) = Fixture::applied() else {
        return;
    };
    // One change to show, so the plan has content worth comparing.
    let retry = direct.names()[1].clone();
    delete_queue(&retry);
    let baseline = direct.run(&["plan", "channel.yaml", "--stats"]);
    baseline.ok();

    let mut faulted = 0;
    for seed in 1..=8 {
        let proxy = Proxy::start(
            &support::rabbitmq_url(),
            Faults {
                read_fault_percent: 20,
                seed,
                ..rabbit_throttle()
            },
        );
        let Some(via) = Fixture::with_url(&proxy.addr) else {
            return;
        };
        std::fs::copy(
            direct.path().join("channel.yaml"),
            via.path().join("channel.yaml"),
        )
        .expect("copy spec");
        faulted += assert_plan_unchanged_under_faults(seed, &proxy, &via, &baseline);
    }
    assert!(
        faulted >= 3,
        "the proxy injected only {faulted} faults: the test proves nothing"
    );
}

#[test]
fn a_failed_step_stops_apply_and_the_next_plan_lists_exactly_the_remainder() {
    let Some((_proxy, f)) = through_proxy(Faults {
        fail_write: Some(3),
        ..rabbit_throttle()
    }) else {
        return;
    };
    let a = f.apply(&[]);
    a.exits(1);
    assert!(
        a.stderr.contains("[1/7]") && a.stderr.contains("[2/7]"),
        "{}",
        a.stderr
    );
    a.assert_stderr_contains("FAILED");
    a.assert_stderr_contains("Apply stopped after 2 of 7 changes");
    assert!(
        a.stderr.contains("injected failure"),
        "the server's reason is shown\n{}",
        a.stderr
    );
    assert_eq!(a.stderr.matches("not done:").count(), 4, "{}", a.stderr);

    let p = f.plan();
    assert!(
        p.stdout
            .contains("Plan: 5 to create, 0 to update, 0 to replace, 0 to delete."),
        "exactly the remainder\n{}",
        p.stdout
    );
    let done = f.apply(&[]);
    done.ok();
    done.assert_stderr_contains("[5/5]");
    f.plan().ok();
}

/// Deletes every queue, exchange and policy whose name starts with the prefix, also when the
/// test fails.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        support::rabbit::delete_prefixed(&self.0);
    }
}

/// Sends SIGINT to a running `dlqctl apply`, waits for it, and returns its stderr after
/// checking it exited 1.
fn interrupt(mut child: std::process::Child) -> String {
    let ok = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    let status = child.wait().expect("wait");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read");
    assert_eq!(status.code(), Some(1), "{stderr}");
    stderr
}

/// Writes six copies of the example as `channel.yaml` (channels `<channel>0` … `<channel>5`);
/// returns how many changes the plan makes (42: seven objects each).
fn six_channels(f: &Fixture) -> usize {
    let specs: Vec<String> = (0..6)
        .map(|k| support::workspace::renamed("orders-rabbitmq.yaml", &format!("{}{k}", f.channel)))
        .collect();
    std::fs::write(f.path().join("channel.yaml"), specs.join("\n---\n")).expect("write specs");
    let planned = f.plan();
    let total: usize = planned
        .stdout
        .split("Plan: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a plan summary\n{}", planned.stdout));
    assert_eq!(
        total, 42,
        "six channels of seven objects\n{}",
        planned.stdout
    );
    total
}

/// The lines of an apply's stderr that report a finished step.
fn done_lines(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.ends_with(" ms)") && l.contains(" done ("))
        .count()
}

/// Six channels through a proxy that delays every write by 300 ms and fails the 10th: at
/// `parallelism` > 1 the failure happens while other steps are in flight. No step starts
/// after it; the ones in flight finish and are reported; done + failed + not done is every
/// step; the next plan lists exactly what was not done; apply completes it.
fn a_failure_among_steps_in_flight(parallelism: usize) {
    let Some((proxy, f)) = through_proxy(Faults {
        fail_write: Some(10),
        write_delay: Duration::from_millis(300),
        ..rabbit_throttle()
    }) else {
        return;
    };
    let _cleanup = Cleanup(f.channel.clone());
    let total = six_channels(&f);

    let a = f.apply(&["--parallelism", &parallelism.to_string()]);
    a.exits(1);
    let done = done_lines(&a.stderr);
    let failed = a.stderr.lines().filter(|l| l.ends_with(" FAILED")).count();
    let not_done = a.stderr.matches("  not done: ").count();
    a.assert_stderr_contains(&format!("Apply stopped after {done} of {total} changes"));
    a.assert_stderr_contains("injected failure");
    assert_eq!(failed, 1, "{}", a.stderr);
    assert_eq!(
        done + failed + not_done,
        total,
        "every step is accounted for\n{}",
        a.stderr
    );
    let writes = proxy
        .counters
        .writes
        .load(std::sync::atomic::Ordering::SeqCst) as usize;
    assert_eq!(
        writes,
        done + failed,
        "every step that wrote is reported\n{}",
        a.stderr
    );
    // The 10th write failed; at most `parallelism - 1` others were in flight beside it, and
    // none started after it (an apply that went on would make all 42).
    assert!(
        writes < 10 + parallelism,
        "{writes} writes: steps started after the failure\n{}",
        a.stderr
    );
    let after: Vec<&str> = a
        .stderr
        .lines()
        .skip_while(|l| !l.ends_with(" FAILED"))
        .filter(|l| l.contains(" done ("))
        .collect();
    if parallelism == 1 {
        assert_eq!(
            done, 9,
            "one at a time: the nine writes before the failure\n{}",
            a.stderr
        );
        assert!(after.is_empty(), "{}", a.stderr);
    } else {
        assert!(
            !after.is_empty(),
            "steps in flight beside the failure finish and are reported\n{}",
            a.stderr
        );
    }

    let p = f.plan();
    p.assert_stdout_contains(&format!("Plan: {} to create, 0 to update", total - done));
    let rest = f.apply(&["--parallelism", &parallelism.to_string()]);
    rest.ok();
    rest.assert_stderr_contains(&format!(
        "Apply complete: {} changes applied.",
        total - done
    ));
    f.assert_empty_plan("after completing the stopped apply");
}

#[test]
fn a_failure_with_steps_in_flight_stops_cleanly_at_the_default_parallelism() {
    a_failure_among_steps_in_flight(8);
}

#[test]
fn a_failure_one_step_at_a_time_stops_cleanly() {
    a_failure_among_steps_in_flight(1);
}

#[test]
fn ctrl_c_with_steps_in_flight_lets_them_finish_then_stops() {
    let Some((proxy, f)) = through_proxy(Faults {
        write_delay: Duration::from_millis(400),
        ..rabbit_throttle()
    }) else {
        return;
    };
    let _cleanup = Cleanup(f.channel.clone());
    let total = six_channels(&f);
    let child = f.spawn_apply();
    let writes = || {
        proxy
            .counters
            .writes
            .load(std::sync::atomic::Ordering::SeqCst) as usize
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while writes() < 3 {
        assert!(
            Instant::now() < deadline,
            "apply never had three writes under way"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let at_kill = writes();
    let stderr = interrupt(child);
    assert!(
        stderr.contains("Interrupted") && stderr.contains("(interrupted)"),
        "{stderr}"
    );
    // Each write takes 400 ms: after the signal only the steps already in flight (at most the
    // default parallelism, 8) write; an apply that went on would make all 42.
    assert!(
        writes() <= at_kill + 8,
        "{} writes after {at_kill} at the signal\n{stderr}",
        writes()
    );
    let done = done_lines(&stderr);
    assert!(
        done >= 3 && done < total,
        "{done} of {total} done\n{stderr}"
    );
    assert_eq!(
        writes(),
        done,
        "every step that started finished, and no other started\n{stderr}"
    );
    assert_eq!(
        stderr.matches("  not done: ").count(),
        total - done,
        "{stderr}"
    );
    let p = f.plan();
    p.assert_stdout_contains(&format!("Plan: {} to create, 0 to update", total - done));
    f.apply(&[]).ok();
    f.assert_empty_plan("after completing the interrupted apply");
}

#[test]
fn a_write_whose_answer_was_lost_is_re_read_not_retried() {
    let Some((proxy, f)) = through_proxy(Faults {
        lose_write_answer: Some(1),
        ..rabbit_throttle()
    }) else {
        return;
    };
    let a = f.apply(&[]);
    a.exits(1);
    assert_eq!(
        proxy
            .counters
            .writes
            .load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the write is not retried"
    );
    // The write did happen: a new plan re-reads and no longer lists it.
    let p = f.plan();
    p.assert_stdout_contains("Plan: 6 to create");
    f.apply(&[]).ok();
    f.plan().ok();
}

#[test]
fn ctrl_c_finishes_the_current_step_then_stops() {
    let Some((proxy, f)) = through_proxy(Faults {
        write_delay: Duration::from_millis(400),
        ..rabbit_throttle()
    }) else {
        return;
    };
    let child = f.spawn_apply();
    // Interrupt once the first write is under way.
    let deadline = Instant::now() + Duration::from_secs(20);
    while proxy
        .counters
        .writes
        .load(std::sync::atomic::Ordering::SeqCst)
        < 1
    {
        assert!(Instant::now() < deadline, "apply never started writing");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stderr = interrupt(child);
    assert!(stderr.contains("Interrupted"), "{stderr}");
    assert!(
        stderr.contains("[1/7]") && stderr.contains("done"),
        "the current step finishes\n{stderr}"
    );
    assert!(
        stderr.contains("(interrupted)") && stderr.contains("not done:"),
        "{stderr}"
    );
    let done_steps = stderr.matches(" done (").count();
    let p = f.plan();
    assert!(
        p.stdout
            .contains(&format!("Plan: {} to create", 7 - done_steps)),
        "{}\n{stderr}",
        p.stdout
    );
}

#[test]
fn credentials_appear_nowhere() {
    let Some(mut f) = Fixture::new() else { return };
    let user = support::unique("dlqctl-secret-user-");
    let secret = format!("S3cret-{}-do-not-print", support::unique("p"));
    block(async {
        let (s, _) = api(
            reqwest::Method::PUT,
            &format!("/api/users/{user}"),
            Some(serde_json::json!({"password": secret, "tags": "administrator"})),
        )
        .await;
        assert!(s == 201 || s == 204, "create user: {s}");
        let (s, _) = api(
            reqwest::Method::PUT,
            &format!("/api/permissions/%2F/{user}"),
            Some(serde_json::json!({"configure": ".*", "write": ".*", "read": ".*"})),
        )
        .await;
        assert!(s == 201 || s == 204, "permissions: {s}");
    });
    f.set_env("DLQCTL_RABBITMQ_USER", &user);
    f.set_env("DLQCTL_RABBITMQ_PASSWORD", &secret);
    f.write_example(|t| t);
    let mut seen = Vec::new();
    for args in [
        &["plan", "channel.yaml"][..],
        &[
            "plan",
            "channel.yaml",
            "--format",
            "json",
            "--out",
            "plan.json",
        ],
        &["plan", "channel.yaml", "--format", "markdown"],
        &["apply", "plan.json"],
        &["plan", "channel.yaml", "--stats"],
        // -v logs every request: targets, URLs, timings; never the password.
        &["plan", "channel.yaml", "-v"],
        &["plan", "channel.yaml", "-vvv", "--format", "json"],
        &["status", "channel.yaml", "-vvv"],
    ] {
        let r = f.run(args);
        r.ok_with(format!("{args:?}"));
        if args.iter().any(|a| a.starts_with("-v")) {
            assert!(
                r.stderr.contains("GET http"),
                "{args:?} logs its requests:\n{}",
                r.stderr
            );
        }
        seen.push((format!("{args:?}"), r.stdout + &r.stderr));
    }
    seen.push((
        "plan.json".into(),
        std::fs::read_to_string(f.path().join("plan.json")).expect("saved plan"),
    ));
    // A wrong user with the secret as password: the error names the variables, not the value.
    f.set_env("DLQCTL_RABBITMQ_USER", "nobody");
    let r = f.run(&["plan", "channel.yaml"]);
    assert_eq!(r.code, 1);
    r.assert_stderr_contains("DLQCTL_RABBITMQ_USER / DLQCTL_RABBITMQ_PASSWORD");
    seen.push(("401".into(), r.stdout + &r.stderr));
    let r = f.run(&["plan", "channel.yaml", "-vvv"]);
    assert_eq!(r.code, 1);
    r.assert_stderr_contains("401");
    seen.push(("401 -vvv".into(), r.stdout + &r.stderr));
    for (what, text) in &seen {
        assert!(
            !text.contains(&secret),
            "{what} leaks the password:\n{text}"
        );
    }
    block(api(
        reqwest::Method::DELETE,
        &format!("/api/users/{user}"),
        None,
    ));
}

/// One line, naming the target, exit 1, no panic or backtrace.
fn assert_one_line_error(r: &support::Output, target: &str, needle: &str) {
    r.exits(1);
    let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line:\n{}", r.stderr);
    assert!(
        lines[0].contains(&format!("target `{target}`")),
        "{}",
        r.stderr
    );
    assert!(
        lines[0].contains(needle),
        "expected `{needle}` in\n{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("panicked") && !r.stderr.contains("backtrace"),
        "{}",
        r.stderr
    );
}

#[test]
fn bad_connections_are_one_actionable_line() {
    let Some(mut f) = Fixture::new() else { return };
    f.write_example(|t| t);
    f.set_env("DLQCTL_RABBITMQ_PASSWORD", "wrong-password");
    assert_one_line_error(&f.plan(), "local-rabbitmq", "login failed");

    f.set_env("DLQCTL_RABBITMQ_PASSWORD", "guest");
    f.write_example(|t| {
        t.replace(
            "    queueType: classic",
            "    vhost: /no-such-vhost\n    queueType: classic",
        )
    });
    assert_one_line_error(&f.plan(), "local-rabbitmq", "vhost `/no-such-vhost`");

    f.env.retain(|(k, _)| k != "DLQCTL_RABBITMQ_PASSWORD");
    f.write_example(|t| t);
    assert_one_line_error(&f.plan(), "local-rabbitmq", "DLQCTL_RABBITMQ_PASSWORD");

    // Port 9 (discard) on loopback: nothing listens there.
    let Some(closed) = Fixture::with_url("http://127.0.0.1:9") else {
        return;
    };
    closed.write_example(|t| t);
    assert_one_line_error(
        &closed.plan(),
        "local-rabbitmq",
        "cannot connect to http://127.0.0.1:9",
    );
}

#[test]
fn insecure_is_explicit_and_warns_and_no_flag_takes_a_password() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    let r = f.run(&["plan", "channel.yaml", "--insecure"]);
    r.ok();
    r.assert_stderr_contains("--insecure: TLS certificates are not verified");
    for sub in ["plan", "apply", "lint"] {
        let help = support::output(support::dlqctl().args([sub, "--help"]));
        assert!(
            !help.stdout.to_lowercase().contains("password"),
            "{sub} --help mentions a password flag:\n{}",
            help.stdout
        );
    }
}

#[test]
fn sqs_and_cloudwatch_throttling_leaves_the_plan_byte_identical() {
    let Some(direct) = support::sqs::Fixture::applied() else {
        return;
    };
    // Change the spec so the plan has something to say.
    let spec = direct.write_example(|t| t.replace("maxAttempts: 5", "maxAttempts: 6"));
    let baseline = direct.run(&["plan", "channel.yaml", "--stats"]);
    baseline.ok();
    let mut faulted = 0;
    for seed in 1..=6 {
        let proxy = Proxy::start(
            &support::aws_endpoint(),
            Faults {
                protocol: support::proxy::Protocol::Aws,
                read_fault_percent: 20,
                seed,
                ..Faults::default()
            },
        );
        let Some(via) = support::sqs::Fixture::with_endpoint(&proxy.addr) else {
            return;
        };
        std::fs::copy(&spec, via.path().join("channel.yaml")).expect("copy");
        faulted += assert_plan_unchanged_under_faults(seed, &proxy, &via, &baseline);
    }
    assert!(
        faulted >= 3,
        "only {faulted} faults injected: the test proves nothing"
    );
}

#[test]
fn aws_and_kafka_credentials_appear_nowhere() {
    let up = support::tcp_up(&support::host_port(&support::aws_endpoint()))
        && support::tcp_up(&support::kafka_bootstrap());
    if !support::require("moto and Kafka", up) {
        return;
    }
    let aws_secret = format!(
        "AwsSecret{}DoNotPrint",
        support::unique("x").replace('-', "")
    );
    let kafka_secret = format!(
        "KafkaSecret{}DoNotPrint",
        support::unique("y").replace('-', "")
    );
    let Some(mut f) = support::sqs::Fixture::new() else {
        return;
    };
    f.write_example(|t| t);
    // A Kafka target whose secret property comes from an env var, and a channel on it.
    let line = format!("    bootstrapServers: {}\n", support::kafka_bootstrap());
    f.edit_targets(|t| {
        t.replace(
            &line,
            &format!("{line}    secretProperties: {{sasl.password: KAFKA_PASSWORD}}\n"),
        )
    });
    let kafka_channel = format!("inventory.{}", support::unique("cred"));
    let kafka_spec = support::workspace::renamed("inventory-kafka.yaml", &kafka_channel);
    std::fs::write(f.path().join("kafka.yaml"), kafka_spec).expect("write");
    f.set_env("AWS_SECRET_ACCESS_KEY", &aws_secret);
    f.set_env("KAFKA_PASSWORD", &kafka_secret);
    let mut seen = Vec::new();
    for args in [
        &["plan", "."][..],
        &["plan", ".", "--format", "json", "--out", "plan.json"],
        &["plan", ".", "--format", "markdown"],
        &["apply", "plan.json"],
        &["plan", ".", "--stats"],
        // -v logs every call (and -vv each SDK request): never a key or a SASL password.
        &["plan", ".", "-v"],
        &["plan", ".", "-vvv", "--format", "json"],
        &["status", ".", "-vvv"],
    ] {
        let r = f.run(args);
        if args.iter().any(|a| a.starts_with("-v")) {
            assert!(
                r.stderr.contains("sqs:ListQueues") && r.stderr.contains("Kafka Metadata"),
                "{args:?} logs its calls:\n{}",
                r.stderr
            );
        }
        seen.push((format!("{args:?} (exit {})", r.code), r.stdout + &r.stderr));
    }
    seen.push((
        "plan.json".into(),
        std::fs::read_to_string(f.path().join("plan.json")).unwrap_or_default(),
    ));
    support::kafka::delete_prefixed(&kafka_channel);
    for (what, text) in &seen {
        assert!(
            !text.contains(&aws_secret) && !text.contains(&kafka_secret),
            "{what} leaks a secret:\n{text}"
        );
    }
    assert!(
        seen.iter()
            .any(|(w, _)| w.contains("apply") && w.contains("exit 0")),
        "the run really applied: {:?}",
        seen.iter().map(|s| &s.0).collect::<Vec<_>>()
    );
}

#[test]
fn unreachable_sqs_and_kafka_targets_are_one_actionable_line() {
    // Port 9 (discard) on loopback: nothing listens there.
    let w = support::sqs::workspace("http://127.0.0.1:9");
    w.write_example(|t| t);
    let r = w.run(&["plan", "channel.yaml"]);
    assert_one_line_error(&r, "local-sqs", "target `local-sqs`");

    let line = format!("bootstrapServers: {}", support::kafka_bootstrap());
    w.edit_targets(|t| t.replace(&line, "bootstrapServers: 127.0.0.1:9"));
    std::fs::copy(
        support::root().join("examples/inventory-kafka.yaml"),
        w.path().join("kafka.yaml"),
    )
    .expect("copy");
    let r = w.run(&["plan", "kafka.yaml"]);
    assert_one_line_error(&r, "local-kafka", "127.0.0.1:9");
}
