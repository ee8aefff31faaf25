//! The augur crate's in-process integration tests in one binary; each module is the test file it
//! was. The tests that start `augur` processes are in `tests/processes/`.

mod bench_load;
mod catalogue;
mod check;
mod docs;
mod forgery;
