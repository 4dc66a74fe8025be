//! The nodepulse binary as a child process against a test cluster: its configuration file, its
//! JSON log lines collected in the background (so async tests can poll them without blocking
//! the runtime that serves the emulator), its debug endpoint, and the signals tests send it.

use std::{
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use nodepulse_supervisor::{ActorSnapshot, ChildState};
use reqwest::StatusCode;
use serde_json::Value;

use crate::{PATIENCE, eventually};

/// The fault-injection token tests give the daemon; never expected in its logs.
pub const DEBUG_TOKEN: &str = "reliability-token-6f1c9a27d3";

/// A configuration for a daemon under attack: a simulated runtime (and simulated pods), an
/// eviction threshold no test host meets (a host short of disk would rightly evict the test's
/// pods), fault injection on, the debug endpoint on an ephemeral loopback port, then `extra`
/// (which must not repeat those keys: duplicate keys are refused).
pub fn attack_config(extra: &str) -> String {
    format!(
        "runtime: simulated\nrootDir: /\npodCIDR: 10.124.0.0/16\nevictionHard:\n  memory.available: 1Mi\ndebug:\n  address: 127.0.0.1:0\n  faultInjection: {{enabled: true, token: {DEBUG_TOKEN}}}\n{extra}"
    )
}

/// A running nodepulse process. Killed (SIGKILL) when dropped, so a failing test leaves nothing.
pub struct DaemonProcess {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// `http://127.0.0.1:port` of its debug endpoint.
    pub debug: String,
    http: reqwest::Client,
    _config: tempfile::NamedTempFile,
    /// Its cgroup root, removed after it stopped.
    _cgroups: Option<crate::test_cgroups::TestCgroupRoot>,
}

impl DaemonProcess {
    /// Starts `nodepulse --kubeconfig … --node-name node` with `yaml` as its configuration
    /// file and waits until it says it is running.
    pub async fn start(kubeconfig: &Path, node: &str, yaml: &str) -> Self {
        Self::start_with_env(kubeconfig, node, yaml, &[]).await
    }

    /// [`DaemonProcess::start`] with extra environment variables (`RUST_LOG`, say).
    pub async fn start_with_env(
        kubeconfig: &Path,
        node: &str,
        yaml: &str,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_with_args(kubeconfig, node, yaml, env, &[]).await
    }

    /// [`DaemonProcess::start_with_env`] with extra command-line arguments.
    pub async fn start_with_args(
        kubeconfig: &Path,
        node: &str,
        yaml: &str,
        env: &[(&str, &str)],
        args: &[&std::ffi::OsStr],
    ) -> Self {
        let mut daemon = Self::spawn_with_args(kubeconfig, node, yaml, env, args);
        daemon.wait_running().await;
        daemon
    }

    /// [`DaemonProcess::start_with_args`] without waiting for it to run (a TLS bootstrap
    /// waiting on its CSR is not running yet): its log is collected, its debug address unknown
    /// until [`DaemonProcess::wait_running`].
    pub fn spawn_with_args(
        kubeconfig: &Path,
        node: &str,
        yaml: &str,
        env: &[(&str, &str)],
        args: &[&std::ffi::OsStr],
    ) -> Self {
        crate::cleanup::own_node(node);
        let mut all = vec![std::ffi::OsStr::new("--kubeconfig"), kubeconfig.as_os_str()];
        all.extend_from_slice(args);
        Self::spawn(node, &with_private_debug_port(yaml), env, &all)
    }

    /// `nodepulse --standalone` for `node` with `yaml`: its own API server, no cluster; waits
    /// until it says it is running.
    pub async fn standalone(node: &str, yaml: &str) -> Self {
        let mut daemon = Self::spawn(node, yaml, &[], &[std::ffi::OsStr::new("--standalone")]);
        daemon.wait_running().await;
        daemon
    }

    /// The binary with `yaml` as its configuration file, for `node`, logging JSON, with
    /// `env` and `args`.
    fn spawn(node: &str, yaml: &str, env: &[(&str, &str)], args: &[&std::ffi::OsStr]) -> Self {
        // A cgroup root of its own unless the test chose one (`test_cgroups`): named after its
        // rootDir, so a daemon restarted on the same configuration finds its pods' cgroups,
        // and removed with that directory; a fresh one, removed with the process, without.
        let own_root = !yaml.contains("cgroupRoot")
            && !yaml.contains("cgroupsPerQOS")
            && !yaml.trim_start().starts_with('{');
        let root_dir = yaml
            .lines()
            .find_map(|line| line.strip_prefix("rootDir:"))
            .map(|dir| std::path::PathBuf::from(dir.trim()));
        let (root, cgroups) = match (own_root, root_dir) {
            (false, _) => (None, None),
            (true, Some(dir)) => {
                let root = crate::test_cgroups::cgroup_root_for(&dir);
                crate::test_cgroups::make_root(&root);
                (Some(root), None)
            }
            (true, None) => {
                let guard = crate::test_cgroups::TestCgroupRoot::new();
                (Some(guard.0.clone()), Some(guard))
            }
        };
        let yaml = match &root {
            Some(root) => format!("{}\ncgroupRoot: {root}\n", yaml.trim_end()),
            None => yaml.to_owned(),
        };
        let mut config = tempfile::NamedTempFile::new().expect("temp file");
        config.write_all(yaml.as_bytes()).expect("write config");
        let mut command = Command::new(nodepulse_binary());
        command
            .arg("--config")
            .arg(config.path())
            .args(["--node-name", node, "--log-format", "json"])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the daemon starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut all) = sink.lock() {
                    all.push(line);
                }
            }
        });
        Self {
            child,
            lines,
            debug: String::new(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("a client"),
            _config: config,
            _cgroups: cgroups,
        }
    }

    /// Waits until it says it is running, and takes its debug address from that line.
    pub async fn wait_running(&mut self) {
        let running = self.wait_event("nodepulse is running").await;
        self.debug = format!(
            "http://{}",
            running["debug"]
                .as_str()
                .expect("the debug address is logged")
        );
    }

    /// Its process id, for what `/proc` says of it.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every line written to stderr so far.
    pub fn log_lines(&self) -> Vec<String> {
        self.lines.lock().map(|all| all.clone()).unwrap_or_default()
    }

    /// The JSON log events whose message is `message`.
    pub fn events(&self, message: &str) -> Vec<Value> {
        self.log_lines()
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|event| event["message"] == message)
            .collect()
    }

    /// Waits for the first log event whose message is `message`.
    pub async fn wait_event(&self, message: &str) -> Value {
        self.wait_event_within(message, Duration::ZERO).await
    }

    /// [`DaemonProcess::wait_event`], allowing `more` than [`PATIENCE`] (for events that
    /// come after a known time, a certificate's rotation, say).
    pub async fn wait_event_within(&self, message: &str, more: Duration) -> Value {
        let deadline = Instant::now() + PATIENCE + more;
        loop {
            if let Some(event) = self.events(message).into_iter().next() {
                return event;
            }
            assert!(
                Instant::now() < deadline,
                "no log event {message:?} within {:?}; stderr:\n{}",
                PATIENCE + more,
                self.log_lines().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The most memory it has held resident so far (`VmHWM`), in KiB.
    pub fn peak_resident_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the daemon's /proc status");
        (status.lines())
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in the daemon's /proc status")
    }

    /// Sends `signal` (`TERM`, `KILL`, …) with kill(1).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Polls for the exit for up to `deadline`; the exit code, or None if still running (or
    /// ended by a signal: then -signal).
    pub async fn wait_exit(&mut self, deadline: Duration) -> Option<i32> {
        let until = Instant::now() + deadline;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                use std::os::unix::process::ExitStatusExt;
                return Some(
                    status
                        .code()
                        .unwrap_or_else(|| -status.signal().unwrap_or(0)),
                );
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `GET {debug}{path}`: the status and the JSON body (Null when not JSON).
    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        match self.http.get(format!("{}{path}", self.debug)).send().await {
            Ok(response) => {
                let status = response.status();
                (status, response.json().await.unwrap_or(Value::Null))
            }
            Err(error) => panic!("GET {path}: {error}"),
        }
    }

    /// `GET {debug}/metrics`: the text exposition.
    pub async fn metrics_text(&self) -> String {
        let response = self
            .http
            .get(format!("{}/metrics", self.debug))
            .send()
            .await
            .unwrap_or_else(|error| panic!("GET /metrics: {error}"));
        assert!(
            response.status().is_success(),
            "/metrics: {}",
            response.status()
        );
        response.text().await.expect("a /metrics body")
    }

    /// The daemon's API requests so far with `verb` on `resource`, every status code summed
    /// (`nodepulse_rest_client_requests_total`, client-go's verbs).
    pub async fn api_requests(&self, verb: &str, resource: &str) -> f64 {
        let (verb, resource) = (
            format!("verb=\"{verb}\""),
            format!("resource=\"{resource}\""),
        );
        self.metrics_text()
            .await
            .lines()
            .filter(|line| line.starts_with("nodepulse_rest_client_requests_total{"))
            .filter(|line| line.contains(&verb) && line.contains(&resource))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// The debug endpoint's view of one actor.
    pub async fn actor(&self, name: &str) -> Value {
        let (status, body) = self.get(&format!("/debug/actors/{name}")).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        body
    }

    /// `GET /debug/actors/{name}` read as the supervisor's typed view.
    pub async fn snapshot(&self, name: &str) -> ActorSnapshot {
        let body = self.actor(name).await;
        serde_json::from_value(body.clone()).unwrap_or_else(|error| {
            panic!("{name}'s view does not read as a snapshot ({error}): {body}")
        })
    }

    /// `GET /debug/actors`, typed: every actor of every node here.
    pub async fn snapshots(&self) -> Vec<ActorSnapshot> {
        let (status, body) = self.get("/debug/actors").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        serde_json::from_value(body["actors"].clone()).unwrap_or_else(|error| {
            panic!("the actor list does not read as snapshots ({error}): {body}")
        })
    }

    /// `POST /debug/actors/{name}/kill?mode=…` with the token; the status and JSON body.
    pub async fn kill_actor(&self, name: &str, mode: &str) -> (StatusCode, Value) {
        self.post(
            &format!("/debug/actors/{name}/kill?mode={mode}"),
            Some(DEBUG_TOKEN),
        )
        .await
    }

    pub async fn post(&self, path: &str, token: Option<&str>) -> (StatusCode, Value) {
        let mut request = self.http.post(format!("{}{path}", self.debug));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("the debug endpoint answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Kills `name` in `mode` and waits until it runs again with one more restart; returns
    /// how long that took (the restart time).
    pub async fn kill_and_wait_restart(&self, name: &str, mode: &str) -> Duration {
        let before = self.snapshot(name).await.restarts;
        let killed_at = Instant::now();
        let (status, body) = self.kill_actor(name, mode).await;
        assert_eq!(status, StatusCode::ACCEPTED, "kill {name} {mode}: {body}");
        let deadline = killed_at + PATIENCE;
        loop {
            let actor = self.snapshot(name).await;
            if actor.state == ChildState::Running && actor.restarts == before + 1 {
                return killed_at.elapsed();
            }
            assert_ne!(
                actor.state,
                ChildState::Escalated,
                "{name} escalated after a {mode} kill: {actor:?}"
            );
            assert!(
                Instant::now() < deadline,
                "{name} was not restarted within {PATIENCE:?} after a {mode} kill: {actor:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `daemon`'s log has an event `message` (a blocking-free variant of `eventually`).
pub async fn logged(daemon: &DaemonProcess, message: &str) {
    eventually(&format!("the daemon logs {message:?}"), || {
        !daemon.events(message).is_empty()
    })
    .await;
}

/// `yaml` with the debug endpoint on a port the kernel picks unless it says where: tests run
/// side by side, and a node on the test host may hold the well-known 10280. (Standalone runs
/// keep their yaml: their test checks the well-known ports.)
fn with_private_debug_port(yaml: &str) -> std::borrow::Cow<'_, str> {
    if yaml.lines().any(|line| line.starts_with("debug:")) {
        return yaml.into();
    }
    let separator = if yaml.is_empty() || yaml.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!("{yaml}{separator}debug:\n  address: 127.0.0.1:0\n").into()
}

/// The nodepulse binary the tests run: `NODEPULSE_TEST_BINARY` when set, else
/// `CARGO_BIN_EXE_nodepulse` from the environment (`cargo test` sets it), else the one cargo
/// built beside the running test binary (`target/<profile>/deps/it-…` beside
/// `target/<profile>/nodepulse`, where `scripts/run-test-binaries.sh` runs it without cargo).
/// A library cannot take it from `env!`: cargo sets that only for the package's own tests.
pub fn nodepulse_binary() -> std::path::PathBuf {
    for name in ["NODEPULSE_TEST_BINARY", "CARGO_BIN_EXE_nodepulse"] {
        if let Some(path) = std::env::var_os(name) {
            return path.into();
        }
    }
    let test_binary = std::env::current_exe().expect("the test binary's path");
    let beside = test_binary
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("nodepulse"));
    match beside {
        Some(path) if path.is_file() => path,
        _ => panic!(
            "no nodepulse binary beside {} (build it, or name it in NODEPULSE_TEST_BINARY)",
            test_binary.display()
        ),
    }
}
