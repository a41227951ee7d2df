//! The byte encodings of the thread-layer records (format version 1).
//!
//! Each record is one MessagePack array whose elements are listed here, in this order, and
//! written from a private tuple, so the bytes never depend on the order of the public structs'
//! fields:
//! - [`ThreadRecord`]: `[head, workflow | nil, updated_ms]`
//! - [`RegistryEntry`]: `[workflow, time_ms]`
//! - [`HistoryEntry`]: `[thread, workflow, head, completed_at, reason]`
//! - [`Lease`]: `[pid, since_ms, boot_id, start_ticks]`
//! - [`WorkflowLimits`]: `[concurrency, overflow (0 queue, 1 drop), max_queue | nil,
//!   max_retries | nil]`
//! - [`ThreadState`]: `[phase, max_rounds | nil, failures, nil | [time_ms, agent, message]]`,
//!   `phase` 0 ready, 1 queued, 2 paused
//!
//! A node id is its `u64` value, an absent id is `nil`, every integer takes the shortest
//! MessagePack form (positive fixint, uint 8, 16, 32 or 64) and every string the shortest str
//! form. These are the bytes `rmp_serde::to_vec` gave for the structs of version 1, so files of
//! that version read unchanged; the golden tests below pin them.

use super::error::{Result, StoreError};
use crate::cas::NodeId;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// An active thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRecord {
    /// The head: the StartNode, or the latest StepNode.
    pub head: NodeId,
    /// The workflow node, when known.
    pub workflow: Option<NodeId>,
    /// When the head last moved, ms since the epoch.
    pub updated_ms: u64,
}

/// One version of a registry name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    /// The workflow node id.
    pub workflow: NodeId,
    /// When it was registered, ms since the epoch.
    pub time_ms: u64,
}

/// A finished thread (`history.jsonl` line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The thread id.
    pub thread: String,
    /// The workflow node id, as written.
    pub workflow: crate::model::IdText,
    /// The last node of the thread, as written.
    pub head: crate::model::IdText,
    /// When it finished, ms since the epoch.
    pub completed_at: u64,
    /// How it finished (stored as its string).
    pub reason: crate::model::FinishReason,
}

impl HistoryEntry {
    /// The nodes the entry names (its head and workflow), which garbage collection keeps.
    pub(crate) fn names(&self) -> impl Iterator<Item = NodeId> {
        [self.head.names(), self.workflow.names()]
            .into_iter()
            .flatten()
    }
}

/// What an import of a name did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// The name was new.
    Inserted,
    /// The name had the same value.
    Same,
    /// The name had another value, which was kept.
    Kept,
    /// The name had another value, which was replaced.
    Overwritten,
}

/// How much a store holds (`uwf store info`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Nodes.
    pub nodes: u64,
    /// Active threads.
    pub threads: u64,
    /// History entries (finished threads).
    pub history: u64,
    /// Registered workflow names.
    pub workflows: u64,
    /// Step leases held.
    pub leases: u64,
}

/// The owner of a thread's step lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The owning process.
    pub pid: u32,
    /// When it was taken, ms since the epoch.
    pub since_ms: u64,
    /// The boot id of the owner's host (empty when unknown): a lease from another boot is stale.
    pub boot_id: String,
    /// The owner's process start time in clock ticks since boot (0 when unknown): a reused pid
    /// has another start time.
    pub start_ticks: u64,
    /// Until when (ms since the epoch, by this machine's clock) its holder has renewed it, for a
    /// store that several machines share and that keeps renewals; `None` where the store keeps
    /// none. A holder on another machine is judged by it.
    pub expires_ms: Option<u64>,
}

impl Lease {
    /// The lease process `pid` of this machine holds from `now_ms`.
    pub fn of(pid: u32, now_ms: u64) -> Lease {
        Lease {
            pid,
            since_ms: now_ms,
            boot_id: crate::proc::boot_id(),
            start_ticks: crate::proc::start_ticks(pid),
            expires_ms: None,
        }
    }

    /// Whether the lease's holder is still running: on this machine, same boot, pid alive and
    /// the same start time; on another (another boot id), while it renews the lease's expiry,
    /// where the store keeps one.
    pub fn is_live(&self) -> bool {
        let boot = crate::proc::boot();
        if !self.boot_id.is_empty() && !boot.is_empty() && self.boot_id != boot {
            return self.expires_ms.is_some_and(|e| e > crate::proc::now_ms());
        }
        if !crate::proc::pid_alive(self.pid) {
            return false;
        }
        let ticks = crate::proc::start_ticks(self.pid);
        !(self.start_ticks != 0 && ticks != 0 && ticks != self.start_ticks)
    }

    /// Whether this is `me`'s lease.
    pub fn is_mine(&self, me: &Lease) -> bool {
        self.pid == me.pid && self.start_ticks == me.start_ticks && self.boot_id == me.boot_id
    }

    /// Whether this lease keeps `me` from its thread: another process's, still running. A
    /// lease of `me`'s own (one a step cut short could not give back) never does.
    pub fn blocks(&self, me: &Lease) -> bool {
        !self.is_mine(me) && self.is_live()
    }
}

/// Whether an active thread may be stepped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Phase {
    /// Ready for its next step.
    #[default]
    Ready,
    /// Waiting for room under its workflow's concurrency limit.
    Queued,
    /// Paused by hand (`thread pause`).
    Paused,
    /// Paused before a step because its spend reached its budget (`uwf limits set
    /// --max-cost-per-thread`, `--max-tokens-per-thread`).
    PausedForBudget,
}

impl Phase {
    pub(crate) fn code(self) -> u8 {
        match self {
            Phase::Ready => 0,
            Phase::Queued => 1,
            Phase::Paused => 2,
            Phase::PausedForBudget => 3,
        }
    }

    pub(crate) fn from_code(c: u8) -> Phase {
        match c {
            1 => Phase::Queued,
            2 => Phase::Paused,
            3 => Phase::PausedForBudget,
            _ => Phase::Ready,
        }
    }

    /// Whether the thread is paused, by hand or for its budget.
    pub fn is_paused(self) -> bool {
        matches!(self, Phase::Paused | Phase::PausedForBudget)
    }
}

/// A failed step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFailure {
    /// When it failed, ms since the epoch.
    pub time_ms: u64,
    /// The agent that ran.
    pub agent: String,
    /// The error, one line.
    pub message: String,
}

/// The state of an active thread besides its head.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadState {
    /// Ready, queued or paused.
    pub phase: Phase,
    /// The most steps the thread may take (`thread start --max-rounds`).
    pub max_rounds: Option<u32>,
    /// Consecutive failed steps.
    pub failures: u32,
    /// The last failed step.
    pub last_error: Option<StepFailure>,
}

impl ThreadState {
    /// Whether this is the state of a thread without a row.
    pub fn is_default(&self) -> bool {
        *self == ThreadState::default()
    }
}

/// A workflow's limits as the store keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkflowLimits {
    /// Threads in progress at once (0: no concurrency limit, only `max_retries`).
    pub concurrency: u32,
    /// Whether a thread started beyond the limit is dropped (else it waits in a queue).
    pub drop: bool,
    /// The most threads waiting; `None` for no bound.
    pub max_queue: Option<u32>,
    /// Consecutive failed steps after which a thread fails; `None` for the config's.
    pub max_retries: Option<u32>,
}

/// One removal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "name", rename_all = "camelCase")]
pub enum Removal {
    /// A thread: its record, state and archive entries.
    Thread(String),
    /// A registry name (its versions stay).
    Workflow(String),
    /// A registry name and its versions.
    WorkflowPurged(String),
}

/// A record with a fixed encoding.
pub(crate) trait Record: Sized {
    /// The tuple of the array's elements, in encoding order.
    type Wire: Serialize + DeserializeOwned;
    /// What the record is, for messages about a corrupt one.
    const WHAT: &'static str;
    fn to_wire(&self) -> Self::Wire;
    fn from_wire(w: Self::Wire) -> Self;
}

/// The bytes of `r`.
pub(crate) fn enc<T: Record>(r: &T) -> Vec<u8> {
    rmp_serde::to_vec(&r.to_wire()).expect("a tuple of integers and strings serializes")
}

/// The record in `b`.
///
/// # Errors
/// `b` is not the encoding of a `T`.
pub(crate) fn dec<T: Record>(b: &[u8]) -> Result<T> {
    rmp_serde::from_slice(b)
        .map(T::from_wire)
        .map_err(|e| StoreError::CorruptRecord {
            what: T::WHAT,
            message: e.to_string(),
        })
}

impl Record for ThreadRecord {
    type Wire = (u64, Option<u64>, u64);
    const WHAT: &'static str = "thread";
    fn to_wire(&self) -> Self::Wire {
        (self.head.0, self.workflow.map(|w| w.0), self.updated_ms)
    }
    fn from_wire((head, workflow, updated_ms): Self::Wire) -> Self {
        ThreadRecord {
            head: NodeId(head),
            workflow: workflow.map(NodeId),
            updated_ms,
        }
    }
}

impl Record for RegistryEntry {
    type Wire = (u64, u64);
    const WHAT: &'static str = "registry history";
    fn to_wire(&self) -> Self::Wire {
        (self.workflow.0, self.time_ms)
    }
    fn from_wire((workflow, time_ms): Self::Wire) -> Self {
        RegistryEntry {
            workflow: NodeId(workflow),
            time_ms,
        }
    }
}

impl Record for HistoryEntry {
    type Wire = (String, String, String, u64, String);
    const WHAT: &'static str = "history";
    fn to_wire(&self) -> Self::Wire {
        (
            self.thread.clone(),
            self.workflow.to_text(),
            self.head.to_text(),
            self.completed_at,
            self.reason.as_str().to_string(),
        )
    }
    fn from_wire((thread, workflow, head, completed_at, reason): Self::Wire) -> Self {
        HistoryEntry {
            thread,
            workflow: crate::model::IdText::parse(workflow),
            head: crate::model::IdText::parse(head),
            completed_at,
            reason: crate::model::FinishReason::parse(&reason),
        }
    }
}

impl Record for ThreadState {
    type Wire = (u8, Option<u32>, u32, Option<(u64, String, String)>);
    const WHAT: &'static str = "thread state";
    fn to_wire(&self) -> Self::Wire {
        (
            self.phase.code(),
            self.max_rounds,
            self.failures,
            self.last_error
                .as_ref()
                .map(|e| (e.time_ms, e.agent.clone(), e.message.clone())),
        )
    }
    fn from_wire((phase, max_rounds, failures, last_error): Self::Wire) -> Self {
        ThreadState {
            phase: Phase::from_code(phase),
            max_rounds,
            failures,
            last_error: last_error.map(|(time_ms, agent, message)| StepFailure {
                time_ms,
                agent,
                message,
            }),
        }
    }
}

impl Record for Removal {
    type Wire = (u8, String);
    const WHAT: &'static str = "removal";
    fn to_wire(&self) -> Self::Wire {
        use Removal::*;
        match self {
            Thread(n) => (0, n.clone()),
            Workflow(n) => (1, n.clone()),
            WorkflowPurged(n) => (2, n.clone()),
        }
    }
    fn from_wire((kind, name): Self::Wire) -> Self {
        use Removal::*;
        match kind {
            0 => Thread(name),
            2 => WorkflowPurged(name),
            _ => Workflow(name),
        }
    }
}

impl Record for WorkflowLimits {
    type Wire = (u32, u8, Option<u32>, Option<u32>);
    const WHAT: &'static str = "limits";
    fn to_wire(&self) -> Self::Wire {
        (
            self.concurrency,
            u8::from(self.drop),
            self.max_queue,
            self.max_retries,
        )
    }
    fn from_wire((concurrency, drop, max_queue, max_retries): Self::Wire) -> Self {
        WorkflowLimits {
            concurrency,
            drop: drop == 1,
            max_queue,
            max_retries,
        }
    }
}

impl Record for Lease {
    type Wire = (u32, u64, String, u64);
    const WHAT: &'static str = "lease";
    fn to_wire(&self) -> Self::Wire {
        (
            self.pid,
            self.since_ms,
            self.boot_id.clone(),
            self.start_ticks,
        )
    }
    fn from_wire((pid, since_ms, boot_id, start_ticks): Self::Wire) -> Self {
        Lease {
            pid,
            since_ms,
            boot_id,
            start_ticks,
            expires_ms: None,
        }
    }
}

#[cfg(test)]
mod tests {
    //! Golden bytes: each record's encoding is fixed by format version 1. A change of the
    //! element order, of an element's type or of the integer forms fails here, whatever the
    //! order of the structs' fields.
    use super::*;

    #[test]
    fn a_lease_of_this_process_is_live_and_mine() {
        let me = Lease::of(std::process::id(), 1);
        assert!(me.is_live());
        assert!(me.clone().is_mine(&me));
        let other = Lease {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        assert!(!other.is_mine(&me));
    }
    use std::fmt::Debug;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    /// `r` encodes to `golden` and `golden` decodes to `r`.
    fn check<T: Record + PartialEq + Debug>(r: &T, golden: &str) -> T {
        assert_eq!(hex(&enc(r)), golden, "encoding of {r:?}");
        let back: T = dec(&unhex(golden)).expect("golden bytes decode");
        assert_eq!(&back, r);
        back
    }

    #[test]
    fn thread_state_golden() {
        check(
            &ThreadState {
                phase: Phase::Paused,
                max_rounds: Some(10),
                failures: 3,
                last_error: Some(StepFailure {
                    time_ms: 1_700_000_000_000,
                    agent: "a".into(),
                    message: "x".into(),
                }),
            },
            // array(4), phase 2, max_rounds 10, failures 3, array(3) [uint64 time, "a", "x"]
            "94020a0393cf0000018bcfe56800a161a178",
        );
        check(
            &ThreadState {
                phase: Phase::Queued,
                ..ThreadState::default()
            },
            "9401c000c0",
        );
    }

    #[test]
    fn removal_golden() {
        use crate::store::records::Removal;
        // array(2), kind, fixstr
        check(&Removal::Thread("T".into()), "9200a154");
        check(&Removal::WorkflowPurged("ab".into()), "9202a26162");
    }

    #[test]
    fn thread_record_golden() {
        let r = check(
            &ThreadRecord {
                head: NodeId(0x0123_4567_89AB_CDEF),
                workflow: Some(NodeId(0xFEDC_BA98_7654_3210)),
                updated_ms: 1_700_000_000_000,
            },
            // array(3), uint64 head, uint64 workflow, uint64 updated_ms
            "93cf0123456789abcdefcffedcba9876543210cf0000018bcfe56800",
        );
        assert_eq!(r.head, NodeId(0x0123_4567_89AB_CDEF));
        assert_eq!(r.workflow, Some(NodeId(0xFEDC_BA98_7654_3210)));
        assert_eq!(r.updated_ms, 1_700_000_000_000);

        let r = check(
            &ThreadRecord {
                head: NodeId(7),
                workflow: None,
                updated_ms: 5,
            },
            // array(3), fixint head, nil, fixint updated_ms
            "9307c005",
        );
        assert_eq!((r.head, r.workflow, r.updated_ms), (NodeId(7), None, 5));
    }

    #[test]
    fn registry_entry_golden() {
        let r = check(
            &RegistryEntry {
                workflow: NodeId(0x0123_4567_89AB_CDEF),
                time_ms: 300,
            },
            // array(2), uint64 workflow, uint16 time_ms
            "92cf0123456789abcdefcd012c",
        );
        assert_eq!(r.workflow, NodeId(0x0123_4567_89AB_CDEF));
        assert_eq!(r.time_ms, 300);
    }

    #[test]
    fn history_entry_golden() {
        let r = check(
            &HistoryEntry {
                thread: "06ABC".into(),
                workflow: crate::model::IdText::parse("W"),
                head: crate::model::IdText::parse("H"),
                completed_at: 70_000,
                reason: crate::model::FinishReason::Completed,
            },
            // array(5), str "06ABC", str "W", str "H", uint32 completed_at, str "completed"
            "95a53036414243a157a148ce00011170a9636f6d706c65746564",
        );
        assert_eq!(r.thread, "06ABC");
        assert_eq!(r.workflow.to_text(), "W");
        assert_eq!(r.head.to_text(), "H");
        assert_eq!(r.completed_at, 70_000);
        assert_eq!(r.reason, crate::model::FinishReason::Completed);
    }

    #[test]
    fn lease_golden() {
        let r = check(
            &Lease {
                pid: 4242,
                since_ms: 200,
                boot_id: "b1".into(),
                start_ticks: 0,
                expires_ms: None,
            },
            // array(4), uint16 pid, uint8 since_ms, str "b1", fixint start_ticks
            "94cd1092ccc8a2623100",
        );
        assert_eq!(r.pid, 4242);
        assert_eq!(r.since_ms, 200);
        assert_eq!(r.boot_id, "b1");
        assert_eq!(r.start_ticks, 0);
    }

    #[test]
    fn a_record_of_another_shape_is_corrupt() {
        // A lease's bytes are not a thread record (4 elements, a string where an id goes).
        let e = dec::<ThreadRecord>(&unhex("94cd1092ccc8a2623100")).unwrap_err();
        assert!(e.to_string().starts_with("corrupt thread record"), "{e}");
        // A thread record with its workflow as a string.
        let e = dec::<ThreadRecord>(&unhex("9307a15705")).unwrap_err();
        assert!(e.to_string().contains("corrupt thread record"), "{e}");
        // Truncated.
        let e = dec::<Lease>(&unhex("94cd1092ccc8a262")).unwrap_err();
        assert!(e.to_string().contains("corrupt lease record"), "{e}");
    }
}
