//! `dlqctl redrive` on RabbitMQ at the edges a hostile run found (issue 31): a length cap that
//! lands during or just before a run, a selection behind thousands of messages held back, a
//! broker that dies or hangs mid-run, a quorum DLQ's delivery count, a `user_id` of another
//! user, a slow `--rate` killed, Ctrl-C during a rate wait, and the counts the report gives.
//!
//! Every message carries a `message_id`; "nothing lost" is checked by reading every message
//! back by id with lapin from both sides, and the report's moved / left / possibly-duplicated
//! counts are compared with what lapin counted.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use lapin::BasicProperties;
use lapin::options::{BasicGetOptions, BasicNackOptions};
use lapin::types::{AMQPValue, LongString, ShortString};
use serde_json::{Value, json};
use support::rabbit::count;
use support::redrive::{finish, redrive, redrive_ok, spawn_json};
use support::workspace::Workspace;
use support::{block, rabbit};

/// The orders example without its exchange: the main queue is reached through the default
/// exchange.
fn without_exchange(spec: String) -> String {
    spec.replace(
        "    exchange: {name: \"{channel}.exchange\", type: direct, routingKeys: [process]}\n",
        "",
    )
}

fn quorum(spec: String) -> String {
    without_exchange(spec).replace("queueType: classic", "queueType: quorum")
}

/// Puts `n` dead letters with ids `{prefix}{i:05}`, the class of `class(i)`, through one
/// confirmed channel.
fn fill(dlq: &str, prefix: &str, n: usize, class: impl Fn(usize) -> &'static str) {
    fill_with(dlq, prefix, n, class, |p| p);
}

fn fill_with(
    dlq: &str,
    prefix: &str,
    n: usize,
    class: impl Fn(usize) -> &'static str,
    props: impl Fn(BasicProperties) -> BasicProperties,
) {
    rabbit::fill(dlq, n, |i| {
        let h = rabbit::table(&[("dlq-error-class", rabbit::text(class(i)))]);
        let p = props(
            BasicProperties::default()
                .with_message_id(format!("{prefix}{i:05}").into())
                .with_headers(h),
        );
        (b"{}".to_vec(), p)
    });
}

/// Takes every message of a queue: id → (headers as text, user_id). Panics on an id seen
/// twice in one queue.
type Taken = BTreeMap<String, (BTreeMap<String, String>, Option<String>)>;

fn take(queue: &str) -> Taken {
    let mut out = Taken::new();
    for (id, headers, user) in block(rabbit::take_each(queue, |d| {
        let p = &d.properties;
        let id = p
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let user = p.user_id().as_ref().map(|u| u.to_string());
        (id, rabbit::headers_of(p), user)
    })) {
        assert!(
            out.insert(id.clone(), (headers, user)).is_none(),
            "{id} twice in {queue}"
        );
    }
    out
}

/// Polls (bounded) until `queue` holds at least `n`.
fn wait_count(queue: &str, n: u64, limit: Duration) {
    let deadline = Instant::now() + limit;
    while count(queue) < n {
        assert!(Instant::now() < deadline, "{queue} never reached {n}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded, without failing) until the DLQ and the main queue hold `n` between them:
/// the broker hands back what a dead connection held once it notices it is gone.
fn wait_back(dlq: &str, main: &str, n: u64, limit: Duration) {
    let deadline = Instant::now() + limit;
    while count(dlq) + count(main) < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The report's counts agree with what lapin reads back: every id in the DLQ or the main
/// queue; the DLQ holds `total - moved`, less at most the possibly duplicated; the ids in both are at most the possibly
/// duplicated; `leftInDeadLetter`, when given, is the DLQ's count. Returns (DLQ, main).
fn accounted(doc: &Value, dlq: &str, main: &str, ids: &BTreeSet<String>) -> (Taken, Taken) {
    let in_dlq = take(dlq);
    let in_main = take(main);
    let all: BTreeSet<&String> = in_dlq.keys().chain(in_main.keys()).collect();
    let missing: Vec<&String> = ids.iter().filter(|i| !all.contains(i)).collect();
    assert!(missing.is_empty(), "lost: {missing:?}\n{doc}");
    let moved = doc["moved"].as_u64().expect("moved");
    let possibly = doc["possiblyDuplicated"].as_u64().unwrap_or(0);
    // A possibly duplicated message was copied and its removal from the DLQ sent, but not
    // confirmed: the broker may have applied the removal (then it is in the destination only)
    // or not (then in both). Seen under load: 126 acks applied whose confirmation never came.
    let held = in_dlq.len() as u64;
    let all_but_moved = ids.len() as u64 - moved;
    assert!(
        held <= all_but_moved && held + possibly >= all_but_moved,
        "the DLQ holds every message not counted as moved, less at most the possibly duplicated: {held} held, {all_but_moved} not moved, {possibly} possibly duplicated\n{doc}"
    );
    let both = in_dlq.keys().filter(|k| in_main.contains_key(*k)).count() as u64;
    assert!(
        both <= doc["possiblyDuplicated"].as_u64().unwrap_or(0),
        "{both} in both queues, more than reported\n{doc}"
    );
    // A statistics figure may lag; an exact one must be right.
    if let Some(left) = doc["leftInDeadLetter"].as_u64()
        && doc["leftBasis"] == "exact"
    {
        assert_eq!(left, in_dlq.len() as u64, "leftInDeadLetter\n{doc}");
    }
    (in_dlq, in_main)
}

/// A forwarder in front of the broker's AMQP port, and the fixture's target pointed at it
/// (`amqpUrl`): the test can then stall or cut the run's connection.
fn through_forwarder(f: &Workspace) -> support::tcp::Forwarder {
    let amqp = support::amqp_url();
    let upstream = amqp
        .split('@')
        .nth(1)
        .and_then(|r| r.split('/').next())
        .expect("host:port")
        .to_owned();
    let fwd = support::tcp::Forwarder::start(&upstream);
    f.edit_targets(|t| {
        t.replace(
            "    vhost: /\n",
            &format!("    vhost: /\n    amqpUrl: amqp://{}\n", fwd.addr),
        )
    });
    fwd
}

fn ids(prefix: &str, n: usize) -> BTreeSet<String> {
    (0..n).map(|i| format!("{prefix}{i:05}")).collect()
}

fn put_policy(name: &str, pattern: &str, def: Value) {
    block(rabbit::api_ok(
        reqwest::Method::PUT,
        &format!("/api/policies/%2F/{name}"),
        json!({"pattern": pattern, "apply-to": "queues", "priority": 100, "definition": def}),
    ));
}

fn delete_policy(name: &str) {
    block(rabbit::api(
        reqwest::Method::DELETE,
        &format!("/api/policies/%2F/{name}"),
        None,
    ));
}

/// Finding 1: a `max-length` policy (priority 100, displacing dlqctl's own) put in place
/// while a redrive runs. Before the fix the run checked once, at the start, on statistics up
/// to 5 s old: 280 of 300 lost, "complete", exit 0.
#[test]
fn a_length_cap_that_lands_during_a_redrive_stops_it_with_the_rest_in_the_dead_letter_queue() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "c", 300, |_| "poison");
    let cap = format!("{}-cap", f.channel);
    let run = spawn_json(&f, &["--rate", "100"]);
    wait_count(&main, 30, Duration::from_secs(20));
    put_policy(
        &cap,
        &format!("^{}$", main.replace('.', "\\.")),
        json!({"max-length": 20}),
    );
    let (code, doc, err) = finish(run, Duration::from_secs(60));
    delete_policy(&cap);
    assert_ne!(code, 0, "{doc}\n{err}");
    let error = doc["error"].as_str().unwrap_or_default();
    assert!(error.contains("max-length 20"), "{doc}");
    let moved = doc["moved"].as_u64().expect("moved");
    assert!(moved < 300, "stopped part-way: {doc}");
    let in_dlq = take(&dlq);
    assert_eq!(
        in_dlq.len() as u64,
        300 - moved,
        "every message not moved is in the DLQ\n{doc}"
    );
    assert!(
        in_dlq.len() >= 150,
        "stopped within a batch or so of the cap: {doc}"
    );
    if let Some(left) = doc["leftInDeadLetter"].as_u64() {
        assert_eq!(left, in_dlq.len() as u64, "{doc}");
    }
}

/// Finding 1, the other half: the cap is there 0 s before the run (before the fix: a
/// statistics figure that did not show it yet, 10 of 30 lost).
#[test]
fn a_length_cap_put_just_before_a_redrive_is_refused_and_nothing_moves() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "b", 30, |_| "poison");
    let cap = format!("{}-cap", f.channel);
    put_policy(
        &cap,
        &format!("^{}$", main.replace('.', "\\.")),
        json!({"max-length": 20}),
    );
    let (code, doc, err) = redrive(&f, &["--yes"]);
    delete_policy(&cap);
    assert_eq!(code, 1, "{doc}\n{err}");
    assert!(
        doc["error"]
            .as_str()
            .is_some_and(|e| e.contains("max-length 20")),
        "{doc}"
    );
    assert_eq!(doc["moved"], 0, "{doc}");
    assert_eq!(count(&dlq), 30);
    assert_eq!(count(&main), 0);
}

/// A policy that displaces dlqctl's own (so the main queue loses its dead-letter exchange)
/// without capping anything: a redriven message that failed again would vanish.
#[test]
fn a_redrive_into_a_main_queue_that_lost_its_dead_letter_exchange_is_refused() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "x", 5, |_| "poison");
    let other = format!("{}-other", f.channel);
    put_policy(
        &other,
        &format!("^{}$", main.replace('.', "\\.")),
        json!({"message-ttl": 3_600_000}),
    );
    let (code, doc, _) = redrive(&f, &["--yes"]);
    delete_policy(&other);
    assert_eq!(code, 1, "{doc}");
    let error = doc["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("no dead-letter exchange") && error.contains(&other),
        "{doc}"
    );
    assert_eq!(count(&dlq), 5);
}

/// Finding 2: 1,500 dead letters, every third `poison`; `--class poison` must move all 500.
/// Before the fix delivery stopped at the first prefetch (a raised `basic.qos` does not apply
/// to a consumer that exists already) and the idle timeout read as drained: 250 moved,
/// "complete", exit 0.
#[test]
fn a_selective_redrive_behind_a_thousand_held_back_moves_exactly_the_selected() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let class = |i: usize| {
        if i.is_multiple_of(3) {
            "poison"
        } else {
            "transient_exhausted"
        }
    };
    fill(&dlq, "s", 1500, class);
    let doc = redrive_ok(&f, &["--class", "poison", "--yes"]);
    assert_eq!(
        (doc["moved"].clone(), doc["notSelected"].clone()),
        (json!(500), json!(1000)),
        "{doc}"
    );
    assert_eq!(
        (doc["leftInDeadLetter"].clone(), doc["leftBasis"].clone()),
        (json!(1000), json!("exact")),
        "{doc}"
    );
    let (in_dlq, in_main) = accounted(&doc, &dlq, &main, &ids("s", 1500));
    assert!(
        in_main
            .values()
            .all(|(h, _)| h["dlq-error-class"] == "poison")
    );
    assert!(
        in_dlq
            .values()
            .all(|(h, _)| h["dlq-error-class"] != "poison")
    );
}

/// "A selective redrive is exact at any size": 10,000 dead letters, every seventh selected.
#[test]
fn a_selective_redrive_is_exact_at_ten_thousand() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let class = |i: usize| {
        if i % 7 == 3 {
            "poison"
        } else {
            "transient_exhausted"
        }
    };
    fill(&dlq, "t", 10_000, class);
    let doc = redrive_ok(&f, &["--class", "poison", "--yes"]);
    let selected = (0..10_000).filter(|i| i % 7 == 3).count() as u64;
    assert_eq!(doc["moved"], selected, "{doc}");
    assert_eq!(doc["notSelected"], 10_000 - selected, "{doc}");
    let (_, in_main) = accounted(&doc, &dlq, &main, &ids("t", 10_000));
    let want: BTreeSet<String> = (0..10_000)
        .filter(|i| i % 7 == 3)
        .map(|i| format!("t{i:05}"))
        .collect();
    assert_eq!(in_main.keys().cloned().collect::<BTreeSet<_>>(), want);
}

/// Finding 4: reads of a quorum DLQ raise `x-delivery-count` (11 after 11 status reads), and
/// the copy carried the stale count into the destination.
#[test]
fn status_spends_no_delivery_of_a_quorum_dlq_and_the_copy_sheds_the_broker_count() {
    let Some(f) = rabbit::Fixture::applied_with(quorum) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "q", 1, |_| "poison");
    // One delivery handed back by a consumer: the broker counts it.
    block(async {
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        let m = ch
            .basic_get(dlq.as_str().into(), BasicGetOptions::default())
            .await
            .expect("get")
            .expect("a message");
        m.delivery
            .acker
            .nack(BasicNackOptions {
                requeue: true,
                ..Default::default()
            })
            .await
            .expect("nack");
        let _ = conn.close(200, "done".into()).await;
    });
    for _ in 0..3 {
        let s = f.run(&["status", "channel.yaml", "--format", "json"]);
        assert!(s.code == 0 || s.code == 2, "{}{}", s.stdout, s.stderr);
        s.assert_stdout_contains("quorum queue counts as a delivery");
    }
    let delivery_count = block(async {
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        let m = ch
            .basic_get(dlq.as_str().into(), BasicGetOptions::default())
            .await
            .expect("get")
            .expect("a message");
        let n = m
            .delivery
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get("x-delivery-count").map(rabbit::amqp_text));
        m.delivery
            .acker
            .nack(BasicNackOptions {
                requeue: true,
                ..Default::default()
            })
            .await
            .expect("nack");
        let _ = conn.close(200, "done".into()).await;
        n
    });
    assert_eq!(
        delivery_count.as_deref(),
        Some("1"),
        "status spent no delivery"
    );
    let doc = redrive_ok(&f, &["--yes"]);
    let (_, in_main) = accounted(&doc, &dlq, &main, &ids("q", 1));
    let (headers, _) = &in_main["q00000"];
    assert!(
        headers.get("x-delivery-count").is_none_or(|n| n == "0"),
        "{headers:?}"
    );
}

/// Finding 6: a `user_id` naming another broker user closed the channel (PRECONDITION_FAILED)
/// and stopped every run there, duplicating what came before.
#[test]
fn a_message_whose_user_id_names_another_user_moves_without_it() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let user = support::unique("dlqctl-u");
    block(rabbit::api_ok(
        reqwest::Method::PUT,
        &format!("/api/users/{user}"),
        json!({"password": "pw", "tags": ""}),
    ));
    block(rabbit::api_ok(
        reqwest::Method::PUT,
        &format!("/api/permissions/%2F/{user}"),
        json!({"configure": ".*", "write": ".*", "read": ".*"}),
    ));
    fill(&dlq, "a", 3, |_| "poison");
    // Published by that user, who may stamp its own name.
    block(async {
        let url = support::amqp_url().replacen("guest:guest@", &format!("{user}:pw@"), 1);
        let conn = lapin::Connection::connect(&url, Default::default())
            .await
            .expect("AMQP as the other user");
        let ch = conn.create_channel().await.expect("channel");
        for i in 3..6 {
            rabbit::publish_on(
                &ch,
                "",
                &dlq,
                b"{}",
                BasicProperties::default()
                    .with_message_id(format!("a{i:05}").into())
                    .with_user_id(user.as_str().into()),
            )
            .await;
        }
        let _ = conn.close(200, "done".into()).await;
    });
    let (code, doc, err) = redrive(&f, &["--yes"]);
    block(rabbit::api(
        reqwest::Method::DELETE,
        &format!("/api/users/{user}"),
        None,
    ));
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(doc["moved"], 6, "{doc}");
    let (_, in_main) = accounted(&doc, &dlq, &main, &ids("a", 6));
    assert!(in_main.values().all(|(_, u)| u.is_none()), "{in_main:?}");
}

/// Finding 5: acks written to a connection that dies counted as moved ("192 moved, 0
/// possibly duplicated", all 192 still in the DLQ). The broker is reached through a
/// forwarder that the test cuts mid-run.
#[test]
fn a_connection_cut_mid_run_counts_as_moved_only_what_the_broker_confirmed_removing() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "k", 2000, |_| "poison");
    let fwd = through_forwarder(&f);
    let run = spawn_json(&f, &["--rate", "500"]);
    wait_count(&main, 300, Duration::from_secs(20));
    fwd.cut();
    let (code, doc, err) = finish(run, Duration::from_secs(60));
    assert_ne!(code, 0, "{doc}\n{err}");
    assert!(
        doc["error"]
            .as_str()
            .is_some_and(|e| e.contains("back in the dead-letter queue")),
        "{doc}"
    );
    wait_back(&dlq, &main, 2000, Duration::from_secs(30));
    accounted(&doc, &dlq, &main, &ids("k", 2000));
}

/// Finding 20: a broker that hangs is noticed within the heartbeat, and the error says what
/// it means for the messages (before: "no heartbeat received" after 124 s).
#[test]
fn a_broker_that_hangs_mid_run_is_given_up_within_the_heartbeat_and_loses_nothing() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "h", 1000, |_| "poison");
    let fwd = through_forwarder(&f);
    let run = spawn_json(&f, &["--rate", "200"]);
    wait_count(&main, 100, Duration::from_secs(20));
    fwd.stall();
    let stalled = Instant::now();
    let (code, doc, err) = finish(run, Duration::from_secs(90));
    let took = stalled.elapsed();
    drop(fwd);
    assert_ne!(code, 0, "{doc}\n{err}");
    assert!(took < Duration::from_secs(45), "gave up after {took:?}");
    assert!(
        doc["error"]
            .as_str()
            .is_some_and(|e| e.contains("back in the dead-letter queue")),
        "{doc}"
    );
    // The broker hands back what the dead connection held once it notices it is gone.
    wait_back(&dlq, &main, 1000, Duration::from_secs(60));
    accounted(&doc, &dlq, &main, &ids("h", 1000));
}

/// Finding 14: at a low `--rate` a batch spanned minutes unacknowledged; a kill then
/// duplicated all of it. Acks go out at least every second.
#[test]
fn a_slow_redrive_killed_part_way_duplicates_about_a_second_of_moves_at_most() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "r", 40, |_| "poison");
    let mut run = spawn_json(&f, &["--rate", "5"]);
    wait_count(&main, 12, Duration::from_secs(20));
    let _ = run.kill();
    let _ = run.wait();
    wait_back(&dlq, &main, 40, Duration::from_secs(20));
    let in_dlq = take(&dlq);
    let in_main = take(&main);
    let all: BTreeSet<&String> = in_dlq.keys().chain(in_main.keys()).collect();
    assert_eq!(all.len(), 40, "nothing lost");
    let both = in_dlq.keys().filter(|k| in_main.contains_key(*k)).count();
    assert!(
        both <= 7,
        "{both} duplicated (at 5/s, about a second of moves)"
    );
}

/// Finding 19: Ctrl-C during a `--rate` wait was honoured only after the wait, and one more
/// message moved after it.
#[test]
fn an_interrupt_during_a_rate_wait_stops_at_once_and_nothing_starts_after_it() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "i", 3, |_| "poison");
    let run = spawn_json(&f, &["--rate", "0.2"]);
    wait_count(&main, 1, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    let pid = i32::try_from(run.id()).expect("pid");
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
    let signalled = Instant::now();
    let (code, doc, err) = finish(run, Duration::from_secs(20));
    assert!(
        signalled.elapsed() < Duration::from_secs(3),
        "{:?}",
        signalled.elapsed()
    );
    assert_eq!(code, 1, "{doc}\n{err}");
    assert_eq!(
        (doc["interrupted"].clone(), doc["moved"].clone()),
        (json!(true), json!(1)),
        "{doc}"
    );
    accounted(&doc, &dlq, &main, &ids("i", 3));
}

/// Finding 22 (quorum `--limit 3` said "0 left" with messages left) and 15 (`leftInDeadLetter`
/// from statistics up to 5 s old): the count left is the broker's exact one.
#[test]
fn the_count_left_is_exact_on_a_quorum_dlq_with_a_limit() {
    let Some(f) = rabbit::Fixture::applied_with(quorum) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "l", 10, |_| "poison");
    let doc = redrive_ok(&f, &["--limit", "3", "--yes"]);
    assert_eq!(
        (doc["moved"].clone(), doc["leftInDeadLetter"].clone()),
        (json!(3), json!(7)),
        "{doc}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&dlq) < 7 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    accounted(&doc, &dlq, &main, &ids("l", 10));
}

/// Finding 15: right after 20 arrive, status and a dry run see 20 (before: the statistics'
/// 0, "0 would move").
#[test]
fn status_and_a_dry_run_count_what_just_arrived() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    fill(&dlq, "n", 20, |_| "poison");
    let s = f.run(&["status", "channel.yaml", "--format", "json"]);
    let doc: Value =
        serde_json::from_str(&s.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", s.stdout, s.stderr));
    assert_eq!(doc["channels"][0]["deadLetter"]["depth"], 20, "{doc}");
    let (code, dry, _) = redrive(&f, &["--dry-run"]);
    assert_eq!(code, 0, "{dry}");
    assert_eq!(dry["wouldMove"]["count"], 20, "{dry}");
    assert_eq!(count(&dlq), 20, "nothing moved");
}

/// Finding 17: a `dlq-redrive-count` that cannot be read is at the limit, not 0.
#[test]
fn an_unreadable_redrive_count_is_skipped_at_the_limit_and_reported() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let bad = ["abc", "3.0", "-1", "4294967296"];
    fill_with(
        &dlq,
        "u",
        4,
        |_| "poison",
        |p| {
            let mut h = p.headers().clone().unwrap_or_default();
            let i = p
                .message_id()
                .as_ref()
                .and_then(|m| m.as_str()[1..].parse::<usize>().ok())
                .unwrap_or(0);
            h.insert(
                ShortString::from("dlq-redrive-count"),
                AMQPValue::LongString(LongString::from(bad[i])),
            );
            p.with_headers(h)
        },
    );
    let doc = redrive_ok(&f, &["--yes"]);
    assert_eq!(
        (doc["moved"].clone(), doc["skippedAtMaxRedrives"].clone()),
        (json!(0), json!(4)),
        "{doc}"
    );
    assert_eq!(count(&dlq), 4);
    assert_eq!(count(&main), 0);
}

/// Finding 18: `--to` ignored ownership (a hostile run moved messages into `victim.payments`,
/// outside the target's prefixes).
#[test]
fn a_destination_outside_the_ownership_prefixes_is_refused_unless_allowed() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    let victim = support::unique("victim.payments-");
    block(rabbit::api_ok(
        reqwest::Method::PUT,
        &format!("/api/queues/%2F/{victim}"),
        json!({"durable": true}),
    ));
    fill(&dlq, "o", 3, |_| "poison");
    let (code, doc, _) = redrive(&f, &["--to", &victim, "--yes"]);
    assert_eq!(code, 1, "{doc}");
    let error = doc["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("outside the target's ownership prefixes (orders.)")
            && error.contains("--allow-unowned-destination"),
        "{doc}"
    );
    assert_eq!((count(&dlq), count(&victim)), (3, 0), "nothing moved");
    let (code, doc, err) = redrive(
        &f,
        &["--to", &victim, "--allow-unowned-destination", "--yes"],
    );
    let moved = take(&victim).len();
    rabbit::delete_queue(&victim);
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!((doc["moved"].clone(), moved), (json!(3), 3), "{doc}");
}

/// Holds `n` messages of `queue` unacknowledged (`basic.get`, no consumer: a run can still
/// consume the queue exclusively) until `close` is sent (or 60 s), then closes its connection,
/// and the broker hands them back. Returns once they are held.
fn hold(queue: &str, n: usize) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (close_tx, close_rx) = std::sync::mpsc::channel::<()>();
    let queue = queue.to_owned();
    let holder = std::thread::spawn(move || {
        block(async move {
            let conn = rabbit::amqp().await;
            let ch = conn.create_channel().await.expect("channel");
            for _ in 0..n {
                ch.basic_get(queue.as_str().into(), BasicGetOptions::default())
                    .await
                    .expect("basic.get")
                    .expect("a message to hold");
            }
            held_tx.send(()).expect("held");
            let _ = close_rx.recv_timeout(Duration::from_secs(60));
            let _ = conn.close(200, "handing back".into()).await;
        });
    });
    held_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the messages held");
    (close_tx, holder)
}

/// Messages another reader held when the run started, handed back while it ran, are examined
/// before it says "complete". Before the fix the run counted the ready messages once, at its
/// start, and finished "complete" (exit 0) with them unexamined (CI of d0edf23: 17 of 3,000,
/// right after a dry run).
#[test]
fn messages_handed_back_while_a_run_goes_are_examined_before_it_says_complete() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "h", 1000, |_| "poison");
    let (close, holder) = hold(&dlq, 100);
    let run = spawn_json(&f, &["--rate", "400"]);
    wait_count(&main, 300, Duration::from_secs(30));
    close.send(()).expect("close");
    holder.join().expect("the holder");
    let (code, doc, err) = finish(run, Duration::from_secs(60));
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(
        (doc["moved"].clone(), doc["examined"].clone()),
        (json!(1000), json!(1000)),
        "{doc}"
    );
    let (in_dlq, in_main) = accounted(&doc, &dlq, &main, &ids("h", 1000));
    assert_eq!((in_dlq.len(), in_main.len()), (0, 1000));
}

/// Copies that fail again and come back to the DLQ while the run goes are not moved a second
/// time by the same run: they wait there (for `--verify-for`, or the next run), and the report
/// counts them.
#[test]
fn copies_that_come_back_while_a_run_goes_are_not_moved_again_by_it() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "b", 300, |_| "poison");
    // The application: fails every message of the main queue and dead-letters it itself
    // (publishes it to the DLQ as it came, then acknowledges it), for at most 30 s or until
    // the run is over.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (queue, into, halt) = (main.clone(), dlq.clone(), std::sync::Arc::clone(&stop));
    let app = std::thread::spawn(move || {
        block(async move {
            use lapin::options::{BasicAckOptions, ConfirmSelectOptions};
            let conn = rabbit::amqp().await;
            let ch = conn.create_channel().await.expect("channel");
            ch.confirm_select(ConfirmSelectOptions::default())
                .await
                .expect("confirms");
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline && !halt.load(std::sync::atomic::Ordering::SeqCst) {
                let got = ch
                    .basic_get(queue.as_str().into(), BasicGetOptions::default())
                    .await
                    .expect("basic.get");
                let Some(m) = got else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let d = m.delivery;
                rabbit::publish_on(&ch, "", &into, &d.data, d.properties.clone()).await;
                d.acker.ack(BasicAckOptions::default()).await.expect("ack");
            }
            let _ = conn.close(200, "done".into()).await;
        });
    });
    let (code, doc, err) = finish(spawn_json(&f, &["--rate", "300"]), Duration::from_secs(60));
    wait_count(&dlq, 300, Duration::from_secs(20));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    app.join().expect("the application");
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(doc["moved"], 300, "each moved once: {doc}");
    assert!(
        doc["cameBack"].as_u64().is_some_and(|n| n > 0),
        "the copies that came back are counted: {doc}"
    );
    let in_dlq = take(&dlq);
    assert_eq!(in_dlq.len(), 300, "every copy back in the DLQ once");
    assert!(
        in_dlq.values().all(|(h, _)| h["dlq-redrive-count"] == "1"),
        "moved once each"
    );
}

/// Puts 3,000 dead letters with ids `{prefix}{i:05}`; message `odd` carries an `x-death` entry
/// saying it was published to the channel's exchange with the key `nowhere`, which nothing is
/// bound to: its copy comes back unroutable.
fn fill_with_one_unroutable(f: &rabbit::Fixture, prefix: &str, odd: usize) {
    let [main, _, dlq, exchange] = f.names();
    rabbit::fill(&dlq, 3000, |i| {
        let mut h = rabbit::table(&[("dlq-error-class", rabbit::text("poison"))]);
        if i == odd {
            let death = rabbit::table(&[
                ("exchange", rabbit::text(&exchange)),
                ("queue", rabbit::text(&main)),
                ("reason", rabbit::text("rejected")),
                (
                    "routing-keys",
                    AMQPValue::FieldArray(vec![rabbit::text("nowhere")].into()),
                ),
            ]);
            h.insert(
                ShortString::from("x-death"),
                AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into()),
            );
        }
        let p = BasicProperties::default()
            .with_message_id(format!("{prefix}{i:05}").into())
            .with_headers(h);
        (b"{}".to_vec(), p)
    });
}

/// Issue 39 (the mover keeps publishing while earlier confirms are outstanding): a publish
/// refused in the middle of that window, the 1,234th of 3,000 (its copy unroutable), stops
/// the run. Every message before it is moved and gone from the DLQ; it and every one after
/// it are still in the DLQ; the copies of those after it that the broker confirmed are in
/// both places, and the report says exactly how many (before: a batch's copies published
/// after a refusal landed uncounted, "0 possibly duplicated" with 165 in both).
#[test]
fn a_refusal_inside_the_window_of_unconfirmed_publishes_keeps_every_message_and_counts_what_landed()
{
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let odd = 1234;
    fill_with_one_unroutable(&f, "w", odd);
    let (code, doc, err) = redrive(&f, &["--yes"]);
    assert_eq!(code, 1, "{doc}\n{err}");
    assert!(
        doc["error"]
            .as_str()
            .is_some_and(|e| e.contains("returned unroutable")),
        "{doc}"
    );
    let (in_dlq, in_main) = accounted(&doc, &dlq, &main, &ids("w", 3000));
    // The run stops at the refusal, or a little before it when the confirms of the messages
    // just before it had not come back when the refusal did (a loaded 2-core machine: 29
    // before it, once): those stay too, unacknowledged, and their copies count as possibly
    // duplicated. Never past it, and never more than a settling batch (200) before it.
    let moved = doc["moved"].as_u64().unwrap_or(u64::MAX) as usize;
    assert!(
        moved <= odd && odd - moved <= 200,
        "stopped at the refusal or within a batch before it: {moved}\n{doc}"
    );
    let from_stop: BTreeSet<String> = (moved..3000).map(|i| format!("w{i:05}")).collect();
    assert_eq!(
        in_dlq.keys().cloned().collect::<BTreeSet<_>>(),
        from_stop,
        "the refused message and every one after it stay in the DLQ, with those not yet settled before it\n{doc}"
    );
    assert!(!in_main.contains_key(&format!("w{odd:05}")), "{doc}");
    let both = in_dlq.keys().filter(|k| in_main.contains_key(*k)).count() as u64;
    assert_eq!(
        doc["possiblyDuplicated"].as_u64().unwrap_or(0),
        both,
        "the copies confirmed after the refusal, counted as lapin reads them\n{doc}"
    );
    assert_eq!(in_main.len() as u64, moved as u64 + both, "{doc}");
}

/// The same with a refusal by the broker (a full main queue with `overflow: reject-publish`
/// at 1,050 messages, inside a batch): 1,050 moved, the other 1,950 in the DLQ, none in both.
#[test]
fn a_destination_that_fills_inside_the_window_stops_the_run_with_the_rest_in_the_dead_letter_queue()
{
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "f", 3000, |_| "poison");
    let cap = format!("{}-full", f.channel);
    put_policy(
        &cap,
        &format!("^{}$", main.replace('.', "\\.")),
        json!({"max-length": 1050, "overflow": "reject-publish",
               "dead-letter-exchange": "", "dead-letter-routing-key": dlq}),
    );
    std::thread::sleep(Duration::from_secs(1));
    let (code, doc, err) = redrive(&f, &["--yes"]);
    delete_policy(&cap);
    assert_eq!(code, 1, "{doc}\n{err}");
    assert!(
        doc["error"]
            .as_str()
            .is_some_and(|e| e.contains("refused the message")),
        "{doc}"
    );
    let (in_dlq, in_main) = accounted(&doc, &dlq, &main, &ids("f", 3000));
    assert_eq!(
        (doc["moved"].clone(), in_main.len(), in_dlq.len()),
        (json!(1050), 1050, 1950),
        "{doc}"
    );
    assert_eq!(doc["possiblyDuplicated"].as_u64().unwrap_or(0), 0, "{doc}");
}

/// Every message of a queue, taken: id → its `x-delivery-count` (0 when absent): how many
/// times a quorum queue handed it out and had it back.
fn delivery_counts(queue: &str) -> BTreeMap<String, i64> {
    block(rabbit::take_each(queue, |d| {
        let p = &d.properties;
        let id = p
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let n = rabbit::headers_of(p)
            .get("x-delivery-count")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        (id, n)
    }))
    .into_iter()
    .collect()
}

/// A policy on one queue (the highest priority: it wins over the fixture's), removed when
/// dropped.
struct Policy(String);

impl Policy {
    fn set(queue: &str, definition: Value) -> Self {
        let name = format!("{queue}.test-policy");
        block(rabbit::api_ok(
            reqwest::Method::PUT,
            &format!("/api/policies/%2F/{name}"),
            json!({
                "pattern": format!("^{}$", regex_escape(queue)),
                "apply-to": "queues",
                "priority": 900,
                "definition": definition,
            }),
        ));
        Policy(name)
    }
}

impl Drop for Policy {
    fn drop(&mut self) {
        let _ = block(rabbit::api(
            reqwest::Method::DELETE,
            &format!("/api/policies/%2F/{}", self.0),
            None,
        ));
    }
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = ".^$*+?()[]{}|\\".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// Issue 52, hx3 F1: a run hands back no message it did not examine. On a quorum DLQ each
/// hand-back counts one delivery; with a prefetch of 2,000 every batch of `--batch 5` took the
/// whole DLQ and handed back all but 5, so after three batches the 15 left had been delivered
/// three times each (a delivery limit then drops them: the test below). Now a run takes no
/// more than it may move, and the 15 left were never delivered (the lock held between batches
/// takes the next one, once).
#[test]
fn a_batched_run_on_a_quorum_dlq_hands_back_nothing_it_did_not_examine() {
    let Some(f) = rabbit::Fixture::applied_with(quorum) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "q", 30, |_| "poison");
    let doc = redrive_ok(
        &f,
        &["--yes", "--batch", "5", "--until-empty", "--limit", "15"],
    );
    assert_eq!(doc["moved"], 15, "{doc}");
    wait_count(&dlq, 15, Duration::from_secs(10));
    let left = delivery_counts(&dlq);
    let moved = take(&main);
    assert_eq!(left.len() + moved.len(), 30, "nothing lost: {left:?}");
    assert_eq!(
        moved.keys().chain(left.keys()).collect::<BTreeSet<_>>(),
        ids("q", 30).iter().collect(),
    );
    // The lock between batches holds one message (the next at the head) and hands it back
    // once; nothing else left was delivered.
    let handed_back: Vec<_> = left.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        handed_back.is_empty(),
        "the messages left were delivered and handed back: {handed_back:?}"
    );
    assert!(
        left.values().filter(|n| **n == 1).count() <= 2,
        "only the lock's held message of each pause: {left:?}"
    );
}

/// hx3 F1 as found: a delivery limit set on a quorum DLQ while a batched run pauses. Before,
/// each message left had been handed back once per batch, and the next hand-back dropped those
/// past the limit (lost: in neither queue). Now nothing is lost: the run stops at the next
/// batch, refusing a DLQ with a delivery limit, and every message is in the DLQ or moved.
#[test]
fn a_delivery_limit_set_during_a_batched_run_on_a_quorum_dlq_loses_nothing() {
    let Some(f) = rabbit::Fixture::applied_with(quorum) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "d", 40, |_| "poison");
    let child = spawn_json(&f, &["--batch", "5", "--until-empty", "--pause", "1500ms"]);
    // After the third batch (15 moved), during its pause.
    wait_count(&main, 15, Duration::from_secs(30));
    let _policy = Policy::set(&dlq, json!({"delivery-limit": 2}));
    let (code, doc, err) = finish(child, Duration::from_secs(60));
    assert_ne!(
        code, 0,
        "a delivery limit appeared: the run stops\n{doc}\n{err}"
    );
    assert!(
        doc["error"]
            .as_str()
            .is_some_and(|e| e.contains("delivery limit of 2")),
        "stopped by the delivery limit, named: {doc}"
    );
    wait_back(&dlq, &main, 40, Duration::from_secs(10));
    accounted(&doc, &dlq, &main, &ids("d", 40));
}

/// hx4 B: on a quorum DLQ a selection behind a prefetch of messages not chosen moved nothing
/// ("no delivery for 2 s … run it again"): the consumer started again reused its tag, and a
/// quorum queue delivers nothing to it while the old one's deliveries are unacknowledged. 10
/// `poison` then 10 `transient`, `--limit 5 --class transient`: exactly 5 transient move.
#[test]
fn a_selection_with_a_limit_behind_messages_not_chosen_moves_exactly_on_a_quorum_dlq() {
    let Some(f) = rabbit::Fixture::applied_with(quorum) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(
        &dlq,
        "s",
        20,
        |i| if i < 10 { "poison" } else { "transient" },
    );
    let doc = redrive_ok(&f, &["--yes", "--limit", "5", "--class", "transient"]);
    assert_eq!(doc["moved"], 5, "{doc}");
    wait_back(&dlq, &main, 20, Duration::from_secs(10));
    let (_, in_main) = accounted(&doc, &dlq, &main, &ids("s", 20));
    let want: BTreeSet<String> = (10..15).map(|i| format!("s{i:05}")).collect();
    assert_eq!(in_main.keys().cloned().collect::<BTreeSet<_>>(), want);
}

/// hx4 C: `--limit 1000` over 3,000 on a quorum DLQ handed 800 of the 2,000 left back (one
/// delivery each): each batch acknowledged made room the broker filled at once. At most 400
/// now (the prefetch), and nothing lost.
#[test]
fn a_large_limit_hands_back_at_most_two_batches_on_a_quorum_dlq() {
    let Some(f) = rabbit::Fixture::applied_with(quorum) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "b", 3000, |_| "poison");
    let doc = redrive_ok(&f, &["--yes", "--limit", "1000"]);
    assert_eq!(doc["moved"], 1000, "{doc}");
    wait_count(&dlq, 2000, Duration::from_secs(10));
    let left = delivery_counts(&dlq);
    let moved = take(&main);
    assert_eq!(left.len() + moved.len(), 3000, "nothing lost");
    let handed_back = left.values().filter(|n| **n > 0).count();
    assert!(
        handed_back <= 400,
        "{handed_back} of the 2,000 left were delivered and handed back"
    );
}

/// hx4 H: a `--where` generator cut at 1,000 outputs without a `true` chose nothing, counted
/// `whereFailures`, and the run said "complete", exit 0: an output not looked at might have
/// been `true`. Incomplete now (exit 1), every message still in the DLQ.
#[test]
fn a_where_cut_at_a_thousand_outputs_makes_the_run_incomplete() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    fill(&dlq, "w", 3, |_| "poison");
    let (code, doc, err) = redrive(&f, &["--yes", "--where", "[range(1001)] | .[] | false"]);
    assert_eq!(code, 1, "{doc}\n{err}");
    assert_eq!(doc["moved"], 0, "{doc}");
    assert!(
        doc["incomplete"].to_string().contains("1000 outputs"),
        "{doc}"
    );
    wait_back(&dlq, &main, 3, Duration::from_secs(10));
    accounted(&doc, &dlq, &main, &ids("w", 3));
}
