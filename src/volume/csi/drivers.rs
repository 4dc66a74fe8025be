//! The CSI drivers registered on this node (the kubelet's `csiDrivers` store): the plugin
//! watcher adds a driver once it registered it and removes it when its socket goes; the mounter
//! looks up a driver's endpoint here for every operation. Shared, cheap to clone.

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
};

use super::client::CsiClient;

/// One registered driver: where its node service listens and the highest CSI version it speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredDriver {
    pub endpoint: String,
    pub highest_version: String,
}

/// Drivers by name.
#[derive(Clone, Default)]
pub struct CsiDrivers {
    drivers: Arc<RwLock<BTreeMap<String, RegisteredDriver>>>,
}

impl CsiDrivers {
    pub fn insert(&self, name: &str, driver: RegisteredDriver) {
        self.write().insert(name.to_owned(), driver);
    }

    pub fn remove(&self, name: &str) -> Option<RegisteredDriver> {
        self.write().remove(name)
    }

    pub fn get(&self, name: &str) -> Option<RegisteredDriver> {
        self.read().get(name).cloned()
    }

    /// The registered drivers' names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// A client for `name`'s node service, if the driver is registered.
    pub fn client(&self, name: &str) -> Option<CsiClient> {
        self.get(name)
            .map(|driver| CsiClient::new(&driver.endpoint))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, RegisteredDriver>> {
        self.drivers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, RegisteredDriver>> {
        self.drivers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
