//! `dlqctl schema`: writes (or checks) the JSON schemas generated from the spec types.

use anyhow::Context as _;

use crate::cli::SchemaArgs;
use crate::printer::Printer;
use crate::spec::schema::{DocKind, schema_text};

pub fn run(args: &SchemaArgs, printer: &Printer) -> anyhow::Result<u8> {
    let mut stale = Vec::new();
    for kind in DocKind::ALL {
        let path = args.out_dir.join(kind.file_name());
        let want = schema_text(kind);
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
