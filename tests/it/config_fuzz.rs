//! The configuration parser never panics, whatever the file says: a seeded mutator turns valid
//! files into thousands of broken ones (cut, spliced, retyped, with hostile YAML), and each must
//! be either refused with a message naming the file or accepted as a configuration that
//! survives a round trip through YAML unchanged.
//!
//! The seed is printed; `NODEPULSE_FUZZ_SEED` replays a run and `NODEPULSE_FUZZ_CASES` sets
//! how many files are tried (default 3000).

use std::panic::{AssertUnwindSafe, catch_unwind};

use nodepulse::config::{Config, EMBEDDED_DEFAULT, Source};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// Valid files the mutations start from.
const SEEDS: &[&str] = &[
    EMBEDDED_DEFAULT,
    "nodeStatusUpdateFrequency: 1s\nnodeLeaseDurationSeconds: 4\nrootDir: /\n",
    "supervision:\n  maxRestarts: 3\n  backoff: {initial: 10ms, max: 1s, jitter: 0.5}\ndebug:\n  address: 127.0.0.1:0\n  faultInjection: {enabled: true, token: a-token-of-sixteen-chars}\n",
    "evictionHard:\n  memory.available: 1Gi\n  nodefs.available: 5%\nevictionSoft:\n  memory.available: 2Gi\nevictionSoftGracePeriod:\n  memory.available: 1m30s\n",
    "nodeIP: [10.0.0.7, 'fd00::7']\nsystemReserved: {cpu: 500m, memory: 1Gi}\nregisterWithTaints: [{key: dedicated, value: infra, effect: NoSchedule}]\n",
];

/// Tokens that YAML, serde or the validators treat specially.
const TOKENS: &[&str] = &[
    ":",
    ": ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\"",
    "'",
    "\n",
    "\n  ",
    "  ",
    "\t",
    "#",
    "&a ",
    "*a",
    "!!binary ",
    "!!str ",
    "|\n",
    ">\n",
    "%YAML 1.2\n",
    "---\n",
    "...\n",
    "~",
    "null",
    "true",
    "-1",
    "-5s",
    "0",
    "0s",
    "1e309",
    "-0",
    ".inf",
    ".nan",
    "NaN",
    "18446744073709551616",
    "99999999999999999999h",
    "1.5",
    "0x10",
    "1_000",
    "\u{0}",
    "\u{feff}",
    "é",
    "∞",
    "ms",
    "1..5s",
    "?",
    "<<: *a",
    "=",
    "@",
    "`",
    "\\",
    "\r\n",
];

fn mutate(rng: &mut StdRng, text: &str) -> String {
    let mut text: Vec<char> = text.chars().collect();
    for _ in 0..rng.random_range(1..=4) {
        let at = rng.random_range(0..=text.len());
        match rng.random_range(0..6) {
            // Cut a stretch.
            0 => {
                let end = (at + rng.random_range(0..20)).min(text.len());
                text.drain(at..end);
            }
            // Insert a special token.
            1 | 2 => {
                let token = TOKENS[rng.random_range(0..TOKENS.len())];
                text.splice(at..at, token.chars());
            }
            // Replace a scalar after a colon with a token.
            3 => {
                if let Some(colon) = text[at..].iter().position(|c| *c == ':') {
                    let start = at + colon + 1;
                    let end = text[start..]
                        .iter()
                        .position(|c| *c == '\n')
                        .map_or(text.len(), |offset| start + offset);
                    let token = TOKENS[rng.random_range(0..TOKENS.len())];
                    text.splice(start..end, format!(" {token}").chars());
                }
            }
            // Duplicate a stretch elsewhere (duplicate keys, repeated sections).
            4 => {
                let end = (at + rng.random_range(0..60)).min(text.len());
                let copied: Vec<char> = text[at..end].to_vec();
                let to = rng.random_range(0..=text.len());
                text.splice(to..to, copied);
            }
            // A random printable or control character.
            _ => {
                let character = char::from_u32(rng.random_range(0..0x250)).unwrap_or('?');
                text.insert(at, character);
            }
        }
    }
    text.into_iter().collect()
}

/// Parses `text`; a panic fails the test with the input that caused it.
fn check(text: &str, seed: u64, case: usize) {
    let source = Source::File("fuzz.yaml".into());
    let outcome = catch_unwind(AssertUnwindSafe(|| Config::parse(text, source.clone())));
    let result = outcome
        .unwrap_or_else(|_| panic!("seed {seed}, case {case}: the parser panicked on {text:?}"));
    match result {
        Err(error) => {
            let message = error.to_string();
            assert!(
                message.starts_with("fuzz.yaml: ") && message.len() > "fuzz.yaml: ".len() + 5,
                "seed {seed}, case {case}: an unhelpful message {message:?} for {text:?}"
            );
        }
        Ok(config) => {
            let written = serde_yaml_ng::to_string(&config).unwrap_or_else(|error| {
                panic!("seed {seed}, case {case}: cannot write back {config:?}: {error}")
            });
            let again = Config::parse(&written, source).unwrap_or_else(|error| {
                panic!("seed {seed}, case {case}: {text:?} was accepted but its own rendering {written:?} is refused: {error}")
            });
            assert_eq!(
                again, config,
                "seed {seed}, case {case}: {text:?} changed in a round trip through {written:?}"
            );
        }
    }
}

#[test]
fn the_config_parser_never_panics_on_mutated_files() {
    let seed = std::env::var("NODEPULSE_FUZZ_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(rand::random);
    let cases: usize = std::env::var("NODEPULSE_FUZZ_CASES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(3000);
    eprintln!("config fuzz seed {seed}, {cases} cases (replay: NODEPULSE_FUZZ_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut accepted, mut refused) = (0, 0);
    for case in 0..cases {
        let start = SEEDS[rng.random_range(0..SEEDS.len())];
        let text = mutate(&mut rng, start);
        check(&text, seed, case);
        match Config::parse(&text, Source::Embedded) {
            Ok(_) => accepted += 1,
            Err(_) => refused += 1,
        }
    }
    eprintln!("config fuzz: {accepted} accepted, {refused} refused");
    assert!(
        refused > 0 && accepted > 0,
        "the mutations explored both sides"
    );
}

#[test]
fn hostile_yaml_is_refused_without_panicking_or_hanging() {
    let laughs = {
        let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for level in 1..=12 {
            let previous = format!("*a{}", level - 1);
            let items = [previous.as_str(); 9].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        text
    };
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    let long_key = format!("{}: 1\n", "k".repeat(1 << 20));
    let long_value = format!("nodeName: {}\n", "n".repeat(1 << 20));
    for (what, text) in [
        ("a billion laughs", laughs.as_str()),
        ("deep nesting", deep.as_str()),
        ("a 1 MiB key", long_key.as_str()),
        ("a 1 MiB value", long_value.as_str()),
        ("a NUL byte", "nodeName: a\u{0}b\n"),
        ("two documents", "maxPods: 10\n---\nmaxPods: 20\n"),
        ("a merge key", "base: &b {maxPods: 10}\n<<: *b\n"),
    ] {
        let started = std::time::Instant::now();
        check(text, 0, 0);
        assert!(
            Config::parse(text, Source::Embedded).is_err(),
            "{what} was accepted"
        );
        eprintln!("{what}: refused in {:?}", started.elapsed());
    }
}
