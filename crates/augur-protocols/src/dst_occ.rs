//! `dst-occ`: DST over OCC (Wei, Chen, Chen, Wang, Gong, Zang, "Unifying Timestamp with
//! Transaction Ordering for MVCC with Decentralized Scalar Timestamp", NSDI '21, §3, §4.1 and
//! §4.2 "DrTM+R"): `occ` with decentralized scalar timestamps, so that read-only transactions
//! read a consistent snapshot in one round per key, never validate and never abort, with no
//! timestamp oracle.
//!
//! **Guarantee: serializability** (§3.3), read-only transactions included; read-write
//! transactions among themselves stay as strict as `occ`'s (DST never changes when they commit).
//! Not strict serializability: a read-only transaction whose clock lags may miss a write
//! acknowledged before it began (§5 intro, §6; `tests/dst.rs` scenario 8f). **Read-only
//! transactions never abort** (`Promise::AbortFreeReadOnly`; a timeout or a lost coordinator
//! aside); each may wait, at a key, for at most the one writer holding it.
//!
//! # The protocol
//!
//! It runs on the kit's single-version lock-and-2PC engine ([`crate::common::lock_commit`]) as
//! `occ`'s [`Locking::Optimistic`] flavor with [`Timestamping::Dst`] (`dst-2pl` is the same
//! with 2PL). Timestamps are hybrid ([`augur_types::Hybrid`]: 52 bits of clock microseconds, 12
//! of counter; "+1" is a logical step). Every tuple carries a read timestamp `rts` (the highest
//! claim or read-set install, in the store entry's metadata, an entry made for an absent key
//! too, trap T-6); each version carries its commit timestamp, and the newest one's is the
//! tuple's write timestamp `wts`. Tuple timestamps only rise.
//!
//! * **Read-write execution** is `occ`'s: reads at the master, no locks; the reply also
//!   carries the version's timestamp. The coordinator keeps `TS ≥ hybrid(begin)` and, per
//!   version read, `TS ≥ ts + 1` (RW1, Fig. 7 READ:3).
//! * **Lock** (`Prepare`/`Vote`): each replica of a key written locks it (no-wait) and computes
//!   its *floor*, `max(wts, rts) + 1` over the keys it locked (and above its claim ceiling, see
//!   Failures); the yes vote carries it (Fig. 7 WRITE:3).
//! * **Fix TS, then validate** (T-4): with every vote in, `TS = max(coordinator's bound, every
//!   floor)`, fixed. `Validate` carries `TS` to the master of each key read, which, in one
//!   handler, checks the key still has the version read and is not locked by another writer,
//!   and raises its `rts` to `TS` (RW2 for the read set; a transaction that then aborts leaves
//!   a harmless dummy). No new round trip: the vote, the validation and the decision carry the
//!   timestamps.
//! * **Commit**: the decision carries `TS`; every write replica installs its versions at `TS`,
//!   raises `rts` to at least `TS` (never lowering it, T-2) and unlocks.
//! * **Read-only transactions** (declared at `Begin`, T-13): `x.TS = hybrid(now − δ)` at the
//!   coordinator (RO1; δ is `read_staleness_ms`, §5.4), fixed, returned as `Begun`'s snapshot
//!   and as the commit timestamp. Each read goes to the key's master, which (RO2,
//!   `DEP_READ`) raises `rts` to `x.TS` (the claim), then, if the key is locked by a writer
//!   whose floor is at or below `x.TS`, waits for *that* writer to release it (re-examining on
//!   each release: a writer that locked after the claim has a floor above `x.TS`), and answers
//!   the newest version at or below `x.TS`. Never a wait on a shared lock, and never a wait
//!   guarded by `rts ≤ x.TS`, Fig. 9's literal test (trap T-1, mutant `literal-fig9-wait`).
//!   The commit sends nothing and never fails.
//!
//! Writes are buffered by the client and locked only during the commit, so a writer holds its
//! lock for the commit's round trips only, never through client think time: trap T-10 (a reader
//! blocked for a whole read-write transaction) does not arise here.
//!
//! # Why it is serializable
//!
//! *Lemma 1: for every dependency edge A → B between committed read-write transactions,
//! `TS_A < TS_B`.* ww and wr: B locks or reads a key after A installed `TS_A` there, so its
//! floor or its read bound is `≥ TS_A + 1`. rw (A read a version that B overwrote): A's
//! validation at the key's master either saw B's lock or new version (A aborts) or came first
//! and raised `rts` to `TS_A` in the same handler, so B's later lock floor is `> TS_A`.
//!
//! *Lemma 2: a read-only transaction R reads, at each key, the newest committed version with
//! timestamp `≤ x.TS`, and no writer that commits at or below `x.TS` at that key is missing
//! from it.* After R's claim every new locker of the key has floor `> x.TS`; a writer holding
//! the lock at the claim with floor `≤ x.TS` is waited for, and one with a higher floor commits
//! above `x.TS`; so once R reads, no version `≤ x.TS` can still appear.
//!
//! So R sees exactly the read-write transactions with `TS ≤ x.TS`, which by Lemma 1 is closed
//! under dependencies: R serializes after them and before the others, at `x.TS`, and read-write
//! transactions serialize in timestamp order (§3.3's theorem).
//!
//! # Failures (§3.5)
//!
//! Claims and read-set installs are volatile, and losing them would let a writer after a
//! restart commit at or below a snapshot some reader already read (the paper's remedies abort
//! in-flight transactions). augur's design needs no clock bound and aborts nothing: a durable
//! **claim ceiling**. A node never lets an `rts` exceed a ceiling it has logged (the kit's
//! `Served` record, `common::replica::ServeLease`); raising one past it first persists a new
//! ceiling, `max(value, hybrid(now)) + 50 ms`, which the runtime makes durable before the reply
//! (or the vote) that depends on it leaves. After a restart every writer's floor is above the
//! recovered ceiling, hence above every claim and read-set install made before the crash;
//! prepared writers recovered from the log have floor zero, so readers wait for them.
//! Checkpoints carry the ceiling. Versions are durable with their timestamps (the engine's
//! `Committed` and `Versions` records), so `wts` survives.
//!
//! # Garbage collection (not in the paper)
//!
//! Versions stay for every read-only transaction that may still read: every tenth tick
//! ([`crate::common::lock_commit::ANNOUNCE_EVERY`]; an older announcement is still a lower
//! bound), every node sends every node the lowest timestamp a read-only transaction it coordinates reads at, now
//! or later (the oldest running one's `x.TS`, and `hybrid(now − δ)`); a node collects below
//! the minimum of the latest announcements of all nodes (none yet from some node: nothing),
//! keeping the newest version at or below it. No read is ever refused (`SnapshotTooOld` is
//! never answered).
//!
//! # What comes from the paper, and what is augur's choice
//!
//! From the paper: the tuple and version timestamps, RW1/RW2, RO1/RO2, the hybrid clock, the
//! staleness knob, OCC's lock-then-validate with the timestamp taken "when validating and
//! locking". Fixed traps (the digest `shared/papers/dst.md` §6): the conditional wait (T-1), max
//! instead of overwrite (T-2), strict "+1" (T-3), TS fixed before validation with
//! validate-and-install atomic (T-4), the read-set install the public code omits (T-5),
//! absent keys (T-6), reads at the master (T-7). augur's: the 52/12 layout, the claim ceiling,
//! garbage collection, the floor-based wait on the holder, and `occ`'s engine choices
//! (replication, durability, termination; see [`crate::occ`]).
//!
//! # Sessions (§6)
//!
//! Commit timestamps can run ahead of clocks (a claim pushes a writer above it), so a client's
//! read-only transaction at `hybrid(now)` may miss the client's own write just acknowledged
//! (`augur check` sees such G-single-process cycles; Serializable allows them). With the
//! setting `session=on` the coordinator keeps, per client, the largest commit timestamp it told
//! it (the paper's "server" variant of the session) and starts each of the client's
//! transactions at or above it: a read-only one reads at least there, a read-write one's RW1
//! starts there. The client then reads its own writes and never goes back in time: the history
//! is *session serializable* (no cycle with session order; `tests/dst.rs`). The floors are
//! volatile: a restarted coordinator, or a client that moves to another one, starts afresh.
//!
//! # Mutants (`augur check --mutant`)
//!
//! See [`MUTANTS`], each with the seeds `augur check --faults all --latency 3dc` needs; the one
//! marked `[scenario]` is shown by `tests/dst.rs` (8e) rather than within 50 random seeds.

use crate::common::lock_commit::{
    Flavor, LockCommit, Locking, READ_STALENESS, READ_STALENESS_VALUES, SESSION, Timestamping,
};
use crate::registry::{
    INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, Promise, ProtocolInfo, SettingInfo,
};
use std::time::Duration;

pub use crate::common::lock_commit::{Msg, Record, Timer};

/// `dst-occ`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "dst-occ",
    isolation: IsolationLevel::Serializable,
    paper: "DST (NSDI 2021) §3-§4.2: decentralized scalar timestamps over DrTM+R OCC",
    summary: "occ plus hybrid tuple and version timestamps: commit timestamps above every tuple read or locked, fixed before validation and installed into every tuple read and written; read-only transactions read a snapshot at their own timestamp, claim each tuple, wait for at most one writer, never abort",
    commit_order_evidence: true,
    promises: PROMISES,
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

/// What DST promises beyond serializability, shared with `dst-2pl`.
pub const PROMISES: &[Promise] = &[
    Promise::AbortFreeReadOnly,
    Promise::TimestampsOrderDependencies,
    Promise::BoundedStaleness,
];

/// The read staleness setting, shared with `dst-2pl`.
pub const STALENESS_SETTING: SettingInfo = SettingInfo {
    name: READ_STALENESS,
    values: READ_STALENESS_VALUES,
    default: "0",
    doc: "read-only transactions read at the hybrid clock this many milliseconds ago (§5.4: staler snapshots wait for fewer writers)",
};

/// The session rule's setting, shared with `dst-2pl`.
pub const SESSION_SETTING: SettingInfo = SettingInfo {
    name: SESSION,
    values: &["off", "on"],
    default: "off",
    doc: "on: a client's transactions start at or above the largest commit timestamp its coordinator told it (§6: read-your-writes, session serializability; volatile across a coordinator restart)",
};

/// The protocol settings `dst-occ` accepts.
pub const SETTINGS: &[SettingInfo] = &[STALENESS_SETTING, SESSION_SETTING];

/// The mutants `dst-occ` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-dep-read",
        "read-only reads return the newest version at or below their timestamp with no claim and no wait (fractured read, G-single: scenario 8c; caught by seed 1 of rw-register and bank, seed 3 of list-append, under --faults all --latency 3dc)",
    ),
    (
        "claim-without-wait",
        "read-only reads claim but never wait for the writer holding the key (G-single: a writer locked before the claim commits inside the snapshot after the read; caught by seed 1 of rw-register and bank, seed 3 of list-append, under --faults all --latency 3dc)",
    ),
    (
        "literal-fig9-wait",
        "[scenario] Fig. 9 as written: claim and wait only if the tuple timestamp is at or below the reader's (trap T-1: another reader's higher claim lets this one skip a writer it must wait for; G-single, scenario 8d; caught by seed 3 of bank, 12 of rw-register, 56 of list-append, under --faults all --latency 3dc; not within 50 seeds of augur check's test configuration, 3 clients for 4 s)",
    ),
    (
        "no-plus-one",
        "commit timestamps go to at least, not above, the tuple and version timestamps (trap T-3: a writer takes a reader's claimed timestamp and lands inside its snapshot; G-single; caught by seed 1 of list-append and bank, 8 of rw-register, under --faults all --latency 3dc)",
    ),
    (
        "no-read-set-install",
        "[scenario] RW2 installs the commit timestamp into the tuples written only, as the public code does (trap T-5: a later writer of a key read commits below the reader; G2, allowed at SI: scenario 8e; in random histories only seed 147 of list-append under --faults all --latency 3dc catches it, none of seeds 1..1000 of rw-register and bank: the anomaly needs a read-only transaction between the two writers' timestamps)",
    ),
    (
        "overwrite-ts",
        "[scenario] an install sets the tuple timestamp to the commit timestamp instead of raising it (trap T-2: a claim made while the writer held the lock is lost; G-single, Fig. 8's follow-up scenario; caught by seed 41 of list-append, 42 of bank, 484 of rw-register, under --faults all --latency 3dc, not within 50 with 3 clients for 4 s)",
    ),
];

/// `dst-occ` as a flavor of the lock-and-2PC engine.
pub struct DstOcc;

impl Flavor for DstOcc {
    const INFO: ProtocolInfo = INFO;
    const LOCKING: Locking = Locking::Optimistic;
    const TIMESTAMPS: Timestamping = Timestamping::Dst;
    /// Never used: nothing waits for a lock.
    const DEFAULT_LOCK_TIMEOUT: Duration = Duration::ZERO;
}

/// One node running `dst-occ`.
pub type DstOccNode = LockCommit<DstOcc>;
