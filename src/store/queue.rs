//! The queue of a store's grouped writes (`group.rs` runs it).

use super::error::Result;
use super::writer::Writer;
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
    /// Each write, the thread it is about if it names one, and where its result goes.
    pub(crate) queue: Vec<(Job, Option<ThreadId>, SyncSender<Output>)>,
    pub(crate) leading: bool,
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
