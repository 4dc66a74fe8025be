//! A fake of the API objects port (`VolumeSourceApi`): ConfigMaps and Secrets a test sets and
//! changes while actors run, answered as the API server would (404 for a missing one); tokens
//! refused unless a test scripts their answers.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use tokio::time::Instant;

use crate::{
    ports::{ApiError, ApiResult},
    volume_manager::VolumeSourceApi,
    volume_manager::content::{TokenSpec, token::IssuedToken},
};

/// ConfigMaps by name (any namespace); clones share them.
#[derive(Clone, Default)]
pub struct FakeObjects {
    config_maps: Arc<Mutex<BTreeMap<String, BTreeMap<String, String>>>>,
    secrets: Arc<Mutex<BTreeMap<String, Secret>>>,
    tokens: Arc<Mutex<TokenAnswers>>,
    reads: Arc<Mutex<SlowReads>>,
}

/// How long a ConfigMap read takes, and how many were being read at once.
#[derive(Default)]
struct SlowReads {
    taking: Duration,
    now: usize,
    most: usize,
}

/// One ConfigMap read under way, counted until its future ends or is dropped.
struct Reading(Arc<Mutex<SlowReads>>);

impl Reading {
    fn start(reads: &Arc<Mutex<SlowReads>>) -> Self {
        let mut counts = reads.lock().unwrap_or_else(PoisonError::into_inner);
        counts.now += 1;
        counts.most = counts.most.max(counts.now);
        Self(Arc::clone(reads))
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).now -= 1;
    }
}

/// How TokenRequests are answered, and when each came.
#[derive(Default)]
struct TokenAnswers {
    /// Whether a request past `refusals` is granted (else refused: no tokens here).
    granting: bool,
    refusals: VecDeque<ApiError>,
    asked: Vec<Instant>,
}

impl FakeObjects {
    /// Answers the next TokenRequests with `refusals`, one each, and grants every one after.
    pub fn grant_tokens_after(&self, refusals: Vec<ApiError>) {
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        tokens.granting = true;
        tokens.refusals = refusals.into();
    }

    /// When each TokenRequest came, from `start`.
    pub fn tokens_asked_after(&self, start: Instant) -> Vec<Duration> {
        let tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        tokens
            .asked
            .iter()
            .map(|at| at.duration_since(start))
            .collect()
    }
}

impl FakeObjects {
    /// Each ConfigMap read from now on answers after `taking` (tokio time).
    pub fn read_config_maps_taking(&self, taking: Duration) {
        self.reads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .taking = taking;
    }

    /// The most ConfigMap reads that were under way at once.
    pub fn most_config_map_reads_at_once(&self) -> usize {
        self.reads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .most
    }

    /// Creates or replaces the ConfigMap `name` with `data`.
    pub fn set_config_map(&self, name: &str, data: &[(&str, &str)]) {
        let data = data
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        self.config_maps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), data);
    }
}

impl FakeObjects {
    /// Creates or replaces the Secret `name`.
    pub fn set_secret(&self, name: &str, secret: Secret) {
        self.secrets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), secret);
    }
}

impl VolumeSourceApi for FakeObjects {
    fn get_config_map(&self, _: &str, name: &str) -> BoxFuture<'static, ApiResult<ConfigMap>> {
        let found = self
            .config_maps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned();
        let name = name.to_owned();
        let reading = Reading::start(&self.reads);
        let taking = reading
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .taking;
        Box::pin(async move {
            if !taking.is_zero() {
                tokio::time::sleep(taking).await;
            }
            drop(reading);
            found
                .map(|data| ConfigMap {
                    data: Some(data),
                    ..ConfigMap::default()
                })
                .ok_or(ApiError::NotFound(format!("configmaps {name:?} not found")))
        })
    }
    fn get_secret(&self, _: &str, name: &str) -> BoxFuture<'static, ApiResult<Secret>> {
        let found = self
            .secrets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned();
        let name = name.to_owned();
        Box::pin(
            async move { found.ok_or(ApiError::NotFound(format!("secrets {name:?} not found"))) },
        )
    }
    fn request_token(&self, _: &TokenSpec) -> BoxFuture<'static, ApiResult<IssuedToken>> {
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        tokens.asked.push(Instant::now());
        let answer = match tokens.refusals.pop_front() {
            Some(refusal) => Err(refusal),
            None if tokens.granting => Ok(IssuedToken {
                token: "granted".into(),
                issued_at: Timestamp::UNIX_EPOCH,
                expires_at: Timestamp::MAX,
            }),
            None => Err(ApiError::NotFound("no tokens here".into())),
        };
        Box::pin(async move { answer })
    }
}
