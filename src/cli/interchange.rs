//! `uwf export DIR` and `uwf import DIR`, and the automatic import of a file-layout root.

use super::cas::Bar;
use super::output::{obj, print};
use super::{CliError, CliResult, Env};
use crate::cas::Value;
use crate::interchange::transfer::{self, Counts, ImportOptions, ImportReport};
use crate::store::Store;
use std::path::Path;

fn counts(c: &Counts) -> Value {
    obj([
        ("imported", Value::Number(c.imported as f64)),
        ("present", Value::Number(c.present as f64)),
        ("skipped", Value::Number(c.skipped as f64)),
    ])
}

fn list(v: &[String]) -> Value {
    Value::Array(v.iter().map(|s| Value::str(s.clone())).collect())
}

fn report_value(r: &ImportReport) -> Value {
    obj([
        ("nodes", counts(&r.nodes)),
        ("threads", counts(&r.threads)),
        ("registry", counts(&r.registry)),
        ("history", counts(&r.history)),
        ("conflicts", list(&r.conflicts)),
        ("problems", list(&r.problems)),
        ("warnings", list(&r.warnings)),
    ])
}

/// A failed export or import: the store's own errors keep their kind (a damaged store exits
/// 65), the rest are the user's.
fn transfer_error(e: transfer::TransferError) -> CliError {
    match e {
        transfer::TransferError::Store(s) => s.into(),
        e => CliError::new(e.to_string()),
    }
}

/// `uwf export DIR`.
pub(crate) fn export(env: &Env, dir: &Path) -> CliResult {
    let s = env.open_ro()?;
    let bar = Bar::new(env, "export");
    let r = transfer::export(&s, dir, &|_, d, t| bar.set(d, t)).map_err(transfer_error)?;
    bar.finish();
    print(
        env.format,
        &obj([
            ("dir", Value::str(dir.display().to_string())),
            ("nodes", Value::Number(r.nodes as f64)),
            (
                "written",
                Value::Number((r.files.written + r.files.replaced) as f64),
            ),
            ("unchanged", Value::Number(r.files.skipped as f64)),
            ("threads", Value::Number(r.threads as f64)),
            ("registry", Value::Number(r.registry as f64)),
            ("history", Value::Number(r.history as f64)),
            ("uwfOnly", Value::Number(r.uwf_only as f64)),
        ]),
    )
}

/// `uwf import DIR`.
pub(crate) fn import(env: &Env, dir: &Path, overwrite: bool) -> CliResult {
    if !dir.is_dir() {
        return Err(CliError::new(format!(
            "import: {} is not a directory",
            dir.display()
        )));
    }
    let s = env.open_rw()?;
    let r = run_import(env, &s, dir, overwrite)?;
    for p in r.problems.iter().chain(r.conflicts.iter()) {
        eprintln!("{p}");
    }
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    print(env.format, &report_value(&r))?;
    if r.problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::new(format!(
            "import finished with {} problem(s); the rest was imported",
            r.problems.len()
        )))
    }
}

fn run_import(env: &Env, s: &Store, dir: &Path, overwrite: bool) -> CliResult<ImportReport> {
    let bar = Bar::spinner(env, "import");
    let opts = ImportOptions {
        overwrite,
        now_ms: env.now_ms,
        ..ImportOptions::default()
    };
    let r = transfer::import(s, dir, opts, &|_, d, t| bar.set(d, t)).map_err(transfer_error)?;
    bar.finish();
    Ok(r)
}

/// First use of a root that has the file layout but no store: import it, leaving the files as
/// they are, and say so on stderr.
pub(crate) fn auto_import(env: &Env) -> CliResult<Option<Store>> {
    if env.db_path().exists() || !transfer::has_layout(&env.root) {
        return Ok(None);
    }
    let s = Store::open(&env.db_path())?;
    let r = run_import(env, &s, &env.root, false)?;
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
