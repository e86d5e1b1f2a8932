//! Watching Azure Service Bus dead letters (issue 40), through the real binary: `dlqctl
//! exporter` on the contract fake (tests/support/azure.rs), and `dlqctl alerts --format
//! azure-monitor`, a channel's depth alarm as Azure Monitor metric alerts, one ARM deployment
//! template per channel and tier. No Azure is reachable here, so each template's resource is checked
//! against the documented contract instead: the definitions of azure-rest-api-specs'
//! `metricAlert_API.json` (2018-03-01), vendored in tests/fixtures/azure-monitor with where
//! they come from, and the window sizes, frequencies and severities Azure Monitor's
//! documentation lists. What the check cannot tell (never met a real subscription): whether
//! ARM accepts the template as a deployment, and how the metric behaves (docs/azure.md).

mod support;

use std::time::Duration;

use serde_json::Value;
use support::azure::data::Client;
use support::{dlqctl, output, root};

const FIXTURE: &str = "tests/fixtures/alerts-azure";

fn alerts(args: &[&str]) -> support::Output {
    output(dlqctl().arg("alerts").args(args).args(["--color", "never"]))
}

fn contract() -> Value {
    let path = root().join("tests/fixtures/azure-monitor/metric-alert-2018-03-01.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json")
}

/// A definition's properties and required names, its `allOf` parents' included.
fn flatten(defs: &Value, name: &str) -> (serde_json::Map<String, Value>, Vec<String>) {
    let d = &defs[name];
    let mut props = serde_json::Map::new();
    let mut required = Vec::new();
    for parent in d["allOf"].as_array().into_iter().flatten() {
        let pname = parent["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/definitions/"))
            .expect("a local $ref");
        let (p, r) = flatten(defs, pname);
        props.extend(p);
        required.extend(r);
    }
    if let Some(p) = d["properties"].as_object() {
        props.extend(p.clone());
    }
    for r in d["required"].as_array().into_iter().flatten() {
        required.push(r.as_str().expect("a name").to_owned());
    }
    (props, required)
}

/// The definition a polymorphic value is: the one whose `x-ms-discriminator-value` is the
/// value's discriminator, when `name` has a discriminator.
fn concrete(defs: &Value, name: &str, v: &Value) -> String {
    let Some(key) = defs[name]["discriminator"].as_str() else {
        return name.to_owned();
    };
    let Some(tag) = v[key].as_str() else {
        return name.to_owned();
    };
    defs.as_object()
        .and_then(|all| {
            all.iter()
                .find(|(_, d)| d["x-ms-discriminator-value"].as_str() == Some(tag))
                .map(|(n, _)| n.clone())
        })
        .unwrap_or_else(|| name.to_owned())
}

/// Everything in `v` the schema `s` (at `path`) does not allow: unknown or read-only members,
/// missing required ones, wrong types, values outside an enum.
fn check(defs: &Value, s: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(r) = s["$ref"].as_str() {
        let name = r.strip_prefix("#/definitions/").expect("a local $ref");
        let name = concrete(defs, name, v);
        let (props, required) = flatten(defs, &name);
        let Some(obj) = v.as_object() else {
            out.push(format!("{path}: not an object ({name})"));
            return;
        };
        for r in &required {
            if !obj.contains_key(r) {
                out.push(format!("{path}.{r}: required by {name}, missing"));
            }
        }
        for (k, val) in obj {
            match props.get(k) {
                None => out.push(format!("{path}.{k}: no such field in {name}")),
                Some(p) if p["readOnly"] == true => {
                    out.push(format!("{path}.{k}: read-only in {name}"));
                }
                Some(p) => check(defs, p, val, &format!("{path}.{k}"), out),
            }
        }
        return;
    }
    if let Some(values) = s["enum"].as_array()
        && !values.contains(v)
    {
        out.push(format!(
            "{path}: {v} is not one of {}",
            Value::Array(values.clone())
        ));
    }
    let ok = match s["type"].as_str() {
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        Some("array") => {
            for (i, item) in v.as_array().into_iter().flatten().enumerate() {
                check(defs, &s["items"], item, &format!("{path}[{i}]"), out);
            }
            v.is_array()
        }
        Some("object") | None if s.get("additionalProperties").is_some() => {
            for (k, item) in v.as_object().into_iter().flatten() {
                check(
                    defs,
                    &s["additionalProperties"],
                    item,
                    &format!("{path}.{k}"),
                    out,
                );
            }
            v.is_object()
        }
        _ => true,
    };
    if !ok {
        out.push(format!("{path}: {v} is not of type {}", s["type"]));
    }
}

/// Everything wrong with one template: its shape, then its one resource against
/// MetricAlertResource and the documented limits.
fn findings(template: &Value) -> Vec<String> {
    let c = contract();
    let defs = &c["definitions"];
    let mut out = Vec::new();
    let resources = template["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if resources.len() != 1 {
        out.push(format!("{} resources (one expected)", resources.len()));
    }
    for (i, r) in resources.iter().enumerate() {
        let at = format!("resources[{i}]");
        if r["type"] != "Microsoft.Insights/metricAlerts" || r["apiVersion"] != "2018-03-01" {
            out.push(format!(
                "{at}: type {} apiVersion {}",
                r["type"], r["apiVersion"]
            ));
        }
        // `type`, `apiVersion` and `name` are the template's, not the resource body's.
        let mut body = r.clone();
        if let Some(o) = body.as_object_mut() {
            for k in ["type", "apiVersion", "name"] {
                o.remove(k);
            }
        }
        let root_schema = serde_json::json!({"$ref": "#/definitions/MetricAlertResource"});
        check(defs, &root_schema, &body, &at, &mut out);
        let p = &r["properties"];
        for key in ["windowSize", "evaluationFrequency", "severity"] {
            let allowed = c["_limits"][key].as_array().cloned().unwrap_or_default();
            if !allowed.contains(&p[key]) {
                out.push(format!(
                    "{at}.properties.{key}: {} is not one Azure takes",
                    p[key]
                ));
            }
        }
        if r["location"] != "global" {
            out.push(format!(
                "{at}.location: {} (metric alerts are global)",
                r["location"]
            ));
        }
        let name = r["name"].as_str().unwrap_or("");
        if name.is_empty() || name.len() > 260 || name.contains(['/', ':', '#', '%', '?']) {
            out.push(format!(
                "{at}.name: {name:?} is not a rule name Azure takes"
            ));
        }
    }
    out
}

fn read(dir: &std::path::Path, name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(name)).expect("read")).expect("json")
}

#[test]
fn azure_monitor_metric_alerts_match_the_metric_alerts_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("alerts");
    let out_s = out.to_str().expect("utf-8");
    let w = alerts(&[FIXTURE, "--format", "azure-monitor", "--out", out_s]);
    w.ok();
    w.assert_stderr_contains("4 metric alerts");
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("the folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // The age-only channel (shipments-audit) has none: Azure Monitor has no age metric.
    assert_eq!(
        names,
        [
            "sb.shipments-events.critical.json",
            "sb.shipments-labels.critical.json",
            "sb.shipments-labels.warning.json",
            "sb.shipments-returns.critical.json",
        ]
    );
    for name in &names {
        assert_eq!(findings(&read(&out, name)), Vec::<String>::new(), "{name}");
    }
    let warning =
        std::fs::read_to_string(out.join("sb.shipments-labels.warning.json")).expect("read");
    insta::assert_snapshot!("azure-monitor-warning", warning);

    let crit = |name: &str| read(&out, name)["resources"][0].clone();
    let labels = crit("sb.shipments-labels.critical.json");
    let p = &labels["properties"];
    assert_eq!(p["severity"], 0);
    assert_eq!(
        p["windowSize"], "PT5M",
        "2m × 2 held: the next window Azure takes"
    );
    let c = &p["criteria"]["allOf"][0];
    assert_eq!(c["metricName"], "DeadletteredMessages");
    assert_eq!(c["timeAggregation"], "Minimum", "held for the whole window");
    assert_eq!(c["threshold"], 100);
    assert_eq!(c["dimensions"][0]["values"][0], "shipments-labels");
    assert_eq!(
        p["scopes"][0],
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/logistics/providers/Microsoft.ServiceBus/namespaces/logistics-prod"
    );
    assert!(
        p["actions"][0]["actionGroupId"]
            .as_str()
            .is_some_and(|a| a.ends_with("/actionGroups/logistics-pager"))
    );
    // A topic channel: the metric is per topic.
    let events = crit("sb.shipments-events.critical.json");
    let c = &events["properties"]["criteria"]["allOf"][0];
    assert_eq!(c["dimensions"][0]["values"][0], "shipments-events");
    assert_eq!(c["threshold"], 10);
    // Forwarded dead letters wait as the forward queue's active messages.
    let returns = crit("sb.shipments-returns.critical.json");
    let c = &returns["properties"]["criteria"]["allOf"][0];
    assert_eq!(c["metricName"], "ActiveMessages");
    assert_eq!(c["dimensions"][0]["values"][0], "shipments-returns-dlq");
    assert_eq!(returns["properties"]["windowSize"], "PT1H");

    // The check can fail: a misspelt field, a read-only one, and a window Azure does not take.
    let mut broken = read(&out, "sb.shipments-labels.warning.json");
    broken["resources"][0]["properties"]["windowsize"] = serde_json::json!("PT5M");
    broken["resources"][0]["properties"]["lastUpdatedTime"] = serde_json::json!("2026-01-01");
    broken["resources"][0]["properties"]["windowSize"] = serde_json::json!("PT4M");
    broken["resources"][0]["properties"]["criteria"]["allOf"][0]["timeAggregation"] =
        serde_json::json!("Median");
    let mut found = findings(&broken);
    found.sort();
    assert_eq!(
        found,
        [
            "resources[0].properties.criteria.allOf[0].timeAggregation: \"Median\" is not one of [\"Average\",\"Count\",\"Minimum\",\"Maximum\",\"Total\"]",
            "resources[0].properties.lastUpdatedTime: read-only in MetricAlertProperties",
            "resources[0].properties.windowSize: \"PT4M\" is not one Azure takes",
            "resources[0].properties.windowsize: no such field in MetricAlertProperties",
        ]
    );

    // --check: up to date, then stale after a hand edit; --out repairs it and never touches a
    // file it did not write.
    alerts(&[FIXTURE, "--format", "azure-monitor", "--check", out_s]).ok();
    let file = out.join("sb.shipments-events.critical.json");
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(
        &file,
        text.replace("\"threshold\": 10", "\"threshold\": 50"),
    )
    .expect("write");
    let stale = alerts(&[FIXTURE, "--format", "azure-monitor", "--check", out_s]);
    stale.exits(2);
    stale.assert_stderr_contains("sb.shipments-events.critical.json differs");
    stale.assert_stderr_contains("dlqctl alerts --format azure-monitor --out");
    std::fs::write(out.join("sb.gone.critical.json"), &text).expect("write");
    std::fs::write(out.join("notes.json"), "{\"mine\": true}\n").expect("write");
    let again = alerts(&[FIXTURE, "--format", "azure-monitor", "--out", out_s]);
    again.ok();
    again.assert_stderr_contains("removed 1 metric alert the specs no longer produce");
    assert!(!out.join("sb.gone.critical.json").exists());
    assert!(out.join("notes.json").exists());
    std::fs::write(&file, "{\"mine\": true}\n").expect("write");
    let refused = alerts(&[FIXTURE, "--format", "azure-monitor", "--out", out_s]);
    refused.exits(1);
    refused.assert_stderr_contains("not overwriting");
    refused.assert_stderr_contains("resources[].tags.managed_by = dlqctl");
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "{\"mine\": true}\n"
    );
}

/// Lint: on Azure Service Bus an alarm action is an action group's resource id.
#[test]
fn an_azure_alarm_action_that_is_not_an_action_group_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        root().join(FIXTURE).join("dlqctl.yaml"),
        dir.path().join("dlqctl.yaml"),
    )
    .expect("copy");
    std::fs::write(
        dir.path().join("c.yaml"),
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: shipments-x}\nspec:\n  target: sb\n  retry: {maxAttempts: 3}\n  alarms:\n    depth: {above: 0}\n    actions: [\"arn:aws:sns:eu-west-1:1:ops\"]\n",
    )
    .expect("write");
    let r = output(dlqctl().args(["lint", "--color", "never"]).arg(dir.path()));
    r.exits(1);
    r.assert_stdout_contains("error[alarms/action]");
    r.assert_stdout_contains("is not the resource id of an Azure Monitor action group");
}

/// `dlqctl exporter` on Service Bus: without `--peek` it serves the dead-letter depth from
/// ARM's `countDetails` and touches no message (no data-plane call at all); with `--peek` it
/// serves the oldest dead letter's age from the same peek-lock-then-unlock read as status, and
/// every message stays in the subqueue, unlocked. A namespace that stops answering turns
/// `dlq_up` to 0 instead of serving the old depth as if it were fresh.
#[test]
fn the_exporter_serves_service_bus_depth_and_age_and_leaves_every_message() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    let q = f.ws.channel.clone();
    let c = Client::new(&f.fake);
    support::block(async {
        for i in 0..3 {
            assert_eq!(c.send(&q, &format!("m-{i}"), "{}", &[]).await, 201);
        }
        // Bounded: 3 messages, 8 deliveries each (the example's maxDeliveryCount).
        for _ in 0..3 * 8 {
            let Some(m) = c.peek_lock(&q).await else {
                break;
            };
            assert_eq!(c.unlock(&m).await, 200);
        }
    });
    assert_eq!(f.fake.dead_letters(&q).len(), 3, "all dead-lettered");
    let ids = |f: &support::azure::Fixture| -> Vec<String> {
        let mut v: Vec<String> = f
            .fake
            .dead_letters(&q)
            .iter()
            .map(|m| m.message_id.clone())
            .collect();
        v.sort();
        v
    };
    let before = ids(&f);
    let selector = format!("channel=\"{q}\"");
    let depth_line = |body: &str| {
        body.lines()
            .find(|l| l.starts_with("dlq_depth{") && l.contains(&selector))
            .map(str::to_owned)
    };

    let requests = f.fake.data_requests().len();
    {
        let e = support::exporter::Exporter::start(&f.ws, &["--interval", "1s"]);
        let body = e.first_reading();
        let line = depth_line(&body).unwrap_or_else(|| panic!("no dlq_depth for {q}\n{body}"));
        assert!(line.ends_with(" 3"), "{line}");
        assert!(body.contains("dlq_up{"), "{body}");
        assert!(
            body.lines()
                .any(|l| l.starts_with("dlq_up{") && l.ends_with(" 1")),
            "{body}"
        );
    }
    assert_eq!(
        f.fake.data_requests().len(),
        requests,
        "without --peek the exporter reads no message"
    );
    assert_eq!(ids(&f), before);

    {
        let e = support::exporter::Exporter::start(&f.ws, &["--interval", "1s", "--peek"]);
        let body = e.first_reading();
        let age = body
            .lines()
            .find(|l| l.starts_with("dlq_oldest_message_age_seconds{") && l.contains(&selector))
            .unwrap_or_else(|| panic!("no age for {q}\n{body}"));
        let secs: f64 = age
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1.0);
        assert!((0.0..3600.0).contains(&secs), "{age}");
        assert!(
            body.lines()
                .any(|l| l.starts_with("dlq_oldest_message_age_known{")
                    && l.contains(&selector)
                    && l.ends_with(" 1")),
            "{body}"
        );
    }
    assert!(
        f.fake.data_requests().len() > requests,
        "--peek read the subqueue"
    );
    let after = f.fake.dead_letters(&q);
    assert_eq!(ids(&f), before, "every dead letter is still there");
    assert!(
        after.iter().all(|m| m.lock.is_none()),
        "every lock handed back"
    );
    assert!(f.fake.messages(&q).is_empty(), "nothing moved");

    // ARM stops answering (nothing listens where the target points): dlq_up 0.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let arm = f.fake.url().to_owned();
    f.ws.edit_targets(|t| t.replace(&arm, &format!("http://{closed}")));
    let e = support::exporter::Exporter::start(&f.ws, &["--interval", "1s"]);
    let body = e.until(Duration::from_secs(30), |b| {
        b.lines()
            .any(|l| l.starts_with("dlq_up{") && l.ends_with(" 0"))
    });
    assert!(
        body.lines()
            .any(|l| l.starts_with("dlq_up{") && l.ends_with(" 0")),
        "{body}"
    );
}
