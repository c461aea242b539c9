//! Where a tmux server runs, as [`Place`]: on this machine (`tmux -L …`), or on
//! an SSH host, reached through the host's control connection (`ssh -S <socket>
//! … tmux -L …`, no tty). Builds the command of a tmux client either way.
//! Imports nothing of the host.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// How to reach a tmux server on an SSH host: through the control connection
/// (ControlMaster) the app keeps to it. Commands go as ssh's remote command;
/// nothing secret is ever in one (input and environments go through the
/// control client's stdin).
#[derive(Debug, Clone)]
pub struct SshPlace {
    /// The host's name, for what the terminals show while the link is down.
    pub label: String,
    /// The control connection's socket (`ssh -S`).
    pub control_socket: PathBuf,
    /// Extra ssh options of the host's config (before the destination).
    pub options: Vec<String>,
    /// The destination, as `ssh` takes it.
    pub destination: String,
    /// The server's settings file on the host, as a word for the host's shell
    /// (it may name `"$HOME"`).
    pub config_word: String,
}

/// Where the server runs.
#[derive(Debug, Clone)]
pub(super) enum Place {
    /// Here: `tmux -L <socket> -f <config>`.
    Local { config: PathBuf },
    /// On an SSH host.
    Ssh(SshPlace),
}

impl Place {
    /// A tmux client of server `socket` running `args`, stdin from nowhere.
    pub(super) fn command(&self, socket: &str, args: &[&str]) -> Command {
        match self {
            Place::Local { config } => {
                let mut command = Command::new("tmux");
                command
                    .arg("-L")
                    .arg(socket)
                    .arg("-f")
                    .arg(config)
                    .args(args)
                    // Never nested in (or confused with) a tmux the app itself runs in.
                    .env_remove("TMUX")
                    .env_remove("TMUX_PANE")
                    .stdin(Stdio::null());
                command
            }
            Place::Ssh(ssh) => {
                // `-u`: the host's locale may not say UTF-8 (ssh passes none);
                // without it tmux would blur its answers' tabs and UTF-8.
                let mut remote = format!(
                    "unset TMUX TMUX_PANE; exec tmux -u -L {} -f {}",
                    word(socket),
                    ssh.config_word
                );
                for arg in args {
                    remote.push(' ');
                    remote.push_str(&word(arg));
                }
                let mut command = Command::new("ssh");
                command
                    .arg("-S")
                    .arg(&ssh.control_socket)
                    .args([
                        "-o",
                        "ControlMaster=no",
                        "-o",
                        "BatchMode=yes",
                        "-o",
                        "LogLevel=QUIET",
                        "-o",
                        "ConnectTimeout=5",
                        "-T",
                    ])
                    .args(&ssh.options)
                    .arg(&ssh.destination)
                    .arg("--")
                    .arg(remote)
                    .stdin(Stdio::null());
                command
            }
        }
    }

    /// The host's name when the server is on an SSH host.
    pub(super) fn remote(&self) -> Option<&str> {
        match self {
            Place::Local { .. } => None,
            Place::Ssh(ssh) => Some(&ssh.label),
        }
    }

    /// Whether a client can be started now: on a host, only through its
    /// control connection (never ssh's fallback to a connection of its own).
    pub(super) fn reachable(&self) -> bool {
        match self {
            Place::Local { .. } => true,
            Place::Ssh(ssh) => ssh.control_socket.exists(),
        }
    }
}

/// `text` as one word for a POSIX shell.
fn word(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%,+".contains(&b))
    {
        return text.to_owned();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_s_tmux_runs_through_the_control_connection() {
        let place = Place::Ssh(SshPlace {
            label: "gpu".into(),
            control_socket: PathBuf::from("/tmp/s"),
            options: vec!["-p".into(), "2222".into()],
            destination: "me@gpu".into(),
            config_word: "\"$HOME\"/.krad-ade/k/tmux.conf".into(),
        });
        let command = place.command("krad-x", &["-C", "attach-session", "-t", "=krad", "it's"]);
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(command.get_program(), "ssh");
        assert_eq!(&args[..2], ["-S", "/tmp/s"]);
        assert!(args.contains(&"ControlMaster=no".to_owned()));
        assert_eq!(
            args.last().unwrap(),
            "unset TMUX TMUX_PANE; exec tmux -u -L krad-x -f \"$HOME\"/.krad-ade/k/tmux.conf -C \
             attach-session -t =krad 'it'\\''s'"
        );
        assert_eq!(place.remote(), Some("gpu"));
    }
}
