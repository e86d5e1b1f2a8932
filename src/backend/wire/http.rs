//! The HTTP client every HTTP backend (the RabbitMQ management API) goes through.
//!
//! Two types make "plan never writes" true by construction: [`ReadHttp`] can only GET, and
//! only a [`WriteHttp`] (built by `apply`) can PUT, POST or DELETE. Reads retry throttling
//! (429, 503) and dropped connections with a bounded backoff, within the target's
//! [`ReadBudget`] for attempts that get no answer; a TLS certificate error is final. Writes are
//! never retried here — after a failed or timed-out write the caller re-reads to learn what
//! happened. Every call is counted per API for `plan --stats`.
//!
//! What a server sends is bounded: a body larger than [`MAX_BODY`] is refused while it streams
//! in (never buffered whole), and redirects are never followed, so credentials go only to the
//! URL the targets file names.

use std::sync::Arc;

pub use super::stats::Stats;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

pub use super::retry::READ_ATTEMPTS;
use super::retry::{FIRST_BACKOFF, ReadBudget};
const TIMEOUT: Duration = Duration::from_secs(30);

/// The largest answer dlqctl reads (64 MiB): a management API listing of 500 queues is under
/// 1 MiB; anything far larger is a broken or hostile server, refused before it fills memory.
pub const MAX_BODY: usize = 64 * 1024 * 1024;

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
    #[error(
        "{api}: the answer is larger than {limit} MiB; refusing to read it (a broken or hostile server?)"
    )]
    TooLarge { api: String, limit: usize },
    #[error(
        "{api}: the server redirects (HTTP {status}) to {location}; dlqctl never follows redirects: set the target's `url` to the address that answers"
    )]
    Redirect {
        api: String,
        status: u16,
        location: String,
    },
    #[error(
        "cannot connect to {url}: TLS: {reason}; check the server's certificate (or pass --insecure for a test server)"
    )]
    Tls { url: String, reason: String },
    #[error(
        "{url}: no answer within the target's read budget of {secs}s (DLQCTL_READ_TIMEOUT / --read-timeout): {last}"
    )]
    Budget {
        url: String,
        secs: u64,
        last: String,
    },
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
    /// The target's name, for `-v`.
    target: String,
    base: String,
    user: Option<String>,
    password: Option<String>,
    /// An OAuth bearer token (Google Cloud), sent instead of basic auth.
    bearer: Option<String>,
    /// How to name the credentials in an error (the env var names, never the values).
    creds_hint: String,
    stats: Arc<Stats>,
    budget: ReadBudget,
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
    /// The target's name (for `-v` lines).
    pub target: String,
    pub base: String,
    pub user: Option<String>,
    pub password: Option<String>,
    /// An OAuth bearer token (Google Cloud); never printed.
    pub bearer: Option<String>,
    pub creds_hint: String,
    pub insecure: bool,
    pub budget: ReadBudget,
}

/// Read-only access: GET, and the one POST that reads ([`ReadHttp::peek`]).
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
            // Credentials go only to the URL the targets file names: no redirect is followed,
            // for reads or writes (a 3xx becomes an error that says where it pointed).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| HttpError::Connect {
                url: redact_userinfo(&cfg.base),
                reason: e.to_string(),
            })?;
        Ok(ReadHttp {
            inner: Inner {
                client,
                target: cfg.target,
                base: redact_userinfo(cfg.base.trim_end_matches('/')),
                user: cfg.user,
                password: cfg.password,
                bearer: cfg.bearer,
                creds_hint: cfg.creds_hint,
                stats,
                budget: cfg.budget,
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

    /// The target's read budget (the exporter renews it before each reading).
    pub fn budget(&self) -> &ReadBudget {
        &self.inner.budget
    }

    /// GET `path` as JSON. `api` names the call in stats and errors. `Ok(None)` for 404.
    pub async fn get(&self, api: &str, path: &str) -> Result<Option<Value>, HttpError> {
        let mut delay = FIRST_BACKOFF;
        let mut attempt = 1;
        let budget = &self.inner.budget;
        loop {
            let started = std::time::Instant::now();
            let timeout = TIMEOUT.min(budget.remaining().max(Duration::from_millis(1)));
            match self.inner.send(Method::GET, api, path, None, timeout).await {
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
                    if no_answer(&e) {
                        budget.spend(started.elapsed() + delay);
                        if budget.exhausted() {
                            return Err(self.out_of_budget(&e));
                        }
                    }
                    tracing::warn!(
                        // `e` names the call (`GET /api/queues/{vhost}: HTTP 503`).
                        "target {}: retry {attempt} of {} in {} ms after {e}",
                        self.inner.target,
                        READ_ATTEMPTS - 1,
                        delay.as_millis()
                    );
                    tokio::time::sleep(delay).await;
                    delay = super::retry::next(delay);
                    attempt += 1;
                }
                Err(e) if no_answer(&e) => {
                    budget.spend(started.elapsed());
                    return Err(if budget.exhausted() {
                        self.out_of_budget(&e)
                    } else {
                        e
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A POST that only reads: RabbitMQ's queue `get` with `ackmode: reject_requeue_true`,
    /// which hands every message back to the queue (marked redelivered). Never retried: a
    /// retry after a lost answer would read, and mark, the messages twice. Only a status door
    /// calls it, and only when the caller allowed reads that leave a trace.
    pub async fn peek(&self, api: &str, path: &str, body: &Value) -> Result<Value, HttpError> {
        let answer = self
            .inner
            .send(Method::POST, api, path, Some(body), TIMEOUT)
            .await?;
        json_or_404(api, answer)
    }

    fn out_of_budget(&self, last: &HttpError) -> HttpError {
        HttpError::Budget {
            url: self.inner.base.clone(),
            secs: self.inner.budget.limit().as_secs(),
            last: last.to_string(),
        }
    }
}

/// An answer's JSON; a 404 is an error naming the call (where absence is not an answer).
fn json_or_404(api: &str, (status, bytes): (StatusCode, Vec<u8>)) -> Result<Value, HttpError> {
    if status == StatusCode::NOT_FOUND {
        return Err(HttpError::Status {
            api: api.to_owned(),
            status: 404,
            reason: reason(&bytes),
        });
    }
    serde_json::from_slice(&bytes).map_err(|e| HttpError::Decode {
        api: api.to_owned(),
        reason: e.to_string(),
    })
}

fn retryable(e: &HttpError) -> bool {
    match e {
        HttpError::Status { status, .. } => matches!(status, 429 | 502 | 503 | 504),
        HttpError::Connect { .. } | HttpError::Timeout { .. } => true,
        _ => false,
    }
}

/// An attempt that got no answer at all: what the read budget counts.
fn no_answer(e: &HttpError) -> bool {
    matches!(e, HttpError::Connect { .. } | HttpError::Timeout { .. })
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
            .send(method, api, path, body, TIMEOUT)
            .await
            .map(|(s, _)| s)
    }
}

impl WriteHttp {
    /// One write that returns the answer's JSON (`Value::Null` for an empty body); never
    /// retried. A 404 is an error here, naming the call.
    pub async fn call(
        &self,
        method: Method,
        api: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, HttpError> {
        let answer = self
            .read
            .inner
            .send(method, api, path, body, TIMEOUT)
            .await?;
        if answer.1.iter().all(u8::is_ascii_whitespace) && answer.0 != StatusCode::NOT_FOUND {
            return Ok(Value::Null);
        }
        json_or_404(api, answer)
    }
}

impl Inner {
    async fn send(
        &self,
        method: Method,
        api: &str,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<(StatusCode, Vec<u8>), HttpError> {
        self.stats.count(api);
        let started = std::time::Instant::now();
        let shown = method.clone();
        let answer = self.send_once(method, api, path, body, timeout).await;
        // `base` never has userinfo (see `new`); the path holds names, never credentials.
        let outcome = match &answer {
            Ok((status, bytes)) => format!("{status} ({} bytes)", bytes.len()),
            Err(e) => format!("failed: {e}"),
        };
        tracing::info!(
            "target {}: {shown} {}{path} -> {outcome} in {} ms",
            self.target,
            self.base,
            started.elapsed().as_millis()
        );
        answer
    }

    async fn send_once(
        &self,
        method: Method,
        api: &str,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<(StatusCode, Vec<u8>), HttpError> {
        let url = format!("{}{path}", self.base);
        let mut req = self.client.request(method, &url).timeout(timeout);
        if let Some(user) = &self.user {
            req = req.basic_auth(user, self.password.as_ref());
        }
        if let Some(token) = &self.bearer {
            req = req.bearer_auth(token);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let mut resp = req
            .send()
            .await
            .map_err(|e| classify(&self.base, &e, timeout))?;
        let status = resp.status();
        if status.is_redirection() {
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map_or_else(|| "(no Location)".to_owned(), redact_userinfo);
            return Err(HttpError::Redirect {
                api: api.to_owned(),
                status: status.as_u16(),
                location: location.chars().take(300).collect(),
            });
        }
        let too_large = || HttpError::TooLarge {
            api: api.to_owned(),
            limit: MAX_BODY / (1024 * 1024),
        };
        if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
            return Err(too_large());
        }
        // Streamed with a running check: an endless or huge answer stops at the cap.
        let mut bytes = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| classify(&self.base, &e, timeout))?
        {
            if bytes.len() + chunk.len() > MAX_BODY {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
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

/// The server's reason, from RabbitMQ's `{"error": ..., "reason": ...}`, Google's
/// `{"error": {"message": ...}}` or the raw text.
fn reason(body: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let text = parsed
        .as_ref()
        .and_then(|v| {
            v.get("reason")
                .or_else(|| v.get("error").and_then(|e| e.get("message")))
                .or_else(|| v.get("error"))
        })
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(300).collect());
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn classify(base: &str, e: &reqwest::Error, timeout: Duration) -> HttpError {
    if e.is_timeout() {
        return HttpError::Timeout {
            url: base.to_owned(),
            secs: timeout.as_secs().max(1),
        };
    }
    // The innermost cause says what happened ("Connection refused"), without the URL noise.
    let mut source: &dyn std::error::Error = e;
    let mut tls = false;
    loop {
        tls |= is_certificate_error(&source.to_string());
        match source.source() {
            Some(s) => source = s,
            None => break,
        }
    }
    if tls {
        return HttpError::Tls {
            url: base.to_owned(),
            reason: source.to_string(),
        };
    }
    HttpError::Connect {
        url: base.to_owned(),
        reason: source.to_string(),
    }
}

/// Whether an error text is a TLS certificate problem: final, since retrying cannot fix it.
pub fn is_certificate_error(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("certificate") || t.contains("unknownissuer") || t.contains("invalid peer cert")
}

/// A URL without its userinfo (`http://user:pass@host/` → `http://host/`): what errors and
/// saved plans may show. Everything between `://` and the last `@` goes, so a password with an
/// unencoded `/`, `?` or `#` (which no URL parser reads as a password) goes too.
pub fn redact_userinfo(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return match url.rfind('@') {
            Some(at) => url[at + 1..].to_owned(),
            None => url.to_owned(),
        };
    };
    let rest = &url[scheme_end + 3..];
    match rest.rfind('@') {
        Some(at) => format!("{}{}", &url[..scheme_end + 3], &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Percent-encodes one path segment (a vhost `/` becomes `%2F`).
pub fn seg(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// What a path segment may not hold as it is under [`seg_unreserved`]: everything but letters,
/// digits and `-_.~` (RFC 3986's unreserved characters).
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// One path segment, percent-encoded but for RFC 3986's unreserved characters (the Google and
/// Azure APIs' names: a `-` or `.` stays as it is in the path).
pub fn seg_unreserved(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, UNRESERVED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_never_leaves_a_url() {
        assert_eq!(
            redact_userinfo("http://user:secret@127.0.0.1:15672/api"),
            "http://127.0.0.1:15672/api"
        );
        // A password with characters a URL would read as a path, query or fragment.
        assert_eq!(
            redact_userinfo("http://admin:pa/s?s#w@rabbit:15672"),
            "http://rabbit:15672"
        );
        assert_eq!(redact_userinfo("h:1"), "h:1");
    }

    #[test]
    fn certificate_errors_are_recognised() {
        assert!(is_certificate_error(
            "invalid peer certificate: UnknownIssuer"
        ));
        assert!(!is_certificate_error("Connection refused (os error 111)"));
    }
}
