//! Unit tests of the Pub/Sub backend: the JSON ↔ property mapping, the update mask, the
//! desired resources and their order, the plan rules, import, and the IAM grants against
//! recorded requests (the emulator has no IAM, so this is the only place they run).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::desired::desired;
use super::plan::refine;
use super::read::Reader;
use super::*;
use crate::backend::kit::doors::Review as _;
use crate::plan::{Action, Change, FieldChange, diff};
use crate::resource::{Desired, Role, TimeUnit};
use crate::spec::model::Target;

/// The issue's example as a resolved channel on a Pub/Sub target named `gcp`.
pub(super) fn example(extra: &str) -> crate::spec::resolve::Resolved {
    let text = format!(
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: payments-transactions-pending}}\nspec:\n  target: gcp\n  retry: {{maxAttempts: 5}}\n  deadLetter: {{name: \"{{channel}}-dlt\"}}\n  pubsub: {{subscription: payment-processor-sub, ackDeadline: 30s}}\n{extra}"
    );
    let ws = crate::spec::load::load_str("c.yaml", &text);
    assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
    crate::spec::resolve::resolve(&ws.channels[0].value, "gcp", &target()).expect("resolves")
}

fn target() -> Target {
    serde_json::from_value(json!({"backend": "pubsub", "project": "my-project"})).expect("target")
}

#[test]
fn the_issue_example_is_four_resources_dead_letter_side_first() {
    let d = desired(&example(""));
    let got: Vec<(Kind, &str, Role)> = d
        .iter()
        .map(|d| (d.id.kind, d.id.name.as_str(), d.role))
        .collect();
    assert_eq!(
        got,
        [
            (
                Kind::Topic,
                "payments-transactions-pending-dlt",
                Role::DeadLetter
            ),
            (
                Kind::Subscription,
                "payments-transactions-pending-dlq-sub",
                Role::DeadLetterSubscription
            ),
            (Kind::Topic, "payments-transactions-pending", Role::Main),
            (
                Kind::Subscription,
                "payment-processor-sub",
                Role::Subscription
            ),
        ]
    );
    // The roles put the dead-letter topic and its subscription before what points at them.
    assert!(Role::DeadLetter < Role::DeadLetterSubscription);
    assert!(Role::DeadLetterSubscription < Role::Main && Role::Main < Role::Subscription);
    let sub = &d[3].props;
    assert_eq!(sub.get(MAX_ATTEMPTS), Some(&json!(5)));
    assert_eq!(sub.get(ACK_DEADLINE), Some(&json!(30)));
    assert_eq!(sub.get(RETENTION), Some(&json!(604_800)));
    assert_eq!(
        sub.get(MIN_BACKOFF),
        Some(&Value::Null),
        "no backoff: no retry policy"
    );
    assert_eq!(
        sub.get(DEAD_LETTER_TOPIC),
        Some(&json!("payments-transactions-pending-dlt"))
    );
    assert_eq!(d[1].props.get(DEAD_LETTER_TOPIC), Some(&Value::Null));
}

/// The emulator's answer for the example's subscription, as measured.
fn emulator_subscription() -> Value {
    json!({
        "name": "projects/my-project/subscriptions/payment-processor-sub",
        "topic": "projects/my-project/topics/payments-transactions-pending",
        "pushConfig": {},
        "ackDeadlineSeconds": 30,
        "messageRetentionDuration": "604800s",
        "labels": {"managed-by": "dlqctl", "dlqctl-channel": "payments-transactions-pending"},
        "deadLetterPolicy": {
            "deadLetterTopic": "projects/my-project/topics/payments-transactions-pending-dlt",
            "maxDeliveryAttempts": 5
        },
        "expirationPolicy": {}
    })
}

#[test]
fn what_pubsub_returns_reads_back_as_the_desired_shape_and_plans_empty() {
    let d = desired(&example(""));
    let live = live_subscription("my-project", &emulator_subscription());
    assert_eq!(diff(&d[3], Some(&live)), None, "{:?}", live.props);
    assert_eq!(crate::plan::unmanaged(&d[3], &live), Vec::<String>::new());
    assert_eq!(live.messages, None, "REST cannot count a backlog");
    // Another project's dead-letter topic stays whole; durations become seconds.
    let mut v = emulator_subscription();
    v["deadLetterPolicy"]["deadLetterTopic"] = json!("projects/other/topics/x");
    v["retryPolicy"] = json!({"minimumBackoff": "0.500s"});
    v["expirationPolicy"] = json!({"ttl": "2678400s"});
    let l = live_subscription("my-project", &v);
    assert_eq!(
        l.props.get(DEAD_LETTER_TOPIC),
        Some(&json!("projects/other/topics/x"))
    );
    assert_eq!(l.props.get(MIN_BACKOFF), Some(&json!(0.5)));
    assert_eq!(
        l.props.get(MAX_BACKOFF),
        Some(&json!(600)),
        "Pub/Sub's default"
    );
    assert_eq!(l.props.get(EXPIRY), Some(&json!(2_678_400)));
    assert_eq!(
        labels(&l).get(LABEL_CHANNEL).map(String::as_str),
        Some("payments-transactions-pending")
    );
}

#[test]
fn an_update_patches_exactly_the_owned_fields_that_differ() {
    let r = example("");
    let d = desired(&r);
    let mut live = live_subscription("my-project", &emulator_subscription());
    live.props.insert(MAX_ATTEMPTS.into(), json!(9));
    live.props.insert(ACK_DEADLINE.into(), json!(30));
    let c = diff(&d[3], Some(&live)).expect("a change");
    assert_eq!(c.action, Action::Update);
    let fields: Vec<String> = c
        .fields
        .iter()
        .map(|f| mask_field(&f.key).to_owned())
        .collect();
    assert_eq!(fields, ["deadLetterPolicy"]);
    let (body, mask) = subscription_body("my-project", &c.desired, Some(&fields));
    assert_eq!(mask, ["deadLetterPolicy"]);
    assert_eq!(
        body,
        json!({"deadLetterPolicy": {
            "deadLetterTopic": "projects/my-project/topics/payments-transactions-pending-dlt",
            "maxDeliveryAttempts": 5
        }})
    );
    // Removing the retry policy: the mask names it and the body leaves it out.
    let (body, mask) =
        subscription_body("my-project", &c.desired, Some(&["retryPolicy".to_owned()]));
    assert_eq!((body, mask), (json!({}), vec!["retryPolicy".to_owned()]));
    // A create sends everything, with full paths and durations as text.
    let (body, _) = subscription_body("my-project", &d[3].props, None);
    assert_eq!(
        body["topic"],
        json!("projects/my-project/topics/payments-transactions-pending")
    );
    assert_eq!(body["messageRetentionDuration"], json!("604800s"));
    assert_eq!(body["expirationPolicy"], json!({}));
}

fn change(fields: Vec<FieldChange>) -> Change {
    let d = Desired {
        id: subscription_id("gcp", "payment-processor-sub"),
        channel: "c".into(),
        role: Role::Subscription,
        props: crate::resource::Props::new(),
        immutable: false,
        present: true,
    };
    let mut c = diff(&d, None).unwrap_or_else(|| unreachable!());
    c.action = Action::Update;
    c.fields = fields;
    c
}

#[test]
fn a_new_topic_is_a_replace_and_a_lower_retention_destroys_messages() {
    let mut c = change(vec![FieldChange {
        key: TOPIC.into(),
        old: Some(json!("a")),
        new: Some(json!("b")),
    }]);
    refine(&mut c);
    assert_eq!(c.action, Action::Replace);
    assert!(
        c.may_lose_messages(),
        "a subscription's backlog is unknown: guarded"
    );
    let mut c = change(vec![FieldChange {
        key: RETENTION.into(),
        old: Some(json!(604_800)),
        new: Some(json!(3600)),
    }]);
    refine(&mut c);
    assert!(
        c.destructive
            .unwrap_or_default()
            .contains("604800 s to 3600 s")
    );
}

#[test]
fn only_an_update_of_a_subscription_is_refined() {
    // A create that names a topic is a create; an equal retention loses nothing.
    let mut c = change(vec![FieldChange {
        key: TOPIC.into(),
        old: None,
        new: Some(json!("b")),
    }]);
    c.action = Action::Create;
    refine(&mut c);
    assert_eq!(c.action, Action::Create);
    let mut c = change(vec![FieldChange {
        key: RETENTION.into(),
        old: Some(json!(3600)),
        new: Some(json!(3600)),
    }]);
    refine(&mut c);
    assert_eq!((c.action, c.destructive), (Action::Update, None));
    // A topic's retention keeps messages for seeking back, not a subscription's backlog.
    let mut c = change(vec![FieldChange {
        key: RETENTION.into(),
        old: Some(json!(604_800)),
        new: Some(json!(3600)),
    }]);
    c.resource = topic_id("gcp", "t");
    refine(&mut c);
    assert_eq!((c.action, c.destructive), (Action::Update, None));
}

#[test]
fn subscription_and_topic_durations_are_in_seconds_and_nothing_else_is() {
    let sub = change(Vec::new());
    for key in [RETENTION, MIN_BACKOFF, MAX_BACKOFF, ACK_DEADLINE, EXPIRY] {
        assert_eq!(
            plan::duration_unit(&sub, key),
            Some(TimeUnit::Seconds),
            "{key}"
        );
    }
    assert_eq!(plan::duration_unit(&sub, TOPIC), None);
    assert_eq!(plan::duration_unit(&sub, MAX_ATTEMPTS), None);
    let mut topic = change(Vec::new());
    topic.resource = topic_id("gcp", "t");
    assert_eq!(
        plan::duration_unit(&topic, RETENTION),
        Some(TimeUnit::Seconds)
    );
    assert_eq!(plan::duration_unit(&topic, ACK_DEADLINE), None);
}

#[test]
fn durations_round_trip_through_pubsub_text() {
    assert_eq!(seconds("600s"), Some(json!(600)));
    assert_eq!(seconds("0.500s"), Some(json!(0.5)));
    assert_eq!(seconds("3.000s"), Some(json!(3)));
    assert_eq!(seconds("600"), None);
    assert_eq!(duration_text(&json!(600)).as_deref(), Some("600s"));
    assert_eq!(duration_text(&json!(0.5)).as_deref(), Some("0.5s"));
    assert_eq!(short_name("p", "projects/p/topics/t"), "t");
    assert_eq!(
        short_name("p", "projects/q/topics/t"),
        "projects/q/topics/t"
    );
}

#[test]
fn ownership_speaks_of_labels() {
    let none = std::collections::BTreeMap::new();
    let p = ownership_problem(&none, "c").unwrap_or_default();
    assert!(p.contains("not labelled `managed-by: dlqctl`"), "{p}");
}

#[test]
fn a_hand_made_subscription_imports_as_the_example() {
    let mut live = std::collections::BTreeMap::new();
    let mut sub = emulator_subscription();
    sub["labels"] = json!({});
    live.insert(
        subscription_id("gcp", "payment-processor-sub"),
        live_subscription("my-project", &sub),
    );
    for t in [
        "payments-transactions-pending",
        "payments-transactions-pending-dlt",
    ] {
        live.insert(topic_id("gcp", t), live_topic(&json!({"name": t})));
    }
    live.insert(
        subscription_id("gcp", "payments-transactions-pending-dlt-sub"),
        live_subscription(
            "my-project",
            &json!({
                "topic": "projects/my-project/topics/payments-transactions-pending-dlt",
                "ackDeadlineSeconds": 10,
                "messageRetentionDuration": "604800s"
            }),
        ),
    );
    let (c, unmatched) = import::group(&live, "gcp", &target());
    assert!(unmatched.is_empty(), "{unmatched:?}");
    assert_eq!(c.len(), 1);
    let r = crate::spec::resolve::resolve(&c[0].channel, "gcp", &target()).expect("resolves");
    for d in desired(&r) {
        assert_eq!(diff(&d, live.get(&d.id)), None, "{}", d.id);
    }
    assert_eq!(c[0].to_adopt.len(), 4, "nothing is labelled");
}

/// The requests a fake server saw: request line, JSON body.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// A fake Pub/Sub on 127.0.0.1 that answers from `answers` (by method and path prefix) and
/// records each request line and body (at most 16 connections).
fn recording(answers: Vec<(&'static str, &'static str, Value)>) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(16) {
            let Ok(mut stream) = stream else { continue };
            let mut r = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            if r.read_line(&mut line).is_err() {
                continue;
            }
            let mut len = 0;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let mut parts = line.split_whitespace();
            let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let answer = answers
                .iter()
                .find(|(m, p, _)| *m == method && path.starts_with(p))
                .map_or_else(|| json!({}), |(_, _, a)| a.clone());
            if let Ok(mut l) = log.lock() {
                l.push((format!("{method} {path}"), body));
            }
            let text = answer.to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    (url, seen)
}

#[test]
fn grant_service_agent_adds_the_two_bindings_and_nothing_else() {
    let (url, seen) = recording(vec![
        (
            "GET",
            "/v1/projects/my-project/topics/payments-transactions-pending-dlt:getIamPolicy",
            json!({"etag": "BwX1", "bindings": [{"role": "roles/pubsub.viewer", "members": ["user:a@example.com"]}]}),
        ),
        (
            "GET",
            "/v1/projects/my-project/subscriptions/payment-processor-sub:getIamPolicy",
            json!({"etag": "BwX2", "bindings": [{"role": "roles/pubsub.subscriber", "members": ["serviceAccount:service-123@gcp-sa-pubsub.iam.gserviceaccount.com"]}]}),
        ),
        (
            "GET",
            "/v1/projects/my-project/subscriptions/payment-processor-sub",
            emulator_subscription(),
        ),
    ]);
    let mut t = target();
    t.grant_service_agent = Some(true);
    t.project_number = Some("123".into());
    let stats = Arc::new(crate::backend::wire::Stats::default());
    let (_, bearer) = read::endpoint("gcp", &t, |v| {
        (v == read::TOKEN_ENV).then(|| "tok".to_owned())
    })
    .expect("token");
    let http = crate::backend::wire::http::ReadHttp::new(
        crate::backend::wire::http::HttpConfig {
            target: "gcp".into(),
            base: url,
            user: None,
            password: None,
            bearer,
            creds_hint: read::TOKEN_ENV.into(),
            insecure: false,
            budget: crate::backend::wire::retry::ReadBudget::new(std::time::Duration::from_secs(
                10,
            )),
        },
        stats,
    )
    .expect("client");
    let reader = Reader {
        target: "gcp".into(),
        http,
        project: "my-project".into(),
        prefixes: Vec::new(),
        emulator: false,
        grant: Some("123".into()),
        monitoring: Err("not read here".into()),
    };
    let d = desired(&example(""));
    let mut c = diff(&d[3], None).expect("create");
    // Only the grants: the subscription itself is already there.
    c.action = Action::Update;
    c.fields.clear();
    let w = reader.into_writer();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(w.apply(&c, false))
        .expect("grants");
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let lines: Vec<&str> = seen.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        lines,
        [
            "GET /v1/projects/my-project/subscriptions/payment-processor-sub",
            "GET /v1/projects/my-project/topics/payments-transactions-pending-dlt:getIamPolicy",
            "POST /v1/projects/my-project/topics/payments-transactions-pending-dlt:setIamPolicy",
            "GET /v1/projects/my-project/subscriptions/payment-processor-sub:getIamPolicy",
        ],
        "the subscriber binding was there already: no setIamPolicy for it"
    );
    let member = "serviceAccount:service-123@gcp-sa-pubsub.iam.gserviceaccount.com";
    assert_eq!(
        seen[2].1,
        json!({"policy": {"etag": "BwX1", "bindings": [
            {"role": "roles/pubsub.viewer", "members": ["user:a@example.com"]},
            {"role": "roles/pubsub.publisher", "members": [member]}
        ]}})
    );
}

#[test]
fn the_iam_note_names_the_exact_gcloud_commands() {
    let cmd = plan::iam_commands("my-project", Some("123"), "t-dlt", "t-sub");
    assert_eq!(
        cmd,
        "gcloud pubsub topics add-iam-policy-binding t-dlt --project=my-project --member=serviceAccount:service-123@gcp-sa-pubsub.iam.gserviceaccount.com --role=roles/pubsub.publisher && gcloud pubsub subscriptions add-iam-policy-binding t-sub --project=my-project --member=serviceAccount:service-123@gcp-sa-pubsub.iam.gserviceaccount.com --role=roles/pubsub.subscriber"
    );
    assert!(plan::service_agent("p", None).contains("$(gcloud projects describe p"));
    assert_eq!(
        apply::with_member(
            json!({"bindings": [{"role": "r", "members": ["m"]}]}),
            "r",
            "m"
        ),
        None
    );
}

#[test]
fn the_endpoint_is_the_emulator_when_one_is_named_and_google_with_a_token_otherwise() {
    let t = target();
    let none = |_: &str| None;
    assert!(
        read::endpoint("gcp", &t, none).is_err(),
        "neither: refused, saying how"
    );
    let env = |v: &str| (v == read::EMULATOR_ENV).then(|| "127.0.0.1:8085".to_owned());
    assert_eq!(
        read::endpoint("gcp", &t, env).expect("emulator"),
        ("http://127.0.0.1:8085/v1".to_owned(), None)
    );
    let mut t2 = t.clone();
    t2.emulator_host = Some("localhost:9000".into());
    assert_eq!(
        read::endpoint("gcp", &t2, env).expect("target wins").0,
        "http://localhost:9000/v1"
    );
    let tok = |v: &str| (v == read::TOKEN_ENV).then(|| "ya29.x\n".to_owned());
    assert_eq!(
        read::endpoint("gcp", &t, tok).expect("google"),
        (read::GOOGLE_ENDPOINT.to_owned(), Some("ya29.x".to_owned()))
    );
}

#[test]
fn a_subscription_labelled_for_another_channel_cannot_be_changed_and_the_plan_says_why() {
    // The review reads nothing (the labels came with the plan's GETs): no server is needed,
    // and nothing listens on the emulator address.
    let mut t = target();
    t.emulator_host = Some("127.0.0.1:9".into());
    let reader = Reader::connect(
        "gcp",
        &t,
        crate::backend::kit::connect::ConnectOptions::default(),
        Arc::new(crate::backend::wire::Stats::default()),
    )
    .expect("reader");
    let d = desired(&example(""));
    let sub = &d[3];
    let mut props = crate::resource::Props::new();
    props.insert(
        LABELS.into(),
        json!({LABEL_MANAGED_BY: LABEL_MANAGED_BY_VALUE, LABEL_CHANNEL: "someone-else"}),
    );
    let live: std::collections::BTreeMap<_, _> = [(
        sub.id.clone(),
        crate::resource::Live {
            props,
            messages: None,
        },
    )]
    .into_iter()
    .collect();
    let mut change = diff(sub, None).expect("a change");
    change.action = Action::Update;
    let mut changes = vec![change];
    let mut notes = Vec::new();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(reader.review(&d, &live, &mut changes, &mut notes, false))
        .expect("no reads");
    let labels = labels(&live[&sub.id]);
    let problem = ownership_problem(&labels, &sub.channel).expect("another channel's");
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].action, Action::Impossible);
    assert_eq!(
        changes[0].reason.as_deref(),
        Some(format!("subscription {} {problem}", sub.id.name).as_str())
    );
    assert!(problem.contains("someone-else"), "{problem}");
}
