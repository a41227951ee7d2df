//! What a runner keeps of a thread between its steps: the chain and the moderator's history at
//! the head its last step made, so that the next step neither reads nor decodes them again (a
//! thread of N steps would otherwise decode N²/2 nodes).
//!
//! A chain at a head never changes (its nodes are content-addressed and the head names them
//! all), so an entry is used only for the head it was made at and can never be stale: a thread
//! moved by another process, rolled back or imported anew has another head, and its step reads
//! the store as a step without a memo does.
//!
//! The memo is bounded by the memory its values take, estimated as they are kept: a step's
//! decoded values take a kilobyte or more (a model's long answer far more), so a bound on steps
//! would let a long run's memory grow with what its agents write.

use crate::cas::{NodeId, Value};
use crate::thread::ThreadId;
use crate::thread::chain::{Moderated, StepRecord};
use crate::workflow::StepView;
use foldhash::HashMap;
use std::mem::size_of;
use std::sync::Mutex;

/// The most memory, as [`Measured`] estimates it, that the memo holds over all its threads:
/// about 300k steps of a few short fields (a thread dropped from the memo reads and decodes
/// its whole chain at its next step, so a bound well under what a runner's threads hold makes
/// every step of a long thread cost its length), fewer of a model's long answers.
const MAX_BYTES: usize = 512 << 20;

/// The most threads whose size the memo remembers while their chains are taken out.
const MAX_MEASURED: usize = 1 << 16;

/// The chains a runner's last steps made, one per thread.
pub(crate) struct Memo {
    inner: Mutex<Inner>,
    max_bytes: usize,
}

impl Default for Memo {
    fn default() -> Memo {
        Memo::with_limit(MAX_BYTES)
    }
}

#[derive(Default)]
struct Inner {
    /// Each thread's chain and its size.
    threads: HashMap<ThreadId, (Moderated, Measured)>,
    /// The estimated bytes held, with the vectors' reserve, over every entry.
    bytes: usize,
    /// The sizes of chains taken out, so that one kept again with a step more is measured by
    /// that step alone.
    taken: HashMap<ThreadId, Measured>,
}

/// What the memo knows of an entry's size: the steps and history entries measured, the id of
/// the last step measured (a chain with the same step there has the same steps before it),
/// and their estimated bytes.
#[derive(Clone, Copy)]
struct Measured {
    steps: usize,
    history: usize,
    last: Option<NodeId>,
    bytes: usize,
}

impl Measured {
    /// The size of `m`, measuring only what `before` (the same thread's chain at an earlier
    /// head) did not cover; the payloads of the steps it measures are dropped.
    fn of(m: &mut Moderated, before: Option<Measured>) -> Measured {
        let (steps, history) = (&mut m.chain.steps, &m.history.steps);
        let (from_step, from_history, bytes) = match before {
            Some(b)
                if b.steps <= steps.len()
                    && b.history <= history.len()
                    && b.last == b.steps.checked_sub(1).map(|i| steps[i].id) =>
            {
                (b.steps, b.history, b.bytes)
            }
            _ => (0, 0, size_of::<Moderated>() + value_bytes(&m.history.start)),
        };
        let mut bytes = bytes
            + history[from_history..]
                .iter()
                .map(view_bytes)
                .sum::<usize>();
        for s in &mut steps[from_step..] {
            s.payload = None;
            bytes += step_bytes(s);
        }
        Measured {
            steps: steps.len(),
            history: history.len(),
            last: steps.last().map(|s| s.id),
            bytes,
        }
    }

    /// With what the chain's vectors hold in reserve, which a step more may fill or double.
    fn with_reserve(self, m: &Moderated) -> usize {
        let (steps, history) = (&m.chain.steps, &m.history.steps);
        self.bytes
            + (steps.capacity() - steps.len()) * size_of::<StepRecord>()
            + (history.capacity() - history.len()) * size_of::<StepView>()
    }
}

impl Inner {
    /// Takes the thread's entry out, and its bytes off the total.
    fn remove(&mut self, thread: &ThreadId) -> Option<(ThreadId, Moderated, Measured)> {
        let (thread, (m, size)) = self.threads.remove_entry(thread)?;
        self.bytes -= size.with_reserve(&m);
        Some((thread, m, size))
    }
}

impl Memo {
    /// A memo holding at most `max_bytes` of estimated memory.
    pub(crate) fn with_limit(max_bytes: usize) -> Memo {
        Memo {
            inner: Mutex::default(),
            max_bytes,
        }
    }

    /// The thread's chain at `head`, taken out of the memo; `None` when the memo holds none or
    /// one at another head (then dropped).
    pub(crate) fn take(&self, thread: &ThreadId, head: NodeId) -> Option<Moderated> {
        let mut g = self.inner.lock().ok()?;
        let (thread, m, size) = g.remove(thread)?;
        if m.chain.head() != head {
            return None;
        }
        if g.taken.len() >= MAX_MEASURED {
            g.taken.clear();
        }
        g.taken.insert(thread, size);
        Some(m)
    }

    /// Keeps the thread's chain for its next step, dropping others while the memo is full.
    pub(crate) fn keep(&self, thread: ThreadId, mut m: Moderated) {
        // A chain read anew is measured whole: not while the other steps wait for the lock.
        let before = match self.inner.lock() {
            Ok(mut g) => g.taken.remove(&thread),
            Err(_) => return,
        };
        let size = Measured::of(&mut m, before);
        let held = size.with_reserve(&m);
        if held > self.max_bytes {
            return;
        }
        let Ok(mut g) = self.inner.lock() else { return };
        g.remove(&thread);
        while g.bytes + held > self.max_bytes {
            let Some(other) = g.threads.keys().next().cloned() else {
                break;
            };
            g.remove(&other);
        }
        g.bytes += held;
        g.threads.insert(thread, (m, size));
    }

    /// The estimated bytes held.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.inner.lock().expect("memo").bytes
    }
}

/// Heap bytes an allocation of `n` bytes takes, with the allocator's header.
fn alloc_bytes(n: usize) -> usize {
    if n == 0 { 0 } else { n + 16 }
}

/// An estimate of the memory a decoded value takes, itself included.
fn value_bytes(v: &Value) -> usize {
    size_of::<Value>()
        + match v {
            Value::String(s) => alloc_bytes(s.capacity()),
            Value::Array(a) => {
                alloc_bytes((a.capacity() - a.len()) * size_of::<Value>())
                    + a.iter().map(value_bytes).sum::<usize>()
            }
            Value::Object(o) => {
                // An entry: its key, its value and its hash; and the index's slot.
                alloc_bytes(o.capacity() * (size_of::<String>() + size_of::<u64>()))
                    + alloc_bytes(o.capacity() * size_of::<usize>())
                    + o.iter()
                        .map(|(k, v)| alloc_bytes(k.capacity()) + value_bytes(v))
                        .sum::<usize>()
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        }
}

fn step_bytes(s: &StepRecord) -> usize {
    let n = &s.node;
    size_of::<StepRecord>()
        + s.payload.as_ref().map_or(0, value_bytes)
        + [&n.role, &n.agent, &n.cwd]
            .iter()
            .map(|t| alloc_bytes(t.capacity()))
            .sum::<usize>()
        + n.edge_prompt
            .as_ref()
            .map_or(0, |e| alloc_bytes(e.capacity()))
}

fn view_bytes(s: &StepView) -> usize {
    size_of::<StepView>()
        + value_bytes(&s.output)
        + [&s.role, &s.detail, &s.agent]
            .iter()
            .map(|t| alloc_bytes(t.capacity()))
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::thread::StartInput;
    use crate::thread::chain::load_moderated;

    /// A thread of the one-role bench workflow, as its first step finds it.
    fn started(store: &Store, root: &std::path::Path, n: u8) -> (ThreadId, Moderated) {
        let thread = ThreadId::parse(&format!("06H1RA3GFM2595PTJ2VGAGMH{n:02}")).unwrap();
        crate::thread::start(
            store,
            &StartInput {
                workflow: concat!(env!("CARGO_MANIFEST_DIR"), "/benches/count.yaml"),
                prompt: "go",
                cwd: &root.display().to_string(),
                search_from: root,
                thread: thread.clone(),
                now_ms: 1_700_000_000_000,
            },
        )
        .unwrap();
        let head = store.thread(&thread).unwrap().unwrap().head;
        (thread, load_moderated(store, head).unwrap())
    }

    /// The thread with one step more, whose output note is `note`.
    fn stepped(mut m: Moderated, note: &str) -> Moderated {
        let n = m.chain.steps.len() as u64;
        let mut output = crate::cas::value::Map::default();
        output.insert("$status".into(), Value::str("continue"));
        output.insert("note".into(), Value::str(note));
        let node = crate::workflow::nodes::StepNode {
            start: m.chain.start_id,
            prev: Some(m.chain.head()),
            role: "worker".into(),
            output: Some(NodeId(n)),
            detail: Some(NodeId(n)),
            agent: "uwf-scripted".into(),
            edge_prompt: Some("again".into()),
            started_at_ms: Some(n),
            completed_at_ms: Some(n),
            cwd: "/tmp".into(),
            assembled_prompt: None,
        };
        m.chain.steps.push(StepRecord {
            id: NodeId(1_000 + n),
            payload: Some(node.to_value()),
            node,
            timestamp: n,
        });
        m.history.steps.push(StepView {
            role: "worker".into(),
            output: Value::Object(output),
            detail: NodeId(n).to_wire(),
            agent: "uwf-scripted".into(),
        });
        m
    }

    #[test]
    fn a_kept_chain_is_measured_by_its_new_steps_as_in_full_without_payloads() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("uwf.redb")).unwrap();
        let (t, mut m) = started(&store, dir.path(), 0);
        let memo = Memo::default();
        let whole = |m: &Moderated| Measured::of(&mut m.clone(), None).with_reserve(m);
        for i in 0..50 {
            m = stepped(m, &"x".repeat(i * 10));
            assert!(m.chain.steps.last().unwrap().payload.is_some());
            let expected = whole(&m);
            let head = m.chain.head();
            memo.keep(t.clone(), m);
            assert_eq!(memo.bytes(), expected, "after {} steps", i + 1);
            m = memo.take(&t, head).expect("kept at its head");
            assert_eq!(memo.bytes(), 0);
            assert!(m.chain.steps.iter().all(|s| s.payload.is_none()));
        }
        // A chain that is not the one taken out (another thread's history) is measured whole.
        let (_, other) = started(&store, dir.path(), 1);
        let other = stepped(other, "y");
        let expected = whole(&other);
        memo.keep(t, other);
        assert_eq!(memo.bytes(), expected);
    }

    #[test]
    fn the_memo_holds_no_more_than_its_bound_and_keeps_the_latest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("uwf.redb")).unwrap();
        let long = "z".repeat(10_000);
        let (_, base) = started(&store, dir.path(), 99);
        let mut base = stepped(base, &long);
        let one = Measured::of(&mut base, None).with_reserve(&base);
        assert!(one > 10_000, "{one}");
        // Room for about three such threads.
        let memo = Memo::with_limit(one * 3 + one / 2);
        let mut kept = Vec::new();
        for n in 0..20u8 {
            let (t, m) = started(&store, dir.path(), n);
            let m = stepped(m, &long);
            kept.push((t.clone(), m.chain.head()));
            memo.keep(t, m);
            assert!(memo.bytes() <= one * 3 + one / 2, "{}", memo.bytes());
        }
        let (t, head) = kept.last().unwrap();
        assert!(memo.take(t, *head).is_some(), "the latest is kept");
        let held = kept
            .iter()
            .filter(|(t, head)| memo.take(t, *head).is_some())
            .count();
        assert_eq!(held, 2, "with the latest taken out, two others remain");
        assert_eq!(memo.bytes(), 0);

        // A chain larger than the whole bound is not kept.
        let small = Memo::with_limit(one / 2);
        let (t, m) = started(&store, dir.path(), 30);
        let m = stepped(m, &long);
        let head = m.chain.head();
        small.keep(t.clone(), m);
        assert!(small.take(&t, head).is_none());
    }
}
