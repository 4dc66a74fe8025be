//! `nodeInfo` versions and platform, and `daemonEndpoints`.

use k8s_openapi::api::core::v1::{DaemonEndpoint, Node, NodeDaemonEndpoints, NodeSystemInfo};

use super::{SetterResult, StatusInputs};

/// The platform names Kubernetes uses (`GOOS`/`GOARCH`).
pub fn platform() -> (&'static str, &'static str) {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    (std::env::consts::OS, arch)
}

pub(super) fn set(inputs: &StatusInputs<'_>, node: &mut Node) -> SetterResult {
    let status = node.status.get_or_insert_with(Default::default);
    let info = status.node_info.get_or_insert_with(NodeSystemInfo::default);
    info.kernel_version = inputs.machine.kernel_version.clone();
    info.os_image = inputs.machine.os_image.clone();
    info.container_runtime_version = inputs
        .runtime
        .and_then(|runtime| runtime.runtime_version.clone())
        .unwrap_or_else(|| "Unknown".to_owned());
    info.kubelet_version = inputs.settings.agent_version.clone();
    info.kube_proxy_version = String::new();
    let (os, arch) = platform();
    info.operating_system = os.to_owned();
    info.architecture = arch.to_owned();
    status.daemon_endpoints = Some(NodeDaemonEndpoints {
        kubelet_endpoint: Some(DaemonEndpoint {
            port: inputs.settings.port,
        }),
    });
    Ok(Vec::new())
}
