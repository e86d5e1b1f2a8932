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

pub mod apply;
pub mod desired;
pub mod guard;
pub mod import;
pub mod plan;
pub mod read;
pub mod redrive;
pub mod status;

use crate::resource::{Kind, ResourceId};
use crate::spec::model::Backend;

pub use apply::Writer;
pub use desired::desired;
pub use read::Reader;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_patterns_escape_dots() {
        assert_eq!(exact_pattern("orders.retry"), r"^orders\.retry$");
    }
}
