//! Certificate rotation, as the kubelet's certificate manager does it for the client
//! certificate (`rotateCertificates: true`) and the serving certificate (`serverTLSBootstrap:
//! true`): sleep until a jittered 70–90 % of the certificate's lifetime (at once when there is
//! none, or it no longer satisfies the template), ask for a new one with a fresh key (retrying
//! 2 s ×2 for 5 steps, then every 32 s), store it and install it. The serving template follows
//! the Node's addresses, checked every second: a change the certificate does not cover asks
//! anew, abandoning the wait on a CSR for the old addresses. A new client certificate closes
//! the connections made with the old one; while it has expired, the bootstrap credentials
//! (when there are some) make the request instead, and an expired client certificate while
//! the API server answers ends the run, as the kubelet exits, so a restart bootstraps afresh.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::NodeAddress;
use nodepulse_actors::kubelet_metrics::{Certificate, Expiry, KUBELET_METRICS};

use super::certified::{InstallError, SwappableCertificate};
use super::identity::ClientIdentity;
use super::lifetime::{Validity, rotation_deadline};
use super::request::{Issued, ROTATION_WAIT, RequestError, RequestKey, request_certificate};
use super::serving::ServingIdentity;
use super::store::{CertificateStore, StoreError};
use super::template::{Purpose, Template};
use crate::apiserver_client::KubeApi;

/// The retries of one rotation: 2 s doubling, 5 steps, jitter 0.1; then every 32 s.
const FIRST_RETRY: Duration = Duration::from_secs(2);
const RETRY_STEPS: u32 = 5;
const RETRY_FOREVER: Duration = Duration::from_secs(32);
/// How often the client certificate in use is checked against the clock (`transport.go`).
const EXPIRY_CHECK: Duration = Duration::from_secs(10);
/// How often a template that follows the Node is looked at again (the manager's 1 s loop).
const TEMPLATE_CHECK: Duration = Duration::from_secs(1);

/// `transport.go`'s verdict: the run ends when no valid certificate is left and the last
/// rotation attempt says the API server answers.
pub fn must_exit(validity: Option<Validity>, now: SystemTime, server_responsive: bool) -> bool {
    validity.is_none_or(|v| v.expired_at(now)) && server_responsive
}

/// The wait before retry `attempt` (0-based) with `uniform` in [0, 1) as the jitter's draw.
pub fn retry_delay(attempt: u32, uniform: f64) -> Duration {
    if attempt >= RETRY_STEPS {
        return RETRY_FOREVER;
    }
    FIRST_RETRY
        .saturating_mul(1 << attempt)
        .mul_f64(1.0 + 0.1 * uniform.clamp(0.0, 1.0))
}

/// The last node addresses observed (the kubelet's `getLastObservedNodeAddresses`).
pub type NodeAddresses = Arc<dyn Fn() -> Vec<NodeAddress> + Send + Sync>;

/// The certificate a rotation keeps fresh.
pub enum Rotated {
    /// The client certificate every connection presents.
    Client(Arc<ClientIdentity>),
    /// The kubelet API's serving certificate, for the Node's addresses.
    Serving {
        identity: Arc<ServingIdentity>,
        addresses: NodeAddresses,
    },
}

impl Rotated {
    fn purpose(&self) -> Purpose {
        match self {
            Self::Client(_) => Purpose::Client,
            Self::Serving { .. } => Purpose::Serving,
        }
    }

    fn held(&self) -> &SwappableCertificate {
        match self {
            Self::Client(identity) => identity.certificate(),
            Self::Serving { identity, .. } => identity.certificate(),
        }
    }

    /// What a request asks for now; `None` while the serving template has no IP.
    fn template(&self, node_name: &str) -> Option<Template> {
        match self {
            Self::Client(_) => Some(Template::client(node_name)),
            Self::Serving { addresses, .. } => Template::serving(node_name, &addresses()),
        }
    }

    /// Which certificate it is, for the kubelet's `/metrics`.
    fn kind(&self) -> Certificate {
        match self {
            Self::Client(_) => Certificate::Client,
            Self::Serving { .. } => Certificate::Serving,
        }
    }

    /// When the certificate held at the time of asking expires.
    fn expiry(&self) -> Expiry {
        match self {
            Self::Client(identity) => {
                let identity = Arc::clone(identity);
                Arc::new(move || Some(identity.certificate().validity()?.not_after))
            }
            Self::Serving { identity, .. } => {
                let identity = Arc::clone(identity);
                Arc::new(move || Some(identity.certificate().validity()?.not_after))
            }
        }
    }

    /// Whether the template can change while the certificate lives (`dynamicTemplate`).
    fn follows_the_node(&self) -> bool {
        matches!(self, Self::Serving { .. })
    }

    fn install(&self, issued: &super::store::StoredPair) -> Result<(), InstallError> {
        match self {
            Self::Client(identity) => identity.install(issued),
            Self::Serving { identity, .. } => identity.install(issued),
        }
    }
}

/// Why an issued certificate was not put to use; the next attempt asks for another.
#[derive(Debug, thiserror::Error)]
enum UnusedError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Install(#[from] InstallError),
}

/// What rotation needs.
pub struct Rotation {
    pub api: Arc<KubeApi>,
    pub certificate: Rotated,
    pub store: CertificateStore,
    pub node_name: String,
    /// The bootstrap kubeconfig, for when no valid client certificate is left.
    pub bootstrap_kubeconfig: Option<std::path::PathBuf>,
    /// What the last rotation attempt said of the API server (`serverHealth`; false until one).
    pub server_responsive: AtomicBool,
}

impl Rotation {
    /// Rotates for as long as the daemon runs; returns only when the client certificate in
    /// use has expired while the API server answers (the daemon then exits).
    pub async fn run(self) {
        // The kubelet registers the TTL gauge and the renewal error counter with the manager.
        KUBELET_METRICS.rotating(self.certificate.kind(), self.certificate.expiry());
        if self.certificate.follows_the_node() {
            return self.rotate_forever().await;
        }
        tokio::select! {
            () = self.rotate_forever() => {}
            () = self.until_expired_while_responsive() => {}
        }
    }

    async fn until_expired_while_responsive(&self) {
        let mut said = false;
        loop {
            tokio::time::sleep(EXPIRY_CHECK).await;
            let validity = self.certificate.held().validity();
            let responsive = self.server_responsive.load(Ordering::SeqCst);
            if must_exit(validity, SystemTime::now(), responsive) {
                tracing::error!(
                    "The currently active client certificate has expired and the server is responsive, exiting."
                );
                return;
            }
            if !said && validity.is_none_or(|v| v.expired_at(SystemTime::now())) {
                said = true;
                tracing::error!(
                    "The currently active client certificate has expired, but the server is not responsive. A restart may be necessary to retrieve new initial credentials."
                );
            }
        }
    }

    /// `certSatisfiesTemplate`: a certificate is held and has what `template` asks for (any
    /// certificate does while there is no template).
    fn satisfies(&self, template: Option<&Template>) -> bool {
        self.certificate
            .held()
            .leaf()
            .is_some_and(|leaf| template.is_none_or(|t| t.satisfied_by(&leaf)))
    }

    /// The template check's verdict: the certificate no longer covers what the Node asks for,
    /// and the last request asked for something else too.
    fn template_changed(&self, last_requested: Option<&Template>) -> bool {
        let template = self.certificate.template(&self.node_name);
        !self.satisfies(template.as_ref()) && template.as_ref() != last_requested
    }

    /// `nextRotationDeadline`: none (now) without a satisfying certificate.
    fn next_deadline(&self) -> Option<SystemTime> {
        let template = self.certificate.template(&self.node_name);
        if !self.satisfies(template.as_ref()) {
            return None;
        }
        let validity = self.certificate.held().validity()?;
        let deadline = rotation_deadline(&validity, rand::random::<f64>());
        tracing::info!(
            signer = self.certificate.purpose().signer(),
            expiration = %jiff_time(validity.not_after),
            deadline = %jiff_time(deadline),
            "Certificate rotation deadline determined"
        );
        Some(deadline)
    }

    async fn rotate_forever(&self) {
        let mut last_requested = None;
        loop {
            let wait = self
                .next_deadline()
                .and_then(|deadline| deadline.duration_since(SystemTime::now()).ok())
                .filter(|wait| !wait.is_zero());
            if let Some(wait) = wait {
                tracing::info!(sleep = ?wait, "Waiting for next certificate rotation");
                if !self
                    .sleep_unless_template_changes(wait, &last_requested)
                    .await
                {
                    if !self.template_changed(last_requested.as_ref()) {
                        continue;
                    }
                    tracing::info!("Certificate template changed, rotating");
                }
            }
            // No template yet (a Node without an IP): no request, and no backoff either.
            if self.certificate.template(&self.node_name).is_none() {
                tokio::time::sleep(TEMPLATE_CHECK).await;
                continue;
            }
            self.rotate(&mut last_requested).await;
        }
    }

    /// Sleeps `wait`; true when it did, false when a template change cut it short.
    async fn sleep_unless_template_changes(
        &self,
        wait: Duration,
        last_requested: &Option<Template>,
    ) -> bool {
        if !self.certificate.follows_the_node() {
            tokio::time::sleep(wait).await;
            return true;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => true,
            () = self.until_template_changed(last_requested.as_ref()) => false,
        }
    }

    async fn until_template_changed(&self, last_requested: Option<&Template>) {
        loop {
            tokio::time::sleep(TEMPLATE_CHECK).await;
            if self.template_changed(last_requested) {
                return;
            }
        }
    }

    /// One rotation, retried until it succeeds.
    async fn rotate(&self, last_requested: &mut Option<Template>) {
        let purpose = self.certificate.purpose();
        let mut attempt = 0;
        loop {
            match self.request(last_requested).await {
                Some(Ok(issued)) => {
                    self.server_responsive.store(true, Ordering::SeqCst);
                    let stored = self.store.update(
                        &issued.certificate_pem,
                        &issued.key_pem,
                        SystemTime::now(),
                    );
                    match stored
                        .map_err(UnusedError::from)
                        .and_then(|pair| self.certificate.install(&pair).map_err(UnusedError::from))
                    {
                        Ok(()) => {
                            match purpose {
                                Purpose::Client => tracing::info!(
                                    "Certificate rotation detected, shutting down client connections to start using new credentials"
                                ),
                                Purpose::Serving => tracing::info!(
                                    certificate = %self.store.current_path().display(),
                                    "serving certificate issued; new TLS handshakes of the kubelet API use it"
                                ),
                            }
                            return;
                        }
                        Err(error) => {
                            tracing::error!(%error, "cannot store or use the rotated {}", purpose.noun());
                        }
                    }
                }
                Some(Err(error)) => {
                    (KUBELET_METRICS.renew_errors(self.certificate.kind())).inc(&[]);
                    self.server_responsive
                        .store(error.server_responsive(), Ordering::SeqCst);
                    tracing::warn!(%error, "{} rotation failed", purpose.noun());
                }
                None => tracing::info!("Certificate template changed, rotating"),
            }
            if attempt == RETRY_STEPS {
                tracing::warn!("Reached backoff limit, still unable to rotate certs");
            }
            tokio::time::sleep(retry_delay(attempt, rand::random::<f64>())).await;
            attempt = attempt.saturating_add(1);
        }
    }

    /// One request for the template as it is now; `None` when the Node's addresses changed
    /// while it waited (the wait on a CSR nobody needs any more is abandoned).
    async fn request(
        &self,
        last_requested: &mut Option<Template>,
    ) -> Option<Result<Issued, RequestError>> {
        let purpose = self.certificate.purpose();
        let Some(template) = self.certificate.template(&self.node_name) else {
            return Some(Err(RequestError::NoTemplate));
        };
        let client = self.requesting_client().await;
        *last_requested = Some(template.clone());
        let request =
            request_certificate(client, purpose, &template, RequestKey::Fresh, ROTATION_WAIT);
        if !self.certificate.follows_the_node() {
            return Some(request.await);
        }
        tokio::select! {
            outcome = request => Some(outcome),
            () = self.until_template_changed(Some(&template)) => None,
        }
    }

    /// The node's client while its certificate is valid; the bootstrap one after.
    async fn requesting_client(&self) -> kube::Client {
        let expired = matches!(self.certificate, Rotated::Client(_))
            && self
                .certificate
                .held()
                .validity()
                .is_none_or(|v| v.expired_at(SystemTime::now()));
        if expired && let Some(path) = &self.bootstrap_kubeconfig {
            match super::bootstrap::bootstrap_client(path).await {
                Ok(client) => return client,
                Err(error) => tracing::warn!(%error, "cannot use the bootstrap credentials"),
            }
        }
        self.api.main_client_handle().await
    }
}

fn jiff_time(at: SystemTime) -> String {
    jiff::Timestamp::try_from(at).map_or_else(|_| format!("{at:?}"), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_expired_certificate_with_a_responsive_server_ends_the_run() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let valid = Validity {
            not_before: now - Duration::from_secs(60),
            not_after: now + Duration::from_secs(60),
        };
        let expired = Validity {
            not_after: now - Duration::from_secs(1),
            ..valid
        };
        assert!(!must_exit(Some(valid), now, true));
        assert!(!must_exit(Some(expired), now, false));
        assert!(must_exit(Some(expired), now, true));
        assert!(must_exit(None, now, true));
    }

    #[test]
    fn retries_double_from_two_seconds_then_wait_32_seconds() {
        let delays: Vec<u64> = (0..7).map(|a| retry_delay(a, 0.0).as_secs()).collect();
        assert_eq!(delays, [2, 4, 8, 16, 32, 32, 32]);
        assert_eq!(retry_delay(0, 0.999).as_millis(), 2199);
    }
}
