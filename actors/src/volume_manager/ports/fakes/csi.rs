//! An in-memory CSI world for the volume manager's tests: a [`StorageApi`] holding one bound
//! claim per name (claim `<c>` → PV `pv-<c>` → handle `h-<c>` of driver `d.csi.test`) and a
//! [`CsiNode`] that takes `call_time` of tokio time per call and writes each call's start and
//! end into a log the test shares with its other observers.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::future::BoxFuture;
use k8s_openapi::api::{
    core::v1::{PersistentVolume, PersistentVolumeClaim},
    storage::v1::CSIDriver,
};
use serde_json::json;

use crate::{
    ports::{ApiError, ApiResult, CsiError, CsiNode, CsiPod, CsiVolume},
    volume_manager::StorageApi,
};

pub const DRIVER: &str = "d.csi.test";

/// What happened, in order: CSI calls (`stage h-data`, `publish u1 h-data`, ...) and whatever
/// else the test appends.
pub type Log = Arc<Mutex<Vec<String>>>;

#[derive(Clone)]
pub struct FakeCsi {
    pub log: Log,
    /// Claims that exist and are bound, by name.
    pub claims: Arc<Mutex<BTreeSet<String>>>,
    pub attach_required: bool,
    pub call_time: Duration,
    lookups: Arc<std::sync::atomic::AtomicUsize>,
}

impl FakeCsi {
    pub fn new(log: Log, attach_required: bool) -> Self {
        Self {
            log,
            claims: Arc::default(),
            attach_required,
            call_time: Duration::from_secs(1),
            lookups: Arc::default(),
        }
    }

    /// How many claims were looked up so far.
    pub fn claim_lookups(&self) -> usize {
        self.lookups.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The CSI calls logged so far, in order.
    pub fn calls(&self) -> Vec<String> {
        let verbs = ["stage", "publish", "unpublish", "unstage"];
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|line| {
                verbs
                    .iter()
                    .any(|verb| line.starts_with(&format!("{verb} ")))
            })
            .cloned()
            .collect()
    }

    fn call(&self, line: String) -> BoxFuture<'static, ()> {
        let (log, time) = (Arc::clone(&self.log), self.call_time);
        Box::pin(async move {
            log.lock().unwrap().push(format!("begin {line}"));
            tokio::time::sleep(time).await;
            log.lock().unwrap().push(line);
        })
    }
}

impl StorageApi for FakeCsi {
    fn get_claim(
        &self,
        ns: &str,
        name: &str,
    ) -> BoxFuture<'static, ApiResult<PersistentVolumeClaim>> {
        self.lookups
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let found = self.claims.lock().unwrap().contains(name);
        let claim = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}")},
            "spec": {"volumeName": format!("pv-{name}")},
            "status": {"phase": "Bound"},
        }));
        let missing = format!("persistentvolumeclaims {name:?} not found");
        let time = self.call_time;
        Box::pin(async move {
            tokio::time::sleep(time).await;
            if !found {
                return Err(ApiError::NotFound(missing));
            }
            Ok(claim.expect("a valid claim"))
        })
    }
    fn get_volume(&self, name: &str) -> BoxFuture<'static, ApiResult<PersistentVolume>> {
        let claim = name.trim_start_matches("pv-");
        let pv = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "claimRef": {"uid": format!("uid-{claim}")},
                "csi": {"driver": DRIVER, "volumeHandle": format!("h-{claim}")},
            },
        }));
        Box::pin(async move { Ok(pv.expect("a valid PV")) })
    }
    fn get_csi_driver(&self, name: &str) -> BoxFuture<'static, ApiResult<Option<CSIDriver>>> {
        let driver = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"attachRequired": self.attach_required},
        }));
        Box::pin(async move { Ok(Some(driver.expect("a valid CSIDriver"))) })
    }
    fn attachment_metadata(
        &self,
        _: &str,
        handle: &str,
        _: &str,
    ) -> BoxFuture<'static, ApiResult<BTreeMap<String, String>>> {
        let metadata = BTreeMap::from([("devicePath".to_owned(), format!("/dev/{handle}"))]);
        Box::pin(async move { Ok(metadata) })
    }
}

impl CsiNode for FakeCsi {
    fn mount_device(
        &self,
        volume: CsiVolume,
    ) -> BoxFuture<'static, Result<Option<PathBuf>, CsiError>> {
        let call = self.call(format!("stage {}", volume.volume_handle));
        Box::pin(async move {
            call.await;
            Ok(Some(PathBuf::from("/staged").join(&volume.volume_handle)))
        })
    }
    fn set_up(
        &self,
        pod: CsiPod,
        volume: CsiVolume,
    ) -> BoxFuture<'static, Result<PathBuf, CsiError>> {
        let context = volume
            .publish_context
            .get("devicePath")
            .cloned()
            .unwrap_or_default();
        let call = self.call(format!(
            "publish {} {} {context}",
            pod.uid, volume.volume_handle
        ));
        Box::pin(async move {
            call.await;
            Ok(PathBuf::from("/published").join(&pod.uid))
        })
    }
    fn tear_down(
        &self,
        pod_uid: String,
        volume: CsiVolume,
    ) -> BoxFuture<'static, Result<(), CsiError>> {
        let call = self.call(format!("unpublish {pod_uid} {}", volume.volume_handle));
        Box::pin(async move {
            call.await;
            Ok(())
        })
    }
    fn unmount_device(&self, volume: CsiVolume) -> BoxFuture<'static, Result<(), CsiError>> {
        let call = self.call(format!("unstage {}", volume.volume_handle));
        Box::pin(async move {
            call.await;
            Ok(())
        })
    }
}
