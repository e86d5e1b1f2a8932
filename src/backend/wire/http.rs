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
    /// HTTP 429: throttled, with the server's `Retry-After` in seconds when it sent one
    /// (said as any other status).
    #[error("{api}: HTTP 429: {reason}")]
    Throttled {
        api: String,
        retry_after: Option<u64>,
        reason: String,
    },
    /// The token endpoint gave no token (client credentials): its `error` and
    /// `error_description`, never the secret.
    #[error("token endpoint {url}: no token for scope {scope}: {reason}")]
    Token {
        url: String,
        scope: String,
        reason: String,
    },
}

impl HttpError {
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Status { status, .. } => Some(*status),
            HttpError::Unauthorized { .. } => Some(401),
            HttpError::Throttled { .. } => Some(429),
            _ => None,
        }
    }

    /// How long a throttled answer asked to wait (`Retry-After`), at most [`MAX_RETRY_AFTER`].
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            HttpError::Throttled {
                retry_after: Some(s),
                ..
            } => Some(Duration::from_secs(*s).min(MAX_RETRY_AFTER)),
            _ => None,
        }
    }
}

/// The longest `Retry-After` dlqctl waits; a server asking for more gets it capped, and the
/// call's tries run out sooner.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

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
    /// A token fetched per request from a source (client credentials), instead of `bearer`.
    token: Option<token::TokenSource>,
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
                token: None,
                creds_hint: cfg.creds_hint,
                stats,
                budget: cfg.budget,
            },
        })
    }

    /// Sends the token `source` fetches (and keeps) instead of a fixed bearer.
    pub fn with_token_source(mut self, source: token::TokenSource) -> Self {
        self.inner.token = Some(source);
        self
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
                    // A throttled answer's Retry-After, when longer than the backoff.
                    let (wait, why) = match e.retry_after() {
                        Some(r) if r > delay => (r, " (the server's Retry-After)"),
                        _ => (delay, ""),
                    };
                    tracing::warn!(
                        // `e` names the call (`GET /api/queues/{vhost}: HTTP 503`).
                        "target {}: retry {attempt} of {} in {} ms{why} after {e}",
                        self.inner.target,
                        READ_ATTEMPTS - 1,
                        wait.as_millis()
                    );
                    tokio::time::sleep(wait).await;
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
        HttpError::Throttled { .. } => true,
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
        if let Some(source) = &self.token {
            req = req.bearer_auth(source.bearer().await?);
        } else if let Some(token) = &self.bearer {
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
        // Seconds only (RFC 9110 also allows a date, which ARM does not send).
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
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
        if status == StatusCode::TOO_MANY_REQUESTS {
            return Err(HttpError::Throttled {
                api: api.to_owned(),
                retry_after,
                reason: reason(&bytes),
            });
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

pub mod token {
    //! (Inline in http.rs: the client sends these tokens and they speak its errors; one file,
    //! so no use cycle between two.)
    //!
    //! Bearer tokens fetched with the OAuth 2.0 client-credentials grant (Microsoft identity
    //! platform, "OAuth 2.0 client credentials flow": a `POST` of `client_id`, `client_secret`,
    //! `scope` and `grant_type=client_credentials` as `application/x-www-form-urlencoded` to the
    //! tenant's token endpoint, answered `{token_type, expires_in, access_token}`, or on failure
    //! `{error, error_description, error_codes, ...}`), or from a managed identity
    //! (["How to use managed identities for Azure resources on an Azure VM to acquire an access
    //! token", "Get a token using HTTP"]: a `GET` of the instance metadata service's
    //! `/metadata/identity/oauth2/token?api-version=2018-02-01&resource=AUDIENCE`, with the
    //! header `Metadata: true` and, for a user-assigned identity, `client_id`; answered
    //! `{access_token, expires_in, resource, token_type, ...}` with `expires_in` a string), or
    //! with Kubernetes workload identity (the same endpoint as client credentials, "Third case:
    //! Access token request with a federated credential": `client_assertion_type` set to
    //! `urn:ietf:params:oauth:client-assertion-type:jwt-bearer` and `client_assertion` the
    //! service account token the workload identity webhook mounts, in place of the secret).
    //!
    //! A [`TokenSource`] is one scope's token (a token is issued for one audience: on Azure, ARM
    //! and the Service Bus data plane each need their own). It is made without a call, so
    //! connecting stays cheap; the first request that needs a token fetches it, and the token is
    //! kept and fetched again [`REFRESH_BEFORE`] before it expires. Clones share it (an `Arc`
    //! around an async mutex held across the fetch), so at most one fetch is in flight and every
    //! client of a target uses the same token. A client-credential or federated exchange is
    //! never retried here (a wrong secret would only be sent again); the instance metadata service's 404,
    //! 410, 429 and 5xx are, with a back-off, as its documentation's "Retry guidance" advises.
    //!
    //! Neither the secret nor a token is ever printed: both are registered with
    //! [`crate::secrets::never_show`] (cut out of every `-v` line), errors carry only the
    //! endpoint, the server's `error` and `error_description` (with the secret cut out, should a
    //! server echo it), and `Debug` shows neither.

    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use serde_json::Value;

    use super::{HttpError, MAX_BODY, Stats, redact_userinfo};

    /// How long before its expiry a token is fetched again.
    pub const REFRESH_BEFORE: Duration = Duration::from_secs(300);
    /// A kept token with less life than this left is not used while a refresh fails.
    const STILL_GOOD: Duration = Duration::from_secs(60);
    /// How soon a failed refresh is tried again while the kept token is still good.
    const REFRESH_AGAIN: Duration = Duration::from_secs(30);
    /// The instance metadata service is asked again for this long at most (the waits and
    /// the answers together), whatever it answers.
    const IDENTITY_DEADLINE: Duration = Duration::from_secs(90);
    const TIMEOUT: Duration = Duration::from_secs(30);
    /// The call's name in `--stats`.
    pub const API: &str = "POST oauth2/v2.0/token";
    /// The managed identity's call in `--stats`.
    pub const IDENTITY_API: &str = "GET metadata/identity/oauth2/token";
    /// The waits before the instance metadata service is asked again after a transient
    /// answer: four more tries over 7.5 s ("Retry guidance": retry 404, 429 and 5xx with an
    /// exponential back-off).
    const IDENTITY_BACKOFF: [Duration; 4] = [
        Duration::from_millis(500),
        Duration::from_secs(1),
        Duration::from_secs(2),
        Duration::from_secs(4),
    ];
    /// `client_assertion_type` of a federated credential's exchange ("Third case: Access
    /// token request with a federated credential").
    const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
    /// A 410 ("IMDS is going through updates"): asked again every 10 s, up to 7 times (the
    /// 70 s within which it says it is back).
    const IDENTITY_UPDATING_WAIT: Duration = Duration::from_secs(10);
    const IDENTITY_UPDATING_TRIES: u32 = 7;
    /// The instance metadata service's token endpoint (Azure VMs, scale sets, AKS nodes).
    pub const IMDS_URL: &str = "http://169.254.169.254/metadata/identity/oauth2/token";

    /// How a token is got.
    #[derive(Clone, Debug)]
    pub enum Grant {
        ClientCredentials(ClientCredentials),
        /// The machine's managed identity, from the instance metadata service at `url`;
        /// `client_id`: a user-assigned identity's (else the system-assigned one).
        ManagedIdentity {
            url: String,
            client_id: Option<String>,
        },
        /// Kubernetes workload identity: the service account token in `token_file`, read
        /// anew for each exchange (the kubelet rotates it), presented as the client
        /// assertion of application `client_id` at the token endpoint `url`.
        Federated {
            url: String,
            client_id: String,
            token_file: std::path::PathBuf,
        },
    }

    impl Grant {
        fn url(&self) -> &str {
            match self {
                Grant::ClientCredentials(c) => &c.url,
                Grant::ManagedIdentity { url, .. } | Grant::Federated { url, .. } => url,
            }
        }
    }

    /// The client credentials and the endpoint they are exchanged at.
    #[derive(Clone)]
    pub struct ClientCredentials {
        /// The token endpoint (`https://login.microsoftonline.com/TENANT/oauth2/v2.0/token`).
        pub url: String,
        pub client_id: String,
        pub client_secret: String,
    }

    impl std::fmt::Debug for ClientCredentials {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            // Never the secret.
            f.debug_struct("ClientCredentials")
                .field("url", &self.url)
                .field("client_id", &self.client_id)
                .finish_non_exhaustive()
        }
    }

    struct Cached {
        token: String,
        /// When it is fetched again (its expiry less [`REFRESH_BEFORE`]).
        refresh_at: Instant,
        /// When it expires.
        expires_at: Instant,
    }

    struct Inner {
        creds: Grant,
        scope: String,
        client: reqwest::Client,
        stats: Arc<Stats>,
        /// The target's name, for `-v` lines.
        target: String,
        cached: tokio::sync::Mutex<Option<Cached>>,
    }

    /// One scope's token, fetched on first use and shared by clones.
    #[derive(Clone)]
    pub struct TokenSource {
        inner: Arc<Inner>,
    }

    impl std::fmt::Debug for TokenSource {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            // Never the token.
            f.debug_struct("TokenSource")
                .field("url", &self.inner.creds.url())
                .field("scope", &self.inner.scope)
                .finish_non_exhaustive()
        }
    }

    impl TokenSource {
        /// A source of `scope`'s token (`https://management.azure.com/.default`); no call yet.
        pub fn new(
            target: &str,
            creds: Grant,
            scope: &str,
            insecure: bool,
            stats: Arc<Stats>,
        ) -> Result<Self, HttpError> {
            if let Grant::ClientCredentials(c) = &creds {
                crate::secrets::never_show(&c.client_secret);
            }
            let client = reqwest::Client::builder()
                .timeout(TIMEOUT)
                .connect_timeout(Duration::from_secs(10))
                .danger_accept_invalid_certs(insecure)
                .user_agent(concat!("dlqctl/", env!("CARGO_PKG_VERSION")))
                // The secret goes only to the endpoint the targets file names.
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| HttpError::Connect {
                    url: redact_userinfo(creds.url()),
                    reason: e.to_string(),
                })?;
            Ok(TokenSource {
                inner: Arc::new(Inner {
                    creds,
                    scope: scope.to_owned(),
                    client,
                    stats,
                    target: target.to_owned(),
                    cached: tokio::sync::Mutex::new(None),
                }),
            })
        }

        pub fn scope(&self) -> &str {
            &self.inner.scope
        }

        /// The token to send now: the kept one, or a fresh one when there is none or it is due.
        pub async fn bearer(&self) -> Result<String, HttpError> {
            // Held across the fetch: a second caller waits for the first fetch's token.
            let mut cached = self.inner.cached.lock().await;
            let now = Instant::now();
            if let Some(c) = cached.as_ref()
                && now < c.refresh_at
            {
                return Ok(c.token.clone());
            }
            // A refresh while the kept token is still good is tried once, without waiting
            // out a busy endpoint: every request of the run waits for this lock, and a wait
            // longer than a message lock would cost more than the refresh is worth.
            let kept = cached
                .as_ref()
                .filter(|c| now + STILL_GOOD < c.expires_at)
                .map(|c| (c.token.clone(), c.expires_at));
            match self.fetch(kept.is_none()).await {
                Ok((token, expires_in)) => {
                    let lifetime = Duration::from_secs(expires_in);
                    // A short-lived token is used for half its life rather than not at all.
                    let margin = REFRESH_BEFORE.min(lifetime / 2);
                    let now = Instant::now();
                    *cached = Some(Cached {
                        token: token.clone(),
                        refresh_at: now + lifetime.saturating_sub(margin),
                        expires_at: now + lifetime,
                    });
                    Ok(token)
                }
                Err(e) => {
                    let Some((token, expires_at)) = kept else {
                        return Err(e);
                    };
                    tracing::info!(
                        "target {}: refreshing the token for {} failed ({e}); the kept one is good for {} s more, asking again in {} s",
                        self.inner.target,
                        self.inner.scope,
                        expires_at.saturating_duration_since(now).as_secs(),
                        REFRESH_AGAIN.as_secs()
                    );
                    if let Some(c) = cached.as_mut() {
                        c.refresh_at = now + REFRESH_AGAIN;
                    }
                    Ok(token)
                }
            }
        }

        fn failed(&self, reason: String) -> HttpError {
            HttpError::Token {
                url: redact_userinfo(self.inner.creds.url()),
                scope: self.inner.scope.clone(),
                // The client secret (registered in `new`) and a federated assertion
                // (registered per exchange) are cut out, should an endpoint echo them.
                reason: crate::secrets::scrub(&reason),
            }
        }

        /// One exchange: the token and its lifetime in seconds. `patient`: the instance
        /// metadata service's transient answers are waited out (there is no token to use
        /// meanwhile).
        async fn fetch(&self, patient: bool) -> Result<(String, u64), HttpError> {
            let i = &self.inner;
            let enc = |s: &str| {
                percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC)
                    .to_string()
            };
            let request = match &i.creds {
                Grant::ClientCredentials(c) => i
                    .client
                    .post(&c.url)
                    .header(
                        reqwest::header::CONTENT_TYPE,
                        "application/x-www-form-urlencoded",
                    )
                    .body(format!(
                        "client_id={}&client_secret={}&scope={}&grant_type=client_credentials",
                        enc(&c.client_id),
                        enc(&c.client_secret),
                        enc(&i.scope)
                    )),
                Grant::Federated {
                    url,
                    client_id,
                    token_file,
                } => {
                    let assertion = std::fs::read_to_string(token_file).map_err(|e| {
                        self.failed(format!(
                            "cannot read the federated token file {} (AZURE_FEDERATED_TOKEN_FILE): {e}",
                            token_file.display()
                        ))
                    })?;
                    let assertion = assertion.trim();
                    if assertion.is_empty() {
                        return Err(self.failed(format!(
                            "the federated token file {} (AZURE_FEDERATED_TOKEN_FILE) is empty",
                            token_file.display()
                        )));
                    }
                    crate::secrets::never_show(assertion);
                    i.client
                        .post(url)
                        .header(
                            reqwest::header::CONTENT_TYPE,
                            "application/x-www-form-urlencoded",
                        )
                        .body(format!(
                            "client_id={}&client_assertion_type={}&client_assertion={}&scope={}&grant_type=client_credentials",
                            enc(client_id),
                            enc(JWT_BEARER),
                            enc(assertion),
                            enc(&i.scope)
                        ))
                }
                Grant::ManagedIdentity { url, client_id } => {
                    // The instance metadata service takes the audience itself, not a scope.
                    let resource = i.scope.strip_suffix("/.default").unwrap_or(&i.scope);
                    let mut query = format!("api-version=2018-02-01&resource={}", enc(resource));
                    if let Some(id) = client_id {
                        query.push_str(&format!("&client_id={}", enc(id)));
                    }
                    i.client
                        .get(format!("{url}?{query}"))
                        .header("Metadata", "true")
                }
            };
            self.exchange(request, patient).await
        }

        /// Sends a token request and reads its answer. The instance metadata service's
        /// transient answers (404 while it updates, 429 when throttled, 5xx) are tried again
        /// after [`IDENTITY_BACKOFF`], and its 410 every [`IDENTITY_UPDATING_WAIT`], as
        /// Microsoft's retry guidance for it advises, for [`IDENTITY_DEADLINE`] at most and
        /// only when `patient`; a token endpoint's never (see the module's docs).
        async fn exchange(
            &self,
            request: reqwest::RequestBuilder,
            patient: bool,
        ) -> Result<(String, u64), HttpError> {
            let i = &self.inner;
            let managed = matches!(i.creds, Grant::ManagedIdentity { .. });
            let mut waits = IDENTITY_BACKOFF.iter();
            let (mut tries, mut updating, started) = (0u32, 0u32, Instant::now());
            loop {
                let this = request
                    .try_clone()
                    .ok_or_else(|| self.failed("the request cannot be sent".into()))?;
                i.stats.count(if managed { IDENTITY_API } else { API });
                tries += 1;
                let (answer, status) = self.attempt(this).await;
                let wait = match status {
                    _ if !managed || !patient || answer.is_ok() => None,
                    // "IMDS is going through updates and will be available in a maximum of
                    // 70 seconds".
                    Some(410) if updating < IDENTITY_UPDATING_TRIES => {
                        updating += 1;
                        Some(IDENTITY_UPDATING_WAIT)
                    }
                    Some(s) if s == 404 || s == 429 || s >= 500 => waits.next().copied(),
                    _ => None,
                };
                let wait = wait.filter(|w| started.elapsed() + *w < IDENTITY_DEADLINE);
                let Some(wait) = wait else {
                    return answer.map_err(|e| match e {
                        HttpError::Token { url, scope, reason } if tries > 1 => HttpError::Token {
                            url,
                            scope,
                            reason: format!(
                                "{reason} (the last of {tries} answers over {} s)",
                                started.elapsed().as_secs()
                            ),
                        },
                        e => e,
                    });
                };
                tracing::info!(
                    "target {}: the instance metadata service answered HTTP {}; asking again in {} ms",
                    i.target,
                    status.unwrap_or_default(),
                    wait.as_millis()
                );
                tokio::time::sleep(wait).await;
            }
        }

        /// One token request: its outcome, and the HTTP status when there was an answer.
        async fn attempt(
            &self,
            request: reqwest::RequestBuilder,
        ) -> (Result<(String, u64), HttpError>, Option<u16>) {
            let i = &self.inner;
            let managed = matches!(i.creds, Grant::ManagedIdentity { .. });
            let started = Instant::now();
            let mut answered = None;
            let answer = async {
                let mut resp = request
                    .send()
                    .await
                    .map_err(|e| self.failed(innermost(&e)))?;
                let status = resp.status();
                answered = Some(status.as_u16());
                if status.is_redirection() {
                    return Err(self.failed(format!(
                        "HTTP {status}: the endpoint redirects, and dlqctl never follows a redirect with a secret"
                    )));
                }
                let mut bytes = Vec::new();
                while let Some(chunk) = resp.chunk().await.map_err(|e| self.failed(innermost(&e)))? {
                    if bytes.len() + chunk.len() > MAX_BODY {
                        return Err(self.failed("the answer is too large".into()));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                let body: Option<Value> = serde_json::from_slice(&bytes).ok();
                if !status.is_success() {
                    let field = |k: &str| {
                        body.as_ref()
                            .and_then(|b| b.get(k))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    };
                    let said = match (field("error"), field("error_description")) {
                        (Some(e), Some(d)) => format!("{e}: {d}"),
                        (Some(e), None) => e,
                        _ => "no OAuth error in the answer".to_owned(),
                    };
                    let hint = match (status.as_u16(), &i.creds) {
                        (400 | 401, Grant::Federated { .. }) => {
                            "; check the application's federated credential (its issuer and subject must be the cluster's OIDC issuer and this pod's service account), and the tenant and client id (AZURE_TENANT_ID, AZURE_CLIENT_ID, or `tenantId`, `clientId`)"
                        }
                        (401, Grant::ClientCredentials(_)) => {
                            "; check the client id and the secret in clientSecretEnv"
                        }
                        (400, Grant::ClientCredentials(_)) => {
                            "; check tenantId, clientId and tokenUrl"
                        }
                        (400, Grant::ManagedIdentity { .. }) => {
                            "; check that this machine has a managed identity, and `clientId` for a user-assigned one"
                        }
                        _ => "",
                    };
                    return Err(self.failed(format!("HTTP {}: {said}{hint}", status.as_u16())));
                }
                let b = body.ok_or_else(|| self.failed("the answer is not JSON".into()))?;
                let token = b
                    .get("access_token")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| self.failed("the answer has no `access_token`".into()))?;
                // A number in v2.0; v1.0 endpoints answered a string.
                let expires_in = match b.get("expires_in") {
                    Some(Value::Number(n)) => n.as_u64(),
                    Some(Value::String(s)) => s.parse().ok(),
                    _ => None,
                }
                .ok_or_else(|| self.failed("the answer has no `expires_in`".into()))?;
                crate::secrets::never_show(token);
                Ok((token.to_owned(), expires_in))
            }
            .await;
            let outcome = match &answer {
                Ok((_, secs)) => format!("a token for {} ({secs} s)", i.scope),
                Err(e) => format!("failed: {e}"),
            };
            tracing::info!(
                "target {}: {} {} -> {outcome} in {} ms",
                i.target,
                if managed { "GET" } else { "POST" },
                redact_userinfo(i.creds.url()),
                started.elapsed().as_millis()
            );
            (answer, answered)
        }
    }

    fn innermost(e: &reqwest::Error) -> String {
        if e.is_timeout() {
            return format!("timed out after {}s", TIMEOUT.as_secs());
        }
        let mut source: &dyn std::error::Error = e;
        while let Some(s) = source.source() {
            source = s;
        }
        format!("cannot connect: {source}")
    }

    /// What a client sends as its bearer: a token it was handed, or one it fetches.
    #[derive(Clone)]
    pub enum Bearer {
        Fixed(String),
        Fetched(TokenSource),
    }

    impl std::fmt::Debug for Bearer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self {
                Bearer::Fixed(_) => f.write_str("Bearer::Fixed(..)"),
                Bearer::Fetched(s) => s.fmt(f),
            }
        }
    }

    impl Bearer {
        pub async fn token(&self) -> Result<String, HttpError> {
            match self {
                Bearer::Fixed(t) => Ok(t.clone()),
                Bearer::Fetched(s) => s.bearer().await,
            }
        }
    }
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
