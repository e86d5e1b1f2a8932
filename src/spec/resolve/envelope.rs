//! A channel's envelope and class rules, resolved: the profiles written out as the mappings
//! they are (docs/envelope.md), a declared mapping laid over its `from` profile, the message
//! properties each backend has (what a `property:` may name, and the format of its value),
//! and the class rules compiled to globs. Pure: reading a message with it is
//! `status::envelope`'s; checking what the spec wrote is `spec::rules::envelope`'s.

use globset::{GlobBuilder, GlobMatcher};

use crate::spec::model::{
    Backend, ClassRule, Envelope, EnvelopeMapping, Field, Format, Patterns, Profile,
};

/// dlqctl's own header names (docs/envelope.md, version 1).
pub const ERROR_CLASS: &str = "dlq-error-class";
pub const ERROR_MESSAGE: &str = "dlq-error-message";
pub const SOURCE: &str = "dlq-source";
pub const ATTEMPTS: &str = "dlq-attempts";
pub const DEAD_LETTERED_AT: &str = "dlq-dead-lettered-at";

/// The class of a message no rule (or header) names.
pub const UNKNOWN: &str = "unknown";
/// The exporter's label for every class that is not a declared (or built-in) name.
pub const OTHER: &str = "other";
/// The class of a message that used up its retries (what a redrive policy moves).
pub const TRANSIENT_EXHAUSTED: &str = "transient_exhausted";
/// The class of a message that can never be processed.
pub const POISON: &str = "poison";
/// Classes with a meaning of their own, labels of the exporter when a channel declares no
/// rules: the envelope's two (docs/envelope.md) and RabbitMQ's dead-letter reasons.
pub const BUILT_IN_CLASSES: [&str; 6] = [
    POISON,
    TRANSIENT_EXHAUSTED,
    "rejected",
    "expired",
    "maxlen",
    "delivery_limit",
];

/// Where a value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Header(String),
    Property(String),
    /// A JSON pointer into the body.
    Pointer(String),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Header(h) => write!(f, "header `{h}`"),
            Location::Property(p) => write!(f, "property `{p}`"),
            Location::Pointer(p) => write!(f, "body pointer `{p}`"),
        }
    }
}

/// A value's place and how it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub at: Location,
    pub format: Format,
}

impl Source {
    fn header(name: &str, format: Format) -> Self {
        Source {
            at: Location::Header(name.to_owned()),
            format,
        }
    }
}

/// One set of places: a profile's, or the declared mapping over its `from`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// The profile it is (`declared` for a mapping), for docs and tests.
    pub name: &'static str,
    /// The error class, in order of preference (Spring: the cause, then the wrapper).
    pub class: Vec<Source>,
    pub message: Option<Source>,
    pub source: Option<Source>,
    pub attempts: Option<Source>,
    pub dead_lettered_at: Option<Source>,
    pub first_failure_at: Option<Source>,
}

fn set(name: &'static str, class: &[&str], message: &str, source: &str) -> FieldSet {
    FieldSet {
        name,
        class: class
            .iter()
            .map(|h| Source::header(h, Format::Text))
            .collect(),
        message: Some(Source::header(message, Format::Text)),
        source: Some(Source::header(source, Format::Text)),
        // Every profile but `none` reads dlqctl's attempts and time too (version 1).
        attempts: Some(Source::header(ATTEMPTS, Format::Integer)),
        dead_lettered_at: Some(Source::header(DEAD_LETTERED_AT, Format::Auto)),
        first_failure_at: None,
    }
}

/// The sets of one profile, as the code writes them.
pub fn profile_sets(p: Profile) -> Vec<FieldSet> {
    match p {
        Profile::Dlqctl => vec![set("dlqctl", &[ERROR_CLASS], ERROR_MESSAGE, SOURCE)],
        // Spring Kafka's DeadLetterPublishingRecoverer: the cause first (the outer class is
        // usually a wrapper such as ListenerExecutionFailedException). Spring Kafka 3 (3.3
        // with Spring Boot 3.5, measured in tests/spring_kafka.rs) writes the second set's
        // names; `KafkaHeaders.DLT_*` are older, still written by older applications.
        Profile::Spring => vec![
            set(
                "spring",
                &["kafka_dlt-exception-cause-fqcn", "kafka_dlt-exception-fqcn"],
                "kafka_dlt-exception-message",
                "kafka_dlt-original-topic",
            ),
            set(
                "spring",
                &["kafka_exception-cause-fqcn", "kafka_exception-fqcn"],
                "kafka_exception-message",
                "kafka_original-topic",
            ),
        ],
        // Kafka Connect with `errors.deadletterqueue.context.headers.enable=true`.
        Profile::Connect => vec![set(
            "connect",
            &["__connect.errors.exception.class.name"],
            "__connect.errors.exception.message",
            "__connect.errors.topic",
        )],
        Profile::None => Vec::new(),
    }
}

/// Azure Service Bus's own: the reason and description the broker (or the application that
/// dead-lettered the message) adds to its properties, tried after every profile.
fn azure_set() -> FieldSet {
    FieldSet {
        name: "azure-servicebus",
        class: vec![Source::header("DeadLetterReason", Format::Text)],
        message: Some(Source::header("DeadLetterErrorDescription", Format::Text)),
        source: None,
        attempts: None,
        dead_lettered_at: None,
        first_failure_at: None,
    }
}

/// The profiles tried after the declared one when it finds no class (none after `none`).
fn fellows(p: Profile) -> &'static [Profile] {
    match p {
        Profile::Dlqctl => &[Profile::Spring, Profile::Connect],
        Profile::Spring => &[Profile::Dlqctl, Profile::Connect],
        Profile::Connect => &[Profile::Dlqctl, Profile::Spring],
        Profile::None => &[],
    }
}

/// The kind of value a property holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Integer,
    /// A time, in this format.
    Time(Format),
}

/// The message properties a backend has (what its readers put in `Message::properties`),
/// by the name a spec writes, with the kind of value.
pub fn properties(backend: Backend) -> &'static [(&'static str, Kind)] {
    use Kind::{Integer, Text, Time};
    match backend {
        // AMQP 0-9-1 basic properties, and where the message was published to.
        Backend::Rabbitmq => &[
            ("timestamp", Time(Format::EpochSeconds)),
            ("type", Text),
            ("app_id", Text),
            ("message_id", Text),
            ("correlation_id", Text),
            ("user_id", Text),
            ("content_type", Text),
            ("content_encoding", Text),
            ("reply_to", Text),
            ("priority", Integer),
            ("routing_key", Text),
            ("exchange", Text),
        ],
        // SQS message system attributes (ReceiveMessage `MessageSystemAttributeNames`).
        Backend::Sqs => &[
            ("SentTimestamp", Time(Format::EpochMillis)),
            (
                "ApproximateFirstReceiveTimestamp",
                Time(Format::EpochMillis),
            ),
            ("ApproximateReceiveCount", Integer),
            ("SenderId", Text),
            ("DeadLetterQueueSourceArn", Text),
            ("MessageGroupId", Text),
            ("MessageDeduplicationId", Text),
            ("SequenceNumber", Text),
            ("AWSTraceHeader", Text),
        ],
        // A record's own fields.
        Backend::Kafka => &[
            ("timestamp", Time(Format::EpochMillis)),
            ("key", Text),
            ("topic", Text),
            ("partition", Integer),
            ("offset", Integer),
        ],
        // PubsubMessage's fields, and the ReceivedMessage's delivery attempt.
        Backend::Pubsub => &[
            ("publishTime", Time(Format::Rfc3339)),
            ("messageId", Text),
            ("orderingKey", Text),
            ("deliveryAttempt", Integer),
        ],
        // The BrokerProperties header of the data plane's receive
        // (https://learn.microsoft.com/en-us/rest/api/servicebus/message-headers-and-properties).
        Backend::AzureServicebus => &[
            // RFC 1123 (`Wed, 02 Dec 2026 10:00:00 GMT`), which no envelope format reads.
            ("EnqueuedTimeUtc", Text),
            ("MessageId", Text),
            ("SequenceNumber", Integer),
            ("DeliveryCount", Integer),
            ("DeadLetterSource", Text),
        ],
    }
}

/// The role of a field, for its default format and for lint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    ErrorClass,
    ErrorMessage,
    Attempts,
    Source,
    DeadLetteredAt,
    FirstFailureAt,
}

impl Role {
    pub const ALL: [Role; 6] = [
        Role::ErrorClass,
        Role::ErrorMessage,
        Role::Attempts,
        Role::Source,
        Role::DeadLetteredAt,
        Role::FirstFailureAt,
    ];

    /// The spec's key.
    pub fn key(self) -> &'static str {
        match self {
            Role::ErrorClass => "errorClass",
            Role::ErrorMessage => "errorMessage",
            Role::Attempts => "attempts",
            Role::Source => "source",
            Role::DeadLetteredAt => "deadLetteredAt",
            Role::FirstFailureAt => "firstFailureAt",
        }
    }

    pub fn of(self, m: &EnvelopeMapping) -> Option<&Field> {
        match self {
            Role::ErrorClass => m.error_class.as_ref(),
            Role::ErrorMessage => m.error_message.as_ref(),
            Role::Attempts => m.attempts.as_ref(),
            Role::Source => m.source.as_ref(),
            Role::DeadLetteredAt => m.dead_lettered_at.as_ref(),
            Role::FirstFailureAt => m.first_failure_at.as_ref(),
        }
    }

    pub fn is_time(self) -> bool {
        matches!(self, Role::DeadLetteredAt | Role::FirstFailureAt)
    }
}

/// Where a declared field reads from: `None` when it names none or more than one (lint says).
pub fn location(f: &Field) -> Option<Location> {
    match (&f.header, &f.property, &f.pointer) {
        (Some(h), None, None) => Some(Location::Header(h.clone())),
        (None, Some(p), None) => Some(Location::Property(p.clone())),
        (None, None, Some(p)) => Some(Location::Pointer(p.clone())),
        _ => None,
    }
}

/// The format a declared field is read with: its own, else its property's, else the role's.
pub fn format(backend: Backend, role: Role, f: &Field) -> Format {
    if let Some(fmt) = f.format {
        return fmt;
    }
    let kind = f.property.as_deref().and_then(|p| {
        properties(backend)
            .iter()
            .find(|(n, _)| *n == p)
            .map(|(_, k)| *k)
    });
    match (role, kind) {
        (Role::Attempts, _) => Format::Integer,
        (r, Some(Kind::Time(fmt))) if r.is_time() => fmt,
        (r, _) if r.is_time() => Format::Auto,
        _ => Format::Text,
    }
}

/// A channel's envelope, ready to read messages with.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeResolved {
    /// The profile declared (or a mapping's `from`).
    pub profile: Profile,
    /// Whether the spec declared a mapping.
    pub declared: bool,
    /// The declared set first, then the sets tried when it finds no class.
    pub sets: Vec<FieldSet>,
    pub classes: Classes,
}

impl Default for EnvelopeResolved {
    fn default() -> Self {
        EnvelopeResolved::profile(Profile::Dlqctl)
    }
}

impl EnvelopeResolved {
    /// A profile as it is, without class rules. Profiles read headers only, so the backend
    /// given to [`resolve`] (whose properties a mapping may name) makes no difference.
    pub fn profile(p: Profile) -> Self {
        resolve(Backend::Rabbitmq, &Envelope::Profile(p), &[])
    }

    /// Whether the envelope names a time a message was dead-lettered or first failed.
    pub fn has_time(&self) -> bool {
        self.sets
            .first()
            .is_some_and(|s| s.dead_lettered_at.is_some() || s.first_failure_at.is_some())
    }
}

/// Why a channel's dead letters may carry no time to count their age from, with the fixes:
/// `None` when the broker always stamps one (a Kafka record's timestamp, SQS's SentTimestamp,
/// Pub/Sub's publishTime) or the envelope names one. RabbitMQ stamps none of its own: a
/// message has a time only when its publisher set `timestamp`, or when the broker itself
/// dead-lettered it (`x-death`), which a consumer that publishes to the DLQ never has.
pub fn age_blind(backend: Backend, envelope: &EnvelopeResolved) -> Option<String> {
    if backend != Backend::Rabbitmq || envelope.has_time() {
        return None;
    }
    Some(
        "the envelope names no time (no `deadLetteredAt` or `firstFailureAt`): a dead letter the consumer publishes has an age only if its publisher set the `timestamp` property; without one, status shows the age as unknown and the exporter a first-seen lower bound (`dlq_oldest_message_age_known` 0). Fix one of: send `timestamp`, declare a time header in `deadLetter.envelope`, or stamp it in the broker (RabbitMQ 3.12+: `message_interceptors.incoming.set_header_timestamp.overwrite = false` in rabbitmq.conf sets `timestamp` and a `timestamp_in_ms` header on every message that has none)".to_owned(),
    )
}

/// Resolves `envelope` and `classes` for a channel on `backend`.
pub fn resolve(backend: Backend, envelope: &Envelope, classes: &[ClassRule]) -> EnvelopeResolved {
    let profile = envelope.profile();
    let mut sets = profile_sets(profile);
    if let Envelope::Mapping(m) = envelope {
        let mut first = if sets.is_empty() {
            FieldSet::default()
        } else {
            sets.remove(0)
        };
        first.name = "declared";
        for role in Role::ALL {
            let Some(f) = role.of(m) else { continue };
            let Some(at) = location(f) else { continue };
            let s = Source {
                at,
                format: format(backend, role, f),
            };
            match role {
                Role::ErrorClass => first.class = vec![s],
                Role::ErrorMessage => first.message = Some(s),
                Role::Attempts => first.attempts = Some(s),
                Role::Source => first.source = Some(s),
                Role::DeadLetteredAt => first.dead_lettered_at = Some(s),
                Role::FirstFailureAt => first.first_failure_at = Some(s),
            }
        }
        sets.insert(0, first);
    }
    for p in fellows(profile) {
        sets.extend(profile_sets(*p));
    }
    if backend == Backend::AzureServicebus && profile != Profile::None {
        sets.push(azure_set());
    }
    EnvelopeResolved {
        profile,
        declared: matches!(envelope, Envelope::Mapping(_)),
        sets,
        classes: Classes::compile(classes),
    }
}

/// One glob, compiled.
pub fn glob(pattern: &str) -> Result<GlobMatcher, globset::Error> {
    Ok(GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()?
        .compile_matcher())
}

#[derive(Debug, Clone)]
struct Rule {
    name: String,
    class: Option<Vec<GlobMatcher>>,
    message: Option<Vec<GlobMatcher>>,
}

/// `deadLetter.classes`, compiled. A pattern that does not compile matches nothing (lint
/// reports it as an error, so plan and apply never get here with one).
#[derive(Debug, Clone, Default)]
pub struct Classes {
    rules: Vec<Rule>,
    /// What the spec wrote, for equality.
    written: Vec<ClassRule>,
}

impl PartialEq for Classes {
    fn eq(&self, other: &Self) -> bool {
        self.written == other.written
    }
}

fn compiled(p: &Option<Patterns>) -> Option<Vec<GlobMatcher>> {
    p.as_ref()
        .map(|p| p.as_slice().iter().filter_map(|g| glob(g).ok()).collect())
}

impl Classes {
    pub fn compile(rules: &[ClassRule]) -> Self {
        Classes {
            rules: rules
                .iter()
                .map(|r| Rule {
                    name: r.name.clone(),
                    class: compiled(&r.error_class),
                    message: compiled(&r.error_message),
                })
                .collect(),
            written: rules.to_vec(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The declared class names, in rule order, each once.
    pub fn names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for r in &self.rules {
            if !out.contains(&r.name.as_str()) {
                out.push(&r.name);
            }
        }
        out
    }

    /// The class of an error (`class`: what the envelope read, `message`: the error message):
    /// the first rule that matches, `None` when none does. A rule with no pattern matches
    /// nothing; a field a rule constrains must be present to match.
    pub fn classify(&self, class: Option<&str>, message: Option<&str>) -> Option<&str> {
        let any = |globs: &Option<Vec<GlobMatcher>>, v: Option<&str>| match globs {
            None => true,
            Some(g) => v.is_some_and(|v| g.iter().any(|m| m.is_match(v))),
        };
        self.rules
            .iter()
            .find(|r| {
                (r.class.is_some() || r.message.is_some())
                    && any(&r.class, class)
                    && any(&r.message, message)
            })
            .map(|r| r.name.as_str())
    }

    /// A class as a metric label: a declared name (or, without rules, a built-in one), else
    /// `other`, so what a message says never becomes a label and the series stay bounded.
    /// Whether the spec declared class rules (`deadLetter.envelope.classes`).
    pub fn declared(&self) -> bool {
        !self.rules.is_empty()
    }

    pub fn label<'a>(&self, class: &'a str) -> &'a str {
        let known = if self.rules.is_empty() {
            BUILT_IN_CLASSES.contains(&class)
        } else {
            self.rules.iter().any(|r| r.name == class)
        };
        if known { class } else { OTHER }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str, class: Option<&[&str]>, message: Option<&[&str]>) -> ClassRule {
        let p = |v: &[&str]| Patterns::Many(v.iter().map(|s| (*s).to_owned()).collect());
        ClassRule {
            name: name.into(),
            error_class: class.map(p),
            error_message: message.map(p),
        }
    }

    #[test]
    fn the_first_matching_rule_names_the_class() {
        let c = Classes::compile(&[
            rule(
                "poison",
                Some(&["*.DeserializationException", "SyntaxError"]),
                None,
            ),
            rule(
                "transient_exhausted",
                Some(&["*.ServiceUnavailableException"]),
                None,
            ),
            rule(
                "transient_exhausted",
                None,
                Some(&["*downstream unavailable*"]),
            ),
            rule("timeout", Some(&["*Timeout*"]), Some(&["*after ?s"])),
        ]);
        assert_eq!(
            c.classify(
                Some("org.springframework.kafka.support.serializer.DeserializationException"),
                None
            ),
            Some("poison")
        );
        assert_eq!(
            c.classify(None, Some("the downstream unavailable since 10:00")),
            Some("transient_exhausted")
        );
        assert_eq!(
            c.classify(Some("x.TimeoutException"), Some("gave up after 5s")),
            Some("timeout")
        );
        // Both fields of a rule must match; a field it constrains must be there.
        assert_eq!(c.classify(Some("x.TimeoutException"), None), None);
        assert_eq!(
            c.classify(Some("java.lang.NullPointerException"), None),
            None
        );
        assert_eq!(c.names(), ["poison", "transient_exhausted", "timeout"]);
        assert_eq!(c.label("timeout"), "timeout");
        assert_eq!(c.label("com.acme.Raw"), OTHER);
        assert_eq!(c.label(UNKNOWN), OTHER);
        let none = Classes::compile(&[]);
        assert_eq!(none.label("poison"), "poison");
        assert_eq!(none.label("com.acme.Raw"), OTHER);
    }

    #[test]
    fn a_mapping_overrides_its_profile_field_by_field() {
        let m = EnvelopeMapping {
            from: Some(Profile::None),
            error_message: Some(Field {
                header: Some("x-failure-reason".into()),
                ..Field::default()
            }),
            attempts: Some(Field {
                header: Some("x-retry-count".into()),
                ..Field::default()
            }),
            dead_lettered_at: Some(Field {
                property: Some("timestamp".into()),
                ..Field::default()
            }),
            ..EnvelopeMapping::default()
        };
        let r = resolve(
            Backend::Rabbitmq,
            &Envelope::Mapping(Box::new(m.clone())),
            &[],
        );
        assert_eq!(r.sets.len(), 1, "from none: nothing else is tried");
        let s = &r.sets[0];
        assert!(s.class.is_empty());
        assert_eq!(
            s.attempts,
            Some(Source::header("x-retry-count", Format::Integer))
        );
        assert_eq!(
            s.dead_lettered_at.as_ref().map(|s| s.format),
            Some(Format::EpochSeconds),
            "RabbitMQ's timestamp is in seconds"
        );
        assert!(r.has_time());
        let over_dlqctl = resolve(
            Backend::Rabbitmq,
            &Envelope::Mapping(Box::new(EnvelopeMapping { from: None, ..m })),
            &[],
        );
        assert_eq!(
            over_dlqctl.sets[0].class,
            profile_sets(Profile::Dlqctl)[0].class
        );
        assert_eq!(
            over_dlqctl.sets.len(),
            4,
            "dlqctl, then spring's two and connect"
        );
        assert!(!EnvelopeResolved::profile(Profile::None).has_time());
        assert!(EnvelopeResolved::profile(Profile::Spring).has_time());
    }
}
