//! Vocabulary shared by every layer of augur: identifiers, keys and values, timestamps, typed abort
//! reasons, the client request/reply protocol, isolation levels, and data placement (data centres,
//! nodes, partitions, replicas, latency profiles).
//!
//! Nothing here does I/O; these are plain data types, serialisable with serde so that the same
//! values cross the in-process network, the simulated network and TCP frames unchanged.

mod client;
pub mod history;
mod hybrid;
mod ids;
mod isolation;
mod key;
pub mod latency;
pub mod placement;

pub use client::{
    AbortReason, ArgsFormat, ClientOp, ClientReply, ClientRequest, ClientResponse, ExecutedOp,
    Execution, ProcedureCall, RequestError, RequestForm,
};
pub use hybrid::Hybrid;
pub use ids::{ClientId, DcId, NodeId, PartitionId, RequestId, Timestamp, TxnId};
pub use isolation::IsolationLevel;
pub use key::{Key, Value};
pub use latency::LatencyProfile;
pub use placement::{HashParams, Layout, Placement, PlacementError};
