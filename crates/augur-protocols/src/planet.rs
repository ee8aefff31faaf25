//! `planet`: the PLANET-style baseline of the STR paper (§8): `clocksi-rep` plus the speculative
//! commit of at most one transaction per client.
//!
//! **Guarantee: snapshot isolation** for final committed transactions.
//!
//! PLANET (Pang et al.) lets an application act on a transaction's likely outcome before it is
//! known. The STR paper emulates it on its non-speculative base protocol: a client may
//! speculatively commit one transaction (answered once local certification passes) and run its
//! next one meanwhile, but no transaction ever reads uncommitted data, and timestamps come from
//! physical clocks as in `clocksi-rep`. Like the paper, this baseline leaves out PLANET's
//! analytical model of commit likelihood; the client's `can_spec_commit` hook is where such a
//! model would go.
//!
//! It runs on the STR engine ([`crate::str`]) with speculative reads and PreciseClock off and
//! speculation chains of one: a local-committed version is then a lock every reader waits on,
//! exactly like a prepared one, so the execution is `clocksi-rep`'s with a speculative commit at
//! local certification. The next transaction of a client flow depends on its speculatively
//! committed predecessor: it cannot final commit first, and aborts if the predecessor does.
//!
//! Fail-over is the engine's, as for `str`: on by default, `failover=off` keeps the placement's
//! masters (`docs/architecture/availability.md`).

use crate::protocol_info::SpeculationOffer;
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use crate::str::{Engine, Flavor};

/// `clocksi-rep` with one speculative commit per client and nothing else speculative.
pub struct OneSpeculativeCommit;

impl Flavor for OneSpeculativeCommit {
    const SPECULATIVE_READS: bool = false;
    const PRECISE_CLOCK: bool = false;
    const MAX_CHAIN: u32 = 1;
}

/// The `planet` protocol.
pub type Planet = Engine<OneSpeculativeCommit>;

/// `planet`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "planet",
    isolation: IsolationLevel::SnapshotIsolation,
    isolation_with: &[],
    paper: "STR §8 baseline (PLANET-style speculative commit over ClockSI-Rep)",
    summary: "clocksi-rep plus the speculative commit of at most one transaction per client; no speculative reads",
    engine: crate::protocol_info::Engine::TwoPhase,
    commit_order_evidence: true,
    promises: &[],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: &[],
    settings: crate::str::SETTINGS,
    speculation: Some(SpeculationOffer {
        reads: <OneSpeculativeCommit as Flavor>::SPECULATIVE_READS,
        max_chain: <OneSpeculativeCommit as Flavor>::MAX_CHAIN,
        default: "commits:1",
    }),
    forms: INTERACTIVE_AND_ONE_SHOT,
};
