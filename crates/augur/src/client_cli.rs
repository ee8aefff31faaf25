//! `augur get`, `augur put` and `augur txn`: one transaction against a running cluster, from a
//! script or a terminal. Keys and values are taken as the bytes of the arguments (a key's first
//! four bytes are its shard tag, which places it; see `augur_types::Key`).
//!
//! Exit status: 0 when the transaction committed (for `get`, the value is on standard output),
//! 1 when it aborted (the reason on standard error, in words) or the cluster could not be used,
//! 2 for bad input, 3 when `get` found no value under the key.

use crate::BadInput;
use crate::cluster::Cluster;
use augur_client::{Session, TxnError};
use augur_runtime::tcp::TcpTransport;
use augur_types::{Key, NodeId, Value};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// How long each request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Exit status of `get` when the key holds no value.
pub const ABSENT: u8 = 3;

/// One operation of `augur txn`.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Get(String),
    Put(String, String),
    Delete(String),
}

impl Op {
    /// Parse `get KEY`, `put KEY VALUE` or `del KEY` (one argument each, words split on
    /// whitespace; a value is the rest of the argument after the key).
    pub fn parse(text: &str) -> Result<Op, String> {
        let text = text.trim();
        let (verb, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let rest = rest.trim_start();
        let (key, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let value = value.trim_start();
        match (verb, key.is_empty(), value.is_empty()) {
            ("get", false, true) => Ok(Op::Get(key.to_string())),
            ("del", false, true) => Ok(Op::Delete(key.to_string())),
            ("put", false, false) => Ok(Op::Put(key.to_string(), value.to_string())),
            _ => Err(format!(
                "'{text}': expected `get KEY`, `put KEY VALUE` or `del KEY`"
            )),
        }
    }

    fn key(&self) -> Key {
        match self {
            Op::Get(k) | Op::Put(k, _) | Op::Delete(k) => Key::from_bytes(k.as_bytes()),
        }
    }
}

/// What `augur txn` saw: each `get`'s key and value, in order.
pub type Reads = Vec<(String, Option<Value>)>;

/// How a command-line transaction ended, for its exit status.
pub enum Ended {
    Committed(Reads),
    Aborted(String),
}

/// Run `ops` as one transaction at node `node` (default: the master of the first key's
/// partition, so that a single-key transaction needs no other node).
pub fn run(config: &Path, node: Option<u32>, ops: &[Op]) -> anyhow::Result<Ended> {
    let cluster = Cluster::load(config)?;
    let Some(first) = ops.first() else {
        return Err(BadInput("no operations: nothing to do".into()).into());
    };
    let home = match node {
        Some(id) => NodeId(id),
        None => cluster
            .placement
            .master(cluster.placement.partition_of(&first.key())),
    };
    let read_only = ops.iter().all(|op| matches!(op, Op::Get(_)));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let session = cluster.open_session(home, REQUEST_TIMEOUT).await?;
        Ok(match transact(&session, read_only, ops).await {
            Ok(reads) => Ended::Committed(reads),
            Err(TxnError::Aborted(reason)) => {
                Ended::Aborted(format!("aborted: {} ({reason})", reason.describe()))
            }
            Err(other) => return Err(anyhow::anyhow!("{other}")),
        })
    })
}

async fn transact(
    session: &Session<TcpTransport>,
    read_only: bool,
    ops: &[Op],
) -> Result<Reads, TxnError> {
    let mut txn = session.begin(read_only).await?;
    let mut reads = Vec::new();
    for op in ops {
        match op {
            Op::Get(key) => reads.push((key.clone(), txn.read(&op.key()).await?)),
            Op::Put(_, value) => {
                txn.write(op.key(), Some(Value::from(value.clone().into_bytes())))?
            }
            Op::Delete(_) => txn.write(op.key(), None)?,
        }
    }
    txn.commit().await?;
    Ok(reads)
}

/// Print what `augur get` read: the value's bytes and a newline.
pub fn print_value(value: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(value)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_parse_and_refuse_what_is_not_one() {
        assert_eq!(Op::parse("get a"), Ok(Op::Get("a".into())));
        assert_eq!(
            Op::parse(" put  acct  100 dollars "),
            Ok(Op::Put("acct".into(), "100 dollars".into()))
        );
        assert_eq!(Op::parse("del a"), Ok(Op::Delete("a".into())));
        for bad in ["", "get", "put a", "get a b", "scan a", "del"] {
            assert!(Op::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
