//! `uwf export DIR` and `uwf import DIR`, and the automatic import of a file-layout root.

use super::cas::Bar;
use super::output::print_as;
use super::{CliError, CliResult, Env};
use crate::interchange::archive::{self, ArchiveError};
use crate::interchange::config::redact;
use crate::interchange::export_files::write_atomic;
use crate::interchange::transfer::{self, Counts, ImportOptions, ImportReport};
use crate::interchange::yaml::stringify_value;
use crate::store::Store;
use crate::thread::Config;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What an import did with one kind of entry.
#[derive(Serialize)]
struct CountsOut {
    imported: u64,
    present: u64,
    skipped: u64,
}

/// What an import did with the threads.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThreadCountsOut {
    imported: u64,
    present: u64,
    skipped: u64,
    fast_forwarded: u64,
}

impl From<&Counts> for ThreadCountsOut {
    fn from(c: &Counts) -> Self {
        ThreadCountsOut {
            imported: c.imported,
            present: c.present,
            skipped: c.skipped,
            fast_forwarded: c.fast_forwarded,
        }
    }
}

impl From<&Counts> for CountsOut {
    fn from(c: &Counts) -> Self {
        CountsOut {
            imported: c.imported,
            present: c.present,
            skipped: c.skipped,
        }
    }
}

/// `uwf import`.
#[derive(Serialize)]
struct Imported<'a> {
    nodes: CountsOut,
    threads: ThreadCountsOut,
    registry: CountsOut,
    history: CountsOut,
    conflicts: &'a [String],
    problems: &'a [String],
    warnings: &'a [String],
}

impl<'a> From<&'a ImportReport> for Imported<'a> {
    fn from(r: &'a ImportReport) -> Self {
        Imported {
            nodes: (&r.nodes).into(),
            threads: (&r.threads).into(),
            registry: (&r.registry).into(),
            history: (&r.history).into(),
            conflicts: &r.conflicts,
            problems: &r.problems,
            warnings: &r.warnings,
        }
    }
}

/// `uwf export`: `config` only with `--with-config` (whether config.yaml was written).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Exported {
    dir: String,
    nodes: u64,
    written: u64,
    unchanged: u64,
    threads: u64,
    registry: u64,
    history: u64,
    uwf_only: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<bool>,
}

/// A failed export or import: the store's own errors keep their kind (a damaged store exits
/// 65), the rest are the user's.
fn transfer_error(e: transfer::TransferError) -> CliError {
    match e {
        transfer::TransferError::Store(s) => s.into(),
        e => CliError::new(e.to_string()),
    }
}

/// `uwf export DIR [--with-config]`.
pub(crate) fn export(env: &Env, dir: &Path, with_config: bool) -> CliResult {
    // The config is read first: a config that does not parse stops the export before it
    // writes anything.
    let config = if with_config {
        Some(masked_config(env)?)
    } else {
        None
    };
    let s = env.open_ro()?;
    let bar = Bar::new(env, "export");
    let r = transfer::export(&s, dir, &|_, d, t| bar.set(d, t)).map_err(transfer_error)?;
    bar.finish();
    let mut out = Exported {
        dir: dir.display().to_string(),
        nodes: r.nodes,
        written: r.files.written + r.files.replaced,
        unchanged: r.files.skipped,
        threads: r.threads,
        registry: r.registry,
        history: r.history,
        uwf_only: r.uwf_only,
        config: None,
    };
    if let Some(text) = config {
        let written = match &text {
            Some(t) => {
                write_atomic(dir, "config.yaml", t.as_bytes())
                    .map_err(|e| CliError::new(e.to_string()))?;
                true
            }
            None => {
                eprintln!(
                    "warning: {} has no config.yaml; none was exported",
                    env.root.display()
                );
                false
            }
        };
        out.config = Some(written);
    }
    tracing::info!(
        tag = "R0ZND62D",
        dir = %out.dir,
        nodes = out.nodes,
        threads = out.threads,
        "export"
    );
    print_as(env.format, &out)
}

/// The root's `config.yaml` with its secrets masked, as YAML text; `None` without one.
fn masked_config(env: &Env) -> CliResult<Option<String>> {
    let path = env.root.join("config.yaml");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CliError::new(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let c = Config::parse(&text, &path.display().to_string())?;
    Ok(Some(stringify_value(&redact(&c.doc))))
}

/// `uwf export --archive FILE [--since OLD]`.
pub(crate) fn export_archive(env: &Env, file: &Path, since: Option<&Path>) -> CliResult {
    let since = since
        .map(archive::read_manifest)
        .transpose()
        .map_err(archive_error)?;
    let s = env.open_ro()?;
    let bar = Bar::new(env, "export");
    let progress = |_: &str, d, t| bar.set(d, t);
    let compress = file.extension().is_some_and(|e| e == "zst");
    let r = if file == Path::new("-") {
        let out = std::io::stdout();
        match archive::export_archive(&s, out, "-", compress, since.as_ref(), &progress) {
            // A closed pipe ends quietly.
            Err(ArchiveError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::BrokenPipe =>
            {
                return Err(CliError {
                    quiet: true,
                    ..CliError::new("")
                });
            }
            r => r,
        }
    } else {
        // Written beside the target and renamed over it once complete.
        let tmp = file.with_file_name(format!(
            ".{}.{}.tmp",
            file.file_name()
                .map_or_else(|| "archive".into(), |n| n.to_string_lossy()),
            std::process::id()
        ));
        let out = std::fs::File::create(&tmp)
            .map_err(|e| CliError::new(format!("cannot write {}: {e}", tmp.display())))?;
        let label = file.display().to_string();
        let r = archive::export_archive(&s, out, &label, compress, since.as_ref(), &progress)
            .and_then(|r| {
                std::fs::rename(&tmp, file).map_err(|e| ArchiveError::Io {
                    action: "rename",
                    path: tmp.display().to_string(),
                    source: e,
                })?;
                Ok(r)
            });
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }
    .map_err(archive_error)?;
    bar.finish();
    if file == Path::new("-") {
        return Ok(());
    }
    let m = r.manifest.as_ref().expect("an export writes a manifest");
    let out = ArchiveExported {
        archive: file.display().to_string(),
        nodes: r.nodes,
        since: m.since,
        until: m.until,
        index_files: r.index_files,
        root_files: r.root_files,
        threads: r.state.threads,
        registry: r.state.registry,
        history: r.state.history,
        uwf_only: r.state.uwf_only,
    };
    tracing::info!(
        tag = "6JMMWJKM",
        archive = %out.archive,
        nodes = out.nodes,
        since = ?out.since,
        "export archive"
    );
    print_as(env.format, &out)
}

/// `export --archive FILE`: what the archive holds.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArchiveExported {
    archive: String,
    nodes: u64,
    since: Option<u64>,
    until: u64,
    index_files: u64,
    root_files: u64,
    threads: u64,
    registry: u64,
    history: u64,
    uwf_only: u64,
}

fn archive_error(e: ArchiveError) -> CliError {
    match e {
        ArchiveError::Transfer(t) => transfer_error(t),
        e => CliError::new(e.to_string()),
    }
}

/// `uwf import FILE|-`: an archive, checked whole before anything is stored.
fn import_archive(env: &Env, file: &Path, overwrite: bool, cas: &[PathBuf]) -> CliResult {
    if !cas.is_empty() {
        return Err(CliError::new(
            "import: --cas applies to a directory, not to an archive",
        ));
    }
    let source = if file == Path::new("-") {
        archive::Source::Stdin
    } else {
        archive::Source::File(file)
    };
    let spool = if env.root.is_dir() {
        env.root.clone()
    } else {
        std::env::temp_dir()
    };
    let opts = ImportOptions {
        overwrite,
        now_ms: env.now_ms,
        ..ImportOptions::default()
    };
    let checked =
        archive::check_archive(source, &spool, opts.max_file_size).map_err(archive_error)?;
    let s = env.open_rw()?;
    let bar = Bar::spinner(env, "import");
    let r = archive::import_archive(&s, &checked, opts, &|_, d, t| bar.set(d, t))
        .map_err(archive_error)?;
    bar.finish();
    finish_import(env, &r)
}

/// `uwf import DIR [--cas DIR]…`, or an archive file (see [`import_archive`]).
pub(crate) fn import(env: &Env, dir: &Path, overwrite: bool, cas: &[PathBuf]) -> CliResult {
    if dir == Path::new("-") || dir.is_file() {
        return import_archive(env, dir, overwrite, cas);
    }
    for d in std::iter::once(dir).chain(cas.iter().map(PathBuf::as_path)) {
        if !d.is_dir() {
            return Err(CliError::new(format!(
                "import: {} is not a directory",
                d.display()
            )));
        }
    }
    let s = env.open_rw()?;
    let r = run_import(env, &s, dir, cas, overwrite)?;
    finish_import(env, &r)
}

/// Prints an import's report, its problems and conflicts on stderr.
fn finish_import(env: &Env, r: &ImportReport) -> CliResult {
    tracing::info!(
        tag = "SMHZ7Q70",
        nodes = r.nodes.imported,
        threads = r.threads.imported,
        workflows = r.registry.imported,
        history = r.history.imported,
        problems = r.problems.len(),
        "import"
    );
    for p in r.problems.iter().chain(r.conflicts.iter()) {
        eprintln!("{p}");
    }
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    print_as(env.format, &Imported::from(r))?;
    if r.problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::new(format!(
            "import finished with {} problem(s); the rest was imported",
            r.problems.len()
        )))
    }
}

fn run_import(
    env: &Env,
    s: &Store,
    dir: &Path,
    more_cas: &[PathBuf],
    overwrite: bool,
) -> CliResult<ImportReport> {
    let bar = Bar::spinner(env, "import");
    let opts = ImportOptions {
        overwrite,
        now_ms: env.now_ms,
        ..ImportOptions::default()
    };
    let r = transfer::import_with_cas(s, dir, more_cas, opts, &|_, d, t| bar.set(d, t))
        .map_err(transfer_error)?;
    bar.finish();
    Ok(r)
}

/// First use of a root that has the file layout but no store: import it, with the nodes the
/// TypeScript CLI kept elsewhere ([`Env::ts_cas`]), leaving the files as they are, and say so
/// on stderr. The store appears only once the import succeeded, so a failed one is tried
/// again by the next command.
pub(crate) fn auto_import(env: &Env) -> CliResult<Option<Store>> {
    if env.db_path().exists() || !transfer::has_layout(&env.root) {
        return Ok(None);
    }
    let db = env.db_path();
    let tmp = env.root.join(format!(
        ".{}.importing-{}",
        crate::store::DB_FILE,
        std::process::id()
    ));
    let imported = Store::open(&tmp)
        .map_err(CliError::from)
        .and_then(|s| run_import(env, &s, &env.root, &env.ts_cas, false));
    let r = match imported {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    // A link never replaces: when another process got there first, its store is the one.
    let linked = std::fs::hard_link(&tmp, &db);
    let _ = std::fs::remove_file(&tmp);
    if let Err(e) = linked
        && !db.exists()
    {
        return Err(e.into());
    }
    let s = Store::open(&db)?;
    eprintln!(
        "uwf: imported the file layout of {} into {} ({} nodes, {} threads, {} workflows, {} history lines; {} problem(s)); the files are left as they were",
        env.root.display(),
        env.db_path().display(),
        r.nodes.imported + r.nodes.present,
        r.threads.imported + r.threads.present,
        r.registry.imported + r.registry.present,
        r.history.imported + r.history.present,
        r.problems.len()
    );
    for p in r.problems.iter().chain(r.conflicts.iter()) {
        eprintln!("uwf: {p}");
    }
    for w in &r.warnings {
        eprintln!("uwf: warning: {w}");
    }
    Ok(Some(s))
}
