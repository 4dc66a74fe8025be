//! The container log manager's part of a `runtime: cri` node: LogRotationActor rotating the
//! logs of the containers the CRI engine's view lists as running, through the node's one CRI
//! client (ReopenContainerLog). Off with a negative `containerLogMaxSize`, or without a usable
//! CRI client (already reported).

use std::sync::Arc;

use nodepulse_actors::{
    log_rotation::{self, LogRotationActor, RotationHistory},
    ports::ContainerRuntime,
};
use nodepulse_supervisor::{ChildSpec, Inbox, Kept, SupervisorBuilder};

use super::{settings::log_rotation_settings, wiring::Wiring};

impl Wiring<'_> {
    /// LogRotationActor, when the node rotates logs.
    pub fn log_rotation(
        &self,
        builder: SupervisorBuilder,
        inbox: Inbox<LogRotationActor>,
    ) -> SupervisorBuilder {
        let (Some(Ok(client)), Some(settings)) = (
            self.cri.cloned(),
            log_rotation_settings(&self.settings.config),
        ) else {
            return builder;
        };
        let runtime: Arc<dyn ContainerRuntime> = Arc::new(client);
        let pods = self.pods_view.view();
        let history = Kept::<RotationHistory>::default();
        let spec = ChildSpec::new(log_rotation::NAME, inbox, move || {
            LogRotationActor::new(
                settings,
                Arc::clone(&runtime),
                pods.clone(),
                history.clone(),
            )
        });
        builder.child(spec)
    }
}
