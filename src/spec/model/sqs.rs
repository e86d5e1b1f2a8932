//! `spec.sqs`: the settings that apply only to channels on an SQS target.
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
}
