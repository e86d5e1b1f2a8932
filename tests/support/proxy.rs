//! A fault-injecting HTTP/1.1 proxy for reliability tests, on 127.0.0.1 only.
//!
//! It forwards each request to one upstream (the local RabbitMQ management API or moto) and,
//! by a seeded, repeatable schedule, answers some with the backend's throttling error or drops
//! the connection instead. It can also forward a write and then drop the connection (the
//! write happened; its answer is lost), or fail the n-th write. Every loop is bounded: the
//! proxy stops when the test drops it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Which protocol the upstream speaks: how reads are told from writes, and how the backend
/// says "throttled".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    /// The RabbitMQ management API: GET reads; 503 throttles.
    #[default]
    Rabbitmq,
    /// AWS over moto: every call is a POST; SQS names its operation in `x-amz-target`
    /// (JSON protocol, throttled as `RequestThrottled`), CloudWatch in the form body's
    /// `Action` (query protocol, throttled as `Throttling`).
    Aws,
}

/// What the proxy does to which requests.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    pub protocol: Protocol,
    /// Percentage (0–100) of reads (GET) to fault; half throttled, half dropped.
    pub read_fault_percent: u64,
    /// The throttling answer: status and body.
    pub throttle_status: u16,
    pub throttle_body: String,
    /// Fail the n-th write (1-based) with HTTP 500 without forwarding it.
    pub fail_write: Option<u64>,
    /// Forward the n-th write (1-based), then drop the connection instead of answering.
    pub lose_write_answer: Option<u64>,
    /// Delay added before forwarding each write.
    pub write_delay: Duration,
    /// Seed of the schedule.
    pub seed: u64,
    /// Answer a SendMessageBatch whose request body is longer than this many bytes with
    /// SQS's BatchRequestTooLong, without forwarding it (an account on SQS's older 256 KiB
    /// batch quota; moto allows 1 MiB of bodies).
    pub batch_limit: Option<usize>,
}

/// What happened, for assertions.
#[derive(Debug, Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub faulted: AtomicU64,
}

pub struct Proxy {
    pub addr: String,
    pub counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Starts a proxy in front of `upstream` (e.g. `http://127.0.0.1:15672`).
    pub fn start(upstream: &str, faults: Faults) -> Proxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = format!("http://{}", listener.local_addr().expect("addr"));
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s, up) = (
            Arc::clone(&counters),
            Arc::clone(&stop),
            upstream.trim_end_matches('/').to_owned(),
        );
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(serve(listener, up, faults, c, s));
        });
        Proxy {
            addr,
            counters,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A tiny deterministic generator (SplitMix64): the same seed, the same faults.
fn next(state: &Mutex<u64>) -> u64 {
    let mut s = state.lock().expect("rng");
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

async fn serve(
    listener: std::net::TcpListener,
    upstream: String,
    faults: Faults,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
) {
    let listener = TcpListener::from_std(listener).expect("tokio listener");
    let client = reqwest::Client::new();
    let rng = Arc::new(Mutex::new(faults.seed));
    let faults = Arc::new(faults);
    // Bounded: the proxy lives as long as its test, at most 10 minutes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    while !stop.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
        let accepted = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
        let Ok(Ok((stream, _))) = accepted else {
            continue;
        };
        let (client, upstream, faults, counters, rng) = (
            client.clone(),
            upstream.clone(),
            Arc::clone(&faults),
            Arc::clone(&counters),
            Arc::clone(&rng),
        );
        tokio::spawn(async move {
            let _ = connection(stream, &client, &upstream, &faults, &counters, &rng).await;
        });
    }
}

async fn connection(
    stream: TcpStream,
    client: &reqwest::Client,
    upstream: &str,
    faults: &Faults,
    counters: &Counters,
    rng: &Mutex<u64>,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    for _ in 0..10_000 {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).await? == 0 {
            return Ok(());
        }
        let mut parts = request_line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or("GET").to_owned(),
            parts.next().unwrap_or("/").to_owned(),
        );
        let mut headers = Vec::new();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await?;
            let line = line.trim_end().to_owned();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if !k.eq_ignore_ascii_case("host") && !k.eq_ignore_ascii_case("content-length") {
                    headers.push((k.trim().to_owned(), v.trim().to_owned()));
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;
        counters.requests.fetch_add(1, Ordering::SeqCst);

        let operation = aws_operation(&headers, &body);
        let is_read = match faults.protocol {
            Protocol::Rabbitmq => method == "GET",
            Protocol::Aws => ["Get", "List", "Describe"]
                .iter()
                .any(|p| operation.starts_with(p)),
        };
        if is_read {
            counters.reads.fetch_add(1, Ordering::SeqCst);
            if next(rng) % 100 < faults.read_fault_percent {
                counters.faulted.fetch_add(1, Ordering::SeqCst);
                if next(rng).is_multiple_of(2) {
                    return Ok(()); // dropped connection
                }
                match faults.protocol {
                    Protocol::Rabbitmq => {
                        respond(&mut write, faults.throttle_status, &faults.throttle_body).await?
                    }
                    Protocol::Aws => throttle_aws(&mut write, &headers).await?,
                }
                continue;
            }
        } else {
            let n = counters.writes.fetch_add(1, Ordering::SeqCst) + 1;
            if operation == "SendMessageBatch" && faults.batch_limit.is_some_and(|l| body.len() > l)
            {
                counters.faulted.fetch_add(1, Ordering::SeqCst);
                let text = format!(
                    r#"{{"__type":"com.amazonaws.sqs#BatchRequestTooLong","message":"Batch requests cannot be longer than {} bytes. You have sent {} bytes."}}"#,
                    faults.batch_limit.unwrap_or_default(),
                    body.len()
                );
                let head = format!(
                    "HTTP/1.1 400 X\r\ncontent-type: application/x-amz-json-1.0\r\nx-amzn-query-error: AWS.SimpleQueueService.BatchRequestTooLong;Sender\r\ncontent-length: {}\r\n\r\n",
                    text.len()
                );
                write.write_all(head.as_bytes()).await?;
                write.write_all(text.as_bytes()).await?;
                write.flush().await?;
                continue;
            }
            if faults.fail_write == Some(n) {
                counters.faulted.fetch_add(1, Ordering::SeqCst);
                respond(
                    &mut write,
                    500,
                    r#"{"error":"internal_error","reason":"injected failure"}"#,
                )
                .await?;
                continue;
            }
            tokio::time::sleep(faults.write_delay).await;
        }
        let mut req = client.request(
            method.parse().unwrap_or(reqwest::Method::GET),
            format!("{upstream}{target}"),
        );
        for (k, v) in &headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let resp = req.body(body).send().await;
        if !is_read && faults.lose_write_answer == Some(counters.writes.load(Ordering::SeqCst)) {
            counters.faulted.fetch_add(1, Ordering::SeqCst);
            return Ok(()); // the write happened upstream; its answer is lost
        }
        match resp {
            Ok(r) => {
                let status = r.status().as_u16();
                let text = r.text().await.unwrap_or_default();
                respond(&mut write, status, &text).await?;
            }
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

async fn respond(
    w: &mut tokio::net::tcp::OwnedWriteHalf,
    status: u16,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    w.write_all(head.as_bytes()).await?;
    w.write_all(body.as_bytes()).await?;
    w.flush().await
}

/// The AWS operation a request calls (`GetQueueAttributes`, `DescribeAlarms`), or "".
fn aws_operation(headers: &[(String, String)], body: &[u8]) -> String {
    if let Some((_, target)) = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("x-amz-target"))
    {
        return target.rsplit('.').next().unwrap_or_default().to_owned();
    }
    String::from_utf8_lossy(body)
        .split('&')
        .find_map(|kv| kv.strip_prefix("Action="))
        .unwrap_or_default()
        .to_owned()
}

/// The throttling answer of the service the request is for, as AWS sends it.
async fn throttle_aws(
    w: &mut tokio::net::tcp::OwnedWriteHalf,
    headers: &[(String, String)],
) -> std::io::Result<()> {
    let sqs = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("x-amz-target"));
    let (extra, kind, body) = if sqs {
        (
            "x-amzn-query-error: RequestThrottled;Sender\r\n",
            "application/x-amz-json-1.0",
            r#"{"__type":"com.amazonaws.sqs#RequestThrottled","message":"Rate exceeded"}"#,
        )
    } else {
        (
            "",
            "text/xml",
            r#"<ErrorResponse xmlns="http://monitoring.amazonaws.com/doc/2010-08-01/"><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>injected</RequestId></ErrorResponse>"#,
        )
    };
    let head = format!(
        "HTTP/1.1 400 X\r\ncontent-type: {kind}\r\n{extra}content-length: {}\r\n\r\n",
        body.len()
    );
    w.write_all(head.as_bytes()).await?;
    w.write_all(body.as_bytes()).await?;
    w.flush().await
}
