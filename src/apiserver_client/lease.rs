//! [`LeaseApi`] over the heartbeat client.

use futures::future::BoxFuture;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::api::{Api, PatchParams, PostParams};
use nodepulse_actors::{
    lease::node_owner,
    ports::{ApiError, ApiRecovery, ApiResult, LeaseApi, LeaseRenewal, NODE_LEASE_NAMESPACE},
};
use serde_json::json;

use super::{KubeApi, metrics::API_METRICS, timed};

/// The JSON merge patch of a renewal: the two spec fields the kubelet re-asserts, the owner
/// when it is being added, and the resourceVersion that makes a stale write a 409.
pub fn renewal_patch(renewal: &LeaseRenewal) -> serde_json::Value {
    let mut metadata = json!({ "resourceVersion": renewal.resource_version });
    if let Some(uid) = &renewal.owner_node_uid {
        metadata["ownerReferences"] = json!([node_owner(&renewal.name, uid)]);
    }
    json!({
        "metadata": metadata,
        "spec": {
            "leaseDurationSeconds": renewal.lease_duration_seconds,
            "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(renewal.renew_time),
        },
    })
}

/// Counts a Lease write and, when accepted, the renewTime the server now has.
fn record_renewal(result: &ApiResult<Lease>) {
    let renewed = result.as_ref().ok().and_then(|lease| {
        lease
            .spec
            .as_ref()
            .and_then(|spec| spec.renew_time.as_ref())
            .map(|time| time.0)
    });
    API_METRICS.lease_renewal(if result.is_ok() {
        renewed.or_else(|| Some(jiff::Timestamp::now()))
    } else {
        None
    });
}

impl KubeApi {
    fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.heartbeat_client(), NODE_LEASE_NAMESPACE)
    }
}

impl LeaseApi for KubeApi {
    fn get_lease(&self, name: &str) -> BoxFuture<'static, ApiResult<Lease>> {
        let (api, name, timeout) = (self.leases(), name.to_owned(), self.heartbeat_timeout());
        Box::pin(async move { timed(timeout, api.get(&name)).await })
    }

    fn create_lease(&self, lease: Lease) -> BoxFuture<'static, ApiResult<Lease>> {
        let (api, timeout) = (self.leases(), self.heartbeat_timeout());
        Box::pin(async move {
            let result = timed(timeout, api.create(&PostParams::default(), &lease)).await;
            record_renewal(&result);
            result
        })
    }

    fn renew_lease(&self, renewal: LeaseRenewal) -> BoxFuture<'static, ApiResult<Lease>> {
        let (api, timeout) = (self.leases(), self.heartbeat_timeout());
        let patch = renewal_patch(&renewal);
        Box::pin(async move {
            let result = timed(
                timeout,
                api.patch(
                    &renewal.name,
                    &PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                ),
            )
            .await;
            record_renewal(&result);
            result
        })
    }

    fn node_uid(&self, node: &str) -> BoxFuture<'static, ApiResult<String>> {
        let (api, node, timeout) = (
            Api::<Node>::all(self.heartbeat_client()),
            node.to_owned(),
            self.heartbeat_timeout(),
        );
        Box::pin(async move {
            let found = timed(timeout, api.get(&node)).await?;
            found
                .metadata
                .uid
                .ok_or_else(|| ApiError::Incomplete(format!("node {node} has no metadata.uid")))
        })
    }

    fn reset_heartbeat_connections(&self) {
        KubeApi::reset_heartbeat_connections(self);
    }
    fn recovery(&self) -> ApiRecovery {
        self.reachability.recovery()
    }
}
