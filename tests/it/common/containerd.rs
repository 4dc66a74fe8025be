//! A private containerd for one test: its own socket, root, state and CNI config directory
//! under a temporary directory, so tests run in parallel and never touch the host's runtime.
//! Installed by `scripts/ci-setup-containerd.sh`; when it is missing, tests skip — except in
//! CI (`CI=true`), where they fail.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

pub struct Containerd {
    dir: tempfile::TempDir,
    child: Option<Child>,
}

/// A CNI config the CRI plugin accepts (plugins from containernetworking-plugins).
const CONFLIST: &str = r#"{
  "cniVersion": "0.4.0",
  "name": "nodepulse-test",
  "plugins": [
    {"type": "bridge", "bridge": "nptest0", "isGateway": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.254.0.0/24"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
"#;

impl Containerd {
    /// Whether this machine has containerd. Missing: `None` with a note, or a failure in CI.
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
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: containerd is not installed; scripts/ci-setup-containerd.sh installs it"
        );
        eprintln!("{test}: skipped: containerd is not installed (scripts/ci-setup-containerd.sh)");
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
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{conf_dir}"
"#,
            root = path.join("root").display(),
            state = path.join("state").display(),
            socket = path.join("containerd.sock").display(),
            conf_dir = path.join("net.d").display(),
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

    /// SIGKILL, as a crash: the socket file stays behind.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.kill();
    }
}
