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
//! [`Locking::Optimistic`] flavor with GTS's timestamp scheme, [`GtsScheme`], and its messages,
//! [`GtsMsg`], which are this module's; the oracle's state and durability are
//! [`crate::common::oracle`].
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
//! # Fail-over (not in the paper)
//!
//! With fail-over on (the default; `docs/architecture/availability.md`), the data path fails
//! over as `occ`'s does, and so does the oracle: the configuration names the node that runs
//! it (the `oracle` setting's until that node is evicted, then the next node still in some
//! in-sync set), and the oracle's issued timestamps come from blocks the configuration group
//! reserves ([`crate::common::membership::Block`], one Raft round per 4,096 commit
//! timestamps, asked for half a block ahead) instead of its local lease. Each incarnation of
//! the oracle (a start, a restart, a take-over) issues only within blocks granted to it, so
//! its first block lies above every timestamp issued before; it recovers its pending set as a
//! restarted oracle does (`AskHeld`/`Held`, its first block's start the bound), holding
//! stable meanwhile at the largest value it knows safe (the stable it logged, or the largest
//! its node heard of). The oracle issues only while its node holds a lease: one evicted has
//! stopped issuing, so every timestamp its successor issues comes after, and lies above, all
//! of its own, and timestamps still follow the order of the fetches. Coordinators send their
//! fetches and releases to the configuration's oracle, and fetches that waited for the old
//! one again to the new one. What it costs: as after an oracle restart, stable does not move
//! until every node said what it holds, so while the old oracle's node is down, read-only
//! transactions read an ever older snapshot (never a wrong one; `gts` promises no staleness
//! bound) and read-write transactions go on committing.
//!
//! Garbage collection across a move: a node collects below the lowest snapshot every node
//! announced it may still read at, each node's floor being the largest stable it heard of; a
//! restarted oracle starts from its logged stable, at least every such floor, but a new
//! incarnation on another node knows only its own node's largest stable heard of, which may
//! be lower (that node restarted and took over before hearing the current one), and a
//! coordinator that restarted too could then read at a snapshot some versions of which were
//! collected. So the oracle's `Reserve` carries its logged stable, which the configuration
//! keeps; a new incarnation starts at least there, and under fail-over nodes collect only
//! below it (collection lags by up to a block and a half of commits).
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

use crate::common::lock_commit::scheme::{
    Begin, Empty, HorizonMsg, Horizons, Mail, Node, Parts, Then, TimestampScheme, oracle_of,
    read_message, send_or_mail,
};
use crate::common::lock_commit::{
    Coord, Flavor, LockCommit, Locking, MsgOf, Mutant, ORACLE, Phase, RecordOf, Round,
};
use crate::common::membership::{self, Block, Configuration};
use crate::common::oracle::Oracle;
use crate::common::replica::{self, DecisionLog};
use crate::common::vclock::Deps;
use crate::protocol_info::Engine;
use crate::protocol_info::{
    INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NODE_ID_VALUES, NetworkModel, Promise, ProtocolInfo,
    SettingInfo,
};
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientId, ClientReply, Key, NodeId, Timestamp, TxnId};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub use crate::common::lock_commit::Timer;

/// `gts`'s messages: the engine's, and GTS's own ([`GtsMsg`]).
pub type Msg = MsgOf<Gts>;

/// `gts`'s log records: the engine's (the oracle adds the kit's `Served` and `Watermark`).
pub type Record = RecordOf<Gts>;

/// `gts`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "gts",
    isolation: IsolationLevel::Serializable,
    isolation_with: &[],
    paper: "DST (NSDI 2021) §2.2 baseline: GTS, a global timestamp oracle over DrTM+R OCC",
    summary: "occ plus a timestamp oracle: commit timestamps fetched after locking and before validation, released once applied everywhere; read-only transactions read at the oracle's stable timestamp, never wait, never abort",
    engine: Engine::LockCommit,
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
};

/// The oracle's placement.
pub const ORACLE_SETTING: SettingInfo = SettingInfo {
    name: ORACLE,
    values: NODE_ID_VALUES,
    default: "0",
    doc: "the node that acts as timestamp oracle (a node id of the cluster)",
};

/// The protocol settings `gts` accepts.
pub const SETTINGS: &[SettingInfo] = &[
    ORACLE_SETTING,
    crate::common::membership::FAILOVER_SETTING,
    crate::common::membership::LEASE_SETTING,
    crate::common::membership::SKEW_SETTING,
];

/// The mutants `gts` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "read-at-global-ts",
        "read-only transactions read at the last timestamp issued (GlobalTS) instead of the stable one (M-12: a commit with a smaller timestamp may not be applied yet; fractured read, Fig. 3; caught by seed 1 of bank, 2 of list-append, 3 of rw-register under --faults all --latency 3dc; with failover=off, seed 1 of each, on list-append by the timestamp-order promise, the first serializability anomaly there being seed 17's)",
    ),
    (
        "oracle-without-lease",
        "[scenario] under fail-over, the oracle issues timestamps whether or not its node holds a lease (a deposed oracle that resumes after a pause issues from its old blocks, below its successor's timestamps, to a coordinator that has not yet learned of the move: a transaction commits below one whose write it read; tests/it/failover.rs; none of seeds 1..1000 of any workload under --faults all, lan or 3dc, which needs a coordinator that lags the configuration too)",
    ),
];

/// `gts` as a flavor of the lock-and-2PC engine.
pub struct Gts;

impl Flavor for Gts {
    const INFO: ProtocolInfo = INFO;
    const LOCKING: Locking = Locking::Optimistic;
    type Scheme = GtsScheme;
    /// Never used: nothing waits for a lock.
    const DEFAULT_LOCK_TIMEOUT: Duration = Duration::ZERO;
    const FAILS_OVER: bool = true;
}

/// One node running `gts`.
pub type GtsNode = LockCommit<Gts>;

/// GTS's own messages: the oracle's traffic and the read horizons.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum GtsMsg {
    /// Node → every node, every tenth tick: no read-only transaction this node coordinates, now
    /// or later, reads below `ts` (garbage collection keeps what they may read).
    Horizon { ts: Timestamp },
    /// Coordinator → oracle, with the write set locked: a commit timestamp for `txn`.
    FetchTs { txn: TxnId },
    /// Oracle → coordinator: `txn` commits at `ts` (pending at the oracle until released).
    IssuedTs { txn: TxnId, ts: Timestamp },
    /// Coordinator → oracle: `txn` no longer holds `ts` (every write replica applied it, or it
    /// aborted).
    Done { txn: TxnId, ts: Timestamp },
    /// Coordinator → oracle: the stable timestamp, for read-only `txn`'s snapshot.
    FetchStable { txn: TxnId },
    /// Oracle → node: the stable timestamp, the answer to `txn`'s fetch (`None`: each tenth
    /// tick's announcement to every node).
    Stable { txn: Option<TxnId>, ts: Timestamp },
    /// Oracle → coordinator: `ts`, issued to `txn` long ago, is still pending; what became of
    /// it?
    QueryTs { txn: TxnId, ts: Timestamp },
    /// Restarted oracle → node: which timestamps do your coordinators hold? Every timestamp
    /// issued before the restart is at or below `bound`.
    AskHeld { bound: Timestamp },
    /// Node → oracle: the transactions it coordinates that hold a timestamp, in answer to the
    /// `AskHeld` of bound `bound` (an answer to an earlier incarnation's question, which set
    /// this node's floor lower, does not count for a later one).
    Held {
        bound: Timestamp,
        held: Vec<(TxnId, Timestamp)>,
    },
}

impl CheckMessage for GtsMsg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            GtsMsg::FetchTs { txn } | GtsMsg::Done { txn, .. } | GtsMsg::FetchStable { txn } => {
                at.txn_of_sender(*txn)
            }
            GtsMsg::Held { held, .. } => {
                held.iter().try_for_each(|(txn, _)| at.txn_of_sender(*txn))
            }
            GtsMsg::IssuedTs { txn, .. } | GtsMsg::QueryTs { txn, .. } => at.txn_here(*txn),
            GtsMsg::Stable { txn, .. } => txn.map_or(Ok(()), |txn| at.txn_here(txn)),
            // Any bound is one a restarted oracle may announce.
            GtsMsg::AskHeld { .. } => Ok(()),
            // Any timestamp is a lower bound some node may announce.
            GtsMsg::Horizon { .. } => Ok(()),
        }
    }
}

impl HorizonMsg for GtsMsg {
    fn horizon(ts: Timestamp) -> GtsMsg {
        GtsMsg::Horizon { ts }
    }
}

/// GTS's timestamp oracle as the engine's timestamp scheme (the rules and why they are correct
/// are in the module docs).
pub struct GtsScheme {
    me: NodeId,
    nodes: Vec<NodeId>,
    read_at_global_ts: bool,
    /// The mutant `oracle-without-lease`.
    oracle_without_lease: bool,
    /// How long a timestamp issued may stay pending before the oracle asks about it.
    patience: Duration,
    /// The oracle node: the `oracle` setting's, or under fail-over the configuration's.
    oracle_id: NodeId,
    /// The oracle's state, at the oracle node only (under fail-over, created on first need).
    oracle: Option<Oracle>,
    /// Fail-over is on: the oracle's timestamps come from blocks the configuration reserves,
    /// and it moves when its node is evicted.
    fails_over: bool,
    /// The largest stable timestamp this node logged as oracle (replayed): a safe start for
    /// its next incarnation.
    replayed_stable: Timestamp,
    /// At the oracle: fetches waiting for a timestamp block or a lease, in arrival order.
    awaiting_ts: Vec<TxnId>,
    /// Under fail-over: the largest stable timestamp an oracle reported to the configuration
    /// (`Timestamp::MAX` without fail-over). A new oracle incarnation starts at least there
    /// and nodes collect garbage only below it, so that no snapshot the new oracle hands out
    /// lies below what was collected.
    config_stable: Timestamp,
    /// The largest stable timestamp this node has heard of; no read-only transaction it
    /// coordinates from now on reads below it.
    stable_seen: Timestamp,
    /// Timestamps at or below this were issued by an oracle incarnation that has since
    /// restarted and been told what this node holds; one arriving now is refused.
    oracle_floor: Timestamp,
    /// The latest read horizon each node announced.
    horizons: Horizons,
    /// Commit timestamps fetched from the oracle.
    ts_fetches: u64,
    /// Stable timestamps fetched from the oracle.
    stable_fetches: u64,
}

/// What GTS keeps for a transaction a coordinator runs.
#[derive(Default)]
pub struct GtsTxn {
    /// The commit timestamp the oracle issued (held until released).
    fetched: Option<Timestamp>,
}

impl<F: Flavor<Scheme = GtsScheme>> LockCommit<F> {
    /// The oracle's state, at the oracle node.
    pub fn oracle(&self) -> Option<&Oracle> {
        self.scheme().oracle.as_ref()
    }
}

impl GtsScheme {
    /// Send `msg` to `to`; at this node, handle it at once (the issued timestamp excepted: the
    /// engine goes on with its transaction).
    fn deliver<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: &mut Parts<'_, GtsTxn>,
        to: NodeId,
        msg: GtsMsg,
        mail: &mut Mail<GtsMsg>,
    ) {
        if to == self.me && !matches!(msg, GtsMsg::IssuedTs { .. }) {
            let me = self.me;
            let then = self.handle(ctx, me, msg, parts.reborrow(), mail);
            debug_assert!(matches!(then, Then::Nothing));
        } else {
            send_or_mail(ctx, self.me, to, Msg::Scheme(msg), mail);
        }
    }

    /// Under fail-over: this node runs the oracle if the configuration says so, in an
    /// incarnation of its own from now on (see [`crate::common::oracle`], *Fail-over*).
    fn take_over_if_oracle<N: Node<GtsScheme>>(&mut self, ctx: &mut Ctx<'_, N>) {
        if self.fails_over && self.oracle_id == self.me && self.oracle.is_none() {
            let stable = (self.replayed_stable)
                .max(self.stable_seen)
                .max(self.config_stable);
            let incarnation = ctx.now().0;
            let nodes = self.nodes.iter().copied();
            self.oracle = Some(Oracle::incarnation(incarnation, stable, nodes));
        }
    }

    /// At the oracle: issue timestamps to the fetches waiting, in order, while it may (it
    /// holds a lease: an oracle evicted for a lease run out issues nothing more, so its
    /// successor's timestamps, above all of its blocks, also come after all of its own; and a
    /// block has a timestamp left).
    fn issue_awaited<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: &mut Parts<'_, GtsTxn>,
        mail: &mut Mail<GtsMsg>,
    ) {
        if !parts.serving && !self.oracle_without_lease {
            return;
        }
        let mut issued = Vec::new();
        if let Some(oracle) = self.oracle.as_mut() {
            let mut served = 0;
            for &txn in &self.awaiting_ts {
                let Some(ts) = oracle.issue(ctx, txn) else {
                    break;
                };
                issued.push((txn, ts));
                served += 1;
            }
            self.awaiting_ts.drain(..served);
        }
        for (txn, ts) in issued {
            let msg = GtsMsg::IssuedTs { txn, ts };
            self.deliver(ctx, parts, txn.coordinator(), msg, mail);
        }
    }

    /// `txn` no longer holds `ts`; tell the oracle.
    fn release_ts<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: &mut Parts<'_, GtsTxn>,
        txn: TxnId,
        ts: Timestamp,
        mail: &mut Mail<GtsMsg>,
    ) {
        let oracle = self.oracle_id;
        self.deliver(ctx, parts, oracle, GtsMsg::Done { txn, ts }, mail);
    }

    /// The oracle issued `ts` to `txn`. A transaction waiting for it validates and decides at
    /// `ts`; one that is not (it aborted, or the reply repeats) releases it; one from an oracle
    /// incarnation this node already told what it holds is refused (the restarted oracle does
    /// not count it pending), and its transaction aborts.
    fn issued<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        mut parts: Parts<'_, GtsTxn>,
        txn: TxnId,
        ts: Timestamp,
        mail: &mut Mail<GtsMsg>,
    ) -> Then {
        let stale = ts <= self.oracle_floor;
        let waiting = match parts.coord.get(&txn) {
            None => false,
            Some(t) if t.scheme.fetched == Some(ts) => return Then::Nothing,
            Some(t) => {
                t.scheme.fetched.is_none()
                    && matches!(
                        t.phase,
                        Phase::Voting {
                            round: Round::Fetch,
                            ..
                        }
                    )
            }
        };
        if !waiting {
            self.release_ts(ctx, &mut parts, txn, ts, mail);
            return Then::Nothing;
        }
        if stale {
            return Then::Abort(txn, AbortReason::Timeout);
        }
        let t = parts.coord.get_mut(&txn).expect("found above");
        t.scheme.fetched = Some(ts);
        if let Phase::Voting {
            round, commit_ts, ..
        } = &mut t.phase
        {
            *commit_ts = ts;
            *round = Round::Prepare;
        }
        Then::GoOn(txn)
    }

    /// The stable timestamp `ts` arrived (for read-only `txn`'s `Begin`, or announced): a
    /// waiting `Begin` reads at the largest stable timestamp heard of here, which only rises.
    fn stable_arrived<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: Parts<'_, GtsTxn>,
        txn: Option<TxnId>,
        ts: Timestamp,
    ) {
        self.stable_seen = self.stable_seen.max(ts);
        let snapshot = self.stable_seen;
        let Some(t) = txn.and_then(|txn| parts.coord.get_mut(&txn)) else {
            return;
        };
        if !t.awaiting_stable {
            return;
        }
        t.awaiting_stable = false;
        t.ts = snapshot;
        t.last_active = ctx.now();
        let txn = txn.expect("found above");
        if let Some(pending) = t.pending.take() {
            pending.answer(ctx, ClientReply::Begun { txn, snapshot });
        }
    }

    /// The oracle asks what became of `ts`, issued to `txn`. Nothing while `txn` runs here
    /// with it (or waits for it); while its commit is not applied everywhere, the decision goes
    /// again to the write replicas that have not acknowledged it (their acknowledgements
    /// release it); otherwise it is released.
    fn query_ts<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        mut parts: Parts<'_, GtsTxn>,
        txn: TxnId,
        ts: Timestamp,
        mail: &mut Mail<GtsMsg>,
    ) {
        if let Some(t) = parts.coord.get(&txn)
            && t.scheme.fetched.is_none_or(|held| held == ts)
        {
            return;
        }
        match parts.unapplied(txn) {
            Some((commit, replicas)) => {
                for node in replicas {
                    let commit = Some(commit);
                    let msg = Msg::Decide {
                        txn,
                        commit,
                        tag: 0,
                    };
                    send_or_mail(ctx, self.me, node, msg, mail);
                }
            }
            None => self.release_ts(ctx, &mut parts, txn, ts, mail),
        }
    }

    /// A restarted oracle asks which timestamps this node's coordinators hold: those of its
    /// running transactions, and of its commits not yet applied everywhere. From now on a
    /// timestamp at or below `bound` (issued before that restart) is refused.
    fn ask_held<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        mut parts: Parts<'_, GtsTxn>,
        bound: Timestamp,
        mail: &mut Mail<GtsMsg>,
    ) {
        self.oracle_floor = self.oracle_floor.max(bound);
        let mut held: Vec<(TxnId, Timestamp)> = parts
            .coord
            .iter()
            .filter_map(|(txn, t)| t.scheme.fetched.map(|ts| (*txn, ts)))
            .chain(parts.decided.iter().map(|(txn, ts, _)| (*txn, *ts)))
            .collect();
        held.sort();
        let oracle = self.oracle_id;
        let msg = GtsMsg::Held { bound, held };
        self.deliver(ctx, &mut parts, oracle, msg, mail);
    }
}

impl TimestampScheme for GtsScheme {
    type Txn = GtsTxn;
    type Msg = GtsMsg;
    type Record = Empty;
    const SNAPSHOTS: bool = true;

    fn new(env: &NodeEnv, mutant: Option<Mutant>) -> GtsScheme {
        let oracle_id = oracle_of(env);
        let fails_over = membership::failover_on(env);
        GtsScheme {
            me: env.id,
            nodes: env.placement.nodes().collect(),
            read_at_global_ts: mutant == Some(Mutant::ReadAtGlobalTs),
            oracle_without_lease: mutant == Some(Mutant::OracleWithoutLease),
            patience: env.options.participant_timeout,
            oracle_id,
            oracle: (env.id == oracle_id && !fails_over).then(Oracle::new),
            fails_over,
            replayed_stable: Timestamp::ZERO,
            awaiting_ts: Vec::new(),
            config_stable: if fails_over {
                Timestamp::ZERO
            } else {
                Timestamp::MAX
            },
            stable_seen: Timestamp::ZERO,
            oracle_floor: Timestamp::ZERO,
            horizons: Horizons::default(),
            ts_fetches: 0,
            stable_fetches: 0,
        }
    }

    /// A read-only transaction's `Begun` waits for the oracle's stable timestamp (one round
    /// trip).
    fn begin(&mut self, now: Timestamp, txn: TxnId, _: ClientId, read_only: bool) -> Begin<GtsMsg> {
        if read_only {
            self.stable_fetches += 1;
            Begin::FetchStable(self.oracle_id, GtsMsg::FetchStable { txn })
        } else {
            Begin::At(now)
        }
    }

    fn read(&self, t: &Coord<GtsTxn>, txn: TxnId, seq: u32, key: Key) -> Msg {
        read_message(txn, seq, key, t.prio, t.read_only.then_some(t.ts))
    }

    /// The oracle's timestamp is the commit timestamp; proposals are ignored.
    fn voted(&self, _: &mut GtsTxn, _: &mut Timestamp, _: Timestamp, _: &Deps) {}

    /// Fetch the commit timestamp first, inside the critical section: every write lock held,
    /// no read validated yet (trap T-9).
    fn before_decision(&mut self, txn: TxnId, t: &mut Coord<GtsTxn>) -> Option<(NodeId, GtsMsg)> {
        if t.scheme.fetched.is_some() {
            return None;
        }
        let Phase::Voting { round, .. } = &mut t.phase else {
            return None;
        };
        *round = Round::Fetch;
        self.ts_fetches += 1;
        Some((self.oracle_id, GtsMsg::FetchTs { txn }))
    }

    fn owes_applied(&self, t: &GtsTxn, _: u64) -> bool {
        t.fetched.is_some()
    }

    /// Release the timestamp.
    fn applied_everywhere<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        txn: TxnId,
        ts: Timestamp,
        mut parts: Parts<'_, GtsTxn>,
        mail: &mut Mail<GtsMsg>,
    ) {
        self.release_ts(ctx, &mut parts, txn, ts, mail);
    }

    /// An abort after the fetch releases the timestamp, or stable stalls behind it.
    fn aborted<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        txn: TxnId,
        t: &GtsTxn,
        mut parts: Parts<'_, GtsTxn>,
        mail: &mut Mail<GtsMsg>,
    ) {
        if let Some(ts) = t.fetched {
            self.release_ts(ctx, &mut parts, txn, ts, mail);
        }
    }

    /// Nothing to order: where a snapshot taken now would put it.
    fn empty_commit_ts(&self, _: &Coord<GtsTxn>, _: Timestamp) -> Timestamp {
        self.stable_seen
    }

    /// The oracle moved, or was granted blocks. A node that no longer runs it drops it (its
    /// successor issues above all of its blocks); the new one takes over. Fetches that
    /// waited for the old one go again to the new one.
    fn configured<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        config: &Configuration,
        blocks: &[Block],
        mut parts: Parts<'_, GtsTxn>,
        mail: &mut Mail<GtsMsg>,
    ) {
        let oracle = config.oracle();
        self.config_stable = self.config_stable.max(config.oracle_stable());
        let moved = oracle != self.oracle_id;
        self.oracle_id = oracle;
        if oracle != self.me {
            self.oracle = None;
            self.awaiting_ts.clear();
        }
        self.take_over_if_oracle(ctx);
        if let Some(state) = self.oracle.as_mut() {
            for block in blocks.iter().filter(|b| b.by == self.me) {
                state.granted(block);
            }
        }
        self.issue_awaited(ctx, &mut parts, mail);
        if !moved {
            return;
        }
        // (txn, whether it waits for its commit timestamp rather than for a snapshot)
        let mut again: Vec<(TxnId, bool)> = (parts.coord.iter())
            .filter_map(|(txn, t)| {
                let fetching = t.scheme.fetched.is_none()
                    && matches!(
                        t.phase,
                        Phase::Voting {
                            round: Round::Fetch,
                            ..
                        }
                    );
                (fetching || t.awaiting_stable).then_some((*txn, fetching))
            })
            .collect();
        again.sort();
        for (txn, fetching) in again {
            let msg = if fetching {
                GtsMsg::FetchTs { txn }
            } else {
                GtsMsg::FetchStable { txn }
            };
            self.deliver(ctx, &mut parts, oracle, msg, mail);
        }
    }

    fn reservation_wanted(&mut self) -> Option<(u64, Timestamp)> {
        let oracle = self.oracle.as_mut()?;
        let incarnation = oracle.wants_block()?;
        Some((incarnation, oracle.logged_stable()))
    }

    fn handle<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        from: NodeId,
        msg: GtsMsg,
        mut parts: Parts<'_, GtsTxn>,
        mail: &mut Mail<GtsMsg>,
    ) -> Then {
        match msg {
            GtsMsg::Horizon { ts } => self.horizons.heard(from, ts),
            GtsMsg::FetchTs { txn } => {
                self.take_over_if_oracle(ctx);
                if self.oracle.is_some() && !self.awaiting_ts.contains(&txn) {
                    self.awaiting_ts.push(txn);
                    self.issue_awaited(ctx, &mut parts, mail);
                }
            }
            GtsMsg::Done { txn, ts } => {
                if let Some(oracle) = self.oracle.as_mut() {
                    oracle.release(txn, ts);
                }
            }
            GtsMsg::FetchStable { txn } => {
                let global = self.read_at_global_ts;
                if let Some(oracle) = self.oracle.as_mut() {
                    let ts = if global {
                        oracle.last_issued()
                    } else {
                        oracle.publish(ctx)
                    };
                    let msg = GtsMsg::Stable { txn: Some(txn), ts };
                    self.deliver(ctx, &mut parts, txn.coordinator(), msg, mail);
                }
            }
            GtsMsg::Held { bound, held } => {
                let now = ctx.now();
                if let Some(oracle) = self.oracle.as_mut() {
                    oracle.held(now, from, bound, &held);
                }
            }
            // From the oracle only (a node that is not takes no part in its bookkeeping).
            _ if from != self.oracle_id => {}
            GtsMsg::IssuedTs { txn, ts } => return self.issued(ctx, parts, txn, ts, mail),
            GtsMsg::Stable { txn, ts } => self.stable_arrived(ctx, parts, txn, ts),
            GtsMsg::QueryTs { txn, ts } => self.query_ts(ctx, parts, txn, ts, mail),
            GtsMsg::AskHeld { bound } => self.ask_held(ctx, parts, bound, mail),
        }
        Then::Nothing
    }

    /// At the oracle node: ask the coordinators of timestamps pending too long what became of
    /// them; after a restart, ask the nodes that have not answered yet what they hold; when
    /// `announce`, announce the stable timestamp to every node (which keeps their garbage
    /// collection moving even where no read-only transaction runs).
    fn tick<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        mut parts: Parts<'_, GtsTxn>,
        announce: bool,
        mail: &mut Mail<GtsMsg>,
    ) {
        let now = ctx.now();
        let patience = self.patience;
        self.take_over_if_oracle(ctx);
        self.issue_awaited(ctx, &mut parts, mail);
        let Some(oracle) = self.oracle.as_mut() else {
            return;
        };
        let overdue = oracle.overdue(now, patience);
        let bound = oracle.restart_bound();
        let unanswered: Vec<NodeId> = oracle
            .recovering()
            .filter(|_| oracle.bound_known())
            .map(|nodes| nodes.iter().copied().collect())
            .unwrap_or_default();
        let stable = oracle.publish(ctx);
        for (txn, ts) in overdue {
            let msg = GtsMsg::QueryTs { txn, ts };
            self.deliver(ctx, &mut parts, txn.coordinator(), msg, mail);
        }
        for node in unanswered {
            self.deliver(ctx, &mut parts, node, GtsMsg::AskHeld { bound }, mail);
        }
        if !announce {
            return;
        }
        for node in self.nodes.clone() {
            let msg = GtsMsg::Stable {
                txn: None,
                ts: stable,
            };
            self.deliver(ctx, &mut parts, node, msg, mail);
        }
    }

    /// Garbage collection below the read horizon; a snapshot this node's read-only
    /// transactions take from now on is at least the largest stable timestamp heard of here.
    fn collect_garbage<N: Node<GtsScheme>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        store: &mut MvStore<Timestamp>,
        coord: &FxHashMap<TxnId, Coord<GtsTxn>>,
        announce: bool,
    ) {
        let future = self.stable_seen;
        let (me, nodes, cap) = (self.me, &self.nodes, self.config_stable);
        self.horizons
            .collect(ctx, me, nodes, store, coord, future, cap, announce);
    }

    /// The oracle's bound on the timestamps it issued, and its logged stable timestamp.
    fn replay(&mut self, record: Record) {
        if let Record::Kit(replica::Record::Watermark(ts)) = record {
            self.replayed_stable = self.replayed_stable.max(ts);
        }
        let Some(oracle) = self.oracle.as_mut() else {
            return;
        };
        match record {
            Record::Kit(replica::Record::Served { up_to }) => oracle.replay_issued(up_to),
            Record::Kit(replica::Record::Watermark(ts)) => oracle.replay_stable(ts),
            _ => {}
        }
    }

    /// An oracle that ever issued or published anything lost its pending timestamps.
    fn recovered(&mut self, _: &DecisionLog<Timestamp>) {
        if let Some(oracle) = self.oracle.as_mut()
            && oracle.used()
        {
            oracle.restarted(self.nodes.iter().copied());
        }
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        if let Some(oracle) = &self.oracle {
            oracle.checkpoint(emit);
        }
    }

    fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        out.extend([
            ("ts_fetches", self.ts_fetches),
            ("stable_fetches", self.stable_fetches),
        ]);
        if let Some(oracle) = &self.oracle {
            out.push(("oracle_pending_now", oracle.pending_count() as u64));
        }
    }
}
