//! What a protocol says about itself: the vocabulary of the registry. Each protocol module
//! describes itself in a `pub const INFO: ProtocolInfo` (its name, claimed level, paper, engine,
//! the settings it takes, the request forms it serves and the speculation it offers) with the
//! types here, which import no protocol; the list of protocols, which imports every one, is
//! [`crate::registry`], above them all.

use augur_contract::log_policy;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// The isolation level a protocol claims; the checker verifies histories against it. Defined in
/// `augur-types`, shared with the checker, and re-exported here.
pub use augur_types::IsolationLevel;

/// What `augur protocols` prints about a protocol.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ProtocolInfo {
    pub name: &'static str,
    /// The level it claims under its default settings.
    pub isolation: IsolationLevel,
    /// Settings under which it claims another level: (setting, value, level). The claim under
    /// given settings is [`ProtocolInfo::claim`].
    pub isolation_with: &'static [(&'static str, &'static str, IsolationLevel)],
    pub paper: &'static str,
    pub summary: &'static str,
    /// The shared machinery it runs on, or [`Engine::Own`].
    pub engine: Engine,
    /// Whether commit timestamps order each key's versions, so the checker may use them as
    /// (white-box) evidence of version order.
    pub commit_order_evidence: bool,
    /// What the protocol promises beyond its isolation level, each checked by `augur check`
    /// on every recorded history ([`Promise`]).
    pub promises: &'static [Promise],
    /// What the protocol assumes of the network, hence which faults `augur check` may inject.
    pub network: NetworkModel,
    /// Deliberately broken variants (`augur check --mutant NAME`) and what each breaks. A
    /// description starting with [`SCENARIO_ONLY`] names a mutant whose anomaly needs a timing
    /// the randomized `augur check` workloads do not reach: the protocol's scenario tests show
    /// it instead. One starting with [`MASKED`] names a mechanism of the paper whose hole
    /// another mechanism of the implementation also closes, so that nothing fails without it;
    /// its description says which, and the protocol's docs say why. One starting with
    /// [`UNPROVEN`] names a mutant nothing has been shown to catch yet.
    pub mutants: &'static [(&'static str, &'static str)],
    /// The protocol-specific settings it accepts (`--set protocol.NAME=VALUE`, or
    /// `[options.settings]` in a cluster file).
    pub settings: &'static [SettingInfo],
    /// How much its clients may speculate; `None` for a protocol that never does.
    pub speculation: Option<SpeculationOffer>,
    /// The forms of client request it serves.
    pub forms: &'static [RequestForm],
}

/// The request forms, defined with the runtime that refuses a form a protocol does not serve.
pub use augur_contract::{
    forms::INTERACTIVE_AND_ONE_SHOT, forms::INTERACTIVE_ONLY, forms::RequestForm,
};

/// A property a protocol promises beyond its isolation level, which `augur check` verifies on
/// every history it records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Promise {
    /// Read-only transactions never abort because of other transactions: no read-only attempt
    /// aborts for any reason but a failure (`Timeout`, `TransactionLost`, and under fail-over
    /// `Reconfigured`) or an outlived snapshot (`SnapshotTooOld`) (SSS §III, DST).
    AbortFreeReadOnly,
    /// An update that a read-only transaction did not see (it overwrote a version the reader
    /// read) is acknowledged to its client no earlier than the reader is (SSS §III-B's
    /// snapshot-queues). Checked on `list-append`, where a read shows which appends it missed.
    MissedWriterRepliesAfterReader,
    /// Every dependency (`ww`, `wr`, `rw`) between committed transactions goes to a later
    /// commit timestamp; a read-only transaction records its read timestamp as its `commit_ts`,
    /// may read a version stamped with it, and returns per key the newest version stamped at or
    /// below it (DST §3.3, Lemmas 1 and 2). The version order comes from the workload's values,
    /// never from the timestamps judged (`augur_check::timestamps_order_dependencies`).
    /// Checked on `list-append` and `rw-register`.
    TimestampsOrderDependencies,
    /// A read-only transaction invoked at least Δ after an update's client heard of its commit
    /// reads that update's version of each key or a later one; Δ is twice the largest
    /// difference between two nodes' clocks, plus one clock tick (DST §3.4;
    /// `augur_check::bounded_staleness`). Checked on `list-append` and `rw-register`.
    BoundedStaleness,
    /// Commit timestamps are positions in one total order, and running the committed
    /// procedures again one at a time in that order, from the names and arguments the history
    /// recorded, gives every client's results and the replicas' final state (the
    /// order-then-execute protocols; `augur::serial_replay`). Checked on every workload.
    SerialReplay,
}

/// The machinery a protocol is built on: one of the engines in `common/`, which several
/// protocols fill in with their papers' rules, or a module of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// `common::two_phase`: reads at snapshots, two-phase commit with certification at
    /// partition masters and synchronous master–slave replication of prepares and decisions.
    TwoPhase,
    /// `common::lock_commit`: single-version lock-and-2PC, its flavours choosing where reads
    /// go, which locks are taken when, whether validation follows and which timestamp scheme
    /// gives commit timestamps.
    LockCommit,
    /// `common::ordered`: order-then-execute over the Raft sequencer (`common::sequencer`) and
    /// deterministic dispatch.
    Ordered,
    /// `common::replicated`: every node runs every one-shot request, committed in the Raft
    /// sequencer's final order (full replication over optimistic atomic broadcast).
    Replicated,
    /// Its own module, sharing only smaller pieces of `common/`.
    Own,
    /// Not augur's: a database server that `augur bench` drives as a client (the PostgreSQL
    /// reference peers).
    External,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Engine::TwoPhase => "common::two_phase",
            Engine::LockCommit => "common::lock_commit",
            Engine::Ordered => "common::ordered",
            Engine::Replicated => "common::replicated",
            Engine::Own => "own module",
            Engine::External => "external server",
        })
    }
}

/// How a mutant's description starts when only scenario tests show its anomaly.
pub const SCENARIO_ONLY: &str = "[scenario]";

/// How a mutant's description starts when another mechanism masks what it removes.
pub const MASKED: &str = "[masked]";

/// How a mutant's description starts when no test has been shown to catch it yet: neither the
/// randomized `augur check` runs nor a scenario test. Such a mutant is a known gap in what the
/// checker is shown to find, listed so that it stays visible.
pub const UNPROVEN: &str = "[unproven]";

/// The speculation a protocol offers its clients (see `augur_client::Degree`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SpeculationOffer {
    /// Transactions may read versions that only committed locally.
    pub reads: bool,
    /// The longest chain of unresolved speculative commits a client may have.
    pub max_chain: u32,
    /// The degree clients use unless told otherwise: `auto` (self-tuned) or a fixed degree.
    pub default: &'static str,
}

impl ProtocolInfo {
    /// The level it claims under `settings` (its protocol settings, unset ones at their
    /// defaults): the first of [`isolation_with`](ProtocolInfo::isolation_with) they select,
    /// else [`isolation`](ProtocolInfo::isolation).
    pub fn claim(&self, settings: &BTreeMap<String, String>) -> IsolationLevel {
        self.isolation_with
            .iter()
            .find(|(name, value, _)| settings.get(*name).is_some_and(|v| v == value))
            .map_or(self.isolation, |(_, _, level)| *level)
    }

    /// Its claim under default settings, followed by each other claim with the setting that
    /// selects it: "serializable; strict serializable with `read_only=ordered`".
    pub fn claims_description(&self) -> String {
        let mut text = self.isolation.to_string();
        for (name, value, level) in self.isolation_with {
            text.push_str(&format!("; {level} with `{name}={value}`"));
        }
        text
    }

    /// Whether a transaction that reads reaches it only in the one-shot form: a protocol that
    /// orders whole transactions through its sequencer before running them takes an
    /// interactive transaction only as blind writes.
    pub fn reads_only_one_shot(&self) -> bool {
        self.sequencer()
    }

    /// Whether it orders transactions through the Raft sequencer (`common::sequencer`), whose
    /// leader `augur check`'s `leader-crash` fault crashes: the order-then-execute engine's
    /// protocols.
    pub fn sequencer(&self) -> bool {
        matches!(self.engine, Engine::Ordered | Engine::Replicated)
    }

    /// Whether every node must hold every partition: the protocol replicates the whole
    /// database to every node (`common::replicated`).
    pub fn full_replication(&self) -> bool {
        self.engine == Engine::Replicated
    }

    /// The request forms it serves, as `augur protocols` and the protocol table say them.
    pub fn forms_description(&self) -> String {
        if self.reads_only_one_shot() {
            format!(
                "{}; {} for blind writes only",
                RequestForm::OneShot,
                RequestForm::Interactive
            )
        } else {
            let forms: Vec<String> = self.forms.iter().map(|f| f.to_string()).collect();
            forms.join(", ")
        }
    }

    /// Check `settings` (protocol settings by name, without the `protocol.` prefix) against
    /// what this protocol accepts: every name must be one of [`ProtocolInfo::settings`] and
    /// every value one of its accepted values. Settings left out take their defaults.
    pub fn validate_settings(
        &self,
        settings: &BTreeMap<String, String>,
    ) -> Result<(), SettingError> {
        for (name, value) in settings {
            let Some(setting) = self.all_settings().find(|s| s.name == name) else {
                return Err(SettingError::Unknown {
                    protocol: self.name,
                    name: name.clone(),
                    valid: self
                        .all_settings()
                        .map(SettingInfo::to_string)
                        .collect::<Vec<_>>()
                        .join("; "),
                });
            };
            if !setting.accepts(value) {
                return Err(SettingError::BadValue {
                    protocol: self.name,
                    name: name.clone(),
                    value: value.clone(),
                    accepted: setting.values.join(", "),
                });
            }
        }
        Ok(())
    }
}

impl fmt::Display for SpeculationOffer {
    /// `reads and commits, chains of up to 4 (default auto)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.reads {
            "reads and commits"
        } else {
            "commits"
        };
        write!(
            f,
            "{what}, chains of up to {} (default {})",
            self.max_chain, self.default
        )
    }
}

impl ProtocolInfo {
    /// [`ProtocolInfo::validate_settings`], every setting that names a node
    /// ([`NODE_ID_VALUES`]) names one of the cluster's `nodes` nodes, and a protocol that
    /// replicates the whole database to every node ([`ProtocolInfo::full_replication`]) has
    /// a replication factor of `nodes`.
    pub fn validate_for_cluster(
        &self,
        settings: &BTreeMap<String, String>,
        nodes: usize,
        replication: usize,
    ) -> Result<(), SettingError> {
        self.validate_settings(settings)?;
        if self.full_replication() && replication != nodes {
            return Err(SettingError::PartialReplication {
                protocol: self.name,
                nodes,
                replication,
            });
        }
        for (name, value) in settings {
            let names_node = self
                .all_settings()
                .any(|s| s.name == name && s.values == NODE_ID_VALUES);
            let node: Option<usize> = value.parse().ok();
            if names_node && node.is_none_or(|n| n >= nodes) {
                return Err(SettingError::NoSuchNode {
                    protocol: self.name,
                    name: name.clone(),
                    value: value.clone(),
                    nodes,
                });
            }
        }
        Ok(())
    }

    /// Its own settings, then those every protocol takes ([`RUNTIME_SETTINGS`]).
    /// Whether its masters fail over (`docs/architecture/availability.md`): it takes the
    /// `failover` setting.
    pub fn fails_over(&self) -> bool {
        self.settings
            .iter()
            .any(|s| s.name == crate::common::membership::FAILOVER)
    }

    /// Whether masters fail over in a run with protocol `settings`: the protocol takes the
    /// `failover` setting and it is on, as given or by the protocol's default (off for `sss`).
    pub fn fails_over_with(&self, settings: &BTreeMap<String, String>) -> bool {
        use crate::common::membership::FAILOVER;
        let Some(setting) = self.settings.iter().find(|s| s.name == FAILOVER) else {
            return false;
        };
        let value = settings
            .get(FAILOVER)
            .map_or(setting.default, String::as_str);
        switch(value).unwrap_or(false)
    }

    pub fn all_settings(&self) -> impl Iterator<Item = &'static SettingInfo> {
        self.settings.iter().chain(RUNTIME_SETTINGS)
    }
}

/// Settings every protocol takes, because the runtime acts on them.
pub const RUNTIME_SETTINGS: &[SettingInfo] = &[
    SettingInfo {
        name: log_policy::LOG_SETTING,
        values: log_policy::LOG_VALUES,
        default: "always (off in augur bench)",
        doc: "when the write-ahead log is synced: after every write, at most every MS milliseconds (batch: 2), or never",
    },
    SettingInfo {
        name: augur_contract::WORKER_THREADS_SETTING,
        values: COUNT_VALUES,
        default: "one per core",
        doc: "how many threads a node's worker pool has, where protocols that hand work off (`calvin`, `sparkle`) run it, in process and over TCP (the simulator models cores instead: `sim.cores`)",
    },
];

/// The values of a setting that counts something: a whole number above 0.
pub const COUNT_VALUES: &[&str] = &["<count>"];

/// One protocol-specific setting and what it accepts.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SettingInfo {
    pub name: &'static str,
    /// Every value accepted, compared ignoring ASCII case.
    pub values: &'static [&'static str],
    /// The value in force when the setting is not given.
    pub default: &'static str,
    /// What the setting does, in one line.
    pub doc: &'static str,
}

impl SettingInfo {
    /// Whether `value` is one this setting accepts.
    pub fn accepts(&self, value: &str) -> bool {
        if self.name == log_policy::LOG_SETTING {
            return log_policy::LogPolicy::parse(value).is_ok();
        }
        if self.values == NODE_ID_VALUES {
            return value.parse::<u32>().is_ok();
        }
        if self.values == COUNT_VALUES {
            return value.parse::<std::num::NonZeroUsize>().is_ok();
        }
        self.values.iter().any(|v| v.eq_ignore_ascii_case(value))
    }
}

impl fmt::Display for SettingInfo {
    /// `name=a|b (default a): doc`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={} (default {}): {}",
            self.name,
            self.values.join("|"),
            self.default,
            self.doc
        )
    }
}

/// The values of a setting that names a node: a node id, which
/// [`ProtocolInfo::validate_for_cluster`] checks against the cluster.
pub const NODE_ID_VALUES: &[&str] = &["<node id>"];

/// The values an on/off setting accepts; [`switch`] reads them.
pub const SWITCH_VALUES: &[&str] = &["on", "off", "true", "false"];

/// The meaning of an on/off setting's value: `on`/`true` or `off`/`false`, ignoring ASCII case;
/// `None` for anything else.
pub fn switch(value: &str) -> Option<bool> {
    if ["on", "true"].iter().any(|v| v.eq_ignore_ascii_case(value)) {
        Some(true)
    } else if ["off", "false"]
        .iter()
        .any(|v| v.eq_ignore_ascii_case(value))
    {
        Some(false)
    } else {
        None
    }
}

/// A protocol setting that is not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    #[error(transparent)]
    UnknownProtocol(#[from] UnknownProtocol),
    #[error("unknown setting '{name}' for protocol {protocol}; valid settings: {valid}")]
    Unknown {
        protocol: &'static str,
        name: String,
        valid: String,
    },
    #[error(
        "setting '{name}' of protocol {protocol} names node {value}, but the cluster has nodes 0 to {} only",
        nodes.saturating_sub(1)
    )]
    NoSuchNode {
        protocol: &'static str,
        name: String,
        value: String,
        nodes: usize,
    },
    #[error(
        "protocol {protocol} replicates the whole database to every node: the replication factor must be the node count ({nodes}), not {replication}"
    )]
    PartialReplication {
        protocol: &'static str,
        nodes: usize,
        replication: usize,
    },
    #[error(
        "bad value '{value}' for setting '{name}' of protocol {protocol}; accepted values: {accepted}"
    )]
    BadValue {
        protocol: &'static str,
        name: String,
        value: String,
        accepted: String,
    },
}

/// What a protocol needs from the links between nodes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct NetworkModel {
    /// It stays correct (and recovers) when messages are lost.
    pub tolerates_loss: bool,
    /// It stays correct when a link delivers messages out of order.
    pub tolerates_reordering: bool,
}

/// A protocol name that is not registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown protocol '{name}'; valid protocols: {valid}")]
pub struct UnknownProtocol {
    pub name: String,
    pub valid: String,
}
