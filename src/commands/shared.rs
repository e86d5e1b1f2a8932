//! What the subcommands share, below all of them: loading and checking the specs as `lint`
//! does, the connection options, the runtime, the API-call counts, the channel selection and
//! the Ctrl-C watch. `mod.rs` only dispatches, so no command reaches back up into it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::backend::ConnectOptions;
use crate::backend::wire::http::Stats;
use crate::cli::{ReadArgs, ScopeArgs, SelectorArgs, SpecArgs};
use crate::diag::digest::{Digest, Place};
use crate::diag::{self, Diagnostic, Severity};
use crate::engine::PlanOptions;
use crate::printer::{Printer, Style};
use crate::spec::load::Workspace;
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
    /// The file of each channel's document, by (target, channel): what a command names when
    /// the channel lacks something it needs.
    pub spec_files: BTreeMap<(String, String), PathBuf>,
    /// The lint warnings, one line per rule: what the markdown plan comment shows of them.
    pub warnings: Digest,
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
    let warnings = Digest::of(&diags, places(&ws));
    report(&diags, &warnings, &ws, printer);
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
    let spec_files = checked
        .iter()
        .map(|c| {
            (
                (c.resolved.target.clone(), c.resolved.channel.clone()),
                ws.sources.path(c.doc.loc.file).to_path_buf(),
            )
        })
        .collect();
    Ok(Some(Loaded {
        warnings,
        spec_files,
        channels: checked.into_iter().map(|c| c.resolved).collect(),
        targets,
        files,
    }))
}

/// Lint's findings on stderr as a command that acts on the specs shows them: errors in full
/// (they stop the command), warnings folded to one line per rule unless `-v` asks for each
/// (issue 39: 300 warnings used to bury the plan); `dlqctl lint` shows them all.
fn report(diags: &[Diagnostic], warnings: &Digest, ws: &Workspace, printer: &Printer) {
    let full = printer.verbosity() > 0;
    let shown: Vec<Diagnostic> = diags
        .iter()
        .filter(|d| full || d.severity != Severity::Warning)
        .cloned()
        .collect();
    let mut text = diag::render_human(&shown, &ws.sources, printer.color_stderr());
    if !full {
        for (i, line) in warnings.lines().iter().enumerate() {
            if i == 0 {
                text.push_str(&printer.paint_err("warning:", Style::Warning));
                text.push(' ');
                text.push_str(line);
            } else {
                text.push_str(line);
            }
            text.push('\n');
        }
    }
    // The count of every finding closes a report that has more than the folded warnings,
    // which say their own count.
    if !shown.is_empty() {
        // A blank line after the folded warnings, as after each finding shown in full.
        if !full && !warnings.is_empty() {
            text.push('\n');
        }
        text.push_str(&diag::summary(diags, ws.sources.len(), ws.skipped));
    }
    if !text.is_empty() {
        printer.err(text.trim_end());
    }
}

/// Where each finding is, for the folded warnings: the channel whose document holds it, else
/// its file.
fn places(ws: &Workspace) -> impl Fn(&Diagnostic) -> Place + '_ {
    // Each document's start, by file: a finding belongs to the last one starting before it.
    let mut starts: BTreeMap<(diag::FileId, usize), Option<&str>> = BTreeMap::new();
    for c in &ws.channels {
        starts.insert(
            (c.loc.file, c.loc.span.start),
            Some(c.value.metadata.name.as_str()),
        );
    }
    for loc in ws
        .targets
        .iter()
        .map(|t| t.loc)
        .chain(ws.defaults.iter().map(|d| d.loc))
    {
        starts.insert((loc.file, loc.span.start), None);
    }
    move |d: &Diagnostic| {
        let Some(loc) = d.loc else {
            return Place::Nowhere;
        };
        let doc = starts
            .range(..=(loc.file, loc.span.start))
            .next_back()
            .filter(|((file, _), _)| *file == loc.file);
        match doc {
            Some((_, Some(channel))) => Place::Channel((*channel).to_owned()),
            _ => Place::File(ws.sources.path(loc.file).display().to_string()),
        }
    }
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

/// The channels `--channel` names (all of them when none is named), on `--target` when it is
/// given; a name no spec has is an error, and so is a name two targets have without
/// `--target` to say which.
pub fn select(channels: Vec<Resolved>, args: &ReadArgs) -> anyhow::Result<Vec<Resolved>> {
    let target = args.target.as_deref();
    if let Some(t) = target
        && !channels.iter().any(|c| c.target == t)
    {
        return Err(unknown_target(t, &channels));
    }
    for name in &args.channels {
        pick(&channels, name, target)?;
    }
    Ok(channels
        .into_iter()
        .filter(|c| args.channels.is_empty() || args.channels.contains(&c.channel))
        .filter(|c| target.is_none_or(|t| c.target == t))
        .collect())
}

/// `--group` and `--where`, checked before any spec is read: a group id is the 12 hexadecimal
/// characters `status --group-by fingerprint` shows, and the expression compiles.
pub fn selectors(
    args: &SelectorArgs,
) -> anyhow::Result<(Vec<String>, Option<crate::status::selector::Where>)> {
    use crate::status::fingerprint::ID_LEN;
    let mut groups = Vec::new();
    for g in &args.groups {
        let id = g.trim().to_ascii_lowercase();
        if id.len() != ID_LEN || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            anyhow::bail!(
                "--group {g}: a failure group's id is {ID_LEN} hexadecimal characters, as `dlqctl status --group-by fingerprint` shows it"
            );
        }
        groups.push(id);
    }
    let where_ = args
        .where_
        .as_deref()
        .map(crate::status::selector::Where::compile)
        .transpose()
        .map_err(|e| anyhow::Error::new(crate::cli::UsageError(e)))?;
    Ok((groups, where_))
}

/// The one channel redrive's CHANNEL argument names (on `target`, when given); a name no
/// spec has is the same error as `--channel`'s, and so is one two targets have.
pub fn select_one(
    mut channels: Vec<Resolved>,
    name: &str,
    target: Option<&str>,
) -> anyhow::Result<Resolved> {
    let i = pick(&channels, name, target)?;
    Ok(channels.swap_remove(i))
}

/// The index of the one channel `name` (on `target`) names.
fn pick(channels: &[Resolved], name: &str, target: Option<&str>) -> anyhow::Result<usize> {
    let named: Vec<usize> = channels
        .iter()
        .enumerate()
        .filter(|(_, c)| c.channel == name)
        .map(|(i, _)| i)
        .collect();
    if named.is_empty() {
        return Err(unknown_channel(name, channels));
    }
    let on: Vec<usize> = named
        .iter()
        .copied()
        .filter(|i| target.is_none_or(|t| channels[*i].target == t))
        .collect();
    let targets = |ix: &[usize]| {
        ix.iter()
            .map(|i| format!("`{}`", channels[*i].target))
            .collect::<Vec<_>>()
            .join(" and ")
    };
    match (on.as_slice(), target) {
        ([one], _) => Ok(*one),
        ([], Some(t)) => Err(anyhow::anyhow!(
            "channel `{name}`: not on target `{t}`; it is on {}",
            targets(&named)
        )),
        (_, _) => Err(anyhow::anyhow!(
            "channel `{name}` is defined on targets {}: say which with --target",
            targets(&on)
        )),
    }
}

/// A target no channel of the specs is on.
fn unknown_target(name: &str, channels: &[Resolved]) -> anyhow::Error {
    let mut names: Vec<&str> = channels.iter().map(|c| c.target.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let hint = crate::spec::schema::did_you_mean(name, names.iter().copied())
        .map(|m| format!(" (did you mean `{m}`?)"))
        .unwrap_or_default();
    anyhow::anyhow!(
        "target `{name}`: no channel of the specs is on it{hint}; the channels are on {}",
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A channel name no spec has, with the nearest one as a hint.
fn unknown_channel(name: &str, channels: &[Resolved]) -> anyhow::Error {
    let hint = crate::spec::schema::did_you_mean(name, channels.iter().map(|c| c.channel.as_str()))
        .map(|m| format!("; did you mean `{m}`?"))
        .unwrap_or_default();
    // Not "--channel": redrive names its channel as an argument, and comes here too.
    anyhow::anyhow!("channel `{name}`: no spec defines a channel of that name{hint}")
}

/// Where a run's audit record goes, and what the run was asked (for the record of a refusal).
pub struct Audit<'a> {
    pub audit_log: Option<&'a std::path::Path>,
    /// The channel's target, for its `operations.auditTo`.
    pub target: Option<&'a Target>,
    pub r: &'a Resolved,
    /// How to reach the target, for a `queue:`/`topic:` auditTo.
    pub opts: ConnectOptions,
    /// When the command started, in milliseconds since the Unix epoch: the auditTo object's
    /// name, as the archive's run folder is named by its start.
    pub started_ms: i64,
    pub verb: &'static str,
    pub dry_run: bool,
    pub reason: Option<&'a str>,
}

/// Passes `result` on; a refusal ([`RedriveError::Refused`]) is first appended to
/// `--audit-log` as a [`crate::redrive::Refusal`] (with `identity`, when the backend was
/// asked before the refusal). A record that does not land is said on stderr: the run fails
/// anyway, with the refusal.
pub fn journal_refused<T>(
    result: Result<T, crate::engine::redrive::RedriveError>,
    asked: &Audit<'_>,
    identity: Option<String>,
    printer: &Printer,
) -> Result<T, crate::engine::redrive::RedriveError> {
    use crate::engine::redrive::RedriveError;
    let Err(RedriveError::Refused(why)) = &result else {
        return result;
    };
    let to_target = asked
        .target
        .and_then(|t| t.operations.as_ref())
        .is_some_and(|o| o.audit_to.is_some());
    if asked.audit_log.is_none() && !to_target {
        return result;
    }
    let r = asked.r;
    let refusal = crate::redrive::Refusal {
        format_version: 1,
        kind: crate::redrive::REFUSED_KIND,
        verb: asked.verb,
        channel: r.channel.clone(),
        target: r.target.clone(),
        backend: r.backend.as_str(),
        dry_run: asked.dry_run,
        operator: crate::redrive::holder(),
        identity,
        reason: asked.reason.map(str::to_owned),
        refused: why.clone(),
        at: time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
    };
    match runtime() {
        Ok(rt) => {
            // The run fails with the refusal whether or not its record landed.
            let _ = record(
                &rt,
                asked,
                "refused",
                &refusal,
                "a refused run: nothing moved",
                printer,
            );
        }
        Err(e) => printer.err(&format!(
            "{} {e}; the refusal below is not in the journal",
            printer.paint_err("error:", Style::Error)
        )),
    }
    result
}

/// Puts `record` (of `kind`: `redrive`, `archive`, `refused`) wherever the run's audit
/// records go: the target's `operations.auditTo`, then `--audit-log`. `false` when it did
/// not land in one of them, said on stderr with `what` (what the run did, for whoever must
/// now record it by hand).
pub fn record(
    rt: &tokio::runtime::Runtime,
    audit: &Audit<'_>,
    kind: &str,
    record: &impl serde::Serialize,
    what: &str,
    printer: &Printer,
) -> bool {
    let delivered = audit_to(rt, audit, kind, record, what, printer);
    let Some(path) = audit.audit_log else {
        return delivered;
    };
    // The target's HMAC key signs the record (issue 52, L4); a key named and not set fails.
    let key = match audit
        .target
        .map(|t| crate::integrity::key(&audit.r.target, t))
    {
        Some(Err(e)) => {
            printer.err(&format!(
                "{} {e}; the run's audit record is not in the journal {} ({what}): exiting 1",
                printer.paint_err("error:", Style::Error),
                path.display()
            ));
            return false;
        }
        Some(Ok(k)) => k,
        None => None,
    };
    match crate::journal::append_keyed(path, record, key.as_ref()) {
        Ok(()) => delivered,
        Err(e) => {
            printer.err(&format!(
                "{} {e}; the run's audit record is not in the journal ({what}): exiting 1",
                printer.paint_err("error:", Style::Error),
            ));
            false
        }
    }
}

/// Delivers `record` (of `kind`) to the target's `operations.auditTo`, when it has one:
/// `false` when it did not land, said on stderr with `what` (see [`record`]).
fn audit_to(
    rt: &tokio::runtime::Runtime,
    audit: &Audit<'_>,
    kind: &str,
    record: &impl serde::Serialize,
    what: &str,
    printer: &Printer,
) -> bool {
    let r = audit.r;
    let Some((target, to)) = audit.target.and_then(|t| {
        t.operations
            .as_ref()
            .and_then(|o| o.audit_to.as_deref())
            .map(|to| (t, to))
    }) else {
        return true;
    };
    let delivered = crate::journal::AuditTo::parse(to, target.backend.as_str()).and_then(|place| {
        rt.block_on(crate::engine::audit::deliver(
            &place,
            r,
            target,
            audit.opts,
            kind,
            audit.started_ms,
            record,
        ))
    });
    match delivered {
        Ok(_) => true,
        Err(e) => {
            printer.err(&format!(
                "{} operations.auditTo of target `{}` ({to}): {e}; the run's audit record is not there ({what}): exiting 1",
                printer.paint_err("error:", Style::Error),
                r.target
            ));
            false
        }
    }
}

/// A generated file that differs from what the specs produce (`alerts --check`, `dashboards
/// --check`): the unified diff from the committed text to the specs' on stdout.
pub fn print_stale_diff(printer: &Printer, path: &Path, have: &str, want: &str) {
    let diff = similar::TextDiff::from_lines(have, want);
    printer.out(
        &diff
            .unified_diff()
            .context_radius(2)
            .header(&path.display().to_string(), "from the specs")
            .to_string(),
    );
}

/// The `*.json` files directly in `dir` whose text `ours` says a dlqctl command wrote, sorted
/// (none when `dir` is not a folder): the files `--out DIR` may replace or remove and `--check
/// DIR` reports as left over.
pub fn generated_in(dir: &Path, ours: impl Fn(&str) -> bool) -> anyhow::Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for entry in fs_err::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json")
            && path.is_file()
            && fs_err::read_to_string(&path).is_ok_and(|t| ours(&t))
        {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}
