//! README.md and docs/ against the binary: the contradictions a review found (issue 32), kept
//! fixed where a test can see them. Every `--flag` shown with `dlqctl <command>` is one that
//! command has; every flag written alone is one some command has; every table is whole; every
//! list of the backends names them all; and a few sentences that said the opposite of what
//! the binary does stay gone. docs/cli.md itself is generated and checked by
//! `src/cli_reference.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use clap::CommandFactory as _;
use dlqctl::spec::model::Backend;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, every page of docs/, and the CI examples of docs/ci/ (all code: see
/// [`code_of`]), with their text.
fn pages() -> Vec<(String, String)> {
    let mut paths = vec![root().join("README.md")];
    let mut docs = fs_err::read_dir(root().join("docs"))
        .expect("docs/ readable")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect::<Vec<_>>();
    docs.sort();
    paths.extend(docs);
    let mut ci = fs_err::read_dir(root().join("docs/ci"))
        .expect("docs/ci/ readable")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect::<Vec<_>>();
    ci.sort();
    paths.extend(ci);
    paths
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(root()).unwrap_or(&p).display().to_string();
            let text = fs_err::read_to_string(&p).expect("page readable");
            (rel, text)
        })
        .collect()
}

/// Each command's long flags, `""` for `dlqctl` itself; the global ones are on every command.
fn flags() -> BTreeMap<String, BTreeSet<String>> {
    let mut cmd = dlqctl::cli::Cli::command();
    cmd.build();
    let longs = |c: &clap::Command| {
        c.get_arguments()
            .filter_map(|a| a.get_long().map(str::to_owned))
            .collect::<BTreeSet<_>>()
    };
    let mut out = BTreeMap::from([(String::new(), longs(&cmd))]);
    for sub in cmd.get_subcommands() {
        out.insert(sub.get_name().to_owned(), longs(sub));
    }
    out
}

/// Where a piece of shell-like text was found, for the failure message.
struct Shown {
    page: String,
    line: usize,
    text: String,
}

/// A piece of code a page shows: a line of a fenced block (a `\` continuation joined to the
/// next line) or an inline code span of the prose, with where it is.
struct Code {
    line: usize,
    text: String,
    /// The `## ` heading it is under ("" before the first).
    section: String,
}

fn code_of(page: &str, text: &str) -> Vec<Code> {
    let mut out = Vec::new();
    // A file that is not markdown (docs/ci/'s workflows) is code from end to end.
    let mut fence: Option<String> = (!page.ends_with(".md")).then(|| "\u{0}".to_owned());
    let mut pending = String::new();
    let mut pending_line = 0;
    let mut section = String::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        if let Some(f) = &fence {
            if trimmed.starts_with(f.as_str()) {
                fence = None;
                continue;
            }
            if pending.is_empty() {
                pending_line = n;
            }
            if let Some(head) = line.strip_suffix('\\') {
                pending.push_str(head);
                pending.push(' ');
                continue;
            }
            pending.push_str(line);
            out.push(Code {
                line: pending_line,
                text: std::mem::take(&mut pending),
                section: section.clone(),
            });
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(trimmed.chars().take(3).collect());
            continue;
        }
        if let Some(h) = line.strip_prefix("## ") {
            section = h.trim().to_owned();
        }
        out.extend(spans(line).into_iter().map(|s| Code {
            line: n,
            text: s,
            section: section.clone(),
        }));
    }
    out
}

/// The inline code spans of one line of prose (CommonMark's: a run of backticks up to the
/// next run of the same length).
fn spans(line: &str) -> Vec<String> {
    let chars = line.chars().collect::<Vec<_>>();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = run_at(i);
        let close = (i + n..chars.len())
            .find(|&j| chars[j] == '`' && chars[j - 1] != '`' && run_at(j) == n);
        match close {
            Some(j) => {
                out.push(chars[i + n..j].iter().collect::<String>().trim().to_owned());
                i = j + n;
            }
            None => i += n,
        }
    }
    out
}

/// A long flag as written (`--format`, `--format=json`, `[--quiet]`), without its value;
/// `None` for placeholders and patterns (`--allow-*`, `--<flag>`, a bare `--`, `---`).
fn flag_name(token: &str) -> Option<&str> {
    let token = token.trim_start_matches(['[', '(', '`']);
    let name = token.strip_prefix("--")?;
    let name = name.split('=').next().unwrap_or(name);
    let name = name.trim_end_matches([',', '.', ';', ':', ')', ']', '`', '\'', '"']);
    (name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
    .then_some(name)
}

/// Each `dlqctl <command> ...` in a piece of code, with the long flags written after it, up
/// to the end of that command: a pipe, `&&`, `;`, a `#` comment, or (in a fenced block, where
/// examples are followed by aligned explanations) a gap of three spaces.
fn invocations(
    code: &str,
    commands: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for piece in code.split("   ") {
        let tokens = piece
            .split_whitespace()
            // `$(dlqctl ...)`, `(dlqctl`, a code span quoted in a comment: the command
            // starts after the punctuation.
            .map(|t| t.trim_start_matches(['$', '(', '[', '"', '\'', '`']))
            .collect::<Vec<_>>();
        let mut i = 0;
        while i < tokens.len() {
            let t = tokens[i];
            if t.starts_with('#') {
                break;
            }
            if t != "dlqctl" && !t.ends_with("/dlqctl") {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            let mut sub = String::new();
            match tokens.get(j) {
                Some(s) if !s.is_empty() && commands.contains_key(*s) => {
                    sub = (*s).to_owned();
                    j += 1;
                }
                // `dlqctl --version`, or `dlqctl` at the end of the code.
                Some(s) if s.starts_with('-') => {}
                None => {}
                // A placeholder (`dlqctl <COMMAND> --help`, `dlqctl CMD`): no one command.
                Some(_) => {
                    i = j;
                    continue;
                }
            }
            let mut flags = Vec::new();
            while j < tokens.len() {
                let t = tokens[j];
                if matches!(t, "|" | "||" | "&&" | ";") || t.starts_with('#') {
                    break;
                }
                if let Some(f) = flag_name(t) {
                    flags.push(f.to_owned());
                }
                j += 1;
                if t.ends_with(';') || t.ends_with(')') || t.ends_with('`') {
                    break;
                }
            }
            out.push((sub, flags));
            i = j;
        }
    }
    out
}

#[test]
fn every_flag_shown_with_a_command_is_one_that_command_has() {
    let commands = flags();
    let global = commands.get("").cloned().unwrap_or_default();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (page, text) in pages() {
        for code in code_of(&page, &text) {
            for (sub, used) in invocations(&code.text, &commands) {
                let has = commands.get(&sub).cloned().unwrap_or_default();
                for flag in used {
                    checked += 1;
                    if !has.contains(&flag) && !global.contains(&flag) {
                        wrong.push(Shown {
                            page: page.clone(),
                            line: code.line,
                            text: format!("`dlqctl {sub}` has no --{flag}: {}", code.text.trim()),
                        });
                    }
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} flags found: is the scan broken?"
    );
    assert!(wrong.is_empty(), "{}", report(&wrong));
}

#[test]
fn every_flag_written_alone_is_one_some_command_has() {
    let commands = flags();
    let all = commands
        .values()
        .flatten()
        .cloned()
        .collect::<BTreeSet<_>>();
    let mut wrong = Vec::new();
    for (page, text) in pages() {
        for code in code_of(&page, &text) {
            // The README's Development section documents the repository's own tools
            // (cargo, scripts/mutants), whose flags are theirs.
            if page == "README.md" && code.section.starts_with("Development") {
                continue;
            }
            // A flag on its own (`--no-peek`, `--format json`): not another tool's command.
            let Some(flag) = code.text.split_whitespace().next().and_then(flag_name) else {
                continue;
            };
            if !all.contains(flag) {
                wrong.push(Shown {
                    page: page.clone(),
                    line: code.line,
                    text: format!("no dlqctl command has --{flag}: `{}`", code.text),
                });
            }
        }
    }
    assert!(wrong.is_empty(), "{}", report(&wrong));
}

/// The flags a synopsis or flag table must name: all of the command's but `--help` and the
/// global ones (listed once, under `dlqctl`, in docs/cli.md).
fn own_flags(sub: &str) -> BTreeSet<String> {
    let commands = flags();
    let global = commands.get("").cloned().unwrap_or_default();
    commands
        .get(sub)
        .map(|f| {
            f.iter()
                .filter(|f| *f != "help" && !global.contains(*f))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_synopsis_names_every_flag_of_its_command() {
    // A synopsis: a line of a fenced block that starts with `dlqctl <command>` and writes
    // optional flags in brackets (`[--quiet]`), with the indented `[...` lines that continue
    // it. Each must be whole: a reader takes it for the command's full form.
    let commands = flags();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for (page, text) in pages() {
        if page == "docs/cli.md" {
            continue;
        }
        let lines = text.lines().collect::<Vec<_>>();
        let mut in_fence = false;
        for (i, line) in lines.iter().enumerate() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            let mut words = line.split_whitespace();
            if !in_fence || words.next() != Some("dlqctl") || !line.contains("[--") {
                continue;
            }
            let Some(sub) = words.next().filter(|s| commands.contains_key(*s)) else {
                continue;
            };
            let mut synopsis = line.to_string();
            for more in &lines[i + 1..] {
                if more.starts_with(' ') && more.trim_start().starts_with('[') {
                    synopsis.push(' ');
                    synopsis.push_str(more.trim());
                } else {
                    break;
                }
            }
            seen += 1;
            let named = synopsis
                .split_whitespace()
                .filter_map(flag_name)
                .map(str::to_owned)
                .collect::<BTreeSet<_>>();
            let missing = own_flags(sub)
                .difference(&named)
                .map(|f| format!("--{f}"))
                .collect::<Vec<_>>();
            if !missing.is_empty() {
                wrong.push(Shown {
                    page: page.clone(),
                    line: i + 1,
                    text: format!(
                        "the synopsis of `dlqctl {sub}` omits {} (docs/cli.md has them all)",
                        missing.join(", ")
                    ),
                });
            }
        }
    }
    assert!(seen >= 8, "only {seen} synopses found: is the scan broken?");
    assert!(wrong.is_empty(), "{}", report(&wrong));
}

#[test]
fn every_flag_table_lists_every_flag_of_its_command() {
    // A table whose first column is `flag`, about the command of the last `dlqctl <command>`
    // example above it on its page.
    let commands = flags();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for (page, text) in pages() {
        let mut last_command = String::new();
        let mut in_fence = false;
        let mut table: Option<(usize, String, BTreeSet<String>)> = None;
        let mut finish = |table: &mut Option<(usize, String, BTreeSet<String>)>| {
            if let Some((line, sub, named)) = table.take() {
                seen += 1;
                let has = own_flags(&sub);
                let missing = has
                    .difference(&named)
                    .map(|f| format!("--{f}"))
                    .collect::<Vec<_>>();
                let extra = named
                    .difference(&has)
                    .map(|f| format!("--{f}"))
                    .collect::<Vec<_>>();
                if !missing.is_empty() || !extra.is_empty() {
                    wrong.push(Shown {
                        page: page.clone(),
                        line,
                        text: format!(
                            "the flag table of `dlqctl {sub}` omits [{}], names flags it does not have [{}]",
                            missing.join(", "),
                            extra.join(", ")
                        ),
                    });
                }
            }
        };
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            if in_fence {
                let mut words = line.split_whitespace();
                if words.next() == Some("dlqctl")
                    && let Some(sub) = words.next().filter(|s| commands.contains_key(*s))
                {
                    last_command = sub.to_owned();
                }
                continue;
            }
            if let Some((_, _, named)) = &mut table {
                if !line.starts_with('|') {
                    finish(&mut table);
                    continue;
                }
                let first = line
                    .trim_start_matches('|')
                    .split(" | ")
                    .next()
                    .unwrap_or("");
                named.extend(
                    spans(first)
                        .iter()
                        .filter_map(|s| s.split_whitespace().next().and_then(flag_name))
                        .map(str::to_owned),
                );
                continue;
            }
            if line.starts_with("| flag |") && !last_command.is_empty() {
                table = Some((i + 1, last_command.clone(), BTreeSet::new()));
            }
        }
        finish(&mut table);
    }
    assert!(
        seen >= 2,
        "only {seen} flag tables found: is the scan broken?"
    );
    assert!(wrong.is_empty(), "{}", report(&wrong));
}

/// The cells of a table row: split on `|` outside code spans, an escaped `\|` not counted.
fn cells(row: &str) -> usize {
    let mut count: usize = 0;
    let mut in_code = false;
    let mut prev = ' ';
    for c in row.trim().chars() {
        match c {
            '`' => in_code = !in_code,
            '|' if !in_code && prev != '\\' => count += 1,
            _ => {}
        }
        prev = c;
    }
    count.saturating_sub(1)
}

#[test]
fn every_table_is_whole() {
    // A table is a header row, a delimiter row, then rows with as many cells; a row that
    // stands apart (after a paragraph) is a table broken in two.
    let mut wrong = Vec::new();
    for (page, text) in pages() {
        let lines = text.lines().collect::<Vec<_>>();
        let mut in_fence = false;
        let mut width: Option<usize> = None;
        for (i, line) in lines.iter().enumerate() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                width = None;
                continue;
            }
            if in_fence {
                continue;
            }
            if !line.starts_with('|') {
                width = None;
                continue;
            }
            match width {
                Some(w) if cells(line) != w => wrong.push(Shown {
                    page: page.clone(),
                    line: i + 1,
                    text: format!("a row of {} cells in a table of {w}", cells(line)),
                }),
                Some(_) => {}
                None => {
                    let delimiter = lines.get(i + 1).is_some_and(|l| {
                        l.starts_with('|') && l.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
                    });
                    if delimiter {
                        width = Some(cells(line));
                    } else {
                        wrong.push(Shown {
                            page: page.clone(),
                            line: i + 1,
                            text: "a table row with no header above it".into(),
                        });
                        width = Some(cells(line));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", report(&wrong));
}

#[test]
fn every_list_of_the_backends_names_them_all() {
    // A line that names three backends' keys (`sqs`, `rabbitmq`, `kafka`) and not the fourth
    // is a list written before Pub/Sub came (docs/status.md's `backend` values were).
    let mut wrong = Vec::new();
    for (page, text) in pages() {
        for (i, line) in text.lines().enumerate() {
            let named = Backend::ALL
                .iter()
                .filter(|b| line.contains(&format!("`{b}`")))
                .count();
            if named >= 3 && named < Backend::ALL.len() {
                wrong.push(Shown {
                    page: page.clone(),
                    line: i + 1,
                    text: format!(
                        "names {named} of the backends {:?}: {}",
                        Backend::ALL.map(Backend::as_str),
                        line.trim()
                    ),
                });
            }
        }
    }
    assert!(wrong.is_empty(), "{}", report(&wrong));
}

#[test]
fn sentences_that_contradicted_the_binary_stay_gone() {
    // Found by the review of issue 32; each is the opposite of what the binary does.
    let contradictions = [
        // `dlqctl redrive` moves RabbitMQ dead letters over AMQP (`amqpUrl`).
        ("docs/rabbitmq.md", "never opens an AMQP connection"),
        // `dlqctl alerts` writes Prometheus rules for Kafka channels' alarms.
        ("docs/kafka.md", "not provisioned on Kafka (lint says so)"),
        // `dlqctl redrive` exists and counts `dlq-redrive-count`.
        ("docs/envelope.md", "`dlqctl redrive` will add"),
        // Pub/Sub's depth, age and flow come from Cloud Monitoring where it is read (issue 36).
        ("docs/status.md", "| Pub/Sub | not yet counted"),
        (
            "docs/pubsub.md",
            "Cloud Monitoring's figure is not read in this version",
        ),
    ];
    let pages = pages();
    let mut wrong = Vec::new();
    for (page, phrase) in contradictions {
        let text = pages
            .iter()
            .find(|(p, _)| p == page)
            .map(|(_, t)| t.replace('\n', " "))
            .unwrap_or_else(|| panic!("{page} is gone: update this test"));
        if text.contains(phrase) {
            wrong.push(format!("{page}: still says \"{phrase}\""));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The binary with a cleared environment, from the repo root (as tests/lint.rs runs it).
fn dlqctl() -> Command {
    let mut c = Command::new(
        std::env::var_os("DLQCTL_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_dlqctl").into()),
    );
    c.env_clear().current_dir(root());
    c
}

fn stderr_of(args: &[&str]) -> (i32, String) {
    let out = dlqctl().args(args).output().expect("dlqctl runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_unknown_channel_is_not_blamed_on_a_flag_redrive_does_not_have() {
    // `redrive` takes its channel as an argument: it has no `--channel` to blame (offline:
    // the channel is looked up before any target is contacted).
    let (code, err) = stderr_of(&["redrive", "nosuch", "examples/", "--dry-run"]);
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains("--channel"), "{err}");
    assert!(
        err.contains("channel `nosuch`: no spec defines a channel of that name"),
        "{err}"
    );
    // The same words for `status --channel` (and `exporter --channel`), with a suggestion.
    let (code, err) = stderr_of(&["status", "examples/", "--channel", "order", "--no-peek"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("channel `order`: no spec defines a channel of that name; did you mean"),
        "{err}"
    );
}

#[test]
fn a_channel_name_two_targets_have_is_refused_naming_both_unless_target_says_which() {
    // examples/ has `payments-transactions-pending` on SQS and on Pub/Sub (issue 35: redrive
    // used to pick one of the two). Offline: refused before any target is contacted.
    let both = "channel `payments-transactions-pending` is defined on targets `local-pubsub` and `local-sqs`: say which with --target";
    let (code, err) = stderr_of(&[
        "redrive",
        "payments-transactions-pending",
        "examples/",
        "--dry-run",
    ]);
    assert_eq!((code, err.contains(both)), (1, true), "{err}");
    let (code, err) = stderr_of(&[
        "status",
        "examples/",
        "--channel",
        "payments-transactions-pending",
        "--no-peek",
    ]);
    assert_eq!((code, err.contains(both)), (1, true), "{err}");
    let (code, err) = stderr_of(&[
        "redrive",
        "payments-transactions-pending",
        "examples/",
        "--target",
        "local-kafka",
        "--dry-run",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("not on target `local-kafka`; it is on `local-pubsub` and `local-sqs`"),
        "{err}"
    );
    let (code, err) = stderr_of(&["status", "examples/", "--target", "local-sq", "--no-peek"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("did you mean `local-sqs`?"), "{err}");
}

fn report(wrong: &[Shown]) -> String {
    wrong
        .iter()
        .map(|w| format!("{}:{}: {}", w.page, w.line, w.text))
        .collect::<Vec<_>>()
        .join("\n")
}
