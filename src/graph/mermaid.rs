//! A [`ChannelGraph`] as a Mermaid flowchart: what `dlqctl graph` prints by default, and what
//! GitHub and GitLab draw from a ```` ```mermaid ```` block in the plan comment.
//!
//! Every name and reason from a spec is written inside a quoted label with Mermaid's entity
//! codes for the characters that could end the label, start markup or close the code fence
//! around it, so no spec text can change the diagram's structure. Node ids are generated
//! (`c0n1`: channel 0, node 1), never taken from a name.

use std::fmt::Write as _;

use super::{ChannelGraph, Shape};
use crate::plan::Action;

/// One flowchart, left to right, with one subgraph per channel; nodes a plan changes are
/// styled by what it does to them (see [`CLASSES`]).
pub fn flowchart(graphs: &[ChannelGraph]) -> String {
    let mut out = String::from("flowchart LR\n");
    let mut used: Vec<Action> = Vec::new();
    for (c, g) in graphs.iter().enumerate() {
        let _ = writeln!(
            out,
            "  subgraph c{c} [\"{}\"]",
            text(&format!("{} · {} on {}", g.channel, g.backend, g.target))
        );
        out.push_str("    direction LR\n");
        for (i, n) in g.nodes.iter().enumerate() {
            let mut lines: Vec<String> = n.lines.iter().map(|l| text(l)).collect();
            if let Some(a) = n.action {
                lines.push(format!("#91;{}#93;", verb(a)));
            }
            let label = lines.join("<br/>");
            let (open, close) = match n.shape {
                Shape::Queue => ("[(\"", "\")]"),
                Shape::Exchange => ("{{\"", "\"}}"),
                Shape::Alarm => (">\"", "\"]"),
            };
            let _ = writeln!(out, "    c{c}n{i}{open}{label}{close}");
        }
        for e in &g.edges {
            let arrow = if e.watch { "-.->" } else { "-->" };
            let label = if e.label.is_empty() {
                String::new()
            } else {
                format!("|\"{}\"|", text(&e.label))
            };
            let _ = writeln!(out, "    c{c}n{} {arrow}{label} c{c}n{}", e.from, e.to);
        }
        out.push_str("  end\n");
        for (i, n) in g.nodes.iter().enumerate() {
            if let Some(a) = n.action {
                let _ = writeln!(out, "  class c{c}n{i} {}", a.as_str());
                if !used.contains(&a) {
                    used.push(a);
                }
            }
        }
    }
    used.sort();
    for a in used {
        if let Some((_, style)) = CLASSES.iter().find(|(k, _)| *k == a) {
            let _ = writeln!(out, "  classDef {} {style}", a.as_str());
        }
    }
    out
}

/// The style of a node per plan action: green created, amber updated, orange replaced, red
/// dashed deleted, grey dashed impossible. The label says it in words too (`[create]`), for
/// readers who do not see the colours.
pub const CLASSES: [(Action, &str); 5] = [
    (
        Action::Create,
        "fill:#dafbe1,stroke:#1a7f37,stroke-width:2px,color:#000",
    ),
    (
        Action::Update,
        "fill:#fff8c5,stroke:#9a6700,stroke-width:2px,color:#000",
    ),
    (
        Action::Replace,
        "fill:#ffe2cc,stroke:#bc4c00,stroke-width:3px,color:#000",
    ),
    (
        Action::Delete,
        "fill:#ffebe9,stroke:#cf222e,stroke-width:2px,stroke-dasharray:5 3,color:#000",
    ),
    (
        Action::Impossible,
        "fill:#eaeef2,stroke:#57606a,stroke-width:2px,stroke-dasharray:2 2,color:#000",
    ),
];

fn verb(a: Action) -> &'static str {
    match a {
        Action::Create => "created",
        Action::Update => "updated",
        Action::Replace => "replaced",
        Action::Delete => "deleted",
        Action::Impossible => "cannot be changed",
    }
}

/// Spec text made safe inside a quoted Mermaid label: the quote, markup, entity and fence
/// characters become entity codes; control characters become spaces.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '&' => out.push_str("#amp;"),
            '`' => out.push_str("#96;"),
            '|' => out.push_str("#124;"),
            '[' => out.push_str("#91;"),
            ']' => out.push_str("#93;"),
            '{' => out.push_str("#123;"),
            '}' => out.push_str("#125;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_spec_text_can_end_a_label_or_the_fence() {
        let t = text("a\"b]#c<d>`e|f\n");
        for bad in ['"', ']', '<', '>', '`', '|', '\n'] {
            assert!(!t.contains(bad), "{t}");
        }
        assert_eq!(text("orders.dlq-1"), "orders.dlq-1");
    }
}
