//! Placement: which data centre each node is in, how keys map to partitions, which nodes replicate
//! each partition and which of them is its master. Protocols ask placement; they never hard-code it.

use crate::latency::LatencyProfile;
use crate::{DcId, Key, NodeId, PartitionId};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("a cluster needs at least one node")]
    NoNodes,
    #[error("{nodes} nodes cannot be spread over {dcs} data centres (need at least one per DC)")]
    FewerNodesThanDcs { nodes: usize, dcs: usize },
    #[error("replication factor {rf} needs 1..={nodes} (one replica per node at most)")]
    BadReplication { rf: usize, nodes: usize },
    #[error("at most 65536 nodes are supported, {0} requested")]
    TooManyNodes(usize),
}

/// A cluster's layout. Built once, shared read-only by every node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Placement {
    profile: LatencyProfile,
    node_dc: Vec<DcId>,
    /// `replicas[p][0]` is the master of partition `p`; the rest are slaves in replication order.
    replicas: Vec<Vec<NodeId>>,
    /// `local[n]`: the partitions node `n` replicates, ascending.
    local: Vec<Vec<PartitionId>>,
}

impl Placement {
    /// The layout STR §8 uses: node `i` sits in DC `i mod D`, partition `p` is mastered by node `p`,
    /// and its slaves are the next `rf - 1` nodes around the ring (hence in the following DCs).
    pub fn ring(
        profile: LatencyProfile,
        nodes: usize,
        replication_factor: usize,
    ) -> Result<Placement, PlacementError> {
        let dcs = profile.dcs.len();
        if nodes == 0 {
            return Err(PlacementError::NoNodes);
        }
        if nodes > 1 << 16 {
            return Err(PlacementError::TooManyNodes(nodes));
        }
        if nodes < dcs {
            return Err(PlacementError::FewerNodesThanDcs { nodes, dcs });
        }
        if replication_factor == 0 || replication_factor > nodes {
            return Err(PlacementError::BadReplication {
                rf: replication_factor,
                nodes,
            });
        }
        let node_dc = (0..nodes).map(|i| DcId((i % dcs) as u16)).collect();
        let replicas: Vec<Vec<NodeId>> = (0..nodes)
            .map(|p| {
                (0..replication_factor)
                    .map(|r| NodeId(((p + r) % nodes) as u32))
                    .collect()
            })
            .collect();
        let mut local = vec![Vec::new(); nodes];
        for (p, reps) in replicas.iter().enumerate() {
            for n in reps {
                local[n.0 as usize].push(PartitionId(p as u32));
            }
        }
        for parts in &mut local {
            parts.sort();
        }
        Ok(Placement {
            profile,
            node_dc,
            replicas,
            local,
        })
    }

    pub fn profile(&self) -> &LatencyProfile {
        &self.profile
    }

    pub fn node_count(&self) -> usize {
        self.node_dc.len()
    }

    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.node_dc.len() as u32).map(NodeId)
    }

    pub fn partition_count(&self) -> usize {
        self.replicas.len()
    }

    pub fn partitions(&self) -> impl Iterator<Item = PartitionId> + '_ {
        (0..self.replicas.len() as u32).map(PartitionId)
    }

    pub fn replication_factor(&self) -> usize {
        self.replicas[0].len()
    }

    pub fn dc_of(&self, node: NodeId) -> DcId {
        self.node_dc[node.0 as usize]
    }

    pub fn dc_name(&self, dc: DcId) -> &str {
        &self.profile.dcs[dc.0 as usize]
    }

    /// The partition holding `key`: its shard tag modulo the partition count.
    pub fn partition_of(&self, key: &Key) -> PartitionId {
        PartitionId(key.shard() % self.replicas.len() as u32)
    }

    /// Every replica of `p`, master first.
    pub fn replicas(&self, p: PartitionId) -> &[NodeId] {
        &self.replicas[p.0 as usize]
    }

    pub fn master(&self, p: PartitionId) -> NodeId {
        self.replicas[p.0 as usize][0]
    }

    pub fn slaves(&self, p: PartitionId) -> &[NodeId] {
        &self.replicas[p.0 as usize][1..]
    }

    pub fn replicates(&self, node: NodeId, p: PartitionId) -> bool {
        self.replicas[p.0 as usize].contains(&node)
    }

    /// The partitions `node` replicates (as master or slave), ascending.
    pub fn local_partitions(&self, node: NodeId) -> &[PartitionId] {
        &self.local[node.0 as usize]
    }

    /// The partitions `node` is master of, ascending.
    pub fn mastered_by(&self, node: NodeId) -> impl Iterator<Item = PartitionId> + '_ {
        self.local[node.0 as usize]
            .iter()
            .copied()
            .filter(move |p| self.master(*p) == node)
    }

    /// The replica of `p` nearest to `from`: itself if it is one, otherwise the one with the
    /// smallest one-way delay (ties broken by node id, so the choice is deterministic).
    pub fn closest_replica(&self, from: NodeId, p: PartitionId) -> NodeId {
        let reps = self.replicas(p);
        if reps.contains(&from) {
            return from;
        }
        *reps
            .iter()
            .min_by_key(|n| (self.one_way(from, **n), n.0))
            .expect("a partition has replicas")
    }

    /// One-way network delay between two nodes; zero from a node to itself.
    pub fn one_way(&self, a: NodeId, b: NodeId) -> Duration {
        if a == b {
            return Duration::ZERO;
        }
        self.profile
            .one_way(self.dc_of(a).0 as usize, self.dc_of(b).0 as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nine_dc(nodes: usize, rf: usize) -> Placement {
        Placement::ring(LatencyProfile::named("ec2-9dc").unwrap(), nodes, rf).unwrap()
    }

    #[test]
    fn ring_puts_slaves_in_the_following_dcs() {
        let pl = nine_dc(9, 6);
        let p0 = PartitionId(0);
        assert_eq!(pl.master(p0), NodeId(0));
        let dcs: Vec<_> = pl
            .replicas(p0)
            .iter()
            .map(|n| pl.dc_name(pl.dc_of(*n)))
            .collect();
        assert_eq!(dcs, ["IE", "SU", "SY", "OR", "SG", "CA"]);
        assert_eq!(pl.local_partitions(NodeId(0)).len(), 6);
        assert_eq!(
            pl.mastered_by(NodeId(4)).collect::<Vec<_>>(),
            vec![PartitionId(4)]
        );
    }

    #[test]
    fn keys_map_to_partitions_by_shard_tag() {
        let pl = nine_dc(9, 3);
        assert_eq!(pl.partition_of(&Key::numbered(13, 0)), PartitionId(4));
    }

    #[test]
    fn closest_replica_prefers_self_then_the_nearest_dc() {
        let pl = nine_dc(9, 2);
        // Partition 0 lives on IE (node 0) and SU (node 1); FR (node 6) is nearest to IE.
        assert_eq!(pl.closest_replica(NodeId(6), PartitionId(0)), NodeId(0));
        assert_eq!(pl.closest_replica(NodeId(1), PartitionId(0)), NodeId(1));
        assert_eq!(pl.closest_replica(NodeId(7), PartitionId(0)), NodeId(1)); // TY -> SU
    }

    #[test]
    fn bad_layouts_are_refused() {
        let lan = LatencyProfile::named("lan").unwrap();
        assert_eq!(
            Placement::ring(lan.clone(), 0, 1).unwrap_err(),
            PlacementError::NoNodes
        );
        assert!(Placement::ring(lan, 2, 3).is_err());
        let nine = LatencyProfile::named("ec2-9dc").unwrap();
        assert!(Placement::ring(nine, 3, 1).is_err());
    }
}
