//! Hand-built histories for the tests: operations, outcomes and a builder of transaction
//! records.

// Each test crate uses a different part of this module.
#![allow(dead_code)]

use augur_types::history::{History, HistoryHeader, Op, RecordedOutcome, TxnRecord};
use std::collections::BTreeMap;

pub fn r(key: &str, value: Option<&str>) -> Op {
    Op::Read {
        key: key.into(),
        value: value.map(Into::into),
    }
}

pub fn w(key: &str, value: &str) -> Op {
    Op::Write {
        key: key.into(),
        value: Some(value.into()),
    }
}

/// List-append's append: read the list, write it back with `new` at the end.
pub fn append(key: &str, read: Option<&str>, new: u64) -> [Op; 2] {
    let written = match read {
        None | Some("") => new.to_string(),
        Some(l) => format!("{l} {new}"),
    };
    [r(key, read), w(key, &written)]
}

pub fn ok(ts: u64) -> RecordedOutcome {
    RecordedOutcome::Committed { commit_ts: ts }
}

pub fn aborted() -> RecordedOutcome {
    RecordedOutcome::Aborted {
        reason: "write_write_conflict".into(),
    }
}

#[derive(Default)]
pub struct Builder {
    pub txns: Vec<TxnRecord>,
}

impl Builder {
    /// A transaction of `client`, running from `invoke` to `complete` (µs).
    pub fn txn(
        &mut self,
        client: u64,
        (invoke, complete): (u64, u64),
        ops: Vec<Op>,
        outcome: RecordedOutcome,
    ) -> usize {
        let index = self.txns.len();
        self.txns.push(TxnRecord {
            index,
            client,
            txn: Some(index as u64),
            name: "t".into(),
            read_only: ops.iter().all(|o| matches!(o, Op::Read { .. })),
            invoke_us: invoke,
            complete_us: complete,
            ops,
            outcome,
            ops_unknown: false,
            call: None,
        });
        index
    }

    /// A transaction on its own client, overlapping every other such transaction (so no
    /// session or real-time order relates it to anything).
    pub fn concurrent(&mut self, ops: Vec<Op>, outcome: RecordedOutcome) -> usize {
        let client = 100 + self.txns.len() as u64;
        self.txn(client, (0, 1_000), ops, outcome)
    }

    pub fn history(&self) -> History {
        History {
            header: HistoryHeader {
                format: 1,
                protocol: "test".into(),
                workload: "test".into(),
                seed: 0,
                isolation: "none".into(),
                faults: "none".into(),
                settings: BTreeMap::new(),
            },
            txns: self.txns.clone(),
        }
    }
}

pub fn cat(parts: Vec<Vec<Op>>) -> Vec<Op> {
    parts.into_iter().flatten().collect()
}
