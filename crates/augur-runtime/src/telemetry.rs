//! What a real node reports about itself, through the `metrics` facade: commits, aborts by
//! reason and commit latency as its clients see them, the depth of its inbox, how long its log
//! takes to sync, its client connections and the state of its links to its peers. Recording
//! costs next to nothing when no recorder is installed (the simulator and the in-process
//! runtime install none); `augur node` installs a Prometheus one and serves it on the address
//! its cluster file entry names as `metrics` (`GET /metrics`).
//!
//! Every name is defined here, once, with its meaning; the recording sites call these
//! functions.

use augur_types::{AbortReason, ClientOp, ClientReply, NodeId};
use std::time::Duration;

/// Transactions committed at this node as coordinator (interactive and one-shot).
pub const COMMITS: &str = "augur_commits_total";
/// Transactions aborted at this node as coordinator, labelled by `reason` (user rollbacks
/// apart: [`USER_ROLLBACKS`]).
pub const ABORTS: &str = "augur_aborts_total";
/// Transactions their clients rolled back at this node as coordinator: no failure.
pub const USER_ROLLBACKS: &str = "augur_user_rollbacks_total";
/// Always 1, labelled with the `version` of augur and the `protocol` the node runs.
pub const BUILD_INFO: &str = "augur_build_info";
/// From the commit request (or one-shot execution) reaching the node to its reply, seconds.
pub const COMMIT_LATENCY: &str = "augur_commit_latency_seconds";
/// Inputs waiting in the node's inbox when it takes the next one.
pub const INBOX_DEPTH: &str = "augur_inbox_depth";
/// How long each sync of the write-ahead log took, seconds.
pub const LOG_SYNC: &str = "augur_log_sync_seconds";
/// Client connections open.
pub const CLIENTS: &str = "augur_client_connections";
/// 1 while the link to `peer` is up, 0 while it is down.
pub const PEER_UP: &str = "augur_peer_link_up";
/// Messages for a peer dropped because its link was down or its buffer full, by `peer`.
pub const PEER_DROPPED: &str = "augur_peer_messages_dropped_total";

/// The buckets of the latency histograms, in seconds: 100 µs to 10 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// A reply leaving the node, `took` after the request that asked to commit (a commit, a
/// one-shot execution, or the wait for a speculative commit's outcome): count its outcome.
pub fn commit_answered(reply: &ClientReply, took: Duration) {
    let outcome = match reply {
        ClientReply::Executed(execution) => &execution.end,
        other => other,
    };
    match outcome {
        // A speculative commit is counted when its final outcome is told (`AwaitOutcome`).
        ClientReply::Committed { .. }
        | ClientReply::Resolved {
            commit_ts: Some(_), ..
        } => {
            metrics::counter!(COMMITS).increment(1);
            metrics::histogram!(COMMIT_LATENCY).record(took.as_secs_f64());
        }
        ClientReply::Aborted(reason) => aborted(*reason),
        _ => {}
    }
}

/// Whether `op` asks to commit, so that its reply is counted by [`commit_answered`].
pub fn asks_to_commit(op: &ClientOp) -> bool {
    matches!(
        op,
        ClientOp::Commit { .. } | ClientOp::Execute { .. } | ClientOp::AwaitOutcome { .. }
    )
}

/// A reply leaving the node for a client: `commit_asked` is when its request arrived, if it
/// asked to commit ([`asks_to_commit`]).
pub fn answered(reply: &ClientReply, commit_asked: Option<std::time::Instant>) {
    match (commit_asked, reply) {
        (Some(asked), reply) => commit_answered(reply, asked.elapsed()),
        (None, ClientReply::Aborted(reason)) => aborted(*reason),
        _ => {}
    }
}

/// A transaction aborted (whatever request learned it).
pub fn aborted(reason: AbortReason) {
    if reason == AbortReason::UserRollback {
        metrics::counter!(USER_ROLLBACKS).increment(1);
    } else {
        metrics::counter!(ABORTS, "reason" => reason.name()).increment(1);
    }
}

/// Give every metric its help text (a Prometheus `# HELP` line) and set [`BUILD_INFO`]: called
/// once, after a recorder is installed.
pub fn describe(protocol: &str) {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        COMMITS,
        "Transactions committed at this node as coordinator (interactive and one-shot)."
    );
    describe_counter!(
        ABORTS,
        "Transactions aborted at this node as coordinator, by reason (user rollbacks apart)."
    );
    describe_counter!(
        USER_ROLLBACKS,
        "Transactions their clients rolled back at this node as coordinator."
    );
    describe_histogram!(
        COMMIT_LATENCY,
        Unit::Seconds,
        "From a commit request (or one-shot execution) reaching the node to its reply."
    );
    describe_gauge!(
        INBOX_DEPTH,
        "Inputs waiting in the node's inbox when it took the last one."
    );
    describe_histogram!(
        LOG_SYNC,
        Unit::Seconds,
        "How long each sync of the write-ahead log took."
    );
    describe_gauge!(CLIENTS, "Client connections open.");
    describe_gauge!(
        PEER_UP,
        "1 while the link to the peer is up, 0 while it is down."
    );
    describe_counter!(
        PEER_DROPPED,
        "Messages for the peer dropped because its link was down or its buffer full."
    );
    describe_gauge!(
        BUILD_INFO,
        "Always 1: the version of augur and the protocol the node runs."
    );
    metrics::gauge!(
        BUILD_INFO,
        "version" => env!("CARGO_PKG_VERSION"),
        "protocol" => protocol.to_string()
    )
    .set(1.0);
}

pub fn inbox_depth(depth: usize) {
    metrics::gauge!(INBOX_DEPTH).set(depth as f64);
}

pub fn log_synced(took: Duration) {
    metrics::histogram!(LOG_SYNC).record(took.as_secs_f64());
}

pub fn client_connected() {
    metrics::gauge!(CLIENTS).increment(1.0);
}

pub fn client_disconnected() {
    metrics::gauge!(CLIENTS).decrement(1.0);
}

pub fn peer_link(peer: NodeId, up: bool) {
    metrics::gauge!(PEER_UP, "peer" => peer.to_string()).set(if up { 1.0 } else { 0.0 });
}

pub fn peer_messages_dropped(peer: NodeId, n: u64) {
    if n > 0 {
        metrics::counter!(PEER_DROPPED, "peer" => peer.to_string()).increment(n);
    }
}
