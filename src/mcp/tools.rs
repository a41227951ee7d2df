//! The tools and resources of `uwf mcp`, each the CLI command it names.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourceTemplatesResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, RequestMetaObject, ResourceContents,
    ResourceTemplate, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The server: this binary, run once a tool call.
#[derive(Clone)]
pub(crate) struct Uwf {
    exe: PathBuf,
    root: PathBuf,
    allow_commands: bool,
    tool_router: ToolRouter<Self>,
}

/// What a CLI command printed.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// A thread.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct ThreadArg {
    /// The thread id (or a unique prefix of 4+ characters).
    thread: String,
}

/// A workflow.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct WorkflowArg {
    /// A registered name, a workflow file, or a node id.
    workflow: String,
}

/// A workflow to store and register.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct PutArg {
    /// A workflow file (wins over `yaml`).
    path: Option<String>,
    /// The workflow's YAML.
    yaml: Option<String>,
}

/// A thread to start.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct StartArg {
    /// A registered name, a workflow file, or a node id.
    workflow: String,
    /// The task.
    prompt: String,
    /// The thread's working directory (absolute).
    cwd: Option<String>,
}

/// Steps to run.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct StepArg {
    /// The thread.
    thread: String,
    /// The agent: a name under `agents:` of config.yaml or a built-in `uwf agent …` command
    /// (another command only when the server allows commands). Default: the configured one.
    agent: Option<String>,
    /// How many steps, at most (default 1).
    count: Option<u32>,
}

/// A thread's steps from a point.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct ForkArg {
    /// The step (StepNode id) to fork at.
    step: String,
}

/// Threads to list.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct ListArg {
    /// Only threads in this state (queued, idle, running, paused, completed, failed,
    /// cancelled, dropped).
    status: Option<String>,
}

/// Usage to add up.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct UsageArg {
    /// Only this thread's.
    thread: Option<String>,
    /// Only this workflow's.
    workflow: Option<String>,
    /// From this time on: `7d`, `24h`, an ISO date.
    since: Option<String>,
    /// Also by thread, workflow, role, model or day.
    by: Option<String>,
}

/// An agent's view of its step (`thread` and `role` default to `UWF_THREAD` and `UWF_ROLE`).
#[derive(Deserialize, JsonSchema)]
pub(crate) struct ContextArg {
    /// The thread.
    thread: Option<String>,
    /// The role.
    role: Option<String>,
}

/// An agent's output for its step.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct SubmitArg {
    /// The thread (default `UWF_THREAD`).
    thread: Option<String>,
    /// The role (default `UWF_ROLE`).
    role: Option<String>,
    /// The output: frontmatter with the role's fields, then any text.
    output: String,
}

impl Uwf {
    pub(crate) fn new(exe: PathBuf, root: PathBuf, allow_commands: bool) -> Uwf {
        Uwf {
            exe,
            root,
            allow_commands,
            tool_router: Self::tool_router(),
        }
    }

    /// Runs `uwf ARGS` (standard input from `stdin`) off the protocol's thread.
    async fn uwf(&self, args: Vec<String>, stdin: Option<String>) -> Result<Ran, ErrorData> {
        let exe = self.exe.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = Command::new(exe);
            c.args(&args)
                .stdin(if stdin.is_some() {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = c.spawn()?;
            if let (Some(text), Some(mut w)) = (stdin, child.stdin.take()) {
                std::io::Write::write_all(&mut w, text.as_bytes())?;
            }
            let out = child.wait_with_output()?;
            Ok::<_, std::io::Error>(Ran {
                ok: out.status.success(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
        })
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
        .map_err(|e| ErrorData::internal_error(format!("cannot run uwf: {e}"), None))
    }

    /// The tool's answer: the command's JSON output (a list as `{"items": …}`), or its error.
    async fn answer(
        &self,
        args: Vec<String>,
        stdin: Option<String>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer_of(&self.uwf(args, stdin).await?))
    }

    /// [`Uwf::uwf`] for step `i`, telling `progress` every 5 s that it still runs.
    async fn uwf_watched(
        &self,
        args: Vec<String>,
        progress: &Progress,
        i: u32,
    ) -> Result<Ran, ErrorData> {
        let run = self.uwf(args, None);
        tokio::pin!(run);
        let began = std::time::Instant::now();
        loop {
            tokio::select! {
                r = &mut run => return r,
                () = tokio::time::sleep(std::time::Duration::from_secs(5)) => {
                    let secs = began.elapsed().as_secs();
                    progress
                        .say(f64::from(i), format!("step {} running for {secs} s", i + 1))
                        .await;
                }
            }
        }
    }

    /// Whether `agent` may run from a client: a configured agent's name, a built-in
    /// `uwf agent …` command, or anything when commands are allowed.
    fn allowed_agent(&self, agent: &str) -> bool {
        if self.allow_commands {
            return true;
        }
        let words: Vec<&str> = agent.split_whitespace().collect();
        if matches!(words.as_slice(), ["uwf", "agent", ..]) {
            return true;
        }
        crate::thread::Config::load(&self.root)
            .ok()
            .is_some_and(|c| c.agent_names().iter().any(|n| n == agent))
    }
}

/// Where a tool's progress goes: the client's token, if it asked for progress.
struct Progress {
    token: Option<ProgressToken>,
    peer: Peer<RoleServer>,
    total: u32,
}

impl Progress {
    async fn say(&self, done: f64, message: String) {
        if let Some(t) = &self.token {
            let _ = self
                .peer
                .notify_progress(
                    ProgressNotificationParam::new(t.clone(), done)
                        .with_total(f64::from(self.total))
                        .with_message(message),
                )
                .await;
        }
    }
}

/// A command's output as a tool's answer: its JSON (a list as `{"items": …}`), or its error.
fn answer_of(r: &Ran) -> CallToolResult {
    if !r.ok {
        return CallToolResult::error(vec![ContentBlock::text(r.stderr.trim_end().to_string())]);
    }
    let v = match serde_json::from_str::<Value>(r.stdout.trim()) {
        Ok(Value::Array(items)) => json!({ "items": items }),
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => json!({ "value": other }),
        Err(_) => json!({ "text": r.stdout }),
    };
    CallToolResult::structured(v)
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_string()).collect()
}

/// `thread`/`role` of an agent's tool, else the variables uwf gives its agents.
fn from_env(v: Option<String>, var: &str) -> Result<String, ErrorData> {
    v.or_else(|| std::env::var(var).ok().filter(|s| !s.is_empty()))
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!("give it, or set {var} in the server's environment"),
                None,
            )
        })
}

#[tool_router(router = tool_router)]
impl Uwf {
    /// The workflows: registered names and local workflow files.
    #[tool(annotations(read_only_hint = true))]
    async fn workflow_list(&self) -> Result<CallToolResult, ErrorData> {
        self.answer(args(&["workflow", "list"]), None).await
    }

    /// A workflow: its id, name and definition, with its graph as mermaid in `graph`.
    #[tool(annotations(read_only_hint = true))]
    async fn workflow_show(&self, p: Parameters<WorkflowArg>) -> Result<CallToolResult, ErrorData> {
        let mut shown = self
            .answer(args(&["workflow", "show", &p.0.workflow]), None)
            .await?;
        let graph = self
            .uwf(
                args(&["workflow", "show", &p.0.workflow, "--graph", "mermaid"]),
                None,
            )
            .await?;
        if let Some(Value::Object(m)) = shown.structured_content.as_mut()
            && graph.ok
        {
            m.insert("graph".into(), Value::String(graph.stdout));
        }
        Ok(shown)
    }

    /// Checks a workflow file without storing it.
    #[tool(annotations(read_only_hint = true))]
    async fn workflow_validate(
        &self,
        p: Parameters<WorkflowArg>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(args(&["workflow", "validate", &p.0.workflow]), None)
            .await
    }

    /// Stores and registers a workflow, from a file (`path`) or its YAML (`yaml`).
    #[tool]
    async fn workflow_put(&self, p: Parameters<PutArg>) -> Result<CallToolResult, ErrorData> {
        match (p.0.path, p.0.yaml) {
            (Some(path), _) => self.answer(args(&["workflow", "put", &path]), None).await,
            (None, Some(yaml)) => {
                self.answer(args(&["workflow", "put", "-"]), Some(yaml))
                    .await
            }
            (None, None) => Err(ErrorData::invalid_params("give path or yaml", None)),
        }
    }

    /// Starts a thread of a workflow on a task.
    #[tool]
    async fn thread_start(&self, p: Parameters<StartArg>) -> Result<CallToolResult, ErrorData> {
        let mut a = args(&["thread", "start", &p.0.workflow, "-p", &p.0.prompt]);
        if let Some(cwd) = p.0.cwd {
            a.extend(["--cwd".into(), cwd]);
        }
        self.answer(a, None).await
    }

    /// Runs the next step of a thread with its agent; with `count`, up to that many, one at a
    /// time (`{"items": […]}`, a state a step, as `thread step --count` prints them). A client
    /// that asks for progress hears of each step as it ends, and every 5 s of a long one.
    #[tool]
    async fn thread_step(
        &self,
        p: Parameters<StepArg>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut a = args(&["thread", "step", &p.0.thread]);
        if let Some(agent) = p.0.agent {
            if !self.allowed_agent(&agent) {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "agent \"{agent}\" is neither an agent of config.yaml nor a built-in \"uwf agent …\" command\nhint: name an agent of config.yaml, or start \"uwf mcp --allow-commands\""
                ))]));
            }
            a.extend(["--agent".into(), agent]);
        }
        let progress = Progress {
            token: meta.get_progress_token(),
            peer,
            total: p.0.count.unwrap_or(1),
        };
        let Some(count) = p.0.count else {
            return Ok(answer_of(&self.uwf_watched(a, &progress, 0).await?));
        };
        let mut items = Vec::new();
        for i in 0..count {
            let r = self.uwf_watched(a.clone(), &progress, i).await?;
            if !r.ok {
                return Ok(answer_of(&r));
            }
            let state: Value = serde_json::from_str(r.stdout.trim()).unwrap_or(Value::Null);
            let done = state.get("done") == Some(&Value::Bool(true));
            let said = format!("step {} of {count} done", i + 1);
            progress.say(f64::from(i + 1), said).await;
            items.push(state);
            if done {
                break;
            }
        }
        Ok(CallToolResult::structured(json!({ "items": items })))
    }

    /// A thread's state: status, head, the role that runs next.
    #[tool(annotations(read_only_hint = true))]
    async fn thread_show(&self, p: Parameters<ThreadArg>) -> Result<CallToolResult, ErrorData> {
        self.answer(args(&["thread", "show", &p.0.thread]), None)
            .await
    }

    /// A thread as markdown: each prompt and reply (`{"text": …}`).
    #[tool(annotations(read_only_hint = true))]
    async fn thread_read(&self, p: Parameters<ThreadArg>) -> Result<CallToolResult, ErrorData> {
        self.answer(args(&["thread", "read", &p.0.thread]), None)
            .await
    }

    /// A thread's steps, each with its role, agent and output.
    #[tool(annotations(read_only_hint = true))]
    async fn thread_steps(&self, p: Parameters<ThreadArg>) -> Result<CallToolResult, ErrorData> {
        self.answer(args(&["thread", "steps", &p.0.thread]), None)
            .await
    }

    /// The threads, newest first (`status` picks one state).
    #[tool(annotations(read_only_hint = true))]
    async fn thread_list(&self, p: Parameters<ListArg>) -> Result<CallToolResult, ErrorData> {
        let mut a = args(&["thread", "list"]);
        if let Some(s) = p.0.status {
            a.extend(["--status".into(), s]);
        }
        self.answer(a, None).await
    }

    /// Pauses a thread: it takes no new step until resumed.
    #[tool]
    async fn thread_pause(&self, p: Parameters<ThreadArg>) -> Result<CallToolResult, ErrorData> {
        self.answer(args(&["thread", "pause", &p.0.thread]), None)
            .await
    }

    /// Resumes a paused or failed thread.
    #[tool]
    async fn thread_resume(&self, p: Parameters<ThreadArg>) -> Result<CallToolResult, ErrorData> {
        self.answer(args(&["thread", "resume", &p.0.thread]), None)
            .await
    }

    /// Cancels a thread: it ends, and is archived as cancelled.
    #[tool(annotations(destructive_hint = true))]
    async fn thread_cancel(&self, p: Parameters<ThreadArg>) -> Result<CallToolResult, ErrorData> {
        self.answer(args(&["thread", "kill", &p.0.thread]), None)
            .await
    }

    /// Starts a new thread from a step of another (its history up to that step).
    #[tool]
    async fn thread_fork(&self, p: Parameters<ForkArg>) -> Result<CallToolResult, ErrorData> {
        self.answer(args(&["thread", "fork", &p.0.step]), None)
            .await
    }

    /// Model calls, tokens and cost, added up (`by`: thread, workflow, role, model or day).
    #[tool(annotations(read_only_hint = true))]
    async fn usage(&self, p: Parameters<UsageArg>) -> Result<CallToolResult, ErrorData> {
        let mut a = args(&["usage", "--format", "json"]);
        for (flag, v) in [
            ("--thread", p.0.thread),
            ("--workflow", p.0.workflow),
            ("--since", p.0.since),
            ("--by", p.0.by),
        ] {
            if let Some(v) = v {
                a.extend([flag.into(), v]);
            }
        }
        self.answer(a, None).await
    }

    /// For an agent running a role: what it needs for its step (the task, the steps so far,
    /// the role and its output format).
    #[tool(annotations(read_only_hint = true))]
    async fn agent_context(&self, p: Parameters<ContextArg>) -> Result<CallToolResult, ErrorData> {
        let thread = from_env(p.0.thread, "UWF_THREAD")?;
        let role = from_env(p.0.role, "UWF_ROLE")?;
        self.answer(args(&["agent", "context", &thread, &role]), None)
            .await
    }

    /// For an agent running a role: submits its output; the StepNode id as `{"value": …}`.
    #[tool]
    async fn agent_submit(&self, p: Parameters<SubmitArg>) -> Result<CallToolResult, ErrorData> {
        let thread = from_env(p.0.thread, "UWF_THREAD")?;
        let role = from_env(p.0.role, "UWF_ROLE")?;
        let r = self
            .uwf(args(&["agent", "submit", &thread, &role]), Some(p.0.output))
            .await?;
        if !r.ok {
            return Ok(CallToolResult::error(vec![ContentBlock::text(
                r.stderr.trim_end().to_string(),
            )]));
        }
        Ok(CallToolResult::structured(
            json!({ "step": r.stdout.trim() }),
        ))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Uwf {
    fn get_info(&self) -> ServerConfig {
        let mut c = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        );
        c.server_info = Implementation::new("uwf", env!("CARGO_PKG_VERSION"));
        c.instructions = Some(
            "uwf runs multi-agent workflows one step at a time: put a workflow, start a thread, step it until done, read it."
                .into(),
        );
        c
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("uwf://thread/{id}", "thread")
                .with_description("A thread as markdown: each prompt and reply")
                .with_mime_type("text/markdown"),
            ResourceTemplate::new("uwf://workflow/{name}", "workflow")
                .with_description("A workflow's definition as YAML")
                .with_mime_type("application/yaml"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.clone();
        let (a, mime) = if let Some(id) = uri.strip_prefix("uwf://thread/") {
            (args(&["thread", "read", id]), "text/markdown")
        } else if let Some(name) = uri.strip_prefix("uwf://workflow/") {
            (
                args(&["workflow", "show", name, "--format", "yaml"]),
                "application/yaml",
            )
        } else {
            return Err(ErrorData::resource_not_found(
                format!("no such resource: {uri} (uwf://thread/ID, uwf://workflow/NAME)"),
                None,
            ));
        };
        let r = self.uwf(a, None).await?;
        if !r.ok {
            return Err(ErrorData::resource_not_found(
                r.stderr.trim_end().to_string(),
                None,
            ));
        }
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(r.stdout, uri).with_mime_type(mime),
        ])
        .into())
    }
}
