//! `dlqctl alerts`: writes (or checks) the Prometheus alerting rules of the specs' RabbitMQ
//! and Kafka channels. Offline: it reads specs, never a server.

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
    let built = alerts::build(&loaded.channels, &loaded.targets);
    let format = match args.format {
        AlertsFormat::Prometheus => Format::Prometheus,
        AlertsFormat::PrometheusOperator => Format::PrometheusOperator,
    };
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
            "; {} left out: their depth and age are Cloud Monitoring metrics (subscription/num_undelivered_messages, subscription/oldest_unacked_message_age)",
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
        let diff = similar::TextDiff::from_lines(&have, &text);
        let shown = diff
            .unified_diff()
            .context_radius(2)
            .header(&path.display().to_string(), "from the specs")
            .to_string();
        printer.out(&shown);
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
