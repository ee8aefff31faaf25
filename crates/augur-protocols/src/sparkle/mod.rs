//! Sparkle: speculative deterministic concurrency control (Li, Van Roy, Romano, PVLDB 12(5),
//! 2019), on the order-then-execute engine ([`crate::common::ordered`]).
//!
//! **Work in progress (issue 36), not registered as a protocol yet.** This module holds the
//! partition-level core of §4.1, [`speculative`]: timestamped locks with preemption, read
//! dependencies, speculative commit with missed-write and cascading aborts, and final commit in
//! order, tested on the paper's single-partition examples. Wiring it into the engine (runs that
//! start before their turn, abort and run again), multi-partition transactions with `lan`/`ran`
//! confirmations (§4.2.1), grouping and scheduling (§4.2.2) and read-only transactions (§4.4)
//! come next; the design is in `docs/architecture/sparkle.md`.

pub mod speculative;
