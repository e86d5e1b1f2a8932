//! The corpus of real dead-letter topologies (issue 53): set-ups taken from public repositories,
//! one JSON file per case under `tests/corpus/`, each citing its source (repository, path,
//! commit) and holding the live objects exactly as that source declares them.
//!
//! Why a corpus: adoption is only as good as the shapes it was tried on. Hand-picked shapes
//! (tests/import.rs) show that a fix works; these show which estates teams really run can be
//! taken over, and keep saying so as the code changes.
//!
//! Each case is created live by a third-party client, never by dlqctl: RabbitMQ as a
//! definitions document posted to the management API in a vhost of its own (so names stay
//! exactly the source's), SQS with the AWS SDK against moto, Kafka topics with rdkafka's admin
//! client, Pub/Sub with reqwest on the emulator's REST API (SQS, Kafka and Pub/Sub names get a
//! random stem in front, the rest of the name as the source writes it). Then, through the real
//! binary: `import` (nothing left out) → `lint` (no error) → `plan --detailed-exitcode` (exit 0;
//! SQS after `apply --adopt`, which only tags) → `graph` and `status` (exit 0) → a hand-made
//! change to one live field, which the plan must show.
//!
//! A case marked `"expected": "gap"` is a shape dlqctl cannot adopt yet: the test asserts that
//! it still fails at the step and with the message the case records, so that the day a fix
//! lands the test fails with "now passes: flip it to pass" instead of staying silent.
//!
//! `DLQCTL_CORPUS=<case>` runs only the cases whose file name contains it.

mod support;

use std::path::{Path, PathBuf};

use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};
use support::pubsub::{PROJECT, Rest};
use support::rabbit::api;
use support::sqs::Aws;
use support::workspace::{Endpoints, Workspace};
use support::{Output, block};

/// One case file.
struct Case {
    file: String,
    doc: Value,
}

impl Case {
    fn backend(&self) -> &str {
        self.doc["backend"].as_str().unwrap_or_default()
    }

    fn expected_gap(&self) -> Option<(String, String)> {
        (self.doc["expected"] == "gap").then(|| {
            (
                self.doc["gap"]["step"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                self.doc["gap"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
    }
}

fn corpus_dir() -> PathBuf {
    support::root().join("tests").join("corpus")
}

/// Every case of `backend`, by file name, narrowed by `DLQCTL_CORPUS`.
fn cases(backend: &str) -> Vec<Case> {
    let only = std::env::var("DLQCTL_CORPUS").unwrap_or_default();
    let mut out: Vec<Case> = std::fs::read_dir(corpus_dir())
        .expect("tests/corpus/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("case file");
            let doc: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", p.display()));
            let file = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            Case { file, doc }
        })
        .filter(|c| c.backend() == backend && c.file.contains(&only))
        .collect();
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}

/// A topic's configs, as (key, value).
type Configs = Vec<(String, String)>;

/// What one step of a case gave: the step's name and its output, when it failed.
type Failure = (String, String);

fn text_of(o: &Output) -> String {
    format!("exit {}\n{}{}", o.code, o.stdout, o.stderr)
}

/// One case's world: a workspace whose targets file points at the local stack, scoped to a
/// random stem (RabbitMQ: a vhost of its own).
struct World {
    ws: Workspace,
    stem: String,
    backend: String,
    aws: Aws,
    rest: Rest,
}

impl World {
    /// `live`: the case's objects. RabbitMQ's ownership prefixes are their very names (the
    /// vhost is the case's own, and dlqctl refuses an empty prefix, which would claim all).
    fn new(backend: &str, live: &Value) -> World {
        let ws = Workspace::new("orders-rabbitmq.yaml", "corp", &Endpoints::default());
        let stem = ws.channel.clone();
        let rabbit_names: Vec<Value> = ["queues", "exchanges", "policies"]
            .iter()
            .flat_map(|k| live.get(*k).and_then(Value::as_array).into_iter().flatten())
            .filter_map(|o| o["name"].as_str().map(|n| Value::String(n.to_owned())))
            .collect();
        let rabbit_prefixes = if rabbit_names.is_empty() {
            json!([format!("{stem}.")]).to_string()
        } else {
            Value::Array(rabbit_names).to_string()
        };
        let targets = format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  corpus-sqs:\n    backend: sqs\n    region: us-east-1\n    endpoint: {aws}\n    ownership: {{prefixes: [\"{stem}-\"]}}\n  corpus-rabbitmq:\n    backend: rabbitmq\n    url: {rabbit}\n    vhost: {stem}\n    usernameEnv: DLQCTL_RABBITMQ_USER\n    passwordEnv: DLQCTL_RABBITMQ_PASSWORD\n    ownership: {{prefixes: {rabbit_prefixes}}}\n  corpus-kafka:\n    backend: kafka\n    bootstrapServers: {kafka}\n    ownership: {{prefixes: [\"{stem}.\"]}}\n  corpus-pubsub:\n    backend: pubsub\n    project: {PROJECT}\n    emulatorHost: {pubsub}\n    ownership: {{prefixes: [\"{stem}-\"]}}\n",
            aws = support::aws_endpoint(),
            rabbit = support::rabbitmq_url(),
            kafka = support::kafka_bootstrap(),
            pubsub = support::pubsub_host(),
        );
        ws.edit_targets(|_| targets.clone());
        World {
            ws,
            stem,
            backend: backend.to_owned(),
            aws: Aws::new(),
            rest: Rest::new(),
        }
    }

    fn path(&self) -> &Path {
        self.ws.path()
    }

    fn run(&self, args: &[&str]) -> Output {
        self.ws.run(args)
    }

    fn target(&self) -> String {
        format!("corpus-{}", self.backend)
    }

    /// A live name: RabbitMQ's as the source writes it (the vhost is the case's own), the
    /// others with the stem in front.
    fn name(&self, n: &str) -> String {
        match self.backend.as_str() {
            "rabbitmq" => n.to_owned(),
            "kafka" => format!("{}.{n}", self.stem),
            _ => format!("{}-{n}", self.stem),
        }
    }

    /// `${arn:N}`, `${url:N}`, `${topic:N}` and `${name:N}` in a string, resolved.
    fn resolve(&self, s: &str) -> String {
        let mut out = s.to_owned();
        while let Some(start) = out.find("${") {
            let Some(len) = out[start..].find('}') else {
                break;
            };
            let inner = out[start + 2..start + len].to_owned();
            let (kind, n) = inner.split_once(':').unwrap_or(("name", &inner));
            let value = match kind {
                "arn" => self.aws.attributes(&self.name(n))["QueueArn"].clone(),
                "topic" => format!("projects/{PROJECT}/topics/{}", self.name(n)),
                _ => self.name(n),
            };
            out.replace_range(start..start + len + 1, &value);
        }
        out
    }

    // -----------------------------------------------------------------------------------
    // Creating the live objects, with third-party clients.

    fn create(&self, live: &Value) {
        match self.backend.as_str() {
            "rabbitmq" => self.create_rabbitmq(live),
            "sqs" => self.create_sqs(live),
            "kafka" => self.create_kafka(live),
            "pubsub" => self.create_pubsub(live),
            other => panic!("unknown backend {other}"),
        }
    }

    fn vhost(&self) -> String {
        self.stem.clone()
    }

    /// The definitions document, posted to the case's own vhost; defaults filled in as
    /// `rabbitmqctl import_definitions` would (durable, not auto-delete, no arguments).
    fn create_rabbitmq(&self, live: &Value) {
        let v = self.vhost();
        let mut defs = live.clone();
        for q in defs
            .get_mut("queues")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            fill(
                q,
                &[
                    ("durable", json!(true)),
                    ("auto_delete", json!(false)),
                    ("arguments", json!({})),
                ],
            );
        }
        for e in defs
            .get_mut("exchanges")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            fill(
                e,
                &[
                    ("durable", json!(true)),
                    ("auto_delete", json!(false)),
                    ("internal", json!(false)),
                    ("arguments", json!({})),
                ],
            );
        }
        for b in defs
            .get_mut("bindings")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            fill(
                b,
                &[
                    ("destination_type", json!("queue")),
                    ("arguments", json!({})),
                ],
            );
        }
        for p in defs
            .get_mut("policies")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            fill(p, &[("apply-to", json!("queues")), ("priority", json!(0))]);
        }
        block(async {
            let ok = |(s, a): (u16, Value), what: &str| {
                assert!((200..300).contains(&s), "{what}: HTTP {s}: {a}");
            };
            ok(
                api(
                    reqwest::Method::PUT,
                    &format!("/api/vhosts/{v}"),
                    Some(json!({})),
                )
                .await,
                "vhost",
            );
            ok(
                api(
                    reqwest::Method::PUT,
                    &format!("/api/permissions/{v}/guest"),
                    Some(json!({"configure": ".*", "write": ".*", "read": ".*"})),
                )
                .await,
                "permissions",
            );
            ok(
                api(
                    reqwest::Method::POST,
                    &format!("/api/definitions/{v}"),
                    Some(defs),
                )
                .await,
                "definitions",
            );
        });
        // Policies apply a moment later: wait (15 s at most) until every queue a policy
        // matches shows one.
        if live["policies"].as_array().is_some_and(|p| !p.is_empty()) {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
            loop {
                let (_, qs) = block(api(
                    reqwest::Method::GET,
                    &format!("/api/queues/{v}?columns=name,policy"),
                    None,
                ));
                let pending = qs.as_array().into_iter().flatten().any(|q| {
                    q["policy"].is_null()
                        && policy_matches(live, q["name"].as_str().unwrap_or_default())
                });
                if !pending || std::time::Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        }
    }

    fn create_sqs(&self, live: &Value) {
        for q in live["queues"].as_array().into_iter().flatten() {
            let name = self.name(q["name"].as_str().expect("queue name"));
            let attrs: Vec<(QueueAttributeName, String)> = q["attributes"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| {
                    let text = match v {
                        Value::String(s) => self.resolve(s),
                        other => self.resolve(&other.to_string()),
                    };
                    (QueueAttributeName::from(k.as_str()), text)
                })
                .collect();
            let tags: Vec<(String, String)> = q["tags"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect();
            // `"set": true`: attributes set after creation (a separate Terraform resource
            // such as aws_sqs_queue_redrive_policy, or a policy naming the queue's own ARN).
            if q["set"] == json!(true) {
                self.aws.set(&name, &attrs);
                continue;
            }
            let tag_refs: Vec<(&str, &str)> =
                tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            self.aws.create(&name, &attrs, &tag_refs);
        }
    }

    fn create_kafka(&self, live: &Value) {
        let topics: Vec<(String, i32, Configs)> = live["topics"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let configs = t["config"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                        )
                    })
                    .collect();
                (
                    self.name(t["name"].as_str().expect("topic name")),
                    i32::try_from(t["partitions"].as_i64().unwrap_or(1)).unwrap_or(1),
                    configs,
                )
            })
            .collect();
        let config_refs: Vec<Vec<(&str, &str)>> = topics
            .iter()
            .map(|(_, _, c)| c.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
            .collect();
        let specs: Vec<support::kafka::TopicSpec> = topics
            .iter()
            .zip(&config_refs)
            .map(|((n, p, _), c)| (n.as_str(), *p, c.as_slice()))
            .collect();
        support::kafka::create_topics(&specs);
    }

    fn create_pubsub(&self, live: &Value) {
        for t in live["topics"].as_array().into_iter().flatten() {
            let name = self.name(t["name"].as_str().expect("topic name"));
            let mut body = t.clone();
            if let Some(o) = body.as_object_mut() {
                o.remove("name");
            }
            self.rest
                .ok(reqwest::Method::PUT, &format!("topics/{name}"), body);
        }
        for s in live["subscriptions"].as_array().into_iter().flatten() {
            let name = self.name(s["name"].as_str().expect("subscription name"));
            let mut body = self.resolved(s);
            if let Some(o) = body.as_object_mut() {
                o.remove("name");
            }
            self.rest.create_subscription(&name, body);
        }
    }

    /// A JSON value with every string resolved (`${…}`).
    fn resolved(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.resolve(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.resolved(x)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (k.clone(), self.resolved(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    // -----------------------------------------------------------------------------------
    // The hand-made change.

    fn change(&self, change: &Value) {
        match self.backend.as_str() {
            "rabbitmq" => {
                let v = self.vhost();
                if let Some(q) = change["queue"].as_str() {
                    let mut body = json!({"durable": true, "auto_delete": false, "arguments": change["arguments"].clone()});
                    if let Some(extra) = change["declare"].as_object() {
                        for (k, x) in extra {
                            body[k] = x.clone();
                        }
                    }
                    block(async {
                        api(
                            reqwest::Method::DELETE,
                            &format!("/api/queues/{v}/{q}"),
                            None,
                        )
                        .await;
                        let (s, a) = api(
                            reqwest::Method::PUT,
                            &format!("/api/queues/{v}/{q}"),
                            Some(body),
                        )
                        .await;
                        assert!((200..300).contains(&s), "redeclare {q}: HTTP {s}: {a}");
                    });
                } else if let Some(p) = change["policy"].as_object() {
                    let name = p["name"].as_str().expect("policy name");
                    let mut body = Value::Object(p.clone());
                    fill(
                        &mut body,
                        &[("apply-to", json!("queues")), ("priority", json!(0))],
                    );
                    block(async {
                        let (s, a) = api(
                            reqwest::Method::PUT,
                            &format!("/api/policies/{v}/{name}"),
                            Some(body),
                        )
                        .await;
                        assert!((200..300).contains(&s), "policy {name}: HTTP {s}: {a}");
                    });
                    std::thread::sleep(std::time::Duration::from_secs(1));
                } else {
                    panic!("a RabbitMQ change names a queue or a policy: {change}");
                }
            }
            "sqs" => {
                let name = self.name(change["queue"].as_str().expect("queue"));
                let attrs: Vec<(QueueAttributeName, String)> = change["attributes"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| {
                        (
                            QueueAttributeName::from(k.as_str()),
                            v.as_str()
                                .map_or_else(|| v.to_string(), |s| self.resolve(s)),
                        )
                    })
                    .collect();
                self.aws.set(&name, &attrs);
            }
            "kafka" => {
                let name = self.name(change["topic"].as_str().expect("topic"));
                for (k, v) in change["config"].as_object().into_iter().flatten() {
                    support::kafka::alter(
                        &name,
                        support::kafka::set(k, v.as_str().unwrap_or_default()),
                    );
                }
            }
            "pubsub" => {
                let name = self.name(change["subscription"].as_str().expect("subscription"));
                let sub = self.resolved(&change["patch"]);
                self.rest
                    .patch_subscription(&name, sub, change["mask"].as_str().expect("mask"));
            }
            other => panic!("unknown backend {other}"),
        }
    }

    // -----------------------------------------------------------------------------------
    // The steps, through the real binary.

    /// Runs every step; the first that fails, with its output.
    fn steps(&self, case: &Case) -> Result<String, Failure> {
        let target = self.target();
        let fail = |step: &str, o: &Output, why: &str| {
            Err((step.to_owned(), format!("{why}\n{}", text_of(o))))
        };

        let imp = self.run(&["import", "--target", &target, "--out", "imported"]);
        if imp.code != 0 {
            return fail("import", &imp, "import failed");
        }
        if imp.stderr.contains("Not imported") || imp.stderr.contains("not imported:") {
            return fail("import", &imp, "import left objects out");
        }
        let files = std::fs::read_dir(self.path().join("imported"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.path().extension().is_some_and(|x| x == "yaml"))
                    .count()
            })
            .unwrap_or(0);
        if files == 0 {
            return fail("import", &imp, "import wrote no spec");
        }
        let text = self.imported_text();

        let lint = self.run(&["lint", "imported"]);
        if lint.code != 0 {
            return fail("lint", &lint, &format!("lint has an error\n{text}"));
        }

        if self.backend == "sqs" {
            let adopt = self.run(&["apply", "imported", "--adopt", "--auto-approve"]);
            if adopt.code != 0 {
                return fail("adopt", &adopt, &format!("apply --adopt failed\n{text}"));
            }
        }
        let plan = self.run(&["plan", "imported", "--detailed-exitcode"]);
        if plan.code != 0 {
            return fail(
                "plan",
                &plan,
                &format!("the first plan is not empty\n{text}"),
            );
        }

        let graph = self.run(&["graph", "imported"]);
        if graph.code != 0 {
            return fail("graph", &graph, "graph failed");
        }
        let status = self.run(&["status", "imported"]);
        if status.code != 0 {
            return fail("status", &status, "status failed");
        }

        self.change(&case.doc["change"]);
        let shows = case.doc["change"]["shows"].as_str().unwrap_or_default();
        let after = self.run(&["plan", "imported", "--detailed-exitcode"]);
        if after.code != 2 || !after.stdout.contains(shows) {
            return fail(
                "change",
                &after,
                &format!("the hand-made change does not show as `{shows}`"),
            );
        }
        Ok(imp.stderr)
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
}

impl Drop for World {
    fn drop(&mut self) {
        match self.backend.as_str() {
            "rabbitmq" => {
                let v = self.vhost();
                block(api(
                    reqwest::Method::DELETE,
                    &format!("/api/vhosts/{v}"),
                    None,
                ));
            }
            "sqs" => self.aws.delete_prefixed(&self.stem),
            "kafka" => support::kafka::delete_prefixed(&self.stem),
            "pubsub" => self.rest.delete_prefixed(&self.stem),
            _ => {}
        }
    }
}

/// Sets the keys an object lacks.
fn fill(v: &mut Value, defaults: &[(&str, Value)]) {
    if let Some(o) = v.as_object_mut() {
        for (k, d) in defaults {
            o.entry((*k).to_owned()).or_insert_with(|| d.clone());
        }
    }
}

/// Whether a policy of the case (by its pattern, a regex RabbitMQ applies; here only the
/// `^…$` literal and `.*` forms the corpus uses) matches `queue`.
fn policy_matches(live: &Value, queue: &str) -> bool {
    live["policies"].as_array().into_iter().flatten().any(|p| {
        let pat = p["pattern"].as_str().unwrap_or_default();
        let literal = pat
            .trim_start_matches('^')
            .trim_end_matches('$')
            .replace("\\.", ".");
        pat == ".*"
            || pat == "^.*$"
            || literal == queue
            || (!pat.ends_with('$') && queue.starts_with(&literal))
    })
}

/// Runs every case of `backend`; each must pass, or fail exactly as its `gap` says.
fn run_backend(backend: &str, up: bool) {
    if !support::require(backend, up) {
        return;
    }
    let cases = cases(backend);
    let mut report = Vec::new();
    let mut wrong = Vec::new();
    for case in &cases {
        let w = World::new(backend, &case.doc["live"]);
        w.create(&case.doc["live"]);
        let got = w.steps(case);
        match (case.expected_gap(), got) {
            (None, Ok(_)) => report.push(format!("pass  {}", case.file)),
            (None, Err((step, out))) => {
                report.push(format!("FAIL  {} at {step}", case.file));
                wrong.push(format!(
                    "{}: expected to pass, failed at `{step}`:\n{out}",
                    case.file
                ));
            }
            (Some((step, message)), Ok(_)) => {
                report.push(format!("FLIP  {}", case.file));
                wrong.push(format!(
                    "{}: marked a gap at `{step}` ({message}), and now passes: flip it to pass",
                    case.file
                ));
            }
            (Some((step, message)), Err((got_step, out))) => {
                if got_step == step && out.contains(&message) {
                    report.push(format!("gap   {} at {step}: {message}", case.file));
                } else {
                    report.push(format!("FAIL  {} at {got_step}", case.file));
                    wrong.push(format!(
                        "{}: a gap expected at `{step}` with `{message}`; failed at `{got_step}` with:\n{out}",
                        case.file
                    ));
                }
            }
        }
    }
    // The table of what each case gave, seen with `--nocapture` (and in every failure).
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "corpus, {backend}: {} cases\n{}",
            cases.len(),
            report.join("\n")
        );
    }
    assert!(
        wrong.is_empty(),
        "{}\n\n{}",
        report.join("\n"),
        wrong.join("\n\n---\n")
    );
}

#[test]
fn every_case_cites_its_source_and_says_what_it_expects() {
    let mut n = 0;
    let mut backends = std::collections::BTreeSet::new();
    for backend in ["rabbitmq", "sqs", "kafka", "pubsub"] {
        for c in cases(backend) {
            n += 1;
            backends.insert(backend);
            let s = &c.doc["source"];
            for key in ["repo", "path", "commit"] {
                assert!(
                    s[key].as_str().is_some_and(|v| !v.is_empty()),
                    "{}: source.{key}",
                    c.file
                );
            }
            let commit = s["commit"].as_str().unwrap_or_default();
            assert!(
                commit.len() == 40 && commit.chars().all(|ch| ch.is_ascii_hexdigit()),
                "{}: source.commit is a 40-hex commit",
                c.file
            );
            assert!(
                c.doc["shape"].as_str().is_some_and(|v| !v.is_empty()),
                "{}: shape",
                c.file
            );
            assert!(c.doc["live"].is_object(), "{}: live", c.file);
            assert!(
                c.doc["change"]["shows"].is_string(),
                "{}: change.shows",
                c.file
            );
            match c.doc["expected"].as_str() {
                Some("pass") => {}
                Some("gap") => {
                    let steps = [
                        "import", "lint", "adopt", "plan", "graph", "status", "change",
                    ];
                    assert!(
                        c.doc["gap"]["step"]
                            .as_str()
                            .is_some_and(|s| steps.contains(&s)),
                        "{}: gap.step is one of {steps:?}",
                        c.file
                    );
                    assert!(
                        c.doc["gap"]["message"]
                            .as_str()
                            .is_some_and(|m| !m.is_empty()),
                        "{}: gap.message",
                        c.file
                    );
                }
                other => panic!("{}: expected is pass or gap, not {other:?}", c.file),
            }
        }
    }
    if std::env::var("DLQCTL_CORPUS").is_err() {
        assert!(n >= 30, "the corpus has at least 30 cases: {n}");
        assert_eq!(backends.len(), 4, "every backend: {backends:?}");
    }
}

#[test]
fn rabbitmq_corpus_imports_lints_and_plans_empty() {
    run_backend(
        "rabbitmq",
        support::tcp_up(&support::host_port(&support::rabbitmq_url())),
    );
}

#[test]
fn sqs_corpus_imports_lints_and_plans_empty() {
    run_backend(
        "sqs",
        support::tcp_up(&support::host_port(&support::aws_endpoint())),
    );
}

#[test]
fn kafka_corpus_imports_lints_and_plans_empty() {
    run_backend("kafka", support::tcp_up(&support::kafka_bootstrap()));
}

#[test]
fn pubsub_corpus_imports_lints_and_plans_empty() {
    run_backend("pubsub", support::tcp_up(&support::pubsub_host()));
}
