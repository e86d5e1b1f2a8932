//! `dlqctl import`: reads one target with a read-only client and writes one spec per channel
//! it finds. The report (what was written, what a spec cannot express, what fits no channel)
//! goes to stderr; stdout lists the files written, one per line, for scripts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};

use crate::backend::wire::http::Stats;
use crate::backend::{ConnectOptions, Reader};
use crate::cli::ImportArgs;
use crate::diag::{self, Severity};
use crate::engine::import;
use crate::printer::{Printer, Style};
use crate::spec::model::Target;
use crate::spec::schema::{DocKind, schema_text};
use crate::spec::{load, rules};

/// Exit codes: 0 when the import ran (even if some objects fit no channel: they are listed),
/// 1 on errors (no targets file, unknown target, unreachable server, a spec file in the way).
pub fn run(args: &ImportArgs, printer: &Printer) -> anyhow::Result<u8> {
    let targets_file = targets_file(args)?;
    let Some(target) = load_target(args, &targets_file, printer)? else {
        return Ok(1);
    };
    let targets_text = fs_err::read_to_string(&targets_file)?;
    if args.insecure {
        printer.err(&format!(
            "{} --insecure: TLS certificates are not verified; anyone on the network path can read the credentials",
            printer.paint_err("warning:", Style::Warning)
        ));
    }
    let reader = Reader::connect(
        &args.target,
        &target,
        ConnectOptions {
            insecure: args.insecure,
            read_timeout: std::time::Duration::from_secs(args.read_timeout),
        },
        Arc::new(Stats::default()),
    )?;
    let outcome = super::shared::runtime()?.block_on(import::run(
        &reader,
        &args.target,
        &target,
        &targets_text,
        args.prefix.as_deref(),
    ))?;
    report_read(args, &outcome, printer);
    let adopt = write_specs(args, &outcome, printer)?;
    if !outcome.unmatched.is_empty() {
        printer.err(&printer.paint_err("Not imported (left as is):", Style::Warning));
        for u in &outcome.unmatched {
            printer.err(&format!("  {u}"));
        }
    }
    report_next(args, &outcome, adopt, target.backend, printer);
    Ok(0)
}

/// The targets file: `--targets`, else the `dlqctl.yaml` found in or above `--out` or the
/// current folder.
fn targets_file(args: &ImportArgs) -> anyhow::Result<PathBuf> {
    if let Some(t) = &args.targets {
        return Ok(t.clone());
    }
    let mut starts = Vec::new();
    if args.out.is_dir() {
        starts.push(args.out.clone());
    }
    starts.push(PathBuf::from("."));
    load::discover_targets(&starts, &[]).ok_or_else(|| {
        anyhow!(
            "no dlqctl.yaml (or dlqctl.yml) in or above {} or the current folder; pass --targets FILE",
            args.out.display()
        )
    })
}

/// The target to read, from a targets file without errors (`None`: its errors were printed).
fn load_target(
    args: &ImportArgs,
    targets_file: &Path,
    printer: &Printer,
) -> anyhow::Result<Option<Target>> {
    let ws = load::load(&[], Some(targets_file))?;
    let findings = rules::findings(&ws);
    let mut diags = ws.diagnostics.clone();
    diags.extend(findings);
    diags.retain(|d| d.severity == Severity::Error);
    if !diags.is_empty() {
        let text = diag::render_human(&diags, &ws.sources, printer.color_stderr());
        printer.err(text.trim_end());
        return Ok(None);
    }
    let mut targets: BTreeMap<String, Target> = ws
        .targets
        .iter()
        .flat_map(|d| d.value.targets.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect();
    let Some(target) = targets.remove(&args.target) else {
        bail!(
            "target `{}` is not defined in {} (it defines: {})",
            args.target,
            targets_file.display(),
            targets.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    };
    Ok(Some(target))
}

/// Says on stderr what was read from the target.
fn report_read(args: &ImportArgs, outcome: &import::Outcome, printer: &Printer) {
    let read: Vec<String> = outcome
        .read
        .iter()
        .map(|(what, n)| format!("{n} {what}"))
        .collect();
    printer.err(&format!(
        "Read target `{}`{}: {}.",
        args.target,
        args.prefix
            .as_deref()
            .map(|p| format!(" (names starting with {p})"))
            .unwrap_or_default(),
        if read.is_empty() {
            "nothing in scope".to_owned()
        } else {
            read.join(", ")
        }
    ));
}

/// Writes one spec file per channel (refusing before writing anything if a file is in the
/// way, unless `--force`); returns how many objects are not tagged as dlqctl's yet.
fn write_specs(
    args: &ImportArgs,
    outcome: &import::Outcome,
    printer: &Printer,
) -> anyhow::Result<usize> {
    let paths: Vec<PathBuf> = outcome
        .channels
        .iter()
        .map(|c| args.out.join(format!("{}.yaml", c.channel.metadata.name)))
        .collect();
    let existing: Vec<String> = paths
        .iter()
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if !existing.is_empty() && !args.force {
        bail!(
            "not overwriting {}: nothing was written; remove them, choose another --out, or pass --force",
            existing.join(", ")
        );
    }
    if !outcome.channels.is_empty() {
        fs_err::create_dir_all(&args.out)?;
    }
    let schema_ref = match outcome.channels.is_empty() {
        true => String::new(),
        false => schema_reference(&args.out, printer)?,
    };
    let mut adopt = 0;
    for (c, path) in outcome.channels.iter().zip(&paths) {
        let text = crate::engine::emit::document(
            &schema_ref,
            &c.comments,
            &crate::backend::kit::import::to_value(&c.channel),
        );
        fs_err::write(path, text)?;
        printer.line(&path.display().to_string());
        let members: Vec<String> = c.members.iter().map(ToString::to_string).collect();
        printer.err(&format!(
            "{} {}: channel {} ({})",
            printer.paint_err("wrote", Style::Good),
            path.display(),
            c.channel.metadata.name,
            members.join(", ")
        ));
        for f in &c.findings {
            printer.err(&format!("  {f}"));
        }
        adopt += c.to_adopt.len();
    }
    Ok(adopt)
}

/// Says on stderr what to run next (`--adopt` when `adopt` objects are not dlqctl's yet), in
/// the words of the target's backend: what its objects are and how it marks them as dlqctl's.
fn report_next(
    args: &ImportArgs,
    outcome: &import::Outcome,
    adopt: usize,
    backend: crate::spec::model::Backend,
    printer: &Printer,
) {
    use crate::spec::model::Backend;
    let dir = args.out.display();
    if outcome.channels.is_empty() {
        printer.err("Nothing to import: no channel was found.");
    } else if adopt > 0 {
        let (objects, state, marks) = match backend {
            Backend::Sqs => ("SQS queue(s) and alarm(s)", "tagged", "tags"),
            Backend::Pubsub => ("Pub/Sub topic(s) and subscription(s)", "labelled", "labels"),
            _ => ("object(s)", "marked", "ownership marks"),
        };
        printer.err(&format!(
            "Next: `dlqctl lint {dir}`, then `dlqctl plan {dir} --adopt`: {adopt} {objects} are not {state} as dlqctl's yet; `dlqctl apply {dir} --adopt` adds the `managed-by`/`dlqctl-channel` {marks} and changes nothing that already matches."
        ));
    } else {
        printer.err(&format!(
            "Next: `dlqctl lint {dir}`, then `dlqctl plan {dir}`."
        ));
    }
}

/// The `$schema` reference for files in `out`: a `schemas/channel.v1.json` in or above it
/// (relative), else one written into `out/schemas/` (said on stderr).
fn schema_reference(out: &Path, printer: &Printer) -> anyhow::Result<String> {
    let file = DocKind::Channel.file_name();
    let abs = std::path::absolute(out).with_context(|| format!("{}", out.display()))?;
    for (depth, dir) in abs.ancestors().enumerate() {
        if dir.join("schemas").join(file).is_file() {
            return Ok(format!("{}schemas/{file}", "../".repeat(depth)));
        }
    }
    let path = out.join("schemas").join(file);
    fs_err::create_dir_all(out.join("schemas"))?;
    fs_err::write(&path, schema_text(DocKind::Channel))?;
    printer.err(&format!(
        "wrote {} (the JSON schema the specs point editors at)",
        path.display()
    ));
    Ok(format!("schemas/{file}"))
}
