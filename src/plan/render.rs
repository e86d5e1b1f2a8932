//! A plan, shown three ways: for a terminal, for a pull-request comment (markdown, in
//! `super::markdown`), and as a versioned JSON document. All three are snapshot-tested.
//!
//! Values are shown as compact JSON (`5000`, `"orders.retry"`); a value too long for one line
//! is shown as a unified text diff.

use std::fmt::Write as _;

use serde_json::Value;

use super::{Action, Change, FieldChange, Note, Plan};
use crate::printer::{Printer, Style};

/// `Plan: 3 to create, 1 to update, 0 to replace, 0 to delete.`
pub fn summary_line(plan: &Plan) -> String {
    let s = &plan.summary;
    if !s.has_changes() {
        return format!(
            "No changes. Live state matches the specs ({} resources checked).",
            s.unchanged
        );
    }
    let mut line = format!(
        "Plan: {} to create, {} to update, {} to replace, {} to delete.",
        s.create, s.update, s.replace, s.delete
    );
    if s.impossible > 0 {
        let _ = write!(line, " {} impossible.", s.impossible);
    }
    line
}

/// How a delete added by `--prune` is marked.
pub(super) const PRUNED: &str = "no spec names it: --prune";

pub(super) fn symbol(a: Action) -> &'static str {
    match a {
        Action::Create => "+",
        Action::Update => "~",
        Action::Replace => "-/+",
        Action::Delete => "-",
        Action::Impossible => "!",
    }
}

fn style(a: Action) -> Style {
    match a {
        Action::Create => Style::Good,
        Action::Update => Style::Warning,
        Action::Replace | Action::Delete | Action::Impossible => Style::Error,
    }
}

pub(super) fn show(v: Option<&Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(v) => v.to_string(),
    }
}

/// Too long for `old → new` on one line: show a text diff.
pub(super) fn is_large(f: &FieldChange) -> bool {
    let len = |v: &Option<Value>| v.as_ref().map_or(0, |v| v.to_string().len());
    len(&f.old) + len(&f.new) > 100
}

pub(super) fn text_diff(f: &FieldChange) -> String {
    // Each side ends in a newline, so the diff does not say "No newline at end of file".
    let pretty = |v: &Option<Value>| {
        v.as_ref()
            .map(|v| serde_json::to_string_pretty(v).unwrap_or_default() + "\n")
            .unwrap_or_default()
    };
    let (old, new) = (pretty(&f.old), pretty(&f.new));
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header("live", "spec")
        .to_string()
}

pub(super) fn drop_warning(c: &Change) -> Option<String> {
    if let Some(how) = &c.destructive {
        return Some(how.clone());
    }
    if !c.drops_object() || !c.resource.kind.holds_messages() {
        return None;
    }
    Some(match c.messages {
        Some(0) => "holds 0 messages".into(),
        Some(n) => format!("holds {n} messages that would be lost"),
        None => "message count unknown".into(),
    })
}

/// Changes as people read them: by target and channel, each channel's changes in apply
/// order. (Apply order itself puts some RabbitMQ policies ahead of every channel's queues;
/// JSON and apply keep it.)
pub(super) fn by_channel(plan: &Plan) -> Vec<&Change> {
    let mut shown: Vec<&Change> = plan.changes.iter().collect();
    shown.sort_by(|a, b| (&a.resource.target, &a.channel).cmp(&(&b.resource.target, &b.channel)));
    shown
}

/// The terminal rendering.
pub fn human(plan: &Plan, printer: &Printer) -> String {
    let mut out = String::new();
    let mut current: Option<(&str, &str)> = None;
    for c in by_channel(plan) {
        let here = (c.resource.target.as_str(), c.channel.as_str());
        if current != Some(here) {
            let _ = writeln!(
                out,
                "\n{}",
                printer.paint(
                    &format!("target {} · channel {}", here.0, here.1),
                    Style::Bold
                )
            );
            current = Some(here);
        }
        let head = format!(
            "{:>3} {:<10} {}",
            symbol(c.action),
            c.action.as_str(),
            c.resource
        );
        let _ = write!(out, "  {}", printer.paint(&head, style(c.action)));
        if let Some(w) = drop_warning(c) {
            let _ = write!(out, "  ({w})");
        }
        if c.pruned {
            let _ = write!(out, "  [{PRUNED}]");
        }
        out.push('\n');
        if let Some(r) = &c.reason {
            let _ = writeln!(out, "        {}", printer.paint(r, Style::Error));
        }
        if let Some(d) = &c.discard {
            let _ = writeln!(
                out,
                "        {}",
                printer.paint(&crate::status::safe(&d.to_string()), Style::Warning)
            );
        }
        for f in &c.fields {
            if is_large(f) {
                let _ = writeln!(out, "        {}:", f.key);
                for line in text_diff(f).lines() {
                    let _ = writeln!(out, "          {line}");
                }
            } else if c.action == Action::Create {
                let _ = writeln!(out, "        {}: {}", f.key, show(f.new.as_ref()));
            } else {
                let _ = writeln!(
                    out,
                    "        {}: {} → {}",
                    f.key,
                    show(f.old.as_ref()),
                    show(f.new.as_ref())
                );
            }
        }
    }
    if !plan.notes.is_empty() {
        let _ = writeln!(out, "\n{}", printer.paint("Notes (no action):", Style::Dim));
        for g in grouped(&plan.notes) {
            let more = g.more_text();
            let _ = writeln!(
                out,
                "  · {}{more} on target {}: {}",
                g.named.join(", "),
                g.target,
                g.message
            );
        }
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&printer.paint(&summary_line(plan), Style::Bold));
    out.push('\n');
    out
}

/// Notes that say the same thing on the same target, one line each.
pub(super) struct NoteGroup<'a> {
    pub(super) target: &'a str,
    pub(super) message: &'a str,
    /// The first few resources, by name.
    pub(super) named: Vec<String>,
    /// How many more.
    pub(super) more: usize,
}

impl NoteGroup<'_> {
    /// ` and 3 more`, or nothing.
    pub(super) fn more_text(&self) -> String {
        match self.more {
            0 => String::new(),
            n => format!(" and {n} more"),
        }
    }
}

/// Groups notes by target and message: a note about an endpoint can concern thousands of
/// resources, and one line naming the first few says it once. JSON keeps every note.
pub(super) fn grouped(notes: &[Note]) -> Vec<NoteGroup<'_>> {
    const NAMED: usize = 3;
    let mut groups: Vec<NoteGroup<'_>> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for n in notes {
        let key = (n.resource.target.as_str(), n.message.as_str());
        let i = *index.entry(key).or_insert_with(|| {
            groups.push(NoteGroup {
                target: key.0,
                message: key.1,
                named: Vec::new(),
                more: 0,
            });
            groups.len() - 1
        });
        let g = &mut groups[i];
        if g.named.len() < NAMED {
            g.named.push(n.resource.to_string());
        } else {
            g.more += 1;
        }
    }
    groups
}

/// The versioned JSON document (also what `--out` saves).
pub fn json(plan: &Plan) -> String {
    let mut s = serde_json::to_string_pretty(plan).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{Kind, ResourceId};
    use crate::spec::model::Backend;

    fn note(target: &str, name: &str, message: &str) -> Note {
        Note {
            resource: ResourceId {
                target: target.into(),
                backend: Backend::Sqs,
                kind: Kind::Queue,
                scope: String::new(),
                name: name.into(),
            },
            message: message.into(),
        }
    }

    #[test]
    fn notes_saying_the_same_thing_on_a_target_share_a_line() {
        let mut notes: Vec<Note> = (0..6)
            .map(|i| note("t", &format!("q{i}"), "same"))
            .collect();
        notes.insert(2, note("t", "q9", "other"));
        notes.push(note("u", "q0", "same"));
        let plan = Plan::new(
            Vec::new(),
            notes,
            0,
            Default::default(),
            Vec::new(),
            &Default::default(),
        );
        let text = human(&plan, &Printer::new(crate::printer::ColorChoice::Never));
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("  · ")).collect();
        assert_eq!(
            lines,
            vec![
                "  · queue q0, queue q1, queue q2 and 3 more on target t: same",
                "  · queue q9 on target t: other",
                "  · queue q0 on target u: same",
            ]
        );
        let md = crate::plan::markdown::markdown(&plan, &crate::backend::duration_unit);
        assert!(
            md.contains("- `queue q0`, `queue q1`, `queue q2` and 3 more on t: same"),
            "{md}"
        );
        // JSON keeps every note.
        assert_eq!(json(&plan).matches("\"message\": \"same\"").count(), 7);
    }

    #[test]
    fn changes_are_listed_by_channel_whatever_the_apply_order() {
        use crate::resource::{Desired, Role};
        let mk = |channel: &str, kind, name: &str, role| {
            let d = Desired {
                id: ResourceId {
                    target: "rmq".into(),
                    backend: Backend::Rabbitmq,
                    kind,
                    scope: "/".into(),
                    name: name.into(),
                },
                channel: channel.into(),
                role,
                props: [("durable".to_owned(), serde_json::json!(true))]
                    .into_iter()
                    .collect(),
                immutable: false,
                present: true,
            };
            crate::plan::diff(&d, None).expect("a create")
        };
        let changes = vec![
            mk("a", Kind::Queue, "a.main", Role::Main),
            mk("a", Kind::Policy, "a.main", Role::MainPolicy),
            mk("b", Kind::Queue, "b.main", Role::Main),
            mk("b", Kind::Policy, "b.main", Role::MainPolicy),
        ];
        let plan = Plan::new(
            changes,
            Vec::new(),
            0,
            Default::default(),
            Vec::new(),
            &Default::default(),
        );
        // Apply order: both policies first.
        assert_eq!(plan.changes[1].resource.kind, Kind::Policy);
        let text = human(&plan, &Printer::new(crate::printer::ColorChoice::Never));
        let heads: Vec<&str> = text.lines().filter(|l| l.starts_with("target ")).collect();
        assert_eq!(heads, ["target rmq · channel a", "target rmq · channel b"]);
        let md = crate::plan::markdown::markdown(&plan, &crate::backend::duration_unit);
        let a = md.find("`queue a.main").expect("row");
        let b = md.find("`policy b.main").expect("row");
        assert!(a < b, "{md}");
    }
}
