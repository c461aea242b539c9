//! The command line as clap sees it: global flags and one subcommand per file
//! under `commands/`.

use clap::{CommandFactory, Parser, Subcommand};

use crate::commands;
use crate::connect::ConnectArgs;
use crate::exit::{Exit, exit_codes_help};

/// krad — run many coding agents side by side.
///
/// `krad serve` starts the app in a git repository; the other commands talk to
/// it over its loopback bus (found through KRAD_ADE_* inside the app's terminals;
/// outside them, the app serving the current directory's repository or --repo,
/// else api.json).
#[derive(Debug, Parser)]
#[command(
    name = "krad",
    version,
    after_help = exit_codes_help!(),
    after_long_help = concat!(
        "Examples:\n",
        "  krad serve                  start the app in this repository\n",
        "  krad spawn --profile claude --name fix-login --prompt 'fix the login bug'\n",
        "                              start an agent on a new terminal\n",
        "  krad                        the keyboard home screen (also `krad tui`): the agents\n",
        "                              live, their screens, diffs and asks; ? lists the keys\n",
        "  krad ls                     the agents, their state and last message\n",
        "  krad wait 4 && krad output 4\n",
        "                              wait until terminal 4 stops, then show its screen\n",
        "  krad send 4 'now the docs' --enter --when-idle\n",
        "                              type into terminal 4 once it is idle\n",
        "  krad attach 4               jump into terminal 4's TUI; Ctrl-\\ detaches\n",
        "  krad watch                  a live table of the agents\n",
        "  krad ui                     the app in a browser: board, terminals, asks, diffs\n",
        "  krad subscribe | jq -c .    every change as a JSON line\n",
        "  krad api                    the API version, build and pid the app serves\n",
        "  krad doctor                 what is missing here (agent CLIs, tmux, ...) and what is wrong\n",
        "  krad apps                   every app running here: repository, agents, page\n",
        "  krad ls --repo ~/src/other  the agents of the app serving another repository\n",
        "  krad code -- cargo test -q  run a program in an environment, no terminal\n",
        "  krad conflicts --watch      which environments' work would conflict, kept current\n",
        "  krad gc --merged --dry-run  which merged worktrees could go, and the space they take\n",
        "  krad ext call github search --arg q=krad\n",
        "                              call a tool of an extension (an MCP server)\n",
        "  krad raw '\"Stats\"'          any request as JSON; prints the answer line\n",
        "  krad stop                   stop the app and close its terminals\n\n",
        "Reaching an app by hand (any client command): --repo PATH (the app serving that \
         repository), --endpoint 127.0.0.1:PORT with --token-file PATH (a file holding \
         the token); otherwise KRAD_ADE_* inside a terminal, the app of the current \
         repository, then api.json.\n\n",
        exit_codes_help!()
    ),
    propagate_version = true
)]
pub(crate) struct Cli {
    /// Print one JSON value (a line per message when streaming) instead of text;
    /// an error the app answered is printed as that value (`{"Error":…}`).
    #[arg(long, global = true)]
    pub json: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,

    /// The subcommand; none on a terminal opens the home screen (`krad tui`).
    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    /// Runs the subcommand the command line named.
    pub(crate) fn run(self) -> anyhow::Result<Exit> {
        use commands::*;
        let Cli {
            json,
            connect,
            command,
        } = self;
        let Some(command) = command else {
            return tui::without_a_command(&connect, Cli::command());
        };
        match command {
            Command::Tui(args) => tui::run(args, &connect),
            Command::Serve(args) => serve::run(args.or_repo(connect.repo), json),
            Command::Api(args) => api::run(args, &connect, json),
            Command::Apps(args) => apps::run(args, json),
            Command::Doctor(args) => doctor::run(args, &connect, json),
            Command::Ls(args) => ls::run(args, &connect, json),
            Command::Check(args) => check::run(args, &connect, json),
            Command::Wait(args) => wait::run(args, &connect, json),
            Command::Spawn(args) => spawn::run(args, &connect, json),
            Command::Send(args) => send::run(args, &connect, json),
            Command::Attach(args) => attach::run(args, &connect, json),
            Command::Output(args) => output::run(args, &connect, json),
            Command::Net(args) => net::run(args, &connect, json),
            Command::Close(args) => close::run(args, &connect, json),
            Command::Rename(args) => rename::run(args, &connect, json),
            Command::Ask(args) => ask::run(args, &connect, json),
            Command::Budget(args) => budget::run(args, &connect, json),
            Command::Subscribe(args) => subscribe::run(args, &connect, json),
            Command::Watch(args) => watch::run(args, &connect, json),
            Command::Top(args) => top::run(args, &connect, json),
            Command::Envs(args) => envs::run(args, &connect, json),
            Command::Worktree(args) => worktree::run(args, &connect, json),
            Command::Changes(args) => changes::run(args, &connect, json),
            Command::Conflicts(args) => conflicts::run(args, &connect, json),
            Command::Env(args) => env::run(args, &connect, json),
            Command::Archive(args) => archive::run(args, &connect, json),
            Command::Gc(args) => gc::run(args, &connect, json),
            Command::Variants(args) => variants::run(args, &connect, json),
            Command::Hosts(args) => hosts::run(args, &connect, json),
            Command::Asks(args) => asks::run(args, &connect, json),
            Command::Answer(args) => answer::run(args, &connect, json),
            Command::Durable(args) => durable::run(args, json),
            Command::Report(args) => report::run(args, &connect, json),
            Command::Hook(args) => hook::run(args, &connect, json),
            Command::Code(args) => code::run(args, &connect, json),
            Command::Ext(args) => ext::run(args, &connect, json),
            Command::Raw(args) => raw::run(args, &connect, json),
            Command::Stats(args) => stats::run(args, &connect, json),
            Command::Stop(args) => stop::run(args, &connect, json),
            Command::Ui(args) => ui::run(args, &connect, json),
            Command::Completions(args) => completions::run(args, Cli::command()),
            Command::Internal(args) => internal::run(args),
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Start the app in a git repository and serve the bus (stays in the foreground).
    Serve(commands::serve::ServeArgs),
    /// Show the API version, build and pid of the running app (Hello).
    Api(commands::api::ApiArgs),
    /// List the apps running on this machine: repository, bus, pid, agents, page.
    Apps(commands::apps::AppsArgs),
    /// Show what is missing or wrong: this machine (agent CLIs, tmux, bubblewrap, git), the app, agents whose hooks did not run, hosts whose link is down.
    Doctor(commands::doctor::DoctorArgs),
    /// List the agents: id, name, environment, profile, state and last message (List).
    Ls(commands::ls::LsArgs),
    /// Show one agent's record, now or as soon as it changes (Check).
    Check(commands::check::CheckArgs),
    /// Wait until agents stop working or exit (Wait); exits 9 if one failed.
    Wait(commands::wait::WaitArgs),
    /// Start an agent on a new terminal (Spawn).
    Spawn(commands::spawn::SpawnArgs),
    /// Type text and press keys in an agent's terminal (Send).
    Send(commands::send::SendArgs),
    /// Put this terminal on an agent's terminal, its real TUI, until Ctrl-\ (Attach).
    Attach(commands::attach::AttachArgs),
    /// Print what an agent's terminal shows: scrollback, then screen (Output).
    #[command(alias = "read")]
    Output(commands::output::OutputArgs),
    /// Show what a contained agent tried to reach on the network (Connections).
    Net(commands::net::NetArgs),
    /// Close a terminal, or remove an environment (Close).
    Close(commands::close::CloseArgs),
    /// Give a terminal a new name, or take its name away (Rename).
    Rename(commands::rename::RenameArgs),
    /// From inside a terminal: ask the user a question and print the answer (Ask).
    Ask(commands::ask::AskArgs),
    /// Set what an agent's (or a variant group's) model calls may cost (Budget).
    Budget(commands::budget::BudgetArgs),
    /// Print every change to the agents as JSON lines (SubscribeAgents).
    Subscribe(commands::subscribe::SubscribeArgs),
    /// Show a live table of the agents (SubscribeAgents).
    Watch(commands::watch::WatchArgs),
    /// Open the keyboard home screen: the agents live, their screens, diffs and asks (`krad` alone too).
    Tui(commands::tui::TuiArgs),
    /// Show the agents by the CPU, memory and cost they use, live (List).
    Top(commands::top::TopArgs),
    /// The same as `krad env ls`.
    #[command(hide = true)]
    Envs(commands::envs::EnvsArgs),
    /// The same as `krad env create`.
    #[command(hide = true)]
    Worktree(commands::worktree::WorktreeArgs),
    /// Show what an environment changed since it was created (diffstat or patch).
    Changes(commands::changes::ChangesArgs),
    /// Show which environments' work would conflict, pair by pair and with their base (Conflicts).
    Conflicts(commands::conflicts::ConflictsArgs),
    /// Environments — main and the worktrees: create, ls, close, update.
    Env(commands::env::EnvArgs),
    /// List archived work (`krad archive ls`) and make it an environment again (`krad archive restore NAME`).
    Archive(commands::archive::ArchiveArgs),
    /// Archive and remove worktrees that are merged or old, never those in use (CollectEnvironments).
    Gc(commands::gc::GcArgs),
    /// Run the same task in N worktrees, then pick the best.
    Variants(commands::variants::VariantsArgs),
    /// Show the SSH hosts and their links; `krad hosts check NAME` connects.
    Hosts(commands::hosts::HostsArgs),
    /// List the questions agents are waiting on.
    Asks(commands::asks::AsksArgs),
    /// Answer an agent's question.
    Answer(commands::answer::AnswerArgs),
    /// The durable facet (Collie's phone bridge): `krad durable doctor` checks a socket path.
    Durable(commands::durable::DurableArgs),
    /// Report this terminal's agent state (for hooks and agents inside krad terminals).
    Report(commands::report::ReportArgs),
    /// Turn a Claude Code hook or a Codex notify call into a Report (used by the injected hooks).
    Hook(commands::hook::HookArgs),
    /// Run a program to completion in an environment, without a terminal (Code); exits 9 if it failed.
    Code(commands::code::CodeArgs),
    /// List the extensions (MCP servers) and call their tools (Extensions, ExtensionTool).
    Ext(commands::ext::ExtArgs),
    /// Send any request as JSON and print the answer line(s) as they come.
    Raw(commands::raw::RawArgs),
    /// Show the bus's counters.
    Stats(commands::stats::StatsArgs),
    /// Stop the running app.
    Stop(commands::stop::StopArgs),
    /// Open the app's page in a browser, logged in (prints a one-time login URL).
    Ui(commands::ui::UiArgs),
    /// Print shell completions.
    Completions(commands::completions::CompletionsArgs),
    /// What an app runs on an SSH host through its link (not for you).
    #[command(hide = true)]
    Internal(commands::internal::InternalArgs),
}
