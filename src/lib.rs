//! dlqctl: declarative dead-letter-queue provisioning.
//!
//! Files → validated spec (`spec`) → desired resources → diff with the live systems → a plan
//! value → apply. This crate root only parses the command line and dispatches; each
//! subcommand is one function in `commands`, and one [`printer::Printer`] owns the terminal.

pub mod backend;
pub mod cli;
pub mod commands;
pub mod diag;
pub mod engine;
pub mod plan;
pub mod printer;
pub mod resource;
pub mod spec;

use std::process::ExitCode;

use clap::Parser;

/// Runs dlqctl with the process's arguments; the exit code follows each command's contract.
pub fn run() -> ExitCode {
    let cli = cli::Cli::parse();
    let printer = printer::Printer::new(cli.color);
    let on_error = cli.command.error_code();
    match commands::dispatch(cli.command, &printer) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            printer.err(&format!(
                "{} {e:#}",
                printer.paint_err("error:", printer::Style::Error)
            ));
            ExitCode::from(on_error)
        }
    }
}
