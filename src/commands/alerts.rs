//! `dlqctl alerts`: writes (or checks) the Prometheus alerting rules of the specs' RabbitMQ,
//! Kafka and Azure Service Bus channels, the Cloud Monitoring alert policies of their Pub/Sub
//! channels, or the Azure Monitor metric alerts of their Service Bus channels (these two one
//! file per channel and tier in a folder). Offline: it reads specs, never a server.

use std::fmt::Write as _;

use crate::cli::{AlertsArgs, AlertsFormat};
use crate::engine::alerts::{self, Format};
use crate::printer::Printer;

/// Exit codes: 0 written (or up to date), 1 lint errors, 2 `--check` found a difference.
pub fn run(args: &AlertsArgs, printer: &Printer) -> anyhow::Result<u8> {
    let Some(loaded) = super::shared::load_checked(&args.paths, args.targets.as_deref(), printer)?
    else {
        return Ok(1);
    };
    let format = match args.format {
        AlertsFormat::Prometheus => Format::Prometheus,
        AlertsFormat::PrometheusOperator => Format::PrometheusOperator,
        AlertsFormat::CloudMonitoring => {
            let files = alerts::cloud_monitoring(&loaded.channels);
            return policies(args, &files, &CLOUD_MONITORING, printer);
        }
        AlertsFormat::AzureMonitor => {
            let files = alerts::azure_monitor(&loaded.channels, &loaded.targets);
            return policies(args, &files, &AZURE_MONITOR, printer);
        }
    };
    let built = alerts::build(&loaded.channels, &loaded.targets);
    let text = alerts::render(&built, format);
    let rules: usize = built.groups.iter().map(|g| g.rules.len()).sum();
    let mut report = format!(
        "{rules} rules in {} groups (one per RabbitMQ or Kafka target with alarms)",
        built.groups.len()
    );
    if !built.sqs_channels.is_empty() {
        let _ = write!(
            report,
            "; {} left out: their alarms are CloudWatch alarms, provisioned by `dlqctl apply`",
            match built.sqs_channels.len() {
                1 => "1 SQS channel".to_owned(),
                n => format!("{n} SQS channels"),
            }
        );
    }
    if !built.pubsub_channels.is_empty() {
        let _ = write!(
            report,
            "; {} left out: their alerts are Cloud Monitoring alert policies, written by `dlqctl alerts --format cloud-monitoring --out DIR`",
            match built.pubsub_channels.len() {
                1 => "1 Pub/Sub channel".to_owned(),
                n => format!("{n} Pub/Sub channels"),
            }
        );
    }
    if let Some(path) = &args.check {
        let have = match fs_err::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                printer.err(&format!(
                    "{} does not exist; write it with `dlqctl alerts --out {}`",
                    path.display(),
                    path.display()
                ));
                return Ok(2);
            }
            Err(e) => return Err(e.into()),
        };
        if have == text {
            printer.err(&format!("{} is up to date ({report}).", path.display()));
            return Ok(0);
        }
        super::shared::print_stale_diff(printer, path, &have, &text);
        printer.err(&format!(
            "{} is stale: it differs from what the specs produce; regenerate it with `dlqctl alerts --out {}`",
            path.display(),
            path.display()
        ));
        return Ok(2);
    }
    match &args.out {
        Some(path) => {
            refuse_overwrite(path)?;
            fs_err::write(path, &text)?;
            printer.err(&format!("Wrote {} ({report}).", path.display()));
        }
        None => {
            printer.out(&text);
            printer.err(&report);
        }
    }
    Ok(0)
}

/// `--out` replaces only a file `dlqctl alerts` wrote (its first line says so), never a spec
/// or a hand-written rules file.
fn refuse_overwrite(path: &std::path::Path) -> anyhow::Result<()> {
    if !path.exists() {
        return Ok(());
    }
    let ours =
        path.is_file() && fs_err::read_to_string(path).is_ok_and(|t| t.starts_with(alerts::HEADER));
    if !ours {
        anyhow::bail!(
            "not overwriting {}: it was not written by `dlqctl alerts` (its first line is not `{}`); nothing was written; choose another --out",
            path.display(),
            alerts::HEADER.trim_end()
        );
    }
    Ok(())
}

/// The words of one folder format.
struct FolderFormat {
    /// The `--format` value.
    flag: &'static str,
    /// What a file holds, plural (`alert policies`).
    what: &'static str,
    /// One file's word, and many files' (`policy`, `policies`).
    one: &'static str,
    many: &'static str,
    /// Whose files they are (`Pub/Sub channel`).
    whose: &'static str,
    /// Where the mark of dlqctl's files is (`userLabels`).
    mark_at: &'static str,
}

const CLOUD_MONITORING: FolderFormat = FolderFormat {
    flag: "cloud-monitoring",
    what: "alert policies",
    one: "alert policy",
    many: "alert policies",
    whose: "Pub/Sub channel",
    mark_at: "userLabels",
};

const AZURE_MONITOR: FolderFormat = FolderFormat {
    flag: "azure-monitor",
    what: "metric alerts",
    one: "metric alert",
    many: "metric alerts",
    whose: "Azure Service Bus channel with a depth alarm",
    mark_at: "resources[].tags",
};

/// `--format cloud-monitoring` and `--format azure-monitor`: the files in the folder `--out`
/// names (written; a file dlqctl wrote that the specs no longer produce is removed), or
/// checked against the folder `--check` names (exit 2 when one differs, is missing or is left
/// over).
fn policies(
    args: &AlertsArgs,
    files: &[alerts::PolicyFile],
    format: &FolderFormat,
    printer: &Printer,
) -> anyhow::Result<u8> {
    let report = format!(
        "{} {} (one per {} and tier)",
        files.len(),
        if files.len() == 1 {
            format.one
        } else {
            format.many
        },
        format.whose
    );
    let ours_in = |dir: &std::path::Path| -> anyhow::Result<Vec<String>> {
        Ok(super::shared::generated_in(dir, alerts::is_our_policy)?
            .into_iter()
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_owned))
            .collect())
    };
    let wanted = |name: &str| files.iter().any(|f| f.name == name);
    if let Some(dir) = &args.check {
        if !dir.is_dir() {
            printer.err(&format!(
                "{} does not exist or is not a folder; write it with `dlqctl alerts --format {} --out {}`",
                dir.display(),
                format.flag,
                dir.display()
            ));
            return Ok(2);
        }
        let mut stale = Vec::new();
        for f in files {
            let path = dir.join(&f.name);
            match fs_err::read_to_string(&path) {
                Ok(have) if have == f.text => {}
                Ok(have) => {
                    super::shared::print_stale_diff(printer, &path, &have, &f.text);
                    stale.push(format!("{} differs", f.name));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    stale.push(format!("{} is missing", f.name));
                }
                Err(e) => return Err(e.into()),
            }
        }
        for name in ours_in(dir)? {
            if !wanted(&name) {
                stale.push(format!("{name} is no longer produced by the specs"));
            }
        }
        if stale.is_empty() {
            printer.err(&format!("{} is up to date ({report}).", dir.display()));
            return Ok(0);
        }
        printer.err(&format!(
            "{} is stale: {}; regenerate it with `dlqctl alerts --format {} --out {}`",
            dir.display(),
            stale.join(", "),
            format.flag,
            dir.display()
        ));
        return Ok(2);
    }
    let Some(dir) = &args.out else {
        anyhow::bail!(
            "--format {} writes one file per channel and tier: give the folder with --out DIR (or --check DIR)",
            format.flag
        );
    };
    fs_err::create_dir_all(dir)?;
    // Nothing is written unless every file it would replace is dlqctl's.
    for f in files {
        let path = dir.join(&f.name);
        if path.exists() && !fs_err::read_to_string(&path).is_ok_and(|t| alerts::is_our_policy(&t))
        {
            anyhow::bail!(
                "not overwriting {}: it is not one of the {} `dlqctl alerts` writes (no {}.{} = {}); nothing was written; choose another --out",
                path.display(),
                format.what,
                format.mark_at,
                alerts::POLICY_MARK.0,
                alerts::POLICY_MARK.1
            );
        }
    }
    let mut removed = 0;
    for name in ours_in(dir)? {
        if !wanted(&name) {
            fs_err::remove_file(dir.join(&name))?;
            removed += 1;
        }
    }
    for f in files {
        fs_err::write(dir.join(&f.name), &f.text)?;
    }
    let removed = match removed {
        0 => String::new(),
        1 => format!("; removed 1 {} the specs no longer produce", format.one),
        n => format!("; removed {n} {} the specs no longer produce", format.many),
    };
    printer.err(&format!("Wrote {report} to {}{removed}.", dir.display()));
    Ok(0)
}
