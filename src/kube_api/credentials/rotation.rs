//! Client certificate rotation (`rotateCertificates: true`), as the kubelet's certificate
//! manager: sleep until a jittered 70–90 % of the certificate's lifetime, ask for a new one
//! with a fresh key (retrying 2 s ×2 for 5 steps, then every 32 s), store it and install it,
//! which closes the connections made with the old one. While the certificate in use has
//! expired, the bootstrap credentials (when there are some) make the request instead; an
//! expired certificate while the API server answers ends the run, as the kubelet exits, so a
//! restart bootstraps afresh.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use super::identity::ClientIdentity;
use super::lifetime::{Validity, rotation_deadline};
use super::request::{ROTATION_WAIT, request_client_certificate};
use super::store::CertificateStore;
use crate::kube_api::KubeApi;

/// The retries of one rotation: 2 s doubling, 5 steps, jitter 0.1; then every 32 s.
const FIRST_RETRY: Duration = Duration::from_secs(2);
const RETRY_STEPS: u32 = 5;
const RETRY_FOREVER: Duration = Duration::from_secs(32);
/// How often the certificate in use is checked against the clock (`transport.go`).
const EXPIRY_CHECK: Duration = Duration::from_secs(10);

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

/// What rotation needs.
pub struct Rotation {
    pub api: Arc<KubeApi>,
    pub identity: Arc<ClientIdentity>,
    pub store: CertificateStore,
    pub node_name: String,
    /// The bootstrap kubeconfig, for when no valid certificate is left.
    pub bootstrap_kubeconfig: Option<std::path::PathBuf>,
    /// What the last rotation attempt said of the API server (`serverHealth`; false until one).
    pub server_responsive: AtomicBool,
}

impl Rotation {
    /// Rotates for as long as the daemon runs; returns only when the certificate in use has
    /// expired while the API server answers (the daemon then exits).
    pub async fn run(self) {
        tokio::select! {
            () = self.rotate_forever() => {}
            () = self.until_expired_while_responsive() => {}
        }
    }

    async fn until_expired_while_responsive(&self) {
        let mut said = false;
        loop {
            tokio::time::sleep(EXPIRY_CHECK).await;
            let validity = self.identity.validity();
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

    async fn rotate_forever(&self) {
        loop {
            let Some(validity) = self.identity.validity() else {
                return;
            };
            let deadline = rotation_deadline(&validity, rand::random::<f64>());
            let wait = deadline
                .duration_since(SystemTime::now())
                .unwrap_or_default();
            tracing::info!(
                expiration = %jiff_time(validity.not_after),
                deadline = %jiff_time(deadline),
                "Certificate rotation deadline determined"
            );
            tracing::info!(sleep = ?wait, "Waiting for next certificate rotation");
            tokio::time::sleep(wait).await;
            self.rotate().await;
        }
    }

    /// One rotation, retried until it succeeds.
    async fn rotate(&self) {
        let mut attempt = 0;
        loop {
            let client = self.requesting_client().await;
            match request_client_certificate(client, &self.node_name, ROTATION_WAIT).await {
                Ok(issued) => {
                    self.server_responsive.store(true, Ordering::SeqCst);
                    let stored = self.store.update(
                        &issued.certificate_pem,
                        &issued.key_pem,
                        SystemTime::now(),
                    );
                    match stored
                        .map_err(|e| e.to_string())
                        .and_then(|pair| self.identity.install(&pair))
                    {
                        Ok(()) => {
                            tracing::info!(
                                "Certificate rotation detected, shutting down client connections to start using new credentials"
                            );
                            return;
                        }
                        Err(error) => {
                            tracing::error!(%error, "cannot store or use the rotated client certificate");
                        }
                    }
                }
                Err(error) => {
                    self.server_responsive
                        .store(error.server_responsive(), Ordering::SeqCst);
                    tracing::warn!(%error, "client certificate rotation failed");
                }
            }
            if attempt == RETRY_STEPS {
                tracing::warn!("Reached backoff limit, still unable to rotate certs");
            }
            tokio::time::sleep(retry_delay(attempt, rand::random::<f64>())).await;
            attempt = attempt.saturating_add(1);
        }
    }

    /// The node's client while its certificate is valid; the bootstrap one after.
    async fn requesting_client(&self) -> kube::Client {
        let expired = self
            .identity
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
