//! The JSON schemas, generated from the spec types, and the first validation layer.
//!
//! `dlqctl schema` writes these to `schemas/` for editors; a test fails when the committed
//! files drift from the types. Validation errors from the `jsonschema` crate are rewritten
//! here into findings that name the field (`spec.retry.maxAttempts`), the offending value and
//! the place in the file, with a did-you-mean hint for unknown fields and enum values.

use std::sync::LazyLock;

use jsonschema::ValidationError;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

use super::locate::{Locations, field_path};
use super::model::{Channel, Defaults, Targets};
use super::pointer::escape;
use crate::diag::Diagnostic;

/// The document kinds dlqctl reads, and the file each schema is written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    Channel,
    Targets,
    Defaults,
}

impl DocKind {
    pub const ALL: [DocKind; 3] = [DocKind::Channel, DocKind::Targets, DocKind::Defaults];

    pub fn from_kind(kind: &str) -> Option<Self> {
        match kind {
            "Channel" => Some(DocKind::Channel),
            "Targets" => Some(DocKind::Targets),
            "Defaults" => Some(DocKind::Defaults),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DocKind::Channel => "Channel",
            DocKind::Targets => "Targets",
            DocKind::Defaults => "Defaults",
        }
    }

    /// File name under `schemas/`.
    pub fn file_name(self) -> &'static str {
        match self {
            DocKind::Channel => "channel.v1.json",
            DocKind::Targets => "targets.v1.json",
            DocKind::Defaults => "defaults.v1.json",
        }
    }

    pub fn schema(self) -> &'static Value {
        &COMPILED[self as usize].0
    }

    fn validator(self) -> &'static jsonschema::Validator {
        &COMPILED[self as usize].1
    }
}

fn generate<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    strip_null(&mut schema);
    schema
}

/// Optional fields are omitted, never `null`: drop the null branch schemars adds for `Option`,
/// so an error says "must be a string" rather than "not valid under any of the schemas".
fn strip_null(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".into(), only);
                }
            }
            let single = match map.get("anyOf") {
                Some(Value::Array(branches)) if branches.len() == 2 => branches
                    .iter()
                    .find(|b| b.get("type") != Some(&Value::from("null")))
                    .filter(|_| {
                        branches
                            .iter()
                            .any(|b| b.get("type") == Some(&Value::from("null")))
                    })
                    .cloned(),
                _ => None,
            };
            if let Some(Value::Object(branch)) = single {
                map.remove("anyOf");
                for (k, bv) in branch {
                    map.entry(k).or_insert(bv);
                }
            }
            for child in map.values_mut() {
                strip_null(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_null),
        _ => {}
    }
}

static COMPILED: LazyLock<Vec<(Value, jsonschema::Validator)>> = LazyLock::new(|| {
    DocKind::ALL
        .iter()
        .map(|kind| {
            let schema = match kind {
                DocKind::Channel => generate::<Channel>(),
                DocKind::Targets => generate::<Targets>(),
                DocKind::Defaults => generate::<Defaults>(),
            };
            // The schemas are generated from our own types; failing to compile one is a bug in
            // dlqctl caught by the schema tests, not something a user can cause.
            let validator = jsonschema::validator_for(&schema)
                .unwrap_or_else(|e| panic!("generated {} schema is invalid: {e}", kind.name()));
            (schema, validator)
        })
        .collect()
});

/// The schema as written to `schemas/`: pretty JSON with a trailing newline.
pub fn schema_text(kind: DocKind) -> String {
    let mut text = serde_json::to_string_pretty(kind.schema()).unwrap_or_default();
    text.push('\n');
    text
}

/// Validates one document, returning a finding per problem (all of them, not the first).
pub fn validate(kind: DocKind, doc: &Value, locs: &Locations) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for err in kind.validator().iter_errors(doc) {
        let pointer = err.instance_path().as_str().to_owned();
        let at = At {
            field: field_path(&pointer),
            found: doc.pointer(&pointer),
            pointer,
            locs,
        };
        match err.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                unknown_fields(kind, &at, unexpected, &mut out);
            }
            ValidationErrorKind::Required { property } => missing_field(&at, property, &mut out),
            ValidationErrorKind::Type { kind: expected } => wrong_type(&at, expected, &mut out),
            ValidationErrorKind::Enum { options } => not_allowed(&at, options, &mut out),
            ValidationErrorKind::Pattern { pattern } => no_match(&at, pattern, &mut out),
            ValidationErrorKind::PropertyNames { error } => bad_key(&at, error, &mut out),
            _ => other(&at, &err, &mut out),
        }
    }
    out
}

/// Where a validation error is: its JSON pointer, the field as a user writes it, the value
/// found there, and the positions to point at.
struct At<'a> {
    pointer: String,
    field: String,
    found: Option<&'a Value>,
    locs: &'a Locations,
}

impl<'a> At<'a> {
    fn parts(&self) -> (&str, &str, Option<&'a Value>, &'a Locations) {
        (&self.pointer, &self.field, self.found, self.locs)
    }
}

/// `schema/unknown-field`, one per key the schema does not know, with a did-you-mean hint.
fn unknown_fields(kind: DocKind, at: &At<'_>, unexpected: &[String], out: &mut Vec<Diagnostic>) {
    let (pointer, field, _, locs) = at.parts();
    let known = known_fields(kind.schema(), pointer);
    for key in unexpected {
        let child = format!("{pointer}/{}", escape(key));
        let where_ = if field.is_empty() {
            "the document".to_owned()
        } else {
            format!("`{field}`")
        };
        let mut d = Diagnostic::error(
            "schema/unknown-field",
            format!("unknown field `{key}` in {where_}"),
        )
        .at(locs.key(&child));
        d = match did_you_mean(key, known.iter().map(String::as_str)) {
                _ if key == "<<" => d.hint(
                    "YAML merge keys are not supported; put shared settings in a `kind: Defaults` document",
                ),
                Some(s) => d.hint(format!("did you mean `{s}`?")),
                None if !known.is_empty() => {
                    d.hint(format!("expected one of: {}", known.join(", ")))
                }
                None => d,
            };
        out.push(d);
    }
}

/// `schema/required`.
fn missing_field(at: &At<'_>, property: &Value, out: &mut Vec<Diagnostic>) {
    let (pointer, field, _, locs) = at.parts();
    let name = property.as_str().unwrap_or_default();
    let full = join_field(field, name);
    let parent = if field.is_empty() {
        "the document".to_owned()
    } else {
        format!("`{field}`")
    };
    out.push(
        Diagnostic::error(
            "schema/required",
            format!("missing required field `{full}` in {parent}"),
        )
        .at(locs.key(pointer))
        .hint(format!("add `{name}:`")),
    );
}

/// `schema/type`: names the expected types as a YAML user knows them.
fn wrong_type(at: &At<'_>, expected: &TypeKind, out: &mut Vec<Diagnostic>) {
    let (pointer, field, found, locs) = at.parts();
    let expected = match expected {
        TypeKind::Single(t) => article(&t.to_string()),
        TypeKind::Multiple(set) => {
            let names: Vec<String> = set.iter().map(|t| article(&t.to_string())).collect();
            match names.split_last() {
                Some((last, rest)) if !rest.is_empty() => {
                    format!("{} or {last}", rest.join(", "))
                }
                _ => names.join(""),
            }
        }
    };
    out.push(
        Diagnostic::error(
            "schema/type",
            format!("`{field}` must be {expected}, found {}", describe(found)),
        )
        .at(locs.value(pointer)),
    );
}

/// `schema/enum`, with a did-you-mean hint.
fn not_allowed(at: &At<'_>, options: &Value, out: &mut Vec<Diagnostic>) {
    let (pointer, field, found, locs) = at.parts();
    let allowed: Vec<String> = options
        .as_array()
        .map(|a| a.iter().map(plain).collect())
        .unwrap_or_default();
    let mut d = Diagnostic::error(
        "schema/enum",
        format!(
            "`{field}` must be one of {}, found {}",
            allowed
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", "),
            describe(found)
        ),
    )
    .at(locs.value(pointer));
    if let Some(Value::String(s)) = found
        && let Some(m) = did_you_mean(s, allowed.iter().map(String::as_str))
    {
        d = d.hint(format!("did you mean `{m}`?"));
    }
    out.push(d);
}

/// `schema/duration` for a malformed duration, `schema/ratio` for a malformed ratio, else
/// `schema/pattern`.
fn no_match(at: &At<'_>, pattern: &str, out: &mut Vec<Diagnostic>) {
    let (pointer, field, found, locs) = at.parts();
    let d = if pattern == super::duration::PATTERN {
        let why = found
            .and_then(Value::as_str)
            .map(|s| {
                super::duration::Duration::parse(s)
                    .err()
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        Diagnostic::error(
            "schema/duration",
            format!("`{field}` is not a duration: {why}"),
        )
        .hint("durations are a number and a unit: `500ms`, `30s`, `5m`, `2h`, `7d`")
    } else if pattern == super::ratio::PATTERN {
        let why = found
            .and_then(Value::as_str)
            .map(|s| super::ratio::Ratio::parse(s).err().unwrap_or_default())
            .unwrap_or_default();
        Diagnostic::error("schema/ratio", format!("`{field}` is not a ratio: {why}"))
            .hint("ratios are a percentage above 0 and at most 100: `0.1%`, `2.5%`, `100%`")
    } else {
        let d = Diagnostic::error(
            "schema/pattern",
            format!(
                "`{field}` is {}, which does not match `{pattern}`",
                describe(found)
            ),
        );
        if pattern == super::model::PRINCIPAL_PATTERN {
            d.hint("a Kafka principal is its type and name: `User:orders-api` (`User:*`: everyone)")
        } else {
            d
        }
    };
    out.push(d.at(locs.value(pointer)));
}

/// `schema/key`: a map key the schema's `propertyNames` rejects.
fn bad_key(at: &At<'_>, error: &ValidationError<'_>, out: &mut Vec<Diagnostic>) {
    let (pointer, field, _, locs) = at.parts();
    // The inner error's instance is the offending key.
    let key = error
        .instance()
        .as_str()
        .map(str::to_owned)
        .unwrap_or_default();
    let pattern = match error.kind() {
        ValidationErrorKind::Pattern { pattern } => format!(" (`{pattern}`)"),
        _ => String::new(),
    };
    out.push(
        Diagnostic::error(
            "schema/key",
            format!("`{key}` is not an allowed name in `{field}`{pattern}"),
        )
        .at(locs.key(&format!("{pointer}/{}", escape(&key))))
        .hint("names use lowercase letters, digits, `-` and `_`, starting with a letter or digit"),
    );
}

/// The one-line findings: constants, ranges and lengths; anything else as `schema/invalid`.
fn other(at: &At<'_>, err: &ValidationError<'_>, out: &mut Vec<Diagnostic>) {
    let (pointer, field, found, locs) = at.parts();
    match err.kind() {
        ValidationErrorKind::Constant { expected_value } => out.push(
            Diagnostic::error(
                "schema/enum",
                format!(
                    "`{field}` must be `{}`, found {}",
                    plain(expected_value),
                    describe(found)
                ),
            )
            .at(locs.value(pointer)),
        ),
        ValidationErrorKind::Minimum { limit }
        | ValidationErrorKind::ExclusiveMinimum { limit } => out.push(
            Diagnostic::error(
                "schema/range",
                format!(
                    "`{field}` must be at least {limit}, found {}",
                    describe(found)
                ),
            )
            .at(locs.value(pointer)),
        ),
        ValidationErrorKind::Maximum { limit }
        | ValidationErrorKind::ExclusiveMaximum { limit } => out.push(
            Diagnostic::error(
                "schema/range",
                format!(
                    "`{field}` must be at most {limit}, found {}",
                    describe(found)
                ),
            )
            .at(locs.value(pointer)),
        ),
        ValidationErrorKind::MinLength { limit } => out.push(
            Diagnostic::error(
                "schema/length",
                if *limit == 1 {
                    format!("`{field}` must not be empty")
                } else {
                    format!(
                        "`{field}` must be at least {limit} characters long, found {}",
                        describe(found)
                    )
                },
            )
            .at(locs.value(pointer)),
        ),
        ValidationErrorKind::MinItems { limit } => out.push(
            Diagnostic::error(
                "schema/length",
                format!(
                    "`{field}` must list at least {limit} item{}",
                    if *limit == 1 { "" } else { "s" }
                ),
            )
            .at(locs.value(pointer)),
        ),
        ValidationErrorKind::MaxLength { limit } => out.push(
            Diagnostic::error(
                "schema/length",
                format!("`{field}` must be at most {limit} characters long"),
            )
            .at(locs.value(pointer)),
        ),
        _ => out.push(
            Diagnostic::error("schema/invalid", format!("`{field}`: {err}"))
                .at(locs.value(pointer)),
        ),
    }
}

/// JSON type names as a YAML user knows them.
fn article(t: &str) -> String {
    match t {
        "integer" => "an integer".into(),
        "array" => "a list".into(),
        "object" => "a mapping".into(),
        "null" => "empty".into(),
        _ => format!("a {t}"),
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// How a found value is named in a message: its type and, for scalars, its text.
pub fn describe(v: Option<&Value>) -> String {
    match v {
        None => "nothing".into(),
        Some(Value::Null) => "an empty value".into(),
        Some(Value::Bool(b)) => format!("the boolean `{b}`"),
        Some(Value::Number(n)) => format!("the number `{n}`"),
        Some(Value::String(s)) => {
            let shown: String = s.chars().take(60).collect();
            let more = if s.chars().count() > 60 { "…" } else { "" };
            // Look-alike letters (Cyrillic `о` for Latin `o`) are invisible: name them.
            let odd = s
                .chars()
                .find(|c| !c.is_ascii())
                .map(|c| {
                    format!(
                        " (with the non-ASCII character `{c}`, U+{:04X})",
                        u32::from(c)
                    )
                })
                .unwrap_or_default();
            format!("the string `{}{more}`{odd}", shown.escape_debug())
        }
        Some(Value::Array(_)) => "a list".into(),
        Some(Value::Object(_)) => "a mapping".into(),
    }
}

fn join_field(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}.{name}")
    }
}

/// The closest candidate by edit distance, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_lowercase();
    candidates
        .map(|c| (strsim::damerau_levenshtein(&lower, &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= 1.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The property names the schema allows at `pointer` (for did-you-mean hints).
fn known_fields(root: &Value, pointer: &str) -> Vec<String> {
    let mut node = resolve(root, root);
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        let next = node
            .get("properties")
            .and_then(|p| p.get(&seg))
            .or_else(|| node.get("additionalProperties").filter(|v| v.is_object()))
            .or_else(|| node.get("items"));
        match next {
            Some(n) => node = resolve(root, n),
            None => return Vec::new(),
        }
    }
    node.get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// Follows `$ref` and picks the non-null branch of `anyOf` (how schemars writes `Option`).
fn resolve<'a>(root: &'a Value, mut node: &'a Value) -> &'a Value {
    for _ in 0..16 {
        if let Some(r) = node.get("$ref").and_then(Value::as_str) {
            match r.strip_prefix('#').and_then(|p| root.pointer(p)) {
                Some(n) => node = n,
                None => return node,
            }
        } else if let Some(branches) = node.get("anyOf").and_then(Value::as_array) {
            match branches
                .iter()
                .find(|b| b.get("type") != Some(&Value::from("null")))
            {
                Some(b) => node = b,
                None => return node,
            }
        } else {
            return node;
        }
    }
    node
}

#[cfg(test)]
mod tests {
    //! The schemas as generated, and how each kind of validation error is worded and placed.

    use serde_json::json;

    use super::*;

    /// Each finding of a document as `rule | message | hint | line:col`.
    fn findings(kind: DocKind, src: &str) -> Vec<String> {
        let mut docs =
            crate::spec::yaml::parse(src, crate::spec::yaml::Limits::default()).expect("yaml");
        let root = docs.remove(0).root;
        let doc = root.to_json();
        let locs = Locations::of(0, &root);
        validate(kind, &doc, &locs)
            .iter()
            .map(|d| {
                let loc = d.loc.expect("a finding has a place");
                format!(
                    "{} | {} | {} | {}:{}",
                    d.rule,
                    d.message,
                    d.hint.as_deref().unwrap_or("-"),
                    loc.span.line,
                    loc.span.col
                )
            })
            .collect()
    }

    /// A valid channel with `extra` lines appended under `spec:`.
    fn channel(spec: &str) -> String {
        format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata:\n  name: orders\nspec:\n  target: sqs\n{spec}"
        )
    }

    #[test]
    fn doc_kinds_are_named_by_their_kind_and_file() {
        for kind in DocKind::ALL {
            assert_eq!(DocKind::from_kind(kind.name()), Some(kind));
        }
        assert_eq!(DocKind::from_kind("channel"), None);
        assert_eq!(DocKind::from_kind(""), None);
        assert_eq!(
            DocKind::ALL.map(DocKind::name),
            ["Channel", "Targets", "Defaults"]
        );
        assert_eq!(
            DocKind::ALL.map(DocKind::file_name),
            ["channel.v1.json", "targets.v1.json", "defaults.v1.json"]
        );
    }

    #[test]
    fn each_kind_has_its_own_schema_written_as_pretty_json_with_a_newline() {
        let titles = DocKind::ALL.map(|k| k.schema()["title"].as_str().unwrap_or_default());
        assert_eq!(
            titles,
            [
                "dlqctl Channel (dlqctl/v1)",
                "dlqctl Targets (dlqctl/v1)",
                "dlqctl Defaults (dlqctl/v1)"
            ]
        );
        for kind in DocKind::ALL {
            let text = schema_text(kind);
            assert!(text.starts_with("{\n  \""), "pretty: {}", &text[..20]);
            assert!(text.ends_with("}\n") && !text.ends_with("\n\n"));
            let back: Value = serde_json::from_str(&text).expect("the schema text is JSON");
            assert_eq!(&back, kind.schema());
            assert!(!text.contains("\"null\""), "no null branch left");
        }
    }

    #[test]
    fn a_valid_document_has_no_findings() {
        assert_eq!(
            findings(DocKind::Channel, &channel("")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn strip_null_drops_the_null_type_and_the_null_branch() {
        let mut v = json!({
            "type": ["string", "null"],
            "properties": {
                "many": {"type": ["string", "integer", "null"]},
                "opt": {
                    "anyOf": [{"$ref": "#/$defs/A", "description": "inner"}, {"type": "null"}],
                    "description": "outer"
                },
                "nullFirst": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
                "two": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "three": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
                "list": {"items": [{"type": ["boolean", "null"]}]}
            }
        });
        strip_null(&mut v);
        assert_eq!(
            v,
            json!({
                "type": "string",
                "properties": {
                    "many": {"type": ["string", "integer"]},
                    "opt": {"$ref": "#/$defs/A", "description": "outer"},
                    "nullFirst": {"type": "integer"},
                    "two": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "three": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
                    "list": {"items": [{"type": "boolean"}]}
                }
            })
        );
    }

    #[test]
    fn found_values_are_described_by_type_and_text() {
        assert_eq!(describe(None), "nothing");
        assert_eq!(describe(Some(&json!(null))), "an empty value");
        assert_eq!(describe(Some(&json!(true))), "the boolean `true`");
        assert_eq!(describe(Some(&json!(1.5))), "the number `1.5`");
        assert_eq!(describe(Some(&json!("a\"b\n"))), "the string `a\\\"b\\n`");
        assert_eq!(describe(Some(&json!([1]))), "a list");
        assert_eq!(describe(Some(&json!({"a": 1}))), "a mapping");
        let sixty = "x".repeat(60);
        assert_eq!(
            describe(Some(&json!(sixty))),
            format!("the string `{sixty}`")
        );
        assert_eq!(
            describe(Some(&json!(format!("{sixty}yz")))),
            format!("the string `{sixty}…`")
        );
        assert_eq!(
            describe(Some(&json!("оrders"))),
            "the string `оrders` (with the non-ASCII character `о`, U+043E)"
        );
    }

    #[test]
    fn type_names_and_plain_values_read_as_yaml() {
        assert_eq!(article("integer"), "an integer");
        assert_eq!(article("array"), "a list");
        assert_eq!(article("object"), "a mapping");
        assert_eq!(article("null"), "empty");
        assert_eq!(article("string"), "a string");
        assert_eq!(plain(&json!("dlqctl/v1")), "dlqctl/v1");
        assert_eq!(plain(&json!(3)), "3");
        assert_eq!(join_field("", "name"), "name");
        assert_eq!(join_field("metadata", "name"), "metadata.name");
    }

    #[test]
    fn did_you_mean_takes_the_closest_candidate_within_a_third_of_its_length() {
        let fields = ["retention", "retentions", "maxAttempts", "abc"];
        let dym = |w: &str| did_you_mean(w, fields.iter().copied());
        assert_eq!(dym("retentio"), Some("retention"));
        assert_eq!(dym("RETENTION"), Some("retention"), "case does not count");
        assert_eq!(dym("maxAttemps"), Some("maxAttempts"));
        // 11 letters: 3 edits are a typo, 4 are not.
        assert_eq!(dym("maxAtXXXpts"), Some("maxAttempts"));
        assert_eq!(dym("maxXXXXmpts"), None);
        // Short names allow one edit.
        assert_eq!(dym("abd"), Some("abc"));
        assert_eq!(dym("xyz"), None);
        assert_eq!(did_you_mean("spec", std::iter::empty()), None);
    }

    #[test]
    fn known_fields_follow_refs_options_lists_and_maps() {
        let root = json!({
            "$defs": {"A": {"properties": {"x": {}, "y": {}}}},
            "properties": {
                "list": {"items": {"$ref": "#/$defs/A"}},
                "opt": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/A"}]},
                "map": {"additionalProperties": {"$ref": "#/$defs/A"}},
                "closed": {"additionalProperties": false},
                "a/b~": {"$ref": "#/$defs/A"},
                "ext": {"$ref": "other.json"},
                "broken": {"$ref": "#/$defs/Missing"},
                "nulls": {"anyOf": [{"type": "null"}]},
                "loop": {"$ref": "#/properties/loop"}
            }
        });
        let xy = ["x".to_owned(), "y".to_owned()];
        let mut top = known_fields(&root, "");
        top.sort();
        assert_eq!(
            top,
            [
                "a/b~", "broken", "closed", "ext", "list", "loop", "map", "nulls", "opt"
            ]
        );
        assert_eq!(known_fields(&root, "/list/0"), xy);
        assert_eq!(known_fields(&root, "/opt"), xy);
        assert_eq!(known_fields(&root, "/map/anything"), xy);
        assert_eq!(known_fields(&root, "/a~1b~0"), xy);
        assert_eq!(known_fields(&root, "/closed/q"), Vec::<String>::new());
        assert_eq!(known_fields(&root, "/nope"), Vec::<String>::new());
        assert_eq!(known_fields(&root, "/ext"), Vec::<String>::new());
        assert_eq!(known_fields(&root, "/broken"), Vec::<String>::new());
        assert_eq!(known_fields(&root, "/nulls"), Vec::<String>::new());
        assert_eq!(known_fields(&root, "/loop"), Vec::<String>::new());
        assert_eq!(
            known_fields(DocKind::Channel.schema(), "/spec/retry"),
            ["maxAttempts", "backoff", "name"]
        );
    }

    #[test]
    fn an_unknown_field_is_named_with_where_it_is_and_a_hint() {
        assert_eq!(
            findings(DocKind::Channel, &format!("{}spce: 1\n", channel(""))),
            [
                "schema/unknown-field | unknown field `spce` in the document | did you mean `spec`? | 7:1"
            ]
        );
        assert_eq!(
            findings(
                DocKind::Channel,
                &channel("  retry: {maxAttempts: 3, zzzzzz: 1}\n")
            ),
            [
                "schema/unknown-field | unknown field `zzzzzz` in `spec.retry` | expected one of: maxAttempts, backoff, name | 7:27"
            ]
        );
        assert_eq!(
            findings(DocKind::Channel, &channel("  <<: {retention: 4d}\n")),
            [
                "schema/unknown-field | unknown field `<<` in `spec` | YAML merge keys are not supported; put shared settings in a `kind: Defaults` document | 7:3"
            ]
        );
    }

    #[test]
    fn a_missing_field_names_its_parent_and_what_to_add() {
        assert_eq!(
            findings(
                DocKind::Channel,
                "apiVersion: dlqctl/v1\nkind: Channel\nspec:\n  target: sqs\n"
            ),
            [
                "schema/required | missing required field `metadata` in the document | add `metadata:` | 1:1"
            ]
        );
        assert_eq!(
            findings(
                DocKind::Channel,
                "apiVersion: dlqctl/v1\nkind: Channel\nmetadata:\n  labels: {}\nspec: {}\n"
            ),
            [
                "schema/required | missing required field `metadata.name` in `metadata` | add `name:` | 3:1"
            ]
        );
    }

    #[test]
    fn a_wrong_type_names_the_expected_types_and_the_value_found() {
        assert_eq!(
            findings(
                DocKind::Channel,
                &channel("  retry:\n    maxAttempts: three\n")
            ),
            [
                "schema/type | `spec.retry.maxAttempts` must be an integer, found the string `three` | - | 8:18"
            ]
        );
        assert_eq!(
            findings(
                DocKind::Channel,
                &channel("  kafka:\n    config: {a: [1]}\n")
            ),
            [
                "schema/type | `spec.kafka.config.a` must be a boolean, an integer or a string, found a list | - | 8:17"
            ]
        );
        assert_eq!(
            findings(DocKind::Channel, &channel("  alarms:\n    actions: x\n")),
            [
                "schema/type | `spec.alarms.actions` must be a list or a mapping, found the string `x` | - | 8:14"
            ]
        );
    }

    #[test]
    fn a_value_not_in_the_enum_lists_the_allowed_ones_with_a_hint() {
        assert_eq!(
            findings(
                DocKind::Channel,
                &channel("  rabbitmq:\n    queueType: quorom\n")
            ),
            [
                "schema/enum | `spec.rabbitmq.queueType` must be one of `classic`, `quorum`, found the string `quorom` | did you mean `quorum`? | 8:16"
            ]
        );
        assert_eq!(
            findings(
                DocKind::Channel,
                &channel("  rabbitmq:\n    queueType: stream\n")
            ),
            [
                "schema/enum | `spec.rabbitmq.queueType` must be one of `classic`, `quorum`, found the string `stream` | - | 8:16"
            ]
        );
        assert_eq!(
            findings(
                DocKind::Channel,
                &channel("  rabbitmq:\n    queueType: 1\n")
            ),
            [
                "schema/type | `spec.rabbitmq.queueType` must be a string, found the number `1` | - | 8:16",
                "schema/enum | `spec.rabbitmq.queueType` must be one of `classic`, `quorum`, found the number `1` | - | 8:16"
            ]
        );
    }

    #[test]
    fn a_pattern_mismatch_is_a_duration_a_principal_or_a_plain_pattern_finding() {
        assert_eq!(
            findings(DocKind::Channel, &channel("  retention: 5 minutes\n")),
            [
                "schema/duration | `spec.retention` is not a duration: `5 minutes` has no unit; write a number and a unit (ms, s, m, h, d), e.g. `30s` | durations are a number and a unit: `500ms`, `30s`, `5m`, `2h`, `7d` | 7:14"
            ]
        );
        assert_eq!(
            findings(
                DocKind::Channel,
                &channel("  kafka:\n    acls:\n      produce: [orders-api]\n")
            ),
            [
                "schema/pattern | `spec.kafka.acls.produce[0]` is the string `orders-api`, which does not match `^[A-Za-z][A-Za-z0-9]*:\\S.*$` | a Kafka principal is its type and name: `User:orders-api` (`User:*`: everyone) | 9:17"
            ]
        );
        assert_eq!(
            findings(
                DocKind::Channel,
                "apiVersion: dlqctl/v1\nkind: Channel\nmetadata:\n  name: -orders\nspec: {}\n"
            ),
            [
                "schema/pattern | `metadata.name` is the string `-orders`, which does not match `^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$` | - | 4:9"
            ]
        );
    }

    /// A ratio is reported by the field, the line and the parser's own reason.
    #[test]
    fn a_ratio_that_cannot_be_read_says_why_where() {
        let hint = "ratios are a percentage above 0 and at most 100: `0.1%`, `2.5%`, `100%`";
        for (text, why) in [
            (
                "0.1",
                "`0.1` has no `%`; write a percentage of the source's messages, e.g. `0.1%` or `2.5%` (`0.1` would be ambiguous: 0.1% or 10%?)",
            ),
            (
                "0%",
                "`0%` is zero: the alarm would fire on the first dead letter (for that, alarm on `depth: {above: 0}`)",
            ),
            (
                "150%",
                "`150%` is above 100%: at most every message of the source is dead-lettered",
            ),
        ] {
            assert_eq!(
                findings(
                    DocKind::Channel,
                    &channel(&format!(
                        "  alarms:\n    deadLetterRate: {{warning: \"{text}\"}}\n"
                    ))
                ),
                [format!(
                    "schema/ratio | `spec.alarms.deadLetterRate.warning` is not a ratio: {why} | {hint} | 8:31"
                )],
                "{text}"
            );
        }
    }

    #[test]
    fn a_bad_map_key_is_reported_at_the_key_with_its_pattern() {
        assert_eq!(
            findings(
                DocKind::Targets,
                "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  Prod: {backend: sqs, region: eu-west-1}\n"
            ),
            [
                "schema/key | `Prod` is not an allowed name in `targets` (`^[a-z0-9][a-z0-9_-]*$`) | names use lowercase letters, digits, `-` and `_`, starting with a letter or digit | 4:3"
            ]
        );
    }

    #[test]
    fn ranges_lengths_and_constants_are_one_line_findings() {
        assert_eq!(
            findings(DocKind::Channel, &channel("  retry:\n    maxAttempts: 0\n")),
            [
                "schema/range | `spec.retry.maxAttempts` must be at least 1, found the number `0` | - | 8:18"
            ]
        );
        assert_eq!(
            findings(
                DocKind::Channel,
                &channel("  retry:\n    maxAttempts: 10001\n")
            ),
            [
                "schema/range | `spec.retry.maxAttempts` must be at most 10000, found the number `10001` | - | 8:18"
            ]
        );
        assert_eq!(
            findings(DocKind::Channel, &channel("  name: ''\n")),
            ["schema/length | `spec.name` must not be empty | - | 7:9"]
        );
        assert_eq!(
            findings(
                DocKind::Channel,
                &channel("  kafka:\n    exceptionBasedDlts: []\n")
            ),
            [
                "schema/length | `spec.kafka.exceptionBasedDlts` must list at least 1 item | - | 8:25"
            ]
        );
        let long = "x".repeat(201);
        assert_eq!(
            findings(
                DocKind::Channel,
                &format!(
                    "apiVersion: dlqctl/v1\nkind: Channel\nmetadata:\n  name: {long}\nspec: {{}}\n"
                )
            ),
            ["schema/length | `metadata.name` must be at most 200 characters long | - | 4:9"]
        );
        assert_eq!(
            findings(
                DocKind::Channel,
                &channel("  deadLetter:\n    envelope: sprig\n")
            ),
            [
                "schema/invalid | `spec.deadLetter.envelope`: \"sprig\" is not valid under any of the schemas listed in the 'anyOf' keyword | - | 8:15"
            ]
        );
    }
}
