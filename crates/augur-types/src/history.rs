//! Recorded histories: every transaction attempt as its client saw it.
//!
//! A history is what the isolation checker reads. Each [`TxnRecord`] is one attempt (committed,
//! aborted, or with an outcome the client never learned), with its session, the times its client
//! invoked and finished it, and every read and write in program order. Writes include those a
//! transaction later overwrote itself, so an intermediate value that leaks can be recognised.
//!
//! Keys are recorded in their printed form (`shard/id`) and values as text: the workloads that
//! are checked write short unique text values. The on-disk form is JSON lines (a header line,
//! then one record per line); see `docs/history-format.md`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the JSON-lines history format; bumped on incompatible changes.
pub const HISTORY_FORMAT: u32 = 1;

/// The first line of a history file: what produced it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryHeader {
    pub format: u32,
    pub protocol: String,
    pub workload: String,
    pub seed: u64,
    /// The isolation level the protocol claims, as `augur protocols` names it.
    pub isolation: String,
    /// The fault schedule in force, as given to `--faults`.
    pub faults: String,
    /// The workload's settings (defaults included), for checks that need them (`bank`'s
    /// account count and opening balance).
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
}

/// One operation of a transaction, in the order the client issued it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Op {
    /// A read and the value it returned (`None`: the key had no value).
    Read { key: String, value: Option<String> },
    /// A write (`None`: a delete). Buffered by the client until commit.
    Write { key: String, value: Option<String> },
}

impl Op {
    pub fn key(&self) -> &str {
        match self {
            Op::Read { key, .. } | Op::Write { key, .. } => key,
        }
    }
}

/// How an attempt ended, as far as its client knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum RecordedOutcome {
    /// Committed; `commit_ts` is the protocol's commit timestamp (white-box evidence of version
    /// order only for protocols that say their timestamps order versions).
    Committed { commit_ts: u64 },
    /// Aborted, with the reason's name (see `AbortReason::name`).
    Aborted { reason: String },
    /// The client never learned the outcome (its coordinator stopped answering during commit).
    Unknown,
}

/// One transaction attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRecord {
    /// Position in the history, from 0; other records and reports refer to attempts by it.
    pub index: usize,
    /// The session (client) that ran the attempt.
    pub client: u64,
    /// The protocol's transaction id, when the coordinator assigned one.
    pub txn: Option<u64>,
    /// The transaction type (the workload procedure's name).
    pub name: String,
    pub read_only: bool,
    /// When the client invoked the attempt and when it learned how it ended, in microseconds
    /// (virtual time in the simulator).
    pub invoke_us: u64,
    pub complete_us: u64,
    pub ops: Vec<Op>,
    pub outcome: RecordedOutcome,
    /// The client never learned the attempt's operations (`ops` is empty): a one-shot
    /// transaction whose reply was lost, whose outcome is then unknown too. Whatever it wrote
    /// may be read by others, so the checker does not call a read of a value nobody is known to
    /// have written garbage while a history holds such attempts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ops_unknown: bool,
    /// The procedure a one-shot attempt called, with its arguments: what a serial replay of
    /// the history runs again (absent for interactive attempts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<crate::ProcedureCall>,
}

impl TxnRecord {
    pub fn is_committed(&self) -> bool {
        matches!(self.outcome, RecordedOutcome::Committed { .. })
    }

    pub fn is_aborted(&self) -> bool {
        matches!(self.outcome, RecordedOutcome::Aborted { .. })
    }
}

/// A whole recorded history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub header: HistoryHeader,
    /// Attempts ordered by `index`.
    pub txns: Vec<TxnRecord>,
}
