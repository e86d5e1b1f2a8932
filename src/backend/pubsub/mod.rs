//! Google Cloud Pub/Sub: a channel's main topic, the consumer's subscription on it with the
//! dead-letter policy, the dead-letter topic, and the dead-letter topic's own subscription,
//! which holds the dead letters (a dead-letter topic with no subscription drops every one, so
//! dlqctl always creates it).
//!
//! The doors, each in its own file: [`desired`] (pure), [`read`] (read-only: live state,
//! prunable objects, the inventory `import` groups), [`plan`] (backend rules on top of the
//! generic diff, the IAM note and the ownership review), [`apply`] (the only writer),
//! [`import`] (live → specs, pure over what `read` saw), [`status`] and [`redrive`]. This file
//! holds what they share: names, property keys and how Pub/Sub's JSON becomes flat properties.
//!
//! The client is Pub/Sub's REST API (`v1`) through the project's reqwest client
//! (`wire::http`), not Google's gRPC crates: `google-cloud-pubsub` brings tonic, prost, the
//! generated googleapis types and their build scripts (measured in Cargo.toml), while the
//! handful of admin calls dlqctl makes are plain JSON. Where the target is: `emulatorHost`,
//! else `PUBSUB_EMULATOR_HOST` (as Google's clients do; no credentials are sent to an
//! emulator), else `https://pubsub.googleapis.com` with the OAuth access token in
//! `GOOGLE_OAUTH_ACCESS_TOKEN` (e.g. `$(gcloud auth print-access-token)`). Full Application
//! Default Credentials (a service-account key file, the metadata server) are not read:
//! docs/pubsub.md says so.
//!
//! Properties are flat and normalised: durations as seconds (`"600s"` → 600), the
//! dead-letter topic and the subscription's topic by short name when they are in the target's
//! project (the full `projects/P/topics/T` otherwise), and the labels under `@labels` (the
//! `@` keeps them out of the diff and of the unmanaged-settings notes; the review reads them
//! for ownership, as SQS reads tags, but without a call of its own: a GET returns them).

pub mod alerts;
pub mod apply;
pub mod desired;
pub mod draw;
pub mod import;
pub mod monitoring;
pub mod plan;
pub mod read;
pub mod redrive;
pub mod replay;
pub mod review;
pub mod status;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::resource::{Kind, Live, Props, ResourceId};
use crate::spec::model::Backend;

/// Calls in flight at once per target.
pub const CONCURRENCY: usize = 8;
/// Listing page size (the API's maximum).
pub const PAGE_SIZE: u32 = 1000;

/// One path segment (a project, topic or subscription name), percent-encoded; Pub/Sub names
/// may also hold `+` and `%`, which are encoded.
pub use crate::backend::wire::http::seg_unreserved as seg;

/// The labels dlqctl puts on what it creates: the kit's ownership words, as SQS's tags.
pub use crate::backend::kit::ownership::{
    CHANNEL as LABEL_CHANNEL, MANAGED_BY as LABEL_MANAGED_BY,
    MANAGED_BY_VALUE as LABEL_MANAGED_BY_VALUE,
};

/// The subscription's topic: immutable (a change is a replace).
pub const TOPIC: &str = "topic";
pub const ACK_DEADLINE: &str = "ackDeadlineSeconds";
pub const RETENTION: &str = "messageRetentionDuration";
pub const DEAD_LETTER_TOPIC: &str = "deadLetterPolicy.deadLetterTopic";
pub const MAX_ATTEMPTS: &str = "deadLetterPolicy.maxDeliveryAttempts";
pub const MIN_BACKOFF: &str = "retryPolicy.minimumBackoff";
pub const MAX_BACKOFF: &str = "retryPolicy.maximumBackoff";
/// `never`, or seconds: a subscription nobody pulls from is deleted after its
/// expirationPolicy's ttl (31 days unless set), and a dead-letter subscription is exactly
/// the one nobody pulls from. dlqctl creates both subscriptions with no expiry.
pub const EXPIRY: &str = "expirationPolicy.ttl";
pub const NEVER: &str = "never";
/// Where the labels are kept in live properties (ownership, not settings).
pub const LABELS: &str = "@labels";
/// Plan fields that add the ownership labels (an adoption); apply PATCHes them as labels.
pub const LABEL_FIELD_PREFIX: &str = "labels.";

pub fn topic_id(target: &str, name: &str) -> ResourceId {
    ResourceId {
        target: target.to_owned(),
        backend: Backend::Pubsub,
        kind: Kind::Topic,
        scope: String::new(),
        name: name.to_owned(),
    }
}

pub fn subscription_id(target: &str, name: &str) -> ResourceId {
    ResourceId {
        kind: Kind::Subscription,
        ..topic_id(target, name)
    }
}

/// `projects/P/topics/T` for a short name; a full path stays as it is.
pub fn topic_path(project: &str, name: &str) -> String {
    if name.starts_with("projects/") {
        name.to_owned()
    } else {
        format!("projects/{project}/topics/{name}")
    }
}

/// The short name of a resource path in `project` (`projects/P/topics/T` → `T`); a path in
/// another project stays whole.
pub fn short_name(project: &str, path: &str) -> String {
    let mut parts = path.splitn(4, '/');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("projects"), Some(p), Some(_), Some(name)) if p == project => name.to_owned(),
        _ => path.to_owned(),
    }
}

/// A protobuf JSON duration (`"600s"`, `"0.500s"`) as seconds: whole seconds as an integer,
/// anything else as a float.
pub fn seconds(text: &str) -> Option<Value> {
    let n = text.trim().strip_suffix('s')?;
    if let Ok(whole) = n.parse::<u64>() {
        return Some(json!(whole));
    }
    let f = n
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite() && *f >= 0.0)?;
    Some(if f.fract() == 0.0 {
        json!(f as u64)
    } else {
        json!(f)
    })
}

/// Seconds as a protobuf JSON duration (`600` → `"600s"`, `0.5` → `"0.5s"`).
pub fn duration_text(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .map(|s| format!("{s}s"))
            .or_else(|| n.as_f64().map(|f| format!("{f}s"))),
        _ => None,
    }
}

/// A spec duration as the seconds the properties hold (integer when whole).
pub fn secs(d: crate::spec::duration::Duration) -> Value {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        json!(ms / 1000)
    } else {
        json!(ms as f64 / 1000.0)
    }
}

/// A topic's JSON as live properties: its labels, and what it sets that dlqctl does not own
/// (retention, schema, storage policy...), shown as unmanaged settings.
pub fn live_topic(v: &Value) -> Live {
    let mut props = Props::new();
    if let Some(obj) = v.as_object() {
        for (k, x) in obj {
            match k.as_str() {
                "name" => {}
                "labels" => {
                    props.insert(LABELS.to_owned(), x.clone());
                }
                "messageRetentionDuration" => {
                    let s = x.as_str().and_then(seconds).unwrap_or_else(|| x.clone());
                    props.insert(k.clone(), s);
                }
                _ if is_empty(x) => {}
                _ => {
                    props.insert(k.clone(), x.clone());
                }
            }
        }
    }
    // A topic holds no messages of its own; its subscriptions do.
    Live {
        props,
        messages: Some(0),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        _ => false,
    }
}

/// A subscription's JSON as live properties (see the module doc for the shapes). Pub/Sub's
/// REST API cannot count a backlog (Cloud Monitoring does), so `messages` is unknown.
pub fn live_subscription(project: &str, v: &Value) -> Live {
    let mut props = Props::new();
    let Some(obj) = v.as_object() else {
        return Live {
            props,
            messages: None,
        };
    };
    let dur = |x: &Value| x.as_str().and_then(seconds).unwrap_or_else(|| x.clone());
    let mut expiry = json!(NEVER);
    for (k, x) in obj {
        match k.as_str() {
            // Read-only output fields, not settings.
            "name" | "state" | "topicMessageRetentionDuration" => {}
            "topic" => {
                let t = x
                    .as_str()
                    .map_or_else(|| x.clone(), |t| json!(short_name(project, t)));
                props.insert(TOPIC.to_owned(), t);
            }
            "ackDeadlineSeconds" => {
                props.insert(ACK_DEADLINE.to_owned(), x.clone());
            }
            "messageRetentionDuration" => {
                props.insert(RETENTION.to_owned(), dur(x));
            }
            "labels" => {
                props.insert(LABELS.to_owned(), x.clone());
            }
            "deadLetterPolicy" => flatten(
                &mut props,
                x,
                &[
                    ("deadLetterTopic", DEAD_LETTER_TOPIC),
                    ("maxDeliveryAttempts", MAX_ATTEMPTS),
                ],
                |key, val| match key {
                    "deadLetterTopic" => val
                        .as_str()
                        .map_or_else(|| val.clone(), |t| json!(short_name(project, t))),
                    _ => val.clone(),
                },
            ),
            "retryPolicy" => {
                // Set with neither bound: Pub/Sub's defaults, 10 s and 600 s.
                let (min, max) = (x.get("minimumBackoff"), x.get("maximumBackoff"));
                props.insert(MIN_BACKOFF.to_owned(), min.map_or_else(|| json!(10), dur));
                props.insert(MAX_BACKOFF.to_owned(), max.map_or_else(|| json!(600), dur));
            }
            "expirationPolicy" => {
                if let Some(ttl) = x.get("ttl") {
                    expiry = dur(ttl);
                }
            }
            _ if is_empty(x) => {}
            _ => {
                props.insert(k.clone(), x.clone());
            }
        }
    }
    props.insert(EXPIRY.to_owned(), expiry);
    Live {
        props,
        messages: None,
    }
}

/// Each listed field of an object as its flat key, the rest as `prefix.field`.
fn flatten(
    props: &mut Props,
    x: &Value,
    keys: &[(&str, &str)],
    map: impl Fn(&str, &Value) -> Value,
) {
    let Some(o) = x.as_object() else { return };
    for (field, key) in keys {
        if let Some(v) = o.get(*field) {
            props.insert((*key).to_owned(), map(field, v));
        }
    }
}

/// The labels a live object carries (`@labels`).
pub fn labels(live: &Live) -> BTreeMap<String, String> {
    live.props
        .get(LABELS)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Why a live object is not provably this channel's, from its labels (`None`: it is). The
/// same rule as SQS's tags, said with Pub/Sub's word.
pub fn ownership_problem(labels: &BTreeMap<String, String>, channel: &str) -> Option<String> {
    crate::backend::kit::ownership::ownership_problem(labels, channel)
        .map(|p| p.replace("tagged", "labelled").replace(" tag", " label"))
}

/// The labels dlqctl puts on everything it creates.
pub fn ownership_labels(channel: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(LABEL_MANAGED_BY.to_owned(), json!(LABEL_MANAGED_BY_VALUE));
    m.insert(LABEL_CHANNEL.to_owned(), json!(channel));
    m
}

/// The request body that creates or updates a subscription with these flat properties
/// (`topic` and `deadLetterPolicy.deadLetterTopic` as full paths in `project`), restricted to
/// the top-level fields in `only` when given, with the update mask naming exactly them.
pub fn subscription_body(
    project: &str,
    props: &Props,
    only: Option<&[String]>,
) -> (Value, Vec<String>) {
    let mut body = Map::new();
    let mut mask: Vec<String> = Vec::new();
    let wanted = |field: &str| only.is_none_or(|o| o.iter().any(|f| f == field));
    let get = |k: &str| props.get(k).filter(|v| !v.is_null());
    if wanted("topic")
        && let Some(t) = get(TOPIC).and_then(Value::as_str)
    {
        body.insert("topic".into(), json!(topic_path(project, t)));
        mask.push("topic".into());
    }
    if wanted(ACK_DEADLINE) {
        if let Some(a) = get(ACK_DEADLINE) {
            body.insert(ACK_DEADLINE.into(), a.clone());
        }
        mask.push(ACK_DEADLINE.into());
    }
    if wanted(RETENTION) {
        if let Some(r) = get(RETENTION).and_then(duration_text) {
            body.insert(RETENTION.into(), json!(r));
        }
        mask.push(RETENTION.into());
    }
    if wanted("deadLetterPolicy") {
        if let Some(t) = get(DEAD_LETTER_TOPIC).and_then(Value::as_str) {
            let mut p = Map::new();
            p.insert("deadLetterTopic".into(), json!(topic_path(project, t)));
            if let Some(n) = get(MAX_ATTEMPTS) {
                p.insert("maxDeliveryAttempts".into(), n.clone());
            }
            body.insert("deadLetterPolicy".into(), Value::Object(p));
        }
        mask.push("deadLetterPolicy".into());
    }
    if wanted("retryPolicy") {
        let mut p = Map::new();
        for (field, key) in [
            ("minimumBackoff", MIN_BACKOFF),
            ("maximumBackoff", MAX_BACKOFF),
        ] {
            if let Some(d) = get(key).and_then(duration_text) {
                p.insert(field.into(), json!(d));
            }
        }
        if !p.is_empty() {
            body.insert("retryPolicy".into(), Value::Object(p));
        }
        mask.push("retryPolicy".into());
    }
    if wanted("expirationPolicy") {
        match get(EXPIRY) {
            Some(Value::String(s)) if s == NEVER => {
                body.insert("expirationPolicy".into(), json!({}));
            }
            Some(v) => {
                if let Some(d) = duration_text(v) {
                    body.insert("expirationPolicy".into(), json!({ "ttl": d }));
                }
            }
            None => {}
        }
        mask.push("expirationPolicy".into());
    }
    (Value::Object(body), mask)
}

/// The top-level subscription field a flat key belongs to (what an update mask names).
pub fn mask_field(key: &str) -> &str {
    key.split('.').next().unwrap_or(key)
}

/// This backend's pure doors ([`crate::backend::kit::doors::Plan`], in `plan.rs`): the dispatcher's handle on them.
#[derive(Debug, Clone, Copy)]
pub struct Pubsub;

#[cfg(test)]
mod tests;
