//! `krad completions`: shell completion scripts, generated from the command line.

use crate::exit::Exit;

/// Arguments of `krad completions`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  krad completions bash > ~/.local/share/bash-completion/completions/krad\n  \
    krad completions zsh > \"${fpath[1]}/_krad\""
)]
pub struct CompletionsArgs {
    /// The shell to write completions for.
    pub shell: clap_complete::Shell,
}

/// Prints the completion script of `command`, the whole command line (`krad`).
pub fn run(args: CompletionsArgs, mut command: clap::Command) -> anyhow::Result<Exit> {
    clap_complete::generate(args.shell, &mut command, "krad", &mut std::io::stdout());
    Ok(Exit::Success)
}
