//! RabbitMQ: the live fixture (the orders example under a random channel name, cleaned up on
//! drop) and the third-party clients the tests use, as an operator would: the management API
//! by hand (reqwest) and AMQP (lapin).

use std::collections::BTreeMap;

use serde_json::Value;

use super::block;
use super::workspace::{Endpoints, Workspace};

/// A workspace with a channel on the `local-rabbitmq` target; deletes what it names on drop.
pub struct Fixture {
    ws: Workspace,
}

impl Fixture {
    pub fn new() -> Option<Self> {
        Self::with_url(&super::rabbitmq_url())
    }

    /// A fixture whose target talks to `url` (a fault-injecting proxy, a closed port, ...).
    pub fn with_url(url: &str) -> Option<Self> {
        let endpoints = Endpoints {
            rabbitmq: url.to_owned(),
            ..Endpoints::default()
        };
        up().then(|| Fixture {
            ws: Workspace::new("orders-rabbitmq.yaml", "orders.t", &endpoints),
        })
    }

    /// Main queue, retry queue, DLQ, exchange.
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

fixture_face!(Fixture);

impl Drop for Fixture {
    fn drop(&mut self) {
        delete_prefixed(&format!("{}.", self.channel));
    }
}

/// Whether the management API answers (the live rule: skip loudly, or fail when required).
pub fn up() -> bool {
    let up = super::tcp_up(&super::host_port(&super::rabbitmq_url()));
    super::require("RabbitMQ management API", up)
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

/// A management API call by hand that must succeed (2xx).
pub async fn api_ok(method: reqwest::Method, path: &str, body: Value) {
    let (status, answer) = api(method, path, Some(body)).await;
    assert!((200..300).contains(&status), "{path}: {status} {answer}");
}

/// Declares a durable queue by hand (management API) with these `x-arguments`.
pub async fn declare_queue(queue: &str, arguments: Value) {
    api_ok(
        reqwest::Method::PUT,
        &format!("/api/queues/%2F/{queue}"),
        serde_json::json!({"durable": true, "auto_delete": false, "arguments": arguments}),
    )
    .await;
}

/// Declares a durable exchange of `kind` (`direct`, `topic`, ...) by hand.
pub async fn declare_exchange(exchange: &str, kind: &str) {
    api_ok(
        reqwest::Method::PUT,
        &format!("/api/exchanges/%2F/{exchange}"),
        serde_json::json!({"type": kind, "durable": true, "auto_delete": false, "internal": false, "arguments": {}}),
    )
    .await;
}

/// Binds `queue` to `exchange` with routing key `key`, by hand.
pub async fn bind(exchange: &str, queue: &str, key: &str) {
    api_ok(
        reqwest::Method::POST,
        &format!("/api/bindings/%2F/e/{exchange}/q/{queue}"),
        serde_json::json!({"routing_key": key, "arguments": {}}),
    )
    .await;
}

/// The HTTP status of `GET /api/queues/%2F/<queue>` (200: it exists, 404: it does not).
pub fn queue_status(queue: &str) -> u16 {
    block(api(
        reqwest::Method::GET,
        &format!("/api/queues/%2F/{queue}"),
        None,
    ))
    .0
}

/// Deletes a queue by hand.
pub fn delete_queue(queue: &str) {
    block(api(
        reqwest::Method::DELETE,
        &format!("/api/queues/%2F/{queue}"),
        None,
    ));
}

/// Deletes every queue, policy and exchange in vhost `/` whose name starts with `prefix`.
pub fn delete_prefixed(prefix: &str) {
    block(async {
        for (kind, list) in [
            ("queues", "/api/queues/%2F?columns=name"),
            ("policies", "/api/policies/%2F"),
            ("exchanges", "/api/exchanges/%2F?columns=name"),
        ] {
            let (_, all) = api(reqwest::Method::GET, list, None).await;
            for item in all.as_array().into_iter().flatten() {
                let Some(name) = item["name"].as_str() else {
                    continue;
                };
                if name.starts_with(prefix) {
                    let path = format!("/api/{kind}/%2F/{}", enc(name));
                    let _ = api(reqwest::Method::DELETE, &path, None).await;
                }
            }
        }
    });
}

fn enc(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

/// Polls the management API until a queue reports `n` messages (its statistics lag).
pub fn wait_for_messages(queue: &str, n: u64) {
    wait_for(queue, "messages", &format!("reported {n} messages"), |q| {
        q["messages"].as_u64() == Some(n)
    });
}

/// Polls the management API (15 s at most) until the queue's `column` satisfies `done`;
/// `what` says what it never did.
pub fn wait_for(queue: &str, column: &str, what: &str, done: impl Fn(&Value) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let (_, q) = block(api(
            reqwest::Method::GET,
            &format!("/api/queues/%2F/{queue}?columns={column}"),
            None,
        ));
        if done(&q) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{queue} never {what}: {q}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// An AMQP connection to the local broker.
pub async fn amqp() -> lapin::Connection {
    lapin::Connection::connect(&super::amqp_url(), lapin::ConnectionProperties::default())
        .await
        .expect("AMQP")
}

/// Publishes one message through AMQP on `ch`, and waits for the broker's confirm.
pub async fn publish_on(
    ch: &lapin::Channel,
    exchange: &str,
    key: &str,
    body: &[u8],
    props: lapin::BasicProperties,
) {
    ch.basic_publish(
        exchange.into(),
        key.into(),
        lapin::options::BasicPublishOptions::default(),
        body,
        props,
    )
    .await
    .expect("publish")
    .await
    .expect("confirm");
}

/// Publishes one message through a connection of its own.
pub async fn publish(exchange: &str, key: &str, body: &[u8]) {
    publish_with(exchange, key, body, lapin::BasicProperties::default()).await;
}

/// Publishes one message with `props` through a connection of its own.
pub async fn publish_with(exchange: &str, key: &str, body: &[u8], props: lapin::BasicProperties) {
    let conn = amqp().await;
    let ch = conn.create_channel().await.expect("channel");
    publish_on(&ch, exchange, key, body, props).await;
    let _ = conn.close(200, "done".into()).await;
}

/// Takes (and acknowledges) every message of a queue, in order: the bodies, and the headers
/// with their values as text. Bounded: at most 20,000 messages.
pub async fn take_all(queue: &str) -> Vec<(Vec<u8>, BTreeMap<String, String>)> {
    take_each(queue, |d| (d.data.clone(), headers_of(&d.properties))).await
}

/// Takes (and acknowledges) every message of a queue, in order, each as `keep` reads it.
/// Bounded: at most 20,000 messages.
pub async fn take_each<T>(queue: &str, keep: impl Fn(&lapin::message::Delivery) -> T) -> Vec<T> {
    use lapin::options::{BasicAckOptions, BasicGetOptions};
    let conn = amqp().await;
    let ch = conn.create_channel().await.expect("channel");
    let mut out = Vec::new();
    for _ in 0..20_000 {
        let Some(m) = ch
            .basic_get(queue.into(), BasicGetOptions::default())
            .await
            .expect("basic.get")
        else {
            break;
        };
        out.push(keep(&m.delivery));
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .expect("ack");
    }
    let _ = conn.close(200, "done".into()).await;
    out
}

/// What an application does with the next message of `queue` on its channel `ch`, as the
/// tests' consumers do: `basic.get`, then `basic.reject` with `requeue=false` when `fails`
/// says so of its `message_id` (the queue dead-letters it), else `basic.ack`. The id and
/// whether it failed; `None` when the queue is empty.
pub async fn settle_next(
    ch: &lapin::Channel,
    queue: &str,
    fails: impl FnOnce(&str) -> bool,
) -> Option<(String, bool)> {
    use lapin::options::{BasicAckOptions, BasicGetOptions, BasicRejectOptions};
    let m = ch
        .basic_get(queue.into(), BasicGetOptions::default())
        .await
        .expect("basic.get")?;
    let id = m
        .delivery
        .properties
        .message_id()
        .as_ref()
        .map(|s| s.to_string())
        .expect("an id");
    let failed = fails(&id);
    if failed {
        m.delivery
            .acker
            .reject(BasicRejectOptions { requeue: false })
            .await
            .expect("reject");
    } else {
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .expect("ack");
    }
    Some((id, failed))
}

/// Publishes `n` messages to `queue` (through the default exchange) on one confirmed
/// channel, all in flight at once, then waits for every confirm; message `i` is `message(i)`:
/// its body and properties.
pub fn fill(queue: &str, n: usize, message: impl Fn(usize) -> (Vec<u8>, lapin::BasicProperties)) {
    block(async {
        let conn = amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        ch.confirm_select(Default::default())
            .await
            .expect("confirms");
        let mut confirms = Vec::with_capacity(n);
        for i in 0..n {
            let (body, props) = message(i);
            confirms.push(
                ch.basic_publish("".into(), queue.into(), Default::default(), &body, props)
                    .await
                    .expect("publish"),
            );
        }
        for c in confirms {
            c.await.expect("confirm");
        }
        let _ = conn.close(200, "done".into()).await;
    });
}

/// A message's headers, their values as text ([`amqp_text`]); none when it has none.
pub fn headers_of(props: &lapin::BasicProperties) -> BTreeMap<String, String> {
    props
        .headers()
        .as_ref()
        .map(|h| {
            h.inner()
                .iter()
                .map(|(k, v)| (k.to_string(), amqp_text(v)))
                .collect()
        })
        .unwrap_or_default()
}

/// A header table of these entries, as a producer sets it.
pub fn table(pairs: &[(&str, lapin::types::AMQPValue)]) -> lapin::types::FieldTable {
    let mut t = lapin::types::FieldTable::default();
    for (k, v) in pairs {
        t.insert(lapin::types::ShortString::from(*k), v.clone());
    }
    t
}

/// A header value of text (an AMQP long string).
pub fn text(s: &str) -> lapin::types::AMQPValue {
    lapin::types::AMQPValue::LongString(lapin::types::LongString::from(s))
}

/// A queue's exact count of ready messages, by a passive declare through AMQP (the
/// management API's figures lag).
pub fn count(queue: &str) -> u64 {
    block(async {
        let conn = amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        let q = ch
            .queue_declare(
                queue.into(),
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                lapin::types::FieldTable::default(),
            )
            .await
            .expect("passive declare");
        let _ = conn.close(200, "done".into()).await;
        u64::from(q.message_count())
    })
}

/// A header value as text (strings as they are, numbers in decimal, anything else debug).
pub fn amqp_text(v: &lapin::types::AMQPValue) -> String {
    use lapin::types::AMQPValue;
    match v {
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        AMQPValue::LongLongInt(n) => n.to_string(),
        AMQPValue::LongInt(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// The dead-letter exchange and its routing key that [`with_dead_letter_exchange`] names.
pub fn dead_letter_exchange(channel: &str) -> (String, String) {
    (
        format!("{channel}.dlx"),
        format!("{channel}.transactions.dead"),
    )
}

/// The orders example dead-lettering through a named exchange (issue 18's shape): `dlx: mode`,
/// `deadLetterExchange: {channel}.dlx` with the key `{channel}.transactions.dead`, no retry
/// queue (1 attempt) and a 2 s TTL on the main queue, so that a message rejected with
/// `requeue=false`, or one left to expire, goes through the exchange into the DLQ.
pub fn with_dead_letter_exchange(mode: &'static str) -> impl Fn(String) -> String {
    move |spec| {
        spec.replace(
            "    maxAttempts: 4\n    backoff: {initial: 5s}\n",
            "    maxAttempts: 1\n",
        )
        .replace(
            "  name: \"{channel}.process\"\n",
            "  name: \"{channel}.process\"\n  retention: 2s\n",
        )
        .replace(
            "    dlx: policy\n",
            &format!(
                "    dlx: {mode}\n    deadLetterExchange: {{name: \"{{channel}}.dlx\", routingKey: \"{{channel}}.transactions.dead\"}}\n"
            ),
        )
    }
}

/// Takes up to `n` messages from a queue within 15 s (acknowledged), as the broker delivers
/// them: exchange, routing key, body and headers as text.
pub async fn take_deliveries(
    queue: &str,
    n: usize,
) -> Vec<(String, String, Vec<u8>, BTreeMap<String, String>)> {
    use lapin::options::{BasicAckOptions, BasicGetOptions};
    let conn = amqp().await;
    let ch = conn.create_channel().await.expect("channel");
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while out.len() < n && std::time::Instant::now() < deadline {
        let Some(m) = ch
            .basic_get(queue.into(), BasicGetOptions::default())
            .await
            .expect("basic.get")
        else {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let d = &m.delivery;
        let headers = headers_of(&d.properties);
        out.push((
            d.exchange.to_string(),
            d.routing_key.to_string(),
            d.data.clone(),
            headers,
        ));
        d.acker.ack(BasicAckOptions::default()).await.expect("ack");
    }
    let _ = conn.close(200, "done".into()).await;
    out
}
