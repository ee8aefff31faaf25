//! Words: how transactions, versions and edges are named in reports, and the collector that
//! bounds how many anomalies of each kind are spelled out.

use super::index::{Index, NONE, Status, VText};
use crate::anomaly::{Anomaly, AnomalyKind, Edge, Proscribes};
use augur_types::IsolationLevel;
use rustc_hash::FxHashMap;
use std::fmt::Write;

/// How many anomalies of one kind are written out in full; the rest are counted.
pub(super) const MAX_PER_KIND: usize = 10;

/// Longest value quoted in full; longer lists are shown by their tail.
const MAX_VALUE_CHARS: usize = 48;

impl Index<'_> {
    /// `T12 (client 3)`, with the outcome when the transaction did not plainly commit.
    pub(super) fn name(&self, t: u32) -> String {
        let rec = &self.history.txns[t as usize];
        if t as usize >= self.recorded
            && let [
                augur_types::history::Op::Write {
                    key,
                    value: Some(list),
                },
            ] = &rec.ops[..]
        {
            let element = list.rsplit(' ').next().unwrap_or(list);
            return format!(
                "T{} (an unknown writer: the attempt, its operations unknown, that appended {element} to {key})",
                rec.index
            );
        }
        let outcome = match self.status[t as usize] {
            Status::Committed => "",
            Status::Aborted => ", aborted",
            Status::UnknownObserved => ", outcome unknown but observed",
            Status::UnknownIgnored => ", outcome unknown",
        };
        format!("T{} (client {}{outcome})", rec.index, rec.client)
    }

    /// `T12`: the history index.
    pub(super) fn short(&self, t: u32) -> String {
        format!("T{}", self.history.txns[t as usize].index)
    }

    pub(super) fn index_of(&self, t: u32) -> usize {
        self.history.txns[t as usize].index
    }

    pub(super) fn key_name(&self, key: u32) -> &str {
        self.keys[key as usize]
    }

    /// A version's value, quoted: `"4 7"`, `nil (initial)`, `nil (deleted)`; long lists by
    /// their tail and length.
    pub(super) fn value(&self, vid: u32) -> String {
        match self.vid_text[vid as usize] {
            VText::Initial => "nil (the initial version)".into(),
            VText::Deleted => "nil (a delete)".into(),
            VText::Value(s) if s.len() <= MAX_VALUE_CHARS => format!("{s:?}"),
            VText::Value(s) => {
                let mut cut = s.len() - MAX_VALUE_CHARS;
                while !s.is_char_boundary(cut) {
                    cut += 1;
                }
                let tail = &s[cut..];
                let tail = tail.find(' ').map_or(tail, |i| &tail[i + 1..]);
                let count = s.split_ascii_whitespace().count();
                format!("\"… {tail}\" ({count} elements)")
            }
        }
    }

    /// `0/3 = "4 7"`.
    pub(super) fn kv(&self, vid: u32) -> String {
        format!(
            "{} = {}",
            self.key_name(self.vid_key[vid as usize]),
            self.value(vid)
        )
    }

    /// Who wrote a version, in words: `T3 (client 1)` or `no transaction (the initial version)`.
    pub(super) fn writer_name(&self, vid: u32) -> String {
        match self.vid_writer[vid as usize] {
            NONE => "no transaction".into(),
            w => self.name(w),
        }
    }
}

/// Collects anomalies, spelling out at most [`MAX_PER_KIND`] of each kind.
pub(super) struct Collector {
    level: IsolationLevel,
    counts: FxHashMap<AnomalyKind, usize>,
    pub anomalies: Vec<Anomaly>,
}

impl Collector {
    pub(super) fn new(level: IsolationLevel) -> Collector {
        Collector {
            level,
            counts: FxHashMap::default(),
            anomalies: Vec::new(),
        }
    }

    /// Count one anomaly of `kind`; true when it should be written out. Callers check this
    /// before building strings, so that a history with a million anomalies stays cheap.
    pub(super) fn admit(&mut self, kind: AnomalyKind) -> bool {
        let c = self.counts.entry(kind).or_insert(0);
        *c += 1;
        *c <= MAX_PER_KIND
    }

    /// Whether some anomaly the level proscribes was found (written out or only counted).
    pub(super) fn any_proscribed(&self) -> bool {
        self.counts
            .iter()
            .any(|(&kind, &n)| n > 0 && self.level.proscribes(kind))
    }

    pub(super) fn push(
        &mut self,
        kind: AnomalyKind,
        txns: Vec<usize>,
        keys: Vec<String>,
        edges: Vec<Edge>,
        explanation: String,
    ) {
        self.anomalies.push(Anomaly {
            kind,
            proscribed: self.level.proscribes(kind),
            txns,
            keys,
            edges,
            explanation,
        });
    }

    /// The anomalies, most severe kind first, each kind's last one saying how many more were
    /// found but not written out.
    pub(super) fn finish(mut self) -> Vec<Anomaly> {
        self.anomalies.sort_by_key(|a| a.kind);
        let mut i = 0;
        while i < self.anomalies.len() {
            let kind = self.anomalies[i].kind;
            let mut j = i;
            while j + 1 < self.anomalies.len() && self.anomalies[j + 1].kind == kind {
                j += 1;
            }
            let total = self.counts.get(&kind).copied().unwrap_or(0);
            let shown = j + 1 - i;
            if total > shown {
                let _ = write!(
                    self.anomalies[j].explanation,
                    " ({} more {} anomalies were found and not listed.)",
                    total - shown,
                    kind
                );
            }
            i = j + 1;
        }
        self.anomalies
    }
}
