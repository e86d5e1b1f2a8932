//! `dlqctl lint`: the pre-commit and CI check. Offline, fast, every finding at once.

use crate::cli::{LintArgs, LintFormat};
use crate::diag::{self, Counts, Severity};
use crate::printer::Printer;
use crate::spec::{load, rules};

/// Exit codes: 0 clean (warnings allowed unless `--deny-warnings`), 1 findings.
pub fn run(args: &LintArgs, printer: &Printer) -> anyhow::Result<u8> {
    let ws = load::load(&args.paths, args.targets.as_deref())?;
    let rule_findings = rules::findings(&ws);
    let mut diags = ws.diagnostics.clone();
    diags.extend(rule_findings);
    diag::sort(&mut diags);
    diags.dedup_by(|a, b| a.loc == b.loc && a.rule == b.rule && a.message == b.message);
    if args.quiet {
        diags.retain(|d| d.severity != Severity::Info);
    }
    let text = match args.format {
        LintFormat::Human => {
            let mut t = diag::render_human(&diags, &ws.sources, printer.color());
            if !args.quiet {
                t.push_str(&diag::summary(&diags, ws.sources.len(), ws.skipped));
                t.push('\n');
            }
            t
        }
        LintFormat::Json => diag::render_json(&diags, &ws.sources),
        LintFormat::Github => diag::render_github(&diags, &ws.sources),
        LintFormat::Sarif => {
            let cwd = std::env::current_dir().ok();
            diag::sarif::render(&diags, &ws.sources, cwd.as_deref())
        }
    };
    printer.out(&text);
    let c = Counts::of(&diags);
    Ok(u8::from(
        c.errors > 0 || (args.deny_warnings && c.warnings > 0),
    ))
}
