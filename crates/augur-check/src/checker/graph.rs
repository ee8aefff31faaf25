//! The dependency graph: edges with the evidence behind them, compressed adjacency, Tarjan's
//! strongly connected components (iterative: histories have a hundred thousand transactions and
//! a recursive search would overflow the stack) and breadth-first path search.

use super::index::NONE;
use crate::anomaly::CycleOrder;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The kind of an edge. Dependencies first, then the two orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum EdgeKind {
    Ww,
    Wr,
    Rw,
    Process,
    RealTime,
}

impl EdgeKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::Process => "process",
            EdgeKind::RealTime => "realtime",
        }
    }

    pub(super) fn is_order(self) -> bool {
        matches!(self, EdgeKind::Process | EdgeKind::RealTime)
    }
}

/// What ordered two versions of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Evidence {
    /// List-append: the later list extends the earlier one.
    List,
    /// The later version's writer read the earlier version, then wrote the key.
    ReadThenWrite,
    /// The earlier version is the initial one, which precedes every write.
    Initial,
    /// The writers' commit timestamps (white-box).
    CommitTs,
    /// The earlier version's writer committed before the later one's began: real-time order,
    /// evidence of version order only at strict serializability. An edge with this evidence
    /// needs real-time order, as a `realtime` edge does ([`GEdge::order_needed`]).
    RealTime,
}

/// One edge between graph nodes. For `ww` and `rw`, `a` and `b` are the two versions of `key`
/// that the edge orders; for `wr`, `a` is the version read.
#[derive(Clone, Copy, Debug)]
pub(super) struct GEdge {
    pub from: u32,
    pub to: u32,
    pub kind: EdgeKind,
    pub evidence: Evidence,
    pub key: u32,
    pub a: u32,
    pub b: u32,
}

impl GEdge {
    /// The orders a cycle through this edge needs besides the dependencies: session order for
    /// a `process` edge, real-time order for a `realtime` edge or a dependency drawn from
    /// real-time evidence.
    pub(super) fn order_needed(&self) -> CycleOrder {
        match (self.kind, self.evidence) {
            (EdgeKind::RealTime, _) | (_, Evidence::RealTime) => CycleOrder::RealTime,
            (EdgeKind::Process, _) => CycleOrder::Process,
            _ => CycleOrder::Dependencies,
        }
    }

    pub(super) fn order(from: u32, to: u32, kind: EdgeKind) -> GEdge {
        GEdge {
            from,
            to,
            kind,
            evidence: Evidence::List,
            key: NONE,
            a: NONE,
            b: NONE,
        }
    }
}

/// Compressed adjacency: node `u`'s successors are `to[off[u]..off[u + 1]]`, reached by the
/// edges `eid[...]` (ids the builder chose).
pub(super) struct Csr {
    pub off: Vec<u32>,
    pub to: Vec<u32>,
    pub eid: Vec<u32>,
}

impl Csr {
    /// Counting sort of `(from, to, eid)` triples by `from`.
    pub(super) fn build(n: usize, edges: &[(u32, u32, u32)]) -> Csr {
        let mut off = vec![0u32; n + 1];
        for &(f, _, _) in edges {
            off[f as usize + 1] += 1;
        }
        for i in 0..n {
            off[i + 1] += off[i];
        }
        let mut pos: Vec<u32> = off[..n].to_vec();
        let mut to = vec![0u32; edges.len()];
        let mut eid = vec![0u32; edges.len()];
        for &(f, t, e) in edges {
            let p = &mut pos[f as usize];
            to[*p as usize] = t;
            eid[*p as usize] = e;
            *p += 1;
        }
        Csr { off, to, eid }
    }

    pub(super) fn n(&self) -> usize {
        self.off.len() - 1
    }

    pub(super) fn range(&self, u: u32) -> std::ops::Range<usize> {
        self.off[u as usize] as usize..self.off[u as usize + 1] as usize
    }
}

/// The nodes of `g`'s strongly connected components of more than one node (where every cycle
/// lies), as `(component, node)` sorted by component: each component's members are one run.
pub(super) fn nontrivial_components(g: &Csr) -> Vec<(u32, u32)> {
    let (comp, ncomp) = tarjan(g);
    let mut size = vec![0u32; ncomp as usize];
    for &c in &comp {
        size[c as usize] += 1;
    }
    let mut members: Vec<(u32, u32)> = comp
        .iter()
        .enumerate()
        .filter(|&(_, &c)| size[c as usize] > 1)
        .map(|(u, &c)| (c, u as u32))
        .collect();
    members.sort_unstable();
    members
}

/// A topological order of `g`'s strongly connected components, by Kahn's algorithm taking first,
/// among the components ready, the one holding the lowest node (nodes are numbered in history
/// order, so the order follows the history where the edges leave it free). Returns each node's
/// rank: (its component's position, counting from 1, then the node itself).
pub(super) fn topological_ranks(g: &Csr) -> Vec<(u32, u32)> {
    let (comp, ncomp) = tarjan(g);
    let mut least = vec![u32::MAX; ncomp as usize];
    for (u, &c) in comp.iter().enumerate() {
        least[c as usize] = least[c as usize].min(u as u32);
    }
    let mut indegree = vec![0u32; ncomp as usize];
    let mut succ: Vec<Vec<u32>> = vec![Vec::new(); ncomp as usize];
    for u in 0..g.n() as u32 {
        for i in g.range(u) {
            let (cu, cv) = (comp[u as usize], comp[g.to[i] as usize]);
            if cu != cv {
                succ[cu as usize].push(cv);
                indegree[cv as usize] += 1;
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<(u32, u32)>> = (0..ncomp)
        .filter(|&c| indegree[c as usize] == 0)
        .map(|c| Reverse((least[c as usize], c)))
        .collect();
    let mut position = vec![0u32; ncomp as usize];
    let mut next = 1;
    while let Some(Reverse((_, c))) = ready.pop() {
        position[c as usize] = next;
        next += 1;
        for &d in &succ[c as usize] {
            indegree[d as usize] -= 1;
            if indegree[d as usize] == 0 {
                ready.push(Reverse((least[d as usize], d)));
            }
        }
    }
    comp.iter()
        .enumerate()
        .map(|(u, &c)| (position[c as usize], u as u32))
        .collect()
}

/// Strongly connected components. Returns each node's component and the number of components;
/// components are numbered in reverse topological order (every edge between two components
/// goes from a higher number to a lower one).
pub(super) fn tarjan(g: &Csr) -> (Vec<u32>, u32) {
    let n = g.n();
    let mut index = vec![NONE; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut comp = vec![NONE; n];
    let mut stack: Vec<u32> = Vec::new();
    // The explicit call stack: a node and the position of its next edge to follow.
    let mut call: Vec<(u32, u32)> = Vec::new();
    let mut next = 0u32;
    let mut ncomp = 0u32;
    for s in 0..n as u32 {
        if index[s as usize] != NONE {
            continue;
        }
        index[s as usize] = next;
        low[s as usize] = next;
        next += 1;
        stack.push(s);
        on_stack[s as usize] = true;
        call.push((s, g.off[s as usize]));
        while let Some(&mut (v, ref mut pos)) = call.last_mut() {
            if *pos < g.off[v as usize + 1] {
                let w = g.to[*pos as usize];
                *pos += 1;
                if index[w as usize] == NONE {
                    index[w as usize] = next;
                    low[w as usize] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w as usize] = true;
                    call.push((w, g.off[w as usize]));
                } else if on_stack[w as usize] {
                    low[v as usize] = low[v as usize].min(index[w as usize]);
                }
            } else {
                call.pop();
                if let Some(&(p, _)) = call.last() {
                    low[p as usize] = low[p as usize].min(low[v as usize]);
                }
                if low[v as usize] == index[v as usize] {
                    loop {
                        let w = stack.pop().expect("tarjan stack holds the component");
                        on_stack[w as usize] = false;
                        comp[w as usize] = ncomp;
                        if w == v {
                            break;
                        }
                    }
                    ncomp += 1;
                }
            }
        }
    }
    (comp, ncomp)
}

/// Breadth-first search over an implicit graph of `n` states, from `start` to the first state
/// `is_target` accepts. `succ(state, out)` pushes `(next state, edge id)` pairs. Returns the edge
/// ids along a shortest path.
pub(super) fn bfs(
    n: usize,
    start: u32,
    is_target: impl Fn(u32) -> bool,
    mut succ: impl FnMut(u32, &mut Vec<(u32, u32)>),
) -> Option<Vec<u32>> {
    let mut prev_state = vec![NONE; n];
    let mut prev_edge = vec![NONE; n];
    let mut visited = vec![false; n];
    let mut queue = std::collections::VecDeque::new();
    let mut buf = Vec::new();
    visited[start as usize] = true;
    queue.push_back(start);
    while let Some(s) = queue.pop_front() {
        if is_target(s) {
            let mut path = Vec::new();
            let mut cur = s;
            while cur != start {
                path.push(prev_edge[cur as usize]);
                cur = prev_state[cur as usize];
            }
            path.reverse();
            return Some(path);
        }
        buf.clear();
        succ(s, &mut buf);
        for &(next, e) in &buf {
            if !visited[next as usize] {
                visited[next as usize] = true;
                prev_state[next as usize] = s;
                prev_edge[next as usize] = e;
                queue.push_back(next);
            }
        }
    }
    None
}

/// A path from `src` to `dst` in `g` over nodes `allowed` accepts (`src` and `dst` included);
/// returns `g`'s edge ids. With `src == dst` the empty path.
pub(super) fn path(g: &Csr, src: u32, dst: u32, allowed: impl Fn(u32) -> bool) -> Option<Vec<u32>> {
    bfs(
        g.n(),
        src,
        |s| s == dst,
        |s, out| {
            for i in g.range(s) {
                if allowed(g.to[i]) {
                    out.push((g.to[i], g.eid[i]));
                }
            }
        },
    )
}

/// Batch reachability over the condensation of `g` (components `comp`, numbered as [`tarjan`]
/// numbers them): the first query `(from, to)` (nodes of `g`) with a path from `from` to `to`.
/// Sources are taken 64 at a time, one bit each, and the bits pushed along the condensation in
/// topological order, so the cost is the size of the condensation times the number of distinct
/// source components over 64.
pub(super) fn first_reachable(
    g: &Csr,
    comp: &[u32],
    ncomp: u32,
    queries: &[(u32, u32)],
) -> Option<usize> {
    if let Some(i) = queries
        .iter()
        .position(|&(f, t)| comp[f as usize] == comp[t as usize])
    {
        return Some(i);
    }
    // Condensation edges, highest source component first: a topological order.
    let mut cedges: Vec<(u32, u32)> = Vec::new();
    for u in 0..g.n() as u32 {
        for i in g.range(u) {
            let (cu, cv) = (comp[u as usize], comp[g.to[i] as usize]);
            if cu != cv {
                cedges.push((cu, cv));
            }
        }
    }
    cedges.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    cedges.dedup();
    let mut sources: Vec<u32> = queries.iter().map(|&(f, _)| comp[f as usize]).collect();
    sources.sort_unstable();
    sources.dedup();
    let mut bit_of = vec![NONE; ncomp as usize];
    let mut reach = vec![0u64; ncomp as usize];
    for chunk in sources.chunks(64) {
        reach.iter_mut().for_each(|r| *r = 0);
        for (i, &c) in chunk.iter().enumerate() {
            bit_of[c as usize] = i as u32;
            reach[c as usize] |= 1 << i;
        }
        for &(cu, cv) in &cedges {
            let r = reach[cu as usize];
            if r != 0 {
                reach[cv as usize] |= r;
            }
        }
        let hit = queries.iter().position(|&(f, t)| {
            let b = bit_of[comp[f as usize] as usize];
            b != NONE && reach[comp[t as usize] as usize] & (1 << b) != 0
        });
        for &c in chunk {
            bit_of[c as usize] = NONE;
        }
        if hit.is_some() {
            return hit;
        }
    }
    None
}
