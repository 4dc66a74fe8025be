//! The renewal round against an in-memory Lease API with scripted failures.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::{api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::MicroTime};

use tokio::sync::watch;

use super::round::{RoundContext, RoundError, renew};
use crate::ports::{ApiError, ApiRecovery, ApiResult, LeaseApi, LeaseRenewal, RECOVERY_SPREAD};

#[derive(Default)]
pub(super) struct FakeState {
    lease: Option<Lease>,
    resource_version: u64,
    node_uid: Option<String>,
    /// Failures returned by the next calls of each kind, front first.
    renew_failures: VecDeque<ApiError>,
    get_failures: VecDeque<ApiError>,
    pub(super) renewals: Vec<LeaseRenewal>,
    pub(super) creates: u32,
    resets: u32,
    /// The recovery counter and unreachable flag `recovery()` subscribes to; none: never.
    reachability: Option<(watch::Receiver<u64>, watch::Receiver<bool>)>,
}

#[derive(Clone, Default)]
pub(super) struct FakeLeaseApi(Arc<Mutex<FakeState>>);

impl FakeLeaseApi {
    pub(super) fn with_node(uid: &str) -> Self {
        let fake = Self::default();
        fake.state().node_uid = Some(uid.to_owned());
        fake
    }

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.0.lock().expect("fake state")
    }

    fn stored(&self) -> Lease {
        self.state().lease.clone().expect("a stored lease")
    }
}

fn bump(state: &mut FakeState, lease: &mut Lease) {
    state.resource_version += 1;
    lease.metadata.resource_version = Some(state.resource_version.to_string());
}

impl LeaseApi for FakeLeaseApi {
    fn get_lease(&self, name: &str) -> BoxFuture<'static, ApiResult<Lease>> {
        let mut state = self.state();
        let result = match state.get_failures.pop_front() {
            Some(error) => Err(error),
            None => state
                .lease
                .clone()
                .ok_or_else(|| ApiError::NotFound(name.to_owned())),
        };
        Box::pin(async move { result })
    }

    fn create_lease(&self, mut lease: Lease) -> BoxFuture<'static, ApiResult<Lease>> {
        let mut state = self.state();
        state.creates += 1;
        let result = if state.lease.is_some() {
            Err(ApiError::AlreadyExists("lease".to_owned()))
        } else {
            bump(&mut state, &mut lease);
            state.lease = Some(lease.clone());
            Ok(lease)
        };
        Box::pin(async move { result })
    }

    fn renew_lease(&self, renewal: LeaseRenewal) -> BoxFuture<'static, ApiResult<Lease>> {
        let mut state = self.state();
        state.renewals.push(renewal.clone());
        let result = match state.renew_failures.pop_front() {
            Some(error) => Err(error),
            None => match state.lease.clone() {
                None => Err(ApiError::NotFound(renewal.name.clone())),
                Some(current)
                    if current.metadata.resource_version.as_deref()
                        != Some(renewal.resource_version.as_str()) =>
                {
                    Err(ApiError::Conflict(
                        "the object has been modified".to_owned(),
                    ))
                }
                Some(mut current) => {
                    let spec = current.spec.get_or_insert_with(Default::default);
                    spec.renew_time = Some(MicroTime(renewal.renew_time));
                    spec.lease_duration_seconds = Some(renewal.lease_duration_seconds);
                    if let Some(uid) = &renewal.owner_node_uid {
                        current.metadata.owner_references =
                            Some(vec![super::renewal::node_owner(&renewal.name, uid)]);
                    }
                    bump(&mut state, &mut current);
                    state.lease = Some(current.clone());
                    Ok(current)
                }
            },
        };
        Box::pin(async move { result })
    }

    fn node_uid(&self, node: &str) -> BoxFuture<'static, ApiResult<String>> {
        let result = self
            .state()
            .node_uid
            .clone()
            .ok_or_else(|| ApiError::NotFound(node.to_owned()));
        Box::pin(async move { result })
    }

    fn reset_heartbeat_connections(&self) {
        self.state().resets += 1;
    }

    fn recovery(&self) -> ApiRecovery {
        match &self.state().reachability {
            Some((recoveries, unreachable)) => {
                ApiRecovery::new(recoveries.clone(), unreachable.clone())
            }
            None => ApiRecovery::never(),
        }
    }
}

fn context(api: &FakeLeaseApi) -> RoundContext {
    RoundContext {
        api: Arc::new(api.clone()),
        node: "worker-1".to_owned(),
        lease_duration_seconds: 40,
        now: crate::clock::system(),
    }
}

fn renew_time(lease: &Lease) -> Timestamp {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.renew_time.as_ref())
        .map(|time| time.0)
        .expect("renewTime")
}

#[tokio::test]
async fn the_first_round_creates_an_owned_lease_and_the_next_renews_it() {
    let api = FakeLeaseApi::with_node("uid-1");
    let first = renew(context(&api), None, None).await;
    assert!(first.result.is_ok(), "{:?}", first.result);
    assert_eq!((first.writes, api.state().creates), (1, 1));
    let created = api.stored();
    assert_eq!(
        created
            .metadata
            .owner_references
            .as_ref()
            .map(|owners| owners[0].uid.clone()),
        Some("uid-1".to_owned())
    );

    let second = renew(context(&api), first.latest, first.node_uid).await;
    assert!(second.result.is_ok(), "{:?}", second.result);
    assert_eq!(second.writes, 1);
    let renewed = api.stored();
    assert!(
        renew_time(&renewed) > renew_time(&created),
        "renewTime moved forward"
    );
    assert_eq!(
        api.state().renewals[0].resource_version,
        "1",
        "the renewal was based on what was read"
    );
}

#[tokio::test]
async fn a_conflict_refreshes_the_base_and_retries_without_resetting_connections() {
    let api = FakeLeaseApi::with_node("uid-1");
    let first = renew(context(&api), None, None).await;
    let stale = first.latest.clone();
    // Someone else writes the lease: the cached copy is now stale.
    renew(context(&api), first.latest, first.node_uid).await;

    let outcome = renew(context(&api), stale, Some("uid-1".to_owned())).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(
        outcome.writes, 2,
        "one conflicting write, one that succeeded"
    );
    assert_eq!(api.state().resets, 0);
}

#[tokio::test]
async fn repeated_failures_reset_the_heartbeat_connections_from_the_second_attempt() {
    let api = FakeLeaseApi::with_node("uid-1");
    let first = renew(context(&api), None, None).await;
    api.state()
        .renew_failures
        .extend([ApiError::unavailable(), ApiError::unavailable()]);
    let outcome = renew(context(&api), first.latest, first.node_uid).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(outcome.writes, 3);
    assert_eq!(
        api.state().resets,
        1,
        "the 2nd consecutive failure resets, the 1st does not"
    );
}

#[tokio::test]
async fn five_failed_writes_end_the_round_with_an_error_and_fall_back_to_ensure() {
    let api = FakeLeaseApi::with_node("uid-1");
    let first = renew(context(&api), None, None).await;
    api.state()
        .renew_failures
        .extend((0..10).map(|_| ApiError::Timeout(std::time::Duration::from_secs(10))));
    let outcome = renew(context(&api), first.latest, first.node_uid).await;
    let error = outcome
        .result
        .expect_err("ten failures exceed both update loops");
    assert!(
        matches!(
            error,
            RoundError::Updates {
                attempts: 5,
                last: ApiError::Timeout(_)
            }
        ),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("failed 5 attempts to update lease"),
        "{error}"
    );
    assert_eq!(
        outcome.writes, 10,
        "five from the cached lease, five after ensure"
    );
    assert_eq!(api.state().resets, 8);
    assert!(
        outcome.latest.is_some(),
        "the lease read by ensure is kept for the next round"
    );
}

#[tokio::test(start_paused = true)]
async fn ensure_backs_off_200ms_doubling_while_the_lease_cannot_be_read() {
    let api = FakeLeaseApi::with_node("uid-1");
    api.state()
        .get_failures
        .extend((0..3).map(|_| ApiError::connection_refused()));
    let started = tokio::time::Instant::now();
    let outcome = renew(context(&api), None, None).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(
        started.elapsed(),
        std::time::Duration::from_millis(200 + 400 + 800)
    );
}

#[tokio::test(start_paused = true)]
async fn a_lease_is_never_created_before_the_node_uid_is_known() {
    let api = FakeLeaseApi::default();
    let pending = tokio::spawn(renew(context(&api), None, None));
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    assert_eq!(api.state().creates, 0, "no owner, no lease");
    api.state().node_uid = Some("uid-late".to_owned());
    let outcome = pending.await.expect("round");
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(outcome.node_uid.as_deref(), Some("uid-late"));
    assert_eq!(
        api.stored()
            .metadata
            .owner_references
            .map(|owners| owners[0].uid.clone()),
        Some("uid-late".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn ensure_waits_at_most_one_renew_interval_and_resets_connections_while_failing() {
    let api = FakeLeaseApi::with_node("uid-1");
    api.state()
        .get_failures
        .extend((0..8).map(|_| ApiError::connection_refused()));
    let mut short = context(&api);
    short.lease_duration_seconds = 4; // renewed every second
    let started = tokio::time::Instant::now();
    let outcome = renew(short, None, None).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    // 200 ms, 400 ms, 800 ms, then the 1 s renew interval five times (not 1.6 s … 7 s).
    assert_eq!(
        started.elapsed(),
        std::time::Duration::from_millis(200 + 400 + 800 + 5 * 1000)
    );
    assert_eq!(
        api.state().resets,
        7,
        "every failure but the first resets the heartbeat connections"
    );
}

#[tokio::test(start_paused = true)]
async fn the_api_servers_return_ends_the_ensure_backoff_at_once() {
    let (announce, recoveries) = watch::channel(0_u64);
    let (_down, unreachable) = watch::channel(true);
    let api = FakeLeaseApi::with_node("uid-1");
    api.state().reachability = Some((recoveries, unreachable));
    // Six refused GETs: waits of 0.2, 0.4, 0.8, 1.6 and 3.2 s, then 6.4 s from 6.2 s on.
    api.state()
        .get_failures
        .extend((0..6).map(|_| ApiError::Transport {
            message: "client error (Connect)".into(),
            source: std::sync::Arc::new(std::io::Error::other("client error (Connect)")),
        }));
    let started = tokio::time::Instant::now();
    let round = tokio::spawn(renew(context(&api), None, None));
    let back_after = std::time::Duration::from_secs(7);
    tokio::time::sleep(back_after).await;
    announce.send_modify(|count| *count += 1);
    let outcome = round.await.expect("the round ends");
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(
        api.state().creates,
        1,
        "the Lease was created once the API was back"
    );
    let took = started.elapsed();
    assert!(
        took <= back_after + RECOVERY_SPREAD,
        "the round ended {took:?} after it began; the backoff alone would have waited until 12.6 s"
    );
}
