//! The run-time protocol registry. Adding a protocol means writing its module and adding one
//! entry to [`PROTOCOLS`] and one arm to [`visit`].

use augur_runtime::Protocol;
use serde::Serialize;
use std::fmt;

/// The isolation level a protocol claims; the checker verifies histories against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IsolationLevel {
    /// No guarantee at all.
    None,
    ReadCommitted,
    SnapshotIsolation,
    /// Speculative snapshot isolation (STR §5).
    Spsi,
    Serializable,
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

/// What `augur protocols` prints about a protocol.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ProtocolInfo {
    pub name: &'static str,
    pub isolation: IsolationLevel,
    pub paper: &'static str,
    pub summary: &'static str,
    /// Whether commit timestamps order each key's versions, so the checker may use them as
    /// (white-box) evidence of version order.
    pub commit_order_evidence: bool,
    /// What the protocol assumes of the network, hence which faults `augur check` may inject.
    pub network: NetworkModel,
    /// Deliberately broken variants (`augur check --mutant NAME`) and what each breaks.
    pub mutants: &'static [(&'static str, &'static str)],
}

/// What a protocol needs from the links between nodes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct NetworkModel {
    /// It stays correct (and recovers) when messages are lost.
    pub tolerates_loss: bool,
    /// It stays correct when a link delivers messages out of order.
    pub tolerates_reordering: bool,
}

/// Every implemented protocol, in the order `augur protocols` lists them.
pub const PROTOCOLS: &[ProtocolInfo] = &[
    ProtocolInfo {
        name: "nocc",
        isolation: IsolationLevel::None,
        paper: "baseline (upper bound for overhead ratios)",
        summary: "no concurrency control: reads the latest version, writes blindly; incorrect by design",
        commit_order_evidence: false,
        network: NetworkModel {
            tolerates_loss: true,
            tolerates_reordering: true,
        },
        mutants: &[],
    },
    ProtocolInfo {
        name: "clocksi-rep",
        isolation: IsolationLevel::SnapshotIsolation,
        paper: "STR §6.1 (Clock-SI with synchronous master-slave replication)",
        summary: "physical-clock snapshots, 2PC certification at masters, replicated prepares",
        commit_order_evidence: true,
        network: NetworkModel {
            tolerates_loss: true,
            tolerates_reordering: true,
        },
        mutants: crate::clocksi_rep::MUTANTS,
    },
    ProtocolInfo {
        name: "str",
        isolation: IsolationLevel::Spsi,
        paper: "STR §5-6, Algorithms 1-2 (speculative snapshot isolation)",
        summary: "clocksi-rep plus local commit, speculative reads of same-node local-committed versions, speculative commits, PreciseClock",
        commit_order_evidence: true,
        network: NetworkModel {
            tolerates_loss: true,
            tolerates_reordering: true,
        },
        mutants: crate::str::MUTANTS,
    },
    ProtocolInfo {
        name: "planet",
        isolation: IsolationLevel::SnapshotIsolation,
        paper: "STR §8 baseline (PLANET-style speculative commit over ClockSI-Rep)",
        summary: "clocksi-rep plus the speculative commit of at most one transaction per client; no speculative reads",
        commit_order_evidence: true,
        network: NetworkModel {
            tolerates_loss: true,
            tolerates_reordering: true,
        },
        mutants: &[],
    },
];

/// Protocols of the five papers (and their baselines) that augur will host but does not
/// implement yet, with where each comes from. Experiment files may name them; runs skip them
/// with a message rather than failing.
pub const PLANNED: &[(&str, &str)] = &[
    (
        "sss",
        "SSS: external consistency, abort-free read-only transactions",
    ),
    ("2pc-baseline", "SSS §V baseline: single-version 2PC"),
    ("walter", "SSS §V baseline: Walter (PSI)"),
    ("rococo", "SSS §V baseline: ROCOCO"),
    ("dst-occ", "DST over OCC"),
    ("dst-2pl", "DST over 2PL"),
    ("gts", "DST baseline: timestamp oracle"),
    ("vts", "DST baseline: vector timestamps"),
    (
        "rc",
        "DST baseline: read committed (fast, incorrect upper bound)",
    ),
    ("occ", "DST baseline: vanilla OCC"),
    ("2pl", "DST baseline: vanilla 2PL"),
    (
        "sparkle",
        "Sparkle: speculative deterministic concurrency control",
    ),
    ("calvin", "Sparkle baseline: Calvin"),
    ("s-smr", "Sparkle baseline: S-SMR"),
    (
        "oab-spec",
        "speculative replication over optimistic atomic broadcast",
    ),
    (
        "oab-smr",
        "OAB study baseline: non-speculative state-machine replication",
    ),
];

/// Whether `name` is a planned, not yet implemented protocol (and where it comes from).
pub fn planned(name: &str) -> Option<&'static str> {
    PLANNED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, what)| *what)
}

/// Something to do with a protocol type chosen by name at run time.
pub trait ProtocolVisitor {
    type Output;
    fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> Self::Output;
}

/// A protocol name that is not registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown protocol '{name}'; valid protocols: {valid}")]
pub struct UnknownProtocol {
    pub name: String,
    pub valid: String,
}

pub fn info(name: &str) -> Result<&'static ProtocolInfo, UnknownProtocol> {
    PROTOCOLS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| UnknownProtocol {
            name: name.to_string(),
            valid: PROTOCOLS
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Call `visitor.visit::<P>()` with the protocol type registered under `name`.
pub fn visit<V: ProtocolVisitor>(name: &str, visitor: V) -> Result<V::Output, UnknownProtocol> {
    let info = info(name)?;
    Ok(match info.name {
        "nocc" => visitor.visit::<crate::nocc::Nocc>(info),
        "clocksi-rep" => visitor.visit::<crate::clocksi_rep::ClockSiRep>(info),
        "str" => visitor.visit::<crate::str::Str>(info),
        "planet" => visitor.visit::<crate::planet::Planet>(info),
        other => unreachable!("protocol '{other}' is listed but has no registry arm"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Name;
    impl ProtocolVisitor for Name {
        type Output = &'static str;
        fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> &'static str {
            info.name
        }
    }

    #[test]
    fn every_listed_protocol_resolves() {
        for p in PROTOCOLS {
            assert_eq!(visit(p.name, Name).unwrap(), p.name);
        }
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let err = visit("spanner", Name).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown protocol 'spanner'; valid protocols: nocc, clocksi-rep, str, planet"
        );
    }
}
