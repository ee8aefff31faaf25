//! Benchmark statistics and their reports: the table printed at the end of `augur bench` and
//! `summary.json`.

use crate::bench_options::{BenchConfig, ProtocolSpec, Runtime};
use augur_protocols::common::replicated;
use augur_protocols::registry::{IsolationLevel, ProtocolInfo};
use augur_runtime::sim::CpuReport;
use augur_types::AbortReason;
use augur_workloads::Condition;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// What the clients of a run observed inside the measurement window (all of them record here).
#[derive(Default)]
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
    /// The workload's consistency conditions, when `--check` ran them.
    pub checks: Option<Vec<Condition>>,
    /// Commit latency in microseconds (first attempt to commit), per transaction type; the
    /// run's distribution is their sum ([`RunStats::latency_us`]).
    pub type_latency_us: BTreeMap<&'static str, Histogram<u64>>,
    /// One entry per second of the run (warm-up included), for `samples.csv` and the plots.
    pub intervals: Vec<Interval>,
    /// Perceived latency in microseconds: first attempt to the last speculative commit, or to
    /// the final commit for a transaction that committed without speculating (STR §8).
    pub perceived_latency_us: Option<Histogram<u64>>,
    /// Speculative commits answered.
    pub spec_commits: u64,
    /// Speculatively committed attempts that aborted after all.
    pub misspeculations: u64,
    /// The nodes' protocol counters over the measurement window, summed over the nodes.
    pub protocol_counters: BTreeMap<String, u64>,
    /// When the speculation degree changed (seconds since the run started) and to what.
    pub speculation_timeline: Vec<(f64, String)>,
    /// With `--runtime sim`: what the CPU model charged over the measurement window.
    pub cpu: Option<CpuReport>,
    /// Set when a signal cut the measurement window short: how much of it ran.
    pub interrupted_after: Option<Duration>,
}

/// What happened during one second of a run.
#[derive(Clone)]
pub struct Interval {
    pub committed: u64,
    pub aborted: u64,
    pub latency_us: Histogram<u64>,
}

impl Default for Interval {
    fn default() -> Self {
        Interval {
            committed: 0,
            aborted: 0,
            latency_us: latency_histogram(),
        }
    }
}

/// Latencies from 1 µs to 10 minutes, three significant digits.
fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds")
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

impl RunStats {
    /// The commit latencies of every transaction type together.
    pub fn latency_us(&self) -> Histogram<u64> {
        let mut all = latency_histogram();
        for h in self.type_latency_us.values() {
            all.add(h).expect("same bounds");
        }
        all
    }

    /// The counters of second `second` of the run.
    pub fn interval(&mut self, second: usize) -> &mut Interval {
        if self.intervals.len() <= second {
            self.intervals.resize_with(second + 1, Interval::default);
        }
        &mut self.intervals[second]
    }

    /// A transaction committed for good after `latency`; its client perceived it committed after
    /// `perceived` (the same, unless it committed speculatively first).
    pub fn record_commit(
        &mut self,
        txn_type: &'static str,
        latency: Duration,
        perceived: Duration,
    ) {
        self.perceived_latency_us
            .get_or_insert_with(latency_histogram)
            .saturating_record(perceived.as_micros().max(1) as u64);
        self.committed += 1;
        self.per_type.entry(txn_type).or_default().committed += 1;
        let us = latency.as_micros().max(1) as u64;
        self.type_latency_us
            .entry(txn_type)
            .or_insert_with(latency_histogram)
            .saturating_record(us);
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
    /// The `--protocol` entry as written (the protocol's name, plus any settings).
    pub protocol: String,
    /// The protocol's registered name.
    pub protocol_name: &'static str,
    /// The clients' speculation: a fixed degree, or `auto`.
    pub speculation: String,
    /// How the clients submitted transactions: `interactive` or `one-shot`.
    pub txn_form: augur_types::RequestForm,
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
    /// Commit latency per transaction type.
    pub per_type_latency_ms: BTreeMap<&'static str, Latency>,
    /// The commit-latency distribution: (fraction of transactions, latency in ms) points.
    pub latency_cdf_ms: Vec<(f64, f64)>,
    /// What the speculation did, for protocols that speculate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculation_stats: Option<SpeculationStats>,
    /// The nodes' protocol counters over the measurement window, summed (what each protocol
    /// reports as `Protocol::counters`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub protocol_counters: BTreeMap<String, u64>,
    /// For a protocol that answers an update only after an internal commit (SSS's external
    /// commit): where its update transactions' latency went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_split: Option<UpdateSplit>,
    /// For the protocols that run every request at every node (`oab-spec`, `sm-rep`): what
    /// their instances did (flattened into the result: `instances_per_request` and the rest).
    #[serde(flatten)]
    pub replication_stats: Option<ReplicationStats>,
    /// With `--runtime sim`: the CPU model's accounts over the measurement window (per kind of
    /// input: how many, the work they reported, modelled and measured time) and each node's
    /// modelled busy fraction. Absent with `sim.cores=unlimited`, where work takes no time
    /// (`config.runtime` says the run was simulated either way).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modelled_cpu: Option<CpuReport>,
    /// Per second of the run (warm-up included): for `samples.csv` and the report's plots.
    #[serde(skip)]
    pub samples: Vec<Sample>,
    /// When a signal stopped the run: the seconds of the measurement window that ran, over
    /// which the rates are computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted_after_s: Option<f64>,
}

/// What the instances of a protocol that runs every request at every node did over the window
/// (`common::replicated`'s counters, summed over the nodes), per request committed at a node.
#[derive(Clone, Debug, Serialize)]
pub struct ReplicationStats {
    /// Instances run per request at a replica: its first, its forks and its re-executions.
    pub instances_per_request: f64,
    /// Re-executions at the head of the TO-queue per request.
    pub re_executions_per_request: f64,
    /// Forked children whose inherited reads no longer held when they started, per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inheritance_failures_per_request: Option<f64>,
    /// Requests finally delivered after one that arrived later at the same node, over all
    /// requests finally delivered: the optimistic order's mistakes.
    pub final_order_inversion_rate: f64,
    /// The share of procedure steps spent on instances that did not commit (the CPU the
    /// speculation wasted, or `sm-rep`'s runs that had to run again).
    pub wasted_step_share: f64,
    /// Mean time from a request's submission to its final delivery at its submitter, the
    /// emulated delay included.
    pub final_gap_ms: f64,
    /// The emulated delay (`final_delay_ms`), and the mean gap without it: Raft's own.
    pub final_delay_ms: u64,
    pub raft_gap_ms: f64,
}

impl ReplicationStats {
    fn new(counters: &BTreeMap<String, u64>, final_delay_ms: u64) -> Option<ReplicationStats> {
        let get = |name: &str| counters.get(name).copied();
        let committed = get("requests_committed")? as f64;
        let per_request = |n: u64| {
            if committed > 0.0 {
                n as f64 / committed
            } else {
                0.0
            }
        };
        let gaps = get("final_gaps").unwrap_or(0);
        let final_gap_ms = match gaps {
            0 => 0.0,
            n => get("final_gap_us_total").unwrap_or(0) as f64 / n as f64 / 1000.0,
        };
        let steps = get("steps_total").unwrap_or(0);
        let delivered = get("final_deliveries").unwrap_or(0);
        Some(ReplicationStats {
            instances_per_request: per_request(get("instances").unwrap_or(0)),
            re_executions_per_request: per_request(get("re_executions").unwrap_or(0)),
            inheritance_failures_per_request: get("inheritance_failures").map(per_request),
            final_order_inversion_rate: match delivered {
                0 => 0.0,
                n => get("final_order_inversions").unwrap_or(0) as f64 / n as f64,
            },
            wasted_step_share: match steps {
                0 => 0.0,
                n => 1.0 - get("steps_committed").unwrap_or(0).min(n) as f64 / n as f64,
            },
            final_gap_ms,
            final_delay_ms,
            raft_gap_ms: (final_gap_ms - final_delay_ms as f64).max(0.0),
        })
    }
}

/// SSS Fig. 5's split of update latency, from the coordinators' counters over the window:
/// `updates_committed`, `update_latency_us` (begin to external commit, summed),
/// `precommit_hold_us` (internal commit to acknowledgement at the slowest write replica, summed:
/// the time in the snapshot-queue) and `decided_to_external_us` (the coordinator's decision to
/// external commit, summed: the hold plus the messages around it, as the paper's bar has it).
#[derive(Clone, Debug, Serialize)]
pub struct UpdateSplit {
    pub updates: u64,
    /// Mean begin → external commit.
    pub mean_latency_ms: f64,
    /// Mean internal commit → acknowledgement (snapshot-queue wait).
    pub mean_snapshot_queue_ms: f64,
    /// The snapshot-queue wait as a fraction of the whole.
    pub snapshot_queue_share: f64,
    /// Mean decision → external commit (`None` from a protocol that does not count it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_after_decision_ms: Option<f64>,
    /// Decision → external commit as a fraction of the whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_decision_share: Option<f64>,
}

impl UpdateSplit {
    fn new(counters: &BTreeMap<String, u64>) -> Option<UpdateSplit> {
        let updates = *counters.get("updates_committed").filter(|n| **n > 0)?;
        let latency = *counters.get("update_latency_us")? as f64;
        let held = *counters.get("precommit_hold_us")? as f64;
        let share = |part: f64| if latency > 0.0 { part / latency } else { 0.0 };
        let after = counters.get("decided_to_external_us").map(|us| *us as f64);
        Some(UpdateSplit {
            updates,
            mean_latency_ms: latency / updates as f64 / 1000.0,
            mean_snapshot_queue_ms: held / updates as f64 / 1000.0,
            snapshot_queue_share: share(held),
            mean_after_decision_ms: after.map(|us| us / updates as f64 / 1000.0),
            after_decision_share: after.map(share),
        })
    }
}

/// STR §8's metrics of speculation over the measurement window.
#[derive(Clone, Debug, Serialize)]
pub struct SpeculationStats {
    /// Perceived latency: to the last speculative commit (or the final commit, without one).
    pub perceived_latency_ms: Latency,
    /// Speculative commits answered.
    pub spec_commits: u64,
    /// Speculatively committed attempts that aborted after all.
    pub misspeculations: u64,
    /// Misspeculations over speculative commits.
    pub misspeculation_rate: f64,
    /// Reads served from local-committed versions, per attempt that ended.
    pub speculative_reads_per_txn: Option<f64>,
    /// Reads held back until a dependency resolved (FFC > min OLC), per attempt that ended.
    pub parked_reads_per_txn: Option<f64>,
    /// Transactions aborted with one they depended on, per event that aborted any.
    pub mean_cascade: Option<f64>,
    /// The most transactions one abort (or final commit) took down.
    pub largest_cascade: Option<u64>,
    /// The nodes' protocol counters over the window, summed.
    pub counters: BTreeMap<String, u64>,
    /// When the degree changed (seconds since the run started) and to what.
    pub degree_timeline: Vec<(f64, String)>,
}

/// One second of one protocol's run.
#[derive(Clone, Debug)]
pub struct Sample {
    pub second: usize,
    pub warmup: bool,
    pub committed: u64,
    pub aborted: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

fn latency_of(h: &Histogram<u64>) -> Latency {
    let ms = |us: u64| us as f64 / 1000.0;
    Latency {
        p50: ms(h.value_at_quantile(0.5)),
        p90: ms(h.value_at_quantile(0.9)),
        p99: ms(h.value_at_quantile(0.99)),
        p999: ms(h.value_at_quantile(0.999)),
        max: ms(h.max()),
        mean: h.mean() / 1000.0,
    }
}

fn cdf_of(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut quantiles: Vec<f64> = (1..100).map(|q| q as f64 / 100.0).collect();
    quantiles.extend([0.995, 0.999, 0.9999, 1.0]);
    quantiles
        .into_iter()
        .map(|q| (q, h.value_at_quantile(q) as f64 / 1000.0))
        .collect()
}

impl SpeculationStats {
    fn new(stats: &RunStats) -> SpeculationStats {
        let counters = &stats.protocol_counters;
        let attempts = (stats.committed + stats.aborted + stats.user_rollbacks) as f64;
        let per_txn = |name: &str| {
            counters
                .get(name)
                .filter(|_| attempts > 0.0)
                .map(|n| *n as f64 / attempts)
        };
        let cascaded = counters.get("cascaded_aborts").copied();
        let cascades = counters.get("cascades").copied().filter(|n| *n > 0);
        SpeculationStats {
            perceived_latency_ms: latency_of(
                stats
                    .perceived_latency_us
                    .as_ref()
                    .unwrap_or(&latency_histogram()),
            ),
            spec_commits: stats.spec_commits,
            misspeculations: stats.misspeculations,
            misspeculation_rate: if stats.spec_commits == 0 {
                0.0
            } else {
                stats.misspeculations as f64 / stats.spec_commits as f64
            },
            speculative_reads_per_txn: per_txn("speculative_reads"),
            parked_reads_per_txn: per_txn("parked_reads"),
            mean_cascade: cascaded
                .zip(cascades)
                .map(|(n, events)| n as f64 / events as f64),
            largest_cascade: counters.get("largest_cascade").copied(),
            counters: counters.clone(),
            degree_timeline: stats.speculation_timeline.clone(),
        }
    }
}

impl ProtocolResult {
    pub fn new(
        info: &'static ProtocolInfo,
        spec: &ProtocolSpec,
        config: &BenchConfig,
        stats: RunStats,
    ) -> Self {
        let latency_us = stats.latency_us();
        let ended = stats.committed + stats.aborted;
        let warmup_secs = config.warmup_s.ceil() as usize;
        let samples = stats
            .intervals
            .iter()
            .enumerate()
            .map(|(second, iv)| Sample {
                second,
                warmup: second < warmup_secs,
                committed: iv.committed,
                aborted: iv.aborted,
                p50_ms: iv.latency_us.value_at_quantile(0.5) as f64 / 1000.0,
                p99_ms: iv.latency_us.value_at_quantile(0.99) as f64 / 1000.0,
            })
            .collect();
        let speculation_stats = info.speculation.map(|_| SpeculationStats::new(&stats));
        let update_split = UpdateSplit::new(&stats.protocol_counters);
        let replication_stats = info
            .full_replication()
            .then(|| {
                let delay = spec.options.settings.get(replicated::FINAL_DELAY_MS);
                let delay = delay.and_then(|ms| ms.parse().ok()).unwrap_or(0);
                ReplicationStats::new(&stats.protocol_counters, delay)
            })
            .flatten();
        let interrupted_after_s = stats.interrupted_after.map(|d| d.as_secs_f64());
        let measured_s = interrupted_after_s.unwrap_or(config.duration_s);
        ProtocolResult {
            protocol: spec.label.clone(),
            protocol_name: info.name,
            speculation: spec.speculation.to_string(),
            txn_form: spec.txn_form,
            isolation: info.claim(&spec.options.settings),
            workload: config.workload.clone(),
            committed: stats.committed,
            aborted: stats.aborted,
            user_rollbacks: stats.user_rollbacks,
            unknown: stats.unknown,
            retries: stats.retries,
            throughput_tps: (stats.committed + stats.user_rollbacks) as f64 / measured_s,
            goodput_tps: stats.committed as f64 / measured_s,
            abort_rate: if ended == 0 {
                0.0
            } else {
                stats.aborted as f64 / ended as f64
            },
            latency_ms: latency_of(&latency_us),
            aborts_by_reason: stats
                .aborts_by_reason
                .iter()
                .map(|(r, n)| (r.name(), *n))
                .collect(),
            per_type: stats.per_type,
            throughput_ratio: 1.0,
            checks: stats.checks,
            per_type_latency_ms: stats
                .type_latency_us
                .iter()
                .map(|(t, h)| (*t, latency_of(h)))
                .collect(),
            latency_cdf_ms: cdf_of(&latency_us),
            speculation_stats,
            update_split,
            replication_stats,
            protocol_counters: stats.protocol_counters,
            modelled_cpu: stats.cpu,
            samples,
            interrupted_after_s,
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

/// What a finished run produced.
pub struct Finished {
    pub results: Vec<ProtocolResult>,
    /// `protocol condition` for every consistency condition that failed.
    pub failed_checks: Vec<String>,
}

impl Finished {
    /// The command's verdict: an error naming the failed consistency conditions, if any.
    pub fn into_result(self) -> anyhow::Result<()> {
        if self.failed_checks.is_empty() {
            Ok(())
        } else {
            Err(anyhow::anyhow!(
                "consistency check failed: {}",
                self.failed_checks.join(", ")
            ))
        }
    }
}

/// Fill in ratios, print the table and write `summary.json`, the CSV files and `report.html`.
pub fn finish(config: &BenchConfig, mut results: Vec<ProtocolResult>) -> anyhow::Result<Finished> {
    let base = results.first().map(|r| r.throughput_tps).unwrap_or(0.0);
    for r in &mut results {
        r.throughput_ratio = if base > 0.0 {
            r.throughput_tps / base
        } else {
            0.0
        };
    }
    if let Some(model) = &config.cpu_model {
        println!(
            "MODELLED in virtual time (--runtime sim): {} cores per node, costs in µs {}",
            model.cores,
            serde_json::to_string(&model.cost).unwrap_or_default()
        );
    } else if config.runtime == Runtime::Sim {
        println!("MODELLED in virtual time (--runtime sim), unlimited cores");
    }
    // The rate column counts commits only: a run whose transactions all rolled back (a workload
    // that found data it cannot use) must not look busy. Rollbacks get a column of their own;
    // `throughput_tps` in summary.json and the ratio count both, as completed transactions.
    println!(
        "{:<26} {:>10} {:>12} {:>10} {:>8} {:>9} {:>9} {:>7}",
        "protocol", "committed", "commits/s", "rollbacks", "aborts", "p50 ms", "p99 ms", "ratio"
    );
    for r in &results {
        // Without a baseline there is no ratio: say so rather than print 0.
        let ratio = if base > 0.0 {
            format!("{:.3}", r.throughput_ratio)
        } else {
            "n/a".to_string()
        };
        println!(
            "{:<26} {:>10} {:>12.1} {:>10} {:>7.1}% {:>9.2} {:>9.2} {:>7}",
            r.protocol,
            r.committed,
            r.goodput_tps,
            r.user_rollbacks,
            r.abort_rate * 100.0,
            r.latency_ms.p50,
            r.latency_ms.p99,
            ratio
        );
    }
    if base <= 0.0 && !results.is_empty() {
        println!(
            "no ratios: the first protocol committed nothing in the measured window (ratios are 0 in summary.json); a longer --duration gives transactions this slow time to finish"
        );
    }
    for r in &results {
        if let Some(cpu) = &r.modelled_cpu {
            let busiest = cpu.utilization.iter().copied().fold(0.0, f64::max);
            println!(
                "{:<26} modelled CPU: busiest node {:.0}% busy",
                r.protocol,
                busiest * 100.0
            );
        }
    }
    for r in &results {
        if let Some(u) = &r.update_split {
            println!(
                "{:<26} updates: mean {:.2} ms to external commit, {:.2} ms of it in the \
                 snapshot-queue ({:.0}%), over {} updates",
                r.protocol,
                u.mean_latency_ms,
                u.mean_snapshot_queue_ms,
                u.snapshot_queue_share * 100.0,
                u.updates
            );
            if let (Some(ms), Some(share)) = (u.mean_after_decision_ms, u.after_decision_share) {
                println!(
                    "{:<26} updates: {:.2} ms ({:.0}%) from the decision (internal commit) to \
                     external commit",
                    r.protocol,
                    ms,
                    share * 100.0
                );
            }
        }
    }
    for r in &results {
        let Some(s) = &r.speculation_stats else {
            continue;
        };
        let per_txn = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.3}"));
        println!(
            "{:<26} speculation {}: perceived p50 {:.2} ms, {} speculative commits, {:.1}% \
             misspeculated, {} speculative / {} parked reads per txn, mean cascade {}, degrees {}",
            r.protocol,
            r.speculation,
            s.perceived_latency_ms.p50,
            s.spec_commits,
            s.misspeculation_rate * 100.0,
            per_txn(s.speculative_reads_per_txn),
            per_txn(s.parked_reads_per_txn),
            per_txn(s.mean_cascade),
            s.degree_timeline
                .iter()
                .map(|(at, d)| format!("{d}@{at:.0}s"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let summary = Summary {
        augur_version: env!("CARGO_PKG_VERSION"),
        seed: config.seed,
        config,
        results: &results,
    };
    let write = |name: &str, contents: String| -> anyhow::Result<()> {
        let path = config.out.join(name);
        std::fs::write(&path, contents)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    };
    write("summary.json", serde_json::to_string_pretty(&summary)?)?;
    write("per_txn.csv", per_txn_csv(&results))?;
    write("samples.csv", samples_csv(&results))?;
    let config_json = serde_json::to_value(config)?;
    write(
        "report.html",
        crate::report_html::render(&config_json, &results),
    )?;
    println!(
        "wrote summary.json, per_txn.csv, samples.csv and report.html in {}",
        config.out.display()
    );
    let mut failed = Vec::new();
    for r in &results {
        // A protocol that claims no isolation level (nocc) is expected to fail the conditions:
        // its results are shown, not counted against the run.
        let claims = r.isolation != IsolationLevel::None;
        for c in r.checks.iter().flatten() {
            let verdict = match (c.passed, claims) {
                (true, _) => "pass",
                (false, true) => "FAIL",
                (false, false) => "fail (claims no isolation level: not counted)",
            };
            println!(
                "check {:<26} {:<16} {verdict}  {}",
                r.protocol, c.name, c.detail
            );
            if !c.passed && claims {
                failed.push(format!("{} {}", r.protocol, c.name));
            }
        }
    }
    Ok(Finished {
        results,
        failed_checks: failed,
    })
}

/// One row per protocol and transaction type.
fn per_txn_csv(results: &[ProtocolResult]) -> String {
    let mut out = String::from(
        "protocol,type,committed,aborted,user_rollbacks,unknown,retries,p50_ms,p99_ms,mean_ms,aborts_by_reason\n",
    );
    for r in results {
        for (name, c) in &r.per_type {
            let lat = r.per_type_latency_ms.get(name);
            let reasons: Vec<String> = c
                .aborts_by_reason
                .iter()
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            out += &format!(
                "{},{},{},{},{},{},{},{},{},{},\"{}\"\n",
                r.protocol,
                name,
                c.committed,
                c.aborted,
                c.user_rollbacks,
                c.unknown,
                c.retries,
                lat.map_or(String::new(), |l| format!("{:.3}", l.p50)),
                lat.map_or(String::new(), |l| format!("{:.3}", l.p99)),
                lat.map_or(String::new(), |l| format!("{:.3}", l.mean)),
                reasons.join(";")
            );
        }
    }
    out
}

/// One row per protocol and second of the run (warm-up included and marked).
fn samples_csv(results: &[ProtocolResult]) -> String {
    let mut out = String::from("protocol,second,warmup,committed,aborted,p50_ms,p99_ms\n");
    for r in results {
        for s in &r.samples {
            out += &format!(
                "{},{},{},{},{},{:.3},{:.3}\n",
                r.protocol, s.second, s.warmup, s.committed, s.aborted, s.p50_ms, s.p99_ms
            );
        }
    }
    out
}
