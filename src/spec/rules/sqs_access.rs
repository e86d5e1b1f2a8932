//! Rules on how an SQS channel's messages are protected: `sqs.encryption` and `sqs.policy`
//! must say something SQS can take, and the dead-letter queue, which holds the same messages
//! and is the one people read by hand, must be no weaker than its source
//! (`deadletter/weaker-encryption`, `deadletter/wider-access`).
//!
//! Depends on `spec::access` (levels, policies, readers) and the resolved channel.

use crate::diag::Diagnostic;
use crate::spec::access::{self, MAX_DATA_KEY_REUSE, MIN_DATA_KEY_REUSE};
use crate::spec::load::Doc;
use crate::spec::model::{Channel, QueuePolicy, SqsEncryption};
use crate::spec::resolve::Resolved;

pub(super) fn check_access(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let spec = &doc.value.spec;
    let own = spec.sqs.as_ref();
    let dl = spec.dead_letter.as_ref().and_then(|d| d.sqs.as_ref());
    for (field, e) in [
        ("sqs.encryption", own.and_then(|s| s.encryption.as_ref())),
        (
            "deadLetter.sqs.encryption",
            dl.and_then(|d| d.encryption.as_ref()),
        ),
    ] {
        if let Some(e) = e {
            check_encryption(doc, field, e, out);
        }
    }
    for (field, p) in [
        ("sqs.policy", own.and_then(|s| s.policy.as_ref())),
        ("deadLetter.sqs.policy", dl.and_then(|d| d.policy.as_ref())),
    ] {
        if let Some(p) = p {
            check_policy(doc, field, p, out);
        }
    }
    weaker_encryption(doc, r, out);
    wider_access(doc, r, out);
}

fn pointer(field: &str) -> String {
    format!("/spec/{}", field.replace('.', "/"))
}

/// `sqs/encryption`: one of `kms` and `managed`; `dataKeyReuse` only with `kms`, in whole
/// seconds from 1m to 24h.
fn check_encryption(doc: &Doc<Channel>, field: &str, e: &SqsEncryption, out: &mut Vec<Diagnostic>) {
    let at = pointer(field);
    let problem = match (&e.kms, e.managed, e.data_key_reuse) {
        (Some(_), Some(_), _) => Some((
            format!(
                "`{field}` has both `kms` and `managed`: a queue has one kind of server-side encryption"
            ),
            "keep `kms: KEY` for a KMS key, or `managed: true` for SQS-managed keys",
        )),
        (None, None, _) => Some((
            format!("`{field}` says neither `kms` nor `managed`"),
            "write `kms: alias/KEY` (SSE-KMS), `managed: true` (SSE-SQS) or `managed: false` (none)",
        )),
        (None, Some(_), Some(_)) => Some((
            format!("`{field}.dataKeyReuse` is only for a KMS key"),
            "remove it, or use `kms: KEY`",
        )),
        (Some(_), None, Some(d))
            if d < MIN_DATA_KEY_REUSE
                || d > MAX_DATA_KEY_REUSE
                || !d.as_millis().is_multiple_of(1000) =>
        {
            Some((
                format!(
                    "`{field}.dataKeyReuse` is {d}; SQS takes whole seconds from {MIN_DATA_KEY_REUSE} to {MAX_DATA_KEY_REUSE} (KmsDataKeyReusePeriodSeconds)"
                ),
                "the default is 5m",
            ))
        }
        _ => None,
    };
    if let Some((message, hint)) = problem {
        out.push(
            Diagnostic::error("sqs/encryption", message)
                .at(doc.locs.key(&at))
                .hint(hint),
        );
    }
}

/// `sqs/policy`: a policy is an IAM policy document (JSON text, or a mapping).
fn check_policy(doc: &Doc<Channel>, field: &str, p: &QueuePolicy, out: &mut Vec<Diagnostic>) {
    if let Err(why) = access::parse_policy(p) {
        out.push(
            Diagnostic::error("sqs/policy", format!("`{field}` {why}"))
                .at(doc.locs.value(&pointer(field)))
                .hint("write the queue's access policy as a mapping (`Version`, `Statement`), or as its JSON text"),
        );
    }
}

/// `deadletter/weaker-encryption` (warning): a written dead-letter override weaker than the
/// main queue's encryption (none < SSE-SQS < KMS).
fn weaker_encryption(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let Some(s) = &r.sqs else { return };
    let written = doc
        .value
        .spec
        .dead_letter
        .as_ref()
        .and_then(|d| d.sqs.as_ref())
        .is_some_and(|d| d.encryption.is_some());
    let (Some(main), Some(dlq)) = (&s.encryption, &s.dead_letter_encryption) else {
        return;
    };
    if written && dlq.level() < main.level() {
        out.push(
            Diagnostic::warning(
                "deadletter/weaker-encryption",
                format!(
                    "the dead-letter queue gets {}, weaker than its source's {}: dead letters are the same messages, often the most sensitive ones",
                    dlq.level().describe(),
                    main.level().describe()
                ),
            )
            .at(doc.locs.key("/spec/deadLetter/sqs/encryption"))
            .related(doc.locs.key("/spec/sqs/encryption"), "the source's encryption")
            .hint("remove `deadLetter.sqs.encryption` to encrypt both alike, or silence with `lint: {allow: [deadletter/weaker-encryption]}`"),
        );
    }
}

/// `deadletter/wider-access` (warning): the dead-letter queue's policy lets a principal
/// receive messages that the source's policy does not.
fn wider_access(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let Some(s) = &r.sqs else { return };
    let Some(dlq) = &s.dead_letter_policy else {
        return;
    };
    let wider = access::wider_readers(dlq, s.policy.as_ref());
    if wider.is_empty() {
        return;
    }
    let mut d = Diagnostic::warning(
        "deadletter/wider-access",
        format!(
            "the dead-letter queue's policy lets {} receive messages, which the source's policy does not: dead letters are the messages that went wrong, read by hand",
            wider.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
        ),
    )
    .at(doc.locs.key("/spec/deadLetter/sqs/policy"))
    .hint("grant sqs:ReceiveMessage on the dead-letter queue only to principals that may read the source (operators), or silence with `lint: {allow: [deadletter/wider-access]}`");
    if doc.locs.has("/spec/sqs/policy") {
        d = d.related(doc.locs.key("/spec/sqs/policy"), "the source's policy");
    }
    out.push(d);
}

#[cfg(test)]
mod tests {
    use super::super::tests::findings_of;

    /// The rule ids of an SQS channel with these `spec` lines (`alarms/missing` silenced).
    fn sqs_rules(spec: &str) -> Vec<&'static str> {
        findings_of(
            "sqs",
            &format!("  retry: {{maxAttempts: 3}}\n{spec}  lint: {{allow: [alarms/missing]}}\n"),
            "",
        )
        .iter()
        .map(|d| d.rule)
        .collect()
    }

    #[test]
    fn a_data_key_is_reused_whole_seconds_from_one_minute_to_a_day() {
        let spec =
            |d: &str| format!("  sqs: {{encryption: {{kms: alias/orders, dataKeyReuse: {d}}}}}\n");
        for ok in ["1m", "24h"] {
            assert_eq!(sqs_rules(&spec(ok)), Vec::<&str>::new(), "{ok}");
        }
        for bad in ["59s", "24h1s", "90500ms"] {
            assert_eq!(sqs_rules(&spec(bad)), ["sqs/encryption"], "{bad}");
        }
    }

    #[test]
    fn a_dead_letter_queue_as_strongly_encrypted_as_its_source_is_not_weaker() {
        let spec = |main: &str, dlq: &str| {
            format!("  sqs: {{encryption: {main}}}\n  deadLetter: {{sqs: {{encryption: {dlq}}}}}\n")
        };
        assert_eq!(
            sqs_rules(&spec("{managed: true}", "{managed: true}")),
            Vec::<&str>::new()
        );
        assert_eq!(
            sqs_rules(&spec("{kms: alias/orders}", "{managed: true}")),
            ["deadletter/weaker-encryption"]
        );
    }

    #[test]
    fn an_encryption_block_says_one_kind_of_encryption() {
        let messages = |e: &str| -> Vec<String> {
            findings_of(
                "sqs",
                &format!("  retry: {{maxAttempts: 3}}\n  sqs: {{encryption: {e}}}\n  lint: {{allow: [alarms/missing]}}\n"),
                "",
            )
            .into_iter()
            .filter(|d| d.rule == "sqs/encryption")
            .map(|d| d.message)
            .collect()
        };
        assert_eq!(messages("{managed: true}"), Vec::<String>::new());
        assert_eq!(
            messages("{kms: alias/orders, managed: true}"),
            [
                "`sqs.encryption` has both `kms` and `managed`: a queue has one kind of server-side encryption"
            ]
        );
        assert_eq!(
            messages("{}"),
            ["`sqs.encryption` says neither `kms` nor `managed`"]
        );
        assert_eq!(
            messages("{managed: true, dataKeyReuse: 5m}"),
            ["`sqs.encryption.dataKeyReuse` is only for a KMS key"]
        );
    }
}
