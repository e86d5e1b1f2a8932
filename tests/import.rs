//! `dlqctl import`, `--adopt` and `--prune`, live against the local stack (`scripts/stack up`),
//! through the real binary.
//!
//! Every test works in its own namespace: a targets file whose ownership prefixes (SQS too)
//! start with a random stem, so that an import or a prune sees only what this test made,
//! even with other tests (or another checkout's tests) running against the same servers.
//! Objects "made by hand" are made the way an operator would: RabbitMQ management API calls,
//! boto3 from the stack's venv, rdkafka admin calls. Everything under the stem is deleted
//! when the test ends, look-alikes included.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{Value, json};
use support::rabbit::{api, block, wait_for_messages};
use support::{Output, dlqctl, output, unique};

/// One test's world: a temp folder with a targets file scoped to a random stem.
struct World {
    dir: tempfile::TempDir,
    /// `imp<pid>-<time>-<n>`: every name this test makes starts with it.
    stem: String,
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
        let dir = tempfile::tempdir().expect("tempdir");
        let stem = unique("imp");
        let targets = format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  local-sqs:\n    backend: sqs\n    region: us-east-1\n    endpoint: {aws}\n    ownership: {{prefixes: [\"{stem}-\"]}}\n  local-rabbitmq:\n    backend: rabbitmq\n    url: {rabbit}\n    vhost: /\n    usernameEnv: DLQCTL_RABBITMQ_USER\n    passwordEnv: DLQCTL_RABBITMQ_PASSWORD\n    ownership: {{prefixes: [\"{stem}.\"]}}\n  local-kafka:\n    backend: kafka\n    bootstrapServers: {kafka}\n    ownership: {{prefixes: [\"{stem}.\"]}}\n",
            aws = support::aws_endpoint(),
            rabbit = support::rabbitmq_url(),
            kafka = support::kafka_bootstrap(),
        );
        std::fs::write(dir.path().join("dlqctl.yaml"), targets).expect("targets");
        std::fs::create_dir_all(dir.path().join("specs")).expect("specs/");
        Some(World { dir, stem })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes an example into `specs/` under `channel` (its `metadata.name`).
    fn example(&self, example: &str, channel: &str) -> PathBuf {
        let text = std::fs::read_to_string(support::root().join("examples").join(example))
            .expect("example");
        let line = text
            .lines()
            .find(|l| l.starts_with("  name: "))
            .expect("metadata.name")
            .to_owned();
        let text = text.replacen(&line, &format!("  name: {channel}"), 1);
        let path = self.path().join("specs").join(format!("{channel}.yaml"));
        std::fs::write(&path, text).expect("write spec");
        path
    }

    fn run(&self, args: &[&str]) -> Output {
        output(
            support::dlqctl_local(self.path())
                .args(args)
                .args(["--color", "never"]),
        )
    }

    fn ok(&self, args: &[&str]) -> Output {
        let o = self.run(args);
        assert_eq!(o.code, 0, "{args:?}\n{}{}", o.stdout, o.stderr);
        o
    }

    /// Imports `target` into a fresh `imported/`, which must lint clean; returns the output.
    fn import(&self, target: &str, extra: &[&str]) -> Output {
        let _ = std::fs::remove_dir_all(self.path().join("imported"));
        let mut args = vec!["import", "--target", target, "--out", "imported"];
        args.extend_from_slice(extra);
        let o = self.ok(&args);
        let lint = self.run(&["lint", "imported", "--deny-warnings"]);
        assert_eq!(
            lint.code,
            0,
            "imported specs lint clean\n{}{}\n{}",
            lint.stdout,
            lint.stderr,
            self.imported_text()
        );
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
        let mut args = vec!["plan"];
        args.extend_from_slice(paths);
        args.push("--detailed-exitcode");
        args.extend_from_slice(extra);
        let p = self.run(&args);
        assert_eq!(
            p.code,
            0,
            "{context}: plan must be empty (exit 0)\n{}{}\n{}",
            p.stdout,
            p.stderr,
            self.imported_text()
        );
        assert!(p.stdout.contains("No changes."), "{context}\n{}", p.stdout);
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let stem = self.stem.clone();
        // RabbitMQ: queues, policies, exchanges under the stem.
        if support::tcp_up(&support::host_port(&support::rabbitmq_url())) {
            block(async {
                for (kind, list) in [
                    ("queues", "/api/queues/%2F?columns=name"),
                    ("policies", "/api/policies/%2F"),
                    ("exchanges", "/api/exchanges/%2F?columns=name"),
                ] {
                    let (_, all) = api(reqwest::Method::GET, list, None).await;
                    for item in all.as_array().into_iter().flatten() {
                        let Some(name) = item["name"].as_str() else {
                            continue;
                        };
                        if name.starts_with(&stem) {
                            let path = format!("/api/{kind}/%2F/{}", enc(name));
                            let _ = api(reqwest::Method::DELETE, &path, None).await;
                        }
                    }
                }
            });
        }
        // SQS and CloudWatch.
        if support::tcp_up(&support::host_port(&support::aws_endpoint())) {
            let _ = boto3(&format!(
                "for u in sqs.list_queues(QueueNamePrefix={stem:?}).get('QueueUrls', []):\n    sqs.delete_queue(QueueUrl=u)\n\
                 names = [a['AlarmName'] for a in cw.describe_alarms(AlarmNamePrefix={stem:?})['MetricAlarms']]\n\
                 if names:\n    cw.delete_alarms(AlarmNames=names)\n"
            ));
        }
        // Kafka.
        if support::tcp_up(&support::kafka_bootstrap()) {
            let names = topics(&stem);
            if !names.is_empty() {
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let _ = block(kafka_admin().delete_topics(&refs, &AdminOptions::new()));
            }
        }
    }
}

fn enc(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

/// Runs a boto3 script with `sqs` and `cw` clients for the local endpoint, as an operator's
/// script would (not through dlqctl); returns its stdout.
fn boto3(script: &str) -> String {
    let python = support::cache_dir().join("venv/bin/python");
    let prelude = format!(
        "import boto3, json\nsqs = boto3.client('sqs', endpoint_url={e:?}, region_name='us-east-1')\ncw = boto3.client('cloudwatch', endpoint_url={e:?}, region_name='us-east-1')\n",
        e = support::aws_endpoint()
    );
    let out = Command::new(&python)
        .arg("-c")
        .arg(format!("{prelude}{script}"))
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{} runs (scripts/stack up installs it): {e}",
                python.display()
            )
        });
    assert!(
        out.status.success(),
        "boto3 script failed:\n{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sqs_exists(name: &str) -> bool {
    boto3(&format!(
        "print(any(u.rsplit('/', 1)[-1] == {name:?} for u in sqs.list_queues(QueueNamePrefix={name:?}).get('QueueUrls', [])))"
    ))
    .trim()
        == "True"
}

fn kafka_admin() -> Arc<AdminClient<DefaultClientContext>> {
    Arc::new(
        ClientConfig::new()
            .set("bootstrap.servers", support::kafka_bootstrap())
            .set("allow.auto.create.topics", "false")
            .create()
            .expect("admin client"),
    )
}

fn topics(prefix: &str) -> Vec<String> {
    let md = kafka_admin()
        .inner()
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("metadata");
    md.topics()
        .iter()
        .filter(|t| t.name().starts_with(prefix) && t.error().is_none())
        .map(|t| t.name().to_owned())
        .collect()
}

/// A topic to create by hand: name, partitions, configs.
type TopicSpec<'a> = (&'a str, i32, &'a [(&'a str, &'a str)]);

fn create_topics(specs: &[TopicSpec]) {
    let news: Vec<NewTopic> = specs
        .iter()
        .map(|(name, partitions, configs)| {
            let mut t = NewTopic::new(name, *partitions, TopicReplication::Fixed(1));
            for (k, v) in *configs {
                t = t.set(k, v);
            }
            t
        })
        .collect();
    let refs: Vec<&NewTopic> = news.iter().collect();
    for r in block(kafka_admin().create_topics(refs, &AdminOptions::new())).expect("CreateTopics") {
        r.unwrap_or_else(|(t, e)| panic!("{t}: {e}"));
    }
}

async fn rabbit(method: reqwest::Method, path: &str, body: Value) {
    let (status, answer) = api(method, path, Some(body)).await;
    assert!((200..300).contains(&status), "{path}: {status} {answer}");
}

// ---------------------------------------------------------------------------------------------

#[test]
fn import_help_is_snapshotted() {
    let o = output(dlqctl().args(["import", "--help"]));
    assert_eq!(o.code, 0, "{}", o.stderr);
    insta::assert_snapshot!("import-help", o.stdout);
}

#[test]
fn rabbitmq_round_trip_applied_example_deleted_spec_imported_plan_empty() {
    let Some(w) = World::new(&["rabbitmq"]) else {
        return;
    };
    let channel = format!("{}.orders", w.stem);
    w.example("orders-rabbitmq.yaml", &channel);
    w.ok(&["apply", "specs", "--auto-approve"]);
    std::fs::remove_dir_all(w.path().join("specs")).expect("delete the specs");

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
    w.ok(&["apply", "specs", "--auto-approve"]);
    std::fs::remove_dir_all(w.path().join("specs")).expect("delete the specs");

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
    w.ok(&["apply", "specs", "--auto-approve"]);
    std::fs::remove_dir_all(w.path().join("specs")).expect("delete the specs");

    let o = w.import("local-kafka", &[]);
    assert_eq!(o.stdout.lines().count(), 1, "{}{}", o.stdout, o.stderr);
    let text = w.imported_text();
    for expected in [
        "retention: 7d",
        "retention: 30d",
        "maxAttempts: 4",
        "cleanup.policy: delete",
        "partitions: 3",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    w.assert_empty_plan(&["imported"], &[], "after import");
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
        let q = |args: Value| json!({"durable": true, "auto_delete": false, "arguments": args});
        rabbit(
            reqwest::Method::PUT,
            &format!("/api/queues/%2F/{main}"),
            q(json!({"x-max-length": 10000})),
        )
        .await;
        rabbit(
            reqwest::Method::PUT,
            &format!("/api/queues/%2F/{retry}"),
            q(json!({"x-message-ttl": 10000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": main})),
        )
        .await;
        rabbit(
            reqwest::Method::PUT,
            &format!("/api/queues/%2F/{dlq}"),
            q(json!({"x-message-ttl": 604_800_000})),
        )
        .await;
        rabbit(
            reqwest::Method::PUT,
            &format!("/api/queues/%2F/{other}"),
            q(json!({})),
        )
        .await;
    });

    let o = w.import("local-rabbitmq", &[]);
    let text = w.imported_text();
    for expected in [
        "name: \"{channel}.process\"",
        "dlx: arguments",
        "initial: 10s",
        "retention: 7d",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    assert!(
        o.stderr.contains("x-max-length = 10000") && o.stderr.contains("left as is"),
        "an unmanaged setting is reported, not dropped\n{}",
        o.stderr
    );
    assert!(
        o.stderr
            .contains(&format!("queue {other} (vhost /): fits no channel")),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("maxAttempts"), "{}", o.stderr);
    w.assert_empty_plan(&["imported"], &[], "hand-made queues after import");
}

#[test]
fn sqs_queues_and_alarm_made_with_boto3_import_then_adopt_then_plan_empty() {
    let Some(w) = World::new(&["sqs"]) else {
        return;
    };
    let s = &w.stem;
    let (main, dlq) = (format!("{s}-orders"), format!("{s}-orders-dlq"));
    boto3(&format!(
        "d = sqs.create_queue(QueueName={dlq:?}, Attributes={{'MessageRetentionPeriod': '1209600', 'VisibilityTimeout': '45'}})['QueueUrl']\n\
         arn = sqs.get_queue_attributes(QueueUrl=d, AttributeNames=['QueueArn'])['Attributes']['QueueArn']\n\
         sqs.create_queue(QueueName={main:?}, Attributes={{'RedrivePolicy': json.dumps({{'deadLetterTargetArn': arn, 'maxReceiveCount': '3'}}), 'VisibilityTimeout': '45', 'DelaySeconds': '2'}}, tags={{'team': 'orders'}})\n\
         dims = [{{'Name': 'QueueName', 'Value': {dlq:?}}}]\n\
         cw.put_metric_alarm(AlarmName={depth:?}, AlarmDescription='orders DLQ is filling up', Namespace='AWS/SQS', MetricName='ApproximateNumberOfMessagesVisible', Dimensions=dims, Statistic='Maximum', Period=300, EvaluationPeriods=2, Threshold=5, ComparisonOperator='GreaterThanThreshold', TreatMissingData='notBreaching', AlarmActions=['arn:aws:sns:us-east-1:123456789012:orders-ops'])\n\
         cw.put_metric_alarm(AlarmName={odd:?}, Namespace='AWS/SQS', MetricName='ApproximateNumberOfMessagesVisible', Dimensions=dims, Statistic='Average', Period=60, EvaluationPeriods=1, Threshold=1, ComparisonOperator='GreaterThanThreshold')\n",
        depth = format!("{dlq}-depth"),
        odd = format!("{s}-orders-avg-alarm"),
    ));

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
    assert!(o.stderr.contains("DelaySeconds = 2"), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "alarm {s}-orders-avg-alarm: not imported, left as is"
        )),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("--adopt"), "{}", o.stderr);

    // Adoption: an update that only adds the two tags, on each of the three objects.
    let p = w.run(&["plan", "imported", "--adopt", "--detailed-exitcode"]);
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
    assert!(
        p.stdout
            .contains("Plan: 0 to create, 3 to update, 0 to replace, 0 to delete."),
        "{}",
        p.stdout
    );
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
    let tags = boto3(&format!(
        "u = sqs.get_queue_url(QueueName={main:?})['QueueUrl']\nprint(json.dumps(sqs.list_queue_tags(QueueUrl=u)['Tags'], sort_keys=True))"
    ));
    let channel = main.clone();
    assert_eq!(
        serde_json::from_str::<Value>(tags.trim()).unwrap_or_default(),
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
        "retention: 14d",
        "partitions: 2",
        "deadLetterPartitions: 4",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    assert!(o.stderr.contains("assumption"), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("topic {misc}: fits no channel")),
        "{}",
        o.stderr
    );
    // A config on one topic only: no `kafka.config` can say it; reported, then a plan note.
    assert!(
        o.stderr.contains(&format!(
            "topic {main}: not in the spec, left as is (plans list it as a note): config.max.message.bytes = 2000000"
        )),
        "{}",
        o.stderr
    );
    w.assert_empty_plan(&["imported"], &[], "hand-made topics after import");
    let p = w.ok(&["plan", "imported"]);
    assert!(
        p.stdout
            .contains("unmanaged setting, left as is: config.max.message.bytes = 2000000"),
        "{}",
        p.stdout
    );
}

// ---------------------------------------------------------------------------------------------
// --prune

/// Plans with --prune and returns the resources it would delete.
fn pruned(w: &World) -> Vec<String> {
    let p = w.run(&["plan", "specs", "--prune", "--detailed-exitcode"]);
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
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
    block(rabbit(
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
    assert!(
        deletes
            .iter()
            .any(|d| d.contains(&format!("queue {b}.dlq")) && d.contains("holds 0 messages")),
        "{deletes:#?}"
    );
    let refused = w.run(&["apply", "specs", "--prune", "--auto-approve"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--allow-delete"),
        "{}",
        refused.stderr
    );

    w.ok(&[
        "apply",
        "specs",
        "--prune",
        "--auto-approve",
        "--allow-delete",
        "--allow-message-loss",
    ]);
    let exists = |q: &str| {
        block(api(
            reqwest::Method::GET,
            &format!("/api/queues/%2F/{q}"),
            None,
        ))
        .0 == 200
    };
    assert!(!exists(&format!("{b}.dlq")) && !exists(&format!("{b}.process")));
    assert!(exists(&format!("{a}.dlq")) && exists(&format!("{a}.process")));
    assert!(
        exists(&lookalike),
        "a queue outside the ownership prefixes survives"
    );
    w.assert_empty_plan(&["specs"], &["--prune"], "after the prune");
}

#[test]
fn sqs_prune_deletes_only_tagged_queues_and_alarms_and_counts_their_messages() {
    let Some(w) = World::new(&["sqs"]) else {
        return;
    };
    let (a, b) = (format!("{}-a", w.stem), format!("{}-b", w.stem));
    w.example("payments-sqs.yaml", &a);
    let b_spec = w.example("payments-sqs.yaml", &b);
    w.ok(&["apply", "specs", "--auto-approve"]);
    // Look-alikes by hand: untagged inside the prefixes, and tagged as dlqctl's outside them.
    let (untagged, outside) = (format!("{b}-dlq-copy"), format!("{}x-b-dlq", w.stem));
    boto3(&format!(
        "sqs.create_queue(QueueName={untagged:?})\n\
         sqs.create_queue(QueueName={outside:?}, tags={{'managed-by': 'dlqctl', 'dlqctl-channel': {b:?}}})\n\
         sqs.send_message(QueueUrl=sqs.get_queue_url(QueueName={dlq:?})['QueueUrl'], MessageBody='kept for a human')\n",
        dlq = format!("{b}-dlq"),
    ));
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
            b.clone(),
            format!("{b}-dlq"),
            format!("{b}-dlq-depth"),
            format!("{b}-dlq-oldest-age")
        ],
        "{deletes:#?}"
    );
    assert!(
        deletes
            .iter()
            .any(|d| d.contains(&format!("queue {b}-dlq")) && d.contains("holds 1 messages")),
        "{deletes:#?}"
    );
    let refused = w.run(&[
        "apply",
        "specs",
        "--prune",
        "--auto-approve",
        "--allow-delete",
    ]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--allow-message-loss"),
        "{}",
        refused.stderr
    );
    assert!(sqs_exists(&format!("{b}-dlq")), "refused with zero writes");

    w.ok(&[
        "apply",
        "specs",
        "--prune",
        "--auto-approve",
        "--allow-delete",
        "--allow-message-loss",
    ]);
    assert!(!sqs_exists(&b) && !sqs_exists(&format!("{b}-dlq")));
    assert!(sqs_exists(&a) && sqs_exists(&format!("{a}-dlq")));
    assert!(sqs_exists(&untagged), "an untagged look-alike survives");
    assert!(
        sqs_exists(&outside),
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
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", support::kafka_bootstrap())
        .create()
        .expect("producer");
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
    assert!(
        deletes
            .iter()
            .any(|d| d.contains(&format!("topic {b}-dlt ")) && d.contains("holds 1 messages")),
        "{deletes:#?}"
    );
    let refused = w.run(&[
        "apply",
        "specs",
        "--prune",
        "--auto-approve",
        "--allow-delete",
    ]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    w.ok(&[
        "apply",
        "specs",
        "--prune",
        "--auto-approve",
        "--allow-delete",
        "--allow-message-loss",
    ]);
    let left = topics(&w.stem);
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
