//! `augur bench --runtime sim`: the same benchmark in the deterministic simulator, in virtual
//! time, with a CPU model (`docs/virtual-time.md`).
//!
//! The clients, the workload, the load, the statistics and the history are those of the
//! in-process run ([`RunPlan`]); only the cluster differs: every node and client is a task of
//! one [`Simulation`], messages take the latency profile's delays, and each node has
//! `sim.cores` cores on which every input it handles costs `sim.cost.*`. Throughput and latency
//! are therefore *modelled*: what the protocol would do on machines with that many cores of
//! that speed, however fast this machine is. Everything is drawn from the seed, so a run
//! repeats exactly.

use super::run::{LoadQueue, RunPlan, add_counters, counters_between, run_audit};
use crate::bench_options::{BenchConfig, ProtocolSpec};
use crate::report::ProtocolResult;
use augur_contract::Protocol;
use augur_protocols::registry::{self, ProtocolInfo, ProtocolVisitor};
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::NodeId;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Virtual time a run may take past its measurement window for clients to learn their last
/// outcomes (speculative commits to resolve, a long think time to end) before it gives up on
/// them.
const DRAIN: Duration = Duration::from_secs(120);

/// How far virtual time moves between two looks at whether the clients are done.
const STEP: Duration = Duration::from_secs(1);

/// Virtual time the initial load may take before the run gives up on it.
const LOAD_LIMIT: Duration = Duration::from_secs(3600);

pub fn run(
    config: &BenchConfig,
    spec: &ProtocolSpec,
) -> anyhow::Result<anyhow::Result<ProtocolResult>> {
    Ok(registry::visit(&spec.name, RunInSim { config, spec })?)
}

/// Runs one protocol in the simulator.
struct RunInSim<'a> {
    config: &'a BenchConfig,
    spec: &'a ProtocolSpec,
}

impl ProtocolVisitor for RunInSim<'_> {
    type Output = anyhow::Result<ProtocolResult>;

    fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> Self::Output {
        let (config, spec) = (self.config, self.spec);
        let wall = Instant::now();
        let mut sim_config = SimConfig::new(config.seed);
        sim_config.procedures = crate::procedures();
        sim_config.cpu = config.cpu_model;
        // As the in-process cluster's clients do.
        sim_config.client_timeout = Duration::from_secs(10);
        let mut sim = Simulation::<P>::new(
            config.placement.clone(),
            Arc::new(spec.options.clone()),
            sim_config,
        );
        let nodes: Vec<NodeId> = config.placement.nodes().collect();
        let clients = config.client_nodes.len() * config.clients_per_node;
        let mut plan = RunPlan::new(config, spec, clients);

        if let Some(queue) = LoadQueue::of(plan.workload.as_ref()) {
            for home in queue.loader_homes(&config.placement) {
                sim.spawn_client(home, |t| queue.loader(plan.session(t)));
            }
            if !sim.run_until_clients_done(sim.elapsed() + LOAD_LIMIT, STEP) {
                anyhow::bail!(
                    "{}: the initial load did not finish within {} s of virtual time",
                    spec.label,
                    LOAD_LIMIT.as_secs()
                );
            }
            queue.outcome()?;
        }
        let loaded = sim.elapsed();

        for &home in &config.client_nodes {
            for _ in 0..config.clients_per_node {
                sim.spawn_client(home, |t| {
                    let client = plan.client(home, t);
                    async move {
                        client.await;
                    }
                });
            }
        }
        let counters = |sim: &Simulation<P>| {
            let mut total = BTreeMap::new();
            for &n in &nodes {
                add_counters(&mut total, sim.node(n).counters());
            }
            total
        };
        let window_start = loaded + plan.warmup;
        let window_end = window_start + plan.measured;
        eprintln!(
            "simulating {} for {:.1}s of virtual time",
            spec.label,
            (plan.warmup + plan.measured).as_secs_f64()
        );
        let mut progress = Progress::new(&spec.label, window_end);
        progress.run_until(&mut sim, window_start);
        let before = counters(&sim);
        let cpu_before = sim.cpu_report();
        progress.run_until(&mut sim, window_end);
        let window = counters_between(&before, counters(&sim));
        let cpu = sim
            .cpu_report()
            .map(|after| after.since(cpu_before.as_ref()));
        if !sim.run_until_clients_done(window_end + DRAIN, STEP) {
            tracing::warn!(
                "{}: some clients were still waiting {} s of virtual time after the run",
                spec.label,
                DRAIN.as_secs()
            );
        }

        let checks = match (config.check, plan.workload.audit()) {
            (true, Some(audit)) => {
                let result = Arc::new(Mutex::new(None));
                let slot = Arc::clone(&result);
                sim.spawn_client(nodes[0], |t| {
                    let session = plan.session(t).with_form(plan.audit_form());
                    async move {
                        let conditions = run_audit(&session, audit).await;
                        *slot.lock().expect("audit result") = Some(conditions);
                    }
                });
                // The audit's client is the last one (bar any the drain gave up on).
                sim.run_until_clients_done(sim.elapsed() + DRAIN, STEP);
                let conditions = result.lock().expect("audit result").take();
                Some(conditions.unwrap_or_else(|| {
                    vec![augur_workloads::Condition {
                        name: "audit".into(),
                        passed: false,
                        detail: "the audit transaction did not finish in virtual time".into(),
                    }]
                }))
            }
            _ => None,
        };
        eprintln!(
            "simulated {:.1}s of virtual time in {:.1}s",
            sim.elapsed().as_secs_f64(),
            wall.elapsed().as_secs_f64()
        );
        let mut stats = plan.finish(info, window, checks);
        stats.cpu = cpu;
        Ok(ProtocolResult::new(info, spec, config, stats))
    }
}

/// How often a long simulated run says how far it got, in wall time.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Says, on standard error, how far a simulation got, every [`PROGRESS_EVERY`] of wall time: a
/// large modelled run takes minutes and is otherwise silent.
struct Progress<'a> {
    label: &'a str,
    /// The virtual time the run ends at.
    end: Duration,
    started: Instant,
    said: Instant,
}

impl<'a> Progress<'a> {
    fn new(label: &'a str, end: Duration) -> Self {
        let now = Instant::now();
        Progress {
            label,
            end,
            started: now,
            said: now,
        }
    }

    /// Run `sim` to virtual time `until` a slice at a time (the same run as in one go: events
    /// are taken in time order either way), saying how far it got when it is time to.
    fn run_until<P: Protocol>(&mut self, sim: &mut Simulation<P>, until: Duration) {
        const SLICE: Duration = Duration::from_millis(500);
        while sim.elapsed() < until {
            sim.run_until((sim.elapsed() + SLICE).min(until));
            if self.said.elapsed() >= PROGRESS_EVERY {
                self.said = Instant::now();
                eprintln!(
                    "simulating {}: {:.1} of {:.1} s of virtual time after {:.0} s",
                    self.label,
                    sim.elapsed().as_secs_f64(),
                    self.end.as_secs_f64(),
                    self.started.elapsed().as_secs_f64()
                );
            }
        }
    }
}
