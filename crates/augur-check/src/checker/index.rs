//! The history, interned: keys and values become dense ids once, so that every later pass works
//! on `Vec`-indexed arrays and hashes small integers instead of strings.
//!
//! A *version* (`vid`) is one distinct (key, value) pair. Every key also gets a version for its
//! initial (absent) state, so that "read the initial version" is an ordinary read of a version
//! with no writer.

use super::ValueModel;
use augur_types::history::{History, Op, RecordedOutcome};
use rustc_hash::FxHashMap;

/// "No such thing" for `u32` ids.
pub(super) const NONE: u32 = u32::MAX;

/// How the checker treats an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Status {
    Committed,
    Aborted,
    /// Outcome unknown, but another transaction observed one of its installed values: it must
    /// have committed.
    UnknownObserved,
    /// Outcome unknown and never observed: treated as not committed.
    UnknownIgnored,
}

impl Status {
    /// Whether the attempt is a node of the dependency graph.
    pub(super) fn in_graph(self) -> bool {
        matches!(self, Status::Committed | Status::UnknownObserved)
    }
}

/// The text of a version.
#[derive(Clone, Copy, Debug)]
pub(super) enum VText<'h> {
    /// The key's initial, absent value.
    Initial,
    Value(&'h str),
    /// A write of `None` (a delete). Reads of `None` are reads of the initial version, so a
    /// delete gets a version of its own that no read can name.
    Deleted,
}

/// A transaction's installed (last) write of a key.
#[derive(Clone, Copy, Debug)]
pub(super) struct FinalWrite {
    pub key: u32,
    pub vid: u32,
    /// The version the transaction read from another transaction (or the initial version)
    /// before its first write of the key, if it read the key first.
    pub base: u32,
}

/// A read of a key the transaction had not written yet (its "external" reads).
#[derive(Clone, Copy, Debug)]
pub(super) struct ExtRead {
    pub key: u32,
    pub vid: u32,
}

/// One write, in program order (intermediate ones included).
#[derive(Clone, Copy, Debug)]
pub(super) struct WriteOp {
    pub key: u32,
    pub vid: u32,
}

/// A read inconsistent with the transaction's own writes.
#[derive(Clone, Copy, Debug)]
pub(super) struct InternalIssue {
    pub txn: u32,
    pub key: u32,
    /// The transaction's latest write of the key before the read, or `NONE` when the read
    /// returned a value the transaction only wrote later.
    pub expected: u32,
    pub got: u32,
}

/// A key read twice by one transaction, with no write of its own to it in between, returning
/// two different values (a non-repeatable read).
#[derive(Clone, Copy, Debug)]
pub(super) struct RepeatedRead {
    pub txn: u32,
    pub key: u32,
    pub first: u32,
    pub second: u32,
}

pub(super) struct Index<'h> {
    pub history: &'h History,
    /// How many of `history`'s attempts were recorded; those past it are unknown writers
    /// (`unknown_writers`).
    pub recorded: usize,
    pub model: ValueModel,
    pub keys: Vec<&'h str>,
    /// The initial version of each key.
    pub init_vid: Vec<u32>,
    pub vid_key: Vec<u32>,
    pub vid_text: Vec<VText<'h>>,
    /// The transaction that wrote each version (the most committed one, should the workload
    /// ever write a value twice), or `NONE`.
    pub vid_writer: Vec<u32>,
    /// Whether that write was the writer's last write of the key (the one it installed).
    pub vid_final: Vec<bool>,
    /// List-append: each version's elements, as `(start, len)` into `elems`; `ok` is false for
    /// text that is not a list of numbers.
    pub elems: Vec<u64>,
    pub span: Vec<(u32, u32)>,
    pub list_ok: Vec<bool>,
    /// List-append: the transaction that appended each (key, element).
    pub owner: FxHashMap<(u32, u64), u32>,
    /// List-append: for each version, an aborted transaction that appended one of its elements
    /// (the first such element's), or `NONE`.
    pub aborted_in: Vec<u32>,
    pub status: Vec<Status>,
    pub fw: Vec<FinalWrite>,
    pub fw_off: Vec<u32>,
    pub er: Vec<ExtRead>,
    pub er_off: Vec<u32>,
    pub wo: Vec<WriteOp>,
    pub wo_off: Vec<u32>,
    pub internal: Vec<InternalIssue>,
    pub repeated: Vec<RepeatedRead>,
    /// Whether some attempt's operations are unknown (`TxnRecord::ops_unknown`).
    pub opaque_writers: bool,
}

fn raw_rank(outcome: &RecordedOutcome) -> u8 {
    match outcome {
        RecordedOutcome::Committed { .. } => 3,
        RecordedOutcome::Unknown => 2,
        RecordedOutcome::Aborted { .. } => 1,
    }
}

struct Interner<'h> {
    keys: Vec<&'h str>,
    key_ids: FxHashMap<&'h str, u32>,
    init_vid: Vec<u32>,
    vids: FxHashMap<(u32, &'h str), u32>,
    vid_key: Vec<u32>,
    vid_text: Vec<VText<'h>>,
}

impl<'h> Interner<'h> {
    fn key(&mut self, key: &'h str) -> u32 {
        if let Some(&k) = self.key_ids.get(key) {
            return k;
        }
        let k = self.keys.len() as u32;
        self.keys.push(key);
        self.key_ids.insert(key, k);
        let init = self.fresh(k, VText::Initial);
        self.init_vid.push(init);
        k
    }

    fn fresh(&mut self, key: u32, text: VText<'h>) -> u32 {
        let v = self.vid_key.len() as u32;
        self.vid_key.push(key);
        self.vid_text.push(text);
        v
    }

    fn value(&mut self, key: u32, text: &'h str) -> u32 {
        if let Some(&v) = self.vids.get(&(key, text)) {
            return v;
        }
        let v = self.fresh(key, VText::Value(text));
        self.vids.insert((key, text), v);
        v
    }

    /// The version a read of `value` names. For lists, `""` is the empty list, the same as
    /// absent.
    fn read(&mut self, model: ValueModel, key: u32, value: &'h Option<String>) -> u32 {
        match value {
            None => self.init_vid[key as usize],
            Some(s) if model == ValueModel::ListAppend && s.trim().is_empty() => {
                self.init_vid[key as usize]
            }
            Some(s) => self.value(key, s),
        }
    }

    fn write(&mut self, key: u32, value: &'h Option<String>) -> u32 {
        match value {
            None => self.fresh(key, VText::Deleted),
            Some(s) => self.value(key, s),
        }
    }
}

impl<'h> Index<'h> {
    pub(super) fn build(history: &'h History, model: ValueModel) -> Index<'h> {
        let n = history.txns.len();
        let ops: usize = history.txns.iter().map(|t| t.ops.len()).sum();
        let mut vids = FxHashMap::default();
        // Most values are written once and read a few times.
        vids.reserve(ops / 2);
        let mut it = Interner {
            keys: Vec::new(),
            key_ids: FxHashMap::default(),
            init_vid: Vec::new(),
            vids,
            vid_key: Vec::new(),
            vid_text: Vec::new(),
        };
        let mut fw = Vec::new();
        let mut fw_off = Vec::with_capacity(n + 1);
        let mut er = Vec::new();
        let mut er_off = Vec::with_capacity(n + 1);
        let mut wo = Vec::new();
        let mut wo_off = Vec::with_capacity(n + 1);
        let mut internal = Vec::new();
        let mut repeated = Vec::new();
        // Per transaction: key -> (latest own write, base read), and key -> last external read.
        let mut own: FxHashMap<u32, (u32, u32)> = FxHashMap::default();
        let mut own_order: Vec<u32> = Vec::new();
        let mut last_read: FxHashMap<u32, u32> = FxHashMap::default();
        // Later own writes, to recognise a read of a value the transaction only writes later.
        for (t, rec) in history.txns.iter().enumerate() {
            fw_off.push(fw.len() as u32);
            er_off.push(er.len() as u32);
            wo_off.push(wo.len() as u32);
            own.clear();
            own_order.clear();
            last_read.clear();
            for op in &rec.ops {
                match op {
                    Op::Read { key, value } => {
                        let k = it.key(key);
                        let v = it.read(model, k, value);
                        if let Some(&(latest, _)) = own.get(&k) {
                            if !same_value(&it.vid_text, model, latest, v) {
                                internal.push(InternalIssue {
                                    txn: t as u32,
                                    key: k,
                                    expected: latest,
                                    got: v,
                                });
                            }
                        } else {
                            if let Some(&before) = last_read.get(&k)
                                && !same_value(&it.vid_text, model, before, v)
                            {
                                repeated.push(RepeatedRead {
                                    txn: t as u32,
                                    key: k,
                                    first: before,
                                    second: v,
                                });
                            }
                            er.push(ExtRead { key: k, vid: v });
                            last_read.insert(k, v);
                        }
                    }
                    Op::Write { key, value } => {
                        let k = it.key(key);
                        let v = it.write(k, value);
                        wo.push(WriteOp { key: k, vid: v });
                        match own.get_mut(&k) {
                            Some(entry) => entry.0 = v,
                            None => {
                                let base = last_read.get(&k).copied().unwrap_or(NONE);
                                own.insert(k, (v, base));
                                own_order.push(k);
                            }
                        }
                    }
                }
            }
            for &k in &own_order {
                let (vid, base) = own[&k];
                fw.push(FinalWrite { key: k, vid, base });
            }
        }
        fw_off.push(fw.len() as u32);
        er_off.push(er.len() as u32);
        wo_off.push(wo.len() as u32);

        let nv = it.vid_key.len();
        let mut ix = Index {
            history,
            model,
            keys: it.keys,
            init_vid: it.init_vid,
            vid_key: it.vid_key,
            vid_text: it.vid_text,
            vid_writer: vec![NONE; nv],
            vid_final: vec![false; nv],
            elems: Vec::new(),
            span: Vec::new(),
            list_ok: Vec::new(),
            owner: FxHashMap::default(),
            aborted_in: Vec::new(),
            status: Vec::with_capacity(n),
            fw,
            fw_off,
            er,
            er_off,
            wo,
            wo_off,
            internal,
            repeated,
            opaque_writers: history.txns.iter().any(|t| t.ops_unknown),
            recorded: n,
        };
        ix.assign_writers();
        if model == ValueModel::ListAppend {
            ix.parse_lists();
            ix.assign_owners();
        }
        ix.find_reads_of_own_later_writes();
        ix.assign_status();
        if model == ValueModel::ListAppend {
            ix.find_aborted_elements();
        }
        ix
    }

    pub(super) fn n(&self) -> usize {
        self.history.txns.len()
    }

    pub(super) fn final_writes(&self, t: u32) -> &[FinalWrite] {
        &self.fw[self.fw_off[t as usize] as usize..self.fw_off[t as usize + 1] as usize]
    }

    pub(super) fn ext_reads(&self, t: u32) -> &[ExtRead] {
        &self.er[self.er_off[t as usize] as usize..self.er_off[t as usize + 1] as usize]
    }

    pub(super) fn writes(&self, t: u32) -> &[WriteOp] {
        &self.wo[self.wo_off[t as usize] as usize..self.wo_off[t as usize + 1] as usize]
    }

    /// `t`'s installed write of `key`, if any.
    pub(super) fn final_write_of(&self, t: u32, key: u32) -> Option<&FinalWrite> {
        self.final_writes(t).iter().find(|w| w.key == key)
    }

    pub(super) fn is_init(&self, vid: u32) -> bool {
        matches!(self.vid_text[vid as usize], VText::Initial)
    }

    /// A version is *installed* when it is the initial version or the final write of a
    /// transaction in the graph.
    pub(super) fn installed(&self, vid: u32) -> bool {
        if self.is_init(vid) {
            return true;
        }
        let w = self.vid_writer[vid as usize];
        w != NONE && self.vid_final[vid as usize] && self.status[w as usize].in_graph()
    }

    /// List-append: the elements of a version (empty for the initial version and deletes).
    pub(super) fn list(&self, vid: u32) -> &[u64] {
        let (s, l) = self.span[vid as usize];
        &self.elems[s as usize..(s + l) as usize]
    }

    /// Each version's writer: the most committed, installed write of it.
    fn assign_writers(&mut self) {
        let mut rank = vec![0u8; self.vid_key.len()];
        // Marks the versions the current transaction installs (a version names its key).
        let mut installs = vec![false; self.vid_key.len()];
        for t in 0..self.n() as u32 {
            let r = raw_rank(&self.history.txns[t as usize].outcome) * 2;
            for f in self.final_writes(t) {
                installs[f.vid as usize] = true;
            }
            for i in self.wo_off[t as usize]..self.wo_off[t as usize + 1] {
                let w = self.wo[i as usize];
                let is_final = installs[w.vid as usize];
                let r = r + is_final as u8;
                if r > rank[w.vid as usize] {
                    rank[w.vid as usize] = r;
                    self.vid_writer[w.vid as usize] = t;
                    self.vid_final[w.vid as usize] = is_final;
                }
            }
            for f in self.final_writes(t) {
                installs[f.vid as usize] = false;
            }
        }
    }

    fn parse_lists(&mut self) {
        let nv = self.vid_key.len();
        self.span = Vec::with_capacity(nv);
        self.list_ok = Vec::with_capacity(nv);
        for v in 0..nv {
            let start = self.elems.len();
            let mut ok = true;
            if let VText::Value(s) = self.vid_text[v] {
                for part in s.split_ascii_whitespace() {
                    match part.parse::<u64>() {
                        Ok(e) => self.elems.push(e),
                        Err(_) => {
                            ok = false;
                            break;
                        }
                    }
                }
            }
            if !ok {
                self.elems.truncate(start);
            }
            self.span
                .push((start as u32, (self.elems.len() - start) as u32));
            self.list_ok.push(ok);
        }
    }

    /// Who appended each element. A write's new elements are those beyond the list the
    /// transaction last saw of the key (its read before its first write, then its own previous
    /// write). A write that does not extend what its transaction saw claims, afterwards, only the
    /// elements nobody else appended.
    fn assign_owners(&mut self) {
        let mut owner: FxHashMap<(u32, u64), u32> = FxHashMap::default();
        let mut deferred: Vec<(u32, u32)> = Vec::new();
        let mut seen: FxHashMap<u32, u32> = FxHashMap::default();
        for t in 0..self.n() as u32 {
            seen.clear();
            for w in self.writes(t) {
                if !self.list_ok[w.vid as usize] {
                    continue;
                }
                let prev = match seen.get(&w.key) {
                    Some(&p) => p,
                    None => self.final_write_of(t, w.key).map_or(NONE, |f| f.base),
                };
                seen.insert(w.key, w.vid);
                let list = self.list(w.vid);
                if prev != NONE && self.list_ok[prev as usize] && list.starts_with(self.list(prev))
                {
                    for &e in &list[self.list(prev).len()..] {
                        owner.entry((w.key, e)).or_insert(t);
                    }
                } else {
                    deferred.push((t, w.vid));
                }
            }
        }
        for (t, vid) in deferred {
            let key = self.vid_key[vid as usize];
            for &e in self.list(vid) {
                owner.entry((key, e)).or_insert(t);
            }
        }
        self.owner = owner;
    }

    /// Which lists hold an element an aborted transaction appended: whoever reads such a list
    /// observed that transaction's write, whoever else wrote the list.
    fn find_aborted_elements(&mut self) {
        self.aborted_in = vec![NONE; self.vid_key.len()];
        if !self.status.contains(&Status::Aborted) {
            return;
        }
        // Aborted appends are few: a small table stays in cache while every list is scanned.
        let aborted: FxHashMap<(u32, u64), u32> = self
            .owner
            .iter()
            .filter(|&(_, &o)| self.status[o as usize] == Status::Aborted)
            .map(|(&k, &o)| (k, o))
            .collect();
        for v in 0..self.vid_key.len() {
            let key = self.vid_key[v];
            for &e in self.list(v as u32) {
                if let Some(&o) = aborted.get(&(key, e)) {
                    self.aborted_in[v] = o;
                    break;
                }
            }
        }
    }

    /// A read, before any own write of the key, of a value the transaction itself writes: it
    /// cannot have come from anywhere but the transaction's own future.
    fn find_reads_of_own_later_writes(&mut self) {
        for t in 0..self.n() as u32 {
            for i in self.er_off[t as usize]..self.er_off[t as usize + 1] {
                let r = self.er[i as usize];
                if !self.is_init(r.vid) && self.vid_writer[r.vid as usize] == t {
                    self.internal.push(InternalIssue {
                        txn: t,
                        key: r.key,
                        expected: NONE,
                        got: r.vid,
                    });
                }
            }
        }
    }

    /// Committed, aborted, and for unknown outcomes whether a committed transaction observed
    /// one of the installed values (then the transaction must have committed too).
    ///
    /// Only committed observers count, directly or through unknown transactions they prove
    /// committed: under speculation (SPSI) an aborted transaction may have read a version that
    /// was never committed, so its observations prove nothing.
    fn assign_status(&mut self) {
        let n = self.n();
        let mut observed = vec![false; n];
        let mut any_unknown = false;
        for rec in &self.history.txns {
            any_unknown |= matches!(rec.outcome, RecordedOutcome::Unknown);
        }
        if any_unknown {
            let is_unknown = |w: u32| {
                matches!(
                    self.history.txns[w as usize].outcome,
                    RecordedOutcome::Unknown
                )
            };
            // Committed readers first; an unknown transaction they prove committed then
            // vouches for what it read in turn.
            let mut readers: Vec<u32> = (0..n as u32)
                .filter(|t| {
                    matches!(
                        self.history.txns[*t as usize].outcome,
                        RecordedOutcome::Committed { .. }
                    )
                })
                .collect();
            while let Some(t) = readers.pop() {
                let prove = |o: u32, observed: &mut Vec<bool>, readers: &mut Vec<u32>| {
                    if o != t && is_unknown(o) && !observed[o as usize] {
                        observed[o as usize] = true;
                        readers.push(o);
                    }
                };
                for r in self.ext_reads(t) {
                    let w = self.vid_writer[r.vid as usize];
                    if w != NONE {
                        if self.vid_final[r.vid as usize] {
                            prove(w, &mut observed, &mut readers);
                        }
                    } else if self.model == ValueModel::ListAppend && self.list_ok[r.vid as usize] {
                        // A list nobody wrote as a whole still shows whose elements got in.
                        for &e in self.list(r.vid) {
                            if let Some(&o) = self.owner.get(&(r.key, e)) {
                                prove(o, &mut observed, &mut readers);
                            }
                        }
                    }
                }
            }
        }
        self.status = self
            .history
            .txns
            .iter()
            .enumerate()
            .map(|(t, rec)| match rec.outcome {
                RecordedOutcome::Committed { .. } => Status::Committed,
                RecordedOutcome::Aborted { .. } => Status::Aborted,
                RecordedOutcome::Unknown if observed[t] => Status::UnknownObserved,
                RecordedOutcome::Unknown => Status::UnknownIgnored,
            })
            .collect();
    }
}

/// Whether two versions hold the same value (an empty list and the initial one are alike).
fn same_value(text: &[VText<'_>], model: ValueModel, a: u32, b: u32) -> bool {
    if a == b {
        return true;
    }
    let empty = |v: u32| match text[v as usize] {
        VText::Initial | VText::Deleted => true,
        VText::Value(s) => model == ValueModel::ListAppend && s.trim().is_empty(),
    };
    empty(a) && empty(b)
}
