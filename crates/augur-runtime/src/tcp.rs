//! TCP runtime (in progress).
