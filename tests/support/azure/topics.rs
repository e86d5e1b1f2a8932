//! The contract fake's topics and subscriptions, ARM and data plane, for the tests only (kept
//! apart from the queues' code in `azure.rs` and `data.rs`, which it hooks into).
//!
//! ARM (azure-rest-api-specs, `specification/servicebus/resource-manager/Microsoft.ServiceBus/
//! stable/2021-11-01/topics.json` and `subscriptions.json`;
//! <https://learn.microsoft.com/en-us/rest/api/servicebus/controlplane-stable/topics> and
//! `.../subscriptions`):
//!
//! - `PUT`, `GET`, `DELETE` of `.../namespaces/{ns}/topics/{t}` (Topics_CreateOrUpdate,
//!   Topics_Get, Topics_Delete) and `GET .../topics` (Topics_ListByNamespace, `value` +
//!   `nextLink`); the same of `.../topics/{t}/subscriptions/{s}` (Subscriptions_*) and `GET
//!   .../topics/{t}/subscriptions` (Subscriptions_ListByTopic). A PUT replaces the entity's
//!   settings (what it leaves out takes its default, as for queues); 200 with the entity.
//! - Request checking as for queues: `properties` is the only writable member (SBTopic and
//!   SBSubscription are ProxyResources: no `tags`); each property must be one
//!   SBTopicProperties / SBSubscriptionProperties documents, of its type, and not readOnly
//!   (topics: sizeInBytes, createdAt, updatedAt, accessedAt, subscriptionCount, countDetails;
//!   subscriptions: messageCount, createdAt, accessedAt, updatedAt, countDetails), else 400.
//!   lockDuration at most 5 minutes, maxDeliveryCount at least 1, autoDeleteOnIdle at least 5
//!   minutes (their descriptions, as for queues).
//! - `GET .../subscriptions/{s}/rules` (Rules_ListBySubscriptions, rules.json 2021-11-01):
//!   the subscription's rules, `{"value": [Rule]}`; a subscription has the `$Default` rule
//!   (filterType `SqlFilter`, sqlExpression `1=1`: "Topic filters and actions", "each newly
//!   created subscription has an initial default subscription rule ... a TrueFilter", which
//!   ARM shows as the SQL filter `1=1`) unless a test set others ([`AzureFake::set_rules`];
//!   the fake has no PUT of a rule). The fake lists rules but does not apply them: every
//!   subscription receives every send (below).
//! - A subscription of a missing topic: 404 (GET, PUT); a missing topic or subscription: 404
//!   with ARM's error body; `DELETE` of a topic deletes its subscriptions (Topics_Delete
//!   "Deletes a topic from the specified namespace and resource group", with what it holds).
//! - `countDetails` per subscription counts the messages its data plane holds.
//!
//! The data plane (the REST runtime API; the subscription's entity path is
//! `{topic}/subscriptions/{subscription}` ["Peek-Lock Message (Non-Destructive Read)": "Queue
//! or topic/subscription"], its dead letters `{topic}/subscriptions/{subscription}/
//! $DeadLetterQueue` [Overview of dead-letter queues]):
//!
//! - ["Send Message"] `POST /{topic}/messages`: every subscription of the topic receives a
//!   copy [Service Bus topics and subscriptions: "each subscription ... receives a copy of
//!   each message sent to the topic"]. The fake has no rules: every subscription has the
//!   default rule, whose filter is the TrueFilter ("Topic filters and actions": "each newly
//!   created subscription has an initial default subscription rule ... a TrueFilter"). A
//!   topic without subscriptions takes the message and drops it (201).
//! - A send to a subscription is a 400 (inferred: "Send Message" names "queue or topic"
//!   only; messages are sent to the topic).
//! - Peek-lock, unlock, complete, renew, dead-lettering at the subscription's
//!   maxDeliveryCount with `MaxDeliveryCountExceeded`, lock expiry, expiry and
//!   forwardDeadLetteredMessagesTo: exactly as for a queue (`data.rs`), with the
//!   subscription's own settings ("Service Bus queues, topics and subscriptions": a
//!   subscription behaves as a virtual queue).
//!
//! Inferred: a topic's `countDetails` is the sum of its subscriptions'; each copy gets its own
//! SequenceNumber; the fan-out is not atomic across subscriptions (the fake delivers copy by
//! copy; it never fails between them).
//!
//! The fake keeps a subscription's settings and messages as a queue named
//! `topic/subscriptions/sub` in the state's queue map (no queue name can contain `/` here:
//! queue routes and listings leave those out), so the data plane's code is the queues'.

use std::cell::Cell;
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use super::super::fake::Request;
use super::{
    AzureFake, NAMESPACE, Queue, STATUSES, State, Type, error, format_duration, parse_duration,
};

/// SBTopicProperties (topics.json 2021-11-01), by name.
fn topic_property(name: &str) -> Option<Type> {
    use Type::*;
    Some(match name {
        "defaultMessageTimeToLive" | "duplicateDetectionHistoryTimeWindow" | "autoDeleteOnIdle" => {
            Duration
        }
        "maxSizeInMegabytes" | "maxMessageSizeInKilobytes" => Int,
        "requiresDuplicateDetection"
        | "enableBatchedOperations"
        | "supportOrdering"
        | "enablePartitioning"
        | "enableExpress" => Bool,
        "status" => Status,
        "sizeInBytes" | "createdAt" | "updatedAt" | "accessedAt" | "subscriptionCount"
        | "countDetails" => ReadOnly,
        _ => return None,
    })
}

/// SBSubscriptionProperties (subscriptions.json 2021-11-01), by name. `clientAffineProperties`
/// (an object) is documented but refused here: nothing in dlqctl sends it.
fn subscription_property(name: &str) -> Option<Type> {
    use Type::*;
    Some(match name {
        "lockDuration"
        | "defaultMessageTimeToLive"
        | "duplicateDetectionHistoryTimeWindow"
        | "autoDeleteOnIdle" => Duration,
        "maxDeliveryCount" => Int,
        "requiresSession"
        | "deadLetteringOnFilterEvaluationExceptions"
        | "deadLetteringOnMessageExpiration"
        | "enableBatchedOperations"
        | "isClientAffine" => Bool,
        "forwardTo" | "forwardDeadLetteredMessagesTo" => Text,
        "status" => Status,
        "messageCount" | "createdAt" | "accessedAt" | "updatedAt" | "countDetails" => ReadOnly,
        _ => return None,
    })
}

fn topic_defaults() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("defaultMessageTimeToLive".into(), json!(u64::MAX));
    m.insert("maxSizeInMegabytes".into(), json!(1024));
    m.insert("requiresDuplicateDetection".into(), json!(false));
    m.insert("duplicateDetectionHistoryTimeWindow".into(), json!(600_000));
    m.insert("enableBatchedOperations".into(), json!(true));
    m.insert("status".into(), json!("Active"));
    m.insert("supportOrdering".into(), json!(false));
    m.insert("autoDeleteOnIdle".into(), json!(u64::MAX));
    m.insert("enablePartitioning".into(), json!(false));
    m.insert("enableExpress".into(), json!(false));
    m
}

fn subscription_defaults() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("lockDuration".into(), json!(60_000));
    m.insert("requiresSession".into(), json!(false));
    m.insert("defaultMessageTimeToLive".into(), json!(u64::MAX));
    m.insert(
        "deadLetteringOnFilterEvaluationExceptions".into(),
        json!(true),
    );
    m.insert("deadLetteringOnMessageExpiration".into(), json!(false));
    m.insert("duplicateDetectionHistoryTimeWindow".into(), json!(600_000));
    m.insert("maxDeliveryCount".into(), json!(10));
    m.insert("status".into(), json!("Active"));
    m.insert("enableBatchedOperations".into(), json!(true));
    m.insert("autoDeleteOnIdle".into(), json!(u64::MAX));
    m
}

/// Checks a PUT body against `what`'s documented properties; the settings (durations in
/// ms), or the 400.
fn check_body(
    body: &str,
    what: &str,
    property: fn(&str) -> Option<Type>,
) -> Result<Map<String, Value>, (u16, String)> {
    let bad = |m: String| error(400, "BadRequest", m);
    let v: Value = serde_json::from_str(body).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    let Value::Object(top) = v else {
        return Err(bad("the body is not a JSON object".into()));
    };
    if let Some(k) = top.keys().find(|k| *k != "properties") {
        return Err(bad(format!(
            "`{k}` is not a writable member of SB{what} (2021-11-01: `properties` only; a ProxyResource without tags)"
        )));
    }
    let props = match top.get("properties") {
        None => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(bad("`properties` is not an object".into())),
    };
    let mut out = Map::new();
    for (k, v) in props {
        let Some(t) = property(&k) else {
            return Err(bad(format!(
                "`properties.{k}` is not a property of SB{what}Properties (2021-11-01)"
            )));
        };
        let value = match (t, &v) {
            (Type::ReadOnly, _) => return Err(bad(format!("`properties.{k}` is readOnly"))),
            (Type::Duration, Value::String(s)) => match parse_duration(s) {
                Some(ms) => json!(ms),
                None => {
                    return Err(bad(format!(
                        "`properties.{k}` is `{s}`, not an ISO 8601 duration"
                    )));
                }
            },
            (Type::Int, Value::Number(n)) if n.as_i64().is_some() => v.clone(),
            (Type::Bool, Value::Bool(_)) | (Type::Text, Value::String(_)) => v.clone(),
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

/// The fake's key of a subscription (the state's queue map).
pub fn key(topic: &str, sub: &str) -> String {
    format!("{topic}/subscriptions/{sub}")
}

fn subscriptions<'a>(st: &'a State, topic: &str) -> Vec<(&'a str, &'a Queue)> {
    let prefix = format!("{topic}/subscriptions/");
    st.queues
        .iter()
        .filter_map(|(k, q)| k.strip_prefix(&prefix).map(|s| (s, q)))
        .collect()
}

fn counts(q: &Queue) -> Value {
    json!({
        "activeMessageCount": q.active + q.messages.len() as u64,
        "deadLetterMessageCount": q.dead_letters + q.dead.len() as u64,
        "scheduledMessageCount": 0,
        "transferMessageCount": 0,
        "transferDeadLetterMessageCount": 0
    })
}

fn durations(props: &Map<String, Value>, property: fn(&str) -> Option<Type>) -> Map<String, Value> {
    props
        .iter()
        .map(|(k, v)| {
            let v = match property(k) {
                Some(Type::Duration) => json!(format_duration(v.as_u64().unwrap_or(u64::MAX))),
                _ => v.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

fn render_topic(st: &State, name: &str, props: &Map<String, Value>) -> Value {
    let subs = subscriptions(st, name);
    let mut p = durations(props, topic_property);
    let sum = |f: fn(&Queue) -> u64| subs.iter().map(|(_, q)| f(q)).sum::<u64>();
    p.insert(
        "countDetails".into(),
        json!({
            "activeMessageCount": sum(|q| q.active + q.messages.len() as u64),
            "deadLetterMessageCount": sum(|q| q.dead_letters + q.dead.len() as u64),
            "scheduledMessageCount": 0,
            "transferMessageCount": 0,
            "transferDeadLetterMessageCount": 0
        }),
    );
    p.insert("subscriptionCount".into(), json!(subs.len()));
    p.insert("sizeInBytes".into(), json!(0));
    p.insert("createdAt".into(), json!("2026-12-03T00:00:00Z"));
    p.insert("updatedAt".into(), json!("2026-12-03T00:00:00Z"));
    p.insert("accessedAt".into(), json!("0001-01-01T00:00:00"));
    json!({
        "id": format!("{}/topics/{name}", AzureFake::namespace_path()),
        "name": name,
        "type": "Microsoft.ServiceBus/Namespaces/Topics",
        "location": "westeurope",
        "properties": p
    })
}

fn render_subscription(topic: &str, name: &str, q: &Queue) -> Value {
    let mut p = durations(&q.props, subscription_property);
    p.insert("countDetails".into(), counts(q));
    p.insert(
        "messageCount".into(),
        json!(q.active + q.dead_letters + (q.messages.len() + q.dead.len()) as u64),
    );
    p.insert("createdAt".into(), json!("2026-12-03T00:00:00Z"));
    p.insert("updatedAt".into(), json!("2026-12-03T00:00:00Z"));
    p.insert("accessedAt".into(), json!("0001-01-01T00:00:00"));
    json!({
        "id": format!("{}/topics/{topic}/subscriptions/{name}", AzureFake::namespace_path()),
        "name": name,
        "type": "Microsoft.ServiceBus/Namespaces/Topics/Subscriptions",
        "location": "westeurope",
        "properties": p
    })
}

fn not_found(what: &str, name: &str) -> (u16, String) {
    error(
        404,
        "NotFound",
        format!("Entity '{NAMESPACE}:{what}:{name}' was not found."),
    )
}

/// ARM's answer to a topic or subscription request (`rest`: the path after the namespace);
/// `None` when it is not one (a queue's, answered by `azure.rs`).
pub(super) fn answer(st: &mut State, r: &Request, rest: &str) -> Option<(u16, String)> {
    let rest = rest.strip_prefix("/topics")?;
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    let method = r.method.as_str();
    Some(match (method, parts.as_slice()) {
        ("GET", []) => {
            let value: Vec<Value> = st
                .topics
                .iter()
                .map(|(n, p)| render_topic(st, n, p))
                .collect();
            (200, json!({ "value": value }).to_string())
        }
        (_, [t]) => match method {
            "GET" => match st.topics.get(*t) {
                Some(p) => (200, render_topic(st, t, p).to_string()),
                None => not_found("Topic", t),
            },
            "PUT" => match check_body(&r.body, "Topic", topic_property) {
                Ok(set) => {
                    let mut props = topic_defaults();
                    props.extend(set);
                    st.topics.insert((*t).to_owned(), props.clone());
                    (200, render_topic(st, t, &props).to_string())
                }
                Err(e) => e,
            },
            "DELETE" => match st.topics.remove(*t) {
                Some(_) => {
                    let prefix = format!("{t}/subscriptions/");
                    st.queues.retain(|k, _| !k.starts_with(&prefix));
                    (200, String::new())
                }
                None => (204, String::new()),
            },
            _ => error(405, "MethodNotAllowed", format!("{method} {}", r.path)),
        },
        ("GET", [t, "subscriptions"]) => {
            if !st.topics.contains_key(*t) {
                return Some(not_found("Topic", t));
            }
            let value: Vec<Value> = subscriptions(st, t)
                .into_iter()
                .map(|(s, q)| render_subscription(t, s, q))
                .collect();
            (200, json!({ "value": value }).to_string())
        }
        ("GET", [t, "subscriptions", s, "rules"]) => {
            let k = key(t, s);
            if !st.queues.contains_key(&k) {
                return Some(not_found("Subscription", &k));
            }
            let value = st.rules.get(&k).cloned().unwrap_or_else(|| {
                vec![json!({
                    "id": format!("{}/topics/{t}/subscriptions/{s}/rules/$Default", AzureFake::namespace_path()),
                    "name": "$Default",
                    "type": "Microsoft.ServiceBus/Namespaces/Topics/Subscriptions/Rules",
                    "properties": {
                        "filterType": "SqlFilter",
                        "sqlFilter": {"sqlExpression": "1=1", "compatibilityLevel": 20},
                        "action": {}
                    }
                })]
            });
            (200, json!({ "value": value }).to_string())
        }
        (_, [t, "subscriptions", s]) => {
            if !st.topics.contains_key(*t) {
                return Some(not_found("Topic", t));
            }
            let k = key(t, s);
            match method {
                "GET" => match st.queues.get(&k) {
                    Some(q) => (200, render_subscription(t, s, q).to_string()),
                    None => not_found("Subscription", &k),
                },
                "PUT" => match check_body(&r.body, "Subscription", subscription_property) {
                    Ok(set) => {
                        let mut props = subscription_defaults();
                        props.extend(set);
                        let q = st.queues.entry(k).or_default();
                        q.props = props;
                        (200, render_subscription(t, s, q).to_string())
                    }
                    Err(e) => e,
                },
                "DELETE" => match st.queues.remove(&k) {
                    Some(_) => (200, String::new()),
                    None => (204, String::new()),
                },
                _ => error(405, "MethodNotAllowed", format!("{method} {}", r.path)),
            }
        }
        _ => error(
            404,
            "NotFound",
            format!("the fake has no {method} {}", r.path),
        ),
    })
}

/// A subscription's entity path (`t/subscriptions/s`, or its `$DeadLetterQueue`) as the
/// state's key and whether it is the subqueue; `None` when it is not a subscription's.
pub(super) fn entity(path: &str) -> Option<(String, bool)> {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        [t, "subscriptions", s] if !t.is_empty() && !s.is_empty() => Some((key(t, s), false)),
        [t, "subscriptions", s, d]
            if !t.is_empty() && !s.is_empty() && d.eq_ignore_ascii_case("$DeadLetterQueue") =>
        {
            Some((key(t, s), true))
        }
        _ => None,
    }
}

thread_local! {
    /// Set while a send to a topic delivers its copies (which go through the queues' send).
    static FANNING: Cell<bool> = const { Cell::new(false) };
}

/// Sends to topics and subscriptions, before the queues' code sees them: a send to a topic
/// delivers a copy to each subscription (through `deliver`, the queues' send), a send to a
/// subscription from outside is refused. `None`: not a send to either.
pub(super) fn intercept(
    state: &Mutex<State>,
    method: &str,
    path: &str,
    deliver: impl Fn(&str) -> (u16, String),
) -> Option<(u16, String)> {
    if method != "POST" {
        return None;
    }
    let entity = path.strip_suffix("/messages")?;
    if entity.contains("/subscriptions/") {
        if FANNING.with(Cell::get) {
            return None;
        }
        return Some((
            400,
            format!("`{entity}`: messages are sent to a queue or topic, not to a subscription"),
        ));
    }
    let subs: Vec<String> = {
        let st = state.lock().expect("lock");
        if !st.topics.contains_key(entity) {
            return None;
        }
        subscriptions(&st, entity)
            .into_iter()
            .map(|(s, _)| key(entity, s))
            .collect()
    };
    FANNING.with(|f| f.set(true));
    let mut answer = (201, String::new());
    for s in &subs {
        let (status, text) = deliver(&format!("/{s}/messages"));
        if status != 201 {
            answer = (status, text);
            break;
        }
    }
    FANNING.with(|f| f.set(false));
    Some(answer)
}

impl AzureFake {
    /// A topic's settings (durations in ms), `None` when absent.
    pub fn topic(&self, name: &str) -> Option<Map<String, Value>> {
        self.state.lock().expect("lock").topics.get(name).cloned()
    }

    /// A subscription's settings (durations in ms), `None` when absent.
    pub fn subscription(&self, topic: &str, sub: &str) -> Option<Map<String, Value>> {
        let st = self.state.lock().expect("lock");
        st.queues.get(&key(topic, sub)).map(|q| q.props.clone())
    }

    /// The names of a topic's subscriptions.
    /// Replaces a subscription's rules (each a Rule as ARM lists it: `name`, `properties`
    /// with `filterType`, `sqlFilter` or `correlationFilter`, `action`).
    pub fn set_rules(&self, topic: &str, sub: &str, rules: Vec<Value>) {
        self.state
            .lock()
            .expect("lock")
            .rules
            .insert(key(topic, sub), rules);
    }

    pub fn subscriptions_of(&self, topic: &str) -> Vec<String> {
        let st = self.state.lock().expect("lock");
        subscriptions(&st, topic)
            .into_iter()
            .map(|(s, _)| s.to_owned())
            .collect()
    }
}
