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
    /// No cycle even with session and real-time order.
    StrictSerializable,
}

impl fmt::Display for IsolationLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IsolationLevel::None => "none",
            IsolationLevel::ReadCommitted => "read committed",
            IsolationLevel::SnapshotIsolation => "snapshot isolation",
            IsolationLevel::Spsi => "speculative snapshot isolation (SPSI)",
            IsolationLevel::Serializable => "serializable",
            IsolationLevel::StrictSerializable => "strict serializable",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::IsolationLevel;

    #[test]
    fn serialises_in_kebab_case_and_displays_in_words() {
        use IsolationLevel::*;
        let levels = [
            None,
            ReadCommitted,
            SnapshotIsolation,
            Spsi,
            Serializable,
            StrictSerializable,
        ];
        let names: Vec<String> = levels
            .iter()
            .map(|l| serde_json::to_string(l).unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "\"none\"",
                "\"read-committed\"",
                "\"snapshot-isolation\"",
                "\"spsi\"",
                "\"serializable\"",
                "\"strict-serializable\"",
            ]
        );
        let back: IsolationLevel = serde_json::from_str("\"snapshot-isolation\"").unwrap();
        assert_eq!(back, IsolationLevel::SnapshotIsolation);
        assert_eq!(
            IsolationLevel::Spsi.to_string(),
            "speculative snapshot isolation (SPSI)"
        );
    }
}
