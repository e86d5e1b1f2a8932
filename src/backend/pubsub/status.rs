//! `dlqctl status` on Pub/Sub: the dead-letter subscription's messages, sampled by pull and
//! nack. What a read does to a message: a pull leases it, and the nack (modifyAckDeadline 0)
//! hands it straight back; the dead-letter subscription has no dead-letter policy of its own,
//! so the delivery it counts is harmless, and nothing is acknowledged (nothing consumed).
//! Only with `--peek` (the default; `--no-peek` reads no message).
//!
//! The depth: Pub/Sub's REST API has no backlog count. Two ways to one, in this order:
//! - with `peek` the dead-letter subscription is counted by pulling, holding every lease until
//!   an empty pull (or `--scan` messages), then nacking them all: exact when an empty pull
//!   ended it, a lower bound (`lower_bound`) when `--scan` did. A count that dies part-way
//!   loses nothing: the leases run out after the ack deadline and the messages are delivered
//!   again. `depth.basis` says `pull`.
//! - where Cloud Monitoring is read ([`super::monitoring`]), its newest
//!   `subscription/num_undelivered_messages`: minutes late, so an exact pull count wins over
//!   it; it wins over a pulled lower bound it is not below, and over no count at all
//!   (`--no-peek`, a subscription that cannot be counted without a trace). `depth.basis`
//!   says `cloud-monitoring`, and a note says how old the point is.
//!
//! The oldest age comes from the messages read when every one was read, else from Cloud
//! Monitoring's `subscription/oldest_unacked_message_age`; the flow (the dead-letter rate)
//! only from Cloud Monitoring, per minute, as SQS's comes from CloudWatch. A monitoring read
//! that fails never fails status: the figure is unknown and a note names the endpoint, the
//! metric and the answer.

use serde_json::{Value, json};

use std::collections::BTreeMap;

use super::monitoring::{Metric, Reading};
use super::read::Reader;
use super::*;
use crate::backend::wire::http::HttpError;
use crate::spec::resolve::Resolved;
use crate::status::{Depth, Measure, Message, Observed, QueueDepth, ReadOptions};

/// How the flow is counted, for the JSON document (docs/status.md, "Flow").
const FLOW_BASIS: &str = "pubsub: Cloud Monitoring per minute: source subscription subscription/dead_letter_message_count (ALIGN_SUM); main topic topic/send_message_operation_count (ALIGN_SUM)";

/// What the door knows of the batch's metrics: read (each metric answered or not), off (and
/// why), or not wanted (redrive's own reads).
enum Metrics<'a> {
    Read(&'a Reading),
    Off(&'a str),
    NotWanted,
}

/// Pub/Sub's maximum for one pull.
const MAX_PULL: usize = 1000;

impl Reader {
    async fn observe(
        &self,
        r: &Resolved,
        read: ReadOptions,
        metrics: &Metrics<'_>,
        now_s: i64,
    ) -> Result<Observed, HttpError> {
        let Some(p) = &r.pubsub else {
            return Ok(Observed::missing(Vec::new()));
        };
        let unknown = |exists: bool| Depth {
            exists,
            ..Depth::missing()
        };
        let main_exists = self
            .get_json(Kind::Subscription, &p.subscription)
            .await?
            .is_some();
        let others = vec![QueueDepth {
            name: p.subscription.clone(),
            role: "main",
            depth: unknown(main_exists),
        }];
        let dl = &p.dead_letter_subscription;
        let Some(sub) = self.get_json(Kind::Subscription, dl).await? else {
            return Ok(Observed::missing(others));
        };
        let mut notes = Vec::new();
        let mut messages = Vec::new();
        let mut depth = unknown(true);
        // Without `peek` (the exporter) the count is still made where it leaves no trace: a
        // nack on a subscription without a dead-letter policy spends nothing. The messages
        // read are then not kept (no sample, no class, no age).
        let traceless = sub.get("deadLetterPolicy").is_none_or(Value::is_null);
        let count_only = !read.peek && read.count_by_reading && traceless;
        let mut pulled = Pulled::None;
        if (read.peek || count_only) && read.scan > 0 {
            let (read_all, mut all) = self.sample(dl, read).await?;
            depth = Depth {
                lower_bound: !read_all,
                basis: Some("pull"),
                ..Depth::total(all.len() as u64, Measure::Waiting)
            };
            pulled = if read_all {
                Pulled::Exact { kept: !count_only }
            } else {
                Pulled::LowerBound
            };
            notes.push(if read_all {
                format!(
                    "depth counted by pulling {dl} to an empty pull, every message nacked at once (it has no dead-letter policy of its own): nothing acknowledged"
                )
            } else {
                format!(
                    "depth at least {}: counted by pulling {dl} up to --scan, every message nacked at once: nothing acknowledged",
                    all.len()
                )
            });
            if count_only {
                notes.push("no message kept (--peek off): depth only".to_owned());
                all.clear();
            }
            messages = all;
        } else {
            if let Metrics::Off(why) = metrics {
                notes.push(format!(
                    "depth unknown: Pub/Sub's REST API has no backlog count, and {why}; with --peek it is counted by pulling"
                ));
            }
            notes.push("no message read (--no-peek)".to_owned());
        }
        let mut observed = Observed {
            dead_letter: depth,
            others,
            messages,
            head_first: false,
            metric_age_seconds: None,
            notes,
            flow: crate::status::Flow::default(),
        };
        match metrics {
            Metrics::Read(reading) => {
                merge(
                    reading,
                    r,
                    p,
                    pulled,
                    &mut observed,
                    read.rate_window,
                    now_s,
                );
            }
            Metrics::Off(why) => observed.notes.push(format!(
                "flow unknown: {why} (the dead-letter rate is read from Cloud Monitoring)"
            )),
            Metrics::NotWanted => {}
        }
        Ok(observed)
    }

    /// Pulls until a pull comes back empty or `scan` messages are held (every lease kept,
    /// so none is counted twice), then nacks every one it got, whatever happened to the
    /// rest; whether the empty pull ended it (every message was read), and the messages.
    async fn sample(
        &self,
        sub: &str,
        read: ReadOptions,
    ) -> Result<(bool, Vec<Message>), HttpError> {
        let path = self.path(Kind::Subscription, sub);
        let mut received: Vec<Value> = Vec::new();
        let mut read_all = false;
        let mut result = Ok(());
        // Bounded: each pull that returns something adds at least one, up to `scan`.
        while received.len() < read.scan {
            let want = (read.scan - received.len()).min(MAX_PULL);
            match self
                .http
                .peek(
                    "POST subscriptions/{subscription}:pull",
                    &format!("{path}:pull"),
                    &json!({"maxMessages": want, "returnImmediately": true}),
                )
                .await
            {
                Ok(pulled) => {
                    let got: Vec<Value> = pulled
                        .get("receivedMessages")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    if got.is_empty() {
                        read_all = true;
                        break;
                    }
                    received.extend(got);
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let ack_ids: Vec<&str> = received
            .iter()
            .filter_map(|m| m.get("ackId").and_then(Value::as_str))
            .collect();
        for chunk in ack_ids.chunks(MAX_PULL) {
            self.http
                .peek(
                    "POST subscriptions/{subscription}:modifyAckDeadline",
                    &format!("{path}:modifyAckDeadline"),
                    &json!({"ackIds": chunk, "ackDeadlineSeconds": 0}),
                )
                .await?;
        }
        result?;
        Ok((
            read_all,
            received.iter().map(|m| message(m, read.max_body)).collect(),
        ))
    }
}

/// One pulled message as status reads it: attributes as headers, the emulator's and Google's
/// dead-letter attributes as its source and attempts.
pub fn message(received: &Value, max_body: usize) -> Message {
    use base64::Engine;
    let m = received.get("message").unwrap_or(&Value::Null);
    let body = m
        .get("data")
        .and_then(Value::as_str)
        .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
        .unwrap_or_default();
    let headers: Vec<(String, String)> = m
        .get("attributes")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let header = |k: &str| headers.iter().find(|(h, _)| h == k).map(|(_, v)| v.clone());
    let ms = |t: &str| {
        time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
            .ok()
            .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
    };
    // On the dead-letter topic, publishTime is when Pub/Sub dead-lettered it; the source
    // topic's publish time is an attribute.
    let dead_lettered_ms = m.get("publishTime").and_then(Value::as_str).and_then(ms);
    let published_ms = header("CloudPubSubDeadLetterSourceTopicPublishTime")
        .as_deref()
        .and_then(ms)
        .or(dead_lettered_ms);
    let mut properties: Vec<(String, String)> = ["publishTime", "messageId", "orderingKey"]
        .iter()
        .filter_map(|k| {
            let v = m.get(*k)?.as_str()?;
            Some(((*k).to_owned(), v.to_owned()))
        })
        .collect();
    if let Some(n) = received.get("deliveryAttempt").and_then(Value::as_u64) {
        properties.push(("deliveryAttempt".to_owned(), n.to_string()));
    }
    Message {
        properties,
        id: m
            .get("messageId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        body_len: body.len() as u64,
        body: body.into_iter().take(max_body).collect(),
        published_ms,
        dead_lettered_ms,
        // messageRetentionDuration counts from the publish on the dead-letter topic.
        retained_since_ms: dead_lettered_ms,
        attempts: header("CloudPubSubDeadLetterSourceDeliveryCount").and_then(|n| n.parse().ok()),
        source: header("CloudPubSubDeadLetterSourceSubscription"),
        native_class: None,
        headers,
    }
}

impl crate::backend::kit::doors::Status for Reader {
    async fn status(
        &self,
        channels: &[&Resolved],
        read: ReadOptions,
    ) -> Result<Vec<Result<Observed, HttpError>>, HttpError> {
        let now_s = crate::status::now_ms() / 1000;
        // One reading of the metrics for every channel of the target (four listings), before
        // the channels are read one by one.
        let reading = match (&self.monitoring, read.redrive_view) {
            (Ok(m), false) => Some(
                m.read(
                    &self.project,
                    &names(channels),
                    super::monitoring::interval(now_s, read.rate_window),
                )
                .await,
            ),
            _ => None,
        };
        let metrics = match (&self.monitoring, &reading) {
            (_, Some(r)) => Metrics::Read(r),
            (Err(why), None) if !read.redrive_view => Metrics::Off(why),
            _ => Metrics::NotWanted,
        };
        let mut out = Vec::with_capacity(channels.len());
        for r in channels {
            out.push(self.observe(r, read, &metrics, now_s).await);
        }
        Ok(out)
    }
}

/// How the pull counted the dead-letter subscription, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pulled {
    None,
    /// An empty pull ended it: every message was read (and kept, unless count-only).
    Exact {
        kept: bool,
    },
    /// `--scan` ended it.
    LowerBound,
}

/// Per metric, the resources the channels name: the dead-letter subscriptions (depth, age),
/// the source subscriptions (dead-lettered) and the main topics (sent).
fn names<'a>(channels: &[&'a Resolved]) -> BTreeMap<Metric, Vec<&'a str>> {
    let mut out: BTreeMap<Metric, Vec<&str>> = BTreeMap::new();
    for r in channels {
        let Some(p) = &r.pubsub else { continue };
        for (metric, name) in [
            (Metric::Depth, p.dead_letter_subscription.as_str()),
            (Metric::Age, p.dead_letter_subscription.as_str()),
            (Metric::DeadLettered, p.subscription.as_str()),
            (Metric::Sent, r.main.as_str()),
        ] {
            out.entry(metric).or_default().push(name);
        }
    }
    out
}

/// Folds what Cloud Monitoring said of one channel into what the door read (pure): the
/// depth by the precedence in the module doc, the oldest age where the messages read do not
/// give it, the flow per minute, and a note for every figure it could not give.
fn merge(
    reading: &Reading,
    r: &Resolved,
    p: &crate::spec::resolve::PubsubResolved,
    pulled: Pulled,
    o: &mut Observed,
    window: Option<std::time::Duration>,
    now_s: i64,
) {
    let at = &reading.endpoint;
    let dl = p.dead_letter_subscription.as_str();
    let series = |metric: Metric, id: &str| -> Result<Option<(i64, f64)>, String> {
        match reading.metrics.get(&metric) {
            Some(Ok(points)) => Ok(points.get(id).and_then(super::monitoring::newest)),
            Some(Err(e)) => Err(e.clone()),
            None => Err("not read".to_owned()),
        }
    };
    let unknown = |what: &str, metric: Metric, e: &str| {
        format!(
            "{what} from Cloud Monitoring unknown: {at} did not answer {} for {}: {e}",
            metric.short(),
            if metric == Metric::Sent {
                r.main.as_str()
            } else if metric == Metric::DeadLettered {
                p.subscription.as_str()
            } else {
                dl
            }
        )
    };
    let lookback = (reading.end_s - reading.start_s) / 60;
    // The depth.
    match series(Metric::Depth, dl) {
        Ok(Some((t, v))) => {
            let n = v.max(0.0).round() as u64;
            let ago = (now_s - t).max(0);
            match pulled {
                Pulled::Exact { .. } => o.notes.push(format!(
                    "Cloud Monitoring's {} at {at} said {n} in its newest minute ({ago} s ago); the count by pulling is exact and newer, and is the depth shown",
                    Metric::Depth.short()
                )),
                Pulled::LowerBound if o.dead_letter.total.is_some_and(|l| n < l) => o.notes.push(format!(
                    "Cloud Monitoring's {} at {at} said {n} in its newest minute ({ago} s ago), fewer than the {} already counted by pulling (the metric lags by minutes): the lower bound is shown",
                    Metric::Depth.short(),
                    o.dead_letter.total.unwrap_or_default()
                )),
                _ => {
                    o.dead_letter = Depth {
                        basis: Some("cloud-monitoring"),
                        ..Depth::total(n, Measure::Waiting)
                    };
                    o.notes.push(format!(
                        "depth {n} from Cloud Monitoring's {} at {at}, its newest minute ({ago} s ago; the metric lags by minutes)",
                        Metric::Depth.short()
                    ));
                }
            }
        }
        Ok(None) if !matches!(pulled, Pulled::Exact { .. }) => o.notes.push(format!(
            "Cloud Monitoring at {at} has no {} point for {dl} in the last {lookback} minutes (a new or idle subscription): depth not from the metric",
            Metric::Depth.short()
        )),
        Err(e) if !matches!(pulled, Pulled::Exact { .. }) => {
            o.notes.push(unknown("depth", Metric::Depth, &e));
        }
        _ => {}
    }
    // The oldest age, unless every message was read (their own times are newer and exact).
    let waiting = o.dead_letter.total.is_none_or(|n| n > 0);
    if !matches!(pulled, Pulled::Exact { kept: true }) && waiting {
        match series(Metric::Age, dl) {
            Ok(Some((_, v))) => o.metric_age_seconds = Some(v.max(0.0)),
            Ok(None) => {}
            Err(e) => o.notes.push(unknown("oldest age", Metric::Age, &e)),
        }
    }
    // The flow.
    let known = |metric: Metric, id: &str| match reading.metrics.get(&metric) {
        Some(Ok(points)) => Some(points.get(id).cloned().unwrap_or_default()),
        _ => None,
    };
    let dead = known(Metric::DeadLettered, &p.subscription);
    let sent = known(Metric::Sent, &r.main);
    for (metric, got) in [(Metric::DeadLettered, &dead), (Metric::Sent, &sent)] {
        if got.is_none()
            && let Some(Err(e)) = reading.metrics.get(&metric)
        {
            o.notes.push(unknown("flow", metric, e));
        }
    }
    let periods = super::monitoring::periods(
        dead.as_ref(),
        sent.as_ref(),
        (reading.start_s, reading.end_s),
    );
    if !periods.is_empty() {
        o.flow = crate::status::Flow::from_periods(&r.main, FLOW_BASIS, periods, window, now_s);
    }
}

#[cfg(test)]
mod tests {
    use super::super::monitoring::Points;
    use super::*;

    /// A reading whose depth says 10 for the channel's dead-letter subscription (newest point
    /// a minute old), age 180 s, 10 dead-lettered and 1,000 sent in the last minute but one.
    fn reading(r: &Resolved, now_s: i64) -> Reading {
        let p = r.pubsub.as_ref().expect("pubsub");
        let end = now_s / 60 * 60;
        let one = |id: &str, at: i64, v: f64| -> Result<Points, String> {
            Ok(Points::from([(id.to_owned(), BTreeMap::from([(at, v)]))]))
        };
        Reading {
            endpoint: "http://127.0.0.1:9/v3".into(),
            start_s: end - 900,
            end_s: end,
            metrics: BTreeMap::from([
                (
                    Metric::Depth,
                    one(&p.dead_letter_subscription, end - 60, 10.0),
                ),
                (
                    Metric::Age,
                    one(&p.dead_letter_subscription, end - 60, 180.0),
                ),
                (Metric::DeadLettered, one(&p.subscription, end - 60, 10.0)),
                (Metric::Sent, one(&r.main, end - 60, 1000.0)),
            ]),
        }
    }

    fn pulled(n: u64, lower_bound: bool) -> Observed {
        Observed {
            dead_letter: Depth {
                lower_bound,
                basis: Some("pull"),
                ..Depth::total(n, Measure::Waiting)
            },
            ..Observed::missing(Vec::new())
        }
    }

    /// Issue 36: an exact pull count wins over the metric (minutes late); the metric wins over
    /// a lower bound it is not below and over no count; the flow is per minute either way.
    #[test]
    fn an_exact_pull_wins_the_metric_fills_what_the_pull_cannot_say() {
        let r = super::super::tests::example("");
        let p = r.pubsub.clone().expect("pubsub");
        let now_s = 1_700_000_030;
        let rd = reading(&r, now_s);
        let window = Some(std::time::Duration::from_secs(300));
        let run = |pull: Pulled, mut o: Observed| {
            merge(&rd, &r, &p, pull, &mut o, window, now_s);
            o
        };
        let o = run(Pulled::Exact { kept: true }, pulled(7, false));
        assert_eq!(
            (o.dead_letter.total, o.dead_letter.basis),
            (Some(7), Some("pull"))
        );
        assert_eq!(o.metric_age_seconds, None, "the messages read give the age");
        assert!(
            o.notes[0].contains(
                "said 10 in its newest minute (110 s ago); the count by pulling is exact"
            ),
            "{:?}",
            o.notes
        );
        // Counted without keeping the messages (the exporter): the age is the metric's.
        let o = run(Pulled::Exact { kept: false }, pulled(7, false));
        assert_eq!(o.metric_age_seconds, Some(180.0));
        let o = run(Pulled::LowerBound, pulled(5, true));
        assert_eq!(
            (
                o.dead_letter.total,
                o.dead_letter.basis,
                o.dead_letter.lower_bound
            ),
            (Some(10), Some("cloud-monitoring"), false)
        );
        let o = run(Pulled::LowerBound, pulled(12, true));
        assert_eq!(
            (o.dead_letter.total, o.dead_letter.lower_bound),
            (Some(12), true)
        );
        assert!(
            o.notes[0].contains("fewer than the 12 already counted"),
            "{:?}",
            o.notes
        );
        let mut none = pulled(0, false);
        none.dead_letter.total = None;
        let o = run(Pulled::None, none);
        assert_eq!(o.dead_letter.total, Some(10));
        let w = o.flow.window.clone().expect("a window");
        assert_eq!(
            (w.dead_lettered, w.source, w.rate()),
            (Some(10), Some(1000), Some(0.01))
        );
        assert_eq!(o.flow.periods.len(), 15);
        assert_eq!(o.flow.source.as_deref(), Some(r.main.as_str()));
        // A metric that failed: unknown, with a note naming endpoint, metric and resource.
        let mut failed = rd.clone();
        failed.metrics.insert(
            Metric::DeadLettered,
            Err("GET projects.timeSeries.list: HTTP 403: denied".into()),
        );
        let mut o = pulled(3, false);
        merge(
            &failed,
            &r,
            &p,
            Pulled::Exact { kept: true },
            &mut o,
            window,
            now_s,
        );
        assert!(o.flow.periods.iter().all(|x| x.dead_lettered.is_none()));
        assert_eq!(o.flow.window.and_then(|w| w.dead_lettered), None);
        assert!(
            o.notes.iter().any(|n| n
                == &format!("flow from Cloud Monitoring unknown: http://127.0.0.1:9/v3 did not answer subscription/dead_letter_message_count for {}: GET projects.timeSeries.list: HTTP 403: denied", p.subscription)),
            "{:?}",
            o.notes
        );
    }
}
