//! nodepulse's configuration file: a configuration or a clear refusal, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nodepulse::config::{Config, Source};

fuzz_target!(|data: &[u8]| {
    // The file is read as UTF-8 text (`read_to_string`); other bytes never reach the parser.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::parse(text, Source::Embedded);
    }
});
