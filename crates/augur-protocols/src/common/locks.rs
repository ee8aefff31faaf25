//! A lock manager for sans-IO protocol state machines: two-phase locking and its variants
//! (`2pl`, `2pc-baseline`, `dst-2pl`) and Calvin's deterministic locking.
//!
//! The manager owns no threads, timers or channels. [`LockManager::acquire`] decides at once
//! whether a request is granted, queued or refused; [`LockManager::release`] and
//! [`LockManager::release_all`] return the queued requests that became grantable. The protocol
//! acts on those decisions: it answers its client, sends messages, aborts transactions.
//!
//! # Modes and queues
//!
//! Each key has a set of holders and a FIFO queue of waiting requests. Shared locks are
//! compatible with each other, an exclusive lock with nothing. A request is granted at once when
//! no holder and no request queued before it conflicts with it; otherwise it queues at the tail.
//! So a shared request waits behind a queued exclusive one even when the current holders would
//! allow it, and a stream of readers cannot starve a writer. When locks are released, requests
//! are granted from the head of the queue for as long as they are compatible with the holders,
//! so consecutive shared waiters are granted together. A transaction may wait on several keys at
//! once (Calvin requests its whole lock set up front).
//!
//! A holder asking again for the mode it holds, or a weaker one, is granted at once. A shared
//! holder asking for exclusive mode upgrades: at once if it is the only holder, otherwise its
//! request queues ahead of every ordinary waiter (behind earlier upgrades). It has to go ahead:
//! those waiters already wait for its shared lock, so queueing behind them would deadlock.
//!
//! # Policies and deadlock freedom
//!
//! In the wait-for graph each queued request has an edge to every transaction it waits for: the
//! conflicting holders and the conflicting requests queued before it. A deadlock is a cycle.
//! Age comes from a caller-supplied priority `P: Ord` (a start timestamp, say): smaller is older,
//! ties are broken by [`TxnId`], so any two transactions compare. A transaction keeps the
//! priority of its first request for as long as it holds or awaits any lock here.
//!
//! * [`Policy::NoWait`]: a request that would wait is refused. Nobody ever waits, so the graph
//!   has no edges and no deadlock.
//! * [`Policy::WaitDie`]: a requester waits only if it is older than every transaction it would
//!   wait for; otherwise it dies (is refused). Every edge points from older to younger, so there
//!   is no cycle. The oldest transaction never dies, so if aborted transactions retry with their
//!   original priority, every transaction eventually commits.
//! * [`Policy::WoundWait`]: a requester never waits for a younger transaction. It *wounds* every
//!   younger transaction it would wait for (the manager lists them; the caller aborts them and
//!   calls [`LockManager::release_all`]) and waits; a younger requester just waits. Once the
//!   wounded are gone every edge points from younger to older, so there is no cycle, and the
//!   oldest transaction is never wounded. A wounded transaction that can no longer abort (it is
//!   already committing) may be left to finish, as long as it waits for no lock: then it has no
//!   outgoing edge and cannot close a cycle. One case turns the rule around: an upgrade makes the
//!   shared waiters queued behind it wait for the upgrader, so if one of them is older, the
//!   upgrader is the one wounded and its request is refused.
//! * [`Policy::Wait`]: always wait, no deadlock prevention. Deadlock-free only when transactions
//!   acquire in one global order, as in Calvin, where each transaction requests all its locks
//!   before the next one in the sequence requests any: every edge then points to an earlier
//!   transaction.
//!
//! A refused transaction (and a wounded one) must abort; the locks it already holds stay until
//! the caller calls [`LockManager::release_all`], which also withdraws its queued requests.
//! [`Refusal::abort_reason`] says which [`AbortReason`] to report.
//!
//! # Determinism
//!
//! Results depend only on the sequence of calls, so a simulated run replays exactly. Holders are
//! kept in transaction order, queues in arrival order, a transaction's keys in key order; hash
//! maps serve point lookups only and are never iterated. [`LockManager::release_all`] reports
//! grants key by key in key order and, within a key, in queue order. Wound lists are sorted by
//! transaction id.

use augur_types::{AbortReason, Key, TxnId};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// The name of the setting that bounds how long a lock request waits (`sss`, `2pc-baseline`,
/// `2pl`, `dst-2pl`).
pub const LOCK_TIMEOUT: &str = "lock_timeout";

/// The lock timeouts [`LOCK_TIMEOUT`] accepts (and `sss`'s other timeout settings).
pub const LOCK_TIMEOUT_VALUES: &[&str] = &[
    "0ms", "100us", "500us", "1ms", "2ms", "5ms", "10ms", "20ms", "50ms", "100ms",
];

/// The lock timeout a setting's value names; `None` for a value not in [`LOCK_TIMEOUT_VALUES`].
pub fn parse_lock_timeout(value: &str) -> Option<Duration> {
    if !LOCK_TIMEOUT_VALUES
        .iter()
        .any(|v| v.eq_ignore_ascii_case(value))
    {
        return None;
    }
    let value = value.to_ascii_lowercase();
    if let Some(us) = value.strip_suffix("us") {
        return us.parse().ok().map(Duration::from_micros);
    }
    value
        .strip_suffix("ms")
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis)
}

/// A lock mode. `Shared < Exclusive`: the order is strength.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockMode {
    Shared,
    Exclusive,
}

impl LockMode {
    /// Whether two transactions may hold the key in these modes at the same time.
    pub fn compatible(self, other: LockMode) -> bool {
        self == LockMode::Shared && other == LockMode::Shared
    }

    /// Whether holding `self` makes a request for `other` redundant.
    pub fn covers(self, other: LockMode) -> bool {
        self >= other
    }
}

/// What to do with a request that cannot be granted at once (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Refuse it.
    NoWait,
    /// Queue it if the requester is older than everything it would wait for, else refuse it.
    WaitDie,
    /// Queue it, wounding the younger transactions it would wait for.
    WoundWait,
    /// Queue it. No deadlock prevention: for callers that acquire in a global order (Calvin).
    Wait,
}

/// Why a transaction must abort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// No-wait: the request conflicted.
    Conflict,
    /// Wait-die: the requester is younger than a transaction it would wait for.
    Die,
    /// Wound-wait: an older transaction would wait for this one.
    Wounded,
}

impl Refusal {
    /// The reason to report for the abort. `AbortReason` has no variant of its own for a no-wait
    /// conflict or for a wound, so these map to the nearest: a no-wait conflict is a lock wait
    /// with a timeout of zero, and a wound, like a death, is age-based deadlock prevention.
    pub fn abort_reason(self) -> AbortReason {
        match self {
            Refusal::Conflict => AbortReason::LockTimeout,
            Refusal::Die | Refusal::Wounded => AbortReason::WaitDie,
        }
    }
}

/// The outcome of [`LockManager::acquire`].
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// The transaction holds the key in (at least) the requested mode.
    Granted,
    /// The request is queued; a later release reports its [`Grant`]. Under wound-wait, `wound`
    /// lists (by id) the younger transactions the caller must abort for the request to progress;
    /// it is empty under the other policies.
    Waiting { wound: Vec<TxnId> },
    /// Nothing changed; the requester must abort.
    Refused(Refusal),
}

/// A queued request that has been granted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub txn: TxnId,
    pub key: Key,
    pub mode: LockMode,
}

#[derive(Clone, Copy, Debug)]
struct Request {
    txn: TxnId,
    mode: LockMode,
    /// The requester holds the key shared and wants it exclusive.
    upgrade: bool,
}

/// The lock of one key. It exists only while somebody holds the key: a non-empty queue always has
/// a holder in front of it, since a head request that nobody blocks is granted at once.
#[derive(Debug, Default)]
struct KeyLock {
    holders: BTreeMap<TxnId, LockMode>,
    /// Upgrades first, then ordinary requests, each in arrival order; at most one per transaction.
    queue: VecDeque<Request>,
}

#[derive(Debug)]
struct TxnLocks<P> {
    prio: P,
    /// Keys the transaction holds or waits for.
    keys: BTreeSet<Key>,
}

/// What [`LockManager::acquire`] decided before it changes anything.
enum Decision {
    Grant,
    Queue { at: usize, wound: Vec<TxnId> },
    Refuse(Refusal),
}

/// Shared/exclusive locks on keys with FIFO waiting and a deadlock-prevention [`Policy`]. `P` is
/// the transactions' priority (smaller is older); policies that ignore age can use `()`.
#[derive(Debug)]
pub struct LockManager<P = ()> {
    policy: Policy,
    keys: FxHashMap<Key, KeyLock>,
    txns: FxHashMap<TxnId, TxnLocks<P>>,
}

impl<P: Ord> LockManager<P> {
    pub fn new(policy: Policy) -> LockManager<P> {
        LockManager {
            policy,
            keys: FxHashMap::default(),
            txns: FxHashMap::default(),
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// `txn`, of priority `prio`, asks for `key` in `mode`.
    ///
    /// # Panics
    /// If `txn` already waits for `key` in a weaker mode than `mode`: a transaction must wait for
    /// its shared request to be granted before upgrading it.
    pub fn acquire(&mut self, txn: TxnId, prio: P, key: &Key, mode: LockMode) -> Acquire {
        let (held, queued) = match self.keys.get(key) {
            Some(lock) => (
                lock.holders.get(&txn).copied(),
                lock.queue.iter().find(|r| r.txn == txn).map(|r| r.mode),
            ),
            None => (None, None),
        };
        if held.is_some_and(|h| h.covers(mode)) {
            return Acquire::Granted;
        }
        if let Some(queued) = queued {
            assert!(
                queued.covers(mode),
                "{txn:?} asked for {key:?} {mode:?} while waiting for it {queued:?}"
            );
            return Acquire::Waiting { wound: Vec::new() };
        }
        let upgrade = held.is_some();
        match self.decide(txn, &prio, key, mode, upgrade) {
            Decision::Refuse(refusal) => Acquire::Refused(refusal),
            Decision::Grant => {
                // An upgrade overwrites the shared entry.
                self.keys
                    .entry(key.clone())
                    .or_default()
                    .holders
                    .insert(txn, mode);
                self.register(txn, prio, key);
                Acquire::Granted
            }
            Decision::Queue { at, wound } => {
                let lock = self
                    .keys
                    .get_mut(key)
                    .expect("only a holder makes one wait");
                lock.queue.insert(at, Request { txn, mode, upgrade });
                self.register(txn, prio, key);
                Acquire::Waiting { wound }
            }
        }
    }

    /// The policy's verdict on a request that no lock or queued request of `txn` covers.
    fn decide(&self, txn: TxnId, prio: &P, key: &Key, mode: LockMode, upgrade: bool) -> Decision {
        let Some(lock) = self.keys.get(key) else {
            return Decision::Grant;
        };
        let at = if upgrade {
            lock.queue.iter().take_while(|r| r.upgrade).count()
        } else {
            lock.queue.len()
        };
        let mut blockers: Vec<TxnId> = lock
            .holders
            .iter()
            .filter(|&(&t, &m)| t != txn && !m.compatible(mode))
            .map(|(&t, _)| t)
            .chain(
                lock.queue
                    .iter()
                    .take(at)
                    .filter(|r| !r.mode.compatible(mode))
                    .map(|r| r.txn),
            )
            .collect();
        blockers.sort();
        blockers.dedup();
        // An upgrade also queues (or, granted, holds) ahead of the shared waiters behind `at`,
        // which then wait for `txn` directly: new edges into `txn` that the policy must allow.
        let mut overtaken = lock
            .queue
            .iter()
            .skip(at)
            .filter(|r| upgrade && r.mode == LockMode::Shared)
            .map(|r| r.txn);

        // An existing transaction keeps its first priority, so its age cannot change under a
        // wait-for edge already in the graph. A correct coordinator always sends the same one;
        // a request naming another (only a forged message does) is held to the first.
        let prio = match self.txns.get(&txn) {
            Some(t) => &t.prio,
            None => prio,
        };
        let me = (prio, txn);
        let older_than_me = |t: &TxnId| self.age(*t) < me;
        // Wait-die needs no check on an upgrade's new edges: every overtaken shared waiter waits
        // for an exclusive waiter ahead of it, which waits for `txn`'s shared lock, and wait-die
        // made both of those edges point to someone younger.
        debug_assert!(
            self.policy != Policy::WaitDie || overtaken.clone().all(|t| older_than_me(&t)),
            "wait-die edge from a younger waiter"
        );

        match self.policy {
            Policy::NoWait if !blockers.is_empty() => Decision::Refuse(Refusal::Conflict),
            Policy::WaitDie if blockers.iter().any(older_than_me) => Decision::Refuse(Refusal::Die),
            Policy::WoundWait if overtaken.any(|t| older_than_me(&t)) => {
                Decision::Refuse(Refusal::Wounded)
            }
            _ if blockers.is_empty() => Decision::Grant,
            Policy::WoundWait => {
                // Sorted already, since `blockers` is.
                let wound = blockers.into_iter().filter(|t| !older_than_me(t)).collect();
                Decision::Queue { at, wound }
            }
            _ => Decision::Queue {
                at,
                wound: Vec::new(),
            },
        }
    }

    /// The age of a transaction that holds or awaits a lock: smaller is older.
    fn age(&self, txn: TxnId) -> (&P, TxnId) {
        (&self.txns[&txn].prio, txn)
    }

    fn register(&mut self, txn: TxnId, prio: P, key: &Key) {
        self.txns
            .entry(txn)
            .or_insert_with(|| TxnLocks {
                prio,
                keys: BTreeSet::new(),
            })
            .keys
            .insert(key.clone());
    }

    /// Releases `txn`'s lock on `key` and withdraws its queued request for it (an early release
    /// of a read lock, say), returning the requests this granted in queue order.
    pub fn release(&mut self, txn: TxnId, key: &Key) -> Vec<Grant> {
        let mut grants = Vec::new();
        let Some(t) = self.txns.get_mut(&txn) else {
            return grants;
        };
        if t.keys.remove(key) {
            if t.keys.is_empty() {
                self.txns.remove(&txn);
            }
            self.drop_from_key(txn, key, &mut grants);
        }
        grants
    }

    /// Releases every lock of `txn` and withdraws all its queued requests (at commit or abort),
    /// returning the requests this granted: by key in key order, within a key in queue order.
    pub fn release_all(&mut self, txn: TxnId) -> Vec<Grant> {
        let mut grants = Vec::new();
        if let Some(t) = self.txns.remove(&txn) {
            for key in &t.keys {
                self.drop_from_key(txn, key, &mut grants);
            }
        }
        grants
    }

    /// Removes `txn` from `key`'s holders and queue, then grants from the head of the queue.
    fn drop_from_key(&mut self, txn: TxnId, key: &Key, grants: &mut Vec<Grant>) {
        let lock = self
            .keys
            .get_mut(key)
            .expect("a transaction's keys are locked");
        lock.holders.remove(&txn);
        lock.queue.retain(|r| r.txn != txn);
        while let Some(head) = lock.queue.front().copied() {
            // Only holders can block the head; once one does, everything behind waits too (FIFO).
            let blocked = lock
                .holders
                .iter()
                .any(|(&t, &m)| t != head.txn && !m.compatible(head.mode));
            if blocked {
                break;
            }
            lock.queue.pop_front();
            lock.holders.insert(head.txn, head.mode);
            grants.push(Grant {
                txn: head.txn,
                key: key.clone(),
                mode: head.mode,
            });
        }
        if lock.holders.is_empty() {
            self.keys.remove(key);
        }
    }

    /// The holders of `key` and their modes, in transaction order.
    pub fn holders(&self, key: &Key) -> impl Iterator<Item = (TxnId, LockMode)> + '_ {
        self.keys
            .get(key)
            .into_iter()
            .flat_map(|l| l.holders.iter().map(|(&t, &m)| (t, m)))
    }

    /// The requests queued for `key` and their modes, in the order they will be granted.
    pub fn waiters(&self, key: &Key) -> impl Iterator<Item = (TxnId, LockMode)> + '_ {
        self.keys
            .get(key)
            .into_iter()
            .flat_map(|l| l.queue.iter().map(|r| (r.txn, r.mode)))
    }

    /// The mode in which `txn` holds `key`, if it does.
    pub fn held_mode(&self, txn: TxnId, key: &Key) -> Option<LockMode> {
        self.keys.get(key)?.holders.get(&txn).copied()
    }

    /// Whether `txn` holds `key` in `mode` or a stronger one.
    pub fn holds(&self, txn: TxnId, key: &Key, mode: LockMode) -> bool {
        self.held_mode(txn, key).is_some_and(|h| h.covers(mode))
    }

    /// Whether `txn` has a request queued for `key`.
    pub fn is_waiting(&self, txn: TxnId, key: &Key) -> bool {
        self.waiters(key).any(|(t, _)| t == txn)
    }

    /// Number of keys somebody holds (queued requests only exist on held keys).
    pub fn locked_keys(&self) -> usize {
        self.keys.len()
    }

    /// Whether no lock is held and no request queued.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LockMode::{Exclusive as X, Shared as S};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Transaction `n`; tests give it priority `n`, so a smaller `n` is older.
    fn t(n: u64) -> TxnId {
        TxnId(n)
    }

    #[test]
    fn lock_timeouts_parse_in_micro_and_milliseconds() {
        assert_eq!(parse_lock_timeout("5ms"), Some(Duration::from_millis(5)));
        assert_eq!(
            parse_lock_timeout("100us"),
            Some(Duration::from_micros(100))
        );
        assert_eq!(parse_lock_timeout("0ms"), Some(Duration::ZERO));
        assert_eq!(parse_lock_timeout("7ms"), None);
        for value in LOCK_TIMEOUT_VALUES {
            assert!(parse_lock_timeout(value).is_some(), "{value}");
        }
    }

    fn k(n: u64) -> Key {
        Key::numbered(0, n)
    }

    fn lm(policy: Policy) -> LockManager<u64> {
        LockManager::new(policy)
    }

    fn get(m: &mut LockManager<u64>, n: u64, key: u64, mode: LockMode) -> Acquire {
        m.acquire(t(n), n, &k(key), mode)
    }

    fn waiting() -> Acquire {
        Acquire::Waiting { wound: Vec::new() }
    }

    fn grant(n: u64, key: u64, mode: LockMode) -> Grant {
        Grant {
            txn: t(n),
            key: k(key),
            mode,
        }
    }

    fn holders(m: &LockManager<u64>, key: u64) -> Vec<(TxnId, LockMode)> {
        m.holders(&k(key)).collect()
    }

    fn waiters(m: &LockManager<u64>, key: u64) -> Vec<(TxnId, LockMode)> {
        m.waiters(&k(key)).collect()
    }

    #[test]
    fn shared_locks_are_shared_and_exclusive_ones_are_not() {
        let mut m = lm(Policy::NoWait);
        assert_eq!(get(&mut m, 1, 0, S), Acquire::Granted);
        assert_eq!(get(&mut m, 2, 0, S), Acquire::Granted);
        assert_eq!(holders(&m, 0), vec![(t(1), S), (t(2), S)]);
        assert_eq!(get(&mut m, 3, 0, X), Acquire::Refused(Refusal::Conflict));
        assert_eq!(get(&mut m, 3, 1, X), Acquire::Granted);
        assert_eq!(get(&mut m, 4, 1, S), Acquire::Refused(Refusal::Conflict));
        assert!(m.holds(t(1), &k(0), S) && !m.holds(t(1), &k(0), X));
        assert_eq!(m.held_mode(t(3), &k(1)), Some(X));
        assert_eq!(m.held_mode(t(4), &k(1)), None);
        assert_eq!(m.locked_keys(), 2);
    }

    #[test]
    fn no_wait_never_queues_and_refusal_leaves_nothing_behind() {
        let mut m = lm(Policy::NoWait);
        assert_eq!(get(&mut m, 2, 0, X), Acquire::Granted);
        // Older or younger, a conflicting requester is refused at once.
        for n in [1, 3] {
            assert_eq!(get(&mut m, n, 0, S), Acquire::Refused(Refusal::Conflict));
        }
        assert_eq!(waiters(&m, 0), vec![]);
        assert!(m.release_all(t(1)).is_empty(), "refused: never registered");
        assert!(m.release_all(t(2)).is_empty());
        assert!(m.is_empty());
        assert_eq!(Refusal::Conflict.abort_reason(), AbortReason::LockTimeout);
    }

    #[test]
    fn policies_that_ignore_age_need_no_priority() {
        let mut m = LockManager::new(Policy::Wait);
        assert_eq!(m.acquire(t(1), (), &k(0), X), Acquire::Granted);
        assert_eq!(m.acquire(t(2), (), &k(0), S), waiting());
        assert_eq!(m.release_all(t(1)), vec![grant(2, 0, S)]);
    }

    #[test]
    fn holders_asking_again_are_granted() {
        let mut m = lm(Policy::NoWait);
        assert_eq!(get(&mut m, 1, 0, X), Acquire::Granted);
        assert_eq!(get(&mut m, 1, 0, X), Acquire::Granted);
        assert_eq!(get(&mut m, 1, 0, S), Acquire::Granted);
        assert_eq!(m.held_mode(t(1), &k(0)), Some(X), "no downgrade");
        assert_eq!(get(&mut m, 2, 1, S), Acquire::Granted);
        assert_eq!(get(&mut m, 2, 1, S), Acquire::Granted);
        assert_eq!(holders(&m, 1), vec![(t(2), S)]);
    }

    #[test]
    fn the_sole_holder_upgrades_at_once_even_past_waiters() {
        let mut m = lm(Policy::Wait);
        assert_eq!(get(&mut m, 1, 0, S), Acquire::Granted);
        assert_eq!(get(&mut m, 2, 0, X), waiting());
        assert_eq!(get(&mut m, 1, 0, X), Acquire::Granted);
        assert_eq!(holders(&m, 0), vec![(t(1), X)]);
        assert_eq!(m.release_all(t(1)), vec![grant(2, 0, X)]);
    }

    #[test]
    fn an_upgrade_waits_for_the_other_readers_ahead_of_queued_writers() {
        let mut m = lm(Policy::Wait);
        assert_eq!(get(&mut m, 1, 0, S), Acquire::Granted);
        assert_eq!(get(&mut m, 2, 0, S), Acquire::Granted);
        assert_eq!(get(&mut m, 3, 0, X), waiting());
        assert_eq!(get(&mut m, 2, 0, X), waiting());
        assert_eq!(waiters(&m, 0), vec![(t(2), X), (t(3), X)]);
        assert!(m.holds(t(2), &k(0), S) && m.is_waiting(t(2), &k(0)));
        assert_eq!(m.release(t(1), &k(0)), vec![grant(2, 0, X)]);
        assert_eq!(holders(&m, 0), vec![(t(2), X)]);
        assert_eq!(m.release_all(t(2)), vec![grant(3, 0, X)]);
    }

    #[test]
    fn upgrades_under_each_policy() {
        // No-wait: refused while another reader holds the key.
        let mut m = lm(Policy::NoWait);
        let _ = (get(&mut m, 1, 0, S), get(&mut m, 2, 0, S));
        assert_eq!(get(&mut m, 1, 0, X), Acquire::Refused(Refusal::Conflict));
        assert_eq!(m.held_mode(t(1), &k(0)), Some(S), "the shared lock stays");

        // Wait-die: the younger reader dies, the older one waits.
        let mut m = lm(Policy::WaitDie);
        let _ = (get(&mut m, 1, 0, S), get(&mut m, 2, 0, S));
        assert_eq!(get(&mut m, 2, 0, X), Acquire::Refused(Refusal::Die));
        assert_eq!(get(&mut m, 1, 0, X), waiting());
        assert_eq!(m.release_all(t(2)), vec![grant(1, 0, X)]);

        // Wound-wait: the older reader wounds the younger one; the younger one waits.
        let mut m = lm(Policy::WoundWait);
        let _ = (get(&mut m, 1, 0, S), get(&mut m, 2, 0, S));
        assert_eq!(get(&mut m, 2, 0, X), waiting());
        assert_eq!(get(&mut m, 1, 0, X), Acquire::Waiting { wound: vec![t(2)] });
        assert_eq!(waiters(&m, 0), vec![(t(2), X), (t(1), X)]);
        assert_eq!(m.release_all(t(2)), vec![grant(1, 0, X)]);
    }

    #[test]
    fn wait_die_lets_the_older_wait_and_the_younger_die() {
        let mut m = lm(Policy::WaitDie);
        assert_eq!(get(&mut m, 5, 0, X), Acquire::Granted);
        assert_eq!(get(&mut m, 7, 0, S), Acquire::Refused(Refusal::Die));
        assert_eq!(get(&mut m, 3, 0, S), waiting());
        // Queued requests count too: 4 is older than the holder but younger than 3, which it
        // would wait behind.
        assert_eq!(get(&mut m, 4, 0, X), Acquire::Refused(Refusal::Die));
        // A compatible waiter ahead is no obstacle: 2 waits for the holder only.
        assert_eq!(get(&mut m, 2, 0, S), waiting());
        assert_eq!(m.release_all(t(5)), vec![grant(3, 0, S), grant(2, 0, S)]);
        assert_eq!(Refusal::Die.abort_reason(), AbortReason::WaitDie);
    }

    #[test]
    fn wait_die_breaks_ties_by_transaction_id() {
        let mut m: LockManager<u64> = LockManager::new(Policy::WaitDie);
        assert_eq!(m.acquire(t(2), 7, &k(0), X), Acquire::Granted);
        assert_eq!(m.acquire(t(3), 7, &k(0), X), Acquire::Refused(Refusal::Die));
        assert_eq!(m.acquire(t(1), 7, &k(0), X), waiting());
    }

    #[test]
    fn wound_wait_wounds_younger_holders_and_waiters_ahead() {
        let mut m = lm(Policy::WoundWait);
        assert_eq!(get(&mut m, 5, 0, S), Acquire::Granted);
        assert_eq!(get(&mut m, 4, 0, S), Acquire::Granted);
        // Younger than a holder: waits, wounding nobody.
        assert_eq!(get(&mut m, 8, 0, X), waiting());
        assert_eq!(get(&mut m, 3, 0, S), Acquire::Waiting { wound: vec![t(8)] });
        // Older than everyone: wounds every holder and earlier waiter it conflicts with, in id
        // order.
        assert_eq!(
            get(&mut m, 1, 0, X),
            Acquire::Waiting {
                wound: vec![t(3), t(4), t(5), t(8)]
            }
        );
        // In between: wounds only those younger than itself.
        assert_eq!(get(&mut m, 6, 0, X), Acquire::Waiting { wound: vec![t(8)] });
        // The caller aborts the wounded.
        assert_eq!(m.release_all(t(8)), vec![grant(3, 0, S)]);
        assert!(m.release_all(t(4)).is_empty());
        assert!(m.release_all(t(3)).is_empty());
        assert_eq!(m.release_all(t(5)), vec![grant(1, 0, X)]);
        assert_eq!(m.release_all(t(1)), vec![grant(6, 0, X)]);
    }

    #[test]
    fn wound_wait_refuses_an_upgrade_that_an_older_reader_would_wait_for() {
        let mut m = lm(Policy::WoundWait);
        assert_eq!(get(&mut m, 5, 0, S), Acquire::Granted);
        assert_eq!(get(&mut m, 9, 0, X), waiting());
        assert_eq!(get(&mut m, 1, 0, S), Acquire::Waiting { wound: vec![t(9)] });
        // 5 is the sole holder, but its exclusive lock would make the older 1 wait for it.
        assert_eq!(get(&mut m, 5, 0, X), Acquire::Refused(Refusal::Wounded));
        assert_eq!(m.held_mode(t(5), &k(0)), Some(S));
        assert_eq!(m.release_all(t(9)), vec![grant(1, 0, S)]);
        assert_eq!(Refusal::Wounded.abort_reason(), AbortReason::WaitDie);
    }

    #[test]
    fn waiters_are_granted_in_fifo_order_shared_ones_together() {
        let mut m = lm(Policy::Wait);
        assert_eq!(get(&mut m, 1, 0, X), Acquire::Granted);
        for (n, mode) in [(2, S), (3, S), (4, X), (5, S), (6, S)] {
            assert_eq!(get(&mut m, n, 0, mode), waiting());
        }
        assert_eq!(m.release_all(t(1)), vec![grant(2, 0, S), grant(3, 0, S)]);
        assert!(m.release_all(t(3)).is_empty());
        assert_eq!(m.release_all(t(2)), vec![grant(4, 0, X)]);
        assert_eq!(m.release_all(t(4)), vec![grant(5, 0, S), grant(6, 0, S)]);
    }

    #[test]
    fn a_reader_queues_behind_a_waiting_writer_even_if_the_holders_would_allow_it() {
        let mut m = lm(Policy::Wait);
        assert_eq!(get(&mut m, 1, 0, S), Acquire::Granted);
        assert_eq!(get(&mut m, 2, 0, X), waiting());
        assert_eq!(get(&mut m, 3, 0, S), waiting());
        assert_eq!(holders(&m, 0), vec![(t(1), S)]);
        assert_eq!(waiters(&m, 0), vec![(t(2), X), (t(3), S)]);
    }

    #[test]
    fn asking_again_while_waiting_changes_nothing() {
        let mut m = lm(Policy::Wait);
        assert_eq!(get(&mut m, 1, 0, X), Acquire::Granted);
        assert_eq!(get(&mut m, 2, 0, X), waiting());
        assert_eq!(get(&mut m, 2, 0, S), waiting());
        assert_eq!(get(&mut m, 2, 0, X), waiting());
        assert_eq!(waiters(&m, 0), vec![(t(2), X)]);
    }

    #[test]
    #[should_panic(expected = "while waiting")]
    fn strengthening_a_queued_request_is_a_caller_bug() {
        let mut m = lm(Policy::Wait);
        let _ = get(&mut m, 1, 0, X);
        let _ = get(&mut m, 2, 0, S);
        let _ = get(&mut m, 2, 0, X);
    }

    #[test]
    fn releasing_a_waiter_unblocks_those_behind_it() {
        let mut m = lm(Policy::Wait);
        assert_eq!(get(&mut m, 1, 0, S), Acquire::Granted);
        for (n, mode) in [(2, X), (3, S), (4, S)] {
            assert_eq!(get(&mut m, n, 0, mode), waiting());
        }
        assert_eq!(m.release_all(t(2)), vec![grant(3, 0, S), grant(4, 0, S)]);
        assert_eq!(holders(&m, 0), vec![(t(1), S), (t(3), S), (t(4), S)]);
        // Withdrawing one queued request through `release` works the same way.
        assert_eq!(get(&mut m, 5, 0, X), waiting());
        assert_eq!(get(&mut m, 6, 0, S), waiting());
        assert!(m.release(t(5), &k(0)).contains(&grant(6, 0, S)));
        assert!(!m.is_waiting(t(5), &k(0)));
    }

    #[test]
    fn release_all_reports_grants_by_key_then_queue_order() {
        let mut m = lm(Policy::Wait);
        // Locked out of key order, so the report's order comes from the keys, not the calls.
        for key in [3, 1, 2] {
            assert_eq!(get(&mut m, 1, key, X), Acquire::Granted);
        }
        for (n, key, mode) in [(4, 3, S), (3, 2, X), (2, 1, S), (5, 1, S), (6, 3, S)] {
            assert_eq!(get(&mut m, n, key, mode), waiting());
        }
        assert_eq!(
            m.release_all(t(1)),
            vec![
                grant(2, 1, S),
                grant(5, 1, S),
                grant(3, 2, X),
                grant(4, 3, S),
                grant(6, 3, S),
            ]
        );
        for n in 2..=6 {
            let _ = m.release_all(t(n));
        }
        assert!(m.is_empty());
    }

    #[test]
    fn release_all_forgets_every_lock_and_request() {
        let mut m = lm(Policy::Wait);
        let _ = (
            get(&mut m, 1, 0, S),
            get(&mut m, 1, 1, X),
            get(&mut m, 1, 2, S),
        );
        let _ = (get(&mut m, 2, 1, X), get(&mut m, 2, 3, X));
        assert_eq!(m.locked_keys(), 4);
        assert_eq!(m.release_all(t(2)), vec![]);
        assert_eq!(m.locked_keys(), 3);
        assert_eq!(waiters(&m, 1), vec![]);
        assert_eq!(m.release(t(1), &k(2)), vec![]);
        assert_eq!(m.locked_keys(), 2);
        assert_eq!(m.release_all(t(1)), vec![]);
        assert!(m.is_empty());
        assert!(m.txns.is_empty());
    }

    /// A randomized caller: random acquires and releases by a few transactions on a few keys,
    /// aborting refused transactions at once and wounded ones either at once or some steps later
    /// (an abort may take a message round trip), retrying each with a fresh priority.
    struct Caller {
        m: LockManager<u64>,
        rng: ChaCha8Rng,
        prio: Vec<u64>,
        /// Wounded, not aborted yet.
        wounded: BTreeSet<TxnId>,
        log: Vec<String>,
    }

    impl Caller {
        const TXNS: u64 = 8;
        const KEYS: u64 = 5;

        fn new(policy: Policy, seed: u64) -> Caller {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            Caller {
                m: LockManager::new(policy),
                // Small priorities, so ties (broken by id) happen.
                prio: (0..Self::TXNS).map(|_| rng.random_range(0..6)).collect(),
                rng,
                wounded: BTreeSet::new(),
                log: Vec::new(),
            }
        }

        fn abort(&mut self, txn: TxnId) {
            let grants = self.m.release_all(txn);
            check_grants(&self.m, &grants);
            self.log.push(format!("abort {txn:?}: {grants:?}"));
            self.wounded.remove(&txn);
            self.prio[txn.0 as usize] = self.rng.random_range(0..6);
        }

        fn acquire(&mut self, txn: TxnId, key: Key, mode: LockMode) {
            let policy = self.m.policy();
            let queued = self.m.waiters(&key).find(|&(w, _)| w == txn);
            if queued.is_some_and(|(_, q)| !q.covers(mode)) {
                return;
            }
            let upgrade = self.m.held_mode(txn, &key) == Some(S) && mode == X;
            let outcome = self.m.acquire(txn, self.prio[txn.0 as usize], &key, mode);
            let kind = if upgrade { "upgrade" } else { "acquire" };
            self.log
                .push(format!("{kind} {txn:?} {key:?} {mode:?}: {outcome:?}"));
            match outcome {
                Acquire::Granted => assert!(self.m.holds(txn, &key, mode)),
                Acquire::Waiting { wound } => {
                    assert!(self.m.is_waiting(txn, &key));
                    assert!(policy == Policy::WoundWait || wound.is_empty());
                    assert!(wound.windows(2).all(|w| w[0] < w[1]), "sorted");
                    for victim in wound {
                        assert!(self.m.age(victim) > self.m.age(txn), "only younger");
                        if self.rng.random_bool(0.5) {
                            self.abort(victim);
                        } else {
                            self.wounded.insert(victim);
                        }
                    }
                }
                Acquire::Refused(refusal) => {
                    let expected = match policy {
                        Policy::NoWait => Refusal::Conflict,
                        Policy::WaitDie => Refusal::Die,
                        Policy::WoundWait => Refusal::Wounded,
                        Policy::Wait => panic!("Wait never refuses"),
                    };
                    assert_eq!(refusal, expected);
                    assert!(refusal != Refusal::Wounded || upgrade);
                    self.abort(txn);
                }
            }
        }

        fn step(&mut self) {
            let txn = t(self.rng.random_range(0..Self::TXNS));
            let key = k(self.rng.random_range(0..Self::KEYS));
            match self.rng.random_range(0..10) {
                0..=5 => {
                    let mode = if self.rng.random_bool(0.5) { S } else { X };
                    self.acquire(txn, key, mode);
                }
                6..=7 => {
                    let grants = self.m.release(txn, &key);
                    check_grants(&self.m, &grants);
                    self.log
                        .push(format!("release {txn:?} {key:?}: {grants:?}"));
                }
                8 => self.abort(txn),
                _ => {
                    if let Some(&victim) = self.wounded.first() {
                        self.abort(victim);
                    }
                }
            }
            check_invariants(&self.m, &self.wounded);
        }
    }

    fn random_run(policy: Policy, seed: u64, steps: usize) -> Vec<String> {
        let mut caller = Caller::new(policy, seed);
        for _ in 0..steps {
            caller.step();
        }
        caller.log
    }

    fn check_grants(m: &LockManager<u64>, grants: &[Grant]) {
        for g in grants {
            assert_eq!(m.held_mode(g.txn, &g.key), Some(g.mode), "{g:?}");
            assert!(!m.is_waiting(g.txn, &g.key));
        }
    }

    /// The transactions `txn`'s request at queue position `pos` of `lock` waits for.
    fn blockers(lock: &KeyLock, pos: usize) -> Vec<TxnId> {
        let r = lock.queue[pos];
        let held = lock
            .holders
            .iter()
            .filter(|&(&t, &m)| t != r.txn && !m.compatible(r.mode))
            .map(|(&t, _)| t);
        let ahead = lock
            .queue
            .iter()
            .take(pos)
            .filter(|a| !a.mode.compatible(r.mode))
            .map(|a| a.txn);
        held.chain(ahead).collect()
    }

    /// The manager's invariants, given the wounded transactions the caller has yet to abort.
    fn check_invariants(m: &LockManager<u64>, wounded: &BTreeSet<TxnId>) {
        let mut edges: BTreeMap<TxnId, BTreeSet<TxnId>> = BTreeMap::new();
        for (key, lock) in &m.keys {
            assert!(!lock.holders.is_empty(), "{key:?}: a lock without holders");
            if lock.holders.values().any(|&md| md == X) {
                assert_eq!(lock.holders.len(), 1, "{key:?}: X shared");
            }
            if m.policy == Policy::NoWait {
                assert!(lock.queue.is_empty());
            }
            let mut seen = BTreeSet::new();
            let mut upgrades_done = false;
            for (pos, r) in lock.queue.iter().enumerate() {
                assert!(seen.insert(r.txn), "{key:?}: {:?} queued twice", r.txn);
                assert_eq!(r.upgrade, lock.holders.contains_key(&r.txn));
                if r.upgrade {
                    assert!(!upgrades_done, "{key:?}: upgrades go first");
                    assert_eq!((lock.holders[&r.txn], r.mode), (S, X));
                } else {
                    upgrades_done = true;
                }
                let b = blockers(lock, pos);
                assert!(!b.is_empty(), "{key:?}: {:?} waits for nobody", r.txn);
                edges.entry(r.txn).or_default().extend(b);
            }
            for t in lock.holders.keys().chain(seen.iter()) {
                assert!(m.txns[t].keys.contains(key), "{t:?} forgot {key:?}");
            }
        }
        for (t, locks) in &m.txns {
            assert!(!locks.keys.is_empty(), "{t:?}: registered without locks");
            for key in &locks.keys {
                let lock = &m.keys[key];
                assert!(lock.holders.contains_key(t) || lock.queue.iter().any(|r| r.txn == *t));
            }
        }

        // The policies' edge directions, and therefore no cycle once the wounded are gone.
        for (w, bs) in &edges {
            for b in bs {
                match m.policy {
                    Policy::WaitDie => assert!(m.age(*w) < m.age(*b), "{w:?} -> {b:?}"),
                    Policy::WoundWait => assert!(
                        m.age(*w) > m.age(*b) || wounded.contains(b),
                        "{w:?} -> {b:?}"
                    ),
                    _ => {}
                }
            }
        }
        if matches!(m.policy, Policy::WaitDie | Policy::WoundWait) {
            let survivors: BTreeMap<TxnId, BTreeSet<TxnId>> = edges
                .iter()
                .filter(|(w, _)| !wounded.contains(w))
                .map(|(w, bs)| (*w, bs.difference(wounded).copied().collect()))
                .collect();
            assert!(acyclic(&survivors), "deadlock: {survivors:?}");
        }
    }

    /// Kahn's algorithm: the graph is acyclic iff repeatedly removing sinks removes every node.
    fn acyclic(edges: &BTreeMap<TxnId, BTreeSet<TxnId>>) -> bool {
        let mut out: BTreeMap<TxnId, BTreeSet<TxnId>> = edges.clone();
        for bs in edges.values() {
            for b in bs {
                out.entry(*b).or_default();
            }
        }
        loop {
            let sinks: Vec<TxnId> = out
                .iter()
                .filter(|(_, bs)| bs.is_empty())
                .map(|(t, _)| *t)
                .collect();
            if sinks.is_empty() {
                return out.is_empty();
            }
            for s in &sinks {
                out.remove(s);
            }
            for bs in out.values_mut() {
                for s in &sinks {
                    bs.remove(s);
                }
            }
        }
    }

    #[test]
    fn random_runs_keep_the_invariants_under_every_policy() {
        for policy in [
            Policy::NoWait,
            Policy::WaitDie,
            Policy::WoundWait,
            Policy::Wait,
        ] {
            for seed in 0..10 {
                random_run(policy, seed, 2_000);
            }
        }
    }

    #[test]
    fn the_same_calls_give_the_same_results() {
        for policy in [Policy::WaitDie, Policy::WoundWait, Policy::Wait] {
            let log = random_run(policy, 42, 1_000);
            assert!(log.iter().any(|l| l.contains("Waiting")));
            assert!(log.iter().any(|l| l.starts_with("upgrade")));
            assert_eq!(log, random_run(policy, 42, 1_000));
        }
    }

    #[test]
    fn acyclic_detects_cycles() {
        let graph = |pairs: &[(u64, u64)]| {
            let mut g: BTreeMap<TxnId, BTreeSet<TxnId>> = BTreeMap::new();
            for &(a, b) in pairs {
                g.entry(t(a)).or_default().insert(t(b));
            }
            g
        };
        assert!(acyclic(&graph(&[(1, 2), (2, 3), (1, 3)])));
        assert!(!acyclic(&graph(&[(1, 2), (2, 3), (3, 1)])));
    }
}
