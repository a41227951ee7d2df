//! Model usage and budgets as the store keeps them: one model call ([`ModelCall`]), a step's
//! calls ([`StepCalls`], written by [`StepUsage`]), the aggregates' totals ([`UsageTotals`],
//! rows of [`UsageRow`]) and a workflow's budgets ([`Budget`]), with their fixed encodings
//! (MessagePack arrays, as every record of `records.rs`):
//! - [`ModelCall`]: `[provider, model, input, output, cached input, started_ms, duration_ms,
//!   cost | nil]`
//! - [`StepCalls`]: `[thread, workflow | nil, workflow name, role, day, [call, …]]`
//! - [`UsageTotals`]: `[calls, input, output, cached input, cost, calls with a cost]`, and an
//!   aggregate row of a thread `[workflow | nil, …the totals]`
//! - [`Budget`]: `[max cost a thread | nil, max tokens a thread | nil, max cost a day | nil]`

use super::records::Record;
use crate::cas::NodeId;

/// One model call's usage: a call the built-in LLM agent or the extraction made, or one a
/// coding-agent CLI reported.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    /// The provider's name in `config.yaml` (or the CLI that reported the call).
    pub provider: String,
    /// The model (the name under `models:`, else the model the provider named).
    pub model: String,
    /// Input tokens, cached ones included.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache.
    pub cached_input_tokens: u64,
    /// When the call was sent, ms since the epoch.
    pub started_ms: u64,
    /// How long the call took, ms.
    pub duration_ms: u64,
    /// Its cost in USD: reported by the provider or CLI, else from a configured price; `None`
    /// when neither knows it.
    pub cost_usd: Option<f64>,
}

/// Usage added up.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageTotals {
    /// Model calls.
    pub calls: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cached input tokens.
    pub cached_input_tokens: u64,
    /// The known costs added up, USD.
    pub cost_usd: f64,
    /// The calls whose cost is known.
    pub costed_calls: u64,
}

impl UsageTotals {
    /// Adds one call.
    pub fn add_call(&mut self, c: &ModelCall) {
        self.calls += 1;
        self.input_tokens += c.input_tokens;
        self.output_tokens += c.output_tokens;
        self.cached_input_tokens += c.cached_input_tokens;
        if let Some(cost) = c.cost_usd {
            self.cost_usd += cost;
            self.costed_calls += 1;
        }
    }

    /// Adds other totals.
    pub fn add(&mut self, o: &UsageTotals) {
        self.calls += o.calls;
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cached_input_tokens += o.cached_input_tokens;
        self.cost_usd += o.cost_usd;
        self.costed_calls += o.costed_calls;
    }

    /// The known cost, `None` when no call's cost is known.
    pub fn cost(&self) -> Option<f64> {
        (self.costed_calls > 0).then_some(self.cost_usd)
    }
}

/// One row of the usage aggregate: a thread's calls of one day, role and model.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    /// The thread.
    pub thread: String,
    /// The UTC day, days since 1970-01-01.
    pub day: u32,
    /// The role whose step made the calls.
    pub role: String,
    /// The model.
    pub model: String,
    /// The thread's workflow node, when known.
    pub workflow: Option<NodeId>,
    /// The totals.
    pub totals: UsageTotals,
}

/// The calls of one step, as a write adds them.
#[derive(Debug, Clone, Copy)]
pub struct StepUsage<'a> {
    /// The StepNode the calls belong to.
    pub step: NodeId,
    /// Its thread.
    pub thread: &'a str,
    /// The thread's workflow node.
    pub workflow: Option<NodeId>,
    /// The workflow's name, whose day totals the calls add to.
    pub workflow_name: &'a str,
    /// The role.
    pub role: &'a str,
    /// The calls.
    pub calls: &'a [ModelCall],
    /// The UTC day they count on; `None` for today by the store's clock (the server's on a
    /// server).
    pub day: Option<u32>,
}

/// `calls` added up per model, in the order the models first appear.
pub(crate) fn by_model(calls: &[ModelCall]) -> Vec<(&str, UsageTotals)> {
    let mut out: Vec<(&str, UsageTotals)> = Vec::new();
    for c in calls {
        match out.iter_mut().find(|(m, _)| *m == c.model) {
            Some((_, t)) => t.add_call(c),
            None => {
                let mut t = UsageTotals::default();
                t.add_call(c);
                out.push((&c.model, t));
            }
        }
    }
    out
}

/// Milliseconds in a day.
pub(crate) const DAY_MS: u64 = 86_400_000;

impl Record for ModelCall {
    type Wire = (String, String, u64, u64, u64, u64, u64, Option<f64>);
    const WHAT: &'static str = "model call";
    fn to_wire(&self) -> Self::Wire {
        (
            self.provider.clone(),
            self.model.clone(),
            self.input_tokens,
            self.output_tokens,
            self.cached_input_tokens,
            self.started_ms,
            self.duration_ms,
            self.cost_usd,
        )
    }
    fn from_wire((provider, model, i, o, c, s, d, cost): Self::Wire) -> Self {
        ModelCall {
            provider,
            model,
            input_tokens: i,
            output_tokens: o,
            cached_input_tokens: c,
            started_ms: s,
            duration_ms: d,
            cost_usd: cost,
        }
    }
}

/// A step's calls as kept: whose they are and the day they were counted on.
#[derive(Debug, Clone, PartialEq)]
pub struct StepCalls {
    /// The thread.
    pub thread: String,
    /// The thread's workflow node.
    pub workflow: Option<NodeId>,
    /// The workflow's name.
    pub workflow_name: String,
    /// The role.
    pub role: String,
    /// The UTC day they count on, days since 1970-01-01.
    pub day: u32,
    /// The calls.
    pub calls: Vec<ModelCall>,
}

impl StepCalls {
    /// The record of `u` counted on `day`.
    pub(crate) fn of(u: &StepUsage<'_>, day: u32) -> StepCalls {
        StepCalls {
            thread: u.thread.to_string(),
            workflow: u.workflow,
            workflow_name: u.workflow_name.to_string(),
            role: u.role.to_string(),
            day,
            calls: u.calls.to_vec(),
        }
    }
}

impl Record for StepCalls {
    type Wire = (
        String,
        Option<u64>,
        String,
        String,
        u32,
        Vec<<ModelCall as Record>::Wire>,
    );
    const WHAT: &'static str = "model calls";
    fn to_wire(&self) -> Self::Wire {
        (
            self.thread.clone(),
            self.workflow.map(|w| w.0),
            self.workflow_name.clone(),
            self.role.clone(),
            self.day,
            self.calls.iter().map(Record::to_wire).collect(),
        )
    }
    fn from_wire((thread, workflow, workflow_name, role, day, calls): Self::Wire) -> Self {
        StepCalls {
            thread,
            workflow: workflow.map(NodeId),
            workflow_name,
            role,
            day,
            calls: calls.into_iter().map(ModelCall::from_wire).collect(),
        }
    }
}

impl Record for UsageTotals {
    type Wire = (u64, u64, u64, u64, f64, u64);
    const WHAT: &'static str = "usage totals";
    fn to_wire(&self) -> Self::Wire {
        (
            self.calls,
            self.input_tokens,
            self.output_tokens,
            self.cached_input_tokens,
            self.cost_usd,
            self.costed_calls,
        )
    }
    fn from_wire((calls, i, o, c, cost, costed): Self::Wire) -> Self {
        UsageTotals {
            calls,
            input_tokens: i,
            output_tokens: o,
            cached_input_tokens: c,
            cost_usd: cost,
            costed_calls: costed,
        }
    }
}

/// The value of an aggregate row: the workflow and the totals.
pub(crate) struct TotalsRec(pub(crate) Option<NodeId>, pub(crate) UsageTotals);

impl Record for TotalsRec {
    type Wire = (Option<u64>, u64, u64, u64, u64, f64, u64);
    const WHAT: &'static str = "usage totals";
    fn to_wire(&self) -> Self::Wire {
        let (calls, i, o, c, cost, costed) = self.1.to_wire();
        (self.0.map(|w| w.0), calls, i, o, c, cost, costed)
    }
    fn from_wire((w, calls, i, o, c, cost, costed): Self::Wire) -> Self {
        TotalsRec(
            w.map(NodeId),
            UsageTotals::from_wire((calls, i, o, c, cost, costed)),
        )
    }
}

/// A workflow's budgets (`uwf limits set W --max-cost-per-thread … --max-tokens-per-thread …
/// --max-cost-per-day …`; `*` for the store's defaults, which a workflow's own override field
/// by field).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    /// The most a thread may spend, USD.
    pub max_cost_per_thread: Option<f64>,
    /// The most tokens (input and output) a thread may use.
    pub max_tokens_per_thread: Option<u64>,
    /// The most the workflow's threads may spend in one UTC day, USD.
    pub max_cost_per_day: Option<f64>,
}

impl Budget {
    /// Whether no budget is set.
    pub fn is_empty(&self) -> bool {
        *self == Budget::default()
    }

    /// This budget, its unset fields taken from `defaults`.
    pub fn over(self, defaults: &Budget) -> Budget {
        Budget {
            max_cost_per_thread: self.max_cost_per_thread.or(defaults.max_cost_per_thread),
            max_tokens_per_thread: self
                .max_tokens_per_thread
                .or(defaults.max_tokens_per_thread),
            max_cost_per_day: self.max_cost_per_day.or(defaults.max_cost_per_day),
        }
    }
}

impl Record for Budget {
    type Wire = (Option<f64>, Option<u64>, Option<f64>);
    const WHAT: &'static str = "budget";
    fn to_wire(&self) -> Self::Wire {
        (
            self.max_cost_per_thread,
            self.max_tokens_per_thread,
            self.max_cost_per_day,
        )
    }
    fn from_wire(
        (max_cost_per_thread, max_tokens_per_thread, max_cost_per_day): Self::Wire,
    ) -> Self {
        Budget {
            max_cost_per_thread,
            max_tokens_per_thread,
            max_cost_per_day,
        }
    }
}

/// Which rows of the aggregate `uwf usage` adds up, and how it groups them.
#[derive(Debug, Clone, Copy, Default)]
pub struct UsageQuery<'a> {
    /// One thread's rows.
    pub thread: Option<&'a str>,
    /// The rows of these workflow nodes.
    pub workflows: Option<&'a [NodeId]>,
    /// The rows of this UTC day and later.
    pub from_day: Option<u32>,
    /// Grouped so; one group of everything without.
    pub by: Option<UsageGroup>,
}

/// What `uwf usage --by` groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGroup {
    /// Each thread.
    Thread,
    /// Each workflow node.
    Workflow,
    /// Each role.
    Role,
    /// Each model.
    Model,
    /// Each UTC day.
    Day,
}

/// The key of one group of [`UsageQuery`]'s sums.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupKey {
    /// Everything (no grouping).
    All,
    /// A thread, role or model.
    Text(String),
    /// A workflow node (`None` for rows without one).
    Workflow(Option<NodeId>),
    /// A UTC day.
    Day(u32),
}

/// `rows` added up as `q` asks, in key order: the reference every backend's sums agree with.
pub(crate) fn sum_rows(rows: &[UsageRow], q: &UsageQuery<'_>) -> Vec<(GroupKey, UsageTotals)> {
    let mut out: std::collections::BTreeMap<GroupKey, UsageTotals> = Default::default();
    for r in rows.iter().filter(|r| {
        q.thread.is_none_or(|t| t == r.thread)
            && q.from_day.is_none_or(|d| r.day >= d)
            && q.workflows
                .is_none_or(|ws| r.workflow.is_some_and(|w| ws.contains(&w)))
    }) {
        let key = match q.by {
            None => GroupKey::All,
            Some(UsageGroup::Thread) => GroupKey::Text(r.thread.clone()),
            Some(UsageGroup::Role) => GroupKey::Text(r.role.clone()),
            Some(UsageGroup::Model) => GroupKey::Text(r.model.clone()),
            Some(UsageGroup::Workflow) => GroupKey::Workflow(r.workflow),
            Some(UsageGroup::Day) => GroupKey::Day(r.day),
        };
        out.entry(key).or_default().add(&r.totals);
    }
    out.into_iter().collect()
}
