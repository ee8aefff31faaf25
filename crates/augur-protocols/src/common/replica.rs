//! Two-phase commit with presumed abort over the multi-version store, as `clocksi-rep` and STR
//! share it: the messages ([`Msg`]) and timers ([`Timer`]) of the family, the participant side
//! ([`Replica`]: the store, prepare records, prepares parked by wait-die, the serving lease, the
//! garbage-collection watermark, and the termination protocol's search for long-prepared
//! transactions), the coordinator's decision log kept until every replica acknowledged, and the
//! durable [`Record`]s these protocols write to their node's log and rebuild from.
//!
//! This is the family's state and its durability; what a node does with it — serving reads,
//! prepares, outcomes, termination, garbage collection — is [`super::two_phase`], and what
//! differs between protocols (how a write is certified, whether proposals follow
//! PreciseClock, which versions a read may see, what the coordinator does besides deciding) is
//! each protocol's [`super::two_phase::Rules`].
//!
//! # What is durable, and why that is enough
//!
//! * A replica persists the versions it installs uncommitted ([`Record::Installed`]) before it
//!   votes, and each commit or abort it applies. So a vote, once sent, survives a crash, and a
//!   restarted replica holds every version it promised: a key that exists never reads as absent,
//!   and a prepared version still blocks the snapshots it may fall into.
//! * A coordinator persists its decision ([`Record::Decided`]) before the client or any replica
//!   hears of it, and forgets it ([`Record::Forgotten`]) only once every replica acknowledged
//!   the commit. A replica that missed the commit while it was down still holds the prepared
//!   version; after restart it asks at once (its prepare records are recovered as long overdue)
//!   and the decision log answers. Since every replica of a partition must prepare before a
//!   commit, no commit can be missed by a replica that never prepared it.
//! * Transaction ids come from durable reservations ([`Record::IdsReserved`]), so a restarted
//!   coordinator never reuses an id a replica may still know.
//! * Proposals must exceed every snapshot a replica served before it crashed, or a later commit
//!   could slip into a snapshot already read (PreciseClock's `LastReader` and the clock rule
//!   both stand on this). Rather than persisting every read, a replica persists a *lease*
//!   ([`Record::Served`]): it serves snapshots only up to a bound it has made durable, raised
//!   [`SERVE_LEASE`] at a time. After a restart every proposal exceeds the recovered bound, even
//!   if the clock went backwards across the restart.
//!
//! Volatile, hence lost in a crash, and harmlessly so: coordination in flight (its clients time
//! out; its prepares are presumed aborted), waiting reads and parked prepares (their
//! coordinators time out), session floors, and STR's speculative state.

use super::membership::{Epoch, MembershipMsg, MembershipTimer};
use super::sequencer::SequencerRecord;
use augur_contract::Protocol;
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, Work};
use augur_storage::{KeyEntry, MvStore, VersionState};
use augur_types::{AbortReason, Key, NodeId, PartitionId, Placement, Timestamp, TxnId, Value};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How far past a snapshot a replica's durable serving bound is raised at a time: at most one
/// log record per this much clock time, and after a restart proposals start at most this far
/// ahead of the last snapshot served.
pub const SERVE_LEASE: Duration = Duration::from_millis(100);

/// Transaction ids reserved durably at a time.
const ID_BLOCK: u64 = 1 << 16;

/// What the protocols of the 2PC family write to their node's log. `D` is the decision a commit
/// message carries.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record<D> {
    /// `txn` installed `writes` here, uncommitted (`Prepared`, or STR's `LocalCommitted`), at
    /// proposal `ts`: a prepare, a replicated prepare or a local commit.
    Installed {
        txn: TxnId,
        snapshot: Timestamp,
        ts: Timestamp,
        state: VersionState,
        writes: Writes,
    },
    /// `txn`'s versions here committed at `commit_ts`.
    Committed { txn: TxnId, commit_ts: Timestamp },
    /// `txn`'s versions here were dropped.
    Aborted { txn: TxnId },
    /// This coordinator decided to commit `txn`; `replicas` have yet to acknowledge.
    Decided {
        txn: TxnId,
        decision: D,
        replicas: Vec<NodeId>,
    },
    /// Every replica applied `txn`'s commit: the decision is no longer needed.
    Forgotten { txn: TxnId },
    /// Transaction sequence numbers below `below` may have been handed out.
    IdsReserved { below: u64 },
    /// Snapshots up to `up_to` may have been served here.
    Served { up_to: Timestamp },
    /// Checkpoints only: a key's committed versions, oldest first.
    Versions {
        key: Key,
        versions: Vec<(TxnId, Timestamp, Option<Value>)>,
    },
    /// Checkpoints only: the garbage-collection watermark.
    Watermark(Timestamp),
    /// The configuration group's Raft log ([`super::membership`]).
    Membership(SequencerRecord),
    /// This node copied `partition` from its master: everything it held of the partition is
    /// dropped, and the `Versions` records that follow are the partition's committed state
    /// (collected below `watermark`).
    PartitionCopied {
        partition: PartitionId,
        watermark: Timestamp,
    },
}

impl<D> From<SequencerRecord> for Record<D> {
    fn from(record: SequencerRecord) -> Self {
        Record::Membership(record)
    }
}

/// A key's committed versions as a checkpoint or a copy carries them, oldest first.
pub type KeyVersions = (Key, Vec<(TxnId, Timestamp, Option<Value>)>);

/// A read as the serving replica sees it. The coordinator is `txn.coordinator()`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRequest {
    pub txn: TxnId,
    /// Distinguishes this read from an earlier one of the same transaction that timed out.
    pub seq: u32,
    pub key: Key,
    pub snapshot: Timestamp,
    /// The reader may see versions only committed locally (STR's speculative reads).
    pub speculative: bool,
}

/// The messages of the family. `D` is the decision a commit carries, `R` what a remote read
/// returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg<D, R> {
    Read(ReadRequest),
    ReadReply {
        txn: TxnId,
        seq: u32,
        result: Result<R, AbortReason>,
    },
    /// Coordinator → master: certify and pre-commit these partitions' writes, each at the
    /// epoch of the partition in the coordinator's configuration.
    Prepare {
        txn: TxnId,
        snapshot: Timestamp,
        partitions: PreparedPartitions,
    },
    /// Master → slave: the master pre-committed `writes` at `epoch`; install them and propose
    /// a timestamp.
    ReplicatePrepare {
        txn: TxnId,
        snapshot: Timestamp,
        partition: PartitionId,
        epoch: Epoch,
        writes: Writes,
    },
    /// Replica → coordinator: pre-committed `partition` at `epoch`, proposing `ts`.
    Prepared {
        txn: TxnId,
        partition: PartitionId,
        epoch: Epoch,
        ts: Timestamp,
    },
    /// Master → coordinator: certification failed.
    Refused {
        txn: TxnId,
        reason: AbortReason,
    },
    /// Coordinator → replica: commit.
    Commit {
        txn: TxnId,
        decision: D,
    },
    Abort {
        txn: TxnId,
    },
    /// Replica → coordinator: the commit is applied here; the decision may be forgotten.
    CommitAck {
        txn: TxnId,
    },
    /// Replica → coordinator: this prepared transaction has waited long; what became of it?
    QueryOutcome {
        txn: TxnId,
    },
    /// The configuration group: Raft and leases ([`super::membership`]).
    Membership(MembershipMsg),
    /// A replica out of sync → the partition's master: copy the partition to me.
    CatchUpAsk {
        partition: PartitionId,
    },
    /// Master → that replica: the partition's committed state at `epoch` (nothing prepared
    /// there), collected below `watermark`.
    CatchUpState {
        partition: PartitionId,
        epoch: Epoch,
        watermark: Timestamp,
        versions: Vec<KeyVersions>,
    },
    /// The replica → the master: the copy is installed, durably.
    CatchUpDone {
        partition: PartitionId,
        epoch: Epoch,
    },
}

super::membership::carried_in_membership_variants!(Msg<D, R>, Timer);

/// The shape of each message as its sender builds it: reads go to a replica of the key, prepares
/// to the master of each partition, a partition's slaves hear only from its master, answers go
/// to the transaction's coordinator, and only the coordinator sends a decision.
impl<D, R> CheckMessage for Msg<D, R> {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            Msg::Read(read) => {
                at.txn_of_sender(read.txn)?;
                at.key_here(&read.key)
            }
            Msg::ReadReply { txn, .. }
            | Msg::Refused { txn, .. }
            | Msg::CommitAck { txn }
            | Msg::QueryOutcome { txn } => at.txn_here(*txn),
            // Whether the receiver is the master, and the sender the master of a replicated
            // prepare, depends on the configuration, which the handler checks (by epoch); the
            // placement bounds who may be either.
            Msg::Prepare {
                txn, partitions, ..
            } => {
                at.txn_of_sender(*txn)?;
                for (partition, _, writes) in partitions {
                    at.partition_here(*partition)?;
                    check_writes(at, *partition, writes)?;
                }
                Ok(())
            }
            Msg::ReplicatePrepare {
                txn,
                partition,
                writes,
                ..
            } => {
                at.txn(*txn)?;
                at.partition_here(*partition)?;
                sender_replicates(at, *partition)?;
                check_writes(at, *partition, writes)
            }
            Msg::Membership(msg) => msg.check(at),
            Msg::CatchUpAsk { partition } | Msg::CatchUpDone { partition, .. } => {
                at.partition_here(*partition)?;
                sender_replicates(at, *partition)
            }
            Msg::CatchUpState {
                partition,
                versions,
                ..
            } => {
                at.partition_here(*partition)?;
                sender_replicates(at, *partition)?;
                versions
                    .iter()
                    .try_for_each(|(key, _)| at.key_in(key, *partition))
            }
            Msg::Prepared { txn, partition, .. } => {
                at.txn_here(*txn)?;
                at.partition(*partition)?;
                if at.placement.replicates(at.from, *partition) {
                    Ok(())
                } else {
                    Err(BadMessage(format!(
                        "{} prepared partition {}, which it does not replicate",
                        at.from, partition.0
                    )))
                }
            }
            Msg::Commit { txn, .. } | Msg::Abort { txn } => at.txn_of_sender(*txn),
        }
    }
}

/// The sender replicates `partition` (in the placement).
pub fn sender_replicates(at: &Inbound<'_>, partition: PartitionId) -> Result<(), BadMessage> {
    if at.placement.replicates(at.from, partition) {
        Ok(())
    } else {
        Err(BadMessage(format!(
            "{} does not replicate partition {}",
            at.from, partition.0
        )))
    }
}

/// Every key of `writes` belongs to `partition`.
fn check_writes(
    at: &Inbound<'_>,
    partition: PartitionId,
    writes: &Writes,
) -> Result<(), BadMessage> {
    writes
        .iter()
        .try_for_each(|(key, _)| at.key_in(key, partition))
}

/// The timers of the family.
#[derive(Debug)]
pub enum Timer {
    /// The periodic tick: garbage collection and the termination protocol.
    Gc,
    /// Serve this read once the clock has reached its snapshot.
    ClockWait(ReadRequest),
    ReadTimeout {
        txn: TxnId,
        seq: u32,
    },
    CommitTimeout(TxnId),
    /// The configuration group's ([`super::membership`]).
    Membership(MembershipTimer),
}

/// Whether a replica may serve a read now ([`Replica::admit_read`]).
pub enum Admit {
    /// Yes: the snapshot is covered by the serving lease and the clock has reached it.
    Serve(ReadRequest),
    /// No, ever: versions it may need were garbage-collected.
    TooOld(ReadRequest),
    /// Not yet: a timer brings it back when the clock reaches the snapshot.
    Later,
}

/// The participant side of a 2PC-family node (see the module docs). Everything here is
/// durable, rebuilt from [`Record`]s, except the parked prepares.
pub struct Replica<M> {
    pub store: MvStore<M>,
    pub participants: Participants,
    /// Prepares waiting at a master for an older transaction's outcome (wait-die).
    pub parked: FxHashMap<TxnId, ParkedPrepare>,
    /// The durable bound on the snapshots served here.
    pub lease: ServeLease,
    /// Snapshots below this may miss garbage-collected versions.
    pub gc_watermark: Timestamp,
}

/// What a restarted 2PC-family node is rebuilt from its log into.
pub struct Recovered<M, D> {
    pub replica: Replica<M>,
    pub decided: DecisionLog<D>,
    pub ids: TxnIds,
    /// The configuration group's records, for its own rebuild.
    pub membership: Vec<SequencerRecord>,
}

impl<M: Default> Default for Replica<M> {
    fn default() -> Self {
        Replica {
            store: MvStore::new(),
            participants: Participants::default(),
            parked: FxHashMap::default(),
            lease: ServeLease::default(),
            gc_watermark: Timestamp::ZERO,
        }
    }
}

impl<M: Default> Replica<M> {
    /// Replay `records` in order onto an empty node `node`.
    pub fn recover<D>(
        node: NodeId,
        partition_of: &dyn Fn(&Key) -> PartitionId,
        records: &mut dyn Iterator<Item = Record<D>>,
    ) -> Recovered<M, D> {
        let mut r = Replica::default();
        let mut decided = DecisionLog::default();
        let mut ids = TxnIds::new(node);
        let mut membership = Vec::new();
        for record in records {
            match record {
                Record::Installed {
                    txn,
                    snapshot,
                    ts,
                    state,
                    writes,
                } => {
                    // Overdue from the start: the termination protocol asks about it at once.
                    let p = participant(&mut r.participants, txn, snapshot, Timestamp::ZERO);
                    for (key, value) in writes {
                        r.store.entry(&key).install(txn, ts, state, value);
                        if !p.keys.contains(&key) {
                            p.keys.push(key);
                        }
                    }
                }
                Record::Committed { txn, commit_ts } => {
                    r.resolve(txn, |entry| {
                        entry.commit(txn, commit_ts);
                    });
                }
                Record::Aborted { txn } => {
                    r.resolve(txn, |entry| {
                        entry.remove_uncommitted(txn);
                    });
                }
                Record::Decided {
                    txn,
                    decision,
                    replicas,
                } => decided.record(txn, decision, replicas),
                Record::Forgotten { txn } => {
                    decided.decided.remove(&txn);
                }
                Record::IdsReserved { below } => ids.resume_below(below),
                Record::Served { up_to } => r.lease.up_to = r.lease.up_to.max(up_to),
                Record::Versions { key, versions } => {
                    restore_versions(&mut r.store, &key, versions)
                }
                Record::Watermark(ts) => r.gc_watermark = r.gc_watermark.max(ts),
                Record::Membership(record) => membership.push(record),
                Record::PartitionCopied {
                    partition,
                    watermark,
                } => r.drop_partition(partition, watermark, partition_of),
            }
        }
        r.lease.recovered = r.lease.up_to;
        Recovered {
            replica: r,
            decided,
            ids,
            membership,
        }
    }
}

impl<M> Replica<M> {
    /// Whether `read` can be served here now: not below the watermark, and (unless
    /// `clock_wait` is off, as for a mutant) not before the clock has reached its snapshot. A
    /// read admitted is covered by the durable serving lease first.
    pub fn admit_read<P, D>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        read: ReadRequest,
        clock_wait: bool,
    ) -> Admit
    where
        P: Protocol<Record = Record<D>, Timer = Timer>,
    {
        if read.snapshot < self.gc_watermark {
            return Admit::TooOld(read);
        }
        let now = ctx.now();
        if now < read.snapshot && clock_wait {
            ctx.set_timer(read.snapshot.since(now), Timer::ClockWait(read));
            return Admit::Later;
        }
        self.lease.cover(ctx, read.snapshot);
        Admit::Serve(read)
    }

    /// Install `writes` of `txn` uncommitted (`state`) at `ts`, durably: the vote that follows
    /// must survive a crash.
    pub fn install<P, D>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        txn: TxnId,
        snapshot: Timestamp,
        ts: Timestamp,
        state: VersionState,
        writes: &Writes,
    ) where
        P: Protocol<Record = Record<D>>,
        M: Default,
    {
        ctx.persist(Record::Installed {
            txn,
            snapshot,
            ts,
            state,
            writes: writes.clone(),
        });
        ctx.charge(Work::writes(writes.len()));
        let participant = participant(&mut self.participants, txn, snapshot, ctx.now());
        for (key, value) in writes {
            self.store.entry(key).install(txn, ts, state, value.clone());
            if !participant.keys.contains(key) {
                participant.keys.push(key.clone());
            }
        }
    }

    /// Commit `txn`'s versions here at `commit_ts`, durably, calling `each` on every entry it
    /// committed; the keys, whose waiters may now proceed (`None`: nothing prepared here).
    pub fn commit<P, D>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        txn: TxnId,
        commit_ts: Timestamp,
        mut each: impl FnMut(&mut KeyEntry<M>),
    ) -> Option<Vec<Key>>
    where
        P: Protocol<Record = Record<D>>,
    {
        if !self.participants.contains_key(&txn) {
            return None;
        }
        ctx.persist(Record::Committed { txn, commit_ts });
        let keys = self.resolve(txn, |entry| {
            entry.commit(txn, commit_ts);
            each(entry);
        });
        ctx.charge(Work::writes(keys.as_ref().map_or(0, Vec::len)));
        keys
    }

    /// Drop `txn`'s versions here, durably; the keys, whose waiters may now proceed (`None`:
    /// nothing prepared here).
    pub fn abort<P, D>(&mut self, ctx: &mut Ctx<'_, P>, txn: TxnId) -> Option<Vec<Key>>
    where
        P: Protocol<Record = Record<D>>,
    {
        self.parked.remove(&txn);
        if !self.participants.contains_key(&txn) {
            return None;
        }
        ctx.persist(Record::Aborted { txn });
        let keys = self.resolve(txn, |entry| {
            entry.remove_uncommitted(txn);
        });
        ctx.charge(Work::writes(keys.as_ref().map_or(0, Vec::len)));
        keys
    }

    /// Drop `txn`'s prepare record and apply `outcome` to each of its keys' entries (live and
    /// in replay alike); the keys (`None`: nothing prepared here).
    fn resolve(
        &mut self,
        txn: TxnId,
        mut outcome: impl FnMut(&mut KeyEntry<M>),
    ) -> Option<Vec<Key>> {
        let participant = self.participants.remove(&txn)?;
        for key in &participant.keys {
            if let Some(entry) = self.store.get_mut(key) {
                outcome(entry);
            }
        }
        Some(participant.keys)
    }

    /// Forget everything held of `partition` (a copy from its master replaces it): its keys'
    /// versions, and its keys in every prepare record (a record left with no key goes). The
    /// watermark rises to the copy's.
    pub fn drop_partition(
        &mut self,
        partition: PartitionId,
        watermark: Timestamp,
        partition_of: &dyn Fn(&Key) -> PartitionId,
    ) {
        self.store.clear_where(|key| partition_of(key) == partition);
        self.participants.retain(|_, p| {
            p.keys.retain(|key| partition_of(key) != partition);
            !p.keys.is_empty()
        });
        self.gc_watermark = self.gc_watermark.max(watermark);
    }

    /// Whether a transaction holds a prepared (uncommitted) version of a key of `partition`
    /// here.
    pub fn prepared_in(
        &self,
        partition: PartitionId,
        partition_of: &dyn Fn(&Key) -> PartitionId,
    ) -> bool {
        self.participants
            .values()
            .any(|p| p.keys.iter().any(|key| partition_of(key) == partition))
    }

    /// The committed versions of every key of `partition`, in the store's order.
    pub fn committed_versions(
        &self,
        partition: PartitionId,
        partition_of: &dyn Fn(&Key) -> PartitionId,
    ) -> Vec<KeyVersions> {
        partition_versions(&self.store, partition, partition_of)
    }

    /// The termination protocol: ask the coordinators of the transactions prepared here for
    /// `patience` or longer; those this node coordinates itself are returned, in id order, to
    /// be answered locally.
    pub fn query_overdue<P, D, R>(&mut self, ctx: &mut Ctx<'_, P>, patience: Duration) -> Vec<TxnId>
    where
        P: Protocol<Msg = Msg<D, R>>,
        D: Clone + std::fmt::Debug + Send + Serialize + serde::de::DeserializeOwned + 'static,
        R: Clone + std::fmt::Debug + Send + Serialize + serde::de::DeserializeOwned + 'static,
    {
        let me = ctx.id();
        let mut local = Vec::new();
        for txn in stale_prepares(&mut self.participants, ctx.now(), patience) {
            if txn.coordinator() == me {
                local.push(txn);
            } else {
                ctx.send(txn.coordinator(), Msg::QueryOutcome { txn });
            }
        }
        local
    }

    /// Raise the watermark to `watermark` (never lower it) and collect a bounded batch of
    /// versions below it.
    pub fn collect_garbage(&mut self, watermark: Timestamp, batch: usize) {
        self.gc_watermark = self.gc_watermark.max(watermark);
        self.store.collect_garbage(self.gc_watermark, batch);
    }

    /// Emit the records that rebuild this node's durable state (see [`Replica::recover`]), in a
    /// deterministic order.
    pub fn checkpoint<D: Clone>(
        &self,
        decided: &DecisionLog<D>,
        ids: &TxnIds,
        emit: &mut dyn FnMut(Record<D>),
    ) {
        ids.checkpoint(emit);
        emit(Record::Served {
            up_to: self.lease.up_to.max(self.lease.recovered),
        });
        emit(Record::Watermark(self.gc_watermark));
        checkpoint_versions(&self.store, emit);
        let mut txns: Vec<&TxnId> = self.participants.keys().collect();
        txns.sort();
        for txn in txns {
            let p = &self.participants[txn];
            for key in &p.keys {
                let Some(v) = self.store.get(key).and_then(|e| e.uncommitted_by(*txn)) else {
                    continue;
                };
                emit(Record::Installed {
                    txn: *txn,
                    snapshot: p.snapshot,
                    ts: v.ts,
                    state: v.state,
                    writes: vec![(key.clone(), v.value.clone())],
                });
            }
        }
        decided.checkpoint(emit);
    }
}

/// Checkpoints: a `Versions` record for every key of `store` with committed versions, oldest
/// first, in the store's order.
pub fn checkpoint_versions<M, D, R: From<Record<D>>>(store: &MvStore<M>, emit: &mut dyn FnMut(R)) {
    for (key, versions) in store.iter().filter_map(|(key, e)| committed_of(key, e)) {
        emit(Record::Versions { key, versions }.into());
    }
}

/// The committed versions of every key of `partition` in `store`, in the store's order: what
/// a copy of the partition carries.
pub fn partition_versions<M>(
    store: &MvStore<M>,
    partition: PartitionId,
    partition_of: &dyn Fn(&Key) -> PartitionId,
) -> Vec<KeyVersions> {
    store
        .iter()
        .filter(|(key, _)| partition_of(key) == partition)
        .filter_map(|(key, entry)| committed_of(key, entry))
        .collect()
}

/// `key`'s committed versions, oldest first, as a checkpoint or a copy carries them; `None` if
/// it has none.
fn committed_of<M>(key: &Key, entry: &KeyEntry<M>) -> Option<KeyVersions> {
    let versions: Vec<_> = entry
        .versions()
        .filter(|v| v.state == VersionState::Committed)
        .map(|v| (v.writer, v.ts, v.value.clone()))
        .collect();
    (!versions.is_empty()).then(|| (key.clone(), versions))
}

/// Replay of a `Versions` record: install the key's committed versions.
pub fn restore_versions<M: Default>(
    store: &mut MvStore<M>,
    key: &Key,
    versions: Vec<(TxnId, Timestamp, Option<Value>)>,
) {
    let entry = store.entry(key);
    for (writer, ts, value) in versions {
        entry.put_committed(writer, ts, value);
    }
}

/// What a coordinator answers a replica asking about `txn` ([`Msg::QueryOutcome`]): the commit
/// if it decided one, nothing while the transaction is still `running` here (its outcome, or
/// its commit timeout's abort, will reach the replica), else abort — it was aborted, or lost in
/// a crash before any decision, and neither can commit now.
pub fn outcome_for<D: Clone, R>(
    decided: &DecisionLog<D>,
    txn: TxnId,
    running: bool,
) -> Option<Msg<D, R>> {
    outcome(decided, txn, running).map(|decision| match decision {
        Some(decision) => Msg::Commit { txn, decision },
        None => Msg::Abort { txn },
    })
}

/// The outcome [`outcome_for`] answers with, whatever a protocol's messages: `Some(Some(d))`
/// commit with decision `d`, `Some(None)` abort, `None` nothing yet (`txn` is still `running`).
pub fn outcome<D: Clone>(decided: &DecisionLog<D>, txn: TxnId, running: bool) -> Option<Option<D>> {
    if let Some(decision) = decided.get(&txn) {
        return Some(Some(decision.clone()));
    }
    (!running).then_some(None)
}

/// A replica's durable bound on the snapshots it has served (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct ServeLease {
    /// Snapshots up to here may be served without persisting anything.
    up_to: Timestamp,
    /// The bound recovered after the last crash: every proposal must exceed it.
    recovered: Timestamp,
}

impl ServeLease {
    /// Before serving a read at `snapshot`: raise the durable bound past it if needed.
    pub fn cover<P: Protocol<Record = Record<D>>, D>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        snapshot: Timestamp,
    ) {
        self.cover_with::<P, D>(ctx, snapshot, |now| {
            snapshot.max(now).saturating_add(SERVE_LEASE)
        });
    }

    /// Before letting `value` be observed (a snapshot served, a timestamp claimed): if it is
    /// past the durable bound, persist a new bound, `bound(now)` (at least `value`), in a
    /// `Served` record, which the runtime makes durable before any message of this handler
    /// leaves. For protocols whose timestamps are not the clock's microseconds (DST's hybrid
    /// ones) or whose log wraps this family's records. Whether it persisted.
    pub fn cover_with<P: Protocol, D>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        value: Timestamp,
        bound: impl FnOnce(Timestamp) -> Timestamp,
    ) -> bool
    where
        P::Record: From<Record<D>>,
    {
        if value <= self.up_to {
            return false;
        }
        self.up_to = bound(ctx.now()).max(value);
        ctx.persist(Record::<D>::Served { up_to: self.up_to }.into());
        true
    }

    /// The durable bound (what a checkpoint keeps).
    pub fn up_to(&self) -> Timestamp {
        self.up_to.max(self.recovered)
    }

    /// Replay of a `Served` record: after a restart, everything up to it may have been
    /// observed before the crash.
    pub fn replayed(&mut self, up_to: Timestamp) {
        self.up_to = self.up_to.max(up_to);
        self.recovered = self.up_to;
    }

    /// The smallest timestamp a proposal may take: above every snapshot served before the
    /// last crash.
    pub fn proposal_floor(&self) -> Timestamp {
        self.recovered.next()
    }
}

/// A write set as shipped between nodes (`None` deletes).
pub type Writes = Vec<(Key, Option<Value>)>;

/// A prepare's partitions, each with the epoch the coordinator prepared it at, and its writes.
pub type PreparedPartitions = Vec<(PartitionId, super::membership::Epoch, Writes)>;

/// A transaction prepared at this replica (durable: its prepare record).
pub struct Participant {
    pub snapshot: Timestamp,
    pub keys: Vec<Key>,
    /// When the outcome was last awaited from: the prepare, then each query to the coordinator.
    pub waiting_since: Timestamp,
}

/// Prepare records by transaction.
pub type Participants = FxHashMap<TxnId, Participant>;

/// The prepare record of `txn`, created on its first prepared key.
pub fn participant(
    participants: &mut Participants,
    txn: TxnId,
    snapshot: Timestamp,
    now: Timestamp,
) -> &mut Participant {
    participants.entry(txn).or_insert_with(|| Participant {
        snapshot,
        keys: Vec::new(),
        waiting_since: now,
    })
}

/// Transactions prepared here for `patience` or longer without an outcome, in id order; each is
/// marked as asked now. The termination protocol asks their coordinators.
pub fn stale_prepares(
    participants: &mut Participants,
    now: Timestamp,
    patience: Duration,
) -> Vec<TxnId> {
    let mut ask = Vec::new();
    for (txn, p) in participants.iter_mut() {
        if now.since(p.waiting_since) >= patience {
            p.waiting_since = now;
            ask.push(*txn);
        }
    }
    // Deterministic order regardless of the hash map's.
    ask.sort();
    ask
}

/// A prepare waiting at a master for an older transaction's outcome (wait-die).
pub struct ParkedPrepare {
    pub snapshot: Timestamp,
    pub partitions: PreparedPartitions,
}

/// Commit decisions of the transactions a node coordinates, kept (durably) until every replica
/// acknowledged applying them, so a replica that asks later learns the same outcome. `D` is what
/// a commit message carries.
pub struct DecisionLog<D> {
    decided: FxHashMap<TxnId, (D, Vec<NodeId>)>,
}

impl<D> Default for DecisionLog<D> {
    fn default() -> Self {
        DecisionLog {
            decided: FxHashMap::default(),
        }
    }
}

impl<D> DecisionLog<D> {
    /// Log the commit of `txn`, awaiting the acknowledgements of `replicas` (none: nothing kept).
    pub fn record(&mut self, txn: TxnId, decision: D, replicas: Vec<NodeId>) {
        if !replicas.is_empty() {
            self.decided.insert(txn, (decision, replicas));
        }
    }

    /// Decide to commit `txn`: persist the decision, so it is durable before anyone hears of
    /// it, and keep it until `replicas` acknowledge.
    pub fn decide<P: Protocol>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        txn: TxnId,
        decision: D,
        replicas: Vec<NodeId>,
    ) where
        D: Clone,
        P::Record: From<Record<D>>,
    {
        if !replicas.is_empty() {
            ctx.persist(
                Record::Decided {
                    txn,
                    decision: decision.clone(),
                    replicas: replicas.clone(),
                }
                .into(),
            );
        }
        self.record(txn, decision, replicas);
    }

    pub fn get(&self, txn: &TxnId) -> Option<&D> {
        self.decided.get(txn).map(|(d, _)| d)
    }

    /// Drop the decision about `txn` (replaying its [`Record::Forgotten`]).
    pub fn forget(&mut self, txn: TxnId) {
        self.decided.remove(&txn);
    }

    /// The decisions kept, as the records that rebuild them, in transaction order.
    pub fn checkpoint<R: From<Record<D>>>(&self, emit: &mut dyn FnMut(R))
    where
        D: Clone,
    {
        let mut decisions: Vec<_> = self.decided.iter().collect();
        decisions.sort_by_key(|(txn, _)| **txn);
        for (txn, (decision, replicas)) in decisions {
            emit(
                Record::Decided {
                    txn: *txn,
                    decision: decision.clone(),
                    replicas: replicas.clone(),
                }
                .into(),
            );
        }
    }

    /// Stop awaiting acknowledgements from the replicas `counts` rejects (out of every in-sync
    /// set: they are copied before they count again); decisions no longer awaiting any are
    /// forgotten, durably.
    pub fn keep_acknowledgements_of<P: Protocol>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        mut counts: impl FnMut(NodeId) -> bool,
    ) where
        P::Record: From<Record<D>>,
    {
        let mut done = Vec::new();
        for (txn, (_, unacknowledged)) in self.decided.iter_mut() {
            unacknowledged.retain(|n| counts(*n));
            if unacknowledged.is_empty() {
                done.push(*txn);
            }
        }
        done.sort();
        for txn in done {
            self.decided.remove(&txn);
            ctx.persist(Record::Forgotten { txn }.into());
        }
    }

    /// The transactions whose decision is kept, with the replicas yet to acknowledge each.
    pub fn iter(&self) -> impl Iterator<Item = (&TxnId, &D, &[NodeId])> {
        self.decided.iter().map(|(t, (d, r))| (t, d, r.as_slice()))
    }

    /// `replica` applied the commit of `txn`; once all have, the decision is forgotten (and
    /// that is logged, so a recovered log does not bring it back).
    pub fn acknowledge<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>, txn: TxnId, replica: NodeId)
    where
        P::Record: From<Record<D>>,
    {
        if let Some((_, unacknowledged)) = self.decided.get_mut(&txn) {
            unacknowledged.retain(|n| *n != replica);
            if unacknowledged.is_empty() {
                self.decided.remove(&txn);
                ctx.persist(Record::Forgotten { txn }.into());
            }
        }
    }
}

/// Every replica of `partitions`, each once, in node order.
pub fn replicas_of(placement: &Placement, partitions: &[PartitionId]) -> Vec<NodeId> {
    let mut nodes: Vec<NodeId> = partitions
        .iter()
        .flat_map(|p| placement.replicas(*p).iter().copied())
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// Per-key metadata of the family: PreciseClock's `LastReader` and what waits for the key's
/// uncommitted versions to resolve (`W`: the protocol's kinds of waiter).
#[derive(Debug)]
pub struct KeyMeta<W> {
    /// The largest snapshot that has read the key here (kept only by protocols using
    /// PreciseClock). Not persisted: after a crash the serving lease stands in for it.
    pub last_reader: Timestamp,
    pub waiters: Vec<W>,
}

impl<W> Default for KeyMeta<W> {
    fn default() -> Self {
        KeyMeta {
            last_reader: Timestamp::ZERO,
            waiters: Vec::new(),
        }
    }
}

impl<W> KeyMeta<W> {
    /// The largest snapshot that has read the key at this replica, with PreciseClock on.
    pub fn last_reader(&self) -> Timestamp {
        self.last_reader
    }
}

impl<W> Replica<KeyMeta<W>> {
    /// This replica's proposal for pre-committing `keys` of a transaction with `snapshot`:
    /// above the snapshot (so the commit lands after everything it read) and above every
    /// snapshot served here before the last crash; then either above the clock (so no snapshot
    /// already served here can contain the version) or, with PreciseClock (STR §6.3), above
    /// every snapshot that has read one of the keys here (P2), which is never above the clock.
    ///
    /// `reconfigured` is the largest floor of the partitions prepared
    /// ([`super::membership::PartitionConfig::floor`]): after replicas left a partition's
    /// in-sync set, proposals there exceed every snapshot they may have served.
    pub fn propose<'k>(
        &self,
        now: Timestamp,
        snapshot: Timestamp,
        precise: bool,
        reconfigured: Timestamp,
        keys: impl IntoIterator<Item = &'k Key>,
    ) -> Timestamp {
        let floor = snapshot
            .next()
            .max(self.lease.proposal_floor())
            .max(reconfigured.next());
        if !precise {
            return floor.max(now.next());
        }
        keys.into_iter()
            .filter_map(|key| self.store.get(key))
            .map(|entry| entry.meta.last_reader.next())
            .fold(floor, Timestamp::max)
    }
}

/// Allocates transaction ids for one coordinator node from durable reservations, so that no id
/// is handed out twice across crashes.
#[derive(Debug)]
pub struct TxnIds {
    node: NodeId,
    next: u64,
    /// Sequence numbers below this are reserved in the log.
    reserved: u64,
}

impl TxnIds {
    pub fn new(node: NodeId) -> TxnIds {
        TxnIds {
            node,
            next: 1,
            reserved: 1,
        }
    }

    /// The record that rebuilds the reservation.
    pub fn checkpoint<R: From<Record<D>>, D>(&self, emit: &mut dyn FnMut(R)) {
        emit(
            Record::IdsReserved {
                below: self.reserved,
            }
            .into(),
        );
    }

    /// After a crash: continue above every reservation recovered.
    pub fn resume_below(&mut self, below: u64) {
        self.next = self.next.max(below);
        self.reserved = self.reserved.max(below);
    }

    /// A fresh id; reserves (persisting the reservation) a new block when the last one is used.
    pub fn allocate<P: Protocol, D>(&mut self, ctx: &mut Ctx<'_, P>) -> TxnId
    where
        P::Record: From<Record<D>>,
    {
        if self.next >= self.reserved {
            self.reserved = self.next + ID_BLOCK;
            ctx.persist(
                Record::IdsReserved {
                    below: self.reserved,
                }
                .into(),
            );
        }
        let id = TxnId::new(self.node, self.next);
        self.next += 1;
        id
    }
}
