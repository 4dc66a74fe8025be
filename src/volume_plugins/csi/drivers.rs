//! The CSI drivers registered on this node (the kubelet's `csiDrivers` store): the plugin
//! watcher adds a driver once it registered it and removes it when its socket goes; the mounter
//! takes the driver's client from here for every operation: one client per registration, so
//! its connection is dialled once and shared by every call. Shared, cheap to clone.

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

/// A registered driver and the client of its node service.
struct Entry {
    driver: RegisteredDriver,
    client: CsiClient,
}

/// Drivers by name.
#[derive(Clone, Default)]
pub struct CsiDrivers {
    drivers: Arc<RwLock<BTreeMap<String, Entry>>>,
}

impl CsiDrivers {
    pub fn insert(&self, name: &str, driver: RegisteredDriver) {
        let client = CsiClient::new(&driver.endpoint);
        self.write()
            .insert(name.to_owned(), Entry { driver, client });
    }

    pub fn remove(&self, name: &str) -> Option<RegisteredDriver> {
        self.write().remove(name).map(|entry| entry.driver)
    }

    pub fn get(&self, name: &str) -> Option<RegisteredDriver> {
        self.read().get(name).map(|entry| entry.driver.clone())
    }

    /// The registered drivers' names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// A client for `name`'s node service, if the driver is registered.
    pub fn client(&self, name: &str) -> Option<CsiClient> {
        self.read().get(name).map(|entry| entry.client.clone())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Entry>> {
        self.drivers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Entry>> {
        self.drivers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
