//! The node side of client connections: requests in, responses out, and routing each client's
//! replies to the connection it currently uses.

use super::wire::flush;
use super::{Body, Shared, codec, decode_frame, encode_frame};
use crate::Protocol;
use crate::inbound::check_request;
use crate::local::{Input, ReplySender};
use augur_types::RequestError;
use augur_types::{ClientId, ClientReply, ClientRequest, ClientResponse};
use futures::{SinkExt, StreamExt};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};
use tracing::debug;

pub(super) async fn serve_client<P: Protocol>(
    mut frames: FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
    output: OwnedWriteHalf,
    first: ClientRequest,
    conn: u64,
    shared: &Shared<P>,
) -> Result<(), String> {
    let mut out = FramedWrite::new(output, codec());
    let (reply_tx, mut replies) = mpsc::unbounded_channel::<ClientResponse>();
    // The reply sender handed to the node for each client id seen on this connection.
    let mut senders: FxHashMap<ClientId, ReplySender> = FxHashMap::default();
    let mut pending = Some(first);
    loop {
        if let Some(request) = pending.take() {
            if let Err(e) = check_request(&request.op) {
                let response = ClientResponse {
                    id: request.id,
                    reply: ClientReply::Rejected(RequestError::Invalid(e.to_string())),
                };
                let _ = reply_tx.send(response);
                continue;
            }
            let sender = senders
                .entry(request.client)
                .or_insert_with(|| shared.router.register(request.client, conn, &reply_tx))
                .clone();
            if shared.inbox.send(Input::Client(request, sender)).is_err() {
                return Ok(()); // the node stopped
            }
        }
        tokio::select! {
            frame = frames.next() => {
                let Some(frame) = frame else { return Ok(()) };
                let frame = frame.map_err(|e| e.to_string())?;
                match decode_frame::<P::Msg>(&frame).map_err(|e| e.to_string())? {
                    Body::Request(request) => pending = Some(request),
                    other => return Err(format!("{} frame on a client connection", other.kind())),
                }
            }
            Some(response) = replies.recv() => {
                let mut batch = vec![response];
                while let Ok(more) = replies.try_recv() {
                    batch.push(more);
                }
                for response in batch {
                    let frame = encode_frame(&Body::<()>::Response(response))
                        .map_err(|e| format!("cannot encode a response: {e}"))?;
                    out.feed(frame).await.map_err(|e| e.to_string())?;
                }
                flush(&mut out).await.map_err(|e| e.to_string())?;
            }
        }
    }
}

/// Routes a node's replies to the connection each client currently uses.
///
/// The node loop remembers one reply sender per client id for good, while a client may reconnect
/// with the same id. So the node is handed, per client id, the sender of a small forwarding task
/// that looks up the client's latest connection for each reply.
#[derive(Default)]
pub(super) struct ClientRouter {
    routes: Mutex<FxHashMap<ClientId, Route>>,
}

struct Route {
    forward: ReplySender,
    current: ReplySender,
}

impl ClientRouter {
    /// Make connection `conn` (whose replies go to `out`) the one serving `client`, and return
    /// the sender to hand the node with the client's requests.
    fn register(self: &Arc<Self>, client: ClientId, conn: u64, out: &ReplySender) -> ReplySender {
        let mut routes = self.routes.lock().expect("router lock");
        if let Some(route) = routes.get_mut(&client) {
            debug!(client = client.0, conn, "client moved to a new connection");
            route.current = out.clone();
            return route.forward.clone();
        }
        let (forward, mut rx) = mpsc::unbounded_channel::<ClientResponse>();
        let router: Weak<ClientRouter> = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(response) = rx.recv().await {
                let Some(router) = router.upgrade() else {
                    return;
                };
                let current = router
                    .routes
                    .lock()
                    .expect("router lock")
                    .get(&client)
                    .map(|r| r.current.clone());
                if let Some(current) = current {
                    let _ = current.send(response);
                }
            }
        });
        routes.insert(
            client,
            Route {
                forward: forward.clone(),
                current: out.clone(),
            },
        );
        forward
    }
}
