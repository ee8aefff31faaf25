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
//! `occ`'s [`Locking::Optimistic`] flavor with DST's timestamp scheme, [`Dst`], and its one
//! message, [`DstMsg`], which are this module's (`dst-2pl` is the same with 2PL). Timestamps are hybrid ([`augur_types::Hybrid`]:
//! 52 bits of clock microseconds, 12 of counter; "+1" is a logical step). Every tuple carries a
//! read timestamp `rts` (the highest claim or read-set install, in the store entry's metadata,
//! an entry made for an absent key too, trap T-6); each version carries its commit timestamp,
//! and the newest one's is the tuple's write timestamp `wts`. Tuple timestamps only rise.
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
//! # Fail-over (not in the paper)
//!
//! With fail-over on (the default; `docs/architecture/availability.md`), a dead master is
//! replaced by an in-sync replica as under `occ`: every replica of a key written locks it and
//! votes, so the new master holds every committed version, tuple write timestamp and prepared
//! writer of the partition. What it has not seen is the old master's read-side state: the
//! claims of read-only transactions and the read-set installs of validations, which raised
//! `rts` there alone. A writer that began before such a claim, and prepares at the new master
//! after the fail-over, would take its begin time as its timestamp and commit inside the
//! claimed snapshot (`tests/it/failover.rs`; the mutant `no-failover-floor`).
//!
//! So a promoted partition's writers commit above its **promoted floor**: the configuration's
//! eviction floor `F` (the clock of the configuration group's leader when it evicted the old
//! master, past that master's lease and the skew bound) plus [`LEAD_BOUND`], as a hybrid
//! timestamp. Every claim and install the old master made, it made while leased, so before the
//! clock of any node read `F`; and each was a timestamp a coordinator produced at most
//! `LEAD_BOUND` ahead of its own clock, because a coordinator **holds a commit timestamp back**
//! until its clock is within `LEAD_BOUND` of it (`commit_holds` counts them), unless the latest
//! promoted floor already covers it: floors are the one lead that is legitimately larger, and
//! each eviction's floor is at least every earlier one (the configuration makes them
//! monotone). A read-only timestamp is a clock reading, or a commit timestamp the coordinator
//! told the client. Timestamps otherwise run ahead of clocks by a logical step per conflict and
//! by a restart's claim slack (50 ms), so the hold is rare. The price: for `LEAD_BOUND` after a
//! fail-over, writes on the promoted partitions commit ahead of the clocks, and a read-only
//! transaction may miss them for that long (`augur check` widens the staleness bound by as
//! much when fail-over is on). A handback needs no floor: the old master stays in sync and
//! votes, and its floors cover its own claims. A rejoining replica is copied the committed
//! versions only, not the `rts` of the tuples: while the master is in sync its votes cover its
//! claims, and once it is evicted the floor does.
//!
//! `dst-2pl` also needs its read masters leased when the commit timestamp is fixed, since its
//! read-set install is the decision's (see [`crate::dst_2pl`], *Fail-over*).
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
//! locking". Fixed traps, where a literal reading of the paper goes wrong: the conditional wait
//! (T-1), max instead of overwrite (T-2), strict "+1" (T-3), TS fixed before validation with
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

use crate::common::lock_commit::scheme::{
    Begin, Empty, HorizonMsg, Horizons, Mail, Node, Participating, Parts, SnapshotRead, Then,
    TimestampScheme, answer_snapshot_read, read_message, send_or_mail,
};
use crate::common::lock_commit::{
    CLAIM_SLACK, Coord, Flavor, LEAD_BOUND, LockCommit, Locking, MsgOf, Mutant, READ_STALENESS,
    READ_STALENESS_VALUES, RecordOf, SESSION,
};
use crate::common::replica::{self, ServeLease, Writes};
use crate::protocol_info::Engine;
use crate::protocol_info::{
    INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, Promise, ProtocolInfo, SettingInfo,
};
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientId, Hybrid, Key, NodeId, Timestamp, TxnId};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub use crate::common::lock_commit::Timer;

/// `dst-occ`'s messages: the engine's, and DST's own ([`DstMsg`]).
pub type Msg = MsgOf<DstOcc>;

/// `dst-occ`'s log records: the engine's (DST adds the kit's `Served`, its claim ceiling).
pub type Record = RecordOf<DstOcc>;

/// `dst-occ`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "dst-occ",
    isolation: IsolationLevel::Serializable,
    isolation_with: &[],
    paper: "DST (NSDI 2021) §3-§4.2: decentralized scalar timestamps over DrTM+R OCC",
    summary: "occ plus hybrid tuple and version timestamps: commit timestamps above every tuple read or locked, fixed before validation and installed into every tuple read and written; read-only transactions read a snapshot at their own timestamp, claim each tuple, wait for at most one writer, never abort",
    engine: Engine::LockCommit,
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
pub const SETTINGS: &[SettingInfo] = &[
    STALENESS_SETTING,
    SESSION_SETTING,
    crate::common::membership::FAILOVER_SETTING,
    crate::common::membership::LEASE_SETTING,
    crate::common::membership::SKEW_SETTING,
];

/// The mutants `dst-occ` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "no-dep-read",
        "read-only reads return the newest version at or below their timestamp with no claim and no wait (fractured read, G-single: scenario 8c; caught by seed 1 of list-append and rw-register, 2 of bank, under --faults all --latency 3dc; with failover=off, seed 1 of rw-register and bank, 3 of list-append)",
    ),
    (
        "claim-without-wait",
        "read-only reads claim but never wait for the writer holding the key (G-single: a writer locked before the claim commits inside the snapshot after the read; caught by seed 1 of every workload under --faults all --latency 3dc; with failover=off, seed 1 of rw-register and bank, 3 of list-append)",
    ),
    (
        "literal-fig9-wait",
        "[scenario] Fig. 9 as written: claim and wait only if the tuple timestamp is at or below the reader's (trap T-1: another reader's higher claim lets this one skip a writer it must wait for; G-single, scenario 8d; caught by seed 2 of list-append, 5 of bank, 6 of rw-register, under --faults all --latency 3dc; with failover=off, seed 3 of bank, 12 of rw-register, 56 of list-append; not within 50 seeds of augur check's test configuration, 3 clients for 4 s)",
    ),
    (
        "no-plus-one",
        "commit timestamps go to at least, not above, the tuple and version timestamps (trap T-3: a writer takes a reader's claimed timestamp and lands inside its snapshot; G-single; caught by seed 1 of every workload under --faults all --latency 3dc; with failover=off, seed 1 of list-append and bank, 8 of rw-register)",
    ),
    (
        "no-read-set-install",
        "[scenario] RW2 installs the commit timestamp into the tuples written only, as the public code does (trap T-5: a later writer of a key read commits below the reader; G2, allowed at SI: scenario 8e; under --faults all --latency 3dc, seed 9 of list-append and 8 of rw-register catch it, none of seeds 1..1000 of bank; with failover=off only seed 147 of list-append, none of 1..1000 of rw-register and bank: the anomaly needs a read-only transaction between the two writers' timestamps)",
    ),
    (
        "no-failover-floor",
        "[scenario] a promoted master's writers ignore the eviction's floor (a writer that began before a read-only transaction's claim at the old master prepares after the fail-over and commits inside its snapshot: the reader's second read of the key sees it, a non-repeatable read; tests/it/failover.rs)",
    ),
    (
        "overwrite-ts",
        "[scenario] an install sets the tuple timestamp to the commit timestamp instead of raising it (trap T-2: a claim made while the writer held the lock is lost; G-single, Fig. 8's follow-up scenario; caught by seed 19 of rw-register, 170 of list-append, 358 of bank, under --faults all --latency 3dc; with failover=off, seed 41 of list-append, 42 of bank, 484 of rw-register; not within 50 with 3 clients for 4 s)",
    ),
];

/// `dst-occ` as a flavor of the lock-and-2PC engine.
pub struct DstOcc;

impl Flavor for DstOcc {
    const INFO: ProtocolInfo = INFO;
    const LOCKING: Locking = Locking::Optimistic;
    type Scheme = Dst;
    /// Never used: nothing waits for a lock.
    const DEFAULT_LOCK_TIMEOUT: Duration = Duration::ZERO;
    const FAILS_OVER: bool = true;
}

/// One node running `dst-occ`.
pub type DstOccNode = LockCommit<DstOcc>;

/// DST's own messages (shared with `dst-2pl`). The rest of DST travels in the engine's: a
/// read-only read is a `Read` with its snapshot, and the votes, validations and decisions carry
/// its timestamps.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum DstMsg {
    /// Node → every node, every tenth tick: no read-only transaction this node coordinates, now
    /// or later, reads below `ts` (garbage collection keeps what they may read).
    Horizon { ts: Timestamp },
}

impl CheckMessage for DstMsg {
    fn check(&self, _: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            // Any timestamp is a lower bound some node may announce.
            DstMsg::Horizon { .. } => Ok(()),
        }
    }
}

impl HorizonMsg for DstMsg {
    fn horizon(ts: Timestamp) -> DstMsg {
        DstMsg::Horizon { ts }
    }
}

/// DST's decentralized scalar timestamps as the engine's timestamp scheme (`dst-occ`,
/// `dst-2pl`; the rules and why they are correct are in the module docs).
pub struct Dst {
    me: NodeId,
    nodes: Vec<NodeId>,
    mutant: Option<Mutant>,
    /// The durable claim ceiling: no tuple timestamp here exceeds it, and after a restart
    /// every new writer's timestamp exceeds the recovered one.
    ceiling: ServeLease,
    /// Read staleness δ.
    staleness: Duration,
    /// With the session rule (§6): per client, the largest commit timestamp this coordinator
    /// told it. Volatile: a restarted coordinator no longer knows its clients' floors (the
    /// paper keeps them in the session, and a client that moves to another coordinator loses
    /// them too).
    sessions: Option<FxHashMap<ClientId, Timestamp>>,
    /// Read-only reads waiting for a writer, by the writer.
    snapshot_reads: FxHashMap<TxnId, Vec<SnapshotRead>>,
    /// The latest read horizon each node announced.
    horizons: Horizons,
    counters: DstCounters,
}

/// DST's counters.
#[derive(Clone, Copy, Debug, Default)]
struct DstCounters {
    /// Read-only reads that waited for a writer.
    snapshot_read_waits: u64,
    /// Read-only reads that raised a tuple timestamp.
    claims: u64,
    /// Claim ceilings persisted.
    ceiling_writes: u64,
    /// How far the garbage-collection horizon was behind the clock at the last tick, µs.
    gc_horizon_lag_us: u64,
}

impl Dst {
    fn plus_one(&self) -> bool {
        self.mutant != Some(Mutant::NoPlusOne)
    }

    /// The least commit timestamp on a partition whose configuration floor is
    /// `eviction_floor` (see *Fail-over* in the module docs): above every claim and read-set
    /// install the evicted master made, each at most [`LEAD_BOUND`] ahead of a clock that read
    /// less than the floor.
    fn promoted_floor(eviction_floor: Timestamp) -> Timestamp {
        if eviction_floor == Timestamp::ZERO {
            return Timestamp::ZERO;
        }
        Hybrid::at(eviction_floor.saturating_add(LEAD_BOUND)).next()
    }

    /// The read timestamp for a read-only transaction beginning now (RO1): the hybrid clock
    /// `δ` ago, and at least `floor` (§6's session rule: the largest commit timestamp the
    /// session was told).
    fn read_timestamp(&self, now: Timestamp, floor: Option<Timestamp>) -> Timestamp {
        let ts = Hybrid::at(now.saturating_sub(self.staleness));
        floor.map_or(ts, |floor| ts.max(floor))
    }

    /// Raise `key`'s tuple read timestamp to `ts` (never lower it), under the durable claim
    /// ceiling; whether it rose. An absent key gets an entry, so a later writer sees the claim
    /// (trap T-6).
    fn raise_read_timestamp<N: Node<Dst>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        store: &mut MvStore<Timestamp>,
        key: &Key,
        ts: Timestamp,
    ) -> bool {
        if self.ceiling.cover_with::<N, Timestamp>(ctx, ts, |now| {
            Hybrid::add(ts.max(Hybrid::at(now)), CLAIM_SLACK)
        }) {
            self.counters.ceiling_writes += 1;
        }
        let rts = &mut store.entry(key).meta;
        let rose = ts > *rts;
        *rts = (*rts).max(ts);
        rose
    }

    /// The least commit timestamp a writer locking `key` now may take (RW1): above the tuple's
    /// write timestamp (its newest version's) and read timestamp, and above every timestamp
    /// claimed here before the last restart.
    fn writer_floor(&self, store: &MvStore<Timestamp>, key: &Key) -> Timestamp {
        let entry = store.get(key);
        let wts = entry
            .and_then(|e| e.latest_committed())
            .map_or(Timestamp::ZERO, |v| v.ts);
        let tuple = wts.max(entry.map_or(Timestamp::ZERO, |e| e.meta));
        let above = if self.plus_one() { tuple.next() } else { tuple };
        above.max(self.ceiling.proposal_floor())
    }

    /// Park `read` behind the writer it must wait for, if there is one (`first`: a new wait,
    /// counted); otherwise answer it. A writer waited for is the one holding the key
    /// exclusively whose floor (the lower bound on its commit timestamp it computed when it
    /// locked) is at or below the reader's timestamp: it may commit inside the snapshot. A
    /// writer with a higher floor, or one that locks after the claim (its floor is above the
    /// claim), commits outside it. Shared locks never make a reader wait.
    fn wait_or_answer<N: Node<Dst>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        read: SnapshotRead,
        node: &Participating<'_>,
        first: bool,
        mail: &mut Mail<DstMsg>,
    ) {
        let holder = node.locks.writer(&read.key).filter(|holder| {
            *holder != read.txn
                && node
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
            None => answer_snapshot_read(ctx, node.me, node.store, read, mail),
        }
    }
}

impl TimestampScheme for Dst {
    type Txn = ();
    type Msg = DstMsg;
    type Record = Empty;
    const SNAPSHOTS: bool = true;
    /// Under 2PL the read set's install is the decision's ([`Dst::committing`]).
    const INSTALLS_AT_READ_MASTERS: bool = true;

    fn new(env: &NodeEnv, mutant: Option<Mutant>) -> Dst {
        Dst {
            me: env.id,
            nodes: env.placement.nodes().collect(),
            mutant,
            ceiling: ServeLease::default(),
            staleness: env
                .options
                .settings
                .get(READ_STALENESS)
                .and_then(|v| v.parse().ok())
                .map_or(Duration::ZERO, Duration::from_millis),
            sessions: (env.options.settings.get(SESSION).map(String::as_str) == Some("on"))
                .then(FxHashMap::default),
            snapshot_reads: FxHashMap::default(),
            horizons: Horizons::default(),
            counters: DstCounters::default(),
        }
    }

    /// A read-write transaction's lower bound on its commit timestamp starts at the session's
    /// floor too (RW1), so its commits rise along the session; a read-only one reads at its
    /// read timestamp (RO1).
    fn begin(
        &mut self,
        now: Timestamp,
        _: TxnId,
        client: ClientId,
        read_only: bool,
    ) -> Begin<DstMsg> {
        let session = self.sessions.as_ref().and_then(|s| s.get(&client).copied());
        Begin::At(if read_only {
            self.read_timestamp(now, session)
        } else {
            session.map_or(Hybrid::at(now), |floor| floor.max(Hybrid::at(now)))
        })
    }

    fn read(&self, t: &Coord<()>, txn: TxnId, seq: u32, key: Key) -> Msg {
        read_message(txn, seq, key, t.prio, t.read_only.then_some(t.ts))
    }

    /// RW1: the commit timestamp goes above every version read.
    fn read_returned(&self, t: &mut Coord<()>, _: Option<TxnId>, ts: Timestamp, _: u64) {
        if !t.read_only {
            let above = if self.plus_one() { ts.next() } else { ts };
            t.ts = t.ts.max(above);
        }
    }

    /// RW1 starts from the begin time and the versions read; the votes add the floors of the
    /// tuples locked.
    fn commit_ts_start(&self, t: &Coord<()>) -> Timestamp {
        t.ts
    }

    fn empty_commit_ts(&self, t: &Coord<()>, _: Timestamp) -> Timestamp {
        t.ts
    }

    fn told_commit(&mut self, client: ClientId, commit_ts: Timestamp) {
        if let Some(sessions) = &mut self.sessions {
            let floor = sessions.entry(client).or_insert(commit_ts);
            *floor = (*floor).max(commit_ts);
        }
    }

    /// RO2 (`DEP_READ`): claim the tuple (raise its read timestamp to the snapshot, so every
    /// writer that locks it from now on commits above the reader), then wait while a writer
    /// whose timestamp may still fall at or below the snapshot holds it, then read the newest
    /// version at or below the snapshot.
    fn serve_snapshot_read<N: Node<Dst>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        read: SnapshotRead,
        node: Participating<'_>,
        mail: &mut Mail<DstMsg>,
    ) {
        let snapshot = read.snapshot;
        let (claim, wait) = match self.mutant {
            Some(Mutant::NoDepRead) => (false, false),
            Some(Mutant::ClaimWithoutWait) => (true, false),
            // Fig. 9 as written guards both on the tuple timestamp (trap T-1).
            Some(Mutant::LiteralFig9Wait) => {
                let rts = node
                    .store
                    .get(&read.key)
                    .map_or(Timestamp::ZERO, |e| e.meta);
                let guard = rts <= snapshot;
                (guard, guard)
            }
            _ => (true, true),
        };
        if claim && self.raise_read_timestamp(ctx, node.store, &read.key, snapshot) {
            self.counters.claims += 1;
        }
        if wait {
            self.wait_or_answer(ctx, read, &node, true, mail);
        } else {
            answer_snapshot_read(ctx, node.me, node.store, read, mail);
        }
    }

    /// The read-only reads that waited for `txn` look again, once the new holders computed
    /// their floors above: a new holder locked after the claim, so it does not hold them back,
    /// unless it is one recovered or still gathering its locks.
    fn released<N: Node<Dst>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        txn: TxnId,
        node: Participating<'_>,
        mail: &mut Mail<DstMsg>,
    ) {
        for read in self.snapshot_reads.remove(&txn).unwrap_or_default() {
            self.wait_or_answer(ctx, read, &node, false, mail);
        }
    }

    /// The reads waiting here for a writer of a key this node no longer serves are refused:
    /// its claims no longer bind the partition's writers, and its versions may miss commits
    /// made without it (a transaction it holds prepared may even be presumed aborted here
    /// once its coordinator stopped counting this node).
    fn stop_serving<N: Node<Dst>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        not_served: &dyn Fn(&Key) -> bool,
        mail: &mut Mail<DstMsg>,
    ) {
        let mut refused = Vec::new();
        self.snapshot_reads.retain(|_, reads| {
            reads.retain(|read| {
                let refuse = not_served(&read.key);
                if refuse {
                    refused.push((read.txn, read.seq));
                }
                !refuse
            });
            !reads.is_empty()
        });
        refused.sort();
        for (txn, seq) in refused {
            let reason = AbortReason::Reconfigured;
            let msg = Msg::ReadRefused { txn, seq, reason };
            send_or_mail(ctx, self.me, txn.coordinator(), msg, mail);
        }
    }

    /// RW1 at the lock: above every tuple written here (a participant that only holds shared
    /// locks adds nothing). Readers of these keys compare it with their snapshot.
    /// Under fail-over, also above the promoted floor of each partition written.
    fn proposal(
        &self,
        store: &MvStore<Timestamp>,
        writes: &Writes,
        _: Timestamp,
        eviction_floor: Timestamp,
    ) -> Timestamp {
        let tuples = (writes.iter())
            .map(|(key, _)| self.writer_floor(store, key))
            .max()
            .unwrap_or(Timestamp::ZERO);
        if self.mutant == Some(Mutant::NoFailoverFloor) {
            return tuples;
        }
        tuples.max(Self::promoted_floor(eviction_floor))
    }

    /// A commit timestamp more than [`LEAD_BOUND`] ahead of the clock is fixed only once the
    /// clock is that close, unless the latest promoted floor covers it (a floor is the
    /// furthest ahead of the clocks a timestamp legitimately gets, and every later eviction's
    /// floor is at least as high).
    fn fix_not_before(&self, commit_ts: Timestamp, latest_floor: Timestamp) -> Option<Timestamp> {
        (commit_ts > Self::promoted_floor(latest_floor))
            .then(|| Hybrid::physical(commit_ts).saturating_sub(LEAD_BOUND))
    }

    /// RW2 for the read set, in the handler that validated (T-4): a writer that locks one of
    /// these keys from now on commits above `ts`. If the transaction aborts elsewhere the
    /// raised timestamps stay, harmlessly.
    fn validated<N: Node<Dst>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        store: &mut MvStore<Timestamp>,
        reads: &[(Key, Option<TxnId>)],
        ts: Timestamp,
        _: Timestamp,
    ) -> Timestamp {
        if self.mutant != Some(Mutant::NoReadSetInstall) {
            for (key, _) in reads {
                self.raise_read_timestamp(ctx, store, key, ts);
            }
        }
        ts
    }

    /// RW2 for the read set under 2PL: at the masters holding the shared locks, before they go
    /// (under OCC the validation did it).
    fn committing<N: Node<Dst>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        store: &mut MvStore<Timestamp>,
        _: TxnId,
        read_locked: &[(Key, Option<TxnId>)],
        _: bool,
        commit_ts: Timestamp,
        _: u64,
    ) {
        if self.mutant != Some(Mutant::NoReadSetInstall) {
            for (key, _) in read_locked {
                self.raise_read_timestamp(ctx, store, key, commit_ts);
            }
        }
    }

    /// RW2: tuple timestamps only rise (T-2); a reader may have claimed above `commit_ts`
    /// while the writer held the lock. The version's own timestamp already bounds later
    /// writers; this keeps the paper's single tuple timestamp.
    fn installed(&self, meta: &mut Timestamp, commit_ts: Timestamp) {
        *meta = if self.mutant == Some(Mutant::OverwriteTs) {
            commit_ts
        } else {
            (*meta).max(commit_ts)
        };
    }

    fn handle<N: Node<Dst>>(
        &mut self,
        _: &mut Ctx<'_, N>,
        from: NodeId,
        msg: DstMsg,
        _: Parts<'_, ()>,
        _: &mut Mail<DstMsg>,
    ) -> Then {
        let DstMsg::Horizon { ts } = msg;
        self.horizons.heard(from, ts);
        Then::Nothing
    }

    /// Garbage collection below the read horizon; the lowest snapshot a read-only transaction
    /// coordinated here may begin to read at from now on is the read timestamp now (clocks
    /// only advance).
    fn collect_garbage<N: Node<Dst>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        store: &mut MvStore<Timestamp>,
        coord: &FxHashMap<TxnId, Coord<()>>,
        announce: bool,
    ) {
        let now = ctx.now();
        let future = self.read_timestamp(now, None);
        let (me, nodes) = (self.me, &self.nodes);
        if let Some(horizon) = self.horizons.collect(
            ctx,
            me,
            nodes,
            store,
            coord,
            future,
            Timestamp::MAX,
            announce,
        ) {
            let lag = now.0.saturating_sub(Hybrid::physical(horizon).0);
            self.counters.gc_horizon_lag_us = lag;
        }
    }

    /// The claim ceiling.
    fn replay(&mut self, record: Record) {
        if let Record::Kit(replica::Record::Served { up_to }) = record {
            self.ceiling.replayed(up_to);
        }
    }

    /// The claim ceiling outlives the log records that raised it.
    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        let up_to = self.ceiling.up_to();
        emit(replica::Record::Served { up_to }.into());
    }

    fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        let c = self.counters;
        out.extend([
            ("read_only_waits", c.snapshot_read_waits),
            ("claims", c.claims),
            ("ceiling_writes", c.ceiling_writes),
            ("gc_horizon_lag_us", c.gc_horizon_lag_us),
        ]);
    }
}
