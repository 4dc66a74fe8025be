//! EvictionSignalActor and the host adapter: memory, disk and PID figures read from fixture
//! trees (cgroup v1, v2, /proc/meminfo alone, odd /proc files) and from the real host;
//! pressure reaching the NodeStatus side within one housekeeping pass, held for the transition
//! period, and kept across the actor's restarts. The real host is in `signal_actors.rs`.

use nodepulse_testkit::collector;

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use collector::{collector, test_supervisor};
use nodepulse::{config::Config, config::Source, host::HostProbe, node};
use nodepulse_actors::{
    messages::PressureChanged,
    ports::{HostError, HostSignals, MemorySource},
};
use nodepulse_supervisor::KillMode;
use nodepulse_testkit::{eventually, host_fixture::HostFixture};

const GI: u64 = 1024 * 1024 * 1024;

fn probe(fixture: &HostFixture) -> HostProbe {
    HostProbe::new(fixture.root(), Path::new("/var/lib/kubelet"))
}

/// 8 GiB of memory, `free_gib` free, 1 GiB inactive file pages; PIDs 1000 of 32768.
fn meminfo(free_kib: u64) -> String {
    format!(
        "MemTotal:        8388608 kB\nMemFree:         {free_kib} kB\nMemAvailable:    4000000 kB\nInactive(file):  1048576 kB\n"
    )
}

const PROC: [(&str, &str); 3] = [
    ("proc/sys/kernel/pid_max", "32768\n"),
    ("proc/sys/kernel/threads-max", "63000\n"),
    ("proc/loadavg", "0.10 0.20 0.30 3/1000 4242\n"),
];

fn fixture_with(extra: &[(&str, &str)], free_kib: u64) -> HostFixture {
    let fixture = HostFixture::new(free_kib);
    fixture.write("proc/meminfo", &meminfo(free_kib));
    fixture.write("var/.keep", "");
    for (path, content) in PROC.iter().chain(extra) {
        fixture.write(path, content);
    }
    fixture
}

/// (cgroup files, working set, source).
type MemoryCase = (&'static [(&'static str, &'static str)], u64, MemorySource);

#[test]
fn memory_is_the_root_cgroup_working_set_on_v1_v2_and_meminfo_alone() {
    let free = 2 * 1024 * 1024; // 2 GiB in kB: usage by meminfo = 6 GiB
    let cases: [MemoryCase; 4] = [
        (&[], 5 * GI, MemorySource::Meminfo),
        (
            &[
                ("sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n"),
                (
                    "sys/fs/cgroup/memory.stat",
                    "anon 1\ninactive_file 2147483648\n",
                ),
            ],
            4 * GI,
            MemorySource::CgroupV2,
        ),
        (
            &[
                ("sys/fs/cgroup/cgroup.controllers", "cpu memory\n"),
                ("sys/fs/cgroup/memory.current", "3221225472\n"),
                ("sys/fs/cgroup/memory.stat", "inactive_file 1073741824\n"),
            ],
            2 * GI,
            MemorySource::CgroupV2,
        ),
        (
            &[
                ("sys/fs/cgroup/memory/memory.usage_in_bytes", "7516192768\n"),
                (
                    "sys/fs/cgroup/memory/memory.stat",
                    "cache 1\ntotal_inactive_file 3221225472\n",
                ),
            ],
            4 * GI,
            MemorySource::CgroupV1,
        ),
    ];
    for (files, working_set, source) in cases {
        let fixture = fixture_with(files, free);
        let memory = probe(&fixture)
            .observe_blocking(None)
            .memory
            .expect("memory");
        assert_eq!(memory.source, source, "{files:?}");
        assert_eq!(memory.capacity_bytes, 8 * GI, "{files:?}");
        assert_eq!(memory.working_set_bytes, working_set, "{files:?}");
        assert_eq!(memory.available_bytes(), 8 * GI - working_set, "{files:?}");
    }
}

#[test]
fn odd_proc_files_are_read_or_refused_plainly() {
    // Values without a unit are bytes; a trailing space or blank line changes nothing.
    let fixture = fixture_with(&[], 0);
    fixture.write("proc/meminfo", "MemTotal: 1000\nMemFree: 400 \n\n");
    let memory = probe(&fixture)
        .observe_blocking(None)
        .memory
        .expect("bytes accepted");
    assert_eq!(
        (memory.capacity_bytes, memory.working_set_bytes),
        (1000, 600)
    );

    fixture.write("proc/meminfo", "MemTotal: 1000 kB\n");
    let refused = probe(&fixture)
        .observe_blocking(None)
        .memory
        .expect_err("no MemFree");
    assert!(
        matches!(&refused, HostError::Parse { path, message } if path.ends_with("proc/meminfo") && message.contains("MemFree")),
        "{refused}"
    );

    fixture.write("proc/loadavg", "0.00 0.01 0.05\n");
    let refused = probe(&fixture)
        .observe_blocking(None)
        .pids
        .expect_err("no task field");
    assert!(refused.to_string().contains("proc/loadavg"), "{refused}");

    fixture.write("proc/loadavg", "0.00 0.01 0.05 1/70000 99");
    fixture.write("proc/sys/kernel/threads-max", "65536");
    let pids = probe(&fixture).observe_blocking(None).pids.expect("pids");
    assert_eq!((pids.max_tasks, pids.running_tasks), (32768, 70000));

    std::fs::remove_file(fixture.root().join("proc/sys/kernel/pid_max")).expect("rm");
    let refused = probe(&fixture)
        .observe_blocking(None)
        .pids
        .expect_err("no pid_max");
    assert!(matches!(refused, HostError::Read { .. }), "{refused}");
}

#[test]
fn a_missing_root_dir_is_measured_at_its_nearest_existing_ancestor() {
    let fixture = fixture_with(&[], 1024);
    let nodefs = probe(&fixture)
        .observe_blocking(None)
        .nodefs
        .expect("statvfs");
    assert_eq!(nodefs.measured, fixture.root().join("var"));
    assert!(nodefs.capacity_bytes > 0 && nodefs.available_bytes <= nodefs.capacity_bytes);
    let imagefs = probe(&fixture)
        .observe_blocking(Some(Path::new("/var/lib/containerd")))
        .imagefs
        .expect("asked for")
        .expect("statvfs");
    assert_eq!(imagefs.device, nodefs.device, "the same filesystem here");
}

#[test]
fn a_kubepods_cgroup_with_a_limit_gives_allocatable_memory() {
    let fixture = fixture_with(
        &[
            ("sys/fs/cgroup/cgroup.controllers", "memory\n"),
            ("sys/fs/cgroup/kubepods.slice/memory.max", "4294967296\n"),
            (
                "sys/fs/cgroup/kubepods.slice/memory.current",
                "3221225472\n",
            ),
            (
                "sys/fs/cgroup/kubepods.slice/memory.stat",
                "inactive_file 1073741824\n",
            ),
        ],
        1024,
    );
    let pods = probe(&fixture)
        .observe_blocking(None)
        .allocatable_memory
        .expect("kubepods");
    assert_eq!(
        (pods.capacity_bytes, pods.available_bytes()),
        (4 * GI, 2 * GI)
    );
    fixture.write("sys/fs/cgroup/kubepods.slice/memory.max", "max\n");
    assert_eq!(
        probe(&fixture).observe_blocking(None).allocatable_memory,
        None
    );
}

fn config(yaml: &str) -> Config {
    Config::parse(yaml, Source::File("test.yaml".into())).expect("valid test config")
}

fn memory_pressure(message: &PressureChanged) -> bool {
    message.memory_pressure
}

/// The fixture crosses memory.available < 100Mi, recovers, and the actor is killed while the
/// condition is held: it turns on within one pass, stays on for the transition period across
/// the restart, then turns off.
#[actix_rt::test]
async fn memory_pressure_follows_the_host_within_a_pass_and_holds_for_the_transition_period() {
    let fixture = fixture_with(&[], 4 * 1024 * 1024);
    let mut settings =
        node::eviction_settings(&config("evictionHard: {memory.available: 100Mi}\n"));
    settings.housekeeping_interval = Duration::from_millis(100);
    settings.pressure_transition_period = Duration::from_secs(2);
    let builder = test_supervisor("eviction-fixture");
    let (builder, pressure, received) = collector::<PressureChanged>(builder, "node-status");
    let (_address, inbox) = nodepulse_supervisor::mailbox(64);
    let host: Arc<dyn HostSignals> = Arc::new(probe(&fixture));
    let state = nodepulse_supervisor::Kept::default();
    let supervisor = builder
        .child(nodepulse_supervisor::ChildSpec::new(
            "eviction-signal",
            inbox,
            move || {
                nodepulse_actors::eviction::EvictionSignalActor::new(
                    settings.clone(),
                    Arc::clone(&host),
                    None,
                    pressure.clone(),
                    state.clone(),
                )
            },
        ))
        .start();
    let started = Instant::now();
    eventually("a first pass reports no pressure", || {
        received
            .first_since(started, |message| !message.memory_pressure)
            .is_some()
    })
    .await;

    // 1 GiB inactive, so free must drop below 100Mi − 1Gi... free = 0 leaves 1 GiB available:
    // take the inactive pages away too.
    fixture.write(
        "proc/meminfo",
        "MemTotal: 8388608 kB\nMemFree: 51200 kB\nInactive(file): 0 kB\n",
    );
    let crossed = Instant::now();
    eventually("memory pressure is reported", || {
        received.first_since(crossed, memory_pressure).is_some()
    })
    .await;
    let (reported_at, message) = received
        .first_since(crossed, memory_pressure)
        .expect("reported");
    let signal = message
        .signals
        .iter()
        .find(|signal| signal.signal == "memory.available")
        .expect("memory.available observed");
    assert_eq!(signal.available, 50 * 1024 * 1024);
    assert_eq!(signal.threshold.as_deref(), Some("100Mi"));
    eprintln!(
        "threshold crossing → PressureChanged: {:?}",
        reported_at - crossed
    );

    fixture.write("proc/meminfo", &meminfo(4 * 1024 * 1024));
    let recovered = Instant::now();
    supervisor
        .kill("eviction-signal", KillMode::Panic)
        .await
        .expect("killed");
    eventually("the held condition is finally dropped", || {
        received
            .first_since(recovered, |message| !message.memory_pressure)
            .is_some()
    })
    .await;
    let (cleared_at, _) = received
        .first_since(recovered, |message| !message.memory_pressure)
        .expect("cleared");
    let held = cleared_at - recovered;
    eprintln!("recovery → pressure cleared (transition period 2s): {held:?}");
    assert!(
        held >= Duration::from_millis(1800),
        "dropped after only {held:?}, across a restart"
    );
    assert_eq!(
        supervisor
            .actor("eviction-signal")
            .map(|actor| actor.restarts),
        Some(1)
    );
}
