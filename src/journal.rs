//! The audit journal (`--audit-log FILE`): one JSON line per run appended to a file that
//! people and tools keep, so that who moved which dead letters, why and when outlives the
//! terminal the run printed to. `redrive` and `archive` append their reports, and a refused
//! run its refusal (their `kind` tells them apart), through the same [`append`].
//!
//! [`AuditTo`] reads where `operations.auditTo` sends the same records (engine/audit.rs
//! delivers them).
//!
//! A line is only as good as its landing: the file is opened `O_APPEND` (so concurrent runs
//! never overwrite each other), the line is written in one `write` or not at all, fsynced,
//! then read back from where it landed and compared. Any failure is an error naming the
//! file: a run whose record did not land must fail loudly, whatever it moved.

use std::fs::OpenOptions;
use std::io::{Seek, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::archive::Place;

/// Why a record did not land in the journal.
#[derive(Debug, thiserror::Error)]
#[error("audit log {}: {what}", path.display())]
pub struct JournalError {
    pub path: PathBuf,
    pub what: String,
}

/// Appends `record` as one JSON line to `path` (created `0600` if absent), fsynced and
/// read back.
pub fn append(path: &Path, record: &impl Serialize) -> Result<(), JournalError> {
    let fail = |what: String| JournalError {
        path: path.to_owned(),
        what,
    };
    let mut line =
        serde_json::to_vec(record).map_err(|e| fail(format!("cannot encode the record: {e}")))?;
    line.push(b'\n');
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| fail(format!("cannot open for appending: {e}")))?;
    // One write: a line written in two could interleave with another run's.
    let written = file
        .write(&line)
        .map_err(|e| fail(format!("cannot write the record: {e}")))?;
    if written != line.len() {
        return Err(fail(format!(
            "only {written} of the record's {} bytes were written (the file now ends in a partial line)",
            line.len()
        )));
    }
    file.sync_all()
        .map_err(|e| fail(format!("cannot fsync the record: {e}")))?;
    // With O_APPEND the offset after the write is the end of what this write appended.
    let end = file
        .stream_position()
        .map_err(|e| fail(format!("cannot tell where the record landed: {e}")))?;
    let start = end
        .checked_sub(line.len() as u64)
        .ok_or_else(|| fail("the file is shorter than the record just written".to_owned()))?;
    let mut back = vec![0u8; line.len()];
    let reader = std::fs::File::open(path)
        .map_err(|e| fail(format!("cannot open to check the record: {e}")))?;
    reader
        .read_exact_at(&mut back, start)
        .map_err(|e| fail(format!("cannot read the record back: {e}")))?;
    if back != line {
        return Err(fail(format!(
            "the record read back at byte {start} is not the one written"
        )));
    }
    Ok(())
}

/// Where `operations.auditTo` sends records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditTo {
    /// `s3://bucket/prefix` or an absolute folder.
    Place(Place),
    /// `queue:NAME` (SQS, RabbitMQ) or `topic:NAME` (Kafka, Pub/Sub): on the target itself.
    Channel(String),
}

impl AuditTo {
    /// Reads `auditTo` for a target of `backend` (`sqs`, `rabbitmq`, `kafka`, `pubsub`).
    pub fn parse(to: &str, backend: &str) -> Result<AuditTo, String> {
        let named = |prefix: &str, rest: &str, fits: bool| {
            if rest.trim().is_empty() {
                Err(format!("`{to}`: no name after `{prefix}:`"))
            } else if !fits {
                Err(format!(
                    "`{to}`: a {backend} target has {}, not {prefix}s",
                    if matches!(backend, "kafka" | "pubsub") {
                        "topics (`topic:NAME`)"
                    } else {
                        "queues (`queue:NAME`)"
                    }
                ))
            } else {
                Ok(AuditTo::Channel(rest.trim().to_owned()))
            }
        };
        if let Some(rest) = to.strip_prefix("queue:") {
            return named("queue", rest, matches!(backend, "sqs" | "rabbitmq"));
        }
        if let Some(rest) = to.strip_prefix("topic:") {
            return named("topic", rest, matches!(backend, "kafka" | "pubsub"));
        }
        match Place::parse(to)? {
            Place::Dir(p) if !p.is_absolute() => Err(format!(
                "`{to}` is a relative folder, which would be relative to wherever each run starts"
            )),
            place => Ok(AuditTo::Place(place)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_append_is_one_whole_line_after_the_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        append(&path, &serde_json::json!({"n": 1})).expect("first");
        append(&path, &serde_json::json!({"n": 2, "text": "a\nb"})).expect("second");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text, "{\"n\":1}\n{\"n\":2,\"text\":\"a\\nb\"}\n");
    }

    #[test]
    fn a_full_disk_is_an_error_naming_the_file() {
        let e = append(Path::new("/dev/full"), &serde_json::json!({"n": 1}))
            .err()
            .map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.starts_with("audit log /dev/full: cannot write")),
            "{e:?}"
        );
    }

    #[test]
    fn a_folder_that_does_not_exist_is_an_error_naming_the_file() {
        let e = append(Path::new("/nonexistent/dir/audit.jsonl"), &1)
            .err()
            .map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("/nonexistent/dir/audit.jsonl: cannot open")),
            "{e:?}"
        );
    }
}

#[cfg(test)]
mod audit_to_tests {
    use super::*;

    #[test]
    fn audit_to_is_s3_a_folder_or_a_queue_or_topic_of_the_backend() {
        assert!(matches!(
            AuditTo::parse("s3://audit/dlqctl", "sqs"),
            Ok(AuditTo::Place(Place::S3 { .. }))
        ));
        assert!(matches!(
            AuditTo::parse("/var/log/dlqctl", "kafka"),
            Ok(AuditTo::Place(Place::Dir(_)))
        ));
        assert_eq!(
            AuditTo::parse("topic:dlqctl-audit", "kafka"),
            Ok(AuditTo::Channel("dlqctl-audit".into()))
        );
        assert_eq!(
            AuditTo::parse("queue:ops.audit", "rabbitmq"),
            Ok(AuditTo::Channel("ops.audit".into()))
        );
        for (to, backend) in [
            ("queue:x", "kafka"),
            ("topic:x", "sqs"),
            ("queue:", "sqs"),
            ("audit-logs", "sqs"),
            ("s3:///x", "sqs"),
            ("https://example.com/x", "sqs"),
        ] {
            assert!(AuditTo::parse(to, backend).is_err(), "{to} on {backend}");
        }
    }
}
