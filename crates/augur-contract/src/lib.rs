//! The contract between augur's protocols and the runtimes that run them, with no I/O in it.
//!
//! A protocol is a sans-IO state machine ([`Protocol`]): it is handed one input at a time (a
//! client request, a message from a peer, a timer it set) together with a [`Ctx`] that carries the
//! node's clock reading and seeded random numbers and collects the effects the handler asks for
//! (messages to send, replies to clients, records to persist, timers to set, work to run off
//! the handler's thread). It never does I/O, never reads the OS clock, never starts a thread.
//! `augur_runtime` carries the effects out: in a deterministic simulator, in one process on
//! tokio, or one node per process over TCP.
//!
//! What else both sides must agree on lives here too: the checks a runtime makes of a peer's
//! message before a handler sees it ([`inbound`]), the request forms a protocol serves and the
//! procedures a node runs one-shot requests with ([`forms`], [`procedure`]), the driver that
//! runs a procedure's body at a node ([`driver`]), how a transaction operation fails ([`txn`]),
//! the log policy a node's options choose ([`log_policy`]), and how old a transaction is under
//! wait-die ([`age`]).
//!
//! This crate depends on the shared types alone, so protocol code compiles without an async
//! runtime, TLS or the client library.

pub mod age;
pub mod driver;
pub mod forms;
pub mod inbound;
pub mod log_policy;
pub mod procedure;
mod protocol;
pub mod txn;

pub use procedure::{BoxFuture, CommitStats, DeclaredKeys, Ops, Procedure, ProcedureCatalog};
pub use protocol::{
    Ctx, Effects, NodeEnv, Offload, Protocol, ProtocolOptions, SerialResource,
    WORKER_THREADS_SETTING, Work, deliver_client,
};
pub use txn::{Outcome, TransportError, TxnError, TxnInfo, reply_for};
