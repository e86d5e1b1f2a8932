//! The pre-commit hooks, run by the real `pre-commit` tool (installed by `scripts/stack up` in
//! the stack's venv) in a scratch repository that also holds a CloudFormation template:
//! a good spec passes, a bad one fails with file:line:col, the foreign file is skipped.
//!
//! `dlqctl-lint-system` runs with the binary this test run built (seconds): that is the hook's
//! wiring (entry, file types, serial run) checked on every run. `dlqctl-lint` also has
//! pre-commit build dlqctl with `cargo install`, ≈5 min on a cold cache: that test is
//! `#[ignore]`d so CI stays within its budget (issue 20), and run with
//! `cargo test --test precommit -- --ignored`; its build cache lives in the stack's cache
//! (`~/.cache/dlqctl/pre-commit-target`), so a second run rebuilds only dlqctl itself.

mod support;

use std::path::{Path, PathBuf};
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

/// A scratch git repository with the example targets, a good spec, a bad one and a
/// CloudFormation template (a foreign YAML file with tags dlqctl does not read).
fn scratch_repo() -> tempfile::TempDir {
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
    std::fs::write(
        dir.join("stack.yaml"),
        "AWSTemplateFormatVersion: '2010-09-09'\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      QueueName: !Sub '${AWS::StackName}-q'\n      RedrivePolicy:\n        deadLetterTargetArn: !GetAtt Dlq.Arn\n",
    )
    .expect("write");
    git(dir, &["add", "."]);
    scratch
}

/// `pre-commit try-repo <this repository> HOOK --files FILE` in `dir`.
fn try_repo(
    pre_commit: &Path,
    dir: &Path,
    hook: &str,
    file: &str,
    env: &[(&str, String)],
) -> support::Output {
    let mut c = Command::new(pre_commit);
    c.args([
        "try-repo",
        support::root().to_str().expect("utf-8"),
        hook,
        "--files",
        file,
    ])
    .current_dir(dir)
    .env(
        "PRE_COMMIT_HOME",
        support::cache_dir().join("pre-commit-home"),
    );
    for (k, v) in env {
        c.env(k, v);
    }
    support::output(&mut c)
}

/// The three files through `hook`: good passes, bad fails naming file:line:col, the
/// CloudFormation template passes (skipped, not misread).
fn check_hook(hook: &str, env: &[(&str, String)]) {
    let pre_commit = support::cache_dir().join("venv/bin/pre-commit");
    if !support::require(
        "pre-commit (scripts/stack up installs it)",
        pre_commit.is_file(),
    ) {
        return;
    }
    let scratch = scratch_repo();
    let dir = scratch.path();
    let good = try_repo(&pre_commit, dir, hook, "good.yaml", env);
    good.ok_with("good spec must pass");
    assert!(
        good.stdout.contains("dlqctl lint") && good.stdout.contains("Passed"),
        "{}",
        good.stdout
    );

    let bad = try_repo(&pre_commit, dir, hook, "bad.yaml", env);
    assert_eq!(
        bad.code, 1,
        "bad spec must fail:\n{}\n{}",
        bad.stdout, bad.stderr
    );
    bad.assert_stdout_contains("sqs/retention-range");
    assert!(
        bad.stdout.contains("bad.yaml:6:14"),
        "the finding names file:line:col\n{}",
        bad.stdout
    );

    let foreign = try_repo(&pre_commit, dir, hook, "stack.yaml", env);
    foreign.ok_with("a CloudFormation template is skipped, not failed");
}

/// `PATH` with the binary this test run built first.
fn path_with_built_binary() -> String {
    let bin_dir = PathBuf::from(env!("CARGO_BIN_EXE_dlqctl"))
        .parent()
        .expect("binary's folder")
        .to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    path.to_string_lossy().into_owned()
}

#[test]
fn the_system_hook_with_the_built_binary_passes_good_specs_fails_bad_ones_skips_foreign_yaml() {
    check_hook("dlqctl-lint-system", &[("PATH", path_with_built_binary())]);
}

/// Issue 53: pre-commit passes the hook only the changed files. A channel whose `target` and
/// `retry` come from a Defaults document in another file failed the hook (`spec/required`)
/// while `--all-files` passed. dlqctl now reads the Defaults beside and above the inputs, up to
/// the Targets file's folder, as it finds `dlqctl.yaml`: the changed spec alone passes, a bad
/// value in it still fails, and so does a spec whose folder has no Defaults on its way up.
#[test]
fn the_system_hook_given_only_a_changed_spec_reads_the_defaults_above_it() {
    let pre_commit = support::cache_dir().join("venv/bin/pre-commit");
    if !support::require(
        "pre-commit (scripts/stack up installs it)",
        pre_commit.is_file(),
    ) {
        return;
    }
    let scratch = scratch_repo();
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join("dlq/team")).expect("mkdir");
    std::fs::write(
        dir.join("dlq/defaults.yaml"),
        "apiVersion: dlqctl/v1\nkind: Defaults\nspec:\n  target: local-sqs\n  retry: {maxAttempts: 3}\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("dlq/team/lean.yaml"),
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: lean}\nspec:\n  retention: 1d\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("dlq/team/lean-bad.yaml"),
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: lean-bad}\nspec:\n  retention: 20d\n",
    )
    .expect("write");
    std::fs::create_dir_all(dir.join("elsewhere")).expect("mkdir");
    std::fs::write(
        dir.join("elsewhere/lone.yaml"),
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: lone}\nspec:\n  retention: 1d\n",
    )
    .expect("write");
    git(dir, &["add", "."]);
    let env = [("PATH", path_with_built_binary())];
    let hook = "dlqctl-lint-system";
    let lean = try_repo(&pre_commit, dir, hook, "dlq/team/lean.yaml", &env);
    lean.ok_with("the changed spec alone, its target and retry from the Defaults above it");
    let bad = try_repo(&pre_commit, dir, hook, "dlq/team/lean-bad.yaml", &env);
    assert_eq!(bad.code, 1, "{}\n{}", bad.stdout, bad.stderr);
    bad.assert_stdout_contains("sqs/retention-range");
    let lone = try_repo(&pre_commit, dir, hook, "elsewhere/lone.yaml", &env);
    assert_eq!(lone.code, 1, "{}\n{}", lone.stdout, lone.stderr);
    lone.assert_stdout_contains("spec/required");
}

#[test]
#[ignore = "pre-commit's own `cargo install` of dlqctl: ≈5 min cold; run with -- --ignored"]
fn the_rust_hook_built_by_pre_commit_passes_good_specs_fails_bad_ones_skips_foreign_yaml() {
    // Build the hook like a user's pre-commit does, but keep the build cache between runs and
    // skip release optimisation: the test checks the hook's wiring, not the binary's speed.
    let target = support::cache_dir().join("pre-commit-target");
    check_hook(
        "dlqctl-lint",
        &[
            ("CARGO_TARGET_DIR", target.to_string_lossy().into_owned()),
            ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0".into()),
            ("CARGO_PROFILE_RELEASE_DEBUG", "false".into()),
            ("CARGO_PROFILE_RELEASE_LTO", "false".into()),
            ("CARGO_PROFILE_RELEASE_INCREMENTAL", "true".into()),
        ],
    );
}
