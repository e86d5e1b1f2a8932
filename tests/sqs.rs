//! SQS and CloudWatch, live: moto from `scripts/stack up --only moto`, through the real binary.
//!
//! Every test works on its own channel (`payments-t<random>`) and deletes its own queues and
//! alarms afterwards; none resets moto, because tests run in parallel. Changes "by someone
//! else" are made with the AWS SDK directly, as an operator's script would.
//!
//! What moto cannot verify, and these tests therefore do not claim: RedriveAllowPolicy (moto
//! accepts it on writes but never stores it, so it is written and not read back; the plan
//! says so in a note), QueueDeletedRecently (moto reuses names at once; the message is unit-
//! tested), SQS's and CloudWatch's own validation (moto accepts values AWS rejects; lint
//! covers those), throttling, and alarm evaluation (moto never evaluates alarms).

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};
use support::sqs::Fixture;
use support::{block, dlqctl, output};

const TARGET: &str = "local-sqs";

/// `plan --stats` call counts by API (`sqs:ListQueues` → 1).
fn stats(stderr: &str) -> BTreeMap<String, u64> {
    stderr
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let n = parts.next()?.parse().ok()?;
            let api = parts.next()?;
            api.contains(':').then(|| (api.to_owned(), n))
        })
        .collect()
}

#[test]
fn every_sqs_example_applies_then_plans_empty_and_a_second_apply_writes_nothing() {
    let examples = support::examples_on(TARGET);
    assert!(
        examples.len() >= 2,
        "the standard and the FIFO example: {examples:?}"
    );
    for example in examples {
        let Some(f) = Fixture::new() else { return };
        f.write_from(&example, |t| t);
        f.first_apply(&example);

        // A plan with nothing to change reads at the lower bound: one listing, one
        // GetQueueAttributes per queue, one DescribeAlarms, and no tags.
        let p = f.run(&["plan", "channel.yaml", "--stats"]);
        p.ok();
        let calls = stats(&p.stderr);
        assert_eq!(
            calls.get("sqs:ListQueues"),
            Some(&1),
            "{example}: {calls:?}"
        );
        assert_eq!(
            calls.get("cloudwatch:DescribeAlarms"),
            Some(&1),
            "{example}: {calls:?}"
        );
        // 2 queues (3 with an invalid-message queue) + 1 probe: moto cannot return
        // RedriveAllowPolicy (on AWS, 2 or 3).
        let text = std::fs::read_to_string(support::root().join("examples").join(&example))
            .expect("the example");
        let queues = if text.contains("\n  invalid:") { 3 } else { 2 };
        assert_eq!(
            calls.get("sqs:GetQueueAttributes"),
            Some(&(queues + 1)),
            "{example}: {calls:?}"
        );
        assert!(
            !calls.keys().any(|k| k.contains("Tags")),
            "{example}: no tag reads without changes: {calls:?}"
        );
        p.assert_stdout_contains("RedriveAllowPolicy cannot be read from this endpoint");

        f.assert_second_apply_writes_nothing(&example);
    }
}

#[test]
fn the_standard_example_builds_the_documented_topology() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    let a = f.apply(&[]);
    a.ok();
    assert!(
        a.stderr.contains("[4/4]"),
        "DLQ, main queue, two alarms, each reported\n{}",
        a.stderr
    );
    let [main, dlq, depth, age] = f.names();

    let m = f.aws.attributes(&main);
    let d = f.aws.attributes(&dlq);
    let policy: Value = serde_json::from_str(&m["RedrivePolicy"]).expect("RedrivePolicy JSON");
    assert_eq!(policy["deadLetterTargetArn"], json!(d["QueueArn"]));
    assert_eq!(policy["maxReceiveCount"], json!(5));
    assert_eq!(m["MessageRetentionPeriod"], "345600");
    assert_eq!(d["MessageRetentionPeriod"], "1209600");
    assert_eq!(m["VisibilityTimeout"], "30");
    assert!(!d.contains_key("RedrivePolicy"));
    for q in [&main, &dlq] {
        let tags = f.aws.tags(q);
        assert_eq!(
            tags.get("managed-by").map(String::as_str),
            Some("dlqctl"),
            "{q}"
        );
        assert_eq!(tags.get("dlqctl-channel"), Some(&f.channel), "{q}");
    }

    let a = f.aws.alarm(&depth).expect("depth alarm");
    assert_eq!(a.metric_name(), Some("ApproximateNumberOfMessagesVisible"));
    assert_eq!(a.namespace(), Some("AWS/SQS"));
    assert_eq!(a.dimensions()[0].value(), Some(dlq.as_str()));
    assert_eq!(a.threshold(), Some(0.0));
    assert_eq!(a.treat_missing_data(), Some("notBreaching"));
    assert_eq!(
        a.alarm_actions(),
        ["arn:aws:sns:us-east-1:123456789012:payments-ops"]
    );
    let a = f.aws.alarm(&age).expect("oldest-age alarm");
    assert_eq!(a.metric_name(), Some("ApproximateAgeOfOldestMessage"));
    assert_eq!(a.threshold(), Some(1800.0), "30m in seconds");
    let arn = a.alarm_arn().expect("ARN").to_owned();
    let tags =
        block(f.aws.cw.list_tags_for_resource().resource_arn(arn).send()).expect("alarm tags");
    assert!(
        tags.tags()
            .iter()
            .any(|t| t.key() == Some("managed-by") && t.value() == Some("dlqctl"))
    );
}

#[test]
fn third_party_changes_show_up_in_the_next_plan_with_field_detail() {
    let Some(f) = Fixture::applied() else { return };
    let [main, dlq, depth, age] = f.names();

    // Someone raises maxReceiveCount and shortens retention on the main queue, edits the depth
    // alarm's threshold (PutMetricAlarm, as the console does) and deletes the age alarm.
    f.aws.set(
        &main,
        &[
            f.aws.redrive_policy(&dlq, json!(9)),
            (QueueAttributeName::MessageRetentionPeriod, "172800".into()),
        ],
    );
    block(
        f.aws
            .put_alarm(
                &depth,
                &dlq,
                aws_sdk_cloudwatch::types::Statistic::Maximum,
                (60, 1),
                10.0,
            )
            .alarm_description(format!(
                "dlqctl channel {}: messages wait in the dead-letter queue",
                f.channel
            ))
            .treat_missing_data("notBreaching")
            .alarm_actions("arn:aws:sns:us-east-1:123456789012:payments-ops")
            .send(),
    )
    .expect("PutMetricAlarm");
    block(f.aws.cw.delete_alarms().alarm_names(&age).send()).expect("DeleteAlarms");

    let p = f.plan();
    p.exits(2);
    for expected in [
        format!("~ update     queue {main}"),
        "RedrivePolicy.maxReceiveCount: 9 → 5".to_owned(),
        "MessageRetentionPeriod: 172800 → 345600".to_owned(),
        format!("~ update     alarm {depth}"),
        "Threshold: 10 → 0".to_owned(),
        format!("+ create     alarm {age}"),
        "Plan: 1 to create, 2 to update, 0 to replace, 0 to delete.".to_owned(),
    ] {
        p.assert_stdout_contains(&expected);
    }
    assert!(
        !p.stdout.contains("destructive") && !p.stdout.contains("deletes every message"),
        "raising retention loses nothing\n{}",
        p.stdout
    );
    let a = f.apply(&[]);
    a.ok_with("repairs need no flag");
    f.assert_empty_plan("after the repair");

    // An alarm the spec no longer asks for is deleted, and only with --allow-delete.
    let p = f.plan_edited(|t| t.replace("    oldestMessageAge: {above: 30m}\n", ""));
    p.assert_stdout_contains(&format!("- delete     alarm {age}"));
    let refused = f.apply(&[]);
    refused.exits(1);
    refused.assert_stderr_contains("--allow-delete");
    assert!(f.aws.alarm(&age).is_some(), "zero writes");
    f.apply(&["--allow-delete"]).ok();
    assert!(f.aws.alarm(&age).is_none());
    f.assert_empty_plan("after the delete");
}

#[test]
fn a_message_received_max_attempts_times_ends_up_in_the_dlq() {
    // Three attempts, one second apart, to keep the test short.
    let three_quick_attempts = |t: String| {
        t.replace("maxAttempts: 5", "maxAttempts: 3")
            .replace("visibilityTimeout: 30s", "visibilityTimeout: 1s")
    };
    let Some(f) = Fixture::applied_with(three_quick_attempts) else {
        return;
    };
    let [main, dlq, ..] = f.names();
    f.aws.send(&main, "payment-42");
    let (main_url, dlq_url) = (f.aws.url(&main), f.aws.url(&dlq));
    // A consumer that fails every time: receives, never deletes, waits for the visibility
    // timeout to hand the message out again.
    let mut receives = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    let dead = loop {
        assert!(
            Instant::now() < deadline,
            "the message never reached the DLQ after {receives} receives"
        );
        let got = block(
            f.aws
                .sqs
                .receive_message()
                .queue_url(&main_url)
                .max_number_of_messages(1)
                .send(),
        )
        .expect("receive");
        if got
            .messages()
            .iter()
            .any(|m| m.body() == Some("payment-42"))
        {
            receives += 1;
        }
        let dl = block(
            f.aws
                .sqs
                .receive_message()
                .queue_url(&dlq_url)
                .max_number_of_messages(1)
                .send(),
        )
        .expect("receive DLQ");
        if let Some(m) = dl.messages().first() {
            break m.body().unwrap_or_default().to_owned();
        }
        std::thread::sleep(Duration::from_millis(1100));
    };
    assert_eq!(dead, "payment-42", "nothing lost");
    assert_eq!(
        receives, 3,
        "delivered exactly maxAttempts times before dead-lettering"
    );
}

#[test]
fn lowering_retention_is_refused_without_allow_message_loss_and_shows_the_count() {
    let Some(f) = Fixture::applied() else { return };
    let [main, ..] = f.names();
    f.aws.send(&main, "a");
    f.aws.send(&main, "b");
    let p = f.plan_edited(|t| t.replace("retention: 4d", "retention: 1d"));
    p.exits(2);
    p.assert_stdout_contains(&format!("~ update     queue {main}"));
    p.assert_stdout_contains("lowering MessageRetentionPeriod from 345600 s to 86400 s deletes every message older than 86400 s at once; the queue holds 2 messages now");

    let refused = f.apply(&[]);
    refused.exits(1);
    refused.assert_stderr_contains("--allow-message-loss");
    refused.assert_zero_writes();
    assert_eq!(
        f.aws.attributes(&main)["MessageRetentionPeriod"],
        "345600",
        "untouched"
    );

    let done = f.apply(&["--allow-message-loss"]);
    done.ok();
    assert_eq!(f.aws.attributes(&main)["MessageRetentionPeriod"], "86400");
    f.assert_empty_plan("after lowering retention");
}

#[test]
fn a_fifo_flip_is_a_guarded_replace_that_shows_the_messages_it_would_drop() {
    let Some(f) = Fixture::new() else { return };
    f.write_from("refunds-sqs-fifo.yaml", |t| t);
    let main = format!("{}.fifo", f.channel);
    // A standard queue under the FIFO name, tagged as this channel's. AWS forbids `.fifo` in
    // a standard queue's name, so on AWS this state cannot arise from a spec change; moto
    // allows it, which makes it the one way to exercise an in-place FifoQueue difference.
    f.aws.create(
        &main,
        &[],
        &[("managed-by", "dlqctl"), ("dlqctl-channel", &f.channel)],
    );
    f.aws.send(&main, "refund-7");

    let p = f.plan();
    p.exits(2);
    p.assert_stdout_contains(&format!(
        "-/+ replace    queue {main}  (holds 1 messages that would be lost)"
    ));
    p.assert_stdout_contains("FifoQueue: false → true");

    let refused = f.apply_refused_replace();
    assert!(
        refused.stderr.contains("holds 1 messages")
            && refused.stderr.contains("--allow-message-loss"),
        "{}",
        refused.stderr
    );
    refused.assert_zero_writes();
    assert!(
        !f.aws.exists(&format!("{}-dlq.fifo", f.channel)),
        "zero writes: the DLQ was not created"
    );
    let attrs = f.aws.attributes(&main);
    assert!(!attrs.contains_key("FifoQueue"), "still the standard queue");
    assert_eq!(
        attrs["ApproximateNumberOfMessages"], "1",
        "the message is still there"
    );

    let done = f.apply(&["--allow-replace", "--allow-message-loss"]);
    done.ok();
    assert_eq!(
        f.aws.attributes(&main).get("FifoQueue").map(String::as_str),
        Some("true")
    );
    f.assert_empty_plan("after the replace");
}

#[test]
fn an_existing_untagged_queue_is_not_adopted() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    let [main, dlq, ..] = f.names();
    f.aws.create(&main, &[], &[]);

    let p = f.plan();
    p.exits(2);
    p.assert_stdout_contains(&format!("! impossible queue {main}"));
    assert!(
        p.stdout.contains("is not tagged `managed-by: dlqctl`")
            && p.stdout.contains("dlqctl import"),
        "{}",
        p.stdout
    );
    let refused = f.apply(&[]);
    refused.exits(1);
    assert!(
        refused
            .stderr
            .contains(&format!("queue {main} on target `{TARGET}`")),
        "{}",
        refused.stderr
    );
    assert!(
        !f.aws.exists(&dlq),
        "zero writes: nothing of the channel is created"
    );
    assert!(
        !f.aws.attributes(&main).contains_key("RedrivePolicy"),
        "the foreign queue is untouched"
    );
}

#[test]
fn a_stale_saved_plan_is_refused_with_zero_writes() {
    let Some(f) = Fixture::applied() else { return };
    f.write_example(|t| t.replace("maxAttempts: 5", "maxAttempts: 6"));
    let p = f.save_plan();
    p.assert_stdout_contains("RedrivePolicy.maxReceiveCount: 5 → 6");
    let saved = std::fs::read_to_string(f.path().join("plan.json")).expect("saved plan");
    assert!(
        !saved.contains("\"testing\""),
        "no credentials in a saved plan"
    );

    // Someone changes the main queue between plan and apply.
    let [main, ..] = f.names();
    f.aws.set(
        &main,
        &[(QueueAttributeName::VisibilityTimeout, "45".into())],
    );
    let a = f.run(&["apply", "plan.json"]);
    a.exits(1);
    a.assert_stderr_contains("refused");
    a.assert_stderr_contains(&format!("queue {main} on target `{TARGET}` was modified"));
    let policy: Value =
        serde_json::from_str(&f.aws.attributes(&main)["RedrivePolicy"]).expect("JSON");
    assert_eq!(policy["maxReceiveCount"], json!(5), "zero writes");

    // Put back as planned, the saved plan applies.
    f.aws.set(
        &main,
        &[(QueueAttributeName::VisibilityTimeout, "30".into())],
    );
    let a = f.run(&["apply", "plan.json"]);
    a.ok();
    f.assert_empty_plan("after applying the saved plan");
}

#[test]
fn plans_render_in_every_format() {
    let Some(f) = Fixture::applied() else { return };
    let [main, dlq, depth, _] = f.names();
    f.aws.set(&main, &[f.aws.redrive_policy(&dlq, json!("9"))]);
    block(f.aws.cw.delete_alarms().alarm_names(&depth).send()).expect("DeleteAlarms");
    f.write_example(|t| t.replace("retention: 4d", "retention: 3d"));

    assert_plan_snapshots!(f, Some((&support::aws_endpoint(), "[ENDPOINT]")));
}

/// Lint warnings do not bury the plan (issue 39): six channels with eight warnings of three
/// rules (five channels with one, two with another, one with a third) make one line per rule on
/// stderr for `plan` and `apply` (beyond four channels, the first three, `…` and the last), one
/// collapsed element after the summary of the markdown plan, and each in full with `-v`, as
/// `lint` shows them. Nothing is applied: apply without a terminal stops at the question.
#[test]
fn lint_warnings_are_one_line_per_rule_in_plan_and_apply_and_each_in_full_with_v() {
    let Some(f) = Fixture::new() else { return };
    let spec = |name: &str, attempts: u32, extra: &str| {
        format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {}-{name}}}\nspec:\n  target: {TARGET}\n  retry: {{maxAttempts: {attempts}}}\n{extra}",
            f.channel
        )
    };
    let kept_a_week = "  deadLetter: {retention: 7d}\n";
    let unwatched = "  lint: {allow: [alarms/missing]}\n";
    let channels = [
        // deadletter/discard-undeclared on a–e, alarms/missing on d and e, retry/none on f.
        ("a", 3, format!("{kept_a_week}{unwatched}")),
        ("b", 3, format!("{kept_a_week}{unwatched}")),
        ("c", 3, format!("{kept_a_week}{unwatched}")),
        ("d", 3, kept_a_week.to_owned()),
        ("e", 3, kept_a_week.to_owned()),
        ("f", 1, unwatched.to_owned()),
    ];
    for (name, attempts, extra) in &channels {
        std::fs::write(
            f.path().join(format!("{name}.yaml")),
            spec(name, *attempts, extra),
        )
        .expect("write spec");
    }
    let settings = support::snapshot::plan_settings(Some((&support::aws_endpoint(), "[ENDPOINT]")));
    let both = |p: &support::Output| {
        format!(
            "exit: {}\n--- stderr\n{}--- stdout\n{}",
            p.code, p.stderr, p.stdout
        )
    };
    let folded = "warning: 8 lint warnings (run `dlqctl lint` or add -v to see each) — deadletter/discard-undeclared ×5 on channels ";

    let human = f.run(&["plan", ".", "--detailed-exitcode"]);
    human.exits(2);
    assert_eq!(human.stderr.lines().count(), 3, "{}", human.stderr);
    human.assert_stderr_contains(folded);
    assert!(!human.stderr.contains("warning["), "{}", human.stderr);
    let md = f.run(&["plan", ".", "--format", "markdown"]);
    md.ok();
    // The JSON plan holds no lint findings (`dlqctl lint --format json` has them all).
    let json = f.run(&["plan", ".", "--format", "json"]);
    assert!(
        !json.stdout.contains("discard-undeclared"),
        "{}",
        json.stdout
    );

    let apply = f.run(&["apply", "."]);
    apply.exits(1);
    apply.assert_stderr_contains(folded);
    assert!(!apply.stderr.contains("warning["), "{}", apply.stderr);
    apply.assert_zero_writes();

    // -v: every warning in full, as `lint` shows it, and the count of all; the wire log that
    // follows (times, requests) is not part of the snapshot.
    let verbose = f.run(&["plan", ".", "-v"]);
    verbose.ok();
    let counted = "7 files checked: 0 errors, 8 warnings.";
    let Some(end) = verbose.stderr.find(counted) else {
        panic!("no `{counted}` in:\n{}", verbose.stderr)
    };
    let full = &verbose.stderr[..end + counted.len()];
    for (rule, n) in [
        ("deadletter/discard-undeclared", 5),
        ("alarms/missing", 2),
        ("retry/none", 1),
    ] {
        assert_eq!(
            full.matches(&format!("warning[{rule}]")).count(),
            n,
            "{full}"
        );
    }
    assert!(!verbose.stderr.contains(folded), "{}", verbose.stderr);
    let lint = f.run(&["lint", "."]);
    assert_eq!(lint.stdout.trim_end(), full, "-v shows what `lint` shows");

    settings.bind(|| {
        insta::assert_snapshot!("plan-warnings-human", both(&human));
        insta::assert_snapshot!("plan-warnings-markdown", md.stdout);
        insta::assert_snapshot!("plan-warnings-verbose", full);
    });
}

#[test]
fn errors_name_the_target_and_never_print_credentials() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    // Nothing listens on port 9; the secret must not appear anywhere in the output.
    f.edit_targets(|t| t.replace(&support::aws_endpoint(), "http://127.0.0.1:9"));
    let out = output(
        dlqctl()
            .args(["plan", "channel.yaml", "--color", "never"])
            .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLESECRETID")
            .env("AWS_SECRET_ACCESS_KEY", "s3cr3t-never-printed")
            .current_dir(f.path()),
    );
    out.exits(1);
    out.assert_stderr_contains(&format!("target `{TARGET}`"));
    out.assert_stderr_contains("cannot reach the endpoint");
    assert!(
        !out.stderr.contains("s3cr3t") && !out.stdout.contains("s3cr3t"),
        "{}",
        out.stderr
    );

    // No credentials at all: said plainly, naming where they are looked for.
    let out = output(
        dlqctl()
            .args(["plan", "channel.yaml", "--color", "never"])
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .current_dir(f.path()),
    );
    out.exits(1);
    assert!(
        out.stderr.contains(&format!("target `{TARGET}`"))
            && out.stderr.contains("no AWS credentials"),
        "{}",
        out.stderr
    );
}

#[test]
fn alarm_tiers_make_one_alarm_per_tier_and_a_hand_change_to_one_tier_shows_in_the_plan() {
    const EXAMPLE: &str = "chargebacks-sqs-tiers.yaml";
    const CHAT: &str = "arn:aws:sns:us-east-1:123456789012:payments-chat";
    const PAGER: &str = "arn:aws:sns:us-east-1:123456789012:payments-pager";
    let Some(f) = Fixture::new() else { return };
    f.write_from(EXAMPLE, |t| t);
    f.first_apply(EXAMPLE);
    let dlq = format!("{}-dlq", f.channel);
    for (suffix, metric, threshold, action, tier) in [
        (
            "depth-warning",
            "ApproximateNumberOfMessagesVisible",
            0.0,
            CHAT,
            "warning",
        ),
        (
            "depth-critical",
            "ApproximateNumberOfMessagesVisible",
            50.0,
            PAGER,
            "critical",
        ),
        (
            "oldest-age-warning",
            "ApproximateAgeOfOldestMessage",
            1800.0,
            CHAT,
            "warning",
        ),
        (
            "oldest-age-critical",
            "ApproximateAgeOfOldestMessage",
            7200.0,
            PAGER,
            "critical",
        ),
    ] {
        let name = format!("{dlq}-{suffix}");
        let a = f
            .aws
            .alarm(&name)
            .unwrap_or_else(|| panic!("{name} exists"));
        assert_eq!(a.metric_name(), Some(metric), "{name}");
        assert_eq!(a.threshold(), Some(threshold), "{name}");
        assert_eq!(a.alarm_actions(), [action], "{name}");
        assert_eq!(a.dimensions()[0].value(), Some(dlq.as_str()), "{name}");
        let description = a.alarm_description().unwrap_or_default();
        assert!(
            description.starts_with(&format!("dlqctl channel {} ({tier}): ", f.channel))
                && description.ends_with(" Runbook: https://runbooks.example.com/dlq/payments"),
            "{name}: {description}"
        );
    }
    for untiered in [
        format!("{dlq}-depth"),
        format!("{dlq}-oldest-age"),
        format!("{dlq}-dead-letter-rate"),
    ] {
        assert!(f.aws.alarm(&untiered).is_none(), "no untiered {untiered}");
    }
    // Issue 36: the dead-letter rate, a metric-math alarm per tier, read back from moto's
    // CloudWatch as apply wrote it (moto stores and returns `Metrics`; it never evaluates
    // an alarm, so what the expression computes is AWS's to check).
    for (tier, threshold, action) in [("warning", 0.001, CHAT), ("critical", 0.01, PAGER)] {
        let name = format!("{dlq}-dead-letter-rate-{tier}");
        let a = f
            .aws
            .alarm(&name)
            .unwrap_or_else(|| panic!("{name} exists"));
        assert_eq!(a.threshold(), Some(threshold), "{name}");
        assert_eq!(
            a.evaluation_periods(),
            Some(2),
            "{name}: for 10m / period 5m"
        );
        assert_eq!(a.metric_name(), None, "{name}: a metric-math alarm");
        assert_eq!(a.treat_missing_data(), Some("notBreaching"), "{name}");
        assert_eq!(a.alarm_actions(), [action], "{name}");
        // Id, metric (or expression), QueueName, ReturnData.
        type Query<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            Option<&'a str>,
            Option<bool>,
        );
        let queries: Vec<Query> = a
            .metrics()
            .iter()
            .map(|q| {
                let metric = q.metric_stat().and_then(|m| m.metric());
                (
                    q.id(),
                    metric.and_then(|m| m.metric_name()).or(q.expression()),
                    metric
                        .and_then(|m| m.dimensions().first())
                        .and_then(|d| d.value()),
                    q.return_data(),
                )
            })
            .collect();
        let main = f.channel.as_str();
        assert_eq!(
            queries,
            [
                (
                    Some("vis"),
                    Some("ApproximateNumberOfMessagesVisible"),
                    Some(dlq.as_str()),
                    Some(false)
                ),
                (
                    Some("nv"),
                    Some("ApproximateNumberOfMessagesNotVisible"),
                    Some(dlq.as_str()),
                    Some(false)
                ),
                (
                    Some("del"),
                    Some("NumberOfMessagesDeleted"),
                    Some(dlq.as_str()),
                    Some(false)
                ),
                (
                    Some("src"),
                    Some("NumberOfMessagesSent"),
                    Some(main),
                    Some(false)
                ),
                (Some("arr"), Some("DIFF(vis + nv) + del"), None, Some(false)),
                (
                    Some("rate"),
                    Some("IF(src > 0, IF(arr > 0, arr, 0) / src, 0)"),
                    None,
                    Some(true)
                ),
            ],
            "{name}"
        );
        assert!(
            a.metrics()
                .iter()
                .filter_map(|q| q.metric_stat())
                .all(|m| m.period() == Some(300)),
            "{name}: every query over the 5m period"
        );
    }

    // Someone raises the critical depth threshold by hand: only that tier's alarm changes.
    let critical = format!("{dlq}-depth-critical");
    let live = f.aws.alarm(&critical).expect("critical alarm");
    block(
        f.aws
            .put_alarm(
                &critical,
                &dlq,
                aws_sdk_cloudwatch::types::Statistic::Maximum,
                (60, 1),
                500.0,
            )
            .alarm_description(live.alarm_description().unwrap_or_default())
            .treat_missing_data("notBreaching")
            .alarm_actions(PAGER)
            .send(),
    )
    .expect("PutMetricAlarm");
    let p = f.plan();
    p.exits(2);
    p.assert_stdout_contains(&format!("~ update     alarm {critical}"));
    p.assert_stdout_contains("Threshold: 500 → 50");
    p.assert_stdout_contains("Plan: 0 to create, 1 to update, 0 to replace, 0 to delete.");
    let a = f.apply(&[]);
    a.ok();
    f.assert_empty_plan("after the repair");

    // Someone edits the rate alarm's expression by hand: the plan shows `Metrics` changing,
    // and apply puts dlqctl's back.
    let rate = format!("{dlq}-dead-letter-rate-critical");
    let live = f.aws.alarm(&rate).expect("the rate alarm");
    let mut queries = live.metrics().to_vec();
    if let Some(last) = queries.last_mut() {
        *last = aws_sdk_cloudwatch::types::MetricDataQuery::builder()
            .id("rate")
            .expression("del / src")
            .return_data(true)
            .build();
    }
    block(
        f.aws
            .cw
            .put_metric_alarm()
            .alarm_name(&rate)
            .set_alarm_description(live.alarm_description().map(str::to_owned))
            .set_metrics(Some(queries))
            .evaluation_periods(2)
            .threshold(0.01)
            .comparison_operator(
                aws_sdk_cloudwatch::types::ComparisonOperator::GreaterThanThreshold,
            )
            .treat_missing_data("notBreaching")
            .alarm_actions(PAGER)
            .send(),
    )
    .expect("PutMetricAlarm");
    let p = f.plan();
    p.exits(2);
    p.assert_stdout_contains(&format!("~ update     alarm {rate}"));
    p.assert_stdout_contains("del / src");
    f.apply(&[]).ok();
    f.assert_empty_plan("after the rate repair");

    // From one threshold to tiers: the untiered alarm is deleted (with --allow-delete), the
    // tier alarms stay as they are.
    f.write_from(EXAMPLE, |t| {
        t.replace("depth: {warning: 0, critical: 50}", "depth: {above: 0}")
    });
    let a = f.apply(&[]);
    a.ok();
    assert!(f.aws.alarm(&format!("{dlq}-depth")).is_some());
    f.write_from(EXAMPLE, |t| t);
    let p = f.plan();
    p.exits(2);
    p.assert_stdout_contains(&format!("- delete     alarm {dlq}-depth\n"));
    p.assert_stdout_contains("Plan: 0 to create, 0 to update, 0 to replace, 1 to delete.");
    let a = f.apply(&["--allow-delete"]);
    a.ok();
    f.assert_empty_plan("back on tiers");
}

/// `deadLetter.discard` sets the DLQ's MessageRetentionPeriod (read back with the AWS SDK);
/// every plan format shows the decision on the DLQ's change, `status` shows it beside the
/// DLQ, and after apply the plan is empty.
#[test]
fn a_discard_decision_is_the_dlq_retention_and_every_plan_and_status_says_why() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| {
        t.replace(
            "    retention: 14d\n",
            "    discard:\n      after: 5d\n      reason: the ledger job settles failed payments within 5 days\n      owner: team-payments\n",
        )
    });
    let json_plan = f.run(&["plan", "channel.yaml", "--format", "json"]);
    json_plan.ok();
    let doc: Value = serde_json::from_str(&json_plan.stdout).expect("plan JSON");
    let [_, dlq, _, _] = f.names();
    let decided: Vec<&Value> = doc["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .filter(|c| c.get("discard").is_some())
        .collect();
    assert_eq!(
        decided.len(),
        1,
        "only the DLQ's change carries it\n{}",
        json_plan.stdout
    );
    assert_eq!(decided[0]["resource"]["name"], json!(dlq));
    assert_eq!(
        decided[0]["discard"],
        json!({"after": "5d", "reason": "the ledger job settles failed payments within 5 days", "owner": "team-payments"})
    );
    let said = "discarded on purpose after 5d: the ledger job settles failed payments within 5 days (owner: team-payments)";
    f.plan().assert_stdout_contains(said);
    let md = f.run(&["plan", "channel.yaml", "--format", "markdown"]);
    md.assert_stdout_contains("*discarded on purpose after 5d*: the ledger job settles failed payments within 5 days (owner: team-payments)");

    f.first_apply("a channel with a discard decision");
    assert_eq!(
        f.aws.attributes(&dlq)["MessageRetentionPeriod"],
        "432000",
        "5d in seconds"
    );

    let status = f.run(&["status", "channel.yaml"]);
    status.ok();
    status.assert_stdout_contains(&format!("discard   {said}"));
}

/// `spec.invalid` on SQS (the chargebacks example): a queue that no queue may dead-letter into
/// (RedriveAllowPolicy `denyAll`, asked for with the AWS SDK), tagged as the channel's, with
/// its own alarm for the producing team; apply then plan is empty; a poison message a
/// producer put there (the SDK, as a consumer's code would) is still there after a second
/// apply.
#[test]
fn an_invalid_message_queue_denies_redrive_and_keeps_what_a_consumer_put_there() {
    const EXAMPLE: &str = "chargebacks-sqs-tiers.yaml";
    let Some(f) = Fixture::new() else { return };
    f.write_from(EXAMPLE, |t| t);
    let (first, a) = f.first_apply("the chargebacks example with its invalid-message queue");
    let invalid = format!("{}-invalid", f.channel);
    first.assert_stdout_contains(&format!("+ create     queue {invalid}\n"));
    first.assert_stdout_contains("RedriveAllowPolicy.redrivePermission: \"denyAll\"");
    // Created before the main queue: the consumer sends there from its first message on.
    let at = |q: &str| {
        a.stderr
            .find(&format!("create queue {q} on"))
            .unwrap_or_else(|| panic!("{q} created\n{}", a.stderr))
    };
    assert!(at(&invalid) < at(&f.channel), "{}", a.stderr);

    let attrs = f.aws.attributes(&invalid);
    assert_eq!(
        attrs["MessageRetentionPeriod"], "1209600",
        "14d, like a DLQ"
    );
    assert!(!attrs.contains_key("RedrivePolicy"), "{attrs:?}");
    let tags = f.aws.tags(&invalid);
    assert_eq!(tags.get("managed-by").map(String::as_str), Some("dlqctl"));
    assert_eq!(tags.get("dlqctl-channel"), Some(&f.channel));
    // RedriveAllowPolicy by name: AWS returns `denyAll`; moto cannot return it at all
    // (InvalidAttributeName), and the plan then says it cannot verify it.
    let asked = block(
        f.aws
            .sqs
            .get_queue_attributes()
            .queue_url(f.aws.url(&invalid))
            .attribute_names(QueueAttributeName::RedriveAllowPolicy)
            .send(),
    );
    match asked {
        Ok(out) => {
            let raw = out
                .attributes()
                .and_then(|a| a.get(&QueueAttributeName::RedriveAllowPolicy))
                .cloned()
                .unwrap_or_default();
            let policy: Value = serde_json::from_str(&raw).expect("RedriveAllowPolicy JSON");
            assert_eq!(policy["redrivePermission"], json!("denyAll"), "{raw}");
        }
        Err(e) => {
            let code = aws_sdk_sqs::error::ProvideErrorMetadata::code(&e).unwrap_or_default();
            assert!(code.contains("InvalidAttributeName"), "{e:?}");
            let p = f.plan();
            p.assert_stdout_contains(&format!("queue {invalid}"));
            p.assert_stdout_contains("RedriveAllowPolicy cannot be read from this endpoint");
        }
    }
    let alarm = f
        .aws
        .alarm(&format!("{invalid}-depth-warning"))
        .expect("the invalid queue's alarm");
    assert_eq!(alarm.dimensions()[0].value(), Some(invalid.as_str()));
    assert_eq!(
        alarm.alarm_actions(),
        ["arn:aws:sns:us-east-1:123456789012:chargebacks-producers"]
    );

    f.aws.send(&invalid, "chargeback-42: unknown card scheme");
    f.assert_second_apply_writes_nothing("with a poison message in the invalid queue");
    let got = f.aws.take(&invalid, 1);
    assert_eq!(
        got.iter().map(|(b, _)| b.as_str()).collect::<Vec<_>>(),
        ["chargeback-42: unknown card scheme"]
    );
}

/// `sqs:` block of the example with `encryption` (and whatever else `extra` adds).
fn with_sqs(extra: &str) -> impl Fn(String) -> String + '_ {
    move |t: String| {
        t.replace(
            "    visibilityTimeout: 30s\n",
            &format!("    visibilityTimeout: 30s\n{extra}"),
        )
    }
}

#[test]
fn a_kms_source_with_a_plain_dlq_is_noted_in_plan_and_fixed_by_apply() {
    let Some(f) = Fixture::applied() else { return };
    let [main, dlq, ..] = f.names();
    // Someone encrypts the source with a KMS key by hand; the DLQ stays on SQS-managed keys.
    f.aws.set(
        &main,
        &[
            (QueueAttributeName::KmsMasterKeyId, "alias/payments".into()),
            (QueueAttributeName::SqsManagedSseEnabled, "false".into()),
        ],
    );
    let p = f.plan();
    p.ok_with("not owned: a note, no change");
    p.assert_stdout_contains(&format!(
        "queue {dlq} on target {TARGET}: dead-letter queue encrypted less strongly than its source {main} (SSE-SQS here, SSE-KMS there)"
    ));

    // The spec takes encryption over: both queues get the key, the note goes.
    f.write_example(with_sqs(
        "    encryption: {kms: alias/payments, dataKeyReuse: 10m}\n",
    ));
    let p = f.plan();
    p.exits(2);
    for expected in [
        format!("~ update     queue {dlq}"),
        "KmsMasterKeyId: (absent) → \"alias/payments\"".to_owned(),
        "SqsManagedSseEnabled: true → false".to_owned(),
        "KmsDataKeyReusePeriodSeconds: 300 → 600".to_owned(),
    ] {
        p.assert_stdout_contains(&expected);
    }
    assert!(
        !p.stdout.contains("encrypted less strongly"),
        "{}",
        p.stdout
    );
    let a = f.apply(&[]);
    a.ok();
    for q in [&main, &dlq] {
        let attrs = f.aws.attributes(q);
        assert_eq!(
            attrs.get("KmsMasterKeyId").map(String::as_str),
            Some("alias/payments"),
            "{q}: {attrs:?}"
        );
        assert_eq!(
            attrs
                .get("KmsDataKeyReusePeriodSeconds")
                .map(String::as_str),
            Some("600"),
            "{q}"
        );
        assert_eq!(
            attrs.get("SqsManagedSseEnabled").map(String::as_str),
            Some("false"),
            "{q}"
        );
    }
    f.assert_empty_plan("after apply");

    // Back to SSE-SQS: the key is removed from both.
    f.write_example(with_sqs("    encryption: {managed: true}\n"));
    let a = f.apply(&[]);
    a.ok();
    for q in [&main, &dlq] {
        let attrs = f.aws.attributes(q);
        assert_eq!(attrs.get("KmsMasterKeyId"), None, "{q}: {attrs:?}");
        assert_eq!(
            attrs.get("SqsManagedSseEnabled").map(String::as_str),
            Some("true"),
            "{q}"
        );
    }
    f.assert_empty_plan("after going back to SSE-SQS");
}

#[test]
fn queue_policies_round_trip_and_a_hand_edit_shows_as_a_json_diff() {
    let policy = "    policy:\n      Version: \"2012-10-17\"\n      Statement:\n        - {Sid: send, Effect: Allow, Principal: {AWS: \"arn:aws:iam::123456789012:role/app\"}, Action: \"sqs:SendMessage\", Resource: \"*\"}\n        - {Sid: read, Effect: Allow, Principal: {AWS: \"arn:aws:iam::123456789012:role/app\"}, Action: \"sqs:ReceiveMessage\", Resource: \"*\"}\n";
    // The DLQ's policy as JSON text: operators only.
    let dlq_policy = "    sqs:\n      policy: '{\"Version\": \"2012-10-17\", \"Statement\": [{\"Sid\": \"ops\", \"Effect\": \"Allow\", \"Principal\": {\"AWS\": \"arn:aws:iam::123456789012:role/app\"}, \"Action\": \"sqs:*\", \"Resource\": \"*\"}]}'\n";
    let edit = |t: String| {
        with_sqs(policy)(t).replace(
            "    retention: 14d\n",
            &format!("    retention: 14d\n{dlq_policy}"),
        )
    };
    let Some(f) = Fixture::applied_with(edit) else {
        return;
    };
    let [main, dlq, ..] = f.names();
    f.assert_empty_plan("policies applied");
    let live: Value =
        serde_json::from_str(&f.aws.attributes(&dlq)["Policy"]).expect("DLQ policy is JSON");
    assert_eq!(live["Statement"][0]["Sid"], json!("ops"), "{live}");

    // Someone rewrites the main queue's policy by hand: other statement order, other
    // whitespace, and one real change (anyone may now send).
    let mut hand: Value = serde_json::from_str(&f.aws.attributes(&main)["Policy"]).expect("JSON");
    let statements = hand["Statement"].as_array_mut().expect("a list");
    statements.reverse();
    for s in statements.iter_mut().filter(|s| s["Sid"] == json!("send")) {
        s["Principal"] = json!({"AWS": "*"});
    }
    let text = serde_json::to_string_pretty(&hand).expect("JSON");
    f.aws.set(&main, &[(QueueAttributeName::Policy, text)]);

    let p = f.plan();
    p.exits(2);
    p.assert_stdout_contains(&format!("~ update     queue {main}"));
    let diff: Vec<&str> = p
        .stdout
        .lines()
        .map(str::trim)
        .filter(|l| {
            (l.starts_with('-') || l.starts_with('+'))
                && !l.starts_with("---")
                && !l.starts_with("+++")
        })
        .filter(|l| !l.starts_with("+ create") && !l.starts_with("- delete"))
        .collect();
    assert_eq!(
        diff,
        [
            "-        \"AWS\": \"*\"",
            "+        \"AWS\": \"arn:aws:iam::123456789012:role/app\""
        ],
        "only the changed principal shows, not the order or the whitespace\n{}",
        p.stdout
    );
    assert!(
        !p.stdout.contains(&format!("queue {dlq}\n")),
        "{}",
        p.stdout
    );
    let a = f.apply(&[]);
    a.ok();
    f.assert_empty_plan("after the repair");
}
