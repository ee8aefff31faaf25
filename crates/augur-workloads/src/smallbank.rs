//! `smallbank`: the SmallBank benchmark of Alomari, Cahill, Fekete and Röhm ("The Cost of
//! Serializability on Platforms That Use Snapshot Isolation", ICDE 2008), with the sixth
//! transaction (`send-payment`), the fixed amounts and the transaction mix of the H-Store and
//! OLTP-Bench implementations.
//!
//! # Schema and key layout
//!
//! `customers` customers are numbered `0..customers`; a customer's name is its number in decimal
//! (OLTP-Bench likewise names customers by their zero-padded number). Each of the three tables has
//! one row per customer:
//!
//! | table    | row              | key      | value                         |
//! |----------|------------------|----------|-------------------------------|
//! | ACCOUNTS | name → custid    | `c/acct` | the custid, decimal           |
//! | SAVINGS  | custid → balance | `c/sav`  | the balance in cents, decimal |
//! | CHECKING | custid → balance | `c/chk`  | the balance in cents, decimal |
//!
//! Keys are [`Key::tagged`]`(c, table)`: the shard tag is the customer number, so a customer's
//! three rows always share a partition (`c mod partitions`) whatever the partition count, and
//! transactions on one customer are single-partition. Customers spread round-robin over the
//! partitions.
//!
//! Money is integer cents, so the standard amounts are exact. A row that was never written reads
//! as its opening value: the ACCOUNTS row of the customer named `c` as custid `c`, a balance as
//! `initial_balance`. No loading phase is needed. A balance that does not parse, or an ACCOUNTS
//! row naming another customer, rolls the transaction back (the read stays in the history).
//!
//! # Transactions
//!
//! Every transaction first looks up the ACCOUNTS row of each of its customers (by name).
//!
//! * `balance` (read-only): read one customer's savings and checking balances.
//! * `deposit-checking` (V = 1.30): roll back if V < 0, else add V to checking.
//! * `transact-savings` (V = 20.20): roll back if savings + V would be negative, else add V.
//! * `amalgamate`: move all of customer A's savings and checking into B's checking (A's two
//!   balances become 0).
//! * `write-check` (V = 5.00): if savings + checking < V, subtract V plus an overdraft penalty of
//!   1.00 from checking, else subtract V.
//! * `send-payment` (V = 5.00): roll back if A's checking holds less than V, else move V from A's
//!   checking to B's.
//!
//! The first five are Alomari et al.'s; `send-payment` and the amounts (which H-Store's driver
//! notes come "from the original code") are H-Store's, kept by OLTP-Bench/BenchBase.
//!
//! # Mix and customer selection
//!
//! `mix=standard` is H-Store's and OLTP-Bench's default: amalgamate 15, balance 15,
//! deposit-checking 15, send-payment 25, transact-savings 15, write-check 15 (the order of
//! OLTP-Bench's `sample_smallbank_config.xml`, `weights` 15,15,15,25,15,15). Other mixes are six
//! weights in that order (`mix=0,100,0,0,0,0`) or `name:weight` pairs, unnamed types weighing 0
//! (`mix=write-check:50,transact-savings:50`).
//!
//! A share `hotspot_fraction` of transactions draw all their customers from the hotspot, customers
//! `0..hotspot_customers`; the others draw them uniformly from all customers. (H-Store decides per
//! transaction too, but draws the others from outside the hotspot only, and defaults to no
//! hotspot; OLTP-Bench draws uniformly. The defaults of 100 customers and 90% are augur's, for a
//! contended default.) Customers are drawn without regard to the client's home node.
//!
//! `amalgamate` and `send-payment` draw two distinct customers. With `multi_partition=uniform` the
//! second is uniform among the others (OLTP-Bench), so it lives in another partition with
//! probability about `(partitions - 1) / partitions`; with `multi_partition=P` (0..=1, H-Store's
//! `prob_multiaccount_dtxn`) it lives in another partition with probability P and in the first
//! one's otherwise, uniform among those. When the drawn kind is impossible (one partition, or no
//! other customer of the range in that partition) the other kind is drawn.
//!
//! # Audit
//!
//! Money only enters or leaves the bank through committed `deposit-checking`, `transact-savings`
//! and `write-check` transactions; `amalgamate` and `send-payment` move it inside. Every procedure
//! reports what its last attempt would move in or out, and its [`Procedure::finished`] adds that
//! to a tally shared with the workload when the attempt committed, or its absolute value to a
//! tolerance when the outcome is unknown. The audit reads every customer's two balances in one
//! read-only transaction (`2 × customers` reads, one after another) and checks `smallbank-total`:
//! the balances sum to `customers × 2 × initial_balance` plus the committed net, within the
//! unknown-outcome tolerance; and `smallbank-no-garbage`: every balance parses. Snapshot isolation
//! and anything stronger keep the total; lost updates, dirty writes and reads of aborted writes
//! break it. (SmallBank's write skew between `write-check` and `transact-savings` under snapshot
//! isolation does not: it only lets a check through without the penalty a serial order would
//! have charged.)
//!
//! [`Workload::load`] loads nothing, but it is called once at the start of every run against a
//! fresh database, so it restarts the tally: a workload shared by the runs of several protocols
//! audits each run on its own.

use crate::bad_value as bad;
use crate::reject_unknown;
use crate::{Audit, Condition, Workload, WorkloadError, parse};
use augur_client::{Ops, Outcome, Procedure, TxnError};
use augur_types::{AbortReason, Key, NodeId, Placement, ProcedureCall, RequestError, Value};
use bytes::Bytes;
use futures::future::BoxFuture;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Settings accepted through `--set`.
pub const SETTINGS: &[&str] = &[
    "customers",
    "hotspot_customers",
    "hotspot_fraction",
    "initial_balance",
    "mix",
    "multi_partition",
];

/// The most customers (the shard tag is the customer number, and the audit reads every row).
pub const MAX_CUSTOMERS: u64 = 1 << 24;

/// `deposit-checking` deposits 1.30.
pub const DEPOSIT_CHECKING_AMOUNT: i64 = 130;
/// `transact-savings` adds 20.20.
pub const TRANSACT_SAVINGS_AMOUNT: i64 = 2020;
/// `write-check` writes a check of 5.00.
pub const WRITE_CHECK_AMOUNT: i64 = 500;
/// `send-payment` sends 5.00.
pub const SEND_PAYMENT_AMOUNT: i64 = 500;
/// What `write-check` charges on top of an overdrawn check: 1.00 ("V + 1").
pub const OVERDRAFT_PENALTY: i64 = 100;

/// The weights of `mix=standard`, in [`Kind::ALL`] order.
pub const STANDARD_MIX: [u32; 6] = [15, 15, 15, 25, 15, 15];

/// The six transaction types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Amalgamate,
    Balance,
    DepositChecking,
    SendPayment,
    TransactSavings,
    WriteCheck,
}

impl Kind {
    /// Every type, in the order explicit `mix` weights are given.
    pub const ALL: [Kind; 6] = [
        Kind::Amalgamate,
        Kind::Balance,
        Kind::DepositChecking,
        Kind::SendPayment,
        Kind::TransactSavings,
        Kind::WriteCheck,
    ];

    /// The procedure name (and the name in `name:weight` mixes).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Amalgamate => "amalgamate",
            Kind::Balance => "balance",
            Kind::DepositChecking => "deposit-checking",
            Kind::SendPayment => "send-payment",
            Kind::TransactSavings => "transact-savings",
            Kind::WriteCheck => "write-check",
        }
    }

    fn two_customers(self) -> bool {
        matches!(self, Kind::Amalgamate | Kind::SendPayment)
    }

    /// The standard amount of the transaction, in cents (0 for those without one).
    fn amount(self) -> i64 {
        match self {
            Kind::DepositChecking => DEPOSIT_CHECKING_AMOUNT,
            Kind::TransactSavings => TRANSACT_SAVINGS_AMOUNT,
            Kind::WriteCheck => WRITE_CHECK_AMOUNT,
            Kind::SendPayment => SEND_PAYMENT_AMOUNT,
            Kind::Amalgamate | Kind::Balance => 0,
        }
    }
}

/// How the second customer of `amalgamate` and `send-payment` is placed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MultiPartition {
    /// Uniform among the other customers of the range.
    Uniform,
    /// In another partition than the first with this probability, in the same one otherwise.
    Probability(f64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub customers: u64,
    /// Customers `0..hotspot_customers` form the hotspot.
    pub hotspot_customers: u64,
    /// The share of transactions whose customers all come from the hotspot.
    pub hotspot_fraction: f64,
    /// Every savings and checking balance's opening value, in cents.
    pub initial_balance: i64,
    /// The mix as given (`standard`, or weights).
    pub mix: String,
    /// The weights in force, in [`Kind::ALL`] order.
    pub weights: [u32; 6],
    pub multi_partition: MultiPartition,
}

/// Parse `mix`: `standard`, six weights in [`Kind::ALL`] order, or `name:weight` pairs.
fn parse_mix(value: &str) -> Result<[u32; 6], WorkloadError> {
    if value == "standard" {
        return Ok(STANDARD_MIX);
    }
    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    let usage = format!(
        "give the preset 'standard', six weights in the order {}, or name:weight pairs",
        names.join(",")
    );
    let weight = |text: &str| {
        text.trim()
            .parse::<u32>()
            .map_err(|e| bad("mix", value, format!("'{}': {e}", text.trim())))
    };
    let parts: Vec<&str> = value.split(',').collect();
    let mut weights = [0u32; 6];
    if parts.iter().any(|p| p.contains(':')) {
        let mut named = [false; 6];
        for part in parts {
            let Some((name, w)) = part.split_once(':') else {
                return Err(bad("mix", value, &usage));
            };
            let Some(i) = names.iter().position(|n| *n == name.trim()) else {
                let why = format!("unknown transaction '{}'; {usage}", name.trim());
                return Err(bad("mix", value, why));
            };
            if std::mem::replace(&mut named[i], true) {
                let why = format!("'{}' is given twice", names[i]);
                return Err(bad("mix", value, why));
            }
            weights[i] = weight(w)?;
        }
    } else {
        if parts.len() != weights.len() {
            return Err(bad("mix", value, &usage));
        }
        for (w, part) in weights.iter_mut().zip(parts) {
            *w = weight(part)?;
        }
    }
    if weights.iter().all(|w| *w == 0) {
        return Err(bad("mix", value, "at least one weight must be positive"));
    }
    Ok(weights)
}

impl Settings {
    pub fn from_given(given: &BTreeMap<String, String>) -> Result<Settings, WorkloadError> {
        reject_unknown("smallbank", SETTINGS, given)?;
        let get = |key: &str, default: &str| given.get(key).cloned().unwrap_or(default.into());
        let mix = get("mix", "standard");
        let weights = parse_mix(&mix)?;
        let multi_partition = match get("multi_partition", "uniform").as_str() {
            "uniform" => MultiPartition::Uniform,
            other => {
                let p: f64 = parse("multi_partition", other)?;
                if !(0.0..=1.0).contains(&p) {
                    let why = "must be 'uniform' or a probability within 0..=1";
                    return Err(bad("multi_partition", other, why));
                }
                MultiPartition::Probability(p)
            }
        };
        let settings = Settings {
            customers: parse("customers", &get("customers", "10000"))?,
            hotspot_customers: parse("hotspot_customers", &get("hotspot_customers", "100"))?,
            hotspot_fraction: parse("hotspot_fraction", &get("hotspot_fraction", "0.9"))?,
            initial_balance: parse("initial_balance", &get("initial_balance", "1000000"))?,
            mix,
            weights,
            multi_partition,
        };
        let n = settings.customers;
        if !(2..=MAX_CUSTOMERS).contains(&n) {
            let why = format!("must be within 2..={MAX_CUSTOMERS} (two-customer transactions)");
            return Err(bad("customers", n, why));
        }
        let f = settings.hotspot_fraction;
        if !(0.0..=1.0).contains(&f) {
            return Err(bad("hotspot_fraction", f, "must be within 0..=1"));
        }
        let h = settings.hotspot_customers;
        if f > 0.0 && !(2..=n).contains(&h) {
            let why = format!(
                "must be within 2..=customers ({n}) while hotspot_fraction is above 0 (set it too \
                 when shrinking customers, or set hotspot_fraction=0 for no hotspot)"
            );
            return Err(bad("hotspot_customers", h, why));
        }
        let total = i64::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(2))
            .and_then(|rows| rows.checked_mul(settings.initial_balance));
        if settings.initial_balance < 0 || total.is_none() {
            let why = "must be at least 0, and the total of all balances must fit in 64 bits";
            return Err(bad("initial_balance", settings.initial_balance, why));
        }
        Ok(settings)
    }
}

/// Money moved into or out of the bank, shared by the workload, its procedures and its audit.
#[derive(Debug, Default)]
struct Tally {
    /// Net cents committed transactions moved in (positive) or out (negative).
    net: AtomicI64,
    /// Committed attempts that moved money in or out.
    committed: AtomicU64,
    /// The sum of the absolute amounts attempts of unknown outcome would move in or out.
    unknown: AtomicU64,
    /// Attempts of unknown outcome that would move money in or out.
    unknown_attempts: AtomicU64,
}

impl Tally {
    fn record(&self, effect: i64, outcome: &Outcome) {
        if effect == 0 {
            return;
        }
        match outcome {
            Outcome::Committed { .. } => {
                self.net.fetch_add(effect, Ordering::Relaxed);
                self.committed.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Unknown => {
                self.unknown
                    .fetch_add(effect.unsigned_abs(), Ordering::Relaxed);
                self.unknown_attempts.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Aborted(_) => {}
        }
    }
}

pub struct SmallBank {
    settings: Settings,
    /// The partition count: customer `c` lives in partition `c % partitions`.
    partitions: u64,
    total_weight: u64,
    tally: Arc<Tally>,
}

impl SmallBank {
    pub fn new(
        given: &BTreeMap<String, String>,
        placement: Arc<Placement>,
    ) -> Result<SmallBank, WorkloadError> {
        let settings = Settings::from_given(given)?;
        let total_weight = settings.weights.iter().map(|w| u64::from(*w)).sum();
        Ok(SmallBank {
            settings,
            partitions: placement.partition_count().max(1) as u64,
            total_weight,
            tally: Arc::new(Tally::default()),
        })
    }

    fn draw_kind(&self, rng: &mut ChaCha8Rng) -> Kind {
        let mut x = rng.random_range(0..self.total_weight);
        for (kind, w) in Kind::ALL.into_iter().zip(self.settings.weights) {
            let w = u64::from(w);
            if x < w {
                return kind;
            }
            x -= w;
        }
        unreachable!("the weights sum to total_weight")
    }

    /// A customer of `lo..hi` other than `a`, placed as `multi_partition` says.
    fn second(&self, lo: u64, hi: u64, a: u64, rng: &mut ChaCha8Rng) -> u64 {
        let len = hi - lo;
        let cross = match self.settings.multi_partition {
            MultiPartition::Uniform => return lo + (a - lo + rng.random_range(1..len)) % len,
            MultiPartition::Probability(p) => rng.random::<f64>() < p,
        };
        let p = self.partitions;
        let class = Class::of(lo, hi, p, a % p);
        let outside = len - class.count;
        if (cross || class.count < 2) && outside > 0 {
            class.nth_outside(lo, p, rng.random_range(0..outside))
        } else {
            // At least 2 customers in the range, so with none outside, `a` has company.
            let own = class.index_of(lo, p, a);
            let k = rng.random_range(0..class.count - 1);
            class.nth(lo, p, if k >= own { k + 1 } else { k })
        }
    }
}

/// The customers of a range `lo..hi` that live in one partition: every `p`-th from `lo + first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Class {
    first: u64,
    count: u64,
}

impl Class {
    /// The customers of `lo..hi` in partition `r` of `p`.
    fn of(lo: u64, hi: u64, p: u64, r: u64) -> Class {
        let len = hi - lo;
        let first = (r + p - lo % p) % p;
        let count = if first < len {
            (len - 1 - first) / p + 1
        } else {
            0
        };
        Class { first, count }
    }

    /// The `k`-th member (`k < count`).
    fn nth(self, lo: u64, p: u64, k: u64) -> u64 {
        lo + self.first + k * p
    }

    /// The index of member `c`.
    fn index_of(self, lo: u64, p: u64, c: u64) -> u64 {
        (c - lo - self.first) / p
    }

    /// The `j`-th customer of the range that is not a member (`j < len - count`, so `p >= 2`):
    /// the `first` offsets before the first member, then runs of `p - 1` between members.
    fn nth_outside(self, lo: u64, p: u64, j: u64) -> u64 {
        if j < self.first {
            return lo + j;
        }
        let j = j - self.first;
        lo + self.first + (j / (p - 1)) * p + 1 + j % (p - 1)
    }
}

impl Workload for SmallBank {
    fn name(&self) -> &'static str {
        "smallbank"
    }

    fn next(&self, _home: NodeId, rng: &mut ChaCha8Rng) -> Box<dyn Procedure> {
        let s = &self.settings;
        let kind = self.draw_kind(rng);
        let hot = rng.random::<f64>() < s.hotspot_fraction;
        let (lo, hi) = if hot {
            (0, s.hotspot_customers)
        } else {
            (0, s.customers)
        };
        let a = rng.random_range(lo..hi);
        let b = if kind.two_customers() {
            self.second(lo, hi, a, rng)
        } else {
            a
        };
        Box::new(Txn {
            kind,
            a,
            b,
            amount: kind.amount(),
            initial: s.initial_balance,
            tally: Arc::clone(&self.tally),
            effect: 0,
        })
    }

    fn settings(&self) -> serde_json::Value {
        let s = &self.settings;
        let weights: serde_json::Map<String, serde_json::Value> = Kind::ALL
            .iter()
            .zip(s.weights)
            .map(|(k, w)| (k.name().to_string(), w.into()))
            .collect();
        let multi_partition = match s.multi_partition {
            MultiPartition::Uniform => serde_json::json!("uniform"),
            MultiPartition::Probability(p) => serde_json::json!(p),
        };
        serde_json::json!({
            "customers": s.customers,
            "hotspot_customers": s.hotspot_customers,
            "hotspot_fraction": s.hotspot_fraction,
            "initial_balance": s.initial_balance,
            "mix": s.mix,
            "weights": weights,
            "multi_partition": multi_partition,
        })
    }

    fn audit(&self) -> Option<Box<dyn Audit>> {
        Some(Box::new(SmallBankAudit {
            customers: self.settings.customers,
            initial: self.settings.initial_balance,
            tally: Arc::clone(&self.tally),
        }))
    }
}

fn account_key(c: u64) -> Key {
    Key::tagged(c as u32, b"acct")
}

fn savings_key(c: u64) -> Key {
    Key::tagged(c as u32, b"sav")
}

fn checking_key(c: u64) -> Key {
    Key::tagged(c as u32, b"chk")
}

/// A stored balance (absent: the opening balance), or `None` if it does not parse.
fn decode(value: Option<&Value>, initial: i64) -> Option<i64> {
    match value {
        None => Some(initial),
        Some(v) => std::str::from_utf8(v).ok()?.trim().parse().ok(),
    }
}

fn rollback() -> TxnError {
    TxnError::Aborted(AbortReason::UserRollback)
}

/// The rows one transaction works on.
struct Rows<'a> {
    ops: &'a mut dyn Ops,
    initial: i64,
}

impl Rows<'_> {
    /// Look customer `c` up by name; roll back unless the row names `c`.
    async fn lookup(&mut self, c: u64) -> Result<(), TxnError> {
        match self.ops.read(&account_key(c)).await? {
            None => Ok(()),
            Some(v) => match std::str::from_utf8(&v).map(|s| s.trim().parse::<u64>()) {
                Ok(Ok(id)) if id == c => Ok(()),
                _ => Err(rollback()),
            },
        }
    }

    async fn balance(&mut self, key: &Key) -> Result<i64, TxnError> {
        let value = self.ops.read(key).await?;
        decode(value.as_ref(), self.initial).ok_or_else(rollback)
    }

    fn set(&mut self, key: Key, balance: i64) -> Result<(), TxnError> {
        self.ops.write(key, Some(Bytes::from(balance.to_string())))
    }
}

/// One SmallBank transaction.
struct Txn {
    kind: Kind,
    /// The customer, or the source of `amalgamate` and `send-payment`.
    a: u64,
    /// The destination of `amalgamate` and `send-payment` (else `a`).
    b: u64,
    /// V, in cents.
    amount: i64,
    initial: i64,
    tally: Arc<Tally>,
    /// What the last attempt moved into (positive) or out of the bank, if it ran to the end.
    effect: i64,
}

/// A transaction's one-shot arguments; the type is the procedure's name. The tally and the effect
/// are the client's bookkeeping for [`Procedure::finished`], so a call leaves them out.
#[derive(Serialize, Deserialize)]
struct TxnArgs {
    a: u64,
    b: u64,
    amount: i64,
    initial: i64,
}

impl Txn {
    /// Run the body; returns the money it moves into (positive) or out of the bank.
    async fn body(&self, ops: &mut dyn Ops) -> Result<i64, TxnError> {
        let (a, b, v) = (self.a, self.b, self.amount);
        let mut rows = Rows {
            ops,
            initial: self.initial,
        };
        match self.kind {
            Kind::Balance => {
                rows.lookup(a).await?;
                rows.balance(&savings_key(a)).await?;
                rows.balance(&checking_key(a)).await?;
                Ok(0)
            }
            Kind::DepositChecking => {
                rows.lookup(a).await?;
                if v < 0 {
                    return Err(rollback());
                }
                let checking = rows.balance(&checking_key(a)).await?;
                let new = checking.checked_add(v).ok_or_else(rollback)?;
                rows.set(checking_key(a), new)?;
                Ok(v)
            }
            Kind::TransactSavings => {
                rows.lookup(a).await?;
                let savings = rows.balance(&savings_key(a)).await?;
                let new = savings.checked_add(v).ok_or_else(rollback)?;
                if new < 0 {
                    return Err(rollback());
                }
                rows.set(savings_key(a), new)?;
                Ok(v)
            }
            Kind::Amalgamate => {
                rows.lookup(a).await?;
                rows.lookup(b).await?;
                let savings = rows.balance(&savings_key(a)).await?;
                let checking = rows.balance(&checking_key(a)).await?;
                let total = savings.checked_add(checking).ok_or_else(rollback)?;
                rows.set(savings_key(a), 0)?;
                rows.set(checking_key(a), 0)?;
                // Read after emptying A, so the money is conserved even if A is B.
                let to = rows.balance(&checking_key(b)).await?;
                let new = to.checked_add(total).ok_or_else(rollback)?;
                rows.set(checking_key(b), new)?;
                Ok(0)
            }
            Kind::WriteCheck => {
                rows.lookup(a).await?;
                let savings = rows.balance(&savings_key(a)).await?;
                let checking = rows.balance(&checking_key(a)).await?;
                let total = savings.checked_add(checking).ok_or_else(rollback)?;
                let debit = if total < v {
                    v.checked_add(OVERDRAFT_PENALTY).ok_or_else(rollback)?
                } else {
                    v
                };
                let new = checking.checked_sub(debit).ok_or_else(rollback)?;
                rows.set(checking_key(a), new)?;
                Ok(-debit)
            }
            Kind::SendPayment => {
                rows.lookup(a).await?;
                rows.lookup(b).await?;
                let from = rows.balance(&checking_key(a)).await?;
                if from < v {
                    return Err(rollback());
                }
                rows.set(checking_key(a), from.checked_sub(v).ok_or_else(rollback)?)?;
                // Read after the debit, so the money is conserved even if A is B.
                let to = rows.balance(&checking_key(b)).await?;
                let new = to.checked_add(v).ok_or_else(rollback)?;
                rows.set(checking_key(b), new)?;
                Ok(0)
            }
        }
    }
}

impl Procedure for Txn {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn read_only(&self) -> bool {
        self.kind == Kind::Balance
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            self.effect = 0;
            self.effect = self.body(ops).await?;
            Ok(())
        })
    }

    fn finished(&mut self, outcome: &Outcome) {
        let effect = std::mem::take(&mut self.effect);
        self.tally.record(effect, outcome);
    }

    fn call(&self) -> Option<ProcedureCall> {
        let args = TxnArgs {
            a: self.a,
            b: self.b,
            amount: self.amount,
            initial: self.initial,
        };
        Some(ProcedureCall::encode("smallbank", self.name(), &args))
    }
}

/// The `smallbank` procedure `call` names, rebuilt from its arguments. It tallies into a tally of
/// its own: only the client's copy reports to the workload's audit.
pub(crate) fn instantiate(call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
    let Some(kind) = Kind::ALL.into_iter().find(|k| k.name() == call.procedure) else {
        return Err(crate::unknown_procedure(call));
    };
    let TxnArgs {
        a,
        b,
        amount,
        initial,
    } = call.decode()?;
    Ok(Box::new(Txn {
        kind,
        a,
        b,
        amount,
        initial,
        tally: Arc::default(),
        effect: 0,
    }))
}

/// `smallbank-total` and `smallbank-no-garbage`.
struct SmallBankAudit {
    customers: u64,
    initial: i64,
    tally: Arc<Tally>,
}

/// How many offending rows a failed condition names.
const SHOWN: usize = 5;

impl Audit for SmallBankAudit {
    fn run<'a>(
        &'a mut self,
        ops: &'a mut dyn Ops,
    ) -> BoxFuture<'a, Result<Vec<Condition>, TxnError>> {
        Box::pin(async move {
            let mut sum: i128 = 0;
            let mut garbage = 0u64;
            let mut shown = Vec::new();
            for c in 0..self.customers {
                for key in [savings_key(c), checking_key(c)] {
                    let value = ops.read(&key).await?;
                    match decode(value.as_ref(), self.initial) {
                        Some(balance) => sum += i128::from(balance),
                        None => {
                            garbage += 1;
                            if shown.len() < SHOWN {
                                let text = value
                                    .map(|v| String::from_utf8_lossy(&v).into_owned())
                                    .unwrap_or_default();
                                shown.push(format!("{key} = {text:?}"));
                            }
                        }
                    }
                }
            }
            let rows = 2 * self.customers;
            let no_garbage = Condition {
                name: "smallbank-no-garbage".into(),
                passed: garbage == 0,
                detail: if garbage == 0 {
                    format!("all {rows} balances parse")
                } else {
                    format!(
                        "{garbage} of {rows} balances do not parse, first: {}",
                        shown.join(", ")
                    )
                },
            };
            Ok(vec![self.total(sum, garbage), no_garbage])
        })
    }

    /// The audit reads every customer's two balances in a fixed order; the tally of money
    /// moved stays with this copy, which evaluates the conditions over what the node read.
    fn call(&self) -> Option<ProcedureCall> {
        let keys = (0..self.customers)
            .flat_map(|c| [savings_key(c), checking_key(c)])
            .collect();
        Some(crate::read_call(keys))
    }
}

impl SmallBankAudit {
    fn total(&self, sum: i128, garbage: u64) -> Condition {
        let net = self.tally.net.load(Ordering::Relaxed);
        let committed = self.tally.committed.load(Ordering::Relaxed);
        let tolerance = self.tally.unknown.load(Ordering::Relaxed);
        let unknown_attempts = self.tally.unknown_attempts.load(Ordering::Relaxed);
        let (n, initial) = (self.customers, self.initial);
        let expected = i128::from(n) * 2 * i128::from(initial) + i128::from(net);
        let rows = 2 * n;
        let why = format!(
            "{n} customers × 2 × {initial} opening + {net} net moved in and out by \
             {committed} committed deposit-checking, transact-savings and write-check transactions"
        );
        let slack = if tolerance > 0 {
            format!("; ±{tolerance} for {unknown_attempts} attempts of unknown outcome")
        } else {
            String::new()
        };
        let (passed, detail) = if garbage > 0 {
            let detail = format!(
                "cannot sum the {rows} balances: {garbage} do not parse (expected {expected} = \
                 {why})"
            );
            (false, detail)
        } else {
            let off = sum - expected;
            if off.unsigned_abs() <= u128::from(tolerance) {
                let detail = format!(
                    "the {rows} balances sum to {sum} cents; expected {expected} = {why}{slack}"
                );
                (true, detail)
            } else {
                let detail = format!(
                    "the {rows} balances sum to {sum} cents, {off:+} off the expected {expected} \
                     = {why}{slack}"
                );
                (false, detail)
            }
        };
        Condition {
            name: "smallbank-total".into(),
            passed,
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use crate::list_append::fake::{FakeOps, call_names};
    use augur_client::ProcedureCatalog;
    use augur_types::{LatencyProfile, Timestamp};
    use rand::SeedableRng;

    fn placement(nodes: usize) -> Arc<Placement> {
        let lan = LatencyProfile::named("lan").unwrap();
        Arc::new(Placement::ring(lan, nodes, 1).unwrap())
    }

    fn workload_on(nodes: usize, set: &[(&str, &str)]) -> Result<SmallBank, WorkloadError> {
        let given = set
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SmallBank::new(&given, placement(nodes))
    }

    fn workload(set: &[(&str, &str)]) -> Result<SmallBank, WorkloadError> {
        workload_on(3, set)
    }

    const COMMITTED: Outcome = Outcome::Committed {
        commit_ts: Timestamp(1),
    };

    /// A transaction of `kind` on customers `a` and `b` with amount `v`, opening balances 1000.
    fn txn(kind: Kind, a: u64, b: u64, v: i64, tally: &Arc<Tally>) -> Txn {
        Txn {
            kind,
            a,
            b,
            amount: v,
            initial: 1000,
            tally: Arc::clone(tally),
            effect: 0,
        }
    }

    fn get(ops: &FakeOps, key: Key) -> String {
        ops.get(&key).unwrap()
    }

    /// Run `p`; commit and report it committed if it succeeds, else discard its writes.
    fn run_commit(ops: &mut FakeOps, p: &mut dyn Procedure) -> Result<(), TxnError> {
        let result = ops.run(p);
        match &result {
            Ok(()) => {
                ops.commit();
                p.finished(&COMMITTED);
            }
            Err(e) => {
                ops.buffered.clear();
                ops.log.clear();
                let reason = match e {
                    TxnError::Aborted(r) => *r,
                    _ => AbortReason::InvalidRequest,
                };
                p.finished(&Outcome::Aborted(reason));
            }
        }
        result
    }

    fn audit(w: &SmallBank, ops: &mut FakeOps) -> Vec<Condition> {
        let mut audit = w.audit().unwrap();
        futures::executor::block_on(audit.run(ops)).unwrap()
    }

    #[test]
    fn keys_keep_a_customer_in_one_partition() {
        let pl = placement(3);
        for c in [0u64, 1, 5, 100, 9999] {
            let p = pl.partition_of(&account_key(c));
            assert_eq!(p.0 as u64, c % 3);
            assert_eq!(pl.partition_of(&savings_key(c)), p);
            assert_eq!(pl.partition_of(&checking_key(c)), p);
        }
        assert_eq!(savings_key(42).to_string(), "42/sav");
        assert_eq!(checking_key(42).to_string(), "42/chk");
        assert_eq!(account_key(42).to_string(), "42/acct");
    }

    #[test]
    fn balance_reads_one_customer() {
        let tally = Arc::new(Tally::default());
        let mut ops = FakeOps::default();
        ops.set(savings_key(3), "70");
        let mut p = txn(Kind::Balance, 3, 3, 0, &tally);
        assert!(p.read_only());
        assert_eq!(p.name(), "balance");
        ops.run(&mut p).unwrap();
        assert_eq!(ops.log, ["r 3/acct -", "r 3/sav 70", "r 3/chk -"]);
        assert!(ops.buffered.is_empty());
        assert_eq!(p.effect, 0);
    }

    #[test]
    fn deposit_checking_adds_and_refuses_negative_amounts() {
        let tally = Arc::new(Tally::default());
        let mut ops = FakeOps::default();
        let mut p = txn(Kind::DepositChecking, 1, 1, 130, &tally);
        assert!(!p.read_only());
        run_commit(&mut ops, &mut p).unwrap();
        assert_eq!(get(&ops, checking_key(1)), "1130");
        assert_eq!(tally.net.load(Ordering::Relaxed), 130);
        let mut p = txn(Kind::DepositChecking, 1, 1, -1, &tally);
        let e = ops.run(&mut p).unwrap_err();
        assert_eq!(e, TxnError::Aborted(AbortReason::UserRollback));
        assert_eq!(ops.log, ["r 1/acct -"]);
        assert!(ops.buffered.is_empty());
        p.finished(&Outcome::Aborted(AbortReason::UserRollback));
        assert_eq!(tally.net.load(Ordering::Relaxed), 130);
    }

    #[test]
    fn transact_savings_never_goes_negative() {
        let tally = Arc::new(Tally::default());
        let mut ops = FakeOps::default();
        run_commit(
            &mut ops,
            &mut txn(Kind::TransactSavings, 2, 2, 2020, &tally),
        )
        .unwrap();
        assert_eq!(get(&ops, savings_key(2)), "3020");
        run_commit(
            &mut ops,
            &mut txn(Kind::TransactSavings, 2, 2, -3020, &tally),
        )
        .unwrap();
        assert_eq!(get(&ops, savings_key(2)), "0");
        let mut p = txn(Kind::TransactSavings, 2, 2, -1, &tally);
        let e = run_commit(&mut ops, &mut p).unwrap_err();
        assert_eq!(e, TxnError::Aborted(AbortReason::UserRollback));
        assert_eq!(get(&ops, savings_key(2)), "0");
        assert_eq!(tally.net.load(Ordering::Relaxed), -1000);
        assert_eq!(tally.committed.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn amalgamate_moves_everything_into_the_destination_checking() {
        let tally = Arc::new(Tally::default());
        let mut ops = FakeOps::default();
        ops.set(savings_key(0), "300");
        ops.set(checking_key(0), "-50");
        ops.set(checking_key(4), "7");
        let mut p = txn(Kind::Amalgamate, 0, 4, 0, &tally);
        ops.run(&mut p).unwrap();
        assert_eq!(
            ops.log,
            [
                "r 0/acct -",
                "r 4/acct -",
                "r 0/sav 300",
                "r 0/chk -50",
                "w 0/sav 0",
                "w 0/chk 0",
                "r 4/chk 7",
                "w 4/chk 257",
            ]
        );
        ops.commit();
        p.finished(&COMMITTED);
        assert_eq!(tally.net.load(Ordering::Relaxed), 0);
        // An absent source holds its opening balances.
        run_commit(&mut ops, &mut txn(Kind::Amalgamate, 5, 4, 0, &tally)).unwrap();
        assert_eq!(get(&ops, checking_key(4)), "2257");
        assert_eq!(get(&ops, savings_key(5)), "0");
        assert_eq!(get(&ops, checking_key(5)), "0");
        // Onto itself, nothing is lost.
        run_commit(&mut ops, &mut txn(Kind::Amalgamate, 6, 6, 0, &tally)).unwrap();
        assert_eq!(get(&ops, checking_key(6)), "2000");
        assert_eq!(get(&ops, savings_key(6)), "0");
    }

    #[test]
    fn write_check_charges_the_overdraft_penalty() {
        let tally = Arc::new(Tally::default());
        let mut ops = FakeOps::default();
        ops.set(savings_key(1), "200");
        ops.set(checking_key(1), "300");
        // Covered exactly: no penalty.
        run_commit(&mut ops, &mut txn(Kind::WriteCheck, 1, 1, 500, &tally)).unwrap();
        assert_eq!(get(&ops, checking_key(1)), "-200");
        assert_eq!(get(&ops, savings_key(1)), "200");
        assert_eq!(tally.net.load(Ordering::Relaxed), -500);
        // Now savings + checking = 0 < 500: the check costs 500 + 100.
        run_commit(&mut ops, &mut txn(Kind::WriteCheck, 1, 1, 500, &tally)).unwrap();
        assert_eq!(get(&ops, checking_key(1)), "-800");
        assert_eq!(tally.net.load(Ordering::Relaxed), -1100);
    }

    #[test]
    fn send_payment_moves_money_or_rolls_back() {
        let tally = Arc::new(Tally::default());
        let mut ops = FakeOps::default();
        ops.set(checking_key(1), "600");
        let mut p = txn(Kind::SendPayment, 1, 2, 500, &tally);
        ops.run(&mut p).unwrap();
        assert_eq!(
            ops.log,
            [
                "r 1/acct -",
                "r 2/acct -",
                "r 1/chk 600",
                "w 1/chk 100",
                "r 2/chk -",
                "w 2/chk 1500",
            ]
        );
        ops.commit();
        p.finished(&COMMITTED);
        let mut p = txn(Kind::SendPayment, 1, 2, 500, &tally);
        let e = run_commit(&mut ops, &mut p).unwrap_err();
        assert_eq!(e, TxnError::Aborted(AbortReason::UserRollback));
        assert_eq!(get(&ops, checking_key(1)), "100");
        assert_eq!(get(&ops, checking_key(2)), "1500");
        assert_eq!(tally.net.load(Ordering::Relaxed), 0);
        assert_eq!(tally.committed.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn garbage_and_foreign_accounts_roll_back() {
        let tally = Arc::new(Tally::default());
        let mut ops = FakeOps::default();
        ops.set(checking_key(1), "lots");
        let e = ops
            .run(&mut txn(Kind::DepositChecking, 1, 1, 130, &tally))
            .unwrap_err();
        assert_eq!(e, TxnError::Aborted(AbortReason::UserRollback));
        assert!(ops.buffered.is_empty());
        ops.set(account_key(2), "3");
        assert!(ops.run(&mut txn(Kind::Balance, 2, 2, 0, &tally)).is_err());
        ops.set(account_key(2), "2");
        ops.run(&mut txn(Kind::Balance, 2, 2, 0, &tally)).unwrap();
    }

    #[test]
    fn finished_tallies_only_committed_and_unknown_attempts() {
        let tally = Arc::new(Tally::default());
        let mut ops = FakeOps::default();
        let mut p = txn(Kind::WriteCheck, 1, 1, 500, &tally);
        ops.run(&mut p).unwrap();
        p.finished(&Outcome::Aborted(AbortReason::WriteWriteConflict));
        ops.buffered.clear();
        assert_eq!(tally.net.load(Ordering::Relaxed), 0);
        // The retry commits.
        ops.run(&mut p).unwrap();
        p.finished(&COMMITTED);
        assert_eq!(tally.net.load(Ordering::Relaxed), -500);
        // A second report of the same attempt counts nothing.
        p.finished(&COMMITTED);
        assert_eq!(tally.net.load(Ordering::Relaxed), -500);
        ops.run(&mut p).unwrap();
        p.finished(&Outcome::Unknown);
        assert_eq!(tally.net.load(Ordering::Relaxed), -500);
        assert_eq!(tally.unknown.load(Ordering::Relaxed), 500);
        assert_eq!(tally.unknown_attempts.load(Ordering::Relaxed), 1);
        assert_eq!(tally.committed.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_mix_follows_the_weights() {
        let w = workload(&[]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        let draws = 40_000;
        for _ in 0..draws {
            let p = w.next(NodeId(0), &mut rng);
            *counts.entry(p.name()).or_default() += 1;
            assert_eq!(p.read_only(), p.name() == "balance");
        }
        for (kind, weight) in Kind::ALL.iter().zip(STANDARD_MIX) {
            let share = f64::from(counts[kind.name()]) / f64::from(draws);
            let want = f64::from(weight) / 100.0;
            assert!((share - want).abs() < 0.01, "{}: {share}", kind.name());
        }
        let w = workload(&[("mix", "write-check:3, balance:1")]).unwrap();
        let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
        for _ in 0..4000 {
            *seen.entry(w.next(NodeId(0), &mut rng).name()).or_default() += 1;
        }
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!((2800..3200).contains(&seen["write-check"]), "{seen:?}");
    }

    /// The customers a transaction works on, from its log.
    fn customers_of(p: &mut dyn Procedure) -> Vec<u64> {
        let mut ops = FakeOps::default();
        ops.run(p).unwrap_or(());
        ops.log
            .iter()
            .filter(|l| l.contains("/acct"))
            .map(|l| l[2..].split('/').next().unwrap().parse().unwrap())
            .collect()
    }

    #[test]
    fn the_hotspot_draws_a_share_of_transactions() {
        let w = workload(&[
            ("customers", "1000"),
            ("hotspot_customers", "10"),
            ("hotspot_fraction", "0.8"),
        ])
        .unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let mut hot = 0;
        for _ in 0..5000 {
            let mut p = w.next(NodeId(0), &mut rng);
            let cs = customers_of(p.as_mut());
            assert!(cs.iter().all(|c| *c < 1000));
            if cs.iter().all(|c| *c < 10) {
                hot += 1;
            }
        }
        // 80% from the hotspot, plus about 1% (or 0.01%) of the others by chance.
        assert!((3900..4200).contains(&hot), "{hot}");
        let w = workload(&[("customers", "50"), ("hotspot_fraction", "0")]).unwrap();
        let mut seen = [false; 50];
        for _ in 0..2000 {
            for c in customers_of(w.next(NodeId(0), &mut rng).as_mut()) {
                seen[c as usize] = true;
            }
        }
        assert!(seen.iter().all(|s| *s));
    }

    /// The (first, second) customers of `draws` two-customer transactions.
    fn pairs(w: &SmallBank, draws: usize) -> Vec<(u64, u64)> {
        let mut rng = ChaCha8Rng::seed_from_u64(13);
        let mut out = Vec::new();
        while out.len() < draws {
            let mut p = w.next(NodeId(0), &mut rng);
            if matches!(p.name(), "amalgamate" | "send-payment") {
                let cs = customers_of(p.as_mut());
                assert_eq!(cs.len(), 2);
                assert_ne!(cs[0], cs[1]);
                out.push((cs[0], cs[1]));
            }
        }
        out
    }

    #[test]
    fn multi_partition_places_the_second_customer() {
        let cross = |w: &SmallBank| {
            let ps = pairs(w, 2000);
            ps.iter().filter(|(a, b)| a % 3 != b % 3).count() as f64 / ps.len() as f64
        };
        let always = workload(&[("multi_partition", "1")]).unwrap();
        assert_eq!(cross(&always), 1.0);
        let never = workload(&[("multi_partition", "0")]).unwrap();
        assert_eq!(cross(&never), 0.0);
        let half = workload(&[("multi_partition", "0.5")]).unwrap();
        assert!((cross(&half) - 0.5).abs() < 0.05);
        let uniform = workload(&[]).unwrap();
        assert!((cross(&uniform) - 2.0 / 3.0).abs() < 0.05);
        // One partition: cross-partition pairs are impossible, so the pair shares it.
        let single = workload_on(1, &[("multi_partition", "1")]).unwrap();
        assert_eq!(pairs(&single, 200).len(), 200);
        // A two-customer hotspot over three partitions: never the same partition.
        let tiny = workload(&[
            ("multi_partition", "0"),
            ("hotspot_customers", "2"),
            ("hotspot_fraction", "1"),
        ])
        .unwrap();
        assert!(
            pairs(&tiny, 200)
                .iter()
                .all(|p| *p == (0, 1) || *p == (1, 0))
        );
    }

    #[test]
    fn partition_classes_enumerate_exactly() {
        for p in 1..5u64 {
            for lo in 0..5u64 {
                for hi in lo + 1..lo + 12 {
                    for r in 0..p {
                        let class = Class::of(lo, hi, p, r);
                        let members: Vec<u64> = (lo..hi).filter(|c| c % p == r).collect();
                        let others: Vec<u64> = (lo..hi).filter(|c| c % p != r).collect();
                        assert_eq!(class.count, members.len() as u64);
                        let nth: Vec<u64> = (0..class.count).map(|k| class.nth(lo, p, k)).collect();
                        assert_eq!(nth, members);
                        for (k, c) in members.iter().enumerate() {
                            assert_eq!(class.index_of(lo, p, *c), k as u64);
                        }
                        let outside: Vec<u64> = (0..others.len() as u64)
                            .map(|j| class.nth_outside(lo, p, j))
                            .collect();
                        assert_eq!(outside, others, "p={p} lo={lo} hi={hi} r={r}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_audit_holds_after_committed_procedures_and_catches_changes() {
        let w = workload(&[
            ("customers", "6"),
            ("hotspot_customers", "3"),
            ("initial_balance", "1000"),
        ])
        .unwrap();
        assert!(w.load().is_empty());
        let mut rng = ChaCha8Rng::seed_from_u64(14);
        let mut ops = FakeOps::default();
        let (mut rollbacks, mut overdrawn) = (0, false);
        for i in 0..600 {
            let mut p = w.next(NodeId(0), &mut rng);
            // Some attempts first abort for a protocol reason, and are retried.
            if i % 5 == 0 && ops.run(p.as_mut()).is_ok() {
                ops.buffered.clear();
                p.finished(&Outcome::Aborted(AbortReason::WriteWriteConflict));
            }
            ops.log.clear();
            if run_commit(&mut ops, p.as_mut()).is_err() {
                rollbacks += 1;
            }
            overdrawn |= ops
                .store
                .values()
                .any(|v| std::str::from_utf8(v).unwrap().parse::<i64>().unwrap() < 0);
        }
        let net = w.tally.net.load(Ordering::Relaxed);
        assert!(rollbacks > 0 && overdrawn, "{rollbacks} rollbacks");
        let conditions = audit(&w, &mut ops);
        assert_eq!(conditions.len(), 2);
        assert!(conditions.iter().all(|c| c.passed), "{conditions:?}");
        assert_eq!(conditions[0].name, "smallbank-total");
        assert_eq!(conditions[1].name, "smallbank-no-garbage");
        assert!(
            conditions[0].detail.contains(&format!("{}", 12_000 + net)),
            "{}",
            conditions[0].detail
        );

        // Money appearing from nowhere fails the total.
        let key = checking_key(4);
        let old = decode(ops.store.get(&key), 1000).unwrap();
        ops.set(key.clone(), &(old + 1).to_string());
        let conditions = audit(&w, &mut ops);
        assert!(
            !conditions[0].passed && conditions[1].passed,
            "{conditions:?}"
        );
        assert!(conditions[0].detail.contains("+1 off"), "{conditions:?}");
        // A balance that does not parse fails both.
        ops.set(key, "NaN");
        let conditions = audit(&w, &mut ops);
        assert!(!conditions[0].passed && !conditions[1].passed);
        assert!(conditions[1].detail.contains("4/chk"), "{conditions:?}");
    }

    #[test]
    fn unknown_outcomes_widen_the_total() {
        let w = workload(&[("customers", "4"), ("hotspot_fraction", "0")]).unwrap();
        let mut ops = FakeOps::default();
        let mut p = txn(Kind::DepositChecking, 1, 1, 130, &w.tally);
        p.initial = 1_000_000;
        ops.run(&mut p).unwrap();
        p.finished(&Outcome::Unknown);
        // Whether or not it took effect, the audit passes.
        let conditions = audit(&w, &mut ops);
        assert!(conditions[0].passed, "{conditions:?}");
        assert!(conditions[0].detail.contains("±130"), "{conditions:?}");
        ops.commit();
        assert!(audit(&w, &mut ops)[0].passed);
        ops.set(checking_key(1), "1000131");
        assert!(!audit(&w, &mut ops)[0].passed);
    }

    #[test]
    fn settings_are_echoed_and_validated() {
        let w = workload(&[]).unwrap();
        assert_eq!(
            w.settings(),
            serde_json::json!({
                "customers": 10000,
                "hotspot_customers": 100,
                "hotspot_fraction": 0.9,
                "initial_balance": 1000000,
                "mix": "standard",
                "weights": {
                    "amalgamate": 15, "balance": 15, "deposit-checking": 15,
                    "send-payment": 25, "transact-savings": 15, "write-check": 15
                },
                "multi_partition": "uniform",
            })
        );
        let w = workload(&[("mix", "0,100,0,0,0,0"), ("multi_partition", "0.25")]).unwrap();
        assert_eq!(w.settings()["weights"]["balance"], 100);
        assert_eq!(w.settings()["multi_partition"], 0.25);
        assert_eq!(w.settings.weights, [0, 100, 0, 0, 0, 0]);
        let mut rng = ChaCha8Rng::seed_from_u64(15);
        assert!((0..50).all(|_| w.next(NodeId(0), &mut rng).read_only()));
        let e = workload(&[("accounts", "3")]).err().unwrap();
        assert!(matches!(e, WorkloadError::UnknownSetting { .. }), "{e}");
        for bad in [
            vec![("customers", "1")],
            vec![("customers", "16777217")],
            vec![("customers", "many")],
            vec![("customers", "50")],
            vec![("hotspot_customers", "1")],
            vec![("hotspot_fraction", "1.5")],
            vec![("initial_balance", "-1")],
            vec![("initial_balance", "9223372036854775807")],
            vec![("mix", "uniform")],
            vec![("mix", "1,2,3")],
            vec![("mix", "0,0,0,0,0,0")],
            vec![("mix", "1,2,3,4,5,x")],
            vec![("mix", "balance:1,deposit:2")],
            vec![("mix", "balance:1,balance:2")],
            vec![("mix", "balance:1,2")],
            vec![("multi_partition", "sometimes")],
            vec![("multi_partition", "2")],
        ] {
            let e = workload(&bad).err().unwrap();
            assert!(matches!(e, WorkloadError::BadValue { .. }), "{bad:?}: {e}");
        }
        // Without a hotspot its size does not matter.
        workload(&[("customers", "50"), ("hotspot_fraction", "0")]).unwrap();
        workload(&[("customers", "50"), ("hotspot_customers", "50")]).unwrap();
    }

    #[test]
    fn calls_replay_on_the_node() {
        // A small bank, so that transactions meet the rows earlier ones wrote.
        let w = workload(&[("customers", "40"), ("hotspot_customers", "8")]).unwrap();
        crate::testing::assert_calls_replay(&w, 3, 400);
        let mut kinds: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        kinds.sort();
        assert_eq!(call_names(&w, 400), kinds);
        let set = [
            ("customers", "40"),
            ("hotspot_customers", "8"),
            ("initial_balance", "600"),
            (
                "mix",
                "write-check:30,send-payment:30,amalgamate:20,balance:20",
            ),
            ("multi_partition", "0.5"),
        ];
        crate::testing::assert_calls_replay(&workload(&set).unwrap(), 3, 300);
    }

    #[test]
    fn a_rebuilt_transaction_tallies_apart_from_the_clients() {
        let tally = Arc::new(Tally::default());
        let mut p = txn(Kind::DepositChecking, 1, 1, 130, &tally);
        let mut rebuilt = Catalog.instantiate(&p.call().unwrap()).unwrap();
        let mut ops = FakeOps::default();
        ops.run(rebuilt.as_mut()).unwrap();
        rebuilt.finished(&COMMITTED);
        assert_eq!(tally.net.load(Ordering::Relaxed), 0);
        // The client replays the attempt and reports it.
        ops.run(&mut p).unwrap();
        p.finished(&COMMITTED);
        assert_eq!(tally.net.load(Ordering::Relaxed), 130);
    }

    #[test]
    fn bad_calls_are_refused() {
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        crate::testing::assert_refuses_bad_calls("smallbank", "withdraw", &names);
        // An amount that would overflow the source rolls back rather than wrapping.
        let tally = Arc::new(Tally::default());
        let mut ops = FakeOps::default();
        let e = ops
            .run(&mut txn(Kind::SendPayment, 1, 2, i64::MIN + 1, &tally))
            .unwrap_err();
        assert_eq!(e, TxnError::Aborted(AbortReason::UserRollback));
    }
}
