//! The command reference, docs/cli.md: every command's synopsis, arguments, flags, defaults,
//! possible values and environment variables, rendered from the clap definitions in
//! `src/cli.rs` (the same ones `--help`, `dlqctl man` and the completions come from), so the
//! reference cannot drift from the binary.
//!
//! A unit test below compares docs/cli.md with [`render`] and fails when it is stale;
//! `DLQCTL_BLESS=1 cargo test --lib cli_reference` rewrites it. A test, not a subcommand:
//! the page is for the repository, not for users of the binary, and a hidden subcommand would
//! still be one more thing the binary carries, parses and must keep out of completions and man
//! pages. As for uv's `cargo dev generate-cli-reference`, regenerating is one command.

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command, CommandFactory as _};

use crate::cli::Cli;

/// The reference's path in the repository.
pub const PATH: &str = "docs/cli.md";

/// The command that rewrites [`PATH`], as the page's header and README give it.
pub const REGENERATE: &str = "DLQCTL_BLESS=1 cargo test --lib cli_reference";

/// docs/cli.md as this binary's definitions describe it.
pub fn render() -> String {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Built, subcommands carry their full names (`dlqctl lint`) and the global flags.
    cmd.build();
    let mut out = String::new();
    let _ = writeln!(out, "# Command reference\n");
    let _ = writeln!(
        out,
        "<!-- Generated from src/cli.rs: do not edit. Regenerate with `{REGENERATE}`. -->\n"
    );
    let _ = writeln!(
        out,
        "Every command, argument and flag of `dlqctl`, generated from the definitions `--help` \
         prints (src/cli.rs). Do not edit by hand: regenerate with `{REGENERATE}` (a unit test \
         fails while this page is stale).\n"
    );
    let subs = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .collect::<Vec<_>>();
    for sub in &subs {
        let name = sub.get_name();
        let _ = writeln!(
            out,
            "- [`dlqctl {name}`](#dlqctl-{name}): {}",
            sentence(&sub.get_about().map(|a| a.to_string()).unwrap_or_default())
        );
    }
    out.push('\n');
    section(&mut out, &cmd, "dlqctl", true);
    for sub in subs {
        section(&mut out, sub, &format!("dlqctl {}", sub.get_name()), false);
    }
    out
}

/// One command: what it does, its synopsis, arguments, options and examples.
fn section(out: &mut String, cmd: &Command, title: &str, top: bool) {
    let _ = writeln!(out, "## `{title}`\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", prose(&sentence(&about.to_string())));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    let _ = writeln!(out, "```text\n{usage}\n```\n");
    let args = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        // The global flags are listed once, under `dlqctl`.
        .filter(|a| top || !a.is_global_set())
        // `--help` is on every command and `--version` on the top one: clap's own.
        .filter(|a| !matches!(a.get_action(), ArgAction::Help | ArgAction::Version) || top)
        .collect::<Vec<_>>();
    let (positionals, options): (Vec<&Arg>, Vec<&Arg>) =
        args.into_iter().partition(|a| a.is_positional());
    if !positionals.is_empty() {
        let _ = writeln!(out, "Arguments:\n");
        for a in positionals {
            item(out, a);
        }
        out.push('\n');
    }
    if !options.is_empty() {
        let _ = writeln!(
            out,
            "{}\n",
            if top {
                "Options (`--color` and `--verbose` apply to every command):"
            } else {
                "Options:"
            }
        );
        for a in options {
            item(out, a);
        }
        out.push('\n');
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let _ = writeln!(out, "```text\n{}\n```\n", after.to_string().trim_end());
    }
}

/// One argument or flag as a list item: its form, help, default, env var and values.
fn item(out: &mut String, a: &Arg) {
    let mut facts = Vec::new();
    if a.is_required_set() {
        facts.push("Required.".to_owned());
    }
    let takes_value = a.get_action().takes_values();
    let defaults = a
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect::<Vec<_>>();
    if takes_value && !defaults.is_empty() {
        facts.push(format!("Default: {}.", defaults.join(", ")));
    }
    if let Some(env) = a.get_env() {
        facts.push(format!("Env: `{}`.", env.to_string_lossy()));
    }
    let values = if takes_value {
        a.get_possible_values()
            .into_iter()
            .filter(|v| !v.is_hide_set())
            .collect()
    } else {
        Vec::new()
    };
    let help = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| sentence(&h.to_string()))
        .unwrap_or_default();
    let mut text = prose(&help);
    if !facts.is_empty() {
        text.push(' ');
        text.push_str(&facts.join(" "));
    }
    let _ = writeln!(out, "- `{}`: {}", form(a), indent(&text));
    if !values.is_empty() {
        let _ = writeln!(out, "  Possible values:");
        for v in values {
            match v.get_help() {
                Some(h) => {
                    let _ = writeln!(
                        out,
                        "  - `{}`: {}",
                        v.get_name(),
                        prose(&sentence(&h.to_string()))
                    );
                }
                None => {
                    let _ = writeln!(out, "  - `{}`", v.get_name());
                }
            }
        }
    }
}

/// How an argument is written: `<CHANNEL>`, `[PATHS]...`, `-q, --quiet`, `--format <FORMAT>`.
fn form(a: &Arg) -> String {
    let names = a
        .get_value_names()
        .map(|n| n.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        .unwrap_or_else(|| vec![a.get_id().as_str().to_uppercase()]);
    let value = names
        .iter()
        .map(|n| format!("<{n}>"))
        .collect::<Vec<_>>()
        .join(" ");
    let many = matches!(a.get_action(), ArgAction::Append)
        || a.get_num_args().is_some_and(|n| n.max_values() > 1);
    if a.is_positional() {
        let value = if a.is_required_set() {
            value
        } else {
            format!("[{}]", value.trim_start_matches('<').trim_end_matches('>'))
        };
        return if many { format!("{value}...") } else { value };
    }
    let mut form = match (a.get_short(), a.get_long()) {
        (Some(s), Some(l)) => format!("-{s}, --{l}"),
        (None, Some(l)) => format!("--{l}"),
        (Some(s), None) => format!("-{s}"),
        (None, None) => a.get_id().to_string(),
    };
    if a.get_action().takes_values() {
        form.push(' ');
        form.push_str(&value);
    }
    if matches!(a.get_action(), ArgAction::Count) {
        form.push_str("...");
    }
    form
}

/// Help text ends as a sentence: clap drops the full stop of a one-line help.
fn sentence(text: &str) -> String {
    let text = text.trim();
    match text.chars().last() {
        Some(c) if c.is_alphanumeric() || matches!(c, ')' | '`' | '\'' | '"') => {
            format!("{text}.")
        }
        _ => text.to_owned(),
    }
}

/// Help text as markdown: outside code spans, `<`, `>` and `*` are written as text, not
/// as HTML or emphasis (`*.yaml, *.yml`, `dlqctl-<command>.1`). A code span is CommonMark's:
/// a run of backticks up to the next run of the same length; a run without one is text.
fn prose(text: &str) -> String {
    let chars = text.chars().collect::<Vec<_>>();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '`' {
            let n = run_at(i);
            let close = (i + n..chars.len())
                .find(|&j| chars[j] == '`' && (j == 0 || chars[j - 1] != '`') && run_at(j) == n);
            let end = close.map_or(i + n, |j| j + n);
            out.extend(&chars[i..end]);
            i = end;
            continue;
        }
        if matches!(c, '<' | '>' | '*') {
            out.push('\\');
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Later paragraphs of a list item's text, indented to stay inside the item.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("  {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim_start()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_reference_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(PATH);
        let fresh = render();
        if std::env::var_os("DLQCTL_BLESS").is_some_and(|v| v == "1") {
            fs_err::write(&path, &fresh).expect("write docs/cli.md");
            return;
        }
        let committed = fs_err::read_to_string(&path).unwrap_or_default();
        if committed != fresh {
            let first = committed
                .lines()
                .zip(fresh.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| committed.lines().count().min(fresh.lines().count()));
            panic!(
                "{PATH} is stale (first difference at line {}): run `{REGENERATE}` and commit it",
                first + 1
            );
        }
    }

    #[test]
    fn every_command_and_flag_is_in_the_reference() {
        let text = render();
        let cmd = Cli::command();
        for sub in cmd.get_subcommands() {
            assert!(
                text.contains(&format!("## `dlqctl {}`", sub.get_name())),
                "{}",
                sub.get_name()
            );
            for a in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(long) = a.get_long() {
                    let listed = text.lines().any(|l| {
                        l.strip_prefix("- `")
                            .and_then(|l| l.split_once('`'))
                            .is_some_and(|(form, _)| {
                                form.split([' ', ',']).any(|w| w == format!("--{long}"))
                            })
                    });
                    assert!(listed, "--{long} of {}", sub.get_name());
                }
            }
        }
        assert!(text.contains("Env: `DLQCTL_READ_TIMEOUT`."));
    }

    #[test]
    fn forms_and_prose_are_markdown_safe() {
        assert_eq!(
            prose("read *.yaml, *.yml into dlqctl-<command>.1, not `a*b`"),
            "read \\*.yaml, \\*.yml into dlqctl-\\<command\\>.1, not `a*b`"
        );
        assert_eq!(
            prose("a ```mermaid block; `<x>` and <y>"),
            "a ```mermaid block; `<x>` and \\<y\\>"
        );
        assert_eq!(
            sentence("Exit 1 on warnings too"),
            "Exit 1 on warnings too."
        );
        assert_eq!(sentence("Done."), "Done.");
        assert_eq!(indent("a\n\nb"), "a\n\n  b");
    }
}
