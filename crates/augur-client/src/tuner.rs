//! Speculation degrees and STR's self-tuner (STR §6.7).
//!
//! A [`Degree`] says how much a client speculates: whether its transactions may read versions
//! that only committed locally (speculative reads), and how many speculatively committed
//! transactions it may have waiting for their final outcome (the speculation chain; 0 turns
//! speculative commits off).
//!
//! [`SpeculationTuner`] picks the degree for a set of clients as the paper's self-tuner does: it
//! climbs a ladder of increasing degrees (none, reads, reads with chains of 1 to 8), measuring
//! the committed throughput at each step for one interval, and stops at the first local maximum.
//! The paper's tuner then keeps moving; this one stays put, because every move costs an interval
//! at a worse degree, and instead watches the throughput with a two-sided CUSUM change detector:
//! when the load changes enough to shift throughput for a few intervals running, it explores
//! again from where it is. It is a black box: it sees only how many transactions committed. After
//! a move, the first part of the interval ([`TunerSettings::transition`]) is not measured, since
//! the transactions committing then mostly began at the previous degree.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How much a client speculates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Degree {
    /// Read versions of transactions that only committed locally.
    pub reads: bool,
    /// Speculatively committed transactions a client may have unresolved; 0 means none.
    pub chain: u32,
}

impl Degree {
    /// No speculation at all.
    pub const NONE: Degree = Degree {
        reads: false,
        chain: 0,
    };

    /// The paper's ladder of increasing degrees that a protocol offering speculative reads (if
    /// `reads`) and chains up to `max_chain` supports: none, reads, then chains 1..=max_chain
    /// (with reads, when offered).
    pub fn ladder(reads: bool, max_chain: u32) -> Vec<Degree> {
        let mut ladder = vec![Degree::NONE];
        if reads {
            ladder.push(Degree { reads, chain: 0 });
        }
        ladder.extend((1..=max_chain).map(|chain| Degree { reads, chain }));
        ladder
    }
}

impl fmt::Display for Degree {
    /// `none`, `reads`, `commits:N` or `reads+commits:N`: the form [`Degree::from_str`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.reads, self.chain) {
            (false, 0) => f.write_str("none"),
            (true, 0) => f.write_str("reads"),
            (false, n) => write!(f, "commits:{n}"),
            (true, n) => write!(f, "reads+commits:{n}"),
        }
    }
}

impl FromStr for Degree {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!(
                "unknown speculation degree '{s}': expected none, reads, commits:N or \
                 reads+commits:N (N from 1 to 8)"
            )
        };
        let (reads, commits) = match s {
            "none" => return Ok(Degree::NONE),
            "reads" => {
                return Ok(Degree {
                    reads: true,
                    chain: 0,
                });
            }
            _ => match s.strip_prefix("reads+") {
                Some(rest) => (true, rest),
                None => (false, s),
            },
        };
        let chain: u32 = commits
            .strip_prefix("commits:")
            .and_then(|n| n.parse().ok())
            .ok_or_else(bad)?;
        if !(1..=8).contains(&chain) {
            return Err(bad());
        }
        Ok(Degree { reads, chain })
    }
}

/// How the tuner measures and when it moves.
#[derive(Clone, Copy, Debug)]
pub struct TunerSettings {
    /// How long each degree is measured for before the tuner decides.
    pub interval: Duration,
    /// The relative throughput gain a step up (or down) must show to be taken.
    pub min_gain: f64,
    /// CUSUM slack: relative deviations from the settled throughput smaller than this are
    /// taken as noise.
    pub change_slack: f64,
    /// CUSUM threshold: exploration restarts when the accumulated relative deviation beyond the
    /// slack exceeds it.
    pub change_threshold: f64,
    /// The share of an interval after a move that is left out of its measure: transactions
    /// begun at the old degree are still committing then, and would credit (or charge) the new
    /// one with the old one's throughput.
    pub transition: f64,
}

impl Default for TunerSettings {
    fn default() -> Self {
        TunerSettings {
            interval: Duration::from_secs(1),
            min_gain: 0.03,
            change_slack: 0.10,
            change_threshold: 0.60,
            transition: 0.25,
        }
    }
}

/// The self-tuner shared by a set of clients: they ask it for the degree before each
/// transaction and tell it about each final commit. Cloning shares it.
#[derive(Clone)]
pub struct SpeculationTuner {
    committed: Arc<AtomicU64>,
    state: Arc<Mutex<TunerState>>,
}

struct TunerState {
    settings: TunerSettings,
    ladder: Vec<Degree>,
    current: usize,
    interval_start: Duration,
    count_at_start: u64,
    /// When this interval's measure starts (after the transition, if the tuner just moved), and
    /// the commit count then, once a caller has seen that moment.
    measure_from: Duration,
    count_at_measure: Option<u64>,
    phase: Phase,
    timeline: Vec<(Duration, Degree)>,
}

enum Phase {
    /// Climbing from `origin`: the throughput measured at each step tried so far, and the
    /// direction of the climb.
    Exploring {
        measured: Vec<Option<f64>>,
        origin: usize,
        up: bool,
    },
    /// At a local maximum, watching for a change of load with a two-sided CUSUM over the
    /// relative deviation from the mean throughput seen here.
    Settled {
        mean: f64,
        samples: u32,
        rise: f64,
        fall: f64,
    },
}

impl SpeculationTuner {
    /// A tuner over `ladder` (increasing degrees; see [`Degree::ladder`]) that starts exploring
    /// at its first step at time `now` (any clock, as long as every caller uses the same one).
    pub fn new(ladder: Vec<Degree>, settings: TunerSettings, now: Duration) -> Self {
        assert!(!ladder.is_empty(), "a tuner needs at least one degree");
        let steps = ladder.len();
        SpeculationTuner {
            committed: Arc::default(),
            state: Arc::new(Mutex::new(TunerState {
                settings,
                current: 0,
                interval_start: now,
                count_at_start: 0,
                measure_from: now,
                count_at_measure: Some(0),
                phase: Phase::Exploring {
                    measured: vec![None; steps],
                    origin: 0,
                    up: true,
                },
                timeline: vec![(now, ladder[0])],
                ladder,
            })),
        }
    }

    /// Count one transaction that committed for good.
    pub fn committed(&self) {
        self.committed.fetch_add(1, Ordering::Relaxed);
    }

    /// The degree to use for a transaction starting at `now`; ends the current interval, and
    /// so may move, when it is over.
    pub fn degree(&self, now: Duration) -> Degree {
        let mut s = self.state.lock().expect("tuner state");
        if s.count_at_measure.is_none() && now >= s.measure_from {
            s.count_at_measure = Some(self.committed.load(Ordering::Relaxed));
            s.measure_from = now;
        }
        if now.saturating_sub(s.interval_start) >= s.settings.interval {
            let count = self.committed.load(Ordering::Relaxed);
            // Nobody asked during the measured part: fall back to the whole interval.
            let (from, at) = match s.count_at_measure {
                Some(at) if now > s.measure_from => (s.measure_from, at),
                _ => (s.interval_start, s.count_at_start),
            };
            let elapsed = now.saturating_sub(from).as_secs_f64().max(f64::EPSILON);
            let throughput = (count - at) as f64 / elapsed;
            s.interval_start = now;
            s.count_at_start = count;
            let before = s.current;
            s.decide(throughput);
            if s.current == before {
                s.measure_from = now;
                s.count_at_measure = Some(count);
            } else {
                let degree = s.ladder[s.current];
                s.timeline.push((now, degree));
                s.measure_from = now + s.settings.interval.mul_f64(s.settings.transition);
                s.count_at_measure = None;
            }
        }
        s.ladder[s.current]
    }

    /// Every change of degree so far: when, and to what (the first entry is the start).
    pub fn timeline(&self) -> Vec<(Duration, Degree)> {
        self.state.lock().expect("tuner state").timeline.clone()
    }
}

impl TunerState {
    /// Take one interval's throughput at the current step into account.
    fn decide(&mut self, throughput: f64) {
        let gain = 1.0 + self.settings.min_gain;
        let current = self.current;
        match &mut self.phase {
            Phase::Exploring {
                measured,
                origin,
                up,
            } => {
                measured[current] = Some(throughput);
                if current == *origin {
                    return self.leave_origin();
                }
                // Where this step came from.
                let previous = if *up { current - 1 } else { current + 1 };
                let before = measured[previous].unwrap_or(0.0);
                if throughput > before * gain {
                    // Better: keep climbing the same way, if there is an untried step.
                    let next = if *up {
                        Some(current + 1).filter(|n| *n < measured.len())
                    } else {
                        current.checked_sub(1)
                    };
                    match next.filter(|n| measured[*n].is_none()) {
                        Some(n) => self.current = n,
                        None => self.settle(current),
                    }
                } else if *up
                    && previous == *origin
                    && let Some(down) = origin.checked_sub(1)
                    && measured[down].is_none()
                {
                    // The first step up did not pay: try the other way from the origin.
                    *up = false;
                    self.current = down;
                } else {
                    self.settle(previous);
                }
            }
            Phase::Settled {
                mean,
                samples,
                rise,
                fall,
            } => {
                let deviation = if *mean > 0.0 {
                    (throughput - *mean) / *mean
                } else if throughput > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                };
                *rise = (*rise + deviation - self.settings.change_slack).max(0.0);
                *fall = (*fall - deviation - self.settings.change_slack).max(0.0);
                let threshold = self.settings.change_threshold;
                if *rise > threshold || *fall > threshold {
                    // The load changed: explore again, this interval as the origin's measure.
                    let mut measured = vec![None; self.ladder.len()];
                    measured[current] = Some(throughput);
                    self.phase = Phase::Exploring {
                        measured,
                        origin: current,
                        up: true,
                    };
                    return self.leave_origin();
                }
                *samples += 1;
                *mean += (throughput - *mean) / f64::from(*samples);
            }
        }
    }

    /// The origin of an exploration is measured: step up if possible, else down, else stay.
    fn leave_origin(&mut self) {
        let Phase::Exploring { origin, up, .. } = &mut self.phase else {
            return;
        };
        if *origin + 1 < self.ladder.len() {
            *up = true;
            self.current = *origin + 1;
        } else if let Some(down) = origin.checked_sub(1) {
            *up = false;
            self.current = down;
        } else {
            let at = *origin;
            self.settle(at);
        }
    }

    /// Stop at `step`, the best of the exploration.
    fn settle(&mut self, step: usize) {
        let mean = match &self.phase {
            Phase::Exploring { measured, .. } => measured[step].unwrap_or(0.0),
            Phase::Settled { mean, .. } => *mean,
        };
        self.current = step;
        self.phase = Phase::Settled {
            mean,
            samples: 1,
            rise: 0.0,
            fall: 0.0,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Drive `tuner` for `intervals` one-second intervals in which the degree at step i of the
    /// ladder commits `rate(i)` transactions; returns the ladder steps used, in order.
    fn drive(
        tuner: &SpeculationTuner,
        ladder: &[Degree],
        start: u64,
        intervals: u64,
        mut rate: impl FnMut(usize) -> u64,
    ) -> Vec<usize> {
        let mut steps = Vec::new();
        for i in 0..intervals {
            let now = ms((start + i) * 1000);
            let degree = tuner.degree(now);
            let step = ladder.iter().position(|d| *d == degree).unwrap();
            steps.push(step);
            for _ in 0..rate(step) {
                tuner.committed();
            }
        }
        steps
    }

    #[test]
    fn degrees_print_and_parse_alike() {
        for d in Degree::ladder(true, 8)
            .into_iter()
            .chain(Degree::ladder(false, 3))
        {
            assert_eq!(d.to_string().parse::<Degree>(), Ok(d));
        }
        assert_eq!(
            "reads".parse(),
            Ok(Degree {
                reads: true,
                chain: 0
            })
        );
        for bad in [
            "",
            "commits:0",
            "commits:9",
            "reads+",
            "reads+commits:x",
            "all",
        ] {
            let err = bad.parse::<Degree>().unwrap_err();
            assert!(err.contains("expected none, reads"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_ladder_is_the_papers() {
        let names: Vec<String> = Degree::ladder(true, 8)
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert_eq!(names.len(), 10);
        assert_eq!(names[..3], ["none", "reads", "reads+commits:1"]);
        assert_eq!(names[9], "reads+commits:8");
        let planet: Vec<String> = Degree::ladder(false, 1)
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert_eq!(planet, ["none", "commits:1"]);
    }

    #[test]
    fn climbs_to_the_peak_and_stays() {
        let ladder = Degree::ladder(true, 8);
        let tuner = SpeculationTuner::new(ladder.clone(), TunerSettings::default(), ms(0));
        // Throughput peaks at step 5 (reads + chain 4).
        let rate = |step: usize| 1000 - 100 * (step as i64 - 5).unsigned_abs();
        let steps = drive(&tuner, &ladder, 0, 20, rate);
        assert_eq!(steps[..8], [0, 1, 2, 3, 4, 5, 6, 5]);
        assert!(steps[8..].iter().all(|s| *s == 5), "{steps:?}");
        let timeline = tuner.timeline();
        assert_eq!(timeline.last().unwrap().1, ladder[5]);
    }

    #[test]
    fn stops_at_no_speculation_when_speculation_hurts() {
        let ladder = Degree::ladder(true, 8);
        let tuner = SpeculationTuner::new(ladder.clone(), TunerSettings::default(), ms(0));
        let steps = drive(&tuner, &ladder, 0, 10, |step| 1000 - 50 * step as u64);
        assert_eq!(steps[..2], [0, 1]);
        assert!(steps[2..].iter().all(|s| *s == 0), "{steps:?}");
    }

    #[test]
    fn re_explores_when_the_load_changes() {
        let ladder = Degree::ladder(true, 8);
        let tuner = SpeculationTuner::new(ladder.clone(), TunerSettings::default(), ms(0));
        // At first the longest chain wins; then speculation starts to hurt.
        let first = drive(&tuner, &ladder, 0, 15, |step| 100 + 50 * step as u64);
        assert_eq!(*first.last().unwrap(), 9, "{first:?}");
        let second = drive(&tuner, &ladder, 15, 40, |step| 1000 - 80 * step as u64);
        assert_eq!(*second.last().unwrap(), 0, "{second:?}");
    }

    #[test]
    fn does_not_credit_a_step_with_its_predecessors_commits() {
        let ladder = Degree::ladder(true, 8);
        let tuner = SpeculationTuner::new(ladder.clone(), TunerSettings::default(), ms(0));
        // Reads (step 1) is best, chain 1 a little worse. Commits lag the degree by 300 ms, so
        // the first 30% of an interval after a move still commits at the previous step's rate:
        // measured whole, chain 1's interval would carry reads' better rate and win the climb.
        let rate = |step: usize| 1000 - 50 * (step as u64).abs_diff(1) - 450 * u64::from(step == 0);
        let mut used = Vec::new();
        for tick in 0..300usize {
            let step = ladder
                .iter()
                .position(|d| *d == tuner.degree(ms(tick as u64 * 100)))
                .unwrap();
            used.push(step);
            let effective = used[tick.saturating_sub(3)];
            for _ in 0..rate(effective) / 10 {
                tuner.committed();
            }
        }
        assert!(used[50..].iter().all(|s| *s == 1), "{used:?}");
    }

    #[test]
    fn holds_still_under_noise() {
        let ladder = Degree::ladder(true, 8);
        let tuner = SpeculationTuner::new(ladder.clone(), TunerSettings::default(), ms(0));
        let noisy = |i: u64| if i.is_multiple_of(2) { 1040 } else { 960 };
        let mut i = 0;
        let steps = drive(&tuner, &ladder, 0, 30, |step| {
            i += 1;
            noisy(i) - 200 * u64::from(step != 2)
        });
        assert!(steps[5..].iter().all(|s| *s == 2), "{steps:?}");
    }
}
