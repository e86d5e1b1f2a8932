//! The jq worker (issue 52, H3): `--where` and `--transform` programs run in a process of
//! their own, with a time and a memory budget per message, so that a program that never ends
//! (`last(repeat(1))`), allocates without bound (`[range(1e9)]`) or recurses without end
//! (`def f: f + 1; f`) fails on that message, reported, instead of wedging or aborting the
//! run with copies published and nothing settled, reported or journaled.
//!
//! jaq runs a program to its end on the thread that asks: nothing in it can be interrupted,
//! a stack overflow or a failed allocation aborts the whole process, and a thread cannot be
//! stopped. A process can: dlqctl runs itself again (`std::env::current_exe`, the hidden
//! argument [`ARG`]) as a worker that reads one request a line on stdin and answers one a
//! line on stdout. Its address space for data is capped (`RLIMIT_DATA`, [`MEMORY_BUDGET`]
//! above what it holds when ready), its CPU time per message too (`RLIMIT_CPU`, a backstop
//! that ends it even when its parent is gone), and the parent kills it once a message has
//! taken [`TIME_BUDGET`]. A worker that dies is named by what ended it (the time, memory or
//! stack budget) and replaced for the next message. The worker starts with an empty
//! environment (only `TZ`), ignores SIGINT (Ctrl-C is for the run, which settles and stops),
//! and ends when its stdin closes.
//!
//! The waiting happens off the async task that asked (`tokio::task::block_in_place` on a
//! multi-threaded runtime), so the tasks that acknowledge and settle keep running.
//!
//! Only the `dlqctl` binary turns workers on ([`enable`]); elsewhere (the library's unit
//! tests) programs run in the asking thread, without budgets.

use std::io::{BufRead, BufReader, Read as _, Write};
#[cfg(unix)]
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The argument that makes `dlqctl` a jq worker (hidden: not a subcommand of the CLI).
pub const ARG: &str = "__jq-worker";

/// How long one message may take a program (wall clock, in the worker).
pub const TIME_BUDGET: Duration = Duration::from_secs(1);

/// How much memory a program may take on one message, beyond what the worker holds when
/// ready.
pub const MEMORY_BUDGET: u64 = 256 << 20;

/// The worker's stack for a program: deeper recursion is a failure of the stack budget.
pub const STACK_BUDGET: usize = 64 << 20;

/// After a program has run past a budget (or its worker failed) on this many messages, the
/// run's other messages are not given to it (each fails at once, and stays): a program that
/// never ends would otherwise hold a run for [`TIME_BUDGET`] per message.
pub const MAX_OVER_BUDGET: u64 = 5;

/// The executable a worker runs, set by [`enable`].
static EXE: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// Runs programs in workers from now on (the `dlqctl` binary, before any command).
pub fn enable() {
    EXE.get_or_init(|| std::env::current_exe().map_err(|e| e.to_string()));
}

/// Whether programs run in workers.
pub fn enabled() -> bool {
    EXE.get().is_some()
}

/// A budget a program ran past, named as the report says it.
fn over(flag: &str, what: &str) -> String {
    format!(
        "{flag} ran past its {what} on this message (budgets per message: {} s of time, {} MiB of memory, {} MiB of stack; docs/redrive.md, \"Budgets\")",
        TIME_BUDGET.as_secs(),
        MEMORY_BUDGET >> 20,
        STACK_BUDGET >> 20
    )
}

/// The workers of one program (`flag` and `code`), started as messages need them (one per
/// thread asking at once), shared by every thread of a run; dropping it ends them.
pub struct Pool {
    flag: &'static str,
    code: Arc<str>,
    idle: Mutex<Vec<Worker>>,
    /// Messages on which a budget ran out.
    over_budget: AtomicU64,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Pool").field(&self.flag).finish()
    }
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// What it says on stderr, once it has ended.
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Our own child, by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Pool {
    /// The workers for `code` given as `flag` (`--where`, `--transform`); none is started
    /// yet.
    pub fn new(flag: &'static str, code: &str) -> Pool {
        Pool {
            flag,
            code: code.into(),
            idle: Mutex::new(Vec::new()),
            over_budget: AtomicU64::new(0),
        }
    }

    /// On how many messages the program did not run to its end: a budget ran out, no
    /// worker could answer, or it was not run because that had happened on
    /// [`MAX_OVER_BUDGET`] messages before.
    pub fn over_budget(&self) -> u64 {
        self.over_budget.load(Ordering::Relaxed)
    }

    /// Sends `request` (one line of JSON) to a worker and returns its answer (one line of
    /// JSON); an error says which budget ran out or why the worker could not answer.
    pub fn call(&self, request: &str) -> Result<String, String> {
        if self.over_budget.load(Ordering::Relaxed) >= MAX_OVER_BUDGET {
            self.over_budget.fetch_add(1, Ordering::Relaxed);
            return Err(format!(
                "{} was not run on this message: it ran past its budgets on {MAX_OVER_BUDGET} messages already",
                self.flag
            ));
        }
        let run = || self.call_blocking(request);
        let answer = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(run)
            }
            _ => run(),
        };
        if answer.is_err() {
            // A budget ran out, or no worker could answer: the program did not run to its
            // end on this message.
            self.over_budget.fetch_add(1, Ordering::Relaxed);
        }
        answer
    }

    fn call_blocking(&self, request: &str) -> Result<String, String> {
        let taken = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut worker = match taken {
            Some(w) => w,
            None => self.start()?,
        };
        let sent = worker
            .stdin
            .write_all(request.as_bytes())
            .and_then(|()| worker.stdin.write_all(b"\n"))
            .and_then(|()| worker.stdin.flush());
        let answer = match sent {
            Ok(()) => worker.lines.recv_timeout(TIME_BUDGET),
            Err(_) => Err(mpsc::RecvTimeoutError::Disconnected),
        };
        match answer {
            Ok(line) => {
                if let Ok(mut idle) = self.idle.lock() {
                    idle.push(worker);
                }
                Ok(line)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                drop(worker);
                Err(over(self.flag, "time budget"))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(self.died(worker)),
        }
    }

    /// Why `worker` stopped answering: a budget, or how it ended.
    fn died(&self, mut worker: Worker) -> String {
        let status = worker.ended();
        let said = worker.said();
        let budget = if said.contains("overflowed its stack") {
            Some("stack budget (it recursed too deeply)")
        } else if said.contains("memory allocation") || said.contains("unable to allocate") {
            Some("memory budget")
        } else if killed_for_cpu(&status) {
            Some("time budget")
        } else {
            None
        };
        match budget {
            Some(what) => over(self.flag, what),
            None => format!(
                "{}'s worker ended without an answer ({})",
                self.flag,
                match status {
                    Ok(s) => s.to_string(),
                    Err(e) => e.to_string(),
                }
            ),
        }
    }

    fn start(&self) -> Result<Worker, String> {
        let exe = match EXE.get() {
            Some(Ok(exe)) => exe,
            Some(Err(e)) => return Err(format!("cannot start {}'s worker: {e}", self.flag)),
            None => return Err(format!("{}'s worker is not enabled", self.flag)),
        };
        let cannot = |e: std::io::Error| format!("cannot start {}'s worker: {e}", self.flag);
        let mut cmd = Command::new(exe);
        cmd.arg(ARG)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(tz) = std::env::var_os("TZ") {
            cmd.env("TZ", tz);
        }
        let mut child = cmd.spawn().map_err(cannot)?;
        let (Some(mut stdin), Some(stdout), Some(mut err)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("cannot start {}'s worker: no pipes", self.flag));
        };
        let (tx, lines) = mpsc::channel();
        std::thread::Builder::new()
            .name("jq-worker-out".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(cannot)?;
        let stderr = std::thread::Builder::new()
            .name("jq-worker-err".into())
            .spawn(move || {
                // What the worker said when it died (Rust's "memory allocation of … failed",
                // "has overflowed its stack"): the first 4 KiB.
                let mut buf = Vec::new();
                let _ = (&mut err).take(4096).read_to_end(&mut buf);
                let _ = std::io::copy(&mut err, &mut std::io::sink());
                String::from_utf8_lossy(&buf).into_owned()
            })
            .map_err(cannot)?;
        let hello = serde_json::json!({"flag": self.flag, "code": &*self.code}).to_string();
        let mut worker = Worker {
            child,
            stdin: {
                stdin
                    .write_all(hello.as_bytes())
                    .and_then(|()| stdin.write_all(b"\n"))
                    .and_then(|()| stdin.flush())
                    .map_err(cannot)?;
                stdin
            },
            lines,
            stderr: Some(stderr),
        };
        // Starting is not the program's time: the worker compiles, then says it is ready.
        match worker.lines.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if line == "ready" => Ok(worker),
            Ok(other) => Err(format!(
                "{}'s worker did not start: {}",
                self.flag,
                crate::status::safe(&other)
            )),
            Err(_) => {
                let _ = worker.child.kill();
                let _ = worker.child.wait();
                Err(format!(
                    "{}'s worker did not start ({})",
                    self.flag,
                    crate::status::safe(worker.said().trim())
                ))
            }
        }
    }
}

impl Worker {
    /// How the worker ended: waited for 2 s at most (it has closed its stdout), then killed.
    fn ended(&mut self) -> std::io::Result<std::process::ExitStatus> {
        for _ in 0..200 {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(e),
            }
        }
        let _ = self.child.kill();
        self.child.wait()
    }

    /// What the worker said on stderr (call once it has ended).
    fn said(&mut self) -> String {
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

/// Whether the kernel ended the worker for its CPU time (`RLIMIT_CPU`).
fn killed_for_cpu(status: &std::io::Result<std::process::ExitStatus>) -> bool {
    #[cfg(unix)]
    return status
        .as_ref()
        .is_ok_and(|s| s.signal() == Some(libc::SIGXCPU));
    #[cfg(not(unix))]
    return {
        let _ = status;
        false
    };
}

/// What a worker does with its program: compiled once from `flag` and `code`, then one
/// answer line per request line.
pub type Handler = Box<dyn FnMut(&str) -> String>;

/// Makes the [`Handler`] for a program given as `flag`.
pub type Compile = fn(flag: &str, code: &str) -> Result<Handler, String>;

/// The worker's side: reads its program, says `ready`, then answers each request on its own
/// line, until stdin closes.
pub fn serve(compile: Compile) -> ExitCode {
    // SAFETY: setting a signal's disposition to "ignore" before any other thread exists.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = String::new();
    if input.read_line(&mut line).is_err() {
        return ExitCode::from(1);
    }
    let hello: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
    let flag = hello["flag"].as_str().unwrap_or("--where").to_owned();
    let code = hello["code"].as_str().unwrap_or_default().to_owned();
    let (requests, requests_rx) = mpsc::sync_channel::<String>(0);
    let (answers, answers_rx) = mpsc::sync_channel::<String>(0);
    // The program runs on a thread whose stack is the stack budget; a deeper recursion
    // overflows it, which ends the worker (and says so on stderr).
    let runner = std::thread::Builder::new()
        .name("jq".into())
        .stack_size(STACK_BUDGET)
        .spawn(move || {
            let mut handler = match compile(&flag, &code) {
                Ok(h) => {
                    let _ = answers.send("ready".into());
                    h
                }
                Err(e) => {
                    let _ = answers.send(e.replace('\n', " "));
                    return;
                }
            };
            for request in requests_rx {
                limit_cpu();
                let answer = handler(&request);
                if answers.send(answer).is_err() {
                    break;
                }
            }
        });
    let Ok(_runner) = runner else {
        return ExitCode::from(1);
    };
    let mut out = std::io::stdout().lock();
    let Ok(ready) = answers_rx.recv() else {
        return ExitCode::from(1);
    };
    // The memory budget counts from what the worker holds now (the binary's data, the
    // program, the runner's stack).
    limit_memory();
    if writeln!(out, "{ready}").and_then(|()| out.flush()).is_err() || ready != "ready" {
        return ExitCode::from(1);
    }
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return ExitCode::SUCCESS,
            Ok(_) => {}
        }
        if requests.send(line.trim_end().to_owned()).is_err() {
            return ExitCode::from(1);
        }
        let Ok(answer) = answers_rx.recv() else {
            return ExitCode::from(1);
        };
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::from(1);
        }
    }
}

/// Caps the worker's data (heap, anonymous mappings) at what it holds now plus
/// [`MEMORY_BUDGET`] (Linux: what it holds is read from /proc; elsewhere only the time
/// budget holds).
#[cfg(not(unix))]
fn limit_memory() {}

#[cfg(not(unix))]
fn limit_cpu() {}

/// Caps the worker's data (heap, anonymous mappings) at what it holds now plus
/// [`MEMORY_BUDGET`].
#[cfg(unix)]
fn limit_memory() {
    let held = fs_err::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmData:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024);
    let cap = held.saturating_add(MEMORY_BUDGET);
    let limit = libc::rlimit {
        rlim_cur: cap as libc::rlim_t,
        rlim_max: cap as libc::rlim_t,
    };
    // SAFETY: setrlimit with a valid, initialised struct.
    unsafe {
        libc::setrlimit(libc::RLIMIT_DATA, &limit);
    }
}

/// A backstop for the parent's time budget, in the kernel: this message's CPU time at most
/// the budget and a second more (SIGXCPU ends the worker), so a worker whose parent is gone
/// does not run on.
#[cfg(unix)]
fn limit_cpu() {
    // SAFETY: getrusage and setrlimit with valid, initialised structs.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return;
        }
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_CPU, &mut limit) != 0 {
            return;
        }
        let used = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) as u64 + 1;
        let soft = (used + TIME_BUDGET.as_secs().max(1) + 1) as libc::rlim_t;
        limit.rlim_cur = soft.min(limit.rlim_max);
        libc::setrlimit(libc::RLIMIT_CPU, &limit);
    }
}
