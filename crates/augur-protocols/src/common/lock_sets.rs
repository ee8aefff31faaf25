//! The participant side of lock-based two-phase commit with read validation, as SSS's update
//! transactions (§III-B, Algorithm 2) and its `2pc-baseline` (§V) run it — and, with another
//! lock policy, as `occ` locks its write set and `2pl` locks as it goes: a participant locks
//! the keys of a transaction it stores — exclusive for the keys written, shared for the keys
//! only read — waiting (under the protocol's lock-acquisition timeout) until it holds them all,
//! then checks that each key read still has the version read, and votes.
//!
//! * [`LockSets`] acquires a transaction's lock set over a [`LockManager`] and reports which
//!   transactions hold their whole set once a release grants the locks they waited for. The
//!   set may grow (`2pl` adds a key at each read, its writes at commit). The policy is the
//!   protocol's: [`Policy::Wait`] (no deadlock prevention: the lock timeout breaks deadlocks;
//!   `2pc-baseline`), [`Policy::NoWait`] (`occ`) or [`Policy::WaitDie`] on a priority such as
//!   the begin time (`2pl`). The timeout itself is the protocol's timer.
//! * [`reads_unchanged`] is the validation: by the identity of the version read (its writer),
//!   never by comparing clocks or timestamps.

use super::locks::{Acquire, LockManager, LockMode, Policy, Refusal};
use augur_storage::MvStore;
use augur_types::{Key, TxnId};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// The lock sets of the transactions preparing or prepared at one participant. `P` is the
/// transactions' priority under [`Policy::WaitDie`] (smaller is older); `()` where age is
/// ignored.
#[derive(Debug)]
pub struct LockSets<P = ()> {
    locks: LockManager<P>,
    /// Every transaction with a lock set here, with how many of its locks it still waits for.
    missing: FxHashMap<TxnId, usize>,
}

impl<P: Ord> Default for LockSets<P> {
    fn default() -> Self {
        LockSets::new(Policy::Wait)
    }
}

impl<P: Ord> LockSets<P> {
    /// Lock sets under `policy`.
    pub fn new(policy: Policy) -> Self {
        LockSets {
            locks: LockManager::new(policy),
            missing: FxHashMap::default(),
        }
    }

    /// Ask for more of `txn`'s lock set: exclusive on every key of `writes`, shared on every key
    /// of `reads` it does not also write (each key once, however often it is listed; a key
    /// already held in that mode, or already awaited, adds nothing). `Ok`: whether `txn` now
    /// holds its whole set; if not, a later [`LockSets::release`] reports when it does.
    /// `Err`: the policy refused a request (no-wait, wait-die), and `txn` must abort; what it
    /// was granted stays until [`LockSets::release`].
    pub fn request<'k>(
        &mut self,
        txn: TxnId,
        prio: P,
        reads: impl IntoIterator<Item = &'k Key>,
        writes: impl IntoIterator<Item = &'k Key>,
    ) -> Result<bool, Refusal>
    where
        P: Clone,
    {
        let mut set: BTreeMap<&Key, LockMode> = BTreeMap::new();
        for key in writes {
            set.insert(key, LockMode::Exclusive);
        }
        for key in reads {
            set.entry(key).or_insert(LockMode::Shared);
        }
        let missing = self.missing.entry(txn).or_insert(0);
        for (key, mode) in set {
            if self.locks.is_waiting(txn, key) {
                continue;
            }
            match self.locks.acquire(txn, prio.clone(), key, mode) {
                Acquire::Granted => {}
                // No policy used here wounds.
                Acquire::Waiting { .. } => *missing += 1,
                Acquire::Refused(refusal) => return Err(refusal),
            }
        }
        Ok(*missing == 0)
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

    /// Whether `txn` holds `key` (in either mode).
    pub fn holds(&self, txn: TxnId, key: &Key) -> bool {
        self.locks.held_mode(txn, key).is_some()
    }

    /// Whether a transaction other than `txn` holds `key` exclusively (`occ`'s validation:
    /// a key being overwritten fails it).
    pub fn written_by_other(&self, txn: TxnId, key: &Key) -> bool {
        self.locks
            .holders(key)
            .any(|(t, mode)| t != txn && mode == LockMode::Exclusive)
    }

    /// The transaction holding `key` exclusively, if one does (a DST read-only read waits for
    /// it when its timestamp may fall below the reader's).
    pub fn writer(&self, key: &Key) -> Option<TxnId> {
        self.locks
            .holders(key)
            .find(|(_, mode)| *mode == LockMode::Exclusive)
            .map(|(t, _)| t)
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
        assert_eq!(sets.request(TxnId(1), (), [&k(1)], [&k(0)]), Ok(true));
        assert_eq!(sets.request(TxnId(2), (), [&k(0), &k(1)], []), Ok(false));
        assert_eq!(sets.request(TxnId(3), (), [&k(1)], []), Ok(true));
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
        assert_eq!(sets.request(TxnId(1), (), [&k(0)], []), Ok(true));
        // T2 reads k0 twice and writes it: one exclusive request, one grant to wait for.
        assert_eq!(
            sets.request(TxnId(2), (), [&k(0), &k(0)], [&k(0)]),
            Ok(false)
        );
        // Asking again changes nothing.
        assert_eq!(sets.request(TxnId(2), (), [&k(0)], [&k(0)]), Ok(false));
        assert_eq!(sets.release(TxnId(1)), vec![TxnId(2)]);
        assert_eq!(
            sets.request(TxnId(3), (), [&k(0)], []),
            Ok(false),
            "T2 holds k0 exclusive"
        );
        assert_eq!(sets.release(TxnId(2)), vec![TxnId(3)]);
    }

    #[test]
    fn a_waiter_that_gives_up_leaves_nothing_behind() {
        let mut sets = LockSets::default();
        assert_eq!(sets.request(TxnId(1), (), [], [&k(0)]), Ok(true));
        assert_eq!(sets.request(TxnId(2), (), [], [&k(0), &k(1)]), Ok(false));
        // T2 times out: its queued request and its lock on k1 go.
        assert_eq!(sets.release(TxnId(2)), vec![]);
        assert_eq!(sets.request(TxnId(3), (), [], [&k(1)]), Ok(true));
        assert_eq!(sets.release(TxnId(1)), vec![]);
        assert_eq!(sets.release(TxnId(9)), vec![], "unknown: nothing to do");
    }

    #[test]
    fn a_set_grows_and_the_policy_may_refuse() {
        // Wait-die on a begin time: the younger requester dies, the older waits.
        let mut sets: LockSets<u64> = LockSets::new(Policy::WaitDie);
        assert_eq!(sets.request(TxnId(1), 10, [&k(0)], []), Ok(true));
        assert_eq!(sets.request(TxnId(2), 20, [&k(0)], []), Ok(true), "shared");
        // T1 grows its set: an upgrade behind T2's shared lock; T1 is older, so it waits.
        assert_eq!(sets.request(TxnId(1), 10, [], [&k(0)]), Ok(false));
        // T3, younger than the holders, dies.
        assert_eq!(
            sets.request(TxnId(3), 30, [&k(1)], [&k(0)]),
            Err(Refusal::Die)
        );
        assert_eq!(sets.release(TxnId(3)), vec![]);
        assert_eq!(sets.release(TxnId(2)), vec![TxnId(1)]);
        assert!(sets.holds(TxnId(1), &k(0)) && sets.written_by_other(TxnId(2), &k(0)));
        assert!(!sets.written_by_other(TxnId(1), &k(0)), "its own lock");
        // No-wait refuses at once.
        let mut occ: LockSets = LockSets::new(Policy::NoWait);
        assert_eq!(occ.request(TxnId(1), (), [], [&k(0)]), Ok(true));
        assert_eq!(
            occ.request(TxnId(2), (), [], [&k(0)]),
            Err(Refusal::Conflict)
        );
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
