//! Terminals on an SSH host that live in tmux there, so that they outlive the
//! link (and the app): what runs where, and the scripts that do it.
//!
//! * **On the host**, each app (one per repository on this machine) has a tmux
//!   server of its own, `tmux -L <name>` with the settings of [`CONFIG`] (no
//!   status line, no prefix, no key bindings: every key goes to the program),
//!   and a folder `~/.krad-ade/<name>/` (0700) for its terminals' files. A
//!   terminal is a detached session `t<id>` running its launcher, which runs
//!   the program and then writes its exit status to `<id>.exit`.
//! * **On this machine**, the terminal is a local terminal running the
//!   re-attach loop ([`attach_loop`]): it waits for the host's control
//!   connection (whose socket it reads from a file the app rewrites each time
//!   the link is up), attaches with `ssh -tt … sh <id>.attach`, and when that
//!   ends asks the host, without a tty, how the session is: still running (the
//!   link dropped: attach again), ended with a status (exit with it), or gone
//!   (the host lost it). tmux redraws the whole screen on attach, so the screen
//!   here is current after each re-attach; its size follows the local PTY's
//!   through ssh.
//! * How the loop ended is written to `<state dir>/remote/<id>.status`
//!   (`exit N` or `gone`), read by the watcher ([`take_end`]): a program's own
//!   exit code 255 is never mistaken for ssh's.
//!
//! No secret is ever in these scripts: the token and the launcher (with the
//! environment) are written through ssh's stdin by the launch.

use std::path::{Path, PathBuf};

use crate::Core;
use crate::hosts::Host;
use crate::profile::shell_quote;

/// The host-side tmux server's settings (it never reads the user's
/// `~/.tmux.conf`). The outer terminal's alternate screen is not used, so the
/// program's output scrolls into the local terminal's scrollback.
pub(crate) const CONFIG: &str = "\
# Written by krad for its own tmux server on this host.
set -g status off
set -g prefix None
set -g prefix2 None
unbind-key -a -T root
unbind-key -a -T prefix
unbind-key -a -T copy-mode
unbind-key -a -T copy-mode-vi
set -s escape-time 0
set -g window-size latest
set -g aggressive-resize on
set -g history-limit 50000
set -g mouse off
set -g automatic-rename off
set -g allow-rename off
set -g set-titles on
set -g set-titles-string '#{pane_title}'
set -g bell-action any
set -g visual-bell off
set -g destroy-unattached off
set -ga terminal-overrides ',*:smcup@:rmcup@'
";

/// How a host terminal's program ended, as its re-attach loop saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RemoteEnd {
    /// It exited with this status (the launcher's `$?`: 128+n for signal n).
    Exit(i32),
    /// Its session is gone without a status (the host restarted, or its tmux
    /// server was killed).
    Gone,
}

/// The name of this app's tmux server and folder on every host: the
/// repository's directory name and a hash of this machine's name and the
/// repository's path, so two apps never share one.
pub(crate) fn app_name(root: &Path) -> String {
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    krad_term::tmux::TmuxHost::server_name(root, Some(machine.trim().as_bytes()))
}

/// The tmux session of terminal `id`.
pub(crate) fn session(id: u64) -> String {
    format!("t{id}")
}

/// `tmux -L <server> -f <dir>/tmux.conf`, quoted for `sh`.
pub(crate) fn tmux_command(server: &str, dir: &str) -> String {
    format!(
        "tmux -L {} -f {}",
        shell_quote(server),
        shell_quote(&format!("{dir}/tmux.conf"))
    )
}

/// The script (run on the host through `sh -s`) that writes the server's
/// settings and starts terminal `id`'s session running its launcher.
pub(crate) fn start_script(server: &str, dir: &str, id: u64, cols: u16, rows: u16) -> String {
    let conf = shell_quote(&format!("{dir}/tmux.conf"));
    format!(
        "umask 077 && mkdir -p {d} && chmod 700 {d} || exit 1\n\
         cat > {conf} <<'KRAD_TMUX_CONF'\n{CONFIG}KRAD_TMUX_CONF\n\
         rm -f -- {exit}\n\
         {tmux} new-session -d -s {session} -x {cols} -y {rows} sh {launcher}\n",
        d = shell_quote(dir),
        exit = shell_quote(&format!("{dir}/{id}.exit")),
        tmux = tmux_command(server, dir),
        session = session(id),
        launcher = shell_quote(&format!("{dir}/{id}.launch")),
    )
}

/// A launcher's lines after its program, when it runs in tmux: the program
/// ran in a subshell (not `exec`ed by the launcher itself), and its status goes
/// to `<id>.exit` (written whole, by a rename) before the session ends.
pub(crate) fn status_tail(dir: &str, id: u64) -> String {
    let exit = format!("{dir}/{id}.exit");
    format!(
        "krad_status=$?\nprintf '%s\\n' \"$krad_status\" > {tmp} && mv -f -- {tmp} {exit}\n\
         exit \"$krad_status\"\n",
        tmp = shell_quote(&format!("{exit}.tmp")),
        exit = shell_quote(&exit),
    )
}

/// The host's attach script for terminal `id` (`<id>.attach`): `sh <it>`
/// attaches to the session while it runs; `sh <it> status` prints `running`,
/// `exit N` or `gone`.
pub(crate) fn attach_script(server: &str, dir: &str, id: u64) -> String {
    let tmux = tmux_command(server, dir);
    let target = format!("={}", session(id));
    let exit = shell_quote(&format!("{dir}/{id}.exit"));
    format!(
        "if [ \"$1\" = status ]; then\n\
         \x20 if {tmux} has-session -t {target} 2>/dev/null; then echo running\n\
         \x20 elif [ -f {exit} ]; then echo \"exit $(cat {exit})\"\n\
         \x20 else echo gone; fi\n\
         \x20 exit 0\n\
         fi\n\
         {tmux} has-session -t {target} 2>/dev/null || exit 0\n\
         exec {tmux} attach-session -t {target}\n"
    )
}

/// What the re-attach loop needs to reach the host.
pub(crate) struct LoopSpec<'a> {
    /// The host's name (for the line shown while the link is down).
    pub host: &'a str,
    /// The file holding the path of the host's control socket.
    pub control_file: &'a Path,
    /// The extra ssh options of the host's config, then its destination.
    pub options: &'a [String],
    pub destination: &'a str,
    /// The attach script on the host.
    pub attach: &'a str,
    /// Where the loop writes how the program ended.
    pub status_file: &'a Path,
}

/// The local terminal's program: `sh -c <loop>` (see the module's doc).
pub(crate) fn attach_loop(spec: &LoopSpec<'_>) -> Vec<String> {
    let mut ssh_words: Vec<String> = spec.options.iter().map(|o| shell_quote(o)).collect();
    ssh_words.push(shell_quote(spec.destination));
    let ssh_words = ssh_words.join(" ");
    let attach = shell_quote(&format!("sh {}", shell_quote(spec.attach)));
    let status = shell_quote(&format!("sh {} status", shell_quote(spec.attach)));
    let script = format!(
        "ctl={ctl}\nst={st}\nrm -f -- \"$st\"\n\
         k() {{ ssh -S \"$(cat \"$ctl\" 2>/dev/null)\" -o ControlMaster=no -o BatchMode=yes -o LogLevel=QUIET {ssh_words} \"$@\"; }}\n\
         down=0\n\
         while :; do\n\
         \x20 if ! ssh -S \"$(cat \"$ctl\" 2>/dev/null)\" -O check {ssh_words} >/dev/null 2>&1; then\n\
         \x20   if [ \"$down\" = 0 ]; then printf '\\r\\n[krad: the link to host %s is down; the program there goes on; re-attaching once it is back]\\r\\n' {host}; down=1; fi\n\
         \x20   sleep 1; continue\n\
         \x20 fi\n\
         \x20 down=0\n\
         \x20 k -tt -- {attach}\n\
         \x20 s=$(k -- {status} </dev/null 2>/dev/null); rc=$?\n\
         \x20 case $s in\n\
         \x20   running) ;;\n\
         \x20   'exit '*) c=${{s#exit }}; printf 'exit %s\\n' \"$c\" > \"$st\"; exit \"$c\" ;;\n\
         \x20   gone) printf 'gone\\n' > \"$st\"; exit 1 ;;\n\
         \x20   *) if [ \"$rc\" != 255 ]; then printf 'gone\\n' > \"$st\"; exit 1; fi; sleep 1 ;;\n\
         \x20 esac\n\
         done\n",
        ctl = shell_quote(&spec.control_file.display().to_string()),
        st = shell_quote(&spec.status_file.display().to_string()),
        host = shell_quote(spec.host),
    );
    vec![
        "sh".to_owned(),
        "-c".to_owned(),
        script,
        "krad-host-terminal".to_owned(),
    ]
}

/// The local side of host terminal `id`, which lives in tmux there: its
/// re-attach loop's argv, working directory and environment (also what a
/// restarted app runs for it).
pub(crate) fn reattach_program(
    core: &Core,
    host: &Host,
    id: u64,
) -> (Vec<String>, PathBuf, Vec<(String, String)>) {
    let attach = format!("{}/{id}.attach", host.tmux_files_dir());
    let status_file = status_file(&core.settings.state_dir, id);
    if let Some(parent) = status_file.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let argv = attach_loop(&LoopSpec {
        host: &host.name,
        control_file: &host.control_file(),
        options: &host.config.options,
        destination: &host.config.ssh,
        attach: &attach,
        status_file: &status_file,
    });
    let env = vec![("TERM".to_owned(), "xterm-256color".to_owned())];
    (argv, core.settings.root.clone(), env)
}

/// Where the re-attach loop of terminal `id` writes how its program ended.
pub(crate) fn status_file(state_dir: &Path, id: u64) -> PathBuf {
    state_dir.join("remote").join(format!("{id}.status"))
}

/// How terminal `id`'s program on a host ended, if its re-attach loop said
/// (the file is removed once read).
pub(crate) fn take_end(state_dir: &Path, id: u64) -> Option<RemoteEnd> {
    let path = status_file(state_dir, id);
    let text = std::fs::read_to_string(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    parse_end(&text)
}

fn parse_end(text: &str) -> Option<RemoteEnd> {
    let text = text.trim();
    if text == "gone" {
        return Some(RemoteEnd::Gone);
    }
    text.strip_prefix("exit ")?
        .trim()
        .parse()
        .ok()
        .map(RemoteEnd::Exit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_are_read_from_the_loop_s_words() {
        assert_eq!(parse_end("exit 0\n"), Some(RemoteEnd::Exit(0)));
        assert_eq!(parse_end("exit 255\n"), Some(RemoteEnd::Exit(255)));
        assert_eq!(parse_end("gone\n"), Some(RemoteEnd::Gone));
        assert_eq!(parse_end("exit \n"), None);
        assert_eq!(parse_end(""), None);
    }

    #[test]
    fn app_names_are_short_and_safe() {
        let name = app_name(Path::new("/srv/my repo!"));
        assert!(name.starts_with("krad-my_repo_-"), "{name}");
        assert_eq!(shell_quote(&name), name);
        assert_ne!(name, app_name(Path::new("/srv/other/my repo!")));
    }

    #[test]
    fn the_status_is_written_whole_after_the_program() {
        assert_eq!(
            status_tail("/h/d", 4),
            "krad_status=$?\nprintf '%s\\n' \"$krad_status\" > /h/d/4.exit.tmp && mv -f -- /h/d/4.exit.tmp /h/d/4.exit\n\
             exit \"$krad_status\"\n"
        );
    }
}
