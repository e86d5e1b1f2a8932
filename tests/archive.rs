//! `dlqctl archive`, live: dead letters put in by third-party clients (the AWS SDK, lapin,
//! rdkafka) are archived to a directory and to S3 (moto, bucket made with the AWS SDK):
//! a dry run writes nothing; without `--delete` nothing leaves the DLQ; with it the DLQ is
//! empty afterwards (read by the third-party client), every message is in the objects by
//! body with its headers, non-UTF-8 bodies included, and each object's sha256 matches its
//! manifest; a run killed with SIGKILL and then run again leaves no message missing.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use lapin::BasicProperties;
use serde_json::Value;
use sha2::Digest;
use support::workspace::Workspace;
use support::{block, kafka, rabbit, sqs};

/// Archived records by id: body bytes and headers.
type Archived = BTreeMap<String, (Vec<u8>, Vec<(String, String)>)>;

/// `archive CHANNEL channel.yaml --format json EXTRA`: exit code, report, stderr.
fn archive(ws: &Workspace, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec![
        "archive",
        ws.channel.as_str(),
        "channel.yaml",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = ws.run(&args);
    let doc = out.json("the archive report");
    (out.code, doc, out.stderr)
}

#[track_caller]
fn archive_ok(ws: &Workspace, extra: &[&str]) -> Value {
    let (code, doc, err) = archive(ws, extra);
    assert_eq!(code, 0, "{doc}\n{err}");
    doc
}

/// Every archived record of every manifest under `root` (a directory), the objects checked
/// against their manifest's sha256: body bytes and headers by record id, and how many
/// records were seen more than once.
fn read_dir_archive(root: &std::path::Path) -> (Archived, u64) {
    let mut out = BTreeMap::new();
    let mut dups = 0;
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let e = e.expect("walk");
        if e.file_name() != "manifest.json" {
            continue;
        }
        let m: Value = serde_json::from_slice(&std::fs::read(e.path()).expect("manifest"))
            .expect("manifest json");
        let dir = e.path().parent().expect("run folder");
        for o in m["objects"].as_array().expect("objects") {
            let bytes = std::fs::read(dir.join(o["name"].as_str().expect("name"))).expect("object");
            dups += records(&bytes, o, &mut out);
        }
    }
    (out, dups)
}

/// Checks one object against its manifest entry and adds its records; returns duplicates.
fn records(bytes: &[u8], entry: &Value, out: &mut Archived) -> u64 {
    use base64::Engine;
    let sum: String = sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(entry["sha256"].as_str(), Some(sum.as_str()), "{entry}");
    let mut dups = 0;
    for line in std::str::from_utf8(bytes).expect("utf-8").lines() {
        let r: Value = serde_json::from_str(line).expect("record");
        let body = match r["bodyEncoding"].as_str() {
            Some("base64") => base64::engine::general_purpose::STANDARD
                .decode(r["body"].as_str().expect("body"))
                .expect("base64"),
            _ => r["body"].as_str().expect("body").as_bytes().to_vec(),
        };
        let headers: Vec<(String, String)> =
            serde_json::from_value(r["headers"].clone()).expect("headers");
        let id = r["id"].as_str().expect("id").to_owned();
        if out.insert(id, (body, headers)).is_some() {
            dups += 1;
        }
    }
    dups
}

fn bodies(a: &Archived) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = a.values().map(|(b, _)| b.clone()).collect();
    v.sort();
    v
}

fn header<'a>(h: &'a [(String, String)], k: &str) -> Option<&'a str> {
    h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

/// The scenario every backend passes: `put` puts the dead letters whose bodies are
/// `expected`, each with `dlq-error-class: poison`; `count` reads the DLQ's depth.
fn scenario(ws: &Workspace, expected: &[Vec<u8>], put: &dyn Fn(), count: &dyn Fn() -> u64) {
    put();
    let n = expected.len() as u64;
    assert_eq!(count(), n);
    let root = ws.path().join("arch");
    let to = root.to_str().expect("path").to_owned();

    // A dry run says, writes nothing, moves nothing.
    let dry = archive_ok(ws, &["--to", &to, "--dry-run"]);
    // What the status door read (SQS hands out at most 10 per receive: perhaps not all).
    let would = dry["wouldArchive"]["count"].as_u64().unwrap_or(0);
    assert!(would > 0 && would <= n, "{dry}");
    if dry["wouldArchive"]["exact"] == true {
        assert_eq!(would, n, "{dry}");
    }
    assert!(!root.exists(), "a dry run writes nothing");
    assert_eq!(count(), n);

    // Without --delete: archived, and all still in the DLQ.
    let kept = ws.path().join("kept");
    let doc = archive_ok(ws, &["--to", kept.to_str().expect("path")]);
    assert_eq!(
        (doc["archived"].as_u64(), doc["deleted"].as_u64()),
        (Some(n), Some(0)),
        "{doc}"
    );
    assert_eq!(count(), n, "without --delete nothing leaves the DLQ");
    assert_eq!(bodies(&read_dir_archive(&kept).0), expected);

    // With --delete: every message archived, byte-exact, and the DLQ empty.
    let doc = archive_ok(ws, &["--to", &to, "--delete", "--yes"]);
    assert_eq!(
        (doc["archived"].as_u64(), doc["deleted"].as_u64()),
        (Some(n), Some(n)),
        "{doc}"
    );
    assert_eq!(count(), 0, "the DLQ is empty: {doc}");
    let (got, dups) = read_dir_archive(&root);
    assert_eq!(dups, 0);
    assert_eq!(bodies(&got), expected);
    for (body, h) in got.values() {
        assert_eq!(
            header(h, "dlq-error-class"),
            Some("poison"),
            "{body:?} {h:?}"
        );
    }
}

fn expected(n: usize, binary: bool) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("{{\"m\":{i}}}").into_bytes())
        .collect();
    if binary {
        v.push(vec![0xff, 0x00, 0xfe, b'x']);
    }
    v.sort();
    v
}

// ------------------------------------------------------------------------------ SQS

fn sqs_put(aws: &sqs::Aws, queue: &str, body: &str) {
    let attr = aws_sdk_sqs::types::MessageAttributeValue::builder()
        .data_type("String")
        .string_value("poison")
        .build()
        .expect("attribute");
    block(
        aws.sqs
            .send_message()
            .queue_url(aws.url(queue))
            .message_body(body)
            .message_attributes("dlq-error-class", attr)
            .send(),
    )
    .expect("SendMessage");
}

#[test]
fn sqs_archive_to_a_directory_keeps_or_deletes_and_loses_nothing() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    // SQS bodies are text (XML characters): no binary body here.
    let want = expected(12, false);
    scenario(
        &f,
        &want,
        &|| {
            for b in &want {
                sqs_put(&aws, &dlq, std::str::from_utf8(b).expect("text"));
            }
        },
        &|| aws.count(&dlq),
    );
}

/// The moto S3 client, as a third party (the AWS SDK) reads the archive.
fn s3() -> aws_sdk_s3::Client {
    let endpoint =
        std::env::var("DLQCTL_AWS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:5000".into());
    let config = block(
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .load(),
    );
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    )
}

fn s3_get(c: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Vec<u8> {
    block(async {
        let o = c
            .get_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .expect("GetObject");
        o.body.collect().await.expect("body").into_bytes().to_vec()
    })
}

/// Every record under `s3://bucket/prefix`, checked against the manifests.
fn read_s3_archive(c: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> (Archived, u64) {
    let keys: Vec<String> = block(async {
        let l = c
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .send()
            .await
            .expect("ListObjectsV2");
        l.contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_owned))
            .collect()
    });
    let mut out = BTreeMap::new();
    let mut dups = 0;
    for k in keys.iter().filter(|k| k.ends_with("/manifest.json")) {
        let m: Value = serde_json::from_slice(&s3_get(c, bucket, k)).expect("manifest");
        let folder = k.trim_end_matches("manifest.json");
        for o in m["objects"].as_array().expect("objects") {
            let bytes = s3_get(
                c,
                bucket,
                &format!("{folder}{}", o["name"].as_str().expect("name")),
            );
            dups += records(&bytes, o, &mut out);
        }
    }
    (out, dups)
}

#[test]
fn sqs_archive_to_s3_with_delete_empties_the_dlq_into_checksummed_objects() {
    let Some(mut f) = sqs::Fixture::applied() else {
        return;
    };
    let endpoint =
        std::env::var("DLQCTL_AWS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:5000".into());
    f.set_env("AWS_ENDPOINT_URL_S3", &endpoint);
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let c = s3();
    let bucket = format!("{}-arch", f.channel).to_lowercase();
    block(c.create_bucket().bucket(&bucket).send()).expect("CreateBucket");
    let want = expected(25, false);
    for b in &want {
        sqs_put(&aws, &dlq, std::str::from_utf8(b).expect("text"));
    }
    let to = format!("s3://{bucket}/prod/dlq");
    let doc = archive_ok(&f, &["--to", &to, "--delete", "--yes"]);
    assert_eq!(doc["deleted"], 25, "{doc}");
    assert!(
        doc["manifest"]
            .as_str()
            .is_some_and(|m| m.starts_with(&format!("{to}/"))),
        "{doc}"
    );
    assert_eq!(aws.count(&dlq), 0);
    let (got, dups) = read_s3_archive(&c, &bucket, "prod/dlq/");
    assert_eq!(dups, 0);
    assert_eq!(bodies(&got), want);
    assert!(
        got.values()
            .all(|(_, h)| header(h, "dlq-error-class") == Some("poison"))
    );
}

#[test]
fn sqs_an_archive_killed_part_way_then_run_again_misses_no_message() {
    const N: usize = 200;
    let Some(mut f) = sqs::Fixture::applied() else {
        return;
    };
    f.set_env("DLQCTL_SQS_REDRIVE_HOLD", "5");
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let want = expected(N, false);
    for b in &want {
        sqs_put(&aws, &dlq, std::str::from_utf8(b).expect("text"));
    }
    let root = f.path().join("arch");
    let to = root.to_str().expect("path").to_owned();
    let mut run = f
        .command(&[
            "archive",
            f.channel.as_str(),
            "channel.yaml",
            "--to",
            &to,
            "--delete",
            "--yes",
            "--rate",
            "20",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("archive starts");
    support::redrive::kill_part_way(
        &mut run,
        Duration::from_secs(120),
        Duration::from_millis(100),
        || aws.count(&dlq) <= (N - 30) as u64,
    );
    let left_first = aws.count(&dlq);
    assert!(
        left_first > 0 && left_first < N as u64,
        "killed part-way: {left_first} left"
    );
    std::thread::sleep(Duration::from_secs(6));
    let doc = archive_ok(&f, &["--to", &to, "--delete", "--yes"]);
    assert_eq!(aws.count(&dlq), 0, "{doc}");
    let (got, dups) = read_dir_archive(&root);
    assert_eq!(bodies(&got), want, "no message missing");
    #[allow(clippy::print_stderr)]
    {
        eprintln!("SQS archive: killed with {left_first} left; {dups} archived twice");
    }
}

// ------------------------------------------------------------------------------ RabbitMQ

#[test]
fn rabbitmq_archive_to_a_directory_keeps_or_deletes_and_loses_nothing() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    let want = expected(12, true);
    scenario(
        &f,
        &want,
        &|| {
            for b in &want {
                let h = rabbit::table(&[("dlq-error-class", rabbit::text("poison"))]);
                block(rabbit::publish_with(
                    "",
                    &dlq,
                    b,
                    BasicProperties::default().with_headers(h),
                ));
            }
            rabbit::wait_for_messages(&dlq, want.len() as u64);
        },
        &|| rabbit::count(&dlq),
    );
}

// ------------------------------------------------------------------------------ Kafka

fn kafka_put(topic: &str, body: &[u8]) {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = kafka::producer(&[]);
    let h = OwnedHeaders::new().insert(Header {
        key: "dlq-error-class",
        value: Some(b"poison".as_slice()),
    });
    block(producer.send(
        FutureRecord::to(topic).key(body).payload(body).headers(h),
        Duration::from_secs(10),
    ))
    .map_err(|(e, _)| e)
    .expect("produce");
}

#[test]
fn kafka_archive_to_a_directory_keeps_or_deletes_and_loses_nothing() {
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let want = expected(12, true);
    scenario(
        &f,
        &want,
        &|| {
            for b in &want {
                kafka_put(&dlt, b);
            }
        },
        &|| kafka::waiting(&f),
    );
}

// ------------------------------------------------------------------------------ Pub/Sub

#[test]
fn pubsub_archive_to_a_directory_keeps_or_deletes_and_loses_nothing() {
    use base64::Engine;
    let Some(f) = support::pubsub::Fixture::new() else {
        return;
    };
    f.write_example(|t| f.example(t));
    assert_eq!(f.apply(&[]).code, 0, "apply");
    f.assert_empty_plan("pubsub archive");
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let want = expected(12, true);
    // Counts the dead-letter subscription without taking anything: pulls until no new
    // message comes for 2 s, then hands every one back.
    let count = || -> u64 {
        let mut seen = std::collections::BTreeSet::new();
        let mut acks = Vec::new();
        let mut quiet = std::time::Instant::now();
        while quiet.elapsed() < Duration::from_secs(2) {
            for m in f.rest.pull(&dl_sub, 100) {
                if seen.insert(
                    m["message"]["messageId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                ) {
                    quiet = std::time::Instant::now();
                }
                acks.push(m["ackId"].as_str().unwrap_or_default().to_owned());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for a in &acks {
            f.rest.nack(&dl_sub, a);
        }
        seen.len() as u64
    };
    scenario(
        &f,
        &want,
        &|| {
            for b in &want {
                f.rest.ok(
                    reqwest::Method::POST,
                    &format!("topics/{dlt}:publish"),
                    serde_json::json!({"messages": [{
                        "data": base64::engine::general_purpose::STANDARD.encode(b),
                        "attributes": {"dlq-error-class": "poison"}
                    }]}),
                );
            }
        },
        &count,
    );
}
