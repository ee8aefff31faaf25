//! A scripted scenario run, shared by the timestamp protocols' scenario tests (`dst.rs`,
//! `gts.rs`): a simulation, clients started at set times with a record of what each saw, and
//! the recorded history with its commit timestamps, checked at any level.

use super::two_sites::{check_at, history};
use super::{Observed, Txn, ms, spawn_client_recorded};
use augur_client::HistoryRecorder;
use augur_contract::Protocol;
use augur_protocols::registry::ProtocolInfo;
use augur_runtime::sim::Simulation;
use augur_types::history::{History, RecordedOutcome};
use augur_types::{IsolationLevel, NodeId, Timestamp};

/// A scripted run of protocol `P`: the simulation, what the clients saw and the recorded
/// history.
pub struct Scripted<P: Protocol> {
    pub s: Simulation<P>,
    pub o: Observed,
    recorder: HistoryRecorder,
    info: ProtocolInfo,
}

impl<P: Protocol> Scripted<P> {
    /// A run of `s`, whose protocol is described by `info` (its name and claim head the
    /// history).
    pub fn new(s: Simulation<P>, info: ProtocolInfo) -> Self {
        Scripted {
            s,
            o: Observed::default(),
            recorder: HistoryRecorder::new(),
            info,
        }
    }

    /// Shift node `node`'s clock by `offset_ms`.
    pub fn clock(mut self, node: u32, offset_ms: i64) -> Self {
        self.s.set_clock_offset(NodeId(node), offset_ms * 1000);
        self
    }

    /// A client on node `home` running `txn` at `start_ms`.
    pub fn client(&mut self, home: u32, start_ms: u64, txn: Txn) {
        self.session(home, start_ms, vec![txn]);
    }

    /// A client on node `home` running `txns` one after another from `start_ms`.
    pub fn session(&mut self, home: u32, start_ms: u64, txns: Vec<Txn>) {
        let recorder = Some(self.recorder.clone());
        spawn_client_recorded(&mut self.s, home, ms(start_ms), txns, &self.o, recorder);
    }

    pub fn run(&mut self, until_ms: u64) {
        self.s.run_until(ms(until_ms));
    }

    /// Run to `until_ms`, by which every client must be done.
    pub fn finish(mut self, until_ms: u64) -> Self {
        self.run(until_ms);
        assert!(self.s.clients_done(), "{}", self.o.render());
        self
    }

    pub fn history(&self) -> History {
        history(self.info.name, self.info.isolation, &self.recorder)
    }

    /// The commit timestamp transaction `name` was told (a read-only one's snapshot).
    pub fn commit_ts(&self, name: &str) -> Timestamp {
        let h = self.history();
        let t = h.txns.iter().find(|t| t.name == name).expect(name);
        match t.outcome {
            RecordedOutcome::Committed { commit_ts } => Timestamp(commit_ts),
            _ => panic!("{name} did not commit: {}", self.o.of(name)),
        }
    }

    pub fn valid_at(&self, level: IsolationLevel) -> bool {
        check_at(&self.history(), level).is_valid()
    }

    pub fn node(&self, n: u32) -> &P {
        self.s.node(NodeId(n))
    }
}

/// The keys the timestamp protocols' scenarios name (`dst.rs`, `gts.rs`, `vts.rs`), by the
/// letters their docs use: on the two-node ring, `a`, `b` and `d` are partition 1's, `c`, `k`
/// and `e` partition 0's.
pub mod keys {
    use augur_types::Key;

    pub fn a() -> Key {
        Key::numbered(1, 1)
    }

    pub fn b() -> Key {
        Key::numbered(1, 2)
    }

    pub fn c() -> Key {
        Key::numbered(0, 3)
    }

    pub fn d() -> Key {
        Key::numbered(1, 4)
    }

    pub fn k() -> Key {
        Key::numbered(0, 5)
    }

    pub fn e() -> Key {
        Key::numbered(0, 7)
    }
}
