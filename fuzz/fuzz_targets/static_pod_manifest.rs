//! A static pod manifest, as a file in `staticPodPath` and as a `staticPodURL` body: a pod or
//! a clear refusal, never a panic, and no alias bomb past libFuzzer's memory limit.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use nodepulse::node::static_pods::{static_pod, url_pods};

fuzz_target!(|data: &[u8]| {
    let _ = static_pod(
        data,
        Path::new("/etc/kubernetes/manifests/fuzzed.yaml"),
        "node-1",
    );
    let _ = url_pods(data, "http://manifests.example/pods", "node-1");
});
