//! The in-process interface every built-in agent implements ([`Agent`]), the step it is given
//! ([`Turn`]), and the models it and the extraction's second layer call ([`Models`],
//! [`ModelExtract`]).

use crate::cas::NodeId;
use crate::llm::Client;
use crate::store::Store;
use crate::supervise::{Interrupt, StepError};
use crate::thread::{self, Config, Fallback, ModelSetup, SubmitInput, ThreadId};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Looks up a variable (the environment, then `.env`) for `${VAR}` and `apiKeyEnv` keys.
pub type Vars = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The models of `config.yaml`, resolved when first needed (a broken model entry matters only
/// to a step that calls a model).
#[derive(Clone)]
pub struct Models {
    pub(super) config: Config,
    vars: Vars,
    /// Whether output without valid frontmatter may be extracted by a model (`--no-llm` and
    /// `llmExtract: false` turn it off).
    pub llm_extract: bool,
}

impl Models {
    /// The models of `config`, with keys looked up by `vars`.
    pub fn new(config: Config, vars: Vars) -> Models {
        let llm_extract = config.llm_extract();
        Models {
            config,
            vars,
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
        })
    }
}

/// LLM extraction (the TypeScript tool's `extract.ts` request), with one corrective retry
/// that carries the validation errors.
pub struct ModelExtract {
    setup: Result<ModelSetup, String>,
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
        let reply = client
            .chat_blocking(&setup.provider, &req)
            .map_err(|e| e.to_string())?;
        let why = match parse_reply(&reply.content).and_then(|v| check(&v).map(|()| v)) {
            Ok(v) => return Ok(v),
            Err(why) => why,
        };
        let again = corrective_request(&req, &reply.content, &why);
        let reply = client
            .chat_blocking(&setup.provider, &again)
            .map_err(|e| e.to_string())?;
        parse_reply(&reply.content)
            .and_then(|v| check(&v).map(|()| v))
            .map_err(|w| {
                format!(
                    "the reply of {} ({}) was refused, also after a corrective retry: {w}",
                    setup.provider.name, setup.model
                )
            })
    }
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
}

impl Turn<'_> {
    /// Writes the StepNode for `raw` (both layers of extraction) and returns its id.
    pub(super) fn submit(
        &self,
        raw: &str,
        agent: &str,
        started_ms: u64,
        detail_id: Option<NodeId>,
        detail_nodes: &[crate::store::Prepared],
        assembled_prompt: Option<&str>,
    ) -> Result<NodeId, StepError> {
        let fallback = self.models.extract();
        let input = SubmitInput {
            thread: self.thread,
            role: self.role,
            raw,
            detail: None,
            detail_id,
            detail_nodes,
            assembled_prompt,
            fallback: fallback.as_ref().map(|f| f as &dyn Fallback),
            agent,
            edge_prompt: self.edge_prompt,
            cwd: &self.cwd.display().to_string(),
            started_ms,
            now_ms: (self.now)(),
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

    /// Runs the step and writes its StepNode (prev = the head); returns the StepNode's id.
    /// The head is not moved.
    ///
    /// # Errors
    /// A [`StepError`]: the model or program failed, the output could not be extracted, the
    /// store failed.
    fn run(&self, turn: &Turn<'_>) -> Result<NodeId, StepError>;
}
