//! `uwf limits`: a workflow's concurrency limits and budgets, kept in the store and enforced by
//! every runner and `thread step` that shares it.

use super::output::print_as;
use super::{CliError, CliResult, Env};
use crate::error::ErrorKind;
use crate::query::limits::{LimitsOut, NO_LIMITS, list};
use crate::store::{Budget, WorkflowLimits};
use crate::thread::Config;
use clap::Subcommand;
use serde::Serialize;

/// `uwf limits …`.
#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub(crate) enum LimitsCommand {
    /// Set a workflow's limits and budgets in the store (`*`: every workflow's budgets).
    ///
    /// What is not given stays as it was. They win over `workflows.<name>` of config.yaml, on
    /// every machine whose runners share the store. `*` sets the budgets every workflow has
    /// unless it sets its own.
    Set(SetArgs),
    /// The limits and budgets kept in the store, by workflow name.
    List,
    /// Remove a workflow's limits and budgets from the store.
    Rm {
        /// The workflow's registered name (or `*`).
        name: String,
    },
}

// The arguments of `limits set`.
#[derive(clap::Args, Debug)]
pub(crate) struct SetArgs {
    /// The workflow's registered name, or `*` for the budgets of every workflow without its own.
    name: String,
    /// Threads of it in progress at once.
    #[arg(long)]
    concurrency: Option<u32>,
    /// What a thread started beyond the limit does.
    #[arg(long, value_parser = ["queue", "drop"])]
    overflow: Option<String>,
    /// The most threads waiting (the oldest is dropped beyond it).
    #[arg(long)]
    max_queue: Option<u32>,
    /// Consecutive failed steps after which a thread fails.
    #[arg(long)]
    max_retries: Option<u32>,
    /// The most a thread may spend on models, USD: it is paused before the step after it
    /// reached it.
    #[arg(long, value_name = "USD")]
    max_cost_per_thread: Option<f64>,
    /// The most tokens (input and output) a thread may use.
    #[arg(long, value_name = "N")]
    max_tokens_per_thread: Option<u64>,
    /// The most the workflow's threads may spend in one UTC day, USD: no step of it starts
    /// after it is reached, until the next day or a raise.
    #[arg(long, value_name = "USD")]
    max_cost_per_day: Option<f64>,
}

impl SetArgs {
    fn sets_limits(&self) -> bool {
        self.concurrency.is_some()
            || self.overflow.is_some()
            || self.max_queue.is_some()
            || self.max_retries.is_some()
    }

    fn sets_budget(&self) -> bool {
        self.max_cost_per_thread.is_some()
            || self.max_tokens_per_thread.is_some()
            || self.max_cost_per_day.is_some()
    }

    /// The one-line error of a value out of range.
    fn check(&self) -> CliResult<()> {
        let bad = |m: &str| Err(CliError::of(ErrorKind::User, m));
        if self.concurrency == Some(0) {
            return bad("--concurrency must be at least 1");
        }
        if self.max_retries == Some(0) {
            return bad("--max-retries must be at least 1");
        }
        for (flag, v) in [
            ("--max-cost-per-thread", self.max_cost_per_thread),
            ("--max-cost-per-day", self.max_cost_per_day),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                return bad(&format!("{flag} must be a number of USD, at least 0"));
            }
        }
        if self.name == "*" && self.sets_limits() {
            return bad("\"*\" takes budgets only: set concurrency limits per workflow");
        }
        if !self.sets_limits() && !self.sets_budget() {
            return bad("nothing to set: give a limit or a budget (see uwf limits set --help)");
        }
        Ok(())
    }

    fn apply_limits(&self, l: &mut WorkflowLimits) {
        if let Some(c) = self.concurrency {
            l.concurrency = c;
        }
        if let Some(o) = &self.overflow {
            l.drop = o == "drop";
        }
        if self.max_queue.is_some() {
            l.max_queue = self.max_queue;
        }
        if self.max_retries.is_some() {
            l.max_retries = self.max_retries;
        }
    }

    fn apply_budget(&self, b: &mut Budget) {
        if self.max_cost_per_thread.is_some() {
            b.max_cost_per_thread = self.max_cost_per_thread;
        }
        if self.max_tokens_per_thread.is_some() {
            b.max_tokens_per_thread = self.max_tokens_per_thread;
        }
        if self.max_cost_per_day.is_some() {
            b.max_cost_per_day = self.max_cost_per_day;
        }
    }
}

/// `limits rm`.
#[derive(Serialize)]
struct Removed<'a> {
    workflow: &'a str,
    removed: bool,
}

pub(crate) fn limits(c: LimitsCommand, env: &Env) -> CliResult {
    match c {
        LimitsCommand::Set(a) => set(env, &a),
        LimitsCommand::List => print_as(env.format, &list(&env.open_ro()?)?),
        LimitsCommand::Rm { name } => {
            let s = env.open_rw()?;
            let (l, b) = s.write(|w| {
                Ok((
                    w.set_workflow_limits(&name, None)?,
                    w.set_budget(&name, None)?,
                ))
            })?;
            print_as(
                env.format,
                &Removed {
                    workflow: &name,
                    removed: l.is_some() || b.is_some(),
                },
            )
        }
    }
}

/// `limits set`.
fn set(env: &Env, a: &SetArgs) -> CliResult {
    a.check()?;
    let s = env.open_rw()?;
    let (l, b) = s.write(|w| {
        let mut l = w.set_workflow_limits(&a.name, None)?;
        if a.sets_limits() {
            a.apply_limits(l.get_or_insert(NO_LIMITS));
        }
        if let Some(l) = &l {
            w.set_workflow_limits(&a.name, Some(l))?;
        }
        let mut b = w.set_budget(&a.name, None)?;
        if a.sets_budget() {
            a.apply_budget(b.get_or_insert_default());
        }
        if let Some(b) = b.filter(|b| !b.is_empty()) {
            w.set_budget(&a.name, Some(&b))?;
        }
        Ok((l, b))
    })?;
    if a.max_cost_per_thread.is_some() || a.max_cost_per_day.is_some() {
        warn_unpriced(env);
    }
    print_as(env.format, &LimitsOut::of(&a.name, l.as_ref(), b.as_ref()))
}

/// Warns of the models of config.yaml without a price: a cost budget counts only the costs
/// that are known (a provider's or a CLI's own, or a configured price).
fn warn_unpriced(env: &Env) {
    let Ok(config) = Config::load(&env.root) else {
        return;
    };
    let unpriced = config.unpriced_models();
    if !unpriced.is_empty() {
        eprintln!(
            "warning: no price in config.yaml for {} (models.<name>.price: {{input, output}}, USD per million tokens): a cost budget counts only the costs their providers report; --max-tokens-per-thread counts their tokens",
            unpriced.join(", ")
        );
    }
}
