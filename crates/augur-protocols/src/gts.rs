//! `gts`: DST's global-timestamp baseline (Wei, Chen, Chen, Wang, Gong, Zang, "Unifying
//! Timestamp with Transaction Ordering for MVCC with Decentralized Scalar Timestamp", NSDI '21,
//! §2.2, Fig. 2 and Fig. 3; evaluated on DrTM+R OCC in §5.1): `occ` whose read-write
//! transactions take their commit timestamps from a timestamp oracle and install versions at
//! them, so that read-only transactions read a consistent snapshot at the oracle's *stable*
//! timestamp, in one round per key, never validating, never waiting, never aborting.
//!
//! **Guarantee: serializability** (§5.1: the timestamp schemes give "the same consistency
//! level" as DST), read-only transactions included; read-write transactions among themselves
//! stay as strict as `occ`'s. Not strict serializability: a snapshot at the stable timestamp
//! may miss a commit already acknowledged whose timestamp is not stable yet. **Read-only
//! transactions never abort** (`Promise::AbortFreeReadOnly`; a timeout or a lost coordinator
//! aside). **Timestamps order dependencies** (`Promise::TimestampsOrderDependencies`, the two
//! points below): every dependency between committed read-write transactions goes to a later
//! commit timestamp, and a read-only transaction, whose commit timestamp is its snapshot,
//! returns per key the newest version at or below it. No staleness bound: stable lags behind
//! the newest commit by however long the oldest pending timestamp takes to be released.
//!
//! # The protocol
//!
//! It runs on the kit's lock-and-2PC engine ([`crate::common::lock_commit`]) as `occ`'s
//! [`Locking::Optimistic`] flavor with [`Timestamping::Gts`]; the oracle's state and durability
//! are [`crate::common::oracle`].
//!
//! * **The oracle** is one node, named by the setting `oracle` (a node id of the cluster,
//!   default 0); it is also an ordinary node. It keeps the last timestamp issued
//!   (`GlobalTS`), the *pending* timestamps (issued, not yet released) and publishes
//!   `stable` = one below the least pending timestamp, or the last issued when none is pending
//!   (Fig. 2's `StableGTS`; the paper leaves "ready" undefined, trap T-9: here a timestamp is
//!   ready once every smaller one is released).
//! * **Read-write execution** is `occ`'s: reads at the master, no locks, writes buffered.
//! * **Commit.** Lock the write set at every replica (the engine's prepare round, no-wait);
//!   then, inside the critical section and before validation (trap T-9, mutant M-13), fetch
//!   `TS` from the oracle (one round trip, `FetchTs`/`IssuedTs`); validate the reads at their
//!   masters; decide at `TS`. Write replicas install their versions at `TS` and unlock. Once
//!   every write replica has applied the commit (the coordinator's `DecisionLog` hears the
//!   last `Applied`), the coordinator releases `TS` at the oracle (`Done`, Fig. 2's
//!   `INSTALL`). An abort after the fetch releases it too, or stable would stall behind it.
//!   Every committing read-write transaction fetches, even one that wrote nothing, so that
//!   all of them are ordered by `TS`.
//! * **Read-only transactions** (declared at `Begin`, T-13): `Begin` fetches stable from the
//!   oracle (one round trip) and the snapshot is `x.TS = max(fetched, the largest stable this
//!   node has heard of)`, reported as `Begun`'s snapshot and as the commit timestamp. Each
//!   read goes to the key's master and returns the newest version at or below `x.TS`: every
//!   version at or below a stable timestamp is installed at every replica already, so there is
//!   no claim and no wait. The commit sends nothing and never fails.
//!
//! # Why it is serializable
//!
//! *Read-write transactions commit in timestamp order along every dependency edge A → B.* The
//! oracle issues timestamps in the order it receives fetches. ww and wr: B locks (or reads) a
//! key after A installed it there, and A fetched before it decided, so B's fetch, after its
//! locks, follows A's: `TS_A < TS_B`. rw (A read a version B overwrote): A's validation at
//! the key's master came before B locked it (or A saw B's lock or version and aborted), A
//! fetched before validating and B fetches after locking: `TS_A < TS_B`. This is exactly why
//! the fetch sits between locking and validation; fetched after validation (M-13), B could
//! lock, fetch and commit between A's validation and A's fetch, and `TS_B < TS_A`.
//!
//! *A read-only transaction at `x.TS` sees exactly the read-write transactions with
//! `TS ≤ x.TS`.* `x.TS` was stable at the oracle when published (or is at or below such a
//! value): every timestamp at or below it was released, and a commit is released only once
//! every write replica applied it, or once it aborted. A timestamp issued later is above it.
//! So every version at or below `x.TS` is in place at the master before the read arrives and
//! none appears there later. By the first point this set is closed under dependencies, so the
//! reader serializes after them and before every other read-write transaction.
//!
//! # Failures
//!
//! * **Lost messages, crashed coordinators.** The oracle asks the coordinator of a timestamp
//!   pending for `participant_timeout` what became of it (`QueryTs`). The coordinator says
//!   nothing while the transaction runs there; while its commit is not yet applied everywhere
//!   (its decision log still holds it, also after a restart) it sends the decision again to
//!   the write replicas that have not acknowledged it, whose acknowledgements release it;
//!   otherwise (aborted, lost in a crash before its decision, or applied) it releases it. A
//!   timestamp that reaches a coordinator no longer waiting for it is released at once.
//! * **Oracle restart.** Issued timestamps never repeat (a durable lease ahead of them); a
//!   published stable never goes back (logged before it leaves: nodes may have collected
//!   versions below it); pending timestamps are volatile, so a restarted oracle holds stable
//!   where it was logged until every node said which timestamps its coordinators hold
//!   (`AskHeld`/`Held`): stale, never wrong. A coordinator that answered refuses any
//!   timestamp of an earlier incarnation that reaches it afterwards (its transaction aborts),
//!   since the restarted oracle does not count it. A node that is down holds stable back
//!   until it is back. Versions are durable with their timestamps (the engine's records).
//!
//! # Garbage collection (not in the paper)
//!
//! DST's horizon announcements ([`crate::dst_occ`]), with "the lowest snapshot a read-only
//! transaction this node coordinates reads now or later" = min(the running ones' `x.TS`, the
//! largest stable heard of here). That is why `x.TS` is at least that largest value: it stays
//! a floor even if a restarted oracle (or a reordered answer) reports lower. The oracle
//! announces stable to every node every tenth tick, so nodes without read-only transactions do not
//! hold collection back.
//!
//! # What comes from the paper, and what is augur's choice
//!
//! From the paper: the oracle with `GlobalTS`, `StableGTS` and the pending queue; one round
//! trip to fetch a commit timestamp, one to install it, one for a read-only transaction's
//! stable timestamp; versions at the commit timestamp; read-only transactions reading at or
//! below stable with no waits or aborts; OCC as the base CC. Fixed traps (digest
//! `shared/papers/dst.md` §6, T-9): the fetch inside the critical section, released by aborts
//! too, and "ready" defined as above. augur's: the oracle's placement by setting, its durable
//! lease and logged stable, the restart protocol, the coordinator queries, the release after
//! every replica applied (Fig. 2's worker installs its own writes, then calls `INSTALL`;
//! augur's write replicas apply on the decision, so the coordinator learns it from their
//! acknowledgements), per-node
//! monotone snapshots, garbage collection, and `occ`'s engine choices (replication,
//! durability, termination; see [`crate::occ`]). The paper's optimisations (batching,
//! coroutines, a dedicated fetch thread) are not modelled; the paper runs GTS on OCC only, and
//! so does augur.
//!
//! # Mutants (`augur check --mutant`)
//!
//! See [`MUTANTS`].

use crate::common::lock_commit::{Flavor, LockCommit, Locking, ORACLE, Timestamping};
use crate::registry::{
    INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NODE_ID_VALUES, NetworkModel, Promise, ProtocolInfo,
    SettingInfo,
};
use std::time::Duration;

pub use crate::common::lock_commit::{Msg, Record, Timer};

/// `gts`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "gts",
    isolation: IsolationLevel::Serializable,
    paper: "DST (NSDI 2021) §2.2 baseline: GTS, a global timestamp oracle over DrTM+R OCC",
    summary: "occ plus a timestamp oracle: commit timestamps fetched after locking and before validation, released once applied everywhere; read-only transactions read at the oracle's stable timestamp, never wait, never abort",
    commit_order_evidence: true,
    promises: &[
        Promise::AbortFreeReadOnly,
        Promise::TimestampsOrderDependencies,
    ],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: SETTINGS,
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
    sequencer: false,
};

/// The oracle's placement.
pub const ORACLE_SETTING: SettingInfo = SettingInfo {
    name: ORACLE,
    values: NODE_ID_VALUES,
    default: "0",
    doc: "the node that acts as timestamp oracle (a node id of the cluster)",
};

/// The protocol settings `gts` accepts.
pub const SETTINGS: &[SettingInfo] = &[ORACLE_SETTING];

/// The mutants `gts` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[(
    "read-at-global-ts",
    "read-only transactions read at the last timestamp issued (GlobalTS) instead of the stable one (M-12: a commit with a smaller timestamp may not be applied yet; fractured read, Fig. 3; caught by seed 1 of list-append, rw-register and bank under --faults all --latency 3dc; on list-append by the timestamp-order promise, the first serializability anomaly there being seed 17's)",
)];

/// `gts` as a flavor of the lock-and-2PC engine.
pub struct Gts;

impl Flavor for Gts {
    const INFO: ProtocolInfo = INFO;
    const LOCKING: Locking = Locking::Optimistic;
    const TIMESTAMPS: Timestamping = Timestamping::Gts;
    /// Never used: nothing waits for a lock.
    const DEFAULT_LOCK_TIMEOUT: Duration = Duration::ZERO;
}

/// One node running `gts`.
pub type GtsNode = LockCommit<Gts>;
