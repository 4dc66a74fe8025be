//! What a whole test run leaves behind, where the per-test guard (`cleanup`) cannot look: on the
//! host, mounts under the temporary directory, network namespaces, leases on the tests' CNI
//! network, processes of the tests' private containerds (and their shims), and the tests'
//! temporary directories (pod directories and containerd state in them); in a real cluster,
//! Nodes and pods with the run label and Leases whose Node is gone. A snapshot before the run
//! and one after: what is new is left over (`scripts/test.sh` takes both, tests/it/cleanup.rs).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, Pod},
};
use kube::{Api, api::ListParams};

use crate::cleanup::RUN_LABEL;

/// What the tests' runtimes leave where: every path the host check reads.
pub struct HostPaths {
    /// Where `tempfile` puts the tests' directories (`TMPDIR`).
    pub tmp: PathBuf,
    /// Where `ip netns` keeps named network namespaces (the CRI plugin's `cni-…` ones).
    pub netns: PathBuf,
    /// host-local's lease files for the tests' CNI network (`nodepulse-test`).
    pub cni_leases: PathBuf,
}

impl HostPaths {
    pub fn of_this_host() -> Self {
        Self {
            tmp: std::env::temp_dir(),
            netns: PathBuf::from("/run/netns"),
            cni_leases: PathBuf::from("/var/lib/cni/networks/nodepulse-test"),
        }
    }
}

/// Names by kind of thing (`mount`, `netns`, …).
pub type Snapshot = BTreeMap<String, BTreeSet<String>>;

/// The name every private containerd's directory starts with (testkit/src/containerd.rs).
const RUNTIME_DIR_PREFIX: &str = "np-ctd";
/// The names `tempfile`, the CSI tests and nodepulse's own probes give directories under
/// `TMPDIR`.
const TEMP_DIR_PREFIXES: [&str; 4] = [".tmp", RUNTIME_DIR_PREFIX, "np-csi", "nodepulse-"];

pub fn host_snapshot(paths: &HostPaths) -> Snapshot {
    let mut snapshot = Snapshot::new();
    let mounts = nodepulse::volume_plugins::mount::mount_points_below(&paths.tmp)
        .map(|points| points.iter().map(|p| p.display().to_string()).collect())
        .unwrap_or_else(|error| [format!("cannot read the mount table: {error}")].into());
    snapshot.insert("mount".into(), mounts);
    snapshot.insert("netns".into(), entries(&paths.netns).collect());
    // host-local's own bookkeeping stays; every other file is an address held for a container.
    let leases = entries(&paths.cni_leases)
        .filter(|name| name != "lock" && !name.starts_with("last_reserved_ip"))
        .collect();
    snapshot.insert("CNI lease".into(), leases);
    snapshot.insert(
        "process of a test containerd".into(),
        runtime_processes(&paths.tmp.join(RUNTIME_DIR_PREFIX)),
    );
    let temporary = entries(&paths.tmp)
        .filter(|name| TEMP_DIR_PREFIXES.iter().any(|p| name.starts_with(p)))
        .map(|name| describe_temp_dir(&paths.tmp.join(&name), name))
        .collect();
    snapshot.insert("temporary directory".into(), temporary);
    snapshot
}

/// Test Nodes and pods (by the run label) and Leases without a Node, in a real cluster.
pub async fn cluster_snapshot(client: &kube::Client) -> Snapshot {
    let labelled = ListParams::default().labels(RUN_LABEL);
    let names = |items: Vec<(Option<String>, Option<String>)>| -> BTreeSet<String> {
        items
            .into_iter()
            .map(|(namespace, name)| match namespace {
                Some(namespace) => format!("{namespace}/{}", name.unwrap_or_default()),
                None => name.unwrap_or_default(),
            })
            .collect()
    };
    let nodes: Vec<Node> = Api::<Node>::all(client.clone())
        .list(&labelled)
        .await
        .map(|list| list.items)
        .unwrap_or_default();
    let pods: Vec<Pod> = Api::<Pod>::all(client.clone())
        .list(&labelled)
        .await
        .map(|list| list.items)
        .unwrap_or_default();
    let all_nodes: BTreeSet<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|node| node.metadata.name)
        .collect();
    let orphan_leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|lease| lease.metadata.name)
        .filter(|name| !all_nodes.contains(name))
        .collect();
    let mut snapshot = Snapshot::new();
    snapshot.insert(
        "Node".into(),
        names(nodes.into_iter().map(|n| (None, n.metadata.name)).collect()),
    );
    snapshot.insert(
        "pod".into(),
        names(
            pods.into_iter()
                .map(|p| (p.metadata.namespace, p.metadata.name))
                .collect(),
        ),
    );
    snapshot.insert("Lease without a Node".into(), orphan_leases);
    snapshot
}

/// What `after` holds that `before` did not, as `<kind>: <name>` lines.
pub fn new_since(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let nothing = BTreeSet::new();
    after
        .iter()
        .flat_map(|(kind, names)| {
            let had = before.get(kind).unwrap_or(&nothing);
            names
                .difference(had)
                .map(move |name| format!("{kind}: {name}"))
        })
        .collect()
}

/// File names directly in `dir`; none when it is absent.
fn entries(dir: &Path) -> impl Iterator<Item = String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
}

/// `<pid>: <command line>` of every process whose command line names a directory starting
/// with `runtime_dirs` (a test's containerd runs on `<dir>/config.toml`, its shims on
/// `<dir>/containerd.sock`).
fn runtime_processes(runtime_dirs: &Path) -> BTreeSet<String> {
    let wanted = runtime_dirs.display().to_string();
    entries(Path::new("/proc"))
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let command = String::from_utf8_lossy(&raw).replace('\0', " ");
            command
                .contains(&wanted)
                .then(|| format!("{pid}: {}", command.trim_end()))
        })
        .collect()
}

/// A temporary directory by name, with what makes it worth a look.
fn describe_temp_dir(path: &Path, name: String) -> String {
    let holds_pods = ["pods", "root/pods"]
        .iter()
        .any(|pods| entries(&path.join(pods)).next().is_some());
    if holds_pods {
        format!("{name} (with pod directories)")
    } else {
        name
    }
}
