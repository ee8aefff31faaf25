//! `rococo`: ROCOCO (Mu, Nguyen, Lloyd, Li, "Extracting More Concurrency from Distributed
//! Transactions", OSDI 2014), one of the baselines SSS is measured against (Kishi, Peluso,
//! Korth, Palmieri, ICDCS 2019, §V, Figs. 6 and 8: every piece deferrable, read-only
//! transactions in rounds, replication disabled).
//!
//! **Guarantee: strict serializability** (ROCOCO §3–§4). The checker verifies histories at
//! `IsolationLevel::StrictSerializable`.
//!
//! # ROCOCO on augur
//!
//! ROCOCO runs a transaction as *pieces*, one per server it touches, in two phases (ROCOCO §3):
//! a *start* phase in which every server records the piece and answers with the conflicting
//! pieces it already holds (its dependencies), and a *commit* phase in which the coordinator
//! sends the aggregated dependencies and every server executes its piece once the pieces it
//! depends on have executed there, so that all servers execute conflicting pieces in one order.
//!
//! * **Pieces.** A transaction's piece at a node is what it read there (each key with the
//!   version read, identified by its writer) and what it writes there; every replica of every
//!   partition read or written holds one (`common::coordinator::ByReplica`). Every piece is
//!   *deferrable* (SSS §V configures ROCOCO so): its writes are executed in the commit phase,
//!   never in the start phase. augur's clients compute their writes from their reads, so the
//!   reads of an update transaction are performed while it executes, at the nearest replica,
//!   each waiting until no started piece writing the key is left unexecuted (ROCOCO §3.3's
//!   wait for in-flight conflicting writers); the start phase then *validates* them (below).
//! * **Start phase (ROCOCO §3.2).** A node receiving a piece checks it (below), persists it,
//!   records it as *pending* in a per-key list of the pieces that read or write each key and
//!   have not executed, and answers with its dependencies: the pending pieces writing a key
//!   the piece writes (write-write edges of the dependency graph). A piece is refused (the
//!   transaction aborts before any server executes anything) when:
//!   - a key it read no longer has the version read, or a pending piece writes it (the read
//!     would be ordered after a write it did not see: `ValidationFailed`);
//!   - a key it writes is read by a pending piece of another transaction (the same conflict
//!     from the other side: `ValidationFailed`);
//!   - a key it writes is written by a pending piece of a transaction *younger* than it (by
//!     the order of their ids' sequence numbers): `WaitDie`. Dependency edges therefore always
//!     go from older to younger transactions, so the graph has no cycle (see *Left out*).
//! * **Commit phase (ROCOCO §3.3).** Every piece accepted, the coordinator persists its
//!   decision with the aggregated dependencies (the union of every server's answer) and sends
//!   them to every node of the transaction. A node executes a committed piece once none of its
//!   dependencies (its own and the aggregated ones) is pending there — executed or aborted —
//!   installing its writes in one deterministic order, then acknowledges; executing a piece
//!   may make others ready (their execution cascades in one handler). The coordinator answers
//!   the client once every node executed (ROCOCO returns after the commit phase).
//! * **Read-only transactions (ROCOCO §3.4).** Their reads wait, like every read, until no
//!   started piece writing the key is left unexecuted at the serving node. At commit, one more
//!   round reads every key again at the same nodes (waiting likewise); the transaction commits
//!   when the two consecutive rounds return the same versions. Since the client already holds
//!   the first round's values, a round that disagrees aborts the transaction
//!   (`ValidationFailed`, counted as `read_only_aborts`): in the interactive form the bound of
//!   rounds is two. A read-only transaction of at most one key needs no second round.
//! * **Both request forms**: interactive, and one-shot through the shared `AtCoordinator`,
//!   which runs the procedure as interactive requests (so pieces are formed as above).
//!
//! **Why it is strictly serializable.** A piece's writes execute at every node only after the
//! transaction's pieces are pending at every node, and a read (of any transaction) waits for
//! every pending writer of its key, so once any node shows a transaction's write, every later
//! read of another of its keys waits for it. Two transactions writing common keys are ordered
//! by one edge (older before younger) at every node they share. An update transaction's reads
//! are the newest versions from when they were read until it executes (a writer of a key read
//! by a pending piece is refused), and it answers only once executed everywhere. Read-only
//! transactions: between the first and the second round, every key has the version both
//! rounds read.
//!
//! **Left out:** ROCOCO's reordering of *cyclic* conflicts (strongly connected components of
//! the dependency graph, executed in id order once every member is decided, with inquiries for
//! ancestors a server does not hold) — a piece that would close a cycle is refused instead
//! (`WaitDie` above), which needs only each node's own edges and the transaction's aggregated
//! ones; immediate pieces and ROCOCO's offline classification of pieces (every piece is
//! deferrable here, as in SSS's benchmark); read-write conflicts between pending pieces, which
//! ROCOCO orders and this implementation refuses, since augur's reads of an update transaction
//! happen before its pieces exist; Paxos replication of pieces (the SSS comparisons disable
//! replication; with replication, every replica holds and executes the piece, as a server).
//!
//! # Failures
//!
//! Links may lose and reorder messages, partitions heal, nodes crash and restart:
//!
//! * **Durable state** ([`Record`]): a node persists a piece before accepting it (`Started`),
//!   and its execution (`Executed`) or abort (`Aborted`); the coordinator persists its commit
//!   decision with the aggregated dependencies (`Decided`) before sending it, and forgets it
//!   (`Forgotten`) once every node executed. Replaying `Started` records in log order rebuilds
//!   the pending lists and each piece's own dependencies exactly as they were.
//! * **Termination.** A node holding a piece not committed for `participant_timeout` (at once
//!   after a restart) asks the coordinator, which resends the commit if it decided, stays
//!   silent while collecting answers, and otherwise presumes abort. A coordinator resends the
//!   commit to nodes that have not acknowledged execution after `participant_timeout`.
//! * A start or commit arriving after its transaction ended at a node is ignored (or, for a
//!   commit, acknowledged again) for `gc_retention`.
//!
//! # Mutants (`augur check --mutant`)
//!
//! * `no-dependency-wait` (*masked*): a node executes a committed piece at once, without
//!   waiting for the pieces it depends on, so two transactions writing the same keys on two
//!   nodes may execute in opposite orders there. The refusal of read-write conflicts between
//!   pending pieces masks it in `augur check`: its workloads read every key they write, so two
//!   pieces writing one key are never pending together at a node. The scenario tests build
//!   the situation with blind writes and show the wait.
//! * `no-read-validation`: the start phase accepts a piece whose reads are stale, or
//!   overwritten by a pending piece: two read-modify-write transactions of one key both commit
//!   (lost update).
//! * `single-round-reads`: read-only transactions commit after their reads, without the
//!   confirming second round: a reader may see one key before and another after a writer.

use crate::common::coordinator::serve_interactive;
use crate::common::coordinator::{ByReplica, InteractiveCoordinator, Pending, Reads};
use crate::common::replica::{self, TxnIds, Writes};
use crate::common::two_phase::GC_BATCH;
use crate::registry::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use augur_runtime::inbound::{BadMessage, CheckMessage, Inbound};
use augur_runtime::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientReply, ClientRequest, Key, NodeId};
use augur_types::{RequestError, Timestamp, TxnId, Value};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `rococo`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "rococo",
    isolation: IsolationLevel::StrictSerializable,
    paper: "ROCOCO (OSDI 2014), SSS (ICDCS 2019) §V baseline",
    summary: "deferrable pieces: a start phase collects dependencies among conflicting pieces, a commit phase executes them in dependency order; read-only transactions confirm their reads in a second round",
    commit_order_evidence: false,
    promises: &[],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: &[],
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
};

/// The mutants `rococo` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-dependency-wait",
        "[masked] committed pieces execute at once, without waiting for the pieces they depend on; the refusal of read-write conflicts between pending pieces masks it: augur's workloads read every key they write, so two pieces writing one key are never pending together at a node (the scenario tests show the wait)",
    ),
    (
        "no-read-validation",
        "the start phase accepts a piece whose reads are stale or overwritten by a pending piece (lost updates)",
    ),
    (
        "single-round-reads",
        "read-only transactions commit after one round of reads (fractured reads)",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    NoDependencyWait,
    NoReadValidation,
    SingleRoundReads,
}

impl Mutant {
    fn named(name: &str) -> Option<Mutant> {
        match name {
            "no-dependency-wait" => Some(Mutant::NoDependencyWait),
            "no-read-validation" => Some(Mutant::NoReadValidation),
            "single-round-reads" => Some(Mutant::SingleRoundReads),
            _ => None,
        }
    }
}

/// A commit decision: the transaction's aggregated dependencies.
pub type Deps = Vec<TxnId>;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Coordinator → a replica of `key`: its newest version, once no pending piece writes it.
    Read { txn: TxnId, seq: u32, key: Key },
    /// Replica → coordinator: the value and its writer (`None`: no version).
    ReadReply {
        txn: TxnId,
        seq: u32,
        version: Option<TxnId>,
        value: Option<Value>,
    },
    /// Coordinator → a node of the transaction: the start phase of its piece there.
    Start {
        txn: TxnId,
        reads: Reads,
        writes: Writes,
    },
    /// Node → coordinator: the piece's dependencies there, or why it was refused.
    Started {
        txn: TxnId,
        deps: Result<Deps, AbortReason>,
    },
    /// Coordinator → every node of the transaction: commit, after these dependencies.
    Commit { txn: TxnId, deps: Deps },
    /// Node → coordinator: the piece executed here.
    Executed { txn: TxnId },
    /// Coordinator → nodes: the transaction aborted; drop its piece.
    Abort { txn: TxnId },
    /// Node → coordinator: what became of `txn`, whose piece is pending here?
    QueryOutcome { txn: TxnId },
    /// Coordinator → a node that served reads of a read-only transaction: the second round.
    Confirm { txn: TxnId, keys: Vec<Key> },
    /// Node → coordinator: the versions of `Confirm`'s keys, in its order.
    Confirmed {
        txn: TxnId,
        versions: Vec<Option<TxnId>>,
    },
}

/// Requests come from the transaction's coordinator and name keys stored here; answers go back
/// to the coordinator.
impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            Msg::Read { txn, key, .. } => {
                at.txn_of_sender(*txn)?;
                at.key_here(key)
            }
            Msg::Start { txn, reads, writes } => {
                at.txn_of_sender(*txn)?;
                reads.iter().try_for_each(|(key, _)| at.key_here(key))?;
                writes.iter().try_for_each(|(key, _)| at.key_here(key))
            }
            Msg::Confirm { txn, keys } => {
                at.txn_of_sender(*txn)?;
                keys.iter().try_for_each(|key| at.key_here(key))
            }
            Msg::Commit { txn, .. } | Msg::Abort { txn } => at.txn_of_sender(*txn),
            Msg::ReadReply { txn, .. }
            | Msg::Started { txn, .. }
            | Msg::Executed { txn }
            | Msg::QueryOutcome { txn }
            | Msg::Confirmed { txn, .. } => at.txn_here(*txn),
        }
    }
}

#[derive(Debug)]
pub enum Timer {
    /// Periodic: termination queries, commit resends, garbage collection.
    Tick,
    /// A coordinator's read `seq` of a transaction got no answer in time.
    Read(TxnId, u32),
    /// A coordinator's start phase or confirming round did not complete in time.
    Phase(TxnId),
}

/// What a node writes to its log and rebuilds from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// The kit's records this protocol uses: `IdsReserved`; `Decided` (a coordinator's commit
    /// decision with the aggregated dependencies, and the nodes yet to execute) and
    /// `Forgotten`; in checkpoints, `Versions` (a key's versions with their execution
    /// positions, oldest first).
    Kit(replica::Record<Deps>),
    /// This node accepted `txn`'s piece: the keys it read here, its writes here.
    Started {
        txn: TxnId,
        reads: Vec<Key>,
        writes: Writes,
    },
    /// `txn`'s piece executed here (its writes installed).
    Executed { txn: TxnId },
    /// `txn` aborted: its piece here is dropped.
    Aborted { txn: TxnId },
    /// Checkpoints only, first: the last execution position.
    Position { pos: u64 },
}

impl From<replica::Record<Deps>> for Record {
    fn from(record: replica::Record<Deps>) -> Record {
        Record::Kit(record)
    }
}

/// Counters `augur bench` reads (see [`Protocol::counters`]).
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    pieces_executed: u64,
    refused_validation: u64,
    refused_wait_die: u64,
    reads_parked: u64,
    read_only_commits: u64,
    read_only_aborts: u64,
    commits_resent: u64,
}

/// A read this coordinator's transaction did, and where.
struct ReadDone {
    key: Key,
    version: Option<TxnId>,
    node: NodeId,
}

/// A transaction this node coordinates.
struct Coord {
    read_only: bool,
    pending: Option<Pending>,
    read_seq: u32,
    /// The node the read in flight went to, if one is.
    reading: Option<(NodeId, Key)>,
    reads: Vec<ReadDone>,
    last_active: Timestamp,
    phase: Phase,
}

enum Phase {
    Executing,
    /// Start phase: waiting for every node's dependencies.
    Starting {
        nodes: Vec<NodeId>,
        waiting: BTreeSet<NodeId>,
        deps: BTreeSet<TxnId>,
    },
    /// A read-only transaction's second round: per node, the versions the first round read.
    Confirming {
        expected: BTreeMap<NodeId, Vec<Option<TxnId>>>,
    },
}

/// A commit decision kept until every node of the transaction executed it.
struct Decision {
    deps: Deps,
    waiting: BTreeSet<NodeId>,
    /// The client, unless the coordinator restarted since.
    pending: Option<Pending>,
    sent_at: Timestamp,
}

/// A piece accepted here and not executed yet.
struct Piece {
    reads: Vec<Key>,
    writes: Writes,
    /// The pending pieces it waits for: those found here at its start and, once committed, the
    /// aggregated ones.
    deps: BTreeSet<TxnId>,
    committed: bool,
    /// When its outcome was last asked for (or when it started).
    last_query: Timestamp,
}

/// A read or a confirming round parked until the pending writers of its keys executed.
struct Parked {
    txn: TxnId,
    what: ParkedOp,
    waiting: BTreeSet<TxnId>,
}

enum ParkedOp {
    Read { seq: u32, key: Key },
    Confirm { keys: Vec<Key> },
}

/// One node running `rococo`.
pub struct Rococo {
    env: NodeEnv,
    mutant: Option<Mutant>,
    /// Versions in execution order (`ts`: execution position).
    store: MvStore<()>,
    pos: u64,
    pieces: FxHashMap<TxnId, Piece>,
    /// Per key, the pending pieces writing it and those reading it, in start order.
    writers: FxHashMap<Key, Vec<TxnId>>,
    readers: FxHashMap<Key, Vec<TxnId>>,
    parked: Vec<Parked>,
    /// Transactions whose piece ended here (true: executed), with when, so a late start is
    /// ignored and a repeated commit acknowledged.
    ended: FxHashMap<TxnId, (Timestamp, bool)>,
    coord: FxHashMap<TxnId, Coord>,
    decisions: BTreeMap<TxnId, Decision>,
    ids: TxnIds,
    counters: Counters,
}

/// The age order of transactions: sequence number first, so no node's transactions are always
/// the younger.
fn age(txn: TxnId) -> (u64, u32) {
    (txn.seq(), txn.coordinator().0)
}

impl Rococo {
    fn id(&self) -> NodeId {
        self.env.id
    }

    /// The writer of `key`'s newest version here.
    fn version(&self, key: &Key) -> Option<TxnId> {
        self.store
            .get(key)
            .and_then(|e| e.latest_committed())
            .map(|v| v.writer)
    }

    /// The pending pieces writing `key`, other than `txn`'s.
    fn pending_writers(&self, key: &Key, txn: TxnId) -> impl Iterator<Item = TxnId> + '_ {
        self.writers
            .get(key)
            .into_iter()
            .flatten()
            .copied()
            .filter(move |w| *w != txn)
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
            Msg::Read { txn, seq, key } => {
                self.park_or_serve(ctx, txn, ParkedOp::Read { seq, key })
            }
            Msg::ReadReply {
                txn,
                seq,
                version,
                value,
            } => self.read_reply(ctx, from, txn, seq, version, value),
            Msg::Start { txn, reads, writes } => self.start(ctx, txn, reads, writes),
            Msg::Started { txn, deps } => self.started(ctx, from, txn, deps),
            Msg::Commit { txn, deps } => self.on_commit(ctx, txn, deps),
            Msg::Executed { txn } => self.executed(ctx, from, txn),
            Msg::Abort { txn } => self.on_abort(ctx, txn),
            Msg::QueryOutcome { txn } => self.query_outcome(ctx, from, txn),
            Msg::Confirm { txn, keys } => self.park_or_serve(ctx, txn, ParkedOp::Confirm { keys }),
            Msg::Confirmed { txn, versions } => self.confirmed(ctx, from, txn, versions),
        }
    }

    // ----- pieces (live and in replay alike) -----

    /// Record `txn`'s accepted piece as pending; its dependencies are the pending pieces
    /// writing a key it writes.
    fn register(&mut self, txn: TxnId, reads: Vec<Key>, writes: Writes, now: Timestamp) {
        let mut deps = BTreeSet::new();
        for (key, _) in &writes {
            deps.extend(self.pending_writers(key, txn));
        }
        for (key, _) in &writes {
            let list = self.writers.entry(key.clone()).or_default();
            if !list.contains(&txn) {
                list.push(txn);
            }
        }
        for key in &reads {
            let list = self.readers.entry(key.clone()).or_default();
            if !list.contains(&txn) {
                list.push(txn);
            }
        }
        let piece = Piece {
            reads,
            writes,
            deps,
            committed: false,
            last_query: now,
        };
        self.pieces.insert(txn, piece);
    }

    /// Remove `txn`'s pending piece (executed or aborted), returning it.
    fn unregister(&mut self, txn: TxnId) -> Option<Piece> {
        let piece = self.pieces.remove(&txn)?;
        for (key, _) in &piece.writes {
            if let Some(list) = self.writers.get_mut(key) {
                list.retain(|t| *t != txn);
                if list.is_empty() {
                    self.writers.remove(key);
                }
            }
        }
        for key in &piece.reads {
            if let Some(list) = self.readers.get_mut(key) {
                list.retain(|t| *t != txn);
                if list.is_empty() {
                    self.readers.remove(key);
                }
            }
        }
        Some(piece)
    }

    /// Install `piece`'s writes at the next execution position.
    fn install(&mut self, txn: TxnId, piece: &Piece) {
        self.pos += 1;
        let ts = Timestamp(self.pos);
        for (key, value) in &piece.writes {
            self.store.entry(key).put_committed(txn, ts, value.clone());
        }
    }

    // ----- node: start phase -----

    /// ROCOCO's start phase at this node: check the piece, persist it, answer its dependencies.
    fn start(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reads: Reads, writes: Writes) {
        if self.ended.contains_key(&txn) {
            return;
        }
        if let Some(piece) = self.pieces.get(&txn) {
            // A repeated start: the same answer.
            let deps = piece.deps.iter().copied().collect();
            return self.deliver(
                ctx,
                txn.coordinator(),
                Msg::Started {
                    txn,
                    deps: Ok(deps),
                },
            );
        }
        ctx.charge(Work::reads(reads.len() + writes.len()));
        let refusal = self.refusal(txn, &reads, &writes);
        if let Err(reason) = refusal {
            match reason {
                AbortReason::WaitDie => self.counters.refused_wait_die += 1,
                _ => self.counters.refused_validation += 1,
            }
            self.ended.insert(txn, (ctx.now(), false));
            let msg = Msg::Started {
                txn,
                deps: Err(reason),
            };
            return self.deliver(ctx, txn.coordinator(), msg);
        }
        let read_keys: Vec<Key> = reads.into_iter().map(|(k, _)| k).collect();
        ctx.persist(Record::Started {
            txn,
            reads: read_keys.clone(),
            writes: writes.clone(),
        });
        self.register(txn, read_keys, writes, ctx.now());
        let deps = self.pieces[&txn].deps.iter().copied().collect();
        self.deliver(
            ctx,
            txn.coordinator(),
            Msg::Started {
                txn,
                deps: Ok(deps),
            },
        );
    }

    /// Why `txn`'s piece cannot be accepted here, if it cannot (see the module docs).
    fn refusal(&self, txn: TxnId, reads: &Reads, writes: &Writes) -> Result<(), AbortReason> {
        let validate = self.mutant != Some(Mutant::NoReadValidation);
        for (key, version) in reads.iter().filter(|_| validate) {
            if self.version(key) != *version || self.pending_writers(key, txn).next().is_some() {
                return Err(AbortReason::ValidationFailed);
            }
        }
        for (key, _) in writes {
            let read_by_other = self
                .readers
                .get(key)
                .is_some_and(|r| r.iter().any(|t| *t != txn));
            if read_by_other {
                return Err(AbortReason::ValidationFailed);
            }
            // Edges go from older to younger only: no dependency cycle can form.
            if self.pending_writers(key, txn).any(|w| age(w) > age(txn)) {
                return Err(AbortReason::WaitDie);
            }
        }
        Ok(())
    }

    // ----- node: commit phase -----

    fn on_commit(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, deps: Deps) {
        let Some(piece) = self.pieces.get_mut(&txn) else {
            // Executed already (the acknowledgement was lost), or ended long ago.
            if !matches!(self.ended.get(&txn), Some((_, false))) {
                self.deliver(ctx, txn.coordinator(), Msg::Executed { txn });
            }
            return;
        };
        piece.committed = true;
        // Only those still pending here matter; a transaction never depends on itself.
        piece.deps.extend(deps.into_iter().filter(|d| *d != txn));
        self.execute_ready(ctx);
    }

    /// Whether `txn`'s committed piece may execute: none of its dependencies pending here.
    fn ready(&self, txn: TxnId) -> bool {
        let piece = &self.pieces[&txn];
        piece.committed
            && (self.mutant == Some(Mutant::NoDependencyWait)
                || piece.deps.iter().all(|d| !self.pieces.contains_key(d)))
    }

    /// Execute every committed piece whose dependencies executed here, repeatedly (in id order
    /// within a pass, so execution is deterministic).
    fn execute_ready(&mut self, ctx: &mut Ctx<'_, Self>) {
        loop {
            let mut ready: Vec<TxnId> = self
                .pieces
                .keys()
                .copied()
                .filter(|t| self.ready(*t))
                .collect();
            if ready.is_empty() {
                break;
            }
            ready.sort();
            for txn in ready {
                if !self.pieces.contains_key(&txn) || !self.ready(txn) {
                    continue;
                }
                let piece = self.unregister(txn).expect("checked above");
                ctx.charge(Work::writes(piece.writes.len()));
                self.install(txn, &piece);
                ctx.persist(Record::Executed { txn });
                self.ended.insert(txn, (ctx.now(), true));
                self.counters.pieces_executed += 1;
                self.deliver(ctx, txn.coordinator(), Msg::Executed { txn });
                self.left(ctx, txn);
            }
        }
    }

    fn on_abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if self.pieces.get(&txn).is_some_and(|p| p.committed) {
            // Only a forged abort can contradict a commit: keep the decision.
            return;
        }
        self.ended.entry(txn).or_insert((ctx.now(), false));
        if self.unregister(txn).is_some() {
            ctx.persist(Record::Aborted { txn });
            self.left(ctx, txn);
            self.execute_ready(ctx);
        }
    }

    /// `txn`'s piece is no longer pending here: serve what waited for it.
    fn left(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let mut served = Vec::new();
        for (i, p) in self.parked.iter_mut().enumerate() {
            if p.waiting.remove(&txn) && p.waiting.is_empty() {
                served.push(i);
            }
        }
        for i in served.into_iter().rev() {
            let p = self.parked.remove(i);
            self.serve(ctx, p.txn, p.what);
        }
    }

    // ----- node: reads -----

    /// ROCOCO §3.3–3.4: a read waits for the pending pieces writing its keys.
    fn park_or_serve(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, what: ParkedOp) {
        let keys: Vec<&Key> = match &what {
            ParkedOp::Read { key, .. } => vec![key],
            ParkedOp::Confirm { keys } => keys.iter().collect(),
        };
        let waiting: BTreeSet<TxnId> = keys
            .into_iter()
            .flat_map(|k| self.pending_writers(k, txn))
            .collect();
        if waiting.is_empty() {
            return self.serve(ctx, txn, what);
        }
        self.counters.reads_parked += 1;
        self.parked.push(Parked { txn, what, waiting });
    }

    fn serve(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, what: ParkedOp) {
        let msg = match what {
            ParkedOp::Read { seq, key } => {
                ctx.charge(Work::reads(1));
                let newest = self.store.get(&key).and_then(|e| e.latest_committed());
                Msg::ReadReply {
                    txn,
                    seq,
                    version: newest.map(|v| v.writer),
                    value: newest.and_then(|v| v.value.clone()),
                }
            }
            ParkedOp::Confirm { keys } => {
                ctx.charge(Work::reads(keys.len()));
                let versions = keys.iter().map(|k| self.version(k)).collect();
                Msg::Confirmed { txn, versions }
            }
        };
        self.deliver(ctx, txn.coordinator(), msg);
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

    fn read_reply(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        seq: u32,
        version: Option<TxnId>,
        value: Option<Value>,
    ) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        let expected = t.read_seq == seq && t.reading.as_ref().is_some_and(|(n, _)| *n == from);
        if !expected || !matches!(t.phase, Phase::Executing) {
            return;
        }
        let Some(pending) = t.pending.take() else {
            return;
        };
        let (node, key) = t.reading.take().expect("checked above");
        t.reads.push(ReadDone { key, version, node });
        t.last_active = ctx.now();
        pending.answer(ctx, ClientReply::Value(value));
    }

    fn started(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        answer: Result<Deps, AbortReason>,
    ) {
        let Some(Phase::Starting {
            waiting,
            deps,
            nodes,
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        if !waiting.contains(&from) {
            return;
        }
        match answer {
            Err(reason) => return self.abort(ctx, txn, reason),
            Ok(found) => {
                waiting.remove(&from);
                deps.extend(found.into_iter().filter(|d| *d != txn));
            }
        }
        if !waiting.is_empty() {
            return;
        }
        let nodes = std::mem::take(nodes);
        let deps: Deps = std::mem::take(deps).into_iter().collect();
        let t = self.coord.remove(&txn).expect("checked above");
        // The decision is durable before any node hears of it.
        ctx.persist(
            replica::Record::Decided {
                txn,
                decision: deps.clone(),
                replicas: nodes.clone(),
            }
            .into(),
        );
        self.decisions.insert(
            txn,
            Decision {
                deps: deps.clone(),
                waiting: nodes.iter().copied().collect(),
                pending: t.pending,
                sent_at: ctx.now(),
            },
        );
        for node in nodes {
            let msg = Msg::Commit {
                txn,
                deps: deps.clone(),
            };
            self.deliver(ctx, node, msg);
        }
    }

    fn executed(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId) {
        let Some(d) = self.decisions.get_mut(&txn) else {
            return;
        };
        d.waiting.remove(&from);
        if !d.waiting.is_empty() {
            return;
        }
        let d = self.decisions.remove(&txn).expect("checked above");
        ctx.persist(replica::Record::Forgotten { txn }.into());
        if let Some(pending) = d.pending {
            let commit_ts = ctx.now();
            pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
    }

    fn confirmed(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        versions: Vec<Option<TxnId>>,
    ) {
        let Some(Phase::Confirming { expected }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        let Some(first) = expected.remove(&from) else {
            return;
        };
        if first != versions {
            self.counters.read_only_aborts += 1;
            return self.abort(ctx, txn, AbortReason::ValidationFailed);
        }
        if !expected.is_empty() {
            return;
        }
        let t = self.coord.remove(&txn).expect("checked above");
        self.counters.read_only_commits += 1;
        if let Some(pending) = t.pending {
            let commit_ts = ctx.now();
            pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
    }

    /// Abort `txn`, coordinated here and not decided: drop its pieces, answer the client.
    fn abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        let Some(t) = self.coord.remove(&txn) else {
            return;
        };
        if let Phase::Starting { nodes, .. } = t.phase {
            for node in nodes {
                self.deliver(ctx, node, Msg::Abort { txn });
            }
        }
        if let Some(pending) = t.pending {
            pending.answer(ctx, ClientReply::Aborted(reason));
        }
    }

    /// A node asks what became of `txn` (see the module docs, "Termination").
    fn query_outcome(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId) {
        if let Some(d) = self.decisions.get(&txn) {
            let msg = Msg::Commit {
                txn,
                deps: d.deps.clone(),
            };
            return self.deliver(ctx, from, msg);
        }
        if self.coord.contains_key(&txn) {
            // Still starting: the decision, or the phase timeout's abort, will come.
            return;
        }
        self.deliver(ctx, from, Msg::Abort { txn });
    }

    // ----- periodic work -----

    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        let now = ctx.now();
        let patience = self.env.options.participant_timeout;
        // Termination: pieces not committed for long ask their coordinator.
        let mut overdue: Vec<TxnId> = self
            .pieces
            .iter()
            .filter(|(_, p)| !p.committed && now.since(p.last_query) >= patience)
            .map(|(t, _)| *t)
            .collect();
        overdue.sort();
        for txn in overdue {
            if let Some(p) = self.pieces.get_mut(&txn) {
                p.last_query = now;
            }
            self.deliver(ctx, txn.coordinator(), Msg::QueryOutcome { txn });
        }
        // Commits not acknowledged for long are sent again.
        let late: Vec<(TxnId, Vec<NodeId>, Deps)> = self
            .decisions
            .iter()
            .filter(|(_, d)| now.since(d.sent_at) >= patience)
            .map(|(t, d)| (*t, d.waiting.iter().copied().collect(), d.deps.clone()))
            .collect();
        for (txn, nodes, deps) in late {
            if let Some(d) = self.decisions.get_mut(&txn) {
                d.sent_at = now;
            }
            for node in nodes {
                self.counters.commits_resent += 1;
                let msg = Msg::Commit {
                    txn,
                    deps: deps.clone(),
                };
                self.deliver(ctx, node, msg);
            }
        }
        // Transactions whose client vanished mid-execution: nothing of theirs is anywhere.
        let idle_after = self.env.options.idle_txn_timeout;
        self.coord.retain(|_, t| {
            !(matches!(t.phase, Phase::Executing)
                && t.pending.is_none()
                && now.since(t.last_active) >= idle_after)
        });
        let horizon = now.saturating_sub(self.env.options.gc_retention);
        self.ended.retain(|_, (at, _)| *at >= horizon);
        // Reads return the newest version only: older ones are never read again.
        self.store.collect_garbage(Timestamp(self.pos), GC_BATCH);
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
    }

    /// Rebuild state from one durable record (see [`Record`]).
    fn replay(&mut self, record: Record) {
        use replica::Record as Kit;
        match record {
            Record::Kit(Kit::IdsReserved { below }) => self.ids.resume_below(below),
            Record::Kit(Kit::Versions { key, versions }) => {
                for (writer, ts, value) in versions {
                    self.store.entry(&key).put_committed(writer, ts, value);
                }
            }
            Record::Kit(Kit::Decided {
                txn,
                decision,
                replicas,
            }) => {
                let d = Decision {
                    deps: decision,
                    waiting: replicas.into_iter().collect(),
                    pending: None,
                    // Resent at the first tick.
                    sent_at: Timestamp::ZERO,
                };
                self.decisions.insert(txn, d);
            }
            Record::Kit(Kit::Forgotten { txn }) => {
                self.decisions.remove(&txn);
            }
            // Not written by this protocol.
            Record::Kit(_) => {}
            Record::Position { pos } => self.pos = pos,
            Record::Started { txn, reads, writes } => {
                // Overdue from the start: ask the coordinator at once.
                self.register(txn, reads, writes, Timestamp::ZERO);
            }
            Record::Executed { txn } => {
                if let Some(piece) = self.unregister(txn) {
                    self.install(txn, &piece);
                }
            }
            Record::Aborted { txn } => {
                self.unregister(txn);
            }
        }
    }
}

impl InteractiveCoordinator for Rococo {
    fn begin(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, read_only: bool) {
        let txn = self.ids.allocate(ctx);
        self.coord.insert(
            txn,
            Coord {
                read_only,
                pending: None,
                read_seq: 0,
                reading: None,
                reads: Vec::new(),
                last_active: ctx.now(),
                phase: Phase::Executing,
            },
        );
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
        let replica = placement.closest_replica(me, placement.partition_of(&key));
        t.pending = Some(pending);
        t.last_active = now;
        t.read_seq += 1;
        t.reading = Some((replica, key.clone()));
        let seq = t.read_seq;
        // Reads park behind pending writers, which may wait for a silent coordinator.
        ctx.set_timer(self.env.options.participant_timeout, Timer::Read(txn, seq));
        self.deliver(ctx, replica, Msg::Read { txn, seq, key });
    }

    fn commit(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, writes: Writes) {
        let now = ctx.now();
        let placement = self.env.placement.clone();
        let single_round = self.mutant == Some(Mutant::SingleRoundReads);
        let t = match self.executing(txn) {
            Ok(t) => t,
            Err(reply) => return pending.answer(ctx, reply),
        };
        if t.read_only && !writes.is_empty() {
            let err = RequestError::WriteInReadOnly(txn);
            return pending.answer(ctx, ClientReply::Rejected(err));
        }
        t.last_active = now;
        if writes.is_empty() {
            if t.reads.len() <= 1 || single_round {
                // One key read after its pending writers: nothing to confirm.
                self.coord.remove(&txn);
                self.counters.read_only_commits += 1;
                return pending.answer(ctx, ClientReply::Committed { commit_ts: now });
            }
            // ROCOCO §3.4: a second round, to compare with the first.
            let mut keys: BTreeMap<NodeId, Vec<Key>> = BTreeMap::new();
            let mut expected: BTreeMap<NodeId, Vec<Option<TxnId>>> = BTreeMap::new();
            for r in &t.reads {
                keys.entry(r.node).or_default().push(r.key.clone());
                expected.entry(r.node).or_default().push(r.version);
            }
            t.pending = Some(pending);
            t.phase = Phase::Confirming { expected };
            ctx.set_timer(self.env.options.participant_timeout, Timer::Phase(txn));
            for (node, keys) in keys {
                self.deliver(ctx, node, Msg::Confirm { txn, keys });
            }
            return;
        }
        let reads: Reads = t.reads.iter().map(|r| (r.key.clone(), r.version)).collect();
        let by = ByReplica::group(&placement, &reads, writes);
        let nodes = by.participants();
        t.pending = Some(pending);
        t.phase = Phase::Starting {
            waiting: nodes.iter().copied().collect(),
            nodes,
            deps: BTreeSet::new(),
        };
        ctx.set_timer(self.env.options.participant_timeout, Timer::Phase(txn));
        for (node, (reads, writes)) in by.parts {
            self.deliver(ctx, node, Msg::Start { txn, reads, writes });
        }
    }

    fn abort_asked(&mut self, _ctx: &mut Ctx<'_, Self>, txn: TxnId) -> Result<(), String> {
        let committing = self.decisions.contains_key(&txn)
            || self
                .coord
                .get(&txn)
                .is_some_and(|t| !matches!(t.phase, Phase::Executing));
        if committing {
            return Err(format!("transaction {txn:?} is already committing"));
        }
        // Nothing of an executing transaction is anywhere but here.
        self.coord.remove(&txn);
        Ok(())
    }
}

impl Protocol for Rococo {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record;
    const FORMS: &'static [augur_runtime::one_shot::RequestForm] = INTERACTIVE_AND_ONE_SHOT;

    fn new(env: &NodeEnv) -> Self {
        Rococo {
            env: env.clone(),
            mutant: env.options.mutant.as_deref().and_then(Mutant::named),
            store: MvStore::new(),
            pos: 0,
            pieces: FxHashMap::default(),
            writers: FxHashMap::default(),
            readers: FxHashMap::default(),
            parked: Vec::new(),
            ended: FxHashMap::default(),
            coord: FxHashMap::default(),
            decisions: BTreeMap::new(),
            ids: TxnIds::new(env.id),
            counters: Counters::default(),
        }
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Record>) -> Self {
        let mut node = Rococo::new(env);
        for record in records {
            node.replay(record);
        }
        node
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        emit(Record::Position { pos: self.pos });
        self.ids.checkpoint::<Record, Deps>(emit);
        for (key, entry) in self.store.iter() {
            let versions: Vec<_> = entry
                .versions()
                .map(|v| (v.writer, v.ts, v.value.clone()))
                .collect();
            if !versions.is_empty() {
                let key = key.clone();
                emit(replica::Record::Versions { key, versions }.into());
            }
        }
        // Pending pieces in an order that rebuilds each key's list as it was: a piece's
        // dependencies are older than it (`age`), and so is every piece before it in a list.
        let mut pending: Vec<TxnId> = self.pieces.keys().copied().collect();
        pending.sort_by_key(|t| age(*t));
        for txn in pending {
            let p = &self.pieces[&txn];
            emit(Record::Started {
                txn,
                reads: p.reads.clone(),
                writes: p.writes.clone(),
            });
        }
        for (txn, d) in &self.decisions {
            emit(
                replica::Record::Decided {
                    txn: *txn,
                    decision: d.deps.clone(),
                    replicas: d.waiting.iter().copied().collect(),
                }
                .into(),
            );
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
                let waiting = self
                    .coord
                    .get(&txn)
                    .is_some_and(|t| t.read_seq == seq && t.reading.is_some());
                if waiting {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
            Timer::Phase(txn) => {
                let stuck = self
                    .coord
                    .get(&txn)
                    .is_some_and(|t| !matches!(t.phase, Phase::Executing));
                if stuck {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        vec![
            ("pieces_executed", c.pieces_executed),
            ("refused_validation", c.refused_validation),
            ("refused_wait_die", c.refused_wait_die),
            ("reads_parked", c.reads_parked),
            ("read_only_commits", c.read_only_commits),
            ("read_only_aborts", c.read_only_aborts),
            ("commits_resent", c.commits_resent),
            ("pieces_now", self.pieces.len() as u64),
        ]
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("pending_pieces", self.pieces.len() as u64),
            ("parked_reads", self.parked.len() as u64),
            ("undelivered_decisions", self.decisions.len() as u64),
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

    #[test]
    fn age_orders_by_sequence_before_node() {
        let older_on_high_node = TxnId::new(NodeId(7), 3);
        let younger_on_low_node = TxnId::new(NodeId(0), 4);
        assert!(age(older_on_high_node) < age(younger_on_low_node));
    }
}
