//! The CSI plugin's registration handler (the kubelet's `RegistrationHandler` in
//! `csi_plugin.go`): validates the versions a driver offers, asks it NodeGetInfo, writes its node
//! ID, topology and volume limit to the Node and CSINode through [`CsiNodeApi`], and keeps the
//! driver in [`CsiDrivers`] only while all of that holds. Error texts are the kubelet's.

use std::{sync::Arc, time::Duration};

use nodepulse_actors::ports::{ApiError, ApiResult, CsiDriverRegistration, CsiNodeApi};

use super::{
    client::CsiClient,
    drivers::{CsiDrivers, RegisteredDriver},
};

/// Why a driver was not registered. The plugin watcher sends the text back to the driver.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error(
        "kubernetes.io/csi: {caller} for CSI driver {driver:?} failed. Plugin returned an empty list for supported versions"
    )]
    NoVersions {
        caller: &'static str,
        driver: String,
    },
    #[error(
        "kubernetes.io/csi: {caller} for CSI driver {driver:?} failed. None of the versions specified {} are supported. err=could not find a highest supported version from versions ({}) reported by this driver",
        go_quoted(.versions), .versions.join(" ")
    )]
    UnsupportedVersions {
        caller: &'static str,
        driver: String,
        versions: Vec<String>,
    },
    #[error(
        "kubernetes.io/csi: {caller} for CSI driver {driver:?} failed. Another driver with the same name is already registered with a higher supported version: {registered:?}"
    )]
    AlreadyRegistered {
        caller: &'static str,
        driver: String,
        registered: String,
    },
    /// NodeGetInfo failed: the driver's error as is.
    #[error("{0}")]
    NodeGetInfo(#[source] nodepulse_actors::ports::CsiCallError),
    #[error("error adding CSI driver node info: driverNodeID must not be empty")]
    EmptyNodeId,
    #[error("error updating Node object with CSI driver node info: {0}")]
    UpdateNode(#[source] ApiError),
    #[error("error updating CSINode object with CSI driver node info: {0}")]
    UpdateCsiNode(#[source] ApiError),
}

/// Go's `%q` of a string slice: `["1.0.0" "2.0.0"]`.
fn go_quoted(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("{item:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// A version as `utilversion.ParseGeneric` reads it (`1`, `1.2`, `v1.2.3`), for ordering.
fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let mut parts = text.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |part| part.parse().ok())?;
    let patch = parts.next().map_or(Some(0), |part| part.parse().ok())?;
    parts.next().is_none().then_some((major, minor, patch))
}

/// The highest `1.x` version offered; versions from 2.0 on are not supported.
pub(super) fn highest_supported_version(versions: &[String]) -> Option<(u64, u64, u64)> {
    versions
        .iter()
        .filter_map(|version| parse_version(version))
        .filter(|(major, _, _)| *major == 1)
        .max()
}

/// How many attempts each API write gets, and the first wait (the kubelet's backoff: 10 ms,
/// ×5, 4 steps).
const UPDATE_STEPS: u32 = 4;
const UPDATE_FIRST_WAIT: Duration = Duration::from_millis(10);

/// Registers and deregisters CSI drivers for one node.
#[derive(Clone)]
pub struct CsiRegistrationHandler {
    node_name: String,
    drivers: CsiDrivers,
    api: Arc<dyn CsiNodeApi>,
}

impl CsiRegistrationHandler {
    pub fn new(node_name: &str, drivers: CsiDrivers, api: Arc<dyn CsiNodeApi>) -> Self {
        Self {
            node_name: node_name.to_owned(),
            drivers,
            api,
        }
    }

    pub fn drivers(&self) -> &CsiDrivers {
        &self.drivers
    }

    /// `validateVersions`: the highest supported version, or why there is none.
    pub fn validate(
        &self,
        caller: &'static str,
        driver: &str,
        versions: &[String],
    ) -> Result<String, RegistrationError> {
        if versions.is_empty() {
            return Err(RegistrationError::NoVersions {
                caller,
                driver: driver.to_owned(),
            });
        }
        let Some(highest) = highest_supported_version(versions) else {
            return Err(RegistrationError::UnsupportedVersions {
                caller,
                driver: driver.to_owned(),
                versions: versions.to_vec(),
            });
        };
        if let Some(existing) = self.drivers.get(driver)
            && parse_version(&existing.highest_version).is_some_and(|known| known >= highest)
        {
            return Err(RegistrationError::AlreadyRegistered {
                caller,
                driver: driver.to_owned(),
                registered: existing.highest_version,
            });
        }
        let (major, minor, patch) = highest;
        Ok(format!("{major}.{minor}.{patch}"))
    }

    /// `RegisterPlugin`: on any failure the driver is left unregistered.
    pub async fn register(
        &self,
        driver: &str,
        endpoint: &str,
        versions: &[String],
    ) -> Result<CsiDriverRegistration, RegistrationError> {
        let highest_version = self.validate("RegisterPlugin", driver, versions)?;
        self.drivers.insert(
            driver,
            RegisteredDriver {
                endpoint: endpoint.to_owned(),
                highest_version,
            },
        );
        let result = self.install(driver, endpoint).await;
        if result.is_err() {
            self.drivers.remove(driver);
        }
        result
    }

    async fn install(
        &self,
        driver: &str,
        endpoint: &str,
    ) -> Result<CsiDriverRegistration, RegistrationError> {
        let info = CsiClient::new(endpoint)
            .node_get_info()
            .await
            .map_err(RegistrationError::NodeGetInfo)?;
        if info.node_id.is_empty() {
            return Err(RegistrationError::EmptyNodeId);
        }
        let registration = CsiDriverRegistration {
            driver: driver.to_owned(),
            node_id: info.node_id,
            topology: info.accessible_topology,
            max_volumes: (info.max_volumes_per_node > 0)
                .then(|| i32::try_from(info.max_volumes_per_node).unwrap_or(i32::MAX)),
        };
        let (api, node) = (&self.api, self.node_name.as_str());
        with_backoff(|| api.add_driver_to_node(node, &registration))
            .await
            .map_err(RegistrationError::UpdateNode)?;
        with_backoff(|| api.add_driver_to_csi_node(node, &registration))
            .await
            .map_err(RegistrationError::UpdateCsiNode)?;
        Ok(registration)
    }

    /// `DeRegisterPlugin`: forgets the driver, then removes it from the Node and CSINode
    /// (failures are logged; the next registration overwrites what is left).
    pub async fn deregister(&self, driver: &str) {
        self.drivers.remove(driver);
        let (api, node) = (&self.api, self.node_name.as_str());
        if let Err(error) = with_backoff(|| api.remove_driver_from_node(node, driver)).await {
            tracing::warn!(driver, %error, "cannot remove the CSI driver's node ID from the Node");
        }
        if let Err(error) = with_backoff(|| api.remove_driver_from_csi_node(node, driver)).await {
            tracing::warn!(driver, %error, "cannot remove the CSI driver from CSINode");
        }
    }
}

/// Runs `write` until it succeeds, fails for good, or [`UPDATE_STEPS`] attempts are spent.
async fn with_backoff<F, Fut>(mut write: F) -> ApiResult<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ApiResult<()>>,
{
    let mut wait = UPDATE_FIRST_WAIT;
    let mut attempt = 1;
    loop {
        match write().await {
            Err(error) if error.is_retryable() && attempt < UPDATE_STEPS => {
                tokio::time::sleep(wait).await;
                wait *= 5;
                attempt += 1;
            }
            result => return result,
        }
    }
}

#[cfg(test)]
#[path = "registration_tests.rs"]
mod tests;
