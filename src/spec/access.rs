//! How well a queue's messages are protected, as values the rules, the planner and import
//! share: SQS server-side encryption (with its order, none < SSE-SQS < KMS) and queue access
//! policies (IAM policy documents, compared as parsed JSON, and who they let receive).
//!
//! A dead-letter queue holds exactly the messages that went wrong, and it is the queue people
//! read by hand, so it must be protected at least as well as its source. The spec (`sqs.
//! encryption`, `sqs.policy`), the live attributes (`KmsMasterKeyId`, `SqsManagedSseEnabled`,
//! `Policy`) and the lint rules all meet here. Pure: no I/O.

use std::collections::BTreeSet;

use serde_json::Value;

use super::duration::Duration;
use super::model::{QueuePolicy, SqsEncryption};

/// SQS's default `KmsDataKeyReusePeriodSeconds`.
pub const DEFAULT_DATA_KEY_REUSE: Duration = Duration::from_secs(300);
/// The range SQS accepts for `KmsDataKeyReusePeriodSeconds`.
pub const MIN_DATA_KEY_REUSE: Duration = Duration::from_secs(60);
pub const MAX_DATA_KEY_REUSE: Duration = Duration::from_secs(86_400);

/// How strongly a queue is encrypted at rest, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    /// SSE-SQS: keys SQS owns.
    Managed,
    /// SSE-KMS: a KMS key the account controls.
    Kms,
}

impl Level {
    pub fn describe(self) -> &'static str {
        match self {
            Level::None => "no server-side encryption",
            Level::Managed => "SSE-SQS",
            Level::Kms => "SSE-KMS",
        }
    }
}

/// A queue's encryption as the spec asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encryption {
    None,
    Managed,
    Kms { key: String, reuse_secs: u64 },
}

impl Encryption {
    /// The spec's block as a value; `None` when it says nothing usable (neither `kms` nor
    /// `managed`: the rules report it). `kms` wins over `managed` here; the rules refuse both.
    pub fn from_spec(e: &SqsEncryption) -> Option<Self> {
        match (&e.kms, e.managed) {
            (Some(key), _) => Some(Encryption::Kms {
                key: key.clone(),
                reuse_secs: e
                    .data_key_reuse
                    .unwrap_or(DEFAULT_DATA_KEY_REUSE)
                    .as_millis()
                    / 1000,
            }),
            (None, Some(true)) => Some(Encryption::Managed),
            (None, Some(false)) => Some(Encryption::None),
            (None, None) => None,
        }
    }

    pub fn level(&self) -> Level {
        match self {
            Encryption::None => Level::None,
            Encryption::Managed => Level::Managed,
            Encryption::Kms { .. } => Level::Kms,
        }
    }

    /// Back to the spec's block (for import), leaving out SQS's default data key reuse.
    pub fn to_spec(&self) -> SqsEncryption {
        match self {
            Encryption::None => SqsEncryption {
                managed: Some(false),
                ..SqsEncryption::default()
            },
            Encryption::Managed => SqsEncryption {
                managed: Some(true),
                ..SqsEncryption::default()
            },
            Encryption::Kms { key, reuse_secs } => SqsEncryption {
                kms: Some(key.clone()),
                data_key_reuse: (*reuse_secs != DEFAULT_DATA_KEY_REUSE.as_millis() / 1000)
                    .then(|| Duration::from_secs(*reuse_secs)),
                managed: None,
            },
        }
    }
}

/// The encryption of a live queue from its attributes (as `read` normalises them:
/// `KmsMasterKeyId` a non-empty string, `SqsManagedSseEnabled` a boolean). A KMS key wins:
/// AWS reports SSE-SQS off when one is set, moto may not. `None` when the endpoint reports
/// neither attribute: then nothing is known.
pub fn live_encryption(
    kms_key: Option<&Value>,
    reuse: Option<&Value>,
    managed: Option<&Value>,
) -> Option<Encryption> {
    if let Some(key) = kms_key.and_then(Value::as_str).filter(|k| !k.is_empty()) {
        return Some(Encryption::Kms {
            key: key.to_owned(),
            reuse_secs: reuse
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_DATA_KEY_REUSE.as_millis() / 1000),
        });
    }
    managed.map(|m| {
        if *m == Value::Bool(true) {
            Encryption::Managed
        } else {
            Encryption::None
        }
    })
}

/// A policy from the spec as a normalised JSON document, or why it is not one.
pub fn parse_policy(p: &QueuePolicy) -> Result<Value, String> {
    let doc = match p {
        QueuePolicy::Document(m) => Value::Object(m.clone()),
        QueuePolicy::Text(t) => {
            serde_json::from_str::<Value>(t).map_err(|e| format!("is not JSON: {e}"))?
        }
    };
    if !doc.is_object() {
        return Err(
            "is not a JSON object (a policy document has `Version` and `Statement`)".into(),
        );
    }
    if doc.get("Statement").is_none() {
        return Err("has no `Statement`".into());
    }
    Ok(normalise_policy(doc))
}

/// The same policy whatever the statement order: `Statement` as a list (a single statement
/// may be written as an object), sorted by its JSON text. Whitespace is gone once parsed.
pub fn normalise_policy(mut doc: Value) -> Value {
    if let Some(s) = doc.get_mut("Statement") {
        let mut list = match s.take() {
            Value::Array(a) => a,
            other => vec![other],
        };
        list.sort_by_cached_key(|v| v.to_string());
        *s = Value::Array(list);
    }
    doc
}

/// The principals a policy allows to receive messages (`sqs:ReceiveMessage`, `sqs:*` or
/// `*`), as `*` or `TYPE:value` (`AWS:arn:aws:iam::123456789012:root`). Conditions are not
/// evaluated: a conditional grant counts as a grant.
pub fn readers(policy: &Value) -> BTreeSet<String> {
    let strings = |v: Option<&Value>| -> Vec<String> {
        match v {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        }
    };
    let reads = |action: &str| {
        let a = action.to_ascii_lowercase();
        a == "*" || a == "sqs:*" || a == "sqs:receivemessage"
    };
    let mut out = BTreeSet::new();
    for st in policy
        .get("Statement")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if st.get("Effect").and_then(Value::as_str) != Some("Allow")
            || !strings(st.get("Action")).iter().any(|a| reads(a))
        {
            continue;
        }
        match st.get("Principal") {
            Some(Value::String(p)) => {
                out.insert(p.clone());
            }
            Some(Value::Object(m)) => {
                for (kind, who) in m {
                    for w in strings(Some(who)) {
                        out.insert(if w == "*" { w } else { format!("{kind}:{w}") });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The principals the dead-letter queue's policy lets receive and the source's does not
/// (none when the source lets everybody receive).
pub fn wider_readers(dead_letter: &Value, source: Option<&Value>) -> Vec<String> {
    let theirs = source.map(readers).unwrap_or_default();
    if theirs.contains("*") {
        return Vec::new();
    }
    readers(dead_letter)
        .into_iter()
        .filter(|p| !theirs.contains(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn statement_order_and_whitespace_do_not_matter() {
        let a = parse_policy(&QueuePolicy::Text(
            r#"{"Version":"2012-10-17","Statement":[{"Sid":"b"},{"Sid":"a"}]}"#.into(),
        ))
        .unwrap();
        let b = parse_policy(&QueuePolicy::Text(
            "{\n  \"Statement\": [ {\"Sid\": \"a\"}, {\"Sid\": \"b\"} ],\n  \"Version\": \"2012-10-17\"\n}".into(),
        ))
        .unwrap();
        assert_eq!(a, b);
        let single = normalise_policy(json!({"Statement": {"Sid": "a"}}));
        assert_eq!(single, json!({"Statement": [{"Sid": "a"}]}));
    }

    #[test]
    fn a_policy_that_is_not_a_document_says_why() {
        let e = parse_policy(&QueuePolicy::Text("{nope".into())).unwrap_err();
        assert!(e.starts_with("is not JSON"), "{e}");
        let e = parse_policy(&QueuePolicy::Text("[1]".into())).unwrap_err();
        assert!(e.contains("not a JSON object"), "{e}");
        let e = parse_policy(&QueuePolicy::Text("{\"Version\":\"x\"}".into())).unwrap_err();
        assert!(e.contains("no `Statement`"), "{e}");
    }

    #[test]
    fn only_allowed_receives_count_as_reads() {
        let p = json!({"Statement": [
            {"Effect": "Allow", "Principal": {"AWS": ["arn:a", "arn:b"]}, "Action": "sqs:ReceiveMessage"},
            {"Effect": "Allow", "Principal": {"AWS": "arn:c"}, "Action": ["sqs:SendMessage"]},
            {"Effect": "Deny", "Principal": "*", "Action": "sqs:*"},
            {"Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"}, "Action": "SQS:*"},
        ]});
        let r: Vec<String> = readers(&p).into_iter().collect();
        assert_eq!(r, ["AWS:arn:a", "AWS:arn:b", "Service:sns.amazonaws.com"]);
    }

    #[test]
    fn a_principal_written_as_a_bare_string_reads_too() {
        // `"Principal": "*"` is IAM's short form of `{"AWS": "*"}`: everybody.
        let anyone = json!({"Statement": [
            {"Effect": "Allow", "Principal": "*", "Action": "sqs:ReceiveMessage"},
        ]});
        let r: Vec<String> = readers(&anyone).into_iter().collect();
        assert_eq!(r, ["*"]);
        let ops = json!({"Statement": [
            {"Effect": "Allow", "Principal": {"AWS": "arn:ops"}, "Action": "sqs:*"},
        ]});
        assert_eq!(wider_readers(&anyone, Some(&ops)), ["*"]);
        assert_eq!(wider_readers(&ops, Some(&anyone)), Vec::<String>::new());
    }

    #[test]
    fn a_dead_letter_reader_the_source_lacks_is_wider() {
        let grant = |who: &str, action: &str| json!({"Statement": [{"Effect": "Allow", "Principal": {"AWS": who}, "Action": action}]});
        let dlq = grant("arn:ops", "sqs:*");
        assert_eq!(wider_readers(&dlq, None), ["AWS:arn:ops"]);
        assert_eq!(
            wider_readers(&dlq, Some(&grant("arn:ops", "sqs:ReceiveMessage"))),
            Vec::<String>::new()
        );
        assert_eq!(
            wider_readers(&dlq, Some(&grant("arn:ops", "sqs:SendMessage"))),
            ["AWS:arn:ops"]
        );
        assert_eq!(
            wider_readers(&dlq, Some(&grant("*", "*"))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn encryption_is_ordered_and_a_kms_key_wins_on_a_live_queue() {
        assert!(Level::None < Level::Managed && Level::Managed < Level::Kms);
        let kms = live_encryption(Some(&json!("alias/k")), None, Some(&json!(true)));
        let key = "alias/k".to_owned();
        assert_eq!(
            kms,
            Some(Encryption::Kms {
                key,
                reuse_secs: 300
            })
        );
        let sse = live_encryption(Some(&json!("")), None, Some(&json!(true)));
        assert_eq!(sse, Some(Encryption::Managed));
        let none = live_encryption(None, None, Some(&json!(false)));
        assert_eq!(none, Some(Encryption::None));
        assert_eq!(
            live_encryption(None, None, None),
            None,
            "not reported: unknown"
        );
    }

    #[test]
    fn the_spec_block_round_trips_without_the_default_reuse() {
        for e in [
            Encryption::None,
            Encryption::Managed,
            Encryption::Kms {
                key: "k".into(),
                reuse_secs: 300,
            },
            Encryption::Kms {
                key: "k".into(),
                reuse_secs: 600,
            },
        ] {
            assert_eq!(Encryption::from_spec(&e.to_spec()), Some(e.clone()));
        }
        let k = Encryption::Kms {
            key: "k".into(),
            reuse_secs: 300,
        }
        .to_spec();
        assert_eq!(k.data_key_reuse, None);
    }

    #[test]
    fn levels_and_encryptions_are_named_and_ranked() {
        assert_eq!(
            [Level::None, Level::Managed, Level::Kms].map(Level::describe),
            ["no server-side encryption", "SSE-SQS", "SSE-KMS"]
        );
        let kms = Encryption::Kms {
            key: "k".into(),
            reuse_secs: 60,
        };
        assert_eq!(
            [Encryption::None, Encryption::Managed, kms].map(|e| e.level()),
            [Level::None, Level::Managed, Level::Kms]
        );
    }

    #[test]
    fn a_spec_block_with_a_kms_key_is_kms_whatever_managed_says() {
        let block = |kms: Option<&str>, reuse: Option<u64>, managed: Option<bool>| SqsEncryption {
            kms: kms.map(str::to_owned),
            data_key_reuse: reuse.map(Duration::from_secs),
            managed,
        };
        assert_eq!(
            Encryption::from_spec(&block(Some("alias/k"), Some(90), Some(true))),
            Some(Encryption::Kms {
                key: "alias/k".into(),
                reuse_secs: 90
            })
        );
        assert_eq!(
            Encryption::from_spec(&block(Some("alias/k"), None, None)),
            Some(Encryption::Kms {
                key: "alias/k".into(),
                reuse_secs: 300
            })
        );
        assert_eq!(
            Encryption::from_spec(&block(None, None, Some(true))),
            Some(Encryption::Managed)
        );
        assert_eq!(
            Encryption::from_spec(&block(None, None, Some(false))),
            Some(Encryption::None)
        );
        assert_eq!(Encryption::from_spec(&block(None, Some(90), None)), None);
        assert_eq!(Encryption::None.to_spec(), block(None, None, Some(false)));
        assert_eq!(Encryption::Managed.to_spec(), block(None, None, Some(true)));
        assert_eq!(
            Encryption::Kms {
                key: "alias/k".into(),
                reuse_secs: 90
            }
            .to_spec(),
            block(Some("alias/k"), Some(90), None)
        );
    }

    #[test]
    fn a_live_queue_reports_its_reuse_and_only_a_true_managed_flag_counts() {
        assert_eq!(
            live_encryption(Some(&json!("k")), Some(&json!(600)), None),
            Some(Encryption::Kms {
                key: "k".into(),
                reuse_secs: 600
            })
        );
        assert_eq!(
            live_encryption(None, Some(&json!(600)), Some(&json!("true"))),
            Some(Encryption::None)
        );
        assert_eq!(
            live_encryption(Some(&json!(5)), None, Some(&json!(true))),
            Some(Encryption::Managed)
        );
    }

    #[test]
    fn policy_errors_and_documents_are_exact() {
        assert_eq!(
            parse_policy(&QueuePolicy::Text("[1]".into())),
            Err("is not a JSON object (a policy document has `Version` and `Statement`)".into())
        );
        assert_eq!(
            parse_policy(&QueuePolicy::Text("{\"Version\":\"x\"}".into())),
            Err("has no `Statement`".into())
        );
        let Value::Object(m) = json!({"Statement": {"Sid": "a"}, "Version": "2012-10-17"}) else {
            panic!("an object")
        };
        assert_eq!(
            parse_policy(&QueuePolicy::Document(m)),
            Ok(json!({"Statement": [{"Sid": "a"}], "Version": "2012-10-17"}))
        );
        assert_eq!(
            normalise_policy(json!({"Version": 1})),
            json!({"Version": 1})
        );
    }

    #[test]
    fn every_receive_action_and_principal_form_is_read() {
        let p = json!({"Statement": [
            {"Effect": "Allow", "Principal": {"AWS": "arn:star"}, "Action": "*"},
            {"Effect": "Allow", "Principal": {"AWS": "arn:lower"}, "Action": ["sqs:sendmessage", "sqs:receivemessage"]},
            {"Effect": "Allow", "Principal": {"AWS": ["*", 7]}, "Action": "sqs:ReceiveMessage"},
            {"Effect": "Allow", "Principal": ["arn:list"], "Action": "sqs:*"},
            {"Principal": {"AWS": "arn:no-effect"}, "Action": "sqs:*"},
            {"Effect": "Allow", "Principal": {"AWS": "arn:no-action"}},
            {"Effect": "Allow", "Principal": {"AWS": "arn:other"}, "Action": "sqs:ReceiveMessages"},
        ]});
        let r: Vec<String> = readers(&p).into_iter().collect();
        assert_eq!(r, ["*", "AWS:arn:lower", "AWS:arn:star"]);
        assert_eq!(
            readers(&json!({"Statement": {"Effect": "Allow"}})),
            BTreeSet::new()
        );
        let dlq = json!({"Statement": [
            {"Effect": "Allow", "Principal": {"AWS": ["arn:a", "arn:b"]}, "Action": "sqs:*"},
        ]});
        let src = json!({"Statement": [
            {"Effect": "Allow", "Principal": {"AWS": "arn:a"}, "Action": "sqs:*"},
        ]});
        assert_eq!(wider_readers(&dlq, Some(&src)), ["AWS:arn:b"]);
    }
}
