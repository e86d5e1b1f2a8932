//! Rules on the `Targets` document: each connection on its own (fields that fit its
//! backend, required fields, URLs, ownership prefixes) and target names unique across files.
//!
//! Runs before any channel, and hands the channel rules a [`TargetMap`] to look targets up in.
//! Depends on the model, the loaded documents and `diag`; not on the other rule modules.

use std::collections::BTreeMap;

use crate::diag::{Diagnostic, Loc};
use crate::spec::load::{Doc, Workspace};
use crate::spec::model::{Backend, Target, Targets};

/// Every target by name, with where its name is written.
pub(super) type TargetMap<'a> = BTreeMap<&'a str, (&'a Target, Loc)>;

pub(super) fn collect_targets<'a>(ws: &'a Workspace, out: &mut Vec<Diagnostic>) -> TargetMap<'a> {
    let mut map: TargetMap<'a> = BTreeMap::new();
    for doc in &ws.targets {
        for (name, t) in &doc.value.targets {
            let base = format!("/targets/{name}");
            let loc = doc.locs.key(&base);
            if let Some((_, first)) = map.get(name.as_str()) {
                out.push(
                    Diagnostic::error(
                        "target/duplicate",
                        format!("target `{name}` is defined twice"),
                    )
                    .at(loc)
                    .related(*first, "first defined here"),
                );
                continue;
            }
            check_target(name, t, doc, &base, &ws.unexpanded, out);
            map.insert(name, (t, loc));
        }
    }
    map
}

fn check_target(
    name: &str,
    t: &Target,
    doc: &Doc<Targets>,
    base: &str,
    unexpanded: &Unexpanded,
    out: &mut Vec<Diagnostic>,
) {
    check_fields_apply(name, t, doc, base, out);
    check_required_fields(name, t, doc, base, out);
    if t.backend == Backend::AzureServicebus {
        check_azure_credentials_conflict(name, t, doc, base, out);
    }
    check_urls(name, t, doc, base, unexpanded, out);
    check_secret_properties(name, t, doc, base, out);
    check_ownership(name, t, doc, base, out);
    check_operators(name, t, doc, base, out);
}

/// `target/secret-in-properties`: a Kafka property that holds a secret (`sasl.password`,
/// `*.secret`, ...) written as a value; the hook stops the commit before the secret lands.
fn check_secret_properties(
    name: &str,
    t: &Target,
    doc: &Doc<Targets>,
    base: &str,
    out: &mut Vec<Diagnostic>,
) {
    for key in t.properties.iter().flatten().map(|(k, _)| k) {
        if crate::spec::model::is_secret_property(key) {
            out.push(
                Diagnostic::error(
                    "target/secret-in-properties",
                    format!(
                        "`targets.{name}.properties.{key}` holds a secret in the file; name the environment variable that holds it under `secretProperties` instead"
                    ),
                )
                .at(doc.locs.key(&format!("{base}/properties/{key}")))
                .hint(format!("secretProperties: {{{key}: KAFKA_SECRET_ENV_VAR}}")),
            );
        }
    }
}

/// `target/field-not-applicable`: a field of another backend (`region` on a Kafka target).
fn check_fields_apply(
    name: &str,
    t: &Target,
    doc: &Doc<Targets>,
    base: &str,
    out: &mut Vec<Diagnostic>,
) {
    const AZ: &[Backend] = &[Backend::AzureServicebus];
    let fields: [(&str, bool, &[Backend]); 32] = [
        ("region", t.region.is_some(), &[Backend::Sqs]),
        ("endpoint", t.endpoint.is_some(), &[Backend::Sqs]),
        ("profile", t.profile.is_some(), &[Backend::Sqs]),
        ("url", t.url.is_some(), &[Backend::Rabbitmq]),
        ("vhost", t.vhost.is_some(), &[Backend::Rabbitmq]),
        (
            "usernameEnv",
            t.username_env.is_some(),
            &[Backend::Rabbitmq],
        ),
        (
            "passwordEnv",
            t.password_env.is_some(),
            &[Backend::Rabbitmq],
        ),
        (
            "bootstrapServers",
            t.bootstrap_servers.is_some(),
            &[Backend::Kafka],
        ),
        ("properties", t.properties.is_some(), &[Backend::Kafka]),
        (
            "secretProperties",
            t.secret_properties.is_some(),
            &[Backend::Kafka],
        ),
        ("connectUrl", t.connect_url.is_some(), &[Backend::Kafka]),
        ("brokers", t.brokers.is_some(), &[Backend::Kafka]),
        (
            "alerts",
            t.alerts.is_some(),
            &[Backend::Rabbitmq, Backend::Kafka],
        ),
        ("project", t.project.is_some(), &[Backend::Pubsub]),
        (
            "emulatorHost",
            t.emulator_host.is_some(),
            &[Backend::Pubsub],
        ),
        (
            "grantServiceAgent",
            t.grant_service_agent.is_some(),
            &[Backend::Pubsub],
        ),
        (
            "projectNumber",
            t.project_number.is_some(),
            &[Backend::Pubsub],
        ),
        ("monitoring", t.monitoring.is_some(), &[Backend::Pubsub]),
        ("subscriptionId", t.subscription_id.is_some(), AZ),
        ("resourceGroup", t.resource_group.is_some(), AZ),
        ("namespace", t.namespace.is_some(), AZ),
        ("armUrl", t.arm_url.is_some(), AZ),
        ("dataUrl", t.data_url.is_some(), AZ),
        ("tokenUrl", t.token_url.is_some(), AZ),
        ("accessTokenEnv", t.access_token_env.is_some(), AZ),
        ("dataAccessTokenEnv", t.data_access_token_env.is_some(), AZ),
        ("tenantId", t.tenant_id.is_some(), AZ),
        ("clientId", t.client_id.is_some(), AZ),
        ("clientSecretEnv", t.client_secret_env.is_some(), AZ),
        ("managedIdentity", t.managed_identity.is_some(), AZ),
        ("identityUrl", t.identity_url.is_some(), AZ),
        ("workloadIdentity", t.workload_identity.is_some(), AZ),
    ];
    for (field, set, backends) in fields {
        if set && !backends.contains(&t.backend) {
            out.push(
                Diagnostic::error(
                    "target/field-not-applicable",
                    format!(
                        "`targets.{name}.{field}` does not apply to {} target",
                        t.backend.with_article()
                    ),
                )
                .at(doc.locs.key(&format!("{base}/{field}"))),
            );
        }
    }
}

/// `target/missing-field`: what the backend cannot connect or claim ownership without.
fn check_required_fields(
    name: &str,
    t: &Target,
    doc: &Doc<Targets>,
    base: &str,
    out: &mut Vec<Diagnostic>,
) {
    let required: &[(&str, bool)] = match t.backend {
        // The region may come from the AWS chain (AWS_REGION, the profile), as docs/sqs.md says.
        Backend::Sqs => &[],
        Backend::Rabbitmq => &[
            ("url", t.url.is_some()),
            ("ownership", t.ownership.is_some()),
        ],
        Backend::Kafka => &[
            ("bootstrapServers", t.bootstrap_servers.is_some()),
            ("ownership", t.ownership.is_some()),
        ],
        // Ownership is recorded as labels, as SQS tags; the service agent is named by number.
        Backend::Pubsub => &[
            ("project", t.project.is_some()),
            (
                "projectNumber",
                t.project_number.is_some() || t.grant_service_agent != Some(true),
            ),
        ],
        // Queues, topics and subscriptions are ARM proxy resources without tags (Queue.json,
        // 2021-11-01): ownership is declared, as on RabbitMQ. Credentials: a token, or all
        // three parts of the client credentials.
        Backend::AzureServicebus => &[
            ("subscriptionId", t.subscription_id.is_some()),
            ("resourceGroup", t.resource_group.is_some()),
            ("namespace", t.namespace.is_some()),
            ("ownership", t.ownership.is_some()),
        ],
    };
    let mut required = required.to_vec();
    if t.backend == Backend::AzureServicebus {
        azure_credentials(t, &mut required);
    }
    for &(field, set) in &required {
        if !set {
            let mut d = Diagnostic::error(
                "target/missing-field",
                format!(
                    "`targets.{name}.{field}` is required for {} target",
                    t.backend.with_article()
                ),
            )
            .at(doc.locs.key(base));
            if field == "accessTokenEnv" {
                d = d.hint("name the environment variable that holds an access token (`accessTokenEnv: AZURE_ACCESS_TOKEN`, e.g. from `az account get-access-token`), give `tenantId`, `clientId` and `clientSecretEnv` for client credentials, set `managedIdentity: true` on an Azure machine with a managed identity, or `workloadIdentity: true` in an AKS pod with workload identity");
            }
            if field == "projectNumber" {
                d = d.hint("`grantServiceAgent: true` grants to the project's Pub/Sub service agent, which is named by the project's number: `gcloud projects describe PROJECT --format='value(projectNumber)'`");
            }
            if ["tenantId", "clientId", "clientSecretEnv"].contains(&field) {
                d = d.hint("client credentials need all three of `tenantId`, `clientId` and `clientSecretEnv` (or name a ready token with `accessTokenEnv` instead)");
            }
            if field == "accessTokenEnv" && t.data_access_token_env.is_some() {
                d = d.hint("`dataAccessTokenEnv` is the data plane's token beside `accessTokenEnv`'s for ARM; client credentials fetch both and take no `dataAccessTokenEnv`");
            }
            if field == "ownership" {
                d = d.hint(format!(
                    "{} has no place to record ownership; declare the name prefixes dlqctl may manage, e.g. `ownership: {{prefixes: [\"orders.\"]}}`",
                    t.backend.display_name()
                ));
            }
            out.push(d);
        }
    }
}

/// `target/credentials-conflict`: an Azure Service Bus target names more than one way to
/// get a token (a ready one, client credentials, a managed identity, workload identity):
/// dlqctl would use one
/// and silently ignore the others, so whoever reads the file could not tell which.
fn check_azure_credentials_conflict(
    name: &str,
    t: &Target,
    doc: &Doc<Targets>,
    base: &str,
    out: &mut Vec<Diagnostic>,
) {
    let ready = t.access_token_env.is_some() || t.data_access_token_env.is_some();
    let workload = t.workload_identity == Some(true);
    // Workload identity takes `tenantId` and `tokenUrl` too; the secret is client credentials'.
    let client = t.client_secret_env.is_some()
        || (!workload && (t.tenant_id.is_some() || t.token_url.is_some()));
    let managed = t.managed_identity == Some(true);
    let ways: Vec<&str> = [
        (ready, "a ready token (`accessTokenEnv`)"),
        (client, "client credentials (`tenantId`, `clientSecretEnv`)"),
        (managed, "a managed identity (`managedIdentity: true`)"),
        (workload, "workload identity (`workloadIdentity: true`)"),
    ]
    .iter()
    .filter(|(set, _)| *set)
    .map(|(_, w)| *w)
    .collect();
    if ways.len() > 1 {
        let d = Diagnostic::error(
            "target/credentials-conflict",
            format!(
                "`targets.{name}` names {}: one only, or it is not clear which one dlqctl uses",
                ways.join(" and ")
            ),
        )
        .at(doc.locs.key(base))
        .hint("keep one way of getting a token and remove the other fields (docs/azure.md, Credentials)");
        out.push(d);
        return;
    }
    if !managed && t.identity_url.is_some() {
        out.push(
            Diagnostic::error(
                "target/credentials-conflict",
                format!(
                    "`targets.{name}.identityUrl` is the managed identity's endpoint, and `managedIdentity` is not `true`"
                ),
            )
            .at(doc.locs.key(&format!("{base}/identityUrl"))),
        );
    }
}

/// Azure Service Bus's credentials: a ready token (`accessTokenEnv`, with
/// `dataAccessTokenEnv` for the data plane if given), or all three parts of the client
/// credentials; an incomplete set names each missing part.
fn azure_credentials(t: &Target, required: &mut Vec<(&'static str, bool)>) {
    // A managed identity needs nothing more (`clientId` only for a user-assigned one), nor
    // does workload identity (the webhook's variables give what the file does not).
    if t.managed_identity == Some(true) || t.workload_identity == Some(true) {
        return;
    }
    let parts = [
        ("tenantId", t.tenant_id.is_some()),
        ("clientId", t.client_id.is_some()),
        ("clientSecretEnv", t.client_secret_env.is_some()),
    ];
    let any_part = parts.iter().any(|(_, set)| *set);
    if t.access_token_env.is_some() || (!any_part && t.data_access_token_env.is_none()) {
        required.push(("accessTokenEnv", t.access_token_env.is_some()));
        return;
    }
    if any_part {
        required.extend(parts);
    } else {
        // `dataAccessTokenEnv` alone: ARM's token is missing.
        required.push(("accessTokenEnv", false));
    }
}

/// `target/url`: `url` and `endpoint` are http(s) URLs; `target/credentials-in-url`: they,
/// `amqpUrl` and `bootstrapServers` carry no `user:password@` (credentials come only from the
/// named environment variables, and an address is printed in errors and saved in plans),
/// whether written in the file or read from the environment (`${VAR}`).
fn check_urls(
    name: &str,
    t: &Target,
    doc: &Doc<Targets>,
    base: &str,
    unexpanded: &Unexpanded,
    out: &mut Vec<Diagnostic>,
) {
    let monitoring = t.monitoring.as_ref().and_then(|m| m.endpoint.clone());
    let fields = [
        ("url", &t.url, true),
        ("endpoint", &t.endpoint, true),
        ("amqpUrl", &t.amqp_url, false),
        ("bootstrapServers", &t.bootstrap_servers, false),
        ("connectUrl", &t.connect_url, true),
        ("monitoring.endpoint", &monitoring, true),
    ];
    for (field, value, http) in fields {
        let pointer = format!("{base}/{}", field.replace('.', "/"));
        // A reference that could not be expanded was reported where it was loaded
        // (`target/variable`); every other value is checked as it will be used.
        if unexpanded.contains(&(doc.loc.file, pointer.clone())) {
            continue;
        }
        let Some(v) = value else { continue };
        if has_userinfo(v) {
            out.push(
                Diagnostic::error(
                    "target/credentials-in-url",
                    format!(
                        "`targets.{name}.{field}` holds credentials (`user:password@`); remove them and name environment variables instead (`usernameEnv`, `passwordEnv`; `secretProperties` for Kafka; the AWS credential chain for SQS)"
                    ),
                )
                .at(doc.locs.value(&pointer)),
            );
        }
        if http && !(v.starts_with("http://") || v.starts_with("https://")) {
            out.push(
                Diagnostic::error(
                    "target/url",
                    format!(
                        "`targets.{name}.{field}` must be an http:// or https:// URL, found `{}`",
                        without_userinfo(v)
                    ),
                )
                .at(doc.locs.value(&pointer)),
            );
        }
    }
}

type Unexpanded = std::collections::BTreeSet<(crate::diag::FileId, String)>;

/// The URL with anything between `://` and the last `@` cut out, for messages (a password may
/// hold an unencoded `/`, `?` or `#`).
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    if scheme.is_empty() {
        host.to_owned()
    } else {
        format!("{scheme}://{host}")
    }
}

/// Whether a URL carries credentials: any `@` after the scheme. No management API or endpoint
/// URL needs one elsewhere, and a password may hold characters that would end the host part.
fn has_userinfo(url: &str) -> bool {
    url.split_once("://").map_or(url, |(_, r)| r).contains('@')
}

/// `target/ownership`: an empty prefix would claim every resource on the target.
fn check_ownership(
    name: &str,
    t: &Target,
    doc: &Doc<Targets>,
    base: &str,
    out: &mut Vec<Diagnostic>,
) {
    if let Some(o) = &t.ownership {
        for (i, p) in o.prefixes.iter().enumerate() {
            if p.is_empty() {
                out.push(
                    Diagnostic::error(
                        "target/ownership",
                        format!("`targets.{name}.ownership.prefixes[{i}]` is empty, which would claim every resource"),
                    )
                    .at(doc.locs.value(&format!("{base}/ownership/prefixes/{i}"))),
                );
            }
        }
    }
}

/// `target/operator-glob`: an `operations.allowedOperators` entry that is not a valid glob
/// (an unclosed `[` or `{`, a `**` inside a word). `redrive` would match it only as written,
/// character for character, which is not what its author meant.
/// `target/audit-to`: an `operations.auditTo` that is not `s3://bucket[/prefix]`, an absolute
/// folder (a relative one would land wherever each operator happens to stand), or a queue
/// (`queue:NAME`: SQS, RabbitMQ) or topic (`topic:NAME`: Kafka, Pub/Sub) of the target.
fn check_operators(
    name: &str,
    t: &Target,
    doc: &Doc<Targets>,
    base: &str,
    out: &mut Vec<Diagnostic>,
) {
    if let Some(to) = t.operations.as_ref().and_then(|o| o.audit_to.as_deref())
        && let Err(why) = crate::journal::AuditTo::parse(to, t.backend.as_str())
    {
        out.push(
            Diagnostic::error(
                "target/audit-to",
                format!("`targets.{name}.operations.auditTo`: {why}; give s3://bucket/prefix, an absolute folder, or queue:NAME / topic:NAME on the target"),
            )
            .at(doc.locs.value(&format!("{base}/operations/auditTo"))),
        );
    }
    let Some(list) = t
        .operations
        .as_ref()
        .and_then(|o| o.allowed_operators.as_ref())
    else {
        return;
    };
    for (i, p) in list.iter().enumerate() {
        if let Err(e) = globset::Glob::new(p) {
            out.push(
                Diagnostic::error(
                    "target/operator-glob",
                    format!(
                        "`targets.{name}.operations.allowedOperators[{i}]` is not a valid glob ({}): it would match only `{p}` as written",
                        e.kind()
                    ),
                )
                .at(doc.locs.value(&format!("{base}/operations/allowedOperators/{i}"))),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_url_are_found_and_never_shown_whatever_they_hold() {
        for url in [
            "http://admin:secret@rabbit:15672",
            "http://admin:pa/ss@rabbit:15672",
            "https://user@rabbit",
            "http://a:b?c#d@rabbit",
        ] {
            assert!(has_userinfo(url), "{url}");
            let shown = without_userinfo(url);
            assert!(
                !shown.contains("admin") && !shown.contains("pa/ss"),
                "{shown}"
            );
            assert!(
                shown.ends_with("rabbit:15672") || shown.ends_with("rabbit"),
                "{shown}"
            );
        }
        assert!(!has_userinfo("http://127.0.0.1:15672"));
        assert!(!has_userinfo("https://sqs.eu-west-1.amazonaws.com"));
    }

    /// The findings of one Targets document with these `targets` entries.
    fn target_findings(targets: &str) -> Vec<Diagnostic> {
        let ws = crate::spec::load::load_str(
            "dlqctl.yaml",
            &format!("apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n{targets}"),
        );
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let mut out = Vec::new();
        collect_targets(&ws, &mut out);
        out
    }

    #[test]
    fn an_allowed_operator_that_is_not_a_glob_is_an_error_naming_the_entry() {
        let out = target_findings(
            "  q:\n    backend: sqs\n    region: eu-west-1\n    operations:\n      allowedOperators: ['arn:aws:iam::1:user/ops-*', 'arn:aws:iam::1:user/[ops', 'ops-{a,b']\n",
        );
        let found: Vec<_> = out
            .iter()
            .filter(|d| d.rule == "target/operator-glob")
            .map(|d| d.message.clone())
            .collect();
        assert_eq!(found.len(), 2, "{out:?}");
        assert!(found[0].contains("allowedOperators[1]"), "{found:?}");
        assert!(found[1].contains("allowedOperators[2]"), "{found:?}");
    }

    /// Workload identity takes `tenantId`, `clientId` and `tokenUrl` (where the webhook's
    /// variables do not serve) and nothing else; each other way beside it is a conflict.
    #[test]
    fn workload_identity_takes_its_own_fields_and_no_other_way() {
        let base = "  az:\n    backend: azure-servicebus\n    subscriptionId: 00000000-0000-0000-0000-000000000000\n    resourceGroup: rg\n    namespace: dlqctl-ns\n    ownership: {prefixes: [orders]}\n    workloadIdentity: true\n";
        let rules = |extra: &str| -> Vec<&'static str> {
            target_findings(&format!("{base}{extra}"))
                .iter()
                .map(|d| d.rule)
                .collect()
        };
        assert_eq!(rules(""), Vec::<&str>::new());
        assert_eq!(
            rules(
                "    tenantId: t\n    clientId: c\n    tokenUrl: https://login.example/t/oauth2/v2.0/token\n"
            ),
            Vec::<&str>::new()
        );
        for other in [
            "    clientSecretEnv: AZURE_CLIENT_SECRET\n",
            "    accessTokenEnv: AZURE_ACCESS_TOKEN\n",
            "    managedIdentity: true\n",
        ] {
            assert_eq!(rules(other), vec!["target/credentials-conflict"], "{other}");
        }
    }

    #[test]
    fn audit_to_is_s3_or_an_absolute_folder() {
        let rules = |to: &str| -> Vec<&'static str> {
            target_findings(&format!(
                "  q:\n    backend: sqs\n    region: eu-west-1\n    operations:\n      auditTo: {to:?}\n"
            ))
            .iter()
            .map(|d| d.rule)
            .collect()
        };
        assert_eq!(rules("s3://audit/dlqctl"), Vec::<&str>::new());
        assert_eq!(rules("/var/log/dlqctl"), Vec::<&str>::new());
        assert_eq!(rules("queue:dlqctl-audit"), Vec::<&str>::new());
        assert_eq!(
            rules("topic:dlqctl-audit"),
            ["target/audit-to"],
            "SQS has no topics"
        );
        assert_eq!(rules("audit-logs"), ["target/audit-to"]);
        assert_eq!(rules("s3:///x"), ["target/audit-to"]);
        assert_eq!(rules("https://example.com/x"), ["target/audit-to"]);
    }

    #[test]
    fn granting_the_pubsub_service_agent_needs_the_project_number() {
        for ok in [
            "{backend: pubsub, project: my-project}",
            "{backend: pubsub, project: my-project, grantServiceAgent: false}",
            "{backend: pubsub, project: my-project, grantServiceAgent: true, projectNumber: \"123\"}",
        ] {
            let found = target_findings(&format!("  gcp: {ok}\n"));
            assert!(found.is_empty(), "{ok}: {found:?}");
        }
        let found = target_findings(
            "  gcp: {backend: pubsub, project: my-project, grantServiceAgent: true}\n",
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].message,
            "`targets.gcp.projectNumber` is required for a Pub/Sub target"
        );
        assert!(
            found[0]
                .hint
                .as_deref()
                .is_some_and(|h| h.starts_with("`grantServiceAgent: true` grants")),
            "{:?}",
            found[0].hint
        );
    }

    /// Issue 36: `monitoring` is Pub/Sub's, and its endpoint is an http(s) URL without
    /// credentials, like every other address.
    #[test]
    fn pubsub_monitoring_is_an_http_url_on_a_pubsub_target_only() {
        let rules = |t: &str| -> Vec<String> {
            target_findings(&format!("  t: {t}\n"))
                .iter()
                .map(|d| format!("{} | {}", d.rule, d.message))
                .collect()
        };
        for ok in [
            "{backend: pubsub, project: my-project, monitoring: {enabled: false}}",
            "{backend: pubsub, project: my-project, monitoring: {endpoint: \"http://127.0.0.1:9/v3\"}}",
        ] {
            assert_eq!(rules(ok), Vec::<String>::new(), "{ok}");
        }
        assert_eq!(
            rules(
                "{backend: pubsub, project: my-project, monitoring: {endpoint: monitoring.internal}}"
            ),
            [
                "target/url | `targets.t.monitoring.endpoint` must be an http:// or https:// URL, found `monitoring.internal`"
            ]
        );
        assert_eq!(
            rules("{backend: pubsub, project: my-project, monitoring: {endpoint: \"https://u:p@m.internal/v3\"}}")[0]
                .split(" | ")
                .next(),
            Some("target/credentials-in-url")
        );
        assert_eq!(
            rules("{backend: sqs, monitoring: {enabled: false}}"),
            [
                "target/field-not-applicable | `targets.t.monitoring` does not apply to an SQS target"
            ]
        );
    }

    #[test]
    fn a_url_without_a_scheme_is_shown_without_its_credentials() {
        assert_eq!(without_userinfo("admin:pw@rabbit:15672"), "rabbit:15672");
        assert_eq!(without_userinfo("rabbit:15672"), "rabbit:15672");
        let found = target_findings(
            "  r: {backend: rabbitmq, url: \"admin:pw@rabbit:15672\", ownership: {prefixes: [app.]}}\n",
        );
        let messages: Vec<_> = found.iter().map(|d| (d.rule, d.message.as_str())).collect();
        assert_eq!(
            messages,
            [
                (
                    "target/credentials-in-url",
                    "`targets.r.url` holds credentials (`user:password@`); remove them and name environment variables instead (`usernameEnv`, `passwordEnv`; `secretProperties` for Kafka; the AWS credential chain for SQS)"
                ),
                (
                    "target/url",
                    "`targets.r.url` must be an http:// or https:// URL, found `rabbit:15672`"
                ),
            ]
        );
    }
}
