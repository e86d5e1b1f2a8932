//! What the subcommands share, below all of them: loading and checking the specs as `lint`
//! does, the connection options, the runtime, the API-call counts, the channel selection and
//! the Ctrl-C watch. `mod.rs` only dispatches, so no command reaches back up into it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::backend::ConnectOptions;
use crate::backend::wire::http::Stats;
use crate::cli::{ReadArgs, ScopeArgs, SpecArgs};
use crate::diag::{self, Severity};
use crate::engine::PlanOptions;
use crate::printer::{Printer, Style};
use crate::spec::model::Target;
use crate::spec::resolve::Resolved;
use crate::spec::{load, rules};

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

/// The channels `--channel` names (all of them when none is named); a name no spec has is an
/// error that suggests the nearest one.
pub fn select(channels: Vec<Resolved>, args: &ReadArgs) -> anyhow::Result<Vec<Resolved>> {
    if args.channels.is_empty() {
        return Ok(channels);
    }
    for name in &args.channels {
        if !channels.iter().any(|c| &c.channel == name) {
            return Err(unknown_channel(name, &channels));
        }
    }
    Ok(channels
        .into_iter()
        .filter(|c| args.channels.contains(&c.channel))
        .collect())
}

/// The one channel redrive's CHANNEL argument names; a name no spec has is the same error as
/// `--channel`'s.
pub fn select_one(mut channels: Vec<Resolved>, name: &str) -> anyhow::Result<Resolved> {
    match channels.iter().position(|c| c.channel == name) {
        Some(i) => Ok(channels.swap_remove(i)),
        None => Err(unknown_channel(name, &channels)),
    }
}

/// A channel name no spec has, with the nearest one as a hint.
fn unknown_channel(name: &str, channels: &[Resolved]) -> anyhow::Error {
    let hint = crate::spec::schema::did_you_mean(name, channels.iter().map(|c| c.channel.as_str()))
        .map(|m| format!("; did you mean `{m}`?"))
        .unwrap_or_default();
    // Not "--channel": redrive names its channel as an argument, and comes here too.
    anyhow::anyhow!("channel `{name}`: no spec defines a channel of that name{hint}")
}
