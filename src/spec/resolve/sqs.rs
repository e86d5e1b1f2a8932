//! A channel's SQS settings: the visibility timeout, FIFO, and the encryption and access
//! policies of the main queue and the dead-letter one, normalised for the planner's diff.

use super::defaults::SQS_DEFAULT_VISIBILITY;
use crate::spec::access::{Encryption, parse_policy};
use crate::spec::duration::Duration;
use crate::spec::model::{ChannelSpec, QueuePolicy};

#[derive(Debug, Clone, PartialEq)]
pub struct SqsResolved {
    pub visibility_timeout: Duration,
    pub fifo: bool,
    /// `sqs.encryption`: the main queue's (`None`: not managed).
    pub encryption: Option<Encryption>,
    /// The dead-letter queue's: `deadLetter.sqs.encryption` if written, else the main
    /// queue's.
    pub dead_letter_encryption: Option<Encryption>,
    /// `sqs.policy`, normalised (`None`: not managed, or not a policy: the rules say why).
    pub policy: Option<serde_json::Value>,
    /// `deadLetter.sqs.policy`, normalised (the main queue's policy is not inherited: it
    /// names the main queue).
    pub dead_letter_policy: Option<serde_json::Value>,
}

/// `spec.sqs` (and `deadLetter.sqs`) with defaults filled in; `fifo` as the names use it.
pub(super) fn resolve(spec: &ChannelSpec, fifo: bool) -> SqsResolved {
    SqsResolved {
        visibility_timeout: spec
            .sqs
            .as_ref()
            .and_then(|s| s.visibility_timeout)
            .unwrap_or(SQS_DEFAULT_VISIBILITY),
        fifo,
        ..sqs_access(spec)
    }
}

/// The SQS encryption and policies of a channel (visibility and FIFO left at their zero).
fn sqs_access(spec: &ChannelSpec) -> SqsResolved {
    let own = spec.sqs.as_ref();
    let dl = spec.dead_letter.as_ref().and_then(|d| d.sqs.as_ref());
    let encryption = own
        .and_then(|s| s.encryption.as_ref())
        .and_then(Encryption::from_spec);
    let policy = |p: Option<&QueuePolicy>| p.and_then(|p| parse_policy(p).ok());
    SqsResolved {
        visibility_timeout: Duration::from_secs(0),
        fifo: false,
        dead_letter_encryption: match dl.and_then(|d| d.encryption.as_ref()) {
            Some(e) => Encryption::from_spec(e),
            None => encryption.clone(),
        },
        encryption,
        policy: policy(own.and_then(|s| s.policy.as_ref())),
        dead_letter_policy: policy(dl.and_then(|d| d.policy.as_ref())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::defaults::{
        PUBSUB_DEFAULT_RETENTION, SQS_DEFAULT_DLQ_RETENTION, SQS_DEFAULT_RETENTION,
    };
    use super::super::tests::resolved_on;
    use super::*;
    use crate::spec::model::Backend;

    /// SQS keeps a message 4 days by default, dlqctl's dead-letter queues 14 (SQS's maximum).
    #[test]
    fn sqs_retentions_default_to_four_and_fourteen_days() {
        assert_eq!(SQS_DEFAULT_RETENTION, Duration::from_secs(345_600));
        assert_eq!(SQS_DEFAULT_DLQ_RETENTION, Duration::from_secs(1_209_600));
        assert_eq!(PUBSUB_DEFAULT_RETENTION, Duration::from_secs(604_800));
        let r = resolved_on(Backend::Sqs, "orders", "  retry: {maxAttempts: 2}\n");
        assert_eq!(r.retention, Some(Duration::from_secs(345_600)));
        assert_eq!(
            r.dead_letter_retention,
            Some(Duration::from_secs(1_209_600))
        );
    }

    /// `sqs.fifo` reaches the resolved queue settings as well as the names.
    #[test]
    fn a_fifo_channel_resolves_to_fifo_queues() {
        let r = resolved_on(
            Backend::Sqs,
            "orders",
            "  retry: {maxAttempts: 2}\n  sqs: {fifo: true}\n",
        );
        let sqs = r.sqs.as_ref().expect("sqs settings");
        assert!(sqs.fifo, "fifo");
        assert_eq!(sqs.visibility_timeout, SQS_DEFAULT_VISIBILITY);
        assert_eq!(
            (r.main.as_str(), r.dead_letter.as_str()),
            ("orders.fifo", "orders-dlq.fifo")
        );
        let r = resolved_on(Backend::Sqs, "orders", "  retry: {maxAttempts: 2}\n");
        assert!(!r.sqs.as_ref().expect("sqs settings").fifo, "standard");
    }
}
