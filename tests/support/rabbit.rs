//! The RabbitMQ test fixture: a temp folder with a targets file and the orders example under
//! a random channel name, run through the real binary; cleans up what it created.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Output, dlqctl, output, unique};

/// Per-test workspace: a targets file pointing at the local broker, and the channel's spec.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub channel: String,
    /// Extra environment for the binary (credentials under test).
    pub env: Vec<(String, String)>,
}

impl Fixture {
    pub fn new() -> Option<Self> {
        Self::with_url(&super::rabbitmq_url())
    }

    /// A fixture whose target talks to `url` (a fault-injecting proxy, a closed port, ...).
    pub fn with_url(url: &str) -> Option<Self> {
        let up = super::tcp_up(&super::host_port(&super::rabbitmq_url()));
        if !super::require("RabbitMQ management API", up) {
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let targets = std::fs::read_to_string(super::root().join("examples/dlqctl.yaml"))
            .expect("examples/dlqctl.yaml")
            .replace("http://127.0.0.1:15672", url);
        std::fs::write(dir.path().join("dlqctl.yaml"), targets).expect("write targets");
        Some(Fixture {
            dir,
            channel: unique("orders.t"),
            env: vec![
                ("DLQCTL_RABBITMQ_USER".into(), "guest".into()),
                ("DLQCTL_RABBITMQ_PASSWORD".into(), "guest".into()),
            ],
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes the orders example with this fixture's channel name and the given edits.
    pub fn write_example(&self, edit: impl Fn(String) -> String) -> PathBuf {
        let text = std::fs::read_to_string(super::root().join("examples/orders-rabbitmq.yaml"))
            .expect("example");
        let text = text.replace("  name: orders\n", &format!("  name: {}\n", self.channel));
        let path = self.dir.path().join("channel.yaml");
        std::fs::write(&path, edit(text)).expect("write spec");
        path
    }

    pub fn run(&self, args: &[&str]) -> Output {
        output(
            dlqctl()
                .args(args)
                .arg("--color")
                .arg("never")
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .current_dir(self.path()),
        )
    }

    pub fn plan(&self) -> Output {
        self.run(&["plan", "channel.yaml", "--detailed-exitcode"])
    }

    pub fn apply(&self, extra: &[&str]) -> Output {
        let mut args = vec!["apply", "channel.yaml", "--auto-approve"];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    pub fn names(&self) -> [String; 4] {
        let c = &self.channel;
        [
            format!("{c}.process"),
            format!("{c}.retry"),
            format!("{c}.dlq"),
            format!("{c}.exchange"),
        ]
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let names = self.names();
        rt.block_on(async {
            for q in &names[..3] {
                let _ = api(
                    reqwest::Method::DELETE,
                    &format!("/api/queues/%2F/{q}"),
                    None,
                )
                .await;
                let _ = api(
                    reqwest::Method::DELETE,
                    &format!("/api/policies/%2F/{q}"),
                    None,
                )
                .await;
            }
            let _ = api(
                reqwest::Method::DELETE,
                &format!("/api/exchanges/%2F/{}", names[3]),
                None,
            )
            .await;
        });
    }
}

/// A management API call made by hand, as an operator would (not through dlqctl).
pub async fn api(method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut req = client
        .request(method, format!("{}{path}", super::rabbitmq_url()))
        .basic_auth("guest", Some("guest"));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("management API answers");
    let status = resp.status().as_u16();
    let value = resp.json().await.unwrap_or(Value::Null);
    (status, value)
}

pub fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Polls the management API until a queue reports `n` messages (its statistics lag).
pub fn wait_for_messages(queue: &str, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let (_, q) = block(api(
            reqwest::Method::GET,
            &format!("/api/queues/%2F/{queue}?columns=messages"),
            None,
        ));
        if q["messages"].as_u64() == Some(n) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{queue} never reported {n} messages: {q}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
