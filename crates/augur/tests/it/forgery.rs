//! Nothing a peer or a client sends can panic a node: every protocol runs with a lying network
//! that alters messages and requests in flight (`Simulation::set_forgery`), on every checkable
//! workload and both transaction forms, under the usual faults. What still decodes and passes
//! the receiver's checks reaches the handlers, which must tolerate it.

use augur::check::CheckArgs;
use augur_protocols::registry::PROTOCOLS;

/// Seeds per protocol and workload, and the share of messages altered.
const SEEDS: u64 = 10;
const FORGERY: f64 = 0.1;

#[test]
fn forged_messages_and_requests_never_panic_a_node() {
    for p in PROTOCOLS {
        for workload in ["list-append", "rw-register", "bank"] {
            let config = CheckArgs {
                protocol: p.name.into(),
                input: None,
                level: None,
                workload: workload.into(),
                seeds: format!("1..{SEEDS}"),
                faults: "all".into(),
                history: None,
                mutant: None,
                nodes: 3,
                replication: None,
                placement: "ring".into(),
                latency: "lan".into(),
                clients: 3,
                duration: 4.0,
                set: Vec::new(),
                keep_going: false,
                verbose: false,
                solver_seconds: 10.0,
                solver_steps: 2_000_000,
                txn_form: None,
            }
            .validate()
            .expect("valid arguments");
            let mut delivered = 0;
            for seed in config.seeds.clone() {
                let counts = config.run_forged(seed, FORGERY).expect("seed runs");
                delivered += counts.delivered;
            }
            // The test is worth something only if forged messages reached the handlers.
            assert!(
                delivered > 200,
                "{} on {workload}: only {delivered} forged messages were delivered",
                p.name
            );
        }
    }
}
