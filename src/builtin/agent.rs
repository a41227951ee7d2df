//! The in-process interface every built-in agent implements ([`Agent`]), the step it is given
//! ([`Turn`]), and the models it and the extraction's second layer call ([`Models`],
//! [`ModelExtract`]).

use crate::cas::NodeId;
use crate::llm::{Client, Usage};
use crate::store::{ModelCall, Store};
use crate::supervise::{Interrupt, StepError};
use crate::thread::{self, Config, Fallback, ModelSetup, SubmitInput, ThreadId};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Looks up a variable (the environment, then `.env`) for `${VAR}` and `apiKeyEnv` keys.
pub type Vars = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A clock, ms since the epoch.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The models of `config.yaml`, resolved when first needed (a broken model entry matters only
/// to a step that calls a model).
#[derive(Clone)]
pub struct Models {
    pub(super) config: Config,
    vars: Vars,
    /// The clock, ms since the epoch (when a model call was sent).
    now: Clock,
    /// Whether output without valid frontmatter may be extracted by a model (`--no-llm` and
    /// `llmExtract: false` turn it off).
    pub llm_extract: bool,
}

impl Models {
    /// The models of `config`, with keys looked up by `vars`, and the clock.
    pub fn new(config: Config, vars: Vars, now: Clock) -> Models {
        let llm_extract = config.llm_extract();
        Models {
            config,
            vars,
            now,
            llm_extract,
        }
    }

    /// The model of `alias`.
    ///
    /// # Errors
    /// The config error naming what is missing.
    pub fn model(&self, alias: &str) -> Result<ModelSetup, thread::ThreadError> {
        self.config.model(alias, &*self.vars)
    }

    /// The built-in LLM agent's model: `alias`, else the config's agent model.
    ///
    /// # Errors
    /// No model is configured, or its entry is incomplete.
    pub fn agent_model(&self, alias: Option<&str>) -> Result<ModelSetup, thread::ThreadError> {
        let alias = alias
            .map(str::to_string)
            .or_else(|| self.config.agent_model_alias())
            .ok_or_else(|| {
                thread::ThreadError::Config(
                    "no model configured for the LLM agent: run \"uwf setup\" or pass --model"
                        .into(),
                )
            })?;
        self.model(&alias)
    }

    /// The second layer of extraction, when enabled and a model is configured for it.
    pub fn extract(&self) -> Option<ModelExtract> {
        if !self.llm_extract {
            return None;
        }
        let alias = self.config.extract_model_alias()?;
        Some(ModelExtract {
            setup: self.model(&alias).map_err(|e| e.to_string()),
            now: self.now.clone(),
            calls: Mutex::new(Vec::new()),
        })
    }
}

/// The usage record of one call that `setup`'s provider answered in `took`: the cost the
/// provider reported, else the configured price's, else none.
pub(crate) fn model_call(
    setup: &ModelSetup,
    usage: &Usage,
    started_ms: u64,
    took: Duration,
) -> ModelCall {
    let (input, output, cached) = (
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.cached_tokens,
    );
    ModelCall {
        provider: setup.provider.name.clone(),
        model: setup.alias.clone(),
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: cached,
        started_ms,
        duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        cost_usd: usage
            .cost_usd
            .or_else(|| setup.price.map(|p| p.cost(input, output, cached))),
    }
}

/// LLM extraction (the TypeScript tool's `extract.ts` request), with one corrective retry
/// that carries the validation errors.
pub struct ModelExtract {
    setup: Result<ModelSetup, String>,
    now: Clock,
    calls: Mutex<Vec<ModelCall>>,
}

impl ModelExtract {
    /// Sends `req`, keeping the call's usage.
    fn chat(
        &self,
        client: &Client,
        setup: &ModelSetup,
        req: &crate::llm::ChatRequest,
    ) -> Result<crate::llm::ChatReply, String> {
        let (clock, sent) = (Instant::now(), (self.now)());
        let reply = client
            .chat_blocking(&setup.provider, req)
            .map_err(|e| e.to_string())?;
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(model_call(setup, &reply.usage, sent, clock.elapsed()));
        Ok(reply)
    }
}

impl Fallback for ModelExtract {
    fn extract(
        &self,
        schema: &crate::cas::Value,
        raw: &str,
        check: &dyn Fn(&crate::cas::Value) -> Result<(), String>,
    ) -> Result<crate::cas::Value, String> {
        use crate::agent::extract::{corrective_request, extract_request, parse_reply};
        let setup = self.setup.as_ref().map_err(String::clone)?;
        let client = Client::new(setup.options)?;
        let req = extract_request(&setup.model, schema, raw);
        let reply = self.chat(&client, setup, &req)?;
        let why = match parse_reply(&reply.content).and_then(|v| check(&v).map(|()| v)) {
            Ok(v) => return Ok(v),
            Err(why) => why,
        };
        let again = corrective_request(&req, &reply.content, &why);
        let reply = self.chat(&client, setup, &again)?;
        parse_reply(&reply.content)
            .and_then(|v| check(&v).map(|()| v))
            .map_err(|w| {
                format!(
                    "the reply of {} ({}) was refused, also after a corrective retry: {w}",
                    setup.provider.name, setup.model
                )
            })
    }
    fn calls(&self) -> Vec<ModelCall> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// What a built-in agent hands back for its StepNode.
#[derive(Default)]
pub(super) struct Reply<'a> {
    /// The raw output.
    pub raw: &'a str,
    /// Its detail node, stored already or among `nodes`.
    pub detail: Option<NodeId>,
    /// Nodes written with the StepNode (the detail and what it references).
    pub nodes: &'a [crate::store::Prepared],
    /// The prompt the agent was given, kept as a text node.
    pub prompt: Option<&'a str>,
    /// The model calls made or reported.
    pub usage: &'a [ModelCall],
}

/// One step of one thread, as a built-in agent sees it.
pub struct Turn<'a> {
    /// The open store.
    pub store: &'a Store,
    /// The storage root (`cache/` for sessions).
    pub root: &'a Path,
    /// The thread.
    pub thread: &'a ThreadId,
    /// The role the moderator chose.
    pub role: &'a str,
    /// The moderator's rendered prompt for the role.
    pub edge_prompt: Option<&'a str>,
    /// Where the agent works.
    pub cwd: &'a Path,
    /// The clock, ms since the epoch.
    pub now: &'a dyn Fn() -> u64,
    /// The agent's time limit.
    pub timeout: Duration,
    /// Ends a program the agent runs.
    pub interrupt: Option<&'a Interrupt>,
    /// The models.
    pub models: &'a Models,
    /// Variables added to a program's environment.
    pub env: &'a [(String, String)],
    /// The thread as the step that runs the agent has read it (at the head it leases).
    pub moderated: Option<&'a thread::chain::Moderated>,
    /// Where the step's writes wait for its head move (see [`thread::SubmitInput::hold`]).
    pub hold: Option<&'a thread::HeldStep>,
}

impl Turn<'_> {
    /// Writes the StepNode for the agent's reply (both layers of extraction) and returns its
    /// id.
    pub(super) fn submit(
        &self,
        agent: &str,
        started_ms: u64,
        reply: &Reply<'_>,
    ) -> Result<NodeId, StepError> {
        let fallback = self.models.extract();
        let input = SubmitInput {
            thread: self.thread,
            role: self.role,
            raw: reply.raw,
            detail: None,
            detail_id: reply.detail,
            detail_nodes: reply.nodes,
            assembled_prompt: reply.prompt,
            fallback: fallback.as_ref().map(|f| f as &dyn Fallback),
            agent,
            edge_prompt: self.edge_prompt,
            cwd: &self.cwd.display().to_string(),
            started_ms,
            now_ms: (self.now)(),
            usage: reply.usage,
            hold: self.hold,
        };
        let id = match self.moderated {
            Some(m) => thread::kit::submit_moderated(self.store, m, &input)?,
            None => thread::submit(self.store, &input)?,
        };
        Ok(id)
    }

    /// The brief of the role, from the step's reading of the thread when there is one.
    pub(super) fn brief(&self) -> Result<thread::RoleBrief, StepError> {
        Ok(match self.moderated {
            Some(m) => thread::kit::role_brief_moderated(self.store, m, self.role)?,
            None => thread::role_brief(self.store, self.thread, self.role)?,
        })
    }
}

/// An agent that runs inside uwf's process.
pub trait Agent: Send + Sync {
    /// The name recorded in the StepNode's `agent`.
    fn name(&self) -> String;

    /// Whether a run only computes: no program, no network, nothing to wait for (a runner
    /// then runs such steps on a few threads of its own, many one after another).
    fn computes_only(&self) -> bool {
        false
    }

    /// Runs the step and writes its StepNode (prev = the head); returns the StepNode's id.
    /// The head is not moved.
    ///
    /// # Errors
    /// A [`StepError`]: the model or program failed, the output could not be extracted, the
    /// store failed.
    fn run(&self, turn: &Turn<'_>) -> Result<NodeId, StepError>;
}
