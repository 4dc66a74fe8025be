//! The configuration reference: one line of documentation per field, rendered as the Markdown
//! table of the book's `docs/configuration.md` (`nodepulse config-reference` prints it; its
//! links are relative to that page). Defaults are not written here but read from [`Config`]'s
//! own defaults, and a test fails when a field of `Config` has no line here or the book's table
//! differs from [`markdown`]'s, so the reference cannot drift.

use std::fmt::Write as _;

use serde_json::Value;

use super::Config;

/// One field: its path in the file, the default when the type's default (`null`) does not
/// say it, and what it means.
pub struct FieldDoc {
    pub path: &'static str,
    pub default: Option<&'static str>,
    pub meaning: &'static str,
}

const fn field(path: &'static str, meaning: &'static str) -> FieldDoc {
    FieldDoc {
        path,
        default: None,
        meaning,
    }
}

const fn field_defaulting(
    path: &'static str,
    default: &'static str,
    meaning: &'static str,
) -> FieldDoc {
    FieldDoc {
        path,
        default: Some(default),
        meaning,
    }
}

/// Every field of the file, in the order the book's table lists them.
pub const FIELDS: &[FieldDoc] = &[
    field_defaulting(
        "nodeName",
        "host name",
        "the Node's name (an RFC 1123 subdomain); `--node-name` overrides it; the host name lower-cased, as the kubelet, when unset",
    ),
    field(
        "nodeStatusUpdateFrequency",
        "how often status is computed; the heartbeat client's request timeout is min(this, `nodeLeaseDurationSeconds`)",
    ),
    field_defaulting(
        "nodeStatusReportFrequency",
        "`5m0s`",
        "the longest a status goes unposted when nothing changed; when unset and `nodeStatusUpdateFrequency` is set, that frequency (as the kubelet)",
    ),
    field(
        "nodeLeaseDurationSeconds",
        "the Lease's `spec.leaseDurationSeconds`; renewed every quarter of it (jitter 0.04)",
    ),
    field_defaulting(
        "kubeAPIQPS",
        "`50`; a fleet: 50 a node, at most 500",
        "requests per second of the main API client; Lease and status heartbeats are never limited; a fleet's nodes share it",
    ),
    field_defaulting(
        "kubeAPIBurst",
        "`100`; a fleet: 100 a node, at most 1000",
        "burst of the main API client",
    ),
    field(
        "eventRecordQPS",
        "Event writes (POST or PATCH) per second, over all objects, after the per-object spam filter (see [Events](node/events.md)); more wait for their turn in their node's queue",
    ),
    field("eventBurst", "burst of Events"),
    field(
        "registerNode",
        "create the Node at start, or adopt and reconcile the existing one",
    ),
    field(
        "registerWithTaints",
        "taints the Node is created with (`[{key, value, effect}]`)",
    ),
    field(
        "nodeLabels",
        "labels added at registration, after the default ones",
    ),
    field_defaulting("providerID", "none", "the Node's `spec.providerID`"),
    field(
        "enableControllerAttachDetach",
        "add the `volumes.kubernetes.io/controller-managed-attach-detach` annotation",
    ),
    field(
        "rotateCertificates",
        "rotate the client certificate of a node that joined by TLS bootstrap (`--bootstrap-kubeconfig`): a new CSR at a jittered 70–90 % of its lifetime, used by every new connection, the old connections closed",
    ),
    field(
        "serverTLSBootstrap",
        "ask the API server for the kubelet API's serving certificate: a `kubernetes.io/kubelet-serving` CSR for the Node's addresses (someone must approve it: no controller does), kept as `kubelet-server-*.pem` in the certificate directory and renewed at 70–90 % of its lifetime or when the addresses change; until one is issued every TLS handshake of the kubelet API is refused (`no serving certificate available for the kubelet`). Overrides the self-signed pair; `tlsCertFile` and `tlsPrivateKeyFile` are only the first certificate",
    ),
    field(
        "nodeIP",
        "the Node's addresses (up to two, one per family), checked against the host's interfaces; none: the default-route address",
    ),
    field(
        "enableServer",
        "whether a `runtime: cri` node serves the kubelet API (`port`) and the healthz listener; false serves neither (the kubelet keeps its healthz listener), and `kubectl logs/exec` cannot reach the node's pods",
    ),
    field(
        "port",
        "the kubelet API's HTTPS port: served on `address` and reported in `daemonEndpoints` (0: a port the kernel picks, reported as bound; the kubelet refuses 0). Only a single `runtime: cri` node serves the API",
    ),
    field(
        "address",
        "the IP the kubelet API (`port`) listens on; `--standalone` serves on loopback instead of `0.0.0.0`",
    ),
    field(
        "readOnlyPort",
        "the kubelet's unauthenticated read-only port; not served by nodepulse, so only 0 is accepted",
    ),
    field(
        "healthzBindAddress",
        "the IP of the plain-HTTP `/healthz` listener",
    ),
    field("healthzPort", "its port; 0 turns it off, as in the kubelet"),
    field_defaulting(
        "tlsCertFile",
        "none",
        "the kubelet API's serving certificate (PEM, leaf first); with `tlsPrivateKeyFile`. Unset: `<rootDir>/pki/kubelet.crt` and `kubelet.key`, self-signed once as the kubelet does. An unreadable or mismatched pair is an error at start and from `check-config`",
    ),
    field_defaulting(
        "tlsPrivateKeyFile",
        "none",
        "the private key (PEM: PKCS#8, PKCS#1 or SEC1) of `tlsCertFile`",
    ),
    field_defaulting(
        "tlsMinVersion",
        "`VersionTLS12`",
        "the lowest TLS version the kubelet API accepts: `VersionTLS12` or `VersionTLS13`",
    ),
    field_defaulting(
        "authentication.x509.clientCAFile",
        "none",
        "client certificates that chain to these CAs (PEM bundle) authenticate as their Subject CN (user) and O (groups); the API server's kubelet-client certificate is the usual one",
    ),
    field(
        "authentication.webhook.enabled",
        "bearer tokens are checked with a TokenReview (nodepulse needs `create tokenreviews`)",
    ),
    field(
        "authentication.webhook.cacheTTL",
        "how long a TokenReview's answer, either way, is reused",
    ),
    field(
        "authentication.anonymous.enabled",
        "requests without credentials are served as `system:anonymous` (then authorized like any other)",
    ),
    field(
        "authorization.mode",
        "`Webhook`: a SubjectAccessReview per request (nodepulse needs `create subjectaccessreviews`); `AlwaysAllow`: every authenticated request is allowed",
    ),
    field(
        "authorization.webhook.cacheAuthorizedTTL",
        "how long an allowing SubjectAccessReview is reused",
    ),
    field(
        "authorization.webhook.cacheUnauthorizedTTL",
        "how long a denying one is reused",
    ),
    field(
        "enableSystemLogQuery",
        "`/logs/?query=…` answers the node log query as the kubelet does (a service from journald through `journalctl`, else from `/var/log/<service>`, `<service>.log` or `<service>/<service>.log`; a file under `/var/log`; `sinceTime`, `untilTime`, `tailLines`, `pattern`, `boot`); off, the query is ignored and `/var/log` served as files; see [The kubelet API](kubelet-api.md)",
    ),
    field(
        "hostRoot",
        "where the host's root filesystem is mounted (`/host` in a container that mounts the host's `/` there): `/proc` (meminfo, loadavg, PID limits), the root cgroup under `/sys/fs/cgroup` and `rootDir` are read under it; must exist and hold `proc/meminfo` (checked at start and by `check-config`); node facts (machine-id, addresses) still come from nodepulse's own `/`",
    ),
    field_defaulting(
        "kubeletCgroups",
        "nodepulse's own cgroup",
        "the cgroup `/stats/summary` reports as the `kubelet` system container (an absolute cgroup path, read under `hostRoot`); unset: the cgroup nodepulse runs in (`/proc/self/cgroup`; on cgroup v1 only when its `cpu` and `memory` cgroups agree, as the kubelet requires); nodepulse moves no process, itself included",
    ),
    field_defaulting(
        "runtimeCgroups",
        "not reported",
        "the container runtime's cgroup, reported as the `runtime` system container (an absolute cgroup path); unset: not reported, as the kubelet",
    ),
    field_defaulting(
        "systemCgroups",
        "not reported",
        "the cgroup of the host's other processes, reported as the `misc` system container (an absolute cgroup path, not `/`); unset: none is reported; nodepulse moves no process there",
    ),
    field(
        "rootDir",
        "whose filesystem gives `ephemeral-storage` capacity and the nodefs signals, as the host sees it (looked up under `hostRoot`; its nearest existing ancestor when missing)",
    ),
    field(
        "syncFrequency",
        "the pod resync period: configMap, secret, downwardAPI and projected volume contents are read again and rewritten (when changed) this often, as the kubelet's pod resync",
    ),
    field("maxPods", "capacity `pods`"),
    field(
        "podsPerCore",
        "when above 0, capacity `pods` is min(cores × this, `maxPods`)",
    ),
    field(
        "systemReserved",
        "held back from allocatable for the OS (`cpu`, `memory`, `ephemeral-storage`, `pid`)",
    ),
    field("kubeReserved", "held back from allocatable for node agents"),
    field(
        "cgroupsPerQOS",
        "the kubelet's QoS cgroups: `kubepods` under `cgroupRoot`, `burstable` and `besteffort` in it, one `pod<uid>` cgroup a pod (Guaranteed pods directly in `kubepods`) holding its containers, with the pod's CPU shares, CFS quota, memory and PID limits; see [cgroups](node/cgroups.md)",
    ),
    field_defaulting(
        "cgroupRoot",
        "`/`",
        "the cgroup `kubepods` is made in (an absolute cgroup path)",
    ),
    field(
        "cgroupDriver",
        "`cgroupfs` (cgroup paths as they are) or `systemd` (slices: `kubepods.slice/kubepods-burstable.slice/…`); the runtime's answer to CRI `RuntimeConfig` wins where it gives one, as the kubelet's",
    ),
    field(
        "enforceNodeAllocatable",
        "`pods`: `kubepods` capped at capacity minus `systemReserved` and `kubeReserved`; `system-reserved`, `kube-reserved`: their cgroups capped at the reservation (`-compressible`: CPU only); `none` alone: nothing",
    ),
    field_defaulting(
        "systemReservedCgroup",
        "none",
        "the existing cgroup `system-reserved` enforcement caps; required with it",
    ),
    field_defaulting(
        "kubeReservedCgroup",
        "none",
        "the existing cgroup `kube-reserved` enforcement caps; required with it",
    ),
    field("podPidsLimit", "each pod cgroup's `pids.max` when above 0"),
    field(
        "failCgroupV1",
        "refuse to start on a cgroup v1 host with the kubelet's message; **false** here where the kubelet 1.36 defaults to true (see [differences](differences.md))",
    ),
    field(
        "runtime",
        "`cri`: probe the container runtime over CRI; `simulated`: report a healthy runtime without one, flagged `simulated`",
    ),
    field(
        "podCIDR",
        "where a simulated node's pod addresses come from until the Node has a `spec.podCIDR`",
    ),
    field(
        "clusterDNS",
        "the cluster's DNS resolvers for `ClusterFirst` pods on `runtime: cri`; empty: the host's DNS, as the kubelet falls back",
    ),
    field(
        "allowedUnsafeSysctls",
        "sysctls (names, or prefixes ending in `*`) pods may set beside the safe ones; others refuse the pod with `SysctlForbidden`",
    ),
    field(
        "seccompDefault",
        "containers that name no seccomp profile get the runtime's default one (`RuntimeDefault`) instead of none; `Localhost` profiles are read from `<rootDir>/seccomp`",
    ),
    field_defaulting(
        "userNamespaces",
        "`idsPerPod: 65536`",
        "`idsPerPod`: host IDs each `hostUsers: false` pod gets, a multiple of 65536; see [user namespaces](node/user-namespaces.md)",
    ),
    field(
        "clusterDomain",
        "the cluster's DNS domain in pods' search paths",
    ),
    field(
        "resolvConf",
        "the host's resolv.conf, for `dnsPolicy: Default` pods and the fallback",
    ),
    field_defaulting(
        "staticPodPath",
        "none",
        "a directory of static pod manifests (YAML or JSON, one pod per file, dotfiles skipped, not recursive), or one manifest file: each runs as the pod `<name>-<nodeName>` with a mirror pod in the API (as the kubelet's `staticPodPath`)",
    ),
    field(
        "fileCheckFrequency",
        "how often `staticPodPath` is read again in full; a change is also seen within a second",
    ),
    field_defaulting(
        "staticPodURL",
        "none",
        "an `http://` or `https://` URL serving static pods (one Pod or a v1 PodList, YAML or JSON; `https` verified against the host's trusted roots): each runs as the pod `<name>-<nodeName>` of source `http` with a mirror pod; an error (no answer, not 200, a bad body) keeps the pods there are (as the kubelet's `staticPodURL`)",
    ),
    field_defaulting(
        "staticPodURLHeader",
        "none",
        "headers for every GET of `staticPodURL`: each name with a list of values",
    ),
    field(
        "httpCheckFrequency",
        "how often `staticPodURL` is read, counted from the end of the last read",
    ),
    field(
        "podLogsDir",
        "where `runtime: cri` pods' container logs go, a directory `<namespace>_<name>_<uid>` per pod",
    ),
    field(
        "containerLogMaxSize",
        "a running container's log is rotated once it reaches this size (a quantity of bytes; negative: never)",
    ),
    field(
        "containerLogMaxFiles",
        "log files a container keeps, the current one included (at least 2); the oldest rotated ones are removed",
    ),
    field(
        "containerLogMaxWorkers",
        "how many containers' logs are rotated at once (at least 1)",
    ),
    field(
        "containerLogMonitorInterval",
        "how often the running containers' log sizes are checked (at least `3s`)",
    ),
    field(
        "containerRuntimeEndpoint",
        "the CRI socket (only `unix://` endpoints)",
    ),
    field("runtimeRequestTimeout", "bound on each CRI call"),
    field_defaulting(
        "maxParallelSandboxes",
        "2 a core",
        "how many pod sandboxes are made at once (RunPodSandbox and its inspection, at least 1); other pods wait their turn in the order they asked, and a pod's containers start outside its turn. nodepulse's own: the kubelet asks for all at once",
    ),
    field(
        "runtimeProbePeriod",
        "how often the runtime's status is probed and `RuntimeHealth` sent (the kubelet hard-codes 5 s)",
    ),
    field(
        "containerRuntimeDownAfter",
        "no full runtime-probe success this long: Ready=False \"container runtime is down\" (the kubelet's fixed `maxWaitForContainerRuntime`)",
    ),
    field(
        "plegRelistThreshold",
        "no successful PLEG relist this long (while the node has pods): Ready=False \"PLEG is not healthy: pleg was last seen active … ago; threshold is …\" (the kubelet's fixed `relistThreshold`; 10 min while the runtime's container events are followed)",
    ),
    field(
        "evictionHard",
        "hard thresholds by signal, quantities or percentages of capacity; when given, exactly these apply",
    ),
    field(
        "evictionSoft",
        "soft thresholds; each needs a grace period (a config error otherwise, as in the kubelet)",
    ),
    field(
        "evictionSoftGracePeriod",
        "how long each soft threshold must be met before it counts",
    ),
    field(
        "evictionMinimumReclaim",
        "how far past its threshold a signal must recover before a met threshold counts as resolved",
    ),
    field(
        "evictionPressureTransitionPeriod",
        "a pressure condition stays on this long after its signal recovered",
    ),
    field(
        "housekeepingInterval",
        "how often the eviction signals are measured (at least `1s`)",
    ),
    field(
        "volumeStatsAggPeriod",
        "how often the mounted claims' `kubelet_volume_stats_*` figures are measured; scrapes in between read the last measurement",
    ),
    field(
        "imageGCHighThresholdPercent",
        "image filesystem usage (0–100) at or above which unused images are removed; `100` with `imageMaximumGCAge: 0s` turns image GC off",
    ),
    field(
        "imageGCLowThresholdPercent",
        "the usage image GC frees down to (0–100, below `imageGCHighThresholdPercent`)",
    ),
    field(
        "imageMinimumGCAge",
        "an image is removed at the earliest this long after nodepulse first saw it",
    ),
    field(
        "imageMaximumGCAge",
        "an image unused this long is removed whatever the usage (`0s`: off; else above `imageMinimumGCAge`)",
    ),
    field(
        "imageGCPeriod",
        "how often image GC runs (the kubelet hard-codes 5 m)",
    ),
    field(
        "supervision.livenessTimeout",
        "an actor busy in one handler (or timer, or start) this long is declared hung and replaced",
    ),
    field(
        "supervision.livenessInterval",
        "how often the supervisor checks for such an actor, without waking any (≤ `livenessTimeout`; a hang is declared within `livenessTimeout` + this)",
    ),
    field(
        "supervision.maxRestarts",
        "restarts allowed per actor within `restartWindow`; one more escalates (exit 3)",
    ),
    field(
        "supervision.restartWindow",
        "the window of the restart-intensity bound",
    ),
    field(
        "supervision.mailboxCapacity",
        "messages that may wait in one actor's mailbox",
    ),
    field(
        "supervision.backoff.initial",
        "delay before the first restart",
    ),
    field(
        "supervision.backoff.max",
        "cap of the delay (before jitter)",
    ),
    field(
        "supervision.backoff.multiplier",
        "growth per consecutive restart (≥ 1)",
    ),
    field(
        "supervision.backoff.jitter",
        "up to this fraction extra, never less (as the kubelet's `wait.Jitter`)",
    ),
    field(
        "supervision.backoff.resetAfter",
        "a run this long counts as stable: the delay starts over",
    ),
    field(
        "debug.address",
        "the debug endpoint and `/metrics`; a warning is logged when bound beyond loopback",
    ),
    field(
        "debug.faultInjection.enabled",
        "allow `POST /debug/actors/{name}/kill`",
    ),
    field_defaulting(
        "debug.faultInjection.token",
        "none",
        "bearer token for the kill route; required (16+ characters) when enabled; never logged",
    ),
    field(
        "standalone.apiAddress",
        "where `--standalone` serves the API emulator. In standalone mode every listener (this one, `port`, `healthzPort`, `debug.address`) whose port is taken serves on one of its own and says which",
    ),
    field_defaulting(
        "standalone.kubeconfigPath",
        "`$TMPDIR/nodepulse-standalone-<random>/kubeconfig`",
        "where `--standalone` writes its kubeconfig (mode 0600; by default in a new directory of mode 0700 made for this instance; both removed at exit). A file or link already at a configured path is an error, never overwritten",
    ),
    field(
        "nodes",
        "simulated nodes run in this one process (a fleet; needs `runtime: simulated`): each `name`, with `labels` over `nodeLabels` and `capacity` (`cpu`, `memory`) reported instead of the host's; `--nodes N` adds generated `<nodeName>-<i>` up to N",
    ),
];

/// The configuration with every field at its default, as JSON (what an empty file gives).
pub fn defaults() -> Value {
    let config: Config = serde_json::from_value(Value::Object(serde_json::Map::new()))
        .unwrap_or_else(|error| unreachable!("every field has a default: {error}"));
    serde_json::to_value(config).unwrap_or_else(|error| unreachable!("serializable: {error}"))
}

/// The value at a dotted field path (field names never contain dots; map keys may, so a map's
/// entries are not paths).
fn at<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |value, key| value.get(key))
}

/// The paths of every field: nested sections are descended into; maps, lists and scalars are
/// fields. A section is an object with at least one key and no key containing a dot (maps with
/// such defaults are `evictionHard`'s signal names, which have dots).
pub fn field_paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() && !map.keys().any(|key| key.contains('.')) => {
            for (key, value) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                field_paths(value, &path, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

fn render_default(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "—".to_owned(),
        Some(Value::String(text)) => format!("`{text}`"),
        Some(Value::Object(map)) if map.is_empty() => "none".to_owned(),
        Some(Value::Array(items)) if items.is_empty() => "none".to_owned(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(key, value)| match value {
                Value::String(text) => format!("`{key}: {text}`"),
                other => format!("`{key}: {other}`"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Some(other) => format!("`{other}`"),
    }
}

/// The reference as a Markdown table: field, default, meaning.
pub fn markdown() -> String {
    let defaults = defaults();
    let mut out = String::from("| field | default | meaning |\n|---|---|---|\n");
    for doc in FIELDS {
        let default = match doc.default {
            Some(text) => text.to_owned(),
            None => render_default(at(&defaults, doc.path)),
        };
        let _ = writeln!(out, "| `{}` | {default} | {} |", doc.path, doc.meaning);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_field_of_the_configuration_is_documented_once() {
        let mut paths = Vec::new();
        field_paths(&defaults(), "", &mut paths);
        let fields: BTreeSet<String> = paths.into_iter().collect();
        let documented: Vec<&str> = FIELDS.iter().map(|doc| doc.path).collect();
        let unique: BTreeSet<String> = documented.iter().map(|p| (*p).to_owned()).collect();
        assert_eq!(
            unique.len(),
            documented.len(),
            "a field is documented twice"
        );
        let missing: Vec<_> = fields.difference(&unique).collect();
        let unknown: Vec<_> = unique.difference(&fields).collect();
        assert!(
            missing.is_empty(),
            "Config fields without a line in FIELDS: {missing:?}"
        );
        assert!(
            unknown.is_empty(),
            "FIELDS documents what Config does not have: {unknown:?}"
        );
    }

    #[test]
    fn a_field_whose_default_is_unset_says_what_happens_instead() {
        let defaults = defaults();
        for doc in FIELDS {
            if at(&defaults, doc.path).is_none_or(Value::is_null) {
                assert!(doc.default.is_some(), "{} needs a default text", doc.path);
            }
        }
    }

    #[test]
    fn defaults_are_read_from_the_types() {
        let table = markdown();
        assert!(table.contains("| `nodeStatusUpdateFrequency` | `10s` |"));
        assert!(table.contains("| `evictionHard` | `imagefs.available: 15%`, "));
        assert!(table.contains("| `systemReserved` | none |"));
        assert!(table.contains("| `supervision.maxRestarts` | `10` |"));
    }
}
