//! One module per subcommand; each takes its parsed arguments and the printer and returns
//! the process exit code. `anyhow` stops here: below, errors are typed.

mod alerts;
mod apply;
mod archive;
mod audit;
mod completions;
mod dashboards;
mod exporter;
mod graph;
mod import;
mod lint;
mod man;
mod plan;
mod redrive;
mod schema;
mod shared;
mod status;

use crate::cli::Command;
use crate::printer::Printer;

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
        Command::Archive(args) => archive::run(&args, printer),
        Command::Audit(args) => audit::run(&args, printer),
        Command::Alerts(args) => alerts::run(&args, printer),
        Command::Dashboards(args) => dashboards::run(&args, printer),
        Command::Graph(args) => graph::run(&args, printer),
        Command::Completions(args) => completions::run(&args, printer),
        Command::Man(args) => man::run(&args, printer),
    }
}
