//! `walter`: Walter (Sovran, Power, Aguilera, Li, "Transactional storage for geo-replicated
//! systems", SOSP 2011), one of the baselines SSS is measured against (Kishi, Peluso, Korth,
//! Palmieri, ICDCS 2019, §V: "Walter … also uses vector clocks … re-implemented on our
//! infrastructure", Fig. 3 with replication degree 2).
//!
//! **Guarantee: parallel snapshot isolation** (PSI, Walter §3): every transaction reads a
//! causally closed snapshot taken at its site, no two concurrent committed transactions write
//! the same key, and commits reach every other site in causal order. PSI is weaker than
//! snapshot isolation: two sites may order two non-conflicting commits differently (the "long
//! fork", SSS §VI and Fig. 2), and write skew is allowed. The checker verifies histories at
//! `IsolationLevel::ParallelSnapshotIsolation`.
//!
//! # Walter on augur
//!
//! * **Sites and vector timestamps (Walter §4.1).** A site is a node. Every node keeps the
//!   vector timestamp of what it has applied (`cur`: entry `j` is the sequence number of the
//!   last transaction of node `j` applied here; a node applies each node's transactions in
//!   sequence). A transaction's start vector timestamp is its coordinator's `cur` at begin; its
//!   commit is numbered by its coordinator, `(coordinator, seq)`. A version written by
//!   `(j, s)` is visible to a snapshot `S` exactly when `s <= S[j]`.
//! * **Reads (Walter §4.3).** A read returns the newest version of the key visible to the
//!   start vector timestamp. The coordinator serves it itself when it stores the key (it has
//!   applied everything in its own snapshot); otherwise the nearest replica serves it once its
//!   own `cur` covers the snapshot (the read is parked until then), so every version the
//!   snapshot includes is there. Garbage collection keeps this true (below).
//! * **Preferred sites (Walter §4.2).** The preferred site of a key is its partition's master.
//! * **Fast commit (Walter §4.4).** A transaction writing only keys its coordinator masters
//!   commits there, in one handler: every written key must be unmodified since the snapshot
//!   (its newest version here is visible to the start vector timestamp) and not locked by a
//!   slow commit in flight; otherwise it aborts with `WriteWriteConflict`.
//! * **Slow commit (Walter §4.5).** Otherwise two-phase commit among the preferred sites of
//!   the written keys: each locks its keys (no waiting: a key locked by another transaction is
//!   a conflict, as in Walter), checks them unmodified since the snapshot, persists the locks
//!   and votes. With every yes the coordinator commits the transaction as its own, `(c, seq)`.
//!   A preferred site keeps its locks until it *applies* the transaction through propagation,
//!   so its conflict check always sees every committed write of its keys (applied, or still
//!   locked). One no, or a silent site at `participant_timeout`, aborts (`Abort` releases the
//!   locks).
//! * **Asynchronous propagation (Walter §4.6).** The coordinator applies its committed
//!   transaction at once (answering its client from its own site), then sends it to every other
//!   node — with the writes that node stores, possibly none, since each node must count every
//!   transaction to apply the next in sequence. A node applies a transaction of `j` numbered
//!   `s` only once it applied `j`'s `s - 1` and everything in the transaction's start vector
//!   timestamp (causal order); until then it waits in an inbox.
//! * **Read-only transactions never abort** (there is nothing to check), except when a remote
//!   read times out under faults (a replica cut off from the snapshot's commits). **Update
//!   transactions abort only on write-write conflicts** (and on timeouts under faults).
//! * **Both request forms**: interactive, and one-shot through the shared `AtCoordinator`.
//!
//! **Left out:** counting sets (csets, Walter §3.3: commutative updates that never conflict),
//! since augur's values are opaque bytes; Walter's containers and per-object replica sets
//! (placement is augur's ring, the preferred site the partition master); disaster-safe
//! durability (Walter waits for `f+1` sites before telling the client of commits it calls
//! disaster-safe; here a commit is durable at its coordinator's log and propagation retries
//! until every node applied it); and Walter's site reconfiguration. A Walter site is a whole
//! data centre; here each node is a site, so vector timestamps have one entry per node.
//!
//! # Version order and garbage collection
//!
//! Each key's versions at a replica are kept in apply order (`Version::ts` is the node-local
//! apply position), which is the causal order of their writers: two committed writers of a key
//! are never concurrent, so one is in the other's snapshot and applied before it everywhere.
//! The writer's sequence number (its "stamp") is kept beside the store until the version is
//! known visible to every snapshot still in use. Every `gc_interval` each node tells every
//! other (`Status`) what it has applied and the oldest snapshot its transactions still use
//! (`low`: the entrywise minimum of `cur` and their start vector timestamps, which only grows).
//! A version whose stamp is within every node's `low` is visible to every snapshot that can
//! still be read, so the versions older than the newest such version are dropped and its stamp
//! forgotten (a version without stamp is visible to every snapshot).
//!
//! Commit timestamps do not order each key's versions (the order is causal, not a scalar), so
//! the checker infers version order from what is read.
//!
//! # Failures
//!
//! Links may lose and reorder messages, partitions heal, nodes crash and restart:
//!
//! * **Durable state** ([`Record`]): every transaction a node applies (`Applied`, with its
//!   sequence number, start vector timestamp and writes — all of them at its coordinator, which
//!   is also its commit decision), a preferred site's locks before its yes vote (`Locked`) and
//!   their release on abort (`Unlocked`), and transaction-id reservations. A checkpoint holds
//!   `cur`, the versions, their stamps, the coordinator's transactions not yet applied
//!   everywhere and the locks held. A restarted node resumes with the same `cur`, so it never
//!   reuses a sequence number that left it (output leaves only once durable).
//! * **Propagation retries.** A coordinator keeps each of its committed transactions (its
//!   outbox) until every node reported (`Status`) having applied it, and resends it to a node
//!   that has not once a round trip and two status intervals have passed.
//! * **Termination.** A preferred site holding a transaction's locks for `participant_timeout`
//!   asks its coordinator (at once after a restart), which resends the transaction if it
//!   committed (still in its outbox, since that site has not applied it), says nothing while
//!   collecting votes, and otherwise presumes abort.
//! * A prepare that arrives after its transaction ended at a preferred site is ignored for
//!   `gc_retention`.
//!
//! # Mutants (`augur check --mutant`)
//!
//! * `no-ww-check`: fast and slow commits skip the check that each written key is unmodified
//!   since the snapshot (locks are still taken): two concurrent writers of a key both commit
//!   (lost update).
//! * `no-causal-apply`: a node applies a remote transaction as soon as it arrives, without
//!   waiting for the ones its snapshot included: a snapshot taken there may miss a
//!   transaction's causal past while it sees the transaction.

use crate::common::coordinator::{
    InteractiveCoordinator, Pending, ReadInFlight, serve_interactive,
};
use crate::common::locks::{Acquire, LockManager, LockMode, Policy};
use crate::common::replica::{self, TxnIds, Writes};
use crate::common::two_phase::GC_BATCH;
use crate::common::vclock::VClock;
use crate::protocol_info::Engine;
use crate::protocol_info::{
    INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, Promise, ProtocolInfo,
};
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientReply, ClientRequest, Key, NodeId};
use augur_types::{RequestError, Timestamp, TxnId, Value};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// `walter`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "walter",
    isolation: IsolationLevel::ParallelSnapshotIsolation,
    isolation_with: &[],
    paper: "Walter (SOSP 2011), SSS (ICDCS 2019) §V baseline",
    summary: "per-node vector timestamps; fast commit at the preferred site (partition master), slow commit by 2PC among preferred sites; asynchronous propagation applied in causal order",
    engine: Engine::Own,
    commit_order_evidence: false,
    promises: &[Promise::AbortFreeReadOnly],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: &[],
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
};

/// The mutants `walter` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-ww-check",
        "commits skip the check that each written key is unmodified since the snapshot (lost updates)",
    ),
    (
        "no-causal-apply",
        "remote transactions are applied on arrival, not in causal order (snapshots that are not causally closed)",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    NoWwCheck,
    NoCausalApply,
}

impl Mutant {
    fn named(name: &str) -> Option<Mutant> {
        match name {
            "no-ww-check" => Some(Mutant::NoWwCheck),
            "no-causal-apply" => Some(Mutant::NoCausalApply),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Coordinator → a replica of `key`: the newest version visible to `start`.
    Read {
        txn: TxnId,
        seq: u32,
        key: Key,
        start: VClock,
    },
    /// Replica → coordinator.
    ReadReply {
        txn: TxnId,
        seq: u32,
        value: Option<Value>,
    },
    /// Coordinator → the preferred site of `keys`: lock them, check them unmodified since
    /// `start`, vote.
    Prepare {
        txn: TxnId,
        start: VClock,
        keys: Vec<Key>,
    },
    /// Preferred site → coordinator: yes, or no and why.
    Vote {
        txn: TxnId,
        vote: Result<(), AbortReason>,
    },
    /// Coordinator → preferred sites: `txn` aborted, release its locks.
    Abort { txn: TxnId },
    /// Coordinator → every other node: `txn` committed as the coordinator's `seq`-th
    /// transaction, with snapshot `start` and the writes the receiver stores.
    Propagate {
        txn: TxnId,
        seq: u64,
        start: VClock,
        writes: Writes,
    },
    /// Preferred site → coordinator: what became of `txn`, whose locks are held here?
    QueryOutcome { txn: TxnId },
    /// Every node → every other, each `gc_interval`: what it has applied, and the oldest
    /// snapshot its transactions still read.
    Status { applied: VClock, low: VClock },
}

impl Msg {
    fn clocks(&self) -> Vec<&VClock> {
        match self {
            Msg::Read { start, .. } | Msg::Prepare { start, .. } | Msg::Propagate { start, .. } => {
                vec![start]
            }
            Msg::Status { applied, low } => vec![applied, low],
            _ => Vec::new(),
        }
    }
}

/// Reads, prepares, aborts and propagation come from the transaction's coordinator; prepares go
/// to the master of every key; answers go back to the coordinator; every vector timestamp has
/// one entry per node (a clock of another length would make comparisons panic).
impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        let nodes = at.placement.node_count();
        for clock in self.clocks() {
            if clock.len() != nodes {
                return Err(at.bad(format!(
                    "a vector timestamp of {} entries in a cluster of {nodes} nodes",
                    clock.len()
                )));
            }
        }
        match self {
            Msg::Read { txn, key, .. } => {
                at.txn_of_sender(*txn)?;
                at.key_here(key)
            }
            Msg::Prepare { txn, keys, .. } => {
                at.txn_of_sender(*txn)?;
                keys.iter()
                    .try_for_each(|key| at.master_here(at.placement.partition_of(key)))
            }
            Msg::Abort { txn } => at.txn_of_sender(*txn),
            Msg::Propagate {
                txn,
                seq,
                start,
                writes,
            } => {
                at.txn_of_sender(*txn)?;
                if *seq <= start.get(at.from.0 as usize) {
                    return Err(at.bad(format!(
                        "transaction {txn:?} numbered {seq}, within its own snapshot {start}"
                    )));
                }
                writes.iter().try_for_each(|(key, _)| at.key_here(key))
            }
            Msg::ReadReply { txn, .. } | Msg::Vote { txn, .. } | Msg::QueryOutcome { txn } => {
                at.txn_here(*txn)
            }
            Msg::Status { .. } => Ok(()),
        }
    }
}

#[derive(Debug)]
pub enum Timer {
    /// Periodic: status, propagation retries, termination queries, garbage collection.
    Tick,
    /// A coordinator's read `seq` of a transaction got no answer in time.
    Read(TxnId, u32),
    /// A coordinator's votes did not all arrive in time.
    Votes(TxnId),
}

/// What a node writes to its log and rebuilds from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// The 2PC kit's records this protocol uses: `IdsReserved` and, in checkpoints, `Versions`
    /// (a key's versions with their apply positions, oldest first).
    Kit(replica::Record<()>),
    /// This node applied `txn`, its coordinator's `seq`-th transaction, read at `start`:
    /// `writes` are all its writes at its coordinator, the ones stored here elsewhere. Replayed
    /// again (from a checkpoint's outbox) once applied, it only refills the outbox.
    Applied {
        txn: TxnId,
        seq: u64,
        start: VClock,
        writes: Writes,
    },
    /// This preferred site voted yes for `txn`: it holds `keys` until it applies `txn` or
    /// learns it aborted.
    Locked { txn: TxnId, keys: Vec<Key> },
    /// `txn` aborted: its locks here are released.
    Unlocked { txn: TxnId },
    /// Checkpoints only, first: the applied vector timestamp and the last apply position.
    Position { cur: VClock, pos: u64 },
    /// Checkpoints only: stamps of versions not yet visible everywhere, in apply order (apply
    /// position, writer, the writer's sequence number).
    Stamps(Vec<(u64, TxnId, u64)>),
}

impl From<replica::Record<()>> for Record {
    fn from(record: replica::Record<()>) -> Record {
        Record::Kit(record)
    }
}

/// Counters `augur bench` reads (see [`Protocol::counters`]).
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    fast_commits: u64,
    slow_commits: u64,
    ww_conflicts: u64,
    reads_parked: u64,
    applied_remote: u64,
    resent: u64,
}

/// A transaction this node coordinates.
struct Coord {
    read_only: bool,
    start: VClock,
    pending: Option<Pending>,
    read: ReadInFlight<()>,
    last_active: Timestamp,
    phase: Phase,
}

enum Phase {
    Executing,
    /// Slow commit: waiting for the preferred sites' votes.
    Voting {
        sites: Vec<NodeId>,
        waiting: BTreeSet<NodeId>,
        writes: Writes,
    },
}

/// A committed transaction of this node that some node has not applied yet.
struct Outgoing {
    txn: TxnId,
    start: VClock,
    writes: Writes,
    /// When it was last sent (to anyone).
    sent_at: Timestamp,
}

/// A remote transaction received, waiting for its causal past to be applied here.
struct Incoming {
    txn: TxnId,
    start: VClock,
    writes: Writes,
}

/// Locks a preferred site holds for a slow commit.
struct Held {
    keys: Vec<Key>,
    /// When its outcome was last asked for (or the vote, before the first time).
    last_query: Timestamp,
}

/// A read parked until this replica has applied its snapshot.
struct ParkedRead {
    txn: TxnId,
    seq: u32,
    key: Key,
    start: VClock,
}

/// One node running `walter`.
pub struct Walter {
    env: NodeEnv,
    mutant: Option<Mutant>,
    /// Versions in apply order (`ts`: apply position).
    store: MvStore<()>,
    /// What this node has applied: entry `j`, the sequence number of `j`'s last transaction.
    cur: VClock,
    /// The last apply position handed out.
    pos: u64,
    /// The sequence number of each writer whose versions here are not yet known visible to
    /// every snapshot in use.
    stamps: FxHashMap<TxnId, u64>,
    /// The stamped writers in apply order, with their apply positions.
    unstable: VecDeque<(u64, TxnId)>,
    /// Versions at apply positions up to this one are visible to every snapshot in use.
    stable_pos: u64,
    /// Remote transactions waiting for their causal past, by (coordinator, sequence number).
    inbox: BTreeMap<(NodeId, u64), Incoming>,
    /// This node's committed transactions not yet applied everywhere, by sequence number.
    outbox: BTreeMap<u64, Outgoing>,
    outbox_ids: FxHashMap<TxnId, u64>,
    /// Per node, the newest `Status` it sent: what it applied and the oldest snapshot in use.
    applied_at: Vec<VClock>,
    low_at: Vec<VClock>,
    /// Preferred-site locks of slow commits (never waited for: a held key is a conflict).
    locks: LockManager,
    held: FxHashMap<TxnId, Held>,
    /// Transactions that ended here as a preferred site, with when, so a late prepare is
    /// ignored.
    ended: FxHashMap<TxnId, Timestamp>,
    parked: Vec<ParkedRead>,
    coord: FxHashMap<TxnId, Coord>,
    ids: TxnIds,
    counters: Counters,
}

impl Walter {
    /// What this node has applied (its vector timestamp).
    pub fn applied(&self) -> &VClock {
        &self.cur
    }

    /// The newest version of `key` here visible to `start`: its writer and value.
    pub fn read_visible(&self, key: &Key, start: &VClock) -> Option<(TxnId, Option<Value>)> {
        let entry = self.store.get(key)?;
        // Oldest first (apply order, which is causal order): the last visible is the newest.
        let v = entry
            .versions()
            .filter(|v| self.visible(v.writer, start))
            .last()?;
        Some((v.writer, v.value.clone()))
    }

    fn id(&self) -> NodeId {
        self.env.id
    }

    fn nodes(&self) -> usize {
        self.env.placement.node_count()
    }

    /// Whether the versions `writer` installed are in snapshot `start`.
    fn visible(&self, writer: TxnId, start: &VClock) -> bool {
        match self.stamps.get(&writer) {
            Some(seq) => *seq <= start.get(writer.coordinator().0 as usize),
            // Known visible to every snapshot in use.
            None => true,
        }
    }

    fn stores(&self, key: &Key) -> bool {
        let p = &self.env.placement;
        p.replicates(self.id(), p.partition_of(key))
    }

    fn stored_by(&self, node: NodeId, writes: &Writes) -> Writes {
        let p = &self.env.placement;
        writes
            .iter()
            .filter(|(k, _)| p.replicates(node, p.partition_of(k)))
            .cloned()
            .collect()
    }

    /// Send `msg` to `to`, or handle it at once when `to` is this node.
    fn deliver(&mut self, ctx: &mut Ctx<'_, Self>, to: NodeId, msg: Msg) {
        if to == self.id() {
            self.handle(ctx, to, msg);
        } else {
            ctx.send(to, msg);
        }
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Read {
                txn,
                seq,
                key,
                start,
            } => self.serve_read(
                ctx,
                ParkedRead {
                    txn,
                    seq,
                    key,
                    start,
                },
            ),
            Msg::ReadReply { txn, seq, value } => self.read_reply(ctx, txn, seq, value),
            Msg::Prepare { txn, start, keys } => self.prepare(ctx, txn, start, keys),
            Msg::Vote { txn, vote } => self.vote(ctx, from, txn, vote),
            Msg::Abort { txn } => self.on_abort(ctx, txn),
            Msg::Propagate {
                txn,
                seq,
                start,
                writes,
            } => self.receive(ctx, txn, seq, start, writes),
            Msg::QueryOutcome { txn } => self.query_outcome(ctx, from, txn),
            Msg::Status { applied, low } => self.status(ctx, from, applied, low),
        }
    }

    // ----- applying transactions (live and in replay alike) -----

    /// Apply `txn`, its coordinator's `seq`-th transaction: count it in `cur`, install the
    /// writes stored here at the next apply position, release its preferred-site locks.
    fn apply(&mut self, txn: TxnId, seq: u64, writes: &Writes) {
        let origin = txn.coordinator().0 as usize;
        // `max`: the `no-causal-apply` mutant may apply out of sequence.
        let newest = self.cur.get(origin).max(seq);
        self.cur.set(origin, newest);
        self.pos += 1;
        let ts = Timestamp(self.pos);
        let mut stamped = false;
        for (key, value) in writes {
            if self.stores(key) {
                self.store.entry(key).put_committed(txn, ts, value.clone());
                stamped = true;
            }
        }
        if stamped {
            self.stamps.insert(txn, seq);
            self.unstable.push_back((self.pos, txn));
        }
        self.locks.release_all(txn);
        self.held.remove(&txn);
    }

    /// Whether this node already applied `txn`, numbered `seq` by its coordinator.
    fn has_applied(&self, txn: TxnId, seq: u64) -> bool {
        self.cur.get(txn.coordinator().0 as usize) >= seq
    }

    /// A remote transaction arrived: apply it, and whatever waited for it, once causally ready.
    fn receive(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        seq: u64,
        start: VClock,
        writes: Writes,
    ) {
        if self.has_applied(txn, seq) {
            return;
        }
        if self.mutant == Some(Mutant::NoCausalApply) {
            self.apply_remote(ctx, txn, seq, start, writes);
            return self.wake_reads(ctx);
        }
        self.inbox
            .insert((txn.coordinator(), seq), Incoming { txn, start, writes });
        self.drain_inbox(ctx);
    }

    /// Apply every waiting transaction whose causal past is applied here, repeatedly.
    fn drain_inbox(&mut self, ctx: &mut Ctx<'_, Self>) {
        let mut progress = true;
        while progress {
            progress = false;
            for origin in 0..self.nodes() {
                let next = (NodeId(origin as u32), self.cur.get(origin) + 1);
                let ready = self
                    .inbox
                    .get(&next)
                    .is_some_and(|t| self.cur.dominates(&t.start));
                if ready {
                    let t = self.inbox.remove(&next).expect("checked above");
                    self.apply_remote(ctx, t.txn, next.1, t.start, t.writes);
                    progress = true;
                }
            }
        }
        // Stale duplicates (applied since they arrived) are dropped.
        let cur = self.cur.clone();
        self.inbox
            .retain(|(origin, seq), _| *seq > cur.get(origin.0 as usize));
        self.wake_reads(ctx);
    }

    fn apply_remote(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        seq: u64,
        start: VClock,
        writes: Writes,
    ) {
        ctx.charge(Work::writes(usize::from(!writes.is_empty())));
        if self.held.contains_key(&txn) {
            // A prepare reordered behind its own commit is ignored.
            self.ended.insert(txn, ctx.now());
        }
        self.apply(txn, seq, &writes);
        self.counters.applied_remote += 1;
        ctx.persist(Record::Applied {
            txn,
            seq,
            start,
            writes,
        });
    }

    // ----- coordinator: client requests -----

    /// The coordinator of a transaction that is executing with no request in flight, or the
    /// answer owed to a request that cannot proceed.
    fn executing(&mut self, txn: TxnId) -> Result<&mut Coord, ClientReply> {
        let Some(t) = self.coord.get_mut(&txn) else {
            return Err(ClientReply::Aborted(AbortReason::TransactionLost));
        };
        if t.pending.is_some() || !matches!(t.phase, Phase::Executing) {
            let why = format!("transaction {txn:?} already has a request in flight");
            return Err(ClientReply::Rejected(RequestError::Invalid(why)));
        }
        Ok(t)
    }

    fn read_reply(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, seq: u32, value: Option<Value>) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        if !t.read.awaits(seq) || !matches!(t.phase, Phase::Executing) {
            return;
        }
        let Some(pending) = t.pending.take() else {
            return;
        };
        t.read.answered(seq);
        t.last_active = ctx.now();
        pending.answer(ctx, ClientReply::Value(value));
    }

    /// Walter §4.4: every written key is preferred here; check and commit in this handler.
    fn fast_commit(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        txn: TxnId,
        start: VClock,
        writes: Writes,
        keys: &[Key],
    ) {
        ctx.charge(Work::reads(keys.len()));
        let free = keys
            .iter()
            .all(|k| self.locks.holders(k).next().is_none() && self.unmodified(k, &start));
        if !free {
            self.counters.ww_conflicts += 1;
            let reason = AbortReason::WriteWriteConflict;
            return pending.answer(ctx, ClientReply::Aborted(reason));
        }
        self.counters.fast_commits += 1;
        self.commit_here(ctx, pending, txn, start, writes);
    }

    /// Whether `key`'s newest version here is in snapshot `start` (the `no-ww-check` mutant
    /// says yes regardless).
    fn unmodified(&self, key: &Key, start: &VClock) -> bool {
        if self.mutant == Some(Mutant::NoWwCheck) {
            return true;
        }
        let newest = self.store.get(key).and_then(|e| e.latest_committed());
        newest.is_none_or(|v| self.visible(v.writer, start))
    }

    /// `txn` commits: number it, apply it here, log it (the commit decision), answer the
    /// client (held until durable) and propagate it to every other node.
    fn commit_here(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        txn: TxnId,
        start: VClock,
        writes: Writes,
    ) {
        let me = self.id();
        let seq = self.cur.get(me.0 as usize) + 1;
        ctx.charge(Work::writes(1));
        self.apply(txn, seq, &writes);
        ctx.persist(Record::Applied {
            txn,
            seq,
            start: start.clone(),
            writes: writes.clone(),
        });
        pending.answer(
            ctx,
            ClientReply::Committed {
                commit_ts: ctx.now(),
            },
        );
        self.outbox.insert(
            seq,
            Outgoing {
                txn,
                start,
                writes,
                sent_at: ctx.now(),
            },
        );
        self.outbox_ids.insert(txn, seq);
        let others: Vec<NodeId> = self.env.placement.nodes().filter(|n| *n != me).collect();
        for node in others {
            self.propagate(ctx, node, seq);
        }
        self.wake_reads(ctx);
    }

    /// Send this node's `seq`-th transaction to `node`, with the writes `node` stores.
    fn propagate(&mut self, ctx: &mut Ctx<'_, Self>, node: NodeId, seq: u64) {
        let Some(out) = self.outbox.get(&seq) else {
            return;
        };
        let msg = Msg::Propagate {
            txn: out.txn,
            seq,
            start: out.start.clone(),
            writes: self.stored_by(node, &out.writes),
        };
        ctx.send(node, msg);
    }

    /// Abort `txn`, coordinated here: release its locks at the preferred sites if it was
    /// committing, answer the client.
    fn abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        let Some(t) = self.coord.remove(&txn) else {
            return;
        };
        if let Phase::Voting { sites, .. } = t.phase {
            for site in sites {
                self.deliver(ctx, site, Msg::Abort { txn });
            }
        }
        if let Some(pending) = t.pending {
            pending.answer(ctx, ClientReply::Aborted(reason));
        }
    }

    fn vote(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        vote: Result<(), AbortReason>,
    ) {
        let Some(Phase::Voting { sites, waiting, .. }) =
            self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        if !sites.contains(&from) {
            return;
        }
        match vote {
            Err(reason) => {
                if reason == AbortReason::WriteWriteConflict {
                    self.counters.ww_conflicts += 1;
                }
                return self.abort(ctx, txn, reason);
            }
            Ok(()) => {
                waiting.remove(&from);
            }
        }
        if !waiting.is_empty() {
            return;
        }
        let t = self.coord.remove(&txn).expect("checked above");
        let (Phase::Voting { writes, .. }, Some(pending)) = (t.phase, t.pending) else {
            return;
        };
        self.counters.slow_commits += 1;
        self.commit_here(ctx, pending, txn, t.start, writes);
    }

    /// A preferred site asks what became of `txn` (see the module docs, "Termination").
    fn query_outcome(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId) {
        if let Some(seq) = self.outbox_ids.get(&txn).copied() {
            // Committed, and not yet applied there: send it again.
            return self.propagate(ctx, from, seq);
        }
        if self.coord.contains_key(&txn) {
            // Still collecting votes: the decision, or the vote timeout's abort, will come.
            return;
        }
        if from != self.id() {
            ctx.send(from, Msg::Abort { txn });
        } else {
            // This node asked itself (it was the transaction's coordinator and one of its
            // preferred sites, and lost the transaction in a crash): presumed abort here too,
            // or its preferred-site locks would be held forever. A committed transaction is
            // in the outbox until applied everywhere, and applying it releases them.
            self.on_abort(ctx, txn);
        }
    }

    // ----- replica and preferred site -----

    fn serve_read(&mut self, ctx: &mut Ctx<'_, Self>, read: ParkedRead) {
        if !self.cur.dominates(&read.start) {
            // Some transaction in the snapshot is not applied here yet.
            self.counters.reads_parked += 1;
            self.parked.push(read);
            return;
        }
        ctx.charge(Work::reads(1));
        let value = self
            .read_visible(&read.key, &read.start)
            .and_then(|(_, v)| v);
        let msg = Msg::ReadReply {
            txn: read.txn,
            seq: read.seq,
            value,
        };
        self.deliver(ctx, read.txn.coordinator(), msg);
    }

    /// Serve the parked reads whose snapshot is now applied here.
    fn wake_reads(&mut self, ctx: &mut Ctx<'_, Self>) {
        if self.parked.is_empty() {
            return;
        }
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|r| self.cur.dominates(&r.start));
        self.parked = waiting;
        for read in ready {
            self.serve_read(ctx, read);
        }
    }

    /// Walter §4.5, a preferred site's half of a slow commit: lock `keys` (a key another
    /// transaction holds is a conflict), check them unmodified since `start`, persist, vote.
    fn prepare(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, start: VClock, keys: Vec<Key>) {
        if self.held.contains_key(&txn) || self.ended.contains_key(&txn) {
            return;
        }
        ctx.charge(Work::reads(keys.len()));
        let mut vote = Ok(());
        for key in &keys {
            let granted = matches!(
                self.locks.acquire(txn, (), key, LockMode::Exclusive),
                Acquire::Granted
            );
            if !granted || !self.unmodified(key, &start) {
                vote = Err(AbortReason::WriteWriteConflict);
                break;
            }
        }
        if vote.is_err() {
            self.locks.release_all(txn);
            self.ended.insert(txn, ctx.now());
        } else {
            ctx.persist(Record::Locked {
                txn,
                keys: keys.clone(),
            });
            self.held.insert(
                txn,
                Held {
                    keys,
                    last_query: ctx.now(),
                },
            );
        }
        self.deliver(ctx, txn.coordinator(), Msg::Vote { txn, vote });
    }

    fn on_abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        self.ended.insert(txn, ctx.now());
        if self.held.remove(&txn).is_some() {
            ctx.persist(Record::Unlocked { txn });
            self.locks.release_all(txn);
        }
    }

    // ----- status, retries, garbage collection -----

    /// The oldest snapshot this node's transactions still read: `cur`, lowered entrywise by
    /// every start vector timestamp of a transaction coordinated here.
    fn local_low(&self) -> VClock {
        let mut low = self.cur.clone();
        for t in self.coord.values() {
            for i in 0..low.len() {
                low.set(i, low.get(i).min(t.start.get(i)));
            }
        }
        low
    }

    fn status(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, applied: VClock, low: VClock) {
        let i = from.0 as usize;
        // Statuses may arrive out of order: keep the newest (both only grow).
        self.applied_at[i].merge(&applied);
        self.low_at[i].merge(&low);
        // Resend this node's transactions `from` has not applied, once a round trip and two
        // status intervals have passed since they were last sent (the status itself may be
        // one interval old).
        let me = self.id();
        let patience = 2 * self.env.placement.one_way(me, from) + 2 * self.env.options.gc_interval;
        let now = ctx.now();
        let done = self.applied_at[i].get(me.0 as usize);
        let late: Vec<u64> = self
            .outbox
            .range(done + 1..)
            .filter(|(_, o)| now.since(o.sent_at) >= patience)
            .map(|(seq, _)| *seq)
            .take(RESEND_BATCH)
            .collect();
        for seq in late {
            self.counters.resent += 1;
            self.propagate(ctx, from, seq);
            if let Some(o) = self.outbox.get_mut(&seq) {
                o.sent_at = now;
            }
        }
        self.prune_outbox();
    }

    /// Forget this node's transactions every other node has applied.
    fn prune_outbox(&mut self) {
        let me = self.id();
        let everywhere = self
            .env
            .placement
            .nodes()
            .filter(|n| *n != me)
            .map(|n| self.applied_at[n.0 as usize].get(me.0 as usize))
            .min()
            .unwrap_or(u64::MAX);
        while let Some(entry) = self.outbox.first_entry() {
            if *entry.key() > everywhere {
                break;
            }
            let out = entry.remove();
            self.outbox_ids.remove(&out.txn);
        }
    }

    /// Forget the stamps of versions visible to every snapshot still in use, and drop the
    /// versions older than the newest such one of each key.
    fn collect_garbage(&mut self) {
        let mut low = self.local_low();
        let me = self.id().0 as usize;
        for (i, other) in self.low_at.iter().enumerate() {
            if i != me {
                for j in 0..low.len() {
                    low.set(j, low.get(j).min(other.get(j)));
                }
            }
        }
        while let Some(&(pos, txn)) = self.unstable.front() {
            let seq = self.stamps.get(&txn).copied().unwrap_or(0);
            if seq > low.get(txn.coordinator().0 as usize) {
                break;
            }
            self.unstable.pop_front();
            self.stamps.remove(&txn);
            self.stable_pos = pos;
        }
        self.store
            .collect_garbage(Timestamp(self.stable_pos), GC_BATCH);
    }

    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        let now = ctx.now();
        let me = self.id();
        let others: Vec<NodeId> = self.env.placement.nodes().filter(|n| *n != me).collect();
        let (applied, low) = (self.cur.clone(), self.local_low());
        for node in others {
            let msg = Msg::Status {
                applied: applied.clone(),
                low: low.clone(),
            };
            ctx.send(node, msg);
        }
        // Termination: locks held long ask their coordinator.
        let patience = self.env.options.participant_timeout;
        let mut overdue: Vec<TxnId> = self
            .held
            .iter()
            .filter(|(_, h)| now.since(h.last_query) >= patience)
            .map(|(t, _)| *t)
            .collect();
        overdue.sort();
        for txn in overdue {
            if let Some(h) = self.held.get_mut(&txn) {
                h.last_query = now;
            }
            self.deliver(ctx, txn.coordinator(), Msg::QueryOutcome { txn });
        }
        // Transactions whose client vanished mid-execution: nothing of theirs is anywhere.
        let idle_after = self.env.options.idle_txn_timeout;
        self.coord.retain(|_, t| {
            !(matches!(t.phase, Phase::Executing)
                && t.pending.is_none()
                && now.since(t.last_active) >= idle_after)
        });
        let horizon = now.saturating_sub(self.env.options.gc_retention);
        self.ended.retain(|_, at| *at >= horizon);
        self.collect_garbage();
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
    }

    /// Rebuild state from one durable record (see [`Record`]).
    fn replay(&mut self, record: Record) {
        use replica::Record as Kit;
        match record {
            Record::Kit(Kit::IdsReserved { below }) => self.ids.resume_below(below),
            Record::Kit(Kit::Versions { key, versions }) => {
                replica::restore_versions(&mut self.store, &key, versions)
            }
            // Not written by this protocol.
            Record::Kit(_) => {}
            Record::Position { cur, pos } => {
                self.cur = cur;
                self.pos = pos;
            }
            Record::Stamps(stamps) => {
                for (pos, txn, seq) in stamps {
                    self.stamps.insert(txn, seq);
                    self.unstable.push_back((pos, txn));
                }
            }
            Record::Applied {
                txn,
                seq,
                start,
                writes,
            } => {
                if !self.has_applied(txn, seq) {
                    self.apply(txn, seq, &writes);
                }
                if txn.coordinator() == self.id() {
                    // Until every node reports having applied it (the first statuses after
                    // the restart prune it); resent at the first status.
                    let out = Outgoing {
                        txn,
                        start,
                        writes,
                        sent_at: Timestamp::ZERO,
                    };
                    self.outbox.insert(seq, out);
                    self.outbox_ids.insert(txn, seq);
                }
            }
            Record::Locked { txn, keys } => {
                for key in &keys {
                    // Granted: the yes vote was given with these keys free, and whatever
                    // locked them since replays after it.
                    let _ = self.locks.acquire(txn, (), key, LockMode::Exclusive);
                }
                self.held.insert(
                    txn,
                    Held {
                        keys,
                        // Overdue from the start: ask the coordinator at once.
                        last_query: Timestamp::ZERO,
                    },
                );
            }
            Record::Unlocked { txn } => {
                self.held.remove(&txn);
                self.locks.release_all(txn);
            }
        }
    }
}

/// The most transactions resent to one node per status.
const RESEND_BATCH: usize = 256;

impl InteractiveCoordinator for Walter {
    fn begin(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        read_only: bool,
        _age: Timestamp,
    ) {
        let txn = self.ids.allocate(ctx);
        self.coord.insert(
            txn,
            Coord {
                read_only,
                // Walter §4.3: the start vector timestamp is the site's current one.
                start: self.cur.clone(),
                pending: None,
                read: ReadInFlight::default(),
                last_active: ctx.now(),
                phase: Phase::Executing,
            },
        );
        // The snapshot is a vector; the begin time stands in for the client.
        let snapshot = ctx.now();
        pending.answer(ctx, ClientReply::Begun { txn, snapshot });
    }

    fn read(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, key: Key) {
        let now = ctx.now();
        let me = self.id();
        let placement = self.env.placement.clone();
        let t = match self.executing(txn) {
            Ok(t) => t,
            Err(reply) => return pending.answer(ctx, reply),
        };
        t.pending = Some(pending);
        t.last_active = now;
        let seq = t.read.begin(());
        let start = t.start.clone();
        // This node has applied its own snapshot: serve here whenever the key is stored here.
        let p = placement.partition_of(&key);
        let replica = if placement.replicates(me, p) {
            me
        } else {
            placement.closest_replica(me, p)
        };
        if replica != me {
            let timeout = self.env.options.participant_timeout;
            ctx.set_timer(timeout, Timer::Read(txn, seq));
        }
        let msg = Msg::Read {
            txn,
            seq,
            key,
            start,
        };
        self.deliver(ctx, replica, msg);
    }

    fn commit(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, writes: Writes) {
        let now = ctx.now();
        let me = self.id();
        let placement = self.env.placement.clone();
        let t = match self.executing(txn) {
            Ok(t) => t,
            Err(reply) => return pending.answer(ctx, reply),
        };
        if t.read_only && !writes.is_empty() {
            let err = RequestError::WriteInReadOnly(txn);
            return pending.answer(ctx, ClientReply::Rejected(err));
        }
        if writes.is_empty() {
            // A read-only transaction read a snapshot; there is nothing to check.
            self.coord.remove(&txn);
            return pending.answer(ctx, ClientReply::Committed { commit_ts: now });
        }
        // The preferred site of each written key is its partition's master.
        let mut by_site: BTreeMap<NodeId, Vec<Key>> = BTreeMap::new();
        for (key, _) in &writes {
            let site = placement.master(placement.partition_of(key));
            by_site.entry(site).or_default().push(key.clone());
        }
        if by_site.keys().all(|site| *site == me) {
            let start = t.start.clone();
            self.coord.remove(&txn);
            return self.fast_commit(ctx, pending, txn, start, writes, &by_site[&me]);
        }
        let sites: Vec<NodeId> = by_site.keys().copied().collect();
        t.pending = Some(pending);
        t.last_active = now;
        let start = t.start.clone();
        t.phase = Phase::Voting {
            waiting: sites.iter().copied().collect(),
            sites,
            writes,
        };
        ctx.set_timer(self.env.options.participant_timeout, Timer::Votes(txn));
        for (site, keys) in by_site {
            let msg = Msg::Prepare {
                txn,
                start: start.clone(),
                keys,
            };
            self.deliver(ctx, site, msg);
        }
    }

    fn abort_asked(&mut self, _ctx: &mut Ctx<'_, Self>, txn: TxnId) -> Result<(), String> {
        if let Some(Phase::Voting { .. }) = self.coord.get(&txn).map(|t| &t.phase) {
            return Err(format!("transaction {txn:?} is already committing"));
        }
        // Nothing of an executing transaction is anywhere but here.
        self.coord.remove(&txn);
        Ok(())
    }
}

impl Protocol for Walter {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record;
    const FORMS: &'static [augur_contract::forms::RequestForm] = INTERACTIVE_AND_ONE_SHOT;

    fn new(env: &NodeEnv) -> Self {
        let n = env.placement.node_count();
        Walter {
            env: env.clone(),
            mutant: env.options.mutant.as_deref().and_then(Mutant::named),
            store: MvStore::new(),
            cur: VClock::new(n),
            pos: 0,
            stamps: FxHashMap::default(),
            unstable: VecDeque::new(),
            stable_pos: 0,
            inbox: BTreeMap::new(),
            outbox: BTreeMap::new(),
            outbox_ids: FxHashMap::default(),
            applied_at: vec![VClock::new(n); n],
            low_at: vec![VClock::new(n); n],
            locks: LockManager::new(Policy::NoWait),
            held: FxHashMap::default(),
            ended: FxHashMap::default(),
            parked: Vec::new(),
            coord: FxHashMap::default(),
            ids: TxnIds::new(env.id),
            counters: Counters::default(),
        }
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Record>) -> Self {
        let mut node = Walter::new(env);
        for record in records {
            node.replay(record);
        }
        node
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        emit(Record::Position {
            cur: self.cur.clone(),
            pos: self.pos,
        });
        self.ids.checkpoint::<Record, ()>(emit);
        replica::checkpoint_versions::<_, _, Record>(&self.store, emit);
        let stamps = self
            .unstable
            .iter()
            .filter_map(|(pos, txn)| self.stamps.get(txn).map(|seq| (*pos, *txn, *seq)))
            .collect();
        emit(Record::Stamps(stamps));
        // Applied already (`Position` covers them): replay only refills the outbox.
        for (seq, out) in &self.outbox {
            emit(Record::Applied {
                txn: out.txn,
                seq: *seq,
                start: out.start.clone(),
                writes: out.writes.clone(),
            });
        }
        let mut held: Vec<_> = self.held.iter().collect();
        held.sort_by_key(|(t, _)| **t);
        for (txn, h) in held {
            emit(Record::Locked {
                txn: *txn,
                keys: h.keys.clone(),
            });
        }
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        serve_interactive(self, ctx, request);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        self.handle(ctx, from, msg);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        match timer {
            Timer::Tick => self.tick(ctx),
            Timer::Read(txn, seq) => {
                let waiting = self.coord.get(&txn).is_some_and(|t| t.read.awaits(seq));
                if waiting {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
            Timer::Votes(txn) => {
                if let Some(Phase::Voting { .. }) = self.coord.get(&txn).map(|t| &t.phase) {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
        }
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        // The version stamps (`stamps`, `unstable`) are not here: they go with the snapshot
        // statuses, which keep flowing whether or not transactions do.
        vec![
            ("remote_commits_waiting", self.inbox.len() as u64),
            ("commits_not_applied_everywhere", self.outbox.len() as u64),
            ("preferred_site_locks", self.held.len() as u64),
            ("parked_reads", self.parked.len() as u64),
            ("coordinated_transactions", self.coord.len() as u64),
        ]
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        vec![
            ("fast_commits", c.fast_commits),
            ("slow_commits", c.slow_commits),
            ("ww_conflicts", c.ww_conflicts),
            ("reads_parked", c.reads_parked),
            ("applied_remote", c.applied_remote),
            ("propagations_resent", c.resent),
            ("inbox_now", self.inbox.len() as u64),
            ("outbox_now", self.outbox.len() as u64),
            ("stamps_now", self.stamps.len() as u64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mutant_is_known() {
        for (name, _) in MUTANTS {
            assert!(Mutant::named(name).is_some(), "{name}");
        }
    }
}
