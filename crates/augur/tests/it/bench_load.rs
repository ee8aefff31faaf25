//! The benchmark's initial load (`augur::bench::run::LoadQueue`), run in the simulator.

use augur::bench::run::LoadQueue;
use augur_client::Session;
use augur_contract::ProtocolOptions;
use augur_protocols::nocc::Nocc;
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::{LatencyProfile, Placement};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A load whose transactions cannot commit (every node is down) fails with the reason, and
/// its loaders stop once one failed rather than each spending its attempts on the rest.
#[test]
fn a_load_that_cannot_commit_fails_with_the_reason() {
    let profile = LatencyProfile::named("lan").unwrap().truncated(1).unwrap();
    let placement = Arc::new(Placement::ring(profile, 3, 1).unwrap());
    let workload = augur_workloads::build("ycsb-t", &BTreeMap::new(), placement.clone()).unwrap();
    let queue = LoadQueue::of(workload.as_ref()).expect("ycsb-t loads its records");
    let mut config = SimConfig::new(1);
    config.procedures = augur::procedures();
    config.client_timeout = Duration::from_millis(100);
    let options = Arc::new(ProtocolOptions::default());
    let mut sim = Simulation::<Nocc>::new(placement.clone(), options, config);
    for node in placement.nodes() {
        sim.crash(node);
    }
    for home in queue.loader_homes(&placement) {
        sim.spawn_client(home, |t| queue.loader(Session::new(t)));
    }
    assert!(sim.run_until_clients_done(Duration::from_secs(600), Duration::from_secs(1)));
    let why = queue.outcome().expect_err("nothing was loaded").to_string();
    assert!(
        why.starts_with("loading the initial data failed:") && why.contains("did not commit"),
        "{why}"
    );
    assert!(
        queue.not_started() > 0,
        "the loaders stopped starting transactions once one failed"
    );
}
