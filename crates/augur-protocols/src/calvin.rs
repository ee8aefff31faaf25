//! `calvin`: deterministic ordered locking (Thomson et al., "Calvin: Fast Distributed
//! Transactions for Partitioned Database Systems", SIGMOD '12), as the Sparkle paper rebuilt
//! and measured it (Sparkle, PVLDB 12, §2 and §5: "one locker thread plus four workers"): whole
//! transactions are ordered first, then each partition's single lock thread grants every
//! transaction its locks in that order before it runs, and workers run the transactions whose
//! locks are all granted, in parallel.
//!
//! **Guarantee: strict serializability.** Two transactions that touch a common key lock it, at
//! every replica of its partition, in the order of their positions, and the later one starts
//! only after the earlier one finished and released it; each run reads the state just below its
//! own position. So every transaction sees exactly the writes of the transactions before it in
//! the order, and the committed transactions are equivalent to the serial execution in the
//! order. The order respects real time as in `s-smr`: a client hears of a commit only after its
//! batch was committed in the Raft log, and a transaction submitted later lands at a higher
//! index. Read-only transactions are ordered and locked like any other.
//!
//! # The protocol
//!
//! * **Footprints.** Calvin must know the keys a transaction reads and writes before it is
//!   ordered (its lock set). The receiving node runs the procedure once over absent values and
//!   takes the keys that run touched ([`Footprint`](crate::common::dispatch::Footprint)). A
//!   *dependent* transaction, whose keys depend on what it reads (a TPC-C Stock-Level, a
//!   Payment by customer name), is predicted wrongly that way: its run at its position reads
//!   or writes outside the footprint, ends with no effect at every participant (mispredicted),
//!   and is *reconnoitred* — run read-only over current values at its submitter, remote keys
//!   read from a replica of their partition — and ordered again with the footprint found
//!   (Calvin's OLLP, "optimistic lock location prediction"). From the first misprediction on,
//!   the submitter reconnoitres every call of that procedure type before ordering it.
//! * **Lock names.** A key's lock is the key itself unless the workload names a coarser one on
//!   its shard (`Procedures::lock_name`): TPC-C's order, new-order, order-line and history rows
//!   are keyed by a district's counter (D_NEXT_O_ID, the history number), and are locked
//!   through the district's row, which every transaction that numbers them writes. A footprint
//!   keeps the keys it reads (each partition reads them up front) and the locks of those it
//!   writes; a run's write is inside it when its lock is. New-Order and Payment by customer id
//!   are then independent, as in the paper; without it every New-Order would be dependent (its
//!   rows' keys come from D_NEXT_O_ID) and mispredicted whenever another New-Order of its
//!   district was ordered between its reconnaissance and its run: at one warehouse and 1,000
//!   clients, 11,267 of 11,537 runs were mispredicted and `calvin` committed 73 tps.
//! * **Locking.** Each partition's lock thread (a [`SerialResource`] in the CPU model) takes the
//!   delivered transactions in order and requests each one's whole lock set at once —
//!   exclusive on the keys it writes, shared on those it only reads
//!   ([`LockSets`] with [`Policy::Wait`]): requests queue in arrival order, so a lock goes to
//!   the transactions in the order of their positions, and since each transaction requests all
//!   its locks before the next requests any, no cycle of waits can form.
//! * **Execution.** A transaction whose locks are all granted runs on a worker: its procedure run
//!   is handed off the node's handler thread ([`augur_contract::Ctx::offload`]) to the node's
//!   worker pool in the real runtimes, to any free core in the simulator's CPU model, and its
//!   result comes back to the node, which applies it (setting `workers=inline` runs it on the
//!   handler thread instead, for comparison). Each
//!   participant reads its part of the footprint's reads and sends it to the participants that
//!   write (Calvin's *active* participants); a participant that writes nothing (*passive*) does
//!   only that and releases its locks; each active participant runs the procedure over its own
//!   values and the ones received, applies its partition's writes and releases. A run that
//!   meets a key outside its footprint ends mispredicted at every active participant alike
//!   (they run the same code over the same values).
//!
//! Everything but the schedule — submission, reconnaissance, the exchange of values, outcomes,
//! recovery, garbage collection — is the order-then-execute node ([`crate::common::ordered`]);
//! this module is the schedule: ordered locking on one lock thread per partition
//! ([`OrderedLocking`]).
//!
//! # What comes from the papers, and what is augur's choice
//!
//! From the papers: the sequencer's epochs, a lock manager per partition on a single thread
//! acquiring item locks in sequence order before execution, workers running the transactions,
//! passive participants sending their reads to the active ones, and OLLP for dependent
//! transactions. augur's choices: Raft (raft-rs) as the agreement (the paper's code simulated
//! consensus with a delay); the prediction is validated by the keys the run touches (a read
//! outside the predicted reads, a write outside the predicted writes), which is exactly what
//! the lock set must cover, where Calvin compares the values reconnaissance saw — a value that
//! changed without changing the keys costs augur no restart; dependence is learned per
//! procedure type from the first misprediction, where Calvin's code marks the dependent types
//! by hand (`RECON_MASK`). augur's TPC-C Payment selects a customer by last name 60% of the
//! time, so it is dependent here, where the paper treats it as independent.
//!
//! # Mutants
//!
//! * `locks-out-of-order`: the lock thread takes the transactions delivered since its last pass
//!   newest first, so a later transaction may lock a key ahead of an earlier one (the digest's
//!   C1).
//! * `unvalidated-recon`: a run that strays outside its footprint goes on: it reads a local key
//!   it holds no lock on from the store, a remote one as absent, and applies writes outside the
//!   footprint (the digest's C2).

use crate::common::dispatch::Entry;
use crate::common::lock_sets::LockSets;
use crate::common::locks::Policy;
use crate::common::ordered::{self, Ordered, Schedule};
use crate::common::{horizons, sequencer};
use crate::protocol_info::Engine;
use crate::protocol_info::{IsolationLevel, NetworkModel, Promise, ProtocolInfo};
use augur_contract::{NodeEnv, SerialResource, Work};
use augur_contract::{forms::ONE_SHOT_AND_BLIND_WRITES, forms::Procedures};
use augur_types::{Key, PartitionId, Placement, Timestamp, TxnId};

/// `calvin`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "calvin",
    isolation: IsolationLevel::StrictSerializable,
    isolation_with: &[],
    paper: "Sparkle (PVLDB 12) §5 baseline: Calvin (SIGMOD 2012)",
    summary: "orders whole one-shot transactions through Raft, then each partition's lock thread grants their item locks in that order and workers run them; dependent transactions are reconnoitred first",
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
        ordered::WORKERS,
        horizons::LEFT_BEHIND_SETTING,
    ],
    speculation: None,
    forms: ONE_SHOT_AND_BLIND_WRITES,
};

const MUTANTS: &[(&str, &str)] = &[
    (
        "locks-out-of-order",
        "the lock thread takes the transactions delivered since its last pass newest first, so a later transaction can lock a key ahead of an earlier one",
    ),
    (
        "unvalidated-recon",
        "a transaction that reads or writes outside its predicted footprint goes on without the locks instead of aborting and being reconnoitred again",
    ),
    (
        "answer-below-floor",
        "a replica answers a sibling's value before its floor (a copy brought only the newest versions through it, or collection ran below it), where the version read may be missing: a stale or absent value (caught under `left_behind_ms=500` by its own test)",
    ),
];

/// A `calvin` node.
pub type Calvin = Ordered<OrderedLocking>;

/// One partition's lock manager, on its lock thread. Locks are held by positions rather than
/// transaction ids: a transaction ordered again after a misprediction may briefly hold locks at
/// two positions (a passive participant of the first attempt may not have released yet).
pub struct OrderedLocking {
    lock_thread: SerialResource,
    partition: PartitionId,
    locks: LockSets,
    /// Names each key's lock (`Procedures::lock_name`).
    procedures: Procedures,
    /// Delivered transactions whose locks are not requested yet: position, locks to read,
    /// locks to write (of this partition).
    delivered: Vec<(Timestamp, Vec<Key>, Vec<Key>)>,
    /// Finished transactions whose locks are not released yet.
    finished: Vec<Timestamp>,
    out_of_order: bool,
}

/// The lock owner of the transaction at `at`.
fn owner(at: Timestamp) -> TxnId {
    TxnId(at.0)
}

impl Schedule for OrderedLocking {
    const INFO: ProtocolInfo = INFO;
    const FOOTPRINTS: bool = true;
    const IN_ORDER: bool = false;

    fn new(env: &NodeEnv, partition: PartitionId) -> Self {
        OrderedLocking {
            lock_thread: SerialResource(partition.0),
            partition,
            locks: LockSets::new(Policy::Wait),
            procedures: env.procedures.clone(),
            delivered: Vec::new(),
            finished: Vec::new(),
            out_of_order: env.options.mutant.as_deref() == Some("locks-out-of-order"),
        }
    }

    fn schedule_on(&self) -> SerialResource {
        self.lock_thread
    }

    fn run_on(&self) -> Option<SerialResource> {
        None
    }

    fn deliver(&mut self, at: Timestamp, entry: &Entry, placement: &Placement) {
        let here = |key: &&Key| placement.partition_of(key) == self.partition;
        // A read locks the key's lock, which every writer of the key takes (the footprint's
        // writes are locks already).
        let (reads, writes) = match &entry.footprint {
            Some(fp) => (
                fp.reads
                    .iter()
                    .filter(here)
                    .map(|k| self.procedures.lock_name(k))
                    .collect(),
                fp.writes.iter().filter(here).cloned().collect(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        self.delivered.push((at, reads, writes));
    }

    fn finished(&mut self, at: Timestamp) {
        self.finished.push(at);
    }

    /// Release what finished, then request the lock sets of what was delivered, in order; the
    /// transactions now holding their whole set may run.
    fn ready(&mut self, work: &mut Work) -> Vec<Timestamp> {
        let mut ready = Vec::new();
        let mut operations = 0usize;
        for at in std::mem::take(&mut self.finished) {
            operations += 1;
            ready.extend(
                self.locks
                    .release(owner(at))
                    .into_iter()
                    .map(|t| Timestamp(t.0)),
            );
        }
        let mut delivered = std::mem::take(&mut self.delivered);
        if self.out_of_order {
            delivered.reverse();
        }
        for (at, reads, writes) in delivered {
            operations += reads.len() + writes.len();
            // Under `Policy::Wait` nothing is refused.
            if let Ok(true) = self.locks.request(owner(at), (), &reads, &writes) {
                ready.push(at);
            }
        }
        work.steps = work
            .steps
            .saturating_add(u32::try_from(operations).unwrap_or(u32::MAX));
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::dispatch::{Body, Footprint};
    use augur_contract::ProtocolOptions;
    use augur_types::{LatencyProfile, NodeId};
    use std::sync::Arc;

    fn env(mutant: Option<&str>) -> NodeEnv {
        let profile = LatencyProfile::named("lan").unwrap().truncated(1).unwrap();
        let options = ProtocolOptions {
            mutant: mutant.map(str::to_string),
            ..ProtocolOptions::default()
        };
        NodeEnv {
            id: NodeId(0),
            placement: Arc::new(Placement::ring(profile, 1, 1).unwrap()),
            options: Arc::new(options),
            procedures: Default::default(),
        }
    }

    /// A transaction reading `reads` and writing `writes` (keys of partition 0).
    fn entry(reads: &[u64], writes: &[u64]) -> Entry {
        let keys = |ks: &[u64]| -> Vec<Key> { ks.iter().map(|k| Key::numbered(0, *k)).collect() };
        let writes = keys(writes);
        Entry {
            txn: TxnId::new(augur_types::NodeId(0), 1),
            partitions: vec![PartitionId(0)],
            body: Body::Writes(writes.iter().map(|k| (k.clone(), None)).collect()),
            footprint: Some(Footprint {
                reads: keys(reads).into_iter().collect(),
                writes: writes.into_iter().collect(),
            }),
        }
    }

    fn deliver(s: &mut OrderedLocking, env: &NodeEnv, txns: &[(u64, Entry)]) {
        for (at, e) in txns {
            s.deliver(Timestamp(*at), e, &env.placement);
        }
    }

    fn ready(s: &mut OrderedLocking) -> Vec<u64> {
        s.ready(&mut Work::default()).iter().map(|t| t.0).collect()
    }

    #[test]
    fn locks_go_to_transactions_in_the_order_and_pass_on_at_release() {
        let env = env(None);
        let mut s = OrderedLocking::new(&env, PartitionId(0));
        // 1 writes a; 2 reads a and b; 3 reads b; 4 writes b.
        let txns = [
            (1, entry(&[], &[1])),
            (2, entry(&[1, 2], &[])),
            (3, entry(&[2], &[])),
            (4, entry(&[], &[2])),
        ];
        deliver(&mut s, &env, &txns);
        // 3 shares b with 2 and goes at once; 2 waits for 1's write of a; 4 for both readers.
        assert_eq!(ready(&mut s), vec![1, 3]);
        s.finished(Timestamp(1));
        assert_eq!(ready(&mut s), vec![2]);
        s.finished(Timestamp(3));
        assert_eq!(ready(&mut s), Vec::<u64>::new());
        s.finished(Timestamp(2));
        assert_eq!(ready(&mut s), vec![4]);
    }

    #[test]
    fn the_mutant_lets_a_later_transaction_lock_first() {
        let env = env(Some("locks-out-of-order"));
        let mut s = OrderedLocking::new(&env, PartitionId(0));
        deliver(
            &mut s,
            &env,
            &[(1, entry(&[], &[1])), (2, entry(&[], &[1]))],
        );
        assert_eq!(ready(&mut s), vec![2], "2 took a before 1");
    }
}
