//! Integration tests: one binary, one module per subsystem.

#![allow(clippy::unwrap_used)] // A test or bench fails loudly on an unexpected error.

mod agent;
mod archive;
mod background;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod binary;
mod cas_cli;
mod cli_snapshots;
mod common;
mod conformance;
mod corrupt;
mod fake_api;
mod fuzz;
mod gc;
mod handoff;
mod imports;
mod interchange;
mod interop;
mod llm;
mod logs;
mod mcp;
mod model;
mod models;
mod pg;
mod pg_gc;
mod phoenix;
mod postgres;
mod props;
mod proto7a0c;
mod read_md;
mod runner;
mod serve;
mod serve_browser;
mod serve_runs;
mod shell;
mod store;
mod store_batch;
mod supervise;
mod thread;
mod traces;
mod transfer;
mod ts_golden;
mod usage;
mod vectors;
mod workflow;
mod workflow_cli;
