//! The tables of the redb file that several of its files read.

use redb::TableDefinition;

/// Node id → sequence number (format 2).
pub(crate) const IDS: TableDefinition<u64, u64> = TableDefinition::new("ids");
/// Sequence number → the node's id, type, timestamp, digest and references (format 2).
pub(crate) const LINKS: TableDefinition<u64, &[u8]> = TableDefinition::new("links");
/// Node id → digest, timestamp, type, seq and references: format 1, read by its migration.
pub(crate) const NODES_V1: TableDefinition<u64, &[u8]> = TableDefinition::new("nodes");
pub(crate) const TYPE_INDEX: TableDefinition<(u64, u64), u64> = TableDefinition::new("type_index");
pub(crate) const PAYLOADS: TableDefinition<u64, &[u8]> = TableDefinition::new("payloads");
pub(crate) const META_TABLE: TableDefinition<&str, u64> = TableDefinition::new("meta");

pub(crate) const PINS: TableDefinition<u64, u64> = TableDefinition::new("pins");
pub(crate) const GC_OWNER: TableDefinition<&str, &[u8]> = TableDefinition::new("gc_owner");
