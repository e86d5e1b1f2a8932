//! Rules on the names of queues, topics and exchanges: valid for their backend, inside the
//! target's ownership prefixes, and never shared, within a channel or across channels.
//!
//! Depends on the model, `diag` and the resolved channels; the backend rule modules use
//! [`check_scope`] for names they check themselves (a RabbitMQ exchange).

use std::collections::BTreeMap;

use crate::diag::{Diagnostic, Loc};
use crate::spec::load::Doc;
use crate::spec::model::{Backend, Channel, KafkaNaming, Target};
use crate::spec::resolve::Resolved;

pub const SQS_MAX_NAME: usize = 80;
pub const RABBIT_MAX_NAME_BYTES: usize = 255;
pub const KAFKA_MAX_NAME: usize = 249;
/// Pub/Sub topic and subscription names: 3 to 255 characters.
pub const PUBSUB_MIN_NAME: usize = 3;
pub const PUBSUB_MAX_NAME: usize = 255;
/// Azure Service Bus queue and topic names: at most 260 characters; subscriptions: at most 50
/// (the ARM reference's `queueName`, `topicName` and `subscriptionName` parameters).
pub const AZURE_MAX_NAME: usize = 260;
pub const AZURE_MAX_SUBSCRIPTION_NAME: usize = 50;

/// `target/outside-ownership`: dlqctl may only manage names under the target's prefixes.
pub(super) fn check_scope(
    doc: &Doc<Channel>,
    name: &str,
    what: &str,
    target: &Target,
    pointer: &str,
    out: &mut Vec<Diagnostic>,
) {
    let Some(own) = &target.ownership else { return };
    if !own.prefixes.iter().any(|p| name.starts_with(p.as_str())) {
        out.push(
            Diagnostic::error(
                "target/outside-ownership",
                format!(
                    "{what} `{name}` is outside the target's ownership prefixes ({}); dlqctl would never be allowed to manage it",
                    own.prefixes.join(", ")
                ),
            )
            .at(doc.locs.value(pointer))
            .hint("rename it, or add a prefix to the target's `ownership.prefixes`"),
        );
    }
}

/// Which field a resolved name came from, for pointing at it.
fn name_pointer(doc: &Doc<Channel>, backend: Backend, role: &str) -> &'static str {
    // Kafka's spring and index profiles derive retry and DLT names from the main topic's.
    let naming = doc.value.spec.kafka.as_ref().and_then(|k| k.naming);
    let derived = backend == Backend::Kafka && naming != Some(KafkaNaming::Custom);
    let main = if doc.locs.has("/spec/name") {
        "/spec/name"
    } else {
        "/metadata/name"
    };
    // A Spring suffix that is set is what a derived name adds to the main topic's.
    let suffix =
        |field: &'static str| (backend == Backend::Kafka && doc.locs.has(field)).then_some(field);
    let field = match role {
        "main" => return main,
        "subscription" if backend == Backend::AzureServicebus => {
            "/spec/azure-servicebus/subscription"
        }
        "subscription" => "/spec/pubsub/subscription",
        "dead-letter subscription" => "/spec/deadLetter/subscription",
        "dead-letter" if doc.locs.has("/spec/deadLetter/name") => return "/spec/deadLetter/name",
        "dead-letter" => return suffix("/spec/kafka/dltSuffix").unwrap_or(main),
        "exception dead-letter" => return suffix("/spec/kafka/exceptionBasedDlts").unwrap_or(main),
        "invalid-message" if doc.locs.has("/spec/invalid/name") => return "/spec/invalid/name",
        // Kafka's default is the main topic's name + `-invalid-dlt`.
        "invalid-message" if backend == Backend::Kafka => return main,
        "invalid-message" => "/spec/invalid",
        _ if derived => return suffix("/spec/kafka/retryTopicSuffix").unwrap_or(main),
        _ => "/spec/retry/name",
    };
    if doc.locs.has(field) { field } else { main }
}

/// `name/collision` within a channel, `target/outside-ownership` and `name/invalid`.
pub(super) fn check_names(
    doc: &Doc<Channel>,
    r: &Resolved,
    target: &Target,
    out: &mut Vec<Diagnostic>,
) {
    let fifo = r.sqs.as_ref().is_some_and(|s| s.fifo);
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (name, role) in r.names().into_iter().chain(r.subscriptions()) {
        let pointer = name_pointer(doc, r.backend, role);
        let at = doc.locs.value(pointer);
        // Pub/Sub topics and subscriptions are two namespaces: a name may be both.
        if let Some((_, other)) = seen.iter().find(|(n, o)| {
            *n == name && o.ends_with("subscription") == role.ends_with("subscription")
        }) {
            let noun = r.backend.resource_noun();
            let (what, hint) = if role.ends_with("subscription") {
                (
                    format!("the {other} and the {role} are both named `{name}`"),
                    "give each its own name template",
                )
            } else if role == *other {
                (
                    format!("two {role} {noun}s are both named `{name}`"),
                    "each retry delay needs its own name: put `{delay}` (or `{index}`) in `spec.retry.name`",
                )
            } else {
                (
                    format!("the {role} and {other} {noun}s are both named `{name}`"),
                    "give each its own name template",
                )
            };
            out.push(Diagnostic::error("name/collision", what).at(at).hint(hint));
            continue;
        }
        seen.push((name, role));
        // Service Bus: the built-in dead-letter subqueue comes with its entity; it has no name
        // of its own to check or own.
        if r.backend == Backend::AzureServicebus && is_azure_subqueue(name) {
            continue;
        }
        let what = match r.backend {
            Backend::Pubsub if role.ends_with("subscription") => role.to_owned(),
            Backend::Pubsub => format!("{role} topic"),
            Backend::AzureServicebus if role.ends_with("subscription") => role.to_owned(),
            Backend::AzureServicebus if role == "main" && r.subscriptions().is_empty() => {
                "main queue".to_owned()
            }
            Backend::AzureServicebus if role == "main" => "main topic".to_owned(),
            _ => format!("{role} queue"),
        };
        check_scope(doc, name, &what, target, pointer, out);
        let problem = match r.backend {
            Backend::Sqs => sqs_name_problem(name, fifo),
            Backend::Rabbitmq => rabbit_name_problem(name),
            Backend::Kafka => kafka_name_problem(name),
            Backend::Pubsub => pubsub_name_problem(name),
            Backend::AzureServicebus => azure_name_problem(name, role.ends_with("subscription")),
        };
        // A name made with a Spring suffix (its pointer is `/spec/kafka/...`): a character no
        // topic may hold came from the suffix or the main topic's name, and is reported there
        // (`kafka/suffix`, or this rule on the main topic), once.
        let from_suffix = pointer.starts_with("/spec/kafka/");
        if from_suffix && kafka_alphabet_problem(name).is_some() {
            continue;
        }
        if let Some(p) = problem {
            let hint = match pointer.rsplit('/').next() {
                Some(field) if from_suffix => format!(
                    "shorten the main topic's name or `kafka.{field}`: Spring appends the suffix to it as it is"
                ),
                _ => "set the name template explicitly (`spec.name`, `spec.deadLetter.name`, `spec.retry.name`)".to_owned(),
            };
            out.push(
                Diagnostic::error("name/invalid", format!("{role} name `{name}`: {p}"))
                    .at(at)
                    .hint(hint),
            );
        }
    }
}

pub fn sqs_name_problem(name: &str, fifo: bool) -> Option<String> {
    let base = match (name.strip_suffix(".fifo"), fifo) {
        (Some(b), true) => b,
        (None, true) => return Some("a FIFO queue's name must end in `.fifo`".into()),
        (Some(_), false) => {
            return Some("only FIFO queues may end in `.fifo` (set `sqs.fifo: true`)".into());
        }
        (None, false) => name,
    };
    if name.chars().count() > SQS_MAX_NAME {
        return Some(format!(
            "SQS names are at most {SQS_MAX_NAME} characters, this is {}",
            name.chars().count()
        ));
    }
    if base.is_empty() {
        return Some("empty name".into());
    }
    if let Some(c) = base
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Some(format!(
            "SQS names allow only A-Z, a-z, 0-9, `-` and `_`, not `{}`",
            c.escape_default()
        ));
    }
    None
}

pub fn rabbit_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("empty name".into());
    }
    if name.len() > RABBIT_MAX_NAME_BYTES {
        return Some(format!(
            "RabbitMQ names are at most {RABBIT_MAX_NAME_BYTES} bytes, this is {}",
            name.len()
        ));
    }
    if name.starts_with("amq.") {
        return Some("names starting with `amq.` are reserved by RabbitMQ".into());
    }
    None
}

pub fn kafka_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("empty name".into());
    }
    if name == "." || name == ".." {
        return Some("`.` and `..` are not valid topic names".into());
    }
    if name.chars().count() > KAFKA_MAX_NAME {
        return Some(format!(
            "Kafka topic names are at most {KAFKA_MAX_NAME} characters, this is {}",
            name.chars().count()
        ));
    }
    kafka_alphabet_problem(name)
}

/// Google's rule for topic and subscription ids: 3–255 characters, starting with a letter,
/// of letters, digits and `-_.~+%`, not starting with `goog`.
pub fn pubsub_name_problem(name: &str) -> Option<String> {
    let n = name.chars().count();
    if !(PUBSUB_MIN_NAME..=PUBSUB_MAX_NAME).contains(&n) {
        return Some(format!(
            "Pub/Sub names are {PUBSUB_MIN_NAME} to {PUBSUB_MAX_NAME} characters, this is {n}"
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Some("Pub/Sub names start with a letter".into());
    }
    if name.to_ascii_lowercase().starts_with("goog") {
        return Some("Pub/Sub names may not start with `goog`".into());
    }
    let c = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '+' | '%')))?;
    Some(format!(
        "Pub/Sub names allow only letters, digits and `-_.~+%`, not `{}`",
        c.escape_default()
    ))
}

/// Whether a Service Bus dead-letter path is an entity's built-in subqueue.
pub fn is_azure_subqueue(name: &str) -> bool {
    name.ends_with(&format!(
        "/{}",
        crate::spec::resolve::AZURE_DEAD_LETTER_SUBQUEUE
    ))
}

/// Service Bus's rule for entity names (the ARM reference's path parameters): letters,
/// digits, `.`, `-` and `_`, starting and ending with a letter or digit; at most 260
/// characters (subscriptions: 50). Service Bus also allows `/` in queue and topic names, as
/// a hierarchy; dlqctl refuses it, since it would be read as a path of the ARM URL.
pub fn azure_name_problem(name: &str, subscription: bool) -> Option<String> {
    let n = name.chars().count();
    let max = if subscription {
        AZURE_MAX_SUBSCRIPTION_NAME
    } else {
        AZURE_MAX_NAME
    };
    if n == 0 || n > max {
        return Some(format!(
            "Service Bus {} names are 1 to {max} characters, this is {n}",
            if subscription {
                "subscription"
            } else {
                "queue and topic"
            }
        ));
    }
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge(name.chars().next()) || !edge(name.chars().last()) {
        return Some("Service Bus names start and end with a letter or digit".into());
    }
    let c = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))?;
    Some(format!(
        "Service Bus names allow only letters, digits and `-_.` here, not `{}`",
        c.escape_default()
    ))
}

/// The first character of `text` that a Kafka topic name may not hold, as a problem. Shared by
/// topic names and the Spring suffixes that are appended to them (`kafka/suffix`).
pub fn kafka_alphabet_problem(text: &str) -> Option<String> {
    let c = text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))?;
    Some(format!(
        "Kafka topic names allow only a-z, A-Z, 0-9, `.`, `_` and `-`, not `{}`",
        c.escape_default()
    ))
}

/// What the rules across channels need of one resolved channel: who it is, and each name it
/// uses with the place that writes it. Small and owned, so `lint` can drop each resolved
/// channel as soon as its own rules ran (at 5,000 channels the resolved values were a third
/// of lint's peak heap, BENCHMARKS.md §13).
pub(super) struct Crossing {
    target: String,
    channel: String,
    /// `/metadata/name`, where a duplicate channel is pointed at.
    at: Loc,
    /// The RabbitMQ vhost its names live in (empty on other backends: names are per target).
    scope: String,
    /// The exchanges it declares: name, place, whether it is the dead-letter exchange.
    exchanges: Vec<(String, Loc, bool)>,
    /// Its queue, topic and subscription names: name, what it is (for the message), the scope
    /// names are unique in (a RabbitMQ vhost, or Pub/Sub's subscriptions), place.
    names: Vec<(String, String, String, Loc)>,
    /// `deadLetter.of`: the channel whose dead-letter destination it shares, and where.
    of: Option<(String, Loc)>,
}

impl Crossing {
    pub(super) fn of(doc: &Doc<Channel>, r: &Resolved) -> Self {
        // RabbitMQ names are per vhost; others per target.
        let scope = r
            .rabbitmq
            .as_ref()
            .map(|x| x.vhost.clone())
            .unwrap_or_default();
        // A channel sharing another's destination (`deadLetter.of`) declares none of it.
        let shares = r.dead_letter_of.is_some();
        let exchanges = r
            .exchanges()
            .into_iter()
            .filter(|(_, _, dlx)| !(shares && *dlx))
            .map(|(name, pointer, dlx)| (name.to_owned(), doc.locs.value(pointer), dlx))
            .collect();
        // Pub/Sub subscriptions are a namespace of their own beside the topics.
        let scoped = r
            .names()
            .into_iter()
            .map(|(n, role)| (n, role, scope.clone()))
            .chain(
                r.subscriptions()
                    .into_iter()
                    .map(|(n, role)| (n, role, "subscriptions".to_owned())),
            );
        let names = scoped
            .filter(|(_, role, _)| !(shares && role.starts_with("dead-letter")))
            .map(|(name, role, scope)| {
                let what = if role.ends_with("subscription") {
                    role.to_owned()
                } else {
                    format!("{role} {}", r.backend.resource_noun())
                };
                let at = doc.locs.value(name_pointer(doc, r.backend, role));
                (name.to_owned(), what, scope, at)
            })
            .collect();
        Crossing {
            target: r.target.clone(),
            channel: r.channel.clone(),
            at: doc.locs.value("/metadata/name"),
            scope,
            exchanges,
            names,
            of: r
                .dead_letter_of
                .clone()
                .map(|o| (o, doc.locs.value("/spec/deadLetter/of"))),
        }
    }
}

/// `deadletter/shared-owner`: each `deadLetter.of` names a channel of the same target that
/// declares its own dead-letter destination (the owner), not itself nor another sharer.
fn check_owners(crossings: &[Crossing], out: &mut Vec<Diagnostic>) {
    let owns: BTreeMap<(&str, &str), bool> = crossings
        .iter()
        .map(|c| ((c.target.as_str(), c.channel.as_str()), c.of.is_none()))
        .collect();
    for c in crossings {
        let Some((of, at)) = &c.of else { continue };
        let why = match owns.get(&(c.target.as_str(), of.as_str())) {
            _ if *of == c.channel => "names this channel itself".to_owned(),
            None => format!(
                "names channel `{of}`, which no spec declares on target `{}`: nothing would create or keep the dead-letter destination",
                c.target
            ),
            Some(false) => format!(
                "names channel `{of}`, which shares another channel's destination itself (its own `deadLetter.of`)"
            ),
            Some(true) => continue,
        };
        out.push(
            Diagnostic::error(
                "deadletter/shared-owner",
                format!("`deadLetter.of` of channel `{}` {why}", c.channel),
            )
            .at(*at)
            .hint("name the channel that declares the dead-letter destination (its owner), on the same target"),
        );
    }
}

/// Rules across channels: unique channel names and resource names per target.
pub(super) fn check_across(crossings: &[Crossing], out: &mut Vec<Diagnostic>) {
    check_owners(crossings, out);
    let mut channels: BTreeMap<(&str, &str), Loc> = BTreeMap::new();
    let mut names: BTreeMap<(&str, &str, &str), (Loc, &str)> = BTreeMap::new();
    let mut exchanges: BTreeMap<(&str, &str, &str), (Loc, &str, bool)> = BTreeMap::new();
    for c in crossings {
        if let Some(first) = channels.get(&(c.target.as_str(), c.channel.as_str())) {
            out.push(
                Diagnostic::error(
                    "channel/duplicate",
                    format!(
                        "channel `{}` is defined twice for target `{}`",
                        c.channel, c.target
                    ),
                )
                .at(c.at)
                .related(*first, "first defined here"),
            );
            continue;
        }
        channels.insert((c.target.as_str(), c.channel.as_str()), c.at);
        // A dead-letter exchange is one channel's: its plan creates, replaces and (pruned)
        // deletes it with that channel. (Channels sharing an inbound `rabbitmq.exchange` are
        // left as they were.)
        let scope = c.scope.as_str();
        for (name, at, dlx) in &c.exchanges {
            let (at, dlx) = (*at, *dlx);
            match exchanges.get(&(c.target.as_str(), scope, name.as_str())) {
                Some((_, other, _)) if *other == c.channel => {}
                Some((first, other, other_dlx)) if dlx || *other_dlx => out.push(
                    Diagnostic::error(
                        "name/collision",
                        format!(
                            "exchange `{name}` of channel `{}` is also declared by channel `{other}` on target `{}`; a dead-letter exchange belongs to one channel",
                            c.channel, c.target
                        ),
                    )
                    .at(at)
                    .related(*first, format!("declared by `{other}` here"))
                    .hint(format!("give each channel its own dead-letter exchange, e.g. `{{channel}}.dlx`, or share it: declare it in channel `{other}` only and write `deadLetter: {{of: {other}}}` in this one")),
                ),
                Some(_) => {}
                None => {
                    exchanges.insert(
                        (c.target.as_str(), scope, name.as_str()),
                        (at, c.channel.as_str(), dlx),
                    );
                }
            }
        }
        for (name, what, scope, at) in &c.names {
            let at = *at;
            match names.get(&(c.target.as_str(), scope.as_str(), name.as_str())) {
                // Within one channel, `check_names` has reported it already.
                Some((_, other)) if *other == c.channel => {}
                Some((first, other)) => {
                    let d = Diagnostic::error(
                        "name/collision",
                        format!(
                            "{what} `{name}` of channel `{}` is also used by channel `{other}` on target `{}`",
                            c.channel, c.target
                        ),
                    )
                    .at(at)
                    .related(*first, format!("used by `{other}` here"));
                    // Two owners of one destination: say how to share it.
                    out.push(if what.starts_with("dead-letter") {
                        d.hint(format!(
                            "channels may share a dead-letter destination, owned once: declare it in channel `{other}` only, and write `deadLetter: {{of: {other}}}` in this one"
                        ))
                    } else {
                        d
                    });
                }
                None => {
                    names.insert(
                        (c.target.as_str(), scope.as_str(), name.as_str()),
                        (at, c.channel.as_str()),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Each backend's name rules at their edges: the longest name it takes passes, one
    //! character (or byte) more is refused, with the message that says why.

    use super::*;

    #[test]
    fn sqs_names_are_80_characters_of_a_z_digits_dash_and_underscore() {
        assert_eq!(sqs_name_problem(&"q".repeat(80), false), None);
        assert_eq!(
            sqs_name_problem(&"q".repeat(81), false).as_deref(),
            Some("SQS names are at most 80 characters, this is 81")
        );
        // The `.fifo` suffix counts.
        assert_eq!(
            sqs_name_problem(&format!("{}.fifo", "q".repeat(75)), true),
            None
        );
        assert_eq!(
            sqs_name_problem(&format!("{}.fifo", "q".repeat(76)), true).as_deref(),
            Some("SQS names are at most 80 characters, this is 81")
        );
        assert_eq!(sqs_name_problem("Orders-dlq_2", false), None);
        assert_eq!(
            sqs_name_problem("orders.dlq", false).as_deref(),
            Some("SQS names allow only A-Z, a-z, 0-9, `-` and `_`, not `.`")
        );
        assert_eq!(
            sqs_name_problem(".fifo", true).as_deref(),
            Some("empty name")
        );
        assert_eq!(sqs_name_problem("", false).as_deref(), Some("empty name"));
    }

    #[test]
    fn only_fifo_sqs_queues_end_in_dot_fifo() {
        assert_eq!(sqs_name_problem("orders.fifo", true), None);
        assert_eq!(
            sqs_name_problem("orders", true).as_deref(),
            Some("a FIFO queue's name must end in `.fifo`")
        );
        assert_eq!(
            sqs_name_problem("orders.fifo", false).as_deref(),
            Some("only FIFO queues may end in `.fifo` (set `sqs.fifo: true`)")
        );
    }

    #[test]
    fn rabbitmq_names_are_255_bytes_not_empty_and_not_amq() {
        assert_eq!(rabbit_name_problem(&"q".repeat(255)), None);
        // Bytes, not characters: 128 two-byte characters are 256 bytes.
        assert_eq!(
            rabbit_name_problem(&"é".repeat(128)).as_deref(),
            Some("RabbitMQ names are at most 255 bytes, this is 256")
        );
        assert_eq!(rabbit_name_problem("").as_deref(), Some("empty name"));
        assert_eq!(
            rabbit_name_problem("amq.orders").as_deref(),
            Some("names starting with `amq.` are reserved by RabbitMQ")
        );
        assert_eq!(rabbit_name_problem("app.amq.orders"), None);
    }

    #[test]
    fn kafka_names_are_249_characters_of_a_z_digits_dot_underscore_and_dash() {
        assert_eq!(kafka_name_problem(&"t".repeat(249)), None);
        assert_eq!(
            kafka_name_problem(&"t".repeat(250)).as_deref(),
            Some("Kafka topic names are at most 249 characters, this is 250")
        );
        assert_eq!(kafka_name_problem("").as_deref(), Some("empty name"));
        for dots in [".", ".."] {
            assert_eq!(
                kafka_name_problem(dots).as_deref(),
                Some("`.` and `..` are not valid topic names"),
                "{dots}"
            );
        }
        assert_eq!(kafka_name_problem("..."), None);
        assert_eq!(kafka_name_problem("App.orders_2-dlt"), None);
        assert_eq!(
            kafka_name_problem("app/orders").as_deref(),
            Some("Kafka topic names allow only a-z, A-Z, 0-9, `.`, `_` and `-`, not `/`")
        );
    }

    #[test]
    fn pubsub_names_are_3_to_255_characters_from_a_letter_and_not_goog() {
        assert_eq!(pubsub_name_problem("abc"), None);
        assert_eq!(pubsub_name_problem(&"a".repeat(255)), None);
        assert_eq!(
            pubsub_name_problem("ab").as_deref(),
            Some("Pub/Sub names are 3 to 255 characters, this is 2")
        );
        assert_eq!(
            pubsub_name_problem(&"a".repeat(256)).as_deref(),
            Some("Pub/Sub names are 3 to 255 characters, this is 256")
        );
        assert_eq!(
            pubsub_name_problem("1abc").as_deref(),
            Some("Pub/Sub names start with a letter")
        );
        assert_eq!(
            pubsub_name_problem("GoogOrders").as_deref(),
            Some("Pub/Sub names may not start with `goog`")
        );
        assert_eq!(pubsub_name_problem("a-_.~+%9"), None);
        assert_eq!(
            pubsub_name_problem("orders/dlq").as_deref(),
            Some("Pub/Sub names allow only letters, digits and `-_.~+%`, not `/`")
        );
    }

    /// Where the `name/invalid` finding about the `role` name of channel `name` on `backend`
    /// points, and where `pointer` is in that channel's document.
    fn name_invalid_at(
        backend: &str,
        name: &str,
        spec: &str,
        role: &str,
        pointer: &str,
    ) -> (Loc, Loc) {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  sqs: {{backend: sqs, region: eu-west-1}}\n  rabbit: {{backend: rabbitmq, url: \"http://127.0.0.1:15672\", ownership: {{prefixes: [app., amq.]}}}}\n  kafka: {{backend: kafka, bootstrapServers: \"127.0.0.1:9092\", ownership: {{prefixes: [app.]}}}}\n  pubsub: {{backend: pubsub, project: my-project}}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {name}}}\nspec:\n  target: {backend}\n{spec}"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let found = super::super::check(&ws).0;
        let d = found
            .iter()
            .find(|d| d.rule == "name/invalid" && d.message.starts_with(role))
            .unwrap_or_else(|| panic!("no name/invalid about the {role} name: {found:?}"));
        (d.loc.expect("located"), ws.channels[0].locs.value(pointer))
    }

    #[test]
    fn a_bad_name_is_reported_at_the_field_that_made_it() {
        // The main queue's own template, even beside a retry template.
        let (at, field) = name_invalid_at(
            "rabbit",
            "app.quotes",
            "  name: \"amq.{channel}\"\n  retry: {maxAttempts: 3, backoff: {initial: 1s}, name: \"{channel}.retry.{index}\"}\n",
            "main",
            "/spec/name",
        );
        assert_eq!(at, field);
        // Pub/Sub subscriptions: their own templates.
        for (spec, role, pointer) in [
            (
                "  pubsub: {subscription: \"goog-{channel}\"}\n",
                "subscription",
                "/spec/pubsub/subscription",
            ),
            (
                "  deadLetter: {subscription: \"goog-{channel}\"}\n",
                "dead-letter subscription",
                "/spec/deadLetter/subscription",
            ),
        ] {
            let (at, field) = name_invalid_at(
                "pubsub",
                "app.quotes",
                &format!("  retry: {{maxAttempts: 5}}\n{spec}"),
                role,
                pointer,
            );
            assert_eq!(at, field, "{role}");
        }
        // SQS's default invalid-message name (`{channel}-invalid`): 81 characters, at `invalid`.
        let (at, field) = name_invalid_at(
            "sqs",
            &"q".repeat(73),
            "  retry: {maxAttempts: 3}\n  invalid: {retention: 14d}\n",
            "invalid-message",
            "/spec/invalid",
        );
        assert_eq!(at, field);
        // Kafka's is the main topic's name + `-invalid-dlt` (250 characters here): the main
        // topic's template is at fault.
        let (at, field) = name_invalid_at(
            "kafka",
            "app.quotes",
            &format!(
                "  name: \"{{channel}}{}\"\n  retry: {{maxAttempts: 3}}\n  deadLetter: {{discard: {{after: 7d, reason: r}}}}\n  invalid: {{discard: {{after: 7d, reason: r}}}}\n",
                "q".repeat(228)
            ),
            "invalid-message",
            "/spec/name",
        );
        assert_eq!(at, field);
    }

    /// The findings of `rule` for a document of targets and channels, as (message, line).
    fn findings(text: &str, rule: &str) -> Vec<(String, usize)> {
        let ws = crate::spec::load::load_str("c.yaml", text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let found = super::super::check(&ws).0;
        found
            .into_iter()
            .filter(|d| d.rule == rule)
            .map(|d| (d.message, d.loc.expect("located").span.line))
            .collect()
    }

    #[test]
    fn an_owned_name_outside_the_prefixes_is_named_by_what_it_is() {
        // A Pub/Sub topic is a topic, a subscription is a subscription, an SQS queue a queue.
        let text = "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  gcp: {backend: pubsub, project: my-project, ownership: {prefixes: [app-]}}\n  aws: {backend: sqs, region: eu-west-1, ownership: {prefixes: [app-]}}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: orders}\nspec:\n  target: gcp\n  retry: {maxAttempts: 5}\n  pubsub: {subscription: \"app-{channel}\"}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: app-quotes}\nspec:\n  target: gcp\n  retry: {maxAttempts: 5}\n  pubsub: {subscription: \"{channel}-sub\"}\n  deadLetter: {subscription: \"x-{channel}\"}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: bills}\nspec:\n  target: aws\n  retry: {maxAttempts: 3}\n  deadLetter: {name: \"app-{channel}-dlq\"}\n";
        let messages: Vec<String> = findings(text, "target/outside-ownership")
            .into_iter()
            .map(|(m, _)| m.split(" is outside").next().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(
            messages,
            [
                "main topic `orders`",
                "dead-letter topic `orders-dlq`",
                "dead-letter subscription `orders-dlq-sub`",
                "dead-letter subscription `x-app-quotes`",
                "main queue `bills`",
            ],
            "{messages:?}"
        );
    }

    const RABBIT_TARGET: &str = "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  rabbit: {backend: rabbitmq, url: \"http://127.0.0.1:15672\", ownership: {prefixes: [app.]}}\n";

    fn rabbit_channel(name: &str, rabbitmq: &str) -> String {
        format!(
            "---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {name}}}\nspec:\n  target: rabbit\n  retry: {{maxAttempts: 2}}\n  rabbitmq:\n{rabbitmq}"
        )
    }

    #[test]
    fn a_dead_letter_exchange_is_one_channels_but_an_inbound_exchange_may_be_shared() {
        // Two channels publishing through one inbound exchange: left as they are.
        let shared = "    exchange: {name: app.events}\n";
        let text = format!(
            "{RABBIT_TARGET}{}{}",
            rabbit_channel("app.a", shared),
            rabbit_channel("app.b", shared)
        );
        assert_eq!(findings(&text, "name/collision"), []);
        // One channel's dead-letter exchange is another's inbound exchange, either way round:
        // refused at the second declaration (line 22 in both documents).
        let dlx = "    deadLetterExchange: {name: app.events}\n";
        for (first, second) in [(shared, dlx), (dlx, shared)] {
            let text = format!(
                "{RABBIT_TARGET}{}{}",
                rabbit_channel("app.a", first),
                rabbit_channel("app.b", second)
            );
            let found = findings(&text, "name/collision");
            assert_eq!(
                found,
                [(
                    "exchange `app.events` of channel `app.b` is also declared by channel `app.a` on target `rabbit`; a dead-letter exchange belongs to one channel".to_owned(),
                    22
                )],
                "{first} then {second}"
            );
        }
        // Two dead-letter exchanges of one name: refused too.
        let text = format!(
            "{RABBIT_TARGET}{}{}",
            rabbit_channel("app.a", dlx),
            rabbit_channel("app.b", dlx)
        );
        assert_eq!(findings(&text, "name/collision").len(), 1);
        // One channel naming both exchanges alike is told once, by its own rule, not as a
        // clash with itself.
        let text = format!(
            "{RABBIT_TARGET}{}",
            rabbit_channel("app.a", &format!("{shared}{dlx}"))
        );
        let found = findings(&text, "name/collision");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .0
                .starts_with("the dead-letter exchange and the channel's exchange"),
            "{found:?}"
        );
        // In other vhosts they are different exchanges.
        let text = format!(
            "{RABBIT_TARGET}{}{}",
            rabbit_channel("app.a", &format!("    vhost: one\n{dlx}")),
            rabbit_channel("app.b", &format!("    vhost: two\n{dlx}"))
        );
        assert_eq!(findings(&text, "name/collision"), []);
    }
}
