//! RabbitMQ through the management HTTP API: queues, policies, exchanges and bindings.
//!
//! A channel becomes the classic TTL retry loop (a retry queue per distinct delay whose TTL
//! dead-letters back to the main queue, and a DLQ) or, on quorum queues, a delivery limit
//! that dead-letters to the DLQ. Dead-lettering and TTLs are set by policy (mutable, updated
//! in place; RabbitMQ's recommendation) or by queue x-arguments (immutable: a change replaces
//! the queue). Queues, policies and exchanges are only touched inside the target's ownership
//! prefixes, and live reads ask only for those names.
//!
//! The doors, each in its own file: [`desired`] (pure), [`read`] (read-only: a
//! [`ReadHttp`](crate::backend::wire::http::ReadHttp) can only GET), [`plan`] (pure rules on
//! top of the generic diff: policy notes, apply-order hints), [`apply`] (the only writer) and
//! [`import`] (live → specs, pure over what `read` saw). This file holds the names they share.
//!
//! Reads are few and light: one paginated queue listing per vhost without statistics, one
//! call each for policies, exchanges and bindings; message counts only for queues a plan
//! would drop.

pub mod alerts;
pub mod apply;
pub mod desired;
pub mod draw;
pub mod guard;
pub mod import;
pub mod plan;
pub mod read;
pub mod redrive;
pub mod replay;
pub mod review;
pub mod status;

use serde_json::{Value, json};

use crate::resource::{Kind, Props, ResourceId};
use crate::spec::model::Backend;

/// Queue arguments dlqctl owns; others on a live queue are reported, never touched.
pub const OWNED_ARGUMENTS: [&str; 7] = [
    "x-queue-type",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-delivery-limit",
    "x-dead-letter-strategy",
    "x-overflow",
];

/// Page size of queue listings (the management API's maximum).
pub const PAGE_SIZE: usize = 500;

/// A RabbitMQ object's identity (also how `import` names what it reads).
pub(crate) fn id(target: &str, kind: Kind, vhost: &str, name: &str) -> ResourceId {
    ResourceId {
        target: target.to_owned(),
        backend: Backend::Rabbitmq,
        kind,
        scope: vhost.to_owned(),
        name: name.to_owned(),
    }
}

/// How a binding is named in plans: `exchange → queue [key]`.
pub fn binding_name(exchange: &str, queue: &str, key: &str) -> String {
    format!("{exchange} -> {queue} [{key}]")
}

/// A policy pattern that matches exactly one queue name.
pub fn exact_pattern(name: &str) -> String {
    format!("^{}$", regex_escape(name))
}

pub(super) fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One binding as the management API lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub source: String,
    pub destination: String,
    /// `queue` or `exchange`.
    pub destination_type: String,
    pub routing_key: String,
    pub properties_key: String,
    /// `None` when it has none.
    pub arguments: Option<Value>,
}

impl Binding {
    /// `None` when a field the API always sends is missing or not a string.
    pub fn from_value(b: &Value) -> Option<Binding> {
        let get = |k: &str| b.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(Binding {
            source: get("source")?,
            destination: get("destination")?,
            destination_type: get("destination_type")?,
            routing_key: get("routing_key")?,
            properties_key: get("properties_key").unwrap_or_default(),
            arguments: b
                .get("arguments")
                .filter(|a| a.as_object().is_some_and(|o| !o.is_empty()))
                .cloned(),
        })
    }

    /// As the management API lists it (what a replace carries in its plan).
    pub fn to_value(&self) -> Value {
        let mut v = json!({
            "source": self.source,
            "destination": self.destination,
            "destination_type": self.destination_type,
            "routing_key": self.routing_key,
            "properties_key": self.properties_key,
        });
        if let (Some(args), Some(o)) = (&self.arguments, v.as_object_mut()) {
            o.insert("arguments".into(), args.clone());
        }
        v
    }

    /// The flat props a binding is read as (and what re-creates it).
    pub fn props(&self) -> Props {
        let mut props: Props = [
            ("source".to_owned(), json!(self.source)),
            ("destination".to_owned(), json!(self.destination)),
            ("routing_key".to_owned(), json!(self.routing_key)),
        ]
        .into_iter()
        .collect();
        if let Some(args) = &self.arguments {
            props.insert("arguments".into(), args.clone());
        }
        props.insert("@properties_key".into(), json!(self.properties_key));
        props
    }
}

/// This backend's pure doors ([`crate::backend::kit::doors::Plan`], in `plan.rs`): the dispatcher's handle on them.
#[derive(Debug, Clone, Copy)]
pub struct Rabbitmq;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_patterns_escape_dots() {
        assert_eq!(exact_pattern("orders.retry"), r"^orders\.retry$");
    }
}
