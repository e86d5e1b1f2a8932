//! ElasticMQ, a second SQS implementation for the tests that need what moto 5.2.5 lacks:
//! SQS message move tasks (StartMessageMoveTask, ListMessageMoveTasks; tests/redrive_sqs_elasticmq.rs)
//! and the `DeadLetterQueueSourceArn` system attribute on a message a redrive policy moved
//! (tests/redrive_failed_consumer.rs). Its jars come from Maven Central through mvn
//! (tests/elasticmq/pom.xml), checked against tests/elasticmq/jars.sha256; each test starts
//! its own server on a free loopback port and stops it on drop.
//!
//! ElasticMQ has no CloudWatch, so dlqctl cannot `apply` there (it reads the channel's
//! alarms): the queues are created as an operator would, with the SDK.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const VERSION: &str = "1.6.14";

fn cache() -> PathBuf {
    std::env::var_os("DLQCTL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(super::var("HOME", "/root")).join(".cache/dlqctl"))
}

/// The pinned list: (sha256, jar file name).
fn pinned() -> Vec<(String, String)> {
    std::fs::read_to_string(super::root().join("tests/elasticmq/jars.sha256"))
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
                .arg(super::root().join("tests/elasticmq/pom.xml"))
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
pub struct ElasticMq {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl ElasticMq {
    pub fn start() -> Option<ElasticMq> {
        let java = Command::new("java")
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success());
        let mvn = Command::new("mvn")
            .arg("-v")
            .output()
            .is_ok_and(|o| o.status.success());
        if !super::require("java and mvn (ElasticMQ)", java && mvn) {
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
    pub fn sqs(&self) -> aws_sdk_sqs::Client {
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

/// The channel `movetask` as dlqctl makes it (`support::sqs::movetask_workspace`): `movetask`
/// dead-lettering into `movetask-dlq` after 3 receives, both empty. Returns (main URL, DLQ URL).
pub fn movetask_queues(sqs: &aws_sdk_sqs::Client) -> (String, String) {
    use aws_sdk_sqs::types::QueueAttributeName;
    let dlq = super::block(sqs.create_queue().queue_name("movetask-dlq").send())
        .expect("CreateQueue")
        .queue_url()
        .unwrap_or_default()
        .to_owned();
    let arn = super::block(
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
    let main = super::block(
        sqs.create_queue()
            .queue_name("movetask")
            .attributes(QueueAttributeName::RedrivePolicy, policy.to_string())
            .send(),
    )
    .expect("CreateQueue")
    .queue_url()
    .unwrap_or_default()
    .to_owned();
    (main, dlq)
}

/// Receives and deletes everything in `url`: the bodies. Bounded: at most `receives` calls,
/// and it ends after three in a row that return nothing.
pub fn drain(sqs: &aws_sdk_sqs::Client, url: &str, receives: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut empty = 0;
    for _ in 0..receives {
        let got = super::block(
            sqs.receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .visibility_timeout(120)
                .send(),
        )
        .expect("ReceiveMessage");
        if got.messages().is_empty() {
            empty += 1;
            if empty == 3 {
                break;
            }
            continue;
        }
        empty = 0;
        for m in got.messages() {
            out.push(m.body().unwrap_or_default().to_owned());
            super::block(
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
