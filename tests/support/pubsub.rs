//! Pub/Sub: the live fixture (the payments example under a random channel name, its topics and
//! subscriptions deleted on drop) and the REST client the tests use as a third party would:
//! plain HTTP calls to the emulator, never dlqctl's code.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::block;
use super::workspace::{Endpoints, Workspace};

/// The project of the example target (`local-pubsub`).
pub const PROJECT: &str = "dlqctl-local";

/// A workspace with a channel on the `local-pubsub` target; deletes what it names on drop.
pub struct Fixture {
    ws: Workspace,
    pub rest: Rest,
}

impl Fixture {
    pub fn new() -> Option<Self> {
        up().then(|| Fixture {
            ws: Workspace::new("payments-pubsub.yaml", "payments-t", &Endpoints::default()),
            rest: Rest::new(),
        })
    }

    /// The consumer's subscription this fixture's channel uses (the example's literal
    /// `payment-processor-sub`, made unique per test).
    pub fn subscription(&self) -> String {
        format!("{}-processor-sub", self.channel)
    }

    /// The example with this fixture's subscription name.
    pub fn example(&self, text: String) -> String {
        text.replace("payment-processor-sub", &self.subscription())
    }
}

fixture_face!(Fixture);

impl Drop for Fixture {
    fn drop(&mut self) {
        self.rest.delete_prefixed(&self.channel);
    }
}

/// Whether the emulator answers (the live rule: skip loudly, or fail when required).
pub fn up() -> bool {
    let up = super::tcp_up(&super::pubsub_host());
    super::require("the Pub/Sub emulator (scripts/stack up --only pubsub)", up)
}

/// Pub/Sub's REST API on the emulator, as any HTTP client would call it.
pub struct Rest {
    client: reqwest::Client,
    base: String,
}

impl Default for Rest {
    fn default() -> Self {
        Self::new()
    }
}

impl Rest {
    pub fn new() -> Self {
        Rest {
            client: reqwest::Client::new(),
            base: format!("http://{}/v1/projects/{PROJECT}", super::pubsub_host()),
        }
    }

    /// One call; the status and the JSON answer (`Null` when empty).
    pub fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        block(async {
            let mut req = self
                .client
                .request(method, format!("{}/{path}", self.base))
                .timeout(std::time::Duration::from_secs(30));
            if let Some(b) = body {
                req = req.json(&b);
            }
            let resp = req.send().await.expect("the emulator answers");
            let status = resp.status().as_u16();
            let text = resp.text().await.expect("a body");
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        })
    }

    /// GET `topics/X` or `subscriptions/X`; `None` on 404.
    pub fn get(&self, path: &str) -> Option<Value> {
        let (s, v) = self.call(reqwest::Method::GET, path, None);
        match s {
            404 => None,
            200 => Some(v),
            _ => panic!("GET {path}: HTTP {s}: {v}"),
        }
    }

    /// A successful call (2xx), or a panic naming it.
    pub fn ok(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let (s, v) = self.call(method.clone(), path, Some(body));
        assert!((200..300).contains(&s), "{method} {path}: HTTP {s}: {v}");
        v
    }

    pub fn create_topic(&self, name: &str) {
        self.ok(reqwest::Method::PUT, &format!("topics/{name}"), json!({}));
    }

    pub fn create_subscription(&self, name: &str, body: Value) {
        self.ok(reqwest::Method::PUT, &format!("subscriptions/{name}"), body);
    }

    pub fn patch_subscription(&self, name: &str, sub: Value, mask: &str) {
        self.ok(
            reqwest::Method::PATCH,
            &format!("subscriptions/{name}"),
            json!({"subscription": sub, "updateMask": mask}),
        );
    }

    pub fn delete(&self, path: &str) {
        let (s, v) = self.call(reqwest::Method::DELETE, path, None);
        assert!(s == 200 || s == 404, "DELETE {path}: HTTP {s}: {v}");
    }

    pub fn topic_path(name: &str) -> String {
        format!("projects/{PROJECT}/topics/{name}")
    }

    /// Publishes one message with `data`; returns its id.
    pub fn publish(&self, topic: &str, data: &str) -> String {
        use base64::Engine;
        let v = self.ok(
            reqwest::Method::POST,
            &format!("topics/{topic}:publish"),
            json!({"messages": [{"data": base64::engine::general_purpose::STANDARD.encode(data)}]}),
        );
        v["messageIds"][0]
            .as_str()
            .expect("a message id")
            .to_owned()
    }

    /// Pulls up to `max` messages (returns at once when none wait).
    pub fn pull(&self, sub: &str, max: u32) -> Vec<Value> {
        let v = self.ok(
            reqwest::Method::POST,
            &format!("subscriptions/{sub}:pull"),
            json!({"maxMessages": max, "returnImmediately": true}),
        );
        v.get("receivedMessages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    /// Pulls until something comes (at most 30 s, then what the last pull got: nothing).
    pub fn pull_wait(&self, sub: &str) -> Vec<Value> {
        let started = std::time::Instant::now();
        loop {
            let got = self.pull(sub, 10);
            if !got.is_empty() || started.elapsed() > std::time::Duration::from_secs(30) {
                return got;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Takes (pulls and acknowledges) messages of `sub` until `want` distinct message ids came
    /// (at most 30 s): the ids, each once, for a count by id.
    pub fn take_ids(&self, sub: &str, want: usize) -> std::collections::BTreeSet<String> {
        let mut seen = std::collections::BTreeSet::new();
        let started = std::time::Instant::now();
        while seen.len() < want && started.elapsed() < std::time::Duration::from_secs(30) {
            for m in self.pull(sub, 100) {
                seen.insert(m["message"]["messageId"].as_str().expect("id").to_owned());
                self.ack(sub, m["ackId"].as_str().expect("ackId"));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        seen
    }

    /// Takes (pulls and acknowledges) messages of `sub` as a consumer would: data and
    /// attributes. At least `want` (within 30 s), then whatever else comes within 2 s (so an
    /// unexpected extra shows); with `want` 0, whatever comes within 3 s.
    pub fn take(&self, sub: &str, want: usize) -> Vec<(Vec<u8>, BTreeMap<String, String>)> {
        use base64::Engine;
        let mut out = Vec::new();
        let started = std::time::Instant::now();
        let mut last = std::time::Instant::now();
        loop {
            let enough = want > 0 && out.len() >= want;
            let waited = started.elapsed();
            if (enough && last.elapsed() > std::time::Duration::from_secs(2))
                || (want == 0 && waited > std::time::Duration::from_secs(3))
                || waited > std::time::Duration::from_secs(30)
            {
                return out;
            }
            let got = self.pull(sub, 100);
            if got.is_empty() {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            for m in got {
                let data = m["message"]["data"].as_str().unwrap_or_default();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .expect("base64");
                let attributes = m["message"]["attributes"]
                    .as_object()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                            .collect()
                    })
                    .unwrap_or_default();
                out.push((bytes, attributes));
                self.ack(sub, m["ackId"].as_str().expect("ackId"));
                last = std::time::Instant::now();
            }
        }
    }

    /// Counts the messages of `sub` without taking any: pulls until no new one comes for
    /// 2 s, then hands every one back (nack). Leased messages (pulled by someone else and
    /// not acknowledged) are not seen.
    pub fn count(&self, sub: &str) -> u64 {
        let mut seen = std::collections::BTreeSet::new();
        let mut acks = Vec::new();
        let mut quiet = std::time::Instant::now();
        while quiet.elapsed() < std::time::Duration::from_secs(2) {
            for m in self.pull(sub, 100) {
                let id = m["message"]["messageId"].as_str().unwrap_or_default();
                if seen.insert(id.to_owned()) {
                    quiet = std::time::Instant::now();
                }
                acks.push(m["ackId"].as_str().unwrap_or_default().to_owned());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        for a in &acks {
            self.nack(sub, a);
        }
        seen.len() as u64
    }

    /// Nacks: the ack deadline set to 0, so Pub/Sub delivers it again (counting an attempt).
    pub fn nack(&self, sub: &str, ack_id: &str) {
        self.ok(
            reqwest::Method::POST,
            &format!("subscriptions/{sub}:modifyAckDeadline"),
            json!({"ackIds": [ack_id], "ackDeadlineSeconds": 0}),
        );
    }

    pub fn ack(&self, sub: &str, ack_id: &str) {
        self.ok(
            reqwest::Method::POST,
            &format!("subscriptions/{sub}:acknowledge"),
            json!({"ackIds": [ack_id]}),
        );
    }

    /// Names of one collection (`topics`, `subscriptions`) of the project.
    pub fn names(&self, collection: &str) -> Vec<String> {
        let v = self
            .get(&format!("{collection}?pageSize=1000"))
            .unwrap_or(Value::Null);
        v.get(collection)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.get("name").and_then(Value::as_str))
                    .filter_map(|n| n.rsplit('/').next())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Deletes every subscription and topic whose name starts with `prefix`.
    pub fn delete_prefixed(&self, prefix: &str) {
        for collection in ["subscriptions", "topics"] {
            for n in self.names(collection) {
                if n.starts_with(prefix) {
                    self.delete(&format!("{collection}/{n}"));
                }
            }
        }
    }
}
