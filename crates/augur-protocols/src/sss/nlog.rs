//! `NLog` (SSS §III-A): the commit vector clocks of the transactions applied at this node, in
//! apply order. A version's position in `NLog` is its timestamp in the store, so a version's
//! clock is one index away.
//!
//! Each entry also keeps the running maximum of the log up to it, so that `NLog.mostRecentVC`
//! (the clock a transaction begins with, and an update read returns) costs nothing.
//!
//! Entries older than the garbage-collection retention are collapsed into `base`, their
//! entrywise maximum, and the store keeps only the newest of the versions they wrote. Entries
//! of writers not final here are never collapsed (a reader may skip them and need the version
//! before), so a read-only read finds the version it needs unless it skips a writer that is
//! final here, which no reader does (it would have to hold that writer elsewhere).

use crate::common::vclock::VClock;
use augur_types::{Key, Timestamp, TxnId};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

#[derive(Clone, Debug)]
struct Entry {
    txn: TxnId,
    vc: VClock,
    /// The entrywise maximum of `base` and every entry up to this one.
    running_max: VClock,
    /// The keys the transaction wrote here.
    keys: Vec<Key>,
    applied_at: Timestamp,
}

#[derive(Clone, Debug)]
pub struct NLog {
    /// The position of `entries[0]`; positions start at 1 (0: no version).
    first: u64,
    entries: VecDeque<Entry>,
    base: VClock,
    positions: FxHashMap<TxnId, u64>,
}

/// `NLog` as a checkpoint stores it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    first: u64,
    base: VClock,
    entries: Vec<(TxnId, VClock, Vec<Key>)>,
}

impl NLog {
    pub fn new(nodes: usize) -> NLog {
        NLog {
            first: 1,
            entries: VecDeque::new(),
            base: VClock::new(nodes),
            positions: FxHashMap::default(),
        }
    }

    /// `NLog.mostRecentVC`: the entrywise maximum of every clock applied here.
    pub fn most_recent(&self) -> &VClock {
        self.entries.back().map_or(&self.base, |e| &e.running_max)
    }

    /// The position of the oldest entry still kept.
    pub fn first_position(&self) -> u64 {
        self.first
    }

    /// The position of the newest entry (`first_position() - 1` when none is kept).
    pub fn last_position(&self) -> u64 {
        self.first + self.entries.len() as u64 - 1
    }

    /// Append `txn`'s commit clock; returns its position.
    pub fn append(&mut self, txn: TxnId, vc: VClock, keys: Vec<Key>, now: Timestamp) -> u64 {
        let mut running_max = self.most_recent().clone();
        running_max.merge(&vc);
        let position = self.first + self.entries.len() as u64;
        self.entries.push_back(Entry {
            txn,
            vc,
            running_max,
            keys,
            applied_at: now,
        });
        self.positions.insert(txn, position);
        position
    }

    fn entry(&self, position: u64) -> Option<&Entry> {
        let index = position.checked_sub(self.first)?;
        self.entries.get(usize::try_from(index).ok()?)
    }

    /// The commit clock of the version at `position`; `None` once collapsed (it is then
    /// within [`NLog::base`]).
    pub fn clock_of(&self, position: u64) -> Option<&VClock> {
        self.entry(position).map(|e| &e.vc)
    }

    /// Where `txn` was applied, while its entry is kept.
    pub fn position_of(&self, txn: TxnId) -> Option<u64> {
        self.positions.get(&txn).copied()
    }

    /// The keys the transaction at `position` wrote here.
    pub fn keys_of(&self, position: u64) -> &[Key] {
        self.entry(position).map_or(&[], |e| &e.keys)
    }

    /// Collapse the entries applied before `horizon` into `base` (keeping the newest entry),
    /// stopping at position `keep_from` (the oldest entry a reader may still need to exclude).
    pub fn collapse_before(&mut self, horizon: Timestamp, keep_from: u64) {
        while self.entries.len() > 1
            && self.entries[0].applied_at < horizon
            && self.first < keep_from
        {
            let e = self.entries.pop_front().expect("non-empty");
            self.positions.remove(&e.txn);
            self.base = e.running_max;
            self.first += 1;
        }
    }

    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            first: self.first,
            base: self.base.clone(),
            entries: self
                .entries
                .iter()
                .map(|e| (e.txn, e.vc.clone(), e.keys.clone()))
                .collect(),
        }
    }

    /// The log a checkpoint stored (entries count as applied at time zero, so the first
    /// garbage collection after a restart collapses them).
    pub fn restore(c: Checkpoint) -> NLog {
        let mut log = NLog {
            first: c.first,
            entries: VecDeque::new(),
            base: c.base,
            positions: FxHashMap::default(),
        };
        for (txn, vc, keys) in c.entries {
            log.append(txn, vc, keys, Timestamp::ZERO);
        }
        log
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_types::NodeId;

    fn t(n: u64) -> TxnId {
        TxnId::new(NodeId(0), n)
    }

    fn vc(entries: &[u64]) -> VClock {
        VClock::from(entries.to_vec())
    }

    #[test]
    fn positions_clocks_and_the_running_maximum() {
        let mut log = NLog::new(2);
        assert_eq!(log.last_position(), 0);
        log.append(t(1), vc(&[1, 0]), vec![], Timestamp(1));
        log.append(t(2), vc(&[2, 5]), vec![], Timestamp(2));
        log.append(t(3), vc(&[3, 1]), vec![], Timestamp(3));
        assert_eq!(log.most_recent(), &vc(&[3, 5]));
        assert_eq!(log.last_position(), 3);
        assert_eq!(log.position_of(t(2)), Some(2));
        assert_eq!(log.clock_of(3), Some(&vc(&[3, 1])));
    }

    #[test]
    fn collapsing_keeps_the_newest_entry_and_what_is_not_final() {
        let mut log = NLog::new(2);
        log.append(t(1), vc(&[1, 4]), vec![], Timestamp(1));
        log.append(t(2), vc(&[2, 0]), vec![], Timestamp(2));
        log.append(t(3), vc(&[3, 0]), vec![], Timestamp(3));
        // t(2) is not final: nothing from it on is collapsed.
        log.collapse_before(Timestamp(9), 2);
        assert_eq!(log.first_position(), 2);
        assert_eq!(log.clock_of(1), None);
        log.collapse_before(Timestamp(9), u64::MAX);
        assert_eq!(log.first_position(), 3);
        assert_eq!(log.last_position(), 3);
        let restored = NLog::restore(log.checkpoint());
        assert_eq!(restored.most_recent(), log.most_recent());
        assert_eq!(restored.most_recent(), &vc(&[3, 4]));
        assert_eq!(restored.position_of(t(3)), Some(3));
    }
}
