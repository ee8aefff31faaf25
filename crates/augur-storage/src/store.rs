//! The key -> entry map, its version counter and the incremental garbage collector.

use crate::entry::{KeyEntry, Version};
use crate::index::{KeyIndex, hash_key};
use augur_types::{Key, Timestamp};
use std::fmt;

/// One key and its entry, stored side by side so that confirming a lookup and reading the newest
/// version touch the same one or two cache lines.
#[derive(Clone)]
struct Slot<M> {
    key: Key,
    entry: KeyEntry<M>,
}

/// An entry handed out by `&mut` and the version count it had then. The caller may add or drop
/// versions through that reference without the store seeing it; the difference is folded into
/// the store's counter on the next `&mut self` call (by which time the borrow has ended), and
/// [`MvStore::version_count`] adds it on the fly meanwhile. Only one entry can be lent at a time
/// because the borrow is exclusive, so one record suffices.
#[derive(Clone, Copy)]
struct Lent {
    slot: usize,
    versions: usize,
}

/// What one [`MvStore::collect_garbage`] call did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GcStats {
    /// Keys whose chains were examined.
    pub keys_examined: usize,
    /// Committed versions dropped.
    pub versions_dropped: usize,
}

/// An in-memory multi-version store: for every key, a [`KeyEntry`] with its version chain and the
/// protocol's per-key metadata `M`.
///
/// Entries live in a dense vector in the order their keys were first seen and are found through
/// a compact hash index; see the crate documentation for the layout. Keys are never removed (a
/// deleted key keeps its tombstone version), which keeps slot numbers stable and the index free
/// of deletion markers.
#[derive(Clone)]
pub struct MvStore<M = ()> {
    slots: Vec<Slot<M>>,
    index: KeyIndex,
    /// Total versions across all entries, except for the change made through `lent`.
    versions: usize,
    lent: Option<Lent>,
    /// Slot where the next garbage-collection call starts.
    gc_cursor: usize,
}

impl<M> Default for MvStore<M> {
    fn default() -> Self {
        MvStore::new()
    }
}

impl<M> fmt::Debug for MvStore<M> {
    /// A summary only: a store may hold millions of keys.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MvStore")
            .field("keys", &self.key_count())
            .field("versions", &self.version_count())
            .finish()
    }
}

impl<M> MvStore<M> {
    /// An empty store.
    pub fn new() -> Self {
        MvStore {
            slots: Vec::new(),
            index: KeyIndex::default(),
            versions: 0,
            lent: None,
            gc_cursor: 0,
        }
    }

    /// An empty store that holds `keys` keys without reallocating (useful before bulk loading:
    /// it avoids growing the entry vector to up to twice the needed size).
    pub fn with_capacity(keys: usize) -> Self {
        MvStore {
            slots: Vec::with_capacity(keys),
            index: KeyIndex::with_capacity(keys),
            versions: 0,
            lent: None,
            gc_cursor: 0,
        }
    }

    /// Folds the change made through the last lent entry into the version counter.
    fn settle(&mut self) {
        if let Some(lent) = self.lent.take() {
            self.versions =
                self.versions - lent.versions + self.slots[lent.slot].entry.version_count();
        }
    }

    /// Records that `slot` is about to be lent out by `&mut`.
    fn lend(&mut self, slot: usize) -> &mut KeyEntry<M> {
        let entry = &mut self.slots[slot].entry;
        self.lent = Some(Lent {
            slot,
            versions: entry.version_count(),
        });
        entry
    }

    fn find(&self, key: &Key, hash: u64) -> Option<usize> {
        self.index.find(hash, |slot| self.slots[slot].key == *key)
    }

    /// The entry for `key`, if the key has ever been written or its entry created.
    pub fn get(&self, key: &Key) -> Option<&KeyEntry<M>> {
        self.find(key, hash_key(key))
            .map(|slot| &self.slots[slot].entry)
    }

    /// Mutable access to the entry for `key`, if it exists.
    pub fn get_mut(&mut self, key: &Key) -> Option<&mut KeyEntry<M>> {
        self.settle();
        let slot = self.find(key, hash_key(key))?;
        Some(self.lend(slot))
    }

    /// Convenience: newest committed version <= snapshot.
    pub fn read_at(&self, key: &Key, snapshot: Timestamp) -> Option<&Version> {
        self.get(key)?.read_at(snapshot)
    }

    /// Number of keys (entries) held.
    pub fn key_count(&self) -> usize {
        self.slots.len()
    }

    /// Total versions held, committed and uncommitted, across all keys; O(1).
    pub fn version_count(&self) -> usize {
        match self.lent {
            Some(lent) => {
                self.versions - lent.versions + self.slots[lent.slot].entry.version_count()
            }
            None => self.versions,
        }
    }

    /// Incremental garbage collection: examine at most `max_keys` keys (continuing from where the
    /// previous call stopped, wrapping around) and, for each, drop every committed version older
    /// than the newest committed version with ts <= watermark (that one must stay: it is what a
    /// snapshot at the watermark reads). Never drop uncommitted versions. Returns stats (keys
    /// examined, versions dropped). Bounded work per call so the caller can run it from a
    /// periodic timer without stalling.
    ///
    /// A call examines each key at most once, so `max_keys >= key_count()` sweeps the whole
    /// store. The watermark must not exceed the oldest snapshot any reader may still use.
    pub fn collect_garbage(&mut self, watermark: Timestamp, max_keys: usize) -> GcStats {
        self.sweep(max_keys, |entry| entry.collect_garbage(watermark))
    }

    /// Incremental garbage collection like [`collect_garbage`](Self::collect_garbage), for
    /// snapshots that are not a timestamp bound: at each key examined, drop every committed
    /// version older than the newest committed version `visible` accepts (that one stays).
    /// `visible` must accept every version the oldest snapshot any reader may still use can
    /// read, and be monotone along that order of snapshots (a version visible to the oldest
    /// one is visible to every later one), so what any reader returns is kept.
    pub fn collect_garbage_where(
        &mut self,
        max_keys: usize,
        mut visible: impl FnMut(&Version) -> bool,
    ) -> GcStats {
        self.sweep(max_keys, |entry| entry.collect_garbage_where(&mut visible))
    }

    /// The incremental walk both collections share: `collect` on at most `max_keys` entries,
    /// from where the previous walk stopped (wrapping around), counting what it dropped.
    fn sweep(
        &mut self,
        max_keys: usize,
        mut collect: impl FnMut(&mut KeyEntry<M>) -> usize,
    ) -> GcStats {
        self.settle();
        let n = self.slots.len();
        let mut stats = GcStats::default();
        if n == 0 {
            return stats;
        }
        let mut cursor = self.gc_cursor % n;
        for _ in 0..max_keys.min(n) {
            stats.versions_dropped += collect(&mut self.slots[cursor].entry);
            stats.keys_examined += 1;
            cursor += 1;
            if cursor == n {
                cursor = 0;
            }
        }
        self.gc_cursor = cursor;
        self.versions -= stats.versions_dropped;
        stats
    }

    /// Bytes of one entry slot (key, chain and metadata), for tests of the layout.
    #[cfg(test)]
    pub(crate) const SLOT_BYTES: usize = std::mem::size_of::<Slot<M>>();

    /// Buckets in the key index, for tests of its sizing.
    #[cfg(test)]
    pub(crate) fn index_bucket_count(&self) -> usize {
        self.index.bucket_count()
    }

    /// Iterate keys and entries (order unspecified but deterministic for the same sequence of
    /// operations; currently the order in which keys were first added).
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &KeyEntry<M>)> {
        self.slots.iter().map(|s| (&s.key, &s.entry))
    }

    /// Drop every version of every key `which` picks (a replica replacing a partition's state
    /// by a copy). The keys stay, with no versions: a key is never removed.
    pub fn clear_where(&mut self, mut which: impl FnMut(&Key) -> bool) {
        self.settle();
        for slot in &mut self.slots {
            if which(&slot.key) {
                self.versions -= slot.entry.version_count();
                slot.entry.clear();
            }
        }
    }

    /// Every key's protocol metadata, mutably (to reset it, as after a crash).
    pub fn metas_mut(&mut self) -> impl Iterator<Item = &mut M> {
        self.slots.iter_mut().map(|s| &mut s.entry.meta)
    }
}

impl<M: Default> MvStore<M> {
    /// The entry for `key`, created empty (no versions, M::default()) if absent.
    pub fn entry(&mut self, key: &Key) -> &mut KeyEntry<M> {
        self.settle();
        let hash = hash_key(key);
        let slot = match self.find(key, hash) {
            Some(slot) => slot,
            None => {
                let slot = self.slots.len();
                self.slots.push(Slot {
                    key: key.clone(),
                    entry: KeyEntry::default(),
                });
                self.index.insert(hash, slot, self.slots.len());
                slot
            }
        };
        self.lend(slot)
    }
}
