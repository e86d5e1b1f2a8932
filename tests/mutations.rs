//! A bounded, deterministic mutation run over every fixture and example: truncations, byte
//! flips, splices and duplications, each loaded and linted in-process. It proves no input
//! makes the loader or the rules panic, on every CI run; `fuzz/` holds the open-ended
//! coverage-guided version.

use std::path::PathBuf;

fn corpus() -> Vec<Vec<u8>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in ["tests/fixtures/invalid", "examples"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .expect("corpus dir")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        out.extend(files.iter().map(|f| std::fs::read(f).expect("read")));
    }
    out
}

/// SplitMix64: deterministic, so a failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..=rng.below(3) {
        match rng.below(6) {
            0 => v.truncate(rng.below(v.len() + 1)),
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            2 => {
                let at = rng.below(v.len() + 1);
                let from = rng.below(other.len() + 1);
                let len = rng.below(other.len() - from + 1).min(200);
                v.splice(at..at, other[from..from + len].iter().copied());
            }
            3 if !v.is_empty() => {
                let from = rng.below(v.len());
                let len = rng.below(v.len() - from).min(100);
                let piece: Vec<u8> = v[from..from + len].to_vec();
                let at = rng.below(v.len() + 1);
                v.splice(at..at, piece);
            }
            4 => {
                let tokens: [&[u8]; 8] =
                    [b"&a ", b"*a", b"[", b"{", b"\n- ", b": ", b"!!str ", b"\t"];
                let t = tokens[rng.below(tokens.len())];
                let at = rng.below(v.len() + 1);
                v.splice(at..at, t.iter().copied());
            }
            _ => {
                if !v.is_empty() {
                    let i = rng.below(v.len());
                    v.remove(i);
                }
            }
        }
    }
    v
}

#[test]
fn no_mutation_of_the_corpus_panics_the_loader_or_the_rules() {
    let corpus = corpus();
    assert!(corpus.len() > 50);
    let mut rng = Rng(0x00d1_c0de);
    let started = std::time::Instant::now();
    let mut runs = 0;
    // Bounded: 20,000 inputs or 60 s, whichever comes first.
    while runs < 20_000 && started.elapsed() < std::time::Duration::from_secs(60) {
        let a = &corpus[rng.below(corpus.len())];
        let b = &corpus[rng.below(corpus.len())];
        let input = mutate(&mut rng, a, b);
        let text = String::from_utf8_lossy(&input);
        let ws = dlqctl::spec::load::load_str("mutated.yaml", &text);
        let _ = dlqctl::spec::rules::check(&ws);
        runs += 1;
    }
    assert!(runs >= 1_000, "only {runs} inputs in the time budget");
}
