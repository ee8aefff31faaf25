//! Benchmark statistics and their reports: the table printed at the end of `augur bench` and
//! `summary.json`.

use crate::bench::BenchConfig;
use augur_protocols::registry::{IsolationLevel, ProtocolInfo};
use augur_types::AbortReason;
use augur_workloads::Condition;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// What one client (or, merged, a whole run) observed inside the measurement window.
pub struct RunStats {
    pub committed: u64,
    /// Aborted attempts, user rollbacks excluded.
    pub aborted: u64,
    /// Transactions the workload itself rolled back (TPC-C's 1% NewOrder, SmallBank's
    /// insufficient funds): completed, but nothing committed.
    pub user_rollbacks: u64,
    pub unknown: u64,
    /// Attempts beyond the first, over all transactions.
    pub retries: u64,
    pub aborts_by_reason: BTreeMap<AbortReason, u64>,
    pub per_type: BTreeMap<&'static str, TypeCounts>,
    /// Commit latency in microseconds, first attempt to commit.
    pub latency_us: Histogram<u64>,
    /// The workload's consistency conditions, when `--check` ran them.
    pub checks: Option<Vec<Condition>>,
}

/// Counters of one transaction type.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TypeCounts {
    pub committed: u64,
    pub aborted: u64,
    pub user_rollbacks: u64,
    pub unknown: u64,
    pub retries: u64,
    pub aborts_by_reason: BTreeMap<&'static str, u64>,
}

impl Default for RunStats {
    fn default() -> Self {
        RunStats {
            committed: 0,
            aborted: 0,
            unknown: 0,
            aborts_by_reason: BTreeMap::new(),
            per_type: BTreeMap::new(),
            latency_us: Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds"),
            user_rollbacks: 0,
            retries: 0,
            checks: None,
        }
    }
}

impl RunStats {
    pub fn record_commit(&mut self, txn_type: &'static str, latency: Duration) {
        self.committed += 1;
        self.per_type.entry(txn_type).or_default().committed += 1;
        self.latency_us
            .saturating_record(latency.as_micros().max(1) as u64);
    }

    pub fn record_abort(&mut self, txn_type: &'static str, reason: AbortReason) {
        let counts = self.per_type.entry(txn_type).or_default();
        if reason == AbortReason::UserRollback {
            self.user_rollbacks += 1;
            counts.user_rollbacks += 1;
            return;
        }
        self.aborted += 1;
        *self.aborts_by_reason.entry(reason).or_default() += 1;
        counts.aborted += 1;
        *counts.aborts_by_reason.entry(reason.name()).or_default() += 1;
    }

    pub fn record_retry(&mut self, txn_type: &'static str) {
        self.retries += 1;
        self.per_type.entry(txn_type).or_default().retries += 1;
    }

    pub fn record_unknown(&mut self, txn_type: &'static str) {
        self.unknown += 1;
        self.per_type.entry(txn_type).or_default().unknown += 1;
    }

    pub fn merge(&mut self, other: RunStats) {
        self.committed += other.committed;
        self.aborted += other.aborted;
        self.user_rollbacks += other.user_rollbacks;
        self.unknown += other.unknown;
        self.retries += other.retries;
        for (r, n) in other.aborts_by_reason {
            *self.aborts_by_reason.entry(r).or_default() += n;
        }
        for (t, c) in other.per_type {
            let mine = self.per_type.entry(t).or_default();
            mine.committed += c.committed;
            mine.aborted += c.aborted;
            mine.user_rollbacks += c.user_rollbacks;
            mine.unknown += c.unknown;
            mine.retries += c.retries;
            for (r, n) in c.aborts_by_reason {
                *mine.aborts_by_reason.entry(r).or_default() += n;
            }
        }
        self.latency_us.add(&other.latency_us).expect("same bounds");
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

/// One protocol's line of `summary.json`.
#[derive(Clone, Debug, Serialize)]
pub struct ProtocolResult {
    pub protocol: &'static str,
    pub isolation: IsolationLevel,
    pub workload: String,
    pub committed: u64,
    /// Aborted attempts (a transaction retried three times counts three), user rollbacks
    /// excluded.
    pub aborted: u64,
    /// Transactions the workload rolled back by design.
    pub user_rollbacks: u64,
    /// Transactions whose outcome the client never learned.
    pub unknown: u64,
    /// Attempts beyond each transaction's first.
    pub retries: u64,
    /// Completed transactions (committed or rolled back by the workload) per measured second.
    pub throughput_tps: f64,
    /// Committed transactions per measured second.
    pub goodput_tps: f64,
    /// Aborted attempts over all attempts that ended.
    pub abort_rate: f64,
    pub latency_ms: Latency,
    pub aborts_by_reason: BTreeMap<&'static str, u64>,
    pub per_type: BTreeMap<&'static str, TypeCounts>,
    /// Throughput relative to the first protocol of the run.
    pub throughput_ratio: f64,
    /// The workload's consistency conditions after the run (`--check`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<Vec<Condition>>,
}

impl ProtocolResult {
    pub fn new(info: &'static ProtocolInfo, config: &BenchConfig, stats: RunStats) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        let h = &stats.latency_us;
        let ended = stats.committed + stats.aborted;
        ProtocolResult {
            protocol: info.name,
            isolation: info.isolation,
            workload: config.workload.clone(),
            committed: stats.committed,
            aborted: stats.aborted,
            user_rollbacks: stats.user_rollbacks,
            unknown: stats.unknown,
            retries: stats.retries,
            throughput_tps: (stats.committed + stats.user_rollbacks) as f64 / config.duration_s,
            goodput_tps: stats.committed as f64 / config.duration_s,
            abort_rate: if ended == 0 {
                0.0
            } else {
                stats.aborted as f64 / ended as f64
            },
            latency_ms: Latency {
                p50: ms(h.value_at_quantile(0.5)),
                p90: ms(h.value_at_quantile(0.9)),
                p99: ms(h.value_at_quantile(0.99)),
                p999: ms(h.value_at_quantile(0.999)),
                max: ms(h.max()),
                mean: h.mean() / 1000.0,
            },
            aborts_by_reason: stats
                .aborts_by_reason
                .iter()
                .map(|(r, n)| (r.name(), *n))
                .collect(),
            per_type: stats.per_type,
            throughput_ratio: 1.0,
            checks: stats.checks,
        }
    }
}

#[derive(Serialize)]
struct Summary<'a> {
    augur_version: &'static str,
    seed: u64,
    config: &'a BenchConfig,
    results: &'a [ProtocolResult],
}

/// Fill in ratios, print the table and write `summary.json`.
pub fn finish(config: &BenchConfig, mut results: Vec<ProtocolResult>) -> anyhow::Result<()> {
    let base = results.first().map(|r| r.throughput_tps).unwrap_or(0.0);
    for r in &mut results {
        r.throughput_ratio = if base > 0.0 {
            r.throughput_tps / base
        } else {
            0.0
        };
    }
    println!(
        "{:<14} {:>10} {:>12} {:>8} {:>9} {:>9} {:>7}",
        "protocol", "committed", "tps", "aborts", "p50 ms", "p99 ms", "ratio"
    );
    for r in &results {
        println!(
            "{:<14} {:>10} {:>12.1} {:>7.1}% {:>9.2} {:>9.2} {:>7.3}",
            r.protocol,
            r.committed,
            r.throughput_tps,
            r.abort_rate * 100.0,
            r.latency_ms.p50,
            r.latency_ms.p99,
            r.throughput_ratio
        );
    }
    let summary = Summary {
        augur_version: env!("CARGO_PKG_VERSION"),
        seed: config.seed,
        config,
        results: &results,
    };
    let path = config.out.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(&summary)?)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    let mut failed = Vec::new();
    for r in &results {
        for c in r.checks.iter().flatten() {
            println!(
                "check {:<14} {:<28} {}  {}",
                r.protocol,
                c.name,
                if c.passed { "pass" } else { "FAIL" },
                c.detail
            );
            if !c.passed {
                failed.push(format!("{} {}", r.protocol, c.name));
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "consistency check failed: {}",
            failed.join(", ")
        ))
    }
}
