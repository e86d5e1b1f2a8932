//! `dlqctl graph` through the real binary: snapshots of every example in both formats, and the
//! output checked by the tools that draw it: Mermaid's own CLI (`mmdc`, which parses and
//! renders with the same mermaid library GitHub uses) and Graphviz's `dot -Tsvg`.
//!
//! `mmdc` comes from `$DLQCTL_MMDC` with the Puppeteer config `$DLQCTL_MMDC_PUPPETEER` (which
//! `scripts/stack env` exports; `scripts/stack up` installs it in `~/.cache/dlqctl/mermaid`,
//! with Debian's chromium), `dot` from `$DLQCTL_DOT`, else `PATH`. Under `CI=true` or
//! `DLQCTL_LIVE_REQUIRED=1` a missing tool fails these tests, as a missing server fails the
//! live ones; otherwise they skip loudly.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{dlqctl, output};

use dlqctl::graph::{ChannelGraph, mermaid};
use dlqctl::plan::Action;

fn graph(args: &[&str]) -> support::Output {
    output(dlqctl().arg("graph").args(args).args(["--color", "never"]))
}

/// The example channel files, sorted.
fn examples() -> Vec<String> {
    let mut out: Vec<String> = ["sqs", "rabbitmq", "kafka"]
        .iter()
        .flat_map(|b| support::examples_on(&format!("local-{b}")))
        .collect();
    out.sort();
    out
}

#[test]
fn every_example_matches_its_snapshots_in_both_formats() {
    let files = examples();
    assert_eq!(files.len(), 5, "{files:?}");
    for f in &files {
        let path = format!("examples/{f}");
        let stem = f.trim_end_matches(".yaml");
        for format in ["mermaid", "dot"] {
            let r = graph(&[
                &path,
                "--targets",
                "examples/dlqctl.yaml",
                "--format",
                format,
            ]);
            r.ok_with(format!("{f} {format}"));
            assert_eq!(r.stderr, "", "{f} {format}");
            insta::assert_snapshot!(format!("graph-{stem}-{format}"), r.stdout);
        }
    }
}

#[test]
fn lint_errors_draw_nothing_and_exit_1() {
    let r = graph(&[
        "tests/fixtures/invalid/deadletter-discard-and-retention.yaml",
        "--targets",
        "tests/fixtures/targets.yaml",
    ]);
    r.exits(1);
    assert_eq!(r.stdout, "");
    r.assert_stderr_contains("deadletter/discard-and-retention");
}

/// Renders `text` with mmdc to `out` (the format from its extension); panics with mmdc's
/// message when Mermaid cannot parse it.
fn mmdc(mmdc: &Path, text: &str, out: &Path) {
    let input = out.with_extension("mmd");
    std::fs::write(&input, text).expect("writes the diagram");
    let mut cmd = Command::new(mmdc);
    cmd.arg("--quiet")
        .arg("-i")
        .arg(&input)
        .arg("-o")
        .arg(out)
        .args(["-b", "white", "-w", "2000"]);
    if let Some(p) = std::env::var_os("DLQCTL_MMDC_PUPPETEER") {
        cmd.arg("-p").arg(p);
    }
    let r = output(&mut cmd);
    r.ok_with(format!("mmdc failed on\n{text}"));
    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    assert!(size > 1000, "{} is {size} bytes", out.display());
}

#[test]
fn mermaid_draws_every_example_and_every_plan_action() {
    let Some(bin) = support::tool("DLQCTL_MMDC", "mmdc", "--version") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = look_dir(tmp.path());
    let all = graph(&["examples/"]);
    all.ok();
    mmdc(&bin, &all.stdout, &dir.join("examples.png"));

    // Every class a plan can put on a node, and a node the plan deletes.
    let mut graphs = channels();
    let actions = [
        Action::Create,
        Action::Update,
        Action::Replace,
        Action::Delete,
        Action::Impossible,
    ];
    for (i, n) in graphs[0].nodes.iter_mut().enumerate() {
        n.action = Some(actions[i % actions.len()]);
    }
    let text = mermaid::flowchart(&graphs);
    for a in actions {
        assert!(
            text.contains(&format!("classDef {} ", a.as_str())),
            "{text}"
        );
    }
    mmdc(&bin, &text, &dir.join("actions.png"));
}

/// Where the rendered pictures go: `$DLQCTL_GRAPH_DIR` to look at them
/// (`DLQCTL_GRAPH_DIR=/tmp/graphs cargo test --test graph`), else a temporary folder.
fn look_dir(tmp: &Path) -> PathBuf {
    let dir = std::env::var_os("DLQCTL_GRAPH_DIR").map_or_else(|| tmp.to_path_buf(), PathBuf::from);
    std::fs::create_dir_all(&dir).expect("creates the folder");
    dir
}

/// The examples' channels, resolved as `plan` resolves them, with a hostile discard reason
/// on the first: every character that could end a label or the code fence around it.
fn channels() -> Vec<ChannelGraph> {
    let root = support::root();
    let ws = dlqctl::spec::load::load(&[root.join("examples")], None).expect("examples load");
    let (_, checked) = dlqctl::spec::rules::check(&ws);
    let mut resolved: Vec<_> = checked.into_iter().map(|c| c.resolved).collect();
    assert!(!resolved.is_empty());
    resolved[0].discard = Some(dlqctl::spec::resolve::DiscardResolved {
        after: dlqctl::spec::duration::Duration::from_secs(86_400),
        reason: Some("\"] --> x{{ <b>#1</b> ``` | [y] & end; %% click x".into()),
        owner: Some("team \"q\"".into()),
    });
    dlqctl::graph::build(&resolved)
}

#[test]
fn hostile_spec_text_stays_inside_its_label() {
    let text = mermaid::flowchart(&channels());
    assert!(!text.contains("<b>"), "{text}");
    assert!(!text.contains("```"), "{text}");
    let Some(bin) = support::tool("DLQCTL_MMDC", "mmdc", "--version") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    mmdc(&bin, &text, &look_dir(tmp.path()).join("hostile.png"));
}

#[test]
fn graphviz_draws_every_example() {
    let Some(bin) = support::tool("DLQCTL_DOT", "dot", "-V") else {
        return;
    };
    let all = graph(&["examples/", "--format", "dot"]);
    all.ok();
    let hostile = dlqctl::graph::dot::digraph(&channels());
    for text in [all.stdout, hostile] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let input = tmp.path().join("in.dot");
        std::fs::write(&input, &text).expect("writes the graph");
        let r = output(Command::new(&bin).arg("-Tsvg").arg(&input));
        r.ok_with(format!("dot failed on\n{text}"));
        r.assert_stdout_contains("<svg");
        assert!(r.stderr.is_empty(), "{}", r.stderr);
    }
}

#[test]
fn the_plan_comments_diagrams_render() {
    let Some(bin) = support::tool("DLQCTL_MMDC", "mmdc", "--version") else {
        return;
    };
    let root = support::root();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = look_dir(tmp.path());
    let mut drawn = 0;
    // The markdown plans snapshotted from the live stack, and the layout test's plan with a
    // create, an update, a replace and a delete.
    for snap in [
        "tests/snapshots/sqs__plan-markdown.snap",
        "tests/snapshots/rabbitmq__plan-markdown.snap",
        "tests/snapshots/kafka__plan-markdown.snap",
        "src/plan/snapshots/dlqctl__plan__markdown__tests__markdown-diagrams.snap",
    ] {
        let text = std::fs::read_to_string(root.join(snap)).expect("the snapshot");
        for (i, block) in text.split("```mermaid\n").skip(1).enumerate() {
            let chart = block.split("```").next().expect("a closed block");
            let stem = snap
                .rsplit('/')
                .next()
                .unwrap_or(snap)
                .trim_end_matches(".snap");
            mmdc(&bin, chart, &dir.join(format!("{stem}-{i}.png")));
            drawn += 1;
        }
    }
    assert_eq!(drawn, 6);
}
