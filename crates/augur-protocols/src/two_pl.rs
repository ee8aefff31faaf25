//! `2pl`: the vanilla 2PL baseline of DST (Wei, Chen, Chen, Wang, Gong, Zang, "Unifying
//! Timestamp with Transaction Ordering for MVCC with Decentralized Scalar Timestamp", NSDI '21,
//! §4.2 "MySQL cluster" and §5.2): MySQL Cluster (v7.6.8) with per-row two-phase locking for
//! serializability (footnote 10), without DST's timestamps — readers and writers block each
//! other, read-only transactions included.
//!
//! **Guarantee: strict serializability** (the digest `shared/papers/dst.md` §1; strict 2PL
//! holds every lock until the commit decision).
//!
//! # The protocol
//!
//! It runs on the kit's single-version lock-and-2PC engine ([`crate::common::lock_commit`]) as
//! its [`Locking::TwoPhase`] flavor, which `2pc-baseline` and `occ` share.
//!
//! * **Reads lock.** A read goes to the key's partition master, which grants the transaction a
//!   shared lock on the key before it returns the newest committed version; a key locked
//!   exclusively by a committing writer makes the read wait. The lock is held until the
//!   transaction's outcome reaches the master.
//! * **Writes lock at commit.** augur's client buffers writes and ships them with the commit
//!   (there is no write request to lock at), so the exclusive locks are taken then, at every
//!   replica of every key written, upgrading the shared lock of a key also read. This is the
//!   latest a strict 2PL may take them; what other transactions can observe is the same as
//!   locking at write time, since nobody sees a buffered write.
//! * **2PC.** At commit the coordinator sends `Prepare` to every replica of a key written and to
//!   every master it read from. A participant takes the exclusive locks, checks that it still
//!   holds every shared lock the transaction took there (a crash loses them: then it votes no),
//!   logs its promise and votes yes. The decision is logged and sent as for `2pc-baseline`;
//!   every participant installs its writes and only then releases its locks. A read-only
//!   transaction commits the same way (its masters confirm and release its shared locks): it
//!   never fails a validation, but it blocks writers, and it can die (wait-die) or time out
//!   waiting for a writer's lock like any other.
//! * **Deadlocks: wait-die** on the transaction's age at its coordinator (ties by transaction
//!   id): a request waits only for younger holders and waiters, otherwise the requester dies
//!   (`wait_die`). A transaction's age is its begin time, except that a client whose last
//!   attempt aborted keeps that attempt's age until it commits — wait-die's rule that a
//!   restarted transaction keeps its timestamp, without which retries are always the youngest
//!   and die for ever on hot rows (TPC-C's warehouses). Every wait is also bounded by `lock_timeout` (default 100 ms,
//!   the largest value offered: waits are for a holder's commit round trips, up to tens of
//!   milliseconds in `3dc`; a longer wait is reported as `lock_timeout`).
//!
//! Why this is strictly serializable: when its coordinator decides, a transaction holds a
//! shared lock on every key it read (continuously since the read, or its master votes no) and an
//! exclusive lock on every replica of every key it writes, and it keeps them until each node has
//! the outcome. Conflicting transactions therefore cannot overlap their lock points, so they are
//! serialized in the order of their decisions, each inside its own execution.
//!
//! # What comes from the paper, and what is augur's choice
//!
//! From the paper: per-row shared/exclusive locks, held to the end, readers and writers
//! blocking each other, read-only transactions locking like any other, strict
//! serializability. The paper does not say how MySQL Cluster avoids deadlocks (NDB detects
//! them by timeout); augur uses wait-die, with the timeout as the bound.
//!
//! augur's further choices:
//!
//! * **Reads at the master**: a shared lock has to live where writers look for it; writers lock
//!   every replica, the master included.
//! * **Crashes**: shared locks of executing transactions are volatile. A master that restarts
//!   has lost them, so the prepare finds one missing and votes no; a second read of a key that
//!   returns another version (the lock was lost between the two) aborts at the coordinator.
//!   Prepared locks are logged with the vote and restored at recovery. Termination and
//!   presumed abort are the engine's; a master whose executing transaction has been idle for
//!   `participant_timeout` asks its coordinator, which aborts it if it no longer knows it.
//! * **Aborted transactions are not retried by the protocol**; the coordinator only remembers a
//!   client's age across its aborted attempts (above), volatile, and `lock_timeout` keeps any
//!   wait bounded.
//!
//! **Fail-over** (on by default; the engine's, see [`crate::common::lock_commit`] and
//! `docs/architecture/availability.md`): what the master keeps is the committed versions it serves reads from, the exclusive locks every in-sync replica also holds, and the shared locks of executing transactions, which are lost with it as in a crash (their prepare at the new master finds the lock missing and votes no); a promoted
//! replica already holds it, so it rebuilds nothing and asks the coordinators of the
//! transactions prepared there at once. A dead replica costs commits on its partitions until
//! its eviction (the lease plus the skew bound after its last renewal), a dead master also the
//! reads sent to it.
//!
//! # Mutants (`augur check --mutant`)
//!
//! * `early-read-unlock`: a master releases a read's shared lock as soon as it answered it —
//!   not two-phase — and the prepare no longer asks for it (lost updates, write skew, read
//!   skew). Caught by `augur check --faults all --latency 3dc` by the first seed for
//!   `list-append` and `rw-register`, the second for `bank`.

use crate::common::lock_commit::{Flavor, LockCommit, Locking, MsgOf, RecordOf, Single};
use crate::common::locks::{LOCK_TIMEOUT, LOCK_TIMEOUT_VALUES};
use crate::protocol_info::Engine;
use crate::protocol_info::SettingInfo;
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use std::time::Duration;

pub use crate::common::lock_commit::Timer;

/// `2pl`'s messages: the engine's (its scheme, `Single`, has none of its own).
pub type Msg = MsgOf<TwoPl>;

/// `2pl`'s log records: the engine's.
pub type Record = RecordOf<TwoPl>;

/// `2pl`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "2pl",
    isolation: IsolationLevel::StrictSerializable,
    isolation_with: &[],
    paper: "DST (NSDI 2021) §4.2/§5.2 baseline: vanilla MySQL Cluster per-row 2PL",
    summary: "single version; reads take shared locks at the master, writes exclusive ones at every replica at commit, all held to the decision (wait-die); 2PC; read-only transactions lock too",
    engine: Engine::LockCommit,
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

/// The lock timeout when the setting is not given (see the module docs).
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_millis(100);

/// The protocol settings `2pl` accepts.
pub const SETTINGS: &[SettingInfo] = &[
    SettingInfo {
        name: LOCK_TIMEOUT,
        values: LOCK_TIMEOUT_VALUES,
        default: "100ms",
        doc: "how long a read or a prepare waits for a lock wait-die lets it wait for before giving up (wait-die already prevents deadlocks; this only bounds a wait)",
    },
    crate::common::membership::FAILOVER_SETTING,
    crate::common::membership::LEASE_SETTING,
    crate::common::membership::SKEW_SETTING,
];

/// The mutants `2pl` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[(
    "early-read-unlock",
    "a master releases a read's shared lock once it answered the read (not two-phase), and the prepare no longer asks for it (lost updates, write skew, read skew; caught by seed 1 of list-append and rw-register, seed 2 of bank, under --faults all --latency 3dc)",
)];

/// `2pl` as a flavor of the lock-and-2PC engine.
pub struct TwoPl;

impl Flavor for TwoPl {
    const INFO: ProtocolInfo = INFO;
    const LOCKING: Locking = Locking::TwoPhase;
    type Scheme = Single;
    const DEFAULT_LOCK_TIMEOUT: Duration = DEFAULT_LOCK_TIMEOUT;
    const FAILS_OVER: bool = true;
}

/// One node running `2pl`.
pub type TwoPlNode = LockCommit<TwoPl>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::locks::parse_lock_timeout;

    #[test]
    fn the_default_lock_timeout_is_the_listed_one() {
        assert_eq!(
            parse_lock_timeout(SETTINGS[0].default),
            Some(DEFAULT_LOCK_TIMEOUT)
        );
    }
}
