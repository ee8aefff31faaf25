//! Every integration test of augur-check in one binary; each module is the test file it was.

mod bank;
mod checker;
mod common;
mod corpus;
mod polygraph;
mod promises;
