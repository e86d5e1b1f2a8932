//! RabbitMQ's status door: depth of each channel's queues from paged queue listings (one per
//! vhost, as plan reads), and samples from the head of the dead-letter queue.
//!
//! What a read does to a message (docs/rabbitmq.md, "status"): samples come from the
//! management API's `get` with `ackmode: reject_requeue_true`. Every message read is handed
//! back to the queue at its place, and marked `redelivered`; nothing is consumed. Two
//! exceptions, where the read itself could lose a message, are refused with a note:
//! - a quorum queue with a delivery limit (set by argument or policy, or RabbitMQ 4's default
//!   of 20): each read is a delivery, and at the limit the broker drops the message or
//!   dead-letters it out of the queue, whatever its dead-letter exchange;
//! - a stream queue, which has no `get`;
//! - any other quorum queue too: each read raises its `x-delivery-count`, which spends an
//!   attempt of every message read against any delivery limit set later.
//!
//! With `peek` off (the exporter's default) no message is read: depth only.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use serde_json::{Value, json};

use super::read::{Reader, bad_shape, count, item_name, list, no_vhost};
use crate::backend::wire::http::{HttpError, seg};
use crate::spec::resolve::Resolved;
use crate::status::{Depth, Measure, Message, Observed, QueueDepth, ReadOptions};

/// A regex of exact names longer than this is not sent: the listing falls back to the
/// ownership prefixes (or the whole vhost), filtered here.
const MAX_FILTER: usize = 2000;

/// The columns status reads of each queue: the depths, what decides whether a read is safe,
/// and the message statistics the flow counts come from ([`flow_of`]).
const COLUMNS: &str = "name,type,messages,messages_ready,messages_unacknowledged,arguments,effective_policy_definition,message_stats.publish,message_stats.ack,message_stats.get_no_ack,message_stats.deliver_no_ack";

/// With a window (`status --rate-window`), the samples of the same figures as well.
const WINDOW_COLUMNS: &str = "messages_details.samples,message_stats.publish_details.samples,message_stats.ack_details.samples,message_stats.get_no_ack_details.samples,message_stats.deliver_no_ack_details.samples";

/// What left a queue, in its message statistics: acknowledged deliveries and gets (`ack`
/// counts both), and deliveries and gets without acknowledgement. Measured on 3.10.8: a
/// message dead-lettered into a queue is not in its `publish` (the broker moves it, no
/// channel publishes it), so what entered a DLQ = `messages` + these.
const LEFT: [&str; 3] = ["ack", "get_no_ack", "deliver_no_ack"];

/// How the flow is counted, for the JSON document.
const BASIS: &str = "rabbitmq: DLQ messages + ack + get_no_ack + deliver_no_ack; source publish";

/// The sampling step the management plugin keeps for a window of this length (its default
/// `sample_retention_policies`: 5 s samples for 605 s, 60 s for an hour, 600 s for 8 h,
/// 1800 s for a day), and the window rounded up to a whole number of steps.
fn step(window: std::time::Duration) -> (u64, u64) {
    let w = window.as_secs().max(1);
    let incr = match w {
        0..=600 => 5,
        601..=3600 => 60,
        3601..=28_800 => 600,
        _ => 1800,
    };
    (incr, w.div_ceil(incr) * incr)
}

/// A counter of a queue's `message_stats`: absent when no channel has touched the queue
/// since the broker started, which is 0.
fn stat(q: &Value, key: &str) -> u64 {
    q.get("message_stats")
        .and_then(|m| m.get(key))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// How much a sampled figure grew over the window: its newest sample less its oldest (the
/// management API answers `age / incr + 1` samples, newest first). `None` when the samples
/// are not there (statistics off, or a window longer than the broker keeps).
fn grew(details: Option<&Value>) -> Option<i64> {
    let samples = details?.get("samples")?.as_array()?;
    let newest = samples.first()?.get("sample")?.as_i64()?;
    let oldest = samples.last()?.get("sample")?.as_i64()?;
    Some(newest - oldest)
}

/// Keeps of each sampled figure of a listed queue only what [`grew`] reads, its newest and its
/// oldest sample. A 10-minute window is 121 samples a figure and five figures a queue: the
/// listings of 6,000 queues held whole were most of status's 291 MiB at 5,000 channels
/// (BENCHMARKS.md §13).
fn keep_ends(q: &mut Value) {
    fn ends(details: &mut Value) {
        if let Some(Value::Array(samples)) = details.get_mut("samples")
            && samples.len() > 2
        {
            let oldest = samples.pop();
            samples.truncate(1);
            samples.extend(oldest);
        }
    }
    if let Some(d) = q.get_mut("messages_details") {
        ends(d);
    }
    if let Some(Value::Object(stats)) = q.get_mut("message_stats") {
        for (key, d) in stats.iter_mut() {
            if key.ends_with("_details") {
                ends(d);
            }
        }
    }
}

fn stat_grew(q: &Value, key: &str) -> Option<i64> {
    match q.get("message_stats") {
        // No statistics at all: nothing touched the queue, in the window either.
        None => Some(0),
        Some(m) => match m.get(key) {
            None => Some(0),
            Some(_) => grew(m.get(format!("{key}_details").as_str())),
        },
    }
}

/// The channel's flow from the listing already read: what entered the DLQ (its `messages`
/// plus what left it) and what was published to the main queue, in all and over the window.
fn flow_of(
    dlq: &Value,
    main: Option<&Value>,
    main_name: &str,
    window: Option<std::time::Duration>,
) -> crate::status::Flow {
    let held = dlq.get("messages").and_then(Value::as_u64);
    let left: u64 = LEFT.iter().map(|k| stat(dlq, k)).sum();
    let window = window.map(|w| {
        let entered = grew(dlq.get("messages_details")).and_then(|held| {
            LEFT.iter()
                .map(|k| stat_grew(dlq, k))
                .sum::<Option<i64>>()
                .map(|left| u64::try_from((held + left).max(0)).unwrap_or(0))
        });
        crate::status::FlowWindow {
            seconds: step(w).1,
            dead_lettered: entered,
            source: main
                .and_then(|m| stat_grew(m, "publish"))
                .map(|n| u64::try_from(n.max(0)).unwrap_or(0)),
        }
    });
    crate::status::Flow {
        dead_lettered_total: held.map(|h| h + left),
        source_total: main.map(|m| stat(m, "publish")),
        source: Some(main_name.to_owned()),
        window,
        basis: Some(BASIS),
        periods: Vec::new(),
        settles: true,
    }
}

impl Reader {
    /// The queues of one vhost that `names` lists, by name, with their stats.
    async fn queue_listing(
        &self,
        vhost: &str,
        names: &BTreeSet<&str>,
        window: Option<std::time::Duration>,
    ) -> Result<Option<BTreeMap<String, Value>>, HttpError> {
        let exact = format!(
            "^({})$",
            names
                .iter()
                .map(|n| super::regex_escape(n))
                .collect::<Vec<_>>()
                .join("|")
        );
        let filter = if exact.len() <= MAX_FILTER {
            Some(exact)
        } else if !self.prefixes.is_empty() {
            Some(format!(
                "^({})",
                self.prefixes
                    .iter()
                    .map(|p| super::regex_escape(p))
                    .collect::<Vec<_>>()
                    .join("|")
            ))
        } else {
            None
        };
        let api = "GET /api/queues/{vhost}";
        let mut found = BTreeMap::new();
        let mut page = 1u64;
        loop {
            let mut path = format!(
                "/api/queues/{}?page={page}&page_size={}&columns={COLUMNS}",
                seg(vhost),
                super::PAGE_SIZE
            );
            // The window's samples come in the same listing: no call more per channel.
            if let Some(w) = window {
                let (incr, age) = step(w);
                path.push_str(&format!(
                    ",{WINDOW_COLUMNS}&msg_rates_age={age}&msg_rates_incr={incr}&lengths_age={age}&lengths_incr={incr}"
                ));
            }
            if let Some(f) = &filter {
                path.push_str(&format!("&use_regex=true&name={}", seg(f)));
            }
            let Some(mut body) = self.http.get(api, &path).await? else {
                return Ok(None);
            };
            let pages = body.get("page_count").and_then(Value::as_u64).unwrap_or(1);
            // Taken out of the page, not copied: the page goes as soon as its queues are kept.
            let items = body
                .get_mut("items")
                .map(Value::take)
                .ok_or_else(|| bad_shape(api, &path, "no `items` in a paginated listing"))?;
            list(api, &path, &items)?;
            let Value::Array(items) = items else {
                return Err(bad_shape(api, &path, "expected a JSON list"));
            };
            for mut q in items {
                let name = item_name(api, &path, &q)?;
                if names.contains(name) {
                    let name = name.to_owned();
                    keep_ends(&mut q);
                    found.insert(name, q);
                }
            }
            if page >= pages || page >= 10_000 {
                break;
            }
            page += 1;
        }
        Ok(Some(found))
    }

    /// Why reading samples from this queue could lose a message, if it could.
    pub(super) async fn refuse(
        &self,
        q: &Value,
        version: &mut Option<u32>,
    ) -> Result<Option<String>, HttpError> {
        let kind = q.get("type").and_then(Value::as_str).unwrap_or("classic");
        if kind == "stream" {
            return Ok(Some(
                "samples not read: a stream queue has no `get`; read it with a stream consumer"
                    .into(),
            ));
        }
        if kind != "quorum" {
            return Ok(None);
        }
        let setting = |arg: &str, policy: &str| setting(q, arg, policy);
        // A read counts as a delivery whatever the queue's dead-letter exchange: at the limit
        // the broker drops the message, or dead-letters it out of this queue. Either way the
        // read would have moved it. A negative limit (RabbitMQ 4's `-1`) is no limit.
        let limit = match setting("x-delivery-limit", "delivery-limit") {
            Some(l) if l.as_i64().is_some_and(|n| n < 0) => None,
            Some(l) => Some(l.to_string()),
            None => {
                if version.is_none() {
                    *version = Some(self.major_version().await?);
                }
                (version.unwrap_or(0) >= 4).then(|| "20 (RabbitMQ 4's default)".to_owned())
            }
        };
        let out = if setting("x-dead-letter-exchange", "dead-letter-exchange").is_some() {
            "dead-letters it out of this queue"
        } else {
            "drops it"
        };
        Ok(limit.map(|l| {
            format!(
                "samples not read: this quorum queue has a delivery limit of {l}: every read counts as a delivery, and at the limit the broker {out}; set `delivery-limit` to -1 on it (RabbitMQ 4) or read it with a consumer you control"
            )
        }))
    }

    async fn major_version(&self) -> Result<u32, HttpError> {
        let body = self.http.get("GET /api/overview", "/api/overview").await?;
        Ok(body
            .as_ref()
            .and_then(|b| b.get("rabbitmq_version"))
            .and_then(Value::as_str)
            .and_then(|v| v.split('.').next())
            .and_then(|m| m.parse().ok())
            .unwrap_or(0))
    }

    /// Up to `scan` messages from the head of the queue, each handed straight back, and the
    /// queue's ready count at the read (each message of a `get` answer says how many are left
    /// after it: the first one's figure + 1; none when the answer is empty), exact where the
    /// listing's is a statistic.
    async fn peek(
        &self,
        vhost: &str,
        queue: &str,
        read: ReadOptions,
    ) -> Result<(Vec<Message>, Option<u64>), HttpError> {
        let api = "POST /api/queues/{vhost}/{name}/get";
        let path = format!("/api/queues/{}/{}/get", seg(vhost), seg(queue));
        let body = json!({
            "count": read.scan,
            "ackmode": "reject_requeue_true",
            "encoding": "auto",
            // Bodies are cut by the broker: a 1 MiB message costs max_body bytes here.
            "truncate": read.max_body.max(1),
        });
        let answer = self.http.peek(api, &path, &body).await?;
        let items = list(api, &path, &answer)?;
        // An empty answer: none was ready at the read, whatever the listing's statistics say
        // (a queue emptied a moment ago still lists its messages for up to 5 s).
        let ready = match items.first() {
            None => Some(0),
            Some(m) => m
                .get("message_count")
                .and_then(Value::as_u64)
                .map(|n| n + 1),
        };
        Ok((
            items
                .iter()
                .enumerate()
                .map(|(i, m)| message(i, m))
                .collect(),
            ready,
        ))
    }
}

/// Why a peek would spend one of the message's delivery attempts, if it would: every read of
/// a quorum queue (a `get` with requeue) raises `x-delivery-count`, limit or none (a hostile
/// run saw 11 after 11 status reads). A delivery limit set later, or RabbitMQ 4's default of
/// 20, then drops or dead-letters messages that were only ever looked at, so status leaves
/// quorum queues unread: depth only.
fn spends_a_delivery(q: &Value) -> Option<String> {
    (q.get("type").and_then(Value::as_str) == Some("quorum")).then(|| {
        "samples not read: every read of a quorum queue counts as a delivery (`x-delivery-count` + 1), which a delivery limit (RabbitMQ 4's default is 20) turns into a drop; depth only. `dlqctl redrive --dry-run` reads the same way and is refused too".to_owned()
    })
}

/// A queue's setting: its x-argument `arg`, else its effective policy's `policy` key (the
/// columns `arguments` and `effective_policy_definition` of a queue object).
pub(super) fn setting(q: &Value, arg: &str, policy: &str) -> Option<Value> {
    q.get("arguments")
        .and_then(|a| a.get(arg))
        .or_else(|| {
            q.get("effective_policy_definition")
                .and_then(|d| d.get(policy))
        })
        .cloned()
}

fn vhost(r: &Resolved) -> &str {
    r.rabbitmq.as_ref().map_or("/", |x| x.vhost.as_str())
}

fn depth_of(q: &Value) -> Depth {
    let ready = q.get("messages_ready").and_then(Value::as_u64);
    let unacked = q.get("messages_unacknowledged").and_then(Value::as_u64);
    Depth {
        total: count(q),
        ready,
        in_flight: unacked,
        delayed: None,
        measure: Measure::Waiting,
        exists: true,
        lower_bound: false,
        basis: None,
    }
}

fn around(r: &Resolved, found: &BTreeMap<String, Value>) -> Vec<QueueDepth> {
    std::iter::once((r.main.as_str(), "main"))
        .chain(r.retry_stages.iter().map(|s| (s.name.as_str(), "retry")))
        .map(|(name, role)| QueueDepth {
            name: name.to_owned(),
            role,
            depth: found.get(name).map_or_else(Depth::missing, depth_of),
        })
        .collect()
}

/// A header value as text: strings as they are, anything else (numbers, tables, arrays) as
/// compact JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One message of a management `get` answer.
fn message(i: usize, m: &Value) -> Message {
    let props = m.get("properties");
    let headers = props
        .and_then(|p| p.get("headers"))
        .and_then(Value::as_object);
    let payload = m.get("payload").and_then(Value::as_str).unwrap_or("");
    let body = match m.get("payload_encoding").and_then(Value::as_str) {
        Some("base64") => base64::engine::general_purpose::STANDARD
            .decode(payload)
            .unwrap_or_else(|_| payload.as_bytes().to_vec()),
        _ => payload.as_bytes().to_vec(),
    };
    let body_len = m
        .get("payload_bytes")
        .and_then(Value::as_u64)
        .unwrap_or(body.len() as u64);
    // x-death: the newest death first; x-first-death-*: the first one.
    let death = headers
        .and_then(|h| h.get("x-death"))
        .and_then(Value::as_array)
        .and_then(|a| a.first());
    let header_str = |k: &str| headers.and_then(|h| h.get(k)).and_then(Value::as_str);
    let id = props
        .and_then(|p| p.get("message_id"))
        .and_then(Value::as_str)
        .map_or_else(|| format!("#{}", i + 1), str::to_owned);
    // The management API lists headers in no stable order: sorted by name.
    let mut headers_text: Vec<(String, String)> = headers
        .map(|h| h.iter().map(|(k, v)| (k.clone(), text(v))).collect())
        .unwrap_or_default();
    headers_text.sort();
    let mut properties: Vec<(String, String)> = props
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(k, _)| *k != "headers")
                .map(|(k, v)| (k.clone(), text(v)))
                .collect()
        })
        .unwrap_or_default();
    for k in ["routing_key", "exchange"] {
        if let Some(v) = m.get(k).and_then(Value::as_str) {
            properties.push((k.to_owned(), v.to_owned()));
        }
    }
    let published_ms = props
        .and_then(|p| p.get("timestamp"))
        .and_then(Value::as_i64)
        .map(|s| s.saturating_mul(1000));
    let dead_lettered_ms = death
        .and_then(|d| d.get("time"))
        .and_then(Value::as_i64)
        .map(|s| s.saturating_mul(1000));
    Message {
        id,
        headers: headers_text,
        properties,
        body,
        body_len,
        published_ms,
        dead_lettered_ms,
        // The DLQ's message-ttl counts from the enqueue, which RabbitMQ does not expose; both
        // of these come before it.
        retained_since_ms: dead_lettered_ms.or(published_ms),
        attempts: headers
            .and_then(|h| h.get("x-delivery-count"))
            .and_then(Value::as_u64)
            .map(|n| n + 1),
        source: header_str("x-first-death-queue")
            .or_else(|| death.and_then(|d| d.get("queue")).and_then(Value::as_str))
            .map(str::to_owned),
        native_class: header_str("x-first-death-reason")
            .or_else(|| death.and_then(|d| d.get("reason")).and_then(Value::as_str))
            .map(str::to_owned),
    }
}

impl crate::backend::kit::doors::Status for Reader {
    /// Depth and samples of each channel's dead-letter queue, depth of its main and retry
    /// queues. The outer error: the target could not be read at all.
    async fn status(
        &self,
        channels: &[&Resolved],
        read: ReadOptions,
    ) -> Result<Vec<Result<Observed, HttpError>>, HttpError> {
        let mut wanted: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for r in channels {
            let v = vhost(r);
            let names = wanted.entry(v).or_default();
            names.insert(&r.dead_letter);
            names.insert(&r.main);
            names.extend(r.retry_stages.iter().map(|s| s.name.as_str()));
        }
        // `None`: the vhost does not exist, which fails its channels, not the target.
        let mut queues: BTreeMap<&str, Option<BTreeMap<String, Value>>> = BTreeMap::new();
        for (v, names) in &wanted {
            queues.insert(v, self.queue_listing(v, names, read.rate_window).await?);
        }
        let mut version: Option<u32> = None;
        let mut out = Vec::with_capacity(channels.len());
        for r in channels {
            let Some(Some(found)) = queues.get(vhost(r)) else {
                out.push(Err(no_vhost(vhost(r))));
                continue;
            };
            let others = around(r, found);
            let Some(q) = found.get(&r.dead_letter) else {
                out.push(Ok(Observed::missing(others)));
                continue;
            };
            let depth = depth_of(q);
            let mut observed = Observed {
                dead_letter: depth,
                others,
                messages: Vec::new(),
                head_first: true,
                metric_age_seconds: None,
                notes: Vec::new(),
                flow: flow_of(q, found.get(&r.main), &r.main, read.rate_window),
            };
            // The listing's figures are statistics, up to 5 s old: a queue they show empty
            // may hold messages, so a read that may peek does (an empty `get` moves nothing).
            let holds = observed.dead_letter.ready.is_some_and(|n| n > 0);
            if read.scan > 0 && (holds || read.peek) {
                if !read.peek {
                    observed.notes.push(
                        "messages not read (reads with side effects are off): depth only".into(),
                    );
                } else if let Some(why) = self.refuse(q, &mut version).await? {
                    // The limit's own note first: it says what a read would do now.
                    observed.notes.push(why);
                } else if let Some(why) = spends_a_delivery(q) {
                    observed.notes.push(why);
                } else {
                    match self.peek(vhost(r), &r.dead_letter, read).await {
                        Ok((m, ready)) => {
                            observed.messages = m;
                            // The broker's own count at the read, exact (the listing's
                            // statistics lag by up to 5 s: "0 would move" right after 20
                            // arrived).
                            if let Some(n) = ready {
                                let d = &mut observed.dead_letter;
                                d.ready = Some(n);
                                d.total = Some(n + d.in_flight.unwrap_or(0));
                            }
                        }
                        Err(e) => {
                            out.push(Err(e));
                            continue;
                        }
                    }
                }
            }
            out.push(Ok(observed));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_queue_keeps_the_newest_and_oldest_sample_of_each_figure_and_the_same_flow() {
        let samples = |from: i64| json!({"samples": (0..121).map(|i| json!({"sample": from - i, "timestamp": i})).collect::<Vec<_>>()});
        let mut q = json!({
            "name": "orders.dlq", "messages": 7,
            "messages_details": samples(7),
            "message_stats": {"ack": 300, "ack_details": samples(300), "publish": 9, "publish_details": samples(9)},
        });
        let window = Some(std::time::Duration::from_secs(600));
        let before = flow_of(&q, Some(&q), "orders", window);
        keep_ends(&mut q);
        assert_eq!(flow_of(&q, Some(&q), "orders", window), before);
        for d in [
            &q["messages_details"],
            &q["message_stats"]["ack_details"],
            &q["message_stats"]["publish_details"],
        ] {
            let kept = d["samples"].as_array().expect("samples");
            assert_eq!(kept.len(), 2, "{d}");
            assert_eq!(kept[0]["timestamp"], 0);
            assert_eq!(kept[1]["timestamp"], 120);
        }
        // Two samples or fewer are left as they are.
        let mut short = json!({"messages_details": {"samples": [{"sample": 1}]}});
        keep_ends(&mut short);
        assert_eq!(
            short["messages_details"]["samples"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
    }

    #[test]
    fn a_broker_dead_letter_is_read_from_its_x_death_headers() {
        let m = message(
            0,
            &json!({
                "payload": "aGk=", "payload_encoding": "base64", "payload_bytes": 2,
                "properties": {
                    "timestamp": 1_700_000_000,
                    "headers": {
                        "x-death": [{"reason": "expired", "queue": "orders.retry", "time": 1_700_000_100, "count": 1}],
                        "x-first-death-reason": "rejected",
                        "x-first-death-queue": "orders",
                    }
                }
            }),
        );
        assert_eq!(m.body, b"hi");
        assert_eq!(m.id, "#1");
        assert_eq!(m.published_ms, Some(1_700_000_000_000));
        assert_eq!(m.dead_lettered_ms, Some(1_700_000_100_000));
        assert_eq!(m.native_class.as_deref(), Some("rejected"));
        assert_eq!(m.source.as_deref(), Some("orders"));
        assert!(
            m.headers
                .iter()
                .any(|(k, v)| k == "x-death" && v.contains("\"expired\""))
        );
    }
}
