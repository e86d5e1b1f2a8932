//! The plan as a pull-request comment: what a reviewer must see first, in a size GitHub
//! accepts whatever the plan's size.
//!
//! GitHub refuses a comment over 65,536 characters, and 200 new channels used to make
//! 300,000. So the comment is written against a budget ([`LIMIT`], counted in UTF-16 code
//! units as GitHub counts) in the order a reviewer needs it: the marker a workflow finds its
//! comment by, the summary, the changes apply refuses without a flag (with the flags and the
//! message counts), then the rest by channel with creates collapsed. When the budget runs
//! out, what is left is one line: "N more changes: run `dlqctl plan` or see the JSON plan".
//! Nothing is ever cut inside a table row, a code block or a `<details>` element: each is
//! added whole or not at all.
//!
//! Each change is shown once: a risky one under "Needs attention", any other under its
//! channel. Channels with changes to existing objects come before channels that are only
//! created.
//!
//! Given the channels' pictures ([`markdown_with`]), each channel's section opens with its
//! Mermaid flowchart (`dlqctl graph`'s), the nodes the plan changes coloured by what it does.
//! The comment is a renderer: it draws nothing and asks no backend. `commands/plan.rs` hands
//! it the charts as text ([`Chart`]) and the unit each duration field is stored in
//! ([`UnitOf`]).
//! Diagrams are what the budget drops first: the comment is written once without them, and
//! they are added, channel by channel in order, only within what that left unused, so a
//! diagram never pushes a change out. Diagrams left out are counted in one line.

use std::fmt::Write as _;

use serde_json::Value;

use super::render::{
    by_channel, drop_warning, grouped, is_large, show, summary_line, symbol, text_diff,
};
use super::{Action, Change, FieldChange, Plan};
use crate::diag::digest::Digest;
use crate::resource::TimeUnit;
use crate::spec::duration::Duration;

/// The most a markdown plan holds, in UTF-16 code units: GitHub's 65,536 less room for what a
/// workflow may add around it.
pub const LIMIT: usize = 60_000;

/// The first line of every markdown plan, so a workflow can find its earlier comment and
/// update it in place.
pub const MARKER: &str = "<!-- dlqctl-plan -->";

/// One channel's picture, drawn by the caller: `dlqctl graph`'s Mermaid flowchart with the
/// nodes the plan changes already coloured. The comment only places it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chart {
    pub target: String,
    pub channel: String,
    /// The flowchart, unfenced, ending in a newline.
    pub mermaid: String,
}

/// The unit a field of a change is stored in when it is a duration (`retention.ms`:
/// milliseconds), as the change's backend says; `None` for any other field.
pub type UnitOf<'a> = &'a dyn Fn(&Change, &str) -> Option<TimeUnit>;

/// A pull-request comment of at most [`LIMIT`] characters, without diagrams or lint warnings.
pub fn markdown(plan: &Plan, unit: UnitOf<'_>) -> String {
    markdown_within(plan, &[], &Digest::default(), unit, LIMIT)
}

/// A pull-request comment of at most [`LIMIT`] characters whose channel sections open with
/// the channels' pictures (those of `charts`), as far as the budget allows; the specs' lint
/// `warnings`, one line per rule, come after the summary.
pub fn markdown_with(plan: &Plan, charts: &[Chart], warnings: &Digest, unit: UnitOf<'_>) -> String {
    markdown_within(plan, charts, warnings, unit, LIMIT)
}

/// [`markdown_with`] with another budget (tests use small ones).
pub fn markdown_within(
    plan: &Plan,
    charts: &[Chart],
    warnings: &Digest,
    unit: UnitOf<'_>,
    limit: usize,
) -> String {
    // First without diagrams: what every change and note needs.
    let first = write(plan, limit, Diagrams::new(plan, &[]), warnings, unit);
    let complete =
        first.shown == first.total && !first.stopped && !first.notes_cut && !first.warnings_cut;
    if charts.is_empty() || !complete {
        return first.finish();
    }
    let mut diagrams = Diagrams::new(plan, charts);
    if diagrams.texts.is_empty() {
        return first.finish();
    }
    // Then with diagrams, within what that left over: the reserve stays set aside, and so
    // does room for the line that counts diagrams left out, so every check that passed
    // without them passes with them.
    diagrams.budget = limit.saturating_sub(
        first.used + first.reserve + width(&diagrams_left_out(diagrams.texts.len())),
    );
    write(plan, limit, diagrams, warnings, unit).finish()
}

/// The comment, written with the diagrams `diagrams` allows.
fn write<'u>(
    plan: &Plan,
    limit: usize,
    diagrams: Diagrams,
    warnings: &Digest,
    unit: UnitOf<'u>,
) -> Comment<'u> {
    let mut c = Comment::new(plan, limit, diagrams, unit);
    c.push(&format!("{MARKER}\n### dlqctl plan\n\n"));
    c.push(&format!("**{}**\n", summary_line(plan)));
    c.push(&per_target(plan));
    let shown = by_channel(plan);
    let (risky, rest): (Vec<&Change>, Vec<&Change>) =
        shown.into_iter().partition(|ch| ch.is_risky());
    // The head of "Needs attention" comes whatever the budget: the warnings leave it room.
    let attention = if risky.is_empty() {
        String::new()
    } else {
        attention_head(plan, &risky)
    };
    c.warnings(warnings, width(&attention));
    if !risky.is_empty() {
        c.attention(&attention, &risky);
    }
    if !c.stopped {
        let groups = channel_groups(&rest, &risky);
        // A channel whose changes are all under "Needs attention" has a section only for its
        // diagram, and is the first to lose it.
        let only_risky = risky_only(&risky, &groups);
        let head = "\n#### Changes by channel\n";
        if !groups.is_empty() {
            c.push(head);
        } else if only_risky.iter().any(|g| c.diagrams.has(g)) {
            c.extra(head);
        }
        for g in &only_risky {
            c.diagram_only(g);
        }
        for group in groups {
            if !c.group(&group) {
                break;
            }
        }
    }
    c.notes(plan);
    c
}

/// Sections for the channels whose every change is risky (so shown under "Needs attention"):
/// they hold the channel's diagram and nothing else.
fn risky_only<'a>(risky: &[&'a Change], groups: &[Group<'a>]) -> Vec<Group<'a>> {
    let mut out: Vec<Group<'a>> = Vec::new();
    for ch in risky {
        let here = (ch.resource.target.as_str(), ch.channel.as_str());
        if groups.iter().any(|g| (g.target, g.channel) == here)
            || out.iter().any(|g| (g.target, g.channel) == here)
        {
            continue;
        }
        out.push(Group {
            target: here.0,
            channel: here.1,
            changes: Vec::new(),
            risky: risky
                .iter()
                .filter(|r| (r.resource.target.as_str(), r.channel.as_str()) == here)
                .count(),
        });
    }
    out
}

/// Each channel's flowchart, coloured by the plan, as it goes into the comment; and how much
/// of the budget the diagrams may use.
struct Diagrams {
    /// (target, channel) → the fenced flowchart.
    texts: std::collections::HashMap<(String, String), String>,
    /// What the diagrams may still use, in UTF-16 code units.
    budget: usize,
    /// Sections whose diagram did not fit.
    left_out: usize,
}

impl Diagrams {
    fn new(plan: &Plan, charts: &[Chart]) -> Self {
        let mut texts = std::collections::HashMap::new();
        for c in charts {
            if !plan
                .changes
                .iter()
                .any(|ch| ch.channel == c.channel && ch.resource.target == c.target)
            {
                continue;
            }
            texts.insert(
                (c.target.clone(), c.channel.clone()),
                format!("\n```mermaid\n{}```\n", c.mermaid),
            );
        }
        Diagrams {
            texts,
            budget: 0,
            left_out: 0,
        }
    }

    fn has(&self, g: &Group<'_>) -> bool {
        self.texts
            .contains_key(&(g.target.to_owned(), g.channel.to_owned()))
    }

    /// The group's diagram if it fits what is left of the budget (`also`: other text that
    /// only the diagram needs); else counts it as left out.
    fn take(&mut self, g: &Group<'_>, also: usize) -> Option<String> {
        let text = self
            .texts
            .get(&(g.target.to_owned(), g.channel.to_owned()))?;
        let w = width(text) + also;
        if w <= self.budget {
            self.budget -= w;
            Some(text.clone())
        } else {
            self.left_out += 1;
            None
        }
    }
}

fn diagrams_left_out(n: usize) -> String {
    let what = if n == 1 {
        "1 channel's diagram was".to_owned()
    } else {
        format!("{n} channels' diagrams were")
    };
    format!(
        "\n{what} left out to keep every change within the comment's size: `dlqctl graph` draws them.\n"
    )
}

/// Across several targets, the counts per target: a cut comment still says where every
/// change is.
fn per_target(plan: &Plan) -> String {
    let mut counts: std::collections::BTreeMap<&str, [usize; 5]> = Default::default();
    for ch in &plan.changes {
        let column = match ch.action {
            Action::Create => 0,
            Action::Update => 1,
            Action::Replace => 2,
            Action::Delete => 3,
            Action::Impossible => 4,
        };
        counts.entry(ch.resource.target.as_str()).or_default()[column] += 1;
    }
    if counts.len() < 2 {
        return String::new();
    }
    let mut out = String::from(
        "\n| target | create | update | replace | delete | impossible |\n|---|--:|--:|--:|--:|--:|\n",
    );
    for (target, n) in counts {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            cell(target),
            n[0],
            n[1],
            n[2],
            n[3],
            n[4]
        );
    }
    out
}

/// The comment being written, and how much of the budget it has used.
struct Comment<'u> {
    out: String,
    used: usize,
    limit: usize,
    /// Changes shown so far.
    shown: usize,
    total: usize,
    /// The budget ran out: nothing more is added but the closing line.
    stopped: bool,
    /// What the closing lines may need at most (with every change and note left out).
    reserve: usize,
    /// Notes in the plan.
    notes: usize,
    /// Some notes did not fit.
    notes_cut: bool,
    /// Some lines of the lint warnings did not fit.
    warnings_cut: bool,
    diagrams: Diagrams,
    unit: UnitOf<'u>,
}

/// Characters as GitHub counts them (UTF-16 code units: an emoji counts 2).
fn width(s: &str) -> usize {
    s.encode_utf16().count()
}

fn more_line(n: usize) -> String {
    let noun = if n == 1 { "change" } else { "changes" };
    format!("\n{n} more {noun}: run `dlqctl plan` or see the JSON plan.\n")
}

fn notes_left_out(n: usize) -> String {
    let noun = if n == 1 { "note" } else { "notes" };
    format!("\n{n} {noun} (no action) left out.\n")
}

impl<'u> Comment<'u> {
    fn new(plan: &Plan, limit: usize, diagrams: Diagrams, unit: UnitOf<'u>) -> Self {
        let total = plan.changes.len();
        let diagrams_line = if diagrams.texts.is_empty() {
            0
        } else {
            width(&diagrams_left_out(diagrams.texts.len()))
        };
        Comment {
            out: String::new(),
            used: 0,
            limit,
            shown: 0,
            total,
            stopped: false,
            reserve: width(&more_line(total))
                + width(&notes_left_out(plan.notes.len()))
                + diagrams_line,
            notes: plan.notes.len(),
            notes_cut: false,
            warnings_cut: false,
            diagrams,
            unit,
        }
    }

    /// Text only a diagram needs, paid from the diagrams' budget when it fits.
    fn extra(&mut self, s: &str) {
        if width(s) <= self.diagrams.budget {
            self.diagrams.budget -= width(s);
            self.push(s);
        }
    }

    /// The section of a channel whose changes are all under "Needs attention": its heading
    /// and diagram, from the diagrams' budget, or nothing.
    fn diagram_only(&mut self, g: &Group<'_>) {
        let head = g.heading();
        if let Some(d) = self.diagrams.take(g, width(&head)) {
            self.push(&head);
            self.push(&d);
        }
    }

    fn push(&mut self, s: &str) {
        self.used += width(s);
        self.out.push_str(s);
    }

    /// Whether `s` fits, with `then` more to come (closing tags, text already promised).
    fn fits(&self, s: &str, then: usize) -> bool {
        self.used + width(s) + then + self.reserve <= self.limit
    }

    /// The risky changes, first, under `head` ([`attention_head`]): what apply refuses
    /// without a flag, and what it cannot do.
    fn attention(&mut self, head: &str, risky: &[&Change]) {
        self.push(head);
        let mut diffs = String::new();
        for ch in risky {
            let needs = match ch.action {
                Action::Impossible => "cannot be applied".to_owned(),
                _ => ch
                    .allow_flags()
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            let row = format!(
                "| {} {} | {} | {} · {} | {} | {} |\n",
                symbol(ch.action),
                ch.action.as_str(),
                code(&ch.resource.to_string()),
                cell(&ch.resource.target),
                cell(&ch.channel),
                needs,
                cell(&details(ch, self.unit).join("<br>"))
            );
            let diff = large_diffs(ch);
            if !self.fits(&row, width(&diffs) + width(&diff)) {
                self.stopped = true;
                break;
            }
            self.push(&row);
            diffs.push_str(&diff);
            self.shown += 1;
        }
        self.push(&diffs);
    }

    /// One channel's changes, whole or not at all. Returns false once the budget ran out.
    fn group(&mut self, g: &Group<'_>) -> bool {
        let plain = g.render(None, self.unit);
        if !self.fits(&plain, 0) {
            self.stopped = true;
            return false;
        }
        // A section with a diagram is laid out a little differently: the difference is the
        // diagram's to pay as well.
        let framing = width(&g.render(Some(""), self.unit)).saturating_sub(width(&plain));
        let text = match self.diagrams.take(g, framing) {
            Some(d) => g.render(Some(&d), self.unit),
            None => plain,
        };
        self.push(&text);
        self.shown += g.changes.len();
        true
    }

    /// The specs' lint warnings, one line per rule as on the terminal, in one collapsed
    /// element whose summary says how many: every line that fits, then how many rules did
    /// not. Nothing when there are none.
    /// `then`: what comes next whatever the budget.
    fn warnings(&mut self, warnings: &Digest, then: usize) {
        if warnings.is_empty() {
            return;
        }
        let open = format!(
            "\n<details><summary>⚠️ {}</summary>\n\n",
            warnings.headline(|s: &str| format!("<code>{}</code>", html(s)))
        );
        let close = "\n</details>\n";
        let left_out = |n: usize| {
            let noun = if n == 1 { "rule" } else { "rules" };
            format!("- and the warnings of {n} more {noun}: run `dlqctl lint`\n")
        };
        let most = width(close) + width(&left_out(warnings.rules.len())) + then;
        if !self.fits(&open, most) {
            self.warnings_cut = true;
            return;
        }
        self.push(&open);
        let mut left = warnings.rules.len();
        for r in &warnings.rules {
            let line = format!("- {}\n", r.line_with(&code, &words));
            if !self.fits(&line, most) {
                break;
            }
            self.push(&line);
            left -= 1;
        }
        if left > 0 {
            self.warnings_cut = true;
            self.push(&left_out(left));
        }
        self.push(close);
    }

    /// Notes, grouped as on the terminal, in one collapsed element: every line that fits.
    fn notes(&mut self, plan: &Plan) {
        if plan.notes.is_empty() || self.stopped {
            return;
        }
        let open = "\n<details><summary>Notes (no action)</summary>\n\n";
        let close = "\n</details>\n";
        let lines: Vec<(String, usize)> = grouped(&plan.notes)
            .iter()
            .map(|g| {
                let named: Vec<String> = g.named.iter().map(|n| code(n)).collect();
                let line = format!(
                    "- {}{} on {}: {}\n",
                    named.join(", "),
                    g.more_text(),
                    g.target,
                    g.message
                );
                (line, g.named.len() + g.more)
            })
            .collect();
        // The reserve already covers a "notes left out" line.
        if !self.fits(open, width(close)) {
            self.notes_cut = true;
            return;
        }
        self.push(open);
        let mut left = plan.notes.len();
        for (line, count) in lines {
            if !self.fits(&line, width(close)) {
                break;
            }
            self.push(&line);
            left -= count;
        }
        self.push(close);
        if left > 0 {
            self.notes_cut = true;
            self.push(&notes_left_out(left));
        }
    }

    fn finish(mut self) -> String {
        let left = self.total - self.shown;
        if self.stopped && self.notes > 0 {
            self.push(&notes_left_out(self.notes));
        }
        if self.diagrams.left_out > 0 {
            self.push(&diagrams_left_out(self.diagrams.left_out));
        }
        if left > 0 {
            self.push(&more_line(left));
        }
        self.out
    }
}

/// What opens "Needs attention": the flags apply needs, what cannot be made, what only
/// `--prune` adds, and the table's header.
fn attention_head(plan: &Plan, risky: &[&Change]) -> String {
    let mut flags: Vec<&str> = Vec::new();
    for ch in &plan.changes {
        for f in ch.allow_flags() {
            if !flags.contains(&f) {
                flags.push(f);
            }
        }
    }
    flags.sort_by_key(|f| {
        ["--allow-replace", "--allow-delete", "--allow-message-loss"]
            .iter()
            .position(|k| k == f)
    });
    let mut head = format!("\n#### ⚠️ Needs attention ({})\n\n", risky.len());
    if !flags.is_empty() {
        let _ = writeln!(
            head,
            "- `dlqctl apply` refuses these changes unless it is given `{}`.",
            flags.join(" ")
        );
    }
    let impossible = plan.summary.impossible;
    if impossible > 0 {
        let noun = if impossible == 1 {
            "change cannot be made"
        } else {
            "changes cannot be made"
        };
        let _ = writeln!(
            head,
            "- {impossible} {noun} by any apply (*impossible*, the reason is beside it): change the specs or the live object first."
        );
    }
    if plan.changes.iter().any(|ch| ch.pruned) {
        head.push_str(
            "- Deletes marked *pruned* exist only with `--prune`: give it to `dlqctl apply` as well, or apply a plan saved with `dlqctl plan --prune --out FILE`.\n",
        );
    }
    head.push_str(
        "\n| action | resource | target · channel | apply needs | details |\n|---|---|---|---|---|\n",
    );
    head
}

/// One channel's changes that are not risky (creates and in-place updates).
struct Group<'a> {
    target: &'a str,
    channel: &'a str,
    changes: Vec<&'a Change>,
    /// This channel's changes shown under "Needs attention".
    risky: usize,
}

/// The channels in `rest`, in order: those with updates first, then those only created.
fn channel_groups<'a>(rest: &[&'a Change], risky: &[&'a Change]) -> Vec<Group<'a>> {
    let mut groups: Vec<Group<'a>> = Vec::new();
    for &ch in rest {
        let here = (ch.resource.target.as_str(), ch.channel.as_str());
        match groups.last_mut() {
            Some(g) if (g.target, g.channel) == here => g.changes.push(ch),
            _ => groups.push(Group {
                target: here.0,
                channel: here.1,
                changes: vec![ch],
                risky: risky
                    .iter()
                    .filter(|r| (r.resource.target.as_str(), r.channel.as_str()) == here)
                    .count(),
            }),
        }
    }
    groups.sort_by_key(|g| g.changes.iter().all(|ch| ch.action == Action::Create));
    groups
}

impl Group<'_> {
    /// `**channel** on target: counts`, the line a section opens with.
    fn heading(&self) -> String {
        format!(
            "\n**{}** on {}: {}\n",
            cell(self.channel),
            cell(self.target),
            self.counts()
        )
    }

    fn counts(&self) -> String {
        let creates = self
            .changes
            .iter()
            .filter(|ch| ch.action == Action::Create)
            .count();
        let updates = self.changes.len() - creates;
        let mut counts = Vec::new();
        if updates > 0 {
            counts.push(format!("{updates} to update"));
        }
        if creates > 0 {
            counts.push(format!("{creates} to create"));
        }
        if self.risky > 0 {
            counts.push(format!("{} under Needs attention", self.risky));
        }
        counts.join(", ")
    }

    /// The section: heading, the diagram if given, the table of changes.
    fn render(&self, diagram: Option<&str>, unit: UnitOf<'_>) -> String {
        let (creates, updates): (Vec<&Change>, Vec<&Change>) = self
            .changes
            .iter()
            .partition(|ch| ch.action == Action::Create);
        let counts = self.counts();
        let mut out = String::new();
        // With a diagram, the heading and the picture stay open, the tables below them.
        if let Some(d) = diagram {
            out.push_str(&self.heading());
            out.push_str(d);
            if !updates.is_empty() {
                out.push_str("\n| action | resource | details |\n|---|---|---|\n");
                out.push_str(&self.update_rows(&updates, unit));
            }
            if !creates.is_empty() {
                out.push_str(&created(&creates, unit));
            }
            return out;
        }
        if updates.is_empty() {
            let _ = write!(
                out,
                "\n<details><summary><b>{}</b> on {}: {counts}</summary>\n\n",
                html(self.channel),
                html(self.target)
            );
            out.push_str(&creates_table(&creates, unit));
            out.push_str("\n</details>\n");
            return out;
        }
        let _ = write!(
            out,
            "\n**{}** on {}: {counts}\n\n| action | resource | details |\n|---|---|---|\n",
            cell(self.channel),
            cell(self.target)
        );
        out.push_str(&self.update_rows(&updates, unit));
        if !creates.is_empty() {
            out.push_str(&created(&creates, unit));
        }
        out
    }

    /// One table row per update, then the long fields' diffs.
    fn update_rows(&self, updates: &[&Change], unit: UnitOf<'_>) -> String {
        let mut out = String::new();
        let mut diffs = String::new();
        for ch in updates {
            let _ = writeln!(
                out,
                "| {} {} | {} | {} |",
                symbol(ch.action),
                ch.action.as_str(),
                code(&ch.resource.to_string()),
                cell(&details(ch, unit).join("<br>"))
            );
            diffs.push_str(&large_diffs(ch));
        }
        out.push_str(&diffs);
        out
    }
}

/// The creates of a section, collapsed.
fn created(creates: &[&Change], unit: UnitOf<'_>) -> String {
    format!(
        "\n<details><summary>{} to create</summary>\n\n{}\n</details>\n",
        creates.len(),
        creates_table(creates, unit)
    )
}

/// Creates: the resource and every setting it gets (collapsed, so long values stay inline).
fn creates_table(creates: &[&Change], unit: UnitOf<'_>) -> String {
    let mut out = String::from("| resource | settings |\n|---|---|\n");
    for ch in creates {
        let mut settings: Vec<String> = ch.fields.iter().map(|f| field(ch, f, unit)).collect();
        if let Some(d) = &ch.discard {
            settings.insert(0, discard(d));
        }
        let _ = writeln!(
            out,
            "| {} | {} |",
            code(&ch.resource.to_string()),
            cell(&settings.join("<br>"))
        );
    }
    out
}

/// A change's details cell: why it cannot be made, that it was pruned, what it drops, then
/// each field (a long one points at its diff below the table).
fn details(ch: &Change, unit: UnitOf<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = &ch.reason {
        out.push(r.clone());
    }
    if ch.pruned {
        out.push(format!("*pruned* ({})", super::render::PRUNED));
    }
    if let Some(w) = drop_warning(ch) {
        out.push(format!("⚠️ {w}"));
    }
    if let Some(d) = &ch.discard {
        out.push(discard(d));
    }
    for f in &ch.fields {
        if ch.action != Action::Create && is_large(f) {
            out.push(format!("{}: see the diff below", code(&f.key)));
        } else {
            out.push(field(ch, f, unit));
        }
    }
    out
}

/// `` `key`: `new` `` for a create, `` `key`: `old` → `new` `` otherwise; a duration as people
/// write it, with the raw value and its unit beside it: `` `retention.ms`: 1d → 7d (`86400000`
/// → `604800000` ms) ``.
fn field(ch: &Change, f: &FieldChange, unit: UnitOf<'_>) -> String {
    let key = code(&f.key);
    let raw = |v: Option<&Value>| code(&show(v));
    match (ch.action, unit(ch, &f.key)) {
        (Action::Create, None) => format!("{key}: {}", raw(f.new.as_ref())),
        (Action::Create, Some(u)) => format!(
            "{key}: {} ({} {})",
            as_written(f.new.as_ref(), u),
            raw(f.new.as_ref()),
            u.symbol()
        ),
        (_, None) => format!("{key}: {} → {}", raw(f.old.as_ref()), raw(f.new.as_ref())),
        (_, Some(u)) => format!(
            "{key}: {} → {} ({} → {} {})",
            as_written(f.old.as_ref(), u),
            as_written(f.new.as_ref(), u),
            raw(f.old.as_ref()),
            raw(f.new.as_ref()),
            u.symbol()
        ),
    }
}

/// A stored duration as people write it (`2592000` seconds → `30d`); anything that is not a
/// whole, non-negative number (Kafka's `-1`, "forever") as it is.
fn as_written(v: Option<&Value>, unit: TimeUnit) -> String {
    match v {
        None => "(absent)".into(),
        Some(v) => v
            .as_u64()
            .and_then(|n| n.checked_mul(unit.millis()))
            .map_or_else(|| v.to_string(), |ms| Duration::from_millis(ms).to_string()),
    }
}

/// The text diffs of a change's long fields, each collapsed.
fn large_diffs(ch: &Change) -> String {
    let mut out = String::new();
    if ch.action == Action::Create {
        return out;
    }
    for f in ch.fields.iter().filter(|f| is_large(f)) {
        let diff = text_diff(f);
        let fence = fence(&diff);
        let _ = write!(
            out,
            "\n<details><summary>{} · {}</summary>\n\n{fence}diff\n{diff}{fence}\n</details>\n",
            html(&ch.resource.to_string()),
            html(&f.key)
        );
    }
    out
}

/// A code fence longer than any run of backticks in `text`, so no value can close it.
fn fence(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// Inline code that a backtick in `s` cannot end early.
fn code(s: &str) -> String {
    if s.contains('`') {
        format!("`` {s} ``")
    } else {
        format!("`{s}`")
    }
}

/// Text for a table cell: a `|` would end the cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Text from a spec or a finding, escaped so it stays words (no emphasis, link, code or tag it
/// could make).
fn words(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c if c.is_control() => out.push(' '),
            c if c.is_ascii_punctuation()
                && !matches!(c, '.' | ',' | '-' | ':' | '/' | '\'' | '|') =>
            {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// `*discarded on purpose after 3d*: reason (owner: team)`, the spec's words escaped so they
/// stay words (no emphasis, link or tag a reason could make).
fn discard(d: &crate::spec::resolve::DiscardResolved) -> String {
    let mut out = format!("*discarded on purpose after {}*", d.after);
    match &d.reason {
        Some(r) => {
            out.push_str(": ");
            out.push_str(&words(r));
        }
        None => out.push_str(" (no reason written)"),
    }
    if let Some(o) = &d.owner {
        out.push_str(&format!(" (owner: {})", words(o)));
    }
    out
}

/// Text inside an HTML element (`<summary>` takes no markdown).
fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use serde_json::json;

    use super::*;
    use crate::graph::ChannelGraph;
    use crate::plan::Note;
    use crate::resource::{Desired, Kind, ResourceId, Role};
    use crate::spec::model::Backend;

    /// The comment as `dlqctl plan --format markdown` asks for it: the backends' units.
    fn markdown(plan: &Plan) -> String {
        super::markdown(plan, &crate::backend::duration_unit)
    }

    /// [`markdown_within`] with the pictures drawn as `dlqctl plan` draws them.
    fn markdown_within(plan: &Plan, graphs: &[ChannelGraph], limit: usize) -> String {
        let charts = crate::engine::plan::charts(graphs, plan);
        super::markdown_within(
            plan,
            &charts,
            &Digest::default(),
            &crate::backend::duration_unit,
            limit,
        )
    }

    fn markdown_with(plan: &Plan, graphs: &[ChannelGraph]) -> String {
        markdown_within(plan, graphs, LIMIT)
    }

    /// One change, as the diff and the backends' rules make it (pure values, no server).
    struct Mk {
        backend: Backend,
        kind: Kind,
        target: &'static str,
        channel: &'static str,
        name: &'static str,
    }

    impl Mk {
        fn change(
            &self,
            action: Action,
            fields: &[(&str, Option<Value>, Option<Value>)],
            messages: Option<u64>,
        ) -> Change {
            Change {
                resource: ResourceId {
                    target: self.target.into(),
                    backend: self.backend,
                    kind: self.kind,
                    scope: if self.backend == Backend::Rabbitmq {
                        "/".into()
                    } else {
                        String::new()
                    },
                    name: self.name.into(),
                },
                channel: self.channel.into(),
                role: Role::Main,
                action,
                fields: fields
                    .iter()
                    .map(|(k, old, new)| FieldChange {
                        key: (*k).into(),
                        old: old.clone(),
                        new: new.clone(),
                    })
                    .collect(),
                desired: fields
                    .iter()
                    .filter_map(|(k, _, new)| Some(((*k).to_owned(), new.clone()?)))
                    .collect(),
                messages,
                reason: None,
                destructive: None,
                pruned: false,
                discard: None,
            }
        }
    }

    fn plan_of(changes: Vec<Change>, notes: Vec<Note>) -> Plan {
        Plan::new(
            changes,
            notes,
            7,
            BTreeMap::new(),
            Vec::new(),
            &HashSet::new(),
        )
    }

    /// A small plan with every kind of change: create, update, replace, delete (one pruned),
    /// a destructive update and an impossible one, durations on every backend, a long field.
    fn mixed() -> Plan {
        let sqs = |kind, name| Mk {
            backend: Backend::Sqs,
            kind,
            target: "aws-prod",
            channel: "payments",
            name,
        };
        let rabbit = |kind, name| Mk {
            backend: Backend::Rabbitmq,
            kind,
            target: "rabbit",
            channel: "orders",
            name,
        };
        let kafka = |name| Mk {
            backend: Backend::Kafka,
            kind: Kind::Topic,
            target: "kafka",
            channel: "inventory",
            name,
        };
        let mut lower = sqs(Kind::Queue, "payments").change(
            Action::Update,
            &[
                (
                    "MessageRetentionPeriod",
                    Some(json!(345600)),
                    Some(json!(259200)),
                ),
                (
                    "RedrivePolicy.maxReceiveCount",
                    Some(json!(9)),
                    Some(json!(5)),
                ),
            ],
            Some(42),
        );
        crate::backend::refine(&mut lower);
        let age = sqs(Kind::Alarm, "payments-dlq-oldest-age").change(
            Action::Create,
            &[
                (
                    "MetricName",
                    None,
                    Some(json!("ApproximateAgeOfOldestMessage")),
                ),
                ("Period", None, Some(json!(60))),
                ("Threshold", None, Some(json!(1800))),
            ],
            None,
        );
        let described = sqs(Kind::Alarm, "payments-dlq-depth").change(
            Action::Update,
            &[(
                "AlarmDescription",
                Some(json!("dlqctl channel payments: messages wait in the dead-letter queue")),
                Some(json!("dlqctl channel payments: messages wait in the dead-letter queue; runbook: https://runbooks.example.com/dlq")),
            )],
            None,
        );
        let ttl = rabbit(Kind::Policy, "orders.retry").change(
            Action::Update,
            &[(
                "definition.message-ttl",
                Some(json!(9000)),
                Some(json!(5000)),
            )],
            None,
        );
        let rebuilt = rabbit(Kind::Queue, "orders.dlq").change(
            Action::Replace,
            &[(
                "arguments.x-message-ttl",
                Some(json!(1_209_600_000_u64)),
                Some(json!(2_592_000_000_u64)),
            )],
            Some(3),
        );
        let mut pruned = rabbit(Kind::Policy, "orders.old").change(Action::Delete, &[], None);
        pruned.pruned = true;
        let retry = rabbit(Kind::Queue, "orders.retry-10s").change(
            Action::Create,
            &[
                ("durable", None, Some(json!(true))),
                ("arguments.x-message-ttl", None, Some(json!(10000))),
            ],
            None,
        );
        let created = kafka("inventory.events-dlt").change(
            Action::Create,
            &[
                ("config.retention.ms", None, Some(json!(2_592_000_000_u64))),
                ("partitions", None, Some(json!(3))),
            ],
            None,
        );
        let longer = kafka("inventory.events").change(
            Action::Update,
            &[(
                "config.retention.ms",
                Some(json!(86_400_000)),
                Some(json!(604_800_000)),
            )],
            Some(120),
        );
        let gone = kafka("inventory.events-retry-old").change(Action::Delete, &[], Some(12));
        let mut fewer = kafka("inventory.events-retry").change(
            Action::Impossible,
            &[("partitions", Some(json!(6)), Some(json!(3)))],
            Some(0),
        );
        fewer.reason = Some("Kafka cannot remove partitions (6 → 3)".into());
        let note = Note {
            resource: rebuilt.resource.clone(),
            message: "unmanaged setting, left as is: arguments.x-max-length = 1000".into(),
        };
        plan_of(
            vec![
                lower, age, described, ttl, rebuilt, pruned, retry, created, longer, gone, fewer,
            ],
            vec![note],
        )
    }

    #[test]
    fn a_mixed_plan_shows_risky_changes_first_with_the_flags_apply_needs() {
        let md = markdown(&mixed());
        insta::assert_snapshot!("markdown-mixed", md);
    }

    /// Every change in the comment is one row of a table headed `action` or `resource`.
    fn rows(md: &str) -> usize {
        let mut n = 0;
        let mut counting = false;
        for l in md.lines() {
            if l.starts_with("| action |") || l.starts_with("| resource |") {
                counting = true;
            } else if !l.starts_with('|') {
                counting = false;
            } else if counting && l.starts_with("| ") {
                n += 1;
            }
        }
        n
    }

    /// The comment's structure survived the cut: every element closed, every fence closed,
    /// within the limit, and the last line counts exactly what was left out.
    fn assert_whole(md: &str, plan: &Plan, limit: usize) {
        assert!(width(md) <= limit, "{} > {limit}", width(md));
        assert!(md.starts_with(MARKER), "{md}");
        assert_eq!(
            md.matches("<details>").count(),
            md.matches("</details>").count(),
            "{md}"
        );
        let fences = md.lines().filter(|l| l.starts_with("```")).count();
        assert_eq!(fences % 2, 0, "{md}");
        let left = plan.changes.len() - rows(md);
        let last = md.lines().last().unwrap_or_default();
        if left == 0 {
            assert!(!md.contains("more change"), "{md}");
        } else {
            let noun = if left == 1 { "change" } else { "changes" };
            assert_eq!(
                last,
                format!("{left} more {noun}: run `dlqctl plan` or see the JSON plan.")
            );
        }
    }

    /// `n` new channels, a third on each backend, made from the examples as `plan` makes them
    /// for channels that do not exist yet (pure: desired resources diffed with nothing).
    fn new_channels(n: usize) -> Plan {
        new_channels_and_graphs(n).0
    }

    /// [`new_channels`], with the channels' pictures.
    fn new_channels_and_graphs(n: usize) -> (Plan, Vec<ChannelGraph>) {
        let targets =
            crate::spec::load::load_str("dlqctl.yaml", include_str!("../../examples/dlqctl.yaml"));
        let targets = &targets.targets[0].value.targets;
        let examples = [
            include_str!("../../examples/payments-sqs.yaml"),
            include_str!("../../examples/orders-rabbitmq.yaml"),
            include_str!("../../examples/inventory-kafka.yaml"),
        ]
        .map(|text| {
            let ws = crate::spec::load::load_str("c.yaml", text);
            ws.channels[0].value.clone()
        });
        let mut changes = Vec::new();
        let mut graphs = Vec::new();
        for i in 0..n {
            let mut channel = examples[i % 3].clone();
            channel.metadata.name = format!("{}.{i:05}", channel.metadata.name);
            let target = channel.spec.target.clone().expect("a target");
            let resolved = crate::spec::resolve::resolve(&channel, &target, &targets[&target])
                .expect("resolves");
            changes.extend(
                crate::backend::desired(&resolved)
                    .iter()
                    .filter_map(|d: &Desired| crate::plan::diff(d, None)),
            );
            graphs.push(ChannelGraph::build(&resolved));
        }
        (plan_of(changes, Vec::new()), graphs)
    }

    /// The fenced diagrams of a comment.
    fn diagrams(md: &str) -> usize {
        md.matches("```mermaid\n").count()
    }

    #[test]
    fn each_channel_section_opens_with_its_diagram_coloured_by_what_the_plan_does() {
        let (mut plan, graphs) = new_channels_and_graphs(3);
        let sqs = "payments-transactions-pending.00000";
        let rabbit = "orders.00001";
        // The SQS channel exists already: its DLQ's retention changes and an old queue goes.
        // The RabbitMQ one too: its main queue is rebuilt, its only change (under "Needs
        // attention", so its section holds the diagram alone).
        plan.changes.retain(|c| {
            (c.channel != sqs || (c.role == Role::DeadLetter))
                && (c.channel != rabbit || (c.role == Role::Main && c.resource.kind == Kind::Queue))
        });
        let mut gone = None;
        for c in &mut plan.changes {
            if c.channel == sqs {
                c.action = Action::Update;
                c.fields = vec![FieldChange {
                    key: "MessageRetentionPeriod".into(),
                    old: Some(json!(345_600)),
                    new: Some(json!(1_209_600)),
                }];
                let mut old = c.clone();
                old.action = Action::Delete;
                old.resource.name = format!("{sqs}-retry");
                old.fields.clear();
                old.messages = Some(0);
                gone = Some(old);
            }
            if c.channel == rabbit {
                c.action = Action::Replace;
                c.fields = vec![FieldChange {
                    key: "arguments.x-queue-type".into(),
                    old: None,
                    new: Some(json!("quorum")),
                }];
                c.messages = Some(3);
            }
        }
        plan.changes.extend(gone);
        let plan = plan_of(plan.changes, Vec::new());
        let md = markdown_with(&plan, &graphs);
        insta::assert_snapshot!("markdown-diagrams", md);
        assert_eq!(diagrams(&md), 3, "{md}");
        assert_whole(&md, &plan, LIMIT);
        assert_eq!(rows(&md), plan.changes.len());
        for class in ["create", "update", "replace", "delete"] {
            assert!(md.contains(&format!("classDef {class} ")), "{md}");
        }
        // Without the pictures, the comment is what it always was.
        assert_eq!(diagrams(&markdown(&plan)), 0);
    }

    #[test]
    fn diagrams_are_dropped_before_any_change_whatever_the_budget() {
        let (plan, graphs) = new_channels_and_graphs(12);
        let everything = markdown_within(&plan, &graphs, 1_000_000);
        assert_eq!(diagrams(&everything), 12);
        for limit in (2_000..40_000).step_by(499) {
            let with = markdown_within(&plan, &graphs, limit);
            let without = markdown_within(&plan, &[], limit);
            assert_whole(&with, &plan, limit);
            assert_eq!(rows(&with), rows(&without), "limit {limit}\n{with}");
            let drawn = diagrams(&with);
            if drawn < 12 && rows(&with) == plan.changes.len() {
                assert!(
                    with.contains("left out to keep every change within the comment's size"),
                    "limit {limit}\n{with}"
                );
            }
        }
    }

    #[test]
    fn two_hundred_new_channels_leave_the_diagrams_out_not_changes() {
        let (plan, graphs) = new_channels_and_graphs(200);
        let with = markdown_with(&plan, &graphs);
        // Changes are cut even without diagrams: the comment is the one without them.
        assert_eq!(with, markdown(&plan));
        assert_whole(&with, &plan, LIMIT);
        assert_eq!(diagrams(&with), 0);
    }

    #[test]
    fn two_hundred_new_channels_fit_in_one_comment_and_say_how_many_changes_are_left_out() {
        let plan = new_channels(200);
        let md = markdown(&plan);
        // To look at it rendered (see the README's pull-request section).
        if let Some(path) = std::env::var_os("DLQCTL_MARKDOWN_200") {
            std::fs::write(path, &md).expect("writes the comment");
        }
        assert_whole(&md, &plan, LIMIT);
        assert!(md.ends_with("or see the JSON plan.\n"), "{md}");
        // Whole channels only, each collapsed.
        assert!(rows(&md) > 100, "{}", rows(&md));
    }

    #[test]
    fn two_thousand_new_channels_fit_in_one_comment_and_say_how_many_changes_are_left_out() {
        let plan = new_channels(2000);
        let md = markdown(&plan);
        assert_whole(&md, &plan, LIMIT);
        assert!(md.ends_with("or see the JSON plan.\n"), "{md}");
    }

    #[test]
    fn two_thousand_deletes_fill_the_attention_table_and_nothing_else() {
        let mut plan = new_channels(2000);
        for c in &mut plan.changes {
            c.action = Action::Delete;
            c.fields.clear();
            c.messages = Some(1);
        }
        let plan = plan_of(plan.changes, Vec::new());
        let md = markdown(&plan);
        assert_whole(&md, &plan, LIMIT);
        assert!(
            md.contains(
                "refuses these changes unless it is given `--allow-delete --allow-message-loss`"
            ),
            "{md}"
        );
        assert!(!md.contains("Changes by channel"), "{md}");
    }

    #[test]
    fn whatever_the_budget_nothing_is_cut_inside_an_element_and_the_rest_is_counted() {
        let mut plan = new_channels(30);
        let small = mixed();
        plan.changes.extend(small.changes);
        plan.notes.extend(small.notes);
        let plan = plan_of(plan.changes, plan.notes);
        for limit in (4_000..40_000).step_by(997) {
            let md = markdown_within(&plan, &[], limit);
            assert_whole(&md, &plan, limit);
        }
        // With room for everything, everything is there.
        let md = markdown_within(&plan, &[], 1_000_000);
        assert_whole(&md, &plan, 1_000_000);
        assert_eq!(rows(&md), plan.changes.len());
        assert!(md.contains("Notes (no action)"), "{md}");
    }

    /// The lint warnings of four channels: three with one rule, one with another (whose
    /// message quotes the spec, markup and all).
    fn four_warnings() -> Digest {
        let mut diags: Vec<crate::diag::Diagnostic> = ["a", "b", "c"]
            .iter()
            .map(|c| {
                crate::diag::Diagnostic::warning(
                    "deadletter/discard-undeclared",
                    format!("payments-{c}: SQS deletes dead letters after 7d"),
                )
            })
            .collect();
        diags.push(crate::diag::Diagnostic::warning(
            "alarms/missing",
            "the dead-letter queue `payments-d-dlq` has no alarm: <b>nobody</b> is told",
        ));
        Digest::of(&diags, |d| {
            crate::diag::digest::Place::Channel(
                d.message
                    .split(':')
                    .next()
                    .filter(|c| c.starts_with("payments-"))
                    .unwrap_or("payments-d")
                    .to_owned(),
            )
        })
    }

    #[test]
    fn lint_warnings_are_one_collapsed_line_per_rule_after_the_summary() {
        let plan = mixed();
        let warnings = four_warnings();
        let md = super::markdown_with(&plan, &[], &warnings, &crate::backend::duration_unit);
        insta::assert_snapshot!("markdown-warnings", md);
        let summary = md.find("**Plan:").expect("the summary");
        let folded = md
            .find("<summary>⚠️ 4 lint warnings")
            .expect("the warnings");
        let attention = md.find("Needs attention").expect("the risky changes");
        assert!(summary < folded && folded < attention, "{md}");
        assert!(
            md.contains("- `deadletter/discard-undeclared` ×3 on channels `payments-a`, `payments-b`, `payments-c`\n"),
            "{md}"
        );
        // The one warning of its rule is said whole, its markup kept as words.
        assert!(
            md.contains("- `alarms/missing` on channel `payments-d`: the dead-letter queue \\`payments-d-dlq\\` has no alarm: &lt;b&gt;nobody&lt;/b&gt; is told\n"),
            "{md}"
        );
        // Without warnings, the comment is what it always was.
        assert_eq!(
            super::markdown_with(
                &plan,
                &[],
                &Digest::default(),
                &crate::backend::duration_unit
            ),
            markdown(&plan)
        );
    }

    #[test]
    fn whatever_the_budget_the_warnings_stay_whole_and_the_changes_are_counted() {
        let mut plan = new_channels(30);
        plan.changes.extend(mixed().changes);
        let plan = plan_of(plan.changes, Vec::new());
        let warnings = four_warnings();
        let unit = &crate::backend::duration_unit;
        // The smallest comment there is: the head and the closing lines, nothing fitting.
        let floor = width(&super::markdown_within(
            &plan,
            &[],
            &Digest::default(),
            unit,
            0,
        ));
        let mut cut = 0;
        for limit in (floor..floor + 1_500)
            .step_by(11)
            .chain((floor + 1_500..20_000).step_by(373))
        {
            let md = super::markdown_within(
                &plan,
                &[],
                &warnings,
                &crate::backend::duration_unit,
                limit,
            );
            assert_whole(&md, &plan, limit);
            // Each rule's line is there whole, or counted.
            let Some(at) = md.find("lint warnings") else {
                continue;
            };
            let element = &md[at..md[at..].find("</details>").map_or(md.len(), |e| at + e)];
            let lines = element.lines().filter(|l| l.starts_with("- `")).count();
            if lines < warnings.rules.len() {
                cut += 1;
                let left = warnings.rules.len() - lines;
                assert!(
                    md.contains(&format!("- and the warnings of {left} more rule")),
                    "limit {limit}\n{md}"
                );
            }
        }
        assert!(
            cut > 0,
            "no budget cut the warnings: the test misses its case"
        );
    }

    #[test]
    fn an_emoji_counts_as_github_counts_it() {
        assert_eq!(width("⚠️"), 2);
        assert_eq!(width("😀"), 2);
        assert_eq!(width("→"), 1);
    }

    #[test]
    fn durations_are_shown_as_people_write_them_beside_the_stored_value() {
        let md = markdown(&mixed());
        for want in [
            "`MessageRetentionPeriod`: 4d → 3d (`345600` → `259200` s)",
            "`definition.message-ttl`: 9s → 5s (`9000` → `5000` ms)",
            "`arguments.x-message-ttl`: 14d → 30d (`1209600000` → `2592000000` ms)",
            "`config.retention.ms`: 1d → 7d (`86400000` → `604800000` ms)",
            "`config.retention.ms`: 30d (`2592000000` ms)",
            "`Threshold`: 30m (`1800` s)",
            "`Period`: 1m (`60` s)",
        ] {
            assert!(md.contains(want), "{want}\n{md}");
        }
        // Not a duration: shown as it is.
        assert!(
            md.contains("`RedrivePolicy.maxReceiveCount`: `9` → `5`"),
            "{md}"
        );
    }

    #[test]
    fn the_flags_shown_are_the_flags_apply_asks_for() {
        let plan = mixed();
        for c in &plan.changes {
            let alone = plan_of(vec![c.clone()], Vec::new());
            let refused =
                crate::engine::apply::refusals(&alone, &crate::engine::apply::Guards::default());
            let mut asked: Vec<&str> = refused
                .iter()
                .flat_map(|r| r.split_whitespace())
                .map(|w| w.trim_end_matches([';', ',', '.']))
                .filter(|w| w.starts_with("--allow-"))
                .collect();
            asked.sort_unstable();
            asked.dedup();
            let mut shown = c.allow_flags();
            shown.sort_unstable();
            assert_eq!(asked, shown, "{}: {refused:?}", c.resource);
        }
    }

    #[test]
    fn an_empty_plan_is_the_marker_and_the_summary() {
        let md = markdown(&plan_of(Vec::new(), Vec::new()));
        assert_eq!(
            md,
            "<!-- dlqctl-plan -->\n### dlqctl plan\n\n**No changes. Live state matches the specs (7 resources checked).**\n"
        );
    }

    #[test]
    fn a_backtick_or_a_pipe_in_a_value_cannot_break_the_table() {
        let c = Mk {
            backend: Backend::Sqs,
            kind: Kind::Alarm,
            target: "t",
            channel: "c",
            name: "a",
        }
        .change(
            Action::Update,
            &[("AlarmDescription", Some(json!("a`b|c")), Some(json!("x")))],
            None,
        );
        let md = markdown(&plan_of(vec![c], Vec::new()));
        assert!(md.contains(r#"`` "a`b\|c" ``"#), "{md}");
    }

    #[test]
    fn a_discard_reason_stays_words_in_the_comment() {
        let d = crate::spec::resolve::DiscardResolved {
            after: crate::spec::duration::Duration::from_secs(3 * 86_400),
            reason: Some("*late* quotes | <b>worthless</b>\n[see](http://x)".into()),
            owner: Some("team_pricing".into()),
        };
        assert_eq!(
            discard(&d),
            "*discarded on purpose after 3d*: \\*late\\* quotes | &lt;b&gt;worthless&lt;/b&gt; \\[see\\]\\(http://x\\) (owner: team\\_pricing)"
        );
        let unwritten = crate::spec::resolve::DiscardResolved {
            reason: None,
            owner: None,
            ..d
        };
        assert_eq!(
            discard(&unwritten),
            "*discarded on purpose after 3d* (no reason written)"
        );
    }
}
