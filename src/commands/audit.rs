//! `dlqctl audit`: checks the tamper evidence of audit journals (issue 52, L4). The records
//! carry a hash chain (`prev`) and, with the target's key, an HMAC (`hmac`); without a verb
//! that reads them back, nobody would ever look. The checking itself is
//! [`crate::journal::verify`]; this only reads the files, the key, and reports.

use crate::cli::AuditArgs;
use crate::integrity::Key;
use crate::journal;
use crate::printer::{Printer, Style};

pub fn run(args: &AuditArgs, printer: &Printer) -> anyhow::Result<u8> {
    let key = match &args.key_env {
        None => None,
        Some(var) => match std::env::var(var) {
            Ok(v) if !v.is_empty() => {
                crate::secrets::never_show(&v);
                Some(Key::new(v.as_bytes()))
            }
            _ => {
                printer.err(&format!(
                    "{} --key-env names `{var}`, which is not set or is empty; set it to the target's HMAC key (the variable its `operations.hmacKeyEnv` names)",
                    printer.paint_err("error:", Style::Error)
                ));
                return Ok(64);
            }
        },
    };
    let (mut broken, mut unreadable) = (false, false);
    for path in &args.files {
        let shown = path.display();
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) => {
                printer.err(&format!(
                    "{} {shown}: cannot read: {e}",
                    printer.paint_err("error:", Style::Error)
                ));
                unreadable = true;
                continue;
            }
        };
        match journal::verify(&text, key.as_ref()) {
            Ok(v) => printer.line(&summary(&shown.to_string(), &v, key.is_some())),
            Err(b) => {
                printer.err(&format!(
                    "{} {shown}:{}: {}",
                    printer.paint_err("broken:", Style::Error),
                    b.line,
                    b.why
                ));
                broken = true;
            }
        }
    }
    Ok(if broken {
        1
    } else if unreadable {
        2
    } else {
        0
    })
}

/// One line for a journal that holds: what was checked, and what was not.
fn summary(path: &str, v: &journal::Verified, keyed: bool) -> String {
    let plural = |n: u64, one: &str, many: &str| {
        if n == 1 {
            format!("{n} {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let chained = v.records - v.unchained;
    let mut out = format!(
        "{path}: intact: {}, {} chained",
        plural(v.records, "record", "records"),
        chained
    );
    if keyed {
        out.push_str(&format!(", {} verified with the key", v.signed));
    } else if chained > 0 {
        out.push_str(" (no --key-env: a rewrite that recomputed every `prev` would not show)");
    }
    if v.unchained > 0 {
        out.push_str(&format!(
            "; the first {} written before records were chained, not checked",
            plural(v.unchained, "record was", "records were")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_what_was_and_was_not_checked() {
        let v = journal::Verified {
            records: 5,
            unchained: 1,
            signed: 0,
        };
        assert_eq!(
            summary("j.jsonl", &v, false),
            "j.jsonl: intact: 5 records, 4 chained (no --key-env: a rewrite that recomputed every `prev` would not show); the first 1 record was written before records were chained, not checked"
        );
        let v = journal::Verified {
            records: 1,
            unchained: 0,
            signed: 1,
        };
        assert_eq!(
            summary("j.jsonl", &v, true),
            "j.jsonl: intact: 1 record, 1 chained, 1 verified with the key"
        );
    }
}
