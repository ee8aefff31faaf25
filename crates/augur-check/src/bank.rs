//! bank invariants
