//! A small time-bounded cache for review answers (the kubelet caches TokenReviews for
//! `cacheTTL`, SubjectAccessReviews for `cacheAuthorizedTTL`/`cacheUnauthorizedTTL`). Keys are
//! SHA-256 digests, so no bearer token is held in memory longer than its request. The kubelet's
//! cache grows without bound; this one holds [`CAPACITY`] answers and, when full, forgets the
//! one used least recently: a flood of distinct tokens evicts its own answers, not those of
//! the clients that keep coming back.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::Duration,
};

use tokio::time::Instant;

/// Answers kept at most.
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
    capacity: usize,
    entries: Mutex<Entries<T>>,
}

/// The answers by key, and the keys in the order they were last used.
struct Entries<T> {
    by_key: HashMap<Digest, Entry<T>>,
    by_use: BTreeMap<u64, Digest>,
    /// Counts uses: the last use of each entry is its place in `by_use`.
    uses: u64,
}

struct Entry<T> {
    expires: Instant,
    last_use: u64,
    value: T,
}

impl<T: Clone> Default for ReviewCache<T> {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

impl<T: Clone> ReviewCache<T> {
    fn with_capacity(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: Mutex::new(Entries {
                by_key: HashMap::new(),
                by_use: BTreeMap::new(),
                uses: 0,
            }),
        }
    }

    pub fn get(&self, key: &Digest) -> Option<T> {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Entries {
            by_key,
            by_use,
            uses,
        } = &mut *entries;
        let entry = by_key.get_mut(key)?;
        by_use.remove(&entry.last_use);
        if entry.expires <= Instant::now() {
            by_key.remove(key);
            return None;
        }
        *uses += 1;
        entry.last_use = *uses;
        by_use.insert(*uses, *key);
        Some(entry.value.clone())
    }

    pub fn put(&self, key: Digest, value: T, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Entries {
            by_key,
            by_use,
            uses,
        } = &mut *entries;
        if let Some(replaced) = by_key.remove(&key) {
            by_use.remove(&replaced.last_use);
        }
        while by_key.len() >= self.capacity {
            let Some((_, least_recent)) = by_use.pop_first() else {
                break;
            };
            by_key.remove(&least_recent);
        }
        *uses += 1;
        by_use.insert(*uses, key);
        by_key.insert(
            key,
            Entry {
                expires: Instant::now() + ttl,
                last_use: *uses,
                value,
            },
        );
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries
            .lock()
            .map(|entries| entries.by_key.len())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(60);

    fn key(n: u32) -> Digest {
        digest(&[&n.to_be_bytes()])
    }

    #[tokio::test(start_paused = true)]
    async fn when_full_only_the_least_recently_used_answer_goes() {
        let cache = ReviewCache::with_capacity(3);
        for n in 0..3 {
            cache.put(key(n), n, TTL);
        }
        assert_eq!(cache.get(&key(0)), Some(0), "0 is used again");
        cache.put(key(3), 3, TTL);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&key(1)), None, "1 was the least recently used");
        for n in [0, 2, 3] {
            assert_eq!(cache.get(&key(n)), Some(n));
        }
        // A flood of new keys, with 0 used between them: 0 stays.
        for n in 10..1_000 {
            assert_eq!(cache.get(&key(0)), Some(0), "before {n}");
            cache.put(key(n), n, TTL);
            assert!(cache.len() <= 3);
        }
        assert_eq!(cache.get(&key(0)), Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_lasts_its_ttl_and_a_new_one_replaces_it() {
        let cache = ReviewCache::default();
        cache.put(key(1), "allowed", TTL);
        cache.put(key(2), "denied", Duration::from_secs(30));
        cache.put(key(3), "never", Duration::ZERO);
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(cache.get(&key(1)), Some("allowed"));
        assert_eq!(cache.get(&key(2)), None, "past its TTL");
        assert_eq!(cache.get(&key(3)), None, "a zero TTL caches nothing");
        cache.put(key(1), "changed", TTL);
        assert_eq!(cache.get(&key(1)), Some("changed"));
        assert_eq!(cache.len(), 1);
        tokio::time::advance(TTL).await;
        assert_eq!(cache.get(&key(1)), None);
        assert_eq!(
            cache.len(),
            0,
            "an expired answer is dropped when asked for"
        );
    }
}
