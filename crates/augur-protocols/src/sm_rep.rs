//! `sm-rep`: non-speculative state-machine replication, the baseline of the OAB study (Peluso
//! et al., "On the Viability of Speculative Transactional Replication in Database Systems",
//! §IV): a request runs only once it is finally delivered, and commits in the final order.
//!
//! **Guarantee: strict serializability.** As `oab-spec`'s (see [`crate::oab_spec`]): every node
//! commits the requests one at a time in the Raft log's order, each only with reads that are
//! the newest committed versions, and answers its client from that commit; read-only requests
//! go through the log too.
//!
//! # The protocol
//!
//! The paper's baseline has a TO-queue and a COMMIT-queue: a request starts when it reaches the
//! TO-queue's head and moves at once to the COMMIT-queue, so requests run concurrently, and
//! commits wait for the COMMIT-queue's head. Here the TO-queue's head is final delivery itself
//! (requests are delivered in order) and the COMMIT-queue is the node's queue of positions
//! ([`crate::common::replicated`]): `execution=concurrent` (the default) starts every request
//! on final delivery, over committed versions only, and commits it at the head if its reads are
//! still the newest committed versions, else runs it again there; `execution=serial` runs each
//! one only at the head, one at a time.
//!
//! # How it differs from the paper's baseline
//!
//! The paper ran stock PostgreSQL under snapshot isolation with lock waits, commits forced into
//! the total order and conflicts broken by lock timeouts: not serializable (write skew commits),
//! and not deterministic (what commits depends on timing, so replicas could diverge; it ran one
//! database). augur's version validates instead of locking: deterministic, serializable and
//! never waiting on a timeout, so it is a stronger baseline than the paper's, and gains the
//! paper measured against lock waits may not reproduce against it.

use crate::common::ordered::WORKERS;
use crate::common::replicated::{self, EXECUTION, Replicated, Replication};
use crate::common::sequencer;
use crate::protocol_info::{
    Engine, IsolationLevel, NetworkModel, Promise, ProtocolInfo, SettingInfo,
};
use augur_contract::forms::ONE_SHOT_AND_BLIND_WRITES;

/// `sm-rep`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "sm-rep",
    isolation: IsolationLevel::StrictSerializable,
    isolation_with: &[],
    paper: "OAB study (PostgreSQL case study) §IV baseline: state-machine replication",
    summary: "every replica runs each one-shot request once Raft has finally delivered it, beside the ones before it, and commits it in the final order if its reads are still the newest committed versions, else runs it again at the head",
    engine: Engine::Replicated,
    commit_order_evidence: true,
    promises: &[Promise::SerialReplay],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: &[],
    settings: SETTINGS,
    speculation: None,
    forms: ONE_SHOT_AND_BLIND_WRITES,
};

const SETTINGS: &[SettingInfo] = &[
    sequencer::EPOCH_SETTING,
    sequencer::VOTERS_SETTING,
    replicated::FINAL_DELAY_SETTING,
    EXECUTION,
    WORKERS,
];

/// The rules `sm-rep` gives the replicated node.
pub struct StateMachine;

impl Replication for StateMachine {
    const INFO: ProtocolInfo = INFO;
    const SPECULATIVE: bool = false;
}

/// An `sm-rep` node.
pub type SmRep = Replicated<StateMachine>;
