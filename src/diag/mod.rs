//! Findings about spec files, and the three ways they are shown.
//!
//! A [`Diagnostic`] always says where (file, line, column), which rule, what is wrong with
//! which field and value, and how to fix it. Rendering is separate from finding, so the same
//! list becomes terminal output with source excerpts, a JSON document for tools, GitHub
//! workflow annotations, or a SARIF log for code scanning, and tests snapshot all four.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label, Severity as CsSeverity};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, Config};
use serde::Serialize;

pub mod digest;
pub mod rules;
pub mod sarif;
mod span;

pub use span::Span;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// An index into [`Sources`].
pub type FileId = usize;

/// A place in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub file: FileId,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub severity: Severity,
    /// A stable id (`sqs/retention-range`), used to silence warnings and in docs.
    pub rule: &'static str,
    pub message: String,
    pub hint: Option<String>,
    /// Where; `None` only for findings about the run as a whole.
    pub loc: Option<Loc>,
    /// Other places worth seeing (a first definition, a conflicting channel).
    pub related: Vec<(Loc, String)>,
}

impl Diagnostic {
    pub fn new(severity: Severity, rule: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            rule,
            message: message.into(),
            hint: None,
            loc: None,
            related: Vec::new(),
        }
    }

    pub fn error(rule: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, rule, message)
    }

    pub fn warning(rule: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, rule, message)
    }

    pub fn info(rule: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Info, rule, message)
    }

    pub fn at(mut self, loc: Loc) -> Self {
        self.loc = Some(loc);
        self
    }

    pub fn at_opt(mut self, loc: Option<Loc>) -> Self {
        self.loc = loc;
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn related(mut self, loc: Loc, note: impl Into<String>) -> Self {
        self.related.push((loc, note.into()));
        self
    }
}

/// Every file read in a run, kept for rendering excerpts.
#[derive(Debug, Default)]
pub struct Sources {
    files: Vec<(PathBuf, String)>,
}

impl Sources {
    pub fn add(&mut self, path: PathBuf, text: String) -> FileId {
        self.files.push((path, text));
        self.files.len() - 1
    }

    pub fn path(&self, id: FileId) -> &Path {
        &self.files[id].0
    }

    pub fn text(&self, id: FileId) -> &str {
        &self.files[id].1
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// 1-based line and column of the end of a span, for editors that want a range.
    fn end_line_col(&self, loc: Loc) -> (usize, usize) {
        let text = self.text(loc.file);
        let mut end = loc.span.end.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let before = &text[..end];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, col)
    }
}

/// Sorts findings by file, position and rule, so output is stable across runs.
pub fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by(|a, b| {
        let key = |d: &Diagnostic| d.loc.map(|l| (l.file, l.span.start));
        key(a)
            .cmp(&key(b))
            .then(a.severity.cmp(&b.severity))
            .then(a.rule.cmp(b.rule))
            .then(a.message.cmp(&b.message))
    });
}

/// Counts by severity.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
}

impl Counts {
    pub fn of(diags: &[Diagnostic]) -> Self {
        let mut c = Counts::default();
        for d in diags {
            match d.severity {
                Severity::Error => c.errors += 1,
                Severity::Warning => c.warnings += 1,
                Severity::Info => c.infos += 1,
            }
        }
        c
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Human output: each finding with its source excerpt and caret, then a summary line.
pub fn render_human(diags: &[Diagnostic], sources: &Sources, color: bool) -> String {
    let mut files = SimpleFiles::new();
    for (path, text) in &sources.files {
        files.add(path.display().to_string(), text.as_str());
    }
    let config = Config::default();
    let mut out = String::new();
    for d in diags {
        let mut cs = CsDiagnostic::new(match d.severity {
            Severity::Error => CsSeverity::Error,
            Severity::Warning => CsSeverity::Warning,
            Severity::Info => CsSeverity::Note,
        })
        .with_code(d.rule)
        .with_message(&d.message);
        let mut labels = Vec::new();
        if let Some(loc) = d.loc {
            labels.push(Label::primary(loc.file, range(loc, sources)));
        }
        for (loc, note) in &d.related {
            labels.push(Label::secondary(loc.file, range(*loc, sources)).with_message(note));
        }
        cs = cs.with_labels(labels);
        if let Some(h) = &d.hint {
            cs = cs.with_notes(vec![format!("hint: {h}")]);
        }
        let rendered = if color {
            let mut buf = term::termcolor::Buffer::ansi();
            term::emit_to_write_style(&mut buf, &config, &files, &cs)
                .ok()
                .map(|()| String::from_utf8_lossy(buf.as_slice()).into_owned())
        } else {
            term::emit_into_string(&config, &files, &cs).ok()
        };
        match rendered {
            Some(text) => out.push_str(&text),
            // Rendering can only fail on a span outside its file; never lose the finding.
            None => {
                let _ = writeln!(out, "{}[{}]: {}", d.severity.as_str(), d.rule, d.message);
            }
        }
    }
    out
}

/// The summary line that closes human output; `skipped` counts the YAML documents and files
/// that are not dlqctl's (said only when there are any).
pub fn summary(diags: &[Diagnostic], files: usize, skipped: usize) -> String {
    let c = Counts::of(diags);
    let checked = if skipped > 0 {
        format!(
            "{} checked ({skipped} skipped: not dlqctl documents)",
            plural(files, "file")
        )
    } else {
        format!("{} checked", plural(files, "file"))
    };
    if c.errors == 0 && c.warnings == 0 && c.infos > 0 {
        format!("{checked}: no problems found, {}.", plural(c.infos, "note"))
    } else if c.errors == 0 && c.warnings == 0 {
        format!("{checked}: no problems found.")
    } else {
        format!(
            "{checked}: {}, {}.",
            plural(c.errors, "error"),
            plural(c.warnings, "warning")
        )
    }
}

fn range(loc: Loc, sources: &Sources) -> Range<usize> {
    let text = sources.text(loc.file);
    let floor = |mut i: usize| {
        i = i.min(text.len());
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = floor(loc.span.start);
    // A zero-width span still gets a visible caret: extend to the end of the next character.
    let next = text[start..]
        .chars()
        .next()
        .map_or(start, |c| start + c.len_utf8());
    let end = floor(loc.span.end.max(next)).max(start);
    start..end
}

#[derive(Serialize)]
struct JsonDoc<'a> {
    format_version: u32,
    diagnostics: Vec<JsonDiag<'a>>,
    summary: JsonSummary,
}

#[derive(Serialize)]
struct JsonSummary {
    files: usize,
    errors: usize,
    warnings: usize,
    infos: usize,
}

#[derive(Serialize)]
struct JsonDiag<'a> {
    severity: Severity,
    rule: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    column: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_column: Option<usize>,
}

/// `--format json`: a versioned document (format_version 1).
pub fn render_json(diags: &[Diagnostic], sources: &Sources) -> String {
    let c = Counts::of(diags);
    let doc = JsonDoc {
        format_version: 1,
        diagnostics: diags
            .iter()
            .map(|d| {
                let end = d.loc.map(|l| sources.end_line_col(l));
                JsonDiag {
                    severity: d.severity,
                    rule: d.rule,
                    message: &d.message,
                    hint: d.hint.as_deref(),
                    file: d.loc.map(|l| sources.path(l.file).display().to_string()),
                    line: d.loc.map(|l| l.span.line),
                    column: d.loc.map(|l| l.span.col),
                    end_line: end.map(|e| e.0),
                    end_column: end.map(|e| e.1),
                }
            })
            .collect(),
        summary: JsonSummary {
            files: sources.len(),
            errors: c.errors,
            warnings: c.warnings,
            infos: c.infos,
        },
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

/// `--format github`: workflow commands that GitHub Actions shows as annotations.
pub fn render_github(diags: &[Diagnostic], sources: &Sources) -> String {
    let mut out = String::new();
    for d in diags {
        let level = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let mut props = Vec::new();
        if let Some(l) = d.loc {
            let (end_line, end_col) = sources.end_line_col(l);
            props.push(format!(
                "file={}",
                escape_property(&sources.path(l.file).display().to_string())
            ));
            props.push(format!("line={}", l.span.line));
            props.push(format!("col={}", l.span.col));
            props.push(format!("endLine={end_line}"));
            props.push(format!("endColumn={end_col}"));
        }
        props.push(format!("title={}", escape_property(d.rule)));
        let mut msg = d.message.clone();
        if let Some(h) = &d.hint {
            msg.push_str("\nhint: ");
            msg.push_str(h);
        }
        let _ = writeln!(out, "::{level} {}::{}", props.join(","), escape_data(&msg));
    }
    out
}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}
