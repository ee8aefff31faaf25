//! The bookkeeping shared by the audits of the table-shaped workloads (`tpcc`, `rubis`): each
//! condition counts the instances it was checked on and keeps its first violation, and rows are
//! read and decoded with undecodable or missing rows counted against a "rows" condition.

use crate::Condition;
use crate::tpcc::schema::Row;
use augur_client::{Ops, TxnError};
use augur_types::{Key, Value};

/// One condition's tally.
struct Check {
    name: &'static str,
    statement: &'static str,
    unit: &'static str,
    checked: u64,
    failed: u64,
    first: Option<String>,
}

impl Check {
    fn condition(self) -> Condition {
        let (checked, unit) = (self.checked, self.unit);
        let detail = match &self.first {
            None => format!("{}: holds for all {checked} {unit}", self.statement),
            Some(first) => format!(
                "{}: {} of {checked} {unit} violate it; first: {first}",
                self.statement, self.failed
            ),
        };
        Condition {
            name: self.name.to_string(),
            passed: self.failed == 0,
            detail,
        }
    }
}

/// The tallies of an audit's conditions, indexed by the position of each in the table given to
/// [`Tally::new`].
pub(crate) struct Tally {
    checks: Vec<Check>,
    /// The condition a row that is missing or does not decode fails.
    rows: usize,
}

impl Tally {
    /// `conditions` holds each condition's name, statement and what it is counted over, in
    /// report order; `rows` is the index of the one that every row read must satisfy.
    pub(crate) fn new(
        conditions: &[(&'static str, &'static str, &'static str)],
        rows: usize,
    ) -> Tally {
        Tally {
            checks: conditions
                .iter()
                .map(|&(name, statement, unit)| Check {
                    name,
                    statement,
                    unit,
                    checked: 0,
                    failed: 0,
                    first: None,
                })
                .collect(),
            rows,
        }
    }

    /// Count one instance of condition `cond`, failed unless `ok`; `what` describes a failure.
    pub(crate) fn expect(&mut self, cond: usize, ok: bool, what: impl FnOnce() -> String) {
        let check = &mut self.checks[cond];
        check.checked += 1;
        if !ok {
            check.failed += 1;
            if check.first.is_none() {
                check.first = Some(what());
            }
        }
    }

    /// Decode a row read from `key`; one that does not decode fails the rows condition and
    /// counts as absent.
    pub(crate) fn decode<R: Row>(&mut self, key: &Key, value: Option<Value>) -> Option<R> {
        match R::decode(&value?) {
            Ok(row) => {
                self.expect(self.rows, true, String::new);
                Some(row)
            }
            Err(e) => {
                self.expect(self.rows, false, || format!("{key}: {e}"));
                None
            }
        }
    }

    pub(crate) async fn read<R: Row>(
        &mut self,
        ops: &mut dyn Ops,
        key: &Key,
    ) -> Result<Option<R>, TxnError> {
        let value = ops.read(key).await?;
        Ok(self.decode(key, value))
    }

    /// Read a row that must exist: its absence fails the rows condition.
    pub(crate) async fn read_required<R: Row>(
        &mut self,
        ops: &mut dyn Ops,
        key: &Key,
    ) -> Result<Option<R>, TxnError> {
        let value = ops.read(key).await?;
        if value.is_none() {
            self.expect(self.rows, false, || {
                format!("{} row {key} is missing", R::TABLE)
            });
        }
        Ok(self.decode(key, value))
    }

    /// Every condition's verdict, in report order.
    pub(crate) fn conditions(self) -> Vec<Condition> {
        self.checks.into_iter().map(Check::condition).collect()
    }
}
