//! Snapshot checks that look at what one transaction observed rather than at cycles: the
//! *atomic* and *isolated* snapshot conditions of SPSI (speculative snapshot isolation, from
//! STR, Mao et al.), which also bind aborted transactions, since under speculation their reads
//! may have been served from uncommitted versions.
//!
//! * Fractured read: T observed W's version of x, W also wrote y, and T read a version of y
//!   strictly older than W's. T's snapshot holds part of W's writes but not all.
//! * Conflicting writers observed: T observed versions from W1 and from W2, which both wrote
//!   some key z without either seeing the other's write of z. They were concurrent conflicting
//!   writers, so at most one can commit under snapshot isolation, and a snapshot must not
//!   contain both. Observing is direct (T read W's version) or, as SPSI-3 has it, indirect: T
//!   read from a transaction that read from W (STR Fig. 2: a snapshot holding an unsafe
//!   local-committed T1 and a remote committed T3 that read from T2, T1's conflicting writer).
//!   Indirect observation is followed [`MAX_DEPTH`] reads-from steps deep.

use super::ValueModel;
use super::explain::Collector;
use super::index::{Index, NONE, Status};
use super::versions::{Before, Order};
use crate::anomaly::{AnomalyKind, Proscribes};
use augur_types::IsolationLevel;

/// The observed writers, direct ones first, kept per transaction when looking for conflicting
/// pairs.
const MAX_OBSERVED: usize = 24;

/// How many reads-from steps away an observed writer may be: 1 is direct, 2 through one
/// transaction that read from it (Fig. 2).
const MAX_DEPTH: usize = 2;

/// A writer whose version a transaction observed: it read `vid` (of `key`) from `writer`,
/// directly when `via` is `NONE`, else through `via`, an observed writer that read it.
#[derive(Clone, Copy)]
struct Observed {
    writer: u32,
    key: u32,
    vid: u32,
    via: u32,
}

pub(super) fn snapshot_checks(
    ix: &Index<'_>,
    order: &Order,
    level: IsolationLevel,
    out: &mut Collector,
) {
    let spsi = level.constrains_aborted();
    // Who is examined as a reader, and whose versions count as observed: under SPSI everybody
    // (speculative reads of aborted transactions are allowed, but must still form a snapshot);
    // otherwise committed transactions reading committed ones.
    let reads = |s: Status| spsi || s.in_graph();
    let writes = |s: Status| s.in_graph() || (spsi && s == Status::Aborted);
    // The writer of `vid` if a read of it by `reader` observes another transaction's installed
    // write that counts.
    let observes = |reader: u32, vid: u32| {
        let w = ix.vid_writer[vid as usize];
        let counts =
            w != NONE && w != reader && ix.vid_final[vid as usize] && writes(ix.status[w as usize]);
        counts.then_some(w)
    };
    let mut observed: Vec<(u32, u32, u32)> = Vec::new();
    let mut closure: Vec<Observed> = Vec::new();
    for t in 0..ix.n() as u32 {
        if !reads(ix.status[t as usize]) {
            continue;
        }
        // (writer, key, version) for every external read of another transaction's installed
        // write.
        observed.clear();
        for r in ix.ext_reads(t) {
            if let Some(w) = observes(t, r.vid) {
                observed.push((w, r.key, r.vid));
            }
        }
        fractured(ix, order, t, &observed, out);
        if !spsi {
            continue;
        }
        // The distinct writers observed directly, then those they read from, breadth first.
        closure.clear();
        for &(writer, key, vid) in &observed {
            admit(
                &mut closure,
                Observed {
                    writer,
                    key,
                    vid,
                    via: NONE,
                },
            );
        }
        let mut frontier = 0..closure.len();
        for _ in 1..MAX_DEPTH {
            let start = closure.len();
            for i in frontier {
                let via = closure[i].writer;
                for r in ix.ext_reads(via) {
                    if let Some(writer) = observes(via, r.vid).filter(|w| *w != t) {
                        let (key, vid) = (r.key, r.vid);
                        admit(
                            &mut closure,
                            Observed {
                                writer,
                                key,
                                vid,
                                via,
                            },
                        );
                    }
                }
            }
            frontier = start..closure.len();
        }
        conflicting(ix, order, t, &closure, out);
    }
}

fn fractured(
    ix: &Index<'_>,
    order: &Order,
    t: u32,
    observed: &[(u32, u32, u32)],
    out: &mut Collector,
) {
    let kind = AnomalyKind::FracturedRead;
    let mut reported: Vec<u32> = Vec::new();
    for &(w, x, xv) in observed {
        if reported.contains(&w) {
            continue;
        }
        for r in ix.ext_reads(t) {
            if r.key == x {
                continue;
            }
            let Some(wy) = ix.final_write_of(w, r.key) else {
                continue;
            };
            if order.before(ix, r.vid, wy.vid) != Before::Yes {
                continue;
            }
            reported.push(w);
            if out.admit(kind) {
                let explanation = format!(
                    "{} read {}, written by {}, but read {}, older than {} = {} that the same \
                     transaction wrote: it observed only part of {}'s writes, so its snapshot was \
                     not atomic.",
                    ix.name(t),
                    ix.kv(xv),
                    ix.name(w),
                    ix.kv(r.vid),
                    ix.key_name(r.key),
                    ix.value(wy.vid),
                    ix.short(w),
                );
                let keys = vec![ix.key_name(x).to_string(), ix.key_name(r.key).to_string()];
                let txns = vec![ix.index_of(t), ix.index_of(w)];
                out.push(kind, txns, keys, Vec::new(), explanation);
            }
            break;
        }
    }
}

/// Whether `w1` and `w2` wrote `key` without either seeing the other's write.
fn concurrent(ix: &Index<'_>, order: &Order, w1: u32, w2: u32, key: u32) -> bool {
    let (Some(a), Some(b)) = (ix.final_write_of(w1, key), ix.final_write_of(w2, key)) else {
        return false;
    };
    match ix.model {
        ValueModel::ListAppend => {
            if !ix.list_ok[a.vid as usize] || !ix.list_ok[b.vid as usize] {
                return false;
            }
            let (la, lb) = (ix.list(a.vid), ix.list(b.vid));
            !la.starts_with(lb) && !lb.starts_with(la)
        }
        ValueModel::RwRegister => {
            // A blind write reveals nothing about what its writer saw, so only writers that read
            // the key first can be shown concurrent: both read the same version, or each read a
            // version known to precede the other's write. (A version merely not known to follow
            // it is not enough: it may be a blind write whose writer saw the other's.)
            if a.base == NONE || b.base == NONE || a.base == b.vid || b.base == a.vid {
                return false;
            }
            a.base == b.base
                || (order.before(ix, a.base, b.vid) == Before::Yes
                    && order.before(ix, b.base, a.vid) == Before::Yes)
        }
    }
}

/// Add `o` to the observed writers unless its writer is there already or the list is full.
fn admit(closure: &mut Vec<Observed>, o: Observed) {
    if closure.len() < MAX_OBSERVED && !closure.iter().any(|c| c.writer == o.writer) {
        closure.push(o);
    }
}

fn conflicting(ix: &Index<'_>, order: &Order, t: u32, writers: &[Observed], out: &mut Collector) {
    let kind = AnomalyKind::ConflictingWritersObserved;
    for (i, o1) in writers.iter().enumerate() {
        for o2 in &writers[i + 1..] {
            let (w1, w2) = (o1.writer, o2.writer);
            let Some(z) = ix
                .final_writes(w1)
                .iter()
                .map(|f| f.key)
                .find(|&z| concurrent(ix, order, w1, w2, z))
            else {
                continue;
            };
            if out.admit(kind) {
                let z1 = ix.final_write_of(w1, z).map_or(NONE, |f| f.vid);
                let z2 = ix.final_write_of(w2, z).map_or(NONE, |f| f.vid);
                let explanation = format!(
                    "{} observed {} and {}; both of those transactions wrote {} ({} and {}) and \
                     neither saw the other's write, so they were concurrent conflicting writers, \
                     and no isolated snapshot contains both.",
                    ix.name(t),
                    how_observed(ix, o1),
                    how_observed(ix, o2),
                    ix.key_name(z),
                    ix.value(z1),
                    ix.value(z2),
                );
                let mut keys: Vec<String> = Vec::new();
                for k in [o1.key, o2.key, z] {
                    let name = ix.key_name(k).to_string();
                    if !keys.contains(&name) {
                        keys.push(name);
                    }
                }
                let mut txns = vec![ix.index_of(t)];
                for o in [o1, o2] {
                    if o.via != NONE {
                        txns.push(ix.index_of(o.via));
                    }
                    txns.push(ix.index_of(o.writer));
                }
                out.push(kind, txns, keys, Vec::new(), explanation);
            }
            return;
        }
    }
}

/// "x = 1 from T", or "through U, which read x = 1 from T".
fn how_observed(ix: &Index<'_>, o: &Observed) -> String {
    let read = format!("{} from {}", ix.kv(o.vid), ix.name(o.writer));
    if o.via == NONE {
        read
    } else {
        format!("through {}, which read {read},", ix.name(o.via))
    }
}
