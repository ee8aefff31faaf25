use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A node (one server process, or one in-process node of an embedded cluster).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// A data centre (region) of the placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DcId(pub u16);

/// A partition: a disjoint share of the key space with one master and zero or more slave replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionId(pub u32);

/// A client session; unique within a cluster run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClientId(pub u64);

/// Correlates a client request with its reply; unique per client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId(pub u64);

/// Physical or logical time in microseconds. Protocols compare timestamps only; what the unit
/// means (µs since the Unix epoch, or virtual µs in the simulator) is the runtime's business.
/// A protocol may instead carry [`crate::Hybrid`] values (DST's commit and read timestamps):
/// then [`Timestamp::micros`] means nothing, and [`crate::Hybrid::physical`] gives the time.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const ZERO: Timestamp = Timestamp(0);
    pub const MAX: Timestamp = Timestamp(u64::MAX);

    pub fn micros(self) -> u64 {
        self.0
    }

    pub fn saturating_add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(d.as_micros() as u64))
    }

    pub fn saturating_sub(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(d.as_micros() as u64))
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    pub fn next(self) -> Timestamp {
        Timestamp(self.0 + 1)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}µs", self.0)
    }
}

/// A transaction identifier: the coordinating node in the top 16 bits and a per-node sequence in
/// the low 48, packed in one word because every stored version carries its writer.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxnId(pub u64);

impl TxnId {
    const SEQ_BITS: u32 = 48;

    pub fn new(coordinator: NodeId, seq: u64) -> TxnId {
        debug_assert!(
            coordinator.0 < (1 << 16),
            "node ids are 16-bit in transaction ids"
        );
        TxnId(((coordinator.0 as u64) << Self::SEQ_BITS) | (seq & ((1 << Self::SEQ_BITS) - 1)))
    }

    /// The node that coordinates this transaction.
    pub fn coordinator(self) -> NodeId {
        NodeId((self.0 >> Self::SEQ_BITS) as u32)
    }

    pub fn seq(self) -> u64 {
        self.0 & ((1 << Self::SEQ_BITS) - 1)
    }
}

impl fmt::Debug for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T{}.{}", self.coordinator().0, self.seq())
    }
}

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl fmt::Display for PartitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_id_round_trips_coordinator_and_sequence() {
        let t = TxnId::new(NodeId(7), 123_456);
        assert_eq!(t.coordinator(), NodeId(7));
        assert_eq!(t.seq(), 123_456);
        assert_eq!(format!("{t:?}"), "T7.123456");
    }
}
