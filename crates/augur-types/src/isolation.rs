//! Isolation levels: what a protocol claims (its registry entry) and what the isolation checker
//! (`augur-check`) verifies a recorded history against.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An isolation level: the guarantee a protocol claims, which the checker verifies histories
/// against. The checker reads a level as the set of anomalies it proscribes (`augur-check`'s
/// `Proscribes` trait); the doc of each level says which.
///
/// Serialised in kebab-case (`snapshot-isolation`); displayed in words (`snapshot isolation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IsolationLevel {
    /// No guarantee at all: nothing is proscribed, and the checker reports every anomaly it
    /// finds as allowed.
    None,
    /// Adya's PL-2: G0, G1a, G1b, G1c, plus internal consistency.
    ReadCommitted,
    /// Parallel snapshot isolation (PSI), Walter's guarantee (Sovran, Power, Aguilera and Li,
    /// *Transactional storage for geo-replicated systems*, SOSP 2011): a transaction reads a
    /// snapshot of its site holding every transaction committed there before it began (and
    /// everything those saw), and two transactions that write the same key are never concurrent,
    /// but sites may apply non-conflicting transactions in different orders. Cerone and Gotsman
    /// (*Analysing snapshot isolation*, PODC 2016; J. ACM, 2018) characterise its dependency
    /// graphs: every cycle has at least two anti-dependency (`rw`) edges, adjacent or not, where
    /// snapshot isolation needs two adjacent ones.
    ///
    /// Proscribed: everything read committed proscribes (G0, G1a, G1b, G1c, internal
    /// inconsistency, garbage reads); lost update and incompatible version orders (no two
    /// concurrent writers of one key, so each key has one order of versions); G-single (exactly
    /// one `rw` edge: read skew); and the `bank` invariants (snapshots are atomic and
    /// conflicting transfers are ordered). Allowed: G-nonadjacent, the *long fork* (T1 -rw-> T2
    /// -wr-> T4 -rw-> T3 -wr-> T1: two sites each commit one of two non-conflicting writes, and
    /// each site's reader sees its own site's write but not the other), which snapshot isolation
    /// proscribes; G2-item (write skew), as snapshot isolation allows it; and fractured reads
    /// reported on their own, as at snapshot isolation (among committed transactions a
    /// fractured read is also a G-single, which is proscribed).
    ///
    /// Orders: dependencies and session order, not real-time order. G0, G1c and G-single are
    /// proscribed in their `-process` variants too, and no `-realtime` cycle is. Walter's
    /// snapshot holds every transaction committed at the transaction's site before it began and
    /// a client stays at its site (a protocol claiming PSI must keep it there), so a client's
    /// transactions see its earlier ones; Cerone and Gotsman's PSI likewise includes session
    /// order in visibility (their axiom SESSION).
    /// Commits reach other sites asynchronously, so a transaction may miss one that finished
    /// earlier at another site, and a history does not record sites, so the checker cannot
    /// restrict real-time order to one site. (The checker's snapshot isolation checks no session
    /// order, so on that point alone PSI's claim is the stronger.)
    ParallelSnapshotIsolation,
    /// Read committed plus lost update, G-single and G-nonadjacent (every cycle needs two
    /// adjacent anti-dependencies).
    SnapshotIsolation,
    /// Speculative snapshot isolation, STR's SPSI (§5): snapshot isolation over committed
    /// transactions, and for every transaction, aborted ones included, an observed snapshot that
    /// is atomic (no fractured read) and isolated (never both of two concurrent writers of one
    /// key).
    Spsi,
    /// No dependency cycle at all.
    Serializable,
    /// Serializable, and no cycle with session order either: each client's transactions are
    /// serialized in the order it ran them, so it reads its own writes and never goes back in
    /// time, while real-time order between clients is not promised (DST §6, "session strict
    /// serializability": read-only transactions start at the session's last commit timestamp).
    SessionSerializable,
    /// No cycle even with session and real-time order.
    StrictSerializable,
}

impl IsolationLevel {
    /// Every level, roughly from the weakest up. Not a chain: parallel snapshot isolation allows
    /// cycles snapshot isolation proscribes but also checks session order, and SPSI constrains
    /// aborted transactions, which serializability does not.
    pub const ALL: [IsolationLevel; 8] = [
        IsolationLevel::None,
        IsolationLevel::ReadCommitted,
        IsolationLevel::ParallelSnapshotIsolation,
        IsolationLevel::SnapshotIsolation,
        IsolationLevel::Spsi,
        IsolationLevel::Serializable,
        IsolationLevel::SessionSerializable,
        IsolationLevel::StrictSerializable,
    ];
}

impl fmt::Display for IsolationLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IsolationLevel::None => "none",
            IsolationLevel::ReadCommitted => "read committed",
            IsolationLevel::ParallelSnapshotIsolation => "parallel snapshot isolation (PSI)",
            IsolationLevel::SnapshotIsolation => "snapshot isolation",
            IsolationLevel::Spsi => "speculative snapshot isolation (SPSI)",
            IsolationLevel::Serializable => "serializable",
            IsolationLevel::SessionSerializable => "session serializable",
            IsolationLevel::StrictSerializable => "strict serializable",
        })
    }
}

impl IsolationLevel {
    /// The names a level is read from ([`str::parse`]): its displayed name (`snapshot
    /// isolation`, with or without the parenthesised abbreviation), its serialised name
    /// (`snapshot-isolation`) and the abbreviation (`psi`, `spsi`).
    fn names(self) -> impl Iterator<Item = String> {
        let shown = self.to_string();
        let (words, abbreviation) = match shown.split_once(" (") {
            Some((words, rest)) => (
                words.to_string(),
                Some(rest.trim_end_matches(')').to_string()),
            ),
            None => (shown.clone(), None),
        };
        let serialised = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string));
        [Some(shown), Some(words), abbreviation, serialised]
            .into_iter()
            .flatten()
            .map(|name| normalise_level_name(&name))
    }
}

/// A level name with case, hyphens, underscores and repeated spaces made uniform.
fn normalise_level_name(name: &str) -> String {
    name.to_lowercase()
        .replace(['-', '_'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A level name that names no level; its message lists the names there are.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown isolation level '{0}'; the levels: {levels}",
    levels = IsolationLevel::ALL.map(|l| l.to_string()).join(", ")
)]
pub struct UnknownLevel(pub String);

impl std::str::FromStr for IsolationLevel {
    type Err = UnknownLevel;

    /// Reads any of the names `augur protocols` prints and histories record, in any case, with
    /// hyphens or spaces: `strict serializable`, `snapshot-isolation`, `PSI`.
    fn from_str(name: &str) -> Result<Self, UnknownLevel> {
        let wanted = normalise_level_name(name);
        IsolationLevel::ALL
            .into_iter()
            .find(|level| level.names().any(|n| n == wanted))
            .ok_or_else(|| UnknownLevel(name.trim().to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::IsolationLevel;

    #[test]
    fn reads_every_name_it_prints_or_serialises() {
        for level in IsolationLevel::ALL {
            assert_eq!(level.to_string().parse::<IsolationLevel>(), Ok(level));
            let serialised = serde_json::to_value(level).unwrap();
            assert_eq!(serialised.as_str().unwrap().parse(), Ok(level));
        }
        assert_eq!("PSI".parse(), Ok(IsolationLevel::ParallelSnapshotIsolation));
        assert_eq!(
            "  Strict_Serializable ".parse(),
            Ok(IsolationLevel::StrictSerializable)
        );
        assert_eq!(
            "speculative snapshot isolation".parse(),
            Ok(IsolationLevel::Spsi)
        );
        let unknown = "linearizable".parse::<IsolationLevel>().unwrap_err();
        assert!(
            unknown.to_string().contains("'linearizable'")
                && unknown
                    .to_string()
                    .contains("read committed, parallel snapshot"),
            "{unknown}"
        );
    }

    #[test]
    fn serialises_in_kebab_case_and_displays_in_words() {
        let names: Vec<String> = IsolationLevel::ALL
            .iter()
            .map(|l| serde_json::to_string(l).unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "\"none\"",
                "\"read-committed\"",
                "\"parallel-snapshot-isolation\"",
                "\"snapshot-isolation\"",
                "\"spsi\"",
                "\"serializable\"",
                "\"session-serializable\"",
                "\"strict-serializable\"",
            ]
        );
        let back: IsolationLevel = serde_json::from_str("\"snapshot-isolation\"").unwrap();
        assert_eq!(back, IsolationLevel::SnapshotIsolation);
        let back: IsolationLevel = serde_json::from_str("\"parallel-snapshot-isolation\"").unwrap();
        assert_eq!(back, IsolationLevel::ParallelSnapshotIsolation);
        assert_eq!(
            IsolationLevel::Spsi.to_string(),
            "speculative snapshot isolation (SPSI)"
        );
        assert_eq!(
            IsolationLevel::ParallelSnapshotIsolation.to_string(),
            "parallel snapshot isolation (PSI)"
        );
    }

    #[test]
    fn all_lists_every_level_once() {
        use IsolationLevel::*;
        for (i, level) in IsolationLevel::ALL.into_iter().enumerate() {
            // A new variant fails to compile here until it is given its place in `ALL`.
            let at = match level {
                None => 0,
                ReadCommitted => 1,
                ParallelSnapshotIsolation => 2,
                SnapshotIsolation => 3,
                Spsi => 4,
                Serializable => 5,
                SessionSerializable => 6,
                StrictSerializable => 7,
            };
            assert_eq!(at, i, "{level}");
        }
    }
}
