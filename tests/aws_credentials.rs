//! AWS credentials and region as teams really have them (issue 20), live against moto:
//! a `credential_process` profile is used, the region may come from the profile instead of
//! the targets file, and when credentials or a region cannot be had the error gives the SDK's
//! own cause (an SSO profile with no `aws sso login`), never a generic "set AWS_PROFILE".
//!
//! Each run of `dlqctl plan` gets an environment with no AWS variable but those the test sets,
//! and a HOME of its own, so nothing on the host (keys, `~/.aws`) can make a test pass.

mod support;

use std::path::Path;
use std::process::Command;

/// A workspace: targets file with one SQS target (`extra` lines added under it), the example
/// payments channel, and an AWS config file holding `config`.
fn workspace(extra: &str, config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(
        d.join("dlqctl.yaml"),
        format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  local-sqs:\n    backend: sqs\n    endpoint: {}\n{extra}",
            support::aws_endpoint()
        ),
    )
    .expect("write targets");
    std::fs::copy(
        support::root().join("examples/payments-sqs.yaml"),
        d.join("channel.yaml"),
    )
    .expect("copy example");
    std::fs::write(d.join("aws-config"), config).expect("write aws config");
    dir
}

/// `dlqctl plan` in `dir` with only PATH, a private HOME, the AWS config file and `env`.
fn plan(dir: &Path, env: &[(&str, &str)]) -> support::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dlqctl"));
    c.env_clear()
        .current_dir(dir)
        .args(["plan", "--color", "never", "."])
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("AWS_CONFIG_FILE", dir.join("aws-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            dir.join("no-credentials-file"),
        )
        // No instance-metadata lookups from a test (they would time out, not fail).
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for (k, v) in env {
        c.env(k, v);
    }
    support::output(&mut c)
}

fn moto_up() -> bool {
    support::require(
        "moto (SQS)",
        support::tcp_up(&support::host_port(&support::aws_endpoint())),
    )
}

#[test]
fn a_credential_process_profile_is_used_and_its_region_read_from_the_profile() {
    if !moto_up() {
        return;
    }
    let scratch = tempfile::tempdir().expect("tempdir");
    let marker = scratch.path().join("called");
    let script = scratch.path().join("creds.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ntouch '{}'\necho '{{\"Version\": 1, \"AccessKeyId\": \"testing\", \"SecretAccessKey\": \"testing\"}}'\n",
            marker.display()
        ),
    )
    .expect("write script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let ws = workspace(
        "    profile: team\n",
        &format!(
            "[profile team]\ncredential_process = {}\nregion = us-east-1\n",
            script.display()
        ),
    );
    let out = plan(ws.path(), &[]);
    out.ok_with("plan with a credential_process profile");
    assert!(
        out.stdout.contains("payments-transactions-pending"),
        "the plan reads the live SQS state:\n{}",
        out.stdout
    );
    assert!(marker.exists(), "the credential_process was run");
}

#[test]
fn an_sso_profile_without_a_login_fails_with_the_sdks_cause() {
    if !moto_up() {
        return;
    }
    let ws = workspace(
        "    region: us-east-1\n",
        "[profile sso-team]\nsso_session = corp\nsso_account_id = 111122223333\nsso_role_name = Platform\nregion = us-east-1\n\n[sso-session corp]\nsso_start_url = https://corp.awsapps.example/start\nsso_region = us-east-1\n",
    );
    let out = plan(ws.path(), &[("AWS_PROFILE", "sso-team")]);
    out.exits(1);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("no AWS credentials"), "{text}");
    // The SDK's own reason: the SSO token (no `aws sso login` was run), not a generic hint.
    assert!(
        text.to_ascii_lowercase().contains("sso") && text.to_ascii_lowercase().contains("token"),
        "the SSO provider's cause is shown:\n{text}"
    );
}

#[test]
fn no_region_anywhere_is_one_clear_error() {
    if !moto_up() {
        return;
    }
    let ws = workspace("", "");
    let out = plan(
        ws.path(),
        &[
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
        ],
    );
    out.exits(1);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        text.contains("no AWS region") && text.contains("AWS_REGION"),
        "{text}"
    );
}

#[test]
fn no_region_without_an_endpoint_override_is_one_clear_error_at_once() {
    // No endpoint and no region: the SDK cannot even resolve where to send, so no request
    // leaves this machine; it must not be retried as "cannot reach the endpoint".
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("dlqctl.yaml"),
        "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  local-sqs:\n    backend: sqs\n",
    )
    .expect("write targets");
    std::fs::copy(
        support::root().join("examples/payments-sqs.yaml"),
        dir.path().join("channel.yaml"),
    )
    .expect("copy example");
    std::fs::write(dir.path().join("aws-config"), "").expect("write aws config");
    let started = std::time::Instant::now();
    let out = plan(
        dir.path(),
        &[
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
        ],
    );
    out.exits(1);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("no AWS region"), "{text}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "retried: {:?}",
        started.elapsed()
    );
}

#[test]
fn a_failing_credential_process_is_named_but_its_output_never_shown() {
    if !moto_up() {
        return;
    }
    let scratch = tempfile::tempdir().expect("tempdir");
    let script = scratch.path().join("creds.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'login failed for token s.SECRETTOKEN123' >&2\nexit 3\n",
    )
    .expect("write script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let ws = workspace(
        "    profile: team\n    region: us-east-1\n",
        &format!(
            "[profile team]\ncredential_process = {}\n",
            script.display()
        ),
    );
    let out = plan(ws.path(), &[]);
    out.exits(1);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("no AWS credentials"), "{text}");
    assert!(text.contains("external process exited"), "{text}");
    assert!(!text.contains("SECRETTOKEN123"), "{text}");
}
