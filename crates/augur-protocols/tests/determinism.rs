//! Same seed ⇒ byte-identical history: every client request and reply of a simulated
//! `synthetic-str` run under contention, with its virtual time, is identical across two runs of
//! one seed, and differs for another seed.

use augur_client::{Session, Transport, run_once};
use augur_protocols::clocksi_rep::ClockSiRep;
use augur_runtime::ProtocolOptions;
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::{LatencyProfile, Placement};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

fn history(seed: u64) -> String {
    let profile = LatencyProfile::named("3dc").unwrap();
    let placement = Arc::new(Placement::ring(profile, 3, 2).unwrap());
    let mut config = SimConfig::new(seed);
    config.max_clock_skew = Duration::from_millis(2);
    config.jitter = Duration::from_millis(3);
    let mut sim: Simulation<ClockSiRep> = Simulation::new(
        placement.clone(),
        Arc::new(ProtocolOptions::default()),
        config,
    );
    sim.record_client_events();
    let settings: BTreeMap<String, String> =
        [("contention".to_string(), "high-both".to_string())].into();
    let workload = augur_workloads::build("synthetic-str", &settings, placement.clone()).unwrap();
    for home in placement.nodes() {
        for _ in 0..4 {
            let workload = workload.clone();
            let mut rng = sim.fork_rng();
            sim.spawn_client(home, move |t| async move {
                let session = Session::new(t);
                while session.transport().now() < Duration::from_secs(3) {
                    let mut procedure = workload.next(home, &mut rng);
                    run_once(&session, procedure.as_mut()).await;
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

#[test]
fn the_same_seed_replays_the_same_history() {
    let a = history(42);
    let b = history(42);
    assert!(
        a.lines().count() > 1000,
        "a substantial history ({} events)",
        a.lines().count()
    );
    assert!(a.contains("Aborted"), "contention produced aborts");
    assert!(a == b, "two runs of seed 42 diverged");
    assert_ne!(a, history(43), "another seed gives another history");
}
