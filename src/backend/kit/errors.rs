//! The errors every backend speaks: a door fails with the backend's own error (an
//! [`HttpError`], an [`AwsError`], Kafka's), which [`AtTarget`] turns into the target-level
//! [`BackendError`] the verbs report, naming the target in one place.

use crate::backend::wire::aws::AwsError;
use crate::backend::wire::http::HttpError;

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("target `{target}`: environment variable {var} ({field}) is not set")]
    MissingEnv {
        target: String,
        field: &'static str,
        var: String,
    },
    #[error("target `{target}`: {message}")]
    Config { target: String, message: String },
    // Not a `#[source]`: the message already says it, and `{:#}` would say it twice.
    #[error("target `{target}`: {error}")]
    Http { target: String, error: HttpError },
    // Not a `#[source]`: the message already says it, and `{:#}` would say it twice.
    #[error("target `{target}`: {error}")]
    Aws { target: String, error: AwsError },
    /// A backend's own client error (Kafka's), said whole. Not a `#[source]`: the message
    /// already says it, and `{:#}` would repeat it.
    #[error("target `{target}`: {error}")]
    Client {
        target: String,
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("target `{target}`: {message}")]
    Move { target: String, message: String },
}

/// A mover's failure, said whole (which message, which queue, what is left where).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveError(pub String);

impl std::fmt::Display for MoveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl MoveError {
    /// Any failure's text, said whole.
    pub fn of(e: impl std::fmt::Display) -> Self {
        MoveError(e.to_string())
    }
}

impl AtTarget for MoveError {
    fn at(self, target: &str) -> BackendError {
        BackendError::Move {
            target: target.to_owned(),
            message: self.0,
        }
    }
}

/// A backend's own error, turned into the target-level [`BackendError`]: the one place where
/// that happens.
pub trait AtTarget {
    fn at(self, target: &str) -> BackendError;
}

impl AtTarget for BackendError {
    /// Already names its target.
    fn at(self, _target: &str) -> BackendError {
        self
    }
}

impl AtTarget for HttpError {
    fn at(self, target: &str) -> BackendError {
        BackendError::Http {
            target: target.to_owned(),
            error: self,
        }
    }
}

impl AtTarget for AwsError {
    fn at(self, target: &str) -> BackendError {
        BackendError::Aws {
            target: target.to_owned(),
            error: self,
        }
    }
}
