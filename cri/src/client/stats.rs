//! [`RuntimeStats`] over CRI: the container and sandbox stats calls, and the conversion of
//! their messages into the port's figures (a wrapped value the runtime left out stays `None`).

use futures::future::BoxFuture;
use nodepulse_actors::ports::{
    ContainerRuntimeResult, ContainerStatsFilter, ContainerUsage, CpuUsage, InterfaceUsage,
    MemoryUsage, NetworkUsage, RuntimeStats, SandboxStatsFilter, SandboxUsage, SwapUsage,
};

use super::{CriClient, convert, filesystem_usage, pods::required, proto, proto::paths};

fn value(wrapped: Option<proto::UInt64Value>) -> Option<u64> {
    wrapped.map(|wrapped| wrapped.value)
}

fn cpu(usage: proto::CpuUsage) -> CpuUsage {
    CpuUsage {
        timestamp: usage.timestamp,
        usage_core_nano_seconds: value(usage.usage_core_nano_seconds),
        usage_nano_cores: value(usage.usage_nano_cores),
    }
}

fn memory(usage: proto::MemoryUsage) -> MemoryUsage {
    MemoryUsage {
        timestamp: usage.timestamp,
        working_set_bytes: value(usage.working_set_bytes),
        available_bytes: value(usage.available_bytes),
        usage_bytes: value(usage.usage_bytes),
        rss_bytes: value(usage.rss_bytes),
        page_faults: value(usage.page_faults),
        major_page_faults: value(usage.major_page_faults),
    }
}

fn interface(usage: proto::NetworkInterfaceUsage) -> InterfaceUsage {
    InterfaceUsage {
        name: usage.name,
        rx_bytes: value(usage.rx_bytes),
        rx_errors: value(usage.rx_errors),
        tx_bytes: value(usage.tx_bytes),
        tx_errors: value(usage.tx_errors),
    }
}

pub(super) fn container_usage(stats: proto::ContainerStats) -> ContainerUsage {
    let attributes = stats.attributes.unwrap_or_default();
    let metadata = attributes.metadata.unwrap_or_default();
    ContainerUsage {
        id: attributes.id,
        name: metadata.name,
        attempt: metadata.attempt,
        labels: convert::labels(attributes.labels),
        annotations: convert::labels(attributes.annotations),
        cpu: stats.cpu.map(cpu),
        memory: stats.memory.map(memory),
        writable_layer: stats.writable_layer.and_then(filesystem_usage),
        swap: stats.swap.map(|swap| SwapUsage {
            timestamp: swap.timestamp,
            available_bytes: value(swap.swap_available_bytes),
            usage_bytes: value(swap.swap_usage_bytes),
        }),
    }
}

pub(super) fn sandbox_usage(stats: proto::PodSandboxStats) -> SandboxUsage {
    let attributes = stats.attributes.unwrap_or_default();
    let linux = stats.linux.unwrap_or_default();
    SandboxUsage {
        id: attributes.id,
        metadata: convert::metadata_of(attributes.metadata),
        labels: convert::labels(attributes.labels),
        annotations: convert::labels(attributes.annotations),
        cpu: linux.cpu.map(cpu),
        memory: linux.memory.map(memory),
        network: linux.network.map(|network| NetworkUsage {
            timestamp: network.timestamp,
            default_interface: network.default_interface.map(interface),
            interfaces: network.interfaces.into_iter().map(interface).collect(),
        }),
        process_count: linux
            .process
            .and_then(|process| value(process.process_count)),
        containers: linux.containers.into_iter().map(container_usage).collect(),
    }
}

pub(super) fn container_stats_filter(filter: &ContainerStatsFilter) -> proto::ContainerStatsFilter {
    proto::ContainerStatsFilter {
        id: filter.id.clone().unwrap_or_default(),
        pod_sandbox_id: filter.sandbox_id.clone().unwrap_or_default(),
        label_selector: convert::map(&filter.labels),
    }
}

pub(super) fn sandbox_stats_filter(filter: &SandboxStatsFilter) -> proto::PodSandboxStatsFilter {
    proto::PodSandboxStatsFilter {
        id: filter.id.clone().unwrap_or_default(),
        label_selector: convert::map(&filter.labels),
    }
}

impl RuntimeStats for CriClient {
    fn container_stats(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<ContainerUsage>> {
        let request = proto::ContainerStatsRequest { container_id: id };
        let method = "ContainerStats";
        self.call_with(
            method,
            paths::CONTAINER_STATS,
            request,
            move |response: proto::ContainerStatsResponse| {
                required(response.stats, method, "stats").map(container_usage)
            },
        )
    }

    fn list_container_stats(
        &self,
        filter: ContainerStatsFilter,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Vec<ContainerUsage>>> {
        let request = proto::ListContainerStatsRequest {
            filter: Some(container_stats_filter(&filter)),
        };
        self.call_with(
            "ListContainerStats",
            paths::LIST_CONTAINER_STATS,
            request,
            |response: proto::ListContainerStatsResponse| {
                Ok(response.stats.into_iter().map(container_usage).collect())
            },
        )
    }

    fn pod_sandbox_stats(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<SandboxUsage>> {
        let request = proto::PodSandboxStatsRequest { pod_sandbox_id: id };
        let method = "PodSandboxStats";
        self.call_with(
            method,
            paths::POD_SANDBOX_STATS,
            request,
            move |response: proto::PodSandboxStatsResponse| {
                required(response.stats, method, "stats").map(sandbox_usage)
            },
        )
    }

    fn list_pod_sandbox_stats(
        &self,
        filter: SandboxStatsFilter,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Vec<SandboxUsage>>> {
        let request = proto::ListPodSandboxStatsRequest {
            filter: Some(sandbox_stats_filter(&filter)),
        };
        self.call_with(
            "ListPodSandboxStats",
            paths::LIST_POD_SANDBOX_STATS,
            request,
            |response: proto::ListPodSandboxStatsResponse| {
                Ok(response.stats.into_iter().map(sandbox_usage).collect())
            },
        )
    }
}
