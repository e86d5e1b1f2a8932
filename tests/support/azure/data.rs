//! The contract fake's data plane: the Service Bus REST runtime API over the fake's queues, on
//! its own server on 127.0.0.1 (the target's `dataUrl`), for the tests only.
//!
//! From the reference (learn.microsoft.com/rest/api/servicebus/, the page named in brackets):
//!
//! - ["Send Message"] `POST /{queue}/messages`: the body is the payload; `BrokerProperties` is
//!   a JSON object of the BrokeredMessage properties ["Message properties" / introduction:
//!   CorrelationId, ForcePersistence, Label, MessageId, PartitionKey, ReplyTo,
//!   ReplyToSessionId, ScheduledEnqueueTimeUtc, SessionId, TimeToLive, To, ViaPartitionKey];
//!   every other header that is not a standard HTTP one (nor `x-ms-retrypolicy`) is a custom
//!   property. 201 when sent; 410 "Specified queue or topic doesn't exist"; 401 without a
//!   token; 500 "Internal error" (what [`AzureFake::fail_sends`] makes it answer).
//! - ["Peek-Lock Message (Non-Destructive Read)"] `POST /{entity}/messages/head?timeout=N`:
//!   201 with the body, `BrokerProperties` (DeliveryCount, EnqueuedSequenceNumber,
//!   EnqueuedTimeUtc, LockToken, LockedUntilUtc, MessageId, SequenceNumber, State,
//!   TimeToLive, and what the sender set), a `Location` of the locked message
//!   (`/{entity}/messages/{sequenceNumber}/{lockToken}`) and the custom properties as
//!   headers; 204 "No messages available within the specified timeout period"; 410 when the
//!   entity does not exist. The message is not delivered to another receiver while locked.
//! - ["Unlock Message"] `PUT` on the lock URI: 200, the message is available again; 404 "No
//!   message was found with the specified MessageId or LockToken".
//! - ["Delete Message"] `DELETE` on the lock URI: 200, the message is gone; 404 as above.
//! - ["Renew-Lock for a Message"] `POST` on the lock URI: 200, locked for another
//!   lockDuration; 404 as above.
//! - [Overview of Service Bus dead-letter queues] the subqueue is `{queue}/$DeadLetterQueue`
//!   (any case); a message delivered maxDeliveryCount times and then abandoned, or whose lock
//!   expired, moves there with `DeadLetterReason` `MaxDeliveryCountExceeded`; an expired
//!   message moves there with `TTLExpiredException` when the queue has
//!   deadLetteringOnMessageExpiration (else it is dropped); time-to-live is not observed in
//!   the subqueue and nothing is dead-lettered from it; messages cannot be sent to it. The
//!   reason and description are added to the message's (custom) properties.
//! - [ServiceBusReceivedMessage.DeliveryCount / QueueProperties.MaxDeliveryCount] the delivery
//!   count is raised when a lock expires or the message is abandoned; "A message is
//!   automatically deadlettered after this number of deliveries".
//! - [SBQueueProperties.forwardDeadLetteredMessagesTo (ARM)] a queue that names another queue
//!   there sends its dead letters to that queue instead of its subqueue, with
//!   `DeadLetterSource` (the queue it was dead-lettered in) in their BrokerProperties
//!   [Message.SystemPropertiesCollection.DeadLetterSource].
//!
//! Inferred, not stated in the reference (say so when a test leans on one):
//! - custom property values: the examples send `Priority: High` and receive `Priority:
//!   "High"`; the fake reads a value as JSON when it parses, else as a string, and answers
//!   every value as JSON;
//! - where the count is raised: the fake counts a delivery when the message is locked (the
//!   first peek-lock answers DeliveryCount 1, as the reference's example does), which is the
//!   same count a receiver sees after an abandon or an expired lock;
//! - a dead-lettered message keeps its MessageId, SequenceNumber, body, properties and
//!   delivery count; a forwarded one starts the target queue's count from 0;
//! - a message's TimeToLive is capped by the queue's defaultMessageTimeToLive;
//! - error bodies are `<Error><Code>N</Code><Detail>…</Detail></Error>`, as the service has
//!   been seen to answer; a send to `$DeadLetterQueue` is a 400;
//! - `timeout` is accepted (0–3600) and not waited on: an empty entity answers 204 at once.
//!
//! Anything else a request carries is refused with 400: an undocumented BrokerProperties
//! name or a mistyped value, a `timeout` that is not a number of seconds, a method the page
//! does not list. The product never uses this server.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};

use super::{AzureFake, State};

/// The sender-settable BrokerProperties and their JSON types ("Message properties").
const SETTABLE: [(&str, Kind); 12] = [
    ("CorrelationId", Kind::Text),
    ("ForcePersistence", Kind::Bool),
    ("Label", Kind::Text),
    ("MessageId", Kind::Text),
    ("PartitionKey", Kind::Text),
    ("ReplyTo", Kind::Text),
    ("ReplyToSessionId", Kind::Text),
    ("ScheduledEnqueueTimeUtc", Kind::Text),
    ("SessionId", Kind::Text),
    ("TimeToLive", Kind::Number),
    ("To", Kind::Text),
    ("ViaPartitionKey", Kind::Text),
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Bool,
    Number,
}

/// Request headers that are not custom properties: HTTP's own, and the ones the Send Message
/// page lists.
const NOT_CUSTOM: [&str; 12] = [
    "host",
    "authorization",
    "content-type",
    "content-length",
    "brokerproperties",
    "user-agent",
    "accept",
    "accept-encoding",
    "connection",
    "transfer-encoding",
    "te",
    "x-ms-retrypolicy",
];

/// The reasons the dead-letter overview lists for what the broker dead-letters.
pub const MAX_DELIVERY: (&str, &str) = (
    "MaxDeliveryCountExceeded",
    "Message could not be consumed after 10 delivery attempts.",
);
pub const TTL_EXPIRED: (&str, &str) = (
    "TTLExpiredException",
    "The message expired and was dead lettered.",
);

/// One message as the data plane keeps it.
#[derive(Debug, Clone)]
pub struct Msg {
    pub message_id: String,
    pub sequence: u64,
    pub body: Vec<u8>,
    pub content_type: Option<String>,
    /// What the sender set of [`SETTABLE`] (and `DeadLetterSource` after a forward).
    pub broker: Map<String, Value>,
    /// Custom properties in the order sent: name (as HTTP/1 carried it, lowercase) and value.
    pub custom: Vec<(String, Value)>,
    pub delivery_count: u64,
    pub enqueued_ms: u64,
    /// When it expires (its TimeToLive, capped by the queue's), `None`: never.
    pub expires_ms: Option<u64>,
    /// The lock: its token and until when it holds.
    pub lock: Option<(String, u64)>,
}

impl Msg {
    /// A custom property's value as text (a JSON string unquoted).
    pub fn property(&self, name: &str) -> Option<String> {
        self.custom
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn now(st: &State) -> u64 {
    wall_ms() + st.clock_offset_ms
}

/// `ms` since the epoch as RFC 1123 (`Wed, 02 Jul 2014 01:32:27 GMT`), as BrokerProperties
/// writes times.
fn http_date(ms: u64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp((ms / 1000) as i64)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let weekday = &t.weekday().to_string()[..3];
    let month = &t.month().to_string()[..3];
    format!(
        "{weekday}, {:02} {month} {} {:02}:{:02}:{:02} GMT",
        t.day(),
        t.year(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

fn queue_ms(props: &Map<String, Value>, key: &str, default: u64) -> u64 {
    props.get(key).and_then(Value::as_u64).unwrap_or(default)
}

/// Dead-letters `m` out of queue `name`: into the queue its `forwardDeadLetteredMessagesTo`
/// names (when that exists), else into its own subqueue, with the reason and description
/// added to its properties.
fn dead_letter(st: &mut State, name: &str, mut m: Msg, (reason, description): (&str, &str)) {
    m.lock = None;
    m.expires_ms = None;
    m.custom.retain(|(k, _)| {
        !k.eq_ignore_ascii_case("DeadLetterReason")
            && !k.eq_ignore_ascii_case("DeadLetterErrorDescription")
    });
    m.custom
        .push(("DeadLetterReason".into(), Value::String(reason.into())));
    let description = if reason == MAX_DELIVERY.0 {
        format!(
            "Message could not be consumed after {} delivery attempts.",
            m.delivery_count
        )
    } else {
        description.to_owned()
    };
    m.custom.push((
        "DeadLetterErrorDescription".into(),
        Value::String(description),
    ));
    let forward = st
        .queues
        .get(name)
        .and_then(|q| q.props.get("forwardDeadLetteredMessagesTo"))
        .and_then(Value::as_str)
        .filter(|f| !f.is_empty())
        .map(str::to_owned);
    if let Some(f) = forward
        && st.queues.contains_key(&f)
    {
        m.broker
            .insert("DeadLetterSource".into(), Value::String(name.to_owned()));
        m.delivery_count = 0;
        if let Some(q) = st.queues.get_mut(&f) {
            q.messages.push(m);
        }
        return;
    }
    if let Some(q) = st.queues.get_mut(name) {
        q.dead.push(m);
        q.dead.sort_by_key(|m| m.sequence);
    }
}

/// Expired locks and expired messages, dealt with as the broker would by now: a lock that
/// ran out returns its message (dead-lettered if that was its last delivery); an active
/// message past its time-to-live is dead-lettered (deadLetteringOnMessageExpiration) or
/// dropped. Nothing in a subqueue expires or is dead-lettered.
pub(super) fn sweep(st: &mut State) {
    let t = now(st);
    let names: Vec<String> = st.queues.keys().cloned().collect();
    for name in names {
        let Some(q) = st.queues.get_mut(&name) else {
            continue;
        };
        let max = q
            .props
            .get("maxDeliveryCount")
            .and_then(Value::as_u64)
            .unwrap_or(10);
        let on_expiry = q
            .props
            .get("deadLetteringOnMessageExpiration")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        for m in &mut q.dead {
            if m.lock.as_ref().is_some_and(|(_, until)| *until <= t) {
                m.lock = None;
            }
        }
        let mut out: Vec<(Msg, (&str, &str))> = Vec::new();
        let mut keep = Vec::with_capacity(q.messages.len());
        for mut m in std::mem::take(&mut q.messages) {
            if m.lock.as_ref().is_some_and(|(_, until)| *until <= t) {
                m.lock = None;
                if m.delivery_count >= max {
                    out.push((m, MAX_DELIVERY));
                    continue;
                }
            }
            if m.lock.is_none() && m.expires_ms.is_some_and(|e| e <= t) {
                if on_expiry {
                    out.push((m, TTL_EXPIRED));
                }
                continue;
            }
            keep.push(m);
        }
        q.messages = keep;
        for (m, why) in out {
            dead_letter(st, &name, m, why);
        }
    }
}

/// An error answer as the service writes it (inferred: `<Error><Code>…`).
fn error(status: u16, detail: &str) -> Answer {
    Answer {
        status,
        headers: vec![(
            "content-type".into(),
            "application/xml; charset=utf-8".into(),
        )],
        body: format!("<Error><Code>{status}</Code><Detail>{detail}</Detail></Error>").into_bytes(),
    }
}

#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn empty(status: u16) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }
}

/// An entity path: the queue, and whether it names its `$DeadLetterQueue`.
fn entity(path: &str) -> Option<(String, bool)> {
    let mut parts = path.split('/');
    let queue = parts.next().filter(|q| !q.is_empty())?;
    match parts.next() {
        None => Some((queue.to_owned(), false)),
        Some(s) if s.eq_ignore_ascii_case("$DeadLetterQueue") && parts.next().is_none() => {
            Some((queue.to_owned(), true))
        }
        _ => None,
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// A custom property header's value: JSON when it parses, else a string (inferred).
fn custom_value(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// A JSON value as a header value: non-ASCII escaped, so the header stays visible ASCII.
fn header_json(v: &Value) -> String {
    let text = v.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() && !c.is_ascii_control() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

fn handle(
    state: &Mutex<State>,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> Answer {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let header = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
    };
    if !header("authorization").is_some_and(|a| {
        a.len() > "Bearer ".len()
            && a.get(.."Bearer ".len())
                .is_some_and(|b| b.eq_ignore_ascii_case("bearer "))
    }) {
        return error(401, "Authorization failure: no bearer token.");
    }
    let path = percent_decode(path.trim_start_matches('/'));
    // Topics: a send fans out to the subscriptions (topics.rs), each copy through the send
    // below.
    if let Some((status, detail)) = super::topics::intercept(state, method, &path, |p| {
        let a = handle(state, "POST", p, headers, body.clone());
        (a.status, String::from_utf8_lossy(&a.body).into_owned())
    }) {
        return if status == 201 {
            Answer::empty(201)
        } else {
            error(status, &detail)
        };
    }
    let mut st = state.lock().expect("lock");
    st.data_seen.push((method.to_owned(), path.clone()));
    if let Some((status, detail)) =
        super::entra::data_gate(&mut st, method, &path, header("authorization"))
    {
        return error(status, &detail);
    }
    sweep(&mut st);
    let now_ms = now(&st);
    // `{entity}/messages`, `{entity}/messages/head`, `{entity}/messages/{id}/{lock}`.
    let Some(at) = path.find("/messages") else {
        return error(404, &format!("the fake has no {method} /{path}"));
    };
    let (entity_path, rest) = (&path[..at], &path[at + "/messages".len()..]);
    let Some((queue, dlq)) = super::topics::entity(entity_path).or_else(|| entity(entity_path))
    else {
        return error(
            400,
            &format!("`{entity_path}` is not a queue or its $DeadLetterQueue"),
        );
    };
    if !st.queues.contains_key(&queue) {
        return error(
            410,
            &format!("The messaging entity '{queue}' could not be found."),
        );
    }
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    match (method, segments.as_slice()) {
        ("POST", []) => {
            if dlq {
                return error(
                    400,
                    "messages can only be submitted to a dead-letter queue by the dead-letter operation of its parent entity",
                );
            }
            if st.failing_sends > 0 {
                st.failing_sends -= 1;
                return error(500, "Internal error (asked for by the test).");
            }
            let broker = match header("brokerproperties") {
                None => Map::new(),
                Some(text) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(m)) => m,
                    _ => return error(400, "BrokerProperties is not a JSON object"),
                },
            };
            for (k, v) in &broker {
                let Some((_, kind)) = SETTABLE.iter().find(|(n, _)| n == k) else {
                    return error(
                        400,
                        &format!("`{k}` is not a BrokerProperties property a sender sets"),
                    );
                };
                let ok = match kind {
                    Kind::Text => v.is_string(),
                    Kind::Bool => v.is_boolean(),
                    Kind::Number => v.as_f64().is_some_and(|n| n > 0.0),
                };
                if !ok {
                    return error(
                        400,
                        &format!("BrokerProperties `{k}` is {v}, not of its type ({kind:?})"),
                    );
                }
            }
            let custom: Vec<(String, Value)> = headers
                .iter()
                .filter(|(k, _)| !NOT_CUSTOM.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), custom_value(v)))
                .collect();
            st.sequence += 1;
            let sequence = st.sequence;
            let q = st.queues.get_mut(&queue).expect("checked above");
            let queue_ttl = queue_ms(&q.props, "defaultMessageTimeToLive", u64::MAX);
            let ttl = broker
                .get("TimeToLive")
                .and_then(Value::as_f64)
                .map_or(queue_ttl, |s| ((s * 1000.0) as u64).min(queue_ttl));
            let message_id = broker
                .get("MessageId")
                .and_then(Value::as_str)
                .map_or_else(|| format!("{sequence:032x}"), str::to_owned);
            q.messages.push(Msg {
                message_id,
                sequence,
                body,
                content_type: header("content-type").map(str::to_owned),
                broker,
                custom,
                delivery_count: 0,
                enqueued_ms: now_ms,
                expires_ms: now_ms.checked_add(ttl).filter(|_| ttl != u64::MAX),
                lock: None,
            });
            Answer::empty(201)
        }
        ("POST", ["head"]) => {
            for kv in query.split('&').filter(|kv| !kv.is_empty()) {
                match kv.split_once('=') {
                    Some(("timeout", v)) if v.parse::<u32>().is_ok_and(|t| t <= 3600) => {}
                    _ => return error(400, &format!("`{kv}` is not a Peek-Lock parameter")),
                }
            }
            let q = st.queues.get_mut(&queue).expect("checked above");
            let lock_ms = queue_ms(&q.props, "lockDuration", 60_000);
            let list = if dlq { &mut q.dead } else { &mut q.messages };
            let Some(m) = list.iter_mut().find(|m| m.lock.is_none()) else {
                return Answer::empty(204);
            };
            m.delivery_count += 1;
            let token = format!(
                "{:08x}-{:04x}-4000-8000-{:012x}",
                m.sequence, m.delivery_count, now_ms
            );
            let until = now_ms + lock_ms;
            m.lock = Some((token.clone(), until));
            let mut broker = m.broker.clone();
            broker.insert("DeliveryCount".into(), json!(m.delivery_count));
            broker.insert("EnqueuedSequenceNumber".into(), json!(0));
            broker.insert("EnqueuedTimeUtc".into(), json!(http_date(m.enqueued_ms)));
            broker.insert("LockToken".into(), json!(token));
            broker.insert("LockedUntilUtc".into(), json!(http_date(until)));
            broker.insert("MessageId".into(), json!(m.message_id));
            broker.insert("SequenceNumber".into(), json!(m.sequence));
            broker.insert("State".into(), json!("Active"));
            if let Some(e) = m.expires_ms {
                broker.insert(
                    "TimeToLive".into(),
                    json!((e.saturating_sub(m.enqueued_ms)) as f64 / 1000.0),
                );
            }
            let mut headers = vec![
                (
                    "brokerproperties".to_owned(),
                    header_json(&Value::Object(broker)),
                ),
                (
                    "location".to_owned(),
                    format!("/{entity_path}/messages/{}/{token}", m.sequence),
                ),
                (
                    "content-type".to_owned(),
                    m.content_type
                        .clone()
                        .unwrap_or_else(|| "application/atom+xml;type=entry;charset=utf-8".into()),
                ),
            ];
            for (k, v) in &m.custom {
                headers.push((k.clone(), header_json(v)));
            }
            Answer {
                status: 201,
                headers,
                body: m.body.clone(),
            }
        }
        (_, [id, lock]) => {
            let max = st
                .queues
                .get(&queue)
                .and_then(|q| q.props.get("maxDeliveryCount"))
                .and_then(Value::as_u64)
                .unwrap_or(10);
            let q = st.queues.get_mut(&queue).expect("checked above");
            let list = if dlq { &mut q.dead } else { &mut q.messages };
            let Some(i) = list.iter().position(|m| {
                (m.sequence.to_string() == *id || m.message_id == *id)
                    && m.lock.as_ref().is_some_and(|(t, _)| t.as_str() == *lock)
            }) else {
                return error(
                    404,
                    "No message was found with the specified MessageId or LockToken.",
                );
            };
            match method {
                "DELETE" => {
                    list.remove(i);
                    Answer::empty(200)
                }
                "PUT" => {
                    list[i].lock = None;
                    if !dlq && list[i].delivery_count >= max {
                        let m = list.remove(i);
                        dead_letter(&mut st, &queue, m, MAX_DELIVERY);
                    }
                    Answer::empty(200)
                }
                "POST" => {
                    let lock_ms = queue_ms(&q.props, "lockDuration", 60_000);
                    let list = if dlq { &mut q.dead } else { &mut q.messages };
                    if let Some((_, until)) = &mut list[i].lock {
                        *until = now_ms + lock_ms;
                    }
                    Answer::empty(200)
                }
                _ => error(
                    400,
                    &format!("{method} is not an operation on a locked message"),
                ),
            }
        }
        _ => error(400, &format!("the fake has no {method} /{path}")),
    }
}

/// Starts the data-plane server; its base URL. Bounded: at most 100,000 connections.
pub(super) fn serve(state: Arc<Mutex<State>>) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind 127.0.0.1");
            tx.send(listener.local_addr().expect("addr"))
                .expect("send addr");
            for _ in 0..100_000 {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let state = Arc::clone(&state);
                tokio::spawn(async move {
                    let service =
                        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                            let state = Arc::clone(&state);
                            async move {
                                let method = req.method().as_str().to_owned();
                                let path = req
                                    .uri()
                                    .path_and_query()
                                    .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
                                let headers: Vec<(String, String)> = req
                                    .headers()
                                    .iter()
                                    .map(|(k, v)| {
                                        (
                                            k.as_str().to_owned(),
                                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                                        )
                                    })
                                    .collect();
                                let body = req
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes().to_vec())
                                    .unwrap_or_default();
                                let a = handle(&state, &method, &path, &headers, body);
                                let mut resp = Response::builder().status(a.status);
                                for (k, v) in a.headers {
                                    resp = resp.header(k, v);
                                }
                                Ok::<_, std::convert::Infallible>(
                                    resp.body(Full::new(Bytes::from(a.body))).expect("response"),
                                )
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(sock), service)
                        .await;
                });
            }
        });
    });
    let addr = rx.recv().expect("data plane address");
    format!("http://{addr}")
}

impl AzureFake {
    /// Messages waiting in a queue (locked ones too), in order.
    pub fn messages(&self, queue: &str) -> Vec<Msg> {
        let mut st = self.state.lock().expect("lock");
        sweep(&mut st);
        st.queues
            .get(queue)
            .map(|q| q.messages.clone())
            .unwrap_or_default()
    }

    /// Messages in a queue's `$DeadLetterQueue`, in order.
    pub fn dead_letters(&self, queue: &str) -> Vec<Msg> {
        let mut st = self.state.lock().expect("lock");
        sweep(&mut st);
        st.queues
            .get(queue)
            .map(|q| q.dead.clone())
            .unwrap_or_default()
    }

    /// Moves the fake's clock forward (locks and time-to-live run out without a wait).
    pub fn advance(&self, by: std::time::Duration) {
        let mut st = self.state.lock().expect("lock");
        st.clock_offset_ms += by.as_millis() as u64;
        sweep(&mut st);
    }

    /// The next `n` sends answer 500 ("Internal error").
    pub fn fail_sends(&self, n: u64) {
        self.state.lock().expect("lock").failing_sends = n;
    }

    /// Every data-plane request: (method, path without the query).
    pub fn data_requests(&self) -> Vec<(String, String)> {
        self.state.lock().expect("lock").data_seen.clone()
    }
}

/// A client of the fake's data plane, as an application would use it (tests drive the
/// broker through it: a producer, and a consumer that fails).
pub struct Client {
    http: reqwest::Client,
    base: String,
}

/// A message a [`Client`] received and holds locked.
#[derive(Debug, Clone)]
pub struct Received {
    pub broker: Value,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub lock_path: String,
}

impl Client {
    pub fn new(fake: &AzureFake) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: fake.data_url().to_owned(),
        }
    }

    /// Send Message: `custom` as custom property headers (values sent as JSON strings).
    pub async fn send(
        &self,
        entity: &str,
        message_id: &str,
        body: &str,
        custom: &[(&str, &str)],
    ) -> u16 {
        self.send_bytes(entity, message_id, body.as_bytes().to_vec(), custom)
            .await
    }

    /// [`Client::send`] of any bytes.
    pub async fn send_bytes(
        &self,
        entity: &str,
        message_id: &str,
        body: Vec<u8>,
        custom: &[(&str, &str)],
    ) -> u16 {
        let mut req = self
            .http
            .post(format!("{}/{entity}/messages", self.base))
            .bearer_auth("test-token")
            .header("content-type", "text/plain")
            .header(
                "BrokerProperties",
                json!({ "MessageId": message_id }).to_string(),
            )
            .body(body);
        for (k, v) in custom {
            req = req.header(*k, Value::String((*v).to_owned()).to_string());
        }
        req.send()
            .await
            .expect("the fake answers")
            .status()
            .as_u16()
    }

    /// Peek-Lock: the message, or `None` on 204.
    pub async fn peek_lock(&self, entity: &str) -> Option<Received> {
        let resp = self
            .http
            .post(format!("{}/{entity}/messages/head?timeout=0", self.base))
            .bearer_auth("test-token")
            .send()
            .await
            .expect("the fake answers");
        match resp.status().as_u16() {
            204 => None,
            201 => {
                let headers: Vec<(String, String)> = resp
                    .headers()
                    .iter()
                    .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                    .collect();
                let broker: Value = headers
                    .iter()
                    .find(|(k, _)| k == "brokerproperties")
                    .and_then(|(_, v)| serde_json::from_str(v).ok())
                    .expect("BrokerProperties");
                let lock_path = headers
                    .iter()
                    .find(|(k, _)| k == "location")
                    .map(|(_, v)| v.clone())
                    .expect("Location");
                let body = resp.bytes().await.expect("body").to_vec();
                Some(Received {
                    broker,
                    headers,
                    body,
                    lock_path,
                })
            }
            s => panic!("peek-lock answered {s}"),
        }
    }

    /// Unlock Message (abandon): the status.
    pub async fn unlock(&self, m: &Received) -> u16 {
        self.on_lock(reqwest::Method::PUT, m).await
    }

    /// Delete Message (complete): the status.
    pub async fn complete(&self, m: &Received) -> u16 {
        self.on_lock(reqwest::Method::DELETE, m).await
    }

    async fn on_lock(&self, method: reqwest::Method, m: &Received) -> u16 {
        self.http
            .request(method, format!("{}{}", self.base, m.lock_path))
            .bearer_auth("test-token")
            .send()
            .await
            .expect("the fake answers")
            .status()
            .as_u16()
    }
}
