//! The pre-commit hook, run by the real `pre-commit` tool (installed by `scripts/stack up` in
//! the stack's venv): `pre-commit try-repo` builds dlqctl from this repository as any user's
//! pre-commit would, then passes a good spec and fails a bad one.

mod support;

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .status()
        .expect("git runs")
        .success();
    assert!(ok, "git {args:?}");
}

#[test]
fn pre_commit_hook_passes_good_specs_and_fails_bad_ones() {
    let pre_commit = support::cache_dir().join("venv/bin/pre-commit");
    if !support::require(
        "pre-commit (scripts/stack up installs it)",
        pre_commit.is_file(),
    ) {
        return;
    }
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path();
    git(dir, &["init", "-q"]);
    std::fs::copy(
        support::root().join("examples/dlqctl.yaml"),
        dir.join("dlqctl.yaml"),
    )
    .expect("copy");
    std::fs::copy(
        support::root().join("examples/payments-sqs.yaml"),
        dir.join("good.yaml"),
    )
    .expect("copy");
    std::fs::write(
        dir.join("bad.yaml"),
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: bad}\nspec:\n  target: local-sqs\n  retention: 20d\n  retry: {maxAttempts: 3}\n",
    )
    .expect("write");
    git(dir, &["add", "."]);

    // Build the hook like a user's pre-commit does, but keep the build cache between runs and
    // skip release optimisation: the test checks the hook's wiring, not the binary's speed.
    let target = support::root().join("target/pre-commit");
    let run = |file: &str| {
        support::output(
            Command::new(&pre_commit)
                .args([
                    "try-repo",
                    support::root().to_str().expect("utf-8"),
                    "dlqctl-lint",
                    "--files",
                    file,
                ])
                .current_dir(dir)
                .env(
                    "PRE_COMMIT_HOME",
                    support::cache_dir().join("pre-commit-home"),
                )
                .env("CARGO_TARGET_DIR", &target)
                .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
                .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
                .env("CARGO_PROFILE_RELEASE_LTO", "false")
                .env("CARGO_PROFILE_RELEASE_INCREMENTAL", "true"),
        )
    };
    let good = run("good.yaml");
    assert_eq!(
        good.code, 0,
        "good spec must pass:\n{}\n{}",
        good.stdout, good.stderr
    );
    assert!(
        good.stdout.contains("dlqctl lint") && good.stdout.contains("Passed"),
        "{}",
        good.stdout
    );

    let bad = run("bad.yaml");
    assert_eq!(
        bad.code, 1,
        "bad spec must fail:\n{}\n{}",
        bad.stdout, bad.stderr
    );
    assert!(bad.stdout.contains("sqs/retention-range"), "{}", bad.stdout);
    assert!(
        bad.stdout.contains("bad.yaml:6:14"),
        "the finding names file:line:col\n{}",
        bad.stdout
    );
}
