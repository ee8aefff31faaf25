//! `occ`: the vanilla OCC baseline of DST (Wei, Chen, Chen, Wang, Gong, Zang, "Unifying
//! Timestamp with Transaction Ordering for MVCC with Decentralized Scalar Timestamp", NSDI '21,
//! §4.2 "DrTM+R" and §5.1): DrTM+R's optimistic concurrency control without DST's timestamps —
//! reads take no lock, commit locks the write set, validates the read set in an extra round and
//! aborts on a change, and read-only transactions validate too, so they abort under contention.
//!
//! **Guarantee: strict serializability** (§5.1: "the vanilla OCC protocol provides strict
//! serializability"), read-only transactions included.
//!
//! # The protocol
//!
//! It runs on the kit's single-version lock-and-2PC engine ([`crate::common::lock_commit`]) as
//! its [`Locking::Optimistic`] flavor, which `2pc-baseline` and `2pl` share.
//!
//! * **Execution.** Each read returns the newest committed version of its key at the key's
//!   partition master, with the identity of that version (its writer); nothing is locked or
//!   waited for. Writes are buffered by the client and shipped with the commit.
//! * **Lock.** At commit the coordinator sends the write set to every replica of every key
//!   written; each locks its keys exclusively (*no-wait*: a key locked by another transaction
//!   is a conflict, and the vote is no, `lock_timeout`), logs its promise and votes yes with a
//!   proposed timestamp above every version it applied.
//! * **Validate** — the round the paper counts against OCC. Once every write lock is held, the
//!   coordinator asks the master of each key read whether the key still has the version read
//!   (by writer identity, never by clocks) and is not locked by another transaction (a writer
//!   holding it may already be committing over it). Validation locks nothing and logs nothing;
//!   a failure aborts (`validation_failed`).
//! * **Commit.** With every lock held and every read valid, the coordinator decides to commit at
//!   the largest proposal, logs the decision, answers the client and sends it to the write
//!   replicas, which install and unlock. A read-only transaction skips the lock round, validates
//!   its reads like any other, and commits with no further message and nothing logged.
//!
//! Why this is strictly serializable: let *t* be the moment a transaction holds its last write
//! lock, before it sends any validation. Each key read was validated after *t*, at its master,
//! unchanged since the read and locked by no one else; a writer that committed over it after
//! the read would have to hold its lock at the master until it installed there, so it either
//! was seen (abort) or locked the key after the validation, hence after *t*. So at *t* every
//! read is current and every write locked: the transaction serializes at *t*, inside its own
//! execution, which respects real time. A client told of a commit may read a master that has
//! not applied it yet; the writer's lock is still there, and the reader's validation fails.
//!
//! # What comes from the paper, and what is augur's choice
//!
//! From the paper (§4.2, §5.1, and the digest `shared/papers/dst.md` §4): locks on the write
//! set at commit, validation of the read set as a separate round, abort on a changed version,
//! read-only transactions validating and aborting, strict serializability. DrTM+R's locks are
//! remote compare-and-swaps that fail on a held lock, hence *no-wait* here.
//!
//! augur's choices (the paper leaves them to DrTM+R's code or does not say):
//!
//! * **Replication**: every replica of a written key is locked and installs (primary-backup
//!   through the commit, as `2pc-baseline`); reads and validation go to the master alone,
//!   which is enough because a writer locks the master too.
//! * **No lock timeout**: nothing ever waits for a lock (no deadlock can form), so `occ` has no
//!   `lock_timeout` setting.
//! * **Durability and recovery** as the engine's: each write replica's yes vote is logged
//!   before it leaves, the coordinator's decision until every write replica applied it;
//!   termination by asking the coordinator, with presumed abort. Validators keep no state.
//! * **Aborted transactions are not retried by the protocol**: clients decide.
//!
//! **Fail-over** (on by default; the engine's, see [`crate::common::lock_commit`] and
//! `docs/architecture/availability.md`): what the master keeps is the committed versions it serves reads and validations from, and the exclusive locks every in-sync replica also holds; a promoted
//! replica already holds it, so it rebuilds nothing and asks the coordinators of the
//! transactions prepared there at once. A dead replica costs commits on its partitions until
//! its eviction (the lease plus the skew bound after its last renewal), a dead master also the
//! reads sent to it.
//!
//! # Mutants (`augur check --mutant`)
//!
//! * `no-read-validation`: the validation round is skipped; a transaction commits once its
//!   write set is locked (lost updates, write skew, read skew). Caught by `augur check
//!   --faults all --latency 3dc` within the first seed for `list-append`, `rw-register` and
//!   `bank`.
//! * `no-read-only-validation`: read-only transactions commit once their reads return (DST's
//!   trap M-17: `rc`'s reads under a strict claim; read skew). Caught by the first seed for
//!   `list-append` and `bank`, the second for `rw-register`.

use crate::common::lock_commit::{Flavor, LockCommit, Locking, MsgOf, RecordOf, Single};
use crate::protocol_info::Engine;
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use std::time::Duration;

pub use crate::common::lock_commit::Timer;

/// `occ`'s messages: the engine's (its scheme, `Single`, has none of its own).
pub type Msg = MsgOf<Occ>;

/// `occ`'s log records: the engine's.
pub type Record = RecordOf<Occ>;

/// `occ`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "occ",
    isolation: IsolationLevel::StrictSerializable,
    isolation_with: &[],
    paper: "DST (NSDI 2021) §4.2/§5.1 baseline: vanilla DrTM+R OCC",
    summary: "single version; reads at the master without locks; commit locks the write set (no-wait), validates the read set in a second round, 2PC; read-only transactions validate and can abort",
    engine: Engine::LockCommit,
    commit_order_evidence: true,
    promises: &[],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: crate::common::membership::FAILOVER_SETTINGS,
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
};

/// The mutants `occ` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-read-validation",
        "the validation round is skipped: a transaction commits once its write set is locked (lost updates, write skew, read skew; caught by seed 1 of list-append, rw-register and bank under --faults all --latency 3dc)",
    ),
    (
        "no-read-only-validation",
        "read-only transactions commit once their reads return, unvalidated (read skew; caught by seed 1 of list-append and bank, seed 2 of rw-register, under --faults all --latency 3dc)",
    ),
];

/// `occ` as a flavor of the lock-and-2PC engine.
pub struct Occ;

impl Flavor for Occ {
    const INFO: ProtocolInfo = INFO;
    const LOCKING: Locking = Locking::Optimistic;
    type Scheme = Single;
    /// Never used: nothing waits for a lock.
    const DEFAULT_LOCK_TIMEOUT: Duration = Duration::ZERO;
    const FAILS_OVER: bool = true;
}

/// One node running `occ`.
pub type OccNode = LockCommit<Occ>;
