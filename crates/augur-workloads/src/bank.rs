//! `bank`: money moves between accounts and the total never changes.
//!
//! `accounts` accounts (keys `0..accounts`, spread round-robin over the partitions) each open with
//! `initial_balance`; an account that was never written reads as absent and counts as its opening
//! balance, so no loading phase is needed. A `transfer` picks two distinct accounts and an amount
//! in 1..=`max_transfer`, reads both balances (decimal text) and, unless the source holds less
//! than the amount (then it rolls back), writes both new balances. A `scan` (read-only, a share
//! `scan_fraction` of transactions) reads every account in order.
//!
//! The invariants are what make the history checkable without knowing the version order: every
//! scan that sees a consistent snapshot sums to `accounts * initial_balance`, and no balance is
//! ever negative. Snapshot isolation guarantees both; read committed allows fractured scans and
//! lost updates that break them. `augur_check::bank` checks them, reading `accounts` and
//! `initial_balance` from the history's settings.

use crate::bad_value as bad;
use crate::list_append::{key_among, key_of};
use crate::reject_unknown;
use crate::{Audit, Condition, Workload, WorkloadError, parse};
use augur_client::{Ops, Procedure, TxnError};
use augur_types::{AbortReason, Key, NodeId, Placement, ProcedureCall, RequestError, Value};
use bytes::Bytes;
use futures::future::BoxFuture;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Settings accepted through `--set`.
pub const SETTINGS: &[&str] = &[
    "accounts",
    "initial_balance",
    "max_transfer",
    "scan_fraction",
];

/// The most accounts (a scan reads them all).
const MAX_ACCOUNTS: u64 = 1 << 20;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    pub accounts: u64,
    /// Every account's opening balance.
    pub initial_balance: i64,
    /// Transfers move 1..=max_transfer.
    pub max_transfer: i64,
    /// The share of transactions that are scans.
    pub scan_fraction: f64,
}

pub struct Bank {
    settings: Settings,
    /// The account keys, by account number.
    accounts: Vec<Key>,
    /// The partition count, which places the accounts.
    partitions: u32,
}

impl Bank {
    pub fn new(
        given: &BTreeMap<String, String>,
        placement: Arc<Placement>,
    ) -> Result<Bank, WorkloadError> {
        reject_unknown("bank", SETTINGS, given)?;
        let get = |key: &str, default: &str| given.get(key).cloned().unwrap_or(default.into());
        let settings = Settings {
            accounts: parse("accounts", &get("accounts", "8"))?,
            initial_balance: parse("initial_balance", &get("initial_balance", "100"))?,
            max_transfer: parse("max_transfer", &get("max_transfer", "20"))?,
            scan_fraction: parse("scan_fraction", &get("scan_fraction", "0.3"))?,
        };
        if settings.accounts < 2 {
            let why = "a transfer needs at least 2 accounts";
            return Err(bad("accounts", settings.accounts.to_string(), why));
        }
        if settings.accounts > MAX_ACCOUNTS {
            let why = "at most 1048576 accounts (a scan reads them all)";
            return Err(bad("accounts", settings.accounts.to_string(), why));
        }
        let total = i64::try_from(settings.accounts)
            .ok()
            .and_then(|n| n.checked_mul(settings.initial_balance));
        if settings.initial_balance < 0 || total.is_none() {
            let why = "must be at least 0, and the total of all accounts must fit in 64 bits";
            return Err(bad(
                "initial_balance",
                settings.initial_balance.to_string(),
                why,
            ));
        }
        if settings.max_transfer < 1 {
            let why = "must be at least 1";
            return Err(bad("max_transfer", settings.max_transfer.to_string(), why));
        }
        if !(0.0..=1.0).contains(&settings.scan_fraction) {
            let why = "must be within 0..=1";
            return Err(bad(
                "scan_fraction",
                settings.scan_fraction.to_string(),
                why,
            ));
        }
        let accounts = (0..settings.accounts)
            .map(|i| key_of(&placement, i))
            .collect();
        Ok(Bank {
            settings,
            accounts,
            partitions: placement.partition_count() as u32,
        })
    }
}

impl Workload for Bank {
    fn name(&self) -> &'static str {
        "bank"
    }

    fn next(&self, _home: NodeId, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        let initial = self.settings.initial_balance;
        if rng.random::<f64>() < self.settings.scan_fraction {
            return Box::new(Scan {
                accounts: self.settings.accounts,
                partitions: self.partitions,
            });
        }
        let n = self.accounts.len();
        let from = rng.random_range(0..n);
        // A uniform account other than `from`.
        let to = (from + rng.random_range(1..n)) % n;
        Box::new(Transfer {
            from: self.accounts[from].clone(),
            to: self.accounts[to].clone(),
            amount: rng.random_range(1..=self.settings.max_transfer),
            initial,
        })
    }

    fn settings(&self) -> serde_json::Value {
        serde_json::to_value(&self.settings).expect("settings serialise")
    }

    fn audit(&self) -> Option<Box<dyn Audit>> {
        Some(Box::new(TotalAudit {
            accounts: self.accounts.clone(),
            initial: self.settings.initial_balance,
        }))
    }
}

/// After a run: on one snapshot, the balances sum to the opening total and none is negative.
struct TotalAudit {
    accounts: Vec<Key>,
    initial: i64,
}

impl Audit for TotalAudit {
    fn run<'a>(
        &'a mut self,
        ops: &'a mut dyn Ops,
    ) -> BoxFuture<'a, Result<Vec<Condition>, TxnError>> {
        Box::pin(async move {
            let mut sum: i128 = 0;
            let mut negative = Vec::new();
            let mut garbage = Vec::new();
            for key in &self.accounts {
                match balance(ops.read(key).await?, self.initial) {
                    Ok(b) => {
                        sum += i128::from(b);
                        if b < 0 {
                            negative.push(format!("{key} = {b}"));
                        }
                    }
                    Err(_) => garbage.push(key.to_string()),
                }
            }
            let expected = self.accounts.len() as i128 * i128::from(self.initial);
            Ok(vec![
                Condition {
                    name: "bank-total".into(),
                    passed: sum == expected && garbage.is_empty(),
                    detail: if garbage.is_empty() {
                        format!("balances sum to {sum}; the opening total is {expected}")
                    } else {
                        format!("unreadable balances: {}", garbage.join(", "))
                    },
                },
                Condition {
                    name: "bank-no-negative".into(),
                    passed: negative.is_empty(),
                    detail: if negative.is_empty() {
                        "no balance is negative".into()
                    } else {
                        format!("negative: {}", negative.join(", "))
                    },
                },
            ])
        })
    }

    /// The audit reads the accounts in a fixed order, whatever it finds.
    fn call(&self) -> Option<ProcedureCall> {
        Some(crate::read_call(self.accounts.clone()))
    }
}

/// The balance a read returned: absent is the opening balance. A value that is not a balance
/// rolls the transaction back (the read stays in the history for the checker).
fn balance(value: Option<Value>, initial: i64) -> Result<i64, TxnError> {
    match value {
        None => Ok(initial),
        Some(v) => std::str::from_utf8(&v)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or(TxnError::Aborted(AbortReason::UserRollback)),
    }
}

fn encode(balance: i64) -> Option<Value> {
    Some(Bytes::from(balance.to_string()))
}

/// `transfer`: move `amount` from `from` to `to`, or roll back if `from` cannot cover it. Its
/// fields are its one-shot arguments.
#[derive(Serialize, Deserialize)]
struct Transfer {
    from: Key,
    to: Key,
    amount: i64,
    initial: i64,
}

impl Procedure for Transfer {
    fn name(&self) -> &'static str {
        "transfer"
    }

    fn read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            let from = balance(ops.read(&self.from).await?, self.initial)?;
            let to = balance(ops.read(&self.to).await?, self.initial)?;
            let rollback = TxnError::Aborted(AbortReason::UserRollback);
            if from < self.amount {
                return Err(rollback);
            }
            // Only a corrupted balance (or amount) could overflow; refuse rather than wrap.
            let (Some(new_from), Some(new_to)) =
                (from.checked_sub(self.amount), to.checked_add(self.amount))
            else {
                return Err(rollback);
            };
            ops.write(self.from.clone(), encode(new_from))?;
            ops.write(self.to.clone(), encode(new_to))?;
            Ok(())
        })
    }

    fn call(&self) -> Option<ProcedureCall> {
        Some(ProcedureCall::encode("bank", self.name(), self))
    }
}

/// `scan`: read every account in order. Its fields are its one-shot arguments: the accounts are
/// named by their number and the partition count (as [`key_of`] does), which keeps the call
/// small however many accounts there are.
#[derive(Serialize, Deserialize)]
struct Scan {
    accounts: u64,
    partitions: u32,
}

impl Procedure for Scan {
    fn name(&self) -> &'static str {
        "scan"
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            for i in 0..self.accounts {
                // The reads are the observation the checker sums.
                ops.read(&key_among(self.partitions, i)).await?;
            }
            Ok(())
        })
    }

    fn call(&self) -> Option<ProcedureCall> {
        Some(ProcedureCall::encode("bank", self.name(), self))
    }
}

/// The `bank` procedure `call` names, rebuilt from its arguments.
pub(crate) fn instantiate(call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
    match call.procedure.as_str() {
        "transfer" => Ok(Box::new(call.decode::<Transfer>()?)),
        "scan" => {
            let scan: Scan = call.decode()?;
            if scan.accounts > MAX_ACCOUNTS || scan.partitions == 0 {
                let why = format!(
                    "scan: {} accounts over {} partitions (at most {MAX_ACCOUNTS} accounts, at \
                     least one partition)",
                    scan.accounts, scan.partitions
                );
                return Err(RequestError::Invalid(why));
            }
            Ok(Box::new(scan))
        }
        _ => Err(crate::unknown_procedure(call)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use crate::list_append::fake::{FakeOps, call_names};
    use augur_client::ProcedureCatalog;
    use augur_types::LatencyProfile;
    use rand::SeedableRng;

    fn workload(set: &[(&str, &str)]) -> Result<Bank, WorkloadError> {
        let lan = LatencyProfile::named("lan").unwrap();
        let pl = Arc::new(Placement::ring(lan, 3, 1).unwrap());
        let given = set
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Bank::new(&given, pl)
    }

    fn transfer(amount: i64) -> Transfer {
        Transfer {
            from: Key::numbered(0, 0),
            to: Key::numbered(1, 1),
            amount,
            initial: 100,
        }
    }

    #[test]
    fn a_transfer_moves_money_from_absent_accounts() {
        let mut ops = FakeOps::default();
        ops.run(&mut transfer(30)).unwrap();
        assert_eq!(ops.log, ["r 0/0 -", "r 1/1 -", "w 0/0 70", "w 1/1 130"]);
        ops.commit();
        ops.run(&mut transfer(70)).unwrap();
        ops.commit();
        assert_eq!(ops.get(&Key::numbered(0, 0)).unwrap(), "0");
        assert_eq!(ops.get(&Key::numbered(1, 1)).unwrap(), "200");
    }

    #[test]
    fn an_uncovered_transfer_rolls_back() {
        let mut ops = FakeOps::default();
        ops.set(Key::numbered(0, 0), "10");
        let e = ops.run(&mut transfer(11)).unwrap_err();
        assert_eq!(e, TxnError::Aborted(AbortReason::UserRollback));
        assert_eq!(ops.log, ["r 0/0 10", "r 1/1 -"]);
        assert!(ops.buffered.is_empty());
        ops.set(Key::numbered(0, 0), "garbage");
        assert!(ops.run(&mut transfer(1)).is_err());
    }

    #[test]
    fn scans_read_every_account_in_order() {
        let w = workload(&[("accounts", "4"), ("scan_fraction", "1")]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let mut p = w.next(NodeId(0), &mut rng);
        assert_eq!(p.name(), "scan");
        assert!(p.read_only());
        let mut ops = FakeOps::default();
        ops.set(Key::numbered(1, 1), "90");
        ops.run(p.as_mut()).unwrap();
        assert_eq!(ops.log, ["r 0/0 -", "r 1/1 90", "r 2/2 -", "r 0/3 -"]);
    }

    #[test]
    fn transfers_conserve_the_total() {
        let w = workload(&[("accounts", "3"), ("max_transfer", "50")]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut ops = FakeOps::default();
        let (mut transfers, mut rollbacks) = (0, 0);
        for _ in 0..300 {
            let mut p = w.next(NodeId(0), &mut rng);
            match ops.run(p.as_mut()) {
                Ok(()) => ops.commit(),
                Err(e) => {
                    assert_eq!(e, TxnError::Aborted(AbortReason::UserRollback));
                    ops.buffered.clear();
                    rollbacks += 1;
                }
            }
            if p.name() == "transfer" {
                transfers += 1;
            }
            let balances: Vec<i64> = ops
                .store
                .values()
                .map(|v| std::str::from_utf8(v).unwrap().parse().unwrap())
                .collect();
            let absent = 3 - balances.len() as i64;
            assert_eq!(balances.iter().sum::<i64>() + 100 * absent, 300);
            assert!(balances.iter().all(|b| *b >= 0));
        }
        assert!(
            transfers > 150 && rollbacks > 0,
            "{transfers} / {rollbacks}"
        );
    }

    #[test]
    fn settings_are_echoed_and_validated() {
        let w = workload(&[]).unwrap();
        assert_eq!(
            w.settings(),
            serde_json::json!({
                "accounts": 8, "initial_balance": 100, "max_transfer": 20, "scan_fraction": 0.3
            })
        );
        let e = workload(&[("keys", "3")]).err().unwrap();
        assert!(matches!(e, WorkloadError::UnknownSetting { .. }), "{e}");
        for bad in [
            ("accounts", "0"),
            ("accounts", "1"),
            ("initial_balance", "-1"),
            ("initial_balance", "9223372036854775807"),
            ("max_transfer", "0"),
            ("scan_fraction", "1.01"),
            ("scan_fraction", "most"),
        ] {
            let e = workload(&[bad]).err().unwrap();
            assert!(matches!(e, WorkloadError::BadValue { .. }), "{bad:?}: {e}");
        }
    }

    #[test]
    fn calls_replay_on_the_node() {
        let w = workload(&[]).unwrap();
        crate::testing::assert_calls_replay(&w, 3, 400);
        assert_eq!(call_names(&w, 200), ["scan", "transfer"]);
        let set = [
            ("accounts", "5"),
            ("scan_fraction", "0.8"),
            ("max_transfer", "150"),
        ];
        crate::testing::assert_calls_replay(&workload(&set).unwrap(), 3, 300);
    }

    #[test]
    fn bad_calls_are_refused() {
        crate::testing::assert_refuses_bad_calls("bank", "withdraw", &["transfer", "scan"]);
        for (accounts, partitions) in [(MAX_ACCOUNTS + 1, 3), (8, 0)] {
            let scan = Scan {
                accounts,
                partitions,
            };
            let e = Catalog.instantiate(&scan.call().unwrap()).err().unwrap();
            assert!(e.to_string().contains("scan:"), "{e}");
        }
        // An amount that would overflow the source rolls back rather than wrapping.
        let mut p = transfer(i64::MIN + 1);
        let mut ops = FakeOps::default();
        ops.set(Key::numbered(0, 0), "10");
        let e = ops.run(&mut p).unwrap_err();
        assert_eq!(e, TxnError::Aborted(AbortReason::UserRollback));
    }
}
