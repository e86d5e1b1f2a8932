//! The insta settings every plan snapshot shares: the random part of channel names, plan
//! hashes and dlqctl's version filtered out; and the check of a plan's JSON against the
//! published schema.

/// Settings for plan snapshots; `endpoint` (an address that appears in the plan, and what
/// stands for it), when given, is filtered too.
pub fn plan_settings(endpoint: Option<(&str, &str)>) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    // The random part of the channel name (`orders.t<pid>-<time>-<n>`), however it is escaped.
    settings.add_filter(r"t\d+-\d+-\d+", "[ID]");
    settings.add_filter(r#""hash": "[0-9a-f]{32}""#, r#""hash": "[HASH]""#);
    settings.add_filter(
        r#""dlqctl_version": "[^"]+""#,
        r#""dlqctl_version": "[VERSION]""#,
    );
    if let Some((address, placeholder)) = endpoint {
        settings.add_filter(&regex_escape(address), placeholder);
    }
    settings
}

/// `s` as a regex that matches it literally.
pub fn regex_escape(s: &str) -> String {
    s.chars().fold(String::new(), |mut out, c| {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

/// Fails unless `text` (a plan's JSON, printed or saved) is valid under the published
/// `schemas/plan.v1.json`, naming every error.
pub fn assert_valid_plan_json(text: &str) {
    let path = super::root().join("schemas/plan.v1.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("schemas/plan.v1.json"))
            .expect("the plan schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the plan schema compiles");
    let plan: serde_json::Value = serde_json::from_str(text).expect("the plan is JSON");
    let errors: Vec<String> = validator
        .iter_errors(&plan)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "the plan does not match schemas/plan.v1.json:\n{}\n{text}",
        errors.join("\n")
    );
}

/// Snapshots `plan channel.yaml --format <f>` of a fixture for human, json and markdown, as
/// `plan-<f>` of the calling test file, under [`plan_settings`]; the JSON, and the same plan
/// saved with `--out`, must also be valid under `schemas/plan.v1.json`. A macro, so that
/// insta names and places the snapshots for the test file that calls it.
#[macro_export]
macro_rules! assert_plan_snapshots {
    ($f:expr, $endpoint:expr) => {
        $crate::support::snapshot::plan_settings($endpoint).bind(|| {
            for format in ["human", "json", "markdown"] {
                let p = $f.run(&["plan", "channel.yaml", "--format", format]);
                p.ok();
                if format == "json" {
                    $crate::support::snapshot::assert_valid_plan_json(&p.stdout);
                }
                insta::assert_snapshot!(format!("plan-{format}"), p.stdout);
            }
            let saved = tempfile::tempdir().expect("tempdir");
            let out = saved.path().join("plan.json");
            let p = $f.run(&[
                "plan",
                "channel.yaml",
                "--out",
                out.to_str().expect("utf-8"),
            ]);
            p.ok();
            $crate::support::snapshot::assert_valid_plan_json(
                &std::fs::read_to_string(&out).expect("the saved plan"),
            );
        })
    };
}
