//! [`StorageApi`] over kube-rs: the claim, PV, CSIDriver and VolumeAttachment reads of the
//! volume manager, through the main, rate-limited client (the kubelet reads them through its
//! informers and the API server alike).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::{
    core::v1::{PersistentVolume, PersistentVolumeClaim},
    storage::v1::{CSIDriver, VolumeAttachment},
};
use kube::Api;
use nodepulse_actors::{
    ports::{ApiError, ApiResult},
    volume_manager::StorageApi,
    volume_manager::attachment_name,
};

use super::{KubeApi, timed};

/// `Ok(None)` for a 404.
fn optional<T>(result: ApiResult<T>) -> ApiResult<Option<T>> {
    match result {
        Ok(object) => Ok(Some(object)),
        Err(ApiError::NotFound(_)) => Ok(None),
        Err(error) => Err(error),
    }
}

impl StorageApi for KubeApi {
    fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'static, ApiResult<PersistentVolumeClaim>> {
        let (client, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        Box::pin(async move {
            let api = Api::<PersistentVolumeClaim>::namespaced(client.await, &namespace);
            timed(timeout, api.get(&name)).await
        })
    }

    fn get_volume(&self, name: &str) -> BoxFuture<'static, ApiResult<PersistentVolume>> {
        let (client, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let name = name.to_owned();
        Box::pin(async move {
            let api = Api::<PersistentVolume>::all(client.await);
            timed(timeout, api.get(&name)).await
        })
    }

    fn get_csi_driver(&self, name: &str) -> BoxFuture<'static, ApiResult<Option<CSIDriver>>> {
        let (client, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let name = name.to_owned();
        Box::pin(async move {
            let api = Api::<CSIDriver>::all(client.await);
            optional(timed(timeout, api.get(&name)).await)
        })
    }

    fn attachment_metadata(
        &self,
        driver: &str,
        volume_handle: &str,
        node: &str,
    ) -> BoxFuture<'static, ApiResult<BTreeMap<String, String>>> {
        let (client, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let name = attachment_name(volume_handle, driver, node);
        Box::pin(async move {
            let api = Api::<VolumeAttachment>::all(client.await);
            let attachment = optional(timed(timeout, api.get(&name)).await)?;
            Ok(attachment
                .and_then(|attachment| attachment.status)
                .and_then(|status| status.attachment_metadata)
                .unwrap_or_default())
        })
    }
}
