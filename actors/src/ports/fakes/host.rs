//! Fakes of the host's ports: `MachineFacts` answering one fixed machine, and `HostSignals`
//! answering whatever figures the test sets, counting the passes that read them.

use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;

use crate::ports::{
    FsStats, HostObservation, HostSignals, MachineFacts, MachineInfo, MemorySource, MemoryStats,
    PidStats,
};

pub const GIB: u64 = 1 << 30;

/// A 2-core, 8 GiB machine with a default route and a loopback address.
pub struct FakeMachine;

impl MachineFacts for FakeMachine {
    fn read(&self) -> MachineInfo {
        MachineInfo {
            hostname: "worker-1".into(),
            cpu_cores: 2,
            memory_bytes: 8 * GIB,
            machine_id: "m-1".into(),
            system_uuid: "u-1".into(),
            boot_id: "boot-1".into(),
            kernel_version: "6.1.0".into(),
            os_image: "Debian GNU/Linux 12 (bookworm)".into(),
            ephemeral_storage_bytes: Some(100 * GIB),
            local_addresses: vec![
                "192.0.2.2".parse().expect("an address"),
                "127.0.0.1".parse().expect("an address"),
            ],
            default_route_address: Some("192.0.2.2".parse().expect("an address")),
        }
    }
}

pub struct HostState {
    /// Free memory the next passes see.
    pub memory_available_bytes: u64,
    /// Free space on the node filesystem (of 100 GiB) the next passes see.
    pub nodefs_available_bytes: u64,
    /// Passes that read the host so far.
    pub observed: u32,
}

/// A host with 8 GiB of memory, a roomy node filesystem and few PIDs in use.
#[derive(Clone)]
pub struct FakeHost(Arc<Mutex<HostState>>);

impl FakeHost {
    pub fn with_memory_available(bytes: u64) -> Self {
        Self(Arc::new(Mutex::new(HostState {
            memory_available_bytes: bytes,
            nodefs_available_bytes: 80 * GIB,
            observed: 0,
        })))
    }

    pub fn state(&self) -> MutexGuard<'_, HostState> {
        self.0.lock().expect("fake host")
    }
}

impl HostSignals for FakeHost {
    fn observe(
        &self,
        _image_fs: Option<std::path::PathBuf>,
    ) -> BoxFuture<'static, HostObservation> {
        let mut state = self.state();
        state.observed += 1;
        let capacity = 8 * GIB;
        let observation = HostObservation {
            memory: Ok(MemoryStats {
                capacity_bytes: capacity,
                working_set_bytes: capacity.saturating_sub(state.memory_available_bytes),
                source: MemorySource::CgroupV2,
            }),
            allocatable_memory: None,
            nodefs: Ok(FsStats {
                measured: "/".into(),
                device: 1,
                available_bytes: state.nodefs_available_bytes,
                free_bytes: state.nodefs_available_bytes,
                capacity_bytes: 100 * GIB,
                inodes_free: 900_000,
                inodes: 1_000_000,
            }),
            imagefs: None,
            pids: Ok(PidStats {
                max_tasks: 4_194_304,
                running_tasks: 300,
            }),
        };
        Box::pin(async move { observation })
    }
}
