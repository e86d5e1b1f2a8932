//! `dlqctl exporter`: the status figures as Prometheus metrics. Every target is read once per
//! `--interval`, each on its own (a stalled target never holds up the readings of the others),
//! and the figures are kept in memory; scrapes of `/metrics` are answered from them and never
//! reach a broker. Reads use the same read-only clients as `status`, with `--peek` off unless
//! asked (see `crate::cli::ExporterArgs`).
//!
//! What an on-call engineer relies on at 3 a.m. (issue 31), and how it is kept:
//! - It serves at once: the listener is up and answering before the specs are even loaded
//!   (until then with no target at all); until a target's first reading finishes, its
//!   `dlq_up` is 0 and `dlq_read_errors` counts its channels as not read, so the
//!   exporter-down alert sees it, and its depth and age series are absent.
//! - A stall ends: the read budget (`--read-timeout`) is per reading, so a target that answers
//!   again is up again at its next reading.
//! - Idle or slow clients cannot starve it: one request per connection, the request's headers
//!   within [`HEADER_READ_TIMEOUT`], the whole exchange within [`CONNECTION_DEADLINE`], at most
//!   [`MAX_CONNECTIONS`] open (a new one closes the oldest), and a failed accept (out of file
//!   descriptors) backs off instead of spinning.
//! - It has no authentication and no TLS: put it behind a reverse proxy (README).

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::backend::wire::Stats;
use crate::cli::ExporterArgs;
use crate::engine;
use crate::printer::Printer;
use crate::spec::resolve::Resolved;
use crate::status::first_seen::{self, FirstSeen};
use crate::status::{ChannelStatus, ReadOptions, Report, render};

/// The exposition format's content type (the body also ends in `# EOF`, which this format
/// reads as a comment and OpenMetrics requires).
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A connection that has not sent its request's headers within this long is closed.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Any connection is closed this long after it was accepted, answered or not.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);
/// Connections open at once; one more closes the oldest.
pub const MAX_CONNECTIONS: usize = 16;
/// The first and the longest wait after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The last reading of each target, and the text scrapes are answered with (rendered when a
/// reading finishes, not per scrape).
struct Board {
    /// Every channel, in spec order: the last reading's status, or "not read yet".
    channels: Vec<ChannelStatus>,
    /// When each target was last read (ms since the epoch).
    read_at: BTreeMap<String, i64>,
    /// Readings finished, all targets together.
    reads: u64,
    metrics: String,
    /// Per (target, channel, queue), when each message read was first seen: the age of dead
    /// letters that carry no time ([`first_seen`]).
    first_seen: BTreeMap<(String, String, String), FirstSeen>,
    /// Per (target, channel, queue), the flow counters added up from periods, where the
    /// backend has no totals (SQS's CloudWatch metrics).
    flows: BTreeMap<(String, String, String), crate::status::Accumulator>,
    /// Per (target, channel, queue), the totals of the recent readings as read (when, what),
    /// where they settle ([`crate::status::Flow::settles`], [`SETTLE_MS`]).
    raw: BTreeMap<(String, String, String), VecDeque<(i64, crate::status::Counts)>>,
    /// The calls every reader made, per API (shared with the readers; what an operator needs
    /// to see what the exporter costs the brokers, and what `bench/exporter_cost.py` reads).
    stats: Arc<Stats>,
    /// How long each target's last reading took.
    took: BTreeMap<String, Duration>,
}

impl Board {
    fn new(channels: &[Resolved], stats: Arc<Stats>) -> Self {
        let mut b = Board {
            channels: channels
                .iter()
                .flat_map(Resolved::dead_letter_views)
                .map(|v| not_read_yet(&v))
                .collect(),
            read_at: BTreeMap::new(),
            reads: 0,
            metrics: String::new(),
            first_seen: BTreeMap::new(),
            flows: BTreeMap::new(),
            raw: BTreeMap::new(),
            stats,
            took: BTreeMap::new(),
        };
        b.render();
        b
    }

    /// Takes one target's reading, which took `took`.
    fn update(&mut self, target: &str, report: Report, took: Duration) {
        // One entry per destination of a channel's dead letters: keyed by both.
        let mut fresh: BTreeMap<(String, String), ChannelStatus> = report
            .channels
            .into_iter()
            .map(|c| ((c.channel.clone(), c.dead_letter_name.clone()), c))
            .collect();
        for c in self.channels.iter_mut().filter(|c| c.target == target) {
            if let Some(mut new) = fresh.remove(&(c.channel.clone(), c.dead_letter_name.clone())) {
                if let Some(d) = new.dead_letter.as_mut() {
                    let memory = self
                        .first_seen
                        .entry((
                            new.target.clone(),
                            new.channel.clone(),
                            new.dead_letter_name.clone(),
                        ))
                        .or_default();
                    first_seen::estimate(memory, d, report.generated_at_ms);
                    let key = (
                        new.target.clone(),
                        new.channel.clone(),
                        new.dead_letter_name.clone(),
                    );
                    if d.flow.settles {
                        let at = report.generated_at_ms;
                        let seen = self.raw.entry(key.clone()).or_default();
                        seen.push_back((at, (d.flow.dead_lettered_total, d.flow.source_total)));
                        // The readings of the last SETTLE_MS, and the one before them: drop
                        // the oldest while the next one alone reaches back that far.
                        while seen.len() > SETTLE_READINGS
                            || (seen.len() > 2
                                && seen.get(1).is_some_and(|(t, _)| at - t >= SETTLE_MS))
                        {
                            seen.pop_front();
                        }
                        (d.flow.dead_lettered_total, d.flow.source_total) = settled(seen);
                    }
                    if !d.flow.periods.is_empty() || self.flows.contains_key(&key) {
                        let (dead, source) =
                            self.flows.entry(key).or_default().add(&d.flow.periods);
                        d.flow.dead_lettered_total = dead;
                        d.flow.source_total = source;
                    }
                    if let Some(was) = c.dead_letter.as_ref() {
                        never_back(&mut d.flow, &was.flow);
                    }
                }
                *c = new;
            }
        }
        self.read_at
            .insert(target.to_owned(), report.generated_at_ms);
        self.took.insert(target.to_owned(), took);
        self.reads += 1;
        self.render();
    }

    fn render(&mut self) {
        let report = Report {
            channels: self.channels.clone(),
            generated_at_ms: self
                .read_at
                .values()
                .max()
                .copied()
                .unwrap_or_else(crate::status::now_ms),
        };
        let text = render::openmetrics(&report);
        let mut out = text.trim_end_matches("# EOF\n").to_owned();
        let _ = write!(
            out,
            "# HELP dlq_exporter_reads_total Readings of the targets since the exporter started (one per target per interval; scrapes never read).\n# TYPE dlq_exporter_reads_total counter\ndlq_exporter_reads_total {}\n",
            self.reads
        );
        // The API names are the clients' fixed templates (`GET /api/queues/{vhost}`,
        // `sqs:GetQueueAttributes`), never a resource's name: a few dozen series at most.
        out.push_str("# HELP dlq_exporter_api_calls_total Calls the exporter's readings made to the targets, per API, since it started (retries count; scrapes never call).\n# TYPE dlq_exporter_api_calls_total counter\n");
        for (api, n) in self.stats.snapshot() {
            let _ = writeln!(
                out,
                "dlq_exporter_api_calls_total{} {n}",
                render::labels(&[("api", api.as_str())])
            );
        }
        out.push_str("# HELP dlq_exporter_reading_seconds How long the target's last reading took, in seconds.\n# TYPE dlq_exporter_reading_seconds gauge\n");
        for (target, took) in &self.took {
            let _ = writeln!(
                out,
                "dlq_exporter_reading_seconds{} {}",
                render::labels(&[("target", target.as_str())]),
                took.as_millis() as f64 / 1000.0
            );
        }
        out.push_str("# EOF\n");
        self.metrics = out;
    }
}

/// How long a total that settles (RabbitMQ's) must have been reached before the exporter
/// publishes it: the smallest total of the readings of the last 10 s (and at least two
/// readings) is published. The management plugin emits a queue's `messages` and the channels'
/// acknowledgements apart, each up to its statistics interval late (5 s by default), so while
/// a consumer or a redrive drains a DLQ, a reading can count a message as both held and
/// acknowledged, and several readings in a row can (1 s apart, as alerting setups read): a
/// two-reading rule published that overshoot, the counter then kept it, and `rate()` saw
/// dead letters that never came. A dip is kept out by [`never_back`]. The counters lag the
/// broker by up to this long, which a rate over minutes does not notice.
pub const SETTLE_MS: i64 = 10_000;
/// Readings kept per channel at most for [`SETTLE_MS`] (an interval of 10 ms would keep 1,000).
const SETTLE_READINGS: usize = 1_000;

/// The totals to publish from the readings kept: per figure, the smallest of them, once there
/// are two readings and every one of them has it.
fn settled(seen: &VecDeque<(i64, crate::status::Counts)>) -> crate::status::Counts {
    if seen.len() < 2 {
        return (None, None);
    }
    let min = |pick: fn(&crate::status::Counts) -> Option<u64>| {
        seen.iter()
            .map(|(_, c)| pick(c))
            .collect::<Option<Vec<u64>>>()?
            .into_iter()
            .min()
    };
    (min(|c| c.0), min(|c| c.1))
}

/// Keeps a counter from going back within one run: the broker's totals can dip for a
/// moment (RabbitMQ's statistics of `messages` and of acks lag each other by up to 5 s, and
/// a message that expires in its DLQ leaves the sum), and Prometheus' `rate()` would read a
/// dip as a reset and count the whole total again. A restarted exporter starts from the
/// broker's totals, which a reset-aware `rate()` handles.
fn never_back(now: &mut crate::status::Flow, was: &crate::status::Flow) {
    for (n, w) in [
        (&mut now.dead_lettered_total, was.dead_lettered_total),
        (&mut now.source_total, was.source_total),
    ] {
        if let (Some(n), Some(w)) = (n.as_mut(), w) {
            *n = (*n).max(w);
        }
    }
}

/// A channel whose target has not been read yet: an error, so that `dlq_up` is 0.
fn not_read_yet(c: &Resolved) -> ChannelStatus {
    ChannelStatus {
        channel: c.channel.clone(),
        target: c.target.clone(),
        backend: c.backend,
        role: c.dead_letter_role,
        dead_letter_name: c.dead_letter.clone(),
        discard: c.discard.clone(),
        dead_letter: None,
        queues: Vec::new(),
        error: Some(format!(
            "not read yet: the exporter's first reading of target `{}` has not finished",
            c.target
        )),
        resolution: None,
    }
}

pub fn run(args: &ExporterArgs, printer: &Printer) -> anyhow::Result<u8> {
    // Listening and serving before anything else: the specs load, the clients connect and the
    // targets are read while scrapes are already answered (before the specs are loaded, with
    // no target at all; then with every target down until its first reading).
    let listener = std::net::TcpListener::bind(args.listen)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    let board = Arc::new(RwLock::new(Board::new(&[], Arc::default())));
    let rt = super::shared::runtime()?;
    let printer = *printer;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
        let addr = listener
            .local_addr()
            .map_or_else(|_| args.listen.to_string(), |a| a.to_string());
        let work = read_for_ever(args, &board, printer, addr);
        tokio::select! {
            r = work => r,
            () = serve(listener, Arc::clone(&board), printer) => Ok(1),
            _ = tokio::signal::ctrl_c() => {
                printer.err("dlqctl exporter: stopped");
                Ok(0)
            }
        }
    })
}

/// Loads the specs, connects, then reads every target once per interval, each on its own;
/// returns only on an error (a spec that does not lint, a client that cannot be made).
async fn read_for_ever(
    args: &ExporterArgs,
    board: &RwLock<Board>,
    printer: Printer,
    addr: String,
) -> anyhow::Result<u8> {
    let (paths, targets) = (args.paths.clone(), args.spec.targets.clone());
    let loaded = tokio::task::spawn_blocking(move || {
        super::shared::load_checked(&paths, targets.as_deref(), &printer)
    })
    .await??;
    let Some(loaded) = loaded else {
        return Ok(1);
    };
    let channels = super::shared::select(loaded.channels, &args.read)?;
    let opts = super::shared::connect_options(&args.spec, &printer);
    let read = ReadOptions {
        samples: 0,
        scan: usize::from(args.read.scan),
        // No body is shown; a prefix is read for the fingerprint of messages with no time.
        max_body: first_seen::FINGERPRINT_BODY,
        peek: args.peek,
        redrive_view: false,
        // Totals only: Prometheus' `rate()` makes the window.
        rate_window: None,
        // A depth where only a traceless read can count it (Pub/Sub's pull + nack).
        count_by_reading: true,
        // Failure groups are never published: their ids and messages are unbounded.
        groups: false,
        // One receive at most (with --peek): a scrape hides nothing.
        hide_for: None,
    };
    let mut by_target: BTreeMap<String, Vec<Resolved>> = BTreeMap::new();
    for c in &channels {
        by_target
            .entry(c.target.clone())
            .or_default()
            .push(c.clone());
    }
    let stats = Arc::new(Stats::default());
    if let Ok(mut b) = board.write() {
        *b = Board::new(&channels, Arc::clone(&stats));
    }
    printer.err(&format!(
        "dlqctl exporter: serving http://{addr}/metrics ({} channel{}, read every {}s{})",
        channels.len(),
        if channels.len() == 1 { "" } else { "s" },
        args.interval.as_secs(),
        if args.peek { ", peeking" } else { "" }
    ));
    // The clients are made off this thread (TLS roots, Kafka's threads), while the server
    // already answers.
    let targets = loaded.targets;
    let readers = tokio::task::spawn_blocking(move || {
        engine::status::connect(&channels, &targets, opts, &stats)
    })
    .await
    .map_err(|e| anyhow::anyhow!("the targets' clients could not be made: {e}"))?;
    // One refresher per target, beside the server, all in this task: a slow reading never
    // holds up a scrape (answered from the last readings) nor another target's reading.
    let refreshers = by_target.iter().map(|(target, chs)| {
        let readers = &readers;
        async move {
            let mut tick = tokio::time::interval(args.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let started = Instant::now();
                if let Some(Ok(reader)) = readers.get(target) {
                    reader.renew_read_budget();
                }
                let report = engine::status::read(chs, readers, read, &Default::default()).await;
                if let Ok(mut b) = board.write() {
                    b.update(target, report, started.elapsed());
                }
            }
        }
    });
    // Each refresher loops for ever: this returns only when there is none (no channel
    // selected), and then there is simply nothing to read.
    futures_util::future::join_all(refreshers).await;
    std::future::pending::<anyhow::Result<u8>>().await
}

/// Accepts connections for ever: at most [`MAX_CONNECTIONS`] at a time, each bounded in time.
/// At the cap the oldest connection is closed to make room: a scrape is answered from memory
/// in a millisecond, so the oldest is one that holds a socket without finishing its request,
/// and it must not keep a scrape waiting behind it (nor should the scrape wait in the backlog
/// behind a crowd of them).
async fn serve(listener: tokio::net::TcpListener, board: Arc<RwLock<Board>>, printer: Printer) {
    let open: Arc<Mutex<BTreeMap<u64, tokio::task::AbortHandle>>> = Arc::default();
    let mut backoff = ACCEPT_BACKOFF;
    for id in 0u64.. {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                backoff = ACCEPT_BACKOFF;
                stream
            }
            Err(e) => {
                // Out of file descriptors (EMFILE) fails every accept at once: wait, do not spin.
                if backoff == ACCEPT_BACKOFF {
                    printer.err(&format!(
                        "dlqctl exporter: cannot accept a connection ({e}); trying again with backoff"
                    ));
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let board = Arc::clone(&board);
        let gone = Arc::clone(&open);
        let task = tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let board = Arc::clone(&board);
                async move { Ok::<_, Infallible>(respond(&req, &board)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_DEADLINE, conn).await;
            if let Ok(mut o) = gone.lock() {
                o.remove(&id);
            }
        });
        if let Ok(mut o) = open.lock() {
            while o.len() >= MAX_CONNECTIONS {
                match o.pop_first() {
                    Some((_, oldest)) => oldest.abort(),
                    None => break,
                }
            }
            if !task.is_finished() {
                o.insert(id, task.abort_handle());
            }
        }
    }
}

fn respond(req: &Request<hyper::body::Incoming>, board: &RwLock<Board>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = content_type.parse() {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    match (req.method(), req.uri().path()) {
        (&hyper::Method::GET, "/metrics") => match board.read() {
            Ok(b) => reply(StatusCode::OK, CONTENT_TYPE, b.metrics.clone()),
            Err(_) => reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                "the last reading is unavailable\n".into(),
            ),
        },
        (&hyper::Method::GET, "/") => reply(
            StatusCode::OK,
            "text/plain",
            "dlqctl exporter: metrics at /metrics\n".into(),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found; try /metrics\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::model::Backend;

    /// The value of the one series whose line starts with `series` (name, labels, a space).
    fn sample(metrics: &str, series: &str) -> Option<u64> {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|v| v.trim().parse().ok())
    }

    fn status(channel: &str, target: &str, error: Option<&str>) -> ChannelStatus {
        ChannelStatus {
            channel: channel.into(),
            target: target.into(),
            backend: Backend::Rabbitmq,
            role: crate::spec::resolve::DeadLetterRole::DeadLetter,
            dead_letter_name: format!("{channel}.dlq"),
            discard: None,
            dead_letter: None,
            queues: Vec::new(),
            error: error.map(str::to_owned),
            resolution: None,
        }
    }

    #[test]
    fn a_target_is_down_until_its_first_reading_and_each_reading_replaces_only_its_own() {
        let mut b = Board {
            channels: vec![
                status("a", "t1", Some("not read yet")),
                status("b", "t2", Some("not read yet")),
            ],
            read_at: BTreeMap::new(),
            reads: 0,
            metrics: String::new(),
            first_seen: BTreeMap::new(),
            flows: BTreeMap::new(),
            raw: BTreeMap::new(),
            stats: Arc::default(),
            took: BTreeMap::new(),
        };
        b.render();
        assert!(
            b.metrics
                .contains("dlq_up{target=\"t1\",backend=\"rabbitmq\"} 0\n")
        );
        assert!(b.metrics.contains("dlq_exporter_reads_total 0\n"));
        b.update(
            "t1",
            Report {
                channels: vec![status("a", "t1", None)],
                generated_at_ms: 1_000,
            },
            Duration::ZERO,
        );
        assert!(
            b.metrics
                .contains("dlq_up{target=\"t1\",backend=\"rabbitmq\"} 1\n"),
            "{}",
            b.metrics
        );
        assert!(
            b.metrics
                .contains("dlq_up{target=\"t2\",backend=\"rabbitmq\"} 0\n")
        );
        assert!(b.metrics.contains("dlq_exporter_reads_total 1\n"));
        assert_eq!(b.channels[1].error.as_deref(), Some("not read yet"));
    }

    /// Issue 36: what the readings cost is served: the calls per API since the start (the
    /// readers' shared `Stats`, a fixed set of API names) and each target's last reading time,
    /// both typed; a target not read yet has no reading time.
    #[test]
    fn the_calls_per_api_and_each_targets_reading_time_are_served() {
        let stats = Arc::new(Stats::default());
        let mut b = Board::new(&[], Arc::clone(&stats));
        b.channels = vec![
            status("a", "t1", Some("not read yet")),
            status("b", "t2", Some("not read yet")),
        ];
        b.render();
        assert!(
            b.metrics
                .contains("# TYPE dlq_exporter_api_calls_total counter\n"),
            "{}",
            b.metrics
        );
        assert!(
            b.metrics
                .contains("# TYPE dlq_exporter_reading_seconds gauge\n")
        );
        assert!(!b.metrics.contains("dlq_exporter_api_calls_total{"));
        assert!(!b.metrics.contains("dlq_exporter_reading_seconds{"));
        stats.count("GET /api/queues/{vhost}");
        stats.count("sqs:GetQueueAttributes");
        stats.count("sqs:GetQueueAttributes");
        let report = Report {
            channels: vec![status("a", "t1", None)],
            generated_at_ms: 1_000,
        };
        b.update("t1", report, Duration::from_millis(1_500));
        for line in [
            "dlq_exporter_api_calls_total{api=\"GET /api/queues/{vhost}\"} 1\n",
            "dlq_exporter_api_calls_total{api=\"sqs:GetQueueAttributes\"} 2\n",
            "dlq_exporter_reading_seconds{target=\"t1\"} 1.5\n",
        ] {
            assert!(b.metrics.contains(line), "{line}\n{}", b.metrics);
        }
        assert!(
            !b.metrics
                .contains("dlq_exporter_reading_seconds{target=\"t2\"}"),
            "{}",
            b.metrics
        );
        assert!(b.metrics.ends_with("# EOF\n"));
    }

    /// Issue 34: a dead letter with no time gets an age from when the exporter first saw it,
    /// labelled `basis="first-seen"`, growing from one reading to the next, with
    /// `dlq_oldest_message_age_known` 0; once the queue is empty the age is gone and known is 1.
    #[test]
    fn a_dead_letter_with_no_time_is_aged_from_when_it_was_first_seen() {
        use crate::status::{AgeBasis, DeadLetterReport, Depth, Measure};
        let mut b = Board {
            channels: vec![status("a", "t1", Some("not read yet"))],
            read_at: BTreeMap::new(),
            reads: 0,
            metrics: String::new(),
            first_seen: BTreeMap::new(),
            flows: BTreeMap::new(),
            raw: BTreeMap::new(),
            stats: Arc::default(),
            took: BTreeMap::new(),
        };
        let reading = |n: u64, at: i64| {
            let mut c = status("a", "t1", None);
            c.dead_letter = Some(DeadLetterReport {
                by_source: Default::default(),
                name: "a.dlq".into(),
                depth: Depth::total(n, Measure::Waiting),
                oldest_age_seconds: None,
                oldest_age_since: None,
                oldest_age_basis: (n > 0).then_some(AgeBasis::Unknown),
                by_error_class: BTreeMap::new(),
                by_class_label: BTreeMap::new(),
                sampled: n,
                exact: true,
                samples: Vec::new(),
                notes: Vec::new(),
                fingerprints: (0..n).collect(),
                flow: Default::default(),
                by_class_in_window: Default::default(),
                groups: None,
                selected: None,
            });
            Report {
                channels: vec![c],
                generated_at_ms: at,
            }
        };
        let labels =
            "channel=\"a\",target=\"t1\",backend=\"rabbitmq\",queue=\"a.dlq\",role=\"dead-letter\"";
        let age = format!("dlq_oldest_message_age_seconds{{{labels},basis=\"first-seen\"}} ");
        let known = format!("dlq_oldest_message_age_known{{{labels}}} ");
        b.update("t1", reading(1, 1_000), Duration::ZERO);
        assert!(b.metrics.contains(&format!("{age}0\n")), "{}", b.metrics);
        assert!(b.metrics.contains(&format!("{known}0\n")), "{}", b.metrics);
        b.update("t1", reading(2, 31_000), Duration::ZERO);
        assert!(b.metrics.contains(&format!("{age}30\n")), "{}", b.metrics);
        b.update("t1", reading(0, 61_000), Duration::ZERO);
        assert!(
            !b.metrics.contains("dlq_oldest_message_age_seconds{"),
            "{}",
            b.metrics
        );
        assert!(b.metrics.contains(&format!("{known}1\n")), "{}", b.metrics);
    }

    /// Issue 36: the flow counters never go back within a run (a broker total that dips for a
    /// moment would read as a reset to `rate()`), and periods (SQS) add up, a period read
    /// again counted once.
    #[test]
    fn flow_counters_never_go_back_and_periods_add_up() {
        use crate::status::{DeadLetterReport, Depth, Flow, FlowPeriod, Measure};
        let mut b = Board::new(&[], Arc::default());
        b.channels = vec![status("a", "t1", None)];
        let reading_at = |flow: Flow, at: i64| {
            let mut c = status("a", "t1", None);
            c.dead_letter = Some(DeadLetterReport {
                by_source: Default::default(),
                name: "a.dlq".into(),
                depth: Depth::total(0, Measure::Waiting),
                oldest_age_seconds: None,
                oldest_age_since: None,
                oldest_age_basis: None,
                by_error_class: BTreeMap::new(),
                by_class_label: BTreeMap::new(),
                sampled: 0,
                exact: true,
                samples: Vec::new(),
                notes: Vec::new(),
                fingerprints: Vec::new(),
                flow,
                by_class_in_window: BTreeMap::new(),
                groups: None,
                selected: None,
            });
            Report {
                channels: vec![c],
                generated_at_ms: at,
            }
        };
        let reading = |flow: Flow| reading_at(flow, 1_000);
        let totals = |d, s| Flow {
            dead_lettered_total: Some(d),
            source_total: Some(s),
            source: Some("a".into()),
            ..Flow::default()
        };
        let dead = "dlq_dead_lettered_messages_total{channel=\"a\",target=\"t1\",backend=\"rabbitmq\",queue=\"a.dlq\",role=\"dead-letter\"} ";
        let source = "dlq_source_messages_total{channel=\"a\",target=\"t1\",backend=\"rabbitmq\",queue=\"a\"} ";
        b.update("t1", reading(totals(10, 1000)), Duration::ZERO);
        assert!(b.metrics.contains(&format!("{dead}10\n")), "{}", b.metrics);
        assert!(
            b.metrics.contains(&format!("{source}1000\n")),
            "{}",
            b.metrics
        );
        assert!(
            b.metrics
                .contains("# TYPE dlq_dead_lettered_messages_total counter\n")
        );
        // A dip (statistics emitted apart): the counter stays.
        b.update("t1", reading(totals(8, 1000)), Duration::ZERO);
        assert!(b.metrics.contains(&format!("{dead}10\n")), "{}", b.metrics);
        b.update("t1", reading(totals(12, 1100)), Duration::ZERO);
        assert!(b.metrics.contains(&format!("{dead}12\n")), "{}", b.metrics);

        // Totals that settle (RabbitMQ's): published once they held for SETTLE_MS, so an
        // overshoot (the acks counted before the queue's `messages` fell) is never
        // published, and never held by the rule above.
        let mut b = Board::new(&[], Arc::default());
        b.channels = vec![status("a", "t1", None)];
        let settling = |d, s| Flow {
            settles: true,
            ..totals(d, s)
        };
        // Readings 1 s apart, as an alerting setup reads: (seconds, dead-lettered, source).
        let mut read = |s: i64, d: u64, src: u64| {
            b.update(
                "t1",
                reading_at(settling(d, src), s * 1_000),
                Duration::ZERO,
            );
            sample(&b.metrics, dead)
        };
        assert_eq!(read(0, 10, 1000), None, "one reading publishes nothing");
        assert_eq!(read(1, 20, 1000), Some(10));
        // The overshoot of a drain, held for three readings (the acks counted, the queue's
        // `messages` not fallen yet): never published. Failed before SETTLE_MS, with a rule
        // of two readings in a row: 20.
        assert_eq!(read(2, 20, 1000), Some(10));
        assert_eq!(read(3, 20, 1000), Some(10));
        assert_eq!(read(4, 10, 1000), Some(10));
        // A total that holds for 10 s is published.
        assert_eq!(read(5, 11, 1010), Some(10));
        assert_eq!(read(14, 11, 1010), Some(10), "not yet 10 s");
        assert_eq!(read(15, 11, 1010), Some(11));
        // Steady arrivals: the counter follows, 10 s behind.
        for t in 16..40 {
            read(t, 11 + (t as u64 - 15), 1010);
        }
        assert_eq!(read(40, 36, 1010), Some(26));

        // Periods, no totals: added up; a period read again replaces its figures.
        let mut b = Board::new(&[], Arc::default());
        b.channels = vec![status("a", "t1", None)];
        let periods = |ps: &[(i64, u64, u64)]| Flow {
            source: Some("a".into()),
            periods: ps
                .iter()
                .map(|(t, d, s)| FlowPeriod {
                    start_s: *t,
                    dead_lettered: Some(*d),
                    source: Some(*s),
                })
                .collect(),
            ..Flow::default()
        };
        b.update("t1", reading(Flow::default()), Duration::ZERO);
        assert!(
            !b.metrics.contains("dlq_dead_lettered_messages_total{"),
            "absent, not 0"
        );
        b.update(
            "t1",
            reading(periods(&[(0, 4, 400), (60, 6, 600)])),
            Duration::ZERO,
        );
        assert!(b.metrics.contains(&format!("{dead}10\n")), "{}", b.metrics);
        b.update(
            "t1",
            reading(periods(&[(60, 6, 600), (120, 1, 100)])),
            Duration::ZERO,
        );
        assert!(b.metrics.contains(&format!("{dead}11\n")), "{}", b.metrics);
        assert!(
            b.metrics.contains(&format!("{source}1100\n")),
            "{}",
            b.metrics
        );
    }
}
