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
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};
use support::{Output, dlqctl, output, unique};

const TARGET: &str = "local-sqs";

/// An SDK client pair as a third party would use it (not through dlqctl).
struct Aws {
    sqs: aws_sdk_sqs::Client,
    cw: aws_sdk_cloudwatch::Client,
}

fn aws() -> Aws {
    let creds = aws_sdk_sqs::config::Credentials::new("testing", "testing", None, None, "tests");
    let sqs = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .endpoint_url(support::aws_endpoint())
        .credentials_provider(creds.clone())
        .build();
    let cw = aws_sdk_cloudwatch::Config::builder()
        .behavior_version(aws_sdk_cloudwatch::config::BehaviorVersion::latest())
        .region(aws_sdk_cloudwatch::config::Region::new("us-east-1"))
        .endpoint_url(support::aws_endpoint())
        .credentials_provider(creds)
        .build();
    Aws {
        sqs: aws_sdk_sqs::Client::from_conf(sqs),
        cw: aws_sdk_cloudwatch::Client::from_conf(cw),
    }
}

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Per-test workspace: the example targets file pointing at moto, one channel.
struct Fixture {
    dir: tempfile::TempDir,
    channel: String,
    aws: Aws,
}

impl Fixture {
    fn new() -> Option<Self> {
        let up = support::tcp_up(&support::host_port(&support::aws_endpoint()));
        if !support::require("moto (SQS + CloudWatch)", up) {
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let targets = std::fs::read_to_string(support::root().join("examples/dlqctl.yaml"))
            .expect("examples/dlqctl.yaml")
            .replace("http://127.0.0.1:5000", &support::aws_endpoint());
        std::fs::write(dir.path().join("dlqctl.yaml"), targets).expect("write targets");
        Some(Fixture {
            dir,
            channel: unique("payments-t"),
            aws: aws(),
        })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes an example with this fixture's channel name and the given edits.
    fn write_example(&self, example: &str, edit: impl Fn(String) -> String) -> PathBuf {
        let text = std::fs::read_to_string(support::root().join("examples").join(example))
            .expect("example");
        let original = example_channel(&text);
        let text = text.replace(
            &format!("  name: {original}\n"),
            &format!("  name: {}\n", self.channel),
        );
        let path = self.dir.path().join("channel.yaml");
        std::fs::write(&path, edit(text)).expect("write spec");
        path
    }

    fn run(&self, args: &[&str]) -> Output {
        output(
            support::dlqctl_local(self.path())
                .args(args)
                .args(["--color", "never"]),
        )
    }

    fn plan(&self) -> Output {
        self.run(&["plan", "channel.yaml", "--detailed-exitcode"])
    }

    fn apply(&self, extra: &[&str]) -> Output {
        let mut args = vec!["apply", "channel.yaml", "--auto-approve"];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    /// Main queue, DLQ, depth alarm, oldest-age alarm (standard-queue names).
    fn names(&self) -> [String; 4] {
        let c = &self.channel;
        [
            c.clone(),
            format!("{c}-dlq"),
            format!("{c}-dlq-depth"),
            format!("{c}-dlq-oldest-age"),
        ]
    }

    fn url(&self, queue: &str) -> String {
        block(self.aws.sqs.get_queue_url().queue_name(queue).send())
            .unwrap_or_else(|e| panic!("queue {queue} exists: {e:?}"))
            .queue_url()
            .unwrap_or_default()
            .to_owned()
    }

    fn attributes(&self, queue: &str) -> BTreeMap<String, String> {
        let url = self.url(queue);
        block(
            self.aws
                .sqs
                .get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::All)
                .send(),
        )
        .expect("GetQueueAttributes")
        .attributes()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
        .collect()
    }

    fn exists(&self, queue: &str) -> bool {
        block(self.aws.sqs.get_queue_url().queue_name(queue).send()).is_ok()
    }

    fn set(&self, queue: &str, attrs: &[(QueueAttributeName, String)]) {
        let url = self.url(queue);
        let mut req = self.aws.sqs.set_queue_attributes().queue_url(url);
        for (k, v) in attrs {
            req = req.attributes(k.clone(), v);
        }
        block(req.send()).expect("SetQueueAttributes");
    }

    fn send(&self, queue: &str, body: &str) {
        let url = self.url(queue);
        block(
            self.aws
                .sqs
                .send_message()
                .queue_url(url)
                .message_body(body)
                .send(),
        )
        .expect("SendMessage");
    }

    fn alarm(&self, name: &str) -> Option<aws_sdk_cloudwatch::types::MetricAlarm> {
        block(self.aws.cw.describe_alarms().alarm_names(name).send())
            .expect("DescribeAlarms")
            .metric_alarms()
            .first()
            .cloned()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let (sqs, cw, prefix) = (
            self.aws.sqs.clone(),
            self.aws.cw.clone(),
            self.channel.clone(),
        );
        block(async move {
            if let Ok(out) = sqs.list_queues().queue_name_prefix(&prefix).send().await {
                for url in out.queue_urls() {
                    let _ = sqs.delete_queue().queue_url(url).send().await;
                }
            }
            if let Ok(out) = cw.describe_alarms().alarm_name_prefix(&prefix).send().await {
                let names: Vec<String> = out
                    .metric_alarms()
                    .iter()
                    .filter_map(|a| a.alarm_name().map(str::to_owned))
                    .collect();
                if !names.is_empty() {
                    let _ = cw.delete_alarms().set_alarm_names(Some(names)).send().await;
                }
            }
        });
    }
}

/// The channel name an example declares (`metadata.name`).
fn example_channel(text: &str) -> String {
    let after = text.split("metadata:\n").nth(1).expect("metadata block");
    let line = after
        .lines()
        .find(|l| l.trim_start().starts_with("name:"))
        .expect("metadata.name");
    line.trim().trim_start_matches("name:").trim().to_owned()
}

/// Every example whose channel uses the SQS target.
fn sqs_examples() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(support::root().join("examples"))
        .expect("examples/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            std::fs::read_to_string(support::root().join("examples").join(n)).is_ok_and(|t| {
                t.contains("kind: Channel") && t.contains(&format!("target: {TARGET}"))
            })
        })
        .collect();
    out.sort();
    out
}

fn assert_empty_plan(f: &Fixture, context: &str) {
    let p = f.plan();
    assert_eq!(
        p.code, 0,
        "{context}: plan must be empty (exit 0)\n{}{}",
        p.stdout, p.stderr
    );
    assert!(p.stdout.contains("No changes."), "{context}\n{}", p.stdout);
}

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
    let examples = sqs_examples();
    assert!(
        examples.len() >= 2,
        "the standard and the FIFO example: {examples:?}"
    );
    for example in examples {
        let Some(f) = Fixture::new() else { return };
        f.write_example(&example, |t| t);
        let first = f.plan();
        assert_eq!(
            first.code, 2,
            "{example}: a fresh channel has changes\n{}{}",
            first.stdout, first.stderr
        );

        let a = f.apply(&[]);
        assert_eq!(a.code, 0, "{example}\n{}{}", a.stdout, a.stderr);
        assert_empty_plan(&f, &format!("{example} after apply"));

        // A plan with nothing to change reads at the lower bound: one listing, one
        // GetQueueAttributes per queue, one DescribeAlarms, and no tags.
        let p = f.run(&["plan", "channel.yaml", "--stats"]);
        assert_eq!(p.code, 0, "{}", p.stderr);
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
        // 2 queues + 1 probe: moto cannot return RedriveAllowPolicy (on AWS, 2).
        assert_eq!(
            calls.get("sqs:GetQueueAttributes"),
            Some(&3),
            "{example}: {calls:?}"
        );
        assert!(
            !calls.keys().any(|k| k.contains("Tags")),
            "{example}: no tag reads without changes: {calls:?}"
        );
        assert!(
            p.stdout
                .contains("RedriveAllowPolicy cannot be read from this endpoint"),
            "{}",
            p.stdout
        );

        let again = f.apply(&[]);
        assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
        assert!(again.stdout.contains("No changes."), "{}", again.stdout);
        assert!(
            !again.stderr.contains("[1/"),
            "a second apply makes no writes\n{}",
            again.stderr
        );
    }
}

#[test]
fn the_standard_example_builds_the_documented_topology() {
    let Some(f) = Fixture::new() else { return };
    f.write_example("payments-sqs.yaml", |t| t);
    let a = f.apply(&[]);
    assert_eq!(a.code, 0, "{}{}", a.stdout, a.stderr);
    assert!(
        a.stderr.contains("[4/4]"),
        "DLQ, main queue, two alarms, each reported\n{}",
        a.stderr
    );
    let [main, dlq, depth, age] = f.names();

    let m = f.attributes(&main);
    let d = f.attributes(&dlq);
    let policy: Value = serde_json::from_str(&m["RedrivePolicy"]).expect("RedrivePolicy JSON");
    assert_eq!(policy["deadLetterTargetArn"], json!(d["QueueArn"]));
    assert_eq!(policy["maxReceiveCount"], json!(5));
    assert_eq!(m["MessageRetentionPeriod"], "345600");
    assert_eq!(d["MessageRetentionPeriod"], "1209600");
    assert_eq!(m["VisibilityTimeout"], "30");
    assert!(!d.contains_key("RedrivePolicy"));
    for q in [&main, &dlq] {
        let tags = block(f.aws.sqs.list_queue_tags().queue_url(f.url(q)).send()).expect("tags");
        let tags = tags.tags().cloned().unwrap_or_default();
        assert_eq!(
            tags.get("managed-by").map(String::as_str),
            Some("dlqctl"),
            "{q}"
        );
        assert_eq!(tags.get("dlqctl-channel"), Some(&f.channel), "{q}");
    }

    let a = f.alarm(&depth).expect("depth alarm");
    assert_eq!(a.metric_name(), Some("ApproximateNumberOfMessagesVisible"));
    assert_eq!(a.namespace(), Some("AWS/SQS"));
    assert_eq!(a.dimensions()[0].value(), Some(dlq.as_str()));
    assert_eq!(a.threshold(), Some(0.0));
    assert_eq!(a.treat_missing_data(), Some("notBreaching"));
    assert_eq!(
        a.alarm_actions(),
        ["arn:aws:sns:us-east-1:123456789012:payments-ops"]
    );
    let a = f.alarm(&age).expect("oldest-age alarm");
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
    let Some(f) = Fixture::new() else { return };
    f.write_example("payments-sqs.yaml", |t| t);
    assert_eq!(f.apply(&[]).code, 0);
    let [main, dlq, depth, age] = f.names();
    let dlq_arn = f.attributes(&dlq)["QueueArn"].clone();

    // Someone raises maxReceiveCount and shortens retention on the main queue, edits the depth
    // alarm's threshold (PutMetricAlarm, as the console does) and deletes the age alarm.
    f.set(
        &main,
        &[
            (
                QueueAttributeName::RedrivePolicy,
                json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 9}).to_string(),
            ),
            (QueueAttributeName::MessageRetentionPeriod, "172800".into()),
        ],
    );
    block(
        f.aws
            .cw
            .put_metric_alarm()
            .alarm_name(&depth)
            .alarm_description(format!(
                "dlqctl channel {}: messages wait in the dead-letter queue",
                f.channel
            ))
            .namespace("AWS/SQS")
            .metric_name("ApproximateNumberOfMessagesVisible")
            .dimensions(
                aws_sdk_cloudwatch::types::Dimension::builder()
                    .name("QueueName")
                    .value(&dlq)
                    .build(),
            )
            .statistic(aws_sdk_cloudwatch::types::Statistic::Maximum)
            .period(60)
            .evaluation_periods(1)
            .threshold(10.0)
            .comparison_operator(
                aws_sdk_cloudwatch::types::ComparisonOperator::GreaterThanThreshold,
            )
            .treat_missing_data("notBreaching")
            .alarm_actions("arn:aws:sns:us-east-1:123456789012:payments-ops")
            .send(),
    )
    .expect("PutMetricAlarm");
    block(f.aws.cw.delete_alarms().alarm_names(&age).send()).expect("DeleteAlarms");

    let p = f.plan();
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
    for expected in [
        format!("~ update     queue {main}"),
        "RedrivePolicy.maxReceiveCount: 9 → 5".to_owned(),
        "MessageRetentionPeriod: 172800 → 345600".to_owned(),
        format!("~ update     alarm {depth}"),
        "Threshold: 10 → 0".to_owned(),
        format!("+ create     alarm {age}"),
        "Plan: 1 to create, 2 to update, 0 to replace, 0 to delete.".to_owned(),
    ] {
        assert!(
            p.stdout.contains(&expected),
            "missing `{expected}`\n{}",
            p.stdout
        );
    }
    assert!(
        !p.stdout.contains("destructive") && !p.stdout.contains("deletes every message"),
        "raising retention loses nothing\n{}",
        p.stdout
    );
    let a = f.apply(&[]);
    assert_eq!(a.code, 0, "repairs need no flag\n{}{}", a.stdout, a.stderr);
    assert_empty_plan(&f, "after the repair");

    // An alarm the spec no longer asks for is deleted, and only with --allow-delete.
    f.write_example("payments-sqs.yaml", |t| {
        t.replace("    oldestMessageAge: {above: 30m}\n", "")
    });
    let p = f.plan();
    assert!(
        p.stdout.contains(&format!("- delete     alarm {age}")),
        "{}",
        p.stdout
    );
    let refused = f.apply(&[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--allow-delete"),
        "{}",
        refused.stderr
    );
    assert!(f.alarm(&age).is_some(), "zero writes");
    assert_eq!(f.apply(&["--allow-delete"]).code, 0);
    assert!(f.alarm(&age).is_none());
    assert_empty_plan(&f, "after the delete");
}

#[test]
fn a_message_received_max_attempts_times_ends_up_in_the_dlq() {
    let Some(f) = Fixture::new() else { return };
    f.write_example("payments-sqs.yaml", |t| {
        t.replace("maxAttempts: 5", "maxAttempts: 3")
            .replace("visibilityTimeout: 30s", "visibilityTimeout: 1s")
    });
    let a = f.apply(&[]);
    assert_eq!(a.code, 0, "{}{}", a.stdout, a.stderr);
    let [main, dlq, ..] = f.names();
    f.send(&main, "payment-42");
    let (main_url, dlq_url) = (f.url(&main), f.url(&dlq));
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
    let Some(f) = Fixture::new() else { return };
    f.write_example("payments-sqs.yaml", |t| t);
    assert_eq!(f.apply(&[]).code, 0);
    let [main, ..] = f.names();
    f.send(&main, "a");
    f.send(&main, "b");
    f.write_example("payments-sqs.yaml", |t| {
        t.replace("retention: 4d", "retention: 1d")
    });
    let p = f.plan();
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
    assert!(
        p.stdout.contains(&format!("~ update     queue {main}")),
        "{}",
        p.stdout
    );
    assert!(
        p.stdout.contains("lowering MessageRetentionPeriod from 345600 s to 86400 s deletes every message older than 86400 s at once; the queue holds 2 messages now"),
        "{}",
        p.stdout
    );

    let refused = f.apply(&[]);
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains("--allow-message-loss"),
        "{}",
        refused.stderr
    );
    assert!(
        !refused.stderr.contains("[1/"),
        "zero writes\n{}",
        refused.stderr
    );
    assert_eq!(
        f.attributes(&main)["MessageRetentionPeriod"],
        "345600",
        "untouched"
    );

    let done = f.apply(&["--allow-message-loss"]);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    assert_eq!(f.attributes(&main)["MessageRetentionPeriod"], "86400");
    assert_empty_plan(&f, "after lowering retention");
}

#[test]
fn a_fifo_flip_is_a_guarded_replace_that_shows_the_messages_it_would_drop() {
    let Some(f) = Fixture::new() else { return };
    f.write_example("refunds-sqs-fifo.yaml", |t| t);
    let main = format!("{}.fifo", f.channel);
    // A standard queue under the FIFO name, tagged as this channel's. AWS forbids `.fifo` in
    // a standard queue's name, so on AWS this state cannot arise from a spec change; moto
    // allows it, which makes it the one way to exercise an in-place FifoQueue difference.
    block(
        f.aws
            .sqs
            .create_queue()
            .queue_name(&main)
            .tags("managed-by", "dlqctl")
            .tags("dlqctl-channel", &f.channel)
            .send(),
    )
    .expect("CreateQueue");
    f.send(&main, "refund-7");

    let p = f.plan();
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
    assert!(
        p.stdout.contains(&format!(
            "-/+ replace    queue {main}  (holds 1 messages that would be lost)"
        )),
        "{}",
        p.stdout
    );
    assert!(p.stdout.contains("FifoQueue: false → true"), "{}", p.stdout);

    let refused = f.apply(&[]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("--allow-replace"),
        "{}",
        refused.stderr
    );
    let refused = f.apply(&["--allow-replace"]);
    assert_eq!(
        refused.code, 1,
        "replace allowed, message loss not\n{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("holds 1 messages")
            && refused.stderr.contains("--allow-message-loss"),
        "{}",
        refused.stderr
    );
    assert!(
        !refused.stderr.contains("[1/"),
        "zero writes\n{}",
        refused.stderr
    );
    assert!(
        !f.exists(&format!("{}-dlq.fifo", f.channel)),
        "zero writes: the DLQ was not created"
    );
    let attrs = f.attributes(&main);
    assert!(!attrs.contains_key("FifoQueue"), "still the standard queue");
    assert_eq!(
        attrs["ApproximateNumberOfMessages"], "1",
        "the message is still there"
    );

    let done = f.apply(&["--allow-replace", "--allow-message-loss"]);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    assert_eq!(
        f.attributes(&main).get("FifoQueue").map(String::as_str),
        Some("true")
    );
    assert_empty_plan(&f, "after the replace");
}

#[test]
fn an_existing_untagged_queue_is_not_adopted() {
    let Some(f) = Fixture::new() else { return };
    f.write_example("payments-sqs.yaml", |t| t);
    let [main, dlq, ..] = f.names();
    block(f.aws.sqs.create_queue().queue_name(&main).send()).expect("CreateQueue");

    let p = f.plan();
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
    assert!(
        p.stdout.contains(&format!("! impossible queue {main}")),
        "{}",
        p.stdout
    );
    assert!(
        p.stdout.contains("is not tagged `managed-by: dlqctl`")
            && p.stdout.contains("dlqctl import"),
        "{}",
        p.stdout
    );
    let refused = f.apply(&[]);
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused
            .stderr
            .contains(&format!("queue {main} on target `{TARGET}`")),
        "{}",
        refused.stderr
    );
    assert!(
        !f.exists(&dlq),
        "zero writes: nothing of the channel is created"
    );
    assert!(
        !f.attributes(&main).contains_key("RedrivePolicy"),
        "the foreign queue is untouched"
    );
}

#[test]
fn a_stale_saved_plan_is_refused_with_zero_writes() {
    let Some(f) = Fixture::new() else { return };
    f.write_example("payments-sqs.yaml", |t| t);
    assert_eq!(f.apply(&[]).code, 0);
    f.write_example("payments-sqs.yaml", |t| {
        t.replace("maxAttempts: 5", "maxAttempts: 6")
    });
    let p = f.run(&["plan", "channel.yaml", "--out", "plan.json"]);
    assert_eq!(p.code, 0, "{}", p.stderr);
    assert!(
        p.stdout.contains("RedrivePolicy.maxReceiveCount: 5 → 6"),
        "{}",
        p.stdout
    );
    let saved = std::fs::read_to_string(f.path().join("plan.json")).expect("saved plan");
    assert!(
        !saved.contains("\"testing\""),
        "no credentials in a saved plan"
    );

    // Someone changes the main queue between plan and apply.
    let [main, ..] = f.names();
    f.set(
        &main,
        &[(QueueAttributeName::VisibilityTimeout, "45".into())],
    );
    let a = f.run(&["apply", "plan.json"]);
    assert_eq!(a.code, 1, "{}{}", a.stdout, a.stderr);
    assert!(a.stderr.contains("refused"), "{}", a.stderr);
    assert!(
        a.stderr
            .contains(&format!("queue {main} on target `{TARGET}` was modified")),
        "{}",
        a.stderr
    );
    let policy: Value = serde_json::from_str(&f.attributes(&main)["RedrivePolicy"]).expect("JSON");
    assert_eq!(policy["maxReceiveCount"], json!(5), "zero writes");

    // Put back as planned, the saved plan applies.
    f.set(
        &main,
        &[(QueueAttributeName::VisibilityTimeout, "30".into())],
    );
    let a = f.run(&["apply", "plan.json"]);
    assert_eq!(a.code, 0, "{}{}", a.stdout, a.stderr);
    assert_empty_plan(&f, "after applying the saved plan");
}

#[test]
fn plans_render_in_every_format() {
    let Some(f) = Fixture::new() else { return };
    f.write_example("payments-sqs.yaml", |t| t);
    assert_eq!(f.apply(&[]).code, 0);
    let [main, dlq, depth, _] = f.names();
    let dlq_arn = f.attributes(&dlq)["QueueArn"].clone();
    f.set(
        &main,
        &[(
            QueueAttributeName::RedrivePolicy,
            json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "9"}).to_string(),
        )],
    );
    block(f.aws.cw.delete_alarms().alarm_names(&depth).send()).expect("DeleteAlarms");
    f.write_example("payments-sqs.yaml", |t| {
        t.replace("retention: 4d", "retention: 3d")
    });

    let mut settings = insta::Settings::clone_current();
    // The random part of the channel name (`payments-t<pid>-<time>-<n>`).
    settings.add_filter(r"t\d+-\d+-\d+", "[ID]");
    settings.add_filter(r#""hash": "[0-9a-f]{32}""#, r#""hash": "[HASH]""#);
    settings.add_filter(
        r#""dlqctl_version": "[^"]+""#,
        r#""dlqctl_version": "[VERSION]""#,
    );
    settings.add_filter(&regex_escape(&support::aws_endpoint()), "[ENDPOINT]");
    settings.bind(|| {
        for format in ["human", "json", "markdown"] {
            let p = f.run(&["plan", "channel.yaml", "--format", format]);
            assert_eq!(p.code, 0, "{}", p.stderr);
            insta::assert_snapshot!(format!("plan-{format}"), p.stdout);
        }
    });
}

fn regex_escape(s: &str) -> String {
    s.chars().fold(String::new(), |mut out, c| {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

#[test]
fn errors_name_the_target_and_never_print_credentials() {
    let Some(f) = Fixture::new() else { return };
    f.write_example("payments-sqs.yaml", |t| t);
    // Nothing listens on port 9; the secret must not appear anywhere in the output.
    let targets = std::fs::read_to_string(f.path().join("dlqctl.yaml")).expect("targets");
    std::fs::write(
        f.path().join("dlqctl.yaml"),
        targets.replace(&support::aws_endpoint(), "http://127.0.0.1:9"),
    )
    .expect("write");
    let out = output(
        dlqctl()
            .args(["plan", "channel.yaml", "--color", "never"])
            .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLESECRETID")
            .env("AWS_SECRET_ACCESS_KEY", "s3cr3t-never-printed")
            .current_dir(f.path()),
    );
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!("target `{TARGET}`")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("cannot reach the endpoint"),
        "{}",
        out.stderr
    );
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
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!("target `{TARGET}`"))
            && out.stderr.contains("no AWS credentials"),
        "{}",
        out.stderr
    );
}
