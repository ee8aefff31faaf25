//! The replicated sequencer (`common::sequencer`) on its own, in the simulator: a test protocol
//! whose nodes each submit a numbered item every few milliseconds and keep what the sequencer
//! delivers. Every node must deliver the same sequence (one a prefix of the other), each item at
//! most once, every item of a node that stayed up exactly once; through a leader crash, lost
//! messages and a partition; and the same seed must give the same run.

use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Protocol, ProtocolOptions};
use augur_protocols::common::sequencer::{
    Batch, RaftMessage, Sequencer, SequencerRecord, SequencerTimer,
};
use augur_runtime::sim::{SimConfig, Simulation};
use augur_types::{ClientRequest, LatencyProfile, NodeId, Placement};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// An item: its submitting node and its number there (numbers restart after a crash, so the
/// incarnation is part of it).
type Item = (u32, u32, u64);

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Msg(RaftMessage);

impl From<RaftMessage> for Msg {
    fn from(m: RaftMessage) -> Self {
        Msg(m)
    }
}

impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        self.0.check(at)
    }
}

#[derive(Debug)]
enum Timer {
    Sequencer(SequencerTimer),
    Submit,
}

impl From<SequencerTimer> for Timer {
    fn from(t: SequencerTimer) -> Self {
        Timer::Sequencer(t)
    }
}

#[derive(Debug, Serialize, Deserialize)]
enum Record {
    Sequencer(SequencerRecord),
    Incarnation(u32),
}

impl From<SequencerRecord> for Record {
    fn from(r: SequencerRecord) -> Self {
        Record::Sequencer(r)
    }
}

/// Submits an item every [`SUBMIT_EVERY`] and keeps the delivered ones in order.
struct Orderer {
    me: u32,
    incarnation: u32,
    next: u64,
    seq: Sequencer<Item>,
    delivered: Vec<Item>,
    indexes: Vec<u64>,
    /// With the `compact_lag` setting, the log is cut this many entries below the last one
    /// delivered (standing in for an executor that knows every node is past them).
    compact_lag: Option<u64>,
    /// With the `compact_below_all` setting, the log is cut below what every node delivered.
    compact_below_all: Option<bool>,
    nodes: u32,
}

const SUBMIT_EVERY: Duration = Duration::from_millis(3);

impl Orderer {
    fn take(&mut self, batches: Vec<Batch<Item>>) {
        for b in batches {
            assert!(self.indexes.last().is_none_or(|i| *i < b.index));
            self.indexes.push(b.index);
            self.delivered.extend(b.items);
        }
        if let (Some(lag), Some(last)) = (self.compact_lag, self.indexes.last()) {
            self.seq.compact_through(last.saturating_sub(lag));
        }
        if let Some(last) = self.indexes.last() {
            let horizon = DELIVERED_THROUGH.with_borrow_mut(|through| {
                through.insert(self.me, *last);
                (0..self.nodes)
                    .map(|n| through.get(&n).copied().unwrap_or(0))
                    .min()
            });
            if let (Some(true), Some(horizon)) = (self.compact_below_all, horizon) {
                self.seq.compact_through(horizon.saturating_sub(1));
            }
        }
    }
}

thread_local! {
    /// The last log index each node of this thread's simulation delivered: the cut below what
    /// every node delivered (`compact_below_all`), as the executors cut below every node's
    /// announced horizon. A simulation runs on its test's thread.
    static DELIVERED_THROUGH: std::cell::RefCell<BTreeMap<u32, u64>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
}

fn compact_lag(env: &NodeEnv) -> Option<u64> {
    env.options
        .settings
        .get("compact_lag")
        .map(|v| v.parse().unwrap())
}

fn compact_below_all(env: &NodeEnv) -> Option<bool> {
    env.options
        .settings
        .get("compact_below_all")
        .map(|v| v == "on")
}

impl Protocol for Orderer {
    type Msg = Msg;
    type Timer = Timer;
    type Record = Record;

    fn new(env: &NodeEnv) -> Self {
        Orderer {
            me: env.id.0,
            incarnation: 0,
            next: 0,
            seq: Sequencer::new(env).unwrap(),
            delivered: Vec::new(),
            indexes: Vec::new(),
            compact_lag: compact_lag(env),
            compact_below_all: compact_below_all(env),
            nodes: env.placement.nodes().count() as u32,
        }
    }

    fn recover(env: &NodeEnv, records: &mut dyn Iterator<Item = Record>) -> Self {
        let mut incarnation = 0;
        let mut seq_records = Vec::new();
        for r in records {
            match r {
                Record::Sequencer(r) => seq_records.push(r),
                Record::Incarnation(i) => incarnation = incarnation.max(i),
            }
        }
        Orderer {
            me: env.id.0,
            incarnation: incarnation + 1,
            next: 0,
            seq: Sequencer::restore(env, seq_records).unwrap(),
            delivered: Vec::new(),
            indexes: Vec::new(),
            compact_lag: compact_lag(env),
            compact_below_all: compact_below_all(env),
            nodes: env.placement.nodes().count() as u32,
        }
    }

    fn checkpoint(&self, emit: &mut dyn FnMut(Record)) {
        self.seq.checkpoint(emit);
        emit(Record::Incarnation(self.incarnation));
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.persist(Record::Incarnation(self.incarnation));
        self.seq.on_start(ctx);
        ctx.set_timer(SUBMIT_EVERY, Timer::Submit);
    }

    fn on_client(&mut self, _ctx: &mut Ctx<'_, Self>, _request: ClientRequest) {}

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        let batches = self.seq.on_message(ctx, from, msg.0);
        self.take(batches);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        match timer {
            Timer::Sequencer(t) => {
                let batches = self.seq.on_timer(ctx, t);
                self.take(batches);
            }
            Timer::Submit => {
                self.seq.submit((self.me, self.incarnation, self.next));
                self.next += 1;
                ctx.set_timer(SUBMIT_EVERY, Timer::Submit);
            }
        }
    }
}

fn sim(seed: u64, nodes: usize, settings: &[(&str, &str)]) -> Simulation<Orderer> {
    sim_with(SimConfig::new(seed), nodes, settings)
}

fn sim_with(config: SimConfig, nodes: usize, settings: &[(&str, &str)]) -> Simulation<Orderer> {
    let profile = LatencyProfile::named("lan").unwrap().truncated(1).unwrap();
    let placement = Arc::new(Placement::ring(profile, nodes, 1).unwrap());
    let mut options = ProtocolOptions::default();
    for (k, v) in settings {
        options.settings.insert(k.to_string(), v.to_string());
    }
    Simulation::new(placement, Arc::new(options), config)
}

fn delivered(s: &Simulation<Orderer>, node: u32) -> &[Item] {
    &s.node(NodeId(node)).delivered
}

/// Every pair of nodes agrees on the order (one sequence a prefix of the other) and no item is
/// delivered twice; returns the longest sequence.
fn agreed(s: &Simulation<Orderer>, nodes: &[u32]) -> Vec<Item> {
    let mut longest: Vec<Item> = Vec::new();
    for &n in nodes {
        let d = delivered(s, n);
        let unique: BTreeSet<&Item> = d.iter().collect();
        assert_eq!(unique.len(), d.len(), "node {n} delivered an item twice");
        let common = d.len().min(longest.len());
        assert_eq!(
            d[..common],
            longest[..common],
            "node {n} disagrees on the order"
        );
        if d.len() > longest.len() {
            longest = d.to_vec();
        }
    }
    longest
}

fn leader(s: &Simulation<Orderer>, nodes: &[u32]) -> Option<u32> {
    nodes
        .iter()
        .copied()
        .find(|n| s.is_up(NodeId(*n)) && s.node(NodeId(*n)).seq.is_leader())
}

#[test]
fn every_node_delivers_every_item_once_in_one_order() {
    let mut s = sim(1, 5, &[]);
    s.run_until(Duration::from_secs(2));
    let all = [0, 1, 2, 3, 4];
    let order = agreed(&s, &all);
    // Everything submitted before the last half second is delivered, by every node.
    for n in all {
        let submitted = s.node(NodeId(n)).next;
        let got: BTreeSet<u64> = order
            .iter()
            .filter(|(node, _, _)| *node == n)
            .map(|(_, _, i)| *i)
            .collect();
        assert!(submitted > 500, "node {n} submitted only {submitted}");
        for i in 0..submitted - 100 {
            assert!(got.contains(&i), "node {n}'s item {i} was not delivered");
        }
        assert!(delivered(&s, n).len() + 600 > order.len());
    }
    assert!(leader(&s, &all).is_some());
}

#[test]
fn a_crashed_leader_is_replaced_and_replays_the_same_order_after_restart() {
    let mut s = sim(2, 5, &[]);
    let all = [0, 1, 2, 3, 4];
    s.run_until(Duration::from_millis(600));
    let old = leader(&s, &all).expect("a leader by 600 ms");
    let term = s.node(NodeId(old)).seq.term();
    s.crash(NodeId(old));
    s.run_until(Duration::from_millis(1500));
    let up: Vec<u32> = all.iter().copied().filter(|n| *n != old).collect();
    let new = leader(&s, &up).expect("a new leader");
    assert_ne!(new, old);
    assert!(s.node(NodeId(new)).seq.term() > term);
    let before_restart = agreed(&s, &up);
    // Ordering resumed: items the survivors submitted after the crash are delivered.
    let after_crash = before_restart
        .iter()
        .filter(|(n, _, i)| *n == new && *i > 300)
        .count();
    assert!(
        after_crash > 100,
        "{after_crash} items ordered after the crash"
    );
    s.restart(NodeId(old));
    s.run_until(Duration::from_millis(2500));
    let order = agreed(&s, &all);
    // The restarted node delivered the whole log again from the start, in the same order.
    assert!(delivered(&s, old).len() >= before_restart.len());
    assert_eq!(order[..before_restart.len()], before_restart[..]);
    // Its post-restart items (a new incarnation) are ordered too.
    assert!(order.iter().any(|(n, inc, _)| *n == old && *inc == 1));
}

#[test]
fn a_node_restarted_after_a_cut_of_the_log_replays_only_what_follows_it_in_the_same_order() {
    // Checkpoints often, so the crashed node's log holds a cut.
    let mut config = SimConfig::new(6);
    config.checkpoint_min_bytes = 4096;
    let mut s = sim_with(config, 5, &[("compact_lag", "150")]);
    let all = [0, 1, 2, 3, 4];
    s.run_until(Duration::from_millis(1500));
    let follower = all
        .into_iter()
        .find(|n| leader(&s, &[*n]).is_none())
        .expect("a follower");
    let before_crash = delivered(&s, follower).len();
    s.crash(NodeId(follower));
    s.run_until(Duration::from_millis(1700));
    s.restart(NodeId(follower));
    s.run_until(Duration::from_millis(3000));
    let up: Vec<u32> = all.into_iter().filter(|n| *n != follower).collect();
    let order = agreed(&s, &up);
    // Every node cut its log, and the restarted node resumed from its own cut: it delivered
    // a contiguous stretch of the one order (none twice), reaching as far as the others.
    for n in all {
        let cut = s.node(NodeId(n)).seq.counters().entries_compacted;
        assert!(cut > 100, "node {n} cut {cut} entries");
    }
    let again = delivered(&s, follower);
    assert!(!again.is_empty() && again.len() < before_crash + order.len());
    let start = order
        .iter()
        .position(|item| *item == again[0])
        .expect("the restarted node's first item is in the order");
    assert!(start > 0, "the restarted node replayed the whole log");
    let common = again.len().min(order.len() - start);
    assert_eq!(again[..common], order[start..start + common]);
    assert!(common + 200 > order.len() - start);
    assert!(again.iter().any(|(n, inc, _)| *n == follower && *inc == 1));
}

#[test]
fn lost_messages_and_a_partition_delay_but_never_split_the_order() {
    let mut s = sim(3, 5, &[]);
    let all = [0, 1, 2, 3, 4];
    s.set_message_loss(0.05);
    s.run_until(Duration::from_millis(800));
    s.partition(&[
        vec![NodeId(0), NodeId(1)],
        vec![NodeId(2), NodeId(3), NodeId(4)],
    ]);
    s.run_until(Duration::from_millis(1600));
    s.heal();
    s.set_message_loss(0.0);
    s.run_until(Duration::from_millis(3000));
    let order = agreed(&s, &all);
    // Once healed, every node catches up, and items of every node submitted well before the
    // end are there, each once (re-proposals of lost batches included).
    for n in all {
        let submitted = s.node(NodeId(n)).next;
        let got = order.iter().filter(|(node, _, _)| *node == n).count() as u64;
        assert!(
            got + 150 > submitted,
            "node {n}: {got} of {submitted} ordered"
        );
    }
}

#[test]
fn learners_receive_the_order_too() {
    let mut s = sim(4, 7, &[("sequencer_voters", "3")]);
    s.run_until(Duration::from_secs(1));
    let all: Vec<u32> = (0..7).collect();
    let order = agreed(&s, &all);
    assert!(order.len() > 1000);
    assert!(leader(&s, &[0, 1, 2]).is_some());
    assert!(leader(&s, &[3, 4, 5, 6]).is_none());
    for n in 3..7 {
        assert!(delivered(&s, n).len() + 200 > order.len());
    }
}

#[test]
fn the_same_seed_gives_the_same_order() {
    let run = |seed| {
        let mut s = sim(seed, 5, &[]);
        s.set_message_loss(0.02);
        s.run_until(Duration::from_millis(700));
        s.crash(NodeId(0));
        s.run_until(Duration::from_millis(1200));
        s.restart(NodeId(0));
        s.run_until(Duration::from_millis(1500));
        let per_node: BTreeMap<u32, Vec<Item>> =
            (0..5).map(|n| (n, delivered(&s, n).to_vec())).collect();
        (per_node, s.messages_delivered())
    };
    assert_eq!(run(9), run(9));
}

#[test]
fn bad_settings_are_refused_with_the_reason() {
    let profile = LatencyProfile::named("lan").unwrap().truncated(1).unwrap();
    let placement = Arc::new(Placement::ring(profile, 3, 1).unwrap());
    for (k, v) in [
        ("sequencer_voters", "0"),
        ("sequencer_voters", "x"),
        ("epoch_ms", "x"),
    ] {
        let mut options = ProtocolOptions::default();
        options.settings.insert(k.into(), v.into());
        let env = NodeEnv {
            id: NodeId(0),
            placement: placement.clone(),
            options: Arc::new(options),
            procedures: Default::default(),
        };
        let err = Sequencer::<Item>::new(&env).err().expect("refused");
        assert!(err.contains(k), "{err}");
    }
}

#[test]
fn forged_raft_messages_panic_no_node() {
    let mut s = sim(5, 5, &[]);
    s.set_forgery(0.2);
    s.run_until(Duration::from_secs(2));
    let forged = s.forgery_counts();
    assert!(forged.delivered > 100, "{forged:?}");
    let refused: u64 = (0..5)
        .map(|n| s.node(NodeId(n)).seq.counters().raft_messages_refused)
        .sum();
    let restarts: u64 = (0..5)
        .map(|n| s.node(NodeId(n)).seq.counters().raft_restarts)
        .sum();
    eprintln!("forged {forged:?}, refused {refused}, Raft restarts {restarts}");
}

/// `ordering_delay_ms` holds every committed batch that long at each node before delivering
/// it: the order is the same (the delay is after agreement), and what is delivered by a given
/// time lags by the delay's worth of submissions (three nodes, one item each per 3 ms: about
/// 200 items in 200 ms).
#[test]
fn an_ordering_delay_holds_each_batch_back_and_keeps_the_order() {
    let run = |settings: &[(&str, &str)]| {
        let mut s = sim(3, 3, settings);
        s.run_until(Duration::from_secs(2));
        agreed(&s, &[0, 1, 2])
    };
    let prompt = run(&[]);
    let delayed = run(&[("ordering_delay_ms", "200")]);
    assert!(delayed.len() < prompt.len());
    assert_eq!(delayed[..], prompt[..delayed.len()], "the same order");
    let lag = prompt.len() - delayed.len();
    assert!((150..=260).contains(&lag), "{lag} items behind");
}

/// A follower whose acknowledgements were lost holds entries the leader thinks it lacks; once
/// it has cut them from its log, the leader (probing from its stale view) sends them again.
/// The follower must answer with how far it committed, as Raft does, so the leader moves on:
/// refusing the append as "rewriting what is cut" left the follower without entries for good.
#[test]
fn a_follower_that_cut_what_the_leader_resends_still_catches_up() {
    for seed in 1..=8 {
        DELIVERED_THROUGH.with_borrow_mut(|through| through.clear());
        let mut s = sim(seed, 3, &[("compact_below_all", "on")]);
        let all = [0, 1, 2];
        s.set_message_loss(0.2);
        s.run_until(Duration::from_millis(1500));
        s.set_message_loss(0.0);
        let at_heal: Vec<usize> = all.iter().map(|n| delivered(&s, *n).len()).collect();
        s.run_until(Duration::from_millis(3000));
        let order = agreed(&s, &all);
        for n in all {
            let got = delivered(&s, n).len();
            assert!(
                got > at_heal[n as usize] && got + 150 > order.len(),
                "seed {seed}: node {n} delivered {got} of {} ({} when the loss stopped); {}",
                order.len(),
                at_heal[n as usize],
                all.map(|n| format!("node {n}: {}", s.node(NodeId(n)).seq.status()))
                    .join("\n")
            );
            // Every message was honest: none is refused.
            assert_eq!(s.node(NodeId(n)).seq.counters().raft_messages_refused, 0);
        }
    }
}

/// A follower down while the others cut their logs past everything it holds (as they do once
/// it is left behind, `common::horizons`) cannot be sent the entries it lacks: the leader sends
/// it a snapshot of the cut, which it installs, and it delivers the order from the entry after
/// the cut on, skipping what it covers. Before, it was probed at the cut for ever and never
/// delivered again.
#[test]
fn a_follower_whose_log_ends_below_the_cut_installs_a_snapshot_and_delivers_from_there() {
    for seed in 1..=4 {
        let mut s = sim(seed, 3, &[("compact_lag", "100")]);
        let all = [0, 1, 2];
        s.run_until(Duration::from_millis(1000));
        let follower = all
            .into_iter()
            .find(|n| leader(&s, &[*n]).is_none())
            .expect("a follower");
        s.crash(NodeId(follower));
        s.run_until(Duration::from_millis(2500));
        let up: Vec<u32> = all.into_iter().filter(|n| *n != follower).collect();
        let order_at_restart = agreed(&s, &up).len();
        s.restart(NodeId(follower));
        s.run_until(Duration::from_millis(4000));
        let order = agreed(&s, &up);
        let seq = &s.node(NodeId(follower)).seq;
        assert!(
            seq.counters().snapshots_installed >= 1,
            "seed {seed}: no snapshot installed: {}",
            seq.status()
        );
        let sent: u64 = up
            .iter()
            .map(|n| s.node(NodeId(*n)).seq.counters().snapshots_sent)
            .sum();
        assert!(sent >= 1, "seed {seed}: no snapshot sent");
        // After the restart it replays its own log, then jumps over what the snapshot covers,
        // then delivers the rest of the order: one stretch of the order, one gap, the rest.
        let again = delivered(&s, follower);
        let at: Vec<usize> = again
            .iter()
            .map(|item| {
                order
                    .iter()
                    .position(|o| o == item)
                    .expect("every item the restarted node delivers is in the order")
            })
            .collect();
        let gaps = at.windows(2).filter(|w| w[1] != w[0] + 1).count();
        assert_eq!(
            gaps, 1,
            "seed {seed}: the restarted node's items are not two stretches"
        );
        assert!(
            at.last().copied().unwrap_or(0) + 150 > order.len()
                && order.len() > order_at_restart + 200,
            "seed {seed}: delivered up to {:?} of {}",
            at.last(),
            order.len()
        );
        // Its own items after the restart are ordered too.
        assert!(again.iter().any(|(n, inc, _)| *n == follower && *inc == 1));
        for n in all {
            assert_eq!(s.node(NodeId(n)).seq.counters().raft_messages_refused, 0);
        }
    }
}
