//! `vts`: DST's vector-timestamp baseline (Wei, Chen, Chen, Wang, Gong, Zang, "Unifying
//! Timestamp with Transaction Ordering for MVCC with Decentralized Scalar Timestamp", NSDI '21,
//! §2.2, Fig. 4 and Fig. 5, after NAM-DB; evaluated on DrTM+R OCC in §5.1): `occ` whose
//! read-write transactions tag their versions with a per-node counter ⟨node : LocalTS⟩ and
//! report the tags they depend on to a timestamp oracle, which stabilises them into a vector
//! `StableVTS`; read-only transactions read the versions that vector admits, in one round per
//! key, never validating, never waiting, never aborting.
//!
//! **Guarantee: read committed** (`IsolationLevel::ReadCommitted`), the strongest of augur's
//! levels it meets; precisely, Adya's PL-2+ ("consistent view": no cycle with exactly one
//! anti-dependency) with atomic snapshots, which augur's checker has no level for. **Not
//! serializable**, as the digest's trap T-8 predicts, and, beyond the digest, **not snapshot
//! isolation** either (below, and `tests/vts.rs`). Read-write transactions among themselves
//! stay as strict as `occ`'s. **Read-only transactions never abort**
//! (`Promise::AbortFreeReadOnly`; a timeout or a lost coordinator aside). §5.1 claims "the
//! same consistency level" as DST (serializability) for VTS; Fig. 4 as written does not give
//! it.
//!
//! # The protocol
//!
//! It runs on the kit's lock-and-2PC engine ([`crate::common::lock_commit`]) as `occ`'s
//! [`Locking::Optimistic`] flavor with VTS's timestamp scheme, [`VtsScheme`]; the oracle's
//! state and durability are [`crate::common::oracle::VectorOracle`], the deps' type is the
//! kit's ([`Deps`], per-node counters); the other pieces below ([`Tags`], [`Outbox`]) are this
//! module's, and so are VTS's messages ([`VtsMsg`]) and log records ([`Record`]), which the
//! engine carries without knowing them.
//!
//! * **Workers are nodes.** Each node's coordinator keeps `LocalTS`. A read-write transaction
//!   that writes gets the tag ⟨node : LocalTS + 1⟩ at its commit decision (Fig. 4 COMMIT:1), so
//!   aborts leave no gaps. A read-write transaction that writes nothing gets no tag and sends
//!   nothing to the oracle: no version carries it and no one can depend on it; `occ`'s
//!   validation orders it among the others.
//! * **Versions carry their tag.** The engine's scalar commit timestamp (`occ`'s: the largest
//!   proposal, above every version applied at each participant) still orders each key's
//!   versions; the tag's node is the writer's coordinator ([`TxnId::coordinator`]), and the
//!   counter sits in a side table beside the store ([`Tags`]: writer → counter), one entry per
//!   transaction rather than per version, pruned once the counter is visible to every snapshot
//!   (a version whose tag is forgotten is treated as visible to all and as nobody's
//!   dependency, which is then true). Version metadata would have cost every protocol a word in
//!   every version; the per-key metadata `M` holds one value for all versions of a key. The
//!   decision (`Decide`) carries the tag; a write replica logs it ([`Record::Tag`]) with the
//!   commit, so it is replayed with the versions after a restart.
//! * **deps** (Fig. 4 READ:3, WRITE:3): a read reply carries the tag of the version read, a
//!   write replica's yes vote the tags of the versions it overwrites; the coordinator keeps the
//!   largest counter per node ([`Deps`]).
//! * **INSTALL**: once every write replica applied the commit (where `gts` releases its
//!   timestamp), the coordinator sends `Install(⟨node:t⟩, deps)` to the oracle.
//! * **The oracle** (the node named by the setting `oracle`, default 0, as in `gts`) keeps one
//!   queue per worker. The paper leaves the "stability protocol" unspecified; the rule here:
//!   ⟨i:t⟩ becomes stable once ⟨i:t−1⟩ is stable and every dep ⟨j:s⟩ has `s ≤ StableVTS[j]`;
//!   then `StableVTS[i] = t`. Each tick the oracle logs `StableVTS` if it moved and tells each
//!   worker whose entry moved how far its tags are stable (`Stabilized`), which ends its
//!   coordinator's duty to resend them.
//! * **Read-only transactions** (declared at `Begin`): `Begin` fetches `StableVTS` (one round
//!   trip); the vector `V` is the largest of it and the largest stable vector heard of here
//!   (all published vectors form a chain, so this is one of them). Every read ships `V` to the
//!   key's master, which returns the newest version (in version order) whose tag ⟨j:t⟩ has
//!   `t ≤ V[j]`. No claim, no wait, no abort; the commit sends nothing. Versions of a node not
//!   yet in any vector (counter above every `V[j]`) are invisible until stable. The snapshot
//!   is a vector; as in `walter`, the time it was fixed stands in for the client (`Begun`'s
//!   snapshot, and the read-only commit's timestamp).
//!
//! # What it guarantees, and why not more
//!
//! *Snapshots are closed under ww and wr dependencies.* A version B wrote or read-then-wrote is
//! one B's deps cover (the read reply or the yes vote carried its tag), and ⟨i:t⟩ is stable
//! only once every dep is, so a stable vector `V` admits, with each transaction, every
//! transaction it read from or overwrote, transitively. Each admitted version is applied at
//! every replica before its `Install` leaves, and a key's versions are installed in version
//! order (exclusive locks at every replica), so visibility at `V` is a prefix of each key's
//! versions and the master returns the newest admitted one. Hence no G-single through a
//! read-only transaction R: a cycle R →rw X →(ww|wr)* Y →wr R would need Y admitted and X
//! not. Read-write transactions are `occ`'s (strictly serializable among themselves), and a
//! cycle through two read-only transactions, or a read-write one that writes nothing, has two
//! anti-dependencies. No lost update, no fractured read of one transaction's writes, bank
//! totals preserved (every snapshot is the state after the admitted transactions).
//!
//! *Anti-dependencies are invisible to the oracle* (trap T-8, mutant M-14 of the digest):
//! A →rw B (A read a version B then overwrote) puts nothing in B's deps, so B may stabilise
//! before A. A reader that sees B and not A closes A →rw B →wr R →rw A: G2 with two adjacent
//! anti-dependencies, which SI allows (`tests/vts.rs`, `t8_…`). But the same gap also closes
//! cycles whose anti-dependencies are *not* adjacent, which SI forbids: T reads A's version
//! before A is stable (a read-write transaction reads the newest committed version, stable or
//! not) and then W overwrites something T read; W stabilises before A, and a reader sees W and
//! not A: R →rw A →wr T →rw W →wr R (G-nonadjacent; `tests/vts.rs`,
//! `a_reader_of_an_unstable_version_…`). The same happens with A →ww instead of →wr
//! (R →rw A →ww A' →rw W →wr R). In SI terms A committed before T's snapshot, T's snapshot
//! excludes W, yet R's includes W and excludes A. `augur check` at SI finds it in 2 of 1,200
//! runs (`--faults all`, 200 seeds, three workloads, `3dc` and `lan`: `lan` list-append seed 15,
//! rw-register seed 181). Session order is not kept either (a client's read-only transaction
//! may miss its own commit, not yet stable), so PSI, which counts it, fails too; read
//! committed is what is left. Recording readers' deps on the tuples they read, as DST's RW2
//! does with timestamps, would be the repair the digest suggests; it is not Fig. 4.
//!
//! # Failures
//!
//! * **Tags never repeat.** The coordinator logs the tag with its decision (`Record::Tagged`,
//!   with the deps, in the handler that decides, so both are durable before the `Decide` that
//!   carries the tag leaves); a restarted coordinator continues above the largest tag it
//!   replays (a checkpoint keeps the counter, `Record::Counter`).
//! * **Every committed tag reaches the oracle.** The coordinator keeps each tag it issued, with
//!   its deps, in its *outbox* ([`Outbox`], durable through those records and checkpoints)
//!   until the oracle says it is stable. Each tick it acts on entries not heard of for
//!   `participant_timeout` (at once after its own restart): one whose commit some write
//!   replica has not acknowledged yet (the decision log still holds it) gets its decision sent
//!   again to those replicas (their acknowledgements lead to the `Install`); one applied
//!   everywhere is installed again. Lost `Install`s, lost acknowledgements, lost `Stabilized`
//!   and a coordinator crash between its commit and its `Install` are all covered so.
//!   The oracle ignores an entry it has already stabilised (and says so again) or queued.
//! * **Oracle restart.** A published `StableVTS` never goes back: it is logged
//!   (`Record::Stable`) before any reply, announcement or `Stabilized` that reveals it leaves.
//!   The queues are volatile; a restarted oracle starts from the logged vector and asks every
//!   node (`AskHeld`, again every `participant_timeout` until it answers) to report the vector
//!   it heard of (`Heard`) and install its outbox again. No stable entry is lost: a
//!   coordinator forgets an entry only once the oracle told it that it is stable, which was
//!   logged first. Stability needs no knowledge of
//!   the other workers' pending entries, so a restarted oracle, unlike `gts`'s, need not wait
//!   for every node before moving on.
//! * **Participant restart.** Versions and their tags are replayed from the log; a checkpoint
//!   writes the tag table before the versions.
//!
//! # Fail-over
//!
//! With the `failover` setting on (the default; `docs/architecture/availability.md`), `vts`
//! fails over as `occ` does (the lock-and-2PC engine's leased masters, epochs, promotion and
//! copies), and so does its oracle:
//!
//! * **The oracle moves with the configuration.** The configuration names it (at first the
//!   `oracle` setting's node); when its node is evicted it moves to the next node still in
//!   some in-sync set. A node that no longer runs it drops it (keeping its logged vector as
//!   heard of); the new one starts an incarnation of its own ([`VectorOracle::take_over`]).
//! * **Where a new oracle starts.** Every vector an oracle publishes is *closed*: with each
//!   tag it admits, it admits the tag's predecessor and deps. So is the component-wise
//!   maximum of closed vectors; so the new incarnation may start from any published vector
//!   and merge any other at any time. It starts from the largest its node heard of and merges
//!   the one each node reports (`AskHeld`, answered with `Heard` and the node's owed installs;
//!   asked again every `participant_timeout` until answered; a node that learns of the move
//!   reports at once, and sends the fetches that waited for the old oracle again). What it
//!   must reach is how far each worker was told its tags are stable, since the worker forgot
//!   those: `Stabilized` carries the whole logged vector, which the worker keeps as heard of,
//!   so its report covers every tag it forgot. Until a worker reports, the entries that depend
//!   on tags only it knew stable wait: while the old oracle's node is down, the vector's
//!   entries that depend on that node's last tags stay out of it, and the other workers'
//!   later ones queue behind them. Commits go on; read-only transactions read an older
//!   snapshot, never a wrong one (`vts` promises no staleness bound).
//! * **Garbage collection stays below every snapshot.** A node's announced read horizon is at
//!   most the vector it heard of, and under fail-over it logs that vector ([`Record::Heard`])
//!   before each announcement and in checkpoints, and collects nothing above the vector it
//!   logged. So a new incarnation on any node, restarted or not, starts at or above every
//!   horizon its node announced and at or above what its node collected, hence above every
//!   node's collection horizon (the minimum of every node's horizon), and no snapshot it
//!   hands out misses a version collected or a tag forgotten.
//! * **A deposed oracle** that has not yet learned of its eviction may go on answering fetches
//!   and telling workers; its vectors are closed too, so a snapshot at one, or at the maximum
//!   of one and the new oracle's, is consistent. A worker heeds `Stabilized` only from the
//!   oracle its configuration names, and reports what it heard of to the next. No lease is
//!   needed, unlike `gts`'s oracle, whose timestamps must follow the order of the fetches.
//! * **Reads at a vector** are served only by a master in sync for the key's partition and
//!   leased, as the engine's own reads ([`TimestampScheme::gated_read`]): an evicted node may
//!   miss commits installed since. One that cannot serve refuses (`reconfigured`), and the
//!   read-only transaction is retried.
//! * **Copies carry tags.** A replica copied in gets, with the versions, each writer's tag,
//!   logged before the versions: a version without its tag would count as visible to every
//!   snapshot.
//!
//! # Garbage collection (not in the paper)
//!
//! DST's horizon announcements ([`crate::dst_occ`]) with vectors: a node's horizon is the
//! component-wise minimum of its running read-only transactions' vectors and the largest stable
//! vector it has heard of (its future read-only transactions read at or above that). Every tenth
//! tick it announces it (`HorizonVector`) to the other nodes; each node keeps, per node, the
//! component-wise maximum of what it heard (every announcement is a lower bound) and, at each
//! key, the versions from the newest one visible at the component-wise minimum `W` of every
//! node's horizon onward. Visibility is monotone in the vector, so whatever any read-only
//! transaction, running or to come, returns is kept: none ever aborts for want of a version.
//! Tags at or below `W` are forgotten (see above). Until every node has announced, nothing is
//! collected.
//!
//! # What comes from the paper, and what is augur's choice
//!
//! From the paper: `LocalTS` per worker, versions tagged ⟨i:ts⟩, deps from the versions read
//! and written, `INSTALL(⟨i:ts⟩, deps)` at commit, the oracle's per-worker queues and
//! `StableVTS`, read-only transactions fetching the whole vector and reading versions within
//! it, OCC as the base CC. augur's: workers are nodes; tags assigned at the commit decision
//! (after validation); the stability rule; `INSTALL` after every write replica applied the
//! commit (augur's replicas apply on the decision); the durable counter, outbox and logged
//! vector, the resends and the restart question; the tag table; the per-node monotone
//! vectors; garbage collection; the oracle's fail-over; and `occ`'s engine choices
//! (replication, durability, termination; see [`crate::occ`]). The paper's optimisations
//! (timestamp compression beyond the max per worker, a dedicated fetch thread, batching) are
//! not modelled.
//!
//! # Mutants (`augur check --mutant`)
//!
//! See [`MUTANTS`].
//!
//! [`Locking::Optimistic`]: crate::common::lock_commit::Locking::Optimistic

use crate::common::lock_commit::scheme::{
    Begin, Mail, Node, Parts, Then, TimestampScheme, oracle_of, read_message, send_or_mail,
};
use crate::common::lock_commit::{
    Coord, Flavor, LockCommit, Locking, MsgOf, Mutant, Record as LcRecord,
};
use crate::common::membership::{self, Block, Configuration};
use crate::common::oracle::{LoggedVector, VectorOracle};
use crate::common::replica::{DecisionLog, Writes};
use crate::common::two_phase::GC_BATCH;
use crate::common::vclock::{Deps, VClock, check_vector};
use crate::gts::ORACLE_SETTING;
use crate::protocol_info::Engine;
use crate::protocol_info::{
    INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, Promise, ProtocolInfo, SettingInfo,
};
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Work};
use augur_storage::MvStore;
use augur_storage::Version;
use augur_types::{ClientId, ClientReply, Key};
use augur_types::{NodeId, Timestamp, TxnId};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

pub use crate::common::lock_commit::Timer;

/// `vts`'s messages: the engine's, and VTS's own ([`VtsMsg`]).
pub type Msg = MsgOf<Vts>;

/// `vts`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "vts",
    isolation: IsolationLevel::ReadCommitted,
    isolation_with: &[],
    paper: "DST (NSDI 2021) §2.2 baseline: VTS, NAM-DB-style vector timestamps over DrTM+R OCC",
    summary: "occ plus per-node commit counters: versions tagged <node:counter>, deps of the versions read and overwritten installed at an oracle that stabilises a vector; read-only transactions read the versions the stable vector admits, never wait, never abort",
    engine: Engine::LockCommit,
    commit_order_evidence: true,
    promises: &[Promise::AbortFreeReadOnly],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: SETTINGS,
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
};

/// The protocol settings `vts` accepts: `gts`'s oracle placement, and fail-over's.
pub const SETTINGS: &[SettingInfo] = &[
    ORACLE_SETTING,
    membership::FAILOVER_SETTING,
    membership::LEASE_SETTING,
    membership::SKEW_SETTING,
];

/// The mutants `vts` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[(
    "ungated-read-at",
    "[scenario] under fail-over, a node serves reads at a vector whether or not it is in sync for the key's partition and leased (a deposed master that resumes after a pause answers a coordinator that has not yet learned of its eviction with the version its successor overwrote, though the reader's vector admits the overwrite: a fractured snapshot; tests/it/failover.rs; read committed, the level the checker holds vts to, allows it, so no random seed fails)",
)];

/// `vts` as a flavor of the lock-and-2PC engine.
pub struct Vts;

impl Flavor for Vts {
    const INFO: ProtocolInfo = INFO;
    const LOCKING: Locking = Locking::Optimistic;
    type Scheme = VtsScheme;
    /// Never used: nothing waits for a lock.
    const DEFAULT_LOCK_TIMEOUT: Duration = Duration::ZERO;
    const FAILS_OVER: bool = true;
}

/// One node running `vts`.
pub type VtsNode = LockCommit<Vts>;

/// VTS's own messages: the oracle's traffic, reads at a vector and the vector horizons. Its
/// tags and deps travel in the engine's (`ReadReply.tag`, `Vote.deps`, `Decide.tag`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum VtsMsg {
    /// Coordinator → oracle: `StableVTS`, for read-only `txn`'s snapshot.
    FetchStable { txn: TxnId },
    /// Oracle → node: `StableVTS`, the answer to `txn`'s `FetchStable` (`None`: an
    /// announcement).
    StableVector { txn: Option<TxnId>, at: VClock },
    /// Coordinator → the master of `key`: a read-only read of the newest version visible at
    /// vector `at`.
    ReadAt {
        txn: TxnId,
        seq: u32,
        key: Key,
        at: VClock,
    },
    /// Coordinator → oracle: `INSTALL(⟨sender:t⟩, deps)`, once every write replica applied the
    /// commit tagged so.
    Install { t: u64, deps: Deps },
    /// Oracle → node: `at` is stable (logged at the oracle first), so are the node's tags up
    /// to its entry there.
    Stabilized { at: VClock },
    /// Restarted (or, under fail-over, new) oracle → node: say which stable vector you heard
    /// of, and install every tag you still owe again.
    AskHeld,
    /// Node → oracle, in answer to `AskHeld` (or on learning of a new oracle): the largest
    /// stable vector this node heard of.
    Heard { at: VClock },
    /// Node → every node: no read-only transaction this node coordinates, now or later, reads
    /// at a vector below `at` (garbage collection keeps what they may read).
    HorizonVector { at: VClock },
}

impl CheckMessage for VtsMsg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            // Vectors index by node: each must have one entry per node, deps name nodes.
            VtsMsg::ReadAt {
                txn, key, at: v, ..
            } => {
                at.txn_of_sender(*txn)?;
                at.key_here(key)?;
                check_vector(at, v)
            }
            VtsMsg::Install { deps, .. } => deps.check(at),
            VtsMsg::StableVector { txn, at: v } => {
                txn.map_or(Ok(()), |txn| at.txn_here(txn))?;
                check_vector(at, v)
            }
            VtsMsg::HorizonVector { at: v }
            | VtsMsg::Stabilized { at: v }
            | VtsMsg::Heard { at: v } => check_vector(at, v),
            VtsMsg::FetchStable { txn } => at.txn_of_sender(*txn),
            VtsMsg::AskHeld => Ok(()),
        }
    }
}

/// Whether a version tagged ⟨node:t⟩ is visible at `at` (`t == 0`: its tag was forgotten as
/// visible to every snapshot).
pub fn visible(node: NodeId, t: u64, at: &VClock) -> bool {
    t == 0 || ((node.0 as usize) < at.len() && t <= at.get(node.0 as usize))
}

/// A participant's tag table: the counter of each writer whose versions it stores (the node is
/// the writer's coordinator). Forgotten once visible to every snapshot ([`Tags::prune`]).
#[derive(Debug, Default)]
pub struct Tags(FxHashMap<TxnId, u64>);

impl Tags {
    pub fn insert(&mut self, writer: TxnId, t: u64) {
        if t > 0 {
            self.0.insert(writer, t);
        }
    }

    /// The counter of `writer`'s tag; 0 if it has none here (forgotten: visible to all).
    pub fn of(&self, writer: TxnId) -> u64 {
        self.0.get(&writer).copied().unwrap_or(0)
    }

    /// Whether `version` is visible at `at`.
    pub fn visible(&self, version: &Version, at: &VClock) -> bool {
        visible(version.writer.coordinator(), self.of(version.writer), at)
    }

    /// Forget the tags visible at `horizon`, below which every snapshot in use or to come reads.
    pub fn prune(&mut self, horizon: &VClock) {
        self.0
            .retain(|writer, t| !visible(writer.coordinator(), *t, horizon));
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The records that rebuild the table, in writer order.
    pub fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        let mut tags: Vec<_> = self.0.iter().map(|(w, t)| (*w, *t)).collect();
        tags.sort();
        for (writer, t) in tags {
            emit(Record::Tag { writer, t });
        }
    }
}

/// A tag this coordinator issued and the oracle has not yet said is stable.
#[derive(Clone, Debug)]
struct Outgoing {
    txn: TxnId,
    deps: Deps,
    /// Every write replica applied the commit: it may be installed.
    applied: bool,
    /// When it was last sent (its decision or its `Install`); zero after a restart.
    sent: Timestamp,
}

/// A coordinator's `LocalTS` and the tags it owes the oracle (see the module's "Failures").
#[derive(Debug, Default)]
pub struct Outbox {
    local_ts: u64,
    owed: BTreeMap<u64, Outgoing>,
    by_txn: FxHashMap<TxnId, u64>,
}

impl Outbox {
    /// The next tag for `txn`, which decided to commit with writes, depending on `deps`. The
    /// caller persists [`Record::Tagged`] in the same handler.
    pub fn assign(&mut self, txn: TxnId, deps: Deps, now: Timestamp) -> u64 {
        self.local_ts += 1;
        let t = self.local_ts;
        let entry = Outgoing {
            txn,
            deps,
            applied: false,
            sent: now,
        };
        self.owed.insert(t, entry);
        self.by_txn.insert(txn, t);
        t
    }

    /// Replay of [`Record::Tagged`] (applied or not is settled after replay, by
    /// [`Outbox::recovered`]).
    pub fn replayed(&mut self, txn: TxnId, t: u64, deps: Deps) {
        self.local_ts = self.local_ts.max(t);
        let entry = Outgoing {
            txn,
            deps,
            applied: false,
            sent: Timestamp::ZERO,
        };
        self.owed.insert(t, entry);
        self.by_txn.insert(txn, t);
    }

    /// Replay of [`Record::Counter`].
    pub fn replayed_counter(&mut self, local_ts: u64) {
        self.local_ts = self.local_ts.max(local_ts);
    }

    /// After replay: the entries whose commit `unapplied` does not report are applied
    /// everywhere.
    pub fn recovered(&mut self, unapplied: impl Fn(TxnId) -> bool) {
        for entry in self.owed.values_mut() {
            entry.applied = !unapplied(entry.txn);
        }
    }

    /// The tag `txn` was given, while it is owed (0 otherwise).
    pub fn tag_of(&self, txn: TxnId) -> u64 {
        self.by_txn.get(&txn).copied().unwrap_or(0)
    }

    /// `txn`'s commit is applied at every write replica: its `Install`, if it is owed.
    pub fn applied(&mut self, txn: TxnId, now: Timestamp) -> Option<(u64, Deps)> {
        let t = *self.by_txn.get(&txn)?;
        let entry = self.owed.get_mut(&t)?;
        entry.applied = true;
        entry.sent = now;
        Some((t, entry.deps.clone()))
    }

    /// The oracle says this node's tags up to `up_to` are stable: they are no longer owed.
    pub fn stabilized(&mut self, up_to: u64) {
        while let Some(entry) = self.owed.first_entry() {
            if *entry.key() > up_to {
                break;
            }
            let (_, gone) = entry.remove_entry();
            self.by_txn.remove(&gone.txn);
        }
    }

    /// Entries not sent for `patience` (all of them with `patience` zero), each marked as sent
    /// now: `Ok` the `Install`s of applied ones, `Err` the transactions whose decision must go
    /// again to the replicas that have not acknowledged it.
    pub fn overdue(
        &mut self,
        now: Timestamp,
        patience: Duration,
    ) -> Vec<Result<(u64, Deps), TxnId>> {
        let mut due = Vec::new();
        for (t, entry) in self.owed.iter_mut() {
            if now.since(entry.sent) >= patience {
                entry.sent = now;
                due.push(if entry.applied {
                    Ok((*t, entry.deps.clone()))
                } else {
                    Err(entry.txn)
                });
            }
        }
        due
    }

    /// How many tags are owed (a counter).
    pub fn len(&self) -> usize {
        self.owed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.owed.is_empty()
    }

    /// The records that rebuild it: the counter, then every owed tag.
    pub fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        emit(Record::Counter(self.local_ts));
        for (t, entry) in &self.owed {
            emit(Record::Tagged {
                txn: entry.txn,
                t: *t,
                deps: entry.deps.clone(),
            });
        }
    }
}

/// What `vts` adds to the engine's log (its scheme's records, [`LcRecord::Scheme`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// Coordinator, with its decision: `txn` commits with tag ⟨this node : t⟩ and deps `deps`.
    Tagged { txn: TxnId, t: u64, deps: Deps },
    /// Coordinator, in checkpoints: `LocalTS`.
    Counter(u64),
    /// Write replica, with its `Committed`: `writer`'s versions here carry ⟨coordinator : t⟩.
    Tag { writer: TxnId, t: u64 },
    /// Oracle: `StableVTS` reached this and may have been published.
    Stable(VClock),
    /// Any node, under fail-over (in checkpoints, and before each horizon announcement when it
    /// moved): the largest stable vector it heard of. A new oracle incarnation on this node
    /// starts at least there (see the module docs, *Fail-over*).
    Heard(VClock),
}

impl From<Record> for LcRecord<Record> {
    fn from(record: Record) -> LcRecord<Record> {
        LcRecord::Scheme(record)
    }
}

impl From<LoggedVector> for LcRecord<Record> {
    fn from(LoggedVector(v): LoggedVector) -> LcRecord<Record> {
        LcRecord::Scheme(Record::Stable(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outbox_numbers_commits_without_gaps_and_forgets_what_is_stable() {
        let mut o = Outbox::default();
        let (a, b, c) = (
            TxnId::new(NodeId(1), 1),
            TxnId::new(NodeId(1), 2),
            TxnId::new(NodeId(1), 3),
        );
        assert_eq!(o.assign(a, Deps::new(), Timestamp(10)), 1);
        assert_eq!(o.assign(b, Deps::new(), Timestamp(10)), 2);
        assert_eq!(o.applied(a, Timestamp(20)), Some((1, Deps::new())));
        let due = o.overdue(Timestamp(100), Duration::from_micros(50));
        assert_eq!(due, vec![Ok((1, Deps::new())), Err(b)]);
        o.stabilized(1);
        assert_eq!((o.tag_of(a), o.tag_of(b)), (0, 2));
        assert_eq!(o.assign(c, Deps::new(), Timestamp(100)), 3);
        let mut records = Vec::new();
        o.checkpoint(&mut |r| records.push(r));
        let mut p = Outbox::default();
        for r in records {
            match r {
                Record::Counter(n) => p.replayed_counter(n),
                Record::Tagged { txn, t, deps } => p.replayed(txn, t, deps),
                _ => unreachable!(),
            }
        }
        p.recovered(|txn| txn == c);
        assert_eq!(
            p.assign(TxnId::new(NodeId(1), 4), Deps::new(), Timestamp(0)),
            4
        );
        let due = p.overdue(Timestamp(0), Duration::ZERO);
        assert_eq!(due[..2], [Ok((2, Deps::new())), Err(c)]);
    }
}

/// VTS's vector timestamps as the engine's timestamp scheme (the rules and why are in the
/// module docs).
pub struct VtsScheme {
    me: NodeId,
    nodes: Vec<NodeId>,
    /// How long a tag owed the oracle waits before it is acted on again.
    patience: Duration,
    /// The oracle node: the `oracle` setting's, or under fail-over the configuration's.
    oracle_id: NodeId,
    /// Fail-over is on: the oracle moves when its node is evicted, and this node keeps the
    /// largest stable vector it heard of durably ([`Record::Heard`]).
    fails_over: bool,
    /// The last [`Record::Heard`] logged.
    heard_logged: VClock,
    /// The counter of each writer whose versions this node stores.
    tags: Tags,
    /// This coordinator's `LocalTS` and the tags it owes the oracle.
    outbox: Outbox,
    /// The oracle's state, at the oracle node only (under fail-over, the configuration's).
    vector_oracle: Option<VectorOracle>,
    /// The largest stable vector this node has heard of; no read-only transaction it
    /// coordinates from now on reads below it.
    stable_vector: VClock,
    /// The largest read horizon each node announced.
    horizon_vectors: FxHashMap<NodeId, VClock>,
    /// Stable vectors fetched from the oracle.
    stable_fetches: u64,
    /// Installs sent to the oracle (resends included).
    installs: u64,
}

/// What VTS keeps for a transaction a coordinator runs.
#[derive(Default)]
pub struct VtsTxn {
    /// A read-write transaction's deps so far.
    deps: Deps,
    /// A read-only one's vector (once fetched).
    vector: Option<VClock>,
}

impl<F: Flavor<Scheme = VtsScheme>> LockCommit<F> {
    /// The oracle's state, at the oracle node.
    pub fn vector_oracle(&self) -> Option<&VectorOracle> {
        self.scheme().vector_oracle.as_ref()
    }

    /// The tag ⟨node : counter⟩ of `key`'s newest committed version here (counter 0: it has
    /// none, or it was forgotten as visible to every snapshot).
    pub fn tag_of(&self, key: &Key) -> Option<(NodeId, u64)> {
        let (writer, _) = self.latest(key)?;
        Some((writer.coordinator(), self.scheme().tags.of(writer)))
    }

    /// How many tags this coordinator still owes the oracle.
    pub fn tags_owed(&self) -> usize {
        self.scheme().outbox.len()
    }
}

impl VtsScheme {
    /// Send `msg` to `to`; at this node, handle it at once.
    fn deliver<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: &mut Parts<'_, VtsTxn>,
        to: NodeId,
        msg: VtsMsg,
        mail: &mut Mail<VtsMsg>,
    ) {
        if to == self.me {
            let me = self.me;
            self.handle(ctx, me, msg, parts.reborrow(), mail);
        } else {
            ctx.send(to, Msg::Scheme(msg));
        }
    }

    /// At the decision of `txn`, which wrote: its tag, logged with its deps before the
    /// decision (a torn log keeps at worst a tag that no version carries).
    fn assign_tag<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        txn: TxnId,
        deps: Deps,
    ) -> u64 {
        let t = self.outbox.assign(txn, deps.clone(), ctx.now());
        ctx.persist(Record::Tagged { txn, t, deps }.into());
        t
    }

    /// `txn`'s commit is applied everywhere: install its tag, if one is owed.
    fn install_tag<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: &mut Parts<'_, VtsTxn>,
        txn: TxnId,
        mail: &mut Mail<VtsMsg>,
    ) {
        if let Some((t, deps)) = self.outbox.applied(txn, ctx.now()) {
            self.send_install(ctx, parts, t, deps, mail);
        }
    }

    fn send_install<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: &mut Parts<'_, VtsTxn>,
        t: u64,
        deps: Deps,
        mail: &mut Mail<VtsMsg>,
    ) {
        self.installs += 1;
        let oracle = self.oracle_id;
        self.deliver(ctx, parts, oracle, VtsMsg::Install { t, deps }, mail);
    }

    /// Act on the tags owed the oracle and not sent for `patience`: install the applied ones
    /// again, send the others' decision again to the write replicas that have not
    /// acknowledged it (see the module docs, "Failures").
    fn install_owed<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: &mut Parts<'_, VtsTxn>,
        patience: Duration,
        mail: &mut Mail<VtsMsg>,
    ) {
        for due in self.outbox.overdue(ctx.now(), patience) {
            match due {
                Ok((t, deps)) => self.send_install(ctx, parts, t, deps, mail),
                Err(txn) => {
                    let Some((commit, replicas)) = parts.unapplied(txn) else {
                        self.install_tag(ctx, parts, txn, mail);
                        continue;
                    };
                    let tag = self.outbox.tag_of(txn);
                    for node in replicas {
                        let commit = Some(commit);
                        let msg = Msg::Decide { txn, commit, tag };
                        send_or_mail(ctx, self.me, node, msg, mail);
                    }
                }
            }
        }
    }

    /// At the oracle: `INSTALL(⟨from:t⟩, deps)`. One stable already is acknowledged again (as
    /// far as logged); otherwise the tick tells `from` once it is stable and logged.
    fn oracle_install<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: &mut Parts<'_, VtsTxn>,
        from: NodeId,
        (t, deps): (u64, Deps),
        mail: &mut Mail<VtsMsg>,
    ) {
        let Some(oracle) = self.vector_oracle.as_mut() else {
            return;
        };
        if oracle.install(from, t, deps) {
            oracle.stabilize();
        } else if oracle.logged_of(from).is_some_and(|up_to| t <= up_to) {
            let at = oracle.logged().clone();
            self.deliver(ctx, parts, from, VtsMsg::Stabilized { at }, mail);
        }
    }

    /// The oracle asked (or moved): tell it the largest stable vector heard of here, and
    /// install every tag owed again.
    fn answer_oracle<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: &mut Parts<'_, VtsTxn>,
        mail: &mut Mail<VtsMsg>,
    ) {
        let at = self.stable_vector.clone();
        let oracle = self.oracle_id;
        self.deliver(ctx, parts, oracle, VtsMsg::Heard { at }, mail);
        self.install_owed(ctx, parts, Duration::ZERO, mail);
    }

    /// The oracle told this node that `at` is stable: its tags up to its entry there are no
    /// longer owed. The vector is kept as heard of, so that this node's knowledge always
    /// covers the tags it forgot (a new oracle starts from it, see *Fail-over*).
    fn stabilized(&mut self, at: &VClock) {
        self.outbox.stabilized(at.get(self.me.0 as usize));
        self.stable_vector.merge(at);
    }

    /// A stable vector arrived (for read-only `txn`'s `Begin`, or announced): a waiting
    /// `Begin` reads at the largest stable vector heard of here, which only rises.
    fn stable_vector_arrived<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: Parts<'_, VtsTxn>,
        txn: Option<TxnId>,
        at: VClock,
    ) {
        self.stable_vector.merge(&at);
        let vector = self.stable_vector.clone();
        let Some(t) = txn.and_then(|txn| parts.coord.get_mut(&txn)) else {
            return;
        };
        if !t.awaiting_stable {
            return;
        }
        t.awaiting_stable = false;
        // The snapshot is a vector; as `walter`'s, the time it was fixed stands in for the
        // client (and is the read-only commit's timestamp).
        let snapshot = ctx.now();
        t.ts = snapshot;
        t.scheme.vector = Some(vector);
        t.last_active = ctx.now();
        let txn = txn.expect("found above");
        if let Some(pending) = t.pending.take() {
            pending.answer(ctx, ClientReply::Begun { txn, snapshot });
        }
    }

    /// A read-only read at the master of `key`: the newest version visible at `at`.
    fn answer_read_at<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: &Parts<'_, VtsTxn>,
        (txn, seq, key): (TxnId, u32, Key),
        at: &VClock,
        mail: &mut Mail<VtsMsg>,
    ) {
        ctx.charge(Work::reads(1));
        let tags = &self.tags;
        let version = parts
            .store
            .get(&key)
            .and_then(|e| e.read_where(|v| tags.visible(v, at)));
        let msg = Msg::ReadReply {
            txn,
            seq,
            value: version.and_then(|v| v.value.clone()),
            version: version.map(|v| v.writer),
            ts: version.map_or(Timestamp::ZERO, |v| v.ts),
            tag: version.map_or(0, |v| tags.of(v.writer)),
        };
        send_or_mail(ctx, self.me, txn.coordinator(), msg, mail);
    }
}

impl TimestampScheme for VtsScheme {
    type Txn = VtsTxn;
    type Msg = VtsMsg;
    type Record = Record;
    const SNAPSHOTS: bool = true;

    fn new(env: &NodeEnv, _: Option<Mutant>) -> VtsScheme {
        let oracle_id = oracle_of(env);
        let nodes: Vec<NodeId> = env.placement.nodes().collect();
        VtsScheme {
            me: env.id,
            patience: env.options.participant_timeout,
            oracle_id,
            fails_over: membership::failover_on(env),
            heard_logged: VClock::new(nodes.len()),
            tags: Tags::default(),
            outbox: Outbox::default(),
            vector_oracle: (env.id == oracle_id).then(|| VectorOracle::new(nodes.len())),
            stable_vector: VClock::new(nodes.len()),
            horizon_vectors: FxHashMap::default(),
            nodes,
            stable_fetches: 0,
            installs: 0,
        }
    }

    /// A read-only transaction's `Begun` waits for the oracle's stable vector (one round
    /// trip).
    fn begin(&mut self, now: Timestamp, txn: TxnId, _: ClientId, read_only: bool) -> Begin<VtsMsg> {
        if read_only {
            self.stable_fetches += 1;
            Begin::FetchStable(self.oracle_id, VtsMsg::FetchStable { txn })
        } else {
            Begin::At(now)
        }
    }

    /// A read-only read ships its vector instead of a snapshot timestamp.
    fn read(&self, t: &Coord<VtsTxn>, txn: TxnId, seq: u32, key: Key) -> Msg {
        match t.scheme.vector.clone().filter(|_| t.read_only) {
            Some(at) => Msg::Scheme(VtsMsg::ReadAt { txn, seq, key, at }),
            None => read_message(txn, seq, key, t.prio, None),
        }
    }

    /// Fig. 4 READ:3: the version read is a dependency.
    fn read_returned(&self, t: &mut Coord<VtsTxn>, version: Option<TxnId>, _: Timestamp, tag: u64) {
        if !t.read_only
            && let Some(writer) = version
        {
            t.scheme.deps.add(writer.coordinator(), tag);
        }
    }

    /// Fig. 4 WRITE:3: the versions overwritten are dependencies.
    fn voted(&self, t: &mut VtsTxn, commit_ts: &mut Timestamp, proposal: Timestamp, deps: &Deps) {
        t.deps.merge(deps);
        *commit_ts = (*commit_ts).max(proposal);
    }

    /// A commit that writes is tagged here (logged before the decision).
    fn tag_decision<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        txn: TxnId,
        t: &mut VtsTxn,
        writes: bool,
    ) -> u64 {
        if writes {
            self.assign_tag(ctx, txn, std::mem::take(&mut t.deps))
        } else {
            0
        }
    }

    fn owes_applied(&self, _: &VtsTxn, tag: u64) -> bool {
        tag > 0
    }

    /// Install the tag.
    fn applied_everywhere<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        txn: TxnId,
        _: Timestamp,
        mut parts: Parts<'_, VtsTxn>,
        mail: &mut Mail<VtsMsg>,
    ) {
        self.install_tag(ctx, &mut parts, txn, mail);
    }

    /// A commit still to be applied somewhere is owed the oracle, with its tag.
    fn decision_tag(&self, txn: TxnId) -> u64 {
        self.outbox.tag_of(txn)
    }

    fn version_tag(&self, writer: TxnId) -> u64 {
        self.tags.of(writer)
    }

    /// At a write replica voting yes: the tags of the versions `writes` overwrite.
    fn overwritten(&self, store: &MvStore<Timestamp>, writes: &Writes) -> Deps {
        let mut deps = Deps::new();
        for (key, _) in writes {
            if let Some(v) = store.get(key).and_then(|e| e.latest_committed()) {
                deps.add(v.writer.coordinator(), self.tags.of(v.writer));
            }
        }
        deps
    }

    /// The versions' tag, logged before them (a torn log keeps at worst a tag alone).
    fn committing<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        _: &mut MvStore<Timestamp>,
        txn: TxnId,
        _: &[(Key, Option<TxnId>)],
        wrote: bool,
        _: Timestamp,
        tag: u64,
    ) {
        if wrote {
            ctx.persist(
                Record::Tag {
                    writer: txn,
                    t: tag,
                }
                .into(),
            );
            self.tags.insert(txn, tag);
        }
    }

    /// A read at a vector is served only by a leased master in sync (see *Fail-over*).
    fn gated_read(msg: &VtsMsg) -> Option<(TxnId, u32, &Key)> {
        match msg {
            VtsMsg::ReadAt { txn, seq, key, .. } => Some((*txn, *seq, key)),
            _ => None,
        }
    }

    /// A copied partition's versions keep their tags, logged before them.
    fn copied_tags<N: Node<VtsScheme>>(&mut self, ctx: &mut Ctx<'_, N>, tags: &[(TxnId, u64)]) {
        for &(writer, t) in tags {
            ctx.persist(Record::Tag { writer, t }.into());
            self.tags.insert(writer, t);
        }
    }

    /// The oracle moved (see *Fail-over*): a node that no longer runs it drops it, keeping
    /// its logged vector as heard of; the new one takes over from the largest vector its node
    /// heard of. Every node then sends the new oracle what waited for the old one: the
    /// read-only transactions' fetches, the vector it heard of and its owed installs.
    fn configured<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        config: &Configuration,
        _: &[Block],
        mut parts: Parts<'_, VtsTxn>,
        mail: &mut Mail<VtsMsg>,
    ) {
        let oracle = config.oracle();
        if oracle == self.oracle_id {
            return;
        }
        self.oracle_id = oracle;
        if oracle != self.me {
            if let Some(old) = self.vector_oracle.take() {
                self.stable_vector.merge(old.logged());
            }
        } else if self.vector_oracle.is_none() {
            let start = &self.stable_vector;
            self.vector_oracle = Some(VectorOracle::take_over(self.nodes.len(), start));
        }
        let mut waiting: Vec<TxnId> = (parts.coord.iter())
            .filter(|(_, t)| t.awaiting_stable)
            .map(|(txn, _)| *txn)
            .collect();
        waiting.sort_unstable();
        for txn in waiting {
            self.deliver(ctx, &mut parts, oracle, VtsMsg::FetchStable { txn }, mail);
        }
        self.answer_oracle(ctx, &mut parts, mail);
    }

    fn handle<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        from: NodeId,
        msg: VtsMsg,
        mut parts: Parts<'_, VtsTxn>,
        mail: &mut Mail<VtsMsg>,
    ) -> Then {
        match msg {
            VtsMsg::ReadAt { txn, seq, key, at } => {
                self.answer_read_at(ctx, &parts, (txn, seq, key), &at, mail)
            }
            VtsMsg::HorizonVector { at } => {
                let latest = self.horizon_vectors.entry(from).or_insert(at.clone());
                latest.merge(&at);
            }
            VtsMsg::Install { t, deps } => {
                self.oracle_install(ctx, &mut parts, from, (t, deps), mail)
            }
            VtsMsg::FetchStable { txn } => {
                if let Some(oracle) = self.vector_oracle.as_mut() {
                    let at = oracle.publish(ctx);
                    let msg = VtsMsg::StableVector { txn: Some(txn), at };
                    self.deliver(ctx, &mut parts, txn.coordinator(), msg, mail);
                }
            }
            VtsMsg::Heard { at } => {
                if let Some(oracle) = self.vector_oracle.as_mut() {
                    oracle.heard(from, &at);
                }
            }
            // From the oracle only (a node that is not takes no part in its bookkeeping).
            _ if from != self.oracle_id => {}
            VtsMsg::AskHeld => self.answer_oracle(ctx, &mut parts, mail),
            VtsMsg::Stabilized { at } => self.stabilized(&at),
            VtsMsg::StableVector { txn, at } => self.stable_vector_arrived(ctx, parts, txn, at),
        }
        Then::Nothing
    }

    /// The coordinator's overdue duties; at the oracle, log the stable vector if it moved,
    /// tell the workers how far their tags are stable, ask the nodes that have not answered
    /// since a restart or take-over (every `patience`), and, when `announce`, announce the
    /// vector to every node.
    fn tick<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        mut parts: Parts<'_, VtsTxn>,
        announce: bool,
        mail: &mut Mail<VtsMsg>,
    ) {
        let patience = self.patience;
        self.install_owed(ctx, &mut parts, patience, mail);
        let Some(oracle) = self.vector_oracle.as_mut() else {
            return;
        };
        let ask = oracle.to_ask(ctx.now(), patience);
        let stable = oracle.publish(ctx);
        let tell = oracle.to_tell();
        for node in tell {
            let at = stable.clone();
            self.deliver(ctx, &mut parts, node, VtsMsg::Stabilized { at }, mail);
        }
        for node in ask {
            self.deliver(ctx, &mut parts, node, VtsMsg::AskHeld, mail);
        }
        if announce {
            for node in self.nodes.clone() {
                let at = stable.clone();
                let msg = VtsMsg::StableVector { txn: None, at };
                self.deliver(ctx, &mut parts, node, msg, mail);
            }
        }
    }

    /// VTS's garbage collection (see the module docs): this node's horizon is the
    /// component-wise minimum of its running read-only transactions' vectors and the largest
    /// stable vector heard of here; announced when `announce`; at each key, keep from the
    /// newest version visible at the minimum of every node's horizon (none from some node yet:
    /// keep everything), and forget the tags visible there.
    fn collect_garbage<N: Node<VtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        store: &mut MvStore<Timestamp>,
        coord: &FxHashMap<TxnId, Coord<VtsTxn>>,
        announce: bool,
    ) {
        let me = self.me;
        let mut mine = self.stable_vector.clone();
        for v in coord.values().filter_map(|t| t.scheme.vector.as_ref()) {
            mine.meet(v);
        }
        let latest = self.horizon_vectors.entry(me).or_insert(mine.clone());
        latest.merge(&mine);
        if announce && self.fails_over && self.heard_logged != self.stable_vector {
            // Durable before the horizon (at most this vector) leaves: a new oracle on this
            // node, even after a restart, starts at or above every horizon it announced.
            self.heard_logged = self.stable_vector.clone();
            ctx.persist(Record::Heard(self.heard_logged.clone()).into());
        }
        if announce {
            for &node in self.nodes.iter().filter(|n| **n != me) {
                let msg = VtsMsg::HorizonVector { at: mine.clone() };
                ctx.send(node, Msg::Scheme(msg));
            }
        }
        let mut horizon = mine;
        if self.fails_over {
            // Nor, here, above the vector logged as heard of: a new oracle on this node after
            // a restart starts there, and must not start below what this node collected.
            horizon.meet(&self.heard_logged);
        }
        for node in &self.nodes {
            match self.horizon_vectors.get(node) {
                Some(v) => horizon.meet(v),
                None => return,
            }
        }
        let tags = &self.tags;
        store.collect_garbage_where(GC_BATCH, |v| tags.visible(v, &horizon));
        if announce {
            self.tags.prune(&horizon);
        }
    }

    /// The tags, owed installs and the oracle's stable vector.
    fn replay(&mut self, record: LcRecord<Record>) {
        let LcRecord::Scheme(record) = record else {
            return;
        };
        match record {
            Record::Tagged { txn, t, deps } => self.outbox.replayed(txn, t, deps),
            Record::Counter(local_ts) => self.outbox.replayed_counter(local_ts),
            Record::Tag { writer, t } => self.tags.insert(writer, t),
            Record::Stable(v) => {
                if let Some(oracle) = self.vector_oracle.as_mut() {
                    oracle.replay_stable(&v);
                }
            }
            Record::Heard(v) => {
                if v.len() == self.stable_vector.len() {
                    self.stable_vector.merge(&v);
                    self.heard_logged.merge(&v);
                }
            }
        }
    }

    /// The owed tags whose commit the decision log no longer awaits are applied everywhere;
    /// an oracle that logged anything lost its queues.
    fn recovered(&mut self, decided: &DecisionLog<Timestamp>) {
        self.outbox.recovered(|txn| decided.get(&txn).is_some());
        if let Some(oracle) = self.vector_oracle.as_mut() {
            oracle.recovered();
        }
    }

    /// The counter and owed tags (under fail-over, with the stable vector heard of, which
    /// covers the tags no longer owed), and the versions' tags before the versions.
    fn checkpoint(&self, emit: &mut dyn FnMut(LcRecord<Record>)) {
        if self.fails_over {
            emit(Record::Heard(self.stable_vector.clone()).into());
        }
        self.outbox.checkpoint(&mut |r| emit(r.into()));
        self.tags.checkpoint(&mut |r| emit(r.into()));
        if let Some(oracle) = &self.vector_oracle {
            oracle.checkpoint(emit);
        }
    }

    fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        out.extend([
            ("stable_fetches", self.stable_fetches),
            ("installs", self.installs),
            ("tags_owed_now", self.outbox.len() as u64),
            ("tags_kept_now", self.tags.len() as u64),
        ]);
        if let Some(oracle) = &self.vector_oracle {
            out.push(("oracle_queued_now", oracle.queued() as u64));
        }
    }
}
