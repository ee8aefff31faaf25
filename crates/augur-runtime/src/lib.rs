//! The runtimes that run augur's protocols.
//!
//! A protocol is a sans-IO state machine (`augur_contract::Protocol`): it is handed one input
//! at a time (a client request, a message from a peer, a timer it set) together with a `Ctx`
//! that carries the node's clock reading and seeded random numbers and collects the effects the
//! handler asks for (messages to send, replies to clients, timers to set). It never does I/O,
//! never reads the OS clock, never starts a thread: CPU-heavy work without side effects it hands
//! off (`Ctx::offload`), and the runtime runs it on a worker pool ([`workers`]) or, in the
//! simulator, on a core of the CPU model. Because of that, the same protocol code runs
//!
//! * in the [`sim`] runtime: one thread, virtual time, a latency matrix between data centres and
//!   every choice drawn from one seed, so the same seed yields a byte-identical history;
//! * in the [`local`] runtime: real time on tokio, every node a task of one process, messages
//!   delayed by the latency matrix (the embedded default behind `augur bench`);
//! * over [`tcp`]: one node per process, length-delimited frames carrying a versioned envelope.
//!
//! Clients are async code over [`augur_client::Transport`]; each runtime provides a transport.
//!
//! Every runtime gives a node a write-ahead log ([`wal`]): what a handler persists is durable
//! before that handler's messages and replies leave the node, and a node that restarts is
//! rebuilt from its log alone. In the simulator a crash drops the node's whole memory, and
//! records not yet synced with it.

pub mod clock;
pub mod local;
mod output;
pub mod sim;
pub mod tcp;
pub mod telemetry;
pub mod wal;
pub mod workers;

pub use output::{Held, HeldOutput};
