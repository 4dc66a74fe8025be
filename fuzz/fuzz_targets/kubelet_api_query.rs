//! A kubelet API request target (`path?query`), through the parsers the routes run on it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A URI's path and query are ASCII on the wire; hyper hands them on as `&str`.
    if let Ok(target) = std::str::from_utf8(data) {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        nodepulse::kubelet_server::read_request_target(path, query);
    }
});
