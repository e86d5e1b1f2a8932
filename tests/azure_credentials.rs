//! Azure Service Bus credentials and ARM's busy answers (issue 40), against the contract fake
//! (tests/support/azure/entra.rs: the Microsoft Entra token endpoint, token audiences, ARM's
//! 429 and 409, the data plane's throttled sends): client credentials exchanged for one token
//! per audience and kept for the run; a wrong secret said clearly and never shown; a token
//! for ARM refused by the data plane with a pointer to `dataAccessTokenEnv`; a throttled GET
//! and PUT waited out; a conflict that stops apply; throttled sends during a redrive that lose
//! nothing. No Service Bus namespace and no Entra tenant is contacted: nothing here leaves
//! 127.0.0.1 (docs/azure.md).

mod support;

use support::azure::Fixture;
use support::azure::data::Client;
use support::azure::entra::{ARM_AUDIENCE, DATA_AUDIENCE};

const ARM_SCOPE: &str = "https://management.azure.com/.default";
const DATA_SCOPE: &str = "https://servicebus.azure.net/.default";
const SECRET: &str = "the-real-s3cret-value";

/// Sends `n` messages (ids `m-0000`…) to the channel's queue and abandons each until Service
/// Bus dead-letters it (the example's maxDeliveryCount is 8). The client's token is
/// `test-token`, which the fake accepts unless audiences are checked.
fn dead_lettered(f: &Fixture, n: usize) {
    let c = Client::new(&f.fake);
    let q = f.ws.channel.clone();
    support::block(async {
        for i in 0..n {
            assert_eq!(c.send(&q, &format!("m-{i:04}"), "{}", &[]).await, 201);
        }
        for _ in 0..n * 8 {
            let Some(m) = c.peek_lock(&q).await else {
                break;
            };
            assert_eq!(c.unlock(&m).await, 200);
        }
    });
    assert_eq!(f.fake.dead_letters(&q).len(), n, "all dead-lettered");
}

fn fetched(f: &Fixture) -> (usize, usize) {
    (
        f.fake.tokens_fetched(ARM_SCOPE),
        f.fake.tokens_fetched(DATA_SCOPE),
    )
}

#[test]
fn client_credentials_fetch_one_token_per_audience_per_run_and_plan_status_redrive_work() {
    let f = Fixture::new().with_client_credentials(SECRET);
    f.ws.first_apply("azure apply with client credentials");
    f.ws.assert_empty_plan("plan with client credentials");
    dead_lettered(&f, 3);
    // The fake issues tokens that carry their audience and refuses one sent to the other
    // API: a run that works sent each API its own token.
    let before = fetched(&f);
    let s = f.ws.run(&["status", "channel.yaml", "--format", "json"]);
    s.ok_with("status with client credentials");
    let v = s.json("status JSON");
    assert_eq!(v["channels"][0]["deadLetter"]["sampled"], 3, "{v}");
    let after = fetched(&f);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1, 1),
        "status fetched one token per audience (a GET per queue and a peek-lock and unlock per message used them)"
    );
    let before = fetched(&f);
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes"]);
    assert_eq!(doc["moved"], 3, "{doc}");
    let after = fetched(&f);
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 1));
    assert!(f.fake.dead_letters(&f.ws.channel).is_empty());
    assert_eq!(f.fake.messages(&f.ws.channel).len(), 3);
    // A plan needs no data-plane token.
    let before = fetched(&f);
    f.ws.assert_empty_plan("plan again");
    let after = fetched(&f);
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 0));
}

#[test]
fn a_wrong_secret_names_the_target_and_the_token_endpoint_and_no_secret_or_token_is_shown() {
    let f = Fixture::new().with_client_credentials("a-wrong-s3cret-given");
    let url = f.fake.token_url("dlqctl-tenant");
    for args in [
        &["plan", "channel.yaml"][..],
        &["plan", "channel.yaml", "-v"][..],
        &["plan", "channel.yaml", "-vv"][..],
    ] {
        let p = f.ws.run(args);
        assert_eq!(p.code, 1, "{args:?}\n{}{}", p.stdout, p.stderr);
        let both = format!("{}{}", p.stdout, p.stderr);
        assert!(both.contains("target `azure-servicebus`"), "{both}");
        assert!(both.contains(&url), "the token endpoint is named\n{both}");
        assert!(both.contains("invalid_client"), "the OAuth error\n{both}");
        assert!(
            both.contains("AADSTS7000215"),
            "the error_description\n{both}"
        );
        assert!(!both.contains("a-wrong-s3cret-given"), "{both}");
        assert!(!both.contains(SECRET), "{both}");
        assert!(!both.contains("fake.management"), "no token\n{both}");
    }
    assert!(
        f.fake
            .api
            .requests()
            .iter()
            .all(|(_, p)| p.contains("/oauth2/v2.0/token")),
        "no ARM call without a token: {:?}",
        f.fake.api.requests()
    );
    // With the right secret, a -v run shows neither the secret nor the tokens it fetched.
    let f = Fixture::new().with_client_credentials(SECRET);
    let p = f.ws.run(&["plan", "channel.yaml", "-vv"]);
    assert_eq!(p.code, 0, "{}{}", p.stdout, p.stderr);
    let both = format!("{}{}", p.stdout, p.stderr);
    assert!(
        both.contains("oauth2/v2.0/token"),
        "-v shows the fetch\n{both}"
    );
    assert!(!both.contains(SECRET), "{both}");
    assert!(!both.contains("fake.management"), "no token\n{both}");
}

#[test]
fn an_arm_token_alone_is_refused_by_the_data_plane_and_data_access_token_env_fixes_it() {
    let mut f = Fixture::new();
    f.ws.set_env("AZURE_ACCESS_TOKEN", &f.fake.issue_token(ARM_AUDIENCE));
    f.ws.first_apply("azure apply with an ARM token");
    dead_lettered(&f, 2);
    f.fake.check_audiences();
    let s = f.ws.run(&["status", "channel.yaml"]);
    let both = format!("{}{}", s.stdout, s.stderr);
    assert_ne!(s.code, 0, "{both}");
    assert!(both.contains("HTTP 401"), "{both}");
    assert!(both.contains("the data plane"), "{both}");
    assert!(both.contains("dataAccessTokenEnv"), "{both}");
    let dead = f.fake.dead_letters(&f.ws.channel);
    assert_eq!(dead.len(), 2);
    assert!(dead.iter().all(|m| m.lock.is_none()), "nothing locked");
    f.ws.edit_targets(|t| {
        t.replace(
            "accessTokenEnv: AZURE_ACCESS_TOKEN\n",
            "accessTokenEnv: AZURE_ACCESS_TOKEN\n    dataAccessTokenEnv: AZURE_SERVICEBUS_TOKEN\n",
        )
    });
    f.ws.set_env("AZURE_SERVICEBUS_TOKEN", &f.fake.issue_token(DATA_AUDIENCE));
    let s = f.ws.run(&["status", "channel.yaml", "--format", "json"]);
    s.ok_with("status with dataAccessTokenEnv");
    assert_eq!(s.json("status")["channels"][0]["deadLetter"]["sampled"], 2);
}

#[test]
fn lint_names_each_missing_part_of_the_client_credentials() {
    let f = Fixture::new();
    f.ws.edit_targets(|t| {
        t.replace(
            "accessTokenEnv: AZURE_ACCESS_TOKEN\n",
            "tenantId: dlqctl-tenant\n",
        )
    });
    let l = f.ws.run(&["lint", "channel.yaml"]);
    assert_ne!(l.code, 0, "{}{}", l.stdout, l.stderr);
    let both = format!("{}{}", l.stdout, l.stderr);
    assert!(
        both.contains("`targets.azure-servicebus.clientId` is required"),
        "{both}"
    );
    assert!(
        both.contains("`targets.azure-servicebus.clientSecretEnv` is required"),
        "{both}"
    );
    assert!(!both.contains("tenantId` is required"), "{both}");
}

#[test]
fn arm_throttling_is_waited_out_on_a_get_and_a_put_and_then_plan_is_empty() {
    let f = Fixture::new();
    let q = f.ws.channel.clone();
    f.fake.fail_arm("GET", &format!("/queues/{q}"), 429, 1);
    f.fake.fail_arm("PUT", &format!("/queues/{q}"), 429, 2);
    let a = f.ws.run(&["apply", "channel.yaml", "--auto-approve", "-v"]);
    assert_eq!(a.code, 0, "{}{}", a.stdout, a.stderr);
    assert!(
        a.stderr.contains("Retry-After"),
        "-v says what it waited on\n{}",
        a.stderr
    );
    assert!(f.fake.queue(&q).is_some(), "the queue was written");
    let puts = f
        .fake
        .api
        .requests()
        .iter()
        .filter(|(m, p)| m == "PUT" && p.contains(&q))
        .count();
    assert_eq!(puts, 3, "two throttled PUTs, then the one written");
    f.ws.assert_empty_plan("after a throttled apply");
}

#[test]
fn a_conflict_stops_apply_naming_the_queue_without_retrying_the_write() {
    let f = Fixture::new();
    let q = f.ws.channel.clone();
    f.fake.fail_arm("PUT", &format!("/queues/{q}"), 409, 1);
    let a = f.ws.run(&["apply", "channel.yaml", "--auto-approve"]);
    let both = format!("{}{}", a.stdout, a.stderr);
    assert_ne!(a.code, 0, "{both}");
    assert!(
        both.contains(&format!("queue {q}: ARM answered 409")),
        "{both}"
    );
    assert!(both.contains("409 Conflict"), "{both}");
    assert!(both.contains("not retried"), "{both}");
    let puts = f
        .fake
        .api
        .requests()
        .iter()
        .filter(|(m, p)| m == "PUT" && p.contains(&q))
        .count();
    assert_eq!(puts, 1, "the conflicting write was not sent again");
    assert!(f.fake.queue(&q).is_none());
}

#[test]
fn throttled_sends_during_a_redrive_lose_nothing_and_the_run_is_not_complete() {
    let f = Fixture::new();
    f.ws.first_apply("azure first apply");
    dead_lettered(&f, 4);
    let q = f.ws.channel.clone();
    for statuses in [&[503_u16][..], &[429][..]] {
        f.fake.throttle_sends(statuses);
        let (code, doc, err) = support::redrive::redrive(&f.ws, &["--yes"]);
        assert_ne!(code, 0, "{doc}\n{err}");
        assert!(
            err.contains(&format!("HTTP {}", statuses[0]))
                || doc.to_string().contains(&format!("HTTP {}", statuses[0])),
            "{doc}\n{err}"
        );
        assert_ne!(doc["complete"], true, "{doc}");
        let mut ids: Vec<String> = f
            .fake
            .dead_letters(&q)
            .iter()
            .chain(f.fake.messages(&q).iter())
            .map(|m| m.message_id.clone())
            .collect();
        ids.sort();
        assert_eq!(
            ids,
            ["m-0000", "m-0001", "m-0002", "m-0003"],
            "every message is in the subqueue or the queue, once"
        );
        assert!(
            f.fake.dead_letters(&q).iter().all(|m| m.lock.is_none()),
            "handed back"
        );
    }
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes"]);
    assert_eq!(doc["moved"], 4, "{doc}");
    assert_eq!(f.fake.messages(&q).len(), 4);
}

// ---------------------------------------------------------------------------------------------
// A managed identity (the instance metadata service, served by the fake at `identityUrl`)
// ---------------------------------------------------------------------------------------------

#[test]
fn a_managed_identity_gets_one_token_per_audience_and_plan_status_and_redrive_work() {
    let f = Fixture::new();
    f.fake.add_managed_identity(None);
    let f = f.with_managed_identity(None);
    f.ws.first_apply("azure apply with a managed identity");
    f.ws.assert_empty_plan("plan with a managed identity");
    dead_lettered(&f, 2);
    let before = (
        f.fake.identity_tokens(ARM_AUDIENCE),
        f.fake.identity_tokens(DATA_AUDIENCE),
    );
    let s = f.ws.run(&["status", "channel.yaml", "--format", "json"]);
    s.ok_with("status with a managed identity");
    let v = s.json("status JSON");
    assert_eq!(v["channels"][0]["deadLetter"]["sampled"], 2, "{v}");
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes", "--audit-log", "audit.jsonl"]);
    assert_eq!(doc["moved"], 2, "{doc}");
    let after = (
        f.fake.identity_tokens(ARM_AUDIENCE),
        f.fake.identity_tokens(DATA_AUDIENCE),
    );
    // Audiences are checked: status and redrive worked, so each API got its own token; one
    // of each per run.
    assert_eq!((after.0 - before.0, after.1 - before.1), (2, 2));
    let journal = std::fs::read_to_string(f.ws.path().join("audit.jsonl")).expect("journal");
    assert!(
        journal.contains("system-assigned managed identity"),
        "the audit record names who: {journal}"
    );
    assert!(!journal.contains("fake.management"), "no token: {journal}");
}

/// Microsoft's retry guidance for the instance metadata service: 404 (updating), 429
/// (throttled) and 5xx are asked again with a back-off, 410 (updating, back within 70 s)
/// every 10 s; five transient answers in a row still get a token (seen failing before the
/// back-off: the first 429 stopped the plan), five 429s are an error naming the endpoint,
/// the last answer and how many there were.
#[test]
fn the_metadata_services_transient_answers_are_asked_again_and_a_lasting_one_is_said() {
    let f = Fixture::new();
    f.fake.add_managed_identity(None);
    let url = f.fake.identity_url();
    let f = f.with_managed_identity(None);
    f.fake.fail_identity(&[429, 404, 410, 500, 503]);
    let p = f.ws.plan();
    assert_eq!(
        p.code, 2,
        "a plan after five transient answers\n{}{}",
        p.stdout, p.stderr
    );
    assert_eq!(
        f.fake.identity_requests(),
        6,
        "five refused, then the token"
    );
    assert_eq!(f.fake.identity_tokens(ARM_AUDIENCE), 1);

    f.fake.fail_identity(&[429, 429, 429, 429, 429]);
    let p = f.ws.run(&["plan", "channel.yaml"]);
    let both = format!("{}{}", p.stdout, p.stderr);
    assert_eq!(p.code, 1, "{both}");
    assert!(both.contains(&url), "the endpoint is named\n{both}");
    assert!(both.contains("HTTP 429"), "the last answer\n{both}");
    assert!(both.contains("the last of 5 answers"), "how often\n{both}");
    assert_eq!(f.fake.identity_requests(), 11, "five tries, no more");
}

// ---------------------------------------------------------------------------------------------
// Kubernetes workload identity (the fake's token endpoint takes a federated credential)
// ---------------------------------------------------------------------------------------------

/// `plan channel.yaml EXTRA`, which must fail (exit 1): its stdout and stderr together.
#[track_caller]
fn plan_fails(f: &Fixture, extra: &[&str]) -> String {
    let mut args = vec!["plan", "channel.yaml"];
    args.extend_from_slice(extra);
    let p = f.ws.run(&args);
    let both = format!("{}{}", p.stdout, p.stderr);
    assert_eq!(p.code, 1, "{both}");
    both
}

/// As the AKS workload identity webhook sets a pod up: `workloadIdentity: true` and nothing
/// more in the targets file; `AZURE_TENANT_ID`, `AZURE_CLIENT_ID`, `AZURE_FEDERATED_TOKEN_FILE`
/// and `AZURE_AUTHORITY_HOST` in the environment. The service account token is the client
/// assertion, read again by each run (the kubelet rotates it) and never shown; one that no
/// federated credential matches is an error with a hint; a missing variable is named.
#[test]
fn workload_identity_presents_the_service_account_token_from_the_webhooks_variables() {
    let mut f = Fixture::new();
    f.fake.register_federated("dlqctl-wi", "sa-token-1");
    let file = f.ws.path().join("azure-identity-token");
    std::fs::write(&file, "sa-token-1\n").expect("token file");
    let token_url = f.fake.token_url("dlqctl-tenant");
    let host = token_url
        .strip_suffix("/dlqctl-tenant/oauth2/v2.0/token")
        .expect("the fake's host");
    f.ws.edit_targets(|t| {
        t.replace(
            "accessTokenEnv: AZURE_ACCESS_TOKEN\n",
            "workloadIdentity: true\n",
        )
    });
    f.ws.set_env("AZURE_TENANT_ID", "dlqctl-tenant");
    f.ws.set_env("AZURE_CLIENT_ID", "dlqctl-wi");
    f.ws.set_env("AZURE_FEDERATED_TOKEN_FILE", file.to_str().expect("utf-8"));
    f.ws.set_env("AZURE_AUTHORITY_HOST", &format!("{host}/"));
    f.ws.first_apply("azure apply with workload identity");
    dead_lettered(&f, 2);
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes", "--audit-log", "audit.jsonl"]);
    assert_eq!(doc["moved"], 2, "{doc}");
    assert_eq!(f.fake.messages(&f.ws.channel).len(), 2);
    let journal = std::fs::read_to_string(f.ws.path().join("audit.jsonl")).expect("journal");
    assert!(
        journal.contains("workload identity dlqctl-wi (tenant dlqctl-tenant)"),
        "the audit record names who: {journal}"
    );
    let seen = f.fake.assertions();
    assert!(
        !seen.is_empty() && seen.iter().all(|a| a == "sa-token-1"),
        "{seen:?}"
    );

    // The kubelet rotated the token: the next run presents the new one.
    f.fake.register_federated("dlqctl-wi", "sa-token-2");
    std::fs::write(&file, "sa-token-2").expect("token file");
    let p = f.ws.run(&["plan", "channel.yaml", "-vv"]);
    p.ok_with("a plan after the rotation");
    assert_eq!(
        f.fake.assertions().last().map(String::as_str),
        Some("sa-token-2")
    );
    assert!(
        !format!("{}{}", p.stdout, p.stderr).contains("sa-token-2"),
        "never shown"
    );

    // A token the application does not trust.
    std::fs::write(&file, "sa-token-of-another-pod").expect("token file");
    let both = plan_fails(&f, &["-vv"]);
    for want in ["AADSTS70021", "federated credential", &token_url] {
        assert!(both.contains(want), "{want}\n{both}");
    }
    assert!(
        !both.contains("sa-token-of-another-pod"),
        "never shown\n{both}"
    );

    // An authority host in the clear: refused before the token is sent anywhere.
    std::fs::write(&file, "sa-token-2").expect("token file");
    f.ws.set_env("AZURE_AUTHORITY_HOST", "http://login.example.invalid/");
    let both = plan_fails(&f, &[]);
    assert!(both.contains("must be https"), "{both}");
    assert!(both.contains("AZURE_AUTHORITY_HOST"), "{both}");
    f.ws.set_env("AZURE_AUTHORITY_HOST", &format!("{host}/"));

    // No token file variable: named, with what sets it.
    f.ws.set_env("AZURE_FEDERATED_TOKEN_FILE", "");
    let both = plan_fails(&f, &[]);
    assert!(both.contains("AZURE_FEDERATED_TOKEN_FILE"), "{both}");
    assert!(both.contains("workload identity webhook"), "{both}");
}

#[test]
fn a_user_assigned_identity_is_asked_for_by_its_client_id_and_a_missing_one_is_said() {
    let f = Fixture::new();
    f.fake.add_managed_identity(Some("uai-orders"));
    let url = f.fake.identity_url();
    let wrong = f.with_managed_identity(Some("uai-billing"));
    let p = wrong.ws.run(&["plan", "channel.yaml"]);
    let both = format!("{}{}", p.stdout, p.stderr);
    assert_eq!(p.code, 1, "{both}");
    assert!(both.contains("target `azure-servicebus`"), "{both}");
    assert!(both.contains(&url), "the endpoint is named\n{both}");
    assert!(both.contains("Identity not found"), "IMDS's answer\n{both}");
    assert!(
        both.contains("managed identity"),
        "the hint says what to check\n{both}"
    );
    let f = Fixture::new();
    f.fake.add_managed_identity(Some("uai-orders"));
    let f = f.with_managed_identity(Some("uai-orders"));
    f.ws.first_apply("azure apply with a user-assigned identity");
    f.ws.assert_empty_plan("plan with a user-assigned identity");
    assert!(f.fake.identity_requests() > 0);
}
