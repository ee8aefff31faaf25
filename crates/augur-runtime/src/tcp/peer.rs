//! Peer links: one outgoing connection per peer, dialled and redialled by a writer task, and the
//! reading side of the connections peers open to this node.

use super::handshake::{ClusterIdentity, HANDSHAKE_TIMEOUT};
use super::tls::NodeTls;
use super::wire::{
    FrameReader, FrameWriter, InboundReader, append_frame, flush, framed, make_room, next_body,
    send_body,
};
use super::{Body, DEADLINE_TICK, Shared, decode_frame, dial, frame_overdue, warn_limited};
use crate::local::{Input, PeerNet};
use crate::telemetry;
use augur_contract::Protocol;
use augur_contract::inbound::{CheckMessage, Inbound};
use augur_types::NodeId;
use futures::StreamExt;
use serde::Serialize;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// How many messages may wait for one peer's connection (queued for its writer, or waiting for
/// the link to come up) before further ones are dropped.
pub const PEER_BUFFER: usize = 16 * 1024;

/// How long dialling a peer may take before the attempt counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// First and longest wait before redialling a peer that could not be reached.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Messages for one peer, each with the time it may be written (emulated latency).
pub(super) type Batch<M> = Vec<(Instant, M)>;

/// One outgoing link: the queue to its writer task and the delay to emulate.
pub(super) struct Link<M> {
    /// Batches of messages for the writer: one per flush of the node loop, so that the writer
    /// is woken once and writes (and flushes) a whole burst at once.
    pub(super) tx: mpsc::UnboundedSender<Batch<M>>,
    /// Messages in `tx` that the writer has not taken yet: at most [`PEER_BUFFER`].
    pub(super) queued: Arc<AtomicUsize>,
    pub(super) delay: Duration,
    /// Messages dropped because the queue was full; reported by the writer.
    pub(super) dropped: Arc<AtomicU64>,
}

/// The network of a TCP node: its own inbox for messages to itself, a writer per peer otherwise.
pub(super) struct TcpNet<P: Protocol> {
    pub(super) me: NodeId,
    pub(super) inbox: mpsc::UnboundedSender<Input<P>>,
    /// Indexed by node id; `None` for this node and for nodes without an address.
    pub(super) links: Vec<Option<Link<P::Msg>>>,
    /// Indexed by node id: messages sent since the last [`PeerNet::flush`]. Only the node loop
    /// touches it, so the lock is never contended.
    pub(super) pending: Mutex<Vec<Batch<P::Msg>>>,
}

impl<P: Protocol> PeerNet<P::Msg> for TcpNet<P> {
    fn send(&self, from: NodeId, to: NodeId, msg: P::Msg) {
        if to == self.me {
            let _ = self.inbox.send(Input::Peer(from, msg));
            return;
        }
        match self.links.get(to.0 as usize) {
            Some(Some(link)) => {
                let at = Instant::now() + link.delay;
                self.pending.lock().expect("pending lock")[to.0 as usize].push((at, msg));
            }
            _ => debug!(node = %from, "dropping a message for {to}, which has no address"),
        }
    }

    fn flush(&self) {
        let mut pending = self.pending.lock().expect("pending lock");
        for (batch, link) in pending.iter_mut().zip(&self.links) {
            let Some(link) = link else { continue };
            if batch.is_empty() {
                continue;
            }
            // The writer only ever lowers `queued`, so the room seen here is the least there is.
            let room = PEER_BUFFER.saturating_sub(link.queued.load(Ordering::Acquire));
            if batch.len() > room {
                let over = batch.len() - room;
                batch.truncate(room);
                link.dropped.fetch_add(over as u64, Ordering::Relaxed);
                if room == 0 {
                    continue;
                }
            }
            link.queued.fetch_add(batch.len(), Ordering::AcqRel);
            // The capacity goes with the batch; the next burst starts a new one.
            let _ = link.tx.send(std::mem::take(batch));
        }
    }
}

/// What a node needs to dial its peers: its TLS side (or none, on a plaintext cluster) and the
/// identity it introduces itself with.
pub(super) struct Dialler {
    pub(super) me: NodeId,
    /// How long a peer may stay silent before its link is given up ([`super::Limits::peer_timeout`]).
    pub(super) peer_timeout: Duration,
    pub(super) tls: Option<Arc<NodeTls>>,
    pub(super) identity: ClusterIdentity,
}

/// An outgoing connection to a peer. After accepting the hello the peer writes on it only to
/// echo heartbeats, or to say why it is closing it.
struct PeerConn {
    out: FrameWriter,
    input: FrameReader,
    /// When the peer last echoed a heartbeat (or accepted the hello).
    last_heard: Instant,
}

impl PeerConn {
    /// Dial peer `to` at `addr`, introduce this node and wait to be accepted. `Err` says why
    /// not, in words (the peer's own reason when it refused).
    async fn connect(dialler: &Dialler, to: NodeId, addr: SocketAddr) -> Result<PeerConn, String> {
        let tls = dialler
            .tls
            .as_ref()
            .map(|tls| (&tls.connector, tls.server_name(to)));
        let conn = dial(addr, tls, CONNECT_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let (mut input, mut out) = framed(conn);
        let hello = Body::<()>::Hello {
            from: dialler.me,
            cluster: dialler.identity.clone(),
        };
        send_body(&mut out, &hello)
            .await
            .map_err(|e| e.to_string())?;
        match next_body::<(), _>(&mut input, HANDSHAKE_TIMEOUT).await? {
            Body::Accepted => Ok(PeerConn {
                out,
                input,
                last_heard: Instant::now(),
            }),
            Body::Refused(why) => Err(format!("refused: {why}")),
            other => Err(format!("answered the hello with a {} frame", other.kind())),
        }
    }

    /// Read what the peer writes back: heartbeat echoes (noted in `last_heard`), or why the
    /// link is over (the peer closed it, said why, or broke the protocol).
    async fn hear(&mut self) -> Result<(), String> {
        match self.input.next().await {
            None => Err("closed by the peer".to_string()),
            Some(Err(e)) => Err(e.to_string()),
            Some(Ok(frame)) => match decode_frame::<()>(&frame) {
                Ok(Body::Heartbeat) => {
                    self.last_heard = Instant::now();
                    Ok(())
                }
                Ok(Body::Refused(why)) => Err(format!("closed by the peer: {why}")),
                _ => Err("the peer wrote something other than a heartbeat".to_string()),
            },
        }
    }

    async fn heartbeat(&mut self) -> io::Result<()> {
        send_body(&mut self.out, &Body::<()>::Heartbeat).await
    }

    /// Write `batch`'s messages from node `me`, each once its time has come, encoded straight
    /// into the connection's buffer, and flush once at the end (a single write for the whole
    /// batch when nothing is delayed) unless `more` batches are about to follow. A message that
    /// cannot be encoded is dropped alone. `Err` says why the link is over, with how many of
    /// the batch's messages were not written.
    async fn send_batch<M: Serialize>(
        &mut self,
        me: NodeId,
        batch: Batch<M>,
        more: bool,
    ) -> Result<(), (String, usize)> {
        let total = batch.len();
        for (sent, (at, msg)) in batch.into_iter().enumerate() {
            let lost = |e: io::Error| (e.to_string(), total - sent);
            if at > Instant::now() {
                flush(&mut self.out).await.map_err(lost)?;
                tokio::time::sleep_until(at.into()).await;
            }
            make_room(&mut self.out).await.map_err(lost)?;
            if let Err(e) = append_frame(self.out.write_buffer_mut(), &Body::Peer { from: me, msg })
            {
                warn!(node = %me, "dropping a message that cannot be sent: {e}");
            }
        }
        if !more {
            flush(&mut self.out).await.map_err(|e| (e.to_string(), 0))?;
        }
        Ok(())
    }
}

/// Keep the link to peer `to` up and carry the messages queued for it: dial at once and after
/// every failure (with backoff), send a heartbeat every quarter of the peer timeout, and give
/// the link up (and dial again) when the peer has not echoed one for a whole timeout, so that a
/// dead, stalled or partitioned peer is noticed within about [`Dialler::peer_timeout`] and the
/// link is back within about as long once the peer is reachable again.
///
/// Messages for the peer while the link is down wait for it, in order, for up to the peer
/// timeout, and the writer dials every [`MIN_BACKOFF`] while any are waiting; only messages
/// that have waited longer are dropped (and counted). Nodes start in any order and a link is
/// dialled only once its node runs, so every link starts down: dropping what was sent before
/// it came up lost the first transactions' messages whenever a node started serving its
/// clients before its links were up, and each such transaction then hung until its protocol's
/// timeout (`participant_timeout`, seconds) though every node was up. Waiting is bounded so
/// that a peer that is really gone costs no more than before: its messages are dropped once
/// they are as old as a link would have been kept without hearing from it.
pub(super) async fn peer_writer<M: Serialize + Send + 'static>(
    dialler: Arc<Dialler>,
    to: NodeId,
    addr: SocketAddr,
    mut rx: mpsc::UnboundedReceiver<Batch<M>>,
    queued: Arc<AtomicUsize>,
    dropped: Arc<AtomicU64>,
) {
    let me = dialler.me;
    let patience = dialler.peer_timeout;
    telemetry::peer_link(to, false);
    let mut conn: Option<PeerConn> = None;
    let mut retry_at = Instant::now();
    let mut backoff = MIN_BACKOFF;
    let mut failures = 0u32;
    let mut ever_connected = false;
    let mut last_failure: Option<String> = None;
    let mut last_attempt: Option<Instant> = None;
    // Batches taken off the queue while the link was down, each with when it was taken.
    let mut waiting: VecDeque<(Instant, Batch<M>)> = VecDeque::new();
    // A batch leaves `queued` once it is written or dropped, so that waiting batches still
    // count against PEER_BUFFER.
    let done = |n: usize| queued.fetch_sub(n, Ordering::AcqRel);
    let mut tick = tokio::time::interval(dialler.peer_timeout / 4);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Messages that waited too long for the link are given up.
        while let Some((since, batch)) = waiting.front()
            && since.elapsed() > patience
        {
            let n = batch.len();
            waiting.pop_front();
            done(n);
            dropped.fetch_add(n as u64, Ordering::Relaxed);
        }
        if conn.is_none() && Instant::now() >= next_dial(retry_at, last_attempt, &waiting) {
            last_attempt = Some(Instant::now());
            match PeerConn::connect(&dialler, to, addr).await {
                Ok(c) => {
                    let lost = dropped.swap(0, Ordering::Relaxed);
                    telemetry::peer_link(to, true);
                    telemetry::peer_messages_dropped(to, lost);
                    if failures > 0 || lost > 0 {
                        info!(node = %me, peer = %to, %addr, "connected to peer after {failures} failed attempts; {lost} messages for it were dropped");
                    } else {
                        debug!(node = %me, peer = %to, %addr, "connected to peer");
                    }
                    conn = Some(c);
                    ever_connected = true;
                    last_failure = None;
                    failures = 0;
                    backoff = MIN_BACKOFF;
                }
                Err(e) => {
                    // Each new reason is told once; the same reason again only in debug.
                    let new_reason = last_failure.as_deref() != Some(e.as_str());
                    if new_reason && (ever_connected || e.starts_with("refused")) {
                        warn!(node = %me, peer = %to, %addr, "cannot reach peer, its messages wait up to {patience:?} for it and are then dropped: {e}");
                    } else if new_reason {
                        // Peers start in any order: not yet reachable is no news.
                        info!(node = %me, peer = %to, %addr, "peer not reachable yet: {e}");
                    } else {
                        debug!(node = %me, peer = %to, %addr, "cannot reach peer: {e}");
                    }
                    last_failure = Some(e);
                    failures += 1;
                    retry_at = Instant::now() + backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        let lost = |why: String, conn: &mut Option<PeerConn>| {
            warn!(node = %me, peer = %to, %addr, "link to peer lost: {why}");
            telemetry::peer_link(to, false);
            *conn = None;
        };
        // The link is up: what waited for it goes first, in the order it was sent.
        while let Some(c) = conn.as_mut()
            && let Some((_, batch)) = waiting.pop_front()
        {
            let n = batch.len();
            let more = !waiting.is_empty() || !rx.is_empty();
            let sent = c.send_batch(me, batch, more).await;
            done(n);
            if let Err((e, unsent)) = sent {
                dropped.fetch_add(unsent as u64, Ordering::Relaxed);
                lost(e, &mut conn);
            }
        }
        match conn.as_mut() {
            None => {
                let wake = next_dial(retry_at, last_attempt, &waiting);
                tokio::select! {
                    next = rx.recv() => match next {
                        None => return,
                        Some(batch) => waiting.push_back((Instant::now(), batch)),
                    },
                    _ = tokio::time::sleep_until(wake.into()) => {}
                }
            }
            Some(c) => tokio::select! {
                next = rx.recv() => {
                    let Some(batch) = next else { return };
                    let n = batch.len();
                    let sent = c.send_batch(me, batch, !rx.is_empty()).await;
                    done(n);
                    if let Err((e, unsent)) = sent {
                        dropped.fetch_add(unsent as u64, Ordering::Relaxed);
                        lost(e, &mut conn);
                    }
                }
                heard = c.hear() => {
                    if let Err(why) = heard {
                        lost(why, &mut conn);
                    }
                }
                _ = tick.tick() => {
                    let silent = c.last_heard.elapsed();
                    if silent > dialler.peer_timeout {
                        lost(format!("no heartbeat for {silent:.1?} (the peer is dead, stalled or cut off)"), &mut conn);
                    } else if let Err(e) = c.heartbeat().await {
                        lost(e.to_string(), &mut conn);
                    }
                }
            },
        }
    }
}

/// When a writer whose link is down dials next: at the end of the backoff (`retry_at`), or
/// sooner while messages are waiting for the link, though not more often than every
/// [`MIN_BACKOFF`].
fn next_dial<T>(
    retry_at: Instant,
    last_attempt: Option<Instant>,
    waiting: &VecDeque<T>,
) -> Instant {
    match last_attempt {
        Some(at) if !waiting.is_empty() => retry_at.min(at + MIN_BACKOFF),
        _ => retry_at,
    }
}

/// Take peer `from`'s messages off its connection, check them and hand them to the node; echo
/// its heartbeats on `out`. A peer silent for longer than the peer timeout (it sends a
/// heartbeat every quarter of it) is given up.
pub(super) async fn serve_peer<P: Protocol>(
    mut frames: InboundReader,
    mut out: FrameWriter,
    from: NodeId,
    shared: &Shared<P>,
) -> Result<(), String> {
    let mut last_heard = Instant::now();
    // Deadlines are looked at on a tick rather than with a timer per frame: a busy link
    // carries thousands of frames a second.
    let mut tick = tokio::time::interval(DEADLINE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let frame = tokio::select! {
            frame = frames.next() => match frame {
                None => break,
                Some(frame) => frame.map_err(|e| format!("from peer {from}: {e}"))?,
            },
            _ = tick.tick() => {
                frame_overdue(&frames, &shared.limits).map_err(|e| format!("peer {from}: {e}"))?;
                let silent = last_heard.elapsed();
                if silent > shared.limits.peer_timeout {
                    return Err(format!(
                        "peer {from} silent for {silent:.1?} (dead, stalled or cut off)"
                    ));
                }
                continue;
            }
        };
        last_heard = Instant::now();
        match decode_frame::<P::Msg>(&frame).map_err(|e| format!("from peer {from}: {e}"))? {
            Body::Peer { from: sender, msg } if sender == from => {
                let inbound = Inbound {
                    me: shared.me,
                    from,
                    placement: &shared.placement,
                };
                if let Err(e) = msg.check(&inbound) {
                    warn_limited!(
                        shared.warnings.bad_message,
                        node = %shared.me,
                        peer = %from,
                        "dropping a message that fails its check: {e}"
                    );
                    continue;
                }
                if shared.inbox.send(Input::Peer(from, msg)).is_err() {
                    return Ok(()); // the node stopped
                }
            }
            Body::Heartbeat => {
                send_body(&mut out, &Body::<()>::Heartbeat)
                    .await
                    .map_err(|e| format!("echoing peer {from}'s heartbeat: {e}"))?;
            }
            Body::Peer { from: sender, .. } => {
                return Err(format!("peer {from} sent a message as {sender}"));
            }
            other => return Err(format!("{} frame from peer {from}", other.kind())),
        }
    }
    debug!(node = %shared.me, peer = %from, "peer disconnected");
    Ok(())
}
