//! A Targets document with schema errors (issue 31, finding 22): the run reports those
//! errors, where they are, and does not add a "no Targets document was found" on every
//! channel that names one of its targets. A channel naming a target that the document does
//! not define either still gets `target/unknown`, with a hint that points at the broken
//! document. Through the real binary, with a cleared environment, snapshotted.

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> String {
    let out = Command::new(
        std::env::var_os("DLQCTL_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_dlqctl").into()),
    )
    .env_clear()
    .current_dir(root())
    .args(args)
    .output()
    .expect("dlqctl runs");
    // The discovered targets file is named by its absolute path: the checkout's varies.
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .replace(&root().display().to_string(), "[ROOT]")
}

#[test]
fn lint_reports_the_targets_documents_errors_not_a_missing_document() {
    let out = run(&["lint", "--color", "never", "tests/fixtures/targets-error"]);
    assert!(!out.contains("no Targets document was found"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn plan_reports_the_targets_documents_errors_not_a_missing_document() {
    let out = run(&[
        "plan",
        "--color",
        "never",
        "tests/fixtures/targets-error/payments.yaml",
    ]);
    assert!(!out.contains("no Targets document was found"), "{out}");
    assert!(
        out.contains("`targets.local-sqs.region` must be a string"),
        "{out}"
    );
    insta::assert_snapshot!(out);
}
