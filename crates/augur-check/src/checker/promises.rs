//! Promises about commit timestamps, judged on the dependency graph and the version order that
//! the checker infers from the workload's values: that every dependency goes forward in
//! timestamp order ([`timestamps_order_dependencies`]), and that a read-only transaction misses
//! no write acknowledged long enough before it began ([`bounded_staleness`]). DST (Wei et al.,
//! NSDI '21, §3.3–3.4) makes both; `augur check` verifies them for the protocols that list
//! them in their `ProtocolInfo::promises`.
//!
//! Neither check takes version order from commit timestamps, even where the protocol vouches
//! for them: the timestamps are what is being judged, and ordering versions by them would make
//! the check confirm itself. So on `rw-register`, where only a read followed by a write (and
//! the initial version) orders two versions, two blind writes of a key are left unordered, and
//! neither the edges nor the staleness they would give are checked; `list-append` orders every
//! version.

use super::explain::Collector;
use super::graph::EdgeKind;
use super::index::{Index, Status, VText};
use super::versions::{Before, Order};
use super::{CheckOptions, Dependencies, ValueModel, why};
use augur_types::IsolationLevel;
use augur_types::history::{History, RecordedOutcome};
use std::time::Duration;

/// Options under which the promises read a history: the workload's values alone order versions
/// (see the module comment). The level decides nothing here: it would only mark the anomalies
/// that these checks discard (the isolation check reports them) as proscribed or allowed.
fn value_order_only(model: ValueModel) -> CheckOptions {
    CheckOptions::new(IsolationLevel::None, model)
}

/// The commit timestamp of a committed attempt (for a read-only one, its read timestamp).
/// Unknown-outcome attempts the graph holds because they were observed have none: edges to
/// or from them are not judged.
fn commit_ts(ix: &Index<'_>, t: u32) -> Option<u64> {
    match ix.history.txns[t as usize].outcome {
        RecordedOutcome::Committed { commit_ts } => Some(commit_ts),
        _ => None,
    }
}

/// `Err` names the first dependency edge between committed transactions that goes against
/// their commit timestamps, and how many do.
///
/// For every `ww`, `wr` or `rw` edge Ti → Tj, `ts_i < ts_j` (the commit timestamps, compared
/// as integers: hybrid timestamps are not microseconds). This is DST's Lemma 1: the timestamp
/// order is a serialization order of the update transactions. A read-only transaction's
/// `commit_ts` is its read timestamp x.TS, and its edges express Lemma 2 (for each key it
/// read, it returned the newest committed version with a timestamp ≤ x.TS):
///
/// * a `wr` edge into it only needs `ts_i ≤ x.TS`, since a read at x.TS sees versions stamped
///   x.TS; a version stamped above x.TS breaks this (it read the future);
/// * an `rw` edge out of it needs `x.TS < ts_j`: the next version of a key it read must be
///   stamped above x.TS, or the reader skipped a version it should have returned (it read an
///   older version than the newest ≤ x.TS).
///
/// Since the `rw` edges go to the next version, together these say the version read is the
/// newest ≤ x.TS, wherever the version order is known (see the module comment for
/// `rw-register`). Aborted attempts are not in the graph, and observed unknown-outcome ones
/// have no timestamp, so no edge touching either is judged.
pub fn timestamps_order_dependencies(history: &History, model: ValueModel) -> Result<(), String> {
    let ix = Index::build(history, model);
    let options = value_order_only(model);
    let mut discarded = Collector::new(options.level);
    let deps = Dependencies::build(&ix, &options, &mut discarded);
    let mut backwards = deps.edges.iter().filter_map(|e| {
        let (i, j) = (deps.txn_of[e.from as usize], deps.txn_of[e.to as usize]);
        let (ts_i, ts_j) = (commit_ts(&ix, i)?, commit_ts(&ix, j)?);
        let into_reader = e.kind == EdgeKind::Wr && history.txns[j as usize].read_only;
        let forward = if into_reader {
            ts_i <= ts_j
        } else {
            ts_i < ts_j
        };
        (!forward).then_some((e, i, j, ts_i, ts_j))
    });
    let Some((e, i, j, ts_i, ts_j)) = backwards.next() else {
        return Ok(());
    };
    let (ro_i, ro_j) = (
        history.txns[i as usize].read_only,
        history.txns[j as usize].read_only,
    );
    let rule = match e.kind {
        EdgeKind::Wr if ro_j => format!(
            "read-only {} reads at {ts_j} yet returned a version stamped {ts_i}, above it",
            ix.short(j)
        ),
        EdgeKind::Rw if ro_i => format!(
            "read-only {} reads at {ts_i} yet missed the next version, stamped {ts_j}, not \
             above it: it did not return the newest version at or below its timestamp",
            ix.short(i)
        ),
        _ => format!(
            "{} is stamped {ts_i} and {} {ts_j}: a dependency must go to a later timestamp",
            ix.short(i),
            ix.short(j)
        ),
    };
    Err(format!(
        "{} dependency edge(s) go against commit timestamps; the first: {} -{}-> {} on {}, as {}; \
         {rule}",
        1 + backwards.count(),
        ix.name(i),
        e.kind.name(),
        ix.name(j),
        ix.key_name(e.key),
        why(&ix, e, i, j),
    ))
}

/// `Err` names the first read of a committed read-only transaction that missed a write
/// acknowledged at least `delta` before the reader was invoked, and how many such reads there
/// are.
///
/// DST's bounded staleness (§3.4): with ε the largest difference between two nodes' clocks, a
/// read-only transaction that takes its timestamp at least Δ = 2ε after an update committed
/// sees that update; the caller adds a clock tick to Δ, since a read timestamp's logical part
/// starts at 0 where an update's may not. The times are the clients' (`complete_us` of the
/// update, when its client heard of the commit; `invoke_us` of the reader), the conservative
/// choice: the update's timestamp was fixed before its client heard, and the reader's is taken
/// after its client asked. So for each key a reader R read, and each committed update W of that
/// key whose client heard of it at or before `R.invoke_us − delta`, R must have read W's version
/// or a later one: a read of a version that precedes W's (in the workload's version order)
/// is stale. Updates whose outcome the client never learned were never acknowledged, and
/// deletes (which the checked workloads never issue) are left out: the version order cannot
/// place a read of "no value" against them.
pub fn bounded_staleness(
    history: &History,
    model: ValueModel,
    delta: Duration,
) -> Result<(), String> {
    let ix = Index::build(history, model);
    let order = Order::build(&ix, &value_order_only(model));
    let delta_us = u64::try_from(delta.as_micros()).unwrap_or(u64::MAX);
    // Per key, the committed updates' installed versions, by when their clients heard of the
    // commit: those due for a reader are then a prefix.
    let mut acknowledged: Vec<Vec<(u64, u32, u32)>> = vec![Vec::new(); ix.keys.len()];
    for t in 0..ix.n() as u32 {
        if ix.status[t as usize] != Status::Committed {
            continue;
        }
        let at = history.txns[t as usize].complete_us;
        for w in ix.final_writes(t) {
            if !matches!(ix.vid_text[w.vid as usize], VText::Deleted) {
                acknowledged[w.key as usize].push((at, t, w.vid));
            }
        }
    }
    for writes in &mut acknowledged {
        writes.sort_unstable();
    }
    let mut stale = 0usize;
    let mut first = None;
    for r in 0..ix.n() as u32 {
        let rec = &history.txns[r as usize];
        if !rec.read_only || ix.status[r as usize] != Status::Committed {
            continue;
        }
        let Some(horizon) = rec.invoke_us.checked_sub(delta_us) else {
            continue;
        };
        for read in ix.ext_reads(r) {
            // A read of a version never installed is an anomaly the isolation check reports;
            // it has no place in the version order.
            if !ix.installed(read.vid) {
                continue;
            }
            let writes = &acknowledged[read.key as usize];
            let due = &writes[..writes.partition_point(|&(at, ..)| at <= horizon)];
            // The latest acknowledged first, so a report names the freshest write missed.
            let missed = due
                .iter()
                .rev()
                .find(|&&(_, _, vid)| order.before(&ix, read.vid, vid) == Before::Yes);
            if let Some(&(at, w, vid)) = missed {
                stale += 1;
                first.get_or_insert((r, read.vid, at, w, vid));
            }
        }
    }
    let Some((r, read, at, w, vid)) = first else {
        return Ok(());
    };
    let rec = &history.txns[r as usize];
    Err(format!(
        "{stale} stale read(s) by read-only transactions; the first: {}, invoked at {} µs, read \
         {}, missing {}'s later version {}, whose client heard of its commit at {at} µs, {} µs \
         before the reader began (staleness bound {} µs)",
        ix.name(r),
        rec.invoke_us,
        ix.kv(read),
        ix.name(w),
        ix.value(vid),
        rec.invoke_us - at,
        delta_us,
    ))
}
