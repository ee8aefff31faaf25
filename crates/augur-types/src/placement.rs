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
    #[error("unknown placement '{0}'; valid placements: {VALID_LAYOUTS}")]
    UnknownLayout(String),
    #[error("placement '{spec}': {why}; valid placements: {VALID_LAYOUTS}")]
    BadLayout { spec: String, why: String },
    #[error(
        "hash placement with {partitions} partitions and {vnodes} points per node leaves node \
         {node} master of no partition; use more partitions (hash:partitions=N)"
    )]
    NodeWithoutPartition {
        node: u32,
        partitions: usize,
        vnodes: usize,
    },
}

/// The placements `--placement` and cluster files accept, for error messages.
pub const VALID_LAYOUTS: &str = "ring, hash (or hash:partitions=N:vnodes=V)";

/// Points each node puts on the hash ring unless told otherwise. Each node's share of the ring is
/// the sum of its arcs, whose spread shrinks as 1/sqrt(points); with the default partition count,
/// 64 keeps every node of a 20-node cluster within 0.75..1.25 times the mean number of
/// partitions mastered (see the balance test), and more points buy little at that count, since
/// the partitions themselves are then the coarser grain.
pub const DEFAULT_VNODES: usize = 64;

/// Partitions of a hash placement unless told otherwise: at least this many, so that the count
/// does not change (and so partitions do not move) as small clusters grow.
pub const DEFAULT_HASH_PARTITIONS: usize = 256;

/// Partitions per node of a hash placement with more nodes than
/// `DEFAULT_HASH_PARTITIONS / HASH_PARTITIONS_PER_NODE`: with many partitions per node, each
/// node's count of partitions tracks its share of the ring (at 16 per node a 20-node cluster
/// had a node with half the mean).
pub const HASH_PARTITIONS_PER_NODE: usize = 32;

/// Upper bounds on the hash placement's parameters, so that a typo cannot ask for gigabytes.
const MAX_VNODES: usize = 4096;
const MAX_PARTITIONS: usize = HASH_PARTITIONS_PER_NODE << 16;

/// How partitions are laid out over the nodes: what `--placement` and a cluster file's
/// `placement` key name. Printed and parsed as `ring`, `hash` or `hash:partitions=N:vnodes=V`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// [`Placement::ring`].
    #[default]
    Ring,
    /// [`Placement::hash`].
    Hash(HashParams),
}

/// The parameters of a consistent-hashing placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashParams {
    /// The number of partitions; `None`: [`HashParams::partitions_for`] decides from the node
    /// count.
    pub partitions: Option<usize>,
    /// Points each node puts on the ring.
    pub vnodes: usize,
}

impl Default for HashParams {
    fn default() -> HashParams {
        HashParams {
            partitions: None,
            vnodes: DEFAULT_VNODES,
        }
    }
}

impl HashParams {
    /// The partition count for `nodes` nodes: the one given, else
    /// `max(DEFAULT_HASH_PARTITIONS, HASH_PARTITIONS_PER_NODE * nodes)`.
    pub fn partitions_for(&self, nodes: usize) -> usize {
        self.partitions
            .unwrap_or(DEFAULT_HASH_PARTITIONS.max(HASH_PARTITIONS_PER_NODE * nodes))
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Layout::Ring => f.write_str("ring"),
            Layout::Hash(params) => {
                f.write_str("hash")?;
                if let Some(p) = params.partitions {
                    write!(f, ":partitions={p}")?;
                }
                if params.vnodes != DEFAULT_VNODES {
                    write!(f, ":vnodes={}", params.vnodes)?;
                }
                Ok(())
            }
        }
    }
}

impl std::str::FromStr for Layout {
    type Err = PlacementError;

    /// `ring`, `hash`, or `hash` followed by `:KEY=VALUE` settings (`partitions`, `vnodes`), in
    /// the style of `--protocol`'s entries.
    fn from_str(spec: &str) -> Result<Layout, PlacementError> {
        let mut parts = spec.trim().split(':');
        let name = parts.next().unwrap_or_default();
        let bad = |why: String| PlacementError::BadLayout {
            spec: spec.to_string(),
            why,
        };
        match name {
            "ring" => match parts.next() {
                None => Ok(Layout::Ring),
                Some(extra) => Err(bad(format!("ring takes no settings, got '{extra}'"))),
            },
            "hash" => {
                let mut params = HashParams::default();
                for part in parts {
                    let Some((key, value)) = part.split_once('=') else {
                        return Err(bad(format!("expected KEY=VALUE, got '{part}'")));
                    };
                    let number = |max: usize| match value.parse::<usize>() {
                        Ok(v) if (1..=max).contains(&v) => Ok(v),
                        _ => Err(bad(format!("{key} must be a number in 1..={max}"))),
                    };
                    match key {
                        "partitions" => params.partitions = Some(number(MAX_PARTITIONS)?),
                        "vnodes" => params.vnodes = number(MAX_VNODES)?,
                        other => {
                            return Err(bad(format!(
                                "unknown setting '{other}' (hash takes partitions, vnodes)"
                            )));
                        }
                    }
                }
                Ok(Layout::Hash(params))
            }
            other => Err(PlacementError::UnknownLayout(other.to_string())),
        }
    }
}

// As its printed form, so that summaries and cluster files say `"hash"`, not a struct.
impl Serialize for Layout {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Layout {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Layout, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A cluster's layout. Built once, shared read-only by every node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Placement {
    profile: LatencyProfile,
    /// How the layout was made (echoed by summaries; nodes compare it through their config).
    #[serde(default)]
    layout: Layout,
    node_dc: Vec<DcId>,
    /// `replicas[p][0]` is the master of partition `p`; the rest are slaves in replication order.
    replicas: Vec<Vec<NodeId>>,
    /// `local[n]`: the partitions node `n` replicates, ascending.
    local: Vec<Vec<PartitionId>>,
}

/// SplitMix64's finaliser: a fixed, platform-independent mixing function (not `RandomState`,
/// whose seed differs per process), so every node computes the same ring. It is a bijection on
/// `u64`, so distinct inputs give distinct ring points: no two virtual points ever tie.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Where virtual point `v` of `node` sits on the ring. Node and point are packed into disjoint
/// bits (nodes < 2^16, points < 2^32), so every (node, point) pair is a different input to the
/// bijection [`mix64`]. A node's points depend on its id alone: adding node `n` leaves the
/// points of nodes `0..n` where they were.
fn ring_point(node: usize, v: usize) -> u64 {
    mix64(((node as u64) << 32) | v as u64)
}

/// A step through `0..partitions` that visits every slot (it is coprime to `partitions`) and
/// is close to `partitions / φ`: slot `p * stride mod partitions` then puts partitions
/// `0, 1, 2, ...` far apart on the ring, each new one in the largest gap left (a Weyl sequence),
/// rather than side by side. Workloads with few keys use the low-numbered partitions only
/// (`list-append`'s 12 keys live on partitions 0..12), and side by side those would sit in one
/// small arc, usually one node's.
fn golden_stride(partitions: usize) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    let mut stride = ((partitions as f64) * 0.618_033_988_749_895)
        .round()
        .max(1.0) as usize;
    while gcd(stride, partitions) != 1 {
        stride += 1;
    }
    stride
}

impl Placement {
    /// Refuse what no layout can serve; returns the data centre count.
    fn check_shape(
        profile: &LatencyProfile,
        nodes: usize,
        replication_factor: usize,
    ) -> Result<usize, PlacementError> {
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
        Ok(dcs)
    }

    /// The placement `layout` describes.
    pub fn build(
        layout: Layout,
        profile: LatencyProfile,
        nodes: usize,
        replication_factor: usize,
    ) -> Result<Placement, PlacementError> {
        match layout {
            Layout::Ring => Placement::ring(profile, nodes, replication_factor),
            Layout::Hash(params) => Placement::hash(profile, nodes, replication_factor, params),
        }
    }

    /// The rest of a placement from its replica lists (master first).
    fn from_replicas(
        profile: LatencyProfile,
        layout: Layout,
        nodes: usize,
        replicas: Vec<Vec<NodeId>>,
    ) -> Placement {
        let dcs = profile.dcs.len();
        // Node `i` sits in DC `i mod D` whatever the layout, so that switching layouts moves
        // partitions, never nodes.
        let node_dc = (0..nodes).map(|i| DcId((i % dcs) as u16)).collect();
        let mut local = vec![Vec::new(); nodes];
        // Partitions are visited in ascending order, so every `local[n]` comes out ascending.
        for (p, reps) in replicas.iter().enumerate() {
            for n in reps {
                local[n.0 as usize].push(PartitionId(p as u32));
            }
        }
        Placement {
            profile,
            layout,
            node_dc,
            replicas,
            local,
        }
    }

    /// The layout STR §8 uses: node `i` sits in DC `i mod D`, partition `p` is mastered by node `p`,
    /// and its slaves are the next `rf - 1` nodes around the ring (hence in the following DCs).
    pub fn ring(
        profile: LatencyProfile,
        nodes: usize,
        replication_factor: usize,
    ) -> Result<Placement, PlacementError> {
        Placement::check_shape(&profile, nodes, replication_factor)?;
        let replicas: Vec<Vec<NodeId>> = (0..nodes)
            .map(|p| {
                (0..replication_factor)
                    .map(|r| NodeId(((p + r) % nodes) as u32))
                    .collect()
            })
            .collect();
        Ok(Placement::from_replicas(
            profile,
            Layout::Ring,
            nodes,
            replicas,
        ))
    }

    /// Consistent hashing (the partial replication of SSS §III): every node puts
    /// `params.vnodes` points on a 64-bit hash ring, and there is a fixed number of partitions
    /// ([`HashParams::partitions_for`]) at the evenly spaced points `k * 2^64 / P`, partition `p`
    /// at slot `k = p * s mod P` for a stride `s` near `P / φ` coprime to `P`, so that
    /// consecutive partitions land far apart. Keys still map to partitions by `shard tag mod P`, which is why the
    /// partitions are a fixed numbered set rather than the arcs between points: workloads aim
    /// keys at a partition through its number. Partition `p` is replicated by the first nodes
    /// met walking clockwise from its point (a point at exactly `p`'s position counts as met),
    /// skipping nodes already taken: first one node from each data centre not yet holding a
    /// replica, until `min(rf, D)` data centres hold one, then (if `rf > D`) the earliest nodes
    /// skipped on the way. The first node met is the master; slaves follow in that pick order.
    ///
    /// So replicas always span `min(rf, D)` data centres ([`Placement::ring`] promises that only
    /// when the node count is a multiple of `D`, since its ring wraps from the last node to node
    /// 0); nodes sit in DC `i mod D` as there. Adding a node with the same `P` only moves partitions onto the
    /// new node: in each partition's replica set at most one node gives way to it.
    ///
    /// Refused if some node would master no partition, since workloads that draw keys from a
    /// node's own partitions need some; with the default partition count this needs an
    /// improbable ring (no node count up to 64 hits it with the default points).
    pub fn hash(
        profile: LatencyProfile,
        nodes: usize,
        replication_factor: usize,
        params: HashParams,
    ) -> Result<Placement, PlacementError> {
        let dcs = Placement::check_shape(&profile, nodes, replication_factor)?;
        let partitions = params.partitions_for(nodes);
        let layout = Layout::Hash(params);
        if params.vnodes == 0 || params.vnodes > MAX_VNODES {
            return Err(PlacementError::BadLayout {
                spec: layout.to_string(),
                why: format!("vnodes must be within 1..={MAX_VNODES}"),
            });
        }
        if partitions == 0 || partitions > MAX_PARTITIONS {
            return Err(PlacementError::BadLayout {
                spec: layout.to_string(),
                why: format!("partitions must be within 1..={MAX_PARTITIONS}"),
            });
        }
        let mut ring: Vec<(u64, u32)> = (0..nodes)
            .flat_map(|n| (0..params.vnodes).map(move |v| (ring_point(n, v), n as u32)))
            .collect();
        ring.sort_unstable();
        let stride = golden_stride(partitions);
        let dc_of = |n: u32| n as usize % dcs;
        let want_dcs = replication_factor.min(dcs);
        let replicas: Vec<Vec<NodeId>> = (0..partitions)
            .map(|p| {
                let slot = (p as u128 * stride as u128 % partitions as u128) as u64;
                let point = ((u128::from(slot) << 64) / partitions as u128) as u64;
                let start = ring.partition_point(|(at, _)| *at < point);
                let mut chosen: Vec<u32> = Vec::with_capacity(replication_factor);
                // The distinct nodes met so far; a short list (the walk stops after a few
                // nodes), cheaper than a flag per node for every partition of a big cluster.
                let mut seen: Vec<u32> = Vec::new();
                let mut dc_held = vec![false; dcs];
                let mut skipped: Vec<u32> = Vec::new();
                let mut walk = (0..ring.len()).map(|k| ring[(start + k) % ring.len()].1);
                // One node per data centre, in the order the walk meets data centres.
                for n in walk.by_ref() {
                    if seen.contains(&n) {
                        continue;
                    }
                    seen.push(n);
                    if std::mem::replace(&mut dc_held[dc_of(n)], true) {
                        skipped.push(n);
                    } else {
                        chosen.push(n);
                        if chosen.len() == want_dcs {
                            break;
                        }
                    }
                }
                // With rf > D: the nodes passed over for their data centre, then further on.
                let further = walk.filter(|n| {
                    let new = !seen.contains(n);
                    if new {
                        seen.push(*n);
                    }
                    new
                });
                let missing = replication_factor - chosen.len();
                chosen.extend(skipped.into_iter().chain(further).take(missing));
                chosen.into_iter().map(NodeId).collect()
            })
            .collect();
        let placement = Placement::from_replicas(profile, layout, nodes, replicas);
        if let Some(node) = placement
            .nodes()
            .find(|n| placement.mastered_by(*n).next().is_none())
        {
            return Err(PlacementError::NodeWithoutPartition {
                node: node.0,
                partitions,
                vnodes: params.vnodes,
            });
        }
        Ok(placement)
    }

    /// How this placement was laid out.
    pub fn layout(&self) -> Layout {
        self.layout
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

    fn hashed(profile: &str, nodes: usize, rf: usize, partitions: Option<usize>) -> Placement {
        let params = HashParams {
            partitions,
            vnodes: DEFAULT_VNODES,
        };
        Placement::hash(LatencyProfile::named(profile).unwrap(), nodes, rf, params).unwrap()
    }

    /// Every promise of `Placement`'s methods, for any layout. Replicas span `min(rf, D)` data
    /// centres always with hash, and with ring when the node count is a multiple of `D` (else
    /// the ring wraps from the last node to node 0, which may share a data centre).
    fn assert_contract(pl: &Placement) {
        let rf = pl.replication_factor();
        let dcs = pl.profile().dcs.len();
        for p in pl.partitions() {
            let reps = pl.replicas(p);
            assert_eq!(reps.len(), rf, "{p:?} has {reps:?}");
            let distinct: std::collections::BTreeSet<_> = reps.iter().collect();
            assert_eq!(distinct.len(), rf, "{p:?} repeats a replica: {reps:?}");
            assert_eq!(pl.master(p), reps[0]);
            assert_eq!(pl.slaves(p), &reps[1..]);
            let spread: std::collections::BTreeSet<_> = reps.iter().map(|n| pl.dc_of(*n)).collect();
            if pl.layout() != Layout::Ring || pl.node_count().is_multiple_of(dcs) {
                assert_eq!(
                    spread.len(),
                    rf.min(dcs),
                    "{p:?}'s replicas {reps:?} share a DC"
                );
            }
        }
        for n in pl.nodes() {
            let local = pl.local_partitions(n);
            assert!(local.windows(2).all(|w| w[0] < w[1]), "not ascending");
            let expected: Vec<_> = pl.partitions().filter(|p| pl.replicates(n, *p)).collect();
            assert_eq!(local, expected.as_slice());
            assert!(pl.mastered_by(n).all(|p| pl.master(p) == n));
            assert!(pl.mastered_by(n).next().is_some(), "{n:?} masters nothing");
        }
    }

    #[test]
    fn ring_keeps_the_contract() {
        for (profile, nodes, rf) in [
            ("lan", 1, 1),
            ("lan", 5, 3),
            ("3dc", 7, 2),
            ("ec2-9dc", 9, 6),
        ] {
            let pl = Placement::ring(LatencyProfile::named(profile).unwrap(), nodes, rf).unwrap();
            assert_contract(&pl);
            assert_eq!(pl.layout(), Layout::Ring);
        }
    }

    #[test]
    fn hash_keeps_the_contract() {
        for (profile, nodes, rf) in [
            ("lan", 1, 1),
            ("lan", 2, 2),
            ("lan", 5, 3),
            ("3dc", 3, 2),
            ("3dc", 7, 5),
            ("ec2-9dc", 9, 6),
            ("ec2-9dc", 20, 3),
            ("ec2-9dc", 12, 12),
        ] {
            assert_contract(&hashed(profile, nodes, rf, None));
        }
    }

    #[test]
    fn hash_is_deterministic_and_pinned() {
        let a = hashed("3dc", 5, 2, None);
        let b = hashed("3dc", 5, 2, None);
        assert_eq!(a.partition_count(), DEFAULT_HASH_PARTITIONS);
        for p in a.partitions() {
            assert_eq!(a.replicas(p), b.replicas(p));
        }
        // Pinned, so that a change to the hash (which would make nodes of two builds disagree
        // about where data lives) shows up here rather than in a mixed cluster.
        let first: Vec<Vec<u32>> = (0..4)
            .map(|p| a.replicas(PartitionId(p)).iter().map(|n| n.0).collect())
            .collect();
        assert_eq!(first, PINNED);
        // Keys still map by shard tag, now modulo the partition count.
        assert_eq!(a.partition_of(&Key::numbered(300, 0)), PartitionId(44));
    }

    /// The replicas of partitions 0..4 of `hashed("3dc", 5, 2, None)`.
    const PINNED: [[u32; 2]; 4] = [[4, 2], [1, 0], [3, 2], [2, 4]];

    #[test]
    fn hash_needs_every_node_to_master_a_partition_and_defaults_give_it() {
        for profile in ["lan", "3dc", "ec2-9dc"] {
            let dcs = LatencyProfile::named(profile).unwrap().dcs.len();
            for nodes in dcs..=64 {
                for rf in 1..=3.min(nodes) {
                    hashed(profile, nodes, rf, None);
                }
            }
        }
        let lan = LatencyProfile::named("lan").unwrap();
        let few = HashParams {
            partitions: Some(4),
            vnodes: 1,
        };
        let err = Placement::hash(lan, 8, 1, few).unwrap_err();
        assert!(matches!(err, PlacementError::NodeWithoutPartition { .. }));
        assert!(err.to_string().contains("hash:partitions=N"), "{err}");
    }

    /// Mastered and replicated partitions per node, over the mean, for 20 nodes at the default
    /// settings (640 partitions, 64 points per node). Figures: masters 0.75..1.22 of the mean;
    /// replicas with rf 3 0.88..1.09 (lan), 0.85..1.16 (9 DCs); rf 2 over 3 DCs 0.78..1.14.
    #[test]
    fn hash_balances_twenty_nodes_within_a_quarter_of_the_mean() {
        for (profile, rf) in [("lan", 1), ("lan", 3), ("3dc", 2), ("ec2-9dc", 3)] {
            let pl = hashed(profile, 20, rf, None);
            assert_eq!(pl.partition_count(), 640);
            let mean = pl.partition_count() as f64 / 20.0;
            for n in pl.nodes() {
                let mastered = pl.mastered_by(n).count() as f64 / mean;
                let replicated = pl.local_partitions(n).len() as f64 / (mean * rf as f64);
                for (what, share) in [("mastered", mastered), ("replicated", replicated)] {
                    assert!(
                        (0.75..=1.25).contains(&share),
                        "{profile} rf {rf}: {n:?} {what} {share:.2} of the mean"
                    );
                }
            }
        }
    }

    /// The point of consistent hashing: a node joining (same partition count) takes partitions
    /// over, and nothing else moves. Each changed replica set lost exactly one node to the
    /// newcomer, and about rf/(n+1) of the sets change.
    #[test]
    fn hash_moves_only_what_a_new_node_takes() {
        for (profile, nodes, rf) in [
            ("lan", 5, 1),
            ("lan", 10, 3),
            ("3dc", 6, 2),
            ("ec2-9dc", 20, 3),
        ] {
            let before = hashed(profile, nodes, rf, Some(1024));
            let after = hashed(profile, nodes + 1, rf, Some(1024));
            let newcomer = NodeId(nodes as u32);
            let mut changed = 0;
            for p in before.partitions() {
                let old: std::collections::BTreeSet<_> = before.replicas(p).iter().collect();
                let new: std::collections::BTreeSet<_> = after.replicas(p).iter().collect();
                if old == new {
                    continue;
                }
                changed += 1;
                let came: Vec<_> = new.difference(&old).collect();
                assert_eq!(came, [&&newcomer], "{profile} {p:?}: {old:?} -> {new:?}");
                assert_eq!(old.difference(&new).count(), 1);
                if before.master(p) != after.master(p) {
                    assert_eq!(after.master(p), newcomer);
                }
            }
            let share = changed as f64 / 1024.0;
            let expected = rf as f64 / (nodes + 1) as f64;
            assert!(
                share <= 1.5 * expected,
                "{profile} {nodes}->{}: {share:.3} of the sets changed, expected ~{expected:.3}",
                nodes + 1
            );
        }
    }

    /// Workloads with few keys use only the first partitions (`list-append`'s 12 keys live on
    /// partitions 0..12), so those must not huddle on one node.
    #[test]
    fn the_first_partitions_spread_over_the_nodes() {
        for (profile, nodes, rf) in [
            ("3dc", 3, 2),
            ("lan", 3, 1),
            ("ec2-9dc", 9, 3),
            ("lan", 20, 3),
        ] {
            let pl = hashed(profile, nodes, rf, None);
            let masters: std::collections::BTreeSet<_> = (0..4 * nodes as u32)
                .map(|p| pl.master(PartitionId(p)))
                .collect();
            assert!(
                masters.len() * 4 >= nodes * 3,
                "{profile} {nodes} nodes: the first {} partitions have {} masters",
                4 * nodes,
                masters.len()
            );
        }
    }

    #[test]
    fn layouts_parse_and_print_and_name_the_valid_ones() {
        assert_eq!("ring".parse::<Layout>().unwrap(), Layout::Ring);
        assert_eq!(Layout::default(), Layout::Ring);
        let hash: Layout = "hash".parse().unwrap();
        assert_eq!(hash, Layout::Hash(HashParams::default()));
        assert_eq!(hash.to_string(), "hash");
        let tuned: Layout = "hash:partitions=64:vnodes=16".parse().unwrap();
        assert_eq!(
            tuned,
            Layout::Hash(HashParams {
                partitions: Some(64),
                vnodes: 16
            })
        );
        assert_eq!(tuned.to_string(), "hash:partitions=64:vnodes=16");
        assert_eq!(tuned.to_string().parse::<Layout>().unwrap(), tuned);
        let err = "consistent".parse::<Layout>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown placement 'consistent'; valid placements: ring, hash (or hash:partitions=N:vnodes=V)"
        );
        for (bad, why) in [
            ("hash:vnodes=0", "vnodes must be a number in 1..=4096"),
            ("hash:partitions=lots", "partitions must be a number in"),
            ("hash:weights=2", "unknown setting 'weights'"),
            ("hash:64", "expected KEY=VALUE"),
            ("ring:partitions=4", "ring takes no settings"),
        ] {
            let err = bad.parse::<Layout>().unwrap_err().to_string();
            assert!(
                err.contains(why) && err.contains("valid placements"),
                "{bad}: {err}"
            );
        }
        // As JSON or TOML a layout is its printed form.
        assert_eq!(
            serde_json::to_string(&tuned).unwrap(),
            "\"hash:partitions=64:vnodes=16\""
        );
        let back: Layout = serde_json::from_str("\"hash\"").unwrap();
        assert_eq!(back, hash);
        assert!(serde_json::from_str::<Layout>("\"rung\"").is_err());
    }

    #[test]
    fn build_follows_the_layout() {
        let lan = LatencyProfile::named("lan").unwrap();
        let ring = Placement::build(Layout::Ring, lan.clone(), 4, 2).unwrap();
        assert_eq!(ring.partition_count(), 4);
        let hash = Placement::build("hash:partitions=32".parse().unwrap(), lan.clone(), 4, 2);
        let hash = hash.unwrap();
        assert_eq!(hash.partition_count(), 32);
        assert_eq!(hash.layout().to_string(), "hash:partitions=32");
        assert!(Placement::build(Layout::Hash(HashParams::default()), lan, 2, 3).is_err());
    }
}
