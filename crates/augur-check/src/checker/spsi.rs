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
//!   contain both.

use super::ValueModel;
use super::explain::Collector;
use super::index::{Index, NONE, Status};
use super::versions::{Before, Order};
use crate::anomaly::{AnomalyKind, Level};

/// The observed writers kept per transaction when looking for conflicting pairs.
const MAX_OBSERVED: usize = 16;

pub(super) fn snapshot_checks(ix: &Index<'_>, order: &Order, level: Level, out: &mut Collector) {
    let spsi = level.constrains_aborted();
    // Who is examined as a reader, and whose versions count as observed: under SPSI everybody
    // (speculative reads of aborted transactions are allowed, but must still form a snapshot);
    // otherwise committed transactions reading committed ones.
    let reads = |s: Status| spsi || s.in_graph();
    let writes = |s: Status| s.in_graph() || (spsi && s == Status::Aborted);
    let mut observed: Vec<(u32, u32, u32)> = Vec::new();
    for t in 0..ix.n() as u32 {
        if !reads(ix.status[t as usize]) {
            continue;
        }
        // (writer, key, version) for every external read of another transaction's installed
        // write.
        observed.clear();
        for r in ix.ext_reads(t) {
            let w = ix.vid_writer[r.vid as usize];
            if w == NONE
                || w == t
                || !ix.vid_final[r.vid as usize]
                || !writes(ix.status[w as usize])
            {
                continue;
            }
            observed.push((w, r.key, r.vid));
        }
        fractured(ix, order, t, &observed, out);
        if spsi {
            conflicting(ix, order, t, &observed, out);
        }
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

fn conflicting(
    ix: &Index<'_>,
    order: &Order,
    t: u32,
    observed: &[(u32, u32, u32)],
    out: &mut Collector,
) {
    let mut writers: Vec<(u32, u32, u32)> = Vec::new();
    for &o in observed {
        if !writers.iter().any(|w| w.0 == o.0) && writers.len() < MAX_OBSERVED {
            writers.push(o);
        }
    }
    let kind = AnomalyKind::ConflictingWritersObserved;
    for i in 0..writers.len() {
        for j in i + 1..writers.len() {
            let ((w1, k1, v1), (w2, k2, v2)) = (writers[i], writers[j]);
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
                    "{} observed {} from {} and {} from {}; both of those transactions wrote {} \
                     ({} and {}) and neither saw the other's write, so they were concurrent \
                     conflicting writers, and no isolated snapshot contains both.",
                    ix.name(t),
                    ix.kv(v1),
                    ix.name(w1),
                    ix.kv(v2),
                    ix.name(w2),
                    ix.key_name(z),
                    ix.value(z1),
                    ix.value(z2),
                );
                let mut keys = vec![ix.key_name(k1).to_string()];
                for k in [k2, z] {
                    let name = ix.key_name(k).to_string();
                    if !keys.contains(&name) {
                        keys.push(name);
                    }
                }
                let txns = vec![ix.index_of(t), ix.index_of(w1), ix.index_of(w2)];
                out.push(kind, txns, keys, Vec::new(), explanation);
            }
            return;
        }
    }
}
