//! The replica side of two-phase commit with presumed abort, as `clocksi-rep` and STR share it:
//! prepare records, prepares parked by wait-die, the coordinator's decision log kept until every
//! replica acknowledged, and the termination protocol's search for long-prepared transactions.

use augur_types::{Key, NodeId, PartitionId, Placement, Timestamp, TxnId, Value};
use rustc_hash::FxHashMap;
use std::time::Duration;

/// A write set as shipped between nodes (`None` deletes).
pub type Writes = Vec<(Key, Option<Value>)>;

/// A transaction prepared at this replica (durable: its prepare record).
pub struct Participant {
    pub snapshot: Timestamp,
    pub keys: Vec<Key>,
    /// When the outcome was last awaited from: the prepare, then each query to the coordinator.
    pub waiting_since: Timestamp,
}

/// Prepare records by transaction.
pub type Participants = FxHashMap<TxnId, Participant>;

/// The prepare record of `txn`, created on its first prepared key.
pub fn participant(
    participants: &mut Participants,
    txn: TxnId,
    snapshot: Timestamp,
    now: Timestamp,
) -> &mut Participant {
    participants.entry(txn).or_insert_with(|| Participant {
        snapshot,
        keys: Vec::new(),
        waiting_since: now,
    })
}

/// Transactions prepared here for `patience` or longer without an outcome, in id order; each is
/// marked as asked now. The termination protocol asks their coordinators.
pub fn stale_prepares(
    participants: &mut Participants,
    now: Timestamp,
    patience: Duration,
) -> Vec<TxnId> {
    let mut ask = Vec::new();
    for (txn, p) in participants.iter_mut() {
        if now.since(p.waiting_since) >= patience {
            p.waiting_since = now;
            ask.push(*txn);
        }
    }
    // Deterministic order regardless of the hash map's.
    ask.sort();
    ask
}

/// A prepare waiting at a master for an older transaction's outcome (wait-die).
pub struct ParkedPrepare {
    pub snapshot: Timestamp,
    pub partitions: Vec<(PartitionId, Writes)>,
}

/// Commit decisions of the transactions a node coordinates, kept (durably) until every replica
/// acknowledged applying them, so a replica that asks later learns the same outcome. `D` is what
/// a commit message carries.
pub struct DecisionLog<D> {
    decided: FxHashMap<TxnId, (D, Vec<NodeId>)>,
}

impl<D> Default for DecisionLog<D> {
    fn default() -> Self {
        DecisionLog {
            decided: FxHashMap::default(),
        }
    }
}

impl<D> DecisionLog<D> {
    /// Log the commit of `txn`, awaiting the acknowledgements of `replicas` (none: nothing kept).
    pub fn record(&mut self, txn: TxnId, decision: D, replicas: Vec<NodeId>) {
        if !replicas.is_empty() {
            self.decided.insert(txn, (decision, replicas));
        }
    }

    pub fn get(&self, txn: &TxnId) -> Option<&D> {
        self.decided.get(txn).map(|(d, _)| d)
    }

    /// `replica` applied the commit of `txn`; once all have, the decision is forgotten.
    pub fn acknowledge(&mut self, txn: TxnId, replica: NodeId) {
        if let Some((_, unacknowledged)) = self.decided.get_mut(&txn) {
            unacknowledged.retain(|n| *n != replica);
            if unacknowledged.is_empty() {
                self.decided.remove(&txn);
            }
        }
    }
}

/// Every replica of `partitions`, each once, in node order.
pub fn replicas_of(placement: &Placement, partitions: &[PartitionId]) -> Vec<NodeId> {
    let mut nodes: Vec<NodeId> = partitions
        .iter()
        .flat_map(|p| placement.replicas(*p).iter().copied())
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// A clock-based proposal: above the proposer's clock (so no snapshot it already served can
/// contain the version) and above the transaction's snapshot (so the commit lands after
/// everything it read).
pub fn clock_proposal(now: Timestamp, snapshot: Timestamp) -> Timestamp {
    now.next().max(snapshot.next())
}

/// A PreciseClock proposal (STR §6.3): the smallest timestamp above the transaction's snapshot
/// (P1) and above every snapshot that has read one of the written keys at the proposing replica
/// (P2), given those keys' `LastReader`s.
pub fn precise_proposal(
    snapshot: Timestamp,
    last_readers: impl IntoIterator<Item = Timestamp>,
) -> Timestamp {
    last_readers
        .into_iter()
        .map(Timestamp::next)
        .fold(snapshot.next(), Timestamp::max)
}
