//! Export and import of the TypeScript tool's directory layout, store-independent parts:
//! path ↔ id rules, the directory scanner, the file writers, and the YAML/JSONL formats of the
//! storage root. Nothing here knows the store; the exporter feeds `export_files::ExportWriter`
//! node by node and the importer consumes `layout::Scanner` item by item.

pub mod yaml;
