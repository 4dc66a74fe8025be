//! The host as a fleet's nodes read it: one reading of the machine and of the resource signals
//! serves every node for a short while (10,000 nodes would otherwise read `/proc` a thousand
//! times a second), and each node may report its own capacity and host name over the shared
//! facts.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{FutureExt, future::BoxFuture};
use nodepulse_actors::ports::{HostObservation, HostSignals, MachineFacts, MachineInfo};

/// Machine facts read at most once per `max_age`.
pub struct CachedMachine {
    inner: Arc<dyn MachineFacts>,
    max_age: Duration,
    cached: Mutex<Option<(Instant, MachineInfo)>>,
}

impl CachedMachine {
    pub fn new(inner: Arc<dyn MachineFacts>, max_age: Duration) -> Self {
        Self {
            inner,
            max_age,
            cached: Mutex::new(None),
        }
    }
}

impl MachineFacts for CachedMachine {
    fn read(&self) -> MachineInfo {
        if let Ok(cached) = self.cached.lock()
            && let Some((at, info)) = cached.as_ref()
            && at.elapsed() < self.max_age
        {
            return info.clone();
        }
        // Read outside the lock: nodes that miss together read twice rather than queue.
        let info = self.inner.read();
        if let Ok(mut cached) = self.cached.lock() {
            *cached = Some((Instant::now(), info.clone()));
        }
        info
    }
}

/// One observation: when, and for which image filesystem.
struct Observed {
    at: Instant,
    image_fs: Option<PathBuf>,
    observation: HostObservation,
}

/// Host signal observations shared for at most `max_age` (per image filesystem asked about).
pub struct CachedHost {
    inner: Arc<dyn HostSignals>,
    max_age: Duration,
    cached: Arc<Mutex<Option<Observed>>>,
}

impl CachedHost {
    pub fn new(inner: Arc<dyn HostSignals>, max_age: Duration) -> Self {
        Self {
            inner,
            max_age,
            cached: Arc::default(),
        }
    }
}

impl HostSignals for CachedHost {
    fn observe(&self, image_fs: Option<PathBuf>) -> BoxFuture<'static, HostObservation> {
        if let Ok(cached) = self.cached.lock()
            && let Some(observed) = cached.as_ref()
            && observed.at.elapsed() < self.max_age
            && observed.image_fs == image_fs
        {
            let observation = observed.observation.clone();
            return async move { observation }.boxed();
        }
        let (reading, cached) = (
            self.inner.observe(image_fs.clone()),
            Arc::clone(&self.cached),
        );
        async move {
            let observation = reading.await;
            if let Ok(mut cached) = cached.lock() {
                *cached = Some(Observed {
                    at: Instant::now(),
                    image_fs,
                    observation: observation.clone(),
                });
            }
            observation
        }
        .boxed()
    }
}

/// One node's view of the shared machine: its own host name and, when configured, its own
/// capacity.
pub struct NodeMachine {
    pub shared: Arc<dyn MachineFacts>,
    pub hostname: String,
    pub cpu_cores: Option<u32>,
    pub memory_bytes: Option<u64>,
}

impl MachineFacts for NodeMachine {
    fn read(&self) -> MachineInfo {
        let mut info = self.shared.read();
        info.hostname.clone_from(&self.hostname);
        if let Some(cores) = self.cpu_cores {
            info.cpu_cores = cores;
        }
        if let Some(bytes) = self.memory_bytes {
            info.memory_bytes = bytes;
        }
        info
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

    use super::*;

    #[derive(Default)]
    struct Counting(AtomicU32);

    impl MachineFacts for Counting {
        fn read(&self) -> MachineInfo {
            MachineInfo {
                hostname: "host".into(),
                cpu_cores: self.0.fetch_add(1, Relaxed) + 1,
                ..MachineInfo::default()
            }
        }
    }

    #[test]
    fn nodes_share_one_reading_and_override_their_own_facts() {
        let counting = Arc::new(Counting::default());
        let shared: Arc<dyn MachineFacts> = Arc::new(CachedMachine::new(
            Arc::clone(&counting) as Arc<dyn MachineFacts>,
            Duration::from_secs(60),
        ));
        let plain = NodeMachine {
            shared: Arc::clone(&shared),
            hostname: "sim-1".into(),
            cpu_cores: None,
            memory_bytes: None,
        };
        let sized = NodeMachine {
            shared,
            hostname: "sim-2".into(),
            cpu_cores: Some(16),
            memory_bytes: Some(64 << 30),
        };
        let (first, second) = (plain.read(), sized.read());
        assert_eq!(
            counting.0.load(Relaxed),
            1,
            "one host reading for both nodes"
        );
        assert_eq!((first.hostname.as_str(), first.cpu_cores), ("sim-1", 1));
        assert_eq!(
            (
                second.hostname.as_str(),
                second.cpu_cores,
                second.memory_bytes
            ),
            ("sim-2", 16, 64 << 30)
        );
    }
}
