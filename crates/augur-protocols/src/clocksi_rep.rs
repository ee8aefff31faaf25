//! `clocksi-rep`: the non-speculative base protocol of the STR paper (§6.1), a
//! Clock-SI-style protocol extended with synchronous master–slave replication.
//!
//! **Guarantee: snapshot isolation** for committed transactions.
//!
//! * **Execution.** A transaction's read snapshot `RS` is its coordinator's physical clock at
//!   begin (never below the commit timestamp of the client's previous transaction, so a session
//!   reads its own writes). A read is served by any replica (the coordinator's own when it has
//!   one, else the nearest): the replica first waits for its clock to reach `RS`, then waits while
//!   a *prepared* version with a proposed timestamp `≤ RS` exists (it may still commit inside the
//!   snapshot), then returns the newest committed version with commit timestamp `≤ RS`. Writes are
//!   buffered by the client and shipped with the commit request.
//! * **Local certification.** For every updated key the coordinator replicates as a slave, a committed
//!   version newer than `RS` aborts the transaction at once; a conflicting prepared version of an
//!   older transaction aborts it too (wait-die: the younger dies). Blocking on an older prepared
//!   version is left to the master, which certifies authoritatively.
//! * **Global certification (2PC).** The coordinator sends a prepare to the master of every updated
//!   partition. The master certifies each key (committed version newer than `RS` → abort; prepared
//!   version of another transaction → wait-die: an older transaction waits for the outcome, a
//!   younger one aborts), installs pre-commit locks as prepared versions, proposes
//!   `max(clock + 1, RS + 1)` and synchronously replicates the prepare to its slaves, which install
//!   the versions and propose their own clock the same way (or follow PreciseClock, below).
//! * **Commit.** With a proposal from every replica of every updated partition, the commit
//!   timestamp is their maximum. The coordinator answers the client and sends the commit to all
//!   those replicas, which turn the prepared versions into committed ones and release waiters.
//!
//! Proposals exceed the proposing replica's clock, and a replica serves a snapshot only once its
//! clock has reached it, so a version committed later can never fall inside a snapshot already
//! served there.
//!
//! **PreciseClock (option; STR §6.3, and §8.1 Table 1, which compares ClockSI-Rep with and without
//! it).** With the protocol setting `precise_clock=on` (`augur check --set
//! protocol.precise_clock=on`, `[options.settings]` in a cluster file; `on`/`off`/`true`/`false`,
//! default off) every key keeps, at each replica, `LastReader`: the largest snapshot that has read
//! it there (raised by every read the replica serves, of absent keys too). Masters and slaves
//! alike then propose, instead of their clock, `max(LastReader(k) + 1 for every key k they
//! prepare, RS + 1)`: the smallest timestamp the paper's P1 (above the transaction's snapshot,
//! so it lands after what it read) and P2 (above the snapshot of every transaction that read a
//! written key without seeing the write) allow. Commit timestamps shrink, so fewer concurrent
//! snapshots fall below a commit and conflict with it. Why it stays correct:
//!
//! * A snapshot is only ever observed through the keys it reads, and every read served here
//!   raised the key's `LastReader` first; so a version prepared here later is proposed, hence
//!   committed, above every snapshot that already read the key here. A read arriving after the
//!   prepare meets the prepared version and waits if it may commit inside its snapshot, as
//!   before. `LastReader` stands in for the clock's monotonicity. It lives in the store's
//!   per-key metadata and is not persisted: after a crash the replica's durable serving lease
//!   stands in for it (every proposal then exceeds every snapshot served before the crash; see
//!   the shared participant side, `common::replica`).
//! * Since a replica serves a snapshot only once its clock has reached it, `LastReader` never
//!   exceeds the clock, so a precise proposal never exceeds the clock-based one made at the same
//!   moment: a commit is inside every snapshot taken after it at least as soon as under the
//!   clock rule, and no node's clock needs advancing past a proposal. Two commits of one key are
//!   still ordered by timestamp, since the later writer's snapshot includes the earlier commit.
//! * The price: a prepared version may now lie below the replica's clock, so a read whose
//!   snapshot falls between the proposal and the commit waits for the outcome, where under the
//!   clock rule it would have read past it.
//!
//! Failures: a participant that does not answer within `participant_timeout` makes the coordinator
//! abort with `Timeout`; an abort that overtakes a replicated prepare is remembered so the late
//! prepare is ignored. Links may lose and reorder messages and nodes may crash:
//!
//! * **Durable state.** Through its node's write-ahead log ([`crate::common::replica::Record`],
//!   persisted before any message or reply that depends on it leaves the node): its store
//!   (committed and prepared versions), its prepare records, its commit decisions not yet
//!   acknowledged by every replica, its transaction-id reservations and a durable bound on the
//!   snapshots it served, which after a restart stands in for every key's `LastReader` and for
//!   the clock (proposals land above it). Coordination in flight, waiting reads and parked
//!   prepares are lost, and their clients time out. See `docs/durability.md`.
//! * **Termination.** A replica holding a prepared version longer than `participant_timeout` asks
//!   the coordinator for the outcome, again every `participant_timeout`. The coordinator answers
//!   from its decision log, or *presumes abort* when it no longer knows the transaction: it
//!   forgets a transaction only after aborting it or after a crash, and neither can be followed
//!   by a commit. A decision is dropped once every replica acknowledged the commit.
//!
//! **Fail-over** (`docs/architecture/availability.md`; the shared half is
//! [`crate::common::membership`], the engine's [`crate::common::two_phase`]). Who masters each
//! partition and which replicas count is a configuration agreed through Raft; a node serves
//! reads and certifies prepares only under a lease from the group's leader; prepares, replicated
//! prepares and votes carry the partition's epoch and are refused at another. When a master's
//! lease has run out, the next in-sync replica takes over. Its *master state* is the store every
//! in-sync replica already holds (synchronous replication): nothing to rebuild but the
//! transactions in doubt there, whose coordinators it asks at once, and the partition's
//! proposal floor (the evicted replicas' lease end), above which it proposes. A coordinator
//! whose transaction was preparing on a partition that changed aborts it (`reconfigured`). A
//! replica out of sync copies the partition from its master before it counts again. With
//! `failover=off` the placement's masters serve for good and a partition whose master is down
//! commits nothing.
//!
//! Mutants (`augur check --mutant`), each breaking one rule above so the checker can be seen to
//! notice: `no-prepared-wait` (reads ignore prepared versions inside their snapshot),
//! `no-ww-certification` (certification ignores committed versions newer than the snapshot), and
//! `no-clock-wait` (a replica serves a snapshot its clock has not reached yet). The last is
//! harmless with PreciseClock on, whose `LastReader` then records the snapshot ahead of the
//! clock: check it with the option off. Fail-over's: `no-lease`, `promote-out-of-sync` and
//! `no-epoch-check` (see [`MUTANTS`]).
//!
//! This module holds the rules above — visibility, certification, local certification, the
//! coordinator's commit and abort — as hooks of [`Rules`]; serving reads, prepares and their
//! replication, applying outcomes, termination and garbage collection are the family's shared
//! machinery ([`crate::common::two_phase`]).

use crate::common::coordinator::{InteractiveCoordinator, PartitionWrites, Pending};
use crate::common::coordinator::{group_by_partition, serve_interactive};
use crate::common::membership::{self, Epoch};
use crate::common::replica::{self, ReadRequest, Record, Timer, Writes};
use crate::common::two_phase::{self, Certified, Conventions, Core, Rules, TwoPhase, Visible};
use crate::protocol_info::Engine;
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use crate::protocol_info::{SWITCH_VALUES, SettingInfo, switch};
use augur_contract::{Ctx, NodeEnv, Protocol};
use augur_storage::{MvStore, VersionState};
use augur_types::{AbortReason, ClientId, ClientReply, ClientRequest, Key, NodeId};
use augur_types::{PartitionId, RequestError, Timestamp, TxnId, Value};
use rustc_hash::FxHashMap;
use std::convert::Infallible;

/// `clocksi-rep`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "clocksi-rep",
    isolation: IsolationLevel::SnapshotIsolation,
    isolation_with: &[],
    paper: "STR §6.1 (Clock-SI with synchronous master-slave replication)",
    summary: "physical-clock snapshots, 2PC certification at masters, replicated prepares",
    engine: Engine::TwoPhase,
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

/// The protocol settings `clocksi-rep` accepts (see the module documentation).
pub const SETTINGS: &[SettingInfo] = &[
    SettingInfo {
        name: PRECISE_CLOCK,
        values: SWITCH_VALUES,
        default: "off",
        doc: "PreciseClock (STR §6.3): propose max(LastReader+1, RS+1) instead of the clock",
    },
    membership::FAILOVER_SETTING,
    membership::LEASE_SETTING,
    membership::SKEW_SETTING,
];

const PRECISE_CLOCK: &str = "precise_clock";

/// The messages of `clocksi-rep`: a commit carries its timestamp, a remote read its value.
pub type Msg = replica::Msg<Timestamp, Option<Value>>;

/// A deliberately broken variant (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    NoPreparedWait,
    NoWwCertification,
    NoClockWait,
    AckBeforeDurable,
}

/// The mutants `clocksi-rep` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-prepared-wait",
        "reads ignore prepared versions that may commit inside their snapshot",
    ),
    (
        "no-ww-certification",
        "certification ignores committed versions newer than the snapshot (lost updates)",
    ),
    (
        "no-clock-wait",
        "a replica serves a snapshot its clock has not reached yet",
    ),
    (
        "ack-before-durable",
        "the coordinator answers the client before its commit decision is on stable storage (lost commits under crash faults)",
    ),
    (
        "no-lease",
        "a node serves reads and certifies prepares without holding a lease, so a master deposed while it was paused goes on serving (caught at seed 5 of list-append on lan under --faults pause; not within 50 seeds on 3dc under all faults)",
    ),
    (
        "promote-out-of-sync",
        "[scenario] a master's eviction promotes the next replica the placement lists, in sync or not, even when the master was the last in sync (an unclean election: the commits it missed vanish); it needs two overlapping failures, which random check runs do not reach: tests/it/failover.rs scripts them and sees a committed write lost (promoting_a_replica_out_of_sync_loses_a_committed_write)",
    ),
    (
        "no-epoch-check",
        "masters and slaves take a prepare whatever epoch it carries, so after a handback the old master, until it applies it (later than the new master, or not at all while it is cut from the configuration group and its lease runs), certifies at the old epoch while the new master certifies at the new, and each one's slave takes the other's prepares (a lost update; caught at seed 43 of list-append on lan under --faults all; leases alone close the hole for an evicted master: docs/architecture/availability.md, Epochs)",
    ),
];

impl Mutant {
    fn named(name: &str) -> Option<Mutant> {
        match name {
            "no-prepared-wait" => Some(Mutant::NoPreparedWait),
            "no-ww-certification" => Some(Mutant::NoWwCertification),
            "no-clock-wait" => Some(Mutant::NoClockWait),
            "ack-before-durable" => Some(Mutant::AckBeforeDurable),
            _ => None,
        }
    }
}

/// Per-key protocol metadata: `LastReader` (with PreciseClock) and what waits on the key.
pub type KeyMeta = two_phase::KeyMeta<Infallible>;

/// What waits for a key's prepared versions to resolve: reads and prepares parked by wait-die,
/// nothing of `clocksi-rep`'s own.
pub type Waiter = two_phase::Waiter<Infallible>;

enum Phase {
    Executing,
    Committing {
        /// Per partition written, the epoch it was prepared at and the in-sync replicas of
        /// that epoch whose vote is still awaited.
        votes: Vec<(PartitionId, Epoch, Vec<NodeId>)>,
        commit_ts: Timestamp,
        partitions: Vec<PartitionId>,
    },
}

/// A transaction this node coordinates.
struct CoordTxn {
    client: ClientId,
    snapshot: Timestamp,
    read_only: bool,
    phase: Phase,
    pending: Option<Pending>,
    read_seq: u32,
    last_active: Timestamp,
}

/// One node running `clocksi-rep`.
pub struct ClockSiRep {
    /// The participant side, transaction ids and the decision log.
    core: Core<Infallible, Timestamp>,
    coordinated: FxHashMap<TxnId, CoordTxn>,
    /// Transactions aborted here, kept for `gc_retention` so a late prepare is ignored.
    aborted: FxHashMap<TxnId, Timestamp>,
    /// Commit timestamp of each client's last transaction: its next snapshot starts no earlier.
    session_floor: FxHashMap<ClientId, Timestamp>,
    /// Mutant `ack-before-durable` only: commits already acknowledged to their clients whose
    /// decision is logged and sent at the next garbage-collection tick.
    undurable: Vec<(TxnId, Timestamp, Vec<PartitionId>)>,
    /// Proposals follow PreciseClock (`precise_clock=on`) rather than the clock.
    precise_clock: bool,
    mutant: Option<Mutant>,
}

impl ClockSiRep {
    pub fn store(&self) -> &MvStore<KeyMeta> {
        &self.core.replica.store
    }

    fn id(&self) -> NodeId {
        self.core.env.id
    }

    /// Local certification (§6.1): only against keys this node replicates but does not master,
    /// where the master will certify again with locks.
    fn certify_locally(
        &self,
        txn: TxnId,
        snapshot: Timestamp,
        grouped: &PartitionWrites,
    ) -> Result<(), AbortReason> {
        let config = self.core.config();
        for (p, writes) in grouped {
            if !config.is_in_sync(self.id(), *p) || config.is_master(self.id(), *p) {
                continue;
            }
            for (key, _) in writes {
                // Only an abort matters here: waiting for an older prepared version is the
                // master's job, with its locks.
                if let Certified::Abort(reason) = self.certify(txn, snapshot, key) {
                    return Err(reason);
                }
            }
        }
        Ok(())
    }

    /// Coordinator-side abort of a committing transaction: tell every replica, answer the client.
    fn abort_everywhere(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        let Some(t) = self.coordinated.remove(&txn) else {
            return;
        };
        if let Phase::Committing { partitions, .. } = &t.phase {
            for node in self.core.config().replicas_of(partitions) {
                if node == self.id() {
                    self.apply_abort(ctx, txn);
                } else {
                    ctx.send(node, Msg::Abort { txn });
                }
            }
        }
        if let Some(pending) = t.pending {
            pending.answer(ctx, ClientReply::Aborted(reason));
        }
    }
}

impl Rules for ClockSiRep {
    type Decision = Timestamp;
    type Remote = Option<Value>;
    type Local = Option<Value>;
    type Own = Infallible;

    const COORDINATOR_INSTALLS: bool = false;
    const CONVENTIONS: Conventions = Conventions {
        one_proposal_per_master: true,
        aborts_own_overdue_locally: false,
        logs_decision_first: true,
    };

    fn core(&self) -> &Core<Infallible, Timestamp> {
        &self.core
    }

    fn core_mut(&mut self) -> &mut Core<Infallible, Timestamp> {
        &mut self.core
    }

    fn clock_wait(&self) -> bool {
        self.mutant != Some(Mutant::NoClockWait)
    }

    /// The newest committed version within the snapshot, unless a prepared version there may
    /// still commit inside it.
    fn visible(&mut self, read: &ReadRequest) -> Visible<Option<Value>> {
        if self.precise_clock {
            // Before anything can be served: whatever is prepared here later lands above it.
            let entry = self.core.replica.store.entry(&read.key);
            entry.meta.last_reader = entry.meta.last_reader.max(read.snapshot);
        }
        let Some(entry) = self.core.replica.store.get(&read.key) else {
            return Visible::Read(None);
        };
        let blocked = self.mutant != Some(Mutant::NoPreparedWait)
            && entry.uncommitted().any(|v| {
                v.state == VersionState::Prepared && v.ts <= read.snapshot && v.writer != read.txn
            });
        if blocked {
            return Visible::Wait;
        }
        Visible::Read(entry.read_at(read.snapshot).and_then(|v| v.value.clone()))
    }

    fn to_remote(local: Option<Value>) -> Option<Value> {
        local
    }

    fn from_remote(remote: Option<Value>) -> Option<Value> {
        remote
    }

    fn read_done(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        seq: u32,
        result: Result<Option<Value>, AbortReason>,
    ) {
        let Some(t) = self.coordinated.get_mut(&txn) else {
            return;
        };
        if t.read_seq != seq || !matches!(t.phase, Phase::Executing) {
            return;
        }
        let Some(pending) = t.pending.take() else {
            return;
        };
        t.last_active = ctx.now();
        match result {
            Ok(value) => pending.answer(ctx, ClientReply::Value(value)),
            Err(reason) => {
                self.coordinated.remove(&txn);
                pending.answer(ctx, ClientReply::Aborted(reason));
            }
        }
    }

    fn aborted_here(&self, txn: TxnId) -> bool {
        self.aborted.contains_key(&txn)
    }

    /// Certify one key for `txn`: a committed version newer than the snapshot aborts it; a
    /// prepared version of another transaction makes it wait if it is the older (wait-die),
    /// else abort.
    fn certify(&self, txn: TxnId, snapshot: Timestamp, key: &Key) -> Certified {
        let Some(entry) = self.core.replica.store.get(key) else {
            return Certified::Free;
        };
        if entry.latest_committed().is_some_and(|v| v.ts > snapshot)
            && self.mutant != Some(Mutant::NoWwCertification)
        {
            return Certified::Abort(AbortReason::WriteWriteConflict);
        }
        for v in entry.uncommitted() {
            if v.writer == txn {
                continue;
            }
            if self.core.may_wait(txn, snapshot, v.writer) {
                return Certified::Wait(key.clone());
            }
            return Certified::Abort(AbortReason::WaitDie);
        }
        Certified::Free
    }

    fn precise_clock(&self) -> bool {
        self.precise_clock
    }

    fn commit_ts(decision: &Timestamp) -> Timestamp {
        *decision
    }

    fn aborting(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) -> bool {
        self.aborted.insert(txn, ctx.now());
        false
    }

    fn running(&self, txn: TxnId) -> bool {
        self.coordinated.contains_key(&txn)
    }

    /// A replica's proposal reached the coordinator: with every replica's, the commit
    /// timestamp is their maximum, and the client hears of it as the decision is logged.
    fn prepared(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        partition: PartitionId,
        epoch: Epoch,
        from: NodeId,
        ts: Timestamp,
    ) {
        let Some(t) = self.coordinated.get_mut(&txn) else {
            return;
        };
        let Phase::Committing {
            votes, commit_ts, ..
        } = &mut t.phase
        else {
            return;
        };
        // A vote counts once, from a replica in sync at the epoch the partition was prepared
        // at.
        let Some((_, _, awaited)) = votes
            .iter_mut()
            .find(|(p, e, _)| *p == partition && *e == epoch)
        else {
            return;
        };
        let Some(at) = awaited.iter().position(|n| *n == from) else {
            return;
        };
        awaited.swap_remove(at);
        *commit_ts = (*commit_ts).max(ts);
        if votes.iter().any(|(_, _, awaited)| !awaited.is_empty()) {
            return;
        }
        let commit_ts = *commit_ts;
        let t = self.coordinated.remove(&txn).expect("present");
        let Phase::Committing { partitions, .. } = t.phase else {
            unreachable!()
        };
        let floor = self.session_floor.entry(t.client).or_default();
        *floor = (*floor).max(commit_ts);
        if let Some(pending) = t.pending {
            pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
        if self.mutant == Some(Mutant::AckBeforeDurable) {
            // The client has its answer; the decision waits for the next tick.
            return self.undurable.push((txn, commit_ts, partitions));
        }
        // The runtime holds the client's answer and the commit messages until the decision is
        // durable.
        self.decide(ctx, txn, commit_ts, commit_ts, &partitions);
    }

    fn abort_coordinated(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        self.abort_everywhere(ctx, txn, reason);
    }

    /// A transaction committing on a partition whose configuration changed was prepared
    /// against replicas that may no longer be the partition's: it aborts, to be retried.
    fn reconfigured(&mut self, ctx: &mut Ctx<'_, Self>, changed: &[PartitionId]) {
        let mut hit: Vec<TxnId> = self
            .coordinated
            .iter()
            .filter(|(_, t)| match &t.phase {
                Phase::Committing { partitions, .. } => {
                    partitions.iter().any(|p| changed.contains(p))
                }
                Phase::Executing => false,
            })
            .map(|(txn, _)| *txn)
            .collect();
        hit.sort();
        for txn in hit {
            self.abort_everywhere(ctx, txn, AbortReason::Reconfigured);
        }
    }

    fn commit_timed_out(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if self
            .coordinated
            .get(&txn)
            .is_some_and(|t| matches!(t.phase, Phase::Committing { .. }))
        {
            self.abort_everywhere(ctx, txn, AbortReason::Timeout);
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        for (txn, commit_ts, partitions) in std::mem::take(&mut self.undurable) {
            self.decide(ctx, txn, commit_ts, commit_ts, &partitions);
        }
    }

    fn expire(&mut self, floor: Timestamp, idle_limit: Timestamp) {
        // Transactions whose client vanished mid-execution are dropped; nothing of theirs was
        // installed anywhere, since writes travel only with the commit.
        self.coordinated.retain(|_, t| {
            !(matches!(t.phase, Phase::Executing)
                && t.pending.is_none()
                && t.last_active < idle_limit)
        });
        self.aborted.retain(|_, at| *at >= floor);
    }

    fn running_snapshots(&self) -> impl Iterator<Item = Timestamp> + '_ {
        self.coordinated.values().map(|t| t.snapshot)
    }
}

/// Whether `precise_clock` is on. Settings are validated before nodes are built
/// ([`crate::registry::validate_settings`]); a value that slipped through is a bug.
fn precise_clock_setting(env: &NodeEnv) -> bool {
    match env.options.settings.get(PRECISE_CLOCK) {
        None => false,
        Some(value) => switch(value).unwrap_or_else(|| {
            panic!(
                "clocksi-rep: bad value '{value}' for {PRECISE_CLOCK}; accepted values: {}",
                SWITCH_VALUES.join(", ")
            )
        }),
    }
}

impl InteractiveCoordinator for ClockSiRep {
    fn begin(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        read_only: bool,
        _age: Timestamp,
    ) {
        let txn = self.core.ids.allocate(ctx);
        let floor = self
            .session_floor
            .get(&pending.client)
            .copied()
            .unwrap_or_default();
        let snapshot = ctx.now().max(floor);
        self.coordinated.insert(
            txn,
            CoordTxn {
                client: pending.client,
                snapshot,
                read_only,
                phase: Phase::Executing,
                pending: None,
                read_seq: 0,
                last_active: ctx.now(),
            },
        );
        pending.answer(ctx, ClientReply::Begun { txn, snapshot });
    }

    /// Reads go to the coordinator's own replica when it has one, else to the nearest.
    fn read(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, key: Key) {
        let Some(t) = self.coordinated.get_mut(&txn) else {
            return pending.answer(ctx, ClientReply::Aborted(AbortReason::TransactionLost));
        };
        if t.pending.is_some() || !matches!(t.phase, Phase::Executing) {
            let why = format!("transaction {txn:?} already has a request in flight");
            return pending.answer(ctx, ClientReply::Rejected(RequestError::Invalid(why)));
        }
        t.pending = Some(pending);
        t.read_seq += 1;
        t.last_active = ctx.now();
        let read = ReadRequest {
            txn,
            seq: t.read_seq,
            key,
            snapshot: t.snapshot,
            speculative: false,
        };
        let partition = self.core.partition_of(&read.key);
        if self.core.config().is_in_sync(self.id(), partition) {
            self.serve_read(ctx, read);
        } else {
            self.read_remotely(ctx, read, partition);
        }
    }

    fn commit(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, writes: Writes) {
        let Some(t) = self.coordinated.get(&txn) else {
            return pending.answer(ctx, ClientReply::Aborted(AbortReason::TransactionLost));
        };
        if t.pending.is_some() || !matches!(t.phase, Phase::Executing) {
            let why = format!("transaction {txn:?} already has a request in flight");
            return pending.answer(ctx, ClientReply::Rejected(RequestError::Invalid(why)));
        }
        if t.read_only && !writes.is_empty() {
            let err = RequestError::WriteInReadOnly(txn);
            return pending.answer(ctx, ClientReply::Rejected(err));
        }
        let snapshot = t.snapshot;
        if writes.is_empty() {
            // Read-only transactions commit as soon as they finish executing (§6.1).
            self.coordinated.remove(&txn);
            return pending.answer(
                ctx,
                ClientReply::Committed {
                    commit_ts: snapshot,
                },
            );
        }
        let placement = self.core.env.placement.clone();
        let grouped = group_by_partition(&placement, writes);
        if let Err(reason) = self.certify_locally(txn, snapshot, &grouped) {
            self.coordinated.remove(&txn);
            return pending.answer(ctx, ClientReply::Aborted(reason));
        }
        let config = self.core.config();
        let votes = grouped
            .keys()
            .map(|p| (*p, config.epoch(*p), config.in_sync(*p).to_vec()))
            .collect();
        let partitions: Vec<PartitionId> = grouped.keys().copied().collect();
        let t = self.coordinated.get_mut(&txn).expect("checked above");
        t.pending = Some(pending);
        t.phase = Phase::Committing {
            votes,
            commit_ts: snapshot.next(),
            partitions,
        };
        ctx.set_timer(
            self.core.env.options.participant_timeout,
            Timer::CommitTimeout(txn),
        );
        self.send_prepares(ctx, txn, snapshot, grouped);
    }

    fn abort_asked(&mut self, _ctx: &mut Ctx<'_, Self>, txn: TxnId) -> Result<(), String> {
        if let Some(t) = self.coordinated.get(&txn)
            && matches!(t.phase, Phase::Committing { .. })
        {
            return Err(format!("transaction {txn:?} is already committing"));
        }
        self.coordinated.remove(&txn);
        Ok(())
    }
}

impl Protocol for ClockSiRep {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record<Timestamp>;

    fn new(env: &NodeEnv) -> Self {
        ClockSiRep {
            core: Core::new(env, true),
            coordinated: FxHashMap::default(),
            aborted: FxHashMap::default(),
            session_floor: FxHashMap::default(),
            undurable: Vec::new(),
            precise_clock: precise_clock_setting(env),
            mutant: env.options.mutant.as_deref().and_then(Mutant::named),
        }
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Self::Record>) -> Self {
        ClockSiRep {
            core: Core::recover(env, true, records),
            ..ClockSiRep::new(env)
        }
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Self::Record)) {
        self.core.checkpoint(emit);
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.start(ctx);
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        serve_interactive(self, ctx, request);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        self.handle_message(ctx, from, msg);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        self.handle_timer(ctx, timer);
    }

    /// The client's session floor is all this node keeps for it alone.
    fn on_client_gone(&mut self, _ctx: &mut Ctx<'_, Self>, client: ClientId) {
        self.session_floor.remove(&client);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.core.counters()
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        self.core.leftovers()
    }

    fn leader(&self) -> Option<NodeId> {
        self.core.membership.leader()
    }

    fn master_of(&self, partition: PartitionId) -> Option<NodeId> {
        self.core.master_of(partition)
    }
}
