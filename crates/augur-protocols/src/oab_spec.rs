//! `oab-spec`: speculative transactional replication over optimistic atomic broadcast (Peluso,
//! Palmieri, Quaglia, Ravindran, "On the Viability of Speculative Transactional Replication in
//! Database Systems: a Case Study with PostgreSQL", §III-B), on augur's Raft sequencer.
//!
//! **Guarantee: strict serializability** (the paper names none; its validation makes the
//! committed history equivalent to the serial one in the final order). Every node commits the
//! requests one at a time in the order of the Raft log, and commits an instance only if every
//! version it read is, at that moment, the newest committed version of its key: all the
//! requests before it have committed and none after it, so it saw exactly the state the serial
//! execution in log order gives it. Clients hear of a request only from its committed instance,
//! after its entry committed in the log, so a request sent after another's answer gets a later
//! position. Read-only requests go through the log too.
//!
//! # The protocol, and where each rule is
//!
//! * **Optimistic and final delivery** (§I, §IV's A1/A2): the receiving node sends the request
//!   to every node, each of which starts it on arrival, and proposes it to the sequencer; the
//!   committed entry's delivery (held `final_delay_ms` first, when set) gives its position
//!   ([`crate::common::replicated`]).
//! * **Complete and multiple active versions** (§III-B1): an instance's writes are buffered
//!   and installed, when it ends, as uncommitted versions beside any number of others of the
//!   same key; none blocks and none aborts a writer.
//! * **Maximal visibility and forking** (§III-B1, §III-B2): a read sees the newest committed
//!   version and every completed uncommitted one of another request (never its own request's
//!   instances: they cannot commit together), and the instance forks a child for each version
//!   past the first. The child is the parent replayed: a new run of the procedure given the
//!   parent's values for its earlier reads (the paper's inherited `statementSet`), which it
//!   first validates (each version still there and, if committed, still newest; else it runs
//!   from the start: an *inheritance failure*). Children fork again.
//! * **Committability and families** (§III-B3): at the head of the TO-queue, the lowest
//!   completed instance whose every read is the newest committed version commits, its
//!   siblings abort, and the request leaves the family table (the committed flag): its late
//!   instances stop, and late copies are dropped. With none committable and none still running
//!   on valid reads, it runs again at the head over committed versions.
//!
//! # Choices augur makes where the paper is silent
//!
//! * **Which version a read takes, and which it forks for**: first the version of the nearest
//!   request before it in this node's arrival order that wrote the key (the optimistic order's
//!   guess, as AGGRO would), then the newest committed one, then the rest. Forks stop at
//!   `max_instances` per request and `max_live_instances` per node; past a cap the read takes
//!   its first choice only. A cap costs a re-execution at the head, never correctness.
//! * **Deletes** are tombstone versions, one per instance, forked over like any version (the
//!   paper hides speculatively deleted tuples instead). Reads of absent keys are validated.
//! * **One-shot only**: forking an interactive client's transaction is unsound (its later
//!   commands were computed from the parent's reads), so only registered procedures run here.
//! * **Lazy cascades**: an instance that read a version of an aborted instance is not re-run;
//!   it cannot commit (its read no longer holds), as in the paper. Nor does a read learn of a
//!   version that appears after it: two requests whose instances overlap do not see each other,
//!   and the later one runs again at the head. `eager_chain=on` (an extension, off by default)
//!   re-runs a request's first instance from such a read when an earlier request's first
//!   instance completes, so the first instances follow the arrival order eagerly (AGGRO).
//!
//! # Mutants
//!
//! Each breaks one rule: `no-read-validation`, `double-commit`, `no-inherited-validation`,
//! `leak-speculative`; `keep-aborted` is a control that must stay clean.

use crate::common::ordered::WORKERS;
use crate::common::replicated::{self, Replicated, Replication};
use crate::common::sequencer;
use crate::protocol_info::{
    Engine, IsolationLevel, NetworkModel, Promise, ProtocolInfo, SettingInfo,
};
use augur_contract::forms::ONE_SHOT_AND_BLIND_WRITES;

/// `oab-spec`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "oab-spec",
    isolation: IsolationLevel::StrictSerializable,
    isolation_with: &[],
    paper: "OAB speculative replication (PostgreSQL case study) §III-B",
    summary: "every replica starts each one-shot request on optimistic delivery, explores several serialization orders by forking an instance per visible uncommitted version, and commits, in Raft's final order, the instance whose reads are all the newest committed versions",
    engine: Engine::Replicated,
    commit_order_evidence: true,
    promises: &[Promise::SerialReplay],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: MUTANTS,
    settings: SETTINGS,
    speculation: None,
    forms: ONE_SHOT_AND_BLIND_WRITES,
};

const SETTINGS: &[SettingInfo] = &[
    sequencer::EPOCH_SETTING,
    sequencer::VOTERS_SETTING,
    replicated::FINAL_DELAY_SETTING,
    replicated::MAX_INSTANCES,
    replicated::MAX_LIVE_INSTANCES,
    replicated::EAGER_CHAIN,
    WORKERS,
];

const MUTANTS: &[(&str, &str)] = &[
    (
        "no-read-validation",
        "the head commits its request's first completed instance without checking that its reads are the newest committed versions (lost updates; caught at seed 1 of list-append and rw-register, fault-free on lan and under --faults all on 3dc)",
    ),
    (
        "double-commit",
        "no committed flag: a request's other instances go on after it committed, and one that completes with reads that are then the newest commits too (a request applied twice; caught at seed 1 of list-append and rw-register, fault-free on lan and under --faults all on 3dc)",
    ),
    (
        "no-inherited-validation",
        "a forked child neither validates the reads it inherits from its parent nor has them validated at the head (stale reads committed; caught at seed 1 of list-append and rw-register, fault-free on lan and under --faults all on 3dc)",
    ),
    (
        "leak-speculative",
        "the client hears the outcome of its request's first instance rather than of the instance that committed (reads the committed history never had; caught at seed 1 of list-append and rw-register, fault-free on lan and under --faults all on 3dc)",
    ),
    (
        "keep-aborted",
        "[masked] a control, not a bug: aborted instances' versions stay readable; the head's validation rejects every read of them, so the checker must stay silent (40 seeds of list-append, rw-register and bank under --faults all on 3dc pass)",
    ),
];

/// The rules `oab-spec` gives the replicated node.
pub struct Speculative;

impl Replication for Speculative {
    const INFO: ProtocolInfo = INFO;
    const SPECULATIVE: bool = true;
}

/// An `oab-spec` node.
pub type OabSpec = Replicated<Speculative>;
