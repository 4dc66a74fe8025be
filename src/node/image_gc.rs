//! The image manager's part of a `runtime: cri` node: ImageGcActor removing unused images
//! through the node's one CRI client, reading the image filesystem through the host's signals
//! and the pods through the CRI engine's view, and recording its events on the Node.

use std::sync::Arc;

use nodepulse_actors::{
    image_gc::{self, GcHistory, ImageCollector, ImageGcActor},
    ports::{ContainerRuntime, NodeApi, RuntimeService},
};
use nodepulse_supervisor::{ChildSpec, Inbox, Kept, SupervisorBuilder};

use super::{ApiPorts, settings::image_gc_settings, wiring::Wiring};

impl Wiring<'_> {
    /// ImageGcActor, and its collector for the eviction's reclaim (the same bookkeeping);
    /// without a usable CRI client (already reported) the node collects nothing.
    pub fn image_gc(
        &self,
        builder: SupervisorBuilder,
        api: &Arc<dyn ApiPorts>,
        inbox: Inbox<ImageGcActor>,
    ) -> (SupervisorBuilder, Option<ImageCollector>) {
        let Some(Ok(client)) = self.cri.cloned() else {
            return (builder, None);
        };
        let client = Arc::new(client);
        let collector = ImageCollector::new(
            image_gc_settings(&self.settings.config),
            Arc::clone(&client) as Arc<dyn RuntimeService>,
            client as Arc<dyn ContainerRuntime>,
            Arc::clone(&self.resources.host),
            Some(self.pods_view.view()),
        );
        let node_api: Arc<dyn NodeApi> = Arc::clone(api) as Arc<dyn NodeApi>;
        let node_name = self.settings.node_name.clone();
        let history = Kept::<GcHistory>::default();
        let shared = collector.clone();
        let spec = ChildSpec::new(image_gc::NAME, inbox, move || {
            ImageGcActor::new(
                collector.clone(),
                Arc::clone(&node_api),
                node_name.clone(),
                history.clone(),
            )
        });
        (builder.child(spec), Some(shared))
    }
}
