//! `dlqctl graph`: a picture of each channel, in Mermaid or DOT. Offline: it reads specs,
//! never a server.

use crate::cli::{GraphArgs, GraphFormat};
use crate::graph;
use crate::printer::Printer;

/// Exit codes: 0 drawn, 1 lint errors.
pub fn run(args: &GraphArgs, printer: &Printer) -> anyhow::Result<u8> {
    let Some(loaded) = super::shared::load_checked(&args.paths, args.targets.as_deref(), printer)?
    else {
        return Ok(1);
    };
    let graphs = graph::build(&loaded.channels);
    printer.out(&match args.format {
        GraphFormat::Mermaid => graph::mermaid::flowchart(&graphs),
        GraphFormat::Dot => graph::dot::digraph(&graphs),
    });
    Ok(0)
}
