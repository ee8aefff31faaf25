//! Every placement of the writes whose place in a key's version order is unknown.
//!
//! A register value names its writer but not its place: when no read-then-write, commit
//! timestamp or other evidence orders two versions of a key, the fast path draws no `ww` or `rw`
//! edge between them, and a violation that every placement of those writes would show goes
//! unreported. This module decides the question exactly: **is there some total order of every
//! key's versions, extending the known evidence, under which the dependency graph has no cycle
//! the level proscribes?** If not, the history is invalid, and the report shows a cycle for one
//! placement and why the others fail too.
//!
//! It is the *polygraph* formulation of C. H. Papadimitriou (*The serializability of concurrent
//! database updates*, J. ACM 26(4), 1979), as Cobra (Tan et al., OSDI 2020), PolySI (Huang et
//! al., VLDB 2023) and Viper (Zhang et al., EuroSys 2023) use it for black-box checking: the
//! known edges, plus for every unordered pair of versions a *choice* between two edge sets, one
//! per order of the pair. Option `a before b` holds `ww writer(a) -> writer(b)` and
//! `rw r -> writer(b)` for every reader `r` of `a`. An `rw` edge to a later version rather than
//! the next one is sound (it stands for `r -rw-> writer(next) -ww->* writer(b)`, a walk with as
//! many `rw` edges and no more adjacent ones), and complete (the next version's edge is among
//! them); an assignment that is not transitive closes a `ww` cycle, a G0, which every level from
//! read committed up proscribes, so no transitivity constraint is needed.
//!
//! Refinements, each exact:
//!
//! * **Units.** Where the level proscribes G-single, a transaction that read `v` and installed
//!   `v'` leaves no room between them: a version `x` placed there gives
//!   `writer(v') -rw-> writer(x) -ww-> writer(v')`. So the choices are between *units*, maximal
//!   read-then-write chains, and option `A before B` joins the last version of `A` to the first
//!   of `B`. The unit holding the initial version always comes first. Where a unit order is
//!   known only through inner versions, the edges it implies between the units' ends are added
//!   as *derived* edges, with that reasoning in their explanation.
//! * **Edges the level judges.** Only edges that can lie on a proscribed cycle take part: no
//!   real-time order below strict serializability, no session order at the levels that ignore
//!   it. Read committed judges only `ww`/`wr` cycles, and a topological order of the known
//!   graph always places the writes without one, so it never reaches this module.
//! * **Orders settle pairs up front.** Where the level judges session or real-time order, a
//!   unit whose first writer precedes (in that order) the last writer of another must come
//!   first: the other placement closes a write cycle with the order (G0-process or
//!   G0-realtime). Such pairs join the known unit order before any choice is made; only the
//!   transitive reduction of the unit order gets edges, since only units with nothing known
//!   between them can be adjacent. This keeps histories with many blind writes small.
//! * **Pruning** (Cobra §4): an option whose edge closes, with the edges already fixed, a cycle
//!   that the level proscribes whatever else it holds (any cycle at the serializable levels;
//!   one with at most one `rw` edge at the snapshot levels) is infeasible, so the other option
//!   is fixed; repeated to a fixpoint. The path searches are bounded (by a topological window,
//!   and a visit budget): a search that gives up prunes nothing, never concludes.
//! * **Independent instances.** Every cycle of every placement lies in one strongly connected
//!   component of the graph holding both options of every open choice; choices that share no
//!   component are decided separately, and choices whose option edges cross components never
//!   matter.
//! * **Search.** What is left is a satisfiability problem, decided by the CDCL solver of the
//!   `batsat` crate with the graph as its *theory* (the lazy formulation of MonoSAT, which
//!   Cobra uses): one variable per open choice; the theory holds the known edges plus those of
//!   every option the solver has assigned, and answers each assignment with the bounded test
//!   pruning uses, each complete one with the exact test, the checker's own cycle
//!   classification (`cycles::component_cycles`) and the level's [`Proscribes`]. A cycle it
//!   finds goes back to the solver as a lemma, the negation of the options on the cycle, which
//!   rules out every placement holding them; the solver learns from the lemmas and finds a
//!   valid placement or proves there is none. The lemmas' cycles are what the report shows.
//!   The greedy placement (a topological order of the known edges) is tried first and is the
//!   solver's preferred value for every variable. It runs under a [`SolverBudget`]; when the
//!   budget runs out, the instance is reported *undecided*, which is never a pass.
//!
//! The fast path stays: a history whose version orders are all total (every key's evidence
//! forms one chain) returns before anything here is built.
//!
//! * **Guesses first.** Before pruning, the placement in commit-timestamp order (the
//!   timestamps serve as a guess only, never as evidence) is checked once over the whole
//!   graph; a valid history from a protocol whose timestamps follow its serialization is
//!   decided by that one linear check. When it fails, so is the placement in a topological
//!   order of the known edges (ties by place in the history), for histories whose timestamps
//!   say little (another database's, or clocks that disagree).
//!
//! Cost, as measured on the crate's benchmark (100,000 transactions, 2 cores, medians of one
//! run on 2026-11-29): 0.45 s for a tenth of the writes blind and 1% unknown outcomes at strict
//! serializability, 0.40 s at serializability (44,859 open pairs, decided by the first guess),
//! 0.53 s there with the commit timestamps shuffled (decided by the second guess); 0.44 s with a
//! third of the writes blind; 0.37–0.52 s without the pass (commit-order evidence,
//! list-append); 0.59 s to find a violation only placements show, planted in the shuffled
//! history (pruning starts where the guesses failed, and settles it there). A violation whose
//! region the guesses do not point at, in a history that large where nothing (real-time order)
//! settles pairs up front, is left to pruning over every pair, which searches the graph once
//! per pair and can come out *undecided* when the budget's time runs out; histories of a few
//! thousand transactions are decided in milliseconds. Per-key transitive inference over fixed
//! pairs and Cobra's write combining are the next steps there.

use super::ValueModel;
use super::cycles::{classify, component_cycles};
use super::explain::Collector;
use super::graph::{
    Csr, EdgeKind, Evidence, GEdge, nontrivial_components, tarjan, topological_ranks,
};
use super::index::{Index, NONE, Status};
use super::versions::Pair;
use crate::anomaly::{AnomalyKind, CycleKind, CycleOrder, Edge, Proscribes, Undecided};
use augur_types::IsolationLevel;
use augur_types::history::RecordedOutcome;
use batsat::{Callbacks, Lit, Solver, SolverInterface, SolverOpts, Theory, TheoryArg, Var, lbool};
use rustc_hash::FxHashMap;
use std::cell::{Cell, OnceCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long the search over placements may run before the check is declared undecided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SolverBudget {
    /// Search steps: one test of a placement against the graph, or one exact check of a
    /// complete placement. Deterministic, so a verdict does not depend on the machine.
    pub steps: u64,
    /// Wall time, the safety net.
    pub time: Duration,
}

impl Default for SolverBudget {
    fn default() -> Self {
        SolverBudget {
            steps: 2_000_000,
            time: Duration::from_secs(10),
        }
    }
}

/// What the checker already has: the history, the known graph and the evidence it came from.
pub(super) struct Known<'a, 'h> {
    pub ix: &'a Index<'h>,
    pub level: IsolationLevel,
    pub budget: SolverBudget,
    /// Skip the shortcuts before the solver (tests only).
    pub solver_only: bool,
    /// The known edges, one per (from, to, kind), between nodes.
    pub edges: &'a [GEdge],
    pub txn_of: &'a [u32],
    pub node_of: &'a [u32],
    pub pairs: &'a [Pair],
    /// `(version, reader node)`, sorted.
    pub readers: &'a [(u32, u32)],
}

/// What the polygraph found, besides the anomalies it reported.
#[derive(Default)]
pub(super) struct Found {
    pub choices: usize,
    pub pruned: usize,
    pub instances: usize,
    pub solver_runs: usize,
    pub lemmas: usize,
    pub undecided: Vec<Undecided>,
}

/// How many states one pruning query may visit before giving up (it then prunes nothing).
const PRUNE_VISITS: usize = 10_000;

/// How many placements an explanation spells out.
const SHOWN: usize = 6;

/// Whether an edge of `kind` can lie on a cycle `level` proscribes.
fn judged(level: IsolationLevel, kind: EdgeKind) -> bool {
    use EdgeKind::*;
    match level {
        IsolationLevel::None => false,
        IsolationLevel::ReadCommitted => matches!(kind, Ww | Wr),
        IsolationLevel::ParallelSnapshotIsolation | IsolationLevel::SessionSerializable => {
            kind != RealTime
        }
        IsolationLevel::SnapshotIsolation | IsolationLevel::Spsi | IsolationLevel::Serializable => {
            !kind.is_order()
        }
        IsolationLevel::StrictSerializable => true,
    }
}

/// How many `rw` edges a cycle of judged edges may hold and be proscribed whatever its shape:
/// the pruning test. (At the snapshot levels a cycle with more is judged by the exact test.)
fn rw_limit(level: IsolationLevel) -> u32 {
    match level {
        IsolationLevel::None | IsolationLevel::ReadCommitted => 0,
        IsolationLevel::ParallelSnapshotIsolation
        | IsolationLevel::SnapshotIsolation
        | IsolationLevel::Spsi => 1,
        _ => u32::MAX,
    }
}

/// Where a polygraph edge comes from.
#[derive(Clone, Copy, Debug)]
enum Origin {
    /// A known edge: its index in [`Known::edges`].
    Known(u32),
    /// Implied by a known order of two units, whose ends it joins: index into `Poly::rels`.
    Derived(u32),
    /// Option `dir` (0: the choice's first unit goes first) of a choice.
    Option { choice: u32, dir: u8 },
    /// Session or real-time order between two nodes, standing for the path of known order
    /// edges between them (the orders are transitive).
    Order,
}

/// An edge of the polygraph. For `ww` and `rw` from a placement, `a` is the version written or
/// read by `from` and `b` the version `to` installed after it.
#[derive(Clone, Copy, Debug)]
struct PEdge {
    from: u32,
    to: u32,
    kind: EdgeKind,
    origin: Origin,
    a: u32,
    b: u32,
}

/// A known order of two units of a key, from the evidence pair `a < b`: the last version of
/// `a`'s unit precedes the first of `b`'s.
struct Rel {
    a: u32,
    b: u32,
    evidence: Evidence,
    /// Set when no evidence pair but an order settles the units: `a` (the first version of the
    /// earlier unit) was written by a transaction that precedes, in this order, the writer of
    /// `b` (the last version of the later unit).
    by_order: Option<EdgeKind>,
    last: u32,
    first: u32,
    /// The versions of `a`'s unit from `a` on, and of `b`'s unit up to `b` (for the
    /// explanation).
    chain_a: Vec<u32>,
    chain_b: Vec<u32>,
}

/// Two units of a key that no evidence orders. Option 0 puts `a` first, option 1 `b`.
struct Choice {
    key: u32,
    /// First and last versions of each unit.
    a: (u32, u32),
    b: (u32, u32),
    /// Each option's edges: a range of `Poly::edges`.
    opt: [(u32, u32); 2],
}

impl Choice {
    /// The versions an option joins: (last of the earlier unit, first of the later one).
    fn join(&self, dir: u8) -> (u32, u32) {
        if dir == 0 {
            (self.a.1, self.b.0)
        } else {
            (self.b.1, self.a.0)
        }
    }
}

/// A cycle that rules out a set of placements, and those placements.
#[derive(Clone)]
struct Cond {
    /// The options assumed (choice, dir); empty when the cycle holds in every placement.
    assumed: Vec<(u32, u8)>,
    /// Edge ids of the polygraph, in cycle order.
    cycle: Vec<u32>,
}

/// The outcome of one instance.
enum Decision {
    Valid,
    /// No placement is valid: some of the cycles that rule them out, and the least severe kind
    /// and most orders among all of them.
    Violation(Vec<Cond>, (CycleKind, CycleOrder)),
    Undecided,
}

/// How many ruling-out cycles a search keeps for its report (it counts the kinds of all).
const KEPT: usize = 64;

/// Decide the placements left open by the version-order evidence, reporting into `out`.
pub(super) fn check(k: &Known<'_, '_>, out: &mut Collector) -> Found {
    let mut found = Found::default();
    if k.ix.model != ValueModel::RwRegister {
        return found;
    }
    // Below the snapshot levels only `ww`/`wr` cycles are proscribed, and the known graph has
    // none: ordering every key's versions by a topological order of that graph (which every
    // evidence pair already follows, as a `ww` edge) gives a placement without one. So only
    // the levels that judge `rw` edges or orders can fail here.
    if matches!(
        k.level,
        IsolationLevel::None | IsolationLevel::ReadCommitted
    ) {
        return found;
    }
    let keys = partial_keys(k);
    if keys.is_empty() {
        return found;
    }
    let mut poly = Poly::build(k, &keys);
    found.choices = poly.choices.len();
    // Where the guesses fail, if they do, is where pruning looks first.
    let mut suspects = Vec::new();
    if !k.solver_only {
        let by_time = poly.guess_by_time();
        if by_time.is_empty() {
            return found;
        }
        let by_order = poly.guess_by_known_order();
        if by_order.is_empty() {
            return found;
        }
        suspects = if by_order.len() <= by_time.len() {
            by_order
        } else {
            by_time
        };
    }
    let deadline = Instant::now() + k.budget.time;
    let mut steps = 0u64;
    let pruned = if k.solver_only {
        Pruned::Done
    } else {
        poly.prune(&mut steps, deadline, &suspects)
    };
    let (c, cycles) = match pruned {
        Pruned::Done => (NONE, [Vec::new(), Vec::new()]),
        Pruned::BothFail(c, cycles) => (c, cycles),
        Pruned::OutOfBudget => {
            found.pruned = poly.fixed.iter().filter(|&&f| f != 0).count();
            let open: Vec<u32> = (0..poly.choices.len() as u32)
                .filter(|&c| poly.fixed[c as usize] == 0)
                .collect();
            let all = Instance {
                nodes: Vec::new(),
                choices: open,
            };
            found.undecided.push(poly.undecided(&all, steps));
            return found;
        }
    };
    if c != NONE {
        found.pruned = poly.fixed.iter().filter(|&&f| f != 0).count();
        let conds = cycles
            .into_iter()
            .enumerate()
            .map(|(dir, cycle)| Cond {
                assumed: vec![(c, dir as u8)],
                cycle,
            })
            .collect::<Vec<_>>();
        let floor = (CycleKind::G0, CycleOrder::Dependencies);
        poly.report(&conds, &[], floor, out);
        return found;
    }
    found.pruned = poly.fixed.iter().filter(|&&f| f != 0).count();
    let instances = poly.instances();
    found.instances = instances.len();
    for inst in &instances {
        match poly.solve(inst, &mut steps, deadline, &mut found) {
            Decision::Valid => {}
            Decision::Violation(conds, floor) => poly.report(&conds, &inst.choices, floor, out),
            Decision::Undecided => found.undecided.push(poly.undecided(inst, steps)),
        }
    }
    found
}

/// A key whose known version order is not total: its installed versions (the initial one
/// first) and the evidence pairs among them, as indices into `vers`.
struct KeyOrder {
    key: u32,
    vers: Vec<u32>,
    pairs: Vec<(u32, u32, Evidence)>,
}

/// The keys whose evidence pairs leave two versions unordered. Linear: a key's order is total
/// iff repeatedly taking its one version with no unplaced predecessor never finds two.
fn partial_keys(k: &Known<'_, '_>) -> Vec<KeyOrder> {
    let ix = k.ix;
    let nk = ix.keys.len();
    let mut vers: Vec<Vec<u32>> = vec![Vec::new(); nk];
    for t in 0..ix.n() as u32 {
        if k.node_of[t as usize] == NONE {
            continue;
        }
        for w in ix.final_writes(t) {
            if ix.vid_writer[w.vid as usize] == t {
                vers[w.key as usize].push(w.vid);
            }
        }
    }
    let mut local = vec![NONE; ix.vid_key.len()];
    for (key, v) in vers.iter_mut().enumerate() {
        if v.is_empty() {
            continue;
        }
        v.insert(0, ix.init_vid[key]);
        for (i, &vid) in v.iter().enumerate() {
            local[vid as usize] = i as u32;
        }
    }
    let mut kp: Vec<Vec<(u32, u32, Evidence)>> = vec![Vec::new(); nk];
    for p in k.pairs {
        let (a, b) = (local[p.a as usize], local[p.b as usize]);
        if a != NONE && b != NONE && a != b {
            kp[p.key as usize].push((a, b, p.evidence));
        }
    }
    let mut partial = Vec::new();
    let mut indeg: Vec<u32> = Vec::new();
    let mut outdeg: Vec<u32> = Vec::new();
    let mut succ: Vec<Vec<u32>> = Vec::new();
    for key in 0..nk {
        let n = vers[key].len();
        if n < 3 {
            // The initial version and at most one other: the order is known.
            continue;
        }
        indeg.clear();
        indeg.resize(n, 0);
        outdeg.clear();
        outdeg.resize(n, 0);
        for &(a, b, _) in &kp[key] {
            indeg[b as usize] += 1;
            outdeg[a as usize] += 1;
        }
        // The common case first: the pairs form one chain from the initial version (every
        // other version has one predecessor, none two successors; a cycle among them would be
        // a write cycle, already reported).
        if indeg[1..].iter().all(|&d| d == 1) && outdeg.iter().all(|&d| d <= 1) {
            continue;
        }
        indeg.iter_mut().for_each(|d| *d = 0);
        succ.clear();
        succ.resize(n, Vec::new());
        for &(a, b, _) in &kp[key] {
            indeg[b as usize] += 1;
            succ[a as usize].push(b);
        }
        // The initial version comes first whatever the pairs say.
        for (i, d) in indeg.iter_mut().enumerate().skip(1) {
            if *d == 0 {
                *d = 1;
                succ[0].push(i as u32);
            }
        }
        let mut ready: Vec<u32> = (0..n as u32).filter(|&i| indeg[i as usize] == 0).collect();
        let mut total = true;
        let mut placed = 0;
        while let Some(v) = ready.pop() {
            if !ready.is_empty() {
                total = false;
                break;
            }
            placed += 1;
            for &s in &succ[v as usize] {
                indeg[s as usize] -= 1;
                if indeg[s as usize] == 0 {
                    ready.push(s);
                }
            }
        }
        // A cyclic order (placed < n) is a write cycle the cycle search already reported.
        if !total || placed < n {
            partial.push(KeyOrder {
                key: key as u32,
                vers: std::mem::take(&mut vers[key]),
                pairs: std::mem::take(&mut kp[key]),
            });
        }
    }
    partial
}

/// How pruning ended.
enum Pruned {
    /// At a fixpoint.
    Done,
    /// A choice both of whose options close a proscribed cycle: the two cycles.
    BothFail(u32, [Vec<u32>; 2]),
    OutOfBudget,
}

/// How many states path searches visit for one step of the budget.
const VISITS_PER_STEP: u64 = 256;

/// The outcome of a bounded path search.
enum Path {
    Found(Vec<u32>),
    None,
    GaveUp,
}

/// Breadth-first search for a path `src ~> dst` over `adj` (edge ids; `edge(id)` gives the
/// target and kind) using at most `rw_left` `rw` edges, over nodes `inside` accepts. States are
/// (node, whether an `rw` edge was used) when exactly one may be; stamped arrays make each
/// search cost what it visits.
struct Bfs {
    stamp: u32,
    seen: Vec<u32>,
    prev_state: Vec<u32>,
    prev_edge: Vec<u32>,
    queue: VecDeque<u32>,
    /// States visited by every search so far.
    visited: u64,
}

impl Bfs {
    fn new(n: usize) -> Bfs {
        Bfs {
            stamp: 0,
            seen: vec![0; 2 * n],
            prev_state: vec![NONE; 2 * n],
            prev_edge: vec![NONE; 2 * n],
            queue: VecDeque::new(),
            visited: 0,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn path(
        &mut self,
        adj: &[Vec<u32>],
        edge: impl Fn(u32) -> (u32, EdgeKind),
        src: u32,
        dst: u32,
        rw_left: u32,
        inside: impl Fn(u32) -> bool,
        max_visits: usize,
    ) -> Path {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.seen.iter_mut().for_each(|s| *s = 0);
            self.stamp = 1;
        }
        self.queue.clear();
        let start = 2 * src;
        self.seen[start as usize] = self.stamp;
        self.queue.push_back(start);
        let mut visits = 0;
        while let Some(s) = self.queue.pop_front() {
            let (node, used) = (s / 2, s & 1);
            if node == dst {
                let mut path = Vec::new();
                let mut cur = s;
                while cur != start {
                    path.push(self.prev_edge[cur as usize]);
                    cur = self.prev_state[cur as usize];
                }
                path.reverse();
                return Path::Found(path);
            }
            visits += 1;
            self.visited += 1;
            if visits > max_visits {
                return Path::GaveUp;
            }
            for &e in &adj[node as usize] {
                let (to, kind) = edge(e);
                if !inside(to) {
                    continue;
                }
                let used_next = if kind == EdgeKind::Rw {
                    match rw_left {
                        0 => continue,
                        1 if used == 1 => continue,
                        1 => 1,
                        _ => 0,
                    }
                } else {
                    used
                };
                let next = 2 * to + used_next;
                if self.seen[next as usize] != self.stamp {
                    self.seen[next as usize] = self.stamp;
                    self.prev_state[next as usize] = s;
                    self.prev_edge[next as usize] = e;
                    self.queue.push_back(next);
                }
            }
        }
        Path::None
    }
}

/// An instance: strongly connected components of the graph holding every open option that
/// share open choices, with those choices.
struct Instance {
    nodes: Vec<u32>,
    choices: Vec<u32>,
}

struct Poly<'a, 'h> {
    k: &'a Known<'a, 'h>,
    n: usize,
    edges: Vec<PEdge>,
    rels: Vec<Rel>,
    choices: Vec<Choice>,
    /// Per choice: 0 open, 1 + the direction fixed by pruning.
    fixed: Vec<u8>,
    /// Per choice fixed by pruning: the cycle the other option closes.
    reason: Vec<Vec<u32>>,
    /// Out-edges of each node among the edges in force (known, derived, fixed options).
    adj: Vec<Vec<u32>>,
    /// Keys whose units hold more than one version (their placements rely on contiguity).
    contiguous_keys: Vec<u32>,
    /// [`Poly::gedges`].
    gedges: OnceCell<Vec<GEdge>>,
    bfs: Bfs,
}

impl<'a, 'h> Poly<'a, 'h> {
    fn build(k: &'a Known<'a, 'h>, keys: &[KeyOrder]) -> Poly<'a, 'h> {
        let n = k.txn_of.len();
        let mut poly = Poly {
            k,
            n,
            edges: Vec::new(),
            rels: Vec::new(),
            choices: Vec::new(),
            fixed: Vec::new(),
            reason: Vec::new(),
            adj: vec![Vec::new(); n],
            contiguous_keys: Vec::new(),
            gedges: OnceCell::new(),
            bfs: Bfs::new(n),
        };
        for (i, e) in k.edges.iter().enumerate() {
            if judged(k.level, e.kind) {
                poly.edges.push(PEdge {
                    from: e.from,
                    to: e.to,
                    kind: e.kind,
                    origin: Origin::Known(i as u32),
                    a: e.a,
                    b: e.b,
                });
            }
        }
        let merge = k.level.proscribes(AnomalyKind::Cycle(
            CycleKind::GSingle,
            CycleOrder::Dependencies,
        ));
        // Units and orders settled up front each rest on assumptions a cyclic unit order
        // refutes; then the key is retried without them, down to single versions.
        for ko in keys {
            let tries: &[(bool, bool)] = if merge {
                &[(true, true), (true, false), (false, true), (false, false)]
            } else {
                &[(false, true), (false, false)]
            };
            for &(units, pre_force) in tries {
                if poly.add_key(ko, units, pre_force) {
                    break;
                }
            }
        }
        for (i, e) in poly.edges.iter().enumerate() {
            if !matches!(e.origin, Origin::Option { .. }) {
                poly.adj[e.from as usize].push(i as u32);
            }
        }
        poly.fixed = vec![0; poly.choices.len()];
        poly.reason = vec![Vec::new(); poly.choices.len()];
        poly
    }

    fn writer(&self, vid: u32) -> u32 {
        match self.k.ix.vid_writer[vid as usize] {
            NONE => NONE,
            w => self.k.node_of[w as usize],
        }
    }

    fn readers(&self, vid: u32) -> &'a [(u32, u32)] {
        let r = self.k.readers;
        let lo = r.partition_point(|&(v, _)| v < vid);
        let hi = r.partition_point(|&(v, _)| v <= vid);
        &r[lo..hi]
    }

    /// The edges that put version `a` right before version `b` (of `key`): `ww` between their
    /// writers and `rw` from `a`'s readers to `b`'s writer, those the level judges.
    fn join_edges(&mut self, a: u32, b: u32, origin: Origin) {
        let wb = self.writer(b);
        if wb == NONE {
            return;
        }
        let level = self.k.level;
        let wa = if self.k.ix.is_init(a) {
            NONE
        } else {
            self.writer(a)
        };
        if wa != NONE && wa != wb && judged(level, EdgeKind::Ww) {
            self.edges.push(PEdge {
                from: wa,
                to: wb,
                kind: EdgeKind::Ww,
                origin,
                a,
                b,
            });
        }
        if judged(level, EdgeKind::Rw) {
            for &(_, r) in self.readers(a) {
                if r != wb {
                    self.edges.push(PEdge {
                        from: r,
                        to: wb,
                        kind: EdgeKind::Rw,
                        origin,
                        a,
                        b,
                    });
                }
            }
        }
    }

    /// Units, their known order, derived edges and choices of one key. With `merge`, units are
    /// read-then-write chains; returns false (adding nothing) if their known order is cyclic,
    /// which leaves the key to single-version units.
    fn add_key(&mut self, ko: &KeyOrder, merge: bool, pre_force: bool) -> bool {
        let ix = self.k.ix;
        let nv = ko.vers.len();
        // Read-then-write links: child[a] = b when b's writer read a and then installed b, and
        // nobody else did so from a.
        let mut child = vec![NONE; nv];
        let mut has_parent = vec![false; nv];
        if merge {
            let mut count = vec![0u32; nv];
            let mut parent = vec![NONE; nv];
            for &(a, b, ev) in &ko.pairs {
                if ev == Evidence::ReadThenWrite {
                    let t = ix.vid_writer[ko.vers[b as usize] as usize];
                    let base = ix.final_write_of(t, ko.key).map_or(NONE, |w| w.base);
                    if base == ko.vers[a as usize] {
                        parent[b as usize] = a;
                        count[a as usize] += 1;
                    }
                }
            }
            for b in 0..nv {
                let a = parent[b];
                if a != NONE && count[a as usize] == 1 {
                    child[a as usize] = b as u32;
                    has_parent[b] = true;
                }
            }
        }
        let mut unit_of = vec![NONE; nv];
        let mut units: Vec<Vec<u32>> = Vec::new();
        // The initial version's unit first.
        for (head, &has) in has_parent.iter().enumerate() {
            if has {
                continue;
            }
            let u = units.len() as u32;
            let mut chain = Vec::new();
            let mut v = head as u32;
            while v != NONE && unit_of[v as usize] == NONE {
                unit_of[v as usize] = u;
                chain.push(v);
                v = child[v as usize];
            }
            units.push(chain);
        }
        if unit_of.contains(&NONE) {
            // A cycle of read-then-write links: reported as a cycle already.
            return false;
        }
        let nu = units.len();
        debug_assert_eq!(unit_of[0], 0);
        // Direct unit order, one evidence pair for each ordered pair of units.
        let mut rel_of: FxHashMap<(u32, u32), (u32, u32, Evidence)> = FxHashMap::default();
        for &(a, b, ev) in &ko.pairs {
            let (ua, ub) = (unit_of[a as usize], unit_of[b as usize]);
            if ua != ub {
                rel_of.entry((ua, ub)).or_insert((a, b, ev));
            }
        }
        for u in 1..nu as u32 {
            rel_of
                .entry((0, u))
                .or_insert((0, units[u as usize][0], Evidence::Initial));
        }
        let vid = |i: u32| ko.vers[i as usize];
        // Session and real-time order settle many pairs of units outright: when the first
        // writer of `A` precedes the last writer of `B` in an order the level judges, `B`
        // before `A` closes a write cycle with that order (`ww` from `B`'s last writer to `A`'s
        // first), so `A` comes first. Such pairs join the unit order here and cost no choice;
        // a pair settled both ways is left a choice, for pruning to report.
        let mut forced: FxHashMap<(u32, u32), EdgeKind> = FxHashMap::default();
        let level = self.k.level;
        if pre_force && (judged(level, EdgeKind::Process) || judged(level, EdgeKind::RealTime)) {
            let first_w: Vec<u32> = units.iter().map(|u| self.writer(vid(u[0]))).collect();
            let last_w: Vec<u32> = units
                .iter()
                .map(|u| self.writer(vid(*u.last().expect("units are not empty"))))
                .collect();
            for (ua, &fa) in first_w.iter().enumerate().skip(1) {
                for (ub, &lb) in last_w.iter().enumerate().skip(1) {
                    if ua != ub
                        && !rel_of.contains_key(&(ua as u32, ub as u32))
                        && let Some(kind) = self.ordered(fa, lb)
                    {
                        forced.insert((ua as u32, ub as u32), kind);
                    }
                }
            }
            let both: Vec<(u32, u32)> = forced
                .keys()
                .filter(|&&(a, b)| forced.contains_key(&(b, a)))
                .copied()
                .collect();
            for p in both {
                forced.remove(&p);
            }
        }
        let mut succ: Vec<Vec<u32>> = vec![Vec::new(); nu];
        for &(ua, ub) in rel_of.keys().chain(forced.keys()) {
            succ[ua as usize].push(ub);
        }
        // A topological order of the units (none if their order is cyclic).
        let mut indeg = vec![0u32; nu];
        for out in &succ {
            for &v in out {
                indeg[v as usize] += 1;
            }
        }
        let mut topo: Vec<u32> = (0..nu as u32).filter(|&u| indeg[u as usize] == 0).collect();
        let mut i = 0;
        while i < topo.len() {
            for &v in &succ[topo[i] as usize] {
                indeg[v as usize] -= 1;
                if indeg[v as usize] == 0 {
                    topo.push(v);
                }
            }
            i += 1;
        }
        if topo.len() < nu {
            return false;
        }
        // Reachability among units, as bitsets, in reverse topological order.
        let words = nu.div_ceil(64);
        let mut reach = vec![0u64; nu * words];
        for &u in topo.iter().rev() {
            let u = u as usize;
            for &v in &succ[u] {
                let v = v as usize;
                reach[u * words + v / 64] |= 1u64 << (v % 64);
                for w in 0..words {
                    let x = reach[v * words + w];
                    reach[u * words + w] |= x;
                }
            }
        }
        let reaches = |a: usize, b: usize| reach[a * words + b / 64] & (1u64 << (b % 64)) != 0;
        if units.iter().any(|u| u.len() > 1) {
            self.contiguous_keys.push(ko.key);
        }
        // Only the transitive reduction of the unit order needs edges: two units can be
        // adjacent in a placement only if nothing is known to lie between them.
        let mut rels: Vec<(u32, u32)> = Vec::new();
        let mut cover = vec![0u64; words];
        for (u, out) in succ.iter().enumerate() {
            cover.iter_mut().for_each(|c| *c = 0);
            for &v in out {
                for w in 0..words {
                    cover[w] |= reach[v as usize * words + w];
                }
            }
            for &v in out {
                if cover[v as usize / 64] & (1u64 << (v % 64)) == 0 {
                    rels.push((u as u32, v));
                }
            }
        }
        rels.sort_unstable();
        rels.dedup();
        for (ua, ub) in rels {
            let (last, first) = (
                *units[ua as usize].last().expect("units are not empty"),
                units[ub as usize][0],
            );
            let Some(&(a, b, evidence)) = rel_of.get(&(ua, ub)) else {
                let kind = forced[&(ua, ub)];
                let r = self.rels.len() as u32;
                self.rels.push(Rel {
                    a: vid(units[ua as usize][0]),
                    b: vid(*units[ub as usize].last().expect("units are not empty")),
                    evidence: Evidence::List,
                    by_order: Some(kind),
                    last: vid(last),
                    first: vid(first),
                    chain_a: Vec::new(),
                    chain_b: Vec::new(),
                });
                self.join_edges(vid(last), vid(first), Origin::Derived(r));
                continue;
            };
            if (last, first) == (a, b) {
                // A known pair: its edges are known ones.
                continue;
            }
            let chain_a: Vec<u32> = units[ua as usize]
                .iter()
                .skip_while(|&&v| v != a)
                .map(|&v| vid(v))
                .collect();
            let mut chain_b: Vec<u32> = Vec::new();
            for &v in &units[ub as usize] {
                chain_b.push(vid(v));
                if v == b {
                    break;
                }
            }
            let r = self.rels.len() as u32;
            self.rels.push(Rel {
                a: vid(a),
                b: vid(b),
                evidence,
                by_order: None,
                last: vid(last),
                first: vid(first),
                chain_a,
                chain_b,
            });
            self.join_edges(vid(last), vid(first), Origin::Derived(r));
        }
        for ua in 1..nu {
            for ub in ua + 1..nu {
                if reaches(ua, ub) || reaches(ub, ua) {
                    continue;
                }
                let (a, b) = (&units[ua], &units[ub]);
                let c = self.choices.len() as u32;
                let a = (vid(a[0]), vid(*a.last().expect("units are not empty")));
                let b = (vid(b[0]), vid(*b.last().expect("units are not empty")));
                let mut opt = [(0, 0); 2];
                for (dir, (from, to)) in [(a.1, b.0), (b.1, a.0)].into_iter().enumerate() {
                    let start = self.edges.len() as u32;
                    self.join_edges(
                        from,
                        to,
                        Origin::Option {
                            choice: c,
                            dir: dir as u8,
                        },
                    );
                    opt[dir] = (start, self.edges.len() as u32);
                }
                self.choices.push(Choice {
                    key: ko.key,
                    a,
                    b,
                    opt,
                });
            }
        }
        true
    }

    fn opt_edges(&self, c: u32, dir: u8) -> std::ops::Range<u32> {
        let (s, e) = self.choices[c as usize].opt[dir as usize];
        s..e
    }

    /// A cycle the level proscribes whatever else it holds, closed by edge `e` with the edges
    /// in force, looked for among nodes the components `comp` rank between its ends.
    fn closes(&mut self, e: u32, comp: &[u32]) -> Option<Vec<u32>> {
        let PEdge { from, to, kind, .. } = self.edges[e as usize];
        let limit = rw_limit(self.k.level);
        let rw_left = if kind == EdgeKind::Rw {
            match limit {
                0 | 1 => 0,
                l => l,
            }
        } else {
            limit
        };
        if kind == EdgeKind::Rw && limit == 0 {
            return None;
        }
        // Session and real-time order are transitive and known from the records alone: no
        // search needed, however far apart the two transactions are. An unknown outcome
        // precedes nothing in either order, but its readers do.
        let via = if self.ordered(to, from).is_some() {
            Some(NONE)
        } else if self.k.ix.status[self.k.txn_of[to as usize] as usize] == Status::Committed {
            None
        } else {
            self.adj[to as usize].iter().take(64).copied().find(|&x| {
                let pe = &self.edges[x as usize];
                (pe.kind != EdgeKind::Rw || rw_left > 0) && self.ordered(pe.to, from).is_some()
            })
        };
        if let Some(step) = via {
            let mut cycle = vec![e];
            let mut at = to;
            if step != NONE {
                cycle.push(step);
                at = self.edges[step as usize].to;
            }
            let order = self.ordered(at, from).expect("checked above");
            cycle.push(self.edges.len() as u32);
            self.edges.push(PEdge {
                from: at,
                to: from,
                kind: order,
                origin: Origin::Order,
                a: NONE,
                b: NONE,
            });
            return Some(cycle);
        }
        // Components are numbered in reverse topological order: a path to `from` stays within
        // the components numbered from `comp[from]` to `comp[to]`.
        let (lo, hi) = (comp[from as usize], comp[to as usize]);
        if hi < lo {
            return None;
        }
        let edges = &self.edges;
        let res = self.bfs.path(
            &self.adj,
            |i| (edges[i as usize].to, edges[i as usize].kind),
            to,
            from,
            rw_left,
            |x| (lo..=hi).contains(&comp[x as usize]),
            PRUNE_VISITS,
        );
        match res {
            Path::Found(p) => {
                let mut cycle = vec![e];
                cycle.extend(p);
                Some(cycle)
            }
            Path::None | Path::GaveUp => None,
        }
    }

    /// Whether node `a` precedes node `b` in an order the level judges, as the checker draws
    /// them (`session_edges`, `realtime_edges`): nothing follows an unknown outcome.
    fn ordered(&self, a: u32, b: u32) -> Option<EdgeKind> {
        let ix = self.k.ix;
        let (ta, tb) = (self.k.txn_of[a as usize], self.k.txn_of[b as usize]);
        if ix.status[ta as usize] != Status::Committed {
            return None;
        }
        let (ra, rb) = (&ix.history.txns[ta as usize], &ix.history.txns[tb as usize]);
        let level = self.k.level;
        if judged(level, EdgeKind::Process)
            && ra.client == rb.client
            && (ra.invoke_us, ra.index) < (rb.invoke_us, rb.index)
        {
            return Some(EdgeKind::Process);
        }
        if judged(level, EdgeKind::RealTime) && ra.complete_us.max(ra.invoke_us) < rb.invoke_us {
            return Some(EdgeKind::RealTime);
        }
        None
    }

    fn option_closes(&mut self, c: u32, dir: u8, comp: &[u32]) -> Option<Vec<u32>> {
        self.opt_edges(c, dir).find_map(|e| self.closes(e, comp))
    }

    /// One placement tried before any pruning: every open pair in the order of its units'
    /// first writers' commit timestamps (then invocation times). A history from a protocol
    /// that orders writes that way is usually valid under it, and then one exact check of the
    /// whole graph settles the question (linear, where pruning may search the graph once per
    /// pair). Only a guess: the timestamps are trusted for nothing else, and a placement that
    /// fails proves nothing (but where it fails is where pruning looks first). Returns the
    /// nodes of the components where it fails: none if it is valid.
    fn guess_by_time(&self) -> Vec<u32> {
        let ix = self.k.ix;
        // An attempt with an unknown outcome has no timestamp: it borrows the timestamp of the
        // committed transaction invoked last before it.
        let mut stamps: Vec<(u64, u64)> = ix
            .history
            .txns
            .iter()
            .filter_map(|rec| match rec.outcome {
                RecordedOutcome::Committed { commit_ts } => Some((rec.invoke_us, commit_ts)),
                _ => None,
            })
            .collect();
        stamps.sort_unstable();
        let began = |vid: u32| {
            let t = ix.vid_writer[vid as usize];
            let rec = &ix.history.txns[t as usize];
            let ts = match rec.outcome {
                RecordedOutcome::Committed { commit_ts } => commit_ts,
                _ => {
                    let i = stamps.partition_point(|&(at, _)| at <= rec.invoke_us);
                    i.checked_sub(1).map_or(0, |i| stamps[i].1)
                }
            };
            (ts, rec.invoke_us, rec.index)
        };
        self.failing_components(|ch| if began(ch.a.0) <= began(ch.b.0) { 0 } else { 1 })
    }

    /// The second guess, for histories whose timestamps say little of their order: units in a
    /// topological order of the known edges (ties by the first writer's place in the
    /// history), as the search's greedy placement does within an instance.
    fn guess_by_known_order(&self) -> Vec<u32> {
        let ranks = topological_ranks(&Csr::build(self.n, &self.in_force()));
        let rank = |vid: u32| match self.writer(vid) {
            NONE => (0, 0),
            u => ranks[u as usize],
        };
        self.failing_components(|ch| if rank(ch.a.0) <= rank(ch.b.0) { 0 } else { 1 })
    }

    /// The edges in force (known, derived and fixed options): (from, to, edge id).
    fn in_force(&self) -> Vec<(u32, u32, u32)> {
        let mut triples = Vec::new();
        for (u, out) in self.adj.iter().enumerate() {
            for &e in out {
                triples.push((u as u32, self.edges[e as usize].to, e));
            }
        }
        triples
    }

    /// The nodes of the components where the placement `dir` gives every choice closes a cycle
    /// the level proscribes (none: the placement is valid): one linear check over the whole
    /// graph, and one cycle search per component.
    fn failing_components(&self, dir: impl Fn(&Choice) -> u8) -> Vec<u32> {
        let mut triples = self.in_force();
        for (c, ch) in self.choices.iter().enumerate() {
            for e in self.opt_edges(c as u32, dir(ch)) {
                let pe = &self.edges[e as usize];
                triples.push((pe.from, pe.to, e));
            }
        }
        let g = Csr::build(self.n, &triples);
        drop(triples);
        proscribed_components(self.k.level, &g, self.gedges(), false)
            .into_iter()
            .flat_map(|(nodes, _)| nodes)
            .collect()
    }

    /// Every polygraph edge as a graph edge, for the cycle classification (built once, when a
    /// guess first needs it).
    fn gedges(&self) -> &[GEdge] {
        self.gedges.get_or_init(|| {
            self.edges
                .iter()
                .map(|e| GEdge::order(e.from, e.to, e.kind))
                .collect()
        })
    }

    /// Components of the edges in force.
    fn components(&self) -> Vec<u32> {
        tarjan(&Csr::build(self.n, &self.in_force())).0
    }

    /// Fix every option whose alternative closes a proscribed cycle, to a fixpoint. Err: a
    /// choice both of whose options do, with the two cycles.
    /// Every test costs a step, and so does every [`VISITS_PER_STEP`] states its path searches
    /// visit; when the budget runs out, pruning stops undecided.
    /// Choices touching a node of `suspects` go first: a choice neither of whose options is
    /// possible ends the search at once, and is likeliest where a guess failed.
    fn prune(&mut self, steps: &mut u64, deadline: Instant, suspects: &[u32]) -> Pruned {
        let mut suspect = vec![false; self.n];
        for &u in suspects {
            suspect[u as usize] = true;
        }
        let touches = |c: u32| {
            let ch = &self.choices[c as usize];
            [ch.a.0, ch.a.1, ch.b.0, ch.b.1]
                .into_iter()
                .any(|v| self.writer(v) != NONE && suspect[self.writer(v) as usize])
        };
        let mut order: Vec<u32> = (0..self.choices.len() as u32).collect();
        order.sort_by_key(|&c| !touches(c));
        let mut tested = 0u32;
        loop {
            let comp = self.components();
            let mut changed = false;
            for &c in &order {
                if self.fixed[c as usize] != 0 {
                    continue;
                }
                let before = self.bfs.visited;
                let r0 = self.option_closes(c, 0, &comp);
                let r1 = self.option_closes(c, 1, &comp);
                *steps += 1 + (self.bfs.visited - before) / VISITS_PER_STEP;
                tested += 1;
                if *steps > self.k.budget.steps
                    || (tested.is_multiple_of(256) && Instant::now() > deadline)
                {
                    return Pruned::OutOfBudget;
                }
                let (keep, reason) = match (r0, r1) {
                    (Some(a), Some(b)) => return Pruned::BothFail(c, [a, b]),
                    (Some(a), None) => (1u8, a),
                    (None, Some(b)) => (0u8, b),
                    (None, None) => continue,
                };
                self.fixed[c as usize] = 1 + keep;
                self.reason[c as usize] = reason;
                for e in self.opt_edges(c, keep) {
                    self.adj[self.edges[e as usize].from as usize].push(e);
                }
                changed = true;
            }
            if !changed {
                return Pruned::Done;
            }
        }
    }

    /// Group what is left into independent instances.
    fn instances(&self) -> Vec<Instance> {
        let open: Vec<u32> = (0..self.choices.len() as u32)
            .filter(|&c| self.fixed[c as usize] == 0)
            .collect();
        let mut triples = self.in_force();
        for &c in &open {
            for dir in 0..2 {
                for e in self.opt_edges(c, dir) {
                    let pe = &self.edges[e as usize];
                    triples.push((pe.from, pe.to, e));
                }
            }
        }
        let (comp, ncomp) = tarjan(&Csr::build(self.n, &triples));
        // Components where a cycle may depend on something other than known edges.
        let mut interesting = vec![false; ncomp as usize];
        for &(u, v, e) in &triples {
            if comp[u as usize] == comp[v as usize]
                && !matches!(self.edges[e as usize].origin, Origin::Known(_))
            {
                interesting[comp[u as usize] as usize] = true;
            }
        }
        // Components sharing an open choice are one instance.
        let mut parent: Vec<u32> = (0..ncomp).collect();
        fn find(p: &mut [u32], mut x: u32) -> u32 {
            while p[x as usize] != x {
                p[x as usize] = p[p[x as usize] as usize];
                x = p[x as usize];
            }
            x
        }
        let mut choice_comp = vec![NONE; self.choices.len()];
        for &c in &open {
            for dir in 0..2 {
                for e in self.opt_edges(c, dir) {
                    let pe = &self.edges[e as usize];
                    let (cu, cv) = (comp[pe.from as usize], comp[pe.to as usize]);
                    if cu != cv {
                        continue;
                    }
                    match choice_comp[c as usize] {
                        NONE => choice_comp[c as usize] = cu,
                        other => {
                            let (x, y) = (find(&mut parent, other), find(&mut parent, cu));
                            parent[x as usize] = y;
                        }
                    }
                }
            }
        }
        let mut group_of: FxHashMap<u32, usize> = FxHashMap::default();
        let mut out: Vec<Instance> = Vec::new();
        for (node, &c) in comp.iter().enumerate() {
            if !interesting[c as usize] {
                continue;
            }
            let g = find(&mut parent, c);
            let i = *group_of.entry(g).or_insert_with(|| {
                out.push(Instance {
                    nodes: Vec::new(),
                    choices: Vec::new(),
                });
                out.len() - 1
            });
            out[i].nodes.push(node as u32);
        }
        for &c in &open {
            let cc = choice_comp[c as usize];
            if cc == NONE {
                continue;
            }
            let g = find(&mut parent, cc);
            if let Some(&i) = group_of.get(&g) {
                out[i].choices.push(c);
            }
        }
        // A component interesting only through an open choice's edges, when that choice also
        // touches no other: still one instance, already grouped above.
        out
    }

    /// Decide one instance: the known graph, the greedy placement, then the solver.
    fn solve(
        &self,
        inst: &Instance,
        steps: &mut u64,
        deadline: Instant,
        found: &mut Found,
    ) -> Decision {
        let mut s = Search::new(self, inst, *steps, deadline);
        let outcome = s.run();
        *steps = s.steps;
        found.solver_runs += s.solver_ran as usize;
        found.lemmas += s.lemmas;
        match outcome {
            Err(()) => Decision::Undecided,
            Ok(true) => Decision::Valid,
            Ok(false) => {
                // The search took as settled what pruning and the orders settled: the
                // placements it did not visit close the cycles that settled them.
                let mut floor = s.floor;
                for &(_, _, _, e) in &s.edges {
                    let settled = match self.edges[e as usize].origin {
                        Origin::Option { choice, .. } if self.fixed[choice as usize] != 0 => {
                            Some(self.cycle_kind(&self.reason[choice as usize]))
                        }
                        Origin::Derived(r) => self.rels[r as usize]
                            .by_order
                            .map(|k| (CycleKind::G0, order_of(k))),
                        _ => None,
                    };
                    if let Some((k, o)) = settled {
                        floor = (floor.0.max(k), floor.1.max(o));
                    }
                }
                Decision::Violation(s.conds, floor)
            }
        }
    }

    /// Words for a version: `T3's x = "1"`.
    fn version(&self, vid: u32) -> String {
        let ix = self.k.ix;
        match ix.vid_writer[vid as usize] {
            NONE => ix.kv(vid),
            w => format!("{}'s {}", ix.short(w), ix.kv(vid)),
        }
    }

    /// Option `dir` of choice `c`, in words: `T3's x = "1" precedes T2's x = "2"`.
    fn placement(&self, c: u32, dir: u8) -> String {
        let (a, b) = self.choices[c as usize].join(dir);
        format!("{} precedes {}", self.version(a), self.version(b))
    }

    fn path_text(&self, cycle: &[u32]) -> String {
        let ix = self.k.ix;
        let mut path = String::new();
        for &e in cycle {
            let pe = &self.edges[e as usize];
            if path.is_empty() {
                path.push_str(&ix.name(self.k.txn_of[pe.from as usize]));
            }
            path.push_str(&format!(
                " -{}-> {}",
                pe.kind.name(),
                ix.short(self.k.txn_of[pe.to as usize])
            ));
        }
        path
    }

    fn cycle_kind(&self, cycle: &[u32]) -> (CycleKind, CycleOrder) {
        let steps: Vec<(EdgeKind, CycleOrder)> = cycle
            .iter()
            .map(|&e| {
                let pe = &self.edges[e as usize];
                // A known edge drawn from real-time evidence needs real-time order.
                let order = match pe.origin {
                    Origin::Known(i) => self.k.edges[i as usize].order_needed(),
                    _ => GEdge::order(pe.from, pe.to, pe.kind).order_needed(),
                };
                (pe.kind, order)
            })
            .collect();
        classify(&steps)
    }

    /// Why a derived edge's units are ordered, in words, with the cycle any other placement
    /// closes.
    fn rel_text(&self, r: &Rel) -> String {
        let ix = self.k.ix;
        if let Some(kind) = r.by_order {
            let (wa, wb) = (ix.vid_writer[r.a as usize], ix.vid_writer[r.b as usize]);
            let (ra, rb) = (&ix.history.txns[wa as usize], &ix.history.txns[wb as usize]);
            let (sa, sb) = (ix.short(wa), ix.short(wb));
            let how = if kind == EdgeKind::Process {
                format!("{sa} ran before {sb} on client {}", ra.client)
            } else {
                format!(
                    "{sa} finished at {} µs before {sb} began at {} µs",
                    ra.complete_us, rb.invoke_us
                )
            };
            return format!(
                "{how}, so {} precedes {} (the other order closes a {} cycle: {sb} -ww-> \
                 {sa} -{}-> {sb})",
                self.version(r.last),
                self.version(r.first),
                AnomalyKind::Cycle(CycleKind::G0, order_of(kind)),
                kind.name(),
            );
        }
        let ev = match r.evidence {
            Evidence::Initial => "every version follows the initial one".to_string(),
            Evidence::ReadThenWrite => format!(
                "{} read it and then installed {}",
                ix.writer_name(r.b),
                ix.value(r.b)
            ),
            Evidence::CommitTs => "commit-timestamp order, white-box".to_string(),
            Evidence::List => "list order".to_string(),
            Evidence::RealTime => format!(
                "real-time order: {} finished before {} began",
                ix.writer_name(r.a),
                ix.writer_name(r.b)
            ),
        };
        // The read-then-write link a misplaced version would break: the first one of the
        // earlier unit's chain after `a`, else the later unit's first.
        let link = if r.chain_a.len() > 1 {
            Some((r.chain_a[0], r.chain_a[1]))
        } else if r.chain_b.len() > 1 {
            Some((r.chain_b[0], r.chain_b[1]))
        } else {
            None
        };
        let mut text = format!(
            "{} precedes {} ({ev}), and a read-then-write chain leaves no room for other \
             versions, so {} precedes {}",
            ix.kv(r.a),
            ix.value(r.b),
            self.version(r.last),
            self.version(r.first),
        );
        let other = if r.chain_a.len() > 1 { r.first } else { r.last };
        if let Some((x, y)) = link
            && ix.vid_writer[other as usize] != NONE
        {
            let wy = ix.short(ix.vid_writer[y as usize]);
            let wo = ix.short(ix.vid_writer[other as usize]);
            text.push_str(&format!(
                " (otherwise {} would fall between {} and {}, which {wy} read and then \
                 overwrote: {wy} -rw-> {wo} -ww-> {wy}, a G-single)",
                ix.value(other),
                ix.value(x),
                ix.value(y),
            ));
        }
        text
    }

    /// Why a polygraph edge exists.
    fn why(&self, e: u32) -> String {
        let ix = self.k.ix;
        let pe = &self.edges[e as usize];
        let (from, to) = (
            self.k.txn_of[pe.from as usize],
            self.k.txn_of[pe.to as usize],
        );
        let (f, t) = (ix.short(from), ix.short(to));
        let what = || match pe.kind {
            EdgeKind::Rw => format!(
                "{f} read {}, and {t} installed {} after it",
                ix.kv(pe.a),
                ix.value(pe.b)
            ),
            _ => format!(
                "{f} installed {}, and {t} installed {} after it",
                ix.kv(pe.a),
                ix.value(pe.b)
            ),
        };
        match pe.origin {
            Origin::Known(i) => super::why(ix, &self.k.edges[i as usize], from, to),
            Origin::Order => super::why(ix, &GEdge::order(pe.from, pe.to, pe.kind), from, to),
            Origin::Derived(r) => format!("{}: {}", what(), self.rel_text(&self.rels[r as usize])),
            Origin::Option { choice, dir } => {
                let place = self.placement(choice, dir);
                if self.fixed[choice as usize] == 1 + dir {
                    let other = &self.reason[choice as usize];
                    let (k, o) = self.cycle_kind(other);
                    format!(
                        "{}: {place} (placement forced: the other order closes a {} cycle, {})",
                        what(),
                        AnomalyKind::Cycle(k, o),
                        self.path_text(other)
                    )
                } else {
                    format!("{}, if {place} (placement)", what())
                }
            }
        }
    }

    /// Report that no placement is valid: the cycles `conds` (and the pruning that forced the
    /// rest) rule every placement out.
    fn report(
        &self,
        conds: &[Cond],
        choices: &[u32],
        floor: (CycleKind, CycleOrder),
        out: &mut Collector,
    ) {
        let ix = self.k.ix;
        // The least severe kind every placement hits, and the orders it needs: the maximum of
        // each over the cycles that rule placements out (proscription is monotone in both, and
        // each level proscribes a product of kinds and orders, so the maxima are proscribed).
        let (mut kind, mut order) = floor;
        let mut bump = |(k, o): (CycleKind, CycleOrder)| {
            kind = kind.max(k);
            order = order.max(o);
        };
        let mut forced: Vec<u32> = Vec::new();
        let mut keys_used: Vec<u32> = Vec::new();
        for cond in conds {
            bump(self.cycle_kind(&cond.cycle));
            for &e in &cond.cycle {
                let pe = &self.edges[e as usize];
                if let Origin::Derived(r) = pe.origin
                    && let Some(kind) = self.rels[r as usize].by_order
                {
                    bump((CycleKind::G0, order_of(kind)));
                }
                if let Origin::Option { choice, .. } = pe.origin
                    && self.fixed[choice as usize] != 0
                    && !forced.contains(&choice)
                {
                    forced.push(choice);
                }
                if matches!(pe.origin, Origin::Derived(_) | Origin::Option { .. }) {
                    let key = ix.vid_key[pe.b as usize];
                    if !keys_used.contains(&key) {
                        keys_used.push(key);
                    }
                }
            }
        }
        // Choices pruning fixed may rest on others it fixed earlier.
        let mut i = 0;
        while i < forced.len() {
            let reason = &self.reason[forced[i] as usize];
            bump(self.cycle_kind(reason));
            for &e in reason {
                if let Origin::Option { choice, .. } = self.edges[e as usize].origin
                    && self.fixed[choice as usize] != 0
                    && !forced.contains(&choice)
                {
                    forced.push(choice);
                }
            }
            i += 1;
        }
        for &c in choices {
            let key = self.choices[c as usize].key;
            if !keys_used.contains(&key) {
                keys_used.push(key);
            }
        }
        // Placements that break a read-then-write chain close a G-single.
        if keys_used.iter().any(|k| self.contiguous_keys.contains(k)) {
            bump((CycleKind::GSingle, CycleOrder::Dependencies));
        }
        let anomaly = AnomalyKind::Cycle(kind, order);
        if !out.admit(anomaly) {
            return;
        }
        let main = &conds[0];
        let mut txns: Vec<usize> = Vec::new();
        let mut report_edges = Vec::new();
        for &e in &main.cycle {
            let pe = &self.edges[e as usize];
            let (from, to) = (
                self.k.txn_of[pe.from as usize],
                self.k.txn_of[pe.to as usize],
            );
            txns.push(ix.index_of(from));
            report_edges.push(Edge {
                from: ix.index_of(from),
                to: ix.index_of(to),
                kind: pe.kind.name(),
                key: (!pe.kind.is_order())
                    .then(|| ix.key_name(ix.vid_key[pe.a as usize]).to_string()),
                why: self.why(e),
            });
        }
        for cond in &conds[1..] {
            for &e in &cond.cycle {
                let t = ix.index_of(self.k.txn_of[self.edges[e as usize].from as usize]);
                if !txns.contains(&t) {
                    txns.push(t);
                }
            }
        }
        let mut keys: Vec<String> = keys_used
            .iter()
            .map(|&k| ix.key_name(k).to_string())
            .collect();
        for e in &report_edges {
            if let Some(k) = &e.key
                && !keys.contains(k)
            {
                keys.push(k.clone());
            }
        }
        let settled = conds.iter().flat_map(|c| &c.cycle).any(|&e| {
            matches!(self.edges[e as usize].origin, Origin::Derived(_))
                || matches!(self.edges[e as usize].origin,
                    Origin::Option { choice, .. } if self.fixed[choice as usize] != 0)
        });
        let condition = |cond: &Cond| {
            if cond.assumed.is_empty() && settled {
                "in every placement not ruled out below".to_string()
            } else if cond.assumed.is_empty() {
                "in every placement".to_string()
            } else {
                let parts: Vec<String> = cond
                    .assumed
                    .iter()
                    .map(|&(c, d)| self.placement(c, d))
                    .collect();
                format!("if {}", parts.join(" and "))
            }
        };
        let describe = |cycle: &[u32]| {
            let (k, o) = self.cycle_kind(cycle);
            format!(
                "{} cycle of {} transactions, {}",
                AnomalyKind::Cycle(k, o),
                cycle.len(),
                self.path_text(cycle)
            )
        };
        let placed: Vec<String> = keys_used
            .iter()
            .map(|&k| ix.key_name(k).to_string())
            .collect();
        let mut explanation = format!(
            "No placement of the writes whose place in the version order of {} is unknown \
             avoids a cycle the level proscribes; each one closes at least a {anomaly}. {}: {}.",
            placed.join(", "),
            upper(&condition(main)),
            describe(&main.cycle)
        );
        if conds.len() > 1 {
            explanation.push_str(" Every other placement fails too:");
            for cond in conds[1..].iter().take(SHOWN) {
                explanation.push_str(&format!(" {}: {};", condition(cond), describe(&cond.cycle)));
            }
            if conds.len() > SHOWN + 1 {
                explanation.push_str(&format!(
                    " and {} more placements, each with such a cycle;",
                    conds.len() - SHOWN - 1
                ));
            }
            explanation.pop();
            explanation.push('.');
        }
        let mut derived: Vec<u32> = Vec::new();
        for cond in conds.iter().take(SHOWN + 1) {
            for &e in &cond.cycle {
                if let Origin::Derived(r) = self.edges[e as usize].origin
                    && !derived.contains(&r)
                {
                    derived.push(r);
                }
            }
        }
        for &r in derived.iter().take(SHOWN) {
            explanation.push_str(&format!(
                " Forced: {}.",
                self.rel_text(&self.rels[r as usize])
            ));
        }
        for &c in forced.iter().take(SHOWN) {
            let dir = self.fixed[c as usize] - 1;
            explanation.push_str(&format!(
                " Forced: {}, since otherwise: {}.",
                self.placement(c, dir),
                describe(&self.reason[c as usize])
            ));
        }
        let needs = match order {
            CycleOrder::Dependencies => "",
            CycleOrder::Process => " The cycles need session order.",
            CycleOrder::RealTime => " The cycles need real-time order.",
        };
        explanation.push_str(needs);
        out.push(anomaly, txns, keys, report_edges, explanation);
    }

    fn undecided(&self, inst: &Instance, steps: u64) -> Undecided {
        let ix = self.k.ix;
        // Sets, since pruning that ran out of budget leaves up to every choice of the history.
        let mut key_seen = rustc_hash::FxHashSet::default();
        let mut txn_seen = rustc_hash::FxHashSet::default();
        let mut keys: Vec<String> = Vec::new();
        let mut txns: Vec<usize> = Vec::new();
        for &c in &inst.choices {
            let ch = &self.choices[c as usize];
            if key_seen.insert(ch.key) {
                keys.push(ix.key_name(ch.key).to_string());
            }
            for v in [ch.a.0, ch.b.0] {
                let w = ix.vid_writer[v as usize];
                if w != NONE && txn_seen.insert(w) {
                    txns.push(ix.index_of(w));
                }
            }
        }
        let names: Vec<String> = txns.iter().take(8).map(|t| format!("T{t}")).collect();
        let among = if inst.nodes.is_empty() {
            " (pruning did not finish)".to_string()
        } else {
            format!(" among {} transactions", inst.nodes.len())
        };
        let explanation = format!(
            "{} placements of writes to {} ({}{}){among} were not decided within the solver \
             budget ({} steps or {:?}; {steps} steps used)",
            inst.choices.len(),
            keys.iter()
                .take(8)
                .cloned()
                .chain((keys.len() > 8).then(|| format!("{} more keys", keys.len() - 8)))
                .collect::<Vec<_>>()
                .join(", "),
            names.join(", "),
            if txns.len() > 8 { ", …" } else { "" },
            self.k.budget.steps,
            self.k.budget.time,
        );
        Undecided {
            txns,
            keys,
            explanation,
        }
    }
}

/// The non-trivial strongly connected components of `g` that hold a cycle `level` proscribes
/// (edge ids of `g` index `gedges`): each one's nodes and one such cycle. With `first_only`,
/// the first found alone.
fn proscribed_components(
    level: IsolationLevel,
    g: &Csr,
    gedges: &[GEdge],
    first_only: bool,
) -> Vec<(Vec<u32>, Vec<u32>)> {
    let mut found = Vec::new();
    let members = nontrivial_components(g);
    if members.is_empty() {
        return found;
    }
    let mut scratch = vec![NONE; g.n()];
    for group in members.chunk_by(|a, b| a.0 == b.0) {
        let nodes: Vec<u32> = group.iter().map(|&(_, u)| u).collect();
        let cycle = component_cycles(&nodes, g, gedges, &mut scratch)
            .into_iter()
            .find(|f| level.proscribes(AnomalyKind::Cycle(f.kind, f.order)));
        if let Some(f) = cycle {
            found.push((nodes, f.edges));
            if first_only {
                break;
            }
        }
    }
    found
}

/// The cycle order an order edge gives.
fn order_of(kind: EdgeKind) -> CycleOrder {
    match kind {
        EdgeKind::RealTime => CycleOrder::RealTime,
        EdgeKind::Process => CycleOrder::Process,
        _ => CycleOrder::Dependencies,
    }
}

fn upper(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The search over one instance, as a satisfiability problem: one variable per open choice
/// (true: the choice's first unit goes first), decided by `batsat`'s CDCL solver with this
/// struct as its theory. The theory keeps the graph of the known edges plus the edges of every
/// option the solver has assigned, and answers it with lemmas, each the negation of the options
/// that close one proscribed cycle:
///
/// * on every assignment (`partial_check`), the bounded test pruning uses: a cycle through the
///   new option's edges that the level proscribes whatever else it holds;
/// * on every complete assignment (`final_check`), the exact test of the whole graph.
///
/// Each lemma rules out every placement holding those options, so an unsatisfiable instance
/// has no valid placement, and the lemmas' cycles are the report's "every other placement fails
/// too". The solver learns from them; the theory never propagates.
struct Search<'p, 'a, 'h> {
    poly: &'p Poly<'a, 'h>,
    /// Local edges: (from, to, kind, polygraph edge id).
    edges: Vec<(u32, u32, EdgeKind, u32)>,
    /// The same, for the cycle classification.
    gedges: Vec<GEdge>,
    adj: Vec<Vec<u32>>,
    /// Per open choice (index into `choices`): each option's local edges.
    opts: Vec<[Vec<u32>; 2]>,
    /// Per open choice: the local nodes of its units' first writers (`NONE` outside).
    heads: Vec<(u32, u32)>,
    choices: Vec<u32>,
    /// The open choices' indices into `choices`, by polygraph choice.
    open: FxHashMap<u32, usize>,
    /// Per open choice: 0 unassigned, else 1 + direction.
    assign: Vec<u8>,
    /// Up to [`KEPT`] cycles that rule placements out.
    conds: Vec<Cond>,
    /// The least severe kind and the most orders among all cycles that ruled placements out.
    floor: (CycleKind, CycleOrder),
    bfs: Bfs,
    /// The theory's backtracking state: the solver's trail up to `seen` is applied; `applied`
    /// lists the choices set, in order; each level saves both lengths.
    seen: usize,
    applied: Vec<usize>,
    levels: Vec<(usize, usize)>,
    /// The solver's variable of each open choice (the choice's index is the variable's).
    vars: Vec<Var>,
    /// Whether the instance reached the solver, and how many lemmas the theory gave it.
    solver_ran: bool,
    lemmas: usize,
    /// A proscribed cycle of known edges alone: every placement fails.
    unconditional: Option<Vec<u32>>,
    steps: u64,
    budget: u64,
    deadline: Instant,
    /// Set when the budget is spent or the outcome is known: the solver stops at its next step.
    stop: Rc<Cell<bool>>,
}

/// The solver's callbacks: only its regular question whether to stop.
struct StopWhen(Rc<Cell<bool>>);

impl Callbacks for StopWhen {
    fn stop(&self) -> bool {
        self.0.get()
    }
}

impl<'p, 'a, 'h> Search<'p, 'a, 'h> {
    fn new(poly: &'p Poly<'a, 'h>, inst: &Instance, steps: u64, deadline: Instant) -> Self {
        let mut local: FxHashMap<u32, u32> = FxHashMap::default();
        for (i, &u) in inst.nodes.iter().enumerate() {
            local.insert(u, i as u32);
        }
        let m = inst.nodes.len();
        let mut edges = Vec::new();
        let mut adj = vec![Vec::new(); m];
        let loc = |u: u32| local.get(&u).copied();
        for &u in &inst.nodes {
            for &e in &poly.adj[u as usize] {
                let pe = &poly.edges[e as usize];
                if let (Some(a), Some(b)) = (loc(pe.from), loc(pe.to)) {
                    adj[a as usize].push(edges.len() as u32);
                    edges.push((a, b, pe.kind, e));
                }
            }
        }
        let mut opts = Vec::new();
        for &c in &inst.choices {
            let mut both: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
            for dir in 0..2u8 {
                for e in poly.opt_edges(c, dir) {
                    let pe = &poly.edges[e as usize];
                    if let (Some(a), Some(b)) = (loc(pe.from), loc(pe.to)) {
                        both[dir as usize].push(edges.len() as u32);
                        edges.push((a, b, pe.kind, e));
                    }
                }
            }
            opts.push(both);
        }
        // Each choice's units by their first writers, for the greedy placement.
        let heads = inst
            .choices
            .iter()
            .map(|&c| {
                let ch = &poly.choices[c as usize];
                let at = |v: u32| loc(poly.writer(v)).unwrap_or(NONE);
                (at(ch.a.0), at(ch.b.0))
            })
            .collect();
        let gedges = edges
            .iter()
            .map(|&(u, v, kind, _)| GEdge::order(u, v, kind))
            .collect();
        Search {
            poly,
            edges,
            gedges,
            adj,
            opts,
            heads,
            choices: inst.choices.clone(),
            open: inst
                .choices
                .iter()
                .enumerate()
                .map(|(i, &c)| (c, i))
                .collect(),
            assign: vec![0; inst.choices.len()],
            conds: Vec::new(),
            floor: (CycleKind::G0, CycleOrder::Dependencies),
            bfs: Bfs::new(m),
            seen: 0,
            applied: Vec::new(),
            levels: Vec::new(),
            vars: Vec::new(),
            solver_ran: false,
            lemmas: 0,
            unconditional: None,
            steps,
            budget: poly.k.budget.steps,
            deadline,
            stop: Rc::new(Cell::new(false)),
        }
    }

    /// Count one step; true (and the solver told to stop) when the budget is spent.
    fn tick(&mut self) -> bool {
        self.steps += 1;
        if self.steps > self.budget
            || (self.steps.is_multiple_of(256) && Instant::now() > self.deadline)
        {
            self.stop.set(true);
        }
        self.stop.get()
    }

    /// Note a cycle that rules out every placement holding the options `assumed`.
    fn record(&mut self, assumed: Vec<(u32, u8)>, cycle: Vec<u32>) {
        let (k, o) = self.poly.cycle_kind(&cycle);
        self.floor = (self.floor.0.max(k), self.floor.1.max(o));
        if self.conds.len() < KEPT {
            self.conds.push(Cond { assumed, cycle });
        }
    }

    fn set(&mut self, i: usize, dir: u8) {
        self.assign[i] = 1 + dir;
        for &e in &self.opts[i][dir as usize] {
            self.adj[self.edges[e as usize].0 as usize].push(e);
        }
    }

    fn unset(&mut self, i: usize) {
        let dir = self.assign[i] - 1;
        for &e in self.opts[i][dir as usize].iter().rev() {
            let popped = self.adj[self.edges[e as usize].0 as usize].pop();
            debug_assert_eq!(popped, Some(e));
        }
        self.assign[i] = 0;
    }

    /// A cycle, proscribed whatever else it holds, that option `dir` of open choice `i`
    /// closes with the edges in force (polygraph edge ids).
    fn closes(&mut self, i: usize, dir: u8) -> Option<Vec<u32>> {
        let limit = rw_limit(self.poly.k.level);
        for &e in &self.opts[i][dir as usize] {
            let (u, v, kind, _) = self.edges[e as usize];
            if kind == EdgeKind::Rw && limit == 0 {
                continue;
            }
            let rw_left = match (kind, limit) {
                (EdgeKind::Rw, 1) => 0,
                _ => limit,
            };
            let edges = &self.edges;
            if let Path::Found(p) = self.bfs.path(
                &self.adj,
                |x| (edges[x as usize].1, edges[x as usize].2),
                v,
                u,
                rw_left,
                |_| true,
                usize::MAX,
            ) {
                let mut cycle = vec![self.edges[e as usize].3];
                cycle.extend(p.iter().map(|&x| self.edges[x as usize].3));
                return Some(cycle);
            }
        }
        None
    }

    /// The edges in force (known and assigned options) as a graph over the local nodes.
    fn in_force(&self) -> Csr {
        let mut triples = Vec::new();
        for (u, out) in self.adj.iter().enumerate() {
            for &e in out {
                triples.push((u as u32, self.edges[e as usize].1, e));
            }
        }
        Csr::build(self.adj.len(), &triples)
    }

    /// The placement tried first, as a valid history is the common case: every open choice
    /// follows a topological order of the known edges (units by their first writers).
    fn greedy(&self) -> Vec<u8> {
        let ranks = topological_ranks(&self.in_force());
        let rank = |u: u32| if u == NONE { (0, 0) } else { ranks[u as usize] };
        self.heads
            .iter()
            .map(|&(a, b)| if rank(a) <= rank(b) { 0 } else { 1 })
            .collect()
    }

    /// The exact test of the edges in force: a cycle the level proscribes, if any.
    fn exact(&self) -> Option<Vec<u32>> {
        let g = self.in_force();
        let (_, cycle) = proscribed_components(self.poly.k.level, &g, &self.gedges, true).pop()?;
        Some(cycle.iter().map(|&x| self.edges[x as usize].3).collect())
    }

    /// Decide the instance: Ok(true) when some placement is valid, Ok(false) when none is
    /// (`conds` then holds cycles that rule them all out), Err when the budget ran out.
    fn run(&mut self) -> Result<bool, ()> {
        if self.tick() {
            return Err(());
        }
        if let Some(cycle) = self.exact() {
            self.record(Vec::new(), cycle);
            return Ok(false);
        }
        if self.choices.is_empty() {
            return Ok(true);
        }
        let first = self.greedy();
        if !self.poly.k.solver_only {
            for (i, &dir) in first.iter().enumerate() {
                self.set(i, dir);
            }
            if self.tick() {
                return Err(());
            }
            if self.exact().is_none() {
                return Ok(true);
            }
            for i in (0..self.choices.len()).rev() {
                self.unset(i);
            }
        }
        self.solver_ran = true;
        let mut solver = Solver::new(SolverOpts::default(), StopWhen(self.stop.clone()));
        for (i, &dir) in first.iter().enumerate() {
            // The greedy placement as each variable's preferred value.
            let preferred = if dir == 0 { lbool::TRUE } else { lbool::FALSE };
            let var = solver.new_var(preferred, true);
            debug_assert_eq!(var.idx() as usize, i);
            self.vars.push(var);
        }
        let verdict = solver.solve_limited_th(self, &[]);
        if self.unconditional.is_some() {
            return Ok(false);
        }
        if self.stop.get() {
            return Err(());
        }
        if verdict == lbool::TRUE {
            Ok(true)
        } else if verdict == lbool::FALSE {
            Ok(false)
        } else {
            Err(())
        }
    }

    /// Rule out, in the solver, every placement holding the open options on `cycle`.
    fn rule_out(&mut self, acts: &mut TheoryArg, cycle: Vec<u32>) {
        let mut assumed: Vec<(u32, u8)> = Vec::new();
        let mut lemma: Vec<Lit> = Vec::new();
        for &e in &cycle {
            if let Origin::Option { choice, dir } = self.poly.edges[e as usize].origin
                && let Some(&i) = self.open.get(&choice)
                && !assumed.contains(&(choice, dir))
            {
                assumed.push((choice, dir));
                lemma.push(!Lit::new(self.vars[i], dir == 0));
            }
        }
        assumed.sort_unstable();
        self.record(assumed, cycle.clone());
        if lemma.is_empty() {
            // Known edges alone close it (`run` tests them first, so this is a safety net).
            self.unconditional = Some(cycle);
            self.stop.set(true);
            return;
        }
        self.lemmas += 1;
        acts.raise_conflict(&lemma, true);
    }
}

impl Theory for Search<'_, '_, '_> {
    fn partial_check(&mut self, acts: &mut TheoryArg) {
        while self.seen < acts.model().len() {
            let lit = acts.model()[self.seen];
            self.seen += 1;
            let i = lit.var().idx() as usize;
            let dir = if lit.sign() { 0 } else { 1 };
            if self.tick() {
                return;
            }
            if let Some(cycle) = self.closes(i, dir) {
                self.rule_out(acts, cycle);
                return;
            }
            self.set(i, dir);
            self.applied.push(i);
        }
    }

    fn final_check(&mut self, acts: &mut TheoryArg) {
        self.partial_check(acts);
        if !acts.is_ok() || self.stop.get() || self.tick() {
            // A spent budget makes the whole search undecided, whatever the solver answers.
            return;
        }
        if let Some(cycle) = self.exact() {
            self.rule_out(acts, cycle);
        }
    }

    fn create_level(&mut self) {
        self.levels.push((self.seen, self.applied.len()));
    }

    fn pop_levels(&mut self, n: usize) {
        let keep = self.levels.len() - n;
        let (seen, applied) = self.levels[keep];
        self.levels.truncate(keep);
        while self.applied.len() > applied {
            if let Some(i) = self.applied.pop() {
                self.unset(i);
            }
        }
        self.seen = seen;
    }

    fn n_levels(&self) -> usize {
        self.levels.len()
    }

    fn explain_propagation(&mut self, _p: Lit) -> &[Lit] {
        // The solver asks only for literals the theory propagated, and this one never does.
        &[]
    }
}
