//! Frames: a length prefix, then a postcard-encoded envelope carrying the wire version and a body.

use super::handshake::ClusterIdentity;
use super::limits::{FrameCodec, HELLO_FRAME_LEN};
use augur_types::{ClientId, ClientRequest, ClientResponse, NodeId};
use bytes::{BufMut, Bytes, BytesMut};
use futures::SinkExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io;
use tokio::io::{AsyncRead, AsyncWrite, ReadHalf, WriteHalf};
use tokio_util::codec::{Decoder, FramedRead, FramedWrite, LengthDelimitedCodec};

/// The version of the envelope this build speaks. Frames of any other version are refused.
pub const WIRE_VERSION: u16 = 7;

/// The largest frame (length prefix excluded) accepted or sent: 16 MiB.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// What every frame carries: the wire version, then the body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope<M> {
    pub version: u16,
    pub body: Body<M>,
}

/// The body of a frame. `M` is the protocol's peer message type; client frames do not depend on
/// it. The order of the variants is part of the wire format (postcard encodes the index).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Body<M> {
    /// First frame of a peer connection: who is dialling, and the cluster configuration it runs.
    Hello {
        from: NodeId,
        cluster: ClusterIdentity,
    },
    /// A protocol message from node `from` (which must be the node that said Hello).
    Peer { from: NodeId, msg: M },
    /// A client request, on a connection the node welcomed. The node ignores the `client` it
    /// carries and uses the id it assigned the connection.
    Request(ClientRequest),
    /// A node's answer to a request received on the same connection.
    Response(ClientResponse),
    /// First frame of a client connection: the cluster the client means to reach (its id and
    /// the fingerprint of its configuration) and the client token, if the cluster requires one.
    ClientHello {
        cluster_id: String,
        fingerprint: String,
        token: Option<String>,
    },
    /// A node's answer to a peer's Hello: go ahead.
    Accepted,
    /// A node's answer to a ClientHello: go ahead, as this client.
    Welcome { client: ClientId },
    /// A node's answer to a hello it refuses, with the reason; the node then closes the
    /// connection.
    Refused(String),
    /// On a peer connection: the dialling node is alive (sent every quarter of the peer
    /// timeout), and the accepting node's echo of it.
    Heartbeat,
}

impl<M> Body<M> {
    /// A short name for log messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Hello { .. } => "hello",
            Body::Peer { .. } => "peer",
            Body::Request(_) => "request",
            Body::Response(_) => "response",
            Body::ClientHello { .. } => "client hello",
            Body::Accepted => "accepted",
            Body::Welcome { .. } => "welcome",
            Body::Refused(_) => "refused",
            Body::Heartbeat => "heartbeat",
        }
    }
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("wire version {found}, expected {expected}", expected = WIRE_VERSION)]
    Version { found: u16 },
    #[error("undecodable frame: {0}")]
    Decode(#[from] postcard::Error),
    #[error("{0} trailing bytes after the envelope")]
    Trailing(usize),
    #[error("frame of {0} bytes exceeds the limit of {limit} bytes", limit = MAX_FRAME_LEN)]
    TooLarge(usize),
}

/// The envelope as it is encoded, borrowing the body.
#[derive(Serialize)]
struct EnvelopeRef<'a, M> {
    version: u16,
    body: &'a Body<M>,
}

/// postcard's output appended to a buffer.
struct Append<'a>(&'a mut BytesMut);

impl postcard::ser_flavors::Flavor for Append<'_> {
    type Output = ();

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        self.0.put_u8(byte);
        Ok(())
    }

    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// Append the envelope of `body` (current version) to `buf`: the frame without its length
/// prefix. On an error, `buf` may hold part of it.
fn encode_into<M: Serialize>(buf: &mut BytesMut, body: &Body<M>) -> Result<(), FrameError> {
    let envelope = EnvelopeRef {
        version: WIRE_VERSION,
        body,
    };
    postcard::serialize_with_flavor(&envelope, Append(buf))?;
    Ok(())
}

/// Encode `body` in an envelope of the current version (without the length prefix).
pub fn encode_frame<M: Serialize>(body: &Body<M>) -> Result<Bytes, FrameError> {
    let mut buf = BytesMut::new();
    encode_into(&mut buf, body)?;
    if buf.len() > MAX_FRAME_LEN {
        return Err(FrameError::TooLarge(buf.len()));
    }
    Ok(buf.freeze())
}

/// Append `body` to `buf` as a whole frame, length prefix included, as the codec would write
/// it, but encoded in place: no allocation and no copy of its own. A body that cannot be
/// encoded, or whose frame would exceed [`MAX_FRAME_LEN`], leaves `buf` as it was.
pub(super) fn append_frame<M: Serialize>(
    buf: &mut BytesMut,
    body: &Body<M>,
) -> Result<(), FrameError> {
    let start = buf.len();
    buf.put_u32(0);
    let len = encode_into(buf, body).and_then(|()| match buf.len() - start - 4 {
        len if len > MAX_FRAME_LEN => Err(FrameError::TooLarge(len)),
        len => Ok(len),
    });
    match len {
        Ok(len) => {
            // Fits in the 4 bytes: at most MAX_FRAME_LEN.
            buf[start..start + 4].copy_from_slice(&(len as u32).to_be_bytes());
            Ok(())
        }
        Err(e) => {
            buf.truncate(start);
            Err(e)
        }
    }
}

/// Decode one frame (without its length prefix): the version first, then the body, which must
/// use up the frame exactly.
pub fn decode_frame<M: DeserializeOwned>(frame: &[u8]) -> Result<Body<M>, FrameError> {
    let (version, rest) = postcard::take_from_bytes::<u16>(frame)?;
    if version != WIRE_VERSION {
        return Err(FrameError::Version { found: version });
    }
    let (body, rest) = postcard::take_from_bytes::<Body<M>>(rest)?;
    if !rest.is_empty() {
        return Err(FrameError::Trailing(rest.len()));
    }
    Ok(body)
}

/// The length-delimited framing used on every connection.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(MAX_FRAME_LEN)
        .new_codec()
}

/// Flush a frame sink (the item type has to be named for the sink to be found).
pub(super) async fn flush(out: &mut FrameWriter) -> io::Result<()> {
    SinkExt::<Bytes>::flush(out).await
}

/// Before appending a frame to `out`'s buffer ([`append_frame`]): flush it if it has reached
/// the writer's back-pressure boundary, as the sink does before it buffers a frame, so that
/// the buffer stays bounded however many frames a batch holds.
pub(super) async fn make_room(out: &mut FrameWriter) -> io::Result<()> {
    if out.write_buffer().len() >= out.backpressure_boundary() {
        flush(out).await?;
    }
    Ok(())
}

/// A connection's byte stream: plain TCP or TLS over it.
pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}
pub(super) type Conn = Box<dyn Io>;

/// The reading and writing halves of a connection, as frames.
pub(super) type FrameReader = FramedRead<ReadHalf<Conn>, LengthDelimitedCodec>;
pub(super) type FrameWriter = FramedWrite<WriteHalf<Conn>, LengthDelimitedCodec>;
/// The reading half of a connection a node accepted: its frame size limit starts at
/// [`HELLO_FRAME_LEN`] and is raised once the hello is accepted, and it notes when a frame
/// began to arrive ([`FrameCodec`]).
pub(super) type InboundReader = FramedRead<ReadHalf<Conn>, FrameCodec>;

/// A connection this process dialled, as frames.
pub(super) fn framed(conn: Conn) -> (FrameReader, FrameWriter) {
    let (input, output) = tokio::io::split(conn);
    (
        FramedRead::new(input, codec()),
        FramedWrite::new(output, codec()),
    )
}

/// A connection a node accepted, as frames.
pub(super) fn framed_inbound(conn: Conn) -> (InboundReader, FrameWriter) {
    let (input, output) = tokio::io::split(conn);
    (
        FramedRead::new(input, FrameCodec::new(HELLO_FRAME_LEN)),
        FramedWrite::new(output, codec()),
    )
}

/// Send one frame and flush it (with any frames appended before it).
pub(super) async fn send_body<M: Serialize>(
    out: &mut FrameWriter,
    body: &Body<M>,
) -> io::Result<()> {
    make_room(out).await?;
    append_frame(out.write_buffer_mut(), body).map_err(io::Error::other)?;
    flush(out).await
}

/// Read the next frame within `deadline` and decode it. `Err` says why there is none.
pub(super) async fn next_body<M, D>(
    input: &mut FramedRead<ReadHalf<Conn>, D>,
    deadline: std::time::Duration,
) -> Result<Body<M>, String>
where
    M: DeserializeOwned,
    D: Decoder<Item = BytesMut, Error = io::Error>,
{
    use futures::StreamExt;
    match tokio::time::timeout(deadline, input.next()).await {
        Err(_) => Err(format!("nothing received within {deadline:?}")),
        Ok(None) => Err("connection closed".into()),
        Ok(Some(Err(e))) => Err(e.to_string()),
        Ok(Some(Ok(frame))) => decode_frame(&frame).map_err(|e| e.to_string()),
    }
}
