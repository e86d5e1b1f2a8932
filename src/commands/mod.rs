//! One module per subcommand; each takes its parsed arguments and the printer and returns
//! the process exit code. `anyhow` stops here: below, errors are typed.

mod lint;
mod schema;

use crate::cli::Command;
use crate::printer::Printer;

pub fn dispatch(command: Command, printer: &Printer) -> anyhow::Result<u8> {
    match command {
        Command::Lint(args) => lint::run(&args, printer),
        Command::Schema(args) => schema::run(&args, printer),
    }
}
