//! Secrets in dead letters are not printed (issue 31, finding 10): a message carrying an
//! `Authorization` and a `Cookie` header, a header the target's `redact.headers` names, a
//! card number and a value at one of the target's `redact.bodyPointers`, in a RabbitMQ DLQ
//! and a Kafka dead-letter topic, read by `status` (human, markdown, JSON) and `redrive
//! --dry-run` (human, JSON) through the real binary: masked by default, shown with
//! `--show-secrets` and a warning; the redrive copy itself is byte for byte the message (the
//! redaction is display only); the exporter's metrics carry no message content.

mod support;

use std::time::Duration;

use lapin::BasicProperties;
use support::workspace::Workspace;
use support::{block, kafka, rabbit};

const TOKEN: &str = "Bearer s3cr3t-t0ken-value";
const COOKIE: &str = "session=abcdef0123456789";
const EMAIL: &str = "alice@example.com";
const CARD: &str = "4111 1111 1111 1111";
/// The body: a card number, and an e-mail address at `/customer/email`.
fn body() -> String {
    format!(r#"{{"card":"{CARD}","customer":{{"email":"{EMAIL}","id":7}}}}"#)
}

/// What must never be shown by default.
const SECRETS: [&str; 4] = [TOKEN, COOKIE, EMAIL, CARD];

/// The target's extra rules: one header, one JSON pointer.
fn with_redact(ws: &Workspace, target: &str) {
    ws.edit_targets(|t| {
        let at = format!("  {target}:\n");
        t.replace(
            &at,
            &format!("{at}    redact:\n      headers: [x-customer-email]\n      bodyPointers: [/customer/email]\n"),
        )
    });
}

/// Runs the read-only views; each must hide every secret (or, with `--show-secrets`, show
/// them and warn).
fn check_views(ws: &Workspace, show: bool) {
    let channel = ws.channel.clone();
    // (arguments, whether the view shows headers and bodies at all: the human dry run lists
    // class and id only)
    let mut views: Vec<(Vec<&str>, bool)> = ["human", "markdown", "json"]
        .iter()
        .map(|f| (vec!["status", "channel.yaml", "--format", f], true))
        .collect();
    for (f, full) in [("human", false), ("json", true)] {
        views.push((
            vec![
                "redrive",
                channel.as_str(),
                "channel.yaml",
                "--dry-run",
                "--format",
                f,
            ],
            full,
        ));
    }
    for (mut args, full) in views {
        if show {
            args.push("--show-secrets");
        }
        let o = ws.run(&args);
        assert!(
            o.code == 0 || o.code == 2,
            "{args:?}: {}{}",
            o.stdout,
            o.stderr
        );
        for s in SECRETS {
            assert_eq!(
                o.stdout.contains(s),
                show && full,
                "{args:?}: `{s}` shown: {}\n{}",
                o.stdout.contains(s),
                o.stdout
            );
        }
        if show {
            o.assert_stderr_contains("--show-secrets");
        } else if full {
            assert!(
                o.stdout
                    .contains(&format!("«redacted, {} bytes»", TOKEN.len())),
                "{args:?}\n{}",
                o.stdout
            );
            assert!(
                o.stdout.contains("•••• •••• •••• 1111"),
                "{args:?}\n{}",
                o.stdout
            );
            assert!(
                o.stdout
                    .contains(&format!("«redacted, {} bytes»", EMAIL.len())),
                "{args:?}: the target's own rules\n{}",
                o.stdout
            );
        }
        if !show {
            assert!(!o.stderr.contains("--show-secrets"), "{}", o.stderr);
        }
    }
}

#[test]
fn rabbitmq_dead_letters_are_shown_masked_and_moved_whole() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    with_redact(&f, "local-rabbitmq");
    let [main, _, dlq, _] = f.names();
    let h = rabbit::table(&[
        ("Authorization", rabbit::text(TOKEN)),
        ("Cookie", rabbit::text(COOKIE)),
        ("x-customer-email", rabbit::text(EMAIL)),
        ("dlq-error-class", rabbit::text("poison")),
    ]);
    block(rabbit::publish_with(
        "",
        &dlq,
        body().as_bytes(),
        BasicProperties::default().with_headers(h),
    ));
    rabbit::wait_for_messages(&dlq, 1);
    check_views(&f, false);
    check_views(&f, true);

    // The exporter's metrics: figures and spec names, no message content.
    let metrics = f.run(&["status", "channel.yaml", "--format", "openmetrics"]);
    for s in SECRETS.iter().chain(&["Cookie", "Authorization"]) {
        assert!(!metrics.stdout.contains(s), "{s} in\n{}", metrics.stdout);
    }

    // The copy is the message, whole: headers and body as they were.
    let r = f.run(&["redrive", f.channel.as_str(), "channel.yaml", "--yes"]);
    r.ok();
    let moved = block(rabbit::take_all(&main));
    assert_eq!(moved.len(), 1);
    let (b, headers) = &moved[0];
    assert_eq!(String::from_utf8_lossy(b), body());
    assert_eq!(
        headers.get("Authorization").map(String::as_str),
        Some(TOKEN)
    );
    assert_eq!(headers.get("Cookie").map(String::as_str), Some(COOKIE));
    assert_eq!(
        headers.get("x-customer-email").map(String::as_str),
        Some(EMAIL)
    );
}

#[test]
fn kafka_dead_letters_are_shown_masked() {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    with_redact(&f, "local-kafka");
    let dlt = format!("{}-dlt", f.channel);
    let producer: FutureProducer = kafka::producer(&[]);
    let mut h = OwnedHeaders::new();
    for (k, v) in [
        ("authorization", TOKEN),
        ("Cookie", COOKIE),
        ("X-Customer-Email", EMAIL),
        ("dlq-error-class", "poison"),
    ] {
        h = h.insert(Header {
            key: k,
            value: Some(v.as_bytes()),
        });
    }
    let b = body();
    block(producer.send(
        FutureRecord::to(&dlt).key("k").payload(&b).headers(h),
        Duration::from_secs(10),
    ))
    .map_err(|(e, _)| e)
    .expect("produce");
    check_views(&f, false);
    check_views(&f, true);
}

/// An error class is a metric label: one that carries a card number or a token becomes
/// `other` there, whatever `status` shows of it.
#[test]
fn a_class_that_carries_content_is_no_metric_label() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    block(async {
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        for class in ["poison", "card 4111111111111111", TOKEN] {
            let h = rabbit::table(&[("dlq-error-class", rabbit::text(class))]);
            rabbit::publish_on(
                &ch,
                "",
                &dlq,
                b"{}",
                BasicProperties::default().with_headers(h),
            )
            .await;
        }
        let _ = conn.close(200, "done".into()).await;
    });
    rabbit::wait_for_messages(&dlq, 3);
    let m = f.run(&["status", "channel.yaml", "--format", "openmetrics"]);
    m.assert_stdout_contains("class=\"poison\"} 1");
    m.assert_stdout_contains("class=\"other\"} 2");
    for s in ["4111", "1111\"", "s3cr3t", "Bearer"] {
        assert!(!m.stdout.contains(s), "{s} in\n{}", m.stdout);
    }
}

/// `redact` is checked by lint like every field: a pointer without its leading `/` and a
/// header name with a space are errors that name the field and the line.
#[test]
fn lint_checks_the_targets_redact_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let targets = std::fs::read_to_string(support::root().join("examples/dlqctl.yaml"))
        .expect("targets")
        .replace(
            "  local-rabbitmq:\n",
            "  local-rabbitmq:\n    redact:\n      bodyPointers: [customer/email]\n      headers: [\"bad header\"]\n",
        );
    std::fs::write(dir.path().join("dlqctl.yaml"), targets).expect("write");
    let o = support::output(
        support::dlqctl()
            .args(["lint", "dlqctl.yaml", "--color", "never"])
            .current_dir(dir.path()),
    );
    assert_ne!(o.code, 0, "{}", o.stdout);
    let all = format!("{}{}", o.stdout, o.stderr);
    assert!(
        all.contains("targets.local-rabbitmq.redact.bodyPointers[0]")
            && all.contains("targets.local-rabbitmq.redact.headers[0]"),
        "{all}"
    );
}

/// Issue 52, M8: what issue 31's masking still printed. A bearer JWT (and a bare one) inside
/// the error message, `x-forwarded-authorization`, a header named `authorization ` (trailing
/// space) and `PROXY-Authorization`, body fields `password`, `cvv`, `pin`, `api_key` and a
/// nested `client_secret` beside a card number, a form-encoded `password=` in a text header:
/// none of them in any `status` format (with failure groups, whose message is shown too) nor
/// in a dry run, stdout or stderr. RabbitMQ, with no `redact` rules of the target's own.
#[test]
fn rabbitmq_status_and_dry_runs_hide_bearer_tokens_jwts_and_secret_fields() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJvcmRlcnMtYXBpIiwic2NvcGUiOiJwYXkifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
    const BARE: &str =
        "eyJhbGciOiJSUzI1NiJ9.eyJ1c2VyIjoicm9vdCJ9.Zm9vYmFyYmF6cXV4Tm90QVJlYWxTaWduYXR1cmU";
    const FORWARDED: &str = "Bearer fwd-0p4que-t0ken-value";
    const SPACED: &str = "Basic dXNlcjpzM2NyM3QtcGFzcw==";
    const PROXY: &str = "Bearer pr0xy-t0ken-value";
    const PASSWORD: &str = "hunter2-pa55word";
    const FORM: &str = "f0rm-pa55word";
    const API_KEY: &str = "ak_live_51HxyzSecretKey";
    const CLIENT_SECRET: &str = "cl1ent-s3cret-value";
    let error = format!(
        "charge failed: upstream 401 for Authorization: Bearer {JWT} (refresh token {BARE})"
    );
    let h = rabbit::table(&[
        ("dlq-error-class", rabbit::text("auth")),
        ("dlq-error-message", rabbit::text(&error)),
        ("x-forwarded-authorization", rabbit::text(FORWARDED)),
        ("authorization ", rabbit::text(SPACED)),
        ("PROXY-Authorization", rabbit::text(PROXY)),
        (
            "x-request-form",
            rabbit::text(&format!("user=alice&password={FORM}&remember=1")),
        ),
    ]);
    let body = format!(
        r#"{{"card":"{CARD}","password":"{PASSWORD}","cvv":"737","pin":"4321","api_key":"{API_KEY}","client":{{"client_secret":"{CLIENT_SECRET}","id":7}}}}"#
    );
    block(rabbit::publish_with(
        "",
        &dlq,
        body.as_bytes(),
        BasicProperties::default()
            .with_message_id("m-secrets".into())
            .with_headers(h),
    ));
    rabbit::wait_for_messages(&dlq, 1);
    let secrets = [
        JWT,
        BARE,
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        FORWARDED,
        "fwd-0p4que-t0ken-value",
        SPACED,
        "dXNlcjpzM2NyM3QtcGFzcw",
        PROXY,
        PASSWORD,
        FORM,
        API_KEY,
        CLIENT_SECRET,
        CARD,
        "4111111111111111",
    ];
    let channel = f.channel.clone();
    let mut views: Vec<Vec<&str>> = Vec::new();
    for format in ["human", "markdown", "json", "openmetrics"] {
        views.push(vec!["status", "channel.yaml", "--format", format]);
        views.push(vec![
            "status",
            "channel.yaml",
            "--format",
            format,
            "--group-by",
            "fingerprint",
        ]);
    }
    for format in ["human", "json"] {
        views.push(vec![
            "redrive",
            channel.as_str(),
            "channel.yaml",
            "--dry-run",
            "--format",
            format,
        ]);
        views.push(vec![
            "redrive",
            channel.as_str(),
            "channel.yaml",
            "--dry-run",
            "--format",
            format,
            "--transform",
            ".body.note = \"fixed\"",
        ]);
    }
    for args in views {
        let o = f.run(&args);
        assert!(
            o.code == 0 || o.code == 2,
            "{args:?}: {}{}",
            o.stdout,
            o.stderr
        );
        // JSON escapes quotes; the field checks read the text as shown.
        let shown = format!("{}\n{}", o.stdout, o.stderr).replace("\\\"", "\"");
        for s in secrets {
            assert!(!shown.contains(s), "{args:?}: `{s}` shown:\n{shown}");
        }
        for field in [
            r#""cvv":"737""#,
            r#""pin":"4321""#,
            "cvv\": \"737\"",
            "pin\": \"4321\"",
        ] {
            assert!(
                !shown.contains(field),
                "{args:?}: `{field}` shown:\n{shown}"
            );
        }
        if args.contains(&"json") && args[0] == "status" {
            assert!(shown.contains("•••• •••• •••• 1111"), "{args:?}\n{shown}");
            assert!(shown.contains("«redacted"), "{args:?}\n{shown}");
        }
    }
}
