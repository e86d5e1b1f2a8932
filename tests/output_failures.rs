//! A failed write of the output is a failure (issue 31, finding 11): the real binary writing
//! to /dev/full (every write fails with ENOSPC) says so in one line on stderr and exits
//! non-zero; a redrive finishes first, says on stderr what it moved, and loses nothing. A
//! closed pipe (`| head`) stays a quiet, successful end.

mod support;

use std::fs::File;
use std::process::Stdio;

use lapin::BasicProperties;
use support::{block, output, rabbit};

fn dev_full() -> File {
    File::options()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full")
}

/// Offline: a command whose whole job is its output.
#[test]
fn completions_written_to_dev_full_fail_in_one_line() {
    let o = output(
        support::dlqctl()
            .args(["completions", "bash"])
            .stdout(dev_full()),
    );
    assert_ne!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "one line\n{}", o.stderr);
    assert!(
        o.stderr.contains("cannot write the output to stdout")
            && o.stderr.contains("No space left"),
        "{}",
        o.stderr
    );
}

/// A closed pipe ends the process quietly and successfully, as before.
#[test]
fn a_closed_pipe_stays_quiet_and_successful() {
    let mut child = support::dlqctl()
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("ends");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

fn put(dlq: &str, n: usize) {
    block(async {
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        for i in 0..n {
            rabbit::publish_on(
                &ch,
                "",
                dlq,
                format!("m{i}").as_bytes(),
                BasicProperties::default(),
            )
            .await;
        }
        let _ = conn.close(200, "done".into()).await;
    });
}

/// `status` in every format, to /dev/full: exit 1, one line.
#[test]
fn status_written_to_dev_full_fails_in_one_line_in_every_format() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    for format in ["human", "json", "markdown", "openmetrics"] {
        let o = output(
            support::dlqctl_local(f.path())
                .args(["status", "channel.yaml", "--format", format])
                .stdout(dev_full()),
        );
        assert_eq!(o.code, 1, "{format}: {}", o.stderr);
        assert_eq!(
            o.stderr.lines().count(),
            1,
            "{format}: one line\n{}",
            o.stderr
        );
        o.assert_stderr_contains("cannot write the output to stdout");
    }
}

/// `redrive --format json > /dev/full`: the ten messages are moved (none lost: all ten read
/// back from the main queue by a third-party client), the audit record could not be written,
/// and stderr says so with the counts; exit non-zero.
#[test]
fn a_redrive_whose_audit_record_cannot_be_written_says_what_it_moved_and_fails() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    put(&dlq, 10);
    rabbit::wait_for_messages(&dlq, 10);
    let o = output(
        support::dlqctl_local(f.path())
            .args([
                "redrive",
                f.channel.as_str(),
                "channel.yaml",
                "--yes",
                "--format",
                "json",
            ])
            .stdout(dev_full()),
    );
    assert_ne!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("cannot write the output to stdout") && o.stderr.contains("10 moved"),
        "{}",
        o.stderr
    );
    let mut bodies: Vec<String> = block(rabbit::take_all(&main))
        .into_iter()
        .map(|(b, _)| String::from_utf8_lossy(&b).into_owned())
        .collect();
    bodies.sort();
    let mut want: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    want.sort();
    assert_eq!(bodies, want, "every message moved, none lost");
    assert!(block(rabbit::take_all(&dlq)).is_empty());
}
