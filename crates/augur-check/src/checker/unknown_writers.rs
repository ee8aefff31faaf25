//! The writers of list elements no recorded operation appended, in a history holding attempts
//! whose operations are unknown (`TxnRecord::ops_unknown`: a one-shot attempt whose reply was
//! lost, so its client never learned what it read and wrote).
//!
//! Such an attempt may have appended elements that others then read. The values do not name it,
//! but a `list-append` list orders its elements: an element `e` of key `k` that every observed
//! list holds after the same prefix `p` was appended by *some* transaction whose write of `k`
//! installed `p e`. The checker stands one *unknown writer* in for it per element: an attempt
//! with that one write, an unknown outcome (proved committed, as any other, when a committed
//! transaction observes it), no client order and no real-time interval. Its edges are the real
//! transaction's edges: `ww` from the writer of `p` and to the writer of the next version,
//! `rw` from the readers of `p`, `wr` to the readers of `p e`. So a cycle through an unknown
//! writer is a cycle through the attempt that appended the element — sound — while what the
//! attempt read stays unknown and gives no edge, and two elements it appended count as two
//! writers: cycles only through both halves, and the intermediate read of its first element,
//! go unreported (incomplete, never wrong).
//!
//! Registers get no unknown writers: a value alone orders nothing, so a writer standing in for
//! an unknown one would add only its reads' `wr` edges, which the read of an unwritten value
//! already implies.

use super::ValueModel;
use super::index::Index;
use augur_types::history::{History, Op, RecordedOutcome, TxnRecord};
use rustc_hash::FxHashSet;

/// The name the unknown writers carry in the augmented history.
pub(super) const NAME: &str = "unknown writer";

/// `history` with one unknown writer appended per list element no recorded write appended,
/// or `None` when there is none to add (no attempt with unknown operations, or no such
/// element, or not a list history).
pub(super) fn with_unknown_writers(history: &History, ix: &Index<'_>) -> Option<History> {
    if ix.model != ValueModel::ListAppend || !ix.opaque_writers {
        return None;
    }
    let mut seen: FxHashSet<(u32, u64)> = FxHashSet::default();
    let mut writes: Vec<(u32, String)> = Vec::new();
    for vid in 0..ix.vid_key.len() as u32 {
        if !ix.list_ok[vid as usize] {
            continue;
        }
        let key = ix.vid_key[vid as usize];
        let list = ix.list(vid);
        for (i, &e) in list.iter().enumerate() {
            if ix.owner.contains_key(&(key, e)) || !seen.insert((key, e)) {
                continue;
            }
            let prefix: Vec<String> = list[..=i].iter().map(u64::to_string).collect();
            writes.push((key, prefix.join(" ")));
        }
    }
    if writes.is_empty() {
        return None;
    }
    let recorded = history.txns.len();
    let mut augmented = history.clone();
    augmented.txns.extend(
        writes
            .into_iter()
            .enumerate()
            .map(|(j, (key, value))| TxnRecord {
                index: recorded + j,
                // A client of its own: no session order.
                client: u64::MAX - j as u64,
                txn: None,
                name: NAME.into(),
                read_only: false,
                // No real-time interval: nothing finished before it began or began after it ended.
                invoke_us: 0,
                complete_us: u64::MAX,
                ops: vec![Op::Write {
                    key: ix.key_name(key).to_string(),
                    value: Some(value),
                }],
                outcome: RecordedOutcome::Unknown,
                ops_unknown: false,
                call: None,
            }),
    );
    Some(augmented)
}
