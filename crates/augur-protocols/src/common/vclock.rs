//! Vector clocks: one counter per node or data centre, ordered by the causal (happened-before)
//! partial order.
//!
//! Protocols whose order is not a scalar timestamp (Walter's parallel snapshot isolation, SSS, the
//! VTS baseline) carry a [`VClock`] in their messages and per-key metadata. A clock has a fixed
//! number of entries chosen at creation, one per index of whatever the protocol counts (nodes or
//! DCs); combining clocks of different lengths is a bug in the caller and panics, rather than
//! silently treating missing entries as zero.
//!
//! A clock serialises as a plain sequence of its entries, so with postcard it costs one length
//! byte plus one varint per entry.

use augur_contract::inbound::{BadMessage, Inbound};
use augur_types::NodeId;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;

/// A vector clock: entry `i` counts the events of node (or DC) `i` that happened before it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct VClock(Box<[u64]>);

/// How two vector clocks relate in the causal partial order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Causality {
    /// Every entry is `<=` and at least one is `<`: the first happened before the second.
    Before,
    /// Every entry is equal.
    Equal,
    /// Every entry is `>=` and at least one is `>`: the first happened after the second.
    After,
    /// Some entries are smaller and some larger: neither happened before the other.
    Concurrent,
}

impl VClock {
    /// A clock of `n` zero entries: nothing has happened yet.
    pub fn new(n: usize) -> VClock {
        VClock(vec![0; n].into_boxed_slice())
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// All entries, by index.
    pub fn entries(&self) -> &[u64] {
        &self.0
    }

    /// Entry `i`.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn get(&self, i: usize) -> u64 {
        self.0[i]
    }

    /// Sets entry `i` to `value`.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn set(&mut self, i: usize, value: u64) {
        self.0[i] = value;
    }

    /// Counts one more event of node `i` and returns the new entry (a protocol typically uses it
    /// as the sequence number of the event, e.g. Walter's per-site commit sequence).
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn increment(&mut self, i: usize) -> u64 {
        self.0[i] += 1;
        self.0[i]
    }

    /// Pointwise maximum with `other`: afterwards `self` has seen everything either clock had.
    ///
    /// # Panics
    /// If the clocks have different lengths.
    pub fn merge(&mut self, other: &VClock) {
        self.assert_same_len(other);
        for (mine, theirs) in self.0.iter_mut().zip(other.0.iter()) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// Pointwise minimum with `other`: afterwards `self` has seen only what both clocks had (a
    /// lower bound of both, as a garbage-collection horizon needs).
    ///
    /// # Panics
    /// If the clocks have different lengths.
    pub fn meet(&mut self, other: &VClock) {
        self.assert_same_len(other);
        for (mine, theirs) in self.0.iter_mut().zip(other.0.iter()) {
            *mine = (*mine).min(*theirs);
        }
    }

    /// How `self` relates to `other` causally.
    ///
    /// # Panics
    /// If the clocks have different lengths.
    pub fn compare(&self, other: &VClock) -> Causality {
        self.assert_same_len(other);
        let (mut less, mut greater) = (false, false);
        for (a, b) in self.0.iter().zip(other.0.iter()) {
            match a.cmp(b) {
                Ordering::Less => less = true,
                Ordering::Greater => greater = true,
                Ordering::Equal => {}
            }
        }
        match (less, greater) {
            (false, false) => Causality::Equal,
            (true, false) => Causality::Before,
            (false, true) => Causality::After,
            (true, true) => Causality::Concurrent,
        }
    }

    /// Whether `self` has seen everything `other` has: every entry is `>=` (so a clock dominates
    /// itself). A snapshot at `self` includes an event stamped `other` exactly when this holds.
    ///
    /// # Panics
    /// If the clocks have different lengths.
    pub fn dominates(&self, other: &VClock) -> bool {
        matches!(self.compare(other), Causality::After | Causality::Equal)
    }

    fn assert_same_len(&self, other: &VClock) {
        assert_eq!(
            self.len(),
            other.len(),
            "vector clocks of different lengths: {self} and {other}"
        );
    }
}

impl From<Vec<u64>> for VClock {
    fn from(entries: Vec<u64>) -> VClock {
        VClock(entries.into_boxed_slice())
    }
}

/// The causal partial order: `None` for concurrent clocks.
///
/// # Panics
/// If the clocks have different lengths, like [`VClock::compare`].
impl PartialOrd for VClock {
    fn partial_cmp(&self, other: &VClock) -> Option<Ordering> {
        match self.compare(other) {
            Causality::Before => Some(Ordering::Less),
            Causality::Equal => Some(Ordering::Equal),
            Causality::After => Some(Ordering::Greater),
            Causality::Concurrent => None,
        }
    }
}

/// `[3,0,7]`.
impl fmt::Display for VClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{e}")?;
        }
        f.write_str("]")
    }
}

/// Whether `v`, indexed by node, has one entry per node of the cluster (every such vector that
/// arrives in a message is checked, since [`VClock`] panics on clocks of different lengths).
pub fn check_vector(at: &Inbound<'_>, v: &VClock) -> Result<(), BadMessage> {
    let nodes = at.placement.nodes().count();
    if v.len() == nodes {
        Ok(())
    } else {
        Err(at.bad(format!(
            "a vector timestamp of {} entries in a cluster of {nodes} nodes",
            v.len()
        )))
    }
}

/// Dependencies on per-node counters: per node, the largest counter depended on, sorted by node
/// (VTS's `tx.deps`, the tags ⟨node : counter⟩ of the versions a transaction read or
/// overwrote, compressed to the largest per node). A sparse vector: it names only the nodes
/// depended on, and [`Deps::within`] compares it with a [`VClock`] indexed by node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deps(Vec<(NodeId, u64)>);

impl Deps {
    pub fn new() -> Deps {
        Deps::default()
    }

    /// Depend on ⟨node:t⟩ (nothing for `t == 0`: no tag, or one forgotten as visible to all).
    pub fn add(&mut self, node: NodeId, t: u64) {
        if t == 0 {
            return;
        }
        match self.0.binary_search_by_key(&node, |(n, _)| *n) {
            Ok(i) => self.0[i].1 = self.0[i].1.max(t),
            Err(i) => self.0.insert(i, (node, t)),
        }
    }

    /// Depend on everything `other` depends on.
    pub fn merge(&mut self, other: &Deps) {
        for &(node, t) in &other.0 {
            self.add(node, t);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every ⟨node:t⟩, by node.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, u64)> + '_ {
        self.0.iter().copied()
    }

    /// Whether every dep is within `stable` (a dep of a node `stable` has no entry for is not).
    pub fn within(&self, stable: &VClock) -> bool {
        self.0
            .iter()
            .all(|(node, t)| (node.0 as usize) < stable.len() && *t <= stable.get(node.0 as usize))
    }

    /// Refuse deps naming a node outside the cluster (they would index the vectors).
    pub fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        self.0.iter().try_for_each(|(node, _)| at.node(*node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn vc(entries: &[u64]) -> VClock {
        VClock::from(entries.to_vec())
    }

    fn merged(a: &VClock, b: &VClock) -> VClock {
        let mut m = a.clone();
        m.merge(b);
        m
    }

    #[test]
    fn new_clocks_are_zero_and_entries_can_be_set_and_incremented() {
        let mut c = VClock::new(3);
        assert_eq!(c.len(), 3);
        assert_eq!(c.entries(), &[0, 0, 0]);
        assert_eq!(c.increment(1), 1);
        assert_eq!(c.increment(1), 2);
        c.set(2, 9);
        assert_eq!((c.get(0), c.get(1), c.get(2)), (0, 2, 9));
        assert!(VClock::new(0).is_empty());
    }

    #[test]
    fn compare_distinguishes_the_four_relations() {
        let a = vc(&[1, 2, 3]);
        assert_eq!(a.compare(&vc(&[1, 2, 3])), Causality::Equal);
        assert_eq!(a.compare(&vc(&[1, 3, 3])), Causality::Before);
        assert_eq!(a.compare(&vc(&[0, 2, 3])), Causality::After);
        assert_eq!(a.compare(&vc(&[2, 1, 3])), Causality::Concurrent);

        assert!(a < vc(&[2, 2, 3]));
        assert!(a > vc(&[1, 2, 0]));
        assert_eq!(a.partial_cmp(&vc(&[0, 9, 0])), None);
    }

    #[test]
    fn dominates_is_greater_or_equal_in_every_entry() {
        let a = vc(&[2, 2]);
        assert!(a.dominates(&a));
        assert!(a.dominates(&vc(&[1, 2])));
        assert!(!a.dominates(&vc(&[3, 0])));
        assert!(!vc(&[1, 2]).dominates(&a));
    }

    #[test]
    fn merge_is_the_pointwise_maximum() {
        let mut a = vc(&[1, 5, 0]);
        a.merge(&vc(&[3, 2, 0]));
        assert_eq!(a, vc(&[3, 5, 0]));
    }

    #[test]
    fn meet_is_the_pointwise_minimum() {
        let mut a = vc(&[1, 5, 0]);
        a.meet(&vc(&[3, 2, 0]));
        assert_eq!(a, vc(&[1, 2, 0]));
    }

    #[test]
    #[should_panic(expected = "different lengths")]
    fn clocks_of_different_lengths_do_not_mix() {
        vc(&[1, 2]).merge(&vc(&[1, 2, 3]));
    }

    #[test]
    fn merge_is_a_commutative_associative_idempotent_least_upper_bound() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x7c10c);
        let clock = |rng: &mut ChaCha8Rng| {
            VClock::from((0..4).map(|_| rng.random_range(0..4)).collect::<Vec<u64>>())
        };
        for _ in 0..500 {
            let (a, b, c) = (clock(&mut rng), clock(&mut rng), clock(&mut rng));
            let ab = merged(&a, &b);
            assert_eq!(ab, merged(&b, &a), "commutative");
            assert_eq!(merged(&ab, &c), merged(&a, &merged(&b, &c)), "associative");
            assert_eq!(merged(&a, &a), a, "idempotent");
            // An upper bound of both, and below any other upper bound.
            assert!(ab.dominates(&a) && ab.dominates(&b));
            if c.dominates(&a) && c.dominates(&b) {
                assert!(c.dominates(&ab));
            }
            // The partial order agrees with `compare` and with equality.
            let expected = match a.compare(&b) {
                Causality::Before => Some(Ordering::Less),
                Causality::Equal => Some(Ordering::Equal),
                Causality::After => Some(Ordering::Greater),
                Causality::Concurrent => None,
            };
            assert_eq!(a.partial_cmp(&b), expected);
            assert_eq!(a == b, a.compare(&b) == Causality::Equal);
            assert_eq!(b.compare(&a), flip(a.compare(&b)));
        }
    }

    fn flip(c: Causality) -> Causality {
        match c {
            Causality::Before => Causality::After,
            Causality::After => Causality::Before,
            other => other,
        }
    }

    #[test]
    fn displays_and_serialises_as_a_plain_sequence() {
        let c = vc(&[3, 0, 7]);
        assert_eq!(c.to_string(), "[3,0,7]");
        assert_eq!(VClock::new(0).to_string(), "[]");
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(json, "[3,0,7]");
        assert_eq!(serde_json::from_str::<VClock>(&json).unwrap(), c);
    }

    #[test]
    fn deps_keep_the_largest_counter_per_node_in_node_order() {
        let mut d = Deps::new();
        d.add(NodeId(2), 5);
        d.add(NodeId(0), 3);
        d.add(NodeId(2), 4);
        d.add(NodeId(1), 0);
        let mut e = Deps::new();
        e.add(NodeId(0), 7);
        d.merge(&e);
        assert_eq!(
            d.iter().collect::<Vec<_>>(),
            vec![(NodeId(0), 7), (NodeId(2), 5)]
        );
        assert!(d.within(&VClock::from(vec![7, 0, 5])));
        assert!(!d.within(&VClock::from(vec![7, 9, 4])));
        assert!(!d.within(&VClock::from(vec![7])));
    }
}
