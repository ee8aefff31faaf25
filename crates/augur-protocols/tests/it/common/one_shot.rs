//! Scripted one-shot transactions, the form in which the order-then-execute protocols (`calvin`,
//! `s-smr`) take a transaction that reads: a small catalogue of procedures ([`Catalog`],
//! workload `golden`), the calls a scenario scripts ([`Call`]), a client that submits them one
//! after another and notes what it saw in an [`Observed`] ([`spawn_one_shot_client`]), and
//! [`readable`], which rewrites a rendered trace of these protocols for reading (see the
//! `common` module docs).

use super::{Observed, show_value};
use augur_client::{Ops, Procedure, ProcedureCatalog, Transport, TxnError};
use augur_contract::Protocol;
use augur_contract::forms::Procedures;
use augur_protocols::common::dispatch::{Body, Entry};
use augur_runtime::sim::Simulation;
use augur_types::{
    ArgsFormat, ClientOp, ClientReply, ExecutedOp, Execution, Key, NodeId, ProcedureCall,
    RequestError, Timestamp, Value,
};
use futures::future::BoxFuture;
use raft::eraftpb::{Entry as RaftEntry, EntryType, HardState, Message, MessageType};
use raft_prost::Message as _;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The workload the scripted procedures are registered under.
pub const WORKLOAD: &str = "golden";

/// The arguments of every scripted procedure: the keys it names, in order, and for `put` the
/// value of each.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Args {
    keys: Vec<Key>,
    values: Vec<String>,
}

/// The scripted procedures. None declares its keys, so a protocol that must know them learns
/// them by a dry run (or reconnaissance).
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Writes each key its value (blind writes).
    Put,
    /// Reads each key, in order (read-only).
    Get,
    /// Reads two keys and writes each the other's value: with the keys in two partitions,
    /// each partition needs the other's value.
    Swap,
    /// Reads a pointer key, whose value is a key's printed form (`1/1`), then reads that key
    /// and writes it `followed`: a dependent transaction, whose keys depend on what it reads.
    /// A pointer that is absent or names no key ends it with nothing more done.
    Follow,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Put => "put",
            Kind::Get => "get",
            Kind::Swap => "swap",
            Kind::Follow => "follow",
        }
    }

    fn named(name: &str) -> Option<Kind> {
        [Kind::Put, Kind::Get, Kind::Swap, Kind::Follow]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

struct Scripted {
    kind: Kind,
    args: Args,
}

fn value(text: &str) -> Value {
    Value::from(text.to_string())
}

impl Procedure for Scripted {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn read_only(&self) -> bool {
        matches!(self.kind, Kind::Get)
    }

    fn run<'a>(&'a mut self, ops: &'a mut dyn Ops) -> BoxFuture<'a, Result<(), TxnError>> {
        Box::pin(async move {
            let keys = &self.args.keys;
            match self.kind {
                Kind::Put => {
                    for (key, v) in keys.iter().zip(&self.args.values) {
                        ops.write(key.clone(), Some(value(v)))?;
                    }
                }
                Kind::Get => {
                    for key in keys {
                        ops.read(key).await?;
                    }
                }
                Kind::Swap => {
                    let a = ops.read(&keys[0]).await?;
                    let b = ops.read(&keys[1]).await?;
                    ops.write(keys[0].clone(), b)?;
                    ops.write(keys[1].clone(), a)?;
                }
                Kind::Follow => {
                    let pointer = ops.read(&keys[0]).await?;
                    let target = pointer
                        .and_then(|p| String::from_utf8(p.to_vec()).ok())
                        .and_then(|p| Key::parse_printed(&p).ok());
                    if let Some(target) = target {
                        ops.read(&target).await?;
                        ops.write(target, Some(value("followed")))?;
                    }
                }
            }
            Ok(())
        })
    }

    fn call(&self) -> Option<ProcedureCall> {
        Some(ProcedureCall::encode(
            WORKLOAD,
            self.kind.name(),
            &self.args,
        ))
    }
}

/// The catalogue the nodes of a scripted one-shot scenario run procedures from.
pub struct Catalog;

impl ProcedureCatalog for Catalog {
    fn instantiate(&self, call: &ProcedureCall) -> Result<Box<dyn Procedure>, RequestError> {
        let kind = Kind::named(&call.procedure).filter(|_| call.workload == WORKLOAD);
        let Some(kind) = kind else {
            return Err(RequestError::UnknownProcedure(format!(
                "{}/{}",
                call.workload, call.procedure
            )));
        };
        let args: Args = call.decode()?;
        let arity = match kind {
            Kind::Put | Kind::Get => 0,
            Kind::Swap => 2,
            Kind::Follow => 1,
        };
        if args.keys.len() < arity {
            return Err(RequestError::Invalid(format!(
                "{WORKLOAD}/{} takes {arity} keys",
                kind.name()
            )));
        }
        Ok(Box::new(Scripted { kind, args }))
    }
}

/// The procedures of [`Catalog`], for `SimConfig::procedures`.
pub fn procedures() -> Procedures {
    Procedures::new(Arc::new(Catalog))
}

/// One scripted one-shot transaction: a call of [`Catalog`] and the name it is observed under.
#[derive(Clone, Debug)]
pub struct Call {
    pub name: &'static str,
    call: ProcedureCall,
    read_only: bool,
}

impl Call {
    fn new(name: &'static str, kind: Kind, args: Args) -> Call {
        Call {
            name,
            call: ProcedureCall::encode(WORKLOAD, kind.name(), &args),
            read_only: matches!(kind, Kind::Get),
        }
    }

    /// Write each key its value.
    pub fn put(name: &'static str, pairs: &[(&Key, &str)]) -> Call {
        let args = Args {
            keys: pairs.iter().map(|(k, _)| (*k).clone()).collect(),
            values: pairs.iter().map(|(_, v)| v.to_string()).collect(),
        };
        Call::new(name, Kind::Put, args)
    }

    /// Read `keys` in order (read-only).
    pub fn get(name: &'static str, keys: &[&Key]) -> Call {
        let keys = keys.iter().map(|k| (*k).clone()).collect();
        Call::new(
            name,
            Kind::Get,
            Args {
                keys,
                values: vec![],
            },
        )
    }

    /// Read `a` and `b` and write each the other's value.
    pub fn swap(name: &'static str, a: &Key, b: &Key) -> Call {
        let keys = vec![a.clone(), b.clone()];
        Call::new(
            name,
            Kind::Swap,
            Args {
                keys,
                values: vec![],
            },
        )
    }

    /// Read `pointer`, then the key it names, and write that key `followed`.
    pub fn follow(name: &'static str, pointer: &Key) -> Call {
        let keys = vec![pointer.clone()];
        Call::new(
            name,
            Kind::Follow,
            Args {
                keys,
                values: vec![],
            },
        )
    }
}

/// Start a client on `home` that sleeps `start`, then submits `calls` one after the other, each
/// as one `Execute` request, and notes what each reply said: every read with its value and
/// every write, in program order, then `committed` or how it ended otherwise.
pub fn spawn_one_shot_client<P: Protocol>(
    sim: &mut Simulation<P>,
    home: u32,
    start: Duration,
    calls: Vec<Call>,
    observed: &Observed,
) {
    let observed = observed.clone();
    sim.spawn_client(NodeId(home), move |t| async move {
        t.sleep(start).await;
        for c in calls {
            let op = ClientOp::Execute {
                call: c.call,
                read_only: c.read_only,
                speculative_reads: false,
                speculative_commit: false,
                trying_for_us: 0,
            };
            let notes = match t.call(op).await {
                Ok(ClientReply::Executed(execution)) => notes_of(&execution),
                Ok(other) => vec![format!("reply {other:?}")],
                Err(e) => vec![format!("no reply: {e}")],
            };
            observed.record_at(c.name, &notes, t.now());
        }
    });
}

fn notes_of(execution: &Execution) -> Vec<String> {
    let mut notes: Vec<String> = execution
        .ops
        .iter()
        .map(|op| match op {
            ExecutedOp::Read { key, value } => format!("read {key:?} = {}", show_value(value)),
            ExecutedOp::Write { key, value } => format!("write {key:?} = {}", show_value(value)),
        })
        .collect();
    notes.push(match &execution.end {
        ClientReply::Committed { .. } => "committed".into(),
        ClientReply::Aborted(reason) => format!("aborted ({reason:?})"),
        other => format!("ended {other:?}"),
    });
    notes
}

// ----- Rendering for reading -----

/// `text` (a rendered trace of an order-then-execute protocol) with its Raft messages, log
/// entries and hard states decoded, its procedure calls shown as `golden/NAME(ARGS)` and its
/// positions as `pos(INDEX.SLOT)` (see the `common` module docs). What does not decode is left
/// as it is.
pub fn readable(text: String) -> String {
    let text = rewrite(&text, "RaftMessage(", |rest| {
        let (bytes, used) = byte_list(rest)?;
        Some((raft_message(&bytes), used))
    });
    let text = rewrite(&text, "Entries(", |rest| {
        let (entries, used) = list_of_byte_lists(rest)?;
        let shown: Vec<String> = entries.iter().map(|e| raft_entry_bytes(e)).collect();
        Some((format!("[{}]", shown.join(", ")), used))
    });
    let text = rewrite(&text, "HardState(", |rest| {
        let (bytes, used) = byte_list(rest)?;
        let hs = HardState::decode(bytes.as_slice()).ok()?;
        Some((
            format!(
                "term={} vote={} commit={}",
                hs.term,
                raft_node(hs.vote),
                hs.commit
            ),
            used,
        ))
    });
    let text = rewrite(&text, "", procedure_call);
    rewrite(&text, "", position)
}

/// Replace, after each occurrence of `marker`, what `f` recognises at that point (it returns
/// the replacement and how many bytes it consumed); an empty `marker` tries every position.
pub(super) fn rewrite(
    text: &str,
    marker: &str,
    f: impl Fn(&str) -> Option<(String, usize)>,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let at = if marker.is_empty() {
            // The next place `f` could match: its recognisers all start with an ASCII letter.
            match rest.find(['P', 'T']) {
                Some(at) => at,
                None => break,
            }
        } else {
            match rest.find(marker) {
                Some(at) => at + marker.len(),
                None => break,
            }
        };
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match f(rest) {
            Some((replacement, used)) => {
                out.push_str(&replacement);
                rest = &rest[used..];
            }
            None => {
                // Step over one character.
                let c = rest.chars().next().expect("not at the end");
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// A `Debug`-rendered byte list `[1, 2, 3]` at the start of `text`: its bytes and length.
fn byte_list(text: &str) -> Option<(Vec<u8>, usize)> {
    let inner = text.strip_prefix('[')?;
    let end = inner.find(']')?;
    let body = &inner[..end];
    let bytes = if body.is_empty() {
        Vec::new()
    } else {
        body.split(", ")
            .map(|b| b.parse::<u8>().ok())
            .collect::<Option<Vec<u8>>>()?
    };
    Some((bytes, end + 2))
}

/// A `Debug`-rendered list of byte lists `[[1, 2], [3]]` at the start of `text`.
fn list_of_byte_lists(text: &str) -> Option<(Vec<Vec<u8>>, usize)> {
    let mut used = 1;
    let mut rest = text.strip_prefix('[')?;
    let mut lists = Vec::new();
    loop {
        if rest.starts_with(']') {
            return Some((lists, used + 1));
        }
        if !lists.is_empty() {
            rest = rest.strip_prefix(", ")?;
            used += 2;
        }
        let (bytes, n) = byte_list(rest)?;
        lists.push(bytes);
        rest = &rest[n..];
        used += n;
    }
}

/// A Raft node id as the node it is (`n0` is Raft id 1; 0 is nobody).
fn raft_node(id: u64) -> String {
    match id {
        0 => "none".into(),
        id => format!("n{}", id - 1),
    }
}

/// A prost-encoded Raft message: its kind, sender and receiver, then every other field that is
/// not zero.
fn raft_message(bytes: &[u8]) -> String {
    let Ok(m) = Message::decode(bytes) else {
        return format!("undecodable {bytes:?}");
    };
    let kind = match MessageType::from_i32(m.msg_type) {
        Some(kind) => format!("{kind:?}"),
        None => format!("kind {}", m.msg_type),
    };
    let mut fields = vec![format!("{}->{}", raft_node(m.from), raft_node(m.to))];
    for (name, v) in [
        ("term", m.term),
        ("log_term", m.log_term),
        ("index", m.index),
        ("commit", m.commit),
        ("commit_term", m.commit_term),
        ("request_snapshot", m.request_snapshot),
        ("reject_hint", m.reject_hint),
        ("deprecated_priority", m.deprecated_priority),
    ] {
        if v != 0 {
            fields.push(format!("{name}={v}"));
        }
    }
    if m.reject {
        fields.push("reject".into());
    }
    if m.priority != 0 {
        fields.push(format!("priority={}", m.priority));
    }
    if !m.context.is_empty() {
        fields.push(format!("context={:?}", m.context));
    }
    if m.snapshot.is_some() {
        fields.push(format!("snapshot={:?}", m.snapshot));
    }
    if !m.entries.is_empty() {
        let entries: Vec<String> = m.entries.iter().map(raft_entry).collect();
        fields.push(format!("entries=[{}]", entries.join(", ")));
    }
    format!("{kind}({})", fields.join(" "))
}

fn raft_entry_bytes(bytes: &[u8]) -> String {
    match RaftEntry::decode(bytes) {
        Ok(e) => raft_entry(&e),
        Err(_) => format!("undecodable {bytes:?}"),
    }
}

/// The sequencer's proposal, as a Raft entry carries it (`common::sequencer`'s `Proposal`).
#[derive(Deserialize)]
struct Proposal {
    origin: NodeId,
    seq: u64,
    floor: u64,
    items: Vec<Entry>,
}

/// A Raft entry: `INDEX@TERM`, then its batch (or `(empty)`, a new leader's entry).
fn raft_entry(e: &RaftEntry) -> String {
    let mut out = format!("{}@{}", e.index, e.term);
    if EntryType::from_i32(e.entry_type) != Some(EntryType::EntryNormal) {
        out.push_str(&format!(" type={}", e.entry_type));
    }
    if e.data.is_empty() {
        out.push_str(" (empty)");
    } else {
        match postcard::from_bytes::<Proposal>(&e.data) {
            Ok(p) => {
                let items: Vec<String> = p.items.iter().map(transaction).collect();
                out.push_str(&format!(
                    " batch {}#{} floor {} [{}]",
                    p.origin,
                    p.seq,
                    p.floor,
                    items.join("; ")
                ));
            }
            Err(_) => out.push_str(&format!(" data={:?}", e.data)),
        }
    }
    if !e.context.is_empty() {
        out.push_str(&format!(" context={:?}", e.context));
    }
    if e.sync_log {
        out.push_str(" sync_log");
    }
    out
}

/// A transaction as the sequencer orders it: its id, participants, body and footprint.
fn transaction(e: &Entry) -> String {
    let parts: Vec<String> = e.partitions.iter().map(|p| format!("p{}", p.0)).collect();
    let body = match &e.body {
        Body::Call { call, read_only } => {
            let ro = if *read_only { " read-only" } else { "" };
            format!("{}{ro}", call_text(call))
        }
        Body::Writes(writes) => format!("writes {writes:?}"),
    };
    let footprint = match &e.footprint {
        Some(fp) => format!(" footprint(reads {:?} writes {:?})", fp.reads, fp.writes),
        None => String::new(),
    };
    format!("{:?} on [{}] {body}{footprint}", e.txn, parts.join(", "))
}

/// A call of [`Catalog`] as `golden/NAME(ARGS)`; another as its workload and name.
fn call_text(call: &ProcedureCall) -> String {
    let name = format!("{}/{}", call.workload, call.procedure);
    let args = match call.decode::<Args>() {
        Ok(args) if call.workload == WORKLOAD => args,
        _ => return format!("{name}({} bytes of arguments)", call.args.len()),
    };
    let shown: Vec<String> = match Kind::named(&call.procedure) {
        Some(Kind::Put) => args
            .keys
            .iter()
            .zip(&args.values)
            .map(|(k, v)| format!("{k:?} = {v:?}"))
            .collect(),
        _ => args.keys.iter().map(|k| format!("{k:?}")).collect(),
    };
    format!("{name}({})", shown.join(", "))
}

/// `ProcedureCall { workload: "W", procedure: "P", args: [..], args_format: F }` at the start
/// of `text`, shown by [`call_text`].
fn procedure_call(text: &str) -> Option<(String, usize)> {
    let start = text.len();
    let rest = text.strip_prefix("ProcedureCall { workload: \"")?;
    let (workload, rest) = rest.split_once('"')?;
    let rest = rest.strip_prefix(", procedure: \"")?;
    let (procedure, rest) = rest.split_once('"')?;
    let rest = rest.strip_prefix(", args: ")?;
    let (args, used) = byte_list(rest)?;
    let rest = rest[used..].strip_prefix(", args_format: Postcard }")?;
    let call = ProcedureCall {
        workload: workload.into(),
        procedure: procedure.into(),
        args,
        args_format: ArgsFormat::Postcard,
    };
    Some((call_text(&call), start - rest.len()))
}

/// `Timestamp(N)` at the start of `text`, for a position `N = INDEX << 20 | SLOT` of the
/// order (below the simulator's clock readings), as `pos(INDEX.SLOT)`.
fn position(text: &str) -> Option<(String, usize)> {
    let rest = text.strip_prefix("Timestamp(")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[digits..].strip_prefix(')')?;
    let n: u64 = rest[..digits].parse().ok()?;
    if !(1 << 20..500_000_000).contains(&n) {
        return None;
    }
    let at = Timestamp(n);
    let (index, slot) = (at.0 >> 20, at.0 & ((1 << 20) - 1));
    Some((
        format!("pos({index}.{slot})"),
        "Timestamp(".len() + digits + 1,
    ))
}
