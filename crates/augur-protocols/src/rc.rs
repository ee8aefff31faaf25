//! `rc`: the read-committed baseline of DST (Wei, Chen, Chen, Wang, Gong, Zang, "Unifying
//! Timestamp with Transaction Ordering for MVCC with Decentralized Scalar Timestamp", NSDI '21,
//! §5 intro, "RC/Incorrect"): read-write transactions run the base OCC; read-only transactions
//! read the newest committed value of each key with no validation, no claim and no wait, and
//! commit with no message. The paper uses it as the "optimal" upper bound DST aims to come
//! within 5% of; it ignores every conflict between a read-only and a read-write transaction.
//!
//! **Guarantee: read committed** (Adya's PL-2): every value read was committed, and the
//! read-write transactions among themselves are strictly serializable, as under [`crate::occ`].
//! A read-only transaction can see one writer's update on one key and miss it on another (read
//! skew, a G-single through the reader): `tests/rc.rs` scripts one and shows the checker
//! rejecting it at serializability.
//!
//! # The protocol
//!
//! It runs on the kit's single-version lock-and-2PC engine ([`crate::common::lock_commit`]) as
//! the [`Locking::Optimistic`] flavor `occ` runs, with [`ReadOnly::Unvalidated`]:
//!
//! * **Read-write transactions** are `occ`'s exactly (reads at the master without locks; at
//!   commit the write set is locked everywhere, no-wait, then the reads are validated at their
//!   masters in a second round; 2PC).
//! * **Read-only transactions** (declared at `Begin`) read at each key's master, as `occ`'s do,
//!   and commit at once: no validation round, no message, nothing logged. This is `occ`'s
//!   mutant `no-read-only-validation` — the same engine path — under the claim it actually
//!   meets.
//!
//! Why read committed holds: a read returns the newest committed version at the key's master,
//! never an uncommitted or aborted one (writes are buffered by the client and installed only at
//! the commit decision), and read-write transactions are serialized as `occ`'s, so their
//! dependency graph has no cycle; a read-only transaction adds only incoming `wr` and outgoing
//! `rw` edges, which PL-2 does not restrict.
//!
//! # What comes from the paper, and what is augur's choice
//!
//! From the paper: RC's read-only transactions skip the validation (and DST's claims and waits)
//! and read the latest committed value; read-write transactions run the base CC, DrTM+R's OCC.
//! The paper's code switches this on with `#define RC 1` (`dbrad.cc`, the digest
//! `shared/papers/dst.md` §4). augur's choices are `occ`'s (see [`crate::occ`]): replication,
//! durability, recovery, no retries by the protocol.
//!
//! **Fail-over** (on by default; the engine's, see [`crate::common::lock_commit`] and
//! `docs/architecture/availability.md`): what the master keeps is the committed versions it serves reads from, and the exclusive locks every in-sync replica also holds; a promoted
//! replica already holds it, so it rebuilds nothing and asks the coordinators of the
//! transactions prepared there at once. A dead replica costs commits on its partitions until
//! its eviction (the lease plus the skew bound after its last renewal), a dead master also the
//! reads sent to it.
//!
//! # Mutants
//!
//! None: nothing a read-committed claim proscribes depends on a mechanism `rc` has beyond
//! `occ`'s own.

use crate::common::lock_commit::{Flavor, LockCommit, Locking, MsgOf, ReadOnly, RecordOf, Single};
use crate::protocol_info::Engine;
use crate::protocol_info::Promise;
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use std::time::Duration;

pub use crate::common::lock_commit::Timer;

/// `rc`'s messages: the engine's (its scheme, `Single`, has none of its own).
pub type Msg = MsgOf<Rc>;

/// `rc`'s log records: the engine's.
pub type Record = RecordOf<Rc>;

/// `rc`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "rc",
    isolation: IsolationLevel::ReadCommitted,
    isolation_with: &[],
    paper: "DST (NSDI 2021) §5 baseline: RC, read-only transactions unvalidated over DrTM+R OCC",
    summary: "occ's read-write transactions; read-only transactions read the newest committed versions at the masters and commit with no validation and no message (fast, not serializable)",
    engine: Engine::LockCommit,
    commit_order_evidence: true,
    promises: &[Promise::AbortFreeReadOnly],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: &[],
    settings: crate::common::membership::FAILOVER_SETTINGS,
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
};

/// `rc` as a flavor of the lock-and-2PC engine.
pub struct Rc;

impl Flavor for Rc {
    const INFO: ProtocolInfo = INFO;
    const LOCKING: Locking = Locking::Optimistic;
    type Scheme = Single;
    const READ_ONLY: ReadOnly = ReadOnly::Unvalidated;
    /// Never used: nothing waits for a lock.
    const DEFAULT_LOCK_TIMEOUT: Duration = Duration::ZERO;
    const FAILS_OVER: bool = true;
}

/// One node running `rc`.
pub type RcNode = LockCommit<Rc>;
