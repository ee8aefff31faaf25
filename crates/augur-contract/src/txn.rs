//! How a transaction operation fails and how an attempt ends: the vocabulary a procedure's
//! body, its driver and the client library share.

use augur_types::{AbortReason, ClientReply, RequestError, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;

/// Why a request got no reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error("connection to the coordinator lost: {0}")]
    Disconnected(String),
}

/// Why a transaction operation failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TxnError {
    #[error("transaction aborted: {0}")]
    Aborted(AbortReason),
    #[error("request rejected: {0}")]
    Rejected(RequestError),
    /// The coordinator did not answer. If this happened during commit the outcome is unknown.
    #[error("coordinator unavailable: {0}")]
    Unavailable(TransportError),
    #[error("unexpected reply {0:?}")]
    Protocol(Box<ClientReply>),
}

impl From<TransportError> for TxnError {
    fn from(e: TransportError) -> Self {
        TxnError::Unavailable(e)
    }
}

/// How a transaction attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Committed {
        commit_ts: Timestamp,
    },
    Aborted(AbortReason),
    /// The client never learned whether the transaction committed.
    Unknown,
}

/// The info map of a transaction (STR §4's `txInfo`): what its body noted for the speculation
/// callbacks to weigh, such as the price of the item being bought.
pub type TxnInfo = BTreeMap<String, f64>;

/// The reply an interactive client would have received for the error that ended an attempt:
/// what a node that runs procedures itself answers a one-shot request with.
pub fn reply_for(error: TxnError) -> ClientReply {
    match error {
        TxnError::Aborted(reason) => ClientReply::Aborted(reason),
        TxnError::Rejected(e) => ClientReply::Rejected(e),
        TxnError::Protocol(reply) => *reply,
        // A node's own runs never time out or lose a connection.
        TxnError::Unavailable(e) => ClientReply::Rejected(RequestError::Invalid(e.to_string())),
    }
}
