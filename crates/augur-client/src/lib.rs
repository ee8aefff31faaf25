//! The client API of augur.
//!
//! A [`Session`] talks to one coordinator node through a [`Transport`]: in process, inside the
//! simulator, or over TCP. It runs interactive transactions ([`Txn`]): begin (optionally
//! read-only), read, write, commit or abort. Writes are buffered in the client and shipped with
//! the commit request; reads see the transaction's own buffered writes first.
//!
//! Every transaction ends in an [`Outcome`]: committed, aborted with a typed [`AbortReason`](augur_types::AbortReason), or
//! unknown (the coordinator stopped answering while the commit was in flight). Workloads are
//! written as [`Procedure`]s over the small [`Ops`] interface so the same code can later run as an
//! interactive transaction or as a one-shot procedure shipped to the participants.
//!
//! Protocols with speculation (STR) add two things, both opt-in per transaction. A transaction
//! begun with [`Session::begin_speculative`] may read versions of transactions that only
//! committed locally. [`Txn::commit_speculative`] may return at local commit with a
//! [`SpeculativeCommit`], whose final outcome arrives later: committed, or
//! [`AbortReason::Misspeculation`](augur_types::AbortReason::Misspeculation), after which the application must compensate for whatever it
//! externalized. A [`Procedure`] decides with [`Procedure::can_spec_commit`] (consulting its
//! [`TxnInfo`] and the per-type [`CommitStats`]) and hears of each step through
//! [`Procedure::on_spec_commit`] and [`Procedure::on_final_commit`], STR §4's programming model.
//! How much a client speculates is a [`Degree`]; a [`SpeculationTuner`] picks it at run time
//! (STR §6.7).

mod attempt;
mod history;
mod one_shot;
mod runner;
mod session;
mod transport;
mod tuner;

pub use attempt::{
    Attempt, RetryReport, Speculation, commit_attempt, resolve, run_body, run_once,
    run_speculative, run_with_retry, run_with_retry_for,
};
pub use history::{HistoryRecorder, history_op};
pub use one_shot::execute_one_shot;
// What procedures are written against, and how operations fail, are the contract's (a node
// runs the same procedures); the client library re-exports them for workload code.
pub use augur_contract::{
    CommitStats, DeclaredKeys, Ops, Outcome, Procedure, ProcedureCatalog, TransportError, TxnError,
    TxnInfo,
};
pub use runner::{Backoff, ChainRoom, DegreeChoice, RetryPolicy, RunObserver, Runner};
pub use session::{CommitProgress, Resolution, Session, SpeculativeCommit, TryingSince, Txn};
pub use transport::Transport;
pub use tuner::{Degree, SpeculationTuner, TunerSettings};

pub use augur_contract;
pub use augur_types;
