//! When a node's write-ahead log reaches the disk: the policy a protocol setting chooses
//! (`--set protocol.log=…`). It is part of the contract because protocols list the setting
//! among theirs and a node's options are checked before a runtime starts; the log itself is
//! the runtime's (`augur_runtime::wal`).

use crate::ProtocolOptions;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The protocol setting that chooses the [`LogPolicy`] (`--set protocol.log=…`).
pub const LOG_SETTING: &str = "log";

/// The values [`LOG_SETTING`] accepts, for help texts and validation.
pub const LOG_VALUES: &[&str] = &["always", "batch", "batch:MS", "off"];

/// How long `batch` waits at most between two syncs unless told otherwise.
pub const DEFAULT_BATCH: Duration = Duration::from_millis(2);

/// When a node's write-ahead log is synced to stable storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogPolicy {
    /// Sync after every write; a reply waits for the sync that covers its records.
    Always,
    /// Sync at most once per interval; replies wait up to the interval plus a sync.
    Batch(Duration),
    /// Never sync; nothing waits. A process crash loses nothing the kernel has, a power cut
    /// loses everything not yet written back.
    Off,
}

impl LogPolicy {
    /// Parse `always`, `batch`, `batch:MS` or `off` (ASCII case ignored).
    pub fn parse(value: &str) -> Result<LogPolicy, String> {
        let lower = value.to_ascii_lowercase();
        match lower.as_str() {
            "always" => Ok(LogPolicy::Always),
            "off" => Ok(LogPolicy::Off),
            "batch" => Ok(LogPolicy::Batch(DEFAULT_BATCH)),
            _ => match lower.strip_prefix("batch:") {
                Some(ms) => match ms.trim_end_matches("ms").parse::<u64>() {
                    Ok(ms) if ms > 0 => Ok(LogPolicy::Batch(Duration::from_millis(ms))),
                    _ => Err(format!(
                        "bad log policy '{value}': batch takes a whole number of milliseconds above 0 (batch:5)"
                    )),
                },
                None => Err(format!(
                    "bad log policy '{value}'; accepted: {}",
                    LOG_VALUES.join(", ")
                )),
            },
        }
    }

    /// The policy `options` ask for, or `default` when they name none.
    pub fn from_options(options: &ProtocolOptions, default: LogPolicy) -> Result<Self, String> {
        match options.settings.get(LOG_SETTING) {
            None => Ok(default),
            Some(value) => LogPolicy::parse(value),
        }
    }

    /// Whether replies wait for the disk under this policy.
    pub fn waits(self) -> bool {
        !matches!(self, LogPolicy::Off)
    }
}

impl fmt::Display for LogPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogPolicy::Always => f.write_str("always"),
            LogPolicy::Off => f.write_str("off"),
            LogPolicy::Batch(d) => write!(f, "batch:{}", d.as_millis()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print() {
        for (text, policy) in [
            ("always", LogPolicy::Always),
            ("OFF", LogPolicy::Off),
            ("batch", LogPolicy::Batch(DEFAULT_BATCH)),
            ("batch:10", LogPolicy::Batch(Duration::from_millis(10))),
            ("batch:10ms", LogPolicy::Batch(Duration::from_millis(10))),
        ] {
            assert_eq!(LogPolicy::parse(text).unwrap(), policy, "{text}");
        }
        assert_eq!(
            LogPolicy::Batch(Duration::from_millis(5)).to_string(),
            "batch:5"
        );
        for bad in ["sometimes", "batch:0", "batch:x", ""] {
            assert!(LogPolicy::parse(bad).is_err(), "{bad}");
        }
    }
}
