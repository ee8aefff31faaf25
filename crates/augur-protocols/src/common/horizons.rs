//! How far every node of an order-then-execute cluster got, and how far the log and the old
//! versions may therefore be cut: the part of `common::ordered` that decides whom it waits
//! for.
//!
//! Each node announces every few ticks its *horizon*: the position every one of its partitions
//! is past and has logged, so it never runs a position at or below it again. The log and the
//! versions below the least horizon are needed by nobody, and are cut.
//!
//! A node that stays silent (it is down, paused, or cut off) would hold that cut back for as
//! long as it is away: every other node's log and every overwritten version would grow without
//! bound. So a node unheard for longer than [`LEFT_BEHIND_MS`] ([`LEFT_BEHIND_DEFAULT`] unless
//! set) is *left behind*: the cut moves on without it ([`Horizons::watermark`]). When it
//! returns, its log ends below the cut, and the sequencer's leader sends it a snapshot of the
//! cut; its partitions are then copied from a replica that is past the cut, not run again. A
//! node is left behind only if every partition it replicates has a replica that is not silent,
//! one that can be copied from later. The cut never moves back ([`Horizons::collected`]): a node heard again after it was left behind
//! holds back only what follows.
//!
//! # Where a node left behind restarts
//!
//! The node catches up through one *position*: at least the cut it learnt of (from the
//! snapshot, a `Horizon`'s `collected`, or every replica of a value it waits for answering
//! `ValueGone` with its floor), raised by any floor a source refuses a copy with. Its
//! partitions not past the position throw their runs away and are copied through it, all
//! through the same one, so that none restarts below another copied past it (the copy keeps
//! only each key's newest version through the position). Its partitions already past the
//! position run on: other replicas may need their values to get there, and a node that stopped
//! answering while it waited for its copies could wait for ever on them (a node whose one
//! partition lagged while the other ran ahead stalled a `calvin` cluster that way).
//!
//! A copy can always be had: a node is left behind only while every partition it replicates
//! has a replica heard recently, whose announced horizon the cut then counts, so for every
//! partition some replica is past the cut, and every position above derives from a cut or a
//! floor (itself a cut or a copy position). The sweep of `calvin`, `s-smr` and `sparkle` under
//! every fault with `left_behind_ms=500` (200 seeds of three workloads on `lan` and `3dc`)
//! passes, as does a `nemesis` of killed `calvin` node processes (a test); CI sweeps the
//! setting at 500 ms, where it is taken often.

use crate::protocol_info::SettingInfo;
use augur_contract::NodeEnv;
use augur_types::{NodeId, Placement, Timestamp};
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::time::Duration;

/// The setting for how long a node may go unheard, in milliseconds, before the others stop
/// keeping the log and old versions for it; `off` waits for every node for ever.
pub const LEFT_BEHIND_MS: &str = "left_behind_ms";
/// How long a node may go unheard unless the setting says otherwise: a restart takes far less
/// (it then runs the log again), a dead machine far more.
pub const LEFT_BEHIND_DEFAULT: Duration = Duration::from_secs(10);
/// The left-behind setting.
pub const LEFT_BEHIND_SETTING: SettingInfo = SettingInfo {
    name: LEFT_BEHIND_MS,
    values: &[
        "off", "500", "1000", "2000", "5000", "10000", "30000", "60000",
    ],
    default: "10000",
    doc: "milliseconds a node may go unheard before the others stop keeping the sequencer's log and old versions for it (it then catches up from a Raft snapshot and a copy of its partitions from a live replica); off waits for every node, however long it is down",
};

/// Every node's announced horizon, when each was last heard, and the cut so far.
#[derive(Debug)]
pub struct Horizons {
    me: NodeId,
    placement: Arc<Placement>,
    /// `None`: nobody is ever left behind.
    left_behind: Option<Duration>,
    /// Per node: its latest horizon, and when it was last heard (this node's start for a node
    /// not heard yet, so that a cluster starting up waits for everyone that long).
    heard: FxHashMap<NodeId, (Timestamp, Timestamp)>,
    collected: Timestamp,
}

impl Horizons {
    /// Nobody heard yet, at `now` (this node's start). The registry accepts only the values
    /// [`LEFT_BEHIND_SETTING`] lists (`off` is the one that does not parse as milliseconds).
    pub fn new(env: &NodeEnv) -> Self {
        let left_behind = match env.options.settings.get(LEFT_BEHIND_MS) {
            None => Some(LEFT_BEHIND_DEFAULT),
            Some(v) => v.parse().ok().map(Duration::from_millis),
        };
        Horizons {
            me: env.id,
            placement: Arc::clone(&env.placement),
            left_behind,
            heard: FxHashMap::default(),
            collected: Timestamp::ZERO,
        }
    }

    /// `node` announced `through` at `now` (this node's own announcements too).
    pub fn heard(&mut self, node: NodeId, through: Timestamp, now: Timestamp) {
        let (h, at) = self.heard.entry(node).or_insert((Timestamp::ZERO, now));
        *h = (*h).max(through);
        *at = (*at).max(now);
    }

    /// The latest horizon `node` announced (zero if none).
    pub fn of(&self, node: NodeId) -> Timestamp {
        self.heard.get(&node).map_or(Timestamp::ZERO, |(h, _)| *h)
    }

    /// The nodes left behind at `now` (see the module docs), in id order.
    pub fn left_behind(&mut self, now: Timestamp) -> Vec<NodeId> {
        let Some(left_behind) = self.left_behind else {
            return Vec::new();
        };
        let silent: Vec<NodeId> = self
            .placement
            .nodes()
            .filter(|n| *n != self.me)
            .filter(|n| {
                let (_, at) = *self.heard.entry(*n).or_insert((Timestamp::ZERO, now));
                now.0.saturating_sub(at.0) > left_behind.as_micros() as u64
            })
            .collect();
        silent
            .iter()
            .copied()
            .filter(|n| {
                self.placement.local_partitions(*n).iter().all(|p| {
                    self.placement
                        .replicas(*p)
                        .iter()
                        .any(|r| r != n && !silent.contains(r))
                })
            })
            .collect()
    }

    /// How far every node not left behind is, at `now`: what the versions and the log may be
    /// cut below. Never less than before.
    pub fn watermark(&mut self, now: Timestamp) -> Timestamp {
        let left_behind = self.left_behind(now);
        let least = self
            .placement
            .nodes()
            .filter(|n| !left_behind.contains(n))
            .map(|n| self.of(n))
            .min()
            .unwrap_or(Timestamp::ZERO);
        self.collected = self.collected.max(least);
        self.collected
    }

    /// The highest watermark so far: versions below it may be gone, so no value before it may
    /// be answered from them.
    pub fn collected(&self) -> Timestamp {
        self.collected
    }

    /// The other replicas of a partition, the furthest announced first (whom to copy it from).
    pub fn furthest_first(&self, replicas: &[NodeId]) -> Vec<NodeId> {
        let mut others: Vec<NodeId> = replicas.iter().copied().filter(|n| *n != self.me).collect();
        others.sort_by_key(|n| (std::cmp::Reverse(self.of(*n)), *n));
        others
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_contract::ProtocolOptions;
    use augur_types::LatencyProfile;

    fn horizons(nodes: usize, replication: usize, left_behind_ms: &str) -> Horizons {
        let profile = LatencyProfile::named("lan").unwrap().truncated(1).unwrap();
        let placement = Arc::new(Placement::ring(profile, nodes, replication).unwrap());
        let mut options = ProtocolOptions::default();
        options
            .settings
            .insert(LEFT_BEHIND_MS.into(), left_behind_ms.into());
        let env = NodeEnv {
            id: NodeId(0),
            placement,
            options: Arc::new(options),
            procedures: Default::default(),
        };
        Horizons::new(&env)
    }

    fn ms(n: u64) -> Timestamp {
        Timestamp(n * 1000)
    }

    #[test]
    fn a_silent_node_holds_the_cut_back_until_it_is_left_behind_and_never_after() {
        let mut h = horizons(3, 3, "500");
        for n in 0..3 {
            h.heard(NodeId(n), ms(10), ms(0));
        }
        h.heard(NodeId(0), ms(90), ms(400));
        h.heard(NodeId(1), ms(80), ms(400));
        // Node 2 last spoke at 0 ms: waited for until 500 ms have passed.
        assert_eq!(h.watermark(ms(450)), ms(10));
        assert_eq!(h.left_behind(ms(501)), vec![NodeId(2)]);
        assert_eq!(h.watermark(ms(501)), ms(80));
        // Heard again, far behind: the cut stays where it was.
        h.heard(NodeId(2), ms(20), ms(600));
        assert_eq!(h.watermark(ms(600)), ms(80));
        assert_eq!(h.collected(), ms(80));
        assert_eq!(
            h.furthest_first(&[NodeId(0), NodeId(1), NodeId(2)]),
            vec![NodeId(1), NodeId(2)]
        );
    }

    #[test]
    fn a_node_holding_a_partition_no_other_live_replica_holds_is_waited_for() {
        // Three nodes, replication 2: with nodes 1 and 2 both silent, a partition they share
        // has no replica to copy from, so neither is left behind.
        let mut h = horizons(3, 2, "500");
        assert_eq!(h.left_behind(ms(0)), Vec::<NodeId>::new());
        h.heard(NodeId(0), ms(50), ms(1000));
        assert_eq!(h.left_behind(ms(1000)), Vec::<NodeId>::new());
        assert_eq!(h.watermark(ms(1000)), Timestamp::ZERO);
        // One silent node is left behind: each of its partitions has a live replica.
        h.heard(NodeId(1), ms(40), ms(1000));
        assert_eq!(h.left_behind(ms(1000)), vec![NodeId(2)]);
        assert_eq!(h.watermark(ms(1000)), ms(40));
    }
}
