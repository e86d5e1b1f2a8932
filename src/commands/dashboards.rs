//! `dlqctl dashboards`: writes (or checks) the Grafana dashboards of the specs' channels into a
//! folder, one JSON file per target or team. Offline: it reads specs, never a server.
//!
//! The same contract as `dlqctl alerts`: `--out` replaces only files it wrote (their
//! `description` begins with [`dashboards::MARK`]) and refuses before writing anything when
//! another file is in the way; `--check` writes nothing and exits 2, with a diff, when the
//! folder is not what the specs produce.

use std::path::{Path, PathBuf};

use crate::cli::{DashboardsArgs, DashboardsBy};
use crate::engine::dashboards::{self, By, Dashboard};
use crate::printer::Printer;

/// Exit codes: 0 written (or up to date), 1 lint errors, 2 `--check` found a difference.
pub fn run(args: &DashboardsArgs, printer: &Printer) -> anyhow::Result<u8> {
    let Some(loaded) = super::shared::load_checked(&args.paths, args.targets.as_deref(), printer)?
    else {
        return Ok(1);
    };
    let by = match args.by {
        DashboardsBy::Target => By::Target,
        DashboardsBy::Team => By::Team,
    };
    let built = dashboards::build(&loaded.channels, &loaded.targets, by);
    let rows: usize = built.iter().map(|d| d.channels).sum();
    let report = format!(
        "{} dashboards, {rows} channel rows (one dashboard per {})",
        built.len(),
        match by {
            By::Target => "target",
            By::Team => "team label",
        }
    );
    if let Some(dir) = &args.check {
        return check(dir, &built, &report, printer);
    }
    let Some(dir) = &args.out else {
        // clap requires one of --out and --check.
        anyhow::bail!("give --out DIR (write) or --check DIR (compare)");
    };
    write(dir, &built, &report, printer)?;
    Ok(0)
}

/// Whether a file's text was written by `dlqctl dashboards`: a JSON object whose
/// `description` begins with the mark.
fn ours_text(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            v["description"]
                .as_str()
                .map(|d| d.starts_with(dashboards::MARK))
        })
        .unwrap_or(false)
}

/// Whether the file at `path` was written by `dlqctl dashboards`.
fn ours(path: &Path) -> bool {
    path.is_file() && fs_err::read_to_string(path).is_ok_and(|t| ours_text(&t))
}

/// The `*.json` files of `dir` that `dlqctl dashboards` wrote, sorted.
fn ours_in(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    super::shared::generated_in(dir, ours_text)
}

fn write(dir: &Path, built: &[Dashboard], report: &str, printer: &Printer) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "not writing into {}: it is not a folder; nothing was written",
            dir.display()
        );
    }
    // Every file in the way is checked before the first is written.
    for d in built {
        let path = dir.join(&d.file);
        if path.exists() && !ours(&path) {
            anyhow::bail!(
                "not overwriting {}: it was not written by `dlqctl dashboards` (its \"description\" does not begin with `{}`); nothing was written; choose another --out",
                path.display(),
                dashboards::MARK
            );
        }
    }
    let stale: Vec<PathBuf> = ours_in(dir)?
        .into_iter()
        .filter(|p| !built.iter().any(|d| dir.join(&d.file) == *p))
        .collect();
    fs_err::create_dir_all(dir)?;
    for d in built {
        fs_err::write(dir.join(&d.file), d.text())?;
    }
    for p in &stale {
        fs_err::remove_file(p)?;
        printer.err(&format!(
            "Removed {}: no spec produces it any more.",
            p.display()
        ));
    }
    printer.err(&format!("Wrote {report} to {}.", dir.display()));
    Ok(())
}

fn check(dir: &Path, built: &[Dashboard], report: &str, printer: &Printer) -> anyhow::Result<u8> {
    let mut stale = Vec::new();
    for d in built {
        let path = dir.join(&d.file);
        let text = d.text();
        let have = match fs_err::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                stale.push(format!("{} does not exist", path.display()));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if have != text {
            super::shared::print_stale_diff(printer, &path, &have, &text);
            stale.push(format!(
                "{} differs from what the specs produce",
                path.display()
            ));
        }
    }
    for p in ours_in(dir)? {
        if !built.iter().any(|d| dir.join(&d.file) == p) {
            stale.push(format!(
                "{} was written by `dlqctl dashboards` and no spec produces it any more",
                p.display()
            ));
        }
    }
    if stale.is_empty() {
        printer.err(&format!("{} is up to date ({report}).", dir.display()));
        return Ok(0);
    }
    for s in &stale {
        printer.err(&format!("stale: {s}"));
    }
    printer.err(&format!(
        "{} is stale; regenerate it with `dlqctl dashboards --out {}`",
        dir.display(),
        dir.display()
    ));
    Ok(2)
}
