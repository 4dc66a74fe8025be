//! A small time-bounded cache for review answers (the kubelet caches TokenReviews for
//! `cacheTTL`, SubjectAccessReviews for `cacheAuthorizedTTL`/`cacheUnauthorizedTTL`). Keys are
//! SHA-256 digests, so no bearer token is held in memory longer than its request.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use tokio::time::Instant;

/// Entries kept at most; past it the expired ones go, then everything (a flood of distinct
/// tokens must not grow the heap without bound).
const CAPACITY: usize = 4096;

pub type Digest = [u8; 32];

pub fn digest(parts: &[&[u8]]) -> Digest {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        // Length-prefixed, so ("ab","c") and ("a","bc") differ.
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part);
    }
    let mut out = [0; 32];
    out.copy_from_slice(context.finish().as_ref());
    out
}

pub struct ReviewCache<T> {
    entries: Mutex<HashMap<Digest, (Instant, T)>>,
}

impl<T: Clone> Default for ReviewCache<T> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Clone> ReviewCache<T> {
    pub fn get(&self, key: &Digest) -> Option<T> {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match entries.get(key) {
            Some((expires, value)) if *expires > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    pub fn put(&self, key: Digest, value: T, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.len() >= CAPACITY {
            let now = Instant::now();
            entries.retain(|_, (expires, _)| *expires > now);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now() + ttl, value));
    }
}
