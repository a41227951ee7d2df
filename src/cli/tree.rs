//! The command tree made as it is used: a process builds only the commands it parses or shows
//! (clap's `defer` on every command enum, and [`Group`] for the command groups), while
//! completions and manual pages get the whole tree exactly as clap builds it when nothing is
//! deferred ([`built`]).

use clap::builder::StyledStr;
use clap::{ArgMatches, Command, FromArgMatches, Subcommand};

/// A command group (`cas`, `thread`, …) as the arguments of a deferred command: its commands
/// are made only when the group is parsed or shown. The same command as a
/// `#[command(subcommand)]` variant, which clap would build with the whole tree.
#[derive(Debug)]
pub(crate) struct Group<T>(pub T);

impl<T: Subcommand> clap::Args for Group<T> {
    fn augment_args(cmd: Command) -> Command {
        // The group's about is its variant's doc comment, set before the group is made here;
        // the enum's own doc comment would replace it.
        let abouts = abouts(&cmd);
        let cmd =
            T::augment_subcommands(cmd.subcommand_required(true).arg_required_else_help(true));
        with_abouts(cmd, abouts)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        let abouts = abouts(&cmd);
        with_abouts(T::augment_subcommands_for_update(cmd), abouts)
    }
}

/// A command's about and long about.
type Abouts = (Option<StyledStr>, Option<StyledStr>);

fn abouts(cmd: &Command) -> Abouts {
    (cmd.get_about().cloned(), cmd.get_long_about().cloned())
}

/// `cmd` with the abouts `a` (none where they are none).
fn with_abouts(cmd: Command, a: Abouts) -> Command {
    let cmd = match a.0 {
        Some(about) => cmd.about(about),
        None => cmd.about(None::<&str>),
    };
    match a.1 {
        Some(long) => cmd.long_about(long),
        None => cmd.long_about(None::<&str>),
    }
}

impl<T: FromArgMatches> FromArgMatches for Group<T> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(m).map(Group)
    }

    fn from_arg_matches_mut(m: &mut ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(m).map(Group)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(m)
    }

    fn update_from_arg_matches_mut(&mut self, m: &mut ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(m)
    }
}

/// What clap's `help` command says of itself.
const HELP_ABOUT: &str = "Print this message or the help of the given subcommand(s)";

/// The whole command tree `cmd` (not built yet), built, for completions and manual pages (never
/// for parsing): what clap builds when nothing is deferred. Two things differ in a plain build of the deferred
/// tree, and are made here as clap makes them without `defer`:
/// - the tree of the `help` command (`uwf help cas get`), which clap copies from the commands
///   before it builds them, when a deferred group has no commands yet: it is copied again once
///   the tree is built;
/// - the order of each command's arguments: a deferred command is given the global options
///   before its own arguments; they are moved after them, before `--help`.
pub(super) fn built(mut cmd: Command) -> Command {
    cmd.build();
    let help = help_tree(&cmd);
    let globals: Vec<String> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.get_id().to_string())
        .collect();
    cmd.mut_subcommands(|sub| {
        if sub.get_name() == "help" {
            help.clone()
        } else {
            globals_last(sub, &globals)
        }
    })
}

/// The `help` command clap adds to the root `built` (built, with its commands), as clap makes
/// it: a copy of each command with its name, about and whether it is hidden, none with
/// `--help`, `--version` or a `help` command of its own, and `help` itself last; with the
/// names clap gives a command when it builds the tree (`uwf help cas`, `uwf-help-cas`), since
/// the root is built already.
fn help_tree(built: &Command) -> Command {
    fn bare(name: &str, parent: (&str, &str)) -> Command {
        Command::new(name.to_string())
            .bin_name(format!("{} {name}", parent.0))
            .display_name(format!("{}-{name}", parent.1))
            .disable_help_flag(true)
            .disable_version_flag(true)
            .disable_help_subcommand(true)
    }
    fn copy(c: &Command, parent: (&str, &str)) -> Command {
        let h = bare(c.get_name(), parent).hide(c.is_hide_set());
        let names = (
            h.get_bin_name().unwrap_or_default().to_string(),
            h.get_display_name().unwrap_or_default().to_string(),
        );
        let mut h = h.subcommands(commands(c).map(|s| copy(s, (&names.0, &names.1))));
        if let Some(about) = c.get_about() {
            h = h.about(about.clone());
        }
        h
    }
    // The commands of `c` without the `help` command clap gave it when it built it.
    fn commands(c: &Command) -> impl Iterator<Item = &Command> {
        c.get_subcommands().filter(|s| s.get_name() != "help")
    }
    let root = (
        built.get_bin_name().unwrap_or(built.get_name()),
        built.get_display_name().unwrap_or(built.get_name()),
    );
    let help = bare("help", root);
    let names = (
        help.get_bin_name().unwrap_or_default().to_string(),
        help.get_display_name().unwrap_or_default().to_string(),
    );
    let under = (names.0.as_str(), names.1.as_str());
    help.about(HELP_ABOUT)
        .subcommands(commands(built).map(|c| copy(c, under)))
        .subcommand(bare("help", under).about(HELP_ABOUT))
}

/// `cmd` and its subcommands with the `globals` and `--help` moved after their own arguments
/// (the `help` command's tree has neither).
fn globals_last(mut cmd: Command, globals: &[String]) -> Command {
    if cmd.get_name() == "help" {
        return cmd;
    }
    for id in globals.iter().map(String::as_str).chain(["help"]) {
        if cmd.get_arguments().any(|a| a.get_id() == id) {
            // Taken out and put back at the end.
            cmd = cmd.mut_arg(id, |a| a);
        }
    }
    cmd.mut_subcommands(|sub| globals_last(sub, globals))
}
