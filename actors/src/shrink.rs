//! Maps that shrink back. A `HashMap` keeps its largest table after its entries go, so a node
//! whose pods were all deleted would hold their slots for good. After a removal, a map at most
//! a quarter full is shrunk to fit (an empty one frees its table); a quarter of its entries
//! must go again before the next shrink, so the cost stays amortised. A `BTreeMap` frees its
//! nodes as they empty but its root, a leaf with room for eleven entries (3.5 KiB for the
//! volume manager's mounts): an emptied one is replaced by a new map, which allocates nothing.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    hash::{BuildHasher, Hash},
};

/// Call after removing from `map`.
pub fn map_after_removal<K: Eq + Hash, V, S: BuildHasher>(map: &mut HashMap<K, V, S>) {
    if map.len() * 4 <= map.capacity() {
        map.shrink_to_fit();
    }
}

/// Call after removing from `set`.
pub fn set_after_removal<T: Eq + Hash, S: BuildHasher>(set: &mut HashSet<T, S>) {
    if set.len() * 4 <= set.capacity() {
        set.shrink_to_fit();
    }
}

/// Call after removing from `map`.
pub fn btree_map_after_removal<K, V>(map: &mut BTreeMap<K, V>) {
    if map.is_empty() {
        *map = BTreeMap::new();
    }
}

/// Call after removing from `set`.
pub fn btree_set_after_removal<T>(set: &mut BTreeSet<T>) {
    if set.is_empty() {
        *set = BTreeSet::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_map_frees_its_table_and_a_full_one_keeps_it() {
        // Room for 1,000, half of it used: one removal leaves it over a quarter full. (A
        // removal may leave a tombstone that costs one slot of capacity, so no exact compare.)
        let mut map: HashMap<u32, String> = HashMap::with_capacity(1000);
        map.extend((0..500).map(|n| (n, n.to_string())));
        let grown = map.capacity();
        map.remove(&0);
        map_after_removal(&mut map);
        assert!(map.capacity() >= 1000, "499 of {grown} left: no shrink");
        map.retain(|n, _| *n < 10);
        map_after_removal(&mut map);
        assert!(map.capacity() < grown / 4, "{} of {grown}", map.capacity());
        map.clear();
        map_after_removal(&mut map);
        assert_eq!(map.capacity(), 0);

        let mut set: HashSet<u32> = (0..100).collect();
        set.clear();
        set_after_removal(&mut set);
        assert_eq!(set.capacity(), 0);
    }
}
