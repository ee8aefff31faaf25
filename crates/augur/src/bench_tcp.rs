//! `augur bench --transport tcp`: the same benchmark against `augur node` processes on loopback.

use crate::bench::BenchConfig;
use crate::report::ProtocolResult;

pub fn run(
    _config: &BenchConfig,
    _protocol: &str,
) -> anyhow::Result<anyhow::Result<ProtocolResult>> {
    Err(crate::BadInput("--transport tcp is not available yet".into()).into())
}
