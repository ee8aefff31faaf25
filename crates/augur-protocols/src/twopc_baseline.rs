//! `2pc-baseline`: the two-phase-commit baseline that SSS is measured against (Kishi, Peluso,
//! Korth, Palmieri, "SSS: Scalable Key-Value Store with External Consistent and Abort-free
//! Read-only Transactions", ICDCS 2019, §V: "all transactions execute as SSS's update
//! transactions; read-only transactions validate their execution, therefore they can abort; and
//! no multi-version data repository is deployed").
//!
//! **Guarantee: strict serializability** (the paper's "external consistency"), for read-only
//! transactions as for updates. The price is what SSS removes: read-only transactions lock,
//! validate and can abort, like every other transaction.
//!
//! # The protocol
//!
//! It runs on the kit's single-version lock-and-2PC engine ([`crate::common::lock_commit`]),
//! as its [`Locking::AtCommit`] flavor (`occ` and `2pl` are the engine's other two).
//!
//! * **Single version.** Every read, read-only or not, returns the newest committed version of
//!   its key at one replica (the coordinator's own if it stores the key, else the nearest), with
//!   the identity of that version (the transaction that wrote it). No snapshot is kept: the
//!   store's garbage collection keeps only the newest version of each key. Reads take no lock
//!   and do not wait for locks; validation catches what they may miss. Writes are buffered by
//!   the client and shipped with the commit request.
//! * **Two-phase commit with validation.** At commit the coordinator sends `Prepare`, with the
//!   keys it read (each with the version read) and the keys it writes (with their values), to
//!   every replica of every key read or written. A participant locks them all (exclusive for the
//!   keys written, shared for the keys only read; `common::lock_sets`), waiting at most
//!   `lock_timeout` (then it votes no: `LockTimeout`). Holding them, it checks that every key
//!   read still has, as its newest committed version, the version read — by the identity of
//!   its writer, never by comparing clocks (a value written again, even equal, is a new
//!   version) — and votes no (`ValidationFailed`) or yes with a proposed timestamp above every
//!   version it holds. With every yes the coordinator decides to commit at the largest proposal,
//!   logs the decision, answers its client and sends the decision to every participant. Write
//!   replicas install the writes at that timestamp and acknowledge; every participant releases
//!   its locks. One no, or a participant silent for `participant_timeout`, aborts everywhere.
//! * **Read-only transactions validate too**: a read-only transaction that read anything runs
//!   the same 2PC over the replicas of the keys it read (shared locks, validation, no writes), so
//!   a writer that overwrote a key it read aborts it. This is what the baseline measures: under
//!   SSS (and under the snapshot protocols here) the same read-only transaction commits.
//!
//! Why this is strictly serializable: a transaction commits only if, at one instant (when every
//! participant holds its locks), every replica of every key it read still has the version it
//! read, and every replica of every key it writes is locked against everyone else; the
//! decision falls inside that instant's lock period, so transactions are serialized in the
//! order of their decisions, which respects real time. A client told of a commit may read a
//! replica that has not applied it yet, but that replica still holds the writer's exclusive
//! lock, so the reader's validation waits for it and then fails: the stale read never commits.
//!
//! Commit timestamps order each key's versions (the checker may use them as evidence): a
//! participant proposes above the timestamp of every version it applied, and a writer of a key
//! locks every replica of it only after the previous writer applied there and released it.
//!
//! # The paper's unspecified points, and the choices here
//!
//! The digest (`shared/papers/sss.md` §4.1) lists what §V leaves open:
//!
//! * **Which replica serves a read**: the coordinator's own, else the nearest (SSS asks every
//!   replica and takes the fastest; with validation at every replica, either is correct).
//! * **Whether reads check locks**: they do not; a read of a key being overwritten returns the
//!   old version and fails validation later.
//! * **Whether aborted transactions are retried**: not by the protocol; clients decide (`augur
//!   bench` retries, `augur check` moves on to its next transaction).
//! * **The lock-acquisition timeout** is the setting `lock_timeout` (the values SSS's module
//!   defines, shared here): the paper's 1 ms is about 50 one-way message delays of its network
//!   (20 µs each), so the default, 5 ms, is 50 one-way delays of the `lan` profile (0.1 ms).
//!   The digest's reproduction hint: this ratio sets what an abort costs, hence most of SSS's
//!   advantage; keep it when the network changes (`--set protocol.lock_timeout=...`).
//!
//! # Failures
//!
//! Links may lose and reorder messages, partitions heal, nodes crash and restart:
//!
//! * **Durable state.** Through the node's write-ahead log ([`Record`]): each yes vote's
//!   prepare (keys read, writes) before the vote leaves, so a restarted participant takes its
//!   locks again and keeps its promise; each outcome applied (`Committed` with the writes
//!   installed, `Aborted`); the coordinator's commit decisions, kept until every write replica
//!   acknowledged (the 2PC kit's `DecisionLog`), and its transaction-id reservations
//!   (`TxnIds`). A checkpoint holds the newest version of each key, the prepares and the
//!   decisions. Coordination in flight and prepares still waiting for locks are lost in a crash:
//!   their coordinators time out and abort.
//! * **Termination.** A participant that voted yes and has heard nothing for
//!   `participant_timeout` asks the coordinator (`QueryOutcome`, again every
//!   `participant_timeout`; at once after a restart), which answers from its decision log, says
//!   nothing while it is still collecting votes, and otherwise *presumes abort*: it forgets a
//!   transaction only after aborting it, after every write replica applied its commit, or in a
//!   crash before any decision. A participant that only read there loses nothing by releasing
//!   its shared locks on a presumed abort.
//! * A prepare that arrives after its transaction ended at a participant (reordered behind the
//!   abort, say) is ignored for `gc_retention`.
//!
//! **Fail-over** (on by default; the engine's, see [`crate::common::lock_commit`] and
//! `docs/architecture/availability.md`): what the master keeps is nothing a slave lacks: reads go to the nearest in-sync replica and every in-sync replica of a key read or written locks and validates at commit; a promoted
//! replica already holds it, so it rebuilds nothing and asks the coordinators of the
//! transactions prepared there at once. A dead replica costs commits on its partitions until
//! its eviction (the lease plus the skew bound after its last renewal), a dead master also the
//! reads sent to it.
//!
//! # Mutants (`augur check --mutant`)
//!
//! * `no-read-validation`: participants vote yes without validating (lost updates, write skew,
//!   read skew).
//! * `no-read-only-validation`: read-only transactions commit as soon as their reads return,
//!   without locks or validation — SSS's read-only shortcut (A1:L3) without the snapshot-queues
//!   that make it safe (read skew).

use crate::common::lock_commit::{Flavor, LockCommit, Locking, MsgOf, RecordOf, Single};
use crate::common::locks::{LOCK_TIMEOUT, LOCK_TIMEOUT_VALUES};
use crate::protocol_info::Engine;
use crate::protocol_info::SettingInfo;
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use std::time::Duration;

pub use crate::common::lock_commit::Timer;

/// `2pc-baseline`'s messages: the engine's (its scheme, `Single`, has none of its own).
pub type Msg = MsgOf<Baseline>;

/// `2pc-baseline`'s log records: the engine's.
pub type Record = RecordOf<Baseline>;

/// `2pc-baseline`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "2pc-baseline",
    isolation: IsolationLevel::StrictSerializable,
    isolation_with: &[],
    paper: "SSS (ICDCS 2019) §V baseline",
    summary: "single version; every transaction, read-only too, locks, validates its reads and commits by 2PC at every replica",
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

/// The lock timeout when the setting is not given: 50 one-way delays of the `lan` profile.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_millis(5);

/// The protocol settings `2pc-baseline` accepts.
pub const SETTINGS: &[SettingInfo] = &[
    SettingInfo {
        name: LOCK_TIMEOUT,
        values: LOCK_TIMEOUT_VALUES,
        default: "5ms",
        doc: "how long a participant waits for its locks before voting no (the paper's 1 ms is 50 one-way message delays; 5 ms is 50 of the lan profile's)",
    },
    crate::common::membership::FAILOVER_SETTING,
    crate::common::membership::LEASE_SETTING,
    crate::common::membership::SKEW_SETTING,
];

/// The mutants `2pc-baseline` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-read-validation",
        "participants vote yes without checking that the keys read still have the versions read (lost updates, write skew, read skew)",
    ),
    (
        "no-read-only-validation",
        "read-only transactions commit once their reads return, without locks or validation (SSS's read-only shortcut without its snapshot-queues: read skew)",
    ),
];

/// `2pc-baseline` as a flavor of the lock-and-2PC engine.
pub struct Baseline;

impl Flavor for Baseline {
    const INFO: ProtocolInfo = INFO;
    const LOCKING: Locking = Locking::AtCommit;
    type Scheme = Single;
    const DEFAULT_LOCK_TIMEOUT: Duration = DEFAULT_LOCK_TIMEOUT;
    const FAILS_OVER: bool = true;
}

/// One node running `2pc-baseline`.
pub type TwoPcBaseline = LockCommit<Baseline>;

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
        assert_eq!(parse_lock_timeout("1ms"), Some(Duration::from_millis(1)));
    }
}
