//! Any bytes, as a spec file: the loader and the lint rules must return findings, never
//! panic, hang or blow up memory (alias bombs, deep nesting, invalid UTF-8 included).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let ws = dlqctl::spec::load::load_str("fuzz.yaml", &text);
    let _ = dlqctl::spec::rules::check(&ws);
});
