//! Issue 35: `redrive --from-archive` brings every archived id back once, live on every
//! backend. The archive is written with the format's own functions (`Record::of`,
//! `object_bytes`, a `Manifest` with sha256s): two runs that share ids (a crash and its
//! rerun), and one object no manifest lists. A dry run publishes nothing; `--class` and
//! `--limit` select; a tampered object is refused, naming it, with nothing published; the
//! full replay brings each id back exactly once into the main queue or topic, read back by
//! id with the third-party client: body and headers byte-exact, `dlq-redrive-count` 1.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use dlqctl::archive::{
    FORMAT_VERSION, MANIFEST, MANIFEST_KIND, Manifest, ObjectEntry, Origin, Record, object_bytes,
    object_name, sha256_hex,
};
use dlqctl::status::Message;
use dlqctl::status::envelope::Read;
use support::redrive::redrive;
use support::workspace::Workspace;
use support::{block, rabbit, sqs};

const IDS: usize = 10;

fn id(i: usize) -> String {
    format!("m-{i:02}")
}

fn class(i: usize) -> &'static str {
    if i.is_multiple_of(2) {
        "poison"
    } else {
        "transient"
    }
}

/// Archived message `i`: body `body-<id>`, headers `dlq-error-class` and `h: v-<id>`.
fn record(target: &str, backend: &str, from: &str, i: usize) -> Record {
    let body = format!("body-{}", id(i)).into_bytes();
    let m = Message {
        id: id(i),
        headers: vec![
            ("dlq-error-class".into(), class(i).into()),
            ("h".into(), format!("v-{}", id(i))),
        ],
        body_len: body.len() as u64,
        body,
        ..Message::default()
    };
    let e = Read {
        class: class(i).into(),
        raw_class: None,
        message: None,
        source: None,
        attempts: None,
        dead_lettered_ms: None,
        first_failure_ms: None,
    };
    let o = Origin {
        channel: "",
        target,
        backend,
        from,
        role: "dead-letter",
    };
    Record::of(&m, &e, &o, 0)
}

/// Writes `<dir>/<channel>/<run>/…`: run r1 holds ids 0..6, its rerun r2 ids 4..10 (4 and 5
/// twice) and an object it never listed.
fn write_archive(dir: &Path, channel: &str, target: &str, backend: &str, from: &str) {
    let put = |run: &str, n: u32, ids: std::ops::Range<usize>| -> ObjectEntry {
        let records: Vec<Record> = ids
            .map(|i| {
                let mut r = record(target, backend, from, i);
                r.channel = channel.into();
                r
            })
            .collect();
        let bytes = object_bytes(&records);
        let name = object_name(n, false);
        let folder = dir.join(channel).join(run);
        std::fs::create_dir_all(&folder).expect("folder");
        std::fs::write(folder.join(&name), &bytes).expect("object");
        ObjectEntry {
            name,
            records: records.len() as u64,
            bytes: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
            compression: None,
            hmac_sha256: None,
        }
    };
    let manifest = |run: &str, objects: Vec<ObjectEntry>| {
        let m = Manifest {
            format_version: FORMAT_VERSION,
            kind: MANIFEST_KIND.into(),
            channel: channel.into(),
            target: target.into(),
            backend: backend.into(),
            from: from.into(),
            role: "dead-letter".into(),
            run: run.into(),
            selection: serde_json::json!({}),
            delete: true,
            // Both runs killed: r2's second object written and never listed (pending).
            complete: false,
            records: objects.iter().map(|o| o.records).sum(),
            objects,
            started_at: "2026-12-02T00:00:00Z".into(),
            ended_at: None,
            operator: "test".into(),
            identity: None,
            reason: None,
            hmac_sha256: None,
        };
        std::fs::write(
            dir.join(channel).join(run).join(MANIFEST),
            serde_json::to_vec(&m).expect("json"),
        )
        .expect("manifest");
    };
    let one = put("20261202T000000Z-1", 1, 0..6);
    manifest("20261202T000000Z-1", vec![one]);
    let two = put("20261202T000100Z-2", 1, 4..IDS);
    put("20261202T000100Z-2", 2, 99..100);
    manifest("20261202T000100Z-2", vec![two]);
}

/// What each backend supplies: its workspace, target, backend and DLQ names, and the
/// messages read back from the main queue or topic (`want` expected): body and headers.
/// Messages read back: body and headers (values as text).
type Taken = Vec<(String, BTreeMap<String, String>)>;

struct Backend<'a> {
    ws: &'a Workspace,
    target: &'a str,
    backend: &'a str,
    dlq: &'a str,
    take_main: Box<dyn Fn(usize) -> Taken + 'a>,
}

fn scenario(b: &Backend<'_>) {
    let plan = b.ws.plan();
    assert_eq!(plan.code, 0, "apply, then an empty plan: {}", plan.stderr);
    let dir = tempfile::tempdir().expect("tempdir");
    write_archive(dir.path(), &b.ws.channel, b.target, b.backend, b.dlq);
    let arch = dir.path().to_str().expect("utf-8 path");

    // RabbitMQ gives no id: ids 4 and 5, identical in everything in r1 (killed with
    // `--delete`) and r2, may be one message or two: each replayed (issue 52, H1).
    let rabbit = b.backend == "rabbitmq";
    let ids = if rabbit { IDS + 2 } else { IDS };

    // A manifest deleted (issue 52, L3): refused, naming the object it listed, nothing
    // published; read with --read-unlisted.
    let gone = tempfile::tempdir().expect("tempdir");
    write_archive(gone.path(), &b.ws.channel, b.target, b.backend, b.dlq);
    let run1 = gone.path().join(&b.ws.channel).join("20261202T000000Z-1");
    std::fs::remove_file(run1.join(MANIFEST)).expect("remove the manifest");
    let gone_at = gone.path().to_str().expect("utf-8");
    let out = b.ws.run(&[
        "redrive",
        b.ws.channel.as_str(),
        "channel.yaml",
        "--yes",
        "--from-archive",
        gone_at,
    ]);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("20261202T000000Z-1/batch-00001.jsonl")
            && out.stderr.contains("--read-unlisted"),
        "{}",
        out.stderr
    );
    assert!((b.take_main)(0).is_empty(), "nothing published");
    let (code, doc, err) = redrive(
        b.ws,
        &["--from-archive", gone_at, "--dry-run", "--read-unlisted"],
    );
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["wouldMove"]["count"], ids, "{doc:#}");
    assert_eq!(doc["archive"]["unlisted"], 1, "{doc:#}");
    assert_eq!(doc["archive"]["unlistedRead"], true, "{doc:#}");

    // Dry run: what would go, nothing published.
    let (code, doc, err) = redrive(b.ws, &["--from-archive", arch, "--dry-run"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["from"], "archive", "{doc:#}");
    assert_eq!(doc["wouldMove"]["count"], ids, "{doc:#}");
    assert_eq!(
        doc["archive"]["duplicates"],
        if rabbit { 0 } else { 2 },
        "{doc:#}"
    );
    assert_eq!(
        doc["archive"]["possiblyDuplicated"],
        if rabbit { 2 } else { 0 },
        "{doc:#}"
    );
    assert_eq!(doc["archive"]["unlisted"], 0, "{doc:#}");
    assert_eq!(doc["archive"]["pending"], 1, "{doc:#}");
    assert_eq!(doc["archive"]["read"], 12, "{doc:#}");
    assert!((b.take_main)(0).is_empty(), "a dry run publishes nothing");

    // A tampered object: refused, naming it, nothing published.
    let bad = tempfile::tempdir().expect("tempdir");
    write_archive(bad.path(), &b.ws.channel, b.target, b.backend, b.dlq);
    let object = bad
        .path()
        .join(&b.ws.channel)
        .join("20261202T000000Z-1")
        .join("batch-00001.jsonl");
    let text = std::fs::read_to_string(&object).expect("object");
    std::fs::write(&object, text.replacen("body-m-01", "body-m-0X", 1)).expect("tamper");
    let out = b.ws.run(&[
        "redrive",
        b.ws.channel.as_str(),
        "channel.yaml",
        "--yes",
        "--from-archive",
        bad.path().to_str().expect("utf-8"),
    ]);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("batch-00001.jsonl") && out.stderr.contains("sha256"),
        "{}",
        out.stderr
    );
    assert!(
        (b.take_main)(0).is_empty(),
        "nothing published from a tampered archive"
    );

    // Every id back once, byte-exact (on RabbitMQ, 4 and 5 twice).
    let (code, doc, err) = redrive(b.ws, &["--from-archive", arch, "--yes"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["moved"], ids, "{doc:#}");
    assert_eq!(doc["movedIds"]["count"], ids, "{doc:#}");
    let back = (b.take_main)(ids);
    let mut bodies: Vec<&str> = back.iter().map(|(body, _)| body.as_str()).collect();
    bodies.sort_unstable();
    let mut want: Vec<String> = (0..IDS).map(|i| format!("body-{}", id(i))).collect();
    if rabbit {
        want.extend([4, 5].map(|i| format!("body-{}", id(i))));
        want.sort();
    }
    assert_eq!(bodies, want, "every id once");
    for (body, headers) in &back {
        let id = body.trim_start_matches("body-");
        assert_eq!(
            headers.get("h").map(String::as_str),
            Some(format!("v-{id}").as_str())
        );
        assert_eq!(
            headers.get("dlq-redrive-count").map(String::as_str),
            Some("1"),
            "{headers:?}"
        );
    }

    // A replay killed part-way (its ledger never finished: what it set out to publish is
    // unsure) stops the next one, naming the ledger, until --replay-again (issue 52, M10).
    let ledgers = dir.path().join(&b.ws.channel).join("replays");
    let ledger = std::fs::read_dir(&ledgers)
        .expect("the replay's ledger")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a ledger");
    let mut l: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&ledger).expect("ledger")).expect("json");
    assert_eq!(l["kind"], "dlqctl/archive-replay", "{l:#}");
    assert_eq!(l["replayed"].as_array().map(Vec::len), Some(ids), "{l:#}");
    l["unsure"] = l["replayed"].take();
    l["replayed"] = serde_json::json!([]);
    l["complete"] = false.into();
    std::fs::write(&ledger, serde_json::to_vec(&l).expect("json")).expect("ledger");
    let out = b.ws.run(&[
        "redrive",
        b.ws.channel.as_str(),
        "channel.yaml",
        "--yes",
        "--from-archive",
        arch,
    ]);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("may or may not have been published")
            && out.stderr.contains(&ledger.display().to_string())
            && out.stderr.contains("--replay-again"),
        "{}",
        out.stderr
    );
    assert!((b.take_main)(0).is_empty(), "nothing published");

    // --class and --limit select.
    let (code, doc, err) = redrive(
        b.ws,
        &[
            "--from-archive",
            arch,
            "--yes",
            "--class",
            "poison",
            "--limit",
            "2",
            // Replayed above: published again only when asked (issue 52, M10).
            "--replay-again",
        ],
    );
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["moved"], 2, "{doc:#}");
    // m-05, transient, twice on RabbitMQ.
    assert_eq!(doc["notSelected"], if rabbit { 6 } else { 5 }, "{doc:#}");
    let back = (b.take_main)(2);
    let mut bodies: Vec<&str> = back.iter().map(|(body, _)| body.as_str()).collect();
    bodies.sort_unstable();
    assert_eq!(bodies, ["body-m-00", "body-m-02"]);
}

#[test]
fn rabbitmq_replay_from_an_archive_brings_every_id_back_once() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    scenario(&Backend {
        ws: &f,
        target: "local-rabbitmq",
        backend: "rabbitmq",
        dlq: &dlq,
        take_main: Box::new(|_| text(block(rabbit::take_all(&main)))),
    });
}

#[test]
fn sqs_replay_from_an_archive_brings_every_id_back_once() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    scenario(&Backend {
        ws: &f,
        target: "local-sqs",
        backend: "sqs",
        dlq: &dlq,
        take_main: Box::new(|n| aws.take(&main, n)),
    });
}

/// Bodies as text, for the comparisons here (every body of this archive is text).
fn text(taken: Vec<(Vec<u8>, BTreeMap<String, String>)>) -> Taken {
    taken
        .into_iter()
        .map(|(b, h)| (String::from_utf8_lossy(&b).into_owned(), h))
        .collect()
}

#[test]
fn kafka_replay_from_an_archive_brings_every_id_back_once() {
    let Some(f) = support::kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let main = support::kafka::Tail::new(&f.main(), &format!("{}-reader", f.channel));
    scenario(&Backend {
        ws: &f,
        target: "local-kafka",
        backend: "kafka",
        dlq: &dlt,
        take_main: Box::new(|want| text(main.take(want))),
    });
}

#[test]
fn pubsub_replay_from_an_archive_brings_every_id_back_once() {
    let Some(f) = support::pubsub::Fixture::new() else {
        return;
    };
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    let sub = f.subscription();
    let dl_sub = format!("{}-dlt-sub", f.channel);
    scenario(&Backend {
        ws: &f,
        target: "local-pubsub",
        backend: "pubsub",
        dlq: &dl_sub,
        take_main: Box::new(|want| text(f.rest.take(&sub, want))),
    });
}

/// Writes one completed `--delete` run of `n` records (ids 0..n) into `<dir>/<channel>/`.
fn write_one_run(dir: &Path, channel: &str, target: &str, backend: &str, from: &str, n: usize) {
    write_run(dir, channel, target, backend, from, n, true);
}

/// [`write_one_run`], a `--delete` run or a copy (`delete: false`).
fn write_run(
    dir: &Path,
    channel: &str,
    target: &str,
    backend: &str,
    from: &str,
    n: usize,
    delete: bool,
) {
    let run = "20261203T000000Z-1";
    let records: Vec<Record> = (0..n)
        .map(|i| {
            let mut r = record(target, backend, from, i);
            r.channel = channel.into();
            r
        })
        .collect();
    let bytes = object_bytes(&records);
    let name = object_name(1, false);
    let folder = dir.join(channel).join(run);
    std::fs::create_dir_all(&folder).expect("folder");
    std::fs::write(folder.join(&name), &bytes).expect("object");
    let m = Manifest {
        format_version: FORMAT_VERSION,
        kind: MANIFEST_KIND.into(),
        channel: channel.into(),
        target: target.into(),
        backend: backend.into(),
        from: from.into(),
        role: "dead-letter".into(),
        run: run.into(),
        selection: serde_json::json!({}),
        delete,
        complete: true,
        records: n as u64,
        objects: vec![ObjectEntry {
            name,
            records: n as u64,
            bytes: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
            compression: None,
            hmac_sha256: None,
        }],
        started_at: "2026-12-03T00:00:00Z".into(),
        ended_at: Some("2026-12-03T00:01:00Z".into()),
        operator: "test".into(),
        identity: None,
        reason: None,
        hmac_sha256: None,
    };
    std::fs::write(folder.join(MANIFEST), serde_json::to_vec(&m).expect("json")).expect("manifest");
}

/// Issue 52 fixes, F1: two replays of one archive started together never both publish
/// (each reads the ledgers before the other wrote its own): counted by body with lapin,
/// the main queue holds each record at most once, and what the replays report moved is
/// what is there.
#[test]
fn rabbitmq_two_replays_started_together_never_both_publish() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    two_at_once(&f, &|_, dir| dir.to_str().expect("utf-8 path").to_owned());
}

/// [`rabbitmq_two_replays_started_together_never_both_publish`] from an S3 archive (moto).
#[test]
fn rabbitmq_two_replays_from_s3_started_together_never_both_publish() {
    let Some(mut f) = rabbit::Fixture::applied() else {
        return;
    };
    f.set_env("AWS_ENDPOINT_URL_S3", &support::aws_endpoint());
    let config = block(
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(support::aws_endpoint())
            .load(),
    );
    let c = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    let bucket = format!("{}-replays", f.channel).to_lowercase();
    block(c.create_bucket().bucket(&bucket).send()).expect("CreateBucket");
    two_at_once(&f, &|round, dir| {
        // The folder's files uploaded under `s3://bucket/r<round>/`.
        for e in walk(dir) {
            let key = format!(
                "r{round}/{}",
                e.strip_prefix(dir).expect("under").to_str().expect("utf-8")
            );
            let body = std::fs::read(&e).expect("file");
            block(
                c.put_object()
                    .bucket(&bucket)
                    .key(key)
                    .body(body.into())
                    .send(),
            )
            .expect("PutObject");
        }
        format!("s3://{bucket}/r{round}")
    });
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir").filter_map(Result::ok) {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Two replays of one archive (`place` makes it from a folder, per round) started at once,
/// three times: each record at most once in the main queue, counted by body with lapin.
fn two_at_once(f: &rabbit::Fixture, place: &dyn Fn(usize, &Path) -> String) {
    let [main, _, dlq, _] = f.names();
    const N: usize = 2_000;
    for round in 0..3 {
        let dir = tempfile::tempdir().expect("tempdir");
        write_one_run(
            dir.path(),
            &f.channel,
            "local-rabbitmq",
            "rabbitmq",
            &dlq,
            N,
        );
        let arch = place(round, dir.path());
        let arch = arch.as_str();
        let args = [
            "redrive",
            f.channel.as_str(),
            "channel.yaml",
            "--yes",
            "--format",
            "json",
            "--from-archive",
            arch,
        ];
        let a = f.command(&args).output_async();
        let b = f.command(&args).output_async();
        let (a, b) = (
            a.wait_with_output().expect("a"),
            b.wait_with_output().expect("b"),
        );
        let moved = |o: &std::process::Output| -> u64 {
            serde_json::from_slice::<serde_json::Value>(&o.stdout)
                .ok()
                .and_then(|d| d["moved"].as_u64())
                .unwrap_or(0)
        };
        let back = text(block(rabbit::take_all(&main)));
        let mut count: BTreeMap<String, u64> = BTreeMap::new();
        for (body, _) in &back {
            *count.entry(body.clone()).or_insert(0) += 1;
        }
        let errs = format!(
            "round {round}\nA {:?}: {}\nB {:?}: {}",
            a.status.code(),
            String::from_utf8_lossy(&a.stderr),
            b.status.code(),
            String::from_utf8_lossy(&b.stderr)
        );
        assert!(
            count.values().all(|n| *n == 1),
            "{} copies of {} records: {errs}",
            back.len(),
            count.len()
        );
        assert_eq!(back.len() as u64, moved(&a) + moved(&b), "{errs}");
        // One that refused says why, naming the other's ledger.
        for o in [&a, &b] {
            if o.status.code() != Some(0) {
                let e = String::from_utf8_lossy(&o.stderr);
                assert!(
                    e.contains("replays/") && e.contains("may still be running"),
                    "{errs}"
                );
            }
        }
    }
}

/// [`std::process::Command`] started with its output piped.
trait OutputAsync {
    fn output_async(&mut self) -> std::process::Child;
}

impl OutputAsync for std::process::Command {
    fn output_async(&mut self) -> std::process::Child {
        self.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("dlqctl starts")
    }
}

/// The one ledger a replay wrote into `dir` for `channel`.
fn only_ledger(dir: &Path, channel: &str) -> std::path::PathBuf {
    let all: Vec<_> = std::fs::read_dir(dir.join(channel).join("replays"))
        .expect("ledgers")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(all.len(), 1, "{all:?}");
    all[0].clone()
}

/// Issue 52 fixes, F4 and F2: a record replayed to another destination is published to
/// this one (counted `replayedElsewhere`); one replayed before and published again with
/// `--replay-again` is counted possibly duplicated (headline and JSON).
#[test]
fn rabbitmq_replay_to_another_destination_then_again_is_counted() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    const N: usize = 12;
    let dir = tempfile::tempdir().expect("tempdir");
    write_one_run(
        dir.path(),
        &f.channel,
        "local-rabbitmq",
        "rabbitmq",
        &dlq,
        N,
    );
    let arch = dir.path().to_str().expect("utf-8 path");
    let (code, doc, err) = redrive(&f, &["--from-archive", arch, "--yes"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(text(block(rabbit::take_all(&main))).len(), N);
    // As if that replay had gone to another destination (`--to X`).
    let ledger = only_ledger(dir.path(), &f.channel);
    let mut l: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&ledger).expect("ledger")).expect("json");
    l["to"] = "somewhere-else".into();
    std::fs::write(&ledger, serde_json::to_vec(&l).expect("json")).expect("ledger");
    let (code, doc, err) = redrive(&f, &["--from-archive", arch, "--yes"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(
        doc["moved"], N,
        "F4: published to this destination: {doc:#}"
    );
    assert_eq!(doc["archive"]["replayedElsewhere"], N, "{doc:#}");
    assert_eq!(doc["possiblyDuplicated"], 0, "{doc:#}");
    assert_eq!(text(block(rabbit::take_all(&main))).len(), N);
    // Again, to the same destination: each one possibly duplicated, and said so.
    let (code, doc, err) = redrive(&f, &["--from-archive", arch, "--yes", "--replay-again"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["moved"], N, "{doc:#}");
    assert_eq!(doc["possiblyDuplicated"], N, "F2: {doc:#}");
    assert_eq!(doc["archive"]["replayedAgain"], N, "{doc:#}");
    assert_eq!(text(block(rabbit::take_all(&main))).len(), N);
    let out = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--yes",
        "--replay-again",
        "--from-archive",
        arch,
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!("{N} possibly duplicated")),
        "{}",
        out.stdout
    );
    assert_eq!(text(block(rabbit::take_all(&main))).len(), N);
}

/// Issue 52 fixes, F5: a copy archive (`delete: false`: the messages never left the DLQ)
/// replays with every record counted possibly duplicated, and the report says so.
#[test]
fn rabbitmq_replay_of_a_copy_archive_counts_possibly_duplicated() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    const N: usize = 7;
    let dir = tempfile::tempdir().expect("tempdir");
    write_run(
        dir.path(),
        &f.channel,
        "local-rabbitmq",
        "rabbitmq",
        &dlq,
        N,
        false,
    );
    let arch = dir.path().to_str().expect("utf-8 path");
    let (code, doc, err) = redrive(&f, &["--from-archive", arch, "--yes"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["moved"], N, "{doc:#}");
    assert_eq!(doc["possiblyDuplicated"], N, "F5: {doc:#}");
    assert_eq!(doc["archive"]["fromCopy"], N, "{doc:#}");
    assert_eq!(text(block(rabbit::take_all(&main))).len(), N);
}

/// Issue 52, second review F8 (and M12's redrive): a `dlx: arguments` channel with retry
/// queues, as consumers seed it, has a main queue with no dead-letter exchange by design
/// (its consumer publishes failures to the retry queues itself). A replay to the main queue
/// and a redrive `--to source` were refused, blaming a displaced policy this mode never has;
/// both move now, counted by body with lapin, nothing left in the DLQ.
#[test]
fn rabbitmq_replay_and_redrive_into_a_seed_shaped_main_queue_are_not_refused() {
    let Some(f) = rabbit::Fixture::new() else {
        return;
    };
    f.write_example(|t| t.replace("dlx: policy", "dlx: arguments"));
    f.apply(&[]).ok();
    f.assert_empty_plan("arguments mode");
    let [main, _, dlq, _] = f.names();
    const N: usize = 5;
    let dir = tempfile::tempdir().expect("tempdir");
    write_one_run(
        dir.path(),
        &f.channel,
        "local-rabbitmq",
        "rabbitmq",
        &dlq,
        N,
    );
    let arch = dir.path().to_str().expect("utf-8 path");
    let (code, doc, err) = redrive(&f, &["--from-archive", arch, "--yes"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["moved"], N, "{doc:#}");
    let mut bodies: Vec<String> = text(block(rabbit::take_all(&main)))
        .into_iter()
        .map(|(b, _)| b)
        .collect();
    bodies.sort_unstable();
    let want: Vec<String> = (0..N).map(|i| format!("body-{}", id(i))).collect();
    assert_eq!(bodies, want, "{doc:#}");
    // A redrive to the main queue, from the DLQ.
    rabbit::fill(&dlq, N, |i| {
        let h = rabbit::table(&[("dlq-error-class", rabbit::text("poison"))]);
        (
            format!("dead-{i}").into_bytes(),
            lapin::BasicProperties::default().with_headers(h),
        )
    });
    rabbit::wait_for_messages(&dlq, N as u64);
    let (code, doc, err) = redrive(&f, &["--yes"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["moved"], N, "{doc:#}");
    let mut bodies: Vec<String> = text(block(rabbit::take_all(&main)))
        .into_iter()
        .map(|(b, _)| b)
        .collect();
    bodies.sort_unstable();
    let want: Vec<String> = (0..N).map(|i| format!("dead-{i}")).collect();
    assert_eq!(bodies, want, "{doc:#}");
    assert_eq!(rabbit::count(&dlq), 0, "{doc:#}");
}
