//! The configuration file's shape. Field names follow the kubelet's `KubeletConfiguration`
//! where the concept is the same; nodepulse's own sections (`supervision`, `debug`,
//! `standalone`) follow the same camelCase style. Unknown fields are errors, never ignored.

use std::{collections::BTreeMap, num::NonZeroU32, path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};

use super::{
    duration::GoDuration,
    kubelet_api::{self, KubeletAuthentication, KubeletAuthorization},
};

fn seconds(value: u64) -> GoDuration {
    GoDuration(Duration::from_secs(value))
}

/// The whole file. Every section may be omitted and then takes its defaults.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// The Node's name; the host name (lower-cased) when empty, as the kubelet does.
    #[serde(default)]
    pub node_name: Option<String>,
    /// How often the node status is computed (kubelet default 10s); also bounds heartbeat
    /// request timeouts.
    #[serde(default = "default_update_frequency")]
    pub node_status_update_frequency: GoDuration,
    /// `spec.leaseDurationSeconds` of the node Lease (40); renewals every quarter of it.
    #[serde(default = "default_lease_duration")]
    pub node_lease_duration_seconds: i32,
    /// Main API client rate limit (the heartbeat client is never limited); unset: the
    /// kubelet's 50, or a fleet's scaled default (see [`Config::effective_api_qps`]).
    #[serde(default, rename = "kubeAPIQPS")]
    pub kube_api_qps: Option<u32>,
    /// Unset: the kubelet's 100, or a fleet's scaled default.
    #[serde(default, rename = "kubeAPIBurst")]
    pub kube_api_burst: Option<u32>,
    /// The longest a status may go unposted when nothing changed (kubelet default 5m; when
    /// unset and `nodeStatusUpdateFrequency` is set, the update frequency, as the kubelet does).
    #[serde(default)]
    pub node_status_report_frequency: Option<GoDuration>,
    /// Capacity `pods` (110).
    #[serde(default = "default_max_pods")]
    pub max_pods: u32,
    /// When above 0, capacity `pods` is min(cores × podsPerCore, maxPods).
    #[serde(default)]
    pub pods_per_core: u32,
    /// Resources held back from pods for the OS and for nodepulse/the kubelet (`cpu: 500m`,
    /// `memory: 1Gi`, `ephemeral-storage: 1Gi`, `pid: 1000`).
    #[serde(default)]
    pub system_reserved: BTreeMap<String, String>,
    #[serde(default)]
    pub kube_reserved: BTreeMap<String, String>,
    /// The kubelet's QoS cgroup hierarchy: `kubepods`, its `burstable` and `besteffort`
    /// cgroups and one cgroup a pod (see `cgroups.rs`).
    #[serde(default = "default_true", rename = "cgroupsPerQOS")]
    pub cgroups_per_qos: bool,
    /// The cgroup `kubepods` goes under; unset: `/` (the kubelet's default).
    #[serde(default)]
    pub cgroup_root: Option<String>,
    /// How cgroups are named: `cgroupfs` paths or `systemd` slices.
    #[serde(default)]
    pub cgroup_driver: super::cgroups::CgroupDriver,
    /// `pods`, `system-reserved`, `kube-reserved` (and their `-compressible` forms), or `none`.
    #[serde(default = "super::cgroups::default_enforce_node_allocatable")]
    pub enforce_node_allocatable: Vec<String>,
    /// The existing cgroups `systemReserved` / `kubeReserved` are enforced on.
    #[serde(default)]
    pub system_reserved_cgroup: Option<String>,
    #[serde(default)]
    pub kube_reserved_cgroup: Option<String>,
    /// The pod cgroup's `pids.max` when above 0 (the kubelet's -1: none).
    #[serde(default = "super::cgroups::default_pod_pids_limit")]
    pub pod_pids_limit: i64,
    /// Refuse to start on a cgroup v1 host (the kubelet's default is true; see cgroups.rs).
    #[serde(default, rename = "failCgroupV1")]
    pub fail_cgroup_v1: bool,
    /// Whether to register the Node (create it, or adopt the existing one).
    #[serde(default = "default_true")]
    pub register_node: bool,
    /// Taints the Node is created with.
    #[serde(default)]
    pub register_with_taints: Vec<TaintConfig>,
    /// Labels added to the Node at registration (after the default ones, overriding them).
    #[serde(default)]
    pub node_labels: BTreeMap<String, String>,
    /// `spec.providerID` of the Node.
    #[serde(default, rename = "providerID")]
    pub provider_id: Option<String>,
    /// The Node's IP addresses (the kubelet's `--node-ip`): up to two, one per family.
    /// Empty: the host's default-route address.
    #[serde(default, rename = "nodeIP")]
    pub node_ip: Vec<String>,
    /// Whether a `runtime: cri` node serves the kubelet API (the kubelet's `enableServer`,
    /// true); false serves neither it nor the healthz listener.
    #[serde(default = "kubelet_api::default_enable_server")]
    pub enable_server: bool,
    /// The kubelet API's HTTPS port, served on `address` and reported in `daemonEndpoints`
    /// (10250; 0: one the kernel picks, reported as bound).
    #[serde(default = "default_port")]
    pub port: u16,
    /// The IP the kubelet API listens on (`0.0.0.0`).
    #[serde(default = "kubelet_api::default_address")]
    pub address: String,
    /// The unauthenticated read-only port; 0 (off) is the only value nodepulse accepts.
    #[serde(default)]
    pub read_only_port: u16,
    /// The plain-HTTP `/healthz` listener for local supervisors (`127.0.0.1:10248`; port 0: off).
    #[serde(default = "kubelet_api::default_healthz_bind_address")]
    pub healthz_bind_address: String,
    #[serde(default = "kubelet_api::default_healthz_port")]
    pub healthz_port: u16,
    /// The kubelet API's serving certificate (PEM, the chain after the leaf) and key; both
    /// unset: a self-signed pair under `<rootDir>/pki`, made once, as the kubelet does.
    #[serde(default)]
    pub tls_cert_file: Option<PathBuf>,
    #[serde(default)]
    pub tls_private_key_file: Option<PathBuf>,
    /// `VersionTLS12` (the default when unset) or `VersionTLS13`.
    #[serde(default)]
    pub tls_min_version: Option<String>,
    #[serde(default)]
    pub authentication: KubeletAuthentication,
    #[serde(default)]
    pub authorization: KubeletAuthorization,
    /// `/logs/` answers the node log query (`?query=…`: journald units, files under
    /// `/var/log`) instead of ignoring it (the kubelet's `enableSystemLogQuery`, false).
    #[serde(default)]
    pub enable_system_log_query: bool,
    /// Where the host's root filesystem is mounted (`/`; `/host` in a container that mounts
    /// the host's `/` there). The resource signals (`/proc`, the root cgroup) and `rootDir` are
    /// read under it, so a containerised nodepulse measures the host and not its own cgroup.
    #[serde(default = "default_host_root")]
    pub host_root: PathBuf,
    /// The cgroups the kubelet API's summary reports as `systemContainers` (the kubelet's
    /// names): `kubeletCgroups` nodepulse's own (unset: the one it runs in),
    /// `runtimeCgroups` the container runtime's and `systemCgroups` the rest of the system's
    /// (unset: not reported, as the kubelet does). Read only: nodepulse moves no process.
    #[serde(default)]
    pub kubelet_cgroups: Option<String>,
    #[serde(default)]
    pub runtime_cgroups: Option<String>,
    #[serde(default)]
    pub system_cgroups: Option<String>,
    /// The directory whose filesystem gives `ephemeral-storage` capacity (the kubelet's root
    /// dir), as the host sees it (looked up under `hostRoot`); its nearest existing ancestor is
    /// measured when it does not exist.
    #[serde(default = "default_root_dir")]
    pub root_dir: PathBuf,
    /// Events per second (and burst) nodepulse may record.
    #[serde(default = "default_qps", rename = "eventRecordQPS")]
    pub event_record_qps: u32,
    #[serde(default = "default_burst")]
    pub event_burst: u32,
    /// No full success of the runtime probe for this long makes the node NotReady with
    /// "container runtime is down" (the kubelet's `maxWaitForContainerRuntime`, 30 s).
    #[serde(default = "default_runtime_down_after")]
    pub container_runtime_down_after: GoDuration,
    /// No successful PLEG relist for longer makes a `runtime: cri` node NotReady with "PLEG is
    /// not healthy: ..." (the kubelet's fixed `relistThreshold`, 3m).
    #[serde(default = "default_pleg_relist_threshold")]
    pub pleg_relist_threshold: GoDuration,
    /// Adds the `volumes.kubernetes.io/controller-managed-attach-detach` annotation.
    #[serde(default = "default_true")]
    pub enable_controller_attach_detach: bool,
    /// Rotate the client certificate (the kubelet's `rotateCertificates`): a new CSR at a
    /// jittered 70–90 % of its lifetime. Needs a certificate nodepulse manages, as a TLS
    /// bootstrap (`--bootstrap-kubeconfig`) gives it.
    #[serde(default)]
    pub rotate_certificates: bool,
    /// Ask the API server for the kubelet API's serving certificate (the kubelet's
    /// `serverTLSBootstrap`): a `kubernetes.io/kubelet-serving` CSR for the Node's addresses,
    /// which someone must approve (no controller does), stored as `kubelet-server-*.pem` in
    /// the certificate directory and rotated at 70–90 % of its lifetime or when the addresses
    /// change; until it is issued the API refuses every TLS handshake, as the kubelet's does.
    #[serde(default, rename = "serverTLSBootstrap")]
    pub server_tls_bootstrap: bool,
    /// The CRI socket, `unix:///run/containerd/containerd.sock` by default.
    #[serde(default = "default_runtime_endpoint")]
    pub container_runtime_endpoint: String,
    /// Bound on each CRI call (2m).
    #[serde(default = "default_runtime_request_timeout")]
    pub runtime_request_timeout: GoDuration,
    /// How many pod sandboxes the CRI engine makes at once (RunPodSandbox and its inspection);
    /// more pods wait for a turn in the order they asked. Unset: two a core, which on the
    /// runtime-floor bench starts each of 100 pods about twice as soon as all at once.
    #[serde(default)]
    pub max_parallel_sandboxes: Option<u32>,
    /// How often the runtime's status is probed (5s; hard-coded in the kubelet).
    #[serde(default = "default_runtime_probe_period")]
    pub runtime_probe_period: GoDuration,
    /// The pod resync period (the kubelet's `syncFrequency`, 1m): how often configMap, secret,
    /// downwardAPI and projected volume contents are read again and rewritten when changed.
    #[serde(default = "default_sync_frequency")]
    pub sync_frequency: GoDuration,
    /// A directory of static pod manifests, or one manifest file (the kubelet's
    /// `staticPodPath`); unset or empty: no static pods.
    #[serde(default)]
    pub static_pod_path: Option<PathBuf>,
    /// How often `staticPodPath` is read again in full (the kubelet's `fileCheckFrequency`, 20s).
    #[serde(default = "default_file_check_frequency")]
    pub file_check_frequency: GoDuration,
    /// A URL serving static pods, one Pod or a PodList (the kubelet's `staticPodURL`); unset
    /// or empty: none.
    #[serde(default, rename = "staticPodURL")]
    pub static_pod_url: Option<String>,
    /// Headers sent with every GET of `staticPodURL`, each name with its values (the
    /// kubelet's `staticPodURLHeader`).
    #[serde(default, rename = "staticPodURLHeader")]
    pub static_pod_url_header: BTreeMap<String, Vec<String>>,
    /// How often `staticPodURL` is read (the kubelet's `httpCheckFrequency`, 20s).
    #[serde(default = "default_http_check_frequency")]
    pub http_check_frequency: GoDuration,
    /// `cri`: probe the runtime at `containerRuntimeEndpoint`; `simulated`: report a healthy
    /// runtime without one (for simulated nodes), labelled as simulated.
    #[serde(default)]
    pub runtime: RuntimeKind,
    /// Where a simulated node's pod addresses come from until the Node has a `spec.podCIDR`
    /// (the kubelet's `podCIDR`, used there in standalone mode).
    #[serde(default = "default_pod_cidr", rename = "podCIDR")]
    pub pod_cidr: String,
    /// The cluster's DNS resolvers, given to `ClusterFirst` pods (the kubelet's `clusterDNS`);
    /// empty: such pods get the host's DNS, as the kubelet falls back.
    #[serde(default, rename = "clusterDNS")]
    pub cluster_dns: Vec<String>,
    /// Sysctls (names, or prefixes ending in `*`) pods may set beside the safe ones (the
    /// kubelet's `allowedUnsafeSysctls`); each must be of a namespace a pod has.
    #[serde(default)]
    pub allowed_unsafe_sysctls: Vec<String>,
    /// A container whose pod and own security context name no seccomp profile runs with the
    /// runtime's default profile rather than unconfined (the kubelet's `seccompDefault`).
    #[serde(default)]
    pub seccomp_default: bool,
    /// `hostUsers: false` pods' user namespaces (the kubelet's `userNamespaces`).
    #[serde(default)]
    pub user_namespaces: Option<UserNamespacesConfig>,
    /// The cluster's DNS domain for pods' search paths (`cluster.local`).
    #[serde(default = "default_cluster_domain")]
    pub cluster_domain: String,
    /// The host's resolv.conf, for `dnsPolicy: Default` pods and the fallback.
    #[serde(default = "default_resolv_conf")]
    pub resolv_conf: PathBuf,
    /// Where pods' container logs go, a directory per pod (`<namespace>_<name>_<uid>`).
    #[serde(default = "default_pod_logs_dir")]
    pub pod_logs_dir: PathBuf,
    /// A running container's log is rotated once it reaches this size (a quantity, `10Mi`;
    /// negative: never rotated).
    #[serde(default = "default_container_log_max_size")]
    pub container_log_max_size: String,
    /// How many log files a container keeps, the current one included (5; at least 2).
    #[serde(default = "default_container_log_max_files")]
    pub container_log_max_files: i32,
    /// How many containers' logs are rotated at once (1).
    #[serde(default = "default_container_log_max_workers")]
    pub container_log_max_workers: i32,
    /// How often the containers' log sizes are checked (10s; at least 3s).
    #[serde(default = "default_container_log_monitor_interval")]
    pub container_log_monitor_interval: GoDuration,
    /// Hard eviction thresholds by signal (`memory.available: 100Mi`, `nodefs.available: 10%`);
    /// the kubelet's Linux defaults when omitted.
    #[serde(default = "default_eviction_hard")]
    pub eviction_hard: BTreeMap<String, String>,
    /// Soft eviction thresholds; each needs a grace period in `evictionSoftGracePeriod`.
    #[serde(default)]
    pub eviction_soft: BTreeMap<String, String>,
    #[serde(default)]
    pub eviction_soft_grace_period: BTreeMap<String, GoDuration>,
    /// How much beyond a threshold must be free again before it counts as resolved.
    #[serde(default)]
    pub eviction_minimum_reclaim: BTreeMap<String, String>,
    /// How long a pressure condition stays on after its signal recovered (5m).
    #[serde(default = "default_pressure_transition_period")]
    pub eviction_pressure_transition_period: GoDuration,
    /// How often the eviction signals are measured (10s; at least 1s).
    #[serde(default = "default_housekeeping_interval")]
    pub housekeeping_interval: GoDuration,
    /// How often the mounted claims' figures of `kubelet_volume_stats_*` are measured (1m).
    #[serde(default = "default_volume_stats_agg_period")]
    pub volume_stats_agg_period: GoDuration,
    /// Image GC runs at or above this image filesystem usage (85; 100 with no maximum age: off).
    #[serde(
        default = "default_image_gc_high",
        rename = "imageGCHighThresholdPercent"
    )]
    pub image_gc_high_threshold_percent: i32,
    /// Image GC frees down to this usage (80).
    #[serde(
        default = "default_image_gc_low",
        rename = "imageGCLowThresholdPercent"
    )]
    pub image_gc_low_threshold_percent: i32,
    /// An image is collected at the earliest this long after it was first seen (2m).
    #[serde(default = "default_image_minimum_gc_age", rename = "imageMinimumGCAge")]
    pub image_minimum_gc_age: GoDuration,
    /// An image unused this long is collected whatever the usage (0s: off).
    #[serde(default = "default_image_maximum_gc_age", rename = "imageMaximumGCAge")]
    pub image_maximum_gc_age: GoDuration,
    /// How often image GC runs (5m; the kubelet hard-codes it).
    #[serde(default = "default_image_gc_period", rename = "imageGCPeriod")]
    pub image_gc_period: GoDuration,
    #[serde(default)]
    pub supervision: SupervisionConfig,
    #[serde(default)]
    pub debug: DebugConfig,
    #[serde(default)]
    pub standalone: StandaloneConfig,
    /// Simulated nodes to run in this one process (a fleet), each a full set of actors under
    /// its own supervisor; empty: one node named `nodeName`. Needs `runtime: simulated`.
    #[serde(default)]
    pub nodes: Vec<FleetNodeConfig>,
}

/// One simulated node of a fleet: its name, the labels it registers with (over `nodeLabels`)
/// and the capacity it reports instead of the host's.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetNodeConfig {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `cpu` (cores) and `memory` (bytes, a quantity such as `8Gi`).
    #[serde(default)]
    pub capacity: BTreeMap<String, String>,
}

fn default_runtime_down_after() -> GoDuration {
    seconds(30)
}

fn default_pleg_relist_threshold() -> GoDuration {
    seconds(180)
}

fn default_true() -> bool {
    true
}

/// Where the node's container runtime comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// A real runtime over CRI at `containerRuntimeEndpoint`.
    #[default]
    Cri,
    /// No runtime: always healthy, labelled as simulated.
    Simulated,
}

fn default_runtime_endpoint() -> String {
    "unix:///run/containerd/containerd.sock".to_owned()
}

fn default_runtime_request_timeout() -> GoDuration {
    seconds(120)
}

fn default_pod_cidr() -> String {
    "10.88.0.0/16".to_owned()
}

fn default_sync_frequency() -> GoDuration {
    seconds(60)
}

fn default_file_check_frequency() -> GoDuration {
    seconds(20)
}

fn default_http_check_frequency() -> GoDuration {
    seconds(20)
}

fn default_cluster_domain() -> String {
    "cluster.local".to_owned()
}

fn default_resolv_conf() -> PathBuf {
    PathBuf::from("/etc/resolv.conf")
}

fn default_pod_logs_dir() -> PathBuf {
    PathBuf::from("/var/log/pods")
}

fn default_container_log_max_size() -> String {
    "10Mi".to_owned()
}

fn default_container_log_max_files() -> i32 {
    5
}

fn default_container_log_max_workers() -> i32 {
    1
}

fn default_container_log_monitor_interval() -> GoDuration {
    seconds(10)
}

fn default_runtime_probe_period() -> GoDuration {
    seconds(5)
}

fn default_eviction_hard() -> BTreeMap<String, String> {
    nodepulse_actors::eviction::default_eviction_hard()
}

fn default_pressure_transition_period() -> GoDuration {
    seconds(300)
}

fn default_housekeeping_interval() -> GoDuration {
    seconds(10)
}

fn default_volume_stats_agg_period() -> GoDuration {
    seconds(60)
}

fn default_image_gc_high() -> i32 {
    85
}

fn default_image_gc_low() -> i32 {
    80
}

fn default_image_minimum_gc_age() -> GoDuration {
    seconds(120)
}

fn default_image_maximum_gc_age() -> GoDuration {
    seconds(0)
}

fn default_image_gc_period() -> GoDuration {
    seconds(300)
}

fn default_max_pods() -> u32 {
    110
}

fn default_qps() -> u32 {
    50
}

fn default_burst() -> u32 {
    100
}

fn default_port() -> u16 {
    10250
}

fn default_host_root() -> PathBuf {
    PathBuf::from("/")
}

fn default_root_dir() -> PathBuf {
    PathBuf::from("/var/lib/kubelet")
}

/// The kubelet's `userNamespaces` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserNamespacesConfig {
    /// Host IDs each `hostUsers: false` pod gets: a multiple of 65536 (unset or 0: 65536).
    #[serde(default)]
    pub ids_per_pod: Option<i64>,
}

/// A taint for `registerWithTaints`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaintConfig {
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

fn default_update_frequency() -> GoDuration {
    seconds(10)
}

fn default_lease_duration() -> i32 {
    40
}

/// How actors are watched and restarted.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SupervisionConfig {
    /// An actor busy in one handler (or timer, or start) this long is declared hung and replaced.
    /// Every handler is non-blocking (I/O is async or on blocking threads), so 1 s of one poll
    /// is already a hang; a short timeout keeps a hung LeaseActor from costing a renewal
    /// (issue 16: the largest gap between two renewals under the kill plan is ≤ 12 s).
    pub liveness_timeout: GoDuration,
    /// How often the supervisor checks its actors' busy marks. Nothing is sent to an actor: an
    /// idle one is never woken. Until issue 16 this was a ping period; its meaning as a bound
    /// on detection (within `liveness_timeout` plus this) is unchanged.
    pub liveness_interval: GoDuration,
    /// Restarts allowed per actor within `restartWindow` before the node's supervisor escalates.
    pub max_restarts: u32,
    pub restart_window: GoDuration,
    pub backoff: BackoffConfig,
    /// Messages that may wait in one actor's mailbox.
    pub mailbox_capacity: usize,
}

impl Default for SupervisionConfig {
    fn default() -> Self {
        Self {
            liveness_timeout: seconds(1),
            liveness_interval: GoDuration(Duration::from_millis(500)),
            max_restarts: 10,
            restart_window: seconds(60),
            backoff: BackoffConfig::default(),
            mailbox_capacity: 1024,
        }
    }
}

/// Delay before restarting an actor: `initial × multiplier^n`, capped at `max`, plus up to
/// `jitter` of itself; `n` starts over after `resetAfter` of stable running.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct BackoffConfig {
    pub initial: GoDuration,
    pub max: GoDuration,
    pub multiplier: f64,
    pub jitter: f64,
    pub reset_after: GoDuration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: GoDuration(Duration::from_millis(100)),
            max: seconds(30),
            multiplier: 2.0,
            jitter: 0.2,
            reset_after: seconds(60),
        }
    }
}

/// The debug endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DebugConfig {
    /// `host:port` to listen on; loopback by default because the endpoint shows internals.
    pub address: String,
    pub fault_injection: FaultInjectionConfig,
}

impl Default for DebugConfig {
    fn default() -> Self {
        Self {
            address: "127.0.0.1:10280".to_owned(),
            fault_injection: FaultInjectionConfig::default(),
        }
    }
}

/// `POST /debug/actors/{name}/kill`: off unless enabled, and then only with the bearer token.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FaultInjectionConfig {
    pub enabled: bool,
    pub token: Option<String>,
}

/// `--standalone`: the in-process API emulator and the kubeconfig written for it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StandaloneConfig {
    pub api_address: String,
    /// Where to write the kubeconfig (a new file: an existing one is refused); a fresh private
    /// directory under the system's temporary directory when unset.
    pub kubeconfig_path: Option<PathBuf>,
}

impl Default for StandaloneConfig {
    fn default() -> Self {
        Self {
            api_address: "127.0.0.1:16443".to_owned(),
            kubeconfig_path: None,
        }
    }
}

impl Config {
    /// `nodeStatusReportFrequency` as the kubelet resolves it.
    pub fn report_frequency(&self) -> Duration {
        match self.node_status_report_frequency {
            Some(frequency) => frequency.0,
            None if self.node_status_update_frequency != default_update_frequency() => {
                self.node_status_update_frequency.0
            }
            None => Duration::from_secs(300),
        }
    }

    /// Where the self-signed serving certificate goes (the kubelet's `--cert-dir` default).
    pub fn cert_dir_on_host(&self) -> PathBuf {
        self.root_dir_on_host().join("pki")
    }

    /// `staticPodPath`, when static pods are on (set and not empty).
    pub fn static_pod_path(&self) -> Option<&std::path::Path> {
        self.static_pod_path
            .as_deref()
            .filter(|path| !path.as_os_str().is_empty())
    }

    /// `staticPodURL`, when set and not empty.
    pub fn static_pod_url(&self) -> Option<&str> {
        self.static_pod_url.as_deref().filter(|url| !url.is_empty())
    }

    /// `rootDir` as nodepulse sees it: under `hostRoot`.
    pub fn root_dir_on_host(&self) -> PathBuf {
        self.host_root
            .join(self.root_dir.strip_prefix("/").unwrap_or(&self.root_dir))
    }

    /// The heartbeat client's per-request timeout, as the kubelet sets it:
    /// min(`nodeStatusUpdateFrequency`, `nodeLeaseDurationSeconds`).
    pub fn heartbeat_timeout(&self) -> Duration {
        let lease =
            Duration::from_secs(u64::try_from(self.node_lease_duration_seconds).unwrap_or(40));
        self.node_status_update_frequency.0.min(lease)
    }
}

impl SupervisionConfig {
    /// The restart intensity bound; validation guarantees `maxRestarts ≥ 1`.
    pub fn max_restarts(&self) -> NonZeroU32 {
        NonZeroU32::new(self.max_restarts).unwrap_or(NonZeroU32::MIN)
    }
}
