//! `2pc-baseline`: the two-phase-commit baseline that SSS is measured against (Kishi, Peluso,
//! Korth, Palmieri, "SSS: Scalable Key-Value Store with External Consistent and Abort-free
//! Read-only Transactions", ICDCS 2019, §V: "all transactions execute as SSS's update
//! transactions; read-only transactions validate their execution, therefore they can abort; and
//! no multi-version data repository is deployed").
//!
//! **Guarantee: strict serializability** (the paper's "external consistency"), for read-only
//! transactions as for updates. The price is what SSS removes: read-only transactions lock,
//! validate and can abort, like every other transaction.
//!
//! # The protocol
//!
//! * **Single version.** Every read, read-only or not, returns the newest committed version of
//!   its key at one replica (the coordinator's own if it stores the key, else the nearest), with
//!   the identity of that version (the transaction that wrote it). No snapshot is kept: the
//!   store's garbage collection keeps only the newest version of each key. Reads take no lock
//!   and do not wait for locks; validation catches what they may miss. Writes are buffered by
//!   the client and shipped with the commit request.
//! * **Two-phase commit with validation.** At commit the coordinator sends `Prepare`, with the
//!   keys it read (each with the version read) and the keys it writes (with their values), to
//!   every replica of every key read or written. A participant locks them all (exclusive for the
//!   keys written, shared for the keys only read; `common::lock_sets`), waiting at most
//!   `lock_timeout` (then it votes no: `LockTimeout`). Holding them, it checks that every key
//!   read still has, as its newest committed version, the version read — by the identity of
//!   its writer, never by comparing clocks (a value written again, even equal, is a new
//!   version) — and votes no (`ValidationFailed`) or yes with a proposed timestamp above every
//!   version it holds. With every yes the coordinator decides to commit at the largest proposal,
//!   logs the decision, answers its client and sends the decision to every participant. Write
//!   replicas install the writes at that timestamp and acknowledge; every participant releases
//!   its locks. One no, or a participant silent for `participant_timeout`, aborts everywhere.
//! * **Read-only transactions validate too**: a read-only transaction that read anything runs
//!   the same 2PC over the replicas of the keys it read (shared locks, validation, no writes), so
//!   a writer that overwrote a key it read aborts it. This is what the baseline measures: under
//!   SSS (and under the snapshot protocols here) the same read-only transaction commits.
//!
//! Why this is strictly serializable: a transaction commits only if, at one instant (when every
//! participant holds its locks), every replica of every key it read still has the version it
//! read, and every replica of every key it writes is locked against everyone else; the
//! decision falls inside that instant's lock period, so transactions are serialized in the
//! order of their decisions, which respects real time. A client told of a commit may read a
//! replica that has not applied it yet, but that replica still holds the writer's exclusive
//! lock, so the reader's validation waits for it and then fails: the stale read never commits.
//!
//! Commit timestamps order each key's versions (the checker may use them as evidence): a
//! participant proposes above the timestamp of every version it applied, and a writer of a key
//! locks every replica of it only after the previous writer applied there and released it.
//!
//! # The paper's unspecified points, and the choices here
//!
//! The digest (`shared/papers/sss.md` §4.1) lists what §V leaves open:
//!
//! * **Which replica serves a read**: the coordinator's own, else the nearest (SSS asks every
//!   replica and takes the fastest; with validation at every replica, either is correct).
//! * **Whether reads check locks**: they do not; a read of a key being overwritten returns the
//!   old version and fails validation later.
//! * **Whether aborted transactions are retried**: not by the protocol; clients decide (`augur
//!   bench` retries, `augur check` moves on to its next transaction).
//! * **The lock-acquisition timeout** is the setting `lock_timeout` (the values SSS's module
//!   defines, shared here): the paper's 1 ms is about 50 one-way message delays of its network
//!   (20 µs each), so the default, 5 ms, is 50 one-way delays of the `lan` profile (0.1 ms).
//!   The digest's reproduction hint: this ratio sets what an abort costs, hence most of SSS's
//!   advantage; keep it when the network changes (`--set protocol.lock_timeout=...`).
//!
//! # Failures
//!
//! Links may lose and reorder messages, partitions heal, nodes crash and restart:
//!
//! * **Durable state.** Through the node's write-ahead log ([`Record`]): each yes vote's
//!   prepare (keys read, writes) before the vote leaves, so a restarted participant takes its
//!   locks again and keeps its promise; each outcome applied (`Committed` with the writes
//!   installed, `Aborted`); the coordinator's commit decisions, kept until every write replica
//!   acknowledged (the 2PC kit's `DecisionLog`), and its transaction-id reservations
//!   (`TxnIds`). A checkpoint holds the newest version of each key, the prepares and the
//!   decisions. Coordination in flight and prepares still waiting for locks are lost in a crash:
//!   their coordinators time out and abort.
//! * **Termination.** A participant that voted yes and has heard nothing for
//!   `participant_timeout` asks the coordinator (`QueryOutcome`, again every
//!   `participant_timeout`; at once after a restart), which answers from its decision log, says
//!   nothing while it is still collecting votes, and otherwise *presumes abort*: it forgets a
//!   transaction only after aborting it, after every write replica applied its commit, or in a
//!   crash before any decision. A participant that only read there loses nothing by releasing
//!   its shared locks on a presumed abort.
//! * A prepare that arrives after its transaction ended at a participant (reordered behind the
//!   abort, say) is ignored for `gc_retention`.
//!
//! # Mutants (`augur check --mutant`)
//!
//! * `no-read-validation`: participants vote yes without validating (lost updates, write skew,
//!   read skew).
//! * `no-read-only-validation`: read-only transactions commit as soon as their reads return,
//!   without locks or validation — SSS's read-only shortcut (A1:L3) without the snapshot-queues
//!   that make it safe (read skew).

use crate::common::coordinator::{
    ByReplica, InteractiveCoordinator, Pending, Reads, serve_interactive,
};
use crate::common::lock_sets::{LockSets, reads_unchanged};
use crate::common::replica::{self, DecisionLog, TxnIds, Writes};
use crate::common::two_phase::GC_BATCH;
use crate::registry::SettingInfo;
use crate::registry::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use crate::sss::{LOCK_TIMEOUT, LOCK_TIMEOUT_VALUES, parse_lock_timeout};
use augur_runtime::inbound::{BadMessage, CheckMessage, Inbound};
use augur_runtime::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientReply, ClientRequest, Key, NodeId};
use augur_types::{RequestError, Timestamp, TxnId, Value};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::Duration;

/// `2pc-baseline`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "2pc-baseline",
    isolation: IsolationLevel::StrictSerializable,
    paper: "SSS (ICDCS 2019) §V baseline",
    summary: "single version; every transaction, read-only too, locks, validates its reads and commits by 2PC at every replica",
    commit_order_evidence: true,
    promises: &[],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: SETTINGS,
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
};

/// The lock timeout when the setting is not given: 50 one-way delays of the `lan` profile.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_millis(5);

/// The protocol settings `2pc-baseline` accepts.
pub const SETTINGS: &[SettingInfo] = &[SettingInfo {
    name: LOCK_TIMEOUT,
    values: LOCK_TIMEOUT_VALUES,
    default: "5ms",
    doc: "how long a participant waits for its locks before voting no (the paper's 1 ms is 50 one-way message delays; 5 ms is 50 of the lan profile's)",
}];

/// The mutants `2pc-baseline` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-read-validation",
        "participants vote yes without checking that the keys read still have the versions read (lost updates, write skew, read skew)",
    ),
    (
        "no-read-only-validation",
        "read-only transactions commit once their reads return, without locks or validation (SSS's read-only shortcut without its snapshot-queues: read skew)",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    NoReadValidation,
    NoReadOnlyValidation,
}

impl Mutant {
    fn named(name: &str) -> Option<Mutant> {
        match name {
            "no-read-validation" => Some(Mutant::NoReadValidation),
            "no-read-only-validation" => Some(Mutant::NoReadOnlyValidation),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Coordinator → a replica of `key`: the newest committed version.
    Read { txn: TxnId, seq: u32, key: Key },
    /// Replica → coordinator: the value read and the writer of its version.
    ReadReply {
        txn: TxnId,
        seq: u32,
        value: Option<Value>,
        version: Option<TxnId>,
    },
    /// Coordinator → every replica of a key read or written: lock, validate, vote.
    Prepare {
        txn: TxnId,
        reads: Reads,
        writes: Writes,
    },
    /// Participant → coordinator: yes with a proposed commit timestamp, or no and why.
    Vote {
        txn: TxnId,
        vote: Result<Timestamp, AbortReason>,
    },
    /// Coordinator → participants: commit at this timestamp, or abort (`None`).
    Decide {
        txn: TxnId,
        commit: Option<Timestamp>,
    },
    /// Write replica → coordinator: the commit is applied here.
    Applied { txn: TxnId },
    /// Participant → coordinator: what became of this transaction, prepared here long ago?
    QueryOutcome { txn: TxnId },
}

/// Reads and prepares go to replicas of their keys from the transaction's coordinator, which
/// alone decides; answers go back to it.
impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            Msg::Read { txn, key, .. } => {
                at.txn_of_sender(*txn)?;
                at.key_here(key)
            }
            Msg::Prepare { txn, reads, writes } => {
                at.txn_of_sender(*txn)?;
                reads.iter().try_for_each(|(key, _)| at.key_here(key))?;
                writes.iter().try_for_each(|(key, _)| at.key_here(key))
            }
            Msg::Decide { txn, .. } => at.txn_of_sender(*txn),
            Msg::ReadReply { txn, .. }
            | Msg::Vote { txn, .. }
            | Msg::Applied { txn }
            | Msg::QueryOutcome { txn } => at.txn_here(*txn),
        }
    }
}

#[derive(Debug)]
pub enum Timer {
    /// Periodic: termination queries, idle transactions, garbage collection.
    Tick,
    /// A coordinator's read `seq` of a transaction got no answer in time.
    Read(TxnId, u32),
    /// A coordinator's votes did not all arrive in time.
    Votes(TxnId),
    /// A participant did not get its locks in time.
    Locks(TxnId),
}

/// What a node writes to its log and rebuilds from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// The 2PC kit's records: `Decided`, `Forgotten` and `IdsReserved` (the coordinator's),
    /// `Committed` (a participant installed its writes at `commit_ts` and released its locks),
    /// `Aborted` (a participant dropped a prepare and released its locks) and, in checkpoints,
    /// `Versions`.
    Kit(replica::Record<Timestamp>),
    /// This participant voted yes for `txn`: it holds shared locks on `reads` and exclusive ones
    /// on the keys of `writes` until the outcome.
    Prepared {
        txn: TxnId,
        reads: Vec<Key>,
        writes: Writes,
    },
}

impl From<replica::Record<Timestamp>> for Record {
    fn from(record: replica::Record<Timestamp>) -> Record {
        Record::Kit(record)
    }
}

/// Counters `augur bench` reads (see [`Protocol::counters`]).
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    lock_waits: u64,
    lock_timeouts: u64,
    validation_failures: u64,
    read_only_committed: u64,
    read_only_aborted: u64,
}

/// A transaction this node coordinates.
struct Coord {
    read_only: bool,
    reads: Reads,
    pending: Option<Pending>,
    read_seq: u32,
    /// The key being read.
    reading: Option<Key>,
    last_active: Timestamp,
    phase: Phase,
}

enum Phase {
    Executing,
    Voting {
        participants: Vec<NodeId>,
        waiting: BTreeSet<NodeId>,
        write_replicas: Vec<NodeId>,
        /// The largest proposal so far.
        commit_ts: Timestamp,
    },
}

/// A transaction preparing or prepared at this participant.
struct Participant {
    reads: Reads,
    writes: Writes,
    voted: bool,
    /// When its outcome was last asked for (or the vote, before the first time).
    last_query: Timestamp,
}

/// One node running `2pc-baseline`.
pub struct TwoPcBaseline {
    env: NodeEnv,
    mutant: Option<Mutant>,
    lock_timeout: Duration,
    /// One committed version per key (older ones wait for garbage collection).
    store: MvStore<()>,
    /// Above the timestamp of every version applied here: proposals exceed it.
    clock: Timestamp,
    locks: LockSets,
    participants: FxHashMap<TxnId, Participant>,
    /// Transactions that ended at this participant, with when, so a late prepare is ignored.
    ended: FxHashMap<TxnId, Timestamp>,
    coord: FxHashMap<TxnId, Coord>,
    ids: TxnIds,
    decided: DecisionLog<Timestamp>,
    counters: Counters,
}

impl TwoPcBaseline {
    /// The newest committed version of `key` here: its value and writer.
    pub fn latest(&self, key: &Key) -> Option<(TxnId, Option<Value>)> {
        let v = self.store.get(key)?.latest_committed()?;
        Some((v.writer, v.value.clone()))
    }

    fn id(&self) -> NodeId {
        self.env.id
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
            Msg::Read { txn, seq, key } => self.serve_read(ctx, txn, seq, key),
            Msg::ReadReply {
                txn,
                seq,
                value,
                version,
            } => self.read_reply(ctx, txn, seq, value, version),
            Msg::Prepare { txn, reads, writes } => self.prepare(ctx, txn, reads, writes),
            Msg::Vote { txn, vote } => self.vote(ctx, from, txn, vote),
            Msg::Decide { txn, commit } => self.on_decide(ctx, txn, commit),
            Msg::Applied { txn } => self.decided.acknowledge(ctx, txn, from),
            Msg::QueryOutcome { txn } => self.query_outcome(ctx, from, txn),
        }
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
        txn: TxnId,
        seq: u32,
        value: Option<Value>,
        version: Option<TxnId>,
    ) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        if t.read_seq != seq || !matches!(t.phase, Phase::Executing) {
            return;
        }
        let (Some(pending), Some(key)) = (t.pending.take(), t.reading.take()) else {
            return;
        };
        t.last_active = ctx.now();
        t.reads.push((key, version));
        pending.answer(ctx, ClientReply::Value(value));
    }

    /// Abort `txn`, coordinated here: tell the participants if it was committing, answer the
    /// client.
    fn abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        let Some(t) = self.coord.remove(&txn) else {
            return;
        };
        if t.read_only {
            self.counters.read_only_aborted += 1;
        }
        if let Phase::Voting { participants, .. } = t.phase {
            for node in participants {
                self.deliver(ctx, node, Msg::Decide { txn, commit: None });
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
        vote: Result<Timestamp, AbortReason>,
    ) {
        let Some(Phase::Voting {
            participants,
            waiting,
            commit_ts,
            ..
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        if !participants.contains(&from) {
            return;
        }
        match vote {
            Err(reason) => return self.abort(ctx, txn, reason),
            Ok(ts) => {
                waiting.remove(&from);
                *commit_ts = (*commit_ts).max(ts);
            }
        }
        if waiting.is_empty() {
            self.decide(ctx, txn);
        }
    }

    /// Every participant voted yes: log the commit (until every write replica applied it),
    /// answer the client, tell the participants.
    fn decide(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(t) = self.coord.remove(&txn) else {
            return;
        };
        let Phase::Voting {
            participants,
            write_replicas,
            commit_ts,
            ..
        } = t.phase
        else {
            return;
        };
        let me = self.id();
        // This node's own participant applies within this handler, after the decision's
        // record: it needs no acknowledgement.
        let others = write_replicas.into_iter().filter(|n| *n != me).collect();
        self.decided.decide(ctx, txn, commit_ts, others);
        if t.read_only {
            self.counters.read_only_committed += 1;
        }
        // The runtime holds the answer until the decision is durable.
        if let Some(pending) = t.pending {
            pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
        for node in participants {
            let commit = Some(commit_ts);
            self.deliver(ctx, node, Msg::Decide { txn, commit });
        }
    }

    /// A participant asks what became of `txn` (see the module docs, "Termination").
    fn query_outcome(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId) {
        // Still collecting votes: its decision, or its vote timeout's abort, will come.
        let voting =
            matches!(self.coord.get(&txn), Some(t) if matches!(t.phase, Phase::Voting { .. }));
        if let Some(commit) = replica::outcome(&self.decided, txn, voting) {
            self.deliver(ctx, from, Msg::Decide { txn, commit });
        }
    }

    // ----- participant -----

    fn serve_read(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, seq: u32, key: Key) {
        ctx.charge(Work::reads(1));
        let (version, value) = self.latest(&key).unzip();
        let msg = Msg::ReadReply {
            txn,
            seq,
            value: value.flatten(),
            version,
        };
        self.deliver(ctx, txn.coordinator(), msg);
    }

    fn prepare(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reads: Reads, writes: Writes) {
        if self.participants.contains_key(&txn) || self.ended.contains_key(&txn) {
            return;
        }
        let held = self.locks.request(
            txn,
            reads.iter().map(|(k, _)| k),
            writes.iter().map(|(k, _)| k),
        );
        self.participants.insert(
            txn,
            Participant {
                reads,
                writes,
                voted: false,
                last_query: ctx.now(),
            },
        );
        if held {
            self.validate_and_vote(ctx, txn);
        } else {
            self.counters.lock_waits += 1;
            ctx.set_timer(self.lock_timeout, Timer::Locks(txn));
        }
    }

    /// `txn` holds its locks here: validate its reads, vote.
    fn validate_and_vote(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(p) = self.participants.get(&txn) else {
            return;
        };
        ctx.charge(Work::reads(p.reads.len()));
        let valid =
            self.mutant == Some(Mutant::NoReadValidation) || reads_unchanged(&self.store, &p.reads);
        if !valid {
            self.counters.validation_failures += 1;
            return self.refuse(ctx, txn, AbortReason::ValidationFailed);
        }
        let ts = ctx.now().max(self.clock.next());
        let p = self.participants.get_mut(&txn).expect("checked above");
        p.voted = true;
        p.last_query = ctx.now();
        ctx.persist(Record::Prepared {
            txn,
            reads: p.reads.iter().map(|(k, _)| k.clone()).collect(),
            writes: p.writes.clone(),
        });
        self.deliver(ctx, txn.coordinator(), Msg::Vote { txn, vote: Ok(ts) });
    }

    /// Vote no for `txn`, which has not voted yet, and forget it.
    fn refuse(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        self.participants.remove(&txn);
        self.ended.insert(txn, ctx.now());
        self.deliver(
            ctx,
            txn.coordinator(),
            Msg::Vote {
                txn,
                vote: Err(reason),
            },
        );
        self.release(ctx, txn);
    }

    /// Release `txn`'s locks; the prepares that now hold all theirs validate and vote.
    fn release(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        for ready in self.locks.release(txn) {
            if self.participants.get(&ready).is_some_and(|p| !p.voted) {
                self.validate_and_vote(ctx, ready);
            }
        }
    }

    fn lock_timeout(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if self.participants.get(&txn).is_some_and(|p| !p.voted) {
            self.counters.lock_timeouts += 1;
            self.refuse(ctx, txn, AbortReason::LockTimeout);
        }
    }

    fn on_decide(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, commit: Option<Timestamp>) {
        let Some(commit_ts) = commit else {
            self.ended.insert(txn, ctx.now());
            if let Some(p) = self.participants.remove(&txn) {
                if p.voted {
                    ctx.persist(replica::Record::Aborted { txn }.into());
                }
                self.release(ctx, txn);
            }
            return;
        };
        match self.participants.get(&txn) {
            // Applied already (the coordinator answers every query): acknowledge again.
            None => return self.deliver(ctx, txn.coordinator(), Msg::Applied { txn }),
            // A commit needs this participant's yes: not from a correct coordinator.
            Some(p) if !p.voted => return,
            Some(_) => {}
        }
        let p = self.participants.remove(&txn).expect("checked above");
        self.ended.insert(txn, ctx.now());
        ctx.persist(replica::Record::Committed { txn, commit_ts }.into());
        let wrote = !p.writes.is_empty();
        self.install(commit_ts, txn, p.writes);
        ctx.charge(Work::writes(usize::from(wrote)));
        if wrote {
            self.deliver(ctx, txn.coordinator(), Msg::Applied { txn });
        }
        self.release(ctx, txn);
    }

    /// Install `txn`'s writes committed at `commit_ts` (live and in replay alike).
    fn install(&mut self, commit_ts: Timestamp, txn: TxnId, writes: Writes) {
        self.clock = self.clock.max(commit_ts);
        for (key, value) in writes {
            self.store.entry(&key).put_committed(txn, commit_ts, value);
        }
    }

    // ----- the periodic tick -----

    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        let now = ctx.now();
        let patience = self.env.options.participant_timeout;
        // Termination: prepared transactions whose outcome is overdue ask their coordinator.
        let mut overdue: Vec<TxnId> = self
            .participants
            .iter()
            .filter(|(_, p)| p.voted && now.since(p.last_query) >= patience)
            .map(|(t, _)| *t)
            .collect();
        overdue.sort();
        for txn in overdue {
            if let Some(p) = self.participants.get_mut(&txn) {
                p.last_query = now;
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
        // Single version: only the newest committed version of a key is ever read.
        self.store.collect_garbage(Timestamp::MAX, GC_BATCH);
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
    }

    /// Rebuild state from one durable record (see [`Record`]).
    fn replay(&mut self, record: Record) {
        use replica::Record as Kit;
        match record {
            Record::Kit(Kit::IdsReserved { below }) => self.ids.resume_below(below),
            Record::Kit(Kit::Decided {
                txn,
                decision,
                replicas,
            }) => self.decided.record(txn, decision, replicas),
            Record::Kit(Kit::Forgotten { txn }) => self.decided.forget(txn),
            Record::Kit(Kit::Versions { key, versions }) => {
                for (writer, ts, value) in versions {
                    self.install(ts, writer, vec![(key.clone(), value)]);
                }
            }
            Record::Kit(Kit::Committed { txn, commit_ts }) => {
                if let Some(p) = self.participants.remove(&txn) {
                    self.install(commit_ts, txn, p.writes);
                }
                self.locks.release(txn);
            }
            Record::Kit(Kit::Aborted { txn }) => {
                self.participants.remove(&txn);
                self.locks.release(txn);
            }
            // Not written by this protocol.
            Record::Kit(Kit::Installed { .. } | Kit::Served { .. } | Kit::Watermark(_)) => {}
            Record::Prepared { txn, reads, writes } => {
                self.locks
                    .request(txn, &reads, writes.iter().map(|(k, _)| k));
                self.participants.insert(
                    txn,
                    Participant {
                        reads: reads.into_iter().map(|k| (k, None)).collect(),
                        writes,
                        voted: true,
                        // Overdue from the start: ask the coordinator at once.
                        last_query: Timestamp::ZERO,
                    },
                );
            }
        }
    }
}

impl InteractiveCoordinator for TwoPcBaseline {
    fn begin(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, read_only: bool) {
        let txn = self.ids.allocate(ctx);
        self.coord.insert(
            txn,
            Coord {
                read_only,
                reads: Vec::new(),
                pending: None,
                read_seq: 0,
                reading: None,
                last_active: ctx.now(),
                phase: Phase::Executing,
            },
        );
        // Single version: there is no snapshot; the begin time stands in.
        let snapshot = ctx.now();
        pending.answer(ctx, ClientReply::Begun { txn, snapshot });
    }

    fn read(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, key: Key) {
        let now = ctx.now();
        let t = match self.executing(txn) {
            Ok(t) => t,
            Err(reply) => return pending.answer(ctx, reply),
        };
        t.pending = Some(pending);
        t.last_active = now;
        t.read_seq += 1;
        let seq = t.read_seq;
        t.reading = Some(key.clone());
        let placement = &self.env.placement;
        let replica = placement.closest_replica(self.id(), placement.partition_of(&key));
        if replica != self.id() {
            let timeout = self.env.options.participant_timeout;
            ctx.set_timer(timeout, Timer::Read(txn, seq));
        }
        self.deliver(ctx, replica, Msg::Read { txn, seq, key });
    }

    fn commit(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, writes: Writes) {
        let now = ctx.now();
        let mutant = self.mutant;
        let placement = self.env.placement.clone();
        let t = match self.executing(txn) {
            Ok(t) => t,
            Err(reply) => return pending.answer(ctx, reply),
        };
        if t.read_only && !writes.is_empty() {
            let err = RequestError::WriteInReadOnly(txn);
            return pending.answer(ctx, ClientReply::Rejected(err));
        }
        let unvalidated = t.read_only && mutant == Some(Mutant::NoReadOnlyValidation);
        // Every replica of every key read or written takes part.
        let reads = if unvalidated { &[][..] } else { &t.reads[..] };
        let by_replica = ByReplica::group(&placement, reads, writes);
        if by_replica.parts.is_empty() {
            // Nothing read or written (or the mutant's unvalidated read-only transaction).
            let read_only = t.read_only;
            self.coord.remove(&txn);
            if read_only {
                self.counters.read_only_committed += 1;
            }
            return pending.answer(ctx, ClientReply::Committed { commit_ts: now });
        }
        let participants = by_replica.participants();
        t.pending = Some(pending);
        t.last_active = now;
        t.phase = Phase::Voting {
            waiting: participants.iter().copied().collect(),
            participants,
            write_replicas: by_replica.write_replicas,
            commit_ts: Timestamp::ZERO,
        };
        ctx.set_timer(self.env.options.participant_timeout, Timer::Votes(txn));
        for (node, (reads, writes)) in by_replica.parts {
            self.deliver(ctx, node, Msg::Prepare { txn, reads, writes });
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

impl Protocol for TwoPcBaseline {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record;
    const FORMS: &'static [augur_runtime::one_shot::RequestForm] = INTERACTIVE_AND_ONE_SHOT;

    fn new(env: &NodeEnv) -> Self {
        TwoPcBaseline {
            env: env.clone(),
            mutant: env.options.mutant.as_deref().and_then(Mutant::named),
            lock_timeout: env
                .options
                .settings
                .get(LOCK_TIMEOUT)
                .and_then(|v| parse_lock_timeout(v))
                .unwrap_or(DEFAULT_LOCK_TIMEOUT),
            store: MvStore::new(),
            clock: Timestamp::ZERO,
            locks: LockSets::default(),
            participants: FxHashMap::default(),
            ended: FxHashMap::default(),
            coord: FxHashMap::default(),
            ids: TxnIds::new(env.id),
            decided: DecisionLog::default(),
            counters: Counters::default(),
        }
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Record>) -> Self {
        let mut node = TwoPcBaseline::new(env);
        for record in records {
            node.replay(record);
        }
        node
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        self.ids.checkpoint::<Record, Timestamp>(emit);
        replica::checkpoint_versions::<_, _, Record>(&self.store, emit);
        let mut prepared: Vec<_> = self.participants.iter().filter(|(_, p)| p.voted).collect();
        prepared.sort_by_key(|(t, _)| **t);
        for (txn, p) in prepared {
            emit(Record::Prepared {
                txn: *txn,
                reads: p.reads.iter().map(|(k, _)| k.clone()).collect(),
                writes: p.writes.clone(),
            });
        }
        self.decided.checkpoint(emit);
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
            Timer::Votes(txn) => {
                if let Some(Phase::Voting { .. }) = self.coord.get(&txn).map(|t| &t.phase) {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
            Timer::Locks(txn) => self.lock_timeout(ctx, txn),
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        vec![
            ("lock_waits", c.lock_waits),
            ("lock_timeouts", c.lock_timeouts),
            ("validation_failures", c.validation_failures),
            ("read_only_committed", c.read_only_committed),
            ("read_only_aborted", c.read_only_aborted),
            ("prepared_now", self.participants.len() as u64),
            ("decisions_kept_now", self.decided.iter().count() as u64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_lock_timeout_is_the_listed_one() {
        assert_eq!(
            parse_lock_timeout(SETTINGS[0].default),
            Some(DEFAULT_LOCK_TIMEOUT)
        );
        assert_eq!(parse_lock_timeout("1ms"), Some(Duration::from_millis(1)));
    }

    #[test]
    fn every_mutant_is_known() {
        for (name, _) in MUTANTS {
            assert!(Mutant::named(name).is_some(), "{name}");
        }
    }
}
