//! Issue 52, L4, live on RabbitMQ: an archive edited consistently — a record's body and
//! `bodySha256`, the object, and the manifest entry's size and sha256 recomputed, as anyone
//! who can write the archive can — passes every checksum. With the target's HMAC key
//! (`operations.hmacKeyEnv`), `archive` signs each object and the manifest, and `redrive
//! --from-archive` refuses the edited archive (exit 1, naming the manifest) and publishes
//! nothing (the main queue, read by lapin, stays empty); without a key configured it refuses
//! an archive written with one, saying so; the untouched archive replays every message once,
//! byte-exact. Every run is journaled with `--audit-log`: the journal is chained (`prev`) and
//! signed while the target names the key, and a middle line edited is named by `journal::verify`.

mod support;

use serde_json::Value;
use sha2::Digest;
use support::redrive::archive_ok;
use support::{block, rabbit};

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Sets `operations` (a YAML flow mapping) on the RabbitMQ target.
fn operations(ws: &support::workspace::Workspace, yaml: &str) {
    ws.edit_targets(|t| {
        let mut out = Vec::new();
        for l in t.lines().filter(|l| !l.starts_with("    operations:")) {
            out.push(l.to_owned());
            if l == "  local-rabbitmq:" {
                out.push(format!("    operations: {yaml}"));
            }
        }
        assert!(
            out.iter().any(|l| l.starts_with("    operations:")),
            "no target local-rabbitmq: {t}"
        );
        out.join("\n") + "\n"
    });
}

#[test]
fn rabbitmq_an_archive_edited_consistently_is_refused_with_the_targets_key() {
    let Some(mut f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let var = "DLQCTL_TEST_ARCHIVE_HMAC_KEY";
    f.set_env(var, "a key only the target's owners hold");
    operations(&f, &format!("{{hmacKeyEnv: {var}}}"));
    let want: Vec<Vec<u8>> = (1..=3)
        .map(|i| format!("{{\"payment\":{i},\"amount\":10}}").into_bytes())
        .collect();
    rabbit::fill(&dlq, want.len(), |i| {
        let h = rabbit::table(&[("dlq-error-class", rabbit::text("poison"))]);
        (
            want[i].clone(),
            lapin::BasicProperties::default().with_headers(h),
        )
    });
    rabbit::wait_for_messages(&dlq, 3);

    let root = f.path().join("arch");
    let to = root.to_str().expect("path").to_owned();
    let doc = archive_ok(
        &f,
        &[
            "--to",
            &to,
            "--delete",
            "--yes",
            "--audit-log",
            "audit.jsonl",
        ],
    );
    assert_eq!(doc["archived"].as_u64(), Some(3), "{doc:#}");
    assert_eq!(rabbit::count(&dlq), 0);

    // The run's folder: its manifest signed, each object's entry signed.
    let channel_dir = std::fs::read_dir(&root)
        .expect("archive")
        .next()
        .expect("a channel folder")
        .expect("entry")
        .path();
    let run_dir = std::fs::read_dir(&channel_dir)
        .expect("channel")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.join("manifest.json").exists())
        .expect("a run folder");
    let manifest_path = run_dir.join("manifest.json");
    let manifest_bytes = std::fs::read(&manifest_path).expect("manifest");
    let mut manifest: Value = serde_json::from_slice(&manifest_bytes).expect("json");
    let entry = manifest["objects"][0].clone();
    let object_path = run_dir.join(entry["name"].as_str().expect("name"));
    let object_bytes = std::fs::read(&object_path).expect("object");

    // Edited consistently: one payment's amount, its bodySha256, the object's size and
    // sha256 in the manifest.
    let mut lines: Vec<Value> = std::str::from_utf8(&object_bytes)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    let body = "{\"payment\":2,\"amount\":99999}";
    let edited = lines
        .iter_mut()
        .find(|r| r["body"] == "{\"payment\":2,\"amount\":10}")
        .expect("payment 2");
    edited["body"] = body.into();
    edited["bodySha256"] = sha256_hex(body.as_bytes()).into();
    let mut tampered = Vec::new();
    for r in &lines {
        tampered.extend(serde_json::to_vec(r).expect("json"));
        tampered.push(b'\n');
    }
    std::fs::write(&object_path, &tampered).expect("write object");
    manifest["objects"][0]["sha256"] = sha256_hex(&tampered).into();
    manifest["objects"][0]["bytes"] = (tampered.len() as u64).into();
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).expect("json"),
    )
    .expect("write manifest");

    let out = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--from-archive",
        &to,
        "--yes",
        "--audit-log",
        "audit.jsonl",
    ]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("manifest.json") && out.stderr.contains("HMAC does not verify"),
        "{}",
        out.stderr
    );
    let back = block(rabbit::take_all(&main));
    assert!(back.is_empty(), "nothing published: {back:?}");

    // What the run wrote was signed: the manifest, and each object's entry.
    assert!(manifest["hmacSha256"].is_string(), "{manifest:#}");
    assert!(entry["hmacSha256"].is_string(), "{entry:#}");

    // No key configured: an archive written with one is refused, and says so.
    operations(&f, "{}");
    let out = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--from-archive",
        &to,
        "--yes",
        "--audit-log",
        "audit.jsonl",
    ]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("no key is configured"),
        "{}",
        out.stderr
    );
    assert!(block(rabbit::take_all(&main)).is_empty());

    // The archive as written, with the key: every payment back once, byte-exact.
    operations(&f, &format!("{{hmacKeyEnv: {var}}}"));
    std::fs::write(&object_path, &object_bytes).expect("restore object");
    std::fs::write(&manifest_path, &manifest_bytes).expect("restore manifest");
    let out = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--from-archive",
        &to,
        "--yes",
        "--format",
        "json",
        "--audit-log",
        "audit.jsonl",
    ]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let mut got: Vec<Vec<u8>> = block(rabbit::take_all(&main))
        .into_iter()
        .map(|(b, _)| b)
        .collect();
    got.sort();
    assert_eq!(got, want);

    // The journal: the archive's start and record, the two refusals, the replay's start and
    // record, chained, and signed with the target's key while it named one; a middle line
    // edited is named.
    let path = f.path().join("audit.jsonl");
    let key = dlqctl::integrity::Key::new(b"a key only the target's owners hold");
    let ok = dlqctl::journal::verify_file(&path, None).expect("the chain holds");
    assert_eq!((ok.records, ok.unchained), (6, 0), "{ok:?}");
    // The fourth record was written while the target named no key: no HMAC, named.
    let e = dlqctl::journal::verify_file(&path, Some(&key)).expect_err("line 4 unsigned");
    assert!(e.to_string().contains("line 4: no `hmac`"), "{e}");
    let text = std::fs::read_to_string(&path).expect("journal");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[1] = lines[1].replacen("\"", "\"x", 1);
    let edited = lines.join("\n") + "\n";
    let e = dlqctl::journal::verify(edited.as_bytes(), Some(&key)).expect_err("edited");
    assert_eq!(e.line, 2, "{e}");
    let e = dlqctl::journal::verify(edited.as_bytes(), None).expect_err("edited");
    assert!(e.to_string().contains("line 2 was changed"), "{e}");

    // The same through `dlqctl audit`, as an operator checks a journal: intact without the
    // key; with it, line 4 named (exit 1); the edited copy's line 2 named, key or none.
    let out = f.run(&["audit", "audit.jsonl"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("audit.jsonl: intact: 6 records, 6 chained"),
        "{}",
        out.stdout
    );
    let out = f.run(&["audit", "audit.jsonl", "--key-env", var]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("audit.jsonl:4: no `hmac`"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("owners hold"),
        "the key is never shown"
    );
    std::fs::write(f.path().join("edited.jsonl"), &edited).expect("edited copy");
    // Without the key the chain breaks at the next line, which names the changed one.
    for (extra, named) in [
        (
            &[][..],
            "edited.jsonl:3: its `prev` is not the sha256 of line 2",
        ),
        (
            &["--key-env", var][..],
            "edited.jsonl:2: its `hmac` does not verify",
        ),
    ] {
        let mut args = vec!["audit", "edited.jsonl"];
        args.extend_from_slice(extra);
        let out = f.run(&args);
        assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(named), "{}", out.stderr);
    }
    let out = f.run(&[
        "audit",
        "audit.jsonl",
        "--key-env",
        "DLQCTL_TEST_NO_SUCH_VAR",
    ]);
    assert_eq!(out.code, 64, "{}\n{}", out.stdout, out.stderr);
    let out = f.run(&["audit", "missing.jsonl"]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
}

/// hx4 F: with the target's key, a forged replay ledger (unsigned, listing every record as
/// replayed) hid the whole archive: "0 moved", `alreadyReplayed: 20`, exit 0. Now a ledger
/// whose HMAC does not verify stops the replay, named; without it, the replay publishes every
/// payment once, and its own (signed) ledger makes the next replay publish none.
#[test]
fn rabbitmq_a_forged_replay_ledger_never_hides_a_signed_archive() {
    let Some(mut f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let var = "DLQCTL_TEST_LEDGER_HMAC_KEY";
    f.set_env(var, "the target's ledger key");
    operations(&f, &format!("{{hmacKeyEnv: {var}}}"));
    rabbit::fill(&dlq, 4, |i| {
        let h = rabbit::table(&[("dlq-error-class", rabbit::text("poison"))]);
        (
            format!("{{\"payment\":{i}}}").into_bytes(),
            lapin::BasicProperties::default()
                .with_message_id(format!("pay-{i}").into())
                .with_headers(h),
        )
    });
    rabbit::wait_for_messages(&dlq, 4);
    let root = f.path().join("arch");
    let to = root.to_str().expect("path").to_owned();
    let doc = archive_ok(&f, &["--to", &to, "--delete", "--yes"]);
    assert_eq!(doc["archived"].as_u64(), Some(4), "{doc:#}");

    // Every record's reference (`<run>/<key>`), as a forger reads them from the objects.
    let channel_dir = std::fs::read_dir(&root)
        .expect("archive")
        .next()
        .expect("a channel folder")
        .expect("entry")
        .path();
    let channel = channel_dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_owned();
    let mut refs = Vec::new();
    for run in std::fs::read_dir(&channel_dir).expect("runs").flatten() {
        let run_name = run.file_name().to_string_lossy().into_owned();
        for obj in std::fs::read_dir(run.path()).expect("run").flatten() {
            if !obj.file_name().to_string_lossy().ends_with(".jsonl") {
                continue;
            }
            let text = std::fs::read_to_string(obj.path()).expect("object");
            for line in text.lines() {
                let rec: Value = serde_json::from_str(line).expect("record");
                refs.push(format!("{run_name}/{}", rec["key"].as_str().expect("key")));
            }
        }
    }
    assert_eq!(refs.len(), 4, "{refs:?}");
    let ledgers = channel_dir.join("replays");
    std::fs::create_dir_all(&ledgers).expect("replays");
    let forged = ledgers.join("20261208T000000Z-1-deadbeef.json");
    let ledger = serde_json::json!({
        "format_version": 2,
        "kind": "dlqctl/archive-replay",
        "channel": channel,
        "target": "local-rabbitmq",
        "to": main,
        "run": "20261208T000000Z-1-deadbeef",
        "startedAt": "2026-12-08T00:00:00Z",
        "endedAt": "2026-12-08T00:00:01Z",
        "operator": "someone",
        "complete": true,
        "replayed": refs,
        "unsure": [],
    });
    std::fs::write(&forged, serde_json::to_vec_pretty(&ledger).expect("json")).expect("forge");

    let replay = |f: &support::workspace::Workspace| {
        f.run(&[
            "redrive",
            f.channel.as_str(),
            "channel.yaml",
            "--from-archive",
            &to,
            "--yes",
            "--format",
            "json",
        ])
    };
    let out = replay(&f);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("HMAC does not verify") || out.stderr.contains("HMAC does not verify"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        block(rabbit::take_all(&main)).is_empty(),
        "nothing published"
    );

    std::fs::remove_file(&forged).expect("remove the forged ledger");
    let out = replay(&f);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let mut got: Vec<String> = block(rabbit::take_all(&main))
        .into_iter()
        .map(|(b, _)| String::from_utf8_lossy(&b).into_owned())
        .collect();
    got.sort();
    assert_eq!(got.len(), 4, "every payment once: {got:?}");
    let out = replay(&f);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        block(rabbit::take_all(&main)).is_empty(),
        "the signed ledger holds"
    );
}
