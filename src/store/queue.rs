//! The queue of a store's grouped writes (`group.rs` runs it).

use super::backend::LeasedThread;
use super::error::Result;
use super::writer::Writer;
use crate::cas::NodeId;
use crate::model::ThreadId;
use std::any::Any;
use std::sync::Mutex;
use std::sync::mpsc::SyncSender;

pub(crate) type Output = Result<Box<dyn Any + Send>>;
pub(crate) type Job = Box<dyn FnOnce(&mut Writer<'_>) -> Output + Send>;

/// The queue of a store's grouped writes.
#[derive(Default)]
pub(crate) struct Group {
    pub(crate) state: Mutex<State>,
}

#[derive(Default)]
pub(crate) struct State {
    /// Each write, where its result goes and what it names ahead.
    pub(crate) queue: Vec<Queued>,
    pub(crate) leading: bool,
}

/// A write waiting for its group.
pub(crate) struct Queued {
    pub(crate) job: Job,
    /// The thread it is about, if it names one.
    pub(crate) thread: Option<ThreadId>,
    /// The nodes it puts, if it names them.
    pub(crate) nodes: Vec<NodeId>,
    pub(crate) to: Reply,
}

/// Where a grouped write's result goes once its group has committed.
pub(crate) enum Reply {
    /// To the thread that waits for it.
    Wait(SyncSender<Output>),
    /// To a function, called on the committing thread: it must not wait for the store.
    Then(Box<dyn FnOnce(Output) + Send>),
}

impl Reply {
    pub(crate) fn send(self, out: Output) {
        match self {
            Reply::Wait(s) => {
                let _ = s.send(out);
            }
            Reply::Then(f) => f(out),
        }
    }
}

/// The queue of a store's reads of threads' leases ([`crate::store::Store::leased_thread`]):
/// those asked for while one is read are read together next.
#[derive(Default)]
pub(crate) struct LeaseReads {
    pub(crate) state: Mutex<LeaseQueue>,
}

#[derive(Default)]
pub(crate) struct LeaseQueue {
    /// Each thread asked for, and where its rows go (`None`: the read together failed, read
    /// it alone).
    pub(crate) queue: Vec<(ThreadId, SyncSender<Option<LeasedThread>>)>,
    pub(crate) leading: bool,
}

impl LeaseReads {
    /// Stops leading, in order or when the leader unwinds.
    pub(crate) fn resign(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.leading = false;
        }
    }
}

/// Clears the leader flag when a leader unwinds.
pub(crate) struct Resign<'a>(pub(crate) &'a Group);

impl Drop for Resign<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.0.state.lock() {
            s.leading = false;
        }
    }
}
