//! Issue 35, the audit journal, live on every backend: a redrive names the identity the
//! backend gives the target's credentials (SQS: sts:GetCallerIdentity's ARN, answered by
//! moto; RabbitMQ: GET /api/whoami's user; Kafka: the SASL user as `User:<name>`, or
//! `User:ANONYMOUS` on a PLAINTEXT listener; Pub/Sub: `emulator`); a target's
//! `operations.requireReason` and `operations.allowedOperators` refuse before anything is
//! read or moved (the DLQ still holds every message); `--audit-log FILE` appends one JSON
//! line per run, dry runs and refused runs included, naming what moved by id; and on a full disk (`/dev/full`) the run fails loudly,
//! exit 1 naming the file, while its stdout report still says what moved.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::redrive::redrive;
use support::workspace::Workspace;
use support::{block, kafka, pubsub, rabbit, sqs};

/// What each backend supplies: put dead letter `i`, what is left in the DLQ, and the
/// target's name in the targets file.
struct Backend<'a> {
    ws: &'a Workspace,
    target: &'a str,
    put: Box<dyn Fn(usize) + 'a>,
    dlq_left: Box<dyn Fn() -> u64 + 'a>,
}

/// Sets `operations` (a YAML flow mapping) on `target` in the workspace's targets file.
fn operations(ws: &Workspace, target: &str, yaml: &str) {
    ws.edit_targets(|t| {
        let kept: Vec<&str> = t
            .lines()
            .filter(|l| !l.starts_with("    operations:"))
            .collect();
        let mut out = Vec::new();
        for l in kept {
            out.push(l.to_owned());
            if l == format!("  {target}:") {
                out.push(format!("    operations: {yaml}"));
            }
        }
        assert!(
            out.iter().any(|l| l.starts_with("    operations:")),
            "no target {target}: {t}"
        );
        out.join("\n") + "\n"
    });
}

/// The journal's lines, each a JSON record.
fn journal(ws: &Workspace) -> Vec<Value> {
    std::fs::read_to_string(ws.path().join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The scenario, for a backend whose credentials the backend names `identity`; `glob`
/// matches it as an `allowedOperators` glob.
fn scenario(b: &Backend<'_>, identity: &str, glob: &str) {
    const N: usize = 3;
    for i in 0..N {
        (b.put)(i);
    }
    let ws = b.ws;

    // A dry run names the identity and is journaled.
    let (code, doc, err) = redrive(ws, &["--dry-run", "--audit-log", "audit.jsonl"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["identity"], identity, "{doc:#}");
    let lines = journal(ws);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["dryRun"], true);
    assert_eq!(lines[0]["identity"], identity);

    // requireReason: refused without --reason, before anything moves; a dry run still goes.
    operations(ws, b.target, "{requireReason: true}");
    let out = ws.run(&[
        "redrive",
        &ws.channel,
        "channel.yaml",
        "--yes",
        "--audit-log",
        "audit.jsonl",
    ]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("operations.requireReason") && out.stderr.contains("--reason"),
        "{}",
        out.stderr
    );
    assert_eq!((b.dlq_left)(), N as u64, "nothing moved");
    // The refusal is journaled: who tried, and why it was refused.
    let lines = journal(ws);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert_eq!(lines[1]["kind"], "dlqctl/refused", "{:#}", lines[1]);
    assert_eq!(lines[1]["verb"], "redrive");
    assert_eq!(lines[1]["channel"], ws.channel.as_str());
    assert!(
        lines[1]["refused"]
            .as_str()
            .is_some_and(|r| r.contains("operations.requireReason")),
        "{:#}",
        lines[1]
    );

    // allowedOperators without this identity: refused, naming it and the list; the refusal
    // also lands in the target's auditTo folder.
    let objects = ws.path().join("audit-objects");
    let to = objects.to_str().expect("path");
    operations(
        ws,
        b.target,
        &format!(
            "{{requireReason: true, auditTo: {to:?}, allowedOperators: [someone-else, \"ops-*\"]}}"
        ),
    );
    let out = ws.run(&[
        "redrive",
        &ws.channel,
        "channel.yaml",
        "--yes",
        "--reason",
        "INC-1",
        "--audit-log",
        "audit.jsonl",
    ]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains(&format!("`{identity}` may not redrive"))
            && out.stderr.contains("`someone-else`, `ops-*`"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "no report: {}", out.stdout);
    assert_eq!((b.dlq_left)(), N as u64, "nothing moved");
    let lines = journal(ws);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let refused = &lines[2];
    assert_eq!(refused["kind"], "dlqctl/refused", "{refused:#}");
    assert_eq!(refused["identity"], identity, "{refused:#}");
    assert_eq!(refused["reason"], "INC-1");
    assert!(
        refused["refused"]
            .as_str()
            .is_some_and(|r| r.contains(&format!("`{identity}` may not redrive"))),
        "{refused:#}"
    );

    // Listed (exactly, and by a glob): the run moves, and the journal has its records: a
    // `started` one before the first move (issue 52), then the outcome, naming what moved by
    // id, with the same `startedAt`.
    let mut moved = std::collections::BTreeSet::new();
    for (n, allowed) in [(1, identity), (2, glob)] {
        operations(
            ws,
            b.target,
            &format!(
                "{{requireReason: true, auditTo: {to:?}, allowedOperators: [someone-else, {allowed:?}]}}"
            ),
        );
        let (code, doc, err) = redrive(
            ws,
            &[
                "--yes",
                "--limit",
                if n == 1 { "1" } else { "2" },
                "--reason",
                "INC-1",
                "--audit-log",
                "audit.jsonl",
            ],
        );
        assert_eq!(code, 0, "{doc:#}\n{err}");
        assert_eq!(doc["moved"], n, "{doc:#}");
        let lines = journal(ws);
        assert_eq!(lines.len(), 3 + 2 * n as usize, "{lines:#?}");
        let started = &lines[1 + 2 * n as usize];
        let last = &lines[2 + 2 * n as usize];
        assert_eq!(started["kind"], "dlqctl/started", "{started:#}");
        assert_eq!(started["identity"], identity);
        assert_eq!(started["reason"], "INC-1");
        assert_eq!(started["startedAt"], last["startedAt"]);
        assert_eq!(last["kind"], "dlqctl/redrive");
        assert_eq!(last["dryRun"], false);
        assert_eq!(last["identity"], identity);
        assert_eq!(last["reason"], "INC-1");
        assert_eq!(last["moved"], n);
        assert_eq!(last["channel"], ws.channel.as_str());
        assert!(last["startedAt"].is_string() && last["endedAt"].is_string());
        assert_eq!(last["movedIds"]["count"], n, "{last:#}");
        assert_eq!(last["movedIds"]["sha256"].as_str().map(str::len), Some(64));
        for id in last["movedIds"]["ids"].as_array().expect("ids") {
            assert!(
                moved.insert(id.as_str().expect("id").to_owned()),
                "{id} moved twice"
            );
        }
    }
    assert_eq!(moved.len(), N, "every message named once: {moved:?}");
    assert_eq!((b.dlq_left)(), 0, "all moved");

    // operations.auditTo: one object per record (the refusal, the two runs' starts and
    // outcomes), each the journal's line.
    let mut kinds: Vec<String> = walkdir::WalkDir::new(&objects)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.expect("walk"))
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let v: Value = serde_json::from_slice(&std::fs::read(e.path()).expect("object"))
                .expect("a JSON record");
            assert_eq!(v["channel"], ws.channel.as_str(), "{v:#}");
            v["kind"].as_str().expect("kind").to_owned()
        })
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "dlqctl/redrive",
            "dlqctl/redrive",
            "dlqctl/refused",
            "dlqctl/started",
            "dlqctl/started"
        ],
        "{}",
        objects.display()
    );

    // The time to resolution, from the journal: the two runs that moved, all N messages.
    let out = ws.run(&[
        "status",
        "channel.yaml",
        "--audit-log",
        "audit.jsonl",
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let status = out.json("the status document");
    let res = &status["channels"][0]["resolution"];
    assert_eq!(res["runs"], 2, "{status:#}");
    assert_eq!(
        res["messages"].as_u64().unwrap_or(0) + res["unknown"].as_u64().unwrap_or(0),
        N as u64,
        "{res:#}"
    );
    if res["messages"].as_u64().unwrap_or(0) > 0 {
        // Put seconds ago: waited seconds, not hours.
        assert!(
            res["p90Seconds"].as_u64().is_some_and(|s| s < 600),
            "{res:#}"
        );
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!("resolution: {res}");
    }

    // A full disk: the run's start cannot be recorded, so it does not start (issue 52:
    // nothing unrecorded); it fails loudly, naming the file, and nothing moved.
    (b.put)(N);
    let out = ws.run(&[
        "redrive",
        &ws.channel,
        "channel.yaml",
        "--yes",
        "--reason",
        "INC-2",
        "--audit-log",
        "/dev/full",
    ]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("audit log /dev/full: cannot write")
            && out.stderr.contains("Redrive not started"),
        "{}",
        out.stderr
    );
    assert_eq!((b.dlq_left)(), 1, "nothing moved");
}

#[test]
fn sqs_the_journal_names_the_caller_and_operations_refuse_before_anything_moves() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    scenario(
        &Backend {
            ws: &f,
            target: "local-sqs",
            put: Box::new(|i| aws.send(&dlq, &format!("m-{i}"))),
            dlq_left: Box::new(|| aws.count(&dlq)),
        },
        // moto's GetCallerIdentity for its test keys.
        "arn:aws:sts::123456789012:user/moto",
        "arn:aws:sts::123456789012:user/*",
    );
}

#[test]
fn rabbitmq_the_journal_names_the_user_and_operations_refuse_before_anything_moves() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    let user = support::var("DLQCTL_RABBITMQ_USER", "guest");
    scenario(
        &Backend {
            ws: &f,
            target: "local-rabbitmq",
            put: Box::new(|i| {
                block(rabbit::publish_with(
                    "",
                    &dlq,
                    format!("m-{i}").as_bytes(),
                    lapin::BasicProperties::default(),
                ));
            }),
            dlq_left: Box::new(|| rabbit::count(&dlq)),
        },
        &user,
        "gu*",
    );
}

/// Kafka over SASL/SCRAM as the stack's admin user (Apache Kafka's SASL listener; tansu has
/// none): the identity is the broker's principal for it, `User:<name>`.
#[test]
fn kafka_the_journal_names_the_sasl_principal_and_operations_refuse_before_anything_moves() {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    if !kafka::apache_kafka("the SASL principal (tansu 0.6.0 has no SASL listener)") {
        return;
    }
    let Some(mut f) = kafka::Fixture::new() else {
        return;
    };
    let plain = format!("bootstrapServers: {}", support::kafka_bootstrap());
    let admin = support::var("DLQCTL_KAFKA_SASL_ADMIN", "dlqctl-admin");
    let sasl = format!(
        "bootstrapServers: {}\n    properties:\n      security.protocol: SASL_PLAINTEXT\n      sasl.mechanism: SCRAM-SHA-512\n      sasl.username: {admin}\n    secretProperties:\n      sasl.password: DLQCTL_TEST_KAFKA_PASSWORD",
        support::var("DLQCTL_KAFKA_SASL_BOOTSTRAP", "127.0.0.1:9094"),
    );
    f.edit_targets(|t| t.replace(&plain, &sasl));
    let password = support::var("DLQCTL_KAFKA_SASL_ADMIN_PASSWORD", "dlqctl-admin-secret");
    f.set_env("DLQCTL_TEST_KAFKA_PASSWORD", &password);
    f.write_example(|t| t);
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let producer: FutureProducer = kafka::producer(&[]);
    scenario(
        &Backend {
            ws: &f,
            target: "local-kafka",
            put: Box::new(|i| {
                let body = format!("m-{i}");
                block(producer.send(
                    FutureRecord::to(&dlt).key(&body).payload(&body),
                    Duration::from_secs(10),
                ))
                .map_err(|(e, _)| e)
                .expect("produce");
            }),
            dlq_left: Box::new(|| kafka::waiting(&f)),
        },
        &format!("User:{admin}"),
        "User:dlqctl-*",
    );
}

/// Kafka over PLAINTEXT: the broker names no principal; the record says `User:ANONYMOUS`,
/// what Kafka's authorizer calls such a client.
#[test]
fn kafka_without_sasl_the_identity_is_anonymous() {
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let (code, doc, err) = redrive(&f, &["--dry-run"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["identity"], "User:ANONYMOUS", "{doc:#}");
}

#[test]
fn pubsub_the_journal_says_emulator_and_operations_refuse_before_anything_moves() {
    let Some(f) = pubsub::Fixture::new() else {
        return;
    };
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    // The emulator tells no depth: pull what the subscription holds (until 2 s bring nothing
    // new), count it by id, and hand every one back (nack).
    let depth = || -> u64 {
        let mut ids = std::collections::BTreeSet::new();
        let mut held = Vec::new();
        let mut quiet_until = std::time::Instant::now() + Duration::from_secs(2);
        while std::time::Instant::now() < quiet_until {
            let got = f.rest.pull(&dl_sub, 100);
            if got.is_empty() {
                std::thread::sleep(Duration::from_millis(100));
            }
            for m in got {
                if ids.insert(m["message"]["messageId"].to_string()) {
                    quiet_until = std::time::Instant::now() + Duration::from_secs(2);
                }
                held.push(m["ackId"].as_str().expect("ackId").to_owned());
            }
        }
        for a in &held {
            f.rest.nack(&dl_sub, a);
        }
        ids.len() as u64
    };
    scenario(
        &Backend {
            ws: &f,
            target: "local-pubsub",
            put: Box::new(|i| {
                f.rest.publish(&dlt, &format!("m-{i}"));
            }),
            dlq_left: Box::new(depth),
        },
        "emulator",
        "emu*",
    );
}

// ------------------------------------------------------------- operations.auditTo: queue, topic

/// `operations.auditTo: queue:NAME` / `topic:NAME`: a dry run's record lands on the target's
/// queue or topic as one message, read by the third-party client `take` (body, headers): the
/// record as JSON, `dlq-audit-kind`, no `dlq-redrive-count` (it is no dead letter coming
/// back). Then one to a queue or topic that does not exist fails the run, naming it.
fn audit_to_channel(
    ws: &Workspace,
    target: &str,
    to: &str,
    take: &dyn Fn() -> Vec<(Vec<u8>, std::collections::BTreeMap<String, String>)>,
) {
    operations(ws, target, &format!("{{auditTo: {to:?}}}"));
    let (code, doc, err) = redrive(ws, &["--dry-run"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    let got = take();
    assert_eq!(got.len(), 1, "one record: {got:?}");
    let (body, headers) = &got[0];
    let record: Value = serde_json::from_slice(body).expect("the record as JSON");
    assert_eq!(record["kind"], "dlqctl/redrive", "{record:#}");
    assert_eq!(record["dryRun"], true);
    assert_eq!(record["channel"], ws.channel.as_str());
    assert_eq!(
        headers.get("dlq-audit-kind").map(String::as_str),
        Some("redrive")
    );
    assert!(!headers.contains_key("dlq-redrive-count"), "{headers:?}");

    let kind = to.split_once(':').map_or("", |(k, _)| k);
    operations(
        ws,
        target,
        &format!("{{auditTo: \"{kind}:{}-nosuch\"}}", ws.channel),
    );
    let (code, doc, err) = redrive(ws, &["--dry-run"]);
    assert_eq!(
        code, 1,
        "a record that does not land fails the run: {doc:#}\n{err}"
    );
    assert!(
        err.contains("operations.auditTo") && err.contains("nosuch"),
        "{err}"
    );
}

#[test]
fn rabbitmq_audit_to_a_queue_publishes_each_record_confirmed() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let queue = format!("{}.audit", f.channel);
    block(rabbit::declare_queue(&queue, serde_json::json!({})));
    audit_to_channel(&f, "local-rabbitmq", &format!("queue:{queue}"), &|| {
        rabbit::wait_for_messages(&queue, 1);
        block(rabbit::take_all(&queue))
    });
}

#[test]
fn sqs_audit_to_a_queue_publishes_each_record_confirmed() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let aws = sqs::Aws::new();
    let queue = format!("{}-audit", f.channel);
    block(aws.sqs.create_queue().queue_name(&queue).send()).expect("CreateQueue");
    audit_to_channel(&f, "local-sqs", &format!("queue:{queue}"), &|| {
        let got = block(
            aws.sqs
                .receive_message()
                .queue_url(aws.url(&queue))
                .max_number_of_messages(10)
                .wait_time_seconds(2)
                .message_attribute_names("All")
                .send(),
        )
        .expect("ReceiveMessage");
        got.messages()
            .iter()
            .map(|m| {
                let headers = m
                    .message_attributes()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.string_value().unwrap_or_default().to_owned()))
                    .collect();
                (m.body().unwrap_or_default().as_bytes().to_vec(), headers)
            })
            .collect()
    });
}

#[test]
fn kafka_audit_to_a_topic_publishes_each_record_confirmed() {
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let topic = format!("{}-audit", f.channel);
    kafka::create_topics(&[(&topic, 1, &[])]);
    let tail = kafka::Tail::new(&topic, &format!("{}-audit-reader", f.channel));
    audit_to_channel(&f, "local-kafka", &format!("topic:{topic}"), &|| {
        tail.take(1)
    });
}

#[test]
fn pubsub_audit_to_a_topic_publishes_each_record_confirmed() {
    let Some(f) = pubsub::Fixture::new() else {
        return;
    };
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    let topic = format!("{}-audit", f.channel);
    let sub = format!("{}-audit-reader", f.channel);
    f.rest.create_topic(&topic);
    f.rest.create_subscription(
        &sub,
        serde_json::json!({"topic": pubsub::Rest::topic_path(&topic)}),
    );
    audit_to_channel(&f, "local-pubsub", &format!("topic:{topic}"), &|| {
        f.rest.take(&sub, 1)
    });
}
