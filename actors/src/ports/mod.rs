//! The narrow interfaces through which the actors reach the API server and the host. The daemon
//! wires the real adapters (kube-rs, CRI, procfs); actor tests use in-memory fakes. API calls
//! return boxed futures so the actors can run them without blocking their mailbox.

mod api;
mod cgroup_name;
mod container_runtime;
mod csi_node;
mod csi_registration;
#[cfg(any(test, feature = "fakes"))]
pub mod fakes;
mod health_checks;
mod host;
mod lease;
mod machine;
mod mirror_pods;
mod node;
mod pod_cgroups;
mod pod_source;
mod pods;
mod pods_view;
mod probe;
mod recovery;
mod runtime;
mod runtime_classes;
mod runtime_stats;
mod services;

pub use api::{ApiError, ApiResult};
pub use cgroup_name::{CgroupDriver, CgroupName, InvalidComponent, expand_slice};
pub use container_runtime::{
    ContainerConfig, ContainerEvent, ContainerEvents, ContainerFilter, ContainerRuntime,
    ContainerRuntimeError, ContainerRuntimeResult, ContainerState, ContainerStatus,
    ContainerSummary, DnsConfig, ExecOutput, IdMapping, ImageInfo, ImageMount, Labels,
    LinuxResources, Mount, MountPropagation, PortMapping, ProfileKind, Protocol, PullAuth,
    SandboxConfig, SandboxFilter, SandboxMetadata, SandboxState, SandboxStatus, SandboxSummary,
    SeLinuxOptions, SecurityContext, SecurityProfile, UserNamespace,
};
pub use csi_node::{CsiCallError, CsiError, CsiNode, CsiNodeInfo, CsiPod, CsiVolume};
pub use csi_registration::{CsiDriverRegistration, CsiNodeApi, NODE_ID_ANNOTATION};
pub use health_checks::{HealthCheck, HealthChecks};
pub use host::{
    FsStats, HostError, HostObservation, HostSignals, MemorySource, MemoryStats, PidStats,
};
pub use lease::{LeaseApi, LeaseRenewal, NODE_LEASE_NAMESPACE};
pub use machine::{MachineFacts, MachineInfo};
pub use mirror_pods::MirrorPodApi;
pub use node::{NodeApi, NodeEvent, NodeWatchEvent};
pub use pod_cgroups::{PodCgroups, PodCgroupsError, ResourceConfig};
pub use pod_source::PodSource;
pub use pods::{
    ContainerStats, ContainerStorage, PodApi, PodEvent, PodStats, PodStatsSource, PodStorage,
    PodWatchEvent,
};
pub use pods_view::{
    ContainerRecord, PodRecord, PodsPublisher, PodsSnapshot, PodsView, SandboxRecord,
};
pub use probe::{
    HTTP_STATUS_FAILURE, ProbeAction, ProbeError, ProbeOutcome, ProbeRunner, ProbeTarget,
};
pub(crate) use recovery::warn_unless_unreachable;
pub use recovery::{ApiRecovered, ApiRecovery, RECOVERY_SPREAD};
pub use runtime::{
    ImageFsUsage, RuntimeCapabilities, RuntimeCondition, RuntimeError, RuntimeFeatures,
    RuntimeHandler, RuntimeResult, RuntimeService, RuntimeStatus, RuntimeVersion, UnknownHandler,
};
pub use runtime_classes::{RuntimeClassError, RuntimeClassLister, lookup_runtime_handler};
pub use runtime_stats::{
    ContainerStatsFilter, ContainerUsage, CpuUsage, InterfaceUsage, MemoryUsage, NetworkUsage,
    RuntimeStats, SandboxStatsFilter, SandboxUsage, SwapUsage,
};
pub use services::{ServiceLink, ServiceLinkPort, ServiceLister};
