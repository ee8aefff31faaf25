//! The speculative state of one Sparkle partition (§4.1 of the paper, Algorithms 1 and 2): per
//! key a chain of speculatively committed versions ordered by their writers' positions, one
//! timestamped exclusive lock with preemption of later holders, the transactions suspended on
//! it, and the read dependencies; per transaction its current instance, its abort flag and what
//! it locked and installed.
//!
//! It is sans-IO and knows nothing of procedures, messages or the final store: the node runs
//! each transaction's procedure, asks here at every read and first write of a local key, and
//! carries out the [`Effects`] each call returns (resume the woken, abort the flagged). A
//! transaction's life here:
//!
//! 1. [`begin`](Speculative::begin) once it is delivered at its position (the `local_id` of the
//!    paper: its place in the serialization order at this partition).
//! 2. [`read`](Speculative::read) and [`lock`](Speculative::lock) while it runs, possibly out
//!    of order, before every earlier transaction is final. A read returns the version of the
//!    latest writer before it, speculative or final, and registers a read dependency unless
//!    every earlier transaction is final; it is suspended while an earlier transaction holds
//!    the key's lock. A lock request is suspended behind an earlier holder and preempts (flags
//!    for abort) a later one.
//! 3. [`put`](Speculative::put) when its run ends: it releases its locks and installs its
//!    versions (*speculative commit*), flagging every later reader that read an older version
//!    (it missed this write) and waking the suspended. It fails if a lock was preempted.
//! 4. [`final_commit`](Speculative::final_commit), strictly in position order, once it is the
//!    first transaction not final and its flag is clear: its versions leave the chains for the
//!    node's final store.
//! 5. Whenever it is flagged — before or after its speculative commit —
//!    [`abort`](Speculative::abort): its locks are released and its versions removed, which
//!    flags every reader of them (cascading), and it runs again as a new instance.
//!
//! Every lock, waiter and read dependency names an [`Instance`], so an entry left by an aborted
//! instance never flags the one that replaced it (the paper leaves this implicit; without it
//! re-executions can abort each other forever).

use augur_types::{Key, Timestamp, Value};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

/// One execution of the transaction at a position: its `n`th (0 is the first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instance {
    pub at: Timestamp,
    pub n: u32,
}

/// What a read or a lock request gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access<T> {
    Ready(T),
    /// An earlier transaction holds the key's lock: the instance is woken
    /// ([`Effects::woken`]) when that lock is released, and asks again.
    Suspended,
}

/// What a call did to other transactions, for the node to act on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Instances flagged for abort: preempted, missed a write, or read a version that was
    /// removed. One still running aborts at its next step; one suspended or speculatively
    /// committed must be aborted now.
    pub flagged: Vec<Instance>,
    /// Instances suspended on a lock that was released, to ask again.
    pub woken: Vec<Instance>,
}

/// The final version of a key below a position, from the node's final store: its value and its
/// writer's position (`Timestamp::ZERO` for the initial, absent one).
pub type FinalRead<'a> = &'a dyn Fn(&Key, Timestamp) -> (Option<Value>, Timestamp);

#[derive(Default)]
struct KeyState {
    /// Speculatively committed versions, by their writers' positions. A version leaves at its
    /// writer's final commit (for the final store) or abort.
    versions: BTreeMap<Timestamp, Option<Value>>,
    lock: Option<Instance>,
    /// Instances suspended on this key, woken (all, in order) when its lock is released.
    waiting: BTreeSet<Instance>,
    /// (reader, the position of the writer of the version it read).
    read_deps: Vec<(Instance, Timestamp)>,
}

impl KeyState {
    fn is_idle(&self) -> bool {
        self.versions.is_empty()
            && self.lock.is_none()
            && self.waiting.is_empty()
            && self.read_deps.is_empty()
    }
}

struct Txn {
    /// The current instance.
    n: u32,
    flagged: bool,
    /// Aborts this transaction suffered from conflicts at this partition (a preemption, a
    /// missed write, a removed version read): the paper's local abort number, `lan`.
    local_aborts: u32,
    /// The keys the current instance locked (it may have lost some to preemption since).
    locked: BTreeSet<Key>,
    /// Speculatively committed: its versions are in the chains.
    installed: Option<Vec<Key>>,
}

/// A deliberately broken partition (`augur check --mutant`), to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    /// Reads register no dependency: a write installed before a reader's position after the
    /// reader read an older version aborts nothing (the digest's M1).
    NoReadDeps,
    /// An aborted instance's versions are removed without aborting their readers (M3).
    NoCascade,
    /// The final commit ignores the abort flag (M4): a flagged transaction commits the run it
    /// has.
    IgnoreAbortFlag,
}

/// Mechanisms of §4.1 that only save work: each may be switched off (a node setting), and the
/// outcome stays the serial one, because the read dependencies and the missed-write check
/// catch what they would have prevented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switches {
    /// A read waits while an earlier transaction holds the key's lock (it would likely miss
    /// that transaction's write). Off: it reads the latest version at once.
    pub read_waits: bool,
    /// An earlier transaction taking a lock a later one holds flags the later one at once.
    /// Off: it takes the lock over silently, and the later one finds out at its own `Put`.
    pub preemption: bool,
}

impl Default for Switches {
    fn default() -> Self {
        Switches {
            read_waits: true,
            preemption: true,
        }
    }
}

/// The speculative state of one partition.
pub struct Speculative {
    keys: FxHashMap<Key, KeyState>,
    /// Every delivered transaction not yet final, by position.
    txns: BTreeMap<Timestamp, Txn>,
    mutant: Option<Mutant>,
    switches: Switches,
    /// The key count above which the next [`forget_idle`](Speculative::forget_idle) pass runs.
    sweep_above: usize,
}

/// The smallest key count a pass of [`Speculative::forget_idle`] waits for.
const MIN_SWEEP: usize = 64;

impl Default for Speculative {
    fn default() -> Self {
        Speculative::new()
    }
}

impl Speculative {
    pub fn new() -> Self {
        Speculative::mutated(None)
    }

    /// A broken partition (see [`Mutant`]).
    pub fn mutated(mutant: Option<Mutant>) -> Self {
        Speculative::configured(mutant, Switches::default())
    }

    /// A partition with some mechanisms switched off, or broken.
    pub fn configured(mutant: Option<Mutant>, switches: Switches) -> Self {
        Speculative {
            keys: FxHashMap::default(),
            txns: BTreeMap::new(),
            mutant,
            switches,
            sweep_above: MIN_SWEEP,
        }
    }

    /// The transaction at `at` was delivered here: its first instance.
    pub fn begin(&mut self, at: Timestamp) -> Instance {
        let txn = self.txns.entry(at).or_insert(Txn {
            n: 0,
            flagged: false,
            local_aborts: 0,
            locked: BTreeSet::new(),
            installed: None,
        });
        Instance { at, n: txn.n }
    }

    /// The first transaction not final (the paper's `to_commit_tx`), if any.
    pub fn first_pending(&self) -> Option<Timestamp> {
        self.txns.keys().next().copied()
    }

    /// The speculative prefix: the transactions not final, from the first on, while each is
    /// speculatively committed and unflagged, as their current instances. No transaction of
    /// this partition can abort any of them any more (they hold no locks, and everything
    /// before them has installed its versions for good unless it is itself aborted); only a
    /// sibling's value one of them consumed turning out wrong can.
    pub fn speculative_prefix(&self) -> impl Iterator<Item = Instance> + '_ {
        self.txns.iter().map_while(|(at, t)| {
            (t.installed.is_some() && !t.flagged).then_some(Instance { at: *at, n: t.n })
        })
    }

    /// Whether `inst` is its transaction's current instance.
    pub fn is_current(&self, inst: Instance) -> bool {
        self.txns.get(&inst.at).is_some_and(|t| t.n == inst.n)
    }

    /// Whether `inst` is current and flagged for abort.
    pub fn is_flagged(&self, inst: Instance) -> bool {
        self.txns
            .get(&inst.at)
            .is_some_and(|t| t.n == inst.n && t.flagged)
    }

    /// Whether `inst` is current and speculatively committed.
    pub fn is_speculatively_committed(&self, inst: Instance) -> bool {
        self.txns
            .get(&inst.at)
            .is_some_and(|t| t.n == inst.n && t.installed.is_some())
    }

    /// The local abort number of the transaction at `at` (0 once it is final).
    pub fn local_aborts(&self, at: Timestamp) -> u32 {
        self.txns.get(&at).map_or(0, |t| t.local_aborts)
    }

    /// How many transactions are delivered and not final.
    pub fn pending(&self) -> usize {
        self.txns.len()
    }

    /// Flag `inst` for abort, if it is current.
    fn flag(txns: &mut BTreeMap<Timestamp, Txn>, inst: Instance, effects: &mut Effects) {
        if let Some(t) = txns.get_mut(&inst.at)
            && t.n == inst.n
            && !t.flagged
        {
            t.flagged = true;
            effects.flagged.push(inst);
        }
    }

    /// `inst` reads the local key `key`: the latest version before its position, or
    /// suspended behind an earlier holder of the key's lock (Algorithm 2, `Read`).
    pub fn read(
        &mut self,
        inst: Instance,
        key: &Key,
        final_read: FinalRead<'_>,
    ) -> Access<Option<Value>> {
        let first = self.first_pending();
        let k = self.keys.entry(key.clone()).or_default();
        if let Some(holder) = k.lock
            && holder.at < inst.at
            && self.switches.read_waits
        {
            k.waiting.insert(inst);
            return Access::Suspended;
        }
        let (value, writer) = match k.versions.range(..inst.at).next_back() {
            Some((w, v)) => (v.clone(), *w),
            None => final_read(key, inst.at),
        };
        // Every earlier transaction final: no earlier write can come any more.
        if first != Some(inst.at) && self.mutant != Some(Mutant::NoReadDeps) {
            k.read_deps.push((inst, writer));
        }
        Access::Ready(value)
    }

    /// `inst` is about to write the local key `key` for the first time: take its lock,
    /// preempting (flagging) a later holder, or wait behind an earlier one (Algorithm 2,
    /// `Lock`).
    pub fn lock(&mut self, inst: Instance, key: &Key, effects: &mut Effects) -> Access<()> {
        let k = self.keys.entry(key.clone()).or_default();
        match k.lock {
            Some(holder) if holder == inst => return Access::Ready(()),
            Some(holder) if holder.at < inst.at => {
                // An earlier transaction's instance, current or not: a stale holder is released
                // at its abort, which wakes this one.
                k.waiting.insert(inst);
                return Access::Suspended;
            }
            Some(holder) if self.switches.preemption => Self::flag(&mut self.txns, holder, effects),
            // Taken over: the holder's `Put` finds the lock gone and fails.
            Some(_) | None => {}
        }
        k.lock = Some(inst);
        if let Some(t) = self.txns.get_mut(&inst.at) {
            t.locked.insert(key.clone());
        }
        Access::Ready(())
    }

    /// `inst`'s run ended with `writes` to local keys (each locked by it first): install them
    /// and release the locks (Algorithm 2, `Put`). False, with nothing changed, if a lock was
    /// preempted or the instance was flagged: it must abort.
    pub fn put(
        &mut self,
        inst: Instance,
        writes: &[(Key, Option<Value>)],
        effects: &mut Effects,
    ) -> bool {
        if !self.is_current(inst) || self.is_flagged(inst) {
            return false;
        }
        if writes
            .iter()
            .any(|(key, _)| self.keys.get(key).and_then(|k| k.lock) != Some(inst))
        {
            return false;
        }
        let first = self.first_pending().unwrap_or(Timestamp::ZERO);
        for (key, value) in writes {
            let k = self.keys.get_mut(key).expect("locked above");
            k.lock = None;
            k.versions.insert(inst.at, value.clone());
            // A later reader that read a version older than this one missed this write.
            let txns = &mut self.txns;
            k.read_deps.retain(|&(reader, writer)| {
                if reader.at > inst.at && writer < inst.at {
                    Self::flag(txns, reader, effects);
                }
                // Entries of final or replaced instances never matter again.
                reader.at >= first && txns.get(&reader.at).is_some_and(|t| t.n == reader.n)
            });
            effects.woken.extend(std::mem::take(&mut k.waiting));
        }
        let txn = self.txns.get_mut(&inst.at).expect("current");
        // Locks taken on keys it did not write after all are released too.
        for key in std::mem::take(&mut txn.locked) {
            if let Some(k) = self.keys.get_mut(&key)
                && k.lock == Some(inst)
            {
                k.lock = None;
                effects.woken.extend(std::mem::take(&mut k.waiting));
            }
        }
        txn.installed = Some(writes.iter().map(|(key, _)| key.clone()).collect());
        true
    }

    /// Abort the current instance of the transaction at `at` and start the next: release its
    /// locks, remove its versions (flagging every reader of them), and count a local abort if
    /// `local` (a conflict here, not a sibling's restart) (Algorithm 1 `abort`, Algorithm 2
    /// `UnlockOrRemove`).
    pub fn abort(&mut self, at: Timestamp, local: bool, effects: &mut Effects) -> Instance {
        let Some(txn) = self.txns.get_mut(&at) else {
            return Instance { at, n: 0 };
        };
        let old = Instance { at, n: txn.n };
        txn.n += 1;
        txn.flagged = false;
        if local {
            txn.local_aborts += 1;
        }
        let locked = std::mem::take(&mut txn.locked);
        let installed = txn.installed.take().unwrap_or_default();
        let new = Instance { at, n: txn.n };
        for key in locked {
            if let Some(k) = self.keys.get_mut(&key)
                && k.lock == Some(old)
            {
                k.lock = None;
                effects.woken.extend(std::mem::take(&mut k.waiting));
            }
        }
        for key in installed {
            let Some(k) = self.keys.get_mut(&key) else {
                continue;
            };
            k.versions.remove(&at);
            let txns = &mut self.txns;
            let cascade = self.mutant != Some(Mutant::NoCascade);
            k.read_deps.retain(|&(reader, writer)| {
                if writer == at {
                    if cascade {
                        Self::flag(txns, reader, effects);
                    }
                    return false;
                }
                true
            });
        }
        self.forget_idle();
        new
    }

    /// Final-commit the transaction at `at` if it is the first not final, speculatively
    /// committed and not flagged: its writes, for the final store (to be applied there before
    /// anything else is read here). `None` if it cannot commit yet.
    pub fn final_commit(&mut self, at: Timestamp) -> Option<Vec<(Key, Option<Value>)>> {
        if self.first_pending() != Some(at) {
            return None;
        }
        let txn = self.txns.get(&at)?;
        let flagged = txn.flagged && self.mutant != Some(Mutant::IgnoreAbortFlag);
        if flagged || txn.installed.is_none() {
            return None;
        }
        let txn = self.txns.remove(&at).expect("present");
        let mut writes = Vec::new();
        for key in txn.installed.unwrap_or_default() {
            if let Some(k) = self.keys.get_mut(&key)
                && let Some(value) = k.versions.remove(&at)
            {
                writes.push((key, value));
            }
        }
        self.forget_idle();
        Some(writes)
    }

    /// Drop the state of keys nothing refers to any more, so that the map holds only keys in
    /// use. A pass visits every key, so it runs only once the map has doubled since the last
    /// one left it (amortized constant time per call, however many keys are in use).
    fn forget_idle(&mut self) {
        if self.keys.len() <= self.sweep_above {
            return;
        }
        let first = self.first_pending().unwrap_or(Timestamp::MAX);
        let txns = &self.txns;
        self.keys.retain(|_, k| {
            k.read_deps.retain(|&(reader, _)| {
                reader.at >= first && txns.get(&reader.at).is_some_and(|t| t.n == reader.n)
            });
            !k.is_idle()
        });
        self.sweep_above = (2 * self.keys.len()).max(MIN_SWEEP);
    }
}

#[cfg(test)]
mod tests {
    //! The paper's single-partition examples as scenarios (the digest's S1–S6), each driven
    //! step by step, with the final store a map beside the speculative state.

    use super::*;
    use bytes::Bytes;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn key(s: &str) -> Key {
        Key::from_bytes(s.as_bytes())
    }

    fn val(n: u64) -> Option<Value> {
        Some(Bytes::from(n.to_string()))
    }

    fn num(v: &Option<Value>) -> u64 {
        v.as_ref()
            .map_or(0, |v| std::str::from_utf8(v).unwrap().parse().unwrap())
    }

    fn ts(n: u64) -> Timestamp {
        Timestamp(n)
    }

    /// A partition with its final store.
    #[derive(Default)]
    struct Partition {
        spec: Speculative,
        /// key → (position, value), in position order.
        store: BTreeMap<Key, BTreeMap<Timestamp, Option<Value>>>,
    }

    impl Partition {
        fn read(&mut self, inst: Instance, k: &str) -> Access<Option<Value>> {
            let store = &self.store;
            let final_read = |key: &Key, below: Timestamp| {
                store
                    .get(key)
                    .and_then(|vs| vs.range(..below).next_back())
                    .map_or((None, Timestamp::ZERO), |(w, v)| (v.clone(), *w))
            };
            self.spec.read(inst, &key(k), &final_read)
        }

        fn value(&mut self, inst: Instance, k: &str) -> u64 {
            match self.read(inst, k) {
                Access::Ready(v) => num(&v),
                Access::Suspended => panic!("{inst:?} suspended reading {k}"),
            }
        }

        fn commit(&mut self, at: Timestamp) -> bool {
            match self.spec.final_commit(at) {
                Some(writes) => {
                    for (k, v) in writes {
                        self.store.entry(k).or_default().insert(at, v);
                    }
                    true
                }
                None => false,
            }
        }

        fn latest(&self, k: &str) -> u64 {
            self.store
                .get(&key(k))
                .and_then(|vs| vs.values().next_back())
                .map_or(0, num)
        }
    }

    fn lock(p: &mut Partition, inst: Instance, k: &str) -> Effects {
        let mut e = Effects::default();
        assert_eq!(p.spec.lock(inst, &key(k), &mut e), Access::Ready(()));
        e
    }

    fn put(p: &mut Partition, inst: Instance, writes: &[(&str, u64)]) -> Effects {
        let mut e = Effects::default();
        let writes: Vec<_> = writes.iter().map(|(k, v)| (key(k), val(*v))).collect();
        assert!(p.spec.put(inst, &writes, &mut e), "{inst:?} put refused");
        e
    }

    /// S1: T2 reads k before T1 writes it; T1's put flags T2, whose removal is clean; T2 runs
    /// again, reads T1's k without a dependency (T1 is final), and commits.
    #[test]
    fn a_missed_write_aborts_the_reader_which_runs_again() {
        let mut p = Partition::default();
        let t1 = p.spec.begin(ts(1));
        let t2 = p.spec.begin(ts(2));
        // T2: r = read k; write j = r + 1.
        let r = p.value(t2, "k");
        assert_eq!(r, 0);
        lock(&mut p, t2, "j");
        put(&mut p, t2, &[("j", r + 1)]);
        assert!(p.spec.is_speculatively_committed(t2));
        assert!(!p.commit(ts(2)), "T1 is not final");
        // T1: write k = 1.
        lock(&mut p, t1, "k");
        let e = put(&mut p, t1, &[("k", 1)]);
        assert_eq!(e.flagged, vec![t2]);
        assert!(p.commit(ts(1)));
        assert!(!p.commit(ts(2)), "flagged");
        let mut e = Effects::default();
        let t2 = p.spec.abort(ts(2), true, &mut e);
        assert_eq!(t2.n, 1);
        assert_eq!(p.spec.local_aborts(ts(2)), 1);
        let r = p.value(t2, "k");
        assert_eq!(r, 1);
        lock(&mut p, t2, "j");
        put(&mut p, t2, &[("j", r + 1)]);
        assert!(p.commit(ts(2)));
        assert_eq!((p.latest("k"), p.latest("j")), (1, 2));
        assert_eq!(p.spec.pending(), 0);
    }

    /// S2: an earlier transaction preempts a later lock holder, which is flagged and cannot put.
    #[test]
    fn an_earlier_writer_preempts_a_later_lock_holder() {
        let mut p = Partition::default();
        let t1 = p.spec.begin(ts(1));
        let t2 = p.spec.begin(ts(2));
        lock(&mut p, t2, "k");
        let e = lock(&mut p, t1, "k");
        assert_eq!(e.flagged, vec![t2]);
        let mut e = Effects::default();
        assert!(!p.spec.put(t2, &[(key("k"), val(20))], &mut e));
        let t2 = p.spec.abort(ts(2), true, &mut e);
        // The new instance waits behind T1's lock.
        assert_eq!(p.spec.lock(t2, &key("k"), &mut e), Access::Suspended);
        let e = put(&mut p, t1, &[("k", 10)]);
        assert_eq!(e.woken, vec![t2]);
        lock(&mut p, t2, "k");
        put(&mut p, t2, &[("k", 20)]);
        assert!(p.commit(ts(1)) && p.commit(ts(2)));
        assert_eq!(p.latest("k"), 20);
        assert_eq!(
            p.store[&key("k")].keys().copied().collect::<Vec<_>>(),
            vec![ts(1), ts(2)]
        );
    }

    /// S3 and S4: a read waits behind an earlier holder of the key's lock, not a later one.
    #[test]
    fn a_read_waits_only_for_an_earlier_lock_holder() {
        let mut p = Partition::default();
        let t1 = p.spec.begin(ts(1));
        let t2 = p.spec.begin(ts(2));
        let t3 = p.spec.begin(ts(3));
        lock(&mut p, t1, "k");
        assert_eq!(p.read(t2, "k"), Access::Suspended);
        let e = put(&mut p, t1, &[("k", 5)]);
        assert_eq!(e.woken, vec![t2]);
        assert_eq!(p.value(t2, "k"), 5);
        // T3 holds j's lock; T2 reads j at once, the version before it.
        lock(&mut p, t3, "j");
        assert_eq!(p.value(t2, "j"), 0);
        // T2 registered dependencies (T1 was not final), which T1's later final commit does
        // not trigger.
        assert!(p.commit(ts(1)));
        assert!(!p.spec.is_flagged(t2));
    }

    /// S5: T0's write aborts T1, whose removed version aborts T2 that read it (cascade).
    #[test]
    fn removing_a_speculative_version_aborts_its_readers() {
        let mut p = Partition::default();
        let t0 = p.spec.begin(ts(1));
        let t1 = p.spec.begin(ts(2));
        let t2 = p.spec.begin(ts(3));
        // T1 reads x, writes k = x + 1; T2 reads k, writes m = k.
        let x = p.value(t1, "x");
        lock(&mut p, t1, "k");
        put(&mut p, t1, &[("k", x + 1)]);
        let k = p.value(t2, "k");
        assert_eq!(k, 1, "T2 reads T1's speculative version");
        lock(&mut p, t2, "m");
        put(&mut p, t2, &[("m", k)]);
        // T0 writes x = 10.
        lock(&mut p, t0, "x");
        let e = put(&mut p, t0, &[("x", 10)]);
        assert_eq!(e.flagged, vec![t1]);
        let mut e = Effects::default();
        let t1 = p.spec.abort(ts(2), true, &mut e);
        assert_eq!(e.flagged, vec![t2], "the cascade");
        let t2 = p.spec.abort(ts(3), true, &mut e);
        assert!(p.commit(ts(1)));
        let x = p.value(t1, "x");
        lock(&mut p, t1, "k");
        put(&mut p, t1, &[("k", x + 1)]);
        let k = p.value(t2, "k");
        lock(&mut p, t2, "m");
        put(&mut p, t2, &[("m", k)]);
        assert!(p.commit(ts(2)) && p.commit(ts(3)));
        assert_eq!((p.latest("k"), p.latest("m")), (11, 11));
    }

    /// S6: a reader that read a later writer's version did not miss an earlier writer's.
    #[test]
    fn a_reader_of_a_later_version_missed_nothing() {
        let mut p = Partition::default();
        let t1 = p.spec.begin(ts(1));
        let t2 = p.spec.begin(ts(2));
        let t3 = p.spec.begin(ts(3));
        lock(&mut p, t2, "k");
        put(&mut p, t2, &[("k", 2)]);
        assert_eq!(p.value(t3, "k"), 2);
        lock(&mut p, t1, "k");
        let e = put(&mut p, t1, &[("k", 1)]);
        assert!(e.flagged.is_empty(), "{e:?}");
        assert!(p.commit(ts(1)) && p.commit(ts(2)));
        assert!(!p.spec.is_flagged(t3));
    }

    /// A dependency or a lock left by an aborted instance never touches its successor.
    #[test]
    fn entries_of_an_aborted_instance_never_flag_its_successor() {
        let mut p = Partition::default();
        let t1 = p.spec.begin(ts(1));
        let t2 = p.spec.begin(ts(2));
        assert_eq!(p.value(t2, "k"), 0);
        let mut e = Effects::default();
        // T2:0 is aborted for another reason (a sibling's restart): not a local abort.
        let t2b = p.spec.abort(ts(2), false, &mut e);
        assert_eq!(p.spec.local_aborts(ts(2)), 0);
        // T2:1 reads something else; T1's write of k flags nothing current.
        assert_eq!(p.value(t2b, "j"), 0);
        lock(&mut p, t1, "k");
        let e = put(&mut p, t1, &[("k", 1)]);
        assert!(e.flagged.is_empty(), "{e:?}");
        assert!(!p.spec.is_flagged(t2b));
        assert!(!p.spec.is_current(t2));
    }

    /// The speculative prefix ends at the first transaction not speculatively committed, or
    /// flagged.
    #[test]
    fn the_speculative_prefix_stops_at_the_first_unsettled_transaction() {
        let mut p = Partition::default();
        let t1 = p.spec.begin(ts(1));
        let t2 = p.spec.begin(ts(2));
        let t3 = p.spec.begin(ts(3));
        let prefix = |p: &Partition| {
            let ats = p.spec.speculative_prefix().map(|i| i.at.0);
            ats.collect::<Vec<_>>()
        };
        // T3 reads `a` before T1 writes it, and installs.
        assert_eq!(p.value(t3, "a"), 0);
        lock(&mut p, t3, "c");
        put(&mut p, t3, &[("c", 3)]);
        lock(&mut p, t2, "b");
        put(&mut p, t2, &[("b", 2)]);
        assert!(prefix(&p).is_empty(), "T1 runs");
        lock(&mut p, t1, "a");
        let e = put(&mut p, t1, &[("a", 1)]);
        assert_eq!(e.flagged, vec![t3]);
        assert_eq!(prefix(&p), vec![1, 2], "T3 is flagged");
        let mut e = Effects::default();
        let t3 = p.spec.abort(ts(3), true, &mut e);
        assert_eq!(p.value(t3, "a"), 1);
        lock(&mut p, t3, "c");
        put(&mut p, t3, &[("c", 3)]);
        assert_eq!(prefix(&p), vec![1, 2, 3]);
        assert!(p.commit(ts(1)));
        assert_eq!(prefix(&p), vec![2, 3]);
    }

    /// Final commits go strictly in order, and never for a flagged or unfinished transaction.
    #[test]
    fn final_commits_go_in_order() {
        let mut p = Partition::default();
        let t1 = p.spec.begin(ts(1));
        let t2 = p.spec.begin(ts(2));
        lock(&mut p, t2, "a");
        put(&mut p, t2, &[("a", 2)]);
        assert!(!p.commit(ts(2)));
        assert!(!p.commit(ts(1)), "T1 has not put");
        lock(&mut p, t1, "b");
        put(&mut p, t1, &[("b", 1)]);
        assert!(p.commit(ts(1)) && p.commit(ts(2)));
        assert_eq!(p.spec.first_pending(), None);
    }

    /// Random transactions over a few keys, run speculatively in a random interleaving
    /// (aborting what is flagged, resuming what is woken, final-committing in order) end in the
    /// state a serial run in position order gives, and every final instance read what the
    /// serial run read — with reads that wait for earlier lock holders and preemption each on
    /// or off ([`Switches`]), since they only save work.
    #[test]
    fn any_interleaving_ends_as_the_serial_run() {
        #[derive(Clone, Copy, Debug)]
        enum Op {
            Read(u8),
            Write(u8),
        }
        /// The value transaction `i` writes, from what it read so far.
        fn written(i: usize, reads: &[u64]) -> u64 {
            reads.iter().fold(1000 * (i as u64 + 1), |acc, r| {
                acc.wrapping_mul(31).wrapping_add(*r)
            })
        }
        /// A run: its ops, how far it got, what it read, what it buffered.
        #[derive(Default)]
        struct Run {
            step: usize,
            reads: Vec<u64>,
            writes: BTreeMap<u8, u64>,
            suspended: bool,
            spec: bool,
        }
        let mut rng = ChaCha8Rng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
        for round in 0..3_000 {
            let n = 2 + rng.random_range(0..5usize);
            let keys = 1 + rng.random_range(0..4u8);
            let progs: Vec<Vec<Op>> = (0..n)
                .map(|_| {
                    (0..1 + rng.random_range(0..4))
                        .map(|_| {
                            let k = rng.random_range(0..keys);
                            if rng.random_range(0..2) == 0 {
                                Op::Read(k)
                            } else {
                                Op::Write(k)
                            }
                        })
                        .collect()
                })
                .collect();
            // The serial run.
            let mut state: BTreeMap<u8, u64> = BTreeMap::new();
            let mut serial_reads = Vec::new();
            for (i, prog) in progs.iter().enumerate() {
                let mut run = Run::default();
                for op in prog {
                    match *op {
                        Op::Read(k) => {
                            let v = run.writes.get(&k).or(state.get(&k)).copied().unwrap_or(0);
                            run.reads.push(v);
                        }
                        Op::Write(k) => {
                            run.writes.insert(k, written(i, &run.reads));
                        }
                    }
                }
                state.extend(run.writes);
                serial_reads.push(run.reads);
            }
            // The speculative run, with the work-saving mechanisms on or off by turns.
            let mut p = Partition::default();
            let switches = Switches {
                read_waits: round % 2 == 0,
                preemption: round % 4 < 2,
            };
            p.spec = Speculative::configured(None, switches);
            let at = |i: usize| ts(i as u64 + 1);
            let mut insts: Vec<Instance> = (0..n).map(|i| p.spec.begin(at(i))).collect();
            let mut runs: Vec<Run> = (0..n).map(|_| Run::default()).collect();
            let mut committed = 0;
            let mut final_reads: Vec<Vec<u64>> = vec![Vec::new(); n];
            let mut guard = 0;
            while committed < n {
                guard += 1;
                assert!(guard < 100_000, "round {round}: no progress");
                let mut effects = Effects::default();
                let runnable: Vec<usize> = (0..n)
                    .filter(|&i| p.spec.is_current(insts[i]) && !runs[i].suspended && !runs[i].spec)
                    .collect();
                if let Some(&i) = runnable.get(rng.random_range(0..runnable.len().max(1))) {
                    if p.spec.is_flagged(insts[i]) {
                        insts[i] = p.spec.abort(at(i), true, &mut effects);
                        runs[i] = Run::default();
                    } else if let Some(op) = progs[i].get(runs[i].step).copied() {
                        let run = &mut runs[i];
                        match op {
                            Op::Read(k) => {
                                if let Some(v) = run.writes.get(&k) {
                                    run.reads.push(*v);
                                    run.step += 1;
                                } else {
                                    match p.read(insts[i], &format!("k{k}")) {
                                        Access::Ready(v) => {
                                            run.reads.push(num(&v));
                                            run.step += 1;
                                        }
                                        Access::Suspended => run.suspended = true,
                                    }
                                }
                            }
                            Op::Write(k) => {
                                match p.spec.lock(insts[i], &key(&format!("k{k}")), &mut effects) {
                                    Access::Ready(()) => {
                                        run.writes.insert(k, written(i, &run.reads));
                                        run.step += 1;
                                    }
                                    Access::Suspended => run.suspended = true,
                                }
                            }
                        }
                    } else {
                        let writes: Vec<(Key, Option<Value>)> = runs[i]
                            .writes
                            .iter()
                            .map(|(k, v)| (key(&format!("k{k}")), val(*v)))
                            .collect();
                        if p.spec.put(insts[i], &writes, &mut effects) {
                            runs[i].spec = true;
                        } else {
                            insts[i] = p.spec.abort(at(i), true, &mut effects);
                            runs[i] = Run::default();
                        }
                    }
                }
                // Carry out the effects until none is left.
                while !effects.flagged.is_empty() || !effects.woken.is_empty() {
                    for w in std::mem::take(&mut effects.woken) {
                        let i = (w.at.0 - 1) as usize;
                        if insts[i] == w {
                            runs[i].suspended = false;
                        }
                    }
                    for f in std::mem::take(&mut effects.flagged) {
                        let i = (f.at.0 - 1) as usize;
                        // One running aborts at its next step; the others now.
                        if insts[i] == f && (runs[i].spec || runs[i].suspended) {
                            insts[i] = p.spec.abort(at(i), true, &mut effects);
                            runs[i] = Run::default();
                        }
                    }
                }
                while committed < n && p.commit(at(committed)) {
                    final_reads[committed] = std::mem::take(&mut runs[committed].reads);
                    committed += 1;
                }
            }
            assert_eq!(final_reads, serial_reads, "round {round}: {progs:?}");
            for (k, v) in &state {
                assert_eq!(p.latest(&format!("k{k}")), *v, "round {round}: {progs:?}");
            }
        }
    }
}
