//! `spec.sqs`: the settings that apply only to channels on an SQS target, and
//! `deadLetter.sqs`, the dead-letter queue's own encryption and access policy when they
//! differ from the main queue's.
//!
//! Depends only on `spec::duration`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::duration::Duration;

/// SQS settings; only for channels whose target is an SQS target.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SqsOptions {
    /// How long a received message stays hidden; with no native backoff on SQS this is what
    /// spaces retries. Default 30s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility_timeout: Option<Duration>,
    /// FIFO queues (names end in `.fifo`). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifo: Option<bool>,
    /// Server-side encryption of the main queue and the dead-letter queue alike (the
    /// dead-letter queue holds the same messages): `{kms: KEY}` or `{managed: true}`
    /// (SSE-SQS). Unset: dlqctl does not manage encryption, and `plan` notes a dead-letter
    /// queue weaker than its source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<SqsEncryption>,
    /// The main queue's access policy (SQS `Policy`), as a mapping or as JSON text. Compared
    /// as parsed JSON: statement order and whitespace do not matter. Unset: not managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<QueuePolicy>,
}

/// `deadLetter.sqs`: what the dead-letter queue does differently from the main queue.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeadLetterSqs {
    /// The dead-letter queue's encryption, when it must differ from `spec.sqs.encryption`
    /// (lint warns `deadletter/weaker-encryption` when it is weaker: none < SSE-SQS < KMS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<SqsEncryption>,
    /// The dead-letter queue's access policy (SQS `Policy`), as a mapping or as JSON text
    /// (lint warns `deadletter/wider-access` when it lets a principal receive messages that
    /// the main queue's policy does not). Unset: not managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<QueuePolicy>,
}

/// Server-side encryption: a KMS key (`kms`, with `dataKeyReuse`), or SQS-managed keys
/// (`managed: true`, SSE-SQS); `managed: false` without `kms` is no encryption at all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SqsEncryption {
    /// KMS key id, ARN or alias (`alias/payments`): SQS `KmsMasterKeyId`. Not with `managed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub kms: Option<String>,
    /// With `kms`: how long SQS reuses a data key before asking KMS again, 1m to 24h
    /// (`KmsDataKeyReusePeriodSeconds`). Default 5m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_key_reuse: Option<Duration>,
    /// `true`: SQS-managed encryption keys (SSE-SQS, `SqsManagedSseEnabled`); `false`: no
    /// server-side encryption. Not with `kms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<bool>,
}

/// A queue access policy: the IAM policy document as a YAML mapping, or as its JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum QueuePolicy {
    /// The policy document as JSON text.
    Text(String),
    /// The policy document as a mapping (`Version`, `Statement`, ...).
    Document(serde_json::Map<String, serde_json::Value>),
}
