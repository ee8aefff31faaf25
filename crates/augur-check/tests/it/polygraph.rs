//! Writes whose place in a key's version order no evidence fixes: the checker must consider
//! every placement (the polygraph), pass a history when one placement is consistent, and fail
//! it when none is. Hand-built shapes with their verdict at every level, and a property test
//! against a brute-force search over every version order.

use augur_check::{
    AnomalyKind, CheckOptions, CheckReport, CycleKind, CycleOrder, Proscribes, SolverBudget,
    ValueModel, Verdict, check,
};
use augur_types::IsolationLevel;
use augur_types::history::{History, Op};

use crate::common;
use common::{Builder, ok, r, w};

use IsolationLevel::{
    ParallelSnapshotIsolation as Psi, ReadCommitted as Rc, Serializable as Ser,
    SnapshotIsolation as Si, Spsi, StrictSerializable as Strict,
};

const RW: ValueModel = ValueModel::RwRegister;

fn check_at(b: &Builder, level: IsolationLevel) -> CheckReport {
    check(&b.history(), &CheckOptions::new(level, RW))
}

/// The verdict at every level in `IsolationLevel::ALL`, compared with `expected` (true: valid),
/// as the checker runs and with every open choice left to the SAT solver.
fn assert_verdicts(b: &Builder, expected: [bool; 8]) {
    for (level, valid) in IsolationLevel::ALL.into_iter().zip(expected) {
        let solver_only = CheckOptions {
            solver_only: true,
            ..CheckOptions::new(level, RW)
        };
        let bare = check(&b.history(), &solver_only);
        assert_eq!(bare.is_valid(), valid, "{level}, solver only: {bare:?}");
        let report = check_at(b, level);
        assert!(
            report.undecided.is_empty(),
            "{level}: undecided {:?}",
            report.undecided
        );
        assert_eq!(
            report.is_valid(),
            valid,
            "{level}: {}",
            report
                .anomalies
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// Valid at none and read committed only.
const FAILS_ABOVE_RC: [bool; 8] = [true, true, false, false, false, false, false, false];
/// Valid everywhere.
const VALID: [bool; 8] = [true; 8];

fn g_single(report: &CheckReport) -> &augur_check::Anomaly {
    report
        .anomalies
        .iter()
        .find(|a| {
            a.proscribed
                && a.kind == AnomalyKind::Cycle(CycleKind::GSingle, CycleOrder::Dependencies)
        })
        .unwrap_or_else(|| panic!("no G-single: {:?}", report.anomalies))
}

/// The walter shape (issue 35): T0 read x's initial version and then wrote x = 2; T1 wrote
/// x = 1 blind, and y = 1; T2 read x = 2 and y = 1. If T1's x = 1 came first, it would fall
/// between T0's read and its write (T0 -rw-> T1 -ww-> T0); otherwise T2 missed it
/// (T2 -rw-> T1 -wr-> T2). Both are G-single.
fn walter() -> Builder {
    let mut b = Builder::default();
    b.concurrent(vec![r("x", None), w("x", "2")], ok(1));
    b.concurrent(vec![w("x", "1"), w("y", "1")], ok(2));
    b.concurrent(vec![r("x", Some("2")), r("y", Some("1"))], ok(3));
    b
}

#[test]
fn walter_blind_write_fails_in_every_placement() {
    let b = walter();
    assert_verdicts(&b, FAILS_ABOVE_RC);
    let report = check_at(&b, Psi);
    let a = g_single(&report);
    assert_eq!(a.keys.first().map(String::as_str), Some("x"), "{a}");
    assert!(a.explanation.contains("No placement"), "{a}");
    // The cycle shown runs through T2's missed read of T1's write, and the explanation says
    // why x = 1 cannot come first.
    assert!(
        a.edges
            .iter()
            .any(|e| e.kind == "rw" && e.from == 2 && e.to == 1),
        "{a}"
    );
    assert!(a.explanation.contains("T0 -rw-> T1 -ww-> T0"), "{a}");
    assert!(report.stats.choices == 0, "{:?}", report.stats);
}

#[test]
fn walter_twin_with_a_consistent_placement_passes() {
    // Without T1's write of y, T2's read of x = 2 fits x = 2 coming first.
    let mut b = Builder::default();
    b.concurrent(vec![r("x", None), w("x", "2")], ok(1));
    b.concurrent(vec![w("x", "1")], ok(2));
    b.concurrent(vec![r("x", Some("2")), r("y", None)], ok(3));
    assert_verdicts(&b, VALID);
}

/// Two blind writes of x, each read by a transaction that also read another write of its
/// writer's partner: whichever comes first, one reader missed it.
fn two_blind_writes_each_placement_a_g_single() -> Builder {
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1"), w("z", "1")], ok(1));
    b.concurrent(vec![w("x", "2"), w("y", "2")], ok(2));
    b.concurrent(vec![r("x", Some("1")), r("y", Some("2"))], ok(3));
    b.concurrent(vec![r("x", Some("2")), r("z", Some("1"))], ok(4));
    b
}

#[test]
fn read_skew_with_blind_writes_fails_in_every_placement() {
    let b = two_blind_writes_each_placement_a_g_single();
    assert_verdicts(&b, FAILS_ABOVE_RC);
    let report = check_at(&b, Si);
    let a = g_single(&report);
    assert!(a.explanation.contains("precedes"), "{a}");
    assert!(
        a.explanation.contains("Every other placement fails too"),
        "{a}"
    );
    assert!(a.edges.iter().any(|e| e.why.contains("(placement)")), "{a}");
    assert_eq!(report.stats.choices, 1, "{:?}", report.stats);

    // Its twin: the second reader saw T0's z but x = 1 itself, so T1's x = 2 first is fine.
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1"), w("z", "1")], ok(1));
    b.concurrent(vec![w("x", "2"), w("y", "2")], ok(2));
    b.concurrent(vec![r("x", Some("1")), r("y", Some("2"))], ok(3));
    b.concurrent(vec![r("x", Some("1")), r("z", Some("1"))], ok(4));
    assert_verdicts(&b, VALID);
}

#[test]
fn read_skew_with_blind_writes_ordered_by_real_time() {
    // T1 wrote x = 1 and finished before T2 began and wrote x = 3 (and y = 4); T0 read x = 1
    // and y = 4: stale, once real time orders the two blind writes. Without real time, x = 3
    // may come first.
    let mut b = Builder::default();
    b.txn(
        0,
        (0, 100),
        vec![r("x", Some("1")), r("y", Some("4"))],
        ok(1),
    );
    b.txn(1, (10, 20), vec![w("x", "1")], ok(2));
    b.txn(2, (30, 40), vec![w("x", "3"), w("y", "4")], ok(3));
    assert_verdicts(&b, [true, true, true, true, true, true, true, false]);
    let report = check_at(&b, Strict);
    assert_eq!(
        report.violations().map(|a| a.kind).collect::<Vec<_>>(),
        vec![AnomalyKind::Cycle(CycleKind::GSingle, CycleOrder::RealTime)]
    );
}

#[test]
fn g0_with_blind_writes_has_a_placement_without_a_write_cycle() {
    // Adya's G0 with blind writes: nothing orders the writes, and x1 < x2, y1 < y2 has no cycle.
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1"), w("y", "1")], ok(1));
    b.concurrent(vec![w("x", "2"), w("y", "2")], ok(2));
    assert_verdicts(&b, VALID);
    // y's order fixed by a read-then-write (T0 read T1's y = 2 and then wrote y = 1): x's blind
    // writes must follow suit, and can.
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1"), r("y", Some("2")), w("y", "1")], ok(1));
    b.concurrent(vec![w("x", "2"), w("y", "2")], ok(2));
    assert_verdicts(&b, VALID);
    let report = check_at(&b, Ser);
    assert_eq!(report.stats.choices, 1, "{:?}", report.stats);
    // The second guess (a topological order of the known edges: T1 first) decides it.
    assert_eq!(report.stats.pruned, 0, "{:?}", report.stats);
}

#[test]
fn g1c_with_blind_writes_needs_no_placement() {
    // Circular information flow: each read the other's blind write. Other blind writers of x and
    // y change nothing.
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1"), r("y", Some("2"))], ok(1));
    b.concurrent(vec![w("y", "2"), r("x", Some("1"))], ok(2));
    b.concurrent(vec![w("x", "3"), w("y", "4")], ok(3));
    assert_verdicts(&b, [true, false, false, false, false, false, false, false]);
    let report = check_at(&b, Rc);
    assert!(
        report
            .violations()
            .any(|a| a.kind == AnomalyKind::Cycle(CycleKind::G1c, CycleOrder::Dependencies))
    );
}

/// Write skew with blind writes: T0 read T2's y = 4 and wrote x = 1, T1 read T2's x = 3 and
/// wrote y = 2. Putting a write of T0 or T1 before T2's closes a G1c with T2's reads; the only
/// other placement has T0 and T1 each miss the other's write: a G2-item.
fn write_skew() -> Builder {
    let mut b = Builder::default();
    b.concurrent(vec![r("y", Some("4")), w("x", "1")], ok(1));
    b.concurrent(vec![r("x", Some("3")), w("y", "2")], ok(2));
    b.concurrent(vec![w("x", "3"), w("y", "4")], ok(3));
    b
}

#[test]
fn write_skew_with_blind_writes() {
    let b = write_skew();
    assert_verdicts(&b, [true, true, true, true, true, false, false, false]);
    let report = check_at(&b, Ser);
    let kinds: Vec<_> = report.violations().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        vec![AnomalyKind::Cycle(
            CycleKind::G2Item,
            CycleOrder::Dependencies
        )]
    );
    let a = report.violations().next().unwrap();
    assert!(a.explanation.contains("Forced"), "{a}");
    assert_eq!(report.stats.choices, 2, "{:?}", report.stats);
    // Snapshot isolation allows the write skew and needs no report of it to pass.
    assert!(check_at(&b, Si).is_valid());
}

#[test]
fn an_exhausted_budget_is_undecided_never_a_pass() {
    // Blind writes of x and y by T0 and T1; T2 read T0's x and T1's z. Taking the writes in
    // the order they began (T0 first) fails (T2 -rw-> T1 -wr-> T2), so pruning must settle x
    // (T1's first) and then y (T1's first too, or a write cycle): two steps.
    let mut b = Builder::default();
    b.concurrent(vec![w("x", "1"), w("y", "1")], ok(1));
    b.concurrent(vec![w("x", "2"), w("y", "2"), w("z", "2")], ok(2));
    b.concurrent(vec![r("x", Some("1")), r("z", Some("2"))], ok(3));
    for steps in [0, 1] {
        let mut options = CheckOptions::new(Ser, RW);
        options.solver = SolverBudget {
            steps,
            ..SolverBudget::default()
        };
        let report = check(&b.history(), &options);
        assert_eq!(report.verdict(), Verdict::Undecided, "{steps}: {report:?}");
        assert!(!report.is_valid());
        assert_eq!(report.undecided.len(), 1);
        let u = &report.undecided[0];
        assert!(u.txns.contains(&0) && u.txns.contains(&1), "{u}");
        assert!(u.explanation.contains("solver budget"), "{u}");
    }
    // With the default budget it is decided, and valid.
    let report = check(&b.history(), &CheckOptions::new(Ser, RW));
    assert_eq!(report.verdict(), Verdict::Valid, "{report:?}");
    assert_eq!(report.stats.pruned, 2, "{:?}", report.stats);
    // An exhausted budget never hides a violation found otherwise.
    let mut options = CheckOptions::new(Ser, RW);
    options.solver.steps = 0;
    let report = check(&write_skew().history(), &options);
    assert_ne!(report.verdict(), Verdict::Valid);
}

#[test]
fn a_fully_ordered_history_never_reaches_the_polygraph() {
    let mut b = Builder::default();
    b.concurrent(vec![r("x", None), w("x", "1")], ok(1));
    b.concurrent(vec![r("x", Some("1")), w("x", "2")], ok(2));
    b.concurrent(vec![w("y", "3")], ok(3));
    let report = check_at(&b, Strict);
    assert!(report.is_valid());
    assert_eq!(report.stats.choices, 0);
    assert_eq!(report.stats.instances, 0);
}

// ---------------------------------------------------------------------------------------------
// Property test: the checker's verdict against a brute-force search over every version order.

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const KEYS: [&str; 3] = ["x", "y", "z"];

/// A random history of committed transactions over at most two registers, at most three
/// writers each, unique values: reads (of the initial version or of another writer's value),
/// blind writes, reads followed by writes, repeated reads.
fn random_history(rng: &mut Rng, max_txns: u64, max_keys: u64) -> Builder {
    let n = 2 + rng.below(max_txns - 1) as usize;
    let nkeys = 1 + rng.below(max_keys) as usize;
    // writers[k]: the transactions that write key k.
    let mut writers: Vec<Vec<usize>> = vec![Vec::new(); nkeys];
    for ws in writers.iter_mut() {
        let count = 1 + rng.below(3) as usize;
        while ws.len() < count.min(n) {
            let t = rng.below(n as u64) as usize;
            if !ws.contains(&t) {
                ws.push(t);
            }
        }
    }
    let value = |t: usize, k: usize| format!("{}", 10 * t + k + 1);
    let mut b = Builder::default();
    for t in 0..n {
        let mut ops: Vec<Op> = Vec::new();
        let mut order: Vec<usize> = (0..nkeys).collect();
        if rng.chance(50) {
            order.reverse();
        }
        for k in order {
            let key = KEYS[k];
            let others: Vec<usize> = writers[k].iter().copied().filter(|&x| x != t).collect();
            let read = |rng: &mut Rng, ops: &mut Vec<Op>| {
                let pick = rng.below(others.len() as u64 + 1) as usize;
                match others.get(pick) {
                    Some(&o) => ops.push(r(key, Some(&value(o, k)))),
                    None => ops.push(r(key, None)),
                }
            };
            let writes = writers[k].contains(&t);
            if rng.chance(if writes { 50 } else { 80 }) {
                read(rng, &mut ops);
                if rng.chance(15) {
                    read(rng, &mut ops);
                }
            }
            if writes {
                ops.push(w(key, &value(t, k)));
                if rng.chance(20) {
                    ops.push(r(key, Some(&value(t, k))));
                }
            }
        }
        let client = rng.below(3);
        let invoke = rng.below(100);
        let complete = invoke + 1 + rng.below(50);
        b.txn(client, (invoke, complete), ops, ok(t as u64));
    }
    b
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum K {
    Ww,
    Wr,
    Rw,
    Process,
    RealTime,
}

/// Adya's graph for one total order of every key's versions (`orders[k]`: the writers of key k,
/// in order, after the initial version): `ww` between consecutive versions, `wr` from each
/// writer to its external readers, `rw` from each reader to the writer of the next version, and
/// session and real-time order as the checker takes them.
fn adya(h: &History, orders: &[Vec<usize>]) -> Vec<(usize, usize, K)> {
    let n = h.txns.len();
    let mut edges = Vec::new();
    let key_index = |key: &str| KEYS.iter().position(|&k| k == key).unwrap();
    // The writer of each (key, value), and its position in the key's order.
    let writer_of = |k: usize, v: &str| {
        orders[k].iter().position(|&t| {
            h.txns[t].ops.iter().any(|op| {
                    matches!(op, Op::Write { key, value: Some(x) } if key_index(key) == k && x == v)
                })
        })
    };
    for (k, order) in orders.iter().enumerate() {
        for pair in order.windows(2) {
            edges.push((pair[0], pair[1], K::Ww));
        }
        for (t, rec) in h.txns.iter().enumerate() {
            let mut wrote = false;
            for op in &rec.ops {
                match op {
                    Op::Write { key, .. } if key_index(key) == k => wrote = true,
                    Op::Read { key, value } if key_index(key) == k && !wrote => {
                        // Position of the version read: 0 for the initial one, i + 1 for the
                        // i-th writer.
                        let pos = match value {
                            None => 0,
                            Some(v) => writer_of(k, v).unwrap() + 1,
                        };
                        if pos > 0 {
                            let w = order[pos - 1];
                            if w != t {
                                edges.push((w, t, K::Wr));
                            }
                        }
                        if let Some(&next) = order.get(pos)
                            && next != t
                        {
                            edges.push((t, next, K::Rw));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let mut by_client: Vec<usize> = (0..n).collect();
    by_client.sort_by_key(|&t| (h.txns[t].client, h.txns[t].invoke_us, h.txns[t].index));
    for pair in by_client.windows(2) {
        if h.txns[pair[0]].client == h.txns[pair[1]].client {
            edges.push((pair[0], pair[1], K::Process));
        }
    }
    for a in 0..n {
        for b in 0..n {
            if h.txns[a].complete_us < h.txns[b].invoke_us {
                edges.push((a, b, K::RealTime));
            }
        }
    }
    edges.sort_by_key(|&(a, b, k)| (a, b, k as u8));
    edges.dedup();
    edges
}

/// Every simple cycle's (kind, order), classified independently of the checker.
fn cycle_classes(n: usize, edges: &[(usize, usize, K)]) -> Vec<AnomalyKind> {
    fn class(path: &[K]) -> AnomalyKind {
        let rw = path.iter().filter(|&&k| k == K::Rw).count();
        let order = if path.contains(&K::RealTime) {
            CycleOrder::RealTime
        } else if path.contains(&K::Process) {
            CycleOrder::Process
        } else {
            CycleOrder::Dependencies
        };
        let len = path.len();
        let kind = if rw == 0 {
            if path.contains(&K::Wr) {
                CycleKind::G1c
            } else {
                CycleKind::G0
            }
        } else if rw == 1 {
            CycleKind::GSingle
        } else if (0..len).any(|i| path[i] == K::Rw && path[(i + 1) % len] == K::Rw) {
            CycleKind::G2Item
        } else {
            CycleKind::GNonadjacent
        };
        AnomalyKind::Cycle(kind, order)
    }
    fn go(
        start: usize,
        at: usize,
        on: &mut [bool],
        path: &mut Vec<K>,
        edges: &[(usize, usize, K)],
        out: &mut Vec<AnomalyKind>,
    ) {
        for &(_, b, k) in edges.iter().filter(|e| e.0 == at) {
            if b == start {
                path.push(k);
                let c = class(path);
                if !out.contains(&c) {
                    out.push(c);
                }
                path.pop();
            } else if b > start && !on[b] {
                on[b] = true;
                path.push(k);
                go(start, b, on, path, edges, out);
                path.pop();
                on[b] = false;
            }
        }
    }
    let mut out = Vec::new();
    for s in 0..n {
        let mut on = vec![false; n];
        on[s] = true;
        go(s, s, &mut on, &mut Vec::new(), edges, &mut out);
    }
    out
}

fn permutations(items: &[usize]) -> Vec<Vec<usize>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first);
            out.push(p);
        }
    }
    out
}

/// For every level, whether some total order of every key's versions leaves no proscribed
/// cycle.
fn oracle(h: &History) -> Vec<bool> {
    let key_index = |key: &str| KEYS.iter().position(|&k| k == key).unwrap();
    let mut writers: Vec<Vec<usize>> = vec![Vec::new(); KEYS.len()];
    for (t, rec) in h.txns.iter().enumerate() {
        for op in &rec.ops {
            if let Op::Write { key, .. } = op {
                writers[key_index(key)].push(t);
            }
        }
    }
    let per_key: Vec<Vec<Vec<usize>>> = writers.iter().map(|w| permutations(w)).collect();
    let mut valid = vec![false; IsolationLevel::ALL.len()];
    // Every combination of one order per key, as an odometer over the keys' permutations.
    let mut at = vec![0usize; KEYS.len()];
    loop {
        let orders: Vec<Vec<usize>> = (0..KEYS.len()).map(|k| per_key[k][at[k]].clone()).collect();
        let classes = cycle_classes(h.txns.len(), &adya(h, &orders));
        for (i, level) in IsolationLevel::ALL.into_iter().enumerate() {
            if !classes.iter().any(|&c| level.proscribes(c)) {
                valid[i] = true;
            }
        }
        let Some(k) = (0..KEYS.len()).find(|&k| at[k] + 1 < per_key[k].len()) else {
            break;
        };
        at[k] += 1;
        for a in &mut at[..k] {
            *a = 0;
        }
    }
    valid
}

#[test]
fn verdicts_match_brute_force_over_every_version_order() {
    let rounds = if cfg!(debug_assertions) {
        1_000
    } else {
        20_000
    };
    against_brute_force(rounds, 6, 2, 0x2545_f491_4f6c_dd1d, true);
}

/// Larger histories (up to 7 transactions, 3 keys): slower, run by hand
/// (`cargo test --release -p augur-check --test it -- --ignored larger`).
#[test]
#[ignore]
fn larger_verdicts_match_brute_force() {
    against_brute_force(20_000, 7, 3, 0x9e37_79b9_7f4a_7c15, false);
}

/// `rounds` random histories of at most `max_txns` transactions over at most `max_keys` keys:
/// the checker's verdict at every level but SPSI equals the oracle's.
fn against_brute_force(rounds: usize, max_txns: u64, max_keys: u64, seed: u64, counts: bool) {
    let mut rng = Rng(seed);
    let mut invalid_somewhere = 0;
    let mut reached = 0;
    let mut searched = 0;
    let mut solved = 0;
    // Per level: histories valid, and valid only thanks to a placement the evidence left open.
    let mut valid_at = [0usize; 8];
    for round in 0..rounds {
        let b = random_history(&mut rng, max_txns, max_keys);
        let h = b.history();
        let expect = oracle(&h);
        for (i, level) in IsolationLevel::ALL.into_iter().enumerate() {
            // SPSI's snapshot checks judge more than cycles (fractured reads among committed
            // transactions), which the oracle does not model.
            if level == Spsi {
                continue;
            }
            let report = check(&h, &CheckOptions::new(level, RW));
            assert!(report.undecided.is_empty(), "round {round}: undecided");
            // The same verdict with every open choice left to the SAT solver.
            let solver_only = CheckOptions {
                solver_only: true,
                ..CheckOptions::new(level, RW)
            };
            let bare = check(&h, &solver_only);
            assert_eq!(
                bare.is_valid(),
                expect[i],
                "round {round}, {level}, solver only: {:?}",
                bare.anomalies
            );
            solved += (bare.stats.solver_runs > 0) as usize;
            reached += (report.stats.choices > 0) as usize;
            searched += (report.stats.instances > 0) as usize;
            assert_eq!(
                report.is_valid(),
                expect[i],
                "round {round}, {level}: checker {} oracle {}\n{:#?}\n{}",
                report.is_valid(),
                expect[i],
                h.txns
                    .iter()
                    .map(|t| (t.index, t.client, t.invoke_us, t.complete_us, &t.ops))
                    .collect::<Vec<_>>(),
                report
                    .anomalies
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        invalid_somewhere += expect.iter().any(|v| !v) as usize;
        for (i, &v) in expect.iter().enumerate() {
            valid_at[i] += v as usize;
        }
    }
    eprintln!(
        "{rounds} histories: valid per level {valid_at:?}; {reached} checks with choices, \
         {searched} with a search; {solved} solver runs with the shortcuts off"
    );
    if !counts {
        return;
    }
    // The random histories do exercise both verdicts and the polygraph.
    assert!(invalid_somewhere > rounds / 10, "{invalid_somewhere}");
    assert!(reached > rounds / 10, "{reached}");
    assert!(searched > rounds / 100, "{searched}");
    assert!(solved > rounds / 10, "{solved}");
    // Both verdicts at every level above read committed.
    for (i, &v) in valid_at.iter().enumerate().skip(2) {
        assert!(
            v > rounds / 20 && v < rounds - rounds / 20,
            "level {i}: {v} valid"
        );
    }
}
