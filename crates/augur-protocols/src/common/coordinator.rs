//! Bookkeeping every coordinator needs, whatever its protocol: the client request a transaction is
//! waiting to answer, the read it has in flight ([`ReadInFlight`]), the garbage-collection
//! watermark, grouping a write set by partition, and grouping what a transaction read and wrote
//! by the replicas that validate and apply it.

use super::replica::Writes;
use augur_contract::Ctx;
use augur_contract::Protocol;
use augur_contract::age::wait_die_age;
use augur_types::{AbortReason, ClientOp, RequestError, RequestId, Timestamp, TxnId, Value};
use augur_types::{
    ClientId, ClientReply, ClientRequest, ClientResponse, Key, NodeId, PartitionId, Placement,
};
use std::collections::{BTreeMap, BTreeSet};

/// The read a coordinated transaction has in flight, if any: what it waits for (`W`: the key,
/// or the key and the node asked), numbered so that the answer to an earlier read, or to a read
/// sent again, and the timer of one, are told apart from the current read's. The number travels
/// in the read request and its timer; the answer and the timer carry it back.
#[derive(Clone, Debug)]
pub struct ReadInFlight<W = Key> {
    seq: u32,
    waiting: Option<W>,
}

impl<W> Default for ReadInFlight<W> {
    fn default() -> Self {
        ReadInFlight {
            seq: 0,
            waiting: None,
        }
    }
}

impl<W> ReadInFlight<W> {
    /// Send a read for `what`: the number its request and timer carry.
    pub fn begin(&mut self, what: W) -> u32 {
        self.seq += 1;
        self.waiting = Some(what);
        self.seq
    }

    /// Send the read in flight again (its replicas did not answer in time): its new number, so
    /// that a late answer to the first request no longer matches.
    pub fn again(&mut self) -> u32 {
        self.seq += 1;
        self.seq
    }

    /// Whether an answer or a timer numbered `seq` is the read in flight's.
    pub fn awaits(&self, seq: u32) -> bool {
        self.seq == seq && self.waiting.is_some()
    }

    /// What the read in flight waits for.
    pub fn waiting(&self) -> Option<&W> {
        self.waiting.as_ref()
    }

    /// The read an answer numbered `seq` ends, if it is the one in flight; the transaction has
    /// none in flight after it.
    pub fn answered(&mut self, seq: u32) -> Option<W> {
        if self.awaits(seq) {
            self.waiting.take()
        } else {
            None
        }
    }
}

/// A write set grouped by partition, in partition order (so message order is deterministic).
pub type PartitionWrites = BTreeMap<PartitionId, Vec<(Key, Option<Value>)>>;

pub fn group_by_partition(
    placement: &Placement,
    writes: Vec<(Key, Option<Value>)>,
) -> PartitionWrites {
    let mut grouped = PartitionWrites::new();
    for (key, value) in writes {
        grouped
            .entry(placement.partition_of(&key))
            .or_default()
            .push((key, value));
    }
    grouped
}

/// Keys read, each with the version read: the transaction that wrote it (`None`: the key had
/// no version).
pub type Reads = Vec<(Key, Option<TxnId>)>;

/// What one participant of a [`ByReplica`] commit gets: the reads it validates, the writes it
/// applies.
pub type Part = (Reads, Writes);

/// Where a commit checks a key read: at every replica (`2pc-baseline`, which reads at any
/// replica), or at its partition's master alone (`occ` and `2pl`, which read there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadsAt {
    EveryReplica,
    Master,
}

/// The participants of a commit that validates its reads at every replica of every key read and
/// writes at every replica of every key written (SSS's update transactions, `2pc-baseline`):
/// for each node, in node order, the reads it validates and the writes it applies.
#[derive(Debug, Default)]
pub struct ByReplica {
    pub parts: BTreeMap<NodeId, Part>,
    /// The nodes with writes to apply, in node order.
    pub write_replicas: Vec<NodeId>,
}

impl ByReplica {
    /// Group `reads` and `writes` by the replicas of their keys.
    pub fn group(
        placement: &Placement,
        reads: &[(Key, Option<TxnId>)],
        writes: Writes,
    ) -> ByReplica {
        ByReplica::group_reads_at(placement, ReadsAt::EveryReplica, reads, writes)
    }

    /// Group `reads` by the replicas `at` names and `writes` by every replica of their keys.
    pub fn group_reads_at(
        placement: &Placement,
        at: ReadsAt,
        reads: &[(Key, Option<TxnId>)],
        writes: Writes,
    ) -> ByReplica {
        let replicas = |p: PartitionId| placement.replicas(p);
        ByReplica::group_among(placement, &replicas, at, reads, writes)
    }

    /// [`ByReplica::group_reads_at`] among the replicas `replicas` gives each partition, master
    /// first (a configuration's in-sync replicas rather than the placement's).
    pub fn group_among<'r>(
        placement: &Placement,
        replicas: &dyn Fn(PartitionId) -> &'r [NodeId],
        at: ReadsAt,
        reads: &[(Key, Option<TxnId>)],
        writes: Writes,
    ) -> ByReplica {
        let mut parts: BTreeMap<NodeId, Part> = BTreeMap::new();
        for (key, version) in reads {
            let all = replicas(placement.partition_of(key));
            let readers = match at {
                ReadsAt::EveryReplica => all,
                ReadsAt::Master => &all[..1],
            };
            for &r in readers {
                parts.entry(r).or_default().0.push((key.clone(), *version));
            }
        }
        let mut write_replicas = BTreeSet::new();
        for (key, value) in writes {
            for &r in replicas(placement.partition_of(&key)) {
                parts
                    .entry(r)
                    .or_default()
                    .1
                    .push((key.clone(), value.clone()));
                write_replicas.insert(r);
            }
        }
        ByReplica {
            parts,
            write_replicas: write_replicas.into_iter().collect(),
        }
    }

    /// Every participant, in node order.
    pub fn participants(&self) -> Vec<NodeId> {
        self.parts.keys().copied().collect()
    }
}

/// The client request a transaction owes an answer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    pub client: ClientId,
    pub request: RequestId,
}

impl Pending {
    /// The answer `request` is owed.
    pub fn of(request: &ClientRequest) -> Pending {
        Pending {
            client: request.client,
            request: request.id,
        }
    }

    pub fn answer<P: Protocol>(self, ctx: &mut Ctx<'_, P>, reply: ClientReply) {
        ctx.reply(
            self.client,
            ClientResponse {
                id: self.request,
                reply,
            },
        );
    }
}

/// The oldest timestamp still needed by a transaction that started at `snapshots`, or `floor`
/// when none is older: the garbage-collection watermark.
pub fn watermark(floor: Timestamp, snapshots: impl Iterator<Item = Timestamp>) -> Timestamp {
    snapshots.fold(floor, Timestamp::min)
}

/// A coordinator of interactive transactions that executes first and commits at the end
/// (deferred update): begin, reads one at a time, buffered writes shipped with the commit. Every
/// such protocol routes the client's requests the same way ([`serve_interactive`]); what it
/// does with each is its own.
pub trait InteractiveCoordinator: Protocol {
    /// Begin a transaction and answer `Begun`. `age` is its age under wait-die, for the
    /// protocols that have it (`augur_contract::age`: its client's first try, believed up to a
    /// limit).
    fn begin(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, read_only: bool, age: Timestamp);
    /// Read `key` for `txn` and answer with its value (or an abort).
    fn read(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, key: Key);
    /// Commit `txn` with its buffered `writes`, answering with the outcome.
    fn commit(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, txn: TxnId, writes: Writes);
    /// The client asked to abort `txn`: forget it if it is still executing. `Err` says why it
    /// can no longer be aborted (its commit is under way), which the client is told instead of
    /// an abort.
    fn abort_asked(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) -> Result<(), String>;
}

/// Hand a client request to an [`InteractiveCoordinator`]. A transaction of such a protocol
/// never commits speculatively, so there is no outcome to wait for (`AwaitOutcome` names a
/// transaction it does not know); the runtime answers `NodeStats` itself
/// (`augur_contract::deliver_client`), and the one-shot wrapper (`AtCoordinator`) turns
/// `Execute` into interactive requests before they get here.
pub fn serve_interactive<P: InteractiveCoordinator>(
    protocol: &mut P,
    ctx: &mut Ctx<'_, P>,
    request: ClientRequest,
) {
    let pending = Pending::of(&request);
    match request.op {
        ClientOp::Begin {
            read_only,
            trying_for_us,
            ..
        } => {
            let age = wait_die_age(ctx.now(), trying_for_us);
            protocol.begin(ctx, pending, read_only, age)
        }
        ClientOp::Read { txn, key } => protocol.read(ctx, pending, txn, key),
        ClientOp::Commit { txn, writes, .. } => protocol.commit(ctx, pending, txn, writes),
        ClientOp::Abort { txn } => {
            let reply = match protocol.abort_asked(ctx, txn) {
                Ok(()) => ClientReply::Aborted(AbortReason::UserRollback),
                Err(why) => ClientReply::Rejected(RequestError::Invalid(why)),
            };
            pending.answer(ctx, reply);
        }
        ClientOp::AwaitOutcome { txn } => {
            let err = RequestError::UnknownTransaction(txn);
            pending.answer(ctx, ClientReply::Rejected(err));
        }
        ClientOp::NodeStats | ClientOp::Execute { .. } => {}
    }
}
