//! kube-controller-manager's csrapproving and csrsigning controllers for kubelet
//! certificates, as one watcher of the store: a pending `kube-apiserver-client-kubelet` CSR
//! that is a node client request is approved when its requester may ask for it (kubeadm's
//! bindings: `selfnodeclient` for `system:nodes` renewing their own name, `nodeclient` for the
//! kubeadm bootstrap token group or whoever else the configuration binds it to), then every
//! approved one of that signer or of
//! `kubelet-serving` (which only someone else approves, as upstream) is signed or marked
//! Failed.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError};

use super::authority::{ClusterCa, parse_request, signable_request};
use super::{
    KUBELET_CLIENT_SIGNER, KUBELET_SERVING_SIGNER, kubelet_client_refusal, kubelet_serving_refusal,
};
use crate::api::StoredKind;
use crate::api::resource::CERTIFICATE_SIGNING_REQUESTS;
use crate::store::{Change, EventType, ObjectKey, Store, meta_str};

/// The group kubeadm gives its bootstrap tokens, bound to the `nodeclient` approval.
pub const KUBEADM_BOOTSTRAP_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
/// The shortest certificate a requested `spec.expirationSeconds` gets (twice the backdate).
const MIN_REQUESTED: Duration = Duration::from_secs(600);

/// What the controllers need: the CA, `--cluster-signing-duration`, and the users and groups
/// the cluster's RBAC lets create `certificatesigningrequests/nodeclient` (the subjects the
/// approver's SubjectAccessReview says yes to).
pub struct Settings {
    pub ca: Arc<ClusterCa>,
    pub duration: Duration,
    pub node_client_requesters: Vec<String>,
}

/// Starts the controllers; they run until `shutdown` flips or its sender is gone.
pub fn spawn(
    store: Arc<Store>,
    signer: Settings,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let changes = store.subscribe_changes();
    tokio::spawn(run(store, signer, changes, shutdown))
}

async fn run(
    store: Arc<Store>,
    signer: Settings,
    mut changes: broadcast::Receiver<Arc<Change>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Ok(change) if change.kind == StoredKind::CertificateSigningRequest
                    && change.event_type != EventType::Deleted => {
                    handle(&store, &signer, meta_str(&change.object, "name"), SystemTime::now());
                }
                Ok(_) => {}
                // Missed changes: look at every request, as an informer's relist would.
                Err(RecvError::Lagged(_)) => {
                    let (all, _) = store.list(StoredKind::CertificateSigningRequest, None, |_| true);
                    for csr in all {
                        handle(&store, &signer, meta_str(&csr, "name"), SystemTime::now());
                    }
                }
                Err(RecvError::Closed) => return,
            },
            _ = shutdown.changed() => return,
        }
    }
}

/// Approves, then signs, the CSR named `name` as far as it goes now.
pub fn handle(store: &Store, signer: &Settings, name: &str, now: SystemTime) {
    let key = ObjectKey::new("", name);
    let Some(csr) = store.get(StoredKind::CertificateSigningRequest, &key) else {
        return;
    };
    if let Some(message) = approval(&csr, &signer.node_client_requesters) {
        let mut approved = (*csr).clone();
        let conditions = approved["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut conditions = conditions;
        conditions.push(json!({"type": "Approved", "status": "True",
            "reason": "AutoApproved", "message": message}));
        approved["status"]["conditions"] = conditions.into();
        if let Err(error) = store.update(
            &CERTIFICATE_SIGNING_REQUESTS,
            &key,
            Some("approval"),
            |_| Ok(approved.clone()),
        ) {
            tracing::warn!(name, message = %error.message, "cannot approve the CSR");
            return;
        }
    }
    let Some(csr) = store.get(StoredKind::CertificateSigningRequest, &key) else {
        return;
    };
    let Some(outcome) = signing(&csr, signer, now) else {
        return;
    };
    let mut signed = (*csr).clone();
    match outcome {
        Ok(certificate) => {
            use base64::Engine as _;
            signed["status"]["certificate"] = base64::engine::general_purpose::STANDARD
                .encode(certificate)
                .into();
        }
        Err(message) => {
            let mut conditions = signed["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            conditions.push(json!({"type": "Failed", "status": "True",
                "reason": "SignerValidationFailure", "message": message}));
            signed["status"]["conditions"] = conditions.into();
        }
    }
    if let Err(error) = store.update(&CERTIFICATE_SIGNING_REQUESTS, &key, Some("status"), |_| {
        Ok(signed.clone())
    }) {
        tracing::warn!(name, message = %error.message, "cannot write the CSR's certificate");
    }
}

fn conditions(csr: &Value) -> impl Iterator<Item = &str> {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        .filter_map(|c| c.get("type").and_then(Value::as_str))
}

fn request_bytes(csr: &Value) -> Vec<u8> {
    use base64::Engine as _;
    let request = csr
        .pointer("/spec/request")
        .and_then(Value::as_str)
        .unwrap_or("");
    base64::engine::general_purpose::STANDARD
        .decode(request)
        .unwrap_or_default()
}

fn spec_strings(csr: &Value, field: &str) -> Vec<String> {
    csr.pointer(&format!("/spec/{field}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// `sarApprover.handle`: the approval message when `csr` is to be auto-approved now;
/// `node_client_requesters` may have any node's client certificate (`nodeclient`).
fn approval(csr: &Value, node_client_requesters: &[String]) -> Option<&'static str> {
    let certificate = csr.pointer("/status/certificate").and_then(Value::as_str);
    if certificate.is_some_and(|c| !c.is_empty())
        || conditions(csr).any(|c| c == "Approved" || c == "Denied")
        || csr.pointer("/spec/signerName").and_then(Value::as_str) != Some(KUBELET_CLIENT_SIGNER)
    {
        return None;
    }
    let subject = parse_request(&request_bytes(csr)).ok()?;
    kubelet_client_refusal(&subject, &spec_strings(csr, "usages"))
        .is_none()
        .then_some(())?;
    let username = csr
        .pointer("/spec/username")
        .and_then(Value::as_str)
        .unwrap_or("");
    let groups = spec_strings(csr, "groups");
    let member = |group: &str| groups.iter().any(|g| g == group || g == "system:masters");
    // The SubjectAccessReviews kubeadm's ClusterRoleBindings answer yes to.
    if username == subject.common_name && member("system:nodes") {
        return Some("Auto approving self kubelet client certificate after SubjectAccessReview.");
    }
    let may_ask = node_client_requesters
        .iter()
        .any(|subject| *subject == username || member(subject));
    may_ask.then_some("Auto approving kubelet client certificate after SubjectAccessReview.")
}

/// `signer.handle` of `csrsigning-kubelet-client` and `csrsigning-kubelet-serving`: for an
/// approved, not failed, unsigned CSR of either signer, the certificate (PEM) or why the
/// signer refuses it.
fn signing(csr: &Value, signer: &Settings, now: SystemTime) -> Option<Result<String, String>> {
    let certificate = csr.pointer("/status/certificate").and_then(Value::as_str);
    let refusal = match csr.pointer("/spec/signerName").and_then(Value::as_str) {
        Some(KUBELET_CLIENT_SIGNER) => kubelet_client_refusal,
        Some(KUBELET_SERVING_SIGNER) => kubelet_serving_refusal,
        _ => return None,
    };
    if certificate.is_some_and(|c| !c.is_empty())
        || !conditions(csr).any(|c| c == "Approved")
        || conditions(csr).any(|c| c == "Failed")
    {
        return None;
    }
    let bytes = request_bytes(csr);
    let subject = parse_request(&bytes).ok()?;
    let usages = spec_strings(csr, "usages");
    if let Some(refusal) = refusal(&subject, &usages) {
        return Some(Err(refusal));
    }
    let request = signable_request(&bytes).ok()?;
    let ttl = requested_duration(
        signer.duration,
        csr.pointer("/spec/expirationSeconds")
            .and_then(Value::as_u64),
    );
    match signer.ca.sign(&request, &usages, ttl, now) {
        Ok(pem) => Some(Ok(pem)),
        Err(error) => {
            tracing::warn!(%error, "cannot sign the CSR");
            None
        }
    }
}

/// `signer.duration`: a requested duration is honoured below the signing duration, and
/// never under 10 minutes.
fn requested_duration(signing: Duration, expiration_seconds: Option<u64>) -> Duration {
    match expiration_seconds.map(Duration::from_secs) {
        None => signing,
        Some(requested) if requested > signing => signing,
        Some(requested) => requested.max(MIN_REQUESTED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificates::requests::prepare_create;
    use crate::config::User;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn request_pem(common_name: &str) -> String {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "system:nodes");
        params
            .serialize_request(&key)
            .and_then(|r| r.pem())
            .expect("a CSR")
    }

    fn create(store: &Store, name: &str, requester: &User, common_name: &str) {
        use base64::Engine as _;
        let mut csr = json!({"metadata": {"name": name}, "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(request_pem(common_name)),
            "signerName": KUBELET_CLIENT_SIGNER,
            "usages": ["digital signature", "client auth"]}});
        prepare_create(Some(requester), &mut csr);
        store
            .create(&CERTIFICATE_SIGNING_REQUESTS, csr, SystemTime::now())
            .expect("created");
    }

    fn signer() -> Settings {
        Settings {
            ca: Arc::new(ClusterCa::generate(SystemTime::now()).expect("CA")),
            duration: Duration::from_secs(3600),
            node_client_requesters: vec![KUBEADM_BOOTSTRAP_GROUP.into()],
        }
    }

    fn stored(store: &Store, name: &str) -> Arc<Value> {
        store
            .get(
                StoredKind::CertificateSigningRequest,
                &ObjectKey::new("", name),
            )
            .expect("stored")
    }

    fn bootstrapper(groups: &[&str]) -> User {
        User {
            name: "system:bootstrap:abcdef".into(),
            groups: groups.iter().map(|g| (*g).to_string()).collect(),
        }
    }

    #[test]
    fn kubeadm_bootstrap_requests_are_approved_and_signed() {
        let store = Store::new(100, 100);
        let groups = ["system:bootstrappers", KUBEADM_BOOTSTRAP_GROUP];
        create(&store, "a", &bootstrapper(&groups), "system:node:n1");
        handle(&store, &signer(), "a", SystemTime::now());
        let csr = stored(&store, "a");
        assert_eq!(csr["status"]["conditions"][0]["reason"], "AutoApproved");
        assert_eq!(
            csr["status"]["conditions"][0]["message"],
            "Auto approving kubelet client certificate after SubjectAccessReview."
        );
        assert!(
            csr["status"]["certificate"]
                .as_str()
                .is_some_and(|c| !c.is_empty())
        );
    }

    #[test]
    fn a_node_renewing_its_own_name_is_approved_as_self() {
        let store = Store::new(100, 100);
        create(&store, "a", &User::node("n1"), "system:node:n1");
        handle(&store, &signer(), "a", SystemTime::now());
        assert_eq!(
            stored(&store, "a")["status"]["conditions"][0]["message"],
            "Auto approving self kubelet client certificate after SubjectAccessReview."
        );
        create(&store, "b", &User::node("n1"), "system:node:n2");
        handle(&store, &signer(), "b", SystemTime::now());
        assert_eq!(
            stored(&store, "b")["status"],
            json!({}),
            "another node's name"
        );
    }

    #[test]
    fn a_service_account_bound_to_nodeclient_is_approved_and_others_wait() {
        let store = Store::new(100, 100);
        let account = |name: &str| User {
            name: format!("system:serviceaccount:kube-system:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:kube-system".into(),
                "system:authenticated".into(),
            ],
        };
        create(&store, "a", &account("nodepulse"), "system:node:n1");
        create(&store, "b", &account("other"), "system:node:n1");
        let mut settings = signer();
        settings
            .node_client_requesters
            .push("system:serviceaccount:kube-system:nodepulse".into());
        handle(&store, &settings, "a", SystemTime::now());
        handle(&store, &settings, "b", SystemTime::now());
        assert_eq!(
            stored(&store, "a")["status"]["conditions"][0]["message"],
            "Auto approving kubelet client certificate after SubjectAccessReview."
        );
        assert!(stored(&store, "a")["status"]["certificate"].is_string());
        assert_eq!(stored(&store, "b")["status"], json!({}), "not bound");
    }

    #[test]
    fn other_bootstrap_groups_wait_for_someone_to_approve() {
        let store = Store::new(100, 100);
        create(
            &store,
            "a",
            &bootstrapper(&["system:bootstrappers"]),
            "system:node:n1",
        );
        handle(&store, &signer(), "a", SystemTime::now());
        assert_eq!(stored(&store, "a")["status"], json!({}));
    }

    #[test]
    fn a_serving_request_waits_for_an_administrator_then_is_signed_with_its_sans() {
        use base64::Engine as _;
        let store = Store::new(100, 100);
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec!["n1".to_string()]).expect("params");
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress([192, 0, 2, 7].into()));
        params
            .distinguished_name
            .push(DnType::CommonName, "system:node:n1");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "system:nodes");
        let pem = params
            .serialize_request(&key)
            .and_then(|r| r.pem())
            .expect("a CSR");
        let mut csr = json!({"metadata": {"name": "s"}, "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": KUBELET_SERVING_SIGNER,
            "usages": ["digital signature", "server auth"]}});
        prepare_create(Some(&User::node("n1")), &mut csr);
        store
            .create(&CERTIFICATE_SIGNING_REQUESTS, csr, SystemTime::now())
            .expect("created");
        let signer = signer();
        handle(&store, &signer, "s", SystemTime::now());
        assert_eq!(
            stored(&store, "s")["status"],
            json!({}),
            "not auto-approved"
        );

        let mut approved = (*stored(&store, "s")).clone();
        approved["status"]["conditions"] = json!([{"type": "Approved", "status": "True",
            "reason": "AdminApproved", "message": "by hand"}]);
        store
            .update(
                &CERTIFICATE_SIGNING_REQUESTS,
                &ObjectKey::new("", "s"),
                Some("approval"),
                |_| Ok(approved.clone()),
            )
            .expect("approved");
        handle(&store, &signer, "s", SystemTime::now());
        let certificate = stored(&store, "s")["status"]["certificate"]
            .as_str()
            .map(|c| base64::engine::general_purpose::STANDARD.decode(c))
            .expect("signed")
            .expect("base64");
        let der = first_pem_der(&certificate);
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).expect("X.509");
        let sans = parsed
            .subject_alternative_name()
            .expect("parses")
            .expect("has SANs");
        let names: Vec<String> = sans
            .value
            .general_names
            .iter()
            .map(|n| format!("{n:?}"))
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.iter().any(|n| n.contains("n1")), "{names:?}");
        let server_auth = parsed
            .extended_key_usage()
            .expect("parses")
            .expect("has usages")
            .value
            .server_auth;
        assert!(server_auth);
    }

    /// The DER of the first PEM block of `pem`.
    fn first_pem_der(pem: &[u8]) -> Vec<u8> {
        use base64::Engine as _;
        let text = std::str::from_utf8(pem).expect("PEM text");
        let body: String = text
            .lines()
            .skip_while(|l| !l.starts_with("-----BEGIN"))
            .skip(1)
            .take_while(|l| !l.starts_with("-----END"))
            .collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .expect("base64")
    }

    #[test]
    fn requested_durations_are_capped_and_floored() {
        let year = Duration::from_secs(365 * 24 * 3600);
        assert_eq!(requested_duration(year, None), year);
        assert_eq!(requested_duration(year, Some(60)), MIN_REQUESTED);
        assert_eq!(
            requested_duration(year, Some(3600)),
            Duration::from_secs(3600)
        );
        let short = Duration::from_secs(120);
        assert_eq!(requested_duration(short, Some(3600)), short);
    }
}
