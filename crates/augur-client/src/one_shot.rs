//! One attempt of a procedure in the one-shot form: shipped whole to the coordinator, which
//! runs it and reports its operations; this client's copy of the procedure is replayed over
//! them.

use crate::attempt::{Attempt, Speculation, body, commit_body, error_outcome, finish};
use crate::history::{AttemptLog, history_op, recorded};
use crate::session::{Session, SpeculativeCommit};
use crate::transport::Transport;
use augur_contract::{CommitStats, Ops, Outcome, Procedure, TxnError};
use augur_types::Value;
use augur_types::{
    AbortReason, ClientOp, ClientReply, ExecutedOp, Execution, Key, ProcedureCall, RequestError,
};
use futures::future::BoxFuture;

/// One attempt of `procedure` in the one-shot form: prepare it, ship it as one
/// [`ClientOp::Execute`] request, and take in what the node's run of it did. A procedure
/// without a [`call`](Procedure::call) runs interactively instead, and so does one the node
/// answers [`RequestError::NotOneShot`] (the attempt took no effect there): that attempt at
/// once, and every later procedure of its type in this session. The speculation asked for
/// applies as in [`run_speculative`](crate::run_speculative), except that the node, not this client, weighs
/// [`Procedure::can_spec_commit`] (with its own [`CommitStats`]) since the commit is part of the
/// request; `stats` is still told how the attempt ended.
///
/// The attempt's history record carries the operations the node reports, in program order,
/// and this client's copy of the procedure is replayed over them (reads answered with the
/// values the node read) so that it ends in the state an interactive run would have left.
/// When the reply is lost the outcome is [`Outcome::Unknown`] and the operations are unknown
/// too: the attempt is recorded with none, marked `ops_unknown`.
pub async fn execute_one_shot<'s, T: Transport>(
    session: &'s Session<T>,
    procedure: &mut dyn Procedure,
    speculation: Speculation,
    stats: Option<&CommitStats>,
) -> Attempt<'s, T> {
    procedure.prepare_attempt();
    let call = match session.runs_interactively(procedure.name()) {
        true => None,
        false => procedure.call(),
    };
    if let Some(call) = call {
        match one_shot(session, procedure, call, speculation, stats).await {
            Shipped::Done(attempt) => return attempt,
            // Nothing took effect: the same attempt runs interactively, as will every later
            // one of its type in this session.
            Shipped::NotOneShot => session.run_interactively(procedure.name()),
        }
    }
    match body(session, procedure, speculation.reads, stats).await {
        Ok(txn) => commit_body(txn, procedure, speculation.commit, stats).await,
        Err(outcome) => Attempt::Done(outcome),
    }
}

/// How a shipped attempt ended.
enum Shipped<'s, T: Transport> {
    Done(Attempt<'s, T>),
    /// The coordinator cannot run the procedure in one request ([`RequestError::NotOneShot`]);
    /// the attempt took no effect.
    NotOneShot,
}

fn not_one_shot(reply: &ClientReply) -> bool {
    matches!(reply, ClientReply::Rejected(RequestError::NotOneShot(_)))
}

async fn one_shot<'s, T: Transport>(
    session: &'s Session<T>,
    procedure: &mut dyn Procedure,
    call: ProcedureCall,
    speculation: Speculation,
    stats: Option<&CommitStats>,
) -> Shipped<'s, T> {
    let invoked = session.transport.now();
    let read_only = procedure.read_only();
    // Only a recorded session keeps the call, for the history.
    let recorded_call = session.recorder.as_ref().map(|_| Box::new(call.clone()));
    let op = ClientOp::Execute {
        call,
        read_only,
        speculative_reads: speculation.reads,
        speculative_commit: speculation.commit && stats.is_some(),
        trying_for_us: session.trying_for_us(),
    };
    let execution = match session.transport.call(op).await {
        Ok(ClientReply::Executed(execution)) if not_one_shot(&execution.end) => {
            return Shipped::NotOneShot;
        }
        Ok(reply) if not_one_shot(&reply) => return Shipped::NotOneShot,
        Ok(ClientReply::Executed(execution)) => *execution,
        Ok(ClientReply::Aborted(reason)) => {
            return Shipped::Done(Attempt::Done(finish(
                procedure,
                stats,
                Outcome::Aborted(reason),
            )));
        }
        Ok(ClientReply::Rejected(e)) => {
            let outcome = error_outcome(&TxnError::Rejected(e), false);
            return Shipped::Done(Attempt::Done(finish(procedure, stats, outcome)));
        }
        Ok(other) => {
            let outcome = error_outcome(&TxnError::Protocol(Box::new(other)), true);
            return Shipped::Done(Attempt::Done(finish(procedure, stats, outcome)));
        }
        // The procedure may have committed; what it read and wrote is unknown.
        Err(_) => {
            session.record_lost(
                procedure.name(),
                read_only,
                invoked,
                recorded_call.map(|c| *c),
            );
            return Shipped::Done(Attempt::Done(finish(procedure, stats, Outcome::Unknown)));
        }
    };
    let Execution {
        txn,
        ops,
        info,
        end,
    } = execution;
    replay(procedure, &ops, &end).await;
    // Only a recorded session needs the operations in the history's form.
    let mut log = session.recorder.as_ref().map(|_| AttemptLog {
        name: procedure.name(),
        invoked,
        ops: ops.iter().map(history_op).collect(),
        outcome: None,
        call: recorded_call,
    });
    let outcome = match (end, txn) {
        (ClientReply::Committed { commit_ts }, _) => Outcome::Committed { commit_ts },
        (ClientReply::SpecCommitted { local_commit_ts }, Some(id)) => {
            procedure.on_spec_commit(&info);
            return Shipped::Done(Attempt::Speculative(SpeculativeCommit {
                session,
                id,
                local_commit_ts,
                read_only,
                info,
                at: session.transport.now(),
                record: log,
            }));
        }
        (ClientReply::Aborted(reason), _) => Outcome::Aborted(reason),
        (ClientReply::Rejected(e), _) => error_outcome(&TxnError::Rejected(e), false),
        (other, _) => error_outcome(&TxnError::Protocol(Box::new(other)), true),
    };
    if let (Some(id), Some(mut log)) = (txn, log.take()) {
        log.outcome = Some(recorded(outcome));
        session.record(id, read_only, log, AbortReason::Timeout);
    }
    Shipped::Done(Attempt::Done(finish(procedure, stats, outcome)))
}

/// Run `procedure`'s body over the operations a node's run of it reported, so that this copy
/// ends in the same state (its results, what `finished` will tally). Reads are answered in
/// order with the values the node read; a read past the reported ones (the node's run ended
/// there) fails as the node's did. A body that departs from the reported operations (the node
/// ran different code) stops at that point: the outcome is the node's either way.
async fn replay(procedure: &mut dyn Procedure, ops: &[ExecutedOp], end: &ClientReply) {
    let ended = match end {
        ClientReply::Aborted(reason) => TxnError::Aborted(*reason),
        ClientReply::Rejected(e) => TxnError::Rejected(e.clone()),
        other => TxnError::Protocol(Box::new(other.clone())),
    };
    let mut replay = Replay {
        ops: ops.iter(),
        ended,
    };
    let _ = procedure.run(&mut replay).await;
}

/// [`Ops`] answering from a node's reported operations (see [`replay`]).
struct Replay<'o> {
    ops: std::slice::Iter<'o, ExecutedOp>,
    ended: TxnError,
}

impl Ops for Replay<'_> {
    fn read<'a>(&'a mut self, key: &'a Key) -> BoxFuture<'a, Result<Option<Value>, TxnError>> {
        let result = match self.ops.next() {
            Some(ExecutedOp::Read { key: k, value }) if k == key => Ok(value.clone()),
            _ => Err(self.ended.clone()),
        };
        Box::pin(std::future::ready(result))
    }

    fn write(&mut self, key: Key, value: Option<Value>) -> Result<(), TxnError> {
        match self.ops.next() {
            Some(ExecutedOp::Write { key: k, value: v }) if *k == key && *v == value => Ok(()),
            _ => Err(self.ended.clone()),
        }
    }
}
