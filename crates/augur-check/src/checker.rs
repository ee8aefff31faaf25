//! Placeholder replaced by the dependency-graph checker.
use crate::anomaly::{CheckReport, Level};
use augur_types::history::History;

/// How a workload's values reveal the version order of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueModel {
    ListAppend,
    RwRegister,
}

#[derive(Clone, Debug)]
pub struct CheckOptions {
    pub level: Level,
    pub model: ValueModel,
    pub commit_order_evidence: bool,
}

pub fn check(_history: &History, _options: &CheckOptions) -> CheckReport {
    unimplemented!()
}
