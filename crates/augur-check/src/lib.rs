//! The isolation checker.
//!
//! It reads a recorded [`History`](augur_types::history::History), builds the dependency graph
//! Adya defines (write-write, write-read and read-write edges between committed transactions,
//! plus session and real-time order), searches it for cycles, classifies every anomaly, and
//! judges the history against an [`IsolationLevel`](augur_types::IsolationLevel) read as the set of
//! anomalies it proscribes ([`Proscribes`]).
//! Workload invariants (the `bank` totals) are checked alongside, and so, on the same graph,
//! are the promises some protocols make about their commit timestamps
//! ([`timestamps_order_dependencies`], [`bounded_staleness`]).

pub mod anomaly;
pub mod bank;
pub mod checker;
pub mod jsonl;

pub use anomaly::{
    Anomaly, AnomalyKind, CheckReport, CheckStats, CycleKind, CycleOrder, Edge, Proscribes,
    Undecided, Verdict,
};
pub use checker::{
    CheckOptions, SolverBudget, ValueModel, bounded_staleness, check, timestamps_order_dependencies,
};
