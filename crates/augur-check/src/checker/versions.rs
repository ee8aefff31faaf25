//! Version order: which installed version of a key came before which.
//!
//! Adya's dependency graph needs, for every key, the order in which versions were installed.
//! A black-box checker must infer it (Elle, §4): list-append values spell it out, since each list
//! is the list its writer read plus the new elements; registers reveal only that the initial
//! version comes first and that a transaction which read a version and then wrote the key
//! installed something later. Protocols whose commit timestamps order versions can vouch for
//! more (white-box evidence), which the caller opts into.
//!
//! The order is kept as the set of *evidence pairs* `a < b`: for a total order these are the
//! adjacent pairs, for a partial one the direct evidence, so `ww` and `rw` edges follow Adya's
//! "next version" wherever it is known.

use super::explain::Collector;
use super::graph::Evidence;
use super::index::{Index, NONE, Status};
use super::{CheckOptions, ValueModel};
use crate::anomaly::AnomalyKind;
use augur_types::IsolationLevel;
use augur_types::history::RecordedOutcome;
use rustc_hash::{FxHashMap, FxHashSet};

/// Evidence that version `a` of `key` was installed before version `b`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pair {
    pub key: u32,
    pub a: u32,
    pub b: u32,
    pub evidence: Evidence,
}

/// The evidence pairs over installed versions, from which `ww` and `rw` edges are drawn.
/// Reports keys whose list versions cannot be ordered (`IncompatibleOrder`).
pub(super) fn installed_order(
    ix: &Index<'_>,
    options: &CheckOptions,
    out: &mut Collector,
) -> Vec<Pair> {
    let mut pairs = match ix.model {
        ValueModel::ListAppend => list_pairs(ix, out),
        ValueModel::RwRegister => register_pairs(ix, options, |s| s.in_graph()),
    };
    dedup(&mut pairs);
    pairs
}

fn dedup(pairs: &mut Vec<Pair>) {
    // Keep, for each pair of versions, the most black-box evidence (List < ReadThenWrite <
    // Initial < CommitTs < RealTime), so explanations cite what a reader can check from the
    // history alone, and a cycle needs real-time order only where nothing else gives the pair.
    pairs.sort_unstable_by_key(|p| (p.a, p.b, p.evidence));
    pairs.dedup_by_key(|p| (p.a, p.b));
}

/// List-append: every installed list's parent is the longest installed list that is a proper
/// prefix of it (the initial empty list if none). When the lists form one chain, the parents are
/// the adjacent pairs of the version order; a list with two children is a divergence.
fn list_pairs(ix: &Index<'_>, out: &mut Collector) -> Vec<Pair> {
    let mut versions: Vec<(u32, u32)> = Vec::new();
    for t in 0..ix.n() as u32 {
        if !ix.status[t as usize].in_graph() {
            continue;
        }
        for w in ix.final_writes(t) {
            if ix.list_ok[w.vid as usize] && !ix.list(w.vid).is_empty() {
                versions.push((w.key, w.vid));
            }
        }
    }
    // Elements are unique, so an installed list is found by its key and last element.
    let mut by_last: FxHashMap<(u32, u64), u32> = FxHashMap::default();
    for &(k, v) in &versions {
        let last = *ix.list(v).last().expect("non-empty list");
        by_last.entry((k, last)).or_insert(v);
    }
    let mut pairs = Vec::with_capacity(versions.len());
    for &(k, v) in &versions {
        let list = ix.list(v);
        let mut parent = ix.init_vid[k as usize];
        for j in (0..list.len() - 1).rev() {
            if let Some(&p) = by_last.get(&(k, list[j]))
                && p != v
                && ix.list(p) == &list[..=j]
            {
                parent = p;
                break;
            }
        }
        pairs.push(Pair {
            key: k,
            a: parent,
            b: v,
            evidence: Evidence::List,
        });
    }
    pairs.sort_unstable_by_key(|p| (p.a, p.b));
    for group in pairs.chunk_by(|x, y| x.a == y.a) {
        for other in &group[1..] {
            diverge(ix, group[0].b, other.b, out);
        }
    }
    pairs
}

/// Two installed lists of one key, neither a prefix of the other. Explained as a lost update
/// when the first elements where they differ were appended by two transactions that both read
/// the common prefix (reported by [`lost_updates`]); otherwise no order of the key's versions
/// exists.
fn diverge(ix: &Index<'_>, x: u32, y: u32, out: &mut Collector) {
    let key = ix.vid_key[x as usize];
    let (lx, ly) = (ix.list(x), ix.list(y));
    let cp = lx.iter().zip(ly).take_while(|(a, b)| a == b).count();
    if cp == lx.len() || cp == ly.len() {
        return;
    }
    let ox = ix.owner.get(&(key, lx[cp])).copied().unwrap_or(NONE);
    let oy = ix.owner.get(&(key, ly[cp])).copied().unwrap_or(NONE);
    let base = |o: u32| {
        if o == NONE || !ix.status[o as usize].in_graph() {
            return NONE;
        }
        ix.final_write_of(o, key).map_or(NONE, |w| w.base)
    };
    let (bx, by) = (base(ox), base(oy));
    if ox != oy && bx != NONE && bx == by && ix.list(bx) == &lx[..cp] {
        return;
    }
    let kind = AnomalyKind::IncompatibleOrder;
    if !out.admit(kind) {
        return;
    }
    let (wx, wy) = (ix.vid_writer[x as usize], ix.vid_writer[y as usize]);
    let explanation = format!(
        "{} installed {} and {} installed {} = {}; the lists agree on their first {cp} \
         element(s) and then differ ({} vs {}), so neither extends the other and the versions of \
         {} cannot be put in one order. This is not a lost update: the transactions that \
         appended {} and {} did not both build on the common prefix.",
        ix.name(wx),
        ix.kv(x),
        ix.name(wy),
        ix.key_name(key),
        ix.value(y),
        lx[cp],
        ly[cp],
        ix.key_name(key),
        lx[cp],
        ly[cp],
    );
    let mut txns = vec![ix.index_of(wx), ix.index_of(wy)];
    txns.dedup();
    out.push(
        kind,
        txns,
        vec![ix.key_name(key).to_string()],
        Vec::new(),
        explanation,
    );
}

/// Registers: a transaction (among those `keep` accepts) that read version `a` and then wrote the
/// key installed `b` after `a`; with commit-order evidence, committed versions follow their
/// writers' commit timestamps; the initial version precedes every version nothing else is
/// known to precede.
fn register_pairs(
    ix: &Index<'_>,
    options: &CheckOptions,
    keep: impl Fn(Status) -> bool,
) -> Vec<Pair> {
    let mut pairs = Vec::new();
    let mut has_pred = vec![false; ix.vid_key.len()];
    for t in 0..ix.n() as u32 {
        if !keep(ix.status[t as usize]) {
            continue;
        }
        for w in ix.final_writes(t) {
            if w.base == NONE || ix.vid_writer[w.base as usize] == t {
                continue;
            }
            // Reads of versions that were never installed (aborted, intermediate, garbage) are
            // reported by the read checks and order nothing.
            if !ix.installed(w.base) {
                continue;
            }
            pairs.push(Pair {
                key: w.key,
                a: w.base,
                b: w.vid,
                evidence: Evidence::ReadThenWrite,
            });
            has_pred[w.vid as usize] = true;
        }
    }
    if options.commit_order_evidence {
        let mut committed: Vec<(u32, u64, usize, u32)> = Vec::new();
        for (t, rec) in ix.history.txns.iter().enumerate() {
            if let RecordedOutcome::Committed { commit_ts } = rec.outcome {
                for w in ix.final_writes(t as u32) {
                    committed.push((w.key, commit_ts, rec.index, w.vid));
                }
            }
        }
        committed.sort_unstable();
        for group in committed.chunk_by(|x, y| x.0 == y.0) {
            let key = group[0].0;
            let mut prev = ix.init_vid[key as usize];
            for &(_, _, _, vid) in group {
                pairs.push(Pair {
                    key,
                    a: prev,
                    b: vid,
                    evidence: Evidence::CommitTs,
                });
                has_pred[vid as usize] = true;
                prev = vid;
            }
        }
    }
    if options.level == IsolationLevel::StrictSerializable {
        realtime_pairs(ix, &keep, &mut pairs, &mut has_pred);
    }
    for t in 0..ix.n() as u32 {
        if !keep(ix.status[t as usize]) {
            continue;
        }
        for w in ix.final_writes(t) {
            if !has_pred[w.vid as usize] {
                pairs.push(Pair {
                    key: w.key,
                    a: ix.init_vid[w.key as usize],
                    b: w.vid,
                    evidence: Evidence::Initial,
                });
            }
        }
    }
    pairs
}

/// Registers, at strict serializability: a committed write whose transaction finished before
/// another writer of the key began was installed before it (the serial order a strictly
/// serializable history has follows real time). Per key, the transitive reduction of that
/// order over the key's writers. The edges drawn from these pairs need real-time order, and the
/// cycle search labels cycles through them so (`-realtime`).
fn realtime_pairs(
    ix: &Index<'_>,
    keep: &impl Fn(Status) -> bool,
    pairs: &mut Vec<Pair>,
    has_pred: &mut [bool],
) {
    let mut writes: Vec<(u32, u32, u32)> = Vec::new();
    for t in 0..ix.n() as u32 {
        if keep(ix.status[t as usize]) {
            writes.extend(ix.final_writes(t).iter().map(|w| (w.key, t, w.vid)));
        }
    }
    writes.sort_unstable();
    for group in writes.chunk_by(|x, y| x.0 == y.0) {
        let spans: Vec<(u64, Option<u64>)> = group
            .iter()
            .map(|&(_, t, _)| {
                let rec = &ix.history.txns[t as usize];
                let committed = ix.status[t as usize] == Status::Committed;
                (rec.invoke_us, committed.then_some(rec.complete_us))
            })
            .collect();
        super::realtime_reduction(&spans, |i, j| {
            let (a, b) = (group[i as usize].2, group[j as usize].2);
            pairs.push(Pair {
                key: group[0].0,
                a,
                b,
                evidence: Evidence::RealTime,
            });
            has_pred[b as usize] = true;
        });
    }
}

/// Lost updates: two or more transactions in the graph read the same version of a key (not
/// their own write) and then each wrote the key.
pub(super) fn lost_updates(ix: &Index<'_>, out: &mut Collector) {
    let mut items: Vec<(u32, u32)> = Vec::new();
    for t in 0..ix.n() as u32 {
        if !ix.status[t as usize].in_graph() {
            continue;
        }
        for w in ix.final_writes(t) {
            if w.base != NONE && ix.vid_writer[w.base as usize] != t {
                items.push((w.base, t));
            }
        }
    }
    items.sort_unstable();
    let kind = AnomalyKind::LostUpdate;
    for group in items.chunk_by(|x, y| x.0 == y.0) {
        if group.len() < 2 || !out.admit(kind) {
            continue;
        }
        let base = group[0].0;
        let key = ix.vid_key[base as usize];
        let writers: Vec<u32> = group.iter().map(|&(_, t)| t).collect();
        const SHOWN: usize = 6;
        let mut names: Vec<String> = writers
            .iter()
            .take(SHOWN)
            .map(|&t| {
                let installed = ix.final_write_of(t, key).map_or(NONE, |w| w.vid);
                format!("{} (installed {})", ix.name(t), ix.value(installed))
            })
            .collect();
        if writers.len() > SHOWN {
            names.push(format!("{} more", writers.len() - SHOWN));
        }
        // The value of the initial version already says so.
        let from = if ix.is_init(base) {
            String::new()
        } else {
            format!(" (installed by {})", ix.writer_name(base))
        };
        let (all, lost) = if writers.len() == 2 {
            ("both", "one of the two updates is lost")
        } else {
            ("all", "all but one of the updates are lost")
        };
        let names = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        };
        let explanation = format!(
            "{names} {all} read {}{from} and then wrote {}, and {all} committed: each \
             overwrote a version that did not include the others' updates, so {lost}.",
            ix.kv(base),
            ix.key_name(key),
        );
        out.push(
            kind,
            writers.iter().map(|&t| ix.index_of(t)).collect(),
            vec![ix.key_name(key).to_string()],
            Vec::new(),
            explanation,
        );
    }
}

/// Whether one version precedes another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Before {
    Yes,
    No,
    /// The search gave up (too much evidence to walk); callers must not conclude either way.
    Unknown,
}

/// The version order over every version, aborted transactions' included, for the snapshot
/// checks (fractured reads, conflicting writers). Lists order by prefix; registers by the
/// evidence pairs, walked on demand.
pub(super) struct Order {
    succ: FxHashMap<u32, Vec<u32>>,
}

/// How many versions a register precedence query may visit before giving up.
const BEFORE_BUDGET: usize = 20_000;

impl Order {
    pub(super) fn build(ix: &Index<'_>, options: &CheckOptions) -> Order {
        let mut succ: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        if ix.model == ValueModel::RwRegister {
            let mut pairs = register_pairs(ix, options, |s| s != Status::UnknownIgnored);
            // An aborted transaction's write follows what it read too, installed or not.
            for t in 0..ix.n() as u32 {
                if ix.status[t as usize] == Status::Aborted {
                    for w in ix.final_writes(t) {
                        if w.base != NONE && ix.vid_writer[w.base as usize] != t {
                            pairs.push(Pair {
                                key: w.key,
                                a: w.base,
                                b: w.vid,
                                evidence: Evidence::ReadThenWrite,
                            });
                        }
                    }
                }
            }
            dedup(&mut pairs);
            for p in pairs {
                if !ix.is_init(p.a) {
                    succ.entry(p.a).or_default().push(p.b);
                }
            }
        }
        Order { succ }
    }

    /// Whether version `u` precedes version `w` (of the same key).
    pub(super) fn before(&self, ix: &Index<'_>, u: u32, w: u32) -> Before {
        if u == w || ix.is_init(w) {
            return Before::No;
        }
        if ix.is_init(u) {
            return Before::Yes;
        }
        match ix.model {
            ValueModel::ListAppend => {
                let (lu, lw) = (ix.list(u), ix.list(w));
                let ok = ix.list_ok[u as usize] && ix.list_ok[w as usize];
                if ok && lu.len() < lw.len() && lw.starts_with(lu) {
                    Before::Yes
                } else {
                    Before::No
                }
            }
            ValueModel::RwRegister => {
                let mut seen: FxHashSet<u32> = FxHashSet::default();
                let mut stack = vec![u];
                seen.insert(u);
                while let Some(x) = stack.pop() {
                    for &y in self.succ.get(&x).map_or(&[][..], |v| &v[..]) {
                        if y == w {
                            return Before::Yes;
                        }
                        if seen.insert(y) {
                            if seen.len() > BEFORE_BUDGET {
                                return Before::Unknown;
                            }
                            stack.push(y);
                        }
                    }
                }
                Before::No
            }
        }
    }
}
