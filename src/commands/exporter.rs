//! `dlqctl exporter`: the status figures as Prometheus metrics. One reading of every channel
//! per `--interval`, kept in memory; scrapes of `/metrics` are answered from it and never reach
//! a broker. Reads use the same read-only clients as `status`, with `--peek` off unless asked
//! (see `crate::cli::ExporterArgs`).

use std::convert::Infallible;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::backend::wire::Stats;
use crate::cli::ExporterArgs;
use crate::engine;
use crate::printer::Printer;
use crate::status::{ReadOptions, render};

/// The exposition format's content type (the body also ends in `# EOF`, which this format
/// reads as a comment and OpenMetrics requires).
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What scrapes are answered with: the last reading's metrics, and how many readings there
/// have been.
struct Latest {
    metrics: String,
    reads: u64,
}

fn metrics_text(latest: &Latest) -> String {
    let body = latest.metrics.trim_end_matches("# EOF\n");
    format!(
        "{body}# HELP dlq_exporter_reads_total Readings of the brokers since the exporter started (one per interval; scrapes never read).\n# TYPE dlq_exporter_reads_total counter\ndlq_exporter_reads_total {}\n# EOF\n",
        latest.reads
    )
}

pub fn run(args: &ExporterArgs, printer: &Printer) -> anyhow::Result<u8> {
    let Some(loaded) = super::load_checked(&args.paths, args.spec.targets.as_deref(), printer)?
    else {
        return Ok(1);
    };
    let channels = Arc::new(super::status::select(loaded.channels, &args.read)?);
    let opts = super::connect_options(&args.spec, printer);
    let read = ReadOptions {
        samples: 0,
        scan: usize::from(args.read.scan),
        max_body: 0,
        peek: args.peek,
        redrive_view: false,
    };
    let stats = Arc::new(Stats::default());
    let readers = Arc::new(engine::status::connect(
        &channels,
        &loaded.targets,
        opts,
        &stats,
    ));
    let rt = super::runtime()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
        let first = engine::status::read(&channels, &readers, read).await;
        let latest = Arc::new(RwLock::new(Latest {
            metrics: render::openmetrics(&first),
            reads: 1,
        }));
        printer.err(&format!(
            "dlqctl exporter: serving http://{}/metrics ({} channel{}, read every {}s{})",
            listener
                .local_addr()
                .map_or_else(|_| args.listen.to_string(), |a| a.to_string()),
            channels.len(),
            if channels.len() == 1 { "" } else { "s" },
            args.interval.as_secs(),
            if args.peek { ", peeking" } else { "" }
        ));
        // The refresher and the server run side by side in this task: a slow reading never
        // holds up a scrape, which is answered from the last one.
        let refresh = async {
            loop {
                tokio::time::sleep(args.interval).await;
                let report = engine::status::read(&channels, &readers, read).await;
                let text = render::openmetrics(&report);
                if let Ok(mut l) = latest.write() {
                    l.metrics = text;
                    l.reads += 1;
                }
            }
        };
        let serve = async {
            loop {
                // A failed accept (a client gone, too many files) loses that one client only.
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let latest = Arc::clone(&latest);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let latest = Arc::clone(&latest);
                        async move { Ok::<_, Infallible>(respond(&req, &latest)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        };
        tokio::select! {
            () = refresh => {}
            () = serve => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        printer.err("dlqctl exporter: stopped");
        Ok(0)
    })
}

fn respond(req: &Request<hyper::body::Incoming>, latest: &RwLock<Latest>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = content_type.parse() {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    match (req.method(), req.uri().path()) {
        (&hyper::Method::GET, "/metrics") => match latest.read() {
            Ok(l) => reply(StatusCode::OK, CONTENT_TYPE, metrics_text(&l)),
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
