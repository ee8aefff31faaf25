//! `nocc`: no concurrency control at all — the upper bound that overhead ratios are measured
//! against (the "NoCC" baseline of Sparkle §5 and the RC bound of DST play the same role).
//!
//! **Guarantee: none. This protocol is incorrect by design.** A read returns the latest version
//! the nearest replica holds; a commit applies the client's writes blindly, stamped with the
//! coordinator's clock, at every replica of every updated partition, and answers once all of them
//! acknowledged, so it pays the same replication round trip as the real protocols and the ratio
//! isolates the cost of concurrency control. Lost updates, dirty and non-repeatable reads, and
//! every other anomaly are possible. Nor is anything durable: nocc persists no log records, so a
//! node that crashes comes back empty (its peers still hold their replicas).

use crate::common::coordinator::{Pending, group_by_partition};
use crate::protocol_info::Engine;
use crate::protocol_info::{INTERACTIVE_AND_ONE_SHOT, IsolationLevel, NetworkModel, ProtocolInfo};
use augur_contract::inbound::{BadMessage, CheckMessage, Inbound};
use augur_contract::{Ctx, NodeEnv, Protocol, Work};
use augur_storage::MvStore;
use augur_types::{AbortReason, ClientOp, ClientReply, ClientRequest, Key, NodeId, Timestamp};
use augur_types::{RequestError, TxnId, Value};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Keys examined per garbage-collection step.
const GC_BATCH: usize = 2048;

/// `nocc`'s registry entry.
pub const INFO: ProtocolInfo = ProtocolInfo {
    name: "nocc",
    isolation: IsolationLevel::None,
    isolation_with: &[],
    paper: "baseline (upper bound for overhead ratios)",
    summary: "no concurrency control: reads the latest version, writes blindly; incorrect by design",
    engine: Engine::Own,
    commit_order_evidence: false,
    promises: &[],
    network: NetworkModel {
        tolerates_loss: true,
        tolerates_reordering: true,
    },
    mutants: &[],
    settings: &[],
    speculation: None,
    forms: INTERACTIVE_AND_ONE_SHOT,
};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    Read {
        txn: TxnId,
        key: Key,
    },
    ReadReply {
        txn: TxnId,
        value: Option<Value>,
    },
    Apply {
        txn: TxnId,
        ts: Timestamp,
        writes: Vec<(Key, Option<Value>)>,
    },
    Applied {
        txn: TxnId,
    },
}

/// Reads and writes go to replicas of their keys, from the transaction's coordinator; answers
/// go back to it.
impl CheckMessage for Msg {
    fn check(&self, at: &Inbound<'_>) -> Result<(), BadMessage> {
        match self {
            Msg::Read { txn, key } => {
                at.txn_of_sender(*txn)?;
                at.key_here(key)
            }
            Msg::Apply { txn, writes, .. } => {
                at.txn_of_sender(*txn)?;
                writes.iter().try_for_each(|(key, _)| at.key_here(key))
            }
            Msg::ReadReply { txn, .. } | Msg::Applied { txn } => at.txn_here(*txn),
        }
    }
}

#[derive(Debug)]
pub enum Timer {
    Gc,
    Timeout(TxnId),
}

struct Txn {
    pending: Option<Pending>,
    acks_needed: usize,
    ts: Timestamp,
}

/// One node running `nocc`.
pub struct Nocc {
    env: NodeEnv,
    store: MvStore,
    /// The next transaction sequence number. Not durable, like everything of nocc's.
    next_txn: u64,
    txns: FxHashMap<TxnId, Txn>,
}

impl Nocc {
    fn apply(
        &mut self,
        ctx: &mut Ctx<'_, Self>,
        txn: TxnId,
        ts: Timestamp,
        writes: Vec<(Key, Option<Value>)>,
    ) {
        ctx.charge(Work::writes(writes.len()));
        for (key, value) in writes {
            self.store.entry(&key).put_committed(txn, ts, value);
        }
    }

    fn applied(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId) {
        let Some(t) = self.txns.get_mut(&txn) else {
            return;
        };
        t.acks_needed = t.acks_needed.saturating_sub(1);
        if t.acks_needed == 0 {
            let t = self.txns.remove(&txn).expect("present");
            if let Some(p) = t.pending {
                p.answer(ctx, ClientReply::Committed { commit_ts: t.ts });
            }
        }
    }

    fn answer_read(&mut self, ctx: &mut Ctx<'_, Self>, txn: TxnId, value: Option<Value>) {
        if let Some(p) = self.txns.get_mut(&txn).and_then(|t| t.pending.take()) {
            p.answer(ctx, ClientReply::Value(value));
        }
    }

    fn latest(&self, key: &Key) -> Option<Value> {
        self.store
            .get(key)
            .and_then(|e| e.latest_committed())
            .and_then(|v| v.value.clone())
    }
}

impl Protocol for Nocc {
    type Msg = Msg;
    type Timer = Timer;
    /// nocc persists nothing: a crashed node comes back empty.
    type Record = ();

    fn new(env: &NodeEnv) -> Self {
        Nocc {
            env: env.clone(),
            store: MvStore::new(),
            next_txn: 1,
            txns: FxHashMap::default(),
        }
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        ctx.set_timer(self.env.options.gc_interval, Timer::Gc);
    }

    fn on_client(&mut self, ctx: &mut Ctx<'_, Self>, request: ClientRequest) {
        let pending = Pending::of(&request);
        match request.op {
            ClientOp::Begin { .. } => {
                let txn = TxnId::new(self.env.id, self.next_txn);
                self.next_txn += 1;
                self.txns.insert(
                    txn,
                    Txn {
                        pending: None,
                        acks_needed: 0,
                        ts: ctx.now(),
                    },
                );
                pending.answer(
                    ctx,
                    ClientReply::Begun {
                        txn,
                        snapshot: ctx.now(),
                    },
                );
            }
            ClientOp::Read { txn, key } => {
                let Some(t) = self.txns.get_mut(&txn) else {
                    return pending.answer(ctx, ClientReply::Aborted(AbortReason::TransactionLost));
                };
                let partition = self.env.placement.partition_of(&key);
                if self.env.placement.replicates(self.env.id, partition) {
                    ctx.charge(Work::reads(1));
                    let value = self.latest(&key);
                    return pending.answer(ctx, ClientReply::Value(value));
                }
                t.pending = Some(pending);
                let replica = self.env.placement.closest_replica(self.env.id, partition);
                ctx.set_timer(self.env.options.participant_timeout, Timer::Timeout(txn));
                ctx.send(replica, Msg::Read { txn, key });
            }
            ClientOp::Commit { txn, writes, .. } => {
                let Some(t) = self.txns.get_mut(&txn) else {
                    return pending.answer(ctx, ClientReply::Aborted(AbortReason::TransactionLost));
                };
                let ts = ctx.now();
                t.ts = ts;
                if writes.is_empty() {
                    self.txns.remove(&txn);
                    return pending.answer(ctx, ClientReply::Committed { commit_ts: ts });
                }
                let placement = self.env.placement.clone();
                let grouped = group_by_partition(&placement, writes);
                t.acks_needed = grouped.keys().map(|p| placement.replicas(*p).len()).sum();
                t.pending = Some(pending);
                ctx.set_timer(self.env.options.participant_timeout, Timer::Timeout(txn));
                for (p, writes) in grouped {
                    for &replica in placement.replicas(p) {
                        if replica == self.env.id {
                            self.apply(ctx, txn, ts, writes.clone());
                            self.applied(ctx, txn);
                        } else {
                            ctx.send(
                                replica,
                                Msg::Apply {
                                    txn,
                                    ts,
                                    writes: writes.clone(),
                                },
                            );
                        }
                    }
                }
            }
            ClientOp::Abort { txn } => {
                self.txns.remove(&txn);
                pending.answer(ctx, ClientReply::Aborted(AbortReason::UserRollback));
            }
            // Never committed speculatively here, so there is no outcome to wait for.
            ClientOp::AwaitOutcome { txn } => {
                let err = RequestError::UnknownTransaction(txn);
                pending.answer(ctx, ClientReply::Rejected(err));
            }
            // The runtime answers the first (`deliver_client`); the one-shot wrapper
            // (`AtCoordinator`) runs the second as interactive requests.
            ClientOp::NodeStats | ClientOp::Execute { .. } => {}
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Self>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Read { txn, key } => {
                ctx.charge(Work::reads(1));
                let value = self.latest(&key);
                ctx.send(from, Msg::ReadReply { txn, value });
            }
            Msg::ReadReply { txn, value } => self.answer_read(ctx, txn, value),
            Msg::Apply { txn, ts, writes } => {
                self.apply(ctx, txn, ts, writes);
                ctx.send(from, Msg::Applied { txn });
            }
            Msg::Applied { txn } => self.applied(ctx, txn),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Self>, timer: Timer) {
        match timer {
            Timer::Gc => {
                // nocc keeps one version per key in spirit: everything but the newest goes.
                self.store.collect_garbage(ctx.now(), GC_BATCH);
                let idle = ctx.now().saturating_sub(self.env.options.idle_txn_timeout);
                self.txns.retain(|_, t| t.pending.is_some() || t.ts >= idle);
                ctx.set_timer(self.env.options.gc_interval, Timer::Gc);
            }
            Timer::Timeout(txn) => {
                if let Some(p) = self.txns.remove(&txn).and_then(|t| t.pending) {
                    p.answer(ctx, ClientReply::Aborted(AbortReason::Timeout));
                }
            }
        }
    }
}
