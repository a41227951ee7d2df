//! Integration tests: one binary, one module per subsystem.

mod cas_cli;
mod common;
mod props;
mod store;
mod vectors;
mod workflow;
