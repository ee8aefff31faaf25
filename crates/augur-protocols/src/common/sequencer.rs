//! A replicated sequencer: every node's submissions, cut into one batch per epoch, agreed in a
//! single total order through Raft (raft-rs's sans-IO [`RawNode`]), and delivered to every node
//! in that order. It is what the order-then-execute protocols (`calvin`, `s-smr`, `sparkle`)
//! share: Calvin's sequencing layer (Thomson et al., SIGMOD '12, §3.1), which the Sparkle paper
//! (PVLDB 12, §3, properties P1–P3) assumes beneath its executors.
//!
//! # What it guarantees
//!
//! * **One order everywhere (P1–P3).** Every node delivers the same sequence of batches, each a
//!   totally ordered list of items: the committed prefix of one Raft log, which every node of
//!   the cluster holds (the first [`SEQUENCER_VOTERS`] nodes vote, the others follow as Raft
//!   learners). A multi-partition transaction is therefore in the same batch, at the same
//!   position, at every partition it touches, and any two transactions are ordered the same way
//!   everywhere.
//! * **Nothing delivered is lost.** A node makes Raft's entries and hard state durable in its
//!   write-ahead log before any message that depends on them leaves it (the runtime's output
//!   barrier, [`augur_contract::Effects`]). After a restart it rebuilds its Raft log from those
//!   records and delivers the committed batches again from the first, so an executor whose
//!   state is a deterministic function of the batches rebuilds it by replay.
//! * **Each batch is delivered once.** A batch carries its origin node and a sequence number of
//!   that origin; the origin proposes it again until it sees it committed (a proposal forwarded
//!   to a leader that then lost its leadership is dropped silently), and every node skips, by
//!   the same rule, a batch of an origin it has already delivered. After a restart the origin
//!   numbers its batches from a durable lease and declares every number below it abandoned, so
//!   a batch proposed before the crash and committed after the restart's first batch is skipped
//!   everywhere (its submitter lost it in the crash and answers nobody about it).
//! * **Leader loss.** A new leader is elected (pre-vote, check-quorum) and ordering resumes; the
//!   batches the old leader had not committed are proposed again by their origins. Items
//!   submitted at a node that crashed before its batch was committed are lost with it, like any
//!   transaction whose coordinator crashes: their clients time out.
//!
//! # Determinism
//!
//! raft-rs draws each election timeout from the thread's RNG, in `[min_election_tick,
//! max_election_tick)`. The sequencer gives every voter a range one tick wide, so the draw has
//! one possible value, and staggers the voters' values by their rank: the simulator stays
//! deterministic, and elections rarely split (the voter with the shortest timeout that can reach
//! a majority wins). The timeouts are scaled to the placement's round trips between the voters
//! (`election_scale`): a candidate must hear from a quorum before its timeout runs out. With
//! the LAN's timeouts (100–260 ms) against `ec2-9dc`'s round trips (up to 255 ms between the
//! first five nodes), a run of `clocksi-rep` with fail-over on, whose leases come from such a
//! group, committed nothing; scaled, it commits.
//!
//! # Wire safety
//!
//! A Raft message arrives as prost-encoded bytes. [`RaftMessage::check`] decodes it and refuses
//! one that does not come from the node that sent it, is not addressed to this node, is of a
//! kind only a node sends itself, or carries a snapshot whose data is not a delivery state.
//! Before stepping a message, the sequencer also refuses what raft-rs would treat as a broken
//! invariant (a heartbeat committing past this node's log, an append rewriting committed
//! entries, a snapshot naming another group). Should
//! a message still make raft-rs panic, the panic is caught and the Raft instance is rebuilt
//! from the node's durable Raft state, exactly as after a crash of the node.
//!
//! # Compaction and snapshots
//!
//! The executor above the sequencer says how far the log may be cut
//! ([`Sequencer::compact_through`]): `common::ordered` and `common::replicated` cut below the
//! position every node they still wait for announced done and logged (`common::horizons`). A
//! cut keeps the index and term of its last entry (raft-rs's snapshot metadata) and the
//! once-only delivery state as of that entry, so a restart replays only the entries above the
//! cut and skips the same batches every other node skipped.
//!
//! A node the executors stopped waiting for (silent longer than `left_behind_ms`: it is down,
//! paused or cut off) no longer holds the log back, so when it returns its log may end below
//! the leader's cut. raft-rs then asks for a snapshot, and the leader sends the cut itself: its
//! index and term, the group, and the delivery state as data (raft-rs's own snapshot would be
//! of everything committed, with no data). The follower installs it ([`SequencerRecord::Compacted`],
//! logged before anything that depends on it leaves) and delivers from the entry after it; the
//! batches it skipped are never delivered there, and the executor, seeing the cut above what
//! it has done ([`Sequencer::compacted`]), copies its partitions' state from a replica instead.
//!
//! A leader also asks for a snapshot when its view of a follower is stale (acknowledgements
//! lost, it probes from the last one it saw) though the follower holds the log up to the cut.
//! raft-rs's follower ignores a snapshot below what it committed and answers with its commit
//! index, so replication goes on from there. Symmetrically, a follower answers an append that
//! starts below its commit index with that index, as raft-rs does, even when it has cut the
//! entries the append carries. (Before both, such a follower was left without entries for good
//! once the leader had cut past its stale view: the nemesis caught it after a partition.)
//!
//! # Left out
//!
//! Membership is fixed by the placement.

use crate::protocol_info::SettingInfo;
use augur_contract::inbound::{BadMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Protocol};
use augur_types::{NodeId, Placement, Timestamp};
use raft::eraftpb::{ConfState, Entry, EntryType, HardState, Message, MessageType};
use raft::storage::MemStorage;
use raft::{Config, RawNode, SnapshotStatus, StateRole, Storage};
use raft_prost::Message as _;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::time::Duration;

/// The setting naming how many nodes vote in the sequencer's Raft group: the nodes with the
/// lowest ids (default: all nodes, up to 5). The others receive the log as learners.
pub const SEQUENCER_VOTERS: &str = "sequencer_voters";
/// The setting for the epoch, in milliseconds: how often a node cuts its submissions into a
/// batch (Calvin's code: 10 ms).
pub const EPOCH_MS: &str = "epoch_ms";
/// The epoch when [`EPOCH_MS`] is not given.
pub const DEFAULT_EPOCH: Duration = Duration::from_millis(10);

/// The setting for an emulated ordering delay, in milliseconds: each node holds every committed
/// batch this long before delivering it (the Sparkle paper emulates replication of the order
/// with a 200 ms delay). 0, the default, delivers at once.
pub const ORDERING_DELAY_MS: &str = "ordering_delay_ms";

/// The ordering delay setting.
pub const ORDERING_DELAY_SETTING: SettingInfo = SettingInfo {
    name: ORDERING_DELAY_MS,
    values: &["0", "50", "100", "200", "400"],
    default: "0",
    doc: "milliseconds each node holds a committed batch before delivering it, emulating the papers' replication delay (Sparkle's 200 ms); 0 delivers at once",
};
/// The epoch setting.
pub const EPOCH_SETTING: SettingInfo = SettingInfo {
    name: EPOCH_MS,
    values: &["1", "2", "5", "10", "20", "50", "100", "200"],
    default: "10",
    doc: "milliseconds between two batches of a node's submissions (Calvin's epoch)",
};
/// The voters setting.
pub const VOTERS_SETTING: SettingInfo = SettingInfo {
    name: SEQUENCER_VOTERS,
    values: &["1", "3", "5", "7"],
    default: "5",
    doc: "how many nodes (the lowest ids) vote in the sequencer's Raft group; the others follow as learners (capped at the node count)",
};
/// Raft's logical clock: one `tick` per this much time.
pub const RAFT_TICK: Duration = Duration::from_millis(10);
/// A leader's heartbeat interval, in ticks.
const HEARTBEAT_TICKS: usize = 2;
/// The shortest election timeout, in ticks (the first voter's); each further voter waits
/// [`ELECTION_STAGGER`] ticks more.
const ELECTION_TICKS: usize = 10;
const ELECTION_STAGGER: usize = 4;
/// A batch not seen committed this many ticks after it was proposed is proposed again.
const REPROPOSE_TICKS: u64 = 30;
/// Ticks without a delivery, while batches of this node wait, before the node's log says so.
const STALL_WARN_TICKS: u64 = 300;
/// How many batch numbers one durable lease record covers.
const SEQ_LEASE: u64 = 1 << 10;
/// The most bytes of entries one append carries (raft-rs's flow control: it stops adding
/// entries once they pass this size, so an append holds at most this plus one entry).
const MAX_APPEND_BYTES: u64 = 1 << 20;
/// The most entries an honest append can carry, the bound a receiver checks: every entry
/// encodes to at least 4 bytes (its term and index, both at least 1). A leader that resends a
/// follower's whole log after a rejection sends thousands of small batches in one append, so a
/// bound tighter than the byte limit would refuse honest messages (it did, at 4,096).
const MAX_APPEND_ENTRIES: usize = (MAX_APPEND_BYTES / 4) as usize + 1;
/// The most appends in flight to one follower (pipelining).
const MAX_INFLIGHT: usize = 256;

/// A Raft message between two nodes, prost-encoded (raft-rs's `eraftpb::Message`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftMessage(pub Vec<u8>);

/// What the sequencer writes to the node's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SequencerRecord {
    /// Raft entries appended to the log (each prost-encoded); an entry at an index already
    /// held replaces it and every entry after it, as in Raft.
    Entries(Vec<Vec<u8>>),
    /// Raft's hard state (term, vote, commit), prost-encoded.
    HardState(Vec<u8>),
    /// This node may have numbered its batches up to (not including) `below`.
    Reserved { below: u64 },
    /// The log was cut through `index` (whose entry was of `term`); `delivered` is, per origin,
    /// which batch numbers were delivered by then.
    Compacted {
        index: u64,
        term: u64,
        delivered: BTreeMap<NodeId, Delivered>,
    },
}

/// The sequencer's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequencerTimer {
    /// Raft's logical clock.
    Tick,
    /// Cut the submissions of the epoch into a batch.
    Epoch,
    /// Committed batches held for the ordering delay may be due ([`ORDERING_DELAY_MS`]).
    Release,
}

/// One batch, as delivered: its origin node and its items, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch<T> {
    /// The Raft log index it was committed at (increasing along the delivery order).
    pub index: u64,
    pub origin: NodeId,
    pub items: Vec<T>,
}

/// A batch as a Raft entry's data.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Proposal<T> {
    origin: NodeId,
    seq: u64,
    /// Every batch number of `origin` below this is abandoned (see the module docs).
    floor: u64,
    items: Vec<T>,
}

/// The leading fields of a [`Proposal`], decoded alone: whether a batch is delivered is
/// decided from them, so a cut of the log can replay that decision without its items.
#[derive(Deserialize)]
struct ProposalHeader {
    origin: NodeId,
    seq: u64,
    floor: u64,
}

impl ProposalHeader {
    /// The header of a normal entry's data; `None` for an empty entry (a new leader's) or one
    /// that does not decode (every node skips it alike).
    fn of(entry: &Entry) -> Option<ProposalHeader> {
        if EntryType::from_i32(entry.entry_type) != Some(EntryType::EntryNormal)
            || entry.data.is_empty()
        {
            return None;
        }
        postcard::take_from_bytes::<ProposalHeader>(&entry.data)
            .ok()
            .map(|(header, _)| header)
    }
}

/// Per origin, which batch numbers were delivered (or abandoned): all below `low`, and those in
/// `above`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivered {
    low: u64,
    above: BTreeSet<u64>,
}

impl Delivered {
    /// Whether batch `seq` was delivered (or abandoned).
    fn has(&self, seq: u64) -> bool {
        seq < self.low || self.above.contains(&seq)
    }

    /// Whether batch `seq` (whose origin abandoned every number below `floor`) is new, noting
    /// it delivered if so.
    fn first_time(&mut self, seq: u64, floor: u64) -> bool {
        if floor > self.low {
            self.low = floor;
            self.above = self.above.split_off(&floor);
        }
        if seq < self.low || !self.above.insert(seq) {
            return false;
        }
        while self.above.remove(&self.low) {
            self.low += 1;
        }
        true
    }
}

/// Counters of what the sequencer did on this node.
#[derive(Clone, Copy, Debug, Default)]
pub struct SequencerCounters {
    pub batches_proposed: u64,
    pub batches_reproposed: u64,
    pub batches_delivered: u64,
    pub batches_skipped: u64,
    pub raft_messages_refused: u64,
    pub raft_restarts: u64,
    /// Snapshots of the cut sent to followers whose log ends below it.
    pub snapshots_sent: u64,
    /// Snapshots installed here: the log jumped past entries this node never delivered.
    pub snapshots_installed: u64,
    /// Entries cut from the log ([`Sequencer::compact_through`]).
    pub entries_compacted: u64,
}

impl SequencerCounters {
    /// The counters as a node reports them (`augur bench`, `node_stats`).
    pub fn named(&self) -> [(&'static str, u64); 9] {
        [
            ("batches_proposed", self.batches_proposed),
            ("batches_reproposed", self.batches_reproposed),
            ("batches_delivered", self.batches_delivered),
            ("batches_skipped", self.batches_skipped),
            ("raft_messages_refused", self.raft_messages_refused),
            ("raft_restarts", self.raft_restarts),
            ("raft_snapshots_sent", self.snapshots_sent),
            ("raft_snapshots_installed", self.snapshots_installed),
            ("raft_entries_compacted", self.entries_compacted),
        ]
    }
}

/// Where the Raft group's members are, and this node's place in it.
#[derive(Clone, Debug)]
struct Group {
    me: NodeId,
    voters: Vec<NodeId>,
    learners: Vec<NodeId>,
    /// How many times [`ELECTION_TICKS`] and [`ELECTION_STAGGER`] the election timeouts are
    /// ([`election_scale`]).
    scale: usize,
}

impl Group {
    fn of(env: &NodeEnv) -> Result<Group, String> {
        let nodes: Vec<NodeId> = env.placement.nodes().collect();
        let voters = match env.options.settings.get(SEQUENCER_VOTERS) {
            None => nodes.len().min(5),
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n >= 1 => n.min(nodes.len()),
                _ => {
                    return Err(format!(
                        "{SEQUENCER_VOTERS}={v}: must be a number of nodes, at least 1"
                    ));
                }
            },
        };
        let voters = nodes[..voters].to_vec();
        Ok(Group {
            me: env.id,
            scale: election_scale(&env.placement, &voters),
            learners: nodes[voters.len()..].to_vec(),
            voters,
        })
    }

    /// The election timeout, in ticks, of the voter of rank `rank`.
    fn election_ticks(&self, rank: usize) -> usize {
        (ELECTION_TICKS + ELECTION_STAGGER * rank) * self.scale
    }

    fn contains(&self, node: NodeId) -> bool {
        self.voters.contains(&node) || self.learners.contains(&node)
    }

    fn conf_state(&self) -> ConfState {
        ConfState::from((
            self.voters.iter().map(|n| raft_id(*n)),
            self.learners.iter().map(|n| raft_id(*n)),
        ))
    }

    /// raft-rs's configuration for this node, with `applied` entries already delivered.
    fn config(&self, applied: u64) -> Config {
        let rank = self.voters.iter().position(|n| *n == self.me).unwrap_or(0);
        let election = self.election_ticks(rank);
        Config {
            id: raft_id(self.me),
            election_tick: self.election_ticks(0),
            heartbeat_tick: HEARTBEAT_TICKS,
            min_election_tick: election,
            max_election_tick: election + 1,
            applied,
            max_size_per_msg: MAX_APPEND_BYTES,
            max_inflight_msgs: MAX_INFLIGHT,
            check_quorum: true,
            pre_vote: true,
            ..Config::default()
        }
    }
}

/// How many times the base election timeouts the voters need: a candidate must hear from a
/// quorum before its timeout runs out, so the shortest timeout is kept above twice the round
/// trip from any voter to the nearest voters that make a quorum with it. On a LAN that is the
/// base (1); across data centres it grows (2 on `3dc`, 4 on `ec2-9dc`'s first five nodes),
/// where with the base timeouts a fail-over run committed nothing.
fn election_scale(placement: &Placement, voters: &[NodeId]) -> usize {
    // The other voters a candidate needs to reach a majority.
    let others_needed = voters.len() / 2;
    let slowest_quorum = voters
        .iter()
        .map(|v| {
            let mut rtts: Vec<Duration> = voters
                .iter()
                .filter(|o| *o != v)
                .map(|o| placement.one_way(*v, *o) * 2)
                .collect();
            rtts.sort();
            others_needed
                .checked_sub(1)
                .and_then(|i| rtts.get(i).copied())
                .unwrap_or_default()
        })
        .max()
        .unwrap_or_default();
    let base = RAFT_TICK * ELECTION_TICKS as u32;
    (slowest_quorum * 2)
        .as_micros()
        .div_ceil(base.as_micros())
        .max(1) as usize
}

/// Raft ids start at 1 (0 means "none").
fn raft_id(node: NodeId) -> u64 {
    u64::from(node.0) + 1
}

fn node_of(raft_id: u64) -> Option<NodeId> {
    raft_id
        .checked_sub(1)
        .and_then(|n| u32::try_from(n).ok())
        .map(NodeId)
}

fn logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

/// Raft message kinds a node sends to another (the others are local to a node).
fn sent_between_nodes(kind: MessageType) -> bool {
    use MessageType::*;
    matches!(
        kind,
        MsgPropose
            | MsgAppend
            | MsgSnapshot
            | MsgAppendResponse
            | MsgRequestVote
            | MsgRequestVoteResponse
            | MsgHeartbeat
            | MsgHeartbeatResponse
            | MsgRequestPreVote
            | MsgRequestPreVoteResponse
            | MsgTimeoutNow
            | MsgTransferLeader
            | MsgReadIndex
            | MsgReadIndexResp
    )
}

/// Vote requests and their answers, which always carry a term.
fn is_vote(kind: MessageType) -> bool {
    use MessageType::*;
    matches!(
        kind,
        MsgRequestVote | MsgRequestVoteResponse | MsgRequestPreVote | MsgRequestPreVoteResponse
    )
}

impl RaftMessage {
    fn decode(&self) -> Result<Message, String> {
        Message::decode(self.0.as_slice()).map_err(|e| format!("undecodable Raft message: {e}"))
    }

    /// The message's shape: decodable, from the sender to this node, of a kind nodes send each
    /// other, a snapshot only as the sequencer sends one, a bounded number of entries.
    pub fn check(&self, inbound: &Inbound<'_>) -> Result<(), BadMessage> {
        let m = self.decode().map_err(|e| inbound.bad(e))?;
        if m.from != raft_id(inbound.from) || m.to != raft_id(inbound.me) {
            return Err(inbound.bad(format!(
                "Raft message from {} to {} sent by {} to {}",
                m.from, m.to, inbound.from, inbound.me
            )));
        }
        let Some(kind) = MessageType::from_i32(m.msg_type) else {
            return Err(inbound.bad(format!("Raft message of unknown kind {}", m.msg_type)));
        };
        if !sent_between_nodes(kind) {
            return Err(inbound.bad(format!("Raft message of local kind {kind:?}")));
        }
        if is_vote(kind) && m.term == 0 {
            return Err(inbound.bad(format!("{kind:?} with no term")));
        }
        // The sequencer never changes the group's membership: only normal entries travel.
        if let Some(e) = m
            .entries
            .iter()
            .find(|e| EntryType::from_i32(e.entry_type) != Some(EntryType::EntryNormal))
        {
            return Err(inbound.bad(format!("Raft entry of kind {}", e.entry_type)));
        }
        match (&m.snapshot, kind) {
            (Some(snapshot), MessageType::MsgSnapshot) => {
                if snapshot.get_metadata().index == 0 {
                    return Err(inbound.bad("Raft snapshot of index 0".into()));
                }
                if postcard::from_bytes::<BTreeMap<NodeId, Delivered>>(&snapshot.data).is_err() {
                    return Err(inbound.bad("Raft snapshot with undecodable data".into()));
                }
            }
            (None, MessageType::MsgSnapshot) => {
                return Err(inbound.bad("MsgSnapshot without a snapshot".into()));
            }
            (Some(_), _) => return Err(inbound.bad(format!("{kind:?} carrying a snapshot"))),
            (None, _) => {}
        }
        if m.entries.len() > MAX_APPEND_ENTRIES {
            return Err(inbound.bad(format!("{} Raft entries in one message", m.entries.len())));
        }
        Ok(())
    }
}

/// The sequencer of one node (see the module docs). `T` is what is ordered.
pub struct Sequencer<T> {
    group: Group,
    epoch: Duration,
    raft: RawNode<MemStorage>,
    storage: MemStorage,
    /// Raft ticks since start (the sequencer's clock for re-proposals).
    ticks: u64,
    /// The tick of the last delivery, or of the last stall warning, whichever is later.
    progress_tick: u64,
    /// Submitted here since the last epoch.
    pending: Vec<T>,
    /// This node's batches proposed and not yet seen committed: when each was last proposed.
    in_flight: BTreeMap<u64, (Proposal<T>, u64)>,
    /// The next batch number, the lease reaching `reserved`, and the numbers abandoned below
    /// `floor` (after a restart).
    next_seq: u64,
    reserved: u64,
    floor: u64,
    /// The last log index delivered.
    applied: u64,
    delivered: BTreeMap<NodeId, Delivered>,
    /// The last index cut from the log, and what was delivered through it.
    compacted: u64,
    delivered_when_compacted: BTreeMap<NodeId, Delivered>,
    counters: SequencerCounters,
    /// The emulated ordering delay ([`ORDERING_DELAY_MS`]), and the committed batches held for
    /// it, with when each is due.
    delay: Duration,
    held: VecDeque<(Timestamp, Batch<T>)>,
    /// Contexts of leadership confirmations ([`Sequencer::confirm_leadership`]) a quorum has
    /// answered, in order, until taken.
    confirmed: Vec<Vec<u8>>,
}

impl<T: Clone + Serialize + DeserializeOwned> Sequencer<T> {
    /// A node's sequencer with an empty log, or why the settings are wrong.
    pub fn new(env: &NodeEnv) -> Result<Self, String> {
        Self::restore(env, std::iter::empty())
    }

    /// A node's sequencer rebuilt from its durable records, in the order they were written.
    pub fn restore(
        env: &NodeEnv,
        records: impl IntoIterator<Item = SequencerRecord>,
    ) -> Result<Self, String> {
        let group = Group::of(env)?;
        let epoch = match env.options.settings.get(EPOCH_MS) {
            None => DEFAULT_EPOCH,
            Some(v) => match v.parse::<u64>() {
                Ok(ms) if (1..=10_000).contains(&ms) => Duration::from_millis(ms),
                _ => {
                    return Err(format!(
                        "{EPOCH_MS}={v}: must be milliseconds within 1..=10000"
                    ));
                }
            },
        };
        // The registry accepts only the values the setting lists.
        let delay = env
            .options
            .settings
            .get(ORDERING_DELAY_MS)
            .and_then(|v| v.parse().ok())
            .map_or(Duration::ZERO, Duration::from_millis);
        let storage = MemStorage::new_with_conf_state(group.conf_state());
        let mut reserved = 0;
        let mut compacted = 0;
        let mut delivered_when_compacted = BTreeMap::new();
        for record in records {
            match record {
                SequencerRecord::Entries(entries) => {
                    let entries: Vec<Entry> = entries
                        .iter()
                        .map(|e| Entry::decode(e.as_slice()))
                        .collect::<Result<_, _>>()
                        .map_err(|e| format!("sequencer log: undecodable entry: {e}"))?;
                    // What a cut covers was written before it; only what follows it counts.
                    let above: Vec<Entry> = entries
                        .into_iter()
                        .filter(|e| e.index > compacted)
                        .collect();
                    append(&storage, &above)?;
                }
                SequencerRecord::Compacted {
                    index,
                    term,
                    delivered,
                } => {
                    if index > compacted {
                        cut(&storage, group.conf_state(), index, term)?;
                        compacted = index;
                        delivered_when_compacted = delivered;
                    }
                }
                SequencerRecord::HardState(hs) => {
                    let hs = HardState::decode(hs.as_slice())
                        .map_err(|e| format!("sequencer log: undecodable hard state: {e}"))?;
                    storage.wl().set_hardstate(hs);
                }
                SequencerRecord::Reserved { below } => reserved = reserved.max(below),
            }
        }
        let raft = RawNode::new(&group.config(0), storage.clone(), &logger())
            .map_err(|e| format!("sequencer: cannot start Raft: {e}"))?;
        Ok(Sequencer {
            group,
            epoch,
            raft,
            storage,
            ticks: 0,
            progress_tick: 0,
            pending: Vec::new(),
            in_flight: BTreeMap::new(),
            next_seq: reserved,
            reserved,
            floor: reserved,
            applied: compacted,
            delivered: delivered_when_compacted.clone(),
            compacted,
            delivered_when_compacted,
            counters: SequencerCounters::default(),
            delay,
            held: VecDeque::new(),
            confirmed: Vec::new(),
        })
    }

    /// Start the timers (at start and after every restart).
    pub fn on_start<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>)
    where
        P::Timer: From<SequencerTimer>,
    {
        ctx.set_timer(RAFT_TICK, SequencerTimer::Tick.into());
        ctx.set_timer(self.epoch, SequencerTimer::Epoch.into());
    }

    /// Hold every committed batch `delay` before delivering it: the ordering delay
    /// ([`ORDERING_DELAY_MS`]) under the name a protocol gives it (the OAB protocols'
    /// `final_delay_ms`).
    pub fn set_delay(&mut self, delay: Duration) {
        self.delay = delay;
    }

    /// Order `item`: it goes out in this node's next batch.
    pub fn submit(&mut self, item: T) {
        self.pending.push(item);
    }

    /// The node this one believes leads the group, if any.
    pub fn leader(&self) -> Option<NodeId> {
        match self.raft.raft.leader_id {
            0 => None,
            id => node_of(id),
        }
    }

    /// Whether this node leads the group.
    pub fn is_leader(&self) -> bool {
        self.raft.raft.state == StateRole::Leader
    }

    /// The longest election timeout of any voter of the group: how long a leader that lost
    /// touch with a majority may go on believing it leads, at most, before check-quorum makes
    /// it step down (raft-rs checks once per election timeout).
    pub fn longest_election_timeout(&self) -> std::time::Duration {
        let slowest = self
            .group
            .election_ticks(self.group.voters.len().saturating_sub(1))
            + 1;
        RAFT_TICK * slowest as u32
    }

    /// Ask a quorum whether this node still leads (raft-rs's safe read index): once one
    /// answers, [`Sequencer::take_confirmed`] returns `context`. A leader that was deposed
    /// without knowing it (it was paused, or cut off) learns of the newer term instead and
    /// never gets the confirmation. Only a leader asks; the request goes out with the next
    /// input's messages ([`Sequencer::flush`] sends it at once).
    pub fn confirm_leadership(&mut self, context: Vec<u8>) {
        if self.is_leader() {
            self.guarded(|raft| {
                raft.read_index(context);
                Ok(())
            });
        }
    }

    /// The contexts of the leadership confirmations answered since the last call, in order.
    pub fn take_confirmed(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.confirmed)
    }

    /// Carry out what Raft asks now (send, persist, deliver): after a call that is not an
    /// input, such as [`Sequencer::confirm_leadership`]. Returns the batches it committed.
    pub fn flush<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>) -> Vec<Batch<T>>
    where
        P::Timer: From<SequencerTimer>,
        P::Msg: From<RaftMessage>,
        P::Record: From<SequencerRecord>,
    {
        self.drain(ctx)
    }

    /// The Raft term this node is in.
    pub fn term(&self) -> u64 {
        self.raft.raft.term
    }

    /// Submitted here and not yet seen committed (a counter, and a leftover check).
    pub fn unordered(&self) -> usize {
        self.pending.len()
            + self
                .in_flight
                .values()
                .map(|(p, _)| p.items.len())
                .sum::<usize>()
    }

    pub fn counters(&self) -> SequencerCounters {
        self.counters
    }

    /// Where this node's Raft stands, for an operator: its role, term and leader, how far its
    /// log reaches, is committed, delivered and cut, and, at a leader, each follower's progress.
    pub fn status(&self) -> String {
        let r = &self.raft.raft;
        let log = &r.raft_log;
        let leader = node_of(r.leader_id).map_or("none".to_string(), |n| n.to_string());
        let mut status = format!(
            "{:?} in term {}, leader {leader}; log {}..={}, committed {}, delivered {}; {} batches of this node unordered; {} Raft messages refused",
            r.state,
            r.term,
            log.first_index(),
            log.last_index(),
            log.committed,
            self.applied,
            self.in_flight.len(),
            self.counters.raft_messages_refused,
        );
        if r.state == StateRole::Leader {
            for (id, pr) in r.prs().iter() {
                if *id != r.id {
                    let node = node_of(*id).map_or(id.to_string(), |n| n.to_string());
                    status.push_str(&format!(
                        "; {node}: {:?}, matched {}, next {}{}",
                        pr.state,
                        pr.matched,
                        pr.next_idx,
                        if pr.paused { ", paused" } else { "" }
                    ));
                }
            }
        }
        status
    }

    /// A timer fired; returns the batches it committed, in order.
    pub fn on_timer<P: Protocol>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        timer: SequencerTimer,
    ) -> Vec<Batch<T>>
    where
        P::Timer: From<SequencerTimer>,
        P::Msg: From<RaftMessage>,
        P::Record: From<SequencerRecord>,
    {
        match timer {
            SequencerTimer::Tick => {
                self.ticks += 1;
                self.guarded(|raft| {
                    raft.tick();
                    Ok(())
                });
                self.repropose();
                self.warn_if_stalled();
                ctx.set_timer(RAFT_TICK, SequencerTimer::Tick.into());
            }
            SequencerTimer::Epoch => {
                self.cut(ctx);
                ctx.set_timer(self.epoch, SequencerTimer::Epoch.into());
            }
            SequencerTimer::Release => {}
        }
        self.drain(ctx)
    }

    /// A Raft message from `from` (already checked by [`RaftMessage::check`]); returns the
    /// batches it committed, in order.
    pub fn on_message<P: Protocol>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        from: NodeId,
        msg: RaftMessage,
    ) -> Vec<Batch<T>>
    where
        P::Timer: From<SequencerTimer>,
        P::Msg: From<RaftMessage>,
        P::Record: From<SequencerRecord>,
    {
        let Ok(m) = msg.decode() else {
            self.counters.raft_messages_refused += 1;
            return Vec::new();
        };
        if !self.group.contains(from) || !self.consistent(&m) {
            self.counters.raft_messages_refused += 1;
            return Vec::new();
        }
        self.guarded(|raft| raft.step(m));
        self.drain(ctx)
    }

    /// Whether stepping `m` keeps raft-rs's invariants: a heartbeat commits no further than
    /// this node's log reaches (a leader sends at most what the follower acknowledged), and an
    /// append's entries follow each other and rewrite no committed entry.
    fn consistent(&self, m: &Message) -> bool {
        let log = &self.raft.raft.raft_log;
        match MessageType::from_i32(m.msg_type) {
            Some(MessageType::MsgHeartbeat) => m.commit <= log.last_index(),
            // An append starting below this node's commit index is answered with that index and
            // nothing else looked at (raft-rs's rule; a leader whose view of this follower is
            // stale sends one, perhaps of entries this node has cut since): refusing it would
            // leave that leader probing with it for ever.
            Some(MessageType::MsgAppend) if m.index < log.committed => true,
            Some(MessageType::MsgAppend) => {
                let mut expect = m.index.saturating_add(1);
                for e in &m.entries {
                    if e.index != expect {
                        return false;
                    }
                    if e.index <= log.committed && log.term(e.index).ok() != Some(e.term) {
                        return false;
                    }
                    expect = expect.saturating_add(1);
                }
                true
            }
            // A snapshot may not change the group: raft-rs would take its members as given.
            Some(MessageType::MsgSnapshot) => m.snapshot.as_ref().is_some_and(|snapshot| {
                same_members(
                    snapshot.get_metadata().get_conf_state(),
                    &self.group.conf_state(),
                )
            }),
            _ => true,
        }
    }

    /// Run `f` on the Raft instance. raft-rs panics on what it takes for a broken invariant; a
    /// forged message that gets past [`Self::consistent`] could make it, so a panic is caught
    /// and the instance rebuilt from this node's durable Raft state, as after a crash.
    fn guarded(&mut self, f: impl FnOnce(&mut RawNode<MemStorage>) -> raft::Result<()>) {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| f(&mut self.raft)));
        if outcome.is_err() {
            self.counters.raft_restarts += 1;
            let config = self.group.config(self.applied);
            // The storage holds only what was made durable, so the rebuilt instance is sound.
            if let Ok(raft) = RawNode::new(&config, self.storage.clone(), &logger()) {
                self.raft = raft;
            }
        }
    }

    /// Cut this epoch's submissions into a batch and propose it.
    fn cut<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>)
    where
        P::Record: From<SequencerRecord>,
    {
        if self.pending.is_empty() {
            return;
        }
        if self.next_seq >= self.reserved {
            self.reserved = self.next_seq + SEQ_LEASE;
            ctx.persist(
                SequencerRecord::Reserved {
                    below: self.reserved,
                }
                .into(),
            );
        }
        let proposal = Proposal {
            origin: self.group.me,
            seq: self.next_seq,
            floor: self.floor,
            items: std::mem::take(&mut self.pending),
        };
        self.next_seq += 1;
        self.counters.batches_proposed += 1;
        self.propose(&proposal);
        self.in_flight.insert(proposal.seq, (proposal, self.ticks));
    }

    /// Say in the node's log, every [`STALL_WARN_TICKS`], that batches of this node wait and
    /// nothing was delivered meanwhile, with where Raft stands: a node that cannot get the
    /// order explains itself.
    fn warn_if_stalled(&mut self) {
        if self.in_flight.is_empty() {
            self.progress_tick = self.ticks;
        } else if self.ticks - self.progress_tick >= STALL_WARN_TICKS {
            self.progress_tick = self.ticks;
            tracing::warn!(
                "sequencer: nothing delivered for {:?} while batches of this node wait: {}",
                RAFT_TICK * STALL_WARN_TICKS as u32,
                self.status()
            );
        }
    }

    /// Propose again every batch of this node not seen committed for [`REPROPOSE_TICKS`].
    fn repropose(&mut self) {
        let now = self.ticks;
        let due: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, (_, at))| now.saturating_sub(*at) >= REPROPOSE_TICKS)
            .map(|(seq, _)| *seq)
            .collect();
        for seq in due {
            if let Some((proposal, _)) = self.in_flight.remove(&seq) {
                self.counters.batches_reproposed += 1;
                self.propose(&proposal);
                self.in_flight.insert(seq, (proposal, now));
            }
        }
    }

    /// Hand `proposal` to Raft. With no leader known it is dropped, and proposed again later.
    fn propose(&mut self, proposal: &Proposal<T>) {
        let Ok(data) = postcard::to_stdvec(proposal) else {
            return;
        };
        self.guarded(|raft| raft.propose(Vec::new(), data));
    }

    /// Carry out what Raft asks after an input: persist entries and hard state, send messages
    /// (which leave only once the log is durable), and deliver committed batches.
    fn drain<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>) -> Vec<Batch<T>>
    where
        P::Timer: From<SequencerTimer>,
        P::Msg: From<RaftMessage>,
        P::Record: From<SequencerRecord>,
    {
        let mut out = Vec::new();
        while self.raft.has_ready() {
            let mut ready = self.raft.ready();
            if ready.snapshot().get_metadata().index > 0 {
                self.install(ctx, ready.snapshot());
            }
            self.confirmed
                .extend(ready.take_read_states().into_iter().map(|r| r.request_ctx));
            self.send(ctx, ready.take_messages());
            let committed = ready.take_committed_entries();
            self.deliver(committed, &mut out);
            if !ready.entries().is_empty() {
                let encoded = ready.entries().iter().map(|e| e.encode_to_vec()).collect();
                ctx.persist(SequencerRecord::Entries(encoded).into());
                let _ = self.storage.wl().append(ready.entries());
            }
            if let Some(hs) = ready.hs() {
                ctx.persist(SequencerRecord::HardState(hs.encode_to_vec()).into());
                self.storage.wl().set_hardstate(hs.clone());
            }
            self.send(ctx, ready.take_persisted_messages());
            let mut light = self.raft.advance(ready);
            if let Some(commit) = light.commit_index() {
                let mut hs = self.storage.rl().hard_state().clone();
                hs.commit = commit;
                ctx.persist(SequencerRecord::HardState(hs.encode_to_vec()).into());
                self.storage.wl().set_hardstate(hs);
            }
            self.send(ctx, light.take_messages());
            self.deliver(light.take_committed_entries(), &mut out);
            self.raft.advance_apply();
        }
        self.hold(ctx, out)
    }

    /// The batches due now: with an ordering delay, the committed batches `out` are held until
    /// it has passed, and those held long enough go out; without, `out` itself.
    fn hold<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>, out: Vec<Batch<T>>) -> Vec<Batch<T>>
    where
        P::Timer: From<SequencerTimer>,
    {
        if self.delay.is_zero() {
            return out;
        }
        let now = ctx.now();
        if !out.is_empty() {
            let due = now.saturating_add(self.delay);
            self.held.extend(out.into_iter().map(|batch| (due, batch)));
            ctx.set_timer(self.delay, SequencerTimer::Release.into());
        }
        let mut released = Vec::new();
        while self.held.front().is_some_and(|(due, _)| *due <= now) {
            released.extend(self.held.pop_front().map(|(_, batch)| batch));
        }
        released
    }

    fn send<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>, messages: Vec<Message>)
    where
        P::Msg: From<RaftMessage>,
    {
        let me = self.raft.raft.id;
        for mut m in messages {
            // raft-rs forwards a proposal it cannot take (it is not the leader) to the leader as
            // it came, sender included; one that came from another node (a forged one, or a
            // follower's that reached a deposed leader) would carry that node as its sender, and
            // the leader would refuse it. The entries are what matters: forward them as this
            // node's. Nothing else raft-rs sends names another sender.
            if m.from != me {
                if MessageType::from_i32(m.msg_type) != Some(MessageType::MsgPropose) {
                    self.counters.raft_messages_refused += 1;
                    continue;
                }
                m.from = me;
            }
            // raft-rs asks for a snapshot when its view of a follower is below the cut: the
            // follower was left behind (see *Compaction*), or its acknowledgements were lost
            // and the leader probes from the last one it saw. raft-rs's own snapshot would be
            // of everything committed, with no data; send the cut instead, with the delivery
            // state as of it. A follower holding the log up to the cut ignores it and answers
            // how far it committed; one whose log ends below installs it. Reported finished at
            // once: the follower's answer (or, if the snapshot is lost, its refusal of the next
            // append) moves the leader on.
            if MessageType::from_i32(m.msg_type) == Some(MessageType::MsgSnapshot) {
                let status = if self.compacted == 0 {
                    SnapshotStatus::Failure
                } else {
                    SnapshotStatus::Finish
                };
                self.raft.report_snapshot(m.to, status);
                if self.compacted == 0 {
                    continue;
                }
                self.counters.snapshots_sent += 1;
                m = self.snapshot_at_cut(m);
            }
            if let Some(to) = node_of(m.to) {
                ctx.send(to, RaftMessage(m.encode_to_vec()).into());
            }
        }
    }

    /// The snapshot of the cut in place of raft-rs's snapshot `m`: the last index cut, its
    /// term, the group, and as data which batches were delivered through it.
    fn snapshot_at_cut(&self, m: Message) -> Message {
        let mut snapshot = raft::eraftpb::Snapshot {
            data: postcard::to_stdvec(&self.delivered_when_compacted).unwrap_or_default(),
            ..Default::default()
        };
        let meta = snapshot.mut_metadata();
        meta.index = self.compacted;
        meta.term = self.storage.term(self.compacted).unwrap_or(0);
        meta.set_conf_state(self.group.conf_state());
        Message {
            msg_type: MessageType::MsgSnapshot as i32,
            to: m.to,
            from: m.from,
            term: m.term,
            snapshot: Some(snapshot),
            ..Message::default()
        }
    }

    /// Install `snapshot`, which raft-rs restored (this node's log ended below it): log it as
    /// this node's own cut, drop the log, and deliver from the entry after it on. The batches
    /// it covers are never delivered here; the executor above learns of the jump from
    /// [`Sequencer::compacted`] and catches up by other means.
    fn install<P: Protocol>(&mut self, ctx: &mut Ctx<'_, P>, snapshot: &raft::eraftpb::Snapshot)
    where
        P::Record: From<SequencerRecord>,
    {
        let meta = snapshot.get_metadata();
        let (index, term) = (meta.index, meta.term);
        // Checked on arrival ([`RaftMessage::check`]).
        let delivered: BTreeMap<NodeId, Delivered> =
            postcard::from_bytes(&snapshot.data).unwrap_or_default();
        ctx.persist(
            SequencerRecord::Compacted {
                index,
                term,
                delivered: delivered.clone(),
            }
            .into(),
        );
        if cut(&self.storage, self.group.conf_state(), index, term).is_err() {
            return;
        }
        self.counters.snapshots_installed += 1;
        self.counters.entries_compacted += index.saturating_sub(self.compacted);
        self.compacted = index;
        self.applied = self.applied.max(index);
        // This node's batches the snapshot covers were committed (or abandoned) there.
        if let Some(mine) = delivered.get(&self.group.me) {
            self.in_flight.retain(|seq, _| !mine.has(*seq));
        }
        self.delivered = delivered.clone();
        self.delivered_when_compacted = delivered;
        tracing::info!(
            "sequencer: installed a snapshot of the log through {index} (term {term}): this node was left behind"
        );
    }

    /// The last log index cut (0 if none): every batch at or below it is either delivered here
    /// or, after a snapshot was installed, never will be.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Deliver committed entries: each batch once, in log order (empty entries are a new
    /// leader's, and carry nothing).
    fn deliver(&mut self, entries: Vec<Entry>, out: &mut Vec<Batch<T>>) {
        for entry in entries {
            self.applied = self.applied.max(entry.index);
            self.progress_tick = self.ticks;
            let Some(header) = ProposalHeader::of(&entry) else {
                continue;
            };
            if header.origin == self.group.me {
                self.in_flight.remove(&header.seq);
            }
            let first = self
                .delivered
                .entry(header.origin)
                .or_default()
                .first_time(header.seq, header.floor);
            // Every node wrote what it proposed with the same encoder; an entry that does not
            // decode is skipped by every node alike.
            let proposal = first
                .then(|| postcard::from_bytes::<Proposal<T>>(&entry.data).ok())
                .flatten();
            let Some(proposal) = proposal else {
                self.counters.batches_skipped += 1;
                continue;
            };
            self.counters.batches_delivered += 1;
            out.push(Batch {
                index: entry.index,
                origin: proposal.origin,
                items: proposal.items,
            });
        }
    }

    /// Cut the log through `index` (at most what was delivered): the caller guarantees no node
    /// will need those entries again. The cut itself is logged by the next checkpoint.
    pub fn compact_through(&mut self, index: u64) {
        let index = index.min(self.applied);
        if index <= self.compacted {
            return;
        }
        let context = raft::GetEntriesContext::empty(false);
        let Ok(cut_entries) = self
            .storage
            .entries(self.compacted + 1, index + 1, None, context)
        else {
            return;
        };
        let Ok(term) = self.storage.term(index) else {
            return;
        };
        for header in cut_entries.iter().filter_map(ProposalHeader::of) {
            self.delivered_when_compacted
                .entry(header.origin)
                .or_default()
                .first_time(header.seq, header.floor);
        }
        if cut(&self.storage, self.group.conf_state(), index, term).is_ok() {
            self.counters.entries_compacted += index - self.compacted;
            self.compacted = index;
        }
    }

    /// Records that rebuild the durable state on their own: the cut, every entry above it, the
    /// hard state and the lease.
    pub fn checkpoint<R: From<SequencerRecord>>(&self, emit: &mut dyn FnMut(R)) {
        if self.compacted > 0 {
            let term = self.storage.term(self.compacted).unwrap_or(0);
            emit(
                SequencerRecord::Compacted {
                    index: self.compacted,
                    term,
                    delivered: self.delivered_when_compacted.clone(),
                }
                .into(),
            );
        }
        let first = self.storage.first_index().unwrap_or(1);
        let last = self.storage.last_index().unwrap_or(0);
        if last >= first {
            let context = raft::GetEntriesContext::empty(false);
            if let Ok(entries) = self.storage.entries(first, last + 1, None, context) {
                let encoded = entries.iter().map(|e| e.encode_to_vec()).collect();
                emit(SequencerRecord::Entries(encoded).into());
            }
        }
        let hard_state = self.storage.rl().hard_state().clone();
        emit(SequencerRecord::HardState(hard_state.encode_to_vec()).into());
        emit(
            SequencerRecord::Reserved {
                below: self.reserved,
            }
            .into(),
        );
    }
}

/// Whether two Raft configurations name the same voters and learners.
fn same_members(a: &ConfState, b: &ConfState) -> bool {
    let sorted = |ids: &[u64]| {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids
    };
    sorted(&a.voters) == sorted(&b.voters)
        && sorted(&a.learners) == sorted(&b.learners)
        && a.voters_outgoing.is_empty()
        && a.learners_next.is_empty()
}

/// Append `entries` to `storage`, refusing what raft-rs would panic on (entries that overlap
/// a cut, or leave a gap).
fn append(storage: &MemStorage, entries: &[Entry]) -> Result<(), String> {
    let Some(first) = entries.first() else {
        return Ok(());
    };
    let low = storage
        .first_index()
        .map_err(|e| format!("sequencer log: {e}"))?;
    let high = storage
        .last_index()
        .map_err(|e| format!("sequencer log: {e}"))?;
    if first.index < low || first.index > high + 1 {
        return Err(format!(
            "sequencer log: entries from {} do not follow the log ({low}..={high})",
            first.index
        ));
    }
    storage
        .wl()
        .append(entries)
        .map_err(|e| format!("sequencer log: {e}"))
}

/// Cut `storage` through `index` (an entry of `term`), keeping the entries above it and the
/// hard state. raft-rs's own `compact` forgets the term of the last entry cut, which Raft needs
/// to append after it; a snapshot's metadata keeps it.
fn cut(storage: &MemStorage, conf: ConfState, index: u64, term: u64) -> Result<(), String> {
    let last = storage
        .last_index()
        .map_err(|e| format!("sequencer log: {e}"))?;
    // Entries above the cut stay if the log matches it there (Raft's log matching); a log that
    // does not (a snapshot installed over a stale one) is dropped whole.
    let kept = if last > index && storage.term(index).ok() == Some(term) {
        let context = raft::GetEntriesContext::empty(false);
        storage
            .entries(index + 1, last + 1, None, context)
            .map_err(|e| format!("sequencer log: {e}"))?
    } else {
        Vec::new()
    };
    let mut core = storage.wl();
    let hard_state = core.hard_state().clone();
    let mut snapshot = raft::eraftpb::Snapshot::default();
    let meta = snapshot.mut_metadata();
    meta.index = index;
    meta.term = term;
    meta.set_conf_state(conf);
    core.apply_snapshot(snapshot)
        .map_err(|e| format!("sequencer log: {e}"))?;
    core.append(&kept)
        .map_err(|e| format!("sequencer log: {e}"))?;
    if hard_state.commit >= index {
        core.set_hardstate(hard_state);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn election_timeouts_grow_with_the_voters_round_trips() {
        use augur_types::LatencyProfile;
        let scale = |profile: &str, nodes: usize| {
            let profile = LatencyProfile::named(profile).unwrap();
            let placement = Placement::ring(profile, nodes, 1).unwrap();
            let voters: Vec<NodeId> = placement.nodes().take(5).collect();
            election_scale(&placement, &voters)
        };
        assert_eq!(scale("lan", 5), 1);
        // 3dc (Virginia, Oregon, Ireland): Ireland's nearest other voter is 68 ms away.
        assert_eq!(scale("3dc", 3), 2);
        // ec2-9dc's first five: Ireland's nearest two others are Oregon (120 ms) and
        // Singapore (178 ms).
        assert_eq!(scale("ec2-9dc", 9), 4);
        assert_eq!(scale("lan", 1), 1);
    }

    #[test]
    fn delivered_skips_repeats_and_abandoned_numbers() {
        let mut d = Delivered::default();
        assert!(d.first_time(0, 0));
        assert!(d.first_time(2, 0));
        assert!(!d.first_time(0, 0));
        assert!(!d.first_time(2, 0));
        assert!(d.first_time(1, 0));
        assert_eq!(d.low, 3);
        assert!(d.above.is_empty());
        // A restart abandons every number below 1024.
        assert!(d.first_time(1024, 1024));
        assert!(!d.first_time(5, 0));
        assert_eq!(d.low, 1025);
    }
}
