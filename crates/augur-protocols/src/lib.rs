//! augur's concurrency-control protocols.
//!
//! Each protocol is one module named after it, opening with the paper section it implements and
//! the isolation level it guarantees, and describing itself in a `pub const INFO` for the
//! registry. Every protocol is a [`augur_contract::Protocol`] state
//! machine over the shared multi-version store, so it runs unchanged in the simulator, in process
//! and over TCP. The modules read bottom-up: [`protocol_info`], the vocabulary a protocol
//! describes itself with; [`common`], the machinery protocols share; one module per protocol;
//! and [`registry`], the list of them all, which is how the rest of augur finds them by name at
//! run time.

pub mod calvin;
pub mod clocksi_rep;
pub mod common;
pub mod dst_2pl;
pub mod dst_occ;
pub mod gts;
pub mod nocc;
pub mod oab_spec;
pub mod occ;
pub mod planet;
pub mod protocol_info;
pub mod rc;
pub mod registry;
pub mod rococo;
pub mod s_smr;
pub mod sm_rep;
pub mod sparkle;
pub mod sss;
pub mod str;
pub mod two_pl;
pub mod twopc_baseline;
pub mod vts;
pub mod walter;

/// The 2PC family's participant side and durable records, now under [`common`]; kept here for
/// callers outside the crate (benches, recovery tools).
pub use common::replica;

pub use registry::{
    IsolationLevel, ProtocolInfo, ProtocolVisitor, RequestForm, UnknownProtocol, visit,
};
