//! The fuzz target's way in (`fuzz/fuzz_targets/kubelet_api_query.rs`): a request's path and
//! query string as a client could send them, through every parser the routes run before any
//! handler acts: the path's percent-decoded segments, `/healthz`'s `verbose` and `exclude`,
//! `/stats/summary`'s scope and `/containerLogs`' options. Each refuses what it cannot read;
//! none may panic.

/// Runs the request target's parsers on `path` and `query`.
#[doc(hidden)]
pub fn read_request_target(path: &str, query: &str) {
    let _ = super::routes::segments(path);
    let _ = super::healthz::answer(path, query, None);
    let _ = super::healthz::answer("/healthz", query, None);
    let _ = super::stats::handler::scope(query);
    let _ = super::logs::options::parse(query, jiff::Timestamp::now());
}
