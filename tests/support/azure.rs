//! A contract fake of the Azure Service Bus management API (Azure Resource Manager), for the
//! tests only: no Service Bus emulator can run here (docs/azure.md), so the calls dlqctl makes
//! are answered by this server on 127.0.0.1, built to the documented REST contract and as
//! strict as the documentation allows. The product never uses it.
//!
//! What it implements, each behaviour with the reference it follows:
//!
//! - Queues: `PUT`, `GET`, `DELETE` of
//!   `/subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.ServiceBus/namespaces/{ns}/queues/{q}`
//!   and `GET .../queues` (list, `value` + `nextLink`, `$top`/`$skip`), api-version
//!   [`API_VERSION`]: the shapes of azure-rest-api-specs
//!   `specification/servicebus/resource-manager/Microsoft.ServiceBus/stable/2021-11-01/Queue.json`
//!   (<https://learn.microsoft.com/en-us/rest/api/servicebus/controlplane-stable/queues>).
//! - `PUT` is create-or-update and "idempotent" (Queues_CreateOrUpdate): the body replaces the
//!   queue's settings, a property left out takes its documented default (lockDuration "the
//!   default value is 1 minute", maxDeliveryCount "default value is 10", maxSizeInMegabytes
//!   "Default is 1024", duplicateDetectionHistoryTimeWindow "The default value is 10
//!   minutes"); defaultMessageTimeToLive's default is TimeSpan.MaxValue,
//!   `P10675199DT2H48M5.4775807S`, as the service returns it; the answer is 200 with the
//!   queue.
//! - Request checking: the body is `{"properties": {...}}` (SBQueue: `properties` is its only
//!   writable member; `id`, `name`, `type`, `location`, `systemData` are readOnly); every
//!   property must be one SBQueueProperties documents, of the documented type, and not
//!   `readOnly` (countDetails, createdAt, updatedAt, accessedAt, sizeInBytes, messageCount);
//!   anything else, `tags` included (SBQueue is a ProxyResource: it has no tags), is a 400.
//!   Ranges: lockDuration at most 5 minutes (its description), maxDeliveryCount at least 1,
//!   autoDeleteOnIdle at least 5 minutes (its description).
//! - Durations are ISO 8601 (`"format": "duration"`): `P[nD][T[nH][nM][n[.f]S]]`; years,
//!   months and weeks are refused (they have no fixed length). Answers write them back
//!   normalised (`PT30S` → `PT30S`, `PT90S` → `PT1M30S`), so a client that compares text
//!   instead of meaning sees a difference.
//! - `GET` of a missing queue: 404 with the ARM error body
//!   `{"error": {"code": "NotFound", "message": ...}}` (common/v1 `ErrorResponse`);
//!   `DELETE` answers 200, or 204 ("No content.") when there was nothing to delete.
//! - An api-version other than 2021-11-01 is a 400 `InvalidApiVersionParameter`, and a request
//!   without `Authorization: Bearer ...` a 401 `AuthenticationFailed` (ARM's common answers:
//!   <https://learn.microsoft.com/en-us/azure/azure-resource-manager/troubleshooting/common-deployment-errors>).
//! - `countDetails` (MessageCountDetails: activeMessageCount, deadLetterMessageCount,
//!   scheduledMessageCount, transferMessageCount, transferDeadLetterMessageCount) counts the
//!   messages the data plane holds (locked ones are active), after expired locks and
//!   messages are dealt with, plus what a test adds ([`AzureFake::set_dead_letters`]).
//!
//!
//! The data plane (the Service Bus REST runtime API), on a second server ([`AzureFake::data_url`],
//! the target's `dataUrl`), over the same queues: see [`data`] for what it implements, each
//! behaviour with the reference page it follows, and which behaviours are inferred.
//!
//! The Microsoft Entra token endpoint (client credentials), token audiences, and ARM's 429
//! and 409 answers when a test asks for them: see [`entra`], with the pages it follows.
//!
//! Topics and subscriptions (ARM and data plane): see [`topics`].
//!
//! Not implemented (nothing in dlqctl calls them): rules and filters, sessions,
//! scheduled messages, Send Message Batch, Receive and Delete.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use super::fake::{FakeApi, Request};

pub mod data;
pub mod entra;
pub mod topics;

pub const API_VERSION: &str = "2021-11-01";
pub const SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";
pub const RESOURCE_GROUP: &str = "dlqctl-tests";
pub const NAMESPACE: &str = "dlqctl-fake";
/// TimeSpan.MaxValue as Service Bus writes it: the default time-to-live.
pub const MAX_TIME_SPAN: &str = "P10675199DT2H48M5.4775807S";

/// One queue as the fake keeps it: its settings (durations as milliseconds), its messages
/// and its dead-letter subqueue's (the data plane), and counts a test adds on top
/// ([`AzureFake::set_dead_letters`]) for tests that need a depth and no message.
#[derive(Debug, Clone, Default)]
struct Queue {
    props: Map<String, Value>,
    dead_letters: u64,
    active: u64,
    messages: Vec<data::Msg>,
    dead: Vec<data::Msg>,
}

#[derive(Debug, Default)]
struct State {
    queues: BTreeMap<String, Queue>,
    /// Topics' settings (durations in ms); their subscriptions are in `queues` under
    /// `topic/subscriptions/sub` (topics.rs).
    topics: BTreeMap<String, Map<String, Value>>,
    /// The data plane's next SequenceNumber (one counter for the namespace).
    sequence: u64,
    /// Milliseconds the fake's clock is ahead of the wall clock ([`AzureFake::advance`]).
    clock_offset_ms: u64,
    /// Faults a test asks for: the next N sends answer 500.
    failing_sends: u64,
    /// Every data-plane request: (method, path).
    data_seen: Vec<(String, String)>,
    /// The token endpoint, audiences, and the ARM and send faults a test asked for.
    entra: entra::Tokens,
    /// Subscriptions' rules a test set (`topic/subscriptions/sub`); a subscription without
    /// an entry has the `$Default` rule only (topics.rs).
    rules: BTreeMap<String, Vec<Value>>,
}

/// The fake ARM server, its state, and every request it saw.
pub struct AzureFake {
    pub api: FakeApi,
    state: Arc<Mutex<State>>,
    data_url: String,
}

/// What SBQueueProperties documents, by name: its JSON type, and whether it is readOnly.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Type {
    Duration,
    Int,
    Bool,
    Text,
    Status,
    ReadOnly,
}

fn queue_property(name: &str) -> Option<Type> {
    use Type::*;
    Some(match name {
        "lockDuration"
        | "defaultMessageTimeToLive"
        | "duplicateDetectionHistoryTimeWindow"
        | "autoDeleteOnIdle" => Duration,
        "maxSizeInMegabytes" | "maxMessageSizeInKilobytes" | "maxDeliveryCount" => Int,
        "requiresDuplicateDetection"
        | "requiresSession"
        | "deadLetteringOnMessageExpiration"
        | "enableBatchedOperations"
        | "enablePartitioning"
        | "enableExpress" => Bool,
        "forwardTo" | "forwardDeadLetteredMessagesTo" => Text,
        // EntityStatus (common/v1): an enum.
        "status" => Status,
        "countDetails" | "createdAt" | "updatedAt" | "accessedAt" | "sizeInBytes"
        | "messageCount" => ReadOnly,
        _ => return None,
    })
}

/// EntityStatus's values (common/v1 definitions.json).
const STATUSES: [&str; 9] = [
    "Active",
    "Disabled",
    "Restoring",
    "SendDisabled",
    "ReceiveDisabled",
    "Creating",
    "Deleting",
    "Renaming",
    "Unknown",
];

/// The documented defaults of a new queue's settings (durations in milliseconds).
fn defaults() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("lockDuration".into(), json!(60_000));
    m.insert("maxSizeInMegabytes".into(), json!(1024));
    m.insert("requiresDuplicateDetection".into(), json!(false));
    m.insert("requiresSession".into(), json!(false));
    m.insert("defaultMessageTimeToLive".into(), json!(u64::MAX));
    m.insert("deadLetteringOnMessageExpiration".into(), json!(false));
    m.insert("duplicateDetectionHistoryTimeWindow".into(), json!(600_000));
    m.insert("maxDeliveryCount".into(), json!(10));
    m.insert("status".into(), json!("Active"));
    m.insert("enableBatchedOperations".into(), json!(true));
    m.insert("autoDeleteOnIdle".into(), json!(u64::MAX));
    m.insert("enablePartitioning".into(), json!(false));
    m.insert("enableExpress".into(), json!(false));
    m
}

/// An ISO 8601 duration (`P1DT2H3M4.5S`) as milliseconds; years, months and weeks refused.
pub fn parse_duration(text: &str) -> Option<u64> {
    if text == MAX_TIME_SPAN {
        return Some(u64::MAX);
    }
    let rest = text.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut ms: u64 = 0;
    if !date.is_empty() {
        let days = date.strip_suffix('D')?.parse::<u64>().ok()?;
        ms = ms.checked_add(days.checked_mul(86_400_000)?)?;
    }
    if let Some(t) = time {
        let mut number = String::new();
        let mut seen_any = false;
        for c in t.chars() {
            match c {
                '0'..='9' | '.' => number.push(c),
                'H' | 'M' | 'S' => {
                    let unit = match c {
                        'H' => 3_600_000.0,
                        'M' => 60_000.0,
                        _ => 1_000.0,
                    };
                    if c != 'S' && number.contains('.') {
                        return None;
                    }
                    let n = number.parse::<f64>().ok()?;
                    ms = ms.checked_add((n * unit).round() as u64)?;
                    number.clear();
                    seen_any = true;
                }
                _ => return None,
            }
        }
        if !number.is_empty() || !seen_any {
            return None;
        }
    }
    (text.len() > 1).then_some(ms)
}

/// Milliseconds as the normalised ISO 8601 duration the fake answers with.
pub fn format_duration(ms: u64) -> String {
    if ms == u64::MAX {
        return MAX_TIME_SPAN.to_owned();
    }
    let (d, rest) = (ms / 86_400_000, ms % 86_400_000);
    let (h, rest) = (rest / 3_600_000, rest % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let (s, frac) = (rest / 1000, rest % 1000);
    let mut out = String::from("P");
    if d > 0 {
        out.push_str(&format!("{d}D"));
    }
    if h > 0 || m > 0 || s > 0 || frac > 0 || d == 0 {
        out.push('T');
        if h > 0 {
            out.push_str(&format!("{h}H"));
        }
        if m > 0 {
            out.push_str(&format!("{m}M"));
        }
        if frac > 0 {
            let frac = format!("{frac:03}");
            out.push_str(&format!("{s}.{}S", frac.trim_end_matches('0')));
        } else if s > 0 || (h == 0 && m == 0) {
            out.push_str(&format!("{s}S"));
        }
    }
    out
}

/// An ARM error answer (common/v1 `ErrorResponse`).
fn error(status: u16, code: &str, message: impl Into<String>) -> (u16, String) {
    (
        status,
        json!({"error": {"code": code, "message": message.into()}}).to_string(),
    )
}

/// Checks a PUT body against SBQueue and SBQueueProperties; the settings it sets (durations
/// as milliseconds), or the 400 it gets.
fn check_queue_body(body: &str) -> Result<Map<String, Value>, (u16, String)> {
    let bad = |m: String| error(400, "BadRequest", m);
    let v: Value = serde_json::from_str(body).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    let Value::Object(top) = v else {
        return Err(bad("the body is not a JSON object".into()));
    };
    for k in top.keys() {
        if k != "properties" {
            return Err(bad(format!(
                "`{k}` is not a writable member of SBQueue (Queue.json 2021-11-01: `properties` only; a queue is a ProxyResource without tags)"
            )));
        }
    }
    let props = match top.get("properties") {
        None => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(bad("`properties` is not an object".into())),
    };
    let mut out = Map::new();
    for (k, v) in props {
        let Some(t) = queue_property(&k) else {
            return Err(bad(format!(
                "`properties.{k}` is not a property of SBQueueProperties (2021-11-01)"
            )));
        };
        let value = match (t, &v) {
            (Type::ReadOnly, _) => {
                return Err(bad(format!("`properties.{k}` is readOnly")));
            }
            (Type::Duration, Value::String(s)) => match parse_duration(s) {
                Some(ms) => json!(ms),
                None => {
                    return Err(bad(format!(
                        "`properties.{k}` is `{s}`, not an ISO 8601 duration of days, hours, minutes and seconds"
                    )));
                }
            },
            (Type::Int, Value::Number(n))
                if n.as_i64().is_some_and(|i| {
                    i32::try_from(i).is_ok() || k == "maxMessageSizeInKilobytes"
                }) =>
            {
                v.clone()
            }
            (Type::Bool, Value::Bool(_)) => v.clone(),
            (Type::Text, Value::String(_)) => v.clone(),
            (Type::Status, Value::String(s)) if STATUSES.contains(&s.as_str()) => v.clone(),
            _ => {
                return Err(bad(format!(
                    "`properties.{k}` is {v}, not of its documented type ({t:?})"
                )));
            }
        };
        out.insert(k, value);
    }
    let ms = |k: &str| out.get(k).and_then(Value::as_u64);
    if ms("lockDuration").is_some_and(|l| l > 300_000) {
        return Err(bad(
            "`properties.lockDuration`: the maximum value for LockDuration is 5 minutes".into(),
        ));
    }
    if ms("autoDeleteOnIdle").is_some_and(|l| l < 300_000) {
        return Err(bad(
            "`properties.autoDeleteOnIdle`: the minimum duration is 5 minutes".into(),
        ));
    }
    if out
        .get("maxDeliveryCount")
        .and_then(Value::as_i64)
        .is_some_and(|n| n < 1)
    {
        return Err(bad("`properties.maxDeliveryCount` is at least 1".into()));
    }
    Ok(out)
}

impl AzureFake {
    pub fn start() -> AzureFake {
        let state: Arc<Mutex<State>> = Arc::default();
        let s = Arc::clone(&state);
        let api = FakeApi::start_with_headers(move |r: &Request| {
            if let Some((status, body)) = entra::token_endpoint(&s, r) {
                return (status, Vec::new(), body);
            }
            if let Some((status, body)) = entra::identity_endpoint(&s, r) {
                return (status, Vec::new(), body);
            }
            if let Some(refused) = entra::arm_gate(&s, r) {
                return refused;
            }
            let (status, body) = answer(&s, r);
            (status, Vec::new(), body)
        });
        let data_url = data::serve(Arc::clone(&state));
        AzureFake {
            api,
            state,
            data_url,
        }
    }

    /// The data plane's base URL (`dataUrl` in a targets file).
    pub fn data_url(&self) -> &str {
        &self.data_url
    }

    /// The ARM base URL (`armUrl` in a targets file).
    pub fn url(&self) -> &str {
        &self.api.url
    }

    /// The namespace's path under `url()`.
    pub fn namespace_path() -> String {
        format!(
            "/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.ServiceBus/namespaces/{NAMESPACE}"
        )
    }

    /// A queue's settings as the fake keeps them (durations in ms), `None` when absent.
    pub fn queue(&self, name: &str) -> Option<Map<String, Value>> {
        let st = self.state.lock().expect("lock");
        st.queues.get(name).map(|q| q.props.clone())
    }

    /// Adds to what `countDetails` reports for a queue, beside the messages it holds: a depth
    /// without messages.
    pub fn set_dead_letters(&self, name: &str, dead_letters: u64, active: u64) {
        let mut st = self.state.lock().expect("lock");
        if let Some(q) = st.queues.get_mut(name) {
            q.dead_letters = dead_letters;
            q.active = active;
        }
    }
}

/// A queue as ARM answers it (SBQueue), durations normalised.
fn render(name: &str, q: &Queue) -> Value {
    let mut props = Map::new();
    for (k, v) in &q.props {
        let v = match queue_property(k) {
            Some(Type::Duration) => json!(format_duration(v.as_u64().unwrap_or(u64::MAX))),
            _ => v.clone(),
        };
        props.insert(k.clone(), v);
    }
    props.insert(
        "countDetails".into(),
        json!({
            "activeMessageCount": q.active + q.messages.len() as u64,
            "deadLetterMessageCount": q.dead_letters + q.dead.len() as u64,
            "scheduledMessageCount": 0,
            "transferMessageCount": 0,
            "transferDeadLetterMessageCount": 0
        }),
    );
    props.insert(
        "messageCount".into(),
        json!(q.active + q.dead_letters + (q.messages.len() + q.dead.len()) as u64),
    );
    props.insert("sizeInBytes".into(), json!(0));
    props.insert("createdAt".into(), json!("2026-12-03T00:00:00Z"));
    props.insert("updatedAt".into(), json!("2026-12-03T00:00:00Z"));
    props.insert("accessedAt".into(), json!("0001-01-01T00:00:00"));
    json!({
        "id": format!("{}/queues/{name}", AzureFake::namespace_path()),
        "name": name,
        "type": "Microsoft.ServiceBus/Namespaces/Queues",
        "location": "westeurope",
        "properties": props
    })
}

fn answer(state: &Mutex<State>, r: &Request) -> (u16, String) {
    let (path, query) = r.path.split_once('?').unwrap_or((&r.path, ""));
    let params: BTreeMap<&str, &str> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    if !r
        .header("authorization")
        .is_some_and(|a| a.starts_with("bearer ") && a.len() > "bearer ".len())
    {
        return error(
            401,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.",
        );
    }
    if params.get("api-version") != Some(&API_VERSION) {
        return error(
            400,
            "InvalidApiVersionParameter",
            format!(
                "The api-version '{}' is invalid. The supported versions include '{API_VERSION}'.",
                params.get("api-version").unwrap_or(&"")
            ),
        );
    }
    let Some(rest) = path.strip_prefix(&AzureFake::namespace_path()) else {
        return error(404, "ResourceNotFound", format!("no namespace at {path}"));
    };
    let mut st = state.lock().expect("lock");
    // Counts are true at the moment they are read: expired locks and messages first.
    data::sweep(&mut st);
    if let Some(a) = topics::answer(&mut st, r, rest) {
        return a;
    }
    match (r.method.as_str(), rest.strip_prefix("/queues")) {
        ("GET", Some("")) => {
            let skip = params
                .get("$skip")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let top: usize = params
                .get("$top")
                .and_then(|s| s.parse().ok())
                .unwrap_or(100);
            let all: Vec<Value> = st
                .queues
                .iter()
                .filter(|(n, _)| !n.contains('/'))
                .map(|(n, q)| render(n, q))
                .collect();
            let page: Vec<Value> = all.iter().skip(skip).take(top).cloned().collect();
            let mut body = json!({ "value": page });
            if skip + top < all.len() {
                body["nextLink"] = json!(format!(
                    "{}/queues?api-version={API_VERSION}&$skip={}&$top={top}",
                    AzureFake::namespace_path(),
                    skip + top
                ));
            }
            (200, body.to_string())
        }
        (method, Some(q)) if q.starts_with('/') && !q[1..].contains('/') => {
            let name = &q[1..];
            match method {
                "GET" => match st.queues.get(name) {
                    Some(queue) => (200, render(name, queue).to_string()),
                    None => error(
                        404,
                        "NotFound",
                        format!("Entity '{NAMESPACE}:Queue:{name}' was not found."),
                    ),
                },
                "PUT" => {
                    let set = match check_queue_body(&r.body) {
                        Ok(s) => s,
                        Err(e) => return e,
                    };
                    let mut props = defaults();
                    props.extend(set);
                    let queue = st.queues.entry(name.to_owned()).or_default();
                    queue.props = props;
                    (200, render(name, queue).to_string())
                }
                "DELETE" => match st.queues.remove(name) {
                    Some(_) => (200, String::new()),
                    None => (204, String::new()),
                },
                _ => error(405, "MethodNotAllowed", format!("{method} {path}")),
            }
        }
        _ => error(
            404,
            "NotFound",
            format!("the fake has no {} {path}", r.method),
        ),
    }
}

/// A workspace whose `azure-servicebus` target is this fake (`armUrl` and `dataUrl`; token
/// `test-token` in `AZURE_ACCESS_TOKEN`), with examples/shipments-servicebus.yaml under a fresh channel name
/// inside the target's ownership prefix (`shipments-`).
pub struct Fixture {
    pub ws: super::workspace::Workspace,
    pub fake: AzureFake,
}

impl Fixture {
    pub fn new() -> Fixture {
        let fake = AzureFake::start();
        let mut ws = super::workspace::Workspace::new(
            "shipments-servicebus.yaml",
            "shipments-",
            &super::workspace::Endpoints::default(),
        );
        let url = fake.url().to_owned();
        let data = fake.data_url().to_owned();
        ws.edit_targets(|t| {
            t.replace(
                "subscriptionId: 00000000-0000-0000-0000-000000000000\n    resourceGroup: logistics\n    namespace: logistics-prod\n",
                &format!(
                    "subscriptionId: {SUBSCRIPTION}\n    resourceGroup: {RESOURCE_GROUP}\n    namespace: {NAMESPACE}\n    armUrl: {url}\n    dataUrl: {data}\n"
                ),
            )
        });
        ws.set_env("AZURE_ACCESS_TOKEN", "test-token");
        ws.write_example(|t| t);
        Fixture { ws, fake }
    }

    /// The ARM URL of one of this fake's queues.
    pub fn queue_url(&self, name: &str) -> String {
        format!(
            "{}{}/queues/{name}?api-version={API_VERSION}",
            self.fake.url(),
            AzureFake::namespace_path()
        )
    }
}

impl Fixture {
    /// The target authenticates with the machine's managed identity, served by the fake's
    /// instance metadata service (`client_id`: a user-assigned identity's, in the targets file
    /// as `clientId`). The tokens it issues carry their audience (refused by the other API).
    pub fn with_managed_identity(self, client_id: Option<&str>) -> Fixture {
        let url = self.fake.identity_url();
        let id = client_id.map_or(String::new(), |c| format!("    clientId: {c}\n"));
        self.ws.edit_targets(|t| {
            t.replace(
                "accessTokenEnv: AZURE_ACCESS_TOKEN\n",
                &format!("managedIdentity: true\n{id}    identityUrl: {url}\n"),
            )
        });
        self
    }

    /// The target authenticates with client credentials at the fake's token endpoint
    /// (application `dlqctl-app`, its secret in `AZURE_CLIENT_SECRET`) instead of a ready token.
    pub fn with_client_credentials(mut self, secret_given: &str) -> Fixture {
        self.fake
            .register_client("dlqctl-app", "the-real-s3cret-value");
        let url = self.fake.token_url("dlqctl-tenant");
        self.ws.edit_targets(|t| {
            t.replace(
                "accessTokenEnv: AZURE_ACCESS_TOKEN\n",
                &format!(
                    "tenantId: dlqctl-tenant\n    clientId: dlqctl-app\n    clientSecretEnv: AZURE_CLIENT_SECRET\n    tokenUrl: {url}\n"
                ),
            )
        });
        self.ws.set_env("AZURE_CLIENT_SECRET", secret_given);
        self
    }
}
