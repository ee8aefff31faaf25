//! `augur node`: serve one node of a cluster described by a TOML file, over TCP.

use std::path::Path;

pub fn run(_config: &Path, _id: u32) -> anyhow::Result<()> {
    anyhow::bail!("augur node is not available yet")
}
