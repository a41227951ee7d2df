//! Integration tests: one binary, one module per subsystem.

mod vectors;
