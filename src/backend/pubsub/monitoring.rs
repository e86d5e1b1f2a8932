//! Cloud Monitoring for Pub/Sub's status door (issue 36): Pub/Sub's REST API has no backlog
//! count and no flow counters; Cloud Monitoring has both, as metrics. This module reads them
//! with `projects.timeSeries.list` (GET, read-only, through the target's `wire::http`
//! client, so its calls are counted and budgeted with the rest) and turns the answers into
//! figures status understands. The emulator has no metrics, so there it is off unless the
//! target names an endpoint (`monitoring.endpoint`).
//!
//! Four metrics, one listing each per target however many channels it has (a filter names
//! every channel's resource with `one_of(...)`, split only where a filter would grow past
//! [`MAX_FILTER`] characters or [`MAX_NAMES`] names):
//! - depth: `subscription/num_undelivered_messages` of each dead-letter subscription (GAUGE,
//!   maximum per minute; the newest point counts);
//! - oldest age: `subscription/oldest_unacked_message_age` of the same (GAUGE, seconds);
//! - dead-lettered: `subscription/dead_letter_message_count` of each source subscription,
//!   the one with the dead-letter policy (DELTA, summed per minute);
//! - source: `topic/send_message_operation_count` of each main topic (DELTA, summed per
//!   minute, every response class: the same series the alert policies divide by).
//!
//! Every reading reads the last 15 minutes (or the rate window, if longer) again: Pub/Sub's
//! metrics arrive minutes late, and the exporter keeps each minute's newest figures
//! (`status::Accumulator`), as it does with CloudWatch's. Parsing is pure and unit-tested
//! against recorded answers built from the documented shape (`ListTimeSeriesResponse` in the
//! Monitoring API v3 discovery document); these reads never met the real API.

use std::collections::BTreeMap;

use serde_json::Value;

use super::alerts::{AGE_METRIC, DEAD_LETTERED_METRIC, DEPTH_METRIC, SENT_METRIC};
use super::seg;
use crate::backend::wire::http::{HttpError, ReadHttp};
use crate::status::FlowPeriod;

/// Google's Monitoring API, used on Google Cloud when the target names no other.
pub const GOOGLE_ENDPOINT: &str = "https://monitoring.googleapis.com/v3";
/// The name every listing is counted under (`--stats`, the call-count tests).
pub const API: &str = "GET projects.timeSeries.list";
/// The alignment period, seconds: Pub/Sub's metrics are sampled once a minute.
pub const PERIOD: i64 = 60;
/// How far back every reading reads (see the module doc).
pub const LOOKBACK: i64 = 900;
/// The longest filter dlqctl sends. The discovery document states this bound for the
/// filters of alert policies ("must not exceed 2048 Unicode characters"), and none for
/// `timeSeries.list`; dlqctl keeps to the stated one.
pub const MAX_FILTER: usize = 2048;
/// The most names in one `one_of(...)`: dlqctl's own bound (no documented one was found), so
/// that one filter never names more resources than a page comfortably answers for.
pub const MAX_NAMES: usize = 100;
/// Pages per listing at most (15 points per series, 100,000 points a page by default: one
/// page answers for thousands of channels); a server that keeps paging is broken.
const MAX_PAGES: usize = 20;

/// One of the four metrics status reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Metric {
    Depth,
    Age,
    DeadLettered,
    Sent,
}

impl Metric {
    pub const ALL: [Metric; 4] = [
        Metric::Depth,
        Metric::Age,
        Metric::DeadLettered,
        Metric::Sent,
    ];

    pub fn metric_type(self) -> &'static str {
        match self {
            Metric::Depth => DEPTH_METRIC,
            Metric::Age => AGE_METRIC,
            Metric::DeadLettered => DEAD_LETTERED_METRIC,
            Metric::Sent => SENT_METRIC,
        }
    }

    /// The name without `pubsub.googleapis.com/`, as notes say it.
    pub fn short(self) -> &'static str {
        let t = self.metric_type();
        t.strip_prefix("pubsub.googleapis.com/").unwrap_or(t)
    }

    /// The monitored resource type and the label that names the resource.
    fn resource(self) -> (&'static str, &'static str) {
        match self {
            Metric::Sent => ("pubsub_topic", "topic_id"),
            _ => ("pubsub_subscription", "subscription_id"),
        }
    }

    /// GAUGE metrics: the maximum of each minute; DELTA ones: the sum.
    fn aligner(self) -> &'static str {
        match self {
            Metric::Depth | Metric::Age => "ALIGN_MAX",
            Metric::DeadLettered | Metric::Sent => "ALIGN_SUM",
        }
    }
}

/// Per resource id, its points by the end of their period (seconds), summed over the
/// series of that resource (a topic's sends come as one series per response code).
pub type Points = BTreeMap<String, BTreeMap<i64, f64>>;

/// What one reading of a target's metrics said, per metric: the points, or why not.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The endpoint read, for notes.
    pub endpoint: String,
    /// The interval read, seconds since the epoch, on whole minutes.
    pub start_s: i64,
    pub end_s: i64,
    pub metrics: BTreeMap<Metric, Result<Points, String>>,
}

/// A string as a filter's quoted string (JSON's escapes are the filter language's).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// The filter of `metric` for the resources `names` (at least one) in `project`.
pub fn filter(project: &str, metric: Metric, names: &[&str]) -> String {
    let (resource, label) = metric.resource();
    let ids = match names {
        [one] => format!("= {}", quoted(one)),
        many => format!(
            "= one_of({})",
            many.iter().map(|n| quoted(n)).collect::<Vec<_>>().join(",")
        ),
    };
    format!(
        "metric.type = {} AND resource.type = {} AND resource.labels.project_id = {} AND resource.labels.{label} {ids}",
        quoted(metric.metric_type()),
        quoted(resource),
        quoted(project)
    )
}

/// The filters that cover `names` (duplicates dropped, order kept), each within
/// [`MAX_FILTER`] characters and [`MAX_NAMES`] names. A name too long to fit even alone
/// (Pub/Sub names are at most 255 characters, so none is) gets a filter of its own.
pub fn filters(project: &str, metric: Metric, names: &[&str]) -> Vec<String> {
    let mut unique: Vec<&str> = Vec::new();
    for n in names {
        if !unique.contains(n) {
            unique.push(n);
        }
    }
    let mut out = Vec::new();
    let mut chunk: Vec<&str> = Vec::new();
    for n in unique {
        chunk.push(n);
        if chunk.len() > 1
            && (chunk.len() > MAX_NAMES
                || filter(project, metric, &chunk).chars().count() > MAX_FILTER)
        {
            chunk.pop();
            out.push(filter(project, metric, &chunk));
            chunk = vec![n];
        }
    }
    if !chunk.is_empty() {
        out.push(filter(project, metric, &chunk));
    }
    out
}

/// RFC 3339 (`2024-05-01T12:00:00Z`) for seconds since the epoch.
fn rfc3339(s: i64) -> String {
    crate::archive::rfc3339(s.saturating_mul(1000))
}

/// Seconds since the epoch of an RFC 3339 time.
fn parse_time(text: &str) -> Option<i64> {
    crate::status::envelope::parse_time(text, crate::spec::model::Format::Rfc3339)
        .map(|ms| ms.div_euclid(1000))
}

/// The request path of one page of one listing.
pub fn path(
    project: &str,
    metric: Metric,
    filter: &str,
    (start_s, end_s): (i64, i64),
    token: Option<&str>,
) -> String {
    let mut p = format!(
        "/projects/{}/timeSeries?filter={}&interval.startTime={}&interval.endTime={}&aggregation.alignmentPeriod={PERIOD}s&aggregation.perSeriesAligner={}",
        seg(project),
        seg(filter),
        seg(&rfc3339(start_s)),
        seg(&rfc3339(end_s)),
        metric.aligner()
    );
    if let Some(t) = token {
        p.push_str(&format!("&pageToken={}", seg(t)));
    }
    p
}

/// A point's value: `int64Value` (a string in JSON, as the discovery document says, or a
/// number) or `doubleValue`.
fn value(v: &Value) -> Option<f64> {
    let typed = v.get("value")?;
    if let Some(i) = typed.get("int64Value") {
        return match i {
            Value::String(s) => s.trim().parse::<i64>().ok().map(|n| n as f64),
            Value::Number(n) => n.as_f64(),
            _ => None,
        };
    }
    typed
        .get("doubleValue")
        .and_then(Value::as_f64)
        .filter(|f| f.is_finite())
}

/// Adds one `ListTimeSeriesResponse` page's points of `metric` to `into`; the next page's
/// token, if any. Series of other resources or metrics (a filter the server read wider) and
/// points without a time or a value are skipped.
pub fn parse_page(metric: Metric, page: &Value, into: &mut Points) -> Option<String> {
    let (resource, label) = metric.resource();
    for series in page
        .get("timeSeries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = series.pointer("/metric/type").and_then(Value::as_str);
        let rtype = series.pointer("/resource/type").and_then(Value::as_str);
        if kind.is_some_and(|k| k != metric.metric_type()) || rtype.is_some_and(|r| r != resource) {
            continue;
        }
        let Some(id) = series
            .pointer(&format!("/resource/labels/{label}"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let points = into.entry(id.to_owned()).or_default();
        for p in series
            .get("points")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(end) = p
                .pointer("/interval/endTime")
                .and_then(Value::as_str)
                .and_then(parse_time)
            else {
                continue;
            };
            let Some(v) = value(p) else { continue };
            *points.entry(end).or_default() += v;
        }
    }
    page.get("nextPageToken")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

/// The newest point: (its end, its value).
pub fn newest(points: &BTreeMap<i64, f64>) -> Option<(i64, f64)> {
    points.iter().next_back().map(|(t, v)| (*t, *v))
}

/// One channel's flow per minute of `[start_s, end_s)`, oldest first, from its
/// dead-lettered and source points (`None`: that listing failed, the count is unknown). A
/// DELTA metric writes no point for a minute in which nothing happened, so a minute without
/// one counts 0 where the listing answered.
pub fn periods(
    dead: Option<&BTreeMap<i64, f64>>,
    sent: Option<&BTreeMap<i64, f64>>,
    (start_s, end_s): (i64, i64),
) -> Vec<FlowPeriod> {
    if dead.is_none() && sent.is_none() {
        return Vec::new();
    }
    // Points are keyed by their period's end; a period starts PERIOD before it.
    let count = |m: Option<&BTreeMap<i64, f64>>, start: i64| {
        m.map(|m| {
            m.range(start + 1..=start + PERIOD)
                .map(|(_, v)| *v)
                .sum::<f64>()
                .max(0.0)
                .round() as u64
        })
    };
    let mut out = Vec::new();
    let mut t = start_s;
    // Bounded by the interval: one period per minute.
    while t + PERIOD <= end_s {
        out.push(FlowPeriod {
            start_s: t,
            dead_lettered: count(dead, t),
            source: count(sent, t),
        });
        t += PERIOD;
    }
    out
}

/// The interval a reading reads: whole minutes, ending at the last whole minute before
/// `now_s`, [`LOOKBACK`] long (or `window`, if longer).
pub fn interval(now_s: i64, window: Option<std::time::Duration>) -> (i64, i64) {
    let back = window
        .and_then(|w| i64::try_from(w.as_secs()).ok())
        .map_or(LOOKBACK, |w| w.max(LOOKBACK));
    let end = now_s / PERIOD * PERIOD;
    let back = (back + PERIOD - 1) / PERIOD * PERIOD;
    (end - back, end)
}

/// A target's Monitoring client (read-only: GET only).
#[derive(Debug, Clone)]
pub struct Monitoring {
    pub(super) http: ReadHttp,
}

impl Monitoring {
    pub fn endpoint(&self) -> &str {
        self.http.base()
    }

    /// Every page of one listing, added to `into`.
    async fn list(
        &self,
        project: &str,
        metric: Metric,
        filter: &str,
        interval: (i64, i64),
        into: &mut Points,
    ) -> Result<(), HttpError> {
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let p = path(project, metric, filter, interval, token.as_deref());
            let Some(page) = self.http.get(API, &p).await? else {
                return Err(HttpError::Status {
                    api: API.to_owned(),
                    status: 404,
                    reason: format!("project `{project}` not found at this endpoint"),
                });
            };
            match parse_page(metric, &page, into) {
                Some(t) if token.as_deref() != Some(t.as_str()) => token = Some(t),
                _ => return Ok(()),
            }
        }
        Err(HttpError::Decode {
            api: API.to_owned(),
            reason: format!(
                "more than {MAX_PAGES} pages for {}; the endpoint does not behave like Cloud Monitoring",
                metric.short()
            ),
        })
    }

    /// The four metrics of `names` (per metric, the resources to read), one listing per
    /// metric (per filter chunk); a listing that fails leaves its metric unknown, never the
    /// others.
    pub async fn read(
        &self,
        project: &str,
        names: &BTreeMap<Metric, Vec<&str>>,
        interval: (i64, i64),
    ) -> Reading {
        let reads = Metric::ALL.map(|metric| async move {
            let wanted = names.get(&metric).map(Vec::as_slice).unwrap_or_default();
            let mut points = Points::new();
            for f in filters(project, metric, wanted) {
                if let Err(e) = self.list(project, metric, &f, interval, &mut points).await {
                    return (metric, Err(e.to_string()));
                }
            }
            (metric, Ok(points))
        });
        let metrics = futures_util::future::join_all(reads)
            .await
            .into_iter()
            .collect();
        Reading {
            endpoint: self.endpoint().to_owned(),
            start_s: interval.0,
            end_s: interval.1,
            metrics,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_filter_names_every_channel_and_splits_only_past_the_limits() {
        assert_eq!(
            filter("p", Metric::Depth, &["a-dlt-sub"]),
            r#"metric.type = "pubsub.googleapis.com/subscription/num_undelivered_messages" AND resource.type = "pubsub_subscription" AND resource.labels.project_id = "p" AND resource.labels.subscription_id = "a-dlt-sub""#
        );
        assert_eq!(
            filter("p", Metric::Sent, &["a", "b"]),
            r#"metric.type = "pubsub.googleapis.com/topic/send_message_operation_count" AND resource.type = "pubsub_topic" AND resource.labels.project_id = "p" AND resource.labels.topic_id = one_of("a","b")"#
        );
        let few: Vec<String> = (0..10).map(|i| format!("orders-{i}-dlt-sub")).collect();
        let few: Vec<&str> = few.iter().map(String::as_str).collect();
        assert_eq!(filters("p", Metric::Age, &few).len(), 1);
        // 255-character names (Pub/Sub's longest): 7 fit under 2,048 characters.
        let long: Vec<String> = (0..20)
            .map(|i| format!("{i:02}{}", "x".repeat(253)))
            .collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        let split = filters("p", Metric::Depth, &long);
        assert!(split.len() > 1, "{}", split.len());
        assert!(split.iter().all(|f| f.chars().count() <= MAX_FILTER));
        let named: usize = split.iter().map(|f| f.matches("x\"").count()).sum();
        assert_eq!(named, 20, "every name in exactly one filter");
        // Short names: at most MAX_NAMES a filter.
        let many: Vec<String> = (0..250).map(|i| format!("s{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(filters("p", Metric::DeadLettered, &many).len(), 3);
        assert_eq!(filters("p", Metric::Depth, &["a", "a"]).len(), 1);
        assert!(filters("p", Metric::Depth, &[]).is_empty());
    }

    #[test]
    fn the_request_names_the_interval_the_period_and_the_aligner() {
        let p = path(
            "my-project",
            Metric::DeadLettered,
            "metric.type = \"x\"",
            (1_700_000_040, 1_700_000_940),
            Some("tok/1"),
        );
        assert_eq!(
            p,
            "/projects/my-project/timeSeries?filter=metric.type%20%3D%20%22x%22&interval.startTime=2023-11-14T22%3A14%3A00Z&interval.endTime=2023-11-14T22%3A29%3A00Z&aggregation.alignmentPeriod=60s&aggregation.perSeriesAligner=ALIGN_SUM&pageToken=tok%2F1"
        );
        assert_eq!(
            interval(1_700_000_999, None),
            (1_700_000_040, 1_700_000_940)
        );
        let hour = std::time::Duration::from_secs(3600);
        assert_eq!(
            interval(1_700_000_999, Some(hour)),
            (1_700_000_940 - 3600, 1_700_000_940)
        );
    }

    #[test]
    fn points_are_summed_per_resource_and_paged() {
        let page = json!({
            "timeSeries": [
                {"metric": {"type": SENT_METRIC, "labels": {"response_code": "success"}},
                 "resource": {"type": "pubsub_topic", "labels": {"project_id": "p", "topic_id": "t"}},
                 "metricKind": "DELTA", "valueType": "INT64",
                 "points": [
                    {"interval": {"startTime": "2024-05-01T12:01:00Z", "endTime": "2024-05-01T12:02:00Z"}, "value": {"int64Value": "600"}},
                    {"interval": {"startTime": "2024-05-01T12:00:00Z", "endTime": "2024-05-01T12:01:00Z"}, "value": {"int64Value": "400"}}
                 ]},
                {"metric": {"type": SENT_METRIC, "labels": {"response_code": "internal"}},
                 "resource": {"type": "pubsub_topic", "labels": {"project_id": "p", "topic_id": "t"}},
                 "points": [{"interval": {"endTime": "2024-05-01T12:02:00.000000Z"}, "value": {"int64Value": 2}}]},
                {"metric": {"type": DEPTH_METRIC}, "resource": {"type": "pubsub_subscription", "labels": {"subscription_id": "s"}},
                 "points": [{"interval": {"endTime": "2024-05-01T12:02:00Z"}, "value": {"int64Value": "9"}}]},
                {"metric": {"type": SENT_METRIC}, "resource": {"type": "pubsub_topic", "labels": {"topic_id": "t"}},
                 "points": [{"interval": {"endTime": "not a time"}, "value": {"int64Value": "1"}},
                            {"interval": {"endTime": "2024-05-01T12:03:00Z"}, "value": {"stringValue": "x"}}]}
            ],
            "nextPageToken": "next"
        });
        let mut points = Points::new();
        assert_eq!(
            parse_page(Metric::Sent, &page, &mut points).as_deref(),
            Some("next")
        );
        let t0 = parse_time("2024-05-01T12:00:00Z").expect("time");
        assert_eq!(
            points,
            Points::from([(
                "t".to_owned(),
                BTreeMap::from([(t0 + 60, 400.0), (t0 + 120, 602.0)])
            )])
        );
        let last = json!({"timeSeries": [], "nextPageToken": ""});
        assert_eq!(parse_page(Metric::Sent, &last, &mut points), None);
        assert_eq!(parse_page(Metric::Sent, &json!({}), &mut points), None);
        assert_eq!(newest(&points["t"]), Some((t0 + 120, 602.0)));
    }

    #[test]
    fn delta_points_become_one_period_per_minute_and_a_missing_minute_is_zero() {
        let dead = BTreeMap::from([(120, 3.0), (240, 1.0)]);
        let sent = BTreeMap::from([(60, 100.0), (120, 200.0), (240, 300.0)]);
        let p = periods(Some(&dead), Some(&sent), (0, 240));
        assert_eq!(
            p.iter().map(|x| x.start_s).collect::<Vec<_>>(),
            vec![0, 60, 120, 180]
        );
        assert_eq!(
            p.iter().map(|x| x.dead_lettered).collect::<Vec<_>>(),
            vec![Some(0), Some(3), Some(0), Some(1)]
        );
        assert_eq!(
            p.iter().map(|x| x.source).collect::<Vec<_>>(),
            vec![Some(100), Some(200), Some(0), Some(300)]
        );
        // A listing that failed: unknown, never 0.
        let half = periods(None, Some(&sent), (0, 240));
        assert!(half.iter().all(|x| x.dead_lettered.is_none()));
        assert!(periods(None, None, (0, 240)).is_empty());
    }
}
