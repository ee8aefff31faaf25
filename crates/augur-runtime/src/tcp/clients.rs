//! The node side of client connections: requests in, responses out.
//!
//! A connection is one client: the node assigned its id when it welcomed it, and every request
//! on it is taken as that client's, whatever id the request carries, so no connection can
//! speak for another's client or receive its replies. A transaction can be used only from the
//! connection that began it ([`OpenTxns`]). When the connection ends, the node is told the
//! client is gone ([`Input::ClientGone`]) and forgets what it kept for it.

use super::wire::{FrameWriter, InboundReader, append_frame, flush, make_room, send_body};
use super::{Body, decode_frame};
use super::{DEADLINE_TICK, Shared, frame_overdue};
use crate::local::{Input, LocalTransport};
use crate::telemetry;
use augur_client::{Transport, TransportError};
use augur_contract::Protocol;
use augur_contract::inbound::check_request;
use augur_types::{ClientId, ClientOp, ClientReply, ClientRequest, ClientResponse};
use augur_types::{RequestError, RequestId, TxnId};
use futures::StreamExt;
use futures::future::BoxFuture;
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use tokio::sync::mpsc;

/// The most open transactions the node remembers for one client connection (beyond, the one
/// begun longest ago is forgotten).
pub const MAX_OPEN_TXNS: usize = 1024;

pub(super) async fn serve_client<P: Protocol>(
    frames: InboundReader,
    out: FrameWriter,
    client: ClientId,
    shared: &Shared<P>,
) -> Result<(), String> {
    telemetry::client_connected();
    let result = client_loop(frames, out, client, shared).await;
    telemetry::client_disconnected();
    // Whatever ended the connection, the node may forget the client.
    let _ = shared.inbox.send(Input::ClientGone(client));
    result
}

async fn client_loop<P: Protocol>(
    mut frames: InboundReader,
    mut out: FrameWriter,
    client: ClientId,
    shared: &Shared<P>,
) -> Result<(), String> {
    let limits = &shared.limits;
    let (reply_tx, mut replies) = mpsc::unbounded_channel::<ClientResponse>();
    let mut txns = OpenTxns::default();
    // Requests handed to the node and not answered yet; at the limit the connection is not
    // read, so a client that pipelines without bound is held back by TCP flow control.
    let mut in_flight = 0usize;
    // When each request that asks to commit arrived, for the commit latency.
    let mut commit_asked: FxHashMap<RequestId, Instant> = FxHashMap::default();
    let mut last_activity = Instant::now();
    let mut tick = tokio::time::interval(DEADLINE_TICK);
    loop {
        tokio::select! {
            frame = frames.next(), if in_flight < limits.max_requests_in_flight => {
                let Some(frame) = frame else { return Ok(()) };
                let frame = frame.map_err(|e| e.to_string())?;
                last_activity = Instant::now();
                let mut request = match decode_frame::<P::Msg>(&frame).map_err(|e| e.to_string())? {
                    Body::Request(request) => request,
                    other => return Err(format!("{} frame on a client connection", other.kind())),
                };
                request.client = client;
                let refusal = check_request(&request.op)
                    .map_err(|e| RequestError::Invalid(e.to_string()))
                    .and_then(|()| txns.admit(&request));
                in_flight += 1;
                if telemetry::asks_to_commit(&request.op) {
                    commit_asked.insert(request.id, Instant::now());
                }
                if let Err(error) = refusal {
                    let _ = reply_tx.send(ClientResponse {
                        id: request.id,
                        reply: ClientReply::Rejected(error),
                    });
                    continue;
                }
                if shared.inbox.send(Input::Client(request, reply_tx.clone())).is_err() {
                    return Ok(()); // the node stopped
                }
            }
            Some(response) = replies.recv() => {
                let mut next = Some(response);
                while let Some(response) = next {
                    in_flight = in_flight.saturating_sub(1);
                    txns.observe(&response);
                    telemetry::answered(&response.reply, commit_asked.remove(&response.id));
                    make_room(&mut out).await.map_err(|e| e.to_string())?;
                    append_frame(out.write_buffer_mut(), &Body::<()>::Response(response))
                        .map_err(|e| format!("cannot encode a response: {e}"))?;
                    next = replies.try_recv().ok();
                }
                flush(&mut out).await.map_err(|e| e.to_string())?;
                last_activity = Instant::now();
            }
            _ = tick.tick() => {
                frame_overdue(&frames, limits)?;
                if in_flight == 0 && last_activity.elapsed() > limits.client_idle_timeout {
                    let why = format!(
                        "client {} idle for longer than limits.client_idle_timeout ({:?})",
                        client.0,
                        limits.client_idle_timeout
                    );
                    let _ = send_body(&mut out, &Body::<()>::Refused(why.clone())).await;
                    return Err(why);
                }
            }
        }
    }
}

/// Opens client sessions on a running node from inside its process, for the node's other front
/// ends (the gRPC API of `augur node`). Such a session is held to what a client connection is:
/// the node assigns its client id, its requests are checked ([`check_request`]) before the
/// protocol sees them, its commits and aborts are counted ([`telemetry`]), and when it is
/// dropped the node forgets the client ([`Input::ClientGone`]). Its transactions are its own by
/// construction (the session names only transactions it began), so it needs no `OpenTxns`.
#[derive(Clone)]
pub struct NodeClients {
    open: Arc<dyn Fn(Duration) -> Box<dyn Transport> + Send + Sync>,
    client_token: Option<String>,
}

impl NodeClients {
    pub(super) fn new<P: Protocol>(shared: Arc<Shared<P>>) -> NodeClients {
        let client_token = shared.client_token.clone();
        let open = move |request_timeout: Duration| -> Box<dyn Transport> {
            let client = shared.client_ids.assign();
            telemetry::client_connected();
            Box::new(NodeClient(LocalTransport::new(
                client,
                shared.inbox.clone(),
                request_timeout,
                // No history is recorded through these sessions: each counts from its start.
                Instant::now(),
            )))
        };
        NodeClients {
            open: Arc::new(open),
            client_token,
        }
    }

    /// A new client session; each request waits at most `request_timeout` for its reply.
    pub fn open(&self, request_timeout: Duration) -> Box<dyn Transport> {
        (self.open)(request_timeout)
    }

    /// Whether a client that presented `token` may use the node (`Err` says why not, in words),
    /// by the same rule as a client connection's hello.
    pub fn admit(&self, token: Option<&str>) -> Result<(), String> {
        check_token(self.client_token.as_deref(), token)
    }
}

/// Whether `given` is the client token `expected` (any token, or none, if the cluster requires
/// none). `Err` is the reason, in words.
pub(super) fn check_token(expected: Option<&str>, given: Option<&str>) -> Result<(), String> {
    let Some(expected) = expected else {
        return Ok(());
    };
    // Compare digests, so that how long the comparison takes says nothing about how much of
    // the token a guess got right.
    let digest = |t: &str| ring::digest::digest(&ring::digest::SHA256, t.as_bytes());
    if digest(expected).as_ref() == digest(given.unwrap_or_default()).as_ref() {
        Ok(())
    } else if given.is_none() {
        Err("this cluster requires a client token".into())
    } else {
        Err("wrong client token".into())
    }
}

/// One session opened through [`NodeClients`].
struct NodeClient<P: Protocol>(LocalTransport<P>);

impl<P: Protocol> Transport for NodeClient<P> {
    fn client_id(&self) -> ClientId {
        self.0.client_id()
    }

    fn call(&self, op: ClientOp) -> BoxFuture<'_, Result<ClientReply, TransportError>> {
        Box::pin(async move {
            if let Err(error) = check_request(&op) {
                return Ok(ClientReply::Rejected(RequestError::Invalid(
                    error.to_string(),
                )));
            }
            let commit_asked = telemetry::asks_to_commit(&op).then(Instant::now);
            let reply = self.0.call(op).await?;
            telemetry::answered(&reply, commit_asked);
            Ok(reply)
        })
    }

    fn now(&self) -> Duration {
        self.0.now()
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()> {
        self.0.sleep(d)
    }
}

impl<P: Protocol> Drop for NodeClient<P> {
    fn drop(&mut self) {
        telemetry::client_disconnected();
        let _ = self.0.inbox().send(Input::ClientGone(self.0.client_id()));
    }
}

/// The transactions a client connection has begun and not yet seen end, so that a request
/// naming any other transaction is refused before the protocol sees it. At most
/// [`MAX_OPEN_TXNS`] are kept: beyond, the one begun longest ago is forgotten (a client that
/// leaves transactions behind without ending them must not be blocked by them; the protocol
/// aborts them as idle), and the connection can no longer use it.
#[derive(Default)]
struct OpenTxns {
    /// Each open transaction, with the order in which it began.
    open: FxHashMap<TxnId, u64>,
    began: u64,
    /// Requests in flight that name an open transaction, whose reply may end it.
    naming: FxHashMap<RequestId, TxnId>,
}

impl OpenTxns {
    /// Whether `request` may go to the protocol.
    fn admit(&mut self, request: &ClientRequest) -> Result<(), RequestError> {
        let txn = match &request.op {
            ClientOp::Read { txn, .. }
            | ClientOp::Commit { txn, .. }
            | ClientOp::AwaitOutcome { txn }
            | ClientOp::Abort { txn } => *txn,
            ClientOp::Begin { .. } | ClientOp::Execute { .. } | ClientOp::NodeStats => {
                return Ok(());
            }
        };
        if !self.open.contains_key(&txn) {
            return Err(RequestError::UnknownTransaction(txn));
        }
        self.naming.insert(request.id, txn);
        Ok(())
    }

    /// Follow a reply: a transaction begins, or its end is reported.
    fn observe(&mut self, response: &ClientResponse) {
        match &response.reply {
            ClientReply::Begun { txn, .. } => {
                self.remember(*txn);
                return;
            }
            // A one-shot transaction that committed speculatively: its client will ask for
            // the final outcome.
            ClientReply::Executed(execution) => {
                if let (Some(txn), ClientReply::SpecCommitted { .. }) =
                    (execution.txn, &execution.end)
                {
                    self.remember(txn);
                }
                return;
            }
            _ => {}
        }
        let Some(txn) = self.naming.remove(&response.id) else {
            return;
        };
        let over = matches!(
            response.reply,
            ClientReply::Committed { .. }
                | ClientReply::Aborted(_)
                | ClientReply::Resolved { .. }
                | ClientReply::Rejected(RequestError::UnknownTransaction(_))
        );
        if over {
            self.open.remove(&txn);
        }
    }

    fn remember(&mut self, txn: TxnId) {
        if self.open.len() >= MAX_OPEN_TXNS
            && let Some(oldest) = self.open.iter().min_by_key(|(_, at)| **at).map(|(t, _)| *t)
        {
            self.open.remove(&oldest);
        }
        self.began += 1;
        self.open.insert(txn, self.began);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_types::{AbortReason, Key, NodeId, Timestamp};

    fn request(id: u64, op: ClientOp) -> ClientRequest {
        ClientRequest {
            client: ClientId(1),
            id: RequestId(id),
            op,
        }
    }

    fn reply(id: u64, reply: ClientReply) -> ClientResponse {
        ClientResponse {
            id: RequestId(id),
            reply,
        }
    }

    #[test]
    fn only_transactions_begun_on_the_connection_may_be_used_until_they_end() {
        let mut txns = OpenTxns::default();
        let txn = TxnId::new(NodeId(0), 5);
        let read = ClientOp::Read {
            txn,
            key: Key::numbered(0, 1),
        };
        // Someone else's transaction (or a guessed id) is refused.
        assert_eq!(
            txns.admit(&request(1, read.clone())),
            Err(RequestError::UnknownTransaction(txn))
        );
        let begin = ClientOp::Begin {
            read_only: false,
            speculative: false,
            trying_for_us: 0,
        };
        assert_eq!(txns.admit(&request(2, begin)), Ok(()));
        txns.observe(&reply(
            2,
            ClientReply::Begun {
                txn,
                snapshot: Timestamp(1),
            },
        ));
        assert_eq!(txns.admit(&request(3, read.clone())), Ok(()));
        txns.observe(&reply(3, ClientReply::Value(None)));
        assert_eq!(txns.admit(&request(4, read.clone())), Ok(()));
        // An abort reply ends it.
        txns.observe(&reply(4, ClientReply::Aborted(AbortReason::Timeout)));
        assert!(txns.admit(&request(5, read)).is_err());
        assert!(txns.open.is_empty() && txns.naming.is_empty());
    }

    #[test]
    fn a_speculatively_committed_one_shot_transaction_can_be_awaited() {
        let mut txns = OpenTxns::default();
        let txn = TxnId::new(NodeId(0), 9);
        let execution = augur_types::Execution {
            txn: Some(txn),
            ops: Vec::new(),
            info: Default::default(),
            end: ClientReply::SpecCommitted {
                local_commit_ts: Timestamp(3),
            },
        };
        txns.observe(&reply(1, ClientReply::Executed(Box::new(execution))));
        assert_eq!(
            txns.admit(&request(2, ClientOp::AwaitOutcome { txn })),
            Ok(())
        );
        txns.observe(&reply(
            2,
            ClientReply::Committed {
                commit_ts: Timestamp(4),
            },
        ));
        assert!(txns.open.is_empty());
    }

    #[test]
    fn open_transactions_per_connection_are_bounded_by_forgetting_the_oldest() {
        let mut txns = OpenTxns::default();
        let begun = |seq: u64| {
            reply(
                seq,
                ClientReply::Begun {
                    txn: TxnId::new(NodeId(0), seq),
                    snapshot: Timestamp(1),
                },
            )
        };
        for seq in 0..=MAX_OPEN_TXNS as u64 {
            txns.observe(&begun(seq));
        }
        assert_eq!(txns.open.len(), MAX_OPEN_TXNS);
        let abort = |seq: u64| ClientOp::Abort {
            txn: TxnId::new(NodeId(0), seq),
        };
        assert!(matches!(
            txns.admit(&request(9, abort(0))),
            Err(RequestError::UnknownTransaction(_))
        ));
        assert_eq!(
            txns.admit(&request(10, abort(MAX_OPEN_TXNS as u64))),
            Ok(())
        );
    }
}
