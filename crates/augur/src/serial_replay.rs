//! The serial-replay oracle of the protocols that order whole transactions before running them
//! ([`Promise::SerialReplay`](augur_protocols::registry::Promise::SerialReplay): `calvin`,
//! `s-smr`). Their commit timestamp is the transaction's position in the one agreed order, and
//! every replica runs the procedures in that order, so running the committed procedures again,
//! one at a time in position order, from their names and arguments as the history recorded
//! them, must give what the clients saw, and end in the state the replicas hold.
//!
//! # What is checked
//!
//! * **Positions.** No two committed attempts that wrote share a position. A read-only attempt
//!   may share one (`sparkle`'s fast path answers a read-only transaction over a partition's
//!   final state at the position that state is final through, unordered): it is replayed after
//!   the attempt that wrote at that position, if any.
//! * **Results.** Each committed one-shot attempt, in position order, is run again over the
//!   state its predecessors left: every value it reads must be the one its client was told,
//!   and it must issue the same operations (reads and writes, values included) in the same
//!   order. An attempt that only wrote (a blind write) has its writes applied.
//! * **Final state** ([`Replayed::digests`]): the digest of the newest version of each key per
//!   partition, as [`dispatch::version_digest`] computes it and as the replicas report it.
//!
//! # Attempts whose outcome is unknown
//!
//! A one-shot attempt whose reply was lost (or whose client gave up on it: a timeout, a lost
//! coordinator) may have committed, at a position nobody recorded.
//! Every attempt whose client heard of its commit before the first such attempt was invoked
//! is ordered before it (its batch was committed to the log before the other was proposed), so
//! that prefix of the order is replayed in full (a read-only attempt answered later does not
//! end it: it writes nothing; it is just not checked over the state). Past it, each attempt is run again over the
//! values its client was told it read, which still checks that the same procedure over the
//! same reads issues the same operations, and its recorded writes are applied; the final state
//! is then unknown and not compared.

use augur_contract::driver::{Driver, Progress};
use augur_contract::forms::Procedures;
use augur_protocols::common::dispatch;
use augur_types::history::{History, Op, RecordedOutcome, TxnRecord};
use augur_types::{AbortReason, Key, PartitionId, Placement, Timestamp, Value};
use std::collections::BTreeMap;

/// The replay's store: each key's newest position and value, by printed key.
type State = BTreeMap<String, (u64, Option<String>)>;

/// What a replay found.
pub struct Replayed {
    /// Committed attempts run again, and how many of them in the fully checked prefix.
    pub committed: usize,
    pub checked: usize,
    /// The newest value of each key and its position, by printed key; `None` when attempts of
    /// unknown outcome leave it unknown.
    pub final_state: Option<State>,
}

/// Replay `history`'s committed attempts in position order (see the module docs). `Err` says
/// where the replay and the history part.
pub fn replay(history: &History, procedures: &Procedures) -> Result<Replayed, String> {
    let mut committed: Vec<(u64, &TxnRecord)> = history
        .txns
        .iter()
        .filter_map(|t| match t.outcome {
            RecordedOutcome::Committed { commit_ts } => Some((commit_ts, t)),
            _ => None,
        })
        .collect();
    let wrote = |t: &TxnRecord| t.ops.iter().any(|op| matches!(op, Op::Write { .. }));
    // At one position, the one that wrote first.
    committed.sort_by_key(|(at, t)| (*at, !wrote(t)));
    if let Some(pair) = committed
        .windows(2)
        .find(|w| w[0].0 == w[1].0 && wrote(w[0].1) && wrote(w[1].1))
    {
        return Err(format!(
            "T{} and T{} both committed at position {}",
            pair[0].1.index, pair[1].1.index, pair[0].0
        ));
    }
    let first_unknown = history
        .txns
        .iter()
        .filter(|t| may_have_committed(t))
        .map(|t| t.invoke_us)
        .min();
    let mut state = State::new();
    let mut checked = 0;
    let mut in_prefix = true;
    for (at, t) in &committed {
        let before_unknown = first_unknown.is_none_or(|invoked| t.complete_us < invoked);
        // A read-only attempt changes nothing: one answered unordered after the first unknown
        // attempt was invoked (`sparkle`'s fast path may answer from an old position late) is
        // not checked over the state, but does not end the prefix for the attempts after it.
        let read_only = !wrote(t);
        in_prefix &= before_unknown || read_only;
        let checkable = in_prefix && before_unknown;
        let ops = match &t.call {
            Some(call) => {
                let procedure = procedures
                    .instantiate(call)
                    .map_err(|e| format!("T{} cannot be run again: {e}", t.index))?;
                rerun(t, procedure, &state, checkable)?
            }
            None if t.ops.iter().all(|op| matches!(op, Op::Write { .. })) => t.ops.clone(),
            None => {
                return Err(format!(
                    "T{} read without a recorded procedure call: it cannot be run again",
                    t.index
                ));
            }
        };
        if ops != t.ops {
            return Err(format!(
                "T{} ({}) at position {at}: run again it issues {}, its client was told {}",
                t.index,
                t.name,
                show(&ops),
                show(&t.ops)
            ));
        }
        for op in ops {
            if let Op::Write { key, value } = op {
                state.insert(key, (*at, value));
            }
        }
        if checkable {
            checked += 1;
        }
    }
    Ok(Replayed {
        committed: committed.len(),
        checked,
        final_state: in_prefix.then_some(state),
    })
}

/// Whether `t`, not recorded as committed, may have committed all the same: its outcome is
/// unknown, or its client stopped waiting for it (a timeout, a coordinator lost).
fn may_have_committed(t: &TxnRecord) -> bool {
    match &t.outcome {
        RecordedOutcome::Committed { .. } => false,
        RecordedOutcome::Unknown => true,
        RecordedOutcome::Aborted { reason } => [AbortReason::Timeout, AbortReason::TransactionLost]
            .iter()
            .any(|r| r.name() == reason),
    }
}

/// Run `t`'s procedure again to its end, reading from `state` (the serial order's values) in
/// the checked prefix, or else from what `t`'s client was told it read.
fn rerun(
    t: &TxnRecord,
    procedure: Box<dyn augur_client::Procedure>,
    state: &State,
    in_prefix: bool,
) -> Result<Vec<Op>, String> {
    let mut run = Driver::start(procedure);
    let ended = loop {
        match run.resume() {
            Progress::Ended(ended) => break ended,
            Progress::Needs(key) => {
                let printed = key.to_string();
                let value = if in_prefix {
                    state.get(&printed).and_then(|(_, v)| v.clone())
                } else {
                    t.ops
                        .iter()
                        .find_map(|op| match op {
                            Op::Read { key, value } if *key == printed => Some(value.clone()),
                            _ => None,
                        })
                        .ok_or_else(|| {
                            format!(
                                "T{} run again reads {printed}, which its client never read",
                                t.index
                            )
                        })?
                };
                run.supply(key, value.map(Value::from));
            }
        }
    };
    if let Err(e) = ended.end {
        return Err(format!(
            "T{} ({}) committed, but run again it ends {e}",
            t.index, t.name
        ));
    }
    Ok(ended.ops.iter().map(augur_client::history_op).collect())
}

fn show(ops: &[Op]) -> String {
    let shown: Vec<String> = ops
        .iter()
        .map(|op| match op {
            Op::Read { key, value } => format!("r({key})={}", value.as_deref().unwrap_or("∅")),
            Op::Write { key, value } => format!("w({key})={}", value.as_deref().unwrap_or("∅")),
        })
        .collect();
    format!("[{}]", shown.join(" "))
}

impl Replayed {
    /// Per partition, the digest of the final state ([`dispatch::version_digest`] of each
    /// key's newest version, combined as the replicas combine theirs); `None` when the final
    /// state is unknown or a key does not parse back.
    pub fn digests(&self, placement: &Placement) -> Option<BTreeMap<PartitionId, u64>> {
        let state = self.final_state.as_ref()?;
        let mut digests = BTreeMap::new();
        for (printed, (at, value)) in state {
            let key = Key::parse_printed(printed).ok()?;
            let value = value.clone().map(Value::from);
            *digests.entry(placement.partition_of(&key)).or_insert(0) ^=
                dispatch::version_digest(&key, Timestamp(*at), &value);
        }
        Some(digests)
    }
}
