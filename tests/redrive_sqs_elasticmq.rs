//! `dlqctl redrive --native` against a real SQS move-task implementation (issue 33):
//! ElasticMQ 1.6.14 (tests/elasticmq/pom.xml, its jars from Maven Central checked against
//! tests/elasticmq/jars.sha256), which implements StartMessageMoveTask,
//! ListMessageMoveTasks and CancelMessageMoveTask where moto 5.2.5 answers HTTP 500
//! (tests/redrive_sqs_task.rs covers the rest against recorded responses).
//!
//! ElasticMQ has no CloudWatch, so dlqctl cannot `apply` there (it reads the channel's alarms):
//! the queues are created as an operator would, with the SDK, in the shape dlqctl makes them.
//! Each test starts its own ElasticMQ on a free loopback port and stops it at the end.

mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::Value;
use support::block;

const VERSION: &str = "1.6.14";

fn cache() -> PathBuf {
    std::env::var_os("DLQCTL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(support::var("HOME", "/root")).join(".cache/dlqctl"))
}

/// The pinned list: (sha256, jar file name).
fn pinned() -> Vec<(String, String)> {
    std::fs::read_to_string(support::root().join("tests/elasticmq/jars.sha256"))
        .expect("tests/elasticmq/jars.sha256")
        .lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(s, n)| (s.to_owned(), n.to_owned()))
        .collect()
}

fn sha256(path: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    format!(
        "{:x}",
        Sha256::digest(std::fs::read(path).expect("read jar"))
    )
}

/// ElasticMQ's jars, fetched once with mvn into the cache and checked against the pinned
/// sha256 list (the classpath is exactly that list).
fn classpath() -> &'static str {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| {
        let home = cache().join(format!("elasticmq-{VERSION}"));
        let libs = home.join("libs");
        std::fs::create_dir_all(&home).expect("cache dir");
        let lock = std::fs::File::create(home.join("fetch.lock")).expect("lock file");
        lock.lock().expect("lock");
        let jars = pinned();
        let ok = |dir: &std::path::Path| {
            jars.iter()
                .all(|(sum, name)| dir.join(name).exists() && sha256(&dir.join(name)) == *sum)
        };
        if !ok(&libs) {
            let tmp = home.join("libs.tmp");
            let _ = std::fs::remove_dir_all(&tmp);
            let repo = std::env::var_os("DLQCTL_MAVEN_REPO")
                .map(PathBuf::from)
                .unwrap_or_else(|| cache().join("m2"));
            let out = Command::new("mvn")
                .args(["-B", "-q", "-f"])
                .arg(support::root().join("tests/elasticmq/pom.xml"))
                .arg(format!("-Dmaven.repo.local={}", repo.display()))
                .args(["dependency:copy-dependencies", "-DincludeScope=runtime"])
                .arg(format!("-DoutputDirectory={}", tmp.display()))
                .output()
                .expect("mvn runs");
            assert!(
                out.status.success(),
                "mvn dependency:copy-dependencies (ElasticMQ {VERSION}):\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                ok(&tmp),
                "ElasticMQ's jars do not match tests/elasticmq/jars.sha256"
            );
            let _ = std::fs::remove_dir_all(&libs);
            std::fs::rename(&tmp, &libs).expect("libs");
        }
        jars.iter()
            .map(|(_, n)| libs.join(n).display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    })
}

/// A running ElasticMQ on 127.0.0.1; stopped on drop.
struct ElasticMq {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl ElasticMq {
    fn start() -> Option<ElasticMq> {
        let java = Command::new("java")
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success());
        let mvn = Command::new("mvn")
            .arg("-v")
            .output()
            .is_ok_and(|o| o.status.success());
        if !support::require("java and mvn (ElasticMQ)", java && mvn) {
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let dir = tempfile::tempdir().expect("tempdir");
        let conf = dir.path().join("elasticmq.conf");
        std::fs::write(
            &conf,
            format!(
                "include classpath(\"application.conf\")\nnode-address {{ protocol = http, host = \"127.0.0.1\", port = {port}, context-path = \"\" }}\nrest-sqs {{ enabled = true, bind-port = {port}, bind-hostname = \"127.0.0.1\", sqs-limits = strict }}\nrest-stats {{ enabled = false }}\ngenerate-node-address = false\naws {{ region = us-east-1, accountId = 000000000000 }}\n"
            ),
        )
        .expect("conf");
        let log = dir.path().join("elasticmq.log");
        let file = std::fs::File::create(&log).expect("log");
        let child = Command::new("java")
            .args(["-Xmx256m", "-XX:TieredStopAtLevel=1"])
            .arg(format!("-Dconfig.file={}", conf.display()))
            .args(["-cp", classpath(), "org.elasticmq.server.Main"])
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("java starts");
        let mut e = ElasticMq {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("started in") {
                return Some(e);
            }
            assert!(
                e.child.try_wait().expect("try_wait").is_none() && Instant::now() < deadline,
                "ElasticMQ did not start:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// An SDK client, as a third party would use it.
    fn sqs(&self) -> aws_sdk_sqs::Client {
        let creds =
            aws_sdk_sqs::config::Credentials::new("testing", "testing", None, None, "tests");
        aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::Config::builder()
                .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
                .region(aws_sdk_sqs::config::Region::new("us-east-1"))
                .endpoint_url(&self.url)
                .credentials_provider(creds)
                .build(),
        )
    }
}

impl Drop for ElasticMq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The channel `movetask` as dlqctl makes it: `movetask` dead-lettering into `movetask-dlq`
/// after 3 receives; `n` messages `m00`… waiting in the DLQ. Returns (main URL, DLQ URL).
fn queues(sqs: &aws_sdk_sqs::Client, n: usize) -> (String, String) {
    let dlq = block(sqs.create_queue().queue_name("movetask-dlq").send())
        .expect("CreateQueue")
        .queue_url()
        .unwrap_or_default()
        .to_owned();
    let arn = block(
        sqs.get_queue_attributes()
            .queue_url(&dlq)
            .attribute_names(QueueAttributeName::QueueArn)
            .send(),
    )
    .expect("GetQueueAttributes")
    .attributes()
    .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
    .expect("QueueArn");
    let policy = serde_json::json!({"deadLetterTargetArn": arn, "maxReceiveCount": "3"});
    let main = block(
        sqs.create_queue()
            .queue_name("movetask")
            .attributes(QueueAttributeName::RedrivePolicy, policy.to_string())
            .send(),
    )
    .expect("CreateQueue")
    .queue_url()
    .unwrap_or_default()
    .to_owned();
    for i in 0..n {
        block(
            sqs.send_message()
                .queue_url(&dlq)
                .message_body(format!("m{i:02}"))
                .send(),
        )
        .expect("SendMessage");
    }
    (main, dlq)
}

/// Receives and deletes everything in `url` (bounded): the bodies.
fn drain(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..20 {
        let got = block(
            sqs.receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .visibility_timeout(60)
                .send(),
        )
        .expect("ReceiveMessage");
        if got.messages().is_empty() {
            break;
        }
        for m in got.messages() {
            out.push(m.body().unwrap_or_default().to_owned());
            block(
                sqs.delete_message()
                    .queue_url(url)
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .send(),
            )
            .expect("DeleteMessage");
        }
    }
    out
}

fn workspace(url: &str) -> tempfile::TempDir {
    support::sqs::movetask_workspace("elasticmq", url)
}

fn redrive(dir: &std::path::Path, extra: &[&str]) -> support::Output {
    support::output(&mut support::sqs::movetask_redrive(dir, extra))
}

#[test]
fn a_whole_dlq_goes_back_through_elasticmqs_move_task_and_every_message_arrives_once() {
    let Some(e) = ElasticMq::start() else { return };
    let sqs = e.sqs();
    let (main, dlq) = queues(&sqs, 25);
    let ws = workspace(&e.url);
    let out = redrive(ws.path(), &["--native", "--rate", "50"]);
    out.ok();
    let report: Value = serde_json::from_str(&out.stdout).expect("JSON report");
    assert_eq!(report["movedBy"], "sqs:StartMessageMoveTask", "{report}");
    assert_eq!(report["moved"], 25, "{report}");
    assert_eq!(report["leftInDeadLetter"], 0, "{report}");
    // Every one, once, by body; nothing left behind.
    let bodies = drain(&sqs, &main);
    let unique: BTreeSet<&String> = bodies.iter().collect();
    assert_eq!(bodies.len(), 25, "{bodies:?}");
    assert_eq!(
        unique,
        (0..25)
            .map(|i| format!("m{i:02}"))
            .collect::<Vec<_>>()
            .iter()
            .collect(),
    );
    assert!(drain(&sqs, &dlq).is_empty());
    // The lock tag was given back.
    let tags = block(sqs.list_queue_tags().queue_url(&dlq).send()).expect("ListQueueTags");
    assert!(
        tags.tags().is_none_or(|t| t.is_empty()),
        "{:?}",
        tags.tags()
    );
}

#[test]
fn a_move_task_started_elsewhere_refuses_the_redrive_naming_it() {
    let Some(e) = ElasticMq::start() else { return };
    let sqs = e.sqs();
    let (main, dlq) = queues(&sqs, 30);
    let arn = |url: &str| {
        block(
            sqs.get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::QueueArn)
                .send(),
        )
        .expect("GetQueueAttributes")
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .expect("QueueArn")
    };
    // Someone else's task, at one message a second: still running while dlqctl asks.
    let task = block(
        sqs.start_message_move_task()
            .source_arn(arn(&dlq))
            .destination_arn(arn(&main))
            .max_number_of_messages_per_second(1)
            .send(),
    )
    .expect("StartMessageMoveTask");
    let handle = task.task_handle().unwrap_or_default().to_owned();
    let ws = workspace(&e.url);
    for extra in [&["--native"][..], &[][..]] {
        let out = redrive(ws.path(), extra);
        assert_eq!(out.code, 1, "{extra:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("SQS move task") && out.stderr.contains(&handle),
            "{extra:?}: {}",
            out.stderr
        );
    }
    let _ = block(sqs.cancel_message_move_task().task_handle(&handle).send());
}
