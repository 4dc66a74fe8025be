//! Outages: the whole API server down for a while, as in a control-plane restart. Abrupt: the
//! listener closes (connections refused) and every open connection and watch is cut. Graceful:
//! watches end cleanly first, as a terminating kube-apiserver ends them, then the same. Either
//! way the server comes back on the same address with the same objects and resourceVersions.
//! This module schedules outages and says whether the server is up; `serving` takes it down.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// One outage, as asked for through [`super::FaultHandle::outage`] or
/// `POST /emulator/v1/faults/outage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Outage {
    /// How long the listener stays closed.
    pub seconds: u64,
    /// End watch streams cleanly before closing (a terminating kube-apiserver), instead of
    /// cutting every connection (a killed one).
    #[serde(default)]
    pub graceful: bool,
}

impl Outage {
    /// A killed API server, down for `down`.
    pub fn abrupt(down: Duration) -> Self {
        Self {
            seconds: down.as_secs(),
            graceful: false,
        }
    }

    /// A terminating API server, down for `down`.
    pub fn graceful(down: Duration) -> Self {
        Self {
            seconds: down.as_secs(),
            graceful: true,
        }
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.seconds)
    }
}

/// Why an outage was not scheduled. Retrying after the current one ends helps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutageError {
    #[error("an outage is already scheduled or under way")]
    Busy,
    #[error("an outage of 0 seconds is no outage")]
    Empty,
    #[error("the emulator is shutting down")]
    Stopped,
}

/// Whether the server answers, and the times of the last outage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Serving {
    /// The outage asked for and not yet over.
    pub pending: Option<Outage>,
    /// How long after being asked for the pending outage starts (time for the admin API to
    /// answer the request that asked).
    pub start_after: Duration,
    /// True from the moment the listener closes until it accepts again.
    pub down: bool,
    /// Outages over so far.
    pub completed: u64,
    /// When the listener closed, and when it accepted again, in the last outage.
    pub went_down: Option<Instant>,
    pub came_back: Option<Instant>,
}

/// What a finished outage looked like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutageReport {
    pub went_down: Instant,
    pub came_back: Instant,
}

/// The shared serving state: faults ask, the serving loop acts and reports.
#[derive(Clone)]
pub struct OutageSwitch {
    state: Arc<watch::Sender<Serving>>,
}

impl Default for OutageSwitch {
    fn default() -> Self {
        Self {
            state: Arc::new(watch::Sender::new(Serving::default())),
        }
    }
}

impl OutageSwitch {
    /// Asks for `outage`; the serving loop takes the server down `start_after` from now.
    pub fn schedule(&self, outage: Outage, start_after: Duration) -> Result<(), OutageError> {
        if outage.seconds == 0 {
            return Err(OutageError::Empty);
        }
        let mut scheduled = false;
        self.state.send_if_modified(|serving| {
            scheduled = serving.pending.is_none() && !serving.down;
            if scheduled {
                serving.pending = Some(outage);
                serving.start_after = start_after;
            }
            scheduled
        });
        if scheduled {
            tracing::info!(?outage, "outage scheduled");
            Ok(())
        } else {
            Err(OutageError::Busy)
        }
    }

    /// The serving state now.
    pub fn serving(&self) -> Serving {
        *self.state.borrow()
    }

    /// Waits until `completed` outages are over; the report of the last one.
    pub async fn over(&self, completed: u64) -> Result<OutageReport, OutageError> {
        let mut changes = self.state.subscribe();
        let serving = changes
            .wait_for(|serving| serving.completed >= completed)
            .await
            .map_err(|_| OutageError::Stopped)?;
        match (serving.went_down, serving.came_back) {
            (Some(went_down), Some(came_back)) => Ok(OutageReport {
                went_down,
                came_back,
            }),
            _ => Err(OutageError::Stopped),
        }
    }

    /// Waits for an outage to be asked for (for the serving loop).
    pub(crate) async fn requested(&self) -> (Outage, Duration) {
        let mut changes = self.state.subscribe();
        loop {
            let serving = *changes.borrow_and_update();
            if let Some(outage) = serving.pending {
                return (outage, serving.start_after);
            }
            if changes.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// The listener closed (for the serving loop).
    pub(crate) fn went_down(&self) {
        self.state.send_modify(|serving| {
            serving.down = true;
            serving.went_down = Some(Instant::now());
        });
    }

    /// The listener accepts again since `at` (for the serving loop).
    pub(crate) fn came_back(&self, at: Instant) {
        self.state.send_modify(|serving| {
            serving.down = false;
            serving.pending = None;
            serving.completed += 1;
            serving.came_back = Some(at);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_outage_is_refused_while_one_is_pending() {
        let switch = OutageSwitch::default();
        let outage = Outage::abrupt(Duration::from_secs(3));
        assert_eq!(switch.schedule(outage, Duration::ZERO), Ok(()));
        assert_eq!(
            switch.schedule(outage, Duration::ZERO),
            Err(OutageError::Busy)
        );
        switch.went_down();
        switch.came_back(Instant::now());
        assert_eq!(switch.serving().completed, 1);
        assert_eq!(switch.schedule(outage, Duration::ZERO), Ok(()));
    }

    #[test]
    fn an_outage_of_no_time_is_refused() {
        let switch = OutageSwitch::default();
        assert_eq!(
            switch.schedule(Outage::graceful(Duration::ZERO), Duration::ZERO),
            Err(OutageError::Empty)
        );
    }

    #[test]
    fn the_admin_body_names_seconds_and_graceful() {
        let outage: Outage =
            serde_json::from_str(r#"{"seconds": 60}"#).expect("a minimal outage parses");
        assert_eq!(outage, Outage::abrupt(Duration::from_secs(60)));
        assert!(serde_json::from_str::<Outage>(r#"{"seconds": 1, "gracefull": true}"#).is_err());
    }
}
