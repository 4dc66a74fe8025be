//! `status.runtimeHandlers` and `status.features`, as the kubelet's RuntimeHandlers and
//! NodeFeatures setters: each handler the runtime's last good `Status` listed, with what it
//! can do, and `supplementalGroupsPolicy` from the runtime's features. A runtime that lists no
//! handlers (containerd 1.6) leaves `runtimeHandlers` empty, and one without features leaves
//! `features` as it was.

use k8s_openapi::api::core::v1::{
    Node, NodeFeatures, NodeRuntimeHandler, NodeRuntimeHandlerFeatures,
};

use super::{SetterResult, StatusInputs};

pub(super) fn set(inputs: &StatusInputs<'_>, node: &mut Node) -> SetterResult {
    // Before the first probe the kubelet's runtime state is empty too.
    let capabilities = inputs
        .runtime
        .map(|runtime| &runtime.capabilities)
        .cloned()
        .unwrap_or_default();
    let status = node.status.get_or_insert_with(Default::default);
    let handlers: Vec<NodeRuntimeHandler> = capabilities
        .handlers
        .iter()
        .map(|handler| NodeRuntimeHandler {
            name: Some(handler.name.clone()),
            features: Some(NodeRuntimeHandlerFeatures {
                recursive_read_only_mounts: Some(handler.supports_recursive_read_only_mounts),
                user_namespaces: Some(handler.supports_user_namespaces),
            }),
        })
        .collect();
    // The kubelet sets an empty list, which its JSON leaves out.
    status.runtime_handlers = (!handlers.is_empty()).then_some(handlers);
    if let Some(features) = capabilities.features {
        status.features = Some(NodeFeatures {
            supplemental_groups_policy: Some(features.supplemental_groups_policy),
        });
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::node_status::setters::run_setters;
    use crate::{
        messages::RuntimeHealth,
        node_status::setters::tests::{healthy, machine, settings},
        ports::{RuntimeCapabilities, RuntimeFeatures, RuntimeHandler},
    };

    fn status_after(health: &RuntimeHealth) -> serde_json::Value {
        let (machine, settings) = (machine(), settings());
        let inputs = StatusInputs {
            volumes_in_use: None,
            node_name: "worker-1",
            machine: &machine,
            settings: &settings,
            runtime: Some(health),
            pressure: None,
            previous_boot_id: None,
            now_instant: tokio::time::Instant::now(),
            health: &[],
        };
        // Through the whole list, so a setter left out of it fails here too.
        let mut node = Node::default();
        run_setters(&inputs, jiff::Timestamp::UNIX_EPOCH, &mut node);
        serde_json::to_value(node.status.unwrap_or_default()).unwrap()
    }

    #[test]
    fn handlers_and_features_are_written_as_the_runtime_reported_them() {
        let mut health = healthy(tokio::time::Instant::now());
        health.capabilities = RuntimeCapabilities {
            handlers: vec![
                RuntimeHandler {
                    name: String::new(),
                    supports_recursive_read_only_mounts: true,
                    supports_user_namespaces: true,
                },
                RuntimeHandler {
                    name: "kata".to_owned(),
                    supports_recursive_read_only_mounts: false,
                    supports_user_namespaces: true,
                },
            ],
            features: Some(RuntimeFeatures {
                supplemental_groups_policy: true,
                user_namespaces_host_network: false,
            }),
        };
        let status = status_after(&health);
        assert_eq!(
            status["runtimeHandlers"],
            json!([
                {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
                {"name": "kata", "features": {"recursiveReadOnlyMounts": false, "userNamespaces": true}},
            ])
        );
        assert_eq!(
            status["features"],
            json!({"supplementalGroupsPolicy": true})
        );
    }

    #[test]
    fn a_runtime_without_handlers_or_features_leaves_both_out() {
        let status = status_after(&healthy(tokio::time::Instant::now()));
        assert_eq!(status.get("runtimeHandlers"), None);
        assert_eq!(status.get("features"), None);
    }
}
