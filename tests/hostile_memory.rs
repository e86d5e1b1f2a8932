//! Memory bounds against hostile input (issue 14): an endless answer from a server and an
//! endless spec file. In a test binary of their own: a child's peak RSS as wait4 reports it
//! includes what it inherited from this process at fork, so this process stays small.

mod support;

use std::io::Write;

use support::Output;
use support::fake::{error_lines, rabbit_workspace, raw};

/// Runs `cmd` and returns its output with its own peak resident set in MiB (wait4, so the
/// figure is this child's alone, whatever other tests run at the same time).
// Reaped with wait4 (for its rusage), not Child::wait.
#[allow(clippy::zombie_processes)]
fn measured(cmd: &mut std::process::Command) -> (Output, i64) {
    use std::io::Read;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("dlqctl starts");
    let mut out_pipe = child.stdout.take().expect("stdout");
    let mut err_pipe = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let pid = i32::try_from(child.id()).expect("pid");
    let mut status = 0;
    // SAFETY: wait4 writes only the status and the rusage it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a child of this process, valid pointers.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4");
    let out = Output {
        code: libc::WEXITSTATUS(status),
        stdout: out_t.join().expect("stdout thread"),
        stderr: err_t.join().expect("stderr thread"),
    };
    (out, usage.ru_maxrss / 1024)
}

#[test]
fn an_endless_answer_is_refused_at_the_cap_without_filling_memory() {
    // Chunked and never-ending: before the cap, plan read it all (3.8 GB in 13 s, then
    // aborted). Bounded here at 256 MiB on the server side, for each of the reads a plan makes
    // at once (queues, policies, exchanges, bindings).
    let server = raw(|s| {
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        let chunk = vec![b' '; 1024 * 1024];
        for _ in 0..256 {
            let head = format!("{:x}\r\n", chunk.len());
            if s.write_all(head.as_bytes()).is_err()
                || s.write_all(&chunk).is_err()
                || s.write_all(b"\r\n").is_err()
            {
                return;
            }
        }
        let _ = s.write_all(b"0\r\n\r\n");
    });
    let dir = tempfile::tempdir().expect("tempdir");
    rabbit_workspace(dir.path(), &server.url);
    let (out, rss_mib) =
        measured(support::dlqctl_local(dir.path()).args(["plan", "--color", "never", "."]));
    out.exits(1);
    let errors = error_lines(&out.stderr);
    assert_eq!(
        errors.len(),
        1,
        "one line naming the target:\n{}",
        out.stderr
    );
    assert!(
        errors[0].contains("target `fake`") && errors[0].contains("larger than 64 MiB"),
        "{}",
        errors[0]
    );
    // Every read stopped at the cap (64 MiB each, at most 4 at once): dlqctl never held a
    // whole answer (without the cap: over 1 GiB).
    assert!(rss_mib < 400, "peak RSS {rss_mib} MiB");
}

#[test]
fn lint_of_an_endless_file_stops_at_the_size_cap() {
    let (out, rss_mib) =
        measured(support::dlqctl().args(["lint", "--color", "never", "/dev/zero"]));
    out.exits(1);
    out.assert_stdout_contains("[file/too-large]");
    assert!(rss_mib < 64, "peak RSS {rss_mib} MiB");
}
