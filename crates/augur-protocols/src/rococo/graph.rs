//! The strongly connected component of a transaction in ROCOCO's dependency graph (ROCOCO
//! §3.3, "Commit phase": a server executes the pieces of a strongly connected component once
//! every member and every ancestor is committed, in a deterministic order within it).
//!
//! The graph is given by each transaction's *aggregated dependencies* (its in-edges: the
//! pieces it found pending at every server of its start phase), final once it commits. A
//! node walks a piece's ancestors backwards over them; what it knows of each is a [`Known`].

use augur_types::TxnId;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeSet;

/// What a node knows of a transaction met while walking a piece's ancestors.
pub(super) enum Known<'a> {
    /// Committed, with its aggregated dependencies: the walk goes on through them.
    Committed(&'a BTreeSet<TxnId>),
    /// Finished at every node, where its component was found to be these members.
    Finished(&'a [TxnId]),
    /// Not in the graph (aborted), or known not to share a component with the piece whose
    /// ancestors are walked (see `Rococo::known`): the walk stops there.
    Outside,
    /// Not committed yet, or not known here: the component cannot be told yet.
    Missing,
}

/// The strongly connected component of `of` (sorted by id), or the ancestors whose status
/// must be learned first. `of` must be committed (`deps` are its aggregated dependencies).
///
/// Every transaction on a cycle through `of` is an ancestor of it, and every ancestor's
/// in-edges are final once it committed, so the walk over ancestors decides the component
/// exactly: the members are the ancestors that `of` reaches back.
pub(super) fn component<'a>(
    of: TxnId,
    deps: &'a BTreeSet<TxnId>,
    mut known: impl FnMut(TxnId) -> Known<'a>,
) -> Result<Vec<TxnId>, Vec<TxnId>> {
    let mut in_edges: FxHashMap<TxnId, &'a BTreeSet<TxnId>> = FxHashMap::default();
    in_edges.insert(of, deps);
    let mut stack: Vec<TxnId> = deps.iter().copied().collect();
    let mut seen: FxHashSet<TxnId> = stack.iter().copied().collect();
    seen.insert(of);
    let mut missing = Vec::new();
    while let Some(txn) = stack.pop() {
        match known(txn) {
            Known::Committed(parents) => {
                in_edges.insert(txn, parents);
                for p in parents {
                    if seen.insert(*p) {
                        stack.push(*p);
                    }
                }
            }
            // A finished ancestor's component was decided whole by its nodes: if `of` is in
            // it, it is `of`'s; otherwise no cycle through `of` passes through it (that
            // cycle would have put `of` in it).
            Known::Finished(members) if members.contains(&of) => {
                let mut members = members.to_vec();
                members.sort();
                members.dedup();
                return Ok(members);
            }
            Known::Finished(_) | Known::Outside => {}
            Known::Missing => missing.push(txn),
        }
    }
    if !missing.is_empty() {
        missing.sort();
        return Err(missing);
    }
    // Forward from `of` over the reversed edges, among the walked ancestors.
    let mut children: FxHashMap<TxnId, Vec<TxnId>> = FxHashMap::default();
    for (child, parents) in &in_edges {
        for p in parents.iter() {
            if in_edges.contains_key(p) {
                children.entry(*p).or_default().push(*child);
            }
        }
    }
    let mut members: BTreeSet<TxnId> = BTreeSet::from([of]);
    let mut stack = vec![of];
    while let Some(txn) = stack.pop() {
        for c in children.get(&txn).into_iter().flatten() {
            if members.insert(*c) {
                stack.push(*c);
            }
        }
    }
    // Every walked ancestor reaches `of`; those `of` reaches back share its component.
    Ok(members.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_types::NodeId;
    use std::collections::BTreeMap;

    fn t(n: u64) -> TxnId {
        TxnId::new(NodeId(0), n)
    }

    fn graph(edges: &[(u64, &[u64])]) -> BTreeMap<TxnId, BTreeSet<TxnId>> {
        edges
            .iter()
            .map(|(c, ps)| (t(*c), ps.iter().map(|p| t(*p)).collect()))
            .collect()
    }

    fn of(g: &BTreeMap<TxnId, BTreeSet<TxnId>>, n: u64) -> Result<Vec<TxnId>, Vec<TxnId>> {
        component(t(n), &g[&t(n)], |x| match g.get(&x) {
            Some(d) => Known::Committed(d),
            None => Known::Missing,
        })
    }

    #[test]
    fn a_cycle_is_one_component_and_its_tail_is_not_in_it() {
        // 1 -> 2 -> 3 -> 1, and 0 -> 1 (0 is an ancestor outside the cycle).
        let g = graph(&[(0, &[]), (1, &[0, 3]), (2, &[1]), (3, &[2])]);
        assert_eq!(of(&g, 2), Ok(vec![t(1), t(2), t(3)]));
        assert_eq!(of(&g, 0), Ok(vec![t(0)]));
    }

    #[test]
    fn an_ancestor_not_committed_is_asked_for() {
        let g = graph(&[(1, &[2]), (2, &[5])]);
        assert_eq!(of(&g, 1), Err(vec![t(5)]));
    }

    #[test]
    fn a_finished_ancestor_lends_its_component() {
        let deps: BTreeSet<TxnId> = [t(4)].into();
        let members = [t(4), t(9)];
        let found = component(t(9), &deps, |x| {
            assert_eq!(x, t(4));
            Known::Finished(&members)
        });
        assert_eq!(found, Ok(vec![t(4), t(9)]));
    }
}
