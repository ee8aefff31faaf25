//! What [`Simulation`](super::Simulation) records when tracing is on, and how a trace renders
//! as text (the format is described in the [`sim`](super) module documentation).

use augur_types::{ClientId, NodeId, RequestId};
use std::fmt;
use std::time::Duration;

/// A node-level trace of a simulation run: every handler invocation with the effects it
/// produced, and what the simulator did with them, in the order it happened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub(super) entries: Vec<TraceEntry>,
}

/// One event of a [`Trace`]: one line of its rendering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// Virtual time in microseconds since the start of the run.
    pub at_us: u64,
    /// The node it happened at (for a client's timeout, the client's coordinator).
    pub node: NodeId,
    pub event: TraceEvent,
}

/// What happened. Texts are the `Debug` renderings of the protocol's messages, timers and
/// records and of the client types, taken when the event happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    // --- Inputs: a handler ran. The effects it produced follow it.
    /// The node started (`Protocol::on_start`), at the beginning of the run.
    Start,
    /// The node restarted after a crash, rebuilt from its log, and `Protocol::on_start` ran.
    Restart,
    /// A message from `from` was delivered.
    Deliver { from: NodeId, msg: String },
    /// A client request was delivered.
    Request {
        client: ClientId,
        request: RequestId,
        op: String,
    },
    /// A timer the node set fired.
    Timer { timer: String },

    // --- Effects of the handler traced just before.
    /// A record appended to the node's log (not yet durable).
    Persist { record: String },
    /// A message produced for `to`.
    Send { to: NodeId, msg: String },
    /// A reply produced for a client request.
    Reply {
        client: ClientId,
        request: RequestId,
        reply: String,
    },
    /// A timer set to fire `after` from now.
    SetTimer { after: Duration, timer: String },
    /// The handler's `sends` messages and `replies` replies wait until the log is synced up to
    /// record `until_record` (records are counted from the start of the node's log).
    Hold {
        sends: usize,
        replies: usize,
        until_record: u64,
    },
    /// The log took a checkpoint of `bytes` bytes.
    Checkpoint { bytes: usize },

    // --- What the simulator did later.
    /// A sync of the log completed: every record up to `records` is durable.
    Synced { records: u64 },
    /// A held message left the node (it follows the [`TraceEvent::Synced`] that released it).
    ReleaseSend { to: NodeId, msg: String },
    /// A held reply left the node.
    ReleaseReply {
        client: ClientId,
        request: RequestId,
        reply: String,
    },
    /// A message from `from` to `to` was lost. A message lost to random loss is traced at its
    /// sender when it leaves; one lost to a partition or a crash at its receiver when it
    /// would have arrived.
    Dropped {
        from: NodeId,
        to: NodeId,
        msg: String,
        cause: DropCause,
    },
    /// A client request reached its coordinator while that node was down, and was lost.
    RequestDropped {
        client: ClientId,
        request: RequestId,
        op: String,
    },
    /// The node was paused: it handles nothing until it is resumed.
    Pause,
    /// The paused node resumed; `waited` inputs (messages, requests, timers, syncs, work)
    /// waited for it and are handled now, in order.
    Resume { waited: usize },
    /// The node crashed: its memory and `lost_records` unsynced log records are gone, and so
    /// are `held_sends` messages and `held_replies` replies that waited for a sync; it was
    /// rebuilt from `recovered_records` durable records (checkpoint included).
    Crash {
        lost_records: u64,
        held_sends: usize,
        held_replies: usize,
        recovered_records: u64,
    },
    /// A client gave up waiting for the reply to a request sent to this node.
    ClientTimeout {
        client: ClientId,
        request: RequestId,
    },
}

/// Why a message was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropCause {
    /// Random message loss ([`Simulation::set_message_loss`](super::Simulation::set_message_loss)).
    Loss,
    /// The two nodes were on different sides of a partition when it would have arrived.
    Partition,
    /// The receiver was down when it would have arrived.
    Down,
    /// One end crashed (and possibly restarted) while it was in flight: the connection that
    /// carried it broke.
    Crashed,
}

impl TraceEvent {
    /// Whether this event is an effect of the handler traced before it.
    pub fn is_effect(&self) -> bool {
        matches!(
            self,
            TraceEvent::Persist { .. }
                | TraceEvent::Send { .. }
                | TraceEvent::Reply { .. }
                | TraceEvent::SetTimer { .. }
                | TraceEvent::Hold { .. }
                | TraceEvent::Checkpoint { .. }
                | TraceEvent::Dropped {
                    cause: DropCause::Loss,
                    ..
                }
        )
    }
}

impl Trace {
    pub fn entries(&self) -> &[TraceEntry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// This trace without idle periodic ticks: a timer that fired and did nothing but set
    /// itself again (say a garbage-collection tick with nothing to collect) is left out with
    /// its re-arming. A tick that did anything else is kept whole.
    pub fn without_idle_ticks(&self) -> Trace {
        let mut entries = Vec::with_capacity(self.entries.len());
        let mut i = 0;
        while i < self.entries.len() {
            let e = &self.entries[i];
            if let TraceEvent::Timer { timer } = &e.event {
                let effects: Vec<&TraceEntry> = self.entries[i + 1..]
                    .iter()
                    .take_while(|f| f.event.is_effect() && f.node == e.node && f.at_us == e.at_us)
                    .collect();
                if let [only] = effects[..]
                    && matches!(&only.event, TraceEvent::SetTimer { timer: t, .. } if t == timer)
                {
                    i += 2;
                    continue;
                }
            }
            entries.push(e.clone());
            i += 1;
        }
        Trace { entries }
    }

    /// The trace as text, one line per event (see the module documentation).
    pub fn render(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.entries {
            writeln!(f, "{e}")?;
        }
        Ok(())
    }
}

/// `us` microseconds as milliseconds with three decimals.
fn ms(us: u64) -> String {
    format!("{}.{:03}", us / 1000, us % 1000)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl fmt::Display for TraceEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match &self.event {
            TraceEvent::Start => "start".to_string(),
            TraceEvent::Restart => "restart".to_string(),
            TraceEvent::Pause => "pause".to_string(),
            TraceEvent::Resume { waited } => {
                format!("resume ({} waited)", plural(*waited, "input", "inputs"))
            }
            TraceEvent::Deliver { from, msg } => format!("recv {from} {msg}"),
            TraceEvent::Request {
                client,
                request,
                op,
            } => format!("request c{}#{} {op}", client.0, request.0),
            TraceEvent::Timer { timer } => format!("timer {timer}"),
            TraceEvent::Persist { record } => format!("  persist {record}"),
            TraceEvent::Send { to, msg } => format!("  send {to} {msg}"),
            TraceEvent::Reply {
                client,
                request,
                reply,
            } => format!("  reply c{}#{} {reply}", client.0, request.0),
            TraceEvent::SetTimer { after, timer } => {
                format!("  set-timer +{}ms {timer}", ms(after.as_micros() as u64))
            }
            TraceEvent::Hold {
                sends,
                replies,
                until_record,
            } => {
                let what = match (*sends, *replies) {
                    (s, 0) => plural(s, "send", "sends"),
                    (0, r) => plural(r, "reply", "replies"),
                    (s, r) => format!(
                        "{} and {}",
                        plural(s, "send", "sends"),
                        plural(r, "reply", "replies")
                    ),
                };
                format!("  hold {what} until record {until_record} is synced")
            }
            TraceEvent::Checkpoint { bytes } => format!("  checkpoint {bytes} bytes"),
            TraceEvent::Synced { records } => format!("synced to record {records}"),
            TraceEvent::ReleaseSend { to, msg } => format!("  release send {to} {msg}"),
            TraceEvent::ReleaseReply {
                client,
                request,
                reply,
            } => format!("  release reply c{}#{} {reply}", client.0, request.0),
            TraceEvent::Dropped {
                from,
                to,
                msg,
                cause,
            } => {
                let cause = match cause {
                    DropCause::Loss => "loss",
                    DropCause::Partition => "partition",
                    DropCause::Down => "receiver down",
                    DropCause::Crashed => "connection broken by a crash",
                };
                let indent = if self.event.is_effect() { "  " } else { "" };
                format!("{indent}lost {from}->{to} {msg} ({cause})")
            }
            TraceEvent::RequestDropped {
                client,
                request,
                op,
            } => format!("lost request c{}#{} {op} (node down)", client.0, request.0),
            TraceEvent::Crash {
                lost_records,
                held_sends,
                held_replies,
                recovered_records,
            } => {
                let lost: Vec<String> = [
                    (
                        *lost_records as usize,
                        "unsynced record",
                        "unsynced records",
                    ),
                    (*held_sends, "held send", "held sends"),
                    (*held_replies, "held reply", "held replies"),
                ]
                .into_iter()
                .filter(|(n, ..)| *n > 0)
                .map(|(n, one, many)| plural(n, one, many))
                .collect();
                let with = if lost.is_empty() {
                    String::new()
                } else {
                    format!(" with {}", lost.join(", "))
                };
                format!(
                    "crash: memory lost{with}; rebuilt from {}",
                    plural(
                        *recovered_records as usize,
                        "durable record",
                        "durable records"
                    )
                )
            }
            TraceEvent::ClientTimeout { client, request } => {
                format!("client c{}#{} timed out", client.0, request.0)
            }
        };
        write!(
            f,
            "{:>10} {:<3} {}",
            ms(self.at_us),
            self.node.to_string(),
            readable_timestamps(&text)
        )
    }
}

/// Rewrite every `Timestamp(N)` whose value lies near the simulator's clock epoch as
/// `ts(MS)`: the node-clock reading in milliseconds since the start of the run, skew included,
/// to the microsecond. Other timestamps (zero, `MAX`) are left as they are.
fn readable_timestamps(text: &str) -> String {
    const OPEN: &str = "Timestamp(";
    let epoch = super::EPOCH_US as i128;
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let value = after[..digits].parse::<u64>().ok();
        match value {
            Some(v)
                if after[digits..].starts_with(')')
                    && (epoch / 2..epoch * 4).contains(&(v as i128)) =>
            {
                let rel = v as i128 - epoch;
                let sign = if rel < 0 { "-" } else { "" };
                out.push_str(&format!("ts({sign}{})", ms(rel.unsigned_abs() as u64)));
                rest = &after[digits + 1..];
            }
            _ => {
                out.push_str(OPEN);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_near_the_epoch_render_relative_to_the_start() {
        let epoch = super::super::EPOCH_US;
        let text = format!(
            "Commit {{ ts: Timestamp({}), floor: Timestamp(0), s: Timestamp({}), m: Timestamp({}) }}",
            epoch + 33_520,
            epoch - 1_500,
            u64::MAX
        );
        assert_eq!(
            readable_timestamps(&text),
            format!(
                "Commit {{ ts: ts(33.520), floor: Timestamp(0), s: ts(-1.500), m: Timestamp({}) }}",
                u64::MAX
            )
        );
        assert_eq!(readable_timestamps("Timestamp(12"), "Timestamp(12");
    }
}
