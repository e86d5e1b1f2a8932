//! A status report, shown four ways: for a terminal, for a pull-request or incident comment
//! (markdown), as a versioned JSON document (docs/status.md), and as metrics in the text
//! exposition format (OpenMetrics, which Prometheus and node_exporter's textfile collector
//! read). The first three are snapshot-tested; `promtool check metrics` checks the last.
//!
//! Every string that came from a message or a server went through [`super::safe`] before it got
//! here; the formats add only their own quoting (Markdown cells, label values).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::age::age;
use super::{
    Body, ChannelStatus, DeadLetterReport, Depth, FailureGroup, Flow, Measure, Report, Sample, cut,
};
use crate::printer::{Printer, Style};
use crate::spec::resolve::DeadLetterRole;

/// The JSON document's `kind` and version.
pub const KIND: &str = "dlqctl/status";
pub const FORMAT_VERSION: u32 = 1;

fn count(n: Option<u64>) -> String {
    n.map_or_else(|| "?".to_owned(), |n| n.to_string())
}

/// `5 waiting (ready 4, in flight 1, delayed 0)`.
fn depth_line(d: &Depth) -> String {
    if !d.exists {
        return "does not exist".to_owned();
    }
    let what = match d.measure {
        Measure::Waiting => "waiting",
        Measure::Retained => "retained (no consumerGroup in the spec)",
    };
    let mut parts = Vec::new();
    for (label, v) in [
        ("ready", d.ready),
        ("in flight", d.in_flight),
        ("delayed", d.delayed),
    ] {
        if let Some(v) = v {
            parts.push(format!("{label} {v}"));
        }
    }
    let n = if d.lower_bound {
        format!("at least {}", count(d.total))
    } else {
        count(d.total)
    };
    if parts.is_empty() {
        format!("{n} {what}")
    } else {
        format!("{n} {what} ({})", parts.join(", "))
    }
}

/// `1,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A window's length: `5m`, `1h`, `90s`, `1h 30m`.
fn span(secs: u64) -> String {
    let parts = [(86_400, "d"), (3600, "h"), (60, "m"), (1, "s")];
    let mut left = secs;
    let mut out = Vec::new();
    for (unit, name) in parts {
        if left >= unit {
            out.push(format!("{}{name}", left / unit));
            left %= unit;
        }
    }
    if out.is_empty() {
        "0s".to_owned()
    } else {
        out.join(" ")
    }
}

/// `1.00% (10 of 1,000 in the last 5m)`, or what is missing; `None` when the backend
/// gave no window (it cannot count the flow).
fn rate_line(f: &Flow) -> Option<String> {
    let w = f.window.as_ref()?;
    let last = span(w.seconds);
    Some(match (w.dead_lettered, w.source) {
        (Some(d), Some(s)) if d > s => format!(
            "none: more dead-lettered ({}) than entered the source ({}) in the last {last}: \
             these entered earlier (a backlog, a retry loop or a redrive)",
            thousands(d),
            thousands(s)
        ),
        (Some(d), Some(s)) if s > 0 => format!(
            "{:.2}% ({} of {} in the last {last})",
            d as f64 * 100.0 / s as f64,
            thousands(d),
            thousands(s)
        ),
        (Some(d), Some(_)) => {
            format!(
                "none: no message entered the source in the last {last} ({} dead-lettered)",
                thousands(d)
            )
        }
        (None, _) => format!("unknown: the dead-lettered count of the last {last} is not known"),
        (_, None) => format!("unknown: the source's count of the last {last} is not known"),
    })
}

/// `poison ≈6.5 · other ≈3.5 (estimate: the shares of the 100 read)`.
fn class_rate_line(d: &DeadLetterReport) -> Option<String> {
    if d.by_class_in_window.is_empty() {
        return None;
    }
    let mut v: Vec<(&String, &f64)> = d.by_class_in_window.iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    let parts: Vec<String> = v.iter().map(|(c, n)| format!("{c} ≈{n}")).collect();
    Some(format!(
        "{} (estimate: each class's share of the {} read × the window's dead letters)",
        parts.join(" · "),
        d.sampled
    ))
}

fn classes(by: &BTreeMap<String, u64>) -> String {
    let mut v: Vec<(&String, &u64)> = by.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn read_line(d: &DeadLetterReport) -> String {
    match &d.selected {
        // `--where`/`--group`: what matched, of what was read.
        Some(s) if d.depth.total == Some(s.read) => {
            format!("{} chosen of all {} read", s.matched, s.read)
        }
        Some(s) => format!(
            "{} chosen of {} read, of {}",
            s.matched,
            s.read,
            count(d.depth.total)
        ),
        None if d.exact => format!("all {} read", d.sampled),
        None => format!("{} of {} read", d.sampled, count(d.depth.total)),
    }
}

/// `--where failed on 3 messages (not chosen; the first, m-1: cannot index <str> with <str>)`.
fn where_failures_line(d: &DeadLetterReport) -> Option<String> {
    let f = d.selected.as_ref()?.failures.as_ref()?;
    Some(format!(
        "--where failed on {} message{} (not chosen; the first, {}: {})",
        f.count,
        plural(f.count as usize),
        f.first_id,
        f.first_error
    ))
}

/// The time to resolution, as a line: `median 2h 5m · p90 1d 3h · 42 messages in 3 runs,
/// last 7d (journal)`.
fn resolution_line(r: &super::resolution::Resolution) -> String {
    let time = |s: Option<u64>| s.map_or_else(|| "unknown".to_owned(), |s| age(s as f64));
    let mut line = format!(
        "median {} · p90 {} · {} message{} in {} run{}, last {}",
        time(r.p50_seconds),
        time(r.p90_seconds),
        r.messages,
        if r.messages == 1 { "" } else { "s" },
        r.runs,
        if r.runs == 1 { "" } else { "s" },
        if r.window_seconds.is_multiple_of(86_400) {
            format!("{}d", r.window_seconds / 86_400)
        } else {
            age(r.window_seconds as f64)
        }
    );
    if r.unknown > 0 {
        let _ = write!(line, " ({} more with no dead-lettered time)", r.unknown);
    }
    if !r.exact {
        line.push_str(" (counting messages that did not leave for good: not removed, or back)");
    }
    line
}

fn oldest_line(d: &DeadLetterReport) -> Option<String> {
    if d.oldest_age_basis == Some(super::AgeBasis::Unknown) {
        return Some("unknown (see the note)".to_owned());
    }
    let a = d.oldest_age_seconds?;
    let since = d
        .oldest_age_since
        .filter(|s| *s != "first-seen")
        .map(|s| format!("since {s}"));
    let basis = d.oldest_age_basis.map(|b| match b {
        super::AgeBasis::Metric => "CloudWatch ApproximateAgeOfOldestMessage",
        super::AgeBasis::Head => "the head of the queue",
        super::AgeBasis::All => "every message read",
        super::AgeBasis::Sample => "the oldest of those read; older ones may wait",
        super::AgeBasis::FirstSeen => {
            "at least: since the exporter first saw it; no message carries a time"
        }
        super::AgeBasis::Unknown => "unknown",
    });
    let detail: Vec<String> = since.into_iter().chain(basis.map(str::to_owned)).collect();
    Some(format!("{} ({})", age(a), detail.join("; ")))
}

fn body_text(b: &Body) -> String {
    match b {
        Body::Hidden { length } => format!("({length} bytes, hidden: --max-body 0)"),
        Body::Redacted { length } => format!(
            "({length} bytes, not shown: the target's redact.bodyPointers are set and the body is not whole JSON)"
        ),
        Body::Text {
            length,
            truncated,
            text,
        } => {
            if *truncated {
                format!("({length} bytes, cut at --max-body) {text}")
            } else {
                format!("({length} bytes) {text}")
            }
        }
        Body::Binary { length, hex_prefix } => {
            format!("(binary, {length} bytes) hex {hex_prefix}…")
        }
    }
}

fn sample_head(i: usize, s: &Sample) -> String {
    let mut line = format!("{}. {}", i + 1, s.error_class);
    if let Some(raw) = &s.raw_error_class {
        let _ = write!(line, " ({raw})");
    }
    let _ = write!(line, "  {}", s.id);
    if let Some(a) = s.age_seconds {
        let _ = write!(line, "  {} old", age(a));
    }
    if let Some(n) = s.attempts {
        let _ = write!(line, "  attempts {n}");
    }
    if let Some(src) = &s.source {
        let _ = write!(line, "  from {src}");
    }
    line
}

/// Failure groups shown in the human and markdown outputs; the JSON document has them all.
const GROUPS_SHOWN: usize = 10;
/// Characters of a group's message in the human and markdown tables.
const GROUP_MESSAGE: usize = 80;

/// `3 groups among all 300 read`, or `… among 100 of 5,000 read` (the scan did not cover
/// the DLQ: the groups are of the messages read).
fn groups_line(d: &DeadLetterReport, groups: &[FailureGroup]) -> String {
    let mut line = format!(
        "{} group{} among {}",
        groups.len(),
        plural(groups.len()),
        read_line(d)
    );
    if groups.len() > GROUPS_SHOWN {
        let _ = write!(
            line,
            "; the {GROUPS_SHOWN} largest shown (--format json lists all)"
        );
    }
    line
}

/// How long before `now_ms` a group was first or last seen: `2h 5m ago`, or `?`.
fn seen(t: Option<i64>, now_ms: i64) -> String {
    t.map_or_else(
        || "?".to_owned(),
        |t| format!("{} ago", age(((now_ms - t).max(0)) as f64 / 1000.0)),
    )
}

/// The group's message as a table shows it: cut, `(no message)` when it has none.
fn group_message(g: &FailureGroup) -> String {
    if g.message.is_empty() {
        "(no message)".to_owned()
    } else {
        cut(&g.message, GROUP_MESSAGE)
    }
}

/// The groups as aligned rows under a header, for a terminal.
fn groups_table(groups: &[FailureGroup], now_ms: i64) -> String {
    let mut rows = vec![[
        "id".to_owned(),
        "count".to_owned(),
        "class".to_owned(),
        "first seen".to_owned(),
        "last seen".to_owned(),
        "message".to_owned(),
    ]];
    for g in groups.iter().take(GROUPS_SHOWN) {
        rows.push([
            g.id.clone(),
            g.count.to_string(),
            g.class.clone(),
            seen(g.first_seen_ms, now_ms),
            seen(g.last_seen_ms, now_ms),
            group_message(g),
        ]);
    }
    let mut width = [0usize; 5];
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        let mut line = String::from("    ");
        for (i, (w, cell)) in width.iter().zip(r.iter()).enumerate() {
            let pad = w - cell.chars().count();
            // The count is a number: right-aligned.
            if i == 1 {
                let _ = write!(line, "{}{cell}  ", " ".repeat(pad));
            } else {
                let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
            }
        }
        line.push_str(&r[5]);
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// For people: one block per channel, then a summary line.
pub fn human(report: &Report, printer: &Printer) -> String {
    let mut out = String::new();
    for c in &report.channels {
        let head = format!(
            "{}  {} · target {} · {} {}",
            printer.paint(&c.channel, Style::Bold),
            c.backend.as_str(),
            c.target,
            c.role.shown(),
            c.dead_letter_name
        );
        if let Some(e) = &c.error {
            let _ = writeln!(
                out,
                "{head}  {} {e}\n",
                printer.paint("not read:", Style::Error)
            );
            continue;
        }
        let _ = writeln!(out, "{head}");
        let Some(d) = &c.dead_letter else { continue };
        let _ = writeln!(out, "  depth     {}", depth_line(&d.depth));
        if let Some(x) = &c.discard {
            let _ = writeln!(out, "  discard   {}", super::safe(&x.to_string()));
        }
        if let Some(o) = oldest_line(d) {
            let _ = writeln!(out, "  oldest    {o}");
        }
        if let Some(r) = rate_line(&d.flow) {
            let _ = writeln!(out, "  rate      {r}");
        }
        if let Some(r) = class_rate_line(d) {
            let _ = writeln!(out, "  by class  {r}");
        }
        if let Some(r) = &c.resolution {
            let _ = writeln!(out, "  resolved  {}", resolution_line(r));
        }
        if d.sampled > 0 || d.selected.is_some() {
            let _ = writeln!(
                out,
                "  classes   {}  ({})",
                classes(&d.by_error_class),
                read_line(d)
            );
        }
        if !d.by_source.is_empty() {
            let _ = writeln!(out, "  sources   {}", classes(&d.by_source));
        }
        if let Some(w) = where_failures_line(d) {
            let _ = writeln!(out, "  warning   {w}");
        }
        if let Some(groups) = d.groups.as_deref().filter(|g| !g.is_empty()) {
            let _ = writeln!(out, "  groups    {}", groups_line(d, groups));
            out.push_str(&groups_table(groups, report.generated_at_ms));
        }
        if !c.queues.is_empty() {
            let around: Vec<String> = c
                .queues
                .iter()
                .map(|q| {
                    if q.depth.exists {
                        format!("{} {} {}", q.role, q.name, count(q.depth.total))
                    } else {
                        format!("{} {} (does not exist)", q.role, q.name)
                    }
                })
                .collect();
            let _ = writeln!(out, "  around    {}", around.join(" · "));
        }
        if !d.samples.is_empty() {
            let _ = writeln!(
                out,
                "  samples   first {} of {}",
                d.samples.len(),
                count(d.depth.total)
            );
            for (i, s) in d.samples.iter().enumerate() {
                let _ = writeln!(out, "    {}", sample_head(i, s));
                if let Some(m) = &s.error_message {
                    let _ = writeln!(out, "       error    {m}");
                }
                if !s.headers.is_empty() {
                    let h: Vec<String> =
                        s.headers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                    let _ = writeln!(out, "       headers  {}", h.join("; "));
                }
                let _ = writeln!(out, "       body     {}", body_text(&s.body));
            }
        }
        for n in &d.notes {
            let _ = writeln!(out, "  {} {n}", printer.paint("note:", Style::Warning));
        }
        out.push('\n');
    }
    out.push_str(&summary(report));
    out.push('\n');
    out
}

/// `3 channels: 2 dead-letter queues hold 8 messages, 1 empty, 0 not read.`
pub fn summary(report: &Report) -> String {
    let (mut holding, mut messages, mut empty, mut missing, mut failed) = (0, 0u64, 0, 0, 0);
    let mut uncounted = 0;
    // A channel has an entry per destination of its dead letters (DLQ, invalid queue,
    // exception DLTs): the channels are counted once, the queues each.
    let channels: std::collections::BTreeSet<(&str, &str)> = report
        .channels
        .iter()
        .map(|c| (c.target.as_str(), c.channel.as_str()))
        .collect();
    for c in &report.channels {
        match (&c.error, &c.dead_letter) {
            (Some(_), _) => failed += 1,
            (None, Some(d)) if !d.depth.exists => missing += 1,
            // The backend cannot count (Pub/Sub over REST): neither empty nor holding.
            (None, Some(d)) if d.depth.total.is_none() => uncounted += 1,
            (None, Some(d)) if d.depth.total.is_some_and(|n| n > 0) => {
                holding += 1;
                messages += d.depth.total.unwrap_or(0);
            }
            _ => empty += 1,
        }
    }
    let mut line = format!(
        "{} channel{}: {holding} dead-letter queue{} hold{} {messages} message{}, {empty} empty",
        channels.len(),
        plural(channels.len()),
        plural(holding),
        if holding == 1 { "s" } else { "" },
        plural(messages as usize),
    );
    if missing > 0 {
        let _ = write!(line, ", {missing} not created yet");
    }
    if uncounted > 0 {
        let _ = write!(line, ", {uncounted} not countable");
    }
    let _ = write!(line, ", {failed} not read.");
    line
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Text in Markdown outside a code block (a table cell, a sample's line): every ASCII
/// punctuation character that Markdown or HTML could read as syntax is backslash-escaped, so
/// a payload cannot make a link, an image, emphasis or a tag; `<` and `>` become entities,
/// and `://` is broken so no autolink forms.
fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c if c.is_ascii_punctuation()
                && c != '.'
                && c != '-'
                && c != ','
                && c != ':'
                && c != '/' =>
            {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.replace("://", ":&#8203;//")
}

/// A fence longer than any run of backticks in `s`.
fn fence(s: &str) -> String {
    let longest = s.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// For a pull-request or incident comment.
pub fn markdown(report: &Report) -> String {
    let mut out = String::from("### Dead-letter queues\n\n");
    out.push_str(
        "| channel | backend | target | dead-letter queue | depth | oldest | rate | classes | read |\n",
    );
    out.push_str("|---|---|---|---|---:|---|---|---|---|\n");
    for c in &report.channels {
        let (depth, oldest, rate, cls, read) = match (&c.error, &c.dead_letter) {
            (Some(e), _) => (
                format!("not read: {e}"),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ),
            (None, Some(d)) if !d.depth.exists => (
                "does not exist".to_owned(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ),
            (None, Some(d)) => (
                count(d.depth.total),
                match d.oldest_age_basis {
                    Some(super::AgeBasis::Unknown) => "unknown".to_owned(),
                    _ => d.oldest_age_seconds.map(age).unwrap_or_default(),
                },
                rate_line(&d.flow).unwrap_or_default(),
                classes(&d.by_error_class),
                if d.sampled > 0 {
                    read_line(d)
                } else {
                    String::new()
                },
            ),
            (None, None) => Default::default(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&c.channel),
            c.backend.as_str(),
            cell(&c.target),
            cell(&shown_name(c)),
            cell(&depth),
            cell(&oldest),
            cell(&rate),
            cell(&cls),
            cell(&read)
        );
    }
    for c in &report.channels {
        if let Some(x) = &c.discard {
            let _ = write!(
                out,
                "\n{}: {}\n",
                cell(&c.channel),
                cell(&super::safe(&x.to_string()))
            );
        }
    }
    for c in &report.channels {
        if let Some(r) = &c.resolution {
            let _ = write!(
                out,
                "\n{}: time to resolution {}\n",
                cell(&c.channel),
                cell(&resolution_line(r))
            );
        }
    }
    for c in &report.channels {
        let Some(d) = &c.dead_letter else { continue };
        let Some(groups) = d.groups.as_deref().filter(|g| !g.is_empty()) else {
            continue;
        };
        let _ = write!(
            out,
            "\n**{}**: {}\n\n| group | count | class | first seen | last seen | message | sample ids |\n|---|---:|---|---|---|---|---|\n",
            cell(&heading(c)),
            cell(&groups_line(d, groups))
        );
        for g in groups.iter().take(GROUPS_SHOWN) {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | {} | {} |",
                g.id,
                g.count,
                cell(&g.class),
                seen(g.first_seen_ms, report.generated_at_ms),
                seen(g.last_seen_ms, report.generated_at_ms),
                cell(&group_message(g)),
                cell(&g.sample_ids.join(", "))
            );
        }
    }
    for c in &report.channels {
        let Some(d) = &c.dead_letter else { continue };
        if d.samples.is_empty() && d.notes.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "\n<details><summary>{}: {} sample{}</summary>\n\n",
            cell(&heading(c)),
            d.samples.len(),
            plural(d.samples.len())
        );
        for n in &d.notes {
            let _ = writeln!(out, "> {}\n", cell(n));
        }
        for (i, s) in d.samples.iter().enumerate() {
            let _ = writeln!(out, "{}\n", cell(&sample_head(i, s)));
            let mut block = String::new();
            if let Some(m) = &s.error_message {
                let _ = writeln!(block, "error: {m}");
            }
            for (k, v) in &s.headers {
                let _ = writeln!(block, "{k}: {v}");
            }
            let _ = writeln!(block, "body {}", body_text(&s.body));
            let f = fence(&block);
            let _ = write!(out, "{f}\n{block}{f}\n\n");
        }
        out.push_str("</details>\n");
    }
    let _ = write!(out, "\n{}\n", summary(report));
    out
}

/// The destination's name, with its role unless it is the DLQ: `orders.invalid (invalid)`.
/// A channel as a markdown section names it: the channel, and which destination when it is
/// not the dead-letter queue.
fn heading(c: &ChannelStatus) -> String {
    match c.role {
        DeadLetterRole::DeadLetter => c.channel.clone(),
        _ => format!("{} ({})", c.channel, shown_name(c)),
    }
}

fn shown_name(c: &ChannelStatus) -> String {
    match c.role {
        DeadLetterRole::DeadLetter => c.dead_letter_name.clone(),
        r => format!("{} ({r})", c.dead_letter_name),
    }
}

fn depth_json(d: &Depth) -> Value {
    let mut v = json!({
        "total": d.total,
        "ready": d.ready,
        "inFlight": d.in_flight,
        "delayed": d.delayed,
        "measure": d.measure,
        "exists": d.exists,
    });
    if d.lower_bound
        && let Some(o) = v.as_object_mut()
    {
        o.insert("lowerBound".into(), Value::Bool(true));
    }
    if let (Some(b), Some(o)) = (d.basis, v.as_object_mut()) {
        o.insert("basis".into(), Value::String(b.to_owned()));
    }
    v
}

/// The flow in the JSON document: totals, the window and its rate (a fraction, null when
/// either count is unknown or the source had no traffic).
fn flow_json(f: &Flow) -> Value {
    json!({
        "deadLetteredTotal": f.dead_lettered_total,
        "sourceTotal": f.source_total,
        "source": f.source,
        "basis": f.basis,
        "window": f.window.as_ref().map(|w| json!({
            "seconds": w.seconds,
            "deadLettered": w.dead_lettered,
            "source": w.source,
            "rate": w.rate(),
        })),
    })
}

fn seconds(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |s| json!((s * 1000.0).round() / 1000.0))
}

/// The versioned document (`format_version: 1`; docs/status.md describes every field).
pub fn json(report: &Report) -> String {
    let channels: Vec<Value> = report
        .channels
        .iter()
        .map(|c| {
            let dl = match &c.dead_letter {
                Some(d) => {
                    let mut v = json!({
                    "name": c.dead_letter_name,
                    "depth": d.depth.total,
                    "depthDetail": depth_json(&d.depth),
                    "oldestAgeSeconds": seconds(d.oldest_age_seconds),
                    "oldestAgeSince": d.oldest_age_since,
                    "oldestAgeBasis": d.oldest_age_basis,
                    "byErrorClass": d.by_error_class,
                    "sampled": d.sampled,
                    "exact": d.exact,
                    "samples": d.samples.iter().map(|s| json!({
                        "id": s.id,
                        "errorClass": s.error_class,
                        "rawErrorClass": s.raw_error_class,
                        "errorMessage": s.error_message,
                        "ageSeconds": seconds(s.age_seconds),
                        "ageSince": s.age_since,
                        "attempts": s.attempts,
                        "source": s.source,
                        "headers": s.headers.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
                        "body": s.body,
                    })).collect::<Vec<_>>(),
                    "notes": d.notes,
                    "flow": flow_json(&d.flow),
                    "byClassInWindow": if d.by_class_in_window.is_empty() {
                        Value::Null
                    } else {
                        json!({"estimate": true, "classes": d.by_class_in_window})
                    },
                    });
                    // Only for a shared destination (`deadLetter.of`).
                    if let (false, Some(o)) = (d.by_source.is_empty(), v.as_object_mut()) {
                        o.insert("bySource".into(), json!(d.by_source));
                    }
                    // Only with `--group-by fingerprint`: the default document stays as it was.
                    if let (Some(groups), Some(o)) = (&d.groups, v.as_object_mut()) {
                        o.insert("groups".into(), groups_json(groups));
                    }
                    // Only with `--where` or `--group`.
                    if let (Some(sel), Some(o)) = (&d.selected, v.as_object_mut()) {
                        o.insert(
                            "selected".into(),
                            json!({
                                "matched": sel.matched,
                                "read": sel.read,
                                "whereFailures": sel.failures,
                            }),
                        );
                    }
                    v
                }
                None => json!({
                    "name": c.dead_letter_name,
                    "depth": null,
                    "depthDetail": null,
                    "oldestAgeSeconds": null,
                    "oldestAgeSince": null,
                    "oldestAgeBasis": null,
                    "byErrorClass": {},
                    "sampled": 0,
                    "exact": false,
                    "samples": [],
                    "notes": [],
                    "flow": null,
                    "byClassInWindow": null,
                }),
            };
            json!({
                "channel": c.channel,
                "target": c.target,
                "backend": c.backend.as_str(),
                "role": c.role.as_str(),
                "deadLetter": dl,
                "discard": c.discard.as_ref().map(|d| json!({
                    "afterSeconds": d.after.as_millis() / 1000,
                    "after": d.after.to_string(),
                    "reason": d.reason,
                    "owner": d.owner,
                })),
                "resolution": c.resolution,
                "queues": c.queues.iter().map(|q| json!({
                    "name": q.name,
                    "role": q.role,
                    "depth": q.depth.total,
                    "depthDetail": depth_json(&q.depth),
                })).collect::<Vec<_>>(),
                "error": c.error,
            })
        })
        .collect();
    let doc = json!({
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "generatedAt": rfc3339(report.generated_at_ms),
        "channels": channels,
    });
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".to_owned());
    text.push('\n');
    text
}

/// `deadLetter.groups`: every group, times in RFC 3339.
fn groups_json(groups: &[FailureGroup]) -> Value {
    Value::Array(
        groups
            .iter()
            .map(|g| {
                json!({
                    "id": g.id,
                    "class": g.class,
                    "message": g.message,
                    "count": g.count,
                    "firstSeen": g.first_seen_ms.map(rfc3339),
                    "lastSeen": g.last_seen_ms.map(rfc3339),
                    "sampleIds": g.sample_ids,
                })
            })
            .collect(),
    )
}

fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// A label value in the exposition format. Message text in it was made [`safe`] when it was
/// read; here only the format's own escapes are added (a newline cannot remain, by then).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub(crate) fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", label(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Gauges in the text exposition format, ending with `# EOF` (OpenMetrics; Prometheus's
/// parser and node_exporter's textfile collector take it as a comment).
pub fn openmetrics(report: &Report) -> String {
    // name → (type, help, samples)
    type Family<'a> = (&'a str, &'a str, Vec<String>);
    let mut families: BTreeMap<&str, Family<'_>> = BTreeMap::new();
    let mut add =
        |name: &'static str, kind: &'static str, help: &'static str, l: String, v: f64| {
            families
                .entry(name)
                .or_insert_with(|| (kind, help, Vec::new()))
                .2
                .push(format!("{name}{l} {v}"));
        };
    // Per target, its channels and those that could not be read (a channel counts once,
    // failed when any of its destinations failed).
    type Channels<'a> = std::collections::BTreeSet<&'a str>;
    let mut targets: BTreeMap<(&str, &str), (Channels<'_>, Channels<'_>)> = BTreeMap::new();
    for c in &report.channels {
        let t = targets.entry((&c.target, c.backend.as_str())).or_default();
        t.0.insert(&c.channel);
        if c.error.is_some() {
            t.1.insert(&c.channel);
        }
        let base = [
            ("channel", c.channel.as_str()),
            ("target", c.target.as_str()),
            ("backend", c.backend.as_str()),
            ("queue", c.dead_letter_name.as_str()),
            ("role", c.role.as_str()),
        ];
        let Some(d) = &c.dead_letter else { continue };
        // Counters from the broker's own totals (docs/status.md, "Flow"); absent when the
        // backend cannot say. The source once per channel, with its DLQ.
        if let Some(n) = d.flow.dead_lettered_total {
            add(
                "dlq_dead_lettered_messages_total",
                "counter",
                "Messages that entered the dead-letter queue (or the invalid / exception destination: role), as the broker counts them.",
                labels(&base),
                n as f64,
            );
        }
        if c.role == DeadLetterRole::DeadLetter
            && let (Some(n), Some(q)) = (d.flow.source_total, d.flow.source.as_deref())
        {
            add(
                "dlq_source_messages_total",
                "counter",
                "Messages that entered the channel's source (its main queue or topic), as the broker counts them.",
                labels(&[
                    ("channel", c.channel.as_str()),
                    ("target", c.target.as_str()),
                    ("backend", c.backend.as_str()),
                    ("queue", q),
                ]),
                n as f64,
            );
        }
        if d.depth.total.is_some() {
            add(
                "dlq_depth_lower_bound",
                "gauge",
                "1 when dlq_depth is a lower bound (counted by reading, and the read stopped at --scan: Pub/Sub without Cloud Monitoring), else 0.",
                labels(&base),
                if d.depth.lower_bound { 1.0 } else { 0.0 },
            );
        }
        if let Some(n) = d.depth.total {
            add(
                "dlq_depth",
                "gauge",
                "Messages in the dead-letter queue: ready, in flight and delayed (a Kafka dead-letter topic without deadLetter.consumerGroup: the records it retains).",
                labels(&base),
                n as f64,
            );
        }
        if let Some(a) = d.oldest_age_seconds {
            let mut l = base.to_vec();
            l.push((
                "basis",
                d.oldest_age_basis
                    .map_or("unknown", super::AgeBasis::as_str),
            ));
            add(
                "dlq_oldest_message_age_seconds",
                "gauge",
                "Age of the oldest dead letter, since it was dead-lettered where the message says, else since it was published; basis=\"first-seen\": since the exporter first saw it (no message carries a time), a lower bound.",
                labels(&l),
                (a * 1000.0).round() / 1000.0,
            );
        }
        if d.depth.exists {
            add(
                "dlq_oldest_message_age_known",
                "gauge",
                "1 when the oldest dead letter's age comes from the broker or the message, or none waits; 0 when messages wait and their age is estimated (first-seen) or unknown.",
                labels(&base),
                if d.oldest_age_basis.is_none_or(super::AgeBasis::known) {
                    1.0
                } else {
                    0.0
                },
            );
        }
        if d.depth.exists {
            add(
                "dlq_messages_read",
                "gauge",
                "Dead letters read for the error-class counts.",
                labels(&base),
                d.sampled as f64,
            );
        }
        // Only the channel's declared class names (or the built-in ones) and `other`: what a
        // message says never becomes a label (`EnvelopeResolved::classes`).
        for (class, n) in &d.by_class_label {
            let mut l = base.to_vec();
            l.push(("class", class));
            add(
                "dlq_messages_by_error_class",
                "gauge",
                "Dead letters per error class, among those read (dlq_messages_read).",
                labels(&l),
                *n as f64,
            );
        }
        for q in &c.queues {
            if let Some(n) = q.depth.total {
                let l = [
                    ("channel", c.channel.as_str()),
                    ("target", c.target.as_str()),
                    ("backend", c.backend.as_str()),
                    ("queue", q.name.as_str()),
                    ("role", q.role),
                ];
                add(
                    "dlq_channel_queue_depth",
                    "gauge",
                    "Messages in the channel's main and retry queues or topics, for context.",
                    labels(&l),
                    n as f64,
                );
            }
        }
    }
    for ((target, backend), (all, failed)) in &targets {
        let l = labels(&[("target", target), ("backend", backend)]);
        add(
            "dlq_up",
            "gauge",
            "1 when every channel of the target was read at the last read, else 0.",
            l.clone(),
            if failed.is_empty() && !all.is_empty() {
                1.0
            } else {
                0.0
            },
        );
        add(
            "dlq_read_errors",
            "gauge",
            "Channels of the target that could not be read at the last read.",
            l,
            failed.len() as f64,
        );
    }
    let mut out = String::new();
    for (name, (kind, help, lines)) in &families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
    }
    let _ = writeln!(
        out,
        "# HELP dlq_last_read_timestamp_seconds When the figures were read.\n# TYPE dlq_last_read_timestamp_seconds gauge\ndlq_last_read_timestamp_seconds {}",
        report.generated_at_ms as f64 / 1000.0
    );
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod rate_tests {
    use super::*;
    use crate::status::FlowWindow;

    fn flow(dead_lettered: u64, source: u64) -> Flow {
        Flow {
            dead_lettered_total: None,
            source_total: None,
            source: None,
            window: Some(FlowWindow {
                seconds: 300,
                dead_lettered: Some(dead_lettered),
                source: Some(source),
            }),
            basis: None,
            periods: Vec::new(),
            settles: false,
        }
    }

    /// Issue 52, L8: "rate 34666.67% (3,120 of 9)" was printed for a window in which a
    /// backlog was dead-lettered; more dead letters than arrivals is no rate.
    #[test]
    fn more_dead_letters_than_arrivals_is_no_rate_above_100_percent() {
        let f = flow(3120, 9);
        let line = rate_line(&f).expect("a window");
        assert!(!line.contains('%'), "{line}");
        assert!(
            line.contains("3,120") && line.contains("entered earlier"),
            "{line}"
        );
        assert_eq!(f.window.as_ref().and_then(FlowWindow::rate), None);
        let ok = flow(10, 1000);
        assert_eq!(
            rate_line(&ok).as_deref(),
            Some("1.00% (10 of 1,000 in the last 5m)")
        );
        assert_eq!(ok.window.as_ref().and_then(FlowWindow::rate), Some(0.01));
    }
}
