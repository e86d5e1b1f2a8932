//! Kafka Connect: the stack's worker (`DLQCTL_CONNECT_URL`, as `scripts/stack env` exports it)
//! and its REST API used as an operator uses it, with reqwest: create a connector by hand,
//! change a key of its config, read the whole config back, delete it. The live rule holds:
//! a worker that does not answer skips loudly, or fails under CI=true / DLQCTL_LIVE_REQUIRED=1.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::block;

pub fn url() -> String {
    super::var("DLQCTL_CONNECT_URL", "http://127.0.0.1:8083")
}

/// Whether the worker answers `GET /connectors` (the live rule: skip loudly, or fail when
/// required).
pub fn up() -> bool {
    let answers = block(async {
        let client = client();
        client
            .get(format!("{}/connectors", url()))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    });
    super::require(
        &format!(
            "the Kafka Connect worker at {} (scripts/stack up --only connect)",
            url()
        ),
        answers,
    )
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client")
}

/// `PUT /connectors/{name}/config` with `config` (creates or replaces it): the status and
/// the answer. The worker answers 409 while its group rebalances: tried again, bounded.
pub fn put_config(name: &str, config: &BTreeMap<String, String>) -> (u16, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = block(async {
            let r = client()
                .put(format!("{}/connectors/{name}/config", url()))
                .json(&json!(config))
                .send()
                .await
                .expect("PUT connector config");
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        });
        if status != 409 || Instant::now() > deadline {
            return (status, body);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The connector's whole config, as the worker has it (`GET /connectors/{name}/config`).
/// Right after a connector is created or changed the worker may answer 404, 409 (its group
/// rebalancing) or 500 (CI saw one, 2 s after a 201, on a loaded machine) before its config
/// snapshot catches up: tried again for up to 30 s, and the last answer's body is in the
/// failure.
pub fn config(name: &str) -> BTreeMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let v: Value = loop {
        let (status, body) = block(async {
            let r = client()
                .get(format!("{}/connectors/{name}/config", url()))
                .send()
                .await
                .expect("GET connector config");
            let status = r.status();
            (status, r.text().await.unwrap_or_default())
        });
        if status.is_success() {
            break serde_json::from_str(&body).expect("config json");
        }
        let transient = matches!(status.as_u16(), 404 | 409) || status.is_server_error();
        assert!(
            transient && Instant::now() < deadline,
            "GET /connectors/{name}/config: {status}: {body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    v.as_object()
        .expect("an object")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("text").to_owned()))
        .collect()
}

/// `GET /connectors/{name}/status`.
pub fn status(name: &str) -> Value {
    block(async {
        client()
            .get(format!("{}/connectors/{name}/status", url()))
            .send()
            .await
            .expect("GET status")
            .json()
            .await
            .unwrap_or(Value::Null)
    })
}

/// Waits (bounded) until the connector and its tasks run.
pub fn wait_running(name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = status(name);
        let running = s["connector"]["state"] == "RUNNING"
            && s["tasks"]
                .as_array()
                .is_some_and(|t| !t.is_empty() && t.iter().all(|t| t["state"] == "RUNNING"));
        if running {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "connector {name} does not run: {s}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A connector made by hand, deleted on drop.
pub struct Connector {
    pub name: String,
}

impl Drop for Connector {
    fn drop(&mut self) {
        let name = self.name.clone();
        block(async move {
            let _ = client()
                .delete(format!("{}/connectors/{name}", url()))
                .send()
                .await;
        });
    }
}
