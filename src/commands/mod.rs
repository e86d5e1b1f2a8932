//! One module per subcommand; each takes its parsed arguments and the printer and returns
//! the process exit code. `anyhow` stops here: below, errors are typed.

mod alerts;
mod apply;
mod completions;
mod exporter;
mod graph;
mod import;
mod lint;
mod man;
mod plan;
mod redrive;
mod schema;
mod status;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::backend::ConnectOptions;
use crate::backend::wire::http::Stats;
use crate::cli::{Command, ScopeArgs, SpecArgs};
use crate::diag::{self, Severity};
use crate::engine::PlanOptions;
use crate::printer::{Printer, Style};
use crate::spec::model::Target;
use crate::spec::resolve::Resolved;
use crate::spec::{load, rules};

pub fn dispatch(command: Command, printer: &Printer) -> anyhow::Result<u8> {
    let show_secrets = match &command {
        Command::Status(a) => a.show_secrets,
        Command::Redrive(a) => a.show_secrets,
        _ => false,
    };
    if show_secrets {
        crate::secrets::show_all();
        printer.err(&format!(
            "{} --show-secrets: headers and bodies are shown as the messages carry them, credentials and card numbers included; do not paste this output where others can read it",
            printer.paint_err("warning:", crate::printer::Style::Warning)
        ));
    }
    match command {
        Command::Lint(args) => lint::run(&args, printer),
        Command::Plan(args) => plan::run(&args, printer),
        Command::Apply(args) => apply::run(&args, printer),
        Command::Import(args) => import::run(&args, printer),
        Command::Schema(args) => schema::run(&args, printer),
        Command::Status(args) => status::run(&args, printer),
        Command::Exporter(args) => exporter::run(&args, printer),
        Command::Redrive(args) => redrive::run(&args, printer),
        Command::Alerts(args) => alerts::run(&args, printer),
        Command::Graph(args) => graph::run(&args, printer),
        Command::Completions(args) => completions::run(&args, printer),
        Command::Man(args) => man::run(&args, printer),
    }
}

/// Specs that passed lint, resolved, with the targets they use.
pub struct Loaded {
    pub channels: Vec<Resolved>,
    pub targets: BTreeMap<String, Target>,
    /// Every file read (specs, targets, defaults), with the SHA-256 of its content: what a
    /// saved plan records, and apply of a saved plan compares.
    pub files: BTreeMap<PathBuf, String>,
}

/// The SHA-256 of a file's content, in hex.
pub fn content_hash(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Loads and checks specs as `lint` does. Errors and warnings go to stderr (stdout is the
/// plan's); `None` when there were errors.
pub fn load_checked(
    paths: &[PathBuf],
    targets: Option<&std::path::Path>,
    printer: &Printer,
) -> anyhow::Result<Option<Loaded>> {
    let ws = load::load(paths, targets)?;
    let (findings, checked) = rules::check(&ws);
    let mut diags = ws.diagnostics.clone();
    diags.extend(findings);
    diags.retain(|d| d.severity != Severity::Info);
    diag::sort(&mut diags);
    if !diags.is_empty() {
        let mut text = diag::render_human(&diags, &ws.sources, printer.color_stderr());
        text.push_str(&diag::summary(&diags, ws.sources.len(), ws.skipped));
        printer.err(text.trim_end());
    }
    if diags.iter().any(|d| d.severity == Severity::Error) {
        return Ok(None);
    }
    if ws.channels.is_empty() {
        anyhow::bail!(
            "no channels found in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let targets = ws
        .targets
        .iter()
        .flat_map(|d| d.value.targets.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect();
    let files = (0..ws.sources.len())
        .map(|id| {
            (
                ws.sources.path(id).to_path_buf(),
                content_hash(ws.sources.text(id)),
            )
        })
        .collect();
    Ok(Some(Loaded {
        channels: checked.into_iter().map(|c| c.resolved).collect(),
        targets,
        files,
    }))
}

pub fn connect_options(spec: &SpecArgs, printer: &Printer) -> ConnectOptions {
    if spec.insecure {
        printer.err(&format!(
            "{} --insecure: TLS certificates are not verified; anyone on the network path can read the credentials",
            printer.paint_err("warning:", Style::Warning)
        ));
    }
    ConnectOptions {
        insecure: spec.insecure,
        read_timeout: std::time::Duration::from_secs(spec.read_timeout),
    }
}

pub fn plan_options(scope: &ScopeArgs) -> PlanOptions {
    PlanOptions {
        prune: scope.prune,
        adopt: scope.adopt,
    }
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

pub fn print_stats(stats: &Stats, printer: &Printer) {
    let calls = stats.snapshot();
    let total: u64 = calls.values().sum();
    let mut lines = vec![format!("API calls: {total}")];
    lines.extend(calls.iter().map(|(api, n)| format!("  {n:>6}  {api}")));
    printer.err(&lines.join("\n"));
}
