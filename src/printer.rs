//! The one owner of the terminal.
//!
//! Commands never print directly (clippy's `print_stdout`/`print_stderr` lints enforce it);
//! they hand text to the [`Printer`], which knows whether colour is wanted, and which treats a
//! closed pipe (`dlqctl plan | head`) as a normal end rather than an error.

use std::io::{IsTerminal, Write};

use crate::cli::ColorChoice;

#[derive(Debug, Clone, Copy)]
pub struct Printer {
    color_stdout: bool,
    color_stderr: bool,
}

/// Whether the environment forbids colour (<https://no-color.org>: any non-empty value).
fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
        || std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

impl Printer {
    pub fn new(choice: ColorChoice) -> Self {
        let auto = |tty: bool| tty && !no_color_env();
        let (o, e) = match choice {
            ColorChoice::Always => (true, true),
            ColorChoice::Never => (false, false),
            ColorChoice::Auto => (
                auto(std::io::stdout().is_terminal()),
                auto(std::io::stderr().is_terminal()),
            ),
        };
        Printer {
            color_stdout: o,
            color_stderr: e,
        }
    }

    /// Whether text for stdout may carry colour.
    pub fn color(&self) -> bool {
        self.color_stdout
    }

    pub fn color_stderr(&self) -> bool {
        self.color_stderr
    }

    /// Writes to stdout. A closed pipe ends the process quietly with success.
    pub fn out(&self, text: &str) {
        let mut lock = std::io::stdout().lock();
        if let Err(e) = lock.write_all(text.as_bytes()).and_then(|()| lock.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
        }
    }

    /// Writes a line to stdout.
    pub fn line(&self, text: &str) {
        self.out(&format!("{text}\n"));
    }

    /// Writes a line to stderr (progress, warnings, errors).
    pub fn err(&self, text: &str) {
        let mut lock = std::io::stderr().lock();
        let _ = writeln!(lock, "{text}");
    }

    /// Stderr text styled when colour is on: `bold red` for errors, `yellow` for warnings.
    pub fn paint_err(&self, text: &str, style: Style) -> String {
        paint(text, style, self.color_stderr)
    }

    pub fn paint(&self, text: &str, style: Style) -> String {
        paint(text, style, self.color_stdout)
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Style {
    Error,
    Warning,
    Good,
    Bold,
    Dim,
}

fn paint(text: &str, style: Style, on: bool) -> String {
    if !on {
        return text.to_owned();
    }
    let code = match style {
        Style::Error => "1;31",
        Style::Warning => "33",
        Style::Good => "32",
        Style::Bold => "1",
        Style::Dim => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}
