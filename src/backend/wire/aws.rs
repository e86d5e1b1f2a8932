//! The AWS side shared by SQS and CloudWatch: one SDK configuration per target, errors that
//! say what to do, and the retry rules.
//!
//! Credentials come from the SDK's standard chain only (environment, profile, web identity,
//! container and instance roles); the targets file may name a `profile`, a `region` and an
//! `endpoint` override. The SDK's own retries are disabled: reads retry throttling, 5xx and
//! dropped connections here with a bounded backoff; writes are sent once, and after an
//! ambiguous failure the caller re-reads to learn what happened. Every attempt is counted in
//! the plan's [`Stats`] under a label such as `sqs:GetQueueAttributes`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use tokio::sync::OnceCell;

use super::stats::Stats;

pub use super::retry::READ_ATTEMPTS;
use super::retry::{FIRST_BACKOFF, ReadBudget};
const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Error codes AWS uses for throttling (SQS says `RequestThrottled`, CloudWatch `Throttling`).
/// `LimitExceeded` is a quota, not a throttle: it is never retried.
const THROTTLE_CODES: [&str; 6] = [
    "Throttling",
    "ThrottlingException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
];

/// A failed AWS call: which API, on which live resource, and what AWS said.
#[derive(Debug, thiserror::Error)]
#[error("{api} on {resource}: {detail}")]
pub struct AwsError {
    /// `sqs:CreateQueue`.
    pub api: &'static str,
    /// `queue payments-dlq`, `alarm payments-dlq-depth`, `queues starting with payments`.
    pub resource: String,
    /// The AWS error code, when AWS answered (`QueueDeletedRecently`).
    pub code: Option<String>,
    pub kind: ErrorKind,
    pub detail: String,
}

/// What kind of failure, which decides retries (reads) and re-reads (writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// AWS answered with an error that will not go away by asking again.
    Rejected,
    /// Throttled or a server-side (5xx) error: reads retry it.
    Throttled,
    /// No answer: timeout or dropped connection. A write may or may not have happened.
    NoAnswer,
    /// The request never left (no credentials, bad endpoint, ...).
    Local,
}

impl AwsError {
    pub fn new(
        api: &'static str,
        resource: impl Into<String>,
        kind: ErrorKind,
        detail: impl Into<String>,
    ) -> Self {
        AwsError {
            api,
            resource: resource.into(),
            code: None,
            kind,
            detail: detail.into(),
        }
    }

    pub fn is_code(&self, codes: &[&str]) -> bool {
        self.code.as_deref().is_some_and(|c| codes.contains(&c))
    }

    /// Whether a write that failed this way may still have happened (re-read to find out).
    pub fn ambiguous(&self) -> bool {
        matches!(self.kind, ErrorKind::NoAnswer | ErrorKind::Throttled)
    }
}

/// Turns an SDK error into an [`AwsError`]. The text never contains credentials: the SDK
/// does not put them in errors, and request bodies are not included.
pub fn classify<E>(api: &'static str, resource: &str, e: SdkError<E>) -> AwsError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let status = e.raw_response().map(|r| r.status().as_u16());
    let code = e.code().map(str::to_owned);
    let (kind, detail) = match &e {
        SdkError::ServiceError(_) | SdkError::ResponseError(_) => {
            let throttled = code.as_deref().is_some_and(|c| THROTTLE_CODES.contains(&c));
            let kind = if throttled || status.is_some_and(|s| s >= 500) {
                ErrorKind::Throttled
            } else {
                ErrorKind::Rejected
            };
            let text = match (&code, e.message()) {
                (Some(c), Some(m)) => format!("{c}: {m}"),
                (Some(c), None) => c.clone(),
                (None, Some(m)) => m.to_owned(),
                (None, None) => {
                    format!("HTTP {}: {}", status.unwrap_or(0), DisplayErrorContext(&e))
                }
            };
            (kind, bounded(&text))
        }
        SdkError::TimeoutError(_) => (
            ErrorKind::NoAnswer,
            format!("no answer within {}s", OPERATION_TIMEOUT.as_secs()),
        ),
        // A connection refused, reset or closed mid-answer ("connection closed before message
        // completed" is `other`): the request may or may not have arrived. A missing
        // credential is `other` too, but local and final: `local_reason` says so.
        // A certificate the endpoint presents that cannot be verified: retrying cannot help.
        SdkError::DispatchFailure(_) if super::http::is_certificate_error(&innermost(&e)) => (
            ErrorKind::Local,
            format!(
                "TLS: {}; check the endpoint's certificate",
                bounded(&innermost(&e))
            ),
        ),
        SdkError::DispatchFailure(d)
            if d.is_timeout() || d.is_io() || (d.is_other() && !is_local_setup(&e)) =>
        {
            (
                ErrorKind::NoAnswer,
                format!("cannot reach the endpoint: {}", innermost(&e)),
            )
        }
        _ => (ErrorKind::Local, bounded(&local_reason(&e))),
    };
    AwsError {
        api,
        resource: resource.to_owned(),
        code,
        kind,
        detail,
    }
}

/// The most of a server's text an error shows (a broken endpoint can answer megabytes on one
/// line): 500 characters, control characters escaped.
const MAX_DETAIL: usize = 500;

fn bounded(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_DETAIL)
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    if text.chars().nth(MAX_DETAIL).is_some() {
        out.push_str(" … (cut)");
    }
    out
}

/// The innermost cause ("Connection refused"), without the layers of SDK wrapping.
fn innermost(e: &dyn std::error::Error) -> String {
    let mut source = e;
    while let Some(s) = source.source() {
        source = s;
    }
    source.to_string()
}

/// Whether the SDK failed because it found no credentials (said in its error text only).
fn mentions_credentials<E>(e: &SdkError<E>) -> bool
where
    E: std::error::Error + Send + Sync + 'static,
{
    DisplayErrorContext(e)
        .to_string()
        .to_ascii_lowercase()
        .contains("credential")
}

/// Why a request never left: the SDK's own cause (an expired SSO token, a failing
/// `credential_process`, no region) followed by where the chain looks.
/// Whether the SDK failed before sending because of this machine's set-up: no credentials, or
/// no region to sign for. Asking again cannot help, so these are never retried.
fn is_local_setup<E>(e: &SdkError<E>) -> bool
where
    E: std::error::Error + Send + Sync + 'static,
{
    let text = DisplayErrorContext(e).to_string().to_ascii_lowercase();
    // No region: "missing signing region" with an endpoint override, "Invalid Configuration:
    // Missing Region" from endpoint resolution without one.
    mentions_credentials(e) || text.contains("signing region") || text.contains("missing region")
}

fn local_reason<E>(e: &SdkError<E>) -> String
where
    E: std::error::Error + Send + Sync + 'static,
{
    let cause = sdk_cause(e);
    if mentions_credentials(e) {
        format!(
            "no AWS credentials: {cause}. The standard chain reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, then the profile (AWS_PROFILE or the target's `profile`: keys, SSO after `aws sso login`, credential_process, role assumption), then web identity, container and instance roles"
        )
    } else if cause.to_ascii_lowercase().contains("region") {
        format!(
            "no AWS region: {cause}. Set the target's `region`, AWS_REGION, or a `region` in the profile"
        )
    } else {
        cause
    }
}

/// The SDK's error chain below its generic "failed to construct request" / "dispatch
/// failure" layers, joined with `: ` (the layers that say what went wrong).
fn sdk_cause(e: &dyn std::error::Error) -> String {
    let mut layers = Vec::new();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !layers.iter().any(|l: &String| l.contains(&text)) {
            layers.push(text);
        }
        source = s.source();
    }
    if layers.is_empty() {
        layers.push(e.to_string());
    }
    let text = layers.join(": ").replace("other: ", "");
    // A credential_process's own output (its stderr) may hold a token: never shown.
    match text.to_ascii_lowercase().find("stderr") {
        Some(at) => format!(
            "{} (the process's own output is not shown: run it by hand to see it)",
            text[..at].trim_end_matches([' ', ':', ',', '.', '('])
        ),
        None => text,
    }
}

/// Where and how to reach AWS for one target (no credentials here: the SDK's chain finds
/// them when the first call is made).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The target's name (for `-v` lines).
    pub target: String,
    pub region: Option<String>,
    pub profile: Option<String>,
    pub endpoint: Option<String>,
    /// The target's budget for reads that get no answer.
    pub read_budget: ReadBudget,
}

/// The SDK clients of one target, built on first use (loading the AWS configuration is
/// asynchronous; connecting a reader is not).
#[derive(Debug, Clone)]
pub struct Clients {
    pub sqs: aws_sdk_sqs::Client,
    pub cloudwatch: aws_sdk_cloudwatch::Client,
    /// Only `sts:GetCallerIdentity`: who the credentials are, for redrive's audit record.
    pub sts: aws_sdk_sts::Client,
}

/// One target's AWS access: settings, lazily built clients and the call counter.
#[derive(Debug)]
pub struct Aws {
    settings: Settings,
    clients: OnceCell<Clients>,
    pub stats: Arc<Stats>,
}

impl Aws {
    pub fn new(settings: Settings, stats: Arc<Stats>) -> Self {
        Aws {
            settings,
            clients: OnceCell::new(),
            stats,
        }
    }

    pub fn region(&self) -> Option<&str> {
        self.settings.region.as_deref()
    }

    /// The target's read budget (the exporter renews it before each reading).
    pub fn budget(&self) -> &ReadBudget {
        &self.settings.read_budget
    }

    /// The endpoint override, if the target names one (a local emulator, a VPC endpoint).
    pub fn endpoint(&self) -> Option<&str> {
        self.settings.endpoint.as_deref()
    }

    pub async fn clients(&self) -> &Clients {
        self.clients
            .get_or_init(|| async {
                let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .retry_config(aws_config::retry::RetryConfig::disabled())
                    .timeout_config(
                        aws_config::timeout::TimeoutConfig::builder()
                            .operation_timeout(OPERATION_TIMEOUT)
                            .connect_timeout(CONNECT_TIMEOUT)
                            .build(),
                    );
                if let Some(r) = &self.settings.region {
                    loader = loader.region(aws_config::Region::new(r.clone()));
                }
                if let Some(p) = &self.settings.profile {
                    loader = loader.profile_name(p);
                }
                if let Some(e) = &self.settings.endpoint {
                    loader = loader.endpoint_url(e);
                }
                let config = loader.load().await;
                let log = LogRequests {
                    target: self.settings.target.clone(),
                };
                Clients {
                    sqs: aws_sdk_sqs::Client::from_conf(
                        aws_sdk_sqs::config::Builder::from(&config)
                            .interceptor(log.clone())
                            .build(),
                    ),
                    cloudwatch: aws_sdk_cloudwatch::Client::from_conf(
                        aws_sdk_cloudwatch::config::Builder::from(&config)
                            .interceptor(log.clone())
                            .build(),
                    ),
                    sts: aws_sdk_sts::Client::from_conf(
                        aws_sdk_sts::config::Builder::from(&config)
                            .interceptor(log)
                            .build(),
                    ),
                }
            })
            .await
    }

    /// One read, retried while AWS throttles, fails on its side, or does not answer.
    pub async fn read<T, F, Fut>(&self, api: &'static str, call: F) -> Result<T, AwsError>
    where
        F: Fn(Clients) -> Fut,
        Fut: Future<Output = Result<T, AwsError>>,
    {
        let clients = self.clients().await.clone();
        let budget = &self.settings.read_budget;
        let mut delay = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            self.stats.count(api);
            let started = std::time::Instant::now();
            // An attempt never outlasts what is left of the target's budget.
            let limit = OPERATION_TIMEOUT.min(budget.remaining().max(Duration::from_millis(1)));
            let result = match tokio::time::timeout(limit, call(clients.clone())).await {
                Ok(r) => r,
                Err(_) => Err(AwsError::new(
                    api,
                    "(this call)",
                    ErrorKind::NoAnswer,
                    format!("no answer within {}s", limit.as_secs().max(1)),
                )),
            };
            self.log(api, started, result.as_ref().err());
            let retry = |e: &AwsError| {
                tracing::warn!(
                    "target {}: {api}: retry {attempt} of {} in {} ms after: {}",
                    self.settings.target,
                    READ_ATTEMPTS - 1,
                    delay.as_millis(),
                    e.detail
                );
            };
            match result {
                Err(e) if e.kind == ErrorKind::NoAnswer => {
                    budget.spend(started.elapsed() + delay);
                    if budget.exhausted() {
                        return Err(AwsError {
                            detail: format!(
                                "{}; gave up: no answer within the target's read budget of {}s (DLQCTL_READ_TIMEOUT / --read-timeout)",
                                e.detail,
                                budget.limit().as_secs()
                            ),
                            ..e
                        });
                    }
                    if attempt >= READ_ATTEMPTS {
                        return Err(e);
                    }
                    retry(&e);
                    tokio::time::sleep(delay).await;
                    delay = super::retry::next(delay);
                    attempt += 1;
                }
                Err(e) if attempt < READ_ATTEMPTS && e.kind == ErrorKind::Throttled => {
                    retry(&e);
                    tokio::time::sleep(delay).await;
                    delay = super::retry::next(delay);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// One write, sent once: never retried blindly.
    pub async fn write<T, F, Fut>(&self, api: &'static str, call: F) -> Result<T, AwsError>
    where
        F: FnOnce(Clients) -> Fut,
        Fut: Future<Output = Result<T, AwsError>>,
    {
        let clients = self.clients().await.clone();
        self.stats.count(api);
        let started = std::time::Instant::now();
        let result = call(clients).await;
        self.log(api, started, result.as_ref().err());
        result
    }

    /// One `-v` line per call: which target, API, where, outcome and time.
    fn log(&self, api: &str, started: std::time::Instant, err: Option<&AwsError>) {
        tracing::info!(
            "target {}: {api} at {} -> {} in {} ms",
            self.settings.target,
            self.settings.endpoint.as_deref().map_or_else(
                || "the AWS endpoint".to_owned(),
                super::http::redact_userinfo
            ),
            err.map_or_else(|| "ok".to_owned(), |e| format!("failed: {e}")),
            started.elapsed().as_millis()
        );
    }
}

/// `-vv`: each HTTP request the SDK sends, method and URL without query (the SDK signs in
/// headers, which are never shown; a query could carry a presigned credential).
#[derive(Debug, Clone)]
struct LogRequests {
    target: String,
}

impl aws_sdk_sqs::config::Intercept for LogRequests {
    fn name(&self) -> &'static str {
        "dlqctl-verbose"
    }

    fn read_before_transmit(
        &self,
        context: &aws_sdk_sqs::config::interceptors::BeforeTransmitInterceptorContextRef<'_>,
        _components: &aws_sdk_sqs::config::RuntimeComponents,
        _cfg: &mut aws_sdk_sqs::config::ConfigBag,
    ) -> Result<(), aws_sdk_sqs::error::BoxError> {
        let request = context.request();
        let uri = request.uri();
        tracing::debug!(
            "target {}: {} {}",
            self.target,
            request.method(),
            super::http::redact_userinfo(uri.split('?').next().unwrap_or(uri))
        );
        Ok(())
    }
}

/// The most pages dlqctl reads of one listing: 10,000 pages of 1,000 queues or 100 alarms is
/// far beyond any account; an endpoint that goes on is broken or hostile.
pub const MAX_PAGES: usize = 10_000;

/// Pagination that cannot loop: the next page's token, `None` at the end; an error when the
/// endpoint repeats a token or goes past [`MAX_PAGES`].
#[derive(Debug, Default)]
pub struct Pages {
    seen: std::collections::HashSet<String>,
}

impl Pages {
    pub fn next(
        &mut self,
        api: &'static str,
        what: &str,
        token: Option<&str>,
    ) -> Result<Option<String>, AwsError> {
        let Some(t) = token.filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        let refuse = |why: String| AwsError::new(api, what, ErrorKind::Rejected, why);
        if self.seen.len() >= MAX_PAGES {
            return Err(refuse(format!(
                "more than {MAX_PAGES} pages: the endpoint does not stop listing"
            )));
        }
        if !self.seen.insert(t.to_owned()) {
            return Err(refuse(
                "the endpoint returned the same page token twice: it would list forever".into(),
            ));
        }
        Ok(Some(t.to_owned()))
    }
}

/// The last segment of an ARN (`arn:aws:sqs:us-east-1:123456789012:payments` → `payments`).
pub fn arn_name(arn: &str) -> &str {
    arn.rsplit(':').next().unwrap_or(arn)
}

/// The ARN prefix of the account and region (`arn:aws:sqs:us-east-1:123456789012:`).
pub fn arn_prefix(arn: &str) -> &str {
    match arn.rfind(':') {
        Some(i) => &arn[..=i],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_page_token_ends_the_listing_with_an_error() {
        let mut p = Pages::default();
        assert_eq!(p.next("sqs:ListQueues", "queues", None).ok(), Some(None));
        assert_eq!(
            p.next("sqs:ListQueues", "queues", Some("")).ok(),
            Some(None)
        );
        assert_eq!(
            p.next("sqs:ListQueues", "queues", Some("a")).ok(),
            Some(Some("a".to_owned()))
        );
        let e = p.next("sqs:ListQueues", "queues", Some("a")).err();
        assert!(e.is_some_and(|e| e.to_string().contains("same page token twice")));
    }

    #[test]
    fn server_text_in_errors_is_bounded_and_escaped() {
        let huge = format!("<html>\u{1b}[31m{}", "x".repeat(5_000_000));
        let b = bounded(&huge);
        assert!(b.len() < 600, "{}", b.len());
        assert!(!b.contains('\u{1b}'));
        assert!(b.ends_with("(cut)"));
        assert_eq!(
            bounded("QueueDoesNotExist: gone"),
            "QueueDoesNotExist: gone"
        );
    }

    #[test]
    fn arns_split_into_account_prefix_and_name() {
        let arn = "arn:aws:sqs:us-east-1:123456789012:payments-dlq";
        assert_eq!(arn_name(arn), "payments-dlq");
        assert_eq!(arn_prefix(arn), "arn:aws:sqs:us-east-1:123456789012:");
        assert_eq!(arn_name("plain"), "plain");
        assert_eq!(arn_prefix("plain"), "");
    }
}
