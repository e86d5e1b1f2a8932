//! Issue 52, findings whose fix landed with no test seen failing against code without it (the
//! fourteenth session's closing note): M9, L2, L3, M2, L11, and what the hostile review of the
//! fixes found in jq (F6) and secret masking (F8). Each test here is live on RabbitMQ through
//! the real binary, as an operator meets the finding, and each was run with only its fix
//! reverted in the current code and seen failing (the failure is named in each test's doc),
//! then passing with the fix.
//!
//! Messages are counted by id with lapin, archives are read as files: nothing lost in any
//! test.

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lapin::BasicProperties;
use lapin::options::{BasicAckOptions, BasicGetOptions, ConfirmSelectOptions};
use serde_json::Value;
use support::redrive::redrive;
use support::{Output, block, output, rabbit};

/// The orders example without its exchange: the main queue is reached through the default
/// exchange (as tests/redrive_loop.rs runs its failing downstream).
fn without_exchange(spec: String) -> String {
    spec.replace(
        "    exchange: {name: \"{channel}.exchange\", type: direct, routingKeys: [process]}\n",
        "",
    )
}

/// Puts `n` dead letters with ids `{prefix}{i:02}` and a body of `size` bytes (at least the
/// JSON `{"i":N}`), each with an error class.
fn fill(dlq: &str, prefix: &str, n: usize, size: usize) {
    rabbit::fill(dlq, n, |i| {
        let h = rabbit::table(&[("dlq-error-class", rabbit::text("poison"))]);
        let p = BasicProperties::default()
            .with_message_id(format!("{prefix}{i:02}").into())
            .with_headers(h);
        let mut body = format!(r#"{{"i":{i},"pad":""#).into_bytes();
        // Bytes that do not compress and are text: a cheap counter's digits.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ i as u64;
        while body.len() + 2 < size {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            body.push(b'a' + (x % 26) as u8);
        }
        body.extend_from_slice(b"\"}");
        (body, p)
    });
}

/// Every message of a queue, taken: how many times each `message_id` was there.
fn take_ids(queue: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for id in block(rabbit::take_each(queue, |d| {
        d.properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default()
    })) {
        *out.entry(id).or_default() += 1;
    }
    out
}

/// The ids of every record in the archive objects (`batch-*.jsonl`) under `root`, listed by
/// a manifest or not: how many times each.
fn archived_ids(root: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("batch-") && name.ends_with(".jsonl")) {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).expect("an object");
        for line in text.lines() {
            let r: Value = serde_json::from_str(line).expect("a record");
            *out.entry(r["id"].as_str().expect("id").to_owned())
                .or_default() += 1;
        }
    }
    out
}

/// Every path under `root` (itself included) whose name ends with `.dlqctl-tmp`.
fn temporaries(root: &Path) -> Vec<String> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| e.path().display().to_string())
        .filter(|p| p.ends_with(".dlqctl-tmp"))
        .collect()
}

/// `command` run with umask 000 (an operator's shell, a container's default): whatever mode
/// a file gets then is the one the program asked for.
fn with_umask_000(mut command: std::process::Command) -> Output {
    use std::os::unix::process::CommandExt;
    // SAFETY: umask is async-signal-safe and touches only the child's own state.
    unsafe {
        command.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    output(&mut command)
}

/// M9: an archive holds whole payloads (card numbers, Authorization headers); before the fix
/// its objects and manifests were created 0644 (0666 under umask 000) and its folders 0755
/// (0777), readable by every local user. Under umask 000, `archive --delete` then `redrive
/// --from-archive` (which writes its ledger into the archive): every folder is 0700, every
/// file 0600, and every message is back in the main queue once.
///
/// Without the fix (the folders made by `create_dir_all`, the files by `File::create`):
/// "…/arch: mode 777, want 700".
#[test]
fn rabbitmq_archive_and_replay_files_are_owner_only_even_under_umask_000() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "m9-", 5, 64);
    rabbit::wait_for_messages(&dlq, 5);
    let root = f.path().join("arch");
    let to = root.to_str().expect("utf-8").to_owned();
    let ch = f.channel.clone();
    let archived = with_umask_000(f.command(&[
        "archive",
        ch.as_str(),
        "channel.yaml",
        "--to",
        to.as_str(),
        "--delete",
        "--yes",
        "--format",
        "json",
    ]));
    assert_eq!(archived.code, 0, "{}\n{}", archived.stdout, archived.stderr);
    assert_eq!(rabbit::count(&dlq), 0, "{}", archived.stdout);
    let replayed = with_umask_000(f.command(&[
        "redrive",
        ch.as_str(),
        "channel.yaml",
        "--from-archive",
        to.as_str(),
        "--yes",
        "--format",
        "json",
    ]));
    assert_eq!(replayed.code, 0, "{}\n{}", replayed.stdout, replayed.stderr);
    use std::os::unix::fs::PermissionsExt;
    let (mut folders, mut files) = (0, 0);
    for e in walkdir::WalkDir::new(&root)
        .into_iter()
        .filter_map(Result::ok)
    {
        let mode = e.metadata().expect("stat").permissions().mode() & 0o777;
        let want = if e.file_type().is_dir() {
            folders += 1;
            0o700
        } else {
            files += 1;
            0o600
        };
        assert_eq!(
            mode,
            want,
            "{}: mode {mode:o}, want {want:o}",
            e.path().display()
        );
    }
    // The archive root, the channel's folder, a run's folder, the replays' folder; a batch,
    // a manifest, a ledger at least.
    assert!(
        folders >= 4 && files >= 3,
        "{folders} folders, {files} files"
    );
    let back = take_ids(&main);
    assert_eq!(back.len(), 5, "{back:?}");
    assert!(back.values().all(|n| *n == 1), "{back:?}");
}

/// L2: an archive run that hits a full disk (a tmpfs with 48 KiB left) failed before the fix
/// leaving its `*.dlqctl-tmp` file, which kept the disk full, so the next run failed at once.
/// Now: the run fails naming the disk, no temporary file is left, nothing is lost (every
/// message is in the DLQ or in an archived object), and once the space is freed (the filler
/// removed) the next run archives everything; a stale temporary file a killed writer left
/// is removed by that run.
///
/// Without the fix (no removal on failure, no cleaning of stale ones): "left
/// [\"…/small/arch/orders.…/20261208T012438Z-…/batch-00001.jsonl.dlqctl-tmp\"]", after
/// "cannot write 105720 bytes: No space left on device (os error 28); nothing of this batch
/// left `orders.….dlq`".
#[test]
fn rabbitmq_an_archive_that_fills_the_disk_leaves_no_temporary_file_and_the_next_run_archives_all()
{
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    let mnt = f.path().join("small");
    std::fs::create_dir(&mnt).expect("mkdir");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        // Mounting needs root (or CAP_SYS_ADMIN): the unit test in src/archive/store.rs
        // skips its mount the same way.
        #[allow(clippy::print_stderr)] // a loud skip, as support::require's
        {
            eprintln!(
                "\n*** SKIPPED: a 256 KiB tmpfs could not be mounted (mount needs root) ***\n"
            );
        }
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&mnt);
    // 208 KiB of the 256 taken: 48 KiB left, less than the 12 messages of 8 KiB need.
    std::fs::write(mnt.join("filler"), vec![0u8; 208 * 1024]).expect("filler");
    fill(&dlq, "l2-", 12, 8 * 1024);
    rabbit::wait_for_messages(&dlq, 12);
    let root = mnt.join("arch");
    let to = root.to_str().expect("utf-8").to_owned();
    let ch = f.channel.clone();
    let args = [
        "archive",
        ch.as_str(),
        "channel.yaml",
        "--to",
        to.as_str(),
        "--delete",
        "--yes",
        "--format",
        "json",
    ];
    let full = f.run(&args);
    let left = temporaries(&mnt);
    assert_ne!(full.code, 0, "the disk is full: {}", full.stdout);
    assert!(
        full.stderr.contains("No space left") || full.stdout.contains("No space left"),
        "{}\n{}",
        full.stdout,
        full.stderr
    );
    assert!(left.is_empty(), "left {left:?}\n{}", full.stderr);
    // Nothing lost: each message in the DLQ or archived (a message may be both: archived,
    // then its delete not reached).
    let in_archive = archived_ids(&root);
    let in_dlq = rabbit::count(&dlq);
    assert!(
        in_dlq + in_archive.len() as u64 >= 12,
        "{in_dlq} in the DLQ, archived {in_archive:?}"
    );

    // A killed writer's temporary file, old enough to be stale (20 minutes).
    let run = walkdir::WalkDir::new(&root)
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.file_name() == "manifest.json")
        .and_then(|e| e.path().parent().map(Path::to_path_buf))
        .unwrap_or_else(|| root.join(&ch).join("20261201T000000Z-killed"));
    std::fs::create_dir_all(&run).expect("mkdir");
    let stale = run.join("batch-00099.jsonl.dlqctl-tmp");
    std::fs::write(&stale, b"half a record").expect("write");
    let old = std::time::SystemTime::now() - Duration::from_secs(1200);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .and_then(|f| f.set_modified(old))
        .expect("set its time");

    std::fs::remove_file(mnt.join("filler")).expect("free the space");
    let next = f.run(&args);
    assert_eq!(next.code, 0, "{}\n{}", next.stdout, next.stderr);
    assert_eq!(rabbit::count(&dlq), 0, "{}", next.stdout);
    let in_archive = archived_ids(&root);
    assert_eq!(in_archive.len(), 12, "every id archived: {in_archive:?}");
    let left = temporaries(&mnt);
    assert!(left.is_empty(), "left {left:?}");
}

/// L3: a manifest emptied (its objects' list cleared, as a rollback or a bad edit leaves it)
/// or deleted: before the fix the records of the objects it no longer listed were silently
/// not replayed (exit 0, "1 unlisted object(s) not read"), though `--delete` had taken them
/// out of the DLQ. Now the replay is refused, naming the object and `--read-unlisted`, and
/// publishes nothing; with `--read-unlisted` every record is replayed, each once.
///
/// Without the fix (the refusal of unlisted objects removed): "emptied, [\"--yes\"]: exit 0 …
/// nothing was refused", the run saying "Redrive complete: 0 moved … 1 object(s) no manifest
/// lists not read".
#[test]
fn rabbitmq_a_replay_of_an_archive_whose_manifest_was_emptied_or_deleted_is_refused() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "l3-", 6, 64);
    rabbit::wait_for_messages(&dlq, 6);
    let root = f.path().join("arch");
    let to = root.to_str().expect("utf-8").to_owned();
    let ch = f.channel.clone();
    let out = f.run(&[
        "archive",
        ch.as_str(),
        "channel.yaml",
        "--to",
        to.as_str(),
        "--delete",
        "--yes",
    ]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(rabbit::count(&dlq), 0);
    let manifest = walkdir::WalkDir::new(&root)
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.file_name() == "manifest.json")
        .expect("a manifest")
        .path()
        .to_path_buf();
    let whole = std::fs::read(&manifest).expect("the manifest");
    let mut m: Value = serde_json::from_slice(&whole).expect("json");
    let objects: Vec<String> = m["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| o["name"].as_str().expect("name").to_owned())
        .collect();
    assert!(!objects.is_empty(), "{m:#}");
    m["objects"] = Value::Array(Vec::new());
    m["records"] = Value::from(0);
    let emptied = serde_json::to_vec(&m).expect("json");

    for (case, edit) in [("emptied", Some(emptied)), ("deleted", None)] {
        match &edit {
            Some(bytes) => std::fs::write(&manifest, bytes).expect("write"),
            None => std::fs::remove_file(&manifest).expect("remove"),
        }
        for extra in [&["--yes"][..], &["--dry-run"][..]] {
            let mut args = vec![
                "redrive",
                ch.as_str(),
                "channel.yaml",
                "--from-archive",
                to.as_str(),
            ];
            args.extend_from_slice(extra);
            let o = f.run(&args);
            assert_ne!(
                o.code, 0,
                "{case}, {extra:?}: exit 0 … nothing was refused\n{}\n{}",
                o.stdout, o.stderr
            );
            assert!(
                o.stderr.contains(&objects[0]) && o.stderr.contains("--read-unlisted"),
                "{case}, {extra:?}: {}",
                o.stderr
            );
            assert_eq!(rabbit::count(&main), 0, "{case}: nothing published");
        }
        let (code, doc, err) = redrive(
            &f,
            &[
                "--from-archive",
                to.as_str(),
                "--dry-run",
                "--read-unlisted",
            ],
        );
        assert_eq!(code, 0, "{case}: {doc:#}\n{err}");
        assert_eq!(doc["wouldMove"]["count"], 6, "{case}: {doc:#}");
        std::fs::write(&manifest, &whole).expect("restore");
    }
    // With the manifest back, everything is replayed once: nothing was lost on the way.
    let (code, doc, err) = redrive(&f, &["--from-archive", to.as_str(), "--yes"]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    let back = take_ids(&main);
    assert_eq!(back.len(), 6, "{back:?}");
    assert!(back.values().all(|n| *n == 1), "{back:?}");
}

/// A health endpoint on 127.0.0.1 that answers every request with `status` (e.g. `503
/// Service Unavailable`) until dropped.
struct Gate {
    base: String,
    stop: Arc<AtomicBool>,
}

impl Gate {
    fn start(status: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&stop);
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(300);
            while !done.load(Ordering::SeqCst) && Instant::now() < deadline {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Gate { base, stop }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The application whose every message fails: it takes each message of `queue` and
/// dead-letters it itself (publishes it to `dlq` as it came, then acknowledges it), until
/// `stop` or 60 s.
fn failing_app(queue: String, dlq: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        block(async move {
            let conn = rabbit::amqp().await;
            let ch = conn.create_channel().await.expect("channel");
            ch.confirm_select(ConfirmSelectOptions::default())
                .await
                .expect("confirms");
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
                let got = ch
                    .basic_get(queue.as_str().into(), BasicGetOptions::default())
                    .await
                    .expect("basic.get");
                let Some(m) = got else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let d = m.delivery;
                rabbit::publish_on(&ch, "", &dlq, &d.data, d.properties.clone()).await;
                d.acker.ack(BasicAckOptions::default()).await.expect("ack");
            }
            let _ = conn.close(200, "done".into()).await;
        });
    })
}

/// The first line of a human report.
fn headline(o: &Output) -> String {
    o.stdout.lines().next().unwrap_or_default().to_owned()
}

/// M2: the human report said "Redrive complete" for a run a gate stopped (exit 75,
/// "complete: 0 moved"), one `--verify-for` stopped (exit 1; without `--batch` the redead
/// not mentioned), and one `--max-duration` stopped. Now each headline says why it stopped,
/// never "complete", and the counts are what lapin counts.
///
/// Without the fix (the headline's old `complete` rule): "Redrive complete: 0 moved from
/// orders.….dlq to orders.….process; …" above "not healthy: --health-check … answered 503".
#[test]
fn rabbitmq_a_run_a_gate_verify_for_or_max_duration_stopped_never_says_complete() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let ch = f.channel.clone();
    fill(&dlq, "m2-", 6, 64);
    rabbit::wait_for_messages(&dlq, 6);

    // A gate that answers 503: nothing moved, exit 75.
    let gate = Gate::start("503 Service Unavailable");
    let url = format!("{}/health", gate.base);
    let o = f.run(&[
        "redrive",
        ch.as_str(),
        "channel.yaml",
        "--yes",
        "--health-check",
        url.as_str(),
    ]);
    assert_eq!(o.code, 75, "{}\n{}", o.stdout, o.stderr);
    let line = headline(&o);
    assert!(
        !line.contains("complete") && line.contains("stopped (not healthy)"),
        "{line}\n{}",
        o.stdout
    );
    assert_eq!(rabbit::count(&dlq), 6);
    drop(gate);

    // --max-duration: one message per batch, a pause longer than the bound: one batch.
    let o = f.run(&[
        "redrive",
        ch.as_str(),
        "channel.yaml",
        "--yes",
        "--batch",
        "1",
        "--until-empty",
        "--pause",
        "1500ms",
        "--max-duration",
        "1s",
    ]);
    let line = headline(&o);
    assert!(
        !line.contains("complete") && line.contains("--max-duration"),
        "{line}\n{}\n{}",
        o.stdout,
        o.stderr
    );
    assert!(line.contains(": 1 moved"), "{line}");
    let moved = take_ids(&main);
    assert_eq!(moved.len(), 1, "{moved:?}");

    // --verify-for without --batch: every copy fails again and is back in the DLQ.
    let stop = Arc::new(AtomicBool::new(false));
    let app = failing_app(main.clone(), dlq.clone(), Arc::clone(&stop));
    let o = f.run(&[
        "redrive",
        ch.as_str(),
        "channel.yaml",
        "--yes",
        "--verify-for",
        "3s",
        "--max-redead",
        "20%",
    ]);
    stop.store(true, Ordering::SeqCst);
    app.join().expect("the application");
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let line = headline(&o);
    assert!(
        !line.contains("complete") && line.contains("stopped (too many came back)"),
        "{line}\n{}",
        o.stdout
    );
    assert!(o.stdout.contains("came back: "), "{}", o.stdout);
    // Nothing lost: the 5 moved are back in the DLQ with the one moved before (its copy
    // consumed above), each once.
    let in_dlq = take_ids(&dlq);
    assert_eq!(in_dlq.len(), 5, "{in_dlq:?}");
    assert!(in_dlq.values().all(|n| *n == 1), "{in_dlq:?}");
    assert_eq!(rabbit::count(&main), 0);
}

/// L11: an `--until-empty` run without `--max-duration` ran as long as a producer filled the
/// DLQ (the docs say each run is bounded). The bound is an hour, too long to wait for here:
/// the engine's bound is checked (an `--until-empty` run without `--max-duration` gets one
/// hour, one with it its own, a run of one batch none needed), and a live run while a
/// producer keeps filling the DLQ says, in its report, what bounds it (3600 s; the human line
/// "for 1h 0m at most"), while the same run with `--max-duration 2s` stops there, the producer
/// still going, every message counted by id.
///
/// Without the fix (`Batches::bound` is `max_duration`): "left: None, right: Some(3600s)";
/// the live part alone (this file's lib fixed, the binary not): the report's
/// `maxDurationSeconds` "left: Null, right: 3600".
#[test]
fn rabbitmq_until_empty_without_max_duration_is_bounded_by_an_hour() {
    use dlqctl::engine::redrive::{Batches, DEFAULT_MAX_DURATION};
    assert_eq!(DEFAULT_MAX_DURATION, Duration::from_secs(3600));
    let until_empty = Batches {
        size: Some(5),
        until_empty: true,
        ..Batches::default()
    };
    assert_eq!(until_empty.bound(), Some(Duration::from_secs(3600)));
    let own = Batches {
        max_duration: Some(Duration::from_secs(60)),
        ..until_empty.clone()
    };
    assert_eq!(own.bound(), Some(Duration::from_secs(60)));
    let one = Batches {
        size: Some(5),
        ..Batches::default()
    };
    assert_eq!(one.bound(), None);

    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    // A producer filling the DLQ, 10 messages every 100 ms, until stopped (60 s at most).
    let stop = Arc::new(AtomicBool::new(false));
    let (into, halt) = (dlq.clone(), Arc::clone(&stop));
    let producer = std::thread::spawn(move || {
        let mut put = 0usize;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !halt.load(Ordering::SeqCst) && Instant::now() < deadline {
            let from = put;
            rabbit::fill(&into, 10, |i| {
                let p =
                    BasicProperties::default().with_message_id(format!("l11-{}", from + i).into());
                (b"{}".to_vec(), p)
            });
            put += 10;
            std::thread::sleep(Duration::from_millis(100));
        }
        put
    });
    rabbit::wait_for(&dlq, "messages", "reported 10 messages or more", |q| {
        q["messages"].as_u64().is_some_and(|n| n >= 10)
    });
    // Bounded by its own --max-duration: stops there while the producer goes on.
    let started = Instant::now();
    let (code, doc, err) = redrive(
        &f,
        &[
            "--yes",
            "--batch",
            "5",
            "--until-empty",
            "--pause",
            "100ms",
            "--max-duration",
            "2s",
        ],
    );
    let took = started.elapsed();
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["batches"]["stoppedBy"], "max-duration", "{doc:#}");
    assert_eq!(doc["batches"]["maxDurationSeconds"], 2, "{doc:#}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    let moved = doc["moved"].as_u64().unwrap_or(0);
    // Without --max-duration: the report names the hour. A --limit ends this one at once.
    let (code, doc, err) = redrive(
        &f,
        &["--yes", "--batch", "5", "--until-empty", "--limit", "5"],
    );
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["batches"]["maxDurationSeconds"], 3600, "{doc:#}");
    let moved = moved + doc["moved"].as_u64().unwrap_or(0);
    let human = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--yes",
        "--batch",
        "5",
        "--until-empty",
        "--limit",
        "5",
    ]);
    assert_eq!(human.code, 0, "{}\n{}", human.stdout, human.stderr);
    assert!(
        human.stdout.contains("until empty for 1h 0m at most"),
        "{}",
        human.stdout
    );
    let moved = moved + 5;
    stop.store(true, Ordering::SeqCst);
    let put = producer.join().expect("the producer");
    // Counted by id: every message put is in the main queue (moved) or the DLQ, once.
    let in_main = take_ids(&main);
    let in_dlq = take_ids(&dlq);
    assert_eq!(in_main.len() as u64, moved, "{in_main:?}");
    let mut all = in_main.clone();
    for (id, n) in &in_dlq {
        *all.entry(id.clone()).or_default() += n;
    }
    assert_eq!(all.len(), put, "every message, once");
    assert!(all.values().all(|n| *n == 1), "{all:?}");
}

/// hx1 F6: `--where` or `--transform` with `import "/etc/passwd" as $p` (or `include`)
/// compiled, then every jq worker crashed on the first message. Now it is refused before
/// anything is read: exit 64, one line naming the flag and the word; nothing moved,
/// archived or published; `status --where` and `archive --where` the same.
///
/// Without the fix (the compile-time refusal removed): "left: 1, right: 64", the run saying
/// "Redrive incomplete: 0 moved …; 3 not selected … --where failed on 3 messages (…: --where's
/// worker ended without an answer (exit status: 1))". With the refusal but before the usage
/// exit (src/cli.rs `UsageError`): the refusal's one line, and "left: 1, right: 64".
#[test]
fn rabbitmq_import_and_include_in_where_or_transform_are_usage_errors_naming_the_flag() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "f6-", 3, 64);
    rabbit::wait_for_messages(&dlq, 3);
    let ch = f.channel.clone();
    let arch = f.path().join("arch");
    let to = arch.to_str().expect("utf-8").to_owned();
    let programs = [
        (r#"import "/etc/passwd" as $p; .body == $p"#, "import"),
        (r#"include "/etc/passwd"; true"#, "include"),
    ];
    let transforms = [
        (r#"import "/etc/passwd" as $p; .body.note = $p"#, "import"),
        (r#"include "/etc/passwd"; .body.note = "x""#, "include"),
    ];
    let mut runs: Vec<(Vec<&str>, &str, &str)> = Vec::new();
    for (p, word) in programs {
        for extra in [&["--yes"][..], &["--dry-run"][..]] {
            let mut a = vec!["redrive", ch.as_str(), "channel.yaml", "--where", p];
            a.extend_from_slice(extra);
            runs.push((a, "--where", word));
        }
        runs.push((
            vec!["status", "channel.yaml", "--where", p],
            "--where",
            word,
        ));
        runs.push((
            vec![
                "archive",
                ch.as_str(),
                "channel.yaml",
                "--to",
                to.as_str(),
                "--delete",
                "--yes",
                "--where",
                p,
            ],
            "--where",
            word,
        ));
    }
    for (p, word) in transforms {
        for extra in [&["--yes"][..], &["--dry-run"][..]] {
            let mut a = vec!["redrive", ch.as_str(), "channel.yaml", "--transform", p];
            a.extend_from_slice(extra);
            runs.push((a, "--transform", word));
        }
    }
    for (args, flag, word) in runs {
        let o = f.run(&args);
        assert_eq!(o.code, 64, "{args:?}: {}\n{}", o.stdout, o.stderr);
        let err = o.stderr.trim();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains(flag) && err.contains(&format!("`{word}` is not allowed")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("root:"), "{args:?}: {err}");
        assert!(!o.stdout.contains("root:"), "{args:?}: {}", o.stdout);
    }
    assert!(!arch.exists(), "nothing archived");
    assert_eq!(rabbit::count(&main), 0, "nothing moved");
    let left = take_ids(&dlq);
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(left.values().all(|n| *n == 1), "{left:?}");
}

/// hx1 F8: secret shapes status and dry runs still printed in clear after M8: headers
/// `X-Auth-Key`, `Ocp-Apim-Subscription-Key`, `x-functions-key`, `session`; in an error
/// message a Python dict's repr (`{'password': …}`) and `Authorization: Token …`; a JSON
/// body field whose name is written with escapes (`"pass\u0077ord"`); an XML body's
/// `<cvv>` and `<password>`; a health gate's `?code=` and `?key=` (said in the dry run's
/// answer of the gate). Live on RabbitMQ: `status --format json` (and human), `redrive
/// --dry-run` (JSON and human, with the gate): none of them shown.
///
/// Without the fix (src/secrets.rs and the gate URL's masking as before, 01862de^):
/// "[\"status\", \"channel.yaml\", \"--format\", \"json\"]: `x-auth-key-0f1e2d3c4b` shown", every
/// shape above in clear in that report.
#[test]
fn rabbitmq_status_and_dry_runs_hide_keys_sessions_reprs_token_schemes_xml_and_gate_codes() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    const AUTH_KEY: &str = "x-auth-key-0f1e2d3c4b";
    const APIM: &str = "apim-subscr-9a8b7c6d5e";
    const FUNCTIONS: &str = "functions-key-5f6e7d8c";
    const SESSION: &str = "sess-abcdef0123456789";
    const PY_PASSWORD: &str = "py-hunter2-secret";
    const TOKEN: &str = "tok9f8e7d6c5b4a";
    const ESCAPED: &str = "esc-pa55word-value";
    const XML_CVV: &str = "4821";
    const XML_PASSWORD: &str = "xml-pa55word-value";
    const GATE_CODE: &str = "gatecode0123456789";
    const GATE_KEY: &str = "gatekey9876543210";
    let error = format!(
        "login failed for {{'user': 'al', 'password': '{PY_PASSWORD}'}} (upstream 401, Authorization: Token {TOKEN})"
    );
    let headers = rabbit::table(&[
        ("dlq-error-class", rabbit::text("auth")),
        ("dlq-error-message", rabbit::text(&error)),
        ("X-Auth-Key", rabbit::text(AUTH_KEY)),
        ("Ocp-Apim-Subscription-Key", rabbit::text(APIM)),
        ("x-functions-key", rabbit::text(FUNCTIONS)),
        ("session", rabbit::text(SESSION)),
    ]);
    let json_body = format!(r#"{{"order":7,"pass\u0077ord":"{ESCAPED}"}}"#);
    let xml_body = format!(
        "<pay><order>8</order><cvv>{XML_CVV}</cvv><password>{XML_PASSWORD}</password></pay>"
    );
    for (i, body) in [json_body, xml_body].iter().enumerate() {
        block(rabbit::publish_with(
            "",
            &dlq,
            body.as_bytes(),
            BasicProperties::default()
                .with_message_id(format!("f8-{i}").into())
                .with_headers(headers.clone()),
        ));
    }
    rabbit::wait_for_messages(&dlq, 2);
    let gate = Gate::start("503 Service Unavailable");
    let url = format!(
        "{}/health?code={GATE_CODE}&key={GATE_KEY}&deep=1",
        gate.base
    );
    let ch = f.channel.clone();
    let mut views: Vec<Vec<&str>> = Vec::new();
    for format in ["json", "human"] {
        views.push(vec!["status", "channel.yaml", "--format", format]);
        views.push(vec![
            "redrive",
            ch.as_str(),
            "channel.yaml",
            "--dry-run",
            "--format",
            format,
            "--health-check",
            url.as_str(),
        ]);
    }
    let secrets = [
        AUTH_KEY,
        APIM,
        FUNCTIONS,
        SESSION,
        PY_PASSWORD,
        TOKEN,
        ESCAPED,
        XML_PASSWORD,
        GATE_CODE,
        GATE_KEY,
    ];
    for args in views {
        let o = f.run(&args);
        // status: 2 when a DLQ holds messages; a dry run whose gate is not healthy: 75.
        assert!(
            [0, 2, 75].contains(&o.code),
            "{args:?}: {}{}",
            o.stdout,
            o.stderr
        );
        let shown = format!("{}\n{}", o.stdout, o.stderr);
        for s in secrets {
            assert!(!shown.contains(s), "{args:?}: `{s}` shown:\n{shown}");
        }
        assert!(
            !shown.contains(&format!("<cvv>{XML_CVV}</cvv>")),
            "{args:?}: the XML cvv shown:\n{shown}"
        );
        if args[0] == "redrive" {
            // The gate was asked and said so, its secrets masked.
            assert!(shown.contains("code=***&key=***"), "{args:?}:\n{shown}");
        }
        if args.contains(&"json") && args[0] == "status" {
            assert!(shown.contains("«redacted"), "{args:?}\n{shown}");
        }
    }
    // Nothing left the DLQ.
    assert_eq!(rabbit::count(&dlq), 2);
}
