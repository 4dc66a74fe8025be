//! The node's runtime-state health checks, as the kubelet's `runtimeState.addHealthCheck`:
//! parts of the node (the CRI engine's PLEG, a pod provider that could not start) register a
//! named check, and NodeStatus's Ready setter asks each at every status computation, listing
//! an unhealthy one as `<name> is not healthy: <why>`. Checks answer from memory, never by I/O.

use std::sync::{Arc, PoisonError, RwLock};

use tokio::time::Instant;

/// One named check.
pub trait HealthCheck: Send + Sync {
    /// How the Ready message names it (`PLEG`).
    fn name(&self) -> &str;
    /// Why it is unhealthy at `now`; `None` when it is healthy.
    fn unhealthy(&self, now: Instant) -> Option<String>;
}

/// Every check of one node, in the order they were added.
#[derive(Default)]
pub struct HealthChecks {
    checks: RwLock<Vec<Arc<dyn HealthCheck>>>,
}

impl HealthChecks {
    pub fn add(&self, check: Arc<dyn HealthCheck>) {
        self.checks
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(check);
    }

    /// `<name> is not healthy: <why>` for each unhealthy check, in order.
    pub fn errors(&self, now: Instant) -> Vec<String> {
        self.checks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|check| {
                let why = check.unhealthy(now)?;
                Some(format!("{} is not healthy: {why}", check.name()))
            })
            .collect()
    }
}

impl std::fmt::Debug for HealthChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let checks = self.checks.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_list()
            .entries(checks.iter().map(|check| check.name().to_owned()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::time::Instant;

    use super::{HealthCheck, HealthChecks};

    struct Fixed(&'static str, Option<&'static str>);

    impl HealthCheck for Fixed {
        fn name(&self) -> &str {
            self.0
        }
        fn unhealthy(&self, _: Instant) -> Option<String> {
            self.1.map(str::to_owned)
        }
    }

    #[test]
    fn each_unhealthy_check_is_named_as_the_kubelet_does_in_order() {
        let checks = HealthChecks::default();
        checks.add(Arc::new(Fixed(
            "PLEG",
            Some("pleg has yet to be successful"),
        )));
        checks.add(Arc::new(Fixed("Healthy", None)));
        checks.add(Arc::new(Fixed("EventedPLEG", Some("full"))));
        assert_eq!(
            checks.errors(Instant::now()),
            [
                "PLEG is not healthy: pleg has yet to be successful",
                "EventedPLEG is not healthy: full"
            ]
        );
    }
}
