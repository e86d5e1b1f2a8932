//! `dlqctl redrive` handing a whole SQS DLQ to SQS's own StartMessageMoveTask (issue 16),
//! against responses written from the SQS API reference (tests/fixtures/sqs-move-task/):
//! moto 5.2.5, the local SQS, does not implement move tasks (it answers HTTP 500), so a fake
//! SQS endpoint on 127.0.0.1 speaks the AWS JSON protocol for the calls dlqctl makes and
//! records them. What these tests show: the task is used only with `--native` and only where
//! it fits (a whole standard queue back to its source), with the destination's ARN and
//! `--rate`; progress and the final count come from ListMessageMoveTasks, which names a task by
//! its handle only while it runs; Ctrl-C cancels the task; a failed task is one clear error; a
//! task already running refuses any redrive, naming it.
//! The live path (moto, no move tasks: dlqctl's own mover) is tests/redrive.rs; the move task
//! itself runs live against ElasticMQ in tests/redrive_sqs_elasticmq.rs.

mod support;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::fake::{FakeApi, Request};

const ACCOUNT: &str = "000000000000";
const HANDLE: &str = "AQEBmovetaskhandle1";

/// How ListMessageMoveTasks answers before and after dlqctl starts a task.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// No task before; after the start: RUNNING once, then COMPLETED.
    Completes,
    /// After the start: RUNNING until CancelMessageMoveTask, then CANCELLED.
    RunsUntilCancelled,
    /// After the start: RUNNING once, then FAILED.
    Fails,
    /// A task started elsewhere is RUNNING before dlqctl asks.
    AlreadyRunning,
    /// No move tasks here: ListMessageMoveTasks answers HTTP 500, as moto 5.2.5 does.
    Unsupported,
}

#[derive(Default)]
struct State {
    /// Operations in the order they came (`StartMessageMoveTask`, ...).
    calls: Vec<String>,
    start: Option<Value>,
    tags: BTreeMap<String, String>,
    polls_after_start: u32,
    cancelled: bool,
    done: bool,
}

struct Sqs {
    api: FakeApi,
    state: Arc<Mutex<State>>,
}

fn responses() -> Value {
    let text = std::fs::read_to_string(
        support::root().join("tests/fixtures/sqs-move-task/responses.json"),
    )
    .expect("responses fixture");
    serde_json::from_str(&text).expect("responses are JSON")
}

fn arn(queue: &str) -> String {
    format!("arn:aws:sqs:us-east-1:{ACCOUNT}:{queue}")
}

/// A recorded response with the ARNs, the handle and the start time (now) filled in.
fn recorded(all: &Value, key: &str) -> String {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis();
    all[key]
        .to_string()
        .replace("{dlq_arn}", &arn("movetask-dlq"))
        .replace("{main_arn}", &arn("movetask"))
        .replace("{handle}", HANDLE)
        .replace(
            "\"StartedTimestamp\":1764547200000",
            &format!("\"StartedTimestamp\":{now_ms}"),
        )
}

fn start(script: Script) -> Sqs {
    let state: Arc<Mutex<State>> = Arc::default();
    let st = Arc::clone(&state);
    let all = responses();
    let url_of = Arc::new(Mutex::new(String::new()));
    let url_for = Arc::clone(&url_of);
    let api = FakeApi::start_with(move |r: &Request| {
        let op = r
            .header("x-amz-target")
            .and_then(|t| t.strip_prefix("amazonsqs."))
            .unwrap_or_default()
            .to_owned();
        let body: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
        let mut s = st.lock().expect("state");
        s.calls.push(op.clone());
        let base = url_for.lock().expect("url").clone();
        let queue_url = |q: &str| format!("{base}/{ACCOUNT}/{q}");
        let queue_of = |v: &Value| {
            v["QueueUrl"]
                .as_str()
                .and_then(|u| u.rsplit('/').next())
                .unwrap_or_default()
                .to_owned()
        };
        let ok = |v: String| (200, v);
        match op.as_str() {
            "getqueueurl" => {
                let q = body["QueueName"].as_str().unwrap_or_default();
                if q == "movetask" || q == "movetask-dlq" {
                    ok(json!({"QueueUrl": queue_url(q)}).to_string())
                } else {
                    (
                        400,
                        json!({"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "The specified queue does not exist."}).to_string(),
                    )
                }
            }
            "listqueues" => ok(json!({"QueueUrls": [queue_url("movetask"), queue_url("movetask-dlq")]}).to_string()),
            "getqueueattributes" => {
                let q = queue_of(&body);
                let depth = if q == "movetask-dlq" && !s.done { "5" } else { "0" };
                let mut a = json!({
                    "QueueArn": arn(&q),
                    "ApproximateNumberOfMessages": depth,
                    "ApproximateNumberOfMessagesNotVisible": "0",
                    "ApproximateNumberOfMessagesDelayed": "0",
                    "MessageRetentionPeriod": "1209600",
                    "VisibilityTimeout": "30",
                    "DelaySeconds": "0",
                    "MaximumMessageSize": "262144",
                    "ReceiveMessageWaitTimeSeconds": "0",
                    "CreatedTimestamp": "1764547200",
                });
                if q == "movetask" {
                    a["RedrivePolicy"] = json!(format!(
                        "{{\"deadLetterTargetArn\":\"{}\",\"maxReceiveCount\":3}}",
                        arn("movetask-dlq")
                    ));
                }
                ok(json!({"Attributes": a}).to_string())
            }
            "listqueuetags" => ok(json!({"Tags": s.tags}).to_string()),
            "tagqueue" => {
                if let Some(t) = body["Tags"].as_object() {
                    for (k, v) in t {
                        s.tags.insert(k.clone(), v.as_str().unwrap_or_default().to_owned());
                    }
                }
                ok("{}".into())
            }
            "untagqueue" => {
                for k in body["TagKeys"].as_array().into_iter().flatten() {
                    s.tags.remove(k.as_str().unwrap_or_default());
                }
                ok("{}".into())
            }
            "receivemessage" => ok(json!({"Messages": []}).to_string()),
            "changemessagevisibilitybatch" => ok(json!({"Successful": [], "Failed": []}).to_string()),
            "startmessagemovetask" => {
                s.start = Some(body);
                ok(recorded(&all, "StartMessageMoveTask"))
            }
            "cancelmessagemovetask" => {
                s.cancelled = true;
                ok(recorded(&all, "CancelMessageMoveTask"))
            }
            "listmessagemovetasks" if script == Script::Unsupported => {
                (500, "<html><title>500 Internal Server Error</title></html>".into())
            }
            "listmessagemovetasks" => {
                if s.start.is_none() {
                    let key = if script == Script::AlreadyRunning {
                        "ListMessageMoveTasks.running"
                    } else {
                        "ListMessageMoveTasks.none"
                    };
                    return ok(recorded(&all, key));
                }
                s.polls_after_start += 1;
                let key = match script {
                    Script::Completes if s.polls_after_start >= 2 => {
                        s.done = true;
                        "ListMessageMoveTasks.completed"
                    }
                    Script::Fails if s.polls_after_start >= 2 => "ListMessageMoveTasks.failed",
                    Script::RunsUntilCancelled if s.cancelled => "ListMessageMoveTasks.cancelled",
                    _ => "ListMessageMoveTasks.running",
                };
                ok(recorded(&all, key))
            }
            other => (
                400,
                json!({"__type": "com.amazonaws.sqs#UnsupportedOperation", "message": format!("the fake does not answer {other}")}).to_string(),
            ),
        }
    });
    *url_of.lock().expect("url") = api.url.clone();
    Sqs { api, state }
}

fn workspace(url: &str) -> tempfile::TempDir {
    support::sqs::movetask_workspace("fake", url)
}

fn redrive(dir: &std::path::Path, extra: &[&str]) -> Command {
    support::sqs::movetask_redrive(dir, extra)
}

/// A fake SQS playing `script`, a workspace on it, and `redrive EXTRA` run there.
fn run(script: Script, extra: &[&str]) -> (Sqs, tempfile::TempDir, support::Output) {
    let sqs = start(script);
    let ws = workspace(&sqs.api.url);
    let out = support::output(&mut redrive(ws.path(), extra));
    (sqs, ws, out)
}

fn calls(sqs: &Sqs) -> Vec<String> {
    sqs.state.lock().expect("state").calls.clone()
}

#[test]
fn a_whole_standard_queue_goes_back_through_the_sqs_move_task_at_the_given_rate() {
    let (sqs, _ws, out) = run(Script::Completes, &["--native", "--rate", "50"]);
    out.ok();
    let report: Value = serde_json::from_str(&out.stdout).expect("JSON report");
    assert_eq!(report["moved"], 5, "{report}");
    assert_eq!(report["movedBy"], "sqs:StartMessageMoveTask", "{report}");
    assert_eq!(report["leftInDeadLetter"], 0, "{report}");
    let start = sqs
        .state
        .lock()
        .expect("state")
        .start
        .clone()
        .expect("started");
    assert_eq!(start["SourceArn"], arn("movetask-dlq"));
    assert_eq!(start["DestinationArn"], arn("movetask"));
    assert_eq!(start["MaxNumberOfMessagesPerSecond"], 50);
    let seen = calls(&sqs);
    for own in ["receivemessage", "sendmessagebatch", "deletemessagebatch"] {
        assert!(!seen.iter().any(|c| c == own), "{own} in {seen:?}");
    }
    // The lock tag was taken and given back.
    assert!(seen.iter().any(|c| c == "tagqueue"), "{seen:?}");
    assert!(sqs.state.lock().expect("state").tags.is_empty());
}

#[test]
fn without_native_dlqctls_own_mover_runs_and_native_refuses_a_partial_move() {
    // Without --native: dlqctl's own mover (it counts dlq-redrive-count, checks maxRedrives).
    let (sqs, _ws, out) = run(Script::Completes, &[]);
    // This fake counts 5 messages but hands none out: the run says it examined none of them
    // (incomplete, exit 1), never "complete".
    out.exits(1);
    out.assert_stdout_contains("5 of the 5 message(s)");
    let seen = calls(&sqs);
    assert!(
        !seen.iter().any(|c| c == "startmessagemovetask"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|c| c == "receivemessage"), "{seen:?}");
    let report: Value = serde_json::from_str(&out.stdout).expect("JSON report");
    assert!(report.get("movedBy").is_none(), "{report}");
    // --native with a selection, another destination or a rate SQS cannot take: refused
    // before anything moves.
    for extra in [
        &["--native", "--limit", "2"][..],
        &["--native", "--class", "poison"][..],
        &["--native", "--to", "movetask"][..],
        &["--native", "--rate", "0.5"][..],
    ] {
        let (sqs, _ws, out) = run(Script::Completes, extra);
        assert_eq!(out.code, 1, "{extra:?}: {}{}", out.stdout, out.stderr);
        let seen = calls(&sqs);
        for write in ["startmessagemovetask", "receivemessage", "sendmessagebatch"] {
            assert!(
                !seen.iter().any(|c| c == write),
                "{extra:?}: {write} in {seen:?}"
            );
        }
    }
}

#[test]
fn native_where_the_endpoint_has_no_move_tasks_is_refused_and_the_own_mover_still_runs_without_it()
{
    let (sqs, ws, out) = run(Script::Unsupported, &["--native"]);
    out.exits(1);
    out.assert_stderr_contains("--native: sqs:ListMessageMoveTasks");
    assert!(
        !calls(&sqs)
            .iter()
            .any(|c| c == "receivemessage" || c == "startmessagemovetask")
    );
    let out = support::output(&mut redrive(ws.path(), &[]));
    // It runs (and, as this fake hands out none of the 5 it counts, says so: exit 1).
    out.exits(1);
    out.assert_stdout_contains("5 of the 5 message(s)");
    assert!(calls(&sqs).iter().any(|c| c == "receivemessage"));
}

#[test]
fn a_task_already_running_refuses_the_redrive_naming_it() {
    let (sqs, _ws, out) = run(Script::AlreadyRunning, &[]);
    out.exits(1);
    let errors = support::fake::error_lines(&out.stderr);
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].contains("SQS move task")
            && errors[0].contains(HANDLE)
            && errors[0].contains("2 of 5"),
        "{}",
        errors[0]
    );
    let seen = calls(&sqs);
    for write in ["startmessagemovetask", "tagqueue", "receivemessage"] {
        assert!(!seen.iter().any(|c| c == write), "{write} in {seen:?}");
    }
}

#[test]
fn a_failed_task_is_one_error_with_its_reason() {
    let (_sqs, _ws, out) = run(Script::Fails, &["--native"]);
    out.exits(1);
    let errors = support::fake::error_lines(&out.stderr);
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].contains("failed after 2 moved")
            && errors[0].contains("AWS.SimpleQueueService.NonExistentQueue"),
        "{}",
        errors[0]
    );
    let report: Value = serde_json::from_str(&out.stdout).expect("JSON report");
    assert_eq!(report["moved"], 2, "{report}");
}

#[test]
fn ctrl_c_cancels_the_task_and_reports_what_moved() {
    let sqs = start(Script::RunsUntilCancelled);
    let ws = workspace(&sqs.api.url);
    let child = redrive(ws.path(), &["--native"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dlqctl starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while sqs.state.lock().expect("state").start.is_none() {
        assert!(
            Instant::now() < deadline,
            "the task never started: {:?}",
            calls(&sqs)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().expect("dlqctl ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        sqs.state.lock().expect("state").cancelled,
        "{:?}",
        calls(&sqs)
    );
    let report: Value = serde_json::from_str(&stdout).expect("JSON report");
    assert_eq!(report["interrupted"], true, "{report}");
    assert_eq!(report["moved"], 2, "{report}");
}
