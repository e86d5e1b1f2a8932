//! The one owner of the terminal.
//!
//! Commands never print directly (clippy's `print_stdout`/`print_stderr` lints enforce it);
//! they hand text to the [`Printer`], which knows whether colour is wanted, and which treats a
//! closed pipe (`dlqctl plan | head`) as a normal end rather than an error.
//!
//! `-v` logging goes through here too: [`Printer::start_logging`] sends dlqctl's own
//! `tracing` events to stderr, line by line, with every secret dlqctl was handed
//! ([`never_show`], kept in [`crate::secrets`]) cut out of each line as a last guard behind
//! the call sites, which log names of variables and URLs without userinfo, never values.
//!
//! A failed write of stdout is kept, not dropped: [`crate::run`] turns it into one line on
//! stderr and a non-zero exit (issue 31).

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// When to use colour (`--color`): the printer's to decide, the CLI only offers the choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Copy)]
pub struct Printer {
    color_stdout: bool,
    color_stderr: bool,
    /// `-v`'s count: besides the log, it asks for every lint warning in full where commands
    /// other than `lint` fold them to one line per rule.
    verbose: u8,
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
            verbose: 0,
        }
    }

    /// The printer with `-v`'s count (0: not given).
    pub fn with_verbosity(self, verbose: u8) -> Self {
        Printer { verbose, ..self }
    }

    /// `-v`'s count.
    pub fn verbosity(&self) -> u8 {
        self.verbose
    }

    /// Whether text for stdout may carry colour.
    pub fn color(&self) -> bool {
        self.color_stdout
    }

    pub fn color_stderr(&self) -> bool {
        self.color_stderr
    }

    /// Writes to stdout. A closed pipe ends the process quietly with success (`dlqctl plan |
    /// head`). Any other failure (a full disk, `/dev/full`, a revoked terminal) is kept: the
    /// rest of the output is not attempted, and [`crate::run`] reports it in one line and
    /// exits non-zero once the command has finished (a redrive finishes what is in flight and
    /// says on stderr what it moved: [`Printer::out_failure`]).
    pub fn out(&self, text: &str) {
        if self.out_failure().is_some() {
            return;
        }
        let mut lock = std::io::stdout().lock();
        if let Err(e) = lock.write_all(text.as_bytes()).and_then(|()| lock.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            if let Ok(mut f) = OUT_FAILURE.lock()
                && f.is_none()
            {
                *f = Some(e.to_string());
            }
        }
    }

    /// Why stdout could not be written, if a write failed (the first failure).
    pub fn out_failure(&self) -> Option<String> {
        OUT_FAILURE.lock().ok().and_then(|f| f.clone())
    }

    /// The one line that says the output was lost: `error: cannot write the output to stdout
    /// (why)`, then `then` (what the command did all the same), or nothing when stdout was
    /// written whole. Said once, however often it is asked; returns whether stdout failed.
    pub fn report_out_failure(&self, then: &str) -> bool {
        let Some(why) = self.out_failure() else {
            return false;
        };
        if let Ok(mut said) = OUT_FAILURE_SAID.lock()
            && !*said
        {
            *said = true;
            self.err(&format!(
                "{} cannot write the output to stdout ({why}){then}",
                self.paint_err("error:", Style::Error)
            ));
        }
        true
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

impl Printer {
    /// Turns on `-v` logging: 1 shows targets, endpoints, each request (method, path, outcome,
    /// time) and retries; 2 adds the steps in between; 3 everything dlqctl logs. Only dlqctl's
    /// own events: the SDKs and HTTP stacks below log headers and bodies, which may hold
    /// credentials, so they stay silent whatever the level.
    pub fn start_logging(&self, verbose: u8) {
        use tracing::level_filters::LevelFilter;
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let level = match verbose {
            0 => return,
            1 => LevelFilter::INFO,
            2 => LevelFilter::DEBUG,
            _ => LevelFilter::TRACE,
        };
        for var in AWS_SECRET_VARS {
            if let Ok(v) = std::env::var(var) {
                never_show(&v);
            }
        }
        let only_dlqctl = tracing_subscriber::filter::Targets::new().with_target("dlqctl", level);
        let lines = tracing_subscriber::fmt::layer()
            .with_writer(|| LogLine)
            .with_timer(tracing_subscriber::fmt::time::Uptime::default())
            .with_target(false);
        // Fails only if a subscriber is already set (a second call): keep the first.
        let _ = tracing_subscriber::registry()
            .with(lines)
            .with(only_dlqctl)
            .try_init();
    }
}

/// The first failure to write stdout (not a closed pipe), for the exit code.
static OUT_FAILURE: Mutex<Option<String>> = Mutex::new(None);
/// Whether it was reported already.
static OUT_FAILURE_SAID: Mutex<bool> = Mutex::new(false);

/// The AWS SDK reads these itself; `-v` cuts their values out of its lines all the same.
const AWS_SECRET_VARS: [&str; 2] = ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"];

/// The registry of credentials lives with the rest of what is never shown; callers have
/// always found it here.
pub use crate::secrets::never_show;
use crate::secrets::scrub;

/// One log line on its way to stderr: the formatter hands over each event whole.
struct LogLine;

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = scrub(&String::from_utf8_lossy(buf));
        let mut lock = std::io::stderr().lock();
        // A closed stderr leaves nobody to tell.
        let _ = lock.write_all(text.as_bytes());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
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
