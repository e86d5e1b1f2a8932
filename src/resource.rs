//! The backend-neutral vocabulary of the engine: which live object, what it should hold, what
//! it holds now.
//!
//! Desired and live state use the same flat property map (`arguments.x-message-ttl` → 5000),
//! normalised by each backend when it reads, so the diff is one generic comparison of values
//! and every plan renders the same way whatever the backend.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spec::model::Backend;

/// What kind of live object.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Queue,
    Policy,
    Exchange,
    Binding,
    Topic,
    Alarm,
    /// A Pub/Sub subscription (it holds the messages; the topic only fans them out).
    Subscription,
    /// A Kafka ACL binding on a topic (`kafka.acls`), named `<topic> <OPERATION> <principal>`.
    Acl,
    /// A Kafka share group's dead-letter configs (`kafka.shareGroups`, KIP-1191).
    #[serde(rename = "share-group")]
    ShareGroup,
    /// A Kafka Connect connector (`kafka.connectors`), named as on the worker: dlqctl owns only
    /// its error-handling keys.
    Connector,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Queue => "queue",
            Kind::Policy => "policy",
            Kind::Exchange => "exchange",
            Kind::Binding => "binding",
            Kind::Topic => "topic",
            Kind::Alarm => "alarm",
            Kind::Subscription => "subscription",
            Kind::Acl => "acl",
            Kind::ShareGroup => "share-group",
            Kind::Connector => "connector",
        }
    }
}

/// One live object: on which target, of which kind, in which scope (a RabbitMQ vhost;
/// empty elsewhere), under which name.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub struct ResourceId {
    /// The target (a connection of the targets file).
    pub target: String,
    pub backend: Backend,
    pub kind: Kind,
    /// The RabbitMQ vhost (absent elsewhere).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope: String,
    /// The object's name on the server (a queue, topic, policy, alarm, exchange; a binding's
    /// name is `exchange -> queue [key]`).
    pub name: String,
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.name)?;
        if !self.scope.is_empty() {
            write!(f, " (vhost {})", self.scope)?;
        }
        Ok(())
    }
}

/// The part a resource plays in its channel; also its place in the apply order
/// (dead-letter side first, then what points at it).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    DeadLetter,
    // Pub/Sub: the dead-letter topic's subscription, which holds the dead letters; after the
    // dead-letter topic.
    DeadLetterSubscription,
    // A named dead-letter exchange (RabbitMQ) and the DLQ's binding to it: after the DLQ,
    // before anything dead-letters into them. (Plain comments: the schema keeps one enum.)
    DeadLetterExchange,
    DeadLetterBinding,
    DeadLetterPolicy,
    // The invalid-message queue or topic (`spec.invalid`) and its policy: nothing points at
    // it, but the main queue's consumer sends there, so it exists before the main queue.
    Invalid,
    InvalidPolicy,
    Retry,
    RetryPolicy,
    Main,
    // Pub/Sub: the consumer's subscription on the main topic, after the topic.
    Subscription,
    MainPolicy,
    Exchange,
    Binding,
    Alarm,
    // Kafka ACL bindings (`kafka.acls`): after the topics they name.
    Acl,
    // Kafka share groups' dead-letter configs (`kafka.shareGroups`): after the DLT they name.
    ShareGroup,
    // Kafka Connect connectors (`kafka.connectors`): after the dead-letter topic they write to.
    Connector,
}

/// How a backend stores a property that is a duration (SQS seconds, RabbitMQ and Kafka
/// milliseconds), so a plan can show `30d` beside the `2592000` the backend keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Seconds,
    Millis,
}

impl TimeUnit {
    /// The unit as written after the raw value: `s`, `ms`.
    pub fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "s",
            TimeUnit::Millis => "ms",
        }
    }

    /// Milliseconds in one unit.
    pub fn millis(self) -> u64 {
        match self {
            TimeUnit::Seconds => 1000,
            TimeUnit::Millis => 1,
        }
    }
}

/// Flat properties: `arguments.x-message-ttl` → `5000`. In desired state, `null` means
/// "owned by dlqctl and must be absent".
///
/// A sorted `Vec` (litemap) rather than a `BTreeMap`: a map node has 11 slots whatever the
/// count, and at 5,000 channels those nodes were a third of the plan's heap. Iteration is in
/// key order and it always serialises as a JSON object, as the `BTreeMap` did (plan JSON and
/// saved-plan fingerprints depend on both).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct Props(litemap::LiteMap<String, Value>);

/// In a schema: an object whose values are any JSON.
impl JsonSchema for Props {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Props".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Flat properties: `arguments.x-message-ttl` → `5000`. `null` in desired state: owned by dlqctl and must be absent.",
            "type": "object",
            "additionalProperties": true
        })
    }
}

impl Props {
    pub fn new() -> Self {
        Props::default()
    }
}

impl std::ops::Deref for Props {
    type Target = litemap::LiteMap<String, Value>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Props {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// Always an object: litemap writes an empty map as `[]`.
impl Serialize for Props {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter())
    }
}

impl FromIterator<(String, Value)> for Props {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Props(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a Props {
    type Item = (&'a String, &'a Value);
    type IntoIter = <&'a litemap::LiteMap<String, Value> as IntoIterator>::IntoIter;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// A resource as the specs want it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Desired {
    pub id: ResourceId,
    pub channel: String,
    pub role: Role,
    pub props: Props,
    /// Whether a change to any property needs the object rebuilt (RabbitMQ queue arguments).
    pub immutable: bool,
    /// `false`: dlqctl owns this name and it must not exist (a policy the spec no longer
    /// needs); a live one is deleted.
    pub present: bool,
}

/// A resource as read from the live system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Live {
    pub props: Props,
    /// Messages it holds, where the backend can tell (what a delete or replace would drop).
    pub messages: Option<u64>,
}

impl Live {
    /// A hash of everything read (not the message count, which moves all the time): a saved
    /// plan records it, and apply refuses when the object has changed since.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.props)
    }
}

pub fn fingerprint(props: &Props) -> String {
    use sha2::Digest;
    let canonical = serde_json::to_string(props).unwrap_or_default();
    let digest = sha2::Sha256::digest(canonical.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Equality of meaning: numbers by value (`5000` = `5000.0`), everything else exactly;
/// `null` desired equals absent.
pub fn same(desired: &Value, live: Option<&Value>) -> bool {
    match (desired, live) {
        (Value::Null, None | Some(Value::Null)) => true,
        (_, None) => false,
        (Value::Number(a), Some(Value::Number(b))) => a.as_f64() == b.as_f64(),
        (a, Some(b)) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[test]
    fn props_serialise_and_fingerprint_as_the_sorted_map_they_replaced() {
        assert_eq!(serde_json::to_string(&Props::new()).unwrap(), "{}");
        assert_eq!(
            fingerprint(&Props::new()),
            "44136fa355b3678a1146ad16f7e8649e"
        );
        let pairs = [
            ("z".to_owned(), json!(1)),
            ("a.b".to_owned(), json!({"x": [1, 2]})),
            ("m".to_owned(), Value::Null),
            ("a".to_owned(), json!("first")),
            ("a".to_owned(), json!("last wins")),
        ];
        let props: Props = pairs.iter().cloned().collect();
        let map: BTreeMap<String, Value> = pairs.iter().cloned().collect();
        assert_eq!(
            serde_json::to_string(&props).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        let keys: Vec<&String> = props.keys().collect();
        assert_eq!(keys, ["a", "a.b", "m", "z"]);
        let back: Props = serde_json::from_str(&serde_json::to_string(&props).unwrap()).unwrap();
        assert_eq!(back, props);
    }
}
