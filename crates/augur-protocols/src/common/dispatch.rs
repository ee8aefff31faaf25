//! Deterministic dispatch: what the order-then-execute protocols (`s-smr`, `calvin`, and
//! `sparkle` to come) share on top of the [sequencer](super::sequencer). A node turns a
//! client's one-shot request into an [`Entry`] (the procedure call and the partitions it
//! touches), the sequencer orders it, every replica of every partition it touches runs it at its
//! place in the order, siblings exchange the values of the keys they own, and the replicas of
//! the lowest participant partition report the [`Ran`] outcome to the submitting node, which
//! answers its client once.
//!
//! What is here is the part that does not depend on how a partition executes:
//!
//! * [`position`]: a transaction's place in the order, which is also its commit timestamp;
//! * [`Entry`] and its validation on delivery ([`Entry::check`]): the log is fed by Raft
//!   messages, which a forged message could in principle have corrupted, so every node skips a
//!   malformed entry by the same rule;
//! * [`declare`]: the partitions a call touches, from a dry run over absent values;
//! * [`Footprint`]: the keys a transaction reads and writes, predicted before it is ordered
//!   (Calvin locks them; a run that strays outside them ends [`Ran::Mispredicted`]);
//! * [`Inbox`]: sibling values by position, kept until every local executor is past it;
//! * [`Submissions`]: the submitter's side, which answers a client once from the first outcome
//!   and orders again a transaction that reached a partition it had not declared or a key its
//!   footprint did not predict.
//!
//! The decisions behind them are in `docs/architecture/protocols.md` ("Order-then-execute").

use crate::common::coordinator::Pending;
use crate::common::replica::{self, TxnIds};
use augur_contract::driver::Run;
use augur_contract::{Ctx, DeclaredKeys, Protocol, TxnError};
use augur_storage::MvStore;
use augur_types::{
    AbortReason, ClientId, ClientOp, ClientReply, ClientRequest, ExecutedOp, Execution, Key,
    PartitionId, Placement, ProcedureCall, RequestError, Timestamp, TxnId, Value,
};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Bits of a position that number a transaction within its batch.
pub const SLOT_BITS: u32 = 20;

/// The place of the `slot`th transaction of the batch at Raft index `index` in the total order,
/// used as its commit timestamp: `(index << 20) | slot`. It increases along the delivery order
/// and is the same at every node. `None` for a slot or index too large to encode (a batch holds
/// fewer than 2^20 transactions; 2^44 batches is beyond any run).
pub fn position(index: u64, slot: usize) -> Option<Timestamp> {
    let slot = u64::try_from(slot).ok().filter(|s| *s < 1 << SLOT_BITS)?;
    let high = index
        .checked_shl(SLOT_BITS)
        .filter(|h| h >> SLOT_BITS == index)?;
    Some(Timestamp(high | slot))
}

/// The Raft index of the batch holding the transaction at `position` (the inverse of
/// [`position`]).
pub fn batch_of(position: Timestamp) -> u64 {
    position.0 >> SLOT_BITS
}

/// The digest of `key`'s version written at position `at`: what a replica reports of each
/// key's newest version, XORed per partition (`Protocol::state_digests`), and what the
/// serial-replay oracle computes from a history to compare with it.
pub fn version_digest(key: &Key, at: Timestamp, value: &Option<Value>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (key, at, value).hash(&mut h);
    h.finish()
}

/// Per partition of `partitions`, an order-independent digest of the newest committed version
/// of every key of `store` in it (key, position, value): replicas that ran the same prefix of
/// the order agree on it whatever order their stores were rebuilt in
/// (`Protocol::state_digests`).
pub fn state_digests<M>(
    store: &MvStore<M>,
    placement: &Placement,
    partitions: impl Iterator<Item = PartitionId>,
) -> Vec<(PartitionId, u64)> {
    let mut digests: BTreeMap<PartitionId, u64> = partitions.map(|p| (p, 0)).collect();
    for (key, entry) in store.iter() {
        let Some(newest) = entry.latest_committed() else {
            continue;
        };
        if let Some(d) = digests.get_mut(&placement.partition_of(key)) {
            *d ^= version_digest(key, newest.ts, &newest.value);
        }
    }
    digests.into_iter().collect()
}

/// One transaction as the sequencer orders it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its id; `txn.coordinator()` is the node that submitted it and answers its client.
    pub txn: TxnId,
    /// The partitions it touches (its participants), sorted and distinct.
    pub partitions: Vec<PartitionId>,
    pub body: Body,
    /// The keys it reads and writes, predicted before ordering, for protocols that lock them
    /// (`calvin`); `None` where partitions are all a protocol needs (`s-smr`).
    pub footprint: Option<Footprint>,
}

/// The keys a transaction is predicted to read and write: by a dry run over absent values, or,
/// for a transaction whose keys depend on what it reads, by reconnaissance (a read-only run over
/// current values before it is ordered). A run at its position that reads a key outside `reads`
/// or writes one outside `writes` ends [`Ran::Mispredicted`] at every participant.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footprint {
    /// The keys it reads, each read up front by its partition and sent to the others.
    pub reads: BTreeSet<Key>,
    /// The locks of the keys it writes (`Procedures::lock_name`: the key itself, or a coarser
    /// lock on its shard that every transaction touching the key takes, so that a row keyed by
    /// a counter's value need not be predicted).
    pub writes: BTreeSet<Key>,
}

impl Footprint {
    /// The keys `run` read, and the locks (`lock_name`) of those it wrote.
    pub fn of(run: &Run, lock_name: impl Fn(&Key) -> Key) -> Footprint {
        Footprint {
            reads: run.reads.iter().cloned().collect(),
            writes: run.writes.keys().map(lock_name).collect(),
        }
    }

    /// The keys a procedure declared ([`DeclaredKeys`]), with the locks (`lock_name`) of
    /// those it writes.
    pub fn declared(declared: DeclaredKeys, lock_name: impl Fn(&Key) -> Key) -> Footprint {
        Footprint {
            reads: declared.reads.into_iter().collect(),
            writes: declared.writes.iter().map(lock_name).collect(),
        }
    }

    /// Whether writing `key` (whose lock is `lock_name(key)`) stays inside the footprint.
    pub fn covers_write(&self, key: &Key, lock_name: impl Fn(&Key) -> Key) -> bool {
        self.writes.contains(&lock_name(key))
    }

    /// The partitions of its keys, sorted.
    pub fn partitions(&self, placement: &Placement) -> Vec<PartitionId> {
        let touched: BTreeSet<PartitionId> = self
            .reads
            .iter()
            .chain(&self.writes)
            .map(|key| placement.partition_of(key))
            .collect();
        touched.into_iter().collect()
    }
}

/// What a transaction does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Body {
    /// A one-shot transaction: a registered procedure and its arguments (postcard-encoded).
    Call {
        call: ProcedureCall,
        read_only: bool,
    },
    /// An interactive transaction that only writes (blind writes, which is how benchmarks load
    /// their data): it needs no reads, so it can be ordered once its client commits it.
    Writes(Vec<(Key, Option<Value>)>),
}

impl Entry {
    /// Whether the entry is well-formed for `placement`: its submitter is a node of the
    /// cluster, its partitions exist and are sorted and distinct, and its blind writes fall
    /// within them and, with a footprint, within its locks (`lock_name`). (A call names a
    /// procedure every node may lack; that is decided when it is instantiated, by the same
    /// catalogue everywhere.)
    pub fn check(
        &self,
        placement: &Placement,
        lock_name: impl Fn(&Key) -> Key,
    ) -> Result<(), String> {
        if let Some(fp) = &self.footprint
            && let Some(key) = fp
                .reads
                .iter()
                .chain(&fp.writes)
                .find(|key| !self.partitions.contains(&placement.partition_of(key)))
        {
            return Err(format!("its footprint names {key} outside its partitions"));
        }
        if let (Some(fp), Body::Writes(writes)) = (&self.footprint, &self.body)
            && let Some((key, _)) = writes
                .iter()
                .find(|(key, _)| !fp.covers_write(key, &lock_name))
        {
            return Err(format!("writes {key} outside its footprint"));
        }
        if self.txn.coordinator().0 as usize >= placement.node_count() {
            return Err(format!(
                "submitted by unknown node {}",
                self.txn.coordinator()
            ));
        }
        if self.partitions.is_empty() {
            return Err("touches no partition".into());
        }
        if !self.partitions.windows(2).all(|w| w[0] < w[1]) {
            return Err("partitions not sorted and distinct".into());
        }
        if let Some(p) = self.partitions.last()
            && p.0 as usize >= placement.partition_count()
        {
            return Err(format!("names partition {} the cluster lacks", p.0));
        }
        if let Body::Writes(writes) = &self.body
            && let Some((key, _)) = writes
                .iter()
                .find(|(key, _)| !self.partitions.contains(&placement.partition_of(key)))
        {
            return Err(format!("writes {key} outside its partitions"));
        }
        Ok(())
    }

    /// The participants that run the procedure, sorted. Without a footprint, every one. With
    /// one, those it writes at; the others only read their part of the footprint for them
    /// (Calvin's passive participants). A transaction that writes nothing runs at its lowest
    /// participant.
    pub fn runners(&self, placement: &Placement) -> Vec<PartitionId> {
        let Some(fp) = &self.footprint else {
            return self.partitions.clone();
        };
        let writers: BTreeSet<PartitionId> = fp
            .writes
            .iter()
            .map(|key| placement.partition_of(key))
            .collect();
        if writers.is_empty() {
            return vec![self.partitions[0]];
        }
        writers.into_iter().collect()
    }

    /// Whether participant `p` is one of the [`runners`](Entry::runners).
    pub fn runs_at(&self, p: PartitionId, placement: &Placement) -> bool {
        self.footprint.is_none() || self.runners(placement).contains(&p)
    }

    /// A read-only call over more than one partition (Sparkle's read-only MPT, §4.4).
    pub fn is_read_only_multi_partition(&self) -> bool {
        self.partitions.len() > 1
            && matches!(
                self.body,
                Body::Call {
                    read_only: true,
                    ..
                }
            )
    }

    /// The participant that reports the outcome: the lowest of the
    /// [`runners`](Entry::runners).
    pub fn reporter(&self, placement: &Placement) -> PartitionId {
        if self.footprint.is_none() {
            return self.partitions[0];
        }
        self.runners(placement)[0]
    }
}

/// The partitions a run touched: those of every key it read or wrote. A run that ended early
/// (a rollback over absent values) may write what it read over real values, which these
/// already include.
pub fn declare(placement: &Placement, run: &Run) -> Vec<PartitionId> {
    let touched: BTreeSet<PartitionId> = run
        .reads
        .iter()
        .chain(run.writes.keys())
        .map(|key| placement.partition_of(key))
        .collect();
    touched.into_iter().collect()
}

/// How a transaction ended, as every participant computes it (identically) and the reporter
/// sends it to the submitter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ran {
    /// It ran to the end: committed (`Ok`) or rolled back by its own code (`Err`, with the
    /// reason its body gave). `ops` are every read, with its value, and every write, in
    /// program order.
    Done {
        ops: Vec<ExecutedOp>,
        end: Result<(), AbortReason>,
    },
    /// It reached a key of `partition`, which it had not declared: it ended with no effect at
    /// every participant, and the submitter orders it again with that partition added.
    Undeclared { partition: PartitionId },
    /// It read or wrote a key outside its [`Footprint`]: it ended with no effect at every
    /// participant, and the submitter predicts its footprint again (reconnaissance) and orders
    /// it anew.
    Mispredicted,
    /// Its entry cannot run here (a procedure this cluster does not know): skipped everywhere.
    Refused(String),
}

/// Values siblings sent, by position: for each key a sibling partition read for the
/// transaction at that position, a `V`.
#[derive(Debug, Default)]
pub struct SiblingValues<V> {
    values: BTreeMap<Timestamp, BTreeMap<Key, V>>,
}

/// Final sibling values: the value of each key a sibling partition read for the transaction at
/// that position. The first copy of a value is kept (every replica of the owning partition
/// sends the same one).
pub type Inbox = SiblingValues<Option<Value>>;

/// Speculative sibling values (`sparkle`'s confirmation variants): the value of each key a
/// sibling's run read for the transaction at that position, and which instance of the run read
/// it. A later instance's value replaces an earlier one's (that instance was aborted); none is
/// final until the [`Inbox`] holds the same value.
pub type SpeculativeInbox = SiblingValues<(u32, Option<Value>)>;

impl<V> SiblingValues<V> {
    /// Forget every position at or below `through` (every local executor is past them).
    pub fn prune_through(&mut self, through: Timestamp) {
        self.values = self
            .values
            .split_off(&Timestamp(through.0.saturating_add(1)));
    }

    /// Positions holding values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl Inbox {
    /// Keep `value` of `key` for position `at`; false if it was already here.
    pub fn put(&mut self, at: Timestamp, key: Key, value: Option<Value>) -> bool {
        let at_position = self.values.entry(at).or_default();
        if at_position.contains_key(&key) {
            return false;
        }
        at_position.insert(key, value);
        true
    }

    pub fn get(&self, at: Timestamp, key: &Key) -> Option<&Option<Value>> {
        self.values.get(&at)?.get(key)
    }
}

impl SpeculativeInbox {
    /// Keep `value` of `key` for position `at`, read by the sender's instance `instance`; false
    /// if a value of that instance or a later one is already here.
    pub fn put(&mut self, at: Timestamp, key: Key, instance: u32, value: Option<Value>) -> bool {
        let at_position = self.values.entry(at).or_default();
        match at_position.get(&key) {
            Some((held, _)) if *held >= instance => false,
            _ => {
                at_position.insert(key, (instance, value));
                true
            }
        }
    }

    pub fn get(&self, at: Timestamp, key: &Key) -> Option<&Option<Value>> {
        self.values.get(&at)?.get(key).map(|(_, value)| value)
    }
}

/// The transactions a node submitted and still owes its clients an answer for. Volatile: a
/// submitter that crashes forgets them, and their clients time out (the outcome is unknown to
/// them; the transactions may still be ordered and run).
#[derive(Default)]
pub struct Submissions {
    waiting: FxHashMap<TxnId, Submission>,
}

/// A transaction a node submitted.
struct Submission {
    /// The request to answer.
    pending: Pending,
    /// The entry as last submitted.
    entry: Entry,
    /// When it was first submitted.
    since: Timestamp,
    /// The position of the last attempt that ended in a retry: a copy of an outcome at or below
    /// it comes from an attempt already retried.
    retried_through: Option<Timestamp>,
}

/// What a submitter does with an outcome.
pub enum Next {
    /// Answer the client.
    Answer(Pending, ClientReply),
    /// Order the transaction again, with a partition it had not declared.
    Resubmit(Entry),
    /// Predict the transaction's footprint again and order it anew.
    Predict(Entry),
    /// Nothing: a duplicate, or a transaction this node no longer knows.
    Nothing,
}

impl Submissions {
    /// `entry`, submitted at `now` for `pending`.
    pub fn add(&mut self, pending: Pending, entry: Entry, now: Timestamp) {
        let submission = Submission {
            pending,
            entry,
            since: now,
            retried_through: None,
        };
        self.waiting.insert(submission.entry.txn, submission);
    }

    /// Whether `txn` still waits for its answer.
    pub fn contains(&self, txn: TxnId) -> bool {
        self.waiting.contains_key(&txn)
    }

    /// `entry` is how its transaction is submitted now (a new prediction). False if the
    /// transaction was forgotten meanwhile: then it must not be ordered.
    pub fn replace(&mut self, entry: Entry) -> bool {
        match self.waiting.get_mut(&entry.txn) {
            Some(s) => {
                s.entry = entry;
                true
            }
            None => false,
        }
    }

    /// Give up on `txn`, which has not taken effect anywhere and will not be ordered again: the
    /// request to answer.
    pub fn abandon(&mut self, txn: TxnId) -> Option<Pending> {
        self.waiting.remove(&txn).map(|s| s.pending)
    }

    /// Forget the transactions submitted before `cutoff`: their clients have given up (an
    /// outcome lost on the way, or a batch lost with its proposer), and a late outcome finds
    /// nothing to answer. Returns how many were forgotten.
    pub fn forget_before(&mut self, cutoff: Timestamp) -> usize {
        let before = self.waiting.len();
        self.waiting.retain(|_, s| s.since >= cutoff);
        before - self.waiting.len()
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Take in `txn`'s outcome at position `at`, reported by each replica of its reporter
    /// partition (the first copy counts).
    pub fn outcome(&mut self, txn: TxnId, at: Timestamp, ran: Ran) -> Next {
        let Some(s) = self.waiting.get_mut(&txn) else {
            return Next::Nothing;
        };
        // (A read-only transaction answered unordered may come at position 0: nothing was
        // final then.)
        if s.retried_through.is_some_and(|through| at <= through) {
            return Next::Nothing;
        }
        match ran {
            Ran::Undeclared { partition } => {
                s.retried_through = Some(at);
                if !s.entry.partitions.contains(&partition) {
                    s.entry.partitions.push(partition);
                    s.entry.partitions.sort();
                }
                return Next::Resubmit(s.entry.clone());
            }
            Ran::Mispredicted => {
                s.retried_through = Some(at);
                return Next::Predict(s.entry.clone());
            }
            _ => {}
        }
        let Submission { pending, entry, .. } = self.waiting.remove(&txn).expect("just found");
        Next::Answer(pending, reply(txn, at, ran, &entry.body))
    }
}

/// The answer to a client whose transaction `txn`, of body `body`, ended `ran` at position
/// `at`. A run that must be ordered again (`Undeclared`, `Mispredicted`) is not an answer: it
/// is refused as an internal error should it get here.
pub fn reply(txn: TxnId, at: Timestamp, ran: Ran, body: &Body) -> ClientReply {
    match (ran, body) {
        (Ran::Done { ops, end }, Body::Call { .. }) => ClientReply::Executed(Box::new(Execution {
            txn: Some(txn),
            ops,
            info: Default::default(),
            end: match end {
                Ok(()) => ClientReply::Committed { commit_ts: at },
                Err(reason) => ClientReply::Aborted(reason),
            },
        })),
        (Ran::Done { end: Ok(()), .. }, Body::Writes(_)) => {
            ClientReply::Committed { commit_ts: at }
        }
        (
            Ran::Done {
                end: Err(reason), ..
            },
            Body::Writes(_),
        ) => ClientReply::Aborted(reason),
        (Ran::Refused(why), _) => ClientReply::Rejected(RequestError::Invalid(why)),
        (Ran::Undeclared { .. } | Ran::Mispredicted, _) => ClientReply::Rejected(
            RequestError::Invalid("a run to order again was answered".into()),
        ),
    }
}

/// How a run's procedure ended, as its outcome says it: an abort it asked for, or a rollback.
pub fn ended_how(end: Result<(), TxnError>) -> Result<(), AbortReason> {
    match end {
        Ok(()) => Ok(()),
        Err(TxnError::Aborted(reason)) => Err(reason),
        Err(_) => Err(AbortReason::UserRollback),
    }
}

/// What a client's request asks of an order-then-execute node, once the interactive form's
/// bookkeeping is done ([`BlindWrites::step`]).
pub enum ClientStep {
    /// Run this one-shot call.
    Execute {
        pending: Pending,
        call: ProcedureCall,
        read_only: bool,
    },
    /// Order the blind writes `writes` as transaction `txn`, and answer `pending` once it ran.
    Commit {
        pending: Pending,
        txn: TxnId,
        writes: Vec<(Key, Option<Value>)>,
    },
    /// Answered already, or nothing to do.
    Answered,
}

/// The interactive transactions an order-then-execute node serves: blind writes only (how
/// benchmarks load their data), since a transaction that reads must be known whole before it
/// is ordered. A read is refused with a clear error; a commit with writes is ordered like a
/// call.
#[derive(Default)]
pub struct BlindWrites {
    /// Begun here and not yet committed or aborted: the client and when it began.
    open: FxHashMap<TxnId, (ClientId, Timestamp)>,
}

impl BlindWrites {
    /// Take `request`: answer what the interactive form needs answered here, and say what else
    /// the node must do. `ids` numbers new transactions; an empty commit is answered as
    /// committed at `now_ordered` (the last position delivered: it read and wrote nothing).
    pub fn step<P: Protocol, D>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        ids: &mut TxnIds,
        request: ClientRequest,
        now_ordered: Timestamp,
    ) -> ClientStep
    where
        P::Record: From<replica::Record<D>>,
    {
        let pending = Pending::of(&request);
        let reply = match request.op {
            ClientOp::Execute {
                call, read_only, ..
            } => {
                return ClientStep::Execute {
                    pending,
                    call,
                    read_only,
                };
            }
            ClientOp::Begin { .. } => {
                let txn = ids.allocate(ctx);
                self.open.insert(txn, (request.client, ctx.now()));
                ClientReply::Begun {
                    txn,
                    snapshot: Timestamp::ZERO,
                }
            }
            ClientOp::Read { txn, .. } => {
                self.open.remove(&txn);
                // The form it does not serve: the interactive form is served only for blind
                // writes, since a whole transaction is ordered before it runs.
                ClientReply::Rejected(RequestError::UnsupportedForm(
                    "interactive (only blind writes; submit transactions that read one-shot)"
                        .into(),
                ))
            }
            ClientOp::Commit { txn, writes, .. } => {
                if self.open.remove(&txn).map(|(client, _)| client) != Some(request.client) {
                    ClientReply::Rejected(RequestError::UnknownTransaction(txn))
                } else if writes.is_empty() {
                    // Nothing to order: it read nothing and writes nothing.
                    ClientReply::Committed {
                        commit_ts: now_ordered,
                    }
                } else {
                    return ClientStep::Commit {
                        pending,
                        txn,
                        writes,
                    };
                }
            }
            ClientOp::Abort { txn } => match self.open.remove(&txn) {
                Some(_) => ClientReply::Aborted(AbortReason::UserRollback),
                None => ClientReply::Rejected(RequestError::UnknownTransaction(txn)),
            },
            ClientOp::AwaitOutcome { txn } => {
                ClientReply::Rejected(RequestError::UnknownTransaction(txn))
            }
            ClientOp::NodeStats => return ClientStep::Answered,
        };
        pending.answer(ctx, reply);
        ClientStep::Answered
    }

    /// Forget the transactions begun before `cutoff` (their clients gave up).
    pub fn forget_before(&mut self, cutoff: Timestamp) {
        self.open.retain(|_, (_, since)| *since >= cutoff);
    }

    /// How many are open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_increase_along_the_order_and_refuse_what_does_not_fit() {
        let a = position(1, 0).unwrap();
        let b = position(1, 1).unwrap();
        let c = position(2, 0).unwrap();
        assert!(a < b && b < c);
        assert!(position(1, 1 << 20).is_none());
        assert!(position(u64::MAX, 0).is_none());
    }

    #[test]
    fn the_inbox_keeps_the_first_copy_and_prunes_by_position() {
        let mut inbox = Inbox::default();
        let k = Key::numbered(0, 1);
        assert!(inbox.put(Timestamp(5), k.clone(), Some(Value::from_static(b"a"))));
        assert!(!inbox.put(Timestamp(5), k.clone(), Some(Value::from_static(b"b"))));
        assert_eq!(
            inbox.get(Timestamp(5), &k),
            Some(&Some(Value::from_static(b"a")))
        );
        inbox.put(Timestamp(7), k.clone(), None);
        inbox.prune_through(Timestamp(5));
        assert!(inbox.get(Timestamp(5), &k).is_none());
        assert_eq!(inbox.len(), 1);
    }
}
