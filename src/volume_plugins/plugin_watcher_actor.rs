//! The plugin watcher as a supervised node child, `csi-plugin-watcher`: it runs
//! [`PluginWatcher`] for the node's `rootDir` for as long as it lives, so it stops with the node
//! and a crash restarts it (a fresh watcher registers the sockets still present again, as a
//! restarted kubelet does). It receives no messages; the debug endpoint shows the drivers.

use std::path::PathBuf;

use actix::{Actor, AsyncContext, Context, WrapFuture};
use nodepulse_supervisor::SupervisedActor;

use super::{csi::CsiRegistrationHandler, plugin_watcher::PluginWatcher};

/// The actor's name in the supervisor, logs and the debug endpoint.
pub const NAME: &str = "csi-plugin-watcher";

pub struct PluginWatcherActor {
    root_dir: PathBuf,
    handler: CsiRegistrationHandler,
}

impl PluginWatcherActor {
    pub fn new(root_dir: PathBuf, handler: CsiRegistrationHandler) -> Self {
        Self { root_dir, handler }
    }
}

impl Actor for PluginWatcherActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let watcher = PluginWatcher::new(&self.root_dir, self.handler.clone());
        // Dropped with the actor's context: stopping the actor stops the watcher.
        ctx.spawn(watcher.run(std::future::pending()).into_actor(self));
    }
}

impl SupervisedActor for PluginWatcherActor {
    fn debug_state(&self) -> serde_json::Value {
        serde_json::json!({
            "registry": self.root_dir.join("plugins_registry"),
            "drivers": self.handler.drivers().names(),
        })
    }
}
