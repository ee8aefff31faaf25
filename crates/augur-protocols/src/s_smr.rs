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
//!   absent values to learn the partitions it touches ([`dispatch::declare`](crate::common::dispatch::declare)) and submits the
//!   call with them to the sequencer ([`crate::common::sequencer`]): one Raft group, one batch per
//!   node per epoch. Its place in the order ([`dispatch::position`](crate::common::dispatch::position)) is its commit timestamp.
//! * **Execution**: each partition a node replicates has one executor, which runs the
//!   delivered transactions that touch it strictly in order. It runs the procedure until it
//!   needs a key it does not have ([`Driver`](augur_contract::driver::Driver)); a missing key of its own partition is read from
//!   the store (the state just before this position) and sent to every replica of every other
//!   participant; a missing key of a sibling partition blocks the executor — the whole
//!   partition — until the sibling's value arrives (S-SMR's multi-partition cost). Every
//!   participant runs the same code over the same values, so each reads the same keys in the
//!   same order and each sibling reaches every read it owns. At the end each applies its own
//!   partition's writes at the position.
//! * **Answer**: every replica of the lowest participant partition sends the outcome to the
//!   submitting node, which answers its client once ([`dispatch::Submissions`](crate::common::dispatch::Submissions)).
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
//!   replica of the owning partition for it after [`PULL_AFTER`](crate::common::ordered::PULL_AFTER) (`NeedValue`); one that is
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
//! Everything but the schedule is the order-then-execute node every such protocol runs
//! ([`crate::common::ordered`]); this module is the schedule: one transaction at a time per
//! partition, in order, on the partition's executor ([`Sequential`]).
//!
//! # Mutants
//!
//! * `no-sibling-wait`: a participant that misses a sibling's value proceeds as if the key
//!   were absent instead of waiting for it (the digest's S1).

use crate::common::dispatch::Entry;
use crate::common::ordered::{Ordered, Schedule};
use crate::common::{horizons, sequencer};
use crate::protocol_info::Engine;
use crate::protocol_info::{IsolationLevel, NetworkModel, Promise, ProtocolInfo};
use augur_contract::forms::ONE_SHOT_AND_BLIND_WRITES;
use augur_contract::{NodeEnv, SerialResource, Work};
use augur_types::{PartitionId, Placement, Timestamp};
use std::collections::VecDeque;

/// `s-smr`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "s-smr",
    isolation: IsolationLevel::StrictSerializable,
    isolation_with: &[],
    paper: "Sparkle (PVLDB 12) §5 baseline: S-SMR (DSN 2014)",
    summary: "orders whole one-shot transactions through Raft, then runs them one at a time per partition with no concurrency control; multi-partition transactions block until the siblings' values arrive",
    engine: Engine::Ordered,
    commit_order_evidence: true,
    promises: &[Promise::SerialReplay],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: &[
        sequencer::EPOCH_SETTING,
        sequencer::VOTERS_SETTING,
        sequencer::ORDERING_DELAY_SETTING,
        horizons::LEFT_BEHIND_SETTING,
    ],
    speculation: None,
    forms: ONE_SHOT_AND_BLIND_WRITES,
};

const MUTANTS: &[(&str, &str)] = &[(
    "no-sibling-wait",
    "a multi-partition transaction proceeds without a sibling's value (reads the key as absent) instead of waiting for it",
)];

/// An `s-smr` node.
pub type SSmr = Ordered<Sequential>;

/// One partition's executor: it starts the next delivered transaction only when the one
/// before has finished, so the partition runs its transactions one at a time, in order, and a
/// transaction waiting for a sibling's value holds the whole partition.
pub struct Sequential {
    executor: SerialResource,
    /// Delivered, not started.
    queue: VecDeque<Timestamp>,
    running: Option<Timestamp>,
}

impl Schedule for Sequential {
    const INFO: ProtocolInfo = INFO;
    const FOOTPRINTS: bool = false;
    const IN_ORDER: bool = true;

    fn new(_: &NodeEnv, partition: PartitionId) -> Self {
        Sequential {
            executor: SerialResource(partition.0),
            queue: VecDeque::new(),
            running: None,
        }
    }

    fn schedule_on(&self) -> SerialResource {
        self.executor
    }

    fn run_on(&self) -> Option<SerialResource> {
        Some(self.executor)
    }

    fn deliver(&mut self, at: Timestamp, _: &Entry, _: &Placement) {
        self.queue.push_back(at);
    }

    fn finished(&mut self, at: Timestamp) {
        if self.running == Some(at) {
            self.running = None;
        }
    }

    fn ready(&mut self, _: &mut Work) -> Vec<Timestamp> {
        if self.running.is_some() {
            return Vec::new();
        }
        self.running = self.queue.pop_front();
        self.running.into_iter().collect()
    }
}
