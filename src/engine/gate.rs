//! Health gates of a redrive (issue 35): before the first batch and between batches, the
//! downstream must say it is healthy, or nothing more moves. A gate is an HTTP endpoint that
//! must answer 2xx (`--health-check URL`), or a PromQL query that must return a non-empty
//! result whose every value is non-zero (`--health-query Q --prometheus URL`). A scheduled
//! redrive (cron, a Kubernetes CronJob) that finds the downstream unhealthy stops with
//! [`EXIT_UNHEALTHY`], which a scheduler tells apart from a failure.

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
        Gates {
            urls,
            queries,
            client: std::sync::OnceLock::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.urls.is_empty() && self.queries.is_empty()
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
                Err(e) => {
                    return Some(format!(
                        "--health-check {shown} did not answer within {}s: {}",
                        TIMEOUT.as_secs(),
                        crate::status::safe(&e.without_url().to_string())
                    ));
                }
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
    let url = format!("{}/api/v1/query", base.trim_end_matches('/'));
    let shown = shown(&url);
    let answer = match client.get(&url).query(&[("query", query)]).send().await {
        Ok(r) if r.status().is_success() => r.json::<Value>().await,
        Ok(r) => return Some(format!("{shown} answered {}", r.status())),
        Err(e) => return Some(format!("{shown} did not answer: {}", e.without_url())),
    };
    let doc = match answer {
        Ok(d) => d,
        Err(e) => return Some(format!("{shown} did not answer JSON: {}", e.without_url())),
    };
    judge(&doc)
}

/// A gate's URL as it may be printed and journaled: user and password (`https://u:p@host`)
/// replaced by `***`, made safe for a terminal.
fn shown(url: &str) -> String {
    let Ok(mut u) = reqwest::Url::parse(url) else {
        return crate::status::safe(url);
    };
    if !u.username().is_empty() || u.password().is_some() {
        let _ = u.set_username("***");
        let _ = u.set_password(None);
    }
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
    let zero = values
        .iter()
        .filter(|v| {
            v.as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .is_none_or(|n| n == 0.0)
        })
        .count();
    (zero > 0).then(|| format!("{zero} of {} value(s) are 0", values.len()))
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

    #[test]
    fn a_query_is_healthy_only_when_every_value_is_non_zero() {
        let vector = |vals: &[&str]| {
            json!({"status": "success", "data": {"resultType": "vector", "result":
                vals.iter().map(|v| json!({"metric": {}, "value": [1.0, v]})).collect::<Vec<_>>()}})
        };
        assert_eq!(judge(&vector(&["1", "0.5"])), None);
        assert_eq!(
            judge(&vector(&["1", "0"])).as_deref(),
            Some("1 of 2 value(s) are 0")
        );
        assert_eq!(judge(&vector(&[])).as_deref(), Some("the result is empty"));
        assert!(judge(&vector(&["NaN"])).is_none(), "NaN is not zero");
        assert!(judge(&json!({"status": "error", "error": "parse error"})).is_some());
        let scalar =
            json!({"status": "success", "data": {"resultType": "scalar", "result": [1.0, "1"]}});
        assert_eq!(judge(&scalar), None);
    }
}
