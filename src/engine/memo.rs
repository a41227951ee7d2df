//! What a runner keeps of a thread between its steps: the chain and the moderator's history at
//! the head its last step made, so that the next step neither reads nor decodes them again (a
//! thread of N steps would otherwise decode N²/2 nodes).
//!
//! A chain at a head never changes (its nodes are content-addressed and the head names them
//! all), so an entry is used only for the head it was made at and can never be stale: a thread
//! moved by another process, rolled back or imported anew has another head, and its step reads
//! the store as a step without a memo does.

use crate::cas::NodeId;
use crate::thread::ThreadId;
use crate::thread::chain::Moderated;
use foldhash::HashMap;
use std::sync::Mutex;

/// The most steps the memo holds over all its threads (about 1 KB of decoded values each).
const MAX_STEPS: usize = 1 << 18;

/// The chains a runner's last steps made, one per thread.
#[derive(Default)]
pub(crate) struct Memo {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    threads: HashMap<ThreadId, Moderated>,
    /// The steps held, over every entry.
    steps: usize,
}

impl Memo {
    /// The thread's chain at `head`, taken out of the memo; `None` when the memo holds none or
    /// one at another head (then dropped).
    pub(crate) fn take(&self, thread: &ThreadId, head: NodeId) -> Option<Moderated> {
        let mut g = self.inner.lock().ok()?;
        let m = g.threads.remove(thread)?;
        g.steps -= m.chain.steps.len();
        (m.chain.head() == head).then_some(m)
    }

    /// Keeps the thread's chain for its next step, dropping others while the memo is full.
    pub(crate) fn keep(&self, thread: ThreadId, m: Moderated) {
        let n = m.chain.steps.len();
        if n > MAX_STEPS {
            return;
        }
        let Ok(mut g) = self.inner.lock() else { return };
        while g.steps + n > MAX_STEPS {
            let Some(other) = g.threads.keys().next().cloned() else {
                break;
            };
            if let Some(o) = g.threads.remove(&other) {
                g.steps -= o.chain.steps.len();
            }
        }
        g.steps += n;
        if let Some(old) = g.threads.insert(thread, m) {
            g.steps -= old.chain.steps.len();
        }
    }
}
