//! Versions and the per-key version chain.

use augur_types::{Timestamp, TxnId, Value};
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

/// Where a version is in its writer's commit protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum VersionState {
    /// The writer has prepared (voted yes) and waits for the global outcome; readers must not
    /// see it yet, but protocols may wait on it or take a dependency on it.
    Prepared,
    /// Committed in this partition or data centre only (e.g. speculatively or before
    /// replication finished); not yet visible to plain snapshot reads.
    LocalCommitted,
    /// Globally committed: visible to every snapshot at or after its timestamp.
    Committed,
}

/// One version of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// The transaction that wrote this version.
    pub writer: TxnId,
    /// Commit timestamp once committed; for Prepared/LocalCommitted the proposed/local-commit timestamp.
    pub ts: Timestamp,
    /// Whether the version is committed, and if not, how far its writer has got.
    pub state: VersionState,
    /// None = the writer deleted the key (tombstone).
    pub value: Option<Value>,
}

/// Number of versions a chain holds without a heap allocation. Almost every key carries exactly
/// one committed version once garbage collection has caught up, so one inline slot covers the
/// common case while keeping the entry small.
const INLINE_VERSIONS: usize = 1;

/// Everything stored for one key: its version chain and the protocol's per-key metadata `M`
/// (e.g. last-reader timestamp, lock owner and waiters, read dependencies, snapshot queues) —
/// the store never interprets M.
///
/// The chain is one vector split in two regions: committed versions first, ascending by
/// timestamp (equal timestamps in commit order), then uncommitted versions in installation
/// order. A single vector rather than two keeps the entry at one inline version plus a length
/// word, and committing is a rotation of the slice between the two regions.
#[derive(Clone, Debug)]
pub struct KeyEntry<M> {
    /// `chain[..committed]` is the committed region, `chain[committed..]` the uncommitted one.
    chain: SmallVec<[Version; INLINE_VERSIONS]>,
    /// Length of the committed region. `u32` so that a small `meta` can share its word.
    committed: u32,
    /// Per-key protocol metadata; opaque to the store.
    pub meta: M,
}

impl<M: Default> Default for KeyEntry<M> {
    fn default() -> Self {
        KeyEntry::new(M::default())
    }
}

impl<M> KeyEntry<M> {
    /// An entry with no versions and the given metadata.
    pub fn new(meta: M) -> Self {
        KeyEntry {
            chain: SmallVec::new(),
            committed: 0,
            meta,
        }
    }

    fn committed_slice(&self) -> &[Version] {
        &self.chain[..self.committed as usize]
    }

    fn uncommitted_slice(&self) -> &[Version] {
        &self.chain[self.committed as usize..]
    }

    /// Absolute chain index of `writer`'s uncommitted version.
    fn uncommitted_index(&self, writer: TxnId) -> Option<usize> {
        let start = self.committed as usize;
        self.chain[start..]
            .iter()
            .position(|v| v.writer == writer)
            .map(|i| start + i)
    }

    /// Where a version committed at `ts` goes: after every committed version with ts <= `ts`,
    /// so that among equal timestamps the one committed last is the one readers see.
    fn committed_insert_pos(&self, ts: Timestamp) -> usize {
        let c = self.committed_slice();
        match c.last() {
            // Commits mostly arrive in timestamp order: skip the search.
            Some(last) if last.ts <= ts => c.len(),
            None => 0,
            Some(_) => c.partition_point(|v| v.ts <= ts),
        }
    }

    /// Newest committed version with ts <= snapshot.
    pub fn read_at(&self, snapshot: Timestamp) -> Option<&Version> {
        let c = self.committed_slice();
        match c.last() {
            // Most reads are of the newest version: answer without searching.
            Some(last) if last.ts <= snapshot => Some(last),
            None => None,
            Some(_) => {
                let n = c.partition_point(|v| v.ts <= snapshot);
                n.checked_sub(1).map(|i| &c[i])
            }
        }
    }

    /// Newest committed version (in version order) that `visible` accepts: for protocols whose
    /// snapshots are not a timestamp bound (VTS's vector of per-node counters, kept beside the
    /// store).
    pub fn read_where(&self, mut visible: impl FnMut(&Version) -> bool) -> Option<&Version> {
        self.committed_slice().iter().rev().find(|v| visible(v))
    }

    /// Newest committed version (highest ts).
    pub fn latest_committed(&self) -> Option<&Version> {
        self.committed_slice().last()
    }

    /// Versions that are not yet committed (Prepared or LocalCommitted), in installation order.
    pub fn uncommitted(&self) -> impl Iterator<Item = &Version> {
        self.uncommitted_slice().iter()
    }

    /// The uncommitted version written by `writer`, if any.
    pub fn uncommitted_by(&self, writer: TxnId) -> Option<&Version> {
        self.uncommitted_slice().iter().find(|v| v.writer == writer)
    }

    /// All versions, committed ones ascending by ts, then uncommitted (for debugging/tests).
    pub fn versions(&self) -> impl Iterator<Item = &Version> {
        self.chain.iter()
    }

    /// Add an uncommitted version (state Prepared or LocalCommitted). A writer has at most one
    /// uncommitted version per key: installing again replaces its previous one (value, ts, state).
    ///
    /// A replaced version keeps its place in installation order.
    ///
    /// # Panics
    ///
    /// If `state` is [`VersionState::Committed`]: committed versions enter through
    /// [`commit`](Self::commit) or [`put_committed`](Self::put_committed), which keep the
    /// committed region ordered.
    pub fn install(
        &mut self,
        writer: TxnId,
        ts: Timestamp,
        state: VersionState,
        value: Option<Value>,
    ) {
        assert_ne!(
            state,
            VersionState::Committed,
            "install takes an uncommitted state; use commit or put_committed"
        );
        match self.uncommitted_index(writer) {
            Some(i) => {
                let v = &mut self.chain[i];
                v.ts = ts;
                v.state = state;
                v.value = value;
            }
            None => self.chain.push(Version {
                writer,
                ts,
                state,
                value,
            }),
        }
    }

    /// Change the state/ts of `writer`'s uncommitted version (e.g. LocalCommitted -> Prepared with a new ts). Returns false if absent.
    ///
    /// # Panics
    ///
    /// If `state` is [`VersionState::Committed`]; use [`commit`](Self::commit).
    pub fn update_uncommitted(
        &mut self,
        writer: TxnId,
        ts: Timestamp,
        state: VersionState,
    ) -> bool {
        assert_ne!(
            state,
            VersionState::Committed,
            "update_uncommitted takes an uncommitted state; use commit"
        );
        match self.uncommitted_index(writer) {
            Some(i) => {
                let v = &mut self.chain[i];
                v.ts = ts;
                v.state = state;
                true
            }
            None => false,
        }
    }

    /// Turn `writer`'s uncommitted version into a committed one at `commit_ts`, keeping committed versions ordered by ts. Returns false if writer had no uncommitted version here.
    pub fn commit(&mut self, writer: TxnId, commit_ts: Timestamp) -> bool {
        let Some(i) = self.uncommitted_index(writer) else {
            return false;
        };
        let pos = self.committed_insert_pos(commit_ts);
        let v = &mut self.chain[i];
        v.ts = commit_ts;
        v.state = VersionState::Committed;
        // Move the version from index `i` down to `pos`; committed versions after `pos` and the
        // uncommitted ones before `i` shift up by one, each keeping its relative order.
        self.chain[pos..=i].rotate_right(1);
        self.committed += 1;
        true
    }

    /// Drop `writer`'s uncommitted version (abort). Returns it.
    pub fn remove_uncommitted(&mut self, writer: TxnId) -> Option<Version> {
        // `remove` rather than `swap_remove`: the others must stay in installation order.
        self.uncommitted_index(writer).map(|i| self.chain.remove(i))
    }

    /// Append an already-committed version directly (blind writes, bulk loading, replaying a log), kept ordered by ts.
    pub fn put_committed(&mut self, writer: TxnId, ts: Timestamp, value: Option<Value>) {
        let pos = self.committed_insert_pos(ts);
        self.chain.insert(
            pos,
            Version {
                writer,
                ts,
                state: VersionState::Committed,
                value,
            },
        );
        self.committed += 1;
    }

    /// Drop every version, committed and uncommitted (the key's state is replaced by a copy
    /// from elsewhere). The metadata stays.
    pub fn clear(&mut self) {
        self.chain = SmallVec::new();
        self.committed = 0;
    }

    /// Number of versions held, committed and uncommitted.
    pub fn version_count(&self) -> usize {
        self.chain.len()
    }

    /// Drops committed versions that no snapshot at or after `watermark` can read: everything
    /// older than the newest committed version with ts <= watermark. Returns how many went.
    ///
    /// Also hands back heap storage the chain no longer needs, so a key that briefly had several
    /// versions returns to the allocation-free inline form.
    pub(crate) fn collect_garbage(&mut self, watermark: Timestamp) -> usize {
        let visible = self
            .committed_slice()
            .partition_point(|v| v.ts <= watermark);
        // Keep the newest of the `visible` versions: it is what a read at the watermark returns.
        self.drop_oldest_committed(visible.saturating_sub(1))
    }

    /// Like [`collect_garbage`](Self::collect_garbage), with the oldest snapshot still in use
    /// given as a predicate rather than a timestamp: drops the committed versions older than the
    /// newest one `visible` accepts (that one stays: it is what a read at the oldest snapshot
    /// returns). Nothing goes if `visible` accepts none.
    pub(crate) fn collect_garbage_where(&mut self, visible: impl FnMut(&Version) -> bool) -> usize {
        let newest_visible = self.committed_slice().iter().rposition(visible);
        self.drop_oldest_committed(newest_visible.unwrap_or(0))
    }

    /// Drop the `dropped` oldest committed versions; returns `dropped`.
    fn drop_oldest_committed(&mut self, dropped: usize) -> usize {
        if dropped > 0 {
            self.chain.drain(..dropped);
            self.committed -= dropped as u32;
        }
        let len = self.chain.len();
        // Shrink when the chain fits inline again, or when most of the buffer is unused (after a
        // burst of writes); otherwise keep the buffer for the next writes.
        if self.chain.spilled() && (len <= INLINE_VERSIONS || self.chain.capacity() >= 4 * len) {
            self.chain.shrink_to_fit();
        }
        dropped
    }

    /// Whether the chain has moved to the heap, for tests of the inline layout.
    #[cfg(test)]
    pub(crate) fn is_spilled(&self) -> bool {
        self.chain.spilled()
    }
}
