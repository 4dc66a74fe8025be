//! One pod's sync (the kubelet's runtime `SyncPod`): a sandbox when the pod needs one, then
//! the containers the plan names — each through the crash-loop back-off, its image (pull
//! policy, pull back-off), CreateContainer and StartContainer — and the sandbox stopped once
//! the pod is done. A failed start is kept as the container's waiting reason.

use std::{
    collections::BTreeMap,
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::PathBuf,
    sync::Arc,
};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};

use super::{
    backoff::later,
    container::{Resolved, container_config},
    engine::{Ending, Engine, SYNC_ERROR_BACKOFF},
    etc_hosts,
    gc::MAX_DEAD_PER_CONTAINER,
    grace::grace_left,
    objects::EnvObjects,
    plan::{
        Kind, app_containers, ephemeral_containers, ephemeral_target, init_containers, is_sidecar,
        plan_with,
    },
    recursive_read_only,
    resize::resize_actions,
    sandbox::{SandboxConfigError, parse_resolv_conf, sandbox_config},
    status::StartError,
    view::{PodRuntime, pod_label, restart_count},
};
use nodepulse_actors::{
    go_duration::go_duration,
    pods::{
        env::{CREATE_CONTAINER_CONFIG_ERROR, EnvContext, EnvError, container_env},
        images::ImageRequest,
    },
    ports::{
        ContainerState, ContainerStatus, DnsConfig, PodEvent, RuntimeClassError, SandboxConfig,
        lookup_runtime_handler,
    },
    prober::PodProbeView,
    volume_manager::volumes_ready,
};

/// A failed start: what the container shows, and when to try again.
pub(super) struct Failure {
    error: StartError,
    retry_at: Timestamp,
}

fn nanos(time: i64) -> Timestamp {
    Timestamp::from_nanosecond(i128::from(time)).unwrap_or(Timestamp::UNIX_EPOCH)
}

pub(super) fn failure(reason: &str, message: String, retry_at: Timestamp) -> Failure {
    Failure {
        error: StartError {
            reason: reason.to_owned(),
            message,
        },
        retry_at,
    }
}

/// The crash-loop key: pod, container and image (a new image starts afresh).
fn crash_key(pod: &Pod, container: &Container) -> String {
    format!(
        "{}/{}/{}",
        pod.metadata.uid.as_deref().unwrap_or_default(),
        container.name,
        container.image.as_deref().unwrap_or_default()
    )
}

/// Why a pod's sandbox cannot be asked for: the `FailedCreatePodSandBox` event's message.
#[derive(Debug, thiserror::Error)]
enum SandboxSetupError {
    #[error(transparent)]
    Config(#[from] SandboxConfigError),
    #[error(transparent)]
    RuntimeClass(#[from] RuntimeClassError),
    #[error(transparent)]
    UserNamespace(#[from] super::user_namespaces::UserNamespaceError),
}
impl Engine {
    pub fn host_dns(&self) -> DnsConfig {
        std::fs::read_to_string(&self.settings.resolv_conf)
            .map(|text| parse_resolv_conf(&text))
            .unwrap_or_default()
    }

    /// The sandbox's config with its user namespace (the kubelet's `generatePodSandboxConfig`,
    /// whose `NamespacesForPod` looks the handler up), or why there can be none.
    fn sandbox_config(&self, pod: &Pod, attempt: u32) -> Result<SandboxConfig, SandboxSetupError> {
        let mut config = sandbox_config(
            pod,
            attempt,
            &self.settings.pod_logs_dir,
            &self.settings.cluster_dns,
            &self.host_dns(),
        )?;
        let handler = self.runtime_handler(pod)?;
        config.user_namespace = Some(self.user_namespace(pod, &handler)?);
        config.cgroup_parent = self.cgroup_parent(pod);
        Ok(config)
    }

    fn snapshot(&self, uid: &str) -> Option<(Arc<Pod>, PodRuntime)> {
        let core = self.core();
        let entry = core.pods.get(uid)?;
        Some((Arc::clone(&entry.pod), entry.runtime.clone()))
    }

    /// The runtime handler of the pod's RuntimeClass (the kubelet's `LookupRuntimeHandler`):
    /// empty for none; a class the watch does not have fails the sandbox.
    fn runtime_handler(&self, pod: &Pod) -> Result<String, RuntimeClassError> {
        let lister = self.objects.as_ref().and_then(|api| api.runtime_classes());
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.runtime_class_name.as_deref());
        lookup_runtime_handler(lister.as_deref(), name)
    }

    /// Records the outcome of one start and reports the status.
    fn record(&self, uid: &str, name: &str, outcome: Result<(), Failure>) {
        let mut core = self.core();
        let Some(entry) = core.pods.get_mut(uid) else {
            return;
        };
        match outcome {
            Ok(()) => {
                entry.errors.remove(name);
            }
            Err(failure) => {
                tracing::info!(pod = %pod_label(&entry.pod), container = name, reason = %failure.error.reason, message = %failure.error.message, "container start failed");
                entry.errors.insert(name.to_owned(), failure.error);
                entry.retry_at = Some(
                    entry
                        .retry_at
                        .map_or(failure.retry_at, |at| at.min(failure.retry_at)),
                );
            }
        }
        self.publish(&mut core, uid);
        drop(core);
        self.wake();
    }

    /// The worker syncs the pod once more after this round.
    fn again(&self, uid: &str) {
        if let Some(entry) = self.core().pods.get_mut(uid) {
            entry.work.again();
        }
    }

    /// The pod was told to end (or is gone), or nodepulse is shutting down: what was planned
    /// for it before is no longer wanted.
    pub(super) fn ended_meanwhile(&self, uid: &str) -> bool {
        let core = self.core();
        core.stopped
            || core
                .pods
                .get(uid)
                .is_none_or(|entry| entry.ending.is_some())
    }

    fn retry_later(&self, uid: &str) {
        let at = later(self.now(), SYNC_ERROR_BACKOFF);
        if let Some(entry) = self.core().pods.get_mut(uid) {
            // Not past an earlier wake-up (an active deadline).
            entry.retry_at = Some(entry.retry_at.map_or(at, |old| old.min(at)));
        }
    }

    pub async fn sync_pod(self: &Arc<Self>, uid: &str) {
        if !self.admit(uid) || self.check_active_deadline(uid) || !self.static_turn(uid) {
            return;
        }
        // What the PLEG just read is current: the sync starts from it.
        let inspected = self
            .core()
            .pods
            .get_mut(uid)
            .is_some_and(|entry| entry.work.take_fresh());
        if self.runtime_name().await.is_none() || !inspected && self.refresh(uid).await.is_err() {
            self.retry_later(uid);
            return;
        }
        let Some((pod, runtime)) = self.snapshot(uid) else {
            return;
        };
        // As the kubelet's SyncPod: the pod cgroup before anything of the pod is made.
        if !self.ensure_pod_cgroup(&pod) {
            self.retry_later(uid);
            return;
        }
        self.remove_dead(&pod, &runtime).await;
        let runtime_name = self.core().runtime_name.clone().unwrap_or_default();
        let started = |container: &Container, status: &ContainerStatus| {
            self.probe_results.as_ref().is_none_or(|results| {
                let view = PodProbeView { results, pod: &pod };
                let id = format!("{runtime_name}://{}", status.id);
                view.started_and_ready(container, &id).0
            })
        };
        let mut plan = plan_with(&pod, &runtime, &started);
        if (plan.create_sandbox.is_some() || !plan.start.is_empty()) && !self.volumes_ready(&pod) {
            // The kubelet's WaitForAttachAndMount: nothing is made or started until every
            // volume is set up, or a container would run without its mount. The volume
            // manager's PodVolumesChanged brings the next sync; the retry covers a lost one.
            tracing::debug!(pod = %pod_label(&pod), "waiting for the pod's volumes");
            plan.create_sandbox = None;
            plan.start.clear();
            self.retry_later(uid);
        }
        if let Some(attempt) = plan.create_sandbox {
            for old in runtime
                .sandboxes
                .iter()
                .filter(|s| s.state == nodepulse_actors::ports::SandboxState::Ready)
            {
                let _ = self.runtime.stop_pod_sandbox(old.id.clone()).await;
            }
            // One of a few sandboxes made at once; the turn ends with the sandbox made, so
            // its containers start while the next pods' sandboxes are being made.
            let Some(_turn) = self.sandbox_turns.take().await else {
                return;
            };
            if self.ended_meanwhile(uid) {
                self.again(uid);
                return;
            }
            // The kubelet's `createPodSandbox` order: the config, the log directory, the
            // RuntimeClass's handler, then RunPodSandbox; any failure is the same event.
            let made = match self.sandbox_config(&pod, attempt) {
                Ok(config) => {
                    if let Err(error) = std::fs::create_dir_all(&config.log_directory) {
                        tracing::warn!(%error, dir = %config.log_directory.display(), "cannot make the pod's log directory");
                    }
                    match self.runtime_handler(&pod) {
                        Ok(handler) => self
                            .runtime
                            .run_pod_sandbox(config, handler)
                            .await
                            .map_err(|error| error.to_string()),
                        Err(error) => Err(error.to_string()),
                    }
                }
                Err(error) => Err(error.to_string()),
            };
            if let Err(error) = made {
                tracing::warn!(pod = %pod_label(&pod), %error, "Failed to create pod sandbox");
                self.sandbox_failed(&pod, uid, &error);
                return;
            }
            if self.refresh(uid).await.is_err() {
                self.retry_later(uid);
                return;
            }
        }
        let Some((_, runtime)) = self.snapshot(uid) else {
            return;
        };
        let Some(sandbox) = runtime.ready_sandbox().cloned() else {
            return;
        };
        // The sandbox was made from this config, so it can be made again.
        let Ok(config) = self.sandbox_config(&pod, sandbox.metadata.attempt) else {
            return;
        };
        for (kind, name) in &plan.start {
            let ephemeral;
            let containers = match kind {
                Kind::Init => init_containers(&pod),
                Kind::App => app_containers(&pod),
                Kind::Ephemeral => {
                    ephemeral = ephemeral_containers(&pod);
                    ephemeral.as_slice()
                }
            };
            let Some(container) = containers.iter().find(|c| &c.name == name) else {
                continue;
            };
            let outcome = self
                .start(&pod, container, &runtime, &sandbox.id, &config)
                .await;
            let failed = outcome.is_err();
            self.record(uid, name, outcome);
            // A failing regular init container ends this round; a failing sidecar is skipped.
            // A started sidecar lets the next init container go: another round looks again.
            match (*kind, is_sidecar(container), failed) {
                (Kind::Init, false, true) => break,
                (Kind::Init, true, false) => self.again(uid),
                _ => {}
            }
        }
        if !plan.kill_pod {
            self.resize(&pod, &runtime).await;
        }
        if plan.kill_pod {
            let grace = grace_left(&pod, &Ending::Deleted, self.now());
            self.kill_containers(&pod, &runtime, grace, None).await;
            for sandbox in runtime
                .sandboxes
                .iter()
                .filter(|s| s.state == nodepulse_actors::ports::SandboxState::Ready)
            {
                if let Err(error) = self.runtime.stop_pod_sandbox(sandbox.id.clone()).await {
                    tracing::warn!(pod = %pod_label(&pod), %error, "error killing pod");
                }
            }
        }
        if self.refresh(uid).await.is_err() {
            self.retry_later(uid);
        }
    }

    /// The kubelet's `FailedCreatePodSandBox`: the event, and another try after the back-off.
    fn sandbox_failed(&self, pod: &Arc<Pod>, uid: &str, error: &str) {
        self.event(
            pod,
            PodEvent::warning(
                "FailedCreatePodSandBox",
                format!("Failed to create pod sandbox: {error}"),
            ),
        );
        self.wake();
        self.retry_later(uid);
    }

    /// Running containers whose spec's CPU and memory changed get them in place (the next
    /// refresh reads what the runtime applied into the status). A failed update is logged and
    /// retried by the next sync, as the kubelet's.
    async fn resize(&self, pod: &Pod, runtime: &PodRuntime) {
        for action in resize_actions(pod, runtime, self.settings.memory_capacity) {
            let result = self
                .runtime
                .update_container_resources(action.container_id, action.resources)
                .await;
            if let Err(error) = result {
                tracing::warn!(pod = %pod_label(pod), container = %action.container, %error, "cannot resize the container");
                self.retry_later(&pod.metadata.uid.clone().unwrap_or_default());
            }
        }
    }

    /// Dead containers beyond the newest dead one per name go (the kubelet keeps one).
    async fn remove_dead(&self, pod: &Pod, runtime: &PodRuntime) {
        let names = init_containers(pod)
            .iter()
            .chain(app_containers(pod))
            .map(|c| c.name.as_str());
        for name in names {
            let dead = runtime
                .instances(name)
                .filter(|c| c.state == ContainerState::Exited);
            for old in dead.skip(MAX_DEAD_PER_CONTAINER) {
                if let Err(error) = self.runtime.remove_container(old.id.clone()).await {
                    tracing::debug!(%error, id = %old.id, "cannot remove a dead container");
                }
            }
        }
    }

    fn volumes_ready(&self, pod: &Pod) -> bool {
        self.volumes
            .as_deref()
            .is_none_or(|view| volumes_ready(view, pod))
    }

    /// The runtime ID of an ephemeral container's target (the kubelet's `getTargetID`: the
    /// newest instance of that name, whatever its state).
    fn pid_target(
        &self,
        pod: &Arc<Pod>,
        container: &Container,
        runtime: &PodRuntime,
    ) -> Result<Option<String>, String> {
        let Some(target) = ephemeral_target(pod, &container.name) else {
            return Ok(None);
        };
        runtime
            .newest(target)
            .map(|status| Some(status.id.clone()))
            .ok_or_else(|| format!("unable to find target container {target}"))
    }

    async fn start(
        &self,
        pod: &Arc<Pod>,
        container: &Container,
        runtime: &PodRuntime,
        sandbox_id: &str,
        sandbox: &SandboxConfig,
    ) -> Result<(), Failure> {
        let now = self.now();
        let previous = runtime.newest(&container.name);
        if let Some(previous) = previous.filter(|p| p.state == ContainerState::Exited) {
            let key = crash_key(pod, container);
            let finished = nanos(previous.finished_at);
            let mut core = self.core();
            if let Some(delay) = core.crash.in_backoff_since(&key, finished, now) {
                let message = format!(
                    "back-off {} restarting failed container={} pod={}",
                    go_duration(delay),
                    container.name,
                    pod_label(pod)
                );
                let retry_at = core.crash.expires_at(&key, finished).unwrap_or(now);
                drop(core);
                self.event(
                    pod,
                    PodEvent::warning(
                        "BackOff",
                        format!(
                            "Back-off restarting failed container {} in pod {}",
                            container.name,
                            pod_label(pod)
                        ),
                    ),
                );
                return Err(failure("CrashLoopBackOff", message, retry_at));
            }
            core.crash.next(&key, finished, now);
        }
        let image_mounts = self.ensure_image_volumes(pod, container, sandbox).await?;
        let image_ref = self
            .ensure_image(pod, ImageRequest::of_container(container), sandbox)
            .await?;
        let restart_count = previous.map_or(0, |p| restart_count(p) + 1);
        let retry = later(now, SYNC_ERROR_BACKOFF);
        let env = self.env(pod, container).await.map_err(|error| {
            self.event(pod, error.event());
            failure(CREATE_CONTAINER_CONFIG_ERROR, error.to_string(), retry)
        })?;
        let config_error = |message: String| {
            self.event(
                pod,
                PodEvent::warning("Failed", format!("Error: {message}")),
            );
            failure(CREATE_CONTAINER_CONFIG_ERROR, message, retry)
        };
        self.verify_non_root(pod, container, &image_ref)
            .await
            .map_err(config_error)?;
        let termination_file = self
            .termination_file(pod, container)
            .map_err(|error| failure(CREATE_CONTAINER_CONFIG_ERROR, error.to_string(), retry))?;
        let etc_hosts = self.etc_hosts(pod, container).map_err(|error| {
            let message = format!("cannot write the pod's /etc/hosts: {error}");
            failure(CREATE_CONTAINER_CONFIG_ERROR, message, retry)
        })?;
        let host_paths = self.volume_paths(pod.metadata.uid.as_deref().unwrap_or_default());
        let mount_sources = super::sub_path::mount_sources(
            self.sub_paths.as_deref(),
            pod.metadata.uid.as_deref().unwrap_or_default(),
            container,
            &host_paths,
            &image_mounts,
            &env,
        )
        .map_err(|error| config_error(error.to_string()))?;
        let pid_target = self
            .pid_target(pod, container, runtime)
            .map_err(config_error)?;
        let mut config = container_config(
            pod,
            container,
            &Resolved {
                restart_count,
                image_ref: &image_ref,
                mount_sources: &mount_sources,
                termination_file: Some(&termination_file),
                memory_capacity: self.settings.memory_capacity,
                env: &env,
                isolation: &self.settings.isolation,
            },
        )
        .map_err(|error| config_error(error.to_string()))?;
        config.pid_target = pid_target;
        recursive_read_only::apply(
            container,
            self.supports_recursive_read_only(""),
            &mut config.mounts,
        )
        .map_err(|error| config_error(error.to_string()))?;
        config
            .mounts
            .extend(etc_hosts.map(|host_path| nodepulse_actors::ports::Mount {
                container_path: PathBuf::from(etc_hosts::ETC_HOSTS),
                host_path,
                ..nodepulse_actors::ports::Mount::default()
            }));
        let failed = |reason: &str, error: nodepulse_actors::ports::ContainerRuntimeError| {
            let message = error.to_string();
            self.event(
                pod,
                PodEvent::warning("Failed", format!("Error: {message}")),
            );
            failure(reason, message, retry)
        };
        let id = self
            .runtime
            .create_container(sandbox_id.to_owned(), config, sandbox.clone())
            .await
            .map_err(|error| failed("CreateContainerError", error))?;
        self.event(
            pod,
            PodEvent::normal("Created", "Container created".to_owned()),
        );
        self.runtime
            .start_container(id.clone())
            .await
            .map_err(|error| failed("RunContainerError", error))?;
        self.event(
            pod,
            PodEvent::normal("Started", "Container started".to_owned()),
        );
        self.post_start(pod, container, &id).await
    }

    /// The container's environment by the kubelet's rules, its ConfigMaps and Secrets read
    /// now.
    async fn env(
        &self,
        pod: &Arc<Pod>,
        container: &Container,
    ) -> Result<Vec<(String, String)>, EnvError> {
        let objects = EnvObjects::fetch(self.objects.as_ref(), pod, container).await;
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let pod_ips = self.pod_ips(uid);
        let allocatable = self.node_allocatable();
        let service_env = super::objects::service_variables(self.objects.as_ref(), pod)?;
        let volume_paths = self.volume_paths(uid);
        let context = EnvContext {
            pod,
            pod_ips: &pod_ips,
            host_ips: &self.settings.host_ips,
            node_allocatable: &allocatable,
            service_env: &service_env,
            volume_paths: &volume_paths,
        };
        container_env(&context, container, &objects)
    }

    /// The directories of the pod's mounted volumes, by volume name.
    fn volume_paths(&self, uid: &str) -> BTreeMap<String, PathBuf> {
        (self.volumes.as_ref())
            .map(|view| view.host_paths(uid))
            .unwrap_or_default()
    }

    /// The pod's IPs as the sandbox reported them (kept once the sandbox is gone).
    pub(super) fn pod_ips(&self, uid: &str) -> Vec<String> {
        self.core()
            .pods
            .get(uid)
            .map(|entry| entry.pod_ips.clone())
            .unwrap_or_default()
    }

    /// `<rootDir>/pods/<uid>/etc-hosts` written afresh for this container start (the kubelet's
    /// `ensureHostsFile`; every container of the pod mounts the one file), or `None` when the
    /// container gets the runtime's own.
    fn etc_hosts(&self, pod: &Pod, container: &Container) -> std::io::Result<Option<PathBuf>> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let pod_ips = self.pod_ips(uid);
        if !etc_hosts::should_mount(pod, &pod_ips, container) {
            return Ok(None);
        }
        let spec = pod.spec.as_ref();
        let aliases = spec
            .and_then(|spec| spec.host_aliases.as_deref())
            .unwrap_or_default();
        let text = if super::plan::host_network(pod) {
            let node = std::fs::read_to_string(&self.settings.node_hosts_file)?;
            etc_hosts::host_network(&node, aliases)
        } else {
            let (host, domain) = etc_hosts::host_and_domain(pod, &self.settings.cluster_dns.domain);
            etc_hosts::managed(&pod_ips, &host, domain.as_deref(), aliases)
        };
        let dir = self.settings.root_dir.join("pods").join(uid);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(etc_hosts::POD_FILE);
        // In place (running containers share the inode) and never through a planted link.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        Ok(Some(path))
    }

    /// `<rootDir>/pods/<uid>/containers/<name>/<8 hex>`, made 0666 for any user to write.
    fn termination_file(&self, pod: &Pod, container: &Container) -> std::io::Result<PathBuf> {
        let dir = self
            .settings
            .root_dir
            .join("pods")
            .join(pod.metadata.uid.as_deref().unwrap_or_default())
            .join("containers")
            .join(&container.name);
        std::fs::create_dir_all(&dir)?;
        super::termination_message::create_file(&dir, &format!("{:08x}", rand::random::<u32>()))
    }
}
