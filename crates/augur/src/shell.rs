//! `augur shell`: an interactive session with a running cluster.
//!
//! ```text
//! augur> begin                 start a transaction (`begin read-only` for a read-only one)
//! augur> get KEY               read a key (outside a transaction: a transaction of its own)
//! augur> put KEY VALUE         write a key (buffered until commit; outside: committed at once)
//! augur> del KEY               delete a key
//! augur> commit | abort        end the transaction
//! augur> exec bank/transfer {"from":"0/1","to":"1/2","amount":5,"initial":100}
//!                              run a registered procedure one-shot (a transaction of its own)
//! augur> help | quit
//! ```
//!
//! On a terminal, lines are edited with `rustyline` (arrows, history of the session); from a
//! pipe, commands are read line by line with no prompt. A pasted block of lines runs as its
//! commands, one after another, and lines typed while a request is in flight wait their turn.
//! An error (an unknown command, a node that is down, an abort) is printed and the session goes
//! on, on a new connection when the node went away (to it or another node); an abort's reason
//! is shown in words. Read from a pipe, the shell exits with a non-zero status when any command
//! failed. A transaction left idle longer than the cluster keeps one
//! (`idle_txn_timeout_ms`) is reported as rolled back before the next command, which is not run.
//!
//! `exec WORKLOAD/PROCEDURE ARGS` ships one of the workloads' registered procedures as a
//! one-shot transaction, as `augur bench --txn-form one-shot` does. ARGS is the procedure's
//! argument structure as JSON, keys written in their printed form (`SHARD/REST`, e.g. `0/1`
//! for account 1 of `bank`); the shell decodes it into the procedure here (a wrong or missing
//! field is named) and the procedure encodes its own call for the wire. The reply shows the
//! outcome and every read and write the node made.

use crate::cluster::Cluster;
use augur_client::{
    Attempt, HistoryRecorder, Outcome, ProcedureCatalog, Session, Speculation, Txn, TxnError,
    execute_one_shot,
};
use augur_runtime::tcp::{ClientConfig, TcpTransport};
use augur_types::history::Op;
use augur_types::{ArgsFormat, Key, NodeId, ProcedureCall, Value};
use augur_workloads::Catalog;
use std::collections::VecDeque;
use std::io::{BufRead, IsTerminal};
use std::path::Path;
use std::time::{Duration, Instant};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

const HELP: &str = "\
commands:
  begin [read-only]   start a transaction
  get KEY             read a key (outside a transaction: a transaction of its own)
  put KEY VALUE       write a key (in a transaction: at commit; outside: at once)
  del KEY             delete a key
  commit              commit the transaction
  abort               roll the transaction back
  exec WORKLOAD/PROCEDURE ARGS
                      run a workload's registered procedure as a one-shot transaction of its
                      own, ARGS its arguments as JSON with keys as SHARD/REST, e.g.
                      exec bank/transfer {\"from\":\"0/1\",\"to\":\"1/2\",\"amount\":5,\"initial\":100}
  help                this list
  quit                leave (an open transaction is rolled back)";

/// Where the shell's lines come from, and lines read but not yet run (a paste of several lines
/// arrives as one edited line; bytes typed ahead stay in rustyline's buffer between lines).
struct Lines {
    source: Source,
    pending: VecDeque<String>,
}

enum Source {
    Terminal(Box<rustyline::DefaultEditor>),
    Pipe(std::io::StdinLock<'static>),
}

impl Lines {
    fn open() -> anyhow::Result<Lines> {
        let source = if std::io::stdin().is_terminal() {
            Source::Terminal(Box::new(rustyline::DefaultEditor::new()?))
        } else {
            Source::Pipe(std::io::stdin().lock())
        };
        Ok(Lines {
            source,
            pending: VecDeque::new(),
        })
    }

    fn is_terminal(&self) -> bool {
        matches!(self.source, Source::Terminal(_))
    }

    /// The next line, or `None` at the end of input.
    fn next(&mut self, prompt: &str) -> anyhow::Result<Option<String>> {
        if let Some(line) = self.pending.pop_front() {
            if self.is_terminal() {
                println!("{prompt}{line}");
            }
            return Ok(Some(line));
        }
        let read = match &mut self.source {
            Source::Terminal(editor) => match editor.readline(prompt) {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = editor.add_history_entry(line.as_str());
                    }
                    line
                }
                Err(rustyline::error::ReadlineError::Eof) => return Ok(None),
                // Ctrl-C clears the line, as in other shells.
                Err(rustyline::error::ReadlineError::Interrupted) => String::new(),
                Err(e) => return Err(e.into()),
            },
            Source::Pipe(stdin) => {
                let mut line = String::new();
                if stdin.read_line(&mut line)? == 0 {
                    return Ok(None);
                }
                line
            }
        };
        // A pasted block is several commands: run them one at a time, in order.
        let mut lines = read.lines().map(str::to_string);
        let first = lines.next().unwrap_or_default();
        self.pending.extend(lines.filter(|l| !l.trim().is_empty()));
        Ok(Some(first))
    }
}

/// How long the shell tries to reach a node again after its own stopped answering.
const RECONNECT_PATIENCE: Duration = Duration::from_secs(10);

/// Why a command failed.
enum Failed {
    /// Said to the user; the session goes on.
    Said(String),
    /// The node stopped answering: said to the user, and the shell connects again.
    NodeLost(String),
}

impl From<String> for Failed {
    fn from(said: String) -> Failed {
        Failed::Said(said)
    }
}

impl From<&str> for Failed {
    fn from(said: &str) -> Failed {
        Failed::Said(said.to_string())
    }
}

/// Connect to `first`, or, unless `only_first`, to any other node of the cluster, trying them
/// in turn until one answers or [`RECONNECT_PATIENCE`] ran out.
async fn connect(
    cluster: &Cluster,
    clients: &ClientConfig,
    first: NodeId,
    only_first: bool,
) -> anyhow::Result<(NodeId, TcpTransport)> {
    let order = cluster.nodes_from(&[first]);
    let order = if only_first { &order[..1] } else { &order[..] };
    let start = Instant::now();
    let mut last = None;
    for node in order.iter().cycle() {
        match cluster.connect(clients, *node).await {
            Ok(transport) => return Ok((*node, transport)),
            Err(e) if e.downcast_ref::<crate::BadInput>().is_some() => return Err(e),
            Err(e) => last = Some(e),
        }
        if only_first || start.elapsed() > RECONNECT_PATIENCE {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last.expect("a connection was tried"))
}

/// Run the shell against the cluster at `config`, coordinated by node `node` (default 0, or
/// the first node that answers). When its node stops answering, the shell says so, drops the
/// open transaction and connects again, to the same node or another.
pub fn run(config: &Path, node: Option<u32>) -> anyhow::Result<()> {
    let cluster = Cluster::load(config)?;
    let mut home = NodeId(node.unwrap_or(0));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // Recorded, so that `exec` can show what the node's run of a procedure read and wrote.
        let recorder = HistoryRecorder::new();
        let clients = cluster.client_config(REQUEST_TIMEOUT)?;
        let mut lines = Lines::open()?;
        // How long the nodes keep a transaction that hears nothing from its client.
        let idle_limit = cluster.options.idle_txn_timeout;
        let mut failed = 0usize;
        let mut reconnecting = false;
        loop {
            // A node named on the command line is the only one tried at first.
            let only_first = node.is_some() && !reconnecting;
            let (at, transport) = connect(&cluster, &clients, home, only_first).await?;
            home = at;
            let session = Session::recorded(transport, recorder.clone());
            if reconnecting {
                println!("connected to node {home}");
            } else if lines.is_terminal() {
                println!(
                    "connected to node {home} of cluster {} ({}); `help` lists the commands",
                    cluster.identity.cluster_id, cluster.protocol.name
                );
            }
            let ended = converse(&session, &recorder, &mut lines, idle_limit, &mut failed).await?;
            match ended {
                Conversation::InputEnded => break,
                Conversation::NodeLost => {
                    println!("node {home} does not answer: connecting again");
                    reconnecting = true;
                }
            }
        }
        // A script fed through a pipe learns from the exit status that something failed.
        if failed > 0 && !lines.is_terminal() {
            return Err(anyhow::anyhow!("{failed} command(s) failed"));
        }
        Ok(())
    })
}

/// How a conversation on one connection ended.
enum Conversation {
    /// No more input, or `quit`: the shell ends.
    InputEnded,
    /// The node stopped answering: the shell connects again.
    NodeLost,
}

/// Run the commands `lines` gives on `session` until the input ends or the node is lost,
/// counting the commands that failed in `failed`. An open transaction is rolled back at the
/// end of the input, and goes with the node when it is lost.
async fn converse(
    session: &Session<TcpTransport>,
    recorder: &HistoryRecorder,
    lines: &mut Lines,
    idle_limit: Duration,
    failed: &mut usize,
) -> anyhow::Result<Conversation> {
    let mut txn: Option<Txn<'_, TcpTransport>> = None;
    // When the open transaction last sent the node a request.
    let mut last_request = Instant::now();
    loop {
        let prompt = if txn.is_some() { "augur*> " } else { "augur> " };
        let Some(line) = lines.next(prompt)? else {
            break;
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let idle = last_request.elapsed();
        if txn.is_some() && idle > idle_limit && !words.is_empty() {
            // The node has rolled it back; running the command now would do something else
            // (a `put` outside a transaction commits at once).
            txn = None;
            *failed += 1;
            println!(
                "error: the open transaction sat idle for {} s, longer than the cluster keeps \
                 an idle transaction ({} s: `idle_txn_timeout_ms` in the cluster file's \
                 [options]); the node rolled it back, so '{}' was not run: begin again",
                idle.as_secs(),
                idle_limit.as_secs_f64(),
                line.trim()
            );
            continue;
        }
        let result = match words.as_slice() {
            [] => Ok(String::new()),
            ["quit" | "exit"] => break,
            ["help"] => Ok(HELP.to_string()),
            ["exec", ..] => exec(session, recorder, txn.is_some(), &line).await,
            _ => step(session, &mut txn, &line).await,
        };
        // Only these reach the node (a `put` or `del` in a transaction waits for the commit).
        if matches!(
            words.as_slice(),
            ["begin" | "get" | "commit" | "abort" | "exec", ..]
        ) {
            last_request = Instant::now();
        }
        match result {
            Ok(out) if out.is_empty() => {}
            Ok(out) => println!("{out}"),
            Err(Failed::Said(e)) => {
                *failed += 1;
                println!("error: {e}");
            }
            Err(Failed::NodeLost(e)) => {
                *failed += 1;
                println!("error: {e}");
                if txn.is_some() {
                    println!(
                        "the open transaction went with the node (a commit already sent may \
                         have taken effect): begin again"
                    );
                }
                return Ok(Conversation::NodeLost);
            }
        }
        if matches!(words.as_slice(), ["begin", ..]) && txn.is_some() && lines.is_terminal() {
            println!(
                "(the cluster rolls back a transaction idle for more than {} s)",
                idle_limit.as_secs_f64()
            );
        }
    }
    if let Some(open) = txn.take() {
        open.abort().await;
        println!("rolled back the open transaction");
    }
    Ok(Conversation::InputEnded)
}

fn key(text: &str) -> Key {
    Key::from_bytes(text.as_bytes())
}

fn show(value: Option<Value>) -> String {
    match value {
        Some(v) => format!("\"{}\"", String::from_utf8_lossy(&v)),
        None => "(absent)".to_string(),
    }
}

/// An error of a transaction, in words.
fn explain(e: TxnError) -> Failed {
    match e {
        TxnError::Aborted(reason) => {
            Failed::Said(format!("aborted: {} ({reason})", reason.describe()))
        }
        TxnError::Unavailable(_) => Failed::NodeLost(e.to_string()),
        other => Failed::Said(other.to_string()),
    }
}

/// Run one command line; the text to print, or the error to report.
async fn step<'s>(
    session: &'s Session<TcpTransport>,
    txn: &mut Option<Txn<'s, TcpTransport>>,
    line: &str,
) -> Result<String, Failed> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["begin"] | ["begin", "read-only"] => {
            if txn.is_some() {
                return Err("a transaction is open: commit or abort it first".into());
            }
            let read_only = words.len() == 2;
            let begun = session.begin(read_only).await.map_err(explain)?;
            let said = format!("began {:?} at snapshot {:?}", begun.id(), begun.snapshot());
            *txn = Some(begun);
            Ok(said)
        }
        ["get", k] => match txn {
            Some(open) => {
                let value = open.read(&key(k)).await;
                settle(txn, value).map(show)
            }
            None => {
                let mut own = session.begin(true).await.map_err(explain)?;
                let value = own.read(&key(k)).await.map_err(explain)?;
                own.commit().await.map_err(explain)?;
                Ok(show(value))
            }
        },
        ["put", k, ..] | ["del", k] => {
            let value = match words[0] {
                "del" => None,
                _ => {
                    // The value is the rest of the line after the key, spaces included.
                    let rest = line.trim_start()[3..].trim_start()[k.len()..].trim();
                    if rest.is_empty() {
                        return Err("put needs a value: put KEY VALUE".into());
                    }
                    Some(Value::from(rest.as_bytes().to_vec()))
                }
            };
            match txn {
                Some(open) => {
                    let written = open.write(key(k), value);
                    settle(txn, written).map(|()| "ok (at commit)".to_string())
                }
                None => {
                    let mut own = session.begin(false).await.map_err(explain)?;
                    own.write(key(k), value).map_err(explain)?;
                    let ts = own.commit().await.map_err(explain)?;
                    Ok(format!("committed at {ts:?}"))
                }
            }
        }
        ["commit"] => {
            let open = txn.take().ok_or("no transaction is open")?;
            let ts = open.commit().await.map_err(explain)?;
            Ok(format!("committed at {ts:?}"))
        }
        ["abort"] => {
            let open = txn.take().ok_or("no transaction is open")?;
            open.abort().await;
            Ok("rolled back".into())
        }
        [verb, ..] if ["begin", "get", "put", "del", "commit", "abort"].contains(verb) => {
            Err(format!("'{}': wrong arguments; `help` shows the forms", line.trim()).into())
        }
        [verb, ..] => Err(format!("unknown command '{verb}'; `help` lists the commands").into()),
        [] => Ok(String::new()),
    }
}

/// `exec WORKLOAD/PROCEDURE ARGS`: run a registered procedure one-shot and show what it did.
async fn exec(
    session: &Session<TcpTransport>,
    recorder: &HistoryRecorder,
    in_transaction: bool,
    line: &str,
) -> Result<String, Failed> {
    if in_transaction {
        return Err(
            "exec runs a transaction of its own: commit or abort the open one first".into(),
        );
    }
    let usage = "exec WORKLOAD/PROCEDURE ARGS, ARGS the procedure's arguments as JSON (`help` shows an example)";
    let rest = line
        .trim_start()
        .strip_prefix("exec")
        .unwrap_or_default()
        .trim();
    let (name, args) = rest.split_once(char::is_whitespace).ok_or(usage)?;
    let (workload, procedure) = name.split_once('/').ok_or(usage)?;
    let call = ProcedureCall {
        workload: workload.to_string(),
        procedure: procedure.to_string(),
        args: args.trim().as_bytes().to_vec(),
        args_format: ArgsFormat::Json,
    };
    let mut procedure = Catalog.instantiate(&call).map_err(|e| e.to_string())?;
    let before = recorder.len();
    let attempt = execute_one_shot(session, procedure.as_mut(), Speculation::default(), None).await;
    let outcome = match attempt {
        Attempt::Done(outcome) => outcome,
        Attempt::Speculative(commit) => commit.outcome().await,
    };
    let mut out = match outcome {
        Outcome::Committed { commit_ts } => format!("committed at {commit_ts:?}"),
        Outcome::Aborted(reason) => format!("aborted: {} ({reason})", reason.describe()),
        Outcome::Unknown => "the outcome is unknown: the node did not answer in time".into(),
    };
    let records = recorder.records();
    if records.len() > before
        && let Some(record) = records.last()
    {
        for op in &record.ops {
            let (verb, key, value) = match op {
                Op::Read { key, value } => ("read ", key, value),
                Op::Write { key, value } => ("wrote", key, value),
            };
            let value = value
                .as_deref()
                .map_or("(absent)".into(), |v| format!("\"{v}\""));
            out.push_str(&format!("\n  {verb} {key} {value}"));
        }
    }
    Ok(out)
}

/// A transaction operation's result: an abort ends the transaction.
fn settle<T>(
    txn: &mut Option<Txn<'_, TcpTransport>>,
    result: Result<T, TxnError>,
) -> Result<T, Failed> {
    result.map_err(|e| {
        if matches!(e, TxnError::Aborted(_)) {
            *txn = None;
        }
        explain(e)
    })
}
