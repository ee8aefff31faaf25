//! A timestamp oracle with a stable timestamp (DST, NSDI '21, §2.2, Fig. 2: `GlobalTS`,
//! `StableGTS` and the queue of pending timestamps): one node hands out commit timestamps in
//! order and knows which of them are still *pending* (issued, not yet installed everywhere or
//! released); the stable timestamp is the highest one below which nothing is pending, so every
//! version at or below it is installed at every replica and a snapshot there needs no wait.
//! `gts`'s timestamp scheme runs it on the lock-and-2PC engine ([`super::lock_commit`]); what a
//! coordinator does with it is the scheme's, this is the oracle node's state and its durability.
//!
//! # Durability and restart
//!
//! * **Issued timestamps never repeat.** The next timestamp is covered by a durable lease (the
//!   2PC kit's [`ServeLease`], persisted [`ISSUE_BLOCK`] timestamps ahead), made durable before
//!   the reply that hands it out leaves; after a restart the oracle issues above the recovered
//!   lease.
//! * **A published stable timestamp never goes back.** Before a stable value above the last
//!   logged one leaves the oracle, it is logged (the kit's `Watermark` record: no snapshot below
//!   it is handed out again). Nodes' garbage collection may already have dropped versions below
//!   any stable value some node saw, so a restarted oracle must not answer lower.
//! * **Pending timestamps are volatile.** After a restart the oracle does not know which
//!   timestamps are still held, so it freezes stable at the logged value and asks every node
//!   which timestamps its coordinators still hold ([`Oracle::recovering`]); only once every node
//!   answered does stable move again. A node answers with the transactions it coordinates that
//!   fetched a timestamp and have not released it (running, or decided and not yet applied
//!   everywhere, which its decision log keeps across its own restarts). A timestamp the old
//!   incarnation issued whose reply was still in flight when its coordinator answered is
//!   refused by that coordinator (it is at or below the restart's bound), so it is never used
//!   unreported.
//!
//! # Fail-over
//!
//! Under fail-over (`gts`; `docs/architecture/availability.md`, *The oracle*), issued
//! timestamps come from blocks the configuration group reserves, not from the local lease:
//! each *incarnation* of the oracle (a node that starts, restarts or takes over as oracle, see
//! [`Oracle::incarnation`]) issues only within the [`Block`]s granted to it, in the order
//! granted. Blocks are disjoint and rise in the group's order, so the first block of an
//! incarnation lies above every timestamp any earlier incarnation, on any node, issued: that
//! is its restart bound, and it recovers its pending set as a restarted oracle does. The
//! stable timestamp it starts from is the largest it knows to be safe: the one it logged, or
//! the largest its node heard of.

use super::membership::{Block, RESERVE_BLOCK};
use super::replica::{self, ServeLease};
use super::vclock::{Deps, VClock};
use augur_contract::{Ctx, Protocol};
use augur_types::{NodeId, Timestamp, TxnId};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// How many timestamps past the last one issued the oracle's durable lease reaches: at most one
/// log record per this many fetches, and after a restart this many timestamps may be skipped.
pub const ISSUE_BLOCK: u64 = 1 << 12;

/// A pending timestamp: its transaction, and when its coordinator was last heard of or asked.
#[derive(Clone, Copy, Debug)]
struct Issued {
    txn: TxnId,
    asked: Timestamp,
}

/// The oracle node's state (see the module docs). Only the node the protocol names as oracle
/// keeps one.
#[derive(Debug, Default)]
pub struct Oracle {
    /// The durable bound on the timestamps issued.
    lease: ServeLease,
    /// The last timestamp issued (`GlobalTS` − 1 in the paper's terms).
    last: Timestamp,
    /// Issued and not yet released, by timestamp.
    pending: BTreeMap<Timestamp, Issued>,
    /// The pending timestamp of each transaction, so a repeated fetch gets the same one.
    by_txn: FxHashMap<TxnId, Timestamp>,
    /// The highest stable timestamp logged (hence possibly published).
    logged: Timestamp,
    /// After a restart: the nodes that have not yet said which timestamps they hold.
    recovering: Option<BTreeSet<NodeId>>,
    /// Every timestamp issued before the last restart is at or below this (fixed at the
    /// restart: the lease grows as this incarnation issues, and its timestamps must not be
    /// refused).
    bound: Timestamp,
    /// Under fail-over: the blocks of timestamps reserved for this incarnation (instead of
    /// the local lease).
    blocks: Option<Blocks>,
}

/// An oracle incarnation's timestamp blocks under fail-over.
#[derive(Debug)]
struct Blocks {
    incarnation: u64,
    /// The last timestamp the current block holds; nothing is issued above it.
    limit: Timestamp,
    /// Blocks granted and not yet begun: (after, upto).
    ahead: VecDeque<(Timestamp, Timestamp)>,
    /// Whether the first block has come (the restart bound is known).
    started: bool,
    /// A block was asked for and has not come yet.
    asking: bool,
}

impl Oracle {
    /// A fresh oracle that has issued nothing.
    pub fn new() -> Oracle {
        Oracle::default()
    }

    /// A new incarnation `incarnation` of the oracle under fail-over (see the module docs): it
    /// issues nothing before the configuration grants it a block, and holds stable at
    /// `stable`, a value known to be safe, until every one of `nodes` said what it holds.
    pub fn incarnation(
        incarnation: u64,
        stable: Timestamp,
        nodes: impl IntoIterator<Item = NodeId>,
    ) -> Oracle {
        Oracle {
            logged: stable,
            recovering: Some(nodes.into_iter().collect()),
            blocks: Some(Blocks {
                incarnation,
                limit: Timestamp::ZERO,
                ahead: VecDeque::new(),
                started: false,
                asking: false,
            }),
            ..Oracle::default()
        }
    }

    /// Under fail-over: `block` was granted. One of this incarnation's is used in turn; the
    /// first also fixes the restart bound (nothing to recover if nothing was ever issued).
    pub fn granted(&mut self, block: &Block) {
        let Some(blocks) = self.blocks.as_mut() else {
            return;
        };
        if block.incarnation != blocks.incarnation {
            return;
        }
        blocks.asking = false;
        blocks.ahead.push_back((block.after, block.upto));
        if !blocks.started {
            blocks.started = true;
            self.bound = block.after;
            self.last = self.last.max(block.after);
            if block.after == Timestamp::ZERO {
                self.recovering = None;
            }
        }
    }

    /// Under fail-over: this incarnation's number if it should ask for another block now
    /// (none asked yet, and fewer than half a block's timestamps left to issue); marked as
    /// asked.
    pub fn wants_block(&mut self) -> Option<u64> {
        let blocks = self.blocks.as_mut()?;
        let left: u64 = blocks.limit.0.saturating_sub(self.last.0)
            + (blocks.ahead.iter())
                .map(|(after, upto)| upto.0 - after.0)
                .sum::<u64>();
        if blocks.asking || left >= RESERVE_BLOCK / 2 {
            return None;
        }
        blocks.asking = true;
        Some(blocks.incarnation)
    }

    /// The largest stable timestamp logged (hence possibly published).
    pub fn logged_stable(&self) -> Timestamp {
        self.logged
    }

    /// Under fail-over: whether the restart bound is known, so that the nodes can be asked
    /// what they hold (always, without fail-over).
    pub fn bound_known(&self) -> bool {
        self.blocks.as_ref().is_none_or(|b| b.started)
    }

    /// The next timestamp this incarnation may issue: the local lease covers any; under
    /// fail-over it must lie in a granted block (`None`: wait for one).
    fn next_timestamp(&mut self) -> Option<Timestamp> {
        let Some(blocks) = self.blocks.as_mut() else {
            return Some(self.last.next());
        };
        loop {
            let ts = self.last.next();
            if ts <= blocks.limit {
                return Some(ts);
            }
            let (after, upto) = blocks.ahead.pop_front()?;
            self.last = self.last.max(after);
            blocks.limit = upto;
        }
    }

    /// Replay of the kit's `Served` record: timestamps up to `up_to` may have been issued.
    pub fn replay_issued(&mut self, up_to: Timestamp) {
        self.lease.replayed(up_to);
    }

    /// Replay of the kit's `Watermark` record: stable reached `ts` and may have been published.
    pub fn replay_stable(&mut self, ts: Timestamp) {
        self.logged = self.logged.max(ts);
    }

    /// After replay: issue above everything the old incarnation may have issued, and hold
    /// stable where it was logged until every one of `nodes` said what it holds.
    pub fn restarted(&mut self, nodes: impl IntoIterator<Item = NodeId>) {
        self.bound = self.lease.up_to().max(self.logged);
        self.last = self.bound;
        self.recovering = Some(nodes.into_iter().collect());
    }

    /// Whether this oracle ever issued or published anything (before a restart: whether its
    /// log held anything of it).
    pub fn used(&self) -> bool {
        self.lease.up_to().max(self.logged) > Timestamp::ZERO
    }

    /// The bound every timestamp of the previous incarnations is at or below (zero before any
    /// restart): a coordinator that answered a restarted oracle refuses them.
    pub fn restart_bound(&self) -> Timestamp {
        self.bound
    }

    /// Whether the oracle is still waiting for nodes to say what they hold after a restart,
    /// and which.
    pub fn recovering(&self) -> Option<&BTreeSet<NodeId>> {
        self.recovering.as_ref()
    }

    /// `GlobalTS`'s fetch-and-increment for `txn` (the same timestamp again if it has one
    /// pending), durable before the caller's reply leaves; `None` under fail-over while no
    /// granted block has a timestamp left.
    pub fn issue<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>, txn: TxnId) -> Option<Timestamp>
    where
        P::Record: From<replica::Record<Timestamp>>,
    {
        let now = ctx.now();
        if let Some(&ts) = self.by_txn.get(&txn) {
            if let Some(issued) = self.pending.get_mut(&ts) {
                issued.asked = now;
            }
            return Some(ts);
        }
        let ts = self.next_timestamp()?;
        if self.blocks.is_none() {
            self.lease.cover_with::<P, Timestamp>(ctx, ts, |_| {
                Timestamp(ts.0.saturating_add(ISSUE_BLOCK))
            });
        }
        self.last = ts;
        self.pending.insert(ts, Issued { txn, asked: now });
        self.by_txn.insert(txn, ts);
        Some(ts)
    }

    /// The last timestamp issued (what the mutant `read-at-global-ts` reads at).
    pub fn last_issued(&self) -> Timestamp {
        self.last
    }

    /// `txn` released `ts`: installed everywhere, or aborted. Unknown pairs are ignored (a
    /// repeated release, or one the previous incarnation issued).
    pub fn release(&mut self, txn: TxnId, ts: Timestamp) {
        if self.pending.get(&ts).is_some_and(|i| i.txn == txn) {
            self.pending.remove(&ts);
            self.by_txn.remove(&txn);
        }
    }

    /// After a restart, `node` holds `held` (each transaction it coordinates with the timestamp
    /// it fetched), in answer to the question of restart bound `bound`: they are pending again.
    /// Once every node answered this incarnation's question, stable may move.
    pub fn held(
        &mut self,
        now: Timestamp,
        node: NodeId,
        bound: Timestamp,
        held: &[(TxnId, Timestamp)],
    ) {
        let Some(waiting) = self.recovering.as_mut() else {
            return;
        };
        if bound != self.bound || !waiting.remove(&node) {
            return;
        }
        for &(txn, ts) in held {
            // Above the logged stable and issued by some incarnation: nothing else can be held.
            if ts > self.logged && ts <= self.last && txn.coordinator() == node {
                self.pending.insert(ts, Issued { txn, asked: now });
                self.by_txn.insert(txn, ts);
            }
        }
        if waiting.is_empty() {
            self.recovering = None;
        }
    }

    /// The stable timestamp now: one below the least pending timestamp, or the last issued
    /// when none is pending; the logged value while recovering.
    fn stable(&self) -> Timestamp {
        if self.recovering.is_some() {
            return self.logged;
        }
        let below = self
            .pending
            .keys()
            .next()
            .map_or(self.last, |least| Timestamp(least.0 - 1));
        below.max(self.logged)
    }

    /// The stable timestamp, logged first if it is above the last one logged, so that it is
    /// durable before the caller's reply or announcement leaves.
    pub fn publish<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>) -> Timestamp
    where
        P::Record: From<replica::Record<Timestamp>>,
    {
        let stable = self.stable();
        if stable > self.logged {
            self.logged = stable;
            ctx.persist(replica::Record::<Timestamp>::Watermark(stable).into());
        }
        stable
    }

    /// Pending timestamps not heard of for `patience`, in timestamp order, each marked as asked
    /// now: the oracle asks their coordinators what became of them.
    pub fn overdue(&mut self, now: Timestamp, patience: Duration) -> Vec<(TxnId, Timestamp)> {
        let mut ask = Vec::new();
        for (ts, issued) in self.pending.iter_mut() {
            if now.since(issued.asked) >= patience {
                issued.asked = now;
                ask.push((issued.txn, *ts));
            }
        }
        ask
    }

    /// How many timestamps are pending (a counter).
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// The pending timestamps, least first.
    pub fn pending(&self) -> Vec<Timestamp> {
        self.pending.keys().copied().collect()
    }

    /// The records that rebuild the durable state: the lease and the logged stable.
    pub fn checkpoint<R: From<replica::Record<Timestamp>>>(&self, emit: &mut dyn FnMut(R)) {
        let up_to = self.lease.up_to();
        emit(replica::Record::Served { up_to }.into());
        emit(replica::Record::<Timestamp>::Watermark(self.logged).into());
    }
}

/// A [`VectorOracle`]'s durable state: `StableVTS` reached this vector and may have been
/// published. The oracle's protocol logs it in a record of its own, converted from this (the
/// oracle names no protocol's records).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedVector(pub VClock);

/// VTS's oracle (DST, NSDI '21, §2.2, Fig. 4: `StableVTS` and one queue per worker; the
/// `vts` protocol's): workers install their tags ⟨i:t⟩ with the tags they depend on, and the
/// oracle stabilises them. The paper leaves the "stability protocol" unspecified; the rule
/// here: ⟨i:t⟩ becomes stable once ⟨i:t−1⟩ is stable and every dep ⟨j:s⟩ has
/// `s ≤ StableVTS[j]`.
///
/// Durability, as [`Oracle`]'s stable timestamp: a `StableVTS` that leaves the oracle (a reply,
/// an announcement, a worker told its tags are stable) was logged first, so it never goes back.
/// The queues are volatile: the workers keep what they installed until told it is stable, and
/// install it again (see `vts`'s module docs, "Failures"). Unlike `gts`'s stable timestamp, the
/// vector needs nothing from workers that have not installed anything, so a restarted oracle
/// goes on at once.
///
/// *Closed vectors.* Every vector the oracle publishes is *closed*: with each tag ⟨i:t⟩ it
/// admits, it admits ⟨i:t−1⟩ and every dep of ⟨i:t⟩. Stabilising keeps a vector closed, and so
/// does the component-wise maximum of two closed vectors (the union of two sets closed under
/// deps is closed under deps). So an incarnation may start from, and merge at any time, any
/// vector some oracle published: the largest one each node heard of, which a node reports
/// ([`Self::heard`]) when an incarnation asks ([`Self::to_ask`]). That is how a new oracle
/// incarnation under fail-over ([`Self::take_over`]) learns how far the workers were told
/// their tags are stable (they forgot those tags), and why a restarted one asks too.
#[derive(Debug)]
pub struct VectorOracle {
    /// `StableVTS`.
    stable: VClock,
    /// The largest vector logged (hence possibly published).
    logged: VClock,
    /// Per worker, the entries above its stable counter, by counter.
    queues: Vec<BTreeMap<u64, Deps>>,
    /// Per worker, the stable counter it was last told of.
    told: Vec<u64>,
    /// After a restart or a take-over: the nodes that have not yet said which stable vector
    /// they heard of (and installed again what they owe).
    unanswered: BTreeSet<NodeId>,
    /// When the unanswered nodes were last asked (`None`: not yet).
    asked: Option<Timestamp>,
}

impl VectorOracle {
    /// A fresh oracle for `nodes` workers, nothing stable.
    pub fn new(nodes: usize) -> VectorOracle {
        VectorOracle {
            stable: VClock::new(nodes),
            logged: VClock::new(nodes),
            queues: vec![BTreeMap::new(); nodes],
            told: vec![0; nodes],
            unanswered: BTreeSet::new(),
            asked: None,
        }
    }

    /// A new incarnation under fail-over (see the type's docs): it starts from `start`, the
    /// largest vector its node heard of (closed), and asks every node what it heard of.
    pub fn take_over(nodes: usize, start: &VClock) -> VectorOracle {
        let mut oracle = VectorOracle::new(nodes);
        oracle.merge(start);
        oracle.ask_everyone();
        oracle
    }

    fn ask_everyone(&mut self) {
        self.unanswered = (0..self.queues.len()).map(|i| NodeId(i as u32)).collect();
        self.asked = None;
    }

    /// Raise `StableVTS` to at least `v`, a vector some oracle published (ignored if of
    /// another cluster size), and drop the queued entries it covers.
    fn merge(&mut self, v: &VClock) {
        if v.len() != self.stable.len() {
            return;
        }
        self.stable.merge(v);
        for (i, queue) in self.queues.iter_mut().enumerate() {
            let stable = self.stable.get(i);
            *queue = queue.split_off(&(stable + 1));
        }
    }

    /// `node` heard of the stable vector `v` (in answer to [`Self::to_ask`]): merge it, and
    /// stabilise what that lets through.
    pub fn heard(&mut self, node: NodeId, v: &VClock) {
        self.unanswered.remove(&node);
        self.merge(v);
        self.stabilize();
    }

    /// After a restart or a take-over, the nodes to ask (again, every `patience`) for the
    /// stable vector they heard of and to install what they owe, until each answered.
    pub fn to_ask(&mut self, now: Timestamp, patience: Duration) -> Vec<NodeId> {
        if self.unanswered.is_empty() || self.asked.is_some_and(|at| now.since(at) < patience) {
            return Vec::new();
        }
        self.asked = Some(now);
        self.unanswered.iter().copied().collect()
    }

    /// Replay of the record [`Self::publish`] logs (ignored if of another cluster size).
    pub fn replay_stable(&mut self, v: &VClock) {
        if v.len() == self.stable.len() {
            self.stable.merge(v);
            self.logged.merge(v);
        }
    }

    /// After replay: if anything was logged, this is a restart and the queues were lost.
    pub fn recovered(&mut self) {
        if self.logged.entries().iter().any(|t| *t > 0) {
            self.ask_everyone();
        }
        self.told = self.logged.entries().to_vec();
    }

    /// `INSTALL(⟨worker:t⟩, deps)`; the caller then runs [`Self::stabilize`]. Whether it is new
    /// (not stable, not queued already).
    pub fn install(&mut self, worker: NodeId, t: u64, deps: Deps) -> bool {
        let i = worker.0 as usize;
        if i >= self.queues.len() || t <= self.stable.get(i) {
            return false;
        }
        match self.queues[i].entry(t) {
            std::collections::btree_map::Entry::Occupied(_) => false,
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(deps);
                true
            }
        }
    }

    /// `STABILIZE`: move every entry whose predecessor and deps are stable into `StableVTS`,
    /// until none moves; whether any did.
    pub fn stabilize(&mut self) -> bool {
        let mut moved = false;
        loop {
            let mut progress = false;
            for i in 0..self.queues.len() {
                loop {
                    let next = self.stable.get(i) + 1;
                    let ready = self.queues[i]
                        .get(&next)
                        .is_some_and(|deps| deps.within(&self.stable));
                    if !ready {
                        break;
                    }
                    self.queues[i].remove(&next);
                    self.stable.set(i, next);
                    progress = true;
                }
            }
            if !progress {
                return moved;
            }
            moved = true;
        }
    }

    /// `StableVTS`, logged first if it moved past the last vector logged.
    pub fn publish<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>) -> VClock
    where
        P::Record: From<LoggedVector>,
    {
        if self.stable != self.logged {
            self.logged = self.stable.clone();
            ctx.persist(LoggedVector(self.stable.clone()).into());
        }
        self.stable.clone()
    }

    /// `StableVTS` now (what the caller last published, or more).
    pub fn stable(&self) -> &VClock {
        &self.stable
    }

    /// A worker's logged stable counter, if the worker is one: what it may be told.
    pub fn logged_of(&self, worker: NodeId) -> Option<u64> {
        let i = worker.0 as usize;
        (i < self.logged.len()).then(|| self.logged.get(i))
    }

    /// The largest vector logged (hence possibly published).
    pub fn logged(&self) -> &VClock {
        &self.logged
    }

    /// A worker's stable counter, if the worker is one.
    pub fn stable_of(&self, worker: NodeId) -> Option<u64> {
        let i = worker.0 as usize;
        (i < self.stable.len()).then(|| self.stable.get(i))
    }

    /// After [`Self::publish`]: the workers whose stable counter moved since they were last
    /// told (they are told the logged vector, and stop resending what it covers).
    pub fn to_tell(&mut self) -> Vec<NodeId> {
        let mut tell = Vec::new();
        for (i, told) in self.told.iter_mut().enumerate() {
            let logged = self.logged.get(i);
            if logged > *told {
                *told = logged;
                tell.push(NodeId(i as u32));
            }
        }
        tell
    }

    /// How many entries wait in the queues (a counter).
    pub fn queued(&self) -> usize {
        self.queues.iter().map(BTreeMap::len).sum()
    }

    /// The record that rebuilds the durable state: the logged vector.
    pub fn checkpoint<R: From<LoggedVector>>(&self, emit: &mut dyn FnMut(R)) {
        emit(LoggedVector(self.logged.clone()).into());
    }
}
