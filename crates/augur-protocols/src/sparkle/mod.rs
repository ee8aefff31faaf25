//! `sparkle`: speculative deterministic concurrency control (Li, Van Roy, Romano, "Sparkle:
//! Speculative Deterministic Concurrency Control for Partially Replicated Transactional Data
//! Stores", PVLDB 12(5), 2019), on the order-then-execute engine ([`crate::common::ordered`]).
//!
//! **Guarantee: serializability; strict serializability with `read_only=ordered`.**
//! Transactions are ordered whole through the Raft sequencer as for `calvin` and `s-smr`; each
//! partition runs them before their turn, but commits them finally strictly in that order, and
//! only a run that read, for every key of its partition, the version of the latest writer before
//! it in the order (§4.1's read dependencies: a run that missed an earlier write, or read a
//! version that was removed, is aborted and runs again), and, for every sibling's key, a value
//! confirmed final (below). So every committed transaction saw exactly the writes of those
//! before it in the order, and a client hears of its commit only after the final commit, which
//! follows the Raft commit of its batch (real time is respected as in `calvin`). What gives up
//! strictness is the read-only fast path of §4.4 ([`READ_ONLY`], on by default as in the
//! paper): a read-only transaction of one partition the receiving node replicates runs at once
//! over that replica's final state, unordered, so it may miss a write that completed before it
//! began — its own session's included — while still reading a prefix of the order
//! (serializable: it is placed at the position that state is final through). With
//! `read_only=ordered` it is ordered like every other transaction, and the claim is strict.
//!
//! # The protocol (§4.1, Algorithms 1 and 2)
//!
//! * **Speculative execution.** A delivered transaction starts at once, within a window of
//!   [`WINDOW`] transactions started and not final per partition (the paper's `max_sc`), on the
//!   node's workers ([`augur_contract::Ctx::offload`]: real threads in the real runtimes, cores
//!   in the CPU model), out of order. A worker reads and locks its partition's keys itself,
//!   through the partition's speculative state and the node's final store, both shared behind
//!   locks, as the paper's executor threads share one partition's state; it hands the run back
//!   to the node only at a sibling's key, a lock or read that must wait, or the run's end.
//!   Reads of the partition's keys return the latest version
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
//! # Multi-partition transactions (§4.2, Algorithm 3)
//!
//! Every participant runs the whole procedure; the values of its partition's keys go to the
//! siblings, and a sub-transaction commits finally only once every sibling value it consumed is
//! known to be final. The variants of the paper's Fig. 9 (the setting [`VARIANT`]):
//!
//! * **`cons`** (§5.4.1's conservative form): a sub-transaction sends its reads only once it is
//!   the first transaction not final at its partition (its reads are then final), so a sibling
//!   consumes only final values.
//! * **`cc`** (conservative confirmation, the straw man of §4.2): it also sends each read at
//!   once, speculatively, tagged with its instance; siblings run on with them, and each commits
//!   finally once the same values come final (sent when the sender is first, as in `cons`).
//!   A value that differs from one a run consumed — a final one, or one of a later instance —
//!   aborts that run (a *remote* abort: it does not count in the partition's `lan`).
//! * **`sc`** (speculative confirmation, §4.2.1): as `cc`,
//!   and a sub-transaction whose partition's speculative prefix reaches it — every transaction
//!   before it there is speculatively committed and unflagged, and so is it — confirms its
//!   reads *conditionally*: they are final given that the sibling values the multi-partition
//!   transactions before it in that prefix consumed are final, and it lists those values. A
//!   sibling that ran each of those transactions knows their final inputs once it committed
//!   them, so it can commit without waiting for this partition's own final commits: the
//!   confirmations flow during speculation, and the final commits follow one another without
//!   a message between them. A condition naming a transaction the sibling did not run (another
//!   group's partition set) cannot be judged: the sibling waits for the final values, which is
//!   the paper's group-boundary confirmation.
//!
//! **Values, not abort numbers.** The paper confirms a sibling's data by its local abort number
//! (`lan`), and restarts siblings with a remote abort number (`ran`) when data it sent is
//! withdrawn. augur confirms the *values* instead: a confirmation carries the reads it vouches
//! for and the conditions it rests on, and a consumed value is confirmed only if it is equal.
//! That closes the three places where the digest found Algorithm 3 incomplete, by
//! construction: a late confirmation that raises a sibling's `lan` cannot be missed (nothing is
//! inferred from numbers: a run whose consumed value is never vouched for does not commit, and
//! one whose value is contradicted is aborted); confirmations name nothing an aborted instance
//! could be confused with (an instance tag is used only to drop a superseded speculative value,
//! never to confirm one); and an earlier single-partition transaction that aborts a non-first
//! member of a group leaves that member outside the speculative prefix, so it confirms nothing
//! until it has run again. The mutant `no-lan-check` commits without the check.
//!
//! **Replicas.** The paper runs one sub-transaction per partition; augur runs one at each
//! replica, and each speculates on its own timing. Speculative values and confirmations go only
//! within a *plane*: replica rank *i* of a partition to rank *i* (modulo the replica count) of
//! each sibling partition. Final values go to every replica of every sibling, so a
//! sub-transaction whose plane sibling is down or slow still commits.
//!
//! # Heterogeneous batches (§4.2.2): `sc-schedule`, the default
//!
//! `sc` over batches arranged by [`crate::common::grouping`]: the MPTs of a batch grouped by
//! partition set, each partition's SPTs spread in chunks between the groups it is in, the same
//! positions at every node. Consecutive MPTs of one partition set then confirm one another
//! during speculation, and local work runs while confirmations travel. The mutant
//! `local-grouping` lets each node order the groups its own way.
//!
//! # Read-only transactions (§4.4)
//!
//! A read-only transaction of one partition is served by the fast path above (or ordered, with
//! `read_only=ordered`; also when the receiving node does not replicate its partition, or its
//! run turns out to read another). A read-only MPT is ordered, and grouping puts it before
//! everything else of its batch; it starts only once it is the first transaction not final at
//! a partition, so it reads the state the earlier batches left, final: no read dependency, no
//! abort, nothing to confirm (with `sc-schedule`; the other variants run it like any MPT). The
//! mutant `ro-mpt-current` starts it at once over each partition's final state as it is then.
//!
//! # What comes from the paper, and what is augur's choice
//!
//! From the paper: per-key version chains ordered by the writer's position, one timestamped
//! exclusive lock per key with preemption of later holders, read dependencies, the missed-write
//! and cascading aborts, final commit in order gated by the abort flag, and the speculation
//! window. augur's choices: Raft (raft-rs) orders the batches (the paper emulated consensus
//! with a delay); every lock, waiter and read dependency names an instance, so an entry left by
//! an aborted instance never aborts the one that replaced it (the paper leaves that implicit); a
//! flagged instance is aborted at once rather than at its next step (its run is on a worker,
//! which stops at its next read once it sees its instance replaced; what it returns is
//! dropped); locks are taken at a run's reads (the engine sees a run only when it needs a
//! value), not at each write; one lock guards a partition's whole speculative state (the paper
//! does not say how its threads synchronise), held for one read or lock request at a time.

use crate::common::dispatch::Entry;
use crate::common::ordered::{self, Exchange, Ordered, Schedule, SpeculativeMode};
use crate::common::speculative::Switches;
use crate::common::{horizons, sequencer};
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
    values: &["cons", "cc", "sc", "sc-schedule"],
    default: "sc-schedule",
    doc: "how multi-partition transactions confirm exchanged data: `cons`, a sub-transaction sends its reads only once every earlier transaction at its partition is final; `cc`, it also sends them speculatively at once, and a sibling that ran on with them commits finally once the same values come final; `sc`, it also confirms them conditionally as soon as everything before it at its partition is speculatively committed; `sc-schedule`, `sc` over batches grouped by partition set with each partition's single-partition transactions spread between the groups",
};

/// How read-only transactions run (§4.4).
pub const READ_ONLY: SettingInfo = SettingInfo {
    name: "read_only",
    values: &["fast", "ordered"],
    default: "fast",
    doc: "how a read-only transaction runs: `fast`, one of a single partition at once over the final state of a replica the receiving node holds, unordered (the paper's fast path: `sparkle` then claims serializability, not strict: such a read may miss a write that completed before it began, the session's own included); `ordered`, like every other transaction (strict serializability)",
};

/// Whether a read waits for an earlier lock holder (§4.1; off only saves no work).
pub const READ_WAITS: SettingInfo = SettingInfo {
    name: "read_waits",
    values: &["on", "off"],
    default: "on",
    doc: "whether a read of a key an earlier transaction holds the lock of waits for its write (`on`, the paper's) or reads the latest version at once (`off`: more aborts, same outcome)",
};

/// Whether an earlier writer preempts a later lock holder (§4.1).
pub const PREEMPTION: SettingInfo = SettingInfo {
    name: "preemption",
    values: &["on", "off"],
    default: "on",
    doc: "whether an earlier transaction that takes a lock a later one holds aborts it at once (`on`, the paper's) or takes the lock over and lets it fail at its own speculative commit (`off`: wasted work, same outcome)",
};

/// `sparkle`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "sparkle",
    isolation: IsolationLevel::Serializable,
    isolation_with: &[("read_only", "ordered", IsolationLevel::StrictSerializable)],
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
        horizons::LEFT_BEHIND_SETTING,
        WINDOW,
        VARIANT,
        READ_ONLY,
        READ_WAITS,
        PREEMPTION,
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
        "no-lan-check",
        "a multi-partition run commits finally with sibling values it consumed speculatively that nothing confirmed, neither the same values sent final nor a conditional confirmation (`cc`, `sc`: the paper's check of the sibling's final lan)",
    ),
    (
        "local-grouping",
        "with `variant=sc-schedule`, each node orders a batch's groups its own way, so the nodes disagree on the positions of multi-partition transactions (the paper's grouping by local arrival order)",
    ),
    (
        "ro-mpt-current",
        "with `variant=sc-schedule`, a read-only multi-partition transaction starts at once and reads each partition's final state as it is then, instead of the state its position gives it (the end of the previous batch)",
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

    fn mode(env: &NodeEnv) -> SpeculativeMode {
        // The registry accepts only the values the settings list.
        let setting = |s: &SettingInfo| {
            let value = env.options.settings.get(s.name).map(String::as_str);
            value.unwrap_or(s.default)
        };
        let variant = setting(&VARIANT);
        SpeculativeMode {
            exchange: match variant {
                "cons" => Exchange::Final,
                "cc" => Exchange::ConfirmedWhenFirst,
                _ => Exchange::ConfirmedSpeculatively,
            },
            grouped: variant == "sc-schedule",
            fast_reads: setting(&READ_ONLY) == "fast",
            switches: Switches {
                read_waits: setting(&READ_WAITS) == "on",
                preemption: setting(&PREEMPTION) == "on",
            },
        }
    }

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
