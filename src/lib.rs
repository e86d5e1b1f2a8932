//! dlqctl: declarative dead-letter-queue provisioning.
//!
//! Files → validated spec (`spec`) → desired resources → diff with the live systems → a plan
//! value → apply. This crate root only parses the command line and dispatches; each
//! subcommand is one function in `commands`, and one [`printer::Printer`] owns the terminal.

pub mod archive;
pub mod backend;
pub mod cli;
pub mod cli_reference;
pub mod commands;
pub mod diag;
pub mod engine;
pub mod graph;
pub mod integrity;
pub mod journal;
pub mod plan;
pub mod printer;
pub mod redrive;
pub mod resource;
pub mod secrets;
pub mod spec;
pub mod status;
pub mod version;

use std::process::ExitCode;

use clap::Parser;

pub use version::VERSION;

/// The exit code of a command line that cannot be parsed (an unknown flag, a missing value):
/// EX_USAGE, so that it can never be read as `--detailed-exitcode`'s 2, "changes present".
pub const USAGE_EXIT: u8 = 64;

/// Runs dlqctl with the process's arguments; the exit code follows each command's contract.
pub fn run() -> ExitCode {
    // dlqctl run again as a jq worker (status::jq_worker): not a command of the CLI.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == status::jq_worker::ARG)
    {
        return status::jq_worker::serve(redrive::transform::worker);
    }
    status::jq_worker::enable();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout and succeed; anything else is a usage error.
            let code = if e.use_stderr() { USAGE_EXIT } else { 0 };
            // clap writes its own message (with colour only on a terminal); a closed stream
            // leaves nothing to report to.
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let printer = printer::Printer::new(cli.color).with_verbosity(cli.verbose);
    printer.start_logging(cli.verbose);
    let on_error = cli.command.error_code();
    let result = commands::dispatch(cli.command, &printer);
    // Output that could not be written is a failure whatever the command concluded: the
    // record a script or a person relies on is not there (issue 31).
    if printer.report_out_failure("") {
        if let Err(e) = &result {
            printer.err(&format!(
                "{} {}",
                printer.paint_err("error:", printer::Style::Error),
                status::safe_lines(&format!("{e:#}"))
            ));
        }
        return ExitCode::from(match result {
            Ok(code) if code != 0 && code != 2 => code,
            _ => on_error.max(1),
        });
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // An error may quote a server (a reason, a name it listed): never raw bytes.
            printer.err(&format!(
                "{} {}",
                printer.paint_err("error:", printer::Style::Error),
                status::safe_lines(&format!("{e:#}"))
            ));
            if e.downcast_ref::<cli::UsageError>().is_some() {
                ExitCode::from(USAGE_EXIT)
            } else {
                ExitCode::from(on_error)
            }
        }
    }
}
