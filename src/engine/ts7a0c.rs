//! The TypeScript tool's agent protocol (`7a0c`): `CMD --thread T --role R --prompt P`, the
//! agent working only on the files under the root. Before it runs, the nodes it reads are
//! exported to `cas/` and the thread's head to `threads.yaml`; after it ends, the node files it
//! wrote are imported (re-hashed and checked as any import), so the StepNode it returns is
//! checked like any other.

use super::adapter::{Adapter, AgentCall};
use super::process::run_program;
use crate::cas::NodeId;
use crate::interchange::agent_root;
use crate::interchange::layout::CAS_DIR;
use crate::interchange::transfer::{self, ImportOptions};
use crate::supervise::{Result, StepError};

/// The TypeScript tool's protocol.
pub(super) struct Ts7a0c;

impl Adapter for Ts7a0c {
    fn run(&self, call: &AgentCall<'_>) -> Result<(NodeId, Vec<String>)> {
        let opts = call.opts;
        let m = call.moderated;
        let head = m.chain.head();
        agent_root::export_reachable(opts.store, opts.root, &[head, m.chain.start_id, m.wf_id])?;
        agent_root::set_thread_head(opts.store, opts.root, opts.thread, head)?;
        let mut env = call.env();
        env.extend([
            (
                "UNCAGED_WORKFLOW_STORAGE_ROOT".to_string(),
                opts.root.display().to_string(),
            ),
            (
                "UNCAGED_CAS_DIR".to_string(),
                opts.root.join(CAS_DIR).display().to_string(),
            ),
        ]);
        let prompt = call.decision.prompt.clone().unwrap_or_default();
        let args = [
            "--thread",
            opts.thread.as_str(),
            "--role",
            &call.decision.role,
            "--prompt",
            &prompt,
        ];
        let id = run_program(call, &args, &env)?;
        let r = transfer::import_new_nodes(
            opts.store,
            opts.root,
            ImportOptions {
                now_ms: (opts.now)(),
                ..ImportOptions::default()
            },
        )?;
        if !opts.store.has(id)? {
            let wire = id.to_wire();
            let message = match r.problems.iter().find(|p| p.contains(&wire)) {
                Some(p) => format!("agent returned {wire}, whose node file was refused: {p}"),
                None => format!(
                    "agent returned {wire}, which is neither in the store nor in {}",
                    opts.root.join(CAS_DIR).display()
                ),
            };
            return Err(StepError::BadOutput {
                command: call.agent.display(),
                message,
            });
        }
        let mut notes: Vec<String> = r.problems.iter().map(|p| format!("note: {p}")).collect();
        notes.extend(r.warnings.iter().map(|w| format!("note: {w}")));
        Ok((id, notes))
    }
}
