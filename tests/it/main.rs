//! Integration tests: one binary, one module per subsystem.

mod agent;
mod cas_cli;
mod common;
mod interchange;
mod props;
mod read_md;
mod store;
mod store_batch;
mod thread;
mod transfer;
mod ts_golden;
mod vectors;
mod workflow;
mod workflow_cli;
