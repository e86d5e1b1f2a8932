//! What `dlqctl status` prints, in every format, snapshotted from one fixed report: a DLQ
//! with messages of three classes and a hostile sample, an empty one, one that does not exist,
//! a Kafka topic counted as retained, and a channel whose target could not be read.

use dlqctl::spec::duration::Duration;
use dlqctl::spec::resolve::{DeadLetterRole, DiscardResolved};
use std::collections::BTreeMap;

use dlqctl::cli::ColorChoice;
use dlqctl::printer::Printer;
use dlqctl::spec::model::Backend;
use dlqctl::status::resolution::Resolution;
use dlqctl::status::{
    AgeBasis, Body, ChannelStatus, DeadLetterReport, Depth, FailureGroup, Flow, FlowWindow,
    Measure, QueueDepth, Report, Sample, render, safe,
};

fn depth(n: u64) -> Depth {
    Depth {
        total: Some(n),
        ready: Some(n),
        in_flight: Some(0),
        delayed: None,
        measure: Measure::Waiting,
        exists: true,
        lower_bound: false,
        basis: None,
    }
}

fn report() -> Report {
    let holding = DeadLetterReport {
        by_source: Default::default(),
        name: "orders.dlq".into(),
        depth: depth(7),
        oldest_age_seconds: Some(3725.4),
        oldest_age_since: Some("dead-lettered"),
        oldest_age_basis: Some(AgeBasis::Head),
        by_error_class: BTreeMap::from([
            ("poison".into(), 3),
            ("transient_exhausted".into(), 2),
            ("com.acme.Bad|Order".into(), 1),
        ]),
        by_class_label: BTreeMap::from([
            ("poison".into(), 3),
            ("transient_exhausted".into(), 2),
            ("other".into(), 1),
        ]),
        sampled: 6,
        exact: false,
        samples: vec![
            Sample {
                id: "m-1".into(),
                error_class: "poison".into(),
                raw_error_class: Some("com.acme.ParseError".into()),
                error_message: Some("cannot parse `amount`".into()),
                age_seconds: Some(3725.4),
                age_since: Some("dead-lettered"),
                attempts: Some(4),
                source: Some("orders.process".into()),
                headers: vec![
                    ("dlq-error-class".into(), "poison".into()),
                    ("dlq-attempts".into(), "4".into()),
                ],
                body: Body::Text {
                    length: 40,
                    truncated: true,
                    text: safe("{\"order\": 1, \"note\": \"```<b>\u{1b}[31m"),
                },
            },
            Sample {
                id: "m-2".into(),
                error_class: "transient_exhausted".into(),
                raw_error_class: None,
                error_message: None,
                age_seconds: Some(65.0),
                age_since: Some("published"),
                attempts: None,
                source: None,
                headers: vec![],
                body: Body::Binary {
                    length: 5,
                    hex_prefix: "fffe001b9b".into(),
                },
            },
        ],
        notes: vec!["a note from the backend".into()],
        fingerprints: vec![],
        // Issue 36: the rate beside depth and age, and per declared class an estimate.
        flow: Flow {
            dead_lettered_total: Some(1234),
            source_total: Some(98_765),
            source: Some("orders.process".into()),
            window: Some(FlowWindow {
                seconds: 300,
                dead_lettered: Some(10),
                source: Some(1000),
            }),
            basis: Some("rabbitmq"),
            ..Flow::default()
        },
        by_class_in_window: BTreeMap::from([("poison".into(), 6.67), ("other".into(), 3.33)]),
        groups: None,
        selected: None,
    };
    let empty = DeadLetterReport {
        by_source: Default::default(),
        name: "payments-dlq".into(),
        depth: Depth {
            delayed: Some(0),
            ..depth(0)
        },
        oldest_age_seconds: None,
        oldest_age_since: None,
        oldest_age_basis: None,
        by_error_class: BTreeMap::new(),
        by_class_label: BTreeMap::new(),
        sampled: 0,
        exact: true,
        samples: vec![],
        notes: vec![],
        fingerprints: vec![],
        flow: Flow::default(),
        by_class_in_window: BTreeMap::new(),
        groups: None,
        selected: None,
    };
    let kafka = DeadLetterReport {
        by_source: Default::default(),
        name: "inventory-dlt".into(),
        depth: Depth::total(2, Measure::Retained),
        oldest_age_seconds: Some(90_061.0),
        oldest_age_since: Some("published"),
        oldest_age_basis: Some(AgeBasis::All),
        by_error_class: BTreeMap::from([("unknown".into(), 2)]),
        by_class_label: BTreeMap::from([("other".into(), 2)]),
        sampled: 2,
        exact: true,
        samples: vec![],
        notes: vec![],
        fingerprints: vec![],
        flow: Flow {
            dead_lettered_total: Some(2),
            source_total: Some(40),
            source: Some("inventory".into()),
            window: Some(FlowWindow {
                seconds: 3600,
                dead_lettered: Some(0),
                source: Some(0),
            }),
            ..Flow::default()
        },
        by_class_in_window: BTreeMap::new(),
        groups: None,
        selected: None,
    };
    let missing = DeadLetterReport {
        by_source: Default::default(),
        name: "new-dlq".into(),
        depth: Depth::missing(),
        oldest_age_seconds: None,
        oldest_age_since: None,
        oldest_age_basis: None,
        by_error_class: BTreeMap::new(),
        by_class_label: BTreeMap::new(),
        sampled: 0,
        exact: false,
        samples: vec![],
        notes: vec![],
        fingerprints: vec![],
        flow: Flow::default(),
        by_class_in_window: BTreeMap::new(),
        groups: None,
        selected: None,
    };
    let channel =
        |name: &str, backend, dl: Option<DeadLetterReport>, error: Option<&str>| ChannelStatus {
            discard: None,
            channel: name.into(),
            target: format!("local-{}", backend_name(backend)),
            backend,
            role: DeadLetterRole::DeadLetter,
            dead_letter_name: dl
                .as_ref()
                .map_or_else(|| "refunds-dlq".into(), |d| d.name.clone()),
            dead_letter: dl,
            queues: if name == "orders" {
                vec![
                    QueueDepth {
                        name: "orders.process".into(),
                        role: "main",
                        depth: depth(12),
                    },
                    QueueDepth {
                        name: "orders.retry".into(),
                        role: "retry",
                        depth: Depth::missing(),
                    },
                ]
            } else {
                vec![]
            },
            error: error.map(str::to_owned),
            resolution: None,
        };
    Report {
        channels: vec![
            channel("orders", Backend::Rabbitmq, Some(holding), None),
            ChannelStatus {
                // What the journal says: 42 messages left in 3 runs over the last 7 days.
                resolution: Some(Resolution {
                    window_seconds: 7 * 86_400,
                    runs: 3,
                    messages: 42,
                    unknown: 1,
                    exact: true,
                    p50_seconds: Some(2 * 3600 + 5 * 60),
                    p90_seconds: Some(86_400 + 3 * 3600),
                }),
                ..channel("payments", Backend::Sqs, Some(empty), None)
            },
            ChannelStatus {
                // A written decision: shown as such, the spec's words made safe (a newline).
                discard: Some(DiscardResolved {
                    after: Duration::parse("30d").expect("a duration"),
                    reason: Some("superseded by the nightly re-sync\nof stock levels".into()),
                    owner: Some("team-inventory".into()),
                }),
                ..channel("inventory", Backend::Kafka, Some(kafka), None)
            },
            channel("fresh", Backend::Rabbitmq, Some(missing), None),
            channel(
                "refunds",
                Backend::Sqs,
                None,
                Some(
                    "target `local-sqs`: sqs:GetQueueUrl on queue refunds-dlq: cannot reach the endpoint",
                ),
            ),
        ],
        generated_at_ms: 1_796_119_200_000,
    }
}

fn backend_name(b: Backend) -> &'static str {
    b.as_str()
}

#[test]
fn status_renders_in_every_format() {
    let r = report();
    let printer = Printer::new(ColorChoice::Never);
    insta::assert_snapshot!("status-human", render::human(&r, &printer));
    insta::assert_snapshot!("status-markdown", render::markdown(&r));
    insta::assert_snapshot!("status-json", render::json(&r));
    insta::assert_snapshot!("status-openmetrics", render::openmetrics(&r));
}

/// Issue 34: a channel's invalid-message queue and exception-based DLTs are entries of their
/// own, after its DLQ, each labelled by role (human: in the heading; markdown: beside the
/// name; JSON: `role`; metrics: the `role` label); the channels are counted once.
#[test]
fn status_renders_each_destination_of_a_channel_with_its_role() {
    let dl = |name: &str, n: u64, class: &str| DeadLetterReport {
        by_source: Default::default(),
        name: name.into(),
        depth: depth(n),
        oldest_age_seconds: Some(60.0),
        oldest_age_since: Some("published"),
        oldest_age_basis: Some(AgeBasis::All),
        by_error_class: BTreeMap::from([(class.into(), n)]),
        // As the exporter labels them without class rules: built-in names, else `other`.
        by_class_label: BTreeMap::from([(
            if class.contains('.') { "other" } else { class }.into(),
            n,
        )]),
        sampled: n,
        exact: true,
        samples: vec![],
        notes: vec![],
        fingerprints: vec![],
        flow: Flow::default(),
        by_class_in_window: BTreeMap::new(),
        groups: None,
        selected: None,
    };
    let entry = |role, name: &str, n: u64, class: &str| ChannelStatus {
        channel: "orders".into(),
        target: "local-kafka".into(),
        backend: Backend::Kafka,
        role,
        dead_letter_name: name.into(),
        discard: None,
        dead_letter: Some(dl(name, n, class)),
        queues: if role == DeadLetterRole::DeadLetter {
            vec![QueueDepth {
                name: "orders".into(),
                role: "main",
                depth: depth(0),
            }]
        } else {
            vec![]
        },
        error: None,
        resolution: None,
    };
    let r = Report {
        channels: vec![
            entry(
                DeadLetterRole::DeadLetter,
                "orders-dlt",
                2,
                "transient_exhausted",
            ),
            entry(DeadLetterRole::Invalid, "orders-invalid-dlt", 1, "poison"),
            entry(
                DeadLetterRole::Exception,
                "orders-poison-dlt",
                3,
                "com.acme.Bad",
            ),
        ],
        generated_at_ms: 1_796_119_200_000,
    };
    let printer = Printer::new(ColorChoice::Never);
    insta::assert_snapshot!("status-roles-human", render::human(&r, &printer));
    insta::assert_snapshot!("status-roles-markdown", render::markdown(&r));
    insta::assert_snapshot!("status-roles-json", render::json(&r));
    insta::assert_snapshot!("status-roles-openmetrics", render::openmetrics(&r));
}

/// Issue 37: with `--group-by fingerprint`, the failure groups of each channel: a table in
/// the human and markdown outputs (a message that would break the table made harmless),
/// `deadLetter.groups` in JSON; never in the metrics, whose series must stay bounded.
#[test]
fn failure_groups_render_in_human_markdown_and_json_and_never_as_metrics() {
    let mut r = report();
    let now = r.generated_at_ms;
    let group =
        |id: &str, count, class: &str, message: &str, first, last, ids: &[&str]| FailureGroup {
            id: id.into(),
            class: class.into(),
            message: safe(message),
            count,
            first_seen_ms: first,
            last_seen_ms: last,
            sample_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
        };
    let groups = vec![
        group(
            "641a4d89f69d",
            3,
            "poison",
            "order <n> failed: amount <n> exceeds limit",
            Some(now - 3_725_000),
            Some(now - 65_000),
            &["m-1", "m-4", "m-5"],
        ),
        group(
            "0c3e5a7b9d1f",
            2,
            "transient_exhausted",
            "timeout after <n> ms calling inventory-<hex>",
            Some(now - 600_000),
            Some(now - 120_000),
            &["m-2", "m-3"],
        ),
        group(
            "9f8e7d6c5b4a",
            1,
            "com.acme.Bad|Order",
            "invalid field <str> | `x` \u{1b}[31m and a very long tail that goes on and on beyond eighty characters",
            None,
            None,
            &["m-6"],
        ),
    ];
    let without = render::openmetrics(&r);
    let dl = r.channels[0].dead_letter.as_mut().expect("a DLQ");
    dl.groups = Some(groups);
    let printer = Printer::new(ColorChoice::Never);
    insta::assert_snapshot!("status-groups-human", render::human(&r, &printer));
    insta::assert_snapshot!("status-groups-markdown", render::markdown(&r));
    let doc: serde_json::Value = serde_json::from_str(&render::json(&r)).expect("JSON");
    let g = &doc["channels"][0]["deadLetter"]["groups"];
    assert_eq!(g.as_array().map(Vec::len), Some(3), "{g}");
    assert_eq!(
        g[0],
        serde_json::json!({
            "id": "641a4d89f69d",
            "class": "poison",
            "message": "order <n> failed: amount <n> exceeds limit",
            "count": 3,
            "firstSeen": "2026-12-01T08:57:55Z",
            "lastSeen": "2026-12-01T09:58:55Z",
            "sampleIds": ["m-1", "m-4", "m-5"],
        })
    );
    assert!(g[2]["firstSeen"].is_null());
    // Not asked for: no `groups` key at all.
    assert!(doc["channels"][1]["deadLetter"].get("groups").is_none());
    // The metrics are the same with groups as without.
    assert_eq!(render::openmetrics(&r), without);
}

/// Issue 37: `status --where`/`--group` counts only what it chose, and says of how many
/// read; where the expression failed is a warning line, without the message's values.
#[test]
fn a_selection_says_what_it_chose_of_what_was_read() {
    use dlqctl::status::{Selected, WhereFailures};
    let mut r = report();
    let dl = r.channels[0].dead_letter.as_mut().expect("a DLQ");
    dl.selected = Some(Selected {
        matched: 2,
        read: 6,
        failures: Some(WhereFailures {
            count: 1,
            first_id: "m-6".into(),
            first_error: "cannot index <str> with <str>".into(),
        }),
    });
    let printer = Printer::new(ColorChoice::Never);
    insta::assert_snapshot!("status-selected-human", render::human(&r, &printer));
    insta::assert_snapshot!("status-selected-markdown", render::markdown(&r));
    let doc: serde_json::Value = serde_json::from_str(&render::json(&r)).expect("JSON");
    assert_eq!(
        doc["channels"][0]["deadLetter"]["selected"],
        serde_json::json!({
            "matched": 2,
            "read": 6,
            "whereFailures": {"count": 1, "firstId": "m-6", "firstError": "cannot index <str> with <str>"},
        })
    );
    // Not asked for: no `selected` key at all.
    assert!(doc["channels"][1]["deadLetter"].get("selected").is_none());
}

#[test]
fn ages_read_as_people_say_them() {
    assert_eq!(dlqctl::status::age::age(0.4), "0s");
    assert_eq!(dlqctl::status::age::age(59.6), "1m 0s");
    assert_eq!(dlqctl::status::age::age(3725.0), "1h 2m");
    assert_eq!(dlqctl::status::age::age(90_061.0), "1d 1h");
}

/// Issue 34: messages wait and no age can be told: `unknown` in every format (JSON's age
/// null), the note saying why; the exporter's first-seen estimate is shown as a lower bound.
#[test]
fn an_unknown_age_is_said_in_every_format_and_a_first_seen_one_is_a_lower_bound() {
    let unknown = DeadLetterReport {
        by_source: Default::default(),
        name: "orders.dlq".into(),
        depth: depth(2),
        oldest_age_seconds: None,
        oldest_age_since: None,
        oldest_age_basis: Some(AgeBasis::Unknown),
        by_error_class: BTreeMap::from([("unknown".into(), 2)]),
        by_class_label: BTreeMap::from([("other".into(), 2)]),
        sampled: 2,
        exact: true,
        samples: vec![],
        notes: vec!["age unknown: none of the 2 messages read carries a time".into()],
        fingerprints: vec![1, 2],
        flow: Flow::default(),
        by_class_in_window: BTreeMap::new(),
        groups: None,
        selected: None,
    };
    let channel = |dl: DeadLetterReport| ChannelStatus {
        role: DeadLetterRole::DeadLetter,
        discard: None,
        channel: "orders".into(),
        target: "local-rabbitmq".into(),
        backend: Backend::Rabbitmq,
        dead_letter_name: dl.name.clone(),
        dead_letter: Some(dl),
        queues: vec![],
        error: None,
        resolution: None,
    };
    let r = Report {
        channels: vec![channel(unknown.clone())],
        generated_at_ms: 1_796_119_200_000,
    };
    let printer = Printer::new(ColorChoice::Never);
    let human = render::human(&r, &printer);
    assert!(
        human.contains("  oldest    unknown (see the note)\n")
            && human.contains("note: age unknown: none of the 2 messages read carries a time"),
        "{human}"
    );
    let md = render::markdown(&r);
    assert!(md.contains("| 2 | unknown |"), "{md}");
    let doc: serde_json::Value = serde_json::from_str(&render::json(&r)).expect("JSON");
    let dl = &doc["channels"][0]["deadLetter"];
    assert_eq!(dl["oldestAgeBasis"], "unknown");
    assert!(dl["oldestAgeSeconds"].is_null());
    let metrics = render::openmetrics(&r);
    assert!(
        metrics.contains("dlq_oldest_message_age_known{channel=\"orders\",target=\"local-rabbitmq\",backend=\"rabbitmq\",queue=\"orders.dlq\",role=\"dead-letter\"} 0\n")
            && !metrics.contains("dlq_oldest_message_age_seconds{"),
        "{metrics}"
    );

    let first_seen = DeadLetterReport {
        by_source: Default::default(),
        oldest_age_seconds: Some(125.0),
        oldest_age_since: Some("first-seen"),
        oldest_age_basis: Some(AgeBasis::FirstSeen),
        ..unknown
    };
    let r = Report {
        channels: vec![channel(first_seen)],
        generated_at_ms: 1_796_119_200_000,
    };
    let human = render::human(&r, &printer);
    assert!(
        human.contains(
            "  oldest    2m 5s (at least: since the exporter first saw it; no message carries a time)\n"
        ),
        "{human}"
    );
    let doc: serde_json::Value = serde_json::from_str(&render::json(&r)).expect("JSON");
    assert_eq!(
        doc["channels"][0]["deadLetter"]["oldestAgeBasis"],
        "first-seen"
    );
    let metrics = render::openmetrics(&r);
    assert!(
        metrics.contains("dlq_oldest_message_age_seconds{channel=\"orders\",target=\"local-rabbitmq\",backend=\"rabbitmq\",queue=\"orders.dlq\",role=\"dead-letter\",basis=\"first-seen\"} 125\n")
            && metrics.contains("dlq_oldest_message_age_known{channel=\"orders\",target=\"local-rabbitmq\",backend=\"rabbitmq\",queue=\"orders.dlq\",role=\"dead-letter\"} 0\n"),
        "{metrics}"
    );
}
