//! The binary's face besides `--help` (snapshotted in tests/lint.rs): shell completions that
//! a real bash sources and completes with, and a man page that `man` renders.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn dlqctl(args: &[&str]) -> String {
    let out = Command::new(
        // Another build of the binary (see `support::dlqctl`).
        std::env::var_os("DLQCTL_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_dlqctl").into()),
    )
    .args(args)
    .env_clear()
    .output()
    .expect("dlqctl runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs a bash script; its stdout.
fn bash(script: &str) -> String {
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", script])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "bash failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn bash_script(dir: &Path) -> PathBuf {
    let path = dir.join("dlqctl.bash");
    std::fs::write(&path, dlqctl(&["completions", "bash"])).expect("write");
    path
}

/// What bash offers for the words typed so far (the last one being completed), through the
/// function `complete -p dlqctl` names, as bash calls it on TAB.
fn complete(script: &Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let out = bash(&format!(
        r#"source '{}'
spec=$(complete -p dlqctl)
fn=$(printf '%s\n' "$spec" | sed -n 's/.*-F \([^ ]*\).*/\1/p')
COMP_WORDS=({words})
COMP_CWORD={cword}
COMP_LINE='{line}'
COMP_POINT=${{#COMP_LINE}}
COMP_TYPE=9
"$fn" dlqctl '{cur}' '{prev}'
printf '%s\n' "${{COMPREPLY[@]}}""#,
        script.display(),
        words = quoted.join(" "),
        cword = words.len() - 1,
        cur = words[words.len() - 1],
        prev = words[words.len().saturating_sub(2)],
    ));
    out.lines().map(|l| l.trim().to_owned()).collect()
}

#[test]
fn bash_completion_is_valid_and_completes_subcommands_flags_and_values() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = bash_script(tmp.path());
    let check = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .expect("bash -n runs");
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let spec = bash(&format!(
        "source '{}'; complete -p dlqctl",
        script.display()
    ));
    assert!(spec.contains("-F _dlqctl"), "{spec}");

    assert_eq!(complete(&script, &["dlqctl", "li"]), ["lint"]);
    let all = complete(&script, &["dlqctl", ""]);
    for sub in [
        "lint",
        "plan",
        "apply",
        "import",
        "schema",
        "status",
        "exporter",
        "redrive",
        "alerts",
        "dashboards",
        "graph",
        "completions",
        "man",
    ] {
        assert!(all.iter().any(|w| w == sub), "{sub} offered: {all:?}");
    }
    assert_eq!(
        complete(&script, &["dlqctl", "lint", "--for"]),
        ["--format"]
    );
    let formats = complete(&script, &["dlqctl", "lint", "--format", ""]);
    assert_eq!(formats, ["human", "json", "github", "sarif"]);
    let shells = complete(&script, &["dlqctl", "completions", "p"]);
    assert_eq!(shells, ["powershell"]);
}

#[test]
fn every_shell_gets_a_script_naming_every_subcommand() {
    for (shell, checker) in [
        ("bash", Some("bash")),
        ("zsh", Some("zsh")),
        ("fish", Some("fish")),
        ("powershell", None),
        ("elvish", None),
    ] {
        let script = dlqctl(&["completions", shell]);
        for sub in ["lint", "apply", "redrive", "completions", "man"] {
            assert!(script.contains(sub), "{shell}: no {sub}");
        }
        // Where the shell is installed, its own parser reads the script.
        if let Some(tool) = checker.filter(|t| has(t)) {
            let tmp = tempfile::NamedTempFile::new().expect("temp file");
            std::fs::write(tmp.path(), &script).expect("write");
            let ok = Command::new(tool)
                .arg("-n")
                .arg(tmp.path())
                .status()
                .expect("the shell runs");
            assert!(ok.success(), "{tool} -n rejects the {shell} script");
        }
    }
}

/// A page rendered as text by `man -l`, words separated by single spaces; `None` where man-db
/// is not installed (the roff's structure is checked all the same).
fn render(page: &Path) -> Option<String> {
    if !has("man") {
        return None;
    }
    let out = Command::new("man")
        .arg("-l")
        .arg(page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("man runs");
    assert!(
        out.status.success(),
        "man -l {}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Justified text: one space between words, whatever man padded.
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[test]
fn the_man_page_renders_with_every_subcommand_and_the_examples() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let roff = dlqctl(&["man"]);
    for needle in [
        ".TH dlqctl 1",
        ".SH NAME",
        ".SH SYNOPSIS",
        ".SH SUBCOMMANDS",
    ] {
        assert!(roff.contains(needle), "no {needle} in:\n{roff}");
    }
    let page = tmp.path().join("dlqctl.1");
    std::fs::write(&page, &roff).expect("write");
    if has("groff") {
        // -ww: every warning; -z: no output. A clean page says nothing.
        let out = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(&page)
            .output()
            .expect("groff runs");
        assert!(out.status.success());
        assert!(
            out.stderr.is_empty(),
            "groff warns: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if let Some(text) = render(&page) {
        for needle in [
            "NAME",
            "dlqctl - Declarative dead-letter queues",
            "SYNOPSIS",
            "lint",
            "redrive",
        ] {
            assert!(text.contains(needle), "no {needle} in:\n{text}");
        }
    }

    // One page per command for packagers, each titled with its command.
    let dir = tmp.path().join("man1");
    let listed = dlqctl(&["man", "--out-dir", dir.to_str().expect("utf-8 path")]);
    for sub in [
        "lint",
        "plan",
        "apply",
        "import",
        "schema",
        "status",
        "exporter",
        "redrive",
        "alerts",
        "dashboards",
        "graph",
    ] {
        let page = dir.join(format!("dlqctl-{sub}.1"));
        assert!(listed.contains(&page.display().to_string()), "{listed}");
        let roff = std::fs::read_to_string(&page).expect("page written");
        assert!(roff.contains(&format!(".TH dlqctl-{sub} 1")), "{roff}");
        if let Some(text) = render(&page) {
            assert!(text.contains(&format!("dlqctl-{sub} - ")), "{text}");
            assert!(
                text.contains("Example"),
                "dlqctl-{sub}.1 has its example:\n{text}"
            );
        }
    }
    let apply = render(&dir.join("dlqctl-apply.1")).unwrap_or_default();
    assert!(apply.is_empty() || apply.contains("Exit codes"), "{apply}");
}
