//! Shared helpers of the golden trace tests (`golden_*.rs`): a traced simulation, scripted
//! client transactions with a record of what each client saw, the comparison of a rendered
//! trace with its checked-in golden file under `tests/golden/` (or its rewriting when
//! `AUGUR_BLESS=1` is set), in [`scenarios`] the scenarios several protocols' golden tests
//! script identically, and in [`one_shot`] scripted one-shot transactions (the only form in
//! which the order-then-execute protocols take a transaction that reads) with a readable
//! rendering of their Raft traffic.
//!
//! Golden files are named `PROTOCOL.SCENARIO.trace`, `PROTOCOL` being the protocol's registered
//! name (`clocksi-rep.single_partition_commit.trace`), so that `ls tests/golden/PROTOCOL.*`
//! lists what pins a protocol and `diff tests/golden/{A,B}.SCENARIO.trace` compares two
//! protocols on one scenario.
//!
//! # Reading a golden file
//!
//! A golden file holds the scenario's node-level trace with idle periodic ticks (a
//! garbage-collection tick that only re-arms itself) left out ([`Trace::without_idle_ticks`];
//! the full format is in the `augur_runtime::sim` module documentation). One line per event:
//! virtual time in milliseconds since the start, the node, then what happened (`recv`,
//! `request`, `timer`, `start`, `restart`, `synced`, `crash`, `lost`...); the effects of a
//! handler follow it, indented (`persist`, `send`, `reply`, `set-timer`, `hold`), and messages
//! and replies held until the log is synced leave with `release` lines after the `synced` line
//! that frees them. `ts(MS)` is a node-clock timestamp in milliseconds since the start. After a
//! `--- clients ---` line, one line per scripted transaction: what its client read, and how it
//! ended.
//!
//! The order-then-execute protocols' traces (`calvin`, `s-smr`) are rewritten for reading
//! ([`one_shot::readable`]): a Raft message, log entry or hard state, which the protocol
//! carries as prost-encoded bytes, is shown decoded (its kind, then every field that is not
//! zero: `MsgAppend(n0->n1 term=2 log_term=2 index=3 commit=3 entries=[4@2 batch ...])`,
//! a batch as its origin, number, floor and transactions), a procedure call as
//! `golden/NAME(ARGS)`, and a position in the order `Timestamp(INDEX << 20 | SLOT)` as
//! `pos(INDEX.SLOT)`.
//!
//! So are those of `dst-occ` and `dst-2pl`, whose timestamps are hybrid (the physical clock
//! in the high bits, a logical counter in the low 12, `augur_types::Hybrid`): one whose
//! physical part is a node-clock reading shows as `hts(MS)`, or `hts(MS+L)` with logical part
//! `L` ([`readable_hybrid`]).
//!
//! # When a golden test fails
//!
//! The failure shows a line diff (`-` golden, `+` this run) of the first differences, with
//! context, and saves the whole trace of the run under the target directory. If the change is
//! intended, rewrite the golden files (`AUGUR_BLESS=1 cargo test -p augur-protocols --test
//! it golden_X::`) and review `git diff -- crates/augur-protocols/tests/golden/` like code.
//!
//! # Topology
//!
//! Every scenario runs "3dc" cut to two data centres (VA, OR: about 33.5 ms apart one way,
//! 0.1 ms within one) or "lan", with ring placements where key `Key::numbered(p, _)` lives in
//! partition `p`, mastered by node `p` with its slaves on the next nodes. Logs sync in 0.1 ms.

// Each golden test file uses a different part of these helpers.
#![allow(dead_code)]

pub mod one_shot;
pub mod scenarios;
pub mod scripted;
pub mod two_sites;

use augur_client::{CommitProgress, HistoryRecorder, Outcome, Session, Transport};
use augur_contract::forms::Procedures;
use augur_contract::{Protocol, ProtocolOptions};
use augur_runtime::sim::{SimConfig, Simulation, Trace};
use augur_types::{Key, LatencyProfile, NodeId, Placement};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The environment variable that turns comparison into rewriting.
pub const BLESS_VAR: &str = "AUGUR_BLESS";

/// Seed of every golden scenario.
pub const SEED: u64 = 7;

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Options that keep the placement's masters (`failover=off`), for scenarios timed from the
/// first millisecond: no configuration group runs and no lease is awaited (`failover.rs`
/// tests fail-over itself). Protocols without fail-over ignore the setting.
pub fn static_masters() -> ProtocolOptions {
    ProtocolOptions {
        settings: [("failover".to_string(), "off".to_string())].into(),
        ..ProtocolOptions::default()
    }
}

/// A simulation of `nodes` nodes on the first `dcs` data centres of latency profile `profile`
/// (ring placement, replication factor `rf`), recording a trace from the start.
pub fn traced_sim<P: Protocol>(
    profile: &str,
    dcs: usize,
    nodes: usize,
    rf: usize,
    options: ProtocolOptions,
) -> Simulation<P> {
    traced_sim_with(profile, dcs, nodes, rf, options, Procedures::none())
}

/// [`traced_sim`] whose nodes run one-shot transactions with `procedures`.
pub fn traced_sim_with<P: Protocol>(
    profile: &str,
    dcs: usize,
    nodes: usize,
    rf: usize,
    options: ProtocolOptions,
    procedures: Procedures,
) -> Simulation<P> {
    let profile = LatencyProfile::named(profile)
        .unwrap()
        .truncated(dcs)
        .unwrap();
    let placement = Arc::new(Placement::ring(profile, nodes, rf).unwrap());
    let config = SimConfig {
        trace: true,
        procedures,
        ..SimConfig::new(SEED)
    };
    Simulation::new(placement, Arc::new(options), config)
}

/// Assert that `key`'s replicas are `replicas`, master first: the layout a scenario relies on.
pub fn assert_replicas<P: Protocol>(sim: &Simulation<P>, key: &Key, replicas: &[u32]) {
    let pl = sim.placement();
    let expected: Vec<NodeId> = replicas.iter().map(|n| NodeId(*n)).collect();
    assert_eq!(pl.replicas(pl.partition_of(key)), &expected[..], "{key}");
}

/// One client operation of a scripted transaction.
#[derive(Clone, Debug)]
pub enum Step {
    Read(Key),
    Write(Key, &'static str),
    /// Client think time inside the transaction.
    Sleep(Duration),
}

/// A scripted transaction.
#[derive(Clone, Debug)]
pub struct Txn {
    pub name: &'static str,
    /// Begun with `begin_speculative`: may read local-committed versions.
    pub speculative_reads: bool,
    /// Committed with `commit_speculative`: the client goes on at local commit and collects the
    /// final outcome once its last transaction is done.
    pub speculative_commit: bool,
    /// Begun as a read-write transaction even if it writes nothing (otherwise a transaction
    /// without writes is declared read-only).
    pub read_write: bool,
    pub steps: Vec<Step>,
}

impl Txn {
    pub fn new(name: &'static str) -> Txn {
        Txn {
            name,
            speculative_reads: false,
            speculative_commit: false,
            read_write: false,
            steps: Vec::new(),
        }
    }

    pub fn read(mut self, key: &Key) -> Txn {
        self.steps.push(Step::Read(key.clone()));
        self
    }

    pub fn write(mut self, key: &Key, value: &'static str) -> Txn {
        self.steps.push(Step::Write(key.clone(), value));
        self
    }

    /// Declare it read-write, writes or not.
    pub fn read_write(mut self) -> Txn {
        self.read_write = true;
        self
    }

    pub fn sleep(mut self, d: Duration) -> Txn {
        self.steps.push(Step::Sleep(d));
        self
    }

    pub fn speculative_reads(mut self) -> Txn {
        self.speculative_reads = true;
        self
    }

    pub fn speculative_commit(mut self) -> Txn {
        self.speculative_commit = true;
        self
    }
}

/// What each scripted transaction's client saw, by transaction name (and, not rendered, when
/// its client learned how it ended).
#[derive(Clone, Default)]
pub struct Observed(
    Arc<Mutex<BTreeMap<&'static str, String>>>,
    Arc<Mutex<BTreeMap<&'static str, Duration>>>,
);

impl Observed {
    fn record(&self, name: &'static str, notes: &[String]) {
        let previous = self.0.lock().unwrap().insert(name, notes.join("; "));
        assert!(previous.is_none(), "two transactions named {name}");
    }

    /// [`Observed::record`], noting that the client learned the outcome at `at`.
    fn record_at(&self, name: &'static str, notes: &[String], at: Duration) {
        self.record(name, notes);
        self.1.lock().unwrap().insert(name, at);
    }

    /// When the client of transaction `name` learned how it ended (virtual time since the
    /// start; panics if it did not finish).
    pub fn finished_at(&self, name: &str) -> Duration {
        self.1
            .lock()
            .unwrap()
            .get(name)
            .copied()
            .unwrap_or_else(|| panic!("transaction {name} did not finish"))
    }

    /// What the client of transaction `name` saw (panics if it did not finish).
    pub fn of(&self, name: &str) -> String {
        self.0
            .lock()
            .unwrap()
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("transaction {name} did not finish"))
    }

    /// The values transaction `name` read, in order (`None` for a key with no version).
    pub fn reads(&self, name: &str) -> Vec<Option<String>> {
        self.of(name)
            .split("; ")
            .filter(|note| note.starts_with("read "))
            .map(|note| {
                let value = note.rsplit(" = ").next().expect("read note");
                (value != "None").then(|| value.trim_matches('"').to_string())
            })
            .collect()
    }

    /// Whether transaction `name` has finished (its client saw its outcome).
    pub fn finished(&self, name: &str) -> bool {
        self.0.lock().unwrap().contains_key(name)
    }

    /// Whether transaction `name` committed.
    pub fn committed(&self, name: &str) -> bool {
        self.of(name).ends_with("committed")
    }

    /// One line per transaction, by name.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, notes) in self.0.lock().unwrap().iter() {
            writeln!(out, "{name}: {notes}").unwrap();
        }
        out
    }
}

fn show_value(v: &Option<Bytes>) -> String {
    match v {
        None => "None".into(),
        Some(b) => format!("{:?}", String::from_utf8_lossy(b)),
    }
}

fn show_outcome(o: Outcome) -> String {
    match o {
        Outcome::Committed { .. } => "committed".into(),
        Outcome::Aborted(reason) => format!("aborted ({reason:?})"),
        Outcome::Unknown => "outcome unknown".into(),
    }
}

/// A value as [`Observed::reads`] lists it.
pub fn some(v: &str) -> Option<String> {
    Some(v.to_string())
}

/// Node `node`'s counter `name` (panics if it reports none by that name).
pub fn counter<P: Protocol>(s: &Simulation<P>, node: u32, name: &str) -> u64 {
    let counters = s.node(NodeId(node)).counters();
    counters
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no counter {name}: {counters:?}"))
}

/// Start a client on `home` that sleeps `start`, then runs `txns` one after the other. A
/// speculatively committed transaction's final outcome is awaited after the last one.
pub fn spawn_client<P: Protocol>(
    sim: &mut Simulation<P>,
    home: u32,
    start: Duration,
    txns: Vec<Txn>,
    observed: &Observed,
) {
    spawn_client_recorded(sim, home, start, txns, observed, None);
}

/// [`spawn_client`], also recording the client's history in `recorder` (for the checker).
pub fn spawn_client_recorded<P: Protocol>(
    sim: &mut Simulation<P>,
    home: u32,
    start: Duration,
    txns: Vec<Txn>,
    observed: &Observed,
    recorder: Option<HistoryRecorder>,
) {
    let observed = observed.clone();
    sim.spawn_client(NodeId(home), move |t| async move {
        t.sleep(start).await;
        let session = match recorder {
            Some(recorder) => Session::recorded(t, recorder),
            None => Session::new(t),
        };
        let mut speculative = Vec::new();
        'txns: for txn in txns {
            let name = txn.name;
            let read_only =
                !txn.read_write && !txn.steps.iter().any(|s| matches!(s, Step::Write(..)));
            let begun = if txn.speculative_reads {
                session.begin_speculative(name, read_only).await
            } else {
                session.begin_named(name, read_only).await
            };
            let mut notes = Vec::new();
            let mut t = match begun {
                Ok(t) => t,
                Err(e) => {
                    let now = session.transport().now();
                    observed.record_at(name, &[format!("begin failed: {e:?}")], now);
                    continue;
                }
            };
            for step in txn.steps {
                match step {
                    Step::Sleep(d) => session.transport().sleep(d).await,
                    Step::Read(key) => match t.read(&key).await {
                        Ok(v) => notes.push(format!("read {key:?} = {}", show_value(&v))),
                        Err(e) => {
                            notes.push(format!("read {key:?} failed: {e:?}"));
                            observed.record_at(name, &notes, session.transport().now());
                            continue 'txns;
                        }
                    },
                    Step::Write(key, value) => {
                        notes.push(format!("write {key:?} = {value:?}"));
                        t.write(key, Some(Bytes::from_static(value.as_bytes())))
                            .unwrap();
                    }
                }
            }
            if txn.speculative_commit {
                match t.commit_speculative().await {
                    Ok(CommitProgress::Speculative(spec)) => {
                        notes.push("spec-committed".into());
                        speculative.push((name, notes, spec));
                        continue;
                    }
                    Ok(CommitProgress::Final(_)) => notes.push("committed".into()),
                    Err(e) => notes.push(format!("commit failed: {e:?}")),
                }
            } else {
                match t.commit().await {
                    Ok(_) => notes.push("committed".into()),
                    Err(e) => notes.push(format!("commit failed: {e:?}")),
                }
            }
            observed.record_at(name, &notes, session.transport().now());
        }
        for (name, mut notes, spec) in speculative {
            let outcome = spec.outcome().await;
            notes.push(format!("final: {}", show_outcome(outcome)));
            observed.record_at(name, &notes, session.transport().now());
        }
    });
}

/// Where one protocol's golden traces go: `tests/golden/PROTOCOL.SCENARIO.trace`.
#[derive(Clone, Copy)]
pub struct Golden {
    /// The test module (`golden_X`), named in the instructions on mismatch.
    pub test: &'static str,
    /// The protocol's registered name, which starts its golden files' names.
    pub protocol: &'static str,
    /// Rewrites the rendered trace for reading ([`one_shot::readable`] for the
    /// order-then-execute protocols; as it is for the others).
    pub readable: fn(String) -> String,
}

fn as_is(text: String) -> String {
    text
}

/// `text` with each hybrid timestamp `Timestamp(N)` whose physical part (`N >> 12`) lies near
/// the simulator's clock epoch shown as `hts(MS)` (or `hts(MS+L)`, `L` its logical part): the
/// node-clock reading in milliseconds since the start, as the simulator shows plain ones.
pub fn readable_hybrid(text: String) -> String {
    /// The simulator's clock epoch (`augur_runtime::sim`'s `EPOCH_US`): readings from it to
    /// four times it are rewritten (the simulator's own range, without readings before the
    /// start, which these scenarios never take).
    const EPOCH_US: u64 = 1_000_000_000;
    one_shot::rewrite(&text, "Timestamp(", |rest| {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[digits..].strip_prefix(')')?;
        let n: u64 = rest[..digits].parse().ok()?;
        let (physical, logical) = (n >> 12, n & 0xfff);
        if !(EPOCH_US..EPOCH_US * 4).contains(&physical) {
            return None;
        }
        let us = physical - EPOCH_US;
        let mut shown = format!("hts({}.{:03}", us / 1000, us % 1000);
        if logical != 0 {
            shown.push_str(&format!("+{logical}"));
        }
        shown.push(')');
        Some((shown, digits + 1))
    })
    // The marker is kept: drop it where a timestamp was rewritten.
    .replace("Timestamp(hts(", "hts(")
}

impl Golden {
    /// The golden files of `protocol` (its registered name), checked by test module `test`.
    pub const fn new(test: &'static str, protocol: &'static str) -> Golden {
        Golden {
            test,
            protocol,
            readable: as_is,
        }
    }

    /// [`Golden::new`] for a protocol whose traces are rewritten by `readable`.
    pub const fn readable(
        test: &'static str,
        protocol: &'static str,
        readable: fn(String) -> String,
    ) -> Golden {
        Golden {
            test,
            protocol,
            readable,
        }
    }

    /// Run `sim` until `until` ms, check that every scripted client finished, then compare the
    /// trace and the clients' view (returned) with golden file `PROTOCOL.SCENARIO`.
    pub fn finish<P: Protocol>(
        &self,
        mut sim: Simulation<P>,
        until: u64,
        observed: Observed,
        scenario: &str,
    ) -> Observed {
        sim.run_until(ms(until));
        self.check(&sim, &observed, scenario);
        observed
    }

    /// Check that every scripted client of `sim` finished, then compare the trace so far and
    /// the clients' view with golden file `PROTOCOL.SCENARIO`.
    pub fn check<P: Protocol>(&self, sim: &Simulation<P>, observed: &Observed, scenario: &str) {
        assert!(
            sim.clients_done(),
            "every scripted client finished: {}",
            observed.render()
        );
        let name = format!("{}.{scenario}", self.protocol);
        let text = (self.readable)(golden_text(sim.trace(), observed));
        check_golden(self.test, &name, &text);
    }
}

/// The text a golden file holds: the trace without idle ticks, then what the clients saw.
pub fn golden_text(trace: &Trace, observed: &Observed) -> String {
    format!(
        "{}--- clients ---\n{}",
        trace.without_idle_ticks().render(),
        observed.render()
    )
}

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
        .join(format!("{name}.trace"))
}

/// Compare `actual` with the golden file `tests/golden/NAME.trace`, or rewrite that file when
/// `AUGUR_BLESS=1` is set. `test` names the test target, for the instructions on mismatch.
pub fn check_golden(test: &str, name: &str, actual: &str) {
    let path = golden_path(name);
    if std::env::var(BLESS_VAR).is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        eprintln!(
            "blessed {} ({} lines)",
            path.display(),
            actual.lines().count()
        );
        return;
    }
    let bless = format!("{BLESS_VAR}=1 cargo test -p augur-protocols --test it {test}::");
    let expected = match std::fs::read_to_string(&path) {
        // A checkout that turned line ends into CRLF still compares equal.
        Ok(text) => text.replace("\r\n", "\n"),
        Err(e) => panic!(
            "no golden trace {} ({e}); create it with\n    {bless}\nand review it before \
             committing",
            path.display()
        ),
    };
    if expected == actual {
        return;
    }
    // Keep the whole actual trace where it can be looked at or diffed with other tools.
    let saved = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.trace"));
    let saved = match std::fs::write(&saved, actual) {
        Ok(()) => format!("the whole trace of this run is in {}", saved.display()),
        Err(e) => format!("(could not save this run's trace: {e})"),
    };
    panic!(
        "golden trace {name} differs from this run (- golden {}, + this run):\n{}\n{saved}\n\
         If the change is intended, rewrite the golden file with\n    {bless}\n\
         and review the diff (git diff -- {}) before committing.",
        path.display(),
        line_diff(&expected, actual, 3, 60),
        path.display(),
    );
}

/// A unified line diff of `old` and `new` (longest common subsequence), `context` lines around
/// each change, cut after `max_lines` lines of output.
pub fn line_diff(old: &str, new: &str, context: usize, max_lines: usize) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // The edit script: (tag, old line number, new line number, text).
    let mut ops: Vec<(char, usize, usize, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', i, j, a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', i, j, a[i]));
            i += 1;
        } else {
            ops.push(('+', i, j, b[j]));
            j += 1;
        }
    }
    let changed: Vec<usize> = (0..ops.len()).filter(|&k| ops[k].0 != ' ').collect();
    let (removed, added) = (
        ops.iter().filter(|o| o.0 == '-').count(),
        ops.iter().filter(|o| o.0 == '+').count(),
    );
    let mut out = format!("{removed} lines removed, {added} added\n");
    let mut printed = 0;
    let mut k = 0;
    while k < changed.len() {
        // One hunk: changes less than 2 * context lines apart, with context around.
        let start = changed[k].saturating_sub(context);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * context {
            end = changed[k];
            k += 1;
        }
        let end = (end + context + 1).min(ops.len());
        let (_, oi, nj, _) = ops[start];
        writeln!(
            out,
            "@@ golden line {}, this run line {} @@",
            oi + 1,
            nj + 1
        )
        .unwrap();
        for (tag, _, _, text) in &ops[start..end] {
            if printed == max_lines {
                writeln!(out, "... (diff cut after {max_lines} lines)").unwrap();
                return out;
            }
            writeln!(out, "{tag}{text}").unwrap();
            printed += 1;
        }
    }
    out
}
