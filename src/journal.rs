//! The audit journal (`--audit-log FILE`): one JSON line per run appended to a file that
//! people and tools keep, so that who moved which dead letters, why and when outlives the
//! terminal the run printed to. `redrive` and `archive` append their reports, and a refused
//! run its refusal (their `kind` tells them apart), through the same [`append`].
//!
//! [`AuditTo`] reads where `operations.auditTo` sends the same records (engine/audit.rs
//! delivers them).
//!
//! Tamper evidence (issue 52, L4): each record carries `prev`, the sha256 (hex) of the line
//! before it in the file ([`GENESIS`] for the first), so that a line changed, removed or
//! inserted breaks the chain at the next one; and, when the target names a key
//! (`operations.hmacKeyEnv`), `hmac`, the HMAC-SHA256 of the line as it would be without
//! it, which nobody without the key can recompute. [`verify`] checks both and names the
//! first line that fails. Without a key, the chain shows damage and careless edits only:
//! whoever can write the file can recompute every `prev` after an edit. Appends take an
//! exclusive lock on the file, so that two runs never chain to the same line. The records'
//! other fields are as they were; these two are added last.
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
use crate::integrity::Key;

/// Why a record did not land in the journal.
#[derive(Debug, thiserror::Error)]
#[error("audit log {}: {what}", path.display())]
pub struct JournalError {
    pub path: PathBuf,
    pub what: String,
}

/// The `prev` of a journal's first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Appends `record` as one JSON line to `path` (created `0600` if absent), fsynced and
/// read back, chained to the line before it (`prev`).
pub fn append(path: &Path, record: &impl Serialize) -> Result<(), JournalError> {
    append_keyed(path, record, None)
}

/// [`append`], with an `hmac` of the line when the target names a key.
pub fn append_keyed(
    path: &Path,
    record: &impl Serialize,
    key: Option<&Key>,
) -> Result<(), JournalError> {
    let fail = |what: String| JournalError {
        path: path.to_owned(),
        what,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| fail(format!("cannot open for appending: {e}")))?;
    // Held until `file` is dropped: no other run appends between reading the last line and
    // writing this one.
    file.lock()
        .map_err(|e| fail(format!("cannot lock the file: {e}")))?;
    let prev = last_line(&file)
        .map_err(|e| fail(format!("cannot read the last record: {e}")))?
        .map_or_else(|| GENESIS.to_owned(), |l| crate::archive::sha256_hex(&l));
    let mut value =
        serde_json::to_value(record).map_err(|e| fail(format!("cannot encode the record: {e}")))?;
    let mut line = match &mut value {
        serde_json::Value::Object(map) => {
            map.insert("prev".to_owned(), prev.into());
            let mut line = serde_json::to_vec(&value)
                .map_err(|e| fail(format!("cannot encode the record: {e}")))?;
            if let Some(k) = key {
                // The line without its HMAC is what the HMAC covers ([`unsigned`]).
                let tag = k.sign(&line);
                line.pop();
                line.extend_from_slice(format!(",\"{HMAC}\":\"{tag}\"}}").as_bytes());
            }
            line
        }
        // Not a record (tests): as it is.
        other => {
            serde_json::to_vec(other).map_err(|e| fail(format!("cannot encode the record: {e}")))?
        }
    };
    line.push(b'\n');
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

/// The field that holds a record's HMAC: always the last one of its line.
const HMAC: &str = "hmac";

/// The last line of `file` (without its newline), if it has any bytes.
fn last_line(file: &std::fs::File) -> std::io::Result<Option<Vec<u8>>> {
    const CHUNK: u64 = 64 * 1024;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, len - 1)?;
    let end = if last[0] == b'\n' { len - 1 } else { len };
    let mut pos = end;
    let mut tail: Vec<u8> = Vec::new();
    while pos > 0 {
        let n = CHUNK.min(pos);
        let mut chunk = vec![0u8; n as usize];
        file.read_exact_at(&mut chunk, pos - n)?;
        pos -= n;
        if let Some(i) = chunk.iter().rposition(|b| *b == b'\n') {
            chunk.drain(..=i);
            chunk.extend_from_slice(&tail);
            return Ok(Some(chunk));
        }
        chunk.extend_from_slice(&tail);
        tail = chunk;
    }
    Ok(Some(tail))
}

/// The line as it was before its HMAC was added, and the HMAC, when it ends with one.
fn unsigned(line: &[u8]) -> Option<(Vec<u8>, &str)> {
    // `,"hmac":"<64 hex>"}`
    let suffix = 2 + HMAC.len() + 3 + 64 + 2;
    if line.len() < suffix + 1 {
        return None;
    }
    let (head, tail) = line.split_at(line.len() - suffix);
    let tail = std::str::from_utf8(tail).ok()?;
    let tag = tail
        .strip_prefix(&format!(",\"{HMAC}\":\""))?
        .strip_suffix("\"}")?;
    let mut head = head.to_vec();
    head.push(b'}');
    Some((head, tag))
}

/// What [`verify`] found in a journal that holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    /// Records read.
    pub records: u64,
    /// Records before the chain started (written by a dlqctl before issue 52's L4): not
    /// checked.
    pub unchained: u64,
    /// Records whose HMAC was checked (with a key).
    pub signed: u64,
}

/// The first line of a journal that does not verify, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// From 1.
    pub line: u64,
    pub why: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.why)
    }
}

/// Checks a journal's chain (each `prev` is the sha256 of the line before) and, with `key`,
/// every chained record's HMAC; the first line that fails is named. Records before the
/// first chained one (an older dlqctl's) are counted, not checked. A chain shows a line
/// changed, removed or inserted, not lines cut from the end; without a key, not a change
/// made with every later `prev` recomputed.
pub fn verify(text: &[u8], key: Option<&Key>) -> Result<Verified, Broken> {
    let mut out = Verified::default();
    let mut before: Option<&[u8]> = None;
    let mut chained = false;
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    if body.is_empty() {
        return Ok(out);
    }
    for (i, line) in body.split(|b| *b == b'\n').enumerate() {
        let n = i as u64 + 1;
        let broken = |why: String| Broken { line: n, why };
        let v: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| broken(format!("not a JSON record: {e}")))?;
        out.records += 1;
        match v.get("prev") {
            None if !chained => out.unchained += 1,
            None => {
                return Err(broken(
                    "no `prev` after chained records: a line inserted, or written by hand".into(),
                ));
            }
            Some(prev) => {
                chained = true;
                let want = before.map_or_else(|| GENESIS.to_owned(), crate::archive::sha256_hex);
                if prev.as_str() != Some(want.as_str()) {
                    return Err(broken(if n == 1 {
                        "its `prev` is not the first record's: lines were removed before it".into()
                    } else {
                        format!(
                            "its `prev` is not the sha256 of line {}: line {} was changed, or lines were removed or inserted between them",
                            n - 1,
                            n - 1
                        )
                    }));
                }
                if let Some(k) = key {
                    let Some((signed, tag)) = unsigned(line) else {
                        return Err(broken(
                            "no `hmac`, and a key was given: the record was written without the key, or changed".into(),
                        ));
                    };
                    if !k.verifies(&signed, tag) {
                        return Err(broken(
                            "its `hmac` does not verify with the key: the record was changed, or written with another key".into(),
                        ));
                    }
                    out.signed += 1;
                }
            }
        }
        before = Some(line);
    }
    Ok(out)
}

/// [`verify`] of the journal at `path`.
pub fn verify_file(path: &Path, key: Option<&Key>) -> Result<Verified, JournalError> {
    let fail = |what: String| JournalError {
        path: path.to_owned(),
        what,
    };
    let text = std::fs::read(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    verify(&text, key).map_err(|b| fail(b.to_string()))
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
        let first = format!("{{\"n\":1,\"prev\":\"{GENESIS}\"}}");
        let second = format!(
            "{{\"n\":2,\"text\":\"a\\nb\",\"prev\":\"{}\"}}",
            crate::archive::sha256_hex(first.as_bytes())
        );
        assert_eq!(text, format!("{first}\n{second}\n"));
        assert_eq!(verify_file(&path, None).expect("verifies").records, 2);
    }

    /// Issue 52, L4: a journal whose middle line was edited fails verification naming the
    /// line: without a key at the next line's `prev`, with one at the line's own HMAC (and
    /// then even with every later `prev` recomputed); an older journal's lines before the
    /// chain are counted, not checked.
    #[test]
    fn a_journal_whose_middle_line_was_edited_fails_verification_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = Key::new(b"k");
        for signed in [None, Some(&key)] {
            let path = dir.path().join(format!("audit-{}.jsonl", signed.is_some()));
            std::fs::write(&path, "{\"kind\":\"old\"}\n").expect("an older record");
            for n in 1..=3 {
                append_keyed(
                    &path,
                    &serde_json::json!({"moved": n, "ids": ["a"]}),
                    signed,
                )
                .expect("appends");
            }
            let ok = verify_file(&path, signed).expect("verifies");
            assert_eq!(
                (ok.records, ok.unchained, ok.signed),
                (4, 1, if signed.is_some() { 3 } else { 0 })
            );
            let text = std::fs::read_to_string(&path).expect("read");
            let edited = text.replacen("\"moved\":2", "\"moved\":0", 1);
            assert_ne!(edited, text);
            let e = verify(edited.as_bytes(), signed).expect_err("broken");
            if signed.is_some() {
                assert_eq!(e.line, 3, "{e}");
                assert!(e.why.contains("hmac"), "{e}");
                // Every later `prev` recomputed: the HMAC still names the line.
                let mut lines: Vec<String> = edited.lines().map(str::to_owned).collect();
                let prev = crate::archive::sha256_hex(lines[2].as_bytes());
                lines[3] = lines[3].replacen(
                    &crate::archive::sha256_hex(text.lines().nth(2).expect("3").as_bytes()),
                    &prev,
                    1,
                );
                let e = verify(lines.join("\n").as_bytes(), signed).expect_err("broken");
                assert_eq!(e.line, 3, "{e}");
            } else {
                assert_eq!(e.line, 4, "{e}");
                assert!(e.to_string().contains("line 3 was changed"), "{e}");
            }
            // A line removed breaks the chain at the next one.
            let mut lines: Vec<&str> = text.lines().collect();
            lines.remove(2);
            let e = verify(lines.join("\n").as_bytes(), signed).expect_err("broken");
            assert_eq!(e.line, 3, "{e}");
        }
        // Signed records read without the key: the chain is checked, the HMACs not.
        let path = dir.path().join("audit-true.jsonl");
        assert_eq!(verify_file(&path, None).expect("chain").signed, 0);
        // Unsigned records with a key: refused.
        let path = dir.path().join("audit-false.jsonl");
        let e = verify_file(&path, Some(&key)).expect_err("no hmac");
        assert!(e.to_string().contains("line 2: no `hmac`"), "{e}");
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
