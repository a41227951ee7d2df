//! uwf as a library, without the CLI: open a store, register a workflow, start a thread and
//! run one step with an in-process agent (a scripted reply submitted through the agent kit).
//!
//! `cargo run --example library`

use std::path::Path;
use uwf::agent::Script;
use uwf::store::Store;
use uwf::thread::{self, StartInput, SubmitInput, ThreadId};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("uwf-library-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    };
    let store = Store::open(&dir.join("uwf.redb"))?;

    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let (name, workflow) = thread::register_workflow(&store, &examples.join("debate.yaml"), now())?;
    println!("registered {name} as {workflow}");

    let id = ThreadId::generate(now());
    thread::start(
        &store,
        &StartInput {
            workflow: &name,
            prompt: "Is Rust better than Go?",
            cwd: &dir.display().to_string(),
            search_from: &dir,
            thread: id.clone(),
            now_ms: now(),
        },
    )?;
    let before = thread::show(&store, &id)?;
    let role = before
        .current_role
        .clone()
        .expect("a new thread has a next role");
    println!("thread {id} starts with role {role}");

    // The agent: the first scripted reply of the role, through the agent kit.
    let script = Script::from_yaml(&std::fs::read_to_string(
        examples.join("debate.script.yaml"),
    )?)?;
    let raw = thread::scripted_reply(&store, &id, &role, &script)?;
    let started = now();
    let step = thread::submit(
        &store,
        &SubmitInput {
            thread: &id,
            role: &role,
            raw: &raw,
            detail: None,
            detail_id: None,
            detail_nodes: &[],
            assembled_prompt: None,
            fallback: None,
            agent: "library-example",
            edge_prompt: None,
            cwd: &dir.display().to_string(),
            started_ms: started,
            now_ms: now(),
            usage: &[],
            hold: None,
        },
    )?;
    // Move the head by compare-and-swap.
    let after = uwf::engine::advance(&store, &id, step, now())?;
    println!(
        "step {} done; next role: {}",
        after.head,
        after.current_role.as_deref().unwrap_or("(none)")
    );
    drop(store);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
