//! Recording every transaction attempt of a session as a history for `augur check`: what an
//! attempt gathers while it runs and how it lands in the shared log.

use crate::session::Session;
use crate::transport::Transport;
use augur_contract::Outcome;
use augur_types::history::{Op, RecordedOutcome, TxnRecord};
use augur_types::{AbortReason, ExecutedOp, ProcedureCall, TxnId, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Collects the [`TxnRecord`] of every transaction attempt of the sessions that share it, in the
/// order the attempts ended. Cloning shares the log.
#[derive(Clone, Default)]
pub struct HistoryRecorder {
    log: Arc<Mutex<Vec<TxnRecord>>>,
}

impl HistoryRecorder {
    pub fn new() -> Self {
        HistoryRecorder::default()
    }

    pub(crate) fn push(&self, mut record: TxnRecord) {
        let mut log = self.log.lock().expect("history log");
        record.index = log.len();
        log.push(record);
    }

    /// The attempts recorded so far, indexed in the order they ended.
    pub fn records(&self) -> Vec<TxnRecord> {
        self.log.lock().expect("history log").clone()
    }

    pub fn len(&self) -> usize {
        self.log.lock().expect("history log").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The part of a [`TxnRecord`] gathered while an attempt runs.
pub(crate) struct AttemptLog {
    pub(crate) name: &'static str,
    pub(crate) invoked: Duration,
    pub(crate) ops: Vec<Op>,
    pub(crate) outcome: Option<RecordedOutcome>,
    /// The procedure a one-shot attempt called (boxed: an attempt log travels inside the
    /// speculative-commit handle, which is kept small).
    pub(crate) call: Option<Box<ProcedureCall>>,
}

pub(crate) fn text(value: &Option<Value>) -> Option<String> {
    value
        .as_ref()
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

pub(crate) fn aborted(reason: AbortReason) -> RecordedOutcome {
    RecordedOutcome::Aborted {
        reason: reason.name().to_string(),
    }
}

impl<T: Transport> Session<T> {
    /// Push a finished attempt to the recorder; `unfinished` is the outcome when none was set.
    pub(crate) fn record(
        &self,
        id: TxnId,
        read_only: bool,
        log: AttemptLog,
        unfinished: AbortReason,
    ) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        recorder.push(TxnRecord {
            index: 0,
            client: self.id().0,
            txn: Some(id.0),
            name: log.name.to_string(),
            read_only,
            invoke_us: log.invoked.as_micros() as u64,
            complete_us: self.transport.now().as_micros() as u64,
            ops: log.ops,
            outcome: log.outcome.unwrap_or_else(|| aborted(unfinished)),
            ops_unknown: false,
            call: log.call.map(|call| *call),
        });
    }

    /// Record a one-shot attempt invoked at `invoked` whose reply never came: its outcome and
    /// its operations are unknown.
    pub(crate) fn record_lost(
        &self,
        name: &'static str,
        read_only: bool,
        invoked: Duration,
        call: Option<ProcedureCall>,
    ) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        recorder.push(TxnRecord {
            index: 0,
            client: self.id().0,
            txn: None,
            name: name.to_string(),
            read_only,
            invoke_us: invoked.as_micros() as u64,
            complete_us: self.transport.now().as_micros() as u64,
            ops: Vec::new(),
            outcome: RecordedOutcome::Unknown,
            ops_unknown: true,
            call,
        });
    }
}

/// How a history records `outcome`.
pub(crate) fn recorded(outcome: Outcome) -> RecordedOutcome {
    match outcome {
        Outcome::Committed { commit_ts } => RecordedOutcome::Committed {
            commit_ts: commit_ts.0,
        },
        Outcome::Aborted(reason) => aborted(reason),
        Outcome::Unknown => RecordedOutcome::Unknown,
    }
}

/// A one-shot operation as a history records it (also what the serial replay of a history
/// compares its runs' operations with).
pub fn history_op(op: &ExecutedOp) -> Op {
    match op {
        ExecutedOp::Read { key, value } => Op::Read {
            key: key.to_string(),
            value: text(value),
        },
        ExecutedOp::Write { key, value } => Op::Write {
            key: key.to_string(),
            value: text(value),
        },
    }
}
