//! Export and import of the TypeScript tool's directory layout, the store-independent parts:
//! path ↔ id rules and the directory scanner ([`layout`]), the file writers
//! ([`export_files`]), and the formats of the storage root ([`yaml`], [`history`], a masked
//! `config`) and of uwf's own file beside them (`extra`), and the whole layout as one tar
//! stream ([`archive`], over the store like [`transfer`]). `agent_root` keeps the files
//! an agent of the TypeScript tool reads in step with the store, for one thread at a time.
//!
//! Apart from [`transfer`], [`archive`] and `agent_root`, nothing here knows the store: the
//! exporter feeds [`export_files::ExportWriter`] node by node, and the importer takes the names of
//! `layout::Lister` in sorted runs and reads them with `layout::read_listed`, so both
//! stream with bounded memory.

pub(crate) mod agent_root;
pub mod archive;
pub(crate) mod config;
pub mod export_files;
pub(crate) mod extra;
pub mod history;
pub mod layout;
pub mod transfer;
pub mod yaml;
