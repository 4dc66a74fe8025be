//! A private containerd for one test: its own socket, root, state and CNI config directory
//! under a temporary directory, so tests run in parallel and never touch the host's runtime.
//! Pods run on it: the sandbox image is the offline pause image (`oci_image`), the CNI config
//! puts them on a bridge in 198.18.1.0/24, and `oom_score_adj` is held to containerd's own.
//! Installed by `scripts/ci-setup-containerd.sh`; when it is missing, tests skip visibly —
//! except in CI (`CI` set), where they fail.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use crate::oci_image;

pub struct Containerd {
    dir: tempfile::TempDir,
    child: Option<Child>,
}

/// A CNI config the CRI plugin accepts (plugins from containernetworking-plugins). Tests may
/// use only loopback and their own ranges: 198.18.1.0/24 is from the benchmarking block
/// (RFC 2544). Every test's containerd shares the bridge and host-local's lease files, which
/// host-local locks, so parallel tests never get the same address.
const CONFLIST: &str = r#"{
  "cniVersion": "0.4.0",
  "name": "nodepulse-test",
  "plugins": [
    {"type": "bridge", "bridge": "nptest0", "isGateway": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.18.1.0/24"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
"#;

impl Containerd {
    /// Whether this machine has containerd. Missing: `None` and a visible skip, or a failure in CI.
    pub fn required(test: &str) -> Option<()> {
        let present = Command::new("containerd")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if present {
            return Some(());
        }
        crate::skip::missing(
            test,
            "containerd (scripts/ci-setup-containerd.sh installs it)",
        );
        None
    }

    /// Starts containerd (config v2) on a private socket; nothing is served until the socket
    /// appears, which the caller waits for through its probe.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("np-ctd")
            .tempdir()
            .expect("temp dir");
        let path = dir.path();
        std::fs::create_dir_all(path.join("net.d")).expect("conf dir");
        let config = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  # Without CAP_SYS_RESOURCE nothing may go below its own oom_score_adj; without this the
  # pause container's -998 fails every RunPodSandbox.
  restrict_oom_score_adj = true
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{conf_dir}"
"#,
            root = path.join("root").display(),
            state = path.join("state").display(),
            socket = path.join("containerd.sock").display(),
            conf_dir = path.join("net.d").display(),
            sandbox_image = oci_image::PAUSE_IMAGE,
        );
        std::fs::write(path.join("config.toml"), config).expect("config");
        let mut containerd = Self { dir, child: None };
        containerd.spawn();
        containerd
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("containerd.log"))
            .expect("log file");
        let child = Command::new("containerd")
            .arg("--config")
            .arg(self.dir.path().join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("containerd starts");
        self.child = Some(child);
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("containerd.sock")
    }

    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a CNI conflist into the private `conf_dir`, as a CNI installer would. Written in
    /// place, not renamed in: containerd 1.6 reloads on a write event and ignores the create
    /// event a rename produces, so a conflist moved into place is only seen after a restart.
    pub fn write_cni_config(&self) {
        std::fs::write(
            self.dir.path().join("net.d/10-nodepulse.conflist"),
            CONFLIST,
        )
        .expect("conflist");
    }

    /// Imports the offline busybox and pause images into the `k8s.io` namespace, where the
    /// CRI plugin finds them (it learns of them from containerd's events, so a caller polls
    /// ImageStatus before relying on one). The runtime must be serving.
    pub fn import_test_images(&self) {
        self.import_archive(oci_image::image_archive());
    }

    /// Imports an OCI layout archive into the `k8s.io` namespace (see `import_test_images`).
    pub fn import_archive(&self, bytes: &[u8]) {
        let archive = self.dir.path().join("images.tar");
        std::fs::write(&archive, bytes).expect("image archive");
        let output = Command::new("ctr")
            .arg("--address")
            .arg(self.socket())
            .args(["--namespace", "k8s.io", "images", "import"])
            .arg(&archive)
            .output()
            .expect("ctr runs");
        assert!(
            output.status.success(),
            "ctr images import failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let _ = std::fs::remove_file(&archive);
    }

    /// SIGKILL, as a crash: the socket file stays behind.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP until the guard drops (SIGCONT): containerd keeps its socket and connections
    /// but answers nothing, as a runtime that hangs.
    pub fn pause(&self) -> Paused<'_> {
        self.signal("-STOP");
        Paused(self)
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("containerd runs").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid}");
    }

    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }
}

/// A paused containerd; dropping it lets containerd run again (also when the test fails, so
/// the fixture's clean-up is answered).
pub struct Paused<'a>(&'a Containerd);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.signal("-CONT");
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.kill();
    }
}
