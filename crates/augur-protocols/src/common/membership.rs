//! Who serves each partition, agreed through Raft, and leases that keep two masters from
//! serving one partition: the configuration beside the data path of the deferred-update
//! engines. `docs/architecture/availability.md` is the design; this module is its shared half,
//! and each engine adds what its protocols' masters keep (promotion, catch-up).
//!
//! * **The configuration** ([`Configuration`]) gives each partition an epoch, its in-sync
//!   replicas (master first, a subset of the placement's replicas) and a proposal floor. It
//!   changes only by [`Command`]s ordered by a Raft group of its own (the sequencer,
//!   [`super::sequencer`], with commands as its items) and applied in that order by every node
//!   with the same deterministic rules ([`Configuration::apply`]).
//! * **Leases.** Each node asks the group's leader for a lease every heartbeat; it holds one
//!   until its own clock reading at the ask plus the lease duration, and only once it has
//!   applied the configuration the leader granted it under. A node serves (reads, certifies) only
//!   while it holds a lease ([`Membership::serving`]).
//! * **Failure detection.** The leader proposes [`Command::Evict`] for a node it has not granted
//!   a lease for the lease duration plus the clock-skew bound (plus, after the leader's own
//!   election, twice the longest election timeout: a deposed leader that does not know it yet
//!   may grant leases until check-quorum makes it step down), and grants that node nothing until
//!   the eviction is applied.
//!
//! * **The oracle.** The configuration also names the node that runs a protocol's
//!   single-node service (GTS's timestamp oracle: the `oracle` setting's node until it is
//!   evicted, then the next node still in some in-sync set), and reserves it disjoint, rising
//!   blocks of timestamps ([`Command::Reserve`], [`Block`]), so that whichever node runs it
//!   next issues above everything issued before.
//!
//! * **Handback.** Once the master the placement gives a partition is in sync there again
//!   after a fail-over (and leased), the leader proposes [`Command::Handback`]: it masters the
//!   partition again, at a new epoch, and the node that stood in stays in sync as a slave. The
//!   epochs on the data path make the switch safe without waiting for a lease to run out: a
//!   prepare of the old epoch needs the vote of every replica in sync at it, and a replica
//!   that applied the handback refuses one.
//!
//! The configuration is rebuilt after a restart by replaying the group's log, like any
//! sequencer's batches. The log holds only configuration commands and is never cut yet (the
//! sequencer takes no snapshots): it grows by one entry per change, and under `gts` by one per
//! [`RESERVE_BLOCK`] commit timestamps, not per transaction.
//!
//! Fail-over is on by default for the protocols that take the setting. With `failover=off`,
//! or with a replication factor of one (there is nothing to fail over to), there is no group:
//! the configuration is the placement's, for good, and every node always holds a lease — the
//! engines then behave exactly as without this module.

use super::sequencer::{Batch, RaftMessage, Sequencer, SequencerRecord, SequencerTimer};
use crate::protocol_info::{SWITCH_VALUES, SettingInfo, switch};
use augur_contract::inbound::{BadMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Protocol};
use augur_types::{NodeId, PartitionId, Placement, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// The conversions of an engine that follows the configuration: its message type (`$msg`,
/// with its type parameters) and its timer type (`$timer`) each carry the group's in a
/// `Membership` variant, which [`Membership`]'s handlers hand back through `From`.
macro_rules! carried_in_membership_variants {
    ($msg:ident $(<$($param:ident),*>)?, $timer:ident) => {
        impl $(<$($param),*>)? From<$crate::common::membership::MembershipMsg>
            for $msg $(<$($param),*>)?
        {
            fn from(msg: $crate::common::membership::MembershipMsg) -> Self {
                Self::Membership(msg)
            }
        }

        impl $(<$($param),*>)? From<$crate::common::sequencer::RaftMessage>
            for $msg $(<$($param),*>)?
        {
            fn from(msg: $crate::common::sequencer::RaftMessage) -> Self {
                Self::Membership($crate::common::membership::MembershipMsg::Raft(msg))
            }
        }

        impl From<$crate::common::membership::MembershipTimer> for $timer {
            fn from(timer: $crate::common::membership::MembershipTimer) -> Self {
                Self::Membership(timer)
            }
        }

        impl From<$crate::common::sequencer::SequencerTimer> for $timer {
            fn from(timer: $crate::common::sequencer::SequencerTimer) -> Self {
                Self::Membership($crate::common::membership::MembershipTimer::Raft(timer))
            }
        }
    };
}
pub(crate) use carried_in_membership_variants;

/// A partition's configuration number: raised by every change to its entry.
pub type Epoch = u64;

/// The partitions a request depends on, each with the epoch its sender saw: a node not in sync
/// there at that epoch refuses the request (*Epochs on the data path* in
/// `docs/architecture/availability.md`).
pub type Epochs = Vec<(PartitionId, Epoch)>;

/// The setting that turns fail-over off (`failover=off`): the placement's masters for good.
/// On by default.
pub const FAILOVER: &str = "failover";
/// The setting for the lease duration, in milliseconds.
pub const LEASE_MS: &str = "lease_ms";
/// The setting for the bound on the difference between two nodes' clocks, in milliseconds.
pub const MAX_SKEW_MS: &str = "max_clock_skew_ms";

/// The lease duration when [`LEASE_MS`] is not given.
pub const DEFAULT_LEASE: Duration = Duration::from_millis(1000);
/// The clock-skew bound when [`MAX_SKEW_MS`] is not given: `augur check --faults skew` offsets
/// each clock by up to ±50 ms.
pub const DEFAULT_MAX_SKEW: Duration = Duration::from_millis(100);
/// How often a node asks for its lease to be renewed.
pub const HEARTBEAT: Duration = Duration::from_millis(100);

/// The fail-over switch.
pub const FAILOVER_SETTING: SettingInfo = SettingInfo {
    name: FAILOVER,
    values: SWITCH_VALUES,
    default: "on",
    doc: "on: masters fail over to an in-sync replica, under leases agreed through Raft (docs/architecture/availability.md); off keeps the placement's masters for good",
};
/// The three fail-over settings, for a protocol that has no other.
pub const FAILOVER_SETTINGS: &[SettingInfo] = &[FAILOVER_SETTING, LEASE_SETTING, SKEW_SETTING];

/// The lease duration.
pub const LEASE_SETTING: SettingInfo = SettingInfo {
    name: LEASE_MS,
    values: &["300", "500", "1000", "2000", "5000"],
    default: "1000",
    doc: "milliseconds a node's lease lasts from its ask; a dead master is replaced this long (plus the skew bound) after its last renewal",
};
/// The clock-skew bound.
pub const SKEW_SETTING: SettingInfo = SettingInfo {
    name: MAX_SKEW_MS,
    values: &["10", "50", "100", "200", "500"],
    default: "100",
    doc: "bound, in milliseconds, on the difference between two nodes' clocks, which leases assume",
};

/// A change to the configuration, as ordered through Raft.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// `node`'s lease has surely run out at the leader, whose clock read `floor`: it leaves
    /// every in-sync set it is not the last member of, and where it was master the next
    /// in-sync replica takes over.
    Evict { node: NodeId, floor: Timestamp },
    /// `node` copied `partition` from its master at `epoch`: it joins the in-sync set, if the
    /// partition is still at that epoch.
    Rejoin {
        partition: PartitionId,
        node: NodeId,
        epoch: Epoch,
    },
    /// `node`, the master the placement gives `partition`, is in sync there again at `epoch`
    /// after a fail-over: it takes the mastership back, if the partition is still at that
    /// epoch. Nothing else changes: the old master stays in sync, as a slave.
    Handback {
        partition: PartitionId,
        node: NodeId,
        epoch: Epoch,
    },
    /// The oracle `by`, in its incarnation `incarnation`, asks for the next block of
    /// [`RESERVE_BLOCK`] timestamps, and says its stable timestamp reached `stable` (a value
    /// it logged): granted, and `stable` kept, if `by` is the configuration's oracle (a
    /// [`Block`]); ignored otherwise.
    Reserve {
        by: NodeId,
        incarnation: u64,
        stable: Timestamp,
    },
}

/// How many timestamps a [`Command::Reserve`] reserves: an oracle that fails over goes
/// through the configuration group once per this many commit timestamps.
pub const RESERVE_BLOCK: u64 = 1 << 12;

/// Timestamps `after + 1 ..= upto`, reserved by the configuration for the oracle `by` in its
/// incarnation `incarnation`. Blocks are disjoint and rise in the order they are granted, and
/// each lies above every timestamp an earlier block (of any node or incarnation) held, so an
/// oracle that issues only within its own blocks never repeats a timestamp another issued,
/// and the first block of an incarnation bounds everything issued before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub by: NodeId,
    pub incarnation: u64,
    pub after: Timestamp,
    pub upto: Timestamp,
}

/// One partition's entry in the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionConfig {
    pub epoch: Epoch,
    /// The replicas that count, master first: never empty.
    pub in_sync: Vec<NodeId>,
    /// Timestamps proposed on the partition must exceed this: the end of the leases of the
    /// replicas taken out of it (see the module docs of `docs/architecture/availability.md`).
    pub floor: Timestamp,
}

/// How a new master is chosen when the master is evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Promotion {
    /// The next in-sync replica; none when the master was the last in sync (the rule).
    InSync,
    /// The next replica the placement lists, in sync or not, even when the master was the last
    /// in sync: an unclean election (the mutant `promote-out-of-sync`).
    Unclean,
}

/// Every partition's epoch, in-sync replicas and floor, and the oracle (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Configuration {
    /// How many commands have been applied.
    version: u64,
    partitions: Vec<PartitionConfig>,
    /// The floor of the last eviction applied, the largest of all.
    latest_floor: Timestamp,
    /// The node that runs the protocol's single-node service, GTS's timestamp oracle (for
    /// protocols without one, bookkeeping nobody reads): the `oracle` setting's node until it
    /// is evicted, then the next node still in some in-sync set.
    oracle: NodeId,
    /// The end of the last [`Block`] granted: every timestamp any oracle issued under
    /// fail-over is at or below it.
    reserved: Timestamp,
    /// The largest stable timestamp an oracle reported with a reservation: safe to read at,
    /// and where a new oracle starts at the least (nodes collect garbage only below it).
    oracle_stable: Timestamp,
    /// The block the last command applied granted, for [`Membership`] to report.
    granted: Option<Block>,
}

impl Configuration {
    /// The configuration before any command: the placement's replicas, all in sync.
    pub fn initial(placement: &Placement) -> Configuration {
        let partitions = placement
            .partitions()
            .map(|p| PartitionConfig {
                epoch: 0,
                in_sync: placement.replicas(p).to_vec(),
                floor: Timestamp::ZERO,
            })
            .collect();
        Configuration {
            version: 0,
            partitions,
            latest_floor: Timestamp::ZERO,
            oracle: NodeId(0),
            reserved: Timestamp::ZERO,
            oracle_stable: Timestamp::ZERO,
            granted: None,
        }
    }

    /// The node that runs the protocol's single-node service (GTS's timestamp oracle).
    pub fn oracle(&self) -> NodeId {
        self.oracle
    }

    /// The largest stable timestamp an oracle reported with a reservation (see
    /// [`Command::Reserve`]).
    pub fn oracle_stable(&self) -> Timestamp {
        self.oracle_stable
    }

    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    pub fn partition(&self, p: PartitionId) -> &PartitionConfig {
        &self.partitions[p.0 as usize]
    }

    pub fn master(&self, p: PartitionId) -> NodeId {
        self.partition(p).in_sync[0]
    }

    /// The in-sync replicas of `p`, master first.
    pub fn in_sync(&self, p: PartitionId) -> &[NodeId] {
        &self.partition(p).in_sync
    }

    /// The in-sync replicas of `p` but its master.
    pub fn slaves(&self, p: PartitionId) -> &[NodeId] {
        &self.partition(p).in_sync[1..]
    }

    pub fn epoch(&self, p: PartitionId) -> Epoch {
        self.partition(p).epoch
    }

    pub fn floor(&self, p: PartitionId) -> Timestamp {
        self.partition(p).floor
    }

    /// The largest floor of any partition: the last eviction's, since each eviction's floor
    /// is raised to at least every earlier one (leaders' clocks differ, and DST's promoted
    /// floors rely on later evictions covering earlier ones).
    pub fn latest_floor(&self) -> Timestamp {
        self.latest_floor
    }

    pub fn is_master(&self, node: NodeId, p: PartitionId) -> bool {
        self.master(p) == node
    }

    pub fn is_in_sync(&self, node: NodeId, p: PartitionId) -> bool {
        self.in_sync(p).contains(&node)
    }

    /// Whether `node` is in some partition's in-sync set.
    pub fn in_any_sync_set(&self, node: NodeId) -> bool {
        self.partitions.iter().any(|c| c.in_sync.contains(&node))
    }

    /// Whether evicting `node` would change something: it is in some partition's in-sync set
    /// with another replica (or, under `promotion`'s unclean election, masters one).
    pub fn evictable(&self, node: NodeId, promotion: Promotion) -> bool {
        self.partitions.iter().any(|c| {
            (c.in_sync.len() > 1 && c.in_sync.contains(&node))
                || (promotion == Promotion::Unclean && c.in_sync[0] == node)
        })
    }

    /// The in-sync replica of `p` nearest to `from` (itself if it is one), ties broken by
    /// node id.
    pub fn closest_in_sync(&self, placement: &Placement, from: NodeId, p: PartitionId) -> NodeId {
        let replicas = self.in_sync(p);
        if replicas.contains(&from) {
            return from;
        }
        *replicas
            .iter()
            .min_by_key(|n| (placement.one_way(from, **n), n.0))
            .expect("an in-sync set is never empty")
    }

    /// The current epochs of `partitions`, ascending, each once.
    pub fn epochs_of(&self, partitions: impl IntoIterator<Item = PartitionId>) -> Epochs {
        let mut epochs: Epochs = partitions.into_iter().map(|p| (p, self.epoch(p))).collect();
        epochs.sort_unstable();
        epochs.dedup();
        epochs
    }

    /// Whether `me` is in sync at every epoch of `epochs`, and `epochs` names every partition
    /// of `needed` (a request that names fewer, forged or malformed, is refused rather than
    /// trusted).
    pub fn in_step(
        &self,
        me: NodeId,
        epochs: &[(PartitionId, Epoch)],
        mut needed: impl Iterator<Item = PartitionId>,
    ) -> bool {
        epochs
            .iter()
            .all(|(p, e)| self.is_in_sync(me, *p) && self.epoch(*p) == *e)
            && needed.all(|partition| epochs.iter().any(|(p, _)| *p == partition))
    }

    /// Every in-sync replica of `partitions`, each once, in node order.
    pub fn replicas_of(&self, partitions: &[PartitionId]) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = partitions
            .iter()
            .flat_map(|p| self.in_sync(*p).iter().copied())
            .collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    /// Apply `command` (every node does so in the same order); the partitions whose entry
    /// changed, ascending.
    pub fn apply(
        &mut self,
        command: &Command,
        placement: &Placement,
        promotion: Promotion,
    ) -> Vec<PartitionId> {
        self.version += 1;
        let mut changed = Vec::new();
        match *command {
            Command::Evict { node, floor } => {
                // Monotone in the order evictions are applied, whichever leader's clock
                // proposed them.
                let floor = floor.max(self.latest_floor);
                self.latest_floor = floor;
                for (i, c) in self.partitions.iter_mut().enumerate() {
                    let Some(at) = c.in_sync.iter().position(|n| *n == node) else {
                        continue;
                    };
                    let p = PartitionId(i as u32);
                    let unclean = promotion == Promotion::Unclean && at == 0;
                    if c.in_sync.len() == 1 && !unclean {
                        // The last replica in sync stays: the partition waits for it.
                        continue;
                    }
                    c.in_sync.remove(at);
                    if unclean {
                        // The mutant: the next replica the placement lists takes over, in
                        // sync or not.
                        let next = placement.replicas(p).iter().find(|n| **n != node).copied();
                        if let Some(next) = next {
                            c.in_sync.retain(|n| *n != next);
                            c.in_sync.insert(0, next);
                        }
                    }
                    if c.in_sync.is_empty() {
                        c.in_sync.push(node);
                        continue;
                    }
                    c.epoch += 1;
                    c.floor = c.floor.max(floor);
                    changed.push(p);
                }
                if node == self.oracle {
                    self.oracle = self.next_oracle(placement, node);
                }
            }
            Command::Rejoin {
                partition,
                node,
                epoch,
            } => {
                let fits = placement.replicates(node, partition);
                if let Some(c) = self.partitions.get_mut(partition.0 as usize)
                    && fits
                    && c.epoch == epoch
                    && !c.in_sync.contains(&node)
                {
                    c.in_sync.push(node);
                    c.epoch += 1;
                    changed.push(partition);
                }
            }
            Command::Handback {
                partition,
                node,
                epoch,
            } => {
                let preferred = (partition.0 as usize) < placement.partition_count()
                    && placement.master(partition) == node;
                if let Some(c) = self.partitions.get_mut(partition.0 as usize)
                    && preferred
                    && c.epoch == epoch
                    && c.in_sync[0] != node
                    && let Some(at) = c.in_sync.iter().position(|n| *n == node)
                {
                    // The old master stays in sync: its own proposals (votes) keep exceeding
                    // every snapshot it served, so no floor is needed, unlike an eviction.
                    c.in_sync.remove(at);
                    c.in_sync.insert(0, node);
                    c.epoch += 1;
                    changed.push(partition);
                }
            }
            Command::Reserve {
                by,
                incarnation,
                stable,
            } => {
                if by == self.oracle {
                    self.oracle_stable = self.oracle_stable.max(stable);
                    let after = self.reserved;
                    self.reserved = Timestamp(after.0.saturating_add(RESERVE_BLOCK));
                    self.granted = Some(Block {
                        by,
                        incarnation,
                        after,
                        upto: self.reserved,
                    });
                }
            }
        }
        changed
    }

    /// Who runs the oracle once `evicted` no longer does: the next node after it, in id order
    /// and round, that is still in some in-sync set (`evicted` itself if none is).
    fn next_oracle(&self, placement: &Placement, evicted: NodeId) -> NodeId {
        let nodes: Vec<NodeId> = placement.nodes().collect();
        let at = nodes.iter().position(|n| *n == evicted).unwrap_or(0);
        (1..nodes.len())
            .map(|i| nodes[(at + i) % nodes.len()])
            .find(|n| self.in_any_sync_set(*n))
            .unwrap_or(evicted)
    }
}

/// The configuration group's messages and the leases.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MembershipMsg {
    Raft(RaftMessage),
    /// Node → leader: renew my lease; my clock read `sent` as I asked.
    LeaseAsk {
        sent: Timestamp,
    },
    /// Leader → node: a lease from `sent` (echoed), granted under configuration `version`.
    LeaseGrant {
        sent: Timestamp,
        version: u64,
    },
}

impl MembershipMsg {
    /// The message's shape (a Raft message is decoded and checked; the rest carries nothing a
    /// handler could trip on).
    pub fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            MembershipMsg::Raft(raft) => raft.check(at),
            MembershipMsg::LeaseAsk { .. } | MembershipMsg::LeaseGrant { .. } => Ok(()),
        }
    }
}

/// The configuration group's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MembershipTimer {
    Raft(SequencerTimer),
    /// Ask for a lease (and, at the leader, look for silent nodes).
    Heartbeat,
}

/// What applying the commands an input delivered did.
#[derive(Clone, Debug)]
pub struct Reconfiguration {
    /// The configuration before them.
    pub before: Configuration,
    /// The commands, in the order applied (some may have changed nothing).
    pub commands: Vec<Command>,
    /// The partitions whose entry changed, ascending.
    pub changed: Vec<PartitionId>,
    /// The timestamp blocks granted, in order.
    pub blocks: Vec<Block>,
}

/// The lease this node holds.
#[derive(Debug, Default)]
struct HeldLease {
    /// Serving is allowed while the clock is below this.
    until: Timestamp,
    /// Grants under a configuration this node has not applied yet: (lease end, version).
    pending: Vec<(Timestamp, u64)>,
}

impl HeldLease {
    fn offer(&mut self, until: Timestamp, version: u64, applied: u64) {
        if version <= applied {
            self.until = self.until.max(until);
        } else {
            self.pending.push((until, version));
        }
    }

    fn applied(&mut self, applied: u64) {
        let until = &mut self.until;
        self.pending.retain(|(end, version)| {
            let ready = *version <= applied;
            if ready {
                *until = (*until).max(*end);
            }
            !ready
        });
    }
}

/// The leader's side of leases.
#[derive(Debug, Default)]
struct LeaseDesk {
    /// When this node became the group's leader (its clock); `None` while it is not.
    since: Option<Timestamp>,
    /// Asks received since the last heartbeat: (asker, its clock reading at the ask).
    asks: Vec<(NodeId, Timestamp)>,
    /// Heartbeat rounds whose leadership confirmation is awaited: the asks they answer, and
    /// when the round began (this node's own lease runs from then).
    rounds: BTreeMap<u64, (Vec<(NodeId, Timestamp)>, Timestamp)>,
    next_round: u64,
    /// When each node was last granted a lease, since this node became leader.
    granted: BTreeMap<NodeId, Timestamp>,
    /// When each node last asked for one: a node that asks is alive, and is granted once the
    /// round confirms, so it is not evicted meanwhile.
    asked: BTreeMap<NodeId, Timestamp>,
    /// Nodes whose eviction this leader proposed and has not seen applied: granted nothing.
    evicting: BTreeSet<NodeId>,
    /// Handbacks this leader proposed, each at the partition's epoch then: not proposed again
    /// while the partition is at that epoch.
    handing_back: BTreeSet<(PartitionId, Epoch)>,
}

#[derive(Clone, Copy, Debug)]
struct Timing {
    lease: Duration,
    skew: Duration,
    /// How long after its election a leader assumes leases granted by its predecessor may
    /// still be given out.
    election: Duration,
}

/// Counters of the configuration group on this node.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    evictions_proposed: u64,
    rejoins_proposed: u64,
    handbacks_proposed: u64,
    reserves_proposed: u64,
    lease_grants: u64,
}

/// The configuration, the group agreeing on it, and this node's lease (see the module docs).
pub struct Membership {
    me: NodeId,
    placement: Arc<Placement>,
    config: Configuration,
    /// `None`: fail-over is off.
    group: Option<Box<Sequencer<Command>>>,
    lease: HeldLease,
    desk: LeaseDesk,
    timing: Timing,
    promotion: Promotion,
    counters: Counters,
}

/// Whether `env` asks for fail-over: unless `failover=off`, and only with something to fail
/// over to (a replication factor above one).
pub fn failover_on(env: &NodeEnv) -> bool {
    failover_asked(&env.options.settings) && env.placement.replication_factor() > 1
}

/// Whether protocol `settings` leave fail-over on (it is unless `failover=off`), for a
/// protocol that takes the setting.
pub fn failover_asked(settings: &BTreeMap<String, String>) -> bool {
    settings
        .get(FAILOVER)
        .and_then(|v| switch(v))
        .unwrap_or(true)
}

fn millis_setting(env: &NodeEnv, name: &str, default: Duration) -> Duration {
    env.options
        .settings
        .get(name)
        .and_then(|v| v.parse().ok())
        .map_or(default, Duration::from_millis)
}

impl Membership {
    /// A node's membership rebuilt from its durable group records (none for a new node; the
    /// configuration follows as the log is delivered again). `promotion` is the rule for new
    /// masters; `fails_over`, whether the protocol follows a changing configuration at all
    /// (else there is no group, whatever the settings ask).
    pub fn restore(
        env: &NodeEnv,
        promotion: Promotion,
        fails_over: bool,
        records: Vec<SequencerRecord>,
    ) -> Result<Membership, String> {
        let group = if fails_over && failover_on(env) {
            Some(Box::new(Sequencer::restore(env, records)?))
        } else {
            None
        };
        let election = group
            .as_ref()
            .map_or(Duration::ZERO, |g| g.longest_election_timeout() * 2);
        Ok(Membership {
            me: env.id,
            placement: env.placement.clone(),
            config: Configuration::initial(&env.placement),
            group,
            lease: HeldLease::default(),
            desk: LeaseDesk::default(),
            timing: Timing {
                lease: millis_setting(env, LEASE_MS, DEFAULT_LEASE),
                skew: millis_setting(env, MAX_SKEW_MS, DEFAULT_MAX_SKEW),
                election,
            },
            promotion,
            counters: Counters::default(),
        })
    }

    /// Whether the configuration can change (fail-over is on).
    pub fn active(&self) -> bool {
        self.group.is_some()
    }

    pub fn config(&self) -> &Configuration {
        &self.config
    }

    /// Whether this node may serve now: it holds a lease (always, with fail-over off).
    pub fn serving(&self, now: Timestamp) -> bool {
        self.group.is_none() || now < self.lease.until
    }

    /// When this node's lease runs out, on its own clock (zero before its first grant).
    pub fn lease_end(&self) -> Timestamp {
        self.lease.until
    }

    /// Whether a lease another node holds until `lease_end` on its own clock surely still
    /// runs while this node's clock reads `now`: two clocks differ by at most the skew bound.
    pub fn surely_leased(&self, now: Timestamp, lease_end: Timestamp) -> bool {
        now.saturating_add(self.timing.skew) < lease_end
    }

    /// How long a lease lasts: the longest a request may wait here for one.
    pub fn lease_duration(&self) -> Duration {
        self.timing.lease
    }

    /// The bound on the difference between two nodes' clocks that leases assume.
    pub fn skew_bound(&self) -> Duration {
        self.timing.skew
    }

    /// Who masters `partition` in this node's configuration, when the configuration can
    /// change (fail-over on); `None` for a partition out of range.
    pub fn master_of(&self, partition: PartitionId) -> Option<NodeId> {
        let config = &self.config;
        (self.active() && (partition.0 as usize) < config.partition_count())
            .then(|| config.master(partition))
    }

    /// The node this one believes leads the group.
    pub fn leader(&self) -> Option<NodeId> {
        self.group.as_ref().and_then(|g| g.leader())
    }

    /// Start the group's timers and the heartbeat (at start and after every restart).
    pub fn on_start<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>)
    where
        P::Timer: From<MembershipTimer> + From<SequencerTimer>,
    {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        group.on_start(ctx);
        ctx.set_timer(HEARTBEAT, MembershipTimer::Heartbeat.into());
    }

    /// Before any command is applied: the protocol's oracle starts at `node` (its setting).
    pub fn set_initial_oracle(&mut self, node: NodeId) {
        if self.config.version == 0 {
            self.config.oracle = node;
        }
    }

    /// Propose that the configuration reserve the next block of timestamps for this node's
    /// oracle incarnation `incarnation`, whose stable timestamp reached `stable` (granted only
    /// while this node is the oracle).
    pub fn propose_reserve(&mut self, incarnation: u64, stable: Timestamp) {
        let by = self.me;
        if let Some(group) = self.group.as_mut() {
            self.counters.reserves_proposed += 1;
            group.submit(Command::Reserve {
                by,
                incarnation,
                stable,
            });
        }
    }

    /// Propose that `node` joins `partition`'s in-sync set at `epoch` (the partition's master,
    /// once `node` copied it).
    pub fn propose_rejoin(&mut self, partition: PartitionId, node: NodeId, epoch: Epoch) {
        if let Some(group) = self.group.as_mut() {
            self.counters.rejoins_proposed += 1;
            group.submit(Command::Rejoin {
                partition,
                node,
                epoch,
            });
        }
    }

    /// A timer of the group fired; what it reconfigured, if anything.
    pub fn on_timer<P: Protocol>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        timer: MembershipTimer,
    ) -> Option<Reconfiguration>
    where
        P::Timer: From<MembershipTimer> + From<SequencerTimer>,
        P::Msg: From<MembershipMsg> + From<RaftMessage>,
        P::Record: From<SequencerRecord>,
    {
        match timer {
            MembershipTimer::Raft(t) => {
                let batches = self.group.as_mut()?.on_timer(ctx, t);
                self.settle(ctx, batches)
            }
            MembershipTimer::Heartbeat => {
                ctx.set_timer(HEARTBEAT, MembershipTimer::Heartbeat.into());
                let batches = self.heartbeat(ctx);
                self.settle(ctx, batches)
            }
        }
    }

    /// A message of the group from `from`; what it reconfigured, if anything.
    pub fn on_message<P: Protocol>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        from: NodeId,
        msg: MembershipMsg,
    ) -> Option<Reconfiguration>
    where
        P::Timer: From<MembershipTimer> + From<SequencerTimer>,
        P::Msg: From<MembershipMsg> + From<RaftMessage>,
        P::Record: From<SequencerRecord>,
    {
        let group = self.group.as_mut()?;
        match msg {
            MembershipMsg::Raft(raft) => {
                let batches = group.on_message(ctx, from, raft);
                self.settle(ctx, batches)
            }
            MembershipMsg::LeaseAsk { sent } => {
                // Answered once a quorum confirms this node still leads (next heartbeat).
                if group.is_leader() {
                    self.desk.asks.push((from, sent));
                    self.desk.asked.insert(from, ctx.now());
                }
                None
            }
            MembershipMsg::LeaseGrant { sent, version } => {
                // A grant echoes an ask of this node's: one from the future, or older than a
                // lease, is not (a forged or very late message) and is ignored.
                let now = ctx.now();
                if sent <= now && now.since(sent) < self.timing.lease {
                    let until = sent.saturating_add(self.timing.lease);
                    self.lease.offer(until, version, self.config.version);
                }
                None
            }
        }
    }

    /// The heartbeat: renew this node's lease; at the leader, ask a quorum to confirm its
    /// leadership for the asks received since the last heartbeat (its own included), and
    /// evict the silent.
    /// Returns the batches the group committed meanwhile.
    fn heartbeat<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>) -> Vec<Batch<Command>>
    where
        P::Timer: From<MembershipTimer> + From<SequencerTimer>,
        P::Msg: From<MembershipMsg> + From<RaftMessage>,
        P::Record: From<SequencerRecord>,
    {
        let Some(group) = self.group.as_mut() else {
            return Vec::new();
        };
        let now = ctx.now();
        if !group.is_leader() {
            self.desk = LeaseDesk::default();
            if let Some(leader) = group.leader()
                && leader != self.me
            {
                ctx.send(leader, MembershipMsg::LeaseAsk { sent: now }.into());
            }
            return Vec::new();
        }
        if self.desk.since.is_none() {
            // Who leads decides how soon a silent node is evicted (after an election, not
            // before the leases its predecessor may have granted ran out).
            tracing::info!(
                target: "augur::configuration",
                "node {} leads the configuration group from now (configuration {})",
                self.me.0,
                self.config.version
            );
        }
        let since = *self.desk.since.get_or_insert(now);
        // Rounds a quorum never answered (this node was deposed meanwhile) are dropped.
        let lease = self.timing.lease;
        self.desk
            .rounds
            .retain(|_, (_, started)| now.since(*started) < lease);
        let round = self.desk.next_round;
        self.desk.next_round += 1;
        let asks = std::mem::take(&mut self.desk.asks);
        self.desk.rounds.insert(round, (asks, now));
        group.confirm_leadership(round.to_le_bytes().to_vec());
        // Leases the previous leader may have granted run out by then at the latest.
        let inherited = since.saturating_add(self.timing.election);
        let patience = self.timing.lease + self.timing.skew;
        for node in self.placement.nodes() {
            if node == self.me
                || self.desk.evicting.contains(&node)
                || !self.config.evictable(node, self.promotion)
            {
                continue;
            }
            let granted = self.desk.granted.get(&node).copied();
            let asked = self.desk.asked.get(&node).copied();
            let last = granted.max(asked).unwrap_or(inherited).max(inherited);
            if now > last.saturating_add(patience) {
                self.desk.evicting.insert(node);
                self.counters.evictions_proposed += 1;
                group.submit(Command::Evict { node, floor: now });
            }
        }
        // A partition mastered elsewhere than the placement says, since a fail-over, goes
        // back to the placement's master once that node is in sync there and leased: the
        // placement put it near the partition's clients.
        let config = &self.config;
        self.desk
            .handing_back
            .retain(|(p, epoch)| config.epoch(*p) == *epoch);
        for partition in self.placement.partitions() {
            let node = self.placement.master(partition);
            let epoch = config.epoch(partition);
            let leased = if node == self.me {
                now < self.lease.until
            } else {
                (self.desk.granted.get(&node)).is_some_and(|at| now.since(*at) < lease)
            };
            if config.is_master(node, partition)
                || !config.is_in_sync(node, partition)
                || !leased
                || self.desk.evicting.contains(&node)
                || !self.desk.handing_back.insert((partition, epoch))
            {
                continue;
            }
            self.counters.handbacks_proposed += 1;
            group.submit(Command::Handback {
                partition,
                node,
                epoch,
            });
        }
        group.flush(ctx)
    }

    /// After the group ran: apply the commands it committed, then grant the leases of the
    /// rounds a quorum confirmed (under the configuration just applied).
    fn settle<P: Protocol>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        batches: Vec<Batch<Command>>,
    ) -> Option<Reconfiguration>
    where
        P::Msg: From<MembershipMsg>,
    {
        let change = self.apply(batches);
        self.grant_confirmed(ctx);
        change
    }

    /// Grant the leases of the heartbeat rounds a quorum confirmed this node leads: each asker
    /// from its own reading at the ask, this node from the round's start.
    fn grant_confirmed<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>)
    where
        P::Msg: From<MembershipMsg>,
    {
        let Some(group) = self.group.as_mut() else {
            return;
        };
        let now = ctx.now();
        let version = self.config.version;
        for context in group.take_confirmed() {
            let Ok(bytes) = <[u8; 8]>::try_from(context.as_slice()) else {
                continue;
            };
            let Some((asks, started)) = self.desk.rounds.remove(&u64::from_le_bytes(bytes)) else {
                continue;
            };
            let until = started.saturating_add(self.timing.lease);
            self.lease.offer(until, version, version);
            for (node, sent) in asks {
                if self.desk.evicting.contains(&node) {
                    continue;
                }
                self.desk.granted.insert(node, now);
                self.counters.lease_grants += 1;
                ctx.send(node, MembershipMsg::LeaseGrant { sent, version }.into());
            }
        }
    }

    /// Apply the commands of `batches`, in order.
    fn apply(&mut self, batches: Vec<Batch<Command>>) -> Option<Reconfiguration> {
        if batches.is_empty() {
            return None;
        }
        let before = self.config.clone();
        let mut commands = Vec::new();
        let mut changed = BTreeSet::new();
        let mut blocks = Vec::new();
        for command in batches.into_iter().flat_map(|b| b.items) {
            let moved = self.config.apply(&command, &self.placement, self.promotion);
            blocks.extend(self.config.granted.take());
            for &p in &moved {
                // Who masters what is what an operator looks for after a failure.
                let c = self.config.partition(p);
                tracing::info!(
                    target: "augur::configuration",
                    "configuration {}: partition {} at epoch {}, in sync {:?} (master first), after {:?}",
                    self.config.version,
                    p.0,
                    c.epoch,
                    c.in_sync,
                    command
                );
            }
            changed.extend(moved);
            if let Command::Evict { node, .. } = command {
                self.desk.evicting.remove(&node);
            }
            commands.push(command);
        }
        self.lease.applied(self.config.version);
        if self.config.oracle != before.oracle {
            tracing::info!(
                target: "augur::configuration",
                "configuration {}: the oracle moves from node {} to node {}",
                self.config.version,
                before.oracle.0,
                self.config.oracle.0
            );
        }
        Some(Reconfiguration {
            before,
            commands,
            changed: changed.into_iter().collect(),
            blocks,
        })
    }

    /// Records that rebuild the group's durable state on their own.
    pub fn checkpoint<R: From<SequencerRecord>>(&self, emit: &mut dyn FnMut(R)) {
        if let Some(group) = &self.group {
            group.checkpoint(emit);
        }
    }

    /// Running totals, for the protocol's counters.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        if self.group.is_none() {
            return Vec::new();
        }
        vec![
            ("config_version", self.config.version),
            ("evictions_proposed", self.counters.evictions_proposed),
            ("rejoins_proposed", self.counters.rejoins_proposed),
            ("handbacks_proposed", self.counters.handbacks_proposed),
            ("reserves_proposed", self.counters.reserves_proposed),
            ("lease_grants", self.counters.lease_grants),
        ]
    }

    /// Commands submitted here and not yet ordered: zero once the cluster is quiet.
    pub fn leftovers(&self) -> Vec<(&'static str, u64)> {
        match &self.group {
            Some(group) => {
                vec![("config_commands_unordered", group.unordered() as u64)]
            }
            None => Vec::new(),
        }
    }
}
