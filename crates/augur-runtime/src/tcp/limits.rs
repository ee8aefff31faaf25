//! What bounds a node's resources against its connections: frame sizes, how long a frame may
//! take to arrive, how many connections may be handshaking or open as clients, how long a
//! client may sit idle, how many requests one client may have in flight; and warnings that do
//! not flood the log.
//!
//! The worst case these leave is every client slot holding a frame of the largest size half
//! sent for [`Limits::frame_timeout`]: `max_clients × max_frame_len` bytes of buffers (4 GiB
//! with the defaults, for an attacker that holds 1024 connections; a cluster with a client
//! token admits no such client, and a smaller `max_frame_len` or `max_clients` shrinks it).

use bytes::BytesMut;
use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_util::codec::{Decoder, LengthDelimitedCodec};

/// The largest frame accepted before a connection's hello was accepted: hellos are small, and a
/// stranger should not make the node buffer megabytes.
pub const HELLO_FRAME_LEN: usize = 64 * 1024;

/// A node's resource limits. Every one has a default that suits a node with a few GiB of
/// memory; cluster files may change them (`[limits]`, docs/cluster-config.md).
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// The largest frame a client may send once welcomed (peers may send up to
    /// [`MAX_FRAME_LEN`](super::MAX_FRAME_LEN)).
    pub max_frame_len: usize,
    /// Once a frame's first bytes have arrived, the rest must arrive within this.
    pub frame_timeout: Duration,
    /// How many connections may be between accept and an accepted hello at once; more are
    /// closed at once.
    pub max_handshakes: usize,
    /// How many client connections may be open at once; more are refused at their hello.
    pub max_clients: usize,
    /// A client connection with no request and no reply for this long is closed.
    pub client_idle_timeout: Duration,
    /// How many requests one client may have in flight; beyond, the node stops reading its
    /// connection until replies go out (back-pressure through TCP).
    pub max_requests_in_flight: usize,
    /// A peer link that carries nothing, not even a heartbeat (sent every quarter of this), for
    /// this long is given up and dialled again: how fast a dead, stalled or partitioned peer
    /// is noticed, and about how fast a link comes back once it is reachable.
    pub peer_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_len: 4 * 1024 * 1024,
            frame_timeout: Duration::from_secs(10),
            max_handshakes: 256,
            max_clients: 1024,
            client_idle_timeout: Duration::from_secs(300),
            max_requests_in_flight: 64,
            peer_timeout: Duration::from_secs(1),
        }
    }
}

/// The frame codec of a node's inbound connections: length-delimited frames with a size limit
/// that can be raised after the hello, noting when a frame began to arrive, so that
/// [`Limits::frame_timeout`] can be enforced.
pub(super) struct FrameCodec {
    inner: LengthDelimitedCodec,
    /// When the bytes of the frame now being read began to arrive; `None` between frames.
    started: Option<Instant>,
}

impl FrameCodec {
    pub(super) fn new(max_frame_len: usize) -> FrameCodec {
        let mut inner = super::codec();
        inner.set_max_frame_length(max_frame_len);
        FrameCodec {
            inner,
            started: None,
        }
    }

    pub(super) fn set_max_frame_len(&mut self, len: usize) {
        self.inner.set_max_frame_length(len);
    }

    /// How long the frame now arriving has been arriving, if one is.
    pub(super) fn arriving_for(&self) -> Option<Duration> {
        self.started.map(|at| at.elapsed())
    }
}

impl Decoder for FrameCodec {
    type Item = BytesMut;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<BytesMut>> {
        let frame = self.inner.decode(src)?;
        self.started = match (&frame, src.is_empty()) {
            // Nothing of a next frame yet.
            (_, true) => None,
            // Bytes of a next frame are buffered: it started now, unless it had already.
            (Some(_), false) => Some(Instant::now()),
            (None, false) => Some(self.started.unwrap_or_else(Instant::now)),
        };
        Ok(frame)
    }
}

/// A warning that is logged at most once per [`RateLimitedWarning::PERIOD`], saying how many
/// were suppressed since: a peer or client misbehaving in a loop must not flood the log.
pub struct RateLimitedWarning {
    state: Mutex<(Option<Instant>, u64)>,
}

impl Default for RateLimitedWarning {
    fn default() -> Self {
        RateLimitedWarning {
            state: Mutex::new((None, 0)),
        }
    }
}

impl RateLimitedWarning {
    pub const PERIOD: Duration = Duration::from_secs(10);

    /// Whether to log now; `Some(n)` with the number of warnings suppressed since the last one.
    pub fn allow(&self) -> Option<u64> {
        let mut state = self.state.lock().expect("warning lock");
        let now = Instant::now();
        match state.0 {
            Some(last) if now.duration_since(last) < Self::PERIOD => {
                state.1 += 1;
                None
            }
            _ => {
                let suppressed = state.1;
                *state = (Some(now), 0);
                Some(suppressed)
            }
        }
    }
}

/// Log a warning through `limiter`, with how many like it were suppressed.
macro_rules! warn_limited {
    ($limiter:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $limiter.allow() {
            if suppressed > 0 {
                tracing::warn!(suppressed, $($arg)+);
            } else {
                tracing::warn!($($arg)+);
            }
        }
    };
}
pub(super) use warn_limited;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codec_notes_when_a_frame_began_to_arrive() {
        let mut codec = FrameCodec::new(1024);
        let mut buf = BytesMut::new();
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        assert!(codec.arriving_for().is_none());
        buf.extend_from_slice(&[0, 0, 0, 4, 1, 2]);
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        assert!(codec.arriving_for().is_some(), "half a frame is arriving");
        buf.extend_from_slice(&[3, 4]);
        assert_eq!(&codec.decode(&mut buf).unwrap().unwrap()[..], [1, 2, 3, 4]);
        assert!(codec.arriving_for().is_none());
        // Above the limit: an error, before the body is buffered.
        buf.extend_from_slice(&[0, 0, 8, 0]);
        assert!(codec.decode(&mut buf).is_err());
    }

    #[test]
    fn warnings_are_limited_and_count_what_they_suppress() {
        let warning = RateLimitedWarning::default();
        assert_eq!(warning.allow(), Some(0));
        assert_eq!(warning.allow(), None);
        assert_eq!(warning.allow(), None);
        warning.state.lock().unwrap().0 = Some(Instant::now() - RateLimitedWarning::PERIOD);
        assert_eq!(warning.allow(), Some(2));
    }
}
