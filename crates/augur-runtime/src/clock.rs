//! The real-time clock of the tokio runtimes.

use augur_types::Timestamp;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch, read as a fixed wall-clock origin plus monotonic elapsed
/// time, so that readings never go backwards even if the system clock is stepped.
#[derive(Clone, Copy, Debug)]
pub struct RealClock {
    origin_us: u64,
    start: Instant,
}

impl RealClock {
    pub fn new() -> RealClock {
        RealClock::offset_by(0)
    }

    /// A clock that reads `offset_us` microseconds ahead of the system clock (behind, if
    /// negative): how a node is given a skewed clock for fault injection (`augur node
    /// --clock-offset-ms`), as the simulator skews its nodes' clocks.
    pub fn offset_by(offset_us: i64) -> RealClock {
        let system_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        RealClock {
            origin_us: system_us.saturating_add_signed(offset_us),
            start: Instant::now(),
        }
    }

    pub fn now(&self) -> Timestamp {
        Timestamp(self.origin_us + self.start.elapsed().as_micros() as u64)
    }

    /// The instant at which this clock will read `t` (now if already past).
    pub fn instant_of(&self, t: Timestamp) -> Instant {
        self.start + std::time::Duration::from_micros(t.0.saturating_sub(self.origin_us))
    }
}

impl Default for RealClock {
    fn default() -> Self {
        RealClock::new()
    }
}
