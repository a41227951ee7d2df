//! The queue of a store's grouped writes (`group.rs` runs it).

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
    pub(crate) to: SyncSender<Output>,
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
