//! The snapshot-queue of one key at one replica (SSS §III-A): the read-only transactions that
//! read the key here (R entries, with the snapshot they read at: the newest `NLog` position
//! they did not hold; for a reader inherited through a `PropagatedSet`, the position just
//! below the writer that carried it) and the pre-committed writers of the key (W entries,
//! with their `NLog` position). A writer is held while an R entry with a smaller snapshot is
//! present.
//!
//! Queues are short (the readers in flight on one key), so a vector scanned linearly beats any
//! ordered structure; the paper splits R and W entries for the same reason (§V).

use augur_types::TxnId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    Reader,
    Writer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    txn: TxnId,
    snapshot: u64,
    kind: EntryKind,
}

/// Per-key metadata of `sss`: the key's snapshot-queue at this replica, and the update
/// transactions that read the key's current version here and are not known final (a writer
/// that overwrites the version depends on them: the release rule in the module docs of `sss`).
#[derive(Clone, Debug, Default)]
pub struct KeyQueue {
    entries: Vec<Entry>,
    update_readers: Vec<TxnId>,
}

impl KeyQueue {
    /// Add `txn`; a transaction already present keeps the smaller of its two snapshots (a
    /// reader that read the key twice holds from its first read).
    pub fn insert(&mut self, txn: TxnId, snapshot: u64, kind: EntryKind) {
        match self
            .entries
            .iter_mut()
            .find(|e| e.txn == txn && e.kind == kind)
        {
            Some(e) => e.snapshot = e.snapshot.min(snapshot),
            None => self.entries.push(Entry {
                txn,
                snapshot,
                kind,
            }),
        }
    }

    /// Drop every entry of `txn`.
    pub fn remove(&mut self, txn: TxnId) {
        self.entries.retain(|e| e.txn != txn);
    }

    /// Whether a reader with a snapshot below `snapshot` holds the writer `writer` (A4:L3).
    pub fn holds(&self, writer: TxnId, snapshot: u64) -> bool {
        self.entries
            .iter()
            .any(|e| e.kind == EntryKind::Reader && e.txn != writer && e.snapshot < snapshot)
    }

    /// The readers in the queue (an update read's `PropagatedSet`, A6:L25).
    pub fn readers(&self) -> impl Iterator<Item = TxnId> + '_ {
        self.entries
            .iter()
            .filter(|e| e.kind == EntryKind::Reader)
            .map(|e| e.txn)
    }

    /// The readers in the queue with their snapshots (R entries).
    pub fn reader_entries(&self) -> impl Iterator<Item = (TxnId, u64)> + '_ {
        self.entries
            .iter()
            .filter(|e| e.kind == EntryKind::Reader)
            .map(|e| (e.txn, e.snapshot))
    }

    /// The writers in the queue (W entries).
    pub fn writers(&self) -> impl Iterator<Item = TxnId> + '_ {
        self.entries
            .iter()
            .filter(|e| e.kind == EntryKind::Writer)
            .map(|e| e.txn)
    }

    /// Whether the queue has no entry (update readers are not queue entries).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A committed update transaction read the current version.
    pub fn add_update_reader(&mut self, txn: TxnId) {
        if !self.update_readers.contains(&txn) {
            self.update_readers.push(txn);
        }
    }

    /// The update transactions that read the current version and are not known final.
    pub fn update_readers(&self) -> impl Iterator<Item = TxnId> + '_ {
        self.update_readers.iter().copied()
    }

    /// `txn` is final.
    pub fn remove_update_reader(&mut self, txn: TxnId) {
        self.update_readers.retain(|t| *t != txn);
    }

    /// A new version was installed: its overwriter took the readers of the old one.
    pub fn clear_update_readers(&mut self) {
        self.update_readers.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_types::NodeId;

    fn t(n: u64) -> TxnId {
        TxnId::new(NodeId(0), n)
    }

    #[test]
    fn an_older_reader_holds_a_writer_until_it_is_removed() {
        let mut q = KeyQueue::default();
        q.insert(t(1), 7, EntryKind::Reader);
        q.insert(t(2), 8, EntryKind::Writer);
        assert!(q.holds(t(2), 8));
        assert!(!q.holds(t(2), 7));
        q.remove(t(1));
        assert!(!q.holds(t(2), 8));
        q.remove(t(2));
        assert!(q.is_empty());
    }

    #[test]
    fn a_reader_keeps_its_smallest_snapshot_and_a_younger_one_holds_nothing() {
        let mut q = KeyQueue::default();
        q.insert(t(1), 9, EntryKind::Reader);
        q.insert(t(1), 5, EntryKind::Reader);
        q.insert(t(1), 12, EntryKind::Reader);
        assert!(q.holds(t(2), 6));
        assert!(!q.holds(t(2), 5));
        assert_eq!(q.readers().collect::<Vec<_>>(), vec![t(1)]);
    }
}
