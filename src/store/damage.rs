//! The store's boundary: a panic of the database engine or an error that only damage
//! explains becomes [`StoreError::Damaged`] naming the file.

use super::error::{Result, StoreError};
use std::cell::Cell;
use std::path::Path;

thread_local! {
    /// How many store operations on this thread's stack catch the database engine's panics.
    static CATCHING: Cell<u32> = const { Cell::new(0) };
    /// Set by [`panic_is_caught`] when a panic inside a store operation is not the engine's:
    /// a bug, which goes on unwinding.
    static FOREIGN_PANIC: Cell<bool> = const { Cell::new(false) };
}

/// For the process's panic hook: whether this panic is the database engine's, raised inside a
/// store operation that turns it into [`StoreError::Damaged`] (the hook then prints nothing).
/// redb panics on some damaged pages instead of returning an error. Without a hook that asks,
/// every panic inside a store operation is taken for damage.
pub fn panic_is_caught(info: &std::panic::PanicHookInfo<'_>) -> bool {
    if CATCHING.with(Cell::get) == 0 {
        return false;
    }
    let engine = info.location().is_some_and(|l| {
        let f = l.file().replace('\\', "/");
        f.contains("/redb-") || f.contains("/redb/")
    });
    FOREIGN_PANIC.with(|c| c.set(!engine));
    engine
}

/// Runs `f`, turning a panic of the database engine into [`StoreError::Damaged`] naming
/// `path`. A panic that is not the engine's (see [`panic_is_caught`]) goes on unwinding.
///
/// # Errors
/// The error of `f`, or the damage a panic stands for.
pub(crate) fn catching_damage<T, E: From<StoreError>>(
    path: &Path,
    f: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    let depth = CATCHING.with(|c| c.replace(c.get() + 1));
    if depth == 0 {
        FOREIGN_PANIC.with(|c| c.set(false));
    }
    // Nothing the closure borrows is used after a panic but to drop it.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(depth));
    match r {
        Ok(r) => r,
        Err(payload) => {
            // A bug unwinds through every enclosing operation, not only this one.
            if FOREIGN_PANIC.with(Cell::get) {
                std::panic::resume_unwind(payload);
            }
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(StoreError::Damaged {
                path: path.to_path_buf(),
                what: format!(
                    "the database engine cannot read it ({})",
                    msg.replace('\n', " ")
                ),
            }
            .into())
        }
    }
}

/// [`Store::guard`] for a path.
pub(crate) fn guard_at<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catching_damage(path, f).map_err(|e| e.located(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::NodeId;

    #[test]
    fn an_engine_panic_becomes_damage_naming_the_file() {
        let path = Path::new("/x/uwf.redb");
        let ok: Result<u32> = catching_damage(path, || Ok(7));
        assert!(matches!(ok, Ok(7)));
        // Without a hook that tells them apart, a panic inside a store operation is damage.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let r: Result<()> = catching_damage(path, || panic!("entered unreachable code"));
        std::panic::set_hook(hook);
        let e = r.expect_err("a panic is an error");
        assert!(matches!(e, StoreError::Damaged { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("/x/uwf.redb") && msg.contains("uwf cas verify"),
            "{msg}"
        );
        assert_eq!(CATCHING.with(Cell::get), 0);
    }

    #[test]
    fn damage_errors_are_located() {
        let path = Path::new("/x/uwf.redb");
        let e = StoreError::Corrupt(NodeId(1)).located(path);
        assert!(matches!(e, StoreError::Damaged { .. }));
        assert!(e.to_string().contains("corrupt record for node"));
        let e = StoreError::Db(redb::Error::PreviousIo).located(path);
        assert!(matches!(e, StoreError::Damaged { .. }));
        let e = StoreError::ReadOnly.located(path);
        assert!(matches!(e, StoreError::ReadOnly));
    }
}
