//! The client protocol: what a client session sends to the node that coordinates its transactions,
//! and what comes back. The same messages travel in process, through the simulator, and over TCP.

use crate::{ClientId, Key, RequestId, Timestamp, TxnId, Value};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a transaction did not commit. Benchmarks count aborts by reason and clients decide from it
/// whether to retry, so reasons are data, never strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbortReason {
    /// Certification found a committed version newer than the transaction's snapshot.
    WriteWriteConflict,
    /// Wait-die: a younger transaction met a conflicting prepared version of an older one.
    WaitDie,
    /// Read-set validation failed (optimistic protocols).
    ValidationFailed,
    /// A lock could not be acquired in time.
    LockTimeout,
    /// A speculatively committed transaction aborted after all; the client must compensate.
    Misspeculation,
    /// Aborted because a transaction it depended on aborted.
    CascadingAbort,
    /// The client asked for the abort.
    UserRollback,
    /// A participant did not answer within the protocol's bound.
    Timeout,
    /// The snapshot is older than the garbage-collection watermark.
    SnapshotTooOld,
    /// The coordinator restarted or forgot the transaction.
    TransactionLost,
    /// The coordinator refused a malformed request; the transaction did nothing.
    InvalidRequest,
    /// A partition it wrote changed master or in-sync replicas while it committed, or a node
    /// it asked no longer serves the partition (fail-over); running it again may succeed.
    Reconfigured,
}

impl AbortReason {
    /// Whether running the same transaction again may succeed.
    pub fn is_retryable(self) -> bool {
        !matches!(
            self,
            AbortReason::UserRollback | AbortReason::Misspeculation
        )
    }

    /// The stable snake_case name used in results files.
    pub fn name(self) -> &'static str {
        match self {
            AbortReason::WriteWriteConflict => "write_write_conflict",
            AbortReason::WaitDie => "wait_die",
            AbortReason::ValidationFailed => "validation_failed",
            AbortReason::LockTimeout => "lock_timeout",
            AbortReason::Misspeculation => "misspeculation",
            AbortReason::CascadingAbort => "cascading_abort",
            AbortReason::UserRollback => "user_rollback",
            AbortReason::Timeout => "timeout",
            AbortReason::SnapshotTooOld => "snapshot_too_old",
            AbortReason::TransactionLost => "transaction_lost",
            AbortReason::InvalidRequest => "invalid_request",
            AbortReason::Reconfigured => "reconfigured",
        }
    }
}

impl AbortReason {
    /// What happened, in words, for people (the command-line client shows it).
    pub fn describe(self) -> &'static str {
        match self {
            AbortReason::WriteWriteConflict => {
                "another transaction wrote one of its keys after it began (write-write conflict)"
            }
            AbortReason::WaitDie => {
                "it met an older transaction holding one of its keys, and gave way (wait-die)"
            }
            AbortReason::ValidationFailed => "a key it read changed before it could commit",
            AbortReason::LockTimeout => "it waited too long for a lock",
            AbortReason::Misspeculation => {
                "it committed speculatively, but what it read speculatively aborted"
            }
            AbortReason::CascadingAbort => "a transaction whose writes it read aborted",
            AbortReason::UserRollback => "the client rolled it back",
            AbortReason::Timeout => "a node it needed did not answer in time",
            AbortReason::SnapshotTooOld => {
                "its snapshot is older than what the nodes still keep (garbage-collected)"
            }
            AbortReason::TransactionLost => {
                "its coordinator no longer knows it: it sat idle longer than the cluster keeps an idle transaction (idle_txn_timeout_ms), or the coordinator restarted"
            }
            AbortReason::InvalidRequest => "the coordinator refused a malformed request",
            AbortReason::Reconfigured => {
                "a partition it needed changed master or replicas while it ran (a node failed over)"
            }
        }
    }
}

impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One operation of an interactive transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientOp {
    /// Start a transaction; `read_only` lets protocols take a cheaper path. `speculative` lets
    /// it read versions of transactions that only committed locally (STR's speculative reads);
    /// protocols without internal speculation ignore it. `trying_for_us`: how long the client
    /// has been trying to commit this transaction, in microseconds since its first attempt
    /// began (0 for a first attempt): a retry keeps its age under wait-die, so it grows older
    /// than newcomers instead of dying behind them for ever. A coordinator believes only so
    /// much of it (`augur_contract::age`).
    Begin {
        read_only: bool,
        #[serde(default)]
        speculative: bool,
        #[serde(default)]
        trying_for_us: u64,
    },
    Read {
        txn: TxnId,
        key: Key,
    },
    /// Commit with the write set the client buffered during execution (`None` deletes a key).
    /// Clients buffer writes themselves, so a transaction costs one round trip per read plus one
    /// for the commit, whatever the distance between client and coordinator.
    ///
    /// With `speculative`, a protocol that supports speculative commits may answer
    /// [`ClientReply::SpecCommitted`] as soon as the transaction committed locally; the client
    /// learns the final outcome with [`ClientOp::AwaitOutcome`]. Other protocols answer with the
    /// final outcome as usual.
    Commit {
        txn: TxnId,
        writes: Vec<(Key, Option<Value>)>,
        #[serde(default)]
        speculative: bool,
    },
    /// Wait for the final outcome of a speculatively committed transaction: `Committed` or
    /// `Aborted` when it is reached while the client waits, [`ClientReply::Resolved`] when it
    /// was reached before. `Rejected(UnknownTransaction)` means the coordinator no longer knows
    /// it (it restarted), so the outcome is unknown.
    AwaitOutcome {
        txn: TxnId,
    },
    Abort {
        txn: TxnId,
    },
    /// A whole transaction in one request (the one-shot form): the registered procedure `call`
    /// names, run once at the node. `read_only`, `speculative_reads`, `speculative_commit` and
    /// `trying_for_us` mean what they mean for [`ClientOp::Begin`] and [`ClientOp::Commit`].
    /// Answered with
    /// [`ClientReply::Executed`], or `Rejected` when the protocol does not serve this form
    /// ([`RequestError::UnsupportedForm`]) or the node does not know the procedure.
    Execute {
        call: ProcedureCall,
        read_only: bool,
        #[serde(default)]
        speculative_reads: bool,
        #[serde(default)]
        speculative_commit: bool,
        #[serde(default)]
        trying_for_us: u64,
    },
    /// The coordinator node's protocol counters ([`ClientReply::NodeStats`]), such as how many
    /// reads were served speculatively. Answered by the runtime, never by a transaction, so it
    /// may be sent at any time; benchmarks read it before and after their measurement window.
    NodeStats,
}

/// A form in which a client submits a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestForm {
    /// Begin, reads one at a time through the coordinator, buffered writes shipped with the
    /// commit (`ClientOp::Begin`, `Read`, `Commit`, `AwaitOutcome`, `Abort`): what
    /// `augur_client::Txn` does.
    Interactive,
    /// The whole transaction in one request (`ClientOp::Execute`): a registered procedure and
    /// its arguments.
    OneShot,
}

impl RequestForm {
    /// The form `op` belongs to; `None` for requests of no transaction (`NodeStats`).
    pub fn of(op: &ClientOp) -> Option<RequestForm> {
        match op {
            ClientOp::Begin { .. }
            | ClientOp::Read { .. }
            | ClientOp::Commit { .. }
            | ClientOp::AwaitOutcome { .. }
            | ClientOp::Abort { .. } => Some(RequestForm::Interactive),
            ClientOp::Execute { .. } => Some(RequestForm::OneShot),
            ClientOp::NodeStats => None,
        }
    }

    /// Parse `interactive` or `one-shot`.
    pub fn parse(name: &str) -> Option<RequestForm> {
        match name {
            "interactive" => Some(RequestForm::Interactive),
            "one-shot" => Some(RequestForm::OneShot),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RequestForm::Interactive => "interactive",
            RequestForm::OneShot => "one-shot",
        }
    }
}

impl fmt::Display for RequestForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A registered procedure and its arguments: the whole of a one-shot transaction. `args` is the
/// procedure's own postcard encoding and captures every random choice the transaction makes, so
/// running the same call against the same data does the same thing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcedureCall {
    /// The workload that registered the procedure (`tpcc`).
    pub workload: String,
    /// The procedure's name within the workload (`new_order`).
    pub procedure: String,
    pub args: Vec<u8>,
    /// How `args` are encoded. Only ever postcard on the wire (the field is not sent); JSON
    /// where a person wrote the arguments (`augur shell`'s `exec`), to be decoded locally into
    /// the procedure, whose own `Procedure::call` encodes them again for the wire.
    #[serde(skip)]
    pub args_format: ArgsFormat,
}

/// How a [`ProcedureCall`]'s arguments are encoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ArgsFormat {
    /// The procedure's postcard encoding: what travels.
    #[default]
    Postcard,
    /// JSON text, with keys in their printed form (`SHARD/REST`).
    Json,
}

impl ProcedureCall {
    /// The call of `workload`'s `procedure` with `args`.
    pub fn encode<A: Serialize>(workload: &str, procedure: &str, args: &A) -> ProcedureCall {
        ProcedureCall {
            workload: workload.to_string(),
            procedure: procedure.to_string(),
            args: postcard::to_stdvec(args).expect("procedure arguments encode"),
            args_format: ArgsFormat::Postcard,
        }
    }

    /// The arguments, as the procedure's type `A`.
    pub fn decode<A: serde::de::DeserializeOwned>(&self) -> Result<A, RequestError> {
        let bad = |e: &dyn std::fmt::Display| {
            RequestError::Invalid(format!(
                "bad arguments for procedure {}/{}: {e}",
                self.workload, self.procedure
            ))
        };
        match self.args_format {
            ArgsFormat::Postcard => postcard::from_bytes(&self.args).map_err(|e| bad(&e)),
            ArgsFormat::Json => serde_json::from_slice(&self.args).map_err(|e| bad(&e)),
        }
    }
}

/// One operation a one-shot transaction performed, in program order, with what a read returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExecutedOp {
    Read { key: Key, value: Option<Value> },
    Write { key: Key, value: Option<Value> },
}

/// What running a one-shot transaction did ([`ClientReply::Executed`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    /// The transaction the node ran it as; `None` if it was refused before it began.
    pub txn: Option<TxnId>,
    /// Every read (with its value) and write of the attempt, in program order, so its history
    /// record is as complete as an interactive transaction's.
    pub ops: Vec<ExecutedOp>,
    /// What the procedure noted for the speculation callbacks (`Ops::note`).
    pub info: std::collections::BTreeMap<String, f64>,
    /// How the attempt ended: `Committed`, `SpecCommitted`, `Aborted` or `Rejected`, as the
    /// interactive commit (or the operation that ended it early) would have been answered.
    pub end: ClientReply,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRequest {
    pub client: ClientId,
    pub id: RequestId,
    pub op: ClientOp,
}

/// A request the coordinator refused without touching any transaction state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum RequestError {
    #[error("unknown transaction {0:?} (never begun here, or already finished)")]
    UnknownTransaction(TxnId),
    #[error("transaction {0:?} was begun read-only and cannot write")]
    WriteInReadOnly(TxnId),
    #[error("{0}")]
    Invalid(String),
    /// The protocol does not serve transactions in this form (`interactive` or `one-shot`).
    #[error("this protocol does not serve {0} transactions")]
    UnsupportedForm(String),
    /// The node has no procedure registered under this `workload/procedure` name.
    #[error("no procedure registered as {0}")]
    UnknownProcedure(String),
    /// The protocol serves one-shot transactions but cannot run this procedure in one request
    /// (`rococo` must know a procedure's keys before running it, and this one's keys depend on
    /// what it reads): the attempt took no effect, and the client runs the procedure
    /// interactively instead. The text names the procedure and the reason.
    #[error("{0}; run it interactively")]
    NotOneShot(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ClientReply {
    Begun {
        txn: TxnId,
        snapshot: Timestamp,
    },
    Value(Option<Value>),
    Committed {
        commit_ts: Timestamp,
    },
    /// Speculatively committed: the transaction committed locally at `local_commit_ts` and its
    /// result may be externalized; the final outcome is still pending.
    SpecCommitted {
        local_commit_ts: Timestamp,
    },
    /// The transaction is over and none of its writes took effect.
    Aborted(AbortReason),
    /// The final outcome of a speculatively committed transaction, reached before the client
    /// asked for it ([`ClientOp::AwaitOutcome`]): committed at `commit_ts`, or aborted when
    /// `None`. `decided_ago_us` is how long before this reply the coordinator reached it, so the
    /// client can date the final commit without sharing the node's clock.
    Resolved {
        commit_ts: Option<Timestamp>,
        decided_ago_us: u64,
    },
    Rejected(RequestError),
    /// The result of a one-shot transaction ([`ClientOp::Execute`]).
    Executed(Box<Execution>),
    /// The node's protocol counters since it started, by name (empty for a protocol that keeps
    /// none).
    NodeStats(std::collections::BTreeMap<String, u64>),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientResponse {
    pub id: RequestId,
    pub reply: ClientReply,
}
