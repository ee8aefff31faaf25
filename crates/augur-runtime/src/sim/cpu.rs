//! The simulator's CPU model: virtual time that a node's work takes.
//!
//! Without a model, a handler takes no virtual time: a node has unlimited cores, and only the
//! network, the log's syncs and the clients' think times make time pass. With one
//! ([`SimConfig::cpu`](super::SimConfig::cpu)), each node has [`CpuModel::cores`] cores and
//! every input it handles is work for one of them:
//!
//! * an input (a peer message, a client request, a timer) waits in the node's queue, in
//!   arrival order, until a core is free;
//! * its handler then runs, and the core is busy for the input's cost ([`WorkCosts`]) plus the
//!   cost of the work the handler reported through [`Ctx::charge`](crate::Ctx::charge): store
//!   reads and writes, one-shot procedure steps;
//! * the handler's messages, replies and timers leave when that time is over (and, as always,
//!   not before the records it persisted are durable). Its records go to the log at once, so the
//!   disk works while the core does;
//! * work that names a [`SerialResource`] also waits until the previous work on that resource
//!   has finished, holding its core meanwhile;
//! * with [`WorkCosts::client`] set, clients run on their home node's cores (as the papers'
//!   workload stressors did): each transaction attempt a client starts first takes that long
//!   on a core of its home node.
//!
//! The model is a queueing model, not an emulator. A handler's state change takes effect when
//! it starts, not when its time is over, so a handler started later on another core of the same
//! node may see it early; only the node's output is delayed. Costs are per unit and the same for
//! every protocol; what a unit costs in reality varies with the data (a TPC-C row is larger than
//! a YCSB-T field). `docs/virtual-time.md` states the calibrated defaults and how they were
//! measured.

use augur_contract::SerialResource;
use augur_contract::Work;
use std::collections::BTreeMap;
use std::time::Duration;

/// What one unit of each kind of work costs a core.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct WorkCosts {
    /// Handling one message from a peer (decoding it and running the handler's own logic).
    #[serde(serialize_with = "as_micros")]
    pub message: Duration,
    /// Handling one client request (including its share of the connection's work).
    #[serde(serialize_with = "as_micros")]
    pub request: Duration,
    /// Handling one timer.
    #[serde(serialize_with = "as_micros")]
    pub timer: Duration,
    /// One version read (a read served, a key certified against).
    #[serde(serialize_with = "as_micros")]
    pub read: Duration,
    /// One version written (prepared, installed or made visible).
    #[serde(serialize_with = "as_micros")]
    pub write: Duration,
    /// One operation of a one-shot procedure running at its coordinator.
    #[serde(serialize_with = "as_micros")]
    pub step: Duration,
    /// A client's own work per transaction attempt, on its home node's cores (zero: clients
    /// run elsewhere).
    #[serde(serialize_with = "as_micros")]
    pub client: Duration,
}

fn as_micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e6)
}

impl Default for WorkCosts {
    /// Calibrated on the in-process runtime of a 2-core machine (`docs/virtual-time.md`).
    fn default() -> Self {
        WorkCosts {
            message: Duration::from_nanos(1_500),
            request: Duration::from_nanos(1_000),
            timer: Duration::from_nanos(1_500),
            read: Duration::from_nanos(150),
            write: Duration::from_nanos(150),
            step: Duration::from_nanos(1_100),
            client: Duration::from_nanos(3_000),
        }
    }
}

/// The kinds of input a node handles, each with its own cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum InputKind {
    Message,
    Request,
    Timer,
    /// A co-located client's own work for one transaction attempt (see
    /// [`WorkCosts::client`]).
    Client,
    /// Work a handler handed off to a worker ([`augur_contract::Ctx::offload`]): only the work it
    /// reports costs, its hand-off is the timer that delivers its result.
    Worker,
}

impl InputKind {
    pub const ALL: [InputKind; 5] = [
        InputKind::Message,
        InputKind::Request,
        InputKind::Timer,
        InputKind::Client,
        InputKind::Worker,
    ];

    pub fn name(self) -> &'static str {
        match self {
            InputKind::Message => "message",
            InputKind::Request => "request",
            InputKind::Timer => "timer",
            InputKind::Client => "client",
            InputKind::Worker => "worker",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The cores of every node and what each unit of work costs.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct CpuModel {
    /// Cores per node.
    pub cores: u32,
    pub cost: WorkCosts,
}

/// The settings a CPU model reads, without the `sim.` prefix the command line gives them, with
/// what each means.
pub const CPU_SETTINGS: &[(&str, &str)] = &[
    (
        "cores",
        "cores per node (default 2, the papers' m4.large; `unlimited`: work takes no time)",
    ),
    ("cost.message", "µs a core spends handling one peer message"),
    (
        "cost.request",
        "µs a core spends handling one client request",
    ),
    ("cost.timer", "µs a core spends handling one timer"),
    ("cost.read", "µs per version read from the store"),
    ("cost.write", "µs per version written to the store"),
    ("cost.step", "µs per operation of a one-shot procedure"),
    (
        "cost.client",
        "µs of a client's own work per transaction attempt, on its home node (0: clients run elsewhere)",
    ),
];

impl CpuModel {
    /// The default model: 2 cores per node, the calibrated costs.
    pub const DEFAULT_CORES: u32 = 2;

    /// The model `settings` describe (keys of [`CPU_SETTINGS`], defaults for the rest), or
    /// `None` when `cores=unlimited`. An unknown key or a bad value is an error that says
    /// what is valid.
    pub fn from_settings(settings: &BTreeMap<String, String>) -> Result<Option<CpuModel>, String> {
        let mut model = CpuModel {
            cores: Self::DEFAULT_CORES,
            cost: WorkCosts::default(),
        };
        let mut unlimited = false;
        for (key, value) in settings {
            if key == "cores" {
                if value == "unlimited" {
                    unlimited = true;
                    continue;
                }
                model.cores = value
                    .parse()
                    .ok()
                    .filter(|&c| c > 0)
                    .ok_or_else(|| {
                        format!(
                            "sim.cores must be a whole number of cores, 1 or more, or `unlimited`; got '{value}'"
                        )
                    })?;
                continue;
            }
            let slot = match key.as_str() {
                "cost.message" => &mut model.cost.message,
                "cost.request" => &mut model.cost.request,
                "cost.timer" => &mut model.cost.timer,
                "cost.read" => &mut model.cost.read,
                "cost.write" => &mut model.cost.write,
                "cost.step" => &mut model.cost.step,
                "cost.client" => &mut model.cost.client,
                _ => {
                    let valid: Vec<String> = CPU_SETTINGS
                        .iter()
                        .map(|(k, _)| format!("sim.{k}"))
                        .collect();
                    return Err(format!(
                        "unknown simulator setting 'sim.{key}'; valid settings: {}",
                        valid.join(", ")
                    ));
                }
            };
            let micros: f64 = value
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0 && *v < 1e9)
                .ok_or_else(|| {
                    format!("sim.{key} must be a number of microseconds, 0 or more; got '{value}'")
                })?;
            *slot = Duration::from_nanos((micros * 1000.0).round() as u64);
        }
        Ok((!unlimited).then_some(model))
    }

    /// How long a core is busy with an input of `kind` whose handler reported `work`.
    pub fn cost(&self, kind: InputKind, work: Work) -> Duration {
        let c = &self.cost;
        let base = match kind {
            InputKind::Message => c.message,
            InputKind::Request => c.request,
            InputKind::Timer => c.timer,
            InputKind::Client => c.client,
            InputKind::Worker => Duration::ZERO,
        };
        base + c.read * work.reads + c.write * work.writes + c.step * work.steps
    }
}

/// One node's cores: how many are busy, and until when each serial resource is taken.
#[derive(Debug, Default)]
pub(crate) struct NodeCpu {
    pub busy: u32,
    serial_free_us: BTreeMap<SerialResource, u64>,
    /// Core-microseconds of work started since the run began.
    pub busy_us: u64,
    /// Virtual time runs in whole microseconds and costs are finer: the nanoseconds of work
    /// not yet charged, carried to the next piece of work so that none is lost on average.
    carry_ns: u64,
}

impl NodeCpu {
    /// Reserve a core at `now_us` for work of `cost` on `serial` (if any): when it ends.
    pub fn start(&mut self, now_us: u64, cost: Duration, serial: Option<SerialResource>) -> u64 {
        let cost_ns = cost.as_nanos() as u64 + self.carry_ns;
        let cost_us = cost_ns / 1000;
        self.carry_ns = cost_ns % 1000;
        let start = match serial {
            Some(r) => now_us.max(self.serial_free_us.get(&r).copied().unwrap_or(0)),
            None => now_us,
        };
        let end = start + cost_us;
        if let Some(r) = serial {
            self.serial_free_us.insert(r, end);
        }
        self.busy += 1;
        self.busy_us += end - now_us;
        end
    }

    /// A core finished its work.
    pub fn finish(&mut self) {
        self.busy = self.busy.saturating_sub(1);
    }

    /// A crash: every core is idle again, every resource free.
    pub fn reset(&mut self) {
        let busy_us = self.busy_us;
        *self = NodeCpu::default();
        self.busy_us = busy_us;
    }
}

/// What the nodes of a run did under the CPU model, per kind of input.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CpuReport {
    /// The model the run used.
    pub model: CpuModel,
    /// Per kind of input: how many were handled, the work they reported, the virtual time the
    /// model charged for them and the real time their handlers took in this process.
    pub inputs: BTreeMap<&'static str, KindReport>,
    /// Each node's busy fraction (core time used over core time available) over the report's
    /// span.
    pub utilization: Vec<f64>,
    /// Each node's core time used since the start, in µs, and virtual time then: what
    /// [`CpuReport::since`] takes differences of.
    #[serde(skip)]
    busy_us: Vec<u64>,
    #[serde(skip)]
    at_us: u64,
}

impl CpuReport {
    /// What happened between `before` (an earlier report of the same run; `None`: the start)
    /// and this report.
    pub fn since(&self, before: Option<&CpuReport>) -> CpuReport {
        let Some(before) = before else {
            return self.clone();
        };
        let busy = self.busy_us.iter().zip(&before.busy_us);
        let utilization = busy_fractions(
            busy.map(|(after, before)| after.saturating_sub(*before)),
            self.at_us.saturating_sub(before.at_us),
            self.model.cores,
        );
        let inputs = self
            .inputs
            .iter()
            .map(|(kind, after)| {
                let k = match before.inputs.get(kind) {
                    Some(b) => KindReport {
                        count: after.count - b.count,
                        reads: after.reads - b.reads,
                        writes: after.writes - b.writes,
                        steps: after.steps - b.steps,
                        modelled_us: after.modelled_us - b.modelled_us,
                        measured_us: after.measured_us - b.measured_us,
                    },
                    None => *after,
                };
                (*kind, k)
            })
            .collect();
        CpuReport {
            model: self.model,
            inputs,
            utilization,
            busy_us: self.busy_us.clone(),
            at_us: self.at_us,
        }
    }
}

/// Each node's core time used (`busy_us`) over the core time `cores` offer in `span_us`.
fn busy_fractions(busy_us: impl Iterator<Item = u64>, span_us: u64, cores: u32) -> Vec<f64> {
    let available = span_us.max(1) as f64 * f64::from(cores);
    busy_us.map(|b| b as f64 / available).collect()
}

/// One kind of input in a [`CpuReport`].
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct KindReport {
    pub count: u64,
    pub reads: u64,
    pub writes: u64,
    pub steps: u64,
    /// Virtual core time charged, in µs.
    pub modelled_us: f64,
    /// Real time the handlers took in this process, in µs: what calibration compares against.
    pub measured_us: f64,
}

/// Per-kind accounting kept while a simulation runs.
#[derive(Debug, Default)]
pub(crate) struct CpuAccounts {
    kinds: [KindReport; InputKind::ALL.len()],
}

impl CpuAccounts {
    pub fn record(&mut self, kind: InputKind, work: Work, modelled: Duration, measured: Duration) {
        let k = &mut self.kinds[kind.index()];
        k.count += 1;
        k.reads += u64::from(work.reads);
        k.writes += u64::from(work.writes);
        k.steps += u64::from(work.steps);
        k.modelled_us += modelled.as_secs_f64() * 1e6;
        k.measured_us += measured.as_secs_f64() * 1e6;
    }

    /// Real time spent running client code (charged to the `client` kind's measured time).
    pub fn client_time(&mut self, measured: Duration) {
        self.kinds[InputKind::Client.index()].measured_us += measured.as_secs_f64() * 1e6;
    }

    /// The report at virtual time `at_us`, when the nodes had used `busy_us` of core time.
    pub fn report(&self, model: CpuModel, busy_us: Vec<u64>, at_us: u64) -> CpuReport {
        let utilization = busy_fractions(busy_us.iter().copied(), at_us, model.cores);
        CpuReport {
            model,
            inputs: InputKind::ALL
                .iter()
                .filter(|k| self.kinds[k.index()].count > 0)
                .map(|k| (k.name(), self.kinds[k.index()]))
                .collect(),
            utilization,
            busy_us,
            at_us,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn settings_set_cores_and_costs_and_refuse_nonsense() {
        let model = CpuModel::from_settings(&settings(&[("cores", "8"), ("cost.read", "1.5")]))
            .unwrap()
            .unwrap();
        assert_eq!(model.cores, 8);
        assert_eq!(model.cost.read, Duration::from_nanos(1500));
        assert_eq!(model.cost.write, WorkCosts::default().write);
        assert_eq!(
            CpuModel::from_settings(&settings(&[("cores", "unlimited")])).unwrap(),
            None
        );
        for bad in [
            ("cores", "0"),
            ("cores", "two"),
            ("cost.read", "-1"),
            ("cost.read", "NaN"),
            ("cost.disk", "1"),
        ] {
            let e = CpuModel::from_settings(&settings(&[bad])).unwrap_err();
            assert!(e.contains(&format!("sim.{}", bad.0)), "{e}");
        }
    }

    #[test]
    fn cost_adds_reported_work_to_the_input() {
        let model = CpuModel::from_settings(&BTreeMap::new()).unwrap().unwrap();
        let work = Work {
            reads: 2,
            writes: 3,
            steps: 1,
            serial: None,
        };
        let c = model.cost;
        assert_eq!(
            model.cost(InputKind::Message, work),
            c.message + c.read * 2 + c.write * 3 + c.step
        );
    }

    #[test]
    fn a_serial_resource_orders_work_that_names_it() {
        let mut cpu = NodeCpu::default();
        let r = Some(SerialResource(7));
        let ten = Duration::from_micros(10);
        // Fractions of a microsecond add up rather than vanish.
        let mut fine = NodeCpu::default();
        let ends: Vec<u64> = (0..5)
            .map(|_| {
                let end = fine.start(0, Duration::from_nanos(400), None);
                fine.finish();
                end
            })
            .collect();
        assert_eq!(ends, [0, 0, 1, 0, 1], "2 µs of work in 0.4 µs pieces");
        assert_eq!(cpu.start(100, ten, r), 110);
        // A second core is free at 105, but the resource is not until 110.
        assert_eq!(cpu.start(105, ten, r), 120);
        assert_eq!(cpu.start(105, ten, None), 115);
        assert_eq!(cpu.busy, 3);
        assert_eq!(cpu.busy_us, 10 + 15 + 10);
        cpu.reset();
        assert_eq!(cpu.busy, 0);
        assert_eq!(cpu.start(111, ten, r), 121, "a crash frees the resource");
    }
}
