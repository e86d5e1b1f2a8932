//! A channel's effective settings on its backend: names expanded, defaults filled in.
//!
//! Both the lint rules (name validity, collisions, ranges) and the planner (desired resources)
//! read a channel through this one view, so what lint checks is exactly what apply creates.
//! Pure: no I/O.
//!
//! Split along the axis of `spec::model` and `spec::rules`: `channel` is the generic part and
//! the entry ([`resolve`]), with one file per backend block (`sqs`, `rabbitmq`, `kafka`,
//! `pubsub`); `spring` mirrors Spring Kafka's naming, `defaults` holds what dlqctl fills in,
//! `envelope` the envelope and class rules, and `common` what all of them share (the error,
//! retry stages, name templates, the role of a dead-letter destination); `views` derives every
//! destination a channel dead-letters to; `connect` the Kafka Connect connectors' error keys. Each file
//! imports only files below it; this module re-exports the lot, so `spec::resolve::X` is the
//! path to use, and no file of the folder imports this one.

mod azure;
mod channel;
mod common;
mod connect;
mod defaults;
pub mod envelope;
pub mod headers;
mod kafka;
mod pubsub;
mod rabbitmq;
mod shared;
mod spring;
mod sqs;
mod views;

pub use azure::{AzureResolved, dead_letter_subqueue};
pub use channel::{
    AlarmResolved, AlarmsResolved, ArchiveResolved, DiscardResolved, Due, InvalidResolved,
    RateAlarmResolved, RateTierResolved, Resolved, TierResolved, delays, resolve,
};
pub use common::{DeadLetterRole, ResolveError, RetryStage, expand};
pub use connect::{CONNECT_DEFAULT_RETRY_DELAY_MAX_MS, ConnectorResolved};
pub use defaults::{
    AZURE_DEAD_LETTER_SUBQUEUE, AZURE_DEFAULT_LOCK_DURATION, DEFAULT_ALARM_EVALUATION_PERIODS,
    DEFAULT_ALARM_PERIOD, DEFAULT_ARCHIVE_BEFORE, DEFAULT_MAX_REDRIVES, DEFAULT_POLICY_PRIORITY,
    DEFAULT_RATE_FOR, DEFAULT_RATE_PERIOD, KAFKA_DEFAULT_DELAY, KAFKA_INVALID_SUFFIX,
    PUBSUB_DEFAULT_ACK_DEADLINE, PUBSUB_DEFAULT_MAX_BACKOFF, PUBSUB_DEFAULT_RETENTION,
    SQS_DEFAULT_DLQ_RETENTION, SQS_DEFAULT_RETENTION, SQS_DEFAULT_VISIBILITY,
};
pub use envelope::EnvelopeResolved;
pub use kafka::KafkaResolved;
pub use pubsub::PubsubResolved;
pub use rabbitmq::{DeadLetterExchangeResolved, ExchangeResolved, RabbitResolved};
pub use shared::link;
pub use spring::{
    SPRING_DLT_SUFFIX, SPRING_RETRY_SUFFIX, java_has_text, spring_retry_suffixes, spring_suffix,
};
pub use sqs::SqsResolved;

/// The helpers the unit tests of every file of `resolve` share: a channel resolved on a
/// backend from a few `spec` lines.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::duration::Duration;
    use crate::spec::model::{Backend, Target};

    pub(super) fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|m| Duration::from_millis(*m)).collect()
    }

    pub(super) fn kafka(spec: &str) -> Resolved {
        kafka_channel("app.orders", spec)
    }

    pub(super) fn kafka_channel(channel: &str, spec: &str) -> Resolved {
        resolved_on(Backend::Kafka, channel, spec)
    }

    pub(super) fn resolved_on(backend: Backend, channel: &str, spec: &str) -> Resolved {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {channel}}}\nspec:\n  target: k\n{spec}"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target = Target {
            backend,
            region: None,
            endpoint: None,
            profile: None,
            url: None,
            amqp_url: None,
            vhost: None,
            username_env: None,
            password_env: None,
            bootstrap_servers: Some("127.0.0.1:9092".into()),
            properties: None,
            secret_properties: None,
            connect_url: None,
            brokers: None,
            project: None,
            emulator_host: None,
            grant_service_agent: None,
            project_number: None,
            subscription_id: None,
            resource_group: None,
            namespace: None,
            arm_url: None,
            data_url: None,
            token_url: None,
            access_token_env: None,
            data_access_token_env: None,
            tenant_id: None,
            client_id: None,
            client_secret_env: None,
            managed_identity: None,
            workload_identity: None,
            identity_url: None,
            monitoring: None,
            ownership: None,
            alerts: None,
            redact: None,
            operations: None,
        };
        resolve(&ws.channels[0].value, "k", &target).expect("resolves")
    }

    pub(super) fn names(r: &Resolved) -> Vec<(&str, u64)> {
        r.retry_stages
            .iter()
            .map(|s| (s.name.as_str(), s.delay.as_millis()))
            .collect()
    }

    /// The retry and DLT topic names of a Kafka channel, in the order a record meets them.
    pub(super) fn topic_names(r: &Resolved) -> Vec<String> {
        let mut v: Vec<String> = r.retry_stages.iter().map(|s| s.name.clone()).collect();
        v.push(r.dead_letter.clone());
        v
    }

    pub(super) fn resolve_error(backend: Backend, spec: &str) -> ResolveError {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: orders}}\nspec:\n  target: k\n  retry: {{maxAttempts: 2}}\n{spec}"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target: Target =
            serde_json::from_value(serde_json::json!({ "backend": backend })).expect("target");
        resolve(&ws.channels[0].value, "k", &target).expect_err("does not resolve")
    }
}
