//! The pull-request comment of a large plan, through the real binary against the local stack:
//! 200 new channels (bench/gen.py's mix; nothing is applied, the plan only reads) make a
//! markdown plan under 60,000 characters whose last line counts exactly the changes it leaves
//! out, as the JSON plan of the same specs counts them. The layout itself is tested without a
//! server in `src/plan/markdown.rs` (2,000 channels, every budget, a mixed-plan snapshot).

mod support;

const CHANNELS: usize = 200;

/// Table rows that stand for a change: those under an `action` or `resource` header.
fn rows(md: &str) -> usize {
    let mut n = 0;
    let mut counting = false;
    for l in md.lines() {
        if l.starts_with("| action |") || l.starts_with("| resource |") {
            counting = true;
        } else if !l.starts_with('|') {
            counting = false;
        } else if counting && l.starts_with("| ") {
            n += 1;
        }
    }
    n
}

#[test]
fn a_plan_of_200_new_channels_fits_in_one_comment_and_counts_what_it_leaves_out() {
    if !support::whole_stack_up() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let prefix = format!("{}.", support::unique("comment"));
    support::generate_channels(dir.path(), CHANNELS, &prefix, &[]);
    let run = |args: &[&str]| support::output(support::dlqctl_local(dir.path()).args(args));

    let md = run(&["plan", ".", "--format", "markdown", "--detailed-exitcode"]);
    md.exits(2);
    let json = run(&["plan", ".", "--format", "json"]);
    json.ok();
    let plan: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    let total = plan["changes"].as_array().expect("changes").len();

    let md = md.stdout;
    let width = md.encode_utf16().count();
    assert!(width < 60_000, "{width} characters");
    assert!(md.starts_with("<!-- dlqctl-plan -->\n"), "{md}");
    assert_eq!(
        md.matches("<details>").count(),
        md.matches("</details>").count()
    );
    let shown = rows(&md);
    assert!(shown > 0 && shown < total, "{shown} of {total}");
    assert_eq!(
        md.lines().last(),
        Some(
            format!(
                "{} more changes: run `dlqctl plan` or see the JSON plan.",
                total - shown
            )
            .as_str()
        ),
        "{total} changes, {shown} shown"
    );
}
