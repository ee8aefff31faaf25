//! The timestamp schemes of the lock-and-2PC engine: where commit timestamps come from and what
//! declared read-only transactions read. [`LockCommit`](super::LockCommit) is generic over one
//! [`TimestampScheme`] per flavor ([`Flavor::Scheme`](super::Flavor::Scheme), static dispatch)
//! and asks it at the hooks below instead of branching on the scheme; each scheme keeps its own
//! state and brings its own messages and log records, so that a new scheme is a new module
//! and the engine does not change.
//!
//! * [`Single`] (here): one version is read, the newest. Each participant proposes a timestamp
//!   above every version it applied and the commit takes the largest; read-only transactions
//!   run as the flavor's [`ReadOnly`](super::ReadOnly) says. No message or record of its own.
//! * DST's decentralized scalar timestamps, `dst_occ::Dst` (`dst-occ`, `dst-2pl`): hybrid
//!   commit timestamps above every tuple timestamp read or locked, installed into every tuple
//!   read and written; declared read-only transactions read a snapshot at a timestamp of their
//!   own, claiming each tuple and waiting for at most one writer.
//! * GTS's timestamp oracle, `gts::GtsScheme` (`gts`): commit timestamps fetched from the
//!   oracle once the write set is locked and before the reads are validated, released once
//!   applied everywhere; declared read-only transactions read at the oracle's stable timestamp.
//! * VTS's vector timestamps, `vts::VtsScheme` (`vts`): versions tagged ⟨coordinator : LocalTS⟩
//!   at the decision, tags installed at the oracle once applied everywhere; declared read-only
//!   transactions read the versions the oracle's stable vector admits.
//!
//! Under DST, GTS and VTS ([`TimestampScheme::SNAPSHOTS`]) a declared read-only transaction
//! commits with no message, at its snapshot.
//!
//! # Messages and records
//!
//! A scheme's own messages (an oracle's traffic, read horizons, VTS's read at a vector) are its
//! type [`TimestampScheme::Msg`], which the engine carries in [`Msg::Scheme`] and hands to
//! [`TimestampScheme::handle`] without looking inside; its own log records are
//! [`TimestampScheme::Record`], carried in [`Record::Scheme`] and handed to
//! [`TimestampScheme::replay`]. A scheme with none says [`Empty`], which has no value, so that
//! such a message cannot even be decoded at a node of that scheme. Both show unwrapped in a
//! trace (the engine's `Debug`), as the scheme names them.
//!
//! The engine's own messages keep four fields whose meaning is the scheme's, so that a scheme
//! needs no message of its own for what every transaction does: the snapshot of a read
//! (`Read.snapshot`, served by [`TimestampScheme::serve_snapshot_read`]), the tag of a version
//! read and of a commit (`ReadReply.tag`, `Decide.tag`: a counter, 0 for none) and what a yes
//! vote carries of the versions it overwrites (`Vote.deps`, per-node counters,
//! [`Deps`]). Under [`Single`] they are empty.
//!
//! DST and GTS collect garbage below read horizons the same way (`Horizons`), each announcing
//! them in a message of its own (`HorizonMsg`): a horizon means something only to the scheme
//! that keeps versions for its readers, and VTS announces a vector instead.
//!
//! # Hooks
//!
//! At a coordinator: the transaction's timestamp at `Begin`, or the oracle to fetch the stable
//! value from and the message that asks it ([`TimestampScheme::begin`]); the message a read
//! sends ([`TimestampScheme::read`]) and what its reply adds
//! ([`TimestampScheme::read_returned`]); where the commit timestamp starts
//! ([`TimestampScheme::commit_ts_start`]) and what each vote adds ([`TimestampScheme::voted`]);
//! a round before validation and decision ([`TimestampScheme::before_decision`]); the
//! decision's tag ([`TimestampScheme::tag_decision`]); what is owed once every write replica
//! applied a commit ([`TimestampScheme::owes_applied`], [`TimestampScheme::applied_everywhere`])
//! and after an abort ([`TimestampScheme::aborted`]); the timestamp of a commit with nothing to
//! order ([`TimestampScheme::empty_commit_ts`]); a commit told to a client
//! ([`TimestampScheme::told_commit`]); the tag a decision resent carries
//! ([`TimestampScheme::decision_tag`]).
//!
//! At a participant: the tag a read reply carries ([`TimestampScheme::version_tag`]); serving a
//! snapshot read ([`TimestampScheme::serve_snapshot_read`]) and the reads parked behind a writer
//! once it releases ([`TimestampScheme::released`]); what a yes vote proposes and carries
//! ([`TimestampScheme::proposal`], [`TimestampScheme::overwritten`]); `occ`'s validation
//! ([`TimestampScheme::validated`]); a commit before it installs
//! ([`TimestampScheme::committing`]) and each key it installs ([`TimestampScheme::installed`]).
//!
//! Node-wide: the scheme's own messages ([`TimestampScheme::handle`]); the periodic tick's
//! duties and garbage collection ([`TimestampScheme::tick`],
//! [`TimestampScheme::collect_garbage`]); recovery records, replay and checkpoint
//! ([`TimestampScheme::replay`], [`TimestampScheme::recovered`],
//! [`TimestampScheme::checkpoint`]); counters ([`TimestampScheme::counters`]).
//!
//! # Messages to this node
//!
//! The engine handles a message it sends to its own node at once, inside the handler sending
//! it. A hook does the same with the scheme's own messages (an oracle on a node that also
//! coordinates); the others it sends to this node (a read's reply, GTS's issued timestamp) go
//! into its [`Mail`], which the engine handles, in order, as soon as the hook returns.

use super::{Coord, Msg, Mutant, Participant, Record, Timer};
use crate::common::lock_sets::LockSets;
use crate::common::membership::{Block, Configuration};
use crate::common::replica::{DecisionLog, Writes};
use crate::common::two_phase::GC_BATCH;
use crate::common::vclock::Deps;
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientId, Key, NodeId, Timestamp, TxnId};
use rustc_hash::FxHashMap;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;

/// A node of the engine running scheme `S`, whatever its flavor (what a hook's context is for).
pub trait Node<S: TimestampScheme>:
    Protocol<Msg = Msg<S::Msg>, Timer = Timer, Record = Record<S::Record>>
{
}

impl<S, P> Node<S> for P
where
    S: TimestampScheme,
    P: Protocol<Msg = Msg<S::Msg>, Timer = Timer, Record = Record<S::Record>>,
{
}

/// Messages to this node a hook leaves to the engine, handled in order once it returns (see
/// the module docs); `M` is the scheme's own message type.
pub type Mail<M> = Vec<Msg<M>>;

/// Send `msg` to `to`, or, when `to` is this node (`me`), leave it to the engine.
pub(crate) fn send_or_mail<M, N: Protocol<Msg = Msg<M>>>(
    ctx: &mut Ctx<'_, N>,
    me: NodeId,
    to: NodeId,
    msg: Msg<M>,
    mail: &mut Mail<M>,
) {
    if to == me {
        mail.push(msg);
    } else {
        ctx.send(to, msg);
    }
}

/// How a transaction begins (`M`: the scheme's own message type).
pub enum Begin<M> {
    /// At this timestamp, answered at once.
    At(Timestamp),
    /// Once the stable timestamp (vector) this message asks the node named here for arrives
    /// (the scheme's handler answers the client); until then the timestamp is zero.
    FetchStable(NodeId, M),
}

/// What the engine does once a scheme handled one of its messages.
pub enum Then {
    Nothing,
    /// Go on committing the transaction: validate its reads, or decide.
    GoOn(TxnId),
    /// Abort the transaction.
    Abort(TxnId, AbortReason),
}

/// The coordinator's side of the engine a scheme's message handler may use.
pub struct Parts<'a, T> {
    pub(crate) me: NodeId,
    pub(crate) store: &'a MvStore<Timestamp>,
    pub(crate) coord: &'a mut FxHashMap<TxnId, Coord<T>>,
    pub(crate) decided: &'a DecisionLog<Timestamp>,
    /// Whether this node holds a lease now (always, without fail-over): a single-node service
    /// such as GTS's oracle acts only while it does, so that a successor appointed after its
    /// eviction never overlaps with it.
    pub(crate) serving: bool,
}

impl<T> Parts<'_, T> {
    /// The same parts, for a nested call.
    pub(crate) fn reborrow(&mut self) -> Parts<'_, T> {
        Parts {
            me: self.me,
            store: self.store,
            coord: &mut *self.coord,
            decided: self.decided,
            serving: self.serving,
        }
    }

    /// The commit of `txn` decided here and not yet applied by every write replica: its
    /// timestamp and the replicas that have not acknowledged it.
    pub(crate) fn unapplied(&self, txn: TxnId) -> Option<(Timestamp, Vec<NodeId>)> {
        self.decided
            .iter()
            .find(|(t, _, _)| **t == txn)
            .map(|(_, commit, replicas)| (*commit, replicas.to_vec()))
    }
}

/// The participant's side of the engine a snapshot read may use.
pub struct Participating<'a> {
    pub(crate) me: NodeId,
    pub(crate) store: &'a mut MvStore<Timestamp>,
    pub(crate) locks: &'a LockSets<Timestamp>,
    pub(crate) participants: &'a FxHashMap<TxnId, Participant>,
}

/// A read-only read at a snapshot timestamp, at the master of its key.
pub struct SnapshotRead {
    pub(crate) txn: TxnId,
    pub(crate) seq: u32,
    pub(crate) key: Key,
    pub(crate) snapshot: Timestamp,
}

/// Answer `read` with the newest committed version at or below its snapshot (DST after its
/// claim and wait; GTS at once: every version at or below a stable timestamp is installed).
pub(crate) fn answer_snapshot_read<M, N: Protocol<Msg = Msg<M>>>(
    ctx: &mut Ctx<'_, N>,
    me: NodeId,
    store: &MvStore<Timestamp>,
    read: SnapshotRead,
    mail: &mut Mail<M>,
) {
    ctx.charge(Work::reads(1));
    let version = store.get(&read.key).and_then(|e| e.read_at(read.snapshot));
    let msg = Msg::ReadReply {
        txn: read.txn,
        seq: read.seq,
        value: version.and_then(|v| v.value.clone()),
        version: version.map(|v| v.writer),
        ts: version.map_or(Timestamp::ZERO, |v| v.ts),
        tag: 0,
    };
    send_or_mail(ctx, me, read.txn.coordinator(), msg, mail);
}

/// The read of `key` a coordinator sends, at `snapshot` if it is one.
pub(crate) fn read_message<M>(
    txn: TxnId,
    seq: u32,
    key: Key,
    prio: Timestamp,
    snapshot: Option<Timestamp>,
) -> Msg<M> {
    Msg::Read {
        txn,
        seq,
        key,
        prio,
        snapshot,
    }
}

/// Where commit timestamps come from and what declared read-only transactions read: the
/// hooks the engine asks (see the module docs). The defaults are [`Single`]'s.
pub trait TimestampScheme: Send + Sized + 'static {
    /// What the scheme keeps for each transaction a coordinator runs.
    type Txn: Default + Send;
    /// The scheme's own messages (its oracle's, its horizons, its reads), carried in
    /// [`Msg::Scheme`] and handled by [`TimestampScheme::handle`]; [`Empty`] if it has none.
    /// The engine's `Debug` shows them unwrapped, so name them as they should read in a trace.
    type Msg: Clone + Debug + Send + Serialize + DeserializeOwned + CheckMessage + 'static;
    /// The scheme's own log records, carried in [`Record::Scheme`] and replayed by
    /// [`TimestampScheme::replay`]; [`Empty`] if it has none (it may still write the 2PC kit's).
    type Record: Clone + Debug + Send + Serialize + DeserializeOwned + 'static;
    /// Whether declared read-only transactions read a snapshot at their timestamp and commit
    /// with no message.
    const SNAPSHOTS: bool = false;
    /// Whether [`TimestampScheme::committing`] raises, at the masters holding a transaction's
    /// shared locks (`2pl`'s reads), state that the timestamps of later writers must respect
    /// (DST's read-set install). Under fail-over such a master's yes vote then carries the end
    /// of its lease, and the coordinator fixes the commit timestamp only while every such lease
    /// surely runs, else aborts the attempt (`reconfigured`): the install then counts as made
    /// while the master was leased, even when the master dies before the decision reaches it,
    /// and its successor's promoted floor covers it (`dst_2pl`, *Fail-over*).
    const INSTALLS_AT_READ_MASTERS: bool = false;

    fn new(env: &NodeEnv, mutant: Option<Mutant>) -> Self;

    // ----- coordinator -----

    /// The timestamp of `txn`, of `client`, beginning `now`, or the oracle to fetch a read-only
    /// snapshot from and how to ask it.
    fn begin(
        &mut self,
        now: Timestamp,
        txn: TxnId,
        client: ClientId,
        read_only: bool,
    ) -> Begin<Self::Msg> {
        let _ = (txn, client, read_only);
        Begin::At(now)
    }

    /// The message of `t`'s read `seq` of `key`.
    fn read(&self, t: &Coord<Self::Txn>, txn: TxnId, seq: u32, key: Key) -> Msg<Self::Msg> {
        read_message(txn, seq, key, t.prio, None)
    }

    /// `t`'s read returned the version `version` wrote, at `ts`, tagged `tag`.
    fn read_returned(
        &self,
        t: &mut Coord<Self::Txn>,
        version: Option<TxnId>,
        ts: Timestamp,
        tag: u64,
    ) {
        let _ = (t, version, ts, tag);
    }

    /// Where `t`'s commit timestamp starts, before any vote.
    fn commit_ts_start(&self, t: &Coord<Self::Txn>) -> Timestamp {
        let _ = t;
        Timestamp::ZERO
    }

    /// A yes vote (or validation) proposing `proposal`, with the `deps` it carries.
    fn voted(
        &self,
        t: &mut Self::Txn,
        commit_ts: &mut Timestamp,
        proposal: Timestamp,
        deps: &Deps,
    ) {
        let _ = (t, deps);
        *commit_ts = (*commit_ts).max(proposal);
    }

    /// Under fail-over, every participant voted yes for a transaction whose commit timestamp
    /// is `commit_ts`: the clock reading before which the coordinator must not fix it (it
    /// validates or decides once its clock reached it), or `None` to go on at once.
    /// `latest_floor` is the configuration's latest eviction floor. DST bounds how far its
    /// timestamps run ahead of the clocks this way, so that an eviction's floor covers every
    /// claim the evicted master made (`dst_occ`, *Fail-over*).
    fn fix_not_before(&self, commit_ts: Timestamp, latest_floor: Timestamp) -> Option<Timestamp> {
        let _ = (commit_ts, latest_floor);
        None
    }

    /// Every participant voted yes: a message to send before validating or deciding, which
    /// the engine waits for the answer to (GTS: fetch the commit timestamp).
    fn before_decision(
        &mut self,
        txn: TxnId,
        t: &mut Coord<Self::Txn>,
    ) -> Option<(NodeId, Self::Msg)> {
        let _ = (txn, t);
        None
    }

    /// The tag of `txn`'s commit, decided here (`writes`: it wrote), logged before the decision.
    fn tag_decision<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        txn: TxnId,
        t: &mut Self::Txn,
        writes: bool,
    ) -> u64 {
        let _ = (ctx, txn, t, writes);
        0
    }

    /// Whether the commit of `t`, tagged `tag`, owes the scheme something once every write
    /// replica applied it.
    fn owes_applied(&self, t: &Self::Txn, tag: u64) -> bool {
        let _ = (t, tag);
        false
    }

    /// Every write replica applied `txn`'s commit at `ts`.
    fn applied_everywhere<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        txn: TxnId,
        ts: Timestamp,
        parts: Parts<'_, Self::Txn>,
        mail: &mut Mail<Self::Msg>,
    ) {
        let _ = (ctx, txn, ts, parts, mail);
    }

    /// `txn` aborted here, its participants told.
    fn aborted<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        txn: TxnId,
        t: &Self::Txn,
        parts: Parts<'_, Self::Txn>,
        mail: &mut Mail<Self::Msg>,
    ) {
        let _ = (ctx, txn, t, parts, mail);
    }

    /// The timestamp of `t`'s commit with nothing read or written to order.
    fn empty_commit_ts(&self, t: &Coord<Self::Txn>, now: Timestamp) -> Timestamp {
        let _ = t;
        now
    }

    /// `client` was told of a commit at `commit_ts`.
    fn told_commit(&mut self, client: ClientId, commit_ts: Timestamp) {
        let _ = (client, commit_ts);
    }

    /// The tag the decision of `txn` carries when it goes again.
    fn decision_tag(&self, txn: TxnId) -> u64 {
        let _ = txn;
        0
    }

    // ----- participant -----

    /// The tag a read reply carries for the version `writer` wrote.
    fn version_tag(&self, writer: TxnId) -> u64 {
        let _ = writer;
        0
    }

    /// Whether `msg` is a read served at its key's master (VTS's reads at a vector), and
    /// which: `(txn, seq, key)`. Under fail-over the engine admits it as it admits its own
    /// reads (in sync for the key's partition and leased, else it waits for a lease or is
    /// refused, `reconfigured`), since a node that is neither may miss commits made without
    /// it.
    fn gated_read(msg: &Self::Msg) -> Option<(TxnId, u32, &Key)> {
        let _ = msg;
        None
    }

    /// A copy of a partition arrived with `tags`, the [`Self::version_tag`] of each of its
    /// versions' writers that has one: keep them durably, before the versions.
    fn copied_tags<N: Node<Self>>(&mut self, ctx: &mut Ctx<'_, N>, tags: &[(TxnId, u64)]) {
        let _ = (ctx, tags);
    }

    /// A read-only read at a snapshot, at the master of its key.
    fn serve_snapshot_read<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        read: SnapshotRead,
        node: Participating<'_>,
        mail: &mut Mail<Self::Msg>,
    ) {
        answer_snapshot_read(ctx, node.me, node.store, read, mail);
    }

    /// Under fail-over, this node no longer serves the keys `not_served` says (it left their
    /// partition's in-sync set, its lease ran out, or it is about to drop the partition for a
    /// copy): refuse the reads of them it keeps waiting, which it would otherwise answer from
    /// a store that may miss commits made without it (the coordinator aborts,
    /// `reconfigured`).
    fn stop_serving<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        not_served: &dyn Fn(&Key) -> bool,
        mail: &mut Mail<Self::Msg>,
    ) {
        let _ = (ctx, not_served, mail);
    }

    /// `txn` released its locks here (the reads and prepares that now hold theirs went on).
    fn released<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        txn: TxnId,
        node: Participating<'_>,
        mail: &mut Mail<Self::Msg>,
    ) {
        let _ = (ctx, txn, node, mail);
    }

    /// The timestamp a yes vote for `writes` proposes (`otherwise`: above every version
    /// applied here). `eviction_floor` is the largest floor the configuration gives the
    /// partitions written (zero without fail-over): the clock of the configuration group's
    /// leader when it evicted a replica of one of them, past that replica's lease.
    fn proposal(
        &self,
        store: &MvStore<Timestamp>,
        writes: &Writes,
        otherwise: Timestamp,
        eviction_floor: Timestamp,
    ) -> Timestamp {
        let _ = (store, writes, eviction_floor);
        otherwise
    }

    /// What a yes vote for `writes` carries of the versions it overwrites.
    fn overwritten(&self, store: &MvStore<Timestamp>, writes: &Writes) -> Deps {
        let _ = (store, writes);
        Deps::new()
    }

    /// `occ`'s validation of `reads` succeeded for a commit at `ts`: the timestamp proposed
    /// (`otherwise`: above every version applied here).
    fn validated<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        store: &mut MvStore<Timestamp>,
        reads: &[(Key, Option<TxnId>)],
        ts: Timestamp,
        otherwise: Timestamp,
    ) -> Timestamp {
        let _ = (ctx, store, reads, ts);
        otherwise
    }

    /// `txn` commits here at `commit_ts`, tagged `tag`, before it installs (`read_locked`:
    /// the keys it read under shared locks here, `wrote`: it installs writes).
    #[allow(clippy::too_many_arguments)]
    fn committing<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        store: &mut MvStore<Timestamp>,
        txn: TxnId,
        read_locked: &[(Key, Option<TxnId>)],
        wrote: bool,
        commit_ts: Timestamp,
        tag: u64,
    ) {
        let _ = (ctx, store, txn, read_locked, wrote, commit_ts, tag);
    }

    /// A version committed at `commit_ts` is installed at a key whose metadata is `meta`.
    fn installed(&self, meta: &mut Timestamp, commit_ts: Timestamp) {
        let _ = (meta, commit_ts);
    }

    // ----- node-wide -----

    /// One of the scheme's own messages (the engine handles the others).
    fn handle<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        from: NodeId,
        msg: Self::Msg,
        parts: Parts<'_, Self::Txn>,
        mail: &mut Mail<Self::Msg>,
    ) -> Then {
        let _ = (ctx, from, msg, parts, mail);
        Then::Nothing
    }

    /// Under fail-over, the configuration changed to `config` (its oracle runs the scheme's
    /// single-node service, if it has one), and `blocks` were granted (see
    /// [`crate::common::membership::Block`]).
    fn configured<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        config: &Configuration,
        blocks: &[Block],
        parts: Parts<'_, Self::Txn>,
        mail: &mut Mail<Self::Msg>,
    ) {
        let _ = (ctx, config, blocks, parts, mail);
    }

    /// Under fail-over, after each of the scheme's handlers: if this node's oracle wants the
    /// configuration to reserve it another block of timestamps, its incarnation and the
    /// stable timestamp it logged.
    fn reservation_wanted(&mut self) -> Option<(u64, Timestamp)> {
        None
    }

    /// The periodic tick's duties (`announce`: every [`super::ANNOUNCE_EVERY`]th tick).
    fn tick<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        parts: Parts<'_, Self::Txn>,
        announce: bool,
        mail: &mut Mail<Self::Msg>,
    ) {
        let _ = (ctx, parts, announce, mail);
    }

    /// The periodic tick's garbage collection, after its duties.
    fn collect_garbage<N: Node<Self>>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        store: &mut MvStore<Timestamp>,
        coord: &FxHashMap<TxnId, Coord<Self::Txn>>,
        announce: bool,
    ) {
        let _ = (ctx, coord, announce);
        // Single version: only the newest committed version of a key is ever read.
        store.collect_garbage(Timestamp::MAX, GC_BATCH);
    }

    /// Rebuild the scheme's state from one of its durable records.
    fn replay(&mut self, record: Record<Self::Record>) {
        let _ = record;
    }

    /// Every record is replayed (`decided`: the decisions still kept).
    fn recovered(&mut self, decided: &DecisionLog<Timestamp>) {
        let _ = decided;
    }

    /// The scheme's state, before the engine's, in a checkpoint.
    fn checkpoint(&self, emit: &mut dyn FnMut(Record<Self::Record>)) {
        let _ = emit;
    }

    /// The scheme's counters, after the engine's.
    fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        let _ = out;
    }
}

/// One version is read, the newest: every hook's default.
pub struct Single;

/// No message and no record: the type of a scheme's messages or records when it has none
/// ([`Single`]'s). It has no value, so none decodes either.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Empty {}

impl CheckMessage for Empty {
    fn check(&self, _: &Inbound<'_>) -> Result<(), BadMessage> {
        match *self {}
    }
}

impl TimestampScheme for Single {
    type Txn = ();
    type Msg = Empty;
    type Record = Empty;

    fn new(_: &NodeEnv, _: Option<Mutant>) -> Single {
        Single
    }
}

/// The oracle node of GTS and VTS (the [`super::ORACLE`] setting; settings are validated
/// against the cluster before nodes are built, and node 0 stands in for anything else).
pub(crate) fn oracle_of(env: &NodeEnv) -> NodeId {
    env.options
        .settings
        .get(super::ORACLE)
        .and_then(|v| v.parse().ok())
        .map(NodeId)
        .filter(|n| env.placement.nodes().any(|m| m == *n))
        .unwrap_or(NodeId(0))
}

/// A scheme message announcing a read horizon, which [`Horizons`] sends: each scheme that
/// collects garbage so announces it in a message of its own, so that the engine carries none.
pub(crate) trait HorizonMsg {
    /// No read-only transaction the sender coordinates, now or later, reads below `ts`.
    fn horizon(ts: Timestamp) -> Self;
}

/// DST's and GTS's garbage collection, which never makes a read-only transaction abort: the
/// latest read horizon each node announced.
#[derive(Default)]
pub(crate) struct Horizons(FxHashMap<NodeId, Timestamp>);

impl Horizons {
    /// `from` announced `ts` (horizons only rise).
    pub(crate) fn heard(&mut self, from: NodeId, ts: Timestamp) {
        let latest = self.0.entry(from).or_insert(ts);
        *latest = (*latest).max(ts);
    }

    /// Tell every node (when `announce`) how low the read-only transactions coordinated here
    /// read, now and later (the oldest running one's timestamp, and `future`, the lowest
    /// snapshot one beginning from now on may read at); then keep, at every key, the newest
    /// version at or below the lowest announcement of every node (none from some node yet:
    /// keep everything), and at or below `cap`. The horizon collected below, if any.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn collect<M: HorizonMsg, N: Protocol<Msg = Msg<M>>, T>(
        &mut self,
        ctx: &mut Ctx<'_, N>,
        me: NodeId,
        nodes: &[NodeId],
        store: &mut MvStore<Timestamp>,
        coord: &FxHashMap<TxnId, Coord<T>>,
        future: Timestamp,
        cap: Timestamp,
        announce: bool,
    ) -> Option<Timestamp> {
        let mine = coord
            .values()
            .filter(|t| t.read_only && !t.awaiting_stable)
            .map(|t| t.ts)
            .fold(future, Timestamp::min);
        self.heard(me, mine);
        if announce {
            for &node in nodes.iter().filter(|n| **n != me) {
                ctx.send(node, Msg::Scheme(M::horizon(mine)));
            }
        }
        if !nodes.iter().all(|n| self.0.contains_key(n)) {
            return None;
        }
        let horizon = self.0.values().copied().fold(cap, Timestamp::min);
        store.collect_garbage(horizon, GC_BATCH);
        Some(horizon)
    }
}
