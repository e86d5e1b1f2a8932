//! `dlqctl exporter` against what an on-call night brings (issue 31, findings 3, 12, 21): a
//! target that stalls and comes back, a target stalled from the start, and clients that hold
//! sockets open with half a request under a low file-descriptor limit. The real binary, the
//! local RabbitMQ management API behind a stalling proxy (`support::stall`), every loop
//! bounded in count and time.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::rabbit;
use support::stall::Stall;

const UP: &str = "dlq_up{target=\"local-rabbitmq\",backend=\"rabbitmq\"} ";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The exporter this test started, killed by its handle however the test ends.
struct Exporter {
    child: Child,
    port: u16,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `dlqctl exporter channel.yaml` in the fixture's folder on a free port, with at most
/// `nofile` open files when given.
fn exporter(f: &rabbit::Fixture, extra: &[&str], nofile: Option<u64>) -> Exporter {
    let port = free_port();
    let mut cmd = support::dlqctl();
    cmd.args(["exporter", "channel.yaml", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .args(extra)
        .envs(f.env.iter().map(|(k, v)| (k, v)))
        .current_dir(f.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(n) = nofile {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    Exporter {
        child: cmd.spawn().expect("exporter starts"),
        port,
    }
}

/// One scrape of `/metrics` over a fresh connection, answered whole within `within`, or None.
fn scrape(port: u16, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, within).ok()?;
    s.set_read_timeout(Some(within)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    (text.starts_with("HTTP/1.1 200") && text.contains("# EOF")).then_some(text)
}

/// The value of `dlq_up` for the RabbitMQ target in a scrape.
fn up(body: &str) -> Option<u8> {
    body.lines()
        .find_map(|l| l.strip_prefix(UP))
        .and_then(|v| v.trim().parse().ok())
}

/// Scrapes until `dlq_up` is `want`, for at most `within`; returns how long it took.
fn until_up_is(port: u16, want: u8, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < within {
        if scrape(port, Duration::from_secs(2)).is_some_and(|b| up(&b) == Some(want)) {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// A RabbitMQ channel applied on the local broker, its targets file pointed at `stall`.
fn fixture_behind(stall_first: bool) -> Option<(rabbit::Fixture, Stall)> {
    let f = rabbit::Fixture::applied()?;
    let stall = Stall::start(&support::host_port(&support::rabbitmq_url()), stall_first);
    f.edit_targets(|t| t.replace(&support::rabbitmq_url(), &stall.url()));
    Some((f, stall))
}

/// Finding 21: the first scrape is answered within 100 ms of the process starting, though the
/// only target is stalled (no answer at all), and does not say the target is up; it is
/// `dlq_up 0` once the specs are loaded.
#[test]
fn the_exporter_serves_within_100_ms_of_start_with_its_target_stalled() {
    let Some((f, _stall)) = fixture_behind(true) else {
        return;
    };
    let started = Instant::now();
    let e = exporter(&f, &["--interval", "5s"], None);
    let mut first = None;
    while started.elapsed() < Duration::from_secs(5) {
        if let Some(body) = scrape(e.port, Duration::from_millis(500)) {
            first = Some((started.elapsed(), body));
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let (after, body) = first.expect("a scrape answered within 5 s of start");
    assert!(
        after < Duration::from_millis(100),
        "first scrape answered {} ms after start",
        after.as_millis()
    );
    assert_ne!(up(&body), Some(1), "not read yet: not up\n{body}");
    assert!(body.contains("dlq_exporter_reads_total 0\n"), "{body}");
    assert!(
        !body.contains("dlq_depth{"),
        "no figures before a reading\n{body}"
    );
    // Once the specs are loaded (milliseconds), the stalled target is there, down.
    until_up_is(e.port, 0, Duration::from_secs(5)).expect("dlq_up 0 while the target stalls");
}

/// Finding 3: a target stalled for 60 s (a hung management API, every connection held) is
/// reported down while it stalls, every scrape is answered all the while, and once it answers
/// again it is up within two intervals, its depth series back.
#[test]
fn a_target_that_stalls_for_60_s_is_up_again_within_two_intervals() {
    let Some((f, stall)) = fixture_behind(false) else {
        return;
    };
    let interval = Duration::from_secs(5);
    let e = exporter(&f, &["--interval", "5s", "--read-timeout", "5"], None);
    until_up_is(e.port, 1, Duration::from_secs(30)).expect("up before the stall");

    stall.stall();
    let stalled = Instant::now();
    let (mut answered, mut missed, mut seen_down) = (0, 0, false);
    while stalled.elapsed() < Duration::from_secs(60) {
        match scrape(e.port, Duration::from_secs(1)) {
            Some(body) => {
                answered += 1;
                seen_down |= up(&body) == Some(0);
            }
            None => missed += 1,
        }
        std::thread::sleep(Duration::from_millis(1000));
    }
    assert_eq!(
        missed, 0,
        "every scrape answered within 1 s during the stall ({answered} were)"
    );
    assert!(seen_down, "the stalled target was reported down");

    stall.resume();
    let back = until_up_is(e.port, 1, Duration::from_secs(60));
    let back = back.expect("up again within 60 s of the target answering");
    assert!(
        back <= 2 * interval,
        "up again {} ms after the target answered; two intervals are {} ms",
        back.as_millis(),
        (2 * interval).as_millis()
    );
    let body = scrape(e.port, Duration::from_secs(2)).expect("scrape");
    assert!(body.contains("dlq_depth{"), "depth series back\n{body}");
}

/// Finding 12: 200 clients each holding a socket with half a request, against an exporter
/// allowed 64 open files: the exporter does not spin (CPU stays low) and a scrape is still
/// answered while the idle sockets are held; the idle sockets are closed by the exporter.
#[test]
fn idle_sockets_with_half_a_request_do_not_starve_scrapes_under_a_low_file_limit() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let e = exporter(&f, &["--interval", "5s"], Some(64));
    until_up_is(e.port, 1, Duration::from_secs(30)).expect("up before the sockets");

    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], e.port));
    let mut idle = Vec::new();
    for _ in 0..200 {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n");
            idle.push(s);
        }
    }
    assert!(idle.len() >= 60, "{} idle sockets opened", idle.len());

    let cpu = || -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", e.child.id())).expect("stat");
        let after = stat.rsplit(')').next().unwrap_or_default().to_owned();
        let f: Vec<&str> = after.split_whitespace().collect();
        let ticks: f64 = f[11].parse::<f64>().unwrap_or(0.0) + f[12].parse::<f64>().unwrap_or(0.0);
        ticks / 100.0
    };
    let (c0, t0) = (cpu(), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let share = (cpu() - c0) / t0.elapsed().as_secs_f64();
    assert!(
        share < 0.3,
        "the exporter used {:.0}% of a core while the sockets idled",
        share * 100.0
    );

    // Scrapes, while every idle socket is still held open by this test.
    let started = Instant::now();
    let mut answered = None;
    while started.elapsed() < Duration::from_secs(20) {
        if scrape(e.port, Duration::from_secs(2)).is_some() {
            answered = Some(started.elapsed());
            break;
        }
    }
    let answered =
        answered.expect("a scrape answered within 20 s while 200 idle sockets were held");
    assert!(
        answered < Duration::from_secs(15),
        "answered after {} ms",
        answered.as_millis()
    );

    // The exporter hung up on the idle ones (header read timeout).
    let mut closed = 0;
    for s in &mut idle {
        let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
        let mut b = [0u8; 64];
        if matches!(s.read(&mut b), Ok(0))
            || matches!(s.read(&mut b), Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset)
        {
            closed += 1;
        }
    }
    assert!(
        closed >= 50,
        "{closed} of {} idle sockets closed by the exporter",
        idle.len()
    );
}
