//! TLS bootstrap as a test sets it up, on the emulator or a real cluster: a bootstrap token
//! Secret (and, on a real cluster, kubeadm's RBAC bindings), the bootstrap kubeconfig `kubeadm
//! join` writes, the node's files, and a sweep of the CSRs a test's users made.

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use k8s_openapi::api::{certificates::v1::CertificateSigningRequest, core::v1::Node};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
    config::Kubeconfig,
};
use nodepulse_emulator::EmulatorConfig;
use rustls::pki_types::pem::PemObject as _;
use serde_json::{Value, json};

use crate::cleanup::{Owned, own};
use crate::cluster::TestCluster;

/// The group kubeadm gives its tokens, bound to CSR creation and the `nodeclient` approval.
pub const KUBEADM_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
/// A group bound to CSR creation only: nobody approves its requests automatically.
pub const UNAPPROVED_GROUP: &str = "system:bootstrappers:nodepulse-test";

/// A bootstrap token in `kube-system`, and what a test made for it.
pub struct Token {
    pub id: String,
    pub secret: String,
}

impl Token {
    /// Creates `bootstrap-token-<id>` with `group` as its extra group and, on a real cluster,
    /// the ClusterRoleBindings kubeadm makes for that group (and for node certificate renewal).
    pub async fn create(cluster: &TestCluster, group: &str) -> Self {
        let random = |len: usize| -> String {
            const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
            (0..len)
                .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
                .collect()
        };
        let token = Token {
            id: random(6),
            secret: random(16),
        };
        let name = format!("bootstrap-token-{}", token.id);
        own(Owned::Object {
            path: format!("/api/v1/namespaces/kube-system/secrets/{name}"),
        });
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "kube-system"},
            "type": "bootstrap.kubernetes.io/token",
            "stringData": {"token-id": token.id, "token-secret": token.secret,
                "usage-bootstrap-authentication": "true", "auth-extra-groups": group,
                "description": "nodepulse tls_bootstrap test"}});
        create(cluster, "/api/v1/namespaces/kube-system/secrets", &secret).await;
        if !cluster.is_emulator() {
            // The emulator plays kubeadm's bindings; a real cluster needs them made.
            let mut bindings = vec![("system:node-bootstrapper", group.to_owned())];
            if group == KUBEADM_GROUP {
                bindings.push((
                    "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
                    group.to_owned(),
                ));
                bindings.push((
                    "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
                    "system:nodes".to_owned(),
                ));
            }
            for (index, (role, subject)) in bindings.into_iter().enumerate() {
                let binding = format!("nodepulse-test-{}-{index}", token.id);
                own(Owned::Object {
                    path: format!(
                        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{binding}"
                    ),
                });
                let body = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding", "metadata": {"name": binding},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": subject}]});
                create(
                    cluster,
                    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                    &body,
                )
                .await;
            }
        }
        token
    }

    pub fn user(&self) -> String {
        format!("system:bootstrap:{}", self.id)
    }
}

pub async fn create(cluster: &TestCluster, path: &str, body: &Value) {
    let request = http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).expect("JSON"))
        .expect("a request");
    cluster
        .client
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("cannot create {path}: {e}"));
}

/// Deletes, when dropped, the CSRs `users` made (their names are the API server's).
pub struct CsrSweep {
    pub kubeconfig: PathBuf,
    pub users: Vec<String>,
}

impl Drop for CsrSweep {
    fn drop(&mut self) {
        let users = self.users.clone();
        delete_csrs(&self.kubeconfig, move |csr| {
            csr.spec
                .username
                .as_ref()
                .is_some_and(|user| users.contains(user))
        });
    }
}

/// Deletes every CSR `selected` picks, from a thread and a client of its own: a sweep runs
/// while its test drops, when the test's runtime no longer runs.
pub fn delete_csrs(
    kubeconfig: &Path,
    selected: impl Fn(&CertificateSigningRequest) -> bool + Send + 'static,
) {
    let kubeconfig = kubeconfig.to_owned();
    let _ = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let file = Kubeconfig::read_from(&kubeconfig).expect("a kubeconfig");
            let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await;
            let Some(client) = config.ok().and_then(|c| kube::Client::try_from(c).ok()) else {
                return;
            };
            let api = Api::<CertificateSigningRequest>::all(client);
            let all = api.list(&Default::default()).await.map(|l| l.items);
            for csr in all.unwrap_or_default().into_iter().filter(|c| selected(c)) {
                let name = csr.metadata.name.unwrap_or_default();
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
        });
    })
    .join();
}

pub async fn requests_by(
    api: &Api<CertificateSigningRequest>,
    users: &[String],
) -> Vec<CertificateSigningRequest> {
    api.list(&Default::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|csr| {
            csr.spec
                .username
                .as_ref()
                .is_some_and(|user| users.contains(user))
        })
        .collect()
}

/// The cluster's server and CA with the token as the user: what `kubeadm join` writes as
/// `bootstrap-kubelet.conf`.
pub fn bootstrap_kubeconfig(cluster: &TestCluster, token: &Token, directory: &Path) -> PathBuf {
    let admin = Kubeconfig::read_from(&cluster.kubeconfig).expect("the cluster's kubeconfig");
    let context = admin.current_context.clone().unwrap_or_default();
    let cluster_name = admin
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .expect("a current context");
    let entry = admin
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .expect("its cluster");
    let mut cluster_yaml = json!({"server": entry.server});
    if let Some(ca) = entry.certificate_authority {
        cluster_yaml["certificate-authority"] = json!(ca);
    }
    if let Some(ca) = entry.certificate_authority_data {
        cluster_yaml["certificate-authority-data"] = json!(ca);
    }
    let kubeconfig = json!({"apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "kubernetes", "cluster": cluster_yaml}],
        "users": [{"name": "tls-bootstrap-token-user", "user": {"token": format!("{}.{}", token.id, token.secret)}}],
        "contexts": [{"name": "tls-bootstrap-token-user@kubernetes", "context": {"cluster": "kubernetes", "user": "tls-bootstrap-token-user"}}],
        "current-context": "tls-bootstrap-token-user@kubernetes"});
    let path = directory.join("bootstrap-kubelet.conf");
    std::fs::write(&path, serde_yaml_ng::to_string(&kubeconfig).expect("YAML")).expect("written");
    path
}

/// An emulator serving HTTPS, signing certificates for `duration`.
pub fn tls_emulator(duration: Duration) -> EmulatorConfig {
    EmulatorConfig {
        tls: true,
        cluster_signing_duration: duration,
        ..EmulatorConfig::for_tests()
    }
}

/// The node's files: where the kubeconfig is written and the certificate directory.
pub struct NodeFiles {
    pub directory: tempfile::TempDir,
}

impl NodeFiles {
    pub fn new() -> Self {
        Self {
            directory: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.directory.path().join("kubelet.conf")
    }

    pub fn cert_dir(&self) -> PathBuf {
        self.directory.path().join("pki")
    }

    pub fn dated_certificates(&self) -> Vec<PathBuf> {
        let mut dated: Vec<PathBuf> = std::fs::read_dir(self.cert_dir())
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        dated.retain(|p| {
            let name = p.file_name().and_then(OsStr::to_str).unwrap_or("");
            name.starts_with("kubelet-client-2") && name.ends_with(".pem")
        });
        dated.sort();
        dated
    }

    pub fn args<'a>(&'a self, bootstrap: &'a Path, cert_dir: &'a Path) -> [&'a OsStr; 4] {
        [
            OsStr::new("--bootstrap-kubeconfig"),
            bootstrap.as_os_str(),
            OsStr::new("--cert-dir"),
            cert_dir.as_os_str(),
        ]
    }
}

pub async fn node_ready(client: &kube::Client, name: &str) -> bool {
    let Ok(node) = Api::<Node>::all(client.clone()).get(name).await else {
        return false;
    };
    node.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// A certificate file's NotAfter.
pub fn not_after(path: &Path) -> SystemTime {
    let text = std::fs::read_to_string(path).expect("a certificate file");
    let der = rustls::pki_types::CertificateDer::pem_slice_iter(text.as_bytes())
        .next()
        .expect("a certificate")
        .expect("PEM");
    let (_, parsed) = x509_parser::parse_x509_certificate(&der).expect("X.509");
    let seconds = u64::try_from(parsed.validity().not_after.timestamp()).expect("after 1970");
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

/// Approves `csr` as a cluster administrator does (`kubectl certificate approve`).
pub async fn approve(csrs: &Api<CertificateSigningRequest>, csr: &CertificateSigningRequest) {
    let name = csr.metadata.name.clone().expect("a named CSR");
    let approval = json!({"status": {"conditions": [{"type": "Approved", "status": "True",
        "reason": "NodepulseTestApproved", "message": "approved by the test"}]}});
    csrs.patch_approval(&name, &PatchParams::default(), &Patch::Merge(&approval))
        .await
        .expect("approved");
}
