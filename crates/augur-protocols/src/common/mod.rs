//! Machinery shared by protocols: building blocks that several concurrency-control protocols need
//! and that are not specific to any one of them.
//!
//! * [`locks`]: a deterministic, sans-IO lock manager with shared and exclusive modes, FIFO wait
//!   queues and the no-wait, wait-die and wound-wait deadlock-prevention policies (2PL and its
//!   variants, DST-2PL, Calvin's deterministic locking).
//! * [`vclock`]: vector clocks with the causal partial order (Walter, SSS, GTS/VTS baselines).

pub mod locks;
pub mod vclock;
