//! `${VAR}` expansion in a Targets document, before its schema validation: the grammar and
//! the list of fields that may hold references are `spec::vars`'s; this stage walks a
//! document, expands those fields with the process environment, and reports what it cannot
//! expand, and every `${` elsewhere, at its position.

use serde_json::Value;

use super::workspace::{RawDoc, Workspace};
use crate::diag::Diagnostic;
use crate::spec::locate::Locations;
use crate::spec::pointer::escape;
use crate::spec::vars;

/// `${VAR}` in a target's addresses ([`vars`]), expanded in place before validation with the
/// process environment. `target/variable`: an unset variable without a default, or a malformed
/// reference; `target/variable-not-allowed`: a reference in any other field (secrets have their
/// own `*Env` fields). The value is left as written then, and reported once, at its position.
pub(super) fn expand_variables(d: &mut RawDoc, ws: &mut Workspace) {
    let Some(targets) = d.json.get_mut("targets").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, target) in targets.iter_mut() {
        let Some(fields) = target.as_object_mut() else {
            continue;
        };
        for (field, value) in fields.iter_mut() {
            let pointer = format!("/targets/{}/{}", escape(name), escape(field));
            match value {
                Value::String(text) if vars::EXPANDED.contains(&field.as_str()) => {
                    if !vars::has_reference(text) {
                        continue;
                    }
                    match vars::expand(text, |n| std::env::var(n).ok()) {
                        Ok(expanded) => *text = expanded,
                        Err(e) => {
                            ws.unexpanded.insert((d.loc.file, pointer.clone()));
                            let mut diag = Diagnostic::error(
                                "target/variable",
                                format!("`targets.{name}.{field}`: {e}"),
                            )
                            .at(d.locs.value(&pointer));
                            if let vars::VarError::Unset(var) = &e {
                                diag = diag.hint(format!(
                                    "set it, or give a default where it may be unset (a pre-commit hook): `${{{var}:-{}}}`",
                                    example_default(field)
                                ));
                            }
                            ws.diagnostics.push(diag);
                        }
                    }
                }
                _ => report_references(value, &pointer, name, &d.locs, ws),
            }
        }
    }
}

/// `target/variable-not-allowed` for every `${` in a value outside [`vars::EXPANDED`].
fn report_references(
    value: &Value,
    pointer: &str,
    target: &str,
    locs: &Locations,
    ws: &mut Workspace,
) {
    match value {
        Value::String(text) if vars::has_reference(text) => ws.diagnostics.push(
            Diagnostic::error(
                "target/variable-not-allowed",
                format!(
                    "`targets.{target}.{}` holds `${{...}}`: variables are expanded only in {}",
                    &pointer[format!("/targets/{}/", escape(target)).len()..].replace('/', "."),
                    vars::EXPANDED.map(|f| format!("`{f}`")).join(", ")
                ),
            )
            .at(locs.value(pointer))
            .hint("secrets are named, not written: `usernameEnv`, `passwordEnv`, `secretProperties: {sasl.password: ENV_VAR}`"),
        ),
        Value::Object(map) => {
            for (k, v) in map {
                report_references(v, &format!("{pointer}/{}", escape(k)), target, locs, ws);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                report_references(v, &format!("{pointer}/{i}"), target, locs, ws);
            }
        }
        _ => {}
    }
}

fn example_default(field: &str) -> &'static str {
    match field {
        "bootstrapServers" => "127.0.0.1:9092",
        "amqpUrl" => "amqp://127.0.0.1:5672",
        "endpoint" => "http://127.0.0.1:5000",
        "connectUrl" => "http://127.0.0.1:8083",
        _ => "http://127.0.0.1:15672",
    }
}

#[cfg(test)]
mod tests {
    use super::super::load_str;
    use super::super::tests::found;
    use super::*;

    #[test]
    fn target_variables_are_expanded_only_in_addresses_and_reported_where_written() {
        let ws = load_str(
            "t.yaml",
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  rmq:\n    backend: rabbitmq\n    url: 'http://${DLQCTL_TEST_UNSET_Q7}'\n    amqpUrl: 'amqp://${DLQCTL_TEST_UNSET_Q7:-h}:5672'\n    vhost: '${X}'\n  k:\n    backend: kafka\n    bootstrapServers: '${DLQCTL_TEST_UNSET_Q7}'\n    properties: {a: '${Y}'}\n    ownership: {prefixes: ['${Z}']}\n",
        );
        assert_eq!(
            found(&ws),
            [
                "target/variable | `targets.rmq.url`: environment variable `DLQCTL_TEST_UNSET_Q7` is not set (or is empty), and `${DLQCTL_TEST_UNSET_Q7}` has no default | set it, or give a default where it may be unset (a pre-commit hook): `${DLQCTL_TEST_UNSET_Q7:-http://127.0.0.1:15672}` | 6:10",
                "target/variable-not-allowed | `targets.rmq.vhost` holds `${...}`: variables are expanded only in `url`, `amqpUrl`, `endpoint`, `bootstrapServers`, `emulatorHost`, `connectUrl` | secrets are named, not written: `usernameEnv`, `passwordEnv`, `secretProperties: {sasl.password: ENV_VAR}` | 8:12",
                "target/variable | `targets.k.bootstrapServers`: environment variable `DLQCTL_TEST_UNSET_Q7` is not set (or is empty), and `${DLQCTL_TEST_UNSET_Q7}` has no default | set it, or give a default where it may be unset (a pre-commit hook): `${DLQCTL_TEST_UNSET_Q7:-127.0.0.1:9092}` | 11:23",
                "target/variable-not-allowed | `targets.k.properties.a` holds `${...}`: variables are expanded only in `url`, `amqpUrl`, `endpoint`, `bootstrapServers`, `emulatorHost`, `connectUrl` | secrets are named, not written: `usernameEnv`, `passwordEnv`, `secretProperties: {sasl.password: ENV_VAR}` | 12:21",
                "target/variable-not-allowed | `targets.k.ownership.prefixes.0` holds `${...}`: variables are expanded only in `url`, `amqpUrl`, `endpoint`, `bootstrapServers`, `emulatorHost`, `connectUrl` | secrets are named, not written: `usernameEnv`, `passwordEnv`, `secretProperties: {sasl.password: ENV_VAR}` | 13:28",
            ]
        );
        assert_eq!(
            ws.unexpanded
                .iter()
                .map(|(f, p)| (*f, p.as_str()))
                .collect::<Vec<_>>(),
            [(0, "/targets/k/bootstrapServers"), (0, "/targets/rmq/url")]
        );
        let targets = serde_json::to_value(&ws.targets[0].value).expect("serialises");
        assert_eq!(targets["targets"]["rmq"]["amqpUrl"], "amqp://h:5672");
        assert_eq!(example_default("amqpUrl"), "amqp://127.0.0.1:5672");
        assert_eq!(example_default("endpoint"), "http://127.0.0.1:5000");
        assert_eq!(example_default("emulatorHost"), "http://127.0.0.1:15672");
    }
}
