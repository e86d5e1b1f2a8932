//! `dlqctl schema`: writes (or checks) the JSON schemas generated from the spec types and the
//! plan JSON's (`plan.v1.json`).

use anyhow::Context as _;

use crate::cli::SchemaArgs;
use crate::plan::schema as plan_schema;
use crate::printer::Printer;
use crate::spec::schema::{DocKind, schema_text};

pub fn run(args: &SchemaArgs, printer: &Printer) -> anyhow::Result<u8> {
    let mut stale = Vec::new();
    let files = DocKind::ALL
        .into_iter()
        .map(|kind| (kind.file_name(), schema_text(kind)))
        .chain([(plan_schema::FILE_NAME, plan_schema::schema_text())]);
    for (file_name, want) in files {
        let path = args.out_dir.join(file_name);
        if args.check {
            let have = fs_err::read_to_string(&path).unwrap_or_default();
            if have != want {
                stale.push(path.display().to_string());
            }
        } else {
            fs_err::create_dir_all(&args.out_dir)?;
            fs_err::write(&path, want).with_context(|| "writing the schema")?;
            printer.line(&format!("wrote {}", path.display()));
        }
    }
    if stale.is_empty() {
        return Ok(0);
    }
    printer.err(&format!(
        "stale or missing schema files: {}\nrun `dlqctl schema --out-dir {}` to update them",
        stale.join(", "),
        args.out_dir.display()
    ));
    Ok(1)
}
