//! `dlqctl import`, `--adopt` and `--prune`, live against the local stack (`scripts/stack up`),
//! through the real binary.
//!
//! Every test works in its own namespace: a targets file whose ownership prefixes (SQS too)
//! start with a random stem, so that an import or a prune sees only what this test made,
//! even with other tests (or another checkout's tests) running against the same servers.
//! Objects "made by hand" are made the way an operator would, with the clients `support` holds
//! for each backend: RabbitMQ management API calls, the AWS SDK, rdkafka admin calls.
//! Everything under the stem is deleted when the test ends, look-alikes included.

mod support;

use std::ops::Deref;
use std::path::PathBuf;
use std::time::Duration;

use aws_sdk_cloudwatch::types::Statistic;
use aws_sdk_sqs::types::QueueAttributeName;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::json;
use support::kafka::create_topics;
use support::rabbit::{
    api_ok, bind, declare_exchange, declare_queue, queue_status, wait_for_messages,
};
use support::sqs::Aws;
use support::workspace::{Endpoints, Workspace};
use support::{Output, block, dlqctl, output};

/// One test's world: a workspace whose targets file is scoped to a random stem.
struct World {
    ws: Workspace,
    /// `imp<pid>-<time>-<n>`: every name this test makes starts with it.
    stem: String,
    aws: Aws,
}

impl World {
    /// `None` (the test skips, loudly) when a server it needs is down and live tests may skip.
    fn new(needs: &[&str]) -> Option<Self> {
        for n in needs {
            let up = match *n {
                "rabbitmq" => support::tcp_up(&support::host_port(&support::rabbitmq_url())),
                "sqs" => support::tcp_up(&support::host_port(&support::aws_endpoint())),
                _ => support::tcp_up(&support::kafka_bootstrap()),
            };
            if !support::require(n, up) {
                return None;
            }
        }
        let ws = Workspace::new("orders-rabbitmq.yaml", "imp", &Endpoints::default());
        let stem = ws.channel.clone();
        let targets = format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  local-sqs:\n    backend: sqs\n    region: us-east-1\n    endpoint: {aws}\n    ownership: {{prefixes: [\"{stem}-\"]}}\n  local-rabbitmq:\n    backend: rabbitmq\n    url: {rabbit}\n    vhost: /\n    usernameEnv: DLQCTL_RABBITMQ_USER\n    passwordEnv: DLQCTL_RABBITMQ_PASSWORD\n    ownership: {{prefixes: [\"{stem}.\"]}}\n  local-kafka:\n    backend: kafka\n    bootstrapServers: {kafka}\n    ownership: {{prefixes: [\"{stem}.\"]}}\n",
            aws = support::aws_endpoint(),
            rabbit = support::rabbitmq_url(),
            kafka = support::kafka_bootstrap(),
        );
        ws.edit_targets(|_| targets.clone());
        std::fs::create_dir_all(ws.path().join("specs")).expect("specs/");
        Some(World {
            ws,
            stem,
            aws: Aws::new(),
        })
    }

    /// Writes an example into `specs/` under `channel` (its `metadata.name`).
    fn example(&self, example: &str, channel: &str) -> PathBuf {
        let text = support::workspace::renamed(example, channel);
        let path = self.path().join("specs").join(format!("{channel}.yaml"));
        std::fs::write(&path, text).expect("write spec");
        path
    }

    fn ok(&self, args: &[&str]) -> Output {
        let o = self.run(args);
        o.ok_with(format!("{args:?}"));
        o
    }

    /// The round trip's first half: `apply specs` (which must succeed), then the specs
    /// deleted, so that what [`World::import`] writes comes from the live objects alone.
    fn apply_and_forget(&self) {
        self.ok(&["apply", "specs", "--auto-approve"]);
        std::fs::remove_dir_all(self.path().join("specs")).expect("delete the specs");
    }

    /// Imports `target` into a fresh `imported/`, which must lint clean but for the decisions
    /// only a person can write (`deadletter/discard-undeclared`: a DLQ that drops messages,
    /// imported as a `discard` without a reason, said in the file's header); returns the output.
    fn import(&self, target: &str, extra: &[&str]) -> Output {
        let _ = std::fs::remove_dir_all(self.path().join("imported"));
        let mut args = vec!["import", "--target", target, "--out", "imported"];
        args.extend_from_slice(extra);
        let o = self.ok(&args);
        let lint = self.run(&["lint", "imported", "--format", "json"]);
        let text = self.imported_text();
        lint.ok_with(format!("imported specs lint without errors\n\n{text}"));
        let doc: serde_json::Value = serde_json::from_str(&lint.stdout).expect("lint JSON");
        // Import never silences lint (issue 53): no `lint.allow` is written, and the risks
        // found live stay warnings, each said in the file's header with its fix.
        assert!(
            !text.contains("\n  lint:"),
            "import writes no lint.allow\n{text}"
        );
        for d in doc["diagnostics"].as_array().expect("diagnostics") {
            if d["severity"] == "info" {
                continue;
            }
            if RISKS.iter().any(|r| d["rule"] == *r) {
                assert!(
                    text.contains(&format!("#   {}", d["rule"].as_str().unwrap_or_default())),
                    "the header names the risk {}\n{text}",
                    d["rule"]
                );
                continue;
            }
            assert_eq!(
                d["rule"], "deadletter/discard-undeclared",
                "the only other warning is a decision to write\n{}\n{text}",
                lint.stdout
            );
            assert!(
                text.contains("To decide"),
                "the header says what to decide\n{text}"
            );
        }
        o
    }

    fn imported_text(&self) -> String {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.path().join("imported"))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("---\n")
    }

    fn assert_empty_plan(&self, paths: &[&str], extra: &[&str], context: &str) {
        self.assert_empty_plan_of(paths, extra, context, || self.imported_text());
    }
}

/// Lint warnings about the live state that import leaves on (it used to silence them).
const RISKS: [&str; 5] = [
    "alarms/missing",
    "retry/none",
    "sqs/dlq-retention",
    "rabbitmq/at-most-once",
    "kafka/dlt-partitions",
];

impl Deref for World {
    type Target = Workspace;
    fn deref(&self) -> &Workspace {
        &self.ws
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if support::tcp_up(&support::host_port(&support::rabbitmq_url())) {
            support::rabbit::delete_prefixed(&self.stem);
        }
        if support::tcp_up(&support::host_port(&support::aws_endpoint())) {
            self.aws.delete_prefixed(&self.stem);
        }
        if support::tcp_up(&support::kafka_bootstrap()) {
            support::kafka::delete_prefixed(&self.stem);
        }
    }
}

// ---------------------------------------------------------------------------------------------

#[test]
fn import_help_is_snapshotted() {
    let o = output(dlqctl().args(["import", "--help"]));
    o.ok();
    insta::assert_snapshot!("import-help", o.stdout);
}

#[test]
fn rabbitmq_round_trip_applied_example_deleted_spec_imported_plan_empty() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let channel = format!("{}.orders", w.stem);
    w.example("orders-rabbitmq.yaml", &channel);
    w.apply_and_forget();
    let o = w.import("local-rabbitmq", &[]);
    assert_eq!(o.stdout.trim(), format!("imported/{channel}.yaml"));
    w.assert_empty_plan(&["imported"], &[], "after import");

    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"imp\d+-\d+-\d+", "[STEM]");
    settings.bind(|| {
        insta::assert_snapshot!("rabbitmq-import-file", w.imported_text());
        insta::assert_snapshot!("rabbitmq-import-report", o.stderr);
    });
}

#[test]
fn sqs_round_trip_of_every_sqs_example_plans_empty() {
    let Some(w) = World::new(&["sqs"]) else {
        return;
    };
    w.example("payments-sqs.yaml", &format!("{}-payments", w.stem));
    w.example("refunds-sqs-fifo.yaml", &format!("{}-refunds", w.stem));
    w.apply_and_forget();
    let o = w.import("local-sqs", &[]);
    assert_eq!(o.stdout.lines().count(), 2, "{}{}", o.stdout, o.stderr);
    assert!(!o.stderr.contains("Not imported"), "{}", o.stderr);
    assert!(
        !o.stderr.contains("--adopt"),
        "dlqctl's own queues need no adoption\n{}",
        o.stderr
    );
    w.assert_empty_plan(&["imported"], &[], "after import");
    w.assert_empty_plan(&["imported"], &["--adopt"], "nothing to adopt");
}

#[test]
fn kafka_round_trip_of_the_example_plans_empty() {
    let Some(w) = World::new(&["kafka"]) else {
        return;
    };
    w.example(
        "inventory-kafka.yaml",
        &format!("{}.inventory.events", w.stem),
    );
    w.apply_and_forget();
    let o = w.import("local-kafka", &[]);
    assert_eq!(o.stdout.lines().count(), 1, "{}{}", o.stdout, o.stderr);
    let text = w.imported_text();
    for expected in [
        "retention: 7d",
        // Kafka deletes the DLT's records after 30d: a discard, its reason left to a person.
        "discard:\n      after: 30d",
        "maxAttempts: 4",
        "cleanup.policy: delete",
        "partitions: 3",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    w.assert_empty_plan(&["imported"], &[], "after import");
}

/// `spec.invalid` round-trips on RabbitMQ and Kafka: applied with the example, imported back
/// by its name (`{channel}.invalid`, `<main>-invalid-dlt`) with its decision, then the plan
/// of the imported spec is empty.
#[test]
fn the_invalid_message_channel_round_trips_on_rabbitmq_and_kafka() {
    let Some(w) = World::new(&["rabbitmq", "kafka"]) else {
        return;
    };
    let invalid =
        "  invalid:\n    discard: {after: 2d, reason: the producers replay within a day}\n";
    for (example, channel, target, block) in [
        (
            "orders-rabbitmq.yaml",
            format!("{}.orders", w.stem),
            "local-rabbitmq",
            "  rabbitmq:\n",
        ),
        (
            "inventory-kafka.yaml",
            format!("{}.inventory", w.stem),
            "local-kafka",
            "  kafka:\n",
        ),
    ] {
        let path = w.example(example, &channel);
        let text = std::fs::read_to_string(&path).expect("spec");
        std::fs::write(&path, text.replace(block, &format!("{invalid}{block}")))
            .expect("write spec");
        w.apply_and_forget();
        std::fs::create_dir_all(w.path().join("specs")).expect("specs/");

        let o = w.import(target, &[]);
        assert!(!o.stderr.contains("Not imported"), "{}", o.stderr);
        let text = w.imported_text();
        assert!(
            text.contains("  invalid:\n    discard:\n      after: 2d\n"),
            "{target}: the invalid channel and its retention, its reason left to a person\n{text}"
        );
        assert!(
            !text.contains("invalid-dlt\""),
            "{target}: the default name\n{text}"
        );
        w.assert_empty_plan(&["imported"], &[], &format!("{target} after import"));
    }
}

#[test]
fn rabbitmq_queues_declared_by_hand_import_and_plan_empty() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let s = &w.stem;
    let (main, retry, dlq, other) = (
        format!("{s}.billing.process"),
        format!("{s}.billing.retry"),
        format!("{s}.billing.dlq"),
        format!("{s}.audit"),
    );
    // What a hand-written consumer declares: x-arguments on the retry queue, a DLQ that keeps
    // messages a week, and a queue with a length limit that no channel explains.
    block(async {
        declare_queue(&main, json!({"x-max-length": 10000})).await;
        declare_queue(&retry, json!({"x-message-ttl": 10000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": main})).await;
        declare_queue(&dlq, json!({"x-message-ttl": 604_800_000})).await;
        declare_queue(&other, json!({})).await;
    });

    let o = w.import("local-rabbitmq", &[]);
    let text = w.imported_text();
    for expected in [
        "name: \"{channel}.process\"",
        "dlx: arguments",
        "initial: 10s",
        // The DLQ's TTL drops dead letters: a discard, its reason left to a person.
        "discard:\n      after: 7d",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    assert!(
        o.stderr.contains("x-max-length = 10000") && o.stderr.contains("left as is"),
        "an unmanaged setting is reported, not dropped\n{}",
        o.stderr
    );
    o.assert_stderr_contains(&format!("queue {other} (vhost /): fits no channel"));
    o.assert_stderr_contains("maxAttempts");
    w.assert_empty_plan(&["imported"], &[], "hand-made queues after import");
}

/// Issue 18's named dead-letter exchange, made by hand in both ways: a main queue whose
/// x-arguments dead-letter through `payments-dlx` with `payments.transactions.dead` and a 30 s
/// TTL, its DLQ bound to that direct exchange with that key; and the same by a policy named
/// after the main queue (topic exchange). Each becomes `rabbitmq.deadLetterExchange` and the
/// imported specs plan empty.
#[test]
fn rabbitmq_a_named_dead_letter_exchange_made_by_hand_imports_and_plans_empty() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let s = &w.stem;
    let (main, dlq, dlx, key) = (
        format!("{s}.payments-transactions-pending"),
        format!("{s}.payments-transactions-dead"),
        format!("{s}.payments-dlx"),
        "payments.transactions.dead",
    );
    let (p_main, p_dlq, p_dlx, p_key) = (
        format!("{s}.refunds"),
        format!("{s}.refunds.parked"),
        format!("{s}.refunds.dlx"),
        "refunds.dead.v1",
    );
    block(async {
        // x-arguments, as the consumer declares them.
        declare_exchange(&dlx, "direct").await;
        declare_queue(&dlq, json!({})).await;
        bind(&dlx, &dlq, key).await;
        declare_queue(&main, json!({"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": key, "x-message-ttl": 30000})).await;
        // A policy named after the main queue.
        declare_exchange(&p_dlx, "topic").await;
        declare_queue(&p_dlq, json!({})).await;
        bind(&p_dlx, &p_dlq, p_key).await;
        api_ok(
            reqwest::Method::PUT,
            &format!("/api/policies/%2F/{p_main}"),
            json!({"pattern": format!("^{}$", p_main.replace('.', "\\.")), "apply-to": "queues", "priority": 10,
                   "definition": {"dead-letter-exchange": p_dlx, "dead-letter-routing-key": p_key}}),
        )
        .await;
        declare_queue(&p_main, json!({})).await;
    });
    wait_for_policy(&p_main);

    let o = w.import("local-rabbitmq", &[]);
    let text = w.imported_text();
    for expected in [
        "deadLetterExchange:",
        &format!("routingKey: {key}"),
        "dlx: arguments",
        "retention: 30s",
        &format!("routingKey: {p_key}"),
        "type: topic",
    ] {
        assert!(
            text.contains(expected),
            "missing `{expected}`\n{text}\n{}",
            o.stderr
        );
    }
    assert!(
        !o.stderr.contains("fits no channel"),
        "every object is in a channel\n{}",
        o.stderr
    );
    w.assert_empty_plan(&["imported"], &[], "a hand-made named DLX after import");
}

/// Waits until RabbitMQ applies the policy of that name to the queue of that name.
fn wait_for_policy(queue: &str) {
    support::rabbit::wait_for(queue, "policy", "had its policy applied", |q| {
        q["policy"].as_str() == Some(queue)
    });
}

#[test]
fn sqs_queues_and_alarm_made_with_boto3_import_then_adopt_then_plan_empty() {
    let Some(w) = World::new(&["sqs"]) else {
        return;
    };
    let s = &w.stem;
    let (main, dlq) = (format!("{s}-orders"), format!("{s}-orders-dlq"));
    let aws = &w.aws;
    aws.create(
        &dlq,
        &[
            (QueueAttributeName::MessageRetentionPeriod, "1209600".into()),
            (QueueAttributeName::VisibilityTimeout, "45".into()),
        ],
        &[],
    );
    let arn = aws.attributes(&dlq)["QueueArn"].clone();
    // The RedrivePolicy as Python's json.dumps writes it, the count a string.
    let redrive = format!(r#"{{"deadLetterTargetArn": "{arn}", "maxReceiveCount": "3"}}"#);
    aws.create(
        &main,
        &[
            (QueueAttributeName::RedrivePolicy, redrive),
            (QueueAttributeName::VisibilityTimeout, "45".into()),
            (QueueAttributeName::DelaySeconds, "2".into()),
        ],
        &[("team", "orders")],
    );
    block(
        aws.put_alarm(
            &format!("{dlq}-depth"),
            &dlq,
            Statistic::Maximum,
            (300, 2),
            5.0,
        )
        .alarm_description("orders DLQ is filling up")
        .treat_missing_data("notBreaching")
        .alarm_actions("arn:aws:sns:us-east-1:123456789012:orders-ops")
        .send(),
    )
    .expect("PutMetricAlarm");
    let odd = format!("{s}-orders-avg-alarm");
    block(
        aws.put_alarm(&odd, &dlq, Statistic::Average, (60, 1), 1.0)
            .send(),
    )
    .expect("PutMetricAlarm");

    let o = w.import("local-sqs", &["--prefix", &main]);
    let text = w.imported_text();
    for expected in [
        "maxAttempts: 3",
        "retention: 14d",
        "visibilityTimeout: 45s",
        "above: 5",
        "period: 5m",
        "evaluationPeriods: 2",
        "description: \"orders DLQ is filling up\"",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    o.assert_stderr_contains("DelaySeconds = 2");
    o.assert_stderr_contains(&format!(
        "alarm {s}-orders-avg-alarm: not imported, left as is"
    ));
    o.assert_stderr_contains("--adopt");

    // Adoption: an update that only adds the two tags, on each of the three objects.
    let p = w.run(&["plan", "imported", "--adopt", "--detailed-exitcode"]);
    p.exits(2);
    p.assert_stdout_contains("Plan: 0 to create, 3 to update, 0 to replace, 0 to delete.");
    let fields: Vec<&str> = p
        .stdout
        .lines()
        .filter(|l| l.starts_with("        "))
        .map(str::trim)
        .collect();
    assert!(
        fields.iter().all(|f| f.starts_with("tags.")),
        "adopting rewrites no setting: {fields:?}"
    );
    let refused = w.run(&["apply", "imported", "--auto-approve"]);
    assert!(
        refused.stdout.contains("No changes."),
        "without --adopt nothing is touched\n{}",
        refused.stdout
    );
    w.ok(&["apply", "imported", "--adopt", "--auto-approve"]);
    let tags = serde_json::to_value(w.aws.tags(&main)).unwrap_or_default();
    let channel = main.clone();
    assert_eq!(
        tags,
        json!({"dlqctl-channel": channel, "managed-by": "dlqctl", "team": "orders"}),
        "the tags were added, the existing one kept"
    );
    w.assert_empty_plan(&["imported"], &[], "after adoption");
    w.assert_empty_plan(&["imported"], &["--adopt"], "adopted once");
}

#[test]
fn kafka_topics_created_with_admin_calls_import_and_plan_empty() {
    let Some(w) = World::new(&["kafka"]) else {
        return;
    };
    let s = &w.stem;
    let (main, retry, dlt, misc) = (
        format!("{s}.orders"),
        format!("{s}.orders-retry"),
        format!("{s}.orders-dlt"),
        format!("{s}.misc"),
    );
    create_topics(&[
        (
            &main,
            2,
            &[
                ("retention.ms", "86400000"),
                ("max.message.bytes", "2000000"),
            ],
        ),
        (&retry, 2, &[("retention.ms", "86400000")]),
        (&dlt, 4, &[("retention.ms", "1209600000")]),
        (&misc, 1, &[]),
    ]);
    let o = w.import("local-kafka", &[]);
    let text = w.imported_text();
    for expected in [
        "retention: 1d",
        "discard:\n      after: 14d",
        "partitions: 2",
        "deadLetterPartitions: 4",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    o.assert_stderr_contains("assumption");
    o.assert_stderr_contains(&format!("topic {misc}: fits no channel"));
    // A config on one topic only: no `kafka.config` can say it; reported, then a plan note.
    o.assert_stderr_contains(&format!(
            "topic {main}: not in the spec, left as is (plans list it as a note): config.max.message.bytes = 2000000"
        ));
    w.assert_empty_plan(&["imported"], &[], "hand-made topics after import");
    let p = w.ok(&["plan", "imported"]);
    p.assert_stdout_contains("unmanaged setting, left as is: config.max.message.bytes = 2000000");
}

// ---------------------------------------------------------------------------------------------
// --prune

impl World {
    /// `apply specs --prune --auto-approve <extra>`.
    fn apply_prune(&self, extra: &[&str]) -> Output {
        let mut args = vec!["apply", "specs", "--prune", "--auto-approve"];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    /// A prune with every consent given, which must succeed.
    fn prune_all(&self) {
        let done = self.apply_prune(&["--allow-delete", "--allow-message-loss"]);
        done.ok();
    }
}

/// One of the planned deletes is `what` and shows its live message count, `n`.
fn assert_deletes_one_holding(deletes: &[String], what: &str, n: u64) {
    let holds = format!("holds {n} messages");
    assert!(
        deletes
            .iter()
            .any(|d| d.contains(what) && d.contains(&holds)),
        "{deletes:#?}"
    );
}

/// Plans with --prune and returns the resources it would delete.
fn pruned(w: &World) -> Vec<String> {
    let p = w.run(&["plan", "specs", "--prune", "--detailed-exitcode"]);
    p.exits(2);
    p.stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("- delete"))
        .map(|l| l.trim().to_owned())
        .collect()
}

#[test]
fn rabbitmq_prune_deletes_exactly_the_removed_channel() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let (a, b) = (format!("{}.a", w.stem), format!("{}.b", w.stem));
    w.example("orders-rabbitmq.yaml", &a);
    let b_spec = w.example("orders-rabbitmq.yaml", &b);
    w.ok(&["apply", "specs", "--auto-approve"]);
    // A look-alike outside the ownership prefixes, made by hand.
    let lookalike = format!("{}x.b.dlq", w.stem);
    block(api_ok(
        reqwest::Method::PUT,
        &format!("/api/queues/%2F/{lookalike}"),
        json!({"durable": true}),
    ));
    std::fs::remove_file(b_spec).expect("remove b's spec");
    w.assert_empty_plan(&["specs"], &[], "without --prune nothing is deleted");
    // The broker reports a new queue's message count with its first statistics (every 5 s);
    // the plan below must show it, so wait for it rather than race it.
    wait_for_messages(&format!("{b}.dlq"), 0);

    let deletes = pruned(&w);
    assert_eq!(deletes.len(), 7, "{deletes:#?}");
    assert!(
        deletes.iter().all(|d| d.contains(&format!("{b}."))),
        "{deletes:#?}"
    );
    assert_deletes_one_holding(&deletes, &format!("queue {b}.dlq"), 0);
    let refused = w.apply_prune(&[]);
    refused.exits(1);
    refused.assert_stderr_contains("--allow-delete");

    w.prune_all();
    let exists = |q: &str| queue_status(q) == 200;
    assert!(!exists(&format!("{b}.dlq")) && !exists(&format!("{b}.process")));
    assert!(exists(&format!("{a}.dlq")) && exists(&format!("{a}.process")));
    assert!(
        exists(&lookalike),
        "a queue outside the ownership prefixes survives"
    );
    w.assert_empty_plan(&["specs"], &["--prune"], "after the prune");
}

/// A removed channel with a named dead-letter exchange is pruned in the reverse of its apply
/// order: what dead-letters into the exchange first (the main queue and its policy), then the
/// DLQ's binding, the exchange, and the DLQ last.
#[test]
fn rabbitmq_prune_of_a_named_dead_letter_exchange_deletes_in_reverse() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let (a, b) = (format!("{}.a", w.stem), format!("{}.b", w.stem));
    w.example("orders-rabbitmq.yaml", &a);
    let b_spec = w.path().join("specs").join(format!("{b}.yaml"));
    let text = support::rabbit::with_dead_letter_exchange("policy")(support::workspace::renamed(
        "orders-rabbitmq.yaml",
        &b,
    ));
    std::fs::write(&b_spec, text).expect("write spec");
    w.ok(&["apply", "specs", "--auto-approve"]);
    std::fs::remove_file(b_spec).expect("remove b's spec");
    wait_for_messages(&format!("{b}.dlq"), 0);
    let (dlx, key) = support::rabbit::dead_letter_exchange(&b);
    let done = w.apply_prune(&["--allow-delete", "--allow-message-loss"]);
    done.ok();
    let step = |what: String| {
        done.stderr
            .find(&what)
            .unwrap_or_else(|| panic!("no step `{what}`\n{}", done.stderr))
    };
    let order = [
        step(format!("policy {b}.process ")),
        step(format!("queue {b}.process ")),
        step(format!("binding {dlx} -> {b}.dlq [{key}]")),
        step(format!("exchange {dlx} ")),
        step(format!("queue {b}.dlq ")),
    ];
    assert!(order.is_sorted(), "prune order {order:?}\n{}", done.stderr);
    let (status, _) = block(support::rabbit::api(
        reqwest::Method::GET,
        &format!("/api/exchanges/%2F/{dlx}"),
        None,
    ));
    assert_eq!(status, 404, "the dead-letter exchange is gone");
    assert_eq!(
        queue_status(&format!("{a}.dlq")),
        200,
        "channel a is untouched"
    );
    w.assert_empty_plan(&["specs"], &["--prune"], "after the prune");
}

#[test]
fn sqs_prune_deletes_only_tagged_queues_and_alarms_and_counts_their_messages() {
    let Some(w) = World::new(&["sqs"]) else {
        return;
    };
    let (a, b) = (format!("{}-a", w.stem), format!("{}-b", w.stem));
    // Both with a dead-letter rate alarm (metric math: no namespace of its own).
    let with_rate = |path: &std::path::Path, rate: bool| {
        let text = std::fs::read_to_string(path).expect("read spec");
        let (plain, rated) = (
            "    oldestMessageAge: {above: 30m}\n",
            "    oldestMessageAge: {above: 30m}\n    deadLetterRate: {above: 1%}\n",
        );
        let text = if rate {
            text.replace(plain, rated)
        } else {
            text.replace(rated, plain)
        };
        assert_eq!(text.contains("deadLetterRate"), rate, "{text}");
        std::fs::write(path, text).expect("write spec");
    };
    let a_spec = w.example("payments-sqs.yaml", &a);
    let b_spec = w.example("payments-sqs.yaml", &b);
    with_rate(&a_spec, true);
    with_rate(&b_spec, true);
    w.ok(&["apply", "specs", "--auto-approve"]);
    assert!(w.aws.alarm(&format!("{a}-dlq-dead-letter-rate")).is_some());
    // a's spec drops its rate alarm: no plan reads its name any more, only a prune finds it.
    with_rate(&a_spec, false);
    // Look-alikes by hand: untagged inside the prefixes, and tagged as dlqctl's outside them.
    let (untagged, outside) = (format!("{b}-dlq-copy"), format!("{}x-b-dlq", w.stem));
    w.aws.create(&untagged, &[], &[]);
    w.aws.create(
        &outside,
        &[],
        &[("managed-by", "dlqctl"), ("dlqctl-channel", &b)],
    );
    w.aws.send(&format!("{b}-dlq"), "kept for a human");
    std::fs::remove_file(b_spec).expect("remove b's spec");

    let deletes = pruned(&w);
    let mut names: Vec<String> = deletes
        .iter()
        .filter_map(|d| d.split_whitespace().nth(3).map(str::to_owned))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            format!("{a}-dlq-dead-letter-rate"),
            b.clone(),
            format!("{b}-dlq"),
            format!("{b}-dlq-dead-letter-rate"),
            format!("{b}-dlq-depth"),
            format!("{b}-dlq-oldest-age")
        ],
        "{deletes:#?}"
    );
    assert_deletes_one_holding(&deletes, &format!("queue {b}-dlq"), 1);
    let refused = w.apply_prune(&["--allow-delete"]);
    refused.exits(1);
    refused.assert_stderr_contains("--allow-message-loss");
    assert!(
        w.aws.exists(&format!("{b}-dlq")),
        "refused with zero writes"
    );

    w.prune_all();
    assert!(!w.aws.exists(&b) && !w.aws.exists(&format!("{b}-dlq")));
    assert!(w.aws.exists(&a) && w.aws.exists(&format!("{a}-dlq")));
    assert!(w.aws.alarm(&format!("{a}-dlq-dead-letter-rate")).is_none());
    assert!(w.aws.alarm(&format!("{a}-dlq-depth")).is_some());
    assert!(w.aws.exists(&untagged), "an untagged look-alike survives");
    assert!(
        w.aws.exists(&outside),
        "a tagged queue outside the prefixes survives"
    );
    w.assert_empty_plan(&["specs"], &["--prune"], "after the prune");
}

#[test]
fn kafka_prune_deletes_the_removed_channels_topics_and_only_those() {
    let Some(w) = World::new(&["kafka"]) else {
        return;
    };
    let (a, b) = (format!("{}.a", w.stem), format!("{}.b", w.stem));
    w.example("inventory-kafka.yaml", &a);
    let b_spec = w.example("inventory-kafka.yaml", &b);
    w.ok(&["apply", "specs", "--auto-approve"]);
    let lookalike = format!("{}x.b-dlt", w.stem);
    create_topics(&[(&lookalike, 1, &[])]);
    // One record in b's dead-letter topic.
    let producer: BaseProducer = support::kafka::producer(&[]);
    producer
        .send(BaseRecord::to(&format!("{b}-dlt")).payload("dead").key("k"))
        .map_err(|(e, _)| e)
        .expect("produce");
    producer.flush(Duration::from_secs(10)).expect("flush");
    std::fs::remove_file(b_spec).expect("remove b's spec");

    let deletes = pruned(&w);
    assert_eq!(deletes.len(), 5, "{deletes:#?}");
    assert!(
        deletes.iter().all(|d| d.contains(&format!("topic {b}"))),
        "{deletes:#?}"
    );
    assert_deletes_one_holding(&deletes, &format!("topic {b}-dlt "), 1);
    let refused = w.apply_prune(&["--allow-delete"]);
    refused.exits(1);
    w.prune_all();
    let left: Vec<String> = support::kafka::topics(&w.stem).into_keys().collect();
    assert!(left.iter().all(|t| !t.starts_with(b.as_str())), "{left:?}");
    assert_eq!(
        left.iter().filter(|t| t.starts_with(a.as_str())).count(),
        5,
        "{left:?}"
    );
    assert!(
        left.contains(&lookalike),
        "a topic outside the prefixes survives: {left:?}"
    );
    w.assert_empty_plan(&["specs"], &["--prune"], "after the prune");
}

#[test]
fn sqs_round_trip_of_alarm_tiers_keeps_tiers_per_tier_actions_and_the_runbook() {
    let Some(w) = World::new(&["sqs"]) else {
        return;
    };
    w.example(
        "chargebacks-sqs-tiers.yaml",
        &format!("{}-chargebacks", w.stem),
    );
    w.apply_and_forget();
    let o = w.import("local-sqs", &[]);
    assert_eq!(o.stdout.lines().count(), 1, "{}{}", o.stdout, o.stderr);
    assert!(!o.stderr.contains("Not imported"), "{}", o.stderr);
    let text = w.imported_text();
    for expected in [
        "warning: 0",
        "critical: 50",
        "warning: 30m",
        "critical: 2h",
        "warning: [\"arn:aws:sns:us-east-1:123456789012:payments-chat\"]",
        "critical: [\"arn:aws:sns:us-east-1:123456789012:payments-pager\"]",
        "runbook: https://runbooks.example.com/dlq/payments",
        // The metric-math rate alarms, matched to the DLQ by their first query (issue 36).
        "deadLetterRate:\n      warning: \"0.1%\"\n      critical: \"1%\"",
        // The invalid-message queue (the default name, so no `name:`) and its own alarm.
        "  invalid:\n    retention: 14d\n    alarms:\n      depth:\n        warning: 0",
        // One list: the invalid queue's only tier has these actions.
        "    actions: [\"arn:aws:sns:us-east-1:123456789012:chargebacks-producers\"]",
    ] {
        assert!(text.contains(expected), "{expected}\n{text}");
    }
    assert!(!text.contains("above"), "{text}");
    w.assert_empty_plan(&["imported"], &[], "after import");
}

/// An SQS DLQ kept less than the 14d maximum drops dead letters: import writes it as a
/// `discard` with no reason (the live queue does not hold one, and import invents none), says
/// so in the file's header, and leaves the warning standing, so `lint --deny-warnings` fails
/// until a person writes why. The plan is empty all the same.
#[test]
fn sqs_a_dlq_that_drops_messages_imports_as_a_discard_whose_reason_is_left_to_a_person() {
    let Some(w) = World::new(&["sqs"]) else {
        return;
    };
    let spec = w.example("payments-sqs.yaml", &format!("{}-quotes", w.stem));
    let text = std::fs::read_to_string(&spec).expect("spec");
    std::fs::write(
        &spec,
        text.replace(
            "    retention: 14d\n",
            "    discard: {after: 5d, reason: a quote older than five days is void}\n",
        ),
    )
    .expect("write spec");
    w.apply_and_forget();
    w.import("local-sqs", &[]);
    let text = w.imported_text();
    assert!(text.contains("discard:\n      after: 5d\n"), "{text}");
    let body = text.split("apiVersion:").nth(1).unwrap_or_default();
    assert!(
        !body.contains("reason:"),
        "import invents no reason\n{text}"
    );
    assert!(
        text.contains("# To decide") && text.contains("deadletter/discard-undeclared"),
        "{text}"
    );
    assert!(
        !text.contains("allow: [deadletter/discard-undeclared")
            && !text.contains("- deadletter/discard-undeclared"),
        "the decision is not silenced\n{text}"
    );
    let strict = w.run(&["lint", "imported", "--deny-warnings"]);
    strict.exits(1);
    strict.assert_stdout_contains("add `reason:` to `deadLetter.discard`");
    w.assert_empty_plan(&["imported"], &[], "after import");
}

#[test]
fn sqs_encryption_and_policies_made_by_hand_import_and_plan_empty() {
    let Some(w) = World::new(&["sqs"]) else {
        return;
    };
    let s = &w.stem;
    let (main, dlq) = (format!("{s}-pay"), format!("{s}-pay-dlq"));
    let grant = |sid: &str, action: &str| json!({"Sid": sid, "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:role/app"}, "Action": action, "Resource": "*"});
    let main_policy = json!({"Version": "2012-10-17", "Statement": [grant("send", "sqs:SendMessage"), grant("read", "sqs:ReceiveMessage")]});
    let dlq_policy =
        json!({"Version": "2012-10-17", "Statement": grant("ops", "sqs:ReceiveMessage")});
    let aws = &w.aws;
    aws.create(
        &dlq,
        &[
            (QueueAttributeName::MessageRetentionPeriod, "1209600".into()),
            (
                QueueAttributeName::KmsMasterKeyId,
                "alias/payments-dlq".into(),
            ),
            (
                QueueAttributeName::KmsDataKeyReusePeriodSeconds,
                "600".into(),
            ),
            (QueueAttributeName::SqsManagedSseEnabled, "false".into()),
            (QueueAttributeName::Policy, dlq_policy.to_string()),
        ],
        &[],
    );
    let arn = aws.attributes(&dlq)["QueueArn"].clone();
    aws.create(
        &main,
        &[
            (
                QueueAttributeName::RedrivePolicy,
                json!({"deadLetterTargetArn": arn, "maxReceiveCount": 4}).to_string(),
            ),
            (QueueAttributeName::KmsMasterKeyId, "alias/payments".into()),
            (QueueAttributeName::SqsManagedSseEnabled, "false".into()),
            (
                QueueAttributeName::Policy,
                serde_json::to_string_pretty(&main_policy).expect("JSON"),
            ),
        ],
        &[],
    );

    w.import("local-sqs", &["--prefix", &main]);
    let text = w.imported_text();
    for expected in [
        "    encryption:\n      kms: alias/payments\n",
        "    sqs:\n      encryption:\n        kms: alias/payments-dlq\n        dataKeyReuse: 10m\n",
        "Sid: send",
        "Sid: ops",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    w.assert_empty_plan(&["imported"], &[], "after import");
}

// ---------------------------------------------------------------------------------------------
// Issue 53: adopting the estates teams already run.

/// Asserts a plan of `imported` shows a change (exit 2) naming `field`.
fn assert_plan_shows(w: &World, field: &str, context: &str) {
    let p = w.run(&["plan", "imported", "--detailed-exitcode"]);
    assert_eq!(p.code, 2, "{context}: a change\n{}{}", p.stdout, p.stderr);
    assert!(
        p.stdout.contains(field),
        "{context}: the plan names `{field}`\n{}",
        p.stdout
    );
}

/// The most common hand-made RabbitMQ shape: a main queue whose x-arguments dead-letter
/// through the default exchange (`x-dead-letter-exchange: ""`) straight into its DLQ, no retry
/// queue. This is what dramatiq's RabbitMQ broker declares (dramatiq/brokers/rabbitmq.py,
/// `_build_queue_arguments`: `x-dead-letter-exchange: ""`, `x-dead-letter-routing-key:
/// xq_name(queue)` = `<queue>.XQ`, and the `.XQ` queue with `x-message-ttl` = its
/// `dead_message_ttl`, 7 days by default), and faststream's and most tutorials' DLQ set-ups.
/// The same by a policy named after the queue. Before issue 53 import said "fits no channel:
/// no dead-letter routing ties it to a retry loop or a delivery limit".
/// Imported: lint without error, plan empty, the graph draws main → DLQ, and a hand-made change
/// to the live routing key shows in the plan.
#[test]
fn rabbitmq_a_queue_dead_lettering_through_the_default_exchange_imports_and_plans_empty() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let s = &w.stem;
    let (main, xq) = (format!("{s}.default"), format!("{s}.default.XQ"));
    let (p_main, p_dlq) = (format!("{s}.mailer"), format!("{s}.mailer.dlq"));
    block(async {
        declare_queue(&xq, json!({"x-message-ttl": 604_800_000})).await;
        declare_queue(
            &main,
            json!({"x-dead-letter-exchange": "", "x-dead-letter-routing-key": xq}),
        )
        .await;
        declare_queue(&p_dlq, json!({})).await;
        api_ok(
            reqwest::Method::PUT,
            &format!("/api/policies/%2F/{p_main}"),
            json!({"pattern": format!("^{}$", p_main.replace('.', "\\.")), "apply-to": "queues", "priority": 10,
                   "definition": {"dead-letter-exchange": "", "dead-letter-routing-key": p_dlq}}),
        )
        .await;
        declare_queue(&p_main, json!({})).await;
    });
    wait_for_policy(&p_main);

    let o = w.import("local-rabbitmq", &[]);
    let text = w.imported_text();
    assert!(
        !o.stderr.contains("fits no channel"),
        "every queue is in a channel\n{}\n{text}",
        o.stderr
    );
    assert!(text.contains("maxAttempts: 1"), "{text}");
    assert!(text.contains("name: \"{channel}.XQ\""), "{text}");
    w.assert_empty_plan(&["imported"], &[], "a default-exchange DLX after import");
    let g = w.ok(&["graph", "imported"]);
    assert!(
        g.stdout.contains(&xq) && !g.stdout.contains("retry"),
        "the graph draws main → DLQ\n{}",
        g.stdout
    );

    // A hand-made change to one live field shows in the plan.
    support::rabbit::delete_queue(&main);
    block(declare_queue(
        &main,
        json!({"x-dead-letter-exchange": "", "x-dead-letter-routing-key": format!("{s}.elsewhere")}),
    ));
    assert_plan_shows(&w, "x-dead-letter-routing-key", "a changed routing key");
}

/// Issue 52's L10 and issue 53: a hand-written one-attempt channel (`retry.maxAttempts: 1`,
/// no `deadLetterExchange`) dead-letters into its DLQ through the default exchange: its main
/// queue carries the dead-letter settings (it used to get none, so a reject dropped the message
/// and every redrive was refused), and `deadLetterExchange: {name: ""}` says the same thing.
#[test]
fn rabbitmq_a_one_attempt_channel_dead_letters_into_its_dlq() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let s = &w.stem;
    for (n, extra) in [
        ("plain", ""),
        ("args", "  rabbitmq: {dlx: arguments}\n"),
        ("named", "  rabbitmq: {deadLetterExchange: {name: \"\"}}\n"),
    ] {
        let spec = format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {s}.{n}}}\nspec:\n  target: local-rabbitmq\n  retry: {{maxAttempts: 1}}\n{extra}"
        );
        std::fs::write(w.path().join("specs").join(format!("{n}.yaml")), spec).expect("spec");
    }
    let l = w.run(&["lint", "specs"]);
    l.ok_with("one-attempt specs lint".to_owned());
    w.ok(&["apply", "specs", "--auto-approve"]);
    for n in ["plain", "named"] {
        support::rabbit::wait_for(
            &format!("{s}.{n}"),
            "effective_policy_definition",
            "dead-lettered into its DLQ",
            |q| {
                q["effective_policy_definition"]["dead-letter-exchange"] == json!("")
                    && q["effective_policy_definition"]["dead-letter-routing-key"]
                        == json!(format!("{s}.{n}.dlq"))
            },
        );
    }
    support::rabbit::wait_for(
        &format!("{s}.args"),
        "arguments",
        "dead-lettered into its DLQ",
        |q| {
            q["arguments"]["x-dead-letter-exchange"] == json!("")
                && q["arguments"]["x-dead-letter-routing-key"] == json!(format!("{s}.args.dlq"))
        },
    );
    w.assert_empty_plan_of(
        &["specs"],
        &[],
        "one-attempt channels after apply",
        String::new,
    );
}

/// Dead-letter exchanges without a dead-letter routing key (issue 53): a fanout DLX bound to
/// the DLQ (Celery/kombu set-ups declare `x-dead-letter-exchange` alone, e.g.
/// asengardeon/celery-rabbitmq-poc application/broker/queues.py: `queue_arguments=
/// {'x-dead-letter-exchange': f'dlq_{name}_exchange'}`), and a direct DLX that routes a dead
/// letter by the key it was published with (the DLQ bound with the main queue's name). Import
/// said "a spec always sets one"; now `keepRoutingKey: true`, lint without error, plan empty,
/// and a hand-made change to the DLQ's binding shows in the plan.
#[test]
fn rabbitmq_dead_letter_exchanges_without_a_routing_key_import_and_plan_empty() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let s = &w.stem;
    let (f_main, f_dlq, f_dlx) = (
        format!("{s}.tasks"),
        format!("{s}.tasks.dlq"),
        format!("{s}.dlq_tasks_exchange"),
    );
    let (d_main, d_dlq, d_dlx) = (
        format!("{s}.orders"),
        format!("{s}.orders.dead"),
        format!("{s}.orders.dlx"),
    );
    block(async {
        declare_exchange(&f_dlx, "fanout").await;
        declare_queue(&f_dlq, json!({})).await;
        bind(&f_dlx, &f_dlq, "").await;
        declare_queue(&f_main, json!({"x-dead-letter-exchange": f_dlx})).await;
        declare_exchange(&d_dlx, "direct").await;
        declare_queue(&d_dlq, json!({})).await;
        bind(&d_dlx, &d_dlq, &d_main).await;
        declare_queue(&d_main, json!({"x-dead-letter-exchange": d_dlx})).await;
    });
    let o = w.import("local-rabbitmq", &[]);
    let text = w.imported_text();
    assert!(
        !o.stderr.contains("fits no channel"),
        "every object is in a channel\n{}\n{text}",
        o.stderr
    );
    assert_eq!(text.matches("keepRoutingKey: true").count(), 2, "{text}");
    assert!(text.contains("type: fanout"), "{text}");
    w.assert_empty_plan(
        &["imported"],
        &[],
        "DLXs without a routing key after import",
    );
    let g = w.ok(&["graph", "imported"]);
    assert!(
        g.stdout.contains(&f_dlx) && g.stdout.contains(&d_dlx),
        "the graph draws each dead-letter exchange\n{}",
        g.stdout
    );

    // A hand-made change: the direct DLQ bound by another key.
    block(async {
        api_ok(
            reqwest::Method::DELETE,
            &format!("/api/bindings/%2F/e/{d_dlx}/q/{d_dlq}/{d_main}"),
            json!(null),
        )
        .await;
        bind(&d_dlx, &d_dlq, "other").await;
    });
    assert_plan_shows(&w, &d_dlq, "a DLQ bound by another key");
}

/// An SQS pair whose DLQ keeps messages no longer than its source: the default of
/// terraform-aws-modules/terraform-aws-sqs (main.tf: `dlq_message_retention_seconds` and
/// `message_retention_seconds` both default to null, so AWS's 4 days = 345600 s on each).
/// Import refused it ("not imported: … would not pass `dlqctl lint` (sqs/dlq-retention)");
/// now it is imported, lint warns with the fix (no error), the plan is empty, and a hand-made
/// change to the DLQ's retention shows in the plan.
#[test]
fn sqs_a_dlq_keeping_messages_no_longer_than_its_source_is_imported_with_a_warning() {
    let Some(w) = World::new(&["sqs"]) else {
        return;
    };
    let s = &w.stem;
    let (main, dlq) = (format!("{s}-jobs"), format!("{s}-jobs-dlq"));
    let aws = &w.aws;
    aws.create(
        &dlq,
        &[(QueueAttributeName::MessageRetentionPeriod, "345600".into())],
        &[],
    );
    let arn = aws.attributes(&dlq)["QueueArn"].clone();
    aws.create(
        &main,
        &[
            (QueueAttributeName::MessageRetentionPeriod, "345600".into()),
            (
                QueueAttributeName::RedrivePolicy,
                format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":5}}"#),
            ),
        ],
        &[],
    );
    let o = w.import("local-sqs", &["--prefix", s]);
    let text = w.imported_text();
    assert!(
        !o.stderr.contains("not imported"),
        "the pair is imported\n{}\n{text}",
        o.stderr
    );
    let lint = w.run(&["lint", "imported"]);
    assert!(
        lint.stdout.contains("warning[sqs/dlq-retention]")
            && lint.stdout.contains("or archive with `deadLetter.archive`"),
        "a warning with the fix\n{}",
        lint.stdout
    );
    w.assert_empty_plan(&["imported"], &[], "a 4-day DLQ after import");
    // Adopted (tags only), the plan stays empty; then a hand-made change shows.
    w.ok(&["apply", "imported", "--adopt", "--auto-approve"]);
    w.assert_empty_plan(&["imported"], &[], "a 4-day DLQ after adoption");
    aws.set(
        &dlq,
        &[(QueueAttributeName::MessageRetentionPeriod, "1209600".into())],
    );
    let p = w.run(&["plan", "imported", "--detailed-exitcode"]);
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
    assert!(p.stdout.contains("MessageRetentionPeriod"), "{}", p.stdout);
}

/// Issue 53, Safety: a dead-letter TTL on a RabbitMQ DLQ that already holds messages (made by
/// hand, then described by a spec) expires every message older than it at once. The policy that
/// sets it used to be a plain create, applied without `--allow-message-loss` (the README's
/// Safety table says a "lower or new" TTL is refused). Now the create, the update (a lower TTL)
/// and the argument path (a replace of the DLQ) each need `--allow-message-loss`, the plan
/// says how many messages the DLQ holds, an empty DLQ takes its TTL without the flag, and lapin
/// counts every message still there after each refusal.
#[test]
fn rabbitmq_a_new_or_lower_message_ttl_on_a_dlq_holding_messages_needs_allow_message_loss() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let s = &w.stem;
    let (p_dlq, a_dlq, e_dlq) = (
        format!("{s}.pol.dlq"),
        format!("{s}.arg.dlq"),
        format!("{s}.empty.dlq"),
    );
    block(async {
        for q in [&p_dlq, &a_dlq, &e_dlq] {
            declare_queue(q, json!({})).await;
        }
    });
    let message = |tag: &'static str| {
        move |i: usize| {
            (
                format!("{tag}-{i}").into_bytes(),
                lapin::BasicProperties::default().with_message_id(format!("{tag}-{i}").into()),
            )
        }
    };
    support::rabbit::fill(&p_dlq, 5, message("pol"));
    support::rabbit::fill(&a_dlq, 3, message("arg"));
    wait_for_messages(&p_dlq, 5);
    wait_for_messages(&a_dlq, 3);
    let spec = |n: &str, after: &str, extra: &str| {
        format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {s}.{n}}}\nspec:\n  target: local-rabbitmq\n  retry: {{maxAttempts: 1}}\n  deadLetter:\n    discard: {{after: {after}, reason: \"stale jobs are worthless\"}}\n{extra}"
        )
    };
    let write = |dir: &str, n: &str, text: String| {
        let d = w.path().join(dir);
        std::fs::create_dir_all(&d).expect("dir");
        std::fs::write(d.join(format!("{n}.yaml")), text).expect("spec");
    };
    write("specs", "pol", spec("pol", "1h", ""));
    write("specs", "empty", spec("empty", "1h", ""));

    // The create path: the DLQ's policy is new, the DLQ holds 5.
    let p = w.run(&["plan", "specs", "--detailed-exitcode"]);
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
    assert!(
        p.stdout.contains("it holds 5 messages now"),
        "the plan says what the DLQ holds\n{}",
        p.stdout
    );
    let refused = w.run(&["apply", "specs", "--auto-approve"]);
    assert_ne!(
        refused.code, 0,
        "a new TTL on a DLQ holding messages is refused\n{}{}",
        refused.stdout, refused.stderr
    );
    refused.assert_stderr_contains("it holds 5 messages now");
    refused.assert_stderr_contains("--allow-message-loss");
    assert!(
        !refused.stderr.contains(&e_dlq),
        "an empty DLQ takes its TTL without the flag\n{}",
        refused.stderr
    );
    assert_eq!(support::rabbit::count(&p_dlq), 5, "lapin: nothing expired");

    // The argument path: the DLQ is replaced to carry x-message-ttl, guarded by its count.
    write(
        "args",
        "arg",
        spec("arg", "1h", "  rabbitmq: {dlx: arguments}\n"),
    );
    let refused = w.run(&["apply", "args", "--auto-approve", "--allow-replace"]);
    assert_ne!(refused.code, 0, "{}{}", refused.stdout, refused.stderr);
    refused.assert_stderr_contains("holds 3 messages");
    refused.assert_stderr_contains("--allow-message-loss");
    assert_eq!(
        support::rabbit::count(&a_dlq),
        3,
        "lapin: the DLQ is untouched"
    );

    // Allowed, the TTL is set; the messages, younger than an hour, all stay.
    w.ok(&["apply", "specs", "--auto-approve", "--allow-message-loss"]);
    w.assert_empty_plan_of(&["specs"], &[], "after the allowed create", String::new);
    assert_eq!(
        support::rabbit::count(&p_dlq),
        5,
        "lapin: all 5 still there"
    );

    // The update path: a lower TTL, the DLQ holding 5.
    write("specs", "pol", spec("pol", "30m", ""));
    let refused = w.run(&["apply", "specs", "--auto-approve"]);
    assert_ne!(refused.code, 0, "{}{}", refused.stdout, refused.stderr);
    refused.assert_stderr_contains("lowering the dead-letter queue's message-ttl");
    refused.assert_stderr_contains("it holds 5 messages now");
    assert_eq!(support::rabbit::count(&p_dlq), 5, "lapin: nothing expired");
    let ids: std::collections::BTreeSet<String> = block(support::rabbit::take_each(&p_dlq, |d| {
        d.properties
            .message_id()
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default()
    }))
    .into_iter()
    .collect();
    assert_eq!(
        ids,
        (0..5).map(|i| format!("pol-{i}")).collect(),
        "every message back by id"
    );
}

/// Issue 53: the broker-driven TTL retry loop by queue arguments: `process` dead-letters
/// (x-arguments, default exchange) into `retry`, whose TTL dead-letters back into `process`;
/// the DLQ sits beside them by name. It imported, but its first plan was a guarded replace of
/// the main queue ("the spec cannot express arguments.x-dead-letter-exchange = \"\""): a spec
/// in arguments mode left the main queue plain. Now `rabbitmq.rejectToRetry: true` says the
/// main queue dead-letters into its first retry queue (what policy mode always does): lint
/// without error, plan empty, and a hand-made change to the retry queue's TTL shows.
#[test]
fn rabbitmq_a_broker_driven_ttl_loop_by_arguments_imports_and_plans_empty() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let s = &w.stem;
    let (main, retry, dlq) = (
        format!("{s}.work.process"),
        format!("{s}.work.retry"),
        format!("{s}.work.dlq"),
    );
    let retry_args = |ttl: u64| json!({"x-message-ttl": ttl, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": main});
    block(async {
        declare_queue(&dlq, json!({})).await;
        declare_queue(&retry, retry_args(5000)).await;
        declare_queue(
            &main,
            json!({"x-dead-letter-exchange": "", "x-dead-letter-routing-key": retry}),
        )
        .await;
    });
    let o = w.import("local-rabbitmq", &[]);
    let text = w.imported_text();
    assert!(
        !o.stderr.contains("cannot express") && !o.stderr.contains("fits no channel"),
        "the loop is imported whole\n{}\n{text}",
        o.stderr
    );
    for expected in ["dlx: arguments", "rejectToRetry: true", "initial: 5s"] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    w.assert_empty_plan(&["imported"], &[], "a broker-driven TTL loop by arguments");
    let g = w.ok(&["graph", "imported"]);
    assert!(
        g.stdout.contains(&retry) && g.stdout.contains(&dlq),
        "the graph draws the loop and the DLQ\n{}",
        g.stdout
    );

    // A hand-made change: the retry queue declared again with another TTL.
    support::rabbit::delete_queue(&retry);
    block(declare_queue(&retry, retry_args(7000)));
    assert_plan_shows(&w, "x-message-ttl", "a changed retry TTL");
}

/// Issue 53: quorum queues with `x-delivery-limit` dead-lettering through a named exchange,
/// without a dead-letter routing key (a fanout DLX) and with one (a direct DLX), declared by
/// x-arguments as hand-written consumers declare them: without `x-dead-letter-strategy` and
/// `x-overflow` (RabbitMQ's at-most-once default). Import wrote the spec, but a spec always
/// asked for at-least-once dead-lettering, so the first plan replaced both main queues. Now
/// `deadLetterStrategy: atMostOnce` says what is live, lint warns with the fix
/// (`rabbitmq/at-most-once`), the plan is empty, and a hand-made change to the delivery limit
/// shows in the plan.
#[test]
fn rabbitmq_quorum_queues_with_a_delivery_limit_and_a_dlx_with_or_without_a_key_import_and_plan_empty()
 {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let s = &w.stem;
    let (f_main, f_dlq, f_dlx) = (
        format!("{s}.jobs"),
        format!("{s}.jobs.dlq"),
        format!("{s}.jobs.dlx"),
    );
    let (d_main, d_dlq, d_dlx) = (
        format!("{s}.mail"),
        format!("{s}.mail.dead"),
        format!("{s}.mail.dlx"),
    );
    let quorum = |more: serde_json::Value| {
        let mut a = json!({"x-queue-type": "quorum"});
        if let (Some(a), Some(m)) = (a.as_object_mut(), more.as_object()) {
            a.extend(m.clone());
        }
        a
    };
    let d_main_args = move |limit: u64| {
        quorum(
            json!({"x-delivery-limit": limit, "x-dead-letter-exchange": format!("{s}.mail.dlx"), "x-dead-letter-routing-key": "dead"}),
        )
    };
    block(async {
        declare_exchange(&f_dlx, "fanout").await;
        declare_queue(&f_dlq, quorum(json!({}))).await;
        bind(&f_dlx, &f_dlq, "").await;
        declare_queue(
            &f_main,
            quorum(json!({"x-delivery-limit": 5, "x-dead-letter-exchange": f_dlx})),
        )
        .await;
        declare_exchange(&d_dlx, "direct").await;
        declare_queue(&d_dlq, quorum(json!({}))).await;
        bind(&d_dlx, &d_dlq, "dead").await;
        declare_queue(&d_main, d_main_args(3)).await;
    });
    let o = w.import("local-rabbitmq", &[]);
    let text = w.imported_text();
    assert!(
        !o.stderr.contains("fits no channel") && !o.stderr.contains("cannot express"),
        "both channels are imported whole\n{}\n{text}",
        o.stderr
    );
    for (expected, n) in [
        ("retryModel: deliveryLimit", 2),
        ("\n    deadLetterStrategy: atMostOnce", 2),
        ("keepRoutingKey: true", 1),
        ("routingKey: dead", 1),
        ("maxAttempts: 6", 1),
        ("maxAttempts: 4", 1),
    ] {
        assert_eq!(text.matches(expected).count(), n, "`{expected}`\n{text}");
    }
    let lint = w.run(&["lint", "imported"]);
    assert!(
        lint.stdout.contains("warning[rabbitmq/at-most-once]"),
        "a warning with the fix\n{}",
        lint.stdout
    );
    w.assert_empty_plan(&["imported"], &[], "quorum delivery-limit channels");

    // A hand-made change: the direct channel's main queue declared with another limit.
    support::rabbit::delete_queue(&d_main);
    block(declare_queue(&d_main, d_main_args(7)));
    assert_plan_shows(&w, "x-delivery-limit", "a changed delivery limit");
}

/// Issue 53, Kafka: Spring Kafka's topic sets as applications make them.
/// - A blocking `DeadLetterPublishingRecoverer`'s `<topic>.DLT` with fewer partitions than its
///   source (6 and 1; the estate works when the recoverer lets Kafka choose the partition):
///   refused by a lint error ("not imported: ... kafka/dlt-partitions"); now a warning with
///   the fix.
/// - `@RetryableTopic(retryTopicSuffix = ".retry", dltTopicSuffix = ".dlt")`: `<t>.retry-1000`,
///   `<t>.retry-2000`, `<t>.dlt` were not recognised ("fits no channel").
/// - The default suffixes with index naming, `<t>-retry-0`, `<t>-retry-1`, `<t>-dlt`.
///
/// Each imports, lints without error, plans empty; a hand-made change (the `.DLT`'s retention)
/// shows in the plan.
#[test]
fn kafka_spring_dlt_and_retry_suffix_sets_import_and_plan_empty() {
    let Some(w) = World::new(&["kafka"]) else {
        return;
    };
    let s = &w.stem;
    let t = |n: &str| format!("{s}.{n}");
    let week: &[(&str, &str)] = &[("retention.ms", "604800000")];
    create_topics(&[
        (&t("pay"), 6, week),
        (&t("pay.DLT"), 1, week),
        (&t("ship"), 2, week),
        (&t("ship.retry-1000"), 2, week),
        (&t("ship.retry-2000"), 2, week),
        (&t("ship.dlt"), 2, week),
        (&t("bill"), 2, week),
        (&t("bill-retry-0"), 2, week),
        (&t("bill-retry-1"), 2, week),
        (&t("bill-dlt"), 2, week),
    ]);
    let o = w.import("local-kafka", &[]);
    let text = w.imported_text();
    assert!(
        !o.stderr.contains("fits no channel") && !o.stderr.contains("not imported"),
        "every topic is in a channel\n{}\n{text}",
        o.stderr
    );
    for expected in [
        "deadLetterPartitions: 1",
        "retryTopicSuffix: \".retry\"",
        "dltSuffix: \".dlt\"",
        "name: \"{channel}.DLT\"",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    let lint = w.run(&["lint", "imported"]);
    assert!(
        lint.stdout.contains("warning[kafka/dlt-partitions]")
            && lint
                .stdout
                .contains("raise `kafka.deadLetterPartitions` to 6"),
        "a warning with the fix\n{}",
        lint.stdout
    );
    w.assert_empty_plan(&["imported"], &[], "Spring topic sets after import");

    // A hand-made change: the blocking DLT's retention.
    support::kafka::alter(
        &t("pay.DLT"),
        support::kafka::set("retention.ms", "86400000"),
    );
    assert_plan_shows(&w, "retention.ms", "the DLT's retention changed by hand");
}

/// Issue 53: "every message that blames an object names the object that actually causes it".
/// Two shapes a spec cannot say, each reported with the queue, the setting and the object it
/// comes from, as RabbitMQ applies them (x-arguments over the one policy it applies, the
/// highest priority that matches):
/// - a TTL loop whose retry queue gets its TTL and dead-letter settings from a policy that
///   matches every retry queue (`{stem}-retries`, priority 5), while a policy named after the
///   retry queue (priority 0) is not the one applied;
/// - a quorum main queue whose x-arguments set the dead-letter exchange and routing key while a
///   policy named after it sets only the delivery limit.
///
/// The old message said of both that they "get dead-lettering from a policy not named after the
/// queue (or from both a policy and x-arguments)": wrong for the second (its policy is named
/// after it) and silent on which settings came from where.
#[test]
fn rabbitmq_dead_lettering_from_another_policy_or_from_arguments_and_a_policy_names_its_source() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let s = &w.stem;
    let (main, retry, dlq) = (
        format!("{s}.loop"),
        format!("{s}.loop.retry"),
        format!("{s}.loop.dlq"),
    );
    let (q_main, q_dlq) = (format!("{s}.limited"), format!("{s}.limited.dlq"));
    let shared = format!("{s}-retries");
    let quoted = |n: &str| format!("^{}$", n.replace('.', "\\."));
    block(async {
        let put = |name: String, body: serde_json::Value| async move {
            api_ok(
                reqwest::Method::PUT,
                &format!("/api/policies/%2F/{name}"),
                body,
            )
            .await;
        };
        put(
            retry.clone(),
            json!({"pattern": quoted(&retry), "apply-to": "queues", "priority": 0,
                   "definition": {"max-length": 100000}}),
        )
        .await;
        put(
            shared.clone(),
            json!({"pattern": format!("^{}\\..*\\.retry$", s), "apply-to": "queues", "priority": 5,
                   "definition": {"message-ttl": 5000, "dead-letter-exchange": "", "dead-letter-routing-key": main}}),
        )
        .await;
        put(
            q_main.clone(),
            json!({"pattern": quoted(&q_main), "apply-to": "queues", "priority": 10,
                   "definition": {"delivery-limit": 4}}),
        )
        .await;
        declare_queue(&main, json!({})).await;
        declare_queue(&dlq, json!({})).await;
        declare_queue(&retry, json!({})).await;
        declare_queue(&q_dlq, json!({"x-queue-type": "quorum"})).await;
        declare_queue(
            &q_main,
            json!({"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": q_dlq}),
        )
        .await;
    });
    support::rabbit::wait_for(&retry, "policy", "had the shared policy applied", |q| {
        q["policy"].as_str() == Some(shared.as_str())
    });
    wait_for_policy(&q_main);
    let o = w.ok(&["import", "--target", "local-rabbitmq", "--out", "imported"]);
    o.assert_stderr_contains(&format!(
        "{retry} gets message-ttl, dead-letter-exchange, dead-letter-routing-key from policy `{shared}`, which is not named after it"
    ));
    o.assert_stderr_contains(&format!(
        "{q_main} gets dead-letter-exchange, dead-letter-routing-key from its x-arguments and delivery-limit from policy `{q_main}`"
    ));
    assert!(
        !o.stderr.contains("(policy ") && !o.stderr.contains(&format!("policy `{retry}`")),
        "no queue is blamed on a policy RabbitMQ does not apply\n{}",
        o.stderr
    );
}
