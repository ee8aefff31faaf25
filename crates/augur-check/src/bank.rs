//! The `bank` workload's invariants, checked over a recorded history.
//!
//! `bank` moves money between `accounts` accounts that open with `initial_balance` each (an
//! account never written reads as absent and holds its opening balance). Its values are not
//! unique, so the dependency graph cannot be built from them; instead two invariants hold under
//! parallel snapshot isolation, snapshot isolation and everything stronger:
//!
//! - **bank-total**: a `scan` that read every account sees the sum `accounts * initial_balance`.
//!   Scans are checked when committed, and aborted scans and scans of unknown outcome too when the
//!   level constrains aborted transactions (SPSI). An unknown outcome may be an abort, and a
//!   protocol that validates its reads at commit (`2pc-baseline`) may read an inconsistent state
//!   and then abort: only a level that constrains aborted transactions rules that out. (The
//!   dependency-graph checker likewise leaves out transactions of unknown outcome that nobody
//!   observed, and nobody observes a scan.) Scans that did not read every account are skipped.
//! - **negative-balance**: no balance read or written by a committed transaction is below zero.
//!   Reads by unknown-outcome transactions, and by aborted ones when the level constrains aborted
//!   transactions, are checked the same way; writes only when committed.
//!
//! A balance read that is not a decimal integer is reported as a garbage read.
//!
//! Accounts are recognised by their printed key `shard/number` with `number < accounts`; other
//! keys are ignored. Read committed allows both anomalies (they are reported, not proscribed).

use crate::anomaly::{Anomaly, AnomalyKind, CheckReport, Proscribes};
use augur_types::IsolationLevel;
use augur_types::history::{History, Op, RecordedOutcome, TxnRecord};
use std::collections::BTreeMap;

/// Accounts when the history's settings do not say.
pub const DEFAULT_ACCOUNTS: u64 = 8;
/// Opening balance when the history's settings do not say.
pub const DEFAULT_INITIAL_BALANCE: i64 = 100;
/// At most this many anomalies of each kind are listed.
pub const MAX_PER_KIND: usize = 100;

/// Check `history` (a `bank` run) against `level`. Fails only if the header's `accounts` or
/// `initial_balance` setting is not a valid number.
pub fn check_bank(history: &History, level: IsolationLevel) -> Result<CheckReport, String> {
    let settings = &history.header.settings;
    let accounts: u64 = setting(settings, "accounts", DEFAULT_ACCOUNTS)?;
    if accounts == 0 {
        return Err("bad bank setting accounts=0: must be at least 1".into());
    }
    let initial: i64 = setting(settings, "initial_balance", DEFAULT_INITIAL_BALANCE)?;
    let bank = Bank { accounts };

    let mut report = CheckReport::default();
    let mut listed: BTreeMap<AnomalyKind, usize> = BTreeMap::new();
    let mut add = |report: &mut CheckReport, kind, txn: &TxnRecord, keys, explanation| {
        let n = listed.entry(kind).or_default();
        *n += 1;
        if *n <= MAX_PER_KIND {
            report.anomalies.push(Anomaly {
                kind,
                proscribed: level.proscribes(kind),
                txns: vec![txn.index],
                keys,
                edges: Vec::new(),
                explanation,
            });
        }
    };

    for txn in &history.txns {
        let stats = &mut report.stats;
        stats.txns += 1;
        let reads_checked = match txn.outcome {
            RecordedOutcome::Committed { .. } => {
                stats.committed += 1;
                true
            }
            RecordedOutcome::Unknown => {
                stats.unknown += 1;
                true
            }
            RecordedOutcome::Aborted { .. } => {
                stats.aborted += 1;
                level.constrains_aborted()
            }
        };
        let writes_checked = txn.is_committed();
        let sum_checked = writes_checked || level.constrains_aborted();
        let who = describe(txn);

        let mut garbage: Vec<(&str, &str)> = Vec::new();
        let mut negative: Vec<(&str, String)> = Vec::new();
        // Per account, in account order: its key and the first read of it.
        let mut seen: BTreeMap<u64, (&str, Seen)> = BTreeMap::new();
        for op in &txn.ops {
            let Some(account) = bank.account(op.key()) else {
                continue;
            };
            match op {
                Op::Read { key, value } => {
                    if !reads_checked {
                        continue;
                    }
                    let read = bank.read(value.as_deref());
                    seen.entry(account).or_insert((key, read));
                    match read {
                        Seen::Garbage => garbage.push((key, value.as_deref().unwrap_or_default())),
                        Seen::Balance(b) if b < 0 => {
                            negative.push((key, format!("read {key}={b}")))
                        }
                        Seen::Absent | Seen::Balance(_) => {}
                    }
                }
                Op::Write { key, value } => {
                    if !writes_checked {
                        continue;
                    }
                    if let Seen::Balance(b) = bank.read(value.as_deref())
                        && b < 0
                    {
                        negative.push((key, format!("wrote {key}={b}")));
                    }
                }
            }
        }

        if !garbage.is_empty() {
            let keys = distinct(garbage.iter().map(|(k, _)| *k));
            let what: Vec<String> = garbage.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            let explanation = format!(
                "{who} read {}, which {} not a balance",
                what.join(", "),
                if what.len() == 1 { "is" } else { "are" }
            );
            add(
                &mut report,
                AnomalyKind::GarbageRead,
                txn,
                keys,
                explanation,
            );
        }
        if !negative.is_empty() {
            let keys = distinct(negative.iter().map(|(k, _)| *k));
            let what: Vec<&str> = negative.iter().map(|(_, d)| d.as_str()).collect();
            let explanation = format!("{who} {}: a balance below zero", what.join(", "));
            add(
                &mut report,
                AnomalyKind::NegativeBalance,
                txn,
                keys,
                explanation,
            );
        }
        // A scan that read every account, each readably (garbage is reported above).
        let complete = seen.len() as u64 == accounts
            && seen.values().all(|(_, s)| !matches!(s, Seen::Garbage));
        if txn.name == "scan" && complete && sum_checked {
            let balance = |s: &Seen| match s {
                Seen::Balance(b) => *b,
                Seen::Absent | Seen::Garbage => initial,
            };
            let sum: i128 = seen.values().map(|(_, s)| balance(s) as i128).sum();
            let expected = accounts as i128 * initial as i128;
            if sum != expected {
                let shown: Vec<String> = seen
                    .values()
                    .map(|(key, s)| match s {
                        Seen::Absent => format!("{key}=absent ({initial})"),
                        _ => format!("{key}={}", balance(s)),
                    })
                    .collect();
                let keys = seen.values().map(|(k, _)| k.to_string()).collect();
                let explanation = format!(
                    "{who} saw {}: sum {sum}, expected {expected} ({accounts} accounts x {initial})",
                    shown.join(", ")
                );
                add(&mut report, AnomalyKind::BankTotal, txn, keys, explanation);
            }
        }
    }
    Ok(report)
}

struct Bank {
    accounts: u64,
}

/// What one read of an account showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// No value: the opening balance.
    Absent,
    Balance(i64),
    /// Not a decimal integer.
    Garbage,
}

impl Bank {
    /// The account number of a printed key (`shard/number`), if it is one of the accounts.
    fn account(&self, key: &str) -> Option<u64> {
        let (_, number) = key.split_once('/')?;
        number.parse().ok().filter(|n| *n < self.accounts)
    }

    fn read(&self, value: Option<&str>) -> Seen {
        match value.map(|v| v.trim().parse()) {
            None => Seen::Absent,
            Some(Ok(b)) => Seen::Balance(b),
            Some(Err(_)) => Seen::Garbage,
        }
    }
}

/// `T<index> (client N)`, the transaction's name and how it ended when not a plain commit.
fn describe(txn: &TxnRecord) -> String {
    let how = match &txn.outcome {
        RecordedOutcome::Committed { .. } => String::new(),
        RecordedOutcome::Aborted { reason } => format!(" (aborted: {reason})"),
        RecordedOutcome::Unknown => " (outcome unknown)".into(),
    };
    format!("T{} (client {}) {}{how}", txn.index, txn.client, txn.name)
}

/// The distinct keys of `keys`, in first-seen order.
fn distinct<'a>(keys: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in keys {
        if !out.iter().any(|o| o == k) {
            out.push(k.to_string());
        }
    }
    out
}

/// A numeric setting from the history header, `default` when absent. Tolerates the value
/// being JSON-quoted.
fn setting<T: std::str::FromStr>(
    settings: &BTreeMap<String, String>,
    key: &str,
    default: T,
) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    match settings.get(key) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .trim_matches('"')
            .parse()
            .map_err(|e| format!("bad bank setting {key}={v:?}: {e}")),
    }
}
