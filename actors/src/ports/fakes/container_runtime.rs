//! An in-memory container runtime for the CRI provider's tests: sandboxes and containers with
//! their states, filters as the CRI plugin applies them, images present or pulled, and a log
//! of the calls made. Tests make containers exit (`exit`) as a process would; with
//! `with_events` the runtime also streams an event for each such exit (GetContainerEvents).

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::{StreamExt, future::BoxFuture};
use tokio::sync::{mpsc, watch};

use crate::{
    clock::WallClock,
    ports::{
        ContainerConfig, ContainerEvent, ContainerEvents, ContainerFilter, ContainerRuntime,
        ContainerRuntimeError, ContainerRuntimeResult, ContainerState, ContainerStatus,
        ContainerSummary, ExecOutput, ImageFsUsage, ImageInfo, Labels, LinuxResources, PullAuth,
        RuntimeError, RuntimeResult, RuntimeService, RuntimeStatus, RuntimeVersion, SandboxConfig,
        SandboxFilter, SandboxState, SandboxStatus, SandboxSummary,
    },
};

#[derive(Default)]
struct State {
    next: i64,
    sandboxes: BTreeMap<String, (SandboxStatus, SandboxConfig)>,
    containers: BTreeMap<String, (String, ContainerStatus, ContainerConfig)>,
    images: BTreeMap<String, ImageInfo>,
    pull_error: Option<String>,
    calls: Vec<String>,
    stop_exit_code: i32,
    exec_takes: Duration,
    exec_output: ExecOutput,
    /// The open event streams; `None`: GetContainerEvents is Unimplemented (containerd 1.6).
    event_streams: Option<Vec<EventSender>>,
    /// Every event stream fails, open or new (`break_events`).
    events_broken: bool,
    /// ListPodSandbox fails (a runtime whose relist does not work).
    lists_fail: bool,
    /// Run after each RemoveImage, as the disk it frees (`on_remove_image`).
    on_remove_image: Option<Arc<dyn Fn() + Send + Sync>>,
    /// RunPodSandbox answers once this says `true` (`hold_sandboxes`).
    sandbox_gate: Option<watch::Receiver<bool>>,
    /// RunPodSandbox calls waiting at the gate.
    sandboxes_held: Arc<AtomicUsize>,
}

type EventSender = mpsc::UnboundedSender<ContainerRuntimeResult<ContainerEvent>>;

fn stream_failure() -> ContainerRuntimeError {
    RuntimeError::Call {
        method: "GetContainerEvents",
        message: "Unavailable: the stream broke".to_owned(),
    }
    .into()
}

pub struct FakeRuntime {
    clock: WallClock,
    state: Mutex<State>,
}

fn done<T: Send + 'static>(value: T) -> BoxFuture<'static, T> {
    Box::pin(async move { value })
}

fn not_found(method: &'static str, id: &str) -> ContainerRuntimeError {
    ContainerRuntimeError::NotFound {
        method,
        message: format!("{id} not found"),
    }
}

/// A running container ends with `code` at `now`, with the reason containerd gives.
fn end(status: &mut ContainerStatus, code: i32, now: i64) {
    if status.state == ContainerState::Running {
        status.state = ContainerState::Exited;
        status.exit_code = code;
        status.finished_at = now;
        status.reason = if code == 0 { "Completed" } else { "Error" }.to_owned();
    }
}

fn matches(labels: &Labels, wanted: &Labels) -> bool {
    wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl FakeRuntime {
    pub fn new(clock: WallClock) -> Self {
        Self {
            clock,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn nanos(&self) -> i64 {
        i64::try_from((self.clock)().as_nanosecond()).unwrap_or(i64::MAX)
    }

    pub fn with_image(self, name: &str) -> Self {
        self.state().images.insert(
            name.to_owned(),
            ImageInfo {
                id: format!("sha256:{name}"),
                repo_tags: vec![name.to_owned()],
                ..ImageInfo::default()
            },
        );
        self
    }

    /// Runs `freed` after each RemoveImage (a test's host gains the space).
    pub fn on_remove_image(&self, freed: impl Fn() + Send + Sync + 'static) {
        self.state().on_remove_image = Some(Arc::new(freed));
    }

    /// Every PullImage fails with `message` (or succeeds again with `None`).
    pub fn fail_pulls(&self, message: Option<&str>) {
        self.state().pull_error = message.map(str::to_owned);
    }

    /// Every ListPodSandbox fails from now on (or works again with `false`).
    pub fn fail_lists(&self, fail: bool) {
        self.state().lists_fail = fail;
    }

    /// The code a container stopped by StopContainer exits with (0: it trapped SIGTERM).
    pub fn stop_with(&self, code: i32) {
        self.state().stop_exit_code = code;
    }

    /// How long each ExecSync runs (tokio time).
    pub fn exec_takes(&self, duration: Duration) {
        self.state().exec_takes = duration;
    }

    /// What each ExecSync answers from now on (default: exit 0, no output).
    pub fn exec_answers(&self, output: ExecOutput) {
        self.state().exec_output = output;
    }

    /// From now on RunPodSandbox makes the sandbox but answers only once the sender returned
    /// sends `true`, as a busy runtime answers late.
    pub fn hold_sandboxes(&self) -> watch::Sender<bool> {
        let (open, gate) = watch::channel(false);
        self.state().sandbox_gate = Some(gate);
        open
    }

    /// RunPodSandbox calls waiting for their answer at the gate (`hold_sandboxes`).
    pub fn sandboxes_held(&self) -> usize {
        self.state().sandboxes_held.load(Ordering::SeqCst)
    }

    /// The calls so far, as `Method name-or-id`.
    pub fn calls(&self) -> Vec<String> {
        self.state().calls.clone()
    }

    pub fn count(&self, method: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.split(' ').next() == Some(method))
            .count()
    }

    /// A runtime that serves GetContainerEvents.
    pub fn with_events(self) -> Self {
        self.state().event_streams = Some(Vec::new());
        self
    }

    /// Every open event stream fails, and so does every new subscription.
    pub fn break_events(&self) {
        let mut state = self.state();
        state.events_broken = true;
        for stream in state.event_streams.iter_mut().flat_map(std::mem::take) {
            let _ = stream.send(Err(stream_failure()));
        }
    }

    /// The running container named `name` exits with `code` (an event says so, if streamed).
    pub fn exit(&self, name: &str, code: i32) {
        let now = self.nanos();
        let mut state = self.state();
        let mut exited = Vec::new();
        for (id, (_, status, _)) in &mut state.containers {
            if status.name == name && status.state == ContainerState::Running {
                end(status, code, now);
                exited.push(ContainerEvent {
                    container_id: id.clone(),
                    pod_uid: status.labels.get("io.kubernetes.pod.uid").cloned(),
                });
            }
        }
        for stream in state.event_streams.iter().flatten() {
            for event in &exited {
                let _ = stream.send(Ok(event.clone()));
            }
        }
    }

    /// The configs of every container ever created named `name`, oldest first.
    pub fn created(&self, name: &str) -> Vec<ContainerConfig> {
        let state = self.state();
        let mut all: Vec<(i64, ContainerConfig)> = state
            .containers
            .values()
            .filter(|(_, s, _)| s.name == name)
            .map(|(_, s, c)| (s.created_at, c.clone()))
            .collect();
        all.sort_by_key(|(at, _)| *at);
        all.into_iter().map(|(_, c)| c).collect()
    }

    pub fn sandbox_configs(&self) -> Vec<SandboxConfig> {
        self.state()
            .sandboxes
            .values()
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// The ids of the containers named `name`, oldest first.
    pub fn ids(&self, name: &str) -> Vec<String> {
        let state = self.state();
        let mut all: Vec<(i64, String)> = state
            .containers
            .values()
            .filter(|(_, s, _)| s.name == name)
            .map(|(_, s, _)| (s.created_at, s.id.clone()))
            .collect();
        all.sort_by_key(|(at, _)| *at);
        all.into_iter().map(|(_, id)| id).collect()
    }

    pub fn states(&self, name: &str) -> Vec<ContainerState> {
        let state = self.state();
        let mut all: Vec<(i64, ContainerState)> = state
            .containers
            .values()
            .filter(|(_, s, _)| s.name == name)
            .map(|(_, s, _)| (s.created_at, s.state))
            .collect();
        all.sort_by_key(|(at, _)| *at);
        all.into_iter().map(|(_, s)| s).collect()
    }

    fn record(&self, call: String) -> i64 {
        let mut state = self.state();
        state.calls.push(call);
        state.next += 1;
        state.next
    }
}

impl ContainerRuntime for FakeRuntime {
    fn container_events(&self) -> BoxFuture<'static, ContainerRuntimeResult<ContainerEvents>> {
        self.record("GetContainerEvents".to_owned());
        let mut state = self.state();
        if state.events_broken {
            return done(Err(stream_failure()));
        }
        let Some(streams) = state.event_streams.as_mut() else {
            return done(Err(ContainerRuntimeError::Unimplemented {
                method: "GetContainerEvents",
            }));
        };
        let (send, receive) = mpsc::unbounded_channel();
        streams.push(send);
        let events = futures::stream::unfold(receive, |mut receive| async move {
            let event = receive.recv().await?;
            Some((event, receive))
        });
        done(Ok(events.boxed()))
    }

    fn run_pod_sandbox(
        &self,
        config: SandboxConfig,
        _runtime_handler: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<String>> {
        let serial = self.record(format!("RunPodSandbox {}", config.metadata.name));
        let id = format!("sandbox-{serial}");
        let status = SandboxStatus {
            id: id.clone(),
            metadata: config.metadata.clone(),
            state: SandboxState::Ready,
            created_at: self.nanos() + serial,
            ips: if config.host_network {
                vec![]
            } else {
                vec![format!("10.0.0.{serial}")]
            },
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
        };
        let mut state = self.state();
        state.sandboxes.insert(id.clone(), (status, config));
        let Some(mut gate) = state.sandbox_gate.clone() else {
            return done(Ok(id));
        };
        let held = Arc::clone(&state.sandboxes_held);
        held.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let _ = gate.wait_for(|open| *open).await;
            held.fetch_sub(1, Ordering::SeqCst);
            Ok(id)
        })
    }

    fn stop_pod_sandbox(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        self.record(format!("StopPodSandbox {id}"));
        let now = self.nanos();
        let mut state = self.state();
        let Some((sandbox, _)) = state.sandboxes.get_mut(&id) else {
            return done(Err(not_found("StopPodSandbox", &id)));
        };
        sandbox.state = SandboxState::NotReady;
        for (owner, status, _) in state.containers.values_mut() {
            if *owner == id {
                end(status, 137, now);
            }
        }
        done(Ok(()))
    }

    fn remove_pod_sandbox(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        self.record(format!("RemovePodSandbox {id}"));
        let mut state = self.state();
        state.sandboxes.remove(&id);
        state.containers.retain(|_, (owner, _, _)| *owner != id);
        done(Ok(()))
    }

    fn pod_sandbox_status(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<SandboxStatus>> {
        let found = self.state().sandboxes.get(&id).map(|(s, _)| s.clone());
        done(found.ok_or_else(|| not_found("PodSandboxStatus", &id)))
    }

    fn list_pod_sandboxes(
        &self,
        filter: SandboxFilter,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Vec<SandboxSummary>>> {
        self.record("ListPodSandbox".to_owned());
        if self.state().lists_fail {
            return done(Err(RuntimeError::Call {
                method: "ListPodSandbox",
                message: "DeadlineExceeded: context deadline exceeded".to_owned(),
            }
            .into()));
        }
        let list = self
            .state()
            .sandboxes
            .values()
            .map(|(s, _)| s)
            .filter(|s| matches(&s.labels, &filter.labels))
            .map(|s| SandboxSummary {
                id: s.id.clone(),
                metadata: s.metadata.clone(),
                state: s.state,
                created_at: s.created_at,
                labels: s.labels.clone(),
                annotations: s.annotations.clone(),
            })
            .collect();
        done(Ok(list))
    }

    fn create_container(
        &self,
        sandbox_id: String,
        config: ContainerConfig,
        _sandbox: SandboxConfig,
    ) -> BoxFuture<'static, ContainerRuntimeResult<String>> {
        let serial = self.record(format!("CreateContainer {}", config.name));
        let id = format!("container-{serial}");
        let status = ContainerStatus {
            id: id.clone(),
            name: config.name.clone(),
            attempt: config.attempt,
            state: ContainerState::Created,
            created_at: self.nanos() + serial,
            started_at: 0,
            finished_at: 0,
            exit_code: 0,
            image: config.user_specified_image.clone(),
            image_ref: config.image.clone(),
            reason: String::new(),
            message: String::new(),
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
            log_path: config.log_path.clone(),
            mounts: config.mounts.clone(),
            // As containerd reports them: what the container was made with (no oom score).
            resources: config.resources.clone().map(|r| LinuxResources {
                oom_score_adj: 0,
                ..r
            }),
        };
        self.state()
            .containers
            .insert(id.clone(), (sandbox_id, status, config));
        done(Ok(id))
    }

    fn start_container(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        self.record(format!("StartContainer {id}"));
        let now = self.nanos();
        let mut state = self.state();
        let Some((_, status, _)) = state.containers.get_mut(&id) else {
            return done(Err(not_found("StartContainer", &id)));
        };
        status.state = ContainerState::Running;
        status.started_at = now;
        done(Ok(()))
    }

    fn stop_container(
        &self,
        id: String,
        grace: Duration,
    ) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        self.record(format!("StopContainer {id} {}s", grace.as_secs()));
        let now = self.nanos();
        let mut state = self.state();
        let code = state.stop_exit_code;
        if let Some((_, status, _)) = state.containers.get_mut(&id) {
            end(status, code, now);
        }
        done(Ok(()))
    }

    fn remove_container(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        self.record(format!("RemoveContainer {id}"));
        self.state().containers.remove(&id);
        done(Ok(()))
    }

    fn update_container_resources(
        &self,
        id: String,
        resources: LinuxResources,
    ) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        self.record(format!(
            "UpdateContainerResources {id} shares={} quota={} memory={}",
            resources.cpu_shares, resources.cpu_quota, resources.memory_limit_in_bytes
        ));
        let mut state = self.state();
        let Some((_, status, _)) = state.containers.get_mut(&id) else {
            return done(Err(not_found("UpdateContainerResources", &id)));
        };
        status.resources = Some(LinuxResources {
            oom_score_adj: 0,
            ..resources
        });
        done(Ok(()))
    }

    fn container_status(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<ContainerStatus>> {
        self.record(format!("ContainerStatus {id}"));
        let found = self.state().containers.get(&id).map(|(_, s, _)| s.clone());
        done(found.ok_or_else(|| not_found("ContainerStatus", &id)))
    }

    fn list_containers(
        &self,
        filter: ContainerFilter,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Vec<ContainerSummary>>> {
        self.record("ListContainers".to_owned());
        let list = self
            .state()
            .containers
            .values()
            .filter(|(_, s, _)| matches(&s.labels, &filter.labels))
            .map(|(sandbox, s, _)| ContainerSummary {
                id: s.id.clone(),
                sandbox_id: sandbox.clone(),
                name: s.name.clone(),
                attempt: s.attempt,
                image: s.image.clone(),
                image_ref: s.image_ref.clone(),
                state: s.state,
                created_at: s.created_at,
                labels: s.labels.clone(),
                annotations: s.annotations.clone(),
            })
            .collect();
        done(Ok(list))
    }

    fn exec_sync(
        &self,
        id: String,
        _command: Vec<String>,
        _timeout: Duration,
    ) -> BoxFuture<'static, ContainerRuntimeResult<ExecOutput>> {
        self.record(format!("ExecSync {id}"));
        let (takes, output) = {
            let state = self.state();
            (state.exec_takes, state.exec_output.clone())
        };
        Box::pin(async move {
            tokio::time::sleep(takes).await;
            Ok(output)
        })
    }

    fn reopen_container_log(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        self.record(format!("ReopenContainerLog {id}"));
        let running = self
            .state()
            .containers
            .get(&id)
            .is_some_and(|(_, status, _)| status.state == ContainerState::Running);
        // containerd refuses a container that is not running (`container is not running`).
        done(if running {
            Ok(())
        } else {
            Err(not_found("ReopenContainerLog", &id))
        })
    }

    fn remove_image(&self, image: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        self.record(format!("RemoveImage {image}"));
        let hook = {
            let mut state = self.state();
            state.images.retain(|_, info| info.id != image);
            state.on_remove_image.clone()
        };
        if let Some(hook) = hook {
            hook();
        }
        done(Ok(()))
    }

    fn image_status(
        &self,
        image: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Option<ImageInfo>>> {
        self.record(format!("ImageStatus {image}"));
        done(Ok(self.state().images.get(&image).cloned()))
    }

    fn pull_image(
        &self,
        image: String,
        auth: Option<PullAuth>,
        _sandbox: Option<SandboxConfig>,
    ) -> BoxFuture<'static, ContainerRuntimeResult<String>> {
        self.record(match auth {
            Some(auth) => format!("PullImage {image} as {}", auth.username),
            None => format!("PullImage {image}"),
        });
        let mut state = self.state();
        if let Some(message) = state.pull_error.clone() {
            return done(Err(ContainerRuntimeError::NotFound {
                method: "PullImage",
                message,
            }));
        }
        let id = format!("sha256:{image}");
        state.images.insert(
            image.clone(),
            ImageInfo {
                id: id.clone(),
                repo_tags: vec![image],
                ..ImageInfo::default()
            },
        );
        done(Ok(id))
    }
}

impl RuntimeService for FakeRuntime {
    fn status(&self) -> BoxFuture<'static, RuntimeResult<RuntimeStatus>> {
        done(Ok(RuntimeStatus::default()))
    }

    fn version(&self) -> BoxFuture<'static, RuntimeResult<RuntimeVersion>> {
        done(Ok(RuntimeVersion {
            runtime_name: "containerd".to_owned(),
            runtime_version: "1.7.0".to_owned(),
            runtime_api_version: "v1".to_owned(),
        }))
    }

    fn image_fs_info(&self) -> BoxFuture<'static, RuntimeResult<Vec<ImageFsUsage>>> {
        done(Ok(Vec::new()))
    }

    fn list_images(&self) -> BoxFuture<'static, RuntimeResult<Vec<ImageInfo>>> {
        done(Ok(self.state().images.values().cloned().collect()))
    }

    fn update_pod_cidr(&self, _pod_cidr: String) -> BoxFuture<'static, RuntimeResult<()>> {
        done(Ok(()))
    }
}
