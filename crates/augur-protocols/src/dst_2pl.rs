//! `dst-2pl`: DST over 2PL (Wei, Chen, Chen, Wang, Gong, Zang, "Unifying Timestamp with
//! Transaction Ordering for MVCC with Decentralized Scalar Timestamp", NSDI '21, §3.1–§3.2 (Fig.
//! 7 and 9 state it over 2PL), §4.1 and §4.2 "MySQL cluster"): `2pl` with decentralized scalar
//! timestamps, so that read-only transactions take no locks, read a consistent snapshot, never
//! abort and block writers no more.
//!
//! **Guarantee: serializability** (§3.3), read-only transactions included; read-write
//! transactions among themselves stay as strict as `2pl`'s. Not strict serializability (§6).
//! **Read-only transactions never abort** (`Promise::AbortFreeReadOnly`; a timeout aside).
//!
//! # The protocol
//!
//! It runs on the kit's single-version lock-and-2PC engine ([`crate::common::lock_commit`]) as
//! `2pl`'s [`Locking::TwoPhase`] flavor with DST's timestamp scheme ([`Dst`]). The timestamps,
//! the read-only transactions (RO1/RO2), the claim ceiling and garbage collection are `dst-occ`'s
//! (see [`crate::dst_occ`], which also gives the correctness argument); what differs is where
//! RW1 and RW2 ride:
//!
//! * **Reads** take a shared lock at the key's master, as in `2pl`, and the reply carries the
//!   version's timestamp: the coordinator keeps `TS ≥ ts + 1` (Fig. 7 READ:1/READ:3).
//! * **Prepare**: each replica of a key written takes the exclusive lock (wait-die, upgrading
//!   the shared one) and, when it holds them all, computes its floor `max(wts, rts) + 1` over
//!   its keys, which the yes vote carries (WRITE:1/WRITE:3). `TS` is the largest of the
//!   coordinator's bound and the floors.
//! * **Decide** carries `TS`: write replicas install at `TS`; every master holding the
//!   transaction's shared locks raises the `rts` of the keys it read to `TS` before releasing
//!   them (COMMIT:4, RW2 for reads); `rts` only rises.
//! * **Read-only transactions** take no shared lock: at the master they claim, wait for a
//!   writer holding the key's exclusive lock with a floor at or below their timestamp, and read
//!   the newest version at or below it. Writers never wait for them.
//!
//! Why Lemma 1 holds here: ww and wr as under OCC; rw (A read k, B overwrites it): B's
//! exclusive lock on k waits for A's shared lock, released only after A's decision raised `rts`
//! to `TS_A`, so B's floor is above it.
//!
//! Writes are buffered by the client and their exclusive locks taken at commit (see
//! [`crate::two_pl`]), so a reader waits for a writer's commit round trips, never for client
//! think time: trap T-10 does not arise.
//!
//! # Fail-over (not in the paper)
//!
//! With fail-over on (the default; `docs/architecture/availability.md`), a dead master is
//! replaced by an in-sync replica and a promoted partition's writers commit above its
//! promoted floor, as under `dst-occ` (see [`crate::dst_occ`], *Fail-over*: the floor covers
//! every claim the evicted master made). What differs is the read set's install. Under OCC it
//! is the validation's, made at a leased master after the commit timestamp was fixed; here it
//! is the decision's, made by the masters holding the shared locks whenever the decision
//! reaches them, and the shared locks live at the master alone. A master that voted yes and
//! died before the decision takes both with it: a writer at its successor no longer waits for
//! the reader, and nothing raised the key's read timestamp there. If the reader's coordinator
//! then fixes its timestamp after the writer committed (a vote of another participant came
//! late, with a higher floor) and before it applied the eviction (which aborts it), the reader
//! commits above a writer that overwrote what it read: an rw edge against timestamp order
//! (Lemma 1), which a read-only transaction between the two timestamps turns into a cycle
//! (`tests/it/failover.rs`, the mutant `no-read-lease`).
//!
//! So a master's yes vote for keys read here carries the end of its lease (its clock), and the
//! coordinator fixes the commit timestamp only while its clock, plus the skew bound, is below
//! the earliest such end; otherwise it aborts the attempt (`reconfigured`, counted as
//! `read_lease_aborts`; [`crate::common::lock_commit::TimestampScheme::INSTALLS_AT_READ_MASTERS`]).
//! Then every read master was still leased when the timestamp was fixed, so not yet evicted:
//! the eviction floor is above the coordinator's clock then, and the timestamp, at most
//! `LEAD_BOUND` ahead of that clock (the commit hold), is below the successor's promoted
//! floor. The install the dead master never made is covered by the floor, exactly as a claim
//! is. Leases are renewed every heartbeat and last a second by default, so the rule aborts
//! only an attempt whose votes took that long: one that waited for a lock behind a stalled
//! transaction, say.
//!
//! # What comes from the paper, and what is augur's choice
//!
//! As for `dst-occ`, plus `2pl`'s choices (wait-die on the client's age, `lock_timeout`, shared
//! locks lost in a crash fail the prepare). The paper's MySQL port installs read-set timestamps
//! with CAS under shared locks; here each master's handler is atomic.
//!
//! # Mutants (`augur check --mutant`)
//!
//! `dst-occ`'s, which all apply, and `no-read-lease` (see [`MUTANTS`]).

use crate::common::lock_commit::{Flavor, LockCommit, Locking, MsgOf, RecordOf};
use crate::dst_occ::Dst;
use crate::protocol_info::Engine;
use crate::protocol_info::{
    INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo, SettingInfo,
};
use std::time::Duration;

pub use crate::common::lock_commit::Timer;

/// `dst-2pl`'s messages: the engine's, and DST's own ([`crate::dst_occ::DstMsg`]).
pub type Msg = MsgOf<Dst2Pl>;

/// `dst-2pl`'s log records: the engine's (DST adds the kit's `Served`, its claim ceiling).
pub type Record = RecordOf<Dst2Pl>;

/// `dst-2pl`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "dst-2pl",
    isolation: IsolationLevel::Serializable,
    isolation_with: &[],
    paper: "DST (NSDI 2021) §3-§4.2: decentralized scalar timestamps over per-row 2PL",
    summary: "2pl plus hybrid tuple and version timestamps: commit timestamps above every tuple read or locked, installed at the decision into every tuple read and written; read-only transactions lock nothing, read a snapshot at their own timestamp, claim each tuple, wait for at most one writer, never abort",
    engine: Engine::LockCommit,
    commit_order_evidence: true,
    promises: crate::dst_occ::PROMISES,
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: SETTINGS,
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
};

/// The protocol settings `dst-2pl` accepts: `2pl`'s lock timeout and `dst-occ`'s staleness
/// and session rule.
pub const SETTINGS: &[SettingInfo] = &[
    crate::two_pl::SETTINGS[0],
    crate::dst_occ::STALENESS_SETTING,
    crate::dst_occ::SESSION_SETTING,
    crate::common::membership::FAILOVER_SETTING,
    crate::common::membership::LEASE_SETTING,
    crate::common::membership::SKEW_SETTING,
];

/// The mutants `dst-2pl` knows: `dst-occ`'s, each applying to the same rule here (the
/// read-set install is the decision's at the masters holding the shared locks), and
/// `no-read-lease`, which only 2PL's install at the decision needs.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-dep-read",
        "read-only reads return the newest version at or below their timestamp with no claim and no wait (fractured read, G-single: scenario 8c; caught by seed 1 of every workload under --faults all --latency 3dc; with failover=off, seed 1 of list-append and bank, 2 of rw-register)",
    ),
    (
        "claim-without-wait",
        "read-only reads claim but never wait for the writer holding the key's exclusive lock (G-single; caught by seed 1 of every workload under --faults all --latency 3dc; with failover=off, seed 1 of rw-register and bank, 6 of list-append)",
    ),
    (
        "literal-fig9-wait",
        "[scenario] Fig. 9 as written: claim and wait only if the tuple timestamp is at or below the reader's (trap T-1; G-single, scenario 8d; caught by seed 1 of rw-register and bank, 7 of list-append, under --faults all --latency 3dc; with failover=off, seed 2 of bank, 28 of list-append, 140 of rw-register; not within 50 seeds of augur check's test configuration, 3 clients for 4 s)",
    ),
    (
        "no-plus-one",
        "commit timestamps go to at least, not above, the tuple and version timestamps (trap T-3; G-single; caught by seed 1 of list-append and bank, 2 of rw-register, under --faults all --latency 3dc; with failover=off, seed 1 of rw-register and bank, 5 of list-append)",
    ),
    (
        "no-read-set-install",
        "the decision installs the commit timestamp into the tuples written only, not those read under shared locks (trap T-5; G2, allowed at SI: scenario 8e; caught by seed 1 of list-append and 2 of rw-register, none of seeds 1..1000 of bank, under --faults all --latency 3dc; with failover=off, seed 27 of rw-register, 162 of list-append, none of 1..200 of bank)",
    ),
    (
        "no-failover-floor",
        "[scenario] a promoted master's writers ignore the eviction's floor (a writer that began before a read-only transaction's claim at the old master prepares after the fail-over and commits inside its snapshot: the reader's second read of the key sees it, a non-repeatable read; tests/it/failover.rs; none of seeds 1..1000 of any workload under --faults all --latency 3dc)",
    ),
    (
        "no-read-lease",
        "[scenario] the coordinator fixes the commit timestamp whether or not the masters holding its shared locks are still leased (a reader whose read master died after its vote commits above a writer at the promoted master that overwrote what it read; a read-only transaction between the two sees the writer and not the reader; tests/it/failover.rs; none of seeds 1..1000 of any workload under --faults all, lan or 3dc: it needs a coordinator that learns of the eviction only after a late vote)",
    ),
    (
        "overwrite-ts",
        "[scenario] an install sets the tuple timestamp to the commit timestamp instead of raising it (trap T-2; G-single, Fig. 8's follow-up scenario; caught by seed 2 of bank, 14 of list-append, 20 of rw-register, under --faults all --latency 3dc; with failover=off, seed 15 of bank, 41 of list-append, 60 of rw-register; not within 50 with 3 clients for 4 s)",
    ),
];

/// `dst-2pl` as a flavor of the lock-and-2PC engine.
pub struct Dst2Pl;

impl Flavor for Dst2Pl {
    const INFO: ProtocolInfo = INFO;
    const LOCKING: Locking = Locking::TwoPhase;
    type Scheme = Dst;
    const DEFAULT_LOCK_TIMEOUT: Duration = crate::two_pl::DEFAULT_LOCK_TIMEOUT;
    const FAILS_OVER: bool = true;
}

/// One node running `dst-2pl`.
pub type Dst2PlNode = LockCommit<Dst2Pl>;
