//! `sparkle`: speculative deterministic concurrency control (Li, Van Roy, Romano, "Sparkle:
//! Speculative Deterministic Concurrency Control for Partially Replicated Transactional Data
//! Stores", PVLDB 12(5), 2019), on the order-then-execute engine ([`crate::common::ordered`]).
//!
//! **Guarantee: strict serializability.** Transactions are ordered whole through the Raft
//! sequencer as for `calvin` and `s-smr`; each partition runs them before their turn, but
//! commits them finally strictly in that order, and only a run that read, for every key of its
//! partition, the version of the latest writer before it in the order (§4.1's read dependencies:
//! a run that missed an earlier write, or read a version that was removed, is aborted and runs
//! again), and, for every sibling's key, a final value. So every committed transaction saw
//! exactly the writes of those before it in the order, and a client hears of its commit only
//! after the final commit, which follows the Raft commit of its batch (real time is respected as
//! in `calvin`). Read-only transactions are ordered like the others.
//!
//! # The protocol (§4.1, Algorithms 1 and 2)
//!
//! * **Speculative execution.** A delivered transaction starts at once, within a window of
//!   [`WINDOW`] transactions started and not final per partition (the paper's `max_sc`), on the
//!   node's workers ([`augur_contract::Ctx::offload`]: real threads in the real runtimes, cores
//!   in the CPU model), out of order. Reads of the partition's keys return the latest version
//!   before the transaction's position, speculatively committed or final, and register a read
//!   dependency unless every earlier transaction is final; a read waits while an earlier
//!   transaction holds the key's lock.
//! * **Timestamped locks.** A run locks each key of its partition it wrote at its next stop (and
//!   at its end): it waits behind an earlier holder and preempts (aborts) a later one.
//! * **Speculative commit** (`Put`): at its end a run releases its locks and installs its
//!   versions; every later reader that read an older version missed this write and is aborted;
//!   waiters are woken.
//! * **Aborts.** An aborted instance releases its locks and removes its versions, which aborts
//!   every reader of them (cascading), and the transaction runs again as a new instance.
//! * **Final commit**, strictly in position order: the first transaction not final commits once
//!   its current instance is speculatively committed and not flagged; its versions go to the
//!   node's store, are logged, and the reporting partition answers the client.
//!
//! The partition-level state is [`crate::common::speculative`]; the engine's speculative mode
//! ([`crate::common::ordered::Schedule::SPECULATIVE`]) drives it; this module is the schedule: a
//! window over the delivered transactions, in order ([`Window`]).
//!
//! # Multi-partition transactions (§4.2): the conservative form only, so far
//!
//! Every participant runs the whole procedure; the values of its partition's keys go to the
//! siblings. This version implements the *conservative* variant of §5.4.1 (`variant=cons`): a
//! sub-transaction sends its reads only once it is the first transaction not final at its
//! partition, so every remote value a sibling consumes is final, and nothing needs confirming.
//! Speculative confirmation with local and remote abort numbers (`lan`, `ran`, Algorithm 3),
//! grouping and scheduling of heterogeneous batches (§4.2.2), the read-only fast path (§4.4)
//! and the mutants are the rest of issue 36; the design is in `docs/architecture/sparkle.md`.
//!
//! # What comes from the paper, and what is augur's choice
//!
//! From the paper: per-key version chains ordered by the writer's position, one timestamped
//! exclusive lock per key with preemption of later holders, read dependencies, the missed-write
//! and cascading aborts, final commit in order gated by the abort flag, and the speculation
//! window. augur's choices: Raft (raft-rs) orders the batches (the paper emulated consensus
//! with a delay); every lock, waiter and read dependency names an instance, so an entry left by
//! an aborted instance never aborts the one that replaced it (the paper leaves that implicit); a
//! flagged instance is aborted at once rather than at its next step (its run is on a worker;
//! what the worker returns for it is dropped); locks are taken at a run's stops (the engine sees
//! a run only when it needs a value), not at each write.

use crate::common::dispatch::Entry;
use crate::common::ordered::{self, Ordered, Schedule};
use crate::common::sequencer;
use crate::protocol_info::{
    Engine, IsolationLevel, NetworkModel, Promise, ProtocolInfo, SettingInfo,
};
use augur_contract::forms::ONE_SHOT_AND_BLIND_WRITES;
use augur_contract::{NodeEnv, SerialResource, Work};
use augur_types::{PartitionId, Placement, Timestamp};
use std::collections::{BTreeSet, VecDeque};

/// The speculation window: how many transactions a partition may have started and not final.
pub const WINDOW: SettingInfo = SettingInfo {
    name: "window",
    values: &["1", "2", "5", "10", "20", "40", "100", "200", "800"],
    default: "40",
    doc: "how many transactions a partition may have started and not finally committed (the paper's max_sc; 40 in its distributed code)",
};

/// How multi-partition transactions confirm the data they exchanged (Fig. 9 of the paper).
pub const VARIANT: SettingInfo = SettingInfo {
    name: "variant",
    values: &["cons"],
    default: "cons",
    doc: "how multi-partition transactions confirm exchanged data: `cons`, a sub-transaction sends its reads only once every earlier transaction at its partition is final (the speculative variants `cc`, `sc`, `sc-schedule` are not built yet)",
};

/// `sparkle`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "sparkle",
    isolation: IsolationLevel::StrictSerializable,
    paper: "Sparkle (PVLDB 12) §4: speculative deterministic concurrency control",
    summary: "orders whole one-shot transactions through Raft, then runs them speculatively out of order on the node's workers with timestamped locks and read dependencies, aborting and re-running what missed a write, and commits them finally in order",
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
        WINDOW,
        VARIANT,
    ],
    speculation: None,
    forms: ONE_SHOT_AND_BLIND_WRITES,
};

const MUTANTS: &[(&str, &str)] = &[
    (
        "no-read-deps",
        "reads register no dependency, so a write installed before a reader's position after it read an older version aborts nothing",
    ),
    (
        "early-final-commit",
        "a run's outcome is reported at its speculative commit, before it is first and unflagged, though a later instance may be the one that commits",
    ),
    (
        "no-cascade",
        "an aborted instance's versions are removed without aborting the transactions that read them",
    ),
    (
        "ignore-abort-flag",
        "a speculatively committed run flagged for abort (it missed a write, or read a removed version) is not run again and commits finally as it is",
    ),
];

/// A `sparkle` node.
pub type Sparkle = Ordered<Window>;

/// One partition's schedule: every delivered transaction starts, in order, as soon as fewer
/// than the window's size are started and not final there.
pub struct Window {
    size: usize,
    scheduler: SerialResource,
    /// Delivered, not started, in order.
    queue: VecDeque<Timestamp>,
    /// Started, not final.
    started: BTreeSet<Timestamp>,
}

impl Schedule for Window {
    const INFO: ProtocolInfo = INFO;
    const FOOTPRINTS: bool = false;
    const IN_ORDER: bool = true;
    const SPECULATIVE: bool = true;

    fn new(env: &NodeEnv, partition: PartitionId) -> Self {
        // The registry accepts only the values `WINDOW` lists.
        let size = env
            .options
            .settings
            .get(WINDOW.name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(40);
        Window {
            size,
            scheduler: SerialResource(partition.0),
            queue: VecDeque::new(),
            started: BTreeSet::new(),
        }
    }

    fn schedule_on(&self) -> SerialResource {
        self.scheduler
    }

    fn run_on(&self) -> Option<SerialResource> {
        None
    }

    fn deliver(&mut self, at: Timestamp, _: &Entry, _: &Placement) {
        self.queue.push_back(at);
    }

    fn finished(&mut self, at: Timestamp) {
        self.started.remove(&at);
    }

    fn ready(&mut self, _: &mut Work) -> Vec<Timestamp> {
        let mut ready = Vec::new();
        while self.started.len() < self.size {
            let Some(at) = self.queue.pop_front() else {
                break;
            };
            self.started.insert(at);
            ready.push(at);
        }
        ready
    }
}
