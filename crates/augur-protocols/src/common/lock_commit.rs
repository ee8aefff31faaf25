//! Single-version, lock-based two-phase commit: the engine `2pc-baseline`, `occ`, `2pl`, `rc`,
//! `dst-occ`, `dst-2pl`, `gts` and `vts` share. Each of them is this node state machine run
//! under its own [`Flavor`]: the flavor says where reads go, which locks are taken when, with
//! which deadlock policy, whether a separate validation round follows the locking one, and
//! which [`TimestampScheme`] gives commit timestamps and read-only snapshots (see
//! [`scheme`]). Everything else is common: coordinators that execute reads one at a time and
//! commit buffered writes, participants that lock, vote and install, presumed-abort
//! termination, the write-ahead log and recovery.
//!
//! # The common part
//!
//! * **One version per key.** A read returns the newest committed version of its key with the
//!   identity of that version (its writer); garbage collection keeps only the newest version
//!   (the snapshot schemes keep those a read-only transaction may still read).
//!   Writes are buffered by the client and shipped with the commit.
//! * **Two-phase commit.** At commit the coordinator sends `Prepare` to its participants; each
//!   locks what it must (waiting at most the flavor's lock timeout, or not at all under
//!   no-wait), checks what the flavor checks, logs its promise (`Record::Prepared`) and votes
//!   yes with a proposed timestamp above every version it applied (or no, and why). With every
//!   yes (and, for `occ`, every read validated) the coordinator decides to commit at the
//!   largest proposal, logs the decision until every write replica acknowledged (the 2PC kit's
//!   `DecisionLog`), answers its client and sends the decision; write replicas install at that
//!   timestamp and acknowledge; every participant releases its locks. One no, or silence for
//!   `participant_timeout`, aborts everywhere. The scheme may change what a proposal is, what
//!   a vote and a read reply carry, and what happens at the decision and once every write
//!   replica applied it.
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
//! * **Fail-over** (flavors with [`Flavor::FAILS_OVER`]; `docs/architecture/availability.md`,
//!   *The lock-commit engine*). Which replicas count, and which one is master, is a
//!   configuration agreed through Raft ([`crate::common::membership`]): reads, prepares and
//!   validations go to the configuration's in-sync replicas, prepares and validations carry
//!   each partition's epoch ([`Epochs`]), and a node serves any of them only while in sync at
//!   that epoch and leased. A master's state is nothing beyond what every in-sync replica holds
//!   (the exclusive locks of prepared transactions, the versions), so a dead master's
//!   partition needs only the eviction; `2pl`'s shared locks at the old master are lost as in a
//!   crash, which its prepare checks. A replica out of sync is copied in by the master
//!   ([`crate::common::failover::Copies`]) before it counts again. A scheme whose master keeps
//!   read-side state (DST's claims) bounds the commit timestamps proposed on a promoted
//!   partition by its eviction floor ([`TimestampScheme::proposal`]) and may hold a commit
//!   timestamp back until the clock nears it ([`TimestampScheme::fix_not_before`]; `dst_occ`,
//!   *Fail-over*); one that installs at the masters holding the shared locks when the
//!   decision reaches them has those masters' votes carry their lease ends, and the
//!   coordinator fixes the commit timestamp only while every such lease surely runs
//!   ([`TimestampScheme::INSTALLS_AT_READ_MASTERS`]; `dst_2pl`, *Fail-over*). A scheme with
//!   an oracle follows the configuration's, which reserves it blocks of timestamps
//!   ([`TimestampScheme::configured`], [`TimestampScheme::reservation_wanted`]; `gts`,
//!   *Fail-over*).
//!
//! # Messages and records
//!
//! [`Msg`] and [`Record`] are the engine's, generic over the scheme's own: every flavor's
//! messages are the engine's variants plus [`Msg::Scheme`], which carries its scheme's (GTS's
//! oracle traffic, say) to [`TimestampScheme::handle`], and likewise its records
//! ([`Record::Scheme`], to [`TimestampScheme::replay`]). So the engine names no scheme, and a
//! new scheme brings its types in its own module instead of adding variants here ([`scheme`]
//! says which fields of the engine's messages a scheme fills in). A protocol's module calls
//! its flavor's types `Msg` and `Record` ([`MsgOf`], [`RecordOf`]).
//!
//! # The flavors
//!
//! See [`Locking`] and [`TimestampScheme`]; each protocol's module states what its paper
//! defines and what augur chose.

pub mod scheme;

pub use scheme::{
    Begin, Empty, Mail, Node, Participating, Parts, Single, SnapshotRead, Then, TimestampScheme,
};

use crate::common::coordinator::{
    ByReplica, InteractiveCoordinator, Pending, ReadInFlight, Reads, ReadsAt, serve_interactive,
};
use crate::common::failover::{Copies, Gate, LeaseWaiters};
use crate::common::lock_sets::{LockSets, reads_unchanged};
use crate::common::locks::{LOCK_TIMEOUT, Policy, parse_lock_timeout};
use crate::common::membership::{
    Epoch, Epochs, Membership, MembershipMsg, MembershipTimer, Promotion, Reconfiguration,
};
use crate::common::replica::{self, DecisionLog, KeyVersions, TxnIds, Writes};
use crate::common::sequencer::SequencerRecord;
use crate::common::vclock::Deps;
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, ProtocolInfo};
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientId, ClientReply, ClientRequest, Key, NodeId, PartitionId};
use augur_types::{RequestError, Timestamp, TxnId, Value};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
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

/// What distinguishes one protocol built on this engine from another.
pub trait Flavor: Send + 'static {
    /// The protocol's registry entry (its mutants are the ones [`LockCommit`] accepts).
    const INFO: ProtocolInfo;
    const LOCKING: Locking;
    /// How read-only transactions commit (under [`Single`]; the other schemes read a snapshot).
    const READ_ONLY: ReadOnly = ReadOnly::AsAnyOther;
    /// Where commit timestamps come from and what declared read-only transactions read:
    /// [`Single`], or DST's, GTS's or VTS's scheme.
    type Scheme: TimestampScheme;
    /// How long a lock request waits when the `lock_timeout` setting is not given (unused
    /// under [`Locking::Optimistic`], which never waits).
    const DEFAULT_LOCK_TIMEOUT: Duration;
    /// The flavor follows a configuration agreed through Raft (fail-over, see the module docs
    /// and `docs/architecture/availability.md`); its [`ProtocolInfo`] then lists the
    /// `failover` settings. Off: the placement's replicas and masters for good.
    const FAILS_OVER: bool = false;
}

/// The mutants the engine knows; a flavor offers those its [`ProtocolInfo`] lists (a scheme
/// is given the one the node runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
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
    /// DST under fail-over: a promoted master's writers ignore the eviction's floor, so they
    /// may commit below a claim the evicted master made.
    NoFailoverFloor,
    /// DST under 2PL and fail-over: the coordinator fixes the commit timestamp whether or not
    /// the masters holding the shared locks are still leased.
    NoReadLease,
    /// GTS: read-only transactions read at the last timestamp issued (`GlobalTS`), not at the
    /// stable one.
    ReadAtGlobalTs,
    /// GTS under fail-over: the oracle issues timestamps whether or not its node holds a
    /// lease, so a deposed oracle may still issue below its successor.
    OracleWithoutLease,
    /// VTS under fail-over: a node serves reads at a vector whether or not it is in sync for
    /// the key's partition and leased, so a deposed master may answer from a store that
    /// misses commits the vector admits.
    UngatedReadAt,
}

impl Mutant {
    /// The mutant called `name`, whichever flavor offers it.
    pub fn named(name: &str) -> Option<Mutant> {
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
            "no-failover-floor" => Some(Mutant::NoFailoverFloor),
            "no-read-lease" => Some(Mutant::NoReadLease),
            "read-at-global-ts" => Some(Mutant::ReadAtGlobalTs),
            "oracle-without-lease" => Some(Mutant::OracleWithoutLease),
            "ungated-read-at" => Some(Mutant::UngatedReadAt),
            _ => None,
        }
    }

    /// The mutant `name` if `info` offers it.
    pub fn offered(info: &ProtocolInfo, name: &str) -> Option<Mutant> {
        info.mutants
            .iter()
            .any(|(n, _)| *n == name)
            .then(|| Mutant::named(name))
            .flatten()
    }
}

/// The engine's messages, and the scheme's own (`M`, its [`TimestampScheme::Msg`]) in
/// [`Msg::Scheme`], so that a scheme brings its messages without adding a variant here. Reads,
/// prepares and validations go to replicas of their keys from the transaction's coordinator,
/// which alone decides; answers go back to it.
#[derive(Clone, Serialize, Deserialize)]
pub enum Msg<M> {
    /// Coordinator → a replica of `key` (`2pl`, `occ`: its master): the newest committed
    /// version. `prio` is the transaction's age for wait-die (`2pl`: its client's first try,
    /// `augur_contract::age`). `snapshot`: a read-only read at that timestamp, which the scheme
    /// serves ([`TimestampScheme::serve_snapshot_read`]).
    Read {
        txn: TxnId,
        seq: u32,
        key: Key,
        prio: Timestamp,
        snapshot: Option<Timestamp>,
    },
    /// Replica → coordinator: the value read, the writer of its version, the version's
    /// timestamp and the tag the scheme gives the version ([`TimestampScheme::version_tag`]; 0:
    /// none).
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
        epochs: Epochs,
    },
    /// Participant → coordinator: yes with a proposed commit timestamp, or no and why. `deps`:
    /// what the scheme says a yes carries of the versions it overwrites
    /// ([`TimestampScheme::overwritten`]; none under most schemes). `lease_end`: under
    /// fail-over, a yes for keys read under shared locks here, when the scheme installs at the
    /// read masters ([`TimestampScheme::INSTALLS_AT_READ_MASTERS`]), carries when this node's
    /// lease runs out (its clock); zero otherwise.
    Vote {
        txn: TxnId,
        vote: Result<Timestamp, AbortReason>,
        deps: Deps,
        lease_end: Timestamp,
    },
    /// Coordinator → the master of every key read (`occ`, after every lock is held): do these
    /// keys still have these versions, unlocked by others? `ts` is the commit timestamp so far,
    /// fixed before this round, which the scheme may install at a valid key
    /// ([`TimestampScheme::validated`]).
    Validate {
        txn: TxnId,
        reads: Reads,
        ts: Timestamp,
        epochs: Epochs,
    },
    /// Master → coordinator: the answer to `Validate`, with a proposed timestamp.
    Validated {
        txn: TxnId,
        vote: Result<Timestamp, AbortReason>,
    },
    /// Coordinator → participants: commit at this timestamp, or abort (`None`), with the tag
    /// the scheme gave the commit ([`TimestampScheme::tag_decision`]; 0: none).
    Decide {
        txn: TxnId,
        commit: Option<Timestamp>,
        tag: u64,
    },
    /// Write replica → coordinator: the commit is applied here.
    Applied { txn: TxnId },
    /// Participant → coordinator: what became of this transaction, prepared here long ago?
    QueryOutcome { txn: TxnId },
    /// One of the scheme's own messages, which its [`TimestampScheme::handle`] handles.
    Scheme(M),
    /// The configuration group: Raft and leases (fail-over, [`Flavor::FAILS_OVER`]).
    Membership(MembershipMsg),
    /// A replica out of sync → the partition's master: copy the partition to me.
    CatchUpAsk { partition: PartitionId },
    /// Master → that replica: the partition's committed versions at `epoch`, no transaction
    /// prepared there, and the scheme's tag of each of their writers that has one
    /// ([`TimestampScheme::version_tag`]: VTS's; none for the other schemes).
    CatchUpState {
        partition: PartitionId,
        epoch: Epoch,
        versions: Vec<KeyVersions>,
        tags: Vec<(TxnId, u64)>,
    },
    /// The replica → the master: the copy is installed, durably.
    CatchUpDone {
        partition: PartitionId,
        epoch: Epoch,
    },
}

crate::common::membership::carried_in_membership_variants!(Msg<M>, Timer);

impl<M> Msg<M> {
    /// The decision to abort `txn` (it also releases what a participant holds for it).
    fn abort(txn: TxnId) -> Msg<M> {
        Msg::Decide {
            txn,
            commit: None,
            tag: 0,
        }
    }
}

/// As derived, except that a scheme's message shows as itself, not wrapped: a trace (and a
/// golden file) names each message as the node that handles it knows it; and the epochs of a
/// prepare or validation, and a vote's lease end, show only with fail-over (without, there are
/// none).
impl<M: fmt::Debug> fmt::Debug for Msg<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Msg::Read {
                txn,
                seq,
                key,
                prio,
                snapshot,
            } => f
                .debug_struct("Read")
                .field("txn", txn)
                .field("seq", seq)
                .field("key", key)
                .field("prio", prio)
                .field("snapshot", snapshot)
                .finish(),
            Msg::ReadReply {
                txn,
                seq,
                value,
                version,
                ts,
                tag,
            } => f
                .debug_struct("ReadReply")
                .field("txn", txn)
                .field("seq", seq)
                .field("value", value)
                .field("version", version)
                .field("ts", ts)
                .field("tag", tag)
                .finish(),
            Msg::ReadRefused { txn, seq, reason } => f
                .debug_struct("ReadRefused")
                .field("txn", txn)
                .field("seq", seq)
                .field("reason", reason)
                .finish(),
            Msg::Prepare {
                txn,
                prio,
                reads,
                writes,
                epochs,
            } => {
                let mut d = f.debug_struct("Prepare");
                d.field("txn", txn)
                    .field("prio", prio)
                    .field("reads", reads)
                    .field("writes", writes);
                if !epochs.is_empty() {
                    d.field("epochs", epochs);
                }
                d.finish()
            }
            Msg::Vote {
                txn,
                vote,
                deps,
                lease_end,
            } => {
                let mut d = f.debug_struct("Vote");
                d.field("txn", txn).field("vote", vote).field("deps", deps);
                if *lease_end != Timestamp::ZERO {
                    d.field("lease_end", lease_end);
                }
                d.finish()
            }
            Msg::Validate {
                txn,
                reads,
                ts,
                epochs,
            } => {
                let mut d = f.debug_struct("Validate");
                d.field("txn", txn).field("reads", reads).field("ts", ts);
                if !epochs.is_empty() {
                    d.field("epochs", epochs);
                }
                d.finish()
            }
            Msg::Validated { txn, vote } => f
                .debug_struct("Validated")
                .field("txn", txn)
                .field("vote", vote)
                .finish(),
            Msg::Decide { txn, commit, tag } => f
                .debug_struct("Decide")
                .field("txn", txn)
                .field("commit", commit)
                .field("tag", tag)
                .finish(),
            Msg::Applied { txn } => f.debug_struct("Applied").field("txn", txn).finish(),
            Msg::QueryOutcome { txn } => f.debug_struct("QueryOutcome").field("txn", txn).finish(),
            Msg::Scheme(m) => fmt::Debug::fmt(m, f),
            Msg::Membership(m) => f.debug_tuple("Membership").field(m).finish(),
            Msg::CatchUpAsk { partition } => f
                .debug_struct("CatchUpAsk")
                .field("partition", partition)
                .finish(),
            Msg::CatchUpState {
                partition,
                epoch,
                versions,
                tags,
            } => f
                .debug_struct("CatchUpState")
                .field("partition", partition)
                .field("epoch", epoch)
                .field("versions", versions)
                .field("tags", tags)
                .finish(),
            Msg::CatchUpDone { partition, epoch } => f
                .debug_struct("CatchUpDone")
                .field("partition", partition)
                .field("epoch", epoch)
                .finish(),
        }
    }
}

impl<M: CheckMessage> CheckMessage for Msg<M> {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            Msg::Read { txn, key, .. } => {
                at.txn_of_sender(*txn)?;
                at.key_here(key)
            }
            Msg::Prepare {
                txn,
                reads,
                writes,
                epochs,
                ..
            } => {
                at.txn_of_sender(*txn)?;
                reads.iter().try_for_each(|(key, _)| at.key_here(key))?;
                writes.iter().try_for_each(|(key, _)| at.key_here(key))?;
                epochs.iter().try_for_each(|(p, _)| at.partition_here(*p))
            }
            Msg::Validate {
                txn, reads, epochs, ..
            } => {
                at.txn_of_sender(*txn)?;
                reads.iter().try_for_each(|(key, _)| at.key_here(key))?;
                epochs.iter().try_for_each(|(p, _)| at.partition_here(*p))
            }
            // Deps name nodes, which index vectors.
            Msg::Vote { txn, deps, .. } => {
                at.txn_here(*txn)?;
                deps.check(at)
            }
            Msg::Decide { txn, .. } => at.txn_of_sender(*txn),
            Msg::ReadReply { txn, .. }
            | Msg::ReadRefused { txn, .. }
            | Msg::Validated { txn, .. }
            | Msg::Applied { txn }
            | Msg::QueryOutcome { txn } => at.txn_here(*txn),
            Msg::Scheme(m) => m.check(at),
            Msg::Membership(m) => m.check(at),
            Msg::CatchUpAsk { partition } | Msg::CatchUpDone { partition, .. } => {
                at.partition_here(*partition)?;
                replica::sender_replicates(at, *partition)
            }
            Msg::CatchUpState {
                partition,
                versions,
                ..
            } => {
                at.partition_here(*partition)?;
                replica::sender_replicates(at, *partition)?;
                versions
                    .iter()
                    .try_for_each(|(key, _)| at.key_in(key, *partition))
            }
        }
    }
}

/// The messages of a node of flavor `F`.
pub type MsgOf<F> = Msg<<<F as Flavor>::Scheme as TimestampScheme>::Msg>;

/// The log records of a node of flavor `F`.
pub type RecordOf<F> = Record<<<F as Flavor>::Scheme as TimestampScheme>::Record>;

/// The messages a scheme's hook leaves to the engine of a node of flavor `F`.
type MailOf<F> = Mail<<<F as Flavor>::Scheme as TimestampScheme>::Msg>;

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
    /// A read-only transaction's snapshot, fetched at `Begin` ([`Begin::FetchStable`]), did not
    /// arrive in time.
    Stable(TxnId),
    /// The configuration group's (fail-over).
    Membership(MembershipTimer),
    /// A coordinator held a transaction's commit timestamp back until its clock caught up
    /// ([`TimestampScheme::fix_not_before`]): go on validating or deciding.
    Hold(TxnId),
}

/// What a node writes to its log and rebuilds from: the engine's records, and the scheme's
/// own (`R`, its [`TimestampScheme::Record`]) in [`Record::Scheme`].
#[derive(Clone, Serialize, Deserialize)]
pub enum Record<R> {
    /// The 2PC kit's records: `Decided`, `Forgotten` and `IdsReserved` (the coordinator's),
    /// `Committed` (a participant installed its writes at `commit_ts` and released its locks),
    /// `Aborted` (a participant dropped a prepare and released its locks) and, in checkpoints,
    /// `Versions`; the schemes may write `Served` and `Watermark`.
    Kit(replica::Record<Timestamp>),
    /// This participant voted yes for `txn`: it holds shared locks on `reads` and exclusive ones
    /// on the keys of `writes` until the outcome.
    Prepared {
        txn: TxnId,
        reads: Vec<Key>,
        writes: Writes,
    },
    /// One of the scheme's own records, which its [`TimestampScheme::replay`] replays.
    Scheme(R),
}

/// As derived, except that a scheme's record shows as itself, not wrapped (as [`Msg`]'s).
impl<R: fmt::Debug> fmt::Debug for Record<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Record::Kit(record) => f.debug_tuple("Kit").field(record).finish(),
            Record::Prepared { txn, reads, writes } => f
                .debug_struct("Prepared")
                .field("txn", txn)
                .field("reads", reads)
                .field("writes", writes)
                .finish(),
            Record::Scheme(record) => fmt::Debug::fmt(record, f),
        }
    }
}

impl<R> From<replica::Record<Timestamp>> for Record<R> {
    fn from(record: replica::Record<Timestamp>) -> Record<R> {
        Record::Kit(record)
    }
}

impl<R> From<SequencerRecord> for Record<R> {
    fn from(record: SequencerRecord) -> Record<R> {
        Record::Kit(replica::Record::Membership(record))
    }
}

/// Counters `augur bench` reads (see [`Protocol::counters`]); the scheme adds its own.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    lock_waits: u64,
    lock_timeouts: u64,
    /// Lock requests refused by the policy (no-wait conflicts, wait-die deaths).
    lock_refusals: u64,
    validation_failures: u64,
    read_only_committed: u64,
    read_only_aborted: u64,
    /// Commit timestamps held back until the clock caught up (DST under fail-over).
    commit_holds: u64,
    /// Attempts aborted because a master holding their shared locks may have lost its lease
    /// before their commit timestamp was fixed (DST under 2PL, fail-over).
    read_lease_aborts: u64,
}

/// A transaction this node coordinates (`T`: what its scheme keeps for it).
pub struct Coord<T> {
    pub(crate) client: ClientId,
    pub(crate) read_only: bool,
    /// Its age under wait-die: the begin time here.
    pub(crate) prio: Timestamp,
    /// Its timestamp, as its scheme keeps it: the begin time ([`Single`]); DST's read
    /// timestamp of a read-only transaction, or a read-write one's lower bound on its commit
    /// timestamp so far (its begin time, above every version read); GTS's and VTS's snapshot
    /// of a read-only transaction (zero until the stable value arrives; VTS: the time it
    /// arrived).
    pub(crate) ts: Timestamp,
    /// A read-only transaction waiting at `Begin` for the oracle's stable value (GTS, VTS).
    pub(crate) awaiting_stable: bool,
    /// What its scheme keeps for it.
    pub(crate) scheme: T,
    pub(crate) reads: Reads,
    /// Nodes a read was sent to that may hold a lock of it (`2pl`): told of an abort.
    pub(crate) read_nodes: BTreeSet<NodeId>,
    pub(crate) pending: Option<Pending>,
    /// The key being read.
    pub(crate) read: ReadInFlight,
    pub(crate) last_active: Timestamp,
    pub(crate) phase: Phase,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Round {
    /// Collecting the participants' votes.
    Prepare,
    /// `occ`: collecting the masters' validations of the reads.
    Validate,
    /// GTS: waiting for the oracle's commit timestamp, every lock held, nothing validated yet.
    Fetch,
}

pub(crate) enum Phase {
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
        /// The partitions prepared or validated on, at the epochs the requests carried: a
        /// change of any of them before the decision aborts the attempt (fail-over).
        epochs: Epochs,
        /// The earliest lease end the votes of masters holding shared locks carried
        /// ([`TimestampScheme::INSTALLS_AT_READ_MASTERS`]); `None`: no vote carried one.
        read_leases_end: Option<Timestamp>,
    },
}

/// A transaction with locks, or asking for them, at this participant.
pub struct Participant {
    reads: Reads,
    writes: Writes,
    /// Its prepare arrived. Under `2pl` a participant exists from its first read.
    preparing: bool,
    voted: bool,
    /// A read waiting for its shared lock (`2pl`).
    waiting_read: Option<(u32, Key)>,
    /// When its outcome was last asked for (or its latest read or vote, before the first time).
    last_query: Timestamp,
    /// The timestamp its yes vote proposed (zero until then, and for one recovered from the
    /// log). DST: a lower bound on its commit timestamp, computed when it took its exclusive
    /// locks here (readers wait for it while it is at or below their snapshot).
    pub(crate) floor: Timestamp,
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

/// Under fail-over, how far ahead of its coordinator's clock a DST commit timestamp may be
/// fixed (past the latest eviction's promoted floor): one further is held back until the clock
/// catches up, so that an eviction's floor plus this covers every claim the evicted master
/// made (`dst_occ`, *Fail-over*). Twice [`CLAIM_SLACK`], the lead a restart gives writers, so
/// that a restart alone never holds a commit.
pub const LEAD_BOUND: Duration = Duration::from_millis(100);

/// One node running a protocol of flavor `F`.
pub struct LockCommit<F: Flavor> {
    env: NodeEnv,
    mutant: Option<Mutant>,
    lock_timeout: Duration,
    /// One committed version per key (older ones wait for garbage collection; the snapshot
    /// schemes keep those a read-only transaction may still read). The metadata is DST's
    /// tuple read timestamp (`rts`: the highest claim or read-set install); the newest
    /// version's timestamp is the tuple's write timestamp.
    store: MvStore<Timestamp>,
    /// Above the timestamp of every version applied here: proposals exceed it.
    clock: Timestamp,
    locks: LockSets<Timestamp>,
    participants: FxHashMap<TxnId, Participant>,
    /// Transactions that ended at this participant, with when, so a late prepare is ignored.
    ended: FxHashMap<TxnId, Timestamp>,
    coord: FxHashMap<TxnId, Coord<<F::Scheme as TimestampScheme>::Txn>>,
    ids: TxnIds,
    decided: DecisionLog<Timestamp>,
    counters: Counters,
    /// The timestamp scheme's state.
    scheme: F::Scheme,
    /// Ticks since the start: announcements go every [`ANNOUNCE_EVERY`]th.
    ticks: u64,
    /// Who serves each partition, and this node's lease (fail-over; the placement's for good
    /// unless [`Flavor::FAILS_OVER`]).
    membership: Membership,
    /// Partitions copied to or from this node, and the prepares held meanwhile.
    copies: Copies<MsgOf<F>>,
    /// Reads, prepares and validations waiting for this node's lease.
    lease_waiters: LeaseWaiters<MsgOf<F>, MsgOf<F>>,
}

/// The keys of a transaction's `reads`, then of its `writes`.
fn keys<'a>(
    reads: &'a [(Key, Option<TxnId>)],
    writes: &'a [(Key, Option<Value>)],
) -> impl Iterator<Item = &'a Key> {
    (reads.iter().map(|(k, _)| k)).chain(writes.iter().map(|(k, _)| k))
}

/// Whether `writes` has a key of `partition`.
fn writes_in(placement: &augur_types::Placement, writes: &Writes, partition: PartitionId) -> bool {
    writes
        .iter()
        .any(|(key, _)| placement.partition_of(key) == partition)
}

/// Read horizons (DST, GTS, VTS) and the oracle's stable timestamp or vector (GTS, VTS) are
/// announced every this many ticks, not every tick: at 31 nodes, every tick made about 18,000
/// messages a second. An older announcement is still a valid lower bound (horizons and stable
/// values only rise), so announcing less often only delays garbage collection.
pub const ANNOUNCE_EVERY: u64 = 10;

impl<F: Flavor> LockCommit<F> {
    /// The newest committed version of `key` here: its value and writer.
    pub fn latest(&self, key: &Key) -> Option<(TxnId, Option<Value>)> {
        let v = self.store.get(key)?.latest_committed()?;
        Some((v.writer, v.value.clone()))
    }

    /// How many committed versions of `key` this node keeps (the snapshot schemes keep those a
    /// read-only transaction may still read).
    pub fn versions_kept(&self, key: &Key) -> usize {
        self.store.get(key).map_or(0, |e| e.version_count())
    }

    /// DST: `key`'s tuple read timestamp here (zero for a key never claimed or read).
    pub fn read_timestamp_of(&self, key: &Key) -> Timestamp {
        self.store.get(key).map_or(Timestamp::ZERO, |e| e.meta)
    }

    /// The timestamp scheme's state.
    pub fn scheme(&self) -> &F::Scheme {
        &self.scheme
    }

    fn id(&self) -> NodeId {
        self.env.id
    }

    /// Send `msg` to `to`, or handle it at once when `to` is this node.
    fn deliver(&mut self, ctx: &mut Ctx<'_, Self>, to: NodeId, msg: MsgOf<F>) {
        if to == self.id() {
            self.handle(ctx, to, msg);
        } else {
            ctx.send(to, msg);
        }
    }

    /// Handle, in order, the messages to this node a scheme's hook left to the engine.
    fn deliver_mail(&mut self, ctx: &mut Ctx<'_, Self>, mail: MailOf<F>) {
        let me = self.id();
        for msg in mail {
            self.handle(ctx, me, msg);
        }
    }

    /// The coordinator's side of the engine at `now`, for a scheme's hook.
    fn parts(
        &mut self,
        now: Timestamp,
    ) -> (
        &mut F::Scheme,
        Parts<'_, <F::Scheme as TimestampScheme>::Txn>,
    ) {
        let parts = Parts {
            me: self.env.id,
            store: &self.store,
            coord: &mut self.coord,
            decided: &self.decided,
            serving: self.membership.serving(now),
        };
        (&mut self.scheme, parts)
    }

    /// Propose the block of timestamps the scheme's oracle wants, if it wants one.
    fn reserve_if_wanted(&mut self) {
        if self.membership.active()
            && let Some((incarnation, stable)) = self.scheme.reservation_wanted()
        {
            self.membership.propose_reserve(incarnation, stable);
        }
    }

    /// The participant's side of the engine, for a scheme's hook.
    fn participating(&mut self) -> (&mut F::Scheme, Participating<'_>) {
        let node = Participating {
            me: self.env.id,
            store: &mut self.store,
            locks: &self.locks,
            participants: &self.participants,
        };
        (&mut self.scheme, node)
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: MsgOf<F>) {
        let gated = match &msg {
            Msg::Read { .. } | Msg::Validate { .. } | Msg::Prepare { .. } => true,
            Msg::Scheme(m) => {
                F::Scheme::gated_read(m).is_some() && self.mutant != Some(Mutant::UngatedReadAt)
            }
            _ => false,
        };
        let msg = match msg {
            msg if gated && self.membership.active() => {
                if let Msg::Prepare { txn, .. } = &msg
                    && self.prepare_seen(*txn)
                {
                    // A copy of a prepare already taken, or one arriving after the outcome.
                    return;
                }
                let now = ctx.now();
                match self.gate(now, &msg) {
                    Gate::Pass => msg,
                    Gate::Refuse => return self.refuse_request(ctx, msg),
                    Gate::AwaitLease if matches!(msg, Msg::Prepare { .. }) => {
                        return self.lease_waiters.wait_prepare(now, msg);
                    }
                    Gate::AwaitLease => return self.lease_waiters.wait_read(now, msg),
                    Gate::AwaitCopy => return self.copies.hold(msg),
                }
            }
            msg => msg,
        };
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
            } => {
                let read = SnapshotRead {
                    txn,
                    seq,
                    key,
                    snapshot,
                };
                let mut mail = MailOf::<F>::new();
                let (scheme, node) = self.participating();
                scheme.serve_snapshot_read(ctx, read, node, &mut mail);
                self.deliver_mail(ctx, mail);
            }
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
                ..
            } => self.prepare(ctx, txn, prio, reads, writes),
            Msg::Vote {
                txn,
                vote,
                deps,
                lease_end,
            } => {
                let vote = vote.map(|ts| (ts, deps, lease_end));
                self.vote(ctx, from, txn, Round::Prepare, vote)
            }
            Msg::Validate { txn, reads, ts, .. } => self.validate(ctx, txn, reads, ts),
            Msg::Validated { txn, vote } => {
                let vote = vote.map(|ts| (ts, Deps::new(), Timestamp::ZERO));
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
            Msg::Scheme(msg) => {
                let mut mail = MailOf::<F>::new();
                let (scheme, parts) = self.parts(ctx.now());
                let then = scheme.handle(ctx, from, msg, parts, &mut mail);
                self.deliver_mail(ctx, mail);
                self.reserve_if_wanted();
                match then {
                    Then::Nothing => {}
                    Then::GoOn(txn) => self.validate_or_decide(ctx, txn),
                    Then::Abort(txn, reason) => self.abort(ctx, txn, reason),
                }
            }
            Msg::Membership(msg) => {
                if let Some(change) = self.membership.on_message(ctx, from, msg) {
                    self.reconfigure(ctx, change);
                }
                self.run_lease_waiters(ctx);
            }
            Msg::CatchUpAsk { partition } => self.give_copy(ctx, from, partition),
            Msg::CatchUpState {
                partition,
                epoch,
                versions,
                tags,
            } => self.take_copy(ctx, from, (partition, epoch), versions, tags),
            Msg::CatchUpDone { partition, epoch } => {
                let current = self.membership.config().epoch(partition);
                if self.copies.taken(from, partition, epoch, current) {
                    self.membership.propose_rejoin(partition, from, epoch);
                }
            }
        }
    }

    /// Whether `txn`'s prepare was taken here already, or its outcome applied: a prepare for
    /// it now is a copy, or late, and is ignored.
    fn prepare_seen(&self, txn: TxnId) -> bool {
        self.participants.get(&txn).is_some_and(|p| p.preparing) || self.ended.contains_key(&txn)
    }

    // ----- fail-over -----

    /// Whether this node serves `msg` (a read, prepare or validation) now, under fail-over
    /// (see [`Gate`]).
    fn gate(&self, now: Timestamp, msg: &MsgOf<F>) -> Gate {
        let config = self.membership.config();
        let placement = &self.env.placement;
        let me = self.id();
        let in_step = |epochs: &Epochs, reads: &[(Key, Option<TxnId>)], writes: &[_]| {
            let needed = keys(reads, writes).map(|key| placement.partition_of(key));
            config.in_step(me, epochs, needed)
        };
        let (in_sync, prepared_on) = match msg {
            Msg::Read { key, .. } => {
                let partition = placement.partition_of(key);
                (config.is_in_sync(me, partition), &[][..])
            }
            Msg::Validate { epochs, reads, .. } => (in_step(epochs, reads, &[]), &[][..]),
            Msg::Prepare {
                epochs,
                reads,
                writes,
                ..
            } => (in_step(epochs, reads, writes), &epochs[..]),
            Msg::Scheme(m) => match F::Scheme::gated_read(m) {
                Some((_, _, key)) => {
                    let partition = placement.partition_of(key);
                    (config.is_in_sync(me, partition), &[][..])
                }
                None => return Gate::Pass,
            },
            _ => return Gate::Pass,
        };
        if !in_sync {
            Gate::Refuse
        } else if !self.membership.serving(now) {
            Gate::AwaitLease
        } else if prepared_on
            .iter()
            .any(|(p, _)| self.copies.holds_prepares(*p))
        {
            Gate::AwaitCopy
        } else {
            Gate::Pass
        }
    }

    /// Refuse a read, prepare or validation this node does not serve (out of sync, or no lease
    /// for a lease's duration): the coordinator aborts the attempt and its client retries.
    fn refuse_request(&mut self, ctx: &mut Ctx<'_, Self>, msg: MsgOf<F>) {
        let reason = AbortReason::Reconfigured;
        match msg {
            Msg::Read { txn, seq, .. } => {
                let to = txn.coordinator();
                self.deliver(ctx, to, Msg::ReadRefused { txn, seq, reason });
            }
            Msg::Prepare { txn, .. } => self.refuse(ctx, txn, reason),
            Msg::Validate { txn, .. } => {
                let vote = Err(reason);
                self.deliver(ctx, txn.coordinator(), Msg::Validated { txn, vote });
            }
            Msg::Scheme(m) => {
                if let Some((txn, seq, _)) = F::Scheme::gated_read(&m) {
                    let to = txn.coordinator();
                    self.deliver(ctx, to, Msg::ReadRefused { txn, seq, reason });
                }
            }
            _ => {}
        }
    }

    /// After the configuration group ran: with a lease now, serve what waited for one (each
    /// is gated again); without, refuse what waited a lease's duration.
    fn run_lease_waiters(&mut self, ctx: &mut Ctx<'_, Self>) {
        if self.lease_waiters.is_empty() {
            return;
        }
        let now = ctx.now();
        let me = self.id();
        if self.membership.serving(now) {
            let (reads, prepares) = self.lease_waiters.take_all();
            for msg in reads.into_iter().chain(prepares) {
                self.handle(ctx, me, msg);
            }
            return;
        }
        let patience = self.membership.lease_duration();
        let (reads, prepares) = self.lease_waiters.take_late(now, patience);
        for msg in reads.into_iter().chain(prepares) {
            self.refuse_request(ctx, msg);
        }
    }

    /// The configuration changed (`change`): abort the attempts coordinated here that prepared
    /// or validated on a partition whose epoch moved, stop awaiting acknowledgements from
    /// replicas in no in-sync set, ask at once about the transactions in doubt on the
    /// partitions this node now masters, and end the copies the change overtook or completed.
    fn reconfigure(&mut self, ctx: &mut Ctx<'_, Self>, change: Reconfiguration) {
        let me = self.id();
        let config = self.membership.config().clone();
        let mut overtaken: Vec<TxnId> = self
            .coord
            .iter()
            .filter(|(_, t)| match &t.phase {
                Phase::Voting { epochs, .. } => {
                    epochs.iter().any(|(p, _)| change.changed.contains(p))
                }
                Phase::Executing => false,
            })
            .map(|(txn, _)| *txn)
            .collect();
        overtaken.sort();
        for txn in overtaken {
            self.abort(ctx, txn, AbortReason::Reconfigured);
        }
        self.decided
            .keep_acknowledgements_of(ctx, |n| config.in_any_sync_set(n));
        let left: Vec<PartitionId> = (change.changed.iter().copied())
            .filter(|p| change.before.is_in_sync(me, *p) && !config.is_in_sync(me, *p))
            .collect();
        if !left.is_empty() {
            self.stop_serving(ctx, Some(&left));
        }
        for &partition in &change.changed {
            if config.is_master(me, partition) && !change.before.is_master(me, partition) {
                self.ask_about_prepared(partition);
            }
        }
        if self.copies.reconfigured(&config, me) {
            self.release_held(ctx);
        }
        let mut mail = MailOf::<F>::new();
        let (scheme, parts) = self.parts(ctx.now());
        scheme.configured(ctx, &config, &change.blocks, parts, &mut mail);
        self.deliver_mail(ctx, mail);
        self.reserve_if_wanted();
    }

    /// The transactions prepared on `partition` here (holding exclusive locks of its keys), in
    /// id order, each marked overdue so that the termination protocol asks its coordinator at
    /// the next tick.
    fn ask_about_prepared(&mut self, partition: PartitionId) -> Vec<TxnId> {
        let placement = &self.env.placement;
        let mut txns: Vec<TxnId> = self
            .participants
            .iter_mut()
            .filter(|(_, p)| p.voted && writes_in(placement, &p.writes, partition))
            .map(|(txn, p)| {
                p.last_query = Timestamp::ZERO;
                *txn
            })
            .collect();
        txns.sort();
        txns
    }

    /// The scheme's reads waiting here for keys of `partitions` are refused
    /// ([`TimestampScheme::stop_serving`]); every key's, when `None`.
    fn stop_serving(&mut self, ctx: &mut Ctx<'_, Self>, partitions: Option<&[PartitionId]>) {
        let placement = self.env.placement.clone();
        let not_served =
            |key: &Key| partitions.is_none_or(|ps| ps.contains(&placement.partition_of(key)));
        let mut mail = MailOf::<F>::new();
        self.scheme.stop_serving(ctx, &not_served, &mut mail);
        self.deliver_mail(ctx, mail);
    }

    /// Run again the prepares held for copies (those of partitions still being copied are
    /// held again).
    fn release_held(&mut self, ctx: &mut Ctx<'_, Self>) {
        let me = self.id();
        for msg in self.copies.take_held() {
            self.handle(ctx, me, msg);
        }
    }

    /// A replica out of sync asked this node, as `partition`'s master, for a copy: the
    /// transactions in doubt there are settled first (their coordinators asked at once), then
    /// prepares wait while those prepared since resolve, and the copy leaves.
    fn give_copy(&mut self, ctx: &mut Ctx<'_, Self>, to: NodeId, partition: PartitionId) {
        let now = ctx.now();
        let config = self.membership.config();
        if !self.membership.active()
            || !config.is_master(self.id(), partition)
            || config.is_in_sync(to, partition)
            || !self.membership.serving(now)
            || self.copies.giving(partition)
        {
            return;
        }
        let epoch = config.epoch(partition);
        let in_doubt = self.ask_about_prepared(partition);
        self.copies.give(partition, to, epoch, now, in_doubt);
        self.advance_copy(ctx, partition);
    }

    /// Move the copy of `partition` on as far as it can go: it leaves once no transaction
    /// prepares a write there (voted, or waiting for its locks).
    fn advance_copy(&mut self, ctx: &mut Ctx<'_, Self>, partition: PartitionId) {
        let placement = &self.env.placement;
        let participants = &self.participants;
        let Some(out) = self.copies.advance(
            partition,
            ctx.now(),
            |txn| participants.get(txn).is_some_and(|p| p.voted),
            || {
                participants
                    .values()
                    .any(|p| p.preparing && writes_in(placement, &p.writes, partition))
            },
        ) else {
            return;
        };
        let partition_of = |k: &Key| placement.partition_of(k);
        let versions = replica::partition_versions(&self.store, partition, &partition_of);
        ctx.charge(Work::reads(versions.len()));
        let mut tags: Vec<(TxnId, u64)> = (versions.iter())
            .flat_map(|(_, key_versions)| key_versions.iter())
            .map(|(writer, _, _)| (*writer, self.scheme.version_tag(*writer)))
            .filter(|(_, tag)| *tag > 0)
            .collect();
        tags.sort_unstable();
        tags.dedup();
        let msg = Msg::CatchUpState {
            partition,
            epoch: out.epoch,
            versions,
            tags,
        };
        ctx.send(out.to, msg);
    }

    /// The copy of `partition` this node asked for: it replaces what the node held there,
    /// durably, before the master hears it is installed.
    fn take_copy(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        (partition, epoch): (PartitionId, Epoch),
        versions: Vec<KeyVersions>,
        tags: Vec<(TxnId, u64)>,
    ) {
        if self.membership.config().is_in_sync(self.id(), partition)
            || !self.copies.asked(partition)
        {
            return;
        }
        ctx.persist(
            replica::Record::PartitionCopied {
                partition,
                watermark: Timestamp::ZERO,
            }
            .into(),
        );
        self.stop_serving(ctx, Some(&[partition]));
        let emptied = self.drop_partition(partition);
        ctx.charge(Work::writes(versions.len()));
        // The tags first, as at a commit: a torn log keeps at worst a tag no version carries.
        self.scheme.copied_tags(ctx, &tags);
        for (key, key_versions) in versions {
            ctx.persist(
                replica::Record::Versions {
                    key: key.clone(),
                    versions: key_versions.clone(),
                }
                .into(),
            );
            for (writer, ts, value) in key_versions {
                self.install(ts, writer, vec![(key.clone(), value)]);
            }
        }
        // Released once the copy is in, so that nothing they let go on sees the partition
        // empty.
        for txn in emptied {
            self.ended.insert(txn, ctx.now());
            self.release(ctx, txn);
        }
        self.deliver(ctx, from, Msg::CatchUpDone { partition, epoch });
    }

    /// Forget what this node held of `partition` (a copy replaces it): its keys' versions,
    /// and its keys in every transaction here. The transactions left with no key are
    /// returned, for their locks to go (a transaction with keys elsewhere keeps its locks
    /// until its outcome).
    fn drop_partition(&mut self, partition: PartitionId) -> Vec<TxnId> {
        let placement = &self.env.placement;
        self.store
            .clear_where(|key| placement.partition_of(key) == partition);
        let mut emptied = Vec::new();
        self.participants.retain(|txn, p| {
            p.writes
                .retain(|(key, _)| placement.partition_of(key) != partition);
            p.reads
                .retain(|(key, _)| placement.partition_of(key) != partition);
            let keep = !p.writes.is_empty() || !p.reads.is_empty();
            if !keep {
                emptied.push(*txn);
            }
            keep
        });
        emptied.sort();
        emptied
    }

    /// At every tick: a master moves its copies on and gives up on those stuck too long in a
    /// stage; a replica out of sync asks for the copies it needs.
    fn copy_tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        if !self.membership.active() {
            return;
        }
        let now = ctx.now();
        for partition in self.copies.partitions_given() {
            self.advance_copy(ctx, partition);
        }
        let gave_up = self.copies.give_up_stuck(now);
        let me = self.id();
        let config = self.membership.config();
        for &partition in self.env.placement.local_partitions(me) {
            if !config.is_in_sync(me, partition) && self.copies.ask_due(partition, now) {
                ctx.send(config.master(partition), Msg::CatchUpAsk { partition });
            }
        }
        if gave_up {
            self.release_held(ctx);
        }
    }

    /// The largest floor the configuration gives a partition of `writes` (zero without
    /// fail-over; see [`TimestampScheme::proposal`]).
    fn eviction_floor(&self, writes: &Writes) -> Timestamp {
        if !self.membership.active() {
            return Timestamp::ZERO;
        }
        let config = self.membership.config();
        let placement = &self.env.placement;
        (writes.iter())
            .map(|(key, _)| config.floor(placement.partition_of(key)))
            .max()
            .unwrap_or(Timestamp::ZERO)
    }

    /// The epochs of the partitions of the keys read or written, ascending (none without
    /// fail-over).
    fn epochs_of(&self, reads: &Reads, writes: &Writes) -> Epochs {
        if !self.membership.active() {
            // Every epoch is zero for good: nothing to check, nothing to send.
            return Epochs::new();
        }
        let (placement, config) = (&self.env.placement, self.membership.config());
        config.epochs_of(keys(reads, writes).map(|k| placement.partition_of(k)))
    }

    /// Every write replica applied `txn`'s commit at `ts`: what the scheme owes then (GTS
    /// releases the timestamp, VTS installs the tag).
    fn applied_everywhere(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, ts: Timestamp) {
        let mut mail = MailOf::<F>::new();
        let (scheme, parts) = self.parts(ctx.now());
        scheme.applied_everywhere(ctx, txn, ts, parts, &mut mail);
        self.deliver_mail(ctx, mail);
    }

    // ----- coordinator: client requests -----

    /// The coordinator of a transaction that is executing with no request in flight, or the
    /// answer owed to a request that cannot proceed.
    /// (It borrows only the coordinated transactions, `coord`, so the configuration can be
    /// read beside it.)
    fn executing(
        coord: &mut FxHashMap<TxnId, Coord<<F::Scheme as TimestampScheme>::Txn>>,
        txn: TxnId,
    ) -> Result<&mut Coord<<F::Scheme as TimestampScheme>::Txn>, ClientReply> {
        let Some(t) = coord.get_mut(&txn) else {
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
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        if !t.read.awaits(seq) || !matches!(t.phase, Phase::Executing) || t.pending.is_none() {
            return;
        }
        let key = t.read.answered(seq).expect("a pending read names its key");
        let snapshot_read = <F::Scheme as TimestampScheme>::SNAPSHOTS && t.read_only;
        self.scheme.read_returned(t, version, ts, tag);
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
        let waiting = self
            .coord
            .get(&txn)
            .is_some_and(|t| t.read.awaits(seq) && matches!(t.phase, Phase::Executing));
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
        let mut mail = MailOf::<F>::new();
        let (scheme, parts) = self.parts(ctx.now());
        scheme.aborted(ctx, txn, &t.scheme, parts, &mut mail);
        self.deliver_mail(ctx, mail);
        if let Some(pending) = t.pending {
            pending.answer(ctx, ClientReply::Aborted(reason));
        }
    }

    /// A vote (`Round::Prepare`) or a validation (`Round::Validate`) from `from`: yes with a
    /// proposal, the dependencies it carries and the voter's lease end (zero: none), or no.
    fn vote(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        of: Round,
        vote: Result<(Timestamp, Deps, Timestamp), AbortReason>,
    ) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        let Phase::Voting {
            round,
            waiting,
            commit_ts,
            read_leases_end,
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
            Ok((ts, deps, lease_end)) => {
                waiting.remove(&from);
                self.scheme.voted(&mut t.scheme, commit_ts, ts, &deps);
                if lease_end != Timestamp::ZERO {
                    *read_leases_end =
                        Some(read_leases_end.map_or(lease_end, |e| e.min(lease_end)));
                }
            }
        }
        if !waiting.is_empty() {
            return;
        }
        match of {
            Round::Prepare => self.validate_or_decide(ctx, txn),
            Round::Validate => self.decide(ctx, txn),
            // The oracle's answer is not a vote (GTS's `IssuedTs`).
            Round::Fetch => {}
        }
    }

    /// Every participant voted yes: first the scheme's round, if it has one (GTS fetches the
    /// commit timestamp here, inside the critical section: every write lock held, no read
    /// validated yet, trap T-9); then validate the reads left to validate (`occ`), or decide.
    fn validate_or_decide(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if self.membership.active()
            && let Some(Phase::Voting { commit_ts, .. }) = self.coord.get(&txn).map(|t| &t.phase)
            && let Some(at) =
                (self.scheme).fix_not_before(*commit_ts, self.membership.config().latest_floor())
            && ctx.now() < at
        {
            self.counters.commit_holds += 1;
            return ctx.set_timer(at.since(ctx.now()), Timer::Hold(txn));
        }
        if let Some(t) = self.coord.get_mut(&txn)
            && let Some((to, msg)) = self.scheme.before_decision(txn, t)
        {
            return self.deliver(ctx, to, Msg::Scheme(msg));
        }
        let placement = self.env.placement.clone();
        let Some(Phase::Voting {
            to_validate,
            commit_ts,
            read_leases_end,
            ..
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        // The commit timestamp is fixed now: only while the masters holding the shared locks
        // are surely still leased, when they install it at the decision (DST under 2PL): a
        // master evicted before its install is then covered by its successor's floor.
        if let Some(end) = *read_leases_end
            && !self.membership.surely_leased(ctx.now(), end)
            && self.mutant != Some(Mutant::NoReadLease)
        {
            self.counters.read_lease_aborts += 1;
            return self.abort(ctx, txn, AbortReason::Reconfigured);
        }
        if to_validate.is_empty() {
            return self.decide(ctx, txn);
        }
        // DST (T-4): the commit timestamp is fixed here, before any validation, and each
        // validation installs it; the validations answer with it, so it does not move.
        let ts = *commit_ts;
        let reads = std::mem::take(to_validate);
        let config = self.membership.config();
        let replicas = |p: PartitionId| config.in_sync(p);
        let by_master =
            ByReplica::group_among(&placement, &replicas, ReadsAt::Master, &reads, Vec::new());
        let requests: Vec<(NodeId, Reads, Epochs)> = (by_master.parts.into_iter())
            .map(|(node, (reads, _))| {
                let epochs = self.epochs_of(&reads, &Vec::new());
                (node, reads, epochs)
            })
            .collect();
        let Some(Phase::Voting {
            round,
            waiting,
            epochs: voted_at,
            ..
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        *round = Round::Validate;
        *waiting = requests.iter().map(|(node, ..)| *node).collect();
        voted_at.extend(requests.iter().flat_map(|(_, _, e)| e.iter().copied()));
        for (node, reads, epochs) in requests {
            let msg = Msg::Validate {
                txn,
                reads,
                ts,
                epochs,
            };
            self.deliver(ctx, node, msg);
        }
    }

    /// Every participant voted yes (and every read validated): log the commit (until every
    /// write replica applied it), answer the client, tell the participants.
    fn decide(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(mut t) = self.coord.remove(&txn) else {
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
        let writes = !write_replicas.is_empty();
        let tag = self.scheme.tag_decision(ctx, txn, &mut t.scheme, writes);
        // This node's own participant applies within this handler, after the decision's
        // record: it needs no acknowledgement.
        let others = write_replicas.into_iter().filter(|n| *n != me).collect();
        self.decided.decide(ctx, txn, commit_ts, others);
        if t.read_only {
            self.counters.read_only_committed += 1;
        }
        self.scheme.told_commit(t.client, commit_ts);
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
        if self.scheme.owes_applied(&t.scheme, tag) && self.decided.get(&txn).is_none() {
            self.applied_everywhere(ctx, txn, commit_ts);
        }
    }

    /// A participant asks what became of `txn` (see the module docs, "Failures").
    fn query_outcome(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId) {
        // Still running here: its decision, or its abort, will come.
        let running = self.coord.contains_key(&txn);
        if let Some(commit) = replica::outcome(&self.decided, txn, running) {
            // VTS: a commit still to be applied somewhere is owed the oracle, with its tag.
            let tag = self.scheme.decision_tag(txn);
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
            tag: latest.map_or(0, |v| self.scheme.version_tag(v.writer)),
        };
        self.deliver(ctx, txn.coordinator(), msg);
        if self.mutant == Some(Mutant::EarlyReadUnlock) {
            // Not two-phase: an executing transaction holds only shared locks, all released.
            self.release(ctx, txn);
        }
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
        if self.prepare_seen(txn) {
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
        let above = ctx.now().max(self.clock.next());
        let eviction_floor = self.eviction_floor(&p.writes);
        let ts = (self.scheme).proposal(&self.store, &p.writes, above, eviction_floor);
        let deps = self.scheme.overwritten(&self.store, &p.writes);
        let p = self.participants.get_mut(&txn).expect("checked above");
        p.floor = ts;
        p.voted = true;
        p.last_query = ctx.now();
        ctx.persist(Record::Prepared {
            txn,
            reads: p.reads.iter().map(|(k, _)| k.clone()).collect(),
            writes: p.writes.clone(),
        });
        // The end of this node's lease, for a coordinator that fixes the commit timestamp
        // only while the masters that install it at the read set are leased.
        let lease_end = if self.membership.active()
            && F::Scheme::INSTALLS_AT_READ_MASTERS
            && F::LOCKING == Locking::TwoPhase
            && !p.reads.is_empty()
        {
            self.membership.lease_end()
        } else {
            Timestamp::ZERO
        };
        let vote = Ok(ts);
        let msg = Msg::Vote {
            txn,
            vote,
            deps,
            lease_end,
        };
        self.deliver(ctx, txn.coordinator(), msg);
    }

    /// `occ`'s validation at a master: every key read still has the version read and no other
    /// transaction holds its lock (it may be committing a new version). Nothing is kept.
    fn validate(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reads: Reads, ts: Timestamp) {
        ctx.charge(Work::reads(reads.len()));
        let valid = reads_unchanged(&self.store, &reads)
            && !reads
                .iter()
                .any(|(key, _)| self.locks.written_by_other(txn, key));
        let vote = if valid {
            let above = ctx.now().max(self.clock.next());
            Ok(self
                .scheme
                .validated(ctx, &mut self.store, &reads, ts, above))
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
                lease_end: Timestamp::ZERO,
            },
        );
        self.release(ctx, txn);
    }

    /// Release `txn`'s locks; the reads and prepares that now hold all theirs go on, then the
    /// scheme's reads that waited for `txn` (DST).
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
        // A node without a lease answers no read that waited here: it may have been evicted,
        // and `txn` presumed aborted by a coordinator that no longer counts it.
        if self.membership.active() && !self.membership.serving(ctx.now()) {
            self.stop_serving(ctx, None);
        }
        let mut mail = MailOf::<F>::new();
        let (scheme, node) = self.participating();
        scheme.released(ctx, txn, node, &mut mail);
        self.deliver_mail(ctx, mail);
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
        let wrote = !p.writes.is_empty();
        // The keys read under shared locks here, held until now (`2pl`): DST installs the
        // commit timestamp into them before the locks go.
        let read_locked = match F::LOCKING {
            Locking::TwoPhase => &p.reads[..],
            Locking::AtCommit | Locking::Optimistic => &[],
        };
        self.scheme.committing(
            ctx,
            &mut self.store,
            txn,
            read_locked,
            wrote,
            commit_ts,
            tag,
        );
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
        for (key, value) in writes {
            let entry = self.store.entry(&key);
            entry.put_committed(txn, commit_ts, value);
            self.scheme.installed(&mut entry.meta, commit_ts);
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
        // The scheme's duties (GTS's and VTS's oracle, VTS's owed tags), then its garbage
        // collection.
        let mut mail = MailOf::<F>::new();
        let (scheme, parts) = self.parts(now);
        scheme.tick(ctx, parts, announce, &mut mail);
        self.deliver_mail(ctx, mail);
        self.reserve_if_wanted();
        self.scheme
            .collect_garbage(ctx, &mut self.store, &self.coord, announce);
        self.copy_tick(ctx);
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
    }

    /// Rebuild state from one durable record (see [`Record`]).
    fn replay(&mut self, record: RecordOf<F>) {
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
            // The scheme's: DST's claim ceiling, GTS's oracle bound and stable timestamp
            // (`Served`, `Watermark`), VTS's tags, owed installs and stable vector.
            record @ (Record::Kit(Kit::Served { .. } | Kit::Watermark(_)) | Record::Scheme(_)) => {
                self.scheme.replay(record)
            }
            // The configuration group's: collected by `recover`, which restores the group.
            Record::Kit(Kit::Membership(_)) => {}
            Record::Kit(Kit::PartitionCopied { partition, .. }) => {
                for txn in self.drop_partition(partition) {
                    self.locks.release(txn);
                }
            }
            // Not written by this engine.
            Record::Kit(Kit::Installed { .. }) => {}
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
        let requests: Vec<(NodeId, Reads, Writes, Epochs)> = (by_replica.parts.into_iter())
            .map(|(node, (reads, writes))| {
                let epochs = self.epochs_of(&reads, &writes);
                (node, reads, writes, epochs)
            })
            .collect();
        let mut voted_at: Epochs = requests
            .iter()
            .flat_map(|(.., e)| e.iter().copied())
            .collect();
        voted_at.sort();
        voted_at.dedup();
        let t = self.coord.get_mut(&txn).expect("the caller checked");
        let prio = t.prio;
        t.pending = Some(pending);
        t.last_active = now;
        // DST's RW1 starts from the begin time and the versions read; the votes add the
        // floors of the tuples locked.
        let commit_ts = self.scheme.commit_ts_start(t);
        t.phase = Phase::Voting {
            round: Round::Prepare,
            waiting: participants.iter().copied().collect(),
            participants,
            write_replicas: by_replica.write_replicas,
            commit_ts,
            to_validate,
            epochs: voted_at,
            read_leases_end: None,
        };
        ctx.set_timer(self.env.options.participant_timeout, Timer::Votes(txn));
        if requests.is_empty() {
            return self.validate_or_decide(ctx, txn);
        }
        for (node, reads, writes, epochs) in requests {
            let msg = Msg::Prepare {
                txn,
                prio,
                reads,
                writes,
                epochs,
            };
            self.deliver(ctx, node, msg);
        }
    }
}

impl<F: Flavor> InteractiveCoordinator for LockCommit<F> {
    fn begin(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        read_only: bool,
        age: Timestamp,
    ) {
        let txn = self.ids.allocate(ctx);
        let now = ctx.now();
        // A retry keeps its first attempt's age (its client says how long it has been trying),
        // so under wait-die it grows older than newcomers instead of dying behind them for
        // ever. Only `2pl` waits by age; the other flavours never compare it.
        let prio = match F::LOCKING {
            Locking::TwoPhase => age,
            Locking::AtCommit | Locking::Optimistic => now,
        };
        let (ts, fetch) = match self.scheme.begin(now, txn, pending.client, read_only) {
            Begin::At(ts) => (ts, None),
            // Set when the oracle's stable timestamp (vector) arrives.
            Begin::FetchStable(oracle, msg) => (Timestamp::ZERO, Some((oracle, msg))),
        };
        let awaiting_stable = fetch.is_some();
        self.coord.insert(
            txn,
            Coord {
                client: pending.client,
                read_only,
                prio,
                ts,
                awaiting_stable,
                scheme: Default::default(),
                reads: Vec::new(),
                read_nodes: BTreeSet::new(),
                pending: None,
                read: ReadInFlight::default(),
                last_active: ctx.now(),
                phase: Phase::Executing,
            },
        );
        if let Some((oracle, msg)) = fetch {
            // GTS, VTS: `Begun` waits for the oracle's stable timestamp (one round trip).
            let t = self.coord.get_mut(&txn).expect("just inserted");
            t.pending = Some(pending);
            ctx.set_timer(self.env.options.participant_timeout, Timer::Stable(txn));
            return self.deliver(ctx, oracle, Msg::Scheme(msg));
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
        let t = match Self::executing(&mut self.coord, txn) {
            Ok(t) => t,
            Err(reply) => return pending.answer(ctx, reply),
        };
        t.pending = Some(pending);
        t.last_active = now;
        let seq = t.read.begin(key.clone());
        let snapshot_read = <F::Scheme as TimestampScheme>::SNAPSHOTS && t.read_only;
        let partition = placement.partition_of(&key);
        let config = self.membership.config();
        let replica = match F::LOCKING {
            Locking::AtCommit => config.closest_in_sync(&placement, me, partition),
            // The master holds the locks (2PL's shared ones, OCC's that validation checks).
            Locking::Optimistic | Locking::TwoPhase => config.master(partition),
        };
        if F::LOCKING == Locking::TwoPhase && !snapshot_read {
            t.read_nodes.insert(replica);
        }
        if replica != me {
            let timeout = self.env.options.participant_timeout;
            ctx.set_timer(timeout, Timer::Read(txn, seq));
        }
        // The scheme's read: the newest version, or one at a snapshot (timestamp or vector).
        let t = self.coord.get(&txn).expect("executing");
        let msg = self.scheme.read(t, txn, seq, key);
        self.deliver(ctx, replica, msg);
    }

    fn commit(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, writes: Writes) {
        let now = ctx.now();
        let mutant = self.mutant;
        let placement = self.env.placement.clone();
        let t = match Self::executing(&mut self.coord, txn) {
            Ok(t) => t,
            Err(reply) => return pending.answer(ctx, reply),
        };
        if t.read_only && !writes.is_empty() {
            let err = RequestError::WriteInReadOnly(txn);
            return pending.answer(ctx, ClientReply::Rejected(err));
        }
        if <F::Scheme as TimestampScheme>::SNAPSHOTS && t.read_only {
            // RO: its reads form a snapshot at its timestamp; nothing to check or tell anyone.
            let commit_ts = t.ts;
            let client = t.client;
            self.coord.remove(&txn);
            self.counters.read_only_committed += 1;
            self.scheme.told_commit(client, commit_ts);
            return pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
        let unvalidated_read_only =
            F::READ_ONLY == ReadOnly::Unvalidated || mutant == Some(Mutant::NoReadOnlyValidation);
        let unvalidated = (t.read_only && unvalidated_read_only)
            || (F::LOCKING == Locking::Optimistic && mutant == Some(Mutant::NoReadValidation));
        let reads = if unvalidated { &[][..] } else { &t.reads[..] };
        // The configuration's in-sync replicas (the placement's, without fail-over).
        let config = self.membership.config();
        let replicas = |p: PartitionId| config.in_sync(p);
        let group =
            |at, reads, writes| ByReplica::group_among(&placement, &replicas, at, reads, writes);
        let (by_replica, to_validate) = match F::LOCKING {
            // Every replica of every key read or written locks and validates.
            Locking::AtCommit => (group(ReadsAt::EveryReplica, reads, writes), Vec::new()),
            // Lock the write set everywhere, then validate the reads at their masters.
            Locking::Optimistic => (group(ReadsAt::EveryReplica, &[], writes), reads.to_vec()),
            // The masters read from (holding the shared locks), every replica of a key written.
            Locking::TwoPhase => (group(ReadsAt::Master, reads, writes), Vec::new()),
        };
        if by_replica.parts.is_empty() && to_validate.is_empty() {
            // Nothing read or written (or an unvalidated read-only transaction: `rc`'s, a
            // mutant's). A 2PL mutant
            // read-only transaction still releases what it holds.
            let t = self.coord.remove(&txn).expect("executing");
            if t.read_only {
                self.counters.read_only_committed += 1;
            }
            for node in t.read_nodes.iter().copied() {
                self.deliver(ctx, node, Msg::abort(txn));
            }
            // Nothing to order: the scheme says where it goes.
            let commit_ts = self.scheme.empty_commit_ts(&t, now);
            self.scheme.told_commit(t.client, commit_ts);
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
    type Msg = MsgOf<F>;
    type Timer = Timer;
    type Record = RecordOf<F>;
    const FORMS: &'static [augur_contract::forms::RequestForm] = INTERACTIVE_AND_ONE_SHOT;

    fn new(env: &NodeEnv) -> Self {
        let policy = match F::LOCKING {
            Locking::AtCommit => Policy::Wait,
            Locking::Optimistic => Policy::NoWait,
            Locking::TwoPhase => Policy::WaitDie,
        };
        let mutant = env
            .options
            .mutant
            .as_deref()
            .and_then(|name| Mutant::offered(&F::INFO, name));
        LockCommit {
            env: env.clone(),
            mutant,
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
            counters: Counters::default(),
            scheme: F::Scheme::new(env, mutant),
            ticks: 0,
            membership: restore_membership::<F>(env, Vec::new()),
            copies: Copies::default(),
            lease_waiters: LeaseWaiters::default(),
        }
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = RecordOf<F>>) -> Self {
        let mut node = <LockCommit<F> as Protocol>::new(env);
        let mut group = Vec::new();
        for record in records {
            match record {
                Record::Kit(replica::Record::Membership(record)) => group.push(record),
                record => node.replay(record),
            }
        }
        node.membership = restore_membership::<F>(env, group);
        node.scheme.recovered(&node.decided);
        node
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(RecordOf<F>)) {
        self.scheme.checkpoint(emit);
        self.ids.checkpoint::<RecordOf<F>, Timestamp>(emit);
        replica::checkpoint_versions::<_, _, RecordOf<F>>(&self.store, emit);
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
        self.membership.checkpoint(emit);
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
        self.membership.on_start(ctx);
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        serve_interactive(self, ctx, request);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: MsgOf<F>) {
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
            Timer::Locks(txn) => self.lock_timeout(ctx, txn),
            Timer::ReadLock(txn, seq) => self.read_lock_timeout(ctx, txn, seq),
            Timer::Stable(txn) => {
                if self.coord.get(&txn).is_some_and(|t| t.awaiting_stable) {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
            Timer::Membership(timer) => {
                if let Some(change) = self.membership.on_timer(ctx, timer) {
                    self.reconfigure(ctx, change);
                }
                self.run_lease_waiters(ctx);
            }
            Timer::Hold(txn) => {
                let held = self.coord.get(&txn).is_some_and(|t| {
                    matches!(&t.phase, Phase::Voting { round: Round::Prepare, waiting, .. }
                        if waiting.is_empty())
                });
                if held {
                    self.validate_or_decide(ctx, txn);
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
            ("commit_holds", c.commit_holds),
            ("read_lease_aborts", c.read_lease_aborts),
            (
                "prepared_now",
                self.participants.values().filter(|p| p.voted).count() as u64,
            ),
            ("decisions_kept_now", self.decided.iter().count() as u64),
        ];
        self.scheme.counters(&mut counters);
        counters.extend(self.membership.counters());
        counters
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        if !self.membership.active() {
            return Vec::new();
        }
        let mut left = self.membership.leftovers();
        left.push(("partition_copies_in_progress", self.copies.in_progress()));
        left.push(("waiting_for_a_lease", self.lease_waiters.len()));
        left
    }

    /// The configuration group's leader (fail-over), which `leader-crash` targets.
    fn leader(&self) -> Option<NodeId> {
        self.membership.leader()
    }

    fn master_of(&self, partition: PartitionId) -> Option<NodeId> {
        self.membership.master_of(partition)
    }
}

/// A node's membership, from its durable group records (none for a new node).
fn restore_membership<F: Flavor>(env: &NodeEnv, records: Vec<SequencerRecord>) -> Membership {
    let mut membership = Membership::restore(env, Promotion::InSync, F::FAILS_OVER, records)
        .unwrap_or_else(|e| panic!("the configuration group cannot start: {e}"));
    membership.set_initial_oracle(scheme::oracle_of(env));
    membership
}
