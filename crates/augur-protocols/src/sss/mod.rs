//! `sss`: external consistency with abort-free read-only transactions (Kishi, Peluso, Korth,
//! Palmieri, "SSS: Scalable Key-Value Store with External Consistent and Abort-free Read-only
//! Transactions", ICDCS 2019, §III, Algorithms 1–6).
//!
//! **Guarantee: strict serializability** ("external consistency": one serial order, consistent
//! with the order in which clients were told of commits). Read-only transactions never abort
//! because of concurrency: they take no locks, are never validated and never retried. (One
//! exception, stated in `NLog` (`sss/nlog.rs`): a read-only transaction that outlives the garbage-collection
//! retention may find the versions it needs gone and end with `SnapshotTooOld`.)
//!
//! # The protocol (§III)
//!
//! * **Vector clocks.** Each node `i` keeps `NodeVC`, whose entry `i` counts the commits it
//!   took part in as a replica of a written key, and `NLog`, the commit vector clocks of the
//!   transactions applied here in apply order (`NLog` (`sss/nlog.rs`)). Every version carries its writer's
//!   commit vector clock (here: its position in `NLog`).
//! * **Update transactions** read the newest applied version of each key from the first replica
//!   to answer (reads go to every replica: "the fastest replica"), buffer their writes, and commit
//!   by two-phase commit : every replica of a read or written key locks it
//!   (exclusive for writes, shared for reads, waiting at most `lock_timeout`), validates that each
//!   key read still has the version read, and votes with its clock (incremented by a replica of a
//!   written key). The coordinator takes the entrywise maximum of the votes, gives every write
//!   replica the same entry (`xactVN`, the largest of theirs) and decides. Write replicas apply
//!   decided transactions in the order of their own entry (`CommitQ`); applying is the *internal
//!   commit*: the versions become visible to update transactions and the vector clock enters
//!   `NLog`.
//! * **Snapshot-queues** (`sss/queue.rs`). Each key keeps, at each replica, the read-only transactions
//!   that read it (R entries, with the snapshot they read at) and the update transactions that
//!   wrote it and are *pre-committed* (W entries). After its internal commit a writer enters the
//!   queues of its keys and waits there until no read-only transaction with a smaller snapshot is
//!   left: those read an older version and are serialized before it, so the writer's client must
//!   not hear of it before they finish. Then the replica acknowledges; with every write
//!   replica's acknowledgement the coordinator answers the client: the *external commit*.
//! * **Read-only transactions** (`sss/reads.rs`) read, at the first replica of each key to
//!   answer, the newest version whose writer they do not exclude: *exclusion* (§III-C) skips
//!   every writer that is not final at the replica, so that two read-only transactions never
//!   order two non-conflicting writers differently. They enter the key's queue (holding every
//!   writer of the key they did not see), and on commit send `Remove` to every replica they
//!   read at, which releases the writers they held.
//! * **Transitive anti-dependencies (`PropagatedSet`).** An update transaction that reads a key
//!   takes the read-only transactions in that key's queue with it and, at its pre-commit, puts
//!   them into the queues of the keys it writes: it read from a writer they hold, so it is held
//!   too. `Remove` reaches those queues through the read-only transaction's coordinator, which
//!   the holding replica subscribes to (the paper forwards `Remove` along the chain; see the
//!   deviations below).
//!
//! # Finality and the release rule (not in the paper): what a read-only transaction may read
//!
//! The paper bounds a read-only transaction's reads by vector clocks (A6: the newest version
//! within `maxVC` at the nodes already read, excluding held writers). The checker and the
//! scenarios in `tests/sss_scenarios.rs` showed that rule, read literally, lets through the
//! anomalies SSS exists to prevent: a reader that read a held writer answers and a later
//! reader excludes it (`G-single-realtime`); exclusion scoped to one key orders two writers
//! differently for two readers (the digest's T2, a long fork); a commit clock carries entries
//! of transactions decided but not yet applied (T3), so a reader bounded below them misses a
//! transaction that already answered its client. Closing those holes while keeping the clock
//! bounds needed every update to wait until every transaction its clock dominates had
//! committed externally, and under load nearly every clock dominates the one before: external
//! commits left one at a time (measured: 2,922 tps with a p50 of 17 ms and a p99 of 18.75 ms
//! on `ycsb-t`, `lan`, 50 clients, no read-only transaction at all). `sss` therefore keeps the
//! paper's structures and chooses versions by *finality* instead:
//!
//! * **Final.** A writer is *final* at a replica once its coordinator said it committed
//!   externally (`Released`), and *tentatively final* from this replica's acknowledgement
//!   until then. A read-only read skips every writer that is neither, and a read that would
//!   return a tentatively final writer's version waits until it is final (or its round is
//!   withdrawn, below). The writers a read skipped travel with the reader, which skips them
//!   everywhere from then on.
//! * **Holding.** A reader's R entry in a key's queue holds every writer of the key it did not
//!   see: those applied after it read, and those it skipped (`KeyQueue::holds`). A held writer
//!   does not acknowledge, so it cannot become final while the reader runs.
//! * **The release rule.** A committed update becomes final only after every committed
//!   transaction it depends on: the writers of the versions it read and of the versions it
//!   overwrites, and the update transactions that read the versions it overwrites (each
//!   replica lists, per key, the committed update readers of the current version not known
//!   final). Participants name the ones they do not know final in their votes; the decision
//!   carries them (`Decision::after`); the coordinator asks each one's coordinator
//!   (`AwaitFinal`), and the write replicas acknowledge only once every one answered.
//!   Transactions that do not conflict never wait for each other.
//! * **Why this is strictly serializable.** Finality is closed under dependencies (a final
//!   transaction's predecessors became final before it), so at any moment the final
//!   transactions form a prefix of a serial order of the committed updates: order them by when
//!   they became final. A reader sees, for each key, the newest version final when it read
//!   the key, and no writer of a key it read can become final until it ends; so it reads
//!   exactly the state after the final prefix as of its last read. Every update told of its
//!   commit before the reader began is final (or tentatively final, and waited for) by then.
//! * **Rounds.** An acknowledgement promises that no new reader will hold the writer. That
//!   promise can close a cycle (a reader waits for a tentatively final writer whose other
//!   replica is held by a reader waiting for another such writer), so it is scoped to a
//!   finalization round: if not every write replica acknowledged within `finalize_timeout`
//!   (doubling with each try), the coordinator withdraws the round (`Finalize`), waiting reads
//!   read around the writer, and the replicas acknowledge a new round when free.
//! * **Starvation control (§III-E).** A stream of readers could hold a writer forever: a
//!   reader not yet in a key's queue, arriving while a writer of the key has been held longer
//!   than `admission_threshold`, backs off for that long before it reads. The back-off is
//!   bounded, not a wait for the writer, because a reader may hold, elsewhere, a writer the
//!   starving one waits for.
//!
//! With them, `augur check` passes every seed of the CI sweep (see `docs/results/sss.md` for
//! figures). Vector clocks still order each node's commits (`xactVN`, `CommitQ`, `NLog`) as
//! the paper's Algorithms 1–4 do; read-only transactions no longer read them.
//!
//! The paper's `PropagatedSet` and `Remove` forwarding (by subscription) are kept. The
//! `PropagatedSet` no longer carries safety: the release rule makes a writer that read from a
//! held writer wait until it is final anyway, so the mutant `no-propagated-set` is marked
//! *masked* (50 seeds of each workload under all faults pass). Applying `CommitQ` out of order
//! (`apply-out-of-order`) is masked too: versions are chosen by finality, and writers of one key
//! are applied in lock order whatever `CommitQ` says. Forwarding still carries liveness:
//! without it (`no-remove-forwarding`) a reader inherited at a replica where it never read is
//! never removed there and holds that key's writers forever, which the liveness phase of
//! `augur check` (or its quiescence check: nothing left in any snapshot-queue, `CommitQ` or
//! hold once the cluster is left alone) catches within 12 seeds of each workload. Without the
//! release rule (`no-dependency-wait`, or `no-anti-dependencies`, which forgets update readers
//! of overwritten versions) the checker finds anomalies.
//!
//! The paper's two worked examples are scenario tests (`tests/sss_scenarios.rs`): Fig. 1 (a
//! reader holds the reply of the update that overwrote what it read) and Fig. 2 (two readers
//! on different nodes order two non-conflicting updates the same way) pass, and fail as they
//! should under `no-reader-entries` (the update answers first) and `no-exclusion` (the long
//! fork: each reader sees the update the other holds).
//!
//! # Deviations from the printed algorithms, each to close a hole
//!
//! The digest `../shared/papers/sss.md` §6.2 lists traps of the literal pseudo-code; this module
//! resolves them as follows (besides reading by finality, above).
//!
//! * **T1, validation by identity.** A1:L35 validates a read by comparing vector clocks, which
//!   lets a lost update through once a later read has raised the transaction's clock. A replica
//!   validates that the newest version of each key read is still the one read (its writer), as
//!   the prose says. The literal rule is the mutant `vc-validation`.
//! * **T4, ties.** `CommitQ` is ordered by `(vc[i], transaction id)`: `xactVN` can give two
//!   transactions the same entry. Snapshots in the queues are `NLog` positions, which never tie.
//! * **T6, propagated snapshots** are other nodes' counters and cannot be compared with this
//!   node's. A propagated R entry is given the snapshot just below its carrier's `NLog`
//!   position here: the inherited reader precedes the carrier (which read from a writer the
//!   reader holds) and every later writer of the key, and nothing earlier.
//! * **T7 and T5, `Remove` forwarding.** Channels may reorder and lose messages, so `Remove`
//!   can overtake a read, and the paper does not say how a node forwards it. A replica remembers
//!   the read-only transactions it has seen removed (tombstones, kept for the retention) and
//!   never queues them again, and for every R entry it holds for a transaction coordinated
//!   elsewhere — propagated entries at once, direct ones once they are older than
//!   `participant_timeout` — it subscribes to that transaction's coordinator, which answers
//!   with `Remove` when the transaction ends, or at once when it does not know it (finished,
//!   or lost in a crash). That replaces multi-hop forwarding and also recovers lost `Remove`s.
//! * **T8.** An update transaction with an empty write set still validates its reads by 2PC
//!   (it is answered once every participant voted yes); only transactions begun read-only take
//!   the read-only path.
//! * **T9.** Replicas of keys a transaction only read release its shared locks at the decision;
//!   a prepare arriving after its transaction's abort is ignored.
//! * **T10.** The client hears of an update's commit only with the acknowledgement of every
//!   write replica of every written key (the mutant `reply-at-internal-commit` does not wait).
//! * **Deadlocks.** Replicas of a key lock it independently, so two transactions writing the
//!   same key can each hold it at one replica and wait at the other; with the paper's lock
//!   timeout alone they wait it out, retry and meet again, and a prepared transaction waiting
//!   at the head of `CommitQ` holds back every later commit at its node (measured: 78% of
//!   update attempts aborted at 10 clients per node). Prepares use wait-die on the
//!   transactions' ages (a retry keeps its first attempt's, `augur_contract::age`), and
//!   `lock_timeout` still bounds every wait.
//!
//! # Failures
//!
//! Update transactions abort on a failed validation, a lock timeout or a participant that does
//! not vote within `participant_timeout`. A read-only read that gets no answer is sent again. A
//! node persists what it promised ([`Record`]): prepares it voted for, transactions applied
//! (and, in checkpoints, those not known final), decisions it coordinates until they commit
//! externally, and transaction-id reservations. After a crash, prepared transactions ask their
//! coordinator for the outcome, which answers from its decision log or presumes abort; a
//! coordinator takes up the transactions it decided that had not committed externally (with a
//! fresh round, and no client to answer); a replica asks the coordinator of every writer it
//! applied and does not know final, and serves no read-only read until it knows each one's
//! state. Coordinators re-send decisions, rounds and release questions that go unanswered.
//!
//! R entries are durable too (`Record::ReaderEntered`): a replica that restarts while a
//! read-only transaction that read there still runs keeps holding the writers that reader must
//! precede (without it, the crash seeds of the sweep found a read-only transaction reading one
//! key twice and seeing a writer the second time). The update readers of each key's current
//! version are durable (`Record::ReadsCommitted`) for the release rule.
//!
//! # Fail-over
//!
//! `sss` has no master: every replica of a key serves its reads and votes on its writes. It
//! follows the configuration agreed through Raft (`common::membership`;
//! `docs/architecture/availability.md` and, for this engine,
//! `docs/architecture/sss-failover.md`) as the other engines do, when `failover=on` (off: the
//! placement's replicas for good). A dead or silent replica is evicted once its lease
//! has surely run out, and its partitions go on with their other in-sync replicas; the master
//! the configuration names is only the replica `augur check`'s `master-crash` aims at.
//!
//! **Off by default** (`failover=on` turns it on), unlike the other engines: `sss` does not
//! copy a replica that comes back into the in-sync set yet, so every failure, a pause of a
//! second included, would take a replica out of its partitions' in-sync sets for good, and
//! after a second failure a partition waits for its last in-sync replica, as it does
//! without fail-over.
//!
//! * **The data path follows the in-sync sets.** Reads go to the key's in-sync replicas, and
//!   prepares to every in-sync replica of every key read or written, with the epochs of the
//!   participant's partitions. A replica serves a read or a prepare only while it is in sync
//!   (at those epochs) and leased; it votes `Reconfigured` on a prepare it refuses and leaves a
//!   refused read unanswered (another replica answers, or a read-only read is sent again). A
//!   read-only read parked here is dropped once this node leaves the in-sync set or its lease
//!   runs out. A coordinator aborts an attempt voting on a partition whose epoch moved.
//! * **A reader's holds can die with one replica.** A read-only read leaves its R entry where
//!   it was answered, perhaps only there (its copies elsewhere may be lost or late). So a
//!   read-only coordinator hands its client a value only from a replica it believes in sync,
//!   and a value or the commit only while it holds a lease; when a replica it took an answer
//!   from leaves that partition's in-sync set, the reader ends `Reconfigured` (which `augur
//!   check`'s abort-free promise tolerates, as it does a crash), and so does every reader of a
//!   node that applies its own eviction.
//! * **A writer stops waiting for an evicted replica's acknowledgement**, but becomes final no
//!   sooner than a lease and the skew bound after its coordinator applied the change: by
//!   then, every node that has not applied it holds no lease (leases are granted only under a
//!   configuration the node applied) and hands its clients nothing, and every node that
//!   applied it ended the readers that held the writer at the evicted replica. The other
//!   replicas' acknowledgements stand: each is a promise about that replica's own queues.
//! * **Readers of an evicted coordinator leave every queue**: it held no lease when it was
//!   evicted, and before it serves again it applies its eviction, which ends them.
//! * **`CommitQ` passes over an undecided transaction whose coordinator was evicted**, which
//!   would otherwise hold back every internal commit of the node until the coordinator
//!   restarts. Its locks keep every transaction behind it off its keys, and no reader depends
//!   on the order in which writers of different keys are applied (`apply-out-of-order` is
//!   masked).
//!
//! Not built yet (`docs/architecture/sss-failover.md` lists the design): copies of a
//! partition to a replica back from a failure (it stays out of sync, and its partitions run
//! on their other in-sync replicas until it is copied); re-pinning a reader's holds at the
//! surviving replicas instead of ending it; and a termination protocol for transactions whose
//! coordinator is gone for good (a prepared one keeps its locks, and a writer that depends on
//! a decided one waits for it to be final, until that coordinator restarts). The mutant
//! `ungated-ro-read` serves and hands out read-only reads without the lease and membership
//! checks: a replica cut off and evicted returns a version its partition overwrote meanwhile
//! (the scenario test in `tests/it/failover.rs`).

mod nlog;
mod queue;

use crate::common::coordinator::{
    ByReplica, InteractiveCoordinator, Pending, ReadInFlight, ReadsAt, serve_interactive,
};
use crate::common::failover::{Gate, LeaseWaiters};
use crate::common::locks::{
    Acquire, LOCK_TIMEOUT, LOCK_TIMEOUT_VALUES, LockManager, LockMode, Policy, parse_lock_timeout,
};
use crate::common::membership::{
    self, Command, Epochs, Membership, MembershipMsg, MembershipTimer, Promotion, Reconfiguration,
};
use crate::common::replica::{DecisionLog, TxnIds, Writes};
use crate::common::sequencer::SequencerRecord;
use crate::common::vclock::VClock;
use crate::protocol_info::Engine;
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use crate::protocol_info::{Promise, SettingInfo, switch};
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientReply, ClientRequest, Key, NodeId, PartitionId};
use augur_types::{RequestError, Timestamp, TxnId, Value};
use nlog::NLog;
use queue::{EntryKind, KeyQueue};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Keys examined per garbage-collection step.
const GC_BATCH: usize = 2048;

/// `sss`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "sss",
    isolation: IsolationLevel::StrictSerializable,
    isolation_with: &[],
    paper: "SSS (ICDCS 2019) §III, Algorithms 1-6",
    summary: "vector clocks + snapshot-queues: 2PC updates held until older readers finish; abort-free read-only transactions",
    engine: Engine::Own,
    commit_order_evidence: false,
    promises: &[
        Promise::AbortFreeReadOnly,
        Promise::MissedWriterRepliesAfterReader,
    ],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: SETTINGS,
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
};

/// The name of the finalization timeout setting.
pub const FINALIZE_TIMEOUT: &str = "finalize_timeout";

/// The protocol settings `sss` accepts.
pub const SETTINGS: &[SettingInfo] = &[
    SettingInfo {
        name: LOCK_TIMEOUT,
        values: LOCK_TIMEOUT_VALUES,
        default: "5ms",
        doc: "how long a prepare waits for its locks before voting no (the paper's 1 ms is 50 one-way message delays; 5 ms is 50 of the lan profile's)",
    },
    SettingInfo {
        name: FINALIZE_TIMEOUT,
        values: LOCK_TIMEOUT_VALUES,
        default: "100ms",
        doc: "how long a committed update waits, after its first write replica acknowledged, for the others before withdrawing the round (doubling with each withdrawal); breaks waits between readers of different writers",
    },
    SettingInfo {
        name: ADMISSION_THRESHOLD,
        values: LOCK_TIMEOUT_VALUES,
        default: "20ms",
        doc: "starvation control (§III-E): once a writer has been held this long at a node, read-only transactions that have not read there yet wait until it is acknowledged before they read there",
    },
    FAILOVER_SETTING,
    membership::LEASE_SETTING,
    membership::SKEW_SETTING,
];

/// The fail-over switch, off by default for `sss` (unlike the engines that copy a replica back
/// into the in-sync set): until `sss` copies, every failure takes a replica out of its
/// partitions' in-sync sets for good, and a second failure stops a partition as it does
/// without fail-over (see *Fail-over* in the module docs).
const FAILOVER_SETTING: SettingInfo = SettingInfo {
    default: "off",
    doc: "on: a dead or silent replica is evicted under leases agreed through Raft and its partitions go on with their other in-sync replicas (docs/architecture/sss-failover.md); off by default until a replica that comes back is copied back into the in-sync set",
    ..membership::FAILOVER_SETTING
};

/// The name of the admission-control threshold setting.
pub const ADMISSION_THRESHOLD: &str = "admission_threshold";

/// The mutants `sss` knows (`augur check --mutant`), with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-reader-entries",
        "read-only reads leave no R entry in the snapshot-queue, so no writer is ever held (updates a reader missed answer before it: the reply-order promise)",
    ),
    (
        "no-exclusion",
        "read-only first reads do not skip writers held in the key's queue (Fig. 2's long fork)",
    ),
    (
        "reply-at-internal-commit",
        "the coordinator answers an update once 2PC decided, without waiting for the write replicas' acknowledgements",
    ),
    (
        "no-propagated-set",
        "[masked] update reads do not carry the key's readers (A3), so a writer that read from a held writer inherits none of its readers; the release rule makes it wait until the held writer is final anyway (50 seeds of each workload under all faults pass)",
    ),
    (
        "no-remove-forwarding",
        "a replica never asks the coordinator of a reader it only inherited whether the reader ended, so that reader's R entries stay and hold writers forever (a liveness failure: caught within 12 seeds of each workload)",
    ),
    (
        "apply-out-of-order",
        "[masked] a decided transaction is applied as soon as it is decided instead of in CommitQ order; reads choose versions by finality, not by vector-clock bounds, so no reader depends on the apply order of writers of different keys (50 seeds of each workload under all faults pass)",
    ),
    (
        "no-dependency-wait",
        "a committed update's write replicas acknowledge it without waiting for the transactions it depends on to be final, so a reader can see it and skip one of them",
    ),
    (
        "no-anti-dependencies",
        "a writer does not depend on the update transactions that read the version it overwrote, so it can become final before them and a reader can see it and skip one of them",
    ),
    (
        "vc-validation",
        "validation compares vector-clock entries as Algorithm 1 prints it, instead of the version read",
    ),
    (
        "ungated-ro-read",
        "[scenario] under fail-over, read-only reads are served and handed to the client without a lease or membership of the in-sync set, so a replica cut off and evicted returns a version its partition overwrote meanwhile (tests/it/failover.rs: without_the_gate_a_deposed_sss_replica_returns_an_overwritten_version); random runs rarely reach it: seed 90 of list-append on lan under --faults all, none of seeds 1..100 of rw-register",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    NoReaderEntries,
    NoExclusion,
    ReplyAtInternalCommit,
    NoPropagatedSet,
    NoRemoveForwarding,
    ApplyOutOfOrder,
    NoDependencyWait,
    NoAntiDependencies,
    VcValidation,
    UngatedRoRead,
}

impl Mutant {
    fn named(name: &str) -> Option<Mutant> {
        Some(match name {
            "no-reader-entries" => Mutant::NoReaderEntries,
            "no-exclusion" => Mutant::NoExclusion,
            "reply-at-internal-commit" => Mutant::ReplyAtInternalCommit,
            "no-propagated-set" => Mutant::NoPropagatedSet,
            "no-remove-forwarding" => Mutant::NoRemoveForwarding,
            "apply-out-of-order" => Mutant::ApplyOutOfOrder,
            "no-dependency-wait" => Mutant::NoDependencyWait,
            "no-anti-dependencies" => Mutant::NoAntiDependencies,
            "vc-validation" => Mutant::VcValidation,
            "ungated-ro-read" => Mutant::UngatedRoRead,
            _ => return None,
        })
    }
}

/// What a replica answers a read with (A6:L28).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReadAnswer {
    pub value: Option<Value>,
    /// The writer of the version returned; `None` when the key has no version.
    pub version: Option<TxnId>,
    /// `maxVC` (read-only) or the replica's latest clock (update).
    pub vc: VClock,
    /// Read-only transactions in the key's queue (update reads only).
    pub propagated: Vec<TxnId>,
    /// The versions the reader needs are garbage-collected.
    pub too_old: bool,
    /// Read-only reads: the writers of the key this read skipped (not final here); the reader
    /// holds them here, and skips them everywhere from now on.
    pub excluded: Vec<TxnId>,
}

/// What a read-only read tells the replica about its reader.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoRead {
    /// The writers the reader excluded so far (it holds each of them where it excluded it,
    /// so none of them can become final before it ends).
    pub excluded: Vec<TxnId>,
}

/// What a coordinator decides for a committing update transaction, and what its write
/// replicas need to apply and pre-commit it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The commit vector clock, every write replica's entry equal to `xactVN`.
    pub vc: VClock,
    /// The read-only transactions the update inherited through its reads (`PropagatedSet`).
    pub propagated: Vec<TxnId>,
    /// The committed update transactions it depends on that were not known final when the
    /// participants voted (see "The release rule" in the module docs): it becomes final only
    /// after each of them.
    pub after: Vec<TxnId>,
    /// The partitions written, ascending: under fail-over, a write replica out of every one's
    /// in-sync set is no longer waited for (kept in the decision log for a coordinator that
    /// takes the transaction up after a restart).
    pub written: Vec<PartitionId>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Coordinator → every replica of `key` (A5:L11).
    Read {
        txn: TxnId,
        /// Tells this read from an earlier one of the transaction that got no answer.
        seq: u32,
        key: Key,
        /// What the replica needs to know of a read-only reader (read-only readers only).
        ro: Option<RoRead>,
    },
    /// Replica → coordinator (A6:L28).
    ReadReply {
        txn: TxnId,
        seq: u32,
        answer: ReadAnswer,
    },
    /// Coordinator → every replica of a key read or written (A1:L13).
    Prepare {
        txn: TxnId,
        vc: VClock,
        /// The transaction's age for wait-die, on its coordinator's clock: when its client first
        /// tried it (`augur_contract::age`).
        age: Timestamp,
        reads: Vec<(Key, Option<TxnId>)>,
        writes: Writes,
        /// Under fail-over, the partitions read or written at the epochs the coordinator's
        /// configuration gave them (empty without fail-over).
        epochs: Epochs,
    },
    /// Participant → coordinator: yes with the participant's clock and the transactions
    /// `txn` depends on that this node does not know final, or no with the reason.
    Vote {
        txn: TxnId,
        vote: Result<(VClock, Vec<TxnId>), AbortReason>,
    },
    /// Coordinator → participants: commit with the decision, or abort. A commit carries the
    /// finalization round write replicas acknowledge in.
    Decide {
        txn: TxnId,
        decision: Option<Decision>,
        round: Round,
    },
    /// Coordinator → write replicas: the current finalization round of `txn` (a later round
    /// withdraws every acknowledgement of the earlier ones; see "Finality" in the module docs).
    Finalize { txn: TxnId, round: Round },
    /// Write replica → coordinator: `txn` is applied, no reader holds it (A4:L5), and until
    /// `round` is withdrawn no new reader will: read-only readers here see it. With the
    /// replica's longest hold of it.
    Ack {
        txn: TxnId,
        round: u64,
        held_us: u64,
    },
    /// `txn`'s coordinator → `dep`'s coordinator: answer once `dep` is final (the release
    /// rule, see the module docs).
    AwaitFinal { txn: TxnId, dep: TxnId },
    /// `dep`'s coordinator → `txn`'s coordinator: `dep` committed externally (or is not a
    /// committed transaction: it cannot hold `txn` back).
    Final { txn: TxnId, dep: TxnId },
    /// Coordinator → participants: `txn` committed externally (it is final).
    Released { txn: TxnId },
    /// Write replica → coordinator: has `txn` committed externally yet?
    QueryReleased { txn: TxnId },
    /// A read-only transaction ended: release its R entries (coordinator → replicas).
    Remove { ro: TxnId },
    /// Replica → a read-only transaction's coordinator: send `Remove` when it ends.
    Subscribe { ro: TxnId },
    /// Participant → coordinator: what became of this prepared transaction?
    QueryOutcome { txn: TxnId },
    /// The configuration group and the leases (fail-over).
    Membership(MembershipMsg),
}

membership::carried_in_membership_variants!(Msg, Timer);

impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        let n = at.placement.node_count();
        let clock = |vc: &VClock| {
            if vc.len() == n {
                Ok(())
            } else {
                Err(at.bad(format!(
                    "a vector clock of {} entries in a cluster of {n}",
                    vc.len()
                )))
            }
        };
        match self {
            Msg::Read { txn, key, ro, .. } => {
                at.txn_of_sender(*txn)?;
                at.key_here(key)?;
                if let Some(ro) = ro {
                    ro.excluded.iter().try_for_each(|writer| at.txn(*writer))?;
                }
                Ok(())
            }
            Msg::ReadReply { txn, answer, .. } => {
                at.txn_here(*txn)?;
                clock(&answer.vc)?;
                answer.propagated.iter().try_for_each(|ro| at.txn(*ro))?;
                answer
                    .excluded
                    .iter()
                    .try_for_each(|writer| at.txn(*writer))
            }
            Msg::Prepare {
                txn,
                vc,
                reads,
                writes,
                epochs,
                ..
            } => {
                at.txn_of_sender(*txn)?;
                clock(vc)?;
                epochs.iter().try_for_each(|(p, _)| at.partition_here(*p))?;
                reads.iter().try_for_each(|(key, _)| at.key_here(key))?;
                writes.iter().try_for_each(|(key, _)| at.key_here(key))
            }
            Msg::Vote { txn, vote } => {
                at.txn_here(*txn)?;
                match vote {
                    Ok((vc, after)) => {
                        clock(vc)?;
                        after.iter().try_for_each(|dep| at.txn(*dep))
                    }
                    Err(_) => Ok(()),
                }
            }
            Msg::Decide { txn, decision, .. } => {
                at.txn_of_sender(*txn)?;
                match decision {
                    Some(d) => {
                        clock(&d.vc)?;
                        d.propagated.iter().try_for_each(|ro| at.txn(*ro))?;
                        d.written.iter().try_for_each(|p| at.partition(*p))?;
                        d.after.iter().try_for_each(|dep| at.txn(*dep))
                    }
                    None => Ok(()),
                }
            }
            Msg::Ack { txn, .. } | Msg::QueryOutcome { txn } | Msg::QueryReleased { txn } => {
                at.txn_here(*txn)
            }
            Msg::AwaitFinal { txn, dep } => {
                at.txn_of_sender(*txn)?;
                at.txn_here(*dep)
            }
            Msg::Final { txn, dep } => {
                at.txn_here(*txn)?;
                at.txn_of_sender(*dep)
            }
            Msg::Released { txn } | Msg::Finalize { txn, .. } => at.txn_of_sender(*txn),
            Msg::Remove { ro } => at.txn_of_sender(*ro),
            Msg::Subscribe { ro } => at.txn_here(*ro),
            Msg::Membership(m) => m.check(at),
        }
    }
}

#[derive(Debug)]
pub enum Timer {
    /// Periodic: termination queries, subscriptions, idle transactions, garbage collection.
    Tick,
    /// A coordinator's read `seq` of `txn` got no answer in time.
    Read(TxnId, u32),
    /// A coordinator's votes did not all arrive in time.
    Votes(TxnId),
    /// A participant's prepare did not get its locks in time.
    Locks(TxnId),
    /// A coordinator's finalization round (the second field) has not been acknowledged by
    /// every write replica in time: withdraw it.
    Finalize(TxnId, u64),
    /// Reads delayed by starvation control are due.
    Admission,
    /// A committing transaction's write replica left the in-sync set: its acknowledgement is
    /// no longer needed once every lease granted before that ran out (see *Fail-over* in the
    /// module docs).
    Settled(TxnId),
    /// The configuration group's timers (fail-over).
    Membership(MembershipTimer),
}

/// A finalization round of a committed update transaction (see "Finality" in the module
/// docs): its number (rounds only grow, across restarts too: a round is numbered by the
/// coordinator's clock) and whether every transaction it depends on is final (the release
/// rule), so that write replicas may acknowledge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Round {
    pub number: u64,
    pub past_released: bool,
}

/// What a node writes to its log and rebuilds from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// Decisions and id reservations, as the 2PC kit keeps them.
    Kit(crate::common::replica::Record<Decision>),
    /// This node voted yes for `txn` (with clock `vc`): it holds the locks and, as a replica
    /// of a written key, `txn`'s place in `CommitQ` until the decision.
    Prepared {
        txn: TxnId,
        vc: VClock,
        reads: Vec<Key>,
        writes: Writes,
        write_replica: bool,
    },
    /// `txn` was applied here with commit clock `vc` (its internal commit).
    Applied { txn: TxnId, vc: VClock },
    /// `txn` committed after reading `keys` here (keys it did not write here): until it is
    /// final, a writer that overwrites what it read depends on it (the release rule).
    ReadsCommitted { txn: TxnId, keys: Vec<Key> },
    /// The read-only transaction `ro` read `key` here and holds its writers above `snapshot`
    /// (an R entry): a restart must not let them become final while `ro` runs.
    ReaderEntered { ro: TxnId, key: Key, snapshot: u64 },
    /// `txn` ended here without being applied (aborted, or only read here).
    Finished { txn: TxnId },
    /// Checkpoints only: the node's clock.
    NodeClock(VClock),
    /// Checkpoints only: `txn` was applied here and this node has not heard that it is final.
    Unreleased { txn: TxnId },
    /// Checkpoints only: `NLog`, its kept entries and the maximum of the collapsed ones.
    Log(nlog::Checkpoint),
}

impl From<crate::common::replica::Record<Decision>> for Record {
    fn from(record: crate::common::replica::Record<Decision>) -> Record {
        Record::Kit(record)
    }
}

impl From<SequencerRecord> for Record {
    fn from(record: SequencerRecord) -> Record {
        Record::Kit(crate::common::replica::Record::Membership(record))
    }
}

/// Counters `augur bench` reads (see [`Protocol::counters`]).
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    ro_snapshot_too_old: u64,
    ro_reads_resent: u64,
    writers_held: u64,
    updates_committed: u64,
    /// Sum over committed updates of begin → external commit.
    update_latency_us: u64,
    /// Sum over committed updates of the longest pre-commit hold among their write replicas.
    precommit_hold_us: u64,
    /// Sum over committed updates of decision → external commit: the paper's internal to
    /// external commit (Fig. 5's grey part), the hold plus the messages around it.
    decided_to_external_us: u64,
    /// Read-only reads that waited for a tentatively final writer to be final.
    ro_reads_awaited_final: u64,
    /// Read-only reads delayed by starvation control (§III-E).
    ro_reads_admission_delayed: u64,
    /// Finalization rounds withdrawn because a write replica did not acknowledge in time.
    finalize_rounds_withdrawn: u64,
    /// Committed updates that had to wait for a transaction they depend on to be final.
    updates_awaited_dependencies: u64,
    /// Read-only transactions ended `Reconfigured`: a replica they read at left the in-sync
    /// set, or their coordinator held no lease at the commit (fail-over).
    ro_reconfigured: u64,
    /// Write replicas a committing update stopped waiting for because they left the in-sync
    /// set (fail-over).
    acks_given_up: u64,
}

/// A transaction this node coordinates.
struct Coord {
    read_only: bool,
    /// `T.VC`.
    vc: VClock,
    /// Update transactions: each key read and the writer of the version read.
    reads: Vec<(Key, Option<TxnId>)>,
    /// Update transactions: the read-only transactions inherited (`PropagatedSet`).
    propagated: BTreeSet<TxnId>,
    /// Read-only transactions: the writers excluded so far.
    excluded: Vec<TxnId>,
    /// Read-only transactions: the nodes read from, and the nodes subscribed to its end.
    notify: BTreeSet<NodeId>,
    /// Read-only transactions under fail-over: the replica whose answer each read used, with
    /// the key's partition (a reader whose holds lived at a replica that left the in-sync set
    /// ends `Reconfigured`).
    answered_by: Vec<(PartitionId, NodeId)>,
    pending: Option<Pending>,
    /// The key being read (to send it again).
    read: ReadInFlight,
    begun: Timestamp,
    /// Its age under wait-die (see `Msg::Prepare`).
    age: Timestamp,
    last_active: Timestamp,
    phase: Phase,
}

impl Coord {
    fn new(read_only: bool, vc: VClock, now: Timestamp, age: Timestamp, phase: Phase) -> Coord {
        Coord {
            read_only,
            vc,
            reads: Vec::new(),
            propagated: BTreeSet::new(),
            excluded: Vec::new(),
            notify: BTreeSet::new(),
            answered_by: Vec::new(),
            pending: None,
            read: ReadInFlight::default(),
            begun: now,
            age,
            last_active: now,
            phase,
        }
    }
}

enum Phase {
    Executing,
    Voting {
        participants: Vec<NodeId>,
        waiting: BTreeSet<NodeId>,
        write_replicas: Vec<NodeId>,
        vc: VClock,
        /// The transactions it depends on that some voter did not know final.
        after: BTreeSet<TxnId>,
        /// The partitions prepared on, at the epochs the prepares carried (empty without
        /// fail-over): a move of one aborts the attempt.
        epochs: Epochs,
        /// The partitions written.
        written: Vec<PartitionId>,
    },
    Committing {
        decision: Decision,
        /// Every participant (told when the transaction is final).
        participants: Vec<NodeId>,
        write_replicas: Vec<NodeId>,
        /// The current finalization round.
        round: Round,
        /// The write replicas that acknowledged the current round.
        acked: BTreeSet<NodeId>,
        /// When the decision or the current round was last sent.
        sent_at: Timestamp,
        /// The longest pre-commit hold an acknowledgement reported.
        held_us: u64,
        /// When the coordinator decided (the internal commit, as the client could see it).
        decided_at: Timestamp,
        /// The transactions it depends on whose coordinators have not said they are final.
        awaiting: BTreeSet<TxnId>,
        /// Rounds withdrawn so far (each doubles the next round's patience).
        withdrawals: u32,
        /// Under fail-over, after a write replica left the in-sync set: not final before this
        /// time on this node's clock (see *Fail-over* in the module docs).
        settle_at: Option<Timestamp>,
    },
}

/// A transaction prepared (or preparing) at this node.
struct Participant {
    reads: Vec<(Key, Option<TxnId>)>,
    writes: Writes,
    vc: VClock,
    write_replica: bool,
    locks_missing: usize,
    /// `None` while waiting for locks; the vote's `vc[i]` (its `CommitQ` position) once voted.
    voted: Option<u64>,
    decision: Option<(Decision, Round)>,
    last_query: Timestamp,
}

/// A pre-committed writer at this node (A3–A4) that has not committed externally yet.
struct HeldWriter {
    /// Its position in `NLog` (a reader whose entry in one of its keys' queues has a smaller
    /// snapshot holds it).
    snapshot: u64,
    keys: Vec<Key>,
    since: Timestamp,
    /// The latest finalization round heard of.
    round: Round,
    /// Whether this node acknowledged `round`: the writer is tentatively final here.
    acked: bool,
}

/// A read-only transaction that read here.
struct Reader {
    /// The keys it has R entries for.
    keys: Vec<Key>,
    /// Whether it read here (rather than only being inherited through a `PropagatedSet`).
    direct: bool,
    since: Timestamp,
    subscribed: Option<Timestamp>,
}

/// A read-only read waiting here: for a tentatively final writer it would read to become
/// final or be withdrawn, for starvation control's back-off, or (after a restart) for this
/// node to learn which writers are final.
struct ParkedRead {
    from: NodeId,
    txn: TxnId,
    seq: u32,
    key: Key,
    ro: RoRead,
    /// Until when starvation control delays it, once it has been delayed.
    delayed_until: Option<Timestamp>,
}

/// One node running `sss`.
pub struct Sss {
    env: NodeEnv,
    me: usize,
    mutant: Option<Mutant>,
    lock_timeout: Duration,
    finalize_timeout: Duration,
    admission_threshold: Duration,
    store: MvStore<KeyQueue>,
    nlog: NLog,
    node_vc: VClock,
    /// `CommitQ`: `(vc[i], txn)` → ready.
    commit_q: BTreeMap<(u64, TxnId), bool>,
    participants: FxHashMap<TxnId, Participant>,
    /// Locks by the holder's begin time (wait-die).
    locks: LockManager<Timestamp>,
    /// Transactions aborted here, so that a late prepare is ignored (T9).
    aborted: FxHashMap<TxnId, Timestamp>,
    held: FxHashMap<TxnId, HeldWriter>,
    /// Transactions applied here whose external commit this node has not heard of yet, with
    /// since when (or when this node last asked their coordinators about them).
    unreleased: FxHashMap<TxnId, Timestamp>,
    /// Coordinator side: for a transaction coordinated here that is not final yet, the
    /// committing transactions (and their coordinators) waiting for it to be final.
    final_waiters: FxHashMap<TxnId, Vec<(NodeId, TxnId)>>,
    /// Update transactions that committed after reading keys here and are not known final,
    /// with those keys (each key's queue lists them as readers of its current version).
    /// (And since when, or when this node last asked their coordinators about them.)
    update_reads: FxHashMap<TxnId, (Vec<Key>, Timestamp)>,
    readers: FxHashMap<TxnId, Reader>,
    /// Read-only transactions removed here (T7), with when.
    removed: FxHashMap<TxnId, Timestamp>,
    parked: Vec<ParkedRead>,
    coord: FxHashMap<TxnId, Coord>,
    ids: TxnIds,
    decided: DecisionLog<Decision>,
    /// The configuration, the group that agrees on it, and this node's lease (fail-over).
    membership: Membership,
    /// What waits for this node's next lease, with its sender: reads and prepares it serves
    /// once leased, and answers to the reads of read-only transactions it coordinates.
    lease_waiters: LeaseWaiters<(NodeId, Msg), (NodeId, Msg)>,
    counters: Counters,
}

impl Sss {
    fn id(&self) -> NodeId {
        self.env.id
    }

    fn nodes(&self) -> usize {
        self.env.placement.node_count()
    }

    fn is(&self, mutant: Mutant) -> bool {
        self.mutant == Some(mutant)
    }

    fn empty(env: &NodeEnv) -> Sss {
        let n = env.placement.node_count();
        let settings = &env.options.settings;
        Sss {
            env: env.clone(),
            me: env.id.0 as usize,
            mutant: env.options.mutant.as_deref().and_then(Mutant::named),
            lock_timeout: settings
                .get(LOCK_TIMEOUT)
                .and_then(|v| parse_lock_timeout(v))
                .unwrap_or(Duration::from_millis(5)),
            finalize_timeout: settings
                .get(FINALIZE_TIMEOUT)
                .and_then(|v| parse_lock_timeout(v))
                .unwrap_or(Duration::from_millis(100)),
            admission_threshold: settings
                .get(ADMISSION_THRESHOLD)
                .and_then(|v| parse_lock_timeout(v))
                .unwrap_or(Duration::from_millis(20)),
            store: MvStore::new(),
            nlog: NLog::new(n),
            node_vc: VClock::new(n),
            commit_q: BTreeMap::new(),
            participants: FxHashMap::default(),
            locks: LockManager::new(Policy::WaitDie),
            aborted: FxHashMap::default(),
            held: FxHashMap::default(),
            unreleased: FxHashMap::default(),
            final_waiters: FxHashMap::default(),
            update_reads: FxHashMap::default(),
            readers: FxHashMap::default(),
            removed: FxHashMap::default(),
            parked: Vec::new(),
            coord: FxHashMap::default(),
            ids: TxnIds::new(env.id),
            decided: DecisionLog::default(),
            membership: restore_membership(env, Vec::new()),
            lease_waiters: LeaseWaiters::default(),
            counters: Counters::default(),
        }
    }

    // ----- coordinator: client requests -----

    /// Send the read in flight numbered `seq` to every in-sync replica of its key (every
    /// replica, without fail-over).
    fn send_read(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, seq: u32) {
        let placement = &self.env.placement;
        let config = self.membership.config();
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        let Some(key) = t.read.waiting().cloned() else {
            return;
        };
        let ro = t.read_only.then(|| RoRead {
            excluded: t.excluded.clone(),
        });
        let replicas = config.in_sync(placement.partition_of(&key));
        if t.read_only {
            t.notify.extend(replicas.iter().copied());
        }
        for &replica in replicas {
            let msg = Msg::Read {
                txn,
                seq,
                key: key.clone(),
                ro: ro.clone(),
            };
            ctx.send(replica, msg);
        }
        ctx.set_timer(self.env.options.participant_timeout, Timer::Read(txn, seq));
    }

    fn read_reply(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        seq: u32,
        answer: ReadAnswer,
    ) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        if !t.read.awaits(seq) || t.pending.is_none() || !matches!(t.phase, Phase::Executing) {
            return; // a slower replica, or an answer to a read sent again
        }
        if t.read_only && self.membership.active() && self.mutant != Some(Mutant::UngatedRoRead) {
            // A reader's value reaches its client only from a replica in sync, and only while
            // this node holds a lease (see *Fail-over* in the module docs): an answer that
            // comes without waits for the next grant, for a lease's duration at most (the
            // read is sent again meanwhile if it must).
            let partition = t
                .read
                .waiting()
                .map(|key| self.env.placement.partition_of(key));
            let Some(partition) =
                partition.filter(|p| self.membership.config().is_in_sync(from, *p))
            else {
                return;
            };
            let now = ctx.now();
            if !self.membership.serving(now) {
                let reply = Msg::ReadReply { txn, seq, answer };
                return self.lease_waiters.wait_read(now, (from, reply));
            }
            t.answered_by.push((partition, from));
        }
        let Some(key) = t.read.answered(seq) else {
            return;
        };
        let ReadAnswer {
            value,
            version,
            vc,
            propagated,
            too_old,
            excluded,
        } = answer;
        let pending = t.pending.take().expect("checked");
        t.last_active = ctx.now();
        if too_old {
            self.counters.ro_snapshot_too_old += 1;
            self.end_read_only(ctx, txn);
            return pending.answer(ctx, ClientReply::Aborted(AbortReason::SnapshotTooOld));
        }
        t.vc.merge(&vc);
        for writer in excluded {
            if !t.excluded.contains(&writer) {
                t.excluded.push(writer);
            }
        }
        if !t.read_only {
            t.reads.push((key, version));
            t.propagated.extend(propagated);
        }
        pending.answer(ctx, ClientReply::Value(value));
    }

    /// A read-only transaction ends (commit, abort, idle, too old): release its readers.
    fn end_read_only(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if let Some(t) = self.coord.remove(&txn) {
            for node in t.notify {
                ctx.send(node, Msg::Remove { ro: txn });
            }
        }
    }

    fn abort(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        let Some(t) = self.coord.get(&txn) else {
            return;
        };
        if t.read_only {
            let pending = self.coord.get_mut(&txn).and_then(|t| t.pending.take());
            self.end_read_only(ctx, txn);
            if let Some(p) = pending {
                p.answer(ctx, ClientReply::Aborted(reason));
            }
            return;
        }
        let mut t = self.coord.remove(&txn).expect("present");
        if let Phase::Voting { participants, .. } = &t.phase {
            for &node in participants {
                let round = Round::default();
                ctx.send(
                    node,
                    Msg::Decide {
                        txn,
                        decision: None,
                        round,
                    },
                );
            }
        }
        if let Some(p) = t.pending.take() {
            p.answer(ctx, ClientReply::Aborted(reason));
        }
        // An aborted transaction holds nobody back.
        self.wake_final_waiters(ctx, txn);
    }

    fn vote(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        vote: Result<(VClock, Vec<TxnId>), AbortReason>,
    ) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return;
        };
        let Phase::Voting {
            waiting, vc, after, ..
        } = &mut t.phase
        else {
            return;
        };
        match vote {
            Err(reason) => return self.abort(ctx, txn, reason),
            Ok((theirs, deps)) => {
                if !waiting.remove(&from) {
                    return;
                }
                vc.merge(&theirs);
                after.extend(deps.into_iter().filter(|dep| *dep != txn));
            }
        }
        if waiting.is_empty() {
            self.decide(ctx, txn);
        }
    }

    /// Every participant voted yes: fix the commit clock (A1:L21–28), decide, and ask the
    /// coordinators of the transactions it depends on that are not known final to say when
    /// they are (the release rule); write replicas acknowledge only once every one is.
    fn decide(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let t = self.coord.get_mut(&txn).expect("voting");
        let Phase::Voting {
            participants,
            write_replicas,
            vc,
            after,
            written,
            ..
        } = std::mem::replace(&mut t.phase, Phase::Executing)
        else {
            unreachable!("voting");
        };
        let mut vc = vc;
        let xact_vn = write_replicas
            .iter()
            .map(|w| vc.get(w.0 as usize))
            .max()
            .unwrap_or(0);
        for w in &write_replicas {
            vc.set(w.0 as usize, xact_vn);
        }
        let decision = Decision {
            vc,
            propagated: t.propagated.iter().copied().collect(),
            after: after.iter().copied().collect(),
            written,
        };
        let awaiting = if self.is(Mutant::NoDependencyWait) {
            BTreeSet::new()
        } else {
            after
        };
        if !awaiting.is_empty() {
            self.counters.updates_awaited_dependencies += 1;
        }
        for &dep in &awaiting {
            ctx.send(dep.coordinator(), Msg::AwaitFinal { txn, dep });
        }
        let round = Round {
            number: ctx.now().0,
            past_released: awaiting.is_empty(),
        };
        let commit_ts = Timestamp(xact_vn);
        self.decided
            .decide(ctx, txn, decision.clone(), write_replicas.clone());
        for &node in &participants {
            let decision = Some(decision.clone());
            ctx.send(
                node,
                Msg::Decide {
                    txn,
                    decision,
                    round,
                },
            );
        }
        let t = self.coord.get_mut(&txn).expect("voting");
        if self.mutant == Some(Mutant::ReplyAtInternalCommit)
            && let Some(p) = t.pending.take()
        {
            p.answer(ctx, ClientReply::Committed { commit_ts });
        }
        t.phase = Phase::Committing {
            decision,
            participants,
            write_replicas,
            round,
            acked: BTreeSet::new(),
            sent_at: ctx.now(),
            held_us: 0,
            decided_at: ctx.now(),
            awaiting,
            withdrawals: 0,
            settle_at: None,
        };
        self.external_commit_if_final(ctx, txn);
    }

    fn ack(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId, round: u64, held_us: u64) {
        let Some(Phase::Committing {
            round: current,
            acked,
            held_us: longest,
            withdrawals,
            write_replicas,
            ..
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        let patience = self.finalize_timeout * (1 << (*withdrawals).min(6));
        if round != current.number || !write_replicas.contains(&from) || !acked.insert(from) {
            // An acknowledgement of a withdrawn round, a repeated one, or one from a replica
            // no longer waited for (it left the in-sync set).
            return;
        }
        *longest = (*longest).max(held_us);
        if acked.len() == 1 {
            ctx.set_timer(patience, Timer::Finalize(txn, round));
        }
        self.external_commit_if_final(ctx, txn);
    }

    /// Another coordinator asks to hear when `dep`, coordinated here, is final: answer now if
    /// it is (or if it is not a transaction still committing here: finished, aborted, or
    /// unknown), else once it commits externally.
    fn await_final(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId, dep: TxnId) {
        let committing = self
            .coord
            .get(&dep)
            .is_some_and(|t| !t.read_only && !matches!(t.phase, Phase::Executing));
        if !committing {
            return ctx.send(from, Msg::Final { txn, dep });
        }
        let waiters = self.final_waiters.entry(dep).or_default();
        if !waiters.contains(&(from, txn)) {
            waiters.push((from, txn));
        }
    }

    /// `dep`, a transaction `txn` depends on, is final: once every one is, the write replicas
    /// may acknowledge.
    fn dep_final(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, dep: TxnId) {
        let Some(Phase::Committing {
            awaiting,
            round,
            write_replicas,
            ..
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        if !awaiting.remove(&dep) || !awaiting.is_empty() {
            return;
        }
        round.past_released = true;
        let round = *round;
        for &node in write_replicas.iter() {
            ctx.send(node, Msg::Finalize { txn, round });
        }
        self.external_commit_if_final(ctx, txn);
    }

    /// `txn`, coordinated here, is final (or aborted): tell whoever waits for it.
    fn wake_final_waiters(&mut self, ctx: &mut Ctx<'_, Self>, dep: TxnId) {
        for (node, txn) in self.final_waiters.remove(&dep).unwrap_or_default() {
            ctx.send(node, Msg::Final { txn, dep });
        }
    }

    /// The current finalization round went unacknowledged for `finalize_timeout`: withdraw it
    /// (a write replica held by a reader that waits for another tentatively final writer
    /// would otherwise wait forever: see "Finality" in the module docs) and start another.
    fn withdraw_round(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, number: u64) {
        let Some(Phase::Committing {
            round,
            acked,
            write_replicas,
            sent_at,
            withdrawals,
            ..
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        if round.number != number || write_replicas.iter().all(|n| acked.contains(n)) {
            return;
        }
        round.number = ctx.now().0.max(number + 1);
        *withdrawals += 1;
        acked.clear();
        *sent_at = ctx.now();
        let round = *round;
        for &node in write_replicas.iter() {
            ctx.send(node, Msg::Finalize { txn, round });
        }
        self.counters.finalize_rounds_withdrawn += 1;
    }

    /// Send again what a committing transaction waits for: the decision and round to the
    /// write replicas that did not acknowledge it, the question to the coordinators of the
    /// transactions it depends on that did not answer.
    fn resend_commit(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(Phase::Committing {
            decision,
            write_replicas,
            round,
            acked,
            sent_at,
            awaiting,
            ..
        }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
        else {
            return;
        };
        *sent_at = ctx.now();
        for &node in write_replicas.iter().filter(|n| !acked.contains(n)) {
            let (decision, round) = (Some(decision.clone()), *round);
            ctx.send(
                node,
                Msg::Decide {
                    txn,
                    decision,
                    round,
                },
            );
        }
        for &dep in awaiting.iter() {
            ctx.send(dep.coordinator(), Msg::AwaitFinal { txn, dep });
        }
    }

    /// Answer the client once every transaction it depends on is final and every write
    /// replica acknowledged one round (the external commit), then tell the participants and
    /// the transactions waiting for it that it is final.
    fn external_commit_if_final(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(Phase::Committing {
            awaiting,
            acked,
            write_replicas,
            settle_at,
            ..
        }) = self.coord.get(&txn).map(|t| &t.phase)
        else {
            return;
        };
        if !awaiting.is_empty()
            || !write_replicas.iter().all(|n| acked.contains(n))
            || settle_at.is_some_and(|at| ctx.now() < at)
        {
            return;
        }
        let t = self.coord.remove(&txn).expect("present");
        let Phase::Committing {
            decision,
            held_us,
            decided_at,
            participants,
            write_replicas,
            ..
        } = t.phase
        else {
            unreachable!("committing");
        };
        for &node in &participants {
            ctx.send(node, Msg::Released { txn });
        }
        for &node in &write_replicas {
            self.decided.acknowledge(ctx, txn, node);
        }
        self.wake_final_waiters(ctx, txn);
        if write_replicas.is_empty() {
            self.decided.forget(txn);
        }
        if let Some(p) = t.pending {
            let xact_vn = write_replicas
                .iter()
                .map(|w| decision.vc.get(w.0 as usize))
                .max();
            let commit_ts = Timestamp(xact_vn.unwrap_or(0));
            self.counters.updates_committed += 1;
            self.counters.update_latency_us += ctx.now().since(t.begun).as_micros() as u64;
            self.counters.precommit_hold_us += held_us;
            self.counters.decided_to_external_us += ctx.now().since(decided_at).as_micros() as u64;
            p.answer(ctx, ClientReply::Committed { commit_ts });
        }
    }

    fn subscribe(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, ro: TxnId) {
        match self.coord.get_mut(&ro) {
            Some(t) if t.read_only => {
                t.notify.insert(from);
            }
            _ => ctx.send(from, Msg::Remove { ro }),
        }
    }

    /// A participant asks whether `txn`, coordinated here, is final. Once it is (or if it is
    /// unknown here: aborted, or final and forgotten) the answer is `Released`; while it
    /// commits, what it waits for is sent again, and a replica no longer waited for (it left
    /// the in-sync set since) gets the decision too: it applied `txn` before a restart, and
    /// serves no read-only read until it knows the state of every writer it applied.
    fn query_released(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId) {
        let Some(t) = self.coord.get(&txn) else {
            return ctx.send(from, Msg::Released { txn });
        };
        if let Phase::Committing {
            decision,
            write_replicas,
            round,
            ..
        } = &t.phase
            && !write_replicas.contains(&from)
        {
            let (decision, round) = (Some(decision.clone()), *round);
            ctx.send(
                from,
                Msg::Decide {
                    txn,
                    decision,
                    round,
                },
            );
        }
        self.resend_commit(ctx, txn);
    }

    fn query_outcome(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, txn: TxnId) {
        let phase = self.coord.get(&txn).map(|t| &t.phase);
        if let Some(d) = self.decided.get(&txn) {
            let round = match phase {
                Some(Phase::Committing { round, .. }) => *round,
                _ => Round::default(),
            };
            let decision = Some(d.clone());
            return ctx.send(
                from,
                Msg::Decide {
                    txn,
                    decision,
                    round,
                },
            );
        }
        if let Some(Phase::Voting { .. }) = phase {
            return; // its decision (or its vote timeout's abort) will come
        }
        let (decision, round) = (None, Round::default());
        ctx.send(
            from,
            Msg::Decide {
                txn,
                decision,
                round,
            },
        );
    }

    // ----- participant: 2PC (Algorithm 2) -----

    /// Lock the keys (A2:L2–6) and vote once every lock is held. Deadlocks between
    /// transactions that lock the replicas of the same keys in different orders are prevented
    /// by wait-die on the transactions' ages (a deviation: see the module docs).
    fn prepare(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        (vc, age): (VClock, Timestamp),
        reads: Vec<(Key, Option<TxnId>)>,
        writes: Writes,
    ) {
        if self.participants.contains_key(&txn) || self.aborted.contains_key(&txn) {
            return;
        }
        let mut missing = 0;
        let mut refused = None;
        let wanted = writes
            .iter()
            .map(|(key, _)| (key, LockMode::Exclusive))
            .chain(reads.iter().map(|(key, _)| (key, LockMode::Shared)));
        for (key, mode) in wanted {
            match self.locks.acquire(txn, age, key, mode) {
                Acquire::Granted => {}
                Acquire::Waiting { .. } => missing += 1,
                Acquire::Refused(refusal) => {
                    refused = Some(refusal.abort_reason());
                    break;
                }
            }
        }
        if let Some(reason) = refused {
            return self.refuse(ctx, txn, reason);
        }
        let write_replica = !writes.is_empty();
        self.participants.insert(
            txn,
            Participant {
                reads,
                writes,
                vc,
                write_replica,
                locks_missing: missing,
                voted: None,
                decision: None,
                last_query: ctx.now(),
            },
        );
        if missing == 0 {
            self.validate_and_vote(ctx, txn);
        } else {
            ctx.set_timer(self.lock_timeout, Timer::Locks(txn));
        }
    }

    /// Locks granted by a release: prepares that now hold all theirs vote.
    fn granted(&mut self, ctx: &mut Ctx<'_, Self>, grants: Vec<crate::common::locks::Grant>) {
        for grant in grants {
            let Some(p) = self.participants.get_mut(&grant.txn) else {
                continue;
            };
            p.locks_missing = p.locks_missing.saturating_sub(1);
            if p.locks_missing == 0 && p.voted.is_none() {
                self.validate_and_vote(ctx, grant.txn);
            }
        }
    }

    fn release_locks(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let grants = self.locks.release_all(txn);
        self.granted(ctx, grants);
    }

    /// Validate the reads (by identity, T1) and vote (A2:L2–13).
    fn validate_and_vote(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let p = self.participants.get(&txn).expect("preparing");
        ctx.charge(Work::reads(p.reads.len()));
        let valid = p.reads.iter().all(|(key, version)| {
            let latest = self.store.get(key).and_then(|e| e.latest_committed());
            if self.mutant == Some(Mutant::VcValidation) {
                // A1:L35 as printed: fails only if the latest version's own entry exceeds T.VC.
                let entry = latest
                    .and_then(|v| self.nlog.clock_of(v.ts.0))
                    .map_or(0, |vc| vc.get(self.me));
                entry <= p.vc.get(self.me)
            } else {
                latest.map(|v| v.writer) == *version
            }
        });
        if !valid {
            return self.refuse(ctx, txn, AbortReason::ValidationFailed);
        }
        let p = self.participants.get_mut(&txn).expect("preparing");
        let vc = if p.write_replica {
            self.node_vc.increment(self.me);
            let vc = self.node_vc.clone();
            self.commit_q.insert((vc.get(self.me), txn), false);
            vc
        } else {
            self.nlog.most_recent().clone()
        };
        p.voted = Some(vc.get(self.me));
        ctx.persist(Record::Prepared {
            txn,
            vc: vc.clone(),
            reads: p.reads.iter().map(|(k, _)| k.clone()).collect(),
            writes: p.writes.clone(),
            write_replica: p.write_replica,
        });
        let after = self.dependencies(txn);
        let vote = Ok((vc, after));
        ctx.send(txn.coordinator(), Msg::Vote { txn, vote });
    }

    /// The committed transactions the prepared `txn` depends on that this node does not know
    /// final (the release rule): the writers of the versions it read and of the versions it
    /// overwrites, and the update transactions that read the versions it overwrites. The locks
    /// it holds keep the set from growing until it is decided.
    fn dependencies(&self, txn: TxnId) -> Vec<TxnId> {
        let p = self.participants.get(&txn).expect("preparing");
        let mut after: Vec<TxnId> = p
            .reads
            .iter()
            .filter_map(|(_, version)| *version)
            .filter(|writer| self.unreleased.contains_key(writer))
            .collect();
        for (key, _) in &p.writes {
            let Some(entry) = self.store.get(key) else {
                continue;
            };
            if let Some(v) = entry.latest_committed()
                && self.unreleased.contains_key(&v.writer)
            {
                after.push(v.writer);
            }
            if !self.is(Mutant::NoAntiDependencies) {
                after.extend(entry.meta.update_readers());
            }
        }
        after.sort();
        after.dedup();
        after.retain(|dep| *dep != txn);
        after
    }

    fn lock_timeout(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        match self.participants.get(&txn) {
            Some(p) if p.voted.is_none() => {}
            _ => return,
        }
        self.refuse(ctx, txn, AbortReason::LockTimeout);
    }

    /// Vote no for `txn`, which has not voted yet: forget it (a late prepare is ignored, T9)
    /// and release its locks.
    fn refuse(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        self.participants.remove(&txn);
        self.aborted.insert(txn, ctx.now());
        self.release_locks(ctx, txn);
        let vote = Err(reason);
        ctx.send(txn.coordinator(), Msg::Vote { txn, vote });
    }

    fn on_decide(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        decision: Option<Decision>,
        round: Round,
    ) {
        let Some(decision) = decision else {
            return self.finish_aborted(ctx, txn);
        };
        self.node_vc.merge(&decision.vc);
        let Some(p) = self.participants.get_mut(&txn) else {
            // Decided again (a lost acknowledgement, or a restart lost the pre-commit):
            // pre-commit once more if it was applied here and is not final yet.
            if self.held.contains_key(&txn) {
                return self.on_finalize(ctx, txn, round);
            }
            if self.unreleased.contains_key(&txn)
                && let Some(position) = self.nlog.position_of(txn)
            {
                let writes = self.nlog.keys_of(position).to_vec();
                self.pre_commit(ctx, txn, &decision, round, position, writes);
                self.wake_parked(ctx); // reads waiting to learn its state
            }
            return;
        };
        if p.voted.is_none() {
            return; // cannot happen: a commit needs this node's yes
        }
        self.record_update_reads(ctx, txn);
        let p = self.participants.get_mut(&txn).expect("present");
        if !p.write_replica {
            self.participants.remove(&txn);
            ctx.persist(Record::Finished { txn });
            return self.release_locks(ctx, txn);
        }
        let position = p.voted.expect("voted");
        let mine = decision.vc.get(self.me);
        p.decision = Some((decision, round));
        self.commit_q.remove(&(position, txn));
        self.commit_q.insert((mine, txn), true);
        p.voted = Some(mine);
        if self.is(Mutant::ApplyOutOfOrder) {
            self.commit_q.remove(&(mine, txn));
            self.apply(ctx, txn);
        }
        self.apply_ready(ctx);
    }

    /// The committed `txn` read keys here that it does not write here: until it is final, a
    /// writer that overwrites one of them depends on it (the release rule).
    fn record_update_reads(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let p = self.participants.get(&txn).expect("present");
        let keys: Vec<Key> = p
            .reads
            .iter()
            .map(|(k, _)| k.clone())
            .filter(|k| !p.writes.iter().any(|(w, _)| w == k))
            .collect();
        if keys.is_empty() {
            return;
        }
        ctx.persist(Record::ReadsCommitted {
            txn,
            keys: keys.clone(),
        });
        self.note_update_reads(txn, keys, ctx.now());
    }

    fn note_update_reads(&mut self, txn: TxnId, keys: Vec<Key>, since: Timestamp) {
        for key in &keys {
            self.store.entry(key).meta.add_update_reader(txn);
        }
        self.update_reads.insert(txn, (keys, since));
    }

    /// The coordinator's current finalization round of `txn`: a later round withdraws this
    /// node's acknowledgement of an earlier one (readers waiting to read `txn` read around it
    /// instead); a round that says the past is released lets this node acknowledge.
    fn on_finalize(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, round: Round) {
        if let Some(p) = self.participants.get_mut(&txn) {
            if let Some((_, r)) = &mut p.decision
                && round.number >= r.number
            {
                *r = round;
            }
            return;
        }
        let Some(w) = self.held.get_mut(&txn) else {
            return;
        };
        if round.number < w.round.number {
            return;
        }
        if round.number == w.round.number && w.acked {
            // The acknowledgement may have been lost.
            return self.send_ack(ctx, txn);
        }
        let withdrawn = round.number > w.round.number && w.acked;
        w.round = round;
        w.acked = false;
        if withdrawn {
            self.wake_parked(ctx);
        }
        self.release_if_unheld(ctx, txn);
    }

    fn finish_aborted(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        self.aborted.insert(txn, ctx.now());
        let Some(p) = self.participants.remove(&txn) else {
            return;
        };
        if let Some(position) = p.voted {
            self.commit_q.remove(&(position, txn));
            ctx.persist(Record::Finished { txn });
        }
        self.release_locks(ctx, txn);
        // It may have been the pending head of `CommitQ`, holding decided ones back.
        self.apply_ready(ctx);
        self.wake_parked(ctx);
    }

    /// Apply every ready transaction at the head of `CommitQ` (A2:L27–33), passing over the
    /// undecided ones whose coordinator was evicted (see *Fail-over* in the module docs).
    fn apply_ready(&mut self, ctx: &mut Ctx<'_, Self>) {
        use std::ops::Bound::{Excluded, Unbounded};
        let mut applied = false;
        let mut passed: Option<(u64, TxnId)> = None;
        loop {
            let next = match passed {
                None => self.commit_q.first_key_value(),
                Some(after) => self.commit_q.range((Excluded(after), Unbounded)).next(),
            };
            let Some((&(position, txn), &ready)) = next else {
                break;
            };
            if ready {
                self.commit_q.remove(&(position, txn));
                self.apply(ctx, txn);
                applied = true;
            } else if self.coordinator_evicted(txn) {
                passed = Some((position, txn));
            } else {
                break;
            }
        }
        if applied {
            self.wake_parked(ctx);
        }
    }

    /// Whether `txn`'s coordinator is in no in-sync set (evicted, under fail-over): an
    /// undecided `txn` it coordinates may stay undecided until it restarts, and holds back
    /// no other transaction's internal commit meanwhile.
    fn coordinator_evicted(&self, txn: TxnId) -> bool {
        self.membership.active() && !(self.membership.config()).in_any_sync_set(txn.coordinator())
    }

    /// The internal commit of `txn` here, then its pre-commit.
    fn apply(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let p = self.participants.remove(&txn).expect("ready");
        let (decision, round) = p.decision.expect("decided");
        let keys: Vec<Key> = p.writes.iter().map(|(k, _)| k.clone()).collect();
        let position = self
            .nlog
            .append(txn, decision.vc.clone(), keys.clone(), ctx.now());
        ctx.charge(Work::writes(p.writes.len()));
        self.install(txn, position, p.writes);
        ctx.persist(Record::Applied {
            txn,
            vc: decision.vc.clone(),
        });
        self.unreleased.insert(txn, ctx.now());
        self.release_locks(ctx, txn);
        self.pre_commit(ctx, txn, &decision, round, position, keys);
    }

    /// Install `txn`'s versions at `NLog` position `position`; the update transactions that
    /// read the versions it overwrites are its dependencies now, not the new versions'.
    fn install(&mut self, txn: TxnId, position: u64, writes: Writes) {
        for (key, value) in writes {
            let entry = self.store.entry(&key);
            entry.put_committed(txn, Timestamp(position), value);
            entry.meta.clear_update_readers();
        }
    }

    /// Enter the queues of the written keys with the inherited readers (A3), then acknowledge
    /// at once if no reader holds the writer (A4) and every transaction it depends on is final.
    fn pre_commit(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        d: &Decision,
        round: Round,
        position: u64,
        keys: Vec<Key>,
    ) {
        let snapshot = position;
        let now = ctx.now();
        for key in &keys {
            let queue = &mut self.store.entry(key).meta;
            queue.insert(txn, snapshot, EntryKind::Writer);
            for &ro in &d.propagated {
                if self.removed.contains_key(&ro) {
                    continue;
                }
                // The inherited reader precedes this writer, and so every later writer of
                // the key: it holds them, not the earlier ones (see T6 in the module docs).
                queue.insert(ro, position - 1, EntryKind::Reader);
                let reader = self.readers.entry(ro).or_insert(Reader {
                    keys: Vec::new(),
                    direct: false,
                    since: now,
                    subscribed: None,
                });
                reader.keys.push(key.clone());
            }
        }
        for &ro in &d.propagated {
            self.subscribe_to(ctx, ro);
        }
        self.held.insert(
            txn,
            HeldWriter {
                snapshot,
                keys,
                since: now,
                round,
                acked: false,
            },
        );
        self.release_if_unheld(ctx, txn);
    }

    /// The read-only `ro` read `key` here: its R entry holds the key's writers above
    /// `snapshot`.
    fn enter_reader(&mut self, ro: TxnId, key: Key, snapshot: u64, now: Timestamp) {
        let reader = self.readers.entry(ro).or_insert(Reader {
            keys: Vec::new(),
            direct: true,
            since: now,
            subscribed: None,
        });
        reader.direct = true;
        reader.keys.push(key.clone());
        self.store
            .entry(&key)
            .meta
            .insert(ro, snapshot, EntryKind::Reader);
    }

    /// Ask `ro`'s coordinator to tell this node when `ro` ends (once per `participant_timeout`).
    fn subscribe_to(&mut self, ctx: &mut Ctx<'_, Self>, ro: TxnId) {
        let now = ctx.now();
        let patience = self.env.options.participant_timeout;
        let forwarding = !self.is(Mutant::NoRemoveForwarding);
        let Some(reader) = self.readers.get_mut(&ro) else {
            return;
        };
        if !forwarding && !reader.direct {
            return; // the mutant: an inherited reader's end is never asked for
        }
        if reader.subscribed.is_some_and(|at| now.since(at) < patience) {
            return;
        }
        reader.subscribed = Some(now);
        if ro.coordinator() == self.id() {
            // The reader runs here: its end must reach this node's entries too, even where it
            // never read here (an inherited reader would otherwise hold writers here until
            // the next subscription, `participant_timeout` later).
            let me = self.id();
            match self.coord.get_mut(&ro) {
                Some(t) if t.read_only => {
                    t.notify.insert(me);
                }
                _ => self.remove_reader(ctx, ro),
            }
            return;
        }
        ctx.send(ro.coordinator(), Msg::Subscribe { ro });
    }

    /// Whether a reader holds the pre-committed writer `txn` (A4:L3): a reader of one of its
    /// keys that read before it was applied here or excluded it, or one inherited through a
    /// `PropagatedSet`.
    fn is_held(&self, txn: TxnId, w: &HeldWriter) -> bool {
        w.keys.iter().any(|key| {
            self.store
                .get(key)
                .is_some_and(|e| e.meta.holds(txn, w.snapshot))
        })
    }

    /// Acknowledge `txn`'s current round (it becomes tentatively final here) if its past is
    /// released and no reader holds it.
    fn release_if_unheld(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(w) = self.held.get(&txn) else { return };
        if w.acked || !w.round.past_released || self.is_held(txn, w) {
            return;
        }
        let w = self.held.get_mut(&txn).expect("present");
        w.acked = true;
        let held_us = ctx.now().since(w.since).as_micros() as u64;
        if held_us > 0 {
            self.counters.writers_held += 1;
        }
        self.send_ack(ctx, txn);
    }

    fn send_ack(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(w) = self.held.get(&txn) else { return };
        let held_us = ctx.now().since(w.since).as_micros() as u64;
        let round = w.round.number;
        ctx.send(
            txn.coordinator(),
            Msg::Ack {
                txn,
                round,
                held_us,
            },
        );
    }

    /// Acknowledge every writer no reader holds any more.
    fn release_unheld(&mut self, ctx: &mut Ctx<'_, Self>) {
        let mut waiting: Vec<TxnId> = self
            .held
            .iter()
            .filter(|(_, w)| !w.acked)
            .map(|(t, _)| *t)
            .collect();
        waiting.sort();
        for txn in waiting {
            self.release_if_unheld(ctx, txn);
        }
    }

    /// `ro` ended: drop its R entries here and release the writers they held.
    fn remove_reader(&mut self, ctx: &mut Ctx<'_, Self>, ro: TxnId) {
        self.removed.insert(ro, ctx.now());
        let Some(reader) = self.readers.remove(&ro) else {
            return;
        };
        for key in &reader.keys {
            if let Some(e) = self.store.get_mut(key) {
                e.meta.remove(ro);
            }
        }
        self.release_unheld(ctx);
    }

    /// `txn` committed externally: it is final here; its W entries leave the queues, and it
    /// no longer holds back writers that overwrite what it read.
    fn released(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        if let Some(w) = self.held.remove(&txn) {
            for key in &w.keys {
                if let Some(e) = self.store.get_mut(key) {
                    e.meta.remove(txn);
                }
            }
        }
        if let Some((keys, _)) = self.update_reads.remove(&txn) {
            for key in &keys {
                if let Some(e) = self.store.get_mut(key) {
                    e.meta.remove_update_reader(txn);
                }
            }
        }
        if self.unreleased.remove(&txn).is_some() {
            self.wake_parked(ctx);
        }
    }

    // ----- serving reads (Algorithm 6) -----

    fn serve_read(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        seq: u32,
        key: Key,
        ro: Option<RoRead>,
    ) {
        ctx.charge(Work::reads(1));
        let Some(ro) = ro else {
            return self.serve_update_read(ctx, from, txn, seq, key);
        };
        if self.removed.contains_key(&txn) {
            return; // the reader already ended (T7): leave no entry behind
        }
        // A read sent again replaces the copy of it that waits here.
        self.parked.retain(|r| r.txn != txn);
        let read = ParkedRead {
            from,
            txn,
            seq,
            key,
            ro,
            delayed_until: None,
        };
        self.serve_read_only(ctx, read);
    }

    /// Serve again the reads waiting here (each waits again if it still must).
    fn wake_parked(&mut self, ctx: &mut Ctx<'_, Self>) {
        if self.parked.is_empty() {
            return;
        }
        let parked = std::mem::take(&mut self.parked);
        for read in parked {
            self.serve_read_only(ctx, read);
        }
    }

    /// Whether a writer of `key` here has waited for its readers longer than the admission
    /// threshold (§III-E).
    fn starving_writer_of(&self, key: &Key, now: Timestamp) -> bool {
        let Some(entry) = self.store.get(key) else {
            return false;
        };
        entry.meta.writers().any(|writer| {
            self.held
                .get(&writer)
                .is_some_and(|w| !w.acked && now.since(w.since) >= self.admission_threshold)
        })
    }

    /// Whether a reader skips `writer`'s versions here: it is not final, and this node has
    /// not acknowledged its round (a writer whose round this node acknowledged is tentatively
    /// final and read: the reply waits until it is final or the round is withdrawn).
    fn excludes(&self, writer: TxnId) -> bool {
        !self.is(Mutant::NoExclusion)
            && self.unreleased.contains_key(&writer)
            && !self.held.get(&writer).is_some_and(|w| w.acked)
    }

    fn serve_update_read(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        from: NodeId,
        txn: TxnId,
        seq: u32,
        key: Key,
    ) {
        let entry = self.store.get(&key);
        let latest = entry.and_then(|e| e.latest_committed());
        let propagated = match entry {
            Some(e) if !self.is(Mutant::NoPropagatedSet) => e.meta.readers().collect(),
            _ => Vec::new(),
        };
        let answer = ReadAnswer {
            value: latest.and_then(|v| v.value.clone()),
            version: latest.map(|v| v.writer),
            vc: self.nlog.most_recent().clone(),
            propagated,
            too_old: false,
            excluded: Vec::new(),
        };
        ctx.send(from, Msg::ReadReply { txn, seq, answer });
    }

    /// A read-only read (Algorithm 6, with versions chosen by finality: see the module docs):
    /// the newest version of the key whose writer the reader does not exclude; wait while that
    /// writer is only tentatively final; then enter the key's queue, holding every writer of
    /// the key the reader did not see, and answer.
    fn serve_read_only(&mut self, ctx: &mut Ctx<'_, Self>, read: ParkedRead) {
        if self.removed.contains_key(&read.txn) {
            return;
        }
        if self.membership.active() && !self.is(Mutant::UngatedRoRead) {
            let partition = self.env.placement.partition_of(&read.key);
            if !self.membership.config().is_in_sync(self.id(), partition)
                || !self.membership.serving(ctx.now())
            {
                // Deposed, or its lease ran out while the read waited here: the coordinator
                // sends the read again, to the replicas in sync then.
                return;
            }
        }
        // Starvation control (§III-E): a reader not yet in the key's queue backs off for a
        // while when a writer of the key has been held too long, instead of holding it longer
        // still. The delay is bounded (it is not a wait for the writer): a delayed reader may
        // hold, elsewhere, a writer that the starving one waits for.
        let mut read = read;
        if read.delayed_until.is_none()
            && !self.admission_threshold.is_zero()
            && self.starving_writer_of(&read.key, ctx.now())
            && self
                .readers
                .get(&read.txn)
                .is_none_or(|r| !r.keys.contains(&read.key))
        {
            self.counters.ro_reads_admission_delayed += 1;
            let until = ctx.now().0 + self.admission_threshold.as_micros() as u64;
            read.delayed_until = Some(Timestamp(until));
            ctx.set_timer(self.admission_threshold, Timer::Admission);
        }
        if read.delayed_until.is_some_and(|t| ctx.now() < t) {
            self.parked.push(read);
            return;
        }
        // After a restart, a writer applied before it may be final, tentatively final or held
        // elsewhere: until this node learns which, no read here can tell whether to exclude it.
        if self.unreleased.keys().any(|t| !self.held.contains_key(t)) {
            self.parked.push(read);
            return;
        }
        let skip = |writer: TxnId| read.ro.excluded.contains(&writer) || self.excludes(writer);
        let Some(chosen) = reads::newest_visible(self, &read.key, skip) else {
            let answer = ReadAnswer {
                value: None,
                version: None,
                vc: self.nlog.most_recent().clone(),
                propagated: Vec::new(),
                too_old: true,
                excluded: Vec::new(),
            };
            let (txn, seq) = (read.txn, read.seq);
            return ctx.send(read.from, Msg::ReadReply { txn, seq, answer });
        };
        // The version's writer is tentatively final here: wait until it is final, or its
        // round is withdrawn and this read excludes it.
        if let Some((writer, _)) = &chosen.version
            && self.held.get(writer).is_some_and(|w| w.acked)
        {
            self.counters.ro_reads_awaited_final += 1;
            self.parked.push(read);
            return;
        }
        if !self.is(Mutant::NoReaderEntries) {
            // Hold every writer of the key the reader did not see: those applied later (above
            // the log's newest position) and those it skipped.
            let snapshot = chosen
                .skipped
                .iter()
                .map(|(_, position)| position.saturating_sub(1))
                .fold(self.nlog.last_position(), u64::min);
            ctx.persist(Record::ReaderEntered {
                ro: read.txn,
                key: read.key.clone(),
                snapshot,
            });
            self.enter_reader(read.txn, read.key.clone(), snapshot, ctx.now());
        }
        let answer = ReadAnswer {
            value: chosen.version.as_ref().and_then(|(_, v)| v.clone()),
            version: chosen.version.map(|(w, _)| w),
            vc: self.nlog.most_recent().clone(),
            propagated: Vec::new(),
            too_old: false,
            excluded: chosen.skipped.into_iter().map(|(w, _)| w).collect(),
        };
        let (txn, seq) = (read.txn, read.seq);
        ctx.send(read.from, Msg::ReadReply { txn, seq, answer });
    }

    // ----- the periodic tick -----

    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        let now = ctx.now();
        let patience = self.env.options.participant_timeout;
        // Termination: prepared transactions whose decision is overdue ask their coordinator.
        let mut overdue: Vec<TxnId> = self
            .participants
            .iter()
            .filter(|(_, p)| p.voted.is_some() && p.decision.is_none())
            .filter(|(_, p)| now.since(p.last_query) >= patience)
            .map(|(t, _)| *t)
            .collect();
        overdue.sort();
        for txn in overdue {
            self.participants.get_mut(&txn).expect("listed").last_query = now;
            ctx.send(txn.coordinator(), Msg::QueryOutcome { txn });
        }
        // Applied transactions not heard of as released: ask their coordinators.
        // So are update transactions that read here.
        let mut unsettled = Vec::new();
        let sinces = self.unreleased.iter_mut();
        let read_sinces = self
            .update_reads
            .iter_mut()
            .map(|(t, (_, since))| (t, since));
        for (txn, since) in sinces.chain(read_sinces) {
            if now.since(*since) >= patience {
                *since = now;
                unsettled.push(*txn);
            }
        }
        unsettled.sort();
        unsettled.dedup();
        for txn in unsettled {
            ctx.send(txn.coordinator(), Msg::QueryReleased { txn });
        }
        // Readers whose Remove may have been lost (or whose coordinator restarted): ask.
        let mut stale: Vec<TxnId> = self
            .readers
            .iter()
            .filter(|(_, r)| now.since(r.since) >= patience)
            .map(|(t, _)| *t)
            .collect();
        stale.sort();
        for ro in stale {
            self.subscribe_to(ctx, ro);
        }
        // Coordinators: re-send decisions, rounds and release questions whose answers are
        // overdue (lost, or lost in a restart); end idle transactions.
        let idle_after = self.env.options.idle_txn_timeout;
        let mut resend = Vec::new();
        let mut idle = Vec::new();
        for (txn, t) in &self.coord {
            match &t.phase {
                Phase::Committing { sent_at, .. } if now.since(*sent_at) >= patience => {
                    resend.push(*txn);
                }
                Phase::Executing
                    if t.pending.is_none() && now.since(t.last_active) >= idle_after =>
                {
                    idle.push(*txn)
                }
                _ => {}
            }
        }
        resend.sort();
        for txn in resend {
            self.resend_commit(ctx, txn);
        }
        idle.sort();
        for txn in idle {
            self.abort(ctx, txn, AbortReason::Timeout);
        }
        // Garbage: tombstones, then NLog and versions beyond the retention.
        let retention = self.env.options.gc_retention;
        let horizon = now.saturating_sub(retention);
        self.removed.retain(|_, at| *at >= horizon);
        self.aborted.retain(|_, at| *at >= horizon);
        // A writer not final yet is excluded by readers, who then need what it overwrote:
        // neither its `NLog` entry nor the versions before it may be collapsed.
        let keep_from = self
            .unreleased
            .keys()
            .filter_map(|t| self.nlog.position_of(*t))
            .min()
            .unwrap_or(u64::MAX);
        self.nlog.collapse_before(horizon, keep_from);
        // The store keeps the newest version at or below the watermark: the newest collapsed one.
        let watermark = self.nlog.first_position().saturating_sub(1);
        self.store.collect_garbage(Timestamp(watermark), GC_BATCH);
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
    }
}

// ----- fail-over -----

impl Sss {
    /// Whether this node serves `msg` (a read or a prepare) now: in sync on its partitions (at
    /// the epochs a prepare carries) and leased.
    fn gate(&self, now: Timestamp, msg: &Msg) -> Gate {
        let config = self.membership.config();
        let placement = &self.env.placement;
        let me = self.id();
        let in_step = match msg {
            Msg::Read { key, .. } => config.is_in_sync(me, placement.partition_of(key)),
            Msg::Prepare {
                epochs,
                reads,
                writes,
                ..
            } => {
                let keys = (reads.iter().map(|(k, _)| k)).chain(writes.iter().map(|(k, _)| k));
                config.in_step(me, epochs, keys.map(|k| placement.partition_of(k)))
            }
            _ => return Gate::Pass,
        };
        if !in_step {
            Gate::Refuse
        } else if !self.membership.serving(now) {
            Gate::AwaitLease
        } else {
            Gate::Pass
        }
    }

    /// Refuse a read or prepare this node does not serve: a prepare is voted down
    /// (`Reconfigured`); a read gets no answer (another in-sync replica answers it, or the
    /// coordinator sends a read-only read again and gives up on an update's).
    fn refuse_request(&mut self, ctx: &mut Ctx<'_, Self>, msg: Msg) {
        if let Msg::Prepare { txn, .. } = msg {
            self.refuse(ctx, txn, AbortReason::Reconfigured);
        }
    }

    /// After the configuration group ran: with a lease now, serve what waited for one (each
    /// is gated again); without, refuse what waited a lease's duration.
    fn run_lease_waiters(&mut self, ctx: &mut Ctx<'_, Self>) {
        if self.lease_waiters.is_empty() {
            return;
        }
        let now = ctx.now();
        if self.membership.serving(now) {
            let (reads, prepares) = self.lease_waiters.take_all();
            for (from, msg) in reads.into_iter().chain(prepares) {
                self.on_message(ctx, from, msg);
            }
            return;
        }
        let patience = self.membership.lease_duration();
        let (reads, prepares) = self.lease_waiters.take_late(now, patience);
        for (_, msg) in reads.into_iter().chain(prepares) {
            self.refuse_request(ctx, msg);
        }
    }

    /// The configuration changed (`change`; see *Fail-over* in the module docs):
    ///
    /// * attempts voting on a partition whose epoch moved abort;
    /// * read-only transactions coordinated here that used an answer of a replica now out of
    ///   the key's in-sync set (its holds are no longer counted on), and all of them if this
    ///   node was evicted, end `Reconfigured`;
    /// * readers coordinated by an evicted node leave the queues here;
    /// * committing updates stop waiting for the acknowledgement of a write replica out of
    ///   every in-sync set of the partitions they wrote, and become final no sooner than a
    ///   lease and the skew bound from now;
    /// * `CommitQ` passes over the undecided transactions of evicted coordinators.
    fn reconfigure(&mut self, ctx: &mut Ctx<'_, Self>, change: Reconfiguration) {
        let me = self.id();
        let now = ctx.now();
        let config = self.membership.config().clone();
        let evicted: Vec<NodeId> = (change.commands.iter())
            .filter_map(|c| match c {
                Command::Evict { node, .. } => Some(*node),
                _ => None,
            })
            .collect();
        let evicted_me = evicted.contains(&me);
        let mut overtaken: Vec<TxnId> = (self.coord.iter())
            .filter(|(_, t)| match &t.phase {
                Phase::Voting { epochs, .. } => {
                    epochs.iter().any(|(p, _)| change.changed.contains(p))
                }
                Phase::Executing => {
                    t.read_only
                        && (evicted_me
                            || (t.answered_by.iter()).any(|(p, n)| !config.is_in_sync(*n, *p)))
                }
                Phase::Committing { .. } => false,
            })
            .map(|(txn, _)| *txn)
            .collect();
        overtaken.sort();
        for txn in overtaken {
            if self.coord.get(&txn).is_some_and(|t| t.read_only) {
                self.counters.ro_reconfigured += 1;
            }
            self.abort(ctx, txn, AbortReason::Reconfigured);
        }
        let mut gone: Vec<TxnId> = (self.readers.keys())
            .filter(|ro| evicted.contains(&ro.coordinator()))
            .copied()
            .collect();
        gone.sort();
        for ro in gone {
            self.remove_reader(ctx, ro);
        }
        self.give_up_acks(ctx, &config, now);
        self.apply_ready(ctx);
        // Reads parked for partitions this node left are dropped (gated again).
        self.wake_parked(ctx);
    }

    /// Committing updates stop waiting for write replicas in no in-sync set of the partitions
    /// they wrote: no reader's holds
    /// there count any more, so the update becomes final no sooner than a lease and the skew
    /// bound from now, when every read-only coordinator that did not learn of the change
    /// holds no lease and hands its client nothing.
    fn give_up_acks(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        config: &membership::Configuration,
        now: Timestamp,
    ) {
        let wait = self.membership.lease_duration() + self.membership.skew_bound();
        let mut settling = Vec::new();
        let mut dropped_acks = Vec::new();
        for (txn, t) in self.coord.iter_mut() {
            let Phase::Committing {
                decision,
                write_replicas,
                acked,
                settle_at,
                ..
            } = &mut t.phase
            else {
                continue;
            };
            let written = &decision.written;
            let counts = |n: &NodeId| written.iter().any(|p| config.is_in_sync(*n, *p));
            let (kept, dropped): (Vec<NodeId>, Vec<NodeId>) =
                write_replicas.iter().partition(|n| counts(n));
            if dropped.is_empty() {
                continue;
            }
            *write_replicas = kept;
            acked.retain(|n| write_replicas.contains(n));
            *settle_at = Some(
                now.saturating_add(wait)
                    .max(settle_at.unwrap_or(Timestamp::ZERO)),
            );
            self.counters.acks_given_up += dropped.len() as u64;
            settling.push(*txn);
            dropped_acks.extend(dropped.into_iter().map(|n| (*txn, n)));
        }
        dropped_acks.sort();
        for (txn, node) in dropped_acks {
            self.decided.acknowledge(ctx, txn, node);
        }
        settling.sort();
        for txn in settling {
            ctx.set_timer(wait, Timer::Settled(txn));
        }
    }
}

/// A node's membership, from its durable group records (none for a new node): a
/// configuration group only when `failover=on` is asked for (off by default, see
/// [`FAILOVER_SETTING`]).
fn restore_membership(env: &NodeEnv, records: Vec<SequencerRecord>) -> Membership {
    let asked = (env.options.settings.get(membership::FAILOVER)).and_then(|v| switch(v));
    Membership::restore(env, Promotion::InSync, asked == Some(true), records)
        .unwrap_or_else(|e| panic!("the configuration group cannot start: {e}"))
}

mod reads;

impl InteractiveCoordinator for Sss {
    fn begin(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        read_only: bool,
        age: Timestamp,
    ) {
        let txn = self.ids.allocate(ctx);
        let vc = self.nlog.most_recent().clone();
        let t = Coord::new(read_only, vc, ctx.now(), age, Phase::Executing);
        self.coord.insert(txn, t);
        let snapshot = Timestamp(self.nlog.most_recent().get(self.me));
        pending.answer(ctx, ClientReply::Begun { txn, snapshot });
    }

    fn read(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, key: Key) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return pending.answer(ctx, ClientReply::Aborted(AbortReason::TransactionLost));
        };
        if t.pending.is_some() || !matches!(t.phase, Phase::Executing) {
            let err = RequestError::Invalid("a request of this transaction is in progress".into());
            return pending.answer(ctx, ClientReply::Rejected(err));
        }
        t.pending = Some(pending);
        t.last_active = ctx.now();
        let seq = t.read.begin(key);
        self.send_read(ctx, txn, seq);
    }

    fn commit(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, writes: Writes) {
        let Some(t) = self.coord.get_mut(&txn) else {
            return pending.answer(ctx, ClientReply::Aborted(AbortReason::TransactionLost));
        };
        if t.pending.is_some() || !matches!(t.phase, Phase::Executing) {
            let err = RequestError::Invalid("a request of this transaction is in progress".into());
            return pending.answer(ctx, ClientReply::Rejected(err));
        }
        if t.read_only {
            if !writes.is_empty() {
                let err = RequestError::Invalid("a read-only transaction cannot write".into());
                return pending.answer(ctx, ClientReply::Rejected(err));
            }
            if !self.membership.serving(ctx.now()) && self.mutant != Some(Mutant::UngatedRoRead) {
                // Deposed, or paused past its lease: the holds of its reads may be gone (see
                // *Fail-over* in the module docs).
                self.counters.ro_reconfigured += 1;
                self.end_read_only(ctx, txn);
                return pending.answer(ctx, ClientReply::Aborted(AbortReason::Reconfigured));
            }
            let commit_ts = Timestamp(t.vc.get(self.me));
            self.end_read_only(ctx, txn);
            return pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
        // Every in-sync replica of every key read or written takes part (A1:L13).
        let placement = &self.env.placement;
        let config = self.membership.config();
        let active = self.membership.active();
        // Every epoch is zero for good without fail-over: nothing to check, nothing to send.
        let epochs_of = |reads: &[(Key, Option<TxnId>)], writes: &Writes| {
            if !active {
                return Epochs::new();
            }
            let keys = (reads.iter().map(|(k, _)| k)).chain(writes.iter().map(|(k, _)| k));
            config.epochs_of(keys.map(|k| placement.partition_of(k)))
        };
        let epochs = epochs_of(&t.reads, &writes);
        let mut written: Vec<PartitionId> = (writes.iter())
            .map(|(k, _)| placement.partition_of(k))
            .collect();
        written.sort_unstable();
        written.dedup();
        let ByReplica {
            parts,
            write_replicas,
        } = ByReplica::group_among(
            placement,
            &|p| config.in_sync(p),
            ReadsAt::EveryReplica,
            &t.reads,
            writes,
        );
        if parts.is_empty() {
            let commit_ts = Timestamp(t.vc.get(self.me));
            self.coord.remove(&txn);
            return pending.answer(ctx, ClientReply::Committed { commit_ts });
        }
        t.pending = Some(pending);
        t.last_active = ctx.now();
        let participants: Vec<NodeId> = parts.keys().copied().collect();
        for (node, (reads, writes)) in parts {
            let vc = t.vc.clone();
            // A participant hears of its own partitions only.
            let epochs = epochs_of(&reads, &writes);
            ctx.send(
                node,
                Msg::Prepare {
                    txn,
                    vc,
                    age: t.age,
                    reads,
                    writes,
                    epochs,
                },
            );
        }
        t.phase = Phase::Voting {
            waiting: participants.iter().copied().collect(),
            participants,
            write_replicas,
            vc: t.vc.clone(),
            after: BTreeSet::new(),
            epochs,
            written,
        };
        ctx.set_timer(self.env.options.participant_timeout, Timer::Votes(txn));
    }

    /// An update still executing ends here; once it asked to commit, or for a read-only
    /// transaction (which never aborts), the request changes nothing but is still answered as
    /// the client asked.
    fn abort_asked(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) -> Result<(), String> {
        let executing = self
            .coord
            .get(&txn)
            .is_some_and(|t| matches!(t.phase, Phase::Executing) && t.pending.is_none());
        if executing {
            self.abort(ctx, txn, AbortReason::UserRollback);
        }
        Ok(())
    }
}

impl Protocol for Sss {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record;
    const FORMS: &'static [augur_contract::forms::RequestForm] = INTERACTIVE_AND_ONE_SHOT;

    fn new(env: &NodeEnv) -> Self {
        Sss::empty(env)
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Record>) -> Self {
        use crate::common::replica::Record as Kit;
        let mut s = Sss::empty(env);
        let mut group = Vec::new();
        for record in records {
            match record {
                Record::Kit(Kit::Membership(record)) => group.push(record),
                record => s.replay(record),
            }
        }
        s.membership = restore_membership(env, group);
        s.node_vc.merge(s.nlog.most_recent());
        s.resume_committing();
        s
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        self.ids.checkpoint::<Record, Decision>(emit);
        emit(Record::NodeClock(self.node_vc.clone()));
        emit(Record::Log(self.nlog.checkpoint()));
        let mut unreleased: Vec<TxnId> = self.unreleased.keys().copied().collect();
        unreleased.sort();
        for txn in unreleased {
            emit(Record::Unreleased { txn });
        }
        let mut update_reads: Vec<_> = self.update_reads.iter().collect();
        update_reads.sort_by_key(|(t, _)| **t);
        for (txn, (keys, _)) in update_reads {
            emit(Record::ReadsCommitted {
                txn: *txn,
                keys: keys.clone(),
            });
        }
        // A version's timestamp is its `NLog` position.
        crate::common::replica::checkpoint_versions::<_, Decision, Record>(&self.store, emit);
        for (key, entry) in self.store.iter() {
            for (ro, snapshot) in entry.meta.reader_entries() {
                if self.readers.get(&ro).is_some_and(|r| r.direct) {
                    let key = key.clone();
                    emit(Record::ReaderEntered { ro, key, snapshot });
                }
            }
        }
        let mut prepared: Vec<_> = self
            .participants
            .iter()
            .filter_map(|(txn, p)| p.voted.map(|_| (*txn, p)))
            .collect();
        prepared.sort_by_key(|(t, _)| *t);
        for (txn, p) in prepared {
            emit(Record::Prepared {
                txn,
                vc: p.vc.clone(),
                reads: p.reads.iter().map(|(k, _)| k.clone()).collect(),
                writes: p.writes.clone(),
                write_replica: p.write_replica,
            });
        }
        self.decided.checkpoint(emit);
        self.membership.checkpoint(emit);
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.membership.on_start(ctx);
        // Transactions recovered committing start a fresh round (numbered by the clock, so
        // above any round of before the crash) and ask again about every transaction they
        // depend on.
        let mut recovered: Vec<TxnId> = self.coord.keys().copied().collect();
        recovered.sort();
        for txn in recovered {
            if let Some(Phase::Committing {
                decision,
                round,
                awaiting,
                ..
            }) = self.coord.get_mut(&txn).map(|t| &mut t.phase)
            {
                round.number = ctx.now().0;
                *awaiting = if self.mutant == Some(Mutant::NoDependencyWait) {
                    BTreeSet::new()
                } else {
                    decision.after.iter().copied().collect()
                };
                round.past_released = awaiting.is_empty();
            }
            self.resend_commit(ctx, txn);
        }
        // Writers applied here before the restart whose finality this node no longer knows:
        // ask their coordinators at once (reads wait until each is known, see
        // `serve_read_only`).
        let mut unknown: Vec<TxnId> = self
            .unreleased
            .keys()
            .chain(self.update_reads.keys())
            .copied()
            .collect();
        unknown.sort();
        unknown.dedup();
        for txn in unknown {
            ctx.send(txn.coordinator(), Msg::QueryReleased { txn });
        }
        ctx.set_timer(self.env.options.gc_interval, Timer::Tick);
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        serve_interactive(self, ctx, request);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        let gated = match &msg {
            Msg::Read { ro, .. } => ro.is_none() || !self.is(Mutant::UngatedRoRead),
            Msg::Prepare { .. } => true,
            _ => false,
        };
        if gated && self.membership.active() {
            if let Msg::Prepare { txn, .. } = &msg
                && (self.participants.contains_key(txn) || self.aborted.contains_key(txn))
            {
                return; // a copy of a prepare already taken, or one after the abort (T9)
            }
            let now = ctx.now();
            match self.gate(now, &msg) {
                Gate::Pass => {}
                Gate::Refuse | Gate::AwaitCopy => return self.refuse_request(ctx, msg),
                Gate::AwaitLease if matches!(msg, Msg::Prepare { .. }) => {
                    return self.lease_waiters.wait_prepare(now, (from, msg));
                }
                Gate::AwaitLease => return self.lease_waiters.wait_read(now, (from, msg)),
            }
        }
        match msg {
            Msg::Read { txn, seq, key, ro } => self.serve_read(ctx, from, txn, seq, key, ro),
            Msg::ReadReply { txn, seq, answer } => self.read_reply(ctx, from, txn, seq, answer),
            Msg::Prepare {
                txn,
                vc,
                age,
                reads,
                writes,
                epochs: _,
            } => self.prepare(ctx, txn, (vc, age), reads, writes),
            Msg::Vote { txn, vote } => self.vote(ctx, from, txn, vote),
            Msg::Decide {
                txn,
                decision,
                round,
            } => self.on_decide(ctx, txn, decision, round),
            Msg::Finalize { txn, round } => self.on_finalize(ctx, txn, round),
            Msg::Ack {
                txn,
                round,
                held_us,
            } => self.ack(ctx, from, txn, round, held_us),
            Msg::AwaitFinal { txn, dep } => self.await_final(ctx, from, txn, dep),
            Msg::Final { txn, dep } => self.dep_final(ctx, txn, dep),
            Msg::Released { txn } => self.released(ctx, txn),
            Msg::QueryReleased { txn } => self.query_released(ctx, from, txn),
            Msg::Remove { ro } => self.remove_reader(ctx, ro),
            Msg::Subscribe { ro } => self.subscribe(ctx, from, ro),
            Msg::QueryOutcome { txn } => self.query_outcome(ctx, from, txn),
            Msg::Membership(msg) => {
                if let Some(change) = self.membership.on_message(ctx, from, msg) {
                    self.reconfigure(ctx, change);
                }
                self.run_lease_waiters(ctx);
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        match timer {
            Timer::Tick => self.tick(ctx),
            Timer::Read(txn, seq) => {
                let Some(t) = self.coord.get(&txn) else {
                    return;
                };
                if !t.read.awaits(seq) || t.pending.is_none() {
                    return; // answered: the transaction moved on
                }
                if t.read_only {
                    // Read-only transactions never abort: ask again.
                    self.counters.ro_reads_resent += 1;
                    let t = self.coord.get_mut(&txn).expect("awaiting");
                    let seq = t.read.again();
                    self.send_read(ctx, txn, seq);
                } else {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
            Timer::Votes(txn) => {
                if let Some(Phase::Voting { .. }) = self.coord.get(&txn).map(|t| &t.phase) {
                    self.abort(ctx, txn, AbortReason::Timeout);
                }
            }
            Timer::Locks(txn) => self.lock_timeout(ctx, txn),
            Timer::Finalize(txn, round) => self.withdraw_round(ctx, txn, round),
            Timer::Admission => self.wake_parked(ctx),
            Timer::Settled(txn) => self.external_commit_if_final(ctx, txn),
            Timer::Membership(timer) => {
                if let Some(change) = self.membership.on_timer(ctx, timer) {
                    self.reconfigure(ctx, change);
                }
                self.run_lease_waiters(ctx);
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        vec![
            ("ro_snapshot_too_old", c.ro_snapshot_too_old),
            ("ro_reads_resent", c.ro_reads_resent),
            ("ro_reads_awaited_final", c.ro_reads_awaited_final),
            ("ro_reads_admission_delayed", c.ro_reads_admission_delayed),
            ("finalize_rounds_withdrawn", c.finalize_rounds_withdrawn),
            (
                "updates_awaited_dependencies",
                c.updates_awaited_dependencies,
            ),
            ("writers_held", c.writers_held),
            ("updates_committed", c.updates_committed),
            ("update_latency_us", c.update_latency_us),
            ("precommit_hold_us", c.precommit_hold_us),
            ("decided_to_external_us", c.decided_to_external_us),
            ("ro_reconfigured", c.ro_reconfigured),
            ("acks_given_up", c.acks_given_up),
        ]
        .into_iter()
        .chain(self.membership.counters())
        .collect()
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        // Tombstones (`aborted`, `removed`) are not here: they are kept for the retention on
        // purpose and collected by time.
        vec![
            ("held_writers", self.held.len() as u64),
            ("commit_queue", self.commit_q.len() as u64),
            ("unreleased_writers", self.unreleased.len() as u64),
            ("final_waiters", self.final_waiters.len() as u64),
            ("update_readers_not_final", self.update_reads.len() as u64),
            ("queued_readers", self.readers.len() as u64),
            ("parked_reads", self.parked.len() as u64),
            ("prepared_participants", self.participants.len() as u64),
            ("coordinated_transactions", self.coord.len() as u64),
            ("decisions_kept", self.decided.iter().count() as u64),
            (
                "nonempty_snapshot_queues",
                self.store
                    .iter()
                    .filter(|(_, e)| !e.meta.is_empty())
                    .count() as u64,
            ),
            ("lease_waiters", self.lease_waiters.len()),
        ]
        .into_iter()
        .chain(self.membership.leftovers())
        .collect()
    }

    fn leader(&self) -> Option<NodeId> {
        self.membership.leader()
    }

    fn master_of(&self, partition: PartitionId) -> Option<NodeId> {
        self.membership.master_of(partition)
    }
}

impl Sss {
    /// After a restart, take up coordinating the transactions decided here that had not
    /// committed externally (their decisions are still in the log): they finish without a
    /// client to answer.
    fn resume_committing(&mut self) {
        let decided: Vec<(TxnId, Decision, Vec<NodeId>)> = self
            .decided
            .iter()
            .map(|(txn, d, replicas)| (*txn, d.clone(), replicas.to_vec()))
            .collect();
        for (txn, decision, write_replicas) in decided {
            let vc = decision.vc.clone();
            // Who only read is not in the log: every node hears that it is final.
            let participants = (0..self.nodes() as u32).map(NodeId).collect();
            self.coord.insert(
                txn,
                Coord::new(
                    false,
                    vc,
                    Timestamp::ZERO,
                    Timestamp::ZERO,
                    Phase::Committing {
                        decision,
                        participants,
                        write_replicas,
                        round: Round::default(),
                        acked: BTreeSet::new(),
                        sent_at: Timestamp::ZERO,
                        held_us: 0,
                        decided_at: Timestamp::ZERO,
                        awaiting: BTreeSet::new(),
                        withdrawals: 0,
                        settle_at: None,
                    },
                ),
            );
        }
    }

    /// Rebuild state from one durable record (see [`Record`]).
    fn replay(&mut self, record: Record) {
        use crate::common::replica::Record as Kit;
        match record {
            Record::Kit(Kit::IdsReserved { below }) => self.ids.resume_below(below),
            Record::Kit(Kit::Decided {
                txn,
                decision,
                replicas,
            }) => self.decided.record(txn, decision, replicas),
            Record::Kit(Kit::Forgotten { txn }) => self.decided.forget(txn),
            Record::Kit(Kit::Versions { key, versions }) => {
                crate::common::replica::restore_versions(&mut self.store, &key, versions)
            }
            Record::Kit(_) => {}
            Record::Prepared {
                txn,
                vc,
                reads,
                writes,
                write_replica,
            } => {
                for (key, _) in &writes {
                    let _ = self
                        .locks
                        .acquire(txn, Timestamp::ZERO, key, LockMode::Exclusive);
                }
                for key in &reads {
                    let _ = self
                        .locks
                        .acquire(txn, Timestamp::ZERO, key, LockMode::Shared);
                }
                let position = vc.get(self.me);
                if write_replica {
                    self.commit_q.insert((position, txn), false);
                }
                self.node_vc.merge(&vc);
                self.participants.insert(
                    txn,
                    Participant {
                        reads: reads.into_iter().map(|k| (k, None)).collect(),
                        writes,
                        vc,
                        write_replica,
                        locks_missing: 0,
                        voted: Some(position),
                        decision: None,
                        // Overdue from the start: ask the coordinator at once.
                        last_query: Timestamp::ZERO,
                    },
                );
            }
            Record::Applied { txn, vc } => {
                self.node_vc.merge(&vc);
                let Some(p) = self.participants.remove(&txn) else {
                    return;
                };
                if let Some(position) = p.voted {
                    self.commit_q.remove(&(position, txn));
                }
                let keys = p.writes.iter().map(|(k, _)| k.clone()).collect();
                self.unreleased.insert(txn, Timestamp::ZERO);
                let position = self.nlog.append(txn, vc, keys, Timestamp::ZERO);
                self.install(txn, position, p.writes);
                let _ = self.locks.release_all(txn);
            }
            Record::Finished { txn } => {
                if let Some(p) = self.participants.remove(&txn)
                    && let Some(position) = p.voted
                {
                    self.commit_q.remove(&(position, txn));
                }
                let _ = self.locks.release_all(txn);
            }
            Record::NodeClock(vc) => self.node_vc.merge(&vc),
            Record::Unreleased { txn } => {
                self.unreleased.insert(txn, Timestamp::ZERO);
            }
            Record::ReadsCommitted { txn, keys } => {
                self.note_update_reads(txn, keys, Timestamp::ZERO)
            }
            // A reader that ended before the restart is removed once its coordinator answers
            // the subscription the next tick sends (it is overdue from the start).
            Record::ReaderEntered { ro, key, snapshot } => {
                self.enter_reader(ro, key, snapshot, Timestamp::ZERO)
            }
            Record::Log(checkpoint) => self.nlog = NLog::restore(checkpoint),
        }
    }
}

#[cfg(test)]
mod tests;
