//! The files in `deploy/` are what nodepulse needs on a real cluster, and no more: every YAML
//! parses into its Kubernetes type; the ServiceAccount may only ask for a node's client
//! certificate (the requests it really makes, and those of the node identity it gets, are
//! checked in `deploy_join.rs`); the DaemonSet, the ConfigMap and the systemd unit hand the
//! daemon a command line, a configuration and a bootstrap kubeconfig it accepts.

use std::{collections::BTreeSet, path::Path};

use clap::Parser;
use k8s_openapi::api::apps::v1::DaemonSet;
use kube::config::Kubeconfig;
use nodepulse::{
    cli::Cli,
    config::{Config, Source},
    daemon::EXIT_CONFIG,
};
use nodepulse_testkit::deploy::{
    Access, DEPLOY, DaemonSetPod, Rbac, deploy_objects, of_kind, only, service_account,
};

/// All the ServiceAccount may do, as (API group, resource[/subresource], verbs): send a node
/// client CSR and watch it (`system:node-bootstrapper`), and have it approved automatically
/// (`nodeclient`). deploy/ must grant exactly this.
pub const BOOTSTRAP_ONLY: &[(&str, &str, &[&str])] = &[
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        &["create", "get", "list", "watch"],
    ),
    (
        "certificates.k8s.io",
        "certificatesigningrequests/nodeclient",
        &["create"],
    ),
];

fn bootstrap_only() -> BTreeSet<Access> {
    BOOTSTRAP_ONLY
        .iter()
        .flat_map(|(group, resource, verbs)| {
            verbs
                .iter()
                .map(|verb| Access::new(verb, group, resource, ""))
        })
        .collect()
}

#[test]
fn the_service_account_may_only_ask_for_a_node_certificate() {
    let objects = deploy_objects();
    let rbac = Rbac::of(&objects, &service_account(&objects));
    for access in bootstrap_only() {
        assert!(rbac.allows(&access), "deploy/ does not grant {access:?}");
    }
    let extra: Vec<_> = rbac
        .grants()
        .difference(&bootstrap_only())
        .cloned()
        .collect();
    assert!(
        extra.is_empty(),
        "deploy/ grants the ServiceAccount more than a bootstrap: {extra:?}"
    );
    // What the DaemonSet's ServiceAccount held before it joined as its node.
    for (verb, resource) in [
        ("list", "secrets"),
        ("get", "secrets"),
        ("create", "serviceaccounts/token"),
        ("patch", "nodes/status"),
    ] {
        for namespace in ["", "kube-system"] {
            assert!(
                !rbac.allows(&Access::new(verb, "", resource, namespace)),
                "the ServiceAccount may {verb} {resource} in {namespace:?}"
            );
        }
    }
}

#[test]
fn the_daemonset_runs_the_node_it_is_on_with_read_only_host_access() {
    let objects = deploy_objects();
    let daemonset: DaemonSet = only(of_kind(&objects, "DaemonSet"), "DaemonSet");
    let account = service_account(&objects);
    let pod = DaemonSetPod::of(&objects);
    assert_eq!(
        pod.spec.host_network,
        Some(true),
        "addresses come from the host's routes"
    );
    assert_eq!(pod.spec.service_account_name, account.metadata.name);
    assert_eq!(daemonset.metadata.namespace, account.metadata.namespace);
    let container = pod.container.clone();
    assert!(container.command.is_none(), "the image's entrypoint runs");

    let node_name = container
        .env
        .iter()
        .flatten()
        .find(|env| env.name == "NODE_NAME")
        .expect("a NODE_NAME variable");
    let field = node_name
        .value_from
        .as_ref()
        .and_then(|from| from.field_ref.as_ref())
        .expect("NODE_NAME from the downward API");
    assert_eq!(field.field_path, "spec.nodeName");

    // The arguments parse, as the daemon will parse them, once Kubernetes expands $(NODE_NAME);
    // the configuration file they name is the ConfigMap's, and the daemon accepts it.
    let cli = pod.cli("worker-1");
    let config_path = cli.config.clone().expect("--config");
    let text = pod.config_map_file(&objects, &config_path);
    let config = Config::parse(&text, Source::File(config_path.clone()))
        .unwrap_or_else(|error| panic!("the ConfigMap's configuration is refused: {error}"));

    // Host paths are mounted read-only, and cover what the configuration reads on the host;
    // writable are the pod's own emptyDir for the kubelet API's certificate and the node's
    // credentials (checked in the next test).
    let mounts = pod.mounts();
    let credentials = cli.cert_dir.clone().expect("--cert-dir");
    for mount in &mounts {
        let (_, volume) = pod
            .volume_at(Path::new(&mount.mount_path))
            .expect("a volume");
        if volume.empty_dir.is_some() {
            assert_eq!(
                Path::new(&mount.mount_path),
                config.cert_dir_on_host(),
                "the only emptyDir holds the self-signed certificate"
            );
            continue;
        }
        if credentials.starts_with(&mount.mount_path) {
            continue;
        }
        assert_eq!(
            mount.read_only,
            Some(true),
            "{} is writable",
            mount.mount_path
        );
    }
    let host_path = |inside: &Path| {
        pod.volume_at(inside)
            .is_some_and(|(_, volume)| volume.host_path.is_some())
    };
    let socket = config
        .container_runtime_endpoint
        .strip_prefix("unix://")
        .expect("a unix socket");
    assert!(
        host_path(Path::new(socket)),
        "the CRI socket's directory is mounted"
    );
    assert!(
        host_path(&config.root_dir),
        "rootDir is mounted from the host"
    );
    assert!(
        host_path(Path::new("/sys/fs/cgroup")),
        "the host's cgroups are mounted"
    );

    // The liveness probe asks the debug endpoint the configuration binds.
    let probe = container
        .liveness_probe
        .and_then(|probe| probe.http_get)
        .expect("an HTTP liveness probe");
    assert_eq!(probe.path.as_deref(), Some("/healthz"));
    let port = match probe.port {
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(port) => port.to_string(),
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(port) => port,
    };
    assert!(
        config.debug.address.ends_with(&format!(":{port}")),
        "the probe's port {port} is not the debug address {}",
        config.debug.address
    );
}

#[test]
fn the_daemonset_joins_with_a_pod_bound_token_and_keeps_the_node_certificate_on_the_host() {
    let objects = deploy_objects();
    let pod = DaemonSetPod::of(&objects);
    assert_eq!(
        pod.spec.automount_service_account_token,
        Some(false),
        "no token but the bootstrap one is mounted"
    );
    let cli = pod.cli("worker-1");
    let config_path = cli.config.clone().expect("--config");
    let config = Config::parse(
        &pod.config_map_file(&objects, &config_path),
        Source::File(config_path),
    )
    .expect("a valid configuration");
    assert!(
        config.rotate_certificates,
        "the node certificate is renewed before it expires"
    );

    // The bootstrap kubeconfig is the ConfigMap's, and its credentials the projected token.
    let bootstrap = cli
        .bootstrap_kubeconfig
        .clone()
        .expect("--bootstrap-kubeconfig: the pod joins as a kubelet does");
    let text = pod.config_map_file(&objects, &bootstrap);
    let kubeconfig = Kubeconfig::from_yaml(&text).expect("the bootstrap kubeconfig parses");
    let user = only(kubeconfig.auth_infos.clone(), "bootstrap user")
        .auth_info
        .expect("credentials");
    assert!(user.token.is_none(), "no token written into the ConfigMap");
    let token_file = user.token_file.expect("the projected token's file");
    let cluster = only(kubeconfig.clusters.clone(), "bootstrap cluster")
        .cluster
        .expect("a cluster");
    let ca_file = cluster
        .certificate_authority
        .expect("the cluster CA's file");
    let (token_mount, token_volume) = pod
        .volume_at(Path::new(&token_file))
        .expect("the token's volume is mounted");
    assert_eq!(
        pod.volume_at(Path::new(&ca_file))
            .map(|(m, _)| m.mount_path),
        Some(token_mount.mount_path.clone()),
        "the CA comes with the token"
    );
    let sources = token_volume
        .projected
        .and_then(|projected| projected.sources)
        .expect("a projected volume");
    let file_name = |path: &str| {
        Path::new(path)
            .strip_prefix(&token_mount.mount_path)
            .expect("in the mount")
            .to_string_lossy()
            .into_owned()
    };
    let token = sources
        .iter()
        .find_map(|source| source.service_account_token.clone())
        .expect("a serviceAccountToken source");
    assert_eq!(token.path, file_name(&token_file));
    assert!(
        token.audience.is_none(),
        "the API server's own audience, which it authenticates"
    );
    assert!(
        token.expiration_seconds.is_some_and(|s| s <= 3600),
        "an hour at most: a stolen copy soon expires"
    );
    let ca = sources
        .iter()
        .find_map(|source| source.config_map.clone())
        .expect("the cluster CA's ConfigMap");
    assert_eq!(ca.name, "kube-root-ca.crt");
    let items = ca.items.expect("the CA item");
    assert_eq!(items[0].key, "ca.crt");
    assert_eq!(items[0].path, file_name(&ca_file));

    // The certificate, its key and the kubeconfig naming them outlive the pod, on the host.
    let written = cli
        .kubeconfig
        .clone()
        .expect("--kubeconfig: written by the join");
    let cert_dir = cli.cert_dir.clone().expect("--cert-dir");
    let (mount, volume) = pod
        .volume_at(&cert_dir)
        .expect("the certificate directory is mounted");
    assert!(
        written.starts_with(&mount.mount_path),
        "the kubeconfig beside the certificates"
    );
    let host = volume.host_path.expect("a hostPath, kept across pods");
    assert_eq!(host.path, mount.mount_path, "the same path in and out");
    assert_ne!(mount.read_only, Some(true), "written by the join");
    assert!(
        !Path::new(&mount.mount_path).starts_with("/var/lib/kubelet"),
        "never the kubelet's own certificates"
    );
}

#[test]
fn the_systemd_unit_runs_a_command_line_the_daemon_accepts() {
    let unit = std::fs::read_to_string(Path::new(DEPLOY).join("nodepulse.service"))
        .expect("deploy/nodepulse.service");
    let value = |key: &str| {
        unit.lines()
            .find_map(|line| line.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("the unit has no {key}="))
            .to_owned()
    };
    let exec = value("ExecStart");
    let mut words = exec.split_whitespace();
    let binary = words.next().expect("a program");
    assert!(binary.starts_with('/'), "systemd needs an absolute path");
    let cli = Cli::try_parse_from(std::iter::once("nodepulse").chain(words))
        .unwrap_or_else(|error| panic!("ExecStart is refused: {error}"));
    assert!(
        cli.kubeconfig.is_some(),
        "a host runs with a kubeconfig file"
    );
    assert!(cli.config.is_some(), "and a configuration file");
    assert!(!cli.standalone);
    assert_eq!(value("Restart"), "always");
    assert!(
        value("RestartPreventExitStatus")
            .split_whitespace()
            .any(|code| code == EXIT_CONFIG.to_string()),
        "a bad configuration must not be restarted in a loop"
    );
}
