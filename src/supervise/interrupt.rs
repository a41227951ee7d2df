//! An interrupt: a latch that a signal (or the caller) sets once, and that an agent's
//! supervisor waits on beside the agent's pipes.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A latch set by SIGINT/SIGTERM (after [`Interrupt::on_signals`]) or by [`Interrupt::trigger`].
/// Once set it stays set: a step that sees it ends its agent, releases its lease and returns
/// [`super::StepError::Interrupted`].
#[derive(Debug)]
pub(crate) struct Interrupt {
    signal: Arc<AtomicUsize>,
    wake_rx: UnixStream,
    wake_tx: UnixStream,
}

impl Interrupt {
    /// A latch that is not set.
    ///
    /// # Errors
    /// The system cannot create a socket pair.
    pub(crate) fn new() -> io::Result<Interrupt> {
        let (wake_rx, wake_tx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        Ok(Interrupt {
            signal: Arc::new(AtomicUsize::new(0)),
            wake_rx,
            wake_tx,
        })
    }

    /// Sets the latch when one of `signals` arrives; the signals no longer end the process by
    /// themselves.
    ///
    /// # Errors
    /// A signal that cannot be handled.
    pub(crate) fn on_signals(&self, signals: &[i32]) -> io::Result<()> {
        for &sig in signals {
            // Registered in this order, the flag is set before the wake-up is written.
            signal_hook::flag::register_usize(sig, self.signal.clone(), sig as usize)?;
            signal_hook::low_level::pipe::register(sig, self.wake_tx.try_clone()?)?;
        }
        Ok(())
    }

    /// Sets the latch as if `signal` had arrived.
    pub(crate) fn trigger(&self, signal: i32) {
        self.signal.store(signal as usize, Ordering::SeqCst);
        let _ = io::Write::write(&mut &self.wake_tx, &[1]);
    }

    /// The signal that set the latch, if it is set.
    pub(crate) fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s as i32),
        }
    }

    /// Readable once the latch is set.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.wake_rx.as_fd()
    }
}
