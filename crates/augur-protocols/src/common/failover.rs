//! The data path's half of fail-over, shared by the engines that follow a configuration
//! (`two_phase`, `lock_commit` and `sss`; [`super::membership`] is the configuration's half): the
//! requests a node in sync keeps while it waits for a lease ([`LeaseWaiters`]), and the copies
//! of partitions to replicas out of sync, at either end ([`Copies`]; *Catch-up and rejoin* in
//! `docs/architecture/availability.md`).
//!
//! Both are bookkeeping only: what a request is, what "prepared on a partition" means and what
//! a copy carries are the engine's, which hands them in. So the stages of a copy, its
//! patience at each, and when a replica asks again are written once.

use super::membership::{Configuration, Epoch};
use augur_types::{NodeId, PartitionId, Timestamp, TxnId};
use std::collections::BTreeMap;
use std::time::Duration;

/// What a node does with a read, prepare or validation under fail-over.
pub enum Gate {
    /// Serve it now.
    Pass,
    /// Not in sync on one of its partitions at the epoch it was sent at: refuse it (the
    /// coordinator retries under the configuration it learns meanwhile).
    Refuse,
    /// In sync, but not leased (yet): wait for the next grant ([`LeaseWaiters`]).
    AwaitLease,
    /// A prepare on a partition being copied to a replica: wait for the copy to end
    /// ([`Copies`]).
    AwaitCopy,
}

/// Reads (`R`) and prepares (`H`) that reached this node while it held no lease, though the
/// configuration has it serve them. They wait for the next grant (the node asks at every
/// heartbeat) rather than being refused: a node just started, or one whose renewal came late,
/// would otherwise abort work a lease a few milliseconds away lets it serve. Each waits at most
/// a lease's duration; the engine checks the configuration again when it runs.
pub struct LeaseWaiters<R, H> {
    /// In arrival order, with when each arrived.
    reads: Vec<(Timestamp, R)>,
    prepares: Vec<(Timestamp, H)>,
}

impl<R, H> Default for LeaseWaiters<R, H> {
    fn default() -> Self {
        LeaseWaiters {
            reads: Vec::new(),
            prepares: Vec::new(),
        }
    }
}

impl<R, H> LeaseWaiters<R, H> {
    /// Requests waiting for a lease (a leftover check).
    pub fn len(&self) -> u64 {
        (self.reads.len() + self.prepares.len()) as u64
    }

    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.prepares.is_empty()
    }

    pub fn wait_read(&mut self, now: Timestamp, read: R) {
        self.reads.push((now, read));
    }

    pub fn wait_prepare(&mut self, now: Timestamp, prepare: H) {
        self.prepares.push((now, prepare));
    }

    /// Every waiter, in arrival order (the node holds a lease now).
    pub fn take_all(&mut self) -> (Vec<R>, Vec<H>) {
        let reads = std::mem::take(&mut self.reads);
        let prepares = std::mem::take(&mut self.prepares);
        (
            reads.into_iter().map(|(_, r)| r).collect(),
            prepares.into_iter().map(|(_, h)| h).collect(),
        )
    }

    /// The waiters that waited `patience` or longer by `now`, in arrival order: the engine
    /// refuses them (the coordinator retries elsewhere, or this node was deposed).
    pub fn take_late(&mut self, now: Timestamp, patience: Duration) -> (Vec<R>, Vec<H>) {
        let late = |since: &Timestamp| now.since(*since) >= patience;
        let reads = (self.reads.extract_if(.., |(since, _)| late(since)))
            .map(|(_, r)| r)
            .collect();
        let prepares = (self.prepares.extract_if(.., |(since, _)| late(since)))
            .map(|(_, h)| h)
            .collect();
        (reads, prepares)
    }
}

/// Partitions being copied to a replica out of sync, at either end; `H` is a prepare held
/// meanwhile, as the engine keeps it.
pub struct Copies<H> {
    /// Replica side: the partitions this node asked their master to copy, and when.
    asked: BTreeMap<PartitionId, Timestamp>,
    /// Master side: the partitions whose prepares wait for a copy to end.
    giving: BTreeMap<PartitionId, Giving>,
    /// Prepares that arrived at a partition being copied, in arrival order.
    held: Vec<H>,
}

impl<H> Default for Copies<H> {
    fn default() -> Self {
        Copies {
            asked: BTreeMap::new(),
            giving: BTreeMap::new(),
            held: Vec::new(),
        }
    }
}

/// A copy of one partition this master gives.
struct Giving {
    to: NodeId,
    epoch: Epoch,
    /// When the copy entered its stage.
    since: Timestamp,
    stage: CopyStage,
}

#[derive(Clone, PartialEq, Eq)]
enum CopyStage {
    /// Prepares go on; the transactions prepared on the partition when the copy was asked
    /// (whose coordinators are asked about them at once) must resolve first. A transaction
    /// whose coordinator is down for good stops the copy here, not the partition.
    Settling(Vec<TxnId>),
    /// Prepares wait; those prepared since the copy was asked must resolve, which takes their
    /// coordinators about a round trip.
    Draining,
    /// The state went out; waiting for the replica to install it.
    Sent,
    /// The rejoin was proposed; prepares wait until it is applied.
    Proposed,
}

impl CopyStage {
    /// Whether prepares on the partition wait.
    fn holds(&self) -> bool {
        !matches!(self, CopyStage::Settling(_))
    }

    /// How long the copy may stay in this stage before the master gives up (the replica asks
    /// again): prepares are held only briefly.
    fn patience(&self) -> Option<Duration> {
        match self {
            CopyStage::Settling(_) => Some(Duration::from_secs(10)),
            CopyStage::Draining => Some(Duration::from_millis(300)),
            CopyStage::Sent => Some(COPY_PATIENCE),
            CopyStage::Proposed => None,
        }
    }
}

/// How often a replica out of sync asks for a copy, and how long a master waits for one to be
/// installed before it gives up (and takes prepares again).
pub const COPY_PATIENCE: Duration = Duration::from_secs(1);

/// A copy whose state is to leave now: to whom, at which epoch.
pub struct CopyOut {
    pub to: NodeId,
    pub epoch: Epoch,
}

impl<H> Copies<H> {
    /// Partitions copied in or out right now, and prepares held for them (a leftover check).
    pub fn in_progress(&self) -> u64 {
        (self.asked.len() + self.giving.len() + self.held.len()) as u64
    }

    /// Whether this node is copying `partition` to a replica at a stage where prepares wait:
    /// nothing may be installed there until the copy ends.
    pub fn holds_prepares(&self, partition: PartitionId) -> bool {
        self.giving.get(&partition).is_some_and(|g| g.stage.holds())
    }

    /// Hold `prepare` until the copies end.
    pub fn hold(&mut self, prepare: H) {
        self.held.push(prepare);
    }

    /// The prepares held, in arrival order, to run again (those of partitions still being
    /// copied are held again).
    pub fn take_held(&mut self) -> Vec<H> {
        std::mem::take(&mut self.held)
    }

    /// Whether this node gives a copy of `partition` now.
    pub fn giving(&self, partition: PartitionId) -> bool {
        self.giving.contains_key(&partition)
    }

    /// The partitions this node gives a copy of, ascending.
    pub fn partitions_given(&self) -> Vec<PartitionId> {
        self.giving.keys().copied().collect()
    }

    /// Start giving `to` a copy of `partition` at `epoch`, once `in_doubt` (the transactions
    /// prepared there now) resolved.
    pub fn give(
        &mut self,
        partition: PartitionId,
        to: NodeId,
        epoch: Epoch,
        now: Timestamp,
        in_doubt: Vec<TxnId>,
    ) {
        let giving = Giving {
            to,
            epoch,
            since: now,
            stage: CopyStage::Settling(in_doubt),
        };
        self.giving.insert(partition, giving);
    }

    /// Move the copy of `partition` on as far as it can go now: from settling to draining once
    /// no transaction `still_prepared` names is, and out once nothing is `prepared_there`
    /// (which the engine answers). `Some` when the state is to leave now.
    pub fn advance(
        &mut self,
        partition: PartitionId,
        now: Timestamp,
        still_prepared: impl Fn(&TxnId) -> bool,
        prepared_there: impl FnOnce() -> bool,
    ) -> Option<CopyOut> {
        let giving = self.giving.get_mut(&partition)?;
        if let CopyStage::Settling(in_doubt) = &mut giving.stage {
            in_doubt.retain(|txn| still_prepared(txn));
            if !in_doubt.is_empty() {
                return None;
            }
            giving.stage = CopyStage::Draining;
            giving.since = now;
        }
        if giving.stage != CopyStage::Draining || prepared_there() {
            return None;
        }
        giving.stage = CopyStage::Sent;
        giving.since = now;
        Some(CopyOut {
            to: giving.to,
            epoch: giving.epoch,
        })
    }

    /// The replica `from` installed its copy of `partition` at `epoch` (the partition's epoch
    /// now being `current`): whether the master proposes that it rejoins.
    pub fn taken(
        &mut self,
        from: NodeId,
        partition: PartitionId,
        epoch: Epoch,
        current: Epoch,
    ) -> bool {
        let Some(giving) = self.giving.get_mut(&partition) else {
            return false;
        };
        if giving.to != from
            || giving.epoch != epoch
            || current != epoch
            || giving.stage != CopyStage::Sent
        {
            return false;
        }
        giving.stage = CopyStage::Proposed;
        true
    }

    /// Give up the copies stuck too long in a stage (the replica asks again); whether any was.
    pub fn give_up_stuck(&mut self, now: Timestamp) -> bool {
        let before = self.giving.len();
        self.giving.retain(|_, g| {
            g.stage
                .patience()
                .is_none_or(|patience| now.since(g.since) < patience)
        });
        self.giving.len() != before
    }

    /// Whether this node, out of sync on `partition`, asked for its copy within
    /// [`COPY_PATIENCE`]; if not, it asks now (the caller sends the ask).
    pub fn ask_due(&mut self, partition: PartitionId, now: Timestamp) -> bool {
        let due = self
            .asked
            .get(&partition)
            .is_none_or(|at| now.since(*at) >= COPY_PATIENCE);
        if due {
            self.asked.insert(partition, now);
        }
        due
    }

    /// Whether this node asked for a copy of `partition` (and is still waiting for it).
    pub fn asked(&self, partition: PartitionId) -> bool {
        self.asked.contains_key(&partition)
    }

    /// The configuration changed: drop the copies it overtook (the partition's epoch moved)
    /// and the asks it completed (this node is in sync there). Whether a copy given was
    /// dropped (the prepares held for it run again).
    pub fn reconfigured(&mut self, config: &Configuration, me: NodeId) -> bool {
        let before = self.giving.len();
        self.giving.retain(|part, g| config.epoch(*part) == g.epoch);
        self.asked.retain(|part, _| !config.is_in_sync(me, *part));
        self.giving.len() != before
    }
}
