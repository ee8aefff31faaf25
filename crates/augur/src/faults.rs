//! Fault schedules for `augur check`: which faults a run may inject (`--faults`), and the
//! timeline one seed draws from them.
//!
//! Every fault is bounded and ends with the safety phase: partitions heal, crashed nodes restart,
//! lossy and slow links recover. Clock skew is drawn once per seed and stays; it is bounded by
//! [`MAX_CLOCK_SKEW`].

use augur_protocols::registry::ProtocolInfo;
use augur_types::NodeId;
use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use std::fmt;
use std::time::Duration;

/// Bound on each node's clock offset when `skew` is on.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_millis(50);

/// The fault kinds `--faults` accepts.
pub const FAULT_KINDS: &[(&str, &str)] = &[
    (
        "delay",
        "latency spikes: 5% of messages held up to 50 ms longer",
    ),
    (
        "reorder",
        "links stop being FIFO: messages on one link overtake each other",
    ),
    (
        "loss",
        "windows in which 5% of messages between nodes are lost",
    ),
    (
        "partition",
        "the nodes split in two groups for 0.2–1.5 s, then heal",
    ),
    ("crash", "a node crashes and restarts 0.2–1.5 s later"),
    (
        "leader-crash",
        "the sequencer's Raft leader crashes, whatever it is doing, and restarts 0.2–1.5 s later (protocols with a sequencer)",
    ),
    (
        "pause",
        "a node freezes 0.5–3 s (a long GC pause, a suspended VM), then handles everything that waited, in order (in `all` for protocols whose masters fail over, whose leases it tests)",
    ),
    (
        "master-crash",
        "the node mastering a partition (as the nodes see it then) crashes and stays down 2–4 s, or until the safety phase ends, then restarts as a replica (protocols whose masters fail over)",
    ),
    (
        "skew",
        "each node's clock is offset by up to ±50 ms for the whole run",
    ),
];

/// A set of fault kinds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultSpec {
    pub delay: bool,
    pub reorder: bool,
    pub loss: bool,
    pub partition: bool,
    pub crash: bool,
    pub leader_crash: bool,
    pub master_crash: bool,
    pub pause: bool,
    pub skew: bool,
}

impl FaultSpec {
    /// Parse `none`, `all`, or a comma-separated list of kinds. `all` means every kind the
    /// protocol allows (its network model; `leader-crash` if it has a sequencer); naming a
    /// kind it does not allow is an error.
    pub fn parse(spec: &str, info: &ProtocolInfo) -> Result<FaultSpec, String> {
        let network = &info.network;
        let mut f = FaultSpec::default();
        match spec.trim() {
            "none" | "" => return Ok(f),
            "all" => {
                return Ok(FaultSpec {
                    delay: true,
                    reorder: network.tolerates_reordering,
                    loss: network.tolerates_loss,
                    partition: true,
                    crash: true,
                    leader_crash: info.sequencer(),
                    master_crash: info.fails_over(),
                    pause: info.fails_over(),
                    skew: true,
                });
            }
            _ => {}
        }
        for kind in spec.split(',').map(str::trim) {
            match kind {
                "delay" => f.delay = true,
                "reorder" if network.tolerates_reordering => f.reorder = true,
                "loss" if network.tolerates_loss => f.loss = true,
                "reorder" | "loss" => {
                    return Err(format!(
                        "fault '{kind}' breaks this protocol's network model (it assumes reliable FIFO links)"
                    ));
                }
                "partition" => f.partition = true,
                "crash" => f.crash = true,
                "leader-crash" if info.sequencer() => f.leader_crash = true,
                "leader-crash" => {
                    return Err(format!(
                        "fault 'leader-crash' needs a protocol with a sequencer; {} has none",
                        info.name
                    ));
                }
                "pause" => f.pause = true,
                "master-crash" if info.fails_over() => f.master_crash = true,
                "master-crash" => {
                    return Err(format!(
                        "fault 'master-crash' needs a protocol whose masters fail over; {} has none that do",
                        info.name
                    ));
                }
                "skew" => f.skew = true,
                other => {
                    let valid: Vec<&str> = FAULT_KINDS.iter().map(|(k, _)| *k).collect();
                    return Err(format!(
                        "unknown fault '{other}'; valid: none, all, or a list of {}",
                        valid.join(", ")
                    ));
                }
            }
        }
        Ok(f)
    }

    pub fn is_none(&self) -> bool {
        *self == FaultSpec::default()
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [
            (self.delay, "delay"),
            (self.reorder, "reorder"),
            (self.loss, "loss"),
            (self.partition, "partition"),
            (self.crash, "crash"),
            (self.leader_crash, "leader-crash"),
            (self.pause, "pause"),
            (self.master_crash, "master-crash"),
            (self.skew, "skew"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join(","))
        }
    }
}

/// One step of a fault timeline.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultAction {
    Partition(Vec<Vec<NodeId>>),
    Heal,
    Crash(NodeId),
    Restart(NodeId),
    /// Crash the node the sequencer's leader is at that moment (the protocol says which,
    /// `Protocol::leader`); nothing if no node knows one.
    CrashLeader,
    /// Restart the node the last `CrashLeader` crashed.
    RestartLeader,
    /// Crash the node that masters partition `pick` modulo the partition count at that moment
    /// (the protocol says which, `Protocol::master_of`); nothing if no node knows one.
    CrashMaster {
        pick: u32,
    },
    /// Restart the node the last `CrashMaster` crashed.
    RestartMaster,
    Pause(NodeId),
    Resume(NodeId),
    Loss(f64),
}

/// A seed's fault timeline: actions at offsets from the start of the run.
#[derive(Clone, Debug, Default)]
pub struct FaultSchedule {
    pub actions: Vec<(Duration, FaultAction)>,
}

impl FaultSchedule {
    /// Draw a timeline over `safety` for `nodes` nodes. Windows of one kind do not overlap;
    /// windows of different kinds may.
    pub fn draw(
        spec: &FaultSpec,
        nodes: usize,
        safety: Duration,
        rng: &mut ChaCha8Rng,
    ) -> FaultSchedule {
        let span = safety.as_micros() as u64;
        let mut actions = Vec::new();
        if spec.partition && nodes > 1 {
            for (start, end) in windows(span, rng) {
                let mut all: Vec<NodeId> = (0..nodes as u32).map(NodeId).collect();
                all.shuffle(rng);
                let cut = rng.random_range(1..nodes);
                let groups = vec![all[..cut].to_vec(), all[cut..].to_vec()];
                actions.push((start, FaultAction::Partition(groups)));
                actions.push((end, FaultAction::Heal));
            }
        }
        if spec.crash {
            for (start, end) in windows(span, rng) {
                let node = NodeId(rng.random_range(0..nodes as u32));
                actions.push((start, FaultAction::Crash(node)));
                actions.push((end, FaultAction::Restart(node)));
            }
        }
        if spec.leader_crash {
            for (start, end) in windows(span, rng) {
                actions.push((start, FaultAction::CrashLeader));
                actions.push((end, FaultAction::RestartLeader));
            }
        }
        if spec.pause {
            for (start, end) in windows_between(span, 500_000..=3_000_000, rng) {
                let node = NodeId(rng.random_range(0..nodes as u32));
                actions.push((start, FaultAction::Pause(node)));
                actions.push((end, FaultAction::Resume(node)));
            }
        }
        if spec.master_crash {
            for (start, end) in long_windows(span, rng) {
                let pick = rng.random();
                actions.push((start, FaultAction::CrashMaster { pick }));
                actions.push((end, FaultAction::RestartMaster));
            }
        }
        if spec.loss {
            for (start, end) in windows(span, rng) {
                actions.push((start, FaultAction::Loss(0.05)));
                actions.push((end, FaultAction::Loss(0.0)));
            }
        }
        // Stable sort: simultaneous actions keep the order they were drawn in.
        actions.sort_by_key(|(at, _)| *at);
        FaultSchedule {
            actions: actions
                .into_iter()
                .map(|(at, a)| (Duration::from_micros(at), a))
                .collect(),
        }
    }
}

/// Fault windows (start, end in µs) inside `0..span`: they begin after a calm first tenth, last
/// 0.2–1.5 s, and are separated by at least 0.2 s of calm.
fn windows(span: u64, rng: &mut ChaCha8Rng) -> Vec<(u64, u64)> {
    windows_between(span, 200_000..=1_500_000, rng)
}

/// [`windows`] lasting `length` µs each.
fn windows_between(
    span: u64,
    length: std::ops::RangeInclusive<u64>,
    rng: &mut ChaCha8Rng,
) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut t = span / 10;
    loop {
        let start = t + rng.random_range(200_000..=800_000);
        let end = start + rng.random_range(length.clone());
        if end >= span {
            return out;
        }
        out.push((start, end));
        t = end;
    }
}

/// Windows for a master's crash (start, end in µs) inside `0..span`: long enough for the
/// master's lease to run out and another to take over (2–4 s), or lasting to the end of
/// `span` (the node stays down), each with an even chance; after a calm first tenth, separated
/// by at least 0.5 s.
fn long_windows(span: u64, rng: &mut ChaCha8Rng) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut t = span / 10;
    loop {
        let start = t + rng.random_range(500_000..=1_500_000);
        if start + 2_000_000 >= span {
            return out;
        }
        if rng.random_bool(0.5) {
            out.push((start, span - 1));
            return out;
        }
        let end = start + rng.random_range(2_000_000..=4_000_000);
        if end >= span {
            out.push((start, span - 1));
            return out;
        }
        out.push((start, end));
        t = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_protocols::registry::NetworkModel;
    use rand::SeedableRng;

    const LOSSY: ProtocolInfo = ProtocolInfo {
        network: NetworkModel {
            tolerates_loss: true,
            tolerates_reordering: true,
        },
        ..augur_protocols::nocc::INFO
    };
    const FIFO: ProtocolInfo = ProtocolInfo {
        network: NetworkModel {
            tolerates_loss: false,
            tolerates_reordering: false,
        },
        ..LOSSY
    };
    const SEQUENCED: ProtocolInfo = ProtocolInfo {
        engine: augur_protocols::registry::Engine::Ordered,
        ..LOSSY
    };

    #[test]
    fn all_means_what_the_network_model_allows() {
        let all = FaultSpec::parse("all", &LOSSY).unwrap();
        assert_eq!(all.to_string(), "delay,reorder,loss,partition,crash,skew");
        let fifo = FaultSpec::parse("all", &FIFO).unwrap();
        assert_eq!(fifo.to_string(), "delay,partition,crash,skew");
        assert!(
            FaultSpec::parse("loss", &FIFO)
                .unwrap_err()
                .contains("network model")
        );
        assert!(
            FaultSpec::parse("delay,meteor", &LOSSY)
                .unwrap_err()
                .contains("unknown fault 'meteor'")
        );
        assert!(FaultSpec::parse("none", &LOSSY).unwrap().is_none());
        let sequenced = FaultSpec::parse("all", &SEQUENCED).unwrap();
        assert_eq!(
            sequenced.to_string(),
            "delay,reorder,loss,partition,crash,leader-crash,skew"
        );
        assert!(
            FaultSpec::parse("leader-crash", &LOSSY)
                .unwrap_err()
                .contains("needs a protocol with a sequencer")
        );
    }

    #[test]
    fn every_window_closes_inside_the_safety_phase() {
        let spec = FaultSpec::parse("all", &SEQUENCED).unwrap();
        for seed in 0..50 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let s = FaultSchedule::draw(&spec, 3, Duration::from_secs(8), &mut rng);
            let mut down = 0i32;
            let mut leader_down = 0i32;
            let mut master_down = 0i32;
            let mut paused = 0i32;
            let mut cut = 0i32;
            for (at, a) in &s.actions {
                assert!(*at < Duration::from_secs(8));
                match a {
                    FaultAction::Crash(_) => down += 1,
                    FaultAction::Restart(_) => down -= 1,
                    FaultAction::CrashLeader => leader_down += 1,
                    FaultAction::RestartLeader => leader_down -= 1,
                    FaultAction::CrashMaster { .. } => master_down += 1,
                    FaultAction::Pause(_) => paused += 1,
                    FaultAction::Resume(_) => paused -= 1,
                    FaultAction::RestartMaster => master_down -= 1,
                    FaultAction::Partition(_) => cut += 1,
                    FaultAction::Heal => cut -= 1,
                    FaultAction::Loss(_) => {}
                }
                assert!((0..=1).contains(&down) && (0..=1).contains(&cut));
                assert!((0..=1).contains(&leader_down));
                assert!((0..=1).contains(&master_down) && (0..=1).contains(&paused));
            }
            assert_eq!((down, cut, master_down, paused), (0, 0, 0, 0));
        }
    }
}
