//! Apply's concurrent-change guard with the batched re-check (issue 39), live on each backend
//! that re-checks a group of steps in one read (SQS and CloudWatch, RabbitMQ, Kafka, Pub/Sub).
//!
//! Three channels are planned together, so a re-check group holds steps of all three. The
//! apply runs on a pseudo-terminal and asks for confirmation: the plan has been read and
//! shown, nothing is written yet. While it waits, one object of the second channel is made by
//! hand, as another apply or an operator would; then the apply is confirmed. Its re-check must
//! stop it before that object is written, name it, and leave it as it was made; after the
//! object is removed, an apply completes and the plan is empty.

mod support;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use support::workspace::{Workspace, renamed};

/// The channel names of a test: the fixture's and two more that start with it (so the
/// fixture's clean-up removes theirs too), joined by `sep`.
fn channels(ws: &Workspace, sep: &str) -> [String; 3] {
    let c = &ws.channel;
    [c.clone(), format!("{c}{sep}b"), format!("{c}{sep}c")]
}

/// Writes the example three times, one file per channel of [`channels`].
fn write_three(ws: &Workspace, example: &str, sep: &str) {
    for (i, name) in channels(ws, sep).iter().enumerate() {
        std::fs::write(
            ws.path().join(format!("channel-{i}.yaml")),
            renamed(example, name),
        )
        .expect("write spec");
    }
}

/// A pseudo-terminal: (master, slave).
fn pty() -> (File, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty(3) writes two descriptors it opened into the two ints; the null
    // pointers ask for no name and default settings.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors were just opened by openpty and are owned by nothing else.
    unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// `dlqctl apply . --stats` on a terminal: when it asks for confirmation (the plan read and
/// shown, nothing written), `meanwhile` runs, then the answer is `yes`. Returns the exit code
/// and stderr. Killed after 120 s.
fn apply_confirmed_after(ws: &Workspace, meanwhile: impl FnOnce()) -> (Option<i32>, String) {
    let (mut master, slave) = pty();
    let mut child = ws
        .command(&["apply", ".", "--stats"])
        .stdin(Stdio::from(slave))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dlqctl apply starts");
    let pid = child.id();
    let finished = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let finished = Arc::clone(&finished);
        std::thread::spawn(move || {
            for _ in 0..1200 {
                if finished.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // SAFETY: kill(2) on the child this test started, which is still running.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        })
    };
    let stderr = child.stderr.take().expect("stderr");
    let mut text = String::new();
    let mut meanwhile = Some(meanwhile);
    for line in BufReader::new(stderr).lines().take(10_000) {
        let Ok(line) = line else { break };
        text.push_str(&line);
        text.push('\n');
        if line.contains("Apply these changes?")
            && let Some(act) = meanwhile.take()
        {
            act();
            master.write_all(b"yes\n").expect("answer");
        }
    }
    let status = child.wait().expect("wait");
    finished.store(true, Ordering::SeqCst);
    watchdog.join().expect("watchdog");
    assert!(
        meanwhile.is_none(),
        "apply never asked for confirmation:\n{text}"
    );
    (status.code(), text)
}

/// `apply --stats` call counts by API.
fn calls(stderr: &str) -> std::collections::BTreeMap<String, u64> {
    stderr
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let n = parts.next()?.parse().ok()?;
            Some((parts.collect::<Vec<_>>().join(" "), n))
        })
        .collect()
}

/// What every test asserts of the stopped apply: exit 1, the object named as created since
/// planning, the steps not done listed, and `api` (the backend's re-check read) called.
fn assert_stopped(code: Option<i32>, stderr: &str, object: &str, api: &str) {
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains(object) && l.contains(" was created since planning")),
        "names {object}:\n{stderr}"
    );
    assert!(stderr.contains("  not done: "), "{stderr}");
    let n = calls(stderr).get(api).copied().unwrap_or(0);
    assert!(n >= 1, "{api} re-checks: {stderr}");
}

#[test]
fn sqs_a_queue_made_after_the_plan_stops_apply_at_its_group_recheck() {
    use aws_sdk_sqs::types::QueueAttributeName;
    let Some(f) = support::sqs::Fixture::new() else {
        return;
    };
    write_three(&f, "payments-sqs.yaml", "-");
    let [a, b, c] = channels(&f, "-");
    let dlq = format!("{b}-dlq");
    let (code, stderr) = apply_confirmed_after(&f, || {
        f.aws.create(
            &dlq,
            &[(QueueAttributeName::MessageRetentionPeriod, "3600".into())],
            &[],
        );
    });
    assert_stopped(
        code,
        &stderr,
        &format!("queue {dlq} on target `local-sqs`"),
        "sqs:ListQueues",
    );
    // One re-check read the three DLQs: the group is not written, the hand-made queue is as
    // it was made.
    for q in [format!("{a}-dlq"), format!("{c}-dlq")] {
        assert!(!f.aws.exists(&q), "{q} was written:\n{stderr}");
    }
    assert_eq!(
        f.aws.attributes(&dlq).get("MessageRetentionPeriod"),
        Some(&"3600".to_owned()),
        "left as found"
    );
    // With the hand-made queue gone, apply completes and the plan is empty.
    support::block(f.aws.sqs.delete_queue().queue_url(f.aws.url(&dlq)).send()).expect("delete");
    f.run(&["apply", ".", "--auto-approve"]).ok();
    let p = f.run(&["plan", ".", "--detailed-exitcode"]);
    p.exits_with(0, "plan after apply is empty");
}

#[test]
fn rabbitmq_a_queue_made_after_the_plan_stops_apply_at_its_group_recheck() {
    use support::rabbit::api;
    let Some(f) = support::rabbit::Fixture::new() else {
        return;
    };
    write_three(&f, "orders-rabbitmq.yaml", ".");
    let [a, b, c] = channels(&f, ".");
    let dlq = format!("{b}.dlq");
    let put = |name: &str| {
        let (s, _) = support::block(api(
            reqwest::Method::PUT,
            &format!("/api/queues/%2F/{name}"),
            Some(serde_json::json!({"durable": true, "arguments": {"x-max-length": 5}})),
        ));
        assert!(s == 201 || s == 204, "{s}");
    };
    let (code, stderr) = apply_confirmed_after(&f, || put(&dlq));
    assert_stopped(
        code,
        &stderr,
        &format!("queue {dlq} (vhost /) on target `local-rabbitmq`"),
        "GET /api/queues/{vhost}",
    );
    assert!(
        !stderr.contains("GET /api/queues/{vhost}/{name}"),
        "queues are re-checked by a filtered listing, not one GET each:\n{stderr}"
    );
    let status = |q: &str| {
        support::block(api(
            reqwest::Method::GET,
            &format!("/api/queues/%2F/{q}"),
            None,
        ))
    };
    for q in [format!("{a}.dlq"), format!("{c}.dlq")] {
        assert_eq!(status(&q).0, 404, "{q} was written:\n{stderr}");
    }
    let (_, q) = status(&dlq);
    assert_eq!(
        q["arguments"],
        serde_json::json!({"x-max-length": 5}),
        "left as found"
    );
    let (s, _) = support::block(api(
        reqwest::Method::DELETE,
        &format!("/api/queues/%2F/{dlq}"),
        None,
    ));
    assert_eq!(s, 204);
    f.run(&["apply", ".", "--auto-approve"]).ok();
    let p = f.run(&["plan", ".", "--detailed-exitcode"]);
    p.exits_with(0, "plan after apply is empty");
}

#[test]
fn kafka_a_topic_made_after_the_plan_stops_apply_at_its_group_recheck() {
    let Some(f) = support::kafka::Fixture::new() else {
        return;
    };
    write_three(&f, "inventory-kafka.yaml", ".");
    let [a, b, c] = channels(&f, ".");
    let (code, stderr) = apply_confirmed_after(&f, || {
        support::kafka::create_topics(&[(b.as_str(), 1, &[])]);
    });
    assert_stopped(
        code,
        &stderr,
        &format!("topic {b} on target `local-kafka`"),
        "kafka:Metadata",
    );
    let live = support::kafka::topics(&f.channel);
    assert_eq!(live.get(&b), Some(&1), "left as found: {live:?}");
    for t in [&a, &c] {
        assert!(!live.contains_key(t), "{t} was written: {live:?}\n{stderr}");
    }
    support::kafka::delete_topics(&[b.as_str()]);
    // Deleted topics leave the broker's listing a moment later: bounded wait.
    for _ in 0..100 {
        if !support::kafka::topics(&b).contains_key(&b) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    f.run(&["apply", ".", "--auto-approve"]).ok();
    let p = f.run(&["plan", ".", "--detailed-exitcode"]);
    p.exits_with(0, "plan after apply is empty");
}

#[test]
fn pubsub_a_topic_made_after_the_plan_stops_apply_at_its_group_recheck() {
    let Some(f) = support::pubsub::Fixture::new() else {
        return;
    };
    // Each channel with its own consumer subscription.
    for (i, name) in channels(&f, "-").iter().enumerate() {
        let text = renamed("payments-pubsub.yaml", name)
            .replace("payment-processor-sub", &format!("{name}-processor-sub"));
        std::fs::write(f.path().join(format!("channel-{i}.yaml")), text).expect("write spec");
    }
    let [a, b, c] = channels(&f, "-");
    let dlt = format!("{b}-dlt");
    let (code, stderr) = apply_confirmed_after(&f, || f.rest.create_topic(&dlt));
    assert_stopped(code, &stderr, &format!("topic {dlt}"), "GET topics/{topic}");
    for t in [format!("{a}-dlt"), format!("{c}-dlt")] {
        assert!(
            f.rest.get(&format!("topics/{t}")).is_none(),
            "{t} was written:\n{stderr}"
        );
    }
    let made = f
        .rest
        .get(&format!("topics/{dlt}"))
        .expect("the hand-made topic");
    assert_eq!(
        made["labels"],
        serde_json::Value::Null,
        "left as found: {made}"
    );
    f.rest.delete(&format!("topics/{dlt}"));
    f.run(&["apply", ".", "--auto-approve"]).ok();
    let p = f.run(&["plan", ".", "--detailed-exitcode"]);
    p.exits_with(0, "plan after apply is empty");
}
