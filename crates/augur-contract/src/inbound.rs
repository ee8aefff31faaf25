//! What a node checks of a message from a peer before its protocol sees it.
//!
//! A protocol's handlers index their state by the ids a message carries (partitions, the nodes
//! that coordinate transactions, the keys a write touches). A message that names a partition the
//! cluster does not have, or a key this node does not replicate, is not something a correct peer
//! sends, and a handler trusting it could panic or corrupt its state. So every runtime that takes
//! messages off a wire hands each one to [`CheckMessage::check`] first and drops it, with a
//! logged reason, when the check fails; the handler only ever sees messages that name things
//! this node has.
//!
//! The check is about *shape* (ids that exist, keys in the partitions they are sent for, sizes),
//! not about protocol state: a well-formed message about a transaction the node has never heard
//! of still reaches the handler, which must tolerate it (ignore it, or answer that it does not
//! know the transaction). The simulator asserts that every message a protocol sends passes its
//! own check, so a check that is too strict fails every test that runs the protocol.

use augur_types::{ClientOp, Key, NodeId, PartitionId, Placement, TxnId};

/// Why a message was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadMessage(pub String);

/// The receiving end of a message: who sends it to whom, in which cluster.
#[derive(Clone, Copy, Debug)]
pub struct Inbound<'a> {
    /// The node receiving the message.
    pub me: NodeId,
    /// The node that sent it (authenticated by the transport, not taken from the message).
    pub from: NodeId,
    pub placement: &'a Placement,
}

impl Inbound<'_> {
    /// A message from this sender that fails a protocol's own check, saying `what` is wrong.
    pub fn bad(&self, what: String) -> BadMessage {
        BadMessage(what)
    }

    /// `p` is a partition of the cluster.
    pub fn partition(&self, p: PartitionId) -> Result<(), BadMessage> {
        if (p.0 as usize) < self.placement.partition_count() {
            Ok(())
        } else {
            Err(self.bad(format!(
                "partition {} does not exist (the cluster has {})",
                p.0,
                self.placement.partition_count()
            )))
        }
    }

    /// `p` is a partition this node replicates.
    pub fn partition_here(&self, p: PartitionId) -> Result<(), BadMessage> {
        self.partition(p)?;
        if self.placement.replicates(self.me, p) {
            Ok(())
        } else {
            Err(self.bad(format!(
                "partition {} is not replicated on {}",
                p.0, self.me
            )))
        }
    }

    /// This node is the master of `p`.
    pub fn master_here(&self, p: PartitionId) -> Result<(), BadMessage> {
        self.partition(p)?;
        if self.placement.master(p) == self.me {
            Ok(())
        } else {
            Err(self.bad(format!(
                "{} is not the master of partition {}",
                self.me, p.0
            )))
        }
    }

    /// `key` belongs to partition `p`.
    pub fn key_in(&self, key: &Key, p: PartitionId) -> Result<(), BadMessage> {
        let actual = self.placement.partition_of(key);
        if actual == p {
            Ok(())
        } else {
            Err(self.bad(format!(
                "key {key} belongs to partition {}, not {}",
                actual.0, p.0
            )))
        }
    }

    /// `key` is stored on this node.
    pub fn key_here(&self, key: &Key) -> Result<(), BadMessage> {
        self.partition_here(self.placement.partition_of(key))
    }

    /// `node` is a node of the cluster.
    pub fn node(&self, node: NodeId) -> Result<(), BadMessage> {
        if (node.0 as usize) < self.placement.node_count() {
            Ok(())
        } else {
            Err(self.bad(format!(
                "node {node} does not exist (the cluster has {})",
                self.placement.node_count()
            )))
        }
    }

    /// `txn` was begun by a node of the cluster.
    pub fn txn(&self, txn: TxnId) -> Result<(), BadMessage> {
        self.node(txn.coordinator())
            .map_err(|e| self.bad(format!("transaction {txn:?}: {e}")))
    }

    /// `txn` is coordinated by this node: a participant's answer about it is for this node.
    pub fn txn_here(&self, txn: TxnId) -> Result<(), BadMessage> {
        if txn.coordinator() == self.me {
            Ok(())
        } else {
            Err(self.bad(format!(
                "transaction {txn:?} is coordinated by {}, not {}",
                txn.coordinator(),
                self.me
            )))
        }
    }

    /// `txn` is coordinated by the sender: only a coordinator drives its transaction's commit.
    pub fn txn_of_sender(&self, txn: TxnId) -> Result<(), BadMessage> {
        if txn.coordinator() == self.from {
            Ok(())
        } else {
            Err(self.bad(format!(
                "{} sent a message that only {}, the coordinator of {txn:?}, may send",
                self.from,
                txn.coordinator()
            )))
        }
    }
}

/// A peer message that can be checked before its protocol handles it (see the module docs).
pub trait CheckMessage {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage>;
}

/// Messages that carry no ids (test protocols, unit payloads) have nothing to check.
impl CheckMessage for () {
    fn check(&self, _at: &Inbound<'_>) -> Result<(), BadMessage> {
        Ok(())
    }
}

/// The longest key a client may name, in bytes.
pub const MAX_KEY_LEN: usize = 1024;
/// The largest value a client may write, in bytes.
pub const MAX_VALUE_LEN: usize = 1024 * 1024;
/// The most writes one commit may carry.
pub const MAX_WRITES: usize = 64 * 1024;

/// Check what a client asks for against the request limits (key and value sizes, writes per
/// commit) before the node's protocol sees it. Every runtime that takes requests off a wire
/// calls this and answers a refused one with `Rejected(Invalid)`.
pub fn check_request(op: &ClientOp) -> Result<(), BadMessage> {
    let key = |key: &Key| {
        if key.as_bytes().len() > MAX_KEY_LEN {
            Err(BadMessage(format!(
                "a key of {} bytes exceeds the limit of {MAX_KEY_LEN}",
                key.as_bytes().len()
            )))
        } else {
            Ok(())
        }
    };
    match op {
        ClientOp::Read { key: k, .. } => key(k),
        ClientOp::Commit { writes, .. } => {
            if writes.len() > MAX_WRITES {
                return Err(BadMessage(format!(
                    "a commit of {} writes exceeds the limit of {MAX_WRITES}",
                    writes.len()
                )));
            }
            for (k, value) in writes {
                key(k)?;
                if let Some(v) = value
                    && v.len() > MAX_VALUE_LEN
                {
                    return Err(BadMessage(format!(
                        "a value of {} bytes exceeds the limit of {MAX_VALUE_LEN}",
                        v.len()
                    )));
                }
            }
            Ok(())
        }
        ClientOp::Begin { .. }
        | ClientOp::AwaitOutcome { .. }
        | ClientOp::Abort { .. }
        | ClientOp::Execute { .. }
        | ClientOp::NodeStats => Ok(()),
    }
}
