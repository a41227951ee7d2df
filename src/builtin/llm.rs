//! `uwf agent llm`: the built-in agent that asks a model. The prompt is assembled as the
//! TypeScript tool's agents assemble it; a reply without valid frontmatter gets up to two
//! corrections, then the model extraction; the conversation is kept as a detail node.

use super::agent::{Agent, Reply, Turn, model_call};
use super::details::{DetailKind, store_detail};
use crate::agent::{self, prompt};
use crate::cas::value::Map;
use crate::cas::{NodeId, Value};
use crate::llm::{ChatRequest, Client, LlmError, Message, Usage};
use crate::supervise::{Interrupt, StepError};
use crate::thread;
use std::time::Instant;

/// How many times a reply without valid frontmatter is sent back for correction.
const CORRECTIONS: usize = 2;

// The arguments of `uwf agent llm` (besides the thread and role).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LlmArgs {
    /// The model alias in config.yaml (default: `modelOverrides.agent`, else `defaultModel`).
    #[arg(long)]
    pub model: Option<String>,
}

/// The built-in LLM agent.
#[derive(Debug, Clone)]
pub struct LlmAgent {
    model: Option<String>,
}

impl LlmAgent {
    /// The agent for `args`.
    pub fn new(args: LlmArgs) -> LlmAgent {
        LlmAgent { model: args.model }
    }
}

/// The detail's `usage`: the replies' tokens added up.
fn usage_field(usage: &Usage) -> Value {
    let mut u = Map::default();
    for (k, n) in [
        ("promptTokens", usage.prompt_tokens),
        ("completionTokens", usage.completion_tokens),
        ("totalTokens", usage.total_tokens),
    ] {
        u.insert(k.into(), Value::Number(n as f64));
    }
    Value::Object(u)
}

impl Agent for LlmAgent {
    fn name(&self) -> String {
        "uwf-llm".into()
    }

    fn run(&self, turn: &Turn<'_>) -> Result<NodeId, StepError> {
        let started_ms = (turn.now)();
        let clock = Instant::now();
        let setup = turn.models.agent_model(self.model.as_deref())?;
        let brief = turn.brief()?;
        let p = prompt::assemble(
            &brief.history,
            turn.role,
            &brief.role,
            &brief.schema,
            turn.edge_prompt,
            false,
        );
        let client = Client::new(setup.options)
            .map_err(|e| StepError::Thread(thread::ThreadError::Invalid(e)))?;
        let mut req = ChatRequest {
            model: setup.model.clone(),
            messages: vec![
                Message::new("system", &p.system),
                Message::new("user", &p.user),
            ],
            json_object: false,
            temperature: None,
        };
        let mut usage = Usage::default();
        let mut calls = Vec::new();
        let mut replies: Vec<String> = Vec::new();
        let mut served_by = setup.model.clone();
        for attempt in 0..=CORRECTIONS {
            let interrupt = turn.interrupt;
            let stop = move || interrupt.and_then(Interrupt::signal).is_some();
            let (sent, sent_ms) = (Instant::now(), (turn.now)());
            let reply = match client.chat_blocking_until(&setup.provider, &req, &stop) {
                Err(LlmError::Cancelled { .. }) => {
                    let signal = turn.interrupt.and_then(Interrupt::signal).unwrap_or(2);
                    return Err(StepError::Interrupted { signal });
                }
                r => r?,
            };
            calls.push(model_call(&setup, &reply.usage, sent_ms, sent.elapsed()));
            usage.prompt_tokens += reply.usage.prompt_tokens;
            usage.completion_tokens += reply.usage.completion_tokens;
            usage.total_tokens += reply.usage.total_tokens;
            if !reply.model.is_empty() {
                served_by = reply.model.clone();
            }
            let content = reply.content.trim_start().to_string();
            let why = match agent::fast_path(&content, &brief.schema, &brief.role.schema.to_wire())
            {
                Ok(_) => None,
                Err(e) => Some(e.to_string().replace('\n', " ")),
            };
            replies.push(content.clone());
            let Some(why) = why else { break };
            if attempt == CORRECTIONS {
                break;
            }
            req.messages.push(Message::new("assistant", content));
            req.messages.push(Message::new(
                "user",
                format!(
                    "Your response must begin with a YAML frontmatter block (--- delimited) matching the role schema. It did not: {why}. Answer again, starting with the frontmatter block."
                ),
            ));
        }
        let mut fields = Map::default();
        fields.insert(
            "sessionId".into(),
            Value::str(thread::ThreadId::generate(started_ms).as_str()),
        );
        fields.insert("model".into(), Value::str(served_by));
        fields.insert(
            "duration".into(),
            Value::Number(clock.elapsed().as_millis() as f64),
        );
        fields.insert("turnCount".into(), Value::Number(replies.len() as f64));
        fields.insert("usage".into(), usage_field(&usage));
        let turns: Vec<(&str, &str)> = replies.iter().map(|r| ("assistant", r.as_str())).collect();
        let detail = store_detail(turn.store, DetailKind::Llm, fields, &turns, (turn.now)())
            .map_err(thread::ThreadError::from)?;
        let last = replies.last().map_or("", String::as_str);
        let reply = Reply {
            raw: last,
            detail: Some(detail),
            usage: &calls,
            ..Reply::default()
        };
        turn.submit(&self.name(), started_ms, &reply)
    }
}
