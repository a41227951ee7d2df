//! The store: every node, its payload, the type index, the threads, the registry and the
//! history, behind one facade ([`Store`], [`Snapshot`], [`Writer`]) over three backends chosen
//! when it is opened: a redb file (`redb/`, the embedded default), a PostgreSQL server
//! (`pg/`) and memory (`memory/`). The facade calls the backends only through the traits of
//! `backend.rs`; the rules that hold on every backend are written once, here:
//!
//! - `handle.rs`: [`Store`], opening, the schema cache
//! - `nodes.rs`: prepare, put, get, prefix lookup, refs, walk, snapshots and bulk loads
//! - `threads.rs`: threads, registry, history, leases, states, limits and removals, and
//!   [`Writer`] with the merge rules of an import
//! - `maintenance.rs`: garbage collection, pins, counts, compaction, verify and reindex
//! - `group.rs`: many threads' writes in one transaction; `copy.rs`: a store into another;
//!   `import.rs`: nodes hashed elsewhere
//! - leaves used by every backend: `error.rs`, `damage.rs` (the boundary that turns an
//!   engine's panic into [`StoreError::Damaged`]), `node.rs`, `records.rs` (the records and
//!   their fixed encodings), `usage.rs` (model calls, their aggregates and the budgets),
//!   `minutes.rs` (steps and failed steps per minute and workflow), `report.rs`, `types.rs`

mod backend;
mod copy;
mod damage;
mod error;
mod group;
mod handle;
mod import;
mod maintenance;
mod memory;
mod minutes;
mod node;
mod nodes;
mod pg;
mod queue;
mod records;
mod redb;
mod report;
mod roots;
mod threads;
mod types;
mod usage;
mod writer;

pub(crate) use backend::LeasedThread;
pub use copy::{CopyProgress, CopyReport, copy};
pub(crate) use damage::catching_damage;
pub use damage::panic_is_caught;
pub use error::StoreError;
pub(crate) use error::db_damage;
pub use handle::Store;
pub(crate) use handle::resolve_root;
pub use maintenance::force_version;
pub(crate) use minutes::MINUTE_MS;
pub use minutes::{KEEP_MINUTES, MinuteRow, StepCounts, minute_of};
pub use node::{Prepared, PutOutcome, StoredNode, WalkEvent, WalkStats, prepare_unchecked};
pub use nodes::{Bulk, Snapshot};
pub use pg::Listener;
pub use pg::SCHEMA_VERSION as PG_SCHEMA_VERSION;
pub(crate) use pg::{mask_url, url_password};
pub use records::{
    Counts, HistoryEntry, Lease, Merge, Phase, RegistryEntry, Removal, StepFailure, ThreadRecord,
    ThreadState, WorkflowLimits,
};
pub use redb::migrate::{FORMAT_VERSION, MIGRATIONS, Migration};
pub use redb::{DEFAULT_CACHE_BYTES, set_cache_size};
pub use report::{Damage, GcOptions, GcReport, Progress, VerifyReport};
pub(crate) use usage::DAY_MS;
pub use usage::{
    Budget, GroupKey, ModelCall, StepCalls, StepUsage, UsageGroup, UsageQuery, UsageRow,
    UsageTotals,
};
pub use writer::Writer;

/// File name of the store inside a storage root.
pub const DB_FILE: &str = "uwf.redb";
