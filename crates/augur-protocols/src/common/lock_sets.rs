//! The participant side of lock-based two-phase commit with read validation, as SSS's update
//! transactions (§III-B, Algorithm 2) and its `2pc-baseline` (§V) run it: a participant locks
//! every key of the transaction it stores — exclusive for the keys written, shared for the keys
//! only read — waiting (under the protocol's lock-acquisition timeout) until it holds them all,
//! then checks that each key read still has the version read, and votes.
//!
//! * [`LockSets`] acquires a transaction's whole lock set at once over a [`LockManager`] with the
//!   [`Policy::Wait`] policy (no deadlock prevention: the lock timeout breaks deadlocks) and
//!   reports which transactions hold their whole set once a release grants the locks they
//!   waited for. The timeout itself is the protocol's timer.
//! * [`reads_unchanged`] is the validation: by the identity of the version read (its writer),
//!   never by comparing clocks or timestamps.

use super::locks::{Acquire, LockManager, LockMode, Policy};
use augur_storage::MvStore;
use augur_types::{Key, TxnId};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// The lock sets of the transactions preparing or prepared at one participant.
#[derive(Debug)]
pub struct LockSets {
    locks: LockManager,
    /// Every transaction with a lock set here, with how many of its locks it still waits for.
    missing: FxHashMap<TxnId, usize>,
}

impl Default for LockSets {
    fn default() -> Self {
        LockSets {
            locks: LockManager::new(Policy::Wait),
            missing: FxHashMap::default(),
        }
    }
}

impl LockSets {
    /// Ask for `txn`'s lock set: exclusive on every key of `writes`, shared on every key of
    /// `reads` it does not also write (each key once, however often it is listed). Whether
    /// `txn` now holds the whole set; if not, a later [`LockSets::release`] reports when it
    /// does. Asking again for a transaction that has a lock set changes nothing.
    pub fn request<'k>(
        &mut self,
        txn: TxnId,
        reads: impl IntoIterator<Item = &'k Key>,
        writes: impl IntoIterator<Item = &'k Key>,
    ) -> bool {
        if let Some(missing) = self.missing.get(&txn) {
            return *missing == 0;
        }
        let mut set: BTreeMap<&Key, LockMode> = BTreeMap::new();
        for key in writes {
            set.insert(key, LockMode::Exclusive);
        }
        for key in reads {
            set.entry(key).or_insert(LockMode::Shared);
        }
        let mut missing = 0;
        for (key, mode) in set {
            match self.locks.acquire(txn, (), key, mode) {
                Acquire::Granted => {}
                // The wait policy queues every request it cannot grant and refuses none.
                Acquire::Waiting { .. } | Acquire::Refused(_) => missing += 1,
            }
        }
        self.missing.insert(txn, missing);
        missing == 0
    }

    /// Release every lock `txn` holds and withdraw the requests it queued (at its outcome, or
    /// when it gives up waiting). The transactions that now hold their whole lock set, in the
    /// order their last lock was granted.
    pub fn release(&mut self, txn: TxnId) -> Vec<TxnId> {
        if self.missing.remove(&txn).is_none() {
            return Vec::new();
        }
        let mut complete = Vec::new();
        for grant in self.locks.release_all(txn) {
            let Some(missing) = self.missing.get_mut(&grant.txn) else {
                continue;
            };
            *missing = missing.saturating_sub(1);
            if *missing == 0 {
                complete.push(grant.txn);
            }
        }
        complete
    }

    /// Whether `txn` holds its whole lock set here.
    pub fn holds_all(&self, txn: TxnId) -> bool {
        self.missing.get(&txn) == Some(&0)
    }

    /// How many transactions have a lock set here (held or awaited).
    pub fn len(&self) -> usize {
        self.missing.len()
    }

    /// Whether no transaction has a lock set here.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty()
    }
}

/// Validation by identity: whether every key of `reads` still has, as its newest committed
/// version in `store`, the version the transaction read — the one `TxnId` wrote, or none at all
/// for `None`. A key overwritten since, even with an equal value, fails it.
pub fn reads_unchanged<M>(store: &MvStore<M>, reads: &[(Key, Option<TxnId>)]) -> bool {
    reads.iter().all(|(key, version)| {
        let latest = store.get(key).and_then(|e| e.latest_committed());
        latest.map(|v| v.writer) == *version
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_types::Timestamp;

    fn k(n: u64) -> Key {
        Key::numbered(0, n)
    }

    #[test]
    fn a_set_is_held_once_every_conflicting_holder_released() {
        let mut sets = LockSets::default();
        // T1 writes k0, reads k1; T2 reads k0 and k1; T3 reads k1 only.
        assert!(sets.request(TxnId(1), [&k(1)], [&k(0)]));
        assert!(!sets.request(TxnId(2), [&k(0), &k(1)], []));
        assert!(sets.request(TxnId(3), [&k(1)], []));
        assert!(sets.holds_all(TxnId(1)) && !sets.holds_all(TxnId(2)));
        assert_eq!(sets.release(TxnId(3)), vec![]);
        assert_eq!(sets.release(TxnId(1)), vec![TxnId(2)]);
        assert!(sets.holds_all(TxnId(2)));
        assert_eq!(sets.len(), 1);
        assert_eq!(sets.release(TxnId(2)), vec![]);
        assert!(sets.is_empty());
    }

    #[test]
    fn keys_listed_twice_or_read_and_written_are_locked_once_in_the_stronger_mode() {
        let mut sets = LockSets::default();
        assert!(sets.request(TxnId(1), [&k(0)], []));
        // T2 reads k0 twice and writes it: one exclusive request, one grant to wait for.
        assert!(!sets.request(TxnId(2), [&k(0), &k(0)], [&k(0)]));
        // Asking again changes nothing.
        assert!(!sets.request(TxnId(2), [&k(0)], [&k(0)]));
        assert_eq!(sets.release(TxnId(1)), vec![TxnId(2)]);
        assert!(
            !sets.request(TxnId(3), [&k(0)], []),
            "T2 holds k0 exclusive"
        );
        assert_eq!(sets.release(TxnId(2)), vec![TxnId(3)]);
    }

    #[test]
    fn a_waiter_that_gives_up_leaves_nothing_behind() {
        let mut sets = LockSets::default();
        assert!(sets.request(TxnId(1), [], [&k(0)]));
        assert!(!sets.request(TxnId(2), [], [&k(0), &k(1)]));
        // T2 times out: its queued request and its lock on k1 go.
        assert_eq!(sets.release(TxnId(2)), vec![]);
        assert!(sets.request(TxnId(3), [], [&k(1)]));
        assert_eq!(sets.release(TxnId(1)), vec![]);
        assert_eq!(sets.release(TxnId(9)), vec![], "unknown: nothing to do");
    }

    #[test]
    fn validation_compares_the_writer_of_the_newest_version() {
        let mut store: MvStore<()> = MvStore::new();
        store
            .entry(&k(0))
            .put_committed(TxnId(1), Timestamp(1), Some("a".into()));
        assert!(reads_unchanged(
            &store,
            &[(k(0), Some(TxnId(1))), (k(1), None)]
        ));
        // Overwritten with the same value: still a different version.
        store
            .entry(&k(0))
            .put_committed(TxnId(2), Timestamp(2), Some("a".into()));
        assert!(!reads_unchanged(&store, &[(k(0), Some(TxnId(1)))]));
        assert!(!reads_unchanged(&store, &[(k(0), None)]));
        assert!(reads_unchanged(&store, &[(k(0), Some(TxnId(2)))]));
    }
}
