//! How a node's CRI pod provider is built, as often as it takes: the kubelet's pod logs root
//! directory made first (the kubelet refuses to start without it), then the runtime client and
//! the engine's thread. A failure is a [`CriStartError`], which the starting provider shows in
//! Ready and tries again; nothing here falls back to a node that runs no pods.

use std::{
    io,
    net::IpAddr,
    path::{Path, PathBuf},
    sync::Arc,
};

use nodepulse_actors::{
    node_status::NodeView,
    pods::{PodLifecycleProvider, PodsPublisher, Start, apparmor},
    ports::{HealthChecks, MachineFacts},
    prober::{ProbePods, ProbeResults, ProberKept},
    runtime_probe::CapabilitiesView,
    volume_manager::{PodDirs, PodVolumeView, VolumeSourceApi},
};
use nodepulse_cri::provider::{
    ClusterDns, CriPods, CriPodsSettings, DEFAULT_IDS_PER_POD, RELIST_PERIOD,
    default_sandboxes_at_once, isolation::IsolationSettings,
};
use nodepulse_supervisor::Recipient;

use super::ApiPorts;
use crate::{
    config::{Config, EndpointError},
    probe_handlers::ProbeHandlers,
    volume_plugins::sub_path::DiskSubPaths,
};
use nodepulse_cri::client::CriClient;

/// Why the CRI pod provider did not start this time.
#[derive(Debug, thiserror::Error)]
pub enum CriStartError {
    /// Validation accepts only usable endpoints; retrying does not help.
    #[error("{0}")]
    Endpoint(#[source] EndpointError),
    /// As the kubelet says it; retrying helps once the path can be made.
    #[error("error creating pod logs root directory {path:?}: {source}")]
    PodLogsDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The node was wired without a CRI client (a wiring defect, not the host's).
    #[error("this node has no CRI client")]
    NoClient,
    /// The node's cgroups could not be set up (see `pod_cgroups`).
    #[error(transparent)]
    Cgroups(#[from] super::pod_cgroups::NodeCgroupsError),
    /// The host refused a thread; retrying may help.
    #[error("cannot start the CRI engine's thread: {0}")]
    Thread(#[source] io::Error),
}

/// Everything the provider is built from, owned so it can be built again later.
pub(super) struct CriStart {
    pub config: Config,
    /// The node's one CRI client, or why its endpoint cannot be used (`None`: none was made).
    pub client: Option<Result<CriClient, EndpointError>>,
    pub host_ip: Option<IpAddr>,
    pub machine: Arc<dyn MachineFacts>,
    pub volumes: Arc<dyn PodVolumeView>,
    pub api: Arc<dyn ApiPorts>,
    /// The prober's address and kept state, when this node runs one.
    pub prober: Option<(Recipient<ProbePods>, ProberKept)>,
    /// The Node NodeStatus shares, for admission, when this node runs NodeStatus.
    pub node_view: Option<Arc<NodeView>>,
    /// The runtime's handlers and features, when this node runs RuntimeProbe.
    pub runtime_capabilities: Option<Arc<CapabilitiesView>>,
    /// Where the started engine's PLEG health is registered.
    pub health_checks: Arc<HealthChecks>,
    /// Where the engine publishes its pods for readers outside the actors.
    pub pods_view: PodsPublisher,
}

impl CriStart {
    /// The provider's start, for the starting provider to call until it works.
    pub fn into_start(self) -> Start {
        Box::new(move || {
            self.build()
                .map(|pods| Box::new(pods) as Box<dyn PodLifecycleProvider>)
                .map_err(Into::into)
        })
    }

    /// The CRI provider, on the node's CRI client; containers mount what the volume manager set up and read ConfigMaps and
    /// Secrets through the volume manager's port.
    fn build(&self) -> Result<CriPods, CriStartError> {
        let config = &self.config;
        std::fs::create_dir_all(&config.pod_logs_dir).map_err(|source| {
            CriStartError::PodLogsDir {
                path: config.pod_logs_dir.clone(),
                source,
            }
        })?;
        let client = match &self.client {
            Some(Ok(client)) => client.clone(),
            Some(Err(error)) => return Err(CriStartError::Endpoint(error.clone())),
            None => return Err(CriStartError::NoClient),
        };
        let mut host_ips: Vec<String> = config.node_ip.clone();
        if host_ips.is_empty() {
            host_ips.extend(self.host_ip.map(|ip| ip.to_string()));
        }
        let settings = CriPodsSettings {
            host_ips,
            pod_logs_dir: config.pod_logs_dir.clone(),
            root_dir: config.root_dir.clone(),
            cluster_dns: ClusterDns {
                servers: config.cluster_dns.clone(),
                domain: config.cluster_domain.clone(),
            },
            resolv_conf: config.resolv_conf.clone(),
            node_hosts_file: config.host_root.join("etc/hosts"),
            allowed_unsafe_sysctls: config.allowed_unsafe_sysctls.clone(),
            isolation: IsolationSettings::new(
                &config.root_dir,
                config.seccomp_default,
                Path::new("/sys"),
            ),
            apparmor: apparmor::host_support(Path::new("/sys")),
            static_pods: config.static_pod_path().is_some() || config.static_pod_url().is_some(),
            memory_capacity: self.machine.read().memory_bytes,
            relist_period: RELIST_PERIOD,
            relist_threshold: config.pleg_relist_threshold.0,
            sandboxes_at_once: config
                .max_parallel_sandboxes
                .map_or_else(default_sandboxes_at_once, |turns| turns as usize),
            clock: Arc::new(jiff::Timestamp::now),
        };
        // The RuntimeClasses are watched from the start, so the first pod that names one finds
        // them listed (the kubelet starts its RuntimeClass informer with itself).
        let _ = self.api.runtime_classes();
        let cgroups = super::pod_cgroups::node_cgroups(config, &self.machine.read())?;
        let client = Arc::new(client);
        // Lifecycle hooks' httpGet is the prober's request, from the same client.
        let hooks = Arc::new(ProbeHandlers::new(Arc::clone(&client) as _));
        let mut pods = CriPods::on_own_thread(settings, client, Some(Arc::clone(&self.volumes)))
            .map_err(CriStartError::Thread)?
            .with_objects(Arc::clone(&self.api) as Arc<dyn VolumeSourceApi>)
            .with_http_hooks(hooks)
            .with_sub_paths(Arc::new(DiskSubPaths::new(PodDirs::new(&config.root_dir))))
            .with_pods_view(self.pods_view.clone());
        if let Some((prober, kept)) = &self.prober {
            let results = ProbeResults::new(kept.memory.clone());
            pods = pods.with_prober(prober.clone(), results);
        }
        if let Some(view) = &self.node_view {
            pods = pods.with_node_view(Arc::clone(view));
        }
        if let Some(view) = &self.runtime_capabilities {
            pods = pods.with_runtime_capabilities(Arc::clone(view));
        }
        let ids_per_pod = (config.user_namespaces.as_ref())
            .and_then(|section| section.ids_per_pod)
            .and_then(|ids| u32::try_from(ids).ok())
            .filter(|&ids| ids != 0)
            .unwrap_or(DEFAULT_IDS_PER_POD);
        pods = pods.with_user_namespaces(ids_per_pod, config.max_pods);
        if let Some(setup) = cgroups {
            pods = pods.with_pod_cgroups(setup);
        }
        self.health_checks.add(pods.pleg_health());
        Ok(pods)
    }
}
