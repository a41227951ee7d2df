//! Integration tests: one binary, one module per subsystem.

mod store;
mod vectors;
