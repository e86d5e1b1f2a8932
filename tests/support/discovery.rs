//! A value checked against the schemas of a Google discovery document (vendored under
//! tests/fixtures/cloud-monitoring/): known property names, JSON types, enum values,
//! `google-duration` and `google-datetime` strings, `$ref`s followed. Used for the alert
//! policies dlqctl writes (tests/alerts.rs) and the recorded Monitoring answers dlqctl reads
//! (tests/pubsub_monitoring.rs).

/// Every field of `value` checked against the discovery document's schema `name`: known
/// property names, JSON types, enum values, `google-duration` strings; `$ref`s followed
/// (a schema that is not vendored is a finding: dlqctl does not write it).
pub fn check_schema(
    schemas: &serde_json::Value,
    name: &str,
    value: &serde_json::Value,
    at: &str,
    out: &mut Vec<String>,
) {
    let Some(schema) = schemas.get(name) else {
        out.push(format!(
            "{at}: a {name}, which the vendored discovery schemas leave out"
        ));
        return;
    };
    let Some(object) = value.as_object() else {
        out.push(format!("{at}: not an object ({name})"));
        return;
    };
    for (key, v) in object {
        match schema["properties"].get(key) {
            Some(prop) => check_property(schemas, prop, v, &format!("{at}.{key}"), out),
            None => out.push(format!("{at}.{key}: no such field in {name}")),
        }
    }
}

fn check_property(
    schemas: &serde_json::Value,
    prop: &serde_json::Value,
    v: &serde_json::Value,
    at: &str,
    out: &mut Vec<String>,
) {
    if let Some(r) = prop.get("$ref").and_then(serde_json::Value::as_str) {
        return check_schema(schemas, r, v, at, out);
    }
    let ok = match prop["type"].as_str() {
        Some("string") => v.is_string(),
        Some("number") => v.is_number(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("boolean") => v.is_boolean(),
        Some("array") => {
            for (i, item) in v.as_array().into_iter().flatten().enumerate() {
                check_property(schemas, &prop["items"], item, &format!("{at}[{i}]"), out);
            }
            v.is_array()
        }
        Some("object") => {
            for (k, item) in v.as_object().into_iter().flatten() {
                check_property(
                    schemas,
                    &prop["additionalProperties"],
                    item,
                    &format!("{at}.{k}"),
                    out,
                );
            }
            v.is_object()
        }
        other => {
            out.push(format!("{at}: type {other:?} not handled by this check"));
            true
        }
    };
    if !ok {
        out.push(format!("{at}: {v} is not of type {}", prop["type"]));
    }
    if let Some(allowed) = prop.get("enum").and_then(serde_json::Value::as_array)
        && !allowed.contains(v)
    {
        out.push(format!("{at}: {v} is not one of {}", prop["enum"]));
    }
    if prop["format"] == "google-datetime"
        && time::OffsetDateTime::parse(
            v.as_str().unwrap_or_default(),
            &time::format_description::well_known::Rfc3339,
        )
        .is_err()
    {
        out.push(format!("{at}: {v} is not a google-datetime (RFC 3339)"));
    }
    if prop["format"] == "google-duration" {
        let text = v.as_str().unwrap_or_default();
        let digits = text.strip_suffix('s').unwrap_or("x");
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            out.push(format!("{at}: {v} is not a google-duration (`300s`)"));
        }
    }
}
