//! A fake Cloud Monitoring API on 127.0.0.1 (issue 36): it answers `projects.timeSeries.list`
//! from the recorded answers in tests/fixtures/cloud-monitoring/ (built from the Monitoring
//! API v3 discovery document's shape; monitoring-v3-time-series.json says where from), one
//! series per resource the request's filter names, with times relative to the request's
//! interval, and records every request so that tests can assert the filters, the intervals
//! and the number of calls. It can answer every listing with an error instead (`fail`).
//!
//! With [`FakeMonitoring::with_pubsub`] the same server also plays a minimal Pub/Sub REST API
//! under `/v1/` (every subscription exists, has no dead-letter policy, and holds nothing), so
//! a status test needs no emulator.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use serde_json::{Value, json};

use super::fake::FakeApi;

/// The folder of the recorded answers.
pub fn fixtures() -> std::path::PathBuf {
    super::root().join("tests/fixtures/cloud-monitoring")
}

/// A recorded answer's text.
pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixtures().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// One `timeSeries.list` request as the fake server saw it, its query decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    pub project: String,
    pub filter: String,
    pub start: String,
    pub end: String,
    pub period: String,
    pub aligner: String,
    pub page_token: Option<String>,
}

pub struct FakeMonitoring {
    api: FakeApi,
    /// 0: answer from the fixtures; else this HTTP status, with Google's error body.
    pub fail: Arc<AtomicU16>,
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// The query parameters of a request path.
fn query(path: &str) -> Vec<(String, String)> {
    path.split_once('?')
        .map(|(_, q)| q)
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// The listing a request path is, if it is one.
pub fn listing(path: &str) -> Option<Listing> {
    let route = path.split('?').next()?;
    let project = route
        .strip_prefix("/v3/projects/")?
        .strip_suffix("/timeSeries")?;
    let q = query(path);
    let get = |k: &str| {
        q.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    Some(Listing {
        project: decode(project),
        filter: get("filter"),
        start: get("interval.startTime"),
        end: get("interval.endTime"),
        period: get("aggregation.alignmentPeriod"),
        aligner: get("aggregation.perSeriesAligner"),
        page_token: q
            .iter()
            .find(|(k, _)| k == "pageToken")
            .map(|(_, v)| v.clone()),
    })
}

/// The resource names a filter's `resource.labels.X_id` names (`= "a"` or `= one_of(...)`).
pub fn names(filter: &str) -> Vec<String> {
    // The last `…_id =`: `project_id` comes before the resource's own label.
    let Some((_, rest)) = filter.rsplit_once("_id = ") else {
        return Vec::new();
    };
    let inner = rest
        .strip_prefix("one_of(")
        .and_then(|r| r.rsplit_once(')'))
        .map_or(rest, |(i, _)| i);
    // Quoted strings, in order (names hold no `","`).
    let mut out = Vec::new();
    let mut chars = inner.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut end = i + 1;
        let mut escaped = false;
        for (j, d) in chars.by_ref() {
            if d == '"' && !escaped {
                end = j;
                break;
            }
            escaped = d == '\\' && !escaped;
        }
        if let Ok(s) = serde_json::from_str::<String>(&inner[i..=end]) {
            out.push(s);
        }
    }
    out
}

fn rfc3339(s: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(s)
        .expect("time")
        .format(&time::format_description::well_known::Rfc3339)
        .expect("format")
}

/// The recorded answer `name` for a request: every series once per resource the filter
/// names, `@NAME@`, `@PROJECT@` and the `@END…@` times filled in.
pub fn answer_for(name: &str, l: &Listing) -> Value {
    let end = time::OffsetDateTime::parse(&l.end, &time::format_description::well_known::Rfc3339)
        .map(|t| t.unix_timestamp())
        .unwrap_or(0);
    let mut text = fixture(name).replace("@PROJECT@", &l.project);
    for k in (1..=30).rev() {
        text = text.replace(&format!("@END-{}@", k * 60), &rfc3339(end - k * 60));
    }
    text = text.replace("@END@", &rfc3339(end));
    let mut doc: Value = serde_json::from_str(&text).expect("fixture JSON");
    let template = doc["timeSeries"].as_array().cloned().unwrap_or_default();
    let mut series = Vec::new();
    for n in names(&l.filter) {
        for s in &template {
            let one = s.to_string().replace("@NAME@", &n.replace('"', "\\\""));
            series.push(serde_json::from_str::<Value>(&one).expect("series"));
        }
    }
    doc["timeSeries"] = Value::Array(series);
    doc
}

/// Which recorded answer a listing gets: by the metric its filter names (and the page).
pub fn fixture_for(l: &Listing) -> &'static str {
    let f = &l.filter;
    if f.contains("num_undelivered_messages") {
        "list-time-series-num-undelivered-messages.json"
    } else if f.contains("oldest_unacked_message_age") {
        "list-time-series-oldest-unacked-message-age.json"
    } else if f.contains("dead_letter_message_count") {
        "list-time-series-dead-letter-message-count.json"
    } else if l.page_token.as_deref() == Some("page-2") {
        "list-time-series-send-message-operation-count-page-2.json"
    } else {
        "list-time-series-send-message-operation-count-page-1.json"
    }
}

impl FakeMonitoring {
    /// Cloud Monitoring only.
    pub fn start() -> Self {
        Self::serve(false)
    }

    /// Cloud Monitoring under `/v3`, and a minimal Pub/Sub under `/v1`.
    pub fn with_pubsub() -> Self {
        Self::serve(true)
    }

    fn serve(pubsub: bool) -> Self {
        let fail = Arc::new(AtomicU16::new(0));
        let failing = Arc::clone(&fail);
        let api = FakeApi::start_with(move |r| {
            if let Some(l) = listing(&r.path) {
                // The emulator's target sends no credentials, to Pub/Sub or here.
                if r.header("authorization").is_some() {
                    return (
                        400,
                        json!({"error": {"message": "unexpected credentials"}}).to_string(),
                    );
                }
                let status = failing.load(Ordering::SeqCst);
                if status != 0 {
                    return (
                        status,
                        json!({"error": {"code": status, "message": format!("fake: HTTP {status}"), "status": "PERMISSION_DENIED"}})
                            .to_string(),
                    );
                }
                return (200, answer_for(fixture_for(&l), &l).to_string());
            }
            if pubsub && r.path.starts_with("/v1/projects/") {
                let name = r.path.trim_start_matches("/v1/");
                return match r.method.as_str() {
                    "GET" if name.contains("/subscriptions/") => (
                        200,
                        json!({"name": name, "topic": "projects/p/topics/t", "ackDeadlineSeconds": 10}).to_string(),
                    ),
                    "GET" => (200, json!({"name": name}).to_string()),
                    _ => (200, "{}".to_owned()),
                };
            }
            (
                404,
                json!({"error": {"message": "no such route"}}).to_string(),
            )
        });
        FakeMonitoring { api, fail }
    }

    /// `http://127.0.0.1:PORT` (Pub/Sub's emulatorHost, with `with_pubsub`).
    pub fn base(&self) -> &str {
        &self.api.url
    }

    /// The `monitoring.endpoint` to name: the base and `/v3`.
    pub fn endpoint(&self) -> String {
        format!("{}/v3", self.api.url)
    }

    /// Every `timeSeries.list` request so far, in order.
    pub fn listings(&self) -> Vec<Listing> {
        self.api
            .requests()
            .iter()
            .filter_map(|(_, p)| listing(p))
            .collect()
    }

    /// Every request so far: (method, path).
    pub fn requests(&self) -> Vec<(String, String)> {
        self.api.requests()
    }

    pub fn fail_with(&self, status: u16) {
        self.fail.store(status, Ordering::SeqCst);
    }
}
