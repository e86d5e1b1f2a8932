//! Pub/Sub's depth, oldest age and flow from Cloud Monitoring (issue 36), against recorded
//! `ListTimeSeriesResponse` answers (tests/fixtures/cloud-monitoring/, built from the
//! Monitoring API v3 discovery document's shape and checked against its schemas here) served
//! by a fake on 127.0.0.1 that records what it was asked. These reads never met the real
//! Cloud Monitoring API.
//!
//! Offline: the same fake plays a minimal Pub/Sub, so status reads N channels with four
//! metric listings (one paged: five calls) whatever N is, each filter naming every channel.
//! Live: the emulator holds the topics, subscriptions and dead letters, the fake the metrics;
//! `status` and `dlqctl exporter` show the monitoring depth, age and a 1% rate, an exact pull
//! count wins over the metric, and a monitoring endpoint that refuses leaves status at exit 0
//! with a note.

mod support;

use serde_json::Value;
use support::monitoring::{FakeMonitoring, Listing, answer_for, fixture, fixtures};
use support::{dlqctl_local, output};

/// The recorded answers, as the fake serves them, are `ListTimeSeriesResponse`s: every field
/// known to the vendored discovery schemas, of its type, enums and times well-formed.
#[test]
fn recorded_answers_are_list_time_series_responses_of_the_discovery_document() {
    let doc: Value =
        serde_json::from_str(&fixture("monitoring-v3-time-series.json")).expect("schemas");
    let listing = Listing {
        project: "my-project".into(),
        filter: r#"metric.type = "x" AND resource.labels.subscription_id = one_of("a","b")"#.into(),
        start: "2024-05-01T11:45:00Z".into(),
        end: "2024-05-01T12:00:00Z".into(),
        period: "60s".into(),
        aligner: "ALIGN_MAX".into(),
        page_token: None,
    };
    let mut names: Vec<String> = std::fs::read_dir(fixtures())
        .expect("fixtures")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("list-time-series-"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 5, "{names:?}");
    for name in names {
        let answer = answer_for(&name, &listing);
        let mut out = Vec::new();
        support::discovery::check_schema(
            &doc["schemas"],
            "ListTimeSeriesResponse",
            &answer,
            &name,
            &mut out,
        );
        assert!(out.is_empty(), "{name}: {out:#?}");
        let series = answer["timeSeries"].as_array().expect("series");
        assert!(!series.is_empty(), "{name}: one series per named resource");
        for s in series {
            // int64 values are JSON strings, points newest first (as the document says).
            let points = s["points"].as_array().expect("points");
            assert!(points.iter().all(|p| p["value"]["int64Value"].is_string()));
            let ends: Vec<&str> = points
                .iter()
                .filter_map(|p| p["interval"]["endTime"].as_str())
                .collect();
            let mut sorted = ends.clone();
            sorted.sort_by(|a, b| b.cmp(a));
            assert_eq!(ends, sorted, "{name}: reverse time order");
        }
    }
}

/// A workspace whose one Pub/Sub target plays the emulator on the fake (so no stack is
/// needed) with `monitoring` as given, and `n` channels in channel.yaml.
fn offline(fake: &FakeMonitoring, monitoring: &str, n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("dlqctl.yaml"),
        format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  gcp:\n    backend: pubsub\n    project: my-project\n    emulatorHost: {}\n{monitoring}",
            fake.base()
        ),
    )
    .expect("targets");
    let specs: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: orders-{i}}}\nspec:\n  target: gcp\n  retry: {{maxAttempts: 5}}\n  deadLetter: {{name: \"{{channel}}-dlt\", subscription: \"{{channel}}-dlt-sub\"}}\n  pubsub: {{subscription: \"{{channel}}-sub\"}}\n  lint: {{allow: [alarms/missing]}}\n"
            )
        })
        .collect();
    std::fs::write(dir.path().join("channel.yaml"), specs.join("---\n")).expect("specs");
    dir
}

fn status(dir: &std::path::Path, extra: &[&str]) -> support::Output {
    output(
        dlqctl_local(dir)
            .args([
                "status",
                "channel.yaml",
                "--format",
                "json",
                "--color",
                "never",
            ])
            .args(extra),
    )
}

fn seconds(t: &str) -> i64 {
    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .expect("RFC 3339")
        .unix_timestamp()
}

/// Issue 36: four listings per target (five calls: one answer is paged), whatever the number
/// of channels; each filter names every channel with `one_of`, the interval is the last 15
/// whole minutes, aligned per 60 s; and the figures land where status shows them.
#[test]
fn status_reads_the_metrics_of_every_channel_in_four_listings() {
    let mut calls = Vec::new();
    for n in [1, 3] {
        let fake = FakeMonitoring::with_pubsub();
        let dir = offline(
            &fake,
            &format!("    monitoring: {{endpoint: \"{}\"}}\n", fake.endpoint()),
            n,
        );
        let out = status(dir.path(), &["--no-peek"]);
        out.ok();
        let doc = out.json("status");
        let listings = fake.listings();
        calls.push(listings.len());
        // The four listings go out side by side, so a paged one's second page may come in
        // after another listing: sort before counting distinct filters.
        let mut filters: Vec<&str> = listings.iter().map(|l| l.filter.as_str()).collect();
        filters.sort_unstable();
        filters.dedup();
        assert_eq!(filters.len(), 4, "{listings:#?}");
        for l in &listings {
            assert_eq!(l.project, "my-project");
            let names = support::monitoring::names(&l.filter);
            assert_eq!(names.len(), n, "every channel in one filter: {}", l.filter);
            if n > 1 {
                assert!(l.filter.contains("one_of("), "{}", l.filter);
            }
            let (start, end) = (seconds(&l.start), seconds(&l.end));
            assert_eq!((end % 60, end - start), (0, 900), "{l:?}");
            assert_eq!(l.period, "60s");
        }
        let aligner = |metric: &str| -> Vec<&str> {
            listings
                .iter()
                .filter(|l| l.filter.contains(metric))
                .map(|l| l.aligner.as_str())
                .collect()
        };
        assert_eq!(aligner("num_undelivered_messages"), ["ALIGN_MAX"]);
        assert_eq!(aligner("oldest_unacked_message_age"), ["ALIGN_MAX"]);
        assert_eq!(aligner("dead_letter_message_count"), ["ALIGN_SUM"]);
        assert_eq!(
            aligner("send_message_operation_count"),
            ["ALIGN_SUM", "ALIGN_SUM"],
            "paged by nextPageToken"
        );
        assert!(
            listings
                .iter()
                .any(|l| l.page_token.as_deref() == Some("page-2"))
        );
        for (i, entry) in doc["channels"]
            .as_array()
            .expect("channels")
            .iter()
            .enumerate()
        {
            let d = &entry["deadLetter"];
            assert_eq!(d["name"], format!("orders-{i}-dlt"), "{entry:#}");
            assert_eq!(d["depth"], 10, "{entry:#}");
            assert_eq!(d["depthDetail"]["basis"], "cloud-monitoring", "{entry:#}");
            assert_eq!(d["oldestAgeSeconds"], 180.0, "{entry:#}");
            assert_eq!(d["oldestAgeBasis"], "metric", "{entry:#}");
            let w = &d["flow"]["window"];
            assert_eq!(
                (w["deadLettered"].as_u64(), w["source"].as_u64()),
                (Some(10), Some(1000)),
                "{entry:#}"
            );
            assert_eq!(w["rate"], 0.01, "{entry:#}");
            assert_eq!(d["flow"]["source"], format!("orders-{i}"));
            let notes = d["notes"].to_string();
            assert!(
                notes.contains(&format!(
                    "depth 10 from Cloud Monitoring's subscription/num_undelivered_messages at {}",
                    fake.endpoint()
                )),
                "{notes}"
            );
        }
    }
    assert_eq!(calls, [5, 5], "calls do not grow with channels");
}

/// A monitoring endpoint that refuses (403) or fails (500) is not a failed status: exit 0,
/// the depth and flow unknown, and a note naming the endpoint, the metric and the answer.
#[test]
fn a_monitoring_endpoint_that_refuses_leaves_status_at_exit_0_with_a_note() {
    for code in [403u16, 500] {
        let fake = FakeMonitoring::with_pubsub();
        fake.fail_with(code);
        let dir = offline(
            &fake,
            &format!("    monitoring: {{endpoint: \"{}\"}}\n", fake.endpoint()),
            2,
        );
        let out = status(dir.path(), &["--no-peek"]);
        out.ok_with(format!("HTTP {code}"));
        let doc = out.json("status");
        let d = &doc["channels"][1]["deadLetter"];
        assert!(d["depth"].is_null(), "{d:#}");
        assert!(
            d["flow"]["window"].is_null() || d["flow"]["window"]["rate"].is_null(),
            "{d:#}"
        );
        let notes: Vec<&str> = d["notes"]
            .as_array()
            .expect("notes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let at = fake.endpoint();
        for (what, metric, resource) in [
            (
                "depth",
                "subscription/num_undelivered_messages",
                "orders-1-dlt-sub",
            ),
            (
                "oldest age",
                "subscription/oldest_unacked_message_age",
                "orders-1-dlt-sub",
            ),
            (
                "flow",
                "subscription/dead_letter_message_count",
                "orders-1-sub",
            ),
            ("flow", "topic/send_message_operation_count", "orders-1"),
        ] {
            let want = format!(
                "{what} from Cloud Monitoring unknown: {at} did not answer {metric} for {resource}: GET projects.timeSeries.list: HTTP {code}"
            );
            assert!(
                notes.iter().any(|n| n.starts_with(&want)),
                "{want}\n{notes:#?}"
            );
        }
        // Four listings, none retried (403 and 500 are final answers).
        assert_eq!(fake.listings().len(), 4);
    }
}

/// On an emulator target Cloud Monitoring is off unless an endpoint is named, and
/// `enabled: false` turns a named one off: no listing, and the notes say why.
#[test]
fn monitoring_is_off_on_an_emulator_without_an_endpoint_and_when_disabled() {
    for (monitoring, why) in [
        ("", "the emulator has no metrics"),
        (
            "    monitoring: {enabled: false, endpoint: \"http://127.0.0.1:9/v3\"}\n",
            "`monitoring.enabled: false`",
        ),
    ] {
        let fake = FakeMonitoring::with_pubsub();
        let dir = offline(&fake, monitoring, 1);
        let out = status(dir.path(), &["--no-peek"]);
        out.ok();
        assert_eq!(fake.listings().len(), 0);
        let d = &out.json("status")["channels"][0]["deadLetter"];
        assert!(d["depth"].is_null(), "{d:#}");
        let notes = d["notes"].to_string();
        assert!(notes.contains(why), "{notes}");
    }
}

// ------------------------------------------------------------------------------ live

/// The emulator holds 10 dead letters; the fake Cloud Monitoring says the same, 180 s old,
/// and 10 dead-lettered of 1,000 sent. `status --no-peek` shows the metric's depth, age and a
/// 1% rate; `status` (which pulls) shows the exact pull count and says what the metric said;
/// the exporter publishes the depth and both counters; a refusing endpoint leaves status at
/// exit 0 with a note; and nothing was consumed.
#[test]
fn pubsub_status_and_the_exporter_read_cloud_monitoring_beside_the_emulator() {
    let Some(f) = support::pubsub::Fixture::new() else {
        return;
    };
    let fake = FakeMonitoring::start();
    f.edit_targets(|t| {
        t.replace(
            "    emulatorHost: ",
            &format!(
                "    monitoring: {{endpoint: \"{}\"}}\n    emulatorHost: ",
                fake.endpoint()
            ),
        )
    });
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let mut published = std::collections::BTreeSet::new();
    for i in 0..10 {
        published.insert(f.rest.publish(&dlt, &format!("dead {i}")));
    }
    let run = |extra: &[&str]| {
        let mut args = vec!["status", "channel.yaml", "--format", "json"];
        args.extend_from_slice(extra);
        let out = f.run(&args);
        out.json("status")["channels"][0]["deadLetter"].clone()
    };
    let d = run(&["--no-peek"]);
    assert_eq!(d["depth"], 10, "{d:#}");
    assert_eq!(d["depthDetail"]["basis"], "cloud-monitoring", "{d:#}");
    assert_eq!(
        (d["oldestAgeSeconds"].as_f64(), d["oldestAgeBasis"].as_str()),
        (Some(180.0), Some("metric")),
        "{d:#}"
    );
    assert_eq!(d["flow"]["window"]["rate"], 0.01, "{d:#}");
    // Pulled to an empty pull: exact and newer than the metric, so it is the depth.
    let d = run(&[]);
    assert_eq!(d["depth"], 10, "{d:#}");
    assert_eq!(d["depthDetail"]["basis"], "pull", "{d:#}");
    assert!(
        d["notes"]
            .to_string()
            .contains("the count by pulling is exact and newer"),
        "{d:#}"
    );
    assert_eq!(d["flow"]["window"]["rate"], 0.01, "{d:#}");

    let e = support::exporter::Exporter::start(&f, &["--interval", "1s"]);
    let body = e.first_reading();
    let ch = format!("channel=\"{}\"", f.channel);
    let sample = |metric: &str| -> Option<f64> {
        body.lines()
            .filter(|l| l.starts_with(&format!("{metric}{{")))
            .find(|l| l.contains(&ch))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    };
    assert_eq!(sample("dlq_depth"), Some(10.0), "{body}");
    assert_eq!(
        sample("dlq_dead_lettered_messages_total"),
        Some(10.0),
        "{body}"
    );
    assert_eq!(sample("dlq_source_messages_total"), Some(1000.0), "{body}");
    drop(e);

    for code in [403, 500] {
        fake.fail_with(code);
        let out = f.run(&["status", "channel.yaml", "--format", "json", "--no-peek"]);
        out.ok_with(format!("HTTP {code}"));
        let d = &out.json("status")["channels"][0]["deadLetter"];
        assert!(d["depth"].is_null(), "{d:#}");
        let notes = d["notes"].to_string();
        assert!(
            notes.contains(&format!(
                "{} did not answer subscription/num_undelivered_messages",
                fake.endpoint()
            )) && notes.contains(&format!("HTTP {code}")),
            "{notes}"
        );
    }
    assert_eq!(f.rest.take_ids(&dl_sub, 10), published, "nothing consumed");
}
