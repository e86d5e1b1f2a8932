//! Spring Kafka as the third-party client the Kafka tests trust (issue 33): the application in
//! tests/spring-kafka (Spring Boot with spring-kafka, pinned in its pom.xml) runs against the
//! topics dlqctl provisioned, with Spring's non-blocking retries
//! (`RetryTopicConfigurationBuilder`) and topic auto-creation off, so it uses exactly those
//! topics or none.
//!
//! The round trip: a record that always fails goes through every retry topic to the DLT with
//! Spring's exception headers (Spring Kafka 3.3: `kafka_exception-*`, measured here), `dlqctl
//! status` reads its class from them, and after the listener is switched to succeed `dlqctl
//! redrive` brings it back and the listener processes it once. With class rules (issue 34),
//! records failed with two exception classes (the listener's, inside Spring's wrapper) are
//! counted by the class their cause maps to, and `redrive --class` brings back exactly one of
//! them. The configuration docs/kafka.md shows starts on the topics of its spec. The negative
//! test: when the spec names the topics otherwise than Spring does, Spring refuses to start
//! (`missing-topics-fatal`); when a topic has fewer partitions than the main one, the
//! application's start-up check refuses.
//!
//! The jar is built once with `mvn package` into `$DLQCTL_CACHE/spring-kafka-<sha256 of the
//! project's files>/` (Maven's repo: `DLQCTL_MAVEN_REPO`, else `$DLQCTL_CACHE/m2`), under a
//! file lock, so a change to the project rebuilds it and nothing else does.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};
use support::kafka::Fixture;

fn cache() -> PathBuf {
    std::env::var_os("DLQCTL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(support::var("HOME", "/root")).join(".cache/dlqctl"))
}

/// The project's files, sorted, relative to tests/spring-kafka (build output excluded).
fn project_files(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir.join(rel))
        .expect("tests/spring-kafka")
        .map(|e| e.expect("entry").file_name())
        .collect();
    entries.sort();
    for name in entries {
        let r = rel.join(&name);
        if name == "target" {
            continue;
        }
        if dir.join(&r).is_dir() {
            project_files(dir, &r, out);
        } else {
            out.push(r);
        }
    }
}

/// The application's jar, built at most once per change of the project (see the module doc).
fn jar() -> &'static Path {
    static JAR: OnceLock<PathBuf> = OnceLock::new();
    JAR.get_or_init(|| {
        let project = support::root().join("tests/spring-kafka");
        let mut files = Vec::new();
        project_files(&project, Path::new(""), &mut files);
        let mut h = Sha256::new();
        for f in &files {
            h.update(f.to_string_lossy().as_bytes());
            h.update([0]);
            h.update(std::fs::read(project.join(f)).expect("project file"));
        }
        let sum = format!("{:x}", h.finalize());
        let home = cache().join(format!("spring-kafka-{}", &sum[..16]));
        let jar = home.join("build/target/app.jar");
        std::fs::create_dir_all(&home).expect("cache dir");
        let lock = std::fs::File::create(home.join("build.lock")).expect("lock file");
        lock.lock().expect("lock");
        if !jar.exists() {
            let build = home.join("build");
            let _ = std::fs::remove_dir_all(&build);
            for f in &files {
                let to = build.join(f);
                std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
                std::fs::copy(project.join(f), &to).expect("copy");
            }
            let repo = std::env::var_os("DLQCTL_MAVEN_REPO")
                .map(PathBuf::from)
                .unwrap_or_else(|| cache().join("m2"));
            let started = Instant::now();
            let out = Command::new("mvn")
                .args(["-B", "-q", "package", "-DskipTests"])
                .arg(format!("-Dmaven.repo.local={}", repo.display()))
                .current_dir(&build)
                .output()
                .expect("mvn runs");
            assert!(
                out.status.success() && jar.exists(),
                "mvn package in {}:\n{}{}",
                build.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            #[allow(clippy::print_stderr)]
            {
                eprintln!("built {} in {:.0?}", jar.display(), started.elapsed());
            }
        }
        jar
    })
}

/// Java 17+ and Maven, as `scripts/stack up` needs them for Apache Kafka.
fn tools() -> bool {
    let ok = |cmd: &str, arg: &str| {
        Command::new(cmd)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    support::require(
        "java and mvn (Spring Kafka's application)",
        ok("java", "-version") && ok("mvn", "-v"),
    )
}

/// The running application; killed on drop. Its output goes to `log`.
struct App {
    child: Child,
    log: PathBuf,
}

impl App {
    fn start(f: &Fixture, naming: &str, fail: &Path, out: &Path) -> App {
        let log = f.path().join("spring.log");
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new("java")
            .args(["-Xmx256m", "-XX:TieredStopAtLevel=1", "-jar"])
            .arg(jar())
            .arg(format!(
                "--spring.kafka.bootstrap-servers={}",
                support::kafka_bootstrap()
            ))
            .arg(format!("--dlqctl.topic={}", f.main()))
            .arg(format!("--dlqctl.naming={naming}"))
            .arg(format!("--dlqctl.fail-file={}", fail.display()))
            .arg(format!("--dlqctl.out-file={}", out.display()))
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("java starts");
        App { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (up to 120 s) until the application is ready, or has exited: its exit code then.
    /// Waits until the application is ready, failing the test when Spring refused the
    /// topics, and asserts it started on `topics` (its `DLQCTL-READY` line after the word).
    fn assert_ready_on(&mut self, topics: &str) {
        if let Err(code) = self.wait_ready() {
            panic!(
                "Spring refused the topics dlqctl made (exit {code:?}):\n{}",
                self.log()
            );
        }
        assert!(
            self.log().contains(&format!("DLQCTL-READY {topics}\n")),
            "{}",
            self.log()
        );
    }

    fn wait_ready(&mut self) -> Result<(), Option<i32>> {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if self.log().contains("DLQCTL-READY") {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Err(status.code());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "the Spring application was not ready within 120 s:\n{}",
            self.log()
        );
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A record as read back: key, body, headers (name, value as text).
type Record = (String, String, Vec<(String, String)>);

/// Every record of `topic` from the start, with its headers; read by assignment until
/// `want`, then 1 s more; bounded by 60 s.
fn records(topic: &str, want: usize) -> Vec<Record> {
    use rdkafka::Message;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Headers;
    let consumer: BaseConsumer = support::kafka::producer(&[
        ("group.id", "dlqctl-tests-reader"),
        ("enable.auto.commit", "false"),
    ]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .expect("tpl");
    }
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Instant::now();
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let text =
                    |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
                let headers = m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|x| (x.key.to_owned(), text(x.value)))
                            .collect()
                    })
                    .unwrap_or_default();
                out.push((text(m.key()), text(m.payload()), headers));
                last = Instant::now();
            }
            _ if out.len() >= want && last.elapsed() >= Duration::from_secs(1) => break,
            _ => {}
        }
    }
    out
}

fn processed(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn ready() -> bool {
    support::kafka::apache_kafka("Spring Kafka's round trip (run on Apache Kafka)") && tools()
}

#[test]
fn a_failing_record_goes_through_springs_retries_to_the_dlt_and_redrive_brings_it_back_once() {
    if !ready() {
        return;
    }
    let Some(f) = Fixture::applied() else { return };
    let main = f.main();
    let fail = f.path().join("fail");
    let out = f.path().join("processed.txt");
    std::fs::write(&fail, "").expect("fail switch");
    let mut app = App::start(&f, "inventory", &fail, &out);
    // Spring's topics are the spec's: main, one retry topic per delay, the DLT.
    app.assert_ready_on(&format!(
        "{main} (3) {main}-dlt (3) {main}-retry-1000 (3) {main}-retry-2000 (3) {main}-retry-4000 (3)"
    ));

    let producer: rdkafka::producer::FutureProducer = support::kafka::producer(&[]);
    support::block(
        producer.send(
            rdkafka::producer::FutureRecord::to(&main)
                .key("sku-7")
                .payload("sku-7: -3 in stock"),
            Duration::from_secs(10),
        ),
    )
    .map_err(|(e, _)| e)
    .expect("produce");

    // Attempts after 1, 2 and 4 s, then the DLT.
    let dlt = format!("{main}-dlt");
    let dead = records(&dlt, 1);
    assert_eq!(dead.len(), 1, "{dead:?}\n{}", app.log());
    let (key, body, headers) = &dead[0];
    assert_eq!(
        (key.as_str(), body.as_str()),
        ("sku-7", "sku-7: -3 in stock")
    );
    let header = |k: &str| {
        headers
            .iter()
            .find(|(h, _)| h == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {k} among {headers:?}"))
    };
    // Spring Kafka 3.3 (Spring Boot 3.5) writes `kafka_exception-*` and `kafka_original-*`;
    // its `KafkaHeaders.DLT_*` names (`kafka_dlt-exception-fqcn`, ...) are older aliases.
    assert_eq!(
        header("kafka_exception-cause-fqcn"),
        "dev.dlqctl.spring.StockRejected"
    );
    assert_eq!(
        header("kafka_exception-fqcn"),
        "org.springframework.kafka.listener.ListenerExecutionFailedException"
    );
    assert!(header("kafka_exception-message").contains("stock rejected: sku-7"));
    assert_eq!(header("kafka_original-topic"), main);
    for suffix in ["-retry-1000", "-retry-2000", "-retry-4000"] {
        let r = records(&format!("{main}{suffix}"), 1);
        assert_eq!(
            r.iter().map(|(k, _, _)| k.as_str()).collect::<Vec<_>>(),
            ["sku-7"],
            "{suffix}: one attempt"
        );
    }
    assert!(processed(&out).is_empty());

    let status = f.run(&["status", "channel.yaml", "--format", "json"]);
    status.ok();
    let doc: Value = serde_json::from_str(&status.stdout).expect("status json");
    let dl = &doc["channels"][0]["deadLetter"];
    assert_eq!(dl["depth"], 1, "{}", status.stdout);
    // The class from Spring's headers: the cause, not the listener's wrapper.
    assert_eq!(
        dl["byErrorClass"],
        serde_json::json!({"dev.dlqctl.spring.StockRejected": 1}),
        "{}",
        status.stdout
    );
    let sample = &dl["samples"][0];
    assert_eq!(sample["errorClass"], "dev.dlqctl.spring.StockRejected");
    assert!(
        sample["errorMessage"]
            .as_str()
            .is_some_and(|m| m.contains("stock rejected: sku-7")),
        "{sample}"
    );
    assert_eq!(sample["source"], main.as_str(), "{sample}");

    // The fix is deployed: the listener succeeds from now on.
    std::fs::remove_file(&fail).expect("switch");
    support::redrive::redrive_ok(&f, &["--yes"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while processed(&out).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
    }
    // The copy starts its attempts again: Spring's exception and retry headers are not
    // carried back (they would say it failed already), dlqctl's redrive count is.
    let copies: Vec<_> = records(&main, 2)
        .into_iter()
        .filter(|(_, _, h)| h.iter().any(|(k, _)| k == "dlq-redrive-count"))
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    let kept: Vec<&str> = copies[0].2.iter().map(|(k, _)| k.as_str()).collect();
    assert!(
        kept.iter()
            .all(|k| !k.contains("exception-") && !k.starts_with("retry_topic-")),
        "{kept:?}"
    );
    // Once: nothing else arrives in the next seconds (a retry copy would).
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        processed(&out),
        [format!("PROCESSED {main} sku-7 sku-7: -3 in stock")],
        "{}",
        app.log()
    );
    let status = f.run(&["status", "channel.yaml", "--format", "json", "--no-peek"]);
    let doc: Value = serde_json::from_str(&status.stdout).expect("status json");
    assert_eq!(
        doc["channels"][0]["deadLetter"]["depth"], 0,
        "{}",
        status.stdout
    );
}

#[test]
fn spring_refuses_to_start_on_topics_named_or_sized_otherwise_than_it_expects() {
    if !ready() {
        return;
    }
    // The spec names the retry topics by index; the application (as the example) by delay.
    let Some(f) = Fixture::applied_with(|t| t.replace("naming: spring", "naming: index")) else {
        return;
    };
    let main = f.main();
    let fail = f.path().join("fail");
    let out = f.path().join("processed.txt");
    let mut app = App::start(&f, "inventory", &fail, &out);
    let refused = app.wait_ready();
    let log = app.log();
    assert!(
        refused.is_err(),
        "Spring started on the wrong topics:\n{log}"
    );
    // Spring names the first of its topics it did not find.
    assert!(
        log.contains("is/are not present and missingTopicsFatal is true")
            && ["-retry-1000", "-retry-2000", "-retry-4000"]
                .iter()
                .any(|s| log.contains(&format!("[{main}{s}]"))),
        "{log}"
    );
    drop(app);

    // The names agree, but the DLT was made narrower by hand: the application's start-up
    // check refuses (Spring's DLT publisher keeps the failed record's partition).
    let g = Fixture::applied().expect("fixture");
    let dlt = format!("{}-dlt", g.main());
    support::kafka::delete_topics(&[&dlt]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while g.topics().contains_key(&dlt) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let recreate = Instant::now() + Duration::from_secs(30);
    loop {
        let made = std::panic::catch_unwind(|| support::kafka::create_topics(&[(&dlt, 1, &[])]));
        if made.is_ok() || Instant::now() > recreate {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut app = App::start(&g, "inventory", &fail, &out);
    let refused = app.wait_ready();
    let log = app.log();
    assert_eq!(refused, Err(Some(3)), "{log}");
    assert!(
        log.contains(&format!("topic {dlt} has 1 partitions, fewer than 3")),
        "{log}"
    );
    // And dlqctl's plan says the same about the DLT.
    let p = g.plan();
    p.exits(2);
    p.assert_stdout_contains(&format!("topic {dlt}"));
}

#[test]
fn the_spring_configuration_docs_kafka_md_shows_starts_on_the_topics_its_spec_makes() {
    if !ready() {
        return;
    }
    // docs/kafka.md: `.retryTopicSuffix(".retry").dltSuffix(".dlt").suffixTopicsWithIndexValues()
    // .exponentialBackoff(1_000, 2, 16_000).maxAttempts(5)` and its spec.
    let Some(f) = Fixture::applied_with(|t| support::kafka::with_index_naming(t, "")) else {
        return;
    };
    let main = f.main();
    let mut app = App::start(
        &f,
        "docs",
        &f.path().join("fail"),
        &f.path().join("processed.txt"),
    );
    app.assert_ready_on(&format!(
        "{main} (3) {main}.dlt (3) {main}.retry-0 (3) {main}.retry-1 (3) {main}.retry-2 (3) {main}.retry-3 (3)"
    ));
}

/// The inventory spec with Spring's envelope and class rules on the cause Spring records (the
/// listener's own exception, not Spring's ListenerExecutionFailedException around it).
fn with_class_rules(spec: String) -> String {
    spec.replace(
        "  deadLetter:\n",
        "  deadLetter:
    envelope: spring
    classes:
      - {name: transient_exhausted, errorClass: \"dev.dlqctl.*.DownstreamUnavailable\"}
      - {name: poison, errorClass: [\"dev.dlqctl.spring.Stock*\", \"*.SerializationException\"]}
",
    )
}

/// Issue 34: records the listener fails with two real exception classes (chosen by the
/// record) reach the DLT through Spring's retries; the spec's class rules name them by the
/// cause Spring recorded, `status` counts exactly those classes (the raw class beside each),
/// `redrive --class transient_exhausted` brings back exactly the transient ones (read back by
/// key from the main topic, processed once by the listener switched to succeed) and leaves
/// the poison ones, and a class the channel does not declare is refused.
#[test]
fn springs_dlt_records_are_classed_by_the_rules_and_redrive_class_moves_only_that_class() {
    if !ready() {
        return;
    }
    let Some(f) = Fixture::applied_with(with_class_rules) else {
        return;
    };
    let main = f.main();
    let fail = f.path().join("fail");
    let out = f.path().join("processed.txt");
    std::fs::write(&fail, "").expect("fail switch");
    let mut app = App::start(&f, "inventory", &fail, &out);
    app.assert_ready_on(&format!(
        "{main} (3) {main}-dlt (3) {main}-retry-1000 (3) {main}-retry-2000 (3) {main}-retry-4000 (3)"
    ));
    let sent = [
        ("t-1", "transient: warehouse api down"),
        ("p-1", "sku-1: -3 in stock"),
        ("t-2", "transient: timeout"),
        ("p-2", "sku-2: no such sku"),
        ("p-3", "sku-3: -1 in stock"),
    ];
    let producer: rdkafka::producer::FutureProducer = support::kafka::producer(&[]);
    for (key, value) in sent {
        support::block(
            producer.send(
                rdkafka::producer::FutureRecord::to(&main)
                    .key(key)
                    .payload(value),
                Duration::from_secs(10),
            ),
        )
        .map_err(|(e, _)| e)
        .expect("produce");
    }
    let transient = |key: &str| key.starts_with("t-");

    let dlt = format!("{main}-dlt");
    let mut dead = records(&dlt, sent.len());
    dead.sort();
    assert_eq!(dead.len(), sent.len(), "{dead:?}\n{}", app.log());
    for (key, _, headers) in &dead {
        let header = |k: &str| {
            headers
                .iter()
                .find(|(h, _)| h == k)
                .map(|(_, v)| v.as_str())
                .unwrap_or_else(|| panic!("{key}: no {k} among {headers:?}"))
        };
        // What Spring Kafka 3.3 writes on a DLT record after its retry topics: the
        // `kafka_exception-*` names, the wrapper and the cause; no `kafka_dlt-exception-*`.
        let cause = if transient(key) {
            "dev.dlqctl.spring.DownstreamUnavailable"
        } else {
            "dev.dlqctl.spring.StockRejected"
        };
        assert_eq!(header("kafka_exception-cause-fqcn"), cause, "{key}");
        assert_eq!(
            header("kafka_exception-fqcn"),
            "org.springframework.kafka.listener.ListenerExecutionFailedException",
            "{key}"
        );
        assert!(
            headers
                .iter()
                .all(|(h, _)| !h.starts_with("kafka_dlt-exception")),
            "{key}: {headers:?}"
        );
    }

    let status = f.run(&[
        "status",
        "channel.yaml",
        "--format",
        "json",
        "--samples",
        "5",
    ]);
    status.ok();
    let doc: Value = serde_json::from_str(&status.stdout).expect("status json");
    let dl = &doc["channels"][0]["deadLetter"];
    assert_eq!(dl["depth"], sent.len(), "{}", status.stdout);
    assert_eq!(
        dl["byErrorClass"],
        serde_json::json!({"transient_exhausted": 2, "poison": 3}),
        "{}",
        status.stdout
    );
    let samples = dl["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), sent.len(), "{dl}");
    for s in samples {
        let body = s["body"]["text"].as_str().unwrap_or_default();
        let (class, raw, said) = if body.starts_with("transient") {
            (
                "transient_exhausted",
                "dev.dlqctl.spring.DownstreamUnavailable",
                "downstream unavailable: ",
            )
        } else {
            (
                "poison",
                "dev.dlqctl.spring.StockRejected",
                "stock rejected: ",
            )
        };
        assert_eq!(s["errorClass"], class, "{s}");
        assert_eq!(s["rawErrorClass"], raw, "the cause, not the wrapper: {s}");
        assert!(
            s["errorMessage"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("{said}{body}"))),
            "{s}"
        );
        assert_eq!(s["source"], main.as_str(), "{s}");
    }

    // A class the channel does not declare: refused before anything moves.
    let refused = f.run(&[
        "redrive",
        &main,
        "channel.yaml",
        "--class",
        "nosuch",
        "--yes",
    ]);
    refused.exits(1);
    refused.assert_stderr_contains(&format!(
        "--class nosuch: channel `{main}` declares the classes `transient_exhausted`, `poison`"
    ));

    // The fix is deployed: the listener succeeds from now on; only the transient ones go back.
    std::fs::remove_file(&fail).expect("switch");
    let doc = support::redrive::redrive_ok(&f, &["--class", "transient_exhausted", "--yes"]);
    assert_eq!(doc["moved"], 2, "{doc}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while processed(&out).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
    }
    let mut copies: Vec<(String, String)> = records(&main, sent.len() + 2)
        .into_iter()
        .filter(|(_, _, h)| h.iter().any(|(k, _)| k == "dlq-redrive-count"))
        .map(|(k, v, _)| (k, v))
        .collect();
    copies.sort();
    assert_eq!(
        copies,
        [
            ("t-1".to_owned(), sent[0].1.to_owned()),
            ("t-2".to_owned(), sent[2].1.to_owned())
        ],
        "exactly the transient records, by key"
    );
    // Once each: nothing else arrives in the next seconds.
    std::thread::sleep(Duration::from_secs(5));
    let mut done = processed(&out);
    done.sort();
    assert_eq!(
        done,
        [
            format!("PROCESSED {main} t-1 {}", sent[0].1),
            format!("PROCESSED {main} t-2 {}", sent[2].1)
        ],
        "{}",
        app.log()
    );
    // The poison ones wait in the DLT.
    let status = f.run(&["status", "channel.yaml", "--format", "json"]);
    status.ok();
    let doc: Value = serde_json::from_str(&status.stdout).expect("status json");
    let dl = &doc["channels"][0]["deadLetter"];
    assert_eq!(
        dl["byErrorClass"],
        serde_json::json!({"poison": 3}),
        "{}",
        status.stdout
    );
    assert_eq!(dl["depth"], 3, "{}", status.stdout);
}
