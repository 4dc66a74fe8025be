//! A CSI driver's replies: the first byte picks the reply, the rest is its protobuf.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((selector, reply)) = data.split_first() {
        nodepulse::volume_plugins::csi::read_reply(*selector, reply);
    }
});
