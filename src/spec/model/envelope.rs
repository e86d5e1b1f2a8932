//! `deadLetter.envelope` and `deadLetter.classes`: where a dead letter says why it died, as
//! the spec declares it (a named profile, or a mapping field by field), and the rules that
//! turn what it says (an exception's class, an error message) into the channel's own classes.
//!
//! Only the shapes live here; what each profile reads, which message properties each backend
//! has, and the compiled rules are in `spec::resolve::envelope`; reading a message is
//! `status::envelope`'s (docs/envelope.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which headers (or properties, or body fields) carry a dead letter's error: a profile's
/// name, or a mapping field by field (docs/envelope.md). Whatever the choice, the broker's
/// own record (RabbitMQ `x-death`, SQS's source queue) is the fallback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Envelope {
    Profile(Profile),
    Mapping(Box<EnvelopeMapping>),
}

impl Default for Envelope {
    fn default() -> Self {
        Envelope::Profile(Profile::Dlqctl)
    }
}

impl Envelope {
    /// The profile it is, or starts from (a mapping without `from`: dlqctl's).
    pub fn profile(&self) -> Profile {
        match self {
            Envelope::Profile(p) => *p,
            Envelope::Mapping(m) => m.from.unwrap_or_default(),
        }
    }
}

/// A named set of headers, as known producers write them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// dlqctl's own: `dlq-error-class`, `dlq-error-message`, `dlq-source`, `dlq-attempts`,
    /// `dlq-dead-lettered-at` (SQS: message attributes of those names).
    #[default]
    Dlqctl,
    /// Spring Kafka's `kafka_dlt-exception-cause-fqcn`, then `kafka_dlt-exception-fqcn`
    /// (and Spring Kafka 3's `kafka_exception-*`).
    Spring,
    /// Kafka Connect's `__connect.errors.exception.class.name`.
    Connect,
    /// The producers set no error headers: only the broker's own are read.
    None,
}

impl Profile {
    pub const ALL: [Profile; 4] = [
        Profile::Dlqctl,
        Profile::Spring,
        Profile::Connect,
        Profile::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Dlqctl => "dlqctl",
            Profile::Spring => "spring",
            Profile::Connect => "connect",
            Profile::None => "none",
        }
    }
}

/// Where each part of the error is read from. A field not given here is read as the profile
/// of `from` reads it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EnvelopeMapping {
    /// The profile the fields not given here come from, and whose fellow profiles are tried
    /// when no class is found. Default `dlqctl`; `none` reads only what is declared here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Profile>,
    /// What kind of failure: an exception's class, an error code. The input of
    /// `deadLetter.classes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<Field>,
    /// The error, for a person (and for `deadLetter.classes` rules on `errorMessage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<Field>,
    /// Deliveries made before giving up, the first included: an integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Field>,
    /// The queue or topic the message came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Field>,
    /// When it was dead-lettered: what `status` and the age alarms count the age from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_lettered_at: Option<Field>,
    /// When it first failed: the age counts from it when no dead-letter time is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failure_at: Option<Field>,
}

/// One place a value is read from: exactly one of `header`, `property` or `pointer`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Field {
    /// A header (SQS and Pub/Sub: a message attribute) of this name, matched without regard
    /// to case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub header: Option<String>,
    /// A property of the message the broker keeps beside the headers: RabbitMQ `timestamp`,
    /// `type`, `app_id`, ...; SQS system attributes (`SentTimestamp`, ...); Kafka
    /// `timestamp`, `key`; Pub/Sub `publishTime`, ... (docs/envelope.md lists them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub property: Option<String>,
    /// A JSON pointer (RFC 6901) into the body, when the body is JSON: `/error/class`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub pointer: Option<String>,
    /// How the value is read. Default: `integer` for `attempts`; for the two times, the
    /// property's own format, else `auto` (RFC 3339, or milliseconds since the epoch);
    /// `text` for the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
}

/// How a field's value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    Text,
    Integer,
    /// RFC 3339, or a number of milliseconds since the epoch.
    Auto,
    Rfc3339,
    EpochSeconds,
    EpochMillis,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Integer => "integer",
            Format::Auto => "auto",
            Format::Rfc3339 => "rfc3339",
            Format::EpochSeconds => "epoch-seconds",
            Format::EpochMillis => "epoch-millis",
        }
    }

    pub fn is_time(self) -> bool {
        matches!(
            self,
            Format::Auto | Format::Rfc3339 | Format::EpochSeconds | Format::EpochMillis
        )
    }
}

/// One rule of `deadLetter.classes`: a message whose error matches becomes of class `name`.
/// Rules are tried in order, the first match wins; a message no rule matches is `unknown`
/// (its raw class still shown). Patterns are globs matched against the whole value, case
/// sensitive: `*` any run of characters (dots and slashes too), `?` one character, `[abc]`
/// one of a set, `{a,b}` either.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClassRule {
    /// The class: what `status` counts, the exporter labels, `redrive --class` selects.
    #[schemars(regex(pattern = r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$"))]
    pub name: String,
    /// Globs on the error class the envelope read (an exception's fully qualified class
    /// name, or the broker's reason): one, or a list of which any may match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<Patterns>,
    /// Globs on the error message. With `errorClass` too, both must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<Patterns>,
}

/// One glob or several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Patterns {
    One(#[schemars(length(min = 1, max = 1024))] String),
    Many(#[schemars(length(min = 1))] Vec<String>),
}

impl Patterns {
    pub fn as_slice(&self) -> &[String] {
        match self {
            Patterns::One(p) => std::slice::from_ref(p),
            Patterns::Many(v) => v,
        }
    }
}
