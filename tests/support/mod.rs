//! Shared by the integration tests: the local stack's endpoints, random resource names, the
//! rule that live tests never skip silently, and the live-test kit built on them.
//!
//! Endpoints come from the variables `scripts/stack env` exports, with the stack's defaults.
//! When a server does not answer, a test fails under `CI=true` or `DLQCTL_LIVE_REQUIRED=1`
//! (as `scripts/test` sets), and otherwise skips with a loud message on stderr.
//!
//! The kit: [`workspace::Workspace`] is a temp folder with a targets file and one channel,
//! run through the real binary (`connect` is the Kafka Connect worker's REST API, beside
//! `kafka`); `rabbit`, `sqs`, `kafka` and `pubsub` each wrap it in a `Fixture` with
//! the same face (`new()`, `write_example`, `plan`/`apply`/`run`, `assert_empty_plan`,
//! cleanup on drop) and hold the one third-party client the tests use for that backend;
//! `snapshot` holds the insta settings every plan snapshot shares.
#![allow(dead_code)]

/// What every backend's `Fixture` shares: it derefs to its workspace (field `ws`), and
/// `applied()` / `applied_with(edit)` are `new()` with the example written and applied.
macro_rules! fixture_face {
    ($fixture:ident) => {
        impl std::ops::Deref for $fixture {
            type Target = $crate::support::workspace::Workspace;
            fn deref(&self) -> &Self::Target {
                &self.ws
            }
        }

        impl std::ops::DerefMut for $fixture {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.ws
            }
        }

        impl $fixture {
            /// `new()`, then the example written unchanged and applied (which must succeed).
            pub fn applied() -> Option<Self> {
                Self::applied_with(|t| t)
            }

            /// `new()`, then the example written with `edit` and applied (which must succeed).
            pub fn applied_with(edit: impl Fn(String) -> String) -> Option<Self> {
                let f = Self::new()?;
                f.write_example(edit);
                f.apply(&[]).ok();
                Some(f)
            }
        }
    };
}

pub mod azure;
pub mod connect;
pub mod discovery;
pub mod elasticmq;
pub mod exporter;
pub mod fake;
pub mod kafka;
pub mod monitoring;
pub mod proxy;
pub mod pubsub;
pub mod rabbit;
pub mod redrive;
pub mod snapshot;
pub mod sqs;
pub mod stall;
pub mod tcp;
pub mod workspace;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

pub fn rabbitmq_url() -> String {
    var("DLQCTL_RABBITMQ_URL", "http://127.0.0.1:15672")
}

pub fn amqp_url() -> String {
    var("DLQCTL_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
}

pub fn aws_endpoint() -> String {
    var("DLQCTL_AWS_ENDPOINT", "http://127.0.0.1:5000")
}

pub fn kafka_bootstrap() -> String {
    var("DLQCTL_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
}

/// The Pub/Sub emulator's `host:port` (`PUBSUB_EMULATOR_HOST`, as `scripts/stack env` sets).
pub fn pubsub_host() -> String {
    var("PUBSUB_EMULATOR_HOST", "127.0.0.1:8085")
}

pub fn cache_dir() -> PathBuf {
    std::env::var_os("DLQCTL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/dlqctl")
        })
}

/// Live tests must run: in CI, or when the test script asks for it.
pub fn live_required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
        || std::env::var("DLQCTL_LIVE_REQUIRED").is_ok_and(|v| v == "1")
}

/// Returns false (and says so loudly) when the server is down and live tests may skip;
/// panics when they may not.
#[allow(clippy::print_stderr)] // the loud skip message is the point
pub fn require(what: &str, up: bool) -> bool {
    if up {
        return true;
    }
    if live_required() {
        panic!(
            "{what} is not reachable, and live tests are required (CI=true or DLQCTL_LIVE_REQUIRED=1): run `scripts/stack up`"
        );
    }
    eprintln!(
        "\n*** SKIPPED: {what} is not reachable; run `scripts/stack up` to run this live test ***\n"
    );
    false
}

/// A command-line tool the tests run: `$var`, else `name` on PATH, if it answers
/// `version_arg`; `None` (a loud skip, or a failure under CI=true) when it is missing.
pub fn tool(var: &str, name: &str, version_arg: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(name));
    let found = Command::new(&path)
        .arg(version_arg)
        .output()
        .is_ok_and(|o| o.status.success());
    require(
        &format!(
            "{name} ({}; `scripts/stack up` installs it)",
            path.display()
        ),
        found,
    )
    .then_some(path)
}

/// Whether all four servers of the local stack answer (else a loud skip, or a failure under
/// CI=true).
pub fn whole_stack_up() -> bool {
    let up = tcp_up(&host_port(&rabbitmq_url()))
        && tcp_up(&host_port(&aws_endpoint()))
        && tcp_up(&kafka_bootstrap())
        && tcp_up(&pubsub_host());
    require(
        "the local stack (RabbitMQ, moto, Kafka, the Pub/Sub emulator)",
        up,
    )
}

/// Writes `count` channels with `bench/gen.py` into `dir` (names start with `prefix`; `extra`
/// are gen.py's other options), targeting the local stack's endpoints.
pub fn generate_channels(
    dir: &std::path::Path,
    count: impl std::fmt::Display,
    prefix: &str,
    extra: &[&str],
) {
    let ok = Command::new("python3")
        .arg(root().join("bench/gen.py"))
        .args([count.to_string(), dir.display().to_string()])
        .args(["--prefix", prefix])
        .args(extra)
        .args([
            "--aws",
            &aws_endpoint(),
            "--rabbit",
            &rabbitmq_url(),
            "--kafka",
            &kafka_bootstrap(),
        ])
        .status()
        .expect("python3 runs bench/gen.py")
        .success();
    assert!(ok, "bench/gen.py failed");
}

/// Whether something accepts TCP connections at `host:port`.
pub fn tcp_up(addr: &str) -> bool {
    use std::net::ToSocketAddrs;
    addr.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
}

/// `http://127.0.0.1:15672` → `127.0.0.1:15672`.
pub fn host_port(url: &str) -> String {
    url.split("://")
        .nth(1)
        .unwrap_or(url)
        .trim_end_matches('/')
        .to_owned()
}

/// A name no other test or earlier run uses: `<prefix><pid>-<time>-<n>`, lowercase.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    format!(
        "{prefix}{}-{}-{}",
        std::process::id(),
        t % 1_000_000_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The binary under test, with a cleared environment plus what the test passes in.
/// `DLQCTL_TEST_BIN` names another build of it: a copy taken right after building, for
/// worktrees that share one target directory (the last build there owns `debug/dlqctl`).
pub fn dlqctl() -> Command {
    let mut c = dlqctl_bare();
    c.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    c
}

/// The binary under test with nothing of the host's environment, not even PATH, run from the
/// repo root: so that nothing on the host (NO_COLOR, TERM, AWS variables) leaks into a
/// snapshot.
pub fn dlqctl_bare() -> Command {
    let bin =
        std::env::var_os("DLQCTL_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_dlqctl").into());
    let mut c = Command::new(bin);
    c.env_clear().current_dir(root());
    c
}

/// The local stack's credentials (RabbitMQ's guest, moto's test keys), in this order: the
/// RabbitMQ user first, its password second.
pub fn local_env() -> Vec<(String, String)> {
    [
        ("DLQCTL_RABBITMQ_USER", "guest"),
        ("DLQCTL_RABBITMQ_PASSWORD", "guest"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// `dlqctl` with the local stack's credentials, run in `dir`.
pub fn dlqctl_local(dir: &std::path::Path) -> Command {
    let mut c = dlqctl();
    c.envs(local_env()).current_dir(dir);
    c
}

/// Runs a future to completion on a fresh current-thread runtime (tests are synchronous).
pub fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// The example files (under `examples/`) whose channel uses `target`, sorted by name.
pub fn examples_on(target: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join("examples"))
        .expect("examples/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| {
            std::fs::read_to_string(root().join("examples").join(n)).is_ok_and(|t| {
                t.contains("kind: Channel") && t.contains(&format!("target: {target}"))
            })
        })
        .collect();
    out.sort();
    out
}

pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Asserts that the run succeeded (exit 0), showing its stdout and stderr when it did not;
    /// returns the output, for what the test reads next.
    #[track_caller]
    pub fn ok(&self) -> &Self {
        self.ok_with("")
    }

    /// [`Output::ok`] with `context` (what should have succeeded, and why) in the message.
    #[track_caller]
    pub fn ok_with(&self, context: impl std::fmt::Display) -> &Self {
        self.exits_with(0, context)
    }

    /// Asserts the exit code, showing stdout and stderr when it is another.
    #[track_caller]
    pub fn exits(&self, code: i32) -> &Self {
        self.exits_with(code, "")
    }

    /// [`Output::exits`] with `context` in the message.
    #[track_caller]
    pub fn exits_with(&self, code: i32, context: impl std::fmt::Display) -> &Self {
        assert_eq!(self.code, code, "{context}\n{}{}", self.stdout, self.stderr);
        self
    }

    /// Stdout parsed as JSON (`what` names the document); panics showing both streams when it
    /// is not JSON.
    #[track_caller]
    pub fn json(&self, what: &str) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{what}: {e}\n{}{}", self.stdout, self.stderr))
    }

    /// Asserts that stdout contains `needle`, showing stdout when it does not.
    #[track_caller]
    pub fn assert_stdout_contains(&self, needle: &str) {
        assert!(self.stdout.contains(needle), "{}", self.stdout);
    }

    /// Asserts that the run wrote nothing: no `[1/n]` step started.
    #[track_caller]
    pub fn assert_zero_writes(&self) {
        assert!(!self.stderr.contains("[1/"), "zero writes\n{}", self.stderr);
    }

    /// Asserts that stderr contains `needle`, showing stderr when it does not.
    #[track_caller]
    pub fn assert_stderr_contains(&self, needle: &str) {
        assert!(self.stderr.contains(needle), "{}", self.stderr);
    }
}

pub fn output(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("command runs");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
