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

/// A panic caught on a helper thread: its payload, and whether it was a bug rather than the
/// database engine's.
type Caught = (Box<dyn std::any::Any + Send>, bool);

/// Runs `f` on a thread of `scope` as part of the store operation running on this thread (see
/// [`join_helper`]): the panic hook tells the engine's panics there from bugs as it would here.
pub(crate) fn spawn_helper<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    f: impl FnOnce() -> T + Send + 'scope,
) -> std::thread::ScopedJoinHandle<'scope, std::result::Result<T, Caught>> {
    let depth = CATCHING.with(Cell::get);
    scope.spawn(move || {
        CATCHING.with(|c| c.set(depth));
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .map_err(|payload| (payload, FOREIGN_PANIC.with(Cell::get)))
    })
}

/// The value of a [`spawn_helper`] thread. Its panic goes on unwinding on this thread, where
/// [`catching_damage`] takes it for damage, or for a bug when it was one.
pub(crate) fn join_helper<T>(
    h: std::thread::ScopedJoinHandle<'_, std::result::Result<T, Caught>>,
) -> T {
    match h.join() {
        Ok(Ok(t)) => t,
        Ok(Err((payload, foreign))) => {
            if foreign {
                FOREIGN_PANIC.with(|c| c.set(true));
            }
            std::panic::resume_unwind(payload)
        }
        Err(payload) => std::panic::resume_unwind(payload),
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

    /// The panic hook is the process's: tests that replace it take turns.
    static HOOK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn an_engine_panic_becomes_damage_naming_the_file() {
        let path = Path::new("/x/uwf.redb");
        let ok: Result<u32> = catching_damage(path, || Ok(7));
        assert!(matches!(ok, Ok(7)));
        // Without a hook that tells them apart, a panic inside a store operation is damage.
        let _turn = HOOK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    fn a_panic_on_a_helper_thread_is_told_apart_as_on_the_operations_thread() {
        let path = Path::new("/x/uwf.redb");
        // A helper runs inside the operation: the hook sees it catching.
        let r: Result<u32> = catching_damage(path, || {
            Ok(std::thread::scope(|s| {
                join_helper(spawn_helper(s, || CATCHING.with(Cell::get)))
            }))
        });
        assert!(matches!(r, Ok(1)), "{r:?}");
        // An engine's panic there is damage; a bug (a hook that says so) unwinds.
        let _turn = HOOK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let r: Result<()> = catching_damage(path, || {
            std::thread::scope(|s| join_helper(spawn_helper(s, || panic!("engine"))))
        });
        assert!(matches!(r, Err(StoreError::Damaged { .. })), "{r:?}");
        std::panic::set_hook(Box::new(|_| FOREIGN_PANIC.with(|c| c.set(true))));
        let bug = std::panic::catch_unwind(|| {
            let _: Result<()> = catching_damage(path, || {
                std::thread::scope(|s| join_helper(spawn_helper(s, || panic!("a bug"))))
            });
        });
        std::panic::set_hook(hook);
        assert!(bug.is_err(), "a bug on a helper thread goes on unwinding");
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
