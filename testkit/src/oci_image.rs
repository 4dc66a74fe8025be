//! The offline test images: one OCI layout archive holding `nodepulse.test/busybox:1` (Debian's
//! `busybox-static` as `/bin/busybox`, with `/bin/sh` and friends linked to it) and
//! `nodepulse.test/pause:1` (the same layer; its entrypoint sleeps and exits 0 on SIGTERM), and
//! the busybox image under two users (`nonroot:1`, `named-user:1`), for `ctr images import`.
//! These machines reach no registry, so the tests build what they run.

use std::sync::OnceLock;

use serde_json::json;

use crate::tar_archive::TarArchive;

pub const BUSYBOX_IMAGE: &str = "nodepulse.test/busybox:1";
pub const PAUSE_IMAGE: &str = "nodepulse.test/pause:1";
/// The busybox image with `USER 1234` (the e2e suite's non-root image runs as 1234).
pub const NON_ROOT_IMAGE: &str = "nodepulse.test/nonroot:1";
/// The busybox image with `USER robot`: a name no runtime can tell is not root.
pub const NAMED_USER_IMAGE: &str = "nodepulse.test/named-user:1";

/// Where Debian's `busybox-static` installs the binary (`scripts/ci-setup-containerd.sh`).
const BUSYBOX: &str = "/bin/busybox";

/// The applets the tests call, as links to `/bin/busybox`.
const APPLETS: &[&str] = &[
    "sh", "cat", "echo", "sleep", "true", "false", "ls", "id", "hostname", "env", "printf", "test",
    "mkdir", "touch", "kill", "ip", "stat",
];

/// Pause: PID 1 of the sandbox ignores signals it has no handler for, so the trap is what
/// lets SIGTERM end it; `wait` returns as soon as the trapped signal arrives.
const PAUSE_SCRIPT: &str = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done";

/// Whether `busybox-static` is installed; missing: `None` and a visible skip, or a failure in CI.
pub fn busybox_required(test: &str) -> Option<()> {
    if std::path::Path::new(BUSYBOX).is_file() {
        return Some(());
    }
    crate::skip::missing(
        test,
        &format!("{BUSYBOX} (scripts/ci-setup-containerd.sh installs busybox-static)"),
    );
    None
}

/// The OCI layout archive with both images, built once per test process.
pub fn image_archive() -> &'static [u8] {
    static ARCHIVE: OnceLock<Vec<u8>> = OnceLock::new();
    ARCHIVE.get_or_init(build_archive)
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// One content-addressed blob of the layout.
struct Blob {
    media_type: &'static str,
    digest: String,
    bytes: Vec<u8>,
}

impl Blob {
    fn new(media_type: &'static str, bytes: Vec<u8>) -> Self {
        Self {
            media_type,
            digest: format!("sha256:{}", sha256_hex(&bytes)),
            bytes,
        }
    }

    fn descriptor(&self) -> serde_json::Value {
        json!({"mediaType": self.media_type, "digest": self.digest, "size": self.bytes.len()})
    }
}

fn layer() -> Blob {
    let busybox = std::fs::read(BUSYBOX).expect("busybox-static is installed");
    let mut tar = TarArchive::default();
    for dir in ["bin/", "etc/", "tmp/", "proc/", "sys/", "dev/"] {
        tar.directory(dir);
    }
    tar.file("bin/busybox", 0o755, &busybox);
    for applet in APPLETS {
        tar.symlink(&format!("bin/{applet}"), "busybox");
    }
    tar.file("etc/passwd", 0o644, b"root:x:0:0:root:/:/bin/sh\n");
    tar.file("etc/group", 0o644, b"root:x:0:\n");
    // An uncompressed layer: its diff id is its own digest.
    Blob::new("application/vnd.oci.image.layer.v1.tar", tar.finish())
}

/// An image config and its manifest over `layer`, run as `user` (empty: the default, root).
fn image(layer: &Blob, entrypoint: &[&str], user: &str) -> (Blob, Blob) {
    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/bin"],
            "Entrypoint": entrypoint,
            "WorkingDir": "/",
            "User": user,
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.digest]},
    });
    let config = Blob::new(
        "application/vnd.oci.image.config.v1+json",
        serde_json::to_vec(&config).expect("json"),
    );
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config.descriptor(),
        "layers": [layer.descriptor()],
    });
    let manifest = Blob::new(
        "application/vnd.oci.image.manifest.v1+json",
        serde_json::to_vec(&manifest).expect("json"),
    );
    (config, manifest)
}

/// An archive of images named `names`, each its own image ID (a config of its own over the
/// shared layer), for tests that need unused images to collect.
pub fn distinct_images_archive(names: &[&str]) -> Vec<u8> {
    let layer = layer();
    let mut blobs = Vec::new();
    let mut manifests = Vec::new();
    for name in names {
        let script = format!("echo {name}");
        let (config, manifest) = image(&layer, &["/bin/sh", "-c", &script], "");
        let mut descriptor = manifest.descriptor();
        descriptor["platform"] = json!({"architecture": "amd64", "os": "linux"});
        descriptor["annotations"] = json!({"io.containerd.image.name": name});
        manifests.push(descriptor);
        blobs.push(config);
        blobs.push(manifest);
    }
    let index = json!({"schemaVersion": 2, "manifests": manifests});
    let mut tar = TarArchive::default();
    tar.file("oci-layout", 0o644, br#"{"imageLayoutVersion":"1.0.0"}"#);
    tar.file(
        "index.json",
        0o644,
        &serde_json::to_vec(&index).expect("json"),
    );
    tar.directory("blobs/").directory("blobs/sha256/");
    for blob in std::iter::once(&layer).chain(&blobs) {
        let hex = blob.digest.trim_start_matches("sha256:");
        tar.file(&format!("blobs/sha256/{hex}"), 0o644, &blob.bytes);
    }
    tar.finish()
}

fn build_archive() -> Vec<u8> {
    let layer = layer();
    let (busybox_config, busybox_manifest) = image(&layer, &["/bin/sh"], "");
    let (pause_config, pause_manifest) = image(&layer, &["/bin/sh", "-c", PAUSE_SCRIPT], "");
    let (non_root_config, non_root_manifest) = image(&layer, &["/bin/sh"], "1234");
    let (named_config, named_manifest) = image(&layer, &["/bin/sh"], "robot");
    let entry = |manifest: &Blob, name: &str| {
        let mut descriptor = manifest.descriptor();
        descriptor["platform"] = json!({"architecture": "amd64", "os": "linux"});
        // ctr takes the full name from io.containerd.image.name.
        descriptor["annotations"] = json!({
            "io.containerd.image.name": name,
            "org.opencontainers.image.ref.name": name.rsplit(':').next(),
        });
        descriptor
    };
    let index = json!({
        "schemaVersion": 2,
        "manifests": [
            entry(&busybox_manifest, BUSYBOX_IMAGE),
            entry(&pause_manifest, PAUSE_IMAGE),
            entry(&non_root_manifest, NON_ROOT_IMAGE),
            entry(&named_manifest, NAMED_USER_IMAGE),
        ],
    });
    let mut tar = TarArchive::default();
    tar.file("oci-layout", 0o644, br#"{"imageLayoutVersion":"1.0.0"}"#);
    tar.file(
        "index.json",
        0o644,
        &serde_json::to_vec(&index).expect("json"),
    );
    tar.directory("blobs/").directory("blobs/sha256/");
    for blob in [
        &layer,
        &busybox_config,
        &busybox_manifest,
        &pause_config,
        &pause_manifest,
        &non_root_config,
        &non_root_manifest,
        &named_config,
        &named_manifest,
    ] {
        let hex = blob.digest.trim_start_matches("sha256:");
        tar.file(&format!("blobs/sha256/{hex}"), 0o644, &blob.bytes);
    }
    tar.finish()
}
