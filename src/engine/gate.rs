//! Health gates of a redrive (issue 35): before the first batch and between batches, the
//! downstream must say it is healthy, or nothing more moves. A gate is an HTTP endpoint that
//! must answer 2xx (`--health-check URL`), or a PromQL query that must return a non-empty
//! result whose every value is a finite number other than zero (`--health-query Q --prometheus URL`). A scheduled
//! redrive (cron, a Kubernetes CronJob) that finds the downstream unhealthy stops with
//! [`EXIT_UNHEALTHY`], which a scheduler tells apart from a failure.
//!
//! Issue 52: a gate's URL that is no http(s) URL is refused on the command line
//! (`cli::parse_gate_url`, exit 64), never taken for "unhealthy"; a failure says what happened (refused, too many
//! redirects, a timeout, an HTTP status); a Prometheus value that is not a finite number is
//! not healthy; Ctrl-C or SIGTERM while a gate is asked stops the run at once
//! ([`Gates::check_unless`]); a URL is printed and journaled without its password and its
//! secret-looking query parameters ([`shown`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

/// The exit code of a redrive that a gate stopped: sysexits' EX_TEMPFAIL ("try again later").
pub const EXIT_UNHEALTHY: u8 = 75;
/// How long one gate may take to answer.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// The gates of one run, and the HTTP client they share (made at the first check, kept for
/// the checks between batches).
#[derive(Debug, Clone, Default)]
pub struct Gates {
    /// `--health-check`: each must answer 2xx.
    urls: Vec<String>,
    /// `--health-query` with `--prometheus`: (query, Prometheus base URL).
    queries: Vec<(String, String)>,
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
}

impl Gates {
    pub fn new(urls: Vec<String>, queries: Vec<(String, String)>) -> Self {
        // A gate's password and secret query values never reach a `-v` line either.
        for url in urls.iter().chain(queries.iter().map(|(_, p)| p)) {
            if let Ok(u) = reqwest::Url::parse(url) {
                if let Some(p) = u.password() {
                    crate::secrets::never_show(p);
                }
                for (k, v) in u.query_pairs() {
                    if crate::secrets::secret_name(&k) && v.len() >= 4 {
                        crate::secrets::never_show(&v);
                    }
                }
            }
        }
        Gates {
            urls,
            queries,
            client: std::sync::OnceLock::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.urls.is_empty() && self.queries.is_empty()
    }

    /// [`Gates::check`], given up as soon as `stop` is set (Ctrl-C, SIGTERM: the run's
    /// watcher sets it): then `None`, and the caller, seeing `stop`, ends as an interrupted
    /// run does, not as an unhealthy one.
    pub async fn check_unless(&self, stop: &AtomicBool) -> Option<String> {
        tokio::select! {
            why = self.check() => why,
            () = async {
                while !stop.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            } => None,
        }
    }

    /// Why the downstream is not healthy, if a gate says so (all gates are asked, in order;
    /// the first that fails is the answer). A gate that cannot be reached is unhealthy.
    pub async fn check(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let made = self.client.get_or_init(|| {
            reqwest::Client::builder()
                .no_proxy()
                .timeout(TIMEOUT)
                .build()
                .map_err(|e| e.to_string())
        });
        let client = match made {
            Ok(c) => c,
            Err(e) => return Some(format!("no HTTP client for the health gates: {e}")),
        };
        for url in &self.urls {
            let shown = shown(url);
            match client.get(url).send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => return Some(format!("--health-check {shown} answered {}", r.status())),
                Err(e) => return Some(format!("--health-check {shown} {}", failure(e))),
            }
        }
        for (query, prometheus) in &self.queries {
            if let Some(why) = promql(client, prometheus, query).await {
                return Some(format!("--health-query {query}: {why}"));
            }
        }
        None
    }
}

/// Why a PromQL query does not say healthy: an error, an empty result, or a zero value.
async fn promql(client: &reqwest::Client, base: &str, query: &str) -> Option<String> {
    let url = query_url(base);
    let shown = shown(&url);
    let answer = match client.get(&url).query(&[("query", query)]).send().await {
        Ok(r) if r.status().is_success() => r.json::<Value>().await,
        Ok(r) => return Some(format!("{shown} answered {}", r.status())),
        Err(e) => return Some(format!("{shown} {}", failure(e))),
    };
    let doc = match answer {
        Ok(d) => d,
        Err(e) => return Some(format!("{shown} did not answer JSON: {}", e.without_url())),
    };
    judge(&doc)
}

/// Prometheus's query API under `base`: `/api/v1/query` after the URL's path, its query
/// parameters (`?token=…`) kept (the request adds `query=` to them). A `base` that is not a
/// URL (the CLI refuses those) is joined as text.
fn query_url(base: &str) -> String {
    let Ok(mut u) = reqwest::Url::parse(base) else {
        return format!("{}/api/v1/query", base.trim_end_matches('/'));
    };
    let path = format!("{}/api/v1/query", u.path().trim_end_matches('/'));
    u.set_path(&path);
    u.set_fragment(None);
    u.to_string()
}

/// What went wrong asking a gate, as it happened: a timeout, a refused connection, a
/// redirect loop, or whatever else the client says (without the URL, which may hold
/// credentials and is said by the caller).
fn failure(e: reqwest::Error) -> String {
    if e.is_timeout() {
        return format!("did not answer within {}s", TIMEOUT.as_secs());
    }
    if e.is_redirect() {
        return "redirected too many times (a redirect loop?)".to_owned();
    }
    // The innermost cause says most: "connection refused", a DNS failure, a TLS error.
    let mut cause: &dyn std::error::Error = &e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let io = cause.downcast_ref::<std::io::Error>();
    let what = match io.map(std::io::Error::kind) {
        Some(std::io::ErrorKind::ConnectionRefused) => "connection refused".to_owned(),
        Some(std::io::ErrorKind::ConnectionReset) => "connection reset".to_owned(),
        _ => cause.to_string(),
    };
    let what = crate::status::safe(&what);
    if e.is_connect() {
        format!("could not be reached: {what}")
    } else {
        format!(
            "failed: {}: {what}",
            crate::status::safe(&e.without_url().to_string())
        )
    }
}

/// A gate's URL as it may be printed and journaled: user and password (`https://u:p@host`)
/// replaced by `***`, and so is the value of every query parameter whose name looks secret
/// (`access_token`, `api_key`, `sig`: [`crate::secrets::secret_name`]); made safe for a
/// terminal.
pub fn shown(url: &str) -> String {
    let Ok(mut u) = reqwest::Url::parse(url) else {
        return crate::status::safe(&crate::secrets::hide_secrets(url));
    };
    if !u.username().is_empty() || u.password().is_some() {
        let _ = u.set_username("***");
        let _ = u.set_password(None);
    }
    if u.query().is_some() {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                // `code` (Azure Functions) and a bare `key` are secrets in a URL.
                let url_secret = k.eq_ignore_ascii_case("code") || k.eq_ignore_ascii_case("key");
                let v = if url_secret || crate::secrets::secret_name(&k) {
                    "***".to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.set_fragment(None);
    crate::status::safe(u.as_str())
}

/// The verdict on a Prometheus query answer (pure).
pub fn judge(doc: &Value) -> Option<String> {
    if doc["status"] != "success" {
        return Some(format!(
            "Prometheus said {}",
            doc["error"].as_str().unwrap_or("not success")
        ));
    }
    let data = &doc["data"];
    let values: Vec<&Value> = match data["resultType"].as_str() {
        Some("vector") => data["result"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| &s["value"][1])
            .collect(),
        Some("scalar") => vec![&data["result"][1]],
        other => {
            return Some(format!(
                "a {} result, not a vector",
                other.unwrap_or("missing")
            ));
        }
    };
    if values.is_empty() {
        return Some("the result is empty".into());
    }
    // Healthy is a finite number other than 0: NaN (0/0, a ratio over nothing) and
    // infinities say nothing good (issue 52).
    let not = values
        .iter()
        .filter(|v| {
            v.as_str()
                .and_then(|s| s.trim().parse::<f64>().ok())
                .is_none_or(|n| n == 0.0 || !n.is_finite())
        })
        .count();
    (not > 0).then(|| {
        format!(
            "{not} of {} value(s) are 0, NaN, infinite or not a number",
            values.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_gate_never_prints_the_credentials_in_its_url() {
        // Nothing listens on port 9 of loopback: the check fails, and says so without them.
        let g = Gates::new(
            vec!["http://ops:s3cret@127.0.0.1:9/healthz".into()],
            vec![("up".into(), "http://prom:t0ken@127.0.0.1:9".into())],
        );
        let why = g.check().await.expect("unhealthy");
        assert!(why.contains("http://***@127.0.0.1:9/healthz"), "{why}");
        assert!(!why.contains("s3cret") && !why.contains("ops:"), "{why}");
        let g = Gates::new(Vec::new(), g.queries.clone());
        let why = g.check().await.expect("unhealthy");
        assert!(why.contains("http://***@127.0.0.1:9/api/v1/query"), "{why}");
        assert!(!why.contains("t0ken"), "{why}");
    }

    /// Issue 52 (fixjq 5): `--prometheus 'http://h/?token=X'` asked `GET
    /// /?token=X/api/v1/query&query=…`; the path goes after the URL's path and the query
    /// joins the URL's parameters.
    #[tokio::test]
    async fn a_prometheus_url_with_a_path_and_a_query_asks_the_api_under_them() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let mut lines = Vec::new();
            for _ in 0..2 {
                let (mut conn, _) = listener.accept().await.expect("accept");
                let mut buf = vec![0u8; 4096];
                let n = conn.read(&mut buf).await.expect("read");
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                lines.push(text.lines().next().unwrap_or_default().to_owned());
                let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                conn.write_all(answer.as_bytes()).await.expect("write");
            }
            lines
        });
        for base in [
            format!("http://127.0.0.1:{port}/?token=X"),
            format!("http://127.0.0.1:{port}/prom/?token=X&org=1"),
        ] {
            let g = Gates::new(Vec::new(), vec![("up".into(), base.clone())]);
            assert_eq!(g.check().await, None, "{base}");
        }
        let lines = tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("in time")
            .expect("server");
        assert_eq!(
            lines,
            [
                "GET /api/v1/query?token=X&query=up HTTP/1.1",
                "GET /prom/api/v1/query?token=X&org=1&query=up HTTP/1.1"
            ]
        );
    }

    #[test]
    fn a_gate_url_is_shown_without_its_secret_query_parameters() {
        assert_eq!(
            shown(
                "https://u:p@h.internal/health?access_token=abc&check=deep&X-Api-Key=k&sig=s#frag"
            ),
            "https://***@h.internal/health?access_token=***&check=deep&X-Api-Key=***&sig=***"
        );
        assert_eq!(shown("http://h/health"), "http://h/health");
        // Issue 52 (fixjq 7): Azure Functions' `?code=` and a bare `?key=`.
        assert_eq!(
            shown("https://fn.azurewebsites.net/api/health?code=abc123&key=k9&deep=1"),
            "https://fn.azurewebsites.net/api/health?code=***&key=***&deep=1"
        );
    }

    #[test]
    fn a_query_is_healthy_only_when_every_value_is_non_zero() {
        let vector = |vals: &[&str]| {
            json!({"status": "success", "data": {"resultType": "vector", "result":
                vals.iter().map(|v| json!({"metric": {}, "value": [1.0, v]})).collect::<Vec<_>>()}})
        };
        assert_eq!(judge(&vector(&["1", "0.5"])), None);
        assert_eq!(
            judge(&vector(&["1", "0"])).as_deref(),
            Some("1 of 2 value(s) are 0, NaN, infinite or not a number")
        );
        assert_eq!(judge(&vector(&[])).as_deref(), Some("the result is empty"));
        // Issue 52, L1: not a number is not healthy, nor is an infinity.
        for v in ["NaN", "-Inf", "+Inf", "nope"] {
            assert!(judge(&vector(&["1", v])).is_some(), "{v}");
        }
        assert_eq!(judge(&vector(&["-1", "2.5e3"])), None);
        assert!(judge(&json!({"status": "error", "error": "parse error"})).is_some());
        let scalar =
            json!({"status": "success", "data": {"resultType": "scalar", "result": [1.0, "1"]}});
        assert_eq!(judge(&scalar), None);
    }
}
