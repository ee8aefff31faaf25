//! Two-phase commit with presumed abort, written once for the protocols of the family
//! (`clocksi-rep`, and STR with its flavours such as `planet`).
//!
//! A protocol of the family implements [`Rules`]: what its paper decides — which version a read
//! sees, how a master certifies a write, whether proposals follow PreciseClock, what committing
//! does to a key, how the coordinator collects proposals and aborts, what a tick expires. In
//! return [`TwoPhase`] gives it everything around those rules, identical across the family:
//!
//! * **reads**: admitting a read (watermark, clock wait, serving lease), parking it on an
//!   uncommitted version, answering it locally or over the network, sending a remote one with
//!   its timeout;
//! * **the participant side of 2PC**: the master's prepare (certify every key, park the
//!   prepare on an older transaction's version — wait-die —, propose, install durably, vote,
//!   replicate to the slaves), the slaves' replicated prepare, applying commits and aborts and
//!   waking what waited on the keys;
//! * **the coordinator's fan-out**: one prepare per master, the commit decision logged and sent;
//! * **termination and garbage collection**: the periodic tick, asking coordinators about
//!   long-prepared transactions and answering such questions from the decision log;
//! * dispatching the family's messages ([`Msg`]) and timers ([`Timer`]).
//!
//! The durable state and its records are [`super::replica`]'s; [`Core`] bundles them with the
//! node's environment, so that a protocol's `new`, `recover` and `checkpoint` are one line each.

use super::coordinator::{PartitionWrites, watermark};
use super::failover;
use super::membership::{Configuration, Epoch, Membership, Promotion, Reconfiguration};
use super::replica::restore_versions;
use super::replica::{self, Admit, DecisionLog, KeyVersions, Msg, ParkedPrepare, ReadRequest};
use super::replica::{PreparedPartitions, Record, Replica, Timer, TxnIds, Writes, outcome_for};
use augur_contract::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::{KeyEntry, VersionState};
use augur_types::{AbortReason, Key, NodeId, PartitionId, Timestamp, TxnId, Value};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// Keys examined per garbage-collection step.
pub const GC_BATCH: usize = 2048;

/// What waits at a replica for a key's uncommitted versions to resolve. `O` is a protocol's own
/// kind of waiter (STR's parked local certification); [`std::convert::Infallible`] when it has
/// none.
#[derive(Debug)]
pub enum Waiter<O> {
    /// A read that met an uncommitted version it may not see past.
    Read(ReadRequest),
    /// A prepare parked by wait-die; the prepare itself is in [`Replica::parked`].
    Prepare(TxnId),
    /// The protocol's own kind, handed back to [`Rules::wake_own`].
    Own(O),
}

/// Per-key metadata of a family protocol whose own waiters are `O`.
pub type KeyMeta<O> = replica::KeyMeta<Waiter<O>>;

/// The state every node of the family keeps, whatever its protocol: its environment, the
/// participant side (durable), transaction ids, the decision log, and who serves each partition
/// (the configuration and this node's lease, and the copies of partitions in progress). `D` is
/// what a commit message carries.
pub struct Core<O, D> {
    pub env: NodeEnv,
    pub replica: Replica<KeyMeta<O>>,
    pub ids: TxnIds,
    /// Commit decisions of transactions coordinated here, until every replica applied them.
    pub decided: DecisionLog<D>,
    pub membership: Membership,
    pub copies: Copies,
    pub lease_waiters: LeaseWaiters,
    /// The fail-over rules a mutant breaks (`clocksi-rep`'s `no-lease` and `no-epoch-check`).
    pub broken: BrokenFailover,
}

/// Fail-over rules broken on purpose, so the checker can be seen to notice (see
/// `clocksi-rep`'s mutants).
#[derive(Clone, Copy, Debug, Default)]
pub struct BrokenFailover {
    /// A node serves reads and certifies without a lease (`no-lease`).
    pub no_lease: bool,
    /// Prepares are taken whatever epoch they carry (`no-epoch-check`).
    pub no_epoch_check: bool,
}

/// A prepare put aside to run again later (held for a copy, or waiting for a lease): the
/// transaction, its snapshot and what it prepares.
pub type AsidePrepare = (TxnId, Timestamp, PreparedPartitions);

/// Partitions being copied at either end, with the prepares held for them.
pub type Copies = failover::Copies<AsidePrepare>;

/// Reads and prepares waiting for a lease.
pub type LeaseWaiters = failover::LeaseWaiters<ReadRequest, AsidePrepare>;

impl<O, D: Clone> Core<O, D> {
    /// A node with empty state. `fails_over`: the protocol follows the configuration (else it
    /// keeps the placement's masters, as with `failover=off`).
    pub fn new(env: &NodeEnv, fails_over: bool) -> Self {
        Self::build(env, fails_over, Vec::new(), Recovered::empty(env))
    }

    /// Rebuild a node from its log (see [`Replica::recover`]).
    pub fn recover(
        env: &NodeEnv,
        fails_over: bool,
        records: &mut dyn Iterator<Item = Record<D>>,
    ) -> Self {
        let placement = env.placement.clone();
        let partition_of = move |key: &Key| placement.partition_of(key);
        let r = Replica::recover(env.id, &partition_of, records);
        let membership = r.membership;
        let rest = Recovered {
            replica: r.replica,
            ids: r.ids,
            decided: r.decided,
        };
        Self::build(env, fails_over, membership, rest)
    }

    fn build(
        env: &NodeEnv,
        fails_over: bool,
        membership: Vec<super::sequencer::SequencerRecord>,
        r: Recovered<O, D>,
    ) -> Self {
        let mutant = env.options.mutant.as_deref();
        let promotion = match mutant {
            Some("promote-out-of-sync") => Promotion::Unclean,
            _ => Promotion::InSync,
        };
        let membership = Membership::restore(env, promotion, fails_over, membership)
            .unwrap_or_else(|e| panic!("the configuration group cannot start: {e}"));
        Core {
            env: env.clone(),
            replica: r.replica,
            ids: r.ids,
            decided: r.decided,
            membership,
            copies: Copies::default(),
            lease_waiters: LeaseWaiters::default(),
            broken: BrokenFailover {
                no_lease: mutant == Some("no-lease"),
                no_epoch_check: mutant == Some("no-epoch-check"),
            },
        }
    }

    pub fn checkpoint(&self, emit: &mut dyn FnMut(Record<D>)) {
        self.replica.checkpoint(&self.decided, &self.ids, emit);
        self.membership.checkpoint(emit);
    }

    pub fn id(&self) -> NodeId {
        self.env.id
    }

    /// Who serves each partition, as this node last learned it.
    pub fn config(&self) -> &Configuration {
        self.membership.config()
    }

    /// Whether this node may serve `partition` now: it is in sync there, and holds a lease.
    pub fn serves(&self, partition: PartitionId, now: Timestamp) -> bool {
        self.config().is_in_sync(self.id(), partition)
            && (self.broken.no_lease || self.membership.serving(now))
    }

    /// The configuration group's counters (none with fail-over off).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        self.membership.counters()
    }

    /// What fail-over may leave behind on a node that should be quiet: configuration commands
    /// not yet ordered, copies of partitions in progress, requests waiting for a lease.
    pub fn leftovers(&self) -> Vec<(&'static str, u64)> {
        let mut left = self.membership.leftovers();
        left.push(("partition_copies_in_progress", self.copies.in_progress()));
        left.push(("waiting_for_a_lease", self.lease_waiters.len()));
        left
    }

    /// Who masters `partition` in this node's configuration, when the configuration can
    /// change (fail-over on); `None` for a partition out of range.
    pub fn master_of(&self, partition: PartitionId) -> Option<NodeId> {
        self.membership.master_of(partition)
    }

    /// Whether this node masters `partition` and is copying it to a replica at a stage where
    /// prepares wait: nothing may be installed there until the copy ends.
    pub fn copy_holds_prepares(&self, partition: PartitionId) -> bool {
        self.copies.holds_prepares(partition)
    }

    /// The partition of `key`.
    pub fn partition_of(&self, key: &Key) -> PartitionId {
        self.env.placement.partition_of(key)
    }

    /// Wait-die between `txn` (reading at `snapshot`) and `holder`, whose uncommitted version
    /// is in the way: whether `txn` is the older of the two, and so may wait for it (else it
    /// dies). Age is the snapshot, ties broken by id; a holder without a prepare record here
    /// counts as having snapshot zero.
    pub fn may_wait(&self, txn: TxnId, snapshot: Timestamp, holder: TxnId) -> bool {
        let held_since = self
            .replica
            .participants
            .get(&holder)
            .map(|p| p.snapshot)
            .unwrap_or_default();
        (snapshot, txn) < (held_since, holder)
    }
}

/// The durable state a node is rebuilt from, but the configuration group's.
struct Recovered<O, D> {
    replica: Replica<KeyMeta<O>>,
    ids: TxnIds,
    decided: DecisionLog<D>,
}

impl<O, D> Recovered<O, D> {
    fn empty(env: &NodeEnv) -> Self {
        Recovered {
            replica: Replica::default(),
            ids: TxnIds::new(env.id),
            decided: DecisionLog::default(),
        }
    }
}

/// What certifying one write at a master found.
pub enum Certified {
    Free,
    /// An older transaction's uncommitted version of this key: wait for its outcome.
    Wait(Key),
    Abort(AbortReason),
}

/// What a read may return at a replica now ([`Rules::visible`]).
pub enum Visible<T> {
    Read(T),
    /// An uncommitted version inside the snapshot may still commit there: wait for it.
    Wait,
}

/// Incidental differences between the family's original implementations, kept so that each
/// protocol behaves (and traces) exactly as before the machinery was shared. None is a rule of
/// either paper; settling each one way is a follow-up that changes traces.
pub struct Conventions {
    /// A master proposes one timestamp for all the partitions of a prepare (`clocksi-rep`),
    /// rather than one per partition (STR).
    pub one_proposal_per_master: bool,
    /// A presumed abort for a transaction coordinated here is applied at once (STR) rather
    /// than sent to this node as a message (`clocksi-rep`).
    pub aborts_own_overdue_locally: bool,
    /// The coordinator logs its decision before committing its own replica's versions
    /// (`clocksi-rep`), rather than after telling every replica (STR). Either way the runtime
    /// holds every message until both records are durable.
    pub logs_decision_first: bool,
}

/// The rules a protocol of the family fills in (see the module docs). Hooks with a default do
/// nothing or take the common choice.
pub trait Rules:
    Protocol<
        Msg = Msg<<Self as Rules>::Decision, <Self as Rules>::Remote>,
        Timer = Timer,
        Record = Record<<Self as Rules>::Decision>,
    >
{
    /// What a commit message carries.
    type Decision: Clone + Debug + Send + Serialize + DeserializeOwned + 'static;
    /// What a remote read returns.
    type Remote: Clone + Debug + Send + Serialize + DeserializeOwned + 'static;
    /// What a read returns at the coordinator (a remote read's result, or more when served by
    /// the coordinator's own replica).
    type Local;
    /// The protocol's own kind of waiter (see [`Waiter::Own`]).
    type Own;

    /// The coordinator's own replicas install a transaction's writes at commit (STR's local
    /// commit): prepares replicated by a master skip the coordinator.
    const COORDINATOR_INSTALLS: bool;
    const CONVENTIONS: Conventions;

    fn core(&self) -> &Core<Self::Own, Self::Decision>;
    fn core_mut(&mut self) -> &mut Core<Self::Own, Self::Decision>;

    // Reads.

    /// Serve a snapshot only once the clock has reached it (off only for a mutant).
    fn clock_wait(&self) -> bool {
        true
    }
    /// The visibility rule: what `read`, admitted at this replica, returns now.
    fn visible(&mut self, read: &ReadRequest) -> Visible<Self::Local>;
    /// A read result served here, as shipped to a remote coordinator.
    fn to_remote(local: Self::Local) -> Self::Remote;
    /// A read result shipped from a remote replica, as the coordinator takes it.
    fn from_remote(remote: Self::Remote) -> Self::Local;
    /// A read's result reached its coordinator (this node).
    fn read_done(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        seq: u32,
        result: Result<Self::Local, AbortReason>,
    );

    // The participant side.

    /// `txn` was aborted here recently: a prepare arriving late is ignored.
    fn aborted_here(&self, txn: TxnId) -> bool;
    /// Master-side certification of `txn`'s write of `key`.
    fn certify(&self, txn: TxnId, snapshot: Timestamp, key: &Key) -> Certified;
    /// A master here refuses `txn`'s prepare (for the protocol's counters).
    fn refusing(&mut self, _txn: TxnId, _reason: AbortReason) {}
    /// Proposals follow PreciseClock rather than the clock (see [`Replica::propose`]).
    fn precise_clock(&self) -> bool;
    /// A slave is about to install a prepare the master replicated.
    fn replicated_prepare_arrives(&mut self, _ctx: &mut Ctx<'_, Self>, _txn: TxnId, _w: &Writes) {}
    /// The commit timestamp a decision carries.
    fn commit_ts(decision: &Self::Decision) -> Timestamp;
    /// Committing one of a transaction's keys at this replica, under `decision`.
    fn committing(_decision: &Self::Decision, _entry: &mut KeyEntry<KeyMeta<Self::Own>>) {}
    /// An abort of `txn` is to be applied here: note it, and return true when the protocol
    /// handles it itself (STR: a transaction it still runs) instead of dropping the versions.
    fn aborting(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) -> bool;
    /// A waiter of the protocol's own kind may proceed.
    fn wake_own(&mut self, _ctx: &mut Ctx<'_, Self>, _waiter: Self::Own) {}
    /// Copies this node gave as a master ended, or were given up: what the protocol held for
    /// them runs again (the engine's own held prepares already did).
    fn copies_ended(&mut self, _ctx: &mut Ctx<'_, Self>) {}

    // The coordinator side.

    /// `txn`, coordinated here, has no outcome yet: a replica asking about it is not answered.
    fn running(&self, txn: TxnId) -> bool;
    /// A replica proposed `ts` for `partition` of `txn`, coordinated here, having prepared it
    /// at `epoch`.
    fn prepared(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        partition: PartitionId,
        epoch: Epoch,
        from: NodeId,
        ts: Timestamp,
    );
    /// The configuration changed the entries of `changed` (new epochs): a transaction
    /// coordinated here whose votes were collected at an older epoch of one of them must not
    /// commit on them.
    fn reconfigured(&mut self, _ctx: &mut Ctx<'_, Self>, _changed: &[PartitionId]) {}
    /// A master refused `txn`, coordinated here.
    fn abort_coordinated(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason);
    /// `txn`'s commit timer fired.
    fn commit_timed_out(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId);

    // The periodic tick.

    /// First thing at every tick.
    fn tick(&mut self, _ctx: &mut Ctx<'_, Self>) {}
    /// Forget transactions idle since before `idle_limit` and bookkeeping older than `floor`.
    fn expire(&mut self, floor: Timestamp, idle_limit: Timestamp);
    /// The snapshots of the transactions running here, which garbage collection must keep.
    fn running_snapshots(&self) -> impl Iterator<Item = Timestamp> + '_;
    /// Garbage collection raised the watermark to `watermark`.
    fn collected(&mut self, _watermark: Timestamp) {}
}

/// The machinery, for every protocol that fills in [`Rules`].
pub trait TwoPhase: Rules {
    fn start(&mut self, ctx: &mut Ctx<'_, Self>);
    fn handle_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Self::Msg);
    fn handle_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer);

    /// Serve a read at this replica, or park it until it can be served.
    fn serve_read(&mut self, ctx: &mut Ctx<'_, Self>, read: ReadRequest);
    /// Send a read of a key in `partition`, which this node does not replicate, to its closest
    /// replica, under a timeout.
    fn read_remotely(&mut self, ctx: &mut Ctx<'_, Self>, read: ReadRequest, partition: PartitionId);

    /// Master-side certification and pre-commit of `partitions` for `txn`.
    fn prepare(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        snapshot: Timestamp,
        partitions: PreparedPartitions,
    );
    /// This replica's proposal for pre-committing `writes` (see [`Replica::propose`]).
    fn propose<'w>(
        &self,
        now: Timestamp,
        snapshot: Timestamp,
        writes: impl IntoIterator<Item = &'w (Key, Option<Value>)>,
    ) -> Timestamp;

    /// The coordinator's global certification: one prepare per master of `grouped`'s
    /// partitions. Where this node is the master, it prepares itself, or, if it installed the
    /// writes already ([`Rules::COORDINATOR_INSTALLS`]), replicates them to the slaves.
    fn send_prepares(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        snapshot: Timestamp,
        grouped: PartitionWrites,
    );
    /// Commit `txn` on every replica of `partitions`: log `decision` (kept until they all
    /// acknowledged, so a replica that asks later learns the same outcome) and send it;
    /// this node's own replica, if any, applies `here`.
    fn decide(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        decision: Self::Decision,
        here: Self::Decision,
        partitions: &[PartitionId],
    );

    /// Commit `txn`'s versions here under `decision` and wake what waited on them.
    fn apply_commit(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, decision: &Self::Decision);
    /// Drop `txn`'s versions here (unless the protocol takes the abort over) and wake what
    /// waited on them.
    fn apply_abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId);
    /// Make `waiter` wait for `key`'s uncommitted versions to resolve.
    fn park(&mut self, key: &Key, waiter: Waiter<Self::Own>);
}

impl<P: Rules> TwoPhase for P {
    fn start(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer(self.core().env.options.gc_interval, Timer::Gc);
        self.core_mut().membership.on_start(ctx);
    }

    fn handle_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Self::Msg) {
        match msg {
            Msg::Read(read) => self.serve_read(ctx, read),
            Msg::ReadReply { txn, seq, result } => {
                self.read_done(ctx, txn, seq, result.map(Self::from_remote))
            }
            Msg::Prepare {
                txn,
                snapshot,
                partitions,
            } => self.prepare(ctx, txn, snapshot, partitions),
            Msg::ReplicatePrepare {
                txn,
                snapshot,
                partition,
                epoch,
                writes,
            } => replicate_prepare(self, ctx, txn, snapshot, partition, epoch, writes),
            Msg::Prepared {
                txn,
                partition,
                epoch,
                ts,
            } => self.prepared(ctx, txn, partition, epoch, from, ts),
            Msg::Refused { txn, reason } => self.abort_coordinated(ctx, txn, reason),
            Msg::Commit { txn, decision } => {
                self.apply_commit(ctx, txn, &decision);
                ctx.send(from, Msg::CommitAck { txn });
            }
            Msg::Abort { txn } => self.apply_abort(ctx, txn),
            Msg::CommitAck { txn } => self.core_mut().decided.acknowledge(ctx, txn, from),
            Msg::QueryOutcome { txn } => answer_query(self, ctx, txn, from),
            Msg::Membership(msg) => {
                if let Some(change) = self.core_mut().membership.on_message(ctx, from, msg) {
                    reconfigure(self, ctx, change);
                }
                run_lease_waiters(self, ctx);
            }
            Msg::CatchUpAsk { partition } => give_copy(self, ctx, from, partition),
            Msg::CatchUpState {
                partition,
                epoch,
                watermark,
                versions,
            } => take_copy(self, ctx, from, partition, epoch, watermark, versions),
            Msg::CatchUpDone { partition, epoch } => copy_taken(self, from, partition, epoch),
        }
    }

    fn handle_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        match timer {
            Timer::Gc => {
                self.tick(ctx);
                collect_garbage(self, ctx);
                query_stale_prepares(self, ctx);
                copy_tick(self, ctx);
                ctx.set_timer(self.core().env.options.gc_interval, Timer::Gc);
            }
            Timer::ClockWait(read) => self.serve_read(ctx, read),
            Timer::ReadTimeout { txn, seq } => {
                self.read_done(ctx, txn, seq, Err(AbortReason::Timeout))
            }
            Timer::CommitTimeout(txn) => self.commit_timed_out(ctx, txn),
            Timer::Membership(timer) => {
                if let Some(change) = self.core_mut().membership.on_timer(ctx, timer) {
                    reconfigure(self, ctx, change);
                }
                run_lease_waiters(self, ctx);
            }
        }
    }

    fn serve_read(&mut self, ctx: &mut Ctx<'_, Self>, read: ReadRequest) {
        let partition = self.core().partition_of(&read.key);
        let now = ctx.now();
        let core = self.core();
        if !core.serves(partition, now) {
            if core.config().is_in_sync(core.id(), partition) {
                // In sync but not leased (yet): serve once the next grant comes.
                self.core_mut().lease_waiters.wait_read(now, read);
                return;
            }
            // Out of sync: what it holds may be stale. The coordinator retries with the
            // configuration it learns meanwhile.
            return finish_read(self, ctx, read, Err(AbortReason::Reconfigured));
        }
        let clock_wait = self.clock_wait();
        let read = match self.core_mut().replica.admit_read(ctx, read, clock_wait) {
            Admit::Serve(read) => read,
            Admit::TooOld(read) => {
                return finish_read(self, ctx, read, Err(AbortReason::SnapshotTooOld));
            }
            Admit::Later => return,
        };
        ctx.charge(Work::reads(1));
        match self.visible(&read) {
            Visible::Read(result) => finish_read(self, ctx, read, Ok(result)),
            Visible::Wait => {
                let key = read.key.clone();
                self.park(&key, Waiter::Read(read));
            }
        }
    }

    fn read_remotely(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        read: ReadRequest,
        partition: PartitionId,
    ) {
        let core = self.core();
        let env = &core.env;
        let replica = core
            .config()
            .closest_in_sync(&env.placement, env.id, partition);
        let timeout = env.options.participant_timeout;
        let (txn, seq) = (read.txn, read.seq);
        ctx.set_timer(timeout, Timer::ReadTimeout { txn, seq });
        ctx.send(replica, Msg::Read(read));
    }

    fn prepare(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        snapshot: Timestamp,
        partitions: PreparedPartitions,
    ) {
        if self.aborted_here(txn) {
            return;
        }
        let now = ctx.now();
        let core = self.core();
        let me = core.id();
        let config = core.config();
        let mastered = partitions.iter().all(|(p, epoch, _)| {
            config.is_master(me, *p) && (core.broken.no_epoch_check || config.epoch(*p) == *epoch)
        });
        if !mastered {
            // Not the master at that epoch: another node may be certifying.
            return refuse(self, ctx, txn, AbortReason::Reconfigured);
        }
        if !core.broken.no_lease && !core.membership.serving(now) {
            // The master, but not leased (yet): certify once the next grant comes.
            let waiting = (txn, snapshot, partitions);
            self.core_mut().lease_waiters.wait_prepare(now, waiting);
            return;
        }
        if partitions
            .iter()
            .any(|(p, _, _)| core.copy_holds_prepares(*p))
        {
            // A copy of the partition is being made: the prepare waits for it to end.
            self.core_mut().copies.hold((txn, snapshot, partitions));
            return;
        }
        for (_, _, writes) in &partitions {
            for (key, _) in writes {
                // Certifying a key reads its newest versions.
                ctx.charge(Work::reads(1));
                match self.certify(txn, snapshot, key) {
                    Certified::Free => {}
                    Certified::Wait(key) => {
                        self.park(&key, Waiter::Prepare(txn));
                        let parked = ParkedPrepare {
                            snapshot,
                            partitions,
                        };
                        self.core_mut().replica.parked.insert(txn, parked);
                        return;
                    }
                    Certified::Abort(reason) => return refuse(self, ctx, txn, reason),
                }
            }
        }
        let whole = Self::CONVENTIONS
            .one_proposal_per_master
            .then(|| self.propose(now, snapshot, partitions.iter().flat_map(|(_, _, w)| w)));
        for (partition, epoch, writes) in partitions {
            let ts = whole.unwrap_or_else(|| self.propose(now, snapshot, &writes));
            install_prepared(self, ctx, txn, snapshot, ts, &writes);
            notify_prepared(self, ctx, txn, partition, epoch, ts);
            for &slave in self.core().config().slaves(partition) {
                if Self::COORDINATOR_INSTALLS && slave == txn.coordinator() {
                    continue;
                }
                let msg = Msg::ReplicatePrepare {
                    txn,
                    snapshot,
                    partition,
                    epoch,
                    writes: writes.clone(),
                };
                ctx.send(slave, msg);
            }
        }
    }

    fn propose<'w>(
        &self,
        now: Timestamp,
        snapshot: Timestamp,
        writes: impl IntoIterator<Item = &'w (Key, Option<Value>)>,
    ) -> Timestamp {
        let core = self.core();
        let precise = self.precise_clock();
        let keys = writes.into_iter().map(|(key, _)| key);
        if !core.membership.active() {
            // Every floor is zero for good: no pass over the keys for it.
            return (core.replica).propose(now, snapshot, precise, Timestamp::ZERO, keys);
        }
        let config = core.config();
        let keys: Vec<&Key> = keys.collect();
        let floor = keys
            .iter()
            .map(|key| config.floor(core.partition_of(key)))
            .max()
            .unwrap_or(Timestamp::ZERO);
        core.replica.propose(now, snapshot, precise, floor, keys)
    }

    fn send_prepares(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        snapshot: Timestamp,
        grouped: PartitionWrites,
    ) {
        let config = self.core().config().clone();
        let me = self.core().id();
        let mut by_master: Vec<(NodeId, PreparedPartitions)> = Vec::new();
        for (p, w) in grouped {
            let master = config.master(p);
            let epoch = config.epoch(p);
            if master == me && Self::COORDINATOR_INSTALLS {
                for &slave in config.slaves(p) {
                    let msg = Msg::ReplicatePrepare {
                        txn,
                        snapshot,
                        partition: p,
                        epoch,
                        writes: w.clone(),
                    };
                    ctx.send(slave, msg);
                }
                continue;
            }
            match by_master.iter_mut().find(|(m, _)| *m == master) {
                Some((_, parts)) => parts.push((p, epoch, w)),
                None => by_master.push((master, vec![(p, epoch, w)])),
            }
        }
        for (master, partitions) in by_master {
            if master == me {
                self.prepare(ctx, txn, snapshot, partitions);
            } else {
                let msg = Msg::Prepare {
                    txn,
                    snapshot,
                    partitions,
                };
                ctx.send(master, msg);
            }
        }
    }

    fn decide(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        decision: Self::Decision,
        here: Self::Decision,
        partitions: &[PartitionId],
    ) {
        let me = self.core().id();
        let replicas = self.core().config().replicas_of(partitions);
        let others: Vec<NodeId> = replicas.iter().copied().filter(|n| *n != me).collect();
        if Self::CONVENTIONS.logs_decision_first {
            let decided = &mut self.core_mut().decided;
            decided.decide(ctx, txn, decision.clone(), others.clone());
            if replicas.contains(&me) {
                self.apply_commit(ctx, txn, &here);
            }
            for node in others {
                let decision = decision.clone();
                ctx.send(node, Msg::Commit { txn, decision });
            }
        } else {
            for node in replicas {
                if node == me {
                    self.apply_commit(ctx, txn, &here);
                } else {
                    let decision = decision.clone();
                    ctx.send(node, Msg::Commit { txn, decision });
                }
            }
            self.core_mut().decided.decide(ctx, txn, decision, others);
        }
    }

    fn apply_commit(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, decision: &Self::Decision) {
        let commit_ts = Self::commit_ts(decision);
        let each = |entry: &mut KeyEntry<KeyMeta<Self::Own>>| Self::committing(decision, entry);
        if let Some(keys) = self.core_mut().replica.commit(ctx, txn, commit_ts, each) {
            wake(self, ctx, keys);
            advance_copies(self, ctx);
        }
    }

    fn apply_abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if self.aborting(ctx, txn) {
            return;
        }
        if let Some(keys) = self.core_mut().replica.abort(ctx, txn) {
            wake(self, ctx, keys);
            advance_copies(self, ctx);
        }
    }

    fn park(&mut self, key: &Key, waiter: Waiter<Self::Own>) {
        let entry = self.core_mut().replica.store.entry(key);
        entry.meta.waiters.push(waiter);
    }
}

/// Answer a read served here: to the coordinator's own handler, or over the network.
fn finish_read<P: Rules>(
    p: &mut P,
    ctx: &mut Ctx<'_, P>,
    read: ReadRequest,
    result: Result<P::Local, AbortReason>,
) {
    let coordinator = read.txn.coordinator();
    if coordinator == p.core().id() {
        return p.read_done(ctx, read.txn, read.seq, result);
    }
    let msg = Msg::ReadReply {
        txn: read.txn,
        seq: read.seq,
        result: result.map(P::to_remote),
    };
    ctx.send(coordinator, msg);
}

/// A slave installs a prepare its master replicated, and votes.
fn replicate_prepare<P: Rules>(
    p: &mut P,
    ctx: &mut Ctx<'_, P>,
    txn: TxnId,
    snapshot: Timestamp,
    partition: PartitionId,
    epoch: Epoch,
    writes: Writes,
) {
    if p.aborted_here(txn) {
        return;
    }
    let core = p.core();
    let config = core.config();
    let in_step = config.is_in_sync(core.id(), partition)
        && !config.is_master(core.id(), partition)
        && (core.broken.no_epoch_check || config.epoch(partition) == epoch);
    if !in_step {
        // The master's configuration is not this node's: the vote would count against
        // replicas that are not (or no longer) the partition's.
        return refuse(p, ctx, txn, AbortReason::Reconfigured);
    }
    if P::COORDINATOR_INSTALLS && txn.coordinator() == p.core().id() {
        // Our own transaction, installed here at its commit already.
        return;
    }
    p.replicated_prepare_arrives(ctx, txn, &writes);
    let ts = p.propose(ctx.now(), snapshot, &writes);
    install_prepared(p, ctx, txn, snapshot, ts, &writes);
    notify_prepared(p, ctx, txn, partition, epoch, ts);
}

/// Install `writes` as prepared versions, durably: the vote that follows must survive a crash.
fn install_prepared<P: Rules>(
    p: &mut P,
    ctx: &mut Ctx<'_, P>,
    txn: TxnId,
    snapshot: Timestamp,
    ts: Timestamp,
    writes: &Writes,
) {
    let state = VersionState::Prepared;
    (p.core_mut().replica).install(ctx, txn, snapshot, ts, state, writes);
}

/// Vote: tell `txn`'s coordinator this replica pre-committed `partition` at `epoch`,
/// proposing `ts`.
pub fn notify_prepared<P: Rules>(
    p: &mut P,
    ctx: &mut Ctx<'_, P>,
    txn: TxnId,
    partition: PartitionId,
    epoch: Epoch,
    ts: Timestamp,
) {
    let me = p.core().id();
    if txn.coordinator() == me {
        p.prepared(ctx, txn, partition, epoch, me, ts);
    } else {
        let msg = Msg::Prepared {
            txn,
            partition,
            epoch,
            ts,
        };
        ctx.send(txn.coordinator(), msg);
    }
}

/// A master's certification failed: tell the coordinator.
fn refuse<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>, txn: TxnId, reason: AbortReason) {
    p.refusing(txn, reason);
    if txn.coordinator() == p.core().id() {
        p.abort_coordinated(ctx, txn, reason);
    } else {
        ctx.send(txn.coordinator(), Msg::Refused { txn, reason });
    }
}

/// The configuration changed (`change`): let the coordinator drop attempts voted at an old
/// epoch, stop awaiting acknowledgements from replicas in no in-sync set, ask at once about the
/// transactions in doubt on the partitions this node now masters, and end the copies the change
/// overtook or completed.
fn reconfigure<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>, change: Reconfiguration) {
    if !change.changed.is_empty() {
        p.reconfigured(ctx, &change.changed);
    }
    let me = p.core().id();
    let config = p.core().config().clone();
    let core = p.core_mut();
    // A replica out of every in-sync set is copied before it counts again: it needs no
    // decision, and waiting for its acknowledgement would keep the decision for good.
    core.decided
        .keep_acknowledgements_of(ctx, |n| config.in_any_sync_set(n));
    let promoted: Vec<PartitionId> = change
        .changed
        .iter()
        .copied()
        .filter(|part| config.is_master(me, *part) && !change.before.is_master(me, *part))
        .collect();
    // In doubt at the new master: the termination protocol asks their coordinators at the
    // next tick instead of after `participant_timeout`.
    for partition in promoted {
        ask_about_prepared(core, partition);
    }
    if core.copies.reconfigured(&config, me) {
        release_held(p, ctx);
    }
}

/// After the configuration group ran: with a lease now, run the requests that waited for one
/// (each checks the configuration again); without, refuse those that waited a lease's
/// duration (the coordinator retries elsewhere, or this node was deposed).
fn run_lease_waiters<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>) {
    let now = ctx.now();
    let core = p.core_mut();
    if core.lease_waiters.is_empty() {
        return;
    }
    if core.membership.serving(now) {
        let (reads, prepares) = core.lease_waiters.take_all();
        for read in reads {
            p.serve_read(ctx, read);
        }
        for (txn, snapshot, partitions) in prepares {
            p.prepare(ctx, txn, snapshot, partitions);
        }
        return;
    }
    let patience = core.membership.lease_duration();
    let (late_reads, late_prepares) = core.lease_waiters.take_late(now, patience);
    for read in late_reads {
        finish_read(p, ctx, read, Err(AbortReason::Reconfigured));
    }
    for (txn, ..) in late_prepares {
        refuse(p, ctx, txn, AbortReason::Reconfigured);
    }
}

/// Run again the prepares held for copies (those of partitions still being copied are held
/// again).
fn release_held<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>) {
    for (txn, snapshot, partitions) in p.core_mut().copies.take_held() {
        p.prepare(ctx, txn, snapshot, partitions);
    }
    p.copies_ended(ctx);
}

/// A replica out of sync asked this node, as `partition`'s master, for a copy: the
/// transactions in doubt there are settled first (their coordinators asked at once), then
/// prepares wait while those prepared since resolve, and the copy leaves.
fn give_copy<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>, to: NodeId, partition: PartitionId) {
    let now = ctx.now();
    let core = p.core_mut();
    let config = core.membership.config();
    if !core.membership.active()
        || !config.is_master(core.env.id, partition)
        || config.is_in_sync(to, partition)
        || !core.membership.serving(now)
        || core.copies.giving(partition)
    {
        return;
    }
    let epoch = config.epoch(partition);
    let in_doubt = ask_about_prepared(core, partition);
    core.copies.give(partition, to, epoch, now, in_doubt);
    advance_copy(p, ctx, partition);
}

/// The transactions prepared on `partition` here, in id order, each marked overdue so that
/// the termination protocol asks its coordinator at the next tick.
fn ask_about_prepared<O, D>(core: &mut Core<O, D>, partition: PartitionId) -> Vec<TxnId> {
    let placement = core.env.placement.clone();
    let mut txns = Vec::new();
    for (txn, participant) in core.replica.participants.iter_mut() {
        if participant
            .keys
            .iter()
            .any(|k| placement.partition_of(k) == partition)
        {
            participant.waiting_since = Timestamp::ZERO;
            txns.push(*txn);
        }
    }
    txns.sort();
    txns
}

/// Move the copy of `partition` on as far as it can go now: from settling to draining once the
/// transactions in doubt resolved, and out once nothing is prepared there.
fn advance_copy<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>, partition: PartitionId) {
    let now = ctx.now();
    let core = p.core_mut();
    let placement = core.env.placement.clone();
    let partition_of = move |k: &Key| placement.partition_of(k);
    let replica = &core.replica;
    let Some(out) = core.copies.advance(
        partition,
        now,
        |txn| replica.participants.contains_key(txn),
        || replica.prepared_in(partition, &partition_of),
    ) else {
        return;
    };
    let versions = core.replica.committed_versions(partition, &partition_of);
    ctx.charge(Work::reads(versions.len()));
    let msg = Msg::CatchUpState {
        partition,
        epoch: out.epoch,
        watermark: core.replica.gc_watermark,
        versions,
    };
    ctx.send(out.to, msg);
}

/// A transaction resolved here: copies waiting for one may move on (so that prepares are held
/// no longer than the drain takes).
fn advance_copies<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>) {
    for partition in p.core().copies.partitions_given() {
        advance_copy(p, ctx, partition);
    }
}

/// The copy of `partition` this node asked for: it replaces what the node held there,
/// durably, before the master hears it is installed.
fn take_copy<P: Rules>(
    p: &mut P,
    ctx: &mut Ctx<'_, P>,
    from: NodeId,
    partition: PartitionId,
    epoch: Epoch,
    watermark: Timestamp,
    versions: Vec<KeyVersions>,
) {
    let core = p.core_mut();
    if core.config().is_in_sync(core.env.id, partition) || !core.copies.asked(partition) {
        return;
    }
    let placement = core.env.placement.clone();
    let partition_of = move |k: &Key| placement.partition_of(k);
    ctx.persist(Record::PartitionCopied {
        partition,
        watermark,
    });
    core.replica
        .drop_partition(partition, watermark, &partition_of);
    ctx.charge(Work::writes(versions.len()));
    for (key, key_versions) in versions {
        ctx.persist(Record::Versions {
            key: key.clone(),
            versions: key_versions.clone(),
        });
        restore_versions(&mut core.replica.store, &key, key_versions);
    }
    ctx.send(from, Msg::CatchUpDone { partition, epoch });
}

/// The replica `from` installed its copy of `partition`: propose that it rejoins.
fn copy_taken<P: Rules>(p: &mut P, from: NodeId, partition: PartitionId, epoch: Epoch) {
    let core = p.core_mut();
    let current = core.membership.config().epoch(partition);
    if core.copies.taken(from, partition, epoch, current) {
        core.membership.propose_rejoin(partition, from, epoch);
    }
}

/// At every tick: a master moves its copies on and gives up on those stuck too long in a
/// stage; a replica out of sync asks for the copies it needs.
fn copy_tick<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>) {
    if !p.core().membership.active() {
        return;
    }
    let now = ctx.now();
    advance_copies(p, ctx);
    let core = p.core_mut();
    let gave_up = core.copies.give_up_stuck(now);
    let me = core.env.id;
    let config = core.membership.config();
    for &partition in core.env.placement.local_partitions(me) {
        if !config.is_in_sync(me, partition) && core.copies.ask_due(partition, now) {
            ctx.send(config.master(partition), Msg::CatchUpAsk { partition });
        }
    }
    if gave_up {
        release_held(p, ctx);
    }
}

/// Re-run everything that waited on `keys` now that an uncommitted version there resolved.
fn wake<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>, keys: Vec<Key>) {
    for key in keys {
        let Some(entry) = p.core_mut().replica.store.get_mut(&key) else {
            continue;
        };
        for waiter in std::mem::take(&mut entry.meta.waiters) {
            match waiter {
                Waiter::Read(read) => p.serve_read(ctx, read),
                Waiter::Prepare(txn) => {
                    if let Some(parked) = p.core_mut().replica.parked.remove(&txn) {
                        p.prepare(ctx, txn, parked.snapshot, parked.partitions);
                    }
                }
                Waiter::Own(own) => p.wake_own(ctx, own),
            }
        }
    }
}

/// A replica asks what became of `txn`, which it holds prepared (see [`outcome_for`]).
fn answer_query<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>, txn: TxnId, replica: NodeId) {
    let running = p.running(txn);
    let me = p.core().id();
    match outcome_for(&p.core().decided, txn, running) {
        Some(Msg::Abort { .. }) if P::CONVENTIONS.aborts_own_overdue_locally && replica == me => {
            p.apply_abort(ctx, txn)
        }
        Some(msg) => ctx.send(replica, msg),
        None => {}
    }
}

/// The termination protocol: ask coordinators about transactions prepared here too long.
fn query_stale_prepares<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>) {
    let patience = p.core().env.options.participant_timeout;
    let me = p.core().id();
    for txn in p.core_mut().replica.query_overdue(ctx, patience) {
        answer_query(p, ctx, txn, me);
    }
}

/// Expire what the protocol keeps for a while, then collect versions no running snapshot needs.
fn collect_garbage<P: Rules>(p: &mut P, ctx: &mut Ctx<'_, P>) {
    let now = ctx.now();
    let options = &p.core().env.options;
    let floor = now.saturating_sub(options.gc_retention);
    let idle_limit = now.saturating_sub(options.idle_txn_timeout);
    p.expire(floor, idle_limit);
    let wm = watermark(floor, p.running_snapshots());
    p.core_mut().replica.collect_garbage(wm, GC_BATCH);
    let wm = p.core().replica.gc_watermark;
    p.collected(wm);
}
