//! A [`ChannelGraph`] in Graphviz's DOT language (`dlqctl graph --format dot | dot -Tsvg`), for
//! documentation sites and tools that do not read Mermaid. One cluster per channel.

use std::fmt::Write as _;

use super::{ChannelGraph, Shape};

/// Characters per label line before a long text wraps.
const WRAP: usize = 40;

/// One digraph, left to right, with a cluster per channel.
pub fn digraph(graphs: &[ChannelGraph]) -> String {
    let mut out = String::from(
        "digraph dlqctl {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n",
    );
    for (c, g) in graphs.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_c{c} {{");
        let _ = writeln!(
            out,
            "    label=\"{}\";",
            text(&format!("{} · {} on {}", g.channel, g.backend, g.target))
        );
        for (i, n) in g.nodes.iter().enumerate() {
            let shape = match n.shape {
                Shape::Queue => "cylinder",
                Shape::Exchange => "hexagon",
                Shape::Alarm => "cds",
            };
            // Graphviz does not wrap: a long line (a discard reason) is cut at spaces.
            let mut lines: Vec<String> = n
                .lines
                .iter()
                .flat_map(|l| super::wrap(l, WRAP))
                .map(|l| text(&l))
                .collect();
            if let Some(a) = n.action {
                lines.push(format!("[{}]", a.as_str()));
            }
            let _ = writeln!(
                out,
                "    c{c}n{i} [shape={shape}, label=\"{}\"];",
                lines.join("\\n")
            );
        }
        for e in &g.edges {
            let mut attrs = Vec::new();
            if !e.label.is_empty() {
                attrs.push(format!("label=\"{}\"", text(&e.label)));
            }
            if e.watch {
                attrs.push("style=dashed".to_owned());
            }
            let attrs = if attrs.is_empty() {
                String::new()
            } else {
                format!(" [{}]", attrs.join(", "))
            };
            let _ = writeln!(out, "    c{c}n{} -> c{c}n{}{attrs};", e.from, e.to);
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

/// Spec text inside a DOT double-quoted string: the quote and backslash escaped, control
/// characters as spaces.
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_quote_or_backslash_stays_inside_the_string() {
        assert_eq!(super::text("a\"b\\c\nd"), "a\\\"b\\\\c d");
    }
}
