//! Anomalies, isolation levels ([`IsolationLevel`]) as the sets of anomalies they proscribe
//! ([`Proscribes`]), and check reports.
//!
//! The cycle anomalies follow Adya's thesis (*Weak Consistency*, 1999) as Elle (Kingsbury and
//! Alvaro, VLDB 2020) names them: G0 (write cycles), G1c (cycles of writes and reads),
//! G-single (exactly one anti-dependency), G-nonadjacent (several, never two in a row) and
//! G2-item (any other cycle with anti-dependencies). Each comes in three strengths, by the edges
//! the cycle needs: dependencies alone, dependencies plus session order ("process"), or plus
//! real-time order ("realtime").

use augur_types::IsolationLevel;
use serde::Serialize;
use std::fmt;

/// The kind of a dependency cycle, from the most to the least severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum CycleKind {
    /// Only write-write edges.
    G0,
    /// Write-write and write-read edges, at least one write-read.
    G1c,
    /// Exactly one read-write (anti-dependency) edge.
    GSingle,
    /// Two or more read-write edges, no two of them adjacent.
    GNonadjacent,
    /// Read-write edges, at least two of them adjacent.
    G2Item,
}

/// Which orders a cycle needs besides the data dependencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum CycleOrder {
    /// ww, wr and rw edges only.
    Dependencies,
    /// Needs at least one session-order edge (a client's transactions in the order it ran them).
    Process,
    /// Needs at least one real-time edge (one transaction finished before the other began).
    RealTime,
}

/// Everything the checker can report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum AnomalyKind {
    /// A dependency cycle.
    Cycle(CycleKind, CycleOrder),
    /// G1a: a committed transaction read a value written by an aborted one.
    AbortedRead,
    /// G1b: a committed transaction read a value its writer later overwrote itself.
    IntermediateRead,
    /// A transaction read something inconsistent with its own earlier writes.
    Internal,
    /// A read returned a value that no transaction ever wrote.
    GarbageRead,
    /// Two committed transactions read the same version of a key and both wrote the key.
    LostUpdate,
    /// The versions of a key cannot be put in one order (for list-append: two lists, neither a
    /// prefix of the other, that are not explained as a lost update).
    IncompatibleOrder,
    /// A transaction observed part of another transaction's writes but an older version of
    /// another key that transaction wrote (a non-atomic snapshot; SPSI applies this to aborted
    /// transactions too).
    FracturedRead,
    /// A transaction observed the writes of two concurrent transactions that wrote the same key
    /// (SPSI's isolated snapshot).
    ConflictingWritersObserved,
    /// `bank`: an observation of all accounts whose sum is not the constant total.
    BankTotal,
    /// `bank`: a balance below zero.
    NegativeBalance,
}

impl AnomalyKind {
    /// The stable name used in reports (`G-single-realtime`, `G1a`, `lost-update`, ...).
    pub fn name(self) -> String {
        match self {
            AnomalyKind::Cycle(kind, order) => {
                let base = match kind {
                    CycleKind::G0 => "G0",
                    CycleKind::G1c => "G1c",
                    CycleKind::GSingle => "G-single",
                    CycleKind::GNonadjacent => "G-nonadjacent",
                    CycleKind::G2Item => "G2-item",
                };
                match order {
                    CycleOrder::Dependencies => base.to_string(),
                    CycleOrder::Process => format!("{base}-process"),
                    CycleOrder::RealTime => format!("{base}-realtime"),
                }
            }
            AnomalyKind::AbortedRead => "G1a".into(),
            AnomalyKind::IntermediateRead => "G1b".into(),
            AnomalyKind::Internal => "internal".into(),
            AnomalyKind::GarbageRead => "garbage-read".into(),
            AnomalyKind::LostUpdate => "lost-update".into(),
            AnomalyKind::IncompatibleOrder => "incompatible-order".into(),
            AnomalyKind::FracturedRead => "fractured-read".into(),
            AnomalyKind::ConflictingWritersObserved => "conflicting-writers-observed".into(),
            AnomalyKind::BankTotal => "bank-total".into(),
            AnomalyKind::NegativeBalance => "negative-balance".into(),
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// An isolation level read as the set of anomalies it proscribes: the checker's own definition of
/// each [`IsolationLevel`] (whose docs say the same in words).
pub trait Proscribes: Copy {
    /// Whether a history showing `kind` violates this level.
    fn proscribes(self, kind: AnomalyKind) -> bool;

    /// Whether the checker must also examine aborted transactions' observations.
    fn constrains_aborted(self) -> bool;
}

impl Proscribes for IsolationLevel {
    fn proscribes(self, kind: AnomalyKind) -> bool {
        use AnomalyKind::*;
        use CycleKind::{G0, G1c, G2Item, GNonadjacent, GSingle};
        use CycleOrder::{Dependencies, Process};
        let rc = matches!(
            kind,
            AbortedRead | IntermediateRead | Internal | GarbageRead
        ) || matches!(kind, Cycle(G0 | G1c, Dependencies));
        // What every snapshot level adds to read committed: no two concurrent writers of a key
        // (one order of its versions, no lost update) and atomic snapshots (the bank's
        // invariants).
        let snapshot = rc
            || matches!(
                kind,
                LostUpdate | IncompatibleOrder | BankTotal | NegativeBalance
            );
        let si = snapshot || matches!(kind, Cycle(GSingle | GNonadjacent, Dependencies));
        match self {
            IsolationLevel::None => false,
            // Read committed allows the fractured observations and lost updates that break the
            // bank's invariants, so only the snapshot levels proscribe those.
            IsolationLevel::ReadCommitted => rc,
            // Every cycle needs two rw edges, adjacent or not; session order counts as a
            // dependency, real-time order does not (see the level's doc).
            IsolationLevel::ParallelSnapshotIsolation => {
                snapshot || matches!(kind, Cycle(G0 | G1c | GSingle, Dependencies | Process))
            }
            IsolationLevel::SnapshotIsolation => si,
            IsolationLevel::Spsi => {
                si || matches!(kind, FracturedRead | ConflictingWritersObserved)
            }
            IsolationLevel::Serializable => si || matches!(kind, Cycle(G2Item, Dependencies)),
            IsolationLevel::SessionSerializable => {
                si || matches!(kind, Cycle(_, Dependencies | Process))
            }
            IsolationLevel::StrictSerializable => si || matches!(kind, Cycle(..)),
        }
    }

    fn constrains_aborted(self) -> bool {
        matches!(self, IsolationLevel::Spsi)
    }
}

/// One edge of a dependency graph, as reported in an anomaly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    /// `ww`, `wr`, `rw`, `process` or `realtime`.
    pub kind: &'static str,
    /// The key the dependency is on (none for order edges).
    pub key: Option<String>,
    /// Why the edge exists, in words.
    pub why: String,
}

/// One anomaly found, with the evidence a person needs to follow it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    /// Whether the level checked against forbids it.
    pub proscribed: bool,
    /// The history indices of the transactions involved.
    pub txns: Vec<usize>,
    pub keys: Vec<String>,
    /// For cycles: the edges, in cycle order.
    pub edges: Vec<Edge>,
    /// A self-contained explanation.
    pub explanation: String,
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}: {}",
            self.kind,
            if self.proscribed { "" } else { " (allowed)" },
            self.explanation
        )?;
        for e in &self.edges {
            write!(f, "\n    T{} -{}-> T{}: {}", e.from, e.kind, e.to, e.why)?;
        }
        Ok(())
    }
}

/// Counts describing what was checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CheckStats {
    pub txns: usize,
    pub committed: usize,
    pub aborted: usize,
    pub unknown: usize,
    /// Unknown-outcome transactions whose writes were observed, hence treated as committed.
    pub unknown_observed: usize,
    /// Attempts whose operations are unknown (one-shot attempts whose reply was lost).
    pub ops_unknown: usize,
    /// List elements no recorded operation appended, while some attempt's operations are
    /// unknown: each got an *unknown writer* standing in for the attempt that appended it,
    /// named in reports by a history index at or past the number of attempts recorded.
    pub unknown_writers: usize,
    pub edges: usize,
    /// Unordered pairs of writes (or of read-then-write chains) whose place in a key's version
    /// order no evidence fixes: the choices of the polygraph (`checker::polygraph`).
    pub choices: usize,
    /// Choices decided by pruning: one placement closes a proscribed cycle with the edges
    /// already known.
    pub pruned: usize,
    /// Independent instances left to the search after pruning.
    pub instances: usize,
    /// Instances that reached the SAT solver (neither the known edges nor the greedy placement
    /// decided them).
    pub solver_runs: usize,
    /// Cycles the solver's theory returned to it as lemmas, each ruling out the placements
    /// that hold its options.
    pub lemmas: usize,
}

/// A part of the history the checker could not decide within its budget: whether some
/// placement of writes whose place in a key's version order is unknown avoids every anomaly the
/// level proscribes. Never a pass: a report holding one is not valid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Undecided {
    /// The history indices of the transactions whose writes were being placed.
    pub txns: Vec<usize>,
    pub keys: Vec<String>,
    /// What was left undecided, and which budget ran out.
    pub explanation: String,
}

impl fmt::Display for Undecided {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "undecided: {}", self.explanation)
    }
}

/// A check's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// No anomaly the level proscribes.
    Valid,
    /// At least one anomaly the level proscribes.
    Invalid,
    /// No proscribed anomaly found, but part of the history was not decided within the
    /// checker's budget ([`CheckReport::undecided`]).
    Undecided,
}

/// The result of checking one history.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CheckReport {
    pub stats: CheckStats,
    /// Every anomaly found, proscribed or not (bounded per kind).
    pub anomalies: Vec<Anomaly>,
    /// What the checker could not decide within its budget; empty when it decided everything.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub undecided: Vec<Undecided>,
}

impl CheckReport {
    /// The anomalies the level forbids.
    pub fn violations(&self) -> impl Iterator<Item = &Anomaly> {
        self.anomalies.iter().filter(|a| a.proscribed)
    }

    /// No proscribed anomaly, and nothing left undecided: an undecided check never passes.
    pub fn is_valid(&self) -> bool {
        self.verdict() == Verdict::Valid
    }

    /// Invalid when some proscribed anomaly was found (whatever else is undecided), else
    /// undecided when something is, else valid.
    pub fn verdict(&self) -> Verdict {
        if self.violations().next().is_some() {
            Verdict::Invalid
        } else if !self.undecided.is_empty() {
            Verdict::Undecided
        } else {
            Verdict::Valid
        }
    }

    /// Append `other`'s anomalies (used to combine a workload's invariant checks with the graph
    /// check).
    pub fn merge(&mut self, other: CheckReport) {
        self.anomalies.extend(other.anomalies);
        self.undecided.extend(other.undecided);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [CycleKind; 5] = [
        CycleKind::G0,
        CycleKind::G1c,
        CycleKind::GSingle,
        CycleKind::GNonadjacent,
        CycleKind::G2Item,
    ];
    const ORDERS: [CycleOrder; 3] = [
        CycleOrder::Dependencies,
        CycleOrder::Process,
        CycleOrder::RealTime,
    ];

    /// The cycle search (`checker::cycles`) stops looking for a kind once a more severe kind, or
    /// the same kind with fewer orders, is found. That is sound only if every level proscribes a
    /// more severe kind, and a kind needing fewer orders, at least as strictly.
    #[test]
    fn every_level_is_monotone_in_cycle_severity_and_orders() {
        for level in IsolationLevel::ALL {
            for (i, &k) in KINDS.iter().enumerate() {
                for (j, &o) in ORDERS.iter().enumerate() {
                    let p = level.proscribes(AnomalyKind::Cycle(k, o));
                    for &weaker in &KINDS[i..] {
                        for &more in &ORDERS[j..] {
                            let q = level.proscribes(AnomalyKind::Cycle(weaker, more));
                            assert!(p || !q, "{level}: {k:?}/{o:?} vs {weaker:?}/{more:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn parallel_snapshot_isolation_needs_two_rw_edges_in_every_cycle() {
        let psi = IsolationLevel::ParallelSnapshotIsolation;
        for k in KINDS {
            for o in ORDERS {
                let expect = matches!(k, CycleKind::G0 | CycleKind::G1c | CycleKind::GSingle)
                    && o != CycleOrder::RealTime;
                assert_eq!(
                    psi.proscribes(AnomalyKind::Cycle(k, o)),
                    expect,
                    "{k:?}/{o:?}"
                );
            }
        }
        use AnomalyKind::*;
        for kind in [
            AbortedRead,
            IntermediateRead,
            Internal,
            GarbageRead,
            LostUpdate,
            IncompatibleOrder,
            BankTotal,
            NegativeBalance,
        ] {
            assert!(psi.proscribes(kind), "{kind}");
        }
        for kind in [FracturedRead, ConflictingWritersObserved] {
            assert!(!psi.proscribes(kind), "{kind}");
        }
        assert!(!psi.constrains_aborted());
        // Weaker than snapshot isolation in the cycles it allows, never in anything else.
        let si = IsolationLevel::SnapshotIsolation;
        let nonadjacent = Cycle(CycleKind::GNonadjacent, CycleOrder::Dependencies);
        assert!(si.proscribes(nonadjacent) && !psi.proscribes(nonadjacent));
        for kind in [LostUpdate, IncompatibleOrder, BankTotal, NegativeBalance] {
            assert_eq!(psi.proscribes(kind), si.proscribes(kind), "{kind}");
        }
    }
}
