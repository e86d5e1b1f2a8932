//! The `apiVersion` every document carries: the one version this release reads.
//!
//! Its own file so that the document modules (`channel`, `targets`) import it from below
//! instead of from `mod.rs`, which re-exports them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only `apiVersion` this release reads.
pub const API_VERSION: &str = "dlqctl/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ApiVersion {
    #[serde(rename = "dlqctl/v1")]
    V1,
}
