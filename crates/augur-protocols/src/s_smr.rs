//! `s-smr`: scalable state-machine replication (Bezerra, Pedone, van Renesse, "Scalable
//! State-Machine Replication", DSN '14), as the Sparkle paper rebuilt and measured it (Sparkle,
//! PVLDB 12, §5: "S-SMR ... executes transactions sequentially in each partition"): whole
//! transactions are ordered first, then each partition runs the ones that touch it, one at a
//! time, in that order, with no concurrency control at all.
//!
//! **Guarantee: strict serializability.** Every replica of every partition applies the same
//! transactions in the same total order (the sequencer's), each to the state all earlier ones
//! left, so the committed transactions are equivalent to the serial execution in that order.
//! The order respects real time: a transaction's client hears of its commit only after its
//! batch was committed in the Raft log, so a transaction submitted later is proposed later and
//! lands at a higher log index (a leader appends after every committed entry, and a new leader
//! holds every committed entry). Read-only transactions are ordered and run like any other.
//!
//! # The protocol
//!
//! * **Ordering**: the node that receives a one-shot request runs the procedure once over
//!   absent values to learn the partitions it touches ([`dispatch::declare`]) and submits the
//!   call with them to the sequencer ([`crate::common::sequencer`]): one Raft group, one batch per
//!   node per epoch. Its place in the order ([`dispatch::position`]) is its commit timestamp.
//! * **Execution**: each partition a node replicates has one executor, which runs the
//!   delivered transactions that touch it strictly in order. It runs the procedure until it
//!   needs a key it does not have ([`procedure_run::Resumable`]); a missing key of its own partition is read from
//!   the store (the state just before this position) and sent to every replica of every other
//!   participant; a missing key of a sibling partition blocks the executor — the whole
//!   partition — until the sibling's value arrives (S-SMR's multi-partition cost). Every
//!   participant runs the same code over the same values, so each reads the same keys in the
//!   same order and each sibling reaches every read it owns. At the end each applies its own
//!   partition's writes at the position.
//! * **Answer**: every replica of the lowest participant partition sends the outcome to the
//!   submitting node, which answers its client once ([`dispatch::Submissions`]).
//! * **Undeclared partitions**: a procedure whose keys depend on what it reads may reach a
//!   partition its dry run did not declare. Every participant stops there identically, with no
//!   writes, and the submitter orders it again with that partition added (same transaction id,
//!   a new position).
//! * **Interactive transactions** may only write (blind writes, which is how benchmarks load
//!   data): they need no reads, so the commit is ordered like a call. A read is refused with a
//!   clear error: S-SMR must know a transaction whole before it runs it.
//!
//! # Failures
//!
//! * The sequencer's Raft log is in the node's write-ahead log; an executor logs each
//!   transaction's writes to its partition (`Record::Applied`) before the outcome leaves, and
//!   every few ticks how far it has got (`Record::Through`). A restarted node rebuilds its store
//!   from those records, the sequencer delivers every batch again, and each executor skips what
//!   it already did and runs the rest.
//! * A replica that missed a sibling's value (lost, or sent while it was down) asks every
//!   replica of the owning partition for it after [`PULL_AFTER`] (`NeedValue`); one that is
//!   past that position answers from its versions (the newest before the position). Versions
//!   are kept until every node announced (`Horizon`) that all its executors are past them, so
//!   the answer is always there. A node that is down holds garbage collection back.
//! * A lost outcome leaves the client to time out (unknown outcome); a submitter that crashes
//!   forgets its clients, who time out too. Neither loses a committed transaction.
//!
//! # What comes from the paper, and what is augur's choice
//!
//! From the papers: one sequential executor per partition, no concurrency control, a
//! multi-partition transaction blocking each participant until the siblings' values arrive, and
//! ordering by an agreed sequence (Sparkle's version orders with Calvin's sequencer). augur's
//! choices: Raft (raft-rs) as the agreement; outcomes from the lowest partition; undeclared
//! partitions resubmitted; values pulled after a loss; versions kept for the pull.
//!
//! Each partition a node holds has its own executor and serial resource, so a placement with
//! several partitions per node (`hash`) gives the paper's Fig. 6 its logical partitions. Left
//! out: the experiment files do not sweep that count yet, and the log is not compacted (see the
//! sequencer).
//!
//! # Mutants
//!
//! * `no-sibling-wait`: a participant that misses a sibling's value proceeds as if the key
//!   were absent instead of waiting for it (the digest's S1).

use crate::common::coordinator::Pending;
use crate::common::dispatch::{self, Body, Entry, Inbox, Next, Ran, Submissions};
use crate::common::procedure_run::{self, Progress, Resumable};
use crate::common::replica::{self, TxnIds};
use crate::common::sequencer::{self, RaftMessage, Sequencer, SequencerRecord, SequencerTimer};
use crate::registry::{IsolationLevel, NetworkModel, ProtocolInfo};
use augur_client::TxnError;
use augur_runtime::inbound::{BadMessage, CheckMessage, Inbound};
use augur_runtime::one_shot::ONE_SHOT_AND_BLIND_WRITES;
use augur_runtime::{Ctx, NodeEnv, Protocol, SerialResource, Work};
use augur_storage::MvStore;
use augur_types::{
    AbortReason, ClientId, ClientOp, ClientReply, ClientRequest, ExecutedOp, Key, NodeId,
    PartitionId, ProcedureCall, RequestError, RequestForm, Timestamp, TxnId, Value,
};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

/// `s-smr`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "s-smr",
    isolation: IsolationLevel::StrictSerializable,
    paper: "Sparkle (PVLDB 12) §5 baseline: S-SMR (DSN 2014), one sequential executor per partition over a Raft-replicated sequencer",
    summary: "orders whole one-shot transactions through Raft, then runs them one at a time per partition with no concurrency control; multi-partition transactions block until the siblings' values arrive",
    commit_order_evidence: true,
    promises: &[],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: sequencer::SETTINGS,
    speculation: None,
    forms: ONE_SHOT_AND_BLIND_WRITES,
    sequencer: true,
};

const MUTANTS: &[(&str, &str)] = &[(
    "no-sibling-wait",
    "a multi-partition transaction proceeds without a sibling's value (reads the key as absent) instead of waiting for it",
)];

/// How long an executor waits for a sibling's value before asking for it (and between asks).
pub const PULL_AFTER: Duration = Duration::from_millis(200);
/// Garbage collection and inbox pruning run every tick; horizons are announced (and logged)
/// every [`ANNOUNCE_EVERY`]th.
const TICK: Duration = Duration::from_millis(50);
const ANNOUNCE_EVERY: u64 = 10;
/// Keys examined per garbage-collection step.
const GC_BATCH: usize = 2048;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// The sequencer's Raft traffic.
    Raft(RaftMessage),
    /// The value of `key` (owned by the sender's partition) before position `at`, for the
    /// other participants of the transaction there.
    Value {
        at: Timestamp,
        key: Key,
        value: Option<Value>,
    },
    /// The sender's executor waits for `key`'s value at `at` and has not received it.
    NeedValue { at: Timestamp, key: Key },
    /// How the transaction `txn` at `at` ended, for its submitter.
    Outcome { txn: TxnId, at: Timestamp, ran: Ran },
    /// Every executor of the sender is past `through` and will never run a position at or
    /// below it again (it is logged).
    Horizon { through: Timestamp },
}

impl From<RaftMessage> for Msg {
    fn from(m: RaftMessage) -> Msg {
        Msg::Raft(m)
    }
}

impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            Msg::Raft(m) => m.check(at),
            Msg::Value { at: pos, key, .. } => {
                let owner = at.placement.partition_of(key);
                if !at.placement.replicates(at.from, owner) {
                    return Err(at.bad(format!(
                        "{} sent the value of {key}, which it does not replicate",
                        at.from
                    )));
                }
                nonzero(at, *pos)
            }
            Msg::NeedValue { at: pos, key } => {
                at.key_here(key)?;
                nonzero(at, *pos)
            }
            Msg::Outcome { txn, at: pos, .. } => {
                at.txn_here(*txn)?;
                nonzero(at, *pos)
            }
            Msg::Horizon { .. } => Ok(()),
        }
    }
}

fn nonzero(at: &Inbound<'_>, pos: Timestamp) -> Result<(), BadMessage> {
    if pos == Timestamp::ZERO {
        return Err(at.bad("position 0 precedes every transaction".into()));
    }
    Ok(())
}

#[derive(Debug)]
pub enum Timer {
    Sequencer(SequencerTimer),
    /// Run what partition `p`'s executor can run.
    Execute(PartitionId),
    /// Ask for the sibling value partition `p`'s executor waits for, if it still waits.
    Pull(PartitionId),
    Tick,
}

impl From<SequencerTimer> for Timer {
    fn from(t: SequencerTimer) -> Timer {
        Timer::Sequencer(t)
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Record {
    Sequencer(SequencerRecord),
    /// Transaction ids (`IdsReserved`).
    Kit(replica::Record<Timestamp>),
    /// `txn`, at position `at`, wrote `writes` to `partition` here.
    Applied {
        partition: PartitionId,
        at: Timestamp,
        txn: TxnId,
        writes: Vec<(Key, Option<Value>)>,
    },
    /// `partition`'s executor here is past every position up to `at`.
    Through {
        partition: PartitionId,
        at: Timestamp,
    },
}

impl From<SequencerRecord> for Record {
    fn from(r: SequencerRecord) -> Record {
        Record::Sequencer(r)
    }
}

impl From<replica::Record<Timestamp>> for Record {
    fn from(r: replica::Record<Timestamp>) -> Record {
        Record::Kit(r)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    NoSiblingWait,
}

#[derive(Default)]
struct Counters {
    executed: u64,
    multi_partition: u64,
    resubmitted: u64,
    refused_entries: u64,
    values_sent: u64,
    values_pulled: u64,
    waits: u64,
}

/// One partition's sequential executor.
struct Executor {
    serial: SerialResource,
    /// Delivered transactions that touch the partition, in order, not yet run.
    queue: VecDeque<(Timestamp, Arc<Entry>)>,
    running: Option<Running>,
    /// Every position at or below this is done here, and logged: it is never run again.
    durable: Timestamp,
    /// An `Execute` timer is set.
    scheduled: bool,
    /// A `Pull` timer is set.
    pulling: bool,
}

/// The transaction an executor is running.
struct Running {
    at: Timestamp,
    entry: Arc<Entry>,
    /// The procedure's run (calls only), or why it cannot run.
    run: Result<Resumable, String>,
    /// The sibling key it waits for.
    waiting_for: Option<Key>,
}

/// How far a run got.
enum Step {
    Blocked,
    Done(Ran, BTreeMap<Key, Option<Value>>),
}

/// One node.
pub struct SSmr {
    env: NodeEnv,
    mutant: Option<Mutant>,
    seq: Sequencer<Entry>,
    ids: TxnIds,
    /// The versions of every key of the partitions this node replicates, by position.
    store: MvStore<()>,
    executors: BTreeMap<PartitionId, Executor>,
    inbox: Inbox,
    submissions: Submissions,
    /// Interactive (blind-write) transactions begun here, with their clients and when.
    open: FxHashMap<TxnId, (ClientId, Timestamp)>,
    /// The last position delivered.
    delivered: Timestamp,
    /// The latest horizon each node announced.
    horizons: FxHashMap<NodeId, Timestamp>,
    ticks: u64,
    counters: Counters,
}

impl SSmr {
    fn build(env: &NodeEnv, seq: Sequencer<Entry>) -> SSmr {
        let mutant = match env.options.mutant.as_deref() {
            Some("no-sibling-wait") => Some(Mutant::NoSiblingWait),
            _ => None,
        };
        let executors = env
            .placement
            .local_partitions(env.id)
            .iter()
            .map(|p| {
                let executor = Executor {
                    serial: SerialResource(p.0),
                    queue: VecDeque::new(),
                    running: None,
                    durable: Timestamp::ZERO,
                    scheduled: false,
                    pulling: false,
                };
                (*p, executor)
            })
            .collect();
        SSmr {
            env: env.clone(),
            mutant,
            seq,
            ids: TxnIds::new(env.id),
            store: MvStore::new(),
            executors,
            inbox: Inbox::default(),
            submissions: Submissions::default(),
            open: FxHashMap::default(),
            delivered: Timestamp::ZERO,
            horizons: FxHashMap::default(),
            ticks: 0,
            counters: Counters::default(),
        }
    }

    fn me(&self) -> NodeId {
        self.env.id
    }

    /// Every position at or below this is done by partition `p`'s executor here.
    fn frontier(&self, p: PartitionId) -> Timestamp {
        let ex = &self.executors[&p];
        let next = ex
            .running
            .as_ref()
            .map(|r| r.at)
            .or(ex.queue.front().map(|q| q.0));
        let done = match next {
            Some(at) => Timestamp(at.0 - 1),
            None => self.delivered,
        };
        done.max(ex.durable)
    }

    /// Every position at or below this is done by every executor here.
    fn local_frontier(&self) -> Timestamp {
        self.executors
            .keys()
            .map(|p| self.frontier(*p))
            .min()
            .unwrap_or(self.delivered)
    }

    // ----- Clients -----

    fn on_execute(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        pending: Pending,
        call: ProcedureCall,
        read_only: bool,
    ) {
        let (procedure, dry) = match procedure_run::dry_run(&self.env.procedures, &call, read_only)
        {
            Ok(checked) => checked,
            Err(e) => return pending.answer(ctx, ClientReply::Rejected(e)),
        };
        // What travels is the postcard form, whatever form the client wrote the arguments in.
        let call = procedure.call().unwrap_or(call);
        let mut partitions = dispatch::declare(&self.env.placement, &dry);
        if partitions.is_empty() {
            // It touches nothing over absent values; it still runs, in order, somewhere.
            let here = self.env.placement.local_partitions(self.me()).first();
            partitions.push(here.copied().unwrap_or(PartitionId(0)));
        }
        let txn = self.ids.allocate(ctx);
        let entry = Entry {
            txn,
            partitions,
            body: Body::Call { call, read_only },
        };
        self.submit(ctx, pending, entry);
    }

    fn submit(&mut self, ctx: &mut Ctx<'_, Self>, pending: Pending, entry: Entry) {
        self.seq.submit(entry.clone());
        self.submissions.add(pending, entry, ctx.now());
    }

    fn on_client_op(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        let pending = Pending::of(&request);
        match request.op {
            ClientOp::Execute {
                call, read_only, ..
            } => self.on_execute(ctx, pending, call, read_only),
            ClientOp::Begin { .. } => {
                let txn = self.ids.allocate(ctx);
                self.open.insert(txn, (request.client, ctx.now()));
                pending.answer(
                    ctx,
                    ClientReply::Begun {
                        txn,
                        snapshot: Timestamp::ZERO,
                    },
                );
            }
            ClientOp::Read { txn, .. } => {
                self.open.remove(&txn);
                pending.answer(
                    ctx,
                    ClientReply::Rejected(RequestError::Invalid(format!(
                        "{} orders whole transactions before it runs them: an interactive \
                         transaction may only write (blind writes); submit transactions that \
                         read in the one-shot form",
                        INFO.name
                    ))),
                );
            }
            ClientOp::Commit { txn, writes, .. } => {
                if self.open.remove(&txn).map(|(client, _)| client) != Some(request.client) {
                    let e = RequestError::UnknownTransaction(txn);
                    return pending.answer(ctx, ClientReply::Rejected(e));
                }
                if writes.is_empty() {
                    // Nothing to order: it read nothing and writes nothing.
                    let reply = ClientReply::Committed {
                        commit_ts: self.delivered,
                    };
                    return pending.answer(ctx, reply);
                }
                let placement = &self.env.placement;
                let partitions: BTreeSet<PartitionId> = writes
                    .iter()
                    .map(|(k, _)| placement.partition_of(k))
                    .collect();
                let entry = Entry {
                    txn,
                    partitions: partitions.into_iter().collect(),
                    body: Body::Writes(writes),
                };
                self.submit(ctx, pending, entry);
            }
            ClientOp::Abort { txn } => {
                let reply = match self.open.remove(&txn) {
                    Some(_) => ClientReply::Aborted(AbortReason::UserRollback),
                    None => ClientReply::Rejected(RequestError::UnknownTransaction(txn)),
                };
                pending.answer(ctx, reply);
            }
            ClientOp::AwaitOutcome { txn } => {
                let e = RequestError::UnknownTransaction(txn);
                pending.answer(ctx, ClientReply::Rejected(e));
            }
            ClientOp::NodeStats => {}
        }
    }

    fn on_outcome(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, at: Timestamp, ran: Ran) {
        match self.submissions.outcome(txn, at, ran) {
            Next::Answer(pending, reply) => pending.answer(ctx, reply),
            Next::Resubmit(entry) => {
                self.counters.resubmitted += 1;
                self.seq.submit(entry);
            }
            Next::Nothing => {}
        }
    }

    // ----- Ordering -----

    /// Hand every transaction of the delivered batches to the executors of the local
    /// partitions it touches.
    fn take(&mut self, ctx: &mut Ctx<'_, Self>, batches: Vec<sequencer::Batch<Entry>>) {
        let mut woken = BTreeSet::new();
        for batch in batches {
            for (slot, entry) in batch.items.into_iter().enumerate() {
                let Some(at) = dispatch::position(batch.index, slot) else {
                    self.counters.refused_entries += 1;
                    continue;
                };
                self.delivered = self.delivered.max(at);
                if entry.check(&self.env.placement).is_err() {
                    self.counters.refused_entries += 1;
                    continue;
                }
                let entry = Arc::new(entry);
                for p in &entry.partitions {
                    if let Some(ex) = self.executors.get_mut(p)
                        && at > ex.durable
                    {
                        ex.queue.push_back((at, Arc::clone(&entry)));
                        woken.insert(*p);
                    }
                }
            }
        }
        for p in woken {
            self.schedule(ctx, p);
        }
    }

    fn schedule(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId) {
        let ex = self.executors.get_mut(&p).expect("a local partition");
        if !ex.scheduled {
            ex.scheduled = true;
            ctx.set_timer(Duration::ZERO, Timer::Execute(p));
        }
    }

    // ----- Execution -----

    /// Run what partition `p`'s executor can, in order, until it waits for a sibling or has
    /// nothing left. One handler per partition, on the partition's serial resource, so the
    /// CPU model runs each partition on one core at a time.
    fn execute(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId) {
        let mut work = Work::on(self.executors[&p].serial);
        self.executors.get_mut(&p).expect("local").scheduled = false;
        loop {
            let ex = self.executors.get_mut(&p).expect("local");
            if ex.running.is_none() {
                let Some((at, entry)) = ex.queue.pop_front() else {
                    break;
                };
                let run = match &entry.body {
                    Body::Call { call, .. } => self
                        .env
                        .procedures
                        .instantiate(call)
                        .map(Resumable::start)
                        .map_err(|e| e.to_string()),
                    Body::Writes(_) => Err(String::new()),
                };
                ex.running = Some(Running {
                    at,
                    entry,
                    run,
                    waiting_for: None,
                });
            }
            let mut reads = Vec::new();
            let step = self.advance(p, &mut reads, &mut work);
            let (at, entry) = {
                let r = self.executors[&p].running.as_ref().expect("running");
                (r.at, Arc::clone(&r.entry))
            };
            self.share(ctx, p, at, &entry, reads);
            match step {
                Step::Blocked => {
                    self.counters.waits += 1;
                    // A replica of the owner that announced it is past this position will
                    // never push the value (it sent it long ago, maybe while this node was
                    // down): ask it now rather than after `PULL_AFTER`, or a node catching up
                    // after a restart would wait that long at every such position.
                    let waiting = self.executors[&p].running.as_ref();
                    if let Some(key) = waiting.and_then(|r| r.waiting_for.clone()) {
                        self.ask_for(ctx, at, key, true);
                    }
                    let ex = self.executors.get_mut(&p).expect("local");
                    if !ex.pulling {
                        ex.pulling = true;
                        ctx.set_timer(PULL_AFTER, Timer::Pull(p));
                    }
                    break;
                }
                Step::Done(ran, writes) => self.finish(ctx, p, at, &entry, ran, writes, &mut work),
            }
        }
        ctx.charge(work);
    }

    /// Run partition `p`'s current transaction as far as the values at hand let it; the keys
    /// of `p` it read from the store go to `reads`, for the siblings.
    fn advance(
        &mut self,
        p: PartitionId,
        reads: &mut Vec<(Key, Option<Value>)>,
        work: &mut Work,
    ) -> Step {
        let placement = &self.env.placement;
        let store = &self.store;
        let inbox = &self.inbox;
        let mutant = self.mutant;
        let running = self
            .executors
            .get_mut(&p)
            .and_then(|ex| ex.running.as_mut())
            .expect("running");
        let at = running.at;
        let entry = Arc::clone(&running.entry);
        let run = match (&entry.body, &mut running.run) {
            (Body::Writes(writes), _) => {
                let ops = writes
                    .iter()
                    .map(|(key, value)| ExecutedOp::Write {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect();
                let ran = Ran::Done { ops, end: Ok(()) };
                return Step::Done(ran, writes.iter().cloned().collect());
            }
            (Body::Call { .. }, Err(why)) => {
                return Step::Done(Ran::Refused(why.clone()), BTreeMap::new());
            }
            (Body::Call { .. }, Ok(run)) => run,
        };
        running.waiting_for = None;
        loop {
            let key = match run.resume() {
                Progress::Needs(key) => key,
                Progress::Ended(run) => {
                    work.steps = work
                        .steps
                        .saturating_add(u32::try_from(run.ops.len()).unwrap_or(u32::MAX));
                    if let Some(q) = run
                        .writes
                        .keys()
                        .map(|k| placement.partition_of(k))
                        .find(|q| !entry.partitions.contains(q))
                    {
                        return Step::Done(Ran::Undeclared { partition: q }, BTreeMap::new());
                    }
                    let end = match run.end {
                        Ok(()) => Ok(()),
                        Err(TxnError::Aborted(reason)) => Err(reason),
                        Err(_) => Err(AbortReason::UserRollback),
                    };
                    let writes = if end.is_ok() {
                        run.writes
                    } else {
                        BTreeMap::new()
                    };
                    return Step::Done(Ran::Done { ops: run.ops, end }, writes);
                }
            };
            let owner = placement.partition_of(&key);
            let value = if owner == p {
                // The state just before this position: every earlier transaction is applied,
                // and this one applies its writes only at its end.
                let v = store
                    .read_at(&key, Timestamp(at.0 - 1))
                    .and_then(|v| v.value.clone());
                work.reads = work.reads.saturating_add(1);
                reads.push((key.clone(), v.clone()));
                v
            } else if !entry.partitions.contains(&owner) {
                return Step::Done(Ran::Undeclared { partition: owner }, BTreeMap::new());
            } else if let Some(v) = inbox.get(at, &key) {
                v.clone()
            } else if mutant == Some(Mutant::NoSiblingWait) {
                None
            } else {
                running.waiting_for = Some(key);
                return Step::Blocked;
            };
            run.supply(key, value);
        }
    }

    /// Send the values partition `p` read for the transaction at `at` to every replica of
    /// every other participant (this node's other executors take them from the inbox).
    fn share(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        at: Timestamp,
        entry: &Entry,
        reads: Vec<(Key, Option<Value>)>,
    ) {
        if reads.is_empty() || entry.partitions.len() == 1 {
            return;
        }
        let me = self.me();
        let placement = Arc::clone(&self.env.placement);
        let mut nodes = BTreeSet::new();
        let mut local = Vec::new();
        for q in entry.partitions.iter().filter(|q| **q != p) {
            for node in placement.replicas(*q) {
                if *node == me {
                    local.push(*q);
                } else {
                    nodes.insert(*node);
                }
            }
        }
        for (key, value) in reads {
            for node in &nodes {
                self.counters.values_sent += 1;
                let msg = Msg::Value {
                    at,
                    key: key.clone(),
                    value: value.clone(),
                };
                ctx.send(*node, msg);
            }
            if !local.is_empty() {
                self.take_value(ctx, at, key, value);
            }
        }
    }

    /// A sibling's value: keep it for the transaction at `at`, and wake the local executor
    /// waiting for it.
    fn take_value(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        at: Timestamp,
        key: Key,
        value: Option<Value>,
    ) {
        if at <= self.local_frontier() {
            return; // every local executor is past it
        }
        if !self.inbox.put(at, key.clone(), value) {
            return;
        }
        let waiting: Vec<PartitionId> = self
            .executors
            .iter()
            .filter(|(_, ex)| {
                ex.running
                    .as_ref()
                    .is_some_and(|r| r.at == at && r.waiting_for.as_ref() == Some(&key))
            })
            .map(|(p, _)| *p)
            .collect();
        for p in waiting {
            self.schedule(ctx, p);
        }
    }

    /// Partition `p`'s transaction at `at` ended: apply and log its writes to `p`, and report
    /// the outcome if `p` is the reporter.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        p: PartitionId,
        at: Timestamp,
        entry: &Entry,
        ran: Ran,
        writes: BTreeMap<Key, Option<Value>>,
        work: &mut Work,
    ) {
        let placement = Arc::clone(&self.env.placement);
        let local: Vec<(Key, Option<Value>)> = writes
            .into_iter()
            .filter(|(key, _)| placement.partition_of(key) == p)
            .collect();
        let ex = self.executors.get_mut(&p).expect("local");
        ex.running = None;
        if !local.is_empty() {
            for (key, value) in &local {
                self.store
                    .entry(key)
                    .put_committed(entry.txn, at, value.clone());
            }
            work.writes = work
                .writes
                .saturating_add(u32::try_from(local.len()).unwrap_or(u32::MAX));
            ctx.persist(Record::Applied {
                partition: p,
                at,
                txn: entry.txn,
                writes: local,
            });
            ex.durable = at;
        }
        self.counters.executed += 1;
        if entry.partitions.len() > 1 {
            self.counters.multi_partition += 1;
        }
        if entry.reporter() != p {
            return;
        }
        let submitter = entry.txn.coordinator();
        if submitter == self.me() {
            self.on_outcome(ctx, entry.txn, at, ran);
        } else {
            let txn = entry.txn;
            ctx.send(submitter, Msg::Outcome { txn, at, ran });
        }
    }

    /// A sibling asks for `key`'s value at `at`: answer if this node's executor of the key's
    /// partition is past `at` (from its versions), or is at `at` and has read it.
    fn need_value(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, at: Timestamp, key: Key) {
        let p = self.env.placement.partition_of(&key);
        let value = if self.frontier(p) >= at {
            self.store
                .read_at(&key, Timestamp(at.0 - 1))
                .and_then(|v| v.value.clone())
        } else {
            let running = self.executors[&p].running.as_ref();
            let supplied = running
                .filter(|r| r.at == at)
                .and_then(|r| r.run.as_ref().ok()?.supplied(&key));
            match supplied {
                Some(v) => v,
                None => return,
            }
        };
        self.counters.values_pulled += 1;
        ctx.send(from, Msg::Value { at, key, value });
    }

    /// Partition `p`'s executor has waited a while: if it still waits for a sibling's value
    /// (at whatever position it is now), ask every replica of the owning partition for it.
    fn pull(&mut self, ctx: &mut Ctx<'_, Self>, p: PartitionId) {
        let ex = self.executors.get_mut(&p).expect("local");
        let waiting = ex
            .running
            .as_ref()
            .and_then(|r| Some((r.at, r.waiting_for.clone()?)));
        let Some((at, key)) = waiting else {
            ex.pulling = false;
            return;
        };
        ctx.set_timer(PULL_AFTER, Timer::Pull(p));
        self.ask_for(ctx, at, key, false);
    }

    /// Ask the other replicas of `key`'s partition for its value at `at`: all of them, or
    /// (`only_past`) those that announced a horizon at or past `at`.
    fn ask_for(&mut self, ctx: &mut Ctx<'_, Self>, at: Timestamp, key: Key, only_past: bool) {
        let owner = self.env.placement.partition_of(&key);
        let me = self.me();
        for node in self.env.placement.replicas(owner) {
            let past = self.horizons.get(node).is_some_and(|h| *h >= at);
            if *node != me && (past || !only_past) {
                let msg = Msg::NeedValue {
                    at,
                    key: key.clone(),
                };
                ctx.send(*node, msg);
            }
        }
    }

    // ----- Housekeeping -----

    fn tick(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer(TICK, Timer::Tick);
        self.ticks += 1;
        // Clients wait for an answer far less than this; what is older was given up.
        let idle = self.env.options.idle_txn_timeout;
        let cutoff = Timestamp(ctx.now().0.saturating_sub(idle.as_micros() as u64));
        self.submissions.forget_before(cutoff);
        self.open.retain(|_, (_, since)| *since >= cutoff);
        self.inbox.prune_through(self.local_frontier());
        let horizon = self
            .env
            .placement
            .nodes()
            .map(|n| self.horizons.get(&n).copied().unwrap_or(Timestamp::ZERO))
            .min()
            .unwrap_or(Timestamp::ZERO);
        self.store.collect_garbage(horizon, GC_BATCH);
        if !self.ticks.is_multiple_of(ANNOUNCE_EVERY) {
            return;
        }
        // Log how far each executor got before saying so: a restarted node never runs a
        // position at or below what it announced, so nobody needs versions below it.
        let partitions: Vec<PartitionId> = self.executors.keys().copied().collect();
        for p in partitions {
            let through = self.frontier(p);
            let ex = self.executors.get_mut(&p).expect("local");
            if through > ex.durable {
                ex.durable = through;
                ctx.persist(Record::Through {
                    partition: p,
                    at: through,
                });
            }
        }
        let through = self.local_frontier();
        let me = self.me();
        self.raise_horizon(me, through);
        for node in self.env.placement.nodes().filter(|n| *n != me) {
            ctx.send(node, Msg::Horizon { through });
        }
    }

    fn raise_horizon(&mut self, node: NodeId, through: Timestamp) {
        let h = self.horizons.entry(node).or_insert(Timestamp::ZERO);
        *h = (*h).max(through);
    }

    fn handle(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Raft(m) => {
                let batches = self.seq.on_message(ctx, from, m);
                self.take(ctx, batches);
            }
            Msg::Value { at, key, value } => self.take_value(ctx, at, key, value),
            Msg::NeedValue { at, key } => self.need_value(ctx, from, at, key),
            Msg::Outcome { txn, at, ran } => self.on_outcome(ctx, txn, at, ran),
            Msg::Horizon { through } => self.raise_horizon(from, through),
        }
    }
}

impl Protocol for SSmr {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record;

    const FORMS: &'static [RequestForm] = ONE_SHOT_AND_BLIND_WRITES;

    fn new(env: &NodeEnv) -> Self {
        let seq = Sequencer::new(env).unwrap_or_else(|e| panic!("s-smr: {e}"));
        SSmr::build(env, seq)
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Record>) -> Self {
        let mut seq_records = Vec::new();
        let mut applied = Vec::new();
        let mut reserved = 0;
        for record in records {
            match record {
                Record::Sequencer(r) => seq_records.push(r),
                Record::Kit(replica::Record::IdsReserved { below }) => {
                    reserved = reserved.max(below)
                }
                Record::Kit(_) => {}
                other => applied.push(other),
            }
        }
        let seq = Sequencer::restore(env, seq_records).unwrap_or_else(|e| panic!("s-smr: {e}"));
        let mut node = SSmr::build(env, seq);
        node.ids.resume_below(reserved);
        for record in applied {
            match record {
                Record::Applied {
                    partition,
                    at,
                    txn,
                    writes,
                } => {
                    for (key, value) in writes {
                        let entry = node.store.entry(&key);
                        if entry.read_at(at).is_none_or(|v| v.ts != at) {
                            entry.put_committed(txn, at, value);
                        }
                    }
                    if let Some(ex) = node.executors.get_mut(&partition) {
                        ex.durable = ex.durable.max(at);
                    }
                }
                Record::Through { partition, at } => {
                    if let Some(ex) = node.executors.get_mut(&partition) {
                        ex.durable = ex.durable.max(at);
                    }
                }
                Record::Sequencer(_) | Record::Kit(_) => {}
            }
        }
        node
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        self.seq.checkpoint(emit);
        self.ids.checkpoint(emit);
        for (key, entry) in self.store.iter() {
            let partition = self.env.placement.partition_of(key);
            for v in entry.versions() {
                emit(Record::Applied {
                    partition,
                    at: v.ts,
                    txn: v.writer,
                    writes: vec![(key.clone(), v.value.clone())],
                });
            }
        }
        for (p, ex) in &self.executors {
            emit(Record::Through {
                partition: *p,
                at: ex.durable,
            });
        }
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.seq.on_start(ctx);
        ctx.set_timer(TICK, Timer::Tick);
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        self.on_client_op(ctx, request);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        self.handle(ctx, from, msg);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        match timer {
            Timer::Sequencer(t) => {
                let batches = self.seq.on_timer(ctx, t);
                self.take(ctx, batches);
            }
            Timer::Execute(p) => self.execute(ctx, p),
            Timer::Pull(p) => self.pull(ctx, p),
            Timer::Tick => self.tick(ctx),
        }
    }

    fn leftovers(&self) -> Vec<(&'static str, u64)> {
        let busy = self
            .executors
            .values()
            .filter(|ex| ex.running.is_some() || !ex.queue.is_empty())
            .count();
        vec![
            ("submissions_unanswered", self.submissions.len() as u64),
            ("blind_write_transactions_open", self.open.len() as u64),
            ("executors_busy", busy as u64),
            ("inbox_positions", self.inbox.len() as u64),
        ]
    }

    fn leader(&self) -> Option<NodeId> {
        self.seq.leader()
    }

    /// Per local partition, an order-independent digest of every key's newest version (key,
    /// position, value): the replicas of a partition that ran the same prefix of the order
    /// agree on it whatever order their stores were rebuilt in.
    fn state_digests(&self) -> Vec<(PartitionId, u64)> {
        let mut digests: BTreeMap<PartitionId, u64> =
            self.executors.keys().map(|p| (*p, 0)).collect();
        for (key, entry) in self.store.iter() {
            let Some(newest) = entry.latest_committed() else {
                continue;
            };
            let mut h = std::hash::DefaultHasher::new();
            (key, newest.ts, &newest.value).hash(&mut h);
            if let Some(d) = digests.get_mut(&self.env.placement.partition_of(key)) {
                *d ^= h.finish();
            }
        }
        digests.into_iter().collect()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        let s = self.seq.counters();
        vec![
            ("executed", c.executed),
            ("multi_partition_executed", c.multi_partition),
            ("resubmitted_undeclared", c.resubmitted),
            ("refused_entries", c.refused_entries),
            ("values_sent", c.values_sent),
            ("values_pulled", c.values_pulled),
            ("sibling_waits", c.waits),
            ("batches_proposed", s.batches_proposed),
            ("batches_reproposed", s.batches_reproposed),
            ("batches_delivered", s.batches_delivered),
        ]
    }
}
