//! The processes a system benchmark runs: the API emulator and the nodepulse daemon, each its
//! own process so its cost can be read from `/proc`. Both binaries are taken from beside the
//! bench's own (the same `target/<profile>` directory); a child is killed when dropped.

use std::{
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// A binary of this workspace, next to the running one.
pub fn sibling(name: &str) -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|error| format!("cannot locate myself: {error}"))?;
    let mut directory = me.parent().map(Path::to_path_buf).unwrap_or_default();
    // Test and bench executables live one level down, in `deps/`.
    if directory.ends_with("deps") {
        directory.pop();
    }
    let path = directory.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} is missing: build the workspace first (`cargo build --profile ship --workspace`)",
            path.display()
        ))
    }
}

/// The daemon to measure: `given` (another build, for A/B runs), else the `nodepulse` beside
/// this binary.
pub fn daemon_binary(given: Option<&Path>) -> Result<PathBuf, String> {
    match given {
        Some(path) if path.is_file() => Ok(path.to_path_buf()),
        Some(path) => Err(format!("--daemon {}: no such file", path.display())),
        None => sibling("nodepulse"),
    }
}

/// A port nothing listens on now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits until something accepts connections on `address`.
pub fn wait_listening(address: SocketAddr, patience: Duration) -> Result<(), String> {
    let deadline = Instant::now() + patience;
    while TcpStream::connect_timeout(&address, Duration::from_millis(100)).is_err() {
        if Instant::now() > deadline {
            return Err(format!("nothing listens on {address} after {patience:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// A child process, killed when dropped.
pub struct Running {
    child: Child,
}

impl Running {
    pub fn spawn(binary: &Path, args: &[String]) -> Result<Self, String> {
        let child = Command::new(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", binary.display()))?;
        Ok(Self { child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The emulator on a free port, its node-lifecycle loop on (as a real control plane's).
pub fn start_emulator() -> Result<(Running, SocketAddr), String> {
    let port = free_port().map_err(|error| error.to_string())?;
    let address: SocketAddr = ([127, 0, 0, 1], port).into();
    let emulator = Running::spawn(
        &sibling("nodepulse-emulator")?,
        &["--address".into(), address.to_string()],
    )?;
    wait_listening(address, Duration::from_secs(30))?;
    Ok((emulator, address))
}
