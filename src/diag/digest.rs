//! Lint warnings folded to one line per rule, for the commands that check the specs on the way
//! to something else (`plan`, `apply`, `status`, …).
//!
//! `lint` is where findings are read one by one. A plan of 500 channels printed 300 full
//! warnings (about 2,400 lines) ahead of the changes a reviewer came for (issue 39); the count,
//! the rule and the channels it fired on say the same in one line, as Terraform's "and N more
//! similar warnings elsewhere" does, and `dlqctl lint` (or `-v`) still shows each in full.
//! Errors are never folded: they stop the command, and each one needs its own fix.
//!
//! A [`Digest`] is a value; the terminal ([`Digest::lines`]) and the markdown plan comment
//! each render it, with the same wording.

use std::collections::BTreeMap;

use super::{Diagnostic, Severity};

/// Names shown before the ellipsis when a rule fired on more places than [`SHOWN`].
const FIRST: usize = 3;
/// Up to this many places are all named; beyond it, the first [`FIRST`], `…` and the last.
const SHOWN: usize = 4;

/// Where a finding is, as a line of the digest names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// In the document of this channel (`metadata.name`).
    Channel(String),
    /// In a file, outside any channel's document (the targets file, Defaults).
    File(String),
    /// About the run as a whole.
    Nowhere,
}

/// The warnings of one rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleWarnings {
    pub rule: &'static str,
    /// How many warnings the rule gave (a channel may get two: its dead-letter and its
    /// invalid-message queue).
    pub count: usize,
    /// The channels it warned on, sorted, each once.
    pub channels: Vec<String>,
    /// The files it warned in outside any channel, sorted, each once.
    pub files: Vec<String>,
    /// The finding's message when the rule warned once: then the line can say it whole.
    pub message: Option<String>,
}

/// Every warning of a run, by rule: the rules with the most warnings first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Digest {
    pub warnings: usize,
    pub rules: Vec<RuleWarnings>,
}

impl Digest {
    /// The warnings among `diags` (errors and notes are left out), each placed by `place`.
    pub fn of(diags: &[Diagnostic], place: impl Fn(&Diagnostic) -> Place) -> Self {
        let mut by_rule: BTreeMap<&'static str, (RuleWarnings, Option<String>)> = BTreeMap::new();
        let mut warnings = 0;
        for d in diags.iter().filter(|d| d.severity == Severity::Warning) {
            warnings += 1;
            let (r, first) = by_rule.entry(d.rule).or_insert_with(|| {
                (
                    RuleWarnings {
                        rule: d.rule,
                        ..RuleWarnings::default()
                    },
                    Some(d.message.clone()),
                )
            });
            r.count += 1;
            match place(d) {
                Place::Channel(c) => r.channels.push(c),
                Place::File(f) => r.files.push(f),
                Place::Nowhere => {}
            }
            if r.count > 1 {
                *first = None;
            }
        }
        let mut rules: Vec<RuleWarnings> = by_rule
            .into_values()
            .map(|(mut r, message)| {
                r.channels.sort();
                r.channels.dedup();
                r.files.sort();
                r.files.dedup();
                r.message = message;
                r
            })
            .collect();
        rules.sort_by(|a, b| b.count.cmp(&a.count).then(a.rule.cmp(b.rule)));
        Digest { warnings, rules }
    }

    pub fn is_empty(&self) -> bool {
        self.warnings == 0
    }

    /// `300 lint warnings (run `dlqctl lint` or add -v to see each)`: what opens the first
    /// line on the terminal and the summary of the markdown element.
    pub fn headline(&self, quote: impl Fn(&str) -> String) -> String {
        let (noun, each) = if self.warnings == 1 {
            ("lint warning", "it in full")
        } else {
            ("lint warnings", "each")
        };
        format!(
            "{} {noun} (run {} or add -v to see {each})",
            self.warnings,
            quote("dlqctl lint")
        )
    }

    /// The terminal form: one line per rule, the first opened by the [`Digest::headline`]
    /// (after `warning: `, which the printer paints), the others aligned under it. Empty when
    /// there are no warnings.
    pub fn lines(&self) -> Vec<String> {
        let plain = |s: &str| format!("`{s}`");
        self.rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let line = r.line(&|s: &str| s.to_owned());
                if i == 0 {
                    format!("{} — {line}", self.headline(plain))
                } else {
                    format!("         {line}")
                }
            })
            .collect()
    }
}

impl RuleWarnings {
    /// `deadletter/discard-undeclared ×300 on channels a, b, c … z`, or for a single warning
    /// `alarms/missing on channel a: <message>`; names go through `quote` (code spans in
    /// markdown), the message through `words`.
    pub fn line_with(
        &self,
        quote: &dyn Fn(&str) -> String,
        words: &dyn Fn(&str) -> String,
    ) -> String {
        let rule = quote(self.rule);
        let places = self.places(quote);
        let sep = if places.is_empty() { "" } else { " " };
        match &self.message {
            Some(m) => format!("{rule}{sep}{places}: {}", words(m)),
            None => format!("{rule} ×{}{sep}{places}", self.count),
        }
    }

    /// [`RuleWarnings::line_with`] with the message as it is.
    pub fn line(&self, quote: &dyn Fn(&str) -> String) -> String {
        self.line_with(quote, &|s: &str| s.to_owned())
    }

    /// `on channels a, b, c … z` (`on 2 channels: a, b` when the rule warned more often than
    /// on channels), `in dlqctl.yaml`, both, or nothing.
    fn places(&self, quote: &dyn Fn(&str) -> String) -> String {
        let mut out = Vec::new();
        let n = self.channels.len();
        if n > 0 {
            let names = list(&self.channels, quote);
            out.push(match n {
                1 => format!("on channel {names}"),
                _ if n == self.count => format!("on channels {names}"),
                _ => format!("on {n} channels: {names}"),
            });
        }
        if !self.files.is_empty() {
            out.push(format!("in {}", list(&self.files, quote)));
        }
        out.join(" and ")
    }
}

/// `a, b, c, d`, or beyond [`SHOWN`] names `a, b, c … z`.
fn list(names: &[String], quote: &dyn Fn(&str) -> String) -> String {
    let q: Vec<String> = names.iter().map(|n| quote(n)).collect();
    if q.len() <= SHOWN {
        return q.join(", ");
    }
    format!("{} … {}", q[..FIRST].join(", "), q[q.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warn(rule: &'static str, channel: &str) -> (Diagnostic, Place) {
        (
            Diagnostic::warning(rule, format!("{rule} on {channel}")),
            Place::Channel(channel.to_owned()),
        )
    }

    fn digest(found: &[(Diagnostic, Place)]) -> Digest {
        let diags: Vec<Diagnostic> = found.iter().map(|(d, _)| d.clone()).collect();
        Digest::of(&diags, |d| {
            found
                .iter()
                .find(|(f, _)| f.message == d.message)
                .map_or(Place::Nowhere, |(_, p)| p.clone())
        })
    }

    #[test]
    fn three_hundred_warnings_of_one_rule_are_one_line_naming_the_first_and_last_channels() {
        let found: Vec<_> = (0..300)
            .map(|i| warn("deadletter/discard-undeclared", &format!("sc-q{i:03}")))
            .collect();
        assert_eq!(
            digest(&found).lines(),
            [
                "300 lint warnings (run `dlqctl lint` or add -v to see each) — deadletter/discard-undeclared ×300 on channels sc-q000, sc-q001, sc-q002 … sc-q299"
            ]
        );
    }

    #[test]
    fn each_rule_gets_one_line_the_most_frequent_first_and_a_single_warning_says_its_message() {
        let mut found = vec![warn("retry/none", "d")];
        found.extend(["a", "b", "c"].map(|c| warn("alarms/missing", c)));
        found.push((
            Diagnostic::warning("alarms/actions-unused", "in the targets file"),
            Place::File("dlqctl.yaml".into()),
        ));
        found.push((
            Diagnostic::warning("alarms/actions-unused", "on e"),
            Place::Channel("e".into()),
        ));
        // A channel warned twice by one rule is named once.
        found.push((
            Diagnostic::warning("alarms/actions-unused", "again on e"),
            Place::Channel("e".into()),
        ));
        // Errors and notes are not warnings.
        found.push((Diagnostic::error("schema/type", "bad"), Place::Nowhere));
        found.push((Diagnostic::info("x/y", "fyi"), Place::Nowhere));
        let d = digest(&found);
        assert_eq!(d.warnings, 7);
        assert_eq!(
            d.lines(),
            [
                "7 lint warnings (run `dlqctl lint` or add -v to see each) — alarms/actions-unused ×3 on channel e and in dlqctl.yaml",
                "         alarms/missing ×3 on channels a, b, c",
                "         retry/none on channel d: retry/none on d",
            ]
        );
    }

    #[test]
    fn one_warning_says_it() {
        let d = digest(&[warn("retry/none", "d")]);
        assert_eq!(
            d.lines(),
            [
                "1 lint warning (run `dlqctl lint` or add -v to see it in full) — retry/none on channel d: retry/none on d"
            ]
        );
        assert!(digest(&[]).lines().is_empty());
    }
}
