//! The dependency-graph isolation checker.
//!
//! It follows Adya's definitions (A. Adya, *Weak Consistency: A Generalized Theory and
//! Optimistic Implementations for Distributed Transactions*, MIT PhD thesis, 1999): a history's
//! direct serialization graph has a node per committed transaction and an edge for every
//! write-write (`ww`), write-read (`wr`) and read-write anti-dependency (`rw`) between them; the
//! isolation levels are the sets of graph cycles (G0, G1c, G-single, G2-item) and read
//! anomalies (G1a aborted reads, G1b intermediate reads) they proscribe. Since a black-box
//! history does not say in which order versions were installed, it infers that order from the
//! values as Elle does (K. Kingsbury and P. Alvaro, *Elle: Inferring Isolation Anomalies from
//! Experimental Observations*, VLDB 2020): list-append values spell out the order, registers
//! reveal part of it. Elle's names are used, including G-nonadjacent and the `-process` and
//! `-realtime` variants of each cycle that needs session or real-time order, which strict
//! serializability proscribes too (parallel snapshot isolation proscribes the `-process` variants
//! of the cycles it forbids).
//!
//! The passes, all linear in the history or close to it:
//!
//! 1. `index`: intern keys and values; per transaction, its installed writes, the reads it made
//!    before writing a key, and which unknown-outcome transactions were observed (and so must
//!    have committed).
//! 2. Read checks: internal consistency, garbage, aborted (G1a) and intermediate (G1b) reads;
//!    every other read is a `wr` edge.
//! 3. `versions`: the version order of every key as evidence pairs, giving `ww` and `rw`
//!    edges; lost updates; diverging lists.
//! 4. Session order and real-time order, the latter as its transitive reduction.
//! 5. Strongly connected components, and in each non-trivial one the most severe cycles
//!    (`cycles`).
//! 6. `spsi`: fractured reads and conflicting concurrent writers within one snapshot.
//!
//! `promises` judges commit timestamps against the dependency edges of passes 1–3 and the
//! version order.

mod cycles;
mod explain;
mod graph;
mod index;
mod polygraph;
mod promises;
mod spsi;
mod unknown_writers;
mod versions;

use crate::anomaly::{
    AnomalyKind, CheckReport, CheckStats, CycleKind, CycleOrder, Edge, Proscribes,
};
use augur_types::IsolationLevel;
use augur_types::history::History;
use explain::Collector;
use graph::{Csr, EdgeKind, Evidence, GEdge, nontrivial_components};
use index::{ExtRead, Index, NONE, Status};
pub use polygraph::SolverBudget;
pub use promises::{bounded_staleness, timestamps_order_dependencies};

/// How a workload's values reveal the version order of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueModel {
    /// Values are lists of unique numbers, each write the list read plus new elements: the
    /// lists spell out each key's version order.
    ListAppend,
    /// Values are unique opaque strings: order comes only from reads followed by writes (and
    /// commit timestamps, if trusted).
    RwRegister,
}

/// What to check a history against.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    pub level: IsolationLevel,
    pub model: ValueModel,
    /// Trust the protocol's commit timestamps to order each key's versions (white-box
    /// evidence; register histories only, lists carry their own order).
    pub commit_order_evidence: bool,
    /// How long the search over placements of writes with no evidence of their place in a
    /// key's version order may run before the check is declared undecided.
    pub solver: SolverBudget,
    /// For the checker's own tests: skip every shortcut before the SAT solver (the
    /// commit-timestamp guess, pruning, the greedy placement), so that every open choice
    /// reaches it.
    #[doc(hidden)]
    pub solver_only: bool,
}

impl CheckOptions {
    /// Options for `level` and `model`, without commit-order evidence.
    pub fn new(level: IsolationLevel, model: ValueModel) -> Self {
        CheckOptions {
            level,
            model,
            commit_order_evidence: false,
            solver: SolverBudget::default(),
            solver_only: false,
        }
    }
}

/// Check `history` against `options.level`: every anomaly found is reported (at most a few of
/// each kind in full), marked proscribed or allowed.
pub fn check(history: &History, options: &CheckOptions) -> CheckReport {
    let ix = Index::build(history, options.model);
    // List elements appended by attempts whose operations are unknown get writers standing in.
    if let Some(augmented) = unknown_writers::with_unknown_writers(history, &ix) {
        drop(ix);
        let mut ix = Index::build(&augmented, options.model);
        ix.recorded = history.txns.len();
        return check_indexed(history, ix, options);
    }
    check_indexed(history, ix, options)
}

/// [`check`] over `ix`, an index of `history` or of `history` with unknown writers added.
fn check_indexed(history: &History, ix: Index<'_>, options: &CheckOptions) -> CheckReport {
    let mut out = Collector::new(options.level);
    let n = history.txns.len();

    let Dependencies {
        txn_of,
        node_of,
        mut edges,
        pairs,
        readers,
    } = Dependencies::build(&ix, options, &mut out);
    versions::lost_updates(&ix, &mut out);
    session_edges(&ix, &txn_of, &mut edges);
    realtime_edges(&ix, &txn_of, &mut edges);

    // One edge per (from, to, kind), keeping the evidence that needs the fewest orders
    // (real-time evidence last), and among those the most black-box one.
    edges.sort_unstable_by_key(|e| (e.from, e.to, e.kind, e.evidence));
    edges.dedup_by_key(|e| (e.from, e.to, e.kind));
    let triples: Vec<(u32, u32, u32)> = edges
        .iter()
        .enumerate()
        .map(|(i, e)| (e.from, e.to, i as u32))
        .collect();
    let g = Csr::build(txn_of.len(), &triples);
    drop(triples);
    find_cycles(&ix, &g, &edges, &txn_of, &mut out);

    if matches!(
        options.level,
        IsolationLevel::ParallelSnapshotIsolation
            | IsolationLevel::SnapshotIsolation
            | IsolationLevel::Spsi
            | IsolationLevel::Serializable
            | IsolationLevel::SessionSerializable
            | IsolationLevel::StrictSerializable
    ) {
        let order = versions::Order::build(&ix, options);
        spsi::snapshot_checks(&ix, &order, options.level, &mut out);
    }

    let mut stats = CheckStats {
        txns: n,
        edges: edges.len(),
        ops_unknown: history.txns.iter().filter(|t| t.ops_unknown).count(),
        ..CheckStats::default()
    };
    // Versions with no evidence of their order got no edge above: every placement of them is
    // considered (`polygraph`), unless the verdict is settled already (the level proscribes
    // nothing, or a proscribed anomaly was found). A history whose version orders are all
    // known returns from there at once.
    let mut undecided = Vec::new();
    if options.level != IsolationLevel::None && !out.any_proscribed() {
        let graph = polygraph::Known {
            ix: &ix,
            level: options.level,
            budget: options.solver,
            solver_only: options.solver_only,
            edges: &edges,
            txn_of: &txn_of,
            node_of: &node_of,
            pairs: &pairs,
            readers: &readers,
        };
        let found = polygraph::check(&graph, &mut out);
        stats.choices = found.choices;
        stats.pruned = found.pruned;
        stats.instances = found.instances;
        stats.solver_runs = found.solver_runs;
        stats.lemmas = found.lemmas;
        undecided = found.undecided;
    }
    stats.unknown_writers = ix.n() - n;
    for s in &ix.status[..n] {
        match s {
            Status::Committed => stats.committed += 1,
            Status::Aborted => stats.aborted += 1,
            Status::UnknownObserved => {
                stats.unknown += 1;
                stats.unknown_observed += 1;
            }
            Status::UnknownIgnored => stats.unknown += 1,
        }
    }
    CheckReport {
        stats,
        anomalies: out.finish(),
        undecided,
    }
}

/// The graph's nodes (the committed transactions and the unknown-outcome ones observed) and its
/// dependency edges: `wr` from the reads, `ww` and `rw` from the version order. Built once here
/// for [`check`] and for the promises that judge these edges ([`promises`]).
struct Dependencies {
    /// Each node's transaction.
    txn_of: Vec<u32>,
    /// Each transaction's node, or `NONE`.
    node_of: Vec<u32>,
    edges: Vec<GEdge>,
    /// The version-order evidence the `ww` and `rw` edges were drawn from.
    pairs: Vec<versions::Pair>,
    /// `(version, reader node)`, sorted and deduplicated.
    readers: Vec<(u32, u32)>,
}

impl Dependencies {
    /// Reports the read anomalies and the keys whose versions cannot be ordered into `out`.
    fn build(ix: &Index<'_>, options: &CheckOptions, out: &mut Collector) -> Dependencies {
        let mut node_of = vec![NONE; ix.n()];
        let mut txn_of: Vec<u32> = Vec::new();
        for (t, status) in ix.status.iter().enumerate() {
            if status.in_graph() {
                node_of[t] = txn_of.len() as u32;
                txn_of.push(t as u32);
            }
        }
        let mut edges: Vec<GEdge> = Vec::new();
        let mut readers: Vec<(u32, u32)> = Vec::new();
        read_checks(
            ix,
            options.level.constrains_aborted(),
            &node_of,
            &mut edges,
            &mut readers,
            out,
        );
        let pairs = versions::installed_order(ix, options, out);
        dependency_edges(ix, &pairs, &node_of, &mut readers, &mut edges);
        Dependencies {
            txn_of,
            node_of,
            edges,
            pairs,
            readers,
        }
    }
}

/// Classify every read; `wr` edges for reads of installed versions, and the readers of each
/// installed version (as `(version, node)`) for the `rw` edges.
fn read_checks(
    ix: &Index<'_>,
    spsi: bool,
    node_of: &[u32],
    edges: &mut Vec<GEdge>,
    readers: &mut Vec<(u32, u32)>,
    out: &mut Collector,
) {
    // Aborted transactions' reads matter only where the level constrains them (SPSI), and even
    // then reading another aborted transaction's write is a legitimate speculative read.
    let examined = |t: u32| spsi || ix.status[t as usize].in_graph();
    for issue in &ix.internal {
        if !examined(issue.txn) || !out.admit(AnomalyKind::Internal) {
            continue;
        }
        let explanation = if issue.expected == NONE {
            format!(
                "{} read {} before writing that very value itself: the read returned the \
                 transaction's own future write.",
                ix.name(issue.txn),
                ix.kv(issue.got),
            )
        } else {
            format!(
                "{} wrote {} and later read {} = {}: a read after the transaction's own write must \
                 return its latest write.",
                ix.name(issue.txn),
                ix.kv(issue.expected),
                ix.key_name(issue.key),
                ix.value(issue.got),
            )
        };
        out.push(
            AnomalyKind::Internal,
            vec![ix.index_of(issue.txn)],
            vec![ix.key_name(issue.key).to_string()],
            Vec::new(),
            explanation,
        );
    }
    repeated_reads(ix, out);
    for t in 0..ix.n() as u32 {
        if !examined(t) {
            continue;
        }
        let in_graph = ix.status[t as usize].in_graph();
        for &r in ix.ext_reads(t) {
            if ix.is_init(r.vid) {
                if in_graph {
                    readers.push((r.vid, node_of[t as usize]));
                }
                continue;
            }
            let w = ix.vid_writer[r.vid as usize];
            if in_graph && ix.model == ValueModel::ListAppend {
                let a = ix.aborted_in[r.vid as usize];
                if a != NONE && a != t && a != w && out.admit(AnomalyKind::AbortedRead) {
                    let explanation = format!(
                        "{} read {}, a list holding an element appended by {}: a committed \
                         transaction observed a write that was never committed.",
                        ix.name(t),
                        ix.kv(r.vid),
                        ix.name(a),
                    );
                    out.push(
                        AnomalyKind::AbortedRead,
                        vec![ix.index_of(t), ix.index_of(a)],
                        vec![ix.key_name(r.key).to_string()],
                        Vec::new(),
                        explanation,
                    );
                }
            }
            if w == NONE {
                unwritten_read(ix, t, r, out);
                continue;
            }
            // A read of one's own later write is reported as internal; aborted readers may read
            // anything that was written.
            if w == t || !in_graph {
                continue;
            }
            let pair = vec![ix.index_of(t), ix.index_of(w)];
            let keys = || vec![ix.key_name(r.key).to_string()];
            if ix.status[w as usize] == Status::Aborted {
                if out.admit(AnomalyKind::AbortedRead) {
                    let explanation = format!(
                        "{} read {}, which was written by {}: a committed transaction observed \
                         a write that was never committed.",
                        ix.name(t),
                        ix.kv(r.vid),
                        ix.name(w),
                    );
                    out.push(
                        AnomalyKind::AbortedRead,
                        pair,
                        keys(),
                        Vec::new(),
                        explanation,
                    );
                }
            } else if !ix.vid_final[r.vid as usize] {
                if out.admit(AnomalyKind::IntermediateRead) {
                    let last = ix.final_write_of(w, r.key).map_or(NONE, |f| f.vid);
                    let explanation = format!(
                        "{} read {}, an intermediate value of {}, which later overwrote {} with {} \
                         in the same transaction: only a transaction's last write of a key is \
                         ever installed.",
                        ix.name(t),
                        ix.kv(r.vid),
                        ix.name(w),
                        ix.key_name(r.key),
                        ix.value(last),
                    );
                    out.push(
                        AnomalyKind::IntermediateRead,
                        pair,
                        keys(),
                        Vec::new(),
                        explanation,
                    );
                }
            } else if ix.status[w as usize].in_graph() {
                let (from, to) = (node_of[w as usize], node_of[t as usize]);
                edges.push(GEdge {
                    from,
                    to,
                    kind: EdgeKind::Wr,
                    evidence: Evidence::List,
                    key: r.key,
                    a: r.vid,
                    b: NONE,
                });
                readers.push((r.vid, to));
            }
        }
    }
}

/// A committed transaction that read one key twice, with no write of its own in between, and
/// got two installed versions: whichever of them came first in the key's version order, the
/// transaction read it and then a later one, so it anti-depends on the writer of the version
/// after the first (`rw`) and depends on the later version's writer chain (`ww`… `wr`): a cycle
/// with one anti-dependency, a G-single, whatever the order. Reported directly, since the order
/// may be unknown (blind writes) and the cycle search would then find no edge. A version that no
/// committed transaction installed is reported for what it is instead (G1a, G1b, a garbage
/// read), and a read of one's own later write as internal. Aborted readers are left out: their
/// reads constrain nothing at the levels that ignore them, and SPSI's checks of their
/// snapshots (`spsi`) cover what it asks of them.
fn repeated_reads(ix: &Index<'_>, out: &mut Collector) {
    let kind = AnomalyKind::Cycle(CycleKind::GSingle, CycleOrder::Dependencies);
    for rr in &ix.repeated {
        let (t, first, second) = (rr.txn, rr.first, rr.second);
        let own = |v: u32| ix.vid_writer[v as usize] == t;
        if !ix.status[t as usize].in_graph()
            || own(first)
            || own(second)
            || !ix.installed(first)
            || !ix.installed(second)
            || !out.admit(kind)
        {
            continue;
        }
        let mut txns = vec![ix.index_of(t)];
        for v in [first, second] {
            let w = ix.vid_writer[v as usize];
            if w != NONE && !txns.contains(&ix.index_of(w)) {
                txns.push(ix.index_of(w));
            }
        }
        let explanation = format!(
            "non-repeatable read: {} read {} and later {}, with no write of its own to {} in \
             between. The first version was written by {}, the second by {}. Whichever of the \
             two came first, the transaction read it and then a later version of the key: it \
             anti-depends (rw) on the transaction that installed the version after the first, \
             which precedes (ww) or is the writer of the version it read later (wr), a cycle \
             with one anti-dependency.",
            ix.name(t),
            ix.kv(first),
            ix.value(second),
            ix.key_name(rr.key),
            ix.writer_name(first),
            ix.writer_name(second),
        );
        out.push(
            kind,
            txns,
            vec![ix.key_name(rr.key).to_string()],
            Vec::new(),
            explanation,
        );
    }
}

/// A read of a value no transaction wrote as such. A value (or list element) no recorded
/// operation wrote is not reported while the history holds attempts whose operations are
/// unknown (`ops_unknown`): one of them may have written it.
fn unwritten_read(ix: &Index<'_>, t: u32, r: ExtRead, out: &mut Collector) {
    let key = ix.key_name(r.key);
    let (kind, why) = if ix.model == ValueModel::ListAppend && ix.list_ok[r.vid as usize] {
        let list = ix.list(r.vid);
        let unknown: Vec<String> = list
            .iter()
            .filter(|&&e| !ix.owner.contains_key(&(r.key, e)))
            .take(5)
            .map(|e| e.to_string())
            .collect();
        if !unknown.is_empty() && ix.opaque_writers {
            return;
        }
        if !unknown.is_empty() {
            (
                AnomalyKind::GarbageRead,
                format!(
                    "no transaction ever appended {} to {key}",
                    unknown.join(", ")
                ),
            )
        } else {
            // Every element was appended by someone: either a prefix of a list some writer
            // produced (a version nobody installed) or the elements in an order nobody wrote.
            let last = *list.last().expect("the empty list is the initial version");
            let o = ix.owner[&(r.key, last)];
            let prefix_of = ix
                .writes(o)
                .iter()
                .find(|w| w.key == r.key && ix.list(w.vid).starts_with(list));
            match prefix_of {
                Some(w) => (
                    AnomalyKind::GarbageRead,
                    format!(
                        "no transaction wrote exactly that list; it is only a prefix of {} \
                         written by {}",
                        ix.value(w.vid),
                        ix.name(o)
                    ),
                ),
                None => (
                    AnomalyKind::IncompatibleOrder,
                    format!(
                        "while every element in it was appended by some transaction, no \
                         transaction wrote them in this order, so the read fits no order of \
                         {key}'s versions"
                    ),
                ),
            }
        }
    } else if ix.opaque_writers {
        return;
    } else if ix.model == ValueModel::ListAppend {
        (
            AnomalyKind::GarbageRead,
            "it is not a list of numbers, and no transaction wrote it".to_string(),
        )
    } else {
        (
            AnomalyKind::GarbageRead,
            format!("no transaction ever wrote that value to {key}"),
        )
    };
    if out.admit(kind) {
        let explanation = format!("{} read {}, but {why}.", ix.name(t), ix.kv(r.vid));
        out.push(
            kind,
            vec![ix.index_of(t)],
            vec![key.to_string()],
            Vec::new(),
            explanation,
        );
    }
}

/// `ww` and `rw` edges from the version-order evidence: for `a < b`, the writer of `a` precedes
/// the writer of `b`, and so does every reader of `a`.
fn dependency_edges(
    ix: &Index<'_>,
    pairs: &[versions::Pair],
    node_of: &[u32],
    readers: &mut Vec<(u32, u32)>,
    edges: &mut Vec<GEdge>,
) {
    readers.sort_unstable();
    readers.dedup();
    let mut off = vec![0u32; ix.vid_key.len() + 1];
    for &(v, _) in readers.iter() {
        off[v as usize + 1] += 1;
    }
    for i in 0..ix.vid_key.len() {
        off[i + 1] += off[i];
    }
    // A version's writer is a node unless the workload broke its promise of unique values and
    // a non-node wrote the same value too; such versions order nothing.
    let node = |vid: u32| match ix.vid_writer[vid as usize] {
        NONE => NONE,
        w => node_of[w as usize],
    };
    for p in pairs {
        let wb = node(p.b);
        if wb == NONE {
            continue;
        }
        if !ix.is_init(p.a) {
            let wa = node(p.a);
            if wa != wb && wa != NONE {
                edges.push(GEdge {
                    from: wa,
                    to: wb,
                    kind: EdgeKind::Ww,
                    evidence: p.evidence,
                    key: p.key,
                    a: p.a,
                    b: p.b,
                });
            }
        }
        for &(_, r) in &readers[off[p.a as usize] as usize..off[p.a as usize + 1] as usize] {
            if r != wb {
                edges.push(GEdge {
                    from: r,
                    to: wb,
                    kind: EdgeKind::Rw,
                    evidence: p.evidence,
                    key: p.key,
                    a: p.a,
                    b: p.b,
                });
            }
        }
    }
}

/// Each client's transactions in the graph, in the order it invoked them. A transaction whose
/// outcome the client never learned may have committed after the client moved on, so nothing
/// follows it in session order; its successors follow the client's previous committed one.
fn session_edges(ix: &Index<'_>, txn_of: &[u32], edges: &mut Vec<GEdge>) {
    let mut order: Vec<(u64, u64, usize, u32)> = txn_of
        .iter()
        .enumerate()
        .map(|(node, &t)| {
            let rec = &ix.history.txns[t as usize];
            (rec.client, rec.invoke_us, rec.index, node as u32)
        })
        .collect();
    order.sort_unstable();
    for client in order.chunk_by(|a, b| a.0 == b.0) {
        let mut last = NONE;
        for &(_, _, _, node) in client {
            if last != NONE {
                edges.push(GEdge::order(last, node, EdgeKind::Process));
            }
            if ix.status[txn_of[node as usize] as usize] == Status::Committed {
                last = node;
            }
        }
    }
}

/// Real-time order between graph nodes (`a` finished before `b` began), as its transitive
/// reduction ([`realtime_reduction`]). An observed unknown-outcome transaction may have
/// committed any time after its client gave up, so nothing is known to follow it in real time.
fn realtime_edges(ix: &Index<'_>, txn_of: &[u32], edges: &mut Vec<GEdge>) {
    let spans: Vec<(u64, Option<u64>)> = txn_of
        .iter()
        .map(|&t| {
            let rec = &ix.history.txns[t as usize];
            let committed = ix.status[t as usize] == Status::Committed;
            (rec.invoke_us, committed.then_some(rec.complete_us))
        })
        .collect();
    realtime_reduction(&spans, |a, b| {
        edges.push(GEdge::order(a, b, EdgeKind::RealTime))
    });
}

/// The transitive reduction of real-time order over `spans` (each an invocation time and, for
/// what is known to have finished by then, a completion time): `emit(a, b)` for each pair, by
/// position in `spans`. Sweeping the invocations and completions in time order, the frontier
/// holds the completed items no completed item follows yet. An item invoked now follows exactly
/// the frontier's members (and, through them, everything earlier); when it completes it
/// supersedes those members. An item without a completion time never joins the frontier.
pub(super) fn realtime_reduction(spans: &[(u64, Option<u64>)], mut emit: impl FnMut(u32, u32)) {
    let mut events: Vec<(u64, bool, u32)> = Vec::with_capacity(2 * spans.len());
    for (i, &(invoke, complete)) in spans.iter().enumerate() {
        events.push((invoke, false, i as u32));
        if let Some(complete) = complete {
            events.push((complete.max(invoke), true, i as u32));
        }
    }
    // At equal times invocations go first: real-time order needs a strictly earlier end.
    events.sort_unstable();
    let mut frontier: Vec<u32> = Vec::new();
    let mut pos = vec![NONE; spans.len()];
    let mut preds: Vec<(u32, u32)> = vec![(0, 0); spans.len()];
    let mut pred_list: Vec<u32> = Vec::new();
    for (_, complete, item) in events {
        if !complete {
            let start = pred_list.len() as u32;
            for &p in &frontier {
                pred_list.push(p);
                emit(p, item);
            }
            preds[item as usize] = (start, frontier.len() as u32);
        } else {
            let (start, len) = preds[item as usize];
            for i in start..start + len {
                let p = pred_list[i as usize];
                let at = pos[p as usize];
                if at != NONE {
                    frontier.swap_remove(at as usize);
                    if let Some(&moved) = frontier.get(at as usize) {
                        pos[moved as usize] = at;
                    }
                    pos[p as usize] = NONE;
                }
            }
            pos[item as usize] = frontier.len() as u32;
            frontier.push(item);
        }
    }
}

fn find_cycles(ix: &Index<'_>, g: &Csr, edges: &[GEdge], txn_of: &[u32], out: &mut Collector) {
    // Members of each non-trivial component, grouped.
    let members = nontrivial_components(g);
    if members.is_empty() {
        return;
    }
    let mut local = vec![NONE; g.n()];
    for group in members.chunk_by(|a, b| a.0 == b.0) {
        let nodes: Vec<u32> = group.iter().map(|&(_, u)| u).collect();
        for found in cycles::component_cycles(&nodes, g, edges, &mut local) {
            let kind = AnomalyKind::Cycle(found.kind, found.order);
            if out.admit(kind) {
                cycle_anomaly(ix, edges, txn_of, kind, &found.edges, out);
            }
        }
    }
}

fn cycle_anomaly(
    ix: &Index<'_>,
    edges: &[GEdge],
    txn_of: &[u32],
    kind: AnomalyKind,
    cycle: &[u32],
    out: &mut Collector,
) {
    let AnomalyKind::Cycle(ckind, order) = kind else {
        return;
    };
    let mut txns = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut report_edges = Vec::new();
    let mut path = String::new();
    let mut rw = 0;
    for &id in cycle {
        let e = &edges[id as usize];
        let (from, to) = (txn_of[e.from as usize], txn_of[e.to as usize]);
        txns.push(ix.index_of(from));
        if e.key != NONE {
            let k = ix.key_name(e.key).to_string();
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        if path.is_empty() {
            path.push_str(&ix.name(from));
        }
        path.push_str(&format!(" -{}-> {}", e.kind.name(), ix.name(to)));
        rw += (e.kind == EdgeKind::Rw) as usize;
        report_edges.push(Edge {
            from: ix.index_of(from),
            to: ix.index_of(to),
            kind: e.kind.name(),
            key: (e.key != NONE).then(|| ix.key_name(e.key).to_string()),
            why: why(ix, e, from, to),
        });
    }
    let what = match ckind {
        CycleKind::G0 => "Every dependency in it is write-write: the transactions overwrote each \
                          other's versions in a circular order."
            .to_string(),
        CycleKind::G1c => "Its dependencies are write-write and write-read: each transaction \
                           observed or overwrote the effects of the next, in a circle, so no order \
                           of commits explains what they saw."
            .to_string(),
        CycleKind::GSingle => "It has exactly one read-write anti-dependency: one transaction \
                               missed a write that the rest of the cycle shows had already \
                               happened (read skew)."
            .to_string(),
        CycleKind::GNonadjacent => format!(
            "It has {rw} read-write anti-dependencies, no two of them consecutive: snapshot \
             isolation forbids such a cycle."
        ),
        CycleKind::G2Item => format!(
            "It has {rw} read-write anti-dependencies, two of them consecutive (as in write \
             skew): snapshot isolation allows this, serializability does not."
        ),
    };
    let needs = match order {
        CycleOrder::Dependencies => "",
        CycleOrder::Process => {
            " The cycle needs session order: a client's transactions in the order it ran them."
        }
        CycleOrder::RealTime => {
            " The cycle needs real-time order: a transaction that finished before another began \
             precedes it."
        }
    };
    let explanation = format!(
        "{} cycle of {} transactions: {path}. {what}{needs}",
        kind,
        cycle.len()
    );
    out.push(kind, txns, keys, report_edges, explanation);
}

/// Why an edge exists, in words a person can check against the history.
fn why(ix: &Index<'_>, e: &GEdge, from: u32, to: u32) -> String {
    let (f, t) = (ix.short(from), ix.short(to));
    let white = match e.evidence {
        Evidence::CommitTs => " (commit-timestamp order, white-box)".to_string(),
        Evidence::RealTime => {
            let (a, b) = (ix.vid_writer[e.a as usize], ix.vid_writer[e.b as usize]);
            let (a, b) = (&ix.history.txns[a as usize], &ix.history.txns[b as usize]);
            format!(
                " (real-time order: T{} finished at {} µs, before T{} began at {} µs)",
                a.index, a.complete_us, b.index, b.invoke_us
            )
        }
        _ => String::new(),
    };
    // Real-time evidence orders two writes without saying what came between them.
    let next = if e.evidence == Evidence::RealTime {
        "a later version"
    } else {
        "the next version"
    };
    match e.kind {
        EdgeKind::Wr => format!("{f} wrote {}, which {t} read", ix.kv(e.a)),
        EdgeKind::Ww => match e.evidence {
            Evidence::ReadThenWrite => format!(
                "{f} installed {}; {t} read that version and then installed {}",
                ix.kv(e.a),
                ix.value(e.b)
            ),
            _ => format!(
                "{f} installed {}, {t} installed {next} {}{white}",
                ix.kv(e.a),
                ix.value(e.b)
            ),
        },
        EdgeKind::Rw => match e.evidence {
            Evidence::ReadThenWrite => format!(
                "{f} read {}, {t} read that version too and then overwrote it with {}",
                ix.kv(e.a),
                ix.value(e.b)
            ),
            Evidence::Initial => format!(
                "{f} read {}, and {t} installed {}, which must follow the initial version",
                ix.kv(e.a),
                ix.value(e.b)
            ),
            _ => format!(
                "{f} read {}, {t} installed {next} {}{white}",
                ix.kv(e.a),
                ix.value(e.b)
            ),
        },
        EdgeKind::Process => {
            let (a, b) = (
                &ix.history.txns[from as usize],
                &ix.history.txns[to as usize],
            );
            format!(
                "{f} and {t} ran in that order on client {} ({f} began at {} µs, {t} at {} µs)",
                a.client, a.invoke_us, b.invoke_us
            )
        }
        EdgeKind::RealTime => {
            let (a, b) = (
                &ix.history.txns[from as usize],
                &ix.history.txns[to as usize],
            );
            format!(
                "{f} finished at {} µs before {t} began at {} µs",
                a.complete_us, b.invoke_us
            )
        }
    }
}
