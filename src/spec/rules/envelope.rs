//! Rules on `deadLetter.envelope` (a declared mapping) and `deadLetter.classes`: what the
//! schema cannot say about where a dead letter's error is read from and how it is classed.
//!
//! `envelope/field` (error): a field names no place, or more than one (`header`, `property`,
//! `pointer`). `envelope/property` (error): a property the backend's messages do not have.
//! `envelope/pointer` (error): not a JSON pointer (RFC 6901). `envelope/format` (error): a
//! format the field cannot have (attempts are integers, times are times). `envelope/same-place`
//! (error): two fields read one place as values of different kinds. `classes/pattern`
//! (error): a glob that does not compile. `classes/empty` (error): a rule with no pattern.
//! `classes/reserved` (error): `unknown` or `other` as a name (they are the fallbacks).
//! `classes/unreachable` (warning): a rule an earlier one always matches first.
//!
//! Depends on the backend's message properties (`spec::resolve::envelope::properties`).

use crate::diag::Diagnostic;
use crate::spec::load::Doc;
use crate::spec::model::{Backend, Channel, ClassRule, Envelope, Format, Patterns};
use crate::spec::resolve::envelope::{self, OTHER, Role, UNKNOWN};
use crate::spec::schema::did_you_mean;

const BASE: &str = "/spec/deadLetter";

pub(super) fn check_envelope(doc: &Doc<Channel>, backend: Backend, out: &mut Vec<Diagnostic>) {
    let Some(dl) = &doc.value.spec.dead_letter else {
        return;
    };
    if let Some(Envelope::Mapping(m)) = &dl.envelope {
        let mut places: Vec<(Role, envelope::Location, Kind)> = Vec::new();
        for role in Role::ALL {
            let Some(f) = role.of(m) else { continue };
            let at = format!("{BASE}/envelope/{}", role.key());
            let Some(loc) = envelope::location(f) else {
                out.push(
                    Diagnostic::error(
                        "envelope/field",
                        format!(
                            "`deadLetter.envelope.{}` must name exactly one place to read from",
                            role.key()
                        ),
                    )
                    .at(doc.locs.key(&at))
                    .hint(
                        "give one of `header: NAME`, `property: NAME` or `pointer: /json/pointer`",
                    ),
                );
                continue;
            };
            if let Some(p) = &f.property {
                property(doc, backend, role, p, out);
            }
            if let Some(p) = &f.pointer
                && let Some(why) = pointer_problem(p)
            {
                out.push(
                    Diagnostic::error(
                        "envelope/pointer",
                        format!("`deadLetter.envelope.{}.pointer` `{p}`: {why}", role.key()),
                    )
                    .at(doc.locs.value(&format!("{at}/pointer")))
                    .hint("a JSON pointer (RFC 6901) starts with `/` and escapes `~` as `~0`, `/` as `~1`: `/error/class`"),
                );
            }
            let fmt = envelope::format(backend, role, f);
            let kind = Kind::of(fmt);
            if kind != Kind::want(role) {
                out.push(
                    Diagnostic::error(
                        "envelope/format",
                        format!(
                            "`deadLetter.envelope.{}` is read as `{}`, but it holds {}",
                            role.key(),
                            fmt.as_str(),
                            Kind::want(role).what()
                        ),
                    )
                    .at(doc.locs.value(&format!("{at}/format")))
                    .hint(Kind::want(role).hint()),
                );
            }
            if let Some((other, _, k)) = places.iter().find(|(_, l, _)| *l == loc)
                && *k != kind
            {
                out.push(
                    Diagnostic::error(
                        "envelope/same-place",
                        format!(
                            "`deadLetter.envelope.{}` and `.{}` both read {loc}, one as {} and the other as {}",
                            other.key(),
                            role.key(),
                            k.what(),
                            kind.what()
                        ),
                    )
                    .at(doc.locs.key(&at))
                    .hint("one place holds one value: read each field from where the consumer writes it"),
                );
            }
            places.push((role, loc, kind));
        }
    }
    if let Some(rules) = &dl.classes {
        classes(doc, rules, out);
    }
}

/// What a field's value is, as far as contradiction goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Integer,
    Time,
}

impl Kind {
    fn of(f: Format) -> Self {
        match f {
            Format::Text => Kind::Text,
            Format::Integer => Kind::Integer,
            _ => Kind::Time,
        }
    }

    fn want(role: Role) -> Self {
        match role {
            Role::Attempts => Kind::Integer,
            r if r.is_time() => Kind::Time,
            _ => Kind::Text,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Integer => "an integer",
            Kind::Time => "a time",
        }
    }

    fn hint(self) -> &'static str {
        match self {
            Kind::Text => "leave `format` out (text), or remove it",
            Kind::Integer => "leave `format` out (integer)",
            Kind::Time => {
                "`format: rfc3339`, `epoch-seconds`, `epoch-millis` or `auto` (RFC 3339, or milliseconds)"
            }
        }
    }
}

fn property(doc: &Doc<Channel>, backend: Backend, role: Role, p: &str, out: &mut Vec<Diagnostic>) {
    let known = envelope::properties(backend);
    if known.iter().any(|(n, _)| *n == p) {
        return;
    }
    let names = || known.iter().map(|(n, _)| *n);
    let hint = match did_you_mean(p, names()) {
        Some(m) => format!("did you mean `{m}`?"),
        None => format!(
            "{} messages have: {} (a header is `header:`)",
            backend.display_name(),
            names().collect::<Vec<_>>().join(", ")
        ),
    };
    out.push(
        Diagnostic::error(
            "envelope/property",
            format!(
                "`deadLetter.envelope.{}.property` `{p}` is not a property of a {} message",
                role.key(),
                backend.display_name()
            ),
        )
        .at(doc
            .locs
            .value(&format!("{BASE}/envelope/{}/property", role.key())))
        .hint(hint),
    );
}

/// Why `p` is not a JSON pointer, if it is not one.
fn pointer_problem(p: &str) -> Option<&'static str> {
    if p.is_empty() {
        return Some("the whole body is not a field");
    }
    if !p.starts_with('/') {
        return Some("it does not start with `/`");
    }
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Some("`~` must be followed by `0` or `1`");
        }
    }
    None
}

fn classes(doc: &Doc<Channel>, rules: &[ClassRule], out: &mut Vec<Diagnostic>) {
    for (i, r) in rules.iter().enumerate() {
        let at = format!("{BASE}/classes/{i}");
        if r.name == UNKNOWN || r.name == OTHER {
            out.push(
                Diagnostic::error(
                    "classes/reserved",
                    format!("`deadLetter.classes[{i}].name` `{}` is reserved", r.name),
                )
                .at(doc.locs.value(&format!("{at}/name")))
                .hint(format!("`{UNKNOWN}` is what no rule matches, `{OTHER}` the exporter's label for every class not declared: name the class for what it is")),
            );
        }
        if r.error_class.is_none() && r.error_message.is_none() {
            out.push(
                Diagnostic::error(
                    "classes/empty",
                    format!("`deadLetter.classes[{i}]` (`{}`) has no pattern: it would match nothing", r.name),
                )
                .at(doc.locs.key(&at))
                .hint("give `errorClass` and/or `errorMessage` globs; `errorClass: \"*\"` matches every message with a class"),
            );
        }
        for (key, p) in [
            ("errorClass", &r.error_class),
            ("errorMessage", &r.error_message),
        ] {
            let Some(p) = p else { continue };
            for (j, g) in p.as_slice().iter().enumerate() {
                if let Err(e) = envelope::glob(g) {
                    let ptr = match p {
                        Patterns::One(_) => format!("{at}/{key}"),
                        Patterns::Many(_) => format!("{at}/{key}/{j}"),
                    };
                    out.push(
                        Diagnostic::error(
                            "classes/pattern",
                            format!("`deadLetter.classes[{i}].{key}` `{g}` is not a glob: {}", e.kind()),
                        )
                        .at(doc.locs.value(&ptr))
                        .hint("globs: `*` any run of characters, `?` one, `[abc]` one of a set, `{a,b}` either; `\\` escapes"),
                    );
                }
            }
        }
        if let Some(k) = rules[..i].iter().position(|earlier| covers(earlier, r)) {
            out.push(
                Diagnostic::warning(
                    "classes/unreachable",
                    format!(
                        "`deadLetter.classes[{i}]` (`{}`) can never match: `deadLetter.classes[{k}]` (`{}`) matches every message it would, and comes first",
                        r.name, rules[k].name
                    ),
                )
                .at(doc.locs.key(&at))
                .hint("rules are tried in order and the first match wins: put the narrower rule first, or remove it"),
            );
        }
    }
}

/// Whether `earlier` matches every message `later` does: on each field `earlier` constrains,
/// `later` constrains it too with patterns `earlier` matches (a match-all, the same glob, or
/// a literal one of `earlier`'s globs matches).
fn covers(earlier: &ClassRule, later: &ClassRule) -> bool {
    let field = |e: &Option<Patterns>, l: &Option<Patterns>| {
        let Some(e) = e else { return true };
        let Some(l) = l else { return false };
        let globs: Vec<_> = e
            .as_slice()
            .iter()
            .filter_map(|g| envelope::glob(g).ok())
            .collect();
        l.as_slice().iter().all(|p| {
            e.as_slice().iter().any(|g| g == p || g == "*" || g == "**")
                || (!p.contains(['*', '?', '[', '{', '\\']) && globs.iter().any(|m| m.is_match(p)))
        })
    };
    (earlier.error_class.is_some() || earlier.error_message.is_some())
        && field(&earlier.error_class, &later.error_class)
        && field(&earlier.error_message, &later.error_message)
}
