//! Integration tests: one binary, one module per subsystem.

mod agent;
mod cas_cli;
mod common;
mod interchange;
mod interop;
mod props;
mod store;
mod store_batch;
mod thread;
mod transfer;
mod vectors;
mod workflow;
mod workflow_cli;
