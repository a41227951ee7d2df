//! Integration tests: one binary, one module per subsystem.

mod interchange;
mod vectors;
