//! The write-ahead log: how a node's protocol state survives a crash.
//!
//! A handler asks for records to be made durable with [`Ctx::persist`](augur_contract::Ctx::persist).
//! The runtime appends them to the node's log and holds back everything the handler sent or
//! replied — and everything any later handler sends — until the log is durable up to them. So a
//! message or reply never reveals state that a crash could take back, and a protocol rebuilds
//! itself on restart from its records alone ([`augur_contract::Protocol::recover`]).
//!
//! # Layout
//!
//! A log is a sequence of *frames*: a 4-byte little-endian payload length, the CRC-32 of the
//! payload (4 bytes, little-endian), and the payload, a postcard-encoded record. In a data
//! directory it lives in numbered files:
//!
//! * `checkpoint-N.ckpt`: records that rebuild the node's whole durable state as it was when
//!   checkpoint `N` was taken ([`augur_contract::Protocol::checkpoint`]). Written to a temporary file,
//!   synced, then renamed, so a checkpoint file is either complete or absent.
//! * `segment-N.wal`: the records appended after checkpoint `N` (segment 0 follows the empty
//!   state).
//!
//! Every file starts with a header frame naming the format, the protocol, the node and the
//! file's number, so a data directory of another protocol or node is refused rather than
//! misread. Recovery replays the newest checkpoint and then its segment. A frame whose length
//! runs past the end of the last segment or whose checksum fails is a torn or corrupt tail: it
//! and everything after it are cut (the file is truncated, and the cut is logged), never
//! replayed. Damage anywhere else — in a checkpoint, or in a header — stops the node with an
//! error naming the file.
//!
//! # Group commit and fsync policy
//!
//! Appends go to a writer thread, which writes whatever has accumulated in one `write` and
//! covers it with one `fdatasync`, so every handler that finished while the previous sync ran
//! shares the next one. [`LogPolicy`] says when the writer syncs: after every write (`always`,
//! the default of `augur node`), at most every so many milliseconds (`batch`), or never (`off`:
//! the operating system writes the pages back when it likes; a killed process loses nothing, a
//! power cut loses the unsynced tail). With `off` nothing waits for the disk.
//!
//! # Checkpoints
//!
//! Once the records appended since the last checkpoint outweigh both a floor
//! ([`LogConfig::checkpoint_min_bytes`]) and twice the last checkpoint, the node writes a new
//! checkpoint and starts a new segment; the older files are then deleted. The log therefore
//! stays within a small multiple of the state it describes, and the cost of checkpointing is
//! amortised over at least as many appended bytes as the checkpoint holds. A checkpoint is
//! taken between two handlers and stops the node while it is encoded; an incremental one is
//! future work.
//!
//! # Why a log of our own
//!
//! The log needs exactly three things: append, a sync whose completion releases held messages,
//! and a replay in order. An embedded key-value engine (`fjall`, `redb`, `sled`) would bring its
//! own write-ahead log and compaction under ours, hide the moment a write becomes durable behind
//! its own batching, and still need our records to rebuild the protocol's in-memory state. A
//! few hundred lines over `std::fs` keep the durability point visible and testable.

use augur_contract::{NodeEnv, Protocol};
use augur_types::NodeId;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Instant;
use tokio::sync::watch;
use tracing::{info, warn};

pub use augur_contract::log_policy::{DEFAULT_BATCH, LOG_SETTING, LOG_VALUES, LogPolicy};

/// The largest frame payload accepted when reading: anything longer is taken for a torn length.
const MAX_RECORD: usize = 256 * 1024 * 1024;

/// Bytes of a frame before its payload.
const FRAME_HEADER: usize = 8;

const MAGIC: [u8; 8] = *b"augurwal";
const FORMAT: u16 = 1;

/// Where a node keeps its log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogStorage {
    /// In memory: survives nothing but lets the same code run (in-process benchmarks).
    Memory,
    /// In this data directory (created if missing).
    Dir(PathBuf),
}

/// How a node's log is kept.
#[derive(Clone, Debug)]
pub struct LogConfig {
    pub policy: LogPolicy,
    pub storage: LogStorage,
    /// Records appended since the last checkpoint must outweigh this (and twice the last
    /// checkpoint) before a new checkpoint is taken.
    pub checkpoint_min_bytes: u64,
    /// The protocol's registry name, written into every file so another protocol's directory
    /// is refused.
    pub protocol: String,
}

impl LogConfig {
    /// The default checkpoint floor of real nodes.
    pub const CHECKPOINT_MIN_BYTES: u64 = 32 * 1024 * 1024;

    /// A log kept in memory with `policy`.
    pub fn memory(protocol: &str, policy: LogPolicy) -> LogConfig {
        LogConfig {
            policy,
            storage: LogStorage::Memory,
            checkpoint_min_bytes: Self::CHECKPOINT_MIN_BYTES,
            protocol: protocol.to_string(),
        }
    }

    /// A log in data directory `dir` with `policy`.
    pub fn dir(protocol: &str, policy: LogPolicy, dir: impl Into<PathBuf>) -> LogConfig {
        LogConfig {
            storage: LogStorage::Dir(dir.into()),
            ..LogConfig::memory(protocol, policy)
        }
    }
}

/// Why a log could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: {why}")]
    Corrupt { path: PathBuf, why: String },
    #[error(
        "{path} belongs to {found_protocol} node {found_node}, not {protocol} node {node}: use another data directory"
    )]
    Foreign {
        path: PathBuf,
        found_protocol: String,
        found_node: u32,
        protocol: String,
        node: u32,
    },
    #[error("the log writer failed: {0}")]
    Writer(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Append one frame holding `payload` to `out`.
pub fn push_frame(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Encode `record` as one frame appended to `out`.
pub fn push_record<R: Serialize>(out: &mut Vec<u8>, record: &R) {
    // Records are plain data (no maps with non-string keys, no borrowed text): postcard
    // cannot fail on them short of running out of memory.
    let payload = postcard::to_stdvec(record).expect("log records encode");
    push_frame(out, &payload);
}

/// Encode `records` as consecutive frames.
pub fn encode_records<R: Serialize>(records: &[R]) -> Vec<u8> {
    let mut frames = Vec::new();
    for record in records {
        push_record(&mut frames, record);
    }
    frames
}

/// The frames at the start of `bytes` that are whole and whose checksums hold, and the length
/// of the prefix they make up. Reading stops at the first frame that is not: the caller decides
/// whether that is a torn tail or damage.
pub fn read_frames(bytes: &[u8]) -> (Vec<&[u8]>, usize) {
    let mut frames = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= FRAME_HEADER {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        let start = at + FRAME_HEADER;
        if len > MAX_RECORD || bytes.len() - start < len {
            break;
        }
        let payload = &bytes[start..start + len];
        if crc32fast::hash(payload) != crc {
            break;
        }
        frames.push(payload);
        at = start + len;
    }
    (frames, at)
}

/// What a log file says about itself in its first frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct FileHeader {
    magic: [u8; 8],
    format: u16,
    kind: FileKind,
    protocol: String,
    node: u32,
    number: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum FileKind {
    Segment,
    Checkpoint,
}

/// Decode records from frames for [`Protocol::recover`], remembering the first failure (which
/// ends the iteration) so the caller can refuse the result.
struct RecordFrames<'a, R> {
    frames: std::vec::IntoIter<&'a [u8]>,
    failed: Option<String>,
    count: u64,
    _record: std::marker::PhantomData<R>,
}

impl<R: DeserializeOwned> Iterator for RecordFrames<'_, R> {
    type Item = R;

    fn next(&mut self) -> Option<R> {
        if self.failed.is_some() {
            return None;
        }
        let frame = self.frames.next()?;
        match postcard::from_bytes(frame) {
            Ok(record) => {
                self.count += 1;
                Some(record)
            }
            Err(e) => {
                self.failed = Some(format!("record {} does not decode: {e}", self.count + 1));
                None
            }
        }
    }
}

/// Rebuild a protocol from its durable frames, checkpoint first: the one recovery path of
/// every runtime. Returns the protocol and how many records were replayed.
pub fn rebuild<P: Protocol>(
    env: &NodeEnv,
    frames: Vec<&[u8]>,
    source: &Path,
) -> Result<(P, u64), LogError> {
    let mut records = RecordFrames::<P::Record> {
        frames: frames.into_iter(),
        failed: None,
        count: 0,
        _record: std::marker::PhantomData,
    };
    let protocol = P::recover(env, &mut records);
    // Whatever the protocol did not consume still has to decode: a log is replayed whole.
    for _ in records.by_ref() {}
    match records.failed {
        Some(why) => Err(LogError::Corrupt {
            path: source.to_path_buf(),
            why,
        }),
        None => Ok((protocol, records.count)),
    }
}

/// A log kept in memory, with the distinction between what a sync has made durable and what
/// is still pending (the simulator drops the pending part when a node crashes). Positions are
/// log sequence numbers: byte offsets in the stream of appended frames, checkpoints excluded.
#[derive(Default)]
pub struct MemoryLog {
    checkpoint: Vec<u8>,
    /// Durable frames from `durable_start` on.
    durable: Vec<u8>,
    durable_start: u64,
    /// Appended, not yet synced, from `pending_start` on.
    pending: Vec<u8>,
    pending_start: u64,
    /// A checkpoint taken at the given position, durable at the first sync that reaches it.
    pending_checkpoint: Option<(u64, Vec<u8>)>,
}

impl MemoryLog {
    /// Append encoded frames; returns the log's end position.
    pub fn append(&mut self, frames: &[u8]) -> u64 {
        self.pending.extend_from_slice(frames);
        self.end()
    }

    /// The position after the last appended frame.
    pub fn end(&self) -> u64 {
        self.pending_start + self.pending.len() as u64
    }

    /// A checkpoint of the state reached at the current end; it replaces everything before it
    /// once synced.
    pub fn checkpoint(&mut self, frames: Vec<u8>) {
        self.pending_checkpoint = Some((self.end(), frames));
    }

    /// Make everything appended before position `upto` durable (and a checkpoint taken at or
    /// before it).
    pub fn sync(&mut self, upto: u64) {
        let upto = upto.min(self.end());
        if upto > self.pending_start {
            let n = (upto - self.pending_start) as usize;
            self.durable.extend(self.pending.drain(..n));
            self.pending_start = upto;
        }
        if let Some((at, _)) = &self.pending_checkpoint
            && *at <= upto
        {
            let (at, frames) = self.pending_checkpoint.take().expect("checked");
            self.checkpoint = frames;
            let covered = (at - self.durable_start) as usize;
            self.durable.drain(..covered);
            self.durable_start = at;
        }
    }

    /// A power cut: everything not synced is gone.
    pub fn lose_pending(&mut self) {
        self.pending.clear();
        self.pending_checkpoint = None;
        self.pending_start = self.durable_start + self.durable.len() as u64;
    }

    /// The durable frames, checkpoint first.
    pub fn durable_frames(&self) -> Vec<&[u8]> {
        let (mut frames, _) = read_frames(&self.checkpoint);
        frames.extend(read_frames(&self.durable).0);
        frames
    }
}

/// When the node should take a checkpoint, and what it should know about its log's size.
#[derive(Clone, Copy, Debug)]
pub struct CheckpointSchedule {
    floor: u64,
    since: u64,
    last: u64,
}

impl CheckpointSchedule {
    pub fn new(floor: u64) -> Self {
        CheckpointSchedule {
            floor,
            since: 0,
            last: 0,
        }
    }

    /// `bytes` more were appended; whether a checkpoint is due.
    pub fn appended(&mut self, bytes: u64) -> bool {
        self.since += bytes;
        self.since > self.floor.max(2 * self.last)
    }

    /// A checkpoint of `bytes` was taken.
    pub fn taken(&mut self, bytes: u64) {
        self.since = 0;
        self.last = bytes;
    }
}

/// Encode `protocol`'s checkpoint records as frames.
pub fn encode_checkpoint<P: Protocol>(protocol: &P) -> Vec<u8> {
    let mut out = Vec::new();
    protocol.checkpoint(&mut |record| push_record(&mut out, &record));
    out
}

/// What the node loop needs to know about the log's progress.
#[derive(Clone, Debug, Default)]
struct SyncState {
    /// Everything before this position is as durable as the policy makes it.
    synced: u64,
    error: Option<Arc<str>>,
}

/// The node side of a log, in memory or in a data directory.
pub struct NodeLog {
    policy: LogPolicy,
    end: u64,
    schedule: CheckpointSchedule,
    checkpoint_due: bool,
    backend: Backend,
}

enum Backend {
    Memory(MemoryLog),
    File {
        to_writer: Option<mpsc::Sender<WriterJob>>,
        synced: watch::Receiver<SyncState>,
        writer: Option<std::thread::JoinHandle<()>>,
    },
}

enum WriterJob {
    Append(Vec<u8>, u64),
    Checkpoint(Vec<u8>),
}

/// Open (or create) the log `config` describes and rebuild node `env.id`'s protocol from it.
pub fn open<P: Protocol>(env: &NodeEnv, config: &LogConfig) -> Result<(P, NodeLog), LogError> {
    let schedule = CheckpointSchedule::new(config.checkpoint_min_bytes);
    match &config.storage {
        LogStorage::Memory => Ok((
            P::new(env),
            NodeLog {
                policy: config.policy,
                end: 0,
                schedule,
                checkpoint_due: false,
                backend: Backend::Memory(MemoryLog::default()),
            },
        )),
        LogStorage::Dir(dir) => open_dir(env, config, dir, schedule),
    }
}

fn file_name(kind: FileKind, number: u64) -> String {
    match kind {
        FileKind::Segment => format!("segment-{number:010}.wal"),
        FileKind::Checkpoint => format!("checkpoint-{number:010}.ckpt"),
    }
}

/// The numbered log files in `dir`, by kind.
fn list(dir: &Path) -> Result<(Vec<u64>, Vec<u64>), LogError> {
    let mut segments = Vec::new();
    let mut checkpoints = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let number = |prefix: &str, suffix: &str| {
            name.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(suffix))
                .and_then(|n| n.parse::<u64>().ok())
        };
        if let Some(n) = number("segment-", ".wal") {
            segments.push(n);
        } else if let Some(n) = number("checkpoint-", ".ckpt") {
            checkpoints.push(n);
        } else if name.ends_with(".tmp") {
            // A checkpoint that was being written when the node stopped: never complete.
            let _ = fs::remove_file(entry.path());
        }
    }
    segments.sort_unstable();
    checkpoints.sort_unstable();
    Ok((segments, checkpoints))
}

fn header(config: &LogConfig, node: NodeId, kind: FileKind, number: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let header = FileHeader {
        magic: MAGIC,
        format: FORMAT,
        kind,
        protocol: config.protocol.clone(),
        node: node.0,
        number,
    };
    push_record(&mut out, &header);
    out
}

fn load(path: &Path) -> Result<Vec<u8>, LogError> {
    fs::read(path).map_err(io_err(path))
}

/// Check the header of a log file's `bytes`; returns its record frames (the header's left
/// out) and the length of the valid prefix.
fn check_file<'b>(
    path: &Path,
    bytes: &'b [u8],
    config: &LogConfig,
    node: NodeId,
    kind: FileKind,
) -> Result<(Vec<&'b [u8]>, usize), LogError> {
    let corrupt = |why: String| LogError::Corrupt {
        path: path.to_path_buf(),
        why,
    };
    let (mut frames, valid) = read_frames(bytes);
    let Some(first) = frames.first() else {
        return Err(corrupt(
            "no readable header (the file is empty or damaged)".into(),
        ));
    };
    let header: FileHeader =
        postcard::from_bytes(first).map_err(|e| corrupt(format!("bad header: {e}")))?;
    if header.magic != MAGIC || header.kind != kind {
        return Err(corrupt("not an augur log file of this kind".into()));
    }
    if header.format != FORMAT {
        return Err(corrupt(format!(
            "log format {} (this build reads {FORMAT})",
            header.format
        )));
    }
    if header.protocol != config.protocol || header.node != node.0 {
        return Err(LogError::Foreign {
            path: path.to_path_buf(),
            found_protocol: header.protocol,
            found_node: header.node,
            protocol: config.protocol.clone(),
            node: node.0,
        });
    }
    frames.remove(0);
    Ok((frames, valid))
}

fn open_dir<P: Protocol>(
    env: &NodeEnv,
    config: &LogConfig,
    dir: &Path,
    mut schedule: CheckpointSchedule,
) -> Result<(P, NodeLog), LogError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let started = Instant::now();
    let (segments, checkpoints) = list(dir)?;
    let base = checkpoints.last().copied().unwrap_or(0);
    let checkpoint_path = dir.join(file_name(FileKind::Checkpoint, base));
    let checkpoint_bytes = match checkpoints.last() {
        Some(_) => load(&checkpoint_path)?,
        None => Vec::new(),
    };
    let mut frames = Vec::new();
    if checkpoints.last().is_some() {
        let path = &checkpoint_path;
        let (records, valid) = check_file(
            path,
            &checkpoint_bytes,
            config,
            env.id,
            FileKind::Checkpoint,
        )?;
        if valid != checkpoint_bytes.len() {
            return Err(LogError::Corrupt {
                path: checkpoint_path,
                why: format!(
                    "damaged at byte {valid} of {} (a checkpoint is written whole before it is renamed into place, so this is not a torn write)",
                    checkpoint_bytes.len()
                ),
            });
        }
        frames = records;
    }
    let segment_path = dir.join(file_name(FileKind::Segment, base));
    let segment_bytes = match segments.contains(&base) {
        true => load(&segment_path)?,
        false => Vec::new(),
    };
    let mut segment_len = 0;
    let mut tail_len = 0;
    let mut segment_exists = segments.contains(&base);
    if segment_exists {
        let path = &segment_path;
        match check_file(path, &segment_bytes, config, env.id, FileKind::Segment) {
            Ok((records, valid)) => {
                if valid < segment_bytes.len() {
                    warn!(
                        node = %env.id,
                        "{}: cutting a torn or corrupt tail of {} bytes at byte {valid}",
                        segment_path.display(),
                        segment_bytes.len() - valid
                    );
                    let f = OpenOptions::new()
                        .write(true)
                        .open(&segment_path)
                        .map_err(io_err(&segment_path))?;
                    f.set_len(valid as u64).map_err(io_err(&segment_path))?;
                    f.sync_all().map_err(io_err(&segment_path))?;
                }
                segment_len = valid;
                tail_len = records.len();
                frames.extend(records);
            }
            // A segment created but whose header never reached the disk holds nothing.
            Err(LogError::Corrupt { .. }) if segment_bytes.len() < 64 => segment_exists = false,
            Err(e) => return Err(e),
        }
    }
    // Files older than the newest checkpoint are covered by it.
    for n in segments.iter().filter(|n| **n < base) {
        let _ = fs::remove_file(dir.join(file_name(FileKind::Segment, *n)));
    }
    for n in checkpoints.iter().filter(|n| **n < base) {
        let _ = fs::remove_file(dir.join(file_name(FileKind::Checkpoint, *n)));
    }
    let source = if segment_exists {
        segment_path.clone()
    } else {
        dir.to_path_buf()
    };
    let (protocol, replayed) = rebuild::<P>(env, frames, &source)?;
    schedule.taken(checkpoint_bytes.len() as u64);
    schedule.appended(segment_len as u64);
    if replayed > 0 {
        info!(
            node = %env.id,
            "recovered from {}: checkpoint {base} ({} bytes) and {tail_len} records after it, {replayed} records in {:.1?}",
            dir.display(),
            checkpoint_bytes.len(),
            started.elapsed()
        );
    }
    drop(checkpoint_bytes);
    drop(segment_bytes);
    // Append to the segment after the newest checkpoint, creating it (with its header) if the
    // crash came between the checkpoint's rename and the segment's creation.
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&segment_path)
        .map_err(io_err(&segment_path))?;
    if !segment_exists {
        file.set_len(0).map_err(io_err(&segment_path))?;
        file.write_all(&header(config, env.id, FileKind::Segment, base))
            .and_then(|_| file.sync_all())
            .map_err(io_err(&segment_path))?;
        sync_dir(dir)?;
    }
    let (to_writer, jobs) = mpsc::channel();
    let (synced_tx, synced) = watch::channel(SyncState::default());
    let writer = Writer {
        dir: dir.to_path_buf(),
        config: config.clone(),
        node: env.id,
        number: base,
        file,
        synced: synced_tx,
        written: 0,
    };
    let writer = std::thread::Builder::new()
        .name(format!("augur-wal-{}", env.id))
        .spawn(move || writer.run(jobs))
        .map_err(io_err(dir))?;
    Ok((
        protocol,
        NodeLog {
            policy: config.policy,
            end: 0,
            schedule,
            checkpoint_due: false,
            backend: Backend::File {
                to_writer: Some(to_writer),
                synced,
                writer: Some(writer),
            },
        },
    ))
}

fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// The thread that owns a data directory's files.
struct Writer {
    dir: PathBuf,
    config: LogConfig,
    node: NodeId,
    /// The number of the current segment (and of the checkpoint it follows).
    number: u64,
    file: File,
    synced: watch::Sender<SyncState>,
    /// Log position written so far.
    written: u64,
}

impl Writer {
    fn run(mut self, jobs: mpsc::Receiver<WriterJob>) {
        let mut last_sync = Instant::now();
        let mut unsynced = false;
        loop {
            // Wait for work; under `batch`, no longer than the next sync is due.
            let job = match (self.config.policy, unsynced) {
                (LogPolicy::Batch(every), true) => {
                    let due = last_sync + every;
                    match jobs.recv_timeout(due.saturating_duration_since(Instant::now())) {
                        Ok(job) => Some(job),
                        Err(mpsc::RecvTimeoutError::Timeout) => None,
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
                _ => match jobs.recv() {
                    Ok(job) => Some(job),
                    Err(_) => break,
                },
            };
            let mut batch = Vec::new();
            batch.extend(job);
            batch.extend(jobs.try_iter());
            if let Err(e) = self.handle(batch, &mut unsynced) {
                self.fail(e);
                return;
            }
            let sync_now = match self.config.policy {
                LogPolicy::Always => unsynced,
                LogPolicy::Batch(every) => unsynced && last_sync.elapsed() >= every,
                LogPolicy::Off => false,
            };
            if sync_now {
                let started = Instant::now();
                if let Err(e) = self.file.sync_data() {
                    self.fail(format!("syncing the log: {e}"));
                    return;
                }
                last_sync = Instant::now();
                crate::telemetry::log_synced(last_sync - started);
                unsynced = false;
            }
            if !unsynced || !self.config.policy.waits() {
                let written = self.written;
                self.synced.send_modify(|s| s.synced = written);
            }
        }
        // The node is stopping: leave nothing unsynced behind.
        if self.config.policy.waits()
            && let Err(e) = self.file.sync_data()
        {
            warn!(node = %self.node, "syncing the log at shutdown: {e}");
        }
    }

    fn handle(&mut self, batch: Vec<WriterJob>, unsynced: &mut bool) -> Result<(), String> {
        let mut bytes = Vec::new();
        for job in batch {
            match job {
                WriterJob::Append(frames, end) => {
                    bytes.extend_from_slice(&frames);
                    self.written = end;
                }
                WriterJob::Checkpoint(frames) => {
                    self.write(&bytes)?;
                    bytes.clear();
                    self.rotate(frames)?;
                    *unsynced = false;
                }
            }
        }
        if !bytes.is_empty() {
            self.write(&bytes)?;
            *unsynced = true;
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.file
            .write_all(bytes)
            .map_err(|e| format!("writing the log: {e}"))
    }

    /// Install a checkpoint of the state at the current end of the log and start a new
    /// segment after it; then drop the files it covers.
    fn rotate(&mut self, frames: Vec<u8>) -> Result<(), String> {
        let next = self.number + 1;
        let name = file_name(FileKind::Checkpoint, next);
        let tmp = self.dir.join(format!("{name}.tmp"));
        let path = self.dir.join(&name);
        let context = |what: &str, e: io::Error| format!("{what} {}: {e}", path.display());
        let mut f = File::create(&tmp).map_err(|e| context("creating", e))?;
        f.write_all(&header(&self.config, self.node, FileKind::Checkpoint, next))
            .and_then(|_| f.write_all(&frames))
            .and_then(|_| f.sync_all())
            .map_err(|e| context("writing", e))?;
        drop(f);
        // The old segment must be durable before the checkpoint replaces it, or a crash could
        // leave a checkpoint without the syncs promised for the records before it.
        self.file
            .sync_data()
            .map_err(|e| context("syncing the segment before", e))?;
        fs::rename(&tmp, &path).map_err(|e| context("renaming into place", e))?;
        let segment = self.dir.join(file_name(FileKind::Segment, next));
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&segment)
            .map_err(|e| context("creating the segment after", e))?;
        file.set_len(0)
            .and_then(|_| file.write_all(&header(&self.config, self.node, FileKind::Segment, next)))
            .and_then(|_| file.sync_all())
            .map_err(|e| context("writing the segment after", e))?;
        sync_dir(&self.dir).map_err(|e| e.to_string())?;
        let old = self.number;
        self.file = file;
        self.number = next;
        let _ = fs::remove_file(self.dir.join(file_name(FileKind::Segment, old)));
        let _ = fs::remove_file(self.dir.join(file_name(FileKind::Checkpoint, old)));
        Ok(())
    }

    fn fail(&self, why: String) {
        self.synced
            .send_modify(|s| s.error = Some(Arc::from(why.as_str())));
    }
}

impl NodeLog {
    /// The policy in force.
    pub fn policy(&self) -> LogPolicy {
        self.policy
    }

    /// Append `records`; returns the log position after them.
    pub fn append<R: Serialize>(&mut self, records: &[R]) -> u64 {
        let frames = encode_records(records);
        self.end += frames.len() as u64;
        self.checkpoint_due |= self.schedule.appended(frames.len() as u64);
        match &mut self.backend {
            Backend::Memory(log) => {
                log.append(&frames);
                // Nothing in this process outlives it, so memory is as durable as it gets.
                log.sync(self.end);
            }
            Backend::File { to_writer, .. } => {
                if let Some(tx) = to_writer {
                    let _ = tx.send(WriterJob::Append(frames, self.end));
                }
            }
        }
        self.end
    }

    /// The log position after the last record appended.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Whether enough was appended since the last checkpoint to take a new one.
    pub fn checkpoint_due(&self) -> bool {
        self.checkpoint_due
    }

    /// Checkpoint `protocol`'s state, which must reflect every record appended so far.
    pub fn checkpoint<P: Protocol>(&mut self, protocol: &P) {
        let frames = encode_checkpoint(protocol);
        self.schedule.taken(frames.len() as u64);
        self.checkpoint_due = false;
        match &mut self.backend {
            Backend::Memory(log) => {
                log.checkpoint(frames);
                log.sync(self.end);
            }
            Backend::File { to_writer, .. } => {
                if let Some(tx) = to_writer {
                    let _ = tx.send(WriterJob::Checkpoint(frames));
                }
            }
        }
    }

    /// Everything before this position is as durable as the policy promises; an error once
    /// the log can no longer be written (the node must stop).
    pub fn synced(&self) -> Result<u64, LogError> {
        match &self.backend {
            Backend::Memory(_) => Ok(self.end),
            Backend::File { synced, .. } => {
                let state = synced.borrow();
                if let Some(why) = &state.error {
                    return Err(LogError::Writer(why.to_string()));
                }
                Ok(if self.policy.waits() {
                    state.synced
                } else {
                    self.end
                })
            }
        }
    }

    /// Resolves when the log's durable position may have advanced (never for a memory log,
    /// whose appends are durable at once).
    pub async fn progress(&mut self) {
        match &mut self.backend {
            Backend::Memory(_) => std::future::pending().await,
            Backend::File { synced, .. } => {
                if synced.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

impl Drop for NodeLog {
    /// Let the writer finish what it was given (and sync it), then wait for it.
    fn drop(&mut self) {
        if let Backend::File {
            to_writer, writer, ..
        } = &mut self.backend
        {
            to_writer.take();
            if let Some(writer) = writer.take() {
                let _ = writer.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_contract::{Ctx, ProtocolOptions};
    use augur_types::{ClientRequest, LatencyProfile, Placement};
    use std::time::Duration;

    /// A protocol whose whole state is a running total of the numbers it persisted.
    struct Tally {
        total: u64,
    }

    #[derive(Clone, Debug, Serialize, Deserialize)]
    enum TallyRecord {
        Add(u64),
        /// Checkpoints only.
        Set(u64),
    }

    impl Protocol for Tally {
        type Msg = ();
        type Timer = ();
        type Record = TallyRecord;

        fn new(_env: &NodeEnv) -> Self {
            Tally { total: 0 }
        }

        fn recover(_env: &NodeEnv, records: &mut dyn Iterator<Item = TallyRecord>) -> Self {
            let mut total = 0;
            for r in records {
                match r {
                    TallyRecord::Add(n) => total += n,
                    TallyRecord::Set(n) => total = n,
                }
            }
            Tally { total }
        }

        fn checkpoint(&self, emit: &mut dyn FnMut(TallyRecord)) {
            emit(TallyRecord::Set(self.total));
        }

        fn on_client(&mut self, _ctx: &mut Ctx<'_, Self>, _request: ClientRequest) {}
        fn on_message(&mut self, _ctx: &mut Ctx<'_, Self>, _from: NodeId, _msg: ()) {}
        fn on_timer(&mut self, _ctx: &mut Ctx<'_, Self>, _timer: ()) {}
    }

    fn env(id: u32) -> NodeEnv {
        let profile = LatencyProfile::named("lan").unwrap();
        NodeEnv {
            id: NodeId(id),
            placement: Arc::new(Placement::ring(profile, 2, 1).unwrap()),
            options: Arc::new(ProtocolOptions::default()),
            procedures: Default::default(),
        }
    }

    fn config(dir: &Path, floor: u64) -> LogConfig {
        LogConfig {
            checkpoint_min_bytes: floor,
            ..LogConfig::dir("tally", LogPolicy::Always, dir)
        }
    }

    /// Append `adds` one handler at a time, checkpointing when due, as the node loop does.
    fn run(dir: &Path, floor: u64, adds: impl IntoIterator<Item = u64>) -> u64 {
        let (mut tally, mut log) = open::<Tally>(&env(0), &config(dir, floor)).unwrap();
        for n in adds {
            tally.total += n;
            log.append(&[TallyRecord::Add(n)]);
            if log.checkpoint_due() {
                log.checkpoint(&tally);
            }
        }
        // Dropping the log lets the writer finish and sync.
        tally.total
    }

    fn reopen(dir: &Path) -> Result<u64, LogError> {
        open::<Tally>(&env(0), &config(dir, 1 << 20)).map(|(t, _)| t.total)
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn frames_are_read_up_to_the_first_damaged_one() {
        let mut bytes = Vec::new();
        for payload in [&b"one"[..], b"two", b"three"] {
            push_frame(&mut bytes, payload);
        }
        let (frames, valid) = read_frames(&bytes);
        assert_eq!(frames, [&b"one"[..], b"two", b"three"]);
        assert_eq!(valid, bytes.len());

        let torn = &bytes[..bytes.len() - 2];
        let (frames, valid) = read_frames(torn);
        assert_eq!(frames.len(), 2);
        assert_eq!(valid, 2 * FRAME_HEADER + 6);

        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(
            read_frames(&flipped).0.len(),
            2,
            "checksum catches a flipped bit"
        );
    }

    #[test]
    fn a_memory_log_loses_exactly_what_was_not_synced() {
        let mut log = MemoryLog::default();
        let mut frames = Vec::new();
        push_record(&mut frames, &TallyRecord::Add(1));
        let first = log.append(&frames);
        log.append(&frames);
        log.sync(first);
        log.append(&frames);
        log.lose_pending();
        assert_eq!(log.durable_frames().len(), 1);
        // What is appended after a crash continues from the durable end.
        let end = log.append(&frames);
        log.sync(end);
        assert_eq!(log.durable_frames().len(), 2);
    }

    #[test]
    fn a_memory_checkpoint_replaces_the_log_only_once_synced() {
        let mut log = MemoryLog::default();
        let mut add = Vec::new();
        push_record(&mut add, &TallyRecord::Add(5));
        let end = log.append(&add);
        log.sync(end);
        let mut set = Vec::new();
        push_record(&mut set, &TallyRecord::Set(9));
        log.checkpoint(set);
        log.lose_pending();
        let (t, _) = rebuild::<Tally>(&env(0), log.durable_frames(), Path::new("m")).unwrap();
        assert_eq!(
            t.total, 5,
            "an unsynced checkpoint is lost, the log it covered is not"
        );

        let mut set = Vec::new();
        push_record(&mut set, &TallyRecord::Set(9));
        log.checkpoint(set);
        let end = log.append(&add);
        log.sync(end);
        let (t, _) = rebuild::<Tally>(&env(0), log.durable_frames(), Path::new("m")).unwrap();
        assert_eq!(t.total, 14, "checkpoint, then what followed it");
        assert_eq!(log.durable_frames().len(), 2);
    }

    #[test]
    fn a_data_directory_survives_restarts_and_stays_small() {
        let dir = tempfile::tempdir().unwrap();
        let total = run(dir.path(), 256, 1..=2000);
        assert_eq!(total, 2000 * 2001 / 2);
        assert_eq!(reopen(dir.path()).unwrap(), total);
        let names = files(dir.path());
        assert_eq!(names.len(), 2, "one checkpoint and its segment: {names:?}");
        assert!(names[0].starts_with("checkpoint-") && names[1].starts_with("segment-"));
        // A restarted node appends after what it recovered.
        let (tally, mut log) = open::<Tally>(&env(0), &config(dir.path(), 1 << 20)).unwrap();
        assert_eq!(tally.total, total);
        log.append(&[TallyRecord::Add(7)]);
        drop(log);
        assert_eq!(reopen(dir.path()).unwrap(), total + 7);
    }

    #[test]
    fn a_torn_tail_is_cut_not_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let total = run(dir.path(), 1 << 20, [1, 2, 3]);
        let segment = dir.path().join(file_name(FileKind::Segment, 0));
        let whole = fs::metadata(&segment).unwrap().len();
        // A record whose write was cut short: its header and half of its payload.
        let mut torn = Vec::new();
        push_record(&mut torn, &TallyRecord::Add(1000));
        let mut f = OpenOptions::new().append(true).open(&segment).unwrap();
        f.write_all(&torn[..torn.len() - 1]).unwrap();
        drop(f);
        assert_eq!(reopen(dir.path()).unwrap(), total);
        assert_eq!(fs::metadata(&segment).unwrap().len(), whole, "cut back");
    }

    #[test]
    fn a_damaged_checkpoint_stops_the_node() {
        let dir = tempfile::tempdir().unwrap();
        run(dir.path(), 64, 1..=200);
        let checkpoint = files(dir.path())
            .into_iter()
            .find(|n| n.starts_with("checkpoint-"))
            .unwrap();
        let path = dir.path().join(checkpoint);
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        fs::write(&path, bytes).unwrap();
        let err = reopen(dir.path()).unwrap_err();
        assert!(matches!(err, LogError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("checkpoint-"), "{err}");
    }

    #[test]
    fn another_protocols_or_nodes_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        run(dir.path(), 1 << 20, [1]);
        let other = LogConfig::dir("other", LogPolicy::Always, dir.path());
        let err = open::<Tally>(&env(0), &other).map(|_| ()).unwrap_err();
        assert!(
            err.to_string()
                .contains("belongs to tally node 0, not other node 0"),
            "{err}"
        );
        let err = open::<Tally>(&env(1), &config(dir.path(), 1 << 20))
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(err, LogError::Foreign { .. }), "{err}");
    }

    #[test]
    fn batch_and_off_logs_also_recover_after_a_clean_stop() {
        for policy in [LogPolicy::Batch(Duration::from_millis(3)), LogPolicy::Off] {
            let dir = tempfile::tempdir().unwrap();
            let cfg = LogConfig::dir("tally", policy, dir.path());
            let (_, mut log) = open::<Tally>(&env(0), &cfg).unwrap();
            for n in 1..=100 {
                log.append(&[TallyRecord::Add(n)]);
            }
            drop(log);
            assert_eq!(reopen(dir.path()).unwrap(), 5050, "{policy}");
        }
    }
}
