//! The error of a budget that holds a step back.

/// A budget that a step would go past.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Overrun {
    /// The thread's spend reached its budget: it is paused for it.
    #[error(
        "thread {thread} has spent {spent} of its budget of {budget} (workflow {workflow}); it is paused: raise the budget (\"uwf limits set {workflow} {flag} …\"), then \"uwf thread resume {thread}\""
    )]
    Thread {
        /// The thread.
        thread: String,
        /// Its workflow's name.
        workflow: String,
        /// What it spent, with its unit.
        spent: String,
        /// The budget, with its unit.
        budget: String,
        /// The option that sets the budget.
        flag: &'static str,
    },
    /// The workflow's spend today (UTC) reached its day budget.
    #[error(
        "workflow {workflow} has spent {spent} of its day budget of {budget} today (UTC); no step of it starts before tomorrow or a raise (\"uwf limits set {workflow} --max-cost-per-day …\")"
    )]
    Day {
        /// The workflow's name.
        workflow: String,
        /// What it spent today.
        spent: String,
        /// The budget.
        budget: String,
    },
}
