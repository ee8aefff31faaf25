//! The two-site set-up of the SSS baselines' scenario tests (`walter.rs`, `rococo.rs`): "3dc"
//! cut to two data centres (VA, OR: about 33.5 ms apart one way), a ring placement and no
//! replication, so key `Key::numbered(p, _)` lives on node `p` only; and the scenarios and
//! history helpers both files use.

use super::{Observed, Txn, assert_replicas, ms, spawn_client};
use augur_check::{CheckOptions, CheckReport, ValueModel};
use augur_client::HistoryRecorder;
use augur_contract::{Protocol, ProtocolOptions};
use augur_runtime::sim::Simulation;
use augur_types::history::{HISTORY_FORMAT, History, HistoryHeader};
use augur_types::{IsolationLevel, Key};

/// x lives on node 0.
pub fn x() -> Key {
    Key::numbered(0, 1)
}

/// y lives on node 1.
pub fn y() -> Key {
    Key::numbered(1, 1)
}

/// Two nodes (VA, OR), one replica per key, running `P` (or its `mutant`).
pub fn sim<P: Protocol>(mutant: Option<&str>) -> Simulation<P> {
    sim_with::<P>(mutant, &[])
}

/// [`sim`] with protocol settings (`NAME=VALUE`).
pub fn sim_with<P: Protocol>(mutant: Option<&str>, settings: &[(&str, &str)]) -> Simulation<P> {
    let options = ProtocolOptions {
        mutant: mutant.map(str::to_string),
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..ProtocolOptions::default()
    };
    let s = super::traced_sim::<P>("3dc", 2, 2, 1, options);
    assert_replicas(&s, &x(), &[0]);
    assert_replicas(&s, &y(), &[1]);
    s
}

/// T1 and T2, both on node 0 (x's node), read x and overwrite it; T1 commits first; T3 reads x
/// afterwards.
pub fn read_modify_writes<P: Protocol>(mutant: Option<&str>) -> Observed {
    let mut s = sim::<P>(mutant);
    let o = Observed::default();
    let t1 = Txn::new("T1").read(&x()).sleep(ms(20)).write(&x(), "a");
    let t2 = Txn::new("T2").read(&x()).sleep(ms(40)).write(&x(), "b");
    spawn_client(&mut s, 0, ms(0), vec![t1], &o);
    spawn_client(&mut s, 0, ms(5), vec![t2], &o);
    spawn_client(&mut s, 0, ms(200), vec![Txn::new("T3").read(&x())], &o);
    s.run_until(ms(1_000));
    assert!(s.clients_done());
    o
}

/// The history `recorder` recorded of an `rw-register` scenario run by `protocol`, for the
/// checker at `isolation`.
pub fn history(protocol: &str, isolation: IsolationLevel, recorder: &HistoryRecorder) -> History {
    History {
        header: HistoryHeader {
            format: HISTORY_FORMAT,
            protocol: protocol.into(),
            workload: "rw-register".into(),
            seed: super::SEED,
            isolation: isolation.to_string(),
            faults: "none".into(),
            settings: Default::default(),
        },
        txns: recorder.records(),
    }
}

/// The checker's verdict on an `rw-register` history at `level`.
pub fn check_at(history: &History, level: IsolationLevel) -> CheckReport {
    augur_check::check(history, &CheckOptions::new(level, ValueModel::RwRegister))
}
