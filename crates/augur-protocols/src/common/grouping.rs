//! Deterministic grouping and scheduling of a delivered batch (Sparkle §4.2.2, "heterogeneous
//! batches"): where in the order each transaction of a batch goes, computed from the batch alone,
//! so that every node arrives at the same positions.
//!
//! * **Grouping.** The multi-partition transactions (MPTs) are gathered in groups of one
//!   partition set each; the groups follow one another in the order of their first member in
//!   the batch, and each group's members keep their order. At every partition an MPT runs at the
//!   same place relative to the other MPTs, and consecutive MPTs of one partition set run back
//!   to back, so that their confirmations overlap.
//! * **Scheduling.** Each partition's single-partition transactions (SPTs) are cut, in their
//!   order, into as many chunks as the groups that partition takes part in, plus one, and a
//!   chunk runs before the first such group and after each, so that the groups are spaced out
//!   by local work while their confirmations travel.
//! * **Read-only MPTs** (§4.4) go before everything else of the batch, in their order: they
//!   read the state the previous batches left, which is final as soon as those are.
//!
//! The in-batch slot encodes the arrangement in two parts: the high part is the rank of the MPT
//! (1-based, in group order) that the transaction is, or that its chunk follows (0 for the first
//! chunk); the low part is 0 for an MPT, and for an SPT its rank among every SPT — of any
//! partition — placed after the same MPT. So an MPT has the same position at every partition
//! whatever each placed around it, positions are distinct, and the position order is a global
//! linear extension of what each partition runs, as the history's commit timestamps need. A
//! batch whose arrangement does not fit the slot's bits stays in delivery order (the same
//! everywhere: it depends on the batch alone).

use crate::common::dispatch::{Entry, SLOT_BITS};
use augur_types::PartitionId;
use std::collections::BTreeMap;

/// An order of the groups: a sort key for each partition set.
pub type GroupOrder<'a> = &'a dyn Fn(&[PartitionId]) -> u64;

/// The in-batch slot of each of `entries` (a batch in delivery order) once grouped and
/// scheduled; `None` if the arrangement does not fit in [`SLOT_BITS`] (keep delivery order).
/// `group_order`, if given, replaces the order of the groups (the mutant `local-grouping`
/// passes a node-dependent one).
pub fn arrange(entries: &[Entry], group_order: Option<GroupOrder<'_>>) -> Option<Vec<usize>> {
    let is_mpt = |e: &Entry| e.partitions.len() > 1;
    let read_only = Entry::is_read_only_multi_partition;
    // Read-only MPTs first.
    let mut high = vec![0usize; entries.len()];
    let mut rank = 0;
    for (i, _) in entries.iter().enumerate().filter(|(_, e)| read_only(e)) {
        rank += 1;
        high[i] = rank;
    }
    let first_chunk_after = rank;
    // The groups, by their first member's place in the batch.
    let mut groups: Vec<(&[PartitionId], Vec<usize>)> = Vec::new();
    let mut group_of: BTreeMap<&[PartitionId], usize> = BTreeMap::new();
    for (i, entry) in entries
        .iter()
        .enumerate()
        .filter(|(_, e)| is_mpt(e) && !read_only(e))
    {
        let set = entry.partitions.as_slice();
        let g = *group_of.entry(set).or_insert_with(|| {
            groups.push((set, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
    }
    if let Some(key) = group_order {
        groups.sort_by_key(|(set, _)| key(set));
    }
    // Each MPT's rank, and the rank of each group's last member.
    let mut ends = Vec::with_capacity(groups.len());
    for (_, members) in &groups {
        for i in members {
            rank += 1;
            high[*i] = rank;
        }
        ends.push(rank);
    }
    // Each partition's SPTs, in order, cut into one chunk more than the groups it is in.
    let mut spts: BTreeMap<Option<PartitionId>, Vec<usize>> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate().filter(|(_, e)| !is_mpt(e)) {
        spts.entry(entry.partitions.first().copied())
            .or_default()
            .push(i);
    }
    for (p, list) in &spts {
        // The rank each chunk follows: the read-only MPTs', then the last member of each group
        // `p` is in.
        let mut follows = vec![first_chunk_after];
        if let Some(p) = p {
            let mine = groups
                .iter()
                .zip(&ends)
                .filter(|((set, _), _)| set.contains(p));
            follows.extend(mine.map(|(_, end)| *end));
        }
        let chunks = follows.len();
        let (size, extra) = (list.len() / chunks, list.len() % chunks);
        let mut next = list.iter();
        for (c, after) in follows.iter().enumerate() {
            let len = size + usize::from(c < extra);
            for i in next.by_ref().take(len) {
                high[*i] = *after;
            }
        }
    }
    // The low part: 0 for an MPT, an SPT's rank among those after the same MPT.
    let mut low = vec![0usize; entries.len()];
    let mut taken: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, _) in entries.iter().enumerate().filter(|(_, e)| !is_mpt(e)) {
        let n = taken.entry(high[i]).or_insert(0);
        *n += 1;
        low[i] = *n;
    }
    let widest = taken.values().copied().max().unwrap_or(0);
    let low_bits = usize::BITS - widest.leading_zeros();
    let high_bits = usize::BITS - rank.leading_zeros();
    if low_bits + high_bits > SLOT_BITS {
        return None;
    }
    Some(
        high.iter()
            .zip(&low)
            .map(|(h, l)| (h << low_bits) | l)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::dispatch::Body;
    use augur_types::{ProcedureCall, TxnId};

    fn entry(n: u64, partitions: &[u32]) -> Entry {
        Entry {
            txn: TxnId::new(augur_types::NodeId(0), n),
            partitions: partitions.iter().map(|p| PartitionId(*p)).collect(),
            body: Body::Writes(Vec::new()),
            footprint: None,
        }
    }

    /// The order the slots give, as the entries' numbers.
    fn order(entries: &[Entry], slots: &[usize]) -> Vec<u64> {
        let mut by_slot: Vec<(usize, u64)> = slots
            .iter()
            .zip(entries)
            .map(|(s, e)| (*s, e.txn.seq()))
            .collect();
        by_slot.sort();
        by_slot.into_iter().map(|(_, n)| n).collect()
    }

    /// MPTs are grouped by partition set in the order of their first member; each partition's
    /// SPTs are spread in chunks before and after the groups it is in.
    #[test]
    fn groups_by_partition_set_and_spreads_each_partitions_spts() {
        let batch = vec![
            entry(1, &[0]),
            entry(2, &[0, 1]),
            entry(3, &[1, 2]),
            entry(4, &[0]),
            entry(5, &[0, 1]),
            entry(6, &[1]),
            entry(7, &[0]),
            entry(8, &[1, 2]),
            entry(9, &[2]),
        ];
        let slots = arrange(&batch, None).expect("fits");
        // Groups: {2, 5} (p0, p1), then {3, 8} (p1, p2). p0's SPTs 1, 4, 7 in two chunks
        // (before and after the first group: 1 and 4 | 7); p1's SPT 6 in three (6 | | ); p2's
        // SPT 9 in two (9 | ).
        assert_eq!(order(&batch, &slots), vec![1, 4, 6, 9, 2, 5, 7, 3, 8]);
        let mut distinct = slots.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), slots.len(), "slots are distinct");
    }

    /// Read-only MPTs go first, before every SPT and group.
    #[test]
    fn read_only_mpts_go_first() {
        let mut reader = entry(3, &[0, 1]);
        reader.body = Body::Call {
            call: ProcedureCall::encode("w", "read", &()),
            read_only: true,
        };
        let batch = vec![entry(1, &[0]), entry(2, &[0, 1]), reader, entry(4, &[1])];
        let slots = arrange(&batch, None).expect("fits");
        assert_eq!(order(&batch, &slots), vec![3, 1, 4, 2]);
    }

    /// A batch whose arrangement needs more than the slot's bits is left as delivered.
    #[test]
    fn a_batch_too_large_to_arrange_is_left_as_delivered() {
        let big: Vec<Entry> = (0..1u64 << 11)
            .map(|n| {
                if n % 2 == 0 {
                    entry(n, &[0, 1])
                } else {
                    entry(n, &[2])
                }
            })
            .collect();
        // 1024 MPTs (11 bits with the 0 rank) and 1024 SPTs of p2 after the last one: 22 bits.
        assert!(arrange(&big, None).is_none());
    }
}
