//! `krad completions`: shell completion scripts, generated from the command line.

use crate::exit::Exit;

/// Arguments of `krad completions`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  krad completions bash > ~/.local/share/bash-completion/completions/krad\n  \
    krad completions zsh > \"${fpath[1]}/_krad\""
)]
pub(crate) struct CompletionsArgs {
    /// The shell to write completions for.
    pub shell: clap_complete::Shell,
}

/// Prints the completion script of `command`, the whole command line (`krad`).
/// The script is made whole first: clap_complete panics on a write that
/// fails, and a closed pipe (`| head -1`) must end `krad` quietly.
pub(crate) fn run(args: CompletionsArgs, mut command: clap::Command) -> anyhow::Result<Exit> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "krad", &mut script);
    crate::print::bytes(&script);
    Ok(Exit::Success)
}
