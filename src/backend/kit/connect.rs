//! What connecting to a target needs from outside the backend: the command line's options,
//! credentials from the environment variables the targets file names (registered as secrets
//! the moment they are read), and the target's ownership prefixes.

use super::errors::BackendError;
use crate::backend::wire;
use crate::spec::model::Target;

/// Connection options from the command line.
#[derive(Debug, Clone, Copy)]
pub struct ConnectOptions {
    /// Accept any TLS certificate (`--insecure`).
    pub insecure: bool,
    /// Each target's budget for reads that get no answer (`--read-timeout`).
    pub read_timeout: std::time::Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            insecure: false,
            read_timeout: wire::retry::DEFAULT_READ_BUDGET,
        }
    }
}

/// The value of the environment variable a target names for `field` (`None`: none named).
pub(crate) fn env_value(
    target: &str,
    field: &'static str,
    var: Option<&String>,
) -> Result<Option<String>, BackendError> {
    let Some(var) = var else { return Ok(None) };
    match std::env::var(var) {
        Ok(v) => {
            if field != "usernameEnv" {
                crate::secrets::never_show(&v);
            }
            Ok(Some(v))
        }
        Err(_) => Err(BackendError::MissingEnv {
            target: target.to_owned(),
            field,
            var: var.clone(),
        }),
    }
}

/// The target's ownership prefixes (none declared: empty).
pub(crate) fn prefixes(target: &Target) -> Vec<String> {
    target
        .ownership
        .as_ref()
        .map(|o| o.prefixes.clone())
        .unwrap_or_default()
}
