//! The CI examples (`docs/ci/`, shown in docs/ci.md): each is valid under the schema its
//! CI service's tooling publishes, checked offline by `check-jsonschema` (installed in the
//! stack's venv by `scripts/stack up`) with its vendored `vendor.github-workflows` and
//! `vendor.gitlab-ci` schemas; a broken copy of each fails, so the check can fail; docs/ci.md
//! shows each file as it is; and the commands and marker they use are the binary's.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

const GITHUB: &str = "docs/ci/github-actions.yml";
const GITLAB: &str = "docs/ci/gitlab-ci.yml";

/// The venv's `check-jsonschema`, or `None` (a loud skip; a failure under CI=true).
fn check_jsonschema() -> Option<PathBuf> {
    let bin = support::cache_dir().join("venv/bin/check-jsonschema");
    support::require(
        "check-jsonschema (scripts/stack up installs it)",
        bin.is_file(),
    )
    .then_some(bin)
}

/// Runs `check-jsonschema --builtin-schema SCHEMA FILE` with every proxy pointing at a closed
/// port: a schema fetched from the network would fail the check, so passing proves offline.
fn check(bin: &Path, schema: &str, file: &Path) -> support::Output {
    support::output(
        Command::new(bin)
            .args(["--builtin-schema", schema])
            .arg(file)
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("https_proxy", "http://127.0.0.1:9")
            .env("http_proxy", "http://127.0.0.1:9")
            .env_remove("NO_PROXY")
            .env_remove("no_proxy"),
    )
}

/// The example passes its schema, and a copy broken by `edit` does not.
fn assert_valid_and_checked(file: &str, schema: &str, edit: (&str, &str)) {
    let Some(bin) = check_jsonschema() else {
        return;
    };
    let path = support::root().join(file);
    let ok = check(&bin, schema, &path);
    ok.ok_with(file);
    let text = std::fs::read_to_string(&path).expect("the example");
    assert!(text.contains(edit.0), "{file} no longer holds {:?}", edit.0);
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("broken.yml");
    std::fs::write(&broken, text.replacen(edit.0, edit.1, 1)).expect("write");
    let bad = check(&bin, schema, &broken);
    assert_eq!(
        bad.code, 1,
        "a broken copy of {file} passed:\n{}{}",
        bad.stdout, bad.stderr
    );
}

#[test]
fn the_github_workflow_is_valid_under_the_github_workflow_schema() {
    assert_valid_and_checked(GITHUB, "vendor.github-workflows", ("runs-on:", "runs_on:"));
}

#[test]
fn the_gitlab_job_is_valid_under_the_gitlab_ci_schema() {
    assert_valid_and_checked(GITLAB, "vendor.gitlab-ci", ("  script:", "  scripts:"));
}

#[test]
fn docs_ci_shows_each_file_as_it_is() {
    let doc = std::fs::read_to_string(support::root().join("docs/ci.md")).expect("docs/ci.md");
    for file in [GITHUB, GITLAB] {
        let text = std::fs::read_to_string(support::root().join(file)).expect("the example");
        assert!(
            doc.contains(&format!("```yaml\n{text}```\n")),
            "docs/ci.md does not show {file} as it is"
        );
        let beside = file.trim_start_matches("docs/");
        assert!(
            doc.contains(&format!("]({beside})")),
            "docs/ci.md links {file}"
        );
    }
}

#[test]
fn the_examples_use_the_binarys_marker_and_flags() {
    for file in [GITHUB, GITLAB] {
        let text = std::fs::read_to_string(support::root().join(file)).expect("the example");
        assert!(
            text.contains(&format!("'{}'", dlqctl::plan::markdown::MARKER)),
            "{file} looks for another marker"
        );
        assert!(
            text.contains("dlqctl plan \"$SPECS\" --format markdown --detailed-exitcode > plan.md"),
            "{file}"
        );
    }
    let help = |sub: &str| {
        support::output(Command::new(env!("CARGO_BIN_EXE_dlqctl")).args([sub, "--help"])).stdout
    };
    let plan = help("plan");
    assert!(
        plan.contains("--detailed-exitcode") && plan.contains("markdown"),
        "{plan}"
    );
    assert!(help("lint").contains("github"), "lint --format github");
}
