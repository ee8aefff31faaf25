//! The library half of the `augur` command: what tests drive directly as well as through the
//! command line.

pub mod check;
pub mod faults;

/// Errors that exit with status 2: the user asked for something that does not exist.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}
