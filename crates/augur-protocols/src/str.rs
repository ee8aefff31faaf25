//! `str`: STR (Mao et al.), snapshot isolation with internal and external speculation
//! (§5–§6, Algorithms 1 and 2).
//!
//! **Guarantee: speculative snapshot isolation (SPSI, §5)**: snapshot isolation for final
//! committed transactions, and for every transaction, aborted ones included, a snapshot that is
//! atomic (SPSI-1) and holds no two concurrent conflicting writers (SPSI-3); nothing final
//! commits while it depends on a transaction that has not (SPSI-4).
//!
//! STR is `clocksi-rep` (its §6.1 base protocol: physical-clock snapshots, 2PC at the masters of
//! the updated partitions, synchronous replication of prepares to slaves) plus:
//!
//! * **Local commit (§6.5, Alg. 1 l. 17–27).** At commit, a transaction is first certified at
//!   the replicas its coordinator holds: a committed version newer than its snapshot aborts it,
//!   an older transaction's prepared version makes it wait or die (wait-die, §7.2). It then
//!   *local commits*: its versions there become `LocalCommitted` at the local-commit timestamp
//!   `LC`, the largest of `RS + 1` and the local replicas' proposals.
//! * **Speculative reads (§6.2).** A transaction that began with speculation on may read a
//!   `LocalCommitted` version within its snapshot, but only one written by a transaction of the
//!   same node; everyone else waits for the final outcome, as for a prepared version. Reading
//!   creates a data dependency (`inDD`/`outDD`, §6.4).
//! * **Cache partition (§6.2).** A transaction that writes keys its node does not replicate is
//!   *unsafe*; its writes to those keys are kept in the node's cache partition, tagged with its
//!   `LC`, so local readers see all of them or none until it final commits or aborts.
//! * **OLC and FFC (§6.2, Fig. 2).** Each transaction keeps the read snapshots of the unsafe
//!   transactions it read from (the OLC dictionary, its own snapshot included once it is unsafe
//!   itself) and the freshest final-commit timestamp it read from (FFC). A read that would make
//!   FFC exceed the smallest OLC is *parked* until the unsafe dependency resolves: an unsafe
//!   local transaction and a remote final-committed one that may conflict with it never share a
//!   snapshot.
//! * **PreciseClock (§6.3).** Every key remembers the largest snapshot that read it
//!   (`LastReader`); a replica proposes `max(LastReader + 1, RS + 1)` over the keys it prepares
//!   rather than its clock, so commit timestamps are as small as rules P1 and P2 allow and
//!   speculative readers are less often overtaken.
//! * **Final commit (Alg. 1 l. 28–50).** Prepares go to the remote masters, which certify and
//!   replicate them; a slave that receives a replicated prepare aborts its own local-committed
//!   transactions that conflict with it (§6.5). The commit timestamp is the largest proposal of
//!   every replica of every updated partition, and the transaction final commits only once all
//!   replied and every data and flow dependency has final committed. Committing aborts the
//!   dependants whose snapshot lies below its commit timestamp (they would violate SPSI-1) and
//!   releases the others; an abort cascades to every dependant.
//! * **Speculative commits (§4, §6.4).** A commit request marked speculative is answered at
//!   local commit (`SpecCommitted`); the client's next transaction then *flow depends* on it
//!   (`inFD`/`outFD`) and cannot final commit before it, and aborts with it. The final outcome
//!   is collected with `AwaitOutcome`; an abort after a speculative commit is a
//!   `Misspeculation`. How many speculative commits a client chains is the client's choice
//!   (bounded by [`Flavor::MAX_CHAIN`]); the self-tuner lives in the client library.
//!
//! Failures are handled as in `clocksi-rep`: participant timeouts, a termination protocol for
//! long-prepared transactions with presumed abort, and a decision log kept until every replica
//! acknowledged, with the same write-ahead log records ([`crate::common::replica`]).
//! Local-committed versions are durable prepare records of their node; after a crash their
//! coordinator has forgotten them and the termination protocol aborts them. The cache
//! partition, dependencies and speculative outcomes are volatile: a client whose coordinator
//! restarted learns that the outcome of its speculative commits is unknown.
//!
//! **Fail-over** is `clocksi-rep`'s (the engine's, [`crate::common::two_phase`]; on by default,
//! `failover=off` keeps the placement's masters; `docs/architecture/availability.md`): masters,
//! leases, epochs and copies come from the configuration. What STR adds is what *local* means:
//! a key is local, read and local committed at its coordinator, only where the node is an
//! **in-sync** replica of its partition; a replica out of sync treats the partition's keys as
//! remote (through the cache partition), and a local commit counts as the coordinator's vote
//! only at an in-sync replica. A new master's *master state* is the store, as for
//! `clocksi-rep`: local-committed versions it holds as a former slave are prepare records like
//! any other (their coordinator is asked about them at promotion). A transaction still waiting
//! for votes on a partition whose configuration changed aborts (`reconfigured`) and takes its
//! dependants with it. A local commit at a master that is copying the partition to a replica
//! waits for the copy to end, as the engine's prepares there do (the copy would miss what it
//! installed), and then runs at the epoch the copy ends in.
//!
//! Like `clocksi-rep`, this module holds the paper's rules — visibility, certification, local
//! commit, dependencies, final commit and cascading aborts — and fills in the hooks of
//! [`Rules`]; serving reads, the masters' prepares and their replication, applying outcomes,
//! termination and garbage collection are the family's shared machinery
//! ([`crate::common::two_phase`]).
//!
//! The same engine, configured by a [`Flavor`], also runs the `planet` baseline (see
//! [`crate::planet`]).
//!
//! Mutant (`augur check --mutant`): `naive-speculative-reads` reads any prepared or
//! local-committed version within the snapshot, wherever it comes from, without the cache
//! partition and without OLC/FFC parking: the protocol §6.2 shows to break SPSI (Fig. 1 and 2).

use crate::common::coordinator::{Pending, group_by_partition};
use crate::common::membership::{self, Epoch};
use crate::common::replica::{self, ReadRequest, Record, Timer, Writes};
use crate::common::two_phase::{self, Certified, Conventions, Core, Rules, TwoPhase, Visible};
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use crate::protocol_info::{SettingInfo, SpeculationOffer};
use augur_contract::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::{KeyEntry, MvStore, VersionState};
use augur_types::{AbortReason, ClientId, ClientOp, ClientReply, ClientRequest, Key, NodeId};
use augur_types::{PartitionId, RequestError, Timestamp, TxnId, Value};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::marker::PhantomData;

/// What distinguishes the protocols that run on this engine.
pub trait Flavor: Send + 'static {
    /// Local transactions may read local-committed versions (internal speculation).
    const SPECULATIVE_READS: bool;
    /// Proposals follow PreciseClock (`LastReader + 1`) rather than the physical clock.
    const PRECISE_CLOCK: bool;
    /// The most speculatively committed, unresolved transactions a client may have.
    const MAX_CHAIN: u32;
}

/// STR as the paper describes it: speculative reads, PreciseClock, speculation chains of up to
/// eight transactions per client (the range the paper's self-tuner explores).
pub struct Speculative;

impl Flavor for Speculative {
    const SPECULATIVE_READS: bool = true;
    const PRECISE_CLOCK: bool = true;
    const MAX_CHAIN: u32 = 8;
}

/// The `str` protocol.
pub type Str = Engine<Speculative>;

/// `str` and `planet` follow the configuration: the masters, and which replicas count as
/// local, come from it (docs/architecture/availability.md); `failover=off` keeps the
/// placement's.
const FAILS_OVER: bool = true;

/// The protocol settings of `str` and `planet`: fail-over's.
pub const SETTINGS: &[SettingInfo] = &[
    membership::FAILOVER_SETTING,
    membership::LEASE_SETTING,
    membership::SKEW_SETTING,
];

/// `str`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "str",
    isolation: IsolationLevel::Spsi,
    isolation_with: &[],
    paper: "STR §5-6, Algorithms 1-2 (speculative snapshot isolation)",
    summary: "clocksi-rep plus local commit, speculative reads of same-node local-committed versions, speculative commits, PreciseClock",
    engine: crate::protocol_info::Engine::TwoPhase,
    commit_order_evidence: true,
    promises: &[],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: SETTINGS,
    speculation: Some(SpeculationOffer {
        reads: <Speculative as Flavor>::SPECULATIVE_READS,
        max_chain: <Speculative as Flavor>::MAX_CHAIN,
        default: "auto",
    }),
    forms: INTERACTIVE_AND_ONE_SHOT,
};

/// A final commit as replicas receive it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalCommit {
    pub commit_ts: Timestamp,
    /// The largest snapshot of a local transaction that read the transaction's writes from the
    /// cache partition: the replica raises its keys' `LastReader` to it as it commits, since
    /// those reads never reached it.
    pub read_floor: Timestamp,
}

/// The messages of STR: a commit carries a [`FinalCommit`]; a remote read its value and the
/// timestamp of the version it came from (zero when the key has none), which is a final-commit
/// timestamp the reader's FFC takes in.
pub type Msg = replica::Msg<FinalCommit, (Option<Value>, Timestamp)>;

/// A deliberately broken variant (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    NaiveSpeculativeReads,
}

/// The mutants `str` knows, with what each breaks.
pub const MUTANTS: &[(&str, &str)] = &[(
    "naive-speculative-reads",
    "reads any pre-committed version within the snapshot, with no cache partition and no OLC/FFC check (STR Fig. 1 and 2)",
)];

impl Mutant {
    fn named(name: &str) -> Option<Mutant> {
        match name {
            "naive-speculative-reads" => Some(Mutant::NaiveSpeculativeReads),
            _ => None,
        }
    }
}

/// Per-key protocol metadata: PreciseClock's `LastReader` and what waits on the key.
pub type KeyMeta = two_phase::KeyMeta<LocalCertification>;

/// What waits for a key's uncommitted versions to resolve: reads, remote transactions'
/// prepares parked by wait-die, and STR's own kind, [`LocalCertification`].
pub type Waiter = two_phase::Waiter<LocalCertification>;

/// A local transaction's local certification, parked here by wait-die.
#[derive(Debug)]
pub struct LocalCertification(pub TxnId);

/// Where a read's value came from, as the coordinator needs it.
pub enum Source {
    /// A final-committed version (or none) with this timestamp.
    Committed(Timestamp),
    /// A local-committed version of this local transaction.
    Speculative(TxnId),
}

enum Phase {
    Executing,
    /// Local certification waits for an older transaction's prepared version (wait-die).
    Certifying {
        writes: Writes,
    },
    /// Local committed (or a read-only transaction done executing): waiting for the proposals
    /// of the remote replicas and for its dependencies.
    LocalCommitted {
        awaiting: BTreeSet<(PartitionId, NodeId)>,
        commit_ts: Timestamp,
        partitions: Vec<PartitionId>,
        local_commit_ts: Timestamp,
    },
}

/// A transaction this node coordinates.
struct CoordTxn {
    client: ClientId,
    snapshot: Timestamp,
    read_only: bool,
    /// May read local-committed versions.
    speculative: bool,
    /// The client asked for a speculative commit.
    wants_spec_commit: bool,
    /// Answered `SpecCommitted`: the outcome is collected with `AwaitOutcome`.
    externalized: bool,
    phase: Phase,
    pending: Option<Pending>,
    read_seq: u32,
    last_active: Timestamp,
    /// The OLC dictionary: read snapshots of the oldest unsafe transactions behind each local
    /// transaction read from.
    olc: Vec<(TxnId, Timestamp)>,
    /// This transaction's own OLC entry, its snapshot, once it wrote a non-local key.
    own_olc: Option<Timestamp>,
    /// Freshest final-commit timestamp read from, directly or through a dependency.
    ffc: Timestamp,
    /// Local-committed transactions read from (data dependencies).
    in_dd: Vec<TxnId>,
    /// Transactions that read from this one.
    out_dd: Vec<TxnId>,
    /// The client's previous transaction, speculatively committed and unresolved at begin.
    in_fd: Option<TxnId>,
    /// Transactions of the same client begun while this one was its latest unresolved
    /// speculative commit. Usually one; several when the client began another transaction
    /// before the previous one committed (retrying a misspeculated transaction, say).
    out_fd: Vec<TxnId>,
    /// A read value held back until min(OLC) ≥ FFC.
    parked_read: Option<Option<Value>>,
    /// Writes to keys this node does not replicate, kept in the cache partition.
    cached: Vec<Key>,
}

impl CoordTxn {
    fn min_olc(&self) -> Timestamp {
        self.olc
            .iter()
            .map(|(_, ts)| *ts)
            .chain(self.own_olc)
            .min()
            .unwrap_or(Timestamp::MAX)
    }

    fn resolved_dependencies(&self) -> bool {
        self.in_dd.is_empty() && self.in_fd.is_none()
    }
}

/// One version in the cache partition: a local unsafe transaction's write to a non-local key.
struct Cached {
    writer: TxnId,
    local_commit_ts: Timestamp,
    value: Option<Value>,
}

/// What the node remembers of a client.
#[derive(Default)]
struct ClientState {
    /// Its next snapshot starts no earlier: its last final or local commit.
    floor: Timestamp,
    /// Its latest speculatively committed transaction, while unresolved.
    last_spec: Option<TxnId>,
    /// How many of its speculatively committed transactions are unresolved.
    unresolved: u32,
}

/// The final outcome of a speculatively committed transaction, until its client asks.
struct SpecOutcome {
    reply: ClientReply,
    at: Timestamp,
}

/// Counters of the speculation mechanisms, for the metrics of §8.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpeculationCounters {
    /// Reads served from a local-committed version.
    pub speculative_reads: u64,
    /// Reads held back because FFC exceeded the smallest OLC.
    pub parked_reads: u64,
    /// Transactions answered `SpecCommitted`.
    pub spec_commits: u64,
    /// Speculatively committed transactions that aborted.
    pub misspeculations: u64,
    /// Transactions aborted because one they depended on aborted or committed past them.
    pub cascaded_aborts: u64,
    /// Events (an abort, or a final commit past its dependants' snapshots) that took at least
    /// one dependant down with them: `cascaded_aborts / cascades` is the mean cascade size.
    pub cascades: u64,
    /// The most transactions one such event took down.
    pub largest_cascade: u64,
    /// Where conflicts end transactions, to tell local from remote contention: aborts at local
    /// certification (write-write or wait-die),
    pub local_certification_aborts: u64,
    /// prepares refused by a remote master,
    pub master_refusals: u64,
    /// local commits that waited for a copy of their partition to end,
    pub local_commits_held_for_copy: u64,
    /// local-committed transactions a slave aborted for a replicated prepare of the same keys,
    pub slave_evictions: u64,
    /// and dependants a final commit doomed because it committed above their snapshot.
    pub overrun_dependants: u64,
}

impl SpeculationCounters {
    /// Note an event that aborted `victims` dependants.
    fn cascade(&mut self, victims: u64) {
        if victims > 0 {
            self.cascaded_aborts += victims;
            self.cascades += 1;
            self.largest_cascade = self.largest_cascade.max(victims);
        }
    }
}

/// One node running STR (or another [`Flavor`] of it).
pub struct Engine<F: Flavor> {
    /// The participant side, transaction ids and the decision log.
    core: Core<LocalCertification, FinalCommit>,
    coordinated: FxHashMap<TxnId, CoordTxn>,
    /// Transactions aborted here, when and why, kept for `gc_retention`: a late prepare is
    /// ignored, and a client whose transaction was aborted between its requests (a cascade)
    /// learns why at its next one.
    aborted: FxHashMap<TxnId, (Timestamp, AbortReason)>,
    /// The cache partition: non-local keys written by local-committed unsafe transactions.
    cache: FxHashMap<Key, Vec<Cached>>,
    /// The cache partition's `LastReader`: the largest snapshot of a local transaction that read
    /// each non-local key. A cached version gets a local-commit timestamp above it, so a
    /// transaction that read the key before the version was cached cannot see it later.
    cache_readers: FxHashMap<Key, Timestamp>,
    clients: FxHashMap<ClientId, ClientState>,
    outcomes: FxHashMap<TxnId, SpecOutcome>,
    /// Local commits waiting for a copy of a partition this node masters to end, in arrival
    /// order (each in [`Phase::Certifying`]).
    held_for_copy: Vec<TxnId>,
    counters: SpeculationCounters,
    mutant: Option<Mutant>,
    flavor: PhantomData<F>,
}

impl<F: Flavor> Engine<F> {
    pub fn store(&self) -> &MvStore<KeyMeta> {
        &self.core.replica.store
    }

    pub fn counters(&self) -> SpeculationCounters {
        self.counters
    }

    fn id(&self) -> NodeId {
        self.core.id()
    }

    /// Whether this node holds an in-sync replica of `partition`: its keys are local (read,
    /// certified and local committed here); the others' go through the cache partition. With
    /// fail-over off, the placement's replicas.
    fn local(&self, partition: PartitionId) -> bool {
        self.core.config().is_in_sync(self.id(), partition)
    }

    fn naive(&self) -> bool {
        self.mutant == Some(Mutant::NaiveSpeculativeReads)
    }

    fn begin(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, read_only: bool, spec: bool) {
        let txn = self.core.ids.allocate(ctx);
        let client = self.clients.entry(pending.client).or_default();
        let snapshot = ctx.now().max(client.floor);
        let in_fd = client
            .last_spec
            .filter(|prev| self.coordinated.contains_key(prev));
        if let Some(prev) = in_fd {
            let prev = self.coordinated.get_mut(&prev).expect("checked");
            prev.out_fd.push(txn);
        }
        self.coordinated.insert(
            txn,
            CoordTxn {
                client: pending.client,
                snapshot,
                read_only,
                speculative: spec && (F::SPECULATIVE_READS || self.naive()),
                wants_spec_commit: false,
                externalized: false,
                phase: Phase::Executing,
                pending: None,
                read_seq: 0,
                last_active: ctx.now(),
                olc: Vec::new(),
                own_olc: None,
                ffc: Timestamp::ZERO,
                in_dd: Vec::new(),
                out_dd: Vec::new(),
                in_fd,
                out_fd: Vec::new(),
                parked_read: None,
                cached: Vec::new(),
            },
        );
        pending.answer(ctx, ClientReply::Begun { txn, snapshot });
    }

    /// Why a transaction this node no longer runs is gone: the reason it was aborted for, if
    /// that is still remembered, else lost (the node restarted, or it was long ago).
    fn why_gone(&self, txn: TxnId) -> AbortReason {
        self.aborted
            .get(&txn)
            .map_or(AbortReason::TransactionLost, |(_, reason)| *reason)
    }

    fn read(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, key: Key) {
        let Some(t) = self.coordinated.get_mut(&txn) else {
            return pending.answer(ctx, ClientReply::Aborted(self.why_gone(txn)));
        };
        if t.pending.is_some() || !matches!(t.phase, Phase::Executing) {
            let why = format!("transaction {txn:?} already has a request in flight");
            return pending.answer(ctx, ClientReply::Rejected(RequestError::Invalid(why)));
        }
        t.pending = Some(pending);
        t.read_seq += 1;
        t.last_active = ctx.now();
        let read = ReadRequest {
            txn,
            seq: t.read_seq,
            key,
            snapshot: t.snapshot,
            speculative: t.speculative,
        };
        let partition = self.core.partition_of(&read.key);
        if self.local(partition) {
            return self.serve_read(ctx, read);
        }
        // A non-local key (this node holds no in-sync replica of it): the cache partition
        // first (§6.2), so a local unsafe transaction's writes are seen together.
        let last_reader = self.cache_readers.entry(read.key.clone()).or_default();
        *last_reader = (*last_reader).max(read.snapshot);
        if read.speculative
            && !self.naive()
            && let Some(c) = self.cached_version(&read.key, read.snapshot)
        {
            let (value, writer) = (c.value.clone(), c.writer);
            return self.read_done(ctx, txn, read.seq, Ok((value, Source::Speculative(writer))));
        }
        self.read_remotely(ctx, read, partition);
    }

    /// The newest cached version of `key` within `snapshot`.
    fn cached_version(&self, key: &Key, snapshot: Timestamp) -> Option<&Cached> {
        self.cache
            .get(key)?
            .iter()
            .filter(|c| c.local_commit_ts <= snapshot)
            .max_by_key(|c| c.local_commit_ts)
    }

    /// Answer a held-back read once the transaction's snapshot can take it: min(OLC) ≥ FFC.
    fn release_read(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let naive = self.naive();
        let Some(t) = self.coordinated.get_mut(&txn) else {
            return;
        };
        if t.parked_read.is_none() {
            return;
        }
        if !naive && t.min_olc() < t.ffc {
            return;
        }
        let value = t.parked_read.take().expect("checked");
        if let Some(pending) = t.pending.take() {
            pending.answer(ctx, ClientReply::Value(value));
        }
    }

    fn commit(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        txn: TxnId,
        writes: Writes,
        speculative: bool,
    ) {
        let Some(t) = self.coordinated.get_mut(&txn) else {
            return pending.answer(ctx, ClientReply::Aborted(self.why_gone(txn)));
        };
        if t.pending.is_some() || !matches!(t.phase, Phase::Executing) {
            let why = format!("transaction {txn:?} already has a request in flight");
            return pending.answer(ctx, ClientReply::Rejected(RequestError::Invalid(why)));
        }
        if t.read_only && !writes.is_empty() {
            let err = RequestError::WriteInReadOnly(txn);
            return pending.answer(ctx, ClientReply::Rejected(err));
        }
        t.pending = Some(pending);
        t.wants_spec_commit = speculative;
        t.last_active = ctx.now();
        if writes.is_empty() {
            // Read-only: nothing to certify, but it may still depend on local-committed
            // transactions or on the client's previous speculative commit (SPSI-4).
            let snapshot = t.snapshot;
            t.phase = Phase::LocalCommitted {
                awaiting: BTreeSet::new(),
                commit_ts: snapshot,
                partitions: Vec::new(),
                local_commit_ts: snapshot,
            };
            if !t.resolved_dependencies() {
                self.externalize(ctx, txn);
            }
            return self.try_final_commit(ctx, txn);
        }
        self.local_commit(ctx, txn, writes);
    }

    /// Local certification and local commit (Alg. 1 l. 17–27), then global certification.
    fn local_commit(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, writes: Writes) {
        let t = self.coordinated.get(&txn).expect("caller checked");
        let (snapshot, speculative) = (t.snapshot, t.speculative);
        let grouped = group_by_partition(&self.core.env.placement, writes);
        if grouped.keys().any(|p| self.core.copy_holds_prepares(*p)) {
            // This node masters a partition it is copying to a replica: what it installed now
            // would miss the copy. It waits, as a prepare there would, and runs again when the
            // copy ends (`copies_ended`).
            let writes = grouped.into_values().flatten().collect();
            let t = self.coordinated.get_mut(&txn).expect("present");
            t.phase = Phase::Certifying { writes };
            self.held_for_copy.push(txn);
            self.counters.local_commits_held_for_copy += 1;
            return;
        }
        let local: BTreeSet<PartitionId> =
            grouped.keys().copied().filter(|p| self.local(*p)).collect();
        let mut depends: Vec<TxnId> = Vec::new();
        for (p, writes) in &grouped {
            let local = local.contains(p);
            for (key, _) in writes {
                // Certifying a key reads its newest versions (or the cache's).
                ctx.charge(Work::reads(1));
                let verdict = if local {
                    self.certify_write(txn, snapshot, speculative, key)
                } else {
                    self.certify_cached(txn, snapshot, speculative, key)
                };
                match verdict {
                    Verdict::Free => {}
                    Verdict::DependsOn(w) => {
                        if !depends.contains(&w) {
                            depends.push(w);
                        }
                    }
                    Verdict::Wait(key) => {
                        let writes = grouped.into_values().flatten().collect();
                        self.park(&key, Waiter::Own(LocalCertification(txn)));
                        let t = self.coordinated.get_mut(&txn).expect("present");
                        t.phase = Phase::Certifying { writes };
                        return;
                    }
                    Verdict::Abort(reason) => {
                        self.counters.local_certification_aborts += 1;
                        return self.abort_txn(ctx, txn, reason);
                    }
                }
            }
        }
        // Certified: propose, install and local commit.
        let mut local_commit_ts = snapshot.next();
        let mut proposals: Vec<(PartitionId, Timestamp)> = Vec::new();
        for (p, writes) in &grouped {
            if local.contains(p) {
                let ts = self.propose(ctx.now(), snapshot, writes);
                local_commit_ts = local_commit_ts.max(ts);
                proposals.push((*p, ts));
            } else {
                for (key, _) in writes {
                    if let Some(ts) = self.cache_readers.get(key) {
                        local_commit_ts = local_commit_ts.max(ts.next());
                    }
                }
            }
        }
        let mut local_writes: Writes = Vec::new();
        let mut cached = Vec::new();
        for (p, writes) in &grouped {
            for (key, value) in writes {
                if local.contains(p) {
                    local_writes.push((key.clone(), value.clone()));
                } else {
                    self.cache.entry(key.clone()).or_default().push(Cached {
                        writer: txn,
                        local_commit_ts,
                        value: value.clone(),
                    });
                    cached.push(key.clone());
                }
            }
        }
        if !local_writes.is_empty() {
            // The local replicas' vote: durable before the prepares that follow leave.
            let state = VersionState::LocalCommitted;
            (self.core.replica).install(ctx, txn, snapshot, local_commit_ts, state, &local_writes);
        }
        // Overwriting a local-committed version in the snapshot depends on it as a read would.
        let mut dependency_state = Vec::new();
        for w in &depends {
            let wt = self.coordinated.get_mut(w).expect("certify checked");
            if !wt.out_dd.contains(&txn) {
                wt.out_dd.push(txn);
            }
            dependency_state.push((*w, wt.min_olc(), wt.ffc));
        }
        // A vote from every other replica in sync, at the partition's epoch now: a change of
        // the epoch before they are all in aborts the transaction (`reconfigured`).
        let me = self.id();
        let config = self.core.config();
        let mut awaiting = BTreeSet::new();
        for p in grouped.keys() {
            for &n in config.in_sync(*p) {
                if n != me {
                    awaiting.insert((*p, n));
                }
            }
        }
        let partitions: Vec<PartitionId> = grouped.keys().copied().collect();
        let commit_ts = proposals
            .iter()
            .map(|(_, ts)| *ts)
            .fold(local_commit_ts, Timestamp::max);
        let t = self.coordinated.get_mut(&txn).expect("present");
        for (w, olc, ffc) in dependency_state {
            if !t.in_dd.contains(&w) {
                t.in_dd.push(w);
            }
            if olc < Timestamp::MAX {
                t.olc.push((w, olc));
            }
            t.ffc = t.ffc.max(ffc);
        }
        if !cached.is_empty() {
            // Unsafe (Alg. 1 l. 24–25): it may conflict remotely with what it cannot see.
            t.own_olc = Some(snapshot);
        }
        t.cached = cached;
        t.phase = Phase::LocalCommitted {
            awaiting,
            commit_ts,
            partitions,
            local_commit_ts,
        };
        let client = t.client;
        let floor = &mut self.clients.entry(client).or_default().floor;
        *floor = (*floor).max(local_commit_ts);
        self.externalize(ctx, txn);
        // Global certification (Alg. 1 l. 28): one prepare per remote master; partitions this
        // node masters replicate straight to their slaves.
        self.send_prepares(ctx, txn, snapshot, grouped);
        ctx.set_timer(
            self.core.env.options.participant_timeout,
            Timer::CommitTimeout(txn),
        );
        self.try_final_commit(ctx, txn);
    }

    /// Answer a speculative commit request at local commit, if the client's chain has room.
    fn externalize(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let t = self.coordinated.get_mut(&txn).expect("caller checked");
        let Phase::LocalCommitted {
            local_commit_ts, ..
        } = t.phase
        else {
            return;
        };
        if !t.wants_spec_commit || t.externalized {
            return;
        }
        let client = self.clients.entry(t.client).or_default();
        if client.unresolved >= F::MAX_CHAIN {
            return;
        }
        let Some(pending) = t.pending.take() else {
            return;
        };
        client.unresolved += 1;
        client.last_spec = Some(txn);
        t.externalized = true;
        self.counters.spec_commits += 1;
        pending.answer(ctx, ClientReply::SpecCommitted { local_commit_ts });
    }

    /// Certify one write of `txn` against this replica's versions of `key` (Alg. 2 l. 16–18,
    /// with wait-die on prepared versions).
    fn certify_write(
        &self,
        txn: TxnId,
        snapshot: Timestamp,
        speculative: bool,
        key: &Key,
    ) -> Verdict {
        let Some(entry) = self.core.replica.store.get(key) else {
            return Verdict::Free;
        };
        if entry.latest_committed().is_some_and(|v| v.ts > snapshot) {
            return Verdict::Abort(AbortReason::WriteWriteConflict);
        }
        let local = txn.coordinator() == self.id();
        let mut verdict = Verdict::Free;
        for v in entry.uncommitted() {
            if v.writer == txn {
                continue;
            }
            let ours = v.state == VersionState::LocalCommitted
                && local
                && self.coordinated.contains_key(&v.writer);
            if ours && speculative && v.ts <= snapshot {
                // In the snapshot: this write is ordered after it and depends on it.
                verdict = Verdict::DependsOn(v.writer);
                continue;
            }
            if ours && v.ts > snapshot {
                // A concurrent local transaction got there first.
                return Verdict::Abort(AbortReason::WriteWriteConflict);
            }
            if self.core.may_wait(txn, snapshot, v.writer) {
                return Verdict::Wait(key.clone());
            }
            return Verdict::Abort(AbortReason::WaitDie);
        }
        verdict
    }

    /// Certify a write to a non-local key against the cache partition.
    fn certify_cached(
        &self,
        txn: TxnId,
        snapshot: Timestamp,
        speculative: bool,
        key: &Key,
    ) -> Verdict {
        let Some(versions) = self.cache.get(key) else {
            return Verdict::Free;
        };
        let mut verdict = Verdict::Free;
        for c in versions.iter().filter(|c| c.writer != txn) {
            if !speculative {
                // The key's master certifies it; nothing local to add.
                continue;
            }
            if c.local_commit_ts > snapshot {
                return Verdict::Abort(AbortReason::WriteWriteConflict);
            }
            verdict = Verdict::DependsOn(c.writer);
        }
        verdict
    }

    /// Final commit once every replica proposed and every dependency final committed
    /// (Alg. 1 l. 29–34).
    fn try_final_commit(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(t) = self.coordinated.get(&txn) else {
            return;
        };
        let Phase::LocalCommitted { awaiting, .. } = &t.phase else {
            return;
        };
        if awaiting.is_empty() && t.resolved_dependencies() {
            self.final_commit(ctx, txn);
        }
    }

    /// Alg. 1 `commit` (l. 39–50).
    fn final_commit(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let t = self.coordinated.remove(&txn).expect("caller checked");
        let Phase::LocalCommitted {
            commit_ts,
            partitions,
            ..
        } = t.phase
        else {
            unreachable!("final commit from the local-committed phase only")
        };
        // Dependants whose snapshot lies below the commit timestamp saw a version that is not
        // in their snapshot after all (SPSI-1): they abort. The others drop the dependency.
        let mut recheck = Vec::new();
        let mut doomed = Vec::new();
        for r in &t.out_dd {
            let Some(rt) = self.coordinated.get_mut(r) else {
                continue;
            };
            if !rt.in_dd.contains(&txn) {
                continue;
            }
            if rt.snapshot >= commit_ts {
                rt.in_dd.retain(|w| *w != txn);
                rt.olc.retain(|(w, _)| *w != txn);
                rt.ffc = rt.ffc.max(commit_ts);
                recheck.push(*r);
            } else {
                doomed.push(*r);
            }
        }
        for &next in &t.out_fd {
            if let Some(nt) = self.coordinated.get_mut(&next)
                && nt.in_fd == Some(txn)
            {
                nt.in_fd = None;
                recheck.push(next);
            }
        }
        self.resolved(t.client, txn, t.externalized);
        let client = self.clients.entry(t.client).or_default();
        client.floor = client.floor.max(commit_ts);
        let read_floor = t
            .cached
            .iter()
            .filter_map(|k| self.cache_readers.get(k))
            .fold(Timestamp::ZERO, |a, b| a.max(*b));
        self.uncache(txn, &t.cached);
        let reply = ClientReply::Committed { commit_ts };
        self.deliver(ctx, txn, t.externalized, t.pending, reply);
        // The decision is logged before anyone hears of it, so a replica that asks later learns
        // the same outcome. Its read floor matters only elsewhere: the cache partition holds
        // keys this node does not replicate.
        let decision = FinalCommit {
            commit_ts,
            read_floor,
        };
        let here = FinalCommit {
            commit_ts,
            read_floor: Timestamp::ZERO,
        };
        self.decide(ctx, txn, decision, here, &partitions);
        // Every transaction this commit dooms, and their dependants, form one cascade.
        let mut victims = 0;
        self.counters.overrun_dependants += doomed.len() as u64;
        for r in doomed {
            victims += self.abort_chain(ctx, r, AbortReason::CascadingAbort);
        }
        self.counters.cascade(victims);
        for r in recheck {
            self.release_read(ctx, r);
            self.try_final_commit(ctx, r);
        }
    }

    /// Abort `txn` and, transitively, everything that depends on it (Alg. 1 l. 51–54).
    fn abort_txn(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        let aborted = self.abort_chain(ctx, txn, reason);
        self.counters.cascade(aborted.saturating_sub(1));
    }

    /// Abort `txn` and everything that depends on it; returns how many transactions that was.
    fn abort_chain(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) -> u64 {
        let mut aborted = 0;
        let mut work = vec![(txn, reason)];
        while let Some((id, reason)) = work.pop() {
            let Some(t) = self.coordinated.remove(&id) else {
                continue;
            };
            aborted += 1;
            for r in &t.out_dd {
                work.push((*r, AbortReason::CascadingAbort));
            }
            for &next in &t.out_fd {
                work.push((next, AbortReason::CascadingAbort));
            }
            self.aborted.insert(id, (ctx.now(), reason));
            self.core.replica.parked.remove(&id);
            self.uncache(id, &t.cached);
            if let Phase::LocalCommitted { partitions, .. } = &t.phase {
                for node in self.core.config().replicas_of(partitions) {
                    if node != self.id() {
                        ctx.send(node, Msg::Abort { txn: id });
                    }
                }
            }
            self.resolved(t.client, id, t.externalized);
            if t.externalized {
                self.counters.misspeculations += 1;
            }
            self.deliver(
                ctx,
                id,
                t.externalized,
                t.pending,
                ClientReply::Aborted(reason),
            );
            // Last: waking the readers of its versions may run other transactions' steps.
            self.apply_abort(ctx, id);
        }
        aborted
    }

    /// `txn` of `client` reached its final outcome: it no longer counts in the client's chain.
    fn resolved(&mut self, client: ClientId, txn: TxnId, externalized: bool) {
        let c = self.clients.entry(client).or_default();
        if c.last_spec == Some(txn) {
            c.last_spec = None;
        }
        if externalized {
            c.unresolved = c.unresolved.saturating_sub(1);
        }
    }

    /// Give the client the final outcome: at once, or when it asks, after a speculative commit.
    fn deliver(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        externalized: bool,
        pending: Option<Pending>,
        reply: ClientReply,
    ) {
        match pending {
            Some(p) => p.answer(ctx, reply),
            None if externalized => {
                let at = ctx.now();
                self.outcomes.insert(txn, SpecOutcome { reply, at });
            }
            None => {}
        }
    }

    fn await_outcome(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId) {
        if let Some(outcome) = self.outcomes.remove(&txn) {
            let commit_ts = match outcome.reply {
                ClientReply::Committed { commit_ts } => Some(commit_ts),
                _ => None,
            };
            let decided_ago_us = ctx.now().0.saturating_sub(outcome.at.0);
            let reply = ClientReply::Resolved {
                commit_ts,
                decided_ago_us,
            };
            return pending.answer(ctx, reply);
        }
        match self.coordinated.get_mut(&txn) {
            Some(t) if t.externalized && t.pending.is_none() => t.pending = Some(pending),
            _ => {
                let err = RequestError::UnknownTransaction(txn);
                pending.answer(ctx, ClientReply::Rejected(err));
            }
        }
    }

    fn uncache(&mut self, txn: TxnId, keys: &[Key]) {
        for key in keys {
            if let Some(versions) = self.cache.get_mut(key) {
                versions.retain(|c| c.writer != txn);
                if versions.is_empty() {
                    self.cache.remove(key);
                }
            }
        }
    }
}

/// What certifying one write found.
enum Verdict {
    Free,
    /// A local-committed version within the snapshot: allowed, as a dependency on its writer.
    DependsOn(TxnId),
    /// An older transaction holds the key: wait for its outcome (wait-die).
    Wait(Key),
    Abort(AbortReason),
}

impl<F: Flavor> Rules for Engine<F> {
    type Decision = FinalCommit;
    type Remote = (Option<Value>, Timestamp);
    type Local = (Option<Value>, Source);
    type Own = LocalCertification;

    const COORDINATOR_INSTALLS: bool = true;
    const CONVENTIONS: Conventions = Conventions {
        one_proposal_per_master: false,
        aborts_own_overdue_locally: true,
        logs_decision_first: false,
    };

    fn core(&self) -> &Core<LocalCertification, FinalCommit> {
        &self.core
    }

    fn core_mut(&mut self) -> &mut Core<LocalCertification, FinalCommit> {
        &mut self.core
    }

    /// Alg. 2 `readFrom`: the newest version within the snapshot, which may be a same-node
    /// transaction's local-committed one for a speculative local reader; any other
    /// uncommitted version within the snapshot makes the read wait.
    fn visible(&mut self, read: &ReadRequest) -> Visible<(Option<Value>, Source)> {
        let naive = self.naive();
        let local = read.txn.coordinator() == self.id();
        let entry = self.core.replica.store.entry(&read.key);
        entry.meta.last_reader = entry.meta.last_reader.max(read.snapshot);
        // The newest uncommitted version within the snapshot decides: readable speculatively,
        // or a reason to wait for its outcome.
        let mut blocked = false;
        let mut speculative: Option<(Timestamp, TxnId, Option<Value>)> = None;
        for v in entry.uncommitted() {
            if v.writer == read.txn || v.ts > read.snapshot {
                continue;
            }
            let readable = naive
                || (v.state == VersionState::LocalCommitted
                    && local
                    && read.speculative
                    && self.coordinated.contains_key(&v.writer));
            if !readable {
                blocked = true;
            } else if speculative.as_ref().is_none_or(|(ts, ..)| v.ts > *ts) {
                speculative = Some((v.ts, v.writer, v.value.clone()));
            }
        }
        if blocked {
            return Visible::Wait;
        }
        let committed = entry.read_at(read.snapshot);
        Visible::Read(match (speculative, committed) {
            (Some((ts, writer, value)), c) if c.is_none_or(|c| c.ts <= ts) => {
                if local && self.coordinated.contains_key(&writer) {
                    (value, Source::Speculative(writer))
                } else {
                    // Only the naive mutant gets here: a prepared version read as if final.
                    (value, Source::Committed(ts))
                }
            }
            (_, Some(c)) => (c.value.clone(), Source::Committed(c.ts)),
            (_, None) => (None, Source::Committed(Timestamp::ZERO)),
        })
    }

    fn to_remote((value, source): (Option<Value>, Source)) -> (Option<Value>, Timestamp) {
        match source {
            Source::Committed(ts) => (value, ts),
            // Remote readers are never served speculatively.
            Source::Speculative(_) => unreachable!("speculative read served to a remote reader"),
        }
    }

    fn from_remote((value, ts): (Option<Value>, Timestamp)) -> (Option<Value>, Source) {
        (value, Source::Committed(ts))
    }

    /// A read's value reached the coordinator (Alg. 1 l. 13–15).
    fn read_done(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        seq: u32,
        result: Result<(Option<Value>, Source), AbortReason>,
    ) {
        let Some(t) = self.coordinated.get(&txn) else {
            return;
        };
        if t.read_seq != seq || !matches!(t.phase, Phase::Executing) || t.pending.is_none() {
            return;
        }
        let (value, source) = match result {
            Ok(r) => r,
            Err(reason) => return self.abort_txn(ctx, txn, reason),
        };
        let (olc_entry, ffc) = match source {
            Source::Committed(ts) => (None, ts),
            Source::Speculative(writer) => {
                let w = self
                    .coordinated
                    .get_mut(&writer)
                    .expect("served only if known");
                if !w.out_dd.contains(&txn) {
                    w.out_dd.push(txn);
                }
                let olc = w.min_olc();
                self.counters.speculative_reads += 1;
                ((olc < Timestamp::MAX).then_some((writer, olc)), w.ffc)
            }
        };
        let t = self.coordinated.get_mut(&txn).expect("present");
        t.last_active = ctx.now();
        if let Source::Speculative(writer) = source
            && !t.in_dd.contains(&writer)
        {
            t.in_dd.push(writer);
        }
        if let Some(entry) = olc_entry {
            t.olc.push(entry);
        }
        t.ffc = t.ffc.max(ffc);
        t.parked_read = Some(value);
        if t.min_olc() < t.ffc && !self.naive() {
            self.counters.parked_reads += 1;
        }
        self.release_read(ctx, txn);
    }

    fn aborted_here(&self, txn: TxnId) -> bool {
        self.aborted.contains_key(&txn)
    }

    /// A master certifies a remote transaction's write as local certification would, without
    /// speculation: the coordinator's own replicas took care of that.
    fn certify(&self, txn: TxnId, snapshot: Timestamp, key: &Key) -> Certified {
        match self.certify_write(txn, snapshot, false, key) {
            Verdict::Free | Verdict::DependsOn(_) => Certified::Free,
            Verdict::Wait(key) => Certified::Wait(key),
            Verdict::Abort(reason) => Certified::Abort(reason),
        }
    }

    fn refusing(&mut self, _txn: TxnId, _reason: AbortReason) {
        self.counters.master_refusals += 1;
    }

    fn precise_clock(&self) -> bool {
        F::PRECISE_CLOCK
    }

    /// A slave about to install a replicated prepare (Alg. 2 l. 31–36) first aborts its own
    /// local-committed transactions that conflict with it: the master ordered this one first.
    fn replicated_prepare_arrives(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, writes: &Writes) {
        let me = self.id();
        let mut losers: Vec<TxnId> = Vec::new();
        for (key, _) in writes {
            if let Some(entry) = self.core.replica.store.get(key) {
                for v in entry.uncommitted() {
                    if v.writer != txn
                        && v.writer.coordinator() == me
                        && v.state == VersionState::LocalCommitted
                        && !losers.contains(&v.writer)
                    {
                        losers.push(v.writer);
                    }
                }
            }
        }
        for loser in losers {
            self.counters.slave_evictions += 1;
            self.abort_txn(ctx, loser, AbortReason::WriteWriteConflict);
        }
    }

    fn commit_ts(decision: &FinalCommit) -> Timestamp {
        decision.commit_ts
    }

    /// Before anyone can overwrite a version: a later writer's proposal then lands above every
    /// snapshot that read it from the cache partition (SPSI-1).
    fn committing(decision: &FinalCommit, entry: &mut KeyEntry<KeyMeta>) {
        entry.meta.last_reader = entry.meta.last_reader.max(decision.read_floor);
    }

    fn aborting(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) -> bool {
        self.aborted
            .entry(txn)
            .or_insert((ctx.now(), AbortReason::CascadingAbort));
        if !self.coordinated.contains_key(&txn) {
            return false;
        }
        // Our own transaction, still running: abort it with its dependants.
        self.core.replica.parked.remove(&txn);
        self.abort_txn(ctx, txn, AbortReason::TransactionLost);
        true
    }

    /// Copies ended: the local commits held for them run again (those of partitions still being
    /// copied are held again).
    fn copies_ended(&mut self, ctx: &mut Ctx<'_, Self>) {
        for txn in std::mem::take(&mut self.held_for_copy) {
            self.wake_own(ctx, LocalCertification(txn));
        }
    }

    /// A local certification parked by wait-die runs again.
    fn wake_own(&mut self, ctx: &mut Ctx<'_, Self>, LocalCertification(txn): LocalCertification) {
        let Some(t) = self.coordinated.get_mut(&txn) else {
            return;
        };
        let Phase::Certifying { writes } = std::mem::replace(&mut t.phase, Phase::Executing) else {
            return;
        };
        self.local_commit(ctx, txn, writes);
    }

    fn running(&self, txn: TxnId) -> bool {
        self.coordinated.contains_key(&txn)
    }

    /// A remote replica's proposal reached the coordinator.
    fn prepared(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        partition: PartitionId,
        epoch: Epoch,
        from: NodeId,
        ts: Timestamp,
    ) {
        // A transaction still running was prepared at the partition's epoch now: a change
        // before its last vote aborts it (`reconfigured`).
        if epoch != self.core.config().epoch(partition) {
            return;
        }
        let Some(t) = self.coordinated.get_mut(&txn) else {
            return;
        };
        let Phase::LocalCommitted {
            awaiting,
            commit_ts,
            ..
        } = &mut t.phase
        else {
            return;
        };
        if awaiting.remove(&(partition, from)) {
            *commit_ts = (*commit_ts).max(ts);
        }
        self.try_final_commit(ctx, txn);
    }

    fn abort_coordinated(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, reason: AbortReason) {
        self.abort_txn(ctx, txn, reason);
    }

    /// A transaction still waiting for votes on a partition whose configuration changed was
    /// prepared against replicas that may no longer be the partition's: it aborts (with its
    /// dependants), to be retried. One with every vote in commits as it would have: the
    /// replicas in sync now are among those that voted, or were copied after it resolved.
    fn reconfigured(&mut self, ctx: &mut Ctx<'_, Self>, changed: &[PartitionId]) {
        let mut hit: Vec<TxnId> = self
            .coordinated
            .iter()
            .filter(|(_, t)| match &t.phase {
                Phase::LocalCommitted {
                    awaiting,
                    partitions,
                    ..
                } => !awaiting.is_empty() && partitions.iter().any(|p| changed.contains(p)),
                Phase::Executing | Phase::Certifying { .. } => false,
            })
            .map(|(txn, _)| *txn)
            .collect();
        hit.sort();
        for txn in hit {
            self.abort_txn(ctx, txn, AbortReason::Reconfigured);
        }
    }

    fn commit_timed_out(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let waiting_for_replicas = self.coordinated.get(&txn).is_some_and(
            |t| matches!(&t.phase, Phase::LocalCommitted { awaiting, .. } if !awaiting.is_empty()),
        );
        if waiting_for_replicas {
            self.abort_txn(ctx, txn, AbortReason::Timeout);
        }
    }

    fn expire(&mut self, floor: Timestamp, idle_limit: Timestamp) {
        // Transactions whose client vanished mid-execution are dropped; nothing of theirs was
        // installed anywhere, since writes travel only with the commit. Nobody depends on an
        // executing transaction.
        self.coordinated.retain(|_, t| {
            !(matches!(t.phase, Phase::Executing)
                && t.pending.is_none()
                && t.last_active < idle_limit)
        });
        self.outcomes.retain(|_, o| o.at >= idle_limit);
        self.aborted.retain(|_, (at, _)| *at >= floor);
    }

    fn running_snapshots(&self) -> impl Iterator<Item = Timestamp> + '_ {
        self.coordinated.values().map(|t| t.snapshot)
    }

    fn collected(&mut self, watermark: Timestamp) {
        // Snapshots below the watermark belong to no running transaction of this node.
        self.cache_readers.retain(|_, ts| *ts >= watermark);
    }
}

impl<F: Flavor> Protocol for Engine<F> {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record<FinalCommit>;

    fn new(env: &NodeEnv) -> Self {
        Engine {
            core: Core::new(env, FAILS_OVER),
            coordinated: FxHashMap::default(),
            aborted: FxHashMap::default(),
            cache: FxHashMap::default(),
            cache_readers: FxHashMap::default(),
            clients: FxHashMap::default(),
            outcomes: FxHashMap::default(),
            held_for_copy: Vec::new(),
            counters: SpeculationCounters::default(),
            mutant: env.options.mutant.as_deref().and_then(Mutant::named),
            flavor: PhantomData,
        }
    }

    /// Durable: the store (local-committed versions included, as prepare records of their
    /// node), prepare records, decisions, id reservations, the serving lease and the
    /// watermark. Everything speculative — the cache partition, dependencies, speculative
    /// outcomes — is volatile: a local-committed transaction whose coordinator restarted is
    /// forgotten there, and the termination protocol aborts it.
    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Self::Record>) -> Self {
        Engine {
            core: Core::recover(env, FAILS_OVER, records),
            ..Engine::new(env)
        }
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Self::Record)) {
        self.core.checkpoint(emit);
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.start(ctx);
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        let mut left = self.core.leftovers();
        left.push((
            "local_commits_held_for_copy",
            self.held_for_copy.len() as u64,
        ));
        left
    }

    fn leader(&self) -> Option<NodeId> {
        self.core.membership.leader()
    }

    fn master_of(&self, partition: PartitionId) -> Option<NodeId> {
        self.core.master_of(partition)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        let mut counters = vec![
            ("speculative_reads", c.speculative_reads),
            ("parked_reads", c.parked_reads),
            ("spec_commits", c.spec_commits),
            ("misspeculations", c.misspeculations),
            ("cascaded_aborts", c.cascaded_aborts),
            ("cascades", c.cascades),
            ("largest_cascade", c.largest_cascade),
            ("local_certification_aborts", c.local_certification_aborts),
            ("master_refusals", c.master_refusals),
            ("local_commits_held_for_copy", c.local_commits_held_for_copy),
            ("slave_evictions", c.slave_evictions),
            ("overrun_dependants", c.overrun_dependants),
        ];
        counters.extend(self.core.counters());
        counters
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        let pending = Pending::of(&request);
        match request.op {
            ClientOp::Begin {
                read_only,
                speculative,
                ..
            } => self.begin(ctx, pending, read_only, speculative),
            ClientOp::Read { txn, key } => self.read(ctx, pending, txn, key),
            ClientOp::Commit {
                txn,
                writes,
                speculative,
            } => self.commit(ctx, pending, txn, writes, speculative),
            ClientOp::AwaitOutcome { txn } => self.await_outcome(ctx, pending, txn),
            // The runtime answers the first (`deliver_client`); the one-shot wrapper
            // (`AtCoordinator`) runs the second as interactive requests.
            ClientOp::NodeStats | ClientOp::Execute { .. } => {}
            ClientOp::Abort { txn } => {
                if let Some(t) = self.coordinated.get(&txn)
                    && !matches!(t.phase, Phase::Executing)
                {
                    let why = format!("transaction {txn:?} is already committing");
                    return pending.answer(ctx, ClientReply::Rejected(RequestError::Invalid(why)));
                }
                if let Some(t) = self.coordinated.remove(&txn) {
                    self.resolved(t.client, txn, false);
                }
                pending.answer(ctx, ClientReply::Aborted(AbortReason::UserRollback));
            }
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        self.handle_message(ctx, from, msg);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        self.handle_timer(ctx, timer);
    }

    /// Forget the client's session floor and chain bookkeeping. A speculative commit of its
    /// that resolves later re-creates an empty entry, which stays: clients rarely leave with
    /// commits unresolved.
    fn on_client_gone(&mut self, _ctx: &mut Ctx<'_, Self>, client: ClientId) {
        self.clients.remove(&client);
    }
}
