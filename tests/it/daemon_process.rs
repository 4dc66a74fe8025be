//! The daemon as a process: how it starts, stops on SIGTERM, refuses bad configuration, and
//! exits when its supervisor escalates — each with its documented exit code and message.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use nodepulse::{
    config::{Config, Settings, Source},
    daemon::{self, EXIT_CONFIG, EXIT_ESCALATED},
    logging::{self, LogFormat},
    node::supervisor_config,
};
use nodepulse_supervisor::{ChildSpec, Supervisor, mailbox};
use nodepulse_testkit::{PATIENCE, actors::RecorderStore};

const TOKEN: &str = "escalation-test-token-42";

/// A started process whose stderr lines arrive on a channel, so tests can wait for a log line.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the process starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for the JSON log event whose message is `message` and returns it.
    fn event(&mut self, message: &str) -> serde_json::Value {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) else {
                continue;
            };
            self.seen.push(line.clone());
            let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if event["message"] == message {
                return event;
            }
        }
        panic!(
            "no log event {message:?}; stderr so far:\n{}",
            self.seen.join("\n")
        );
    }

    /// Waits for the daemon to announce itself and returns its debug address.
    fn debug_address(&mut self) -> String {
        let event = self.event("nodepulse is running");
        event["debug"]
            .as_str()
            .expect("the debug address is logged")
            .to_owned()
    }

    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    /// Waits for the exit and returns the code with everything it wrote to stderr.
    fn wait(mut self) -> (i32, String) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.seen.push(line);
                }
                return (status.code().unwrap_or(-1), self.seen.join("\n"));
            }
            assert!(
                Instant::now() < deadline,
                "the process did not exit within {PATIENCE:?}"
            );
            while let Ok(line) = self.lines.try_recv() {
                self.seen.push(line);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A configuration file holding `yaml`, and a root dir of its own: a daemon of the default
/// `runtime: cri` serves the kubelet API, whose self-signed certificate goes under the root
/// dir, on ports the kernel picks (these tests run side by side).
struct ConfigFile {
    file: tempfile::NamedTempFile,
    _root: tempfile::TempDir,
}

impl ConfigFile {
    fn path(&self) -> &std::path::Path {
        self.file.path()
    }
}

fn config_file(yaml: &str) -> ConfigFile {
    let root = tempfile::tempdir().expect("root dir");
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    let mut own = String::from("port: 0\nhealthzPort: 0\n");
    if !yaml.contains("rootDir:") {
        own.push_str(&format!("rootDir: {}\n", root.path().display()));
    }
    write!(file, "{own}{yaml}").expect("write");
    ConfigFile { file, _root: root }
}

#[test]
fn sigterm_stops_the_daemon_cleanly_with_exit_code_zero() {
    let config =
        config_file("debug:\n  address: 127.0.0.1:0\nstandalone:\n  apiAddress: 127.0.0.1:0\n");
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodepulse"));
    command.args([
        "--standalone",
        "--config",
        config.path().to_str().expect("utf-8"),
        "--node-name",
        "sigterm-node",
        "--log-format",
        "json",
    ]);
    let mut daemon = Running::start(command);
    let address = daemon.debug_address();

    let health = http::get(&format!("http://{address}/healthz"));
    assert_eq!(health.as_deref(), Ok("ok"));
    let status = Command::new("kill")
        .args(["-TERM", &daemon.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let (code, stderr) = daemon.wait();
    assert_eq!(code, 0, "stderr:\n{stderr}");
    assert!(stderr.contains("shutting down"), "stderr:\n{stderr}");
}

#[test]
fn standalone_mode_serves_an_api_and_writes_a_kubeconfig_for_it() {
    let directory = tempfile::tempdir().expect("temp dir");
    let kubeconfig = directory.path().join("standalone.kubeconfig");
    let config = config_file(&format!(
        "debug:\n  address: 127.0.0.1:0\nstandalone:\n  apiAddress: 127.0.0.1:0\n  kubeconfigPath: {}\n",
        kubeconfig.display()
    ));
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodepulse"));
    command.args([
        "--standalone",
        "--config",
        config.path().to_str().expect("utf-8"),
        "--node-name",
        "standalone-node",
        "--log-format",
        "json",
    ]);
    let mut daemon = Running::start(command);
    let api = daemon.event("standalone API server running")["api"]
        .as_str()
        .expect("api logged")
        .to_owned();
    daemon.debug_address();

    let written = std::fs::read_to_string(&kubeconfig).expect("the kubeconfig was written");
    let parsed: serde_json::Value =
        serde_yaml_ng::from_str(&written).expect("the kubeconfig is YAML");
    assert_eq!(
        parsed["clusters"][0]["cluster"]["server"].as_str(),
        Some(api.as_str()),
        "{written}"
    );
    let namespaces = http::get(&format!("{api}/api/v1/namespaces")).expect("the API answers");
    assert!(namespaces.contains("\"kube-node-lease\""), "{namespaces}");
    daemon.terminate();
    let (code, stderr) = daemon.wait();
    assert_eq!(code, 0, "stderr:\n{stderr}");
}

/// `nodepulse --standalone` with `config` and `TMPDIR` set to `tmpdir`, logging JSON.
fn standalone_in(tmpdir: &std::path::Path, config: &ConfigFile, node: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodepulse"));
    command.env("TMPDIR", tmpdir).args([
        "--standalone",
        "--config",
        config.path().to_str().expect("utf-8"),
        "--node-name",
        node,
        "--log-format",
        "json",
    ]);
    command
}

#[test]
fn standalone_kubeconfigs_are_private_per_instance_and_never_written_through_a_planted_link() {
    use std::os::unix::fs::PermissionsExt;
    let tmpdir = tempfile::tempdir().expect("temp dir");
    // What another local user could plant at the name nodepulse once used: a link to a file
    // root owns.
    let precious = tmpdir.path().join("precious");
    std::fs::write(&precious, "root's file\n").expect("written");
    std::os::unix::fs::symlink(
        &precious,
        tmpdir.path().join("nodepulse-standalone.kubeconfig"),
    )
    .expect("planted");
    let config =
        config_file("debug:\n  address: 127.0.0.1:0\nstandalone:\n  apiAddress: 127.0.0.1:0\n");
    let mut first = Running::start(standalone_in(tmpdir.path(), &config, "private-one"));
    let mut second = Running::start(standalone_in(tmpdir.path(), &config, "private-two"));
    let mut kubeconfigs = Vec::new();
    for daemon in [&mut first, &mut second] {
        let started = daemon.event("standalone API server running");
        let api = started["api"].as_str().expect("api logged").to_owned();
        let path = std::path::PathBuf::from(started["kubeconfig"].as_str().expect("path logged"));
        let written = std::fs::read_to_string(&path).expect("the kubeconfig was written");
        assert!(
            written.contains(&api),
            "{} names {api}: {written}",
            path.display()
        );
        let mode = |p: &std::path::Path| {
            std::fs::symlink_metadata(p)
                .expect("stat")
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode(&path), 0o600, "{}", path.display());
        let dir = path.parent().expect("a directory");
        assert_eq!(dir.parent(), Some(tmpdir.path()), "{}", path.display());
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
        kubeconfigs.push((path, written));
        daemon.debug_address();
    }
    assert_ne!(
        kubeconfigs[0].0, kubeconfigs[1].0,
        "each instance has its own kubeconfig"
    );
    assert_ne!(
        kubeconfigs[0].1, kubeconfigs[1].1,
        "each names its own API server"
    );
    assert_eq!(
        std::fs::read_to_string(&precious).expect("still there"),
        "root's file\n",
        "the planted link was followed"
    );
    for daemon in [first, second] {
        daemon.terminate();
        let (code, stderr) = daemon.wait();
        assert_eq!(code, 0, "stderr:\n{stderr}");
    }
    for (path, _) in &kubeconfigs {
        assert!(
            !path.parent().expect("a directory").exists(),
            "{} is removed at exit",
            path.display()
        );
    }
}

#[test]
fn a_sigterm_while_the_node_is_still_starting_stops_it_cleanly_and_leaves_no_kubeconfig() {
    let tmpdir = tempfile::tempdir().expect("temp dir");
    let config =
        config_file("debug:\n  address: 127.0.0.1:0\nstandalone:\n  apiAddress: 127.0.0.1:0\n");
    let mut daemon = Running::start(standalone_in(tmpdir.path(), &config, "early-stop"));
    // Said before the API client, the node's actors and the debug endpoint start: the signal
    // comes while they do, as a service manager's stop may.
    daemon.event("standalone API server running");
    daemon.terminate();
    let (code, stderr) = daemon.wait();
    assert_eq!(code, 0, "stderr:\n{stderr}");
    let left: Vec<_> = std::fs::read_dir(tmpdir.path())
        .expect("readable")
        .map(|entry| entry.expect("an entry").file_name())
        .collect();
    assert!(
        left.is_empty(),
        "the standalone directories are removed at exit: {left:?}"
    );
}

#[test]
fn a_configured_standalone_kubeconfig_path_that_is_taken_is_refused_not_overwritten() {
    let tmpdir = tempfile::tempdir().expect("temp dir");
    let existing = tmpdir.path().join("existing.kubeconfig");
    std::fs::write(&existing, "someone's kubeconfig\n").expect("written");
    let precious = tmpdir.path().join("precious");
    std::fs::write(&precious, "root's file\n").expect("written");
    let link = tmpdir.path().join("link.kubeconfig");
    std::os::unix::fs::symlink(&precious, &link).expect("planted");
    for (path, target, before) in [
        (&existing, &existing, "someone's kubeconfig\n"),
        (&link, &precious, "root's file\n"),
    ] {
        let config = config_file(&format!(
            "debug:\n  address: 127.0.0.1:0\nstandalone:\n  apiAddress: 127.0.0.1:0\n  kubeconfigPath: {}\n",
            path.display()
        ));
        let (code, stderr) = Running::start(standalone_in(tmpdir.path(), &config, "taken")).wait();
        assert_eq!(code, 1, "stderr:\n{stderr}");
        assert!(
            stderr.contains(&path.display().to_string()) && stderr.contains("never overwrites"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(target).expect("still there"),
            before
        );
    }
}

#[test]
fn without_any_cluster_it_exits_with_code_1_and_says_how_to_give_one() {
    let directory = tempfile::tempdir().expect("temp dir");
    let config = config_file("debug:\n  address: 127.0.0.1:0\n");
    let output = Command::new(env!("CARGO_BIN_EXE_nodepulse"))
        .args([
            "--config",
            config.path().to_str().expect("utf-8"),
            "--node-name",
            "lonely",
        ])
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", directory.path())
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no cluster to talk to") && stderr.contains("--standalone"),
        "{stderr}"
    );
}

#[test]
fn standalone_with_a_simulated_runtime_brings_the_node_ready_and_renews_its_lease() {
    let directory = tempfile::tempdir().expect("temp dir");
    let kubeconfig = directory.path().join("standalone.kubeconfig");
    let config = config_file(&format!(
        "runtime: simulated\nrootDir: /\nnodeLeaseDurationSeconds: 4\ndebug:\n  address: 127.0.0.1:0\nstandalone:\n  apiAddress: 127.0.0.1:0\n  kubeconfigPath: {}\n",
        kubeconfig.display()
    ));
    let started = Instant::now();
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodepulse"));
    command.args([
        "--standalone",
        "--config",
        config.path().to_str().expect("utf-8"),
        "--node-name",
        "e2e-node",
        "--log-format",
        "json",
    ]);
    let mut daemon = Running::start(command);
    let api = daemon.event("standalone API server running")["api"]
        .as_str()
        .expect("api logged")
        .to_owned();
    let debug = daemon.debug_address();

    let ready = |body: &str| {
        serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .is_some_and(|node| {
                node["status"]["conditions"]
                    .as_array()
                    .is_some_and(|conditions| {
                        conditions
                            .iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            })
    };
    let deadline = Instant::now() + PATIENCE;
    while !http::get(&format!("{api}/api/v1/nodes/e2e-node")).is_ok_and(|body| ready(&body)) {
        assert!(Instant::now() < deadline, "the node never became Ready");
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!(
        "process start → Ready=True in the API: {:?}",
        started.elapsed()
    );
    // The Lease follows registration (it needs the Node's UID) and is renewed every second.
    let lease_url =
        format!("{api}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/e2e-node");
    let renew_time = || {
        http::get(&lease_url)
            .ok()
            .and_then(|body| serde_json::from_str::<serde_json::Value>(&body).ok())
            .filter(|lease| lease["spec"]["holderIdentity"] == "e2e-node")
            .and_then(|lease| lease["spec"]["renewTime"].as_str().map(str::to_owned))
    };
    let deadline = Instant::now() + PATIENCE;
    let first = loop {
        if let Some(time) = renew_time() {
            break time;
        }
        assert!(Instant::now() < deadline, "the lease never appeared");
        std::thread::sleep(Duration::from_millis(20));
    };
    while renew_time().is_none_or(|time| time == first) {
        assert!(
            Instant::now() < deadline,
            "the lease was never renewed after {first}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let node = http::get(&format!("{api}/api/v1/nodes/e2e-node")).expect("node");
    assert!(node.contains("\"containerRuntimeVersion\""), "{node}");

    // /debug/node explains the status: Ready decided by a healthy (simulated) runtime.
    let explained: serde_json::Value = serde_json::from_str(
        &http::get(&format!("http://{debug}/debug/node")).expect("/debug/node"),
    )
    .expect("json");
    let ready_condition = explained["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Ready"))
        .expect("Ready explained");
    assert_eq!(
        ready_condition["decidedBy"]["errors"],
        serde_json::json!([]),
        "{explained}"
    );
    assert_eq!(
        ready_condition["decidedBy"]["runtime"]["simulated"], true,
        "{explained}"
    );
    assert!(explained["registered"]["uid"].is_string(), "{explained}");
    assert_eq!(
        explained["lastComputed"]["capacity"]["pods"], "110",
        "{explained}"
    );

    daemon.terminate();
    let (code, stderr) = daemon.wait();
    assert_eq!(code, 0, "stderr:\n{stderr}");
}

#[test]
fn an_invalid_configuration_exits_with_code_2_before_starting() {
    let config = config_file("supervision:\n  backoff:\n    initial: soon\n");
    let output = Command::new(env!("CARGO_BIN_EXE_nodepulse"))
        .args(["--config", config.path().to_str().expect("utf-8")])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(i32::from(EXIT_CONFIG)));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("supervision.backoff.initial") && stderr.contains("\"soon\""),
        "{stderr}"
    );
    assert!(!stderr.contains("listening"), "nothing started: {stderr}");
}

#[test]
fn exceeding_the_restart_intensity_exits_with_code_3_naming_the_actor() {
    let mut command = Command::new(std::env::current_exe().expect("this test binary"));
    command
        .args([
            "daemon_process::escalation_child_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("NODEPULSE_ESCALATION_CHILD", "1");
    let mut daemon = Running::start(command);
    let address = daemon.debug_address();

    let kill = |expected_restarts: u64| {
        let response = http::post(
            &format!("http://{address}/debug/actors/recorder/kill?mode=panic"),
            TOKEN,
        );
        assert_eq!(response.map(|(status, _)| status), Ok(202));
        if expected_restarts > 0 {
            let deadline = Instant::now() + PATIENCE;
            while !http::get(&format!("http://{address}/debug/actors/recorder")).is_ok_and(|body| {
                body.contains("\"state\":\"running\"")
                    && body.contains(&format!("\"restarts\":{expected_restarts}"))
            }) {
                assert!(Instant::now() < deadline, "the recorder never came back");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    kill(1); // within the bound of one restart
    kill(0); // one too many

    let (code, stderr) = daemon.wait();
    assert_eq!(code, i32::from(EXIT_ESCALATED), "stderr:\n{stderr}");
    // Everything an actor logs carries its node and name: here, the kill it was dealt.
    let kill_event = stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|event| event["message"] == "killing actor instance on request (fault injection)")
        .expect("the kill was logged");
    assert_eq!(
        (
            kill_event["span"]["node"].as_str(),
            kill_event["span"]["actor"].as_str()
        ),
        (Some("escalating-node"), Some("recorder")),
        "{kill_event}"
    );
    let last_line = stderr.lines().last().unwrap_or_default();
    assert!(
        last_line.starts_with(
            "nodepulse: supervisor escalated: actor \"recorder\" on node \"escalating-node\""
        ),
        "{last_line}"
    );
    assert!(
        last_line.contains("exceeded its restart intensity (1 restarts within 60s)"),
        "{last_line}"
    );
    assert!(
        last_line.contains("last failure: panicked: fault injection"),
        "{last_line}"
    );
}

/// Not a test: the daemon process that `exceeding_the_restart_intensity_exits_…` starts, run
/// with one test actor and a restart bound of one.
#[test]
#[ignore = "entry point of a child process; run by exceeding_the_restart_intensity_exits_with_code_3_naming_the_actor"]
fn escalation_child_process() {
    if std::env::var_os("NODEPULSE_ESCALATION_CHILD").is_none() {
        return;
    }
    let yaml = format!(
        "nodeName: escalating-node\nsupervision:\n  maxRestarts: 1\n  backoff: {{initial: 10ms}}\ndebug:\n  address: 127.0.0.1:0\n  faultInjection: {{enabled: true, token: {TOKEN}}}\n"
    );
    let config = Config::parse(&yaml, Source::Embedded).expect("valid test configuration");
    let settings = Settings {
        config,
        node_name: "escalating-node".to_owned(),
        kubeconfig: None,
        standalone: false,
        bootstrap: None,
    };
    logging::init(LogFormat::Json);
    let store = RecorderStore::default();
    let outcome = actix_rt::System::new().block_on(daemon::serve(
        &settings,
        || {
            let (_address, inbox) = mailbox(8);
            let supervisor =
                Supervisor::builder(supervisor_config(&settings.config, "escalating-node"))
                    .child(ChildSpec::new("recorder", inbox, store.factory()))
                    .start();
            daemon::Running::Supervisor(supervisor)
        },
        std::future::pending(),
    ));
    std::process::exit(i32::from(daemon::report(&outcome)));
}

/// Minimal blocking HTTP for tests that run outside an async runtime.
mod http {
    pub fn get(url: &str) -> Result<String, String> {
        runtime().block_on(async {
            reqwest::get(url)
                .await
                .map_err(|error| error.to_string())?
                .text()
                .await
                .map_err(|error| error.to_string())
        })
    }

    pub fn post(url: &str, token: &str) -> Result<(u16, String), String> {
        runtime().block_on(async {
            let response = reqwest::Client::new()
                .post(url)
                .bearer_auth(token)
                .send()
                .await
                .map_err(|error| error.to_string())?;
            let status = response.status().as_u16();
            Ok((
                status,
                response.text().await.map_err(|error| error.to_string())?,
            ))
        })
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }
}
