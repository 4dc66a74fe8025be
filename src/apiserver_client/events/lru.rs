//! A least-recently-used map of bounded size, as `k8s.io/utils/lru` is to client-go's event
//! correlator: a read or a write makes an entry the newest; adding past the bound forgets the
//! oldest. Keys are the correlator's strings, kept once for both indexes (a few hundred bytes
//! each, thousands of them on a busy node); both operations are O(log n).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

pub struct Lru<V> {
    capacity: usize,
    entries: HashMap<Arc<str>, (V, u64)>,
    /// Entry keys by the tick of their last use, oldest first.
    by_use: BTreeMap<u64, Arc<str>>,
    tick: u64,
}

impl<V> Lru<V> {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            by_use: BTreeMap::new(),
            tick: 0,
        }
    }

    /// The entry under `key`, made the newest.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let (value, used) = self.entries.get_mut(key)?;
        let shared = self.by_use.remove(used).unwrap_or_else(|| key.into());
        self.tick += 1;
        *used = self.tick;
        self.by_use.insert(self.tick, shared);
        Some(value)
    }

    /// Removes the entry under `key` and hands it back (to be put back changed).
    pub fn take(&mut self, key: &str) -> Option<V> {
        let (value, used) = self.entries.remove(key)?;
        self.by_use.remove(&used);
        Some(value)
    }

    /// Sets `key` to `value`, the newest entry, forgetting the oldest when over the bound.
    pub fn put(&mut self, key: String, value: V) {
        self.tick += 1;
        // A replaced entry keeps its key's one allocation.
        let key: Arc<str> = match self.entries.remove_entry(key.as_str()) {
            Some((kept, (_, used))) => {
                self.by_use.remove(&used);
                kept
            }
            None => key.into(),
        };
        self.entries.insert(Arc::clone(&key), (value, self.tick));
        self.by_use.insert(self.tick, key);
        while self.entries.len() > self.capacity {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn adding_past_the_bound_forgets_the_least_recently_used() {
        let mut lru = Lru::new(2);
        lru.put("a".into(), 1);
        lru.put("b".into(), 2);
        assert_eq!(
            lru.get_mut("a"),
            Some(&mut 1),
            "reading a makes it the newest"
        );
        lru.put("c".into(), 3);
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.get_mut("b"), None, "b was the least recently used");
        assert_eq!(lru.get_mut("a"), Some(&mut 1));
        lru.put("a".into(), 4);
        assert_eq!(
            (lru.len(), lru.get_mut("a")),
            (2, Some(&mut 4)),
            "a put replaces"
        );
        assert_eq!(
            (lru.take("a"), lru.take("a"), lru.len()),
            (Some(4), None, 1)
        );
    }

    #[test]
    fn each_key_is_kept_once_for_both_indexes_through_reads_and_replacements() {
        use std::sync::Arc;
        let mut lru = Lru::new(4);
        lru.put("a".into(), 1);
        lru.put("b".into(), 2);
        lru.get_mut("a");
        lru.put("a".into(), 3);
        lru.put("c".into(), 4);
        lru.take("c");
        assert_eq!(lru.entries.len(), lru.by_use.len());
        for key in lru.by_use.values() {
            let (kept, _) = lru.entries.get_key_value(&**key).unwrap();
            assert!(Arc::ptr_eq(kept, key), "{key} allocated twice");
            assert_eq!(Arc::strong_count(key), 2, "{key}");
        }
    }
}
