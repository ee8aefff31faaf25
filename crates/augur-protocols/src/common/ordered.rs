//! The node every order-then-execute protocol runs (`s-smr`, `calvin`, `sparkle`): clients'
//! one-shot transactions are ordered whole through the [`sequencer`], then every replica
//! of every partition a transaction touches runs it at its place in the order
//! ([`dispatch`]). A protocol is this node under its own [`Schedule`], which decides when a
//! partition may start a delivered transaction: `s-smr` one at a time in order (one executor per
//! partition), `calvin` once its locks are granted in order (one lock thread per partition,
//! workers for the runs), `sparkle` at once, within a window, in the engine's speculative mode
//! ([`Schedule::SPECULATIVE`]: runs read and lock through the partition's
//! [`Speculative`] state, are aborted and run again when they turn out wrong, and commit
//! finally in order). Everything else is common and written here once:
//!
//! * **Submission.** The receiving node checks the call and runs it once over absent values
//!   ([`driver::dry_run`]) to learn the partitions it touches, or, for a schedule that
//!   locks keys ([`Schedule::FOOTPRINTS`]), its [`Footprint`]. A procedure type whose footprint
//!   a dry run once mispredicted is *reconnoitred* from then on: run read-only over current
//!   values (local keys from the store, remote ones asked of a replica of their partition,
//!   `ReconRead`) before it is ordered (Calvin's OLLP).
//! * **Runs.** A run stops at each key it lacks ([`Driver`]): a key of its own partition is
//!   read from the store at the position just before its own (every earlier transaction
//!   touching that key is applied: the schedule guarantees it) and sent to every replica of the
//!   other participants that run the procedure; a sibling's key blocks the run until the value
//!   arrives (`Value`), or is asked for (`NeedValue`) when it does not. With a footprint, a
//!   partition reads its part of the footprint's reads up front and sends them at once, a
//!   participant that writes nothing only does that (Calvin's passive participants), and a run
//!   that reads or writes outside the footprint ends [`Ran::Mispredicted`] everywhere alike.
//!   At its end a run applies its partition's writes at its position.
//! * **Answers.** The replicas of the reporting participant ([`Entry::reporter`]) send the
//!   outcome to the submitting node, which answers its client once ([`Submissions`]) or orders
//!   the transaction again (an undeclared partition, a mispredicted footprint).
//! * **Failures.** A run's writes are logged (`Applied`) before its outcome leaves, and every few
//!   ticks how far each partition got (`Through`); a restarted node rebuilds its store from them,
//!   the sequencer delivers every batch again, and what is done is skipped. Versions are kept
//!   until every node not left behind announced (`Horizon`) it is past them, so a sibling's
//!   value can always be answered from them.
//! * **Catching up** ([`Horizons`]). A node unheard for `left_behind_ms` (10 s by default) is
//!   left behind: the log and the versions are cut without it. Once back, it learns it was
//!   (the sequencer installed a snapshot past what it ran, a `Horizon` says versions it needs
//!   are gone, or every replica of a value it waits for says so, `ValueGone`), throws away the
//!   runs of every partition not past one position, and asks replicas past it (`CopyAsk`) for
//!   those partitions' newest versions through it (`CopyOf`), logged together as one `Copied`
//!   record; then they run what was delivered after it. The partitions already past it run on
//!   meanwhile: their replicas may need their values to get there.
//!
//! The decisions behind them are in `docs/architecture/protocols.md` ("Order-then-execute").

use crate::common::coordinator::Pending;
use crate::common::dispatch::{
    self, BlindWrites, Body, ClientStep, Entry, Footprint, Inbox, Next, Ran, SpeculativeInbox,
    Submissions, ended_how,
};
use crate::common::grouping;
use crate::common::horizons::Horizons;
use crate::common::replica::{self, TxnIds};
use crate::common::sequencer::{self, RaftMessage, Sequencer, SequencerRecord, SequencerTimer};
use crate::common::speculative::{self, Access, Effects, Instance, Speculative};
use crate::protocol_info::{ProtocolInfo, SettingInfo};
use augur_contract::driver::{self, Driver, Progress};
use augur_contract::forms::ONE_SHOT_AND_BLIND_WRITES;
use augur_contract::forms::Procedures;
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Protocol, SerialResource, Work};
use augur_storage::MvStore;
use augur_types::{
    AbortReason, ClientReply, ClientRequest, ExecutedOp, Key, NodeId, PartitionId, Placement,
    ProcedureCall, RequestForm, Timestamp, TxnId, Value,
};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

/// How long a blocked run waits for a sibling's value before asking for it (and between asks),
/// and how long reconnaissance waits for a remote value before asking another replica.
pub const PULL_AFTER: Duration = Duration::from_millis(200);
/// Garbage collection and inbox pruning run every tick; horizons are announced (and logged)
/// every [`ANNOUNCE_EVERY`]th.
const TICK: Duration = Duration::from_millis(50);
const ANNOUNCE_EVERY: u64 = 10;
/// Keys examined per garbage-collection step.
const GC_BATCH: usize = 2048;

/// The setting naming where runs that hold no serial resource go (`calvin`'s workers).
pub const WORKERS: SettingInfo = SettingInfo {
    name: "workers",
    values: &["pool", "inline"],
    default: "pool",
    doc: "where a transaction whose locks are granted runs: `pool`, handed off to the node's worker threads (the simulator: any free core), or `inline`, on the node's handler thread",
};

/// Where runs that hold no serial resource go ([`WORKERS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workers {
    /// Handed off ([`Ctx::offload`]): the real runtimes' worker pool, a core in the simulator.
    Pool,
    /// On the node's handler thread.
    Inline,
}

/// How a speculative schedule's node runs multi-partition and read-only transactions (the
/// protocol's node settings: [`Schedule::mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpeculativeMode {
    /// How multi-partition transactions exchange their reads.
    pub exchange: Exchange,
    /// Each delivered batch is grouped and scheduled ([`grouping::arrange`], Sparkle §4.2.2)
    /// rather than run in delivery order.
    pub grouped: bool,
    /// A read-only transaction of one partition this node replicates is run at once over the
    /// partition's final state, without being ordered (Sparkle §4.4): serializable, not
    /// strictly.
    pub fast_reads: bool,
    /// Which of §4.1's work-saving mechanisms are on.
    pub switches: speculative::Switches,
}

impl Default for SpeculativeMode {
    fn default() -> Self {
        SpeculativeMode {
            exchange: Exchange::Final,
            grouped: false,
            fast_reads: false,
            switches: speculative::Switches::default(),
        }
    }
}

/// How a speculative schedule's multi-partition transactions exchange the values they read
/// ([`SpeculativeMode::exchange`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// A sub-transaction sends its reads only once it is the first transaction not final at
    /// its partition: every value a sibling consumes is final (`sparkle`'s `cons`).
    Final,
    /// A sub-transaction also sends each read at once, marked with its instance, to the
    /// replica of each sibling partition in its plane (the same rank in the partition's replica
    /// list); a sibling runs on with it, and commits finally only once every value it consumed
    /// so is confirmed by the same value sent final (`sparkle`'s `cc`).
    ConfirmedWhenFirst,
    /// As [`Exchange::ConfirmedWhenFirst`], and a sub-transaction in the partition's
    /// speculative prefix ([`Speculative::speculative_prefix`]) also sends its plane's siblings
    /// a conditional confirmation: its reads are final *given* that the sibling values the
    /// multi-partition transactions before it here consumed (listed) are final. A sibling that
    /// ran every one of those transactions knows their final inputs once it committed them,
    /// so it can confirm what it consumed without waiting for this partition's final commits
    /// (`sparkle`'s `sc`, the paper's speculative confirmation, §4.2.1).
    ConfirmedSpeculatively,
}

impl Exchange {
    /// Sub-transactions send their reads before they are final.
    pub fn offers(self) -> bool {
        self != Exchange::Final
    }
}

/// Values read, by key, in the order they were read.
type Reads = Vec<(Key, Option<Value>)>;

/// Every value each multi-partition transaction committed finally here read, by position.
type FinalInputs = BTreeMap<Timestamp, BTreeMap<Key, Option<Value>>>;

/// A sibling's conditional confirmation ([`Exchange::ConfirmedSpeculatively`]): `reads` are the
/// final values of those keys if every multi-partition transaction named in `given` consumed,
/// for each key listed, the value listed, and those are final.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Confirmation {
    reads: Reads,
    given: Vec<(Timestamp, Reads)>,
}

impl Confirmation {
    /// Whether this confirms `read` as final: it vouches for that very value, and every
    /// condition holds — the transaction it names committed finally here (`final_inputs`)
    /// having read exactly the values listed. A confirmation from another instance of the
    /// sender vouches for that instance's values only, and a condition naming a transaction
    /// this node did not run cannot be judged here, so it does not hold.
    fn vouches_for(&self, read: &(Key, Option<Value>), final_inputs: &FinalInputs) -> bool {
        let holds = |(at, consumed): &(Timestamp, Reads)| {
            final_inputs
                .get(at)
                .is_some_and(|inputs| consumed.iter().all(|(k, v)| inputs.get(k) == Some(v)))
        };
        self.reads.contains(read) && self.given.iter().all(holds)
    }
}

/// When a partition may start the transactions delivered to it: the part of an
/// order-then-execute protocol that is its own. One value per partition a node replicates.
///
/// The engine calls [`deliver`](Schedule::deliver) in the order, then
/// [`ready`](Schedule::ready) on the schedule's resource, and starts what it returns; a
/// transaction it started is [`finished`](Schedule::finished) once its run ended. A schedule
/// must return a transaction only when every earlier transaction touching any key it will
/// touch here has finished, and must not let a later one touching its keys start before it
/// finished: runs read the store just below their position and apply at it, so that is what
/// makes the execution equal to the serial one in the order.
pub trait Schedule: Send + Sized + 'static {
    /// The protocol's registry entry.
    const INFO: ProtocolInfo;
    /// Transactions carry a [`Footprint`] (the keys to lock), predicted before ordering.
    const FOOTPRINTS: bool;
    /// A partition finishes its transactions in the order: one applied at a position means
    /// every earlier one is done there.
    const IN_ORDER: bool;
    /// Runs start before their turn and are undone when they turn out wrong (Sparkle, §4.1):
    /// the engine keeps the partition's [`Speculative`] state, a run reads its partition's keys
    /// there (the latest version before its position, speculative or final, possibly waiting
    /// for an earlier writer's lock) and locks each key it writes, a run that ends is
    /// speculatively committed (its versions installed), a run flagged for abort runs again
    /// as a new instance, and the first transaction not final commits finally — applied,
    /// logged, reported — once its run is speculatively committed and unflagged. A
    /// multi-partition transaction sends its local reads to its siblings as final values once
    /// it is the first not final here, and before that as [`mode`](Schedule::mode) says. The schedule then only decides when a delivered transaction may start (within a
    /// window, in order); it must be [`IN_ORDER`](Schedule::IN_ORDER).
    const SPECULATIVE: bool = false;

    /// Speculative schedules: how multi-partition and read-only transactions run, from the
    /// node's settings.
    fn mode(_env: &NodeEnv) -> SpeculativeMode {
        SpeculativeMode::default()
    }

    fn new(env: &NodeEnv, partition: PartitionId) -> Self;
    /// The resource scheduling holds (a lock thread, an executor).
    fn schedule_on(&self) -> SerialResource;
    /// The resource a run holds: the schedule's own (then runs go on in the same handler) or
    /// none (any worker core).
    fn run_on(&self) -> Option<SerialResource>;
    /// The transaction at `at`, which touches this partition, was delivered.
    fn deliver(&mut self, at: Timestamp, entry: &Entry, placement: &Placement);
    /// The transaction at `at` finished here.
    fn finished(&mut self, at: Timestamp);
    /// The delivered transactions that may start now, charging what deciding it cost to `work`.
    fn ready(&mut self, work: &mut Work) -> Vec<Timestamp>;
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// The sequencer's Raft traffic.
    Raft(RaftMessage),
    /// The value of `key` (owned by the sender's partition) before position `at`, for the
    /// other participants of the transaction there.
    Value {
        at: Timestamp,
        key: Key,
        value: Option<Value>,
    },
    /// The sender's run at `at` waits for `key`'s value and has not received it.
    NeedValue { at: Timestamp, key: Key },
    /// Speculative schedules that offer ([`Exchange::offers`]): the value of `key` before `at` as
    /// the sender's run `instance` read it, not yet known to be final.
    SpeculativeValue {
        at: Timestamp,
        key: Key,
        instance: u32,
        value: Option<Value>,
    },
    /// Speculative schedules with [`Exchange::ConfirmedSpeculatively`]: a conditional
    /// confirmation of the sender's reads for the transaction at `at`.
    Confirmation {
        at: Timestamp,
        confirmation: Confirmation,
    },
    /// How the transaction `txn` at `at` ended, for its submitter.
    Outcome { txn: TxnId, at: Timestamp, ran: Ran },
    /// Every partition of the sender is past `through` and will never run a position at or
    /// below it again (it is logged); its versions below `collected` may be gone
    /// (`common::horizons`).
    Horizon {
        through: Timestamp,
        collected: Timestamp,
    },
    /// The sender was left behind: it asks for a copy of `partition` through `at`.
    CopyAsk {
        partition: PartitionId,
        at: Timestamp,
    },
    /// `partition` as the sender has it through `through`: every key's newest version at or
    /// below it (key, writer, position, value).
    CopyOf {
        partition: PartitionId,
        through: Timestamp,
        versions: Vec<CopiedVersion>,
    },
    /// The value of `key` before `at` cannot be answered here: it is below this node's floor
    /// and no version was found (it may be gone).
    ValueGone {
        at: Timestamp,
        key: Key,
        floor: Timestamp,
    },
    /// No copy of `partition` below `floor` can be given here (versions below it may be gone).
    CopyRefused {
        partition: PartitionId,
        floor: Timestamp,
    },
    /// Reconnaissance of `txn` at its submitter reads `key`: its current committed value.
    ReconRead { txn: TxnId, key: Key },
    /// The answer to a [`Msg::ReconRead`].
    ReconValue {
        txn: TxnId,
        key: Key,
        value: Option<Value>,
    },
}

impl From<RaftMessage> for Msg {
    fn from(m: RaftMessage) -> Msg {
        Msg::Raft(m)
    }
}

impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            Msg::Raft(m) => m.check(at),
            Msg::Value { at: pos, key, .. } | Msg::SpeculativeValue { at: pos, key, .. } => {
                from_owner(at, key)?;
                nonzero(at, *pos)
            }
            Msg::Confirmation {
                at: pos,
                confirmation,
            } => {
                nonzero(at, *pos)?;
                for (key, _) in &confirmation.reads {
                    from_owner(at, key)?;
                }
                if confirmation.given.iter().any(|(given, _)| given >= pos) {
                    return Err(at.bad(format!(
                        "a confirmation for position {pos} depends on a later one"
                    )));
                }
                Ok(())
            }
            Msg::ValueGone { at: pos, key, .. } => {
                from_owner(at, key)?;
                nonzero(at, *pos)
            }
            Msg::NeedValue { at: pos, key } => {
                at.key_here(key)?;
                nonzero(at, *pos)
            }
            Msg::Outcome { txn, at: pos, .. } => {
                at.txn_here(*txn)?;
                nonzero(at, *pos)
            }
            Msg::Horizon { through, collected } => {
                // A node never collects past its own horizon.
                if collected > through {
                    return Err(at.bad(format!(
                        "a horizon of {through} collected through {collected}"
                    )));
                }
                Ok(())
            }
            Msg::CopyAsk { partition, .. } | Msg::CopyRefused { partition, .. } => {
                replicas_both(at, *partition)
            }
            Msg::CopyOf {
                partition,
                through,
                versions,
            } => {
                replicas_both(at, *partition)?;
                for (key, _, pos, _) in versions {
                    if at.placement.partition_of(key) != *partition || pos > through {
                        return Err(at.bad(format!(
                            "a copy of {partition} through {through} holds {key} at {pos}"
                        )));
                    }
                }
                Ok(())
            }
            Msg::ReconRead { txn, key } => {
                // Only a transaction's submitter reconnoitres it (and gets the answer).
                if txn.coordinator() != at.from {
                    return Err(at.bad(format!(
                        "{} reconnoitres {txn}, which {} submitted",
                        at.from,
                        txn.coordinator()
                    )));
                }
                at.key_here(key)
            }
            Msg::ReconValue { txn, key, .. } => {
                at.txn_here(*txn)?;
                from_owner(at, key)
            }
        }
    }
}

fn from_owner(at: &Inbound<'_>, key: &Key) -> Result<(), BadMessage> {
    let owner = at.placement.partition_of(key);
    if !at.placement.replicates(at.from, owner) {
        return Err(at.bad(format!(
            "{} sent the value of {key}, which it does not replicate",
            at.from
        )));
    }
    Ok(())
}

/// Only a replica of `partition` asks another for a copy of it, or sends one.
fn replicas_both(at: &Inbound<'_>, partition: PartitionId) -> Result<(), BadMessage> {
    at.partition_here(partition)?;
    if !at.placement.replicates(at.from, partition) {
        return Err(at.bad(format!(
            "a copy of {partition} between {} and {}, which do not both replicate it",
            at.from, at.me
        )));
    }
    Ok(())
}

fn nonzero(at: &Inbound<'_>, pos: Timestamp) -> Result<(), BadMessage> {
    if pos == Timestamp::ZERO {
        return Err(at.bad("position 0 precedes every transaction".into()));
    }
    Ok(())
}

#[derive(Debug)]
pub enum Timer {
    Sequencer(SequencerTimer),
    /// Partition `p`'s schedule has something to decide.
    Schedule(PartitionId),
    /// Run (on) partition `p`'s transaction at the position.
    Run(PartitionId, Timestamp),
    /// A worker ran partition `p`'s transaction at the position as far as its values went
    /// ([`Ctx::offload`]).
    Ran(PartitionId, Timestamp, Box<WorkerRun>),
    /// Ask for the sibling values partition `p`'s runs wait for, if they still wait.
    Pull(PartitionId),
    /// Reconnaissance of the transaction waits for a remote value: ask again, or give up.
    Recon(TxnId),
    Tick,
}

/// A procedure run a worker took as far as the values it was handed let it: the run, to go on
/// with, and where it stopped.
pub struct WorkerRun {
    run: Driver<'static>,
    progress: Progress,
    /// The instance it is a run of ([`Running::attempt`]).
    attempt: u32,
    /// The partition's [`Part::generation`] when it was handed off.
    generation: u64,
    /// Speculative schedules: the keys of its partition the worker read on its own (see
    /// [`RunAhead`]), in order, and what its lock requests did to other transactions.
    reads: Reads,
    effects: Effects,
}

impl std::fmt::Debug for WorkerRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.progress {
            Progress::Needs(key) => write!(f, "needs {key:?}"),
            Progress::Ended(run) => write!(f, "ended after {} operations", run.ops.len()),
        }
    }
}

/// A partition's speculative state, shared with the workers that run its transactions: they
/// read and lock its keys themselves ([`RunAhead`]) rather than coming back to the node's
/// handler at every read, as the paper's executor threads share one partition's state.
type SharedSpeculative = Arc<Mutex<Speculative>>;

/// The node's final store, shared with those workers for their reads of final versions. Only
/// the handler writes it, and a final commit removes a transaction's versions from the
/// speculative chains and writes them here under the speculative state's lock, so a worker
/// never sees a version in neither place.
type SharedStore = Arc<RwLock<MvStore<()>>>;

/// Lock `state`. A worker that panicked holding the lock (a procedure's bug) left it
/// consistent: every change under it is one call of [`Speculative`] or of the store.
fn lock<T>(state: &Mutex<T>) -> MutexGuard<'_, T> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn reading<T>(state: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    state.read().unwrap_or_else(PoisonError::into_inner)
}

fn writing<T>(state: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    state.write().unwrap_or_else(PoisonError::into_inner)
}

/// The final version of `key` below the position `below`, and its writer's position
/// (`Timestamp::ZERO` for the initial, absent one): a speculative read of a key no earlier
/// transaction installed.
fn final_version(store: &MvStore<()>, key: &Key, below: Timestamp) -> (Option<Value>, Timestamp) {
    let v = store.read_at(key, Timestamp(below.0 - 1));
    v.map_or((None, Timestamp::ZERO), |v| (v.value.clone(), v.ts))
}

/// Lock every key of partition `p` that `run` (instance `inst`) wrote so far, before it reads
/// on (a later reader then waits for its write instead of missing it); false if one is held by
/// an earlier transaction (`inst` then waits for it).
fn lock_written(
    spec: &mut Speculative,
    inst: Instance,
    p: PartitionId,
    placement: &Placement,
    run: &Driver<'static>,
    effects: &mut Effects,
) -> bool {
    run.written_keys().iter().all(|written| {
        placement.partition_of(written) != p
            || spec.lock(inst, written, effects) == Access::Ready(())
    })
}

/// What a worker needs to run a speculative transaction's procedure on past its reads of its
/// own partition: the partition's shared state. It stops, and hands the run back to the node,
/// at a read it cannot make by itself — a sibling's key, a key the footprint does not name, a
/// lock or a read that must wait for an earlier transaction — or at the run's end; the node
/// then goes on exactly as if it had made every read itself (a suspension is retried there, so
/// a wake-up between the worker's attempt and the node seeing it is not lost).
struct RunAhead {
    p: PartitionId,
    inst: Instance,
    spec: SharedSpeculative,
    store: SharedStore,
    placement: Arc<Placement>,
    entry: Arc<Entry>,
}

impl RunAhead {
    /// Whether the worker may read `key` itself.
    fn reads_here(&self, key: &Key) -> bool {
        self.placement.partition_of(key) == self.p
            && self
                .entry
                .footprint
                .as_ref()
                .is_none_or(|fp| fp.reads.contains(key))
    }

    /// Run `run` on from where the node left it, reading this partition's keys through the
    /// speculative state; the reads go to `reads` (for the siblings), what lock requests did
    /// to others to `effects`.
    fn run(
        &self,
        run: &mut Driver<'static>,
        reads: &mut Reads,
        effects: &mut Effects,
        work: &mut Work,
    ) -> Progress {
        loop {
            // One step per resumption: one per read and one for the end over a whole run
            // (`Run::steps`), and a run aborted halfway pays for the steps it took.
            work.steps = work.steps.saturating_add(1);
            let progress = run.resume();
            let Progress::Needs(key) = &progress else {
                return progress;
            };
            if !self.reads_here(key) {
                return progress;
            }
            let value = {
                let mut spec = lock(&self.spec);
                if !spec.is_current(self.inst) {
                    // Aborted meanwhile: the node drops this run, and its next instance runs.
                    return progress;
                }
                if !lock_written(&mut spec, self.inst, self.p, &self.placement, run, effects) {
                    return progress;
                }
                let store = reading(&self.store);
                let final_read = |key: &Key, below: Timestamp| final_version(&store, key, below);
                match spec.read(self.inst, key, &final_read) {
                    Access::Ready(value) => value,
                    Access::Suspended => return progress,
                }
            };
            work.reads = work.reads.saturating_add(1);
            reads.push((key.clone(), value.clone()));
            run.supply(key.clone(), value);
        }
    }
}

impl From<SequencerTimer> for Timer {
    fn from(t: SequencerTimer) -> Timer {
        Timer::Sequencer(t)
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Record {
    Sequencer(SequencerRecord),
    /// Transaction ids (`IdsReserved`).
    Kit(replica::Record<Timestamp>),
    /// `txn`, at position `at`, wrote `writes` to `partition` here.
    Applied {
        partition: PartitionId,
        at: Timestamp,
        txn: TxnId,
        writes: Vec<(Key, Option<Value>)>,
    },
    /// `partition` here is past every position up to `at`.
    Through {
        partition: PartitionId,
        at: Timestamp,
    },
    /// Every partition's state through `through` was replaced by a copy (this node was left
    /// behind): every version at or below it dropped, each partition's copied versions put in
    /// its place.
    Copied {
        through: Timestamp,
        partitions: Vec<(PartitionId, Vec<CopiedVersion>)>,
    },
    /// `partition`'s versions before `at` may be missing here (a checkpoint of a store
    /// collected or copied through it): no value before it is answered.
    Floor {
        partition: PartitionId,
        at: Timestamp,
    },
}

/// One version of a copy: key, writer, position, value.
pub type CopiedVersion = (Key, TxnId, Timestamp, Option<Value>);

impl From<SequencerRecord> for Record {
    fn from(r: SequencerRecord) -> Record {
        Record::Sequencer(r)
    }
}

impl From<replica::Record<Timestamp>> for Record {
    fn from(r: replica::Record<Timestamp>) -> Record {
        Record::Kit(r)
    }
}

/// The mutants the engine knows; a protocol offers those its [`ProtocolInfo`] lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    /// A run that misses a sibling's value proceeds as if the key were absent (`s-smr`).
    NoSiblingWait,
    /// A run that strays outside its footprint goes on instead of ending mispredicted: it reads
    /// a local key it holds no lock on from the store, a remote one as absent, and applies
    /// writes outside the footprint (`calvin`).
    UnvalidatedRecon,
    /// A replica answers a sibling's value below its floor and the cut (`calvin`).
    AnswerBelowFloor,
    /// The outcome of a speculatively committed run is reported at once, before its final
    /// commit, which may instead come from a later instance (`sparkle`).
    EarlyFinalCommit,
    /// A multi-partition run commits finally with sibling values it consumed speculatively
    /// that no final value confirmed (`sparkle` with `variant=cc`; the paper's missing check of
    /// a sibling's final `lan`).
    NoLanCheck,
    /// Batches are grouped in an order of this node's own (`sparkle` with
    /// `variant=sc-schedule`; the paper's grouping by local arrival order).
    LocalGrouping,
    /// A read-only MPT of a grouped batch starts at once and reads each partition's final
    /// state as it is then, not the state at its position (`sparkle` with
    /// `variant=sc-schedule`).
    RoMptCurrent,
    /// The partition's speculative state is broken (`sparkle`).
    Speculative(speculative::Mutant),
}

#[derive(Default)]
struct Counters {
    executed: u64,
    multi_partition: u64,
    resubmitted: u64,
    mispredicted: u64,
    reconnaissances: u64,
    recon_reads: u64,
    refused_entries: u64,
    values_sent: u64,
    values_pulled: u64,
    waits: u64,
    handed_off: u64,
    speculative_commits: u64,
    speculative_aborts: u64,
    remote_aborts: u64,
    lock_waits: u64,
    speculative_values_sent: u64,
    confirmations_sent: u64,
    confirmation_waits: u64,
    committed_before_final_values: u64,
    fast_reads: u64,
    copies_asked: u64,
    copies_given: u64,
    partitions_copied: u64,
}

/// One partition this node replicates.
struct Part<S> {
    schedule: S,
    /// Delivered transactions not finished here, by position.
    pending: BTreeMap<Timestamp, Arc<Entry>>,
    /// The started ones.
    running: BTreeMap<Timestamp, Running>,
    /// Every position at or below this is done here, and logged: it is never run again.
    durable: Timestamp,
    /// Positions above `durable` done before a restart (their writes were logged).
    done_above: BTreeSet<Timestamp>,
    /// A `Schedule` timer is set.
    scheduling: bool,
    /// A `Pull` timer is set.
    pulling: bool,
    /// The speculative state ([`Schedule::SPECULATIVE`] schedules only).
    spec: Option<SharedSpeculative>,
    /// How many copies were asked for (the replica asked next rotates).
    copy_asks: usize,
    /// Versions of the partition before this position may be missing here (a copy brought
    /// only the newest through it, or garbage collection ran below it before a checkpoint):
    /// no value before it is answered from them.
    floor: Timestamp,
    /// Bumped when the partition's runs are thrown away for a copy: a worker's result from an
    /// earlier generation is dropped.
    generation: u64,
    /// The partition is not past the node's catch-up position ([`Ordered::catching_up`]): its
    /// runs were thrown away, and it waits for a copy through that position.
    copying: bool,
}

impl<S> Part<S> {
    /// The speculative state, locked.
    fn speculative(&self) -> MutexGuard<'_, Speculative> {
        lock(self.spec.as_ref().expect("speculative"))
    }

    /// The first transaction not final ([`Speculative::first_pending`]); `None` unless
    /// speculative.
    fn first_pending(&self) -> Option<Timestamp> {
        self.spec
            .as_ref()
            .and_then(|spec| lock(spec).first_pending())
    }
}

/// A partition's speculative state as it starts ([`Schedule::SPECULATIVE`] schedules only).
fn fresh_speculative<S: Schedule>(
    mutant: Option<Mutant>,
    mode: SpeculativeMode,
) -> Option<SharedSpeculative> {
    S::SPECULATIVE.then(|| {
        let broken = match mutant {
            Some(Mutant::Speculative(m)) => Some(m),
            _ => None,
        };
        Arc::new(Mutex::new(Speculative::configured(broken, mode.switches)))
    })
}

/// Partitions for a log line: `p0, p2`.
fn partition_list(partitions: &[PartitionId]) -> String {
    let names: Vec<String> = partitions.iter().map(ToString::to_string).collect();
    names.join(", ")
}

/// Replace `partition`'s versions at or below `through` in `store` by `versions` (a copy):
/// versions above it, which this node ran itself, stay.
fn replace_through(
    store: &mut MvStore<()>,
    placement: &Placement,
    partition: PartitionId,
    through: Timestamp,
    versions: &[CopiedVersion],
) {
    let keys: Vec<Key> = store
        .iter()
        .map(|(key, _)| key)
        .filter(|key| placement.partition_of(key) == partition)
        .cloned()
        .collect();
    for key in keys {
        let entry = store.entry(&key);
        let above: Vec<(TxnId, Timestamp, Option<Value>)> = entry
            .versions()
            .filter(|v| v.ts > through)
            .map(|v| (v.writer, v.ts, v.value.clone()))
            .collect();
        entry.clear();
        for (writer, ts, value) in above {
            entry.put_committed(writer, ts, value);
        }
    }
    for (key, writer, ts, value) in versions {
        store.entry(key).put_committed(*writer, *ts, value.clone());
    }
}

/// A run's writes, by key.
type Writes = BTreeMap<Key, Option<Value>>;

/// A transaction a partition runs.
struct Running {
    entry: Arc<Entry>,
    /// The procedure's run (calls only; `None` while a worker has it), or why it cannot run.
    run: Result<Option<Driver<'static>>, String>,
    /// Its footprint's reads of this partition were read and sent.
    footprint_read: bool,
    /// The sibling key it waits for.
    waiting_for: Option<Key>,
    /// Speculative schedules: the instance its run is ([`Instance::n`]); a worker's result
    /// for an earlier one is dropped.
    attempt: u32,
    /// Speculative schedules: the key its run stopped at and still needs (it waits for a lock
    /// or a sibling's value), to go on from without another trip to a worker.
    parked: Option<Key>,
    /// Speculative schedules: its run ended (how, and its writes), and it waits for its locks
    /// or, once speculatively committed (`Speculative::is_speculatively_committed`), for its
    /// final commit.
    ended: Option<(Option<Ran>, Writes)>,
    /// Speculative schedules: the current instance's reads of this partition, and how many of
    /// them went to the siblings (only once it is the first not final).
    local_reads: Reads,
    shared: usize,
    /// [`Exchange::offers`]: how many of `local_reads` went to the plane's siblings as
    /// speculative values, and the siblings' values the current instance consumed that were
    /// not final when it did (it commits finally only once each is confirmed).
    offered: usize,
    unconfirmed: Reads,
    /// [`Exchange::ConfirmedSpeculatively`]: every sibling value the current instance consumed.
    consumed: Reads,
    /// [`Exchange::ConfirmedSpeculatively`]: the current instance sent its confirmation.
    confirmation_sent: bool,
    /// Mutant `early-final-commit`: its outcome was reported at its speculative commit.
    reported: bool,
    /// A read-only MPT of a grouped batch, held back until it is the first not final here
    /// (then it reads final values only: no dependency, no abort, nothing to confirm).
    held_back: bool,
}

impl Running {
    fn new(entry: Arc<Entry>, procedures: &Procedures, attempt: u32) -> Running {
        let run = new_run(procedures, &entry);
        Running {
            entry,
            run,
            footprint_read: false,
            waiting_for: None,
            attempt,
            parked: None,
            ended: None,
            local_reads: Vec::new(),
            shared: 0,
            offered: 0,
            unconfirmed: Vec::new(),
            consumed: Vec::new(),
            confirmation_sent: false,
            held_back: false,
            reported: false,
        }
    }
}

/// A fresh run of `entry`'s procedure, or why it cannot run (`Body::Writes` has none).
fn new_run(procedures: &Procedures, entry: &Entry) -> Result<Option<Driver<'static>>, String> {
    match &entry.body {
        Body::Call { call, .. } => procedures
            .instantiate(call)
            .map(|procedure| Some(Driver::start(procedure)))
            .map_err(|e| e.to_string()),
        Body::Writes(_) => Err(String::new()),
    }
}

/// How far a run got.
enum Step {
    Blocked,
    /// It waits for a lock an earlier transaction holds (speculative schedules).
    Suspended,
    /// The run goes on on a worker ([`Ctx::offload`]), with the values it has.
    Handoff(Driver<'static>),
    /// A worker has the run.
    OnWorker,
    /// It ended: how (`None` for a participant that only read for the others), and its writes.
    Done(Option<Ran>, BTreeMap<Key, Option<Value>>),
}

/// Reconnaissance of a transaction at its submitter.
struct Recon {
    entry: Entry,
    run: Driver<'static>,
    /// The remote key it waits for, and how many replicas were asked.
    waiting: Option<(Key, usize)>,
    since: Timestamp,
}

/// One node of an order-then-execute protocol.
pub struct Ordered<S: Schedule> {
    env: NodeEnv,
    mutant: Option<Mutant>,
    seq: Sequencer<Entry>,
    workers: Workers,
    /// [`Schedule::mode`].
    mode: SpeculativeMode,
    ids: TxnIds,
    /// The versions of every key of the partitions this node replicates, by position (shared
    /// with the workers of speculative runs, [`RunAhead`]).
    store: SharedStore,
    parts: BTreeMap<PartitionId, Part<S>>,
    inbox: Inbox,
    /// Siblings' speculative values ([`Exchange::offers`]).
    offers: SpeculativeInbox,
    /// [`Exchange::ConfirmedSpeculatively`]: siblings' conditional confirmations by position,
    /// and every value each multi-partition transaction finally committed here read (its
    /// partitions' and its siblings'), by position, kept until every node is past it.
    confirmations: BTreeMap<Timestamp, Vec<Confirmation>>,
    final_inputs: FinalInputs,
    submissions: Submissions,
    /// Procedure types (workload, procedure) whose dry-run footprint was once mispredicted:
    /// reconnoitred before they are ordered.
    dependent: FxHashSet<(String, String)>,
    recons: FxHashMap<TxnId, Recon>,
    /// Interactive (blind-write) transactions begun here.
    blind: BlindWrites,
    /// The last position delivered.
    delivered: Timestamp,
    /// How far each node announced it got, and the cut ([`Horizons`]).
    horizons: Horizons,
    /// This node was left behind and copies the partitions not past this position through
    /// it (the `copying` ones): the copies received so far.
    catching_up: Option<Timestamp>,
    copies: BTreeMap<PartitionId, Vec<CopiedVersion>>,
    /// Per value awaited, the replicas that answered it is gone ([`Msg::ValueGone`]), and the
    /// highest floor they named.
    gone: BTreeMap<(Timestamp, Key), (BTreeSet<NodeId>, Timestamp)>,
    ticks: u64,
    counters: Counters,
}

impl<S: Schedule> Ordered<S> {
    fn build(env: &NodeEnv, seq: Sequencer<Entry>) -> Self {
        let mutant = match env.options.mutant.as_deref() {
            Some("no-sibling-wait") => Some(Mutant::NoSiblingWait),
            Some("unvalidated-recon") => Some(Mutant::UnvalidatedRecon),
            Some("answer-below-floor") => Some(Mutant::AnswerBelowFloor),
            Some("early-final-commit") => Some(Mutant::EarlyFinalCommit),
            Some("no-lan-check") => Some(Mutant::NoLanCheck),
            Some("local-grouping") => Some(Mutant::LocalGrouping),
            Some("ro-mpt-current") => Some(Mutant::RoMptCurrent),
            Some("no-read-deps") => Some(Mutant::Speculative(speculative::Mutant::NoReadDeps)),
            Some("no-cascade") => Some(Mutant::Speculative(speculative::Mutant::NoCascade)),
            Some("ignore-abort-flag") => {
                Some(Mutant::Speculative(speculative::Mutant::IgnoreAbortFlag))
            }
            _ => None,
        };
        // The registry accepts only the values `WORKERS` lists.
        let workers = match env.options.settings.get(WORKERS.name) {
            Some(v) if v.eq_ignore_ascii_case("inline") => Workers::Inline,
            _ => Workers::Pool,
        };
        let mode = S::mode(env);
        let parts = env
            .placement
            .local_partitions(env.id)
            .iter()
            .map(|p| {
                let part = Part {
                    schedule: S::new(env, *p),
                    pending: BTreeMap::new(),
                    running: BTreeMap::new(),
                    durable: Timestamp::ZERO,
                    done_above: BTreeSet::new(),
                    scheduling: false,
                    pulling: false,
                    spec: fresh_speculative::<S>(mutant, mode),
                    copy_asks: 0,
                    floor: Timestamp::ZERO,
                    generation: 0,
                    copying: false,
                };
                (*p, part)
            })
            .collect();
        Ordered {
            env: env.clone(),
            mutant,
            seq,
            workers,
            mode,
            ids: TxnIds::new(env.id),
            store: Arc::new(RwLock::new(MvStore::new())),
            parts,
            inbox: Inbox::default(),
            offers: SpeculativeInbox::default(),
            confirmations: BTreeMap::new(),
            final_inputs: BTreeMap::new(),
            submissions: Submissions::default(),
            dependent: FxHashSet::default(),
            recons: FxHashMap::default(),
            blind: BlindWrites::default(),
            delivered: Timestamp::ZERO,
            horizons: Horizons::new(env),
            catching_up: None,
            copies: BTreeMap::new(),
            gone: BTreeMap::new(),
            ticks: 0,
            counters: Counters::default(),
        }
    }

    fn me(&self) -> NodeId {
        self.env.id
    }

    /// Every position at or below this is done by partition `p` here.
    fn frontier(&self, p: PartitionId) -> Timestamp {
        let part = &self.parts[&p];
        if part.copying {
            return part.durable;
        }
        let done = match part.pending.keys().next() {
            Some(at) => Timestamp(at.0 - 1),
            None => self.delivered,
        };
        done.max(part.durable)
    }

    /// Every position at or below this is done by every partition here.
    fn local_frontier(&self) -> Timestamp {
        self.parts
            .keys()
            .map(|p| self.frontier(*p))
            .min()
            .unwrap_or(self.delivered)
    }

    // ----- Clients -----

    fn on_execute(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        call: ProcedureCall,
        read_only: bool,
    ) {
        // A procedure that declares its keys needs no dry run to tell its partitions (and its
        // footprint): New-Order and Payment, Calvin's independent transactions, are not run
        // an extra time at their submitter.
        let mut procedure = match driver::checked(&self.env.procedures, &call, read_only) {
            Ok(procedure) => procedure,
            Err(e) => return pending.answer(ctx, ClientReply::Rejected(e)),
        };
        let declared = procedure.declared_keys();
        let dry = match declared {
            Some(_) => None,
            None => match driver::dry_run_of(procedure.as_mut(), &call) {
                Ok(dry) => Some(dry),
                Err(e) => return pending.answer(ctx, ClientReply::Rejected(e)),
            },
        };
        if let Some(dry) = &dry {
            ctx.charge(Work {
                steps: dry.steps(),
                ..Work::default()
            });
        }
        // What travels is the postcard form, whatever form the client wrote the arguments in.
        let call = procedure.call().unwrap_or(call);
        let dependent = S::FOOTPRINTS
            && declared.is_none()
            && self
                .dependent
                .contains(&(call.workload.clone(), call.procedure.clone()));
        let txn = self.ids.allocate(ctx);
        let mut entry = Entry {
            txn,
            partitions: Vec::new(),
            body: Body::Call { call, read_only },
            footprint: None,
        };
        if dependent {
            self.submissions.add(pending, entry.clone(), ctx.now());
            return self.reconnoitre(ctx, entry);
        }
        let lock_name = |k: &Key| self.env.procedures.lock_name(k);
        if let Some(declared) = declared {
            let footprint = Footprint::declared(declared, lock_name);
            entry.partitions = footprint.partitions(&self.env.placement);
            entry.footprint = S::FOOTPRINTS.then_some(footprint);
        } else if let Some(dry) = &dry {
            if S::FOOTPRINTS {
                let footprint = Footprint::of(dry, lock_name);
                entry.partitions = footprint.partitions(&self.env.placement);
                entry.footprint = Some(footprint);
            } else {
                entry.partitions = dispatch::declare(&self.env.placement, dry);
            }
        }
        self.ensure_participant(&mut entry);
        self.submissions.add(pending, entry.clone(), ctx.now());
        if read_only && self.mode.fast_reads && self.read_fast(ctx, &entry) {
            return;
        }
        self.seq.submit(entry);
    }

    /// [`SpeculativeMode::fast_reads`]: run the read-only `entry` at once over the final state
    /// of its partition here, unordered, and answer it, at the position that state is final
    /// through. False (nothing done) unless it touches one partition this node replicates and
    /// reads nothing outside it.
    fn read_fast(&mut self, ctx: &mut Ctx<'_, Self>, entry: &Entry) -> bool {
        let [p] = entry.partitions[..] else {
            return false;
        };
        if !self.parts.contains_key(&p) {
            return false;
        }
        let Ok(Some(mut run)) = new_run(&self.env.procedures, entry) else {
            return false;
        };
        let through = self.frontier(p);
        let mut work = Work::default();
        let ended = loop {
            match run.resume() {
                Progress::Needs(key) if self.env.placement.partition_of(&key) == p => {
                    work.reads = work.reads.saturating_add(1);
                    let value = reading(&self.store)
                        .read_at(&key, through)
                        .and_then(|v| v.value.clone());
                    run.supply(key, value);
                }
                // It reads another partition after all: order it.
                Progress::Needs(_) => return false,
                Progress::Ended(ended) => break ended,
            }
        };
        if !ended.writes.is_empty() {
            return false;
        }
        work.steps = ended.steps();
        ctx.charge(work);
        self.counters.fast_reads += 1;
        let ran = Ran::Done {
            ops: ended.ops,
            end: ended_how(ended.end),
        };
        self.on_outcome(ctx, entry.txn, through, ran);
        true
    }

    /// A transaction that touches nothing (over the values it was predicted with) still runs,
    /// in order, somewhere.
    fn ensure_participant(&self, entry: &mut Entry) {
        if entry.partitions.is_empty() {
            let here = self.env.placement.local_partitions(self.me()).first();
            entry
                .partitions
                .push(here.copied().unwrap_or(PartitionId(0)));
        }
    }

    fn on_client_op(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        let (pending, txn, writes) =
            match self.blind.step(ctx, &mut self.ids, request, self.delivered) {
                ClientStep::Execute {
                    pending,
                    call,
                    read_only,
                } => return self.on_execute(ctx, pending, call, read_only),
                ClientStep::Commit {
                    pending,
                    txn,
                    writes,
                } => (pending, txn, writes),
                ClientStep::Answered => return,
            };
        let placement = &self.env.placement;
        let partitions: BTreeSet<PartitionId> = writes
            .iter()
            .map(|(k, _)| placement.partition_of(k))
            .collect();
        let footprint = S::FOOTPRINTS.then(|| Footprint {
            reads: BTreeSet::new(),
            writes: writes
                .iter()
                .map(|(k, _)| self.env.procedures.lock_name(k))
                .collect(),
        });
        let entry = Entry {
            txn,
            partitions: partitions.into_iter().collect(),
            body: Body::Writes(writes),
            footprint,
        };
        self.submissions.add(pending, entry.clone(), ctx.now());
        self.seq.submit(entry);
    }

    fn on_outcome(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, at: Timestamp, ran: Ran) {
        match self.submissions.outcome(txn, at, ran) {
            Next::Answer(pending, reply) => pending.answer(ctx, reply),
            Next::Resubmit(entry) => {
                self.counters.resubmitted += 1;
                self.seq.submit(entry);
            }
            Next::Predict(entry) => {
                self.counters.mispredicted += 1;
                if let Body::Call { call, .. } = &entry.body {
                    let name = (call.workload.clone(), call.procedure.clone());
                    self.dependent.insert(name);
                }
                self.reconnoitre(ctx, entry);
            }
            Next::Nothing => {}
        }
    }

    // ----- Reconnaissance -----

    /// Predict `entry`'s footprint from current values, then order it. Its submission is
    /// already recorded.
    fn reconnoitre(&mut self, ctx: &mut Ctx<'_, Self>, entry: Entry) {
        let Body::Call { call, .. } = &entry.body else {
            // Blind writes know their footprint.
            self.seq.submit(entry);
            return;
        };
        let procedure = match self.env.procedures.instantiate(call) {
            Ok(p) => p,
            Err(e) => {
                if let Some(pending) = self.submissions.abandon(entry.txn) {
                    pending.answer(ctx, ClientReply::Rejected(e));
                }
                return;
            }
        };
        self.counters.reconnaissances += 1;
        let txn = entry.txn;
        let recon = Recon {
            entry,
            run: Driver::start(procedure),
            waiting: None,
            since: ctx.now(),
        };
        self.recons.insert(txn, recon);
        self.recon_advance(ctx, txn);
    }

    /// Run `txn`'s reconnaissance on until it waits for a remote value or ends; at its end,
    /// order the transaction with the footprint it found.
    fn recon_advance(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(recon) = self.recons.get_mut(&txn) else {
            return;
        };
        recon.waiting = None;
        // Reconnaissance runs on the handler thread: it reads the store as it goes.
        let mut work = Work::default();
        loop {
            match recon.run.resume() {
                Progress::Needs(key) => {
                    let owner = self.env.placement.partition_of(&key);
                    if self.parts.contains_key(&owner) {
                        work.reads = work.reads.saturating_add(1);
                        let value = reading(&self.store)
                            .read_at(&key, Timestamp::MAX)
                            .and_then(|v| v.value.clone());
                        recon.run.supply(key, value);
                        continue;
                    }
                    recon.waiting = Some((key.clone(), 0));
                    let node = self.env.placement.replicas(owner)[0];
                    self.counters.recon_reads += 1;
                    ctx.send(node, Msg::ReconRead { txn, key });
                    ctx.set_timer(PULL_AFTER, Timer::Recon(txn));
                    ctx.charge(work);
                    return;
                }
                Progress::Ended(run) => {
                    work.steps = run.steps();
                    ctx.charge(work);
                    let mut entry = self.recons.remove(&txn).expect("running").entry;
                    let footprint = Footprint::of(&run, |k| self.env.procedures.lock_name(k));
                    entry.partitions = footprint.partitions(&self.env.placement);
                    entry.footprint = Some(footprint);
                    self.ensure_participant(&mut entry);
                    if self.submissions.replace(entry.clone()) {
                        self.seq.submit(entry);
                    }
                    return;
                }
            }
        }
    }

    fn on_recon_value(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        key: Key,
        value: Option<Value>,
    ) {
        let Some(recon) = self.recons.get_mut(&txn) else {
            return;
        };
        if recon.waiting.as_ref().map(|(k, _)| k) != Some(&key) {
            return;
        }
        recon.run.supply(key, value);
        self.recon_advance(ctx, txn);
    }

    /// `txn`'s reconnaissance has waited a while: ask the next replica, or give up once its
    /// client has (nothing of it took effect: its earlier attempts, if any, were mispredicted).
    fn recon_timer(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(recon) = self.recons.get_mut(&txn) else {
            return;
        };
        let Some((key, asked)) = recon.waiting.as_mut() else {
            return;
        };
        let idle = self.env.options.idle_txn_timeout;
        if ctx.now() >= recon.since.saturating_add(idle) {
            self.recons.remove(&txn);
            if let Some(pending) = self.submissions.abandon(txn) {
                pending.answer(ctx, ClientReply::Aborted(AbortReason::Timeout));
            }
            return;
        }
        *asked += 1;
        let replicas = self
            .env
            .placement
            .replicas(self.env.placement.partition_of(key));
        let node = replicas[*asked % replicas.len()];
        let key = key.clone();
        self.counters.recon_reads += 1;
        ctx.send(node, Msg::ReconRead { txn, key });
        ctx.set_timer(PULL_AFTER, Timer::Recon(txn));
    }

    fn on_recon_read(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId, key: Key) {
        let p = self.env.placement.partition_of(&key);
        if self.parts.get(&p).is_some_and(|part| part.copying) {
            return; // its store is stale: the submitter asks another replica
        }
        let value = reading(&self.store)
            .read_at(&key, Timestamp::MAX)
            .and_then(|v| v.value.clone());
        ctx.send(from, Msg::ReconValue { txn, key, value });
    }

    // ----- Ordering -----

    /// Hand every transaction of the delivered batches to the schedules of the local
    /// partitions it touches.
    fn take(&mut self, ctx: &mut Ctx<'_, Self>, batches: Vec<sequencer::Batch<Entry>>) {
        self.copy_if_skipped(ctx);
        let placement = Arc::clone(&self.env.placement);
        let mut woken = BTreeSet::new();
        for batch in batches {
            let mut entries: Vec<(usize, Entry)> = match self.arrange(&batch.items) {
                Some(slots) => slots.into_iter().zip(batch.items).collect(),
                None => batch.items.into_iter().enumerate().collect(),
            };
            // Delivered in position order: schedules start transactions in delivery order.
            entries.sort_by_key(|(slot, _)| *slot);
            for (slot, entry) in entries {
                let Some(at) = dispatch::position(batch.index, slot) else {
                    self.counters.refused_entries += 1;
                    continue;
                };
                self.delivered = self.delivered.max(at);
                let unpredicted = S::FOOTPRINTS && entry.footprint.is_none();
                let lock_name = |k: &Key| self.env.procedures.lock_name(k);
                if unpredicted || entry.check(&placement, lock_name).is_err() {
                    self.counters.refused_entries += 1;
                    continue;
                }
                let entry = Arc::new(entry);
                for p in &entry.partitions {
                    // A position delivered again (the sequencer replays its log after a
                    // restart of its Raft instance) is taken once.
                    if let Some(part) = self.parts.get_mut(p)
                        && at > part.durable
                        && !part.done_above.contains(&at)
                        && !part.pending.contains_key(&at)
                    {
                        if part.copying {
                            // Handed to the schedule once the copies are in.
                            part.pending.insert(at, Arc::clone(&entry));
                            continue;
                        }
                        part.schedule.deliver(at, &entry, &placement);
                        part.pending.insert(at, Arc::clone(&entry));
                        if let Some(spec) = &part.spec {
                            lock(spec).begin(at);
                        }
                        woken.insert(*p);
                    }
                }
            }
        }
        for p in woken {
            self.wake(ctx, p);
        }
    }

    /// The in-batch slots of a delivered batch's entries if the schedule groups them
    /// ([`SpeculativeMode::grouped`]); `None` for delivery order.
    fn arrange(&self, items: &[Entry]) -> Option<Vec<usize>> {
        if !self.mode.grouped {
            return None;
        }
        if self.mutant == Some(Mutant::LocalGrouping) {
            // This node's own order of the groups: by their lowest partition, ascending at
            // even nodes and descending at odd ones.
            let odd = self.me().0 % 2 == 1;
            let order = |set: &[PartitionId]| {
                let first = set.first().map_or(0, |p| u64::from(p.0));
                if odd { u64::MAX - first } else { first }
            };
            return grouping::arrange(items, Some(&order));
        }
        grouping::arrange(items, None)
    }

    /// Let partition `p`'s schedule decide.
    fn wake(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId) {
        let part = self.parts.get_mut(&p).expect("a local partition");
        if !part.scheduling {
            part.scheduling = true;
            ctx.set_timer(Duration::ZERO, Timer::Schedule(p));
        }
    }

    // ----- Execution -----

    /// Partition `p`'s schedule decides what may start; each is started, and run at once if
    /// runs hold the schedule's own resource (then, as each ends, what it let start runs too).
    fn schedule(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId) {
        let part = self.parts.get_mut(&p).expect("local");
        part.scheduling = false;
        if part.copying {
            return;
        }
        let mut work = Work::on(part.schedule.schedule_on());
        let ready = part.schedule.ready(&mut work);
        self.start_all(ctx, p, ready, &mut work);
        ctx.charge(work);
    }

    /// Start the transactions at `ready` on partition `p`.
    fn start_all(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        ready: Vec<Timestamp>,
        work: &mut Work,
    ) {
        let mut ready = VecDeque::from(ready);
        while let Some(at) = ready.pop_front() {
            let part = self.parts.get_mut(&p).expect("local");
            let Some(entry) = part.pending.get(&at).cloned() else {
                continue;
            };
            let attempt = part.spec.as_ref().map_or(0, |spec| lock(spec).begin(at).n);
            let mut running = Running::new(entry, &self.env.procedures, attempt);
            // A read-only MPT of a grouped batch (§4.4) starts once it is first here: it went
            // before the rest of its batch, so that is once the earlier batches are final.
            let first = part.first_pending();
            if self.mode.grouped
                && self.mutant != Some(Mutant::RoMptCurrent)
                && running.entry.is_read_only_multi_partition()
                && first != Some(at)
            {
                running.held_back = true;
                part.running.insert(at, running);
                continue;
            }
            part.running.insert(at, running);
            let inline = part.schedule.run_on() == Some(part.schedule.schedule_on());
            if !inline {
                ctx.set_timer(Duration::ZERO, Timer::Run(p, at));
                continue;
            }
            if self.step(ctx, p, at, None, work) {
                let part = self.parts.get_mut(&p).expect("local");
                ready.extend(part.schedule.ready(work));
            }
        }
    }

    /// Run partition `p`'s transaction at `at` on (a sibling's value arrived, a worker core
    /// took it up, or a worker ran it as far as it could: `worker`).
    fn run(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        at: Timestamp,
        mut worker: Option<Box<WorkerRun>>,
    ) {
        let Some(part) = self.parts.get(&p) else {
            return;
        };
        if worker
            .as_ref()
            .is_some_and(|w| w.generation != part.generation)
        {
            return; // run before the partition was copied: its state is gone
        }
        if let Some(worker) = &mut worker {
            // Its lock requests may have preempted others, even if it was aborted since.
            let effects = std::mem::take(&mut worker.effects);
            if effects != Effects::default() {
                self.carry_out(ctx, p, effects);
            }
        }
        let part = self.parts.get_mut(&p).expect("local");
        let Some(running) = part.running.get_mut(&at) else {
            return;
        };
        if let Some(spec) = &part.spec {
            if worker
                .as_ref()
                .is_some_and(|w| w.attempt != running.attempt)
            {
                return; // a run of an instance aborted meanwhile
            }
            let inst = Instance {
                at,
                n: running.attempt,
            };
            if lock(spec).is_speculatively_committed(inst) {
                return; // woken after it installed its writes: nothing to run
            }
            if running.ended.is_some() {
                // It waited for a lock to install its writes.
                let mut work = Work::default();
                self.speculative_end(ctx, p, at, &mut work);
                ctx.charge(work);
                return;
            }
        }
        let first = match worker {
            Some(worker) => {
                let WorkerRun {
                    run,
                    progress,
                    reads,
                    ..
                } = *worker;
                running.run = Ok(Some(run));
                running.local_reads.extend(reads);
                Some(progress)
            }
            None => None,
        };
        let part = &self.parts[&p];
        let mut work = Work {
            serial: part.schedule.run_on(),
            ..Work::default()
        };
        let inline = part.schedule.run_on() == Some(part.schedule.schedule_on());
        if self.step(ctx, p, at, first, &mut work) {
            if inline {
                let ready = self
                    .parts
                    .get_mut(&p)
                    .expect("local")
                    .schedule
                    .ready(&mut work);
                self.start_all(ctx, p, ready, &mut work);
            } else {
                self.wake(ctx, p);
            }
        }
        ctx.charge(work);
    }

    /// Run partition `p`'s transaction at `at` as far as it goes, going on from where a worker
    /// left it (`first`); true if it finished.
    fn step(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        at: Timestamp,
        first: Option<Progress>,
        work: &mut Work,
    ) -> bool {
        let mut reads = Vec::new();
        let mut effects = Effects::default();
        let attempt = self.parts[&p].running[&at].attempt;
        let step = self.advance(p, at, first, &mut reads, &mut effects, work);
        let entry = Arc::clone(&self.parts[&p].running[&at].entry);
        if S::SPECULATIVE {
            let running = self.running_mut(p, at);
            running.local_reads.extend(reads);
            self.offer(ctx, p, at);
            self.share_first(ctx, p);
            self.carry_out(ctx, p, effects);
            if self.parts[&p].running[&at].attempt != attempt {
                return false; // aborted meanwhile: its next instance is on its way
            }
        } else {
            self.share(ctx, p, at, &entry, reads);
        }
        match step {
            Step::OnWorker => false,
            Step::Suspended => {
                self.counters.lock_waits += 1;
                false
            }
            Step::Handoff(mut run) => {
                self.counters.handed_off += 1;
                let ahead = self.run_ahead(p, at, &entry, attempt);
                let generation = self.parts[&p].generation;
                ctx.offload(move || {
                    let (mut reads, mut effects, mut work) = Default::default();
                    let progress = match &ahead {
                        Some(ahead) => ahead.run(&mut run, &mut reads, &mut effects, &mut work),
                        None => {
                            let progress = run.resume();
                            if let Progress::Ended(ran) = &progress {
                                work.steps = ran.steps();
                            }
                            progress
                        }
                    };
                    let worker = Box::new(WorkerRun {
                        run,
                        progress,
                        attempt,
                        generation,
                        reads,
                        effects,
                    });
                    (Timer::Ran(p, at, worker), work)
                });
                false
            }
            Step::Blocked => {
                self.counters.waits += 1;
                // A replica of the owner that announced it is past this position will never
                // push the value (it sent it long ago, maybe while this node was down): ask it
                // now rather than after `PULL_AFTER`, or a node catching up after a restart
                // would wait that long at every such position.
                let waiting = self.parts[&p].running[&at].waiting_for.clone();
                if let Some(key) = waiting {
                    self.ask_for(ctx, at, key, true);
                }
                self.pull_soon(ctx, p);
                false
            }
            Step::Done(ran, writes) if S::SPECULATIVE => {
                self.running_mut(p, at).ended = Some((ran, writes));
                self.speculative_end(ctx, p, at, work);
                false
            }
            Step::Done(ran, writes) => {
                self.finish(ctx, p, at, &entry, ran, writes, false, work);
                true
            }
        }
    }

    /// What a worker needs to run partition `p`'s transaction at `at` (instance `attempt`) on
    /// past its own partition's reads; `None` unless speculative (and for the mutant
    /// `ro-mpt-current`'s read-only MPTs, whose reads the node makes its broken way).
    fn run_ahead(
        &self,
        p: PartitionId,
        at: Timestamp,
        entry: &Arc<Entry>,
        attempt: u32,
    ) -> Option<RunAhead> {
        let spec = self.parts[&p].spec.as_ref()?;
        if self.mutant == Some(Mutant::RoMptCurrent) && entry.is_read_only_multi_partition() {
            return None;
        }
        Some(RunAhead {
            p,
            inst: Instance { at, n: attempt },
            spec: Arc::clone(spec),
            store: Arc::clone(&self.store),
            placement: Arc::clone(&self.env.placement),
            entry: Arc::clone(entry),
        })
    }

    fn running_mut(&mut self, p: PartitionId, at: Timestamp) -> &mut Running {
        self.parts
            .get_mut(&p)
            .and_then(|part| part.running.get_mut(&at))
            .expect("running")
    }

    // ----- Speculation (`Schedule::SPECULATIVE`) -----

    /// Partition `p`'s run at `at` ended: lock the keys of `p` it writes (it may wait for an
    /// earlier holder), install them (speculative commit), and commit finally whatever now can.
    fn speculative_end(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        at: Timestamp,
        work: &mut Work,
    ) {
        let placement = Arc::clone(&self.env.placement);
        let part = self.parts.get_mut(&p).expect("local");
        let shared = Arc::clone(part.spec.as_ref().expect("speculative"));
        let mut spec = lock(&shared);
        let running = part.running.get_mut(&at).expect("running");
        let inst = Instance {
            at,
            n: running.attempt,
        };
        let (_, writes) = running.ended.as_ref().expect("ended");
        let local: Vec<(Key, Option<Value>)> = writes
            .iter()
            .filter(|(key, _)| placement.partition_of(key) == p)
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let mut effects = Effects::default();
        for (key, _) in &local {
            if spec.lock(inst, key, &mut effects) == Access::Suspended {
                drop(spec);
                self.counters.lock_waits += 1;
                self.carry_out(ctx, p, effects);
                return;
            }
        }
        work.writes = work
            .writes
            .saturating_add(u32::try_from(local.len()).unwrap_or(u32::MAX));
        let installed = spec.put(inst, &local, &mut effects);
        drop(spec);
        if installed {
            self.counters.speculative_commits += 1;
            if self.mutant == Some(Mutant::EarlyFinalCommit)
                && let Some((Some(ran), _)) = &running.ended
            {
                running.reported = true;
                let (ran, entry) = (ran.clone(), Arc::clone(&running.entry));
                self.report(ctx, p, at, &entry, ran);
            }
        } else {
            // A lock it held was preempted, or it was flagged: it runs again.
            self.restart(ctx, p, at, true, &mut effects);
        }
        self.carry_out(ctx, p, effects);
        self.commit_in_order(ctx, p, work);
    }

    /// Abort the current instance of partition `p`'s transaction at `at` and run it again;
    /// `local` if a transaction of `p` caused it (not a sibling's value).
    fn restart(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        at: Timestamp,
        local: bool,
        effects: &mut Effects,
    ) {
        let part = self.parts.get_mut(&p).expect("local");
        let next = part.speculative().abort(at, local, effects);
        self.counters.speculative_aborts += 1;
        if !local {
            self.counters.remote_aborts += 1;
        }
        if let Some(running) = part.running.get_mut(&at) {
            *running = Running::new(Arc::clone(&running.entry), &self.env.procedures, next.n);
            ctx.set_timer(Duration::ZERO, Timer::Run(p, at));
        }
    }

    /// Carry out what the speculative state asked for: abort and rerun the flagged instances,
    /// and let the woken ones ask again.
    fn carry_out(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId, mut effects: Effects) {
        let ignore_flag =
            self.mutant == Some(Mutant::Speculative(speculative::Mutant::IgnoreAbortFlag));
        while let Some(inst) = effects.flagged.pop() {
            let (committed, flagged) = {
                let spec = self.parts[&p].speculative();
                (spec.is_speculatively_committed(inst), spec.is_flagged(inst))
            };
            if ignore_flag && committed {
                continue; // it final-commits flagged
            }
            if flagged {
                self.restart(ctx, p, inst.at, true, &mut effects);
            }
        }
        let part = &self.parts[&p];
        let spec = part.speculative();
        for inst in effects.woken {
            let waits = part.running.get(&inst.at).is_some_and(|r| {
                r.attempt == inst.n
                    && (r.parked.is_some()
                        || (r.ended.is_some() && !spec.is_speculatively_committed(inst)))
            });
            if waits && spec.is_current(inst) {
                ctx.set_timer(Duration::ZERO, Timer::Run(p, inst.at));
            }
        }
    }

    /// Commit finally, in order, every transaction of partition `p` that can: the first not
    /// final, while its run is speculatively committed and unflagged. Then the new first
    /// shares its reads, and the schedule may start more.
    fn commit_in_order(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId, work: &mut Work) {
        let mut committed = false;
        loop {
            // The first may have run to its end before it was first: its siblings have not
            // had its reads yet.
            self.share_first(ctx, p);
            let part = self.parts.get_mut(&p).expect("local");
            let shared = Arc::clone(part.spec.as_ref().expect("speculative"));
            let mut spec = lock(&shared);
            let Some(first) = spec.first_pending() else {
                break;
            };
            let Some(running) = part.running.get_mut(&first) else {
                break;
            };
            // Every sibling value it consumed speculatively must be confirmed final: by the
            // same value sent final (a final value that differs aborted it when it came), or by
            // a conditional confirmation whose conditions the final inputs of the transactions
            // it names meet (each ran here, and is final here, being earlier).
            let inbox = &self.inbox;
            let final_inputs = &self.final_inputs;
            let conditional = self.confirmations.get(&first);
            let confirmed = |read: &(Key, Option<Value>)| {
                inbox.get(first, &read.0) == Some(&read.1)
                    || conditional
                        .is_some_and(|cs| cs.iter().any(|c| c.vouches_for(read, final_inputs)))
            };
            if self.mutant != Some(Mutant::NoLanCheck)
                && spec.is_speculatively_committed(Instance {
                    at: first,
                    n: running.attempt,
                })
                && !running.unconfirmed.iter().all(confirmed)
            {
                drop(spec);
                self.counters.confirmation_waits += 1;
                self.pull_soon(ctx, p);
                break;
            }
            let early = running
                .unconfirmed
                .iter()
                .any(|(key, value)| inbox.get(first, key) != Some(value));
            // None unless its run is speculatively committed (and unflagged).
            let Some(writes) = spec.final_commit(first) else {
                break;
            };
            if early {
                self.counters.committed_before_final_values += 1;
            }
            let (ran, _) = running.ended.take().expect("ended");
            let entry = Arc::clone(&running.entry);
            let reported = running.reported;
            if self.mode.exchange == Exchange::ConfirmedSpeculatively && entry.partitions.len() > 1
            {
                let inputs = running.local_reads.iter().chain(&running.consumed).cloned();
                self.final_inputs.entry(first).or_default().extend(inputs);
            }
            // Into the final store before a worker can read the keys again.
            self.apply_final(ctx, p, first, entry.txn, writes, work);
            drop(spec);
            self.finish(ctx, p, first, &entry, ran, BTreeMap::new(), reported, work);
            committed = true;
        }
        if committed {
            self.wake(ctx, p);
            let part = self.parts.get_mut(&p).expect("local");
            let first = part.first_pending();
            if let Some(first) = first
                && let Some(running) = part.running.get_mut(&first)
                && running.held_back
            {
                running.held_back = false;
                ctx.set_timer(Duration::ZERO, Timer::Run(p, first));
            }
        }
        self.confirm_prefix(ctx, p);
    }

    /// Send the siblings the reads of partition `p`'s first transaction not final that they
    /// have not had: with every earlier transaction final, they are final too.
    fn share_first(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId) {
        let part = self.parts.get_mut(&p).expect("local");
        let Some(first) = part.first_pending() else {
            return;
        };
        let Some(running) = part.running.get_mut(&first) else {
            return;
        };
        if running.entry.partitions.len() == 1 || running.shared == running.local_reads.len() {
            return;
        }
        let reads = running.local_reads[running.shared..].to_vec();
        running.shared = running.local_reads.len();
        let entry = Arc::clone(&running.entry);
        self.share(ctx, p, first, &entry, reads);
    }

    /// Run partition `p`'s transaction at `at` as far as the values at hand let it, going on
    /// from `first` if a worker ran it that far; the keys of `p` it read from the store go to
    /// `reads`, for the siblings. A run that holds no serial resource is handed off to a worker
    /// with the values it has whenever it would run on (`Step::Handoff`), unless the protocol
    /// runs them inline (`workers=inline`).
    fn advance(
        &mut self,
        p: PartitionId,
        at: Timestamp,
        first: Option<Progress>,
        reads: &mut Reads,
        effects: &mut Effects,
        work: &mut Work,
    ) -> Step {
        let offload = self.workers == Workers::Pool
            && self
                .parts
                .get(&p)
                .is_some_and(|part| part.schedule.run_on().is_none());
        let placement = Arc::clone(&self.env.placement);
        let procedures = &self.env.procedures;
        let inbox = &self.inbox;
        let offers = self.mode.exchange.offers().then_some(&self.offers);
        // Only speculative confirmation needs every sibling value a run consumed.
        let keep_inputs = self.mode.exchange == Exchange::ConfirmedSpeculatively;
        // Mutant `ro-mpt-current`: a read-only MPT reads the final state as it is now.
        let current = (self.mutant == Some(Mutant::RoMptCurrent)).then(|| self.frontier(p));
        let mutant = self.mutant;
        let part = self.parts.get_mut(&p).expect("local");
        // The speculative state before the store, as everywhere (see `SharedStore`).
        let shared_spec = part.spec.clone();
        let mut spec = shared_spec.as_deref().map(lock);
        let shared_store = Arc::clone(&self.store);
        let store = reading(&shared_store);
        let running = part.running.get_mut(&at).expect("running");
        let entry = Arc::clone(&running.entry);
        let inst = Instance {
            at,
            n: running.attempt,
        };
        // The state just before this position: the schedule let every earlier transaction
        // touching these keys finish, and this one applies its writes only at its end.
        let before = Timestamp(at.0 - 1);
        // A speculative read of a key no earlier transaction installed: the final version
        // below the reader's position, and its writer's position.
        let final_read = |key: &Key, below: Timestamp| final_version(&store, key, below);
        let read_here = |key: &Key, work: &mut Work| {
            work.reads = work.reads.saturating_add(1);
            store.read_at(key, before).and_then(|v| v.value.clone())
        };
        if let Some(fp) = &entry.footprint
            && !running.footprint_read
        {
            running.footprint_read = true;
            for key in fp.reads.iter().filter(|k| placement.partition_of(k) == p) {
                let value = read_here(key, work);
                reads.push((key.clone(), value.clone()));
                if let Ok(Some(run)) = &mut running.run {
                    run.supply(key.clone(), value);
                }
            }
            if !entry.runs_at(p, &placement) {
                return Step::Done(None, BTreeMap::new());
            }
        }
        let mut run = match (&entry.body, &mut running.run) {
            (Body::Writes(writes), _) => {
                let ops = writes
                    .iter()
                    .map(|(key, value)| ExecutedOp::Write {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect();
                let ran = Ran::Done { ops, end: Ok(()) };
                return Step::Done(Some(ran), writes.iter().cloned().collect());
            }
            (Body::Call { .. }, Err(why)) => {
                return Step::Done(Some(Ran::Refused(why.clone())), BTreeMap::new());
            }
            (Body::Call { .. }, Ok(run)) => match run.take() {
                Some(run) => run,
                None => return Step::OnWorker,
            },
        };
        running.waiting_for = None;
        let unvalidated = mutant == Some(Mutant::UnvalidatedRecon);
        // Procedure steps are charged by whoever saw the run end: the worker, if it ran there.
        let mut ran_here = first.is_none();
        let mut progress = match first {
            Some(progress) => progress,
            // A speculative run stopped here for a lock or a sibling's value: go on from there.
            None if running.parked.is_some() => {
                Progress::Needs(running.parked.take().expect("parked"))
            }
            None if offload => {
                // Hand the worker every value the footprint's reads have here by now, so it
                // stops only at a sibling's value still on its way.
                if let Some(fp) = &entry.footprint {
                    for key in fp.reads.iter().filter(|k| placement.partition_of(k) != p) {
                        if let Some(value) = inbox.get(at, key) {
                            run.supply(key.clone(), value.clone());
                        }
                    }
                }
                return Step::Handoff(run);
            }
            None => run.resume(),
        };
        loop {
            let key = match progress {
                Progress::Needs(key) => {
                    if let Some(spec) = spec.as_deref_mut()
                        && !lock_written(spec, inst, p, &placement, &run, effects)
                    {
                        running.parked = Some(key);
                        running.run = Ok(Some(run));
                        return Step::Suspended;
                    }
                    key
                }
                Progress::Ended(run) => {
                    if ran_here {
                        work.steps = work.steps.saturating_add(run.steps());
                    }
                    match &entry.footprint {
                        Some(fp) if !unvalidated => {
                            let lock_name = |k: &Key| procedures.lock_name(k);
                            if run.writes.keys().any(|k| !fp.covers_write(k, lock_name)) {
                                return Step::Done(Some(Ran::Mispredicted), BTreeMap::new());
                            }
                        }
                        Some(_) => {}
                        None => {
                            if let Some(q) = run
                                .writes
                                .keys()
                                .map(|k| placement.partition_of(k))
                                .find(|q| !entry.partitions.contains(q))
                            {
                                let ran = Ran::Undeclared { partition: q };
                                return Step::Done(Some(ran), BTreeMap::new());
                            }
                        }
                    }
                    let end = ended_how(run.end);
                    let writes = if end.is_ok() {
                        run.writes
                    } else {
                        BTreeMap::new()
                    };
                    return Step::Done(Some(Ran::Done { ops: run.ops, end }), writes);
                }
            };
            let owner = placement.partition_of(&key);
            let value = match &entry.footprint {
                // Every read of the footprint is supplied here or awaited from its owner; any
                // other is a misprediction, which every participant meets at the same point.
                Some(fp) if !fp.reads.contains(&key) => {
                    if !unvalidated {
                        return Step::Done(Some(Ran::Mispredicted), BTreeMap::new());
                    }
                    if owner == p {
                        read_here(&key, work)
                    } else {
                        None
                    }
                }
                _ if owner == p => {
                    let v = match spec.as_deref_mut() {
                        None => read_here(&key, work),
                        Some(_) if current.is_some() && entry.is_read_only_multi_partition() => {
                            let now = current.unwrap_or(before);
                            store.read_at(&key, now).and_then(|v| v.value.clone())
                        }
                        Some(spec) => {
                            work.reads = work.reads.saturating_add(1);
                            match spec.read(inst, &key, &final_read) {
                                Access::Ready(v) => v,
                                Access::Suspended => {
                                    running.parked = Some(key);
                                    running.run = Ok(Some(run));
                                    return Step::Suspended;
                                }
                            }
                        }
                    };
                    reads.push((key.clone(), v.clone()));
                    v
                }
                _ if !entry.partitions.contains(&owner) => {
                    let ran = Ran::Undeclared { partition: owner };
                    return Step::Done(Some(ran), BTreeMap::new());
                }
                _ => match (inbox.get(at, &key), offers.and_then(|o| o.get(at, &key))) {
                    (Some(v), _) => {
                        if keep_inputs {
                            running.consumed.push((key.clone(), v.clone()));
                        }
                        v.clone()
                    }
                    (None, _) if mutant == Some(Mutant::NoSiblingWait) => None,
                    // A sibling's speculative value: run on with it, and have it confirmed
                    // before the final commit.
                    (None, Some(v)) => {
                        running.unconfirmed.push((key.clone(), v.clone()));
                        if keep_inputs {
                            running.consumed.push((key.clone(), v.clone()));
                        }
                        v.clone()
                    }
                    (None, None) => {
                        if S::SPECULATIVE {
                            running.parked = Some(key.clone());
                        }
                        running.waiting_for = Some(key);
                        running.run = Ok(Some(run));
                        return Step::Blocked;
                    }
                },
            };
            run.supply(key, value);
            if offload {
                return Step::Handoff(run);
            }
            ran_here = true;
            progress = run.resume();
        }
    }

    /// Send the values partition `p` read for the transaction at `at` to every replica of
    /// every other participant that runs the procedure (this node's other partitions take
    /// them from the inbox).
    fn share(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        at: Timestamp,
        entry: &Entry,
        reads: Reads,
    ) {
        if reads.is_empty() || entry.partitions.len() == 1 {
            return;
        }
        let me = self.me();
        let placement = Arc::clone(&self.env.placement);
        let mut nodes = BTreeSet::new();
        let mut local = false;
        for q in entry.runners(&placement).into_iter().filter(|q| *q != p) {
            for node in placement.replicas(q) {
                if *node == me {
                    local = true;
                } else {
                    nodes.insert(*node);
                }
            }
        }
        for (key, value) in reads {
            for node in &nodes {
                self.counters.values_sent += 1;
                let msg = Msg::Value {
                    at,
                    key: key.clone(),
                    value: value.clone(),
                };
                ctx.send(*node, msg);
            }
            if local {
                self.take_value(ctx, at, key, value);
            }
        }
    }

    /// A sibling's value: keep it for the transaction at `at`, and wake the local runs waiting
    /// for it.
    fn take_value(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        at: Timestamp,
        key: Key,
        value: Option<Value>,
    ) {
        if at <= self.local_frontier() {
            return; // every local partition is past it
        }
        if !self.inbox.put(at, key.clone(), value.clone()) {
            return;
        }
        let (wrong, confirmed) = self.sibling_value_came(ctx, at, &key, &value);
        self.abort_remotely(ctx, at, wrong);
        for p in confirmed {
            if self.parts[&p].first_pending() == Some(at) {
                let mut work = Work::default();
                self.commit_in_order(ctx, p, &mut work);
                ctx.charge(work);
            }
        }
    }

    /// A sibling's speculative value ([`Exchange::offers`]): keep it for the transaction at
    /// `at` unless a final one is here, wake the local runs waiting for it, and run again those
    /// that consumed another value of an earlier instance of the sibling's.
    fn take_offer(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        at: Timestamp,
        key: Key,
        instance: u32,
        value: Option<Value>,
    ) {
        if !S::SPECULATIVE
            || at <= self.local_frontier()
            || self.inbox.get(at, &key).is_some()
            || !self.offers.put(at, key.clone(), instance, value.clone())
        {
            return;
        }
        let (wrong, _) = self.sibling_value_came(ctx, at, &key, &value);
        self.abort_remotely(ctx, at, wrong);
    }

    /// A sibling's `value` of `key` for the transaction at `at` came: wake the local runs
    /// waiting for it, and say which local partitions' runs consumed the key speculatively —
    /// another value (they are wrong), or this one.
    fn sibling_value_came(
        &self,
        ctx: &mut Ctx<'_, Self>,
        at: Timestamp,
        key: &Key,
        value: &Option<Value>,
    ) -> (Vec<PartitionId>, Vec<PartitionId>) {
        let mut wrong = Vec::new();
        let mut same = Vec::new();
        for (p, part) in &self.parts {
            let Some(running) = part.running.get(&at) else {
                continue;
            };
            if running.waiting_for.as_ref() == Some(key) {
                ctx.set_timer(Duration::ZERO, Timer::Run(*p, at));
            }
            match running.unconfirmed.iter().find(|(k, _)| k == key) {
                Some((_, consumed)) if consumed != value => wrong.push(*p),
                Some(_) => same.push(*p),
                None => {}
            }
        }
        (wrong, same)
    }

    /// Abort the runs at `at` of the partitions `wrong` and run them again: a sibling value
    /// they consumed turned out otherwise (a remote abort).
    fn abort_remotely(&mut self, ctx: &mut Ctx<'_, Self>, at: Timestamp, wrong: Vec<PartitionId>) {
        for p in wrong {
            let mut effects = Effects::default();
            self.restart(ctx, p, at, false, &mut effects);
            self.carry_out(ctx, p, effects);
        }
    }

    /// [`Exchange::offers`]: send the reads of partition `p`'s run at `at` that its plane's
    /// siblings have not had, as speculative values of its instance. (The first transaction
    /// not final sends them final instead: [`Self::share_first`].)
    fn offer(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId, at: Timestamp) {
        if !self.mode.exchange.offers() {
            return;
        }
        let part = self.parts.get_mut(&p).expect("local");
        let first = part.first_pending();
        let Some(running) = part.running.get_mut(&at) else {
            return;
        };
        if running.entry.partitions.len() == 1
            || running.offered == running.local_reads.len()
            || first == Some(at)
        {
            return;
        }
        let reads = running.local_reads[running.offered..].to_vec();
        running.offered = running.local_reads.len();
        let instance = running.attempt;
        let entry = Arc::clone(&running.entry);
        let me = self.me();
        for node in self.plane(p, &entry) {
            for (key, value) in &reads {
                if node == me {
                    self.take_offer(ctx, at, key.clone(), instance, value.clone());
                } else {
                    self.counters.speculative_values_sent += 1;
                    let msg = Msg::SpeculativeValue {
                        at,
                        key: key.clone(),
                        instance,
                        value: value.clone(),
                    };
                    ctx.send(node, msg);
                }
            }
        }
    }

    /// The replicas of `entry`'s other runners in partition `p`'s plane at this node: for each,
    /// the one whose rank among its partition's replicas is this node's rank among `p`'s
    /// (modulo their number). Speculative data goes only there: an instance number means
    /// something only to the siblings that consumed that replica's values.
    fn plane(&self, p: PartitionId, entry: &Entry) -> Vec<NodeId> {
        let placement = &self.env.placement;
        let me = self.me();
        let rank = placement
            .replicas(p)
            .iter()
            .position(|n| *n == me)
            .unwrap_or(0);
        let others = entry.runners(placement).into_iter().filter(|q| *q != p);
        others
            .filter_map(|q| {
                let replicas = placement.replicas(q);
                replicas.get(rank % replicas.len().max(1)).copied()
            })
            .collect()
    }

    /// [`Exchange::ConfirmedSpeculatively`]: every multi-partition transaction in partition
    /// `p`'s speculative prefix (but the first, which sends final values) that has not sent its
    /// conditional confirmation sends it to its plane's siblings, given what the
    /// multi-partition transactions before it in the prefix consumed unconfirmed.
    fn confirm_prefix(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId) {
        if self.mode.exchange != Exchange::ConfirmedSpeculatively {
            return;
        }
        let part = self.parts.get_mut(&p).expect("local");
        let Some(shared) = part.spec.clone() else {
            return;
        };
        let spec = lock(&shared);
        let first = spec.first_pending();
        // What the MPTs of the prefix walked so far consumed unconfirmed: copied only into a
        // confirmation that goes out.
        let mut given: Vec<(Timestamp, &Reads)> = Vec::new();
        let mut sends = Vec::new();
        for inst in spec.speculative_prefix() {
            let Some(running) = part.running.get(&inst.at) else {
                break;
            };
            if running.entry.partitions.len() == 1 || running.attempt != inst.n {
                continue;
            }
            if !running.confirmation_sent
                && Some(inst.at) != first
                && !running.local_reads.is_empty()
            {
                let confirmation = Confirmation {
                    reads: running.local_reads.clone(),
                    given: given.iter().map(|(at, r)| (*at, (*r).clone())).collect(),
                };
                sends.push((inst.at, Arc::clone(&running.entry), confirmation));
            }
            if !running.unconfirmed.is_empty() {
                given.push((inst.at, &running.unconfirmed));
            }
        }
        drop(spec);
        for (at, _, _) in &sends {
            part.running
                .get_mut(at)
                .expect("in the prefix")
                .confirmation_sent = true;
        }
        let me = self.me();
        for (at, entry, confirmation) in sends {
            for node in self.plane(p, &entry) {
                if node == me {
                    self.take_confirmation(ctx, at, confirmation.clone());
                } else {
                    self.counters.confirmations_sent += 1;
                    let confirmation = confirmation.clone();
                    ctx.send(node, Msg::Confirmation { at, confirmation });
                }
            }
        }
    }

    /// A sibling's conditional confirmation for the transaction at `at`: keep it, and let the
    /// local partitions whose first transaction not final that is commit if they now can.
    fn take_confirmation(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        at: Timestamp,
        confirmation: Confirmation,
    ) {
        if self.mode.exchange != Exchange::ConfirmedSpeculatively || at <= self.local_frontier() {
            return;
        }
        self.confirmations.entry(at).or_default().push(confirmation);
        let firsts: Vec<PartitionId> = self
            .parts
            .iter()
            .filter(|(_, part)| part.first_pending() == Some(at))
            .map(|(p, _)| *p)
            .collect();
        for p in firsts {
            let mut work = Work::default();
            self.commit_in_order(ctx, p, &mut work);
            ctx.charge(work);
        }
    }

    /// Partition `p`'s transaction at `at` ended: apply and log its writes to `p`, and report
    /// the outcome if `p` is the reporter.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        at: Timestamp,
        entry: &Entry,
        ran: Option<Ran>,
        writes: BTreeMap<Key, Option<Value>>,
        reported: bool,
        work: &mut Work,
    ) {
        let placement = Arc::clone(&self.env.placement);
        let local: Vec<(Key, Option<Value>)> = writes
            .into_iter()
            .filter(|(key, _)| placement.partition_of(key) == p)
            .collect();
        let part = self.parts.get_mut(&p).expect("local");
        part.running.remove(&at);
        part.pending.remove(&at);
        part.schedule.finished(at);
        self.apply_final(ctx, p, at, entry.txn, local, work);
        let Some(ran) = ran else {
            return; // it only read for the others
        };
        self.counters.executed += 1;
        if entry.partitions.len() > 1 {
            self.counters.multi_partition += 1;
        }
        if !reported {
            self.report(ctx, p, at, entry, ran);
        }
    }

    /// Write partition `p`'s transaction `txn`'s writes `local` of `p` to the final store at
    /// its position `at`, and log them.
    fn apply_final(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        at: Timestamp,
        txn: TxnId,
        local: Vec<(Key, Option<Value>)>,
        work: &mut Work,
    ) {
        if local.is_empty() {
            return;
        }
        {
            let mut store = writing(&self.store);
            for (key, value) in &local {
                store.entry(key).put_committed(txn, at, value.clone());
            }
        }
        work.writes = work
            .writes
            .saturating_add(u32::try_from(local.len()).unwrap_or(u32::MAX));
        ctx.persist(Record::Applied {
            partition: p,
            at,
            txn,
            writes: local,
        });
        if S::IN_ORDER {
            self.parts.get_mut(&p).expect("local").durable = at;
        }
    }

    /// Send how partition `p`'s transaction at `at` ended to its submitter, if `p` reports it.
    fn report(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        at: Timestamp,
        entry: &Entry,
        ran: Ran,
    ) {
        if entry.reporter(&self.env.placement) != p {
            return;
        }
        let submitter = entry.txn.coordinator();
        if submitter == self.me() {
            self.on_outcome(ctx, entry.txn, at, ran);
        } else {
            let txn = entry.txn;
            ctx.send(submitter, Msg::Outcome { txn, at, ran });
        }
    }

    /// A sibling asks for `key`'s value at `at`: answer if this node's partition of the key is
    /// past `at` (from its versions), or runs `at` and has read it.
    fn need_value(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, at: Timestamp, key: Key) {
        let p = self.env.placement.partition_of(&key);
        let Some(part) = self.parts.get(&p) else {
            return;
        };
        let before = Timestamp(at.0 - 1);
        // A partition waiting for its copy is stale.
        if part.copying {
            return;
        }
        // Below the floor (a copy's position, or the cut collection ran to) a key keeps only
        // its newest version at or below the floor and the newer ones: a version found at or
        // below `before` is still the newest there, but finding none says nothing (the one
        // before may be gone), and is left to a replica that knows.
        let floor = self.horizons.collected().max(part.floor);
        let below_floor = before < floor && self.mutant != Some(Mutant::AnswerBelowFloor);
        let read = || -> Option<Option<Value>> {
            match reading(&self.store).read_at(&key, before) {
                Some(v) => Some(v.value.clone()),
                None if below_floor => None,
                None => Some(None),
            }
        };
        // Speculative schedules answer only once every earlier transaction here is final.
        let settled = if S::SPECULATIVE {
            self.frontier(p).next()
        } else {
            self.frontier(p)
        };
        let value = if settled >= at {
            match read() {
                Some(v) => v,
                None => {
                    ctx.send(from, Msg::ValueGone { at, key, floor });
                    return;
                }
            }
        } else if S::SPECULATIVE {
            return;
        } else {
            let Some(running) = part.running.get(&at) else {
                return;
            };
            match &running.entry.footprint {
                // Its locks are held: the value before `at` is settled.
                Some(fp) if fp.reads.contains(&key) => match read() {
                    Some(v) => v,
                    None => return,
                },
                _ => match running
                    .run
                    .as_ref()
                    .ok()
                    .and_then(Option::as_ref)
                    .and_then(|r| r.supplied(&key))
                {
                    Some(v) => v,
                    None => return,
                },
            }
        };
        self.counters.values_pulled += 1;
        ctx.send(from, Msg::Value { at, key, value });
    }

    /// Partition `p`'s runs have waited a while: ask for the sibling values they still wait
    /// for from every replica of the owning partitions.
    fn pull(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId) {
        let inbox = &self.inbox;
        let part = self.parts.get_mut(&p).expect("local");
        let mut waiting: Vec<(Timestamp, Key)> = part
            .running
            .iter()
            .filter_map(|(at, r)| Some((*at, r.waiting_for.clone()?)))
            .collect();
        // The first not final may wait for confirmations.
        if let Some(first) = part.first_pending()
            && let Some(running) = part.running.get(&first)
        {
            waiting.extend(
                running
                    .unconfirmed
                    .iter()
                    .filter(|(key, _)| inbox.get(first, key).is_none())
                    .map(|(key, _)| (first, key.clone())),
            );
        }
        if waiting.is_empty() {
            part.pulling = false;
            return;
        }
        ctx.set_timer(PULL_AFTER, Timer::Pull(p));
        for (at, key) in waiting {
            self.ask_for(ctx, at, key, false);
        }
    }

    /// Ask for partition `p`'s missing values after [`PULL_AFTER`], unless that is planned.
    fn pull_soon(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId) {
        let part = self.parts.get_mut(&p).expect("local");
        if !part.pulling {
            part.pulling = true;
            ctx.set_timer(PULL_AFTER, Timer::Pull(p));
        }
    }

    /// Ask the other replicas of `key`'s partition for its value at `at`: all of them, or
    /// (`only_past`) those that announced a horizon at or past `at`.
    fn ask_for(&mut self, ctx: &mut Ctx<'_, Self>, at: Timestamp, key: Key, only_past: bool) {
        let owner = self.env.placement.partition_of(&key);
        let me = self.me();
        for node in self.env.placement.replicas(owner) {
            let past = self.horizons.of(*node) >= at;
            if *node != me && (past || !only_past) {
                let msg = Msg::NeedValue {
                    at,
                    key: key.clone(),
                };
                ctx.send(*node, msg);
            }
        }
    }

    // ----- Housekeeping -----

    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer(TICK, Timer::Tick);
        self.ticks += 1;
        // Clients wait for an answer far less than this; what is older was given up.
        let idle = self.env.options.idle_txn_timeout;
        let cutoff = Timestamp(ctx.now().0.saturating_sub(idle.as_micros() as u64));
        self.submissions.forget_before(cutoff);
        self.blind.forget_before(cutoff);
        self.inbox.prune_through(self.local_frontier());
        let frontier = self.local_frontier();
        self.gone.retain(|(at, _), _| *at > frontier);
        self.offers.prune_through(self.local_frontier());
        let frontier = self.local_frontier();
        self.confirmations = self.confirmations.split_off(&frontier.next());
        let horizon = self.horizons.watermark(ctx.now());
        writing(&self.store).collect_garbage(horizon, GC_BATCH);
        // A sibling's confirmation names transactions not final at its partition.
        self.final_inputs = self.final_inputs.split_off(&horizon.next());
        // Every batch wholly at or below the horizon is done and logged at every node not left
        // behind: none will ask for it again (one left behind gets a snapshot), so the
        // sequencer's log may drop it.
        self.seq
            .compact_through(dispatch::batch_of(horizon).saturating_sub(1));
        if !self.ticks.is_multiple_of(ANNOUNCE_EVERY) {
            return;
        }
        // Log how far each partition got before saying so: a restarted node never runs a
        // position at or below what it announced, so nobody needs versions below it.
        let partitions: Vec<PartitionId> = self.parts.keys().copied().collect();
        for p in partitions {
            let through = self.frontier(p);
            let part = self.parts.get_mut(&p).expect("local");
            if through > part.durable {
                part.durable = through;
                part.done_above = part.done_above.split_off(&through.next());
                ctx.persist(Record::Through {
                    partition: p,
                    at: through,
                });
            }
        }
        let through = self.local_frontier();
        let me = self.me();
        self.horizons.heard(me, through, ctx.now());
        let collected = self.horizons.collected();
        for node in self.env.placement.nodes().filter(|n| *n != me) {
            ctx.send(node, Msg::Horizon { through, collected });
        }
        self.ask_copies(ctx);
    }

    // ----- Catching up (`common::horizons`) -----

    /// The sequencer skipped batches this node never ran (it installed a snapshot): the node
    /// catches up past them.
    fn copy_if_skipped(&mut self, ctx: &mut Ctx<'_, Self>) {
        let cut = self.seq.compacted();
        if cut == 0 {
            return;
        }
        // The last position of the last batch cut.
        let Some(after) = dispatch::position(cut.saturating_add(1), 0) else {
            return;
        };
        self.catch_up_if_behind(ctx, Timestamp(after.0 - 1));
    }

    /// `from` announced how far it got and what it collected: a node with a partition not
    /// past that was left behind (versions it would need may be gone), and catches up.
    fn heard_horizon(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        through: Timestamp,
        collected: Timestamp,
    ) {
        self.horizons.heard(from, through, ctx.now());
        self.catch_up_if_behind(ctx, collected);
    }

    /// Catch the node up past `at_least` if a partition of it is not past it (or raise the
    /// position of a catch-up under way to it).
    fn catch_up_if_behind(&mut self, ctx: &mut Ctx<'_, Self>, at_least: Timestamp) {
        let raised = self.catching_up.is_some_and(|at| at < at_least);
        let behind = self
            .parts
            .iter()
            .any(|(p, part)| !part.copying && self.frontier(*p) < at_least);
        if raised || behind {
            self.catch_up(ctx, at_least);
        }
    }

    /// A replica of `key`'s partition cannot answer its value before `at` (it is below its
    /// floor): once every other replica said so, nobody will, and the node catches up past the
    /// highest floor.
    fn value_gone(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        at: Timestamp,
        key: Key,
        floor: Timestamp,
    ) {
        // A floor past what the sender announced is not believed (a forged one would send this
        // node after a position nobody reaches); an honest sender announces it soon, and the
        // value is asked for again.
        if at <= self.local_frontier() || floor > self.horizons.of(from) {
            return;
        }
        let owner = self.env.placement.partition_of(&key);
        let me = self.me();
        let (said, highest) = self.gone.entry((at, key)).or_default();
        said.insert(from);
        *highest = (*highest).max(floor);
        let highest = *highest;
        let all = self
            .env
            .placement
            .replicas(owner)
            .iter()
            .all(|n| *n == me || said.contains(n));
        if all {
            self.catch_up(ctx, highest);
        }
    }

    /// Catch up through one position, at least `at_least` (and any position a catch-up under
    /// way has): throw away the runs of every partition not past it and ask for a copy of each
    /// through it. One position for all, so that no copied partition restarts below another
    /// copied past it (whose versions in between the copy dropped here); the partitions past it
    /// run on, for their replicas may need their values to get there. What was delivered stays
    /// pending, for after the copies.
    fn catch_up(&mut self, ctx: &mut Ctx<'_, Self>, at_least: Timestamp) {
        let at = at_least.max(self.catching_up.unwrap_or(Timestamp::ZERO));
        let behind: Vec<PartitionId> = self
            .parts
            .iter()
            .filter(|(p, part)| !part.copying && self.frontier(**p) < at)
            .map(|(p, _)| *p)
            .collect();
        if self.catching_up == Some(at) && behind.is_empty() {
            return;
        }
        for p in &behind {
            let part = self.parts.get_mut(p).expect("local");
            part.generation += 1;
            part.running.clear();
            part.schedule = S::new(&self.env, *p);
            part.spec = fresh_speculative::<S>(self.mutant, self.mode);
            part.copying = true;
        }
        if self.catching_up != Some(at) {
            // The copies so far are through a lower position.
            self.copies.clear();
        }
        self.catching_up = Some(at);
        let copying: Vec<PartitionId> = self.copying().collect();
        tracing::info!(
            "left behind in batch {} (the cluster is past batch {}): copying {} through batch {}",
            dispatch::batch_of(self.local_frontier()),
            dispatch::batch_of(at_least),
            partition_list(&copying),
            dispatch::batch_of(at)
        );
        self.ask_copies(ctx);
    }

    /// Ask the next replica of `p` for its copy, the furthest first.
    fn ask_copy(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId) {
        let Some(at) = self.catching_up else {
            return;
        };
        let sources = self.horizons.furthest_first(self.env.placement.replicas(p));
        if sources.is_empty() {
            return;
        }
        let part = self.parts.get_mut(&p).expect("local");
        let source = sources[part.copy_asks % sources.len()];
        part.copy_asks += 1;
        self.counters.copies_asked += 1;
        tracing::debug!("asking n{} for partition {p} through {at}", source.0);
        ctx.send(source, Msg::CopyAsk { partition: p, at });
    }

    /// Ask for every copy still awaited (at once, then each announcement tick).
    fn ask_copies(&mut self, ctx: &mut Ctx<'_, Self>) {
        let awaited: Vec<PartitionId> = self
            .copying()
            .filter(|p| !self.copies.contains_key(p))
            .collect();
        for p in awaited {
            self.ask_copy(ctx, p);
        }
    }

    /// A replica of `p` catching up asks for a copy through `at`: sent if this node is past
    /// it and still has every version it needs (else the asker tries another replica, or, told
    /// this node's floor, catches up further).
    fn give_copy(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, p: PartitionId, at: Timestamp) {
        let Some(part) = self.parts.get(&p) else {
            return;
        };
        if part.copying || self.frontier(p) < at {
            tracing::debug!(
                "no copy of partition {p} through {at} for n{}: copying {}, at {}",
                from.0,
                part.copying,
                self.frontier(p)
            );
            return;
        }
        let floor = self.horizons.collected().max(part.floor);
        if at < floor {
            tracing::debug!(
                "copy of partition {p} through {at} refused to n{}: floor {floor}",
                from.0
            );
            ctx.send(
                from,
                Msg::CopyRefused {
                    partition: p,
                    floor,
                },
            );
            return;
        }
        let store = reading(&self.store);
        let versions: Vec<CopiedVersion> = store
            .iter()
            .filter(|(key, _)| self.env.placement.partition_of(key) == p)
            .filter_map(|(key, entry)| {
                let v = entry.read_at(at)?;
                Some((key.clone(), v.writer, v.ts, v.value.clone()))
            })
            .collect();
        drop(store);
        self.counters.copies_given += 1;
        ctx.send(
            from,
            Msg::CopyOf {
                partition: p,
                through: at,
                versions,
            },
        );
    }

    /// A copy of `p` through `through` came: kept if it is one awaited; once every partition
    /// copying has its copy, they are logged as one record, put in place, and what was
    /// delivered after the position goes to their fresh schedules.
    fn take_copy(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        through: Timestamp,
        versions: Vec<CopiedVersion>,
    ) {
        let awaited = self.parts.get(&p).is_some_and(|part| part.copying);
        if self.catching_up != Some(through) || !awaited {
            return;
        }
        self.copies.insert(p, versions);
        if self.copies.len() < self.copying().count() {
            return;
        }
        let partitions: Vec<(PartitionId, Vec<CopiedVersion>)> =
            std::mem::take(&mut self.copies).into_iter().collect();
        {
            let mut store = writing(&self.store);
            for (p, versions) in &partitions {
                replace_through(&mut store, &self.env.placement, *p, through, versions);
            }
        }
        let copied: Vec<PartitionId> = partitions.iter().map(|(p, _)| *p).collect();
        ctx.persist(Record::Copied {
            through,
            partitions,
        });
        self.catching_up = None;
        let placement = Arc::clone(&self.env.placement);
        for p in &copied {
            let part = self.parts.get_mut(p).expect("local");
            part.copying = false;
            part.floor = part.floor.max(through);
            part.durable = part.durable.max(through);
            part.done_above = part.done_above.split_off(&through.next());
            part.pending = part.pending.split_off(&through.next());
            for (at, entry) in &part.pending {
                part.schedule.deliver(*at, entry, &placement);
                if let Some(spec) = &part.spec {
                    lock(spec).begin(*at);
                }
            }
            self.wake(ctx, *p);
        }
        self.counters.partitions_copied += copied.len() as u64;
        tracing::info!(
            "copied {} through batch {}: running the order from there",
            partition_list(&copied),
            dispatch::batch_of(through)
        );
    }

    /// The partitions waiting for their copy (none unless catching up).
    fn copying(&self) -> impl Iterator<Item = PartitionId> + '_ {
        self.parts
            .iter()
            .filter(|(_, part)| part.copying)
            .map(|(p, _)| *p)
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Raft(m) => {
                let batches = self.seq.on_message(ctx, from, m);
                self.take(ctx, batches);
            }
            Msg::Value { at, key, value } => self.take_value(ctx, at, key, value),
            Msg::NeedValue { at, key } => self.need_value(ctx, from, at, key),
            Msg::SpeculativeValue {
                at,
                key,
                instance,
                value,
            } => self.take_offer(ctx, at, key, instance, value),
            Msg::Confirmation { at, confirmation } => self.take_confirmation(ctx, at, confirmation),
            Msg::Outcome { txn, at, ran } => self.on_outcome(ctx, txn, at, ran),
            Msg::Horizon { through, collected } => {
                self.heard_horizon(ctx, from, through, collected)
            }
            Msg::CopyAsk { partition, at } => self.give_copy(ctx, from, partition, at),
            Msg::ValueGone { at, key, floor } => self.value_gone(ctx, from, at, key, floor),
            Msg::CopyRefused { floor, .. } => {
                // As for `ValueGone`: a floor past what the sender announced is not believed.
                if self.catching_up.is_some() && floor <= self.horizons.of(from) {
                    self.catch_up(ctx, floor);
                }
            }
            Msg::CopyOf {
                partition,
                through,
                versions,
            } => self.take_copy(ctx, partition, through, versions),
            Msg::ReconRead { txn, key } => self.on_recon_read(ctx, from, txn, key),
            Msg::ReconValue { txn, key, value } => self.on_recon_value(ctx, txn, key, value),
        }
    }
}

impl<S: Schedule> Protocol for Ordered<S> {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record;

    const FORMS: &'static [RequestForm] = ONE_SHOT_AND_BLIND_WRITES;

    fn new(env: &NodeEnv) -> Self {
        let seq = Sequencer::new(env).unwrap_or_else(|e| panic!("{}: {e}", S::INFO.name));
        Ordered::build(env, seq)
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Record>) -> Self {
        let mut seq_records = Vec::new();
        let mut applied = Vec::new();
        let mut reserved = 0;
        for record in records {
            match record {
                Record::Sequencer(r) => seq_records.push(r),
                Record::Kit(replica::Record::IdsReserved { below }) => {
                    reserved = reserved.max(below)
                }
                Record::Kit(_) => {}
                other => applied.push(other),
            }
        }
        let seq = Sequencer::restore(env, seq_records)
            .unwrap_or_else(|e| panic!("{}: {e}", S::INFO.name));
        let mut node = Ordered::build(env, seq);
        node.ids.resume_below(reserved);
        for record in applied {
            match record {
                Record::Applied {
                    partition,
                    at,
                    txn,
                    writes,
                } => {
                    let mut store = writing(&node.store);
                    for (key, value) in writes {
                        let entry = store.entry(&key);
                        if entry.read_at(at).is_none_or(|v| v.ts != at) {
                            entry.put_committed(txn, at, value);
                        }
                    }
                    if let Some(part) = node.parts.get_mut(&partition) {
                        if S::IN_ORDER {
                            part.durable = part.durable.max(at);
                        } else {
                            part.done_above.insert(at);
                        }
                    }
                }
                Record::Through { partition, at } => {
                    if let Some(part) = node.parts.get_mut(&partition) {
                        part.durable = part.durable.max(at);
                    }
                }
                Record::Copied {
                    through,
                    partitions,
                } => {
                    for (partition, versions) in partitions {
                        replace_through(
                            &mut writing(&node.store),
                            &env.placement,
                            partition,
                            through,
                            &versions,
                        );
                        if let Some(part) = node.parts.get_mut(&partition) {
                            part.durable = part.durable.max(through);
                            part.floor = part.floor.max(through);
                        }
                    }
                }
                Record::Floor { partition, at } => {
                    if let Some(part) = node.parts.get_mut(&partition) {
                        part.floor = part.floor.max(at);
                    }
                }
                Record::Sequencer(_) | Record::Kit(_) => {}
            }
        }
        for part in node.parts.values_mut() {
            part.done_above = part.done_above.split_off(&part.durable.next());
        }
        node
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        self.seq.checkpoint(emit);
        self.ids.checkpoint(emit);
        for (key, entry) in reading(&self.store).iter() {
            let partition = self.env.placement.partition_of(key);
            for v in entry.versions() {
                emit(Record::Applied {
                    partition,
                    at: v.ts,
                    txn: v.writer,
                    writes: vec![(key.clone(), v.value.clone())],
                });
            }
        }
        for (p, part) in &self.parts {
            emit(Record::Through {
                partition: *p,
                at: part.durable,
            });
            emit(Record::Floor {
                partition: *p,
                at: part.floor.max(self.horizons.collected()),
            });
        }
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.seq.on_start(ctx);
        ctx.set_timer(TICK, Timer::Tick);
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        self.on_client_op(ctx, request);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        self.handle(ctx, from, msg);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        match timer {
            Timer::Sequencer(t) => {
                let batches = self.seq.on_timer(ctx, t);
                self.take(ctx, batches);
            }
            Timer::Schedule(p) => self.schedule(ctx, p),
            Timer::Run(p, at) => self.run(ctx, p, at, None),
            Timer::Ran(p, at, worker) => self.run(ctx, p, at, Some(worker)),
            Timer::Pull(p) => self.pull(ctx, p),
            Timer::Recon(txn) => self.recon_timer(ctx, txn),
            Timer::Tick => self.tick(ctx),
        }
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        let busy = self
            .parts
            .values()
            .filter(|part| !part.pending.is_empty())
            .count();
        vec![
            ("submissions_unanswered", self.submissions.len() as u64),
            ("blind_write_transactions_open", self.blind.len() as u64),
            ("partitions_busy", busy as u64),
            ("inbox_positions", self.inbox.len() as u64),
            ("offered_positions", self.offers.len() as u64),
            ("reconnaissances_open", self.recons.len() as u64),
            ("partitions_copying", self.copying().count() as u64),
        ]
    }

    fn leader(&self) -> Option<NodeId> {
        self.seq.leader()
    }

    /// Per local partition, an order-independent digest of every key's newest version (key,
    /// position, value): the replicas of a partition that ran the same prefix of the order
    /// agree on it whatever order their stores were rebuilt in.
    fn state_digests(&self) -> Vec<(PartitionId, u64)> {
        let store = reading(&self.store);
        dispatch::state_digests(&store, &self.env.placement, self.parts.keys().copied())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        let s = self.seq.counters();
        let mut counters = vec![
            ("executed", c.executed),
            ("multi_partition_executed", c.multi_partition),
            ("resubmitted_undeclared", c.resubmitted),
            ("mispredicted", c.mispredicted),
            ("reconnaissances", c.reconnaissances),
            ("recon_reads", c.recon_reads),
            ("refused_entries", c.refused_entries),
            ("values_sent", c.values_sent),
            ("values_pulled", c.values_pulled),
            ("sibling_waits", c.waits),
            ("runs_handed_off", c.handed_off),
            ("copies_asked", c.copies_asked),
            ("copies_given", c.copies_given),
            ("partitions_copied", c.partitions_copied),
        ];
        counters.extend(s.named());
        if S::SPECULATIVE {
            counters.extend([
                ("speculative_commits", c.speculative_commits),
                ("speculative_aborts", c.speculative_aborts),
                ("remote_aborts", c.remote_aborts),
                ("lock_waits", c.lock_waits),
                ("speculative_values_sent", c.speculative_values_sent),
                ("confirmations_sent", c.confirmations_sent),
                ("confirmation_waits", c.confirmation_waits),
                (
                    "committed_before_final_values",
                    c.committed_before_final_values,
                ),
                ("fast_reads", c.fast_reads),
            ]);
        }
        counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(key: u64, value: &str) -> (Key, Option<Value>) {
        (
            Key::numbered(1, key),
            Some(Value::copy_from_slice(value.as_bytes())),
        )
    }

    /// A sibling's conditional confirmation confirms a consumed value only if it vouches for
    /// that very value and every condition holds here — the checks that close the places where
    /// Algorithm 3 trusts abort numbers (docs/architecture/sparkle.md).
    #[test]
    fn a_confirmation_vouches_only_for_its_values_under_conditions_that_hold() {
        let earlier = Timestamp(10);
        let mut final_inputs = FinalInputs::new();
        final_inputs.insert(earlier, [read(1, "final")].into_iter().collect());
        let given = |value: &str| vec![(earlier, vec![read(1, value)])];
        let confirmation = |reads, given| Confirmation { reads, given };
        // Every condition holds and the value is vouched for.
        let good = confirmation(vec![read(2, "v")], given("final"));
        assert!(good.vouches_for(&read(2, "v"), &final_inputs));
        // Another instance's confirmation, of another value, confirms nothing it did not read
        // (the digest's second gap: a confirmation is about its sender's instance).
        assert!(!good.vouches_for(&read(2, "w"), &final_inputs));
        // The earlier transaction consumed what turned out not to be final: the confirmation
        // rests on a falsehood (a late correction must not be missed: the first gap).
        let stale = confirmation(vec![read(2, "v")], given("stale"));
        assert!(!stale.vouches_for(&read(2, "v"), &final_inputs));
        // A condition naming a transaction this node never committed (another partition set,
        // or one still running here) cannot be judged: the group-boundary case.
        let elsewhere = Confirmation {
            reads: vec![read(2, "v")],
            given: vec![(Timestamp(11), vec![read(1, "final")])],
        };
        assert!(!elsewhere.vouches_for(&read(2, "v"), &final_inputs));
        // No condition: the sender's prefix had no unconfirmed sibling values.
        let unconditional = confirmation(vec![read(2, "v")], Vec::new());
        assert!(unconditional.vouches_for(&read(2, "v"), &final_inputs));
    }
}
