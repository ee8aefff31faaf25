//! Same seed ⇒ byte-identical history, for every registered protocol: every client request and
//! reply of a simulated `synthetic-str` run under contention, clock skew and jitter, with its
//! virtual time, is identical across two runs of one seed, and differs for another seed. Clients
//! of a protocol that offers speculation read and commit speculatively (up to two unresolved
//! speculative commits each), so its dependency tracking and cascades are replayed too. Each
//! protocol is driven in the first request form it serves.

use augur_client::{Attempt, CommitStats, Session, Speculation, Transport, resolve};
use augur_client::{run_once, run_speculative};
use augur_contract::forms::Procedures;
use augur_contract::{Protocol, ProtocolOptions};
use augur_protocols::registry::{PROTOCOLS, ProtocolInfo, ProtocolVisitor, visit};
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::{IsolationLevel, LatencyProfile, Placement};
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

/// The most speculative commits a client leaves unresolved (at most what the protocol offers).
const CHAIN: usize = 2;

/// Runs the scenario under one protocol and renders its client events, one per line.
struct History {
    seed: u64,
}

impl ProtocolVisitor for History {
    type Output = String;

    fn visit<P: Protocol>(self, info: &'static ProtocolInfo) -> String {
        let profile = LatencyProfile::named("3dc").unwrap();
        let placement = Arc::new(Placement::ring(profile, 3, 2).unwrap());
        let mut config = SimConfig::new(self.seed);
        config.max_clock_skew = Duration::from_millis(2);
        config.jitter = Duration::from_millis(3);
        // One-shot requests name procedures of the workloads' catalogue.
        config.procedures = Procedures::new(Arc::new(augur_workloads::Catalog));
        let mut sim: Simulation<P> = Simulation::new(
            placement.clone(),
            Arc::new(ProtocolOptions::default()),
            config,
        );
        sim.record_client_events();
        let settings: BTreeMap<String, String> =
            [("contention".to_string(), "high-both".to_string())].into();
        let workload =
            augur_workloads::build("synthetic-str", &settings, placement.clone()).unwrap();
        let offer = info.speculation;
        // Each protocol is driven in the form it serves first (`s-smr` takes whole transactions).
        let form = info.forms[0];
        for home in placement.nodes() {
            for _ in 0..4 {
                let workload = workload.clone();
                let mut rng = sim.fork_rng();
                sim.spawn_client(home, move |t| async move {
                    let session = Session::new(t).with_form(form);
                    let until = Duration::from_secs(3);
                    let Some(offer) = offer else {
                        while session.transport().now() < until {
                            let mut procedure = workload.next(home, &mut rng);
                            run_once(&session, procedure.as_mut()).await;
                        }
                        return;
                    };
                    let speculation = Speculation {
                        reads: offer.reads,
                        commit: true,
                    };
                    let chain_limit = CHAIN.min(offer.max_chain as usize);
                    let stats = CommitStats::new();
                    let mut chain = VecDeque::new();
                    while session.transport().now() < until {
                        let mut procedure = workload.next(home, &mut rng);
                        let attempt =
                            run_speculative(&session, procedure.as_mut(), speculation, &stats)
                                .await;
                        if let Attempt::Speculative(spec) = attempt {
                            chain.push_back((spec, procedure));
                            if chain.len() >= chain_limit {
                                let (spec, mut procedure) = chain.pop_front().unwrap();
                                resolve(spec, procedure.as_mut(), &stats).await;
                            }
                        }
                    }
                    while let Some((spec, mut procedure)) = chain.pop_front() {
                        resolve(spec, procedure.as_mut(), &stats).await;
                    }
                });
            }
        }
        sim.run_until(Duration::from_secs(4));
        let mut out = String::new();
        for e in sim.client_events() {
            writeln!(
                out,
                "{} {:?} {:?} {:?}",
                e.at_us, e.client, e.request, e.kind
            )
            .unwrap();
        }
        out
    }
}

fn history(info: &ProtocolInfo, seed: u64) -> String {
    visit(info.name, History { seed }).expect("a registered protocol")
}

#[test]
fn the_same_seed_replays_the_same_history() {
    for info in PROTOCOLS {
        let name = info.name;
        let a = history(info, 42);
        let b = history(info, 42);
        let events = a.lines().count();
        // (`sss` commits the fewest of the rest: its updates wait for each other, see its module
        // docs. A protocol with a sequencer orders every transaction through its Raft leader and
        // then exchanges sibling values, several wide-area round trips each on `3dc`, so its
        // closed-loop clients complete far fewer transactions in the 3 s.)
        let substantial = if info.sequencer() { 80 } else { 500 };
        assert!(
            events > substantial,
            "{name}: a substantial history ({events} events)"
        );
        // Contention makes every protocol with concurrency control abort something, except those
        // that agree on an order before executing: they run conflicting transactions in that
        // order and never abort for a conflict.
        if info.isolation != IsolationLevel::None && !info.sequencer() {
            assert!(a.contains("Aborted"), "{name}: contention produced aborts");
        }
        assert!(a.contains("Committed"), "{name}: something committed");
        if info.speculation.is_some() {
            assert!(a.contains("SpecCommitted"), "{name}: clients speculated");
        }
        assert!(a == b, "{name}: two runs of seed 42 diverged");
        assert_ne!(
            a,
            history(info, 43),
            "{name}: another seed gives another history"
        );
    }
}
