//! The insta settings every plan snapshot shares: the random part of channel names, plan
//! hashes and dlqctl's version filtered out.

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

/// Snapshots `plan channel.yaml --format <f>` of a fixture for human, json and markdown, as
/// `plan-<f>` of the calling test file, under [`plan_settings`]. A macro, so that insta names
/// and places the snapshots for the test file that calls it.
#[macro_export]
macro_rules! assert_plan_snapshots {
    ($f:expr, $endpoint:expr) => {
        $crate::support::snapshot::plan_settings($endpoint).bind(|| {
            for format in ["human", "json", "markdown"] {
                let p = $f.run(&["plan", "channel.yaml", "--format", format]);
                assert_eq!(p.code, 0, "{}", p.stderr);
                insta::assert_snapshot!(format!("plan-{format}"), p.stdout);
            }
        })
    };
}
