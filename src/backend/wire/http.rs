//! The HTTP client every HTTP backend (the RabbitMQ management API) goes through.
//!
//! Two types make "plan never writes" true by construction: [`ReadHttp`] can only GET, and
//! only a [`WriteHttp`] (built by `apply`) can PUT, POST or DELETE. Reads retry throttling
//! (429, 503) and dropped connections with a bounded backoff; writes are never retried here —
//! after a failed or timed-out write the caller re-reads to learn what happened.
//! Every call is counted per API for `plan --stats`.

use std::sync::Arc;

pub use super::stats::Stats;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::retry::FIRST_BACKOFF;
pub use super::retry::READ_ATTEMPTS;
const TIMEOUT: Duration = Duration::from_secs(30);

/// A failed call, said so that the user knows which target and what to do.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot connect to {url}: {reason}; is the server running and the URL right?")]
    Connect { url: String, reason: String },
    #[error("{url}: timed out after {secs}s")]
    Timeout { url: String, secs: u64 },
    #[error("{api}: login failed (HTTP 401); check the credentials in {creds}")]
    Unauthorized { api: String, creds: String },
    #[error("{api}: HTTP {status}: {reason}")]
    Status {
        api: String,
        status: u16,
        reason: String,
    },
    #[error("{api}: the response was not the expected JSON: {reason}")]
    Decode { api: String, reason: String },
    /// Refused by dlqctl itself before any request (a name outside the ownership prefixes).
    #[error("{what}: {reason}")]
    Refused { what: String, reason: String },
}

impl HttpError {
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Status { status, .. } => Some(*status),
            HttpError::Unauthorized { .. } => Some(401),
            _ => None,
        }
    }
}

#[derive(Clone)]
struct Inner {
    client: reqwest::Client,
    base: String,
    user: Option<String>,
    password: Option<String>,
    /// How to name the credentials in an error (the env var names, never the values).
    creds_hint: String,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password, not even in debug output.
        f.debug_struct("Http")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Settings for a client.
pub struct HttpConfig {
    pub base: String,
    pub user: Option<String>,
    pub password: Option<String>,
    pub creds_hint: String,
    pub insecure: bool,
}

/// Read-only access: GET only.
#[derive(Debug, Clone)]
pub struct ReadHttp {
    inner: Inner,
}

/// Read and write access, for apply.
#[derive(Debug, Clone)]
pub struct WriteHttp {
    read: ReadHttp,
}

impl ReadHttp {
    pub fn new(cfg: HttpConfig, stats: Arc<Stats>) -> Result<Self, HttpError> {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .danger_accept_invalid_certs(cfg.insecure)
            .user_agent(concat!("dlqctl/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| HttpError::Connect {
                url: cfg.base.clone(),
                reason: e.to_string(),
            })?;
        Ok(ReadHttp {
            inner: Inner {
                client,
                base: cfg.base.trim_end_matches('/').to_owned(),
                user: cfg.user,
                password: cfg.password,
                creds_hint: cfg.creds_hint,
                stats,
            },
        })
    }

    /// The writer for apply. Plan never calls this.
    pub fn into_writer(self) -> WriteHttp {
        WriteHttp { read: self }
    }

    pub fn base(&self) -> &str {
        &self.inner.base
    }

    /// GET `path` as JSON. `api` names the call in stats and errors. `Ok(None)` for 404.
    pub async fn get(&self, api: &str, path: &str) -> Result<Option<Value>, HttpError> {
        let mut delay = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            match self.inner.send(Method::GET, api, path, None).await {
                Ok((status, _)) if status == StatusCode::NOT_FOUND => return Ok(None),
                Ok((_, body)) => {
                    return serde_json::from_slice(&body).map(Some).map_err(|e| {
                        HttpError::Decode {
                            api: api.to_owned(),
                            reason: e.to_string(),
                        }
                    });
                }
                Err(e) if attempt < READ_ATTEMPTS && retryable(&e) => {
                    tokio::time::sleep(delay).await;
                    delay = super::retry::next(delay);
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

fn retryable(e: &HttpError) -> bool {
    match e {
        HttpError::Status { status, .. } => matches!(status, 429 | 502 | 503 | 504),
        HttpError::Connect { .. } | HttpError::Timeout { .. } => true,
        _ => false,
    }
}

impl WriteHttp {
    pub fn reader(&self) -> &ReadHttp {
        &self.read
    }

    /// One write; never retried (the caller re-reads after a failure).
    pub async fn send(
        &self,
        method: Method,
        api: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<StatusCode, HttpError> {
        self.read
            .inner
            .send(method, api, path, body)
            .await
            .map(|(s, _)| s)
    }
}

impl Inner {
    async fn send(
        &self,
        method: Method,
        api: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Vec<u8>), HttpError> {
        self.stats.count(api);
        let url = format!("{}{path}", self.base);
        let mut req = self.client.request(method, &url);
        if let Some(user) = &self.user {
            req = req.basic_auth(user, self.password.as_ref());
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| classify(&self.base, &e))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| classify(&self.base, &e))?
            .to_vec();
        if status.is_success() || status == StatusCode::NOT_FOUND {
            return Ok((status, bytes));
        }
        if status == StatusCode::UNAUTHORIZED {
            return Err(HttpError::Unauthorized {
                api: api.to_owned(),
                creds: self.creds_hint.clone(),
            });
        }
        Err(HttpError::Status {
            api: api.to_owned(),
            status: status.as_u16(),
            reason: reason(&bytes),
        })
    }
}

/// The server's reason, from RabbitMQ's `{"error": ..., "reason": ...}` or the raw text.
fn reason(body: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let text = parsed
        .as_ref()
        .and_then(|v| v.get("reason").or_else(|| v.get("error")))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(300).collect());
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn classify(base: &str, e: &reqwest::Error) -> HttpError {
    if e.is_timeout() {
        return HttpError::Timeout {
            url: base.to_owned(),
            secs: TIMEOUT.as_secs(),
        };
    }
    // The innermost cause says what happened ("Connection refused"), without the URL noise.
    let mut source: &dyn std::error::Error = e;
    while let Some(s) = source.source() {
        source = s;
    }
    HttpError::Connect {
        url: base.to_owned(),
        reason: source.to_string(),
    }
}

/// Percent-encodes one path segment (a vhost `/` becomes `%2F`).
pub fn seg(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}
