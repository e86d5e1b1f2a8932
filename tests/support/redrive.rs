//! How the redrive tests drive `dlqctl redrive` (and `archive`, its sibling) on a workspace,
//! whatever the backend: a run whose JSON report is read, a run in the background (to kill, interrupt or race), the wait
//! for its end, and the kill part-way once it has moved some. One copy, so that every redrive
//! test file runs the binary the same way and a change to the report reaches them all.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::workspace::Workspace;

/// `redrive CHANNEL channel.yaml --format json EXTRA`: exit code, report and stderr. Panics
/// (showing both streams) when stdout is not a JSON report.
pub fn redrive(ws: &Workspace, extra: &[&str]) -> (i32, Value, String) {
    run_json(ws, "redrive", extra)
}

/// `archive CHANNEL channel.yaml --format json EXTRA`, as [`redrive`].
pub fn archive(ws: &Workspace, extra: &[&str]) -> (i32, Value, String) {
    run_json(ws, "archive", extra)
}

/// [`archive`], which must exit 0: its report.
#[track_caller]
pub fn archive_ok(ws: &Workspace, extra: &[&str]) -> Value {
    let (code, doc, err) = archive(ws, extra);
    assert_eq!(code, 0, "{doc}\n{err}");
    doc
}

/// `VERB CHANNEL channel.yaml --format json EXTRA`: exit code, JSON report and stderr.
fn run_json(ws: &Workspace, verb: &str, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec![
        verb,
        ws.channel.as_str(),
        "channel.yaml",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = ws.run(&args);
    let doc = out.json(&format!("the {verb} report"));
    (out.code, doc, out.stderr)
}

/// `redrive CHANNEL channel.yaml --yes [--rate R]` in the background, output discarded.
pub fn spawn_quiet(ws: &Workspace, rate: Option<&str>) -> Child {
    let mut args = vec!["redrive", ws.channel.as_str(), "channel.yaml", "--yes"];
    if let Some(r) = rate {
        args.extend(["--rate", r]);
    }
    ws.command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redrive starts")
}

/// `redrive CHANNEL channel.yaml --yes --format json EXTRA` in the background, stdout and
/// stderr piped, for [`finish`].
pub fn spawn_json(ws: &Workspace, extra: &[&str]) -> Child {
    let mut args = vec![
        "redrive",
        ws.channel.as_str(),
        "channel.yaml",
        "--yes",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    ws.command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redrive starts")
}

/// Waits (bounded) for a run from [`spawn_json`] to end: its exit code, report and stderr.
pub fn finish(mut child: Child, limit: Duration) -> (i32, Value, String) {
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the redrive did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), doc, stderr)
}

/// Kills a background run (SIGKILL) once `moved_some()` holds, checked every `every`, or
/// when `limit` has passed (the caller then finds it did not move part-way); waits for the
/// process to be gone and returns when that was.
pub fn kill_part_way(
    run: &mut Child,
    limit: Duration,
    every: Duration,
    moved_some: impl Fn() -> bool,
) -> Instant {
    let deadline = Instant::now() + limit;
    while !moved_some() && Instant::now() < deadline {
        std::thread::sleep(every);
    }
    let _ = run.kill();
    let _ = run.wait();
    Instant::now()
}

/// [`redrive`] that must succeed (exit 0, showing the report and stderr when not): the report.
#[track_caller]
pub fn redrive_ok(ws: &Workspace, extra: &[&str]) -> Value {
    let (code, doc, err) = redrive(ws, extra);
    assert_eq!(code, 0, "{doc}\n{err}");
    doc
}
