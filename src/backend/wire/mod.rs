//! Wire clients, below the backends: the AWS SDK call wrapper, the HTTP client with its
//! read-only and writing halves, OAuth client-credentials tokens, the shared read retry budget and the call counter.
//!
//! Nothing here knows the spec (`crate::spec` is never imported): a backend turns its target
//! into the settings these clients take.

pub mod aws;
pub mod http;
pub mod retry;
pub mod stats;
pub use http::token;

pub use stats::Stats;
