//! A node's CSI wiring: one [`CsiDrivers`] store shared by the plugin watcher (which fills it as
//! drivers register under `<rootDir>/plugins_registry`) and the volume manager's mounter (which
//! looks drivers up in it). Fleet nodes run no watcher: an idle 1 s directory poll per simulated
//! node is a cost a fleet of thousands does not pay for plugins nobody installs there.

use std::sync::Arc;

use nodepulse_actors::{
    ports::CsiNodeApi,
    volume_manager::StorageApi,
    volume_manager::{CsiPorts, PodDirs},
};
use nodepulse_supervisor::{ChildSpec, mailbox};

use super::{ApiPorts, wiring::Wiring};
use crate::volume_plugins::{
    csi::{CsiDrivers, CsiMounter, CsiRegistrationHandler},
    plugin_watcher_actor::{self, PluginWatcherActor},
};

/// The volume manager's CSI ports: the storage reads over the API, the mounter over `drivers`.
pub fn csi_ports(api: &Arc<dyn ApiPorts>, dirs: PodDirs, drivers: CsiDrivers) -> CsiPorts {
    CsiPorts {
        storage: Arc::clone(api) as Arc<dyn StorageApi>,
        node: Arc::new(CsiMounter::new(dirs, drivers)),
    }
}

impl Wiring<'_> {
    /// The plugin watcher for this node's `rootDir`, registering drivers into `drivers`.
    pub fn plugin_watcher(
        &self,
        api: &Arc<dyn ApiPorts>,
        dirs: &PodDirs,
        drivers: CsiDrivers,
    ) -> ChildSpec<PluginWatcherActor> {
        let csi_node_api = Arc::clone(api) as Arc<dyn CsiNodeApi>;
        let handler = CsiRegistrationHandler::new(&self.settings.node_name, drivers, csi_node_api);
        let root_dir = dirs.root_dir().to_path_buf();
        // Nobody sends it anything: the smallest mailbox.
        let (_, inbox) = mailbox(1);
        ChildSpec::new(plugin_watcher_actor::NAME, inbox, move || {
            PluginWatcherActor::new(root_dir.clone(), handler.clone())
        })
    }
}
