//! Terminals on an SSH host that live in tmux there, so that they outlive the
//! link (and the app): the host's side of krad-term's tmux host.
//!
//! * **On the host**, each app (one per repository on this machine) has a tmux
//!   server of its own, `tmux -L <name>`, with krad-term's settings for its
//!   tmux host and those of [`CONFIG`] (no status line, no prefix, no key
//!   bindings), and a folder `~/.krad-ade/<name>/` (0700) for its terminals'
//!   files ([`settings_script`] writes the settings there each time the link
//!   is up). A terminal is a window of that server's session `krad` running
//!   its launcher, which runs the program and then writes its exit status to
//!   `<id>.exit`.
//! * **On this machine**, one tmux control client per host carries all of
//!   them: krad-term's [`TmuxHost`](krad_term::TmuxHost) run through the host's
//!   control connection ([`place`]); see its module's doc.
//!
//! No secret is ever in these scripts: the token and the launcher (with the
//! environment) are written through ssh's stdin by the launch.

use std::path::Path;

use crate::config::HostConfig;
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

/// The name of this app's tmux server and folder on every host: the
/// repository's directory name and a hash of this machine's name and the
/// repository's path, so two apps never share one.
pub(crate) fn app_name(root: &Path) -> String {
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    krad_term::tmux::TmuxHost::server_name(root, Some(machine.trim().as_bytes()))
}

/// `tmux -L <server> -f <dir>/tmux.conf`, quoted for `sh`.
pub(crate) fn tmux_command(server: &str, dir: &str) -> String {
    format!(
        "tmux -L {} -f {}",
        shell_quote(server),
        shell_quote(&format!("{dir}/tmux.conf"))
    )
}

/// The script (run on the host through `sh -s`) that writes the settings of
/// this app's tmux server there (`<dir>/tmux.conf`: krad-term's for its tmux
/// host, then [`CONFIG`]) and applies them to the server if it runs.
pub(crate) fn settings_script(server: &str, dir: &str) -> String {
    let conf = shell_quote(&format!("{dir}/tmux.conf"));
    format!(
        "umask 077 && mkdir -p {d} && chmod 700 {d} || exit 1\n\
         cat > {conf}.tmp <<'KRAD_TMUX_CONF'\n{host}{CONFIG}KRAD_TMUX_CONF\n\
         mv -f -- {conf}.tmp {conf} || exit 1\n\
         {tmux} source-file {conf} >/dev/null 2>&1\n\
         exit 0\n",
        d = shell_quote(dir),
        host = krad_term::tmux::TmuxHost::host_settings(server),
        tmux = tmux_command(server, dir),
    )
}

/// Where the app's tmux server on a host is, as krad-term reaches it: through
/// the host's control connection, its settings in the app's folder there.
pub(crate) fn place(
    name: &str,
    config: &HostConfig,
    server: &str,
    control_socket: &Path,
) -> krad_term::tmux::SshPlace {
    krad_term::tmux::SshPlace {
        label: name.to_owned(),
        control_socket: control_socket.to_path_buf(),
        options: config.options.clone(),
        destination: config.ssh.clone(),
        config_word: format!("\"$HOME\"/.krad-ade/{}/tmux.conf", shell_quote(server)),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
