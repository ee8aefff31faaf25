//! `augur get`, `augur put` and `augur txn`: one transaction against a running cluster, from a
//! script or a terminal. Keys and values are taken as the bytes of the arguments (a key's first
//! four bytes are its shard tag, which places it; see `augur_types::Key`).
//!
//! A transaction that aborts for a reason that may pass, or whose node cannot be reached before
//! its commit, runs again (at another of the key's replicas, then any node), so that a command
//! does not fail while a dead master is replaced.
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

/// How many times a command-line transaction runs at most: enough to outlast a master's
/// replacement (its lease, the clock-skew bound and a Raft commit: about 1.2 s by default).
const ATTEMPTS: u32 = 8;

/// The wait before the first retry; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_millis(800);

/// How one attempt failed.
enum Failed {
    /// Worth running again, at the next node if `move_on`: the transaction did not commit (an
    /// abort that may pass, or the node was unreachable before the commit was sent).
    Again { why: String, move_on: bool },
    /// The end: an abort that will not pass, or a commit whose outcome is unknown.
    Final(anyhow::Result<Ended>),
}

/// Run `ops` as one transaction, coordinated by node `node` or, by default, by the first node
/// that answers of the first key's replicas (its partition's master first, so that a single-key
/// transaction needs no other node) and then the others. An attempt that aborts for a reason
/// that may pass (a conflict, a master being replaced: `reconfigured`, a participant that did
/// not answer) runs again after a short randomised wait; one whose node cannot be reached
/// before its commit moves to the next node. A commit whose outcome is unknown is not run
/// again: it is reported.
pub fn run(config: &Path, node: Option<u32>, ops: &[Op]) -> anyhow::Result<Ended> {
    let cluster = Cluster::load(config)?;
    let Some(first) = ops.first() else {
        return Err(BadInput("no operations: nothing to do".into()).into());
    };
    let homes: Vec<NodeId> = match node {
        Some(id) => vec![NodeId(id)],
        None => {
            let placement = &cluster.placement;
            cluster.nodes_from(placement.replicas(placement.partition_of(&first.key())))
        }
    };
    let read_only = ops.iter().all(|op| matches!(op, Op::Get(_)));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut at = 0;
        let mut backoff = FIRST_BACKOFF;
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            let home = homes[at % homes.len()];
            match attempt_at(&cluster, home, read_only, ops).await {
                Ok(reads) => return Ok(Ended::Committed(reads)),
                Err(Failed::Final(ended)) => return ended,
                Err(Failed::Again { why, move_on }) => {
                    last = why;
                    if move_on {
                        at += 1;
                    }
                }
            }
            if attempt < ATTEMPTS {
                tokio::time::sleep(backoff.mul_f64(rand::random::<f64>())).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        Ok(Ended::Aborted(format!("{last} ({ATTEMPTS} attempts)")))
    })
}

/// One attempt of `ops` coordinated by `home`.
async fn attempt_at(
    cluster: &Cluster,
    home: NodeId,
    read_only: bool,
    ops: &[Op],
) -> Result<Reads, Failed> {
    let session = match cluster.open_session(home, REQUEST_TIMEOUT).await {
        Ok(session) => session,
        // A node not in the cluster file, say: no other attempt changes that.
        Err(e) if e.downcast_ref::<BadInput>().is_some() => return Err(Failed::Final(Err(e))),
        Err(e) => {
            let why = format!("{e:#}");
            return Err(Failed::Again { why, move_on: true });
        }
    };
    transact(&session, read_only, ops)
        .await
        .map_err(|(e, committing)| match e {
            TxnError::Aborted(reason) => {
                let why = format!("aborted: {} ({reason})", reason.describe());
                if reason.is_retryable() {
                    Failed::Again {
                        why,
                        move_on: false,
                    }
                } else {
                    Failed::Final(Ok(Ended::Aborted(why)))
                }
            }
            TxnError::Unavailable(e) if !committing => Failed::Again {
                why: format!("node {home} did not answer: {e}"),
                move_on: true,
            },
            other => Failed::Final(Err(anyhow::anyhow!("{other}"))),
        })
}

/// Run `ops` in one transaction; an error says whether it came from the commit (after which
/// the outcome may be unknown).
async fn transact(
    session: &Session<TcpTransport>,
    read_only: bool,
    ops: &[Op],
) -> Result<Reads, (TxnError, bool)> {
    let before_commit = |e| (e, false);
    let mut txn = session.begin(read_only).await.map_err(before_commit)?;
    let mut reads = Vec::new();
    for op in ops {
        match op {
            Op::Get(key) => {
                let value = txn.read(&op.key()).await.map_err(before_commit)?;
                reads.push((key.clone(), value))
            }
            Op::Put(_, value) => txn
                .write(op.key(), Some(Value::from(value.clone().into_bytes())))
                .map_err(before_commit)?,
            Op::Delete(_) => txn.write(op.key(), None).map_err(before_commit)?,
        }
    }
    txn.commit().await.map_err(|e| (e, true))?;
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
