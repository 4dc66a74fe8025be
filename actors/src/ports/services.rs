//! The Services of the cluster as the kubelet's service lister holds them, for the service-link
//! environment variables: one cache per API client (the adapter watches every Service once),
//! kept to the few fields the variables use, read under a lock by every container start.

/// One port of a Service, as its variables name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceLinkPort {
    /// Empty for an unnamed port.
    pub name: String,
    pub port: i32,
    /// `TCP`, `UDP` or `SCTP` (empty reads as `TCP`).
    pub protocol: String,
}

/// What the variables of one Service are made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceLink {
    pub namespace: String,
    pub name: String,
    /// `spec.clusterIP`: empty or `None` (headless) gets no variables.
    pub cluster_ip: String,
    pub ports: Vec<ServiceLinkPort>,
}

/// The cluster's Services, as the watch has them so far.
pub trait ServiceLister: Send + Sync + 'static {
    /// Whether the Services were listed at least once (the kubelet's `serviceHasSynced`).
    fn has_synced(&self) -> bool;
    /// The Services of `namespace`, and those of `default` (where the `kubernetes` one is).
    fn services_for(&self, namespace: &str) -> Vec<ServiceLink>;
}
