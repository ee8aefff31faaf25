//! Single-version, lock-based two-phase commit: the engine `2pc-baseline`, `occ` and `2pl`
//! share. Each of them is this node state machine run under its own [`Flavor`]: the flavor
//! says where reads go, which locks are taken when, with which deadlock policy, and whether a
//! separate validation round follows the locking one. Everything else is common: coordinators
//! that execute reads one at a time and commit buffered writes, participants that lock, vote
//! and install, presumed-abort termination, the write-ahead log and recovery.
//!
//! # The common part
//!
//! * **One version per key.** A read returns the newest committed version of its key with the
//!   identity of that version (its writer); garbage collection keeps only the newest version.
//!   Writes are buffered by the client and shipped with the commit.
//! * **Two-phase commit.** At commit the coordinator sends `Prepare` to its participants; each
//!   locks what it must (waiting at most the flavor's lock timeout, or not at all under
//!   no-wait), checks what the flavor checks, logs its promise (`Record::Prepared`) and votes
//!   yes with a proposed timestamp above every version it applied (or no, and why). With every
//!   yes (and, for `occ`, every read validated) the coordinator decides to commit at the
//!   largest proposal, logs the decision until every write replica acknowledged (the 2PC kit's
//!   `DecisionLog`), answers its client and sends the decision; write replicas install at that
//!   timestamp and acknowledge; every participant releases its locks. One no, or silence for
//!   `participant_timeout`, aborts everywhere.
//! * **Every replica of a key written takes part**, locking it exclusively, so a key's versions
//!   are installed in the order of their commit timestamps at every replica (the checker may use
//!   them as evidence of version order).
//! * **Failures.** A participant logs each yes vote's prepare before the vote leaves and each
//!   outcome it applies; a restarted participant takes its prepared locks again and asks the
//!   coordinator (`QueryOutcome`), which answers from its decision log, says nothing while the
//!   transaction is still running there, and otherwise presumes abort. Locks not yet promised
//!   by a vote (waiting prepares, `2pl`'s shared locks of executing transactions) are lost in a
//!   crash; the flavors' rules make a transaction that lost one abort (see [`Locking`]). A
//!   prepare that arrives after its transaction ended at a participant is ignored for
//!   `gc_retention`.
//!
//! # The flavors
//!
//! See [`Locking`]; each protocol's module states what its paper defines and what augur chose.

use crate::common::coordinator::{
    ByReplica, InteractiveCoordinator, Pending, Reads, ReadsAt, serve_interactive,
};
use crate::common::lock_sets::{LockSets, reads_unchanged};
use crate::common::locks::Policy;
use crate::common::oracle::{Oracle, VectorOracle};
use crate::common::replica::{self, DecisionLog, ServeLease, TxnIds, Writes};
use crate::common::two_phase::GC_BATCH;
use crate::common::vclock::VClock;
use crate::registry::{INTERACTIVE_AND_ONE_SHOT, ProtocolInfo};
use crate::sss::{LOCK_TIMEOUT, parse_lock_timeout};
use crate::vts::{self, Deps, Outbox, Tags};
use augur_runtime::inbound::{BadMessage, CheckMessage, Inbound};
use augur_runtime::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientId, ClientReply, ClientRequest, Hybrid, Key, NodeId};
use augur_types::{RequestError, Timestamp, TxnId, Value};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::time::Duration;

/// When a flavor locks, what it checks, and where its reads go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locking {
    /// `2pc-baseline`: reads lock nothing and go to the nearest replica. At commit every
    /// replica of every key read or written locks it (shared for reads, exclusive for writes,
    /// [`Policy::Wait`] with the lock timeout breaking deadlocks) and, holding the locks,
    /// validates the reads by version identity.
    AtCommit,
    /// `occ`: reads lock nothing and go to the key's master. At commit, first every replica
    /// of every key written locks it exclusively ([`Policy::NoWait`]: a held lock is a
    /// conflict, and the vote is no); then, once all are locked, a second round asks the
    /// master of every key read whether it still has the version read and is not locked by
    /// another transaction. Validation holds nothing and logs nothing.
    Optimistic,
    /// `2pl`: a read takes a shared lock at the key's master before it returns the value, and
    /// keeps it until the outcome; writes (buffered by the client) take exclusive locks at
    /// every replica at commit, upgrading the shared ones of keys also read. Waits follow
    /// [`Policy::WaitDie`] on the transaction's begin time, bounded by the lock timeout. The
    /// prepare at a master the transaction read from checks that it still holds every shared
    /// lock it took there (a crash loses them, and then the vote is no).
    TwoPhase,
}

/// How a flavor commits a transaction declared read-only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadOnly {
    /// Like any other transaction: validated (`occ`, `2pc-baseline`) or locked (`2pl`).
    AsAnyOther,
    /// `rc`: its reads returned the newest committed versions and nothing checks them; it
    /// commits with no message. The same mechanism as the mutant `no-read-only-validation`,
    /// claimed honestly (read committed).
    Unvalidated,
}

/// Where commit timestamps come from, and what read-only transactions read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timestamping {
    /// One version is read: the newest. Each participant proposes a timestamp above every
    /// version it applied and the commit takes the largest; read-only transactions run as
    /// [`ReadOnly`] says.
    Single,
    /// DST's decentralized scalar timestamps (`dst-occ`, `dst-2pl`; the rules and why they
    /// are correct are in [`crate::dst_occ`]): hybrid commit timestamps above every tuple
    /// timestamp read or locked, installed into every tuple read and written; declared
    /// read-only transactions read a snapshot at a timestamp of their own, claiming each tuple
    /// and waiting for at most one writer, and commit with no message.
    Dst,
    /// GTS, a timestamp oracle (`gts`; the rules and why they are correct are in
    /// [`crate::gts`]): a read-write transaction fetches its commit timestamp from the oracle
    /// node once its write set is locked and before its reads are validated, and releases it
    /// at the oracle once every write replica applied it (or it aborted); declared read-only
    /// transactions fetch the oracle's stable timestamp at `Begin`, read the newest versions at
    /// or below it with no claim and no wait, and commit with no message.
    Gts,
    /// VTS, vector timestamps (`vts`; the rules and why are in [`crate::vts`]): a read-write
    /// transaction that writes tags its versions ⟨coordinator : LocalTS⟩ at its decision and,
    /// once every write replica applied it, installs the tag with the tags it read or
    /// overwrote at the oracle, which stabilises a vector; declared read-only transactions
    /// fetch that vector at `Begin`, read the newest versions it admits with no claim and no
    /// wait, and commit with no message.
    Vts,
}

/// What distinguishes one protocol built on this engine from another.
pub trait Flavor: Send + 'static {
    /// The protocol's registry entry (its mutants are the ones [`LockCommit`] accepts).
    const INFO: ProtocolInfo;
    const LOCKING: Locking;
    /// How read-only transactions commit (under [`Timestamping::Single`]).
    const READ_ONLY: ReadOnly = ReadOnly::AsAnyOther;
    /// Where commit timestamps come from.
    const TIMESTAMPS: Timestamping = Timestamping::Single;
    /// How long a lock request waits when the `lock_timeout` setting is not given (unused
    /// under [`Locking::Optimistic`], which never waits).
    const DEFAULT_LOCK_TIMEOUT: Duration;
}

/// The mutants the engine knows; a flavor offers those its [`ProtocolInfo`] lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    /// `2pc-baseline`: participants vote yes without validating. `occ`: no validation round.
    NoReadValidation,
    /// Read-only transactions commit once their reads returned, without locks or validation.
    NoReadOnlyValidation,
    /// `2pl`: a shared lock is released as soon as the read is served (not two-phase), and the
    /// prepare no longer asks for it.
    EarlyReadUnlock,
    /// DST: a read-only read returns the newest version at or below its timestamp with no claim
    /// and no wait.
    NoDepRead,
    /// DST: a read-only read claims but never waits for a writer.
    ClaimWithoutWait,
    /// DST: Fig. 9 as written: claim and wait only if the tuple timestamp was at or below the
    /// reader's timestamp before the claim.
    LiteralFig9Wait,
    /// DST: "≥" instead of "+1" above tuple and version timestamps.
    NoPlusOne,
    /// DST: RW2 installs the commit timestamp into the tuples written only.
    NoReadSetInstall,
    /// DST: an install sets the tuple timestamp to the commit timestamp instead of raising it.
    OverwriteTs,
    /// GTS: read-only transactions read at the last timestamp issued (`GlobalTS`), not at the
    /// stable one.
    ReadAtGlobalTs,
}

impl Mutant {
    fn named(name: &str) -> Option<Mutant> {
        match name {
            "no-read-validation" => Some(Mutant::NoReadValidation),
            "no-read-only-validation" => Some(Mutant::NoReadOnlyValidation),
            "early-read-unlock" => Some(Mutant::EarlyReadUnlock),
            "no-dep-read" => Some(Mutant::NoDepRead),
            "claim-without-wait" => Some(Mutant::ClaimWithoutWait),
            "literal-fig9-wait" => Some(Mutant::LiteralFig9Wait),
            "no-plus-one" => Some(Mutant::NoPlusOne),
            "no-read-set-install" => Some(Mutant::NoReadSetInstall),
            "overwrite-ts" => Some(Mutant::OverwriteTs),
            "read-at-global-ts" => Some(Mutant::ReadAtGlobalTs),
            _ => None,
        }
    }

    /// The mutant `name` if `info` offers it.
    fn offered(info: &ProtocolInfo, name: &str) -> Option<Mutant> {
        info.mutants
            .iter()
            .any(|(n, _)| *n == name)
            .then(|| Mutant::named(name))
            .flatten()
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Coordinator → a replica of `key` (`2pl`, `occ`: its master): the newest committed
    /// version. `prio` is the transaction's age for wait-die (its begin time). `snapshot`: a
    /// DST read-only read at that timestamp (claim, wait, read the newest version at or below).
    Read {
        txn: TxnId,
        seq: u32,
        key: Key,
        prio: Timestamp,
        snapshot: Option<Timestamp>,
    },
    /// Replica → coordinator: the value read, the writer of its version and the version's
    /// timestamp (DST's RW1 goes above it). VTS: `tag` is the version's counter (its node is
    /// the writer's coordinator; 0: none, or forgotten as visible to every snapshot).
    ReadReply {
        txn: TxnId,
        seq: u32,
        value: Option<Value>,
        version: Option<TxnId>,
        ts: Timestamp,
        tag: u64,
    },
    /// Master → coordinator (`2pl`): the read's shared lock was refused (wait-die) or not
    /// granted in time; the transaction must abort.
    ReadRefused {
        txn: TxnId,
        seq: u32,
        reason: AbortReason,
    },
    /// Coordinator → participants: lock (and, under `2pc-baseline`, validate), vote.
    Prepare {
        txn: TxnId,
        prio: Timestamp,
        reads: Reads,
        writes: Writes,
    },
    /// Participant → coordinator: yes with a proposed commit timestamp, or no and why. VTS:
    /// `deps` are the tags of the versions a yes overwrites.
    Vote {
        txn: TxnId,
        vote: Result<Timestamp, AbortReason>,
        deps: Deps,
    },
    /// Coordinator → the master of every key read (`occ`, after every lock is held): do these
    /// keys still have these versions, unlocked by others? Under DST `ts` is the commit
    /// timestamp, fixed before this round, which a valid key's tuple timestamp is raised to.
    Validate {
        txn: TxnId,
        reads: Reads,
        ts: Timestamp,
    },
    /// Master → coordinator: the answer to `Validate`, with a proposed timestamp.
    Validated {
        txn: TxnId,
        vote: Result<Timestamp, AbortReason>,
    },
    /// Coordinator → participants: commit at this timestamp, or abort (`None`). VTS: a commit
    /// that writes carries its tag's counter (0 otherwise).
    Decide {
        txn: TxnId,
        commit: Option<Timestamp>,
        tag: u64,
    },
    /// Write replica → coordinator: the commit is applied here.
    Applied { txn: TxnId },
    /// Participant → coordinator: what became of this transaction, prepared here long ago?
    QueryOutcome { txn: TxnId },
    /// DST, GTS, node → every node, every tenth tick: no read-only transaction this node coordinates,
    /// now or later, reads below `ts` (garbage collection keeps what they may read).
    Horizon { ts: Timestamp },
    /// GTS, coordinator → oracle, with the write set locked: a commit timestamp for `txn`.
    FetchTs { txn: TxnId },
    /// GTS, oracle → coordinator: `txn` commits at `ts` (pending at the oracle until released).
    IssuedTs { txn: TxnId, ts: Timestamp },
    /// GTS, coordinator → oracle: `txn` no longer holds `ts` (every write replica applied it,
    /// or it aborted).
    Done { txn: TxnId, ts: Timestamp },
    /// GTS, coordinator → oracle: the stable timestamp, for read-only `txn`'s snapshot.
    FetchStable { txn: TxnId },
    /// GTS, oracle → node: the stable timestamp, the answer to `txn`'s fetch (`None`: each
    /// tick's announcement to every node).
    Stable { txn: Option<TxnId>, ts: Timestamp },
    /// GTS, oracle → coordinator: `ts`, issued to `txn` long ago, is still pending; what became
    /// of it?
    QueryTs { txn: TxnId, ts: Timestamp },
    /// GTS, restarted oracle → node: which timestamps do your coordinators hold? Every
    /// timestamp issued before the restart is at or below `bound`. VTS: install every tag you
    /// still owe again (`bound` unused).
    AskHeld { bound: Timestamp },
    /// GTS, node → oracle: the transactions it coordinates that hold a timestamp.
    Held { held: Vec<(TxnId, Timestamp)> },
    /// VTS, coordinator → the master of `key`: a read-only read of the newest version visible
    /// at vector `at`.
    ReadAt {
        txn: TxnId,
        seq: u32,
        key: Key,
        at: VClock,
    },
    /// VTS, coordinator → oracle: `INSTALL(⟨sender:t⟩, deps)`, once every write replica
    /// applied the commit tagged so.
    Install { t: u64, deps: Deps },
    /// VTS, oracle → node: its tags up to `up_to` are stable (logged at the oracle first).
    Stabilized { up_to: u64 },
    /// VTS, oracle → node: `StableVTS`, the answer to `txn`'s `FetchStable` (`None`: an
    /// announcement).
    StableVector { txn: Option<TxnId>, at: VClock },
    /// VTS, node → every node: no read-only transaction this node coordinates, now or later,
    /// reads at a vector below `at` (garbage collection keeps what they may read).
    HorizonVector { at: VClock },
}

/// Reads, prepares and validations go to replicas of their keys from the transaction's
/// coordinator, which alone decides; answers go back to it.
impl Msg {
    /// The decision to abort `txn` (it also releases what a participant holds for it).
    fn abort(txn: TxnId) -> Msg {
        Msg::Decide {
            txn,
            commit: None,
            tag: 0,
        }
    }
}

impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            Msg::Read { txn, key, .. } => {
                at.txn_of_sender(*txn)?;
                at.key_here(key)
            }
            Msg::Prepare {
                txn, reads, writes, ..
            } => {
                at.txn_of_sender(*txn)?;
                reads.iter().try_for_each(|(key, _)| at.key_here(key))?;
                writes.iter().try_for_each(|(key, _)| at.key_here(key))
            }
            Msg::Validate { txn, reads, .. } => {
                at.txn_of_sender(*txn)?;
                reads.iter().try_for_each(|(key, _)| at.key_here(key))
            }
            // Vectors index by node: each must have one entry per node, deps name nodes.
            Msg::ReadAt {
                txn, key, at: v, ..
            } => {
                at.txn_of_sender(*txn)?;
                at.key_here(key)?;
                vts::check_vector(at, v)
            }
            Msg::Vote { txn, deps, .. } => {
                at.txn_here(*txn)?;
                deps.check(at)
            }
            Msg::Install { deps, .. } => deps.check(at),
            Msg::StableVector { txn, at: v } => {
                txn.map_or(Ok(()), |txn| at.txn_here(txn))?;
                vts::check_vector(at, v)
            }
            Msg::HorizonVector { at: v } => vts::check_vector(at, v),
            // Any counter is one the oracle may have stabilised.
            Msg::Stabilized { .. } => Ok(()),
            Msg::Decide { txn, .. }
            | Msg::FetchTs { txn }
            | Msg::Done { txn, .. }
            | Msg::FetchStable { txn } => at.txn_of_sender(*txn),
            Msg::Held { held } => held.iter().try_for_each(|(txn, _)| at.txn_of_sender(*txn)),
            Msg::IssuedTs { txn, .. } | Msg::QueryTs { txn, .. } => at.txn_here(*txn),
            Msg::Stable { txn, .. } => txn.map_or(Ok(()), |txn| at.txn_here(txn)),
            // Any bound is one a restarted oracle may announce.
            Msg::AskHeld { .. } => Ok(()),
            Msg::ReadReply { txn, .. }
            | Msg::ReadRefused { txn, .. }
            | Msg::Validated { txn, .. }
            | Msg::Applied { txn }
            | Msg::QueryOutcome { txn } => at.txn_here(*txn),
            // Any timestamp is a lower bound some node may announce.
            Msg::Horizon { .. } => Ok(()),
        }
    }
}

#[derive(Debug)]
pub enum Timer {
    /// Periodic: termination queries, idle transactions, garbage collection.
    Tick,
    /// A coordinator's read `seq` of a transaction got no answer in time.
    Read(TxnId, u32),
    /// A coordinator's votes (and validations) did not all arrive in time.
    Votes(TxnId),
    /// A participant did not get its prepare's locks in time.
    Locks(TxnId),
    /// A master did not get read `seq`'s shared lock in time (`2pl`).
    ReadLock(TxnId, u32),
    /// GTS: a read-only transaction's stable timestamp did not arrive in time.
    Stable(TxnId),
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
    /// VTS's tags, owed installs and stable vector ([`vts::Record`]).
    Vts(vts::Record),
}

impl From<replica::Record<Timestamp>> for Record {
    fn from(record: replica::Record<Timestamp>) -> Record {
        Record::Kit(record)
    }
}

impl From<vts::Record> for Record {
    fn from(record: vts::Record) -> Record {
        Record::Vts(record)
    }
}

/// Counters `augur bench` reads (see [`Protocol::counters`]).
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    lock_waits: u64,
    lock_timeouts: u64,
    /// Lock requests refused by the policy (no-wait conflicts, wait-die deaths).
    lock_refusals: u64,
    validation_failures: u64,
    read_only_committed: u64,
    read_only_aborted: u64,
    /// DST: read-only reads that waited for a writer.
    snapshot_read_waits: u64,
    /// DST: read-only reads that raised a tuple timestamp.
    claims: u64,
    /// DST: claim ceilings persisted.
    ceiling_writes: u64,
    /// DST: how far the garbage-collection horizon was behind the clock at the last tick, µs.
    gc_horizon_lag_us: u64,
    /// GTS: commit timestamps fetched from the oracle.
    ts_fetches: u64,
    /// GTS, VTS: stable timestamps (vectors) fetched from the oracle.
    stable_fetches: u64,
    /// VTS: installs sent to the oracle (resends included).
    installs: u64,
}

/// A transaction this node coordinates.
struct Coord {
    client: ClientId,
    read_only: bool,
    /// Its age under wait-die: the begin time here.
    prio: Timestamp,
    /// DST: a read-only transaction's read timestamp; a read-write one's lower bound on its
    /// commit timestamp so far (its begin time, above every version read). GTS: a read-only
    /// transaction's snapshot (zero until the stable timestamp arrives).
    ts: Timestamp,
    /// GTS: a read-only transaction waiting at `Begin` for the oracle's stable timestamp.
    awaiting_stable: bool,
    /// GTS: the commit timestamp the oracle issued (held until released).
    fetched: Option<Timestamp>,
    /// VTS: a read-write transaction's deps so far; a read-only one's vector (once fetched).
    deps: Deps,
    vector: Option<VClock>,
    reads: Reads,
    /// Nodes a read was sent to that may hold a lock of it (`2pl`): told of an abort.
    read_nodes: BTreeSet<NodeId>,
    pending: Option<Pending>,
    read_seq: u32,
    /// The key being read.
    reading: Option<Key>,
    last_active: Timestamp,
    phase: Phase,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Round {
    /// Collecting the participants' votes.
    Prepare,
    /// `occ`: collecting the masters' validations of the reads.
    Validate,
    /// GTS: waiting for the oracle's commit timestamp, every lock held, nothing validated yet.
    Fetch,
}

enum Phase {
    Executing,
    Voting {
        round: Round,
        /// The nodes that prepared (and are told the outcome).
        participants: Vec<NodeId>,
        waiting: BTreeSet<NodeId>,
        write_replicas: Vec<NodeId>,
        /// The largest proposal so far.
        commit_ts: Timestamp,
        /// The reads the validation round checks once every vote is in (`occ`).
        to_validate: Reads,
    },
}

/// A transaction with locks, or asking for them, at this participant.
struct Participant {
    reads: Reads,
    writes: Writes,
    /// Its prepare arrived. Under `2pl` a participant exists from its first read.
    preparing: bool,
    voted: bool,
    /// A read waiting for its shared lock (`2pl`).
    waiting_read: Option<(u32, Key)>,
    /// When its outcome was last asked for (or its latest read or vote, before the first time).
    last_query: Timestamp,
    /// DST: a lower bound on its commit timestamp, computed when it took its exclusive locks
    /// here (zero until then, and for one recovered from the log: readers wait for it).
    floor: Timestamp,
}

impl Participant {
    fn new(now: Timestamp) -> Participant {
        Participant {
            reads: Vec::new(),
            writes: Vec::new(),
            preparing: false,
            voted: false,
            waiting_read: None,
            last_query: now,
            floor: Timestamp::ZERO,
        }
    }
}

/// A DST read-only read waiting at a master for a writer to release the key.
struct SnapshotRead {
    txn: TxnId,
    seq: u32,
    key: Key,
    snapshot: Timestamp,
}

/// The setting of DST's read staleness δ (§5.4): read-only transactions read at `now − δ`.
pub const READ_STALENESS: &str = "read_staleness_ms";

/// The setting of DST's session rule (§6): `on` starts each transaction of a client at or
/// above the largest commit timestamp this coordinator told it, so a client reads its own
/// writes and never goes back in time (session serializability).
pub const SESSION: &str = "session";

/// The values [`READ_STALENESS`] accepts, in milliseconds.
pub const READ_STALENESS_VALUES: &[&str] = &["0", "1", "5", "10", "20", "50", "100", "200", "500"];

/// The setting naming GTS's oracle node (a node id of the cluster; node 0 when not given).
pub const ORACLE: &str = "oracle";

/// How far past a claim, in clock time, a DST node's durable claim ceiling is raised at a
/// time: at most one log record per this much, and after a restart writers start at most this
/// far above the last claim.
pub const CLAIM_SLACK: Duration = Duration::from_millis(50);

/// One node running a protocol of flavor `F`.
pub struct LockCommit<F> {
    env: NodeEnv,
    mutant: Option<Mutant>,
    lock_timeout: Duration,
    /// One committed version per key (older ones wait for garbage collection; DST keeps those
    /// a read-only transaction may still read). The metadata is DST's tuple read timestamp
    /// (`rts`: the highest claim or read-set install); the newest version's timestamp is the
    /// tuple's write timestamp.
    store: MvStore<Timestamp>,
    /// Above the timestamp of every version applied here: proposals exceed it.
    clock: Timestamp,
    locks: LockSets<Timestamp>,
    participants: FxHashMap<TxnId, Participant>,
    /// Transactions that ended at this participant, with when, so a late prepare is ignored.
    ended: FxHashMap<TxnId, Timestamp>,
    coord: FxHashMap<TxnId, Coord>,
    ids: TxnIds,
    decided: DecisionLog<Timestamp>,
    /// Wait-die's rule that a transaction restarts with its original age, per client: the
    /// begin time of each client's oldest attempt since its last commit (`2pl`; volatile).
    ages: FxHashMap<ClientId, Timestamp>,
    counters: Counters,
    /// DST: the durable claim ceiling: no tuple timestamp here exceeds it, and after a restart
    /// every new writer's timestamp exceeds the recovered one.
    ceiling: ServeLease,
    /// DST: read staleness δ.
    staleness: Duration,
    /// DST with the session rule (§6): per client, the largest commit timestamp this
    /// coordinator told it. Volatile: a restarted coordinator no longer knows its clients'
    /// floors (the paper keeps them in the session, and a client that moves to another
    /// coordinator loses them too).
    sessions: Option<FxHashMap<ClientId, Timestamp>>,
    /// DST: read-only reads waiting for a writer, by the writer.
    snapshot_reads: FxHashMap<TxnId, Vec<SnapshotRead>>,
    /// DST, GTS: the latest read horizon each node announced.
    horizons: FxHashMap<NodeId, Timestamp>,
    /// GTS: the oracle node (the `oracle` setting).
    oracle_id: NodeId,
    /// GTS: the oracle's state, at the oracle node only.
    oracle: Option<Oracle>,
    /// GTS: the largest stable timestamp this node has heard of; no read-only transaction it
    /// coordinates from now on reads below it.
    stable_seen: Timestamp,
    /// GTS: timestamps at or below this were issued by an oracle incarnation that has since
    /// restarted and been told what this node holds; one arriving now is refused.
    oracle_floor: Timestamp,
    /// VTS: the counter of each writer whose versions this node stores.
    tags: Tags,
    /// VTS: this coordinator's `LocalTS` and the tags it owes the oracle.
    outbox: Outbox,
    /// VTS: the oracle's state, at the oracle node only.
    vector_oracle: Option<VectorOracle>,
    /// VTS: the largest stable vector this node has heard of; no read-only transaction it
    /// coordinates from now on reads below it.
    stable_vector: VClock,
    /// VTS: the largest read horizon each node announced.
    horizon_vectors: FxHashMap<NodeId, VClock>,
    /// Ticks since the start: announcements go every [`ANNOUNCE_EVERY`]th.
    ticks: u64,
    flavor: PhantomData<fn() -> F>,
}

/// Read horizons (DST, GTS, VTS) and the oracle's stable timestamp or vector (GTS, VTS) are
/// announced every this many ticks, not every tick: at 31 nodes, every tick made about 18,000
/// messages a second. An older announcement is still a valid lower bound (horizons and stable
/// values only rise), so announcing less often only delays garbage collection.
pub const ANNOUNCE_EVERY: u64 = 10;

impl<F: Flavor> LockCommit<F> {
    /// Whether this flavor runs DST's timestamps.
    const DST: bool = matches!(F::TIMESTAMPS, Timestamping::Dst);
    /// Whether this flavor runs GTS's oracle.
    const GTS: bool = matches!(F::TIMESTAMPS, Timestamping::Gts);
    /// Whether this flavor runs VTS's vector timestamps.
    const VTS: bool = matches!(F::TIMESTAMPS, Timestamping::Vts);
    /// Whether declared read-only transactions read a snapshot (DST, GTS, VTS).
    const SNAPSHOTS: bool = Self::DST || Self::GTS || Self::VTS;
    /// Whether declared read-only transactions wait at `Begin` for the oracle (GTS, VTS).
    const FETCHES_STABLE: bool = Self::GTS || Self::VTS;

    /// The newest committed version of `key` here: its value and writer.
    pub fn latest(&self, key: &Key) -> Option<(TxnId, Option<Value>)> {
        let v = self.store.get(key)?.latest_committed()?;
        Some((v.writer, v.value.clone()))
    }

    /// How many committed versions of `key` this node keeps (DST keeps those a read-only
    /// transaction may still read).
    pub fn versions_kept(&self, key: &Key) -> usize {
        self.store.get(key).map_or(0, |e| e.version_count())
    }

    /// DST: `key`'s tuple read timestamp here (zero for a key never claimed or read).
    pub fn read_timestamp_of(&self, key: &Key) -> Timestamp {
        self.store.get(key).map_or(Timestamp::ZERO, |e| e.meta)
    }

    /// GTS: the oracle's state, at the oracle node.
    pub fn oracle(&self) -> Option<&Oracle> {
        self.oracle.as_ref()
    }

    /// VTS: the oracle's state, at the oracle node.
    pub fn vector_oracle(&self) -> Option<&VectorOracle> {
        self.vector_oracle.as_ref()
    }

    /// VTS: the tag ⟨node : counter⟩ of `key`'s newest committed version here (counter 0: it
    /// has none, or it was forgotten as visible to every snapshot).
    pub fn tag_of(&self, key: &Key) -> Option<(NodeId, u64)> {
        let v = self.store.get(key)?.latest_committed()?;
        Some((v.writer.coordinator(), self.tags.of(v.writer)))
    }

    /// VTS: how many tags this coordinator still owes the oracle.
    pub fn tags_owed(&self) -> usize {
        self.outbox.len()
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
            Msg::Read {
                txn,
                seq,
                key,
                prio,
                snapshot: None,
            } => self.serve_read(ctx, txn, seq, key, prio),
            Msg::Read {
                txn,
                seq,
                key,
                snapshot: Some(snapshot),
                ..
            } if Self::GTS => {
                // Every version at or below a stable timestamp is installed here already.
                let read = SnapshotRead {
                    txn,
                    seq,
                    key,
                    snapshot,
                };
                self.answer_snapshot_read(ctx, read)
            }
            Msg::Read {
                txn,
                seq,
                key,
                snapshot: Some(snapshot),
                ..
            } => self.serve_snapshot_read(ctx, txn, seq, key, snapshot),
            Msg::ReadAt { txn, seq, key, at } => self.answer_read_at(ctx, txn, seq, key, &at),
            Msg::ReadReply {
                txn,
                seq,
                value,
                version,
                ts,
                tag,
            } => self.read_reply(ctx, txn, seq, value, (version, ts, tag)),
            Msg::ReadRefused { txn, seq, reason } => self.read_refused(ctx, txn, seq, reason),
            Msg::Prepare {
                txn,
                prio,
                reads,
                writes,
            } => self.prepare(ctx, txn, prio, reads, writes),
            Msg::Vote { txn, vote, deps } => {
                self.vote(ctx, from, txn, Round::Prepare, vote.map(|ts| (ts, deps)))
            }
            Msg::Validate { txn, reads, ts } => self.validate(ctx, txn, reads, ts),
            Msg::Validated { txn, vote } => {
                let vote = vote.map(|ts| (ts, Deps::new()));
                self.vote(ctx, from, txn, Round::Validate, vote)
            }
            Msg::Decide { txn, commit, tag } => self.on_decide(ctx, txn, commit, tag),
            Msg::Applied { txn } => {
                let kept = self.decided.get(&txn).copied();
                self.decided.acknowledge(ctx, txn, from);
                if let Some(ts) = kept.filter(|_| self.decided.get(&txn).is_none()) {
                    self.applied_everywhere(ctx, txn, ts);
                }
            }
            Msg::QueryOutcome { txn } => self.query_outcome(ctx, from, txn),
            Msg::Horizon { ts } => {
                let latest = self.horizons.entry(from).or_insert(ts);
                *latest = (*latest).max(ts);
            }
            Msg::HorizonVector { at } => {
                let latest = self.horizon_vectors.entry(from).or_insert(at.clone());
                latest.merge(&at);
            }
            Msg::Install { t, deps } => self.oracle_install(ctx, from, t, deps),
            Msg::FetchTs { txn } => {
                if let Some(oracle) = self.oracle.as_mut() {
                    let ts = oracle.issue(ctx, txn);
                    self.deliver(ctx, txn.coordinator(), Msg::IssuedTs { txn, ts });
                }
            }
            Msg::Done { txn, ts } => {
                if let Some(oracle) = self.oracle.as_mut() {
                    oracle.release(txn, ts);
                }
            }
            Msg::FetchStable { txn } if Self::VTS => {
                if let Some(oracle) = self.vector_oracle.as_mut() {
                    let at = oracle.publish(ctx);
                    let msg = Msg::StableVector { txn: Some(txn), at };
                    self.deliver(ctx, txn.coordinator(), msg);
                }
            }
            Msg::FetchStable { txn } => {
                let global = self.mutant == Some(Mutant::ReadAtGlobalTs);
                if let Some(oracle) = self.oracle.as_mut() {
                    let ts = if global {
                        oracle.last_issued()
                    } else {
                        oracle.publish(ctx)
                    };
                    let msg = Msg::Stable { txn: Some(txn), ts };
                    self.deliver(ctx, txn.coordinator(), msg);
                }
            }
            Msg::Held { held } => {
                let now = ctx.now();
                if let Some(oracle) = self.oracle.as_mut() {
                    oracle.held(now, from, &held);
                }
            }
            // From the oracle only (a node that is not takes no part in its bookkeeping).
            _ if from != self.oracle_id => {}
            Msg::IssuedTs { txn, ts } => self.issued(ctx, txn, ts),
            Msg::Stable { txn, ts } => self.stable_arrived(ctx, txn, ts),
            Msg::QueryTs { txn, ts } => self.query_ts(ctx, txn, ts),
            Msg::AskHeld { .. } if Self::VTS => self.install_owed(ctx, Duration::ZERO),
            Msg::AskHeld { bound } => self.ask_held(ctx, bound),
            Msg::Stabilized { up_to } => self.outbox.stabilized(up_to),
            Msg::StableVector { txn, at } => self.stable_vector_arrived(ctx, txn, at),
        }
    }

    // ----- VTS -----

    /// VTS: a read-only read at the master of `key`: the newest version visible at `at`.
    fn answer_read_at(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        seq: u32,
        key: Key,
        at: &VClock,
    ) {
        ctx.charge(Work::reads(1));
        let tags = &self.tags;
        let version = self
            .store
            .get(&key)
            .and_then(|e| e.read_where(|v| tags.visible(v, at)));
        let msg = Msg::ReadReply {
            txn,
            seq,
            value: version.and_then(|v| v.value.clone()),
            version: version.map(|v| v.writer),
            ts: version.map_or(Timestamp::ZERO, |v| v.ts),
            tag: version.map_or(0, |v| tags.of(v.writer)),
        };
        self.deliver(ctx, txn.coordinator(), msg);
    }

    /// VTS, at a write replica voting yes: the tags of the versions `writes` overwrite.
    fn overwritten_deps(&self, writes: &Writes) -> Deps {
        let mut deps = Deps::new();
        for (key, _) in writes {
            if let Some(v) = self.store.get(key).and_then(|e| e.latest_committed()) {
                deps.add(v.writer.coordinator(), self.tags.of(v.writer));
            }
        }
        deps
    }

    /// VTS, at the decision of `txn`, which wrote: its tag, logged with its deps before the
    /// decision (a torn log keeps at worst a tag that no version carries).
    fn assign_tag(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, deps: Deps) -> u64 {
        let t = self.outbox.assign(txn, deps.clone(), ctx.now());
        ctx.persist(vts::Record::Tagged { txn, t, deps }.into());
        t
    }

    /// Every write replica applied `txn`'s commit at `ts`: GTS releases the timestamp, VTS
    /// installs the tag.
    fn applied_everywhere(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, ts: Timestamp) {
        if Self::GTS {
            self.release_ts(ctx, txn, ts);
        } else if Self::VTS {
            self.install_tag(ctx, txn);
        }
    }

    /// VTS: `txn`'s commit is applied everywhere: install its tag, if one is owed.
    fn install_tag(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if let Some((t, deps)) = self.outbox.applied(txn, ctx.now()) {
            self.send_install(ctx, t, deps);
        }
    }

    fn send_install(&mut self, ctx: &mut Ctx<'_, Self>, t: u64, deps: Deps) {
        self.counters.installs += 1;
        let oracle = self.oracle_id;
        self.deliver(ctx, oracle, Msg::Install { t, deps });
    }

    /// VTS: act on the tags owed the oracle and not sent for `patience`: install the applied
    /// ones again, send the others' decision again to the write replicas that have not
    /// acknowledged it (see [`crate::vts`], "Failures").
    fn install_owed(&mut self, ctx: &mut Ctx<'_, Self>, patience: Duration) {
        for due in self.outbox.overdue(ctx.now(), patience) {
            match due {
                Ok((t, deps)) => self.send_install(ctx, t, deps),
                Err(txn) => {
                    let unapplied = self
                        .decided
                        .iter()
                        .find(|(t, _, _)| **t == txn)
                        .map(|(_, commit, replicas)| (*commit, replicas.to_vec()));
                    let Some((commit, replicas)) = unapplied else {
                        self.install_tag(ctx, txn);
                        continue;
                    };
                    let tag = self.outbox.tag_of(txn);
                    for node in replicas {
                        let commit = Some(commit);
                        self.deliver(ctx, node, Msg::Decide { txn, commit, tag });
                    }
                }
            }
        }
    }

    /// VTS, at the oracle: `INSTALL(⟨from:t⟩, deps)`. One stable already is acknowledged again
    /// (as far as logged); otherwise the tick tells `from` once it is stable and logged.
    fn oracle_install(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, t: u64, deps: Deps) {
        let Some(oracle) = self.vector_oracle.as_mut() else {
            return;
        };
        if oracle.install(from, t, deps) {
            oracle.stabilize();
        } else if let Some(up_to) = oracle.logged_of(from).filter(|up_to| t <= *up_to) {
            self.deliver(ctx, from, Msg::Stabilized { up_to });
        }
    }

    /// VTS: a stable vector arrived (for read-only `txn`'s `Begin`, or announced): a waiting
    /// `Begin` reads at the largest stable vector heard of here, which only rises.
    fn stable_vector_arrived(&mut self, ctx: &mut Ctx<'_, Self>, txn: Option<TxnId>, at: VClock) {
        self.stable_vector.merge(&at);
        let vector = self.stable_vector.clone();
        let Some(t) = txn.and_then(|txn| self.coord.get_mut(&txn)) else {
            return;
        };
        if !t.awaiting_stable {
            return;
        }
        t.awaiting_stable = false;
        // The snapshot is a vector; as `walter`'s, the time it was fixed stands in for the
        // client (and is the read-only commit's timestamp).
        let snapshot = ctx.now();
        t.ts = snapshot;
        t.vector = Some(vector);
        t.last_active = ctx.now();
        let txn = txn.expect("found above");
        if let Some(pending) = t.pending.take() {
            pending.answer(ctx, ClientReply::Begun { txn, snapshot });
        }
    }

    /// VTS, each tick: the coordinator's overdue duties; at the oracle, log the stable vector
    /// if it moved, tell the workers how far their tags are stable, ask every node to install
    /// again after a restart, and, when `announce`, announce the vector to every node.
    fn vts_tick(&mut self, ctx: &mut Ctx<'_, Self>, announce: bool) {
        let patience = self.env.options.participant_timeout;
        self.install_owed(ctx, patience);
        let Some(oracle) = self.vector_oracle.as_mut() else {
            return;
        };
        let ask = oracle.take_restart();
        let stable = oracle.publish(ctx);
        let tell = oracle.to_tell();
        for (node, up_to) in tell {
            self.deliver(ctx, node, Msg::Stabilized { up_to });
        }
        let nodes: Vec<NodeId> = self.env.placement.nodes().collect();
        if ask {
            for &node in &nodes {
                let bound = Timestamp::ZERO;
                self.deliver(ctx, node, Msg::AskHeld { bound });
            }
        }
        if announce {
            for node in nodes {
                let at = stable.clone();
                self.deliver(ctx, node, Msg::StableVector { txn: None, at });
            }
        }
    }

    /// VTS's garbage collection (see [`crate::vts`]): this node's horizon is the
    /// component-wise minimum of its running read-only transactions' vectors and the largest
    /// stable vector heard of here; announced when `announce`; at each key, keep from the
    /// newest version visible at the minimum of every node's horizon (none from some node yet:
    /// keep everything), and forget the tags visible there.
    fn collect_below_vector_horizon(&mut self, ctx: &mut Ctx<'_, Self>, announce: bool) {
        let me = self.id();
        let mut mine = self.stable_vector.clone();
        for v in self.coord.values().filter_map(|t| t.vector.as_ref()) {
            mine.meet(v);
        }
        let latest = self.horizon_vectors.entry(me).or_insert(mine.clone());
        latest.merge(&mine);
        let nodes: Vec<NodeId> = self.env.placement.nodes().collect();
        if announce {
            for &node in nodes.iter().filter(|n| **n != me) {
                ctx.send(node, Msg::HorizonVector { at: mine.clone() });
            }
        }
        let mut horizon = mine;
        for node in &nodes {
            match self.horizon_vectors.get(node) {
                Some(v) => horizon.meet(v),
                None => return,
            }
        }
        let tags = &self.tags;
        self.store
            .collect_garbage_where(GC_BATCH, |v| tags.visible(v, &horizon));
        if announce {
            self.tags.prune(&horizon);
        }
    }

    // ----- GTS: the oracle's clients -----

    /// GTS: `txn` no longer holds `ts`; tell the oracle.
    fn release_ts(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, ts: Timestamp) {
        if Self::GTS {
            let oracle = self.oracle_id;
            self.deliver(ctx, oracle, Msg::Done { txn, ts });
        }
    }

    /// GTS: the oracle issued `ts` to `txn`. A transaction waiting for it validates and
    /// decides at `ts`; one that is not (it aborted, or the reply repeats) releases it; one
    /// from an oracle incarnation this node already told what it holds is refused (the
    /// restarted oracle does not count it pending), and its transaction aborts.
    fn issued(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, ts: Timestamp) {
        let stale = ts <= self.oracle_floor;
        let Some(t) = self.coord.get_mut(&txn) else {
            return self.release_ts(ctx, txn, ts);
        };
        if t.fetched == Some(ts) {
            return;
        }
        let Phase::Voting {
            round, commit_ts, ..
        } = &mut t.phase
        else {
            return self.release_ts(ctx, txn, ts);
        };
        if *round != Round::Fetch || t.fetched.is_some() {
            return self.release_ts(ctx, txn, ts);
        }
        if stale {
            return self.abort(ctx, txn, AbortReason::Timeout);
        }
        t.fetched = Some(ts);
        *commit_ts = ts;
        *round = Round::Prepare;
        self.validate_or_decide(ctx, txn);
    }

    /// GTS: the stable timestamp `ts` arrived (for read-only `txn`'s `Begin`, or announced):
    /// a waiting `Begin` reads at the largest stable timestamp heard of here, which only rises.
    fn stable_arrived(&mut self, ctx: &mut Ctx<'_, Self>, txn: Option<TxnId>, ts: Timestamp) {
        self.stable_seen = self.stable_seen.max(ts);
        let snapshot = self.stable_seen;
        let Some(t) = txn.and_then(|txn| self.coord.get_mut(&txn)) else {
            return;
        };
        if !t.awaiting_stable {
            return;
        }
        t.awaiting_stable = false;
        t.ts = snapshot;
        t.last_active = ctx.now();
        let txn = txn.expect("found above");
        if let Some(pending) = t.pending.take() {
            pending.answer(ctx, ClientReply::Begun { txn, snapshot });
        }
    }

    /// GTS: the oracle asks what became of `ts`, issued to `txn`. Nothing while `txn` runs
    /// here with it (or waits for it); while its commit is not applied everywhere, the
    /// decision goes again to the write replicas that have not acknowledged it (their
    /// acknowledgements release it); otherwise it is released.
    fn query_ts(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, ts: Timestamp) {
        if let Some(t) = self.coord.get(&txn)
            && t.fetched.is_none_or(|held| held == ts)
        {
            return;
        }
        let unapplied = self
            .decided
            .iter()
            .find(|(t, _, _)| **t == txn)
            .map(|(_, commit, replicas)| (*commit, replicas.to_vec()));
        match unapplied {
            Some((commit, replicas)) => {
                for node in replicas {
                    let commit = Some(commit);
                    self.deliver(
                        ctx,
                        node,
                        Msg::Decide {
                            txn,
                            commit,
                            tag: 0,
                        },
                    );
                }
            }
            None => self.release_ts(ctx, txn, ts),
        }
    }

    /// GTS: a restarted oracle asks which timestamps this node's coordinators hold: those of
    /// its running transactions, and of its commits not yet applied everywhere. From now on
    /// a timestamp at or below `bound` (issued before that restart) is refused.
    fn ask_held(&mut self, ctx: &mut Ctx<'_, Self>, bound: Timestamp) {
        self.oracle_floor = self.oracle_floor.max(bound);
        let mut held: Vec<(TxnId, Timestamp)> = self
            .coord
            .iter()
            .filter_map(|(txn, t)| t.fetched.map(|ts| (*txn, ts)))
            .chain(self.decided.iter().map(|(txn, ts, _)| (*txn, *ts)))
            .collect();
        held.sort();
        let oracle = self.oracle_id;
        self.deliver(ctx, oracle, Msg::Held { held });
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

    /// A read's answer: the value and `(writer, timestamp, tag)` of the version read.
    fn read_reply(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        seq: u32,
        value: Option<Value>,
        (version, ts, tag): (Option<TxnId>, Timestamp, u64),
    ) {
        let plus_one = self.mutant != Some(Mutant::NoPlusOne);
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        if t.read_seq != seq || !matches!(t.phase, Phase::Executing) || t.pending.is_none() {
            return;
        }
        let key = t.reading.take().expect("a pending read names its key");
        let snapshot_read = Self::SNAPSHOTS && t.read_only;
        if Self::DST && !t.read_only {
            // RW1: the commit timestamp goes above every version read.
            let above = if plus_one { ts.next() } else { ts };
            t.ts = t.ts.max(above);
        }
        if Self::VTS
            && !t.read_only
            && let Some(writer) = version
        {
            // Fig. 4 READ:3: the version read is a dependency.
            t.deps.add(writer.coordinator(), tag);
        }
        // Under 2PL a key read twice returns one version while the shared lock is held; a
        // second one means the master lost the lock in a crash and a writer got in.
        let lost_lock = F::LOCKING == Locking::TwoPhase
            && !snapshot_read
            && t.reads.iter().any(|(k, v)| *k == key && *v != version);
        if lost_lock {
            return self.abort(ctx, txn, AbortReason::ValidationFailed);
        }
        let pending = t.pending.take().expect("checked above");
        t.last_active = ctx.now();
        t.reads.push((key, version));
        pending.answer(ctx, ClientReply::Value(value));
    }

    fn read_refused(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, seq: u32, reason: AbortReason) {
        let waiting = self.coord.get(&txn).is_some_and(|t| {
            t.read_seq == seq && t.reading.is_some() && matches!(t.phase, Phase::Executing)
        });
        if waiting {
            self.abort(ctx, txn, reason);
        }
    }

    /// Abort `txn`, coordinated here: tell every node that may hold a lock of it, answer the
    /// client.
    fn abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        let Some(t) = self.coord.remove(&txn) else {
            return;
        };
        if t.read_only {
            self.counters.read_only_aborted += 1;
        }
        let mut told = t.read_nodes;
        if let Phase::Voting { participants, .. } = t.phase {
            told.extend(participants);
        }
        for node in told {
            self.deliver(ctx, node, Msg::abort(txn));
        }
        // GTS: an abort after the fetch releases the timestamp, or stable stalls behind it.
        if let Some(ts) = t.fetched {
            self.release_ts(ctx, txn, ts);
        }
        if let Some(pending) = t.pending {
            pending.answer(ctx, ClientReply::Aborted(reason));
        }
    }

    /// A vote (`Round::Prepare`) or a validation (`Round::Validate`) from `from`.
    fn vote(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        of: Round,
        vote: Result<(Timestamp, Deps), AbortReason>,
    ) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        let Phase::Voting {
            round,
            waiting,
            commit_ts,
            ..
        } = &mut t.phase
        else {
            return;
        };
        if *round != of || !waiting.contains(&from) {
            return;
        }
        match vote {
            Err(reason) => return self.abort(ctx, txn, reason),
            Ok((ts, deps)) => {
                waiting.remove(&from);
                // VTS (Fig. 4 WRITE:3): the versions overwritten are dependencies.
                t.deps.merge(&deps);
                // GTS: the oracle's timestamp is the commit timestamp; proposals are ignored.
                if !Self::GTS {
                    *commit_ts = (*commit_ts).max(ts);
                }
            }
        }
        if !waiting.is_empty() {
            return;
        }
        match of {
            Round::Prepare => self.validate_or_decide(ctx, txn),
            Round::Validate => self.decide(ctx, txn),
            // The oracle's answer is not a vote (`issued`).
            Round::Fetch => {}
        }
    }

    /// Every participant voted yes: under GTS fetch the commit timestamp first (inside the
    /// critical section: every write lock held, no read validated yet, trap T-9); then validate
    /// the reads left to validate (`occ`), or decide.
    fn validate_or_decide(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if Self::GTS
            && let Some(t) = self.coord.get_mut(&txn)
            && t.fetched.is_none()
            && let Phase::Voting { round, .. } = &mut t.phase
        {
            *round = Round::Fetch;
            self.counters.ts_fetches += 1;
            let oracle = self.oracle_id;
            return self.deliver(ctx, oracle, Msg::FetchTs { txn });
        }
        let placement = self.env.placement.clone();
        let Some(Phase::Voting {
            round,
            waiting,
            to_validate,
            commit_ts,
            ..
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        if to_validate.is_empty() {
            return self.decide(ctx, txn);
        }
        // DST (T-4): the commit timestamp is fixed here, before any validation, and each
        // validation installs it; the validations answer with it, so it does not move.
        let ts = *commit_ts;
        let reads = std::mem::take(to_validate);
        let by_master = ByReplica::group_reads_at(&placement, ReadsAt::Master, &reads, Vec::new());
        *round = Round::Validate;
        *waiting = by_master.parts.keys().copied().collect();
        for (node, (reads, _)) in by_master.parts {
            self.deliver(ctx, node, Msg::Validate { txn, reads, ts });
        }
    }

    /// Every participant voted yes (and every read validated): log the commit (until every
    /// write replica applied it), answer the client, tell the participants.
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
        // VTS: a commit that writes is tagged here (logged before the decision).
        let tag = if Self::VTS && !write_replicas.is_empty() {
            self.assign_tag(ctx, txn, t.deps)
        } else {
            0
        };
        // This node's own participant applies within this handler, after the decision's
        // record: it needs no acknowledgement.
        let others = write_replicas.into_iter().filter(|n| *n != me).collect();
        self.decided.decide(ctx, txn, commit_ts, others);
        if t.read_only {
            self.counters.read_only_committed += 1;
        }
        self.ages.remove(&t.client);
        self.told_commit(t.client, commit_ts);
        // The runtime holds the answer until the decision is durable.
        if let Some(pending) = t.pending {
            pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
        for node in participants {
            let commit = Some(commit_ts);
            self.deliver(ctx, node, Msg::Decide { txn, commit, tag });
        }
        // GTS, VTS: with no other write replica to hear from, the commit is applied everywhere
        // now (this node's participant applied it above); otherwise the last `Applied` releases
        // (installs) it.
        if (t.fetched.is_some() || tag > 0) && self.decided.get(&txn).is_none() {
            self.applied_everywhere(ctx, txn, commit_ts);
        }
    }

    /// A participant asks what became of `txn` (see the module docs, "Failures").
    fn query_outcome(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId) {
        // Still running here: its decision, or its abort, will come.
        let running = self.coord.contains_key(&txn);
        if let Some(commit) = replica::outcome(&self.decided, txn, running) {
            // VTS: a commit still to be applied somewhere is owed the oracle, with its tag.
            let tag = self.outbox.tag_of(txn);
            self.deliver(ctx, from, Msg::Decide { txn, commit, tag });
        }
    }

    // ----- participant -----

    fn serve_read(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        seq: u32,
        key: Key,
        prio: Timestamp,
    ) {
        if F::LOCKING != Locking::TwoPhase {
            return self.answer_read(ctx, txn, seq, key);
        }
        if self.ended.contains_key(&txn) {
            return;
        }
        let now = ctx.now();
        let p = self
            .participants
            .entry(txn)
            .or_insert_with(|| Participant::new(now));
        // A read reordered behind the prepare, or a copy of one still waiting: not a new read.
        if p.preparing || p.waiting_read.is_some() {
            return;
        }
        p.last_query = now;
        match self.locks.request(txn, prio, [&key], []) {
            Ok(true) => self.answer_read(ctx, txn, seq, key),
            Ok(false) => {
                let p = self.participants.get_mut(&txn).expect("inserted above");
                p.waiting_read = Some((seq, key));
                self.counters.lock_waits += 1;
                ctx.set_timer(self.lock_timeout, Timer::ReadLock(txn, seq));
            }
            Err(refusal) => {
                self.counters.lock_refusals += 1;
                self.refuse_read(ctx, txn, seq, refusal.abort_reason());
            }
        }
    }

    /// Answer read `seq` of `txn` with the newest committed version of `key` (under `2pl`,
    /// `txn` holds its shared lock).
    fn answer_read(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, seq: u32, key: Key) {
        ctx.charge(Work::reads(1));
        let latest = self.store.get(&key).and_then(|e| e.latest_committed());
        let msg = Msg::ReadReply {
            txn,
            seq,
            value: latest.and_then(|v| v.value.clone()),
            version: latest.map(|v| v.writer),
            ts: latest.map_or(Timestamp::ZERO, |v| v.ts),
            tag: latest.map_or(0, |v| self.tags.of(v.writer)),
        };
        self.deliver(ctx, txn.coordinator(), msg);
        if self.mutant == Some(Mutant::EarlyReadUnlock) {
            // Not two-phase: an executing transaction holds only shared locks, all released.
            self.release(ctx, txn);
        }
    }

    /// DST's RO2 (`DEP_READ`) at `key`'s master for read-only `txn` at `snapshot`: claim the
    /// tuple (raise its read timestamp to `snapshot`, so every writer that locks it from now on
    /// commits above the reader), then wait while a writer whose timestamp may still fall at or
    /// below `snapshot` holds it, then read the newest version at or below `snapshot`.
    fn serve_snapshot_read(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        seq: u32,
        key: Key,
        snapshot: Timestamp,
    ) {
        let read = SnapshotRead {
            txn,
            seq,
            key,
            snapshot,
        };
        let (claim, wait) = match self.mutant {
            Some(Mutant::NoDepRead) => (false, false),
            Some(Mutant::ClaimWithoutWait) => (true, false),
            // Fig. 9 as written guards both on the tuple timestamp (trap T-1).
            Some(Mutant::LiteralFig9Wait) => {
                let guard = self.read_timestamp_of(&read.key) <= snapshot;
                (guard, guard)
            }
            _ => (true, true),
        };
        if claim && self.raise_read_timestamp(ctx, &read.key, snapshot) {
            self.counters.claims += 1;
        }
        if wait {
            self.wait_or_answer(ctx, read, true);
        } else {
            self.answer_snapshot_read(ctx, read);
        }
    }

    /// Park `read` behind the writer it must wait for, if there is one (`first`: a new wait,
    /// counted); otherwise answer it. A writer waits for is the one holding the key exclusively whose floor (the
    /// lower bound on its commit timestamp it computed when it locked) is at or below the
    /// reader's timestamp: it may commit inside the snapshot. A writer with a higher floor, or
    /// one that locks after the claim (its floor is above the claim), commits outside it. Shared
    /// locks never make a reader wait.
    fn wait_or_answer(&mut self, ctx: &mut Ctx<'_, Self>, read: SnapshotRead, first: bool) {
        let holder = self.locks.writer(&read.key).filter(|holder| {
            *holder != read.txn
                && self
                    .participants
                    .get(holder)
                    .is_none_or(|p| p.floor <= read.snapshot)
        });
        match holder {
            Some(holder) => {
                if first {
                    self.counters.snapshot_read_waits += 1;
                }
                self.snapshot_reads.entry(holder).or_default().push(read);
            }
            None => self.answer_snapshot_read(ctx, read),
        }
    }

    /// Answer a DST read-only read with the newest committed version at or below its snapshot.
    fn answer_snapshot_read(&mut self, ctx: &mut Ctx<'_, Self>, read: SnapshotRead) {
        ctx.charge(Work::reads(1));
        let version = self
            .store
            .get(&read.key)
            .and_then(|e| e.read_at(read.snapshot));
        let msg = Msg::ReadReply {
            txn: read.txn,
            seq: read.seq,
            value: version.and_then(|v| v.value.clone()),
            version: version.map(|v| v.writer),
            ts: version.map_or(Timestamp::ZERO, |v| v.ts),
            tag: 0,
        };
        self.deliver(ctx, read.txn.coordinator(), msg);
    }

    /// DST: raise `key`'s tuple read timestamp to `ts` (never lower it), under the durable
    /// claim ceiling; whether it rose. An absent key gets an entry, so a later writer sees the
    /// claim (trap T-6).
    fn raise_read_timestamp(&mut self, ctx: &mut Ctx<'_, Self>, key: &Key, ts: Timestamp) -> bool {
        if self.ceiling.cover_with::<Self, Timestamp>(ctx, ts, |now| {
            Hybrid::add(ts.max(Hybrid::at(now)), CLAIM_SLACK)
        }) {
            self.counters.ceiling_writes += 1;
        }
        let rts = &mut self.store.entry(key).meta;
        let rose = ts > *rts;
        *rts = (*rts).max(ts);
        rose
    }

    /// DST: the least commit timestamp a writer locking `key` now may take (RW1): above the
    /// tuple's write timestamp (its newest version's) and read timestamp, and above every
    /// timestamp claimed here before the last restart.
    fn writer_floor(&self, key: &Key) -> Timestamp {
        let entry = self.store.get(key);
        let wts = entry
            .and_then(|e| e.latest_committed())
            .map_or(Timestamp::ZERO, |v| v.ts);
        let tuple = wts.max(entry.map_or(Timestamp::ZERO, |e| e.meta));
        let above = if self.mutant == Some(Mutant::NoPlusOne) {
            tuple
        } else {
            tuple.next()
        };
        above.max(self.ceiling.proposal_floor())
    }

    /// `txn`'s read cannot have its lock: drop `txn` here and tell its coordinator.
    fn refuse_read(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, seq: u32, reason: AbortReason) {
        self.participants.remove(&txn);
        self.ended.insert(txn, ctx.now());
        self.release(ctx, txn);
        self.deliver(
            ctx,
            txn.coordinator(),
            Msg::ReadRefused { txn, seq, reason },
        );
    }

    fn prepare(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        prio: Timestamp,
        reads: Reads,
        writes: Writes,
    ) {
        if self.participants.get(&txn).is_some_and(|p| p.preparing) || self.ended.contains_key(&txn)
        {
            return;
        }
        let now = ctx.now();
        // 2PL: the keys read here were locked when read; a lock lost in a crash is a no vote
        // (the early-unlock mutant does not keep them, so it cannot ask).
        let lost_lock = F::LOCKING == Locking::TwoPhase
            && self.mutant != Some(Mutant::EarlyReadUnlock)
            && !reads.iter().all(|(key, _)| self.locks.holds(txn, key));
        let lock_reads: Vec<&Key> = match F::LOCKING {
            Locking::AtCommit => reads.iter().map(|(k, _)| k).collect(),
            // OCC's prepare carries no reads; 2PL's are locked already.
            Locking::Optimistic | Locking::TwoPhase => Vec::new(),
        };
        let requested = if lost_lock {
            Ok(false)
        } else {
            self.locks
                .request(txn, prio, lock_reads, writes.iter().map(|(k, _)| k))
        };
        let p = self
            .participants
            .entry(txn)
            .or_insert_with(|| Participant::new(now));
        p.reads = reads;
        p.writes = writes;
        p.preparing = true;
        p.last_query = now;
        if lost_lock {
            self.counters.validation_failures += 1;
            return self.refuse(ctx, txn, AbortReason::ValidationFailed);
        }
        match requested {
            Ok(true) => self.validate_and_vote(ctx, txn),
            Ok(false) => {
                self.counters.lock_waits += 1;
                ctx.set_timer(self.lock_timeout, Timer::Locks(txn));
            }
            Err(refusal) => {
                self.counters.lock_refusals += 1;
                self.refuse(ctx, txn, refusal.abort_reason());
            }
        }
    }

    /// `txn` holds its locks here: validate its reads (`2pc-baseline`), vote.
    fn validate_and_vote(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(p) = self.participants.get(&txn) else {
            return;
        };
        if F::LOCKING == Locking::AtCommit {
            ctx.charge(Work::reads(p.reads.len()));
            let valid = self.mutant == Some(Mutant::NoReadValidation)
                || reads_unchanged(&self.store, &p.reads);
            if !valid {
                self.counters.validation_failures += 1;
                return self.refuse(ctx, txn, AbortReason::ValidationFailed);
            }
        }
        let ts = if Self::DST {
            // RW1 at the lock: above every tuple written here (a participant that only holds
            // shared locks adds nothing). Readers of these keys compare it with their snapshot.
            p.writes
                .iter()
                .map(|(key, _)| self.writer_floor(key))
                .max()
                .unwrap_or(Timestamp::ZERO)
        } else {
            ctx.now().max(self.clock.next())
        };
        let deps = if Self::VTS {
            self.overwritten_deps(&p.writes)
        } else {
            Deps::new()
        };
        let p = self.participants.get_mut(&txn).expect("checked above");
        p.floor = ts;
        p.voted = true;
        p.last_query = ctx.now();
        ctx.persist(Record::Prepared {
            txn,
            reads: p.reads.iter().map(|(k, _)| k.clone()).collect(),
            writes: p.writes.clone(),
        });
        let vote = Ok(ts);
        self.deliver(ctx, txn.coordinator(), Msg::Vote { txn, vote, deps });
    }

    /// `occ`'s validation at a master: every key read still has the version read and no other
    /// transaction holds its lock (it may be committing a new version). Nothing is kept.
    fn validate(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reads: Reads, ts: Timestamp) {
        ctx.charge(Work::reads(reads.len()));
        let valid = reads_unchanged(&self.store, &reads)
            && !reads
                .iter()
                .any(|(key, _)| self.locks.written_by_other(txn, key));
        let vote = if valid && Self::DST {
            // RW2 for the read set, in the handler that validated (T-4): a writer that locks
            // one of these keys from now on commits above `ts`. If the transaction aborts
            // elsewhere the raised timestamps stay, harmlessly.
            if self.mutant != Some(Mutant::NoReadSetInstall) {
                for (key, _) in &reads {
                    self.raise_read_timestamp(ctx, key, ts);
                }
            }
            Ok(ts)
        } else if valid {
            Ok(ctx.now().max(self.clock.next()))
        } else {
            self.counters.validation_failures += 1;
            Err(AbortReason::ValidationFailed)
        };
        self.deliver(ctx, txn.coordinator(), Msg::Validated { txn, vote });
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
                deps: Deps::new(),
            },
        );
        self.release(ctx, txn);
    }

    /// Release `txn`'s locks; the reads and prepares that now hold all theirs go on.
    fn release(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        for ready in self.locks.release(txn) {
            let Some(p) = self.participants.get_mut(&ready) else {
                continue;
            };
            if let Some((seq, key)) = p.waiting_read.take() {
                self.answer_read(ctx, ready, seq, key);
            } else if p.preparing && !p.voted {
                self.validate_and_vote(ctx, ready);
            }
        }
        // DST: the read-only reads that waited for `txn` look again, once the new holders
        // computed their floors above: a new holder locked after the claim, so it does not
        // hold them back, unless it is one recovered or still gathering its locks.
        for read in self.snapshot_reads.remove(&txn).unwrap_or_default() {
            self.wait_or_answer(ctx, read, false);
        }
    }

    fn lock_timeout(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if self
            .participants
            .get(&txn)
            .is_some_and(|p| p.preparing && !p.voted)
        {
            self.counters.lock_timeouts += 1;
            self.refuse(ctx, txn, AbortReason::LockTimeout);
        }
    }

    fn read_lock_timeout(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, seq: u32) {
        let waiting = self
            .participants
            .get(&txn)
            .is_some_and(|p| p.waiting_read.as_ref().is_some_and(|(s, _)| *s == seq));
        if waiting {
            self.counters.lock_timeouts += 1;
            self.refuse_read(ctx, txn, seq, AbortReason::LockTimeout);
        }
    }

    fn on_decide(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        commit: Option<Timestamp>,
        tag: u64,
    ) {
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
        // DST's RW2 for the read set under 2PL: at the masters holding the shared locks, before
        // they go (under OCC the validation did it).
        if Self::DST
            && F::LOCKING == Locking::TwoPhase
            && self.mutant != Some(Mutant::NoReadSetInstall)
        {
            for (key, _) in &p.reads {
                self.raise_read_timestamp(ctx, key, commit_ts);
            }
        }
        let wrote = !p.writes.is_empty();
        if Self::VTS && wrote {
            // The versions' tag, logged before them (a torn log keeps at worst a tag alone).
            ctx.persist(
                vts::Record::Tag {
                    writer: txn,
                    t: tag,
                }
                .into(),
            );
            self.tags.insert(txn, tag);
        }
        ctx.persist(replica::Record::Committed { txn, commit_ts }.into());
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
        let overwrite = self.mutant == Some(Mutant::OverwriteTs);
        for (key, value) in writes {
            let entry = self.store.entry(&key);
            entry.put_committed(txn, commit_ts, value);
            if Self::DST {
                // RW2: tuple timestamps only rise (T-2); a reader may have claimed above
                // `commit_ts` while the writer held the lock. The version's own timestamp
                // already bounds later writers; this keeps the paper's single tuple timestamp.
                entry.meta = if overwrite {
                    commit_ts
                } else {
                    entry.meta.max(commit_ts)
                };
            }
        }
    }

    // ----- the periodic tick -----

    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        let now = ctx.now();
        let patience = self.env.options.participant_timeout;
        // Termination: prepared transactions whose outcome is overdue ask their coordinator,
        // and so do 2PL's executing transactions holding shared locks here, idle that long
        // (their coordinator may have crashed, losing them).
        let mut overdue: Vec<TxnId> = self
            .participants
            .iter()
            .filter(|(_, p)| p.voted || (!p.preparing && p.waiting_read.is_none()))
            .filter(|(_, p)| now.since(p.last_query) >= patience)
            .map(|(t, _)| *t)
            .collect();
        overdue.sort();
        for txn in overdue {
            if let Some(p) = self.participants.get_mut(&txn) {
                p.last_query = now;
            }
            self.deliver(ctx, txn.coordinator(), Msg::QueryOutcome { txn });
        }
        // Transactions whose client vanished mid-execution: abort them (under 2PL they hold
        // shared locks).
        let idle_after = self.env.options.idle_txn_timeout;
        let mut idle: Vec<TxnId> = self
            .coord
            .iter()
            .filter(|(_, t)| {
                matches!(t.phase, Phase::Executing)
                    && t.pending.is_none()
                    && now.since(t.last_active) >= idle_after
            })
            .map(|(txn, _)| *txn)
            .collect();
        idle.sort();
        for txn in idle {
            self.abort(ctx, txn, AbortReason::Timeout);
        }
        let horizon = now.saturating_sub(self.env.options.gc_retention);
        self.ended.retain(|_, at| *at >= horizon);
        self.ticks += 1;
        let announce = (self.ticks - 1).is_multiple_of(ANNOUNCE_EVERY);
        if Self::GTS {
            self.oracle_tick(ctx, announce);
        }
        if Self::VTS {
            self.vts_tick(ctx, announce);
            self.collect_below_vector_horizon(ctx, announce);
        } else if Self::SNAPSHOTS {
            self.collect_below_horizon(ctx, announce);
        } else {
            // Single version: only the newest committed version of a key is ever read.
            self.store.collect_garbage(Timestamp::MAX, GC_BATCH);
        }
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
    }

    /// With DST's session rule, remember that `client` was told of a commit at `commit_ts`.
    fn told_commit(&mut self, client: ClientId, commit_ts: Timestamp) {
        if let Some(sessions) = &mut self.sessions {
            let floor = sessions.entry(client).or_insert(commit_ts);
            *floor = (*floor).max(commit_ts);
        }
    }

    /// DST's read timestamp for a read-only transaction beginning now (RO1): the hybrid clock
    /// `δ` ago, and at least `floor` (§6's session rule: the largest commit timestamp the
    /// session was told).
    fn read_timestamp(&self, now: Timestamp, floor: Option<Timestamp>) -> Timestamp {
        let ts = Hybrid::at(now.saturating_sub(self.staleness));
        floor.map_or(ts, |floor| ts.max(floor))
    }

    /// GTS, at the oracle node, each tick: ask the coordinators of timestamps pending too long
    /// what became of them; after a restart, ask the nodes that have not answered yet what
    /// they hold; when `announce`, announce the stable timestamp to every node (which keeps
    /// their garbage collection moving even where no read-only transaction runs).
    fn oracle_tick(&mut self, ctx: &mut Ctx<'_, Self>, announce: bool) {
        let now = ctx.now();
        let patience = self.env.options.participant_timeout;
        let Some(oracle) = self.oracle.as_mut() else {
            return;
        };
        let overdue = oracle.overdue(now, patience);
        let bound = oracle.restart_bound();
        let unanswered: Vec<NodeId> = oracle
            .recovering()
            .map(|nodes| nodes.iter().copied().collect())
            .unwrap_or_default();
        let stable = oracle.publish(ctx);
        for (txn, ts) in overdue {
            self.deliver(ctx, txn.coordinator(), Msg::QueryTs { txn, ts });
        }
        for node in unanswered {
            self.deliver(ctx, node, Msg::AskHeld { bound });
        }
        if !announce {
            return;
        }
        let nodes: Vec<NodeId> = self.env.placement.nodes().collect();
        for node in nodes {
            let msg = Msg::Stable {
                txn: None,
                ts: stable,
            };
            self.deliver(ctx, node, msg);
        }
    }

    /// The lowest snapshot a read-only transaction this node coordinates may begin to read
    /// at from now on: DST's [`Self::read_timestamp`] now (clocks only advance), GTS's largest
    /// stable timestamp heard of here (a snapshot is at least that).
    fn future_snapshots_floor(&self, now: Timestamp) -> Timestamp {
        if Self::GTS {
            self.stable_seen
        } else {
            self.read_timestamp(now, None)
        }
    }

    /// DST's and GTS's garbage collection, which never makes a read-only transaction abort:
    /// tell every node (when `announce`) how low the read-only transactions coordinated here
    /// read, now and later (the oldest running one's timestamp, and
    /// [`Self::future_snapshots_floor`]); then keep, at every key, the newest version at or
    /// below the lowest announcement of every node (none from some node yet: keep everything).
    fn collect_below_horizon(&mut self, ctx: &mut Ctx<'_, Self>, announce: bool) {
        let now = ctx.now();
        let me = self.id();
        let mine = self
            .coord
            .values()
            .filter(|t| t.read_only && !t.awaiting_stable)
            .map(|t| t.ts)
            .fold(self.future_snapshots_floor(now), Timestamp::min);
        let latest = self.horizons.entry(me).or_insert(mine);
        *latest = (*latest).max(mine);
        let nodes: Vec<NodeId> = self.env.placement.nodes().collect();
        if announce {
            for &node in nodes.iter().filter(|n| **n != me) {
                ctx.send(node, Msg::Horizon { ts: mine });
            }
        }
        if nodes.iter().all(|n| self.horizons.contains_key(n)) {
            let horizon = self
                .horizons
                .values()
                .copied()
                .fold(Timestamp::MAX, Timestamp::min);
            self.store.collect_garbage(horizon, GC_BATCH);
            if Self::DST {
                let lag = now.0.saturating_sub(Hybrid::physical(horizon).0);
                self.counters.gc_horizon_lag_us = lag;
            }
        }
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
            // GTS: the oracle's bound on the timestamps it issued.
            Record::Kit(Kit::Served { up_to }) if Self::GTS => {
                if let Some(oracle) = self.oracle.as_mut() {
                    oracle.replay_issued(up_to);
                }
            }
            // DST's claim ceiling.
            Record::Kit(Kit::Served { up_to }) => self.ceiling.replayed(up_to),
            // GTS: the oracle's logged stable timestamp.
            Record::Kit(Kit::Watermark(ts)) => {
                if let Some(oracle) = self.oracle.as_mut() {
                    oracle.replay_stable(ts);
                }
            }
            // Not written by this protocol.
            Record::Kit(Kit::Installed { .. }) => {}
            Record::Vts(vts::Record::Tagged { txn, t, deps }) => self.outbox.replayed(txn, t, deps),
            Record::Vts(vts::Record::Counter(local_ts)) => self.outbox.replayed_counter(local_ts),
            Record::Vts(vts::Record::Tag { writer, t }) => self.tags.insert(writer, t),
            Record::Vts(vts::Record::Stable(v)) => {
                if let Some(oracle) = self.vector_oracle.as_mut() {
                    oracle.replay_stable(&v);
                }
            }
            Record::Prepared { txn, reads, writes } => {
                // The prepared held these locks together before the crash, so they are
                // granted again; the oldest priority makes any requester, not them, yield.
                let _ =
                    self.locks
                        .request(txn, Timestamp::ZERO, &reads, writes.iter().map(|(k, _)| k));
                let mut p = Participant::new(Timestamp::ZERO);
                p.reads = reads.into_iter().map(|k| (k, None)).collect();
                p.writes = writes;
                p.preparing = true;
                p.voted = true;
                // Overdue from the start: ask the coordinator at once.
                self.participants.insert(txn, p);
            }
        }
    }

    /// Start `txn`'s commit: `Prepare` to the participants of `by_replica` (or straight to
    /// validating `to_validate` if it has none).
    fn start_commit(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        pending: Pending,
        by_replica: ByReplica,
        to_validate: Reads,
    ) {
        let now = ctx.now();
        let participants = by_replica.participants();
        let t = self.coord.get_mut(&txn).expect("the caller checked");
        let prio = t.prio;
        t.pending = Some(pending);
        t.last_active = now;
        t.phase = Phase::Voting {
            round: Round::Prepare,
            waiting: participants.iter().copied().collect(),
            participants,
            write_replicas: by_replica.write_replicas,
            // DST's RW1 starts from the begin time and the versions read; the votes add the
            // floors of the tuples locked.
            commit_ts: if Self::DST { t.ts } else { Timestamp::ZERO },
            to_validate,
        };
        ctx.set_timer(self.env.options.participant_timeout, Timer::Votes(txn));
        if by_replica.parts.is_empty() {
            return self.validate_or_decide(ctx, txn);
        }
        for (node, (reads, writes)) in by_replica.parts {
            let msg = Msg::Prepare {
                txn,
                prio,
                reads,
                writes,
            };
            self.deliver(ctx, node, msg);
        }
    }
}

impl<F: Flavor> InteractiveCoordinator for LockCommit<F> {
    fn begin(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, read_only: bool) {
        let txn = self.ids.allocate(ctx);
        let now = ctx.now();
        // A client whose last attempt aborted keeps that attempt's age, so under wait-die its
        // retries grow older than newcomers instead of dying behind them for ever.
        let prio = match F::LOCKING {
            Locking::TwoPhase => *self.ages.entry(pending.client).or_insert(now),
            Locking::AtCommit | Locking::Optimistic => now,
        };
        let session = self
            .sessions
            .as_ref()
            .and_then(|s| s.get(&pending.client).copied());
        let ts = match (F::TIMESTAMPS, read_only) {
            (Timestamping::Single, _) | (Timestamping::Gts | Timestamping::Vts, false) => now,
            // RW1 starts at the session's floor too, so its commits rise along the session.
            (Timestamping::Dst, false) => {
                session.map_or(Hybrid::at(now), |floor| floor.max(Hybrid::at(now)))
            }
            (Timestamping::Dst, true) => self.read_timestamp(now, session),
            // Set when the oracle's stable timestamp (vector) arrives.
            (Timestamping::Gts | Timestamping::Vts, true) => Timestamp::ZERO,
        };
        let awaiting_stable = Self::FETCHES_STABLE && read_only;
        self.coord.insert(
            txn,
            Coord {
                client: pending.client,
                read_only,
                prio,
                ts,
                awaiting_stable,
                fetched: None,
                deps: Deps::new(),
                vector: None,
                reads: Vec::new(),
                read_nodes: BTreeSet::new(),
                pending: None,
                read_seq: 0,
                reading: None,
                last_active: ctx.now(),
                phase: Phase::Executing,
            },
        );
        if awaiting_stable {
            // GTS, VTS: `Begun` waits for the oracle's stable timestamp (one round trip).
            let t = self.coord.get_mut(&txn).expect("just inserted");
            t.pending = Some(pending);
            self.counters.stable_fetches += 1;
            ctx.set_timer(self.env.options.participant_timeout, Timer::Stable(txn));
            let oracle = self.oracle_id;
            return self.deliver(ctx, oracle, Msg::FetchStable { txn });
        }
        // Single version: there is no snapshot; the begin time stands in. DST: the read
        // timestamp, or the commit timestamp's start.
        let snapshot = ts;
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
        t.read_seq += 1;
        let seq = t.read_seq;
        let prio = t.prio;
        t.reading = Some(key.clone());
        // VTS ships its vector instead of a snapshot timestamp.
        let vector = t.vector.clone().filter(|_| Self::VTS && t.read_only);
        let snapshot = (Self::SNAPSHOTS && !Self::VTS && t.read_only).then_some(t.ts);
        let partition = placement.partition_of(&key);
        let replica = match F::LOCKING {
            Locking::AtCommit => placement.closest_replica(me, partition),
            // The master holds the locks (2PL's shared ones, OCC's that validation checks).
            Locking::Optimistic | Locking::TwoPhase => placement.master(partition),
        };
        if F::LOCKING == Locking::TwoPhase && snapshot.is_none() {
            t.read_nodes.insert(replica);
        }
        if replica != me {
            let timeout = self.env.options.participant_timeout;
            ctx.set_timer(timeout, Timer::Read(txn, seq));
        }
        let msg = match vector {
            Some(at) => Msg::ReadAt { txn, seq, key, at },
            None => Msg::Read {
                txn,
                seq,
                key,
                prio,
                snapshot,
            },
        };
        self.deliver(ctx, replica, msg);
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
        if Self::SNAPSHOTS && t.read_only {
            // RO: its reads form a snapshot at its timestamp; nothing to check or tell anyone.
            let commit_ts = t.ts;
            let client = t.client;
            self.coord.remove(&txn);
            self.counters.read_only_committed += 1;
            self.told_commit(client, commit_ts);
            return pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
        let unvalidated_read_only =
            F::READ_ONLY == ReadOnly::Unvalidated || mutant == Some(Mutant::NoReadOnlyValidation);
        let unvalidated = (t.read_only && unvalidated_read_only)
            || (F::LOCKING == Locking::Optimistic && mutant == Some(Mutant::NoReadValidation));
        let reads = if unvalidated { &[][..] } else { &t.reads[..] };
        let (by_replica, to_validate) = match F::LOCKING {
            // Every replica of every key read or written locks and validates.
            Locking::AtCommit => (ByReplica::group(&placement, reads, writes), Vec::new()),
            // Lock the write set everywhere, then validate the reads at their masters.
            Locking::Optimistic => (ByReplica::group(&placement, &[], writes), reads.to_vec()),
            // The masters read from (holding the shared locks), every replica of a key written.
            Locking::TwoPhase => (
                ByReplica::group_reads_at(&placement, ReadsAt::Master, reads, writes),
                Vec::new(),
            ),
        };
        if by_replica.parts.is_empty() && to_validate.is_empty() {
            // Nothing read or written (or an unvalidated read-only transaction: `rc`'s, a
            // mutant's). A 2PL mutant
            // read-only transaction still releases what it holds.
            let t = self.coord.remove(&txn).expect("executing");
            if t.read_only {
                self.counters.read_only_committed += 1;
            }
            self.ages.remove(&t.client);
            for node in t.read_nodes {
                self.deliver(ctx, node, Msg::abort(txn));
            }
            let commit_ts = match F::TIMESTAMPS {
                Timestamping::Single => now,
                Timestamping::Dst => t.ts,
                // Nothing to order: where a snapshot taken now would put it.
                Timestamping::Gts => self.stable_seen,
                Timestamping::Vts => now,
            };
            self.told_commit(t.client, commit_ts);
            return pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
        self.start_commit(ctx, txn, pending, by_replica, to_validate);
    }

    fn abort_asked(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) -> Result<(), String> {
        match self.coord.get(&txn).map(|t| &t.phase) {
            Some(Phase::Voting { .. }) => Err(format!("transaction {txn:?} is already committing")),
            Some(Phase::Executing) => {
                let t = self.coord.remove(&txn).expect("just found");
                // Under 2PL it holds shared locks where it read.
                for node in t.read_nodes {
                    self.deliver(ctx, node, Msg::abort(txn));
                }
                Ok(())
            }
            None => Ok(()),
        }
    }
}

impl<F: Flavor> Protocol for LockCommit<F> {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record;
    const FORMS: &'static [augur_runtime::one_shot::RequestForm] = INTERACTIVE_AND_ONE_SHOT;

    fn new(env: &NodeEnv) -> Self {
        // Settings are validated against the cluster before nodes are built
        // (`ProtocolInfo::validate_for_cluster`); node 0 stands in for anything else.
        let oracle_id = env
            .options
            .settings
            .get(ORACLE)
            .and_then(|v| v.parse().ok())
            .map(NodeId)
            .filter(|n| env.placement.nodes().any(|m| m == *n))
            .unwrap_or(NodeId(0));
        let policy = match F::LOCKING {
            Locking::AtCommit => Policy::Wait,
            Locking::Optimistic => Policy::NoWait,
            Locking::TwoPhase => Policy::WaitDie,
        };
        LockCommit {
            env: env.clone(),
            mutant: env
                .options
                .mutant
                .as_deref()
                .and_then(|name| Mutant::offered(&F::INFO, name)),
            lock_timeout: env
                .options
                .settings
                .get(LOCK_TIMEOUT)
                .and_then(|v| parse_lock_timeout(v))
                .unwrap_or(F::DEFAULT_LOCK_TIMEOUT),
            store: MvStore::new(),
            clock: Timestamp::ZERO,
            locks: LockSets::new(policy),
            participants: FxHashMap::default(),
            ended: FxHashMap::default(),
            coord: FxHashMap::default(),
            ids: TxnIds::new(env.id),
            decided: DecisionLog::default(),
            ages: FxHashMap::default(),
            counters: Counters::default(),
            ceiling: ServeLease::default(),
            staleness: env
                .options
                .settings
                .get(READ_STALENESS)
                .and_then(|v| v.parse().ok())
                .map_or(Duration::ZERO, Duration::from_millis),
            sessions: (Self::DST
                && env.options.settings.get(SESSION).map(String::as_str) == Some("on"))
            .then(FxHashMap::default),
            snapshot_reads: FxHashMap::default(),
            horizons: FxHashMap::default(),
            oracle_id,
            oracle: (Self::GTS && env.id == oracle_id).then(Oracle::new),
            stable_seen: Timestamp::ZERO,
            oracle_floor: Timestamp::ZERO,
            tags: Tags::default(),
            outbox: Outbox::default(),
            vector_oracle: (Self::VTS && env.id == oracle_id)
                .then(|| VectorOracle::new(env.placement.nodes().count())),
            stable_vector: VClock::new(env.placement.nodes().count()),
            horizon_vectors: FxHashMap::default(),
            ticks: 0,
            flavor: PhantomData,
        }
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Record>) -> Self {
        let mut node = LockCommit::new(env);
        for record in records {
            node.replay(record);
        }
        // GTS: an oracle that ever issued or published anything lost its pending timestamps.
        let nodes: Vec<NodeId> = env.placement.nodes().collect();
        if let Some(oracle) = node.oracle.as_mut()
            && oracle.used()
        {
            oracle.restarted(nodes);
        }
        // VTS: the owed tags whose commit the decision log no longer awaits are applied
        // everywhere; an oracle that logged anything lost its queues.
        let decided = &node.decided;
        node.outbox.recovered(|txn| decided.get(&txn).is_some());
        if let Some(oracle) = node.vector_oracle.as_mut() {
            oracle.recovered();
        }
        node
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        if Self::DST {
            // The claim ceiling outlives the log records that raised it.
            let up_to = self.ceiling.up_to();
            emit(replica::Record::Served { up_to }.into());
        }
        if let Some(oracle) = &self.oracle {
            oracle.checkpoint(emit);
        }
        if Self::VTS {
            // The counter and owed tags, and the versions' tags before the versions.
            self.outbox.checkpoint(&mut |r| emit(r.into()));
            self.tags.checkpoint(&mut |r| emit(r.into()));
        }
        if let Some(oracle) = &self.vector_oracle {
            oracle.checkpoint(emit);
        }
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
            Timer::ReadLock(txn, seq) => self.read_lock_timeout(ctx, txn, seq),
            Timer::Stable(txn) => {
                if self.coord.get(&txn).is_some_and(|t| t.awaiting_stable) {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        let mut counters = vec![
            ("lock_waits", c.lock_waits),
            ("lock_timeouts", c.lock_timeouts),
            ("lock_refusals", c.lock_refusals),
            ("validation_failures", c.validation_failures),
            ("read_only_committed", c.read_only_committed),
            ("read_only_aborted", c.read_only_aborted),
            (
                "prepared_now",
                self.participants.values().filter(|p| p.voted).count() as u64,
            ),
            ("decisions_kept_now", self.decided.iter().count() as u64),
        ];
        if Self::DST {
            counters.extend([
                ("read_only_waits", c.snapshot_read_waits),
                ("claims", c.claims),
                ("ceiling_writes", c.ceiling_writes),
                ("gc_horizon_lag_us", c.gc_horizon_lag_us),
            ]);
        }
        if Self::GTS {
            counters.extend([
                ("ts_fetches", c.ts_fetches),
                ("stable_fetches", c.stable_fetches),
            ]);
        }
        if let Some(oracle) = &self.oracle {
            counters.push(("oracle_pending_now", oracle.pending_count() as u64));
        }
        if Self::VTS {
            counters.extend([
                ("stable_fetches", c.stable_fetches),
                ("installs", c.installs),
                ("tags_owed_now", self.outbox.len() as u64),
                ("tags_kept_now", self.tags.len() as u64),
            ]);
        }
        if let Some(oracle) = &self.vector_oracle {
            counters.push(("oracle_queued_now", oracle.queued() as u64));
        }
        counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_mutant_is_known() {
        for info in [
            crate::twopc_baseline::INFO,
            crate::occ::INFO,
            crate::two_pl::INFO,
            crate::rc::INFO,
            crate::dst_occ::INFO,
            crate::dst_2pl::INFO,
            crate::gts::INFO,
            crate::vts::INFO,
        ] {
            for (name, _) in info.mutants {
                assert_eq!(Mutant::offered(&info, name), Mutant::named(name), "{name}");
                assert!(Mutant::named(name).is_some(), "{}: {name}", info.name);
            }
        }
        assert_eq!(
            Mutant::offered(&crate::occ::INFO, "early-read-unlock"),
            None
        );
    }
}
