//! Issue 37, "to the failed consumer only": `redrive --to failed-consumer`, live. Pub/Sub
//! cannot publish to one subscription, so the run is refused without `--allow-fanout`,
//! naming every subscription of the main topic (two here: the channel's consumer and an
//! audit subscription made by hand with the REST API); with it, the dry run lists them and
//! the run publishes to the topic, which both receive. Kafka is refused before anything is
//! read, saying why (a topic reaches every consumer group). Dead letters are put in with
//! the emulator's REST API, as a third party would.

mod support;

use serde_json::json;
use support::redrive::redrive_ok;
use support::{kafka, pubsub};

const N: usize = 3;

#[test]
fn pubsub_failed_consumer_is_refused_without_allow_fanout_naming_every_subscription() {
    let Some(f) = pubsub::Fixture::new() else {
        return;
    };
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let sub = f.subscription();
    let audit = format!("{}-audit-sub", f.channel);
    f.rest.create_subscription(
        &audit,
        json!({"topic": pubsub::Rest::topic_path(&f.channel)}),
    );
    for i in 0..N {
        f.rest.publish(&dlt, &format!("order-{i}"));
    }
    let started = std::time::Instant::now();
    while f.rest.count(&dl_sub) < N as u64 && started.elapsed() < std::time::Duration::from_secs(30)
    {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    let out = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--to",
        "failed-consumer",
        "--yes",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    for s in [&sub, &audit] {
        assert!(
            out.stderr.contains(&format!("`{s}`")),
            "the refusal names subscription {s}: {}",
            out.stderr
        );
    }
    assert!(out.stderr.contains("--allow-fanout"), "{}", out.stderr);
    assert!(
        out.stderr.contains("reaches every subscription"),
        "{}",
        out.stderr
    );
    assert_eq!(f.rest.count(&dl_sub), N as u64, "nothing moved");
    assert!(f.rest.take(&sub, 0).is_empty(), "nothing published");

    let dry = redrive_ok(
        &f,
        &["--to", "failed-consumer", "--allow-fanout", "--dry-run"],
    );
    let mut want = vec![sub.clone(), audit.clone()];
    want.sort();
    assert_eq!(dry["destination"]["fanout"], json!(want), "{dry}");
    assert_eq!(dry["destination"]["failedConsumer"], json!(true), "{dry}");

    let moved = redrive_ok(&f, &["--to", "failed-consumer", "--allow-fanout", "--yes"]);
    assert_eq!(moved["moved"], json!(N), "{moved}");
    // The fan-out it warned of: both subscriptions receive every copy.
    assert_eq!(f.rest.take(&sub, N).len(), N);
    assert_eq!(f.rest.take(&audit, N).len(), N);
}

#[test]
fn kafka_failed_consumer_is_refused_saying_a_topic_reaches_every_group() {
    let Some(f) = kafka::Fixture::new() else {
        return;
    };
    f.write_example(|t| t);
    let out = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--to",
        "failed-consumer",
        "--dry-run",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    for want in [
        "--to failed-consumer",
        "every consumer group",
        "kafka_dlt-original-consumer-group",
        "nothing was read or moved",
    ] {
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
    }
}
